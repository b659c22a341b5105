/*
 * The cuFile ABI facts OpenDS relies on, as compile-time checks. Included
 * after a declaration of the cuFile types - OpenDS's own
 * (src/vendor/cufile/cufile.h, by the drop-in and the gds backend) or NVIDIA's
 * (layout_check.c, wherever NVIDIA's cufile.h is found) - and expanded with
 * ODS_CUFILE_LAYOUT_CHECKS(). Both sides are checked against the same
 * numbers, so they agree with each other. The numbers are for LP64 Linux
 * (x86-64, aarch64).
 */
#ifndef ODS_CUFILE_LAYOUT_H
#define ODS_CUFILE_LAYOUT_H

#include <stddef.h>

#define ODS_CF_SIZE(t, n) _Static_assert(sizeof(t) == (n), "sizeof(" #t ") is not " #n)
#define ODS_CF_OFF(t, f, n) _Static_assert(offsetof(t, f) == (n), "offsetof(" #t ", " #f ") is not " #n)
#define ODS_CF_VAL(v, n) _Static_assert((long)(v) == (n), #v " is not " #n)

#define ODS_CUFILE_LAYOUT_CHECKS()                                                     \
	ODS_CF_SIZE(CUfileError_t, 8);                                                 \
	ODS_CF_OFF(CUfileError_t, err, 0);                                             \
	ODS_CF_OFF(CUfileError_t, cu_err, 4);                                          \
	ODS_CF_SIZE(CUfileOpError, 4);                                                 \
	ODS_CF_SIZE(CUfileDescr_t, 24);                                                \
	ODS_CF_OFF(CUfileDescr_t, type, 0);                                            \
	ODS_CF_OFF(CUfileDescr_t, handle, 8);                                          \
	ODS_CF_OFF(CUfileDescr_t, handle.fd, 8);                                       \
	ODS_CF_OFF(CUfileDescr_t, fs_ops, 16);                                         \
	ODS_CF_SIZE(CUfileFSOps_t, 40);                                                \
	ODS_CF_SIZE(cufileRDMAInfo_t, 16);                                             \
	ODS_CF_OFF(cufileRDMAInfo_t, desc_str, 8);                                     \
	ODS_CF_SIZE(CUfileHandle_t, 8);                                                \
	ODS_CF_SIZE(CUfileBatchHandle_t, 8);                                           \
	ODS_CF_SIZE(CUfileDrvProps_t, 56);                                             \
	ODS_CF_OFF(CUfileDrvProps_t, nvfs.major_version, 0);                           \
	ODS_CF_OFF(CUfileDrvProps_t, nvfs.minor_version, 4);                           \
	ODS_CF_OFF(CUfileDrvProps_t, nvfs.poll_thresh_size, 8);                        \
	ODS_CF_OFF(CUfileDrvProps_t, nvfs.max_direct_io_size, 16);                     \
	ODS_CF_OFF(CUfileDrvProps_t, nvfs.dstatusflags, 24);                           \
	ODS_CF_OFF(CUfileDrvProps_t, nvfs.dcontrolflags, 28);                          \
	ODS_CF_OFF(CUfileDrvProps_t, fflags, 32);                                      \
	ODS_CF_OFF(CUfileDrvProps_t, max_device_cache_size, 36);                       \
	ODS_CF_OFF(CUfileDrvProps_t, per_buffer_cache_size, 40);                       \
	ODS_CF_OFF(CUfileDrvProps_t, max_device_pinned_mem_size, 44);                  \
	ODS_CF_OFF(CUfileDrvProps_t, max_batch_io_size, 48);                           \
	ODS_CF_OFF(CUfileDrvProps_t, max_batch_io_timeout_msecs, 52);                  \
	ODS_CF_SIZE(CUfileIOParams_t, 64);                                             \
	ODS_CF_OFF(CUfileIOParams_t, mode, 0);                                         \
	ODS_CF_OFF(CUfileIOParams_t, u.batch.devPtr_base, 8);                          \
	ODS_CF_OFF(CUfileIOParams_t, u.batch.file_offset, 16);                         \
	ODS_CF_OFF(CUfileIOParams_t, u.batch.devPtr_offset, 24);                       \
	ODS_CF_OFF(CUfileIOParams_t, u.batch.size, 32);                                \
	ODS_CF_OFF(CUfileIOParams_t, fh, 40);                                          \
	ODS_CF_OFF(CUfileIOParams_t, opcode, 48);                                      \
	ODS_CF_OFF(CUfileIOParams_t, cookie, 56);                                      \
	ODS_CF_SIZE(CUfileIOEvents_t, 24);                                             \
	ODS_CF_OFF(CUfileIOEvents_t, cookie, 0);                                       \
	ODS_CF_OFF(CUfileIOEvents_t, status, 8);                                       \
	ODS_CF_OFF(CUfileIOEvents_t, ret, 16);                                         \
	ODS_CF_SIZE(CUfileStatus_t, 4);                                                \
	ODS_CF_SIZE(CUfileOpcode_t, 4);                                                \
	ODS_CF_SIZE(CUfileBatchMode_t, 4);                                             \
	ODS_CF_VAL(CU_FILE_HANDLE_TYPE_OPAQUE_FD, 1);                                  \
	ODS_CF_VAL(CU_FILE_HANDLE_TYPE_USERSPACE_FS, 3);                               \
	ODS_CF_VAL(CUFILE_READ, 0);                                                    \
	ODS_CF_VAL(CUFILE_WRITE, 1);                                                   \
	ODS_CF_VAL(CUFILE_BATCH, 1);                                                   \
	ODS_CF_VAL(CUFILE_WAITING, 0x1);                                               \
	ODS_CF_VAL(CUFILE_PENDING, 0x2);                                               \
	ODS_CF_VAL(CUFILE_INVALID, 0x4);                                               \
	ODS_CF_VAL(CUFILE_CANCELED, 0x8);                                              \
	ODS_CF_VAL(CUFILE_COMPLETE, 0x10);                                             \
	ODS_CF_VAL(CUFILE_TIMEOUT, 0x20);                                              \
	ODS_CF_VAL(CUFILE_FAILED, 0x40);                                               \
	ODS_CF_VAL(CU_FILE_STREAM_FIXED_BUF_OFFSET, 1);                                \
	ODS_CF_VAL(CU_FILE_STREAM_FIXED_FILE_OFFSET, 2);                               \
	ODS_CF_VAL(CU_FILE_STREAM_FIXED_FILE_SIZE, 4);                                 \
	ODS_CF_VAL(CU_FILE_STREAM_PAGE_ALIGNED_INPUTS, 8);                             \
	ODS_CF_VAL(CU_FILE_RDMA_REGISTER, 1);                                          \
	ODS_CF_VAL(CU_FILE_RDMA_RELAXED_ORDERING, 2);                                  \
	ODS_CF_VAL(CU_FILE_NVME_SUPPORTED, 4);                                         \
	ODS_CF_VAL(CU_FILE_USE_POLL_MODE, 0);                                          \
	ODS_CF_VAL(CU_FILE_ALLOW_COMPAT_MODE, 1);                                      \
	ODS_CF_VAL(CU_FILE_BATCH_IO_SUPPORTED, 1);                                     \
	ODS_CF_VAL(CU_FILE_STREAMS_SUPPORTED, 2);                                      \
	ODS_CF_VAL(CU_FILE_PARALLEL_IO_SUPPORTED, 3);                                  \
	ODS_CF_VAL(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, 5);                  \
	ODS_CF_VAL(CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS, 11);                   \
	ODS_CF_VAL(CUFILE_PARAM_STREAM_MEMOPS_BYPASS, 11);                             \
	ODS_CF_VAL(CUFILE_PARAM_LOG_DIR, 2);                                           \
	ODS_CF_VAL(CU_FILE_SUCCESS, 0);                                                \
	ODS_CF_VAL(CU_FILE_DRIVER_NOT_INITIALIZED, 5001);                              \
	ODS_CF_VAL(CU_FILE_PLATFORM_NOT_SUPPORTED, 5007);                              \
	ODS_CF_VAL(CU_FILE_CUDA_DRIVER_ERROR, 5011);                                   \
	ODS_CF_VAL(CU_FILE_INVALID_MAPPING_RANGE, 5017);                               \
	ODS_CF_VAL(CU_FILE_INVALID_FILE_TYPE, 5018);                                   \
	ODS_CF_VAL(CU_FILE_DIO_NOT_SET, 5020);                                         \
	ODS_CF_VAL(CU_FILE_INVALID_VALUE, 5022);                                       \
	ODS_CF_VAL(CU_FILE_MEMORY_ALREADY_REGISTERED, 5023);                           \
	ODS_CF_VAL(CU_FILE_MEMORY_NOT_REGISTERED, 5024);                               \
	ODS_CF_VAL(CU_FILE_DRIVER_ALREADY_OPEN, 5026);                                 \
	ODS_CF_VAL(CU_FILE_HANDLE_NOT_REGISTERED, 5027);                               \
	ODS_CF_VAL(CU_FILE_HANDLE_ALREADY_REGISTERED, 5028);                           \
	ODS_CF_VAL(CU_FILE_INTERNAL_ERROR, 5030);                                      \
	ODS_CF_VAL(CU_FILE_GETNEWFD_FAILED, 5031);                                     \
	ODS_CF_VAL(CU_FILE_NVFS_SETUP_ERROR, 5033);                                    \
	ODS_CF_VAL(CU_FILE_BATCH_FULL, 5037);                                          \
	ODS_CF_VAL(CU_FILE_ASYNC_NOT_SUPPORTED, 5038);                                 \
	ODS_CF_VAL(CU_FILE_INTERNAL_BATCH_SETUP_ERROR, 5039);                          \
	ODS_CF_VAL(CU_FILE_NOMEM_ERROR, 5043);                                         \
	ODS_CF_VAL(CU_FILE_IO_ERROR, 5044);                                            \
	ODS_CF_VAL(CU_FILE_INVALID_CONTEXT_ERROR, 5047);                               \
	_Static_assert(1, "")

