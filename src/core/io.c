/* Validation shared by every I/O family, and the synchronous and
 * future-based calls. Streams and batches (stream.c, batch.c) build on the
 * same ods_io requests. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ods.h"

#define OFF_T_MAX ((off_t)INT64_MAX)

static const char *opname(int opcode)
{
	return opcode == OPENDS_READ ? "read" : "write";
}

ssize_t ods_io_prepare(struct ods_io *io, int opcode, opends_handle_t fh, const void *buf, size_t size,
		       off_t file_offset, off_t buf_offset)
{
	const char *op = opname(opcode);
	if (!ods_is_open())
		return -ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "%s: the driver is not open", op);
	if (!fh)
		return -ods_fail(OPENDS_INVALID_VALUE, "%s: fh is NULL", op);
	struct ods_handle *h = ods_handle_lookup(fh);
	if (!h)
		return -ods_fail(OPENDS_HANDLE_NOT_REGISTERED, "%s: fh is not a registered handle", op);
	if (!buf)
		return -ods_fail(OPENDS_INVALID_VALUE, "%s: buf is NULL", op);
	if (file_offset < 0)
		return -ods_fail(OPENDS_INVALID_VALUE, "%s: file_offset %lld is negative", op, (long long)file_offset);
	if (buf_offset < 0)
		return -ods_fail(OPENDS_INVALID_VALUE, "%s: buf_offset %lld is negative", op, (long long)buf_offset);
	if (size > (size_t)SSIZE_MAX)
		return -ods_fail(OPENDS_INVALID_VALUE, "%s: size %zu is above SSIZE_MAX", op, size);
	if ((uint64_t)size > (uint64_t)(OFF_T_MAX - file_offset))
		return -ods_fail(OPENDS_INVALID_VALUE, "%s: file_offset + size overflows off_t", op);
	uintptr_t b = (uintptr_t)buf;
	if ((uint64_t)buf_offset > UINTPTR_MAX - b || (uintptr_t)buf_offset + b > UINTPTR_MAX - size)
		return -ods_fail(OPENDS_INVALID_VALUE, "%s: buf + buf_offset + size wraps the address space", op);
	uintptr_t t = b + (uintptr_t)buf_offset;

	/* A target that starts inside a registered range must end inside it;
	 * the registered range also tells the memory kind without asking the
	 * accelerator. */
	struct ods_region r;
	enum ods_mem_kind kind;
	unsigned dev = 0;
	/* the range holding the target decides; else the one holding buf */
	if (ods_region_find(t, &r) || (b != t && ods_region_find(b, &r))) {
		if (t < r.base || t + size > r.base + r.size)
			return -ods_fail(OPENDS_INVALID_MAPPING_RANGE,
					 "%s: buf + buf_offset + size runs past the registered range [%p, +%zu)", op,
					 (void *)r.base, r.size);
		kind = r.kind;
		dev = r.dev;
	} else {
		/* the device (and context) come from the pointer, whatever
		 * context is current on this thread */
		kind = ods_drv.accel->classify((const void *)t, &dev);
	}
	if (kind == ODS_MEM_DEVICE && dev >= ODS_MAX_DEVICES)
		return -OPENDS_CONTEXT_MISMATCH; /* the detail set by classify */
	if (ods_drv.cfg.aligned_only && ((uint64_t)file_offset % ODS_ALIGN || size % ODS_ALIGN))
		return -ods_fail(OPENDS_INVALID_VALUE,
				 "%s: file_offset %lld or size %zu is not 4096-aligned and "
				 "OPENDS_ASSUME_ALIGNED_ONLY=1",
				 op, (long long)file_offset, size);

	memset(io, 0, sizeof(*io));
	io->fh = h;
	io->buf = (char *)t;
	io->size = size;
	io->off = file_offset;
	io->opcode = (uint8_t)opcode;
	io->mem = (uint8_t)kind;
	io->dev = (uint16_t)dev;

	/* The fd's access mode is the caller's promise of direction; every
	 * backend keeps it, including those that reopen the file. */
	if ((opcode == OPENDS_READ && h->accmode == O_WRONLY) || (opcode == OPENDS_WRITE && h->accmode == O_RDONLY)) {
		/* static, so a future can repeat it when awaited elsewhere */
		io->why = h->src ? (opcode == OPENDS_READ ? "read: the source was opened write-only (O_WRONLY)"
							  : "write: the source is read-only (OPENDS_SOURCE_RDONLY, "
							    "O_RDONLY, or no write form)")
			  : opcode == OPENDS_READ ? "read: the file descriptor was opened write-only"
						  : "write: the file descriptor was opened read-only";
		return -ods_fail(EBADF, "%s", io->why);
	}
	return 0;
}

