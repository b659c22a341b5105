/*
 * Stream-ordered commands of the CUDA layer (struct ods_accel_streams):
 * the core builds each stream operation from commands queued on the
 * caller's stream (src/core/stream*.c): host functions (cuLaunchHostFunc),
 * copies, gates and counters. Each command runs in the context of the
 * stream's device (stream_device): the caller's context stack is left as
 * it was. A gate is a pair of 32-bit flags in mapped, portable pinned
 * memory: the stream waits until the host writes 1 to the first
 * (cuStreamWaitValue32), then writes 1 to the second, which tells the host
 * it is past the wait and the gate can be reused.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_int.h"

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
struct gblock {
	struct gblock *next;
	uint32_t *flags; /* 2 per gate, cuMemHostAlloc'ed */
	struct gate g[GATE_BLOCK];
};

static struct {
	pthread_mutex_t lock; /* gates; held across CUDA calls */
	struct gblock *blocks;
	struct gate *free_gates;
} G = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The driver refused cuStreamBatchMemOp on device d and the two calls
 * then worked there: a gate's wait on d takes two calls from now on. Per
 * device, not per process: one device without batched memory operations
 * (an older GPU beside an H200) must not cost the others ~1.6 us per
 * gate; and only once the two calls worked, so that INVALID_VALUE meaning
 * something else (a bad stream or context, which fails them too) leaves
 * the fused call in place. */
static atomic_bool no_batch[ODS_MAX_DEVICES];

static bool special(void *stream)
{
	return stream == NULL || stream == (void *)CU_STREAM_LEGACY || stream == (void *)CU_STREAM_PER_THREAD;
}

/* Enter the context of device dev for one command; 0 or a code. *pushed
 * says whether it pushed (the context was not current) for leave. */
static int enter(unsigned dev, void *stream, bool *pushed)
{
	struct place *p = ods_cu_place(dev);
	if (!p)
		return ods_fail(OPENDS_CONTEXT_MISMATCH, "cuda: device %u is not usable", dev);
	if (special(stream))
		__atomic_store_n(&p->null_used, true, __ATOMIC_RELAXED);
	return ods_cu_enter(p, pushed);
}

/* after enter: pop what it pushed */
static void leave(bool pushed)
{
	if (pushed)
		ods_cu_pop();
}

