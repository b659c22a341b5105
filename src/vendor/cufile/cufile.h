/*
 * OpenDS's own declaration of the cuFile C interface (libcufile.so.0), written
 * from the public API reference: the types, constants and functions that the
 * OpenDS cuFile drop-in (src/dropin/cufile) provides, with cuFile's names,
 * numeric values and x86-64/aarch64 LP64 layouts. It lets programs written
 * for cuFile, and OpenDS itself, build where NVIDIA's cufile.h is absent.
 * src/vendor/cufile/layout_check.c proves the layouts equal NVIDIA's header
 * wherever that header is present.
 *
 * CUDA types: if <cuda.h> is available it is used; otherwise (or with
 * ODS_CUFILE_NO_CUDA_H defined) CUresult and CUstream are declared here as
 * ABI-equivalent stand-ins. Include <cuda.h> before this header if you use
 * both.
 */
#ifndef ODS_CUFILE_DECL_H
#define ODS_CUFILE_DECL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>

#if !defined(ODS_CUFILE_NO_CUDA_H) && !defined(CUDA_VERSION) && defined(__has_include)
#if __has_include(<cuda.h>)
#include <cuda.h>
#endif
#endif
#ifndef CUDA_VERSION
/* stand-ins with the same size and calling convention as cuda.h's */
typedef int CUresult;
typedef struct CUstream_st *CUstream;
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define CUFILEOP_BASE_ERR 5000

/* Status codes; the same numbers as OpenDS's OPENDS_* codes where both
 * exist. 5021 and 5032 are not used. */
typedef enum CUfileOpError {
	CU_FILE_SUCCESS = 0,
	CU_FILE_DRIVER_NOT_INITIALIZED = 5001,
	CU_FILE_DRIVER_INVALID_PROPS = 5002,
	CU_FILE_DRIVER_UNSUPPORTED_LIMIT = 5003,
	CU_FILE_DRIVER_VERSION_MISMATCH = 5004,
	CU_FILE_DRIVER_VERSION_READ_ERROR = 5005,
	CU_FILE_DRIVER_CLOSING = 5006,
	CU_FILE_PLATFORM_NOT_SUPPORTED = 5007,
	CU_FILE_IO_NOT_SUPPORTED = 5008,
	CU_FILE_DEVICE_NOT_SUPPORTED = 5009,
	CU_FILE_NVFS_DRIVER_ERROR = 5010,
	CU_FILE_CUDA_DRIVER_ERROR = 5011,
	CU_FILE_CUDA_POINTER_INVALID = 5012,
	CU_FILE_CUDA_MEMORY_TYPE_INVALID = 5013,
	CU_FILE_CUDA_POINTER_RANGE_ERROR = 5014,
	CU_FILE_CUDA_CONTEXT_MISMATCH = 5015,
	CU_FILE_INVALID_MAPPING_SIZE = 5016,
	CU_FILE_INVALID_MAPPING_RANGE = 5017,
	CU_FILE_INVALID_FILE_TYPE = 5018,
	CU_FILE_INVALID_FILE_OPEN_FLAG = 5019,
	CU_FILE_DIO_NOT_SET = 5020,
	CU_FILE_INVALID_VALUE = 5022,
	CU_FILE_MEMORY_ALREADY_REGISTERED = 5023,
	CU_FILE_MEMORY_NOT_REGISTERED = 5024,
	CU_FILE_PERMISSION_DENIED = 5025,
	CU_FILE_DRIVER_ALREADY_OPEN = 5026,
	CU_FILE_HANDLE_NOT_REGISTERED = 5027,
	CU_FILE_HANDLE_ALREADY_REGISTERED = 5028,
	CU_FILE_DEVICE_NOT_FOUND = 5029,
	CU_FILE_INTERNAL_ERROR = 5030,
	CU_FILE_GETNEWFD_FAILED = 5031,
	CU_FILE_NVFS_SETUP_ERROR = 5033,
	CU_FILE_IO_DISABLED = 5034,
	CU_FILE_BATCH_SUBMIT_FAILED = 5035,
	CU_FILE_GPU_MEMORY_PINNING_FAILED = 5036,
	CU_FILE_BATCH_FULL = 5037,
	CU_FILE_ASYNC_NOT_SUPPORTED = 5038,
	CU_FILE_INTERNAL_BATCH_SETUP_ERROR = 5039,
	CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR = 5040,
	CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR = 5041,
	CU_FILE_INTERNAL_BATCH_CANCEL_ERROR = 5042,
	CU_FILE_NOMEM_ERROR = 5043,
	CU_FILE_IO_ERROR = 5044,
	CU_FILE_INTERNAL_BUF_REGISTER_ERROR = 5045,
	CU_FILE_HASH_OPR_ERROR = 5046,
	CU_FILE_INVALID_CONTEXT_ERROR = 5047,
	CU_FILE_NVFS_INTERNAL_DRIVER_ERROR = 5048,
	CU_FILE_BATCH_NOCOMPAT_ERROR = 5049,
	CU_FILE_IO_MAX_ERROR = 5050, /* moves between releases; do not size tables by it */
} CUfileOpError;

