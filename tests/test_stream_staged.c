/*
 * test_stream_staged [--backend=NAME]
 *
 * Stream operations large and many enough to exercise the staged pipeline
 * of accelerator streams (src/core/stream_accel.c): under OPENDS_ACCEL=hostdev
 * every buffer is "device" memory and the streams are hostdev's simulated
 * ones, so each operation runs as pieces through pinned slots with gates
 * and copies queued on the stream; under OPENDS_ACCEL=host the same calls
 * go through host queues and must give the same bytes.
 *  - a read and a write of many more pieces than slots, at unaligned file
 *    and buffer offsets;
 *  - a read reaching past EOF: the result stops at EOF and the buffer past
 *    it keeps its bytes (also one large enough for the large pieces);
 *  - values changed after the call and before the stream reaches the op:
 *    the new values are used, and the bytes of the range planned from the
 *    old ones that the new ones do not cover keep their bytes;
 *  - 64 streams, each with reads in flight, all at once.
 */
#include "test_stream_common.h"

/* 135 MiB + a bit: thirty-four 4 MiB pieces, more than the 32 slots */
static const size_t F = 135 * T_MiB + 12345;
static uint8_t *oracle;
static opends_handle_t fh;

static void big_read(opends_stream_t s)
{
	t_phase = "a read of many pieces";
	size_t n = F - 4097;
	uint8_t *buf = t_xmalloc(n + 8192);
	struct sop a = { n, 4097, 5, SENT };
	OK(opends_stream_read(fh, buf, &a.size, &a.foff, &a.boff, &a.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(a.res == (ssize_t)n, "read of %zu bytes gave %zd (%s)", n, a.res, t_errname(a.res));
	VERIFY_CANARY(buf, 5, "before the target");
	VERIFY(buf + 5, oracle + 4097, n, "big read data");
	VERIFY_CANARY(buf + 5 + n, 8192 - 5, "after the target");
	free(buf);
}

static void past_eof(opends_stream_t s)
{
	t_phase = "reads past EOF";
	/* ends 3 bytes into the last piece; and one whose whole last pieces
	 * lie past EOF */
	const struct {
		off_t foff;
		size_t size;
	} c[] = { { (off_t)(F - 8 * T_MiB - 3), 8 * T_MiB + 100 }, { (off_t)(F - 5 * T_MiB + 7), 17 * T_MiB + 1 },
		  { (off_t)F - 1, 9 * T_MiB }, { (off_t)F + 10, 5 * T_MiB },
		  /* 256 MiB and more move in 16 MiB pieces, 16 slots: seventeen
		   * pieces, the last nine wholly past EOF */
		  { 7, 270 * T_MiB + 5 } };
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		uint8_t *buf = t_xmalloc(c[i].size + 3);
		struct sop a = { c[i].size, c[i].foff, 3, SENT };
		OK(opends_stream_read(fh, buf, &a.size, &a.foff, &a.boff, &a.res, s));
		OK(opends_stream_synchronize(s));
		size_t want = t_expect_read(F, (uint64_t)c[i].foff, c[i].size);
		CHECKF(a.res == (ssize_t)want, "case %zu: read gave %zd, expected %zu", i, a.res, want);
		VERIFY_CANARY(buf, 3, "case %zu: before the target", i);
		VERIFY(buf + 3, oracle + (c[i].foff < (off_t)F ? c[i].foff : 0), want, "case %zu: data", i);
		VERIFY_CANARY(buf + 3 + want, c[i].size - want, "case %zu: past the bytes returned", i);
		free(buf);
	}
}

static void big_write(opends_handle_t w, int chk, opends_stream_t s)
{
	t_phase = "a write of many pieces";
	size_t n = 133 * T_MiB + 999;
	uint8_t *src = t_xmalloc(n + 11);
	t_fill_seed(src + 11, 4242, n);
	struct sop a = { n, 4095, 11, SENT };
	OK(opends_stream_write(w, src, &a.size, &a.foff, &a.boff, &a.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(a.res == (ssize_t)n, "write of %zu bytes gave %zd (%s)", n, a.res, t_errname(a.res));
	uint8_t *back = t_xmalloc(n);
	CHECK(t_pread_all(chk, back, n, 4095) == n);
	VERIFY(back, src + 11, n, "file after the big write");
	free(back);
	free(src);
}

/*
 * Values changed after the call: the op is enqueued behind blockers (big
 * reads), then its values change. If the last blocker's result is still
 * the sentinel after the change, the stream had not reached the op, and it
 * must use the new values. Retried with more blockers when they were
 * quick.
 */
static void changed(opends_stream_t s)
{
	t_phase = "values changed after the call";
	const size_t BL = 4 * T_MiB, N = 9 * T_MiB;
	uint8_t *blk = t_xmalloc(BL);
	uint8_t *out = t_xmalloc(N + 4096);
	bool exercised = false;
	for (int attempt = 0; attempt < 8 && !exercised; attempt++) {
		unsigned K = 4u << attempt;
		struct sop *bl = calloc(K, sizeof *bl);
		CHECK(bl);
		for (unsigned k = 0; k < K; k++) {
			bl[k] = (struct sop){ BL, (off_t)(k % 8) * (off_t)BL, 0, SENT };
			OK(opends_stream_read(fh, blk, &bl[k].size, &bl[k].foff, &bl[k].boff, &bl[k].res, s));
		}
		memset(out, T_CANARY, N + 4096);
		/* planned: 9 MiB at 100 into out + 0; then: 5000 bytes of file
		 * offset 777 into out + 4 MiB + 1 */
		struct sop op = { N, 100, 0, SENT };
		/* planned in range, then out of it: must fail and leave out alone */
		struct sop bad = { 4096, 0, 0, SENT };
		OK(opends_stream_read(fh, out, &op.size, &op.foff, &op.boff, &op.res, s));
		OK(opends_stream_read(fh, out + N, &bad.size, &bad.foff, &bad.boff, &bad.res, s));
		ST(&op.size, (size_t)5000);
		ST(&op.foff, (off_t)777);
		ST(&op.boff, (off_t)(4 * T_MiB + 1));
		ST(&bad.foff, (off_t)-1);
		ssize_t last = LD(&bl[K - 1].res);
		OK(opends_stream_synchronize(s));
		for (unsigned k = 0; k < K; k++)
			CHECKF(bl[k].res == (ssize_t)BL, "blocker %u gave %zd", k, bl[k].res);
		free(bl);
		if (last != SENT) {
			printf("changed values not exercised (K=%u), retrying\n", K);
			continue;
		}
		exercised = true;
		CHECKF(op.res == 5000, "op gave %zd (%s), expected 5000 from the values at execution", op.res,
		       t_errname(op.res));
		VERIFY_CANARY(out, 4 * T_MiB + 1, "before the new target");
		VERIFY(out + 4 * T_MiB + 1, oracle + 777, 5000, "data at the new target");
		VERIFY_CANARY(out + 4 * T_MiB + 1 + 5000, N - 4 * T_MiB - 1 - 5000, "rest of the planned range");
		CHECKF(bad.res == -OPENDS_INVALID_VALUE, "op made invalid gave %zd (%s)", bad.res, t_errname(bad.res));
		VERIFY_CANARY(out + N, 4096, "target of the op made invalid");
		printf("changed values exercised with K=%u blockers\n", K);
	}
	CHECKF(exercised, "the changed-values case was never exercised");
	free(blk);
	free(out);
}

/* More streams than a GPU has hardware queues, each with reads queued. */
static void many_streams(void)
{
	t_phase = "64 streams at once";
	t_many_streams(fh, oracle, F, 300 * T_KiB + 17, 0);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(280);
	char path[PATH_MAX], wpath[PATH_MAX];
	t_path(path, sizeof path, "staged.bin");
	t_path(wpath, sizeof wpath, "staged_w.bin");
	t_write_pattern_file(path, F, hashpat);
	oracle = t_oracle(F, hashpat);

	t_driver_open();
	printf("backend %s\n", opends_driver_backend());
	for (int d = 0; d < 2; d++) {
		int fd = t_open(path, O_RDONLY, d);
		int wfd = t_open(wpath, O_RDWR | O_CREAT | O_TRUNC, d);
		if (fd == -2 || wfd == -2)
			continue;
		int chk = t_open(wpath, O_RDONLY, false);
		fh = t_register(fd);
		opends_handle_t wh = t_register(wfd);
		opends_stream_t s;
		OK(opends_stream_create(&s));

		big_read(s);
		big_read(NULL);
		past_eof(s);
		big_write(wh, chk, s);
		changed(s);
		many_streams();
		OK(opends_stream_destroy(s));

		OK(opends_handle_deregister(wh));
		OK(opends_handle_deregister(fh));
		close(fd);
		close(wfd);
		close(chk);
		printf("stream staged%s: OK\n", d ? " (O_DIRECT)" : "");
	}
	OK(opends_driver_close());
	free(oracle);
	return 0;
}
