#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gpu.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

#include "stats.h"

/* Minimal declarations of the driver API calls used here (cuda.h is not
 * needed to build the benchmark). All are the _v2 ABI where one exists. */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef int CUdevice;

static struct {
	void *lib;
	CUcontext ctx;
	char name[128];
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*device_name)(char *, int, CUdevice);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*release)(CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*alloc_host)(void **, size_t);
	CUresult (*free_host)(void *);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*sync)(void);
	CUresult (*stream_create)(void **, unsigned);
	CUresult (*stream_sync)(void *);
	CUresult (*stream_destroy)(void *);
	CUresult (*device_count)(int *);
	CUresult (*mem_info)(size_t *, size_t *);
	CUcontext dev_ctx[8];
} cu;

#define LOAD(field, sym)                                          \
	do {                                                      \
		*(void **)&cu.field = dlsym(cu.lib, sym);         \
		if (!cu.field) {                                  \
			snprintf(why, why_len, "%s missing", sym); \
			return false;                             \
		}                                                 \
	} while (0)

bool gpu_open(char *why, size_t why_len)
{
	cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu.lib) {
		snprintf(why, why_len, "libcuda.so.1 not found");
		return false;
	}
	LOAD(init, "cuInit");
	LOAD(device_get, "cuDeviceGet");
	LOAD(device_name, "cuDeviceGetName");
	LOAD(retain, "cuDevicePrimaryCtxRetain");
	LOAD(release, "cuDevicePrimaryCtxRelease_v2");
	LOAD(set_current, "cuCtxSetCurrent");
	LOAD(mem_alloc, "cuMemAlloc_v2");
	LOAD(mem_free, "cuMemFree_v2");
	LOAD(alloc_host, "cuMemAllocHost_v2");
	LOAD(free_host, "cuMemFreeHost");
	LOAD(dtoh, "cuMemcpyDtoH_v2");
	LOAD(htod, "cuMemcpyHtoD_v2");
	LOAD(sync, "cuCtxSynchronize");
	LOAD(stream_create, "cuStreamCreate");
	LOAD(stream_sync, "cuStreamSynchronize");
	LOAD(stream_destroy, "cuStreamDestroy_v2");
	LOAD(device_count, "cuDeviceGetCount");
	LOAD(mem_info, "cuMemGetInfo_v2");
	CUdevice dev;
	CUresult r;
	if ((r = cu.init(0)) || (r = cu.device_get(&dev, 0)) || (r = cu.retain(&cu.ctx, dev)) ||
	    (r = cu.set_current(cu.ctx))) {
		snprintf(why, why_len, "CUDA driver error %d (no usable GPU)", r);
		return false;
	}
	cu.device_name(cu.name, sizeof(cu.name), dev);
	cu.dev_ctx[0] = cu.ctx;
	return true;
}

void gpu_bind_thread(void)
{
	if (cu.ctx)
		cu.set_current(cu.ctx);
}


const char *gpu_name(void)
{
	return cu.name;
}

void *gpu_alloc(size_t n)
{
	CUdeviceptr p = 0;
	return cu.mem_alloc(&p, n ? n : 1) ? NULL : (void *)(uintptr_t)p;
}

void gpu_free(void *p)
{
	if (p)
		cu.mem_free((CUdeviceptr)(uintptr_t)p);
}

int gpu_to_host(void *dst, const void *src, size_t n)
{
	return cu.dtoh(dst, (CUdeviceptr)(uintptr_t)src, n);
}

int gpu_from_host(void *dst, const void *src, size_t n)
{
	return cu.htod((CUdeviceptr)(uintptr_t)dst, src, n);
}

void *gpu_host_alloc(size_t n)
{
	void *p = NULL;
	return cu.alloc_host(&p, n ? n : 1) ? NULL : p;
}

void gpu_host_free(void *p)
{
	if (p)
		cu.free_host(p);
}

int gpu_count(void)
{
	int n = 0;
	if (!cu.ctx || cu.device_count(&n))
		return 0;
	return n;
}

bool gpu_bind_device(int dev)
{
	if (!cu.ctx || dev < 0 || dev >= 8 || dev >= gpu_count())
		return false;
	if (!cu.dev_ctx[dev]) {
		CUdevice d;
		if (cu.device_get(&d, dev) || cu.retain(&cu.dev_ctx[dev], d))
			return false;
	}
	return cu.set_current(cu.dev_ctx[dev]) == 0;
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
	if (!cu.ctx || cu.mem_info(&fr, &total))
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
	if (cu.alloc_host(&h, bytes) || cu.mem_alloc(&d, bytes))
		goto out;
	cu.htod(d, h, bytes); /* warm-up: maps and first-touch */
	for (int i = 0; i < 5; i++) {
		uint64_t t0 = st_now_ns();
		for (unsigned r = 0; r < reps; r++)
			if (cu.htod(d, h, bytes))
				goto out;
		if (cu.sync())
			break;
		double mib = st_mib_s((uint64_t)bytes * reps, st_seconds(t0, st_now_ns()));
		if (mib > best)
			best = mib;
	}
out:
	if (d)
		cu.mem_free(d);
	if (h)
		cu.free_host(h);
	return best;
}

void *gpu_stream_create(void)
{
	void *s = NULL;
	return cu.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */) ? NULL : s;
}

int gpu_stream_sync(void *stream)
{
	return cu.stream_sync(stream);
}

void gpu_stream_destroy(void *stream)
{
	if (stream)
		cu.stream_destroy(stream);
}

void gpu_close(void)
{
	for (int i = 0; i < 8; i++) {
		CUdevice dev;
		if (cu.dev_ctx[i] && !cu.device_get(&dev, i))
			cu.release(dev);
		cu.dev_ctx[i] = NULL;
	}
	cu.ctx = NULL;
}
