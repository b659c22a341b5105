/*
 * Read-ahead across sequential synchronous reads (issue 17, second lead).
 *
 * A caller reading a file in back-to-back synchronous calls never has more
 * than one in flight, so each call pays its reads and then its copy in
 * sequence. Once a handle has seen two calls in a row that continue each
 * other (same size, the second starting where the first ended) on one
 * thread (several threads' calls on a handle that happen to follow each
 * other are no stream: reading ahead for them read ranges another thread
 * then asked for out of turn, dropped them, and waited), the range
 * of the next call is read into host staging (pinned where the
 * accelerator pins) behind the current one, by the engine's workers; the
 * next call that asks for exactly that range copies it from there while
 * the range after it is read into the other buffer.
 *
 * Measured and left out: filling a device buffer of the handle's from the
 * worker that finished a range, so that the call only copied within the
 * device and the bus ran between the caller's calls (af73a51): seq16m on
 * the H200 was 40.3 / 41.7 GB/s with it against 41.7 with the copy in the
 * call (probe try5), for 48 MiB of device memory per handle. The copy in
 * the call is not what bounds a sequential reader there: the workers'
 * reads of the next ranges are (gpu1, the engine alone, runs at 44.6).
 *
 * Bounded: depth + 1 buffers of the call's size per handle that reads ahead
 * (OPENDS_RA_DEPTH, ra_depth below),
 * taken from the staging budget (OPENDS_MAX_PINNED; at most half of what
 * is left of it) and given back at deregistration; calls above RA_MAX or at most the inline size
 * (OPENDS_INLINE_MAX) never read ahead, and neither does a handle whose
 * buffers do not fit the budget. Only reads into device memory: into host
 * memory the engine already reads straight into the caller's buffer with
 * every worker, and the extra copy would cost more than it hides.
 *
 * Never stale (the guarantee written in include/opends.h):
 * - the library's own writes: every write the backend takes counts in a
 *   bucket of its file's (device, inode) while it runs, and bumps the
 *   bucket's generation when it starts and when it ends. Read-ahead starts
 *   only while no write of its bucket is running, and what it read is used
 *   only if the generation has not moved since: any write to the file
 *   through any handle that started after it discards it.
 * - other processes: read-ahead starts only when the file's last change
 *   (mtime and ctime from fstat) is at least RA_QUIET old, and what it read
 *   is used only if fstat then shows the same size, mtime and ctime. A
 *   write(2) updates both times when it starts, with the kernel's clock
 *   granularity (a tick, at most 10 ms), so any write that starts after
 *   the first fstat changes them. Not seen: a single write call that began
 *   more than RA_QUIET before and is still copying, stores through a shared
 *   mapping (mmap), and file systems whose times do not follow writes of
 *   other clients (network file systems between their attribute
 *   refreshes). Block devices never read ahead (no times to check).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "stage_int.h"

#define RA_MAX ((size_t)64 << 20)          /* larger calls keep the engine's own overlap */
#define RA_QUIET_NS (100 * 1000 * 1000LL)   /* 100 ms */
#define NBUCKET 64u

/* library writes by file */
static struct {
	atomic_uint_fast64_t gen;
	atomic_uint running;
} wb[NBUCKET];

/* Reads kept in flight ahead of the caller: with one, the workers idle
 * from the moment it completes until the caller's next call queues the
 * following one; with two, a range is always queued behind the one being
 * read; with three, the reads absorb the jitter of the workers' reads of
 * cached pages against the copies. One more buffer holds the range being
 * copied out. H200 probe (seq16m, 8 GiB in 16 MiB calls, OPENDS_RA_STATS,
 * 3 runs each): depth 2 41846 MiB/s, 136-205 of 510 calls waited for their
 * range (23-44 us a call on average), 356-378 us a call; depth 3 47485,
 * 19-39 calls waited (5-10 us), 328-333 us a call. OPENDS_RA_DEPTH=1..4
 * (read when an engine opens; unset or anything else: 3) is the A/B
 * switch. */
