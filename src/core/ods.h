/*
 * Internal interfaces of OpenDS: what the core offers backends and
 * accelerator layers, and what it expects of them. Nothing here is public.
 *
 * Layers:  include/opends.h (contract)
 *          src/core/        validation, registries, dispatch, async engine
 *          src/backends/X/  how bytes move between a file and memory
 *          src/accel/X/     what memory is, pinned memory, copies, streams
 */
#ifndef ODS_INTERNAL_H
#define ODS_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "opends.h"
#include "../accel/accel.h" /* and the plain types, ods_types.h */

#define ODS_HIDDEN __attribute__((visibility("hidden")))
#define ODS_ALIGN 4096u /* block alignment used for O_DIRECT everywhere */
#define ODS_MAX_BATCH 4096u

/* Block arithmetic on file offsets (ODS_ALIGN, a power of two). */
static inline off_t ods_align_down(off_t x)
{
	return x & ~((off_t)ODS_ALIGN - 1);
}
/* The next block boundary at or above x (x >= 0); for x in the last
 * partial block below the largest off_t, where that boundary is not an
 * off_t, the largest off_t itself: no whole block starts at or after x
 * there, which is what every caller asks (x + ODS_ALIGN - 1 overflowed,
 * issue 15 item 13). */
static inline off_t ods_align_up(off_t x)
{
	if (x > INT64_MAX - ((off_t)ODS_ALIGN - 1))
		return INT64_MAX;
	return (x + (off_t)ODS_ALIGN - 1) & ~((off_t)ODS_ALIGN - 1);
}
/* [off, off + size) as an unaligned head, a middle of whole blocks that
 * ends at or before mid_end, and the tail after it. */
struct ods_blocks {
	size_t head, mid, tail;
};
/* false (and *s untouched) when no whole block fits: the range then moves
 * as one piece */
static inline bool ods_split_blocks(off_t off, size_t size, off_t mid_end, struct ods_blocks *s)
{
	/* callers have checked that off + size is an off_t (ods_io_prepare) */
	off_t end = off + (off_t)size;
	off_t m0 = ods_align_up(off), m1 = ods_align_down(mid_end < end ? mid_end : end);
	if (m1 <= m0)
		return false;
	s->head = (size_t)(m0 - off);
	s->mid = (size_t)(m1 - m0);
	s->tail = (size_t)(end - m1);
	return true;
}

#define ods_likely(x) __builtin_expect(!!(x), 1)
#define ods_unlikely(x) __builtin_expect(!!(x), 0)

static inline void ods_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* ---- errors ---------------------------------------------------------- */

/* Record a sentence for opends_last_error_detail() and return code. */
int ods_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ods_fail from an accelerator layer, with the driver's result code (a
 * CUresult): the opends_error_t that reports code on this thread carries
 * it as backend_err (ods_err below). */
