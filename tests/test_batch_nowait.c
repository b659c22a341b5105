/*
 * test_batch_nowait: a batch's submit waits for room in the engine's queue
 * only past 8 times the bytes a single submit may queue (BATCH_ROOM in
 * src/core/stage_queue.c); under the A/B switch OPENDS_AB_BATCH_NOWAIT=0
 * as a single submit does, under =1 never. OPENDS_BATCH_STATS=1 counts
 * what the callers did (src/core/batch.c).
 *
 * uring with one worker of one 4 KiB unit: the queue takes one request
 * (threads x depth) unless its bytes stay below 4 KiB, so waiting for room
 * means each entry is queued only once the one before it was started.
 * 4096 entries of 8 KiB (two chunks each), then opends_batch_cancel at
 * once, which finishes the entries not yet started as OPENDS_CANCELED:
 * - waiting as a single submit (=0): when submit returns, every entry but
 *   the last has started, so at most one is cancelled (exactly, whatever
 *   the timing);
 * - default: the queue holds at most 8 x 4 KiB of them, four entries, so
 *   at most four are cancelled;
 * - no wait: submit returns with the entries queued; the worker would
 *   have to read 8192 chunks before cancel flags them, so some are
 *   cancelled.
 * Every other entry completes with 8 KiB, byte-exact against the oracle.
 * Then the stats line printed at destroy (stderr, redirected to a file
 * here) gives the exact counts: 1 submit, 4096 entries, the get_status
 * calls this program made and the events they returned.
 * Host memory and the simulated device (hostdev): OPENDS_ACCEL from the
 * environment.
 */
#include "common.h"

#define N 4096u
#define PIECE ((size_t)8192)
#define FSIZE ((size_t)256 << 10)

static uint8_t *oracle;

static off_t file_off(unsigned i)
{
	return (off_t)((i * 7u % (FSIZE / PIECE)) * PIECE);
}

/* Submit N entries, cancel at once, collect all; returns the count
 * cancelled. Checks every event; stats line checked at destroy. */
static unsigned run(int fd, uint8_t *mem, const char *what)
{
	opends_handle_t fh = t_register(fd);
	opends_batch_t b;
	OK(opends_batch_setup(&b, N));
	static opends_io_params_t p[N];
	for (unsigned i = 0; i < N; i++)
		p[i] = t_batch_entry(fh, OPENDS_READ, mem, PIECE, file_off(i), (off_t)(i * PIECE), (void *)(uintptr_t)i);
	memset(mem, T_CANARY, N * PIECE);
	OK(opends_batch_submit(b, N, p, 0));
	OK(opends_batch_cancel(b));

	static opends_io_events_t ev[N];
	static bool seen[N];
	memset(seen, 0, sizeof(seen));
	unsigned got = 0, calls = 0, cancelled = 0;
	while (got < N) {
		unsigned nr = N - got;
		struct timespec ts = { 30, 0 };
		OK(opends_batch_get_status(b, 1, &nr, ev + got, &ts));
		calls++;
		if (!nr)
			FAILF("%s: get_status waited 30 s with %u of %u entries delivered", what, got, N);
		got += nr;
	}
	for (unsigned k = 0; k < N; k++) {
		unsigned i = (unsigned)(uintptr_t)ev[k].cookie;
		CHECKF(i < N && !seen[i], "%s: event %u has cookie %u (unknown or twice)", what, k, i);
		seen[i] = true;
		if (ev[k].status == OPENDS_CANCELED) {
			CHECKF(ev[k].ret == -ECANCELED, "%s: entry %u cancelled with ret %zd, want %d", what, i,
			       (ssize_t)ev[k].ret, -ECANCELED);
			cancelled++;
			continue;
		}
		CHECKF(ev[k].status == OPENDS_COMPLETE && ev[k].ret == (ssize_t)PIECE, "%s: entry %u: status %d ret %zd",
		       what, i, (int)ev[k].status, (ssize_t)ev[k].ret);
		size_t at;
		if (t_first_diff(mem + i * PIECE, oracle + file_off(i), PIECE, &at))
			FAILF("%s: entry %u: byte %zu differs", what, i, at);
	}

	/* the stats line: stderr into a file around the destroy */
	char path[PATH_MAX];
	t_path(path, sizeof(path), "stats.txt");
	fflush(stderr);
	int saved = dup(2), sf = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (saved < 0 || sf < 0 || dup2(sf, 2) < 0)
		FAILF("redirecting stderr: %s", strerror(errno));
	opends_error_t e = opends_batch_destroy(b);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	OK(e);
	char line[512] = "";
	ssize_t n = pread(sf, line, sizeof(line) - 1, 0);
	close(sf);
	line[n > 0 ? n : 0] = 0;
	unsigned maxnr, subs, ents, gcalls, events;
	double sub_ms;
	int k = sscanf(line, "opends batch stats: max_nr %u; %u submits, %u entries, %lf ms in submit; %u get_status calls, %u events",
		       &maxnr, &subs, &ents, &sub_ms, &gcalls, &events);
	CHECKF(k == 6, "%s: stats line not as expected: '%s'", what, line);
	CHECKF(maxnr == N && subs == 1 && ents == N && gcalls == calls && events == N,
	       "%s: stats say max_nr %u, %u submits, %u entries, %u get_status calls, %u events; want %u, 1, %u, %u, %u",
	       what, maxnr, subs, ents, gcalls, events, N, N, calls, N);
	OK(opends_handle_deregister(fh));
	printf("%s: %u of %u cancelled; %s", what, cancelled, N, line);
	return cancelled;
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(300);
	setenv("OPENDS_BACKEND", "uring", 1);
	setenv("OPENDS_IO_THREADS", "1", 1);
	setenv("OPENDS_QUEUE_DEPTH", "1", 1);
	setenv("OPENDS_CHUNK_SIZE", "4096", 1);
	setenv("OPENDS_IDLE_SPIN", "0", 1);
	setenv("OPENDS_BATCH_STATS", "1", 1);

	char path[PATH_MAX];
	t_path(path, sizeof(path), "batch_nowait.bin");
	int fd = t_hot_file(path, FSIZE, hashpat, &oracle);
	uint8_t *mem = t_xmalloc(N * PIECE);

	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED) {
		printf("SKIP: uring does not run here: %s\n", opends_last_error_detail());
		return T_SKIP;
	}
	OK(e);

	setenv("OPENDS_AB_BATCH_NOWAIT", "0", 1);
	unsigned c_wait = run(fd, mem, "waiting for room");
	CHECKF(c_wait <= 1, "waiting for room: %u entries were cancelled; at most the last one may be unstarted",
	       c_wait);
	unsetenv("OPENDS_AB_BATCH_NOWAIT");
	unsigned c_def = run(fd, mem, "default");
	CHECKF(c_def <= 4, "default: %u entries were cancelled; at most 4 (32 KiB) may wait in the queue", c_def);
	setenv("OPENDS_AB_BATCH_NOWAIT", "1", 1);
	unsigned c_nowait = run(fd, mem, "no wait");
	CHECKF(c_nowait >= 1, "no wait: none of %u entries was cancelled: submit waited for the worker", N);

	OK(opends_driver_close());
	close(fd);
	free(mem);
	free(oracle);
	t_rm_dir();
	printf("OK\n");
	return 0;
}
