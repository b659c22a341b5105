/*
 * A source for the stream tests (test_stream_order.c, tests/gpu): an object
 * in memory whose requests complete late by offset: every fourth unit
 * (MiB) of it answers late_us late, the others at once, from two
 * completion threads. Pieces of one stream read holding a late unit then
 * finish after the pieces behind them; L.reordered counts completions at a
 * lower offset than the one before.
 * Also the cases both tests run (late_out_of_order, late_many), on memory
 * each gives through struct late_mem: host memory (hostdev's "device"
 * memory) or CUDA device memory.
 */
#ifndef OPENDS_TEST_STREAM_LATE_H
#define OPENDS_TEST_STREAM_LATE_H

#include <pthread.h>
#include <stdatomic.h>

#include "test_stream_common.h"

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

#define LATE_FIXED \
	(OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET | OPENDS_STREAM_FIXED_FILE_SIZE)

/* Where the reads of the shared cases land. */
struct late_mem {
	void *(*alloc)(size_t n);                  /* n bytes, each T_CANARY */
	uint8_t *(*view)(void *p, size_t n);       /* its bytes on the host */
	void (*unview)(uint8_t *v);                /* done with a view */
	void (*release)(void *p);
};

/* Reads of many pieces of h (fsize bytes, oracle), pieces finishing out of
 * order: exact bytes, the bytes around the target untouched. */
static void late_out_of_order(const struct late_mem *m, opends_handle_t h, size_t fsize, const uint8_t *oracle,
			      opends_stream_t s, const char *what)
{
	t_phase = what;
	const struct {
		off_t foff;
		size_t size;
	} c[] = { { 0, fsize }, { 4097, 19 * T_MiB + 3 }, { (off_t)(fsize - 9 * T_MiB - 5), 12 * T_MiB }, { 77, 5000 } };
	long before = atomic_load(&L.reordered);
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		size_t n = c[i].size + 9;
		void *d = m->alloc(n);
		struct sop a = { c[i].size, c[i].foff, 9, SENT };
		OK(opends_stream_read(h, d, &a.size, &a.foff, &a.boff, &a.res, s));
		OK(opends_stream_synchronize(s));
		size_t want = t_expect_read(fsize, (uint64_t)c[i].foff, c[i].size);
		CHECKF(a.res == (ssize_t)want, "%s case %zu: read gave %zd (%s), expected %zu", what, i, a.res,
		       t_errname(a.res), want);
		uint8_t *buf = m->view(d, n);
		VERIFY_CANARY(buf, 9, "%s case %zu: before the target", what, i);
		VERIFY(buf + 9, oracle + c[i].foff, want, "%s case %zu: data", what, i);
		VERIFY_CANARY(buf + 9 + want, c[i].size - want, "%s case %zu: past the bytes returned", what, i);
		m->unview(buf);
		m->release(d);
	}
	long r = atomic_load(&L.reordered) - before;
	/* the test means nothing unless pieces did finish out of order */
	CHECKF(r > 0, "%s: no request of the late source finished before an earlier one", what);
	printf("%s: %ld completions out of order, bytes exact\n", what, r);
}

/* 256 streams (32x a GPU's default hardware queues), 12 reads of h each
 * (fsize bytes, oracle), all queued before any is awaited, half of the
 * streams fixed; mostly small reads, one in 97 of many pieces. */
static void late_many(const struct late_mem *m, opends_handle_t h, size_t fsize, const uint8_t *oracle,
		      const char *what)
{
	t_phase = what;
	enum { NS = 256, PER = 12 };
	static opends_stream_t st[NS];
	static struct sop o[NS][PER];
	static size_t at[NS][PER];
	size_t total = 0;
	for (int i = 0; i < NS; i++)
		for (int j = 0; j < PER; j++) {
			size_t k = (size_t)i * PER + (size_t)j;
			size_t len = k % 97 == 5 ? 9 * T_MiB + k : 1 + (k * 7919) % (48 * T_KiB);
			o[i][j] = (struct sop){ len, (off_t)(k * 131071 % (fsize - len)), (off_t)total, SENT };
			at[i][j] = total;
			total += len + 1; /* one canary byte between targets */
		}
	void *d = m->alloc(total);
	double t0 = t_now();
	for (int i = 0; i < NS; i++) {
		OK(opends_stream_create(&st[i]));
		if (i % 2)
			OK(opends_stream_register(st[i], LATE_FIXED));
	}
	for (int j = 0; j < PER; j++)
		for (int i = 0; i < NS; i++)
			OK(opends_stream_read(h, d, &o[i][j].size, &o[i][j].foff, &o[i][j].boff, &o[i][j].res, st[i]));
	for (int i = NS - 1; i >= 0; i--)
		OK(opends_stream_synchronize(st[i]));
	double t = t_now() - t0;
	uint8_t *buf = m->view(d, total);
	for (int i = 0; i < NS; i++) {
		for (int j = 0; j < PER; j++) {
			size_t len = o[i][j].size;
			CHECKF(o[i][j].res == (ssize_t)len, "%s: stream %d op %d gave %zd (%s)", what, i, j, o[i][j].res,
			       t_errname(o[i][j].res));
			VERIFY(buf + at[i][j], oracle + o[i][j].foff, len, "%s: stream %d op %d", what, i, j);
			VERIFY_CANARY(buf + at[i][j] + len, 1, "%s: after stream %d op %d", what, i, j);
		}
		if (i % 2)
			OK(opends_stream_deregister(st[i]));
		OK(opends_stream_destroy(st[i]));
	}
	printf("%s: %d streams x %d reads exact in %.2f s\n", what, NS, PER, t);
	m->unview(buf);
	m->release(d);
}

/* Both tests' two streams: s reads its values when it gets there, sf is
 * registered with fixed values. */
static void late_streams(opends_stream_t *s, opends_stream_t *sf)
{
	OK(opends_stream_create(s));
	OK(opends_stream_create(sf));
	OK(opends_stream_register(*sf, LATE_FIXED));
}

/* Both tests' end: the streams, the handles, the source's threads, the
 * file, the driver. */
static void late_end(opends_stream_t s, opends_stream_t sf, opends_handle_t late, opends_handle_t file, int fd)
{
	OK(opends_stream_deregister(sf));
	OK(opends_stream_destroy(sf));
	OK(opends_stream_destroy(s));
	OK(opends_handle_deregister(late));
	OK(opends_handle_deregister(file));
	late_stop();
	close(fd);
	OK(opends_driver_close());
}

#endif
