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
#include <sys/prctl.h>
#include <time.h>

#include "stream.h"

#define BACKOFF_MIN_NS 10000L  /* first wait after a round that moved nothing */
#define BACKOFF_MAX_NS 200000L /* longest: how late a free slot may be seen */
/* Nothing can move before a kick (a cold read between two pieces): the
 * dispatcher naps this long, so that it does not wake 5 000 times a
 * second for nothing; it only bounds a kick lost to the race between the
 * poll and the nap. */
#define QUIET_NS 2000000L

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct ods_task *head, *tail;
	bool started, stop, kicked;
	pthread_t th;
	int (*poll)(void);
} disp = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, false, false, false, 0, NULL };
static atomic_bool napping; /* the dispatcher is in a timed wait */
static atomic_bool kick_req; /* a kick since the last poll began */

void ods_dispatch_post(void *task)
{
	struct ods_task *t = task;
	t->next = NULL;
	pthread_mutex_lock(&disp.lock);
	if (disp.tail)
		disp.tail->next = t;
	else
		disp.head = t;
	disp.tail = t;
	pthread_cond_signal(&disp.cond);
	pthread_mutex_unlock(&disp.lock);
}

void ods_dispatch_kick(void)
{
	/* seen by the dispatcher before it naps, or it is napping already
	 * and is woken here (both sequentially consistent) */
	atomic_store(&kick_req, true);
	if (!atomic_load(&napping))
		return; /* polling anyway, or nothing to poll */
	pthread_mutex_lock(&disp.lock);
	disp.kicked = true;
	pthread_cond_signal(&disp.cond);
	pthread_mutex_unlock(&disp.lock);
}

static void *dispatcher(void *arg)
{
	(void)arg;
	/* the back-off's short waits as asked, not rounded up by the default
	 * 50 us timer slack: a small operation's stream is seen to reach it
	 * that much sooner */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	long delay_ns = 0;
	bool watching = false; /* the last poll had operations to watch */
	pthread_mutex_lock(&disp.lock);
	for (;;) {
		while (!disp.head && !disp.stop && !watching)
			pthread_cond_wait(&disp.cond, &disp.lock);
		struct ods_task *t = disp.head;
		if (t) {
			disp.head = t->next;
			if (!disp.head)
				disp.tail = NULL;
			pthread_mutex_unlock(&disp.lock);
			t->run(t);
			pthread_mutex_lock(&disp.lock);
			/* a task may have added an operation, whose stream may
			 * reach it within microseconds: poll soon, not after the
			 * back-off the older ones earned */
			watching = true;
			delay_ns = 0;
			continue;
		}
		pthread_mutex_unlock(&disp.lock);
		atomic_store(&kick_req, false);
		int moved = disp.poll();
		pthread_mutex_lock(&disp.lock);
		watching = moved != -1;
		if (!watching) {
			if (disp.stop)
				break; /* stopping, nothing in flight */
			continue;
		}
		if (disp.kicked)
			delay_ns = 0, disp.kicked = false;
		delay_ns = moved > 0 ? 0 : moved == -2 ? QUIET_NS
				 : delay_ns ? (delay_ns * 2 < BACKOFF_MAX_NS ? delay_ns * 2 : BACKOFF_MAX_NS)
					    : BACKOFF_MIN_NS;
		if (delay_ns && !disp.head) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += delay_ns;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			atomic_store(&napping, true);
			if (!atomic_load(&kick_req)) /* none came during the poll */
				pthread_cond_timedwait(&disp.cond, &disp.lock, &ts);
			atomic_store_explicit(&napping, false, memory_order_relaxed);
			if (disp.kicked)
				delay_ns = 0, disp.kicked = false;
		}
	}
	pthread_mutex_unlock(&disp.lock);
	return NULL;
}

int ods_dispatch_start(int (*poll)(void))
{
	pthread_mutex_lock(&disp.lock);
	int rc = 0;
	if (!disp.started) {
		disp.stop = false;
		disp.poll = poll;
		if (pthread_create(&disp.th, NULL, dispatcher, NULL))
			rc = ods_fail(OPENDS_INTERNAL_ERROR, "could not start the stream dispatcher thread");
		else
			disp.started = true;
		if (disp.started) /* named, so that a profile can tell its CPU from the rest */
			pthread_setname_np(disp.th, "ods-dispatch");
	}
	pthread_mutex_unlock(&disp.lock);
	return rc;
}

void ods_dispatch_stop(void)
{
	pthread_mutex_lock(&disp.lock);
	bool started = disp.started;
	disp.stop = true;
	pthread_cond_broadcast(&disp.cond);
	pthread_mutex_unlock(&disp.lock);
	if (started)
		pthread_join(disp.th, NULL); /* runs what is queued first */
	disp.started = disp.stop = disp.kicked = false;
}

void ods_counter_wait(void *counter, uint32_t need, atomic_uint *moving, unsigned idle_ms)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	uint32_t m = acc->counter_read(counter);
	unsigned f = atomic_load(moving), idle = 0;
	while (m < need && idle < idle_ms) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		uint32_t m2 = acc->counter_read(counter);
		unsigned f2 = atomic_load(moving);
		idle = m2 != m || f2 != f ? 0 : idle + 1;
		m = m2, f = f2;
	}
}

/* -- staging -- */

#define NCLASS 13
_Static_assert(((size_t)65536 << (NCLASS - 1)) >= ODS_STAGE_MAX, "a class holds the largest staging");
static struct {
	pthread_mutex_t lock;
	void *free[NCLASS]; /* linked through each buffer's first word */
} stage_pool = { PTHREAD_MUTEX_INITIALIZER, { NULL } };

static size_t class_size(unsigned c)
{
	return (size_t)65536 << c;
}

void *ods_staging_get(size_t n, unsigned *cls, bool *over)
{
	*over = false;
	unsigned c = 0;
	while (class_size(c) < n)
		c++;
	pthread_mutex_lock(&stage_pool.lock);
	void *p = stage_pool.free[c];
	if (p)
		stage_pool.free[c] = *(void **)p;
	pthread_mutex_unlock(&stage_pool.lock);
	*cls = c;
	if (p)
		return p;
	if (!ods_pinned_reserve(class_size(c))) {
		*over = true;
		return NULL;
	}
	p = ods_drv.accel->mem ? ods_drv.accel->mem->pinned_alloc(class_size(c)) : ods_aligned_alloc(class_size(c));
	if (!p)
		ods_pinned_release(class_size(c));
	return p;
}

void ods_staging_put(void *p, unsigned c)
{
	pthread_mutex_lock(&stage_pool.lock);
	*(void **)p = stage_pool.free[c];
	stage_pool.free[c] = p;
	pthread_mutex_unlock(&stage_pool.lock);
}

void ods_staging_fini(void)
{
	for (unsigned c = 0; c < NCLASS; c++)
		for (void *p = stage_pool.free[c], *n; p; p = n) {
			n = *(void **)p;
			if (ods_drv.accel->mem)
				ods_drv.accel->mem->pinned_free(p, class_size(c));
			else
				free(p);
			ods_pinned_release(class_size(c));
		}
	memset(stage_pool.free, 0, sizeof(stage_pool.free));
}

void ods_dispatch_forget(void)
{
	disp.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	disp.cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	disp.head = disp.tail = NULL;
	disp.started = disp.stop = disp.kicked = false;
	disp.poll = NULL;
	atomic_store(&napping, false);
	atomic_store(&kick_req, false);
	stage_pool.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	memset(stage_pool.free, 0, sizeof(stage_pool.free));
}
