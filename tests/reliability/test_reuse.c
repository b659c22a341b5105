/*
 * test_reuse CASE [SECONDS]: a handle deregistered while a call on it is
 * inside, and handles reused after deregistration (up to 64 handles'
 * structs serve the next registrations), one case per process.
 *
 *   held     a source's read callback holds a synchronous read inside;
 *            another thread deregisters the handle. Deregister waits for
 *            the read (it has not returned 50 ms later; release has not
 *            run), the read then completes byte-exact, deregister returns
 *            success, release runs once. Before: on ref (the source read
 *            on the caller's thread, counted nowhere) deregister returned
 *            at once and ran release under the callback.
 *   self     the read callback deregisters its own handle (on the
 *            caller's thread with ref, on a library thread otherwise):
 *            OPENDS_INVALID_VALUE naming the callback, the read completes,
 *            a deregister after it succeeds (no deadlock: the watchdog).
 *   cross    two blocking sources A and B in one domain of one request in
 *            flight: B's read callback (on an engine worker) deregisters
 *            A while A's read waits for the domain's slot B's piece holds.
 *            OPENDS_INVALID_VALUE naming the callback, both reads complete
 *            byte-exact, A deregisters after. Before: deregister waited
 *            for A's read, which waited for B's callback: a hang (the
 *            watchdog), on every backend, host and staged memory.
 *   double   2000 handles (sources and fds), each deregistered by two
 *            threads at once: one succeeds, the other gets
 *            OPENDS_HANDLE_NOT_REGISTERED, release runs once per source.
 *   reuse    two files A and B of different bytes. Reader threads read and
 *            write through the latest handle of A (sync, async, batch,
 *            stream) while a churn thread deregisters it and registers B
 *            and A again, over and over, so that the struct of a deregistered
 *            handle of A serves a handle of B. Every read returns A's
 *            bytes or OPENDS_HANDLE_NOT_REGISTERED; no write through a
 *            handle of A lands in B (B is checked at the end). Before: a
 *            call that had looked the handle up did its I/O on B.
 *   reuse_stream  the same with stream reads too, one on an idle stream
 *            (run at the call) and one queued behind it (run by the
 *            stream's dispatcher after the call), on hostdev (meson:
 *            reuse_stream_*, with and without the direct path). Before
 *            14bcde5 a read reached B within a second, and TSan showed the
 *            dispatcher reading a handle re-registered meanwhile.
 *
 * Exit 0 pass, 1 fail, 77 skip. Backend from OPENDS_BACKEND.
 */
#include "rel.h"

#include <sched.h>

#include "opends/batch.h"
#include "opends/sources.h"

/* ---- held / self: a source read held inside its callback --------------- */

static atomic_int in_read, releases, self_rc = -1;
static atomic_bool hold_read, deregister_in_cb;
static _Atomic(opends_handle_t) src_h;
static char self_detail[256];

static ssize_t src_read(void *src, void *buf, size_t len, uint64_t off)
{
	(void)src;
	atomic_fetch_add(&in_read, 1);
	while (atomic_load(&hold_read))
		r_sleep_ms(1);
	if (atomic_load(&deregister_in_cb)) {
		opends_error_t e = opends_handle_deregister(atomic_load(&src_h));
		snprintf(self_detail, sizeof(self_detail), "%s", opends_last_error_detail());
		atomic_store(&self_rc, (int)e.err);
	}
	r_fill(buf, len, 3, off);
	atomic_fetch_sub(&in_read, 1);
	return (ssize_t)len;
}

static void src_release(void *src)
{
	(void)src;
	R_CHECK(atomic_load(&in_read) == 0, "release ran while a read was inside");
	atomic_fetch_add(&releases, 1);
}

static opends_handle_t source(void)
{
	static opends_source_ops_t ops;
	ops.struct_size = sizeof(ops);
	ops.name = "held";
	ops.read = src_read;
	ops.release = src_release;
	opends_handle_t h = r_blocking_source(&ops);
	atomic_store(&src_h, h);
	return h;
}

/* ---- cross: B's callback deregisters A, whose read waits behind it ----- */

static _Atomic(opends_handle_t) cross_a;
static atomic_bool cross_in_b, cross_a_sent;
static atomic_int cross_rc = -1, cross_releases;
static char cross_detail[256];

