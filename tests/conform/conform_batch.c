/*
 * conform_batch: API.md "Batch I/O". setup's limits (1..max_batch_io_size
 * of the properties); submit is all or nothing (an invalid entry, or
 * entries that would exceed max_nr, nr > max_nr included, submit nothing:
 * OPENDS_INVALID_VALUE or OPENDS_BATCH_FULL; checked by the file and the
 * completions); *nr is the room on entry and the count on return; each
 * completion delivered once; COMPLETE with ret = bytes (short at EOF),
 * FAILED with the negated error, CANCELED; timeout NULL waits for min_nr,
 * a zero timeout returns what is ready; get_status's, cancel's and
 * destroy's codes for each misuse.
 */
#include "conform.h"

#define FSIZE (1024 * 1024 + 100)

static opends_io_params_t entry(opends_handle_t fh, opends_opcode_t op, void *buf, size_t size, off_t off,
				off_t bo, void *cookie)
{
	opends_io_params_t p;
	memset(&p, 0, sizeof(p));
	p.mode = OPENDS_BATCH;
	p.fh = fh;
	p.opcode = op;
	p.cookie = cookie;
	p.u.batch.buf_base = buf;
	p.u.batch.size = size;
	p.u.batch.file_offset = off;
	p.u.batch.buf_offset = bo;
	return p;
}

/* collect exactly n completions (timeout NULL, min_nr n) */
static unsigned collect(opends_batch_t b, unsigned n, opends_io_events_t *ev)
{
	unsigned got = 0;
	while (got < n) {
		unsigned nr = n - got;
		opends_error_t e = opends_batch_get_status(b, nr, &nr, ev + got, NULL);
		if (e.err) {
			C_FAIL("get_status: %s (%s)", c_name(e.err), opends_last_error_detail());
			break;
		}
		C_TRUE(nr > 0, "get_status with timeout NULL and min_nr %u returned 0 events", n - got);
		if (!nr)
			break;
		got += nr;
	}
	return got;
}

static unsigned ready_now(opends_batch_t b, opends_io_events_t *ev, unsigned room)
{
	struct timespec zero = { 0, 0 };
	unsigned nr = room;
	C_OK(opends_batch_get_status(b, 0, &nr, ev, &zero));
	return nr;
}

