/*
 * The io_uring backend: a staging pipeline that overlaps storage reads with
 * copies into accelerator memory.
 *
 * Threads and queues
 *   Requests (struct ods_io) go on one bounded FIFO shared by N workers
 *   (OPENDS_IO_THREADS). A worker with a free unit takes the next *chunk*
 *   of the oldest request, so one large request is spread over every
 *   worker (memory-speed sources need many threads: one io_uring thread
 *   reads tmpfs at 3-4 GB/s) while small requests go to one worker each.
 *   A request completes when its last chunk does. The FIFO holds at most
 *   threads x depth requests; submitters that may block wait for room,
 *   the others (completion callbacks chaining stream operations) never
 *   wait.
 *
 * Per worker
 *   Its own ring (no locking on submission), an eventfd kept armed in the
 *   ring so one io_uring_enter sleeps on "new work" and "I/O finished" at
 *   once, and OPENDS_QUEUE_DEPTH units. Unit i owns bounce slot i
 *   (OPENDS_CHUNK_SIZE bytes, page-aligned, pinned by the accelerator and
 *   registered with the ring as fixed buffer i) and fence i on the
 *   worker's copy lane (a stream). Slots are allocated on first use, so
 *   host-only work never pays for pinned memory.
 *
 * A read chunk: storage -> slot (O_DIRECT, the covering aligned blocks) ->
 *   async copy of only the caller's bytes -> fence; the unit (and its slot)
 *   is free again only when its fence is reached, so the read of chunk k+1
 *   overlaps the copy of chunk k. Host destinations skip the slot where
 *   possible: O_DIRECT straight into the caller's memory when the chunk and
 *   the memory are block-aligned and the chunk ends before the block that
 *   holds EOF (O_DIRECT fills whole blocks, which would write past the
 *   bytes returned); buffered reads always go straight in.
 * Hot or cold: before each read chunk, cachestat(2) asks whether every
 *   page of the range is in the page cache. If so the chunk is read
 *   buffered (a memory copy, run by the ring's kernel workers when large:
 *   see HOT_ASYNC_MIN); if not, with O_DIRECT (which
 *   would otherwise go to the disk even for cached pages, flushing dirty
 *   ones first). cachestat has no side effects, unlike a RWF_NOWAIT probe,
 *   which starts readahead on a miss and so would double-read cold data.
 *   Without cachestat (kernels before 6.5) every chunk is treated as cold.
 * A write chunk: source -> slot (async device-to-host copy, fence) ->
 *   O_DIRECT write. The chunker cuts partial blocks off into chunks of
 *   their own, written through the buffered twin fd so the kernel merges
 *   them under its page locks and concurrent writers to other bytes of the
 *   block lose nothing (as ref does).
 * Files are not registered with the rings: handles come and go on any
 *   thread while each ring belongs to its worker, and for chunks of a MiB
 *   the fd lookup registration saves is noise.
 * Corner cases that need the POSIX path's read-modify-write (a partial-block
 *   write on a handle without any buffered fd) are handed to it whole
 *   (src/core/posix_io.c), on a worker.
 *
 * Layers without async copies (host, hostdev) run this same pipeline: the
 * copy is recorded and performed when the worker asks whether it is done,
 * and the first such question always answers "not yet", so the waiting
 * states, slot reuse and ordering are exercised in CI without a GPU.
 */
#include <limits.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ods.h"

#define A ((off_t)ODS_ALIGN)

/* Defaults when the variable is unset, from the H200 machine (4 GiB into
 * GPU memory, same run): cold ext4 read 1.81 / 2.22 / 1.90 GB/s with 4 / 8
 * / 12 workers (the raw 8-thread O_DIRECT pread ceiling was 1.25 GB/s).
 * So half the CPUs, at least 4 and at most 8: the disk's best, and half
 * the machine left to the application; memory-speed sources get their
 * extra threads from the kernel (HOT_ASYNC_MIN below).
 * Depth 16 x 1 MiB: 16 MiB in flight per worker keeps a disk queue full.
 * Hot 4 GiB into GPU memory (8 workers, same run): 1 MiB chunks 44-45 GB/s,
 * 2 MiB 37-39, 4 MiB 36-38 (the pinned copy ceiling: 51 GB/s at 2 MiB
 * copies, 55 at 64 MiB); smaller chunks spread one request over more
 * copy threads, and the copies still run near the ceiling. */
#define MIN_THREADS 4u
#define MAX_THREADS 8u
#define DEF_DEPTH 16u
#define DEF_CHUNK ((size_t)1 << 20)
/* A buffered read of cached pages is a memory copy done by whichever
 * thread runs it: inline, by the worker inside io_uring_enter. One thread
 * copies a few GB/s, so while more work is queued behind it, a read of at
 * least this size is sent to the ring's kernel workers (IOSQE_ASYNC),
 * capped so that the copying threads of all rings together about match
 * the CPUs. The last chunk taken (nothing queued behind it) runs inline:
 * then there is nothing to overlap it with, and the hand-offs to a kernel
 * thread and back cost a lone 1 MiB read about half its time (2-core
 * development VM: 259 us per call handed off, 168 us inline; pread 100).
 * Measured on the H200, hot 4 GiB into GPU memory with 8 workers and
 * 1 MiB chunks: 31-40 GB/s inline, 44-45 GB/s with 2 (or 4) kernel
 * workers per ring. Smaller reads stay
 * inline: the hand-off to a kernel thread costs about 8 us, a 4 KiB copy
 * far less (4 KiB into GPU memory, p50: 21 us inline, 30 us handed off).
 *
 * A worker keeps at most as many reads of cached ranges in its ring as it
 * has kernel workers: more only wait there, while the chunks they hold
 * could have gone to a worker with idle threads, and an idle worker with
 * nothing left in the queue waits for the caller's next request. The
 * rest of its units still serve cold reads, which need the queue depth.
 * H200, hot 8 GiB into GPU memory in 16 MiB cuFileRead calls from 8
 * threads (drop-in): 0.65-0.74x the pinned copy ceiling without the
 * limit, 0.80-0.83 at 3 per worker, 0.81-0.84 at 2 (the kernel workers)
 * in 14 of 15 runs; one thread reading 1 GiB per call: 0.78-0.79
 * without, 0.82 with (bench/results/2026-11-29-h200-d/NOTES.md). */
