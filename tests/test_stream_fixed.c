/*
 * test_stream_fixed [--backend=NAME]
 *
 * Stream reads whose arguments are fixed at the call (the stream is
 * registered with every OPENDS_STREAM_FIXED_* flag) and the rules that
 * keep them and the others correct (src/core/stream_accel.c). Run under
 * OPENDS_ACCEL=hostdev (accelerator streams: fixed reads start at the
 * call) and OPENDS_ACCEL=host (host queues: the flags are hints only).
 *  - reads of one piece, many pieces, and past EOF on a fixed stream are
 *    byte-exact;
 *  - on a stream that is not registered, a write to the file made after
 *    the call and before the stream reaches the read is seen by it;
 *  - on a fixed stream, values changed after the call are not used
 *    (hostdev: the values at the call are; host: those at execution);
 *  - a stream write queued ahead of a fixed read on its stream is seen by
 *    the read (no read overtakes a queued stream write);
 *  - on a stream with nothing queued (registered or not), accelerator
 *    streams read the values at the call: values changed just after it
 *    are not used;
 *  - a file of unknown size (/proc) on a fixed stream reads to its EOF;
 *  - 64 fixed streams with reads in flight at once.
 */
#include "test_stream_common.h"
#define FIXED (OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET | OPENDS_STREAM_FIXED_FILE_SIZE)

static const size_t F = 41 * T_MiB + 333; /* eleven 4 MiB pieces */
static uint8_t *oracle;
static opends_handle_t fh;
static bool accel; /* accelerator streams (hostdev) */

static void exact(opends_stream_t s)
{
	t_phase = "fixed reads, byte-exact";
	const struct {
		off_t foff;
		size_t size;
	} c[] = { { 1, 5000 }, { 4097, F - 4097 }, { (off_t)(F - 9 * T_MiB - 5), 12 * T_MiB }, { (off_t)F + 1, 4096 } };
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		uint8_t *buf = t_xmalloc(c[i].size + 7);
		struct sop a = { c[i].size, c[i].foff, 7, SENT };
		OK(opends_stream_read(fh, buf, &a.size, &a.foff, &a.boff, &a.res, s));
		OK(opends_stream_synchronize(s));
		size_t want = t_expect_read(F, (uint64_t)c[i].foff, c[i].size);
		CHECKF(a.res == (ssize_t)want, "case %zu: read gave %zd (%s), expected %zu", i, a.res,
		       t_errname(a.res), want);
		VERIFY_CANARY(buf, 7, "case %zu: before the target", i);
		if (want)
			VERIFY(buf + 7, oracle + c[i].foff, want, "case %zu: data", i);
		VERIFY_CANARY(buf + 7 + want, c[i].size - want, "case %zu: past the bytes returned", i);
		free(buf);
	}
}

/* Queue K blocker reads of 4 MiB on s; the caller checks that the last one
 * has not completed to know the stream had not reached what follows. */
static struct sop *blockers(opends_stream_t s, unsigned K, uint8_t *blk)
{
	struct sop *bl = calloc(K, sizeof *bl);
	CHECK(bl);
	for (unsigned k = 0; k < K; k++) {
		bl[k] = (struct sop){ 4 * T_MiB, (off_t)(k % 8) * (off_t)(4 * T_MiB), 0, SENT };
		OK(opends_stream_read(fh, blk, &bl[k].size, &bl[k].foff, &bl[k].boff, &bl[k].res, s));
	}
	return bl;
}

/* Not registered: the file changes after the call, before the stream
 * reaches the read; the read sees the new bytes. */
static void late_write(opends_stream_t s, int wfd)
{
	t_phase = "a file write after the call, stream not registered";
	const size_t N = 6 * T_MiB + 3;
	const off_t at = 1234567;
	uint8_t *blk = t_xmalloc(4 * T_MiB), *out = t_xmalloc(N), *fresh = t_xmalloc(N);
	bool exercised = false;
	for (int attempt = 0; attempt < 8 && !exercised; attempt++) {
		unsigned K = 4u << attempt;
		struct sop *bl = blockers(s, K, blk);
		t_fill_seed(fresh, 777 + (uint64_t)attempt, N);
		struct sop op = { N, at, 0, SENT };
		OK(opends_stream_read(fh, out, &op.size, &op.foff, &op.boff, &op.res, s));
		t_pwrite_all(wfd, fresh, N, at);
		ssize_t last = LD(&bl[K - 1].res);
		OK(opends_stream_synchronize(s));
		free(bl);
		t_pwrite_all(wfd, oracle + at, N, at); /* back to the oracle */
		if (last != SENT) {
			printf("late write not exercised (K=%u), retrying\n", K);
			continue;
		}
		exercised = true;
		CHECKF(op.res == (ssize_t)N, "read gave %zd (%s)", op.res, t_errname(op.res));
		VERIFY(out, fresh, N, "read after a write made before the stream reached it");
		printf("late write exercised with K=%u blockers\n", K);
	}
	CHECKF(exercised, "the late-write case was never exercised");
	free(blk);
	free(out);
	free(fresh);
}

