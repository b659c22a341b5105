/* The host accelerator layer: no device. In "host" mode every pointer is
 * host memory; in "hostdev" mode every pointer is treated as device memory
 * of a simulated device whose copies are memcpy, so that each backend's
 * staging path (slots, copies, ordering) runs and is tested without a GPU.
 * Neither has a context to check or anything to pin.
 *
 * Several simulated devices: OPENDS_HOSTDEV_DEVICES=N (1 to 8, default 1)
 * at driver open. Device d >= 1 owns the addresses [HOSTDEV_BASE + d *
 * HOSTDEV_SPAN, + HOSTDEV_SPAN) (tests map memory there with
 * MAP_FIXED_NOREPLACE); every other pointer is device 0. A pointer is so
 * "tagged" with its device, and the per-device logic (which device an
 * operation runs on, a stream of one device with a buffer of another, the
 * fan-out's peer copies) runs in CI. Streams made with stream_create go to
 * devices 0, 1, ..., N-1, 0, ... in turn (as a program switching its
 * current device between creations would); the NULL stream is one stream
 * per device.
 *
 * hostdev also simulates the device's streams, so the core's stream
 * operations (src/core/stream.c) run the commands they queue on a CUDA
 * stream, in the same order and with the same rules: a stream is a thread
 * running its commands one after another; a gate blocks it until opened;
 * a host function only starts work elsewhere. */
#include <stdio.h>
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

static enum ods_mem_kind host_classify(const void *p, unsigned *dev)
{
	(void)p;
	*dev = 0;
	return ODS_MEM_HOST;
}

static unsigned host_device_count(void)
{
	return 0;
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
	.device_count = host_device_count,
	.copy_to_device = host_copy,
	.copy_to_host = host_copy,
};

/* ---- hostdev's simulated devices ------------------------------------------ */

#define HOSTDEV_MAX 8u
#define HOSTDEV_BASE ((uintptr_t)0x7e8000000000ull) /* in every sanitizer's application range */
#define HOSTDEV_SPAN ((uintptr_t)1 << 36)

static unsigned hostdev_n = 1; /* set at open, before any I/O */
/* Test-only failure injection (issue 18): OPENDS_HOSTDEV_FAIL_AFTER=N at
 * open makes every stream command after the first N fail, sticky, as a
 * CUDA context error would; commands already queued still run. Not a
 * configuration variable (config.c, README): tests set it. */
static long fail_after = -1;
static atomic_ulong pushed_cmds;
/* Test-only (issue 18): OPENDS_HOSTDEV_FAIL_QUEUED=1 at open makes a stream
 * wait that the injection fails reach the stream all the same (only its
 * call reports the failure), as CUDA's gate does when cuStreamWaitValue32
 * was queued and the cuStreamWriteValue32 after it failed
 * (cuda_streams.c): the core must open such a gate, or the stream hangs. */
static bool fail_queued;
/* The driver result code such a failure reports (backend_err), as CUDA
 * reports the sticky CUDA_ERROR_LAUNCH_FAILED it stands for
 * (tests/test_accel_errors.c). */
#define HOSTDEV_INJECTED_RESULT 719
/* Test-only (issue 18): OPENDS_HOSTDEV_NO_CALLS=1 at open refuses every
 * host function on a stream (stream_call fails, queues nothing), so a test
 * proves an operation runs without one. */
static bool no_calls;
/* Test-only (issue 18): OPENDS_HOSTDEV_QUEUE_MAX=N at open makes a push
 * wait while its stream has N commands queued, as CUDA blocks an async call
 * when a stream's queue is full (0 or unset: unbounded). */
static unsigned long queue_max;

/* Test-only simulated topology (like FAIL_AFTER, not configuration):
 * OPENDS_HOSTDEV_NUMA="n0,n1,..." gives device d the NUMA node nd (-1 or
 * missing: unknown), and OPENDS_HOSTDEV_NODES a folder standing for
 * /sys/devices/system/node (node<N>/cpulist), so that the workers' move to
 * a device's node (src/accel/near.c) is tested on one-node machines. */
static int hostdev_numa[HOSTDEV_MAX];

