/*
 * The OpenDS cuFile drop-in: a libcufile.so.0 whose cuFile* functions are
 * implemented on OpenDS's public API (include/opends.h), so that programs
 * written and built for NVIDIA's cuFile run on any OpenDS backend, with or
 * without a GPU. Layouts, status codes and calling conventions are cuFile's
 * (see src/vendor/cufile/cufile.h and cufile_layout.h); docs/cufile-dropin.md lists
 * what is provided and how each call maps.
 *
 * Conventions kept:
 * - control calls return CUfileError_t; OpenDS's codes have cuFile's
 *   numbers, so .err is the OpenDS code and .cu_err the CUresult behind an
 *   OPENDS_DEVICE_DRIVER_ERROR;
 * - cuFileRead/Write return bytes, -1 with errno set for an error of the
 *   operating system, or a negated CUfileOpError for the library's own;
 * - the driver opens implicitly on the first call that needs it, and
 *   cuFileDriverOpen/Close count uses.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opends.h"

#define ODS_CUFILE_NO_CUDA_H
#include "cufile.h"
#include "cufile_layout.h"

ODS_CUFILE_LAYOUT_CHECKS();
ODS_CUFILE_PROTO_CHECKS();

/* OpenDS's I/O structures are cuFile's, field for field; the batch calls
 * still convert entry by entry rather than rely on it. */
_Static_assert((int)OPENDS_READ == (int)CUFILE_READ && (int)OPENDS_WRITE == (int)CUFILE_WRITE, "opcodes");
_Static_assert((int)OPENDS_BATCH == (int)CUFILE_BATCH, "batch mode");
_Static_assert((int)OPENDS_COMPLETE == (int)CUFILE_COMPLETE && (int)OPENDS_FAILED == (int)CUFILE_FAILED &&
		       (int)OPENDS_CANCELED == (int)CUFILE_CANCELED && (int)OPENDS_WAITING == (int)CUFILE_WAITING &&
		       (int)OPENDS_PENDING == (int)CUFILE_PENDING && (int)OPENDS_INVALID == (int)CUFILE_INVALID &&
		       (int)OPENDS_TIMEOUT == (int)CUFILE_TIMEOUT,
	       "status bits");
_Static_assert((int)OPENDS_INVALID_VALUE == (int)CU_FILE_INVALID_VALUE &&
		       (int)OPENDS_DEVICE_DRIVER_ERROR == (int)CU_FILE_CUDA_DRIVER_ERROR &&
		       (int)OPENDS_INVALID_CONTEXT_ERROR == (int)CU_FILE_INVALID_CONTEXT_ERROR &&
		       (int)OPENDS_MEMORY_PINNING_FAILED == (int)CU_FILE_GPU_MEMORY_PINNING_FAILED &&
		       (int)OPENDS_FS_DRIVER_ERROR == (int)CU_FILE_NVFS_DRIVER_ERROR,
	       "status codes");
_Static_assert(OPENDS_STREAM_FIXED_BUF_OFFSET == CU_FILE_STREAM_FIXED_BUF_OFFSET &&
		       OPENDS_STREAM_FIXED_FILE_OFFSET == CU_FILE_STREAM_FIXED_FILE_OFFSET &&
		       OPENDS_STREAM_FIXED_FILE_SIZE == CU_FILE_STREAM_FIXED_FILE_SIZE &&
		       OPENDS_STREAM_PAGE_ALIGNED_INPUTS == CU_FILE_STREAM_PAGE_ALIGNED_INPUTS,
	       "stream flags");
_Static_assert(sizeof(opends_handle_t) == sizeof(CUfileHandle_t), "handles are pointers");
_Static_assert(sizeof(opends_batch_t) == sizeof(CUfileBatchHandle_t), "batches are pointers");

#define EXPORT __attribute__((visibility("default")))

/* The marker the gds backend looks for (dlsym) so that it never loads this
 * library in place of NVIDIA's. */
EXPORT const char opends_cufile_dropin[] = "OpenDS cuFile drop-in " ODS_CUFILE_DROPIN_VERSION;

/* The cuFile API level this library mirrors, in cuFileGetVersion's packing
 * (1000 * major + 10 * minor): 1.15, the first release with everything
 * implemented here (batch, streams, configuration parameters). */
#define MIRRORED_CUFILE_VERSION 1150

/* ---- status ------------------------------------------------------------- */

