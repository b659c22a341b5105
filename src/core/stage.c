/*
 * The staging engine (stage.h has the picture and the mover contract):
 * request accounting, units, copies, and the worker loop; the queue and
 * the chunker are stage_queue.c's, slots and lanes stage_mem.c's. How
 * bytes reach the source is the mover's.
 */
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stage_int.h"

void *ods_stage_ctx(const struct ods_stage_unit *u)
{
	return u->w->ctx;
}

const struct ods_stage_params *ods_stage_params(const struct ods_stage *s)
{
	return &s->p;
}

/* ---- request accounting ------------------------------------------------- */

void ods_stage_note_err(struct ods_stage_req *r, long e)
{
	long zero = 0;
	atomic_compare_exchange_strong(&r->err, &zero, e);
}

/* A failure a layer reported on a worker (an OPENDS_* code, e.g. a copy's,
 * its sentence set on the worker's thread) reached the caller as the bare
 * code: the detail is per thread (review). The first such failure of a
 * request keeps its sentence in io->why, which synchronous calls, futures
 * and batches repeat. A future is awaited after its request is gone, so
 * each distinct sentence is kept once, for the life of the process, in a
 * table that only grows (WHY_MAX of them; later ones are not kept). An
 * errno's failure keeps none: the calls name those themselves (operation,
 * size, offset). */
#define WHY_MAX 64u
static struct {
	pthread_mutex_t lock;
	char *s[WHY_MAX];
	unsigned n;
} whys = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *why_keep(const char *text)
{
	const char *why = NULL;
	pthread_mutex_lock(&whys.lock);
	for (unsigned i = 0; i < whys.n && !why; i++)
		if (!strcmp(whys.s[i], text))
			why = whys.s[i];
	if (!why && whys.n < WHY_MAX && (whys.s[whys.n] = strdup(text)))
		why = whys.s[whys.n++];
	pthread_mutex_unlock(&whys.lock);
	return why;
}

void ods_stage_why_forget(void)
{
	whys.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER; /* (a thread the child lacks may hold it) */
}

/* the worker's failure res for r: noted, and the first one's sentence, if
 * it is an OPENDS_* code, kept in io->why while this unit still holds r
 * (the request cannot complete before its reference is dropped) */
static void note_err_why(struct ods_stage_req *r, long res)
{
	long zero = 0;
	const char *d = opends_last_error_detail();
	if (res <= -OPENDS_ERRNO_MAX && atomic_compare_exchange_strong(&r->err, &zero, res) && *d && !r->io->why)
		r->io->why = why_keep(d);
	else
		ods_stage_note_err(r, res);
	if (*d)
		ods_fail(0, "%s", ""); /* used: not a later failure's, which may come without one */
}

static void note_short(struct ods_stage_req *r, off_t at)
{
	long long cur = atomic_load(&r->short_at);
	while ((long long)at < cur && !atomic_compare_exchange_weak(&r->short_at, &cur, (long long)at))
		;
}

static void note_written(struct ods_stage_req *r, off_t to)
{
	long long cur = atomic_load(&r->written_to);
	while ((long long)to > cur && !atomic_compare_exchange_weak(&r->written_to, &cur, (long long)to))
		;
}

/* A chunk found the end of the source at `from` while a later chunk had
 * already put bytes up to `to` into the caller's memory: the source was
 * cut and regrown during the read. The count must cover every byte
 * written, so [from, to) is read again now, and what the source no longer
 * has reads as zeros, as a hole does. Returns the end of the read. */
static off_t refill(struct ods_stage_req *r, off_t from, off_t to)
{
	struct ods_io sub = *r->io;
	sub.buf = r->io->buf + (from - r->io->off);
	sub.off = from;
	sub.size = (size_t)(to - from);
	ssize_t n = r->s->mv->rw_whole(&sub);
	if (n < 0)
		n = 0;
	size_t left = sub.size - (size_t)n;
	char *dst = sub.buf + n;
	if (sub.mem == ODS_MEM_HOST) {
		memset(dst, 0, left);
		return to;
	}
	static const char zeros[64 << 10];
	while (left) {
		size_t k = left < sizeof(zeros) ? left : sizeof(zeros);
		if (r->s->accel->copy_to_device(dst, zeros, k))
			return (off_t)(dst - r->io->buf) + r->io->off; /* count what holds */
		dst += k;
		left -= k;
	}
	return to;
}

