/*
 * The source engine: runs requests on source handles for every backend but
 * ref (which runs them synchronously: source.c).
 *
 * A request is cut into pieces at the source's io_unit boundaries (a
 * striped object's pieces map 1:1 to its stripe units), each at most
 * max_io and, when staged, one slot. Pieces start while the caps of the
 * source's domain allow (requests and bytes in flight, shared by sources
 * with the same domain: librados blocks its caller once its own in-flight
 * budget is passed, so the rados source sets caps below it). The source
 * calls back on any thread; the piece is accounted there, its caps given
 * back and the next pieces started (pump). No lock is held while a source
 * is called.
 *
 * Device memory without OPENDS_SOURCE_DEVICE_MEMORY goes through pinned
 * host slots: the source reads into a slot and one of the engine's threads
 * copies it to the device (the callback thread is the source's, which must
 * not be held); writes are copied to a slot first. The same threads run
 * the read/write calls of blocking sources. They start with the first
 * source handle and stop at driver close.
 *
 * Results as for files: bytes up to the first short piece; a piece longer
 * than asked, a short piece before a known end, or data after a short
 * piece is -EIO; the first error wins.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"

#define NSLOTS 16u
#define SLOT ((size_t)4 << 20)
#define POOL_THREADS 4u
#define MAX_QUEUED 4096u /* requests waiting for their first piece before submitters wait */

struct job {
	void (*fn)(struct job *j);
	struct job *next;
};

struct ods_sdom {
	uint64_t key;
	unsigned refs;
	unsigned max_ops;
	size_t max_bytes;
	unsigned ops;
	size_t bytes;
	struct sreq *head, *tail; /* requests with pieces left to start */
	struct ods_sdom *next;    /* E.doms */
	struct ods_sdom *bnext;   /* E.busy: domains with head != NULL */
	bool busy;
};

struct sreq {
	struct ods_io *io;
	struct ods_source *s;
	off_t pos, end;
	bool staged, started;
	atomic_uint pending;     /* pieces running + 1 while pieces are left */
	atomic_llong short_at;   /* lowest end of a short piece */
	atomic_llong data_end;   /* highest end of returned data */
	atomic_long err;         /* first error, negated */
	atomic_llong err_off;
	struct sreq *next;
	struct job job;          /* oracle runs (ref) on the engine's threads */
};

struct piece {
	struct job job;
	struct sreq *r;
	off_t off;
	size_t len;
	char *buf;      /* what the source sees */
	int slot;       /* -1: none */
	bool popped;    /* the request had no pieces left after this one */
	ssize_t res;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work, room, caps;
	struct ods_sdom *doms, *busy, *busy_tail;
	unsigned queued;   /* requests not yet started */
	/* staging slots */
	char *slot_mem;
	bool slot_pinned, slot_failed;
	unsigned free_slots[NSLOTS], nfree;
	/* threads */
	unsigned nthreads;
	pthread_t th[POOL_THREADS];
	struct job *jh, *jt;
	bool stop;
} E = { .lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .room = PTHREAD_COND_INITIALIZER,
      .caps = PTHREAD_COND_INITIALIZER };

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
	pthread_mutex_lock(&E.lock);
	struct ods_sdom *d = NULL;
	if (key)
		for (d = E.doms; d && d->key != key; d = d->next)
			;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			pthread_mutex_unlock(&E.lock);
			return NULL;
		}
		d->key = key;
		d->next = E.doms;
		E.doms = d;
	}
	d->refs++;
	d->max_ops = min_nz_u(d->max_ops, max_ops);
	d->max_bytes = min_nz_z(d->max_bytes, max_bytes);
	pthread_mutex_unlock(&E.lock);
	return d;
}

void ods_sdom_put(struct ods_sdom *d)
{
	pthread_mutex_lock(&E.lock);
	if (--d->refs == 0) {
		struct ods_sdom **p = &E.doms;
		while (*p != d)
			p = &(*p)->next;
		*p = d->next;
		free(d);
	}
	pthread_mutex_unlock(&E.lock);
}

