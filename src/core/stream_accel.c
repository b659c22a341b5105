/*
 * Stream-ordered I/O on the accelerator's own streams (cuda, hostdev's
 * simulated ones): each operation is a run of commands on the caller's
 * stream, so that nothing the stream waits for depends on device work
 * queued anywhere else (docs/stream-ordering.md). Device buffers move
 * through pinned staging in pieces: gates hold the stream until a piece is
 * read, copies on the stream move it, and a counter the stream writes
 * tells the dispatcher (stream_dispatch.c) how far it got. Values are read
 * when the stream gets there ("reached"), or at the call on streams
 * registered with every OPENDS_STREAM_FIXED_* flag, whose reads start then.
 * No host function per staged operation; a host buffer takes one.
 */
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stream.h"

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
/* OPENDS_STREAM_POST_FIRST=0 (test-only, A/B): reads with values taken at
 * the call start only once their first wait is queued, as before */
static bool post_first = true;
/* OPENDS_STREAM_IDLE=0 (test-only, A/B): no idle shortcut (no query per
 * operation; reads on streams not fixed start when the stream gets there) */
static bool idle_ok = true;

/* Stream writes enqueued and not yet ended: while there are any, no read
 * starts before its stream gets there, so it cannot overtake a write
 * queued ahead of it on some stream. */
static atomic_uint awrites;

/* -- operations -- */

struct piece {
	struct aop *op;
	unsigned idx;
	void *gate;         /* holds the stream until the piece is done */
	size_t len;         /* bytes of the planned range it moves */
	size_t pre_from;    /* reads: bytes at and past this were copied from
			       the device into the slot first (past EOF) */
	struct ods_io io;
	struct piece *wnext; /* waiting for the general operation */
	bool opened;         /* its gate was opened (never twice: a passed
				gate may already serve another operation) */
	bool lost;           /* its wait was refused: the layer keeps the gate */
};

/* An operation on an accelerator stream, planned at the call from the
 * values then. Values read when reached that differ from the plan (or a
 * file now shorter, or invalid values) run the general way: the backend
 * moves the bytes, and each piece snapshots the device range into its
 * slot, so the planned copies change nothing ("mirror"). Host buffers have
 * no plan: the general way, one piece of no bytes. */
struct aop {
	/* what the dispatcher reads for every operation on each round, together */
	struct aop *wnext;    /* the dispatcher's watch list; the quarantine */
	void *progress;       /* staged: the stream writes base + i + 1 after
				 piece i's copy */
	unsigned base;        /* 1: the stream writes 1 when it reaches the op
				 (arguments read then); 0: read at the call */
	unsigned seen;        /* the counter as the dispatcher last read it */
	unsigned started;     /* pieces started */
	bool begun;           /* arguments read, first pieces started */
	unsigned n, k;        /* pieces; slots */
	atomic_uint finished;
	atomic_bool parked;   /* off the watch list until a piece ends (op_wake) */
	struct aop *rnext;    /* the woken stack */
	atomic_bool cut;      /* queueing failed after the dispatcher got it
				 (op_cut_posted): the caller: stop starting
				 pieces */
	struct ods_sargs a;
	struct ods_io io;     /* validated: at the call (fixed) or when reached */
	struct ods_task task; /* the host function's (no plan), or the hand-over
				 to the dispatcher (staged) */
	atomic_int queued;    /* no plan: 0 queueing, 1 queued whole, 2 cut */
	unsigned sdev;        /* the device whose context its commands run in */
	char *dev;            /* planned device range */
	size_t size0;
	off_t boff0;
	size_t valid0;        /* reads: planned bytes inside the file */
	char *stage;          /* NULL: no plan */
	unsigned cls;
	unsigned nq;          /* pieces whose waits are on the stream */
	size_t piece, slot;   /* bytes per piece; per slot */
	pthread_mutex_t lock;
	bool mirror, general_done;
	struct piece *waiting;
	ssize_t result;       /* the general operation's */
	atomic_uint refs;     /* the caller enqueuing it; the stream's end;
				 each piece started and not yet finished */
	/* after a cut */
	atomic_bool cut_seen; /* the dispatcher: none will start */
	atomic_bool cut_ready; /* the caller: none in flight, result published */
	unsigned cut_next;    /* the dispatcher: next gate to open */
	void *_Atomic ast;     /* its stream's entry (ods_astream_track), until
				 the result is out (op_published) */
	atomic_llong short_at; /* reads: lowest op offset where data ended */
	atomic_long err;
	uint64_t t_enq, t_pub; /* OPENDS_STREAM_STATS: the call, the result out */
	bool armed_late;      /* reads started before its first wait was queued */
	atomic_bool arm;      /* ... that wait is queued, or the last piece ended */
	bool refused;         /* ... and that wait was refused: no result */
	struct piece p[];
};