atomic_long ods_inflight;

/* ---- caller statistics (ods.h) ------------------------------------------ */

atomic_bool ods_cstats_on;
static struct {
	atomic_ulong n, ns;
} cstats[ODS_CS_N];

uint64_t ods_cs_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void ods_cs_add(unsigned k, uint64_t t0)
{
	uint64_t dt = ods_cs_now() - t0;
	atomic_fetch_add_explicit(&cstats[k].n, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&cstats[k].ns, dt, memory_order_relaxed);
}

void ods_cstats_open(void)
{
	const char *v = getenv("OPENDS_CALLER_STATS");
	atomic_store(&ods_cstats_on, v && !strcmp(v, "1"));
	for (unsigned k = 0; k < ODS_CS_N; k++) {
		atomic_store(&cstats[k].n, 0);
		atomic_store(&cstats[k].ns, 0);
	}
}

void ods_cstats_close(void)
{
	static const char *const names[ODS_CS_N] = { "register", "deregister", "sync_read", "async_submit",
						     "await", "await_not_done", "cachestat" };
	if (!atomic_load(&ods_cstats_on))
		return;
	char line[512];
	int len = snprintf(line, sizeof(line), "opends caller stats:");
	for (unsigned k = 0; k < ODS_CS_N && len > 0 && (size_t)len < sizeof(line); k++) {
		unsigned long n = atomic_load(&cstats[k].n), ns = atomic_load(&cstats[k].ns);
		len += snprintf(line + len, sizeof(line) - (size_t)len, " %s %lu x %.2f us (%.1f ms);", names[k], n,
				n ? (double)ns / (double)n / 1e3 : 0.0, (double)ns / 1e6);
	}
	fprintf(stderr, "%s\n", line);
	atomic_store(&ods_cstats_on, false);
}

/* What ods_io_complete takes back: every io counts in ods_inflight, one
 * that is not synchronous in its handle's too (deregister waits on it). */
static void count_in(struct ods_io *io)
{
	atomic_fetch_add_explicit(&ods_inflight, 1, memory_order_relaxed);
	if (!io->sync)
		atomic_fetch_add_explicit(&io->fh->inflight, 1, memory_order_relaxed);
}

void ods_io_submit(struct ods_io *io, bool may_block)
{
	count_in(io);
	if (io->fh->src)
		ods_source_submit(io, may_block);
	else if (ods_drv.be->submit)
		ods_drv.be->submit(io, may_block);
	else
		ods_pool_push(ods_drv.pool, io, !may_block);
}

void ods_io_submit_many(struct ods_io *const *ios, unsigned n)
{
	if (!ods_drv.be->submit_many) {
		for (unsigned i = 0; i < n; i++)
			ods_io_submit(ios[i], true);
		return;
	}
	for (unsigned i = 0; i < n; i++)
		count_in(ios[i]);
	ods_drv.be->submit_many(ios, n);
}

/* ---- waiting for one request ------------------------------------------ */

enum { W_PENDING = 1, W_WAITER = 2, W_DONE = 3 };

static void wait_done(atomic_uint *state)
{
	/* A short spin catches fast completions (hot 4 KiB reads) without a
	 * futex round trip; then sleep. (A longer spin in opends_async_await,
	 * up to 50 us, ran imagenetish hot async at 17076 MiB/s against 19551
	 * without it: H200 probe 29.) */
	for (int i = 0; i < 200; i++) {
		if (atomic_load_explicit(state, memory_order_acquire) == W_DONE)
			return;
		ods_cpu_relax();
	}
	unsigned s = atomic_load_explicit(state, memory_order_acquire);
	while (s != W_DONE) {
		if (s == W_PENDING) {
			if (!atomic_compare_exchange_weak(state, &s, W_WAITER))
				continue;
			s = W_WAITER;
		}
		ods_futex_wait(state, s);
		s = atomic_load_explicit(state, memory_order_acquire);
	}
}

/* Mark done and wake a sleeper; nothing of *state is touched after the
 * exchange except its address, which the futex call only uses as a key.
 * h: a leaf io's handle, whose count drops between the two (see leaf in
 * ods.h), or NULL. */
static void signal_done_of(atomic_uint *state, struct ods_handle *h)
{
	unsigned old = atomic_exchange_explicit(state, W_DONE, memory_order_acq_rel);
	if (h)
		atomic_fetch_sub_explicit(&h->inflight, 1, memory_order_release);
	if (old == W_WAITER)
		ods_futex_wake_all(state);
}

