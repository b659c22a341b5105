/*
 * Helpers shared by the reliability tests (tests/reliability/).
 *
 * Every test is its own process: exit 0 pass, 77 skip, anything else fail.
 * Failures print file:line, what was expected and what came back, plus
 * opends_last_error_detail(), and end the process (cleanup runs from
 * atexit). Everything is static so each test is one translation unit.
 */
#ifndef OPENDS_REL_H
#define OPENDS_REL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <opends.h>

#include "../common.h" /* t_batch_entry */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define R_SKIP 77

static const char *volatile r_phase = "start";

#define R_FAIL(...)                                                                                  \
	do {                                                                                         \
		fprintf(stderr, "%s:%d: FAIL [%s]: ", __FILE__, __LINE__, r_phase);                  \
		fprintf(stderr, __VA_ARGS__);                                                        \
		fprintf(stderr, "\n    last_error_detail: \"%s\"\n", opends_last_error_detail());   \
		fflush(stderr);                                                                      \
		exit(1);                                                                             \
	} while (0)

#define R_CHECK(cond, ...)                                                                           \
	do {                                                                                         \
		if (!(cond)) {                                                                       \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);     \
			R_FAIL(__VA_ARGS__);                                                         \
		}                                                                                    \
	} while (0)

#define R_TRY(call)                                                                                   \
	do {                                                                                         \
		opends_error_t e_ = (call);                                                          \
		if (e_.err != OPENDS_SUCCESS)                                                        \
			R_FAIL("%s failed: %d (%s), backend_err %d", #call, (int)e_.err,             \
			       opends_op_status_error(e_.err), e_.backend_err);                      \
	} while (0)

static inline void r_skip(const char *fmt, ...)
{
	va_list ap;
	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(R_SKIP);
}

/* A hang fails with the phase named, before meson's own timeout. */
static void (*r_watchdog_cleanup)(void);
static inline void r_watchdog_fire(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: watchdog: the test did not finish in time; phase: ";
	const char *p = r_phase;
	if (write(2, m, sizeof m - 1) < 0 || write(2, p, strlen(p)) < 0 || write(2, "\n", 1) < 0) {
	}
	if (r_watchdog_cleanup)
		r_watchdog_cleanup();
	_exit(2);
}

static inline void r_watchdog(unsigned seconds)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = r_watchdog_fire;
	sigaction(SIGALRM, &sa, NULL);
	alarm(seconds);
}

static inline double r_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: a fast deterministic generator for data and choices. */
static inline uint64_t r_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* The byte every file position holds in pattern generation "gen": a
 * function of (gen, position) so any range can be checked on its own. */
static inline uint8_t r_pat(uint32_t gen, uint64_t pos)
{
	uint64_t x = pos * 0x9e3779b97f4a7c15ull + gen * 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	x *= 0x94d049bb133111ebull;
	return (uint8_t)(x >> 56);
}

static inline void r_fill(uint8_t *p, size_t n, uint32_t gen, uint64_t pos)
{
	for (size_t i = 0; i < n; i++)
		p[i] = r_pat(gen, pos + i);
}

/* index of the first byte of p that is not pattern (gen, pos + i), or -1 */
static inline long r_first_bad(const uint8_t *p, size_t n, uint32_t gen, uint64_t pos)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != r_pat(gen, pos + i))
			return (long)i;
	return -1;
}

/* A private temporary directory under $TMPDIR (or /tmp) removed at exit
 * with everything in it (no sub-directories are created in it except
 * mount points, which the tests unmount first). */
static char r_dir[PATH_MAX - 64];

static inline void r_rmdir_all(void)
{
	if (!r_dir[0])
		return;
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof(cmd), "rm -rf --one-file-system '%s' 2>/dev/null", r_dir);
	if (system(cmd) != 0) {
	}
	r_dir[0] = '\0';
}

