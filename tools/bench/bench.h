/* What the parts of opends-bench share: the options of the run, records.csv
 * and the terminal (output.c), the repeat-and-median rule, and the leg
 * families (legs.c: the four datasets; callers.c: the ways users call). */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "baselines.h"
#include "dataset.h"

struct bench_opts {
	bool quick, use_gpu, verbose, append, baselines, gen_only;
	const char *data, *out, *datasets, *modes, *backends, *caches, *mem, *callers;
	const char *legs; /* NULL, or DATASET:MODE:CACHE items */
	const char *source; /* a URL for opends_handle_open_url, or NULL */
	const char *tag;    /* --tag: appended to OpenDS's backend names (opends:uring+TAG), or NULL */
	uint64_t source_size;
	double scale;
	unsigned threads;
	unsigned repeat;     /* 0: 3 for legs under a second, else 1 */
	double leg_timeout;  /* seconds a leg may run before it stops as timed out (0: none) */
	double hung_grace;   /* seconds past leg_timeout before a leg stuck in a call is declared hung */
	uint64_t big_size;   /* the caller legs' big file */
	uint64_t write_size; /* bytes of the write legs (<= big_size; 0: big_size) */
	unsigned rand_reads; /* rand4k: reads per leg */
	unsigned stream_flags[8], n_stream_flags; /* stream legs: registration flags, one leg each */
	char commit[48];
};
extern struct bench_opts opt;
extern int bench_failures;

/* ---- output.c ------------------------------------------------------------ */

/* What a row is: the leg's identity and settings (the figures are in
 * struct leg_result). */
struct rec {
	const char *dataset, *mode, *backend, *cache, *mem;
	unsigned threads, conc;
	uint64_t call_size;
	unsigned verified;
};

int out_open(const char *dir, bool append); /* records.csv, fresh unless append */
void out_close(void);
void record(const struct rec *k, const struct leg_result *r);
/* A row that says why a leg was not run (n/a): stdout only. */
void record_na(const char *dataset, const char *mode, const char *backend, const char *why);
/* The best ceiling of a kind recorded so far in this command (MiB/s), for
 * the ratio printed beside a leg and the > 5 % check; 0 when none. */
double ceiling_of(const char *dataset, const char *cache, const char *backend);
/* A ceiling measured before the legs it bounds, noted for those ratios
 * (its row is recorded once the "after" measurement is in). */
void ceiling_note(const char *dataset, const char *cache, const char *backend, double mib);
void write_machine(const char *gpu);
/* opends_driver_open with OPENDS_BACKEND=backend; on failure an error row
 * (dataset, backend) and false. */
bool bench_driver_open(const char *backend, const char *dataset);

/* Progress on stderr for legs over a second, only on a terminal; in a log
 * a line as each leg starts. A thread also watches for a leg stuck past
 * --leg-timeout + 30 s: its row is written as hung and the command ends
 * with exit status 3. */
void progress_init(void);
void progress_start(const char *label, uint64_t total_bytes);
void progress_add(uint64_t bytes);
uint64_t progress_bytes(void);
void progress_stop(void);
void progress_end(void);
/* a new part of the same leg (a ceiling's next shape): a fresh time limit */
void progress_lap(void);
/* seconds since progress_init (the command's start) */
double progress_elapsed(void);

/* r->config becomes pre + r->config + post (cut to fit). */
void config_wrap(struct leg_result *r, const char *pre, const char *post);
/* --cache names the state for every dataset (cold, hot) or for one
 * (imagenetish:cold) */
bool cache_wanted(const char *dataset, const char *cache);
/* Whether a dataset leg runs: --modes and --cache, or the --legs list of
 * DATASET:MODE:CACHE items ('*' for any) when given. mode or cache NULL:
 * any. */
bool leg_wanted(const char *dataset, const char *mode, const char *cache);
double cpu_now(void);
uint64_t mem_available(void); /* MemAvailable in bytes, 0 when unknown */
bool in_list(const char *list, const char *item);

/* Run a leg opt.repeat times (default: 3 when the first run is under a
 * second, else once) and keep the median run's figures, with the spread in
 * repeats/mib_min/mib_max. fn fills r and returns its error. */
typedef int (*leg_fn)(void *ctx, struct leg_result *r);
void repeat_leg(leg_fn fn, void *ctx, struct leg_result *out);

/* Destination memory: device memory where a GPU is used, else host. */
void *dest_alloc(size_t n);
void dest_free(void *p);
/* Staging memory for the plain way: pinned host memory (page-aligned host
 * memory without a GPU). */
void *pinned_alloc(size_t n);
void pinned_free(void *p);
/* dst (destination memory) <- src (host), or the reverse. */
int dest_put(void *dst, const void *src, size_t n);
int dest_get(void *dst, const void *src, size_t n);

/* Cold: page cache dropped (root) or each file advised out; hot: each
 * file read once. */
void prepare_cache(const struct dataset *ds, bool cold);
/* The legs' file order, the same for every reader of the command. */
unsigned *leg_order(const struct dataset *ds);

/* ---- legs.c: the four datasets ------------------------------------------ */
void run_dataset(const struct ds_spec *spec);

/* ---- callers.c: one calling thread, the ways users call --------------- */
extern const char *const caller_names[];
void run_callers(void);
/* ---- source.c: seq16m and rand4k on --source URL ----------------------- */
void run_source(void);
/* ceiling-h2d: the best pinned copy over 16-256 MiB copies. */
void record_h2d_ceiling(void);

#endif
