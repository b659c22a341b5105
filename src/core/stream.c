/*
 * Stream-ordered I/O, two ways:
 *  - on the accelerator's own streams, when the layer has stream hooks
 *    (cuda): each operation is enqueued on the caller's stream through
 *    accel->stream_enqueue; when the stream reaches it, the layer calls
 *    astart() on a library thread, which reads the arguments, starts the
 *    I/O on the backend's async engine and, on completion, lets the stream
 *    go on (accel->stream_signal). The submitter never waits.
 *  - on library-owned host queues (host, hostdev): what a stream is when
 *    there is no accelerator stream to order against. Each queue runs its
 *    operations one after another on the backend's async engine.
 * Either way the arguments behind the caller's pointers are read when the
 * stream reaches the operation.
 */
#include <stdlib.h>
#include <string.h>

#include "ods.h"

#define KNOWN_FLAGS                                                                                     \
	(OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET | OPENDS_STREAM_FIXED_FILE_SIZE | \
	 OPENDS_STREAM_PAGE_ALIGNED_INPUTS)

struct sop;

struct hstream {
	pthread_mutex_t lock;
	pthread_cond_t idle;
	struct sop *head, *tail;
	bool running;
	bool registered;
	unsigned flags;
};

/* What a stream operation was given. The values behind the pointers are
 * read only when the stream reaches the operation (sargs_start). */
struct sargs {
	int opcode;
	opends_handle_t fh;
	const void *buf;
	size_t *size;
	off_t *file_offset, *buf_offset;
	ssize_t *result;
};

/* The stream reached the operation: read its arguments now and validate
 * them into io. true: io is ready to submit; false: the operation is over
 * (an argument error, or nothing to move) and *result holds its result. */
static bool sargs_start(const struct sargs *a, struct ods_io *io)
{
	size_t size = *a->size;
	ssize_t r = ods_io_prepare(io, a->opcode, a->fh, a->buf, size, *a->file_offset, *a->buf_offset);
	if (r < 0 || size == 0) {
		*a->result = r;
		return false;
	}
	return true;
}

struct sop {
	struct ods_io io;
	struct hstream *s;
	struct sop *next;
	struct sargs a;
};

static struct ods_slots streams; /* made by opends_stream_create */
static struct hstream default_stream;

/* ---- accelerator streams ---------------------------------------------- */

static bool accel_streams(void)
{
	return ods_drv.accel->stream_enqueue != NULL;
}

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
static unsigned ainflight; /* operations enqueued and not yet signalled */

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

struct aop {
	struct ods_io io;
	struct sargs a;
	void *token;
};

/* The operation is over: publish the result, let the stream go on, and
 * only then count it out (so close cannot tear the layer down under the
 * signal). */
static void aop_finish(struct aop *op, ssize_t r)
{
	void *token = op->token;
	*op->a.result = r;
	free(op);
	ods_drv.accel->stream_signal(token);
	pthread_mutex_lock(&astreams_lock);
	if (--ainflight == 0)
		pthread_cond_broadcast(&astreams_idle);
	pthread_mutex_unlock(&astreams_lock);
}

static void aop_done(struct ods_io *io)
{
	aop_finish(io->owner, io->result);
}

/* The stream reached the operation (on the layer's dispatcher thread). */
static void astart(void *arg, void *token)
{
	struct aop *op = arg;
	op->token = token;
	if (!sargs_start(&op->a, &op->io)) {
		aop_finish(op, *op->a.result);
		return;
	}
	op->io.owner = op;
	op->io.done = aop_done;
	/* the dispatcher serves every stream: never wait for room here */
	ods_io_submit(&op->io, false);
}

static opends_error_t aenqueue(const char *fn, const struct sargs *a, opends_stream_t stream)
{
	if (ods_drv.accel->check_context) {
		int rc = ods_drv.accel->check_context();
		if (rc)
			return ods_err(ods_fail(rc, "%s: the calling thread's accelerator context is not the one "
						    "captured at opends_driver_open", fn),
				       0);
	}
	struct aop *op = calloc(1, sizeof(*op));
	if (!op)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", fn), ENOMEM);
	op->a = *a;
	pthread_mutex_lock(&astreams_lock);
	ainflight++;
	pthread_mutex_unlock(&astreams_lock);
	int rc = ods_drv.accel->stream_enqueue(stream, astart, op);
	if (rc) {
		free(op);
		pthread_mutex_lock(&astreams_lock);
		if (--ainflight == 0)
			pthread_cond_broadcast(&astreams_idle);
		pthread_mutex_unlock(&astreams_lock);
		return ods_err(rc, 0);
	}
	return ods_ok();
}

