/*
 * OpenDS public API: driver and configuration.
 * Part of <opends.h>: include that (it includes every family), not this
 * file. The conventions at the top of opends.h (errors, threads, fork,
 * accelerator contexts) hold here.
 */
#ifndef OPENDS_DRIVER_H
#define OPENDS_DRIVER_H

#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 *   OPENDS_IO_THREADS   worker threads, 1..256. Unset, the backend picks the
 *                       count, and with two or more devices as many again
 *                       start that work only while reads or writes for two
 *                       or more devices are queued; set, exactly that many.
 *   OPENDS_QUEUE_DEPTH  operations in flight per worker, 1..4096.
 *   OPENDS_IO_KWORKERS  uring: kernel threads per worker that copy reads of
 *                       cached ranges (and reads of cached ranges a worker
 *                       keeps in flight), 1..64; default CPUs / workers,
 *                       at most 2.
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
 *   OPENDS_INLINE_SPLIT 1..16 (default 1): a cached read of at least 64 KiB
 *                       into device memory on the calling thread (uring)
 *                       goes in this many pieces, each copied to the
 *                       device while the next is read; 1: one read, then
 *                       one copy (on the H200, 2 and 4 were slower for
 *                       100 KB files: each copy has a fixed cost).
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
 * Test and measurement hooks (OPENDS_HOSTDEV_*, OPENDS_STREAM_STATS,
 * OPENDS_STREAM_BIG, OPENDS_TEST_*; docs/multi-gpu.md,
 * docs/stream-ordering.md; the GPU probe's A/B switches OPENDS_WRITE_PIECE,
 * OPENDS_RA_KEEP, OPENDS_RA_STATS, OPENDS_CUDA_SYNC_COPY and OPENDS_CUDA_SYNC_COPY_MAX,
 * OPENDS_AB_INLINE_PROBE, OPENDS_AB_WORKER_PROBE, OPENDS_AB_ASYNC_NOWAIT,
 * OPENDS_CALLER_STATS, OPENDS_AB_BATCH_SPIN_US, OPENDS_BATCH_STATS,
 * OPENDS_AB_BATCH_NOWAIT and OPENDS_AB_QUEUE_TRYLOCK,
 * described where they are read: src/core/stage_wr.c, stage_ra.c,
 * src/accel/cuda/cuda_copy.c, src/backends/uring/uring_cache.c,
 * src/core/io.c, src/core/batch.c, stage_queue.c) are not configuration: the part they steer
 * reads them, they are not validated at every open and
 * opends_driver_get_setting does not know them.
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
 * streams and batches still registered are released. Calls in progress on
 * other threads are waited for; calls that start once close has begun
 * fail with OPENDS_DRIVER_NOT_INITIALIZED (detail: close is in progress).
 * Errors: OPENDS_DRIVER_NOT_INITIALIZED when not open or while another
 * thread's close is in progress; OPENDS_INVALID_VALUE when called from
 * inside an OpenDS call or a callback it runs (a source's read, write,
 * release, describe): close would wait for itself; the driver stays open.
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

#ifdef __cplusplus
}
#endif

#endif /* OPENDS_DRIVER_H */
