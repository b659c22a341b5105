/*
 * The staging engine: overlaps the reads and writes of a data source with
 * copies into (and out of) accelerator memory. It owns everything that is
 * not about how bytes leave or reach the source:
 *
 *   requests   a bounded FIFO of ods_io shared by N workers; submitters
 *              that may block wait for room (threads x depth requests)
 *   chunker    a request is cut into chunks of at most `chunk` bytes; a
 *              worker takes the next chunk of the oldest request, at most
 *              r->share of one request at a time, so a large request is
 *              spread over every worker and small ones go to one each;
 *              while requests for two or more devices are queued, the
 *              workers are shared out over the devices (the oldest
 *              request of each), so each device's link stays busy; with
 *              two or more devices (and no OPENDS_IO_THREADS) as many
 *              workers again start for a mover that asks for them
 *              (device_workers), which take chunks only then
 *   units      each worker runs `depth` units; unit i owns slot i (a
 *              `chunk`-byte piece of pinned host memory) and fence i on the
 *              worker's copy lane
 *   copy lanes one accelerator lane per worker (in-order copy queues: for
 *              CUDA one stream per device the worker copies to, chosen by
 *              the layer from each copy's device pointer), made by
 *              accel->lanes->lane_create on the worker thread after
 *              lanes->thread_attach; fences are per unit. With an
 *              accelerator without lanes (host, hostdev) the copy
 *              is recorded and run when the worker first asks twice whether
 *              it is done, so the waiting states run in CI without a GPU.
 *   workers    the loop: take chunks, let the mover run them, reap its
 *              completions, poll copies, spin, then sleep
 *
 * What moves bytes between the source and memory is a *mover* (struct
 * ods_mover below): the io_uring fd mover (src/backends/uring/) is the
 * first; a source mover (e.g. Ceph RADOS objects) plugs in beside it.
 * tests/test_stage.c holds two small example movers run against this
 * contract: a synchronous one, and one that completes on its own thread.
 *
 * The life of a read chunk [c0, c1) of request r on unit u:
 *   engine: u taken from the worker's free list, u->c0/c1 set, mover->read(u)
 *   mover:  reads bytes of the source into the caller's host memory or into
 *           ods_stage_slot(u) (always for device memory), describing the
 *           transfer in u->io_buf / io_off / io_len / io_done / slot, then
 *           reports ods_stage_read_done(u) (or ods_stage_end(u, -err))
 *   engine: keeps only the caller's bytes [c0, c1) that were read: copies
 *           them from the slot (memcpy to host memory; an async copy on the
 *           lane + fence to device memory), and frees u when the copy is done
 * A write chunk: the engine first copies device memory into the slot (lane
 *   and fence), then calls mover->write(u) with u->io_buf pointing at the
 *   bytes (slot, or the caller's host memory); the mover writes all of
 *   [c0, c1) and reports ods_stage_end(u, 0 or -err).
 */
#ifndef ODS_STAGE_H
#define ODS_STAGE_H

#include "ods.h"

struct ods_stage;
struct ods_stage_worker;

/* ---- what a mover sees ---------------------------------------------------- */

struct ods_stage_req {
	struct ods_io *io;      /* the caller's request (buf, size, off, opcode, mem, fh) */
	off_t end;              /* end of the range to move; mover->req_init may lower it
				   (reads stop at the end of the source) */
	off_t fsize;            /* size of the source at submit, -1 unknown (set by req_init) */
	bool delegate;          /* set by req_init: mover->rw_whole runs it on a worker */
	uint64_t mv[3];         /* the mover's, set by req_init */

	/* the engine's */
	struct ods_stage_req *next;
	off_t pos;              /* next byte to hand out (queue lock) */
	bool started;           /* a chunk was handed out (cancel no longer applies) */
	unsigned share;         /* chunks one worker may hold at once */
	unsigned key;           /* who it is served fairly against: its device, or host memory */
	uint64_t id;            /* unique in the engine, from 1 (queue lock) */
	size_t weight;          /* bytes it counts for in the queue's back-pressure */
	atomic_uint pending;    /* chunks running + 1 while chunks are left */
	atomic_llong short_at;  /* lowest offset where data ended (EOF) */
	atomic_long err;        /* first error, negated; 0 none */
	atomic_llong written_to; /* reads: end of the furthest bytes put into the caller's memory */
	struct ods_stage *s;
};

