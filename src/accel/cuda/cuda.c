/*
 * The CUDA accelerator layer over the driver API, loaded at run time by
 * src/vendor/cuda_api.c: the library builds against cuda.h alone and runs
 * (falling back to the host layer under OPENDS_ACCEL=auto) where no driver
 * is installed.
 *
 * Contexts: the context current on the thread that opens the driver is
 * captured; with none, the primary context of device 0 is retained and
 * used. Library threads (I/O workers, the stream dispatcher) make it
 * current; a caller's thread must have it or no context current.
 *
 * Streams: the core builds each stream operation from commands queued on
 * the caller's stream (src/core/stream.c): host functions
 * (cuLaunchHostFunc), copies, and gates. A gate is a pair of 32-bit flags
 * in mapped pinned memory: the stream waits until the host writes 1 to the
 * first (cuStreamWaitValue32), then writes 1 to the second, which tells
 * the host it is past the wait and the gate can be reused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ods.h"
#include "cuda_api.h"

/* gates: a flag pair in mapped pinned memory */
struct gate {
	volatile uint32_t *go;      /* host writes 1: the stream may go on */
	volatile uint32_t *passed;  /* stream writes 1: it is past the wait */
	CUdeviceptr go_dev, passed_dev;
	struct gate *next;          /* free list */
	bool in_use;
	bool waited;                /* a stream wait on it is queued: it comes back
				       when the stream is past it (passed), not
				       by gate_put; counters and gates never
				       waited on come back by gate_put only */
};

#define GATE_BLOCK 256
#define SYNC_STREAMS 8
struct gblock {
	struct gblock *next;
	uint32_t *flags; /* 2 per gate, cuMemHostAlloc'ed */
	struct gate g[GATE_BLOCK];
};

static struct {
	CUcontext ctx;
	CUdevice dev;
	bool own_primary;

	pthread_mutex_t lock;  /* gates; held across CUDA calls */
	struct gblock *blocks;
	struct gate *free_gates;

	pthread_mutex_t sync_lock[SYNC_STREAMS]; /* synchronous copies (sync_copy) */
	CUstream sync_stream[SYNC_STREAMS];
} C;

static int cu_fail(CUresult r, const char *what)
{
	const char *s = NULL;
	if (ods_cu.cuGetErrorString)
		ods_cu.cuGetErrorString(r, &s);
	return ods_fail(OPENDS_DEVICE_DRIVER_ERROR, "cuda: %s failed: %s (CUresult %d)", what, s ? s : "?", (int)r);
}

/* Make the library's context current on a thread that has none, for the
 * length of one call; returns whether it pushed. */
static bool enter(void)
{
	CUcontext cur = NULL;
	if (ods_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur)
		return false;
	return ods_cu.cuCtxPushCurrent(C.ctx) == CUDA_SUCCESS;
}

static void leave(bool pushed)
{
	CUcontext dummy;
	if (pushed)
		ods_cu.cuCtxPopCurrent(&dummy);
}

/* ---- open / close -------------------------------------------------------- */

