/* The dataset legs: dataset × mode × backend × cache, each measured next
 * to the disk ceiling of the same files, order and concurrency (before and
 * after the backends' legs, the higher kept) and to cuFile. */
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

#include "bench.h"
#include "gpu.h"
#include "stats.h"

struct leg {
	const struct dataset *ds;
	char *dest;        /* registered destination: nslots × slot_size */
	size_t slot_size;
	unsigned nslots;
	unsigned threads;  /* sync */
	unsigned conc;     /* async, stream, batch */
	unsigned *order;   /* files in random order */
	int *slot_file;    /* last file read into each slot, for verification */
	double *lat_us;    /* per-file latency (sync) */
	atomic_uint next;
	atomic_int err;
};

static void fail(struct leg *l, int code)
{
	int zero = 0;
	atomic_compare_exchange_strong(&l->err, &zero, code);
}

/* the leg's error so far, or -ETIMEDOUT once it is past its time limit */
static int stopped(struct leg *l)
{
	if (!atomic_load(&l->err) && st_expired())
		fail(l, -ETIMEDOUT);
	return atomic_load(&l->err);
}

static int open_file(struct leg *l, unsigned i, opends_handle_t *fh)
{
	int fd = open(l->ds->files[i].path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fail(l, -errno);
		return -1;
	}
	opends_error_t e = opends_handle_register(fh, fd);
	if (e.err) {
		fail(l, -(int)e.err);
		close(fd);
		return -1;
	}
	return fd;
}

static void close_file(opends_handle_t fh, int fd)
{
	opends_handle_deregister(fh);
	close(fd);
}

static void check_result(struct leg *l, unsigned i, ssize_t r)
{
	if (r < 0)
		fail(l, (int)r);
	else if ((uint64_t)r != l->ds->files[i].size)
		fail(l, -EIO); /* short read of a whole file */
	else
		progress_add((uint64_t)r);
}

struct sync_arg {
	struct leg *l;
	unsigned slot;
};

static void *sync_worker(void *arg)
{
	struct sync_arg *a = arg;
	struct leg *l = a->l;
	if (opt.use_gpu)
		gpu_bind_thread();
	for (;;) {
		unsigned k = atomic_fetch_add(&l->next, 1);
		if (k >= l->ds->nfiles || atomic_load(&l->err))
			break;
		if (st_expired()) {
			fail(l, -ETIMEDOUT);
			break;
		}
		unsigned i = l->order[k];
		uint64_t t0 = st_now_ns();
		opends_handle_t fh;
		int fd = open_file(l, i, &fh);
		if (fd < 0)
			break;
		ssize_t r = opends_sync_read(fh, l->dest, l->ds->files[i].size, 0, (off_t)(a->slot * l->slot_size));
		close_file(fh, fd);
		l->lat_us[k] = (double)(st_now_ns() - t0) / 1e3;
		check_result(l, i, r);
		l->slot_file[a->slot] = (int)i;
	}
	return NULL;
}

static void leg_sync(struct leg *l)
{
	struct sync_arg a[256];
	unsigned n = l->threads < l->nslots ? l->threads : l->nslots;
	if (n > 256)
		n = 256;
	for (unsigned i = 0; i < n; i++)
		a[i] = (struct sync_arg){ l, i };
	st_run_threads(n, sync_worker, a, sizeof(a[0]));
}

struct inflight {
	opends_handle_t fh;
	int fd;
	int file;
	ssize_t result;
	size_t size;
	off_t file_offset, buf_offset;
	opends_async_future_t fut;
};

static void leg_async(struct leg *l)
{
	unsigned c = l->conc;
	struct inflight *s = calloc(c, sizeof(*s));
	for (unsigned i = 0; s && i < c; i++)
		s[i].file = -1;
	for (unsigned k = 0; s && k < l->ds->nfiles && !stopped(l); k++) {
		struct inflight *x = &s[k % c];
		if (x->file >= 0) {
			check_result(l, (unsigned)x->file, opends_async_await(&x->fut));
			close_file(x->fh, x->fd);
			x->file = -1;
		}
		unsigned i = l->order[k];
		if ((x->fd = open_file(l, i, &x->fh)) < 0)
			break;
		opends_error_t e = opends_async_read(x->fh, l->dest, l->ds->files[i].size, 0,
						     (off_t)((k % c) * l->slot_size), &x->fut);
		if (e.err) {
			fail(l, -(int)e.err);
			close_file(x->fh, x->fd);
			break;
		}
		x->file = (int)i;
		l->slot_file[k % c] = (int)i;
	}
	for (unsigned j = 0; s && j < c; j++)
		if (s[j].file >= 0) {
			check_result(l, (unsigned)s[j].file, opends_async_await(&s[j].fut));
			close_file(s[j].fh, s[j].fd);
		}
	if (!s)
		fail(l, -ENOMEM);
	free(s);
}