void ods_stage_req_put(struct ods_stage_req *r)
{
	if (atomic_fetch_sub_explicit(&r->pending, 1, memory_order_acq_rel) != 1)
		return;
	struct ods_io *io = r->io;
	long e = atomic_load(&r->err);
	ssize_t res;
	if (e)
		res = e;
	else if (io->opcode == OPENDS_WRITE)
		res = (ssize_t)io->size;
	else {
		long long s = atomic_load(&r->short_at), w = atomic_load(&r->written_to);
		off_t stop = s < (long long)r->end ? (off_t)s : r->end;
		if ((off_t)w > stop)
			stop = refill(r, stop, (off_t)w);
		res = (ssize_t)(stop - io->off);
	}
	ods_recycle_put(&ods_stage_reqs, r);
	ods_io_complete(io, res);
}

/* ---- the unit state machine ------------------------------------------------ */

static void unit_free(struct ods_stage_unit *u)
{
	struct ods_stage_worker *w = u->w;
	u->state = U_FREE;
	u->next_free = w->free_list;
	w->free_list = u;
	w->nfree++;
}

/* u leaves the engine's bookkeeping of units in the mover */
static void io_over(struct ods_stage_unit *u)
{
	if (u->state == U_IO) {
		u->w->nio--;
		u->w->dio_bytes -= u->dio_n;
		u->dio_n = 0;
		u->state = U_HELD;
	}
}

void ods_stage_end(struct ods_stage_unit *u, long res)
{
	struct ods_stage_req *r = u->r;
	io_over(u);
	if (r->id == u->w->held_id && u->held_gen == u->w->held_gen)
		u->w->held_n--;
	if (res < 0)
		note_err_why(r, res);
	unit_free(u);
	ods_stage_req_put(r);
}

static void start_copy_stage(struct ods_stage_unit *u, void *dst, const void *src, size_t n, bool to_dev)
{
	int rc = ods_stage_copy_start(u, dst, src, n, to_dev);
	if (rc) {
		ods_stage_end(u, -rc);
		return;
	}
	u->state = U_COPY;
	u->w->ncopy++;
}

static void to_mover(struct ods_stage_unit *u)
{
	u->state = U_IO;
	u->w->nio++;
	if (u->r->io->opcode == OPENDS_READ) {
		u->device_io = false;
		u->w->s->mv->read(u);
		if (u->state == U_IO && u->device_io) { /* (not over inside read) */
			u->dio_n = u->io_len;
			u->w->dio_bytes += u->dio_n;
		}
	} else {
		u->w->s->mv->write(u);
	}
}

void ods_stage_read_done(struct ods_stage_unit *u)
{
	struct ods_stage_req *r = u->r;
	struct ods_io *io = r->io;
	io_over(u);
	off_t have = u->io_off + (off_t)u->io_done;
	off_t stop = have < u->c1 ? have : u->c1;
	size_t got = stop > u->c0 ? (size_t)(stop - u->c0) : 0;
	if (got < (size_t)(u->c1 - u->c0))
		note_short(r, u->c0 + (off_t)got);
	if (!u->slot && got)
		note_written(r, u->c0 + (off_t)got); /* the mover read into the caller's memory */
	if (!u->slot || !got) {
		ods_stage_end(u, 0);
		return;
	}
	char *src = u->io_buf + (u->c0 - u->io_off);
	char *dst = io->buf + (u->c0 - io->off);
	if (io->mem == ODS_MEM_HOST) {
		/* the caller's memory may be read-only: -EFAULT as pread */
		int rc = ods_copy_checked(dst, src, got);
		if (!rc)
			note_written(r, u->c0 + (off_t)got);
		ods_stage_end(u, rc);
		return;
	}
	note_written(r, u->c0 + (off_t)got);
	start_copy_stage(u, dst, src, got, true);
}