static int numa_parse(const char *v, char *why, size_t why_len)
{
	for (unsigned d = 0; d < HOSTDEV_MAX; d++)
		hostdev_numa[d] = -1;
	for (unsigned d = 0; v && *v; d++) {
		char *end;
		long n = strtol(v, &end, 10);
		if (end == v || (*end && (*end != ',' || !end[1])) || n < -1 || n > 1023 || d >= hostdev_n) {
			snprintf(why, why_len, "OPENDS_HOSTDEV_NUMA=%s: expected up to %u NUMA nodes (-1 to 1023), comma-separated",
				 getenv("OPENDS_HOSTDEV_NUMA"), hostdev_n);
			return OPENDS_INVALID_VALUE;
		}
		hostdev_numa[d] = (int)n;
		v = *end ? end + 1 : end;
	}
	return 0;
}

static int hostdev_open(const struct ods_config *cfg, char *why, size_t why_len)
{
	(void)cfg;
	const char *v = getenv("OPENDS_HOSTDEV_DEVICES");
	hostdev_n = 1;
	const char *f = getenv("OPENDS_HOSTDEV_FAIL_AFTER");
	fail_after = f && *f ? strtol(f, NULL, 10) : -1;
	const char *fq = getenv("OPENDS_HOSTDEV_FAIL_QUEUED");
	fail_queued = fq && !strcmp(fq, "1");
	const char *nc = getenv("OPENDS_HOSTDEV_NO_CALLS");
	no_calls = nc && !strcmp(nc, "1");
	const char *qm = getenv("OPENDS_HOSTDEV_QUEUE_MAX");
	queue_max = qm && *qm ? strtoul(qm, NULL, 10) : 0;
	atomic_store(&pushed_cmds, 0);
	if (v && *v) {
		char *end;
		unsigned long n = strtoul(v, &end, 10);
		if (*end || n < 1 || n > HOSTDEV_MAX) {
			snprintf(why, why_len, "OPENDS_HOSTDEV_DEVICES=%s: expected 1 to %u", v, HOSTDEV_MAX);
			return OPENDS_INVALID_VALUE;
		}
		hostdev_n = (unsigned)n;
	}
	int rc = numa_parse(getenv("OPENDS_HOSTDEV_NUMA"), why, why_len);
	if (rc)
		return rc;
	ods_accel_near_open(getenv("OPENDS_HOSTDEV_NODES"));
	return 0;
}

static enum ods_mem_kind hostdev_classify(const void *p, unsigned *dev)
{
	uintptr_t a = (uintptr_t)p;
	unsigned d = 0;
	if (a >= HOSTDEV_BASE + HOSTDEV_SPAN && a < HOSTDEV_BASE + (uintptr_t)hostdev_n * HOSTDEV_SPAN)
		d = (unsigned)((a - HOSTDEV_BASE) / HOSTDEV_SPAN);
	*dev = d;
	return ODS_MEM_DEVICE;
}

static unsigned hostdev_device_count(void)
{
	return hostdev_n;
}

/* Simulated devices: no bus or link; each reaches every other one
 * directly (peer copies are memmove), over no NVLink. */
static int hostdev_props(unsigned dev, struct opends_device_props *p)
{
	if (dev >= hostdev_n)
		return OPENDS_INVALID_VALUE;
	snprintf(p->layer, sizeof(p->layer), "hostdev");
	snprintf(p->name, sizeof(p->name), "simulated device");
	p->numa_node = hostdev_numa[dev];
	p->peers = ((1ull << hostdev_n) - 1) & ~(1ull << dev);
	return 0;
}

/* Peer copies are memcpy at once: nothing to wait for. */
static int hostdev_peer_copy(unsigned dst_dev, void *dst, unsigned src_dev, const void *src, size_t n)
{
	(void)dst_dev;
	(void)src_dev;
	memmove(dst, src, n);
	return 0;
}

static int hostdev_peer_wait(unsigned dst_dev)
{
	(void)dst_dev;
	return 0;
}

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
	unsigned dev;            /* the simulated device it belongs to */
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* new command, stop, or idle */
	struct cmd *head, *tail;
	unsigned nq;             /* commands queued */
	bool stop;
	pthread_t th;
};

