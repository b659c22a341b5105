/*
 * The staging engine's limits and edges (issue 15 items 6, 7, 10, 11), one
 * case per process: test_staging_edges CASE, with OPENDS_BACKEND and
 * OPENDS_ACCEL from the environment.
 *   budget    OPENDS_MAX_PINNED: refused values, a combination that cannot
 *             fit refused at open with a detail, slots taken as needed (a
 *             10-byte read into device memory does not map depth x chunk)
 *   retry     a staging slot that cannot be had fails that read, and the
 *             next read, once memory is back, succeeds (no -ENOMEM till
 *             close)
 *   efault    a cold read into read-only host memory returns -EFAULT, as
 *             pread does, instead of killing the process
 *   truncate  while another thread truncates and extends the file, a read
 *             never writes outside [buf + buf_offset, + returned)
 */
#include "common.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>

static bool device_memory(void)
{
	const char *a = getenv("OPENDS_ACCEL");
	return a && !strcmp(a, "hostdev");
}

/* VmSize in bytes (address space mapped by the process) */
static size_t vm_size(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %zu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

static int make_file(const char *name, size_t size, bool direct, char *path, size_t plen)
{
	t_path(path, plen, name);
	t_write_pattern_file(path, size, hashpat);
	return t_open(path, O_RDWR, direct);
}

static void expect_open_refused(const char *what)
{
	opends_error_t e = opends_driver_open();
	CHECKF(e.err == OPENDS_DRIVER_INVALID_PROPS, "%s: open gave %d (%s), want OPENDS_DRIVER_INVALID_PROPS", what,
	       e.err, t_errname(e.err));
	if (e.err == OPENDS_SUCCESS)
		opends_driver_close();
	const char *d = t_detail();
	CHECKF(strstr(d, "OPENDS_MAX_PINNED") != NULL, "%s: the detail does not name OPENDS_MAX_PINNED: %s", what, d);
}

static void case_budget(void)
{
	t_phase = "values";
	const char *bad[] = { "0", "-1", "12x", "4k1", "1t", "99999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		setenv("OPENDS_MAX_PINNED", bad[i], 1);
		expect_open_refused(bad[i]);
	}

	t_phase = "cannot fit";
	/* two workers of 1 GiB chunks: 2 GiB, above a 64 MiB budget */
	setenv("OPENDS_IO_THREADS", "2", 1);
	setenv("OPENDS_QUEUE_DEPTH", "4096", 1);
	setenv("OPENDS_CHUNK_SIZE", "1g", 1);
	setenv("OPENDS_MAX_PINNED", "64m", 1);
	expect_open_refused("1g chunks, 2 workers, 64m budget");

	t_phase = "lazy slots";
	/* 16 x 64 MiB per worker would be 1 GiB each; a 10-byte read takes
	 * one slot */
	setenv("OPENDS_QUEUE_DEPTH", "16", 1);
	setenv("OPENDS_CHUNK_SIZE", "64m", 1);
	setenv("OPENDS_MAX_PINNED", "4g", 1);
	char path[PATH_MAX];
	int fd = make_file("budget.bin", 1 << 20, false, path, sizeof(path));
	t_driver_open();
	opends_handle_t fh = t_register(fd);
	uint8_t buf[64];
	memset(buf, T_CANARY, sizeof(buf));
	size_t before = vm_size();
	ssize_t r = opends_sync_read(fh, buf, 10, 12345, 0);
	size_t after = vm_size();
	CHECKF(r == 10, "10-byte read: %zd", r);
	for (size_t i = 0; i < 10; i++)
		CHECKF(buf[i] == hashpat(12345 + i), "byte %zu differs", i);
	CHECKF(buf[10] == T_CANARY, "a byte past the count was written");
	CHECKF(after < before + ((size_t)256 << 20), "a 10-byte read mapped %zu MiB", (after - before) >> 20);
	printf("10-byte read: %zu MiB more mapped\n", (after - before) >> 20);

	t_phase = "over the budget at once";
	/* 2 workers x 64 MiB chunks in a 128m budget: the default depth is cut
	 * to what fits (1), and reads still work */
	opends_handle_deregister(fh);
	opends_driver_close();
	setenv("OPENDS_MAX_PINNED", "128m", 1);
	setenv("OPENDS_IO_THREADS", "2", 1);
	unsetenv("OPENDS_QUEUE_DEPTH");
	t_driver_open();
	fh = t_register(fd);
	size_t n = 1 << 20;
	uint8_t *big = t_xmalloc(n);
	r = opends_sync_read(fh, big, n, 0, 0);
	CHECKF(r == (ssize_t)n, "1 MiB read with 64 MiB chunks in a 128m budget: %zd", r);
	for (size_t i = 0; i < n; i++)
		if (big[i] != hashpat(i)) {
			FAILF("byte %zu differs", i);
			break;
		}
	free(big);
	opends_handle_deregister(fh);
	opends_driver_close();
	close(fd);
}

static void case_retry(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	skip("address-space limits and sanitizers do not mix");
#endif
	if (!device_memory())
		skip("needs staging slots: run with OPENDS_ACCEL=hostdev");
	setenv("OPENDS_IO_THREADS", "1", 1);
	setenv("OPENDS_QUEUE_DEPTH", "2", 1);
	setenv("OPENDS_CHUNK_SIZE", "256m", 1);
	setenv("OPENDS_INLINE_MAX", "0", 1); /* the engine, whose slot is what fails */
	char path[PATH_MAX];
	size_t n = 1 << 20;
	int fd = make_file("retry.bin", n, false, path, sizeof(path));
	t_driver_open();
	opends_handle_t fh = t_register(fd);
	uint8_t *buf = t_xmalloc(n);

	t_phase = "no memory";
	struct rlimit old, low;
	if (getrlimit(RLIMIT_AS, &old))
		skip("getrlimit: %s", strerror(errno));
	low = old;
	low.rlim_cur = vm_size() + ((size_t)64 << 20);
	if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < low.rlim_cur)
		skip("RLIMIT_AS is already low");
	if (setrlimit(RLIMIT_AS, &low))
		skip("setrlimit: %s", strerror(errno));
	ssize_t r = opends_sync_read(fh, buf, n, 0, 0);
	setrlimit(RLIMIT_AS, &old);
	CHECKF(r == -ENOMEM, "read with no room for a 256 MiB slot: %zd, want -ENOMEM", r);

	t_phase = "memory back";
	memset(buf, 0, n);
	r = opends_sync_read(fh, buf, n, 0, 0);
	CHECKF(r == (ssize_t)n, "read once memory is back: %zd (%s)", r, r < 0 ? t_errname(r) : "");
	for (size_t i = 0; r == (ssize_t)n && i < n; i++)
		if (buf[i] != hashpat(i)) {
			FAILF("byte %zu differs", i);
			break;
		}
	free(buf);
	opends_handle_deregister(fh);
	opends_driver_close();
	close(fd);
}

