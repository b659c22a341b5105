/*
 * OpenDS — open accelerator direct storage.
 *
 * One C11 API, shaped like NVIDIA's cuFile, that moves file data between
 * storage and host or accelerator (GPU) memory. The same program runs with
 * GPUDirect Storage, without it, and without a GPU at all; the library picks
 * the fastest path the machine has (see OPENDS_BACKEND below).
 *
 * Conventions used throughout this header
 * ----------------------------------------
 * - Functions returning opends_error_t report .err == OPENDS_SUCCESS on
 *   success; on failure .err is an OPENDS_* code and .backend_err holds the
 *   errno of the system call that failed, or the accelerator driver's result
 *   code, else 0.
 * - Functions returning ssize_t return a byte count (>= 0) or a negated
 *   error:
 *     -OPENDS_INVALID_VALUE   an argument the library checks itself (NULL,
 *                             negative offset, size > SSIZE_MAX, offset+size
 *                             overflowing off_t);
 *     -OPENDS_<other>         another condition of the library's own
 *                             (driver not open, handle not registered, ...);
 *     -errno (< 5000)         an error the operating system reported for the
 *                             I/O itself (EBADF, EIO, ENOSPC, ...).
 *   opends_op_status_error() turns any of them into a string.
 * - opends_last_error_detail() gives a sentence on the last failure of the
 *   calling thread, naming the argument or variable at fault.
 * - opends_driver_open() and opends_driver_close() are not thread-safe; every
 *   other call is, once open has returned. Any call other than open made
 *   while the driver is closed fails with OPENDS_DRIVER_NOT_INITIALIZED (or
 *   its negation).
 * - fork(): in the child, the driver inherited from the parent is closed
 *   (every call fails at once with OPENDS_DRIVER_NOT_INITIALIZED; close
 *   too) and the child may call opends_driver_open() for a driver of its
 *   own. The parent's handles, buffers, streams, batches and I/O in flight
 *   do not exist in the child (register the fds again); the library's
 *   internal fds stay open there until exec (close-on-exec). The parent is
 *   not affected. As with CUDA itself, a child cannot use the accelerator
 *   of a parent that has: open it with OPENDS_ACCEL=host there.
 * - opends_handle_deregister waits for the handle's requests already
 *   handed to the backend (async reads and writes, batch entries) to
 *   finish. Deregistering a handle while another thread is starting I/O on
 *   it or while stream operations on it have not started (synchronize the
 *   stream first), or deregistering a buffer or stream while I/O is in
 *   flight on it, is undefined (opends_driver_close waits for all I/O), as
 *   is closing an fd that another thread is reading.
 * - Accelerator context (CUDA): device memory of every GPU the process sees
 *   may be used, from any thread, at the same time. Each operation is
 *   served by the device that owns its buffer, in the context the buffer
 *   was allocated in (found from the pointer), whatever context is current
 *   on the calling thread and whichever device was current at
 *   opends_driver_open; each device gets its own copy lanes. A thread's
 *   current context is never an error by itself: OPENDS_CONTEXT_MISMATCH is
 *   only a stream of one device given a buffer of another (the detail
 *   names both), or a buffer or stream whose context was destroyed. The
 *   NULL stream is the default stream of the buffer's device. Host memory
 *   never needs a context.
 * - Sync, async and batch I/O on device memory is not ordered after work
 *   the caller queued on its own streams (as with cuFileRead): synchronize
 *   the stream first, or use the stream family.
 *
 * Porting from cuFile
 * -------------------
 *   cuFile                           OpenDS
 *   cuFileDriverOpen / Close         opends_driver_open / opends_driver_close
 *   cuFileDriverGetProperties        opends_driver_get_properties (sizes in
 *                                    bytes, not KiB)
 *   cuFileGetVersion                 opends_get_version
 *   cuFileHandleRegister(&fh, &descr)opends_handle_register(&fh, fd)  (a plain
 *                                    fd; no CUfileDescr_t)
 *   cuFileHandleDeregister           opends_handle_deregister
 *   cuFileBufRegister / Deregister   opends_buf_register / opends_buf_deregister
 *   cuFileRead / cuFileWrite         opends_sync_read / opends_sync_write
 *   (none)                           opends_async_read / _write / _await / _poll
 *   cuFileReadAsync / WriteAsync     opends_stream_read / opends_stream_write
 *   cuFileStreamRegister / Dereg.    opends_stream_register / _deregister
 *   (cudaStreamSynchronize)          opends_stream_synchronize (also works
 *                                    for host-ordered queues)
 *   cuFileBatchIOSetUp               opends_batch_setup
 *   cuFileBatchIOSubmit              opends_batch_submit
 *   cuFileBatchIOGetStatus           opends_batch_get_status
 *   cuFileBatchIOCancel / Destroy    opends_batch_cancel / opends_batch_destroy
 *   CUfileError_t {err, cu_err}      opends_error_t {err, backend_err}
 *   CU_FILE_<NAME> (5001..5047)      OPENDS_<NAME>, same numeric values
 *   cuFileGetErrorString             opends_op_status_error
 *   CUfileIOParams_t / IOEvents_t    opends_io_params_t / opends_io_events_t
 *   CUFILE_READ / WRITE, CUFILE_BATCH OPENDS_READ / WRITE, OPENDS_BATCH
 *   CUFILE_WAITING .. CUFILE_FAILED  OPENDS_WAITING .. OPENDS_FAILED (same bits)
 * Differences worth knowing: alignment is never the caller's problem (any
 * size and offset works on every backend); a read-only fd cannot be written
 * through (-EBADF); memory registration is an optimisation, never required.
 */
#ifndef OPENDS_H
#define OPENDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OPENDS_VERSION_MAJOR 0
#define OPENDS_VERSION_MINOR 1
#define OPENDS_VERSION_PATCH 0

