/*
 * The staging engine's queue (stage.h has the picture): how requests are
 * cut into chunks, queued (ods_stage_submit, ods_stage_submit_many), and
 * handed out to the workers (ods_stage_take_chunk), oldest first for one
 * device and shared out over the devices when several are queued.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "stage_int.h"

/* ---- the chunker ----------------------------------------------------------- */

/* Next chunk boundary after pos. Reads: the covering aligned blocks of a
 * chunk fit one slot. Writes: partial blocks are chunks of their own (an
 * fd mover writes them buffered), everything else is whole blocks. */
static off_t chunk_end_of(const struct ods_stage *s, const struct ods_stage_req *r, off_t pos)
{
	off_t end = r->end, c = (off_t)s->p.chunk, A = (off_t)ODS_ALIGN;
	if (r->io->opcode == OPENDS_READ) {
		off_t n = ods_align_down(pos) + c;
		return n < end ? n : end;
	}
	if (pos & (A - 1)) {
		off_t n = ods_align_up(pos);
		return n < end ? n : end;
	}
	if (end - pos < A)
		return end;
	off_t n = pos + c, e = ods_align_down(end);
	return n < e ? n : e;
}

/* How many chunks chunk_end_of cuts [r->io->off, r->end) into (writes: at
 * most one more when the range lies inside one block). A lone request is
 * spread over the workers by this count, so an aligned 16 MiB read is 16
 * chunks, two per worker of eight, not three for some and one for others. */
static size_t chunk_count(const struct ods_stage *s, const struct ods_stage_req *r)
{
	off_t off = r->io->off, c = (off_t)s->p.chunk, A = (off_t)ODS_ALIGN;
	if (r->delegate)
		return 1;
	if (r->io->opcode == OPENDS_READ)
		return (size_t)((r->end - ods_align_down(off) + c - 1) / c);
	off_t a0 = ods_align_up(off), a1 = ods_align_down(r->end);
	size_t n = (size_t)((off & (A - 1)) != 0) + (size_t)((r->end & (A - 1)) != 0);
	if (a1 > a0)
		n += (size_t)((a1 - a0 + c - 1) / c);
	return n ? n : 1;
}

/* caller holds s->lock: r (after prev, NULL for the head) leaves the queue */
static void unqueue(struct ods_stage *s, struct ods_stage_req *r, struct ods_stage_req *prev)
{
	if (prev)
		prev->next = r->next;
	else
		s->head = r->next;
	if (s->tail == r)
		s->tail = prev;
	s->nreq--;
	s->qbytes -= r->weight;
	if (--s->nkey[r->key] == 0 && r->key != ODS_STAGE_HOST_KEY)
		atomic_fetch_sub(&s->ndevkeys, 1);
	atomic_fetch_sub(&s->queued, 1);
	pthread_cond_broadcast(&s->room);
}

static bool declines(const struct ods_stage_worker *w, const struct ods_stage_req *r)
{
	return r->id == w->held_id && w->held_n >= r->share;
}

/* ---- the extra workers --------------------------------------------------------
 * Two threads reading into two GPUs share the workers out (pick() below),
 * so each device gets half of them: on the two-H200 machine each GPU then
 * ran at 35.5 GB/s against 40.7 alone (gpu2 0.87 of its bound), and
 * sixteen workers instead of eight raised two GPUs (54 -> 59 GB/s at
 * 9761314) but lowered one (43 -> 39). So, where the accelerator has two
 * or more devices and the worker count is the backend's own choice (not
 * OPENDS_IO_THREADS), as many workers again are started for a mover that
 * asks for them (device_workers: uring's, not the sources' engine's), each
 * with its units and slots, and they take chunks only while requests for
 * two or more devices are queued: one device keeps exactly the workers it
 * had, several get twice as many between them. */
unsigned ods_stage_extra_workers(const struct ods_stage_params *p, const struct ods_mover *m,
				 const struct ods_config *cfg, const struct ods_accel *accel)
{
	if (!m->device_workers || cfg->io_threads || !accel->device_count || accel->device_count() < 2)
		return 0;
	return p->threads;
}

bool ods_stage_extra_idle(const struct ods_stage_worker *w)
{
	return w->idx >= w->s->p.threads && atomic_load(&w->s->ndevkeys) < 2;
}

