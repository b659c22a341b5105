/*
 * Stream-ordered I/O on the accelerator's own streams (cuda, hostdev's
 * simulated ones): each operation is a run of commands on the caller's
 * stream, so that nothing the stream waits for depends on device work
 * queued anywhere else (docs/stream-ordering.md). Device buffers move
 * through pinned staging in pieces: gates hold the stream until a piece is
 * read, copies on the stream move it, and a counter the stream writes
 * tells the dispatcher (stream_dispatch.c) how far it got. Values are read
 * when the stream gets there ("reached"), or at the call on streams
 * registered with every OPENDS_STREAM_FIXED_* flag (or made by the library
 * and idle), whose reads start then. No host function per staged
 * operation; a host buffer takes one. This file plans an operation and
 * queues its commands; stream_accel_run.c runs it.
 */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stream_aop.h"

/* Pieces and slots (pieces in flight) per operation: larger pieces for
 * large operations, so the stream waits on fewer gates. */
#define PIECE ((size_t)4 << 20)
#define SLOTS 32u
#define BIG_OP ((size_t)256 << 20)
#define BIG_PIECE ((size_t)16 << 20)
#define BIG_SLOTS 16u
_Static_assert(SLOTS * PIECE <= ODS_STAGE_MAX && BIG_SLOTS * BIG_PIECE <= ODS_STAGE_MAX, "staging fits a class");
/* OPENDS_STREAM_BIG=PIECE_MIB,SLOTS (test-only, for A/B runs on a GPU
 * machine): the large operations' pieces and slots, read at open */
static size_t big_piece = BIG_PIECE;
static unsigned big_slots = BIG_SLOTS;
/* OPENDS_STREAM_IDLE=0 (test-only, A/B): no idle shortcut (no query per
 * operation; reads on streams not fixed start when the stream gets there) */
static bool idle_ok = true;
/* OPENDS_STREAM_DIRECT=0 (test-only, A/B): reads reached at the call on an
 * idle stream run as before (a counter on the stream, the dispatcher) */
static bool direct_ok = true;
/* OPENDS_STREAM_CALLER=0 (test-only, A/B): large reads reached at the
 * call on an idle stream run staged as before (caller_run) */
static bool caller_ok = true;

/* Queue what piece i needs before its file I/O starts: its gate and, for
 * a write, the copy of the piece into its slot. (A read copies only its
 * bytes inside the file seen at the call, pre_from: nothing past EOF is
 * read from or written to the device.) */
static int prep_piece(struct aop *op, void *stream, unsigned i, bool *queued)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	struct piece *pc = &op->p[i];
	pc->gate = acc->gate_get();
	if (!pc->gate)
		return ods_fail(OPENDS_NOMEM_ERROR, "out of memory for a stream gate");
	int rc = 0;
	bool copy = false;
	char *dev = ods_aop_dev(op, i);
	if (op->stage && op->a.opcode == OPENDS_WRITE) {
		copy = true;
		rc = acc->stream_copy(op->sdev, stream, ods_aop_slot(op, i), dev, pc->len, false);
	}
	if (rc) {
		acc->gate_put(pc->gate);
		pc->gate = NULL;
	} else if (copy) {
		*queued = true; /* the copy is on the stream: the staging is its */
	}
	return rc;
}

/* Queueing an operation, in two parts: 0 or the first failure; *queued
 * says whether anything reached the stream first, op->nq how many waits.
 * The stream tells how far it got through the counter ("reached" unless
 * values were read at the call, then after each piece's copy), not host
 * functions. Piece i + k reuses piece i's slot: what it needs is queued
 * after piece i's copy (read) or wait (write). queue_head: the first k
 * pieces' gates (and copies), then "reached" or the one host function. */
