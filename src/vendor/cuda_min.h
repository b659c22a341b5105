/*
 * The CUDA driver's minimal mode: the one place libcuda.so.1 is opened,
 * and the few entry points a user that cannot include cuda.h needs. The
 * gds backend is that user: it compiles against OpenDS's own cuFile
 * declaration (src/vendor/cufile/cufile.h, whose CUDA types are plain
 * stand-ins), where CI has cufile.h but no CUDA toolkit; it only checks
 * that a GPU is there and makes the buffer's context current.
 *
 * The table uses plain C types with the ABI of cuda.h's (CUresult and the
 * enums are 4-byte ints, CUcontext is struct CUctx_st *, CUdeviceptr an
 * unsigned long long); cuda_api.c proves that against cuda.h wherever the
 * build has it. The full table (cuda_api.h) loads from the same library
 * handle; this one needs nothing but libc and libdl.
 *
 * Not part of the public API (hidden in the library).
 */
#ifndef ODS_VENDOR_CUDA_MIN_H
#define ODS_VENDOR_CUDA_MIN_H

#include <stddef.h>

struct CUctx_st;

/* the values of cuda.h's names the minimal table's users need */
#define ODS_CU_MIN_SUCCESS 0                   /* CUDA_SUCCESS */
#define ODS_CU_MIN_ERROR_NO_DEVICE 100         /* CUDA_ERROR_NO_DEVICE */
#define ODS_CU_MIN_POINTER_ATTRIBUTE_CONTEXT 1 /* CU_POINTER_ATTRIBUTE_CONTEXT */

/* Entry points of every CUDA driver there is, none versioned by cuda.h's
 * macros (cuda_api.c checks): a driver without one is refused. */
struct ods_cuda_min {
	int (*cuInit)(unsigned int flags);
	int (*cuGetErrorString)(int error, const char **str);
	int (*cuDeviceGetCount)(int *count);
	int (*cuCtxGetCurrent)(struct CUctx_st **pctx);
	int (*cuCtxSetCurrent)(struct CUctx_st *ctx);
	int (*cuPointerGetAttribute)(void *data, int attribute, unsigned long long ptr);
};

/* Filled by ods_cu_min_load; read-only afterwards. */
extern struct ods_cuda_min ods_cu_min;

enum ods_cu_status {
	ODS_CU_OK = 0,
	ODS_CU_NO_DRIVER,  /* libcuda.so.1 not found */
	ODS_CU_TOO_OLD,    /* a required entry point is missing */
	ODS_CU_NO_DEVICE,  /* cuInit: no CUDA device */
	ODS_CU_INIT_FAILED /* cuInit failed otherwise */
};

/* Load the minimal table and run cuInit(0): ODS_CU_OK, or a status with
 * why[] filled (why may be NULL). Once per process, thread-safe; a failed
 * load is tried again on the next call. */
enum ods_cu_status ods_cu_min_load(char *why, size_t why_len);

/* After a successful ods_cu_min_load: the libcuda.so.1 handle, opened
 * once for the life of the process (a second dlopen only takes a
 * reference, and the driver is not made to be unloaded under live
 * contexts); the full loader (cuda_api.c) looks its symbols up there. */
void *ods_cu_min_library(void);

/* In the child after fork(): the load lock may have been held by a thread
 * that does not exist there; make it usable again (ods_cu_after_fork
 * calls this too). */
void ods_cu_min_after_fork(void);

#endif
