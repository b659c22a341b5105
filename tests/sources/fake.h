/*
 * An in-process source for the source tests: an object in memory (or a
 * file, with use_fd: the differential test's source handles), served
 * through the async form (completed inline, or later from helper threads
 * in random order) or the blocking form. It records what the library asked
 * of it, so tests can check the contract from the source's side: pieces
 * inside the request, caps on what is in flight, no accelerator pointer
 * without OPENDS_SOURCE_DEVICE_MEMORY, release exactly once.
 */
#ifndef FAKE_SOURCE_H
#define FAKE_SOURCE_H

#include "../common.h"

#include <pthread.h>
#include <stdatomic.h>

enum fake_mode { FAKE_INLINE, FAKE_THREAD, FAKE_BLOCKING };

struct fake_job {
	struct fake *f;
	bool rd;
	void *buf;
	size_t len;
	uint64_t off;
	opends_source_done_t done;
	void *token;
	struct fake_job *next;
};

struct fake {
	enum fake_mode mode;
	int fd; /* with use_fd: the object is this file (pread/pwrite), not data */
	bool use_fd;
	pthread_mutex_t lock;
	uint8_t *data;
	size_t cap, size;
	/* what was asked */
	atomic_int inflight, max_inflight;
	atomic_long inflight_bytes, max_inflight_bytes;
	atomic_long calls, zero_len_calls, max_len;
	atomic_int released;
	/* every piece must lie inside [lo, hi) (set by the test) and never
	 * point into [forbid_lo, forbid_hi) */
	atomic_ullong lo, hi;
	atomic_int out_of_range;
	const uint8_t *forbid_lo, *forbid_hi;
	atomic_int forbidden;
	atomic_int saw_forbidden; /* pointers into that range (with the flag: expected) */
	/* pieces that cross a multiple of unit (set by the test: the
	 * descriptor's io_unit, where the library cuts pieces at it) */
	uint64_t unit;
	atomic_int crossed;
	/* faults */
	long long fail_at;  /* a piece covering this offset fails with -fail_errno */
	int fail_errno;
	int start_err;      /* read_async/write_async return this (negative) */
	bool overlong;      /* reads return one byte more than asked */
	long long short_at; /* reads stop here (a short piece), data continues after */
	unsigned delay_us;  /* thread mode: max random delay */
	/* completion threads */
	pthread_t th[2];
	pthread_cond_t cv;
	struct fake_job *q;
	unsigned nq;
	bool stop;
};

static inline void fake_track_start(struct fake *f, size_t len, uint64_t off, const void *buf)
{
	atomic_fetch_add(&f->calls, 1);
	if (!len)
		atomic_fetch_add(&f->zero_len_calls, 1);
	long l = (long)len, m = atomic_load(&f->max_len);
	while (l > m && !atomic_compare_exchange_weak(&f->max_len, &m, l))
		;
	int n = atomic_fetch_add(&f->inflight, 1) + 1, mi = atomic_load(&f->max_inflight);
	while (n > mi && !atomic_compare_exchange_weak(&f->max_inflight, &mi, n))
		;
	long b = atomic_fetch_add(&f->inflight_bytes, (long)len) + (long)len, mb = atomic_load(&f->max_inflight_bytes);
	while (b > mb && !atomic_compare_exchange_weak(&f->max_inflight_bytes, &mb, b))
		;
	if (off < atomic_load(&f->lo) || off + len > atomic_load(&f->hi))
		atomic_fetch_add(&f->out_of_range, 1);
	if (f->unit && len && off / f->unit != (off + len - 1) / f->unit)
		atomic_fetch_add(&f->crossed, 1);
	const uint8_t *p = buf;
	if (f->forbid_lo && p < f->forbid_hi && p + len > f->forbid_lo)
		atomic_fetch_add(&f->saw_forbidden, 1);
}

static inline void fake_track_end(struct fake *f, size_t len)
{
	atomic_fetch_sub(&f->inflight, 1);
	atomic_fetch_sub(&f->inflight_bytes, (long)len);
}

/* A file as the object: bytes up to len (reads: fewer only at EOF), or
 * -errno (a write that makes no progress: -EIO, as ods_pwrite_full). */
static inline ssize_t fake_fd_do(int fd, bool rd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t r = rd ? pread(fd, (char *)buf + done, len - done, (off_t)(off + done))
			       : pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0) {
			if (!rd)
				return -EIO;
			break;
		}
		done += (size_t)r;
	}
	return (ssize_t)done;
}

/* The transfer itself: bytes or -errno. */
static inline ssize_t fake_do(struct fake *f, bool rd, void *buf, size_t len, uint64_t off)
{
	if (f->fail_errno && (long long)off <= f->fail_at && f->fail_at < (long long)(off + len))
		return -f->fail_errno;
	if (f->use_fd)
		return fake_fd_do(f->fd, rd, buf, len, off);
	pthread_mutex_lock(&f->lock);
	ssize_t r;
	if (rd) {
		size_t end = f->size;
		if (f->short_at >= 0 && (long long)off < f->short_at && f->short_at < (long long)(off + len))
			end = (size_t)f->short_at;
		size_t n = off >= end ? 0 : t_min(len, end - (size_t)off);
		memcpy(buf, f->data + off, n);
		r = (ssize_t)n;
		if (f->overlong && n == len)
			r++;
	} else {
		if (off + len > f->cap) {
			size_t nc = (size_t)(off + len) * 2;
			f->data = realloc(f->data, nc);
			memset(f->data + f->cap, 0, nc - f->cap);
			f->cap = nc;
		}
		memcpy(f->data + off, buf, len);
		if (off + len > f->size)
			f->size = (size_t)(off + len);
		r = (ssize_t)len;
	}
	pthread_mutex_unlock(&f->lock);
	return r;
}

