/*
 * Stream-ordered I/O inside the core: what the public calls (stream.c)
 * share with the two engines that run them. Calls run one way: stream.c ->
 * an engine (stream_accel.c or stream_host.c) -> stream_dispatch.c -> this
 * header.
 *  - stream_accel.c: on the accelerator's own streams, when the layer has
 *    stream hooks (cuda, and hostdev's simulated streams); each operation
 *    is a run of commands queued on the caller's stream
 *    (docs/stream-ordering.md).
 *    stream_accel_run.c runs the operations once queued (pieces, results,
 *    the dispatcher's poll; stream_aop.h is what the two share),
 *    stream_dispatch.c holds what it runs on (a dispatcher thread, a
 *    staging pool), stream_accel_reg.c the streams it knows (made,
 *    registered with their hints) and its operations in flight.
 *  - stream_host.c: on library-owned host queues, what a stream is when
 *    there is no accelerator stream to order against.
 * The engine is chosen once, when the driver opens (ods_streams_init).
 */
#ifndef ODS_STREAM_H
#define ODS_STREAM_H

#include <time.h>

#include "ods.h"

/* What a stream operation was given. The values behind the pointers are
 * read only when the stream reaches the operation. */
struct ods_sargs {
	int opcode;
	opends_handle_t fh;
	const void *buf;
	size_t *size;
	off_t *file_offset, *buf_offset;
	ssize_t *result;
};

/* The stream reached the operation: read the values behind a's pointers
 * into *size, *foff, *boff and validate them into io. The result of
 * ods_io_prepare: 0, or a negated error that is the operation's result. */
static inline ssize_t ods_sargs_read(const struct ods_sargs *a, struct ods_io *io, size_t *size, off_t *foff,
				     off_t *boff)
{
	/* atomic loads: the caller (or its host function) may store them
	 * while the stream runs */
	*size = __atomic_load_n(a->size, __ATOMIC_ACQUIRE);
	*foff = __atomic_load_n(a->file_offset, __ATOMIC_ACQUIRE);
	*boff = __atomic_load_n(a->buf_offset, __ATOMIC_ACQUIRE);
	return ods_io_prepare(io, a->opcode, a->fh, a->buf, *size, *foff, *boff);
}

/* One way of running streams. The public calls have checked that the
 * driver is open and the pointers they are given are not NULL (and for
 * enqueue that fh is registered); each hook returns what the public call
 * returns, its errors phrased with the public call's name. */
struct ods_stream_engine {
	int (*init)(void); /* 0 or an OPENDS_* code */
	void (*fini)(void); /* drain every operation, free every stream */
	opends_error_t (*create)(opends_stream_t *stream);
	opends_error_t (*destroy)(opends_stream_t stream);
	opends_error_t (*reg)(opends_stream_t stream, unsigned flags);
	/* true when stream was registered (and is no longer) */
	bool (*dereg)(opends_stream_t stream);
	opends_error_t (*enqueue)(const char *fn, const struct ods_sargs *a, opends_stream_t stream);
	opends_error_t (*sync)(opends_stream_t stream);
	/* in the child of a fork: drop the parent's state without locking,
	 * freeing or joining anything (its threads do not exist here) */
	void (*forget)(void);
};

/* ---- what the accelerator engine runs on (stream_dispatch.c) ---------- */

/* Work for the dispatcher thread; embedded in what it belongs to. */
struct ods_task {
	struct ods_task *next;
	void (*run)(struct ods_task *t);
};
/* Start the dispatcher once (later calls do nothing): it runs posted
 * tasks and, between them, poll(): > 0 when a counter moved, 0 when none
 * did, -1 when there is nothing to watch, -2 when none did and none can
 * before something kicks (ods_dispatch_kick). 0 or an OPENDS_* code. */
int ods_dispatch_start(int (*poll)(void));
/* Queue a task (any thread, host functions included: never waits long). */
void ods_dispatch_post(void *task);
/* Something a poll watches will move soon: poll again without delay. */
void ods_dispatch_kick(void);
/* Run what is posted and poll until nothing is watched, then stop. */
void ods_dispatch_stop(void);

/* Pinned staging of at least n bytes (at most ODS_STAGE_MAX), from a pool
 * kept until the driver closes, within the staging budget
 * (OPENDS_MAX_PINNED: each buffer the pool makes reserves its bytes until
 * the driver closes); *cls says which class to give it back to. NULL when
 * out of memory, with *over true when it would not fit the budget. */
#define ODS_STAGE_MAX ((size_t)1 << 30)
void *ods_staging_get(size_t n, unsigned *cls, bool *over);
/* as ods_staging_get, from what the pool has only (NULL: none free) */
void *ods_staging_take(size_t n, unsigned *cls);
void ods_staging_put(void *p, unsigned cls);
void ods_staging_fini(void); /* after every operation ended */
/* in the child of a fork: a stopped dispatcher and an empty pool, the
 * parent's buffers leaked */
void ods_dispatch_forget(void);

extern const struct ods_stream_engine ods_stream_accel; /* stream_accel.c */