#define RA_DEPTH_DEF 3u
#define RA_DEPTH_MAX 4u
#define RA_BUFS (RA_DEPTH_MAX + 1) /* (arrays; a handle uses r->nb of them) */
static atomic_uint ra_depth = RA_DEPTH_DEF;

void ods_ra_setup(void)
{
	const char *v = getenv("OPENDS_RA_DEPTH");
	unsigned d = v && v[0] >= '1' && v[0] <= '0' + (int)RA_DEPTH_MAX && !v[1] ? (unsigned)(v[0] - '0') : RA_DEPTH_DEF;
	atomic_store_explicit(&ra_depth, d, memory_order_relaxed);
}

struct slot {
	char *buf;
	bool pending;        /* a read of [off, +len) into buf was started */
	off_t off;
	size_t len;
	uint64_t gen;        /* the bucket's generation when it started */
	struct stat st;      /* the file then */
	struct ods_io io;
	atomic_uint done;    /* S_RUN, S_SLEEPER (the caller sleeps on it), S_DONE (futex word) */
};

struct ra {
	pthread_mutex_t lock;
	off_t next;          /* where the last synchronous read ended */
	size_t last;         /* and its size */
	unsigned streak;     /* calls in a row that continued the one before */
	const void *caller;  /* the thread of the last call (ra_me): a stream is one
				thread's; calls of several threads on one handle
				that happen to follow each other are none */
	atomic_bool want;    /* ods_ra_behind: read ahead from want_off */
	off_t want_off;
	size_t cap;          /* bytes of each slot's buffer */
	unsigned nb;         /* buffers held: the depth + 1 when they were taken */
	bool pinned;         /* buffers from accel->mem->pinned_alloc */
	bool refused;        /* the buffers did not fit the budget: never again */
	unsigned head;       /* the oldest read started (slots head, head+1, ... pending) */
	unsigned npending;
	off_t ahead;         /* where the newest read started ends */
	struct slot sl[RA_BUFS];
	atomic_ulong served; /* calls served from it (opends_describe) */
	/* OPENDS_RA_STATS=1 (measurement): where a served call's time goes,
	 * printed at deregistration; under the lock */
	unsigned long st_waited;        /* calls that found their range not read yet */
	long long st_wait_ns, st_copy_ns, st_call_ns;
	long long st_last_end;          /* when the last served call returned */
	long long st_gap_ns;            /* between a served call's return and the next */
};

static atomic_int ra_stats = -1; /* OPENDS_RA_STATS read once: 1 on */

static bool stats_on(void)
{
	int v = atomic_load_explicit(&ra_stats, memory_order_relaxed);
	if (v < 0) {
		const char *e = getenv("OPENDS_RA_STATS");
		v = e && !strcmp(e, "1");
		atomic_store_explicit(&ra_stats, v, memory_order_relaxed);
	}
	return v == 1;
}

/* a per-thread address: who made a call */
static _Thread_local char ra_me;

static unsigned bucket(const struct ods_handle *h)
{
	uint64_t k = (uint64_t)h->ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)h->dev;
	return (unsigned)(k >> 32) % NBUCKET;
}

/* ---- library writes ---------------------------------------------------------- */

static void write_done(struct ods_io *io)
{
	unsigned b = (unsigned)io->be_scratch[3];
	io->done = (ods_io_done_fn)io->be_scratch[2];
	atomic_fetch_add(&wb[b].gen, 1);
	atomic_fetch_sub(&wb[b].running, 1);
	io->done(io);
}

