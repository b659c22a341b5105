/* Benchmark datasets: shapes after the upstream's four, counts scaled to fit
 * one GPU-machine command each. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dataset.h"
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GiB (1ull << 30)

const struct ds_spec ds_specs[] = {
	{ "filesize8gib", 1, 1, 1, "sample_%06u.bin", 8 * GiB, 8 * GiB, false, 1 },
	{ "tiktokish", 32, 0, 14, "sample_%06u.bin", 7340032, 8388608, true, 26 },
	{ "imagenetish", 50, 0, 500, "sample_%06u.bin", 75000, 150000, false, 4096 },
	{ "lmcacheish", 8, 0, 32, "chunk_%05u.kvcache", 14684160, 14684160, false, 26 },
};
const unsigned ds_nspecs = sizeof(ds_specs) / sizeof(ds_specs[0]);

const struct ds_spec *ds_find(const char *name)
{
	for (unsigned i = 0; i < ds_nspecs; i++)
		if (!strcmp(ds_specs[i].name, name))
			return &ds_specs[i];
	return NULL;
}

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t ds_seed_of(const char *rel)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (; *rel; rel++)
		h = (h ^ (unsigned char)*rel) * 0x100000001b3ull;
	return mix64(h);
}

static inline uint64_t word_at(uint64_t seed, uint64_t w)
{
	return mix64(seed + w * 0x9e3779b97f4a7c15ull);
}

void ds_fill(uint64_t seed, uint64_t off, void *buf, size_t n)
{
	unsigned char *p = buf;
	uint64_t w = off / 8;
	size_t skip = off % 8, i = 0;
	if (skip) {
		uint64_t v = word_at(seed, w++);
		for (size_t k = skip; k < 8 && i < n; k++)
			p[i++] = (unsigned char)(v >> (8 * k));
	}
	for (; i + 8 <= n; i += 8) {
		uint64_t v = word_at(seed, w++); /* little-endian byte order */
		memcpy(p + i, &v, 8);
	}
	if (i < n) {
		uint64_t v = word_at(seed, w);
		for (size_t k = 0; i < n; k++)
			p[i++] = (unsigned char)(v >> (8 * k));
	}
}

uint64_t ds_check(uint64_t seed, uint64_t off, const void *buf, size_t n)
{
	unsigned char tmp[4096];
	const unsigned char *p = buf;
	for (size_t done = 0; done < n;) {
		size_t k = n - done < sizeof(tmp) ? n - done : sizeof(tmp);
		ds_fill(seed, off + done, tmp, k);
		if (memcmp(tmp, p + done, k))
			for (size_t j = 0; j < k; j++)
				if (tmp[j] != p[done + j])
					return done + j + 1;
		done += k;
	}
	return 0;
}

int ds_plan(struct dataset *ds, const struct ds_spec *spec, const char *data_dir, double scale)
{
	memset(ds, 0, sizeof(*ds));
	ds->spec = spec;
	unsigned per = (unsigned)(spec->per_class * scale + 0.5);
	if (per < 1)
		per = 1;
	if (asprintf(&ds->root, "%s/%s", data_dir, spec->name) < 0)
		return -ENOMEM;
	ds->nfiles = spec->classes * per;
	ds->files = calloc(ds->nfiles, sizeof(*ds->files));
	if (!ds->files)
		return -ENOMEM;
	/* Sizes come from a generator seeded by the dataset's name, so the
	 * same scale always gives the same files. */
	uint64_t state = ds_seed_of(spec->name);
	unsigned k = 0;
	for (unsigned c = 0; c < spec->classes; c++) {
		for (unsigned i = 0; i < per; i++, k++) {
			struct ds_file *f = &ds->files[k];
			char name[64];
			snprintf(name, sizeof(name), spec->file_fmt, i);
			size_t rootlen = strlen(ds->root);
			if (asprintf(&f->path, "%s/class%03u/%s", ds->root, spec->first_class + c, name) < 0)
				return -ENOMEM;
			f->rel = f->path + rootlen + 1;
			uint64_t span = spec->max_size - spec->min_size + 1;
			state = mix64(state + 0x9e3779b97f4a7c15ull);
			f->size = spec->min_size + state % span;
			if (spec->not_512 && f->size % 512 == 0)
				f->size += f->size < spec->max_size ? 1 : -1;
			f->seed = ds_seed_of(f->rel);
			ds->total_bytes += f->size;
			if (f->size > ds->max_size)
				ds->max_size = f->size;
		}
	}
	return 0;
}

void ds_free(struct dataset *ds)
{
	for (unsigned i = 0; i < ds->nfiles; i++)
		free(ds->files[i].path);
	free(ds->files);
	free(ds->root);
	memset(ds, 0, sizeof(*ds));
}