static int queue_head(struct aop *op, void *stream, bool *queued)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	int rc = 0;
	unsigned i;
	*queued = false;
	for (i = 0; i < op->k && !rc; i++)
		rc = prep_piece(op, stream, i, queued);
	if (!rc)
		rc = !op->stage ? acc->stream_call(op->sdev, stream, ods_dispatch_post, &op->task)
		     : op->base ? acc->stream_mark(op->sdev, stream, op->progress, 1) : 0;
	if (rc) {
		for (unsigned j = 0; j < i; j++)
			if (op->p[j].gate)
				acc->gate_put(op->p[j].gate), op->p[j].gate = NULL;
		return rc;
	}
	*queued = *queued || op->base || !op->stage;
	return 0;
}

/* A staged operation's first wait is queued: the dispatcher watches it
 * (and starts the reads of values taken at the call) before the rest is
 * queued. An accelerator may block a call while the stream's queue is
 * full (CUDA does), and only the dispatcher can then let the stream drain
 * it, starting pieces as the counter moves. */
static void op_launch(struct aop *op)
{
	ods_dispatch_post(&op->task);
}

/* The layer refused piece i's wait. It may have reached the stream all
 * the same: CUDA's gate is two calls when the driver refuses them fused
 * (cuda_streams.c), and the second failing leaves the first queued. So the
 * refused wait counts as queued (nq), and its gate is opened with the
 * others when the operation is cut, or the stream would wait on it for
 * ever. Not now: a piece started at the call opens its own gate when it
 * ends, and a gate the stream has passed may already be reused (hostdev
 * frees it), so it must be opened once, by whoever knows no piece will.
 * The layer keeps a refused gate (never gate_put). */
static void wait_refused(struct aop *op, unsigned i)
{
	op->p[i].lost = true;
	op->nq = i + 1;
}

/* Nothing but a refused wait may have reached the stream, and no piece
 * started: open that gate before op is freed. */
static void open_refused(struct aop *op)
{
	if (op->nq && op->p[op->nq - 1].lost)
		ods_drv.accel->streams->gate_open(op->p[op->nq - 1].gate);
}

/* A direct operation (an idle stream reached it at the call, and its
 * pieces all have slots of their own): after queue_head, each piece's wait
 * and its copy. No counter and no dispatcher: the caller starts every
 * piece once this is queued, the last piece to end publishes the result
 * and opens the last gate, and the staging stays held on the stream's
 * entry until the stream is known to be past the copies (its next idle
 * query, a sync, its destroy, the close). The copies stay on the caller's
 * stream, behind the waits: nothing the stream waits for depends on device
 * work queued anywhere else (docs/stream-ordering.md, "The rule"). */
static int queue_direct(struct aop *op, void *stream, bool *queued)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	int rc;
	for (unsigned i = 0; i < op->n; i++) {
		if ((rc = acc->stream_wait(op->sdev, stream, op->p[i].gate))) {
			wait_refused(op, i);
			return rc;
		}
		*queued = true;
		op->nq = i + 1;
		if (op->p[i].pre_from && (rc = acc->stream_copy(op->sdev, stream, ods_aop_dev(op, i), ods_aop_slot(op, i),
							       op->p[i].pre_from, true)))
			return rc;
	}
	return 0;
}

/* How far the caller queues ahead of the stream: piece i is queued once
 * the stream copied piece i - QWIN, the caller sleeping meanwhile. CUDA
 * blocks a call on a full stream queue by spinning (an 8 GiB read, ~2 000
 * commands: 0.42 CPU-s/GiB cold). QWIN pieces (~520 commands) are meant to
 * fit, so operations up to 2 GiB return at once as before. No new wait:
 * if nothing moves for 200 ms (a held stream, a slow disk, a failed
 * accelerator), it queues on and the accelerator blocks or fails it. */
#define QWIN 128u

/* Sleep (1 ms naps) until counter reads at least need, or until neither
 * it nor *moving changed for idle_ms. */