static struct {
	pthread_mutex_t lock; /* the live list and the default streams */
	struct sim_stream *live;
	struct sim_stream *dflt[HOSTDEV_MAX]; /* one per device */
	unsigned next_dev;    /* where stream_create puts the next stream */
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
		st->nq--;
		free(c);
		pthread_cond_broadcast(&st->cond); /* also wakes a push waiting for room */
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

static struct sim_stream *sim_new(unsigned dev)
{
	struct sim_stream *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->dev = dev;
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->cond, NULL);
	if (ods_thread_start(&st->th, sim_main, st)) {
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

/* The stream behind a caller's name: NULL is device dev's default stream,
 * made on first use; anything not made here is refused (NULL back). */
static struct sim_stream *sim_find(unsigned dev, void *stream)
{
	pthread_mutex_lock(&S.lock);
	struct sim_stream *st = NULL;
	if (!stream) {
		if (dev < HOSTDEV_MAX && !S.dflt[dev])
			S.dflt[dev] = sim_new(dev);
		st = dev < HOSTDEV_MAX ? S.dflt[dev] : NULL;
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

/* OPENDS_HOSTDEV_FAIL_AFTER: this command fails (0 or the error) */
static int injected(void)
{
	if (fail_after >= 0 && atomic_fetch_add(&pushed_cmds, 1) >= (unsigned long)fail_after)
		return ods_fail_backend(OPENDS_DEVICE_DRIVER_ERROR, HOSTDEV_INJECTED_RESULT,
					"hostdev: injected stream failure after %ld commands (result %d)", fail_after,
					HOSTDEV_INJECTED_RESULT);
	return 0;
}

/* Queue a copy of cmd on the stream, unless the injection fails it. */
static int sim_queue(unsigned dev, void *stream, struct cmd cmd);
static int sim_push(unsigned dev, void *stream, struct cmd cmd)
{
	int rc = injected();
	return rc ? rc : sim_queue(dev, stream, cmd);
}

static int sim_queue(unsigned dev, void *stream, struct cmd cmd)
{
	struct sim_stream *st = sim_find(dev, stream);
	if (!st)
		return sim_refused(stream);
	struct cmd *c = malloc(sizeof(*c));
	if (!c)
		return ods_fail(OPENDS_NOMEM_ERROR, "hostdev: out of memory for a stream command");
	*c = cmd;
	c->next = NULL;
	pthread_mutex_lock(&st->lock);
	/* S.lock is not held here (sim_find released it) */
	while (queue_max && st->nq >= queue_max)
		pthread_cond_wait(&st->cond, &st->lock);
	st->nq++;
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
	pthread_mutex_lock(&S.lock);
	unsigned dev = S.next_dev++ % hostdev_n;
	pthread_mutex_unlock(&S.lock);
	struct sim_stream *st = sim_new(dev);
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

static bool sim_stream_idle(unsigned dev, void *stream)
{
	struct sim_stream *st = stream ? sim_find(dev, stream) : NULL;
	if (!st)
		return false;
	pthread_mutex_lock(&st->lock);
	bool idle = !st->head;
	pthread_mutex_unlock(&st->lock);
	return idle;
}

static int sim_stream_sync(void *stream)
{
	if (!stream) {
		/* every device's default stream that exists */
		for (unsigned d = 0; d < HOSTDEV_MAX; d++) {
			pthread_mutex_lock(&S.lock);
			struct sim_stream *st = S.dflt[d];
			pthread_mutex_unlock(&S.lock);
			if (st)
				sim_sync(st);
		}
		return 0;
	}
	struct sim_stream *st = sim_find(0, stream);
	if (!st)
		return sim_refused(stream);
	sim_sync(st);
	return 0;
}

static int sim_stream_device(void *stream, enum ods_mem_kind k, unsigned buf_dev, unsigned *dev)
{
	if (!stream) {
		*dev = k == ODS_MEM_DEVICE ? buf_dev : 0;
		return 0;
	}
	struct sim_stream *st = sim_find(0, stream);
	if (!st)
		return sim_refused(stream);
	if (k == ODS_MEM_DEVICE && st->dev != buf_dev)
		return ods_fail(OPENDS_CONTEXT_MISMATCH, "stream %p belongs to hostdev device %u, the buffer to device %u",
				stream, st->dev, buf_dev);
	*dev = st->dev;
	return 0;
}

static int sim_stream_call(unsigned dev, void *stream, void (*fn)(void *arg), void *arg)
{
	if (no_calls)
		return ods_fail(OPENDS_DEVICE_DRIVER_ERROR, "hostdev: host functions refused (OPENDS_HOSTDEV_NO_CALLS)");
	return sim_push(dev, stream, (struct cmd){ .kind = CMD_CALL, .fn = fn, .arg = arg });
}

static void *sim_gate_get(void)
{
	return calloc(1, sizeof(struct sim_gate));
}

static void sim_gate_put(void *gate)
{
	free(gate);
}

static int sim_stream_wait(unsigned dev, void *stream, void *gate)
{
	/* on failure the gate is lost (the core may still open it, and must
	 * if the wait reached the stream): left alone */
	struct cmd c = { .kind = CMD_WAIT, .gate = gate };
	int rc = injected();
	if (rc && fail_queued)
		sim_queue(dev, stream, c); /* half-queued: the wait is on the stream */
	return rc ? rc : sim_queue(dev, stream, c);
}

static void sim_gate_open(void *gate)
{
	struct sim_gate *g = gate;
	atomic_store_explicit(&g->open, 1, memory_order_release);
}

static int sim_stream_copy(unsigned dev, void *stream, void *dst, const void *src, size_t n, bool to_device)
{
	(void)to_device;
	return sim_push(dev, stream, (struct cmd){ .kind = CMD_COPY, .dst = dst, .src = src, .n = n });
}

static void *sim_counter_get(void)
{
	return calloc(1, sizeof(atomic_uint));
}

static int sim_stream_mark(unsigned dev, void *stream, void *counter, uint32_t value)
{
	return sim_push(dev, stream, (struct cmd){ .kind = CMD_MARK, .counter = counter, .value = value });
}

static uint32_t sim_counter_read(void *counter)
{
	return atomic_load_explicit((atomic_uint *)counter, memory_order_acquire);
}

/* the core has destroyed the streams it made and drained every operation */
static void hostdev_close(void)
{
	pthread_mutex_lock(&S.lock);
	struct sim_stream *d[HOSTDEV_MAX], *live = S.live;
	memcpy(d, S.dflt, sizeof(d));
	memset(S.dflt, 0, sizeof(S.dflt));
	S.live = NULL;
	S.next_dev = 0;
	pthread_mutex_unlock(&S.lock);
	for (unsigned i = 0; i < HOSTDEV_MAX; i++)
		if (d[i])
			sim_free(d[i]);
	/* streams made through the accelerator and never destroyed */
	for (struct sim_stream *n; live; live = n) {
		n = live->next;
		sim_free(live);
	}
}

static const struct ods_accel_streams hostdev_streams = {
	.stream_device = sim_stream_device,
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
	.stream_idle = sim_stream_idle,
};

/* in a forked child: the stream threads do not exist there and S.lock may
 * be held forever; leak the parent's streams */
static void hostdev_forget(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	S.lock = fresh;
	S.live = NULL;
	memset(S.dflt, 0, sizeof(S.dflt));
	S.next_dev = 0;
	ods_accel_near_forget();
}

/* A copy in two halves, recorded at begin and made at end, so the callers'
 * order of work around it (stage_ra.c) runs as on a GPU. */
static int hostdev_copy_begin(unsigned dev, void *dst, const void *src, size_t n, struct ods_copy_op *op)
{
	(void)dev;
	op->a = dst;
	op->b = src;
	op->n = n;
	return 0;
}

static int hostdev_copy_end(struct ods_copy_op *op)
{
	return host_copy(op->a, op->b, op->n);
}

const struct ods_accel ods_accel_hostdev = {
	.name = "hostdev",
	.open = hostdev_open,
	.close = hostdev_close,
	.forget = hostdev_forget,
	.classify = hostdev_classify,
	.device_count = hostdev_device_count,
	.device_props = hostdev_props,
	.copy_to_device = host_copy,
	.copy_to_host = host_copy,
	.copy_to_device_begin = hostdev_copy_begin,
	.copy_to_host_begin = hostdev_copy_begin, /* (a memcpy either way) */
	.copy_end = hostdev_copy_end,
	.peer_copy = hostdev_peer_copy,
	.peer_wait = hostdev_peer_wait,
	.streams = &hostdev_streams,
};