static CUfileError_t st(int code, int cu)
{
	CUfileError_t e = { (CUfileOpError)code, (CUresult)cu };
	return e;
}

static CUfileError_t from_ods(opends_error_t e)
{
	return st((int)e.err, e.err == OPENDS_DEVICE_DRIVER_ERROR ? e.backend_err : 0);
}

/* An OpenDS ssize_t result in cuFile's convention: library errors stay
 * negated codes, operating-system errors become -1 with errno. */
static ssize_t io_ret(ssize_t r)
{
	if (r >= 0 || r <= -CUFILEOP_BASE_ERR)
		return r;
	errno = (int)-r;
	return -1;
}

/* ---- configuration set through the API ---------------------------------- */

/* Values are cuFile's units (KiB for sizes). "set" marks those set through
 * the API; those with an OpenDS counterpart are given to OpenDS as its
 * OPENDS_* variable at the next open. */
enum { P_SIZE_N = CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS + 1,
       P_BOOL_N = CUFILE_PARAM_STREAM_MEMOPS_BYPASS + 1,
       P_STR_N = CUFILE_PARAM_LOG_DIR + 1 };

static const size_t size_default[P_SIZE_N] = {
	[CUFILE_PARAM_PROFILE_STATS] = 0,
	[CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH] = 32,  /* OpenDS's default */
	[CUFILE_PARAM_EXECUTION_MAX_IO_THREADS] = 4,       /* OpenDS's default */
	[CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB] = 8192,
	[CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM] = 4,
	[CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB] = 16384, /* OpenDS's 16 MiB */
	[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB] = 131072,
	[CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB] = 1024,
	[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB] = 33554432,
	[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE] = 128,
	[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB] = 4,
	[CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS] = 5,
};
static const size_t size_min[P_SIZE_N] = {
	[CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH] = 1,
	[CUFILE_PARAM_EXECUTION_MAX_IO_THREADS] = 1,
	[CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB] = 4,
	[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE] = 1,
};
static const size_t size_max[P_SIZE_N] = {
	[CUFILE_PARAM_PROFILE_STATS] = 3,
	[CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH] = 4096,
	[CUFILE_PARAM_EXECUTION_MAX_IO_THREADS] = 256,
	[CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB] = SIZE_MAX,
	[CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM] = SIZE_MAX,
	[CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB] = 1u << 20,
	[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB] = UINT_MAX,
	[CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB] = UINT_MAX,
	[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB] = UINT_MAX,
	[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE] = 4096,
	[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB] = SIZE_MAX,
	[CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS] = UINT_MAX,
};
static const bool bool_default[P_BOOL_N] = {
	[CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE] = true,
	[CUFILE_PARAM_EXECUTION_PARALLEL_IO] = true,
	[CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY] = true,
};
static const char *const str_default[P_STR_N] = { "ERROR", "", "" };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool is_open;   /* OpenDS is open (by us or by the program) */
static bool we_opened;        /* we called opends_driver_open */
static long users;            /* cuFileDriverOpen calls not yet closed */
static size_t size_val[P_SIZE_N];
static bool size_set[P_SIZE_N];
static bool bool_val[P_BOOL_N];
static char str_val[P_STR_N][256];
static bool defaults_done;

static void defaults_locked(void)
{
	if (defaults_done)
		return;
	memcpy(size_val, size_default, sizeof(size_val));
	memcpy(bool_val, bool_default, sizeof(bool_val));
	for (int i = 0; i < P_STR_N; i++)
		snprintf(str_val[i], sizeof(str_val[i]), "%s", str_default[i]);
	defaults_done = true;
}

/* Hand the values set through the API that OpenDS has a variable for to
 * the coming opends_driver_open. */
static void export_settings_locked(void)
{
	static const struct {
		int param;
		const char *var;
		size_t mult;
	} map[] = {
		{ CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, "OPENDS_CHUNK_SIZE", 1024 },
		{ CUFILE_PARAM_EXECUTION_MAX_IO_THREADS, "OPENDS_IO_THREADS", 1 },
		{ CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH, "OPENDS_QUEUE_DEPTH", 1 },
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(*map); i++) {
		if (!size_set[map[i].param])
			continue;
		char v[32];
		snprintf(v, sizeof(v), "%zu", size_val[map[i].param] * map[i].mult);
		setenv(map[i].var, v, 1);
	}
}

