/*
 * opends_driver_close while other threads are inside OpenDS calls
 * (docs/errors.md, "Calls on other threads while the driver closes"):
 *   waits     close waits for a call in progress (a source read held in
 *             its callback; waits_describe: opends_describe held in the
 *             source's describe), which completes byte-exact; calls that start
 *             meanwhile get OPENDS_DRIVER_NOT_INITIALIZED saying close is
 *             in progress; a second close gets DRIVER_NOT_INITIALIZED, an
 *             open DRIVER_ALREADY_OPEN; afterwards "not open".
 *   callback  close from inside a source's callback (on the caller's
 *             thread, on a library thread, in release during deregister
 *             and during close) is refused with OPENDS_INVALID_VALUE and
 *             the driver stays usable: no deadlock.
 *   race      4 threads read through every family (sync, async, batch,
 *             stream) while the main thread closes, 20 rounds: every
 *             result is the bytes (checked) or -OPENDS_DRIVER_NOT_INITIALIZED;
 *             nothing else, no use after free (ASan), no race (TSan).
 *   unawaited 30 rounds: 24 async reads through source handles (inline,
 *             threaded with delays, blocking; caps of 1 to 4 in flight) and
 *             an fd handle, none awaited; half the rounds deregister every
 *             handle first; then driver close. After it every future
 *             awaits its bytes (checked), and each source was released
 *             once (API: close waits for the futures not yet awaited).
 * Exit 0 pass, 1 fail, 2 watchdog.
 */
#include "rel.h"

#include "../sources/fake.h" /* unawaited: source handles over a file */

#define N 8192

static void expect_code(opends_error_t e, int code, const char *what, const char *detail_has)
{
	if ((int)e.err != code)
		R_FAIL("%s: expected %s, got %s", what, opends_err_name(code), opends_err_name((int)e.err));
	if (detail_has && !strstr(opends_last_error_detail(), detail_has))
		R_FAIL("%s: the detail does not say \"%s\"", what, detail_has);
}

/* ---- a blocking source whose read can be held, or can call close ------- */

static atomic_int held;        /* 1: reads wait in the callback until 0 */
static atomic_int in_read;     /* reads inside the callback now */
static atomic_int close_in_cb; /* 1: the callback calls opends_driver_close */
static atomic_int cb_closes, cb_close_bad;

static void close_from_callback(const char *where)
{
	opends_error_t e = opends_driver_close();
	atomic_fetch_add(&cb_closes, 1);
	if (e.err != OPENDS_INVALID_VALUE || !strstr(opends_last_error_detail(), "callback")) {
		fprintf(stderr, "close from %s: %s (%s)\n", where, opends_err_name((int)e.err),
			opends_last_error_detail());
		atomic_fetch_add(&cb_close_bad, 1);
	}
}

static ssize_t src_read(void *src, void *buf, size_t len, uint64_t off)
{
	(void)src;
	atomic_fetch_add(&in_read, 1);
	while (atomic_load(&held))
		r_sleep_ms(1);
	if (atomic_load(&close_in_cb))
		close_from_callback("a read callback");
	r_fill(buf, len, 7, off);
	atomic_fetch_sub(&in_read, 1);
	return (ssize_t)len;
}

static void src_describe(void *src, char *buf, size_t len)
{
	(void)src;
	atomic_fetch_add(&in_read, 1);
	while (atomic_load(&held))
		r_sleep_ms(1);
	snprintf(buf, len, "held source");
	atomic_fetch_sub(&in_read, 1);
}

static void src_release(void *src)
{
	(void)src;
	if (atomic_load(&close_in_cb))
		close_from_callback("a release callback");
}

static opends_handle_t source(void)
{
	static opends_source_ops_t ops;
	memset(&ops, 0, sizeof(ops));
	ops.struct_size = sizeof(ops);
	ops.name = "held";
	ops.read = src_read;
	ops.release = src_release;
	ops.describe = src_describe;
	opends_handle_t h = r_blocking_source(&ops);
	return h;
}

