/*
 * The source mover: source handles run on the staging engine (stage.h),
 * beside the fd mover, on every backend. The engine owns the requests,
 * the chunker, cancellation, the pinned slots and the copies to and from
 * device memory; this file owns how a chunk reaches a source:
 *
 *  - a chunk is cut into pieces at the source's io_unit boundaries (a
 *    striped object's pieces map 1:1 to its stripe units), each at most
 *    max_io;
 *  - pieces start while the caps of the source's domain allow (requests
 *    and bytes in flight, shared by sources with the same domain: librados
 *    blocks its caller once its own in-flight budget is passed, so the
 *    rados source sets caps below it). A piece the caps hold back waits in
 *    its domain's queue and is started by the completion that frees room
 *    (pump), on whatever thread the source calls back on; no lock is held
 *    while a source is called;
 *  - an asynchronous source reports each piece on its own thread; the last
 *    piece of a chunk posts the chunk to the engine (ods_stage_post), which
 *    then calls complete() on the chunk's worker. A blocking source's calls
 *    run on the worker itself, one piece after another.
 *  - ref: each request is delegated whole to the synchronous runner
 *    (ods_source_run, the oracle) on a worker;
 *  - an asynchronous source moving the caller's host memory bypasses the
 *    engine: the request is one run of the same pieces under the same
 *    caps, started on the submitter's thread and completed on the source's
 *    (direct requests, below).
 *
 * Why the caps and the splitting stay here rather than in the engine's
 * (issue 20: fold them where the engine's can serve): the engine caps
 * chunks per worker (threads x depth x chunk, one budget for every handle
 * of the mover), while a source's caps are per *domain*: requests and
 * bytes in flight shared by all handles on one client connection (one
 * rados_t: librados blocks its caller past its own byte budget), which the
 * engine has no notion of; and a source's pieces follow its io_unit (a
 * striped object's stripe units, 4 MiB objects) and max_io, not the
 * engine's 4 MiB chunk. Direct requests, which never see the engine, need
 * the same caps anyway. What the engine does own, it keeps: the request
 * FIFO, chunking, staging slots and copies for device memory.
 *
 * Results as for files: bytes up to the first short piece; a piece longer
 * than asked, a short piece before a known end, or data after a short
 * piece is -EIO; the first error wins, and its offset is the detail's.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"
#include "stage.h"

/* 4 workers (the copies to device memory, and the calls of blocking
 * sources, run on them) x 8 chunks of 4 MiB: 32 chunks in flight over all
 * sources, 128 MiB of staging reserved from OPENDS_MAX_PINNED. */
#define ENG_THREADS 4u
#define ENG_DEPTH 8u
#define ENG_CHUNK ((size_t)4 << 20)

struct ods_sdom {
	uint64_t key;
	unsigned refs;
	unsigned max_ops;
	size_t max_bytes;
	unsigned ops;
	size_t bytes;
	struct sunit *head, *tail; /* chunks with pieces left to start */
	struct ods_sdom *next;     /* srcs.doms */
	struct ods_sdom *bnext;    /* srcs.busy: domains with head != NULL */
	bool busy;
};

/* A run of pieces: a chunk of the engine (one per unit: the worker's ctx),
 * or a whole direct request (io set, u NULL; see direct_submit). */
struct sunit {
	struct ods_stage_unit *u;
	struct ods_io *io;       /* direct: the request */
	struct ods_source *s;
	bool rd;
	char *buf;               /* memory of the transfer: buf[0] is source offset buf_off */
	off_t buf_off;
	off_t rend;              /* the request's end (reads: at most the known end) */
	off_t pos, end;          /* pieces left to start (srcs.lock) */
	atomic_uint pending;     /* pieces running + 1 while pieces are left */
	atomic_llong short_at;   /* lowest end of a short piece */
	atomic_llong data_end;   /* highest end of returned data */
	atomic_long err;         /* first error, negated */
	atomic_llong err_off;
	struct sunit *next;      /* domain queue */
};