#define HOT_ASYNC_MIN ((size_t)256 << 10)
/* An idle worker spins this long before sleeping: a caller issuing
 * synchronous reads back to back submits the next one within a few
 * microseconds, and a spinning worker takes it without an eventfd write
 * and a wake-up (several microseconds each). */
#define DEF_SPIN_US 50
#define MAX_RETRY 64 /* EINTR / EAGAIN / ECANCELED resubmissions per chunk */
#define WAKE_TAG ((uint64_t)1) /* user_data of the eventfd read; units are aligned */

/* ---- requests ----------------------------------------------------------- */

struct ureq {
	struct ods_io *io;
	struct ureq *next;
	off_t pos, end;    /* next byte to hand out (queue lock); end of range */
	off_t fsize;       /* file size at submit, -1 unknown */
	int fd_direct, fd_buf;
	bool started;      /* a chunk was handed out (cancel no longer applies) */
	bool delegate;     /* run whole through the POSIX path on a worker */
	unsigned share;    /* chunks one worker may hold at once (see take_chunk) */
	bool user_direct;  /* host memory aligned with the file: aligned chunks may
			      go straight into it */
	atomic_uint pending;    /* chunks running + 1 while chunks are left */
	atomic_llong short_at;  /* lowest offset where data ended (EOF) */
	atomic_long err;        /* first error, negated; 0 none */
};

/* ---- units and workers -------------------------------------------------- */

enum { U_FREE, U_IO, U_COPY };

struct worker;

struct unit {
	struct worker *w;
	unsigned idx;
	int state;
	struct ureq *r;
	off_t c0, c1;      /* the caller's bytes of this chunk, file offsets */
	bool direct;       /* I/O on the O_DIRECT fd */
	bool slot;         /* I/O goes through this unit's slot */
	bool hot;          /* read buffered because the range is cached: its
			      reads in the ring count in w->nhot */
	int fd;
	off_t io_off;      /* file offset of the I/O */
	size_t io_len, io_done;
	char *io_buf;      /* memory of the I/O (slot or caller's) */
	unsigned retries;
	/* copy recorded for layers without async copies */
	void *cp_dst;
	const void *cp_src;
	size_t cp_n;
	bool cp_to_dev;
	unsigned cp_polls;
	struct unit *next_free;
};

struct worker {
	pthread_t tid;
	unsigned idx;
	struct io_uring ring;
	int efd;
	uint64_t efd_val;
	bool wake_armed;     /* the eventfd read is in the ring */
	atomic_int sleeping; /* blocked in the kernel and able to take work */
	struct unit *units, *free_list;
	unsigned nfree, nio, ncopy;
	unsigned nhot;       /* reads of cached ranges in the ring */
	char *slots;
	bool slots_pinned, slots_fixed, slots_failed;
	bool inline_io;      /* a read that runs inline was queued: submit it now */
	bool more;           /* work was still queued when this chunk was taken */
	struct ureq *held_r; /* the request this worker last took chunks of, */
	unsigned held_n;     /* and how many of them it holds */
	bool declined;       /* left the head request to other workers */
	void *lane;          /* accelerator copy lane, or NULL: recorded copies */
};

static struct {
	const struct ods_accel *accel;
	const struct ods_config *cfg;
	unsigned nthreads, depth, started;
	size_t chunk;
	long spin_us;
	long page;
	struct worker *w;
	pthread_mutex_t lock;
	pthread_cond_t room;
	struct ureq *head, *tail;
	unsigned nreq, cap;
	atomic_uint queued;   /* requests with chunks left; for the sleep handshake */
	atomic_uint wake_rr;  /* where the next wake-up scan starts */
	atomic_bool stop;
	atomic_bool no_cachestat;
	unsigned kworkers;     /* kernel workers per ring for hot reads, and the
				  reads of cached ranges a worker keeps in it */
	unsigned ready;        /* workers done setting up (U.lock) */
	pthread_cond_t ready_cv;
} U;

static bool async_copies(void)
{
	const struct ods_accel *a = U.accel;
	return a->lane_create && a->lane_destroy && a->copy_to_device_async && a->copy_to_host_async &&
	       a->fence_record && a->fence_query && a->fence_wait;
}