static void counter_wait(void *counter, uint32_t need, atomic_uint *moving, unsigned idle_ms)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	uint32_t m = acc->counter_read(counter);
	unsigned f = atomic_load(moving), idle = 0;
	while (m < need && idle < idle_ms) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		uint32_t m2 = acc->counter_read(counter);
		unsigned f2 = atomic_load(moving);
		idle = m2 != m || f2 != f ? 0 : idle + 1;
		m = m2, f = f2;
	}
}

/* A read the stream reached at the call (an idle stream the library made,
 * nothing ahead of it), too large for the caller to queue without waiting
 * for the stream (more than QWIN pieces: the caller would sleep in
 * queue_body until the stream had copied all but the last QWIN): it runs
 * as the synchronous read does, on the caller, through the engine's own
 * pipeline, and the call returns once the bytes are in device memory.
 * Nothing is queued on the stream, so the rule holds (no stream waits on
 * anything), and the stream's later work follows the read as the call's
 * order says. Staged, such a read copied its pieces in order on the one
 * stream, each behind its gate, a finished piece waiting for a slower one
 * (issue 18: the hot 8 GiB stream leg at 0.91x the sync leg of the same
 * command); the sync path copies each piece as it is read. The caller,
 * which waited for most of the read anyway, now waits for all of it. */
static void caller_run(const struct ods_sargs *a, struct ods_io *io, void *ast, uint64_t t0)
{
	ssize_t r = ods_io_run(io);
	__atomic_store_n(a->result, r, __ATOMIC_RELEASE);
	if (ast)
		ods_astream_untrack(ast);
	ods_sst_add(SST_CALLER, 1);
	ods_sst_add(SST_ENQ, 1);
	ods_sst_since(SST_ENQ_NS, t0);
}

/* The waits, copies, later pieces' gates and counts; *posted: op_launch
 * ran. */
static int queue_body(struct aop *op, void *stream, bool *queued, bool *posted)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	bool read = op->a.opcode == OPENDS_READ;
	int rc;
	for (unsigned i = 0; i < op->n; i++) {
		if (*posted && i >= QWIN) /* piece i - QWIN copied */
			counter_wait(op->progress, op->base + (i - QWIN) + 1, &op->finished, 200);
		if ((rc = acc->stream_wait(op->sdev, stream, op->p[i].gate))) {
			wait_refused(op, i);
			return rc;
		}
		*queued = true;
		op->nq = i + 1;
		if (!op->stage)
			continue;
		if (i == 0) {
			op_launch(op);
			*posted = true;
		}
		if (read && op->p[i].pre_from &&
		    (rc = acc->stream_copy(op->sdev, stream, ods_aop_dev(op, i), ods_aop_slot(op, i), op->p[i].pre_from,
					   true)))
			return rc;
		if (i + op->k < op->n && (rc = prep_piece(op, stream, i + op->k, queued)))
			return rc;
		if ((rc = acc->stream_mark(op->sdev, stream, op->progress, op->base + i + 1)))
			return rc;
	}
	return 0;
}

/* Part of the operation reached the stream and the rest could not (the
 * accelerator failed under us); no piece is in flight. Every piece whose
 * wait is queued and gate shut completes now with the error (result
 * published, gates open): the stream never waits on them. What is queued
 * may run later and still uses op, its staging and counter: kept in the
 * quarantine, never reused. The staged copies of a read then move zeros
 * (nothing queued writes its slots). */
static void op_cut(struct aop *op, int rc)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	if (op->stage && op->a.opcode == OPENDS_READ)
		memset(op->stage, 0, op->slot * op->k);
	__atomic_store_n(op->a.result, -(ssize_t)rc, __ATOMIC_RELEASE);
	ods_aop_published(op);
	for (unsigned i = 0; i < op->nq; i++)
		if (!op->p[i].opened)
			acc->gate_open(op->p[i].gate);
	atomic_store(&op->queued, 2);
	ods_aop_cut_end(op);
}

