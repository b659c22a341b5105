/*
 * The CUDA driver API, loaded at run time from libcuda.so.1: the one loader
 * of the library (src/accel/cuda), its tools and its tests. Everything
 * builds against cuda.h alone and runs (or skips) where no driver is
 * installed.
 *
 * Use: ods_cu_load() once, then call through the table, e.g.
 * ods_cu.cuMemAlloc(&p, n). cuda.h maps most names to versioned symbols
 * (cuMemAlloc -> cuMemAlloc_v2); the members, the calls and the names
 * looked up all go through those macros, so each pointer has the prototype
 * of the symbol it is loaded from.
 *
 * libcuda.so.1 is opened, and cuInit run, by the minimal mode
 * (cuda_min.h), which this loader builds on; code that cannot include
 * cuda.h (the gds backend) uses that one alone.
 *
 * Not part of the public API. The library links its own hidden copy; a
 * test or tool links another (the static library "ods_cuda_api"), and both
 * share the one libcuda.so.1 the process loads.
 */
#ifndef ODS_VENDOR_CUDA_API_H
#define ODS_VENDOR_CUDA_API_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>

#include "cuda_min.h"

/* Entry points every driver since CUDA 11 has: a driver without one of
 * them is refused by ods_cu_load. */
#define ODS_CU_REQUIRED(X)                                                                               \
	X(cuInit) X(cuGetErrorString) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount)          \
	X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId) X(cuDeviceCanAccessPeer)      \
	X(cuDeviceGetP2PAttribute) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)             \
	X(cuDevicePrimaryCtxGetState)                                                                      \
	X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxGetDevice)  \
	X(cuCtxSynchronize) X(cuCtxEnablePeerAccess) X(cuCtxDestroy) X(cuPointerGetAttribute)           \
	X(cuPointerGetAttributes) X(cuMemAlloc) X(cuMemFree) X(cuMemsetD8) X(cuMemcpyHtoD)              \
	X(cuMemcpyDtoH) X(cuMemHostRegister) X(cuMemHostUnregister) X(cuMemHostAlloc) X(cuMemAllocHost) \
	X(cuMemFreeHost) X(cuMemHostGetDevicePointer) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)         \
	X(cuMemcpyDtoDAsync) X(cuMemcpyPeerAsync) X(cuStreamCreate) X(cuStreamDestroy)                  \
	X(cuStreamSynchronize) X(cuStreamQuery) X(cuStreamGetCtx) X(cuStreamWaitEvent) X(cuEventCreate) \
	X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize) X(cuLaunchHostFunc)     \
	X(cuStreamWaitValue32) X(cuStreamWriteValue32)

/* Newer entry points: NULL where the driver lacks them; each user checks
 * (ods_cu_missing) before it relies on one. */
#define ODS_CU_OPTIONAL(X) X(cuCtxCreate) X(cuCtxGetId) X(cuMemGetInfo) X(cuStreamBatchMemOp)

struct ods_cuda_api {
#define ODS_CU_MEMBER(f) __typeof__(f) *f;
	ODS_CU_REQUIRED(ODS_CU_MEMBER)
	ODS_CU_OPTIONAL(ODS_CU_MEMBER)
#undef ODS_CU_MEMBER
};

/* Filled by ods_cu_load; read-only afterwards. */
extern struct ods_cuda_api ods_cu;

/* Load libcuda.so.1 (once per process, thread-safe; never unloaded, as the
 * driver expects) and run cuInit(0), through ods_cu_min_load, then the
 * whole table. ODS_CU_OK, or a status with why[] filled (why may be NULL).
 * A failed load is tried again on the next call. */
enum ods_cu_status ods_cu_load(char *why, size_t why_len);

/* In the child after fork(): the loaders' locks may have been held by a
 * thread that does not exist there; make them usable again (the loaded
 * table stays: the driver itself refuses a child of an initialised
 * parent, and says so on the first call). */
void ods_cu_after_fork(void);

/* The optional entry point named (as in cuda.h, e.g. "cuCtxCreate") when
 * it is absent, else NULL; names is NULL-terminated. */
const char *ods_cu_missing(const char *const *names);

/* cuGetErrorString's text for r, or "unknown CUDA error". */
const char *ods_cu_errstr(CUresult r);

#endif
