#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gpu.h"

#include <stdint.h>
#include <pthread.h>
#include <stdio.h>

#include "stats.h"

#ifdef BENCH_HAVE_CUDA
/* Through the project's one libcuda loader (src/vendor/cuda_api.h): the
 * primary context of each device, retained on first use. */
#include "cuda_api.h"

static struct {
	CUcontext ctx;       /* device 0's: the benchmark's default */
	CUcontext dev_ctx[8];
	char name[128];
} g;

bool gpu_open(char *why, size_t why_len)
{
	if (ods_cu_load(why, why_len) != ODS_CU_OK)
		return false;
	CUdevice dev;
	CUresult r;
	if ((r = ods_cu.cuDeviceGet(&dev, 0)) || (r = ods_cu.cuDevicePrimaryCtxRetain(&g.ctx, dev)) ||
	    (r = ods_cu.cuCtxSetCurrent(g.ctx))) {
		snprintf(why, why_len, "CUDA driver error %d: %s (no usable GPU)", (int)r, ods_cu_errstr(r));
		g.ctx = NULL;
		return false;
	}
	ods_cu.cuDeviceGetName(g.name, sizeof(g.name), dev);
	g.dev_ctx[0] = g.ctx;
	return true;
}

void gpu_bind_thread(void)
{
	if (g.ctx)
		ods_cu.cuCtxSetCurrent(g.ctx);
}

const char *gpu_name(void)
{
	return g.name;
}

void *gpu_alloc(size_t n)
{
	CUdeviceptr p = 0;
	return ods_cu.cuMemAlloc(&p, n ? n : 1) ? NULL : (void *)(uintptr_t)p;
}

void gpu_free(void *p)
{
	if (p)
		ods_cu.cuMemFree((CUdeviceptr)(uintptr_t)p);
}

int gpu_to_host(void *dst, const void *src, size_t n)
{
	return ods_cu.cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, n);
}

int gpu_from_host(void *dst, const void *src, size_t n)
{
	return ods_cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, n);
}

void *gpu_host_alloc(size_t n)
{
	void *p = NULL;
	return ods_cu.cuMemAllocHost(&p, n ? n : 1) ? NULL : p;
}

void gpu_host_free(void *p)
{
	if (p)
		ods_cu.cuMemFreeHost(p);
}

int gpu_count(void)
{
	int n = 0;
	if (!g.ctx || ods_cu.cuDeviceGetCount(&n))
		return 0;
	return n;
}

bool gpu_bind_device(int dev)
{
	if (!g.ctx || dev < 0 || dev >= 8 || dev >= gpu_count())
		return false;
	if (!g.dev_ctx[dev]) {
		CUdevice d;
		if (ods_cu.cuDeviceGet(&d, dev) || ods_cu.cuDevicePrimaryCtxRetain(&g.dev_ctx[dev], d))
			return false;
	}
	return ods_cu.cuCtxSetCurrent(g.dev_ctx[dev]) == CUDA_SUCCESS;
}

void *gpu_alloc_on(int dev, size_t n)
{
	if (!gpu_bind_device(dev))
		return NULL;
	return gpu_alloc(n);
}

size_t gpu_free_bytes(void)
{
	size_t fr = 0, total = 0;
	/* 0: unknown, and the early check is skipped */
	if (!g.ctx || ods_cu_missing((const char *[]){ "cuMemGetInfo", NULL }) || ods_cu.cuMemGetInfo(&fr, &total))
		return 0;
	return fr;
}

double gpu_h2d_ceiling(size_t bytes)
{
	void *h = NULL;
	CUdeviceptr d = 0;
	double best = 0;
	/* each sample moves at least 256 MiB, so small copies are timed over
	 * many calls, as a loop of such calls would run */
	unsigned reps = bytes >= ((size_t)256 << 20) ? 1 : (unsigned)(((size_t)256 << 20) / bytes);
	if (ods_cu.cuMemAllocHost(&h, bytes) || ods_cu.cuMemAlloc(&d, bytes))
		goto out;
	ods_cu.cuMemcpyHtoD(d, h, bytes); /* warm-up: maps and first-touch */
	for (int i = 0; i < 5; i++) {
		uint64_t t0 = st_now_ns();
		for (unsigned r = 0; r < reps; r++)
			if (ods_cu.cuMemcpyHtoD(d, h, bytes))
				goto out;
		if (ods_cu.cuCtxSynchronize())
			break;
		double mib = st_mib_s((uint64_t)bytes * reps, st_seconds(t0, st_now_ns()));
		if (mib > best)
			best = mib;
	}
out:
	if (d)
		ods_cu.cuMemFree(d);
	if (h)
		ods_cu.cuMemFreeHost(h);
	return best;
}

