/* records.csv, the lines on stdout, progress on stderr, machine.txt, and
 * the memory and cache helpers every leg family uses. */
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
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <opends.h>

#include "bench.h"
#include "gpu.h"
#include "stats.h"

struct bench_opts opt;
int bench_failures;

static FILE *csv;
static char run_date[32];

#define COLUMNS                                                                                              \
	"date,commit,dataset,mode,backend,cache,bytes,seconds,mib_s,cpu_s,cpu_s_gib,files,files_s,p50_us,p99_us," \
	"threads,concurrency,call_size,repeats,mib_s_min,mib_s_max,io_threads,queue_depth,chunk_size,mem,"       \
	"config,verified,error"

int out_open(const char *dir, bool append)
{
	char path[4096];
	int mk = ds_mkdirs(dir);
	if (mk) {
		fprintf(stderr, "cannot create %s: %s\n", dir, strerror(-mk));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/records.csv", dir);
	/* an old file with other columns is not appended to */
	if (append) {
		FILE *f = fopen(path, "r");
		char head[1024] = "";
		if (f) {
			if (!fgets(head, sizeof(head), f))
				head[0] = '\0';
			fclose(f);
			head[strcspn(head, "\n")] = '\0';
			if (head[0] && strcmp(head, COLUMNS)) {
				fprintf(stderr, "--append: %s has other columns (an older opends-bench); "
						"use a new --out folder\n", path);
				return -1;
			}
		}
	}
	bool fresh = !append || access(path, F_OK) != 0;
	csv = fopen(path, fresh ? "w" : "a");
	if (!csv) {
		fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fresh)
		fprintf(csv, "%s\n", COLUMNS);
	time_t now = time(NULL);
	if (!run_date[0]) /* the command's start: one date for all its rows (reopened after KvikIO) */
		strftime(run_date, sizeof(run_date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	return 0;
}

void out_close(void)
{
	if (csv)
		fclose(csv);
	csv = NULL;
}

/* ---- ceilings recorded in this command ---------------------------------- */

static struct ceil {
	char dataset[32], mode[12], cache[8], backend[24];
	double mib;
} ceils[1024];
static unsigned nceils;

double ceiling_of(const char *dataset, const char *cache, const char *backend)
{
	double best = 0;
	for (unsigned i = 0; i < nceils; i++)
		if (!strcmp(ceils[i].dataset, dataset) && !strcmp(ceils[i].cache, cache) &&
		    !strcmp(ceils[i].backend, backend) && ceils[i].mib > best)
			best = ceils[i].mib;
	return best;
}

/* The figure of a row of another way recorded earlier (peers, gpu1). */
static double row_of(const char *dataset, const char *mode, const char *backend_prefix)
{
	double best = 0;
	for (unsigned i = 0; i < nceils; i++)
		if (!strcmp(ceils[i].dataset, dataset) && !strcmp(ceils[i].mode, mode) &&
		    !strncmp(ceils[i].backend, backend_prefix, strlen(backend_prefix)) && ceils[i].mib > best)
			best = ceils[i].mib;
	return best;
}

static void note_row(const char *dataset, const char *mode, const char *cache, const char *backend, double mib)
{
	if (nceils < sizeof(ceils) / sizeof(ceils[0])) {
		struct ceil *c = &ceils[nceils++];
		snprintf(c->dataset, sizeof(c->dataset), "%s", dataset);
		snprintf(c->mode, sizeof(c->mode), "%s", mode);
		snprintf(c->cache, sizeof(c->cache), "%s", cache);
		snprintf(c->backend, sizeof(c->backend), "%s", backend);
		c->mib = mib;
	}
}

void ceiling_note(const char *dataset, const char *cache, const char *backend, double mib)
{
	note_row(dataset, "-", cache, backend, mib);
}

/* The ceiling a leg is read against, as docs/bench.md says: the disk
 * ceiling of the same files and cache for the dataset legs, the copy
 * ceiling for hot big reads, the write ceiling for writes. */
static double ceiling_for(const struct rec *k, const char **name)
{
	*name = NULL;
	if (!strcmp(k->mode, "write16m") || !strcmp(k->mode, "write8t")) {
		*name = "ceiling-write";
		return ceiling_of(k->dataset, k->cache, *name);
	}
	if (!strcmp(k->mode, "seq16m") || !strcmp(k->mode, "gpu1")) {
		*name = "ceiling-h2d";
		return ceiling_of("-", "-", *name);
	}
	if (!strcmp(k->mode, "files1t")) {
		*name = "vs posix"; /* the goal: at least the plain loop */
		return strcmp(k->backend, "posix") ? row_of(k->dataset, k->mode, "posix") : 0;
	}
	if (!strcmp(k->mode, "dev1")) { /* GPU 1 against GPU 0, same read */
		*name = "vs gpu1";
		return row_of(k->dataset, "gpu1", "opends:");
	}
	if (!strcmp(k->mode, "gpu2")) { /* min(2 x gpu1, the host-read ceiling, both GPUs' copies) */
		double v[3] = { 2 * row_of(k->dataset, "gpu1", "opends:"), ceiling_of(k->dataset, k->cache, "ceiling-host"),
				ceiling_of(k->dataset, k->cache, "ceiling-h2d2") },
		       best = 0;
		static const char *const names[3] = { "vs 2x gpu1", "ceiling-host", "ceiling-h2d2" };
		for (unsigned i = 0; i < 3; i++)
			if (v[i] > 0 && (best <= 0 || v[i] < best)) {
				best = v[i];
				*name = names[i];
			}
		return best;
	}
	if (!strcmp(k->mode, "fanout2")) { /* bytes placed / s against one GPU's read (issue 19: >= 1.8) */
		*name = "vs gpu1";
		return row_of(k->dataset, "gpu1", "opends:");
	}
	if (!strcmp(k->mode, "rand4k"))
		return 0;
	*name = "ceiling-disk";
	return ceiling_of(k->dataset, k->cache, *name);
}

void record(const struct rec *k, const struct leg_result *r)
{
	double mib = r->error ? 0 : st_mib_s(r->bytes, r->seconds);
	double gib = r->bytes / (MIB * 1024);
	double cpu_gib = gib > 0 ? r->cpu_s / gib : 0;
	const char *env_t = getenv("OPENDS_IO_THREADS"), *env_q = getenv("OPENDS_QUEUE_DEPTH"),
		   *env_c = getenv("OPENDS_CHUNK_SIZE");
	char tagged[96]; /* --tag: an A/B run of other settings reads as a backend of its own */
	struct rec kt;
	if (opt.tag && !strncmp(k->backend, "opends:", 7)) {
		snprintf(tagged, sizeof(tagged), "%s+%s", k->backend, opt.tag);
		kt = *k;
		kt.backend = tagged;
		k = &kt;
	}
	fprintf(csv,
		"%s,%s,%s,%s,%s,%s,%" PRIu64 ",%.6f,%.1f,%.3f,%.3f,%u,%.1f,%.2f,%.2f,%u,%u,%" PRIu64
		",%u,%.1f,%.1f,%s,%s,%s,%s,\"%s\",%u,%d\n",
		run_date, opt.commit, k->dataset, k->mode, k->backend, k->cache, r->bytes, r->seconds, mib, r->cpu_s,
		cpu_gib, r->files, r->seconds > 0 ? r->files / r->seconds : 0, r->p50_us, r->p99_us, k->threads,
		k->conc, k->call_size, r->repeats ? r->repeats : 1, r->repeats > 1 ? r->mib_min : mib,
		r->repeats > 1 ? r->mib_max : mib, env_t ? env_t : "", env_q ? env_q : "", env_c ? env_c : "", k->mem,
		r->config, k->verified, r->error);
	fflush(csv);

	bool is_ceiling = !strncmp(k->backend, "ceiling-", 8);
	char ratio[48] = "";
	if (!r->error)
		note_row(k->dataset, k->mode, k->cache, k->backend, mib);
	if (is_ceiling) {
		snprintf(ratio, sizeof(ratio), "(ceiling)");
	} else if (!r->error) {
		const char *cname;
		double c = ceiling_for(k, &cname);
		if (c > 0)
			snprintf(ratio, sizeof(ratio), "%.2fx %s%s", mib / c,
				 strncmp(cname, "ceiling-", 8) ? cname : cname + 8,
				 mib > 1.05 * c && !strncmp(cname, "ceiling-", 8) ? " BEATS IT" : "");
	}
	char figure[64];
	if (r->p50_us > 0 && (!strcmp(k->mode, "rand4k")))
		snprintf(figure, sizeof(figure), "p50 %6.1f us p99 %6.1f", r->p50_us, r->p99_us);
	else
		snprintf(figure, sizeof(figure), "%10.1f MiB/s", mib);
	char spread[48] = "";
	if (r->repeats > 1 && mib > 0)
		snprintf(spread, sizeof(spread), " +-%.0f%%/%u", 50 * (r->mib_max - r->mib_min) / mib, r->repeats);
	printf("%-12s %-8s %-15s %-4s %s%-8s %-18s %s%s\n", k->dataset, k->mode, k->backend, k->cache, figure,
	       spread, ratio, r->error ? "FAILED " : "", r->config);
	fflush(stdout);
	if (!is_ceiling && !r->error) {
		const char *cname;
		double c = ceiling_for(k, &cname);
		if (c > 0 && mib > 1.05 * c && !strncmp(cname, "ceiling-", 8))
			fprintf(stderr, "note: %s %s %s beats %s by %.0f%%: that ceiling was under-measured\n",
				k->dataset, k->mode, k->backend, cname, 100 * (mib / c - 1));
	}
	if (r->error) {
		if (r->error == -ETIMEDOUT)
			fprintf(stderr, "%s %s %s %s: stopped at its time limit (--leg-timeout %.0f s)\n", k->dataset,
				k->mode, k->backend, k->cache, opt.leg_timeout);
		else
			fprintf(stderr, "%s %s %s %s: error %d (%s)\n", k->dataset, k->mode, k->backend, k->cache,
				r->error,
				r->error < 0 && r->error > -4096 ? strerror(-r->error) : opends_op_status_error(r->error));
		bench_failures++;
	}
}

void record_na(const char *dataset, const char *mode, const char *backend, const char *why)
{
	printf("%-12s %-8s %-15s %-4s %16s %s\n", dataset, mode, backend, "-", "n/a", why);
	fflush(stdout);
}

bool bench_driver_open(const char *backend, const char *dataset)
{
	setenv("OPENDS_BACKEND", backend, 1);
	opends_error_t e = opends_driver_open();
	if (!e.err)
		return true;
	/* an error row, so the report's failed legs show it */
	char name[64];
	snprintf(name, sizeof(name), "opends:%s", backend);
	struct leg_result r = { .error = (int)e.err };
	snprintf(r.config, sizeof(r.config), "opends_driver_open: %.100s", opends_last_error_detail());
	struct rec k = { dataset, "-", name, "-", opt.use_gpu ? "device" : "host", 0, 0, 0, 0 };
	record(&k, &r);
	return false;
}

/* ---- repeats ------------------------------------------------------------- */

static int cmp_mib(const void *a, const void *b)
{
	const struct leg_result *x = a, *y = b;
	double u = st_mib_s(x->bytes, x->seconds), v = st_mib_s(y->bytes, y->seconds);
	return (u > v) - (u < v);
}

void repeat_leg(leg_fn fn, void *ctx, struct leg_result *out)
{
	struct leg_result runs[32];
	unsigned want = opt.repeat ? opt.repeat : 1, n = 0;
	if (want > 32)
		want = 32;
	for (; n < want; n++) {
		memset(&runs[n], 0, sizeof(runs[n]));
		if (fn(ctx, &runs[n]) || runs[n].error) {
			*out = runs[n]; /* a failed run is the leg's result */
			out->repeats = n + 1;
			return;
		}
		if (n == 0 && !opt.repeat && runs[0].seconds < 1.0)
			want = 3; /* short legs are noise-level once */
	}
	qsort(runs, n, sizeof(runs[0]), cmp_mib);
	*out = runs[n / 2];
	out->repeats = n;
	out->mib_min = st_mib_s(runs[0].bytes, runs[0].seconds);
	out->mib_max = st_mib_s(runs[n - 1].bytes, runs[n - 1].seconds);
}

/* ---- progress ------------------------------------------------------------ */

static struct {
	pthread_t thread;
	bool have_thread, tty;
	atomic_bool on;
	pthread_mutex_t lock;
	char label[128];
	uint64_t total, t0, t_run; /* t_run: the command's start */
	unsigned leg;
	bool shown;
	atomic_uint_fast64_t bytes;
} pg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void progress_clear_locked(void)
{
	if (pg.shown)
		fprintf(stderr, "\r%*s\r", 100, "");
	pg.shown = false;
}

/* A leg still running --hung-grace seconds (30: legs stop between calls,
 * and one call of a GiB file can take several seconds cold) past its limit is stuck inside a
 * call that does not return (the 8 GiB stream leg on a061cd5 ate 290 s of
 * a 360 s budget). It cannot be cancelled: its row is written as hung, and
 * the command ends with exit status 3, so that the next command of the
 * sweep (bench/gpu-run.sh runs several) still runs. Caller holds pg.lock. */
static void hung_check_locked(uint64_t now)
{
	if (!pg.label[0] || opt.leg_timeout <= 0 || st_seconds(pg.t0, now) < opt.leg_timeout + opt.hung_grace)
		return;
	progress_clear_locked();
	fprintf(stderr, "[%6.1f s] HUNG: '%s' has not returned %.0f s after its %.0f s limit (a call that does "
			"not return); recorded as hung, this command ends (exit 3)\n",
		st_seconds(pg.t_run, now), pg.label, opt.hung_grace, opt.leg_timeout);
	/* the label's words: DATASET MODE BACKEND CACHE (dataset legs) or
	 * MODE WAY (caller legs) */
	char w[4][48] = { "", "", "", "" };
	int n = sscanf(pg.label, "%47s %47s %47s %47s", w[0], w[1], w[2], w[3]);
	struct leg_result r = { .error = -ETIMEDOUT, .seconds = st_seconds(pg.t0, now) };
	snprintf(r.config, sizeof(r.config), "hung: no return %.0f s past the %.0f s limit; command ended",
		 opt.hung_grace, opt.leg_timeout);
	if (n == 4)
		record(&(struct rec){ w[0], w[1], w[2], w[3], opt.use_gpu ? "device" : "host", 0, 0, 0, 0 }, &r);
	else
		record(&(struct rec){ "callers", n > 0 ? w[0] : "?", n > 1 ? w[1] : "?", "hot",
				      opt.use_gpu ? "device" : "host", 0, 0, 0, 0 }, &r);
	fflush(NULL);
	_exit(3);
}

/* The progress bar (on a terminal) and the hung-leg watchdog (always). */
static void *progress_thread(void *arg)
{
	(void)arg;
	while (atomic_load(&pg.on)) {
		struct timespec ts = { 0, 250 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&pg.lock);
		uint64_t now = st_now_ns();
		hung_check_locked(now);
		if (pg.tty && pg.label[0] && now - pg.t0 >= 1000000000ull) {
			uint64_t b = atomic_load(&pg.bytes);
			double s = st_seconds(pg.t0, now), frac = pg.total ? (double)b / pg.total : 0;
			if (frac > 1)
				frac = 1;
			char bar[21];
			for (int i = 0; i < 20; i++)
				bar[i] = i < (int)(frac * 20) ? '#' : '.';
			bar[20] = '\0';
			if (b)
				fprintf(stderr, "\r  %-44.44s [%s] %3.0f%% %7.2f GiB %8.0f MiB/s  ETA %4.0f s ", pg.label,
					bar, frac * 100, b / (MIB * 1024), st_mib_s(b, s),
					frac > 0 ? s / frac - s : 0.0);
			else /* one call in flight: nothing to count until it returns */
				fprintf(stderr, "\r  %-44.44s [%s] %5.1f s, first call in flight ", pg.label, bar, s);
			pg.shown = true;
		}
		pthread_mutex_unlock(&pg.lock);
	}
	return NULL;
}

void progress_init(void)
{
	pg.tty = opt.verbose && isatty(2);
	pg.t_run = st_now_ns();
	atomic_store(&pg.on, true);
	pg.have_thread = pthread_create(&pg.thread, NULL, progress_thread, NULL) == 0;
}

void progress_start(const char *label, uint64_t total_bytes)
{
	/* in a log (no terminal): one line as each leg starts, seconds since
	 * the command started, so the log shows where the time goes */
	if (!pg.tty && opt.verbose)
		fprintf(stderr, "[%6.1f s] start: %s\n", progress_elapsed(), label);
	st_deadline(opt.leg_timeout);
	pthread_mutex_lock(&pg.lock);
	snprintf(pg.label, sizeof(pg.label), "%s", label);
	pg.total = total_bytes;
	pg.t0 = st_now_ns();
	atomic_store(&pg.bytes, 0);
	pthread_mutex_unlock(&pg.lock);
}

double progress_elapsed(void)
{
	return pg.t_run ? st_seconds(pg.t_run, st_now_ns()) : 0;
}

void progress_lap(void)
{
	st_deadline(opt.leg_timeout);
	pthread_mutex_lock(&pg.lock);
	pg.t0 = st_now_ns();
	pthread_mutex_unlock(&pg.lock);
}

void progress_add(uint64_t bytes)
{
	atomic_fetch_add(&pg.bytes, bytes);
}

uint64_t progress_bytes(void)
{
	return atomic_load(&pg.bytes);
}

void progress_stop(void)
{
	st_deadline(0);
	pthread_mutex_lock(&pg.lock);
	pg.label[0] = '\0';
	progress_clear_locked();
	pthread_mutex_unlock(&pg.lock);
}

void progress_end(void)
{
	atomic_store(&pg.on, false);
	if (pg.have_thread)
		pthread_join(pg.thread, NULL);
	pg.have_thread = false;
}

/* ---- small helpers ------------------------------------------------------- */

bool in_list(const char *list, const char *item)
{
	size_t n = strlen(item);
	for (const char *p = list; (p = strstr(p, item)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

void config_wrap(struct leg_result *r, const char *pre, const char *post)
{
	char tmp[sizeof(r->config)];
	if (snprintf(tmp, sizeof(tmp), "%s%s%s", pre, r->config, post) < 0)
		return;
	memcpy(r->config, tmp, sizeof(tmp));
}

bool cache_wanted(const char *dataset, const char *cache)
{
	char item[64];
	snprintf(item, sizeof(item), "%s:%s", dataset, cache);
	return in_list(opt.caches, cache) || in_list(opt.caches, item);
}

static bool field_matches(const char *pat, size_t n, const char *value)
{
	return !value || (n == 1 && pat[0] == '*') || (strlen(value) == n && !strncmp(pat, value, n));
}

bool leg_wanted(const char *dataset, const char *mode, const char *cache)
{
	if (!opt.legs)
		return (!mode || in_list(opt.modes, mode)) && (!cache || cache_wanted(dataset, cache)) &&
		       (cache || cache_wanted(dataset, "cold") || cache_wanted(dataset, "hot"));
	/* DATASET:MODE:CACHE items, '*' for any */
	for (const char *p = opt.legs; *p;) {
		const char *end = strchr(p, ','), *c1 = strchr(p, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!end)
			end = p + strlen(p);
		if (c1 && c2 && c2 < end && field_matches(p, (size_t)(c1 - p), dataset) &&
		    field_matches(c1 + 1, (size_t)(c2 - c1 - 1), mode) && field_matches(c2 + 1, (size_t)(end - c2 - 1), cache))
			return true;
		p = *end ? end + 1 : end;
	}
	return false;
}

double cpu_now(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	uint64_t kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

void *dest_alloc(size_t n)
{
	if (opt.use_gpu)
		return gpu_alloc(n);
	void *p = NULL;
	if (posix_memalign(&p, 4096, n ? n : 1))
		return NULL;
	memset(p, 0, n); /* fault pages in outside the timed legs */
	return p;
}

void dest_free(void *p)
{
	if (opt.use_gpu)
		gpu_free(p);
	else
		free(p);
}

void *pinned_alloc(size_t n)
{
	if (opt.use_gpu)
		return gpu_host_alloc(n);
	void *p = NULL;
	if (posix_memalign(&p, 4096, n ? n : 1))
		return NULL;
	memset(p, 0, n);
	return p;
}

void pinned_free(void *p)
{
	if (opt.use_gpu)
		gpu_host_free(p);
	else
		free(p);
}

int dest_put(void *dst, const void *src, size_t n)
{
	if (opt.use_gpu)
		return gpu_from_host(dst, src, n);
	memcpy(dst, src, n);
	return 0;
}

int dest_get(void *dst, const void *src, size_t n)
{
	if (opt.use_gpu)
		return gpu_to_host(dst, src, n);
	memcpy(dst, src, n);
	return 0;
}

/* Whether every page of the file is in the page cache (mincore of a
 * mapping): reading 8 GiB again to make it hot costs 2-3 s per leg, and a
 * sweep makes it hot some thirty times. */
static bool all_cached(int fd, uint64_t size)
{
	long pg_size = sysconf(_SC_PAGESIZE);
	if (!size || pg_size <= 0)
		return size == 0;
	size_t pages = (size_t)((size + (uint64_t)pg_size - 1) / (uint64_t)pg_size);
	void *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	unsigned char *vec = m == MAP_FAILED ? NULL : malloc(pages);
	bool all = vec && mincore(m, size, vec) == 0;
	for (size_t i = 0; all && i < pages; i++)
		all = vec[i] & 1;
	free(vec);
	if (m != MAP_FAILED)
		munmap(m, size);
	return all;
}

void prepare_cache(const struct dataset *ds, bool cold)
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
		if (!all_cached(f, ds->files[i].size))
			while (read(f, buf, 4u << 20) > 0)
				;
		close(f);
	}
	free(buf);
}

unsigned *leg_order(const struct dataset *ds)
{
	unsigned *order = malloc((ds->nfiles ? ds->nfiles : 1) * sizeof(*order));
	if (!order)
		return NULL;
	uint64_t st = 0x5eed;
	for (unsigned i = 0; i < ds->nfiles; i++)
		order[i] = i;
	for (unsigned i = ds->nfiles; i > 1; i--) {
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		unsigned j = (unsigned)((st >> 33) % i), t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	return order;
}

void write_machine(const char *gpu)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/machine.txt", opt.out);
	if (opt.append && access(path, F_OK) == 0)
		return; /* the sweep's first command described it (a later one may run with other settings) */
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
	fprintf(f, "opends: %u.%u.%u commit %s\n", maj, min, pat, opt.commit);
	/* settings that change the results: the library's, and the CUDA
	 * driver's hardware queue count (see the stream-ordered hang in
	 * bench/results/2026-11-29-h200-4687ea0/NOTES.md) */
	extern char **environ;
	for (char **e = environ; *e; e++)
		if (!strncmp(*e, "OPENDS_", 7) || !strncmp(*e, "CUDA_DEVICE_MAX_CONNECTIONS=", 28) ||
		    !strncmp(*e, "KVIKIO_", 7))
			fprintf(f, "env: %s\n", *e);
	fclose(f);
}
