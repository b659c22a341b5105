/*
 * The io_uring backend: the core's staging engine (src/core/stage.h:
 * requests, chunker, pinned slots, copy lanes, worker loop) with the
 * io_uring fd mover below, which moves each chunk between the file and
 * memory.
 *
 * Per worker
 *   Its own ring (no locking on submission), and an eventfd kept armed in
 *   the ring so one io_uring_enter sleeps on "new work" and "I/O finished"
 *   at once. The worker's slots (OPENDS_QUEUE_DEPTH x OPENDS_CHUNK_SIZE,
 *   pinned by the accelerator) are registered with the ring as fixed
 *   buffers, slot i as buffer i.
 *
 * A read chunk: O_DIRECT into the slot (the covering aligned blocks),
 *   the engine then copies only the caller's bytes. Host destinations skip
 *   the slot where possible: O_DIRECT straight into the caller's memory
 *   when the chunk and the memory are block-aligned and the chunk ends
 *   before the block that holds EOF (O_DIRECT fills whole blocks, which
 *   would write past the bytes returned); buffered reads always go
 *   straight in.
 * Hot or cold: before each read chunk, cachestat(2) asks whether every
 *   page of the range is in the page cache. If so the chunk is read
 *   buffered (a memory copy, run by the ring's kernel workers when large:
 *   see HOT_ASYNC_MIN); if not, with O_DIRECT (which
 *   would otherwise go to the disk even for cached pages, flushing dirty
 *   ones first). cachestat has no side effects, unlike a RWF_NOWAIT probe,
 *   which starts readahead on a miss and so would double-read cold data.
 *   Without cachestat (kernels before 6.5) every chunk is treated as cold.
 * A write chunk: O_DIRECT from the slot (device memory, copied there by
 *   the engine) or from the caller's memory. The chunker cuts partial
 *   blocks off into chunks of their own, written through the buffered twin
 *   fd so the kernel merges them under its page locks and concurrent
 *   writers to other bytes of the block lose nothing (as ref does).
 * Files are not registered with the rings: handles come and go on any
 *   thread while each ring belongs to its worker, and for chunks of a MiB
 *   the fd lookup registration saves is noise.
 * Small synchronous reads skip the engine: uring_inline.c.
 * Corner cases that need the POSIX path's read-modify-write (a partial-block
 *   write on a handle without any buffered fd) are handed to it whole
 *   (src/core/posix_io.c), on a worker.
 */
#include <limits.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/vfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "uring_int.h"

#define BLK ((off_t)ODS_ALIGN)

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
 * without, 0.82 with (bench/results/2026-11-29-h200-d86181c/NOTES.md). */
#define HOT_ASYNC_MIN ((size_t)256 << 10)
/* SMALL GROUPS: smaller reads of cached ranges taken while more work is
 * queued (a batch or many futures of small files) wait in the submission
 * queue until HOT_ASYNC_MIN bytes of them have gathered, then go in one
 * io_uring_enter, which runs them inline one after the other: one system
 * call per group instead of one per read (issue 17: a batch of N hot
 * small files made N calls). The cap keeps one worker from copying
 * serially what other workers could copy at the same time; the last read
 * taken (nothing queued behind it) goes at once, so a lone read waits
 * for nothing. */
/* An idle worker spins this long before sleeping: a caller issuing
 * synchronous reads back to back submits the next one within a few
 * microseconds, and a spinning worker takes it without an eventfd write
 * and a wake-up (several microseconds each). */
#define DEF_SPIN_US 50
#define MAX_RETRY 64 /* EINTR / EAGAIN / ECANCELED resubmissions per chunk */
#define WAKE_TAG ((uint64_t)1) /* user_data of the eventfd read; units are aligned */

static struct {
	struct ods_stage *stage;
	unsigned nthreads, depth;
	size_t chunk;
	unsigned kworkers; /* kernel workers per ring for hot reads, and the
			      reads of cached ranges a worker keeps in it */
} ur;

