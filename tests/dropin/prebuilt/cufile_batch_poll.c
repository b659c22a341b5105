/*
 * cufile_batch_poll [--mem=host|device] DIR
 *
 * Batch I/O as programs drive it: one batch set up once and reused round
 * after round (KvikIO's BatchHandle), entries polled with min_nr 0 until
 * all are in, or waited for with min_nr and a timeout; reads and writes
 * mixed in one submit, two submits sharing one batch, cancel and destroy
 * with entries in flight. Every completed entry's bytes are checked
 * against the file (how many did not complete is an answer), every cookie
 * must come back exactly once. Answers to edge cases
 * (entries past the end of the file, through a write-only handle, of size
 * 0; submits of 0 entries, with flags or a bad opcode; status with nothing
 * submitted) print as "= name value" lines.
 */
#include "prog.h"

#include <time.h>

#define ESZ 65536u
#define SRC_SZ (2u << 20)

static uint8_t *oracle;
static void *buf;
static unsigned N;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void entry(CUfileIOParams_t *p, CUfileHandle_t fh, CUfileOpcode_t op, unsigned i, off_t foff, size_t size)
{
	memset(p, 0, sizeof(*p));
	p->mode = CUFILE_BATCH;
	p->fh = fh;
	p->opcode = op;
	p->cookie = (void *)(uintptr_t)(i + 1);
	p->u.batch.devPtr_base = buf;
	p->u.batch.devPtr_offset = (off_t)(i * ESZ + i % 7);
	p->u.batch.file_offset = foff;
	p->u.batch.size = size;
}

/* Collect up to n events within secs seconds: min_nr 0 polls (wait NULL)
 * or min_nr n with a 5 s timeout per call. Each cookie exactly once.
 * Returns how many came. */
static unsigned collect_upto(CUfileBatchHandle_t b, CUfileIOEvents_t *ev, unsigned n, bool wait, const char *what,
			     double secs)
{
	unsigned got = 0, calls = 0;
	double end = now() + secs;
	while (got < n && now() <= end) {
		unsigned nr = n - got;
		struct timespec to = { 5, 0 };
		CUfileError_t e = cuFileBatchIOGetStatus(b, wait ? nr : 0, &nr, ev + got, wait ? &to : NULL);
		if (e.err)
			FAIL("%s: cuFileBatchIOGetStatus: %d", what, (int)e.err);
		if (nr > n - got)
			FAIL("%s: %u events for room %u", what, nr, n - got);
		got += nr;
		calls++;
	}
	for (unsigned i = 0; i < got; i++)
		for (unsigned j = i + 1; j < got; j++)
			if (ev[i].cookie == ev[j].cookie)
				FAIL("%s: cookie %p delivered twice", what, ev[i].cookie);
	printf("# %s: %u events in %u calls\n", what, got, calls);
	return got;
}

/* All n events, or fail after 60 s. */
static void collect(CUfileBatchHandle_t b, CUfileIOEvents_t *ev, unsigned n, bool wait, const char *what)
{
	unsigned got = collect_upto(b, ev, n, wait, what, 60);
	if (got < n)
		FAIL("%s: %u of %u events after 60 s", what, got, n);
}

/* An answer that must be success for the flow to go on. */
static void ans_ok(const char *name, CUfileError_t e)
{
	ans(name, e);
	if (e.err)
		FAIL("%s: %d", name, (int)e.err);
}

/* Entries of the last check_read that did not complete with their size
 * (NVIDIA's libcufile 1.15.1 fails some host-memory entries in compat
 * mode: compare-final, 2026-12-01): their count is an answer line, the
 * first one a comment; the bytes of the others are checked. */
static bool failed[64];

static void check_read(const CUfileIOEvents_t *ev, const CUfileIOParams_t *p, unsigned n, const char *what)
{
	unsigned nfail = 0;
	memset(failed, 0, sizeof failed);
	for (unsigned k = 0; k < n; k++) {
		unsigned i = (unsigned)(uintptr_t)ev[k].cookie - 1;
		if (i >= n)
			FAIL("%s: cookie %p was never submitted", what, ev[k].cookie);
		const CUfileIOParams_t *q = &p[i];
		if (ev[k].status != CUFILE_COMPLETE || ev[k].ret != q->u.batch.size) {
			if (!nfail)
				printf("# %s: entry %u status %d ret %zd, expected %d and %zu\n", what, i,
				       (int)ev[k].status, (ssize_t)ev[k].ret, (int)CUFILE_COMPLETE, q->u.batch.size);
			nfail++;
			failed[i] = true;
			continue;
		}
		if (q->opcode == CUFILE_READ)
			expect_bytes(buf, (size_t)q->u.batch.devPtr_offset, oracle + q->u.batch.file_offset,
				     q->u.batch.size, what);
	}
	char name[64];
	snprintf(name, sizeof name, "%s", what);
	for (char *c = name; *c; c++)
		if (*c == ' ')
			*c = '_';
	printf("= %s_entries_failed %u\n", name, nfail);
}