static void start_write(struct ods_stage_unit *u)
{
	struct ods_io *io = u->r->io;
	char *src = io->buf + (u->c0 - io->off);
	size_t n = (size_t)(u->c1 - u->c0);
	u->io_off = u->c0;
	u->io_len = n;
	if (io->mem == ODS_MEM_HOST) {
		u->slot = false;
		u->io_buf = src;
		to_mover(u);
		return;
	}
	if (!(u->io_buf = ods_stage_slot(u))) {
		ods_stage_end(u, -ENOMEM);
		return;
	}
	u->slot = true;
	start_copy_stage(u, u->io_buf, src, n, false);
}

static void start_chunk(struct ods_stage_worker *w, struct ods_stage_req *r, off_t c0, off_t c1, bool more)
{
	struct ods_stage_unit *u = w->free_list;
	w->free_list = u->next_free;
	w->nfree--;
	u->r = r;
	u->held_gen = w->held_gen; /* (ods_stage_take_chunk counted it in this turn) */
	u->c0 = c0;
	u->c1 = c1;
	u->more = more;
	u->io_buf = NULL;
	u->io_off = c0;
	u->io_len = 0;
	u->io_done = 0;
	u->slot = false;
	if (r->delegate) {
		ssize_t res = w->s->mv->rw_whole(r->io);
		if (res >= 0 && r->io->opcode == OPENDS_READ && (size_t)res < r->io->size)
			note_short(r, r->io->off + (off_t)res);
		ods_stage_end(u, res < 0 ? (long)res : 0);
		return;
	}
	if (r->io->opcode == OPENDS_READ)
		to_mover(u);
	else
		start_write(u);
}

/* ---- completions from other threads --------------------------------------- */

void ods_stage_wake_worker(struct ods_stage_worker *w)
{
	const struct ods_mover *m = w->s->mv;
	if (m->wake) {
		m->wake(w->ctx);
		return;
	}
	atomic_fetch_add_explicit(&w->wake_seq, 1, memory_order_release);
	syscall(SYS_futex, &w->wake_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void ods_stage_post(struct ods_stage_unit *u, long res)
{
	struct ods_stage_worker *w = u->w;
	u->post_res = res;
	struct ods_stage_unit *old = atomic_load_explicit(&w->posted, memory_order_relaxed);
	do
		atomic_store_explicit(&u->post_next, old, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&w->posted, &old, u, memory_order_release,
						      memory_order_relaxed));
	ods_stage_wake_worker(w);
}

static bool take_posted(struct ods_stage_worker *w)
{
	if (!atomic_load_explicit(&w->posted, memory_order_relaxed))
		return false;
	struct ods_stage_unit *u = atomic_exchange_explicit(&w->posted, NULL, memory_order_acquire), *rev = NULL;
	while (u) { /* oldest first */
		struct ods_stage_unit *n = atomic_load_explicit(&u->post_next, memory_order_relaxed);
		atomic_store_explicit(&u->post_next, rev, memory_order_relaxed);
		rev = u;
		u = n;
	}
	while (rev) {
		struct ods_stage_unit *n = atomic_load_explicit(&rev->post_next, memory_order_relaxed);
		w->s->mv->complete(rev, rev->post_res);
		rev = n;
	}
	return true;
}

/* ---- the worker loop ------------------------------------------------------- */

static bool poll_copies(struct ods_stage_worker *w, bool wait_one)
{
	bool any = false;
	for (unsigned i = 0; i < w->s->p.depth && w->ncopy; i++) {
		struct ods_stage_unit *u = &w->units[i];
		if (u->state != U_COPY)
			continue;
		int q = ods_stage_copy_poll(u, wait_one && !any);
		if (q == 0)
			continue;
		any = true;
		w->ncopy--;
		u->state = U_HELD;
		if (q < 0)
			ods_stage_end(u, q);
		else if (u->r->io->opcode == OPENDS_READ)
			ods_stage_end(u, 0);
		else
			to_mover(u); /* the slot holds the data: write it */
	}
	return any;
}

/* The mover says so (full), or the worker's device reads in flight reach
 * the cap (OPENDS_AB_DIRECT_INFLIGHT): its completions wake it. */
static bool mover_full(struct ods_stage_worker *w)
{
	return (w->s->dio_cap && w->dio_bytes >= w->s->dio_cap) || (w->s->mv->full && w->s->mv->full(w->ctx));
}

/* A worker copying to or from a device runs on the CPUs of the device's
 * NUMA node (issue 19; nothing moves on one-node machines, nor where
 * OPENDS_CPU_MASK pins the workers). It moves when the device changes. */
static void near_device(struct ods_stage_worker *w, const struct ods_io *io)
{
	if (w->s->cfg->cpu_mask || io->mem != ODS_MEM_DEVICE || io->dev == w->near_dev)
		return;
	cpu_set_t set;
	w->near_dev = io->dev;
	if (ods_accel_near_cpus(io->dev, &set))
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set); /* best effort */
}

