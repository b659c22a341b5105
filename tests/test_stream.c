/*
 * test_stream [--backend=NAME]
 *
 * Stream-ordered I/O (cuFileReadAsync/WriteAsync shape). With
 * OPENDS_ACCEL=host the stream is a library-owned host-ordered queue.
 *  - ops on one stream run in order: a chain of writes and reads of the
 *    same bytes, all enqueued before one synchronize, each read must see
 *    exactly the write before it;
 *  - *size, *file_offset, *buf_offset are read when the stream reaches the
 *    op (deferred evaluation), results land in *bytes_read;
 *  - the NULL stream, register/deregister hints, argument errors at submit,
 *    and I/O errors in *bytes_read.
 */
#include "common.h"

#define SENT ((ssize_t)-12345)
#define LD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

static uint8_t *oracle;
static const size_t F = T_HASH_SIZE;
static opends_handle_t fh; /* hash file, read-only */

/* One op's variables: they must stay valid until the stream reaches it. */
struct sop {
	size_t size;
	off_t foff, boff;
	ssize_t res;
};

static void basic(opends_stream_t s, const char *sname)
{
	t_phase = "basic stream reads";
	uint8_t *buf = t_xmalloc(3 * 8192);
	struct sop a = { 4096, 100, 0, SENT }, b = { 8192, (off_t)F - 100, 8192, SENT }, c = { 10, (off_t)F, 5, SENT };
	OK(opends_stream_read(fh, buf, &a.size, &a.foff, &a.boff, &a.res, s));
	OK(opends_stream_read(fh, buf, &b.size, &b.foff, &b.boff, &b.res, s));
	OK(opends_stream_read(fh, buf, &c.size, &c.foff, &c.boff, &c.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(a.res == 4096, "%s: read a gave %zd", sname, a.res);
	CHECKF(b.res == 100, "%s: read short at EOF gave %zd, expected 100", sname, b.res);
	CHECKF(c.res == 0, "%s: read at EOF gave %zd, expected 0", sname, c.res);
	VERIFY(buf, oracle + 100, 4096, "%s: read a data", sname);
	VERIFY_CANARY(buf + 4096, 4096, "%s: between a and b", sname);
	VERIFY(buf + 8192, oracle + F - 100, 100, "%s: read b data", sname);
	VERIFY_CANARY(buf + 8192 + 100, 8192 - 100, "%s: after b's returned range", sname);
	free(buf);
}

/*
 * A chain on one stream: write value i to bytes [B, B+L), then read them
 * back into slot i, for i = 0..N-1, all enqueued before synchronizing. On
 * a stream each read sees exactly write i; without ordering, reads would
 * see other values.
 */
static void ordering(opends_handle_t w, int wfd, opends_stream_t s, const char *sname)
{
	t_phase = "ordering chain";
	enum { N = 100, L = 4099 };
	const off_t B = 4095; /* unaligned, crosses blocks */
	static struct sop wo[N], ro[N];
	uint8_t *wb = t_xmalloc((size_t)N * L);
	uint8_t *rb = t_xmalloc((size_t)N * L);
	for (int i = 0; i < N; i++) {
		t_fill_seed(wb + (size_t)i * L, 500 + (uint64_t)i, L);
		wo[i] = (struct sop){ L, B, (off_t)i * L, SENT };
		ro[i] = (struct sop){ L, B, (off_t)i * L, SENT };
		OK(opends_stream_write(w, wb, &wo[i].size, &wo[i].foff, &wo[i].boff, &wo[i].res, s));
		OK(opends_stream_read(w, rb, &ro[i].size, &ro[i].foff, &ro[i].boff, &ro[i].res, s));
	}
	OK(opends_stream_synchronize(s));
	for (int i = 0; i < N; i++) {
		CHECKF(wo[i].res == L, "%s: write %d gave %zd (%s)", sname, i, wo[i].res, t_errname(wo[i].res));
		CHECKF(ro[i].res == L, "%s: read %d gave %zd (%s)", sname, i, ro[i].res, t_errname(ro[i].res));
		VERIFY(rb + (size_t)i * L, wb + (size_t)i * L, L, "%s: read %d did not see write %d (out of order)",
		       sname, i, i);
	}
	/* write A then write B to the same range: B wins in the file */
	struct sop a = { 5000, 70001, 0, SENT }, b = { 5000, 70001, 5000, SENT };
	OK(opends_stream_write(w, wb, &a.size, &a.foff, &a.boff, &a.res, s));
	OK(opends_stream_write(w, wb, &b.size, &b.foff, &b.boff, &b.res, s));
	OK(opends_stream_synchronize(s));
	CHECK(a.res == 5000 && b.res == 5000);
	uint8_t got[5000];
	CHECK(t_pread_all(wfd, got, sizeof got, 70001) == sizeof got);
	VERIFY(got, wb + 5000, 5000, "%s: write B did not win over write A", sname);
	free(wb);
	free(rb);
}

/*
 * Deferred evaluation. Block the stream with K big reads, enqueue op2 with
 * *size = 0 and *file_offset = -1 (it would fail or read nothing if read
 * at submit), then set the real values. If the last blocker's result is
 * still the sentinel after that, the stream had not reached op2 when the
 * values changed, so op2 must have used the new values. If the blockers
 * were too quick, retry with more of them.
 */
static void deferred(opends_stream_t s)
{
	t_phase = "deferred evaluation";
	const size_t BL = 1 * T_MiB;
	uint8_t *blk = t_xmalloc(BL);
	uint8_t *out = t_xmalloc(16384);
	bool exercised = false;
	for (int attempt = 0; attempt < 10 && !exercised; attempt++) {
		unsigned K = 8u << (attempt < 7 ? attempt : 7);
		struct sop *bl = calloc(K, sizeof *bl);
		CHECK(bl);
		for (unsigned k = 0; k < K; k++) {
			bl[k] = (struct sop){ BL, 0, 0, SENT };
			OK(opends_stream_read(fh, blk, &bl[k].size, &bl[k].foff, &bl[k].boff, &bl[k].res, s));
		}
		memset(out, T_CANARY, 16384);
		struct sop op2 = { 0, -1, 0, SENT };
		struct sop op3 = { 0, -1, 0, SENT };
		OK(opends_stream_read(fh, out, &op2.size, &op2.foff, &op2.boff, &op2.res, s));
		OK(opends_stream_read(fh, out, &op3.size, &op3.foff, &op3.boff, &op3.res, s));
		ST(&op2.size, (size_t)5000);
		ST(&op2.foff, (off_t)12345);
		ST(&op2.boff, (off_t)3);
		ST(&op3.size, (size_t)999);
		ST(&op3.foff, (off_t)(F - 333));
		ST(&op3.boff, (off_t)8000);
		ssize_t last = LD(&bl[K - 1].res);
		OK(opends_stream_synchronize(s));
		for (unsigned k = 0; k < K; k++)
			CHECKF(bl[k].res == (ssize_t)BL, "blocker %u gave %zd", k, bl[k].res);
		if (last != SENT) {
			printf("deferred case not exercised this run (K=%u), retrying\n", K);
			free(bl);
			continue;
		}
		exercised = true;
		CHECKF(op2.res == 5000, "op2 gave %zd (%s): values were read at submit, not when the stream reached it",
		       op2.res, t_errname(op2.res));
		CHECKF(op3.res == 333, "op3 gave %zd (%s), expected 333 (short at EOF with deferred values)", op3.res,
		       t_errname(op3.res));
		VERIFY_CANARY(out, 3, "deferred: before op2's target");
		VERIFY(out + 3, oracle + 12345, 5000, "deferred op2 data");
		VERIFY_CANARY(out + 5003, 8000 - 5003, "deferred: between op2 and op3");
		VERIFY(out + 8000, oracle + F - 333, 333, "deferred op3 data");
		VERIFY_CANARY(out + 8333, 16384 - 8333, "deferred: after op3");
		printf("deferred evaluation exercised with K=%u blockers\n", K);
		free(bl);
	}
	CHECKF(exercised, "the deferred-evaluation case was never exercised in 10 attempts");
	free(blk);
	free(out);
}

static void errors(const char *path, const char *wpath, opends_stream_t s)
{
	t_phase = "stream argument errors";
	uint8_t b[4096];
	struct sop o = { 100, 0, 0, SENT };
	EXPECT_ERR(opends_stream_read(fh, b, NULL, &o.foff, &o.boff, &o.res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_read(fh, b, &o.size, NULL, &o.boff, &o.res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_read(fh, b, &o.size, &o.foff, NULL, &o.res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_read(fh, b, &o.size, &o.foff, &o.boff, NULL, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_read(fh, NULL, &o.size, &o.foff, &o.boff, &o.res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_write(fh, b, NULL, &o.foff, &o.boff, &o.res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_write(fh, b, &o.size, NULL, &o.boff, &o.res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_write(fh, b, &o.size, &o.foff, NULL, &o.res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_write(fh, b, &o.size, &o.foff, &o.boff, NULL, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_write(fh, NULL, &o.size, &o.foff, &o.boff, &o.res, s), OPENDS_INVALID_VALUE);
	/* a stream the library never made (host queue: it can tell) */
	int not_a_stream;
	EXPECT_ERR(opends_stream_read(fh, b, &o.size, &o.foff, &o.boff, &o.res, &not_a_stream), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_destroy(NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_destroy(&not_a_stream), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_create(NULL), OPENDS_INVALID_VALUE);
	CHECKF(o.res == SENT, "a refused submit wrote *bytes_read (%zd)", o.res);

	/* deregistered handle: refused at submit */
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t stale = t_register(fd);
	OK(opends_handle_deregister(stale));
	EXPECT_ERR(opends_stream_read(stale, b, &o.size, &o.foff, &o.boff, &o.res, s), OPENDS_HANDLE_NOT_REGISTERED);
	EXPECT_ERR(opends_stream_write(stale, b, &o.size, &o.foff, &o.boff, &o.res, s), OPENDS_HANDLE_NOT_REGISTERED);
	close(fd);

	t_phase = "errors inside the stream";
	/* bad values behind the pointers are checked when the stream reaches
	 * the op: submit succeeds, the error lands in *bytes_read */
	struct sop neg = { 100, -1, 0, SENT }, negb = { 100, 0, -5, SENT }, big = { (size_t)SSIZE_MAX + 1, 0, 0, SENT };
	OK(opends_stream_read(fh, b, &neg.size, &neg.foff, &neg.boff, &neg.res, s));
	OK(opends_stream_read(fh, b, &negb.size, &negb.foff, &negb.boff, &negb.res, s));
	OK(opends_stream_read(fh, b, &big.size, &big.foff, &big.boff, &big.res, s));
	/* read through a write-only fd: -EBADF in *bytes_read */
	int wo = t_open(wpath, O_WRONLY, false);
	opends_handle_t hw = t_register(wo);
	struct sop e = { 100, 0, 0, SENT };
	OK(opends_stream_read(hw, b, &e.size, &e.foff, &e.boff, &e.res, s));
	/* and the stream keeps going after a failed op */
	struct sop after = { 100, 7, 0, SENT };
	uint8_t b2[100];
	OK(opends_stream_read(fh, b2, &after.size, &after.foff, &after.boff, &after.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(neg.res == -OPENDS_INVALID_VALUE, "negative *file_offset gave %zd (%s)", neg.res, t_errname(neg.res));
	CHECKF(negb.res == -OPENDS_INVALID_VALUE, "negative *buf_offset gave %zd (%s)", negb.res, t_errname(negb.res));
	CHECKF(big.res == -OPENDS_INVALID_VALUE, "*size > SSIZE_MAX gave %zd (%s)", big.res, t_errname(big.res));
	CHECKF(e.res == -EBADF, "read through write-only fd gave %zd (%s), expected -EBADF", e.res, t_errname(e.res));
	CHECKF(after.res == 100, "read after a failed op gave %zd (%s)", after.res, t_errname(after.res));
	VERIFY(b2, oracle + 7, 100, "read after a failed op");
	OK(opends_handle_deregister(hw));
	close(wo);
}

static void hints(opends_stream_t s)
{
	t_phase = "stream_register hints";
	EXPECT_ERR(opends_stream_register(s, 16), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_register(s, 0x80000000u), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_register(s, 0xffffffffu), OPENDS_INVALID_VALUE);
	/* deregistering a stream that is not registered */
	EXPECT_ERR(opends_stream_deregister(s), OPENDS_INVALID_VALUE);
	OK(opends_stream_register(s, OPENDS_STREAM_FIXED_BUF_OFFSET));
	/* registering twice replaces the flags */
	OK(opends_stream_register(s, OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET |
					     OPENDS_STREAM_FIXED_FILE_SIZE | OPENDS_STREAM_PAGE_ALIGNED_INPUTS));
	/* with every hint, page-aligned I/O still works */
	uint8_t *buf = t_xmalloc(3 * 4096);
	struct sop o = { 8192, 4096, 4096, SENT };
	OK(opends_stream_read(fh, buf, &o.size, &o.foff, &o.boff, &o.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(o.res == 8192, "read on a registered stream gave %zd", o.res);
	VERIFY(buf + 4096, oracle + 4096, 8192, "read on a registered stream");
	VERIFY_CANARY(buf, 4096, "before read on a registered stream");
	OK(opends_stream_deregister(s));
	EXPECT_ERR(opends_stream_deregister(s), OPENDS_INVALID_VALUE);
	free(buf);
}

/* Destroy waits for the work queued on the stream. */
static void destroy_waits(void)
{
	t_phase = "destroy waits";
	opends_stream_t s;
	OK(opends_stream_create(&s));
	enum { N = 64 };
	static struct sop o[N];
	uint8_t *buf = t_xmalloc((size_t)N * 8192);
	for (int i = 0; i < N; i++) {
		o[i] = (struct sop){ 8192, (off_t)i * 8191, (off_t)i * 8192, SENT };
		OK(opends_stream_read(fh, buf, &o[i].size, &o[i].foff, &o[i].boff, &o[i].res, s));
	}
	OK(opends_stream_destroy(s));
	for (int i = 0; i < N; i++) {
		CHECKF(LD(&o[i].res) == 8192, "op %d after destroy: %zd", i, o[i].res);
		VERIFY(buf + (size_t)i * 8192, oracle + (size_t)i * 8191, 8192, "op %d after destroy", i);
	}
	free(buf);
}

/* Two streams at once: each keeps its own order. */
static void two_streams(opends_handle_t w, opends_stream_t s1)
{
	t_phase = "two streams";
	opends_stream_t s2;
	OK(opends_stream_create(&s2));
	enum { N = 40, L = 1000 };
	static struct sop w1[N], r1[N], w2[N], r2[N];
	uint8_t *wb = t_xmalloc(2 * (size_t)N * L), *rb = t_xmalloc(2 * (size_t)N * L);
	t_fill_seed(wb, 999, 2 * (size_t)N * L);
	for (int i = 0; i < N; i++) {
		w1[i] = (struct sop){ L, 200000, (off_t)i * L, SENT };
		r1[i] = (struct sop){ L, 200000, (off_t)i * L, SENT };
		w2[i] = (struct sop){ L, 300001, (off_t)(N + i) * L, SENT };
		r2[i] = (struct sop){ L, 300001, (off_t)(N + i) * L, SENT };
		OK(opends_stream_write(w, wb, &w1[i].size, &w1[i].foff, &w1[i].boff, &w1[i].res, s1));
		OK(opends_stream_write(w, wb, &w2[i].size, &w2[i].foff, &w2[i].boff, &w2[i].res, s2));
		OK(opends_stream_read(w, rb, &r1[i].size, &r1[i].foff, &r1[i].boff, &r1[i].res, s1));
		OK(opends_stream_read(w, rb, &r2[i].size, &r2[i].foff, &r2[i].boff, &r2[i].res, s2));
	}
	OK(opends_stream_synchronize(s2));
	OK(opends_stream_synchronize(s1));
	for (int i = 0; i < N; i++) {
		CHECK(w1[i].res == L && r1[i].res == L && w2[i].res == L && r2[i].res == L);
		VERIFY(rb + (size_t)i * L, wb + (size_t)i * L, L, "stream 1 read %d", i);
		VERIFY(rb + (size_t)(N + i) * L, wb + (size_t)(N + i) * L, L, "stream 2 read %d", i);
	}
	OK(opends_stream_destroy(s2));
	free(wb);
	free(rb);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(280);
	char path[PATH_MAX], wpath[PATH_MAX];
	t_path(path, sizeof path, T_HASH_NAME);
	t_path(wpath, sizeof wpath, "stream_w.bin");
	t_write_pattern_file(path, F, hashpat);
	t_write_pattern_file(wpath, 512 * T_KiB, pat16);
	oracle = t_oracle(F, hashpat);

	t_driver_open();
	printf("backend %s\n", opends_driver_backend());
	for (int d = 0; d < 2; d++) {
		int fd = t_open(path, O_RDONLY, d);
		int wfd = t_open(wpath, O_RDWR, d);
		if (fd == -2 || wfd == -2)
			continue;
		int chk = t_open(wpath, O_RDONLY, false);
		fh = t_register(fd);
		opends_handle_t wh = t_register(wfd);
		opends_stream_t s;
		OK(opends_stream_create(&s));
		CHECK(s != NULL);

		basic(s, "created stream");
		basic(NULL, "NULL stream");
		ordering(wh, chk, s, "created stream");
		ordering(wh, chk, NULL, "NULL stream");
		OK(opends_stream_synchronize(NULL));
		deferred(s);
		errors(path, wpath, s);
		hints(s);
		two_streams(wh, s);
		destroy_waits();
		OK(opends_stream_destroy(s));

		OK(opends_handle_deregister(wh));
		OK(opends_handle_deregister(fh));
		close(fd);
		close(wfd);
		close(chk);
		printf("stream%s: OK\n", d ? " (O_DIRECT)" : "");
	}
	OK(opends_driver_close());
	free(oracle);
	return 0;
}
