/* The caller legs (docs/bench.md, "Callers"): one calling thread, the way
 * users call, on hot data, through OpenDS and the plain way (pread into
 * pinned memory, then one copy) side by side, cuFile too for writes, next
 * to the copy, host-read and write ceilings of the same command. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
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

#include "bench.h"
#include "callers.h"
#include "gpu.h"
#include "stats.h"

const char *const caller_names[] = { "seq16m", "files1t", "rand4k", "write16m", "write8t", "gpu1", "dev1", "gpu2",
				     "fanout2", NULL };

int open_reg(const char *path, int flags, opends_handle_t *fh)
{
	int fd = open(path, flags | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	opends_error_t e = opends_handle_register(fh, fd);
	if (e.err) {
		close(fd);
		return -(int)e.err;
	}
	return fd;
}

void unreg(opends_handle_t fh, int fd)
{
	opends_handle_deregister(fh);
	close(fd);
}

/* pread all of n bytes (short only at end of file) */
ssize_t pread_full(int fd, char *buf, size_t n, off_t off)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(fd, buf + done, n - done, off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

ssize_t pwrite_full(int fd, const char *buf, size_t n, off_t off)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = pwrite(fd, buf + done, n - done, off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

void begin(struct caller *c, struct leg_result *r, uint64_t total, double *c0, uint64_t *t0)
{
	memset(r, 0, sizeof(*r));
	progress_start(c->label, total);
	*c0 = cpu_now();
	*t0 = st_now_ns();
}

void end(struct leg_result *r, double c0, uint64_t t0)
{
	r->seconds = st_seconds(t0, st_now_ns());
	r->cpu_s = cpu_now() - c0;
	progress_stop();
}

/* Check 16 windows of 64 KiB of a destination that should hold the file
 * f from offset 0. */
static int verify_dest(const char *dest, const struct ds_file *f, uint64_t n)
{
	char tmp[64 << 10];
	for (unsigned w = 0; w < 16 && n; w++) {
		size_t len = n < sizeof(tmp) ? (size_t)n : sizeof(tmp);
		uint64_t off = (n - len) / 15 * w;
		if (dest_get(tmp, dest + off, len) || ds_check(f->seed, off, tmp, len)) {
			fprintf(stderr, "verify: %s differs in the window at %" PRIu64 "\n", f->path, off);
			return -EILSEQ;
		}
	}
	return 0;
}

/* ---- seq16m: 16 MiB synchronous calls over the big file -------------- */

static int seq16m(void *ctx, struct leg_result *r)
{
	struct caller *c = ctx;
	const struct ds_file *f = &c->ds->files[0];
	double c0;
	uint64_t t0;
	prepare_cache(c->ds, false);
	begin(c, r, f->size, &c0, &t0);
	opends_handle_t fh;
	bool od = !strcmp(c->way, "opends");
	int fd = od ? open_reg(f->path, O_RDONLY, &fh) : open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r->error = od ? fd : -errno;
		end(r, c0, t0);
		return r->error;
	}
	for (uint64_t off = 0; off < f->size && !r->error; off += CALL) {
		size_t n = f->size - off < CALL ? (size_t)(f->size - off) : CALL;
		if (st_expired()) {
			r->error = -ETIMEDOUT;
			break;
		}
		ssize_t got = od ? opends_sync_read(fh, c->dest, n, (off_t)off, (off_t)off)
				 : pread_full(fd, c->pinned, n, (off_t)off);
		if (got >= 0 && (size_t)got != n)
			got = -EIO;
		if (got > 0 && !od && dest_put(c->dest + off, c->pinned, n))
			got = -EIO;
		if (got < 0)
			r->error = (int)got;
		else
			progress_add(n);
	}
	if (od)
		unreg(fh, fd);
	else
		close(fd);
	end(r, c0, t0);
	r->bytes = r->error ? 0 : f->size;
	r->files = 1;
	snprintf(r->config, sizeof(r->config), "%s",
		 od ? "opends_sync_read 16 MiB calls, 1 thread" : "pread 16 MiB into pinned + copy, 1 thread");
	if (!r->error)
		r->error = verify_dest(c->dest, f, f->size);
	return r->error;
}

/* ---- files1t: per file open, register, read, deregister, close ------- */

static int files1t(void *ctx, struct leg_result *r)
{
	struct caller *c = ctx;
	const struct dataset *ds = c->ds;
	double c0;
	uint64_t t0;
	bool od = !strcmp(c->way, "opends");
	prepare_cache(ds, false);
	begin(c, r, ds->total_bytes, &c0, &t0);
	int last = -1;
	for (unsigned k = 0; k < ds->nfiles && !r->error; k++) {
		const struct ds_file *f = &ds->files[c->order[k]];
		if (st_expired()) {
			r->error = -ETIMEDOUT;
			break;
		}
		opends_handle_t fh;
		int fd = od ? open_reg(f->path, O_RDONLY, &fh) : open(f->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			r->error = od ? fd : -errno;
			break;
		}
		ssize_t got = od ? opends_sync_read(fh, c->dest, f->size, 0, 0) : pread_full(fd, c->pinned, f->size, 0);
		if (got >= 0 && (uint64_t)got != f->size)
			got = -EIO;
		if (got > 0 && !od && dest_put(c->dest, c->pinned, f->size))
			got = -EIO;
		if (od)
			unreg(fh, fd);
		else
			close(fd);
		if (got < 0)
			r->error = (int)got;
		else {
			r->bytes += f->size;
			progress_add(f->size);
		}
		last = (int)c->order[k];
	}
	end(r, c0, t0);
	r->files = ds->nfiles;
	snprintf(r->config, sizeof(r->config), "%s",
		 od ? "open, register, opends_sync_read, deregister, close; 1 thread"
		    : "open, pread into pinned, close, copy; 1 thread");
	if (!r->error && last >= 0)
		r->error = verify_dest(c->dest, &ds->files[last], ds->files[last].size);
	return r->error;
}

/* ---- rand4k: 4 KiB reads at random aligned offsets, one at a time ---- */

static int rand4k(void *ctx, struct leg_result *r)
{
	struct caller *c = ctx;
	const struct ds_file *f = &c->ds->files[0];
	double c0;
	uint64_t t0;
	bool od = !strcmp(c->way, "opends");
	prepare_cache(c->ds, false);
	char *dst = c->host_dest ? c->pinned : c->dest;
	opends_handle_t fh;
	int fd = od ? open_reg(f->path, O_RDONLY, &fh) : open(f->path, O_RDONLY | O_CLOEXEC);
	begin(c, r, (uint64_t)c->nreads * 4096, &c0, &t0);
	if (fd < 0)
		r->error = od ? fd : -errno;
	for (unsigned i = 0; i < c->nreads && !r->error; i++) {
		if (st_expired()) {
			r->error = -ETIMEDOUT;
			break;
		}
		uint64_t s = st_now_ns();
		ssize_t got = od ? opends_sync_read(fh, dst, 4096, (off_t)c->offs[i], 0)
				 : pread_full(fd, c->pinned, 4096, (off_t)c->offs[i]);
		if (got == 4096 && !od && !c->host_dest && dest_put(c->dest, c->pinned, 4096))
			got = -EIO;
		c->lat[i] = (double)(st_now_ns() - s) / 1e3;
		if (got != 4096)
			r->error = got < 0 ? (int)got : -EIO;
		else
			progress_add(4096);
	}
	end(r, c0, t0);
	if (fd >= 0) {
		if (od)
			unreg(fh, fd);
		else
			close(fd);
	}
	r->bytes = r->error ? 0 : (uint64_t)c->nreads * 4096;
	r->files = 1;
	if (!r->error) {
		r->p50_us = st_percentile(c->lat, c->nreads, 50);
		r->p99_us = st_percentile(c->lat, c->nreads, 99);
		/* the last read's bytes, wherever they landed */
		char tmp[4096];
		const char *got = od ? dst : c->pinned;
		if (od && !c->host_dest) {
			got = tmp;
			if (dest_get(tmp, c->dest, 4096))
				r->error = -EIO;
		}
		if (!r->error && ds_check(f->seed, c->offs[c->nreads - 1], got, 4096))
			r->error = -EILSEQ;
	}
	snprintf(r->config, sizeof(r->config), "%s %u reads, 1 thread, into %s memory",
		 od ? "opends_sync_read 4 KiB," : "pread 4 KiB + copy,", c->nreads, c->host_dest ? "host" : "destination");
	return r->error;
}

/* ---- gpu1 / gpu2: the hot big file in one call per GPU --------------- */

struct one_call {
	const struct ds_file *f;
	int dev;
	char *dest;
	int err;
};

static void *one_call_worker(void *arg)
{
	struct one_call *o = arg;
	if (opt.use_gpu && !gpu_bind_device(o->dev)) {
		o->err = -ENODEV;
		return NULL;
	}
	opends_handle_t fh;
	int fd = open_reg(o->f->path, O_RDONLY, &fh);
	if (fd < 0) {
		o->err = fd;
		return NULL;
	}
	ssize_t got = opends_sync_read(fh, o->dest, o->f->size, 0, 0);
	o->err = got < 0 ? (int)got : (uint64_t)got != o->f->size ? -EIO : 0;
	if (!o->err)
		progress_add(o->f->size);
	unreg(fh, fd);
	return NULL;
}

struct gpus {
	struct caller *c;
	char *dest[2];
	unsigned n;
	int dev0; /* the first GPU's index (dev1: 1) */
};

static int gpu_leg(void *ctx, struct leg_result *r)
{
	struct gpus *g = ctx;
	const struct ds_file *f = &g->c->ds->files[0];
	struct one_call o[2];
	double c0;
	uint64_t t0;
	prepare_cache(g->c->ds, false);
	begin(g->c, r, f->size * g->n, &c0, &t0);
	for (unsigned i = 0; i < g->n; i++)
		o[i] = (struct one_call){ f, g->dev0 + (int)i, g->dest[i], 0 };
	unsigned started = st_run_threads(g->n, one_call_worker, o, sizeof(o[0]));
	end(r, c0, t0);
	for (unsigned i = 0; i < g->n; i++)
		if (!r->error)
			r->error = i < started ? o[i].err : -EAGAIN;
	r->bytes = r->error ? 0 : f->size * g->n;
	r->files = g->n;
	snprintf(r->config, sizeof(r->config), "opends_sync_read of the whole file in one call, %u thread%s, %s",
		 g->n, g->n == 1 ? "" : "s", g->n > 1 ? "one per GPU" : g->dev0 ? "into GPU 1" : "into GPU 0");
	for (unsigned i = 0; i < g->n && !r->error; i++) {
		if (opt.use_gpu)
			gpu_bind_device(g->dev0 + (int)i);
		r->error = verify_dest(g->dest[i], f, f->size);
	}
	if (opt.use_gpu)
		gpu_bind_device(0);
	return r->error;
}

/* fanout2: the library's "read once, place everywhere" call, looked up at
 * run time (issue 19's opends_sync_read_fanout), so the benchmark builds
 * and runs against a library without it (the leg is then n/a). */
typedef ssize_t (*fanout_fn)(opends_handle_t fh, void *const *bufs, const off_t *buf_offsets, unsigned nbufs,
			     size_t size, off_t file_offset);
static fanout_fn fanout;

static int fanout_leg(void *ctx, struct leg_result *r)
{
	struct gpus *g = ctx;
	const struct ds_file *f = &g->c->ds->files[0];
	double c0;
	uint64_t t0;
	prepare_cache(g->c->ds, false);
	begin(g->c, r, f->size * g->n, &c0, &t0);
	opends_handle_t fh;
	int fd = open_reg(f->path, O_RDONLY, &fh);
	ssize_t got = fd < 0 ? fd : fanout(fh, (void *const *)g->dest, NULL, g->n, f->size, 0);
	if (fd >= 0)
		unreg(fh, fd);
	end(r, c0, t0);
	r->error = got < 0 ? (int)got : (uint64_t)got != f->size ? -EIO : 0;
	r->bytes = r->error ? 0 : f->size * g->n; /* bytes placed */
	r->files = 1;
	snprintf(r->config, sizeof(r->config), "opends_sync_read_fanout: one call, the file placed on %u GPUs", g->n);
	for (unsigned i = 0; i < g->n && !r->error; i++) {
		gpu_bind_device((int)i);
		r->error = verify_dest(g->dest[i], f, f->size);
	}
	gpu_bind_device(0);
	return r->error;
}

static void gpu_record(struct caller *c, struct gpus *g, leg_fn fn, const char *mode, const char *dsname)
{
	snprintf(c->label, sizeof(c->label), "%s opends", mode);
	c->mode = mode;
	struct leg_result r;
	repeat_leg(fn, g, &r);
	char name[64];
	snprintf(name, sizeof(name), "opends:%s", opends_driver_backend());
	struct rec k = { dsname, mode, name, "hot", opt.use_gpu ? "device" : "host", !strcmp(mode, "gpu2") ? 2 : 1,
			 0, c->ds->files[0].size, 1 };
	record(&k, &r);
}

/* gpu1, then (two GPUs) dev1, gpu2 and fanout2 with a second buffer on
 * GPU 1 */
static void gpu_legs(struct caller *c, const char *bn, char *dest)
{
	uint64_t size = c->ds->files[0].size;
	struct gpus g = { c, { dest, NULL }, 1, 0 };
	if (caller_wanted("gpu1"))
		gpu_record(c, &g, gpu_leg, "gpu1", bn);
	*(void **)&fanout = dlsym(RTLD_DEFAULT, "opends_sync_read_fanout");
	bool two = opt.use_gpu && gpu_count() >= 2, said = false;
	if (!caller_wanted("gpu2") && !caller_wanted("dev1") && !(caller_wanted("fanout2") && fanout))
		goto na;
	if (two && !(g.dest[1] = gpu_alloc_on(1, size))) {
		gpu_bind_device(0);
		if (caller_wanted("gpu2"))
			record_na(bn, "gpu2", "opends", "cannot allocate the file's size on GPU 1");
		two = false;
		said = true;
	}
	gpu_bind_device(0);
	if (two && caller_wanted("dev1")) { /* issue 19: GPU 1 alone, against gpu1 (GPU 0) */
		struct gpus d1 = { c, { g.dest[1], NULL }, 1, 1 };
		gpu_record(c, &d1, gpu_leg, "dev1", bn);
	}
	g.n = 2;
	if (two && caller_wanted("gpu2") && opt.baselines) {
		/* ceiling-h2d2: do the two GPUs' copies add up on this host? */
		struct leg_result r = { 0 };
		double mib = gpu_h2d_ceiling_ngpu(2);
		r.bytes = (uint64_t)8 << 30;
		r.seconds = mib > 0 ? 8192.0 / mib : 0;
		r.error = mib > 0 ? 0 : -EIO;
		snprintf(r.config, sizeof(r.config), "pinned cuMemcpyHtoD on both GPUs at once, 4 x 256 MiB each, best of 3");
		struct rec k = { bn, "copy", "ceiling-h2d2", "hot", "device", 2, 0, 256u << 20, 0 };
		record(&k, &r);
	}
	if (two && caller_wanted("gpu2"))
		gpu_record(c, &g, gpu_leg, "gpu2", bn);
	if (two && caller_wanted("fanout2") && fanout)
		gpu_record(c, &g, fanout_leg, "fanout2", bn);
	if (g.dest[1]) {
		gpu_bind_device(1);
		gpu_free(g.dest[1]);
		gpu_bind_device(0);
	}
na:
	if (!two && !said && caller_wanted("gpu2"))
		record_na(bn, "gpu2", "opends", "needs two GPUs");
	if (!two && !said && caller_wanted("dev1"))
		record_na(bn, "dev1", "opends", "needs two GPUs");
	if (caller_wanted("fanout2") && (!fanout || !two))
		record_na(bn, "fanout2", "opends",
			  !fanout ? "the library has no read-once-place-everywhere call (opends_sync_read_fanout)"
				  : "needs two GPUs");
}

/* ---- the run ------------------------------------------------------------- */

bool caller_wanted(const char *leg)
{
	return in_list(opt.callers, leg) || in_list(opt.callers, "all");
}

void record_h2d_ceiling(void)
{
	static const size_t sizes[] = { 16u << 20, 64u << 20, 256u << 20 };
	struct leg_result r = { 0 };
	double best = 0;
	size_t best_size = 0;
	for (unsigned i = 0; i < 3; i++) {
		double mib = 0;
		if (opt.use_gpu) {
			mib = gpu_h2d_ceiling(sizes[i]);
		} else { /* no GPU: the host copy that takes the copy's place */
			char *a = pinned_alloc(sizes[i]), *b = pinned_alloc(sizes[i]);
			for (int k = 0; a && b && k < 3; k++) {
				uint64_t t0 = st_now_ns();
				memcpy(b, a, sizes[i]);
				double m = st_mib_s(sizes[i], st_seconds(t0, st_now_ns()));
				mib = m > mib ? m : mib;
			}
			pinned_free(a);
			pinned_free(b);
		}
		if (mib > best) {
			best = mib;
			best_size = sizes[i];
		}
	}
	r.bytes = best_size;
	r.seconds = best > 0 ? best_size / MIB / best : 0;
	r.error = best > 0 ? 0 : -EIO;
	snprintf(r.config, sizeof(r.config), "%s, best of 16/64/256 MiB copies (%zu MiB best)",
		 opt.use_gpu ? "pinned cuMemcpyHtoD" : "memcpy host to host (no GPU)", best_size >> 20);
	struct rec k = { "-", "copy", "ceiling-h2d", "-", opt.use_gpu ? "device" : "host", 1, 0, best_size, 0 };
	record(&k, &r);
}

/* The big file of the caller legs: filesize8gib's file at 8 GiB, else a
 * file of --big-size beside the datasets. */
static int plan_big(struct dataset *big)
{
	static struct ds_spec spec;
	static char name[32];
	if (opt.big_size == 8ull << 30)
		return ds_plan(big, ds_find("filesize8gib"), opt.data, 1.0);
	snprintf(name, sizeof(name), "big%" PRIu64 "m", opt.big_size >> 20);
	spec = (struct ds_spec){ name, 1, 1, 1, "sample_%06u.bin", opt.big_size, opt.big_size, false, 1 };
	return ds_plan(big, &spec, opt.data, 1.0);
}

void run_way(const char *mode, const char *way, struct caller *c, leg_fn fn, const char *dsname,
		    const char *cache, unsigned threads, uint64_t call_size)
{
	c->mode = mode;
	c->way = way;
	snprintf(c->label, sizeof(c->label), "%s %s", mode, way);
	struct leg_result r;
	repeat_leg(fn, c, &r);
	char backend[64];
	if (!strcmp(way, "opends"))
		snprintf(backend, sizeof(backend), "opends:%s", opends_driver_backend());
	else
		snprintf(backend, sizeof(backend), "%s", way);
	struct rec k = { dsname, mode, backend, cache, c->host_dest ? "host" : opt.use_gpu ? "device" : "host",
			 threads, 0, call_size, r.error ? 0 : 1 };
	record(&k, &r);
}

static void reads_into_dest(const struct dataset *big, char *dest, char *pinned)
{
	/* the write legs' source holds the big file (verifiable); untimed */
	const struct ds_file *f = &big->files[0];
	int fd = open(f->path, O_RDONLY | O_CLOEXEC);
	for (uint64_t off = 0; fd >= 0 && off < f->size; off += CALL) {
		size_t n = f->size - off < CALL ? (size_t)(f->size - off) : CALL;
		if (pread_full(fd, pinned, n, (off_t)off) != (ssize_t)n || dest_put(dest + off, pinned, n))
			break;
	}
	if (fd >= 0)
		close(fd);
}

static void callers_backend(const char *backend, struct dataset *big, struct dataset *small, const unsigned *order,
			    char *dest, char *pinned, bool first)
{
	bool od = strcmp(backend, "none") != 0;
	if (od && !bench_driver_open(backend, "callers"))
		return;
	const char *bn = big->spec->name;
	bool plain = first && opt.baselines; /* the peers run once, not per backend */
	struct caller c = { .ds = big, .dest = dest, .dest_size = big->files[0].size, .pinned = pinned,
			    .pinned_size = CALL * WRITE_THREADS };
	if (caller_wanted("seq16m")) {
		if (plain)
			run_way("seq16m", "posix", &c, seq16m, bn, "hot", 1, CALL);
		if (od)
			run_way("seq16m", "opends", &c, seq16m, bn, "hot", 1, CALL);
	}
	if (caller_wanted("files1t") && small) {
		struct caller s = c;
		s.ds = small;
		s.order = order;
		if (plain)
			run_way("files1t", "posix", &s, files1t, small->spec->name, "hot", 1, 0);
		if (od)
			run_way("files1t", "opends", &s, files1t, small->spec->name, "hot", 1, 0);
	}
	if (caller_wanted("rand4k")) {
		uint64_t span = big->files[0].size < (4ull << 30) ? big->files[0].size : (4ull << 30);
		c.nreads = opt.rand_reads;
		c.lat = calloc(c.nreads, sizeof(*c.lat));
		c.offs = calloc(c.nreads, sizeof(*c.offs));
		uint64_t st = 0x4a11;
		for (unsigned i = 0; c.offs && i < c.nreads; i++) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			c.offs[i] = ((st >> 20) % (span / 4096)) * 4096;
		}
		if (c.lat && c.offs) {
			if (plain)
				run_way("rand4k", "posix", &c, rand4k, bn, "hot", 1, 4096);
			if (od)
				run_way("rand4k", "opends", &c, rand4k, bn, "hot", 1, 4096);
			if (od && opt.use_gpu) { /* and into host memory */
				c.host_dest = true;
				run_way("rand4k", "opends", &c, rand4k, bn, "hot", 1, 4096);
				c.host_dest = false;
			}
		}
		free(c.lat);
		free(c.offs);
		c.lat = NULL;
		c.offs = NULL;
	}
	if (caller_wanted("write16m") || caller_wanted("write8t")) {
		reads_into_dest(big, dest, pinned);
		struct caller w = c;
		w.dest_size = opt.write_size;
		writes(&w, bn, od, plain);
	}
	if (od && (caller_wanted("gpu1") || caller_wanted("gpu2") || caller_wanted("fanout2")))
		gpu_legs(&c, bn, dest);
	if (od)
		opends_driver_close();
}