/* Returned by value (8 bytes). cu_err is meaningful when err is
 * CU_FILE_CUDA_DRIVER_ERROR. */
typedef struct CUfileError {
	CUfileOpError err;
	CUresult cu_err;
} CUfileError_t;

/* A ssize_t result or an .err that is one of the codes above. */
#define IS_CUFILE_ERR(err) (abs((err)) > CUFILEOP_BASE_ERR)
#define IS_CUDA_ERR(status) ((status).err == CU_FILE_CUDA_DRIVER_ERROR)
#define CU_FILE_CUDA_ERR(status) ((status).cu_err)

/* Bit numbers in CUfileDrvProps_t.nvfs.dstatusflags: storage kinds the
 * direct path serves. */
typedef enum CUfileDriverStatusFlags {
	CU_FILE_LUSTRE_SUPPORTED = 0,
	CU_FILE_WEKAFS_SUPPORTED = 1,
	CU_FILE_NFS_SUPPORTED = 2,
	CU_FILE_GPFS_SUPPORTED = 3,
	CU_FILE_NVME_SUPPORTED = 4,
	CU_FILE_NVMEOF_SUPPORTED = 5,
	CU_FILE_SCSI_SUPPORTED = 6,
	CU_FILE_SCALEFLUX_CSD_SUPPORTED = 7,
	CU_FILE_NVMESH_SUPPORTED = 8,
	CU_FILE_BEEGFS_SUPPORTED = 9,
	CU_FILE_NVME_P2P_SUPPORTED = 11,
	CU_FILE_SCATEFS_SUPPORTED = 12,
	CU_FILE_VIRTIOFS_SUPPORTED = 13,
	CU_FILE_PANFS_SUPPORTED = 14,
	CU_FILE_MAX_TARGET_TYPES, /* one past the last */
} CUfileDriverStatusFlags_t;

/* Bit numbers in CUfileDrvProps_t.nvfs.dcontrolflags. */
typedef enum CUfileDriverControlFlags {
	CU_FILE_USE_POLL_MODE = 0,
	CU_FILE_ALLOW_COMPAT_MODE = 1,
	CU_FILE_VANILLA_POSIX_IO_MODE = 2,
	CU_FILE_POSIX_IO_MODE = CU_FILE_VANILLA_POSIX_IO_MODE,
	CU_FILE_FALLBACK_IO_MODE = 4,
} CUfileDriverControlFlags_t;

/* Bit numbers in CUfileDrvProps_t.fflags. */
typedef enum CUfileFeatureFlags {
	CU_FILE_DYN_ROUTING_SUPPORTED = 0,
	CU_FILE_BATCH_IO_SUPPORTED = 1,
	CU_FILE_STREAMS_SUPPORTED = 2,
	CU_FILE_PARALLEL_IO_SUPPORTED = 3,
	CU_FILE_P2P_SUPPORTED = 4,
} CUfileFeatureFlags_t;

/* Bit numbers of the peer-to-peer paths cuFile can take for a storage
 * kind (cuFileDriverGetP2PFlags / SetP2PFlags); the flags are 1 << bit. */
typedef enum CUfileP2PFlags {
	CUFILE_P2PDMA = 0,
	CUFILE_NVFS = 1,
	CUFILE_DMABUF = 2,
	CUFILE_C2C = 3,
	CUFILE_NVIDIA_PEERMEM = 4,
} CUfileP2PFlags_t;
#define CU_FILE_P2P_FLAG_PCI_P2PDMA ((CUfileP2PFlags_t)(1 << CUFILE_P2PDMA))
#define CU_FILE_P2P_FLAG_NVFS ((CUfileP2PFlags_t)(1 << CUFILE_NVFS))
#define CU_FILE_P2P_FLAG_DMABUF ((CUfileP2PFlags_t)(1 << CUFILE_DMABUF))
#define CU_FILE_P2P_FLAG_C2C ((CUfileP2PFlags_t)(1 << CUFILE_C2C))