/* The functions the drop-in exports and the gds backend calls have these
 * prototypes in both declarations. */
#define ODS_CF_FN(name, type) _Static_assert(__builtin_types_compatible_p(__typeof__(&name), type), #name)
#define ODS_CUFILE_PROTO_CHECKS() \
	ODS_CF_FN(cuFileDriverOpen, CUfileError_t (*)(void)); \
	ODS_CF_FN(cuFileDriverClose_v2, CUfileError_t (*)(void)); \
	ODS_CF_FN(cuFileDriverGetProperties, CUfileError_t (*)(CUfileDrvProps_t *)); \
	ODS_CF_FN(cuFileHandleRegister, CUfileError_t (*)(CUfileHandle_t *, CUfileDescr_t *)); \
	ODS_CF_FN(cuFileHandleDeregister, void (*)(CUfileHandle_t)); \
	ODS_CF_FN(cuFileBufRegister, CUfileError_t (*)(const void *, size_t, int)); \
	ODS_CF_FN(cuFileBufDeregister, CUfileError_t (*)(const void *)); \
	ODS_CF_FN(cuFileRead, ssize_t (*)(CUfileHandle_t, void *, size_t, off_t, off_t)); \
	ODS_CF_FN(cuFileWrite, ssize_t (*)(CUfileHandle_t, const void *, size_t, off_t, off_t)); \
	ODS_CF_FN(cuFileReadAsync, CUfileError_t (*)(CUfileHandle_t, void *, size_t *, off_t *, off_t *, ssize_t *, CUstream)); \
	ODS_CF_FN(cuFileWriteAsync, CUfileError_t (*)(CUfileHandle_t, void *, size_t *, off_t *, off_t *, ssize_t *, CUstream)); \
	ODS_CF_FN(cuFileStreamRegister, CUfileError_t (*)(CUstream, unsigned)); \
	ODS_CF_FN(cuFileBatchIOSetUp, CUfileError_t (*)(CUfileBatchHandle_t *, unsigned)); \
	ODS_CF_FN(cuFileBatchIOSubmit, CUfileError_t (*)(CUfileBatchHandle_t, unsigned, CUfileIOParams_t *, unsigned)); \
	ODS_CF_FN(cuFileBatchIOGetStatus, CUfileError_t (*)(CUfileBatchHandle_t, unsigned, unsigned *, CUfileIOEvents_t *, struct timespec *)); \
	ODS_CF_FN(cuFileBatchIODestroy, void (*)(CUfileBatchHandle_t)); \
	ODS_CF_FN(cuFileGetVersion, CUfileError_t (*)(int *)); \
	ODS_CF_FN(cuFileUseCount, long (*)(void)); \
	_Static_assert(1, "")

