/*
 * What the two halves of the staging engine share: stage.c (requests,
 * chunker, units, worker loop) and stage_mem.c (the staging memory
 * budget, slots and copy lanes). Not for movers: they see stage.h.
 */
#ifndef ODS_STAGE_INT_H
#define ODS_STAGE_INT_H

#include "stage.h"

enum { U_FREE, U_HELD, U_IO, U_COPY }; /* U_HELD: the engine's, between stages */

/* Fairness keys (r->key): device d < ODS_STAGE_HOST_KEY is key d, higher
 * devices share the one below host memory's */
#define ODS_STAGE_HOST_KEY 63u
#define ODS_STAGE_WINDOW 16u /* queued requests looked at for another device's */

struct ods_stage_worker {
	struct ods_stage *s;
	pthread_t tid;
	unsigned idx;
	void *ctx;           /* the mover's */
	atomic_int sleeping; /* blocked and able to take work */
	atomic_uint wake_seq; /* the engine's own wait (movers without wait) */
	struct ods_stage_unit *units, *free_list;
	unsigned nfree, nio, ncopy;
	char *block;                  /* every slot at once (accelerators that pin) */
	bool block_pinned;
	/* The request this worker last took chunks of (by id: a finished
	 * request's memory is reused at once for the next, ods_recycle), how
	 * many of them it holds, and which turn of holding that is (held_gen
	 * moves at every switch: a unit of an earlier turn does not count). */
	uint64_t held_id;
	unsigned held_n;
	unsigned held_gen;
	bool declined;                /* left the head request to other workers */
	unsigned turn;                /* pick(): fewer workers than devices queued */
	void *lane;                   /* accelerator copy lane, or NULL: recorded copies */
	struct ods_stage_unit *_Atomic posted; /* completions from other threads */
	unsigned near_dev;            /* the device whose NUMA node it last moved to for */
	bool idle_counted;            /* counted in s->nidle (stage.c idle_mark) */
	size_t dio_bytes;             /* bytes of its units' device reads in flight (u->device_io) */
};

struct ods_stage {
	const struct ods_mover *mv;
	const struct ods_accel *accel;
	const struct ods_config *cfg;
	struct ods_stage_params p;
	size_t reserved;     /* bytes of the staging budget held */
	unsigned started;
	unsigned nw;         /* workers: p.threads, then the extra ones (ods_stage_extra_workers) */
	struct ods_stage_worker *w;
	pthread_mutex_t lock;
	pthread_cond_t room;
	struct ods_stage_req *head, *tail;
	unsigned nreq, cap;  /* requests queued; at most this many ... */
	size_t qbytes, cap_bytes; /* ... unless their bytes stay below this */
	atomic_uint queued;  /* requests with chunks left; for the sleep handshake */
	unsigned nkey[ODS_STAGE_HOST_KEY + 1]; /* requests queued per fairness key */
	atomic_uint ndevkeys; /* device keys with requests queued (changed under the lock) */
	atomic_uint wake_rr; /* where the next wake-up scan starts */
	atomic_uint nidle;   /* workers spinning idle, free to take a request (no wake needed) */
	atomic_bool stop;
	unsigned ready;      /* workers done setting up (lock) */
	pthread_cond_t ready_cv;
	struct ods_stage_wr *wr; /* stage_wr.c's buffers; NULL: its way is off */
	size_t dio_cap;          /* per worker, bytes of device reads in flight; 0 no cap */
	uint64_t req_ids;        /* the last request id given (lock) */
};

/* stage.c */
void ods_stage_note_err(struct ods_stage_req *r, long e);
/* fork(): forget the lock of the kept failure sentences (ods_pinned_forget) */
void ods_stage_why_forget(void);
/* drop a chunk's (or the queue's) reference; the last completes the request */
void ods_stage_req_put(struct ods_stage_req *r);
void ods_stage_wake_worker(struct ods_stage_worker *w);

/* stage_queue.c */
extern struct ods_recycle ods_stage_reqs; /* finished requests, for the next */
/* Workers started beyond p.threads for a mover with device_workers: they
 * take chunks only while requests for two or more devices are queued
 * (stage_queue.c says why). */
unsigned ods_stage_extra_workers(const struct ods_stage_params *p, const struct ods_mover *m,
				 const struct ods_config *cfg, const struct ods_accel *accel);
/* w is one of those and may take nothing now */
bool ods_stage_extra_idle(const struct ods_stage_worker *w);
/* The next chunk [*c0, *c1) for w, with a reference on its request held;
 * NULL: none (w->declined set when w left a request to other workers).
 * *popped: the request has no chunks left and the queue's reference must
 * be dropped after starting this one. */
struct ods_stage_req *ods_stage_take_chunk(struct ods_stage_worker *w, off_t *c0, off_t *c1, bool *popped);

/* stage_wr.c: synchronous writes from device memory on the caller, in
 * large pieces (OPENDS_WRITE_PIECE) */
void ods_stage_write_open(struct ods_stage *s);
void ods_stage_write_close(struct ods_stage *s);
/* true: io ran and completed here; false: queue it as any other */
bool ods_stage_write_caller(struct ods_stage *s, struct ods_io *io);

/* stage_ra.c: library writes running now on io's file (io's own counted
 * from ods_ra_write_begin; files share 64 counters, so another file's
 * write may count too) */
unsigned ods_ra_writes_running(const struct ods_io *io);
/* read OPENDS_RA_DEPTH (ods_stage_open) */
void ods_ra_setup(void);
/* Give the budget of read-ahead's kept buffers back (ods_ra_keep_drop):
 * true when a set was kept, so that a reservation the budget refused may
 * be tried again. On a caller's thread only: freeing pinned memory may
 * wait for the device, which a stream dispatcher must never do. */
bool ods_ra_keep_reclaim(void);

/* stage_mem.c */
bool ods_stage_async_copies(const struct ods_accel *a);
/* Fit threads x depth x chunk of staging into what is left of the budget
 * (the depth is cut to fit), and reserve it: 0, or refused with the
 * detail set when not even one chunk per worker fits. */
int ods_stage_fit_budget(struct ods_stage_params *p, const struct ods_mover *m, const struct ods_config *cfg,
			 size_t *reserved);
void ods_stage_block_alloc(struct ods_stage_worker *w);
void ods_stage_slots_free(struct ods_stage_worker *w);
int ods_stage_copy_start(struct ods_stage_unit *u, void *dst, const void *src, size_t n, bool to_dev);
int ods_stage_copy_poll(struct ods_stage_unit *u, bool wait);

#endif