/* caller holds s->lock; the queue is not empty. The request w takes its
 * next chunk of (*prev: the one before it), or NULL: w declines.
 * Requests for one device (or host memory only): the oldest, as a FIFO.
 * Requests for two or more devices: oldest-first would give every worker
 * to the first device's request until it is all handed out, and the
 * devices' links would be fed one after the other (issue 19: two threads
 * reading 8 GiB each into their own GPU ran at the speed of one). So the
 * oldest request of each key among the first ODS_STAGE_WINDOW is a
 * candidate, and worker i prefers candidate i mod n: the workers are
 * shared out evenly, each keeps to one device (its lane, its NUMA node),
 * and a worker whose candidate it declines takes another's. With fewer
 * workers than candidates, each turns from one to the next. */
static struct ods_stage_req *pick(struct ods_stage_worker *w, struct ods_stage_req **prev)
{
	struct ods_stage *s = w->s;
	*prev = NULL;
	if (ods_stage_extra_idle(w))
		return NULL;
	if (atomic_load_explicit(&s->ndevkeys, memory_order_relaxed) <= 1)
		return declines(w, s->head) ? NULL : s->head;
	struct ods_stage_req *cand[ODS_STAGE_WINDOW], *before[ODS_STAGE_WINDOW], *p = NULL;
	unsigned n = 0, i = 0;
	for (struct ods_stage_req *r = s->head; r && i < ODS_STAGE_WINDOW; p = r, r = r->next, i++) {
		unsigned j = 0;
		while (j < n && cand[j]->key != r->key)
			j++;
		if (j == n) {
			cand[n] = r;
			before[n++] = p;
		}
	}
	unsigned first = w->idx + (s->nw < n ? w->turn++ : 0);
	for (unsigned j = 0; j < n; j++) {
		unsigned k = (first + j) % n;
		if (!declines(w, cand[k])) {
			*prev = before[k];
			return cand[k];
		}
	}
	return NULL;
}

/* Take the next chunk of a queued request for w (pick() says which).
 * Returns the request with a chunk reference held, or NULL. *popped: the
 * request has no chunks left and the queue's reference must be dropped
 * after starting this one. A worker holds at most r->share chunks of a
 * request at once: the first worker to wake would otherwise take every
 * chunk its free units allow (16 chunks: all of a 16 MiB request), and the
 * request would be moved by one worker while the others, woken for it,
 * find the queue empty. Declining sets w->declined. */
/* OPENDS_AB_QUEUE_TRYLOCK=1 (an A/B switch for the GPU probe, small's
 * lead; not configuration): a worker with nothing in flight (spinning
 * idle) only tries the queue's lock and, finding it taken, looks again on
 * its next pass. A submit of one small file otherwise sends every
 * spinning worker at the lock at once: one takes the request, the rest
 * sleep in the mutex and are woken one by one (a futex wake per unlock)
 * to find the queue empty, while the submitter's next request waits
 * behind them on the same lock. Read once per process. */
static int trylock_ab = -1;

static bool idle_trylock(const struct ods_stage_worker *w)
{
	int v = __atomic_load_n(&trylock_ab, __ATOMIC_RELAXED);
	if (v < 0) {
		const char *e = getenv("OPENDS_AB_QUEUE_TRYLOCK");
		v = e && !strcmp(e, "1");
		__atomic_store_n(&trylock_ab, v, __ATOMIC_RELAXED);
	}
	return v && w->nfree == w->s->p.depth;
}

struct ods_stage_req *ods_stage_take_chunk(struct ods_stage_worker *w, off_t *c0, off_t *c1, bool *popped)
{
	struct ods_stage *s = w->s;
	if (!atomic_load_explicit(&s->queued, memory_order_acquire))
		return NULL;
	for (;;) {
		if (idle_trylock(w)) {
			/* (the sleep path looks at queued again before sleeping:
			 * nothing queued is left unseen) */
			if (pthread_mutex_trylock(&s->lock))
				return NULL;
		} else {
			pthread_mutex_lock(&s->lock);
		}
		if (!s->head) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		struct ods_stage_req *prev, *r = pick(w, &prev);
		if (!r) {
			pthread_mutex_unlock(&s->lock);
			w->declined = true;
			return NULL;
		}
		bool allocate = false;
		if (!r->started) {
			r->started = true;
			if (atomic_load_explicit(&r->io->cancelled, memory_order_acquire)) {
				unqueue(s, r, prev);
				pthread_mutex_unlock(&s->lock);
				ods_stage_note_err(r, -ECANCELED);
				ods_stage_req_put(r);
				continue;
			}
			/* started: it runs to its end now, so its range may be
			 * allocated (outside the lock; chunks other workers issue
			 * meanwhile are written as they would be without it) */
			allocate = r->io->allocate;
		}
		if (r->id != w->held_id) {
			w->held_id = r->id;
			w->held_n = 0;
			w->held_gen++;
		}
		w->held_n++;
		*c0 = r->pos;
		*c1 = r->delegate ? r->end : chunk_end_of(s, r, r->pos);
		r->pos = *c1;
		atomic_fetch_add_explicit(&r->pending, 1, memory_order_relaxed);
		*popped = r->pos == r->end;
		if (*popped)
			unqueue(s, r, prev);
		pthread_mutex_unlock(&s->lock);
		if (allocate)
			ods_ra_write_allocate(r->io);
		return r;
	}
}

