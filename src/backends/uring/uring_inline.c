/*
 * The io_uring backend's small synchronous reads, run on the calling
 * thread instead of the engine (src/backends/uring/uring.c): the inline
 * path of issue 17.
 */
#include <pthread.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uring_int.h"

/* ---- small synchronous reads on the caller's thread -------------------------- */

/* A read that fits one chunk gains nothing from the engine: one worker
 * moves it with nothing to overlap, and the hand-offs to the worker and
 * back (an eventfd write or a spinning worker, then a futex wake-up of the
 * caller: 2 context switches, 5 system calls) are pure cost. So reads of
 * at most OPENDS_INLINE_MAX bytes (default: the chunk size) run on the
 * caller. 2-core development VM under heavy load, hot page cache, one
 * caller, p50 engine -> inline: 4 KiB 7-10 -> 1.7-2.0 us (host and
 * simulated device memory), 64 KiB 25-45 -> 15-17 us. Device memory goes
 * through a pinned bounce from a small pool (a fresh allocation per call
 * would page-fault, and the accelerator copies pageable memory slowly).
 * Writes keep the engine (partial blocks, FUSE, durability rules live
 * there). */
#define NBOUNCE 8u /* callers reading inline at once with a pooled bounce; more allocate */
#define PROBE_MIN ((size_t)16 << 10)
/* Hot device reads in pieces: the copy of piece k to the device runs
 * while piece k + 1 is read from the page cache, where a single read and
 * copy (the plain loop's shape) waits for the whole copy after the whole
 * read. OPENDS_INLINE_SPLIT=N pieces (1: off), each at least SPLIT_MIN;
 * needs the accelerator's copy_to_device_begin/copy_end. Off by default:
 * on the H200 (probe try5, files1t, ~107 KB files) one copy per file ran
 * 3417-3536 MiB/s, 2 pieces 3228, 4 pieces 2525: each extra copy's fixed
 * cost (~2-4 us) outweighs the overlap it buys at these sizes. Kept for
 * machines where copies start cheaper or files are larger. */
#define SPLIT_MIN ((size_t)32 << 10)
#define DEF_SPLIT 1u
/* The page-cache probe of a buffered handle's read is skipped on a hot
 * streak: ods_uring_probe (uring_cache.c). */
static struct {
	pthread_mutex_t lock;
	char *free[NBOUNCE];
	unsigned nfree, nmade;
	size_t size;  /* bytes of each: the inline limit, rounded to pages */
	size_t chunk; /* the engine's chunk: the default limit */
	bool pinned;  /* from accel->mem->pinned_alloc */
	unsigned split; /* OPENDS_INLINE_SPLIT: pieces of a hot device read */
	const struct ods_accel_mem *mem;
} bp = { .lock = PTHREAD_MUTEX_INITIALIZER };

static size_t inline_max(void)
{
	return ods_drv.cfg.inline_set ? ods_drv.cfg.inline_max : bp.chunk;
}

/* a bounce of at least n bytes: pooled when n fits the pool's size and the
 * staging budget allows, else allocated (*pooled false) */
static char *bounce_get(size_t n, bool *pooled)
{
	*pooled = false;
	if (n <= bp.size) {
		pthread_mutex_lock(&bp.lock);
		char *b = bp.nfree ? bp.free[--bp.nfree] : NULL;
		bool make = !b && bp.nmade < NBOUNCE && ods_pinned_reserve(bp.size);
		if (make)
			bp.nmade++;
		pthread_mutex_unlock(&bp.lock);
		if (make) {
			b = bp.pinned ? bp.mem->pinned_alloc(bp.size) : ods_aligned_alloc(bp.size);
			if (!b) {
				pthread_mutex_lock(&bp.lock);
				bp.nmade--;
				pthread_mutex_unlock(&bp.lock);
				ods_pinned_release(bp.size);
			}
		}
		if (b) {
			*pooled = true;
			return b;
		}
	}
	return ods_aligned_alloc(n);
}

static void bounce_put(char *b, bool pooled)
{
	if (!pooled) {
		free(b);
		return;
	}
	pthread_mutex_lock(&bp.lock);
	bp.free[bp.nfree++] = b; /* nfree < nmade <= NBOUNCE */
	pthread_mutex_unlock(&bp.lock);
}

