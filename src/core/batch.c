/*
 * Batch I/O (cuFileBatchIO*): a batch owns max_nr entries, each an ods_io
 * run on the backend's async engine. Completed entries wait on a ready list
 * until opends_batch_get_status delivers them, once each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "ods.h"

/* How long get_status spins before it sleeps (ns): none by default. On
 * the H200 (probe 29, imagenetish hot batch, 8 workers) 50 us of spin ran
 * 12760 MiB/s, none 12857: the workers bound that leg, not the collector's
 * wake-ups; on 2 CPUs the spin takes the CPU the workers need (hot small
 * files, 4 workers: 63-65k files/s without, 56-63k with).
 * OPENDS_AB_BATCH_SPIN_US=N for an A/B. */
#define DEF_SPIN_NS 0u

/* OPENDS_BATCH_STATS=1 (a measurement hook, not configuration): when a
 * batch is destroyed, one line on stderr says how its callers spent their
 * time: submits and entries, time inside submit (which includes waiting
 * for room in the engine's queue), get_status calls, the events they
 * returned, how often and how long they slept for completions. It tells a
 * leg bound by its workers (the collector sleeps, submits are quick) from
 * one bound by its caller (events pile up, nobody sleeps). */
struct bstats {
	_Atomic uint64_t submits, entries, submit_ns, calls, events, sleeps, sleep_ns;
};

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

enum { E_FREE, E_INFLIGHT, E_READY };

struct bentry {
	struct ods_io io;
	struct ods_batch *b;
	struct bentry *next;
	void *cookie;
	int state;
	opends_status_t status;
};

/* Completions reach the batch without its lock: a worker pushes the
 * finished entry on the batch's done stack (one CAS) and wakes a collector
 * only when one sleeps. Under one lock, 8-16 workers finishing small files
 * met each other and the collector on it, and each finish woke the
 * sleeping collector with a futex call made holding the lock (imagenetish
 * hot batch at 0.30x the copy ceiling, +16 % from 8 to 16 workers).
 * Collectors move the stack to the ready list under the lock (collect). */
