/* The host accelerator layer: no device. In "host" mode every pointer is
 * host memory; in "hostdev" mode every pointer is treated as device memory
 * of a simulated device whose copies are memcpy, so that each backend's
 * staging path (slots, copies, ordering) runs and is tested without a GPU.
 * Neither has a context to check or anything to pin.
 *
 * hostdev also simulates the device's streams, so the core's stream
 * operations (src/core/stream.c) run the commands they queue on a CUDA
 * stream, in the same order and with the same rules: a stream is a thread
 * running its commands one after another; a gate blocks it until opened;
 * a host function only starts work elsewhere. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ods.h"

static int host_open(const struct ods_config *cfg, char *why, size_t why_len)
{
	(void)cfg;
	(void)why;
	(void)why_len;
	return 0;
}

static void host_close(void)
{
}

static enum ods_mem_kind host_classify(const void *p)
{
	(void)p;
	return ODS_MEM_HOST;
}

static enum ods_mem_kind hostdev_classify(const void *p)
{
	(void)p;
	return ODS_MEM_DEVICE;
}

static int host_copy(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

const struct ods_accel ods_accel_host = {
	.name = "host",
	.open = host_open,
	.close = host_close,
	.classify = host_classify,
	.copy_to_device = host_copy,
	.copy_to_host = host_copy,
};

/* ---- hostdev's simulated streams ----------------------------------------- */

enum { CMD_CALL, CMD_WAIT, CMD_COPY, CMD_MARK };

struct sim_gate {
	atomic_uint open;
};

struct cmd {
	struct cmd *next;
	int kind;
	void (*fn)(void *arg);
	void *arg;
	struct sim_gate *gate;
	void *dst;
	const void *src;
	size_t n;
	atomic_uint *counter;
	uint32_t value;
};

struct sim_stream {
	struct sim_stream *next; /* the live streams, to refuse unknown ones */
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* new command, stop, or idle */
	struct cmd *head, *tail;
	bool stop;
	pthread_t th;
};