/* A write that ends past the end of the file and has more than one chunk
 * gets its range allocated first. ext4 runs an O_DIRECT write that extends
 * the file alone: with the inode lock held exclusively, and it waits for
 * the write to complete before the next may start (XFS also takes its lock
 * exclusively); so the chunks of a write at the end of a file (every write
 * of a file written front to back) reached the disk one at a time, at the
 * disk's one-request speed. Blocks allocated inside the file's size
 * (fallocate mode 0: unwritten extents, read as zeros) are overwritten
 * concurrently. Development VM, ext4, 512 MiB in 1 MiB O_DIRECT pwrites:
 * 2 / 4 / 8 / 16 threads 1.10 / 0.68 / 1.17 / 1.09-1.25 GB/s at the end of
 * the file, 1.52 / 1.54 / 1.80 / 1.86-1.96 allocated first (one thread:
 * 1.11 against 0.61, the extents' conversion on each completion; hence
 * only for writes of several chunks). Best effort: where fallocate is not
 * supported the write runs as before. The size is set before the data is
 * written: a reader meanwhile sees zeros there, and a failed write leaves
 * the size (as a failed chunk behind a written one already did). The
 * allocation is made when the engine starts the write (stage_queue.c), not
 * at submission: a batch entry cancelled before it started must leave the
 * file as it was (the differential test found a cancelled write's range
 * allocated, the file 2 MiB where the oracle's was 1.7). A synchronous
 * write, which nothing cancels, is allocated at submission. */
#define ALLOCATE_MIN ((size_t)1 << 20)

void ods_ra_write_allocate(const struct ods_io *io)
{
	struct stat st;
	if (fstat(io->fh->fd, &st) != 0 || !S_ISREG(st.st_mode) || io->off + (off_t)io->size <= st.st_size)
		return;
	if (fallocate(io->fh->fd, 0, io->off, (off_t)io->size) != 0) {
		/* EOPNOTSUPP, EBADF (a read-only fd: the write says so), ENOSPC
		 * (the write says so): written as before */
	}
}

void ods_ra_write_begin(struct ods_io *io)
{
	if (io->fh->src)
		return;
	/* A synchronous write cannot be cancelled: its range is allocated
	 * before any worker sees it (allocated by the first worker that takes
	 * a chunk, the chunks others took meanwhile extend the file one at a
	 * time: write16m on the H200 went from 1.09x cuFile to 0.91x). The
	 * others (a batch entry can be cancelled) when the engine starts them. */
	if (io->size > ALLOCATE_MIN && !io->fh->blockdev && !ods_stage_write_caller_ok(io)) {
		if (io->sync)
			ods_ra_write_allocate(io);
		else
			io->allocate = true;
	}
	unsigned b = bucket(io->fh);
	atomic_fetch_add(&wb[b].running, 1);
	atomic_fetch_add(&wb[b].gen, 1);
	io->be_scratch[2] = (uintptr_t)io->done;
	io->be_scratch[3] = b;
	io->done = write_done;
}

unsigned ods_ra_writes_running(const struct ods_io *io)
{
	return atomic_load(&wb[bucket(io->fh)].running);
}

/* ---- the state ---------------------------------------------------------------- */

static struct ra *ra_get(struct ods_handle *h)
{
	struct ra *r = atomic_load_explicit(&h->ra, memory_order_acquire);
	if (r)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	r->next = -1;
	void *expected = NULL;
	if (!atomic_compare_exchange_strong(&h->ra, &expected, r)) {
		pthread_mutex_destroy(&r->lock);
		free(r);
		return expected;
	}
	return r;
}

enum { S_RUN, S_SLEEPER, S_DONE };

/* (a worker) the read is over: a system call only when the caller sleeps */
static void ra_io_done(struct ods_io *io)
{
	struct slot *x = io->owner;
	if (atomic_exchange_explicit(&x->done, S_DONE, memory_order_acq_rel) == S_SLEEPER)
		ods_futex_wake_all(&x->done);
}

static long long mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* A sequential reader that reads faster than the file is read ahead waits
 * here on every call for the range it asks for: spinning a while first
 * starts its copy the moment the read ends, where a futex sleep added the
 * wake-up (tens of microseconds on a virtual machine) to each call. */
#define RA_SPIN_NS (50 * 1000LL)