/* Fixed: values changed after the call are not the ones used on
 * accelerator streams (read at the call); host queues read them late. */
static void changed(opends_stream_t s)
{
	t_phase = "values changed after the call, fixed stream";
	const size_t N = 5 * T_MiB + 1;
	uint8_t *blk = t_xmalloc(4 * T_MiB), *out = t_xmalloc(2 * N);
	bool exercised = false;
	for (int attempt = 0; attempt < 8 && !exercised; attempt++) {
		unsigned K = 4u << attempt;
		memset(out, T_CANARY, 2 * N);
		struct sop *bl = blockers(s, K, blk);
		struct sop op = { N, 100, 0, SENT };
		OK(opends_stream_read(fh, out, &op.size, &op.foff, &op.boff, &op.res, s));
		ST(&op.foff, (off_t)200);
		ST(&op.boff, (off_t)N);
		ssize_t last = LD(&bl[K - 1].res);
		OK(opends_stream_synchronize(s));
		free(bl);
		if (last != SENT) {
			printf("changed values not exercised (K=%u), retrying\n", K);
			continue;
		}
		exercised = true;
		CHECKF(op.res == (ssize_t)N, "read gave %zd (%s)", op.res, t_errname(op.res));
		if (accel) {
			VERIFY(out, oracle + 100, N, "the values at the call are used");
			VERIFY_CANARY(out + N, N, "the changed target is left alone");
		} else {
			VERIFY_CANARY(out, N, "host queues: the old target is left alone");
			VERIFY(out + N, oracle + 200, N, "host queues: the values at execution are used");
		}
		printf("changed values exercised with K=%u blockers\n", K);
	}
	CHECKF(exercised, "the changed-values case was never exercised");
	free(blk);
	free(out);
}

/* A stream write queued ahead of a fixed read of the same range, behind
 * blockers: the read waits for it and sees what it wrote. */
