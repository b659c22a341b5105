/*
 * Stream-ordered I/O on library-owned host queues: what a stream is when
 * there is no accelerator stream to order against. Each queue runs its
 * operations one after another on the backend's async engine; the
 * arguments behind the caller's pointers are read when the queue reaches
 * the operation, as on an accelerator stream.
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

struct sop {
	struct ods_io io;
	struct hstream *s;
	struct sop *next;
	int opcode;
	opends_handle_t fh;
	const void *buf;
	size_t *size;
	off_t *file_offset, *buf_offset;
	ssize_t *result;
};

static struct ods_slots streams; /* made by opends_stream_create */
static struct hstream default_stream;

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

		size_t size = *op->size;
		ssize_t r = ods_io_prepare(&op->io, op->opcode, op->fh, op->buf, size, *op->file_offset,
					   *op->buf_offset);
		if (r < 0 || size == 0) {
			*op->result = r;
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
	*op->result = io->result;
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
	struct hstream *s = lookup(stream);
	if (!s)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "%s: stream %p was not made by opends_stream_create", fn,
					stream),
			       0);
	struct sop *op = calloc(1, sizeof(*op));
	if (!op)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", fn), ENOMEM);
	op->s = s;
	op->opcode = opcode;
	op->fh = fh;
	op->buf = buf;
	op->size = size;
	op->file_offset = file_offset;
	op->buf_offset = buf_offset;
	op->result = result;

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
	struct hstream *s = lookup(stream);
	bool was = false;
	if (s) {
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
	struct hstream *s = lookup(stream);
	if (!s)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_synchronize: unknown stream %p", stream),
			       0);
	hstream_sync(s);
	return ods_ok();
}