struct piece {
	struct sunit *su;
	off_t off;
	size_t len;
	bool popped; /* the chunk had no pieces left after this one */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t caps;
	struct ods_sdom *doms, *busy, *busy_tail;
	struct ods_stage *stage;
} srcs = { .lock = PTHREAD_MUTEX_INITIALIZER, .caps = PTHREAD_COND_INITIALIZER };

/* ---- domains ------------------------------------------------------------ */

static unsigned min_nz_u(unsigned a, unsigned b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}
static size_t min_nz_z(size_t a, size_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

struct ods_sdom *ods_sdom_get(uint64_t key, unsigned max_ops, size_t max_bytes)
{
	pthread_mutex_lock(&srcs.lock);
	struct ods_sdom *d = NULL;
	if (key)
		for (d = srcs.doms; d && d->key != key; d = d->next)
			;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			pthread_mutex_unlock(&srcs.lock);
			return NULL;
		}
		d->key = key;
		d->next = srcs.doms;
		srcs.doms = d;
	}
	d->refs++;
	d->max_ops = min_nz_u(d->max_ops, max_ops);
	d->max_bytes = min_nz_z(d->max_bytes, max_bytes);
	pthread_mutex_unlock(&srcs.lock);
	return d;
}

void ods_sdom_put(struct ods_sdom *d)
{
	pthread_mutex_lock(&srcs.lock);
	if (--d->refs == 0) {
		struct ods_sdom **p = &srcs.doms;
		while (*p != d)
			p = &(*p)->next;
		*p = d->next;
		free(d);
	}
	pthread_mutex_unlock(&srcs.lock);
}

void ods_sdom_caps(const struct ods_sdom *d, unsigned *max_ops, size_t *max_bytes)
{
	pthread_mutex_lock(&srcs.lock);
	*max_ops = d->max_ops ? d->max_ops : ODS_SRC_DEF_INFLIGHT;
	*max_bytes = d->max_bytes;
	pthread_mutex_unlock(&srcs.lock);
}

/* caller holds srcs.lock */
static bool room_for(const struct ods_sdom *d, size_t n)
{
	unsigned max_ops = d->max_ops ? d->max_ops : ODS_SRC_DEF_INFLIGHT;
	return d->ops < max_ops && (!d->max_bytes || !d->ops || d->bytes + n <= d->max_bytes);
}

void ods_sdom_enter(struct ods_sdom *d, size_t n)
{
	pthread_mutex_lock(&srcs.lock);
	while (!room_for(d, n))
		pthread_cond_wait(&srcs.caps, &srcs.lock);
	d->ops++;
	d->bytes += n;
	pthread_mutex_unlock(&srcs.lock);
}

static void pump(void);

void ods_sdom_leave(struct ods_sdom *d, size_t n)
{
	pthread_mutex_lock(&srcs.lock);
	d->ops--;
	d->bytes -= n;
	bool queued = d->head != NULL;
	pthread_cond_broadcast(&srcs.caps);
	pthread_mutex_unlock(&srcs.lock);
	if (queued)
		pump(); /* an asynchronous source's pieces wait in the same domain */
}

size_t ods_src_piece_len(const struct ods_source *s, off_t pos, off_t end, size_t cap)
{
	uint64_t u = s->unit, p = (uint64_t)pos;
	uint64_t bound = (p / u + 1) * u; /* next unit boundary; pos < INT64_MAX, u <= SIZE_MAX */
	uint64_t n = (uint64_t)(end - pos);
	if (bound - p < n)
		n = bound - p;
	if (s->max_io && n > s->max_io)
		n = s->max_io;
	if (cap && n > cap)
		n = cap;
	return (size_t)n;
}

/* ---- pieces ----------------------------------------------------------------- */

static void note_min(atomic_llong *v, long long x)
{
	long long cur = atomic_load(v);
	while (x < cur && !atomic_compare_exchange_weak(v, &cur, x))
		;
}

static void note_max(atomic_llong *v, long long x)
{
	long long cur = atomic_load(v);
	while (x > cur && !atomic_compare_exchange_weak(v, &cur, x))
		;
}

static void note_err(struct sunit *su, long e, off_t at)
{
	long z = 0;
	if (atomic_compare_exchange_strong(&su->err, &z, e))
		atomic_store(&su->err_off, (long long)at);
}