struct ods_stage_unit {
	struct ods_stage_worker *w;
	unsigned idx;           /* 0 .. depth-1: its slot and its fence */
	struct ods_stage_req *r;
	off_t c0, c1;           /* the caller's bytes of this chunk, source offsets */
	bool more;              /* work was still queued when this chunk was taken */
	/* the transfer, described by the mover for ods_stage_read_done */
	char *io_buf;           /* memory of the transfer: slot or the caller's */
	off_t io_off;           /* source offset of io_buf[0] */
	size_t io_len, io_done; /* asked for; moved so far */
	bool slot;              /* io_buf is this unit's slot */
	bool device_io;         /* read(): set when the transfer goes to the storage
				   device (O_DIRECT), not to a cache; the engine keeps
				   at most OPENDS_AB_DIRECT_INFLIGHT bytes of those in
				   flight per worker (stage.c) */

	/* the engine's */
	size_t dio_n;           /* bytes counted in its worker's dio_bytes */
	int state;
	unsigned held_gen;      /* its worker's held_gen when taken */
	void *cp_dst;
	const void *cp_src;
	size_t cp_n;
	bool cp_to_dev;
	unsigned cp_polls;
	char *slot_mem;         /* its slot, once it has one */
	struct ods_stage_unit *next_free;
	struct ods_stage_unit *_Atomic post_next;
	long post_res;
};

/*
 * The mover contract. Every hook but wake runs on one thread: the worker
 * that owns the unit (req_init: the submitter's thread). A mover has at
 * most `depth` units of each worker in flight at once, each of at most
 * `chunk` bytes of the caller's (a read's covering aligned blocks also fit
 * a slot: read chunks end at align_down(c0) + chunk), so the bytes in flight
 * are at most threads x depth x chunk; the FIFO in front holds at most
 * threads x depth requests, or more while their bytes stay below
 * threads x depth x chunk.
 *
 * Completion, two ways:
 *   - on the worker thread (a ring reaped in reap()): call
 *     ods_stage_read_done(u) or ods_stage_end(u, res) directly;
 *   - from any other thread (a library's callback thread, e.g. librados's
 *     aio completion): call ods_stage_post(u, res), which is thread safe,
 *     wakes the worker, and has the engine call mover->complete(u, res) on
 *     the worker thread. Nothing else of the engine may be touched off the
 *     worker thread.
 * Either way a unit handed to read/write is reported exactly once; it may
 * be reported inside read/write itself (a synchronous mover).
 */
struct ods_mover {
	const char *name;
	/* The backend asks for the extra workers of a machine with two or
	 * more devices (stage_queue.c ods_stage_extra_workers says when they
	 * start and what they take): as many workers again, each with its
	 * slots in the pinned budget, which take chunks only while requests
	 * for two or more devices are queued. false: exactly p->threads
	 * workers (the sources' engine: its reads are not bound by one
	 * device's copies, and twice the workers would hold twice the pinned
	 * memory for nothing). */
	bool device_workers;
	/* Per-worker state, made on the opening thread before the worker
	 * starts: 0 or an OPENDS_* code with the detail set. */
	int (*worker_open)(struct ods_stage *s, unsigned idx, void **ctx);
	void (*worker_close)(void *ctx); /* after the worker thread ended */
	/* optional, worker thread: slot i (size bytes at p) of this worker
	 * now exists, e.g. to register it as a fixed buffer; slots_removed:
	 * all of them are about to be freed */
	void (*slot_added)(void *ctx, unsigned i, char *p, size_t size);
	void (*slots_removed)(void *ctx);

	/* Submitter's thread, before r is queued: set r->fsize, r->delegate,
	 * r->mv, and lower r->end for reads past the end of the source.
	 * Returns 0 to queue r, or 1 when r needs no transfer (completes with
	 * 0 bytes). */
	int (*req_init)(struct ods_stage_req *r);
	/* Worker thread: start a read of [u->c0, u->c1) (see the top). */
	void (*read)(struct ods_stage_unit *u);
	/* Worker thread: write [u->c0, u->c1) from u->io_buf (u->slot says
	 * whether that is the slot); io_off = c0, io_len = c1 - c0 are set. */
	void (*write)(struct ods_stage_unit *u);
	/* Worker thread: a request with r->delegate, whole: bytes or -err. */
	ssize_t (*rw_whole)(struct ods_io *io);
	/* Worker thread: a completion posted with ods_stage_post. */
	void (*complete)(struct ods_stage_unit *u, long res);