static ssize_t cross_read(void *src, void *buf, size_t len, uint64_t off)
{
	if ((uintptr_t)src == 2 && !atomic_exchange(&cross_in_b, true)) {
		/* A's read is submitted (its request counted) and waits for
		 * the domain's only slot, which this piece holds */
		while (!atomic_load(&cross_a_sent))
			r_sleep_ms(1);
		opends_error_t e = opends_handle_deregister(atomic_load(&cross_a));
		snprintf(cross_detail, sizeof(cross_detail), "%s", opends_last_error_detail());
		atomic_store(&cross_rc, (int)e.err);
	}
	r_fill(buf, len, (uint32_t)(uintptr_t)src, off);
	return (ssize_t)len;
}

static void cross_release(void *src)
{
	(void)src;
	atomic_fetch_add(&cross_releases, 1);
}

static void case_cross(void)
{
	r_phase = "cross";
	static opends_source_ops_t ops;
	ops.struct_size = sizeof(ops);
	ops.name = "cross";
	ops.read = cross_read;
	ops.release = cross_release;
	opends_source_desc_t d;
	memset(&d, 0, sizeof(d));
	d.struct_size = sizeof(d);
	d.ops = &ops;
	d.flags = OPENDS_SOURCE_BLOCKING | OPENDS_SOURCE_RDONLY;
	d.size = 1 << 20;
	d.domain = 0x5eed;
	d.max_inflight = 1;
	opends_handle_t a = NULL, b = NULL;
	d.src = (void *)(uintptr_t)1;
	R_TRY(opends_handle_register_source(&a, &d));
	d.src = (void *)(uintptr_t)2;
	R_TRY(opends_handle_register_source(&b, &d));
	atomic_store(&cross_a, a);
	static uint8_t ba[64 << 10], bb[64 << 10];
	opends_async_future_t fa, fb;
	R_TRY(opends_async_read(b, bb, sizeof(bb), 4096, 0, &fb));
	while (!atomic_load(&cross_in_b))
		r_sleep_ms(1);
	R_TRY(opends_async_read(a, ba, sizeof(ba), 8192, 0, &fa));
	atomic_store(&cross_a_sent, true);
	ssize_t rb = opends_async_await(&fb), ra = opends_async_await(&fa);
	R_CHECK(atomic_load(&cross_rc) == OPENDS_INVALID_VALUE, "deregister of A from B's callback: %s (%s)",
		opends_err_name(atomic_load(&cross_rc)), cross_detail);
	R_CHECK(strstr(cross_detail, "callback") != NULL, "detail does not name the callback: %s", cross_detail);
	R_CHECK(rb == (ssize_t)sizeof(bb) && ra == (ssize_t)sizeof(ba), "the reads returned %zd (B) and %zd (A)", rb,
		ra);
	R_CHECK(r_first_bad(bb, sizeof(bb), 2, 4096) < 0 && r_first_bad(ba, sizeof(ba), 1, 8192) < 0,
		"the reads' bytes are wrong");
	R_CHECK(atomic_load(&cross_releases) == 0, "a release ran before deregistration");
	R_TRY(opends_handle_deregister(a));
	R_TRY(opends_handle_deregister(b));
	R_CHECK(atomic_load(&cross_releases) == 2, "release ran %d times for 2 handles", atomic_load(&cross_releases));
	printf("cross: refused with INVALID_VALUE (%s); both reads byte-exact; deregistered after\n", cross_detail);
}

static atomic_bool dereg_done;
static opends_error_t dereg_e;

static void *dereg_thread(void *arg)
{
	dereg_e = opends_handle_deregister((opends_handle_t)arg);
	atomic_store(&dereg_done, true);
	return NULL;
}

static ssize_t read_res;
static uint8_t read_buf[64 << 10];

static void *read_thread(void *arg)
{
	read_res = opends_sync_read((opends_handle_t)arg, read_buf, sizeof(read_buf), 4096, 0);
	return NULL;
}

