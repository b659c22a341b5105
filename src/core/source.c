/*
 * Source handles: registration, the synchronous runner (ref's oracle),
 * error details, describe, and release at deregistration. They run on the
 * staging engine with the source mover (source_engine.c).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"

#define FN "opends_handle_register_source"
#define KNOWN_FLAGS (OPENDS_SOURCE_RDONLY | OPENDS_SOURCE_BLOCKING | OPENDS_SOURCE_DEVICE_MEMORY)
#define MAX_UNIT ((size_t)1 << 30)
#define ORACLE_BOUNCE ((size_t)4 << 20)

/* the first version of each struct: everything up to here is required */
#define DESC_V1 (offsetof(opends_source_desc_t, domain) + sizeof(uint64_t))
#define OPS_V1 (offsetof(opends_source_ops_t, describe) + sizeof(void (*)(void)))

void ods_src_abbrev(char *dst, size_t n, const char *name)
{
	size_t len = strlen(name);
	if (len < n) {
		memcpy(dst, name, len + 1);
		return;
	}
	size_t tail = (n - 4) / 2, head = n - 4 - tail;
	memcpy(dst, name, head);
	memcpy(dst + head, "...", 3);
	memcpy(dst + head + 3, name + len - tail, tail + 1);
}

OPENDS_API opends_error_t opends_handle_register_source(opends_handle_t *fh, const opends_source_desc_t *desc)
{
	ODS_ENTER(FN);
	if (!fh || !desc)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, FN ": %s is NULL", fh ? "desc" : "fh"), 0);
	if (desc->struct_size < DESC_V1)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, FN ": desc->struct_size %zu is below %zu (sizeof the "
					"first opends_source_desc_t)", desc->struct_size, (size_t)DESC_V1), 0);
	opends_source_desc_t d;
	memset(&d, 0, sizeof(d));
	memcpy(&d, desc, desc->struct_size < sizeof(d) ? desc->struct_size : sizeof(d));
	const opends_source_ops_t *o = d.ops;
	if (!o)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, FN ": desc->ops is NULL"), 0);
	if (o->struct_size < OPS_V1)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, FN ": ops->struct_size %zu is below %zu (sizeof the "
					"first opends_source_ops_t)", o->struct_size, (size_t)OPS_V1), 0);
	if (d.flags & ~KNOWN_FLAGS)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, FN ": desc->flags 0x%x has unknown bits 0x%x", d.flags,
					d.flags & ~KNOWN_FLAGS), 0);
	struct ods_source *s = calloc(1, sizeof(*s));
	if (!s)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, FN ": out of memory"), ENOMEM);
	memcpy(&s->ops, o, o->struct_size < sizeof(s->ops) ? o->struct_size : sizeof(s->ops));
	s->ops.struct_size = sizeof(s->ops);
	bool blocking = d.flags & OPENDS_SOURCE_BLOCKING;
	const char *bad = NULL;
	if (blocking ? !s->ops.read : !s->ops.read_async)
		bad = blocking ? "OPENDS_SOURCE_BLOCKING is set but ops->read is NULL"
			       : "ops->read_async is NULL (blocking sources set OPENDS_SOURCE_BLOCKING)";
	else if (d.size < -1)
		bad = "desc->size is below -1";
	else if ((d.io_unit && d.io_unit < ODS_SRC_MIN_IO) || d.io_unit > MAX_UNIT)
		bad = "desc->io_unit is not 0 or between 4096 and 1 GiB";
	else if (d.max_io && d.max_io < ODS_SRC_MIN_IO)
		bad = "desc->max_io is not 0 or at least 4096";
	else if (d.max_inflight_bytes && d.max_inflight_bytes < ODS_SRC_MIN_IO)
		bad = "desc->max_inflight_bytes is not 0 or at least 4096";
	if (bad) {
		free(s);
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, FN ": %s", bad), 0);
	}
	s->src = d.src;
	s->flags = d.flags;
	s->size = d.size;
	s->unit = d.io_unit ? d.io_unit : ODS_SRC_DEF_UNIT;
	s->max_io = d.max_io;
	ods_src_abbrev(s->label, sizeof(s->label), s->ops.name ? s->ops.name : "source");
	s->ops.name = s->label;
	bool writable = !(d.flags & OPENDS_SOURCE_RDONLY) && (blocking ? s->ops.write != NULL : s->ops.write_async != NULL);

	struct ods_handle *h = calloc(1, sizeof(*h));
	s->dom = h ? ods_sdom_get(d.domain, d.max_inflight, d.max_inflight_bytes) : NULL;
	int rc = s->dom ? ods_src_engine_start() : ods_fail(OPENDS_NOMEM_ERROR, FN ": out of memory");
	if (rc) {
		if (s->dom)
			ods_sdom_put(s->dom);
		free(h);
		free(s);
		return ods_err(rc, rc == OPENDS_NOMEM_ERROR ? ENOMEM : 0);
	}
	h->fd = -1;
	h->twin_fd = -2;
	h->accmode = writable ? O_RDWR : O_RDONLY;
	h->src = s;
	h->src_size = s->size;
	pthread_mutex_init(&h->twin_lock, NULL);
	if ((rc = ods_handle_add(h))) {
		h->src = NULL;
		pthread_mutex_destroy(&h->twin_lock);
		free(h);
		ods_sdom_put(s->dom);
		free(s);
		return ods_err(rc, 0);
	}
	*fh = (opends_handle_t)(uintptr_t)h->token;
	return ods_ok();
}

