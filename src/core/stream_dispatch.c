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
 *    busy. Classes are powers of two from 64 KiB to ODS_STAGE_MAX; those
 *    under 4 MiB are cut from 4 MiB blocks (one pinning per block).
 */
#include <stdio.h>
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
/* A task posted while the dispatcher naps at most this long is not worth
 * waking it for: it runs when the nap ends. A wake is a futex call on the
 * posting thread (the caller of every stream operation: on the H200's VM
 * a sleep/wake round trip is ~14 us, and the caller's CPU is what bounds
 * the rate of small operations, issue 18). */
#define POST_LATE_NS 50000L

static struct {
	pthread_mutex_t lock; /* the waits; stop, kicked */
	pthread_cond_t cond;
	bool started, stop, kicked;
	pthread_t th;
	int (*poll)(void);
} disp = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, false, 0, NULL };
/* Tasks posted, newest first (a lock-free stack: posting takes no lock). */
static struct ods_task *_Atomic posted;
/* What the dispatcher is doing, for whoever wants it to look again: a
 * post wakes it from IDLE or LONG, a kick from SHORT or LONG (a kick
 * only matters while something is watched). Set under disp.lock before
 * the dispatcher looks at posted and kick_req a last time and waits; read
 * by posters and kickers after they published (both sequentially
 * consistent: one sees the other). */
enum { DS_BUSY, DS_SHORT, DS_LONG, DS_IDLE };
static atomic_int dstate;
static atomic_bool kick_req; /* a kick since the last poll began */

static void wake(void)
{
	ods_sst_add(SST_WAKES, 1);
	pthread_mutex_lock(&disp.lock);
	disp.kicked = true;
	pthread_cond_signal(&disp.cond);
	pthread_mutex_unlock(&disp.lock);
}

void ods_dispatch_post(void *task)
{
	struct ods_task *t = task, *h = atomic_load(&posted);
	do
		t->next = h;
	while (!atomic_compare_exchange_weak(&posted, &h, t));
	int st = atomic_load(&dstate);
	if (st == DS_LONG || st == DS_IDLE)
		wake();
}

void ods_dispatch_kick(void)
{
	atomic_store(&kick_req, true);
	int st = atomic_load(&dstate);
	if (st == DS_SHORT || st == DS_LONG)
		wake();
}

/* Run what is posted, oldest first; false when nothing was. */
static bool run_posted(void)
{
	struct ods_task *t = atomic_exchange(&posted, NULL), *fifo = NULL;
	if (!t)
		return false;
	while (t) {
		struct ods_task *n = t->next;
		t->next = fifo;
		fifo = t;
		t = n;
	}
	while (fifo) {
		struct ods_task *n = fifo->next;
		fifo->run(fifo);
		fifo = n;
	}
	return true;
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
	for (;;) {
		if (run_posted()) {
			/* a task may have added an operation, whose stream may
			 * reach it within microseconds: poll soon, not after the
			 * back-off the older ones earned */
			watching = true;
			delay_ns = 0;
			continue;
		}
		if (watching) {
			atomic_store(&kick_req, false);
			int moved = disp.poll();
			watching = moved != -1;
			delay_ns = moved > 0 ? 0 : moved == -2 ? QUIET_NS
					 : delay_ns ? (delay_ns * 2 < BACKOFF_MAX_NS ? delay_ns * 2 : BACKOFF_MAX_NS)
						    : BACKOFF_MIN_NS;
			if (watching && !delay_ns)
				continue;
		}
		pthread_mutex_lock(&disp.lock);
		if (disp.kicked) {
			disp.kicked = false;
			pthread_mutex_unlock(&disp.lock);
			delay_ns = 0;
			watching = watching || atomic_load(&posted);
			continue;
		}
		if (!watching && disp.stop && !atomic_load(&posted)) {
			pthread_mutex_unlock(&disp.lock);
			break; /* stopping, nothing in flight */
		}
		atomic_store(&dstate, !watching ? DS_IDLE : delay_ns <= POST_LATE_NS ? DS_SHORT : DS_LONG);
		/* none posted, and none kicked during the poll (a kick matters
		 * only while something is watched) */
		if (!atomic_load(&posted) && !(watching && atomic_load(&kick_req))) {
			if (!watching) {
				pthread_cond_wait(&disp.cond, &disp.lock);
			} else {
				struct timespec ts;
				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_nsec += delay_ns;
				if (ts.tv_nsec >= 1000000000) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000;
				}
				pthread_cond_timedwait(&disp.cond, &disp.lock, &ts);
			}
		}
		atomic_store(&dstate, DS_BUSY);
		if (disp.kicked)
			delay_ns = 0, disp.kicked = false;
		pthread_mutex_unlock(&disp.lock);
	}
	return NULL;
}

