/*
 * Synchronous writes from device memory on the calling thread, in large
 * pieces (issue 17's write16m): OPENDS_WRITE_PIECE=size, 0 off (the
 * engine's way); unset or not a size: the default, 8 MiB
 * (ods_stage_write_def_piece).
 *
 * Through the engine, a synchronous 16 MiB write is 16 chunks of 1 MiB:
 * each copied from the device into a worker's slot, then written O_DIRECT
 * into a range allocated first (fallocate: ext4 runs extending O_DIRECT
 * writes one at a time). On the H200's disk that shape ran 0.87-0.91x of
 * one thread's 16 MiB O_DIRECT pwrite at the end of the file (2272 vs
 * 2496 MiB/s; 8 threads' pwrite into a range allocated first 2192,
 * io_uring 32 x 1 MiB 1942): the disk likes one large write, and the
 * allocated range costs its unwritten extents' conversion after each
 * chunk. Here the call copies piece k + 1 from the device into the other
 * half of a pinned buffer while piece k is written with one pwrite on the
 * handle's O_DIRECT fd, no range allocated first (ods_ra_write_begin
 * skips its fallocate for these): the ceiling's shape, with the copy
 * overlapped. Same guarantee as every synchronous write (io.h): written
 * when the call returns, no write-behind.
 *
 * Taken only for block-aligned offset and size, more than one MiB and at
 * most WR_MAX, on a regular file with an O_DIRECT fd (the caller's or its
 * twin), with an accelerator that copies to the host in two halves, and a
 * buffer within the staging budget (at most half of what is left, as
 * read-ahead), by one caller at a time while no other write of the file
 * runs (ods_stage_write_caller says why);
 * anything else, and a first write that O_DIRECT refuses, goes through
 * the engine as before (its range allocated first).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stage_int.h"

#define WR_MIN ((size_t)1 << 20)   /* (ods_ra_write_begin allocates above this too) */
#define WR_MAX ((size_t)256 << 20)
#define WR_POOL 4u                  /* buffers kept (one caller at a time: ods_stage_write_caller) */

/* writes this way completed (the tests count them) */
atomic_ulong ods_stage_caller_writes;

/* OPENDS_WRITE_PIECE, read when an engine opens; 0 off */
static _Atomic size_t wr_piece;

/* an engine's buffers, each two pieces */
struct ods_stage_wr {
	pthread_mutex_t lock;
	size_t piece;
	char *free[WR_POOL];
	unsigned nfree;
	unsigned nmade; /* reserved from the budget, free or lent */
	bool pinned;    /* from accel->mem->pinned_alloc (set at open) */
	atomic_bool busy; /* a write runs this way now */
};

/* the piece when OPENDS_WRITE_PIECE is unset (0: the engine's way): 8 MiB
 * (H200 probe, write16m 2096 MiB/s against 2133 with 16 MiB pieces and
 * 1711-1806 through the engine; each 8 MiB piece's copy from the device
 * overlaps the write of the one before) */
const size_t ods_stage_write_def_piece = (size_t)8 << 20;

/* a size: digits with an optional k, m or g; 0 for anything else */
static size_t parse_size(const char *v)
{
	char *end;
	if (!v || *v < '0' || *v > '9')
		return 0;
	unsigned long long n = strtoull(v, &end, 10);
	unsigned sh = 0;
	if (*end == 'k' || *end == 'K')
		sh = 10;
	else if (*end == 'm' || *end == 'M')
		sh = 20;
	else if (*end == 'g' || *end == 'G')
		sh = 30;
	if (sh)
		end++;
	if (*end || n > (WR_MAX >> sh))
		return 0;
	return ((size_t)n << sh) & ~((size_t)ODS_ALIGN - 1);
}

void ods_stage_write_open(struct ods_stage *s)
{
	const char *v = getenv("OPENDS_WRITE_PIECE");
	size_t piece = v && !strcmp(v, "0") ? 0 : parse_size(v);
	if (!piece && !(v && !strcmp(v, "0")))
		piece = ods_stage_write_def_piece;
	atomic_store(&wr_piece, piece);
	struct ods_stage_wr *w = piece ? calloc(1, sizeof(*w)) : NULL;
	if (w) {
		pthread_mutex_init(&w->lock, NULL);
		w->piece = piece;
		w->pinned = s->accel->mem && s->accel->mem->pinned_alloc;
	}
	s->wr = w; /* (none: every write through the engine) */
}

bool ods_stage_write_caller_ok(const struct ods_io *io)
{
	const struct ods_accel *a = ods_drv.accel;
	struct ods_handle *h = io->fh;
	return io->sync && io->opcode == OPENDS_WRITE && io->mem == ODS_MEM_DEVICE && !h->src && !h->blockdev &&
	       io->size > WR_MIN && io->size <= WR_MAX && !(io->off & (off_t)(ODS_ALIGN - 1)) &&
	       !(io->size & (ODS_ALIGN - 1)) && a->copy_to_host_begin && a->copy_end &&
	       atomic_load_explicit(&wr_piece, memory_order_relaxed);
}