static struct aop *watch;      /* staged operations the dispatcher watches (its own) */
/* Operations that cannot move before a piece ends (all started pieces
 * reading, no copy pending) are parked off the watch list, so a round does
 * not read thousands of counters; the piece that ends pushes its operation
 * on the woken stack (op_wake) and the dispatcher takes it back. */
static struct aop *_Atomic woken;
static unsigned nparked;       /* the dispatcher's: parked, not yet back */
static struct aop *quarantine; /* cut operations (quarantine_lock): kept, never reused */
static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;

static char *slot_of(struct aop *op, unsigned idx)
{
	return op->stage + (size_t)(idx % op->k) * op->slot;
}

static char *dev_of(struct aop *op, unsigned idx)
{
	return op->dev + (size_t)idx * op->piece;
}

/* The result is out: a sync of the stream need not wait for op any more
 * (once, whichever path publishes it first). */
static void op_published(struct aop *op)
{
	void *t = atomic_exchange(&op->ast, NULL);
	if (t)
		ods_astream_untrack(t);
}

static void op_free(struct aop *op)
{
	op_published(op); /* ended without a result (nothing reached the stream) */
	if (op->stage)
		ods_staging_put(op->stage, op->cls);
	if (op->progress)
		ods_drv.accel->streams->counter_put(op->progress);
	if (op->a.opcode == OPENDS_WRITE)
		atomic_fetch_sub(&awrites, 1);
	pthread_mutex_destroy(&op->lock);
	free(op);
}

/* Drop a reference; the last one ends the operation. */
static void op_put(struct aop *op)
{
	if (atomic_fetch_sub(&op->refs, 1) != 1)
		return;
	op_free(op);
	ods_ainflight_add(-1);
}

/* A piece of op ended, or op was cut: hand op back if it is parked. The
 * dispatcher sets parked, then reads finished and cut; a piece adds to
 * finished, then swaps parked: one sees the other (seq_cst atomics). */
static void op_wake(struct aop *op)
{
	if (!atomic_exchange(&op->parked, false))
		return;
	struct aop *h = atomic_load(&woken);
	do
		op->rnext = h;
	while (!atomic_compare_exchange_weak(&woken, &h, op));
	ods_dispatch_kick();
}

/* Every piece is over and the result can go out: publish it and open the
 * last gate. Once it is open the stream may copy the last piece and write
 * the final count, and the dispatcher may then drop the stream's
 * reference. */
static void publish(struct aop *op)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	unsigned n = op->n;
	ssize_t r;
	if (op->mirror) {
		r = op->result;
	} else if ((r = atomic_load(&op->err)) == 0) {
		/* a read ends where the file ended; but the bytes a truncation
		 * took after the call, up to the size planned then, were written
		 * as zeros (piece_done, piece_start) and count as read, as the
		 * sync paths count them: nothing past the result is written */
		long long end = atomic_load(&op->short_at);
		if (op->a.opcode == OPENDS_READ && end < (long long)op->valid0)
			end = (long long)op->valid0;
		r = (long long)op->size0 < end ? (ssize_t)op->size0 : (ssize_t)end;
	}
	/* atomic: a caller may look at it while the stream runs */
	__atomic_store_n(op->a.result, r, __ATOMIC_RELEASE);
	op->p[n - 1].opened = true;
	acc->gate_open(op->p[n - 1].gate);
	/* after the gate: a sync it wakes then finds only the last copy left
	 * on the stream (the stream's entry stays until then, even if the
	 * stream is destroyed meanwhile) */
	op_published(op);
	if (op->t_enq) {
		op->t_pub = ods_sst_now();
		ods_sst_add(SST_PUB_NS, op->t_pub - op->t_enq);
	}
	/* without staging, nothing queued after the gate needs op: this is
	 * the stream's end of it */
	if (!op->stage)
		op_put(op);
}

