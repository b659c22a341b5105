/*
 * The staging engine's hand-out of chunks across queued requests
 * (src/core/stage.c pick()), with a "gate" mover whose reads finish only
 * when the test lets them: which request each chunk came from is then a
 * fact of the order of hand-outs, not of timing.
 *   devices   two large reads, one per device, queued while the workers
 *             are busy with the first: the second gets chunks before the
 *             first is all handed out (oldest-first gave it none), with
 *             one worker and with two; both byte-exact
 *   fifo      the same two reads into one device: still oldest first
 *   cancel    a cancelled request between two others, for another device,
 *             leaves the queue from its middle (and as its tail) with
 *             -ECANCELED; the requests around it and one queued after are
 *             served byte-exact
 *   many      ods_stage_submit_many of more requests than the queue takes
 *             (its submitter waits for room halfway, after waking the
 *             workers for those queued), one of them needing no transfer:
 *             every chunk handed out in the batch's order, byte-exact
 *   extra     with two devices, the extra workers take nothing of one
 *             device's read, and chunks of both once a second device's is
 *             queued while the first workers are busy; none with
 *             OPENDS_IO_THREADS given, nor for a mover that does not ask
 *             for them (device_workers false: the sources' engine)
 *   nowake    a read submitted while a worker spins idle wakes no sleeping
 *             worker (the spinner takes it)
 *   chunkfit  ods_stage_chunk_fit sizes the chunk from the budget left
 *   dcap      OPENDS_AB_DIRECT_INFLIGHT=128k (two chunks): a worker of depth
 *             8 keeps two device reads in flight, a third starts when one
 *             ends; reads the mover does not mark as device reads, and
 *             any without the variable, fill the depth; byte-exact
 * Usage: test_stage_fair devices|fifo|cancel|many|extra|nowake|chunkfit|dcap
 */
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stage_test.h"

#define CHUNK ((size_t)64 << 10)
#define NCHUNK 32u /* per large request */
#define LEN (NCHUNK * CHUNK)
#define MAXREQ 4
#define MAXSTART (MAXREQ * NCHUNK)

static char *g_model; /* the file */

/* ---- the gate mover: reads wait in `held` until the test releases them --- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static struct ods_stage_unit *g_held[MAXSTART];
static unsigned g_nheld;
static struct ods_io *g_started[MAXSTART]; /* the request of each chunk, in hand-out order */
static unsigned g_worker[MAXSTART];        /* and the worker it was handed to */
static unsigned g_nstarted;

static bool g_device_io; /* gm_read marks its reads as device reads (dcap) */

static int gm_req_init(struct ods_stage_req *r)
{
	r->fsize = (off_t)(2 * LEN);
	if (r->end > r->fsize)
		r->end = r->io->off < r->fsize ? r->fsize : r->io->off;
	return r->end == r->io->off; /* past the end: nothing to move */
}

static void gm_read(struct ods_stage_unit *u)
{
	u->io_off = u->c0;
	u->io_len = (size_t)(u->c1 - u->c0);
	u->slot = true;
	u->io_buf = ods_stage_slot(u);
	if (!u->io_buf) {
		ods_stage_end(u, -ENOMEM);
		return;
	}
	u->device_io = g_device_io;
	pthread_mutex_lock(&g_lock);
	if (g_nstarted == MAXSTART)
		FAIL("more chunks handed out than the requests have");
	g_worker[g_nstarted] = (unsigned)((uintptr_t)ods_stage_ctx(u) - 1);
	g_started[g_nstarted++] = u->r->io;
	g_held[g_nheld++] = u;
	pthread_cond_broadcast(&g_cv);
	pthread_mutex_unlock(&g_lock);
}

static void gm_write(struct ods_stage_unit *u)
{
	ods_stage_end(u, -EINVAL);
}

static void gm_complete(struct ods_stage_unit *u, long res)
{
	if (res < 0)
		ods_stage_end(u, res);
	else
		ods_stage_read_done(u);
}

