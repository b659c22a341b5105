/*
 * test_cufile_dropin_env --lib=PATH
 *
 * The drop-in opens OpenDS with its own defaults where the program gives
 * none (src/dropin/cufile/config.c: OPENDS_IO_KWORKERS=1), and leaves the
 * program's environment as it found it. This program defines getenv, which
 * the loader then binds OpenDS's calls to (the executable exports it), so
 * it sees what OpenDS read at the open. Each case runs in its own process
 * (the driver's state is the process's):
 *   unset    OpenDS reads "1"; afterwards the variable is unset again
 *   own      the program's "3" is what OpenDS reads, and it stays
 *   empty    "" counts as unset: OpenDS reads "1"; afterwards "" again
 *   invalid  the program's "0" is kept, so the open fails with
 *            CU_FILE_DRIVER_INVALID_PROPS (nothing replaces a bad value)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cufile.h"
#include "cufile_api.h"

#define VAR "OPENDS_IO_KWORKERS"

extern char **environ;

static struct ods_cufile_api L; /* src/vendor/cufile_api.h */
static const char *lib;

/* what the last getenv(VAR) returned: "(unset)" or the value */
static char seen[64] = "(never read)";

/* glibc's getenv, over the same environ that setenv and unsetenv edit
 * (default visibility: the build hides symbols otherwise) */
__attribute__((visibility("default"))) char *getenv(const char *name)
{
	size_t n = strlen(name);
	char *v = NULL;
	for (char **e = environ; e && *e; e++) {
		if (!strncmp(*e, name, n) && (*e)[n] == '=') {
			v = *e + n + 1;
			break;
		}
	}
	if (!strcmp(name, VAR))
		snprintf(seen, sizeof(seen), "%s", v ? v : "(unset)");
	return v;
}

#define CHECK(c, ...)                                                        \
	do {                                                                 \
		if (!(c)) {                                                  \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			exit(1);                                             \
		}                                                            \
	} while (0)

static void load(void)
{
	char why[512];
	CHECK(ods_cufile_load(&L, lib, 0, why, sizeof(why)) == 0, "load %s: %s", lib, why);
	CHECK(L.dropin, "%s is not OpenDS's drop-in", lib);
}

/* set VAR as given (NULL: unset), open, and check what OpenDS read and
 * what the environment holds afterwards */
static void open_with(const char *mine, const char *want_read, int want_err)
{
	if (mine)
		CHECK(setenv(VAR, mine, 1) == 0, "setenv");
	else
		CHECK(unsetenv(VAR) == 0, "unsetenv");
	snprintf(seen, sizeof(seen), "(never read)");
	CUfileError_t e = L.cuFileDriverOpen();
	CHECK((int)e.err == want_err, "cuFileDriverOpen with %s=%s: %d, expected %d", VAR, mine ? mine : "(unset)",
	      (int)e.err, want_err);
	CHECK(!strcmp(seen, want_read), "OpenDS read %s=%s at the open, expected %s", VAR, seen, want_read);
	const char *after = getenv(VAR);
	CHECK((!mine && !after) || (mine && after && !strcmp(after, mine)), "%s after the open: %s, expected %s", VAR,
	      after ? after : "(unset)", mine ? mine : "(unset)");
	if (e.err == CU_FILE_SUCCESS) {
		e = L.cuFileDriverClose_v2();
		CHECK(e.err == CU_FILE_SUCCESS, "cuFileDriverClose_v2: %d", (int)e.err);
	}
}

static void c_unset(void)
{
	open_with(NULL, "1", CU_FILE_SUCCESS);
	/* a second open reads the default again (and puts it back again) */
	open_with(NULL, "1", CU_FILE_SUCCESS);
}

static void c_own(void)
{
	open_with("3", "3", CU_FILE_SUCCESS);
}

static void c_empty(void)
{
	open_with("", "1", CU_FILE_SUCCESS);
}

static void c_invalid(void)
{
	open_with("0", "0", CU_FILE_DRIVER_INVALID_PROPS);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], "--lib=", 6))
			lib = argv[i] + 6;
	if (!lib) {
		fprintf(stderr, "usage: %s --lib=PATH\n", argv[0]);
		return 2;
	}
	load();
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = { { "unset", c_unset }, { "own", c_own }, { "empty", c_empty }, { "invalid", c_invalid } };
	int failed = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		fflush(NULL);
		pid_t p = fork();
		CHECK(p >= 0, "fork");
		if (p == 0) {
			cases[i].fn();
			fflush(NULL);
			_exit(0);
		}
		int st = 0;
		CHECK(waitpid(p, &st, 0) == p, "waitpid");
		bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		printf("%s: %s\n", cases[i].name, ok ? "OK" : "FAILED");
		failed += !ok;
	}
	printf("%d passed, %d failed\n", (int)(sizeof(cases) / sizeof(*cases)) - failed, failed);
	return failed ? 1 : 0;
}
