/*
 * Batch I/O (cuFileBatchIO*): a batch owns max_nr entries, each an ods_io
 * run on the backend's async engine. Completed entries wait on a ready list
 * until opends_batch_get_status delivers them, once each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ods.h"

enum { E_FREE, E_INFLIGHT, E_READY };

struct bentry {
	struct ods_io io;
	struct ods_batch *b;
	struct bentry *next;
	void *cookie;
	int state;
	opends_status_t status;
};

struct ods_batch {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* an entry became ready, or inflight reached 0 */
	/* reserved: taken off the free list by a submit still validating its
	 * entries; counted with the rest so that two submits racing cannot
	 * both take the same room (issue 15 item 1) */
	unsigned max_nr, reserved, inflight, ready;
	atomic_uint done_seq; /* entries completed so far: get_status spins on it before sleeping */
	struct bentry *free_list, *ready_head, *ready_tail;
	struct bentry *entries;
};

static struct ods_slots batches;
static pthread_once_t batches_once = PTHREAD_ONCE_INIT;

static void batches_init(void)
{
	ods_slots_init(&batches);
}

static struct ods_batch *lookup(opends_batch_t batch)
{
	pthread_once(&batches_once, batches_init);
	return batch ? ods_slots_get(&batches, (uint64_t)(uintptr_t)batch) : NULL;
}

static void wait_idle(struct ods_batch *b)
{
	pthread_mutex_lock(&b->lock);
	while (b->inflight)
		pthread_cond_wait(&b->cond, &b->lock);
	pthread_mutex_unlock(&b->lock);
}

static void batch_free(void *p)
{
	struct ods_batch *b = p;
	wait_idle(b);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	free(b->entries);
	free(b);
}

/* In a child after fork(): the parent's batches belong to the parent; an
 * entry in flight there may never complete here. Drop them unseen (the
 * table's lock may have been held by a thread that does not exist here). */
void ods_batches_forget(void)
{
	ods_slots_init(&batches);
}

void ods_batches_fini(void)
{
	pthread_once(&batches_once, batches_init);
	ods_slots_fini(&batches, batch_free);
	ods_slots_init(&batches);
}

#define CHECK_OPEN(fn) ODS_ENTER(fn) /* also holds close off until the call returns (gate.h) */
#define INVALID(...) ods_err(ods_fail(OPENDS_INVALID_VALUE, __VA_ARGS__), 0)

OPENDS_API opends_error_t opends_batch_setup(opends_batch_t *batch, unsigned max_nr)
{
	CHECK_OPEN("opends_batch_setup");
	if (!batch)
		return INVALID("opends_batch_setup: batch is NULL");
	if (max_nr == 0 || max_nr > ODS_MAX_BATCH)
		return INVALID("opends_batch_setup: max_nr %u is outside 1..%u", max_nr, ODS_MAX_BATCH);
	pthread_once(&batches_once, batches_init);
	struct ods_batch *b = calloc(1, sizeof(*b));
	struct bentry *e = calloc(max_nr, sizeof(*e));
	if (!b || !e) {
		free(b);
		free(e);
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_batch_setup: out of memory"), ENOMEM);
	}
	pthread_mutex_init(&b->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cond, &ca);
	pthread_condattr_destroy(&ca);
	b->max_nr = max_nr;
	b->entries = e;
	for (unsigned i = max_nr; i > 0; i--) {
		e[i - 1].b = b;
		e[i - 1].next = b->free_list;
		b->free_list = &e[i - 1];
	}
	uint64_t t = ods_slots_add(&batches, b);
	if (!t) {
		batch_free(b);
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_batch_setup: out of memory"), ENOMEM);
	}
	*batch = (opends_batch_t)(uintptr_t)t;
	return ods_ok();
}

/* caller holds b->lock */
static void make_ready(struct ods_batch *b, struct bentry *e, ssize_t result)
{
	e->io.result = result;
	if (result >= 0)
		e->status = OPENDS_COMPLETE;
	else if (result == -ECANCELED && atomic_load(&e->io.cancelled))
		e->status = OPENDS_CANCELED;
	else
		e->status = OPENDS_FAILED;
	e->state = E_READY;
	e->next = NULL;
	if (b->ready_tail)
		b->ready_tail->next = e;
	else
		b->ready_head = e;
	b->ready_tail = e;
	b->ready++;
}