static void leg_stream(struct leg *l, opends_stream_t *streams)
{
	unsigned c = l->conc;
	struct inflight *s = calloc(c, sizeof(*s));
	for (unsigned i = 0; s && i < c; i++)
		s[i].file = -1;
	for (unsigned k = 0; s && k < l->ds->nfiles && !stopped(l); k++) {
		unsigned slot = k % c;
		struct inflight *x = &s[slot];
		if (x->file >= 0) {
			opends_stream_synchronize(streams[slot]);
			check_result(l, (unsigned)x->file, x->result);
			close_file(x->fh, x->fd);
			x->file = -1;
		}
		unsigned i = l->order[k];
		if ((x->fd = open_file(l, i, &x->fh)) < 0)
			break;
		x->size = l->ds->files[i].size;
		x->file_offset = 0;
		x->buf_offset = (off_t)(slot * l->slot_size);
		x->result = 0;
		opends_error_t e = opends_stream_read(x->fh, l->dest, &x->size, &x->file_offset, &x->buf_offset,
						      &x->result, streams[slot]);
		if (e.err) {
			fail(l, -(int)e.err);
			close_file(x->fh, x->fd);
			break;
		}
		x->file = (int)i;
		l->slot_file[slot] = (int)i;
	}
	for (unsigned j = 0; s && j < c; j++)
		if (s[j].file >= 0) {
			opends_stream_synchronize(streams[j]);
			check_result(l, (unsigned)s[j].file, s[j].result);
			close_file(s[j].fh, s[j].fd);
		}
	if (!s)
		fail(l, -ENOMEM);
	free(s);
}

static void leg_batch(struct leg *l)
{
	unsigned c = l->conc;
	opends_batch_t b;
	opends_error_t e = opends_batch_setup(&b, c);
	if (e.err) {
		fail(l, -(int)e.err);
		return;
	}
	struct inflight *s = calloc(c, sizeof(*s));
	opends_io_params_t *p = calloc(c, sizeof(*p));
	opends_io_events_t *ev = calloc(c, sizeof(*ev));
	unsigned *free_slots = calloc(c, sizeof(*free_slots)), nfree = c, k = 0, busy = 0;
	if (!s || !p || !ev || !free_slots) {
		fail(l, -ENOMEM);
		goto out;
	}
	for (unsigned i = 0; i < c; i++)
		free_slots[i] = c - 1 - i;
	while ((k < l->ds->nfiles && !stopped(l)) || busy) {
		unsigned np = 0;
		while (nfree && k < l->ds->nfiles && !stopped(l)) {
			unsigned slot = free_slots[--nfree], i = l->order[k++];
			struct inflight *x = &s[slot];
			if ((x->fd = open_file(l, i, &x->fh)) < 0) {
				free_slots[nfree++] = slot;
				break;
			}
			x->file = (int)i;
			l->slot_file[slot] = (int)i;
			p[np] = (opends_io_params_t){ .mode = OPENDS_BATCH,
						      .u.batch = { l->dest, 0, (off_t)(slot * l->slot_size),
								   l->ds->files[i].size },
						      .fh = x->fh,
						      .opcode = OPENDS_READ,
						      .cookie = (void *)(uintptr_t)slot };
			np++;
		}
		if (np) {
			e = opends_batch_submit(b, np, p, 0);
			if (e.err) {
				fail(l, -(int)e.err);
				for (unsigned j = 0; j < np; j++) {
					unsigned slot = (unsigned)(uintptr_t)p[j].cookie;
					close_file(s[slot].fh, s[slot].fd);
				}
				break;
			}
			busy += np;
		}
		if (!busy)
			break;
		unsigned nr = c;
		e = opends_batch_get_status(b, 1, &nr, ev, NULL);
		if (e.err) {
			fail(l, -(int)e.err);
			break;
		}
		for (unsigned j = 0; j < nr; j++) {
			unsigned slot = (unsigned)(uintptr_t)ev[j].cookie;
			check_result(l, (unsigned)s[slot].file,
				     ev[j].status == OPENDS_COMPLETE ? ev[j].ret : (ev[j].ret < 0 ? ev[j].ret : -EIO));
			close_file(s[slot].fh, s[slot].fd);
			free_slots[nfree++] = slot;
			busy--;
		}
	}
out:
	opends_batch_destroy(b); /* waits for anything still in flight */
	free(s);
	free(p);
	free(ev);
	free(free_slots);
}