static void case_held(void)
{
	r_phase = "held";
	opends_handle_t h = source();
	atomic_store(&hold_read, true);
	pthread_t rt, dt;
	pthread_create(&rt, NULL, read_thread, h);
	while (!atomic_load(&in_read))
		r_sleep_ms(1);
	pthread_create(&dt, NULL, dereg_thread, h);
	r_sleep_ms(50);
	R_CHECK(!atomic_load(&dereg_done), "deregister returned while a synchronous read on the handle was inside");
	R_CHECK(atomic_load(&releases) == 0, "release ran while a synchronous read on the handle was inside");
	atomic_store(&hold_read, false);
	pthread_join(rt, NULL);
	pthread_join(dt, NULL);
	R_CHECK(read_res == (ssize_t)sizeof(read_buf), "the held read returned %zd (%s)", read_res,
		opends_err_name((int)read_res));
	R_CHECK(r_first_bad(read_buf, sizeof(read_buf), 3, 4096) < 0, "the held read's bytes are wrong");
	R_TRY(dereg_e);
	R_CHECK(atomic_load(&releases) == 1, "release ran %d times", atomic_load(&releases));
	printf("held: deregister waited for the read inside, which completed byte-exact; release ran once after\n");
}

static void case_self(void)
{
	r_phase = "self";
	opends_handle_t h = source();
	atomic_store(&deregister_in_cb, true);
	read_thread(h);
	atomic_store(&deregister_in_cb, false);
	R_CHECK(atomic_load(&self_rc) == OPENDS_INVALID_VALUE, "deregister from the read's callback: %s (%s)",
		opends_err_name(atomic_load(&self_rc)), self_detail);
	R_CHECK(strstr(self_detail, "callback") != NULL, "detail does not name the callback: %s", self_detail);
	R_CHECK(read_res == (ssize_t)sizeof(read_buf), "the read returned %zd", read_res);
	R_CHECK(r_first_bad(read_buf, sizeof(read_buf), 3, 4096) < 0, "the read's bytes are wrong");
	R_TRY(opends_handle_deregister(h));
	R_CHECK(atomic_load(&releases) == 1, "release ran %d times", atomic_load(&releases));
	printf("self: refused with INVALID_VALUE (%s); deregistered after the read\n", self_detail);
}

/* ---- double: two threads deregister one handle -------------------------- */

static _Atomic(opends_handle_t) dbl_h;
static atomic_uint dbl_round, dbl_done;
static atomic_int dbl_ok, dbl_missing;

static void *dbl_thread(void *arg)
{
	(void)arg;
	for (unsigned r = 1; r <= 2000; r++) {
		while (atomic_load(&dbl_round) < r)
			sched_yield();
		opends_error_t e = opends_handle_deregister(atomic_load(&dbl_h));
		if (!e.err)
			atomic_fetch_add(&dbl_ok, 1);
		else if (e.err == OPENDS_HANDLE_NOT_REGISTERED)
			atomic_fetch_add(&dbl_missing, 1);
		else
			R_FAIL("round %u: deregister returned %s", r, opends_err_name((int)e.err));
		atomic_fetch_add(&dbl_done, 1);
	}
	return NULL;
}

/* Each round a new handle (a source's, or an fd's: both kinds are
 * reused), deregistered by two threads at once: one succeeds, the other
 * gets OPENDS_HANDLE_NOT_REGISTERED, nothing is touched after it is freed
 * (ASan: the refusal check for callbacks read the handle unlocked). */
static void case_double(void)
{
	r_phase = "double";
	char p[PATH_MAX + 32];
	snprintf(p, sizeof(p), "%s/d", r_tmpdir("reuse"));
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	R_CHECK(fd >= 0, "open: %s", strerror(errno));
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, dbl_thread, NULL);
	for (unsigned r = 1; r <= 2000; r++) {
		opends_handle_t h;
		if (r % 2)
			h = source();
		else
			R_TRY(opends_handle_register(&h, fd));
		atomic_store(&dbl_h, h);
		atomic_store(&dbl_round, r);
		while (atomic_load(&dbl_done) < 2 * r)
			sched_yield();
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	close(fd);
	R_CHECK(atomic_load(&dbl_ok) == 2000 && atomic_load(&dbl_missing) == 2000,
		"%d deregisters succeeded and %d found nothing, want 2000 each", atomic_load(&dbl_ok),
		atomic_load(&dbl_missing));
	R_CHECK(atomic_load(&releases) == 1000, "release ran %d times for 1000 sources", atomic_load(&releases));
	printf("double: 2000 handles deregistered by two threads at once: one success and one not-registered each\n");
}

/* ---- reuse ------------------------------------------------------------- */