static inline const char *r_tmpdir(const char *tag)
{
	if (r_dir[0])
		return r_dir;
	const char *t = getenv("TMPDIR");
	snprintf(r_dir, sizeof(r_dir), "%s/opends-%s-XXXXXX", t && *t ? t : "/tmp", tag);
	if (!mkdtemp(r_dir))
		R_FAIL("mkdtemp(%s): %s", r_dir, strerror(errno));
	return r_dir;
}

static inline int r_count_dir(const char *path)
{
	char cmd[PATH_MAX];
	snprintf(cmd, sizeof(cmd), "ls -1 %s 2>/dev/null | wc -l", path);
	FILE *f = popen(cmd, "r");
	int n = -1;
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

/* Run a shell command quietly; its exit status (or -1). */
static inline int r_sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static inline const char *r_backend_env(void)
{
	const char *b = getenv("OPENDS_BACKEND");
	return b && *b ? b : "auto";
}

/* A blocking, read-only source of 1 MiB over ops (which must outlive the
 * registration's use of it: registration copies it), registered. */
static inline opends_handle_t r_blocking_source(const opends_source_ops_t *ops)
{
	opends_source_desc_t d;
	memset(&d, 0, sizeof(d));
	d.struct_size = sizeof(d);
	d.ops = ops;
	d.flags = OPENDS_SOURCE_BLOCKING | OPENDS_SOURCE_RDONLY;
	d.size = 1 << 20;
	opends_handle_t h = NULL;
	R_TRY(opends_handle_register_source(&h, &d));
	return h;
}

/* ---- running a set of operations through one API family ---------------- */

enum r_family { R_SYNC, R_ASYNC, R_BATCH, R_STREAM, R_NFAMILIES };
static const char *const r_family_name[] = { "sync", "async", "batch", "stream" };

struct r_op {
	opends_handle_t fh;
	int opcode;      /* OPENDS_READ or OPENDS_WRITE */
	uint8_t *buf;
	size_t size;
	off_t off;
	ssize_t result;  /* filled in */
};

/* Run ops[0..n) through family f: sync one after another; async, batch and
 * stream all in flight together (async: every future submitted before the
 * first await; batch: one submit; stream: one stream, then synchronize).
 * Submits must succeed; results land in ops[i].result. */
static inline void r_run_ops(enum r_family f, struct r_op *ops, unsigned n)
{
	switch (f) {
	case R_SYNC:
		for (unsigned i = 0; i < n; i++)
			ops[i].result = ops[i].opcode == OPENDS_READ
						? opends_sync_read(ops[i].fh, ops[i].buf, ops[i].size, ops[i].off, 0)
						: opends_sync_write(ops[i].fh, ops[i].buf, ops[i].size, ops[i].off, 0);
		break;
	case R_ASYNC: {
		opends_async_future_t *fut = calloc(n, sizeof(*fut));
		for (unsigned i = 0; i < n; i++) {
			opends_error_t e = ops[i].opcode == OPENDS_READ
						   ? opends_async_read(ops[i].fh, ops[i].buf, ops[i].size, ops[i].off, 0,
								       &fut[i])
						   : opends_async_write(ops[i].fh, ops[i].buf, ops[i].size, ops[i].off,
									0, &fut[i]);
			if (e.err)
				R_FAIL("async submit %u: %s", i, opends_op_status_error(e.err));
		}
		for (unsigned i = n; i-- > 0;) /* await in reverse order */
			ops[i].result = opends_async_await(&fut[i]);
		free(fut);
		break;
	}
	case R_BATCH: {
		opends_batch_t b;
		opends_io_params_t *p = calloc(n, sizeof(*p));
		opends_io_events_t *ev = calloc(n, sizeof(*ev));
		R_TRY(opends_batch_setup(&b, n));
		for (unsigned i = 0; i < n; i++) {
			p[i] = t_batch_entry(ops[i].fh, ops[i].opcode, ops[i].buf, ops[i].size, ops[i].off, 0, &ops[i]);
			ops[i].result = 1234567;
		}
		R_TRY(opends_batch_submit(b, n, p, 0));
		unsigned got = 0;
		while (got < n) {
			unsigned nr = n - got;
			R_TRY(opends_batch_get_status(b, 1, &nr, ev, NULL));
			for (unsigned k = 0; k < nr; k++) {
				struct r_op *o = ev[k].cookie;
				if (o < ops || o >= ops + n || o->result != 1234567)
					R_FAIL("batch event with a bad or repeated cookie %p", ev[k].cookie);
				if ((ev[k].ret >= 0 && ev[k].status != OPENDS_COMPLETE) ||
				    (ev[k].ret < 0 && ev[k].status != OPENDS_FAILED))
					R_FAIL("batch event status 0x%x with ret %zd", (unsigned)ev[k].status, ev[k].ret);
				o->result = ev[k].ret;
			}
			got += nr;
		}
		R_TRY(opends_batch_destroy(b));
		free(p);
		free(ev);
		break;
	}
	case R_STREAM: {
		opends_stream_t s;
		size_t *sz = calloc(n, sizeof(*sz));
		off_t *fo = calloc(n, sizeof(*fo)), *bo = calloc(n, sizeof(*bo));
		R_TRY(opends_stream_create(&s));
		for (unsigned i = 0; i < n; i++) {
			sz[i] = ops[i].size;
			fo[i] = ops[i].off;
			bo[i] = 0;
			ops[i].result = 1234567;
			opends_error_t e = ops[i].opcode == OPENDS_READ
						   ? opends_stream_read(ops[i].fh, ops[i].buf, &sz[i], &fo[i], &bo[i],
									&ops[i].result, s)
						   : opends_stream_write(ops[i].fh, ops[i].buf, &sz[i], &fo[i], &bo[i],
									 &ops[i].result, s);
			if (e.err)
				R_FAIL("stream submit %u: %s", i, opends_op_status_error(e.err));
		}
		R_TRY(opends_stream_synchronize(s));
		R_TRY(opends_stream_destroy(s));
		free(sz);
		free(fo);
		free(bo);
		break;
	}
	default:
		break;
	}
}

/* ---- forking while threads run ---------------------------------------------
 * AddressSanitizer's allocator is not fork-safe in the runtime of GCC 12
 * (Debian 12's libasan 8; LLVM's runtime locks it around fork only since
 * release 18): a parent thread inside malloc/free at the fork holds a
 * size-class lock of ASan's allocator, and the child's first malloc of
 * that class then waits forever (seen in a hung child: host_enqueue ->
 * calloc -> SizeClassAllocator64::GetFromAllocator -> Mutex::Lock). glibc's
 * own malloc is fork-safe, so the plain build forks amid I/O of every
 * family; under ASan (R_FORK_GATE) the forking thread first parks the busy
 * threads between two operations (r_park_here in their loops) and lets the
 * library's workers go idle (r_park_busy), forks, then r_unpark. */
#if defined(__SANITIZE_ADDRESS__)
#define R_FORK_GATE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define R_FORK_GATE 1
#endif
#endif
#ifndef R_FORK_GATE
#define R_FORK_GATE 0
#endif
static atomic_bool r_park;
static atomic_uint r_parked;

static inline void r_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000 * 1000 };
	nanosleep(&ts, NULL);
}

static inline void r_park_here(void)
{
	if (!atomic_load(&r_park))
		return;
	atomic_fetch_add(&r_parked, 1);
	while (atomic_load(&r_park))
		r_sleep_ms(1);
	atomic_fetch_sub(&r_parked, 1);
}

/* park until n threads (*live when given: the busy threads still running)
 * wait in r_park_here */
static inline void r_park_busy(unsigned n, atomic_uint *live)
{
	atomic_store(&r_park, true);
	while (atomic_load(&r_parked) < (live ? atomic_load(live) : n))
		r_sleep_ms(1);
	r_sleep_ms(5); /* the workers that completed those operations go idle */
}

static inline void r_unpark(void)
{
	atomic_store(&r_park, false);
}

#endif