/* Check the last file of up to 32 slots: whole files up to 16 MiB, else 16
 * windows of 1 MiB. Returns files verified; a mismatch fails the leg. */
static unsigned verify(struct leg *l)
{
	unsigned checked = 0;
	char *tmp = malloc(16u << 20);
	if (!tmp)
		return 0;
	for (unsigned sl = 0; sl < l->nslots && checked < 32; sl++) {
		int i = l->slot_file[sl];
		if (i < 0)
			continue;
		const struct ds_file *f = &l->ds->files[i];
		unsigned windows = f->size <= (16u << 20) ? 1 : 16;
		size_t wlen = windows == 1 ? f->size : (1u << 20);
		for (unsigned w = 0; w < windows; w++) {
			uint64_t off = windows == 1 ? 0 : (f->size - wlen) / (windows - 1) * w;
			dest_get(tmp, l->dest + sl * l->slot_size + off, wlen);
			uint64_t bad = ds_check(f->seed, off, tmp, wlen);
			if (bad) {
				fprintf(stderr, "verify: %s differs at byte %" PRIu64 "\n", f->path, off + bad - 1);
				fail(l, -EILSEQ);
				free(tmp);
				return checked;
			}
		}
		checked++;
	}
	free(tmp);
	return checked;
}

static const char *const modes[] = { "sync", "async", "stream", "batch" };

/* One run of one leg, for repeat_leg. */
struct leg_run {
	const struct dataset *ds;
	const unsigned *order;
	char *dest;
	size_t slot_size;
	unsigned nslots, conc, mode;
	bool cold;
	opends_stream_t *streams;
	const char *label;
	unsigned verified;
};

static int leg_once(void *ctx, struct leg_result *r)
{
	struct leg_run *x = ctx;
	const struct dataset *ds = x->ds;
	struct leg l = { .ds = ds, .dest = x->dest, .slot_size = x->slot_size, .nslots = x->nslots,
			 .threads = opt.threads < x->nslots ? opt.threads : x->nslots, .conc = x->conc };
	l.order = (unsigned *)x->order;
	l.lat_us = calloc(ds->nfiles, sizeof(*l.lat_us));
	l.slot_file = malloc(x->nslots * sizeof(*l.slot_file));
	if (!l.lat_us || !l.slot_file) {
		free(l.lat_us);
		free(l.slot_file);
		return r->error = -ENOMEM;
	}
	for (unsigned i = 0; i < x->nslots; i++)
		l.slot_file[i] = -1;
	prepare_cache(ds, x->cold);
	progress_start(x->label, ds->total_bytes);
	double c0 = cpu_now();
	uint64_t t0 = st_now_ns();
	switch (x->mode) {
	case 0: leg_sync(&l); break;
	case 1: leg_async(&l); break;
	case 2: leg_stream(&l, x->streams); break;
	default: leg_batch(&l); break;
	}
	r->seconds = st_seconds(t0, st_now_ns());
	r->cpu_s = cpu_now() - c0;
	r->bytes = progress_bytes();
	progress_stop();
	r->files = ds->nfiles;
	r->error = atomic_load(&l.err);
	if (x->mode == 0 && !r->error) {
		r->p50_us = st_percentile(l.lat_us, ds->nfiles, 50);
		r->p99_us = st_percentile(l.lat_us, ds->nfiles, 99);
	}
	if (x->mode == 0)
		snprintf(r->config, sizeof(r->config), "opends_sync_read, %u threads, whole files", l.threads);
	else
		snprintf(r->config, sizeof(r->config), "%s, %u in flight, whole files",
			 x->mode == 1 ? "opends_async_read" : x->mode == 2 ? "opends_stream_read" : "opends_batch",
			 x->conc);
	x->verified = r->error ? 0 : verify(&l);
	if (!r->error)
		r->error = atomic_load(&l.err);
	free(l.lat_us);
	free(l.slot_file);
	return r->error;
}

