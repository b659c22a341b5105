/*
 * test_batch [--backend=NAME]
 *
 * Batch I/O (cuFileBatchIO* shape). What matters to a user:
 *  - every submitted entry is delivered by get_status exactly once, with
 *    its cookie, status and byte count (short at EOF included), and the
 *    data is right;
 *  - submit is all or nothing: a bad entry anywhere, or more entries than
 *    the batch has room for, submits none of them (checked by polling with
 *    a zero timeout and by reading the file back);
 *  - an I/O error is a delivered OPENDS_FAILED, not a submit error;
 *  - cancel leaves every entry either completed (data right) or cancelled
 *    (buffer untouched), each delivered once;
 *  - destroy waits for what is in flight.
 */
#include "common.h"

#include <pthread.h>

static uint8_t *roracle;             /* hash.bin */
static const size_t RF = T_HASH_SIZE;
static uint8_t *woracle;             /* batch_w.bin */
static size_t wsize;
static int wchk;                     /* buffered fd for reading batch_w.bin back */
static opends_drv_props_t props;
static const struct timespec zero_ts = { 0, 0 };

static opends_io_params_t P(opends_opcode_t op, opends_handle_t fh, void *buf, off_t foff, off_t boff, size_t size,
			    uintptr_t cookie)
{
	opends_io_params_t p;
	memset(&p, 0, sizeof p);
	p.mode = OPENDS_BATCH;
	p.u.batch.buf_base = buf;
	p.u.batch.file_offset = foff;
	p.u.batch.buf_offset = boff;
	p.u.batch.size = size;
	p.fh = fh;
	p.opcode = op;
	p.cookie = (void *)cookie;
	return p;
}

/* get_status until total events have come (each at most once); fails
 * after 60 s. events must have room for total. */
static void collect(opends_batch_t b, unsigned total, opends_io_events_t *ev)
{
	t_batch_collect(b, total, ev, 60);
	/* and nothing more: a zero timeout returns at once with none */
	unsigned nr = 8;
	opends_io_events_t extra[8];
	struct timespec ts = zero_ts;
	OK(opends_batch_get_status(b, 1, &nr, extra, &ts));
	CHECKF(nr == 0, "%u extra completions after all %u were delivered", nr, total);
}

/* Cookies are 1..n; each must come exactly once. Returns the event for
 * cookie c in byc[c-1]. */
static void index_events(const opends_io_events_t *ev, unsigned n, const opends_io_events_t **byc)
{
	memset(byc, 0, n * sizeof *byc);
	for (unsigned i = 0; i < n; i++) {
		uintptr_t c = (uintptr_t)ev[i].cookie;
		CHECKF(c >= 1 && c <= n, "event %u has unknown cookie %p", i, ev[i].cookie);
		CHECKF(!byc[c - 1], "cookie %lu delivered twice", (unsigned long)c);
		byc[c - 1] = &ev[i];
	}
}

static void check_wfile(const char *what)
{
	size_t fs = (size_t)t_file_size(wchk);
	CHECKF(fs == wsize, "%s: file is %zu bytes, expected %zu", what, fs, wsize);
	uint8_t *got = t_xmalloc(wsize);
	CHECK(t_pread_all(wchk, got, wsize, 0) == wsize);
	VERIFY(got, woracle, wsize, "%s: write file content", what);
	free(got);
}