/* OPENDS_STREAM_STATS=1 (test-only, for A/B runs on a GPU machine): where
 * the accelerator engine's time goes, summed over every operation and
 * printed to stderr when the driver closes (ods_sstats_print). Off: one
 * branch per event. */
enum {
	SST_ENQ,         /* operations enqueued */
	SST_ENQ_NS,      /* ... time inside the call, on the caller */
	SST_PUB_NS,      /* call -> result out (reads done, last gate open) */
	SST_END_NS,      /* result out -> the dispatcher saw the last copy */
	SST_SYNC,        /* opends_stream_synchronize calls */
	SST_SYNC_WAIT_NS, /* ... time waiting for the library's operations */
	SST_SYNC_SLEEPS, /* ... of which slept (results not out at the call) */
	SST_SYNC_ACC_NS, /* ... time in the accelerator's sync */
	SST_ROUNDS,      /* dispatcher polls */
	SST_VISITS,      /* operations looked at by them */
	SST_WAKES,       /* futex wakes of the dispatcher by a post or kick */
	SST_DIRECT,      /* operations run direct (idle stream: no counter,
			    no dispatcher; stream_accel.c) */
	SST_POOL_NEW,    /* pinned allocations the staging pool made */
	SST_CALLER,      /* large reads on an idle stream run on the caller
			    as a synchronous read (stream_accel.c) */
	SST_N
};
extern bool ods_sstats_on;
extern atomic_ullong ods_sstats[SST_N];
static inline uint64_t ods_sst_now(void)
{
	if (!ods_sstats_on)
		return 0;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static inline void ods_sst_add(int i, uint64_t v)
{
	if (ods_sstats_on)
		atomic_fetch_add_explicit(&ods_sstats[i], v, memory_order_relaxed);
}
/* elapsed since t0 (an ods_sst_now), into counter i */
static inline void ods_sst_since(int i, uint64_t t0)
{
	if (ods_sstats_on && t0)
		ods_sst_add(i, ods_sst_now() - t0);
}
void ods_sstats_init(void);  /* reads OPENDS_STREAM_STATS */
void ods_sstats_print(void); /* and zeroes them */

/* Something of an operation kept until its stream is known to be past it
 * (stream_accel.c's direct operations: their staging, until the copy out
 * of it ran). release(h, true): the stream is past it (an idle query, a
 * sync or a destroy that succeeded); release(h, false): that will never be
 * known (the accelerator failed): keep it for good, never reuse it. */
struct ods_held {
	struct ods_held *next;
	void (*release)(struct ods_held *h, bool past);
};

/* stream_accel_reg.c: the accelerator streams the library made or knows
 * registered, for stream_accel.c's engine (its create/destroy/reg/dereg/
 * sync hooks), and the count of its operations in flight. */
opends_error_t ods_astream_create(opends_stream_t *stream);
opends_error_t ods_astream_destroy(opends_stream_t stream);
opends_error_t ods_astream_reg(opends_stream_t stream, unsigned flags);
bool ods_astream_dereg(opends_stream_t stream);
opends_error_t ods_astream_sync(opends_stream_t stream);
/* An operation is enqueued on s: *fixed says whether s is registered with
 * every OPENDS_STREAM_FIXED_* flag, *made whether opends_stream_create
 * made it (non-blocking: it never waits for the legacy default stream);
 * the result (NULL when the library knows nothing of s: neither made nor
 * registered) goes to ods_astream_untrack once the operation's result is
 * out and its last gate open, so that ods_astream_sync can sleep until
 * then. The entry stays while operations are tracked on it. */
void *ods_astream_track(void *s, bool *fixed, bool *made);
void ods_astream_untrack(void *t);
/* What is held on the entry t (ods_astream_track's result) of a stream the
 * library made: ods_astream_held takes it all off the entry (NULL if none):
 * it was queued before this call, so if the stream proves idle after it,
 * the caller releases it (ods_held_release), else gives it back with
 * ods_astream_hold. ods_astream_hold: h (a list) is held on t (whose
 * commands run on device dev) until the
 * stream's next idle query, sync, destroy, or the close. */
struct ods_held *ods_astream_held(void *t);
void ods_astream_hold(void *t, struct ods_held *h, unsigned dev);
/* the stream pool is out of budget: give back what idle streams hold */
void ods_astreams_reclaim(void);
/* the stream pool has no buffer of a size: ask the max oldest holders */
void ods_astreams_reclaim_old(unsigned max);
void ods_held_release(struct ods_held *h, bool past); /* each of list h */
/* operations enqueued and not yet ended: +1 / -1 */
void ods_ainflight_add(int d);
/* wait until none is in flight, destroy the streams the library made */
void ods_astreams_fini(void);
/* the child of a fork: drop everything without locking or freeing */
void ods_astreams_forget(void);
/* streams the library knows now (made, registered, or kept by operations;
 * test_stream_direct) */
size_t ods_astreams_count(void);
extern const struct ods_stream_engine ods_stream_host;  /* stream_host.c */

#endif
