/* The write caller legs (write16m, write8t): from destination memory to a
 * new file through OpenDS, the plain way (copy to pinned memory + pwrite)
 * and cuFile, then fdatasync; next to ceiling-write (pinned host memory
 * written O_DIRECT), measured before and after them, the higher kept. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <opends.h>
#ifdef BENCH_HAVE_URING
#include <liburing.h>
#endif

#include "callers.h"
#include "gpu.h"
#include "stats.h"

/* ---- write16m / write8t: from destination memory to a new file ------- */

struct wctx {
	struct caller *c;
	int fd;
	opends_handle_t fh;
	uint64_t size, span;
	atomic_int err;
};

struct warg {
	struct wctx *w;
	unsigned index;
	char *pinned; /* the plain way: this thread's staging */
};

static void *write_worker(void *arg)
{
	struct warg *a = arg;
	struct wctx *w = a->w;
	bool od = !strcmp(w->c->way, "opends");
	if (opt.use_gpu)
		gpu_bind_thread();
	uint64_t lo = a->index * w->span, hi = lo + w->span < w->size ? lo + w->span : w->size;
	for (uint64_t off = lo; off < hi && !atomic_load(&w->err); off += CALL) {
		size_t n = hi - off < CALL ? (size_t)(hi - off) : CALL;
		ssize_t put;
		if (st_expired()) {
			atomic_store(&w->err, -ETIMEDOUT);
			break;
		}
		if (od) {
			put = opends_sync_write(w->fh, w->c->dest, n, (off_t)off, (off_t)off);
		} else {
			put = dest_get(a->pinned, w->c->dest + off, n) ? -EIO : pwrite_full(w->fd, a->pinned, n, (off_t)off);
		}
		if (put >= 0 && (size_t)put != n)
			put = -EIO;
		if (put < 0) {
			atomic_store(&w->err, (int)put);
			break;
		}
		progress_add(n);
	}
	return NULL;
}

