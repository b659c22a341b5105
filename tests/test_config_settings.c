/*
 * test_config_settings: opends_driver_open_with (settings given by the
 * program instead of the environment) and opends_driver_get_setting.
 * Each case runs in its own process (the driver and the environment are
 * the process's):
 *   bad       every bad argument fails with exactly OPENDS_INVALID_VALUE,
 *             a detail naming the setting, and opens nothing
 *   twice     open_with while open: OPENDS_DRIVER_ALREADY_OPEN (even with
 *             bad settings: checked first); get_setting closed and misused
 *   applied   the settings are what the driver runs with: backend,
 *             max_direct_io_size, get_setting's value and source; bytes
 *             read through it are the file's
 *   env       precedence: a setting beats the environment, the environment
 *             beats the default; an empty variable is unset; a bad
 *             variable that a setting replaces is not read, one that no
 *             setting replaces still fails the open
 * Exit 0 pass, 1 fail.
 */
#include "common.h"

#include <sys/wait.h>

#define S(n, v) ((opends_setting_t){ (n), (v) })

/* open_with must fail with code, say `name` (and `also`, if not NULL) in
 * the detail and leave the driver closed */
static void expect_refused2(const opends_setting_t *s, size_t n, int code, const char *name, const char *also)
{
	EXPECT_ERR(opends_driver_open_with(s, n), code);
	CHECKF(strstr(t_detail(), name), "detail \"%s\" does not name %s", t_detail(), name);
	if (also)
		CHECKF(strstr(t_detail(), also), "detail \"%s\" does not say %s", t_detail(), also);
	CHECKF(opends_driver_backend() == NULL, "the driver is open after a refused open_with");
	opends_drv_props_t p;
	EXPECT_ERR(opends_driver_get_properties(&p), OPENDS_DRIVER_NOT_INITIALIZED);
}

static void expect_refused(const opends_setting_t *s, size_t n, int code, const char *name)
{
	expect_refused2(s, n, code, name, NULL);
}

static void expect_setting(const char *name, const char *want, opends_setting_source_t src)
{
	char v[256];
	opends_setting_source_t got = (opends_setting_source_t)99;
	OK(opends_driver_get_setting(name, v, sizeof(v), &got));
	CHECKF(!strcmp(v, want), "%s is \"%s\", expected \"%s\"", name, v, want);
	CHECKF(got == src, "%s comes from %d, expected %d", name, (int)got, (int)src);
}