static bool fill(struct ods_stage_worker *w)
{
	struct ods_stage *s = w->s;
	bool any = false;
	off_t c0, c1;
	bool popped;
	struct ods_stage_req *r;
	w->declined = false;
	if (ods_stage_extra_idle(w))
		return false; /* (without the queue's lock) */
	while (w->nfree) {
		if (mover_full(w)) {
			/* leave the rest to other workers; completions wake this one */
			w->declined = true;
			break;
		}
		if (!(r = ods_stage_take_chunk(w, &c0, &c1, &popped)))
			break;
		near_device(w, r->io);
		bool more = atomic_load_explicit(&s->queued, memory_order_relaxed) != 0;
		start_chunk(w, r, c0, c1, more);
		if (popped)
			ods_stage_req_put(r);
		any = true;
	}
	return any;
}

/* Count w in s->nidle (avail) or not: a worker in its idle spin that would
 * take a new request, whom wake_workers need not wake (small's issue-17
 * ask: each submit of a hot small file cost the submitter an eventfd write
 * and a wake-up, while a worker spinning idle would have taken it). Only a
 * worker free to take any new request counts: not one that declined the
 * head request, nor a full one, nor an extra one (the devices queued may
 * change under it: counted while two were queued, it would decline a new
 * request for one, which its count kept from waking anyone). */