static void mixed(opends_handle_t rfh, opends_handle_t wfh, bool direct)
{
	t_phase = "mixed reads and writes";
	enum { NR = 30, NW = 16, N = NR + NW };
	opends_batch_t b;
	OK(opends_batch_setup(&b, 64));
	static opends_io_params_t p[N];
	static uint8_t *bufs[N];
	static size_t cap[N], want[N];
	for (unsigned i = 0; i < NR; i++) {
		static const size_t sz[] = { 1, 100, 4096, 4097, 8191, 65536, 300000, 12345, 513, 0 };
		size_t size = sz[i % 10];
		uint64_t off = ((uint64_t)i * 40961) % RF;
		if (i == 11)
			off = RF - 1000; /* short at EOF */
		if (i == 12)
			off = RF; /* at EOF: COMPLETE with 0 */
		if (i == 13)
			off = RF + 5000;
		size_t boff = i % 4;
		cap[i] = boff + size + 64;
		bufs[i] = t_xmalloc(cap[i]);
		want[i] = t_expect_read(RF, off, size);
		p[i] = P(OPENDS_READ, rfh, bufs[i], (off_t)off, (off_t)boff, size, i + 1);
	}
	for (unsigned i = NR; i < N; i++) {
		unsigned k = i - NR;
		size_t size = 1 + (size_t)k * 1237 % 9000;
		uint64_t off = (uint64_t)k * 9001 + 3;
		if (k == NW - 1)
			off = wsize - 10; /* extends the file */
		cap[i] = size + 1;
		bufs[i] = t_xmalloc(cap[i]);
		t_fill_seed(bufs[i] + 1, 4000 + k + (direct ? 100 : 0), size);
		want[i] = size;
		p[i] = P(OPENDS_WRITE, wfh, bufs[i], (off_t)off, 1, size, i + 1);
		if (off + size > wsize) {
			woracle = realloc(woracle, off + size);
			CHECK(woracle);
			wsize = off + size;
		}
		memcpy(woracle + off, bufs[i] + 1, size);
	}
	OK(opends_batch_submit(b, N, p, 0));
	static opends_io_events_t ev[N];
	const opends_io_events_t *byc[N];
	collect(b, N, ev);
	index_events(ev, N, byc);
	for (unsigned i = 0; i < N; i++) {
		const opends_io_events_t *e = byc[i];
		CHECKF(e, "cookie %u never delivered", i + 1);
		CHECKF(e->status == OPENDS_COMPLETE, "entry %u: status 0x%x ret %zd (%s)", i, e->status, e->ret,
		       t_errname(e->ret));
		CHECKF(e->ret == (ssize_t)want[i], "entry %u (%s size %zu off %lld): ret %zd, expected %zu", i,
		       i < NR ? "read" : "write", p[i].u.batch.size, (long long)p[i].u.batch.file_offset, e->ret,
		       want[i]);
		if (i < NR) {
			size_t bo = (size_t)p[i].u.batch.buf_offset;
			VERIFY_CANARY(bufs[i], bo, "entry %u: before target", i);
			VERIFY(bufs[i] + bo, roracle + (want[i] ? p[i].u.batch.file_offset : 0), want[i], "entry %u data",
			       i);
			VERIFY_CANARY(bufs[i] + bo + want[i], cap[i] - bo - want[i], "entry %u: after returned range", i);
		}
	}
	check_wfile("after mixed batch");

	t_phase = "re-poll after all delivered";
	unsigned nr = 8;
	opends_io_events_t e8[8];
	struct timespec ts = zero_ts;
	OK(opends_batch_get_status(b, 1, &nr, e8, &ts));
	CHECK(nr == 0);
	/* min_nr is capped at what is undelivered (nothing): no timeout
	 * needed to return */
	nr = 8;
	double t0 = t_now();
	OK(opends_batch_get_status(b, 4, &nr, e8, NULL));
	CHECK(nr == 0);
	nr = 0;
	OK(opends_batch_get_status(b, 0, &nr, NULL, NULL));
	CHECK(nr == 0);
	CHECKF(t_now() - t0 < 2, "get_status with nothing undelivered took %.2f s", t_now() - t0);

	/* the batch is reusable */
	uint8_t *rb = t_xmalloc(1000);
	p[0] = P(OPENDS_READ, rfh, rb, 17, 0, 1000, 1);
	OK(opends_batch_submit(b, 1, p, 0));
	collect(b, 1, ev);
	CHECK(ev[0].cookie == (void *)1 && ev[0].status == OPENDS_COMPLETE && ev[0].ret == 1000);
	VERIFY(rb, roracle + 17, 1000, "reused batch read");
	free(rb);

	OK(opends_batch_destroy(b));
	for (unsigned i = 0; i < N; i++)
		free(bufs[i]);
}