static void signal_done(atomic_uint *state)
{
	signal_done_of(state, NULL);
}

static void sync_done(struct ods_io *io)
{
	signal_done(io->owner);
}

ssize_t ods_io_run(struct ods_io *io)
{
	const struct ods_backend *be = ods_drv.be;
	if (io->fh->src && be == &ods_backend_ref)
		return ods_source_run(io); /* the oracle runs sources synchronously */
	if (be->rw && !io->fh->src)
		return be->rw(io);
	if (be->rw_inline && !io->fh->src) {
		ssize_t r = be->rw_inline(io);
		if (r != ODS_NOT_INLINE)
			return r;
	}
	bool ra = be->readahead && !io->fh->src && io->opcode == OPENDS_READ;
	if (ra) {
		ssize_t r = ods_ra_take(io);
		if (r != ODS_NOT_INLINE)
			return r;
	}
	atomic_uint state = W_PENDING;
	io->owner = &state;
	io->done = sync_done;
	io->sync = true;
	ods_io_submit(io, true);
	if (ra) /* queued behind this read, so it does not delay it */
		ods_ra_behind(io);
	wait_done(&state);
	return io->result;
}

static ssize_t sync_rw(int opcode, opends_handle_t fh, const void *buf, size_t size, off_t file_offset,
		       off_t buf_offset)
{
	struct ods_io io;
	ssize_t r = ods_io_prepare(&io, opcode, fh, buf, size, file_offset, buf_offset);
	if (r < 0 || size == 0)
		return r;
	r = ods_io_run(&io);
	if (r < 0 && r > -OPENDS_ERRNO_MAX && io.fh->src) /* the source's error: name it */
		ods_source_fail(&io, r);
	else if (r < 0 && r > -OPENDS_ERRNO_MAX) /* the operating system's error: say where */
		ods_fail((int)-r, "%s of %zu bytes at file offset %lld failed: %s", opname(opcode), size,
			 (long long)file_offset, opends_op_status_error((int)r));
	else if (r < 0 && io.why) /* a library worker's failure, its sentence kept by the engine (stage.c):
				     the detail is per thread, and the worker's is not the caller's */
		ods_fail((int)-r, "%s of %zu bytes at file offset %lld failed: %s", opname(opcode), size,
			 (long long)file_offset, io.why);
	return r;
}

OPENDS_API ssize_t opends_sync_read(opends_handle_t fh, void *buf, size_t size, off_t file_offset, off_t buf_offset)
{
	ODS_ENTER_SSIZE("opends_sync_read");
	uint64_t t0 = ods_cs_begin();
	ssize_t r = sync_rw(OPENDS_READ, fh, buf, size, file_offset, buf_offset);
	ods_cs_end(ODS_CS_SYNC_READ, t0);
	return r;
}

OPENDS_API ssize_t opends_sync_write(opends_handle_t fh, const void *buf, size_t size, off_t file_offset,
				     off_t buf_offset)
{
	ODS_ENTER_SSIZE("opends_sync_write");
	return sync_rw(OPENDS_WRITE, fh, buf, size, file_offset, buf_offset);
}

/* ---- futures ------------------------------------------------------------ */

#define FUTURE_MAGIC 0x4f445346u /* "ODSF" */

struct ods_future {
	uint32_t magic;
	atomic_uint state;
	ssize_t result;
	const char *why; /* static detail of a failure found at submit, or of a source's failure */
};
_Static_assert(sizeof(struct ods_future) <= sizeof(opends_async_future_t), "future fits the public type");
_Static_assert(_Alignof(struct ods_future) <= _Alignof(opends_async_future_t), "future alignment");

/* OPENDS_AB_ASYNC_NOWAIT=1 (an A/B switch, read at driver open): a
 * future's request queues without waiting for room in the engine's queue
 * (its cap: threads x depth requests and as many chunks' bytes, 128 MiB by
 * default). The caller bounds what it has in flight by its own futures;
 * one that waits for room blocks per submit once 128 MiB are queued
 * (imagenetish hot async, 4096 futures of ~110 KB: about 1200 files),
 * woken by a worker's broadcast for each request it starts. The H200
 * probe decides whether the default changes. */
static bool async_nowait;

void ods_io_switches(void)
{
	const char *v = getenv("OPENDS_AB_ASYNC_NOWAIT");
	async_nowait = v && !strcmp(v, "1");
}

/* A future's request: allocated by the caller, freed by a worker, so
 * recycled (ods_recycle in ods.h) */