static void astreams_fini(void)
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
}

static void hstream_init(struct hstream *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->idle, NULL);
}

static void hstream_sync(struct hstream *s)
{
	pthread_mutex_lock(&s->lock);
	while (s->running)
		pthread_cond_wait(&s->idle, &s->lock);
	pthread_mutex_unlock(&s->lock);
}

static void hstream_free(void *p)
{
	struct hstream *s = p;
	hstream_sync(s);
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->lock);
	if (s != &default_stream)
		free(s);
}

int ods_streams_init(void)
{
	ods_slots_init(&streams);
	hstream_init(&default_stream);
	return 0;
}

void ods_streams_fini(void)
{
	if (accel_streams())
		astreams_fini();
	ods_slots_fini(&streams, hstream_free);
	hstream_free(&default_stream);
}

static struct hstream *lookup(opends_stream_t stream)
{
	return stream ? ods_slots_get(&streams, (uint64_t)(uintptr_t)stream) : &default_stream;
}

static void pop_head(struct hstream *s)
{
	pthread_mutex_lock(&s->lock);
	s->head = s->head->next;
	if (!s->head)
		s->tail = NULL;
	pthread_mutex_unlock(&s->lock);
}

static void sop_done(struct ods_io *io);

/* Start the operation at the head of the queue, finishing at once those
 * that have nothing to move; the queue's "running" flag stays set until it
 * is empty. */
static void advance(struct hstream *s, bool may_block)
{
	for (;;) {
		pthread_mutex_lock(&s->lock);
		struct sop *op = s->head;
		if (!op) {
			s->running = false;
			pthread_cond_broadcast(&s->idle);
			pthread_mutex_unlock(&s->lock);
			return;
		}
		pthread_mutex_unlock(&s->lock);

		if (!sargs_start(&op->a, &op->io)) {
			pop_head(s);
			free(op);
			continue;
		}
		op->io.owner = op;
		op->io.done = sop_done;
		ods_io_submit(&op->io, may_block);
		return;
	}
}

static void sop_done(struct ods_io *io)
{
	struct sop *op = io->owner;
	struct hstream *s = op->s;
	*op->a.result = io->result;
	pop_head(s);
	free(op);
	/* called on an engine thread: chain without waiting for room */
	advance(s, false);
}

static opends_error_t enqueue(const char *fn, int opcode, opends_handle_t fh, const void *buf, size_t *size,
			      off_t *file_offset, off_t *buf_offset, ssize_t *result, opends_stream_t stream)
{
	if (!ods_is_open())
		return ods_err(ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "%s: the driver is not open", fn), 0);
	const char *null = !fh ? "fh" : !buf ? "buf" : !size ? "size" : !file_offset ? "file_offset"
		: !buf_offset ? "buf_offset" : !result ? (opcode == OPENDS_READ ? "bytes_read" : "bytes_written")
							: NULL;
	if (null)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "%s: %s is NULL", fn, null), 0);
	if (!ods_handle_lookup(fh))
		return ods_err(ods_fail(OPENDS_HANDLE_NOT_REGISTERED, "%s: fh is not a registered handle", fn), 0);
	const struct sargs args = { opcode, fh, buf, size, file_offset, buf_offset, result };
	if (accel_streams())
		return aenqueue(fn, &args, stream);
	struct hstream *s = lookup(stream);
	if (!s)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "%s: stream %p was not made by opends_stream_create", fn,
					stream),
			       0);
	struct sop *op = calloc(1, sizeof(*op));
	if (!op)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", fn), ENOMEM);
	op->s = s;
	op->a = args;

	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	bool start = !s->running;
	s->running = true;
	pthread_mutex_unlock(&s->lock);
	if (start)
		advance(s, true);
	return ods_ok();
}

OPENDS_API opends_error_t opends_stream_read(opends_handle_t fh, void *buf, size_t *size, off_t *file_offset,
					     off_t *buf_offset, ssize_t *bytes_read, opends_stream_t stream)
{
	return enqueue("opends_stream_read", OPENDS_READ, fh, buf, size, file_offset, buf_offset, bytes_read,
		       stream);
}

