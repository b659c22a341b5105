/*
 * Stream-ordered I/O on the accelerator's own streams, when the layer has
 * stream hooks (cuda, and hostdev's simulated streams): each operation is
 * a run of commands queued on the caller's stream, so that nothing the
 * stream waits for depends on device work queued anywhere else
 * (docs/stream-ordering.md). A device buffer moves through pinned staging
 * in pieces: a host function begins the operation and starts the file
 * reads of the first pieces into staging slots; for each piece a gate
 * holds the stream until it is read, a copy on the stream moves it into
 * the buffer, and a counter the stream writes tells the dispatcher that
 * the slot is free for a later piece. Up to SLOTS pieces are in flight. A
 * host buffer needs no copies: one host function and one gate.
 */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stream.h"

#define PIECE ((size_t)4 << 20) /* a staged operation moves in pieces of this */
#define SLOTS 32u               /* pieces in flight per operation */

/* What the library knows of an accelerator stream: whether it made it,
 * and the registration hints. A small array: programs use few streams. */
struct astream {
	void *s;
	bool created, registered;
	unsigned flags;
};
static pthread_mutex_t astreams_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t astreams_idle = PTHREAD_COND_INITIALIZER;
static struct astream *astreams;
static size_t nastreams, astreams_cap;
static unsigned ainflight; /* operations enqueued and not yet ended */

/* caller holds astreams_lock; NULL when unknown (add: make an entry) */
static struct astream *astream_find(void *s, bool add)
{
	for (size_t i = 0; i < nastreams; i++)
		if (astreams[i].s == s)
			return &astreams[i];
	if (!add)
		return NULL;
	if (nastreams == astreams_cap) {
		size_t ncap = astreams_cap ? astreams_cap * 2 : 16;
		struct astream *n = realloc(astreams, ncap * sizeof(*n));
		if (!n)
			return NULL;
		astreams = n;
		astreams_cap = ncap;
	}
	struct astream *a = &astreams[nastreams++];
	memset(a, 0, sizeof(*a));
	a->s = s;
	return a;
}

/* caller holds astreams_lock; drop entries that say nothing */
static void astream_trim(struct astream *a)
{
	if (!a->created && !a->registered)
		*a = astreams[--nastreams];
}

static void ainflight_add(int d)
{
	pthread_mutex_lock(&astreams_lock);
	ainflight += d;
	if (ainflight == 0)
		pthread_cond_broadcast(&astreams_idle);
	pthread_mutex_unlock(&astreams_lock);
}

/* -- the dispatcher: runs what the streams' host functions start, and
 * watches the counters of staged operations. Host functions run on the
 * accelerator's callback thread, which may neither call the accelerator
 * nor wait; they only queue a task here. -- */

struct task {
	struct task *next;
	void (*run)(struct task *t);
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct task *head, *tail;
	bool started, stop;
	pthread_t th;
} D = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, false, false, 0 };

static void on_stream(void *arg)
{
	struct task *t = arg;
	t->next = NULL;
	pthread_mutex_lock(&D.lock);
	if (D.tail)
		D.tail->next = t;
	else
		D.head = t;
	D.tail = t;
	pthread_cond_signal(&D.cond);
	pthread_mutex_unlock(&D.lock);
}

struct aop;
static struct aop *watch; /* staged operations the dispatcher watches (its own) */
static bool poll_watch(void);

static void *dispatcher(void *arg)
{
	(void)arg;
	const struct ods_accel *acc = ods_drv.accel;
	bool attached = acc->thread_attach && acc->thread_attach() == 0;
	long delay_ns = 0;
	pthread_mutex_lock(&D.lock);
	for (;;) {
		while (!D.head && !D.stop && !watch)
			pthread_cond_wait(&D.cond, &D.lock);
		struct task *t = D.head;
		if (t) {
			D.head = t->next;
			if (!D.head)
				D.tail = NULL;
			pthread_mutex_unlock(&D.lock);
			t->run(t);
			pthread_mutex_lock(&D.lock);
			continue;
		}
		if (!watch)
			break; /* stopping, nothing in flight */
		pthread_mutex_unlock(&D.lock);
		bool moved = poll_watch();
		pthread_mutex_lock(&D.lock);
		/* While counters move, look again at once; while they do not
		 * (a stream held elsewhere), back off to half a millisecond. A
		 * new task wakes the wait early. */
		delay_ns = moved ? 0 : delay_ns ? (delay_ns * 2 < 500000 ? delay_ns * 2 : 500000) : 10000;
		if (delay_ns && !D.head) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += delay_ns;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&D.cond, &D.lock, &ts);
		}
	}
	pthread_mutex_unlock(&D.lock);
	if (attached && acc->thread_detach)
		acc->thread_detach();
	return NULL;
}