/* opends_stream_register's flags (cuFileStreamRegister's) on every stream
 * of the leg, the default stream too; 0 deregisters. */
static void register_streams(opends_stream_t *streams, unsigned n, unsigned flags)
{
	bool deflt = false;
	for (unsigned i = 0; streams && i < n; i++) {
		if (!streams[i]) {
			if (deflt)
				continue;
			deflt = true;
		}
		opends_error_t e = flags ? opends_stream_register(streams[i], flags) : opends_stream_deregister(streams[i]);
		if (e.err && flags)
			fprintf(stderr, "note: opends_stream_register(%u): %s\n", flags, opends_last_error_detail());
	}
}

static void run_opends(const struct dataset *ds, const unsigned *order, const char *backend, char *dest,
		       size_t slot_size, unsigned nslots, unsigned conc)
{
	if (!bench_driver_open(backend, ds->spec->name))
		return;
	opends_error_t e;
	char name[64];
	snprintf(name, sizeof(name), "opends:%s", opends_driver_backend());
	e = opends_buf_register(dest, slot_size * nslots, 0);
	if (e.err)
		fprintf(stderr, "note: buffer registration failed (%s); continuing unregistered\n",
			opends_last_error_detail());
	opends_stream_t *streams = calloc(conc, sizeof(*streams));
	for (unsigned i = 0; streams && i < conc; i++)
		if (opends_stream_create(&streams[i]).err)
			streams[i] = NULL; /* the default stream serves it */

	for (unsigned m = 0; m < 4; m++) {
		if (!leg_wanted(ds->spec->name, modes[m], NULL))
			continue;
		/* stream legs: once per --stream-flags value, each a mode of its
		 * own ("stream", "stream:7") so a table never mixes them */
		for (unsigned fi = 0; fi < (m == 2 ? opt.n_stream_flags : 1); fi++) {
			unsigned flags = m == 2 ? opt.stream_flags[fi] : 0;
			char mode[16];
			snprintf(mode, sizeof(mode), flags ? "%s:%u" : "%s", modes[m], flags);
			if (m == 2)
				register_streams(streams, conc, flags);
			for (unsigned cc = 0; cc < 2; cc++) {
				const char *cache = cc ? "hot" : "cold";
				if (!leg_wanted(ds->spec->name, modes[m], cache))
					continue;
				char label[128];
				snprintf(label, sizeof(label), "%s %s %s %s", ds->spec->name, mode, name, cache);
				struct leg_run x = { ds, order, dest, slot_size, nslots, conc, m, !cc, streams, label, 0 };
				struct leg_result r;
				repeat_leg(leg_once, &x, &r);
				if (flags) {
					char post[48];
					snprintf(post, sizeof(post), ", streams registered with flags %u", flags);
					config_wrap(&r, "", post);
				}
				struct rec k = { ds->spec->name, mode, name, cache, opt.use_gpu ? "device" : "host",
						 m == 0 ? x.nslots < opt.threads ? x.nslots : opt.threads : 1,
						 m == 0 ? 0 : conc, 0, x.verified };
				record(&k, &r);
			}
		}
	}
	for (unsigned i = 0; streams && i < conc; i++)
		if (streams[i])
			opends_stream_destroy(streams[i]);
	free(streams);
	opends_buf_deregister(dest);
	opends_driver_close();
}

/* cuFile called directly, where NVIDIA's libcufile loads, cold only: its
 * compatibility mode opens files O_DIRECT, so a "hot" cuFile leg reads the
 * disk (the cold path) and is reported as n/a rather than as hot. */