static int cuda_open(const struct ods_config *cfg, char *why, size_t why_len)
{
	(void)cfg;
	memset(&C, 0, sizeof(C));
	switch (ods_cu_load(why, why_len)) {
	case ODS_CU_OK:
		break;
	case ODS_CU_NO_DEVICE:
		return OPENDS_DEVICE_NOT_FOUND;
	default:
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	CUresult r;
	CUcontext cur = NULL;
	if ((r = ods_cu.cuCtxGetCurrent(&cur)) == CUDA_SUCCESS && cur) {
		C.ctx = cur;
	} else {
		if ((r = ods_cu.cuDeviceGet(&C.dev, 0)) != CUDA_SUCCESS ||
		    (r = ods_cu.cuDevicePrimaryCtxRetain(&C.ctx, C.dev)) != CUDA_SUCCESS) {
			const char *s = NULL;
			ods_cu.cuGetErrorString(r, &s);
			snprintf(why, why_len, "no context current and device 0's primary context unusable: %s",
				 s ? s : "unknown error");
			return OPENDS_DEVICE_NOT_FOUND;
		}
		C.own_primary = true;
	}
	pthread_mutex_init(&C.lock, NULL);
	for (int i = 0; i < SYNC_STREAMS; i++)
		pthread_mutex_init(&C.sync_lock[i], NULL);
	return 0;
}

static void cuda_close(void)
{
	/* Every operation has ended (the core drained streams); a stream may
	 * still be about to read a flag. Free a block only once each of its
	 * gates is past its wait; one whose stream never gets there (a
	 * caller's stream held forever) is leaked, not freed under the GPU. */
	bool pushed = enter();
	for (struct gblock *b = C.blocks, *n; b; b = n) {
		n = b->next;
		bool busy = true;
		for (int tries = 0; busy && tries < 10000; tries++) {
			busy = false;
			for (int i = 0; i < GATE_BLOCK; i++)
				if (b->g[i].in_use && b->g[i].waited &&
				    !__atomic_load_n(b->g[i].passed, __ATOMIC_ACQUIRE))
					busy = true;
			if (busy)
				usleep(1000);
		}
		if (!busy) {
			ods_cu.cuMemFreeHost(b->flags);
			free(b);
		}
	}
	for (int i = 0; i < SYNC_STREAMS; i++) {
		if (C.sync_stream[i])
			ods_cu.cuStreamDestroy(C.sync_stream[i]);
		pthread_mutex_destroy(&C.sync_lock[i]);
	}
	leave(pushed);
	if (C.own_primary)
		ods_cu.cuDevicePrimaryCtxRelease(C.dev);
	pthread_mutex_destroy(&C.lock);
	memset(&C, 0, sizeof(C));
}

/* ---- memory ------------------------------------------------------------- */

static enum ods_mem_kind cuda_classify(const void *p)
{
	unsigned int type = 0;
	CUresult r = ods_cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p);
	if (r == CUDA_ERROR_INVALID_CONTEXT) {
		bool pushed = enter();
		r = ods_cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p);
		leave(pushed);
	}
	/* device and managed memory report DEVICE; pinned host memory HOST; an
	 * unknown pointer fails the call and is plain host memory */
	return r == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE ? ODS_MEM_DEVICE : ODS_MEM_HOST;
}

static int cuda_check_context(void)
{
	CUcontext cur = NULL;
	if (ods_cu.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur || cur == C.ctx)
		return 0;
	return OPENDS_CONTEXT_MISMATCH;
}

/* Device memory needs nothing. Host memory is not pinned either: the
 * library never lets the GPU copy from or to a caller's host buffer (host
 * targets are read straight into by the kernel, or memcpy'd from a slot),
 * so pinning it would cost without making anything faster. */
static int cuda_buf_register(void *p, size_t n, enum ods_mem_kind k, void **priv)
{
	(void)p;
	(void)n;
	(void)k;
	*priv = NULL;
	return 0;
}

static void cuda_buf_deregister(void *p, size_t n, enum ods_mem_kind k, void *priv)
{
	(void)p;
	(void)n;
	(void)k;
	(void)priv;
}

/* Synchronous copies run on library-owned non-blocking streams, never on
 * the legacy default stream: a caller's default stream may be held by a
 * stream operation of ours (waiting for its flag) while a worker copies for
 * that very operation, and a copy queued behind the wait would never run.
 * SYNC_STREAMS streams, each used by one copy at a time, so threads copying
 * at once do not queue behind each other. */