static void misuse(opends_handle_t fh, opends_handle_t ro, unsigned max)
{
	c_case = "batch misuse";
	const opends_op_error_t IV = OPENDS_INVALID_VALUE;
	opends_batch_t b;
	C_ERR(opends_batch_setup(NULL, 4), IV);
	C_ERR(opends_batch_setup(&b, 0), IV);
	C_ERR(opends_batch_setup(&b, max + 1), IV);
	C_OK(opends_batch_setup(&b, max));
	C_OK(opends_batch_destroy(b));
	C_OK(opends_batch_setup(&b, 4));
	unsigned char buf[3][4096];
	memset(buf, 0x5A, sizeof(buf));
	opends_io_params_t p[5];
	for (int i = 0; i < 5; i++)
		p[i] = entry(fh, OPENDS_READ, buf[i % 3], 100, (off_t)i * 100, 0, NULL);
	C_ERR(opends_batch_submit(NULL, 1, p, 0), IV);
	C_ERR(opends_batch_submit(b, 1, NULL, 0), IV);
	C_ERR(opends_batch_submit(b, 0, p, 0), IV);
	C_ERR(opends_batch_submit(b, 1, p, 1), IV);
	C_ERR(opends_batch_submit((opends_batch_t)buf, 1, p, 0), IV);
	C_ERR(opends_batch_submit(b, 5, p, 0), OPENDS_BATCH_FULL); /* nr > max_nr */
	/* one bad entry among good ones: nothing submitted */
	static const char *const what[] = { "mode", "opcode", "NULL buffer", "negative file_offset",
					    "negative buf_offset", "size > SSIZE_MAX", "NULL handle" };
	for (int k = 0; k < 7; k++) {
		opends_io_params_t q[3] = { p[0], p[1], p[2] };
		switch (k) {
		case 0: q[1].mode = (opends_batch_mode_t)2; break;
		case 1: q[1].opcode = (opends_opcode_t)2; break;
		case 2: q[1].u.batch.buf_base = NULL; break;
		case 3: q[1].u.batch.file_offset = -1; break;
		case 4: q[1].u.batch.buf_offset = -1; break;
		case 5: q[1].u.batch.size = (size_t)SSIZE_MAX + 1; break;
		case 6: q[1].fh = NULL; break;
		}
		opends_error_t e = opends_batch_submit(b, 3, q, 0);
		C_TRUE(e.err == OPENDS_INVALID_VALUE, "an entry with a bad %s: %s, expected OPENDS_INVALID_VALUE", what[k],
		       c_name(e.err));
		C_TRUE(strstr(opends_last_error_detail(), "1") != NULL, "the detail \"%s\" does not name entry 1",
		       opends_last_error_detail());
	}
	opends_io_params_t q[2] = { p[0], p[1] };
	q[1].fh = (opends_handle_t)buf;
	C_ERR(opends_batch_submit(b, 2, q, 0), OPENDS_HANDLE_NOT_REGISTERED);
	opends_io_events_t ev[8];
	C_TRUE(ready_now(b, ev, 8) == 0, "refused submits delivered completions");
	C_TRUE(c_all(&buf[0][0], sizeof(buf), 0x5A), "a refused submit read data");
	/* full: 3 in flight + 2 > 4 */
	C_OK(opends_batch_submit(b, 3, p, 0));
	C_ERR(opends_batch_submit(b, 2, p + 3, 0), OPENDS_BATCH_FULL);
	C_TRUE(collect(b, 3, ev) == 3, "3 entries gave fewer completions");
	C_TRUE(ready_now(b, ev, 8) == 0, "a completion was delivered twice, or a refused submit ran");
	/* get_status misuse */
	unsigned nr = 4;
	struct timespec neg = { -1, 0 }, big = { 0, 1000000000 };
	C_ERR(opends_batch_get_status(NULL, 0, &nr, ev, NULL), IV);
	C_ERR(opends_batch_get_status(b, 0, NULL, ev, NULL), IV);
	C_ERR(opends_batch_get_status(b, 0, &nr, NULL, NULL), IV);
	nr = 4;
	C_ERR(opends_batch_get_status(b, 0, &nr, ev, &neg), IV);
	nr = 4;
	C_ERR(opends_batch_get_status(b, 0, &nr, ev, &big), IV);
	nr = 4;
	C_ERR(opends_batch_get_status((opends_batch_t)buf, 0, &nr, ev, NULL), IV);
	nr = 0; /* no room: events may be NULL */
	C_OK(opends_batch_get_status(b, 0, &nr, NULL, NULL));
	C_TRUE(nr == 0, "get_status with no room delivered %u", nr);
	C_ERR(opends_batch_cancel(NULL), IV);
	C_ERR(opends_batch_cancel((opends_batch_t)buf), IV);
	C_ERR(opends_batch_destroy(NULL), IV);
	C_ERR(opends_batch_destroy((opends_batch_t)buf), IV);
	C_OK(opends_batch_destroy(b));
	C_ERR(opends_batch_destroy(b), IV);
	C_ERR(opends_batch_cancel(b), IV);
	(void)ro;
}