/* Read back 16 windows of the written file: the source held the big file. */
static int verify_file(const char *path, const struct ds_file *f, uint64_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char tmp[64 << 10];
	int rc = fd < 0 ? -errno : 0;
	for (unsigned w = 0; w < 16 && !rc && n; w++) {
		size_t len = n < sizeof(tmp) ? (size_t)n : sizeof(tmp);
		uint64_t off = (n - len) / 15 * w;
		if (pread_full(fd, tmp, len, (off_t)off) != (ssize_t)len || ds_check(f->seed, off, tmp, len)) {
			fprintf(stderr, "verify: %s differs from the source in the window at %" PRIu64 "\n", path, off);
			rc = -EILSEQ;
		}
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

static int write_leg(void *ctx, struct leg_result *r)
{
	struct caller *c = ctx;
	unsigned threads = !strcmp(c->mode, "write8t") ? WRITE_THREADS : 1;
	uint64_t size = c->dest_size;
	double c0;
	uint64_t t0;
	if (!strcmp(c->way, "cufile")) {
		progress_start(c->label, 0);
		cufile_write_leg(c->wpath, c->dest, size, threads, CALL, r);
		progress_stop();
	} else {
		bool od = !strcmp(c->way, "opends");
		struct wctx w = { .c = c, .size = size };
		w.span = ((size + threads - 1) / threads + 4095) & ~4095ull;
		unlink(c->wpath);
		struct warg args[WRITE_THREADS];
		for (unsigned i = 0; i < threads; i++)
			args[i] = (struct warg){ &w, i, od ? NULL : c->pinned + (size_t)i * CALL };
		begin(c, r, size, &c0, &t0);
		w.fd = od ? open_reg(c->wpath, O_RDWR | O_CREAT | O_TRUNC, &w.fh)
			  : open(c->wpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (w.fd < 0)
			r->error = od ? w.fd : -errno;
		if (!r->error)
			st_run_threads(threads, write_worker, args, sizeof(args[0]));
		if (!r->error)
			r->error = atomic_load(&w.err);
		if (w.fd >= 0 && fdatasync(w.fd) && !r->error)
			r->error = -errno;
		end(r, c0, t0);
		if (w.fd >= 0) {
			if (od)
				unreg(w.fh, w.fd);
			else
				close(w.fd);
		}
		r->bytes = r->error ? 0 : size;
		r->files = 1;
		snprintf(r->config, sizeof(r->config), "%s %u thread%s x 16 MiB + fdatasync",
			 od ? "opends_sync_write" : "copy to pinned + pwrite", threads, threads == 1 ? "" : "s");
	}
	if (!r->error)
		r->error = verify_file(c->wpath, &c->ds->files[0], size);
	unlink(c->wpath);
	return r->error;
}

/* ---- ceiling-write: pinned host memory written O_DIRECT -------------- */

#define CW_BLOCK ((size_t)1 << 20) /* the io_uring shapes' write size */

struct cw {
	int fd;
	char *buf;
	uint64_t size, span;
	unsigned qd; /* 0: pwrite of 16 MiB; else io_uring, qd x 1 MiB in flight */
	atomic_int err;
};

struct cw_arg {
	struct cw *w;
	unsigned index;
};

static void *cw_worker(void *arg)
{
	struct cw_arg *a = arg;
	struct cw *w = a->w;
	uint64_t lo = a->index * w->span, hi = lo + w->span < w->size ? lo + w->span : w->size;
	char *buf = w->buf + (size_t)(a->index % WRITE_THREADS) * CALL; /* (threads may share: only read) */
	for (uint64_t off = lo; off < hi; off += CALL) {
		size_t n = hi - off < CALL ? (size_t)(hi - off) : CALL;
		n = (n + 4095) & ~(size_t)4095;
		if (st_expired()) {
			atomic_store(&w->err, -ETIMEDOUT);
			break;
		}
		ssize_t put = pwrite_full(w->fd, buf, n, (off_t)off);
		if (put < 0) {
			atomic_store(&w->err, (int)put);
			break;
		}
		progress_add(n);
	}
	return NULL;
}

#ifdef BENCH_HAVE_URING
/* The library writes 1 MiB pieces, many in flight per worker; a ceiling of
 * blocking 16 MiB pwrites under-measured the disk (OpenDS's write8t beat it
 * by 12 % on the x2, flagged by the report), so the ceiling also writes the
 * same bytes as qd x 1 MiB O_DIRECT writes in flight on one ring a thread. */
static void *cw_uring_worker(void *arg)
{
	struct cw_arg *a = arg;
	struct cw *w = a->w;
	uint64_t lo = a->index * w->span, hi = lo + w->span < w->size ? lo + w->span : w->size;
	char *buf = w->buf + (size_t)(a->index % WRITE_THREADS) * CALL; /* this thread's 16 MiB */
	struct io_uring ring;
	if (io_uring_queue_init(w->qd, &ring, 0)) {
		atomic_store(&w->err, -ENOMEM);
		return NULL;
	}
	unsigned inflight = 0, slot = 0;
	uint64_t off = lo;
	while (off < hi || inflight) {
		while (off < hi && inflight < w->qd && !atomic_load(&w->err)) {
			size_t n = hi - off < CW_BLOCK ? (size_t)(hi - off) : CW_BLOCK;
			n = (n + 4095) & ~(size_t)4095;
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			io_uring_prep_write(sqe, w->fd, buf + (size_t)(slot++ % (CALL / CW_BLOCK)) * CW_BLOCK, (unsigned)n, off);
			io_uring_sqe_set_data64(sqe, n);
			inflight++;
			off += n;
		}
		if (!inflight)
			break;
		if (st_expired()) {
			atomic_store(&w->err, -ETIMEDOUT);
			off = hi; /* stop queueing; drain what is in flight */
		}
		io_uring_submit(&ring);
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe)) {
			atomic_store(&w->err, -EIO);
			break;
		}
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&ring, head, cqe)
		{
			if (cqe->res < 0)
				atomic_store(&w->err, cqe->res);
			else if ((uint64_t)cqe->res != io_uring_cqe_get_data64(cqe))
				atomic_store(&w->err, -EIO); /* a short write: not a ceiling */
			else
				progress_add((uint64_t)cqe->res);
			inflight--;
			seen++;
		}
		io_uring_cq_advance(&ring, seen);
		if (atomic_load(&w->err))
			off = hi;
	}
	io_uring_queue_exit(&ring);
	return NULL;
}
#endif

/* 32 threads: as many 16 MiB writes in flight as the library keeps 1 MiB
 * ones (8 workers x 16); on the x2 at 18:46 OpenDS's write8t beat the
 * 8-thread shape by 21 % */
#define CW_MAX_THREADS 32