static struct {
	pthread_mutex_t lock; /* the live list and the default stream */
	struct sim_stream *live;
	struct sim_stream *dflt;
} S = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void *sim_main(void *arg)
{
	struct sim_stream *st = arg;
	pthread_mutex_lock(&st->lock);
	for (;;) {
		while (!st->head && !st->stop)
			pthread_cond_wait(&st->cond, &st->lock);
		struct cmd *c = st->head;
		if (!c)
			break;
		pthread_mutex_unlock(&st->lock);
		switch (c->kind) {
		case CMD_CALL:
			c->fn(c->arg);
			break;
		case CMD_WAIT:
			/* a gate opens once, from anywhere: poll it as the
			 * device does, politely */
			while (!atomic_load_explicit(&c->gate->open, memory_order_acquire)) {
				struct timespec ts = { 0, 20000 };
				nanosleep(&ts, NULL);
			}
			free(c->gate);
			break;
		case CMD_MARK:
			atomic_store_explicit(c->counter, c->value, memory_order_release);
			break;
		default:
			memcpy(c->dst, c->src, c->n);
			break;
		}
		pthread_mutex_lock(&st->lock);
		st->head = c->next;
		if (!st->head)
			st->tail = NULL;
		free(c);
		pthread_cond_broadcast(&st->cond);
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

static struct sim_stream *sim_new(void)
{
	struct sim_stream *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->cond, NULL);
	if (pthread_create(&st->th, NULL, sim_main, st)) {
		pthread_cond_destroy(&st->cond);
		pthread_mutex_destroy(&st->lock);
		free(st);
		return NULL;
	}
	return st;
}

static void sim_sync(struct sim_stream *st)
{
	pthread_mutex_lock(&st->lock);
	while (st->head)
		pthread_cond_wait(&st->cond, &st->lock);
	pthread_mutex_unlock(&st->lock);
}

static void sim_free(struct sim_stream *st)
{
	pthread_mutex_lock(&st->lock);
	st->stop = true;
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
	pthread_join(st->th, NULL); /* runs what is queued first */
	pthread_cond_destroy(&st->cond);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* The stream behind a caller's name: NULL is the default stream, made on
 * first use; anything not made here is refused (NULL back). */
static struct sim_stream *sim_find(void *stream)
{
	pthread_mutex_lock(&S.lock);
	struct sim_stream *st = NULL;
	if (!stream) {
		if (!S.dflt)
			S.dflt = sim_new();
		st = S.dflt;
	} else {
		for (st = S.live; st && st != stream; st = st->next)
			;
	}
	pthread_mutex_unlock(&S.lock);
	return st;
}

/* Why sim_find gave NULL. */
static int sim_refused(void *stream)
{
	if (!stream)
		return ods_fail(OPENDS_NOMEM_ERROR, "hostdev: could not make the default stream");
	return ods_fail(OPENDS_INVALID_VALUE, "hostdev: %p is not a stream of this device", stream);
}

/* Queue a copy of cmd on the stream. */
static int sim_push(void *stream, struct cmd cmd)
{
	struct sim_stream *st = sim_find(stream);
	if (!st)
		return sim_refused(stream);
	struct cmd *c = malloc(sizeof(*c));
	if (!c)
		return ods_fail(OPENDS_NOMEM_ERROR, "hostdev: out of memory for a stream command");
	*c = cmd;
	c->next = NULL;
	pthread_mutex_lock(&st->lock);
	if (st->tail)
		st->tail->next = c;
	else
		st->head = c;
	st->tail = c;
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

static int sim_stream_create(void **stream)
{
	struct sim_stream *st = sim_new();
	if (!st)
		return ods_fail(OPENDS_NOMEM_ERROR, "hostdev: could not make a stream");
	pthread_mutex_lock(&S.lock);
	st->next = S.live;
	S.live = st;
	pthread_mutex_unlock(&S.lock);
	*stream = st;
	return 0;
}

static int sim_stream_destroy(void *stream)
{
	pthread_mutex_lock(&S.lock);
	struct sim_stream **pp = &S.live;
	while (*pp && *pp != stream)
		pp = &(*pp)->next;
	struct sim_stream *st = *pp;
	if (st)
		*pp = st->next;
	pthread_mutex_unlock(&S.lock);
	if (!st)
		return ods_fail(OPENDS_INVALID_VALUE, "hostdev: %p is not a stream of this device", stream);
	sim_free(st);
	return 0;
}

static int sim_stream_sync(void *stream)
{
	struct sim_stream *st = sim_find(stream);
	if (!st)
		return sim_refused(stream);
	sim_sync(st);
	return 0;
}

static int sim_stream_call(void *stream, void (*fn)(void *arg), void *arg)
{
	return sim_push(stream, (struct cmd){ .kind = CMD_CALL, .fn = fn, .arg = arg });
}

static void *sim_gate_get(void)
{
	return calloc(1, sizeof(struct sim_gate));
}

static void sim_gate_put(void *gate)
{
	free(gate);
}

static int sim_stream_wait(void *stream, void *gate)
{
	/* on failure the gate is lost (it may still be opened): left alone */
	return sim_push(stream, (struct cmd){ .kind = CMD_WAIT, .gate = gate });
}

static void sim_gate_open(void *gate)
{
	struct sim_gate *g = gate;
	atomic_store_explicit(&g->open, 1, memory_order_release);
}

static int sim_stream_copy(void *stream, void *dst, const void *src, size_t n, bool to_device)
{
	(void)to_device;
	return sim_push(stream, (struct cmd){ .kind = CMD_COPY, .dst = dst, .src = src, .n = n });
}

static void *sim_counter_get(void)
{
	return calloc(1, sizeof(atomic_uint));
}

static int sim_stream_mark(void *stream, void *counter, uint32_t value)
{
	return sim_push(stream, (struct cmd){ .kind = CMD_MARK, .counter = counter, .value = value });
}

static uint32_t sim_counter_read(void *counter)
{
	return atomic_load_explicit((atomic_uint *)counter, memory_order_acquire);
}

/* the core has destroyed the streams it made and drained every operation */
static void hostdev_close(void)
{
	pthread_mutex_lock(&S.lock);
	struct sim_stream *d = S.dflt, *live = S.live;
	S.dflt = NULL;
	S.live = NULL;
	pthread_mutex_unlock(&S.lock);
	if (d)
		sim_free(d);
	/* streams made through the accelerator and never destroyed */
	for (struct sim_stream *n; live; live = n) {
		n = live->next;
		sim_free(live);
	}
}

const struct ods_accel ods_accel_hostdev = {
	.name = "hostdev",
	.open = host_open,
	.close = hostdev_close,
	.classify = hostdev_classify,
	.copy_to_device = host_copy,
	.copy_to_host = host_copy,
	.stream_create = sim_stream_create,
	.stream_destroy = sim_stream_destroy,
	.stream_sync = sim_stream_sync,
	.stream_call = sim_stream_call,
	.gate_get = sim_gate_get,
	.gate_put = sim_gate_put,
	.stream_wait = sim_stream_wait,
	.gate_open = sim_gate_open,
	.stream_copy = sim_stream_copy,
	.counter_get = sim_counter_get,
	.counter_put = sim_gate_put, /* both are plain allocations */
	.stream_mark = sim_stream_mark,
	.counter_read = sim_counter_read,
};
