/*
 * test_batch_submit: a batch is submitted to the kernel in groups, not one
 * io_uring_enter per entry (issue 17, "batches submit once").
 *
 * uring with one worker of 64 units, a hot file, 64 entries of 4 KiB in
 * one opends_batch_submit: the worker is woken once all are queued
 * (ods_stage_submit_many), the reads wait in its submission queue while
 * more are queued, and go in one io_uring_enter (SMALL GROUPS in
 * src/backends/uring/uring.c: up to 256 KiB a group; a worker holds at
 * most OPENDS_QUEUE_DEPTH reads, so by default a group every 16).
 * Counted by the backend's counter of submitting io_uring_enter calls
 * (this program links the library's objects to read it): at most N / 8,
 * a group or two plus resubmissions under load. For contrast,
 * and to show the counter counts, the same 64 reads as synchronous calls
 * through the engine (OPENDS_INLINE_MAX=0) take one call each. Data
 * byte-exact in both. Host memory and the simulated device (hostdev):
 * OPENDS_ACCEL from the environment.
 */
#include "common.h"

#include <stdatomic.h>

extern atomic_ulong ods_uring_submits;

#define N 64u
#define PIECE ((size_t)4096)
#define FSIZE (N * PIECE * 2)

static unsigned long submits(void)
{
	return atomic_load(&ods_uring_submits);
}

static void check(const uint8_t *mem, const uint8_t *oracle, const char *what)
{
	for (unsigned i = 0; i < N; i++) {
		size_t at;
		/* entry i read file offset (2i+1) x 4 KiB into mem + i x 4 KiB */
		if (t_first_diff(mem + i * PIECE, oracle + (2 * i + 1) * PIECE, PIECE, &at))
			FAILF("%s: entry %u: byte %zu differs", what, i, at);
	}
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(120);
	setenv("OPENDS_BACKEND", "uring", 1);
	setenv("OPENDS_IO_THREADS", "1", 1);
	/* asleep when idle, so it does not take entries as they come: the
	 * workers are woken once the whole batch is queued */
	setenv("OPENDS_IDLE_SPIN", "0", 1);
	/* units for all of it at once (with the default 16 a worker holds
	 * 16 reads at a time: a group each 16) */
	setenv("OPENDS_QUEUE_DEPTH", "64", 1);

	char path[PATH_MAX];
	t_path(path, sizeof(path), "batch_submit.bin");
	uint8_t *oracle;
	int fd = t_hot_file(path, FSIZE, hashpat, &oracle);

	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED) {
		printf("SKIP: uring does not run here: %s\n", opends_last_error_detail());
		return T_SKIP;
	}
	OK(e);
	opends_handle_t fh = t_register(fd);
	uint8_t *mem = t_xmalloc(N * PIECE);

	/* the batch: one submit of 64 small reads */
	opends_batch_t b;
	OK(opends_batch_setup(&b, N));
	opends_io_params_t p[N];
	for (unsigned i = 0; i < N; i++)
		p[i] = t_batch_entry(fh, OPENDS_READ, mem, PIECE, (off_t)((2 * i + 1) * PIECE), (off_t)(i * PIECE),
				     (void *)(uintptr_t)i);
	memset(mem, T_CANARY, N * PIECE);
	unsigned long s0 = submits();
	OK(opends_batch_submit(b, N, p, 0));
	opends_io_events_t ev[N];
	t_batch_collect(b, N, ev, 30);
	unsigned long batch_calls = submits() - s0;
	for (unsigned i = 0; i < N; i++)
		CHECKF(ev[i].status == OPENDS_COMPLETE && ev[i].ret == (ssize_t)PIECE, "event %u: status %d ret %zd", i,
		       (int)ev[i].status, (ssize_t)ev[i].ret);
	check(mem, oracle, "batch");
	OK(opends_batch_destroy(b));
	OK(opends_handle_deregister(fh));
	OK(opends_driver_close());

	/* the same reads one synchronous call at a time, through the engine */
	setenv("OPENDS_INLINE_MAX", "0", 1);
	t_driver_open();
	fh = t_register(fd);
	memset(mem, T_CANARY, N * PIECE);
	s0 = submits();
	for (unsigned i = 0; i < N; i++)
		CHECKF(opends_sync_read(fh, mem, PIECE, (off_t)((2 * i + 1) * PIECE), (off_t)(i * PIECE)) ==
			       (ssize_t)PIECE,
		       "sync read %u", i);
	unsigned long sync_calls = submits() - s0;
	check(mem, oracle, "sync");
	OK(opends_handle_deregister(fh));
	OK(opends_driver_close());
	close(fd);

	printf("io_uring_enter calls that submitted I/O: batch of %u x 4 KiB: %lu; %u sync reads: %lu\n", N,
	       batch_calls, N, sync_calls);
	CHECKF(sync_calls >= N, "%u synchronous reads through the engine counted %lu submissions (the counter is off)", N,
	       sync_calls);
	/* One group of 256 KiB and the worker's wake-up read re-armed after
	 * it (a call of its own when the group went before): 1-2 calls on a
	 * quiet machine. Under load a read the kernel answers EAGAIN or
	 * EINTR is resubmitted (MAX_RETRY in uring.c), each a call more, so
	 * the bound is what tells groups from one call per entry (64): at
	 * most N / 8. */
	CHECKF(batch_calls <= N / 8,
	       "a batch of %u small reads took %lu io_uring_enter calls (want grouped: <= %u; one per entry is %u)", N,
	       batch_calls, N / 8, N);
	free(mem);
	free(oracle);
	t_rm_dir();
	printf("OK\n");
	return 0;
}