static void results(opends_handle_t fh, opends_handle_t ro)
{
	c_case = "batch results";
	opends_batch_t b;
	enum { N = 6 };
	C_OK(opends_batch_setup(&b, N));
	unsigned char *buf = malloc(N * 8192);
	memset(buf, 0x5A, N * 8192);
	unsigned char w[500];
	for (int i = 0; i < 500; i++)
		w[i] = c_byte(300000 + (uint64_t)i);
	opends_io_params_t p[N] = {
		entry(fh, OPENDS_READ, buf, 4096, 0, 0, (void *)1),
		entry(fh, OPENDS_READ, buf + 8192, 5000, 4097, 3, (void *)2),
		entry(fh, OPENDS_READ, buf + 2 * 8192, 4096, FSIZE - 100, 1, (void *)3), /* short: 100 */
		entry(fh, OPENDS_READ, buf + 3 * 8192, 4096, FSIZE + 4096, 0, (void *)4), /* past EOF: 0 */
		entry(ro, OPENDS_WRITE, w, 500, 300000, 0, (void *)5),                    /* FAILED -EBADF */
		entry(fh, OPENDS_WRITE, w, 500, 300000, 0, (void *)6),                    /* the same bytes */
	};
	C_OK(opends_batch_submit(b, N, p, 0));
	opends_io_events_t ev[N + 2];
	memset(ev, 0, sizeof(ev));
	/* *nr is the room: ask with room 2, then the rest */
	unsigned nr = 2;
	C_OK(opends_batch_get_status(b, 2, &nr, ev, NULL));
	C_TRUE(nr == 2, "get_status(min_nr 2, room 2) delivered %u", nr);
	unsigned got = nr + collect(b, N - nr, ev + nr);
	C_TRUE(got == N, "%u of %d completions", got, N);
	static const ssize_t want[N + 1] = { 0, 4096, 5000, 100, 0, -EBADF, 500 };
	int seen[N + 1] = { 0 };
	for (unsigned i = 0; i < got; i++) {
		uintptr_t c = (uintptr_t)ev[i].cookie;
		if (c < 1 || c > N) {
			C_FAIL("a completion with cookie %p", ev[i].cookie);
			continue;
		}
		seen[c]++;
		opends_status_t st = want[c] < 0 ? OPENDS_FAILED : OPENDS_COMPLETE;
		C_TRUE(ev[i].status == st && ev[i].ret == want[c], "entry %lu: status 0x%x ret %zd, expected 0x%x ret %zd",
		       (unsigned long)c, ev[i].status, ev[i].ret, st, want[c]);
	}
	for (int c = 1; c <= N; c++)
		C_TRUE(seen[c] == 1, "entry %d delivered %d times", c, seen[c]);
	C_TRUE(c_same(buf, 4096, 0) && c_same(buf + 8192 + 3, 5000, 4097) && c_same(buf + 2 * 8192 + 1, 100, FSIZE - 100),
	       "batch reads: wrong bytes");
	C_TRUE(buf[8192 + 2] == 0x5A && buf[2 * 8192 + 101] == 0x5A && c_all(buf + 3 * 8192, 8192, 0x5A),
	       "batch reads wrote outside their targets");
	C_TRUE(ready_now(b, ev, N) == 0, "completions delivered twice");
	/* timeout: nothing in flight, min_nr 1 and 10 ms returns 0 at expiry */
	struct timespec ten = { 0, 10 * 1000 * 1000 };
	nr = N;
	C_OK(opends_batch_get_status(b, 1, &nr, ev, &ten));
	C_TRUE(nr == 0, "get_status with nothing in flight delivered %u", nr);
	/* cancel: every entry is delivered once, COMPLETE or CANCELED */
	for (int i = 0; i < N; i++)
		p[i] = entry(fh, OPENDS_READ, buf + i * 8192, 8192, (off_t)i * 8192, 0, (void *)(uintptr_t)(i + 1));
	C_OK(opends_batch_submit(b, N, p, 0));
	C_OK(opends_batch_cancel(b));
	memset(seen, 0, sizeof(seen));
	got = 0;
	for (int tries = 0; tries < 100 && got < N; tries++) {
		nr = N;
		C_OK(opends_batch_get_status(b, 0, &nr, ev, &ten));
		for (unsigned i = 0; i < nr; i++) {
			uintptr_t c = (uintptr_t)ev[i].cookie;
			if (c >= 1 && c <= N)
				seen[c]++;
			C_TRUE((ev[i].status == OPENDS_COMPLETE && ev[i].ret == 8192) ||
				       (ev[i].status == OPENDS_CANCELED),
			       "after cancel: status 0x%x ret %zd", ev[i].status, ev[i].ret);
		}
		got += nr;
	}
	for (int c = 1; c <= N; c++)
		C_TRUE(seen[c] == 1, "after cancel, entry %d delivered %d times", c, seen[c]);
	/* a timeout too large for the clock waits as no timeout does */
	C_OK(opends_batch_submit(b, N, p, 0));
	struct timespec huge = { INT64_MAX, 999999999 };
	got = 0;
	while (got < N) {
		nr = N - got;
		opends_error_t e = opends_batch_get_status(b, nr, &nr, ev, &huge);
		if (e.err || nr == 0) {
			C_FAIL("get_status with timeout {INT64_MAX, 999999999}: %s, %u events", c_name(e.err), nr);
			break;
		}
		got += nr;
	}
	/* destroy waits for entries in flight */
	C_OK(opends_batch_submit(b, N, p, 0));
	C_OK(opends_batch_destroy(b));
	free(buf);
}

int main(void)
{
	const char *path = c_file("b", FSIZE);
	if (opends_driver_open().err) {
		fprintf(stderr, "open: %s\n", opends_last_error_detail());
		return 1;
	}
	opends_drv_props_t props;
	C_OK(opends_driver_get_properties(&props));
	int fd = c_open(path, O_RDWR), rfd = c_open(path, O_RDONLY);
	opends_handle_t fh, ro;
	C_OK(opends_handle_register(&fh, fd));
	C_OK(opends_handle_register(&ro, rfd));
	misuse(fh, ro, props.max_batch_io_size);
	results(fh, ro);
	C_OK(opends_handle_deregister(fh));
	C_OK(opends_handle_deregister(ro));
	opends_driver_close();
	return c_done("conform_batch");
}