static void capacity(opends_handle_t rfh)
{
	t_phase = "batch capacity";
	opends_batch_t b;
	OK(opends_batch_setup(&b, 8));
	uint8_t *buf = t_xmalloc(9 * 4096);
	opends_io_params_t p[9];
	for (unsigned i = 0; i < 9; i++)
		p[i] = P(OPENDS_READ, rfh, buf, (off_t)i * 4096, (off_t)i * 4096, 4096, i + 1);
	EXPECT_ERR(opends_batch_submit(b, 9, p, 0), OPENDS_BATCH_FULL);
	unsigned nr = 9;
	opends_io_events_t ev[9];
	struct timespec ts = zero_ts;
	OK(opends_batch_get_status(b, 0, &nr, ev, &ts));
	CHECKF(nr == 0, "a refused submit delivered %u completions", nr);
	VERIFY_CANARY(buf, 9 * 4096, "a refused submit wrote the buffer");

	OK(opends_batch_submit(b, 5, p, 0));
	/* 5 submitted and not collected: 4 more do not fit, 3 do */
	EXPECT_ERR(opends_batch_submit(b, 4, p + 5, 0), OPENDS_BATCH_FULL);
	OK(opends_batch_submit(b, 3, p + 5, 0));
	EXPECT_ERR(opends_batch_submit(b, 1, p + 8, 0), OPENDS_BATCH_FULL);
	collect(b, 8, ev);
	const opends_io_events_t *byc[9];
	index_events(ev, 8, byc);
	for (unsigned i = 0; i < 8; i++)
		CHECKF(byc[i] && byc[i]->status == OPENDS_COMPLETE && byc[i]->ret == 4096, "capacity entry %u", i);
	VERIFY(buf, roracle, 8 * 4096, "capacity batch data");
	VERIFY_CANARY(buf + 8 * 4096, 4096, "entry refused as BATCH_FULL wrote the buffer");
	/* all collected: room again */
	OK(opends_batch_submit(b, 1, p + 8, 0));
	collect(b, 1, ev);
	CHECK(ev[0].cookie == (void *)9 && ev[0].ret == 4096);
	VERIFY(buf + 8 * 4096, roracle + 8 * 4096, 4096, "entry 9");
	OK(opends_batch_destroy(b));
	free(buf);
}