static int dispatcher_start(void)
{
	pthread_mutex_lock(&D.lock);
	int rc = 0;
	if (!D.started) {
		D.stop = false;
		if (pthread_create(&D.th, NULL, dispatcher, NULL))
			rc = ods_fail(OPENDS_INTERNAL_ERROR, "could not start the stream dispatcher thread");
		else
			D.started = true;
	}
	pthread_mutex_unlock(&D.lock);
	return rc;
}

static void dispatcher_stop(void)
{
	pthread_mutex_lock(&D.lock);
	bool started = D.started;
	D.stop = true;
	pthread_cond_broadcast(&D.cond);
	pthread_mutex_unlock(&D.lock);
	if (started)
		pthread_join(D.th, NULL); /* runs what is queued first */
	D.started = D.stop = false;
}

/* -- staging: pinned buffers kept for reuse until the driver closes (an
 * unregistration may wait for the device, which a held stream can keep
 * busy). Classes are powers of two from 64 KiB to SLOTS * PIECE. -- */

#define NCLASS 12
_Static_assert(((size_t)65536 << (NCLASS - 1)) >= SLOTS * PIECE, "a class holds the largest staging");
static struct {
	pthread_mutex_t lock;
	void *free[NCLASS]; /* linked through each buffer's first word */
} P = { PTHREAD_MUTEX_INITIALIZER, { NULL } };

static size_t class_size(unsigned c)
{
	return (size_t)65536 << c;
}

static void *stage_get(size_t n, unsigned *cls)
{
	unsigned c = 0;
	while (class_size(c) < n)
		c++;
	pthread_mutex_lock(&P.lock);
	void *p = P.free[c];
	if (p)
		P.free[c] = *(void **)p;
	pthread_mutex_unlock(&P.lock);
	if (!p)
		p = ods_drv.accel->pinned_alloc ? ods_drv.accel->pinned_alloc(class_size(c))
						: ods_aligned_alloc(class_size(c));
	*cls = c;
	return p;
}

static void stage_put(void *p, unsigned c)
{
	pthread_mutex_lock(&P.lock);
	*(void **)p = P.free[c];
	P.free[c] = p;
	pthread_mutex_unlock(&P.lock);
}

static void stage_fini(void)
{
	for (unsigned c = 0; c < NCLASS; c++)
		for (void *p = P.free[c], *n; p; p = n) {
			n = *(void **)p;
			if (ods_drv.accel->pinned_free)
				ods_drv.accel->pinned_free(p, class_size(c));
			else
				free(p);
		}
	memset(P.free, 0, sizeof(P.free));
}

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
};

/* An operation on an accelerator stream. The plan (pieces, copies) is
 * made at the call from the values behind the pointers then; when the
 * stream reaches it they are read again. If they differ (or the file got
 * shorter than planned, or they are now invalid), the operation runs the
 * general way instead: the backend moves the bytes itself, and each piece
 * then snapshots the device range into its slot, so the planned copies
 * write back what is already there ("mirror"). Host buffers have no plan:
 * always the general way, one piece of no bytes. */
