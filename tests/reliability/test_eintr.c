/*
 * test_eintr [FAULTFS]: signals during I/O. A thread sends SIGUSR1, whose
 * handler does nothing and is installed without SA_RESTART, to every
 * thread of the process (the library's workers included) every ~100 µs,
 * while writes and reads run through every API family; every operation
 * must still return its full size with the right bytes.
 *   part 1: a file in $TMPDIR (signals hit waits: futexes, io_uring_enter)
 *   part 2: with FAULTFS, a faultfs mount whose operations take 2 ms and
 *           answer EINTR when the caller is interrupted (FUSE interrupt;
 *           signals then every 3 ms, so that retries can succeed),
 *           so read(2)/write(2) themselves fail with EINTR and the library
 *           must retry them. Skipped (with a note) where FUSE cannot mount.
 */
#include "rel_mount.h"

#include <dirent.h>
#include <sys/syscall.h>

static atomic_bool stop;
static atomic_ulong signals_sent;
static atomic_ulong handled;
static atomic_uint interval_us = 100;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add_explicit(&handled, 1, memory_order_relaxed);
}

static void *sender(void *arg)
{
	(void)arg;
	pid_t pid = getpid(), self = (pid_t)syscall(SYS_gettid);
	while (!atomic_load(&stop)) {
		DIR *d = opendir("/proc/self/task");
		if (!d)
			break;
		for (struct dirent *e; (e = readdir(d));) {
			pid_t tid = (pid_t)atoi(e->d_name);
			if (tid > 0 && tid != self && syscall(SYS_tgkill, pid, tid, SIGUSR1) == 0)
				atomic_fetch_add(&signals_sent, 1);
		}
		closedir(d);
		usleep(atomic_load(&interval_us));
	}
	return NULL;
}

static unsigned long ops_verified;

static uint8_t *abuf(size_t n)
{
	void *p;
	if (posix_memalign(&p, 4096, n))
		R_FAIL("posix_memalign");
	return p;
}

/* rounds of: write ops through family f, then read them back through it */
static void run(const char *path, unsigned rounds, size_t maxsz)
{
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		R_FAIL("open %s: %s", path, strerror(errno));
	opends_handle_t h;
	R_TRY(opends_handle_register(&h, fd));
	uint64_t seed = 42;
	enum { N = 8 };
	struct r_op w[N], r[N];
	for (unsigned i = 0; i < N; i++) {
		w[i].buf = abuf(maxsz);
		r[i].buf = abuf(maxsz);
	}
	for (unsigned round = 0; round < rounds; round++) {
		enum r_family f = (enum r_family)(round % R_NFAMILIES);
		r_phase = r_family_name[f];
		for (unsigned i = 0; i < N; i++) {
			size_t sz = 1 + r_rand(&seed) % maxsz;
			off_t off = (off_t)(i * maxsz * 2 + r_rand(&seed) % maxsz);
			w[i] = (struct r_op){ .fh = h, .opcode = OPENDS_WRITE, .buf = w[i].buf, .size = sz, .off = off };
			r_fill(w[i].buf, sz, round, (uint64_t)off);
			r[i] = (struct r_op){ .fh = h, .opcode = OPENDS_READ, .buf = r[i].buf, .size = sz, .off = off };
			memset(r[i].buf, 0, sz);
		}
		r_run_ops(f, w, N);
		r_run_ops(f, r, N);
		for (unsigned i = 0; i < N; i++) {
			if (w[i].result != (ssize_t)w[i].size || r[i].result != (ssize_t)r[i].size)
				R_FAIL("%s round %u op %u: wrote %zd, read %zd of %zu", r_family_name[f], round, i,
				       w[i].result, r[i].result, w[i].size);
			long bad = r_first_bad(r[i].buf, r[i].size, round, (uint64_t)r[i].off);
			if (bad >= 0)
				R_FAIL("%s round %u op %u: byte %ld wrong", r_family_name[f], round, i, bad);
			ops_verified += 2;
		}
	}
	for (unsigned i = 0; i < N; i++) {
		free(w[i].buf);
		free(r[i].buf);
	}
	R_TRY(opends_handle_deregister(h));
	close(fd);
}

int main(int argc, char **argv)
{
	r_watchdog(150);
	const char *tmp = r_tmpdir("eintr");
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1; /* no SA_RESTART */
	sigaction(SIGUSR1, &sa, NULL);

	/* fault mount first (before the library's threads exist) */
	char back[PATH_MAX + 16], mnt[PATH_MAX + 16], fpath[PATH_MAX + 32], path[PATH_MAX + 16];
	bool fuse = false;
	snprintf(path, sizeof(path), "%s/data", tmp);
	if (argc > 1) {
		snprintf(back, sizeof(back), "%s/back", tmp);
		snprintf(mnt, sizeof(mnt), "%s/mnt", tmp);
		snprintf(fpath, sizeof(fpath), "%s/data", mnt);
		mkdir(back, 0755);
		pid_t pid = fork(); /* probe in a child: a skip there only ends the probe */
		if (pid == 0) {
			r_dir[0] = '\0';
			m_faultfs_start(argv[1], back, mnt);
			m_unmount();
			_exit(0);
		}
		int st;
		waitpid(pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			m_faultfs_start(argv[1], back, mnt);
			fuse = true;
		} else {
			printf("note: faultfs cannot mount here; part 2 not run\n");
		}
	}

	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here: %s", r_backend_env(), opends_last_error_detail());
	R_TRY(e);
	pthread_t t;
	pthread_create(&t, NULL, sender, NULL);

	double t0 = r_now();
	run(path, 200, 256 * 1024);
	printf("ok   part 1 (%s): %lu operations verified, %lu signals sent in %.1f s\n", r_backend_env(),
	       ops_verified, atomic_load(&signals_sent), r_now() - t0);
	if (fuse) {
		unsigned long before = ops_verified;
		/* each call takes 2 ms; a signal to every thread every 3 ms
		 * interrupts many calls but lets every retry a chance */
		m_ctl("clear; delay 2000; eintr 1");
		atomic_store(&interval_us, 3000);
		t0 = r_now();
		run(fpath, 24, 64 * 1024);
		unsigned long intr = m_stat("interrupted");
		m_ctl("clear");
		printf("ok   part 2 (faultfs): %lu operations verified, %lu filesystem calls answered EINTR, "
		       "%.1f s\n",
		       ops_verified - before, intr, r_now() - t0);
	}
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	R_TRY(opends_driver_close());
	printf("figures: %lu operations verified under %lu signals (%lu handled)\n", ops_verified,
	       atomic_load(&signals_sent), atomic_load(&handled));
	if (atomic_load(&handled) == 0)
		R_FAIL("no signal was delivered");
	return 0;
}
