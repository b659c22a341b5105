/*
 * OpenDS public API: synchronous and async I/O.
 * Part of <opends.h>: include that (it includes every family), not this
 * file. The conventions at the top of opends.h (errors, threads, fork,
 * accelerator contexts) hold here.
 */
#ifndef OPENDS_IO_H
#define OPENDS_IO_H

#include "handles.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * negated error. As pwrite: when it returns, every byte is in the file (its
 * O_DIRECT pieces completed, its buffered ones in the page cache), so a
 * read by anyone that starts after the return sees them, and fsync or
 * fdatasync on any fd of the file covers them; nothing of the call is
 * still in flight (no write-behind). Concurrent writes to disjoint byte ranges never lose each
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
 * Errors: OPENDS_INVALID_VALUE, OPENDS_HANDLE_NOT_REGISTERED,
 * OPENDS_INVALID_MAPPING_RANGE, OPENDS_CONTEXT_MISMATCH (as
 * opends_sync_read, not negated), OPENDS_NOMEM_ERROR,
 * OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_async_read(opends_handle_t fh, void *buf, size_t size, off_t file_offset,
					    off_t buf_offset, opends_async_future_t *future);
OPENDS_API opends_error_t opends_async_write(opends_handle_t fh, const void *buf, size_t size,
					     off_t file_offset, off_t buf_offset,
					     opends_async_future_t *future);

/*
 * Wait for the operation and return its result as opends_sync_* would.
 * Awaiting a completed future again returns the same result; futures may be
 * awaited in any order. opends_driver_close waits for the operations of
 * futures not yet awaited: after it they are complete, and await and poll
 * still give their results (the future is the caller's memory).
 * Errors: -OPENDS_INVALID_VALUE (NULL, or a future that was never
 * submitted: all zero bytes); else the operation's, as opends_sync_read's
 * or opends_sync_write's.
 */
OPENDS_API ssize_t opends_async_await(opends_async_future_t *future);

/* 1 if the operation has completed, 0 if it is still running; never
 * blocks. Errors: -OPENDS_INVALID_VALUE (NULL or a never-submitted
 * future). */
OPENDS_API int opends_async_poll(opends_async_future_t *future);

#ifdef __cplusplus
}
#endif

#endif /* OPENDS_IO_H */