struct aop {
	struct ods_sargs a;
	struct ods_io io;    /* validated when the stream reached it */
	struct task begin;   /* its host function's task */
	void *progress;      /* staged: the stream writes i + 1 after piece i's copy */
	unsigned seen;       /* the counter as the dispatcher last read it */
	unsigned started;    /* pieces started */
	struct aop *wnext;   /* the dispatcher's watch list */
	atomic_bool detached; /* could not be queued whole: no longer watched */
	char *dev;           /* planned device range */
	size_t size0;
	off_t boff0;
	size_t valid0;       /* reads: planned bytes inside the file */
	char *stage;         /* NULL: no plan */
	unsigned cls;
	unsigned n, k;       /* pieces; slots */
	size_t slot;         /* bytes per slot */
	pthread_mutex_t lock;
	bool mirror, general_done;
	struct piece *waiting;
	ssize_t result;      /* the general operation's */
	atomic_uint finished;
	atomic_uint refs;    /* the caller enqueuing it; the stream's end */
	atomic_llong short_at; /* reads: lowest op offset where data ended */
	atomic_long err;
	struct piece p[];
};

static char *slot_of(struct aop *op, unsigned idx)
{
	return op->stage + (size_t)(idx % op->k) * op->slot;
}

static void op_free(struct aop *op)
{
	if (op->stage)
		stage_put(op->stage, op->cls);
	if (op->progress)
		ods_drv.accel->counter_put(op->progress);
	pthread_mutex_destroy(&op->lock);
	free(op);
}

/* Drop a reference; the last one ends the operation. */
static void op_put(struct aop *op)
{
	if (atomic_fetch_sub(&op->refs, 1) != 1)
		return;
	op_free(op);
	ainflight_add(-1);
}

/* A piece is over. Each opens its gate, except the last piece's, which
 * opens when every piece is over and the result is published. Once the
 * last gate is open the stream may copy the last piece and write the
 * final count, and the dispatcher may then free op. */
static void piece_finish(struct aop *op, struct piece *pc)
{
	unsigned n = op->n; /* op may be gone once the count is bumped */
	if (pc->idx != n - 1)
		ods_drv.accel->gate_open(pc->gate);
	if (atomic_fetch_add(&op->finished, 1) + 1 != n)
		return;
	ssize_t r;
	if (op->mirror)
		r = op->result;
	else if ((r = atomic_load(&op->err)) == 0)
		r = (ssize_t)op->size0 < atomic_load(&op->short_at) ? (ssize_t)op->size0
								     : (ssize_t)atomic_load(&op->short_at);
	*op->a.result = r;
	/* without staging, nothing queued after the gate needs op: this is
	 * the stream's end of it; with staging, the dispatcher may free op
	 * as soon as the gate is open and the last copy is done */
	bool staged = op->stage != NULL;
	ods_drv.accel->gate_open(op->p[op->n - 1].gate);
	if (!staged)
		op_put(op);
}

/* Mirror mode: the general operation is over; the slot gets what the
 * device range holds now, so the planned copy changes nothing. */
static void mirror_finish(struct aop *op, struct piece *pc)
{
	if (op->stage && op->a.opcode == OPENDS_READ && pc->len)
		ods_drv.accel->copy_to_host(slot_of(op, pc->idx), op->dev + (size_t)pc->idx * PIECE, pc->len);
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
	const struct ods_sargs *a = &op->a;
	size_t size;
	off_t foff, boff;
	ssize_t r = ods_sargs_read(a, &op->io, &size, &foff, &boff);
	if (op->stage && r == 0 && size == op->size0 && boff == op->boff0 && op->io.mem == ODS_MEM_DEVICE &&
	    (a->opcode == OPENDS_WRITE || ods_handle_valid(op->io.fh, foff, size) >= op->valid0))
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
	if (r < 0) {
		note_err(op, (long)r);
		/* leave the device range as it was: snapshot it */
		if (op->a.opcode == OPENDS_READ)
			ods_drv.accel->copy_to_host(slot_of(op, pc->idx), op->dev + (size_t)pc->idx * PIECE, pc->len);
	} else if ((size_t)r < pc->len && op->a.opcode == OPENDS_READ) {
		long long at = (long long)pc->idx * (long long)PIECE + r, cur = atomic_load(&op->short_at);
		while (at < cur && !atomic_compare_exchange_weak(&op->short_at, &cur, at))
			;
		/* the file ended before the planned EOF (it shrank meanwhile):
		 * no stale staging bytes reach the device */
		if ((size_t)r < pc->pre_from)
			memset(slot_of(op, pc->idx) + r, 0, pc->pre_from - (size_t)r);
	}
	piece_finish(op, pc);
}