static void slot_wait(struct slot *x)
{
	unsigned s = atomic_load_explicit(&x->done, memory_order_acquire);
	if (s == S_DONE)
		return;
	long long t0 = mono_ns();
	for (unsigned i = 1; s != S_DONE; i++) {
		ods_cpu_relax();
		s = atomic_load_explicit(&x->done, memory_order_acquire);
		if ((i & 63) == 0 && mono_ns() - t0 > RA_SPIN_NS)
			break;
	}
	while (s != S_DONE) {
		if (s == S_RUN) {
			if (!atomic_compare_exchange_weak_explicit(&x->done, &s, S_SLEEPER, memory_order_acq_rel,
								   memory_order_acquire))
				continue;
			s = S_SLEEPER;
		}
		ods_futex_wait(&x->done, s);
		s = atomic_load_explicit(&x->done, memory_order_acquire);
	}
}

/* wait for every read started and forget them */
static void drain(struct ra *r)
{
	for (unsigned i = 0; i < RA_BUFS; i++) {
		if (r->sl[i].pending)
			slot_wait(&r->sl[i]);
		r->sl[i].pending = false;
	}
	r->npending = 0;
}

/* The buffers of the last handle that read ahead, kept for the next one
 * (a handle per file read once is the common shape: seq16m registers,
 * reads 8 GiB and deregisters): pinning 3 x 16 MiB of fresh memory
 * (page faults, zeroing, cuMemHostRegister) and unpinning it at the end
 * cost a few milliseconds per handle, in the reader's calls. One set, with
 * its share of the staging budget still reserved; given back when an
 * engine opens or closes (ods_ra_keep_drop: then the budget is wanted, or
 * the driver closes). OPENDS_RA_KEEP=0: freed with each handle (A/B). */
static struct {
	pthread_mutex_t lock;
	char *buf[RA_BUFS];
	size_t cap;  /* 0: none kept */
	unsigned nb;
	bool pinned;
} keep = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void set_free(char *const *buf, unsigned nb, size_t cap, bool pinned)
{
	for (unsigned i = 0; i < nb; i++) {
		if (!buf[i])
			continue;
		if (pinned)
			ods_drv.accel->mem->pinned_free(buf[i], cap);
		else
			free(buf[i]);
	}
	if (cap)
		ods_pinned_release(nb * cap);
}

void ods_ra_keep_drop(void)
{
	pthread_mutex_lock(&keep.lock);
	char *buf[RA_BUFS];
	memcpy(buf, keep.buf, sizeof(buf));
	size_t cap = keep.cap;
	unsigned nb = keep.nb;
	bool pinned = keep.pinned;
	memset(keep.buf, 0, sizeof(keep.buf));
	keep.cap = 0;
	pthread_mutex_unlock(&keep.lock);
	set_free(buf, nb, cap, pinned);
}

bool ods_ra_keep_reclaim(void)
{
	pthread_mutex_lock(&keep.lock);
	bool held = keep.cap != 0;
	pthread_mutex_unlock(&keep.lock);
	if (held)
		ods_ra_keep_drop();
	return held;
}

void ods_ra_keep_forget(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	keep.lock = fresh;
	memset(keep.buf, 0, sizeof(keep.buf)); /* (the parent's, leaked in the child) */
	keep.cap = 0;
}

static bool keep_on(void)
{
	const char *v = getenv("OPENDS_RA_KEEP");
	return !(v && !strcmp(v, "0"));
}

/* give r's buffers back: kept for the next handle (parking) or freed */
static void bufs_release(struct ra *r, bool parking)
{
	if (!r->cap)
		return;
	char *buf[RA_BUFS];
	for (unsigned i = 0; i < RA_BUFS; i++) {
		buf[i] = r->sl[i].buf;
		r->sl[i].buf = NULL;
	}
	size_t cap = r->cap;
	unsigned nb = r->nb;
	r->cap = 0;
	if (parking && keep_on()) {
		pthread_mutex_lock(&keep.lock);
		if (!keep.cap) {
			memcpy(keep.buf, buf, sizeof(buf));
			keep.cap = cap;
			keep.nb = nb;
			keep.pinned = r->pinned;
			cap = 0;
		}
		pthread_mutex_unlock(&keep.lock);
		if (!cap)
			return;
	}
	set_free(buf, nb, cap, r->pinned);
}