/* A piece is over. Each opens its gate, except the last piece's, which
 * opens when every piece is over and the result is published; the
 * piece's own reference keeps op until the end of this function. */
static void piece_finish(struct aop *op, struct piece *pc)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	unsigned n = op->n;
	if (pc->idx != n - 1) {
		pc->opened = true;
		acc->gate_open(pc->gate);
	}
	bool last = atomic_fetch_add(&op->finished, 1) + 1 == n;
	if (op->stage)
		op_wake(op); /* a copy can run now; op is the piece's until op_put */
	/* reads started before the first wait was queued (post_first): the
	 * result goes out once that wait is queued too, by whichever of the
	 * two comes second (a refused call publishes none) */
	if (last && (!op->armed_late || atomic_exchange(&op->arm, true)))
		publish(op);
	ods_dispatch_kick(); /* a copy can run: a counter moves soon */
	op_put(op);          /* the piece's */
}

/* Mirror mode: the general operation is over; the slot gets what the
 * device range holds now, so the planned copy changes nothing. */
static void mirror_finish(struct aop *op, struct piece *pc)
{
	if (op->stage && op->a.opcode == OPENDS_READ && pc->len)
		ods_drv.accel->copy_to_host(slot_of(op, pc->idx), dev_of(op, pc->idx), pc->len);
	piece_finish(op, pc);
}

static void general_done(struct ods_io *io)
{
	struct aop *op = io->owner;
	op->result = io->result;
	pthread_mutex_lock(&op->lock);
	op->general_done = true;
	struct piece *w = op->waiting;
	op->waiting = NULL;
	pthread_mutex_unlock(&op->lock);
	for (struct piece *n; w; w = n) {
		n = w->wnext;
		mirror_finish(op, w);
	}
}

/* The stream reached the operation: read the arguments, and run the plan
 * or the general way. */
static void op_begin(struct aop *op)
{
	size_t size;
	off_t foff, boff;
	ssize_t r;
	if (op->stage && __atomic_load_n(op->a.size, __ATOMIC_ACQUIRE) == op->size0 &&
	    __atomic_load_n(op->a.file_offset, __ATOMIC_ACQUIRE) == op->io.off &&
	    __atomic_load_n(op->a.buf_offset, __ATOMIC_ACQUIRE) == op->boff0 &&
	    ods_handle_lookup(op->a.fh) == op->io.fh) {
		/* the values of the plan, on the same handle: checked at the
		 * call (op->io), so the accelerator is not asked again what
		 * the buffer is (a driver call per small operation on the one
		 * dispatcher thread) */
		size = op->size0, foff = op->io.off, boff = op->boff0, r = 0;
	} else {
		r = ods_sargs_read(&op->a, &op->io, &size, &foff, &boff);
	}
	if (op->stage && r == 0 && size == op->size0 && boff == op->boff0 && op->io.mem == ODS_MEM_DEVICE &&
	    (op->a.opcode == OPENDS_WRITE || ods_handle_valid(op->io.fh, foff, size) >= op->valid0))
		return;
	op->mirror = true;
	if (r < 0 || size == 0) {
		op->result = r;
		op->general_done = true;
		return;
	}
	op->io.owner = op;
	op->io.done = general_done;
	ods_io_submit(&op->io, false);
}

static void note_err(struct aop *op, long e)
{
	long z = 0;
	atomic_compare_exchange_strong(&op->err, &z, e);
}