static void run_cufile(const struct dataset *ds, bool cold, char *dest, size_t slot, unsigned nslots,
		       unsigned conc)
{
	const char *cache = cold ? "cold" : "hot";
	if (!cold) {
		record_na(ds->spec->name, "*", "cufile", "hot: cuFile reads O_DIRECT here, a hot leg would read the disk");
		return;
	}
	struct leg_result cr;
	struct rec k;
	char label[96];
	if (leg_wanted(ds->spec->name, "sync", cache)) {
		void **d = calloc(opt.threads, sizeof(*d));
		unsigned th = opt.threads < nslots ? opt.threads : nslots;
		for (unsigned i = 0; d && i < th; i++)
			d[i] = dest + (size_t)i * slot;
		snprintf(label, sizeof(label), "%s sync cufile %s", ds->spec->name, cache);
		prepare_cache(ds, cold);
		progress_start(label, 0);
		cufile_sync_leg(ds, th, d, &cr);
		progress_stop();
		k = (struct rec){ ds->spec->name, "sync", "cufile", cache, "device", th, 0, 0, 0 };
		record(&k, &cr);
		free(d);
	}
	/* cuFile has no futures: its async cell stays n/a */
	for (unsigned fi = 0; leg_wanted(ds->spec->name, "stream", cache) && fi < opt.n_stream_flags; fi++) {
		unsigned flags = opt.stream_flags[fi];
		char mode[16];
		snprintf(mode, sizeof(mode), flags ? "stream:%u" : "stream", flags);
		prepare_cache(ds, cold);
		snprintf(label, sizeof(label), "%s %s cufile %s", ds->spec->name, mode, cache);
		progress_start(label, 0);
		int rc = cufile_stream_leg(ds, conc, dest, slot, flags, &cr);
		progress_stop();
		if (rc != -ENOSYS) { /* else n/a */
			k = (struct rec){ ds->spec->name, mode, "cufile", cache, "device", 1, conc, 0, 0 };
			record(&k, &cr);
		}
	}
	bool batch = leg_wanted(ds->spec->name, "batch", cache);
	if (batch && ds->max_size > ((uint64_t)1 << 30)) {
		/* runs b and c: NVIDIA's compatibility mode left batch entries of
		 * an 8 GiB file pending for minutes */
		record_na(ds->spec->name, "batch", "cufile", "cuFile's batch stalls on GiB files in compatibility mode");
	} else if (batch) {
		prepare_cache(ds, cold);
		snprintf(label, sizeof(label), "%s batch cufile %s", ds->spec->name, cache);
		progress_start(label, 0);
		int rc = cufile_batch_leg(ds, conc, dest, slot, &cr);
		progress_stop();
		if (rc != -ENOSYS) {
			k = (struct rec){ ds->spec->name, "batch", "cufile", cache, "device", 1, conc < 128 ? conc : 128,
					  0, 0 };
			record(&k, &cr);
		}
	}
}

/* The disk ceiling's shapes: every shape measured before the backends'
 * legs, and the best of them again after; each run is a row of its own
 * ("before the legs", "after the legs") and the ceiling is the highest.
 * For small files (one read per file) the sync legs are read against
 * the pread shapes alone, their own concurrency (bench/report), so the
 * best pread shape is measured again too.
 * Rows are written as soon as measured, so a leg that hangs (and ends the
 * command) leaves its ceilings behind. Measuring every shape twice cost a
 * minute per cold 8 GiB dataset on the H200. */
#define MAX_SHAPES 8
struct ceil_set {
	struct disk_shape shape[MAX_SHAPES];
	unsigned n, best, best_sync; /* best_sync: the best pread shape */
	double best_mib, best_sync_mib;
};

static void record_shape(const struct dataset *ds, bool cold, const struct disk_shape *sh, struct leg_result *r,
			 bool after)
{
	struct rec k = { ds->spec->name, "sync", "ceiling-disk", cold ? "cold" : "hot", "host", sh->width, 0,
			 sh->block, 0 };
	if (sh->uring) { /* deep queues: the async/batch legs' shape, and the library's */
		k.mode = "batch";
		k.conc = sh->width * sh->qd;
	}
	config_wrap(r, "", after ? "; after the legs" : "; before the legs");
	record(&k, r);
}

static void measure_ceilings(const struct dataset *ds, const unsigned *order, bool cold, struct ceil_set *set,
			     bool after)
{
	char label[96];
	snprintf(label, sizeof(label), "%s ceiling-disk %s%s", ds->spec->name, cold ? "cold" : "hot",
		 after ? " (best shape again)" : "");
	if (!after) {
		set->n = ceiling_shapes(ds, opt.threads, set->shape, MAX_SHAPES);
		set->best = set->best_sync = 0;
		set->best_mib = set->best_sync_mib = 0;
	}
	progress_start(label, 0);
	for (unsigned i = 0; i < set->n; i++) {
		bool small = ds->max_size <= (256u << 10); /* one read per file: bench/report's SMALL_FILES */
		if (after && i != set->best && (!small || i != set->best_sync || set->best_sync_mib <= 0))
			continue;
		struct leg_result r;
		progress_lap(); /* dropping the cache (sync of fresh data) gets a window of its own */
		prepare_cache(ds, cold);
		progress_lap();
		ceiling_shape_run(ds, order, cold, &set->shape[i], &r);
		double m = r.error ? 0 : st_mib_s(r.bytes, r.seconds);
		if (!after && m > set->best_mib) {
			set->best = i;
			set->best_mib = m;
		}
		if (!after && !set->shape[i].uring && m > set->best_sync_mib) {
			set->best_sync = i;
			set->best_sync_mib = m;
		}
		record_shape(ds, cold, &set->shape[i], &r, after);
	}
	progress_stop();
}