/* An invalid entry anywhere: nothing of the submit runs. */
static void all_or_nothing(opends_handle_t rfh, opends_handle_t wfh, opends_handle_t stale)
{
	t_phase = "all or nothing";
	opends_batch_t b;
	OK(opends_batch_setup(&b, 16));
	uint8_t *wb = t_xmalloc(8192), *rb = t_xmalloc(8192);
	uint8_t *reg = t_xmalloc(8192);
	OK(opends_buf_register(reg, 4096, 0));
	t_fill_seed(wb, 31337, 8192);
	struct {
		const char *what;
		opends_io_params_t bad;
		int code;
	} cases[] = {
		{ "bad opcode", P((opends_opcode_t)7, rfh, rb, 0, 0, 100, 3), OPENDS_INVALID_VALUE },
		{ "NULL buffer", P(OPENDS_READ, rfh, NULL, 0, 0, 100, 3), OPENDS_INVALID_VALUE },
		{ "negative file_offset", P(OPENDS_READ, rfh, rb, -1, 0, 100, 3), OPENDS_INVALID_VALUE },
		{ "negative buf_offset", P(OPENDS_READ, rfh, rb, 0, -1, 100, 3), OPENDS_INVALID_VALUE },
		{ "size > SSIZE_MAX", P(OPENDS_READ, rfh, rb, 0, 0, (size_t)SSIZE_MAX + 1, 3), OPENDS_INVALID_VALUE },
		{ "offset + size overflows", P(OPENDS_WRITE, wfh, wb, INT64_MAX - 10, 0, 100, 3), OPENDS_INVALID_VALUE },
		{ "mode 0", P(OPENDS_READ, rfh, rb, 0, 0, 100, 3), OPENDS_INVALID_VALUE },
		{ "mode 2", P(OPENDS_READ, rfh, rb, 0, 0, 100, 3), OPENDS_INVALID_VALUE },
		{ "unregistered handle", P(OPENDS_READ, stale, rb, 0, 0, 100, 3), OPENDS_HANDLE_NOT_REGISTERED },
		{ "crosses a registered range", P(OPENDS_READ, rfh, reg, 0, 4000, 100, 3), OPENDS_INVALID_MAPPING_RANGE },
	};
	cases[6].bad.mode = (opends_batch_mode_t)0;
	cases[7].bad.mode = (opends_batch_mode_t)2;
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		t_phase = cases[c].what;
		/* the bad entry last (a naive submit has started the others)
		 * and first */
		for (int pos = 0; pos < 2; pos++) {
			opends_io_params_t p[3];
			p[0] = P(OPENDS_WRITE, wfh, wb, 1000, 0, 5000, 1);
			p[1] = P(OPENDS_READ, rfh, rb, 0, 0, 4096, 2);
			if (pos == 0) {
				p[2] = cases[c].bad;
			} else {
				p[2] = p[0];
				p[0] = cases[c].bad;
			}
			memset(rb, T_CANARY, 8192);
			memset(reg, T_CANARY, 8192);
			EXPECT_ERR(opends_batch_submit(b, 3, p, 0), cases[c].code);
			unsigned nr = 4;
			opends_io_events_t ev[4];
			struct timespec ts = { 0, 20 * 1000 * 1000 };
			OK(opends_batch_get_status(b, 1, &nr, ev, &ts));
			CHECKF(nr == 0, "%s: a refused submit delivered %u completions", cases[c].what, nr);
			VERIFY_CANARY(rb, 8192, "%s: a refused submit read into the buffer", cases[c].what);
			VERIFY_CANARY(reg, 8192, "%s: a refused submit read into the registered buffer", cases[c].what);
			check_wfile(cases[c].what);
		}
	}
	t_phase = "submit argument errors";
	opends_io_params_t p1 = P(OPENDS_READ, rfh, rb, 0, 0, 100, 1);
	EXPECT_ERR(opends_batch_submit(b, 0, &p1, 0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_submit(b, 1, &p1, 1), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_submit(b, 1, NULL, 0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_submit(NULL, 1, &p1, 0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_submit((opends_batch_t)(uintptr_t)0x7777777700000001ull, 1, &p1, 0),
		   OPENDS_INVALID_VALUE);
	unsigned nr = 4;
	opends_io_events_t ev[4];
	struct timespec bad_ts = { 0, 1000000000L }, neg_ts = { -1, 0 }, ts0 = zero_ts;
	EXPECT_ERR(opends_batch_get_status(b, 0, NULL, ev, &ts0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_get_status(b, 0, &nr, NULL, &ts0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_get_status(b, 0, &nr, ev, &bad_ts), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_get_status(b, 0, &nr, ev, &neg_ts), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_get_status(NULL, 0, &nr, ev, &ts0), OPENDS_INVALID_VALUE);
	nr = 0;
	OK(opends_batch_get_status(b, 0, &nr, NULL, &ts0));
	EXPECT_ERR(opends_batch_cancel(NULL), OPENDS_INVALID_VALUE);
	/* still usable after all the refusals */
	OK(opends_batch_submit(b, 1, &p1, 0));
	collect(b, 1, ev);
	CHECK(ev[0].status == OPENDS_COMPLETE && ev[0].ret == 100);
	VERIFY(rb, roracle, 100, "read after refusals");
	OK(opends_batch_destroy(b));
	OK(opends_buf_deregister(reg));
	free(wb);
	free(rb);
	free(reg);
}

/* I/O errors are delivered as OPENDS_FAILED with the negated errno. */
static void failed_entries(opends_handle_t rfh, opends_handle_t wfh, const char *wpath, bool direct)
{
	t_phase = "failed entries";
	int ro = t_open(wpath, O_RDONLY, direct), wo = t_open(wpath, O_WRONLY, direct);
	opends_handle_t hro = t_register(ro), hwo = t_register(wo);
	opends_batch_t b;
	OK(opends_batch_setup(&b, 8));
	uint8_t *buf = t_xmalloc(4 * 4096);
	t_fill_seed(buf, 2024, 4096);
	opends_io_params_t p[4] = {
		P(OPENDS_WRITE, hro, buf, 0, 0, 4096, 1),         /* read-only fd: -EBADF */
		P(OPENDS_READ, rfh, buf, 5, 4096, 4096, 2),       /* fine */
		P(OPENDS_READ, hwo, buf, 0, 8192, 100, 3),        /* write-only fd: -EBADF */
		P(OPENDS_WRITE, wfh, buf, 3, 0, 10, 4),           /* fine */
	};
	OK(opends_batch_submit(b, 4, p, 0));
	memcpy(woracle + 3, buf, 10);
	opends_io_events_t ev[4];
	const opends_io_events_t *byc[4];
	collect(b, 4, ev);
	index_events(ev, 4, byc);
	CHECKF(byc[0]->status == OPENDS_FAILED && byc[0]->ret == -EBADF,
	       "write through read-only fd: status 0x%x ret %zd, expected FAILED -EBADF", byc[0]->status, byc[0]->ret);
	CHECKF(byc[2]->status == OPENDS_FAILED && byc[2]->ret == -EBADF,
	       "read through write-only fd: status 0x%x ret %zd, expected FAILED -EBADF", byc[2]->status, byc[2]->ret);
	CHECK(byc[1]->status == OPENDS_COMPLETE && byc[1]->ret == 4096);
	CHECK(byc[3]->status == OPENDS_COMPLETE && byc[3]->ret == 10);
	VERIFY(buf + 4096, roracle + 5, 4096, "good read next to failed entries");
	VERIFY_CANARY(buf + 8192, 8192, "a failed read wrote the buffer");
	check_wfile("failed entries");
	OK(opends_batch_destroy(b));
	OK(opends_handle_deregister(hro));
	OK(opends_handle_deregister(hwo));
	close(ro);
	close(wo);
	free(buf);
}

static void cancel(opends_handle_t rfh)
{
	t_phase = "cancel";
	unsigned n = props.max_batch_io_size < 512 ? props.max_batch_io_size : 512;
	opends_batch_t b;
	OK(opends_batch_setup(&b, n));
	const size_t S = 4096 + 3;
	uint8_t *buf = t_xmalloc(n * S);
	opends_io_params_t *p = calloc(n, sizeof *p);
	opends_io_events_t *ev = calloc(n, sizeof *ev);
	const opends_io_events_t **byc = calloc(n, sizeof *byc);
	CHECK(p && ev && byc);
	for (int round = 0; round < 3; round++) {
		memset(buf, T_CANARY, n * S);
		for (unsigned i = 0; i < n; i++)
			p[i] = P(OPENDS_READ, rfh, buf, (off_t)((i * 7919u) % (RF - S)), (off_t)(i * S), S, i + 1);
		OK(opends_batch_submit(b, n, p, 0));
		OK(opends_batch_cancel(b));
		/* cancel returns once nothing runs: everything is ready now */
		unsigned nr = n;
		struct timespec ts = zero_ts;
		OK(opends_batch_get_status(b, 0, &nr, ev, &ts));
		CHECKF(nr == n, "after cancel returned, only %u of %u completions were ready", nr, n);
		index_events(ev, n, byc);
		unsigned done = 0, canceled = 0;
		for (unsigned i = 0; i < n; i++) {
			const opends_io_events_t *e = byc[i];
			uint8_t *dst = buf + (size_t)i * S;
			if (e->status == OPENDS_COMPLETE) {
				CHECKF(e->ret == (ssize_t)S, "completed entry %u ret %zd", i, e->ret);
				VERIFY(dst, roracle + p[i].u.batch.file_offset, S, "completed entry %u data", i);
				done++;
			} else {
				CHECKF(e->status == OPENDS_CANCELED, "entry %u status 0x%x ret %zd, expected COMPLETE or CANCELED",
				       i, e->status, e->ret);
				VERIFY_CANARY(dst, S, "cancelled (never started) entry %u wrote its buffer", i);
				canceled++;
			}
		}
		printf("cancel round %d: %u completed, %u cancelled\n", round, done, canceled);
		collect(b, 0, ev);
	}
	OK(opends_batch_destroy(b));
	free(buf);
	free(p);
	free(ev);
	free(byc);
}

/* Writes past the end of the file cancelled before they started leave the
 * file as it was: its size is the end of the furthest completed write
 * (uring allocates a large write's range when it starts it; it did so at
 * submission, and a cancelled 2 MiB write left the file 2 MiB long: the
 * differential test, seed 29923097307). */
static void cancel_writes(bool direct)
{
	t_phase = "cancel writes past the end";
	enum { N = 16 };
	const size_t W = (size_t)2 << 20;
	const off_t S0 = 3 * 4096;
	char path[512];
	t_path(path, sizeof path, "batch_cw.bin");
	t_write_pattern_file(path, (size_t)S0, pat16);
	int fd = t_open(path, O_RDWR, direct);
	opends_handle_t fh = t_register(fd);
	uint8_t *src = t_xmalloc(W);
	for (size_t i = 0; i < W; i++)
		src[i] = (uint8_t)(i * 131u + 7u);
	opends_batch_t b;
	OK(opends_batch_setup(&b, N));
	opends_io_params_t p[N];
	for (unsigned i = 0; i < N; i++)
		p[i] = P(OPENDS_WRITE, fh, src, S0 + (off_t)(i * W), 0, W, i + 1);
	OK(opends_batch_submit(b, N, p, 0));
	OK(opends_batch_cancel(b));
	opends_io_events_t ev[N];
	const opends_io_events_t *byc[N];
	unsigned nr = N;
	struct timespec ts = zero_ts;
	OK(opends_batch_get_status(b, 0, &nr, ev, &ts));
	CHECKF(nr == N, "after cancel returned, only %u of %u completions were ready", nr, (unsigned)N);
	index_events(ev, N, byc);
	off_t end = S0;
	unsigned canceled = 0;
	for (unsigned i = 0; i < N; i++) {
		if (byc[i]->status == OPENDS_COMPLETE) {
			CHECKF(byc[i]->ret == (ssize_t)W, "completed write %u ret %zd", i, byc[i]->ret);
			off_t e = S0 + (off_t)((i + 1) * W);
			end = e > end ? e : end;
		} else {
			CHECKF(byc[i]->status == OPENDS_CANCELED, "write %u status 0x%x ret %zd, expected COMPLETE or CANCELED",
			       i, byc[i]->status, byc[i]->ret);
			canceled++;
		}
	}
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	CHECKF(st.st_size == end, "file is %lld bytes after %u of %u writes were cancelled; the completed ones end at %lld",
	       (long long)st.st_size, canceled, (unsigned)N, (long long)end);
	printf("cancel writes%s: %u cancelled, file %lld bytes as expected\n", direct ? " (O_DIRECT)" : "", canceled,
	       (long long)st.st_size);
	OK(opends_batch_destroy(b));
	OK(opends_handle_deregister(fh));
	close(fd);
	unlink(path);
	free(src);
}

static void timeouts_and_destroy(opends_handle_t rfh)
{
	t_phase = "timeout with nothing pending";
	opends_batch_t b;
	OK(opends_batch_setup(&b, 256));
	unsigned nr = 8;
	opends_io_events_t ev[8];
	struct timespec ts = { 3, 0 };
	double t0 = t_now();
	OK(opends_batch_get_status(b, 1, &nr, ev, &ts));
	CHECK(nr == 0);
	CHECKF(t_now() - t0 < 2.0, "get_status with nothing submitted took %.2f s", t_now() - t0);

	t_phase = "destroy with entries in flight";
	const size_t S = 16384;
	uint8_t *buf = t_xmalloc(256 * S);
	opends_io_params_t *p = calloc(256, sizeof *p);
	CHECK(p);
	for (unsigned i = 0; i < 256; i++)
		p[i] = P(OPENDS_READ, rfh, buf, (off_t)((i * 4099u) % (RF - S)), (off_t)(i * S), S, i + 1);
	OK(opends_batch_submit(b, 256, p, 0));
	OK(opends_batch_destroy(b));
	/* nothing may write the buffers after destroy returned */
	uint8_t *snap = t_xmalloc(256 * S);
	memcpy(snap, buf, 256 * S);
	usleep(50 * 1000);
	VERIFY(buf, snap, 256 * S, "a buffer changed after opends_batch_destroy returned");
	/* whatever did run, ran right */
	for (unsigned i = 0; i < 256; i++) {
		uint8_t *dst = buf + (size_t)i * S;
		size_t at;
		if (t_first_not(dst, S, T_CANARY, &at))
			VERIFY(dst, roracle + p[i].u.batch.file_offset, S, "entry %u run before destroy", i);
	}
	free(buf);
	free(snap);
	free(p);

	/* the batch is gone */
	nr = 8;
	struct timespec ts0 = zero_ts;
	EXPECT_ERR(opends_batch_get_status(b, 0, &nr, ev, &ts0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_destroy(b), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_destroy(NULL), OPENDS_INVALID_VALUE);
}

static void setup_limits(void)
{
	t_phase = "setup limits";
	opends_batch_t b;
	EXPECT_ERR(opends_batch_setup(&b, 0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_setup(&b, props.max_batch_io_size + 1), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_setup(&b, UINT_MAX), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_setup(NULL, 4), OPENDS_INVALID_VALUE);
	OK(opends_batch_setup(&b, props.max_batch_io_size));
	OK(opends_batch_destroy(b));
	OK(opends_batch_setup(&b, 1));
	OK(opends_batch_destroy(b));
}

/* Two threads collecting from one batch: every completion goes to exactly
 * one of them. */
enum { CN = 256 };
struct collector {
	opends_batch_t b;
	opends_io_events_t ev[CN];
	unsigned got;
	_Atomic unsigned *total;
	char err[160];
};

static void *collector_main(void *arg)
{
	struct collector *c = arg;
	double t0 = t_now();
	while (*c->total < CN) {
		if (t_now() - t0 > 60) {
			snprintf(c->err, sizeof c->err, "collector timed out with %u delivered", (unsigned)*c->total);
			return NULL;
		}
		unsigned nr = 7; /* small room: many calls, more interleaving */
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		opends_error_t e = opends_batch_get_status(c->b, 1, &nr, c->ev + c->got, &ts);
		if (e.err) {
			snprintf(c->err, sizeof c->err, "get_status: %s", t_errname(e.err));
			return NULL;
		}
		c->got += nr;
		*c->total += nr;
		if (c->got + 7 > CN)
			break;
	}
	return NULL;
}

static void concurrent_collectors(opends_handle_t rfh)
{
	t_phase = "two threads collecting";
	opends_batch_t b;
	OK(opends_batch_setup(&b, CN));
	uint8_t *buf = t_xmalloc((size_t)CN * 1000);
	static opends_io_params_t p[CN];
	for (unsigned i = 0; i < CN; i++)
		p[i] = P(OPENDS_READ, rfh, buf, (off_t)i * 997, (off_t)i * 1000, 1000, i + 1);
	static struct collector c[2];
	_Atomic unsigned total = 0;
	pthread_t th[2];
	for (int t = 0; t < 2; t++) {
		memset(&c[t], 0, sizeof c[t]);
		c[t].b = b;
		c[t].total = &total;
		CHECK(pthread_create(&th[t], NULL, collector_main, &c[t]) == 0);
	}
	OK(opends_batch_submit(b, CN, p, 0));
	for (int t = 0; t < 2; t++)
		CHECK(pthread_join(th[t], NULL) == 0);
	for (int t = 0; t < 2; t++)
		CHECKF(!c[t].err[0], "collector %d: %s", t, c[t].err);
	static opends_io_events_t all[CN + 14];
	unsigned n = 0;
	for (int t = 0; t < 2; t++)
		for (unsigned i = 0; i < c[t].got; i++)
			all[n++] = c[t].ev[i];
	/* what the collectors left (they stop when out of room) */
	if (n < CN)
		collect(b, CN - n, all + n);
	else
		collect(b, 0, all);
	CHECKF(total <= CN, "%u completions delivered for %u entries", (unsigned)total, CN);
	const opends_io_events_t *byc[CN];
	index_events(all, CN, byc);
	for (unsigned i = 0; i < CN; i++) {
		CHECKF(byc[i]->status == OPENDS_COMPLETE && byc[i]->ret == 1000, "entry %u: status 0x%x ret %zd", i,
		       byc[i]->status, byc[i]->ret);
		VERIFY(buf + (size_t)i * 1000, roracle + (size_t)i * 997, 1000, "entry %u data", i);
	}
	OK(opends_batch_destroy(b));
	free(buf);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(280);
	char rpath[PATH_MAX], wpath[PATH_MAX];
	t_path(rpath, sizeof rpath, T_HASH_NAME);
	t_path(wpath, sizeof wpath, "batch_w.bin");
	t_write_pattern_file(rpath, RF, hashpat);
	roracle = t_oracle(RF, hashpat);

	t_driver_open();
	printf("backend %s\n", opends_driver_backend());
	OK(opends_driver_get_properties(&props));
	CHECK(props.max_batch_io_size >= 16);
	setup_limits();
	for (int d = 0; d < 2; d++) {
		wsize = 200 * T_KiB + 5;
		t_write_pattern_file(wpath, wsize, pat16);
		free(woracle);
		woracle = t_oracle(wsize, pat16);
		int rfd = t_open(rpath, O_RDONLY, d), wfd = t_open(wpath, O_RDWR, d);
		if (rfd == -2 || wfd == -2)
			continue;
		wchk = t_open(wpath, O_RDONLY, false);
		opends_handle_t rfh = t_register(rfd), wfh = t_register(wfd);
		int sfd = t_open(rpath, O_RDONLY, false);
		opends_handle_t stale = t_register(sfd);
		OK(opends_handle_deregister(stale));

		mixed(rfh, wfh, d);
		capacity(rfh);
		all_or_nothing(rfh, wfh, stale);
		failed_entries(rfh, wfh, wpath, d);
		cancel(rfh);
		cancel_writes(d);
		concurrent_collectors(rfh);
		timeouts_and_destroy(rfh);

		OK(opends_handle_deregister(rfh));
		OK(opends_handle_deregister(wfh));
		close(rfd);
		close(wfd);
		close(sfd);
		close(wchk);
		printf("batch%s: OK\n", d ? " (O_DIRECT)" : "");
	}
	OK(opends_driver_close());
	free(roracle);
	free(woracle);
	return 0;
}
