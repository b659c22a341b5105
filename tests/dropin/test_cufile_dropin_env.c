/*
 * test_cufile_dropin_env --lib=PATH
 *
 * The drop-in opens OpenDS with its own defaults where the program gives
 * none (src/dropin/cufile/config.c: OPENDS_IO_KWORKERS=1) and with the
 * values set through cuFile's parameter API, through
 * opends_driver_open_with: it never edits the environment (setenv is not
 * thread-safe, and children would inherit it). This program defines
 * setenv, unsetenv and putenv, which the loader then binds the libraries'
 * calls to (the executable exports them): any call from outside this file
 * fails the test. What OpenDS opened with is read back with
 * opends_driver_get_setting from the libopends the drop-in loaded. Each
 * case runs in its own process (the driver's state is the process's):
 *   unset    OpenDS runs with "1", given by the drop-in
 *   own      the program's "3" is what OpenDS runs with
 *   empty    "" counts as unset: "1"; the variable stays ""
 *   invalid  the program's "0" is kept, so the open fails with
 *            CU_FILE_DRIVER_INVALID_PROPS (nothing replaces a bad value)
 *   params   cuFileSetParameterSizeT's threads and direct I/O size beat
 *            the environment's and reach OpenDS (and the properties)
 */
#include <dlfcn.h>

#include "dropin_test.h"
#include "opends.h"

#define VAR "OPENDS_IO_KWORKERS"

extern char **environ;

static opends_error_t (*get_setting)(const char *, char *, size_t, opends_setting_source_t *);

/* ---- the environment, edited by this file only --------------------------- */

static bool mine; /* this file is editing the environment */

static void not_mine(const char *fn, const char *name)
{
	if (mine)
		return;
	fprintf(stderr, "FAIL: a library called %s(\"%s\"): the drop-in must not edit the environment\n", fn,
		name ? name : "(NULL)");
	_exit(1);
}

/* remove name from environ (our own list: entries are never freed) */
static void env_del(const char *name)
{
	size_t n = strlen(name), j = 0;
	for (size_t i = 0; environ[i]; i++)
		if (strncmp(environ[i], name, n) || environ[i][n] != '=')
			environ[j++] = environ[i];
	environ[j] = NULL;
}

static void env_put(char *entry)
{
	static char **own;
	size_t count = 0;
	while (environ[count])
		count++;
	char **v = malloc((count + 2) * sizeof(*v));
	CHECK(v, "malloc");
	memcpy(v, environ, count * sizeof(*v));
	v[count] = entry;
	v[count + 1] = NULL;
	free(own);
	environ = own = v;
}

/* default visibility: the build hides symbols otherwise */
__attribute__((visibility("default"))) int setenv(const char *name, const char *value, int overwrite)
{
	not_mine("setenv", name);
	if (getenv(name) && !overwrite)
		return 0;
	env_del(name);
	size_t n = strlen(name) + strlen(value) + 2;
	char *e = malloc(n);
	CHECK(e, "malloc");
	snprintf(e, n, "%s=%s", name, value);
	env_put(e);
	return 0;
}

__attribute__((visibility("default"))) int unsetenv(const char *name)
{
	not_mine("unsetenv", name);
	env_del(name);
	return 0;
}

__attribute__((visibility("default"))) int putenv(char *string)
{
	not_mine("putenv", string);
	char *eq = strchr(string, '=');
	CHECK(eq, "putenv without =");
	char name[256];
	snprintf(name, sizeof(name), "%.*s", (int)(eq - string), string);
	env_del(name);
	env_put(string);
	return 0;
}

static void set_var(const char *name, const char *v)
{
	mine = true;
	if (v)
		setenv(name, v, 1);
	else
		unsetenv(name);
	mine = false;
}

/* ---- the cases ------------------------------------------------------------ */

/* the libopends the drop-in NEEDs, loaded with it */
static void load_opends(void)
{
	void *ods = dlopen("libopends.so.0", RTLD_NOW | RTLD_NOLOAD);
	CHECK(ods, "libopends.so.0 is not loaded with the drop-in: %s", dlerror());
	*(void **)&get_setting = dlsym(ods, "opends_driver_get_setting");
	CHECK(get_setting, "opends_driver_get_setting: %s", dlerror());
}