static struct ods_recycle future_ios = ODS_RECYCLE_INIT(sizeof(struct ods_io), 8192);

static void future_done(struct ods_io *io)
{
	struct ods_future *f = io->owner;
	struct ods_handle *h = io->leaf ? io->fh : NULL; /* a leaf's count is ours to drop */
	f->result = io->result;
	if (io->result < 0 && io->why)
		f->why = io->why; /* a source's failure, named (it lives as long as the process) */
	ods_recycle_put(&future_ios, io);
	signal_done_of(&f->state, h);
}

static opends_error_t async_rw(int opcode, opends_handle_t fh, const void *buf, size_t size, off_t file_offset,
			       off_t buf_offset, opends_async_future_t *future)
{
	const char *fn = opcode == OPENDS_READ ? "opends_async_read" : "opends_async_write";
	if (!ods_is_open())
		return ods_err(ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "%s: the driver is not open", fn), 0);
	if (!future)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "%s: future is NULL", fn), 0);
	struct ods_io *io = ods_recycle_get(&future_ios);
	if (!io)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", fn), ENOMEM);
	ssize_t r = ods_io_prepare(io, opcode, fh, buf, size, file_offset, buf_offset);
	if (r <= -OPENDS_ERRNO_MAX) {
		ods_recycle_put(&future_ios, io);
		return ods_err((int)-r, 0);
	}
	struct ods_future *f = (struct ods_future *)future;
	f->magic = FUTURE_MAGIC;
	f->why = r < 0 ? io->why : NULL;
	if (r < 0 || size == 0) {
		/* nothing to move, or an OS-level error (EBADF): the future
		 * completes at once with the result await will give */
		f->result = r;
		atomic_store_explicit(&f->state, W_DONE, memory_order_release);
		ods_recycle_put(&future_ios, io);
		return ods_ok();
	}
	atomic_store_explicit(&f->state, W_PENDING, memory_order_relaxed);
	io->owner = f;
	io->done = future_done;
	io->leaf = true;
	ods_io_submit(io, !async_nowait);
	return ods_ok();
}

OPENDS_API opends_error_t opends_async_read(opends_handle_t fh, void *buf, size_t size, off_t file_offset,
					    off_t buf_offset, opends_async_future_t *future)
{
	ODS_ENTER("opends_async_read");
	uint64_t t0 = ods_cs_begin();
	opends_error_t e = async_rw(OPENDS_READ, fh, buf, size, file_offset, buf_offset, future);
	ods_cs_end(ODS_CS_ASYNC_SUBMIT, t0);
	return e;
}

OPENDS_API opends_error_t opends_async_write(opends_handle_t fh, const void *buf, size_t size, off_t file_offset,
					     off_t buf_offset, opends_async_future_t *future)
{
	ODS_ENTER("opends_async_write");
	return async_rw(OPENDS_WRITE, fh, buf, size, file_offset, buf_offset, future);
}

static struct ods_future *future_of(opends_async_future_t *future, const char *fn)
{
	struct ods_future *f = (struct ods_future *)future;
	if (!f) {
		ods_fail(OPENDS_INVALID_VALUE, "%s: future is NULL", fn);
		return NULL;
	}
	if (f->magic != FUTURE_MAGIC) {
		ods_fail(OPENDS_INVALID_VALUE, "%s: future was never submitted", fn);
		return NULL;
	}
	return f;
}

OPENDS_API ssize_t opends_async_await(opends_async_future_t *future)
{
	struct ods_future *f = future_of(future, "opends_async_await");
	if (!f)
		return -OPENDS_INVALID_VALUE;
	uint64_t t0 = ods_cs_begin();
	bool waited = t0 && atomic_load_explicit(&f->state, memory_order_acquire) != W_DONE;
	wait_done(&f->state);
	ods_cs_end(ODS_CS_AWAIT, t0);
	if (waited)
		ods_cs_end(ODS_CS_AWAIT_WAITED, t0);
	if (f->result < 0 && f->why)
		ods_fail((int)-f->result, "opends_async_await: %s", f->why);
	else if (f->result < 0)
		ods_fail((int)-f->result, "opends_async_await: the operation failed: %s",
			 opends_op_status_error((int)f->result));
	return f->result;
}

OPENDS_API int opends_async_poll(opends_async_future_t *future)
{
	struct ods_future *f = future_of(future, "opends_async_poll");
	if (!f)
		return -OPENDS_INVALID_VALUE;
	return atomic_load_explicit(&f->state, memory_order_acquire) == W_DONE;
}
