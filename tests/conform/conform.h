/*
 * Conformance checks: /work/shared/spec/API.md (the public contract) and the
 * public headers, checked from the outside. Each program is written as a
 * user of the library would write it: <opends.h> and the C library only
 * (no test helpers, no internals), linked with -lopends. One program per
 * area (conform_<area>.c); every promise it checks is a C_* line below that
 * names the call, what API.md or the header promises and what came back.
 * A failed check does not stop the program: one run lists every mismatch,
 * and the exit status is 1 if there was any (0 pass, 77 skip).
 * The backend and accelerator come from OPENDS_BACKEND / OPENDS_ACCEL (set
 * per run by tests/conform/meson.build).
 */
#ifndef OPENDS_CONFORM_H
#define OPENDS_CONFORM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <opends.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int c_fails;
static const char *c_case = "";

#define C_FAIL(...)                                                                                   \
	do {                                                                                          \
		fprintf(stderr, "%s:%d: [%s] MISMATCH: ", __FILE__, __LINE__, c_case);                \
		fprintf(stderr, __VA_ARGS__);                                                         \
		fprintf(stderr, "\n");                                                                \
		c_fails++;                                                                            \
	} while (0)

#define C_TRUE(cond, ...)                                                                             \
	do {                                                                                          \
		if (!(cond))                                                                          \
			C_FAIL(__VA_ARGS__);                                                          \
	} while (0)

static inline const char *c_name(long code)
{
	return opends_err_name((int)code);
}

/* An opends_error_t call must give exactly code; a failure must leave a
 * detail (API.md: "naming the argument or variable at fault"). */
#define C_ERR(call, code)                                                                             \
	do {                                                                                          \
		opends_error_t e_ = (call);                                                           \
		long w_ = (long)(code);                                                               \
		if ((long)e_.err != w_)                                                       \
			C_FAIL("%s: got %s (%d), expected %s; detail \"%s\"", #call, c_name(e_.err),  \
			       (int)e_.err, c_name(w_), opends_last_error_detail());                 \
		else if (w_ && !*opends_last_error_detail())                                          \
			C_FAIL("%s: %s without a detail", #call, c_name(w_));                         \
	} while (0)

#define C_OK(call) C_ERR(call, OPENDS_SUCCESS)

/* A ssize_t (or int) call must return exactly want (bytes or a negated code). */
#define C_SSZ(call, want)                                                                             \
	do {                                                                                          \
		long long g_ = (long long)(call), w_ = (long long)(want);                             \
		if (g_ != w_)                                                                         \
			C_FAIL("%s: got %lld (%s), expected %lld (%s); detail \"%s\"", #call, g_,     \
			       g_ < 0 ? c_name(g_) : "bytes", w_, w_ < 0 ? c_name(w_) : "bytes",      \
			       opends_last_error_detail());                                           \
	} while (0)

/* The file's byte at offset i: position-dependent so a misplaced range shows. */
static inline unsigned char c_byte(uint64_t i)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull;
	return (unsigned char)((x >> 29) ^ (x >> 47) ^ i);
}

static char c_dir[256];

static inline void c_cleanup(void)
{
	char cmd[300];
	if (c_dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c_dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", c_dir);
	}
}

/* A fresh file of size bytes of c_byte() under $TMPDIR; returns its path. */
static inline const char *c_file(const char *name, size_t size)
{
	static char path[512];
	if (!c_dir[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(c_dir, sizeof(c_dir), "%s/opends-conform-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(c_dir)) {
			perror("mkdtemp");
			exit(1);
		}
		atexit(c_cleanup);
	}
	snprintf(path, sizeof(path), "%s/%s", c_dir, name);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	unsigned char buf[65536];
	for (size_t off = 0; off < size;) {
		size_t n = size - off < sizeof(buf) ? size - off : sizeof(buf);
		for (size_t i = 0; i < n; i++)
			buf[i] = c_byte(off + i);
		if (write(fd, buf, n) != (ssize_t)n) {
			perror("write");
			exit(1);
		}
		off += n;
	}
	close(fd);
	return path;
}

static inline int c_open(const char *path, int flags)
{
	int fd = open(path, flags);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	return fd;
}

/* buf[0, n) must be the file's bytes from off */
static inline int c_same(const unsigned char *buf, size_t n, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] != c_byte(off + i))
			return 0;
	return 1;
}

static inline int c_all(const unsigned char *buf, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] != v)
			return 0;
	return 1;
}

static inline int c_done(const char *prog)
{
	if (c_fails)
		fprintf(stderr, "%s: %d mismatches with API.md\n", prog, c_fails);
	else
		printf("%s: conforms (backend %s, accel %s)\n", prog, getenv("OPENDS_BACKEND") ?: "auto",
		       getenv("OPENDS_ACCEL") ?: "auto");
	return c_fails ? 1 : 0;
}

#endif