/* The result of the piece [off, off + len) of su. */
static void piece_result(struct sunit *su, off_t off, size_t len, ssize_t res)
{
	if (res < 0)
		note_err(su, (long)res, off);
	else if ((size_t)res > len || (!su->rd && (size_t)res != len))
		note_err(su, -EIO, off); /* more than asked; or a short write */
	else if (su->rd && (size_t)res < len) {
		off_t at = off + (off_t)res;
		if (su->s->size >= 0 && at < su->rend)
			note_err(su, -EIO, at); /* short before the known end */
		note_min(&su->short_at, (long long)at);
		if (res)
			note_max(&su->data_end, (long long)at);
	} else if (su->rd) {
		note_max(&su->data_end, (long long)(off + (off_t)res));
	}
}

/* The engine's view of a whole request: a short chunk at one offset and
 * data after it in another chunk is -EIO (the source's short count was not
 * its end). Chunks finish on different workers, so each publishes its own
 * end and data first, then looks at the others' (sequentially consistent:
 * of two such chunks, at least one sees the other). These two fields are
 * the engine's short/written marks; moving them the same way it does
 * (lower / raise) changes nothing it would not have done itself. */
static bool data_after_short(struct ods_stage_unit *u, long long sat, long long dend, long long *at)
{
	struct ods_stage_req *r = u->r;
	bool shrt = sat < (long long)u->c1;
	if (shrt)
		note_min(&r->short_at, sat);
	if (dend > (long long)u->c0)
		note_max(&r->written_to, dend);
	long long rs = atomic_load(&r->short_at), rw = atomic_load(&r->written_to);
	if (shrt && rw > sat) {
		*at = sat;
		return true;
	}
	if (dend > (long long)u->c0 && rs < dend) {
		*at = rs;
		return true;
	}
	return false;
}

/* Worker thread: every piece of u has finished; report it to the engine. */
static void unit_finish(struct sunit *su)
{
	struct ods_stage_unit *u = su->u;
	struct ods_stage_req *r = u->r;
	long e = atomic_load(&su->err);
	long long at = atomic_load(&su->err_off);
	long long sat = atomic_load(&su->short_at), dend = atomic_load(&su->data_end);
	if (!e && su->rd && (dend > sat || data_after_short(u, sat, dend, &at))) {
		e = -EIO;
		if (dend > sat)
			at = sat;
	}
	if (e) {
		/* first error of the request: its offset names it in the detail */
		long z = 0;
		if (atomic_compare_exchange_strong(&r->err, &z, e))
			ods_src_note_off(r->io, (off_t)at);
		ods_stage_end(u, e);
		return;
	}
	if (!su->rd) {
		ods_stage_end(u, 0);
		return;
	}
	u->io_done = (size_t)((sat < (long long)u->c1 ? (off_t)sat : u->c1) - u->c0);
	ods_stage_read_done(u);
}

static void direct_finish(struct sunit *su);

static void unit_put(struct sunit *su)
{
	if (atomic_fetch_sub_explicit(&su->pending, 1, memory_order_acq_rel) != 1)
		return;
	if (su->u)
		ods_stage_post(su->u, 0); /* complete() runs unit_finish on its worker */
	else
		direct_finish(su); /* here, on the source's thread */
}

/* Take the next piece of some domain's oldest chunk (srcs.lock held), or
 * false when the caps allow none.
 * A direct request a batch cancel flagged before any of its pieces went
 * to the source has not started: when carve meets it at its domain's head
 * it leaves the queue onto *gone, to end with -ECANCELED (OPENDS_CANCELED),
 * as the engine ends a flagged request no worker has taken. Only the heads
 * carve looks at anyway are checked (no walk of its own per piece): a
 * flagged request behind an unflagged one is reaped once it gets to the
 * head, before any of its pieces can start, and a pump that stops has
 * looked at every busy domain's head. */