static void check_data(const uint8_t *b, size_t n, uint32_t gen, uint64_t pos, const char *what)
{
	long bad = r_first_bad(b, n, gen, pos);
	if (bad >= 0)
		R_FAIL("%s: byte %ld differs from the file", what, bad);
}

/* ---- waits ------------------------------------------------------------- */

static opends_handle_t waits_h;
static uint8_t waits_buf[N];
static ssize_t waits_res;
static bool waits_describe; /* the call held is opends_describe, not a read */
static char waits_descr[512];
static opends_error_t waits_close;
static atomic_int waits_closed;

static void *waits_reader(void *a)
{
	(void)a;
	if (waits_describe) {
		opends_error_t e = opends_describe(waits_h, waits_descr, sizeof(waits_descr));
		waits_res = e.err ? -(ssize_t)e.err : N;
		return NULL;
	}
	waits_res = opends_sync_read(waits_h, waits_buf, N, 4096, 0);
	return NULL;
}

static void *waits_closer(void *a)
{
	(void)a;
	waits_close = opends_driver_close();
	atomic_store(&waits_closed, 1);
	return NULL;
}

static void test_waits(void)
{
	r_phase = "waits: open";
	R_TRY(opends_driver_open());
	waits_h = source();
	atomic_store(&held, 1);
	pthread_t rd, cl;
	pthread_create(&rd, NULL, waits_reader, NULL);
	r_phase = "waits: the read reaches its callback";
	while (!atomic_load(&in_read))
		r_sleep_ms(1);
	pthread_create(&cl, NULL, waits_closer, NULL);
	r_phase = "waits: close starts";
	opends_drv_props_t p;
	while (opends_driver_get_properties(&p).err == OPENDS_SUCCESS)
		r_sleep_ms(1);
	r_phase = "waits: calls while close waits";
	expect_code(opends_driver_get_properties(&p), OPENDS_DRIVER_NOT_INITIALIZED, "get_properties while closing",
		    "the driver is closing (opends_driver_close is in progress");
	char d[64];
	expect_code(opends_describe(waits_h, d, sizeof(d)), OPENDS_DRIVER_NOT_INITIALIZED, "describe while closing",
		    "closing");
	opends_handle_t h2 = NULL;
	expect_code(opends_handle_open_url(&h2, "file:///dev/null", 0), OPENDS_DRIVER_NOT_INITIALIZED,
		    "open_url while closing", "closing");
	if (!waits_describe) { /* the I/O families too */
		uint8_t b[64];
		ssize_t r = opends_sync_read(waits_h, b, sizeof(b), 0, 0);
		if (r != -OPENDS_DRIVER_NOT_INITIALIZED || !strstr(opends_last_error_detail(), "closing"))
			R_FAIL("sync_read while closing: %zd (%s)", r, opends_err_name((int)r));
		opends_batch_t bt = NULL;
		expect_code(opends_batch_setup(&bt, 1), OPENDS_DRIVER_NOT_INITIALIZED, "batch_setup while closing",
			    "closing");
		expect_code(opends_stream_synchronize(NULL), OPENDS_DRIVER_NOT_INITIALIZED,
			    "stream_synchronize while closing", "closing");
		expect_code(opends_handle_advise(waits_h, 0), OPENDS_DRIVER_NOT_INITIALIZED, "advise while closing",
			    "closing");
		unsigned count = 0;
		expect_code(opends_device_count(&count), OPENDS_DRIVER_NOT_INITIALIZED, "device_count while closing",
			    "closing");
		expect_code(opends_buf_register(b, sizeof(b), 0), OPENDS_DRIVER_NOT_INITIALIZED,
			    "buf_register while closing", "closing");
	}
	expect_code(opends_driver_close(), OPENDS_DRIVER_NOT_INITIALIZED, "a second close", "in progress");
	expect_code(opends_driver_open(), OPENDS_DRIVER_ALREADY_OPEN, "open while closing", "in progress");
	r_sleep_ms(50);
	R_CHECK(!atomic_load(&waits_closed), "close returned while a read was inside its callback");
	r_phase = "waits: the read completes";
	atomic_store(&held, 0);
	pthread_join(rd, NULL);
	pthread_join(cl, NULL);
	R_CHECK(waits_res == N, "the read in progress returned %zd (%s), not %d", waits_res,
		opends_err_name((int)waits_res), N);
	if (waits_describe)
		R_CHECK(strstr(waits_descr, "held source"), "describe in progress gave \"%s\"", waits_descr);
	else
		check_data(waits_buf, N, 7, 4096, "the read in progress");
	R_CHECK(waits_close.err == OPENDS_SUCCESS, "close returned %s", opends_err_name((int)waits_close.err));
	expect_code(opends_driver_get_properties(&p), OPENDS_DRIVER_NOT_INITIALIZED, "get_properties after close",
		    "not open");
	r_phase = "waits: reopen";
	R_TRY(opends_driver_open());
	R_TRY(opends_driver_close());
}