/* caller holds G.lock */
static struct gate *gate_take(void)
{
	if (!G.free_gates) {
		/* take back gates whose stream is past their wait */
		for (struct gblock *b = G.blocks; b; b = b->next)
			for (int i = 0; i < GATE_BLOCK; i++) {
				struct gate *g = &b->g[i];
				if (g->in_use && g->waited && __atomic_load_n(g->passed, __ATOMIC_ACQUIRE)) {
					g->in_use = false;
					g->next = G.free_gates;
					G.free_gates = g;
				}
			}
	}
	if (!G.free_gates) {
		struct gblock *b = calloc(1, sizeof(*b));
		if (!b)
			return NULL;
		void *f = NULL;
		/* made in device 0's primary context: portable and mapped, the
		 * flags are usable by every device's streams at the same
		 * (unified) address */
		CUresult res = ods_cu.cuCtxPushCurrent(ods_cuda.base);
		if (res != CUDA_SUCCESS) {
			free(b);
			ods_cu_fail(res, "cuCtxPushCurrent");
			return NULL;
		}
		res = ods_cu.cuMemHostAlloc(&f, 2 * GATE_BLOCK * sizeof(uint32_t),
						CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
		CUdeviceptr d = 0;
		if (res == CUDA_SUCCESS)
			res = ods_cu.cuMemHostGetDevicePointer(&d, f, 0);
		if (res != CUDA_SUCCESS) {
			ods_cu_fail(res, "cuMemHostAlloc of stream gates");
			if (f)
				ods_cu.cuMemFreeHost(f);
			ods_cu_pop();
			free(b);
			return NULL;
		}
		ods_cu_pop();
		b->flags = f;
		for (int i = 0; i < GATE_BLOCK; i++) {
			struct gate *g = &b->g[i];
			g->go = &b->flags[2 * i];
			g->passed = &b->flags[2 * i + 1];
			g->go_dev = d + (CUdeviceptr)(2 * i) * sizeof(uint32_t);
			g->passed_dev = g->go_dev + sizeof(uint32_t);
			g->next = G.free_gates;
			G.free_gates = g;
		}
		b->next = G.blocks;
		G.blocks = b;
	}
	struct gate *g = G.free_gates;
	G.free_gates = g->next;
	g->in_use = true;
	g->waited = false;
	*g->go = 0;
	*g->passed = 0;
	return g;
}

static void *cuda_gate_get(void)
{
	pthread_mutex_lock(&G.lock);
	struct gate *g = gate_take();
	pthread_mutex_unlock(&G.lock);
	/* the flags were zeroed by plain stores; order them before a stream
	 * can read them */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return g;
}

static void cuda_gate_put(void *gate)
{
	struct gate *g = gate;
	pthread_mutex_lock(&G.lock);
	g->in_use = false;
	g->next = G.free_gates;
	G.free_gates = g;
	pthread_mutex_unlock(&G.lock);
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
static uint32_t cuda_counter_read(void *counter)
{
	struct gate *g = counter;
	return __atomic_load_n(g->passed, __ATOMIC_ACQUIRE);
}

static int cuda_stream_device(void *stream, enum ods_mem_kind k, unsigned buf_dev, unsigned *dev)
{
	CUcontext ctx = NULL;
	if (special(stream)) {
		/* a default stream is taken on the buffer's device; for host
		 * memory, the calling thread's, else device 0 */
		if (k == ODS_MEM_DEVICE) {
			*dev = buf_dev;
			return 0;
		}
		int pl = ods_cu.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx ? ods_cu_place_of_ctx(ctx, -1) : 0;
		if (pl < 0)
			return OPENDS_CONTEXT_MISMATCH;
		*dev = (unsigned)pl;
		return 0;
	}
	CUresult r = ods_cu.cuStreamGetCtx((CUstream)stream, &ctx);
	if (r != CUDA_SUCCESS || !ctx)
		return ods_fail(OPENDS_CONTEXT_MISMATCH, "cuda: stream %p has no usable context (destroyed?): %s", stream,
				ods_cu_errstr(r));
	int pl = ods_cu_place_of_ctx(ctx, -1);
	if (pl < 0)
		return OPENDS_CONTEXT_MISMATCH;
	if (k == ODS_MEM_DEVICE && (unsigned)pl != buf_dev) {
		struct place *sp = ods_cu_place((unsigned)pl), *bp = ods_cu_place(buf_dev);
		return ods_fail(OPENDS_CONTEXT_MISMATCH,
				"stream %p belongs to cuda:%d (context %p), the buffer to cuda:%d (context %p)", stream,
				sp ? sp->ordinal : -1, sp ? (void *)sp->ctx : NULL, bp ? bp->ordinal : -1,
				bp ? (void *)bp->ctx : NULL);
	}
	*dev = (unsigned)pl;
	return 0;
}

static int cuda_stream_call(unsigned dev, void *stream, void (*fn)(void *arg), void *arg)
{
	bool pushed;
	int rc = enter(dev, stream, &pushed);
	if (rc)
		return rc;
	CUresult r = ods_cu.cuLaunchHostFunc((CUstream)stream, fn, arg);
	leave(pushed);
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuLaunchHostFunc");
}

static int cuda_stream_wait(unsigned dev, void *stream, void *gate)
{
	struct gate *g = gate;
	CUstream s = stream;
	bool pushed;
	int rc = enter(dev, stream, &pushed);
	if (rc)
		return rc;
	CUresult r;
	bool refused = false; /* the fused call was refused as such, here */
	if (ods_cu.cuStreamBatchMemOp && !atomic_load_explicit(&no_batch[dev], memory_order_relaxed)) {
		/* the wait and the "passed" write in one driver call (each
		 * costs ~1 us on the caller, a small stream read queues three
		 * commands, issue 18); a driver that refuses it (NOT_SUPPORTED:
		 * no stream memory operations in a batch) queued nothing and gets
		 * the two calls from now on */
		CUstreamBatchMemOpParams p[2];
		memset(p, 0, sizeof(p));
		p[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
		p[0].waitValue.address = g->go_dev;
		p[0].waitValue.value = 1;
		p[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
		p[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
		p[1].writeValue.address = g->passed_dev;
		p[1].writeValue.value = 1;
		p[1].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
		r = ods_cu.cuStreamBatchMemOp(s, 2, p, 0);
		if (r == CUDA_SUCCESS) {
			g->waited = true;
			leave(pushed);
			return 0;
		}
		/* Refused as such (drivers without batched memory operations
		 * on this device answer NOT_SUPPORTED, INVALID_VALUE or
		 * NOT_PERMITTED; rel's review): the two calls, this time, and
		 * from now on on this device once they worked (no_batch).
		 * Both are harmless after a batch that was partly queued
		 * (wait for go == 1 again, write passed = 1 again). Any other
		 * code is the context's failure: the op's. */
		if (r != CUDA_ERROR_NOT_SUPPORTED && r != CUDA_ERROR_INVALID_VALUE && r != CUDA_ERROR_NOT_PERMITTED) {
			leave(pushed);
			return ods_cu_fail(r, "cuStreamBatchMemOp");
		}
		refused = true;
	}
	r = ods_cu.cuStreamWaitValue32(s, g->go_dev, 1, CU_STREAM_WAIT_VALUE_EQ);
	if (r != CUDA_SUCCESS) {
		leave(pushed);
		return ods_cu_fail(r, "cuStreamWaitValue32"); /* never waited: a leak, not a hazard */
	}
	/* From here the stream may read the flags until it is past the wait.
	 * Without the "passed" write below, that is never known: the gate is
	 * then never reused, and close leaks its block rather than free it.
	 * If that write fails, the wait is on the stream although this call
	 * fails: the core opens the gate when it cuts the operation
	 * (stream_accel.c, wait_refused). */
	g->waited = true;
	r = ods_cu.cuStreamWriteValue32(s, g->passed_dev, 1, CU_STREAM_WRITE_VALUE_DEFAULT);
	leave(pushed);
	if (r != CUDA_SUCCESS)
		return ods_cu_fail(r, "cuStreamWriteValue32");
	if (refused)
		atomic_store_explicit(&no_batch[dev], true, memory_order_relaxed);
	return 0;
}

/* Counters are gates whose second word the stream writes with
 * stream_mark (counter_get and counter_put are gate_get and gate_put).
 * Nothing ever waits on a counter, so the scan for passed gates leaves
 * it alone. */
static int cuda_stream_mark(unsigned dev, void *stream, void *counter, uint32_t value)
{
	struct gate *g = counter;
	bool pushed;
	int rc = enter(dev, stream, &pushed);
	if (rc)
		return rc;
	CUresult r = ods_cu.cuStreamWriteValue32((CUstream)stream, g->passed_dev, value, CU_STREAM_WRITE_VALUE_DEFAULT);
	leave(pushed);
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuStreamWriteValue32");
}

static int cuda_stream_copy(unsigned dev, void *stream, void *dst, const void *src, size_t n, bool to_device)
{
	bool pushed;
	int rc = enter(dev, stream, &pushed);
	if (rc)
		return rc;
	CUresult r = to_device ? ods_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, n, (CUstream)stream)
			       : ods_cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, n, (CUstream)stream);
	leave(pushed);
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync");
}

/* A stream of the caller's with nothing pending; default streams are
 * never said to be idle (the legacy one waits for other streams). */
static bool cuda_stream_idle(unsigned dev, void *stream)
{
	bool pushed;
	if (special(stream) || enter(dev, stream, &pushed))
		return false;
	CUresult r = ods_cu.cuStreamQuery((CUstream)stream);
	leave(pushed);
	return r == CUDA_SUCCESS;
}

/* In the calling thread's current context, else device 0's. */
static int cuda_stream_create(void **stream)
{
	CUcontext cur = NULL;
	bool pushed = false;
	if (ods_cu.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur) {
		struct place *p = ods_cu_place(0);
		int rc = p ? ods_cu_push(p) : ods_fail(OPENDS_DEVICE_NOT_FOUND, "cuda: device 0 is not usable");
		if (rc)
			return rc;
		pushed = true;
	}
	CUstream s = NULL;
	CUresult r = ods_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
	if (pushed)
		ods_cu_pop();
	if (r != CUDA_SUCCESS)
		return ods_cu_fail(r, "cuStreamCreate");
	*stream = s;
	return 0;
}

/* Run fn on a stream in its own context (real streams). */
static CUresult in_stream_ctx(void *stream, CUresult (*fn)(CUstream))
{
	CUcontext ctx = NULL;
	CUresult r = ods_cu.cuStreamGetCtx((CUstream)stream, &ctx);
	if (r != CUDA_SUCCESS)
		return r;
	CUcontext cur = NULL;
	bool push = !(ods_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx); /* (most callers: current) */
	if (push && (r = ods_cu.cuCtxPushCurrent(ctx)) != CUDA_SUCCESS)
		return r;
	r = fn((CUstream)stream);
	if (push)
		ods_cu_pop();
	return r;
}

/* Wait for stream s in the current context without spinning.
 * cuStreamSynchronize waits as the context's scheduling flag says; under
 * the default (CU_CTX_SCHED_AUTO, fewer contexts than cores) it spins, so a
 * caller syncing a stream held by a cold read burns a core for the whole
 * read (issue 18). Poll briefly, so that waits that end soon keep their
 * latency, then sleep on an event made with CU_EVENT_BLOCKING_SYNC. The
 * event captures everything queued before the call, as cuStreamSynchronize
 * does; sticky errors come back from the record, query or synchronize. */
static CUresult sync_fn(CUstream s)
{
	/* A stream with nothing left to run (the common case: a slot's stream
	 * synced before reuse) needs no event: cuStreamQuery says so, or
	 * returns the stream's sticky error, as the event path would. */
	CUresult q = ods_cu.cuStreamQuery(s);
	if (q != CUDA_ERROR_NOT_READY)
		return q;
	/* A library operation's sync (opends_stream_synchronize) comes once
	 * its result is out: the stream then usually has only its last copy
	 * and count left, a few microseconds. Ask again for up to 20 us before
	 * making, recording and destroying an event (each a driver call). */
	struct timespec q0, qt;
	clock_gettime(CLOCK_MONOTONIC, &q0);
	do
		q = ods_cu.cuStreamQuery(s);
	while (q == CUDA_ERROR_NOT_READY && !clock_gettime(CLOCK_MONOTONIC, &qt) &&
	       (qt.tv_sec - q0.tv_sec) * 1000000000L + (qt.tv_nsec - q0.tv_nsec) < 20000);
	if (q != CUDA_ERROR_NOT_READY)
		return q;
	CUevent ev = NULL;
	CUresult r = ods_cu.cuEventCreate(&ev, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS)
		return ods_cu.cuStreamSynchronize(s);
	if ((r = ods_cu.cuEventRecord(ev, s)) == CUDA_SUCCESS) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			r = ods_cu.cuEventQuery(ev);
		while (r == CUDA_ERROR_NOT_READY && !clock_gettime(CLOCK_MONOTONIC, &t) &&
		       (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 50000);
		if (r == CUDA_ERROR_NOT_READY)
			r = ods_cu.cuEventSynchronize(ev); /* sleeps: BLOCKING_SYNC */
	}
	ods_cu.cuEventDestroy(ev);
	return r;
}

static CUresult destroy_fn(CUstream s)
{
	CUresult r = sync_fn(s);
	return r == CUDA_SUCCESS ? ods_cu.cuStreamDestroy(s) : r;
}

/* A default stream: the calling thread's context's, and every device's
 * where the library queued commands on its default stream. */
static int cuda_stream_sync(void *stream)
{
	if (!special(stream)) {
		CUresult r = in_stream_ctx(stream, sync_fn);
		return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuStreamSynchronize");
	}
	CUcontext cur = NULL;
	CUresult r = CUDA_SUCCESS;
	if (ods_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur)
		r = sync_fn((CUstream)stream);
	unsigned np = __atomic_load_n(&ods_cuda.nplaces, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; r == CUDA_SUCCESS && i < np; i++) {
		struct place *p = ods_cuda.pl[i];
		if (!__atomic_load_n(&p->null_used, __ATOMIC_RELAXED) || p->ctx == cur)
			continue;
		if ((r = ods_cu.cuCtxPushCurrent(p->ctx)) != CUDA_SUCCESS)
			break;
		r = sync_fn((CUstream)stream);
		ods_cu_pop();
	}
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuStreamSynchronize");
}

static int cuda_stream_destroy(void *stream)
{
	CUresult r = in_stream_ctx(stream, destroy_fn);
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuStreamDestroy");
}

/* Every operation has ended (the core drained streams); a stream may still
 * be about to read a flag. Free a block only once each of its gates is
 * past its wait; one whose stream never gets there (a caller's stream held
 * forever) is leaked, not freed under the GPU. */
void ods_cuda_streams_close(void)
{
	bool pushed = ods_cu.cuCtxPushCurrent(ods_cuda.base) == CUDA_SUCCESS;
	pthread_mutex_lock(&G.lock);
	for (struct gblock *b = G.blocks, *n; b; b = n) {
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
	G.blocks = NULL;
	G.free_gates = NULL;
	pthread_mutex_unlock(&G.lock);
	if (pushed)
		ods_cu_pop();
}

/* in a forked child: the parent's gates are left as they are */
void ods_cuda_streams_forget(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	G.lock = fresh;
	G.blocks = NULL;
	G.free_gates = NULL;
}

const struct ods_accel_streams ods_cuda_streams = {
	.stream_device = cuda_stream_device,
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
	.stream_idle = cuda_stream_idle,
};