static bool carve(struct piece *pc, struct sunit **gone)
{
	struct ods_sdom *d, *prev = NULL, *next;
	for (d = srcs.busy; d; d = next) {
		next = d->bnext;
		struct sunit *su;
		while ((su = d->head) && !su->u && su->pos == su->io->off &&
		       atomic_load_explicit(&su->io->cancelled, memory_order_acquire)) {
			d->head = su->next;
			if (!d->head)
				d->tail = NULL;
			su->next = *gone;
			*gone = su;
		}
		if (!su) { /* nothing left to start: off the busy list */
			if (prev)
				prev->bnext = next;
			else
				srcs.busy = next;
			if (srcs.busy_tail == d)
				srcs.busy_tail = prev;
			d->bnext = NULL;
			d->busy = false;
			continue;
		}
		size_t n = ods_src_piece_len(su->s, su->pos, su->end, d->max_bytes);
		if (!room_for(d, n)) {
			prev = d;
			continue;
		}
		d->ops++;
		d->bytes += n;
		pc->su = su;
		pc->off = su->pos;
		pc->len = n;
		su->pos += (off_t)n;
		atomic_fetch_add_explicit(&su->pending, 1, memory_order_relaxed);
		pc->popped = su->pos >= su->end;
		if (pc->popped) {
			d->head = su->next;
			if (!d->head)
				d->tail = NULL;
		}
		/* round robin: this domain goes to the back of the busy list */
		if (prev)
			prev->bnext = d->bnext;
		else
			srcs.busy = d->bnext;
		if (srcs.busy_tail == d)
			srcs.busy_tail = prev;
		d->bnext = NULL;
		if (d->head) {
			if (srcs.busy_tail)
				srcs.busy_tail->bnext = d;
			else
				srcs.busy = d;
			srcs.busy_tail = d;
		} else {
			d->busy = false;
		}
		return true;
	}
	return false;
}

static void piece_done(void *token, ssize_t result)
{
	struct piece *pc = token;
	struct sunit *su = pc->su;
	struct ods_sdom *d = su->s->dom;
	piece_result(su, pc->off, pc->len, result);
	pthread_mutex_lock(&srcs.lock);
	d->ops--;
	d->bytes -= pc->len;
	bool queued = srcs.busy != NULL;
	pthread_cond_broadcast(&srcs.caps);
	pthread_mutex_unlock(&srcs.lock);
	free(pc);
	unit_put(su);
	if (queued)
		pump();
}

static void piece_start(struct piece *pc)
{
	struct sunit *su = pc->su;
	struct ods_source *s = su->s;
	bool popped = pc->popped;
	char *buf = su->buf + (pc->off - su->buf_off);
	const void *cb = ods_src_cb_begin(s);
	int rc = su->rd ? s->ops.read_async(s->src, buf, pc->len, (uint64_t)pc->off, piece_done, pc)
			: s->ops.write_async(s->src, buf, pc->len, (uint64_t)pc->off, piece_done, pc);
	ods_src_cb_end(cb);
	if (rc)
		piece_done(pc, rc < 0 && rc > -OPENDS_ERRNO_MAX ? rc : -EIO);
	if (popped)
		unit_put(su); /* the queue's reference */
}

static _Thread_local int in_pump;
static _Thread_local bool pump_again;

/* Start every piece the caps allow. Re-entered from a completion that
 * runs inside a source's call (done before read_async returns): the outer
 * loop goes round again instead. */
static void pump(void)
{
	if (in_pump) {
		pump_again = true;
		return;
	}
	in_pump = 1;
	do {
		pump_again = false;
		for (;;) {
			struct piece *pc = malloc(sizeof(*pc));
			if (!pc)
				break; /* the next completion pumps again */
			pthread_mutex_lock(&srcs.lock);
			struct sunit *gone = NULL;
			bool got = srcs.busy && carve(pc, &gone);
			pthread_mutex_unlock(&srcs.lock);
			while (gone) {
				struct sunit *su = gone;
				gone = su->next;
				struct ods_io *io = su->io;
				free(su);
				ods_io_complete(io, -ECANCELED);
			}
			if (!got) {
				free(pc);
				break;
			}
			piece_start(pc);
		}
	} while (pump_again);
	in_pump = 0;
}

