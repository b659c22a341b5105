/*
 * A source for the stream tests (test_stream_order.c, tests/gpu): an object
 * in memory whose requests complete late by offset: every fourth unit
 * (MiB) of it answers late_us late, the others at once, from two
 * completion threads. Pieces of one stream read holding a late unit then
 * finish after the pieces behind them; L.reordered counts completions at a
 * lower offset than the one before.
 */
#ifndef OPENDS_TEST_STREAM_LATE_H
#define OPENDS_TEST_STREAM_LATE_H

#include <pthread.h>
#include <stdatomic.h>

#include "common.h"

#define UNIT T_MiB

struct job {
	void *buf;
	size_t len;
	uint64_t off;
	opends_source_done_t done;
	void *token;
	double due;
	struct job *next;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct job *q;
	bool stop;
	pthread_t th[2];
	atomic_long requests, reordered; /* completions at a lower offset than the one before */
	atomic_ullong last_off;
	atomic_uint late_us; /* how late a late unit is (set by the test) */
	const uint8_t *data; /* the object: size bytes */
	size_t size;
} L = { .lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void *late_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&L.lock);
	for (;;) {
		if (L.stop && !L.q)
			break;
		/* the job due first */
		struct job **best = NULL;
		for (struct job **pp = &L.q; *pp; pp = &(*pp)->next)
			if (!best || (*pp)->due < (*best)->due)
				best = pp;
		double now = t_now();
		if (!best || (*best)->due > now) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200000;
			if (ts.tv_nsec >= 1000000000)
				ts.tv_sec++, ts.tv_nsec -= 1000000000;
			pthread_cond_timedwait(&L.cv, &L.lock, &ts);
			continue;
		}
		struct job *j = *best;
		*best = j->next;
		pthread_mutex_unlock(&L.lock);
		size_t n = j->off >= L.size ? 0 : t_min(j->len, L.size - (size_t)j->off);
		memcpy(j->buf, L.data + j->off, n);
		unsigned long long prev = atomic_exchange(&L.last_off, (unsigned long long)j->off);
		if (j->off < prev)
			atomic_fetch_add(&L.reordered, 1);
		j->done(j->token, (ssize_t)n);
		free(j);
		pthread_mutex_lock(&L.lock);
	}
	pthread_mutex_unlock(&L.lock);
	return NULL;
}

static int late_read_async(void *src, void *buf, size_t len, uint64_t off, opends_source_done_t done, void *token)
{
	(void)src;
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	/* every fourth unit of the object is late: the pieces holding one
	 * finish after the pieces behind them */
	*j = (struct job){ buf, len, off, done, token, t_now() + ((off / UNIT) % 4 == 0 ? atomic_load(&L.late_us) * 1e-6 : 0), NULL };
	atomic_fetch_add(&L.requests, 1);
	pthread_mutex_lock(&L.lock);
	j->next = L.q;
	L.q = j;
	pthread_cond_signal(&L.cv);
	pthread_mutex_unlock(&L.lock);
	return 0;
}

/* A source of size bytes at data, every fourth MiB of it late_us late. */
static opends_handle_t late_register(const uint8_t *data, size_t size, unsigned late_us)
{
	L.data = data;
	L.size = size;
	atomic_store(&L.late_us, late_us);
	static const opends_source_ops_t ops = {
		.struct_size = sizeof(opends_source_ops_t),
		.name = "late",
		.read_async = late_read_async,
	};
	opends_source_desc_t d = {
		.struct_size = sizeof(d),
		.ops = &ops,
		.flags = OPENDS_SOURCE_RDONLY,
		.size = (int64_t)size,
		.io_unit = UNIT,
		.max_inflight = 64,
	};
	opends_handle_t h = NULL;
	OK(opends_handle_register_source(&h, &d));
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&L.th[i], NULL, late_thread, NULL) == 0);
	return h;
}

static void late_stop(void)
{
	pthread_mutex_lock(&L.lock);
	L.stop = true;
	pthread_cond_broadcast(&L.cv);
	pthread_mutex_unlock(&L.lock);
	for (int i = 0; i < 2; i++)
		pthread_join(L.th[i], NULL);
}

#endif