/* the mover's part of a request (r->mv) */
#define FD_DIRECT(r) ((int)(r)->mv[0])
#define FD_BUF(r) ((int)(r)->mv[1])
#define USER_DIRECT(r) (((r)->mv[2] & 1) != 0) /* host memory aligned with the file: aligned chunks
						   may go straight into it */
#define CACHED(r) (((r)->mv[2] & 2) != 0) /* all of it was in the page cache at submit (no O_DIRECT fd) */
#define UNDECIDED(r) (((r)->mv[2] & 4) != 0) /* one chunk of a buffered fd: decide() on the worker */

/* the mover's part of a unit */
struct uunit {
	int fd;
	bool direct;   /* I/O on the O_DIRECT fd */
	bool hot;      /* read buffered because the range is cached: its reads
			  in the ring count in nhot */
	unsigned retries;
	bool fixed;    /* its slot is the ring's fixed buffer idx */
};

struct uworker {
	struct io_uring ring;
	int efd;
	uint64_t efd_val;
	bool wake_armed;  /* the eventfd read is in the ring */
	bool table;       /* the ring has a (sparse) fixed-buffer table */
	bool inline_io;   /* a read that runs inline was queued: submit it now */
	size_t grouped;   /* bytes of small cached reads waiting in the queue */
	unsigned nhot;    /* reads of cached ranges in the ring */
	struct uunit *uu; /* by unit index */
};

static struct uworker *uw_of(const struct ods_stage_unit *u)
{
	return ods_stage_ctx(u);
}
static struct uunit *uu_of(const struct ods_stage_unit *u)
{
	return &uw_of(u)->uu[u->idx];
}

static bool range_cached(const struct ods_stage_req *r, off_t c0, off_t c1)
{
	return r->fsize >= 0 && ods_uring_cached(FD_BUF(r), c0, c1, r->fsize);
}

/* ---- the chunk's I/O -------------------------------------------------------- */

atomic_ulong ods_uring_submits;

/* io_uring_enter with what the queue holds, counted (a test asks that a
 * batch of small reads is submitted in groups, not one call each) */
static void submit(struct uworker *w)
{
	atomic_fetch_add_explicit(&ods_uring_submits, 1, memory_order_relaxed);
	io_uring_submit(&w->ring);
}

static bool reap(void *ctx);

static void issue(struct ods_stage_unit *u)
{
	struct uworker *w = uw_of(u);
	struct uunit *x = uu_of(u);
	/* the ring has room for every unit plus the eventfd read */
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	if (!sqe) {
		submit(w);
		sqe = io_uring_get_sqe(&w->ring);
	}
	if (!sqe) { /* the kernel did not take the queue (-EBUSY): give up cleanly */
		ods_stage_end(u, -EBUSY);
		return;
	}
	char *b = u->io_buf + u->io_done;
	unsigned n = (unsigned)(u->io_len - u->io_done);
	off_t o = u->io_off + (off_t)u->io_done;
	bool fixed = u->slot && x->fixed;
	if (u->r->io->opcode == OPENDS_READ) {
		if (fixed)
			io_uring_prep_read_fixed(sqe, x->fd, b, n, (uint64_t)o, (int)u->idx);
		else
			io_uring_prep_read(sqe, x->fd, b, n, (uint64_t)o);
		w->nhot += x->hot;
		if (!x->direct && n >= HOT_ASYNC_MIN && u->more) {
			io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
		} else if (!x->direct && n < HOT_ASYNC_MIN && u->more && w->grouped + n < HOT_ASYNC_MIN) {
			w->grouped += n; /* waits in the queue for the group (see SMALL GROUPS) */
		} else if (!x->direct) {
			w->inline_io = true;
			w->grouped = 0;
		}
	} else {
		if (fixed)
			io_uring_prep_write_fixed(sqe, x->fd, b, n, (uint64_t)o, (int)u->idx);
		else
			io_uring_prep_write(sqe, x->fd, b, n, (uint64_t)o);
	}
	io_uring_sqe_set_data(sqe, u);
}

static void fds_init(struct ods_stage_req *r);