/* ---- hot / cold ---------------------------------------------------------- */

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* same number on every architecture (generic table) */
#endif
struct ods_cachestat_range {
	uint64_t off, len;
};
struct ods_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Every page of [c0, c1) that exists in the file is in the page cache. */
static bool range_cached(const struct ureq *r, off_t c0, off_t c1)
{
	if (atomic_load_explicit(&U.no_cachestat, memory_order_relaxed) || r->fsize < 0)
		return false;
	off_t p0 = c0 & ~((off_t)U.page - 1);
	off_t p1 = (c1 < r->fsize ? c1 : r->fsize);
	p1 = (p1 + U.page - 1) & ~((off_t)U.page - 1);
	if (p1 <= p0)
		return true; /* nothing to read: the buffered read returns 0 at once */
	struct ods_cachestat_range rg = { (uint64_t)p0, (uint64_t)(p1 - p0) };
	struct ods_cachestat cs;
	if (syscall(__NR_cachestat, r->fd_buf, &rg, &cs, 0) != 0) {
		if (errno == ENOSYS)
			atomic_store_explicit(&U.no_cachestat, true, memory_order_relaxed);
		return false;
	}
	return cs.nr_cache >= rg.len / (uint64_t)U.page;
}

/* ---- request accounting ------------------------------------------------- */

static void note_err(struct ureq *r, long e)
{
	long zero = 0;
	atomic_compare_exchange_strong(&r->err, &zero, e);
}

static void note_short(struct ureq *r, off_t at)
{
	long long cur = atomic_load(&r->short_at);
	while ((long long)at < cur && !atomic_compare_exchange_weak(&r->short_at, &cur, (long long)at))
		;
}

static void req_put(struct ureq *r)
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
		long long s = atomic_load(&r->short_at);
		res = (ssize_t)((s < (long long)r->end ? (off_t)s : r->end) - io->off);
	}
	free(r);
	ods_io_complete(io, res);
}

/* Next chunk boundary after pos. Reads: the covering aligned blocks of a
 * chunk fit one slot. Writes: partial blocks are chunks of their own (they
 * go buffered), everything else is whole blocks (O_DIRECT). */
