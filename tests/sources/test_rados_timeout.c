/*
 * test_rados_timeout: a hung OSD (SIGSTOP) fails reads with -ETIMEDOUT
 * within op_timeout + 1 s, while other handles (a file) keep working; after
 * SIGCONT the same handle reads byte-exact again.
 * Needs the cluster of ceph-cluster.sh and its OSD's PID in
 * OPENDS_TEST_CEPH_OSD_PID (skips otherwise). The OSD is always resumed,
 * also when the test fails.
 */
#include "rados_util.h"

#include <pthread.h>
#include <stdatomic.h>

#define OP_TIMEOUT 3
static pid_t osd;

static void resume(void)
{
	if (osd > 0)
		kill(osd, SIGCONT);
}

static void on_signal(int sig)
{
	resume();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* other handles keep working while the OSD hangs */
static opends_handle_t file_fh;
static atomic_int file_reads, file_bad;
static atomic_bool stop_files;

static void *file_reader(void *arg)
{
	(void)arg;
	uint8_t buf[4096], want[4096];
	t_fill(want, 8192, sizeof(want), hashpat);
	while (!atomic_load(&stop_files)) {
		double t0 = t_now();
		ssize_t r = opends_sync_read(file_fh, buf, sizeof(buf), 8192, 0);
		if (r != (ssize_t)sizeof(buf) || memcmp(buf, want, sizeof(buf)) || t_now() - t0 > 1.0)
			atomic_fetch_add(&file_bad, 1);
		atomic_fetch_add(&file_reads, 1);
		usleep(20000);
	}
	return NULL;
}

/* SIGSTOP takes effect a little later than kill returns: wait until every
 * thread of the OSD is stopped (state T), so no request slips through. */
static bool osd_stopped(void)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)osd);
	DIR *d = opendir(dir);
	if (!d)
		return false;
	bool all = true;
	struct dirent *e;
	while (all && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[400], st[256] = "";
		snprintf(p, sizeof(p), "%s/%s/stat", dir, e->d_name);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		if (!fgets(st, sizeof(st), f))
			st[0] = 0;
		fclose(f);
		const char *c = strrchr(st, ')');
		all = c && (c[2] == 'T' || c[2] == 't');
	}
	closedir(d);
	return all;
}

int main(void)
{
	r_setup();
	const char *p = getenv("OPENDS_TEST_CEPH_OSD_PID");
	if (!p || !*p)
		skip("OPENDS_TEST_CEPH_OSD_PID is not set (tests/sources/ceph-cluster.sh osd-pid)");
	osd = (pid_t)atoi(p);
	if (osd <= 0 || kill(osd, 0))
		skip("no OSD process %s to stop", p);
	atexit(resume);
	signal(SIGALRM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGSEGV, on_signal);
	signal(SIGABRT, on_signal);
	t_driver_open();
	alarm(120);

	char name[128], url[512], extra[64], path[PATH_MAX];
	snprintf(name, sizeof(name), "timeout-%s", r_tag);
	size_t size = 2 * T_MiB;
	uint8_t *oracle = t_oracle(size, hashpat), *buf = t_xmalloc(size);
	r_put(name, oracle, size, NULL, false);
	snprintf(extra, sizeof(extra), "op_timeout=%d", OP_TIMEOUT);
	r_url(url, sizeof(url), name, extra);
	opends_handle_t fh = r_open(url, O_RDONLY);
	EXPECT_SSZ(opends_sync_read(fh, buf, size, 0, 0), (ssize_t)size);
	t_path(path, sizeof(path), "other.bin");
	t_write_pattern_file(path, 64 * 1024, hashpat);
	int fd = open(path, O_RDONLY);
	file_fh = t_register(fd);

	t_phase = "OSD stopped";
	pthread_t th;
	pthread_create(&th, NULL, file_reader, NULL);
	CHECK(kill(osd, SIGSTOP) == 0);
	double t0 = t_now();
	while (!osd_stopped() && t_now() - t0 < 5)
		usleep(1000);
	CHECKF(osd_stopped(), "the OSD (pid %d) did not stop within 5 s of SIGSTOP", (int)osd);
	t0 = t_now();
	ssize_t r = opends_sync_read(fh, buf, size, 0, 0);
	double dt = t_now() - t0;
	CHECKF(r == -ETIMEDOUT, "read with the OSD stopped: %zd (%s), want -ETIMEDOUT", r, t_errname(r));
	CHECKF(dt <= OP_TIMEOUT + 1.0, "-ETIMEDOUT after %.2f s; op_timeout is %d s", dt, OP_TIMEOUT);
	printf("OSD stopped: sync read failed with %s after %.2f s (op_timeout %d)\n", t_errname(r), dt, OP_TIMEOUT);
	opends_async_future_t fu;
	t0 = t_now();
	OK(opends_async_read(fh, buf, 4096, 4096, 0, &fu));
	r = opends_async_await(&fu);
	dt = t_now() - t0;
	CHECKF(r == -ETIMEDOUT && dt <= OP_TIMEOUT + 1.0, "async read with the OSD stopped: %zd (%s) after %.2f s", r,
	       t_errname(r), dt);
	/* await names the pool/object and the offset */
	CHECKF(strstr(t_detail(), "opends_async_await: rados://") && strstr(t_detail(), "at offset 4096 failed at offset 4096"),
	       "the async detail does not name the object and offset: %s", t_detail());
	atomic_store(&stop_files, true);
	pthread_join(th, NULL);
	CHECKF(atomic_load(&file_reads) >= 10 && atomic_load(&file_bad) == 0,
	       "file reads while the OSD hung: %d, %d wrong or slower than 1 s", atomic_load(&file_reads),
	       atomic_load(&file_bad));

	t_phase = "OSD resumed";
	CHECK(kill(osd, SIGCONT) == 0);
	t0 = t_now();
	do {
		memset(buf, 0, size);
		r = opends_sync_read(fh, buf, size, 0, 0);
	} while (r == -ETIMEDOUT && t_now() - t0 < 60);
	CHECKF(r == (ssize_t)size, "read after SIGCONT: %zd (%s)", r, t_errname(r));
	VERIFY(buf, oracle, size, "read after the OSD came back");
	printf("OSD resumed: the same handle read %zu bytes byte-exact after %.2f s\n", size, t_now() - t0);
	OK(opends_handle_deregister(fh));
	OK(opends_handle_deregister(file_fh));
	close(fd);
	r_rm(name, NULL, false);
	OK(opends_driver_close());
	free(oracle);
	free(buf);
	return 0;
}