/* Start one piece (on the dispatcher). */
static void piece_start(struct aop *op, struct piece *pc)
{
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
	size_t at = (size_t)pc->idx * PIECE;
	bool read = op->a.opcode == OPENDS_READ;
	if (atomic_load(&op->err) || (read && (long long)at >= atomic_load(&op->short_at))) {
		if (read && atomic_load(&op->err))
			ods_drv.accel->copy_to_host(slot_of(op, pc->idx), op->dev + at, pc->len);
		else if (read)
			memset(slot_of(op, pc->idx), 0, pc->pre_from);
		piece_finish(op, pc);
		return;
	}
	struct ods_io *io = &pc->io;
	memset(io, 0, sizeof(*io));
	io->fh = op->io.fh;
	io->buf = slot_of(op, pc->idx);
	io->size = pc->len;
	io->off = op->io.off + (off_t)at;
	io->opcode = op->io.opcode;
	io->mem = ODS_MEM_HOST;
	io->owner = pc;
	io->done = piece_done;
	/* the dispatcher serves every stream: never wait for room here */
	ods_io_submit(io, false);
}

/* The stream reached the operation: begin it and start its first
 * pieces; the dispatcher starts the others as the stream's counter says
 * their slots are free. */
static void op_run(struct task *t)
{
	struct aop *op = (struct aop *)((char *)t - offsetof(struct aop, begin));
	op_begin(op);
	bool staged = op->stage != NULL;
	if (staged) {
		/* watched from now; freed only by the dispatcher (this thread) */
		op->wnext = watch;
		watch = op;
	}
	unsigned k = op->k;
	op->started = k;
	for (unsigned i = 0; i < k; i++)
		piece_start(op, &op->p[i]);
	/* unstaged: op may be gone now */
}

/* The dispatcher's round over its watch list: start the pieces whose
 * slots the stream has freed, end the operations it is done with. */
static bool poll_watch(void)
{
	const struct ods_accel *acc = ods_drv.accel;
	bool moved = false;
	for (struct aop **pp = &watch; *pp;) {
		struct aop *op = *pp;
		if (atomic_load(&op->detached)) {
			*pp = op->wnext; /* left to what was queued of it */
			continue;
		}
		uint32_t m = acc->counter_read(op->progress);
		if (m == op->seen) {
			pp = &op->wnext;
			continue;
		}
		moved = true;
		op->seen = m;
		unsigned can = m + op->k < op->n ? m + op->k : op->n;
		while (op->started < can) {
			unsigned i = op->started++;
			piece_start(op, &op->p[i]);
		}
		if (m == op->n) {
			*pp = op->wnext;
			op_put(op);
			continue;
		}
		pp = &op->wnext;
	}
	return moved;
}

/* Queue what piece i needs before its file I/O starts: its gate and, for
 * a read, the copy of the part past EOF from the device into its slot; for
 * a write, the copy of the piece into its slot. */
static int prep_piece(struct aop *op, void *stream, unsigned i, bool *queued)
{
	const struct ods_accel *acc = ods_drv.accel;
	struct piece *pc = &op->p[i];
	pc->gate = acc->gate_get();
	if (!pc->gate)
		return ods_fail(OPENDS_NOMEM_ERROR, "out of memory for a stream gate");
	int rc = 0;
	bool copy = false;
	char *dev = op->dev + (size_t)i * PIECE;
	if (op->stage && op->a.opcode == OPENDS_READ && pc->pre_from < pc->len) {
		copy = true;
		rc = acc->stream_copy(stream, slot_of(op, i) + pc->pre_from, dev + pc->pre_from,
				      pc->len - pc->pre_from, false);
	} else if (op->stage && op->a.opcode == OPENDS_WRITE) {
		copy = true;
		rc = acc->stream_copy(stream, slot_of(op, i), dev, pc->len, false);
	}
	if (rc) {
		acc->gate_put(pc->gate);
		pc->gate = NULL;
	} else if (copy) {
		*queued = true; /* the copy is on the stream: the staging is its */
	}
	return rc;
}