static off_t chunk_end_of(const struct ureq *r, off_t pos)
{
	off_t end = r->end, c = (off_t)U.chunk;
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
static size_t chunk_count(const struct ureq *r)
{
	off_t off = r->io->off, c = (off_t)U.chunk;
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

/* caller holds U.lock */
static void pop_head(void)
{
	struct ureq *r = U.head;
	U.head = r->next;
	if (!U.head)
		U.tail = NULL;
	U.nreq--;
	atomic_fetch_sub(&U.queued, 1);
	pthread_cond_signal(&U.room);
}

/* Take the next chunk of the oldest request for w. Returns the request
 * with a chunk reference held, or NULL. *popped: the request has no chunks
 * left and the queue's reference must be dropped after starting this one.
 * A worker holds at most r->share chunks of a request at once: the first
 * worker to wake would otherwise take every chunk its free units allow
 * (16 chunks: all of a 16 MiB request), and the request would be copied
 * by one ring's few threads while the other workers, woken for it, find
 * the queue empty. Declining sets w->declined. */
static struct ureq *take_chunk(struct worker *w, off_t *c0, off_t *c1, bool *popped)
{
	if (!atomic_load_explicit(&U.queued, memory_order_acquire))
		return NULL;
	for (;;) {
		pthread_mutex_lock(&U.lock);
		struct ureq *r = U.head;
		if (!r) {
			pthread_mutex_unlock(&U.lock);
			return NULL;
		}
		if (r == w->held_r && w->held_n >= r->share) {
			pthread_mutex_unlock(&U.lock);
			w->declined = true;
			return NULL;
		}
		if (!r->started) {
			r->started = true;
			if (atomic_load_explicit(&r->io->cancelled, memory_order_acquire)) {
				pop_head();
				pthread_mutex_unlock(&U.lock);
				note_err(r, -ECANCELED);
				req_put(r);
				continue;
			}
		}
		if (r != w->held_r) {
			w->held_r = r;
			w->held_n = 0;
		}
		w->held_n++;
		*c0 = r->pos;
		*c1 = r->delegate ? r->end : chunk_end_of(r, r->pos);
		r->pos = *c1;
		atomic_fetch_add_explicit(&r->pending, 1, memory_order_relaxed);
		*popped = r->pos == r->end;
		if (*popped)
			pop_head();
		pthread_mutex_unlock(&U.lock);
		return r;
	}
}

/* ---- slots and copies ---------------------------------------------------- */

static bool slots_ready(struct worker *w)
{
	if (w->slots)
		return true;
	if (w->slots_failed)
		return false;
	size_t n = (size_t)U.depth * U.chunk;
	char *p = NULL;
	w->slots_pinned = U.accel->pinned_alloc && (p = U.accel->pinned_alloc(n));
	if (!p) {
		/* no accelerator pinning (or it failed): plain pages still work,
		 * the accelerator's copies from them are just slower */
		void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		p = m == MAP_FAILED ? NULL : m;
	}
	if (!p) {
		w->slots_failed = true;
		return false;
	}
	w->slots = p;
	/* Fixed buffers save pinning the pages on every I/O; optional (a low
	 * RLIMIT_MEMLOCK refuses them, and plain reads work the same). */
	struct iovec *iov = calloc(U.depth, sizeof(*iov));
	if (iov) {
		for (unsigned i = 0; i < U.depth; i++) {
			iov[i].iov_base = p + (size_t)i * U.chunk;
			iov[i].iov_len = U.chunk;
		}
		w->slots_fixed = io_uring_register_buffers(&w->ring, iov, U.depth) == 0;
		free(iov);
	}
	return true;
}

static void slots_free(struct worker *w)
{
	if (!w->slots)
		return;
	size_t n = (size_t)U.depth * U.chunk;
	if (w->slots_fixed)
		io_uring_unregister_buffers(&w->ring);
	if (w->slots_pinned)
		U.accel->pinned_free(w->slots, n);
	else
		munmap(w->slots, n);
	w->slots = NULL;
}

static char *slot_of(struct unit *u)
{
	return u->w->slots + (size_t)u->idx * U.chunk;
}

/* Start the copy of a unit; completion is asked with copy_poll. */
static int copy_start(struct unit *u, void *dst, const void *src, size_t n, bool to_dev)
{
	const struct ods_accel *a = U.accel;
	struct worker *w = u->w;
	if (w->lane) {
		int rc = to_dev ? a->copy_to_device_async(w->lane, dst, src, n)
				: a->copy_to_host_async(w->lane, dst, src, n);
		return rc ? rc : a->fence_record(w->lane, u->idx);
	}
	u->cp_dst = dst;
	u->cp_src = src;
	u->cp_n = n;
	u->cp_to_dev = to_dev;
	u->cp_polls = 0;
	return 0;
}

/* 1 done, 0 not yet, or a negated OPENDS_* code. */
static int copy_poll(struct unit *u, bool wait)
{
	const struct ods_accel *a = U.accel;
	struct worker *w = u->w;
	if (w->lane) {
		if (!wait)
			return a->fence_query(w->lane, u->idx);
		int rc = a->fence_wait(w->lane, u->idx);
		return rc ? rc : 1;
	}
	if (!wait && u->cp_polls++ == 0)
		return 0; /* see the header: the pipeline must cope with "not yet" */
	int rc = u->cp_to_dev ? a->copy_to_device(u->cp_dst, u->cp_src, u->cp_n)
			      : a->copy_to_host(u->cp_dst, u->cp_src, u->cp_n);
	return rc ? -rc : 1;
}

/* ---- the chunk state machine --------------------------------------------- */

static void unit_free(struct unit *u)
{
	struct worker *w = u->w;
	u->state = U_FREE;
	u->next_free = w->free_list;
	w->free_list = u;
	w->nfree++;
}

static void chunk_end(struct unit *u, long res)
{
	struct ureq *r = u->r;
	if (r == u->w->held_r)
		u->w->held_n--;
	if (res < 0)
		note_err(r, res);
	unit_free(u);
	req_put(r);
}

static void issue(struct unit *u)
{
	struct worker *w = u->w;
	/* the ring has room for every unit plus the eventfd read */
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	if (!sqe) {
		io_uring_submit(&w->ring);
		sqe = io_uring_get_sqe(&w->ring);
	}
	if (!sqe) { /* the kernel did not take the queue (-EBUSY): give up cleanly */
		chunk_end(u, -EBUSY);
		return;
	}
	char *b = u->io_buf + u->io_done;
	unsigned n = (unsigned)(u->io_len - u->io_done);
	off_t o = u->io_off + (off_t)u->io_done;
	bool fixed = u->slot && w->slots_fixed;
	if (u->r->io->opcode == OPENDS_READ) {
		if (fixed)
			io_uring_prep_read_fixed(sqe, u->fd, b, n, (uint64_t)o, (int)u->idx);
		else
			io_uring_prep_read(sqe, u->fd, b, n, (uint64_t)o);
		w->nhot += u->hot;
		if (!u->direct && n >= HOT_ASYNC_MIN && w->more)
			io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
		else if (!u->direct)
			w->inline_io = true;
	} else {
		if (fixed)
			io_uring_prep_write_fixed(sqe, u->fd, b, n, (uint64_t)o, (int)u->idx);
		else
			io_uring_prep_write(sqe, u->fd, b, n, (uint64_t)o);
	}
	io_uring_sqe_set_data(sqe, u);
	u->state = U_IO;
	w->nio++;
}

static void start_copy_stage(struct unit *u, void *dst, const void *src, size_t n, bool to_dev)
{
	int rc = copy_start(u, dst, src, n, to_dev);
	if (rc) {
		chunk_end(u, -rc);
		return;
	}
	u->state = U_COPY;
	u->w->ncopy++;
}

static void start_read(struct unit *u)
{
	struct ureq *r = u->r;
	struct ods_io *io = r->io;
	bool host = io->mem == ODS_MEM_HOST;
	char *dst = io->buf + (u->c0 - io->off);
	u->direct = r->fd_direct >= 0 && (r->fd_buf < 0 || !range_cached(r, u->c0, u->c1));
	/* (without an O_DIRECT fd, buffered says nothing about the cache) */
	u->hot = !u->direct && r->fd_direct >= 0;
	if (u->direct) {
		u->fd = r->fd_direct;
		if (host && r->user_direct && !(u->c0 & (A - 1)) && !(u->c1 & (A - 1)) &&
		    u->c1 <= ods_align_down(r->fsize)) {
			u->slot = false;
			u->io_off = u->c0;
			u->io_len = (size_t)(u->c1 - u->c0);
			u->io_buf = dst;
		} else {
			u->slot = true;
			u->io_off = ods_align_down(u->c0);
			u->io_len = (size_t)(ods_align_up(u->c1) - u->io_off);
		}
	} else {
		u->fd = r->fd_buf;
		u->slot = !host;
		u->io_off = u->c0;
		u->io_len = (size_t)(u->c1 - u->c0);
		u->io_buf = dst;
	}
	if (u->slot) {
		if (!slots_ready(u->w)) {
			chunk_end(u, -ENOMEM);
			return;
		}
		u->io_buf = slot_of(u);
	}
	issue(u);
}

static void start_write(struct unit *u)
{
	struct ureq *r = u->r;
	struct ods_io *io = r->io;
	char *src = io->buf + (u->c0 - io->off);
	size_t n = (size_t)(u->c1 - u->c0);
	/* the chunker made partial blocks chunks of their own */
	u->direct = r->fd_direct >= 0 && !(u->c0 & (A - 1)) && !(u->c1 & (A - 1));
	u->fd = u->direct ? r->fd_direct : r->fd_buf;
	u->io_off = u->c0;
	u->io_len = n;
	bool host = io->mem == ODS_MEM_HOST;
	u->slot = !host || (u->direct && ((uintptr_t)src & (A - 1)));
	if (!u->slot) {
		u->io_buf = src;
		issue(u);
		return;
	}
	if (!slots_ready(u->w)) {
		chunk_end(u, -ENOMEM);
		return;
	}
	u->io_buf = slot_of(u);
	if (host) {
		memcpy(u->io_buf, src, n);
		issue(u);
	} else {
		start_copy_stage(u, u->io_buf, src, n, false);
	}
}

static void start_chunk(struct worker *w, struct ureq *r, off_t c0, off_t c1)
{
	struct unit *u = w->free_list;
	w->free_list = u->next_free;
	w->nfree--;
	u->r = r;
	u->c0 = c0;
	u->c1 = c1;
	u->io_done = 0;
	u->retries = 0;
	u->hot = false;
	if (r->delegate) {
		ssize_t res = ods_posix_rw(r->io);
		if (res >= 0 && r->io->opcode == OPENDS_READ && (size_t)res < r->io->size)
			note_short(r, r->io->off + (off_t)res);
		chunk_end(u, res < 0 ? (long)res : 0);
		return;
	}
	if (r->io->opcode == OPENDS_READ)
		start_read(u);
	else
		start_write(u);
}

/* The read I/O of a unit is over (complete, or short at EOF). */
static void read_io_done(struct unit *u)
{
	struct ureq *r = u->r;
	struct ods_io *io = r->io;
	off_t have = u->io_off + (off_t)u->io_done;
	off_t stop = have < u->c1 ? have : u->c1;
	size_t got = stop > u->c0 ? (size_t)(stop - u->c0) : 0;
	if (got < (size_t)(u->c1 - u->c0))
		note_short(r, u->c0 + (off_t)got);
	if (!u->slot || !got) {
		chunk_end(u, 0);
		return;
	}
	char *src = u->io_buf + (u->c0 - u->io_off);
	char *dst = io->buf + (u->c0 - io->off);
	if (io->mem == ODS_MEM_HOST) {
		memcpy(dst, src, got);
		chunk_end(u, 0);
		return;
	}
	start_copy_stage(u, dst, src, got, true);
}

/* O_DIRECT refused for this range (a device with a larger logical block,
 * a file system that refuses it here): redo the chunk buffered. */
static void to_buffered(struct unit *u)
{
	struct ureq *r = u->r;
	u->direct = false;
	u->hot = false;
	u->fd = r->fd_buf;
	if (r->io->opcode == OPENDS_READ) {
		u->io_off = u->c0;
		u->io_len = (size_t)(u->c1 - u->c0);
		u->io_done = 0;
		if (!u->slot)
			u->io_buf = r->io->buf + (u->c0 - r->io->off);
	}
	/* writes: the data already sits at io_buf for [io_off, +io_len) */
}

static void on_cqe(struct unit *u, int res)
{
	struct worker *w = u->w;
	bool rd = u->r->io->opcode == OPENDS_READ;
	w->nio--;
	w->nhot -= u->hot; /* (hot changes only below, after this) */
	if (res < 0) {
		if ((res == -EINTR || res == -EAGAIN || res == -ECANCELED) && ++u->retries < MAX_RETRY) {
			issue(u);
			return;
		}
		if (res == -EINVAL && u->direct && u->r->fd_buf >= 0) {
			to_buffered(u);
			issue(u);
			return;
		}
		chunk_end(u, res);
		return;
	}
	if (res == 0) {
		if (rd)
			read_io_done(u);
		else
			chunk_end(u, -EIO); /* a write that moves nothing would loop */
		return;
	}
	u->io_done += (size_t)res;
	/* Short transfers continue where they stopped. An O_DIRECT read that
	 * ends off a block boundary is EOF when the file ends there; else (a
	 * file system returning short reads) the rest is read buffered, since
	 * a direct read cannot start at an unaligned offset. */
	if (u->io_done < u->io_len && rd && u->direct && (res & (A - 1))) {
		off_t at = u->io_off + (off_t)u->io_done;
		if (u->r->fsize < 0 || at >= u->r->fsize) {
			read_io_done(u);
			return;
		}
		if (u->r->fd_buf < 0) {
			chunk_end(u, -EIO);
			return;
		}
		u->direct = false;
		u->fd = u->r->fd_buf;
	}
	if (u->io_done < u->io_len) {
		issue(u);
		return;
	}
	if (rd)
		read_io_done(u);
	else
		chunk_end(u, 0);
}

static void arm_wake(struct worker *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	if (!sqe) {
		io_uring_submit(&w->ring);
		sqe = io_uring_get_sqe(&w->ring);
	}
	w->wake_armed = sqe != NULL; /* if not, the worker naps instead of sleeping */
	if (!sqe)
		return;
	io_uring_prep_read(sqe, w->efd, &w->efd_val, sizeof(w->efd_val), 0);
	io_uring_sqe_set_data64(sqe, WAKE_TAG);
}

static bool reap(struct worker *w)
{
	bool any = false;
	struct io_uring_cqe *cqe;
	while (io_uring_peek_cqe(&w->ring, &cqe) == 0) {
		uint64_t tag = cqe->user_data;
		int res = cqe->res;
		io_uring_cqe_seen(&w->ring, cqe);
		any = true;
		if (tag == WAKE_TAG)
			arm_wake(w);
		else
			on_cqe((struct unit *)(uintptr_t)tag, res);
	}
	return any;
}

static bool poll_copies(struct worker *w, bool wait_one)
{
	bool any = false;
	for (unsigned i = 0; i < U.depth && w->ncopy; i++) {
		struct unit *u = &w->units[i];
		if (u->state != U_COPY)
			continue;
		int q = copy_poll(u, wait_one && !any);
		if (q == 0)
			continue;
		any = true;
		w->ncopy--;
		if (q < 0)
			chunk_end(u, q);
		else if (u->r->io->opcode == OPENDS_READ)
			chunk_end(u, 0);
		else
			issue(u); /* the slot holds the data: write it */
	}
	return any;
}

static bool fill(struct worker *w)
{
	bool any = false;
	off_t c0, c1;
	bool popped;
	struct ureq *r;
	w->declined = false;
	while (w->nfree) {
		if (w->nhot >= U.kworkers) {
			/* enough cached reads here (see HOT_ASYNC_MIN): leave
			 * the rest to other workers; completions wake this one */
			w->declined = true;
			break;
		}
		if (!(r = take_chunk(w, &c0, &c1, &popped)))
			break;
		w->more = atomic_load_explicit(&U.queued, memory_order_relaxed) != 0;
		start_chunk(w, r, c0, c1);
		if (popped)
			req_put(r);
		any = true;
		/* A small buffered read of cached pages completes inside
		 * io_uring_enter, on this thread. Submitted in a batch, the
		 * worker would read every chunk before starting any copy; one
		 * at a time, the copy of chunk k runs while chunk k+1 is read. */
		if (w->inline_io) {
			w->inline_io = false;
			io_uring_submit(&w->ring);
			reap(w);
		}
	}
	return any;
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct ods_accel *a = U.accel;
	ods_pin_worker(U.cfg, w->idx);
	/* Without a context the lane cannot be made; copies then run
	 * synchronously (recorded), which is slower but correct. */
	if ((!a->thread_attach || a->thread_attach() == 0) && async_copies())
		w->lane = a->lane_create(U.depth);
	/* With a real accelerator, pin the slots now: registering memory
	 * later, while a caller's stream waits on an operation of ours, could
	 * meet an implicit device synchronisation; and the first transfer
	 * should not pay for it. Without one, slots come on first use. */
	if (a->pinned_alloc)
		slots_ready(w);
	pthread_mutex_lock(&U.lock);
	U.ready++;
	pthread_cond_broadcast(&U.ready_cv);
	pthread_mutex_unlock(&U.lock);
	arm_wake(w);
	bool spinning = false;
	double spin_t0 = 0;
	for (;;) {
		bool progress = fill(w);
		if (io_uring_sq_ready(&w->ring))
			io_uring_submit(&w->ring);
		progress |= reap(w);
		if (w->ncopy)
			progress |= poll_copies(w, false);
		if (progress) {
			spinning = false;
			continue;
		}
		if (atomic_load(&U.stop) && w->nfree == U.depth && !atomic_load(&U.queued))
			break;
		if (w->ncopy) {
			if (!w->nio) {
				poll_copies(w, true); /* only copies left: block on one */
			} else {
				/* I/O and copies: the next copy of a chunk takes tens
				 * of microseconds; look again after about that */
				struct __kernel_timespec ts = { 0, 20000 };
				struct io_uring_cqe *cqe;
				io_uring_wait_cqe_timeout(&w->ring, &cqe, &ts);
			}
			continue;
		}
		if (U.spin_us) {
			if (!spinning) {
				spinning = true;
				spin_t0 = now_us();
			}
			if (U.spin_us < 0 || now_us() - spin_t0 < (double)U.spin_us) {
				ods_cpu_relax();
				continue;
			}
		}
		/* Sleep until an I/O finishes or a submitter writes the eventfd.
		 * Dekker handshake with uring_submit: sleeping is published
		 * before looking at the queue, the queue before looking at
		 * sleeping. */
		if (w->nfree && w->nhot < U.kworkers) {
			/* a worker that declined the head request holds chunks of
			 * it, and their completions wake it (one at its limit of
			 * cached reads is not free: it waits for those) */
			atomic_store(&w->sleeping, 1);
			if ((atomic_load(&U.queued) && !w->declined) || atomic_load(&U.stop)) {
				atomic_store(&w->sleeping, 0);
				continue;
			}
		}
		if (!w->wake_armed)
			arm_wake(w);
		if (w->wake_armed) {
			io_uring_submit_and_wait(&w->ring, 1);
		} else {
			struct __kernel_timespec ts = { 0, 1000000 };
			struct io_uring_cqe *cqe;
			io_uring_submit(&w->ring);
			io_uring_wait_cqe_timeout(&w->ring, &cqe, &ts);
		}
		atomic_store(&w->sleeping, 0);
		spinning = false;
	}
	slots_free(w);
	if (w->lane)
		a->lane_destroy(w->lane);
	w->lane = NULL;
	if (a->thread_detach)
		a->thread_detach();
	return NULL;
}

/* ---- the backend ----------------------------------------------------------- */

static void wake_workers(unsigned n)
{
	unsigned start = atomic_fetch_add_explicit(&U.wake_rr, 1, memory_order_relaxed);
	for (unsigned i = 0; i < U.nthreads && n; i++) {
		struct worker *w = &U.w[(start + i) % U.nthreads];
		if (atomic_load_explicit(&w->sleeping, memory_order_relaxed) && atomic_exchange(&w->sleeping, 0)) {
			uint64_t one = 1;
			if (write(w->efd, &one, sizeof(one)) < 0) {
				/* eventfd writes only fail on counter overflow, i.e.
				 * the worker is being woken already */
			}
			n--;
		}
	}
}

/* FUSE completes a short asynchronous write as -EIO (its aio path cannot
 * return a short count for writes), where pwrite gets the short count and
 * goes on; writes to FUSE files therefore go through pwrite. */
static bool on_fuse(int fd)
{
	struct statfs sf;
	return fstatfs(fd, &sf) == 0 && sf.f_type == 0x65735546; /* FUSE_SUPER_MAGIC */
}

static void uring_submit(struct ods_io *io, bool may_block)
{
	struct ureq *r = calloc(1, sizeof(*r));
	if (!r) {
		ods_io_complete(io, -ENOMEM);
		return;
	}
	r->io = io;
	r->pos = io->off;
	r->end = io->off + (off_t)io->size;
	atomic_init(&r->pending, 1);
	atomic_init(&r->short_at, (long long)r->end);
	atomic_init(&r->err, 0);
	struct ods_handle *h = io->fh;
	r->fd_direct = ods_handle_fd_direct(h);
	r->fd_buf = ods_handle_fd_buffered(h);
	r->fsize = -1;
	if (io->opcode == OPENDS_READ) {
		r->fsize = ods_handle_size(h);
		r->user_direct = io->mem == ODS_MEM_HOST && r->fsize >= 0 &&
				 !(((uintptr_t)io->buf - (uintptr_t)io->off) & (ODS_ALIGN - 1));
		/* Nothing past EOF is read: clamping here also keeps the block
		 * arithmetic below far from the largest off_t. */
		if (r->fsize >= 0 && r->end > r->fsize) {
			r->end = io->off < r->fsize ? r->fsize : io->off;
			atomic_store(&r->short_at, (long long)r->end);
		}
		if (r->end == io->off) {
			free(r);
			ods_io_complete(io, 0);
			return;
		}
	} else {
		/* Partial blocks need the buffered twin, and a range whose last
		 * block would round past the largest off_t is left to pwrite,
		 * which reports what the file system says (EFBIG). */
		r->delegate = (r->fd_buf < 0 && ((io->off | r->end) & (A - 1))) || r->end > INT64_MAX - (off_t)A ||
			      on_fuse(h->fd);
	}
	size_t chunks = chunk_count(r);

	pthread_mutex_lock(&U.lock);
	while (may_block && U.nreq >= U.cap)
		pthread_cond_wait(&U.room, &U.lock);
	/* A worker's share of this request grows with the requests queued
	 * before it: alone, it is spread over every worker; behind others
	 * (several callers at once), each worker may keep whole requests,
	 * which saves the hand-offs between workers. */
	size_t share = (chunks * (U.nreq + 1) + U.nthreads - 1) / U.nthreads;
	r->share = share > UINT_MAX ? UINT_MAX : (unsigned)share;
	if (U.tail)
		U.tail->next = r;
	else
		U.head = r;
	U.tail = r;
	U.nreq++;
	atomic_fetch_add(&U.queued, 1);
	pthread_mutex_unlock(&U.lock);
	wake_workers(chunks < U.nthreads ? (unsigned)chunks : U.nthreads);
}

static int uring_probe(const struct ods_config *cfg, char *why, size_t n)
{
	(void)cfg;
	struct io_uring r;
	int rc = io_uring_queue_init(2, &r, 0);
	if (rc < 0) {
		snprintf(why, n,
			 "io_uring_queue_init failed: %s (kernel without io_uring, kernel.io_uring_disabled, "
			 "or a seccomp filter)",
			 strerror(-rc));
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	io_uring_queue_exit(&r);
	return 0;
}

static void stop_workers(void)
{
	atomic_store(&U.stop, true);
	for (unsigned i = 0; i < U.started; i++) {
		uint64_t one = 1;
		if (write(U.w[i].efd, &one, sizeof(one)) < 0) {
			/* see wake_workers */
		}
	}
	for (unsigned i = 0; i < U.started; i++)
		pthread_join(U.w[i].tid, NULL);
	for (unsigned i = 0; i < U.nthreads; i++) {
		struct worker *w = &U.w[i];
		if (w->efd >= 0) {
			io_uring_queue_exit(&w->ring);
			close(w->efd);
		}
		free(w->units);
	}
	free(U.w);
	U.w = NULL;
	pthread_cond_destroy(&U.room);
	pthread_cond_destroy(&U.ready_cv);
	pthread_mutex_destroy(&U.lock);
}

static int ring_init(struct worker *w)
{
	unsigned entries = U.depth + 2;
	/* COOP_TASKRUN: completions are processed when the worker enters the
	 * kernel anyway, without interrupting it; TASKRUN_FLAG tells peek when
	 * to enter. Older kernels refuse the flags: use none. */
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	int rc = io_uring_queue_init_params(entries, &w->ring, &p);
	if (rc == -EINVAL) {
		memset(&p, 0, sizeof(p));
		rc = io_uring_queue_init_params(entries, &w->ring, &p);
	}
	if (rc == 0) {
		/* bounded (regular file) workers; kernels before 5.15 lack the
		 * call and keep their own limit */
		unsigned v[2] = { U.kworkers, 0 };
		io_uring_register_iowq_max_workers(&w->ring, v);
	}
	return rc;
}

static int uring_open(const struct ods_config *cfg, const struct ods_accel *accel)
{
	memset(&U, 0, sizeof(U));
	U.accel = accel;
	U.cfg = cfg;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned half = ncpu > 1 ? (unsigned)(ncpu / 2) : 1;
	U.nthreads = cfg->io_threads ? cfg->io_threads
				     : half < MIN_THREADS ? MIN_THREADS : half > MAX_THREADS ? MAX_THREADS : half;
	U.depth = cfg->queue_depth ? cfg->queue_depth : DEF_DEPTH;
	U.chunk = cfg->chunk_size ? cfg->chunk_size : DEF_CHUNK;
	U.spin_us = cfg->idle_spin_us == -2 ? DEF_SPIN_US : cfg->idle_spin_us;
	U.page = sysconf(_SC_PAGESIZE);
	if (U.page < (long)ODS_ALIGN)
		U.page = ODS_ALIGN;
	U.kworkers = ncpu > (long)U.nthreads ? (unsigned)(ncpu / U.nthreads) : 1;
	U.cap = U.nthreads * U.depth;
	pthread_mutex_init(&U.lock, NULL);
	pthread_cond_init(&U.room, NULL);
	pthread_cond_init(&U.ready_cv, NULL);
	int rc;
	U.w = calloc(U.nthreads, sizeof(*U.w));
	if (!U.w) {
		pthread_cond_destroy(&U.room);
		pthread_cond_destroy(&U.ready_cv);
		pthread_mutex_destroy(&U.lock);
		return ods_fail(OPENDS_NOMEM_ERROR, "uring: out of memory");
	}
	for (unsigned i = 0; i < U.nthreads; i++)
		U.w[i].efd = -1;
	for (unsigned i = 0; i < U.nthreads; i++) {
		struct worker *w = &U.w[i];
		w->idx = i;
		w->units = calloc(U.depth, sizeof(*w->units));
		if (!w->units) {
			rc = ods_fail(OPENDS_NOMEM_ERROR, "uring: out of memory");
			goto fail;
		}
		for (unsigned k = U.depth; k > 0; k--) {
			struct unit *u = &w->units[k - 1];
			u->w = w;
			u->idx = k - 1;
			u->next_free = w->free_list;
			w->free_list = u;
		}
		w->nfree = U.depth;
		int efd = eventfd(0, EFD_CLOEXEC);
		if (efd < 0) {
			rc = ods_fail(OPENDS_INTERNAL_ERROR, "uring: eventfd: %s", strerror(errno));
			goto fail;
		}
		int e = ring_init(w);
		if (e < 0) {
			close(efd);
			errno = -e;
			rc = ods_fail(e == -ENOMEM ? OPENDS_NOMEM_ERROR : OPENDS_INTERNAL_ERROR,
				      "uring: io_uring_queue_init with %u entries (OPENDS_QUEUE_DEPTH): %s",
				      U.depth + 2, strerror(-e));
			goto fail;
		}
		w->efd = efd;
	}
	for (unsigned i = 0; i < U.nthreads; i++) {
		if (pthread_create(&U.w[i].tid, NULL, worker_main, &U.w[i])) {
			rc = ods_fail(OPENDS_INTERNAL_ERROR, "uring: could not start %u worker threads (OPENDS_IO_THREADS)",
				      U.nthreads);
			goto fail;
		}
		U.started++;
	}
	/* Open returns with the engine ready: pinning the slots takes tens of
	 * milliseconds per worker, which belongs to the open (as with cuFile)
	 * rather than to the first transfers. */
	pthread_mutex_lock(&U.lock);
	while (U.ready < U.started)
		pthread_cond_wait(&U.ready_cv, &U.lock);
	pthread_mutex_unlock(&U.lock);
	return 0;
fail:
	stop_workers();
	return rc;
}

static void uring_close(void)
{
	/* The core has drained streams and batches; futures may still be in
	 * flight: workers leave only when the queue is empty and every unit
	 * is free. */
	stop_workers();
}

static void uring_describe(struct ods_handle *h, char *buf, size_t n)
{
	if (!h) {
		snprintf(buf, n, "io_uring: %u workers x %u chunks of %zu KiB in flight", U.nthreads, U.depth,
			 U.chunk >> 10);
		return;
	}
	bool direct = ods_handle_fd_direct(h) >= 0;
	snprintf(buf, n, "io_uring, %s; writes to partial blocks %s%s", direct ? "O_DIRECT for uncached ranges and "
						       "buffered reads for cached ones" : "buffered only (O_DIRECT refused here)",
		 ods_handle_fd_buffered(h) >= 0 ? "through a buffered fd" : "through a read-modify-write (POSIX path)",
		 on_fuse(h->fd) ? "; writes through pwrite (FUSE)" : "");
}

const struct ods_backend ods_backend_uring = {
	.name = "uring",
	.descr = "io_uring with O_DIRECT, pinned bounce slots and overlapped accelerator copies",
	.probe = uring_probe,
	.open = uring_open,
	.close = uring_close,
	.submit = uring_submit,
	.describe = uring_describe,
};