static void piece_done(struct ods_io *io)
{
	struct piece *pc = io->owner;
	struct aop *op = pc->op;
	ssize_t r = io->result;
	/* a leaf (ods.h): the handle's count drops before the result is out
	 * and a sync woken, so that a caller that deregisters the file right
	 * after its sync (the imagenetish stream legs, per file) finds it
	 * idle instead of waiting out this thread; nothing below touches
	 * the handle */
	atomic_fetch_sub_explicit(&io->fh->inflight, 1, memory_order_release);
	if (r < 0) {
		note_err(op, (long)r);
		/* leave the device range as it was: snapshot it */
		if (op->a.opcode == OPENDS_READ)
			ods_drv.accel->copy_to_host(slot_of(op, pc->idx), dev_of(op, pc->idx), pc->len);
	} else if ((size_t)r < pc->len && op->a.opcode == OPENDS_READ) {
		long long at = (long long)pc->idx * (long long)op->piece + r, cur = atomic_load(&op->short_at);
		while (at < cur && !atomic_compare_exchange_weak(&op->short_at, &cur, at))
			;
		/* the file ended before the planned EOF (it shrank meanwhile):
		 * no stale staging bytes reach the device */
		if ((size_t)r < pc->pre_from)
			memset(slot_of(op, pc->idx) + r, 0, pc->pre_from - (size_t)r);
	}
	piece_finish(op, pc);
}

/* Start one piece (on the dispatcher, or for fixed arguments the caller). */
static void piece_start(struct aop *op, struct piece *pc)
{
	atomic_fetch_add(&op->refs, 1); /* piece_finish drops it */
	if (op->mirror) {
		pthread_mutex_lock(&op->lock);
		bool done = op->general_done;
		if (!done) {
			pc->wnext = op->waiting;
			op->waiting = pc;
		}
		pthread_mutex_unlock(&op->lock);
		if (done)
			mirror_finish(op, pc);
		return;
	}
	size_t at = (size_t)pc->idx * op->piece;
	bool read = op->a.opcode == OPENDS_READ;
	if (atomic_load(&op->err) || (read && (long long)at >= atomic_load(&op->short_at))) {
		if (read && atomic_load(&op->err))
			ods_drv.accel->copy_to_host(slot_of(op, pc->idx), op->dev + at, pc->len);
		else if (read)
			memset(slot_of(op, pc->idx), 0, pc->pre_from);
		piece_finish(op, pc);
		return;
	}
	/* a read started at the call stops at the EOF planned then: the
	 * stream may still be copying the device's own bytes past it into
	 * the slot (prep_piece), so data the file gained since must not go
	 * there; the pieces wholly past it read nothing */
	size_t len = read && !op->base ? pc->pre_from : pc->len;
	if (!len) {
		long long cur = atomic_load(&op->short_at);
		while ((long long)at < cur && !atomic_compare_exchange_weak(&op->short_at, &cur, (long long)at))
			;
		piece_finish(op, pc);
		return;
	}
	struct ods_io *io = &pc->io;
	memset(io, 0, sizeof(*io));
	io->fh = op->io.fh;
	io->buf = slot_of(op, pc->idx);
	io->size = len;
	io->off = op->io.off + (off_t)at;
	io->opcode = op->io.opcode;
	io->mem = ODS_MEM_HOST;
	io->owner = pc;
	io->done = piece_done;
	io->leaf = true; /* piece_done drops the handle's count */
	/* the dispatcher serves every stream: never wait for room here */
	ods_io_submit(io, false);
}

/* Begin an operation (on the dispatcher): read its arguments unless they
 * were read at the call, and start its first pieces; the dispatcher starts
 * the others as the stream's counter says their slots are free. */
static void op_start(struct aop *op)
{
	if (!op->begun) {
		op_begin(op);
		op->begun = true;
		unsigned k = op->k; /* without a plan, op is gone after its piece */
		op->started = k;
		for (unsigned i = 0; i < k; i++)
			piece_start(op, &op->p[i]);
	}
}

/* The host function of an operation without a plan (no staging). */
static void op_run(struct ods_task *t)
{
	struct aop *op = (struct aop *)((char *)t - offsetof(struct aop, task));
	int q;
	while ((q = atomic_load(&op->queued)) == 0)
		sched_yield(); /* the caller is queueing its one wait */
	if (q == 2)
		return; /* cut: its gate is open and its result published */
	op_start(op); /* op may be gone now */
}

/* A staged operation's first wait is queued: watch it from now on (freed
 * only by the dispatcher, this thread). A read whose values were taken at
 * the call starts its first pieces here, not on the caller: its caller
 * bounds the rate of small operations, and a start may wake a worker. */
