/*
 * OpenDS public API: handles and buffers.
 * Part of <opends.h>: include that (it includes every family), not this
 * file. The conventions at the top of opends.h (errors, threads, fork,
 * accelerator contexts) hold here.
 */
#ifndef OPENDS_HANDLES_H
#define OPENDS_HANDLES_H

#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * ahead. Memory: four buffers of the call's size per handle that reads
 * ahead, taken from OPENDS_MAX_PINNED when they fit in half of what is
 * left of it (else none), given back at deregistration (one set is kept
 * for the next handle until the budget is wanted).
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

#ifdef __cplusplus
}
#endif

#endif /* OPENDS_HANDLES_H */