typedef enum CUfileOpcode { CUFILE_READ = 0, CUFILE_WRITE = 1 } CUfileOpcode_t;

/* Sizes are in KiB. */
typedef struct CUfileDrvProps {
	struct {
		unsigned int major_version;
		unsigned int minor_version;
		size_t poll_thresh_size;
		size_t max_direct_io_size;
		unsigned int dstatusflags;
		unsigned int dcontrolflags;
	} nvfs;
	unsigned int fflags;
	unsigned int max_device_cache_size;
	unsigned int per_buffer_cache_size;
	unsigned int max_device_pinned_mem_size;
	unsigned int max_batch_io_size;
	unsigned int max_batch_io_timeout_msecs;
} CUfileDrvProps_t;

/* flags of cuFileBufRegister (accepted and ignored by the drop-in) */
#define CU_FILE_RDMA_REGISTER 1
#define CU_FILE_RDMA_RELAXED_ORDERING (1 << 1)

struct sockaddr;
typedef struct sockaddr sockaddr_t;

typedef struct cufileRDMAInfo {
	int version;
	int desc_len;
	const char *desc_str;
} cufileRDMAInfo_t;

/* Callbacks for CU_FILE_HANDLE_TYPE_USERSPACE_FS (not supported by the
 * drop-in; declared for layout). */
typedef struct CUfileFSOps {
	const char *(*fs_type)(const void *handle);
	int (*getRDMADeviceList)(const void *handle, sockaddr_t **hostaddrs);
	int (*getRDMADevicePriority)(const void *handle, char *, size_t, loff_t, const sockaddr_t *hostaddr);
	ssize_t (*read)(const void *handle, char *, size_t, loff_t, const cufileRDMAInfo_t *);
	ssize_t (*write)(const void *handle, const char *, size_t, loff_t, const cufileRDMAInfo_t *);
} CUfileFSOps_t;

enum CUfileFileHandleType {
	CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1,
	CU_FILE_HANDLE_TYPE_OPAQUE_WIN32 = 2,
	CU_FILE_HANDLE_TYPE_USERSPACE_FS = 3,
};

/* Zero it before filling it in. */
typedef struct CUfileDescr_t {
	enum CUfileFileHandleType type;
	union {
		int fd;
		void *handle;
	} handle;
	const CUfileFSOps_t *fs_ops;
} CUfileDescr_t;

typedef void *CUfileHandle_t;

typedef enum CUFILEStatus_enum {
	CUFILE_WAITING = 0x1,
	CUFILE_PENDING = 0x2,
	CUFILE_INVALID = 0x4,
	CUFILE_CANCELED = 0x8,
	CUFILE_COMPLETE = 0x10,
	CUFILE_TIMEOUT = 0x20,
	CUFILE_FAILED = 0x40,
} CUfileStatus_t;

typedef enum cufileBatchMode { CUFILE_BATCH = 1 } CUfileBatchMode_t;

typedef struct CUfileIOParams {
	CUfileBatchMode_t mode; /* first */
	union {
		struct {
			void *devPtr_base; /* device or host memory */
			off_t file_offset;
			off_t devPtr_offset;
			size_t size;
		} batch;
	} u;
	CUfileHandle_t fh;
	CUfileOpcode_t opcode;
	void *cookie;
} CUfileIOParams_t;

typedef struct CUfileIOEvents {
	void *cookie;
	CUfileStatus_t status;
	size_t ret; /* bytes, or a negative error stored in a size_t */
} CUfileIOEvents_t;

typedef void *CUfileBatchHandle_t;

/* cuFileStreamRegister flags */
#define CU_FILE_STREAM_FIXED_BUF_OFFSET 1
#define CU_FILE_STREAM_FIXED_FILE_OFFSET 2
#define CU_FILE_STREAM_FIXED_FILE_SIZE 4
#define CU_FILE_STREAM_PAGE_ALIGNED_INPUTS 8

typedef struct CUfileIOVec {
	void *base;
	size_t len;
} CUfileIOVec_t;

/* Configuration parameters (values are the declaration order). */
typedef enum CUFileSizeTConfigParameter_t {
	CUFILE_PARAM_PROFILE_STATS,
	CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH,
	CUFILE_PARAM_EXECUTION_MAX_IO_THREADS,
	CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB,
	CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM,
	CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB,
	CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB,
	CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB,
	CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB,
	CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE,
	CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB,
	CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS,
} CUFileSizeTConfigParameter_t;

