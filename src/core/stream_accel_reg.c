/*
 * The accelerator streams the library knows (stream_accel.c's engine):
 * those it made (opends_stream_create) and those registered with their
 * hints, in a hash table (each operation looks its stream up at the call,
 * and a program may make thousands: the imagenetish stream legs use 4096),
 * and how many stream operations are in flight, so that closing waits for
 * them; per stream, how many have no result yet, so that a sync can sleep
 * until they have. An operation takes the table's lock once, at the call
 * (to find its stream); its result going out takes no lock and wakes only
 * the syncs of its own stream (a futex on the stream's count).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

#define FIXED_ARGS \
	(OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET | OPENDS_STREAM_FIXED_FILE_SIZE)

/* What the library knows of an accelerator stream: whether it made it,
 * and the registration hints. */
struct astream {
	void *s;
	bool created, registered;
	unsigned flags;
	unsigned tracked; /* operations enqueued on it (the lock) */
	atomic_uint done; /* ... of them whose results are out (a futex word) */
	/* operations tracked whose ods_astream_untrack has not returned: the
	 * entry is freed only at 0, so that one may touch it to the end */
	atomic_uint refs;
	atomic_uint waiters; /* threads in ods_astream_sync waiting for them */
	/* direct operations' staging the stream may still copy out of
	 * (ods_astream_hold; the lock) */
	struct ods_held *held;
	unsigned dev;          /* the device its commands run on (ods_astream_hold) */
	struct astream *fnext, *fprev; /* the holders' queue (oldest first), while infifo */
	bool infifo;
	struct astream *next; /* its bucket's chain */
};
static pthread_mutex_t astreams_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t astreams_idle = PTHREAD_COND_INITIALIZER;
static struct astream **buckets; /* nbuckets chains, a power of two */
static size_t nbuckets, nastreams;
static atomic_uint ainflight; /* operations enqueued and not yet ended */
/* The streams that held something, in the order they first did (the
 * lock): ods_astreams_reclaim_old asks the oldest whether they are idle. */
static struct astream *fifo_head, *fifo_tail;
static atomic_uint nfifo;

static size_t bucket_of(void *s, size_t nb)
{
	uint64_t h = (uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 32) & (nb - 1);
}

/* caller holds astreams_lock; NULL when unknown (add: make an entry, NULL
 * when out of memory) */
static struct astream *astream_find(void *s, bool add)
{
	if (nbuckets)
		for (struct astream *a = buckets[bucket_of(s, nbuckets)]; a; a = a->next)
			if (a->s == s)
				return a;
	if (!add)
		return NULL;
	if (nastreams >= nbuckets) { /* grow: at most one entry per bucket on average */
		size_t nb = nbuckets ? nbuckets * 2 : 64;
		struct astream **n = calloc(nb, sizeof(*n));
		if (!n)
			return NULL;
		for (size_t i = 0; i < nbuckets; i++)
			for (struct astream *e = buckets[i], *next; e; e = next) {
				next = e->next;
				size_t b = bucket_of(e->s, nb);
				e->next = n[b];
				n[b] = e;
			}
		free(buckets);
		buckets = n;
		nbuckets = nb;
	}
	struct astream *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	size_t b = bucket_of(s, nbuckets);
	a->s = s;
	a->next = buckets[b];
	buckets[b] = a;
	nastreams++;
	return a;
}

/* caller holds astreams_lock; drop an entry that says nothing and that
 * nobody uses */
static void astream_trim(struct astream *a)
{
	if (a->created || a->registered || a->held || a->infifo || atomic_load(&a->refs) ||
	    atomic_load(&a->waiters))
		return;
	for (struct astream **pp = &buckets[bucket_of(a->s, nbuckets)]; *pp; pp = &(*pp)->next)
		if (*pp == a) {
			*pp = a->next;
			free(a);
			nastreams--;
			return;
		}
}

void ods_ainflight_add(int d)
{
	/* the lock only to wake a closing thread waiting for none */
	if (atomic_fetch_add(&ainflight, (unsigned)d) + (unsigned)d != 0)
		return;
	pthread_mutex_lock(&astreams_lock);
	pthread_cond_broadcast(&astreams_idle);
	pthread_mutex_unlock(&astreams_lock);
}