int ods_fail_backend(int code, int backend, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The result code of this thread's last ods_fail_backend if it failed
 * with code (else 0); forgets it either way. */
int ods_backend_err_take(int code);
/* Set in a child of fork() while the driver was open, until it opens its
 * own: ods_fail then says so in a DRIVER_NOT_INITIALIZED detail. */
extern atomic_bool ods_forked;
/* What a public call returns: code, and backend_err (an errno); with
 * backend_err 0 the accelerator driver's code of the failure, if an
 * accelerator layer reported code (API.md: backend_err "holds the errno of
 * a failed system call, or the accelerator driver's result code"). */
static inline opends_error_t ods_err(int code, int backend_err)
{
	int b = ods_backend_err_take(code);
	opends_error_t e = { (opends_op_error_t)code, backend_err ? backend_err : b };
	return e;
}
static inline opends_error_t ods_ok(void)
{
	/* (no look at the failure record: every successful call returns here,
	 * and ods_fail clears the record before any later failure) */
	opends_error_t e = { OPENDS_SUCCESS, 0 };
	return e;
}

/* ---- configuration (src/core/config.c) -------------------------------- */

/* struct ods_config: src/core/ods_types.h */

/* Read and validate every OPENDS_* variable. 0 or an OPENDS_* code with the
 * detail set. */
int ods_config_load(struct ods_config *cfg);
/* the same with the caller's settings first (opends_driver_open_with) */
int ods_config_load_with(struct ods_config *cfg, const opends_setting_t *settings, size_t n);
/* the value in effect (opends_driver_get_setting, the driver open) */
int ods_config_get(const char *name, char *value, size_t len, opends_setting_source_t *source);
/* Parse one value; exposed for the fuzzers and tests. */
int ods_config_parse(struct ods_config *cfg, const char *name, const char *value);
/* An unsigned decimal as the OPENDS_* variables take it: digits only, no
 * sign, spaces or leading zeros ("0" itself is fine), no overflow. For
 * other parsers of numbers from users (URL parameters) so that one rule
 * holds everywhere. */
bool ods_parse_u64(const char *s, uint64_t *out);

/* ---- handles ---------------------------------------------------------- */

struct ods_handle {
	int fd;          /* the caller's fd */
	int accmode;     /* O_RDONLY, O_WRONLY or O_RDWR of the caller's fd */
	bool direct;     /* the caller's fd has O_DIRECT */
	int sync_flags;  /* O_SYNC / O_DSYNC of the caller's fd, kept by the twin */
	bool blockdev;
	dev_t dev;       /* the file's device and inode: locks by file */
	ino_t ino;
	off_t blk_size;  /* block device: its size in bytes */
	off_t size_hint; /* a regular file's size at registration (fstat), 0 if
			    none: a hint for choosing a path (is a range
			    cached?), never for which bytes a read returns */
	pthread_mutex_t twin_lock;
	int twin_fd;     /* the same file opened the other way (direct <->
			    buffered), same access mode; -1 not yet, -2 failed */
	void *be;        /* backend's per-handle state */
	uint64_t token;  /* the opends_handle_t given out */
	struct ods_source *src; /* a source handle (src/core/source.h); NULL: fd */
	off_t src_size;         /* a source's known size, -1 unknown */
	void *_Atomic ra;       /* read-ahead state (src/core/stage_ra.c), made on first use */
	atomic_int advice;      /* opends_handle_advise's advice */
	atomic_long inflight;   /* its requests handed to the backend, not completed */
	atomic_long users;      /* public calls inside that looked it up (ods_handle_lookup):
				   deregistration waits for them, so a struct reused for a
				   new registration is never used by a call on the old one */
};

/* Wait until no request of h is in flight (deregistration: a request
 * handed to a backend uses the handle until it completes). */
void ods_handle_quiesce(struct ods_handle *h);
/* The fd with O_DIRECT for this handle (the caller's or a twin), or -1. */
int ods_handle_fd_direct(struct ods_handle *h);
/* The fd without O_DIRECT for this handle (the caller's or a twin), or -1. */
int ods_handle_fd_buffered(struct ods_handle *h);
/* The size of the file (now) or block device behind h, -1 if unknown
 * (also for a regular file of size 0: /proc and the like have content). */
off_t ods_handle_size(const struct ods_handle *h);
/* fstat calls ods_handle_size made on this thread (tests count the
 * system calls of a path) */
extern _Thread_local unsigned long ods_size_lookups;
/* How many of the size bytes at off are known to lie inside the file now
 * (none when its size is unknown). */
size_t ods_handle_valid(const struct ods_handle *h, off_t off, size_t size);

/* ---- memory ----------------------------------------------------------- */

/* enum ods_mem_kind: src/core/ods_types.h */

struct ods_region {  /* a registered buffer */
	uintptr_t base;
	size_t size;
	enum ods_mem_kind kind;
	unsigned dev;      /* device memory: the accelerator's device */
	void *accel_priv;  /* e.g. pinned-host registration */
	void *be_priv;
};

/* ---- I/O requests: the one currency of the async engine ---------------- */

struct ods_io;
typedef void (*ods_io_done_fn)(struct ods_io *io);

struct ods_io {
	struct ods_handle *fh;
	char *buf;               /* caller's buf + buf_offset */
	size_t size;
	off_t off;
	uint8_t opcode;          /* OPENDS_READ or OPENDS_WRITE */
	uint8_t mem;             /* enum ods_mem_kind of buf */
	uint16_t dev;            /* device memory: the accelerator's device of buf */
	atomic_bool cancelled;   /* set by batch cancel; checked before start */
	bool sync;               /* ods_io_run waits for it on the caller's thread: not
				    counted in fh->inflight (the caller cannot deregister
				    while it waits) */
	ssize_t result;          /* bytes or negated error */
	ods_io_done_fn done;     /* called once, on any thread, when finished */
	void *owner;             /* for done(): future, batch, stream, waiter */
	struct ods_io *next;     /* queue link, owned by whoever queues it */
	uintptr_t be_scratch[4]; /* backend's, while it holds the request */
	const char *why;         /* static detail of a failure found by prepare */
	/* done drops fh's count itself (a future, a batch entry: once its
	 * result can be seen, before it wakes anyone), so a caller it wakes
	 * that deregisters at once finds the handle idle instead of waiting
	 * out a wake-up syscall. (Kept apart from cancelled: a load of both
	 * flags together would overlap batch cancel's atomic store.) */
	bool leaf;
	/* a write past the end of the file whose range the engine allocates
	 * when it starts the write (ods_ra_write_begin decides; stage_queue.c
	 * does it once the request can no longer be cancelled) */
	bool allocate;
};

/* Validate an operation and fill io. Returns 0, or a negated error: an
 * OPENDS_* code the caller must refuse the submit with, or a -errno that is
 * the operation's result (it fails "as I/O"). Checks the driver state,
 * handle, pointers, offsets, overflow, registered ranges, memory kind and
 * accelerator context. */
ssize_t ods_io_prepare(struct ods_io *io, int opcode, opends_handle_t fh, const void *buf, size_t size,
		       off_t file_offset, off_t buf_offset);
/* Hand a prepared io (size > 0) to the backend; io->done is called later.
 * With may_block, applies back-pressure: waits until there is room. Without
 * it (completion callbacks that chain the next operation), never waits. */
void ods_io_submit(struct ods_io *io, bool may_block);
/* Hand n prepared ios of file handles (no sources; each size > 0) to the
 * backend together, as a batch (waiting for room as ods_io_submit with
 * may_block): with a backend's submit_many its workers see them
 * together. */
void ods_io_submit_many(struct ods_io *const *ios, unsigned n);
/* Run a prepared io to completion on this thread or the backend's. */
ssize_t ods_io_run(struct ods_io *io);
/* Requests handed to a backend and not yet completed; driver close waits
 * for 0 before it frees handles the backend may still be using. */
extern atomic_long ods_inflight;

/* Backends call this when an io they were handed finished (sets result,
 * calls done). */
static inline void ods_io_complete(struct ods_io *io, ssize_t result)
{
	/* io may be gone once done returns */
	struct ods_handle *h = io->sync || io->leaf ? NULL : io->fh;
	io->result = result;
	io->done(io);
	if (h)
		atomic_fetch_sub_explicit(&h->inflight, 1, memory_order_release);
	atomic_fetch_sub_explicit(&ods_inflight, 1, memory_order_release);
}

/* ---- sources: handles without an fd (src/core/source*.c) -------------- */

/* Source handles never reach a backend's fd path: ods_io_submit and
 * ods_io_run hand their requests here. */
void ods_source_submit(struct ods_io *io, bool may_block);
ssize_t ods_source_run(struct ods_io *io);
/* Set the detail for a failed source request (source, object, offset). */
void ods_source_fail(const struct ods_io *io, ssize_t r);
/* Wait for the handle's I/O, release the source, free h->src. */
void ods_source_free(struct ods_handle *h);
void ods_source_describe(struct ods_handle *h, char *buf, size_t n);
/* Driver close, after the handles are gone: stop the engine's threads. */
void ods_sources_fini(void);
/* In the child of fork(): forget the parent's engine and connections. */
void ods_sources_forget(void);
/* Add a handle built elsewhere (sources) to the table: 0 or an OPENDS_*
 * code. */
int ods_handle_add(struct ods_handle *h);

/* ---- caller statistics (OPENDS_CALLER_STATS=1, io.c) ---------------------
 * Time the calling thread spends inside the calls it makes per small file
 * (register, submit, await, deregister, sync read) and the page-cache
 * probes, summed over every thread and printed on stderr at driver close:
 * whether a many-small-files leg is bound by its caller (the sums come
 * near the leg's time) or by the workers (the caller mostly waits in
 * await). Off: one predictable branch per call. */
enum {
	ODS_CS_REGISTER,
	ODS_CS_DEREGISTER,
	ODS_CS_SYNC_READ,
	ODS_CS_ASYNC_SUBMIT,
	ODS_CS_AWAIT,       /* every await; n: calls */
	ODS_CS_AWAIT_WAITED, /* the awaits that found the future not done yet */
	ODS_CS_CACHESTAT,   /* page-cache probes, callers' and workers' */
	ODS_CS_N
};
extern atomic_bool ods_cstats_on;
uint64_t ods_cs_now(void);
void ods_cs_add(unsigned k, uint64_t t0);
static inline uint64_t ods_cs_begin(void)
{
	return __builtin_expect(atomic_load_explicit(&ods_cstats_on, memory_order_relaxed), 0) ? ods_cs_now() : 0;
}
static inline void ods_cs_end(unsigned k, uint64_t t0)
{
	if (__builtin_expect(t0 != 0, 0))
		ods_cs_add(k, t0);
}
/* at driver open (reads the variable) and close (prints, clears) */
void ods_cstats_open(void);
void ods_cstats_close(void);
/* at driver open: io.c's A/B switches (OPENDS_AB_ASYNC_NOWAIT) */
void ods_io_switches(void);

/* ---- waiting: futex-based one-shot completion ------------------------- */

void ods_futex_wait(atomic_uint *addr, unsigned expected);
void ods_futex_wake_all(atomic_uint *addr);

/* ---- the core's worker pool: runs backend->rw on worker threads -------- */

struct ods_pool;
struct ods_pool *ods_pool_create(unsigned threads, unsigned capacity, const struct ods_config *cfg);
void ods_pool_destroy(struct ods_pool *p); /* waits for queued work */
/* may block for room unless force */
void ods_pool_push(struct ods_pool *p, struct ods_io *io, bool force);
/* pin the calling thread as worker i by cfg->cpu_mask (no-op when 0) */
void ods_pin_worker(const struct ods_config *cfg, unsigned i);

/* ---- backends (src/backends/<name>/) ---------------------------------- */

struct ods_backend {
	const char *name;
	const char *descr;
	/* 0 when it can run here; else an OPENDS_* code with why[] filled */
	int (*probe)(const struct ods_config *cfg, char *why, size_t why_len);
	/* start: 0 or an OPENDS_* code (detail set) */
	int (*open)(const struct ods_config *cfg, const struct ods_accel *accel);
	void (*close)(void); /* after all I/O has drained */
	/* optional per-handle hooks: 0 or an OPENDS_* code */
	int (*handle_open)(struct ods_handle *h);
	void (*handle_close)(struct ods_handle *h);
	/* Synchronous transfer on the calling thread: bytes or negated error.
	 * NULL: the core submits and waits. */
	ssize_t (*rw)(struct ods_io *io);
	/* optional, with rw NULL: a synchronous request run on the calling
	 * thread, with no hand-off to a worker, where the backend finds that
	 * pays (uring: at most OPENDS_INLINE_MAX bytes): bytes, a negated
	 * error, or ODS_NOT_INLINE to submit it the usual way */
	ssize_t (*rw_inline)(struct ods_io *io);
	/* the core reads ahead across sequential synchronous reads
	 * (src/core/stage_ra.c); such a backend calls ods_ra_handle_close
	 * from handle_close and ods_ra_write_begin on every write it takes */
	bool readahead;
	/* Asynchronous transfer: take io, call ods_io_complete later; wait
	 * for room only if may_block. NULL: the core's pool runs rw on its
	 * workers. */
	void (*submit)(struct ods_io *io, bool may_block);
	/* optional: n requests at once (ods_io_submit_many), as submit with
	 * may_block, the workers told once they are queued (uring:
	 * ods_stage_submit_many; one io_uring_enter for a group of small
	 * reads rather than one each) */
	void (*submit_many)(struct ods_io *const *ios, unsigned n);
	/* optional: a buffer range was registered (after the accelerator's
	 * hook) or is being deregistered; *priv lands in ods_region.be_priv */
	int (*buf_register)(void *p, size_t n, enum ods_mem_kind k, void **priv);
	void (*buf_deregister)(void *p, size_t n, enum ods_mem_kind k, void *priv);
	/* optional: a phrase on how the backend serves this handle, or (h
	 * NULL) how it is set up; for opends_describe */
	void (*describe)(struct ods_handle *h, char *buf, size_t n);
};

#define ODS_NOT_INLINE ((ssize_t)INT64_MIN)

/* Read-ahead across sequential synchronous reads (src/core/stage_ra.c).
 * ods_ra_take: the read served from what was read ahead (bytes or a
 * negated error), or ODS_NOT_INLINE to run it the usual way, after which
 * ods_ra_behind(io) (once io is submitted) may queue the next range. */
ssize_t ods_ra_take(struct ods_io *io);
void ods_ra_behind(struct ods_io *io);
/* synchronous reads of h served from read-ahead so far */
unsigned long ods_ra_served(struct ods_handle *h);
/* a handle goes: wait for its read-ahead, free it */
void ods_ra_handle_close(struct ods_handle *h);
/* a write is handed to the backend: what was read ahead of its file is
 * not used from now until after it completes (wraps io->done); a write of
 * several chunks past the end of the file gets its range allocated first,
 * so that its O_DIRECT chunks run at once (stage_ra.c allocate_first) */
void ods_ra_write_begin(struct ods_io *io);
void ods_ra_write_allocate(const struct ods_io *io);
/* Free the read-ahead buffers kept for the next handle (stage_ra.c), and
 * forget them in the child of fork. */
void ods_ra_keep_drop(void);
void ods_ra_keep_forget(void);
/* A synchronous write that the engine runs on the caller in large pieces
 * (src/core/stage_wr.c, OPENDS_WRITE_PIECE): no range allocated first. */
bool ods_stage_write_caller_ok(const struct ods_io *io);

extern const struct ods_backend ods_backend_ref;
extern const struct ods_backend ods_backend_gds; /* src/backends/gds/ (ODS_HAVE_GDS) */
extern const struct ods_backend ods_backend_uring; /* src/backends/uring/ (ODS_HAVE_URING) */

/* Built backends in the order auto tries them (first usable wins), and the
 * accelerator layers likewise; NULL-terminated (src/core/driver.c). */
extern const struct ods_backend *const ods_backends[];
extern const struct ods_accel *const ods_accels[];

/* ---- driver state (src/core/driver.c) ---------------------------------- */

struct ods_driver {
	atomic_bool open;
	struct ods_config cfg;
	const struct ods_backend *be;
	const struct ods_accel *accel;
	struct ods_pool *pool; /* when be->submit is NULL */
};
extern struct ods_driver ods_drv;

static inline bool ods_is_open(void)
{
	return atomic_load_explicit(&ods_drv.open, memory_order_acquire);
}

/* ---- calls in progress, against opends_driver_close (gate.h) ----------- */

#include "gate.h"
/* This thread's public calls in progress (ODS_ENTER), the handles they
 * looked up (held until the call that looked one up returns: see users in
 * struct ods_handle), and the accelerator code of its last failure
 * (ods_fail_backend; cleared when a call starts, so a failure reports only
 * its own). One initial-exec block (errors.c): a call pays two stores and a
 * compare on it, no __tls_get_addr. */
struct ods_calls {
	unsigned depth, nheld, cap;
	int be_code, be_err;
	struct ods_handle *held[2]; /* the first two held; more beyond */
	struct ods_handle **more;   /* held[2..], cap of them (heap) */
	const void *serving;        /* the source (struct ods_source) whose read or write
				       callback runs on this thread, else NULL */
};
extern _Thread_local struct ods_calls ods_calls __attribute__((tls_model("initial-exec")));
/* give back the handles held past mark (registry.c) */
void ods_handles_release(unsigned mark);
static inline unsigned ods_call_begin(void)
{
	ods_calls.depth++;
	ods_calls.be_code = 0;
	return ods_calls.nheld;
}
static inline void ods_call_end(unsigned *mark)
{
	ods_calls.depth--;
	if (ods_unlikely(ods_calls.nheld != *mark))
		ods_handles_release(*mark);
}

/* On a library thread (a stream's dispatcher), a scope in which
 * ods_handle_lookup holds what it finds, as inside a call, until the scope
 * ends: for a look-up and the submission that counts the request in the
 * handle's inflight, so that a deregistration in between cannot free or
 * reuse the handle. */
#define ODS_HOLD_SCOPE() unsigned ods_hold_mark_ __attribute__((cleanup(ods_call_end), unused)) = ods_call_begin()

/* Take a pass for public call fn: 0, or OPENDS_DRIVER_NOT_INITIALIZED with
 * the detail set (the driver is not open, or its close is in progress). */
int ods_enter(struct ods_gate_pass *p, const char *fn);
/* The first line of every public call that uses the driver's state: takes
 * a pass, gives it back on every return (cleanup), returns fail when the
 * driver is not open or closing. opends_driver_close waits for the passes
 * out before it frees anything. */
#define ODS_ENTER_OR(fn, fail)                                                                       \
	struct ods_gate_pass ods_pass_ __attribute__((cleanup(ods_gate_leave))) = { NULL };          \
	if (ods_enter(&ods_pass_, fn))                                                               \
		return fail;                                                                         \
	unsigned ods_mark_ __attribute__((cleanup(ods_call_end), unused)) = ods_call_begin()
#define ODS_ENTER(fn) ODS_ENTER_OR(fn, ods_err(OPENDS_DRIVER_NOT_INITIALIZED, 0))
#define ODS_ENTER_SSIZE(fn) ODS_ENTER_OR(fn, -(ssize_t)OPENDS_DRIVER_NOT_INITIALIZED)

/* ---- slot tables: objects named by index + generation tokens ---------- */

/* Lookups of user-supplied names (handles, batches, host streams) go through
 * a table of slots, so a stale or forged name is found missing instead of
 * being dereferenced. A token is (generation << 32 | index + 1), never 0;
 * generations are unique in the process (slots.c). */
struct ods_slots {
	pthread_rwlock_t lock;
	void **obj;
	uint32_t *gen;
	uint32_t *freel;
	uint32_t cap, nfree;
};
void ods_slots_init(struct ods_slots *s);
uint64_t ods_slots_add(struct ods_slots *s, void *obj); /* 0 when out of memory */
void *ods_slots_get(struct ods_slots *s, uint64_t token);
void *ods_slots_take(struct ods_slots *s, uint64_t token); /* remove, return */
/* remove every object, calling fn on each, and free the table */
void ods_slots_fini(struct ods_slots *s, void (*fn)(void *obj));

/* registries (src/core/registry.c) */
int ods_registry_init(void);
void ods_registry_fini(void);
/* Find the handle for a token; NULL if not registered. Inside a public
 * call (ODS_ENTER) the handle is held until that call returns:
 * opends_handle_deregister on another thread waits for it, so neither the
 * handle nor its fds are freed or reused under the call (a deregistered
 * handle's struct serves the next registration). Outside a call (library
 * threads) nothing is held: such a caller counts its request in the
 * handle's inflight before it uses it and must re-check after. */
struct ods_handle *ods_handle_lookup(opends_handle_t fh);
/* copy the region containing p into *out; false when none */
bool ods_region_find(uintptr_t p, struct ods_region *out);

/* streams and batches (src/core/stream.c, batch.c) */
int ods_streams_init(void);
void ods_streams_fini(void);
/* in the child of a fork: forget the parent's streams, operations,
 * dispatcher and staging without locking, freeing or joining anything */
void ods_streams_forget(void);
void ods_batches_fini(void);

/* fork(): in the child the driver is closed and can be opened again
 * (driver.c's pthread_atfork handler). The child has only the forking
 * thread: the parent's workers, dispatchers and simulated streams do not
 * exist there, and any lock may be held forever. Each *_forget drops the
 * module's references to the parent's state without touching it: no
 * joins, no frees, no locks taken; the next open starts from nothing. */
void ods_registry_forget(void);
void ods_batches_forget(void);
void ods_posix_forget(void);

/* helpers shared by backends (src/core/posix.c) */
/* pread/pwrite the whole range, looping over short transfers and EINTR;
 * stops early only at EOF (reads). Bytes or -errno. */
ssize_t ods_pread_full(int fd, void *buf, size_t size, off_t off);
ssize_t ods_pwrite_full(int fd, const void *buf, size_t size, off_t off);
void *ods_aligned_alloc(size_t size); /* ODS_ALIGN-aligned, or NULL */
/* memcpy where dst or src is the caller's memory, which may be read-only
 * or unmapped: the kernel copies (process_vm_readv on this process) and a
 * bad address gives -EFAULT, as pread/pwrite would, instead of a signal.
 * 0 or -EFAULT. */
int ods_copy_checked(void *dst, const void *src, size_t n);

/* Every thread the library keeps (engine workers, the stream dispatcher,
 * the pool, hostdev's simulated streams) starts through this (the header
 * indexer's parse threads, joined within the call and built into the
 * fuzzer alone, do not): the new thread blocks the asynchronous signals, so
 * a signal sent to the process (SIGINT, SIGTERM, a timer's) runs the
 * application's handler on one of the application's threads, never inside
 * the library's. The synchronous ones (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGTRAP, SIGSYS) stay open: blocked, a fault would kill the process
 * without its handler. Returns pthread_create's value (ENOMEM without
 * memory). Such a thread has ods_tl_library_thread set: code that may be
 * called from one and must not wait for the caller's streams asks it. */
int ods_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
extern _Thread_local bool ods_tl_library_thread;

/* Objects allocated on one thread and freed on others (a future's request:
 * the caller allocates, a worker frees), recycled instead of malloc/free:
 * with malloc each such free goes back to the allocating thread's arena
 * under its lock, which that thread's next malloc and every other
 * worker's frees take too. put: one CAS onto a list; get: the whole list
 * taken at once (no ABA) under a mutex taken with trylock, so a busy lock
 * or one held across fork() means malloc. At most max kept (0 under
 * ASan, which then sees every use after free); they live as long as the
 * process. Static: ODS_RECYCLE_INIT(size, max). */
struct ods_recycle {
	_Atomic(void *) returned;
	atomic_uint n; /* kept, about */
	pthread_mutex_t lock;
	void *kept; /* under lock */
	size_t size;
	unsigned max;
};
#define ODS_RECYCLE_INIT(sz, mx) { NULL, 0, PTHREAD_MUTEX_INITIALIZER, NULL, (sz), (mx) }
void *ods_recycle_get(struct ods_recycle *r); /* r->size bytes, not zeroed, or NULL */
void ods_recycle_put(struct ods_recycle *r, void *p);

/* The staging memory budget (OPENDS_MAX_PINNED): every pinned or bounce
 * staging area the library keeps for the life of the driver reserves its
 * bytes here first, so their total stays within it (src/core/stage.c). */
size_t ods_pinned_budget(const struct ods_config *cfg); /* the budget in bytes */
bool ods_pinned_reserve(size_t n); /* false: it would not fit */
size_t ods_pinned_left(void);       /* what is not reserved now */
void ods_pinned_release(size_t n);
void ods_pinned_forget(void); /* the child of fork: no engine, nothing reserved */

/* The POSIX read/write path (src/core/posix_io.c): io on the calling
 * thread with pread/pwrite, any size and offset, O_DIRECT or not; device
 * memory staged with ods_drv.accel's synchronous copies. Bytes or a
 * negated error. The ref backend is this alone; others use it for what
 * their fast path does not take. */
ssize_t ods_posix_rw(struct ods_io *io);
/* A host bounce lent to the POSIX path's staging (uring's pooled pinned
 * one, which the accelerator copies from fast, where ods_posix_rw
 * allocates per call): b aligned to ODS_ALIGN, size a multiple of it.
 * Reads go O_DIRECT through dfd (-1: none) in whole blocks while the
 * file's size fsize (at the call; -1: unknown) is known. */
struct ods_bounce {
	char *b;
	size_t size;
	int dfd;
	off_t fsize;
};
/* ods_posix_rw's staging through lend (NULL: as ods_posix_rw); device
 * memory, or host memory for reads */
ssize_t ods_posix_staged(struct ods_io *io, const struct ods_bounce *lend);
/* accel->copy_to_device of n bytes to dst, device memory of io's device
 * (io->dev, from the request's classify: the layer need not look dst up
 * again where it has copy_to_device_on) */
int ods_io_to_device(const struct ods_io *io, void *dst, const void *src, size_t n);

#endif