#if defined(__GNUC__)
#define OPENDS_API __attribute__((visibility("default")))
#else
#define OPENDS_API
#endif

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* Codes below OPENDS_ERRNO_MAX are errno values (EIO, EBADF, ...) that the
 * operating system reported; OpenDS's own codes (below) start above it, as
 * cuFile's CU_FILE_* codes do (CUFILEOP_BASE_ERR). */
#define OPENDS_ERRNO_MAX 5000

/* The one list of error codes: X(NAME, value, "string"). It generates the
 * enum below, the strings of opends_op_status_error(), the names of
 * opends_err_name() and Python's opends.OPENDS_* constants. Values equal
 * cuFile's CU_FILE_* codes; 5021 and 5032 are unused, as there. */
#define OPENDS_ERROR_LIST(X) \
	X(SUCCESS, 0, "success") \
	X(DRIVER_NOT_INITIALIZED, 5001, "driver is not open") \
	X(DRIVER_INVALID_PROPS, 5002, "invalid driver configuration") \
	X(DRIVER_UNSUPPORTED_LIMIT, 5003, "configuration value out of range") \
	X(DRIVER_VERSION_MISMATCH, 5004, "driver version mismatch") \
	X(DRIVER_VERSION_READ_ERROR, 5005, "driver version could not be read") \
	X(DRIVER_CLOSING, 5006, "driver is closing") \
	X(PLATFORM_NOT_SUPPORTED, 5007, "backend not supported on this platform") \
	X(IO_NOT_SUPPORTED, 5008, "operation not supported on this file") \
	X(DEVICE_NOT_SUPPORTED, 5009, "operation not supported on this device") \
	X(FS_DRIVER_ERROR, 5010, "file system driver error") \
	X(DEVICE_DRIVER_ERROR, 5011, "accelerator driver error") \
	X(POINTER_INVALID, 5012, "invalid memory pointer") \
	X(MEMORY_TYPE_INVALID, 5013, "memory type not supported by this backend") \
	X(POINTER_RANGE_ERROR, 5014, "pointer range exceeds the allocation") \
	X(CONTEXT_MISMATCH, 5015, "stream and buffer of different devices, or a destroyed context") \
	X(INVALID_MAPPING_SIZE, 5016, "access beyond the pinned size") \
	X(INVALID_MAPPING_RANGE, 5017, "access beyond the registered buffer") \
	X(INVALID_FILE_TYPE, 5018, "not a regular file or block device") \
	X(INVALID_FILE_OPEN_FLAG, 5019, "unsupported file open flags") \
	X(DIO_NOT_SET, 5020, "O_DIRECT not set on the file descriptor") \
	X(INVALID_VALUE, 5022, "invalid argument") \
	X(MEMORY_ALREADY_REGISTERED, 5023, "memory range already registered") \
	X(MEMORY_NOT_REGISTERED, 5024, "memory not registered") \
	X(PERMISSION_DENIED, 5025, "permission denied") \
	X(DRIVER_ALREADY_OPEN, 5026, "driver is already open") \
	X(HANDLE_NOT_REGISTERED, 5027, "file handle is not registered") \
	X(HANDLE_ALREADY_REGISTERED, 5028, "file descriptor is already registered") \
	X(DEVICE_NOT_FOUND, 5029, "accelerator device not found") \
	X(INTERNAL_ERROR, 5030, "internal error") \
	X(GETNEWFD_FAILED, 5031, "could not open a new file descriptor") \
	X(FS_SETUP_ERROR, 5033, "file system setup error") \
	X(IO_DISABLED, 5034, "I/O disabled by configuration for this file") \
	X(BATCH_SUBMIT_FAILED, 5035, "batch submission failed") \
	X(MEMORY_PINNING_FAILED, 5036, "memory pinning failed") \
	X(BATCH_FULL, 5037, "batch is full") \
	X(ASYNC_NOT_SUPPORTED, 5038, "stream operation not supported") \
	X(NOMEM_ERROR, 5043, "out of memory") \
	X(IO_ERROR, 5044, "I/O error") \
	X(INVALID_CONTEXT_ERROR, 5047, "invalid accelerator context")

typedef enum opends_op_error {
#define OPENDS_X_ENUM(name, value, str) OPENDS_##name = value,
	OPENDS_ERROR_LIST(OPENDS_X_ENUM)
#undef OPENDS_X_ENUM
} opends_op_error_t;

/* err: the OpenDS code. backend_err: errno of a failed system call, or the
 * accelerator driver's result code (a CUresult for CUDA), else 0. */
typedef struct opends_error {
	opends_op_error_t err;
	int backend_err;
} opends_error_t;

/*
 * A string for any code: an opends_op_error_t, its negation, or a (negated)
 * errno as returned by the ssize_t functions. Never NULL; unknown codes give
 * "unknown error".
 */
OPENDS_API const char *opends_op_status_error(int code);

/*
 * The name of a code as a static string (like libuv's uv_err_name):
 * "OPENDS_INVALID_VALUE" for an OpenDS code, "EIO", "EBADF", ... for an errno
 * value below OPENDS_ERRNO_MAX, either one negated or not (the ssize_t calls
 * return negated codes). Never NULL: a code that names nothing gives
 * "UNKNOWN". Needs no open driver; thread-safe.
 */
OPENDS_API const char *opends_err_name(int code);

/*
 * A sentence about the last failure of a call made on this thread, naming
 * the argument or configuration variable at fault; "" if no call on this
 * thread has failed. Successful calls leave it as it was. The string stays
 * valid until the next failing call on the same thread.
 */
OPENDS_API const char *opends_last_error_detail(void);

