/*
 * OpenDS public API: stream-ordered I/O.
 * Part of <opends.h>: include that (it includes every family), not this
 * file. The conventions at the top of opends.h (errors, threads, fork,
 * accelerator contexts) hold here.
 */
#ifndef OPENDS_STREAM_H
#define OPENDS_STREAM_H

#include "handles.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * OPENDS_NOMEM_ERROR, OPENDS_DEVICE_DRIVER_ERROR,
 * OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_stream_create(opends_stream_t *stream);

/* Wait for OpenDS work queued on it, then destroy a stream made by
 * opends_stream_create. Errors: OPENDS_INVALID_VALUE (NULL or not made by
 * opends_stream_create), OPENDS_DEVICE_DRIVER_ERROR,
 * OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_stream_destroy(opends_stream_t stream);

/* Optional hints (OPENDS_STREAM_* bits). Unknown bits: OPENDS_INVALID_VALUE.
 * Registering twice replaces the flags. With all three FIXED_* bits on an
 * accelerator stream, a read's *size, *file_offset and *buf_offset are read
 * at the call and its file reads may start then, before the stream reaches
 * it (only the copies wait for the stream): values changed after the call
 * are not used, and a write to the file by other means in between may or
 * may not be seen (stream writes queued ahead are). Without them, values
 * and file are read when the stream gets there (docs/stream-ordering.md).
 * Errors: OPENDS_INVALID_VALUE (unknown bits; without an accelerator, a
 * stream not made by opends_stream_create other than NULL),
 * OPENDS_NOMEM_ERROR, OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_stream_register(opends_stream_t stream, unsigned flags);
/* Errors: OPENDS_INVALID_VALUE (stream not registered),
 * OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_stream_deregister(opends_stream_t stream);

/*
 * Enqueue a read on stream: it starts after all earlier work on the stream,
 * and later work waits for it. *size, *file_offset and *buf_offset are read
 * when the stream reaches the operation (at the call on a stream registered
 * with every FIXED_* flag, or on an accelerator stream made by
 * opends_stream_create with nothing queued, which reaches it at once), so
 * they (and *bytes_read) must stay valid until then; the result (bytes or
 * a negated error, as opends_sync_read) is written to *bytes_read when it
 * completes.
 * Checks of the values behind the pointers happen when the stream reaches
 * the operation and land in *bytes_read.
 * Errors (submit reports argument errors only): OPENDS_INVALID_VALUE (a
 * NULL pointer, unknown stream), OPENDS_HANDLE_NOT_REGISTERED,
 * OPENDS_CONTEXT_MISMATCH, OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_stream_read(opends_handle_t fh, void *buf, size_t *size, off_t *file_offset,
					     off_t *buf_offset, ssize_t *bytes_read, opends_stream_t stream);
OPENDS_API opends_error_t opends_stream_write(opends_handle_t fh, const void *buf, size_t *size,
					      off_t *file_offset, off_t *buf_offset, ssize_t *bytes_written,
					      opends_stream_t stream);

/* Wait until everything OpenDS queued on the stream has completed (and, on
 * an accelerator stream, all work before it).
 * Errors: OPENDS_INVALID_VALUE (without an accelerator: a stream not made
 * by opends_stream_create other than NULL), OPENDS_DEVICE_DRIVER_ERROR or
 * OPENDS_CONTEXT_MISMATCH (the accelerator refused; the detail has its
 * result), OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_stream_synchronize(opends_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* OPENDS_STREAM_H */