/* the kept set, when it has nb buffers of n bytes and not more than 4 x n */
static bool keep_take(struct ra *r, unsigned nb, size_t n, bool pinned)
{
	bool took = false;
	pthread_mutex_lock(&keep.lock);
	if (keep.cap >= n && keep.cap / 4 <= n && keep.nb == nb && keep.pinned == pinned) {
		for (unsigned i = 0; i < RA_BUFS; i++)
			r->sl[i].buf = keep.buf[i];
		memset(keep.buf, 0, sizeof(keep.buf));
		r->cap = keep.cap;
		r->nb = nb;
		r->pinned = pinned;
		keep.cap = 0;
		took = true;
	}
	pthread_mutex_unlock(&keep.lock);
	return took;
}

/* every buffer of at least n bytes (rounded to pages), within the budget;
 * nothing pending */
static bool bufs_get(struct ra *r, size_t n)
{
	unsigned nb = atomic_load_explicit(&ra_depth, memory_order_relaxed) + 1;
	n = (n + 4095) & ~(size_t)4095;
	/* (a handle keeps the number of buffers it got: the one the caller
	 * copies from may be any of them) */
	if (r->cap >= n)
		return true;
	bufs_release(r, false);
	r->head = 0;
	const struct ods_accel_mem *m = ods_drv.accel->mem;
	if (!r->refused && keep_take(r, nb, n, m && m->pinned_alloc))
		return true;
	/* at most half of what is left: read-ahead is opportunistic, and an
	 * engine opened later (a source's) needs its staging (rel's finding:
	 * four handles reading ahead took all of a 1 MiB budget) */
	/* (the kept set, of another size, gives its budget back first) */
	bool fits = !r->refused && nb * n <= ods_pinned_left() / 2 && ods_pinned_reserve(nb * n);
	if (!fits && !r->refused && ods_ra_keep_reclaim())
		fits = nb * n <= ods_pinned_left() / 2 && ods_pinned_reserve(nb * n);
	if (!fits) {
		r->refused = true;
		return false;
	}
	r->pinned = m && m->pinned_alloc;
	r->cap = n;
	r->nb = nb;
	for (unsigned i = 0; i < nb; i++) {
		r->sl[i].buf = r->pinned ? m->pinned_alloc(n) : ods_aligned_alloc(n);
		if (!r->sl[i].buf) {
			bufs_release(r, false);
			r->refused = true;
			return false;
		}
	}
	return true;
}

static long long ts_ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_size == b->st_size && ts_ns(&a->st_mtim) == ts_ns(&b->st_mtim) &&
	       ts_ns(&a->st_ctim) == ts_ns(&b->st_ctim);
}

/* ---- reading ahead -------------------------------------------------------------- */

/* Start reading [r->ahead, +len) into the next free slot, behind whatever
 * is queued; false when it may not (a library write of the file running,
 * the file changed too recently, past its end, no memory). Lock held. */
static bool start(struct ods_handle *h, struct ra *r, size_t len)
{
	unsigned b = bucket(h);
	if ((r->nb && r->npending >= r->nb - 1) || atomic_load(&wb[b].running))
		return false; /* (a library write to the file may be running) */
	uint64_t gen = atomic_load(&wb[b].gen);
	struct stat st;
	struct timespec now;
	off_t off = r->ahead;
	if (fstat(h->fd, &st) != 0 || off >= st.st_size || clock_gettime(CLOCK_REALTIME, &now) != 0)
		return false;
	long long n = ts_ns(&now);
	if (n - ts_ns(&st.st_mtim) < RA_QUIET_NS || n - ts_ns(&st.st_ctim) < RA_QUIET_NS)
		return false; /* changed too recently to tell a later change by its times */
	if (r->npending == 0 && !bufs_get(r, len))
		return false;
	if (len > r->cap)
		return false;
	struct slot *x = &r->sl[(r->head + r->npending) % r->nb];
	x->gen = gen;
	x->st = st;
	x->off = off;
	x->len = len;
	x->pending = true;
	r->npending++;
	r->ahead = off + (off_t)len;
	atomic_store_explicit(&x->done, S_RUN, memory_order_relaxed);
	struct ods_io *io = &x->io;
	memset(io, 0, sizeof(*io));
	io->fh = h;
	io->buf = x->buf;
	io->size = len;
	io->off = off;
	io->opcode = OPENDS_READ;
	io->mem = ODS_MEM_HOST;
	io->done = ra_io_done;
	io->owner = x;
	ods_io_submit(io, false);
	return true;
}