static void idle_mark(struct ods_stage_worker *w, bool avail)
{
	if (avail == w->idle_counted)
		return;
	w->idle_counted = avail;
	if (avail)
		atomic_fetch_add(&w->s->nidle, 1);
	else
		atomic_fetch_sub(&w->s->nidle, 1);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* Block until a wake (or a completion the mover reports), or timeout_ns. */
static void worker_wait(struct ods_stage_worker *w, unsigned seq, long timeout_ns)
{
	const struct ods_mover *m = w->s->mv;
	if (m->wait) {
		m->wait(w->ctx, timeout_ns);
		return;
	}
	struct timespec ts = { timeout_ns / 1000000000L, timeout_ns % 1000000000L };
	syscall(SYS_futex, &w->wake_seq, FUTEX_WAIT_PRIVATE, seq, timeout_ns < 0 ? NULL : &ts, NULL, 0);
}

static void *worker_main(void *arg)
{
	struct ods_stage_worker *w = arg;
	struct ods_stage *s = w->s;
	const struct ods_accel *a = s->accel;
	const struct ods_mover *m = s->mv;
	ods_pin_worker(s->cfg, w->idx);
	w->near_dev = UINT_MAX;
	/* Without a context the lane cannot be made; copies then run
	 * synchronously (recorded), which is slower but correct. */
	if (ods_stage_async_copies(a) && a->lanes->thread_attach() == 0)
		w->lane = a->lanes->lane_create(s->p.depth);
	/* With a real accelerator, pin the slots now: registering memory
	 * later, while a caller's stream waits on an operation of ours, could
	 * meet an implicit device synchronisation; and the first transfer
	 * should not pay for it. Without one, slots come on first use. */
	if (a->mem)
		ods_stage_block_alloc(w);
	pthread_mutex_lock(&s->lock);
	s->ready++;
	pthread_cond_broadcast(&s->ready_cv);
	pthread_mutex_unlock(&s->lock);
	bool spinning = false;
	double spin_t0 = 0;
	for (;;) {
		unsigned seq = atomic_load_explicit(&w->wake_seq, memory_order_acquire);
		bool progress = fill(w);
		if (m->reap)
			progress |= m->reap(w->ctx);
		progress |= take_posted(w);
		if (w->ncopy)
			progress |= poll_copies(w, false);
		if (progress) {
			idle_mark(w, false);
			spinning = false;
			continue;
		}
		if (atomic_load(&s->stop) && w->nfree == s->p.depth && !atomic_load(&s->queued))
			break;
		if (w->ncopy) {
			idle_mark(w, false);
			if (!w->nio) {
				poll_copies(w, true); /* only copies left: block on one */
			} else {
				/* I/O and copies: the next copy of a chunk takes tens
				 * of microseconds; look again after about that */
				worker_wait(w, seq, 20000);
			}
			continue;
		}
		if (s->p.spin_us) {
			if (!spinning) {
				spinning = true;
				spin_t0 = now_us();
			}
			if (s->p.spin_us < 0 || now_us() - spin_t0 < (double)s->p.spin_us) {
				/* (the next pass of the loop looks at the queue) */
				idle_mark(w, w->idx < s->p.threads && !w->declined && w->nfree && !mover_full(w));
				ods_cpu_relax();
				continue;
			}
		}
		/* counted no more before it may sleep: a submitter that saw it
		 * counted and woke nobody is then seen below (queued) */
		idle_mark(w, false);
		/* Sleep until the mover reports or a submitter wakes us.
		 * Dekker handshake with ods_stage_submit: sleeping is published
		 * before looking at the queue, the queue before looking at
		 * sleeping. */
		if (w->nfree && !mover_full(w)) {
			/* a worker that declined the head request holds chunks of
			 * it, and their completions wake it (one the mover calls
			 * full is not free: it waits for those) */
			atomic_store(&w->sleeping, 1);
			bool extra = w->idx >= s->p.threads; /* (declined while one device was queued) */
			if ((atomic_load(&s->queued) && (extra ? !ods_stage_extra_idle(w) : !w->declined)) ||
			    atomic_load(&s->stop) || atomic_load(&w->posted)) {
				atomic_store(&w->sleeping, 0);
				continue;
			}
		}
		worker_wait(w, seq, -1);
		atomic_store(&w->sleeping, 0);
		spinning = false;
	}
	ods_stage_slots_free(w);
	if (w->lane)
		a->lanes->lane_destroy(w->lane);
	w->lane = NULL;
	if (a->lanes)
		a->lanes->thread_detach();
	return NULL;
}

/* ---- submit, open, close ----------------------------------------------------- */

static void stop_workers(struct ods_stage *s)
{
	atomic_store(&s->stop, true);
	for (unsigned i = 0; i < s->started; i++)
		ods_stage_wake_worker(&s->w[i]);
	for (unsigned i = 0; i < s->started; i++)
		pthread_join(s->w[i].tid, NULL);
	ods_stage_write_close(s);
	ods_ra_keep_drop(); /* (the driver closes, or the sources' engine: the budget is wanted) */
	for (unsigned i = 0; i < s->nw; i++) {
		struct ods_stage_worker *w = &s->w[i];
		if (w->ctx)
			s->mv->worker_close(w->ctx);
		free(w->units);
	}
	free(s->w);
	if (s->reserved)
		ods_pinned_release(s->reserved);
	pthread_cond_destroy(&s->room);
	pthread_cond_destroy(&s->ready_cv);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* OPENDS_AB_DIRECT_INFLIGHT (A/B, read at open): bytes of device reads a
 * worker keeps in flight at most (digits with an optional k or m; 0,
 * unset or anything else: no cap). A cold 8 GiB read kept 8 workers x 16
 * chunks of 1 MiB in flight, where the virtio disk of the H200 read
 * fastest with 8 x 1 MiB (pread O_DIRECT from 8 threads); hot reads are
 * not device reads and are not counted. */
static size_t dio_cap_of(const char *v)
{
	char *end;
	if (!v || *v < '0' || *v > '9')
		return 0;
	unsigned long long n = strtoull(v, &end, 10);
	unsigned sh = *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20 : 0;
	if (sh)
		end++;
	return *end || n > (1ull << 30) ? 0 : (size_t)(n << sh);
}

int ods_stage_open(struct ods_stage **out, const struct ods_stage_params *p, const struct ods_mover *m,
		   const struct ods_config *cfg, const struct ods_accel *accel)
{
	int rc;
	struct ods_stage_params fitted = *p;
	size_t reserved;
	unsigned nw = p->threads + ods_stage_extra_workers(p, m, cfg, accel);
	ods_ra_keep_drop(); /* read-ahead's kept buffers give this engine their budget */
	ods_ra_setup();
	fitted.threads = nw; /* every worker's slots within the budget */
	if ((rc = ods_stage_fit_budget(&fitted, m, cfg, &reserved)))
		return rc;
	fitted.threads = p->threads;
	struct ods_stage *s = calloc(1, sizeof(*s));
	if (!s) {
		ods_pinned_release(reserved);
		return ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", m->name);
	}
	s->mv = m;
	s->accel = accel;
	s->cfg = cfg;
	s->p = fitted;
	s->reserved = reserved;
	s->nw = nw;
	p = &s->p;
	s->dio_cap = dio_cap_of(getenv("OPENDS_AB_DIRECT_INFLIGHT"));
	s->cap = p->threads * p->depth;
	s->cap_bytes = (size_t)s->cap * p->chunk;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->room, NULL);
	pthread_cond_init(&s->ready_cv, NULL);
	s->w = calloc(nw, sizeof(*s->w));
	if (!s->w) {
		ods_pinned_release(reserved);
		pthread_cond_destroy(&s->room);
		pthread_cond_destroy(&s->ready_cv);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", m->name);
	}
	for (unsigned i = 0; i < nw; i++) {
		struct ods_stage_worker *w = &s->w[i];
		w->s = s;
		w->idx = i;
		w->units = calloc(p->depth, sizeof(*w->units));
		if (!w->units) {
			rc = ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", m->name);
			goto fail;
		}
		for (unsigned k = p->depth; k > 0; k--) {
			struct ods_stage_unit *u = &w->units[k - 1];
			u->w = w;
			u->idx = k - 1;
			u->next_free = w->free_list;
			w->free_list = u;
		}
		w->nfree = p->depth;
		if ((rc = m->worker_open(s, i, &w->ctx)))
			goto fail;
	}
	for (unsigned i = 0; i < nw; i++) {
		if (ods_thread_start(&s->w[i].tid, worker_main, &s->w[i])) {
			rc = ods_fail(OPENDS_INTERNAL_ERROR, "%s: could not start %u worker threads (OPENDS_IO_THREADS)",
				      m->name, nw);
			goto fail;
		}
		s->started++;
	}
	/* Open returns with the engine ready: pinning the slots takes tens of
	 * milliseconds per worker, which belongs to the open (as with cuFile)
	 * rather than to the first transfers. */
	pthread_mutex_lock(&s->lock);
	while (s->ready < s->started)
		pthread_cond_wait(&s->ready_cv, &s->lock);
	pthread_mutex_unlock(&s->lock);
	ods_stage_write_open(s);
	*out = s;
	return 0;
fail:
	stop_workers(s);
	return rc;
}

void ods_stage_close(struct ods_stage *s)
{
	/* The core has drained streams and batches; futures may still be in
	 * flight: workers leave only when the queue is empty and every unit
	 * is free. */
	stop_workers(s);
}