typedef enum CUFileBoolConfigParameter_t {
	CUFILE_PARAM_PROPERTIES_USE_POLL_MODE,
	CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE,
	CUFILE_PARAM_FORCE_COMPAT_MODE,
	CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE,
	CUFILE_PARAM_EXECUTION_PARALLEL_IO,
	CUFILE_PARAM_PROFILE_NVTX,
	CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY,
	CUFILE_PARAM_USE_PCIP2PDMA,
	CUFILE_PARAM_PREFER_IO_URING,
	CUFILE_PARAM_FORCE_ODIRECT_MODE,
	CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION,
	CUFILE_PARAM_STREAM_MEMOPS_BYPASS,
	CUFILE_PARAM_PROPERTIES_POSIX_IO_MODE,
	CUFILE_PARAM_GDS_FALLBACK_IO,
} CUFileBoolConfigParameter_t;

typedef enum CUFileStringConfigParameter_t {
	CUFILE_PARAM_LOGGING_LEVEL,
	CUFILE_PARAM_ENV_LOGFILE_PATH,
	CUFILE_PARAM_LOG_DIR,
	CUFILE_PARAM_RDMA_TRANSPORT,
} CUFileStringConfigParameter_t;

typedef enum CUFileArrayConfigParameter_t {
	CUFILE_PARAM_POSIX_POOL_SLAB_SIZE_KB,
	CUFILE_PARAM_POSIX_POOL_SLAB_COUNT,
	CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_SIZE_KB,
	CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_COUNT,
} CUFileArrayConfigParameter_t;

/* Statistics (cuFileGetStatsL1/L2/L3). The drop-in keeps them (levels 1-3,
 * docs/cufile-dropin.md), but their layouts are not declared here: they
 * changed between cuFile releases, so programs that read statistics build
 * against NVIDIA's cufile.h of the version they target. */
#define CUFILE_GPU_UUID_LEN 16
typedef struct CUfileStatsLevel1 CUfileStatsLevel1_t;
typedef struct CUfileStatsLevel2 CUfileStatsLevel2_t;
typedef struct CUfileStatsLevel3 CUfileStatsLevel3_t;

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* driver */
CUfileError_t cuFileDriverOpen(void);
CUfileError_t cuFileDriverClose(void);
CUfileError_t cuFileDriverClose_v2(void);
long cuFileUseCount(void);
CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *props);
CUfileError_t cuFileDriverSetPollMode(bool poll, size_t poll_threshold_size);
CUfileError_t cuFileDriverSetMaxDirectIOSize(size_t max_direct_io_size);
CUfileError_t cuFileDriverSetMaxCacheSize(size_t max_cache_size);
CUfileError_t cuFileDriverSetMaxPinnedMemSize(size_t max_pinned_size);
CUfileError_t cuFileGetVersion(int *version);

/* configuration parameters */
CUfileError_t cuFileGetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t *value);
CUfileError_t cuFileGetParameterBool(CUFileBoolConfigParameter_t param, bool *value);
CUfileError_t cuFileGetParameterString(CUFileStringConfigParameter_t param, char *desc_str, int len);
CUfileError_t cuFileGetParameterMinMaxValue(CUFileSizeTConfigParameter_t param, size_t *min_value,
					    size_t *max_value);
CUfileError_t cuFileSetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t value);
CUfileError_t cuFileSetParameterBool(CUFileBoolConfigParameter_t param, bool value);
CUfileError_t cuFileSetParameterString(CUFileStringConfigParameter_t param, const char *desc_str);

/* handles and buffers */
CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr);
void cuFileHandleDeregister(CUfileHandle_t fh);
CUfileError_t cuFileBufRegister(const void *bufPtr_base, size_t length, int flags);
CUfileError_t cuFileBufDeregister(const void *bufPtr_base);

/* synchronous I/O: bytes, -1 with errno, or a negated CUfileOpError */
ssize_t cuFileRead(CUfileHandle_t fh, void *bufPtr_base, size_t size, off_t file_offset, off_t bufPtr_offset);
ssize_t cuFileWrite(CUfileHandle_t fh, const void *bufPtr_base, size_t size, off_t file_offset,
		    off_t bufPtr_offset);
ssize_t cuFileReadv(CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt, off_t file_offset, unsigned flags);
ssize_t cuFileWritev(CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt, off_t file_offset,
		     unsigned flags);

/* batch */
CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *batch_idp, unsigned nr);
CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch_idp, unsigned nr, CUfileIOParams_t *iocbp,
				  unsigned int flags);
CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch_idp, unsigned min_nr, unsigned *nr,
				     CUfileIOEvents_t *iocbp, struct timespec *timeout);
CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t batch_idp);
void cuFileBatchIODestroy(CUfileBatchHandle_t batch_idp);

/* stream-ordered I/O */
CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p, off_t *file_offset_p,
			      off_t *bufPtr_offset_p, ssize_t *bytes_read_p, CUstream stream);
CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p, off_t *file_offset_p,
			       off_t *bufPtr_offset_p, ssize_t *bytes_written_p, CUstream stream);
CUfileError_t cuFileStreamRegister(CUstream stream, unsigned flags);
CUfileError_t cuFileStreamDeregister(CUstream stream);

/* statistics */
CUfileError_t cuFileSetStatsLevel(int level);
CUfileError_t cuFileGetStatsLevel(int *level);
CUfileError_t cuFileStatsStart(void);
CUfileError_t cuFileStatsStop(void);
CUfileError_t cuFileStatsReset(void);
CUfileError_t cuFileGetStatsL1(CUfileStatsLevel1_t *stats);
CUfileError_t cuFileGetStatsL2(CUfileStatsLevel2_t *stats);
CUfileError_t cuFileGetStatsL3(CUfileStatsLevel3_t *stats);

/* platform: PCIe topology, BAR size, peer-to-peer paths */
CUfileError_t cuFileExportPCIeTopology(const char *filename);
CUfileError_t cuFileGetBARSizeInKB(int gpuIndex, size_t *barSize);
CUfileError_t cuFileDriverGetP2PFlags(CUfileDriverStatusFlags_t status_flag, CUfileP2PFlags_t *p2p_flags);
CUfileError_t cuFileDriverSetP2PFlags(CUfileDriverStatusFlags_t status_flag, CUfileP2PFlags_t p2p_flags);

/* slab-array parameters (sizes in KiB, counts; len entries each) */
CUfileError_t cuFileSetParameterPosixPoolSlabArray(const size_t *size_values, const size_t *count_values, int len);
CUfileError_t cuFileGetParameterPosixPoolSlabArray(size_t *size_values, size_t *count_values, int len);
CUfileError_t cuFileSetParameterGpuBounceBufferSlabArray(const size_t *size_values, const size_t *count_values,
							 int len);
CUfileError_t cuFileGetParameterGpuBounceBufferSlabArray(size_t *size_values, size_t *count_values, int len);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

/* As in NVIDIA's header: programs built against it call the _v2 symbol. */
#define cuFileDriverClose cuFileDriverClose_v2

/* A string for a status code (header-only, as in cuFile: not a symbol). */
static inline const char *cufileop_status_error(CUfileOpError status)
{
	switch (status) {
	case CU_FILE_SUCCESS: return "success";
	case CU_FILE_DRIVER_NOT_INITIALIZED: return "driver not initialized";
	case CU_FILE_INVALID_VALUE: return "invalid argument";
	case CU_FILE_HANDLE_NOT_REGISTERED: return "file handle not registered";
	case CU_FILE_HANDLE_ALREADY_REGISTERED: return "file descriptor already registered";
	case CU_FILE_MEMORY_ALREADY_REGISTERED: return "memory already registered";
	case CU_FILE_MEMORY_NOT_REGISTERED: return "memory not registered";
	case CU_FILE_INVALID_MAPPING_RANGE: return "access beyond the registered range";
	case CU_FILE_INVALID_FILE_TYPE: return "unsupported file type";
	case CU_FILE_INVALID_FILE_OPEN_FLAG: return "unsupported file open flags";
	case CU_FILE_IO_NOT_SUPPORTED: return "not supported on this file";
	case CU_FILE_DRIVER_ALREADY_OPEN: return "driver is already open";
	case CU_FILE_DRIVER_UNSUPPORTED_LIMIT: return "property range error";
	case CU_FILE_PLATFORM_NOT_SUPPORTED: return "platform not supported";
	case CU_FILE_CUDA_DRIVER_ERROR: return "CUDA driver error";
	case CU_FILE_NOMEM_ERROR: return "out of memory";
	case CU_FILE_IO_ERROR: return "I/O error";
	case CU_FILE_INTERNAL_ERROR: return "internal error";
	case CU_FILE_BATCH_FULL: return "batch full";
	default: return "cufile error";
	}
}
#define CUFILE_ERRSTR(err) cufileop_status_error((CUfileOpError)abs((err)))

#ifdef __cplusplus
}
#endif

#endif