void ods_source_free(struct ods_handle *h)
{
	struct ods_source *s = h->src;
	unsigned v;
	/* requests still running (futures nobody awaited): wait for them */
	while ((v = atomic_load_explicit(&s->reqs, memory_order_acquire)) != 0)
		ods_futex_wait(&s->reqs, v);
	if (s->ops.release) {
		ods_gate_callback_begin();
		s->ops.release(s->src);
		ods_gate_callback_end();
	}
	ods_sdom_put(s->dom);
	free(s);
	h->src = NULL;
}

/* A thread inside a source's read or write callback holds what other
 * requests may need to finish: the domain's cap slot of its own piece, an
 * engine worker (blocking sources and staged copies run on them), or the
 * caller's synchronous read. A deregister there of a handle with I/O still
 * in flight would wait for I/O that may be waiting for this very callback
 * (two sources of one domain with max_inflight 1: B's callback deregistering
 * A hung forever, A's piece queued behind B's slot), so registry.c refuses
 * it when this says the wait would happen. A handle with nothing in flight
 * is freed at once, as from any thread. */
bool ods_handle_waits(const struct ods_handle *h)
{
	return atomic_load_explicit(&h->users, memory_order_acquire) > 0 ||
	       atomic_load_explicit(&h->inflight, memory_order_acquire) > 0 ||
	       (h->src && atomic_load_explicit(&h->src->reqs, memory_order_acquire) > 0);
}

/* ---- the synchronous runner: ref's oracle --------------------------------- */

struct waiter {
	atomic_uint state; /* 0 pending, 1 sleeping, 2 done */
	ssize_t res;
};

static void waiter_done(void *token, ssize_t result)
{
	struct waiter *w = token;
	w->res = result;
	if (atomic_exchange_explicit(&w->state, 2, memory_order_acq_rel) == 1)
		ods_futex_wake_all(&w->state);
}