static int sync_copy(void *dst, const void *src, size_t n, bool to_dev)
{
	static atomic_uint rr;
	bool pushed = enter();
	unsigned i = atomic_fetch_add_explicit(&rr, 1, memory_order_relaxed) % SYNC_STREAMS;
	pthread_mutex_lock(&C.sync_lock[i]);
	CUresult r = CUDA_SUCCESS;
	if (!C.sync_stream[i])
		r = ods_cu.cuStreamCreate(&C.sync_stream[i], CU_STREAM_NON_BLOCKING);
	if (r == CUDA_SUCCESS)
		r = to_dev ? ods_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, n, C.sync_stream[i])
			   : ods_cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, n, C.sync_stream[i]);
	if (r == CUDA_SUCCESS)
		r = ods_cu.cuStreamSynchronize(C.sync_stream[i]);
	pthread_mutex_unlock(&C.sync_lock[i]);
	leave(pushed);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, to_dev ? "copy to device" : "copy to host");
}

static int cuda_copy_to_device(void *dst, const void *src, size_t n)
{
	return sync_copy(dst, src, n, true);
}

static int cuda_copy_to_host(void *dst, const void *src, size_t n)
{
	return sync_copy(dst, src, n, false);
}

/* ---- the staging pipeline -------------------------------------------------- */

static int cuda_thread_attach(void)
{
	CUresult r = ods_cu.cuCtxSetCurrent(C.ctx);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuCtxSetCurrent");
}

static void cuda_thread_detach(void)
{
	ods_cu.cuCtxSetCurrent(NULL);
}

/* Anonymous memory, then registered: io_uring accepts it as fixed buffers
 * on every kernel, where cuMemHostAlloc memory is file-backed and refused
 * by older ones. */
static void *cuda_pinned_alloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	bool pushed = enter();
	CUresult r = ods_cu.cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_PORTABLE);
	leave(pushed);
	if (r != CUDA_SUCCESS) {
		cu_fail(r, "cuMemHostRegister");
		munmap(p, n);
		return NULL;
	}
	return p;
}

static void cuda_pinned_free(void *p, size_t n)
{
	bool pushed = enter();
	ods_cu.cuMemHostUnregister(p);
	leave(pushed);
	munmap(p, n);
}

struct lane {
	CUstream s;
	unsigned n;
	CUevent ev[];
};

static void lane_free(struct lane *l)
{
	for (unsigned i = 0; i < l->n; i++)
		if (l->ev[i])
			ods_cu.cuEventDestroy(l->ev[i]);
	if (l->s)
		ods_cu.cuStreamDestroy(l->s);
	free(l);
}

static void *cuda_lane_create(unsigned nfences)
{
	struct lane *l = calloc(1, sizeof(*l) + nfences * sizeof(CUevent));
	if (!l)
		return NULL;
	l->n = nfences;
	CUresult r = ods_cu.cuStreamCreate(&l->s, CU_STREAM_NON_BLOCKING);
	for (unsigned i = 0; r == CUDA_SUCCESS && i < nfences; i++)
		r = ods_cu.cuEventCreate(&l->ev[i], CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS) {
		cu_fail(r, "creating a copy stream and its events");
		lane_free(l);
		return NULL;
	}
	return l;
}

static void cuda_lane_destroy(void *lane)
{
	struct lane *l = lane;
	ods_cu.cuStreamSynchronize(l->s);
	lane_free(l);
}

static int cuda_copy_to_device_async(void *lane, void *dst, const void *src, size_t n)
{
	struct lane *l = lane;
	CUresult r = ods_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, n, l->s);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuMemcpyHtoDAsync");
}

static int cuda_copy_to_host_async(void *lane, void *dst, const void *src, size_t n)
{
	struct lane *l = lane;
	CUresult r = ods_cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, n, l->s);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuMemcpyDtoHAsync");
}

static int cuda_fence_record(void *lane, unsigned i)
{
	struct lane *l = lane;
	CUresult r = ods_cu.cuEventRecord(l->ev[i], l->s);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuEventRecord");
}

static int cuda_fence_query(void *lane, unsigned i)
{
	struct lane *l = lane;
	CUresult r = ods_cu.cuEventQuery(l->ev[i]);
	if (r == CUDA_SUCCESS)
		return 1;
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	return -cu_fail(r, "cuEventQuery");
}

