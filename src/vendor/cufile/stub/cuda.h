/*
 * Minimal stand-in for <cuda.h>, used only by layout_check.c when the build
 * has NVIDIA's cufile.h (which includes <cuda.h>) but no CUDA toolkit, as
 * with the pip wheel in CI. It declares the two CUDA types cufile.h uses,
 * with the ABI of the real ones (a 4-byte enum, an opaque pointer).
 */
#ifndef ODS_STUB_CUDA_H
#define ODS_STUB_CUDA_H
typedef enum cudaError_enum { CUDA_SUCCESS = 0 } CUresult;
typedef struct CUstream_st *CUstream;
#define CUDA_VERSION 0
#endif
