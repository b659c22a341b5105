/*
 * The few CUDA driver calls the gds and cuFile tests need for device
 * memory, through OpenDS's one libcuda loader (src/vendor/cuda_api.h)
 * where the build has cuda.h (the test defines ODS_TEST_HAVE_CUDA and
 * links cuda_api_dep). Without cuda.h the tests build all the same and
 * td_init() returns false with the reason; so it does where there is no
 * driver or no GPU. The tests then skip their device-memory parts.
 */
#ifndef ODS_TEST_CUDRV_H
#define ODS_TEST_CUDRV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ODS_TEST_HAVE_CUDA
#include "cuda_api.h"
#endif

static char td_why[256];

#ifdef ODS_TEST_HAVE_CUDA

static CUcontext td_ctx;

#define TD_OK(call)                                                                   \
	do {                                                                          \
		CUresult r_ = (call);                                                 \
		if (r_ != CUDA_SUCCESS) {                                             \
			fprintf(stderr, "FAIL: %s: %s\n", #call, ods_cu_errstr(r_)); \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

/* Load the driver, make device 0's primary context current. */
static inline bool td_init(void)
{
	if (td_ctx)
		return true;
	if (ods_cu_load(td_why, sizeof td_why) != ODS_CU_OK)
		return false;
	CUdevice dev;
	CUcontext ctx = NULL;
	CUresult r;
	if ((r = ods_cu.cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
	    (r = ods_cu.cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS ||
	    (r = ods_cu.cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) {
		snprintf(td_why, sizeof td_why, "no GPU context for device 0 (%s)", ods_cu_errstr(r));
		return false;
	}
	td_ctx = ctx;
	return true;
}

/* Make the context of td_init current on this thread too (a new thread
 * starts with none, and driver calls on it fail with INVALID_CONTEXT). */
static inline void td_bind_thread(void)
{
	if (td_ctx)
		ods_cu.cuCtxSetCurrent(td_ctx);
}

static inline void *td_alloc(size_t n)
{
	CUdeviceptr p = 0;
	TD_OK(ods_cu.cuMemAlloc(&p, n ? n : 1));
	return (void *)(uintptr_t)p;
}

static inline void td_free(void *p)
{
	ods_cu.cuMemFree((CUdeviceptr)(uintptr_t)p);
}

static inline void td_to_dev(void *dst, const void *src, size_t n)
{
	if (n)
		TD_OK(ods_cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, n));
}

static inline void td_to_host(void *dst, const void *src, size_t n)
{
	if (n)
		TD_OK(ods_cu.cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, n));
}

static inline void td_memset(void *p, unsigned char v, size_t n)
{
	if (n)
		TD_OK(ods_cu.cuMemsetD8((CUdeviceptr)(uintptr_t)p, v, n));
}

/* Wait for the default (NULL) stream. */
static inline void td_sync_default_stream(void)
{
	ods_cu.cuStreamSynchronize(NULL);
}

/* The pinned host-to-device copy ceiling in GB/s: one n-byte copy from
 * page-locked memory, best of five after a warm-up; 0 if it cannot run. */
static inline double td_h2d_ceiling(size_t n, double (*clock)(void))
{
	void *h = NULL;
	CUdeviceptr d = 0;
	double best = 0;
	if (ods_cu.cuMemHostAlloc(&h, n, 0) != CUDA_SUCCESS)
		return 0;
	if (ods_cu.cuMemAlloc(&d, n) == CUDA_SUCCESS) {
		memset(h, 1, n);
		ods_cu.cuMemcpyHtoD(d, h, n);
		for (int i = 0; i < 5; i++) {
			double t0 = clock();
			if (ods_cu.cuMemcpyHtoD(d, h, n) != CUDA_SUCCESS)
				break;
			double gbs = (double)n / (clock() - t0) / 1e9;
			best = gbs > best ? gbs : best;
		}
		ods_cu.cuMemFree(d);
	}
	ods_cu.cuMemFreeHost(h);
	return best;
}

#else /* built without cuda.h: no device memory; nothing below is reached */

static inline bool td_init(void)
{
	snprintf(td_why, sizeof td_why, "built without cuda.h: no device memory");
	return false;
}

static inline void td_unreachable(void)
{
	fprintf(stderr, "FAIL: device memory used in a build without cuda.h\n");
	abort();
}

static inline void td_bind_thread(void)
{
}

static inline void *td_alloc(size_t n)
{
	(void)n;
	td_unreachable();
	return NULL;
}

static inline void td_free(void *p)
{
	(void)p;
}

static inline void td_to_dev(void *dst, const void *src, size_t n)
{
	(void)dst, (void)src, (void)n;
	td_unreachable();
}

static inline void td_to_host(void *dst, const void *src, size_t n)
{
	(void)dst, (void)src, (void)n;
	td_unreachable();
}

static inline void td_memset(void *p, unsigned char v, size_t n)
{
	(void)p, (void)v, (void)n;
	td_unreachable();
}

static inline void td_sync_default_stream(void)
{
}

static inline double td_h2d_ceiling(size_t n, double (*clock)(void))
{
	(void)n, (void)clock;
	return 0;
}

#endif

#endif
