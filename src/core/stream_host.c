/*
 * Stream-ordered I/O on library-owned host queues: what a stream is when
 * there is no accelerator stream to order against (the "host" layer). A
 * stream is a queue of operations run one after another on the backend's
 * async engine; each reads its arguments when it reaches the head.
 */
#include <stdlib.h>
#include <string.h>

#include "stream.h"

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
	struct ods_sargs a;
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

static int host_init(void)
{
	ods_slots_init(&streams);
	hstream_init(&default_stream);
	return 0;
}

static void host_fini(void)
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
		/* on a library thread (sop_done) too, the handle looked up is
		 * held until the submit counted its request (rel: a deregister
		 * and a new registration in between could reuse it) */
		ODS_HOLD_SCOPE();
		pthread_mutex_lock(&s->lock);
		struct sop *op = s->head;
		if (!op) {
			s->running = false;
			pthread_cond_broadcast(&s->idle);
			pthread_mutex_unlock(&s->lock);
			return;
		}
		pthread_mutex_unlock(&s->lock);

		size_t size;
		off_t foff, boff;
		ssize_t r = ods_sargs_read(&op->a, &op->io, &size, &foff, &boff);
		if (r < 0 || size == 0) {
			*op->a.result = r; /* an argument error, or nothing to move */
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

static opends_error_t host_enqueue(const char *fn, const struct ods_sargs *a, opends_stream_t stream)
{
	struct hstream *s = lookup(stream);
	if (!s)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "%s: stream %p was not made by opends_stream_create", fn,
					stream),
			       0);
	struct sop *op = calloc(1, sizeof(*op));
	if (!op)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", fn), ENOMEM);
	op->s = s;
	op->a = *a;

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

static opends_error_t host_create(opends_stream_t *stream)
{
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

static opends_error_t host_destroy(opends_stream_t stream)
{
	struct hstream *s = stream ? ods_slots_take(&streams, (uint64_t)(uintptr_t)stream) : NULL;
	if (!s)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_stream_destroy: stream %p was not made by opends_stream_create", stream),
			       0);
	hstream_free(s);
	return ods_ok();
}

static opends_error_t host_reg(opends_stream_t stream, unsigned flags)
{
	struct hstream *s = lookup(stream);
	if (!s)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_register: unknown stream %p", stream), 0);
	pthread_mutex_lock(&s->lock);
	s->registered = true;
	s->flags = flags;
	pthread_mutex_unlock(&s->lock);
	return ods_ok();
}

static bool host_dereg(opends_stream_t stream)
{
	struct hstream *s = lookup(stream);
	if (!s)
		return false;
	pthread_mutex_lock(&s->lock);
	bool was = s->registered;
	s->registered = false;
	s->flags = 0;
	pthread_mutex_unlock(&s->lock);
	return was;
}

static opends_error_t host_sync(opends_stream_t stream)
{
	struct hstream *s = lookup(stream);
	if (!s)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_synchronize: unknown stream %p", stream),
			       0);
	hstream_sync(s);
	return ods_ok();
}

static void host_forget(void)
{
	ods_slots_init(&streams);
	hstream_init(&default_stream);
}

const struct ods_stream_engine ods_stream_host = {
	.init = host_init,
	.fini = host_fini,
	.create = host_create,
	.destroy = host_destroy,
	.reg = host_reg,
	.dereg = host_dereg,
	.enqueue = host_enqueue,
	.sync = host_sync,
	.forget = host_forget,
};