static char *buf_get(struct ods_stage_wr *w, const struct ods_accel *a)
{
	const struct ods_accel_mem *m = a->mem;
	size_t n = 2 * w->piece;
	pthread_mutex_lock(&w->lock);
	if (w->nfree) {
		char *b = w->free[--w->nfree];
		pthread_mutex_unlock(&w->lock);
		return b;
	}
	bool fits = w->nmade < WR_POOL && n <= ods_pinned_left() / 2 && ods_pinned_reserve(n);
	/* read-ahead's kept buffers (stage_ra.c) give their budget back
	 * first: kept for a reader to come, they must not refuse a writer
	 * here now (review) */
	if (!fits && w->nmade < WR_POOL && ods_ra_keep_reclaim())
		fits = n <= ods_pinned_left() / 2 && ods_pinned_reserve(n);
	if (!fits) {
		pthread_mutex_unlock(&w->lock);
		return NULL;
	}
	w->nmade++;
	pthread_mutex_unlock(&w->lock);
	char *b = w->pinned ? m->pinned_alloc(n) : ods_aligned_alloc(n);
	if (!b) {
		pthread_mutex_lock(&w->lock);
		w->nmade--;
		pthread_mutex_unlock(&w->lock);
		ods_pinned_release(n);
	}
	return b;
}

static void buf_put(struct ods_stage_wr *w, char *b)
{
	pthread_mutex_lock(&w->lock);
	w->free[w->nfree++] = b; /* (nfree <= nmade <= WR_POOL) */
	pthread_mutex_unlock(&w->lock);
}

/* at the engine's close: every synchronous write has returned */
void ods_stage_write_close(struct ods_stage *s)
{
	struct ods_stage_wr *w = s->wr;
	if (!w)
		return;
	const struct ods_accel_mem *m = s->accel->mem;
	for (unsigned i = 0; i < w->nfree; i++) {
		if (w->pinned)
			m->pinned_free(w->free[i], 2 * w->piece);
		else
			free(w->free[i]);
	}
	if (w->nmade)
		ods_pinned_release((size_t)w->nmade * 2 * w->piece);
	pthread_mutex_destroy(&w->lock);
	free(w);
	s->wr = NULL;
}

static int copy_begin(const struct ods_accel *a, const struct ods_io *io, char *dst, size_t at, size_t n,
		      struct ods_copy_op *op)
{
	return a->copy_to_host_begin(io->dev, dst, io->buf + at, n, op);
}

/* Bytes written (all), or a negated error; ODS_NOT_INLINE: not taken,
 * nothing written (the engine runs it). */
static ssize_t run(struct ods_io *io, const struct ods_accel *a, size_t P, char *b, int dfd)
{
	size_t size = io->size;
	struct ods_copy_op op;
	size_t n = size < P ? size : P;
	int rc = copy_begin(a, io, b, 0, n, &op);
	if (rc || (rc = a->copy_end(&op)))
		return -rc;
	for (size_t at = 0; at < size;) {
		char *cur = b + ((at / P) & 1) * P;
		size_t len = size - at < P ? size - at : P, next = at + len;
		size_t nlen = size - next < P ? size - next : P;
		bool more = next < size;
		/* the next piece into the other half while this one is written */
		if (more && (rc = copy_begin(a, io, b + ((next / P) & 1) * P, next, nlen, &op)))
			return -rc;
		ssize_t w = ods_pwrite_full(dfd, cur, len, io->off + (off_t)at);
		if (more && (rc = a->copy_end(&op)) && w >= 0)
			w = -rc;
		if (w == -EINVAL && at == 0)
			return ODS_NOT_INLINE; /* O_DIRECT refused here: the engine's way */
		if (w < 0)
			return w;
		at = next;
	}
	return (ssize_t)size;
}

/* Not taken after all: the engine writes it as any other, its range
 * allocated first as ods_ra_write_begin does for a synchronous write
 * (which left that to this way). */
static bool to_engine(struct ods_io *io)
{
	ods_ra_write_allocate(io);
	return false;
}

bool ods_stage_write_caller(struct ods_stage *s, struct ods_io *io)
{
	struct ods_stage_wr *w = s->wr;
	if (!ods_stage_write_caller_ok(io))
		return false;
	/* A lone writer only: one caller at a time, and only while no other
	 * write of the file runs (this one counts from ods_ra_write_begin).
	 * A lone synchronous writer gets the disk's best shape, large writes
	 * one after another; several writing at once already keep the disk
	 * busy through the engine, which spreads their chunks over every
	 * worker (H200 probe, 4 GiB: 1 thread x 16 MiB calls 2096 MiB/s this
	 * way against 1711-1806 through the engine; 8 threads 1980 with 8 MiB
	 * pieces, 973 with 16 MiB, against 1809-2069 through the engine).
	 * With busy alone, whichever of write8t's 8 threads found it free
	 * wrote this way, into a range not allocated first, beside the
	 * engine's writes of the others: 1803 MiB/s against 2158 with every
	 * write through the engine (sweep 62972db, OPENDS_WRITE_PIECE=0). */
	if (!w || ods_ra_writes_running(io) > 1 || atomic_exchange_explicit(&w->busy, true, memory_order_acquire))
		return to_engine(io);
	int dfd = ods_handle_fd_direct(io->fh);
	char *b = dfd >= 0 ? buf_get(w, s->accel) : NULL;
	ssize_t r = ODS_NOT_INLINE;
	if (b) {
		r = run(io, s->accel, w->piece, b, dfd);
		buf_put(w, b);
	}
	atomic_store_explicit(&w->busy, false, memory_order_release);
	if (r == ODS_NOT_INLINE)
		return to_engine(io);
	atomic_fetch_add_explicit(&ods_stage_caller_writes, 1, memory_order_relaxed);
	ods_io_complete(io, r);
	return true;
}
