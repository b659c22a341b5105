/*
 * test_fork [FORKS]: fork() while the driver is open and busy (issue 15
 * item 5). Two threads of the parent run sync, async, batch and stream I/O
 * without pause while the main thread forks FORKS (default 12) children
 * (under ASan, between their rounds: see R_FORK_GATE in rel.h).
 * Each child, with a watchdog of its own:
 *   - sees a closed driver: every call fails at once with
 *     OPENDS_DRIVER_NOT_INITIALIZED (sync and async reads through the
 *     parent's handle, stream synchronize, batch status, close), and
 *     opends_driver_backend() is NULL; nothing hangs or crashes;
 *   - opens its own driver, registers the inherited fd again, and moves
 *     bytes through every family, byte-exact; closes, reopens, does it
 *     again, closes; exits 0.
 * The parent checks each child's exit (a child that hangs is killed after
 * 30 s and fails the test), then goes on with its own I/O, byte-exact, and
 * closes cleanly.
 * Backend and accelerator from OPENDS_BACKEND / OPENDS_ACCEL. Exit 0 pass,
 * 1 fail, 77 skip.
 */
#include "rel.h"

#define FSZ (4u << 20)
#define IOSZ 65536u

static char path[PATH_MAX + 32];
static int fd;
static opends_handle_t fh;
static atomic_bool stop;
static atomic_ulong parent_ops;

/* bytes of the file are pattern 1 everywhere; threads only read, or write
 * pattern 1 back, so any read can be checked against it */
static void check(const uint8_t *p, size_t n, uint64_t off, const char *what)
{
	long bad = r_first_bad(p, n, 1, off);
	if (bad >= 0)
		R_FAIL("%s: byte %ld of %zu at offset %llu differs", what, bad, n, (unsigned long long)off);
}

static uint8_t *abuf(size_t n)
{
	void *p;
	if (posix_memalign(&p, 4096, n))
		R_FAIL("posix_memalign");
	return p;
}

/* one round of every family through h: reads checked, writes of the
 * pattern at unaligned offsets */
static void families(opends_handle_t h, uint8_t *mem, uint64_t *seed, const char *who)
{
	uint64_t off = r_rand(seed) % (FSZ - IOSZ);
	size_t n = 1 + r_rand(seed) % IOSZ;
	/* sync write + read */
	r_fill(mem, n, 1, off);
	ssize_t r = opends_sync_write(h, mem, n, (off_t)off, 0);
	R_CHECK(r == (ssize_t)n, "%s: sync write %zd of %zu", who, r, n);
	memset(mem, 0, n);
	r = opends_sync_read(h, mem, n, (off_t)off, 0);
	R_CHECK(r == (ssize_t)n, "%s: sync read %zd of %zu", who, r, n);
	check(mem, n, off, who);
	/* async */
	opends_async_future_t f;
	memset(mem, 0, n);
	R_TRY(opends_async_read(h, mem, n, (off_t)off, 0, &f));
	r = opends_async_await(&f);
	R_CHECK(r == (ssize_t)n, "%s: async read %zd of %zu", who, r, n);
	check(mem, n, off, who);
	/* batch */
	opends_batch_t b;
	R_TRY(opends_batch_setup(&b, 2));
	opends_io_params_t p = t_batch_entry(h, OPENDS_READ, mem, n, (off_t)off, 0, NULL);
	memset(mem, 0, n);
	R_TRY(opends_batch_submit(b, 1, &p, 0));
	opends_io_events_t ev;
	unsigned nr = 1;
	R_TRY(opends_batch_get_status(b, 1, &nr, &ev, NULL));
	R_CHECK(nr == 1 && ev.ret == (ssize_t)n, "%s: batch %u events, ret %zd", who, nr, ev.ret);
	check(mem, n, off, who);
	R_TRY(opends_batch_destroy(b));
	/* stream */
	opends_stream_t s;
	R_TRY(opends_stream_create(&s));
	size_t sz = n;
	off_t fo = (off_t)off, bo = 0;
	ssize_t got = 0;
	memset(mem, 0, n);
	R_TRY(opends_stream_read(h, mem, &sz, &fo, &bo, &got, s));
	R_TRY(opends_stream_synchronize(s));
	R_CHECK(got == (ssize_t)n, "%s: stream read %zd of %zu", who, got, n);
	check(mem, n, off, who);
	R_TRY(opends_stream_destroy(s));
}

