/*
 * opends-bench: how fast does OpenDS move my kind of data into GPU memory
 * on this machine, next to what the hardware allows and what cuFile gives?
 *
 * Generates the four datasets of docs/bench.md (deterministic, reused when
 * complete), then runs legs dataset × mode × backend × cache, with the
 * ceilings and cuFile measured in the same run, verifies a sample of every
 * leg's data, and writes records.csv. --quick is a few-second demo on small
 * generated data with the best backend available.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <opends.h>

#include "bench/baselines.h"
#include "bench/dataset.h"
#include "bench/gpu.h"
#include "bench/stats.h"

static struct {
	bool quick, use_gpu, verbose;
	const char *data, *out, *datasets, *modes, *backends, *caches, *mem;
	double scale;
	unsigned threads;
	bool baselines;
	bool gen_only;
} opt = {
	.data = "opends-bench-data",
	.out = "opends-bench-out",
	.datasets = "filesize8gib,tiktokish,imagenetish,lmcacheish",
	.modes = "sync,async,stream,batch",
	.backends = "auto",
	.caches = "cold",
	.mem = "auto",
	.scale = 1.0,
	.threads = 8,
	.baselines = true,
	.verbose = true,
};

static FILE *csv;
static int failures;
static atomic_uint_fast64_t progress_bytes;
static atomic_bool progress_on;
/* The leg being measured: its label, and a count bumped at each start
 * (0: no leg, nothing to report). */
static pthread_mutex_t progress_lock = PTHREAD_MUTEX_INITIALIZER;
static char progress_label[160];
static unsigned progress_leg;

static void progress_start(const char *label)
{
	pthread_mutex_lock(&progress_lock);
	snprintf(progress_label, sizeof(progress_label), "%s", label);
	atomic_store(&progress_bytes, 0);
	progress_leg++;
	pthread_mutex_unlock(&progress_lock);
}

static void progress_stop(void)
{
	pthread_mutex_lock(&progress_lock);
	progress_label[0] = '\0';
	pthread_mutex_unlock(&progress_lock);
}

/* ---- small helpers ------------------------------------------------------- */