/* ------------------------------------------------------------------------ */
/* Driver and configuration                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Open the library: read and validate the configuration from the
 * environment, choose the backend and start it.
 *
 * Environment (an empty value means unset; every variable is validated at
 * every open whichever backend is chosen; a value that is not a number, is
 * out of range or names nothing known fails the open with
 * OPENDS_DRIVER_INVALID_PROPS and a detail naming the variable):
 *   OPENDS_BACKEND      auto (default) or a backend's name: ref, uring, ...
 *                       auto takes the fastest backend that works here.
 *   OPENDS_ACCEL        auto (default), cuda or host: the accelerator layer.
 *   OPENDS_IO_THREADS   worker threads, 1..256.
 *   OPENDS_QUEUE_DEPTH  operations in flight per worker, 1..4096.
 *   OPENDS_IO_KWORKERS  uring: kernel threads per worker that copy reads of
 *                       cached ranges (and reads of cached ranges a worker
 *                       keeps in flight), 1..64; default CPUs / workers.
 *   OPENDS_CHUNK_SIZE   bytes per staged chunk, 4 KiB..1 GiB, a multiple of
 *                       4096; suffixes k, m, g or K, M, G (binary: 4k and
 *                       4K are 4096) accepted.
 *   OPENDS_MAX_PINNED   staging memory budget in bytes, 1m..1024g (suffixes
 *                       as above); default a quarter of the RAM, at least
 *                       256 MiB. The backend's staging (uring: workers x
 *                       queue depth x chunk) must fit: the depth is cut to
 *                       fit; when workers x chunk alone is above it, the
 *                       open fails with OPENDS_DRIVER_INVALID_PROPS and a
 *                       detail naming the variables. Without a GPU the
 *                       staging is mapped as it is first needed. Stream
 *                       operations' staging counts too (kept for reuse
 *                       until close); one whose staging would not fit
 *                       what is left runs the slower general way (one
 *                       host function on the stream), never failing for it.
 *   OPENDS_INLINE_MAX   bytes, 0..1g (suffixes as above): a synchronous read
 *                       of at most this many bytes runs on the calling
 *                       thread, with no hand-off to a worker (uring;
 *                       default the chunk size, OPENDS_CHUNK_SIZE; 0:
 *                       never). ref and gds always run
 *                       synchronous calls on the calling thread.
 *   OPENDS_READAHEAD    0 or 1 (default 1): read ahead across sequential
 *                       synchronous reads into device memory (uring; see
 *                       opends_handle_advise for when and the guarantee);
 *                       0: never.
 *   OPENDS_CPU_MASK     hex mask of CPUs for the workers (worker i on set
 *                       bit i mod popcount); 0 or unset = scheduler decides.
 *   OPENDS_IDLE_SPIN    µs an idle worker spins before sleeping, 0..1000000,
 *                       or "busy" to never sleep.
 *   OPENDS_ASSUME_ALIGNED_ONLY  0 or 1: 1 promises 4 KiB-aligned offsets and
 *                       sizes; unaligned I/O then fails with
 *                       -OPENDS_INVALID_VALUE.
 * Numbers are plain decimal (OPENDS_CPU_MASK: hex) without sign, spaces or
 * leading zeros ("08" is refused, "0" is fine).
 *   OPENDS_CUFILE_LIBRARY  path or file name of NVIDIA's libcufile.so.0 (gds).
 *   OPENDS_RADOS_LIBRARY   path or file name of librados.so.2 (rados:// sources).
 * Variables a backend does not use are still validated.
 *
 * Errors: OPENDS_DRIVER_ALREADY_OPEN (open twice), OPENDS_DRIVER_INVALID_PROPS
 * (bad configuration), OPENDS_PLATFORM_NOT_SUPPORTED (the named backend
 * cannot run here; the detail says why), OPENDS_NOMEM_ERROR,
 * OPENDS_INTERNAL_ERROR (backend_err = errno).
 */
OPENDS_API opends_error_t opends_driver_open(void);

/*
 * Open the library with settings given by the program: each names one of
 * the variables above (OPENDS_BACKEND, OPENDS_IO_KWORKERS, ...) and gives
 * its value as the environment would, through the same validation. Use it
 * instead of setenv() before opends_driver_open: setenv is not thread-safe
 * (another thread's getenv may crash) and reaches child processes.
 * Precedence, for each variable: a setting here, else the environment,
 * else the default. The settings and their strings are read during the
 * call only. opends_driver_open() is opends_driver_open_with(NULL, 0).
 *
 * Errors, all before anything is opened (the detail names the setting by
 * its index and variable):
 *   OPENDS_DRIVER_ALREADY_OPEN  the driver is open (checked first);
 *   OPENDS_INVALID_VALUE        settings NULL with n > 0; a name that is
 *       NULL or not a variable above; a variable given twice; a value that
 *       is NULL, empty or invalid for it (what it accepts is in the
 *       detail); OPENDS_CUFILE_LIBRARY or OPENDS_RADOS_LIBRARY, which are
 *       read from the environment only (where those libraries load);
 *   otherwise those of opends_driver_open (an invalid value in the
 *   environment, for a variable not given here, is
 *   OPENDS_DRIVER_INVALID_PROPS as there).
 */
typedef struct opends_setting {
	const char *name;  /* "OPENDS_IO_THREADS", ... */
	const char *value; /* "8", ...                 */
} opends_setting_t;

OPENDS_API opends_error_t opends_driver_open_with(const opends_setting_t *settings, size_t n);

/* Where a variable's value in effect came from. */
typedef enum opends_setting_source {
	OPENDS_SETTING_DEFAULT = 0,     /* neither: the library's default */
	OPENDS_SETTING_ENVIRONMENT = 1, /* the environment at the open    */
	OPENDS_SETTING_EXPLICIT = 2,    /* opends_driver_open_with        */
} opends_setting_source_t;

/*
 * The value in effect for one variable of the open driver, as given
 * (value "" for a default), and where it came from (source may be NULL).
 * Errors: OPENDS_DRIVER_NOT_INITIALIZED (closed), OPENDS_INVALID_VALUE
 * (name, value NULL, len 0, name not a variable above, or len too small
 * for the value and its NUL: nothing written).
 */