static void c_bad(void)
{
	const int IV = OPENDS_INVALID_VALUE;
	unsetenv("OPENDS_IO_THREADS");
	expect_refused(NULL, 1, IV, "settings is NULL");
	opends_setting_t s[3];
	s[0] = S(NULL, "1");
	expect_refused(s, 1, IV, "settings[0].name is NULL");
	s[0] = S("OPENDS_NOPE", "1");
	expect_refused(s, 1, IV, "OPENDS_NOPE");
	s[0] = S("opends_io_threads", "4"); /* names are exact */
	expect_refused(s, 1, IV, "opends_io_threads");
	s[0] = S("OPENDS_IO_THREADS", NULL);
	expect_refused(s, 1, IV, "OPENDS_IO_THREADS");
	s[0] = S("OPENDS_IO_THREADS", "");
	expect_refused(s, 1, IV, "OPENDS_IO_THREADS");
	/* values: the parsers of the environment */
	static const char *const bad[][2] = {
		{ "OPENDS_IO_THREADS", "0" },     { "OPENDS_IO_THREADS", "257" },  { "OPENDS_IO_THREADS", "08" },
		{ "OPENDS_IO_THREADS", " 4" },    { "OPENDS_IO_THREADS", "4x" },   { "OPENDS_QUEUE_DEPTH", "4097" },
		{ "OPENDS_IO_KWORKERS", "65" },   { "OPENDS_CHUNK_SIZE", "4097" }, { "OPENDS_CHUNK_SIZE", "2g" },
		{ "OPENDS_MAX_PINNED", "1023k" }, { "OPENDS_INLINE_MAX", "2g" },   { "OPENDS_READAHEAD", "yes" },
		{ "OPENDS_CPU_MASK", "0xg" },     { "OPENDS_IDLE_SPIN", "-1" },    { "OPENDS_ASSUME_ALIGNED_ONLY", "2" },
		{ "OPENDS_BACKEND", "nvme" },     { "OPENDS_ACCEL", "rocm" },      { "OPENDS_INLINE_SPLIT", "17" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		t_phase = bad[i][0];
		s[0] = S(bad[i][0], bad[i][1]);
		expect_refused2(s, 1, IV, bad[i][0], "accepts");
	}
	t_phase = "later entries";
	/* a bad entry after good ones: nothing opened, the detail gives its index */
	s[0] = S("OPENDS_BACKEND", "ref");
	s[1] = S("OPENDS_IO_THREADS", "2");
	s[2] = S("OPENDS_QUEUE_DEPTH", "0");
	expect_refused(s, 3, IV, "settings[2]: OPENDS_QUEUE_DEPTH");
	s[2] = S("OPENDS_BACKEND", "ref"); /* twice, even with the same value */
	expect_refused(s, 3, IV, "settings[2]: OPENDS_BACKEND is given twice (also settings[0])");
	/* read where their libraries load: environment only */
	s[0] = S("OPENDS_CUFILE_LIBRARY", "/x/libcufile.so.0");
	expect_refused(s, 1, IV, "OPENDS_CUFILE_LIBRARY");
	s[0] = S("OPENDS_RADOS_LIBRARY", "librados.so.2");
	expect_refused(s, 1, IV, "OPENDS_RADOS_LIBRARY");
	/* after all that, a good open works: nothing was left half open */
	t_phase = "good open";
	OK(opends_driver_open_with(NULL, 0));
	OK(opends_driver_close());
	s[0] = S("OPENDS_BACKEND", "ref");
	OK(opends_driver_open_with(s, 1));
	CHECK(opends_driver_backend() && !strcmp(opends_driver_backend(), "ref"));
	OK(opends_driver_close());
}

static void c_twice(void)
{
	char v[64] = "untouched";
	EXPECT_ERR(opends_driver_get_setting("OPENDS_BACKEND", v, sizeof(v), NULL), OPENDS_DRIVER_NOT_INITIALIZED);
	opends_setting_t s[1] = { S("OPENDS_BACKEND", "ref") };
	OK(opends_driver_open_with(s, 1));
	EXPECT_ERR(opends_driver_open_with(s, 1), OPENDS_DRIVER_ALREADY_OPEN);
	EXPECT_ERR(opends_driver_open_with(NULL, 1), OPENDS_DRIVER_ALREADY_OPEN);
	EXPECT_ERR(opends_driver_open(), OPENDS_DRIVER_ALREADY_OPEN);
	CHECK(!strcmp(opends_driver_backend(), "ref"));
	/* get_setting's own misuse */
	EXPECT_ERR(opends_driver_get_setting(NULL, v, sizeof(v), NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_driver_get_setting("OPENDS_BACKEND", NULL, sizeof(v), NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_driver_get_setting("OPENDS_BACKEND", v, 0, NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_driver_get_setting("OPENDS_NOPE", v, sizeof(v), NULL), OPENDS_INVALID_VALUE);
	CHECK(strstr(t_detail(), "OPENDS_NOPE"));
	EXPECT_ERR(opends_driver_get_setting("OPENDS_BACKEND", v, 3, NULL), OPENDS_INVALID_VALUE); /* "ref" + NUL */
	CHECKF(!strcmp(v, "untouched"), "a refused get_setting wrote \"%s\"", v);
	OK(opends_driver_get_setting("OPENDS_BACKEND", v, 4, NULL));
	CHECK(!strcmp(v, "ref"));
	OK(opends_driver_close());
	EXPECT_ERR(opends_driver_get_setting("OPENDS_BACKEND", v, sizeof(v), NULL), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_driver_close(), OPENDS_DRIVER_NOT_INITIALIZED);
}

static void c_applied(void)
{
	unsetenv("OPENDS_CHUNK_SIZE");
	unsetenv("OPENDS_IO_THREADS");
	unsetenv("OPENDS_BACKEND");
	opends_setting_t s[] = { S("OPENDS_CHUNK_SIZE", "64k"), S("OPENDS_BACKEND", "ref"),
				 S("OPENDS_IO_THREADS", "3") };
	OK(opends_driver_open_with(s, 3));
	CHECK(!strcmp(opends_driver_backend(), "ref"));
	opends_drv_props_t p;
	OK(opends_driver_get_properties(&p));
	CHECKF(p.max_direct_io_size == 65536, "max_direct_io_size %zu, expected 65536", p.max_direct_io_size);
	expect_setting("OPENDS_CHUNK_SIZE", "64k", OPENDS_SETTING_EXPLICIT);
	expect_setting("OPENDS_BACKEND", "ref", OPENDS_SETTING_EXPLICIT);
	expect_setting("OPENDS_IO_THREADS", "3", OPENDS_SETTING_EXPLICIT);
	expect_setting("OPENDS_QUEUE_DEPTH", "", OPENDS_SETTING_DEFAULT);
	/* and it moves bytes: a file read back exactly */
	char path[PATH_MAX];
	t_path(path, sizeof(path), "settings.bin");
	size_t n = 200 * 1024 + 5;
	uint8_t *want = malloc(n), *got = malloc(n);
	CHECK(want && got);
	t_fill_seed(want, 7, n);
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	CHECK(fd >= 0);
	t_pwrite_all(fd, want, n, 0);
	opends_handle_t fh = t_register(fd);
	memset(got, 0, n);
	EXPECT_SSZ(opends_sync_read(fh, got, n, 0, 0), (ssize_t)n);
	VERIFY(got, want, n, "read through a driver opened with settings");
	OK(opends_handle_deregister(fh));
	close(fd);
	unlink(path);
	free(want);
	free(got);
	OK(opends_driver_close());
}

static void c_env(void)
{
	setenv("OPENDS_CHUNK_SIZE", "128k", 1);
	setenv("OPENDS_BACKEND", "ref", 1);
	setenv("OPENDS_QUEUE_DEPTH", "", 1); /* empty: unset */
	unsetenv("OPENDS_IO_THREADS");
	opends_setting_t s[] = { S("OPENDS_CHUNK_SIZE", "64k") };
	OK(opends_driver_open_with(s, 1));
	opends_drv_props_t p;
	OK(opends_driver_get_properties(&p));
	CHECKF(p.max_direct_io_size == 65536, "setting over environment: %zu, expected 65536", p.max_direct_io_size);
	expect_setting("OPENDS_CHUNK_SIZE", "64k", OPENDS_SETTING_EXPLICIT);
	expect_setting("OPENDS_BACKEND", "ref", OPENDS_SETTING_ENVIRONMENT);
	expect_setting("OPENDS_QUEUE_DEPTH", "", OPENDS_SETTING_DEFAULT);
	expect_setting("OPENDS_IO_THREADS", "", OPENDS_SETTING_DEFAULT);
	OK(opends_driver_close());
	/* without the setting the environment's value is back */
	OK(opends_driver_open());
	OK(opends_driver_get_properties(&p));
	CHECKF(p.max_direct_io_size == 131072, "environment: %zu, expected 131072", p.max_direct_io_size);
	expect_setting("OPENDS_CHUNK_SIZE", "128k", OPENDS_SETTING_ENVIRONMENT);
	OK(opends_driver_close());
	/* a bad variable a setting replaces is never read ... */
	setenv("OPENDS_IO_THREADS", "0", 1);
	opends_setting_t t[] = { S("OPENDS_IO_THREADS", "2") };
	OK(opends_driver_open_with(t, 1));
	expect_setting("OPENDS_IO_THREADS", "2", OPENDS_SETTING_EXPLICIT);
	OK(opends_driver_close());
	/* ... one no setting replaces fails the open as it always has */
	expect_refused(s, 1, OPENDS_DRIVER_INVALID_PROPS, "OPENDS_IO_THREADS");
	/* the library set nothing in the environment */
	CHECK(!strcmp(getenv("OPENDS_CHUNK_SIZE"), "128k"));
	CHECK(!strcmp(getenv("OPENDS_IO_THREADS"), "0"));
	CHECK(!strcmp(getenv("OPENDS_QUEUE_DEPTH"), ""));
}

int main(void)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = { { "bad", c_bad }, { "twice", c_twice }, { "applied", c_applied }, { "env", c_env } };
	t_watchdog(120);
	int failed = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		failed += !t_case_in_child(cases[i].name, cases[i].fn);
	printf("%d passed, %d failed\n", (int)(sizeof(cases) / sizeof(*cases)) - failed, failed);
	return failed ? 1 : 0;
}
