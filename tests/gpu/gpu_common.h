/*
 * What every GPU test needs first: the CUDA driver through the library's
 * one loader (src/vendor/cuda_api), a skip (exit 77) where there is no
 * driver or too few devices, CU() to fail with the driver's own words, and
 * the devices' primary contexts.
 */
#ifndef ODS_TEST_GPU_COMMON_H
#define ODS_TEST_GPU_COMMON_H

#include "../common.h"
#include "cuda_api.h"

static inline void gpu_cu_ok(CUresult r, const char *what)
{
	if (r != CUDA_SUCCESS)
		FAILF("%s: CUresult %d (%s)", what, (int)r, ods_cu_errstr(r));
}
#define CU(call) gpu_cu_ok((call), #call)

/* Load libcuda (skip without it, without any symbol of need[], a
 * NULL-ended list or NULL, or with fewer than min_dev devices); retain the
 * primary context of devices 0 .. *ndev - 1 into ctx[] (at most max of
 * them) and leave device 0's current. *ndev: the devices seen, cut to max. */
static inline void gpu_open(const char *const *need, int min_dev, CUcontext *ctx, int max, int *ndev)
{
	char why[256];
	const char *miss;
	int n = 0;
	if (ods_cu_load(why, sizeof why) != ODS_CU_OK)
		skip("%s", why);
	if (need && (miss = ods_cu_missing(need)))
		skip("libcuda.so.1 has no %s", miss);
	if (ods_cu.cuDeviceGetCount(&n) != CUDA_SUCCESS || n < (min_dev > 1 ? min_dev : 1))
		skip("%d CUDA device(s); this test needs %d", n, min_dev > 1 ? min_dev : 1);
	if (n > max)
		n = max;
	for (int i = n - 1; i >= 0; i--) {
		CUdevice d;
		CU(ods_cu.cuDeviceGet(&d, i));
		CU(ods_cu.cuDevicePrimaryCtxRetain(&ctx[i], d));
		CU(ods_cu.cuCtxSetCurrent(ctx[i]));
	}
	if (ndev)
		*ndev = n;
}

#endif