static int cuda_fence_wait(void *lane, unsigned i)
{
	struct lane *l = lane;
	CUresult r = ods_cu.cuEventSynchronize(l->ev[i]);
	return r == CUDA_SUCCESS ? 0 : -cu_fail(r, "cuEventSynchronize");
}

/* ---- stream-ordered operations -------------------------------------------- */

static int cuda_stream_call(void *stream, void (*fn)(void *arg), void *arg)
{
	bool pushed = enter();
	CUresult r = ods_cu.cuLaunchHostFunc((CUstream)stream, fn, arg);
	leave(pushed);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuLaunchHostFunc");
}

/* caller holds C.lock */
static struct gate *gate_take(void)
{
	if (!C.free_gates) {
		/* take back gates whose stream is past their wait */
		for (struct gblock *b = C.blocks; b; b = b->next)
			for (int i = 0; i < GATE_BLOCK; i++) {
				struct gate *g = &b->g[i];
				if (g->in_use && g->waited && __atomic_load_n(g->passed, __ATOMIC_ACQUIRE)) {
					g->in_use = false;
					g->next = C.free_gates;
					C.free_gates = g;
				}
			}
	}
	if (!C.free_gates) {
		struct gblock *b = calloc(1, sizeof(*b));
		if (!b)
			return NULL;
		void *f = NULL;
		bool pushed = enter();
		CUresult res = ods_cu.cuMemHostAlloc(&f, 2 * GATE_BLOCK * sizeof(uint32_t),
						CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
		CUdeviceptr d = 0;
		if (res == CUDA_SUCCESS)
			res = ods_cu.cuMemHostGetDevicePointer(&d, f, 0);
		if (res != CUDA_SUCCESS) {
			cu_fail(res, "cuMemHostAlloc of stream gates");
			if (f)
				ods_cu.cuMemFreeHost(f);
			leave(pushed);
			free(b);
			return NULL;
		}
		leave(pushed);
		b->flags = f;
		for (int i = 0; i < GATE_BLOCK; i++) {
			struct gate *g = &b->g[i];
			g->go = &b->flags[2 * i];
			g->passed = &b->flags[2 * i + 1];
			g->go_dev = d + (CUdeviceptr)(2 * i) * sizeof(uint32_t);
			g->passed_dev = g->go_dev + sizeof(uint32_t);
			g->next = C.free_gates;
			C.free_gates = g;
		}
		b->next = C.blocks;
		C.blocks = b;
	}
	struct gate *g = C.free_gates;
	C.free_gates = g->next;
	g->in_use = true;
	g->waited = false;
	*g->go = 0;
	*g->passed = 0;
	return g;
}

static void *cuda_gate_get(void)
{
	pthread_mutex_lock(&C.lock);
	struct gate *g = gate_take();
	pthread_mutex_unlock(&C.lock);
	/* the flags were zeroed by plain stores; order them before a stream
	 * can read them */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return g;
}

static void cuda_gate_put(void *gate)
{
	struct gate *g = gate;
	pthread_mutex_lock(&C.lock);
	g->in_use = false;
	g->next = C.free_gates;
	C.free_gates = g;
	pthread_mutex_unlock(&C.lock);
}

static int cuda_stream_wait(void *stream, void *gate)
{
	struct gate *g = gate;
	CUstream s = stream;
	bool pushed = enter();
	CUresult r = ods_cu.cuStreamWaitValue32(s, g->go_dev, 1, CU_STREAM_WAIT_VALUE_EQ);
	if (r != CUDA_SUCCESS) {
		leave(pushed);
		return cu_fail(r, "cuStreamWaitValue32"); /* never waited: a leak, not a hazard */
	}
	/* From here the stream may read the flags until it is past the wait.
	 * Without the "passed" write below, that is never known: the gate is
	 * then never reused, and close leaks its block rather than free it. */
	g->waited = true;
	r = ods_cu.cuStreamWriteValue32(s, g->passed_dev, 1, CU_STREAM_WRITE_VALUE_DEFAULT);
	leave(pushed);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuStreamWriteValue32");
}

static void cuda_gate_open(void *gate)
{
	struct gate *g = gate;
	/* everything the host wrote before (results, staging) is visible
	 * before the stream can move on */
	__atomic_store_n(g->go, 1, __ATOMIC_RELEASE);
}

/* Counters are gates whose second word the stream writes with
 * stream_mark (counter_get and counter_put are gate_get and gate_put).
 * Nothing ever waits on a counter, so the scan for passed gates leaves
 * it alone. */
static int cuda_stream_mark(void *stream, void *counter, uint32_t value)
{
	struct gate *g = counter;
	bool pushed = enter();
	CUresult r = ods_cu.cuStreamWriteValue32((CUstream)stream, g->passed_dev, value, CU_STREAM_WRITE_VALUE_DEFAULT);
	leave(pushed);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuStreamWriteValue32");
}

static uint32_t cuda_counter_read(void *counter)
{
	struct gate *g = counter;
	return __atomic_load_n(g->passed, __ATOMIC_ACQUIRE);
}

static int cuda_stream_copy(void *stream, void *dst, const void *src, size_t n, bool to_device)
{
	bool pushed = enter();
	CUresult r = to_device ? ods_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, n, (CUstream)stream)
			       : ods_cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, n, (CUstream)stream);
	leave(pushed);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync");
}

