/*
 * Shared helpers for the OpenDS test programs.
 *
 * Every test is its own process: exit 0 = pass, 77 = skip, anything else =
 * fail. Checks print file:line, what was expected, what came back and
 * opends_last_error_detail(), then exit(1), so a failing CI log says where
 * and why without a debugger.
 *
 * Everything here is static (inline) so each test program is one
 * translation unit plus this header; no ordering between tests, no shared
 * data files: each program writes the files it reads.
 */
#ifndef OPENDS_TEST_COMMON_H
#define OPENDS_TEST_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <opends.h>

#include <dirent.h>
#include <execinfo.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
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

#define T_SKIP 77
#define T_KiB ((size_t)1024)
#define T_MiB ((size_t)1024 * 1024)
#define T_CANARY 0xA5

/* ------------------------------------------------------------------------ */
/* Reporting                                                                */
/* ------------------------------------------------------------------------ */

/* What the test is doing now; printed by the watchdog and by failures so a
 * hang or a failure in a loop says which case it was. */
static const char *volatile t_phase = "start";

static inline const char *t_detail(void)
{
	const char *d = opends_last_error_detail();
	return d ? d : "(NULL!)";
}

static inline const char *t_errname(long code)
{
	const char *s = opends_op_status_error((int)code);
	return s ? s : "(NULL!)";
}

/* A failure ends the test. For triage, OPENDS_TEST_CONTINUE=1 keeps going
 * after failures (the exit status is still 1) so one run lists them all. */
static int t_failures;
static inline void t_rm_dir(void);

static inline void t_exit_failed(void)
{
	if (t_failures) {
		fprintf(stderr, "%d failures\n", t_failures);
		fflush(NULL);
		t_rm_dir();
		_exit(1);
	}
}

static inline void t_failed(void)
{
	const char *c = getenv("OPENDS_TEST_CONTINUE");
	if (!c || strcmp(c, "1") != 0)
		exit(1);
	if (t_failures++ == 0)
		atexit(t_exit_failed);
}

#define FAILF(...)                                                                            \
	do {                                                                                  \
		fprintf(stderr, "%s:%d: FAIL [%s]: ", __FILE__, __LINE__, t_phase);           \
		fprintf(stderr, __VA_ARGS__);                                                 \
		fprintf(stderr, "\n    last_error_detail: \"%s\"\n", t_detail());             \
		t_failed();                                                                   \
	} while (0)

#define CHECK(cond)                                                                           \
	do {                                                                                  \
		if (!(cond))                                                                  \
			FAILF("CHECK(%s)", #cond);                                            \
	} while (0)

#define CHECKF(cond, ...)                                                                     \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			FAILF(__VA_ARGS__);                                                   \
		}                                                                             \
	} while (0)

/* One case in a process of its own (a fork, a driver state the next case
 * must not inherit): the child runs fn under the phase name and exits with
 * its failures; says whether it passed and prints "name: OK/FAILED". */
static inline bool t_case_in_child(const char *name, void (*fn)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		t_phase = name;
		fn();
		fflush(NULL);
		_exit(t_failures ? 1 : 0);
	}
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	printf("%s: %s\n", name, ok ? "OK" : "FAILED");
	return ok;
}

/* A failure must leave a sentence for opends_last_error_detail(). */
#define CHECK_DETAIL()                                                                        \
	do {                                                                                  \
		const char *d_ = opends_last_error_detail();                                  \
		if (!d_ || !d_[0])                                                            \
			FAILF("opends_last_error_detail() is %s after a failure",              \
			      d_ ? "empty" : "NULL");                                         \
	} while (0)

/* call returns opends_error_t; its .err must be exactly code. */
#define EXPECT_ERR(call, code)                                                                \
	do {                                                                                  \
		opends_error_t e_ = (call);                                                   \
		int want_ = (int)(code);                                                      \
		if ((int)e_.err != want_)                                                     \
			FAILF("%s\n    expected %d (%s), got %d (%s), backend_err %d", #call,      \
			      want_, t_errname(want_), (int)e_.err, t_errname(e_.err),         \
			      e_.backend_err);                                                \
		if (want_ != OPENDS_SUCCESS)                                                  \
			CHECK_DETAIL();                                                       \
	} while (0)