/* One transfer, waited for on this thread. */
static ssize_t call_sync(struct ods_source *s, bool rd, char *buf, size_t n, off_t pos)
{
	if (s->flags & OPENDS_SOURCE_BLOCKING) {
		const void *cb = ods_src_cb_begin(s);
		ssize_t r = rd ? s->ops.read(s->src, buf, n, (uint64_t)pos) : s->ops.write(s->src, buf, n, (uint64_t)pos);
		ods_src_cb_end(cb);
		return r >= 0 || r > -OPENDS_ERRNO_MAX ? r : -EIO;
	}
	struct waiter w = { 0, 0 };
	const void *cb = ods_src_cb_begin(s);
	int rc = rd ? s->ops.read_async(s->src, buf, n, (uint64_t)pos, waiter_done, &w)
		    : s->ops.write_async(s->src, buf, n, (uint64_t)pos, waiter_done, &w);
	ods_src_cb_end(cb);
	if (rc)
		return rc < 0 && rc > -OPENDS_ERRNO_MAX ? rc : -EIO;
	unsigned st = 0;
	while ((st = atomic_load_explicit(&w.state, memory_order_acquire)) != 2) {
		if (st == 0 && !atomic_compare_exchange_weak(&w.state, &st, 1))
			continue;
		ods_futex_wait(&w.state, 1);
	}
	return w.res;
}

ssize_t ods_source_run(struct ods_io *io)
{
	struct ods_source *s = io->fh->src;
	bool rd = io->opcode == OPENDS_READ;
	off_t end = io->off + (off_t)io->size;
	if (rd && s->size >= 0 && end > s->size)
		end = io->off < s->size ? (off_t)s->size : io->off;
	bool staged = io->mem == ODS_MEM_DEVICE && !(s->flags & OPENDS_SOURCE_DEVICE_MEMORY);
	size_t want = (size_t)(end - io->off);
	char *bounce = NULL;
	if (staged && want) {
		bounce = ods_aligned_alloc(((want < ORACLE_BOUNCE ? want : ORACLE_BOUNCE) + ODS_ALIGN - 1) &
					   ~(size_t)(ODS_ALIGN - 1));
		if (!bounce)
			return -ENOMEM;
	}
	size_t cap = 0;
	unsigned ops;
	ods_sdom_caps(s->dom, &ops, &cap);
	if (staged && (!cap || cap > ORACLE_BOUNCE))
		cap = ORACLE_BOUNCE;
	ssize_t ret = 0;
	size_t done = 0;
	while (io->off + (off_t)done < end) {
		off_t pos = io->off + (off_t)done;
		size_t n = (size_t)(end - pos);
		if (s->max_io && n > s->max_io)
			n = s->max_io;
		if (cap && n > cap)
			n = cap;
		char *dst = io->buf + done;
		if (staged && !rd) {
			int rc = ods_drv.accel->copy_to_host(bounce, dst, n);
			if (rc) {
				ret = -rc;
				break;
			}
		}
		ods_sdom_enter(s->dom, n);
		ssize_t r = call_sync(s, rd, staged ? bounce : dst, n, pos);
		ods_sdom_leave(s->dom, n);
		if (r < 0 || (size_t)r > n || (!rd && (size_t)r != n) ||
		    (rd && (size_t)r < n && s->size >= 0 && pos + r < end)) {
			ret = r < 0 ? r : -EIO;
			ods_src_note_off(io, r < 0 || (size_t)r > n ? pos : pos + r);
			break;
		}
		if (staged && rd && r > 0) {
			int rc = ods_drv.accel->copy_to_device(dst, bounce, (size_t)r);
			if (rc) {
				ret = -rc;
				break;
			}
		}
		done += (size_t)r;
		if ((size_t)r < n)
			break; /* the end of the data */
	}
	free(bounce);
	return ret < 0 ? ret : (ssize_t)done;
}

/* The detail of a failed request. It must fit the thread's detail (255
 * bytes, errors.c) whole, also behind the prefix the call that repeats it
 * puts in front (await's, or batch_get_status's "the entry with cookie
 * 0x...: ", at most 64 bytes): the label is shortened (ods_src_abbrev) to leave
 * room for the offsets and the error, which a long object name would push
 * out. */