static void write_then_read(opends_stream_t s, opends_handle_t wh)
{
	t_phase = "a stream write ahead of a fixed read";
	const size_t N = 9 * T_MiB + 11;
	const off_t at = 4096 * 3 + 5;
	uint8_t *blk = t_xmalloc(4 * T_MiB), *src = t_xmalloc(N), *out = t_xmalloc(N);
	t_fill_seed(src, 99, N);
	struct sop *bl = blockers(s, 8, blk);
	struct sop w = { N, at, 0, SENT }, r = { N, at, 0, SENT };
	OK(opends_stream_write(wh, src, &w.size, &w.foff, &w.boff, &w.res, s));
	OK(opends_stream_read(fh, out, &r.size, &r.foff, &r.boff, &r.res, s));
	OK(opends_stream_synchronize(s));
	free(bl);
	CHECKF(w.res == (ssize_t)N, "write gave %zd (%s)", w.res, t_errname(w.res));
	CHECKF(r.res == (ssize_t)N, "read gave %zd (%s)", r.res, t_errname(r.res));
	VERIFY(out, src, N, "the read sees the write queued ahead of it");
	/* back to the oracle, for the cases after this one */
	struct sop b = { N, at, 0, SENT };
	OK(opends_stream_write(wh, oracle + at, &b.size, &b.foff, &b.boff, &b.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(b.res == (ssize_t)N, "restoring write gave %zd", b.res);
	free(blk);
	free(src);
	free(out);
}

/* A stream with nothing queued reaches a read at the call: on
 * accelerator streams its values are read then (and its reads start
 * then, not when the device runs its first command, which on a hardware
 * queue shared with other streams' held waits comes late), so values
 * changed just after the call are not used, registered or not. On host
 * queues the values at execution are used (either may be seen there). */
static void idle(opends_stream_t s)
{
	t_phase = "an idle stream reads its values at the call";
	const size_t N = 3 * T_MiB + 5, N2 = T_MiB;
	const off_t at = 4097, at2 = 8 * (off_t)T_MiB;
	uint8_t *out = t_xmalloc(N);
	for (int it = 0; it < 20; it++) {
		memset(out, T_CANARY, N);
		OK(opends_stream_synchronize(s)); /* nothing queued */
		struct sop a = { N, at, 0, SENT };
		OK(opends_stream_read(fh, out, &a.size, &a.foff, &a.boff, &a.res, s));
		a.size = N2; /* at once: before the stream could have run a command */
		a.foff = at2;
		OK(opends_stream_synchronize(s));
		if (!accel) {
			CHECKF(a.res == (ssize_t)N || a.res == (ssize_t)N2, "host queues: read gave %zd (%s)", a.res,
			       t_errname(a.res));
			VERIFY(out, oracle + (a.res == (ssize_t)N ? at : at2), (size_t)a.res, "host queues: data");
			continue;
		}
		CHECKF(a.res == (ssize_t)N, "round %d: read gave %zd (%s), expected the size at the call %zu", it, a.res,
		       t_errname(a.res), N);
		VERIFY(out, oracle + at, N, "round %d: the file offset at the call", it);
	}
	free(out);
}

/* A file whose size the file system does not give (/proc: st_size 0) on
 * a fixed stream: its read cannot stop at an end seen at the call, so it
 * waits for the stream and reads until EOF, as an unregistered one. */
static void unknown_size(opends_stream_t s)
{
	t_phase = "a file of unknown size on a fixed stream";
	int fd = open("/proc/self/maps", O_RDONLY);
	if (fd < 0) {
		printf("unknown size: /proc/self/maps not here, case skipped\n");
		return;
	}
	opends_handle_t h = t_register(fd);
	const size_t N = 1 << 20;
	uint8_t *out = t_xmalloc(N);
	memset(out, T_CANARY, N);
	struct sop a = { N, 0, 0, SENT };
	OK(opends_stream_read(h, out, &a.size, &a.foff, &a.boff, &a.res, s));
	OK(opends_stream_synchronize(s));
	/* the maps change as the process runs: only the length is unknown,
	 * so check that something the size of a maps file came back, and
	 * that it starts as every maps line does (a hex address) */
	CHECKF(a.res > 64 && (size_t)a.res < N, "read gave %zd (%s), expected the maps file", a.res,
	       t_errname(a.res));
	CHECKF(strchr("0123456789abcdef", out[0]) && memchr(out, '\n', (size_t)a.res), "not a maps file: %.20s", out);
	VERIFY_CANARY(out + a.res, N - (size_t)a.res, "past the bytes returned");
	free(out);
	OK(opends_handle_deregister(h));
	close(fd);
}

static void many_streams(void)
{
	t_phase = "64 fixed streams at once";
	t_many_streams(fh, oracle, F, 700 * T_KiB + 9, FIXED);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(280);
	const char *acc = getenv("OPENDS_ACCEL");
	accel = acc && !strcmp(acc, "hostdev");
	char path[PATH_MAX];
	t_path(path, sizeof path, "fixed.bin");
	t_write_pattern_file(path, F, hashpat);
	oracle = t_oracle(F, hashpat);

	t_driver_open();
	printf("backend %s, %s streams\n", opends_driver_backend(), accel ? "accelerator" : "host");
	for (int d = 0; d < 2; d++) {
		int fd = t_open(path, O_RDWR, d);
		if (fd == -2)
			continue;
		int wfd = t_open(path, O_RDWR, false); /* the test's own writes */
		fh = t_register(fd);
		opends_stream_t plain, fixed;
		OK(opends_stream_create(&plain));
		OK(opends_stream_create(&fixed));
		OK(opends_stream_register(fixed, FIXED));

		exact(fixed);
		late_write(plain, wfd);
		idle(plain);
		changed(fixed);
		write_then_read(fixed, fh);
		exact(fixed);
		unknown_size(fixed);
		many_streams();

		OK(opends_stream_destroy(plain));
		OK(opends_stream_destroy(fixed));
		OK(opends_handle_deregister(fh));
		close(fd);
		close(wfd);
		printf("stream fixed%s: OK\n", d ? " (O_DIRECT)" : "");
	}
	OK(opends_driver_close());
	free(oracle);
	return 0;
}
