/* Benchmark datasets: deterministic shapes and contents (see
 * ../../docs/bench.md). Content is a pseudorandom stream seeded by the
 * file's path inside the dataset, so any range can be verified without a
 * copy. */
#ifndef BENCH_DATASET_H
#define BENCH_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_spec {
	const char *name;
	unsigned classes;      /* directories */
	unsigned first_class;  /* number of the first directory */
	unsigned per_class;    /* files per directory at scale 1 */
	const char *file_fmt;  /* printf format of a file name, takes the index */
	uint64_t min_size, max_size; /* inclusive; equal for fixed sizes */
	bool not_512;          /* sizes are never a multiple of 512 */
	unsigned concurrency;  /* in flight for async/stream/batch legs */
};

struct ds_file {
	char *path;    /* full path */
	const char *rel; /* inside the dataset (points into path) */
	uint64_t size;
	uint64_t seed;
};

struct dataset {
	const struct ds_spec *spec;
	char *root;    /* <data dir>/<name> */
	unsigned nfiles;
	struct ds_file *files;
	uint64_t total_bytes, max_size;
};

extern const struct ds_spec ds_specs[];
extern const unsigned ds_nspecs;
const struct ds_spec *ds_find(const char *name);

/* Lay out a dataset (names, sizes, seeds) at a scale; no I/O. */
int ds_plan(struct dataset *ds, const struct ds_spec *spec, const char *data_dir, double scale);
void ds_free(struct dataset *ds);
/* Create the files unless a complete copy is there (a marker file records
 * completion); a partial one is regenerated. Progress on stderr when
 * verbose. 0 or -errno. */
int ds_generate(struct dataset *ds, unsigned threads, bool verbose);

/* Content: the bytes of [off, off+n) of a file with this seed. */
void ds_fill(uint64_t seed, uint64_t off, void *buf, size_t n);
/* 0 when buf holds the file's bytes [off, off+n), else the offset of the
 * first bad byte + 1. */
uint64_t ds_check(uint64_t seed, uint64_t off, const void *buf, size_t n);
uint64_t ds_seed_of(const char *rel);
/* mkdir -p: 0 or -errno */
int ds_mkdirs(const char *path);

#endif