OPENDS_API opends_error_t opends_driver_get_setting(const char *name, char *value, size_t len,
						     opends_setting_source_t *source);

/*
 * Close the library, waiting for I/O still in flight. Handles, buffers,
 * streams and batches still registered are released.
 * Errors: OPENDS_DRIVER_NOT_INITIALIZED when not open.
 */
OPENDS_API opends_error_t opends_driver_close(void);

typedef struct opends_drv_props {
	unsigned major_version, minor_version;
	size_t max_direct_io_size;     /* bytes moved by one backend request  */
	unsigned max_batch_io_size;    /* largest max_nr of opends_batch_setup */
	unsigned max_batch_io_timeout_msecs;
	unsigned reserved[8];          /* zero */
} opends_drv_props_t;

/* Errors: OPENDS_INVALID_VALUE (props NULL), OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_driver_get_properties(opends_drv_props_t *props);

/* The library's version; any pointer may be NULL. Works with the driver
 * closed. Never fails. */
OPENDS_API opends_error_t opends_get_version(unsigned *major, unsigned *minor, unsigned *patch);

/* The active backend's name ("ref", "uring", "gds", ...); NULL when the
 * driver is closed. */
OPENDS_API const char *opends_driver_backend(void);

/* ------------------------------------------------------------------------ */
/* Handles and buffers                                                      */
/* ------------------------------------------------------------------------ */

typedef struct opends_handle *opends_handle_t;

/*
 * OpenDS extension (no cuFile counterpart): a sentence on how the library
 * serves fh — which backend path the file takes (for gds: cuFile, or the
 * POSIX path when cuFile refused the file, with cuFile's code; direct or
 * buffered I/O) — or, with fh NULL, how the driver is set up (backend,
 * accelerator layer, worker settings, cuFile's mode). Written to buf,
 * truncated to len - 1 bytes and always terminated.
 * Errors: OPENDS_INVALID_VALUE (buf NULL or len 0),
 * OPENDS_HANDLE_NOT_REGISTERED, OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_describe(opends_handle_t fh, char *buf, size_t len);

/*
 * Register an open file descriptor (with or without O_DIRECT; regular file
 * or block device). The fd stays the caller's: it is not closed by
 * deregistration, and must stay open while the handle is registered
 * (as with cuFileHandleRegister): deregister first, then close. Closing it
 * earlier is undefined: calls may fail with -EBADF (ref, and uring through
 * the caller's fd) or go on through a descriptor the library opened itself
 * (uring's O_DIRECT twin), and once the number is reused by another open
 * they would reach that other file. The
 * access mode of the fd is kept: writing through a read-only handle, or
 * reading through a write-only one, fails with -EBADF.
 * An fd that can write and has O_APPEND is refused (pwrite on it lands at
 * the end of the file, not at file_offset); a read-only O_APPEND fd is
 * fine. Setting O_APPEND on a registered fd later (fcntl) is undefined.
 * O_SYNC / O_DSYNC on the fd hold for every write through the handle,
 * partial blocks of an O_DIRECT fd included: the call returns once the
 * data is as durable as pwrite on that fd would make it.
 * Errors: OPENDS_INVALID_VALUE (fh NULL; fd negative or closed, with
 * backend_err = EBADF), OPENDS_INVALID_FILE_TYPE (not a regular file or a
 * block device), OPENDS_INVALID_FILE_OPEN_FLAG (O_PATH, or O_APPEND on an
 * fd that can write), OPENDS_HANDLE_ALREADY_REGISTERED (this fd is registered),
 * OPENDS_NOMEM_ERROR, OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_handle_register(opends_handle_t *fh, int fd);

/* Waits until the handle's requests already handed to the backend (async,
 * batch entries) have finished (it does not cancel them), then releases
 * it: afterwards the library no longer uses the handle or the fd, which
 * the caller may close. Stream operations not yet started are not waited
 * for: synchronize the stream first.
 * Errors: OPENDS_INVALID_VALUE (NULL), OPENDS_HANDLE_NOT_REGISTERED,
 * OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_handle_deregister(opends_handle_t fh);

/*
 * How the handle will be read, like posix_fadvise. Read-ahead (uring, into
 * device memory, OPENDS_READAHEAD not 0): with OPENDS_ADVICE_NORMAL (the
 * default) once two synchronous reads in a row by one thread continue each
 * other (same size, the second starting where the first ended; calls of
 * several threads on one handle are no stream), the next call's range
 * is read into host staging behind the current call, and a call for
 * exactly that range copies it from there while the range after it is
 * read. OPENDS_ADVICE_SEQUENTIAL reads ahead from the first call,
 * OPENDS_ADVICE_RANDOM never. Calls above 64 MiB or at most
 * OPENDS_INLINE_MAX, block devices, host memory and sources never read
 * ahead. Memory: three buffers of the call's size per handle that reads
 * ahead, inside OPENDS_MAX_PINNED (none when they do not fit), freed at
 * deregistration.
 * Guarantee: a read never returns bytes older than
 * - any write through this library (any handle of the same file, sync,
 *   async, batch or stream) that started before the read was called;
 * - a write(2)-family call by another process (or this one, outside the
 *   library) that completed before the read was called, except: a single
 *   write call that began more than 100 ms before the read-ahead and was
 *   still running when it read; stores through a shared mapping; network
 *   file systems whose times do not yet show another client's write.
 *   (Read-ahead starts only when the file's mtime and ctime are at least
 *   100 ms old and is used only when size, mtime and ctime are unchanged.)
 * For those cases use OPENDS_ADVICE_RANDOM or OPENDS_READAHEAD=0.
 * Errors: OPENDS_INVALID_VALUE (fh NULL, unknown advice),
 * OPENDS_HANDLE_NOT_REGISTERED, OPENDS_DRIVER_NOT_INITIALIZED.
 */
