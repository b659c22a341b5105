/*
 * The few CUDA driver calls the gds and cuFile tests need for device
 * memory, loaded from libcuda.so.1 at run time so the tests build
 * everywhere. td_init() returns false (with a reason) where there is no
 * driver or no GPU; the tests then skip.
 */
#ifndef ODS_TEST_CUDRV_H
#define ODS_TEST_CUDRV_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long td_ptr; /* CUdeviceptr */

static struct {
	void *lib;
	void *ctx;
	int (*cuInit)(unsigned);
	int (*cuDeviceGet)(int *, int);
	int (*cuDevicePrimaryCtxRetain)(void **, int);
	int (*cuCtxSetCurrent)(void *);
	int (*cuMemAlloc)(td_ptr *, size_t);
	int (*cuMemFree)(td_ptr);
	int (*cuMemcpyHtoD)(td_ptr, const void *, size_t);
	int (*cuMemcpyDtoH)(void *, td_ptr, size_t);
	int (*cuMemsetD8)(td_ptr, unsigned char, size_t);
	int (*cuStreamSynchronize)(void *);
	int (*cuCtxSynchronize)(void);
	int (*cuMemHostAlloc)(void **, size_t, unsigned);
	int (*cuMemFreeHost)(void *);
} td;

static char td_why[256];

/* Load the driver, make device 0's primary context current. */
static inline bool td_init(void)
{
	if (td.ctx)
		return true;
	td.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!td.lib) {
		snprintf(td_why, sizeof td_why, "no CUDA driver (libcuda.so.1: %s)", dlerror());
		return false;
	}
	struct {
		const char *name;
		void **fn;
	} syms[] = {
		{ "cuInit", (void **)&td.cuInit },
		{ "cuDeviceGet", (void **)&td.cuDeviceGet },
		{ "cuDevicePrimaryCtxRetain", (void **)&td.cuDevicePrimaryCtxRetain },
		{ "cuCtxSetCurrent", (void **)&td.cuCtxSetCurrent },
		{ "cuMemAlloc_v2", (void **)&td.cuMemAlloc },
		{ "cuMemFree_v2", (void **)&td.cuMemFree },
		{ "cuMemcpyHtoD_v2", (void **)&td.cuMemcpyHtoD },
		{ "cuMemcpyDtoH_v2", (void **)&td.cuMemcpyDtoH },
		{ "cuMemsetD8_v2", (void **)&td.cuMemsetD8 },
		{ "cuStreamSynchronize", (void **)&td.cuStreamSynchronize },
		{ "cuCtxSynchronize", (void **)&td.cuCtxSynchronize },
		{ "cuMemHostAlloc", (void **)&td.cuMemHostAlloc },
		{ "cuMemFreeHost", (void **)&td.cuMemFreeHost },
	};
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
		if (!(*syms[i].fn = dlsym(td.lib, syms[i].name))) {
			snprintf(td_why, sizeof td_why, "libcuda.so.1 has no %s", syms[i].name);
			return false;
		}
	int dev = 0, r;
	if ((r = td.cuInit(0)) != 0) {
		snprintf(td_why, sizeof td_why, "cuInit failed (%d): no usable GPU", r);
		return false;
	}
	if ((r = td.cuDeviceGet(&dev, 0)) != 0 || (r = td.cuDevicePrimaryCtxRetain(&td.ctx, dev)) != 0 ||
	    (r = td.cuCtxSetCurrent(td.ctx)) != 0) {
		snprintf(td_why, sizeof td_why, "no GPU context for device 0 (CUresult %d)", r);
		td.ctx = NULL;
		return false;
	}
	return true;
}

/* Make the context of td_init current on this thread too (a new thread
 * starts with none, and driver calls on it fail with INVALID_CONTEXT). */
static inline void td_bind_thread(void)
{
	if (td.ctx)
		td.cuCtxSetCurrent(td.ctx);
}

static inline void *td_alloc(size_t n)
{
	td_ptr p = 0;
	int r = td.cuMemAlloc(&p, n ? n : 1);
	if (r != 0) {
		fprintf(stderr, "FAIL: cuMemAlloc(%zu): %d\n", n, r);
		exit(1);
	}
	return (void *)(uintptr_t)p;
}

static inline void td_free(void *p)
{
	td.cuMemFree((td_ptr)(uintptr_t)p);
}

static inline void td_to_dev(void *dst, const void *src, size_t n)
{
	int r = n ? td.cuMemcpyHtoD((td_ptr)(uintptr_t)dst, src, n) : 0;
	if (r != 0) {
		fprintf(stderr, "FAIL: cuMemcpyHtoD(%zu): %d\n", n, r);
		exit(1);
	}
}

static inline void td_to_host(void *dst, const void *src, size_t n)
{
	int r = n ? td.cuMemcpyDtoH(dst, (td_ptr)(uintptr_t)src, n) : 0;
	if (r != 0) {
		fprintf(stderr, "FAIL: cuMemcpyDtoH(%zu): %d\n", n, r);
		exit(1);
	}
}

static inline void td_memset(void *p, unsigned char v, size_t n)
{
	int r = n ? td.cuMemsetD8((td_ptr)(uintptr_t)p, v, n) : 0;
	if (r != 0) {
		fprintf(stderr, "FAIL: cuMemsetD8(%zu): %d\n", n, r);
		exit(1);
	}
}

/* The pinned host-to-device copy ceiling in GB/s: one n-byte copy from
 * page-locked memory, best of five after a warm-up; 0 if it cannot run. */
static inline double td_h2d_ceiling(size_t n, double (*clock)(void))
{
	void *h = NULL;
	td_ptr d = 0;
	double best = 0;
	if (td.cuMemHostAlloc(&h, n, 0) != 0)
		return 0;
	if (td.cuMemAlloc(&d, n) == 0) {
		memset(h, 1, n);
		td.cuMemcpyHtoD(d, h, n);
		for (int i = 0; i < 5; i++) {
			double t0 = clock();
			if (td.cuMemcpyHtoD(d, h, n) != 0)
				break;
			double gbs = (double)n / (clock() - t0) / 1e9;
			best = gbs > best ? gbs : best;
		}
		td.cuMemFree(d);
	}
	td.cuMemFreeHost(h);
	return best;
}

#endif