static void entry_done(struct ods_io *io)
{
	struct bentry *e = io->owner;
	struct ods_batch *b = e->b;
	pthread_mutex_lock(&b->lock);
	make_ready(b, e, io->result);
	/* a leaf (ods.h): the handle's count drops before a collector can
	 * take the entry (it needs the lock), so one that deregisters the
	 * handle at once does not wait */
	if (io->leaf)
		atomic_fetch_sub_explicit(&io->fh->inflight, 1, memory_order_release);
	b->inflight--;
	atomic_fetch_add_explicit(&b->done_seq, 1, memory_order_release);
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

OPENDS_API opends_error_t opends_batch_submit(opends_batch_t batch, unsigned nr, opends_io_params_t *params,
					      unsigned flags)
{
	CHECK_OPEN("opends_batch_submit");
	struct ods_batch *b = lookup(batch);
	if (!b)
		return INVALID("opends_batch_submit: batch is not a batch made by opends_batch_setup");
	if (!params)
		return INVALID("opends_batch_submit: params is NULL");
	if (nr == 0)
		return INVALID("opends_batch_submit: nr is 0");
	if (flags)
		return INVALID("opends_batch_submit: flags is 0x%x; it must be 0", flags);

	/* Reserve nr entries or refuse the whole submit. */
	pthread_mutex_lock(&b->lock);
	unsigned avail = b->max_nr - b->reserved - b->inflight - b->ready;
	if (nr > avail) {
		unsigned busy = b->reserved + b->inflight, ready = b->ready;
		pthread_mutex_unlock(&b->lock);
		return ods_err(ods_fail(OPENDS_BATCH_FULL,
					"opends_batch_submit: %u entries do not fit: max_nr %u, %u in flight, %u "
					"completed but not yet collected",
					nr, b->max_nr, busy, ready),
			       0);
	}
	struct bentry *taken = b->free_list, *e = taken;
	for (unsigned i = 1; i < nr; i++)
		e = e->next;
	b->free_list = e->next;
	e->next = NULL;
	b->reserved += nr;
	pthread_mutex_unlock(&b->lock);

	/* Validate every entry before starting any. */
	int rc = 0;
	e = taken;
	for (unsigned i = 0; i < nr && !rc; i++, e = e->next) {
		const opends_io_params_t *p = &params[i];
		if (p->mode != OPENDS_BATCH) {
			rc = ods_fail(OPENDS_INVALID_VALUE, "opends_batch_submit: params[%u].mode is %d, not OPENDS_BATCH",
				      i, (int)p->mode);
			break;
		}
		if (p->opcode != OPENDS_READ && p->opcode != OPENDS_WRITE) {
			rc = ods_fail(OPENDS_INVALID_VALUE, "opends_batch_submit: params[%u].opcode %d is unknown", i,
				      (int)p->opcode);
			break;
		}
		ssize_t r = ods_io_prepare(&e->io, p->opcode, p->fh, p->u.batch.buf_base, p->u.batch.size,
					   p->u.batch.file_offset, p->u.batch.buf_offset);
		if (r <= -OPENDS_ERRNO_MAX) {
			char why[200];
			snprintf(why, sizeof(why), "%s", opends_last_error_detail());
			rc = ods_fail((int)-r, "opends_batch_submit: params[%u]: %s", i, why);
			break;
		}
		e->cookie = p->cookie;
		e->io.result = r; /* 0 or an errno-style failure, kept below */
	}
	if (rc) {
		pthread_mutex_lock(&b->lock);
		for (e = taken; e->next; e = e->next)
			;
		e->next = b->free_list;
		b->free_list = taken;
		b->reserved -= nr;
		pthread_mutex_unlock(&b->lock);
		return ods_err(rc, 0);
	}

	/* In flight from here; the states change under the lock, as cancel
	 * reads them under it. */
	pthread_mutex_lock(&b->lock);
	b->reserved -= nr;
	b->inflight += nr;
	for (e = taken; e; e = e->next) {
		e->state = E_INFLIGHT;
		e->io.owner = e;
		e->io.done = entry_done;
		e->io.leaf = true;
	}
	pthread_mutex_unlock(&b->lock);
	/* The file entries go to the backend together (one wake-up of its
	 * workers, small reads grouped into one io_uring_enter: issue 17);
	 * sources and the entries with nothing to move one by one. An entry
	 * may complete (and be collected by another thread) as soon as it is
	 * handed over, so each is read before. */
	struct ods_io *many[64];
	unsigned nmany = 0;
	e = taken;
	for (unsigned i = 0; i < nr; i++) {
		struct bentry *next = e->next;
		if (e->io.result < 0 || e->io.size == 0) {
			e->io.leaf = false; /* never submitted: nothing counted to drop */
			e->io.done(&e->io); /* nothing to move, or EBADF */
		} else if (e->io.fh->src) {
			ods_io_submit(&e->io, true);
		} else {
			many[nmany++] = &e->io;
			if (nmany == sizeof(many) / sizeof(*many)) {
				ods_io_submit_many(many, nmany);
				nmany = 0;
			}
		}
		e = next;
	}
	if (nmany)
		ods_io_submit_many(many, nmany);
	return ods_ok();
}

/* The absolute deadline now + timeout; false when it lies beyond what a
 * time_t holds (then the caller waits as without a timeout: such a deadline
 * is never reached, and adding it up would overflow, issue 15 item 8). */
static bool deadline_of(const struct timespec *timeout, struct timespec *dl)
{
	const time_t tmax = (time_t)((sizeof(time_t) == 8) ? INT64_MAX : INT32_MAX);
	clock_gettime(CLOCK_MONOTONIC, dl);
	/* both parts are checked by the caller: tv_sec >= 0, tv_nsec < 1e9 */
	if (timeout->tv_sec > tmax - dl->tv_sec - 1)
		return false;
	dl->tv_sec += timeout->tv_sec;
	dl->tv_nsec += timeout->tv_nsec;
	if (dl->tv_nsec >= 1000000000L) {
		dl->tv_nsec -= 1000000000L;
		dl->tv_sec++;
	}
	return true;
}

OPENDS_API opends_error_t opends_batch_get_status(opends_batch_t batch, unsigned min_nr, unsigned *nr,
						  opends_io_events_t *events, struct timespec *timeout)
{
	CHECK_OPEN("opends_batch_get_status");
	struct ods_batch *b = lookup(batch);
	if (!b)
		return INVALID("opends_batch_get_status: batch is not a batch made by opends_batch_setup");
	if (!nr)
		return INVALID("opends_batch_get_status: nr is NULL");
	if (*nr && !events)
		return INVALID("opends_batch_get_status: events is NULL");
	if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000L))
		return INVALID("opends_batch_get_status: timeout is negative or its tv_nsec is out of range");

	struct timespec dl;
	if (timeout && !deadline_of(timeout, &dl))
		timeout = NULL;
	pthread_mutex_lock(&b->lock);
	unsigned want = min_nr;
	if (want > *nr)
		want = *nr;
	/* A short spin before sleeping, as a synchronous call waits (io.c):
	 * entries complete every few microseconds while a batch of small
	 * files is in flight, and a caller that sleeps on each costs a
	 * futex wake-up by the worker and a context switch of its own per
	 * get_status (the batch leg ran at 0.70x the same files' async leg,
	 * H200 try1). Not for a poll (zero timeout). */
	bool spin = !timeout || timeout->tv_sec || timeout->tv_nsec;
	for (;;) {
		unsigned reachable = b->ready + b->inflight;
		if (b->ready >= (want < reachable ? want : reachable))
			break;
		if (spin) {
			spin = false;
			unsigned seq = atomic_load_explicit(&b->done_seq, memory_order_relaxed);
			pthread_mutex_unlock(&b->lock);
			for (int i = 0; i < 200 && atomic_load_explicit(&b->done_seq, memory_order_acquire) == seq; i++)
				ods_cpu_relax();
			pthread_mutex_lock(&b->lock);
			continue;
		}
		if (!timeout)
			pthread_cond_wait(&b->cond, &b->lock);
		else if (pthread_cond_timedwait(&b->cond, &b->lock, &dl) == ETIMEDOUT)
			break;
	}
	unsigned n = 0;
	/* the first failed event whose request says why (a source's failure
	 * names the source, object and offset): opends_last_error_detail()
	 * repeats it, as opends_async_await does; the strings live as long as
	 * the process */
	const char *why = NULL;
	void *why_cookie = NULL;
	long why_res = 0;
	while (n < *nr && b->ready_head) {
		struct bentry *e = b->ready_head;
		b->ready_head = e->next;
		if (!b->ready_head)
			b->ready_tail = NULL;
		b->ready--;
		events[n].cookie = e->cookie;
		events[n].status = e->status;
		events[n].ret = e->io.result;
		if (!why && e->io.result < 0 && e->io.why) {
			why = e->io.why;
			why_cookie = e->cookie;
			why_res = (long)e->io.result;
		}
		n++;
		e->state = E_FREE;
		e->next = b->free_list;
		b->free_list = e;
	}
	pthread_mutex_unlock(&b->lock);
	*nr = n;
	if (why)
		ods_fail((int)-why_res, "opends_batch_get_status: the entry with cookie %p: %s", why_cookie, why);
	return ods_ok();
}

OPENDS_API opends_error_t opends_batch_cancel(opends_batch_t batch)
{
	CHECK_OPEN("opends_batch_cancel");
	struct ods_batch *b = lookup(batch);
	if (!b)
		return INVALID("opends_batch_cancel: batch is not a batch made by opends_batch_setup");
	/* Flag what is in flight; the engine finishes flagged requests that
	 * have not started with -ECANCELED, and the rest run to the end. */
	pthread_mutex_lock(&b->lock);
	for (unsigned i = 0; i < b->max_nr; i++)
		if (b->entries[i].state == E_INFLIGHT)
			atomic_store(&b->entries[i].io.cancelled, true);
	pthread_mutex_unlock(&b->lock);
	wait_idle(b);
	return ods_ok();
}

OPENDS_API opends_error_t opends_batch_destroy(opends_batch_t batch)
{
	CHECK_OPEN("opends_batch_destroy");
	pthread_once(&batches_once, batches_init);
	struct ods_batch *b = batch ? ods_slots_take(&batches, (uint64_t)(uintptr_t)batch) : NULL;
	if (!b)
		return INVALID("opends_batch_destroy: batch is not a batch made by opends_batch_setup");
	batch_free(b);
	return ods_ok();
}