static CUfileError_t open_locked(void)
{
	if (atomic_load(&is_open))
		return st(CU_FILE_SUCCESS, 0);
	defaults_locked();
	export_settings_locked();
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_DRIVER_ALREADY_OPEN) {
		/* the program opened OpenDS itself; share it, never close it */
		we_opened = false;
	} else if (e.err != OPENDS_SUCCESS) {
		/* why: opends_last_error_detail() on this thread */
		return from_ods(e);
	} else {
		we_opened = true;
	}
	atomic_store(&is_open, true);
	return st(CU_FILE_SUCCESS, 0);
}

/* cuFile opens itself on first use. */
static CUfileError_t ensure_open(void)
{
	if (atomic_load_explicit(&is_open, memory_order_acquire))
		return st(CU_FILE_SUCCESS, 0);
	pthread_mutex_lock(&lock);
	CUfileError_t e = open_locked();
	pthread_mutex_unlock(&lock);
	return e;
}

/* ---- driver ------------------------------------------------------------- */

EXPORT CUfileError_t cuFileDriverOpen(void)
{
	pthread_mutex_lock(&lock);
	CUfileError_t e = open_locked();
	if (e.err == CU_FILE_SUCCESS)
		users++;
	pthread_mutex_unlock(&lock);
	return e;
}

EXPORT CUfileError_t cuFileDriverClose_v2(void)
{
	pthread_mutex_lock(&lock);
	if (!atomic_load(&is_open)) {
		pthread_mutex_unlock(&lock);
		return st(CU_FILE_DRIVER_NOT_INITIALIZED, 0);
	}
	if (users > 0)
		users--;
	opends_error_t e = { OPENDS_SUCCESS, 0 };
	if (users == 0) {
		if (we_opened)
			e = opends_driver_close();
		atomic_store(&is_open, false);
		we_opened = false;
	}
	pthread_mutex_unlock(&lock);
	return from_ods(e);
}

/* The unversioned name, for programs that resolve it directly. */
#undef cuFileDriverClose
EXPORT CUfileError_t cuFileDriverClose(void)
{
	return cuFileDriverClose_v2();
}

EXPORT long cuFileUseCount(void)
{
	pthread_mutex_lock(&lock);
	long n = atomic_load(&is_open) ? (users ? users : 1) : 0;
	pthread_mutex_unlock(&lock);
	return n;
}

EXPORT CUfileError_t cuFileGetVersion(int *version)
{
	if (!version)
		return st(CU_FILE_INVALID_VALUE, 0);
	*version = MIRRORED_CUFILE_VERSION;
	return st(CU_FILE_SUCCESS, 0);
}

static unsigned clamp_uint(size_t v)
{
	return v > UINT_MAX ? UINT_MAX : (unsigned)v;
}

EXPORT CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *props)
{
	if (!props)
		return st(CU_FILE_INVALID_VALUE, 0);
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	opends_drv_props_t p;
	opends_error_t oe = opends_driver_get_properties(&p);
	if (oe.err)
		return from_ods(oe);
	memset(props, 0, sizeof(*props));
	pthread_mutex_lock(&lock);
	defaults_locked();
	/* No nvidia-fs behind this library: no direct-path storage kinds,
	 * version 0.0, compatibility mode allowed - what NVIDIA's cuFile
	 * reports in compatibility mode. */
	props->nvfs.major_version = 0;
	props->nvfs.minor_version = 0;
	props->nvfs.poll_thresh_size = size_val[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB];
	props->nvfs.max_direct_io_size = p.max_direct_io_size / 1024;
	props->nvfs.dstatusflags = 0;
	props->nvfs.dcontrolflags = (1u << CU_FILE_ALLOW_COMPAT_MODE) |
				    (bool_val[CUFILE_PARAM_PROPERTIES_USE_POLL_MODE] ? 1u << CU_FILE_USE_POLL_MODE : 0);
	props->fflags = (1u << CU_FILE_BATCH_IO_SUPPORTED) | (1u << CU_FILE_STREAMS_SUPPORTED) |
			(1u << CU_FILE_PARALLEL_IO_SUPPORTED);
	props->max_device_cache_size = clamp_uint(size_val[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB]);
	props->per_buffer_cache_size = clamp_uint(size_val[CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB]);
	props->max_device_pinned_mem_size =
		clamp_uint(size_val[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB]);
	size_t bs = size_val[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE];
	props->max_batch_io_size = clamp_uint(bs < p.max_batch_io_size ? bs : p.max_batch_io_size);
	props->max_batch_io_timeout_msecs = clamp_uint(size_val[CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS]);
	pthread_mutex_unlock(&lock);
	return st(CU_FILE_SUCCESS, 0);
}

