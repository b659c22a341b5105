/*
 * The CUDA layer's synchronous and peer copies (cuda.c has the devices,
 * memory and lanes; cuda_int.h what they share).
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_int.h"

#define C ods_cuda

/* ---- synchronous copies ------------------------------------------------------
 * On library-owned non-blocking streams of the buffer's device, never on a
 * legacy default stream: a caller's default stream may be held by a stream
 * operation of ours (waiting for its flag) while a worker copies for that
 * very operation, and a copy queued behind the wait would never run.
 * SYNC_STREAMS streams per device, each used by one copy at a time. (A
 * caller's small copy to the device may go by cuMemcpyHtoD instead, an
 * A/B switch: see ods_cu_copy_to_device_on.) */

/* Make p's context current for a call on the calling thread: pushed
 * (*pushed, pop after) unless it is current already, as it is for most
 * callers, whose device's primary context is current (a thread-local read
 * against a push and a pop). 0 or a code. */
int ods_cu_enter(struct place *p, bool *pushed)
{
	CUcontext cur = NULL;
	*pushed = !(ods_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == p->ctx);
	return *pushed ? ods_cu_push(p) : 0;
}

/* Queue the copy on one of p's sync streams, whose lock stays held until
 * copy_wait. */
static int copy_begin_at(struct place *p, void *dst, const void *src, size_t n, bool to_dev, struct ods_copy_op *op)
{
	static atomic_uint rr;
	op->a = NULL;
	bool pushed;
	int rc = ods_cu_enter(p, &pushed);
	if (rc)
		return rc;
	/* a free stream first: a copy begun and not yet ended holds its
	 * stream while its thread works (stage_wr.c writes a piece to the
	 * disk meanwhile, milliseconds), and another thread's copy must not
	 * queue behind that by the turn of the round robin */
	unsigned i0 = atomic_fetch_add_explicit(&rr, 1, memory_order_relaxed) % SYNC_STREAMS, i = i0;
	for (unsigned k = 0;; k++) {
		if (k == SYNC_STREAMS) {
			i = i0;
			pthread_mutex_lock(&p->sync_lock[i]);
			break;
		}
		i = (i0 + k) % SYNC_STREAMS;
		if (pthread_mutex_trylock(&p->sync_lock[i]) == 0)
			break;
	}
	CUresult r = CUDA_SUCCESS;
	if (!p->sync_stream[i])
		r = ods_cu.cuStreamCreate(&p->sync_stream[i], CU_STREAM_NON_BLOCKING);
	if (r == CUDA_SUCCESS)
		r = to_dev ? ods_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, n, p->sync_stream[i])
			   : ods_cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, n, p->sync_stream[i]);
	if (pushed)
		ods_cu_pop();
	if (r != CUDA_SUCCESS) {
		pthread_mutex_unlock(&p->sync_lock[i]);
		return ods_cu_fail(r, to_dev ? "copy to device" : "copy to host");
	}
	op->a = p;
	op->i = i;
	return 0;
}

/* The same with the device found from the pointer; op->a NULL: done
 * already (not device memory). */
static int copy_begin(void *dst, const void *src, size_t n, bool to_dev, struct ods_copy_op *op)
{
	op->a = NULL;
	int pl = ods_cu_place_of_ptr(to_dev ? dst : src);
	struct place *p = pl < 0 ? NULL : ods_cu_place((unsigned)pl);
	if (!p) {
		if (pl != -1)
			return OPENDS_CONTEXT_MISMATCH; /* detail set by place_of_ptr */
		/* not device memory after all (a host target under the cuda
		 * layer, registered as device): a plain copy */
		memcpy(dst, src, n);
		return 0;
	}
	return copy_begin_at(p, dst, src, n, to_dev, op);
}

int ods_cu_copy_end(struct ods_copy_op *op)
{
	struct place *p = op->a;
	if (!p)
		return 0;
	bool pushed;
	int rc = ods_cu_enter(p, &pushed);
	/* (waited for either way: the stream names its context, and the
	 * caller may reuse the source once this returns) */
	CUresult r = ods_cu.cuStreamSynchronize(p->sync_stream[op->i]);
	pthread_mutex_unlock(&p->sync_lock[op->i]);
	if (rc)
		return rc;
	if (pushed)
		ods_cu_pop();
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "waiting for a copy");
}