/* The marker names the layout it completes, so another scale or version
 * of the generator is not mistaken for this one. */
static char *marker_text(const struct dataset *ds)
{
	char *s = NULL;
	if (asprintf(&s, "opends-bench dataset v1 %s files=%u bytes=%" PRIu64 "\n", ds->spec->name, ds->nfiles,
		     ds->total_bytes) < 0)
		return NULL;
	return s;
}

static bool complete(const struct dataset *ds, const char *marker)
{
	char *want = marker_text(ds), got[256] = "";
	char path[4096];
	snprintf(path, sizeof(path), "%s/.complete", ds->root);
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(got, sizeof(got), f))
			got[0] = '\0';
		fclose(f);
	}
	bool ok = want && !strcmp(want, got);
	free(want);
	(void)marker;
	if (!ok)
		return false;
	for (unsigned i = 0; i < ds->nfiles; i++) {
		struct stat st;
		if (stat(ds->files[i].path, &st) || (uint64_t)st.st_size != ds->files[i].size)
			return false;
	}
	return true;
}

int ds_mkdirs(const char *path)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

struct gen_ctx {
	struct dataset *ds;
	atomic_uint next;
	atomic_uint_fast64_t done_bytes;
	atomic_int err;
};

static int write_file(struct gen_ctx *g, const struct ds_file *f)
{
	const size_t bs = 4u << 20;
	char *dir = strdup(f->path);
	if (!dir)
		return -ENOMEM;
	*strrchr(dir, '/') = '\0';
	int rc = ds_mkdirs(dir);
	free(dir);
	if (rc)
		return rc;
	int fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	char *buf = malloc(bs);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (uint64_t off = 0; off < f->size && !rc;) {
		size_t n = f->size - off < bs ? (size_t)(f->size - off) : bs;
		ds_fill(f->seed, off, buf, n);
		for (size_t w = 0; w < n;) {
			ssize_t r = pwrite(fd, buf + w, n - w, (off_t)(off + w));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				rc = r < 0 ? -errno : -EIO;
				break;
			}
			w += (size_t)r;
		}
		off += n;
		atomic_fetch_add(&g->done_bytes, n);
	}
	free(buf);
	if (close(fd) && !rc)
		rc = -errno;
	return rc;
}

static void *gen_worker(void *arg)
{
	struct gen_ctx *g = arg;
	for (;;) {
		unsigned i = atomic_fetch_add(&g->next, 1);
		if (i >= g->ds->nfiles || atomic_load(&g->err))
			break;
		int rc = write_file(g, &g->ds->files[i]);
		if (rc) {
			atomic_store(&g->err, rc);
			break;
		}
	}
	return NULL;
}

int ds_generate(struct dataset *ds, unsigned threads, bool verbose)
{
	if (complete(ds, NULL)) {
		if (verbose)
			fprintf(stderr, "dataset %s: reusing %u files (%.2f GiB) in %s\n", ds->spec->name, ds->nfiles,
				ds->total_bytes / (double)GiB, ds->root);
		return 0;
	}
	char marker[4096];
	snprintf(marker, sizeof(marker), "%s/.complete", ds->root);
	unlink(marker);
	int rc = ds_mkdirs(ds->root);
	if (rc)
		return rc;
	struct gen_ctx g = { .ds = ds };
	uint64_t t_gen = st_now_ns();
	if (threads < 1)
		threads = 1;
	if (threads > ds->nfiles)
		threads = ds->nfiles;
	pthread_t *t = calloc(threads, sizeof(*t));
	if (!t)
		return -ENOMEM;
	unsigned started = 0;
	for (; started < threads; started++)
		if (pthread_create(&t[started], NULL, gen_worker, &g))
			break;
	if (!started) {
		free(t);
		return -EAGAIN;
	}
	/* One progress line a second while the workers write. */
	for (;;) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		static unsigned ticks;
		nanosleep(&ts, NULL);
		uint64_t done = atomic_load(&g.done_bytes);
		bool finished = done >= ds->total_bytes || atomic_load(&g.err) ||
				atomic_load(&g.next) >= ds->nfiles + started;
		if (verbose && (finished || (++ticks % 10 == 0 && isatty(2))))
			fprintf(stderr, "\rgenerating %s: %.2f / %.2f GiB", ds->spec->name, done / (double)GiB,
				ds->total_bytes / (double)GiB);
		if (finished)
			break;
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	if (verbose) /* the time, for the log's account of where time goes */
		fprintf(stderr, " in %.1f s\n", st_seconds(t_gen, st_now_ns()));
	rc = atomic_load(&g.err);
	if (rc)
		return rc;
	char *text = marker_text(ds);
	FILE *f = text ? fopen(marker, "w") : NULL;
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		free(text);
		return -EIO;
	}
	free(text);
	return 0;
}