static void op_watch(struct ods_task *t)
{
	struct aop *op = (struct aop *)((char *)t - offsetof(struct aop, task));
	if (!op->base && !op->started && !atomic_load(&op->cut)) {
		op->started = op->k;
		for (unsigned i = 0; i < op->k; i++)
			piece_start(op, &op->p[i]);
	}
	op->wnext = watch;
	watch = op;
}

/* A cut operation on the dispatcher (op_cut_posted): once the caller says
 * nothing is in flight, open the gates still shut in order, each once the
 * stream is past the copies before it, its slot's part inside the file
 * zeroed first: the queued copy moves zeros, not an earlier piece's data.
 * True when every queued wait is open. */
static bool cut_step(struct aop *op)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	atomic_store(&op->cut_seen, true);
	if (!atomic_load(&op->cut_ready))
		return false;
	uint32_t m = acc->counter_read(op->progress);
	while (op->cut_next < op->nq) {
		struct piece *pc = &op->p[op->cut_next];
		if (!pc->opened) {
			if (m < op->base + op->cut_next)
				return false;
			if (op->a.opcode == OPENDS_READ)
				memset(slot_of(op, pc->idx), 0, pc->pre_from);
			pc->opened = true;
			acc->gate_open(pc->gate);
		}
		op->cut_next++;
	}
	return true;
}

/* The end of a cut operation (op_cut, cut_step): gates whose waits never
 * reached the stream go back; op stays in the quarantine for good, since
 * queued commands may still use its staging and counter. */
static void cut_end(struct aop *op)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	for (unsigned i = op->nq; i < op->n; i++)
		if (op->p[i].gate && !op->p[i].lost)
			acc->gate_put(op->p[i].gate), op->p[i].gate = NULL;
	if (op->a.opcode == OPENDS_WRITE)
		atomic_fetch_sub(&awrites, 1); /* it writes nothing */
	pthread_mutex_lock(&quarantine_lock);
	op->wnext = quarantine;
	quarantine = op;
	pthread_mutex_unlock(&quarantine_lock);
	ods_ainflight_add(-1);
}

/* The dispatcher's round over its watch list: begin the operations the
 * streams reached, start the pieces whose slots the stream has freed, end
 * the operations it is done with. */
static int poll_watch(void)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	for (struct aop *r = atomic_exchange(&woken, NULL), *next; r; r = next) {
		next = r->rnext;
		r->wnext = watch;
		watch = r;
		nparked--;
	}
	if (!watch)
		return nparked ? -2 : -1; /* parked ones move after a kick */
	int moved = 0;
	bool quiet = true; /* no counter can move before a piece ends (a kick) */
	ods_sst_add(SST_ROUNDS, 1);
	for (struct aop **pp = &watch; *pp;) {
		struct aop *op = *pp;
		ods_sst_add(SST_VISITS, 1);
		if (atomic_load(&op->cut)) {
			quiet = false;
			if (cut_step(op)) {
				*pp = op->wnext;
				cut_end(op);
				continue;
			}
			pp = &op->wnext;
			continue;
		}
		uint32_t m = acc->counter_read(op->progress);
		if (m == op->seen && op->begun) {
			/* copies of ended pieces are on their way */
			if (atomic_load(&op->finished) > m - op->base) {
				quiet = false;
				pp = &op->wnext;
				continue;
			}
			/* nothing moves before a piece ends: park op */
			atomic_store(&op->parked, true);
			if ((atomic_load(&op->finished) > m - op->base || atomic_load(&op->cut)) &&
			    atomic_exchange(&op->parked, false)) {
				quiet = false; /* one ended meanwhile: keep it */
				pp = &op->wnext;
				continue;
			}
			/* parked, or already on the woken stack */
			*pp = op->wnext;
			nparked++;
			continue;
		}
		op->seen = m;
		if (m < op->base) { /* not reached yet: the stream may get there any time */
			quiet = false;
			pp = &op->wnext;
			continue;
		}
		moved = 1;
		op_start(op);
		unsigned done = m - op->base;
		unsigned can = done + op->k < op->n ? done + op->k : op->n;
		while (op->started < can) {
			unsigned i = op->started++;
			piece_start(op, &op->p[i]);
		}
		if (done == op->n) {
			*pp = op->wnext;
			ods_sst_since(SST_END_NS, op->t_pub);
			op_put(op);
			continue;
		}
		pp = &op->wnext;
	}
	return moved ? 1 : quiet ? -2 : 0;
}