/* The legacy setters work whether or not the driver is open; a value with
 * an OpenDS counterpart takes effect at the next open of OpenDS. */
static CUfileError_t set_size(int param, size_t v)
{
	if (v < size_min[param] || v > size_max[param])
		return st(CU_FILE_DRIVER_UNSUPPORTED_LIMIT, 0);
	if (param == CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB && v % 4)
		return st(CU_FILE_DRIVER_UNSUPPORTED_LIMIT, 0); /* OpenDS wants 4 KiB multiples */
	pthread_mutex_lock(&lock);
	defaults_locked();
	size_val[param] = v;
	size_set[param] = true;
	pthread_mutex_unlock(&lock);
	return st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileDriverSetPollMode(bool poll, size_t poll_threshold_size)
{
	CUfileError_t e = set_size(CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB, poll_threshold_size);
	if (e.err)
		return e;
	pthread_mutex_lock(&lock);
	bool_val[CUFILE_PARAM_PROPERTIES_USE_POLL_MODE] = poll;
	pthread_mutex_unlock(&lock);
	return e;
}

EXPORT CUfileError_t cuFileDriverSetMaxDirectIOSize(size_t max_direct_io_size)
{
	return set_size(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, max_direct_io_size);
}

EXPORT CUfileError_t cuFileDriverSetMaxCacheSize(size_t max_cache_size)
{
	return set_size(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB, max_cache_size);
}

EXPORT CUfileError_t cuFileDriverSetMaxPinnedMemSize(size_t max_pinned_size)
{
	return set_size(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB, max_pinned_size);
}

/* ---- configuration parameters (set before the driver opens) -------------- */

EXPORT CUfileError_t cuFileGetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t *value)
{
	if (!value || (unsigned)param >= P_SIZE_N)
		return st(CU_FILE_INVALID_VALUE, 0);
	pthread_mutex_lock(&lock);
	defaults_locked();
	*value = size_val[param];
	pthread_mutex_unlock(&lock);
	return st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileGetParameterBool(CUFileBoolConfigParameter_t param, bool *value)
{
	if (!value || (unsigned)param >= P_BOOL_N)
		return st(CU_FILE_INVALID_VALUE, 0);
	pthread_mutex_lock(&lock);
	defaults_locked();
	*value = bool_val[param];
	pthread_mutex_unlock(&lock);
	return st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileGetParameterString(CUFileStringConfigParameter_t param, char *desc_str, int len)
{
	if (!desc_str || len <= 0 || (unsigned)param >= P_STR_N)
		return st(CU_FILE_INVALID_VALUE, 0);
	pthread_mutex_lock(&lock);
	defaults_locked();
	snprintf(desc_str, (size_t)len, "%s", str_val[param]);
	pthread_mutex_unlock(&lock);
	return st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileGetParameterMinMaxValue(CUFileSizeTConfigParameter_t param, size_t *min_value,
						   size_t *max_value)
{
	if (!min_value || !max_value || (unsigned)param >= P_SIZE_N)
		return st(CU_FILE_INVALID_VALUE, 0);
	*min_value = size_min[param];
	*max_value = size_max[param];
	return st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileSetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t value)
{
	if ((unsigned)param >= P_SIZE_N)
		return st(CU_FILE_INVALID_VALUE, 0);
	if (atomic_load(&is_open))
		return st(CU_FILE_DRIVER_ALREADY_OPEN, 0);
	return set_size((int)param, value);
}

EXPORT CUfileError_t cuFileSetParameterBool(CUFileBoolConfigParameter_t param, bool value)
{
	if ((unsigned)param >= P_BOOL_N)
		return st(CU_FILE_INVALID_VALUE, 0);
	if (atomic_load(&is_open))
		return st(CU_FILE_DRIVER_ALREADY_OPEN, 0);
	pthread_mutex_lock(&lock);
	defaults_locked();
	bool_val[param] = value;
	pthread_mutex_unlock(&lock);
	return st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileSetParameterString(CUFileStringConfigParameter_t param, const char *desc_str)
{
	if (!desc_str || (unsigned)param >= P_STR_N || strlen(desc_str) >= sizeof(str_val[0]))
		return st(CU_FILE_INVALID_VALUE, 0);
	if (atomic_load(&is_open))
		return st(CU_FILE_DRIVER_ALREADY_OPEN, 0);
	pthread_mutex_lock(&lock);
	defaults_locked();
	snprintf(str_val[param], sizeof(str_val[param]), "%s", desc_str);
	pthread_mutex_unlock(&lock);
	return st(CU_FILE_SUCCESS, 0);
}

/* ---- handles and buffers ------------------------------------------------ */

EXPORT CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr)
{
	if (!fh || !descr)
		return st(CU_FILE_INVALID_VALUE, 0);
	/* only Linux file descriptors; no user-space file-system callbacks */
	if (descr->type != CU_FILE_HANDLE_TYPE_OPAQUE_FD)
		return st(CU_FILE_INVALID_VALUE, 0);
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	opends_handle_t h = NULL;
	opends_error_t oe = opends_handle_register(&h, descr->handle.fd);
	if (oe.err)
		return from_ods(oe);
	*fh = (CUfileHandle_t)h;
	return st(CU_FILE_SUCCESS, 0);
}

EXPORT void cuFileHandleDeregister(CUfileHandle_t fh)
{
	if (fh && atomic_load(&is_open))
		(void)opends_handle_deregister((opends_handle_t)fh);
}

EXPORT CUfileError_t cuFileBufRegister(const void *bufPtr_base, size_t length, int flags)
{
	/* the RDMA hints mean nothing here and are accepted */
	if (flags & ~(CU_FILE_RDMA_REGISTER | CU_FILE_RDMA_RELAXED_ORDERING))
		return st(CU_FILE_INVALID_VALUE, 0);
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	return from_ods(opends_buf_register(bufPtr_base, length, 0));
}

EXPORT CUfileError_t cuFileBufDeregister(const void *bufPtr_base)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	return from_ods(opends_buf_deregister(bufPtr_base));
}

/* ---- synchronous I/O ---------------------------------------------------- */

EXPORT ssize_t cuFileRead(CUfileHandle_t fh, void *bufPtr_base, size_t size, off_t file_offset, off_t bufPtr_offset)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return -(ssize_t)e.err;
	return io_ret(opends_sync_read((opends_handle_t)fh, bufPtr_base, size, file_offset, bufPtr_offset));
}

EXPORT ssize_t cuFileWrite(CUfileHandle_t fh, const void *bufPtr_base, size_t size, off_t file_offset,
			   off_t bufPtr_offset)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return -(ssize_t)e.err;
	return io_ret(opends_sync_write((opends_handle_t)fh, bufPtr_base, size, file_offset, bufPtr_offset));
}