void *ods_astream_track(void *s, bool *fixed, bool *made)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(s, false);
	*fixed = a && a->registered && (a->flags & FIXED_ARGS) == FIXED_ARGS;
	*made = a && a->created;
	if (a) {
		a->tracked++;
		atomic_fetch_add(&a->refs, 1);
	}
	pthread_mutex_unlock(&astreams_lock);
	return a;
}

struct ods_held *ods_astream_held(void *t)
{
	struct astream *a = t;
	pthread_mutex_lock(&astreams_lock);
	struct ods_held *h = a->held;
	a->held = NULL;
	pthread_mutex_unlock(&astreams_lock);
	return h;
}

/* list h in front of *to */
static void held_add_to(struct ods_held **to, struct ods_held *h)
{
	if (!h)
		return;
	struct ods_held *last = h;
	while (last->next)
		last = last->next;
	last->next = *to;
	*to = h;
}

/* caller holds astreams_lock */
static void held_add(struct astream *a, struct ods_held *h)
{
	held_add_to(&a->held, h);
}

/* caller holds astreams_lock */
static void fifo_push(struct astream *a)
{
	a->infifo = true;
	a->fnext = NULL;
	a->fprev = fifo_tail;
	if (fifo_tail)
		fifo_tail->fnext = a;
	else
		fifo_head = a;
	fifo_tail = a;
	atomic_fetch_add(&nfifo, 1);
}

/* caller holds astreams_lock: take a (infifo) off the holders' queue */
static void fifo_remove(struct astream *a)
{
	if (a->fprev)
		a->fprev->fnext = a->fnext;
	else
		fifo_head = a->fnext;
	if (a->fnext)
		a->fnext->fprev = a->fprev;
	else
		fifo_tail = a->fprev;
	a->infifo = false;
	atomic_fetch_sub(&nfifo, 1);
}

void ods_astream_hold(void *t, struct ods_held *h, unsigned dev)
{
	struct astream *a = t;
	if (!h)
		return;
	pthread_mutex_lock(&astreams_lock);
	a->dev = dev;
	held_add(a, h);
	if (!a->infifo)
		fifo_push(a);
	pthread_mutex_unlock(&astreams_lock);
}

/* The staging pool has no buffer of the size an operation needs: before
 * it makes one (pinning memory: ~1 ms per 4 MiB block on the H200, paid
 * by the first round of 4096 small reads), ask up to max of the streams
 * that held staging longest whether they are idle, and give back what the
 * idle ones hold. A small read's copy ends microseconds after its result,
 * so an oldest one whose results are out is all but always done: about one
 * query per read, where holding everything until each stream's next sync
 * needed a buffer per stream. Streams still busy go to the back. */
void ods_astreams_reclaim_old(unsigned max)
{
	if (!atomic_load_explicit(&nfifo, memory_order_relaxed))
		return;
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	struct ods_held *out = NULL;
	bool got = false;
	pthread_mutex_lock(&astreams_lock);
	for (unsigned i = 0; i < max && fifo_head && !got; i++) {
		struct astream *a = fifo_head;
		fifo_remove(a);
		if (!a->held || !a->created) {
			astream_trim(a); /* synced or destroyed since */
			continue;
		}
		/* only streams whose operations all have their results out
		 * (their gates open: the copies run within microseconds) are
		 * asked; the others cost no driver call (the first round of
		 * 4096 small reads: the oldest is still reading) */
		if ((int)(atomic_load(&a->done) - a->tracked) < 0) {
			fifo_push(a);
			continue;
		}
		if (acc->stream_idle && acc->stream_idle(a->dev, a->s)) {
			held_add_to(&out, a->held);
			a->held = NULL;
			got = true;
		} else {
			fifo_push(a);
		}
	}
	pthread_mutex_unlock(&astreams_lock);
	ods_held_release(out, true); /* (outside the lock: an operation's end may take it) */
}

/* The stream pool is out of budget: ask each stream the library made that
 * holds direct operations' staging whether it is idle now, and give back
 * what the idle ones hold. A program that neither synchronizes nor reuses
 * its streams (it polls the results) would otherwise keep every buffer
 * until it destroys them. Rare: the driver calls are made only then, under
 * the lock, so that no stream is destroyed while it is asked. */
void ods_astreams_reclaim(void)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	struct ods_held *out = NULL;
	pthread_mutex_lock(&astreams_lock);
	for (size_t i = 0; acc->stream_idle && i < nbuckets; i++)
		for (struct astream *a = buckets[i]; a; a = a->next)
			if (a->held && a->created && acc->stream_idle(a->dev, a->s)) {
				held_add_to(&out, a->held);
				a->held = NULL;
			}
	pthread_mutex_unlock(&astreams_lock);
	ods_held_release(out, true); /* (outside the lock: an operation's end may take it) */
}