/* As op_cut, for a staged operation the dispatcher has (queue_body
 * failed): no more pieces start; those in flight end (reads end on their
 * own); the result is the error; the dispatcher then opens the gates still
 * shut as the stream gets to them (cut_step). The caller keeps its ref. */
static void op_cut_posted(struct aop *op, int rc)
{
	atomic_store(&op->cut, true);
	ods_aop_wake(op); /* the dispatcher must see it */
	ods_dispatch_kick();
	/* left once the dispatcher has seen it: the caller's reference, the
	 * stream's end */
	while (!atomic_load(&op->cut_seen) || atomic_load(&op->refs) > 2) {
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
	__atomic_store_n(op->a.result, -(ssize_t)rc, __ATOMIC_RELEASE);
	ods_aop_published(op);
	atomic_store(&op->cut_ready, true);
	ods_dispatch_kick();
}

static opends_error_t accel_enqueue(const char *fn, const struct ods_sargs *a, opends_stream_t stream)
{
	/* the device whose context runs the operation's commands: the
	 * stream's, which must be the buffer's (a stream of one device with a
	 * buffer of another is OPENDS_CONTEXT_MISMATCH; the NULL stream is
	 * taken on the buffer's device). The thread's current context does
	 * not matter (API.md, "Accelerator context — revised"). */
	/* the plan, from the values now; valid values also say what the
	 * buffer is, else the accelerator is asked */
	uint64_t t0 = ods_sst_now();
	struct ods_io io;
	size_t size = *a->size;
	bool valid = ods_io_prepare(&io, a->opcode, a->fh, a->buf, size, *a->file_offset, *a->buf_offset) == 0;
	bool plan = valid && size > 0 && io.mem == ODS_MEM_DEVICE;
	unsigned dev = 0, bdev = io.dev;
	enum ods_mem_kind kind = valid ? (enum ods_mem_kind)io.mem : ods_drv.accel->classify(a->buf, &bdev);
	if (kind == ODS_MEM_DEVICE && bdev >= ODS_MAX_DEVICES)
		return ods_err(OPENDS_CONTEXT_MISMATCH, 0); /* the detail set by classify */
	int src = ods_drv.accel->streams->stream_device(stream, kind, bdev, &dev);
	if (src)
		return ods_err(src, 0);
	int rc = ods_dispatch_start(ods_aop_poll);
	if (rc)
		return ods_err(rc, 0);
	bool write = a->opcode == OPENDS_WRITE;
	if (write)
		atomic_fetch_add(&ods_awrites, 1); /* ods_aop_free takes it back */
	/* Reads begin now, unless a stream write may be ahead of them, when
	 * their values are fixed (the stream's registration says so) or the
	 * stream has nothing queued: then it reaches the read now, and the
	 * values and the file are read now. Only on streams the library made
	 * (non-blocking): a blocking stream with nothing queued still waits
	 * for earlier work on CUDA's legacy default stream, which its query
	 * does not see (the coordinator's review of 6583cde). Otherwise the read would start
	 * only once the device ran its "reached" mark, which on a hardware
	 * queue shared with other streams' held waits comes late: 4096
	 * streams on CUDA's 8 queues kept ~8 reads in flight (the cold
	 * imagenetish stream leg at 0.65x the disk). */
	const struct ods_accel_streams *sacc = ods_drv.accel->streams;
	bool fixed, made;
	void *ast = ods_astream_track(stream, &fixed, &made);
	/* A staged read reads and copies only its bytes inside the file seen
	 * at the call, nothing of the target past EOF (which may end there,
	 * or be written by other work: rel's finding). A file of unknown size
	 * (a source without one, /proc) has no such end: it runs the general
	 * way, the backend filling the target up to where the file ends. */
	off_t fsize = plan && !write ? ods_handle_size(io.fh) : 0;
	if (fsize < 0)
		plan = false;
	size_t valid0 = !plan || write ? size
			: fsize <= io.off ? 0
			: (uint64_t)(fsize - io.off) < size ? (size_t)(fsize - io.off) : size;
	bool can_early = plan && !write && atomic_load(&ods_awrites) == 0;
	bool idle = false;
	if (can_early && made && idle_ok && sacc->stream_idle && (!fixed || direct_ok)) {
		/* what earlier direct operations hold was queued before the
		 * query: an idle stream is past their copies (given back before
		 * this one takes its staging: a small budget may hold one) */
		struct ods_held *held = ods_astream_held(ast);
		idle = sacc->stream_idle(dev, stream);
		if (idle)
			ods_held_release(held, true);
		else
			ods_astream_hold(ast, held, dev);
	}
	bool big = size >= BIG_OP;
	size_t piece = big ? big_piece : PIECE;
	size_t n = plan ? (size + piece - 1) / piece : 1;
	if (n > UINT_MAX / 2 || n > (SIZE_MAX - sizeof(struct aop)) / sizeof(struct piece))
		plan = false, n = 1; /* beyond any memory: let the general way say so */
	unsigned slots = big ? big_slots : SLOTS, k = n < slots ? (unsigned)n : slots, cls = 0;
	if (plan && !write && idle && caller_ok && n > QWIN) {
		caller_run(a, &io, ast, t0);
		return ods_ok();
	}
	size_t slot = ((size < piece ? size : piece) + ODS_ALIGN - 1) & ~(size_t)(ODS_ALIGN - 1);
	char *stage = NULL;
	bool over = false;
	if (plan && !(stage = ods_staging_take(slot * k, &cls))) {
		/* none free: staging held by direct reads whose streams are
		 * done with it first, before the pool pins more */
		ods_astreams_reclaim_old(4);
	}
	if (plan && !stage && !(stage = ods_staging_get(slot * k, &cls, &over)) && over) {
		/* staging held by direct reads on streams idle by now first */
		ods_astreams_reclaim();
		stage = ods_staging_get(slot * k, &cls, &over);
	}
	if (plan && !stage && over)
		plan = false, n = k = 1; /* past OPENDS_MAX_PINNED: the general way, which stays within it */
	struct aop *op = plan && !stage ? NULL : calloc(1, sizeof(*op) + n * sizeof(struct piece));
	if (!op) {
		if (ast)
			ods_astream_untrack(ast);
		if (stage)
			ods_staging_put(stage, cls);
		if (write)
			atomic_fetch_sub(&ods_awrites, 1);
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, plan && !stage ? "%s: out of pinned memory for staging"
										: "%s: out of memory", fn),
			       ENOMEM);
	}
	op->a = *a;
	op->sdev = dev;
	op->n = (unsigned)n;
	op->k = k;
	op->piece = piece;
	op->t_enq = t0;
	op->task.run = plan ? ods_aop_watch : ods_aop_run;
	pthread_mutex_init(&op->lock, NULL);
	atomic_init(&op->refs, 2);
	atomic_init(&op->short_at, LLONG_MAX);
	atomic_init(&op->ast, ast);
	bool early = plan && can_early && (fixed || idle);
	op->base = plan && !early;
	op->direct = early && idle && direct_ok && n <= k;
	if (plan) {
		op->dev = io.buf;
		op->size0 = size;
		op->boff0 = *a->buf_offset;
		op->valid0 = valid0;
		op->slot = slot;
		op->stage = stage;
		op->cls = cls;
		op->progress = op->direct ? NULL : ods_drv.accel->streams->counter_get();
		if (!op->progress && !op->direct) {
			ods_aop_free(op);
			return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "%s: out of pinned memory for staging", fn),
				       ENOMEM);
		}
		op->io = io; /* the plan's: op_begin compares the values with it */
		op->begun = early;
		if (early && !op->direct) /* its pieces start later, on the dispatcher */
			ods_aop_count(op, io.fh);
	}
	for (unsigned i = 0; i < op->n; i++) {
		struct piece *pc = &op->p[i];
		pc->op = op;
		pc->idx = i;
		pc->len = plan ? (i + 1 < op->n ? piece : size - (size_t)i * piece) : 0;
		size_t at = (size_t)i * piece;
		pc->pre_from = op->valid0 <= at ? 0 : op->valid0 - at < pc->len ? op->valid0 - at : pc->len;
	}
	ods_ainflight_add(1);
	bool queued;
	rc = queue_head(op, stream, &queued);
	if (!rc && op->direct) {
		if ((rc = queue_direct(op, stream, &queued))) {
			if (queued) {
				op_cut(op, rc); /* no piece started yet */
			} else {
				open_refused(op);
				ods_aop_put(op);
				ods_aop_put(op);
			}
			return ods_err(rc, 0);
		}
		/* the stream's end of it, held until the stream is past it */
		op->held.release = ods_aop_held_release;
		ods_astream_hold(ast, &op->held, dev);
		ods_aop_start_all(op);
		ods_aop_put(op);
		ods_sst_add(SST_DIRECT, 1);
		ods_sst_add(SST_ENQ, 1);
		ods_sst_since(SST_ENQ_NS, t0);
		return ods_ok();
	}
	if (rc && !queued) {
		ods_aop_put(op); /* nothing reached the stream: both references */
		ods_aop_put(op);
		return ods_err(rc, 0);
	}
	if (rc) {
		op_cut(op, rc);
		return ods_err(rc, 0);
	}
	bool posted = false;
	if ((rc = queue_body(op, stream, &queued, &posted))) {
		if (posted) {
			op_cut_posted(op, rc);
		} else if (!queued) {
			open_refused(op);
			ods_aop_put(op);
			ods_aop_put(op);
		} else {
			op_cut(op, rc);
		}
		return ods_err(rc, 0);
	}
	if (!plan)
		atomic_store(&op->queued, 1);
	ods_aop_put(op);
	ods_sst_add(SST_ENQ, 1);
	ods_sst_since(SST_ENQ_NS, t0);
	return ods_ok();
}