#define OPENDS_ADVICE_NORMAL 0
#define OPENDS_ADVICE_SEQUENTIAL 1
#define OPENDS_ADVICE_RANDOM 2
OPENDS_API opends_error_t opends_handle_advise(opends_handle_t fh, int advice);

/*
 * Register [buf, buf + size) of host or accelerator memory for I/O: the
 * library may pin or map it so later I/O on it is faster. I/O on
 * unregistered memory works too. flags must be 0.
 * Errors: OPENDS_INVALID_VALUE (buf NULL, size 0, flags != 0, range wraps),
 * OPENDS_MEMORY_ALREADY_REGISTERED (overlaps a registered range),
 * OPENDS_MEMORY_PINNING_FAILED, OPENDS_NOMEM_ERROR,
 * OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_buf_register(const void *buf, size_t size, int flags);

/* buf must be the base of a registered range.
 * Errors: OPENDS_INVALID_VALUE (NULL), OPENDS_MEMORY_NOT_REGISTERED,
 * OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_buf_deregister(const void *buf);

/* ------------------------------------------------------------------------ */
/* Synchronous I/O                                                          */
/* ------------------------------------------------------------------------ */

/*
 * Read up to size bytes at file_offset into buf + buf_offset; returns the
 * bytes read, fewer at EOF, 0 at or past EOF and for size 0. Nothing outside
 * [buf + buf_offset, buf + buf_offset + returned) is written, whatever the
 * library reads underneath, also while another thread or process truncates
 * the file (bytes the file lost during the call then read as zeros and are
 * counted; docs/errors.md). EOF is where a read returns 0: a file whose
 * st_size is 0 but which has content (/proc, debugfs, some FUSE) reads to
 * its end on every backend and family, as a pread loop does. Any size and
 * offsets work.
 * If buf + buf_offset lies inside a registered range, the whole target must
 * too (else -OPENDS_INVALID_MAPPING_RANGE).
 * Errors: -OPENDS_INVALID_VALUE (buf NULL, negative offsets, size >
 * SSIZE_MAX, file_offset + size overflowing off_t),
 * -OPENDS_HANDLE_NOT_REGISTERED, -OPENDS_INVALID_MAPPING_RANGE,
 * -OPENDS_CONTEXT_MISMATCH, -OPENDS_DRIVER_NOT_INITIALIZED, -errno from
 * the operating system (-EBADF for a write-only fd, -EIO, ...).
 */
OPENDS_API ssize_t opends_sync_read(opends_handle_t fh, void *buf, size_t size, off_t file_offset,
				    off_t buf_offset);

/*
 * Write size bytes from buf + buf_offset at file_offset; returns size or a
 * negated error. Concurrent writes to disjoint byte ranges never lose each
 * other's data, even inside one disk block (as with pwrite), through one
 * handle or several handles of the same file, and a write never shortens
 * the file another writer extended. This holds for O_DIRECT fds too when
 * the library cannot reopen the file (its permissions changed, privileges
 * were dropped): partial blocks are then written with O_DIRECT taken off
 * the caller's open file for the duration of the call.
 * A write of more than 1 MiB that ends past the end of the file (uring)
 * first allocates its range (fallocate, where the file system has it),
 * which sets the file's size: its O_DIRECT pieces then run at once
 * instead of one after another (ext4 and XFS serialise writes that extend
 * a file). A reader meanwhile sees zeros where the data is not yet
 * written, and a write that fails leaves that size.
 * Errors: as opends_sync_read; -EBADF for a read-only fd, -ENOSPC, ...
 */
OPENDS_API ssize_t opends_sync_write(opends_handle_t fh, const void *buf, size_t size, off_t file_offset,
				     off_t buf_offset);

/*
 * OpenDS extension, "read once, place everywhere": read up to size bytes
 * at file_offset once from storage and place them in each of the nbufs
 * targets bufs[i] + buf_offsets[i] (buf_offsets NULL: all 0), e.g. the same
 * weights on every GPU. The range is read into the first target and copied
 * from there to the others, GPU to GPU over a peer link where the two
 * devices have one (NVLink, PCIe peer-to-peer), else staged through host
 * memory by the driver; host targets are allowed too. Returns the bytes
 * read (fewer at EOF), which every target then holds byte for byte, or a
 * negated error. Every target is checked first, as opends_sync_read checks
 * its one; nothing is read when one is refused. Targets must not overlap.
 * nbufs is 1 to 64.
 * Errors: as opends_sync_read; -OPENDS_INVALID_VALUE also for bufs NULL, nbufs out of
 * range and overlapping targets.
 */