void ods_held_release(struct ods_held *h, bool past)
{
	for (struct ods_held *next; h; h = next) {
		next = h->next;
		h->release(h, past);
	}
}

/* No lock: the count, then a wake if a sync waits (it counts itself a
 * waiter, then reads the count: with both sequentially consistent, one
 * sees the other), then the entry is let go. An entry left with nothing
 * (its stream destroyed meanwhile) is freed by the next trim of it: the
 * stream's sync or destroy, or close. */
void ods_astream_untrack(void *t)
{
	struct astream *a = t;
	atomic_fetch_add(&a->done, 1);
	if (atomic_load(&a->waiters))
		ods_futex_wake_all(&a->done);
	atomic_fetch_sub_explicit(&a->refs, 1, memory_order_release);
}

opends_error_t ods_astream_create(opends_stream_t *stream)
{
	void *as = NULL;
	int rc = ods_drv.accel->streams->stream_create(&as);
	if (rc)
		return ods_err(rc, 0);
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(as, true);
	if (a)
		a->created = true;
	pthread_mutex_unlock(&astreams_lock);
	if (!a) {
		ods_drv.accel->streams->stream_destroy(as);
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_stream_create: out of memory"), ENOMEM);
	}
	*stream = as;
	return ods_ok();
}

opends_error_t ods_astream_destroy(opends_stream_t stream)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = stream ? astream_find(stream, false) : NULL;
	bool ours = a && a->created;
	struct ods_held *held = NULL;
	if (ours) {
		a->created = a->registered = false;
		held = a->held;
		a->held = NULL;
		/* off the holders' queue: else the entry stayed there (and in
		 * the table) until a read found the pool short, or the close */
		if (a->infifo)
			fifo_remove(a);
		astream_trim(a);
	}
	pthread_mutex_unlock(&astreams_lock);
	if (!ours)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_stream_destroy: stream %p was not made by opends_stream_create", stream),
			       0);
	int rc = ods_drv.accel->streams->stream_destroy(stream);
	/* drained (the destroy waits for the stream first): what it held is
	 * free; if the destroy failed, that is not known */
	ods_held_release(held, rc == 0);
	/* The stream has drained: the results of its operations are out and
	 * their last gates open, so each lets the entry go within moments
	 * (ods_astream_untrack comes right after the gate, on the thread that
	 * opened it). Wait for that here, so that the entry goes now and not
	 * at close: a program that makes and destroys streams by the
	 * thousand kept one entry for each that lost that race (review).
	 * Not after a failed destroy (the stream may not have drained), nor
	 * once a stream made since at the same address took the entry. */
	pthread_mutex_lock(&astreams_lock);
	if ((a = astream_find(stream, false))) {
		atomic_fetch_add(&a->waiters, 1); /* no trim frees it meanwhile */
		while (rc == 0 && atomic_load(&a->refs) && !a->created && !a->registered) {
			pthread_mutex_unlock(&astreams_lock);
			sched_yield();
			pthread_mutex_lock(&astreams_lock);
		}
		atomic_fetch_sub(&a->waiters, 1);
		astream_trim(a);
	}
	pthread_mutex_unlock(&astreams_lock);
	return rc ? ods_err(rc, 0) : ods_ok();
}

/* any stream of the accelerator may be registered, the NULL (default)
 * stream included */
opends_error_t ods_astream_reg(opends_stream_t stream, unsigned flags)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(stream, true);
	if (a) {
		a->registered = true;
		a->flags = flags;
	}
	pthread_mutex_unlock(&astreams_lock);
	if (!a)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_stream_register: out of memory"), ENOMEM);
	return ods_ok();
}

bool ods_astream_dereg(opends_stream_t stream)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(stream, false);
	bool was = a && a->registered;
	if (was) {
		a->registered = false;
		a->flags = 0;
		astream_trim(a);
	}
	pthread_mutex_unlock(&astreams_lock);
	return was;
}

/* The stream holds every operation until it completed, so waiting for
 * the stream waits for them too. The library's own operations on it are
 * waited for first, asleep: their last piece wakes this thread once the
 * result is out, and the stream then has only their last copies left. A
 * wait in the accelerator for a stream held by a read spins a while
 * (CUDA's sync does, ~50 us, before it sleeps), which the cold
 * imagenetish stream leg paid for every file. This waits for nothing the
 * accelerator's sync would not: each operation's pieces end as the stream
 * moves, whatever the caller does. */