static atomic_bool running; /* started and not stopped: no lock needed */

int ods_dispatch_start(int (*poll)(void))
{
	if (atomic_load_explicit(&running, memory_order_acquire))
		return 0; /* once per stream operation: the common case */
	pthread_mutex_lock(&disp.lock);
	int rc = 0;
	if (!disp.started) {
		disp.stop = false;
		disp.poll = poll;
		if (ods_thread_start(&disp.th, dispatcher, NULL))
			rc = ods_fail(OPENDS_INTERNAL_ERROR, "could not start the stream dispatcher thread");
		else
			disp.started = true;
		if (disp.started) /* named, so that a profile can tell its CPU from the rest */
			pthread_setname_np(disp.th, "ods-dispatch");
		atomic_store_explicit(&running, disp.started, memory_order_release);
	}
	pthread_mutex_unlock(&disp.lock);
	return rc;
}

void ods_dispatch_stop(void)
{
	pthread_mutex_lock(&disp.lock);
	bool started = disp.started;
	atomic_store(&running, false);
	disp.stop = true;
	pthread_cond_broadcast(&disp.cond);
	pthread_mutex_unlock(&disp.lock);
	if (started)
		pthread_join(disp.th, NULL); /* runs what is queued first */
	disp.started = disp.stop = disp.kicked = false;
}

/* -- OPENDS_STREAM_STATS (stream.h) -- */

bool ods_sstats_on;
atomic_ullong ods_sstats[SST_N];

void ods_sstats_init(void)
{
	const char *v = getenv("OPENDS_STREAM_STATS");
	ods_sstats_on = v && *v && strcmp(v, "0") != 0;
}

void ods_sstats_print(void)
{
	if (!ods_sstats_on)
		return;
	unsigned long long v[SST_N];
	for (int i = 0; i < SST_N; i++)
		v[i] = atomic_exchange(&ods_sstats[i], 0);
	double ops = v[SST_ENQ] ? (double)v[SST_ENQ] : 1, syncs = v[SST_SYNC] ? (double)v[SST_SYNC] : 1;
	fprintf(stderr,
		"opends stream stats: %llu ops: call %.2f us, call->result %.1f us, result->copied %.1f us; "
		"%llu syncs: waiting %.2f us (%llu slept), accelerator sync %.2f us; dispatcher: %llu polls, "
		"%.1f ops each, %llu wakes; %llu ops direct; staging pool: %llu pinned allocations; "
		"%llu large ops run on the caller\n",
		v[SST_ENQ], (double)v[SST_ENQ_NS] / 1e3 / ops, (double)v[SST_PUB_NS] / 1e3 / ops,
		(double)v[SST_END_NS] / 1e3 / ops, v[SST_SYNC], (double)v[SST_SYNC_WAIT_NS] / 1e3 / syncs,
		v[SST_SYNC_SLEEPS], (double)v[SST_SYNC_ACC_NS] / 1e3 / syncs, v[SST_ROUNDS],
		v[SST_ROUNDS] ? (double)v[SST_VISITS] / (double)v[SST_ROUNDS] : 0.0, v[SST_WAKES], v[SST_DIRECT], v[SST_POOL_NEW],
		v[SST_CALLER]);
}

/* -- staging -- */

#define NCLASS 15
_Static_assert(((size_t)65536 << (NCLASS - 1)) >= ODS_STAGE_MAX, "a class holds the largest staging");
/* Buffers of smaller classes are cut from blocks of this size: one
 * pinned allocation (cuMemHostRegister) per block, not per buffer. The
 * first round of the imagenetish stream legs (4096 operations of
 * ~110 KB in flight) otherwise pins 4096 separate 128 KiB buffers on the
 * calling thread. */
#define CARVE ((size_t)4 << 20)

/* One pinned allocation: a block cut into buffers of one class, or one
 * buffer. */
struct made {
	struct made *next;
	char *p;
	size_t size;
	unsigned cls;
	size_t back; /* ods_staging_fini: its buffers back in the pool */
};

static struct {
	pthread_mutex_t lock;
	void *free[NCLASS]; /* linked through each buffer's first word */
	struct made *made;  /* every allocation, for ods_staging_fini */
} stage_pool = { PTHREAD_MUTEX_INITIALIZER, { NULL }, NULL };