/* Queue the whole operation. 0, or the first failure; *queued says
 * whether anything reached the stream before it. One host function
 * begins it; after that the stream says how far it got through a counter
 * (after each piece's copy), not through host functions, each of which
 * would hold the stream for a round trip to the host. Piece i + SLOTS
 * reuses piece i's slot: what it needs first is queued after piece i's
 * copy (read) or wait (write), before the counter says i + 1. */
static int queue_op(struct aop *op, void *stream, bool *queued)
{
	const struct ods_accel *acc = ods_drv.accel;
	bool read = op->a.opcode == OPENDS_READ;
	int rc = 0;
	unsigned i;
	*queued = false;
	for (i = 0; i < op->k && !rc; i++)
		rc = prep_piece(op, stream, i, queued);
	if (!rc)
		rc = acc->stream_call(stream, on_stream, &op->begin);
	if (rc) {
		for (unsigned j = 0; j < i; j++)
			if (op->p[j].gate)
				acc->gate_put(op->p[j].gate), op->p[j].gate = NULL;
		return rc;
	}
	*queued = true;
	for (i = 0; i < op->n; i++) {
		if ((rc = acc->stream_wait(stream, op->p[i].gate)))
			return rc;
		if (!op->stage)
			continue;
		if (read &&
		    (rc = acc->stream_copy(stream, op->dev + (size_t)i * PIECE, slot_of(op, i), op->p[i].len, true)))
			return rc;
		if (i + op->k < op->n && (rc = prep_piece(op, stream, i + op->k, queued)))
			return rc;
		if ((rc = acc->stream_mark(stream, op->progress, i + 1)))
			return rc;
	}
	return 0;
}

static opends_error_t accel_enqueue(const char *fn, const struct ods_sargs *a, opends_stream_t stream)
{
	if (ods_drv.accel->check_context) {
		int rc = ods_drv.accel->check_context();
		if (rc)
			return ods_err(ods_fail(rc, "%s: the calling thread's accelerator context is not the one "
						    "captured at opends_driver_open", fn),
				       0);
	}
	int rc = dispatcher_start();
	if (rc)
		return ods_err(rc, 0);
	/* the plan, from the values now */
	struct ods_io io;
	size_t size = *a->size;
	bool plan = ods_io_prepare(&io, a->opcode, a->fh, a->buf, size, *a->file_offset, *a->buf_offset) == 0 &&
		    size > 0 && io.mem == ODS_MEM_DEVICE;
	size_t n = plan ? (size + PIECE - 1) / PIECE : 1;
	if (n > UINT_MAX / 2 || n > (SIZE_MAX - sizeof(struct aop)) / sizeof(struct piece))
		plan = false, n = 1; /* beyond any memory: let the general way say so */
	struct aop *op = calloc(1, sizeof(*op) + n * sizeof(struct piece));
	if (!op)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", fn), ENOMEM);
	op->a = *a;
	op->n = (unsigned)n;
	op->k = op->n < SLOTS ? op->n : SLOTS;
	op->begin.run = op_run;
	pthread_mutex_init(&op->lock, NULL);
	atomic_init(&op->refs, 2);
	atomic_init(&op->short_at, LLONG_MAX);
	if (plan) {
		op->dev = io.buf;
		op->size0 = size;
		op->boff0 = *a->buf_offset;
		op->valid0 = a->opcode == OPENDS_READ ? ods_handle_valid(io.fh, *a->file_offset, size) : size;
		op->slot = ((size < PIECE ? size : PIECE) + ODS_ALIGN - 1) & ~(size_t)(ODS_ALIGN - 1);
		op->stage = stage_get(op->slot * op->k, &op->cls);
		op->progress = op->stage ? ods_drv.accel->counter_get() : NULL;
		if (!op->progress) {
			op_free(op);
			return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "%s: out of pinned memory for staging", fn),
				       ENOMEM);
		}
	}
	for (unsigned i = 0; i < op->n; i++) {
		struct piece *pc = &op->p[i];
		pc->op = op;
		pc->idx = i;
		pc->len = plan ? (i + 1 < op->n ? PIECE : size - (size_t)i * PIECE) : 0;
		size_t at = (size_t)i * PIECE;
		pc->pre_from = op->valid0 <= at ? 0 : op->valid0 - at < pc->len ? op->valid0 - at : pc->len;
	}
	ainflight_add(1);
	bool queued;
	rc = queue_op(op, stream, &queued);
	if (rc && !queued) {
		op_put(op); /* nothing reached the stream: both references */
		op_put(op);
		return ods_err(rc, 0);
	}
	if (rc) {
		/* Part of the operation reached the stream and the rest could
		 * not (the accelerator failed under us). What is queued may
		 * still run and use op and its staging: both are left to it
		 * (this reference is kept, so they are never freed), and the
		 * operation is no longer waited for nor watched. */
		atomic_store(&op->detached, true);
		ainflight_add(-1);
		return ods_err(rc, 0);
	}
	op_put(op);
	return ods_ok();
}