/* wait and wake of their own for the nowake case, which counts the wakes */
#define NWORKER 4
static atomic_uint g_wseq[NWORKER];
static unsigned g_wseen[NWORKER];
static atomic_uint g_wakes;

static unsigned worker_of(void *ctx)
{
	return (unsigned)((uintptr_t)ctx - 1) % NWORKER;
}

static void gm_wait(void *ctx, long timeout_ns)
{
	unsigned i = worker_of(ctx), cur = atomic_load(&g_wseq[i]);
	if (cur == g_wseen[i]) {
		struct timespec ts = { timeout_ns / 1000000000L, timeout_ns % 1000000000L };
		syscall(SYS_futex, &g_wseq[i], FUTEX_WAIT_PRIVATE, cur, timeout_ns < 0 ? NULL : &ts, NULL, 0);
	}
	g_wseen[i] = atomic_load(&g_wseq[i]);
}

static void gm_wake(void *ctx)
{
	unsigned i = worker_of(ctx);
	atomic_fetch_add(&g_wakes, 1);
	atomic_fetch_add(&g_wseq[i], 1);
	syscall(SYS_futex, &g_wseq[i], FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static const struct ods_mover gate_mover = {
	.name = "gate",
	.device_workers = true, /* as uring's */
	.worker_open = stage_test_worker_open,
	.worker_close = stage_test_worker_close,
	.req_init = gm_req_init,
	.read = gm_read,
	.write = gm_write,
	.rw_whole = ods_posix_rw,
	.complete = gm_complete,
};

/* wait until `n` units are held, or `started` chunks were handed out in all */
static void wait_held(unsigned n, unsigned started)
{
	pthread_mutex_lock(&g_lock);
	while (g_nheld < n && g_nstarted < started)
		pthread_cond_wait(&g_cv, &g_lock);
	pthread_mutex_unlock(&g_lock);
}

/* let the oldest held read finish (its bytes from the model); false: none */
static bool release_one(void)
{
	pthread_mutex_lock(&g_lock);
	if (!g_nheld) {
		pthread_mutex_unlock(&g_lock);
		return false;
	}
	struct ods_stage_unit *u = g_held[0];
	memmove(g_held, g_held + 1, --g_nheld * sizeof(g_held[0]));
	pthread_mutex_unlock(&g_lock);
	memcpy(u->io_buf, g_model + u->io_off, u->io_len);
	u->io_done = u->io_len;
	ods_stage_post(u, 0);
	return true;
}

/* ---- requests ------------------------------------------------------------------ */

struct req {
	struct ods_io io;
	atomic_uint done;
	char *buf;
};

static void on_done(struct ods_io *io)
{
	struct req *q = io->owner;
	atomic_store(&q->done, 1);
	ods_futex_wake_all(&q->done);
}

static struct ods_handle g_h;

static void prepare(struct req *q, unsigned dev, off_t off, size_t n, bool cancelled)
{
	memset(q, 0, sizeof(*q));
	q->buf = malloc(n + 64);
	if (!q->buf)
		FAIL("malloc");
	memset(q->buf, 0x5a, n + 64);
	q->io.fh = &g_h;
	q->io.buf = q->buf;
	q->io.size = n;
	q->io.off = off;
	q->io.opcode = OPENDS_READ;
	q->io.mem = ODS_MEM_DEVICE;
	q->io.dev = (uint16_t)dev;
	q->io.done = on_done;
	q->io.owner = q;
	atomic_store(&q->io.cancelled, cancelled);
	atomic_fetch_add(&ods_inflight, 1);
	atomic_fetch_add(&g_h.inflight, 1);
}

static void submit(struct ods_stage *s, struct req *q, unsigned dev, off_t off, size_t n, bool cancelled)
{
	prepare(q, dev, off, n, cancelled);
	ods_stage_submit(s, &q->io, false);
}

/* wait for q, releasing held reads meanwhile; then check its result and bytes */
static void finish(struct req *q, ssize_t want, const char *name)
{
	while (!atomic_load(&q->done)) {
		if (!release_one())
			usleep(100);
	}
	if (q->io.result != want)
		FAIL("%s: result %zd, want %zd", name, q->io.result, want);
	size_t n = want > 0 ? (size_t)want : 0;
	if (memcmp(q->buf, g_model + q->io.off, n))
		FAIL("%s: bytes differ from the file", name);
	for (size_t i = n; i < q->io.size + 64; i++)
		if (q->buf[i] != 0x5a)
			FAIL("%s: byte %zu written past the count", name, i);
	free(q->buf);
}

static unsigned nstarted(void)
{
	pthread_mutex_lock(&g_lock);
	unsigned n = g_nstarted;
	pthread_mutex_unlock(&g_lock);
	return n;
}

static unsigned count_of(const struct ods_io *io, unsigned from, unsigned n)
{
	unsigned k = 0;
	pthread_mutex_lock(&g_lock);
	for (unsigned i = from; i < from + n && i < g_nstarted; i++)
		k += g_started[i] == io;
	pthread_mutex_unlock(&g_lock);
	return k;
}

static struct ods_stage *open_engine_cfg(unsigned threads, const struct ods_config *cfg)
{
	struct ods_stage_params p = { .threads = threads, .depth = 2, .chunk = CHUNK, .spin_us = 0 };
	struct ods_stage *s;
	if (ods_stage_open(&s, &p, &gate_mover, cfg, &ods_accel_hostdev))
		FAIL("ods_stage_open: %s", opends_last_error_detail());
	return s;
}

static struct ods_stage *open_engine(unsigned threads)
{
	static struct ods_config cfg;
	return open_engine_cfg(threads, &cfg);
}

/* Two large reads; the second is queued while every unit holds a chunk of
 * the first. Returns how many of the next 16 chunks handed out were the
 * second's. */
static unsigned two_reads(unsigned threads, unsigned dev_b)
{
	struct ods_stage *s = open_engine(threads);
	struct req a, b;
	submit(s, &a, 0, 0, LEN, false);
	wait_held(2 * threads, MAXSTART);
	unsigned first = nstarted();
	if (first != 2 * threads || count_of(&a.io, 0, first) != first)
		FAIL("%u chunks handed out before the second read, want %u of the first", first, 2 * threads);
	submit(s, &b, dev_b, (off_t)LEN, LEN, false);
	for (unsigned i = 0; i < 16; i++) {
		if (!release_one())
			FAIL("nothing held");
		wait_held(2 * threads, first + i + 1);
	}
	unsigned nb = count_of(&b.io, first, 16);
	finish(&a, (ssize_t)LEN, "read A");
	finish(&b, (ssize_t)LEN, "read B");
	ods_stage_close(s);
	if (nstarted() != 2 * NCHUNK)
		FAIL("%u chunks handed out, want %u", nstarted(), 2 * NCHUNK);
	return nb;
}

static void reset(void)
{
	g_nheld = 0;
	g_nstarted = 0;
}

static void case_devices(void)
{
	for (unsigned threads = 1; threads <= 2; threads++) {
		reset();
		unsigned nb = two_reads(threads, 1);
		/* shared out: half of them; oldest-first: none until the first's
		 * 32 - 2 x threads remaining chunks are all handed out */
		if (nb < 6)
			FAIL("%u worker(s): the second device's read got %u of the 16 chunks handed out after it was "
			     "queued; want at least 6 (both devices served at once)",
			     threads, nb);
		printf("devices, %u worker(s): the second device's read got %u of the next 16 chunks\n", threads, nb);
	}
}

static void case_fifo(void)
{
	reset();
	unsigned nb = two_reads(2, 0);
	if (nb)
		FAIL("one device: the later read got %u chunks before the first was all handed out", nb);
	printf("one device: oldest first\n");
}

static void case_cancel(void)
{
	reset();
	struct ods_stage *s = open_engine(1);
	struct req a, b, c, d;
	submit(s, &a, 0, 0, LEN, false);
	wait_held(2, MAXSTART);
	submit(s, &b, 1, 4096, 3 * CHUNK, true);             /* cancelled, in the middle */
	submit(s, &c, 1, (off_t)LEN + 4096, CHUNK, false);    /* then the tail, for device 1 */
	/* the worker takes b (cancelled), then c, whose one chunk unqueues the tail */
	while (!atomic_load(&b.io.done) || count_of(&c.io, 0, MAXSTART) == 0) {
		release_one();
		wait_held(2, nstarted() + 1);
	}
	submit(s, &d, 2, 12345, 2 * CHUNK, false); /* queued after the new tail */
	finish(&b, -ECANCELED, "cancelled B");
	finish(&c, (ssize_t)CHUNK, "C after the cancelled one");
	finish(&d, (ssize_t)(2 * CHUNK), "D queued after the tail left");
	finish(&a, (ssize_t)LEN, "A");
	ods_stage_close(s);
	if (count_of(&b.io, 0, MAXSTART))
		FAIL("the cancelled request had chunks handed out");
	printf("cancel: from the middle and the tail of the queue, -ECANCELED, the rest byte-exact\n");
}

/* hostdev with two simulated devices, its (zeroed) configuration */
static struct ods_config *two_devices(void)
{
	setenv("OPENDS_HOSTDEV_DEVICES", "2", 1);
	char why[256];
	static struct ods_config cfg;
	if (ods_accel_hostdev.open(&cfg, why, sizeof(why)))
		FAIL("hostdev with two devices: %s", why);
	return &cfg;
}

/* the gate mover without the extra workers (as the sources' engine's) */
static const struct ods_mover *plain_mover(void)
{
	static struct ods_mover plain;
	plain = gate_mover;
	plain.device_workers = false;
	return &plain;
}

/* The extra workers: on an accelerator with two devices and a worker count
 * the backend chose (no OPENDS_IO_THREADS), as many workers again are
 * started, and they take chunks only while requests for two or more devices
 * are queued. With one device's read queued they take none (its chunks
 * wait for the first workers' units); once a second device's read is
 * queued, they take its chunks while every unit of the first workers still
 * holds one of the first read's, shared out over the two reads as the first
 * workers are. With the count given, or for a mover that does not ask for
 * them, there are none. */
static void case_extra(void)
{
	struct ods_config *cfgp = two_devices();
	/* variant 0: extra workers; 1: OPENDS_IO_THREADS given; 2: a mover
	 * that does not ask for them (the sources' engine) */
	static const char *const what[3] = { "two devices", "OPENDS_IO_THREADS given",
					     "a mover without device_workers" };
	const struct ods_mover *plain = plain_mover();
	for (unsigned v = 0; v <= 2; v++) {
		bool given = v != 0;
		reset();
		cfgp->io_threads = v == 1 ? 2 : 0;
		struct ods_stage_params p = { .threads = 2, .depth = 2, .chunk = CHUNK, .spin_us = 0 };
		struct ods_stage *s;
		if (ods_stage_open(&s, &p, v == 2 ? plain : &gate_mover, cfgp, &ods_accel_hostdev))
			FAIL("ods_stage_open: %s", opends_last_error_detail());
		struct req a, b;
		submit(s, &a, 0, 0, LEN, false);
		wait_held(4, MAXSTART);
		usleep(50 * 1000); /* time for an extra worker to take one, were it wrong */
		if (nstarted() != 4)
			FAIL("%s: %u chunks of one device's read handed out, want 4 (2 workers x 2 units)",
			     what[v], nstarted());
		for (unsigned i = 0; i < 4; i++)
			if (g_worker[i] >= 2)
				FAIL("extra worker %u took chunk %u of one device's read", g_worker[i], i);
		submit(s, &b, 1, (off_t)LEN, LEN, false);
		if (!given) {
			wait_held(8, MAXSTART);
			/* shared out as the first ones are: extra 2 to the
			 * first device, extra 3 to the second */
			if (nstarted() != 8 || count_of(&b.io, 4, 4) != 2)
				FAIL("extra workers: %u chunks handed out (%u of the second device's read after the 4 of the "
				     "first), want 8 (2)",
				     nstarted(), count_of(&b.io, 4, 4));
			for (unsigned i = 4; i < 8; i++)
				if (g_worker[i] < 2)
					FAIL("chunk %u went to worker %u, whose units all hold the first read's", i,
					     g_worker[i]);
		} else {
			usleep(50 * 1000);
			if (nstarted() != 4)
				FAIL("%s: %u chunks handed out with every unit busy, want 4", what[v], nstarted());
		}
		finish(&a, (ssize_t)LEN, "read A");
		finish(&b, (ssize_t)LEN, "read B");
		ods_stage_close(s);
		if (nstarted() != 2 * NCHUNK)
			FAIL("%u chunks handed out, want %u", nstarted(), 2 * NCHUNK);
		printf("%s: %s\n", what[v],
		       given ? "no extra workers" : "the extra workers idle for one device, take the second's chunks");
	}
}

/* ods_stage_chunk_fit: the chunk of which one per worker fits what is left
 * of the staging budget (OPENDS_MAX_PINNED 200 KiB, 2 workers, asked for
 * 1 MiB): 64 KiB, and the open with it is accepted while 128 KiB is
 * refused, and with what that open holds 32 KiB; with two devices and a
 * mover that asks for the extra workers (4 in all) 32 KiB, without them
 * 64 KiB; a chunk that fits is kept as it is (48 KiB); under 4 KiB per
 * worker, 0. */
static void case_chunkfit(void)
{
	struct ods_config *cfg = two_devices();
	const struct ods_mover *plain = plain_mover();
	cfg->io_threads = 0;
	cfg->max_pinned = 200u << 10;
	ods_drv.cfg.max_pinned = cfg->max_pinned; /* (what ods_pinned_reserve reads) */
	struct ods_stage_params p = { .threads = 2, .depth = 4, .chunk = 1u << 20, .spin_us = 0 };
	size_t c;
	if ((c = ods_stage_chunk_fit(&p, plain, cfg, &ods_accel_hostdev)) != 64u << 10)
		FAIL("chunk_fit, 2 workers in 200 KiB: %zu, want 65536", c);
	if ((c = ods_stage_chunk_fit(&p, &gate_mover, cfg, &ods_accel_hostdev)) != 32u << 10)
		FAIL("chunk_fit, 2 + 2 extra workers in 200 KiB: %zu, want 32768", c);
	struct ods_stage_params q = p;
	q.chunk = 48u << 10;
	if ((c = ods_stage_chunk_fit(&q, plain, cfg, &ods_accel_hostdev)) != 48u << 10)
		FAIL("chunk_fit of a chunk that fits: %zu, want 49152", c);
	struct ods_stage *s;
	q.chunk = 128u << 10;
	if (ods_stage_open(&s, &q, plain, cfg, &ods_accel_hostdev) != OPENDS_DRIVER_INVALID_PROPS)
		FAIL("open with 2 x 128 KiB in 200 KiB was not refused");
	q.chunk = 64u << 10;
	if (ods_stage_open(&s, &q, plain, cfg, &ods_accel_hostdev))
		FAIL("open with the fitted chunk: %s", opends_last_error_detail());
	/* it holds 2 x 64 KiB (depth cut to 1): 72 KiB left, 36 per worker */
	if ((c = ods_stage_chunk_fit(&p, plain, cfg, &ods_accel_hostdev)) != 32u << 10)
		FAIL("chunk_fit with 128 KiB of the budget held: %zu, want 32768", c);
	ods_stage_close(s);
	if ((c = ods_stage_chunk_fit(&p, plain, cfg, &ods_accel_hostdev)) != 64u << 10)
		FAIL("chunk_fit after close: %zu, want 65536", c);
	q = p;
	q.threads = 64; /* 3.1 KiB each */
	if ((c = ods_stage_chunk_fit(&q, plain, cfg, &ods_accel_hostdev)) != 0)
		FAIL("chunk_fit for 64 workers in 200 KiB: %zu, want 0", c);
	printf("chunkfit: 64 KiB of 1 MiB for 2 workers in 200 KiB (32 with extra workers or with 128 KiB held), kept "
	       "when it fits, 0 under 4 KiB a worker\n");
}

/* A submit wakes no sleeping worker while another spins idle and will take
 * the request (wake_workers less nidle): two workers both asleep; a read
 * wakes one, and once it is done that one spins (1 s); a second read
 * submitted meanwhile is taken by it, and the only wake-up is the one of
 * its completion (ods_stage_post), not one of the sleeping worker. */
static void case_nowake(void)
{
	reset();
	struct ods_stage_params p = { .threads = 2, .depth = 2, .chunk = CHUNK, .spin_us = 1000000 };
	static struct ods_config cfg;
	static struct ods_mover waking; /* the gate mover with the wake-ups counted */
	waking = gate_mover;
	waking.wait = gm_wait;
	waking.wake = gm_wake;
	struct ods_stage *s;
	if (ods_stage_open(&s, &p, &waking, &cfg, &ods_accel_hostdev))
		FAIL("ods_stage_open: %s", opends_last_error_detail());
	usleep(2500 * 1000); /* both spin 1 s after starting, then sleep */
	struct req a, b;
	unsigned w0 = atomic_load(&g_wakes);
	submit(s, &a, 0, 0, CHUNK, false);
	finish(&a, (ssize_t)CHUNK, "first read");
	unsigned w1 = atomic_load(&g_wakes);
	if (w1 - w0 != 2)
		FAIL("first read with both workers asleep: %u wake-ups, want 2 (the submit's, the completion's)", w1 - w0);
	usleep(50 * 1000); /* its worker spins idle now */
	submit(s, &b, 0, (off_t)CHUNK, CHUNK, false);
	finish(&b, (ssize_t)CHUNK, "second read");
	unsigned w2 = atomic_load(&g_wakes);
	if (g_worker[1] != g_worker[0])
		FAIL("the second read went to worker %u, not to worker %u spinning idle", g_worker[1], g_worker[0]);
	if (w2 - w1 != 1)
		FAIL("second read with a worker spinning idle: %u wake-ups, want 1 (its completion's only)", w2 - w1);
	ods_stage_close(s);
	printf("nowake: a read submitted while a worker spins idle wakes no sleeping worker\n");
}

#define NMANY 8

struct many {
	struct ods_stage *s;
	struct ods_io *ios[NMANY];
	atomic_bool returned;
};

static void *many_submitter(void *arg)
{
	struct many *m = arg;
	ods_stage_submit_many(m->s, m->ios, NMANY, true);
	atomic_store(&m->returned, true);
	return NULL;
}

static void case_many(void)
{
	reset();
	struct ods_stage *s = open_engine(1); /* room for 2 requests, or 2 chunks' bytes */
	static struct req q[NMANY];
	struct many m = { .s = s };
	atomic_init(&m.returned, false);
	for (unsigned i = 0; i < NMANY; i++) {
		off_t off = i == 3 ? (off_t)(2 * LEN) : (off_t)(i * 3 * CHUNK + 100); /* 3: past the end */
		prepare(&q[i], 0, off, 2 * CHUNK, false);
		m.ios[i] = &q[i].io;
	}
	/* the single-submit room rule, which a batch keeps only past 8 times
	 * those bytes by default (BATCH_ROOM in src/core/stage_queue.c;
	 * test_batch_nowait checks that bound) */
	setenv("OPENDS_AB_BATCH_NOWAIT", "0", 1);
	pthread_t t;
	if (pthread_create(&t, NULL, many_submitter, &m))
		FAIL("pthread_create");
	/* it cannot return before some are served: the queue holds 2 */
	wait_held(2, MAXSTART);
	if (atomic_load(&m.returned))
		FAIL("ods_stage_submit_many of %d returned before any room was made", NMANY);
	for (unsigned i = 0; i < NMANY; i++) {
		char name[32];
		snprintf(name, sizeof(name), "batch entry %u", i);
		finish(&q[i], i == 3 ? 0 : (ssize_t)(2 * CHUNK), name);
	}
	pthread_join(t, NULL);
	unsetenv("OPENDS_AB_BATCH_NOWAIT");
	ods_stage_close(s);
	/* one worker, one device: the entries' chunks in the batch's order */
	unsigned at = 0;
	for (unsigned i = 0; i < NMANY; i++) {
		if (i == 3)
			continue;
		unsigned want = 3; /* 2 chunks + 100 bytes at an unaligned start: 3 chunks of 64 KiB */
		if (count_of(&q[i].io, at, want) != want)
			FAIL("batch entry %u: its chunks are not handed out %u..%u in the batch's order", i, at,
			     at + want - 1);
		at += want;
	}
	if (nstarted() != at)
		FAIL("%u chunks handed out, want %u", nstarted(), at);
	printf("many: %d requests in one submit, waiting for room halfway, in order and byte-exact\n", NMANY);
}

/* chunks handed out to one worker of depth 8 with the read of LEN queued,
 * once they stop coming (then one released: want + 1), byte-exact */
static unsigned dcap_run(const char *cap, bool device_io, unsigned want)
{
	reset();
	if (cap)
		setenv("OPENDS_AB_DIRECT_INFLIGHT", cap, 1);
	else
		unsetenv("OPENDS_AB_DIRECT_INFLIGHT");
	g_device_io = device_io;
	static struct ods_config cfg;
	struct ods_stage_params p = { .threads = 1, .depth = 8, .chunk = CHUNK, .spin_us = 0 };
	struct ods_stage *s;
	if (ods_stage_open(&s, &p, &gate_mover, &cfg, &ods_accel_hostdev))
		FAIL("ods_stage_open: %s", opends_last_error_detail());
	struct req a;
	submit(s, &a, 0, 0, LEN, false);
	wait_held(want, MAXSTART);
	usleep(50 * 1000); /* (more would have come by now) */
	unsigned n = nstarted();
	if (n != want)
		FAIL("cap %s, device reads %d: %u chunks in flight, want %u", cap ? cap : "unset", device_io, n, want);
	if (!release_one())
		FAIL("nothing held");
	wait_held(want, want + 1);
	usleep(20 * 1000);
	if (nstarted() != want + 1)
		FAIL("cap %s: %u handed out after one ended, want %u", cap ? cap : "unset", nstarted(), want + 1);
	finish(&a, (ssize_t)LEN, "dcap read");
	ods_stage_close(s);
	return n;
}

static void case_dcap(void)
{
	dcap_run("128k", true, 2);
	dcap_run("128k", false, 8);
	dcap_run(NULL, true, 8);
	dcap_run("12x", true, 8); /* not a size: no cap */
	printf("dcap: two device reads of 64 KiB in flight under a 128 KiB cap, the depth without\n");
}

int main(int argc, char **argv)
{
	if (argc != 2)
		FAIL("usage: test_stage_fair devices|fifo|cancel|many|extra|nowake|chunkfit|dcap");
	alarm(60); /* a request lost from the queue would hang */
	g_model = malloc(2 * LEN);
	if (!g_model)
		FAIL("malloc");
	srand(7);
	for (size_t i = 0; i < 2 * LEN; i++)
		g_model[i] = (char)rand();
	memset(&g_h, 0, sizeof(g_h));
	g_h.fd = -1;
	g_h.twin_fd = -1;
	pthread_mutex_init(&g_h.twin_lock, NULL);
	if (!strcmp(argv[1], "devices"))
		case_devices();
	else if (!strcmp(argv[1], "fifo"))
		case_fifo();
	else if (!strcmp(argv[1], "cancel"))
		case_cancel();
	else if (!strcmp(argv[1], "many"))
		case_many();
	else if (!strcmp(argv[1], "extra"))
		case_extra();
	else if (!strcmp(argv[1], "nowake"))
		case_nowake();
	else if (!strcmp(argv[1], "chunkfit"))
		case_chunkfit();
	else if (!strcmp(argv[1], "dcap"))
		case_dcap();
	else
		FAIL("unknown case %s", argv[1]);
	free(g_model);
	return 0;
}