static void case_efault(void)
{
	if (device_memory())
		skip("host memory only");
	char path[PATH_MAX];
	size_t n = 256 << 10;
	int fd = make_file("efault.bin", n, true, path, sizeof(path));
	if (fd == -2)
		skip("no O_DIRECT here");
	t_driver_open();
	opends_handle_t fh = t_register(fd);
	long page = sysconf(_SC_PAGESIZE);
	size_t len = n + (size_t)page;
	char *ro = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	/* cold, and not aligned with the file: the read goes through a slot */
	for (int i = 0; i < 3; i++) {
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		ssize_t r = opends_sync_read(fh, ro, 100000, 4096 + 100 * i, 8);
		CHECKF(r == -EFAULT, "read into read-only memory: %zd, want -EFAULT", r);
	}
	/* the handle still works */
	char *buf = t_xmalloc(n);
	ssize_t r = opends_sync_read(fh, buf, n, 0, 0);
	CHECKF(r == (ssize_t)n, "read after: %zd", r);
	free(buf);
	munmap(ro, len);
	opends_handle_deregister(fh);
	opends_driver_close();
	close(fd);
}

static atomic_bool stop_flip;
static int flip_fd;
#define FLIP_SIZE ((size_t)256 << 10)

static void *flipper(void *arg)
{
	uint8_t *data = arg;
	unsigned k = 0;
	while (!atomic_load(&stop_flip)) {
		if (ftruncate(flip_fd, (off_t)((k++ * 40961u) % FLIP_SIZE)) < 0)
			break;
		sched_yield();
		if (pwrite(flip_fd, data, FLIP_SIZE / 2, 0) != (ssize_t)FLIP_SIZE / 2)
			break;
		if (pwrite(flip_fd, data, FLIP_SIZE, 0) != (ssize_t)FLIP_SIZE)
			break;
	}
	return NULL;
}

static void case_truncate(void)
{
	setenv("OPENDS_CHUNK_SIZE", "8k", 1);
	setenv("OPENDS_IO_THREADS", "4", 1);
	char path[PATH_MAX];
	flip_fd = make_file("flip.bin", FLIP_SIZE, false, path, sizeof(path));
	t_driver_open();
	opends_handle_t fh = t_register(flip_fd);
	uint8_t *data = t_xmalloc(FLIP_SIZE);
	t_fill(data, 0, FLIP_SIZE, hashpat);
	size_t slack = 64 << 10, bo = 100;
	uint8_t *buf = t_xmalloc(FLIP_SIZE + slack);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, flipper, data) == 0);
	unsigned bad = 0, reads = 0;
	double t0 = t_now();
	while (t_now() - t0 < 3.0 && bad == 0) {
		memset(buf, T_CANARY, FLIP_SIZE + slack);
		size_t size = FLIP_SIZE - 4096;
		ssize_t r = opends_sync_read(fh, buf, size, 0, (off_t)bo);
		reads++;
		if (r < 0) {
			FAILF("read: %zd", r);
			break;
		}
		size_t at;
		if (t_first_not(buf, bo, T_CANARY, &at) ||
		    t_first_not(buf + bo + (size_t)r, FLIP_SIZE + slack - bo - (size_t)r, T_CANARY, &at)) {
			bad++;
			FAILF("a read that returned %zd wrote outside [buf + %zu, + %zd)", r, bo, r);
		}
		for (size_t i = 0; i < (size_t)r; i++)
			if (buf[bo + i] != hashpat(i) && buf[bo + i] != 0) {
				FAILF("byte %zu of %zd is neither the file's nor a hole's", i, r);
				break;
			}
	}
	atomic_store(&stop_flip, true);
	pthread_join(t, NULL);
	printf("%u reads while the file was cut and regrown\n", reads);
	free(buf);
	free(data);
	opends_handle_deregister(fh);
	opends_driver_close();
	close(flip_fd);
}

int main(int argc, char **argv)
{
	const char *c = t_args(argc, argv);
	t_watchdog(120);
	if (!c)
		c = "";
	if (!strcmp(c, "budget"))
		case_budget();
	else if (!strcmp(c, "retry"))
		case_retry();
	else if (!strcmp(c, "efault"))
		case_efault();
	else if (!strcmp(c, "truncate"))
		case_truncate();
	else {
		fprintf(stderr, "usage: test_staging_edges budget|retry|efault|truncate\n");
		return 1;
	}
	t_rm_dir();
	printf("ok %s\n", c);
	return 0;
}