/* Scatter/gather: the segments one after another at consecutive file
 * offsets; a short read stops at EOF; an error anywhere is the result. */
static ssize_t rwv(int opcode, CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt, off_t file_offset,
		   unsigned flags)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return -(ssize_t)e.err;
	if ((!iov && iovcnt) || flags != 0 || file_offset < 0)
		return -(ssize_t)CU_FILE_INVALID_VALUE;
	size_t total = 0;
	for (size_t i = 0; i < iovcnt; i++) {
		if (iov[i].len > (size_t)SSIZE_MAX - total)
			return -(ssize_t)CU_FILE_INVALID_VALUE;
		off_t pos = file_offset + (off_t)total;
		ssize_t r = opcode == OPENDS_READ
				    ? opends_sync_read((opends_handle_t)fh, iov[i].base, iov[i].len, pos, 0)
				    : opends_sync_write((opends_handle_t)fh, iov[i].base, iov[i].len, pos, 0);
		if (r < 0)
			return io_ret(r);
		total += (size_t)r;
		if ((size_t)r < iov[i].len)
			break;
	}
	return (ssize_t)total;
}

EXPORT ssize_t cuFileReadv(CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt, off_t file_offset,
			   unsigned flags)
{
	return rwv(OPENDS_READ, fh, iov, iovcnt, file_offset, flags);
}

EXPORT ssize_t cuFileWritev(CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt, off_t file_offset,
			    unsigned flags)
{
	return rwv(OPENDS_WRITE, fh, iov, iovcnt, file_offset, flags);
}

/* ---- batch -------------------------------------------------------------- */

