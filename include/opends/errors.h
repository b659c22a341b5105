/*
 * OpenDS public API: the export macro and errors (the one error list).
 * Part of <opends.h>: include that (it includes every family), not this
 * file. The conventions at the top of opends.h (errors, threads, fork,
 * accelerator contexts) hold here.
 */
#ifndef OPENDS_ERRORS_H
#define OPENDS_ERRORS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#if defined(__GNUC__)
#define OPENDS_API __attribute__((visibility("default")))
#else
#define OPENDS_API
#endif

#ifdef __cplusplus
extern "C" {
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

#ifdef __cplusplus
}
#endif

#endif /* OPENDS_ERRORS_H */