/* The one chunk of an UNDECIDED request, on its worker: read buffered
 * through the caller's fd when cached (no twin, no fstat; on the worker's
 * hot streak without asking: ods_uring_probe), else as any cold read; the
 * part past EOF, which the submitter did not clamp, goes
 * buffered (that read stops at EOF by itself; a direct one would round
 * blocks up past the end of the file, and near the largest off_t past
 * what an off_t holds). Only this unit uses r's mover fields. */
static void decide(struct ods_stage_unit *u)
{
	struct ods_stage_req *r = u->r;
	bool skipped; /* (a worker does not time its reads: the streak samples) */
	if (ods_uring_probe(FD_BUF(r), u->c0, u->c1, -1, ODS_PROBE_WORKER, &skipped)) {
		r->mv[2] = 2; /* CACHED */
		return;
	}
	fds_init(r);
	if (r->fsize < 0 || u->c1 > r->fsize) {
		r->fsize = -1;
		r->mv[0] = (uint64_t)(int64_t)-1; /* buffered: the bytes there are */
		r->mv[1] = (uint64_t)(int64_t)r->io->fh->fd;
		r->mv[2] = 0;
	}
}

static void uring_read(struct ods_stage_unit *u)
{
	struct ods_stage_req *r = u->r;
	struct ods_io *io = r->io;
	struct uworker *w = uw_of(u);
	struct uunit *x = uu_of(u);
	bool host = io->mem == ODS_MEM_HOST;
	char *dst = io->buf + (u->c0 - io->off);
	x->retries = 0;
	if (UNDECIDED(r))
		decide(u);
	x->direct = FD_DIRECT(r) >= 0 && (FD_BUF(r) < 0 || !range_cached(r, u->c0, u->c1));
	u->device_io = x->direct; /* goes to the storage device: the engine may cap those (stage.h) */
	/* counted in nhot: the reads that may go to the kernel workers
	 * (small ones run inline); without an O_DIRECT fd, buffered says
	 * nothing about the cache unless the submit saw it all cached */
	x->hot = !x->direct && (FD_DIRECT(r) >= 0 || CACHED(r)) && (size_t)(u->c1 - u->c0) >= HOT_ASYNC_MIN;
	if (x->direct) {
		x->fd = FD_DIRECT(r);
		if (host && USER_DIRECT(r) && !(u->c0 & (BLK - 1)) && !(u->c1 & (BLK - 1)) &&
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
		x->fd = FD_BUF(r);
		u->slot = !host;
		u->io_off = u->c0;
		u->io_len = (size_t)(u->c1 - u->c0);
		u->io_buf = dst;
	}
	if (u->slot && !(u->io_buf = ods_stage_slot(u))) {
		ods_stage_end(u, -ENOMEM);
		return;
	}
	issue(u);
	/* A buffered read of cached pages run inline completes inside
	 * io_uring_enter, on this thread. Submitted in a batch, the worker
	 * would read every chunk before starting any copy; one at a time,
	 * the copy of chunk k runs while chunk k+1 is read. (Small ones
	 * gather first: SMALL GROUPS.) */
	if (w->inline_io) {
		w->inline_io = false;
		submit(w);
		reap(w);
	}
}

static void uring_write(struct ods_stage_unit *u)
{
	struct ods_stage_req *r = u->r;
	struct uunit *x = uu_of(u);
	x->retries = 0;
	x->hot = false;
	/* the chunker made partial blocks chunks of their own */
	x->direct = FD_DIRECT(r) >= 0 && !(u->c0 & (BLK - 1)) && !(u->c1 & (BLK - 1));
	x->fd = x->direct ? FD_DIRECT(r) : FD_BUF(r);
	if (!u->slot && x->direct && ((uintptr_t)u->io_buf & (BLK - 1))) {
		char *slot = ods_stage_slot(u);
		if (!slot) {
			ods_stage_end(u, -ENOMEM);
			return;
		}
		int rc = ods_copy_checked(slot, u->io_buf, u->io_len);
		if (rc) {
			ods_stage_end(u, rc);
			return;
		}
		u->io_buf = slot;
		u->slot = true;
	}
	issue(u);
}

/* O_DIRECT refused for this range (a device with a larger logical block,
 * a file system that refuses it here): redo the chunk buffered. */
static void to_buffered(struct ods_stage_unit *u)
{
	struct ods_stage_req *r = u->r;
	struct uunit *x = uu_of(u);
	x->direct = false;
	x->hot = false;
	x->fd = FD_BUF(r);
	if (r->io->opcode == OPENDS_READ) {
		u->io_off = u->c0;
		u->io_len = (size_t)(u->c1 - u->c0);
		u->io_done = 0;
		if (!u->slot)
			u->io_buf = r->io->buf + (u->c0 - r->io->off);
	}
	/* writes: the data already sits at io_buf for [io_off, +io_len) */
}

static void on_cqe(struct ods_stage_unit *u, int res)
{
	struct uworker *w = uw_of(u);
	struct uunit *x = uu_of(u);
	bool rd = u->r->io->opcode == OPENDS_READ;
	w->nhot -= x->hot; /* (hot changes only below, after this) */
	if (res < 0) {
		if ((res == -EINTR || res == -EAGAIN || res == -ECANCELED) && ++x->retries < MAX_RETRY) {
			issue(u);
			return;
		}
		if (res == -EINVAL && x->direct && FD_BUF(u->r) >= 0) {
			to_buffered(u);
			issue(u);
			return;
		}
		ods_stage_end(u, res);
		return;
	}
	if (res == 0) {
		if (rd)
			ods_stage_read_done(u);
		else
			ods_stage_end(u, -EIO); /* a write that moves nothing would loop */
		return;
	}
	u->io_done += (size_t)res;
	/* Short transfers continue where they stopped. An O_DIRECT read that
	 * ends off a block boundary is EOF when the file ends there; else (a
	 * file system returning short reads) the rest is read buffered, since
	 * a direct read cannot start at an unaligned offset. */
	if (u->io_done < u->io_len && rd && x->direct && (res & (BLK - 1))) {
		off_t at = u->io_off + (off_t)u->io_done;
		if (u->r->fsize < 0 || at >= u->r->fsize) {
			ods_stage_read_done(u);
			return;
		}
		if (FD_BUF(u->r) < 0) {
			ods_stage_end(u, -EIO);
			return;
		}
		x->direct = false;
		x->fd = FD_BUF(u->r);
	}
	if (u->io_done < u->io_len) {
		issue(u);
		return;
	}
	if (rd)
		ods_stage_read_done(u);
	else
		ods_stage_end(u, 0);
}

/* ---- the ring: reaping, sleeping, waking -------------------------------------- */

static void arm_wake(struct uworker *w)
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

static bool reap(void *ctx)
{
	struct uworker *w = ctx;
	if (io_uring_sq_ready(&w->ring))
		submit(w);
	w->grouped = 0;
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
			on_cqe((struct ods_stage_unit *)(uintptr_t)tag, res);
	}
	return any;
}

