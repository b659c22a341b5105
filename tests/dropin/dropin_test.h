/*
 * What the drop-in's small test programs share (test_cufile_dropin_env,
 * _fork, _threads): they load the library under test by path
 * (src/vendor/cufile_api.h) and refuse anything but OpenDS's drop-in, fail
 * with file:line and exit 1, and run their cases each in its own process.
 * Header-only: each program is one translation unit plus this.
 */
#ifndef ODS_DROPIN_TEST_H
#define ODS_DROPIN_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cufile.h"
#include "cufile_api.h"

#ifdef cuFileDriverClose
#undef cuFileDriverClose
#endif

static struct ods_cufile_api L; /* the library under test */
static const char *dt_who = "main"; /* which case or process, for failures */

#define CHECK(c, ...)                                                                   \
	do {                                                                            \
		if (!(c)) {                                                             \
			fprintf(stderr, "FAIL %s:%d [%s]: ", __FILE__, __LINE__, dt_who); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fputc('\n', stderr);                                            \
			_exit(1);                                                       \
		}                                                                       \
	} while (0)
#define CU_OK(call)                                                                               \
	do {                                                                                      \
		CUfileError_t e_ = (call);                                                        \
		CHECK(e_.err == CU_FILE_SUCCESS, "%s: %d, expected success", #call, (int)e_.err); \
	} while (0)
#define CU_ERR(call, code)                                                                                 \
	do {                                                                                               \
		CUfileError_t e_ = (call);                                                                 \
		CHECK((int)e_.err == (int)(code), "%s: %d, expected %d", #call, (int)e_.err, (int)(code)); \
	} while (0)

/* --lib=PATH from the arguments (NULL: none; other arguments are left
 * to the program), loaded into L; it must be the drop-in. */
static inline const char *dt_load(int argc, char **argv)
{
	const char *lib = NULL;
	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], "--lib=", 6))
			lib = argv[i] + 6;
	if (!lib) {
		fprintf(stderr, "usage: %s --lib=PATH ...\n", argv[0]);
		exit(2);
	}
	char why[512];
	CHECK(ods_cufile_load(&L, lib, 0, why, sizeof(why)) == 0, "load %s: %s", lib, why);
	CHECK(L.dropin, "%s is not OpenDS's drop-in", lib);
	return lib;
}

static inline void dt_watchdog_fire(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: watchdog fired (hang)\n";
	if (write(2, m, sizeof m - 1) < 0) {
	}
	_exit(3);
}

/* This process fails (exit 3) if it is still running in secs seconds. */
static inline void dt_watchdog(unsigned secs)
{
	signal(SIGALRM, dt_watchdog_fire);
	alarm(secs);
}

/* A registered handle for fd (the driver opens on first use). */
static inline CUfileHandle_t dt_reg(int fd)
{
	CUfileDescr_t d;
	memset(&d, 0, sizeof(d));
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = fd;
	CUfileHandle_t fh = NULL;
	CU_OK(L.cuFileHandleRegister(&fh, &d));
	return fh;
}

/* GCC 12's ASan allocator is not fork-safe (tests/reliability/rel.h): a
 * thread inside malloc at the fork leaves its lock held in the child,
 * whose new threads then hang in calloc. Under ASan a fork first lets the
 * library's workers go idle; the plain build forks at once. */
#if defined(__SANITIZE_ADDRESS__)
#define DT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DT_ASAN 1
#endif
#endif
#ifndef DT_ASAN
#define DT_ASAN 0
#endif

static inline pid_t dt_fork(void)
{
	fflush(NULL);
	if (DT_ASAN)
		usleep(50000);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	return pid;
}

/* pid exited 0, or this process fails. */
static inline void dt_wait_ok(pid_t pid)
{
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d %s %d", (int)pid,
	      WIFEXITED(st) ? "exited with" : "died of signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

struct dt_case {
	const char *name;
	void (*fn)(void);
};

/* Each case in a process of its own (the driver's state is the
 * process's); prints one line per case and "N passed, N failed". Returns
 * the exit status for main. */
static inline int dt_run_cases(const struct dt_case *cases, size_t n)
{
	int failed = 0;
	for (size_t i = 0; i < n; i++) {
		fflush(NULL);
		pid_t p = fork();
		CHECK(p >= 0, "fork: %s", strerror(errno));
		if (p == 0) {
			dt_who = cases[i].name;
			cases[i].fn();
			fflush(NULL);
			_exit(0);
		}
		int st = 0;
		CHECK(waitpid(p, &st, 0) == p, "waitpid: %s", strerror(errno));
		bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		printf("%s: %s\n", cases[i].name, ok ? "OK" : "FAILED");
		failed += !ok;
	}
	printf("%d passed, %d failed\n", (int)n - failed, failed);
	return failed ? 1 : 0;
}

#endif