void ods_sdom_caps(const struct ods_sdom *d, unsigned *max_ops, size_t *max_bytes)
{
	pthread_mutex_lock(&E.lock);
	*max_ops = d->max_ops ? d->max_ops : ODS_SRC_DEF_INFLIGHT;
	*max_bytes = d->max_bytes;
	pthread_mutex_unlock(&E.lock);
}

void ods_sdom_enter(struct ods_sdom *d, size_t n)
{
	pthread_mutex_lock(&E.lock);
	for (;;) {
		unsigned max_ops = d->max_ops ? d->max_ops : ODS_SRC_DEF_INFLIGHT;
		if (d->ops < max_ops && (!d->max_bytes || !d->ops || d->bytes + n <= d->max_bytes))
			break;
		pthread_cond_wait(&E.caps, &E.lock);
	}
	d->ops++;
	d->bytes += n;
	pthread_mutex_unlock(&E.lock);
}

void ods_sdom_leave(struct ods_sdom *d, size_t n)
{
	pthread_mutex_lock(&E.lock);
	d->ops--;
	d->bytes -= n;
	pthread_cond_broadcast(&E.caps);
	pthread_mutex_unlock(&E.lock);
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

/* ---- the engine's threads ----------------------------------------------- */

static void job_push(struct job *j)
{
	j->next = NULL;
	pthread_mutex_lock(&E.lock);
	if (E.jt)
		E.jt->next = j;
	else
		E.jh = j;
	E.jt = j;
	pthread_cond_signal(&E.work);
	pthread_mutex_unlock(&E.lock);
}

static void *pool_main(void *arg)
{
	(void)arg;
	const struct ods_accel *a = ods_drv.accel;
	bool attached = a->lanes && a->lanes->thread_attach() == 0;
	pthread_mutex_lock(&E.lock);
	for (;;) {
		while (!E.jh && !E.stop)
			pthread_cond_wait(&E.work, &E.lock);
		struct job *j = E.jh;
		if (!j)
			break;
		E.jh = j->next;
		if (!E.jh)
			E.jt = NULL;
		pthread_mutex_unlock(&E.lock);
		j->fn(j);
		pthread_mutex_lock(&E.lock);
	}
	pthread_mutex_unlock(&E.lock);
	if (attached)
		a->lanes->thread_detach();
	return NULL;
}

int ods_src_engine_start(void)
{
	pthread_mutex_lock(&E.lock);
	if (E.nthreads == 0) {
		E.stop = false;
		while (E.nthreads < POOL_THREADS && !pthread_create(&E.th[E.nthreads], NULL, pool_main, NULL))
			E.nthreads++;
	}
	unsigned n = E.nthreads;
	pthread_mutex_unlock(&E.lock);
	return n ? 0 : ods_fail(OPENDS_INTERNAL_ERROR, "sources: could not start a thread");
}

void ods_sources_fini(void)
{
	pthread_mutex_lock(&E.lock);
	E.stop = true;
	pthread_cond_broadcast(&E.work);
	unsigned n = E.nthreads;
	pthread_mutex_unlock(&E.lock);
	/* every handle has drained: the queue holds no work */
	for (unsigned i = 0; i < n; i++)
		pthread_join(E.th[i], NULL);
	pthread_mutex_lock(&E.lock);
	E.nthreads = 0;
	if (E.slot_mem) {
		if (E.slot_pinned)
			ods_drv.accel->mem->pinned_free(E.slot_mem, NSLOTS * SLOT);
		else
			free(E.slot_mem);
	}
	E.slot_mem = NULL;
	E.slot_failed = false;
	E.nfree = 0;
	pthread_mutex_unlock(&E.lock);
}

/* fork() while open: the child has none of the engine's threads (and
 * perhaps a lock held by one): forget everything, leaking what the parent
 * had, as every module does (driver.c after_fork_child). */
void ods_sources_forget(void)
{
	memset(&E, 0, sizeof(E));
	E.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	E.work = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	E.room = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	E.caps = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	ods_rados_forget();
}

/* ---- slots (E.lock held) ------------------------------------------------- */

static int slot_take(void)
{
	if (!E.slot_mem && !E.slot_failed) {
		const struct ods_accel *a = ods_drv.accel;
		E.slot_pinned = a->mem != NULL;
		E.slot_mem = E.slot_pinned ? a->mem->pinned_alloc(NSLOTS * SLOT) : NULL;
		if (!E.slot_mem) {
			E.slot_pinned = false;
			E.slot_mem = ods_aligned_alloc(NSLOTS * SLOT);
		}
		if (!E.slot_mem)
			E.slot_failed = true;
		for (unsigned i = 0; E.slot_mem && i < NSLOTS; i++)
			E.free_slots[i] = NSLOTS - 1 - i;
		E.nfree = E.slot_mem ? NSLOTS : 0;
	}
	return E.nfree ? (int)E.free_slots[--E.nfree] : -1;
}

/* ---- requests ------------------------------------------------------------ */

static void note_err(struct sreq *r, long e, off_t at)
{
	long z = 0;
	if (atomic_compare_exchange_strong(&r->err, &z, e))
		atomic_store(&r->err_off, (long long)at);
}

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

static void req_put(struct sreq *r)
{
	if (atomic_fetch_sub_explicit(&r->pending, 1, memory_order_acq_rel) != 1)
		return;
	struct ods_io *io = r->io;
	struct ods_source *s = r->s;
	long e = atomic_load(&r->err);
	ssize_t res;
	long long short_at = atomic_load(&r->short_at), data_end = atomic_load(&r->data_end);
	if (!e && io->opcode == OPENDS_READ && data_end > short_at) {
		/* data after a short piece: the source's short count was not its end */
		e = -EIO;
		atomic_store(&r->err_off, short_at);
	}
	if (e) {
		res = e;
		ods_src_note_off(io, (off_t)atomic_load(&r->err_off));
	} else if (io->opcode == OPENDS_WRITE) {
		res = (ssize_t)io->size;
	} else {
		res = (ssize_t)((short_at < (long long)r->end ? (off_t)short_at : r->end) - io->off);
	}
	free(r);
	ods_io_complete(io, res);
	/* last: the handle may be freed once this reaches 0 */
	if (atomic_fetch_sub_explicit(&s->reqs, 1, memory_order_acq_rel) == 1)
		ods_futex_wake_all(&s->reqs);
}

/* Take the next piece of some domain's oldest request (E.lock held): NULL
 * when the caps (or slots) allow none. A piece with len 0 stands for a
 * request cancelled before it started. */
static struct piece *carve(void)
{
	struct ods_sdom *d, *prev = NULL;
	for (d = E.busy; d; prev = d, d = d->bnext) {
		struct sreq *r = d->head;
		unsigned max_ops = d->max_ops ? d->max_ops : ODS_SRC_DEF_INFLIGHT;
		if (d->ops >= max_ops)
			continue;
		bool cancel = !r->started && atomic_load_explicit(&r->io->cancelled, memory_order_acquire);
		size_t n = cancel ? 0 : ods_src_piece_len(r->s, r->pos, r->end, r->staged ? SLOT : d->max_bytes);
		if (d->max_bytes && d->ops && d->bytes + n > d->max_bytes)
			continue;
		int slot = -1;
		if (r->staged && !cancel && (slot = slot_take()) < 0) {
			if (E.slot_failed) {
				/* no memory for slots at all: fail the request */
				cancel = true;
				n = 0;
			} else {
				continue;
			}
		}
		struct piece *pc = malloc(sizeof(*pc));
		if (!pc) {
			if (slot >= 0)
				E.free_slots[E.nfree++] = (unsigned)slot;
			return NULL;
		}
		if (!r->started) {
			r->started = true;
			E.queued--;
			pthread_cond_signal(&E.room);
		}
		pc->r = r;
		pc->off = r->pos;
		pc->len = n;
		pc->slot = slot;
		pc->res = 0;
		pc->buf = slot >= 0 ? E.slot_mem + (size_t)slot * SLOT : r->io->buf + (r->pos - r->io->off);
		r->pos += (off_t)n;
		pc->popped = cancel || r->pos >= r->end;
		if (cancel)
			note_err(r, E.slot_failed && !atomic_load(&r->io->cancelled) ? -ENOMEM : -ECANCELED, r->pos);
		else {
			d->ops++;
			d->bytes += n;
			atomic_fetch_add_explicit(&r->pending, 1, memory_order_relaxed);
		}
		if (pc->popped) {
			d->head = r->next;
			if (!d->head)
				d->tail = NULL;
		}
		/* round robin: this domain goes to the back of the busy list */
		if (prev)
			prev->bnext = d->bnext;
		else
			E.busy = d->bnext;
		if (E.busy_tail == d)
			E.busy_tail = prev;
		d->bnext = NULL;
		if (d->head) {
			if (E.busy_tail)
				E.busy_tail->bnext = d;
			else
				E.busy = d;
			E.busy_tail = d;
		} else {
			d->busy = false;
		}
		return pc;
	}
	return NULL;
}

static void piece_start(struct piece *pc);

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
			pthread_mutex_lock(&E.lock);
			struct piece *pc = E.busy ? carve() : NULL;
			pthread_mutex_unlock(&E.lock);
			if (!pc)
				break;
			piece_start(pc);
		}
	} while (pump_again);
	in_pump = 0;
}