static bool ring_full(void *ctx)
{
	/* enough cached reads here (see HOT_ASYNC_MIN): leave the rest to
	 * other workers */
	return ((struct uworker *)ctx)->nhot >= ur.kworkers;
}

static void ring_wait(void *ctx, long timeout_ns)
{
	struct uworker *w = ctx;
	struct io_uring_cqe *cqe;
	if (timeout_ns >= 0) {
		struct __kernel_timespec ts = { 0, timeout_ns };
		io_uring_wait_cqe_timeout(&w->ring, &cqe, &ts);
		return;
	}
	if (!w->wake_armed)
		arm_wake(w);
	if (w->wake_armed) {
		io_uring_submit_and_wait(&w->ring, 1);
	} else {
		struct __kernel_timespec ts = { 0, 1000000 };
		io_uring_submit(&w->ring);
		io_uring_wait_cqe_timeout(&w->ring, &cqe, &ts);
	}
}

static void ring_wake(void *ctx)
{
	uint64_t one = 1;
	if (write(((struct uworker *)ctx)->efd, &one, sizeof(one)) < 0) {
		/* eventfd writes only fail on counter overflow, i.e. the
		 * worker is being woken already */
	}
}

/* Fixed buffers save pinning the pages on every I/O; optional (a low
 * RLIMIT_MEMLOCK refuses them, kernels before 5.19 have no sparse table,
 * and plain reads work the same). The ring gets a sparse table of depth
 * entries at start; slot i becomes entry i when it exists. */
