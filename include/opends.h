/*
 * OpenDS — open accelerator direct storage.
 *
 * One C11 API, shaped like NVIDIA's cuFile, that moves file data between
 * storage and host or accelerator (GPU) memory. The same program runs with
 * GPUDirect Storage, without it, and without a GPU at all; the library picks
 * the fastest path the machine has (see OPENDS_BACKEND in opends/driver.h).
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
 * - opends_driver_open() and opends_driver_open_with() are not
 *   thread-safe; every other call is, once open has returned.
 *   opends_driver_close() may run while other threads are inside calls: it
 *   waits for them to return (calls that wait by design wait for I/O it
 *   drains anyway), and calls that start once close has begun fail at
 *   once with OPENDS_DRIVER_NOT_INITIALIZED, the detail saying close is in
 *   progress. Any call other than open made while the driver is closed
 *   fails with OPENDS_DRIVER_NOT_INITIALIZED (or its negation).
 * - fork(): in the child, the driver inherited from the parent is closed
 *   (every call fails at once with OPENDS_DRIVER_NOT_INITIALIZED, close
 *   too, the detail saying that the fork closed it) and the child may call
 *   opends_driver_open() or opends_driver_open_with() for a driver of its
 *   own. The parent's handles, buffers, streams, batches and I/O in flight
 *   do not exist in the child (register the fds again); the library's
 *   internal fds stay open there until exec (close-on-exec). The parent is
 *   not affected. As with CUDA itself, a child cannot use the accelerator
 *   of a parent that has: open it with OPENDS_ACCEL=host there.
 * - opends_handle_deregister waits for the calls on the handle already
 *   inside (a synchronous read or write on another thread) and for its
 *   requests already handed to the backend (async reads and writes, batch
 *   entries) to finish; a call that starts after it gets
 *   OPENDS_HANDLE_NOT_REGISTERED, also once a new registration has reused
 *   the handle's slot and memory: a stale handle never reaches another
 *   file. From a callback of I/O on that same handle (a source's read) it
 *   is refused with OPENDS_INVALID_VALUE (it would wait for itself).
 *   Deregistering a handle while stream operations on it have not started
 *   (synchronize the stream first), or deregistering a buffer or stream
 *   while I/O is in flight on it, is undefined (opends_driver_close waits
 *   for all I/O), as is closing an fd that another thread is reading.
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

#define OPENDS_VERSION_MAJOR 0
#define OPENDS_VERSION_MINOR 1
#define OPENDS_VERSION_PATCH 0

/* The families, one header each under opends/ (installed beside this file).
 * A new call goes into its family's header; a new family gets a header of
 * its own, included here. */
#include "opends/errors.h"  /* OPENDS_API, error codes, opends_error_t */
#include "opends/driver.h"  /* open/close, configuration, version */
#include "opends/handles.h" /* file handles, describe, advise, buffers */
#include "opends/io.h"      /* synchronous I/O, async futures */
#include "opends/devices.h" /* the accelerator's devices */
#include "opends/stream.h"  /* stream-ordered I/O */
#include "opends/batch.h"   /* batch I/O */
#include "opends/sources.h" /* sources: RADOS, URLs, callback tables */
#include "opends/tensors.h" /* tensor files: a safetensors header as arrays */

#endif /* OPENDS_H */