static void piece_finish(struct piece *pc)
{
	struct sreq *r = pc->r;
	struct ods_source *s = r->s;
	ssize_t res = pc->res;
	bool rd = r->io->opcode == OPENDS_READ;
	if (res < 0)
		note_err(r, (long)res, pc->off);
	else if ((size_t)res > pc->len || (!rd && (size_t)res != pc->len))
		note_err(r, -EIO, pc->off); /* more than asked; or a short write */
	else if (rd && (size_t)res < pc->len) {
		off_t at = pc->off + (off_t)res;
		if (s->size >= 0 && at < r->end)
			note_err(r, -EIO, at); /* short before the known end */
		note_min(&r->short_at, (long long)at);
		if (res)
			note_max(&r->data_end, (long long)at);
	} else if (rd) {
		note_max(&r->data_end, (long long)(pc->off + (off_t)res));
	}
	pthread_mutex_lock(&E.lock);
	struct ods_sdom *d = s->dom;
	d->ops--;
	d->bytes -= pc->len;
	if (pc->slot >= 0)
		E.free_slots[E.nfree++] = (unsigned)pc->slot;
	pthread_mutex_unlock(&E.lock);
	free(pc);
	req_put(r);
	pump();
}

/* staged read: copy the slot to the device (engine thread) */
static void copy_in_job(struct job *j)
{
	struct piece *pc = (struct piece *)j;
	struct ods_io *io = pc->r->io;
	int rc = ods_drv.accel->copy_to_device(io->buf + (pc->off - io->off), pc->buf, (size_t)pc->res);
	if (rc)
		pc->res = -rc;
	piece_finish(pc);
}