static bool in_list(const char *list, const char *item)
{
	size_t n = strlen(item);
	for (const char *p = list; (p = strstr(p, item)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

static double cpu_now(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void *progress_thread(void *arg)
{
	(void)arg;
	uint64_t last = 0, t_last = st_now_ns();
	unsigned leg = 0;
	while (atomic_load(&progress_on)) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		uint64_t now = st_now_ns();
		char label[sizeof(progress_label)];
		pthread_mutex_lock(&progress_lock);
		snprintf(label, sizeof(label), "%s", progress_label);
		uint64_t b = atomic_load(&progress_bytes);
		bool fresh = progress_leg != leg;
		leg = progress_leg;
		pthread_mutex_unlock(&progress_lock);
		if (fresh || !label[0]) { /* a new leg, or none: start counting again */
			last = fresh ? 0 : b;
			t_last = now;
			continue;
		}
		if (now - t_last < 1000000000ull)
			continue;
		if (opt.verbose)
			fprintf(stderr, "  %s: %.2f GiB, %.0f MiB/s\n", label, b / (MIB * 1024),
				st_mib_s(b - last, st_seconds(t_last, now)));
		last = b;
		t_last = now;
	}
	return NULL;
}

/* Cold: the page cache dropped (root) or each file advised out. Hot: each
 * file read once through the page cache. */
static void prepare_cache(const struct dataset *ds, bool cold)
{
	if (cold) {
		sync();
		int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
		if (fd >= 0 && write(fd, "3", 1) == 1) {
			close(fd);
			return;
		}
		if (fd >= 0)
			close(fd);
		for (unsigned i = 0; i < ds->nfiles; i++) {
			int f = open(ds->files[i].path, O_RDONLY);
			if (f >= 0) {
				posix_fadvise(f, 0, 0, POSIX_FADV_DONTNEED);
				close(f);
			}
		}
		return;
	}
	char *buf = malloc(4u << 20);
	for (unsigned i = 0; buf && i < ds->nfiles; i++) {
		int f = open(ds->files[i].path, O_RDONLY);
		if (f < 0)
			continue;
		while (read(f, buf, 4u << 20) > 0)
			;
		close(f);
	}
	free(buf);
}

static void prepare_cold(const struct dataset *ds)
{
	prepare_cache(ds, true);
}
static void prepare_hot(const struct dataset *ds)
{
	prepare_cache(ds, false);
}

/* ---- records -------------------------------------------------------------- */

static char run_date[32];

static void record(const char *dataset, const char *mode, const char *backend, const char *cache,
		   const struct leg_result *r, unsigned threads, unsigned concurrency, const char *mem,
		   unsigned verified)
{
	double mib = r->error ? 0 : st_mib_s(r->bytes, r->seconds);
	fprintf(csv,
		"%s,%s,%s,%s,%s,%" PRIu64 ",%.6f,%.1f,%.3f,%u,%.1f,%.1f,%.1f,%u,%u,%s,%s,%s,%s,%s,%u,%d\n",
		run_date, dataset, mode, backend, cache, r->bytes, r->seconds, mib, r->cpu_s, r->files,
		r->seconds > 0 ? r->files / r->seconds : 0, r->p50_us, r->p99_us, threads, concurrency,
		getenv("OPENDS_IO_THREADS") ? getenv("OPENDS_IO_THREADS") : "",
		getenv("OPENDS_QUEUE_DEPTH") ? getenv("OPENDS_QUEUE_DEPTH") : "",
		getenv("OPENDS_CHUNK_SIZE") ? getenv("OPENDS_CHUNK_SIZE") : "", mem, r->config, verified, r->error);
	fflush(csv);
	printf("%-13s %-6s %-22s %-4s %10.1f MiB/s %8.3f s %7.2f cpu-s%s\n", dataset, mode, backend, cache, mib,
	       r->seconds, r->cpu_s, r->error ? "  FAILED" : "");
	fflush(stdout);
	if (r->error) {
		fprintf(stderr, "%s %s %s %s: error %d (%s)\n", dataset, mode, backend, cache, r->error,
			opends_op_status_error(r->error));
		failures++;
	}
}

/* ---- OpenDS legs ----------------------------------------------------------- */

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
		atomic_fetch_add(&progress_bytes, (uint64_t)r);
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
	pthread_t t[256];
	struct sync_arg a[256];
	unsigned n = l->threads < l->nslots ? l->threads : l->nslots, started = 0;
	for (; started < n && started < 256; started++) {
		a[started] = (struct sync_arg){ l, started };
		if (pthread_create(&t[started], NULL, sync_worker, &a[started]))
			break;
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
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
	for (unsigned k = 0; s && k < l->ds->nfiles && !atomic_load(&l->err); k++) {
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
	for (unsigned k = 0; s && k < l->ds->nfiles && !atomic_load(&l->err); k++) {
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
	while ((k < l->ds->nfiles && !atomic_load(&l->err)) || busy) {
		unsigned np = 0;
		while (nfree && k < l->ds->nfiles && !atomic_load(&l->err)) {
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
			const char *src = l->dest + sl * l->slot_size + off;
			if (opt.use_gpu)
				gpu_to_host(tmp, src, wlen);
			else
				memcpy(tmp, src, wlen);
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

static void run_opends(const struct dataset *ds, const char *backend, char *dest, size_t slot_size,
		       unsigned nslots, unsigned conc)
{
	setenv("OPENDS_BACKEND", backend, 1);
	opends_error_t e = opends_driver_open();
	if (e.err) {
		fprintf(stderr, "opends_driver_open with OPENDS_BACKEND=%s: %s (%s)\n", backend,
			opends_op_status_error(e.err), opends_last_error_detail());
		failures++;
		return;
	}
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

	static const char *const modes[] = { "sync", "async", "stream", "batch" };
	for (unsigned m = 0; m < 4; m++) {
		if (!in_list(opt.modes, modes[m]))
			continue;
		for (unsigned cc = 0; cc < 2; cc++) {
			const char *cache = cc ? "hot" : "cold";
			if (!in_list(opt.caches, cache))
				continue;
			struct leg l = { .ds = ds, .dest = dest, .slot_size = slot_size, .nslots = nslots,
					 .threads = opt.threads, .conc = conc };
			l.order = malloc(ds->nfiles * sizeof(*l.order));
			l.lat_us = calloc(ds->nfiles, sizeof(*l.lat_us));
			l.slot_file = malloc(nslots * sizeof(*l.slot_file));
			if (!l.order || !l.lat_us || !l.slot_file) {
				fprintf(stderr, "out of memory\n");
				exit(1);
			}
			for (unsigned i = 0; i < nslots; i++)
				l.slot_file[i] = -1;
			/* random order, the same for every leg of the run */
			uint64_t st = 0x5eed;
			for (unsigned i = 0; i < ds->nfiles; i++)
				l.order[i] = i;
			for (unsigned i = ds->nfiles; i > 1; i--) {
				st = st * 6364136223846793005ull + 1442695040888963407ull;
				unsigned j = (unsigned)((st >> 33) % i), t = l.order[i - 1];
				l.order[i - 1] = l.order[j];
				l.order[j] = t;
			}
			prepare_cache(ds, !cc);
			char label[128];
			snprintf(label, sizeof(label), "%s %s %s %s", ds->spec->name, modes[m], name, cache);
			progress_start(label);
			double c0 = cpu_now();
			uint64_t t0 = st_now_ns();
			switch (m) {
			case 0: leg_sync(&l); break;
			case 1: leg_async(&l); break;
			case 2: leg_stream(&l, streams); break;
			default: leg_batch(&l); break;
			}
			struct leg_result r = { 0 };
			r.seconds = st_seconds(t0, st_now_ns());
			r.cpu_s = cpu_now() - c0;
			r.bytes = atomic_load(&progress_bytes);
			progress_stop();
			r.files = ds->nfiles;
			r.error = atomic_load(&l.err);
			if (m == 0 && !r.error) {
				r.p50_us = st_percentile(l.lat_us, ds->nfiles, 50);
				r.p99_us = st_percentile(l.lat_us, ds->nfiles, 99);
			}
			snprintf(r.config, sizeof(r.config), "%s", m == 0 ? "threads" : "in-flight");
			unsigned verified = r.error ? 0 : verify(&l);
			if (!r.error)
				r.error = atomic_load(&l.err);
			record(ds->spec->name, modes[m], name, cache, &r, m == 0 ? opt.threads : 1, m == 0 ? 0 : conc,
			       opt.use_gpu ? "device" : "host", verified);
			free(l.order);
			free(l.lat_us);
			free(l.slot_file);
		}
	}
	for (unsigned i = 0; streams && i < conc; i++)
		if (streams[i])
			opends_stream_destroy(streams[i]);
	free(streams);
	opends_buf_deregister(dest);
	opends_driver_close();
}

/* ---- per dataset ----------------------------------------------------------- */

static void run_dataset(const struct ds_spec *spec)
{
	struct dataset ds;
	if (ds_plan(&ds, spec, opt.data, opt.scale)) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	int rc = ds_generate(&ds, 8, opt.verbose);
	if (rc) {
		fprintf(stderr, "generating %s in %s failed: %s\n", spec->name, ds.root, strerror(-rc));
		failures++;
		ds_free(&ds);
		return;
	}
	if (opt.gen_only) {
		ds_free(&ds);
		return;
	}
	unsigned conc = spec->concurrency < ds.nfiles ? spec->concurrency : ds.nfiles;
	unsigned nslots = conc > opt.threads ? conc : opt.threads;
	size_t slot = (ds.max_size + 4095) & ~(size_t)4095;
	char *dest = opt.use_gpu ? gpu_alloc(slot * nslots) : NULL;
	if (!opt.use_gpu && posix_memalign((void **)&dest, 4096, slot * nslots))
		dest = NULL;
	if (dest && !opt.use_gpu)
		memset(dest, 0, slot * nslots); /* fault pages in outside the timed legs */
	if (!dest) {
		fprintf(stderr, "%s: cannot allocate %zu MiB of destination memory\n", spec->name,
			(slot * nslots) >> 20);
		failures++;
		ds_free(&ds);
		return;
	}

	for (unsigned cc = 0; cc < 2 && opt.baselines; cc++) {
		const char *cache = cc ? "hot" : "cold";
		if (!in_list(opt.caches, cache))
			continue;
		struct leg_result r[4];
		unsigned n = ceiling_disk(&ds, !cc, opt.threads, r, 4, cc ? prepare_hot : prepare_cold);
		for (unsigned i = 0; i < n; i++)
			record(spec->name, "sync", "ceiling-disk", cache, &r[i], opt.threads, 0, "host", 0);
		char why[160];
		if (opt.use_gpu && cufile_available(why, sizeof(why))) {
			void **d = calloc(opt.threads, sizeof(*d));
			for (unsigned i = 0; d && i < opt.threads; i++)
				d[i] = dest + (size_t)i * slot;
			prepare_cache(&ds, !cc);
			struct leg_result cr;
			cufile_sync_leg(&ds, opt.threads, d, &cr);
			record(spec->name, "sync", "cufile", cache, &cr, opt.threads, 0, "device", 0);
			free(d);
			/* cuFile has no futures: its async cell stays n/a */
			if (in_list(opt.modes, "stream")) {
				prepare_cache(&ds, !cc);
				if (cufile_stream_leg(&ds, conc, dest, slot, &cr) != -ENOSYS) /* else n/a */
					record(spec->name, "stream", "cufile", cache, &cr, 1, conc, "device", 0);
			}
			if (in_list(opt.modes, "batch")) {
				prepare_cache(&ds, !cc);
				if (cufile_batch_leg(&ds, conc, dest, slot, &cr) != -ENOSYS)
					record(spec->name, "batch", "cufile", cache, &cr, 1, conc < 128 ? conc : 128,
					       "device", 0);
			}
		} else if (opt.use_gpu && cc == 0) {
			fprintf(stderr, "cufile baseline: n/a (%s)\n", why);
		}
	}

	char list[256];
	snprintf(list, sizeof(list), "%s", opt.backends);
	for (char *save = NULL, *b = strtok_r(list, ",", &save); b; b = strtok_r(NULL, ",", &save))
		if (strcmp(b, "none")) /* "none": baselines only */
			run_opends(&ds, b, dest, slot, nslots, conc);

	if (opt.use_gpu)
		gpu_free(dest);
	else
		free(dest);
	ds_free(&ds);
}

static void write_machine(const char *gpu)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/machine.txt", opt.out);
	FILE *f = fopen(path, "w");
	if (!f)
		return;
	struct utsname u;
	uname(&u);
	fprintf(f, "kernel: %s %s %s\n", u.sysname, u.release, u.machine);
	FILE *ci = fopen("/proc/cpuinfo", "r");
	char line[512];
	unsigned cpus = 0;
	char model[256] = "";
	while (ci && fgets(line, sizeof(line), ci)) {
		if (!strncmp(line, "processor", 9))
			cpus++;
		if (!model[0] && !strncmp(line, "model name", 10) && strchr(line, ':'))
			snprintf(model, sizeof(model), "%s", strchr(line, ':') + 2);
	}
	if (ci)
		fclose(ci);
	fprintf(f, "cpu: %u x %s", cpus, model[0] ? model : "unknown\n");
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	fprintf(f, "memory: %.1f GiB\n", (double)pages * psz / (1u << 30));
	fprintf(f, "gpu: %s\n", gpu);
	fprintf(f, "data: %s\n", opt.data);
	unsigned maj, min, pat;
	opends_get_version(&maj, &min, &pat);
	fprintf(f, "opends: %u.%u.%u\n", maj, min, pat);
	/* settings that change the results: the library's, and the CUDA
	 * driver's hardware queue count (see the stream-ordered hang in
	 * bench/results/2026-11-29-h200-b/NOTES.md) */
	for (char **e = environ; *e; e++)
		if (!strncmp(*e, "OPENDS_", 7) || !strncmp(*e, "CUDA_DEVICE_MAX_CONNECTIONS=", 28) ||
		    !strncmp(*e, "KVIKIO_", 7))
			fprintf(f, "env: %s\n", *e);
	fclose(f);
}

static void usage(void)
{
	printf("usage: opends-bench [options]\n"
	       "  --quick             a few seconds on small generated data, best backend, hot cache\n"
	       "  --data DIR          dataset folder (default opends-bench-data)\n"
	       "  --out DIR           results folder for records.csv, machine.txt (default opends-bench-out)\n"
	       "  --datasets LIST     filesize8gib,tiktokish,imagenetish,lmcacheish\n"
	       "  --scale F           multiply file counts (sizes never change; default 1)\n"
	       "  --modes LIST        sync,async,stream,batch\n"
	       "  --backends LIST     auto, backend names (e.g. uring,ref), or none (default auto)\n"
	       "  --cache LIST        cold,hot (default cold)\n"
	       "  --threads N         threads of the sync legs and ceilings (default 8)\n"
	       "  --mem host|device|auto   destination memory (default auto: device where a GPU is)\n"
	       "  --no-baselines      skip ceiling-disk, ceiling-h2d and cufile\n"
	       "  --generate-only     create the datasets and stop\n"
	       "  --quiet             no progress lines\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "quick", no_argument, 0, 'q' },	 { "data", required_argument, 0, 'd' },
		{ "out", required_argument, 0, 'o' },	 { "datasets", required_argument, 0, 'D' },
		{ "scale", required_argument, 0, 's' }, { "modes", required_argument, 0, 'm' },
		{ "backends", required_argument, 0, 'b' }, { "cache", required_argument, 0, 'c' },
		{ "threads", required_argument, 0, 't' }, { "mem", required_argument, 0, 'M' },
		{ "no-baselines", no_argument, 0, 'n' }, { "generate-only", no_argument, 0, 'g' },
		{ "quiet", no_argument, 0, 'Q' },	 { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'q':
			opt.quick = true;
			opt.datasets = "imagenetish,lmcacheish,tiktokish";
			opt.scale = 0.02;
			opt.caches = "hot";
			opt.threads = 4;
			break;
		case 'd': opt.data = optarg; break;
		case 'o': opt.out = optarg; break;
		case 'D': opt.datasets = optarg; break;
		case 's': opt.scale = atof(optarg); break;
		case 'm': opt.modes = optarg; break;
		case 'b': opt.backends = optarg; break;
		case 'c': opt.caches = optarg; break;
		case 't': opt.threads = (unsigned)atoi(optarg); break;
		case 'M': opt.mem = optarg; break;
		case 'n': opt.baselines = false; break;
		case 'g': opt.gen_only = true; break;
		case 'Q': opt.verbose = false; break;
		case 'h': usage(); return 0;
		default: usage(); return 2;
		}
	}
	if (opt.scale <= 0 || opt.threads < 1 || opt.threads > 256) {
		fprintf(stderr, "--scale must be > 0 and --threads in 1..256\n");
		return 2;
	}
	char dlist[256];
	snprintf(dlist, sizeof(dlist), "%s", opt.datasets);
	for (char *save = NULL, *d = strtok_r(dlist, ",", &save); d; d = strtok_r(NULL, ",", &save))
		if (!ds_find(d)) {
			fprintf(stderr, "unknown dataset %s\n", d);
			return 2;
		}

	char why[160] = "";
	opt.use_gpu = strcmp(opt.mem, "host") && gpu_open(why, sizeof(why));
	if (!strcmp(opt.mem, "device") && !opt.use_gpu) {
		fprintf(stderr, "--mem device: no GPU (%s)\n", why);
		return 2;
	}
	mkdir(opt.out, 0755);
	char path[4096];
	snprintf(path, sizeof(path), "%s/records.csv", opt.out);
	bool fresh = access(path, F_OK) != 0;
	csv = fopen(path, "a");
	if (!csv) {
		fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (fresh)
		fprintf(csv, "date,dataset,mode,backend,cache,bytes,seconds,mib_s,cpu_s,files,files_s,p50_us,p99_us,"
			     "threads,concurrency,io_threads,queue_depth,chunk_size,mem,config,verified,error\n");
	time_t now = time(NULL);
	strftime(run_date, sizeof(run_date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	write_machine(opt.use_gpu ? gpu_name() : "none");
	printf("opends-bench: destination %s memory%s%s; results in %s\n", opt.use_gpu ? "GPU" : "host",
	       opt.use_gpu ? " on " : "", opt.use_gpu ? gpu_name() : "", path);

	pthread_t pt;
	atomic_store(&progress_on, true);
	bool have_pt = pthread_create(&pt, NULL, progress_thread, NULL) == 0;

	if (opt.use_gpu && opt.baselines && !opt.gen_only) {
		struct leg_result r = { 0 };
		size_t n = (size_t)256 << 20;
		double mib = gpu_h2d_ceiling(n);
		r.bytes = n;
		r.seconds = mib > 0 ? n / MIB / mib : 0;
		r.error = mib > 0 ? 0 : -EIO;
		snprintf(r.config, sizeof(r.config), "pinned cuMemcpyHtoD 256MiB best of 5");
		record("-", "copy", "ceiling-h2d", "-", &r, 1, 0, "device", 0);
	}
	for (unsigned i = 0; i < ds_nspecs; i++)
		if (in_list(opt.datasets, ds_specs[i].name))
			run_dataset(&ds_specs[i]);

	atomic_store(&progress_on, false);
	if (have_pt)
		pthread_join(pt, NULL);
	fclose(csv);
	cufile_close();
	if (opt.use_gpu)
		gpu_close();
	if (failures)
		fprintf(stderr, "opends-bench: %d leg(s) failed\n", failures);
	return failures ? 1 : 0;
}