static void accel_fini(void)
{
	ods_astreams_fini(); /* waits for every operation */
	ods_dispatch_stop();
	ods_staging_fini();
	ods_sstats_print();
}

static int accel_init(void)
{
	ods_sstats_init();
	big_piece = BIG_PIECE, big_slots = BIG_SLOTS;
	const char *io = getenv("OPENDS_STREAM_IDLE");
	idle_ok = !(io && !strcmp(io, "0"));
	const char *dr = getenv("OPENDS_STREAM_DIRECT");
	direct_ok = !(dr && !strcmp(dr, "0"));
	const char *cr = getenv("OPENDS_STREAM_CALLER");
	caller_ok = !(cr && !strcmp(cr, "0"));
	unsigned mib, k;
	const char *v = getenv("OPENDS_STREAM_BIG");
	if (v && sscanf(v, "%u,%u", &mib, &k) == 2 && mib >= 1 && mib <= 256 && k >= 1 &&
	    (size_t)mib * k <= ODS_STAGE_MAX >> 20)
		big_piece = (size_t)mib << 20, big_slots = k;
	return 0; /* the dispatcher starts with the first operation */
}

static void accel_forget(void)
{
	ods_astreams_forget();
	ods_aop_forget();
	ods_dispatch_forget();
}

const struct ods_stream_engine ods_stream_accel = {
	.init = accel_init,
	.fini = accel_fini,
	.create = ods_astream_create,
	.destroy = ods_astream_destroy,
	.reg = ods_astream_reg,
	.dereg = ods_astream_dereg,
	.enqueue = accel_enqueue,
	.sync = ods_astream_sync,
	.forget = accel_forget,
};