static void ceiling_write(const char *path, char *pinned, uint64_t size, unsigned threads, unsigned qd,
			  bool prealloc, struct leg_result *r)
{
	struct cw w = { .buf = pinned, .size = size, .qd = qd };
	w.span = ((size + threads - 1) / threads + CALL - 1) / CALL * CALL;
	memset(r, 0, sizeof(*r));
	unlink(path);
	char label[64];
	snprintf(label, sizeof(label), "ceiling-write %u thread%s%s", threads, threads == 1 ? "" : "s",
		 qd ? " io_uring" : "");
	progress_start(label, size);
	double c0 = cpu_now();
	uint64_t t0 = st_now_ns();
	w.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
	bool direct = w.fd >= 0;
	if (w.fd < 0 && errno == EINVAL) /* no O_DIRECT here */
		w.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	/* Extending O_DIRECT writes are serialized by the file system (each
	 * moves the end of the file); the library allocates a large write's
	 * range first (stage_ra.c), so the ceiling does too, inside the timing.
	 * On the H200 the legs beat the shapes without it by 21-32 %. */
	if (w.fd >= 0 && prealloc && fallocate(w.fd, 0, 0, (off_t)size))
		prealloc = false; /* not here (tmpfs, old kernels): plain extending writes */
	struct cw_arg args[CW_MAX_THREADS];
	if (threads > CW_MAX_THREADS)
		threads = CW_MAX_THREADS;
	for (unsigned i = 0; i < threads; i++)
		args[i] = (struct cw_arg){ &w, i };
	void *(*fn)(void *) = cw_worker;
#ifdef BENCH_HAVE_URING
	if (qd)
		fn = cw_uring_worker;
#endif
	if (w.fd >= 0)
		st_run_threads(threads, fn, args, sizeof(args[0]));
	r->error = w.fd < 0 ? -errno : atomic_load(&w.err);
	if (w.fd >= 0) {
		if (fdatasync(w.fd) && !r->error)
			r->error = -errno;
		close(w.fd);
	}
	r->seconds = st_seconds(t0, st_now_ns());
	r->cpu_s = cpu_now() - c0;
	progress_stop();
	r->bytes = r->error ? 0 : size;
	r->files = 1;
	const char *pre = prealloc ? ", fallocate first" : "";
	if (qd)
		snprintf(r->config, sizeof(r->config),
			 "io_uring write%s from pinned memory, %u thread%s, %u x 1 MiB in flight%s%s + fdatasync",
			 direct ? " O_DIRECT" : "", threads, threads == 1 ? "" : "s", qd, threads == 1 ? "" : " each", pre);
	else
		snprintf(r->config, sizeof(r->config), "pwrite%s from pinned host memory, %u thread%s x 16 MiB%s + fdatasync",
			 direct ? " O_DIRECT" : "", threads, threads == 1 ? "" : "s", pre);
	unlink(path);
}

void writes(struct caller *c, const char *dsname, bool od, bool plain)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/callers-write.bin", opt.data);
	c->wpath = path;
	/* the ceiling before and after the write legs, the higher kept */
	/* shapes: 1, 8 and 32 threads x 16 MiB pwrite; with liburing also one
	 * thread x 32 and 8 threads x 16 of 1 MiB in flight (the library's);
	 * 8 threads of each kind again into a range allocated first */
	static const struct {
		unsigned threads, qd;
		bool prealloc;
	} shape[] = {
		{ 1, 0, false }, { WRITE_THREADS, 0, false }, { CW_MAX_THREADS, 0, false }, { WRITE_THREADS, 0, true },
#ifdef BENCH_HAVE_URING
		{ 1, 32, false }, { WRITE_THREADS, 16, false }, { WRITE_THREADS, 16, true },
#endif
	};
#define CW_SHAPES (sizeof(shape) / sizeof(shape[0]))
	struct leg_result before[CW_SHAPES], after[CW_SHAPES];
	for (unsigned i = 0; i < CW_SHAPES && plain; i++) {
		ceiling_write(path, c->pinned, c->dest_size, shape[i].threads, shape[i].qd, shape[i].prealloc,
			      &before[i]);
		if (!before[i].error)
			ceiling_note(dsname, "-", "ceiling-write", st_mib_s(before[i].bytes, before[i].seconds));
	}
	char why[160];
	bool cufile = plain && opt.use_gpu && cufile_available(why, sizeof(why));
	static const char *const wmodes[2] = { "write16m", "write8t" };
	for (unsigned m = 0; m < 2; m++) {
		if (!caller_wanted(wmodes[m]))
			continue;
		unsigned th = m ? WRITE_THREADS : 1;
		if (plain) {
			run_way(wmodes[m], "posix", c, write_leg, dsname, "-", th, CALL);
			if (cufile)
				run_way(wmodes[m], "cufile", c, write_leg, dsname, "-", th, CALL);
			else if (opt.use_gpu)
				record_na(dsname, wmodes[m], "cufile", why);
		}
		if (od)
			run_way(wmodes[m], "opends", c, write_leg, dsname, "-", th, CALL);
	}
	for (unsigned i = 0; i < CW_SHAPES && plain; i++) {
		ceiling_write(path, c->pinned, c->dest_size, shape[i].threads, shape[i].qd, shape[i].prealloc,
			      &after[i]);
		double mb = st_mib_s(before[i].bytes, before[i].seconds), ma = st_mib_s(after[i].bytes, after[i].seconds);
		struct leg_result r = (after[i].error || ma < mb) && !before[i].error ? before[i] : after[i];
		r.repeats = 2;
		r.mib_min = ma < mb ? ma : mb;
		r.mib_max = ma < mb ? mb : ma;
		struct rec k = { dsname, "write", "ceiling-write", "-", "host", shape[i].threads, shape[i].qd,
				 shape[i].qd ? CW_BLOCK : CALL, 0 };
		record(&k, &r);
	}
}