/* A blocking source: every piece on this worker, in order, up to the first
 * error. Pieces after a short one are read too, as the pieces of an
 * asynchronous source run in parallel: data after a short piece is -EIO
 * whichever way the source runs. */
static void run_blocking(struct sunit *su)
{
	struct ods_source *s = su->s;
	unsigned max_ops;
	size_t max_bytes;
	ods_sdom_caps(s->dom, &max_ops, &max_bytes);
	while (su->pos < su->end) {
		off_t off = su->pos;
		size_t n = ods_src_piece_len(s, off, su->end, max_bytes);
		char *buf = su->buf + (off - su->buf_off);
		ods_sdom_enter(s->dom, n);
		const void *cb = ods_src_cb_begin(s);
		ssize_t res = su->rd ? s->ops.read(s->src, buf, n, (uint64_t)off) : s->ops.write(s->src, buf, n, (uint64_t)off);
		ods_src_cb_end(cb);
		ods_sdom_leave(s->dom, n);
		if (res < 0 && res <= -OPENDS_ERRNO_MAX)
			res = -EIO;
		piece_result(su, off, n, res);
		su->pos += (off_t)n;
		if (res < 0)
			break;
	}
	unit_finish(su);
}

/* ---- the mover ----------------------------------------------------------- */

static int src_worker_open(struct ods_stage *s, unsigned idx, void **ctx)
{
	(void)idx;
	*ctx = calloc(ods_stage_params(s)->depth, sizeof(struct sunit));
	return *ctx ? 0 : ods_fail(OPENDS_NOMEM_ERROR, "sources: out of memory");
}

static void src_worker_close(void *ctx)
{
	free(ctx);
}

/* The end of what io moves: a read stops at the source's known end. */
static off_t req_end(const struct ods_io *io, const struct ods_source *s)
{
	off_t end = io->off + (off_t)io->size;
	if (io->opcode == OPENDS_READ && s->size >= 0 && end > s->size)
		end = io->off < s->size ? (off_t)s->size : io->off;
	return end;
}

static int src_req_init(struct ods_stage_req *r)
{
	struct ods_io *io = r->io;
	struct ods_source *s = io->fh->src;
	r->fsize = s->size;
	r->delegate = ods_drv.be == &ods_backend_ref; /* the oracle runs it whole */
	r->end = req_end(io, s);
	return r->end == io->off; /* at or after the known end: nothing reaches the source */
}

static void unit_init(struct sunit *su, struct ods_source *s, bool rd, off_t c0, off_t c1)
{
	su->s = s;
	su->rd = rd;
	su->pos = c0;
	su->end = c1;
	su->next = NULL;
	atomic_init(&su->pending, 1);
	atomic_init(&su->short_at, (long long)c1);
	atomic_init(&su->data_end, (long long)c0);
	atomic_init(&su->err, 0);
	atomic_init(&su->err_off, 0);
}

/* Queue su's pieces in its domain and start what the caps allow. */
static void unit_queue(struct sunit *su)
{
	struct ods_sdom *d = su->s->dom;
	pthread_mutex_lock(&srcs.lock);
	if (d->tail)
		d->tail->next = su;
	else
		d->head = su;
	d->tail = su;
	if (!d->busy) {
		d->busy = true;
		d->bnext = NULL;
		if (srcs.busy_tail)
			srcs.busy_tail->bnext = d;
		else
			srcs.busy = d;
		srcs.busy_tail = d;
	}
	pthread_mutex_unlock(&srcs.lock);
	pump();
}

static void start_unit(struct ods_stage_unit *u, bool rd)
{
	struct sunit *su = (struct sunit *)ods_stage_ctx(u) + u->idx;
	unit_init(su, u->r->io->fh->src, rd, u->c0, u->c1);
	su->u = u;
	su->io = NULL;
	su->buf = u->io_buf;
	su->buf_off = u->io_off;
	su->rend = u->r->end;
	if (su->s->flags & OPENDS_SOURCE_BLOCKING)
		run_blocking(su);
	else
		unit_queue(su);
}