static void slot_added(void *ctx, unsigned i, char *p, size_t size)
{
	struct uworker *w = ctx;
	struct iovec iov = { p, size };
	w->uu[i].fixed = w->table && io_uring_register_buffers_update_tag(&w->ring, i, &iov, NULL, 1) == 1;
}

static void slots_removed(void *ctx)
{
	struct uworker *w = ctx;
	if (w->table)
		io_uring_unregister_buffers(&w->ring);
	w->table = false;
	for (unsigned i = 0; i < ur.depth; i++)
		w->uu[i].fixed = false;
}

static int ring_init(struct uworker *w)
{
	unsigned entries = ur.depth + 2;
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
		/* Bounded (regular file) kernel workers: a thread per unit, so
		 * that reads the kernel hands to them (a cold O_DIRECT read that
		 * would block: a full device queue, an extent to look up) run
		 * as deep as the ring; hot copies are kept to kworkers by
		 * ring_full instead. Capping this at kworkers (6135215) ran
		 * such cold reads kworkers at a time per ring: the suspected
		 * cause of the cold small-file legs' 32-42 % loss (issue 17).
		 * Kernels before 5.15 lack the call and keep their own limit. */
		unsigned v[2] = { ur.kworkers > ur.depth ? ur.kworkers : ur.depth, 0 };
		io_uring_register_iowq_max_workers(&w->ring, v);
	}
	return rc;
}

static int worker_open(struct ods_stage *s, unsigned idx, void **ctx)
{
	(void)idx;
	ur.depth = ods_stage_params(s)->depth; /* what fits the staging budget */
	struct uworker *w = calloc(1, sizeof(*w));
	struct uunit *uu = calloc(ur.depth, sizeof(*uu));
	if (!w || !uu) {
		free(w);
		free(uu);
		return ods_fail(OPENDS_NOMEM_ERROR, "uring: out of memory");
	}
	w->uu = uu;
	int efd = eventfd(0, EFD_CLOEXEC);
	if (efd < 0) {
		int rc = ods_fail(OPENDS_INTERNAL_ERROR, "uring: eventfd: %s", strerror(errno));
		free(uu);
		free(w);
		return rc;
	}
	int e = ring_init(w);
	if (e < 0) {
		close(efd);
		free(uu);
		free(w);
		errno = -e;
		return ods_fail(e == -ENOMEM ? OPENDS_NOMEM_ERROR : OPENDS_INTERNAL_ERROR,
				"uring: io_uring_queue_init with %u entries (OPENDS_QUEUE_DEPTH): %s", ur.depth + 2,
				strerror(-e));
	}
	w->efd = efd;
	w->table = io_uring_register_buffers_sparse(&w->ring, ur.depth) == 0;
	arm_wake(w);
	*ctx = w;
	return 0;
}

static void worker_close(void *ctx)
{
	struct uworker *w = ctx;
	io_uring_queue_exit(&w->ring);
	close(w->efd);
	free(w->uu);
	free(w);
}

/* ---- requests ---------------------------------------------------------------- */

/* FUSE completes a short asynchronous write as -EIO (its aio path cannot
 * return a short count for writes), where pwrite gets the short count and
 * goes on; writes to FUSE files therefore go through pwrite. */
static bool on_fuse(int fd)
{
	struct statfs sf;
	return fstatfs(fd, &sf) == 0 && sf.f_type == 0x65735546; /* FUSE_SUPER_MAGIC */
}