OPENDS_API opends_error_t opends_stream_write(opends_handle_t fh, const void *buf, size_t *size,
					      off_t *file_offset, off_t *buf_offset, ssize_t *bytes_written,
					      opends_stream_t stream)
{
	return enqueue("opends_stream_write", OPENDS_WRITE, fh, buf, size, file_offset, buf_offset, bytes_written,
		       stream);
}

OPENDS_API opends_error_t opends_stream_create(opends_stream_t *stream)
{
	if (!ods_is_open())
		return ods_err(ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "opends_stream_create: the driver is not open"),
			       0);
	if (!stream)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_create: stream is NULL"), 0);
	if (accel_streams()) {
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
	struct hstream *s = malloc(sizeof(*s));
	if (!s)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_stream_create: out of memory"), ENOMEM);
	hstream_init(s);
	uint64_t t = ods_slots_add(&streams, s);
	if (!t) {
		hstream_free(s);
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_stream_create: out of memory"), ENOMEM);
	}
	*stream = (opends_stream_t)(uintptr_t)t;
	return ods_ok();
}

OPENDS_API opends_error_t opends_stream_destroy(opends_stream_t stream)
{
	if (!ods_is_open())
		return ods_err(ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "opends_stream_destroy: the driver is not open"),
			       0);
	if (accel_streams()) {
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
						"opends_stream_destroy: stream %p was not made by opends_stream_create",
						stream),
				       0);
		int rc = ods_drv.accel->stream_destroy(stream);
		return rc ? ods_err(rc, 0) : ods_ok();
	}
	struct hstream *s = stream ? ods_slots_take(&streams, (uint64_t)(uintptr_t)stream) : NULL;
	if (!s)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_stream_destroy: stream %p was not made by opends_stream_create", stream),
			       0);
	hstream_free(s);
	return ods_ok();
}

OPENDS_API opends_error_t opends_stream_register(opends_stream_t stream, unsigned flags)
{
	if (!ods_is_open())
		return ods_err(ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "opends_stream_register: the driver is not open"),
			       0);
	if (flags & ~KNOWN_FLAGS)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_register: unknown flag bits 0x%x",
					flags & ~KNOWN_FLAGS),
			       0);
	if (accel_streams()) {
		/* any stream of the accelerator may be registered, the NULL
		 * (default) stream included */
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
	struct hstream *s = lookup(stream);
	if (!s)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_register: unknown stream %p", stream), 0);
	pthread_mutex_lock(&s->lock);
	s->registered = true;
	s->flags = flags;
	pthread_mutex_unlock(&s->lock);
	return ods_ok();
}

OPENDS_API opends_error_t opends_stream_deregister(opends_stream_t stream)
{
	if (!ods_is_open())
		return ods_err(
			ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "opends_stream_deregister: the driver is not open"), 0);
	struct hstream *s = accel_streams() ? NULL : lookup(stream);
	bool was = false;
	if (accel_streams()) {
		pthread_mutex_lock(&astreams_lock);
		struct astream *a = astream_find(stream, false);
		if (a && a->registered) {
			was = true;
			a->registered = false;
			a->flags = 0;
			astream_trim(a);
		}
		pthread_mutex_unlock(&astreams_lock);
	} else if (s) {
		pthread_mutex_lock(&s->lock);
		was = s->registered;
		s->registered = false;
		s->flags = 0;
		pthread_mutex_unlock(&s->lock);
	}
	if (!was)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_deregister: stream %p is not registered",
					stream),
			       0);
	return ods_ok();
}

OPENDS_API opends_error_t opends_stream_synchronize(opends_stream_t stream)
{
	if (!ods_is_open())
		return ods_err(
			ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "opends_stream_synchronize: the driver is not open"), 0);
	if (accel_streams()) {
		/* the stream holds every operation until it completed, so
		 * waiting for the stream waits for them too */
		int rc = ods_drv.accel->stream_sync(stream);
		return rc ? ods_err(rc, 0) : ods_ok();
	}
	struct hstream *s = lookup(stream);
	if (!s)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_synchronize: unknown stream %p", stream),
			       0);
	hstream_sync(s);
	return ods_ok();
}