static int sync_copy(void *dst, const void *src, size_t n, bool to_dev)
{
	struct ods_copy_op op;
	int rc = copy_begin(dst, src, n, to_dev, &op);
	return rc ? rc : ods_cu_copy_end(&op);
}

int ods_cu_copy_to_device(void *dst, const void *src, size_t n)
{
	return sync_copy(dst, src, n, true);
}

int ods_cu_copy_to_host(void *dst, const void *src, size_t n)
{
	return sync_copy(dst, src, n, false);
}

/* dev: the place classify gave for dst; no second lookup of dst */
int ods_cu_copy_to_device_begin(unsigned dev, void *dst, const void *src, size_t n, struct ods_copy_op *op)
{
	struct place *p = ods_cu_place(dev);
	return p ? copy_begin_at(p, dst, src, n, true, op) : copy_begin(dst, src, n, true, op);
}

int ods_cu_copy_to_host_begin(unsigned dev, void *dst, const void *src, size_t n, struct ods_copy_op *op)
{
	struct place *p = ods_cu_place(dev);
	return p ? copy_begin_at(p, dst, src, n, false, op) : copy_begin(dst, src, n, false, op);
}

/* A small synchronous copy on a caller's thread (issue 17's files1t: the
 * inline path copies each hot small file once). Queued on a sync stream
 * and waited for, it costs a lock, the async call and a stream
 * synchronisation, where the plain loop's cuMemcpyHtoD costs one call
 * (small's probe: ~1.5-2 us a copy, the whole files1t gap). A/B switch,
 * read at open, OPENDS_CUDA_SYNC_COPY:
 *   stream  (default, SC_DEFAULT) the sync stream as above;
 *   ptds    cuMemcpyHtoD on the calling thread's per-thread default stream
 *           (cuMemcpyHtoD_v2_ptds): synchronous, ordered with no stream of
 *           ours nor the caller's non-blocking streams; like every
 *           per-thread default stream it waits for the legacy default
 *           stream's earlier work;
 *   legacy  cuMemcpyHtoD on the legacy default stream (waits for the
 *           context's blocking streams too).
 * Only copies of at most OPENDS_CUDA_SYNC_COPY_MAX bytes (default 1 MiB,
 * the inline limit), and never on a library thread (ods_tl_library_thread:
 * every thread ods_thread_start made, the pool's and the stream dispatcher's
 * too; ods_cu_tl_worker: threads cuda_thread_attach set up): a stream
 * operation of ours may hold the caller's legacy stream waiting for a
 * worker's copy, and a worker's copy queued behind that wait would never
 * run. A caller's thread only waits for its own earlier default-stream
 * work, as its own cuMemcpyHtoD would. */
enum { SC_STREAM, SC_PTDS, SC_LEGACY };
#define SC_DEFAULT "stream" /* unset or not one of the three */
static int sc_way;
static size_t sc_max = (size_t)1 << 20;
static __typeof__(cuMemcpyHtoD) *htod_ptds;
__thread bool ods_cu_tl_worker;

void ods_cu_sync_copy_setup(void)
{
	const char *v = getenv("OPENDS_CUDA_SYNC_COPY");
	if (!v || (strcmp(v, "stream") && strcmp(v, "ptds") && strcmp(v, "legacy")))
		v = SC_DEFAULT;
	htod_ptds = (__typeof__(htod_ptds))dlsym(ods_cu_min_library(), "cuMemcpyHtoD_v2_ptds");
	sc_way = !strcmp(v, "legacy") ? SC_LEGACY : !strcmp(v, "ptds") && htod_ptds ? SC_PTDS : SC_STREAM;
	const char *m = getenv("OPENDS_CUDA_SYNC_COPY_MAX");
	char *end;
	unsigned long long k = m ? strtoull(m, &end, 0) : 0;
	sc_max = m && *m && !*end ? (size_t)k : (size_t)1 << 20;
}

