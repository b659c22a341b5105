/*
 * OpenDS public API: sources (data that no file descriptor reaches).
 * Part of <opends.h>: include that (it includes every family), not this
 * file. The conventions at the top of opends.h (errors, threads, fork,
 * accelerator contexts) hold here.
 */
#ifndef OPENDS_SOURCES_H
#define OPENDS_SOURCES_H

#include "handles.h"

#ifdef __cplusplus
extern "C" {
#endif

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
 * unknown flags), OPENDS_NOMEM_ERROR, OPENDS_DRIVER_NOT_INITIALIZED,
 * OPENDS_DRIVER_INVALID_PROPS (the first source handle of a session starts
 * the sources' staging: 4 workers x 4 KiB chunks at least must fit in what
 * OPENDS_MAX_PINNED leaves; less than 4 MiB chunks are used when 4 MiB ones
 * do not fit).
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
 * backend_err = the errno), OPENDS_IO_ERROR (O_CREAT: the cluster refused to
 * create the object, e.g. a name over osd_max_object_name_len; backend_err
 * = the errno), OPENDS_NOMEM_ERROR, OPENDS_DRIVER_NOT_INITIALIZED.
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

#endif /* OPENDS_SOURCES_H */