EXPORT CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *batch_idp, unsigned nr)
{
	if (!batch_idp)
		return st(CU_FILE_INVALID_VALUE, 0);
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	opends_batch_t b = NULL;
	opends_error_t oe = opends_batch_setup(&b, nr);
	if (oe.err)
		return from_ods(oe);
	*batch_idp = (CUfileBatchHandle_t)b;
	return st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch_idp, unsigned nr, CUfileIOParams_t *iocbp,
					 unsigned int flags)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	if (!iocbp || nr == 0)
		return from_ods(opends_batch_submit((opends_batch_t)batch_idp, nr, NULL, flags));
	opends_io_params_t small[16];
	opends_io_params_t *p = nr <= 16 ? small : malloc(nr * sizeof(*p));
	if (!p)
		return st(CU_FILE_NOMEM_ERROR, 0);
	for (unsigned i = 0; i < nr; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].mode = (opends_batch_mode_t)iocbp[i].mode;
		p[i].u.batch.buf_base = iocbp[i].u.batch.devPtr_base;
		p[i].u.batch.file_offset = iocbp[i].u.batch.file_offset;
		p[i].u.batch.buf_offset = iocbp[i].u.batch.devPtr_offset;
		p[i].u.batch.size = iocbp[i].u.batch.size;
		p[i].fh = (opends_handle_t)iocbp[i].fh;
		p[i].opcode = (opends_opcode_t)iocbp[i].opcode;
		p[i].cookie = iocbp[i].cookie;
	}
	opends_error_t oe = opends_batch_submit((opends_batch_t)batch_idp, nr, p, flags);
	if (p != small)
		free(p);
	return from_ods(oe);
}

EXPORT CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch_idp, unsigned min_nr, unsigned *nr,
					    CUfileIOEvents_t *iocbp, struct timespec *timeout)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	if (!nr)
		return st(CU_FILE_INVALID_VALUE, 0);
	unsigned room = *nr;
	opends_io_events_t small[16];
	opends_io_events_t *ev = NULL;
	if (room && iocbp) {
		ev = room <= 16 ? small : malloc(room * sizeof(*ev));
		if (!ev)
			return st(CU_FILE_NOMEM_ERROR, 0);
	}
	opends_error_t oe = opends_batch_get_status((opends_batch_t)batch_idp, min_nr, nr, ev, timeout);
	if (oe.err == OPENDS_SUCCESS && ev) {
		for (unsigned i = 0; i < *nr && i < room; i++) {
			iocbp[i].cookie = ev[i].cookie;
			iocbp[i].status = (CUfileStatus_t)ev[i].status;
			iocbp[i].ret = (size_t)ev[i].ret; /* negative errors wrap, as in cuFile */
		}
	}
	if (ev && ev != small)
		free(ev);
	return from_ods(oe);
}

EXPORT CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t batch_idp)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	return from_ods(opends_batch_cancel((opends_batch_t)batch_idp));
}

EXPORT void cuFileBatchIODestroy(CUfileBatchHandle_t batch_idp)
{
	if (atomic_load(&is_open))
		(void)opends_batch_destroy((opends_batch_t)batch_idp);
}

/* ---- stream-ordered I/O ------------------------------------------------- */

EXPORT CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p, off_t *file_offset_p,
				     off_t *bufPtr_offset_p, ssize_t *bytes_read_p, CUstream stream)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	return from_ods(opends_stream_read((opends_handle_t)fh, bufPtr_base, size_p, file_offset_p, bufPtr_offset_p,
					   bytes_read_p, (opends_stream_t)stream));
}

EXPORT CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p, off_t *file_offset_p,
				      off_t *bufPtr_offset_p, ssize_t *bytes_written_p, CUstream stream)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	return from_ods(opends_stream_write((opends_handle_t)fh, bufPtr_base, size_p, file_offset_p,
					    bufPtr_offset_p, bytes_written_p, (opends_stream_t)stream));
}

EXPORT CUfileError_t cuFileStreamRegister(CUstream stream, unsigned flags)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	return from_ods(opends_stream_register((opends_stream_t)stream, flags));
}

EXPORT CUfileError_t cuFileStreamDeregister(CUstream stream)
{
	CUfileError_t e = ensure_open();
	if (e.err)
		return e;
	return from_ods(opends_stream_deregister((opends_stream_t)stream));
}