#define OK(call) EXPECT_ERR(call, OPENDS_SUCCESS)

/* calls of fh that read-ahead served so far (opends_describe's "read ahead: N") */
static inline unsigned long t_ra_served(opends_handle_t fh)
{
	char d[1024];
	OK(opends_describe(fh, d, sizeof(d)));
	const char *p = strstr(d, "read ahead: ");
	return p ? strtoul(p + 12, NULL, 10) : 0;
}

/* call returns ssize_t; must equal want exactly. With detail: a negative
 * result must leave a detail sentence (synchronous calls only). */
#define EXPECT_SSZ_(call, want, detail)                                                       \
	do {                                                                                  \
		ssize_t g_ = (ssize_t)(call);                                                 \
		ssize_t w_ = (ssize_t)(want);                                                 \
		if (g_ != w_)                                                                 \
			FAILF("%s\n    expected %zd (%s), got %zd (%s)", #call, w_,                \
			      w_ < 0 ? t_errname(w_) : "bytes", g_,                            \
			      g_ < 0 ? t_errname(g_) : "bytes");                               \
		if ((detail) && w_ < 0)                                                       \
			CHECK_DETAIL();                                                       \
	} while (0)
#define EXPECT_SSZ(call, want) EXPECT_SSZ_(call, want, 1)
#define EXPECT_SSZ_ND(call, want) EXPECT_SSZ_(call, want, 0)

/* Compare got against the oracle; on mismatch print the first differing
 * byte and a few around it. */
#define VERIFY(got, exp, n, ...)                                                              \
	do {                                                                                  \
		size_t at_;                                                                   \
		if (t_first_diff((const uint8_t *)(got), (const uint8_t *)(exp), (n), &at_)) { \
			fprintf(stderr, "%s:%d: data mismatch at byte %zu of %zu: got 0x%02x " \
				"expected 0x%02x\n", __FILE__, __LINE__, at_, (size_t)(n),    \
				((const uint8_t *)(got))[at_], ((const uint8_t *)(exp))[at_]); \
			FAILF(__VA_ARGS__);                                                   \
		}                                                                             \
	} while (0)

/* Every byte of [p, p+n) must still be the canary. */
#define VERIFY_CANARY(p, n, ...)                                                              \
	do {                                                                                  \
		size_t at_;                                                                   \
		if (t_first_not((const uint8_t *)(p), (n), T_CANARY, &at_)) {                 \
			fprintf(stderr, "%s:%d: guard byte %zu of %zu overwritten (0x%02x)\n",  \
				__FILE__, __LINE__, at_, (size_t)(n),                         \
				((const uint8_t *)(p))[at_]);                                 \
			FAILF(__VA_ARGS__);                                                   \
		}                                                                             \
	} while (0)

static inline bool t_first_diff(const uint8_t *a, const uint8_t *b, size_t n, size_t *at)
{
	if (memcmp(a, b, n) == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i]) {
			*at = i;
			return true;
		}
	return false;
}

static inline bool t_first_not(const uint8_t *p, size_t n, uint8_t v, size_t *at)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v) {
			*at = i;
			return true;
		}
	return false;
}

static inline void skip(const char *fmt, ...)
{
	va_list ap;
	fprintf(stdout, "SKIP: ");
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fprintf(stdout, "\n");
	fflush(stdout);
	exit(T_SKIP);
}

/* A hang must fail with a message naming the phase, well before meson's
 * own timeout kills the process silently. */
static inline void t_watchdog_fire(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: watchdog: test did not finish in time; phase: ";
	const char *p = t_phase;
	if (write(2, m, sizeof m - 1) < 0 || write(2, p, strlen(p)) < 0 || write(2, "\n", 1) < 0)
		_exit(2);
	_exit(2);
}

/* A crash names the phase too (stdout, buffered in a pipe, is lost with
 * it), then dies of the same signal. Only where nothing else (ASan) has a
 * handler. */