static void src_read(struct ods_stage_unit *u)
{
	struct ods_io *io = u->r->io;
	const struct ods_source *s = io->fh->src;
	u->io_off = u->c0;
	u->io_len = (size_t)(u->c1 - u->c0);
	u->slot = io->mem == ODS_MEM_DEVICE && !(s->flags & OPENDS_SOURCE_DEVICE_MEMORY);
	u->io_buf = u->slot ? ods_stage_slot(u) : io->buf + (u->c0 - io->off);
	if (!u->io_buf) {
		ods_stage_end(u, -ENOMEM);
		return;
	}
	start_unit(u, true);
}

static void src_write(struct ods_stage_unit *u)
{
	start_unit(u, false);
}

static void src_complete(struct ods_stage_unit *u, long res)
{
	(void)res;
	unit_finish((struct sunit *)ods_stage_ctx(u) + u->idx);
}

static const struct ods_mover source_mover = {
	.name = "sources",
	.worker_open = src_worker_open,
	.worker_close = src_worker_close,
	.req_init = src_req_init,
	.read = src_read,
	.write = src_write,
	.rw_whole = ods_source_run,
	.complete = src_complete,
};

/* ---- engine life ---------------------------------------------------------- */

/* The engine takes its staging from OPENDS_MAX_PINNED like every stage
 * (the depth is cut to what is left). When not even one 4 MiB chunk per
 * worker is left (a small budget the backend's own staging mostly took),
 * the chunks get smaller, down to 4 KiB, rather than refusing every source:
 * a source on host memory needs no staging at all, and pieces never
 * extend past a chunk, so only their size changes. */
int ods_src_engine_start(void)
{
	int rc = 0;
	pthread_mutex_lock(&srcs.lock);
	if (!srcs.stage) {
		char was[256];
		snprintf(was, sizeof(was), "%s", opends_last_error_detail());
		/* sized from what is left of the budget; fitted again if the
		 * budget shrank between the fit and the open (the uring bounce
		 * pool and read-ahead reserve without this lock), a few times */
		struct ods_stage_params p = { ENG_THREADS, ENG_DEPTH, ENG_CHUNK, 0 };
		for (int tries = 0; tries < 4; tries++) {
			p.chunk = ods_stage_chunk_fit(&p, &source_mover, &ods_drv.cfg, ods_drv.accel);
			if (!p.chunk) {
				rc = ods_fail(OPENDS_DRIVER_INVALID_PROPS,
					      "sources: the staging budget (OPENDS_MAX_PINNED, %zu MiB) has less than 4 KiB "
					      "per worker left for the source engine's %u workers",
					      ods_pinned_budget(&ods_drv.cfg) >> 20, ENG_THREADS);
				break;
			}
			rc = ods_stage_open(&srcs.stage, &p, &source_mover, &ods_drv.cfg, ods_drv.accel);
			if (rc != OPENDS_DRIVER_INVALID_PROPS)
				break;
		}
		if (!rc)
			ods_fail(0, "%s", was); /* a success leaves the detail as it was */
	}
	pthread_mutex_unlock(&srcs.lock);
	return rc;
}

void ods_src_engine_params(unsigned *threads, unsigned *depth, size_t *chunk)
{
	pthread_mutex_lock(&srcs.lock);
	const struct ods_stage_params *p = srcs.stage ? ods_stage_params(srcs.stage) : NULL;
	*threads = p ? p->threads : ENG_THREADS;
	*depth = p ? p->depth : ENG_DEPTH;
	*chunk = p ? p->chunk : ENG_CHUNK;
	pthread_mutex_unlock(&srcs.lock);
}

void ods_sources_fini(void)
{
	/* every handle has drained: the engine holds no request */
	pthread_mutex_lock(&srcs.lock);
	struct ods_stage *st = srcs.stage;
	srcs.stage = NULL;
	pthread_mutex_unlock(&srcs.lock);
	if (st)
		ods_stage_close(st);
}

/* fork() while open: the child has none of the engine's threads (and
 * perhaps a lock held by one): forget everything, leaking what the parent
 * had, as every module does (driver.c after_fork_child). */
void ods_sources_forget(void)
{
	memset(&srcs, 0, sizeof(srcs));
	srcs.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	srcs.caps = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	ods_source_why_forget();
	ods_rados_forget();
}