/* One entry alone: the submit's answer, then its event's status and ret. */
static void one(CUfileBatchHandle_t b, const char *name, CUfileHandle_t fh, CUfileOpcode_t op, off_t foff,
		size_t size)
{
	CUfileIOParams_t p;
	entry(&p, fh, op, 0, foff, size);
	CUfileError_t e = cuFileBatchIOSubmit(b, 1, &p, 0);
	if (e.err) {
		printf("= %s submit %d\n", name, (int)e.err);
		return;
	}
	CUfileIOEvents_t ev;
	if (!collect_upto(b, &ev, 1, true, name, 10)) {
		printf("= %s no event in 10 s\n", name);
		return;
	}
	printf("= %s status %d ret %lld\n", name, (int)ev.status, (long long)(ssize_t)ev.ret);
}

int main(int argc, char **argv)
{
	const char *dir = prog_args(argc, argv);
	char src[512], dst[512];
	make_file(dir, "batch_src.bin", SRC_SZ, 2, &oracle, src, sizeof src);
	make_file(dir, "batch_dst.bin", 0, 0, NULL, dst, sizeof dst);

	ans("driver_open", cuFileDriverOpen());
	CUfileDrvProps_t props;
	ans("props", cuFileDriverGetProperties(&props));
	N = props.max_batch_io_size < 32 ? props.max_batch_io_size : 32;
	printf("# max_batch_io_size %u, batches of %u\n", props.max_batch_io_size, N);
	if (N < 8)
		FAIL("max_batch_io_size %u", N);
	bool direct;
	int rfd = open_direct(src, O_RDONLY, &direct), wfd = open(dst, O_RDWR), wofd = open(src, O_WRONLY);
	CUfileHandle_t rfh = reg_ok(rfd), wfh = reg_ok(wfd), wofh = reg_ok(wofd);
	buf = m_alloc(N * ESZ);
	ans_ok("buf_register", cuFileBufRegister(buf, N * ESZ, 0));
	CUfileIOParams_t *p = calloc(N, sizeof(*p));
	CUfileIOEvents_t *ev = calloc(N, sizeof(*ev));
	CUfileBatchHandle_t b;
	CUfileError_t e = cuFileBatchIOSetUp(&b, props.max_batch_io_size + 1);
	ans("setup_max_plus_1", e);
	if (!e.err)
		cuFileBatchIODestroy(b);
	ans_ok("setup", cuFileBatchIOSetUp(&b, N));

	/* round 1: N reads, polled with min_nr 0 */
	for (unsigned i = 0; i < N; i++)
		entry(&p[i], rfh, CUFILE_READ, i, (off_t)i * 50021, 4096 * (i % 16 + 1) - (i % 3) * 100);
	m_fill(buf, 0xEE, N * ESZ);
	ans_ok("submit_reads", cuFileBatchIOSubmit(b, N, p, 0));
	collect(b, ev, N, false, "round 1 (polled)");
	check_read(ev, p, N, "round 1");
	bool failed1[64];
	memcpy(failed1, failed, sizeof failed);

	/* round 2, the same batch: half writes (from what round 1 read) and
	 * half reads in one submit, waited for with min_nr and a timeout */
	for (unsigned i = 0; i < N; i++)
		if (i % 2)
			entry(&p[i], wfh, CUFILE_WRITE, i, (off_t)i * ESZ, p[i].u.batch.size);
		else
			entry(&p[i], rfh, CUFILE_READ, i, (off_t)(SRC_SZ - (i + 1) * ESZ), ESZ - 7);
	ans_ok("submit_mixed", cuFileBatchIOSubmit(b, N, p, 0));
	collect(b, ev, N, true, "round 2 (waited)");
	check_read(ev, p, N, "round 2");
	uint8_t *h = malloc(ESZ);
	for (unsigned i = 1; i < N; i += 2) {
		if (failed1[i] || failed[i]) /* nothing read to write, or not written */
			continue;
		size_t n = p[i].u.batch.size;
		if (pread(wfd, h, n, (off_t)i * ESZ) != (ssize_t)n || memcmp(h, oracle + (size_t)i * 50021, n))
			FAIL("round 2: batch write %u: the file differs", i);
	}

	/* round 3: two submits share the batch's room, collected together */
	for (unsigned i = 0; i < N; i++)
		entry(&p[i], rfh, CUFILE_READ, i, (off_t)(i * 4093), 8192 + i);
	ans_ok("submit_first_half", cuFileBatchIOSubmit(b, N / 2, p, 0));
	ans_ok("submit_second_half", cuFileBatchIOSubmit(b, N - N / 2, p + N / 2, 0));
	collect(b, ev, N, false, "round 3 (two submits)");
	check_read(ev, p, N, "round 3");

	/* status when nothing is in flight: success, no events */
	unsigned nr = N;
	struct timespec shortwait = { 0, 10 * 1000 * 1000 };
	e = cuFileBatchIOGetStatus(b, 0, &nr, ev, &shortwait);
	printf("= status_nothing_in_flight %d nr %u\n", (int)e.err, nr);
	ans("status_nr_null", cuFileBatchIOGetStatus(b, 0, NULL, ev, NULL));
	/* min_nr above the room: capped at the room (one event comes back) */
	entry(&p[0], rfh, CUFILE_READ, 0, 0, 4096);
	entry(&p[1], rfh, CUFILE_READ, 1, 4096, 4096);
	ans_ok("submit_two", cuFileBatchIOSubmit(b, 2, p, 0));
	unsigned got = 0;
	double end = now() + 30;
	while (got < 2 && now() < end) {
		nr = 1;
		struct timespec to = { 5, 0 };
		e = cuFileBatchIOGetStatus(b, 2, &nr, ev + got, &to);
		if (e.err) {
			printf("= status_min_nr_above_room %d\n", (int)e.err);
			break;
		}
		if (nr > 1)
			FAIL("%u events for room 1", nr);
		got += nr;
	}
	printf("= status_min_nr_above_room_events %u\n", got);
	if (got < 2) { /* whatever is left, so that the batch is empty */
		nr = 2 - got;
		collect(b, ev, nr, true, "the rest");
	}

	/* submits the batch refuses */
	entry(&p[0], rfh, CUFILE_READ, 0, 0, 4096);
	ans("submit_zero_entries", cuFileBatchIOSubmit(b, 0, p, 0));
	e = cuFileBatchIOSubmit(b, 1, p, 1);
	ans("submit_flags_1", e);
	if (!e.err)
		collect(b, ev, 1, true, "flags 1");
	e = cuFileBatchIOSubmit(b, 1, p, 2);
	ans("submit_flags_2", e);
	if (!e.err)
		collect(b, ev, 1, true, "flags 2");
	entry(&p[0], rfh, (CUfileOpcode_t)7, 0, 0, 4096);
	ans("submit_bad_opcode", cuFileBatchIOSubmit(b, 1, p, 0));
	entry(&p[0], rfh, CUFILE_READ, 0, -4096, 4096);
	ans("submit_negative_offset", cuFileBatchIOSubmit(b, 1, p, 0));

	/* single entries' events */
	one(b, "entry_short_at_eof", rfh, CUFILE_READ, SRC_SZ - 1000, 4096);
	one(b, "entry_past_eof", rfh, CUFILE_READ, SRC_SZ + 8192, 4096);
	one(b, "entry_size_0", rfh, CUFILE_READ, 0, 0);
	one(b, "entry_read_write_only", wofh, CUFILE_READ, 0, 4096);
	one(b, "entry_write_read_only", rfh, CUFILE_WRITE, 0, 4096);

	/* cancel right after a submit: no events afterwards; then the batch
	 * works again */
	for (unsigned i = 0; i < N; i++)
		entry(&p[i], rfh, CUFILE_READ, i, (off_t)i * 50021, ESZ - 8);
	ans("submit_before_cancel", cuFileBatchIOSubmit(b, N, p, 0));
	ans("cancel", cuFileBatchIOCancel(b));
	nr = N;
	e = cuFileBatchIOGetStatus(b, 0, &nr, ev, &shortwait);
	printf("= status_after_cancel %d nr %u\n", (int)e.err, nr);
	/* neither COMPLETE nor CANCELED: an answer (NVIDIA's libcufile
	 * 1.15.1 fails some host-memory entries) */
	unsigned other = 0;
	for (unsigned i = 0; i < nr && i < N; i++)
		other += ev[i].status != CUFILE_COMPLETE && ev[i].status != CUFILE_CANCELED;
	printf("= after_cancel_other_status %u\n", other);
	cuFileBatchIODestroy(b);

	/* destroy with entries in flight, then a new batch works */
	ans_ok("setup_again", cuFileBatchIOSetUp(&b, N));
	ans_ok("submit_then_destroy", cuFileBatchIOSubmit(b, N, p, 0));
	cuFileBatchIODestroy(b);
	ans_ok("setup_after_destroy", cuFileBatchIOSetUp(&b, N));
	m_fill(buf, 0xEE, N * ESZ);
	ans_ok("submit_after_destroy", cuFileBatchIOSubmit(b, N, p, 0));
	collect(b, ev, N, true, "after destroy");
	check_read(ev, p, N, "after destroy");
	cuFileBatchIODestroy(b);

	ans("buf_deregister", cuFileBufDeregister(buf));
	cuFileHandleDeregister(rfh);
	cuFileHandleDeregister(wfh);
	cuFileHandleDeregister(wofh);
	ans("driver_close", cuFileDriverClose());
	close(rfd);
	close(wfd);
	close(wofd);
	unlink(src);
	unlink(dst);
	m_free(buf);
	free(p);
	free(ev);
	free(h);
	free(oracle);
	printf("PASS: cufile_batch_poll, every entry's bytes and cookie (%s memory)\n", device ? "device" : "host");
	return 0;
}