/* ---- callback ---------------------------------------------------------- */

static void test_callback(void)
{
	r_phase = "callback: open";
	R_TRY(opends_driver_open());
	opends_handle_t h = source();
	atomic_store(&close_in_cb, 1);
	uint8_t b[N];
	r_phase = "callback: sync read";
	R_CHECK(opends_sync_read(h, b, N, 0, 0) == N, "sync read with a closing callback");
	check_data(b, N, 7, 0, "sync read");
	r_phase = "callback: async read";
	opends_async_future_t f;
	R_TRY(opends_async_read(h, b, N, 8192, 0, &f));
	R_CHECK(opends_async_await(&f) == N, "async read with a closing callback");
	check_data(b, N, 7, 8192, "async read");
	r_phase = "callback: stream read";
	size_t sz = N;
	off_t fo = 16384, bo = 0;
	ssize_t sres = 0;
	R_TRY(opends_stream_read(h, b, &sz, &fo, &bo, &sres, NULL));
	R_TRY(opends_stream_synchronize(NULL));
	R_CHECK(sres == N, "stream read with a closing callback: %zd", sres);
	check_data(b, N, 7, 16384, "stream read");
	r_phase = "callback: deregister";
	R_TRY(opends_handle_deregister(h)); /* release calls close */
	opends_drv_props_t p;
	R_TRY(opends_driver_get_properties(&p));
	R_CHECK(atomic_load(&cb_closes) == 4, "%d closes from callbacks, not 4", atomic_load(&cb_closes));
	r_phase = "callback: close runs release";
	(void)source();
	R_TRY(opends_driver_close());
	R_CHECK(atomic_load(&cb_closes) == 5, "release during close did not run or did not close");
	R_CHECK(atomic_load(&cb_close_bad) == 0, "%d closes from callbacks were not refused with INVALID_VALUE",
		atomic_load(&cb_close_bad));
}

/* ---- race -------------------------------------------------------------- */

static opends_handle_t race_h;
static atomic_int race_stop;
static atomic_long race_ok, race_closed, race_other;
static int race_round;

/* a stream read's arguments: they must outlive a refused synchronize */
struct sargs {
	size_t n;
	off_t fo, bo;
	ssize_t res;
};