static inline void t_crash_fire(int sig)
{
	static const char m[] = "FAIL: fatal signal in phase: ";
	const char *p = t_phase;
	if (write(2, m, sizeof m - 1) < 0 || write(2, p, strlen(p)) < 0 || write(2, "\n", 1) < 0) {
	}
	/* where: library + offset per frame (addr2line -e LIB OFFSET) */
	void *frames[48];
	backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

static inline void t_watchdog(unsigned seconds)
{
	signal(SIGALRM, t_watchdog_fire);
	/* output survives a crash: stdout line by line even into a pipe */
	setvbuf(stdout, NULL, _IOLBF, 0);
	void *warm[1];
	backtrace(warm, 1); /* loads libgcc now, not in the signal handler */
	static const int fatal[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL };
	for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) {
		struct sigaction old;
		if (sigaction(fatal[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO))
			signal(fatal[i], t_crash_fire);
	}
	alarm(seconds);
}

static inline double t_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------ */
/* Deterministic content                                                    */
/* ------------------------------------------------------------------------ */

/* The upstream's 16-page pattern: every 4 KiB page is the same ramp shifted
 * by the page number, so a read from the wrong page is visible (mostly). */
static inline uint8_t pat16(uint64_t x)
{
	return (uint8_t)(((x % 4096) + (x / 4096)) % 256);
}

static inline uint64_t t_splitmix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A byte of a 64-bit mix of the offset: no two sectors look alike, so data
 * read from the wrong offset (any shift, any sector) cannot match. */
static inline uint8_t hashpat(uint64_t x)
{
	return (uint8_t)(t_splitmix64(x >> 3) >> (8 * (x & 7)));
}

/* A different, seedable stream for data the tests write. */
static inline uint8_t wpat(uint64_t seed, uint64_t x)
{
	return (uint8_t)(t_splitmix64((x >> 3) ^ (seed * 0x632be59bd9b4e019ull)) >> (8 * (x & 7)));
}

typedef uint8_t (*t_patfn)(uint64_t);

static inline void t_fill(uint8_t *p, uint64_t off, size_t n, t_patfn fn)
{
	for (size_t i = 0; i < n; i++)
		p[i] = fn(off + i);
}

static inline void t_fill_seed(uint8_t *p, uint64_t seed, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = wpat(seed, i);
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

static inline void *t_xmalloc(size_t n)
{
	void *p = NULL;
	/* page aligned, so "+1" and "+3" below really are misaligned */
	if (posix_memalign(&p, 4096, n ? n : 1) != 0 || !p) {
		fprintf(stderr, "FAIL: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	memset(p, T_CANARY, n);
	return p;
}

/* An oracle: the whole expected file content. */
static inline uint8_t *t_oracle(size_t size, t_patfn fn)
{
	uint8_t *p = t_xmalloc(size);
	t_fill(p, 0, size, fn);
	return p;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                    */
/* ------------------------------------------------------------------------ */

static char t_dir[PATH_MAX];

static inline void t_rm_dir(void)
{
	if (!t_dir[0] || getenv("OPENDS_TEST_KEEP"))
		return;
	DIR *d = opendir(t_dir);
	if (d) {
		struct dirent *e;
		char p[PATH_MAX + 256];
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(p, sizeof p, "%s/%s", t_dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(t_dir);
	t_dir[0] = 0;
}

/* A private directory under $TMPDIR (or /tmp), removed at exit. */
static inline const char *t_tmpdir(void)
{
	if (t_dir[0])
		return t_dir;
	const char *base = getenv("TMPDIR");
	if (!base || !base[0])
		base = "/tmp";
	snprintf(t_dir, sizeof t_dir, "%s/opends-test-XXXXXX", base);
	if (!mkdtemp(t_dir)) {
		fprintf(stderr, "FAIL: mkdtemp(%s): %s\n", t_dir, strerror(errno));
		exit(1);
	}
	atexit(t_rm_dir);
	return t_dir;
}

/* out = <tmpdir>/<name> */
static inline void t_path(char *out, size_t len, const char *name)
{
	const char *d = t_tmpdir();
	size_t dl = strlen(d), nl = strlen(name);
	if (dl + 1 + nl + 1 > len) {
		fprintf(stderr, "FAIL: path too long: %s/%s\n", d, name);
		exit(1);
	}
	memcpy(out, d, dl);
	out[dl] = '/';
	memcpy(out + dl + 1, name, nl + 1);
}

static inline void t_pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t r = pwrite(fd, p, n, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "FAIL: pwrite: %s\n", strerror(errno));
			exit(1);
		}
		p += r;
		n -= (size_t)r;
		off += r;
	}
}

/* Returns bytes read (short only at EOF). */
static inline size_t t_pread_all(int fd, void *buf, size_t n, off_t off)
{
	uint8_t *p = buf;
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(fd, p + done, n - done, off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "FAIL: pread: %s\n", strerror(errno));
			exit(1);
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return done;
}

/* Write size bytes of fn(offset) to path (created/truncated), buffered. */
static inline void t_write_pattern_file(const char *path, size_t size, t_patfn fn)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0) {
		fprintf(stderr, "FAIL: open(%s): %s\n", path, strerror(errno));
		exit(1);
	}
	uint8_t *chunk = malloc(256 * T_KiB);
	CHECK(chunk);
	for (size_t off = 0; off < size;) {
		size_t n = size - off < 256 * T_KiB ? size - off : 256 * T_KiB;
		t_fill(chunk, off, n, fn);
		t_pwrite_all(fd, chunk, n, (off_t)off);
		off += n;
	}
	free(chunk);
	if (fsync(fd) != 0 || close(fd) != 0) {
		fprintf(stderr, "FAIL: fsync/close(%s): %s\n", path, strerror(errno));
		exit(1);
	}
}

static inline off_t t_file_size(int fd)
{
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	return st.st_size;
}

/* The file behind fd (read with plain pread, not through OpenDS) must be
 * exactly n bytes, equal to exp; what names it in a failure. */
static inline void t_check_file_fd(int fd, const uint8_t *exp, size_t n, const char *what)
{
	size_t fs = (size_t)t_file_size(fd);
	CHECKF(fs == n, "%s: file is %zu bytes, expected %zu", what, fs, n);
	uint8_t *got = t_xmalloc(n + 1);
	size_t r = t_pread_all(fd, got, n + 1, 0);
	CHECKF(r == n, "%s: pread got %zu bytes, expected %zu", what, r, n);
	VERIFY(got, exp, n, "%s: file content", what);
	free(got);
}

/* The two standard data files of test_sync_read_prep and the sync tests. */
#define T_PAT16_NAME "pat16.bin"
#define T_PAT16_SIZE (64 * 4096)                /* 64 pages of pat16 = 256 KiB */
#define T_HASH_NAME "hash.bin"
#define T_HASH_SIZE ((size_t)1024 * 1024 + 1234) /* deliberately not a block multiple */

/* Open path; with direct, add O_DIRECT. If the filesystem refuses O_DIRECT
 * (EINVAL, e.g. tmpfs on some kernels) return -2 so the caller can skip the
 * O_DIRECT variant with a message instead of failing. */
static inline int t_open(const char *path, int flags, bool direct)
{
	int fd = open(path, flags | (direct ? O_DIRECT : 0), 0644);
	if (fd < 0 && direct && errno == EINVAL) {
		printf("NOTE: O_DIRECT not supported for %s; O_DIRECT variant skipped\n", path);
		return -2;
	}
	if (fd < 0) {
		fprintf(stderr, "FAIL: open(%s%s): %s\n", path, direct ? ", O_DIRECT" : "", strerror(errno));
		exit(1);
	}
	return fd;
}

/* A hot file: path written with the pattern (size bytes), opened
 * buffered read-only and read once so its pages are cached; returns the fd
 * and the pattern as the oracle. */
static inline int t_hot_file(const char *path, size_t size, t_patfn fn, uint8_t **oracle)
{
	t_write_pattern_file(path, size, fn);
	*oracle = t_oracle(size, fn);
	int fd = t_open(path, O_RDONLY, false);
	uint8_t *warm = t_xmalloc(size);
	CHECKF(pread(fd, warm, size, 0) == (ssize_t)size, "warming the page cache");
	free(warm);
	return fd;
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                   */
/* ------------------------------------------------------------------------ */

/* Parse the common arguments: --backend=NAME sets OPENDS_BACKEND (the
 * meson tests pass it through the environment instead). Returns the first
 * positional argument or NULL. */
static inline const char *t_args(int argc, char **argv)
{
	const char *pos = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--backend=", 10))
			setenv("OPENDS_BACKEND", argv[i] + 10, 1);
		else if (!pos)
			pos = argv[i];
	}
	return pos;
}

/* Open the driver; skip (77) when the named backend cannot run on this
 * machine; check that the active backend is the one asked for. */
static inline void t_driver_open(void)
{
	opends_error_t e = opends_driver_open();
	const char *want = getenv("OPENDS_BACKEND");
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		skip("backend %s cannot run here: %s", want ? want : "(auto)", t_detail());
	if (e.err != OPENDS_SUCCESS)
		FAILF("opends_driver_open: %d (%s), backend_err %d", e.err, t_errname(e.err), e.backend_err);
	const char *be = opends_driver_backend();
	CHECKF(be != NULL, "opends_driver_backend() is NULL after open");
	if (want && want[0] && strcmp(want, "auto") != 0)
		CHECKF(!strcmp(be, want), "backend is \"%s\", OPENDS_BACKEND asked for \"%s\"", be, want);
}

/* Reopen with tiny pieces: 8 KiB chunks, 2 per queue, 2 workers, so
 * every transfer above 8 KiB is split, the pieces' edges land everywhere
 * and the queues fill. The caller has closed the driver. */
static inline void t_driver_open_small_pieces(void)
{
	setenv("OPENDS_CHUNK_SIZE", "8k", 1);
	setenv("OPENDS_QUEUE_DEPTH", "2", 1);
	setenv("OPENDS_IO_THREADS", "2", 1);
	t_driver_open();
	printf("with OPENDS_CHUNK_SIZE=8k OPENDS_QUEUE_DEPTH=2 OPENDS_IO_THREADS=2:\n");
}

static inline opends_handle_t t_register(int fd)
{
	opends_handle_t fh = NULL;
	OK(opends_handle_register(&fh, fd));
	return fh;
}

static inline size_t t_min(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* What a read of size at off returns on a file of fsize bytes. */
static inline size_t t_expect_read(size_t fsize, uint64_t off, size_t size)
{
	if (off >= fsize)
		return 0;
	return t_min(size, fsize - (size_t)off);
}

/* One entry of a batch: what every batch in the tests is made of. */
static inline opends_io_params_t t_batch_entry(opends_handle_t fh, int opcode, void *buf, size_t size, off_t file_offset,
					       off_t buf_offset, void *cookie)
{
	opends_io_params_t p;
	memset(&p, 0, sizeof(p));
	p.mode = OPENDS_BATCH;
	p.fh = fh;
	p.opcode = (opends_opcode_t)opcode;
	p.u.batch.buf_base = buf;
	p.u.batch.size = size;
	p.u.batch.file_offset = file_offset;
	p.u.batch.buf_offset = buf_offset;
	p.cookie = cookie;
	return p;
}

/* get_status until total events have come (each at most once); fails when
 * secs pass without all of them. ev must have room for total. */
static inline void t_batch_collect(opends_batch_t b, unsigned total, opends_io_events_t *ev, double secs)
{
	unsigned got = 0;
	double t0 = t_now();
	while (got < total) {
		if (t_now() - t0 >= secs) { /* (CHECKF only records under OPENDS_TEST_CONTINUE: stop here) */
			CHECKF(0, "only %u of %u completions after %.0f s", got, total, secs);
			return;
		}
		unsigned nr = total - got;
		struct timespec ts = { 5, 0 };
		OK(opends_batch_get_status(b, 1, &nr, ev + got, &ts));
		CHECKF(nr <= total - got, "get_status delivered %u with room for %u", nr, total - got);
		got += nr;
	}
}

#endif