static int cuda_stream_create(void **stream)
{
	bool pushed = enter();
	CUstream s = NULL;
	CUresult r = ods_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	leave(pushed);
	if (r != CUDA_SUCCESS)
		return cu_fail(r, "cuStreamCreate");
	*stream = s;
	return 0;
}

static int cuda_stream_sync(void *stream)
{
	bool pushed = enter();
	CUresult r = ods_cu.cuStreamSynchronize((CUstream)stream);
	leave(pushed);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuStreamSynchronize");
}

static int cuda_stream_destroy(void *stream)
{
	bool pushed = enter();
	CUresult r = ods_cu.cuStreamSynchronize((CUstream)stream);
	if (r == CUDA_SUCCESS)
		r = ods_cu.cuStreamDestroy((CUstream)stream);
	leave(pushed);
	return r == CUDA_SUCCESS ? 0 : cu_fail(r, "cuStreamDestroy");
}

const struct ods_accel ods_accel_cuda = {
	.name = "cuda",
	.open = cuda_open,
	.close = cuda_close,
	.classify = cuda_classify,
	.check_context = cuda_check_context,
	.buf_register = cuda_buf_register,
	.buf_deregister = cuda_buf_deregister,
	.copy_to_device = cuda_copy_to_device,
	.copy_to_host = cuda_copy_to_host,
	.thread_attach = cuda_thread_attach,
	.thread_detach = cuda_thread_detach,
	.pinned_alloc = cuda_pinned_alloc,
	.pinned_free = cuda_pinned_free,
	.lane_create = cuda_lane_create,
	.lane_destroy = cuda_lane_destroy,
	.copy_to_device_async = cuda_copy_to_device_async,
	.copy_to_host_async = cuda_copy_to_host_async,
	.fence_record = cuda_fence_record,
	.fence_query = cuda_fence_query,
	.fence_wait = cuda_fence_wait,
	.stream_create = cuda_stream_create,
	.stream_destroy = cuda_stream_destroy,
	.stream_sync = cuda_stream_sync,
	.stream_call = cuda_stream_call,
	.gate_get = cuda_gate_get,
	.gate_put = cuda_gate_put,
	.stream_wait = cuda_stream_wait,
	.gate_open = cuda_gate_open,
	.stream_copy = cuda_stream_copy,
	.counter_get = cuda_gate_get,
	.counter_put = cuda_gate_put,
	.stream_mark = cuda_stream_mark,
	.counter_read = cuda_counter_read,
};
