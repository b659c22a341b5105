/*
 * The accelerator streams the library knows (stream_accel.c's engine):
 * those it made (opends_stream_create) and those registered with their
 * hints, in a hash table (each operation looks its stream up at the call,
 * and a program may make thousands: the imagenetish stream legs use 4096),
 * and how many stream operations are in flight, so that closing waits for
 * them; per stream, how many have no result yet, so that a sync can sleep
 * until they have.
 */
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
	/* operations enqueued on it, and those of them whose results are out */
	unsigned long tracked, untracked;
	unsigned waiters; /* threads in ods_astream_sync waiting for them */
	struct astream *next; /* its bucket's chain */
};
static pthread_mutex_t astreams_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t astreams_idle = PTHREAD_COND_INITIALIZER;
static pthread_cond_t astreams_done = PTHREAD_COND_INITIALIZER; /* an untracked count moved */
static struct astream **buckets; /* nbuckets chains, a power of two */
static size_t nbuckets, nastreams;
static atomic_uint ainflight; /* operations enqueued and not yet ended */

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
	if (a->created || a->registered || a->tracked != a->untracked || a->waiters)
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
	if (a)
		a->tracked++;
	pthread_mutex_unlock(&astreams_lock);
	return a;
}

void ods_astream_untrack(void *t)
{
	struct astream *a = t;
	pthread_mutex_lock(&astreams_lock);
	a->untracked++;
	if (a->waiters)
		pthread_cond_broadcast(&astreams_done);
	astream_trim(a);
	pthread_mutex_unlock(&astreams_lock);
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
	if (ours) {
		a->created = a->registered = false;
		astream_trim(a);
	}
	pthread_mutex_unlock(&astreams_lock);
	if (!ours)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_stream_destroy: stream %p was not made by opends_stream_create", stream),
			       0);
	int rc = ods_drv.accel->streams->stream_destroy(stream);
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
	if (a && a->tracked != a->untracked) {
		/* those enqueued before this call (later ones may end first:
		 * the accelerator's sync below still covers every one), on an
		 * entry that stays while it has waiters */
		unsigned long before = a->tracked;
		a->waiters++;
		if ((long)(a->untracked - before) < 0)
			ods_sst_add(SST_SYNC_SLEEPS, 1);
		while ((long)(a->untracked - before) < 0)
			pthread_cond_wait(&astreams_done, &astreams_lock);
		a->waiters--;
		astream_trim(a);
	}
	pthread_mutex_unlock(&astreams_lock);
	ods_sst_since(SST_SYNC_WAIT_NS, t0);
	uint64_t t1 = ods_sst_now();
	int rc = ods_drv.accel->streams->stream_sync(stream);
	ods_sst_since(SST_SYNC_ACC_NS, t1);
	return rc ? ods_err(rc, 0) : ods_ok();
}

/* every operation has ended; the streams the library made are destroyed */
void ods_astreams_fini(void)
{
	pthread_mutex_lock(&astreams_lock);
	while (atomic_load(&ainflight))
		pthread_cond_wait(&astreams_idle, &astreams_lock);
	for (size_t i = 0; i < nbuckets; i++)
		for (struct astream *a = buckets[i], *next; a; a = next) {
			next = a->next;
			if (a->created)
				ods_drv.accel->streams->stream_destroy(a->s);
			free(a);
		}
	free(buckets);
	buckets = NULL;
	nbuckets = nastreams = 0;
	pthread_mutex_unlock(&astreams_lock);
}

void ods_astreams_forget(void)
{
	astreams_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	astreams_idle = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	astreams_done = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	buckets = NULL;
	nbuckets = nastreams = 0;
	atomic_store(&ainflight, 0);
}