opends_error_t ods_astream_sync(opends_stream_t stream)
{
	uint64_t t0 = ods_sst_now();
	ods_sst_add(SST_SYNC, 1);
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(stream, false);
	/* those enqueued before this call (later ones may end first: the
	 * accelerator's sync below still covers every one), on an entry that
	 * stays while it has waiters */
	unsigned before = a ? a->tracked : 0;
	/* and what direct operations queued before this call hold */
	struct ods_held *held = a ? a->held : NULL;
	if (a)
		a->held = NULL;
	if (a && (int)(atomic_load(&a->done) - before) < 0) {
		atomic_fetch_add(&a->waiters, 1);
		pthread_mutex_unlock(&astreams_lock);
		ods_sst_add(SST_SYNC_SLEEPS, 1);
		for (unsigned d; (int)((d = atomic_load(&a->done)) - before) < 0;)
			ods_futex_wait(&a->done, d);
		pthread_mutex_lock(&astreams_lock);
		atomic_fetch_sub(&a->waiters, 1);
	}
	if (a) {
		/* waiters is 0 or counts this thread: the entry stays while
		 * held has things to give back */
		if (!held)
			astream_trim(a);
		else
			atomic_fetch_add(&a->waiters, 1);
	}
	pthread_mutex_unlock(&astreams_lock);
	ods_sst_since(SST_SYNC_WAIT_NS, t0);
	uint64_t t1 = ods_sst_now();
	int rc = ods_drv.accel->streams->stream_sync(stream);
	ods_sst_since(SST_SYNC_ACC_NS, t1);
	if (held) {
		/* the stream is past them once its sync succeeded; else they
		 * go back to the entry (a later sync or destroy, or the close) */
		if (rc == 0)
			ods_held_release(held, true);
		pthread_mutex_lock(&astreams_lock);
		if (rc != 0)
			held_add(a, held);
		atomic_fetch_sub(&a->waiters, 1);
		astream_trim(a);
		pthread_mutex_unlock(&astreams_lock);
	}
	return rc ? ods_err(rc, 0) : ods_ok();
}

/* every operation has ended; the streams the library made are destroyed */
void ods_astreams_fini(void)
{
	/* what direct operations hold, once each stream is past it: a
	 * stream's sync waits for nothing but the reads in flight */
	pthread_mutex_lock(&astreams_lock);
	for (size_t i = 0; i < nbuckets; i++)
		for (struct astream *a = buckets[i]; a; a = a->next)
			while (a->held) {
				struct ods_held *h = a->held;
				a->held = NULL;
				atomic_fetch_add(&a->waiters, 1); /* no trim meanwhile */
				pthread_mutex_unlock(&astreams_lock);
				ods_held_release(h, ods_drv.accel->streams->stream_sync(a->s) == 0);
				pthread_mutex_lock(&astreams_lock);
				atomic_fetch_sub(&a->waiters, 1);
			}
	while (atomic_load(&ainflight))
		pthread_cond_wait(&astreams_idle, &astreams_lock);
	for (size_t i = 0; i < nbuckets; i++)
		for (struct astream *a = buckets[i], *next; a; a = next) {
			next = a->next;
			if (a->created)
				ods_drv.accel->streams->stream_destroy(a->s);
			/* a direct operation's last piece lets its entry go just
			 * after the operation ended (piece_finish) */
			while (atomic_load_explicit(&a->refs, memory_order_acquire))
				sched_yield();
			free(a);
		}
	free(buckets);
	buckets = NULL;
	nbuckets = nastreams = 0;
	fifo_head = fifo_tail = NULL;
	atomic_store(&nfifo, 0);
	pthread_mutex_unlock(&astreams_lock);
}

size_t ods_astreams_count(void)
{
	pthread_mutex_lock(&astreams_lock);
	size_t n = nastreams;
	pthread_mutex_unlock(&astreams_lock);
	return n;
}

void ods_astreams_forget(void)
{
	astreams_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	astreams_idle = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	buckets = NULL;
	nbuckets = nastreams = 0;
	atomic_store(&ainflight, 0);
	fifo_head = fifo_tail = NULL;
	atomic_store(&nfifo, 0);
}