OPENDS_API ssize_t opends_sync_read_fanout(opends_handle_t fh, void *const *bufs, const off_t *buf_offsets,
					   unsigned nbufs, size_t size, off_t file_offset);

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * OpenDS extension: the devices the accelerator layer sees (0 for the host
 * layer). Device memory of any of them may be used from any thread at the
 * same time; the device and context of each buffer come from the pointer,
 * whatever context is current on the calling thread (API.md, "Accelerator
 * context — revised").
 * Errors: OPENDS_INVALID_VALUE (count NULL), OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_device_count(unsigned *count);

/*
 * OpenDS extension: what the accelerator layer knows of one device, as
 * opends-info reports it. Numbers it does not know are -1, strings "".
 */
typedef struct opends_device_props {
	char layer[16];       /* the accelerator layer: "cuda", "hostdev" */
	char name[96];        /* "NVIDIA H200"; "simulated device" under hostdev */
	char pci_bus_id[32];  /* as the driver gives it, e.g. "0000:19:00.0"; "" if none */
	int numa_node;        /* the host NUMA node nearest the device */
	int pcie_gen;         /* the link to the host now: PCIe generation (1 to 6) */
	int pcie_width;       /* and lanes (x16: 16) */
	/* bit j: the device reaches device j's memory directly (peer copies
	 * without host staging; opends_sync_read_fanout uses them) */
	uint64_t peers;
	/* bit j (a subset of peers): that link has native atomics, which NVLink
	 * has and PCIe peer-to-peer has not ("NVLink-class") */
	uint64_t peers_nvlink;
	uint64_t reserved[4]; /* zero */
} opends_device_props_t;

/*
 * OpenDS extension: fill *props for device `device` (0 to count - 1).
 * Errors: OPENDS_INVALID_VALUE (device out of range, props NULL),
 * OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_device_get_properties(unsigned device, opends_device_props_t *props);

/*
 * OpenDS extension: the same as one line on device `device`: its name, PCI
 * address, link, NUMA node, and the devices it has peer access to, e.g.
 * "cuda:0 NVIDIA H200, PCI 0000:19:00.0, link PCIe gen 5 x16, NUMA node 0;
 * peers cuda:1 (NVLink-class)". Written to buf, truncated to len - 1 bytes
 * and always terminated.
 * Errors: OPENDS_INVALID_VALUE (device out of range, buf NULL or len 0),
 * OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_device_describe(unsigned device, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Async I/O: per-operation futures (no cuFile counterpart)                 */
/* ------------------------------------------------------------------------ */

/* Caller-owned completion record. Keep it at the same address from submit
 * until it has been awaited (or polled to 1). Contents are private. */
typedef struct opends_async_future {
	uint64_t opaque[8]; /* 64 bytes, 8-byte aligned */
} opends_async_future_t;

/*
 * Start a read (write) and return at once; the result is collected with
 * opends_async_await or opends_async_poll. Submission never fails for lack
 * of room: when the library's queues are full it waits for room.
 * Argument errors (the list of opends_sync_read, plus OPENDS_INVALID_VALUE
 * for a NULL future) are returned here and nothing is started; I/O errors
 * come from await.
 */
OPENDS_API opends_error_t opends_async_read(opends_handle_t fh, void *buf, size_t size, off_t file_offset,
					    off_t buf_offset, opends_async_future_t *future);
OPENDS_API opends_error_t opends_async_write(opends_handle_t fh, const void *buf, size_t size,
					     off_t file_offset, off_t buf_offset,
					     opends_async_future_t *future);

/*
 * Wait for the operation and return its result as opends_sync_* would.
 * Awaiting a completed future again returns the same result; futures may be
 * awaited in any order. A future that was never submitted (all zero bytes)
 * gives -OPENDS_INVALID_VALUE, as does NULL.
 */
OPENDS_API ssize_t opends_async_await(opends_async_future_t *future);

/* 1 if the operation has completed, 0 if it is still running; never
 * blocks. -OPENDS_INVALID_VALUE for NULL or a never-submitted future. */
OPENDS_API int opends_async_poll(opends_async_future_t *future);

/* ------------------------------------------------------------------------ */
/* Stream-ordered I/O (cuFileReadAsync / cuFileWriteAsync)                  */
/* ------------------------------------------------------------------------ */

/* The accelerator's stream (a CUstream for CUDA). NULL is the default
 * stream; without an accelerator, a library-owned host-ordered queue. */
typedef void *opends_stream_t;

#define OPENDS_STREAM_FIXED_BUF_OFFSET 1u
#define OPENDS_STREAM_FIXED_FILE_OFFSET 2u
#define OPENDS_STREAM_FIXED_FILE_SIZE 4u
#define OPENDS_STREAM_PAGE_ALIGNED_INPUTS 8u

/* Create a new non-blocking accelerator stream, or without an accelerator a
 * library-owned host-ordered queue. Errors: OPENDS_INVALID_VALUE (NULL),
 * OPENDS_NOMEM_ERROR, OPENDS_DEVICE_DRIVER_ERROR, NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_stream_create(opends_stream_t *stream);

/* Wait for OpenDS work queued on it, then destroy a stream made by
 * opends_stream_create. Errors: OPENDS_INVALID_VALUE (NULL or not made by
 * opends_stream_create). */
OPENDS_API opends_error_t opends_stream_destroy(opends_stream_t stream);

/* Optional hints (OPENDS_STREAM_* bits). Unknown bits: OPENDS_INVALID_VALUE.
 * Registering twice replaces the flags. With all three FIXED_* bits on an
 * accelerator stream, a read's *size, *file_offset and *buf_offset are read
 * at the call and its file reads may start then, before the stream reaches
 * it (only the copies wait for the stream): values changed after the call
 * are not used, and a write to the file by other means in between may or
 * may not be seen (stream writes queued ahead are). Without them, values
 * and file are read when the stream gets there (docs/stream-ordering.md). */
OPENDS_API opends_error_t opends_stream_register(opends_stream_t stream, unsigned flags);
/* Errors: OPENDS_INVALID_VALUE (stream not registered). */
OPENDS_API opends_error_t opends_stream_deregister(opends_stream_t stream);

/*
 * Enqueue a read on stream: it starts after all earlier work on the stream,
 * and later work waits for it. *size, *file_offset and *buf_offset are read
 * when the stream reaches the operation (at the call on a stream registered
 * with every FIXED_* flag), so they (and *bytes_read) must stay valid until
 * then; the result (bytes or a negated error, as
 * opends_sync_read) is written to *bytes_read when it completes.
 * Submit reports argument errors only: OPENDS_INVALID_VALUE (a NULL
 * pointer, unknown stream), OPENDS_HANDLE_NOT_REGISTERED,
 * OPENDS_CONTEXT_MISMATCH, OPENDS_DRIVER_NOT_INITIALIZED. Checks of the
 * values behind the pointers happen when the stream reaches the operation
 * and land in *bytes_read.
 */
OPENDS_API opends_error_t opends_stream_read(opends_handle_t fh, void *buf, size_t *size, off_t *file_offset,
					     off_t *buf_offset, ssize_t *bytes_read, opends_stream_t stream);
OPENDS_API opends_error_t opends_stream_write(opends_handle_t fh, const void *buf, size_t *size,
					      off_t *file_offset, off_t *buf_offset, ssize_t *bytes_written,
					      opends_stream_t stream);

/* Wait until everything OpenDS queued on the stream has completed (and, on
 * an accelerator stream, all work before it). */
OPENDS_API opends_error_t opends_stream_synchronize(opends_stream_t stream);

/* ------------------------------------------------------------------------ */
/* Batch I/O (cuFileBatchIO*)                                               */
/* ------------------------------------------------------------------------ */

typedef struct opends_batch *opends_batch_t;

typedef enum opends_opcode { OPENDS_READ = 0, OPENDS_WRITE = 1 } opends_opcode_t;
typedef enum opends_batch_mode { OPENDS_BATCH = 1 } opends_batch_mode_t;
typedef enum opends_status {
	OPENDS_WAITING = 0x1,
	OPENDS_PENDING = 0x2,
	OPENDS_INVALID = 0x4,
	OPENDS_CANCELED = 0x8,
	OPENDS_COMPLETE = 0x10,
	OPENDS_TIMEOUT = 0x20,
	OPENDS_FAILED = 0x40,
} opends_status_t;

typedef struct opends_io_params {
	opends_batch_mode_t mode; /* OPENDS_BATCH */
	union {
		struct {
			void *buf_base;
			off_t file_offset;
			off_t buf_offset;
			size_t size;
		} batch;
	} u;
	opends_handle_t fh;
	opends_opcode_t opcode;
	void *cookie;
} opends_io_params_t;

typedef struct opends_io_events {
	void *cookie;
	opends_status_t status;
	ssize_t ret; /* bytes moved, or a negated error for OPENDS_FAILED */
} opends_io_events_t;

/* A batch able to hold max_nr entries in flight (1..max_batch_io_size).
 * Errors: OPENDS_INVALID_VALUE, OPENDS_NOMEM_ERROR, NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_batch_setup(opends_batch_t *batch, unsigned max_nr);

/*
 * Submit nr entries; all or nothing. Entries of one submit run in no
 * particular order. flags must be 0.
 * Errors: OPENDS_INVALID_VALUE (NULL, unknown batch, nr 0, flags, an entry
 * with a bad mode, opcode, NULL buffer, negative offsets, size >
 * SSIZE_MAX; the detail names the entry), OPENDS_HANDLE_NOT_REGISTERED,
 * OPENDS_INVALID_MAPPING_RANGE, OPENDS_BATCH_FULL (entries in flight plus
 * nr would exceed max_nr), OPENDS_CONTEXT_MISMATCH, NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_batch_submit(opends_batch_t batch, unsigned nr, opends_io_params_t *params,
					      unsigned flags);

/*
 * Collect completions. *nr is the room in events on entry and the number
 * delivered on return; each completion is delivered once. Waits until at
 * least min_nr (capped at *nr and at the entries still undelivered) are
 * ready; with a timeout, returns whatever is ready when it expires (a
 * timeout too large for the clock, e.g. {INT64_MAX, 999999999}, waits as
 * no timeout does). Any number of threads may submit to and collect from
 * one batch at once; a submit that does not fit fails whole with
 * OPENDS_BATCH_FULL, never partly.
 * Status: OPENDS_COMPLETE with ret = bytes (short at EOF included),
 * OPENDS_FAILED with ret = negated error, OPENDS_CANCELED.
 * Errors: OPENDS_INVALID_VALUE (NULL batch/nr/events with *nr > 0, unknown
 * batch, negative or invalid timeout), NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_batch_get_status(opends_batch_t batch, unsigned min_nr, unsigned *nr,
						  opends_io_events_t *events, struct timespec *timeout);

/* Cancel entries that have not started; those running finish. Cancelled
 * entries are delivered as OPENDS_CANCELED. Returns once nothing of the
 * batch is running. */
OPENDS_API opends_error_t opends_batch_cancel(opends_batch_t batch);

/* Wait for entries still in flight and free the batch. */
OPENDS_API opends_error_t opends_batch_destroy(opends_batch_t batch);

/* ------------------------------------------------------------------------ */
/* Sources: data that no file descriptor reaches (distributed storage)      */
/* ------------------------------------------------------------------------ */

/*
 * A handle may name a *source* instead of a file: an object in a
 * distributed store (Ceph RADOS), or anything the caller can read and write
 * through a table of callbacks. Every call that takes a handle — sync,
 * async, batch, stream, opends_describe, opends_handle_deregister — takes a
 * source handle, on every backend. Semantics are those of files:
 * - any offset and size; a read returns fewer bytes only at the end of the
 *   data and 0 at or after it; size 0 returns 0 and never reaches the
 *   source;
 * - a source's error is the operation's result as its -errno (-ENOENT for a
 *   missing object, -EFBIG, -ETIMEDOUT, ...); opends_last_error_detail()
 *   names the source, the object and the offset;
 * - a source that returns more bytes than asked, or fewer before its known
 *   end (or fewer, and then data after that point), fails the operation
 *   with -EIO;
 * - requests are cut into pieces at io_unit boundaries, each at most max_io
 *   (writes larger than max_io are split by the library), and pieces never
 *   extend past the request; pieces of one request run in parallel and in
 *   any order.
 * Without OPENDS_SOURCE_DEVICE_MEMORY a source never sees accelerator
 * memory: device buffers are staged through pinned host memory.
 */

/* A source calls this exactly once per started request, from any thread,
 * possibly before read_async/write_async returns: result = bytes moved
 * (reads: fewer only at the end of the data) or -errno. It never blocks. */
typedef void (*opends_source_done_t)(void *token, ssize_t result);

#define OPENDS_SOURCE_RDONLY 0x1u        /* writes fail with -EBADF */
#define OPENDS_SOURCE_BLOCKING 0x2u      /* ops are read/write, which block: the
					    library runs them on its own threads */
#define OPENDS_SOURCE_DEVICE_MEMORY 0x4u /* ops accept accelerator pointers */
#define OPENDS_SOURCE_RADOS_STRIPED 0x100u /* register_rados: oid is a striped
					      object (libradosstriper) */

typedef struct opends_source_ops {
	size_t struct_size; /* sizeof(opends_source_ops_t) the caller compiled with */
	const char *name;   /* names the source in details and describe; may be NULL */
	/* Async form: start the transfer and return 0, then call done(token,
	 * result) exactly once; or return -errno and never call done. buf is
	 * host memory unless OPENDS_SOURCE_DEVICE_MEMORY. Called concurrently. */
	int (*read_async)(void *src, void *buf, size_t len, uint64_t off, opends_source_done_t done, void *token);
	int (*write_async)(void *src, const void *buf, size_t len, uint64_t off, opends_source_done_t done,
			   void *token); /* optional: without a write form writes fail with -EBADF */
	/* Blocking form, used with OPENDS_SOURCE_BLOCKING: bytes or -errno. */
	ssize_t (*read)(void *src, void *buf, size_t len, uint64_t off);
	ssize_t (*write)(void *src, const void *buf, size_t len, uint64_t off); /* optional */
	int64_t (*size)(void *src);   /* optional: bytes now, or -errno; used by describe */
	int (*flush)(void *src);      /* optional: reserved for a later flush call */
	void (*release)(void *src);   /* optional: once, after the handle's I/O drained, by the
					 time deregister (or driver close) returns */
	/* optional: a phrase for opends_describe, written to buf (len bytes) */
	void (*describe)(void *src, char *buf, size_t len);
} opends_source_ops_t;

typedef struct opends_source_desc {
	size_t struct_size;             /* sizeof(opends_source_desc_t) the caller compiled with */
	const opends_source_ops_t *ops; /* read by registration; may be freed after it */
	void *src;                      /* passed to every op */
	unsigned flags;                 /* OPENDS_SOURCE_* */
	int64_t size;                   /* known size in bytes, or -1: unknown */
	size_t io_unit;                 /* preferred piece (a stripe unit); 0: 4 MiB */
	size_t max_io;                  /* largest single request; 0: no limit */
	unsigned max_inflight;          /* requests in flight; 0: 16 */
	size_t max_inflight_bytes;      /* bytes in flight; 0: no byte cap */
	uint64_t domain;                /* sources with the same non-zero domain share one
					   set of caps (the smallest of theirs) */
} opends_source_desc_t;

/*
 * Register a source. Does no I/O. The descriptor and the ops table are
 * copied: the caller may free them right after. release (if any) is called
 * exactly once at deregistration or driver close, never for a refused
 * registration.
 * Errors: OPENDS_INVALID_VALUE (fh or desc NULL, struct_size too small,
 * ops NULL, no read form for the flags, io_unit, max_io or
 * max_inflight_bytes between 1 and 4095, io_unit over 1 GiB, size < -1,
 * unknown flags), OPENDS_NOMEM_ERROR, OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_handle_register_source(opends_handle_t *fh, const opends_source_desc_t *desc);

/*
 * Open a source by URL, with open(2) access-mode flags (O_RDONLY, O_WRONLY,
 * O_RDWR, plus O_CREAT to create an object that does not exist):
 *   rados://POOL/OID[?conf=PATH&id=CLIENT&ns=NAMESPACE&striper=0|1&op_timeout=S]
 * POOL, OID and values are percent-decoded. conf: a ceph.conf (default:
 * librados' own search, CEPH_CONF); id: the client name without "client."
 * (default admin); op_timeout: seconds an OSD or monitor operation may take
 * before it fails with -ETIMEDOUT (default 30; 0 = wait forever, which a
 * dead OSD turns into a hang, and opends_describe warns); striper=1 reads and
 * writes the object through libradosstriper (objects over 128 MiB).
 * Handles with the same conf, id and op_timeout share one cluster
 * connection. The object is not looked at: a missing one fails the first
 * read with -ENOENT (with O_CREAT it is created here, empty).
 * librados.so.2 (and libradosstriper.so.1) are loaded at run time.
 * Errors: OPENDS_INVALID_VALUE (NULL, malformed URL, unknown scheme or
 * parameter, bad value, flags other than the above),
 * OPENDS_PLATFORM_NOT_SUPPORTED (client library missing; the detail names
 * it), OPENDS_FS_SETUP_ERROR (no connection to the cluster, no such pool;
 * backend_err = the errno), OPENDS_NOMEM_ERROR, OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_handle_open_url(opends_handle_t *fh, const char *url, int flags);

/*
 * Register the RADOS object oid of the caller's rados_ioctx_t (kept, not
 * owned: it must outlive the handle). flags: OPENDS_SOURCE_RDONLY,
 * OPENDS_SOURCE_RADOS_STRIPED. In-flight caps are taken from the client's
 * objecter_inflight_op_bytes / _ops (3/4 of them), shared by every handle
 * on the same cluster connection.
 * Errors: OPENDS_INVALID_VALUE, OPENDS_PLATFORM_NOT_SUPPORTED (librados not
 * loadable), OPENDS_NOMEM_ERROR, OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_handle_register_rados(opends_handle_t *fh, void *rados_ioctx, const char *oid,
						       unsigned flags);

/*
 * The client libraries of the built-in sources as this process finds them
 * (they are loaded at run time, never needed to build): one line each for
 * librados, libradosstriper and libcephfs, "NAME: VERSION, PATH (what it
 * serves)" or "NAME: not found ...". Loads them to ask (as the first
 * rados:// handle would). Needs no open driver; the text is cut to len.
 * opends-info prints it. Errors: OPENDS_INVALID_VALUE (buf NULL, len 0).
 */
OPENDS_API opends_error_t opends_source_libraries(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* OPENDS_H */