#define RU_SIZE (256u << 10)
#define RU_READERS 2
static int fd_a, fd_b;
static _Atomic(opends_handle_t) cur_a; /* the latest handle of A */
static atomic_bool ru_stop;
static atomic_ulong ru_ok, ru_stale;
static bool ru_streams; /* reuse_stream: stream reads too */

static void ru_check(ssize_t r, const uint8_t *b, size_t n, uint64_t off, const char *how)
{
	if (r == -OPENDS_HANDLE_NOT_REGISTERED) {
		atomic_fetch_add(&ru_stale, 1);
		return;
	}
	R_CHECK(r == (ssize_t)n, "%s of %zu at %llu through a handle of A returned %zd (%s)", how, n,
		(unsigned long long)off, r, opends_err_name((int)r));
	long bad = r_first_bad(b, n, 1, off);
	R_CHECK(bad < 0, "%s through a handle of A returned bytes not of A at %llu (0x%02x; B's is 0x%02x): I/O on "
		"the file of the registration that reused it", how, (unsigned long long)off + (unsigned long long)bad,
		b[bad], r_pat(2, off + (uint64_t)bad));
	atomic_fetch_add(&ru_ok, 1);
}

static void *ru_reader(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 7919 + 1;
	uint8_t *b = malloc(65536);
	opends_stream_t st;
	R_TRY(opends_stream_create(&st));
	for (unsigned i = 0; !atomic_load(&ru_stop); i++) {
		opends_handle_t h = atomic_load(&cur_a);
		size_t n = 1 + r_rand(&seed) % 8192;
		uint64_t off = r_rand(&seed) % (RU_SIZE - n);
		ssize_t r;
		unsigned kind = ru_streams ? i % 5 : i % 4 == 3 ? 4 : i % 4; /* 3: a stream read */
		switch (kind) {
		case 0:
			r = opends_sync_read(h, b, n, (off_t)off, 0);
			ru_check(r, b, n, off, "sync read");
			break;
		case 1: {
			opends_async_future_t f;
			opends_error_t e = opends_async_read(h, b, n, (off_t)off, 0, &f);
			r = e.err ? -(ssize_t)e.err : opends_async_await(&f);
			ru_check(r, b, n, off, "async read");
			break;
		}
		case 2: { /* A's own bytes written back through the handle of A */
			r_fill(b, n, 1, off);
			r = opends_sync_write(h, b, n, (off_t)off, 0);
			R_CHECK(r == (ssize_t)n || r == -OPENDS_HANDLE_NOT_REGISTERED, "sync write returned %zd (%s)", r,
				opends_err_name((int)r));
			break;
		}
		case 3: { /* two stream reads: the first on an idle stream (run at the
			     call), the second queued behind it (run by the
			     stream after the call) */
			size_t sz[2] = { n, n };
			off_t fo[2] = { (off_t)off, (off_t)off }, bo[2] = { 0, 32768 };
			ssize_t got[2] = { 0, 0 };
			bool queued[2] = { false, false };
			for (int k = 0; k < 2; k++) {
				opends_error_t e = opends_stream_read(h, b, &sz[k], &fo[k], &bo[k], &got[k], st);
				R_CHECK(!e.err || e.err == OPENDS_HANDLE_NOT_REGISTERED, "stream read: %s",
					opends_err_name((int)e.err));
				queued[k] = !e.err;
				if (e.err)
					atomic_fetch_add(&ru_stale, 1);
			}
			R_TRY(opends_stream_synchronize(st));
			for (int k = 0; k < 2; k++)
				if (queued[k])
					ru_check(got[k], b + bo[k], n, off, k ? "queued stream read" : "stream read");
			break;
		}
		default: {
			opends_batch_t bh;
			opends_io_params_t p;
			memset(&p, 0, sizeof(p));
			p.mode = OPENDS_BATCH;
			p.fh = h;
			p.u.batch.buf_base = b;
			p.u.batch.file_offset = (off_t)off;
			p.u.batch.size = n;
			p.opcode = OPENDS_READ;
			R_TRY(opends_batch_setup(&bh, 1));
			opends_error_t e = opends_batch_submit(bh, 1, &p, 0);
			if (e.err) {
				R_CHECK(e.err == OPENDS_HANDLE_NOT_REGISTERED, "batch submit: %s", opends_err_name((int)e.err));
				atomic_fetch_add(&ru_stale, 1);
			} else {
				opends_io_events_t ev;
				unsigned nr = 1;
				R_TRY(opends_batch_get_status(bh, 1, &nr, &ev, NULL));
				R_CHECK(nr == 1 && ev.status == OPENDS_COMPLETE, "batch entry: %u events, status %d", nr,
					(int)ev.status);
				ru_check((ssize_t)ev.ret, b, n, off, "batch read");
			}
			opends_batch_destroy(bh);
		}
		}
	}
	R_TRY(opends_stream_destroy(st));
	free(b);
	return NULL;
}