void ods_uring_bounces_init(const struct ods_accel *accel, size_t chunk)
{
	bp.chunk = chunk;
	size_t n = inline_max();
	/* (room for the partial blocks at both ends: inline_staged) */
	bp.size = n > ((size_t)16 << 20) ? 0 : ((n + 4095) & ~(size_t)4095) + 2 * ODS_ALIGN; /* no pool for huge limits */
	bp.mem = accel->mem;
	/* OPENDS_AB_PINNED_THP=1 (the cuda layer's A/B: pinned memory of at
	 * least 2 MiB on huge pages): the bounces in whole 2 MiB so that they
	 * are covered too (files1t copies from one; the plain loop's buffer is
	 * cuMemAllocHost memory) */
	const char *thp = getenv("OPENDS_AB_PINNED_THP");
	if (bp.size && thp && !strcmp(thp, "1"))
		bp.size = (bp.size + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
	/* (a fork child opens afresh: another thread of the parent may have
	 * held the lock at the fork) */
	bp.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	bp.pinned = bp.mem && bp.mem->pinned_alloc;
	bp.nfree = bp.nmade = 0;
	/* (validated by config.c: 1..16, 0 when unset) */
	bp.split = ods_drv.cfg.inline_split ? ods_drv.cfg.inline_split : DEF_SPLIT;
}

void ods_uring_bounces_fini(void)
{
	/* driver close: every caller has returned */
	for (unsigned i = 0; i < bp.nfree; i++) {
		if (bp.pinned)
			bp.mem->pinned_free(bp.free[i], bp.size);
		else
			free(bp.free[i]);
	}
	if (bp.nmade)
		ods_pinned_release((size_t)bp.nmade * bp.size);
	bp.nfree = bp.nmade = 0;
}


static size_t split_piece(const struct ods_io *io)
{
	const struct ods_accel *a = ods_drv.accel;
	if (bp.split < 2 || !a->copy_to_device_begin || !a->copy_end || io->size < 2 * SPLIT_MIN)
		return 0;
	size_t piece = (io->size / bp.split + 4095) & ~(size_t)4095;
	return piece < SPLIT_MIN ? SPLIT_MIN : piece;
}

/* read [io->off, +io->size) through fd into the bounce b, copying each
 * piece to the device while the next is read */
static ssize_t pread_pieces(struct ods_io *io, int fd, char *b, size_t piece)
{
	const struct ods_accel *a = ods_drv.accel;
	struct ods_copy_op op;
	bool pending = false;
	ssize_t ret = 0;
	size_t done = 0;
	while (done < io->size) {
		size_t n = io->size - done < piece ? io->size - done : piece;
		ssize_t r = ods_pread_full(fd, b + done, n, io->off + (off_t)done);
		int rc = pending ? a->copy_end(&op) : 0;
		pending = false;
		if (rc || r < 0) {
			ret = rc ? -rc : r;
			break;
		}
		if (r > 0 && (rc = a->copy_to_device_begin(io->dev, io->buf + done, b + done, (size_t)r, &op))) {
			ret = -rc;
			break;
		}
		pending = r > 0;
		done += (size_t)r;
		if ((size_t)r < n)
			break; /* EOF */
	}
	if (pending) {
		int rc = a->copy_end(&op);
		if (rc && ret >= 0)
			ret = -rc;
	}
	return ret < 0 ? ret : (ssize_t)done;
}

static ssize_t inline_pread(struct ods_io *io, int fd)
{
	if (io->mem == ODS_MEM_HOST)
		return ods_pread_full(fd, io->buf, io->size, io->off);
	bool pooled;
	char *b = bounce_get(io->size, &pooled);
	if (!b)
		return -ENOMEM;
	size_t piece = split_piece(io);
	ssize_t n;
	if (piece) {
		n = pread_pieces(io, fd, b, piece);
	} else {
		n = ods_pread_full(fd, b, io->size, io->off);
		if (n > 0) {
			int rc = ods_io_to_device(io, io->buf, b, (size_t)n);
			if (rc)
				n = -rc;
		}
	}
	bounce_put(b, pooled);
	return n;
}

/* The POSIX path's staging (ods_posix_staged) through a pooled bounce:
 * a cold read that reaches the end of the file (a small file read whole),
 * or any uncached read of an O_DIRECT handle into device memory, on the
 * caller's thread, its blocks O_DIRECT through dfd in one read as the
 * engine's worker would read them, without its two hand-offs (to the
 * worker and back: a futex wake-up and 2 context switches per file) and
 * its second cachestat and fstat. fs: the file's size at the call (-1:
 * unknown, then the POSIX path's own split). */
static ssize_t inline_staged(struct ods_io *io, int dfd, off_t fs)
{
	size_t n = io->size + 2 * ODS_ALIGN; /* blocks_read's room for the partial blocks */
	bool pooled;
	char *b = bounce_get(n, &pooled);
	if (!b)
		return -ENOMEM;
	struct ods_bounce lend = { b, pooled ? bp.size : (n + ODS_ALIGN - 1) & ~((size_t)ODS_ALIGN - 1), dfd, fs };
	ssize_t r = ods_posix_staged(io, &lend);
	bounce_put(b, pooled);
	return r;
}

/* The engine takes a cold piece of a longer file (its read-ahead); what
 * the caller found out (cold, and the file's size) goes with it in the
 * backend's scratch, so the worker asks neither again (req_init). */
static ssize_t to_engine(struct ods_io *io, off_t fs)
{
	io->be_scratch[0] = (uintptr_t)fs + 1;
	io->be_scratch[1] = (uintptr_t)io; /* (a copy of the io is not told) */
	return ODS_NOT_INLINE;
}

static ssize_t inline_pread_unprobed(struct ods_io *io, int fd)
{
	uint64_t t0 = ods_cs_now();
	ssize_t r = inline_pread(io, fd);
	ods_uring_read_took(io->size, ods_cs_now() - t0);
	return r;
}

off_t ods_uring_known_size(const struct ods_io *io)
{
	return io->be_scratch[1] == (uintptr_t)io && io->be_scratch[0] ? (off_t)(io->be_scratch[0] - 1) : -2;
}

ssize_t ods_uring_inline(struct ods_io *io)
{
	if (io->opcode != OPENDS_READ)
		return ODS_NOT_INLINE;
	if (io->size > inline_max())
		return ODS_NOT_INLINE;
	struct ods_handle *h = io->fh;
	off_t end = io->off + (off_t)io->size;
	/* The page cache is asked about the bytes the file had at
	 * registration: a range past EOF is never all cached (there are no
	 * pages there), so a buffer larger than the file would otherwise
	 * need an fstat and a second cachestat to tell hot from cold. The
	 * size only chooses the path: a buffered read returns the bytes the
	 * file has now, and a file that changed size since is asked again
	 * with its size below. */
	off_t hint = h->size_hint > 0 ? h->size_hint : -1;
	/* A buffered fd: one pread, no twin opened, no stat; when cached.
	 * A cold read of a small file through the page cache goes to the
	 * disk in readahead-sized pieces, one after the other, where the
	 * engine's O_DIRECT read asks for it whole: imagenetish cold, 8
	 * threads of whole-file sync reads, ran at 0.83x the O_DIRECT disk
	 * ceiling inline, 1.2x through the engine before (H200). So reads of
	 * at least PROBE_MIN ask the page cache first (cachestat, one cheap
	 * system call); smaller ones, where one buffered read is one trip
	 * to the disk either way, do not. */
	if (!h->direct) {
		bool skipped = false;
		if (io->size >= PROBE_MIN && ods_uring_has_cachestat() && ods_uring_probe(h->fd, io->off, end, hint, ODS_PROBE_INLINE, &skipped))
			return skipped ? inline_pread_unprobed(io, h->fd) : inline_pread(io, h->fd);
		if (io->size < PROBE_MIN || !ods_uring_has_cachestat())
			return inline_pread(io, h->fd); /* (without cachestat: inline, as before) */
		off_t fs = ods_handle_size(h);
		if (fs < 0)
			return ODS_NOT_INLINE;
		if (fs != hint && fs < end && ods_uring_cached(h->fd, io->off, end, fs))
			return inline_pread(io, h->fd); /* hot; its size changed since registration */
		if (fs > end)
			return to_engine(io, fs);
		int dfd = ods_handle_fd_direct(h);
		return dfd < 0 ? inline_pread(io, h->fd) : inline_staged(io, dfd, fs);
	}
	/* O_DIRECT: a cached range is read buffered through the twin, as a
	 * worker would; the rest by the POSIX path (O_DIRECT, alignment),
	 * device memory through the pooled pinned bounce (the POSIX path
	 * stages it through memory allocated per call, which the accelerator
	 * copies from slowly) */
	int fd = ods_handle_fd_buffered(h);
	if (fd >= 0 && ods_uring_cached(fd, io->off, end, hint))
		return inline_pread(io, fd);
	if (io->mem == ODS_MEM_DEVICE)
		return inline_staged(io, h->fd, ods_handle_size(h));
	return ods_posix_rw(io);
}