static int copy_plain(struct place *p, void *dst, const void *src, size_t n)
{
	bool pushed;
	int rc = ods_cu_enter(p, &pushed);
	if (rc)
		return rc;
	CUresult r = (sc_way == SC_PTDS ? htod_ptds : ods_cu.cuMemcpyHtoD)((CUdeviceptr)(uintptr_t)dst, src, n);
	if (pushed)
		ods_cu_pop();
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuMemcpyHtoD");
}

int ods_cu_copy_to_device_on(unsigned dev, void *dst, const void *src, size_t n)
{
	struct place *p;
	if (sc_way != SC_STREAM && n <= sc_max && !ods_cu_tl_worker && !ods_tl_library_thread && (p = ods_cu_place(dev)))
		return copy_plain(p, dst, src, n);
	struct ods_copy_op op;
	int rc = ods_cu_copy_to_device_begin(dev, dst, src, n, &op);
	return rc ? rc : ods_cu_copy_end(&op);
}

/* ---- peer copies ------------------------------------------------------------ */

/* caller holds d->lock: give d's context access to s's memory, and s's to
 * d's, where the devices can (once per pair); else cuMemcpyPeerAsync
 * stages through the host by itself. */
static void peers_enable(struct place *d, unsigned dst, struct place *s, unsigned src)
{
	if (d->peers_tried & (1ull << src))
		return;
	d->peers_tried |= 1ull << src;
	int can = 0;
	if (d->cudev == s->cudev ||
	    ods_cu.cuDeviceCanAccessPeer(&can, d->cudev, s->cudev) != CUDA_SUCCESS || !can)
		return;
	(void)dst;
	if (ods_cu.cuCtxPushCurrent(d->ctx) == CUDA_SUCCESS) {
		ods_cu.cuCtxEnablePeerAccess(s->ctx, 0); /* ALREADY_ENABLED is fine */
		ods_cu_pop();
	}
	if (ods_cu.cuCtxPushCurrent(s->ctx) == CUDA_SUCCESS) {
		ods_cu.cuCtxEnablePeerAccess(d->ctx, 0);
		ods_cu_pop();
	}
}

int ods_cu_peer_copy(unsigned dst_dev, void *dst, unsigned src_dev, const void *src, size_t n)
{
	struct place *d = ods_cu_place(dst_dev), *s = ods_cu_place(src_dev);
	if (!d || !s)
		return ods_fail(OPENDS_INVALID_VALUE, "cuda: peer copy between unknown devices %u and %u", src_dev,
				dst_dev);
	pthread_mutex_lock(&d->lock);
	peers_enable(d, dst_dev, s, src_dev);
	int rc = ods_cu_push(d);
	if (rc) {
		pthread_mutex_unlock(&d->lock);
		return rc;
	}
	CUresult r = CUDA_SUCCESS;
	if (!d->peer_stream)
		r = ods_cu.cuStreamCreate(&d->peer_stream, CU_STREAM_NON_BLOCKING);
	if (r == CUDA_SUCCESS)
		r = d == s ? ods_cu.cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n,
						       d->peer_stream)
			   : ods_cu.cuMemcpyPeerAsync((CUdeviceptr)(uintptr_t)dst, d->ctx, (CUdeviceptr)(uintptr_t)src,
						       s->ctx, n, d->peer_stream);
	ods_cu_pop();
	pthread_mutex_unlock(&d->lock);
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuMemcpyPeerAsync");
}

int ods_cu_peer_wait(unsigned dst_dev)
{
	struct place *d = ods_cu_place(dst_dev);
	if (!d)
		return ods_fail(OPENDS_INVALID_VALUE, "cuda: no device %u", dst_dev);
	pthread_mutex_lock(&d->lock);
	CUstream st = d->peer_stream;
	pthread_mutex_unlock(&d->lock);
	if (!st)
		return 0;
	int rc = ods_cu_push(d);
	if (rc)
		return rc;
	CUresult r = ods_cu.cuStreamSynchronize(st);
	ods_cu_pop();
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "waiting for peer copies");
}