static inline void *fake_thread(void *arg)
{
	struct fake *f = arg;
	unsigned seed = (unsigned)(uintptr_t)pthread_self();
	pthread_mutex_lock(&f->lock);
	for (;;) {
		while (!f->q && !f->stop)
			pthread_cond_wait(&f->cv, &f->lock);
		if (!f->q)
			break;
		/* take a random queued job: completions come in any order */
		unsigned k = f->nq > 1 ? (unsigned)rand_r(&seed) % f->nq : 0;
		struct fake_job **pp = &f->q;
		while (k--)
			pp = &(*pp)->next;
		struct fake_job *j = *pp;
		*pp = j->next;
		f->nq--;
		pthread_mutex_unlock(&f->lock);
		if (f->delay_us)
			usleep((useconds_t)(rand_r(&seed) % f->delay_us));
		ssize_t r = fake_do(f, j->rd, j->buf, j->len, j->off);
		fake_track_end(f, j->len);
		j->done(j->token, r);
		free(j);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static inline int fake_start(struct fake *f, bool rd, void *buf, size_t len, uint64_t off, opends_source_done_t done,
			     void *token)
{
	fake_track_start(f, len, off, buf);
	if (f->start_err) {
		fake_track_end(f, len);
		return f->start_err;
	}
	if (f->mode == FAKE_INLINE) {
		ssize_t r = fake_do(f, rd, buf, len, off);
		fake_track_end(f, len);
		done(token, r);
		return 0;
	}
	struct fake_job *j = calloc(1, sizeof(*j));
	*j = (struct fake_job){ f, rd, buf, len, off, done, token, NULL };
	pthread_mutex_lock(&f->lock);
	j->next = f->q;
	f->q = j;
	f->nq++;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static inline int fake_read_async(void *src, void *buf, size_t len, uint64_t off, opends_source_done_t done, void *token)
{
	return fake_start(src, true, buf, len, off, done, token);
}
static inline int fake_write_async(void *src, const void *buf, size_t len, uint64_t off, opends_source_done_t done,
				   void *token)
{
	return fake_start(src, false, (void *)buf, len, off, done, token);
}
static inline ssize_t fake_read(void *src, void *buf, size_t len, uint64_t off)
{
	struct fake *f = src;
	fake_track_start(f, len, off, buf);
	ssize_t r = f->start_err ? f->start_err : fake_do(f, true, buf, len, off);
	fake_track_end(f, len);
	return r;
}
static inline ssize_t fake_write(void *src, const void *buf, size_t len, uint64_t off)
{
	struct fake *f = src;
	fake_track_start(f, len, off, buf);
	ssize_t r = f->start_err ? f->start_err : fake_do(f, false, (void *)buf, len, off);
	fake_track_end(f, len);
	return r;
}
static inline void fake_release(void *src)
{
	struct fake *f = src;
	atomic_fetch_add(&f->released, 1);
}
static inline int64_t fake_size(void *src)
{
	struct fake *f = src;
	return (int64_t)f->size;
}
static inline void fake_describe(void *src, char *buf, size_t len)
{
	struct fake *f = src;
	snprintf(buf, len, "fake object of %zu bytes", f->size);
}

static const opends_source_ops_t fake_ops = {
	.struct_size = sizeof(opends_source_ops_t),
	.name = "fake://obj",
	.read_async = fake_read_async,
	.write_async = fake_write_async,
	.read = fake_read,
	.write = fake_write,
	.size = fake_size,
	.release = fake_release,
	.describe = fake_describe,
};

static inline struct fake *fake_new(enum fake_mode mode, size_t size, t_patfn fn)
{
	struct fake *f = calloc(1, sizeof(*f));
	f->mode = mode;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cv, NULL);
	f->cap = size ? size : 4096;
	f->data = t_xmalloc(f->cap);
	if (fn)
		t_fill(f->data, 0, size, fn);
	f->size = size;
	f->fail_at = -1;
	f->short_at = -1;
	atomic_store(&f->hi, UINT64_MAX);
	if (mode == FAKE_THREAD) {
		f->delay_us = 200;
		for (int i = 0; i < 2; i++)
			pthread_create(&f->th[i], NULL, fake_thread, f);
	}
	return f;
}

static inline void fake_free(struct fake *f)
{
	if (f->mode == FAKE_THREAD) {
		pthread_mutex_lock(&f->lock);
		f->stop = true;
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->lock);
		for (int i = 0; i < 2; i++)
			pthread_join(f->th[i], NULL);
	}
	free(f->data);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cv);
	free(f);
}

static inline opends_source_desc_t fake_desc(struct fake *f)
{
	opends_source_desc_t d;
	memset(&d, 0, sizeof(d));
	d.struct_size = sizeof(d);
	d.ops = &fake_ops;
	d.src = f;
	d.flags = f->mode == FAKE_BLOCKING ? OPENDS_SOURCE_BLOCKING : 0;
	d.size = -1;
	return d;
}

static inline opends_handle_t fake_register(opends_source_desc_t *d)
{
	opends_handle_t fh = NULL;
	OK(opends_handle_register_source(&fh, d));
	return fh;
}

static inline const char *fake_mode_name(enum fake_mode m)
{
	return m == FAKE_INLINE ? "inline" : m == FAKE_THREAD ? "thread" : "blocking";
}

#endif