static long race_once(int fam, opends_batch_t bt, uint8_t *b, off_t off, struct sargs *sa, bool *pending)
{
	switch (fam) {
	case 0:
		return opends_sync_read(race_h, b, N, off, 0);
	case 1: {
		opends_async_future_t f;
		opends_error_t e = opends_async_read(race_h, b, N, off, 0, &f);
		return e.err ? -(long)e.err : opends_async_await(&f);
	}
	case 2: {
		if (!bt)
			return -OPENDS_DRIVER_NOT_INITIALIZED; /* setup refused: the driver closed */
		opends_io_params_t p;
		memset(&p, 0, sizeof(p));
		p.mode = OPENDS_BATCH;
		p.fh = race_h;
		p.opcode = OPENDS_READ;
		p.u.batch.buf_base = b;
		p.u.batch.file_offset = off;
		p.u.batch.size = N;
		opends_error_t e = opends_batch_submit(bt, 1, &p, 0);
		if (e.err)
			return -(long)e.err;
		opends_io_events_t ev;
		unsigned nr = 1;
		struct timespec ts = { 5, 0 };
		e = opends_batch_get_status(bt, 1, &nr, &ev, &ts);
		*pending = e.err != 0; /* refused: the entry may still write b */
		if (e.err)
			return -(long)e.err;
		return nr == 1 ? (long)ev.ret : -1000000;
	}
	default: {
		sa->n = N;
		sa->fo = off;
		sa->bo = 0;
		sa->res = 0;
		opends_error_t e = opends_stream_read(race_h, b, &sa->n, &sa->fo, &sa->bo, &sa->res, NULL);
		if (e.err)
			return -(long)e.err;
		e = opends_stream_synchronize(NULL);
		/* refused: the read is still queued, reading n, fo, bo and
		 * writing res, b when close drains it: keep them */
		*pending = e.err != 0;
		return e.err ? -(long)e.err : (long)sa->res;
	}
	}
}

static void *race_worker(void *a)
{
	long id = (long)a;
	uint8_t *b = malloc(N);
	struct sargs *sa = malloc(sizeof(*sa));
	opends_batch_t bt = NULL;
	if (opends_batch_setup(&bt, 4).err)
		bt = NULL;
	int fam = (int)((id + race_round) % 4);
	uint64_t seed = (uint64_t)id * 7919 + (uint64_t)race_round;
	while (!atomic_load(&race_stop)) {
		off_t off = (off_t)(r_rand(&seed) % 64) * 4096;
		memset(b, 0, N);
		bool pending = false;
		long r = race_once(fam, bt, b, off, sa, &pending);
		if (r == N && r_first_bad(b, N, 3, (uint64_t)off) < 0)
			atomic_fetch_add(&race_ok, 1);
		else if (r == -OPENDS_DRIVER_NOT_INITIALIZED)
			atomic_fetch_add(&race_closed, 1);
		else if (atomic_fetch_add(&race_other, 1) < 5)
			fprintf(stderr, "family %d: %ld %s (%s)%s\n", fam, r, opends_err_name((int)r),
				opends_last_error_detail(), r == N ? ", data differ" : "");
		while (pending && !atomic_load(&race_stop)) /* stop is set after close returned */
			r_sleep_ms(1);
	}
	free(b);
	free(sa);
	return NULL;
}

static void test_race(void)
{
	const char *dir = r_tmpdir("close");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/f", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	R_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	size_t fsize = 64 * 4096 + N;
	uint8_t *img = malloc(fsize);
	r_fill(img, fsize, 3, 0);
	R_CHECK(pwrite(fd, img, fsize, 0) == (ssize_t)fsize, "pwrite");
	free(img);
	for (race_round = 0; race_round < 20; race_round++) {
		r_phase = "race: open";
		R_TRY(opends_driver_open());
		R_TRY(opends_handle_register(&race_h, fd));
		atomic_store(&race_stop, 0);
		pthread_t t[4];
		for (long i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, race_worker, (void *)i);
		r_sleep_ms(20);
		r_phase = "race: close while the threads read";
		R_TRY(opends_driver_close());
		r_sleep_ms(5);
		atomic_store(&race_stop, 1);
		r_phase = "race: join";
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	}
	close(fd);
	r_rmdir_all();
	printf("race: %ld reads ok, %ld refused (driver closing or closed), %ld other\n", atomic_load(&race_ok),
	       atomic_load(&race_closed), atomic_load(&race_other));
	R_CHECK(atomic_load(&race_other) == 0, "%ld results were neither the bytes nor DRIVER_NOT_INITIALIZED",
		atomic_load(&race_other));
	R_CHECK(atomic_load(&race_ok) > 0 && atomic_load(&race_closed) > 0, "the rounds did not overlap the close");
}

