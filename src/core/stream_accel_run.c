/*
 * The accelerator stream engine's operations once queued (stream_accel.c
 * queues them on the caller's stream): their pieces' reads and writes
 * through pinned slots, their results and gates, the dispatcher's poll of
 * the counters the streams write (stream_dispatch.c runs it), and the
 * operations cut short by a failing accelerator (docs/stream-ordering.md).
 */
#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "stream_aop.h"

/* Stream writes enqueued and not yet ended: while there are any, no read
 * starts before its stream gets there, so it cannot overtake a write
 * queued ahead of it on some stream. */
atomic_uint ods_awrites;

static struct aop *watch;      /* staged operations the dispatcher watches (its own) */
/* Operations that cannot move before a piece ends (all started pieces
 * reading, no copy pending) are parked off the watch list, so a round does
 * not read thousands of counters; the piece that ends pushes its operation
 * on the woken stack (ods_aop_wake) and the dispatcher takes it back. */
static struct aop *_Atomic woken;
static unsigned nparked;       /* the dispatcher's: parked, not yet back */
static struct aop *quarantine; /* cut operations (quarantine_lock): kept, never reused */
static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;

/* The result is out: a sync of the stream need not wait for op any more
 * (once, whichever path publishes it first). */
void ods_aop_published(struct aop *op)
{
	void *t = atomic_exchange(&op->ast, NULL);
	if (t)
		ods_astream_untrack(t);
}

void ods_aop_count(struct aop *op, struct ods_handle *h)
{
	atomic_fetch_add_explicit(&h->inflight, 1, memory_order_relaxed);
	atomic_store(&op->counted, h);
}

void ods_aop_uncount(struct aop *op)
{
	struct ods_handle *h = atomic_exchange(&op->counted, NULL);
	if (h)
		atomic_fetch_sub_explicit(&h->inflight, 1, memory_order_release);
}

void ods_aop_free(struct aop *op)
{
	ods_aop_uncount(op);
	ods_aop_published(op); /* ended without a result (nothing reached the stream) */
	if (op->stage)
		ods_staging_put(op->stage, op->cls);
	if (op->progress)
		ods_drv.accel->streams->counter_put(op->progress);
	if (op->a.opcode == OPENDS_WRITE)
		atomic_fetch_sub(&ods_awrites, 1);
	pthread_mutex_destroy(&op->lock);
	free(op);
}

/* Drop a reference; the last one ends the operation (one the stream may
 * still use, keep: into the quarantine, never freed). */
void ods_aop_put(struct aop *op)
{
	if (atomic_fetch_sub(&op->refs, 1) != 1)
		return;
	if (atomic_load(&op->keep)) {
		ods_aop_published(op);
		pthread_mutex_lock(&quarantine_lock);
		op->wnext = quarantine;
		quarantine = op;
		pthread_mutex_unlock(&quarantine_lock);
	} else {
		ods_aop_free(op);
	}
	ods_ainflight_add(-1);
}

/* A direct operation's stream is past its copies (past), or that will
 * never be known: the stream's end of it (ods_astream_hold). */
void ods_aop_held_release(struct ods_held *h, bool past)
{
	struct aop *op = (struct aop *)((char *)h - offsetof(struct aop, held));
	if (!past)
		atomic_store(&op->keep, true);
	ods_aop_put(op);
}

/* A piece of op ended, or op was cut: hand op back if it is parked. The
 * dispatcher sets parked, then reads finished and cut; a piece adds to
 * finished, then swaps parked: one sees the other (seq_cst atomics). */
void ods_aop_wake(struct aop *op)
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
void ods_aop_publish(struct aop *op)
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
	if (op->t_enq) { /* (before the gate: the dispatcher reads t_pub once the op is out) */
		op->t_pub = ods_sst_now();
		ods_sst_add(SST_PUB_NS, op->t_pub - op->t_enq);
	}
	acc->gate_open(op->p[n - 1].gate);
	/* after the gate: a sync it wakes then finds only the last copy left
	 * on the stream (the stream's entry stays until then, even if the
	 * stream is destroyed meanwhile). A direct operation's last piece
	 * wakes it itself (piece_finish) */
	if (op->direct)
		return;
	ods_aop_published(op);
	/* without staging, nothing queued after the gate needs op: this is
	 * the stream's end of it */
	if (!op->stage)
		ods_aop_put(op);
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
	if (last) /* before the result is out: a deregister after the sync finds the handle idle */
		ods_aop_uncount(op);
	if (op->stage && !op->direct)
		ods_aop_wake(op); /* a copy can run now; op is the piece's until ods_aop_put */
	if (last && op->direct) {
		/* the piece's reference goes before a sync is woken: the sync
		 * gives the staging back with the stream's end (held), which it
		 * then frees at once, not this thread a moment after the sync
		 * returned (a small budget then found it taken) */
		ods_aop_publish(op);
		void *t = atomic_exchange(&op->ast, NULL);
		ods_aop_put(op); /* op may be gone */
		if (t)
			ods_astream_untrack(t);
		return;
	}
	if (last)
		ods_aop_publish(op);
	if (!op->direct) /* (a direct one's copies are queued already: nothing to watch) */
		ods_dispatch_kick(); /* a copy can run: a counter moves soon */
	ods_aop_put(op);          /* the piece's */
}

