/*
 * test_thread_signals
 *
 * A signal sent to the process never runs the application's handler on a
 * thread the library started. The main thread blocks SIGUSR1, makes the
 * library start its threads (engine workers by an async read and a batch,
 * the stream dispatcher and hostdev's simulated streams by stream reads,
 * the pool by the driver's open), then sends SIGUSR1 to the process. A
 * library thread that does not block it takes it at once (the kernel gives
 * a process-directed signal to any thread not blocking it); with all of
 * them blocking it the signal waits, pending, until the main thread opens
 * its mask, and the handler then runs there. Every read byte-exact.
 */
#include "common.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#define FSIZE (3 * T_MiB + 77)

static atomic_long handled_on; /* the tid the handler ran on */
static atomic_int handled;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_store(&handled_on, (long)syscall(SYS_gettid));
	atomic_fetch_add(&handled, 1);
}

static void check(const uint8_t *got, const uint8_t *want, size_t n, const char *what)
{
	size_t at;
	if (t_first_diff(got, want, n, &at))
		FAILF("%s: byte %zu differs", what, at);
}

int main(void)
{
	t_watchdog(120);
	long main_tid = (long)syscall(SYS_gettid);
	struct sigaction sa = { 0 };
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	sigset_t usr1, old;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	CHECK(pthread_sigmask(SIG_BLOCK, &usr1, &old) == 0);

	char path[PATH_MAX];
	t_path(path, sizeof path, "sig.bin");
	t_write_pattern_file(path, FSIZE, hashpat);
	uint8_t *oracle = t_oracle(FSIZE, hashpat);

	/* the threads start with the mask the caller has at that moment: give
	 * them an OPEN mask to inherit, as an application that blocks nothing
	 * would, so only the library's own blocking can keep the signal off */
	CHECK(pthread_sigmask(SIG_SETMASK, &old, NULL) == 0);
	t_driver_open(); /* 77 where the backend cannot run */
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	opends_handle_t fh;
	OK(opends_handle_register(&fh, fd));
	size_t n = 1 * T_MiB;
	uint8_t *a = t_xmalloc(n), *b = t_xmalloc(n), *c = t_xmalloc(n);

	opends_async_future_t fut;
	OK(opends_async_read(fh, a, n, 4096 + 3, 0, &fut));
	EXPECT_SSZ(opends_async_await(&fut), (ssize_t)n);
	check(a, oracle + 4096 + 3, n, "async read");

	opends_stream_t st;
	OK(opends_stream_create(&st));
	size_t s1 = n, s2 = n;
	off_t f1 = 1, f2 = 2 * (off_t)T_MiB, b0 = 0;
	ssize_t r1 = -1, r2 = -1;
	/* two reads on one stream: the first reached at once, the second
	 * queued behind it (the dispatcher's) */
	OK(opends_stream_read(fh, b, &s1, &f1, &b0, &r1, st));
	OK(opends_stream_read(fh, c, &s2, &f2, &b0, &r2, st));
	OK(opends_stream_synchronize(st));
	EXPECT_SSZ(r1, (ssize_t)n);
	EXPECT_SSZ(r2, (ssize_t)t_expect_read(FSIZE, (uint64_t)f2, n));
	check(b, oracle + 1, n, "stream read 1");
	check(c, oracle + 2 * T_MiB, (size_t)r2, "stream read 2");

	opends_batch_t bt;
	OK(opends_batch_setup(&bt, 2));
	opends_io_params_t p[2] = { 0 };
	for (int i = 0; i < 2; i++) {
		p[i].mode = OPENDS_BATCH;
		p[i].fh = fh;
		p[i].opcode = OPENDS_READ;
		p[i].u.batch.buf_base = i ? b : a;
		p[i].u.batch.file_offset = (off_t)(i * 65536 + 5);
		p[i].u.batch.buf_offset = 0;
		p[i].u.batch.size = 65536;
	}
	OK(opends_batch_submit(bt, 2, p, 0));
	unsigned nr = 2, done = 0;
	opends_io_events_t ev[2];
	while (done < 2) {
		nr = 2 - done;
		OK(opends_batch_get_status(bt, 1, &nr, ev, NULL));
		for (unsigned i = 0; i < nr; i++)
			EXPECT_SSZ((ssize_t)ev[i].ret, 65536);
		done += nr;
	}
	check(a, oracle + 5, 65536, "batch read 0");
	check(b, oracle + 65536 + 5, 65536, "batch read 1");
	OK(opends_batch_destroy(bt));

	/* the library's threads now exist; the main thread blocks SIGUSR1 and
	 * the process gets one */
	CHECK(pthread_sigmask(SIG_BLOCK, &usr1, NULL) == 0);
	CHECK(kill(getpid(), SIGUSR1) == 0);
	for (int i = 0; i < 200 && !atomic_load(&handled); i++)
		usleep(1000);
	if (atomic_load(&handled))
		FAILF("SIGUSR1 sent to the process ran its handler on thread %ld, not the main thread %ld: "
		      "a library thread does not block asynchronous signals",
		      atomic_load(&handled_on), main_tid);
	CHECK(pthread_sigmask(SIG_UNBLOCK, &usr1, NULL) == 0);
	for (int i = 0; i < 2000 && !atomic_load(&handled); i++)
		usleep(1000);
	CHECK(atomic_load(&handled) == 1);
	CHECK(atomic_load(&handled_on) == main_tid);

	OK(opends_stream_destroy(st));
	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
	free(a);
	free(b);
	free(c);
	free(oracle);
	t_rm_dir();
	printf("ok: a signal sent to the process waited for the main thread\n");
	return 0;
}