static void test_unawaited(void)
{
	r_phase = "unawaited";
	atexit(r_rmdir_all);
	const char *dir = r_tmpdir("close-unawaited");
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/f", dir);
	enum { FSZ = 4 << 20, K = 24, MAXN = 256 << 10 };
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	R_CHECK(fd >= 0, "open: %s", strerror(errno));
	uint8_t *data = malloc(FSZ), *bufs = malloc((size_t)K * MAXN);
	R_CHECK(data && bufs, "out of memory");
	r_fill(data, FSZ, 5, 0);
	R_CHECK(pwrite(fd, data, FSZ, 0) == FSZ, "pwrite");
	uint64_t rng = 0x5eed;
	for (int round = 0; round < 30; round++) {
		R_TRY(opends_driver_open());
		struct fake *f[3];
		opends_handle_t h[4];
		for (int i = 0; i < 3; i++) {
			f[i] = fake_new((enum fake_mode)(r_rand(&rng) % 3), 0, NULL);
			f[i]->fd = fd;
			f[i]->use_fd = true;
			f[i]->delay_us = 3000;
			opends_source_desc_t d = fake_desc(f[i]);
			d.max_inflight = 1 + (unsigned)(r_rand(&rng) % 4);
			R_TRY(opends_handle_register_source(&h[i], &d));
		}
		R_TRY(opends_handle_register(&h[3], fd));
		opends_async_future_t fu[K];
		size_t n[K];
		off_t o[K];
		for (int k = 0; k < K; k++) {
			n[k] = 1 + r_rand(&rng) % MAXN;
			o[k] = (off_t)(r_rand(&rng) % (FSZ - n[k]));
			R_TRY(opends_async_read(h[r_rand(&rng) % 4], bufs + (size_t)k * MAXN, n[k], o[k], 0, &fu[k]));
		}
		if (round % 2)
			for (int i = 0; i < 4; i++)
				R_TRY(opends_handle_deregister(h[i]));
		R_TRY(opends_driver_close());
		for (int k = 0; k < K; k++) {
			ssize_t got = opends_async_await(&fu[k]);
			R_CHECK(got == (ssize_t)n[k] && !memcmp(bufs + (size_t)k * MAXN, data + o[k], n[k]),
				"round %d future %d awaited after close: %zd of %zu (or bytes differ)", round, k, got, n[k]);
		}
		for (int i = 0; i < 3; i++) {
			R_CHECK(atomic_load(&f[i]->released) == 1, "round %d: source %d released %d times", round, i,
				atomic_load(&f[i]->released));
			fake_free(f[i]);
		}
	}
	free(data);
	free(bufs);
	close(fd);
}

int main(int argc, char **argv)
{
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("OPENDS_BACKEND=%s: %s", r_backend_env(), opends_last_error_detail());
	R_TRY(e);
	R_TRY(opends_driver_close());
	r_watchdog(100);
	const char *what = argc > 1 ? argv[1] : "";
	if (!strcmp(what, "waits"))
		test_waits();
	else if (!strcmp(what, "waits_describe")) {
		waits_describe = true;
		test_waits();
	}
	else if (!strcmp(what, "callback"))
		test_callback();
	else if (!strcmp(what, "race"))
		test_race();
	else if (!strcmp(what, "unawaited"))
		test_unawaited();
	else {
		fprintf(stderr, "usage: %s waits|waits_describe|callback|race|unawaited\n", argv[0]);
		return 1;
	}
	printf("ok %s\n", what);
	return 0;
}