static bool enabled(const struct ods_io *io)
{
	struct ods_handle *h = io->fh;
	/* (reads the backend runs inline never get here) */
	return !ods_drv.cfg.no_readahead && !h->blockdev && !h->src && io->mem == ODS_MEM_DEVICE &&
	       io->size <= RA_MAX &&
	       atomic_load_explicit(&h->advice, memory_order_relaxed) != OPENDS_ADVICE_RANDOM;
}

/* The oldest read ahead, if it is this call's range and still good: the
 * bytes to copy from x->buf, else -1 (everything ahead dropped). */
static ssize_t usable(struct ods_handle *h, struct ra *r, const struct ods_io *io, struct slot **xp)
{
	if (!r->npending)
		return -1;
	struct slot *x = &r->sl[r->head];
	if (x->off != io->off || io->size > x->len) {
		drain(r); /* not the pattern it was read for */
		return -1;
	}
	if (stats_on() && atomic_load_explicit(&x->done, memory_order_acquire) != S_DONE) {
		long long t0 = mono_ns();
		slot_wait(x);
		r->st_waited++;
		r->st_wait_ns += mono_ns() - t0;
	}
	slot_wait(x);
	ssize_t got = x->io.result;
	struct stat st;
	if (got < 0 || atomic_load(&wb[bucket(h)].gen) != x->gen || fstat(h->fd, &st) != 0 ||
	    !same_file(&st, &x->st)) {
		drain(r); /* failed, or the file changed since: read it anew */
		return -1;
	}
	x->pending = false;
	r->head = (r->head + 1) % r->nb;
	r->npending--;
	*xp = x;
	return (size_t)got < io->size ? got : (ssize_t)io->size;
}

/* Copy the n bytes of x to the caller while the ranges after it are read.
 * The copy is queued first where the layer splits copies in two: queuing
 * the next reads costs the caller tens of microseconds (a stat, the
 * request, waking the workers that sleep), which then pass during the copy
 * instead of before it, where a sequential reader paid them on every call
 * (on a GPU a 16 MiB call's copy takes about 300 us). Lock held. */
static int copy_and_start(struct ods_handle *h, struct ra *r, const struct ods_io *io, struct slot *x, size_t n)
{
	const struct ods_accel *a = ods_drv.accel;
	bool more = io->size == x->len && n == io->size;
	struct ods_copy_op op;
	int rc = 0;
	bool split = n && a->copy_to_device_begin && a->copy_end;
	if (split && (rc = a->copy_to_device_begin(io->dev, io->buf, x->buf, n, &op)))
		split = false; /* nothing to end */
	if (more)
		while (start(h, r, io->size))
			;
	if (split)
		return a->copy_end(&op);
	if (rc)
		return rc;
	return n ? ods_io_to_device(io, io->buf, x->buf, n) : 0;
}