static void accel_fini(void)
{
	pthread_mutex_lock(&astreams_lock);
	while (ainflight)
		pthread_cond_wait(&astreams_idle, &astreams_lock);
	for (size_t i = 0; i < nastreams; i++)
		if (astreams[i].created)
			ods_drv.accel->stream_destroy(astreams[i].s);
	free(astreams);
	astreams = NULL;
	nastreams = astreams_cap = 0;
	pthread_mutex_unlock(&astreams_lock);
	dispatcher_stop();
	stage_fini();
}

static int accel_init(void)
{
	return 0; /* the dispatcher starts with the first operation */
}

static opends_error_t accel_create(opends_stream_t *stream)
{
	void *as = NULL;
	int rc = ods_drv.accel->stream_create(&as);
	if (rc)
		return ods_err(rc, 0);
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(as, true);
	if (a)
		a->created = true;
	pthread_mutex_unlock(&astreams_lock);
	if (!a) {
		ods_drv.accel->stream_destroy(as);
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_stream_create: out of memory"), ENOMEM);
	}
	*stream = as;
	return ods_ok();
}

static opends_error_t accel_destroy(opends_stream_t stream)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = stream ? astream_find(stream, false) : NULL;
	bool ours = a && a->created;
	if (ours) {
		a->created = a->registered = false;
		astream_trim(a);
	}
	pthread_mutex_unlock(&astreams_lock);
	if (!ours)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_stream_destroy: stream %p was not made by opends_stream_create", stream),
			       0);
	int rc = ods_drv.accel->stream_destroy(stream);
	return rc ? ods_err(rc, 0) : ods_ok();
}

/* any stream of the accelerator may be registered, the NULL (default)
 * stream included */
static opends_error_t accel_reg(opends_stream_t stream, unsigned flags)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(stream, true);
	if (a) {
		a->registered = true;
		a->flags = flags;
	}
	pthread_mutex_unlock(&astreams_lock);
	if (!a)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_stream_register: out of memory"), ENOMEM);
	return ods_ok();
}

static bool accel_dereg(opends_stream_t stream)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(stream, false);
	bool was = a && a->registered;
	if (was) {
		a->registered = false;
		a->flags = 0;
		astream_trim(a);
	}
	pthread_mutex_unlock(&astreams_lock);
	return was;
}

/* the stream holds every operation until it completed, so waiting for
 * the stream waits for them too */
static opends_error_t accel_sync(opends_stream_t stream)
{
	int rc = ods_drv.accel->stream_sync(stream);
	return rc ? ods_err(rc, 0) : ods_ok();
}

const struct ods_stream_engine ods_stream_accel = {
	.init = accel_init,
	.fini = accel_fini,
	.create = accel_create,
	.destroy = accel_destroy,
	.reg = accel_reg,
	.dereg = accel_dereg,
	.enqueue = accel_enqueue,
	.sync = accel_sync,
};