static void src_done(void *token, ssize_t result)
{
	struct piece *pc = token;
	pc->res = result;
	if (pc->slot >= 0 && pc->r->io->opcode == OPENDS_READ && result > 0 && (size_t)result <= pc->len) {
		pc->job.fn = copy_in_job;
		job_push(&pc->job);
		return;
	}
	piece_finish(pc);
}

static void start_async(struct piece *pc)
{
	struct sreq *r = pc->r;
	struct ods_source *s = r->s;
	int rc = r->io->opcode == OPENDS_READ
			 ? s->ops.read_async(s->src, pc->buf, pc->len, (uint64_t)pc->off, src_done, pc)
			 : s->ops.write_async(s->src, pc->buf, pc->len, (uint64_t)pc->off, src_done, pc);
	if (rc) {
		pc->res = rc < 0 && rc > -OPENDS_ERRNO_MAX ? rc : -EIO;
		piece_finish(pc);
	}
}

/* engine thread: copy a staged write to its slot, then the transfer; or
 * a blocking source's call */
static void run_job(struct job *j)
{
	struct piece *pc = (struct piece *)j;
	struct sreq *r = pc->r;
	struct ods_source *s = r->s;
	bool rd = r->io->opcode == OPENDS_READ;
	if (!rd && pc->slot >= 0) {
		int rc = ods_drv.accel->copy_to_host(pc->buf, r->io->buf + (pc->off - r->io->off), pc->len);
		if (rc) {
			pc->res = -rc;
			piece_finish(pc);
			return;
		}
	}
	if (!(s->flags & OPENDS_SOURCE_BLOCKING)) {
		start_async(pc);
		return;
	}
	ssize_t res = rd ? s->ops.read(s->src, pc->buf, pc->len, (uint64_t)pc->off)
			 : s->ops.write(s->src, pc->buf, pc->len, (uint64_t)pc->off);
	src_done(pc, res > -OPENDS_ERRNO_MAX || res >= 0 ? res : -EIO);
}