static void case_reuse(double seconds)
{
	r_phase = "reuse";
	char pa[PATH_MAX + 32], pb[PATH_MAX + 32];
	const char *dir = r_tmpdir("reuse");
	snprintf(pa, sizeof(pa), "%s/a", dir);
	snprintf(pb, sizeof(pb), "%s/b", dir);
	fd_a = open(pa, O_RDWR | O_CREAT | O_TRUNC, 0600);
	fd_b = open(pb, O_RDWR | O_CREAT | O_TRUNC, 0600);
	R_CHECK(fd_a >= 0 && fd_b >= 0, "open: %s", strerror(errno));
	uint8_t *m = malloc(RU_SIZE);
	r_fill(m, RU_SIZE, 1, 0);
	R_CHECK(pwrite(fd_a, m, RU_SIZE, 0) == RU_SIZE, "pwrite a");
	r_fill(m, RU_SIZE, 2, 0);
	R_CHECK(pwrite(fd_b, m, RU_SIZE, 0) == RU_SIZE, "pwrite b");
	opends_handle_t ha, hb;
	R_TRY(opends_handle_register(&ha, fd_a));
	atomic_store(&cur_a, ha);
	pthread_t t[RU_READERS];
	for (uintptr_t i = 0; i < RU_READERS; i++)
		pthread_create(&t[i], NULL, ru_reader, (void *)i);
	unsigned long rounds = 0;
	double t0 = r_now();
	while (r_now() - t0 < seconds) {
		/* A out, B in (on A's struct), A in again (a new struct or a
		 * spare), B out: the readers' handle of A is stale meanwhile */
		R_TRY(opends_handle_deregister(ha));
		R_TRY(opends_handle_register(&hb, fd_b));
		R_TRY(opends_handle_register(&ha, fd_a));
		atomic_store(&cur_a, ha);
		R_TRY(opends_handle_deregister(hb));
		rounds++;
		sched_yield(); /* let the readers in on the new handle too */
	}
	atomic_store(&ru_stop, true);
	for (int i = 0; i < RU_READERS; i++)
		pthread_join(t[i], NULL);
	R_TRY(opends_handle_deregister(ha));
	R_CHECK(pread(fd_b, m, RU_SIZE, 0) == RU_SIZE, "pread b");
	long bad = r_first_bad(m, RU_SIZE, 2, 0);
	R_CHECK(bad < 0, "B changed at %ld: a write through a handle of A landed in B", bad);
	R_CHECK(pread(fd_a, m, RU_SIZE, 0) == RU_SIZE, "pread a");
	R_CHECK(r_first_bad(m, RU_SIZE, 1, 0) < 0, "A changed");
	free(m);
	close(fd_a);
	close(fd_b);
	printf("reuse: %lu rounds of deregister/register, %lu calls on A's bytes, %lu refused as not registered, "
	       "none reached B\n", rounds, atomic_load(&ru_ok), atomic_load(&ru_stale));
	R_CHECK(atomic_load(&ru_ok) > 0, "no call got through");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		R_FAIL("usage: test_reuse held|self|cross|double|reuse|reuse_stream [SECONDS]");
	const char *c = argv[1];
	double n = argc > 2 ? atof(argv[2]) : 0;
	r_watchdog(60);
	atexit(r_rmdir_all);
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here", r_backend_env());
	R_TRY(e);
	if (!strcmp(c, "held"))
		case_held();
	else if (!strcmp(c, "self"))
		case_self();
	else if (!strcmp(c, "cross"))
		case_cross();
	else if (!strcmp(c, "double"))
		case_double();
	else if (!strcmp(c, "reuse"))
		case_reuse(n > 0 ? n : 1.5);
	else if (!strcmp(c, "reuse_stream"))
		ru_streams = true, case_reuse(n > 0 ? n : 1.5);
	else
		R_FAIL("unknown case %s", c);
	R_TRY(opends_driver_close());
	return 0;
}
