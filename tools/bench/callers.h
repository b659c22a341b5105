/* What the caller legs share between callers.c (reads) and writes.c. */
#ifndef BENCH_CALLERS_H
#define BENCH_CALLERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <opends.h>

#include "bench.h"

#define CALL ((size_t)16 << 20) /* bytes per call of seq16m and the writes */
#define WRITE_THREADS 8

/* The state of one caller leg: which way (opends, posix, cufile), the
 * files, and the memory it reads into or writes from. */
struct caller {
	const char *mode;
	const char *way;      /* "opends", "posix" or "cufile" */
	const struct dataset *ds; /* the big file, or imagenetish for files1t */
	const unsigned *order;
	char *dest;           /* destination (device memory where a GPU is) */
	size_t dest_size;
	char *pinned;         /* the plain way's staging */
	size_t pinned_size;
	bool host_dest;       /* rand4k into host memory */
	const char *wpath;    /* writes: the new file */
	char label[96];
	double *lat;          /* rand4k */
	uint64_t *offs;       /* rand4k offsets */
	unsigned nreads;
};

int open_reg(const char *path, int flags, opends_handle_t *fh); /* open + register: fd or -error */
void unreg(opends_handle_t fh, int fd);
ssize_t pread_full(int fd, char *buf, size_t n, off_t off);  /* short only at end of file */
ssize_t pwrite_full(int fd, const char *buf, size_t n, off_t off);
/* the timed part of a leg: progress, CPU and wall clock */
void begin(struct caller *c, struct leg_result *r, uint64_t total, double *c0, uint64_t *t0);
void end(struct leg_result *r, double c0, uint64_t t0);
bool caller_wanted(const char *leg); /* in --callers */
void run_way(const char *mode, const char *way, struct caller *c, leg_fn fn, const char *dsname, const char *cache,
	     unsigned threads, uint64_t call_size);
/* write16m and write8t through OpenDS (od) and, when plain, the plain way
 * and cuFile, between two measurements of ceiling-write */
void writes(struct caller *c, const char *dsname, bool od, bool plain);

#endif