/* ---- submit ------------------------------------------------------------------ */

/* Wake sleeping workers for `chunks` new chunks, less those spinning idle,
 * which take them without a wake-up (a system call here, a context switch
 * there): they look at the queue before they stop counting in nidle and
 * again before they sleep, after it (queued) was raised, which the
 * caller did before this load. The extra workers only when requests for
 * two or more devices were queued (multi), else a wake-up spent on one
 * that declines would leave a worker that could take them asleep. */
static void wake_workers(struct ods_stage *s, size_t chunks, bool multi)
{
	unsigned nw = multi ? s->nw : s->p.threads;
	unsigned n = chunks < nw ? (unsigned)chunks : nw, idle = atomic_load(&s->nidle);
	n = idle >= n ? 0 : n - idle;
	unsigned start = atomic_fetch_add_explicit(&s->wake_rr, 1, memory_order_relaxed);
	for (unsigned i = 0; i < nw && n; i++) {
		struct ods_stage_worker *w = &s->w[(start + i) % nw];
		if (atomic_load_explicit(&w->sleeping, memory_order_relaxed) && atomic_exchange(&w->sleeping, 0)) {
			ods_stage_wake_worker(w);
			n--;
		}
	}
}

/* The request of io, or NULL when io needs no transfer or no request could
 * be had (io is then completed). No lock. */
/* Requests are allocated by the submitter and freed by a worker: recycled
 * (ods_recycle, ods.h says why), as the futures' requests are. */
struct ods_recycle ods_stage_reqs = ODS_RECYCLE_INIT(sizeof(struct ods_stage_req), 8192);

static struct ods_stage_req *req_new(struct ods_stage *s, struct ods_io *io)
{
	struct ods_stage_req *r = ods_recycle_get(&ods_stage_reqs);
	if (r)
		memset(r, 0, sizeof(*r));
	if (!r) {
		ods_io_complete(io, -ENOMEM);
		return NULL;
	}
	r->io = io;
	r->s = s;
	r->pos = io->off;
	r->end = io->off + (off_t)io->size;
	r->fsize = -1;
	r->key = io->mem != ODS_MEM_DEVICE ? ODS_STAGE_HOST_KEY : io->dev < ODS_STAGE_HOST_KEY ? io->dev : ODS_STAGE_HOST_KEY - 1u;
	if (s->mv->req_init(r)) {
		ods_recycle_put(&ods_stage_reqs, r);
		ods_io_complete(io, 0);
		return NULL;
	}
	atomic_init(&r->pending, 1);
	atomic_init(&r->short_at, (long long)r->end);
	atomic_init(&r->err, 0);
	atomic_init(&r->written_to, (long long)io->off);
	/* Back-pressure counts requests and bytes: many small requests (a
	 * batch of 4096 small files) queue without blocking their submitter
	 * while their bytes stay below what the workers keep in flight, and
	 * large ones still wait at threads x depth requests. */
	r->weight = (size_t)(r->end - io->off) < ODS_ALIGN ? ODS_ALIGN : (size_t)(r->end - io->off);
	return r;
}

/* caller holds s->lock: r joins the queue; returns its chunks */
static size_t enqueue(struct ods_stage *s, struct ods_stage_req *r)
{
	size_t chunks = chunk_count(s, r);
	/* A worker's share of this request grows with the requests queued
	 * before it: alone, it is spread over every worker; behind others
	 * (several callers at once), each worker may keep whole requests,
	 * which saves the hand-offs between workers. */
	size_t share = (chunks * (s->nreq + 1) + s->p.threads - 1) / s->p.threads;
	r->share = share > UINT_MAX ? UINT_MAX : (unsigned)share;
	if (s->nkey[r->key]++ == 0 && r->key != ODS_STAGE_HOST_KEY)
		atomic_fetch_add(&s->ndevkeys, 1);
	r->id = ++s->req_ids;
	r->next = NULL;
	if (s->tail)
		s->tail->next = r;
	else
		s->head = r;
	s->tail = r;
	s->nreq++;
	s->qbytes += r->weight;
	atomic_fetch_add(&s->queued, 1);
	return chunks;
}