ssize_t ods_ra_take(struct ods_io *io)
{
	if (!enabled(io))
		return ODS_NOT_INLINE;
	struct ods_handle *h = io->fh;
	struct ra *r = ra_get(h);
	if (!r || pthread_mutex_trylock(&r->lock) != 0)
		return ODS_NOT_INLINE; /* another thread is reading this handle: no pattern to follow */
	struct slot *x = NULL;
	long long t0 = stats_on() ? mono_ns() : 0;
	ssize_t n = usable(h, r, io, &x);
	if (n >= 0) {
		long long t1 = t0 ? mono_ns() : 0;
		int rc = copy_and_start(h, r, io, x, (size_t)n);
		if (t0) {
			long long t2 = mono_ns();
			r->st_copy_ns += t2 - t1;
			r->st_call_ns += t2 - t0;
			if (r->st_last_end)
				r->st_gap_ns += t0 - r->st_last_end;
			r->st_last_end = t2;
		}
		r->next = io->off + (off_t)n;
		r->last = io->size;
		r->streak++;
		r->caller = &ra_me;
		atomic_fetch_add_explicit(&r->served, 1, memory_order_relaxed);
		pthread_mutex_unlock(&r->lock);
		return rc ? -rc : n;
	}
	bool seq = io->off == r->next && io->size == r->last && r->caller == &ra_me;
	r->caller = &ra_me;
	r->streak = seq ? r->streak + 1 : 0;
	r->next = io->off + (off_t)io->size;
	r->last = io->size;
	atomic_store_explicit(&r->want,
			      r->streak >= 1 || atomic_load_explicit(&h->advice, memory_order_relaxed) ==
							OPENDS_ADVICE_SEQUENTIAL,
			      memory_order_relaxed);
	pthread_mutex_unlock(&r->lock);
	return ODS_NOT_INLINE;
}

void ods_ra_behind(struct ods_io *io)
{
	struct ra *r = atomic_load_explicit(&io->fh->ra, memory_order_acquire);
	if (!r || !atomic_load_explicit(&r->want, memory_order_relaxed))
		return;
	pthread_mutex_lock(&r->lock);
	if (atomic_exchange_explicit(&r->want, false, memory_order_relaxed) && r->npending == 0 &&
	    r->next == io->off + (off_t)io->size) {
		r->ahead = r->next;
		while (start(io->fh, r, io->size))
			;
	}
	pthread_mutex_unlock(&r->lock);
}

unsigned long ods_ra_served(struct ods_handle *h)
{
	struct ra *r = atomic_load_explicit(&h->ra, memory_order_acquire);
	return r ? atomic_load_explicit(&r->served, memory_order_relaxed) : 0;
}

void ods_ra_handle_close(struct ods_handle *h)
{
	struct ra *r = atomic_load_explicit(&h->ra, memory_order_acquire);
	if (!r)
		return;
	unsigned long sv = atomic_load(&r->served);
	if (stats_on() && sv) {
		double k = 1e-3 / (double)sv;
		fprintf(stderr,
			"opends read-ahead stats: %lu calls served, %lu waited for their range (%.1f us each on average over "
			"all served), in the call %.1f us (copy and next reads queued %.1f us), between calls %.1f us\n",
			sv, r->st_waited, (double)r->st_wait_ns * k, (double)r->st_call_ns * k, (double)r->st_copy_ns * k,
			sv > 1 ? (double)r->st_gap_ns * 1e-3 / (double)(sv - 1) : 0.0);
	}
	drain(r);
	bufs_release(r, true);
	pthread_mutex_destroy(&r->lock);
	free(r);
	h->ra = NULL;
}

/* ---- the hint --------------------------------------------------------------------- */

OPENDS_API opends_error_t opends_handle_advise(opends_handle_t fh, int advice)
{
	ODS_ENTER("opends_handle_advise");
	if (!fh)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_handle_advise: fh is NULL"), 0);
	if (advice != OPENDS_ADVICE_NORMAL && advice != OPENDS_ADVICE_SEQUENTIAL && advice != OPENDS_ADVICE_RANDOM)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_handle_advise: advice %d is not OPENDS_ADVICE_NORMAL, _SEQUENTIAL or _RANDOM",
					advice),
			       0);
	struct ods_handle *h = ods_handle_lookup(fh);
	if (!h)
		return ods_err(ods_fail(OPENDS_HANDLE_NOT_REGISTERED, "opends_handle_advise: fh is not a registered handle"),
			       0);
	atomic_store_explicit(&h->advice, advice, memory_order_relaxed);
	return ods_ok();
}