/* A read that may go O_DIRECT: its fds and the file's size. */
static void fds_init(struct ods_stage_req *r)
{
	struct ods_io *io = r->io;
	struct ods_handle *h = io->fh;
	off_t known = ods_uring_known_size(io);
	r->fsize = known != -2 ? known : ods_handle_size(h);
	r->mv[0] = (uint64_t)(int64_t)ods_handle_fd_direct(h);
	r->mv[1] = (uint64_t)(int64_t)ods_handle_fd_buffered(h);
	r->mv[2] = io->mem == ODS_MEM_HOST && r->fsize >= 0 &&
		   !(((uintptr_t)io->buf - (uintptr_t)io->off) & (ODS_ALIGN - 1)); /* USER_DIRECT */
}

static int cold_init(struct ods_stage_req *r)
{
	fds_init(r);
	/* Nothing past EOF is read: clamping here also keeps the block
	 * arithmetic far from the largest off_t. */
	if (r->fsize >= 0 && r->end > r->fsize)
		r->end = r->io->off < r->fsize ? r->fsize : r->io->off;
	return r->end == r->io->off;
}

static int req_init(struct ods_stage_req *r)
{
	struct ods_io *io = r->io;
	struct ods_handle *h = io->fh;
	if (io->opcode == OPENDS_READ) {
		/* A buffered fd whose range is all in the page cache: read
		 * buffered through it, with no O_DIRECT twin opened and no
		 * fstat (the reads stop at EOF by themselves; a range past EOF
		 * is never all cached). Per small hot file that saves an open,
		 * a close and a stat (issue 17, third lead). Huge requests take
		 * the path below, which clamps them to the file's size. */
		if (!h->direct && ods_uring_known_size(io) != -2)
			return cold_init(r); /* the inline path found it cold (and the size) */
		if (!h->direct && r->end - ods_align_down(io->off) <= (off_t)ur.chunk &&
		    r->end <= INT64_MAX - (off_t)ur.chunk) {
			/* one chunk: the worker that reads it asks (decide), not
			 * the submitter, which a batch of many small files keeps
			 * busy enough with its own work (r->end stays unclamped:
			 * not near the largest off_t, which the chunker's
			 * arithmetic would pass) */
			r->mv[0] = (uint64_t)(int64_t)-1;
			r->mv[1] = (uint64_t)(int64_t)h->fd;
			r->mv[2] = 4; /* UNDECIDED */
			return 0;
		}
		if (!h->direct && io->size <= ur.chunk * ur.depth && ods_uring_cached(h->fd, io->off, r->end, -1)) {
			r->mv[0] = (uint64_t)(int64_t)-1;
			r->mv[1] = (uint64_t)(int64_t)h->fd;
			r->mv[2] = 2; /* CACHED */
			return 0;
		}
		return cold_init(r);
	}
	int fd_direct = ods_handle_fd_direct(h), fd_buf = ods_handle_fd_buffered(h);
	r->mv[0] = (uint64_t)(int64_t)fd_direct;
	r->mv[1] = (uint64_t)(int64_t)fd_buf;
	/* Partial blocks need the buffered twin, and a range whose last block
	 * would round past the largest off_t is left to pwrite, which reports
	 * what the file system says (EFBIG). */
	r->delegate = (fd_buf < 0 && ((io->off | r->end) & (BLK - 1))) || r->end > INT64_MAX - (off_t)BLK ||
		      on_fuse(h->fd);
	return 0;
}

static const struct ods_mover uring_mover = {
	.name = "uring",
	.device_workers = true, /* extra workers for two or more GPUs (stage_queue.c) */
	.worker_open = worker_open,
	.worker_close = worker_close,
	.slot_added = slot_added,
	.slots_removed = slots_removed,
	.req_init = req_init,
	.read = uring_read,
	.write = uring_write,
	.rw_whole = ods_posix_rw,
	.reap = reap,
	.full = ring_full,
	.wait = ring_wait,
	.wake = ring_wake,
};

/* ---- the backend ----------------------------------------------------------- */