static void piece_start(struct piece *pc)
{
	struct sreq *r = pc->r;
	bool popped = pc->popped;
	if (pc->len == 0) {
		free(pc);
	} else if ((r->s->flags & OPENDS_SOURCE_BLOCKING) || (pc->slot >= 0 && r->io->opcode == OPENDS_WRITE)) {
		pc->job.fn = run_job;
		job_push(&pc->job);
	} else {
		start_async(pc);
	}
	if (popped)
		req_put(r); /* the queue's reference */
}

/* ---- submission ------------------------------------------------------------ */

static void oracle_job(struct job *j)
{
	struct sreq *r = (struct sreq *)((char *)j - offsetof(struct sreq, job));
	struct ods_io *io = r->io;
	struct ods_source *s = r->s;
	free(r);
	ssize_t res = atomic_load_explicit(&io->cancelled, memory_order_acquire) ? -ECANCELED : ods_source_run(io);
	ods_io_complete(io, res);
	if (atomic_fetch_sub_explicit(&s->reqs, 1, memory_order_acq_rel) == 1)
		ods_futex_wake_all(&s->reqs);
}

void ods_source_submit(struct ods_io *io, bool may_block)
{
	struct ods_source *s = io->fh->src;
	struct sreq *r = calloc(1, sizeof(*r));
	if (!r) {
		ods_io_complete(io, -ENOMEM);
		return;
	}
	atomic_fetch_add_explicit(&s->reqs, 1, memory_order_relaxed);
	r->io = io;
	r->s = s;
	if (ods_drv.be == &ods_backend_ref) {
		/* the oracle, one request at a time per engine thread */
		r->job.fn = oracle_job;
		job_push(&r->job);
		return;
	}
	r->pos = io->off;
	r->end = io->off + (off_t)io->size;
	if (io->opcode == OPENDS_READ && s->size >= 0 && r->end > s->size)
		r->end = io->off < s->size ? (off_t)s->size : io->off;
	r->staged = io->mem == ODS_MEM_DEVICE && !(s->flags & OPENDS_SOURCE_DEVICE_MEMORY);
	atomic_init(&r->pending, 1);
	atomic_init(&r->short_at, (long long)r->end);
	atomic_init(&r->data_end, (long long)io->off);
	if (r->end == r->pos) {
		/* at or after the known end: nothing reaches the source */
		req_put(r);
		return;
	}
	struct ods_sdom *d = s->dom;
	pthread_mutex_lock(&E.lock);
	while (may_block && E.queued >= MAX_QUEUED)
		pthread_cond_wait(&E.room, &E.lock);
	E.queued++;
	if (d->tail)
		d->tail->next = r;
	else
		d->head = r;
	d->tail = r;
	if (!d->busy) {
		d->busy = true;
		d->bnext = NULL;
		if (E.busy_tail)
			E.busy_tail->bnext = d;
		else
			E.busy = d;
		E.busy_tail = d;
	}
	pthread_mutex_unlock(&E.lock);
	pump();
}