/* Added after cuFile 1.15: checked where the header has them. */
#define ODS_CUFILE_PROTO_CHECKS_1_20() \
	ODS_CF_FN(cuFileSetStatsLevel, CUfileError_t (*)(int)); \
	ODS_CF_FN(cuFileGetStatsLevel, CUfileError_t (*)(int *)); \
	ODS_CF_FN(cuFileStatsStart, CUfileError_t (*)(void)); \
	ODS_CF_FN(cuFileStatsStop, CUfileError_t (*)(void)); \
	ODS_CF_FN(cuFileStatsReset, CUfileError_t (*)(void)); \
	ODS_CF_FN(cuFileGetStatsL1, CUfileError_t (*)(struct CUfileStatsLevel1 *)); \
	ODS_CF_FN(cuFileGetStatsL2, CUfileError_t (*)(struct CUfileStatsLevel2 *)); \
	ODS_CF_FN(cuFileGetStatsL3, CUfileError_t (*)(struct CUfileStatsLevel3 *)); \
	ODS_CF_FN(cuFileExportPCIeTopology, CUfileError_t (*)(const char *)); \
	ODS_CF_FN(cuFileGetBARSizeInKB, CUfileError_t (*)(int, size_t *)); \
	ODS_CF_FN(cuFileDriverGetP2PFlags, CUfileError_t (*)(CUfileDriverStatusFlags_t, CUfileP2PFlags_t *)); \
	ODS_CF_FN(cuFileDriverSetP2PFlags, CUfileError_t (*)(CUfileDriverStatusFlags_t, CUfileP2PFlags_t)); \
	ODS_CF_FN(cuFileSetParameterPosixPoolSlabArray, CUfileError_t (*)(const size_t *, const size_t *, int)); \
	ODS_CF_FN(cuFileGetParameterPosixPoolSlabArray, CUfileError_t (*)(size_t *, size_t *, int)); \
	ODS_CF_FN(cuFileSetParameterGpuBounceBufferSlabArray, CUfileError_t (*)(const size_t *, const size_t *, int)); \
	ODS_CF_FN(cuFileGetParameterGpuBounceBufferSlabArray, CUfileError_t (*)(size_t *, size_t *, int)); \
	ODS_CF_FN(cuFileReadv, ssize_t (*)(CUfileHandle_t, const CUfileIOVec_t *, size_t, off_t, unsigned)); \
	ODS_CF_FN(cuFileWritev, ssize_t (*)(CUfileHandle_t, const CUfileIOVec_t *, size_t, off_t, unsigned)); \
	_Static_assert(1, "")

#endif