#define DETAIL_MAX (255u - 64u)
static void fail_text(char *buf, size_t n, const struct ods_io *io, ssize_t r)
{
	const struct ods_source *s = io->fh->src;
	char rest[200], label[ODS_SRC_LABEL];
	int k = snprintf(rest, sizeof(rest), ": %s of %zu bytes at offset %lld failed at offset %lld: %s",
			 io->opcode == OPENDS_READ ? "read" : "write", io->size, (long long)io->off,
			 (long long)(off_t)io->be_scratch[0], opends_op_status_error((int)r));
	size_t room = k > 0 && (size_t)k < DETAIL_MAX - 40 ? DETAIL_MAX - (size_t)k : 40;
	ods_src_abbrev(label, room < sizeof(label) ? room + 1 : sizeof(label), s->label);
	snprintf(buf, n, "%s%s", label, rest);
}

void ods_source_fail(const struct ods_io *io, ssize_t r)
{
	char buf[ODS_SRC_LABEL + 200];
	fail_text(buf, sizeof(buf), io, r);
	ods_fail((int)-r, "%s", buf);
}

/* A future is awaited after its request (and perhaps its handle) is gone,
 * so the detail it repeats must live as long as the process: each distinct
 * detail is kept once, in a table that only grows, up to DETAILS_MAX
 * (about 300 KiB); past that, later failures get the generic detail. */
#define DETAILS_MAX 1024u
static struct {
	pthread_mutex_t lock;
	char *s[DETAILS_MAX];
	unsigned n;
} details = { .lock = PTHREAD_MUTEX_INITIALIZER };

const char *ods_source_why(const struct ods_io *io, ssize_t r)
{
	char buf[ODS_SRC_LABEL + 200];
	fail_text(buf, sizeof(buf), io, r);
	const char *why = NULL;
	pthread_mutex_lock(&details.lock);
	for (unsigned i = 0; i < details.n && !why; i++)
		if (!strcmp(details.s[i], buf))
			why = details.s[i];
	if (!why && details.n < DETAILS_MAX && (details.s[details.n] = strdup(buf)))
		why = details.s[details.n++];
	pthread_mutex_unlock(&details.lock);
	return why;
}

void ods_source_why_forget(void)
{
	details.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
}

/* ---- describe ------------------------------------------------------------- */

void ods_source_describe(struct ods_handle *h, char *buf, size_t n)
{
	struct ods_source *s = h->src;
	char own[256] = "";
	if (s->ops.describe) {
		ods_gate_callback_begin();
		s->ops.describe(s->src, own, sizeof(own));
		ods_gate_callback_end();
	}
	own[sizeof(own) - 1] = '\0';
	unsigned ops;
	size_t bytes;
	ods_sdom_caps(s->dom, &ops, &bytes);
	char caps[64] = "";
	if (bytes)
		snprintf(caps, sizeof(caps), ", <= %zu KiB", bytes >> 10);
	const char *how = s->flags & OPENDS_SOURCE_DEVICE_MEMORY ? "device memory direct to the source"
								  : "device memory staged through pinned host slots";
	if (ods_drv.be == &ods_backend_ref)
		snprintf(buf, n, "source %s (%s%s): ref runs each request synchronously, one piece (of at most "
				 "max_io) at a time; %s%s%s",
			 s->label, h->accmode == O_RDONLY ? "read-only" : "read-write",
			 s->flags & OPENDS_SOURCE_BLOCKING ? ", blocking" : "", how, own[0] ? "; " : "", own);
	else {
		unsigned threads, depth;
		size_t chunk;
		ods_src_engine_params(&threads, &depth, &chunk);
		snprintf(buf, n, "source %s (%s%s): pieces of %zu KiB%s, <= %u in flight%s, on the staging engine "
				 "(%u workers x %u chunks of %zu KiB); %s%s%s",
			 s->label, h->accmode == O_RDONLY ? "read-only" : "read-write",
			 s->flags & OPENDS_SOURCE_BLOCKING ? ", blocking, on the engine's workers" : "",
			 s->unit >> 10, s->max_io ? " (at most max_io)" : "", ops, caps, threads, depth, chunk >> 10,
			 how, own[0] ? "; " : "", own);
	}
}
