/*
 * What the accelerator stream engine's two files share: stream_accel.c
 * plans an operation and queues its commands on the caller's stream;
 * stream_accel_run.c runs it (pieces, results, the dispatcher's poll, cut
 * operations). stream.h says how the engine fits the core.
 */
#ifndef ODS_STREAM_AOP_H
#define ODS_STREAM_AOP_H

#include "stream.h"

/* -- operations -- */

struct piece {
	struct aop *op;
	unsigned idx;
	void *gate;         /* holds the stream until the piece is done */
	size_t len;         /* bytes of the planned range it moves */
	size_t pre_from;    /* reads: its bytes inside the file seen at the
			       call, the only ones read into the slot and
			       copied to the device (none past EOF) */
	struct ods_io io;
	struct piece *wnext; /* waiting for the general operation */
	bool opened;         /* its gate was opened (never twice: a passed
				gate may already serve another operation) */
	bool lost;           /* its wait was refused: the layer keeps the gate,
				which may hold the stream all the same (counted
				in nq, opened when the operation is cut) */
};

/* An operation on an accelerator stream, planned at the call from the
 * values then. Values read when reached that differ from the plan (or a
 * file now shorter or longer inside the range, or invalid values) run the
 * general way: the backend
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
	atomic_bool parked;   /* off the watch list until a piece ends (ods_aop_wake) */
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
				 the result is out (ods_aop_published) */
	atomic_llong short_at; /* reads: lowest op offset where data ended */
	atomic_long err;
	uint64_t t_enq, t_pub; /* OPENDS_STREAM_STATS: the call, the result out */
	/* direct (stream_accel.c): reached at the call on an idle stream, every
	 * piece started by the caller at once; no counter, no dispatcher. The
	 * stream's end of it is held on its stream's entry (held) until the
	 * stream is known to be past its copies */
	bool direct;
	/* the handle whose in-flight count the operation holds from the moment
	 * its file I/O may start (its values read) until its last piece ends,
	 * so that its deregistration waits for the pieces not yet started and
	 * its struct is not reused under them (pieces started later by the
	 * dispatcher); NULL: none (a direct one's pieces all start inside the
	 * call, each counted) */
	struct ods_handle *_Atomic counted;
	atomic_bool keep;     /* ended without knowing the stream is past it:
				 the quarantine, never freed */
	struct ods_held held;
	struct piece p[];
};

static inline char *ods_aop_slot(struct aop *op, unsigned idx)
{
	return op->stage + (size_t)(idx % op->k) * op->slot;
}

static inline char *ods_aop_dev(struct aop *op, unsigned idx)
{
	return op->dev + (size_t)idx * op->piece;
}

/* Stream writes enqueued and not yet ended: while there are any, no read
 * starts before its stream gets there, so it cannot overtake a write
 * queued ahead of it on some stream. */
extern atomic_uint ods_awrites;

/* stream_accel_run.c */
/* the result is out: a sync of the stream need not wait for op any more */
void ods_aop_published(struct aop *op);
void ods_aop_free(struct aop *op); /* nothing of it ran */
void ods_aop_put(struct aop *op);  /* drop a reference; the last ends op */
void ods_aop_wake(struct aop *op); /* hand op back to the dispatcher if parked */
void ods_aop_publish(struct aop *op); /* every piece is over: result, last gate */
/* a cut operation ends: kept for good in the quarantine */
void ods_aop_cut_end(struct aop *op);
int ods_aop_poll(void);                /* the dispatcher's poll (ods_dispatch_start) */
void ods_aop_watch(struct ods_task *t); /* a staged operation's hand-over */
void ods_aop_run(struct ods_task *t);   /* an unplanned one's host function */
void ods_aop_start_all(struct aop *op); /* a direct one: every piece, now */
void ods_aop_held_release(struct ods_held *h, bool past); /* its ods_held */
void ods_aop_count(struct aop *op, struct ods_handle *h); /* counted = h, held */
void ods_aop_uncount(struct aop *op); /* let counted go (once) */
void ods_aop_forget(void);              /* the child of a fork */

#endif