static void uring_submit(struct ods_io *io, bool may_block)
{
	if (io->opcode == OPENDS_WRITE)
		ods_ra_write_begin(io); /* read-ahead of this file is not used until it ends */
	ods_stage_submit(ur.stage, io, may_block);
}

/* A batch: queued together and the workers woken once, so a worker does
 * not take the first entry alone and submit it alone (SMALL GROUPS). */
static void uring_submit_many(struct ods_io *const *ios, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (ios[i]->opcode == OPENDS_WRITE)
			ods_ra_write_begin(ios[i]);
	ods_stage_submit_many(ur.stage, ios, n, true);
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

static int uring_open(const struct ods_config *cfg, const struct ods_accel *accel)
{
	memset(&ur, 0, sizeof(ur));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned half = ncpu > 1 ? (unsigned)(ncpu / 2) : 1;
	struct ods_stage_params p;
	p.threads = cfg->io_threads ? cfg->io_threads
				    : half < MIN_THREADS ? MIN_THREADS : half > MAX_THREADS ? MAX_THREADS : half;
	p.depth = cfg->queue_depth ? cfg->queue_depth : DEF_DEPTH;
	p.chunk = cfg->chunk_size ? cfg->chunk_size : DEF_CHUNK;
	p.spin_us = cfg->idle_spin_us == -2 ? DEF_SPIN_US : cfg->idle_spin_us;
	ur.nthreads = p.threads;
	ur.depth = p.depth;
	ur.chunk = p.chunk;
	ods_uring_cache_init();
	/* CPUs / workers, at most 2: on the 32-CPU x2 H200 (4 by the
	 * quotient) 2 read hot 8 GiB faster in one call (seq16m 45749 vs
	 * 41991-44334 MiB/s, gpu1 42648 vs 37777-39776, gpu2 82257 vs
	 * 75139-76393; probe try4, archA); the 16-CPU H200 ran 2 already.
	 * Cold reads are not limited by it (the ring's io-wq cap below is
	 * at least the queue depth). */
	unsigned kw = ncpu > (long)ur.nthreads ? (unsigned)(ncpu / ur.nthreads) : 1;
	ur.kworkers = cfg->io_kworkers ? cfg->io_kworkers : kw < 2 ? kw : 2;
	int rc = ods_stage_open(&ur.stage, &p, &uring_mover, cfg, accel);
	if (rc == 0)
		ods_uring_bounces_init(accel, ur.chunk);
	return rc;
}

static void uring_close(void)
{
	ods_uring_bounces_fini();
	ods_stage_close(ur.stage);
	ur.stage = NULL;
}

static void uring_describe(struct ods_handle *h, char *buf, size_t n)
{
	if (!h) {
		snprintf(buf, n, "io_uring: %u workers x %u chunks of %zu KiB in flight (staging within OPENDS_MAX_PINNED %zu MiB)",
			 ur.nthreads, ur.depth, ur.chunk >> 10, ods_pinned_budget(&ods_drv.cfg) >> 20);
		return;
	}
	bool direct = ods_handle_fd_direct(h) >= 0;
	snprintf(buf, n, "io_uring, %s; writes to partial blocks %s%s; read ahead: %lu calls served",
		 direct ? "O_DIRECT for uncached ranges and buffered reads for cached ones"
			: "buffered only (O_DIRECT refused here)",
		 ods_handle_fd_buffered(h) >= 0 ? "through a buffered fd" : "through a read-modify-write (POSIX path)",
		 on_fuse(h->fd) ? "; writes through pwrite (FUSE)" : "", ods_ra_served(h));
}

const struct ods_backend ods_backend_uring = {
	.name = "uring",
	.descr = "io_uring with O_DIRECT, pinned bounce slots and overlapped accelerator copies",
	.probe = uring_probe,
	.open = uring_open,
	.close = uring_close,
	.submit = uring_submit,
	.submit_many = uring_submit_many,
	.rw_inline = ods_uring_inline,
	.readahead = true,
	.handle_close = ods_ra_handle_close, /* (requests in flight are waited for first) */
	.describe = uring_describe,
};