void run_dataset(const struct ds_spec *spec)
{
	struct dataset ds;
	if (!leg_wanted(spec->name, NULL, NULL))
		return; /* --legs asks for none of its legs */
	if (ds_plan(&ds, spec, opt.data, opt.scale)) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	/* Destination: one slot of the largest file per file in flight, never
	 * more slots than files (one 8 GiB file needs 8 GiB, not 8 × 8). */
	unsigned conc = spec->concurrency < ds.nfiles ? spec->concurrency : ds.nfiles;
	unsigned nslots = conc > opt.threads ? conc : opt.threads;
	if (nslots > ds.nfiles)
		nslots = ds.nfiles;
	size_t slot = (ds.max_size + 4095) & ~(size_t)4095;
	uint64_t need = (uint64_t)slot * nslots, avail = opt.use_gpu ? gpu_free_bytes() : mem_available();
	if (!opt.gen_only && avail && need > avail) {
		fprintf(stderr, "%s: needs %" PRIu64 " MiB of %s memory for its destination, %" PRIu64
				" MiB available; not run (use --datasets to leave it out%s)\n",
			spec->name, need >> 20, opt.use_gpu ? "device" : "host", avail >> 20,
			opt.use_gpu ? "" : ", or a machine with a GPU");
		bench_failures++;
		ds_free(&ds);
		return;
	}
	int rc = ds_generate(&ds, 8, opt.verbose);
	if (rc) {
		fprintf(stderr, "generating %s in %s failed: %s\n", spec->name, ds.root, strerror(-rc));
		bench_failures++;
		ds_free(&ds);
		return;
	}
	if (opt.gen_only) {
		ds_free(&ds);
		return;
	}
	if (leg_wanted(spec->name, NULL, "hot") && !opt.use_gpu && ds.total_bytes + need > mem_available())
		fprintf(stderr, "warning: %s (%.1f GiB) and its destination do not fit in free memory together: "
				"its hot legs read partly from disk\n",
			spec->name, ds.total_bytes / (MIB * 1024));
	char *dest = dest_alloc(slot * nslots);
	unsigned *order = leg_order(&ds);
	if (!dest || !order) {
		fprintf(stderr, "%s: cannot allocate %zu MiB of destination memory\n", spec->name,
			(slot * nslots) >> 20);
		bench_failures++;
		if (dest)
			dest_free(dest);
		free(order);
		ds_free(&ds);
		return;
	}

	struct ceil_set ceil[2];
	bool want[2] = { leg_wanted(spec->name, NULL, "cold"), leg_wanted(spec->name, NULL, "hot") };
	char why[160] = "";
	bool cufile = opt.baselines && opt.use_gpu && cufile_available(why, sizeof(why));
	for (unsigned cc = 0; cc < 2; cc++) {
		if (!want[cc] || !opt.baselines)
			continue;
		measure_ceilings(&ds, order, !cc, &ceil[cc], false);
		if (cufile)
			run_cufile(&ds, !cc, dest, slot, nslots, conc);
	}
	if (opt.baselines && opt.use_gpu && !cufile)
		record_na(spec->name, "*", "cufile", why);

	char list[256];
	snprintf(list, sizeof(list), "%s", opt.backends);
	for (char *save = NULL, *b = strtok_r(list, ",", &save); b; b = strtok_r(NULL, ",", &save))
		if (strcmp(b, "none")) /* "none": baselines only */
			run_opends(&ds, order, b, dest, slot, nslots, conc);

	for (unsigned cc = 0; cc < 2; cc++) {
		if (!want[cc] || !opt.baselines)
			continue;
		measure_ceilings(&ds, order, !cc, &ceil[cc], true);
	}
	dest_free(dest);
	free(order);
	ds_free(&ds);
}