/* Queue what piece i needs before its file I/O starts: its gate and, for
 * a read, the copy of the part past EOF from the device into its slot; for
 * a write, the copy of the piece into its slot. */
static int prep_piece(struct aop *op, void *stream, unsigned i, bool *queued)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	struct piece *pc = &op->p[i];
	pc->gate = acc->gate_get();
	if (!pc->gate)
		return ods_fail(OPENDS_NOMEM_ERROR, "out of memory for a stream gate");
	int rc = 0;
	bool copy = false;
	char *dev = dev_of(op, i);
	if (op->stage && op->a.opcode == OPENDS_READ && pc->pre_from < pc->len) {
		copy = true;
		rc = acc->stream_copy(op->sdev, stream, slot_of(op, i) + pc->pre_from, dev + pc->pre_from,
				      pc->len - pc->pre_from, false);
	} else if (op->stage && op->a.opcode == OPENDS_WRITE) {
		copy = true;
		rc = acc->stream_copy(op->sdev, stream, slot_of(op, i), dev, pc->len, false);
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

/* How far the caller queues ahead of the stream: piece i is queued once
 * the stream copied piece i - QWIN, the caller sleeping meanwhile. CUDA
 * blocks a call on a full stream queue by spinning (an 8 GiB read, ~2 000
 * commands: 0.42 CPU-s/GiB cold). QWIN pieces (~520 commands) are meant to
 * fit, so operations up to 2 GiB return at once as before. No new wait:
 * if nothing moves for 200 ms (a held stream, a slow disk, a failed
 * accelerator), it queues on and the accelerator blocks or fails it. */
#define QWIN 128u

/* The waits, copies, later pieces' gates and counts; *posted: op_launch
 * ran. */
static int queue_body(struct aop *op, void *stream, bool *queued, bool *posted)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	bool read = op->a.opcode == OPENDS_READ;
	int rc;
	if (op->stage && !op->base && post_first) {
		/* values read at the call: its reads start now, before its
		 * first wait reaches the stream, which may otherwise get there
		 * first and find the gate shut (a device polling a shut gate
		 * holds its hardware queue for tens of microseconds) */
		op->armed_late = true;
		op_launch(op);
		*posted = true;
	}
	for (unsigned i = 0; i < op->n; i++) {
		if (*posted && i >= QWIN) /* piece i - QWIN copied */
			ods_counter_wait(op->progress, op->base + (i - QWIN) + 1, &op->finished, 200);
		if ((rc = acc->stream_wait(op->sdev, stream, op->p[i].gate))) {
			/* the layer keeps the gate; a piece started at the
			 * call may still open it */
			op->p[i].lost = true;
			op->refused = i == 0 && op->armed_late && !*queued;
			return rc;
		}
		if (i == 0 && op->armed_late && atomic_exchange(&op->arm, true))
			publish(op); /* its pieces were all over already */
		*queued = true;
		op->nq = i + 1;
		if (!op->stage)
			continue;
		if (i == 0 && !*posted) {
			op_launch(op);
			*posted = true;
		}
		if (read &&
		    (rc = acc->stream_copy(op->sdev, stream, dev_of(op, i), slot_of(op, i), op->p[i].len, true)))
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
 * quarantine, never reused. The staged copies then move zeros, unless the
 * plan reads past EOF (queued device-to-slot copies may fill the slots). */
static void op_cut(struct aop *op, int rc)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	if (op->stage && op->a.opcode == OPENDS_READ && op->valid0 >= op->size0)
		memset(op->stage, 0, op->slot * op->k);
	__atomic_store_n(op->a.result, -(ssize_t)rc, __ATOMIC_RELEASE);
	op_published(op);
	for (unsigned i = 0; i < op->nq; i++)
		if (!op->p[i].opened)
			acc->gate_open(op->p[i].gate);
	atomic_store(&op->queued, 2);
	cut_end(op);
}

/* As op_cut, for a staged operation the dispatcher has (queue_body
 * failed): no more pieces start; those in flight end (reads end on their
 * own); the result is the error; the dispatcher then opens the gates still
 * shut as the stream gets to them (cut_step). The caller keeps its ref. */
static void op_cut_posted(struct aop *op, int rc)
{
	atomic_store(&op->cut, true);
	op_wake(op); /* the dispatcher must see it */
	ods_dispatch_kick();
	/* left once the dispatcher has seen it: the caller's reference, the
	 * stream's end */
	while (!atomic_load(&op->cut_seen) || atomic_load(&op->refs) > 2) {
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
	if (!op->refused) /* nothing of it reached the stream: no result */
		__atomic_store_n(op->a.result, -(ssize_t)rc, __ATOMIC_RELEASE);
	op_published(op);
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
	int rc = ods_dispatch_start(poll_watch);
	if (rc)
		return ods_err(rc, 0);
	bool write = a->opcode == OPENDS_WRITE;
	if (write)
		atomic_fetch_add(&awrites, 1); /* op_free takes it back */
	bool big = size >= BIG_OP;
	size_t piece = big ? big_piece : PIECE;
	size_t n = plan ? (size + piece - 1) / piece : 1;
	if (n > UINT_MAX / 2 || n > (SIZE_MAX - sizeof(struct aop)) / sizeof(struct piece))
		plan = false, n = 1; /* beyond any memory: let the general way say so */
	unsigned slots = big ? big_slots : SLOTS, k = n < slots ? (unsigned)n : slots, cls = 0;
	size_t slot = ((size < piece ? size : piece) + ODS_ALIGN - 1) & ~(size_t)(ODS_ALIGN - 1);
	char *stage = NULL;
	bool over = false;
	if (plan && !(stage = ods_staging_get(slot * k, &cls, &over)) && over)
		plan = false, n = k = 1; /* past OPENDS_MAX_PINNED: the general way, which stays within it */
	struct aop *op = plan && !stage ? NULL : calloc(1, sizeof(*op) + n * sizeof(struct piece));
	if (!op) {
		if (stage)
			ods_staging_put(stage, cls);
		if (write)
			atomic_fetch_sub(&awrites, 1);
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
	op->task.run = plan ? op_watch : op_run;
	pthread_mutex_init(&op->lock, NULL);
	atomic_init(&op->refs, 2);
	atomic_init(&op->short_at, LLONG_MAX);
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
	atomic_init(&op->ast, ods_astream_track(stream, &fixed, &made));
	size_t valid0 = !plan || write ? size : ods_handle_valid(io.fh, *a->file_offset, size);
	/* ... and only where the file's size is known: a read started early
	 * stops at the end seen at the call (piece_start), and a file of
	 * unknown size (a source, /proc) has none, so it would read nothing */
	bool early = plan && !write && atomic_load(&awrites) == 0 &&
		     (fixed || (made && idle_ok && sacc->stream_idle && sacc->stream_idle(dev, stream))) &&
		     (valid0 == size || ods_handle_size(io.fh) >= 0);
	op->base = plan && !early;
	if (plan) {
		op->dev = io.buf;
		op->size0 = size;
		op->boff0 = *a->buf_offset;
		op->valid0 = valid0;
		op->slot = slot;
		op->stage = stage;
		op->cls = cls;
		op->progress = ods_drv.accel->streams->counter_get();
		if (!op->progress) {
			op_free(op);
			return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "%s: out of pinned memory for staging", fn),
				       ENOMEM);
		}
		op->io = io; /* the plan's: op_begin compares the values with it */
		op->begun = early;
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
	if (rc && !queued) {
		op_put(op); /* nothing reached the stream: both references */
		op_put(op);
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
			op_put(op);
			op_put(op);
		} else {
			op_cut(op, rc);
		}
		return ods_err(rc, 0);
	}
	if (!plan)
		atomic_store(&op->queued, 1);
	op_put(op);
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
	const char *pf = getenv("OPENDS_STREAM_POST_FIRST");
	post_first = !(pf && !strcmp(pf, "0"));
	const char *io = getenv("OPENDS_STREAM_IDLE");
	idle_ok = !(io && !strcmp(io, "0"));
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
	quarantine_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	watch = NULL;
	atomic_store(&woken, NULL);
	nparked = 0;
	quarantine = NULL;
	atomic_store(&awrites, 0);
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