static void *busy(void *arg)
{
	uint64_t seed = 77 + (uintptr_t)arg;
	uint8_t *mem = abuf(IOSZ);
	while (!atomic_load(&stop)) {
		families(fh, mem, &seed, "parent thread");
		atomic_fetch_add(&parent_ops, 5);
		r_park_here();
	}
	free(mem);
	return NULL;
}

static void child_watchdog(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: child: watchdog fired (hang after fork)\n";
	if (write(2, m, sizeof m - 1) < 0) {
	}
	_exit(3);
}

#define EXPECT_CLOSED(call)                                                                                \
	do {                                                                                               \
		long r_ = (long)(call);                                                                    \
		if (r_ != OPENDS_DRIVER_NOT_INITIALIZED && r_ != -OPENDS_DRIVER_NOT_INITIALIZED)           \
			R_FAIL("child: %s returned %ld, not DRIVER_NOT_INITIALIZED", #call, r_);          \
	} while (0)

static void child(unsigned i)
{
	signal(SIGALRM, child_watchdog);
	alarm(20);
	r_phase = "child: calls on the parent's driver";
	uint8_t *mem = abuf(IOSZ);
	R_CHECK(opends_driver_backend() == NULL, "child: the driver looks open after fork");
	EXPECT_CLOSED(opends_sync_read(fh, mem, 4096, 0, 0));
	EXPECT_CLOSED(opends_sync_write(fh, mem, 4096, 0, 0));
	opends_async_future_t f;
	EXPECT_CLOSED(opends_async_read(fh, mem, 4096, 0, 0, &f).err);
	EXPECT_CLOSED(opends_stream_synchronize(NULL).err);
	EXPECT_CLOSED(opends_handle_deregister(fh).err);
	EXPECT_CLOSED(opends_driver_close().err);

	uint64_t seed = 1000 + i;
	for (int round = 0; round < 2; round++) {
		r_phase = round ? "child: second open" : "child: own open";
		R_TRY(opends_driver_open());
		opends_handle_t h;
		R_TRY(opends_handle_register(&h, fd));
		if (round == 1)
			R_TRY(opends_buf_register(mem, IOSZ, 0));
		for (int k = 0; k < 4; k++)
			families(h, mem, &seed, "child");
		if (round == 1)
			R_TRY(opends_buf_deregister(mem));
		R_TRY(opends_handle_deregister(h));
		R_TRY(opends_driver_close());
	}
	free(mem);
	_exit(0);
}

int main(int argc, char **argv)
{
	unsigned forks = argc > 1 ? (unsigned)atoi(argv[1]) : 12;
	r_watchdog(200);
	snprintf(path, sizeof(path), "%s/fork", r_tmpdir("fork"));
	atexit(r_rmdir_all);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	R_CHECK(fd >= 0, "open: %s", strerror(errno));
	uint8_t *init = malloc(FSZ);
	r_fill(init, FSZ, 1, 0);
	R_CHECK(pwrite(fd, init, FSZ, 0) == FSZ, "pwrite");
	free(init);
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here", r_backend_env());
	R_TRY(e);
	R_TRY(opends_handle_register(&fh, fd));

	pthread_t t[2];
	for (uintptr_t i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, busy, (void *)i);
	for (unsigned i = 0; i < forks; i++) {
		r_phase = "parent: fork";
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		fflush(NULL);
		if (R_FORK_GATE)
			r_park_busy(2, NULL);
		pid_t pid = fork();
		R_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0)
			child(i);
		r_unpark();
		r_phase = "parent: waiting for a child";
		int st;
		double t0 = r_now();
		pid_t w;
		while ((w = waitpid(pid, &st, WNOHANG)) == 0 && r_now() - t0 < 30) {
			struct timespec s = { 0, 10 * 1000 * 1000 };
			nanosleep(&s, NULL);
		}
		if (w == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			R_FAIL("child %u hung (killed after 30 s)", i);
		}
		if (WIFSIGNALED(st))
			R_FAIL("child %u died of signal %d", i, WTERMSIG(st));
		R_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %u exited %d", i, WEXITSTATUS(st));
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	r_phase = "parent: after the forks";
	uint8_t *mem = abuf(IOSZ);
	uint64_t seed = 5;
	families(fh, mem, &seed, "parent");
	free(mem);
	R_TRY(opends_handle_deregister(fh));
	R_TRY(opends_driver_close());
	close(fd);
	printf("fork: %u children each saw a closed driver and ran their own; parent ran %lu operations alongside\n",
	       forks, atomic_load(&parent_ops));
	return 0;
}