	/* Worker thread: start what read/write queued and report what has
	 * finished; true when anything was reported. NULL: a mover that only
	 * reports inside read/write or through ods_stage_post. */
	bool (*reap)(void *ctx);
	/* optional, worker thread: true while this worker should take no
	 * more chunks (its completions wake it) */
	bool (*full)(void *ctx);
	/* Optional pair (both or neither). wait: worker thread, block until a
	 * completion, a wake, or timeout_ns (-1: none); a wake that came
	 * before the wait must end it. wake: any thread. NULL: the engine's
	 * own futex. */
	void (*wait)(void *ctx, long timeout_ns);
	void (*wake)(void *ctx);
};

/* The worker's pinned slot of u, allocated on first use; NULL when it
 * cannot be had (the mover then ends u with -ENOMEM). */
char *ods_stage_slot(struct ods_stage_unit *u);
/* The read of u is over: [io_off, io_off + io_done) lies at io_buf (fewer
 * bytes than asked: the source ended there). Worker thread only. */
void ods_stage_read_done(struct ods_stage_unit *u);
/* u is over with res (0, or a negated error). Worker thread only. */
void ods_stage_end(struct ods_stage_unit *u, long res);
/* Any thread: report u's transfer finished with res; the engine calls
 * mover->complete(u, res) on u's worker thread. */
void ods_stage_post(struct ods_stage_unit *u, long res);
/* The mover's per-worker state of u's worker. */
void *ods_stage_ctx(const struct ods_stage_unit *u);

/* ---- what a backend sees -------------------------------------------------- */

struct ods_stage_params {
	unsigned threads;  /* workers */
	unsigned depth;    /* units per worker (cut to fit the staging budget) */
	size_t chunk;      /* bytes per chunk and per slot */
	long spin_us;      /* an idle worker spins this long before sleeping; -1 never sleeps */
};

/* Start the workers with mover m over the driver's accelerator. 0 or an
 * OPENDS_* code with the detail set; *out the engine. threads x depth x
 * chunk bytes of staging are reserved from the budget (ods_pinned_reserve)
 * until close: the depth is cut to fit; when not even threads x chunk
 * fits, the open is refused (OPENDS_DRIVER_INVALID_PROPS).
 * ods_stage_params gives the depth it runs with. */
int ods_stage_open(struct ods_stage **out, const struct ods_stage_params *p, const struct ods_mover *m,
		   const struct ods_config *cfg, const struct ods_accel *accel);
/* The chunk for ods_stage_open with p (p->chunk cut down) of which one
 * per worker (p->threads, and the extra ones m would get) fits what is
 * left of the staging budget now: p->chunk when it fits, else the largest
 * power of two from ODS_ALIGN that does; the open is then not refused for
 * want of budget (its depth is cut to fit), unless another open takes
 * budget in between. 0 when not even ODS_ALIGN per worker fits. */
size_t ods_stage_chunk_fit(const struct ods_stage_params *p, const struct ods_mover *m, const struct ods_config *cfg,
			   const struct ods_accel *accel);
/* Waits until every request has completed, then stops the workers. */
void ods_stage_close(struct ods_stage *s);
/* Queue io (size > 0); io->done is called on a worker. With may_block,
 * waits for room in the FIFO. */
void ods_stage_submit(struct ods_stage *s, struct ods_io *io, bool may_block);
/* Queue ios[0..n) (each size > 0) as ods_stage_submit would, but under one
 * hold of the queue lock and with one wake round at the end, so the
 * workers see them together (a batch). req_init runs for each first (those
 * that need no transfer complete at once). With may_block, waits for room
 * only past 8 times the bytes ods_stage_submit may queue (a batch's
 * submitter collects nothing while it waits; BATCH_ROOM and
 * OPENDS_AB_BATCH_NOWAIT in stage_queue.c): the workers are woken for
 * those queued before the wait, and the rest follow after. */
void ods_stage_submit_many(struct ods_stage *s, struct ods_io *const *ios, unsigned n, bool may_block);
const struct ods_stage_params *ods_stage_params(const struct ods_stage *s);

#endif
