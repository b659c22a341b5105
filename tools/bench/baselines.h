/* Baselines measured in the same run as OpenDS: what the storage gives
 * with no GPU involved (ceiling-disk) and what cuFile gives (cufile). */
#ifndef BENCH_BASELINES_H
#define BENCH_BASELINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"

struct leg_result {
	uint64_t bytes;
	double seconds, cpu_s;
	unsigned files;
	double p50_us, p99_us; /* per-file latency, 0 when not measured */
	int error;             /* 0 or -errno / -code of the first failure */
	char config[128];      /* what was measured, e.g. "pread 8x4MiB" */
	unsigned repeats;      /* runs behind the figures (median kept), 0 = 1 */
	double mib_min, mib_max; /* spread over the runs */
};

/* ceiling-disk: host-memory reads over the dataset's files in the legs'
 * order (order: file indexes, NULL for creation order), direct when cold,
 * buffered when hot, in several shapes, the best of which is the ceiling:
 * threads x pread (the sync legs' shape), 8 threads x io_uring 16 x 1 MiB
 * (the library's own), one deep io_uring (the async/batch legs' shape), and
 * for large files 16 MiB requests. */
struct disk_shape {
	bool uring;     /* width threads, each an io_uring with qd reads in flight; else width threads x pread */
	unsigned width;
	size_t block;
	unsigned qd;
};
unsigned ceiling_shapes(const struct dataset *ds, unsigned threads, struct disk_shape *out, unsigned max);
void ceiling_shape_run(const struct dataset *ds, const unsigned *order, bool direct, const struct disk_shape *sh,
		       struct leg_result *r);
/* Buffered pread of the (hot) dataset by threads × block into pinned
 * host memory: the ceiling-host of the caller legs. */
void ceiling_host(const struct dataset *ds, unsigned threads, size_t block, struct leg_result *r);

/* cuFile baseline, sync mode: threads × (open, register, cuFileRead whole
 * file into device memory, deregister). false with why when libcufile is
 * not usable. dest: one device buffer of max_size per thread. */
bool cufile_available(char *why, unsigned long why_len);
int cufile_sync_leg(const struct dataset *ds, unsigned threads, void **dest, struct leg_result *res);
/* The same through cuFile's batch API (at most 128 entries in flight, its
 * default io_batchsize) and its stream API (cuFileReadAsync on one stream
 * per slot). slot: bytes between slots in dest. -ENOSYS where the loaded
 * libcufile lacks the API. */
int cufile_batch_leg(const struct dataset *ds, unsigned conc, char *dest, size_t slot, struct leg_result *res);
/* flags: cuFileStreamRegister's on every stream (0: none). */
int cufile_stream_leg(const struct dataset *ds, unsigned conc, char *dest, size_t slot, unsigned flags,
		      struct leg_result *res);
/* cuFileWrite of size bytes from device memory src to a new file at path
 * (opened O_DIRECT, as cuFile needs), threads each writing its own range
 * in calls of call bytes, then fdatasync. */
int cufile_write_leg(const char *path, const void *src, uint64_t size, unsigned threads, size_t call,
		     struct leg_result *res);
void cufile_close(void);

#endif