/* Queue ios[0..n); with may_block, each waits while the queue holds its
 * cap of requests and its bytes would pass room. */
static void submit_reqs(struct ods_stage *s, struct ods_io *const *ios, unsigned n, bool may_block, size_t room)
{
	/* the requests first, outside the lock (chained by next) */
	struct ods_stage_req *first = NULL, **link = &first;
	for (unsigned i = 0; i < n; i++) {
		struct ods_stage_req *r = req_new(s, ios[i]);
		if (r) {
			*link = r;
			link = &r->next;
		}
	}
	if (!first)
		return;
	/* then one hold of the lock and one wake round: the workers see
	 * them together */
	size_t unwoken = 0;
	pthread_mutex_lock(&s->lock);
	for (struct ods_stage_req *r = first, *next; r; r = next) {
		next = r->next;
		while (may_block && s->nreq >= s->cap && s->qbytes + r->weight > room) {
			/* the room comes from the workers: let them see what
			 * is queued so far before waiting for it */
			if (unwoken)
				wake_workers(s, unwoken, atomic_load(&s->ndevkeys) >= 2);
			unwoken = 0;
			pthread_cond_wait(&s->room, &s->lock);
		}
		unwoken += enqueue(s, r);
	}
	bool multi = atomic_load(&s->ndevkeys) >= 2;
	pthread_mutex_unlock(&s->lock);
	wake_workers(s, unwoken, multi);
}

void ods_stage_submit(struct ods_stage *s, struct ods_io *io, bool may_block)
{
	if (io->sync && io->opcode == OPENDS_WRITE && s->wr && ods_stage_write_caller(s, io))
		return; /* written on this thread in large pieces (stage_wr.c) */
	submit_reqs(s, &io, 1, may_block, s->cap_bytes);
}

/* A batch's entries wait for room only past BATCH_ROOM times the bytes a
 * single submit may queue. A submitter waiting for room collects no
 * completions and opens no files for its next entries meanwhile: in the
 * imagenetish hot batch leg (25000 files of 20-300 KB, 4096 in flight,
 * OPENDS_BATCH_STATS on the H200) the caller spent 76 ms of the ~185 in
 * submit, its first 4096 entries waiting for the workers, and refilled in
 * 9 bursts; queued without waiting (3000 submits, 10 ms in them) the leg
 * ran 18255 MiB/s against 14289 (probe 1, 2026-12-01, 3 runs each). A
 * batch's queued bytes are work, not memory (its entries are allocated at
 * setup, their requests recycled), but other callers' requests queue
 * behind them: the bound keeps a batch of large entries (4096 x 16 MiB)
 * to about 1 GiB ahead of them with the default 128 MiB (8 workers x 16
 * x 1 MiB), where waiting costs little next to each entry's bytes.
 * OPENDS_AB_BATCH_NOWAIT (A/B switch, not configuration): 0 waits as a
 * single submit does (before 2026-12-01), 1 never waits. Read at each
 * submit (a getenv per batch submit, not per entry), so a test compares
 * them in one process. */
#define BATCH_ROOM 8u

static size_t batch_room(const struct ods_stage *s, bool *may_block)
{
	const char *e = getenv("OPENDS_AB_BATCH_NOWAIT");
	if (e && !strcmp(e, "1"))
		*may_block = false;
	if (e && !strcmp(e, "0"))
		return s->cap_bytes;
	return s->cap_bytes > SIZE_MAX / BATCH_ROOM ? SIZE_MAX : s->cap_bytes * BATCH_ROOM;
}

/* A batch's entries (the backend's submit_many). Writes need nothing that
 * ods_stage_submit does for a single request: the caller's pieces are for
 * synchronous writes only (a batch entry never is one), and a write's
 * range is allocated when a worker starts it (ods_stage_take_chunk), as
 * the backend flagged it (ods_ra_write_begin) for both routes. */
void ods_stage_submit_many(struct ods_stage *s, struct ods_io *const *ios, unsigned n, bool may_block)
{
	size_t room = batch_room(s, &may_block);
	submit_reqs(s, ios, n, may_block, room);
}