/* ceiling-h2d2: n threads, one per GPU (its primary context), each copying
 * 256 MiB pinned -> its device's memory 4 times, all at once; the figure
 * is all bytes over the wall time, best of 3. Whether the GPUs' copies add
 * up on this host is what bounds gpu2. */
struct h2dn {
	int dev;
	pthread_barrier_t *go;
	int err;
};

#define H2DN_BYTES ((size_t)256 << 20)

static void *h2dn_worker(void *arg)
{
	struct h2dn *a = arg;
	void *h = NULL;
	CUdeviceptr d = 0;
	a->err = !gpu_bind_device(a->dev) || ods_cu.cuMemAllocHost(&h, H2DN_BYTES) || ods_cu.cuMemAlloc(&d, H2DN_BYTES) ||
		 ods_cu.cuMemcpyHtoD(d, h, H2DN_BYTES);
	for (int round = 0; round < 3; round++) {
		pthread_barrier_wait(a->go); /* all start together */
		for (int i = 0; i < 4 && !a->err; i++)
			a->err = ods_cu.cuMemcpyHtoD(d, h, H2DN_BYTES) != CUDA_SUCCESS;
		if (!a->err)
			a->err = ods_cu.cuCtxSynchronize() != CUDA_SUCCESS;
		pthread_barrier_wait(a->go); /* all done */
	}
	if (d)
		ods_cu.cuMemFree(d);
	if (h)
		ods_cu.cuMemFreeHost(h);
	return NULL;
}

double gpu_h2d_ceiling_ngpu(unsigned n)
{
	pthread_t t[8];
	struct h2dn a[8];
	pthread_barrier_t go;
	double best = 0;
	if (n < 1 || n > 8 || pthread_barrier_init(&go, NULL, n + 1))
		return 0;
	unsigned started = 0;
	for (; started < n; started++) {
		a[started] = (struct h2dn){ (int)started, &go, 0 };
		if (pthread_create(&t[started], NULL, h2dn_worker, &a[started]))
			break;
	}
	if (started < n) { /* cannot happen in practice; the barrier would never open */
		fprintf(stderr, "ceiling-h2d2: cannot start %u threads\n", n);
		exit(1);
	}
	for (int round = 0; round < 3; round++) {
		pthread_barrier_wait(&go);
		uint64_t t0 = st_now_ns();
		pthread_barrier_wait(&go);
		double mib = st_mib_s((uint64_t)H2DN_BYTES * 4 * n, st_seconds(t0, st_now_ns()));
		if (mib > best)
			best = mib;
	}
	for (unsigned i = 0; i < started; i++) {
		pthread_join(t[i], NULL);
		if (a[i].err)
			best = 0;
	}
	pthread_barrier_destroy(&go);
	gpu_bind_device(0);
	return best;
}

void *gpu_stream_create(void)
{
	CUstream s = NULL;
	return ods_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ? NULL : s;
}

int gpu_stream_sync(void *stream)
{
	return ods_cu.cuStreamSynchronize(stream);
}

void gpu_stream_destroy(void *stream)
{
	if (stream)
		ods_cu.cuStreamDestroy(stream);
}

void gpu_close(void)
{
	for (int i = 0; i < 8; i++) {
		CUdevice dev;
		if (g.dev_ctx[i] && !ods_cu.cuDeviceGet(&dev, i))
			ods_cu.cuDevicePrimaryCtxRelease(dev);
		g.dev_ctx[i] = NULL;
	}
	g.ctx = NULL;
}

#else /* built without cuda.h: as the library, no GPU */

bool gpu_open(char *why, size_t why_len)
{
	snprintf(why, why_len, "opends-bench was built without cuda.h");
	return false;
}
void gpu_bind_thread(void) {}
const char *gpu_name(void) { return "none"; }
void *gpu_alloc(size_t n) { (void)n; return NULL; }
void gpu_free(void *p) { (void)p; }
int gpu_to_host(void *dst, const void *src, size_t n) { (void)dst; (void)src; (void)n; return -1; }
int gpu_from_host(void *dst, const void *src, size_t n) { (void)dst; (void)src; (void)n; return -1; }
void *gpu_host_alloc(size_t n) { (void)n; return NULL; }
void gpu_host_free(void *p) { (void)p; }
int gpu_count(void) { return 0; }
bool gpu_bind_device(int dev) { (void)dev; return false; }
void *gpu_alloc_on(int dev, size_t n) { (void)dev; (void)n; return NULL; }
size_t gpu_free_bytes(void) { return 0; }
double gpu_h2d_ceiling(size_t bytes) { (void)bytes; return 0; }
double gpu_h2d_ceiling_ngpu(unsigned n) { (void)n; return 0; }
void *gpu_stream_create(void) { return NULL; }
int gpu_stream_sync(void *stream) { (void)stream; return -1; }
void gpu_stream_destroy(void *stream) { (void)stream; }
void gpu_close(void) {}

#endif
