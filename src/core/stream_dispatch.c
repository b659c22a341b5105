/*
 * What the accelerator stream engine (stream_accel.c) runs on: the
 * dispatcher thread, and the pool of pinned staging buffers.
 *  - The dispatcher runs tasks (what host functions start: they run on the
 *    accelerator's callback thread, which may neither call the accelerator
 *    nor wait) and, between them, the engine's poll of the counters its
 *    operations' streams write. It polls at once while counters move and
 *    backs off while they do not (a stream held elsewhere); a kick (a
 *    piece is ready, so a counter will move soon) restarts the back-off.
 *  - Staging buffers are kept for reuse until the driver closes: an
 *    unregistration may wait for the device, which a held stream can keep
 *    busy. Classes are powers of two from 64 KiB to ODS_STAGE_MAX.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stream.h"

#define BACKOFF_MIN_NS 10000L  /* first wait after a round that moved nothing */
#define BACKOFF_MAX_NS 200000L /* longest: how late a free slot may be seen */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct ods_task *head, *tail;
	bool started, stop, kicked;
	pthread_t th;
	int (*poll)(void);
} D = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, false, false, false, 0, NULL };
static atomic_bool napping; /* the dispatcher is in a timed wait */

void ods_dispatch_post(void *task)
{
	struct ods_task *t = task;
	t->next = NULL;
	pthread_mutex_lock(&D.lock);
	if (D.tail)
		D.tail->next = t;
	else
		D.head = t;
	D.tail = t;
	pthread_cond_signal(&D.cond);
	pthread_mutex_unlock(&D.lock);
}

void ods_dispatch_kick(void)
{
	if (!atomic_load_explicit(&napping, memory_order_acquire))
		return; /* polling anyway, or nothing to poll */
	pthread_mutex_lock(&D.lock);
	D.kicked = true;
	pthread_cond_signal(&D.cond);
	pthread_mutex_unlock(&D.lock);
}

static void *dispatcher(void *arg)
{
	(void)arg;
	long delay_ns = 0;
	bool watching = false; /* the last poll had operations to watch */
	pthread_mutex_lock(&D.lock);
	for (;;) {
		while (!D.head && !D.stop && !watching)
			pthread_cond_wait(&D.cond, &D.lock);
		struct ods_task *t = D.head;
		if (t) {
			D.head = t->next;
			if (!D.head)
				D.tail = NULL;
			pthread_mutex_unlock(&D.lock);
			t->run(t);
			pthread_mutex_lock(&D.lock);
			watching = true; /* a task may have added an operation */
			continue;
		}
		pthread_mutex_unlock(&D.lock);
		int moved = D.poll();
		pthread_mutex_lock(&D.lock);
		watching = moved >= 0;
		if (!watching) {
			if (D.stop)
				break; /* stopping, nothing in flight */
			continue;
		}
		if (D.kicked)
			delay_ns = 0, D.kicked = false;
		delay_ns = moved ? 0 : delay_ns ? (delay_ns * 2 < BACKOFF_MAX_NS ? delay_ns * 2 : BACKOFF_MAX_NS)
					     : BACKOFF_MIN_NS;
		if (delay_ns && !D.head) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += delay_ns;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			atomic_store_explicit(&napping, true, memory_order_release);
			pthread_cond_timedwait(&D.cond, &D.lock, &ts);
			atomic_store_explicit(&napping, false, memory_order_relaxed);
			if (D.kicked)
				delay_ns = 0, D.kicked = false;
		}
	}
	pthread_mutex_unlock(&D.lock);
	return NULL;
}

int ods_dispatch_start(int (*poll)(void))
{
	pthread_mutex_lock(&D.lock);
	int rc = 0;
	if (!D.started) {
		D.stop = false;
		D.poll = poll;
		if (pthread_create(&D.th, NULL, dispatcher, NULL))
			rc = ods_fail(OPENDS_INTERNAL_ERROR, "could not start the stream dispatcher thread");
		else
			D.started = true;
	}
	pthread_mutex_unlock(&D.lock);
	return rc;
}

void ods_dispatch_stop(void)
{
	pthread_mutex_lock(&D.lock);
	bool started = D.started;
	D.stop = true;
	pthread_cond_broadcast(&D.cond);
	pthread_mutex_unlock(&D.lock);
	if (started)
		pthread_join(D.th, NULL); /* runs what is queued first */
	D.started = D.stop = D.kicked = false;
}

/* -- staging -- */

#define NCLASS 13
_Static_assert(((size_t)65536 << (NCLASS - 1)) >= ODS_STAGE_MAX, "a class holds the largest staging");
static struct {
	pthread_mutex_t lock;
	void *free[NCLASS]; /* linked through each buffer's first word */
} P = { PTHREAD_MUTEX_INITIALIZER, { NULL } };

static size_t class_size(unsigned c)
{
	return (size_t)65536 << c;
}

void *ods_staging_get(size_t n, unsigned *cls)
{
	unsigned c = 0;
	while (class_size(c) < n)
		c++;
	pthread_mutex_lock(&P.lock);
	void *p = P.free[c];
	if (p)
		P.free[c] = *(void **)p;
	pthread_mutex_unlock(&P.lock);
	if (!p)
		p = ods_drv.accel->mem ? ods_drv.accel->mem->pinned_alloc(class_size(c))
						: ods_aligned_alloc(class_size(c));
	*cls = c;
	return p;
}

void ods_staging_put(void *p, unsigned c)
{
	pthread_mutex_lock(&P.lock);
	*(void **)p = P.free[c];
	P.free[c] = p;
	pthread_mutex_unlock(&P.lock);
}

void ods_staging_fini(void)
{
	for (unsigned c = 0; c < NCLASS; c++)
		for (void *p = P.free[c], *n; p; p = n) {
			n = *(void **)p;
			if (ods_drv.accel->mem)
				ods_drv.accel->mem->pinned_free(p, class_size(c));
			else
				free(p);
		}
	memset(P.free, 0, sizeof(P.free));
}

void ods_dispatch_forget(void)
{
	D.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	D.cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	D.head = D.tail = NULL;
	D.started = D.stop = D.kicked = false;
	D.poll = NULL;
	atomic_store(&napping, false);
	P.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	memset(P.free, 0, sizeof(P.free));
}