/* What the pool reserved of the staging budget: at most half of it, so
 * that what the budget must also hold later (a source's engine at its
 * first registration, read-ahead) still fits; an operation whose staging
 * would not fit runs the general way, within the budget (rel, test_diff
 * with OPENDS_MAX_PINNED=1m: the pool had taken all of it). */
static atomic_size_t pool_reserved;

static bool pool_reserve(size_t n)
{
	size_t half = ods_pinned_budget(&ods_drv.cfg) / 2, cur = atomic_load(&pool_reserved);
	do {
		if (n > half || cur > half - n)
			return false;
	} while (!atomic_compare_exchange_weak(&pool_reserved, &cur, cur + n));
	if (ods_pinned_reserve(n))
		return true;
	atomic_fetch_sub(&pool_reserved, n);
	return false;
}

static void pool_release(size_t n)
{
	ods_pinned_release(n);
	atomic_fetch_sub(&pool_reserved, n);
}

static size_t class_size(unsigned c)
{
	return (size_t)65536 << c;
}

static void *pinned_alloc(size_t n)
{
	return ods_drv.accel->mem ? ods_drv.accel->mem->pinned_alloc(n) : ods_aligned_alloc(n);
}

static void pinned_free(void *p, size_t n)
{
	if (ods_drv.accel->mem)
		ods_drv.accel->mem->pinned_free(p, n);
	else
		free(p);
}

void *ods_staging_take(size_t n, unsigned *cls)
{
	unsigned c = 0;
	while (class_size(c) < n)
		c++;
	pthread_mutex_lock(&stage_pool.lock);
	void *p = stage_pool.free[c];
	if (p)
		stage_pool.free[c] = *(void **)p;
	pthread_mutex_unlock(&stage_pool.lock);
	*cls = c;
	return p;
}

void *ods_staging_get(size_t n, unsigned *cls, bool *over)
{
	*over = false;
	void *p = ods_staging_take(n, cls);
	if (p)
		return p;
	unsigned c = *cls;
	/* a block when the budget has room for one, else one buffer */
	size_t cs = class_size(c), sz = cs < CARVE ? CARVE : cs;
	struct made *m = malloc(sizeof(*m));
	if (!m)
		return NULL;
	if (!pool_reserve(sz) && (sz == cs || !pool_reserve(sz = cs))) {
		free(m);
		*over = true;
		return NULL;
	}
	char *b = pinned_alloc(sz);
	if (!b) {
		pool_release(sz);
		free(m);
		return NULL;
	}
	ods_sst_add(SST_POOL_NEW, 1);
	*m = (struct made){ NULL, b, sz, c, 0 };
	pthread_mutex_lock(&stage_pool.lock);
	m->next = stage_pool.made;
	stage_pool.made = m;
	for (size_t off = sz - cs; off > 0; off -= cs) { /* the rest of the block */
		*(void **)(b + off) = stage_pool.free[c];
		stage_pool.free[c] = b + off;
	}
	pthread_mutex_unlock(&stage_pool.lock);
	return b;
}

void ods_staging_put(void *p, unsigned c)
{
	pthread_mutex_lock(&stage_pool.lock);
	*(void **)p = stage_pool.free[c];
	stage_pool.free[c] = p;
	pthread_mutex_unlock(&stage_pool.lock);
}

/* Every operation has ended. An allocation goes back only when each of
 * its buffers is back: an operation cut short keeps its staging for good
 * (stream_accel.c's quarantine: queued copies may still use it), and so
 * its block stays allocated. */
void ods_staging_fini(void)
{
	/* count first: the free lists run through the blocks freed below */
	for (struct made *m = stage_pool.made; m; m = m->next) {
		m->back = 0;
		for (char *q = stage_pool.free[m->cls]; q; q = *(char **)q)
			m->back += q >= m->p && q < m->p + m->size;
	}
	for (struct made *m = stage_pool.made, *next; m; m = next) {
		next = m->next;
		if (m->back == m->size / class_size(m->cls)) {
			pinned_free(m->p, m->size);
			pool_release(m->size);
		}
		free(m);
	}
	stage_pool.made = NULL;
	memset(stage_pool.free, 0, sizeof(stage_pool.free));
}

void ods_dispatch_forget(void)
{
	disp.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	disp.cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	atomic_store(&posted, NULL);
	disp.started = disp.stop = disp.kicked = false;
	disp.poll = NULL;
	atomic_store(&running, false);
	atomic_store(&dstate, DS_BUSY);
	atomic_store(&kick_req, false);
	stage_pool.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	memset(stage_pool.free, 0, sizeof(stage_pool.free));
	stage_pool.made = NULL;
	atomic_store(&pool_reserved, 0);
}