static void expect_setting(const char *name, const char *want, opends_setting_source_t src)
{
	char v[64];
	opends_setting_source_t got;
	opends_error_t e = get_setting(name, v, sizeof(v), &got);
	CHECK(e.err == OPENDS_SUCCESS, "opends_driver_get_setting(%s): %d", name, (int)e.err);
	CHECK(!strcmp(v, want) && got == src, "OpenDS runs with %s=\"%s\" from %d, expected \"%s\" from %d", name, v,
	      (int)got, want, (int)src);
}

/* set VAR as given (NULL: unset), open, and check what OpenDS runs with
 * and what the environment holds afterwards */
static void open_with(const char *val, const char *want, opends_setting_source_t src, int want_err)
{
	set_var(VAR, val);
	CUfileError_t e = L.cuFileDriverOpen();
	CHECK((int)e.err == want_err, "cuFileDriverOpen with %s=%s: %d, expected %d", VAR, val ? val : "(unset)",
	      (int)e.err, want_err);
	const char *after = getenv(VAR);
	CHECK((!val && !after) || (val && after && !strcmp(after, val)), "%s after the open: %s, expected %s", VAR,
	      after ? after : "(unset)", val ? val : "(unset)");
	if (e.err == CU_FILE_SUCCESS) {
		expect_setting(VAR, want, src);
		e = L.cuFileDriverClose_v2();
		CHECK(e.err == CU_FILE_SUCCESS, "cuFileDriverClose_v2: %d", (int)e.err);
	}
}

static void c_unset(void)
{
	open_with(NULL, "1", OPENDS_SETTING_EXPLICIT, CU_FILE_SUCCESS);
	/* a second open gets the default again */
	open_with(NULL, "1", OPENDS_SETTING_EXPLICIT, CU_FILE_SUCCESS);
}

static void c_own(void)
{
	open_with("3", "3", OPENDS_SETTING_ENVIRONMENT, CU_FILE_SUCCESS);
}

static void c_empty(void)
{
	open_with("", "1", OPENDS_SETTING_EXPLICIT, CU_FILE_SUCCESS);
}

static void c_invalid(void)
{
	open_with("0", "", OPENDS_SETTING_DEFAULT, CU_FILE_DRIVER_INVALID_PROPS);
}

static void c_params(void)
{
	set_var("OPENDS_IO_THREADS", "2");
	set_var("OPENDS_CHUNK_SIZE", "1m");
	CHECK(L.cuFileSetParameterSizeT(CUFILE_PARAM_EXECUTION_MAX_IO_THREADS, 6).err == CU_FILE_SUCCESS, "set threads");
	CHECK(L.cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, 64).err == CU_FILE_SUCCESS,
	      "set max direct io size");
	CHECK(L.cuFileDriverOpen().err == CU_FILE_SUCCESS, "cuFileDriverOpen");
	expect_setting("OPENDS_IO_THREADS", "6", OPENDS_SETTING_EXPLICIT);
	expect_setting("OPENDS_CHUNK_SIZE", "65536", OPENDS_SETTING_EXPLICIT);
	expect_setting("OPENDS_QUEUE_DEPTH", "", OPENDS_SETTING_DEFAULT);
	CUfileDrvProps_t p;
	CHECK(L.cuFileDriverGetProperties(&p).err == CU_FILE_SUCCESS, "cuFileDriverGetProperties");
	CHECK(p.nvfs.max_direct_io_size == 64, "max_direct_io_size %u KiB, expected 64",
	      (unsigned)p.nvfs.max_direct_io_size);
	CHECK(!strcmp(getenv("OPENDS_IO_THREADS"), "2") && !strcmp(getenv("OPENDS_CHUNK_SIZE"), "1m"),
	      "the environment changed");
	CHECK(L.cuFileDriverClose_v2().err == CU_FILE_SUCCESS, "close");
}

int main(int argc, char **argv)
{
	dt_load(argc, argv);
	load_opends();
	static const struct dt_case cases[] = { { "unset", c_unset },
						{ "own", c_own },
						{ "empty", c_empty },
						{ "invalid", c_invalid },
						{ "params", c_params } };
	return dt_run_cases(cases, sizeof(cases) / sizeof(*cases));
}