void run_callers(void)
{
	struct dataset big, small;
	bool have_small = false;
	if (plan_big(&big)) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	int rc = ds_generate(&big, 8, opt.verbose);
	if (!rc && caller_wanted("files1t")) {
		if (ds_plan(&small, ds_find("imagenetish"), opt.data, opt.scale))
			exit(1);
		rc = ds_generate(&small, 8, opt.verbose);
		have_small = !rc;
	}
	if (rc) {
		fprintf(stderr, "generating the caller legs' files in %s failed: %s\n", opt.data, strerror(-rc));
		bench_failures++;
		ds_free(&big);
		return;
	}
	if (opt.gen_only)
		goto out;
	size_t dsize = big.files[0].size;
	char *dest = dest_alloc(dsize), *pinned = pinned_alloc(CALL * WRITE_THREADS + (have_small ? small.max_size : 0));
	unsigned *order = have_small ? leg_order(&small) : NULL;
	if (!dest || !pinned) {
		fprintf(stderr, "caller legs: cannot allocate %zu MiB of destination memory\n", dsize >> 20);
		bench_failures++;
	} else {
		if (opt.baselines) {
			struct leg_result r;
			prepare_cache(&big, false);
			long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
			unsigned tc[2] = { 16, ncpu > 0 ? (unsigned)ncpu : 16 };
			for (unsigned i = 0; i < 2; i++) {
				if (i == 1 && tc[1] == tc[0])
					break;
				progress_start("ceiling-host", 0);
				ceiling_host(&big, tc[i], 1u << 20, &r);
				progress_stop();
				struct rec k = { big.spec->name, "read", "ceiling-host", "hot", "host", tc[i], 0, 1u << 20, 0 };
				record(&k, &r);
			}
		}
		char list[256];
		snprintf(list, sizeof(list), "%s", opt.backends);
		bool first = true;
		for (char *save = NULL, *b = strtok_r(list, ",", &save); b; b = strtok_r(NULL, ",", &save)) {
			callers_backend(b, &big, have_small ? &small : NULL, order, dest, pinned, first);
			first = false;
		}
	}
	if (dest)
		dest_free(dest);
	if (pinned)
		pinned_free(pinned);
	free(order);
out:
	if (have_small)
		ds_free(&small);
	ds_free(&big);
}