struct ods_batch {
	pthread_mutex_t lock;
	/* reserved: taken off the free list by a submit still validating its
	 * entries; counted with the rest so that two submits racing cannot
	 * both take the same room (issue 15 item 1). inflight counts entries
	 * on the done stack too, until collected. */
	unsigned max_nr, reserved, inflight, ready;
	uint64_t spin_ns; /* get_status's spin before it sleeps */
	bool stats;	  /* OPENDS_BATCH_STATS=1: st is kept and printed at destroy */
	struct bstats st;
	_Atomic(struct bentry *) done_top; /* finished, not yet collected; newest first */
	atomic_uint done_seq;		   /* entries finished so far: the futex word collectors sleep on */
	atomic_uint sleepers;		   /* collectors asleep on done_seq (or about to be) */
	atomic_uint finishing;		   /* workers inside entry_done: freeing waits for 0 */
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

/* caller holds b->lock: the finished entries join the ready list, in the
 * order they finished */
static void collect(struct ods_batch *b)
{
	struct bentry *e = atomic_exchange_explicit(&b->done_top, NULL, memory_order_acquire), *rev = NULL;
	while (e) {
		struct bentry *next = e->next;
		e->next = rev;
		rev = e;
		e = next;
	}
	for (e = rev; e; e = e->next) {
		e->state = E_READY;
		b->inflight--;
		b->ready++;
	}
	if (!rev)
		return;
	if (b->ready_tail)
		b->ready_tail->next = rev;
	else
		b->ready_head = rev;
	for (e = rev; e->next; e = e->next)
		;
	b->ready_tail = e;
}

/* Spin or sleep until an entry finishes after seq was read or dl passes
 * (NULL: no limit; spin_ns 0: no spin). Called without the lock; false
 * when dl passed. */
static bool await_finish(struct ods_batch *b, unsigned seq, const struct timespec *dl, uint64_t spin_ns)
{
	if (spin_ns) {
		/* (not past the caller's deadline) */
		uint64_t t0 = mono_ns(), end = t0 + spin_ns;
		uint64_t d = dl && (uint64_t)dl->tv_sec < UINT64_MAX / 1000000000u - 1
				     ? (uint64_t)dl->tv_sec * 1000000000u + (uint64_t)dl->tv_nsec
				     : UINT64_MAX;
		if (d < end)
			end = d;
		while (atomic_load_explicit(&b->done_seq, memory_order_acquire) == seq) {
			if (mono_ns() >= end)
				break;
			for (int i = 0; i < 16; i++)
				ods_cpu_relax();
		}
		if (atomic_load_explicit(&b->done_seq, memory_order_acquire) != seq)
			return true;
	}
	/* Dekker with entry_done: sleepers is raised before done_seq is
	 * looked at, done_seq raised before sleepers is looked at */
	atomic_fetch_add(&b->sleepers, 1);
	bool in_time = true;
	if (atomic_load(&b->done_seq) == seq) {
		long rc = syscall(SYS_futex, &b->done_seq, FUTEX_WAIT_BITSET_PRIVATE, seq, dl, NULL,
				  FUTEX_BITSET_MATCH_ANY);
		in_time = !(rc < 0 && errno == ETIMEDOUT);
	}
	atomic_fetch_sub(&b->sleepers, 1);
	return in_time;
}

static void wait_idle(struct ods_batch *b)
{
	pthread_mutex_lock(&b->lock);
	for (;;) {
		/* the sequence BEFORE collecting: an entry pushed after this load
		 * (and collected by another thread before we sleep) changes it,
		 * so the wait below returns at once instead of missing it */
		unsigned seq = atomic_load(&b->done_seq);
		collect(b);
		if (!b->inflight)
			break;
		pthread_mutex_unlock(&b->lock);
		if (!atomic_load(&b->done_top))
			await_finish(b, seq, NULL, 0);
		pthread_mutex_lock(&b->lock);
	}
	pthread_mutex_unlock(&b->lock);
	/* every entry was pushed; the workers that pushed them may still be
	 * waking a sleeper: b stays until they are out */
	while (atomic_load(&b->finishing))
		sched_yield();
}

static void stats_print(struct ods_batch *b)
{
	struct bstats *t = &b->st;
	uint64_t calls = atomic_load(&t->calls), events = atomic_load(&t->events);
	fprintf(stderr,
		"opends batch stats: max_nr %u; %llu submits, %llu entries, %.3f ms in submit; %llu get_status "
		"calls, %llu events (%.1f per call), %llu sleeps, %.3f ms asleep\n",
		b->max_nr, (unsigned long long)atomic_load(&t->submits), (unsigned long long)atomic_load(&t->entries),
		(double)atomic_load(&t->submit_ns) / 1e6, (unsigned long long)calls, (unsigned long long)events,
		calls ? (double)events / (double)calls : 0.0, (unsigned long long)atomic_load(&t->sleeps),
		(double)atomic_load(&t->sleep_ns) / 1e6);
}

static void batch_free(void *p)
{
	struct ods_batch *b = p;
	wait_idle(b);
	if (b->stats)
		stats_print(b);
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
	b->max_nr = max_nr;
	const char *sp = getenv("OPENDS_AB_BATCH_SPIN_US");
	b->spin_ns = sp ? strtoull(sp, NULL, 10) * 1000u : DEF_SPIN_NS;
	const char *st = getenv("OPENDS_BATCH_STATS");
	b->stats = st && !strcmp(st, "1");
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

static void entry_done(struct ods_io *io)
{
	struct bentry *e = io->owner;
	struct ods_batch *b = e->b;
	/* counted before the push: a collector that takes the entry and
	 * frees the batch waits for this count (wait_idle) */
	atomic_fetch_add(&b->finishing, 1);
	if (io->result >= 0)
		e->status = OPENDS_COMPLETE;
	else if (io->result == -ECANCELED && atomic_load(&io->cancelled))
		e->status = OPENDS_CANCELED;
	else
		e->status = OPENDS_FAILED;
	/* a leaf (ods.h): the handle's count drops before a collector can
	 * take the entry, so one that deregisters the handle at once does not
	 * wait */
	if (io->leaf)
		atomic_fetch_sub_explicit(&io->fh->inflight, 1, memory_order_release);
	struct bentry *top = atomic_load_explicit(&b->done_top, memory_order_relaxed);
	do
		e->next = top;
	while (!atomic_compare_exchange_weak(&b->done_top, &top, e));
	/* e may be collected and reused from here: only b is touched */
	atomic_fetch_add(&b->done_seq, 1);
	if (atomic_load(&b->sleepers))
		ods_futex_wake_all(&b->done_seq);
	atomic_fetch_sub_explicit(&b->finishing, 1, memory_order_release);
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
	uint64_t t0 = b->stats ? mono_ns() : 0;

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
	if (b->stats) {
		atomic_fetch_add_explicit(&b->st.submits, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&b->st.entries, nr, memory_order_relaxed);
		atomic_fetch_add_explicit(&b->st.submit_ns, mono_ns() - t0, memory_order_relaxed);
	}
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
	/* A spin before each sleep, as a synchronous call waits (io.c):
	 * entries finish every few microseconds while a batch of small files
	 * is in flight, and a collector that sleeps on each costs a futex
	 * wake-up by the worker and a context switch of its own per wait (the
	 * batch leg ran at 0.70x the same files' async leg, H200 try1). A
	 * poll (zero timeout) collects what finished and returns. */
	bool poll = timeout && !timeout->tv_sec && !timeout->tv_nsec;
	for (;;) {
		unsigned seq = atomic_load(&b->done_seq); /* before collecting: see wait_idle */
		collect(b);
		unsigned reachable = b->ready + b->inflight;
		if (poll || b->ready >= (want < reachable ? want : reachable))
			break;
		pthread_mutex_unlock(&b->lock);
		bool in_time = true;
		if (!atomic_load(&b->done_top)) {
			uint64_t t0 = b->stats ? mono_ns() : 0;
			in_time = await_finish(b, seq, timeout ? &dl : NULL, b->spin_ns);
			if (b->stats) {
				atomic_fetch_add_explicit(&b->st.sleeps, 1, memory_order_relaxed);
				atomic_fetch_add_explicit(&b->st.sleep_ns, mono_ns() - t0, memory_order_relaxed);
			}
		}
		pthread_mutex_lock(&b->lock);
		if (!in_time) {
			collect(b);
			break;
		}
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
	if (b->stats) {
		atomic_fetch_add_explicit(&b->st.calls, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&b->st.events, n, memory_order_relaxed);
	}
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