/* Mirror mode: the general operation is over; the slot gets what the
 * device range holds now, so the planned copy changes nothing. */
static void mirror_finish(struct aop *op, struct piece *pc)
{
	if (op->stage && op->a.opcode == OPENDS_READ && pc->pre_from)
		ods_drv.accel->copy_to_host(ods_aop_slot(op, pc->idx), ods_aop_dev(op, pc->idx), pc->pre_from);
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
		 * dispatcher thread). Held by the look-up (op_start's scope),
		 * then counted for the pieces the dispatcher starts later */
		size = op->size0, foff = op->io.off, boff = op->boff0, r = 0;
		ods_aop_count(op, op->io.fh);
	} else {
		r = ods_sargs_read(&op->a, &op->io, &size, &foff, &boff);
	}
	if (op->stage && r == 0 && size == op->size0 && boff == op->boff0 && op->io.mem == ODS_MEM_DEVICE &&
	    (op->a.opcode == OPENDS_WRITE || ods_handle_valid(op->io.fh, foff, size) == op->valid0))
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
		if (op->a.opcode == OPENDS_READ && pc->pre_from)
			ods_drv.accel->copy_to_host(ods_aop_slot(op, pc->idx), ods_aop_dev(op, pc->idx), pc->pre_from);
	} else if ((size_t)r < pc->len && op->a.opcode == OPENDS_READ) {
		long long at = (long long)pc->idx * (long long)op->piece + r, cur = atomic_load(&op->short_at);
		while (at < cur && !atomic_compare_exchange_weak(&op->short_at, &cur, at))
			;
		/* the file ended before the planned EOF (it shrank meanwhile):
		 * no stale staging bytes reach the device */
		if ((size_t)r < pc->pre_from)
			memset(ods_aop_slot(op, pc->idx) + r, 0, pc->pre_from - (size_t)r);
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
		if (read && atomic_load(&op->err) && pc->pre_from)
			ods_drv.accel->copy_to_host(ods_aop_slot(op, pc->idx), op->dev + at, pc->pre_from);
		else if (read)
			memset(ods_aop_slot(op, pc->idx), 0, pc->pre_from);
		piece_finish(op, pc);
		return;
	}
	/* a read stops at the EOF seen at the call: only the bytes before it
	 * are copied to the device (nothing past EOF is read from or written
	 * to the target: it may end there, or another stream may write it);
	 * a file longer by the time the stream reached the read ran the
	 * general way (op_begin); the pieces wholly past it read nothing */
	size_t len = read ? pc->pre_from : pc->len;
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
	io->buf = ods_aop_slot(op, pc->idx);
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
	/* the handle looked up is held until its requests are counted (rel's
	 * reuse_stream: a deregister and a new registration in between reused
	 * the struct, and the read reached the new file) */
	ODS_HOLD_SCOPE();
	if (!op->begun) {
		op_begin(op);
		op->begun = true;
		unsigned k = op->k; /* without a plan, op is gone after its piece */
		op->started = k;
		for (unsigned i = 0; i < k; i++)
			piece_start(op, &op->p[i]);
	}
}

/* A direct operation, queued whole: every piece starts now, on the
 * caller (its slots are all its own: n <= k). */
void ods_aop_start_all(struct aop *op)
{
	unsigned n = op->n;
	op->started = n;
	for (unsigned i = 0; i < n; i++)
		piece_start(op, &op->p[i]);
}

/* The host function of an operation without a plan (no staging). */
void ods_aop_run(struct ods_task *t)
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
void ods_aop_watch(struct ods_task *t)
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
				memset(ods_aop_slot(op, pc->idx), 0, pc->pre_from);
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
void ods_aop_cut_end(struct aop *op)
{
	const struct ods_accel_streams *acc = ods_drv.accel->streams;
	ods_aop_uncount(op); /* no piece in flight */
	for (unsigned i = op->nq; i < op->n; i++)
		if (op->p[i].gate && !op->p[i].lost)
			acc->gate_put(op->p[i].gate), op->p[i].gate = NULL;
	if (op->a.opcode == OPENDS_WRITE)
		atomic_fetch_sub(&ods_awrites, 1); /* it writes nothing */
	pthread_mutex_lock(&quarantine_lock);
	op->wnext = quarantine;
	quarantine = op;
	pthread_mutex_unlock(&quarantine_lock);
	ods_ainflight_add(-1);
}

/* The dispatcher's round over its watch list: begin the operations the
 * streams reached, start the pieces whose slots the stream has freed, end
 * the operations it is done with. */
int ods_aop_poll(void)
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
				ods_aop_cut_end(op);
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
			ods_aop_put(op);
			continue;
		}
		pp = &op->wnext;
	}
	return moved ? 1 : quiet ? -2 : 0;
}

void ods_aop_forget(void)
{
	quarantine_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	watch = NULL;
	atomic_store(&woken, NULL);
	nparked = 0;
	quarantine = NULL;
	atomic_store(&ods_awrites, 0);
}