/* ---- direct requests ------------------------------------------------------- */

/* An asynchronous source moving the caller's host memory needs none of the
 * engine: no staging slot, no copy, no worker. Its request is one run of
 * pieces started here, on the submitter's thread, and completed on the
 * thread of its last piece's callback, as a plain rados_aio_read is: two
 * thread hand-offs fewer per request (to a worker at submit, and back to
 * it at completion) than the engine, which the 1000-small-object batch
 * measured (issue 20 S3). The pieces, the caps and the results are those
 * of the engine's chunks. Device memory (staged), blocking sources (run on
 * the workers) and ref (the oracle runs each request whole) keep the
 * engine. A batch cancel ends a direct request none of whose pieces has
 * gone to the source yet (it waits in its domain's queue behind the caps)
 * with -ECANCELED (carve); once one has, it runs to the end, as
 * the engine's started requests do. */
static bool direct_ok(const struct ods_io *io, const struct ods_source *s)
{
	return io->mem != ODS_MEM_DEVICE && !(s->flags & OPENDS_SOURCE_BLOCKING) && ods_drv.be != &ods_backend_ref;
}

static void direct_submit(struct ods_io *io)
{
	struct ods_source *s = io->fh->src;
	off_t end = req_end(io, s);
	if (end == io->off) {
		ods_io_complete(io, 0); /* at or after the known end */
		return;
	}
	struct sunit *su = malloc(sizeof(*su));
	if (!su) {
		ods_io_complete(io, -ENOMEM);
		return;
	}
	unit_init(su, s, io->opcode == OPENDS_READ, io->off, end);
	su->u = NULL;
	su->io = io;
	su->buf = io->buf;
	su->buf_off = io->off;
	su->rend = end;
	unit_queue(su);
}

/* Every piece of a direct request has finished: its result, as
 * unit_finish and the engine would make it of one chunk. */
static void direct_finish(struct sunit *su)
{
	struct ods_io *io = su->io;
	long e = atomic_load(&su->err);
	long long at = atomic_load(&su->err_off);
	long long sat = atomic_load(&su->short_at), dend = atomic_load(&su->data_end);
	if (!e && su->rd && dend > sat) {
		e = -EIO; /* data after a short piece */
		at = sat;
	}
	ssize_t res;
	if (e) {
		ods_src_note_off(io, (off_t)at);
		res = e;
	} else if (!su->rd) {
		res = (ssize_t)io->size;
	} else {
		res = (ssize_t)((sat < (long long)su->end ? (off_t)sat : su->end) - io->off);
	}
	free(su);
	ods_io_complete(io, res);
}

/* ---- submission ------------------------------------------------------------ */

/* The caller's done, kept in be_scratch[1] while the request is ours. */
static void src_io_done(struct ods_io *io)
{
	struct ods_source *s = io->fh->src;
	ods_io_done_fn done;
	memcpy(&done, &io->be_scratch[1], sizeof(done));
	io->done = done;
	if (io->result < 0 && io->result > -OPENDS_ERRNO_MAX && !io->why &&
	    !(io->result == -ECANCELED && atomic_load(&io->cancelled)))
		io->why = ods_source_why(io, io->result); /* a future's await names the source */
	done(io);
	/* last: the handle may be freed once this reaches 0 */
	if (atomic_fetch_sub_explicit(&s->reqs, 1, memory_order_acq_rel) == 1)
		ods_futex_wake_all(&s->reqs);
}

void ods_source_submit(struct ods_io *io, bool may_block)
{
	struct ods_source *s = io->fh->src;
	_Static_assert(sizeof(ods_io_done_fn) <= sizeof(io->be_scratch[1]), "done fits a scratch word");
	atomic_fetch_add_explicit(&s->reqs, 1, memory_order_relaxed);
	memcpy(&io->be_scratch[1], &io->done, sizeof(io->done));
	io->done = src_io_done;
	ods_src_note_off(io, io->off); /* the detail's offset until a piece fails */
	if (direct_ok(io, s))
		direct_submit(io);
	else
		ods_stage_submit(srcs.stage, io, may_block);
}
