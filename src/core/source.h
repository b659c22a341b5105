/*
 * Source handles inside the core (src/core/source*.c) and the built-in
 * sources (src/sources/). Not public. The public side is
 * include/opends/sources.h (part of <opends.h>).
 *
 * A source handle is a struct ods_handle with src set. Its I/O never goes
 * to a backend's fd path: ods_io_submit / ods_io_run hand it here.
 *  - every family runs on the staging engine (stage.h) with the source
 *    mover (source_engine.c): the engine's chunks, cut into pieces at
 *    io_unit boundaries, started while the caps of the source's domain
 *    allow, completed from whatever thread the source calls back on;
 *    device memory is staged through the engine's pinned slots and copied
 *    by its workers, which also run blocking sources. An asynchronous
 *    source moving host memory needs none of that: its requests skip the
 *    engine's queue and workers (one run of the same pieces, started by
 *    the submitter, completed on the source's thread: direct_submit);
 *  - ref delegates each request whole to the synchronous runner (the
 *    oracle), one piece at a time, on the engine's workers.
 */
#ifndef ODS_SOURCE_H
#define ODS_SOURCE_H

#include "ods.h"

#define ODS_SRC_DEF_UNIT ((size_t)4 << 20)
#define ODS_SRC_DEF_INFLIGHT 16u
#define ODS_SRC_MIN_IO 4096u
#define ODS_SRC_LABEL 200

struct ods_sdom;

struct ods_source {
	opends_source_ops_t ops; /* the caller's table, zero past its struct_size */
	void *src;
	unsigned flags;
	int64_t size;            /* known size, -1 unknown */
	size_t unit, max_io;     /* max_io 0: none */
	struct ods_sdom *dom;
	atomic_uint reqs;        /* engine requests not yet completed */
	char label[ODS_SRC_LABEL]; /* ops->name copied: "rados://pool/oid", "fake" */
};

/* ---- source_engine.c: the source mover ---------------------------------- */

/* The domain for key (0: a new private one) with these caps folded in.
 * NULL when out of memory. */
struct ods_sdom *ods_sdom_get(uint64_t key, unsigned max_ops, size_t max_bytes);
void ods_sdom_put(struct ods_sdom *d);
/* the caps now in force, for describe */
void ods_sdom_caps(const struct ods_sdom *d, unsigned *max_ops, size_t *max_bytes);
/* The synchronous runner's share of the caps: enter waits for room. */
void ods_sdom_enter(struct ods_sdom *d, size_t n);
void ods_sdom_leave(struct ods_sdom *d, size_t n);
/* Open the staging engine for sources (once per driver open): 0 or an
 * OPENDS_* code (detail set). */
int ods_src_engine_start(void);
/* what it runs with (describe) */
void ods_src_engine_params(unsigned *threads, unsigned *depth, size_t *chunk);

/* Piece length starting at pos of a request ending at end. */
size_t ods_src_piece_len(const struct ods_source *s, off_t pos, off_t end, size_t cap);

/* Record the failure of a request on a source (for the thread that
 * reports it) in io->be_scratch: its offset. */
static inline void ods_src_note_off(struct ods_io *io, off_t at)
{
	io->be_scratch[0] = (uintptr_t)at;
}

/* ---- source.c ---------------------------------------------------------- */

/* name into dst[n] (n >= 8): whole when it fits, else its head and tail
 * around "..." (an object path's end, often what tells two objects apart,
 * stays visible; a silent cut would read as the name of another object,
 * and a detail cut inside a name loses the error that follows it). */
void ods_src_abbrev(char *dst, size_t n, const char *name);

/* The detail of a failed request (its offset from ods_src_note_off) as a
 * string that lives as long as the process, for io->why (a future repeats
 * it at await); NULL when the table of them is full. */
const char *ods_source_why(const struct ods_io *io, ssize_t r);
/* fork(): the table's lock may be held by a thread the child lacks */
void ods_source_why_forget(void);

/* h (fd or source) still has I/O that its deregistration would wait for:
 * calls inside that looked it up, requests handed to a backend, or a
 * source's requests not yet completed. For deregister from inside a
 * source's callback (registry.c), which must not wait (see source.c). */
bool ods_handle_waits(const struct ods_handle *h);

/* ---- src/sources/ ------------------------------------------------------- */

/* fork(): forget the parent's cluster connections (not usable here). */
void ods_rados_forget(void);
/* rados://...: 0 or an OPENDS_* code (detail set); *backend_err an errno. */
int ods_url_rados(opends_handle_t *fh, const char *rest, int flags, int *backend_err);

/* A parsed query string: decoded key=value pairs. */
struct ods_url_param {
	char *key, *val;
};
/* Percent-decode s[0..n) into a new string; NULL on a bad escape or %00
 * (*bad set) or out of memory. */
char *ods_url_decode(const char *s, size_t n, bool *bad);
/* Split "a=1&b=2" into params (decoded); returns the count or -1 on a
 * malformed pair (detail set) / -2 out of memory. Free with
 * ods_url_params_free. */
int ods_url_params(const char *q, struct ods_url_param **out, const char *url);
void ods_url_params_free(struct ods_url_param *p, int n);

/* Around a source's read or write callback: the gate's callback mark,
 * and the source served, so that a deregister of its handle from inside
 * the callback is refused instead of waiting for the I/O it is part of. */
static inline const void *ods_src_cb_begin(const struct ods_source *s)
{
	const void *prev = ods_calls.serving;
	ods_gate_callback_begin();
	ods_calls.serving = s;
	return prev;
}
static inline void ods_src_cb_end(const void *prev)
{
	ods_calls.serving = prev;
	ods_gate_callback_end();
}

#endif
