/*
 * test_cufile_dropin_config --lib=PATH
 *
 * When the drop-in reads cuFile's configuration: as NVIDIA's libcufile,
 * at the driver's open (explicit, or implicit by a first call), not at the
 * first configuration call. Each case in a process of its own:
 *   preopen: before any open the getters answer what NVIDIA 1.15.1 does
 *     there (0, an empty string, the slab array INVALID_VALUE) whatever
 *     the file says; a program may point CUFILE_ENV_PATH_JSON elsewhere
 *     until the open and the open reads that file (io_batchsize, the
 *     properties' max_batch_io_size, cuFileBatchIOSetUp's limit, the
 *     slab arrays, the logging level);
 *   reopen: a new open after the last close reads the file again;
 *   api_wins: values set through the API before the open beat the file;
 *   env_wins: CUFILE_LOGGING_LEVEL beats the file;
 *   implicit: the open by a first call (cuFileDriverGetProperties) reads
 *     the file too.
 * Exit 0 pass, 1 fail.
 */
#include <dlfcn.h>
#include <fcntl.h>

#include "dropin_test.h"

static char dir[64] = "/var/tmp/cufile_config_XXXXXX";

/* DIR/name holding a cufile.json with io_batchsize bs (and comments,
 * as NVIDIA's), logging level WARN, two POSIX pool slabs. */
static const char *json(const char *name, unsigned bs)
{
	static char path[4][128];
	static int k;
	char *p = path[k++ % 4];
	snprintf(p, 128, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	CHECK(f, "fopen %s: %s", p, strerror(errno));
	fprintf(f,
		"{ // cuFile's configuration\n"
		"  \"logging\": { \"level\": \"WARN\" }, \"profile\": { \"cufile_stats\": 1 },\n"
		"  \"properties\": { \"io_batchsize\": %u, /* entries */\n"
		"    \"posix_pool_slab_size_kb\": [4, 64], \"posix_pool_slab_count\": [32, 16] }\n"
		"}\n",
		bs);
	CHECK(fclose(f) == 0, "fclose");
	return p;
}

static size_t batchsize(void)
{
	size_t v = 12345;
	CU_OK(L.cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, &v));
	return v;
}

static void level_is(const char *want)
{
	char s[64] = "x";
	CU_OK(L.cuFileGetParameterString(CUFILE_PARAM_LOGGING_LEVEL, s, (int)sizeof s));
	CHECK(!strcmp(s, want), "logging level '%s', expected '%s'", s, want);
}

static void props_batch_is(unsigned want)
{
	CUfileDrvProps_t p;
	CU_OK(L.cuFileDriverGetProperties(&p));
	CHECK(p.max_batch_io_size == want, "max_batch_io_size %u, expected %u", p.max_batch_io_size, want);
	CUfileBatchHandle_t b;
	CU_ERR(L.cuFileBatchIOSetUp(&b, want + 1), CU_FILE_INVALID_VALUE);
	CU_OK(L.cuFileBatchIOSetUp(&b, want));
	L.cuFileBatchIODestroy(b);
}

static void c_preopen(void)
{
	setenv("CUFILE_ENV_PATH_JSON", json("a.json", 64), 1);
	CHECK(batchsize() == 0, "io_batchsize before the open: %zu, expected 0", batchsize());
	level_is("");
	CUfileError_t (*get_slabs)(size_t *, size_t *, int) =
		(CUfileError_t(*)(size_t *, size_t *, int))dlsym(L.lib, "cuFileGetParameterPosixPoolSlabArray");
	CHECK(get_slabs, "cuFileGetParameterPosixPoolSlabArray missing");
	size_t sz[2] = { 0, 0 }, ct[2] = { 0, 0 };
	CU_ERR(get_slabs(sz, ct, 2), CU_FILE_INVALID_VALUE);
	/* the file the environment names at the open is the one read */
	setenv("CUFILE_ENV_PATH_JSON", json("b.json", 32), 1);
	CU_OK(L.cuFileDriverOpen());
	CHECK(batchsize() == 32, "io_batchsize after the open: %zu, expected the file's 32", batchsize());
	level_is("WARN");
	props_batch_is(32);
	CU_OK(get_slabs(sz, ct, 2));
	CHECK(sz[0] == 4 && ct[0] == 32 && sz[1] == 64 && ct[1] == 16, "slabs %zu/%zu %zu/%zu", sz[0], ct[0], sz[1],
	      ct[1]);
	CU_OK(L.cuFileDriverClose_v2());
}

static void c_reopen(void)
{
	setenv("CUFILE_ENV_PATH_JSON", json("c.json", 40), 1);
	CU_OK(L.cuFileDriverOpen());
	props_batch_is(40);
	CU_OK(L.cuFileDriverClose_v2());
	json("c.json", 24); /* the same file, new contents */
	CHECK(batchsize() == 40, "io_batchsize while closed: %zu, expected the last open's 40", batchsize());
	CU_OK(L.cuFileDriverOpen());
	props_batch_is(24);
	CU_OK(L.cuFileDriverClose_v2());
}

static void c_api_wins(void)
{
	setenv("CUFILE_ENV_PATH_JSON", json("d.json", 64), 1);
	CUfileError_t (*set_level)(int) = (CUfileError_t(*)(int))dlsym(L.lib, "cuFileSetStatsLevel");
	CUfileError_t (*get_level)(int *) = (CUfileError_t(*)(int *))dlsym(L.lib, "cuFileGetStatsLevel");
	CHECK(set_level && get_level, "statistics level calls missing");
	CU_OK(set_level(2)); /* the file says 1: the API's level stands at the open, and the next */
	CU_OK(L.cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, 20));
	CU_OK(L.cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL, "INFO"));
	CHECK(batchsize() == 20, "io_batchsize set before the open: %zu", batchsize());
	CU_OK(L.cuFileDriverOpen());
	CHECK(batchsize() == 20, "io_batchsize set through the API, then the open: %zu, expected 20", batchsize());
	level_is("INFO");
	props_batch_is(20);
	int level = -1;
	CU_OK(get_level(&level));
	CHECK(level == 2, "statistics level %d after the open, expected the API's 2", level);
	CU_OK(set_level(3));
	CU_OK(L.cuFileDriverClose_v2());
	CU_OK(L.cuFileDriverOpen());
	CU_OK(get_level(&level));
	CHECK(level == 3, "statistics level %d after a reopen, expected the API's 3", level);
	CU_OK(L.cuFileDriverClose_v2());
}

static void c_env_wins(void)
{
	setenv("CUFILE_ENV_PATH_JSON", json("e.json", 64), 1);
	setenv("CUFILE_LOGGING_LEVEL", "DEBUG", 1);
	CU_OK(L.cuFileDriverOpen());
	level_is("DEBUG");
	CHECK(batchsize() == 64, "io_batchsize %zu, expected the file's 64", batchsize());
	CU_OK(L.cuFileDriverClose_v2());
}

static void c_implicit(void)
{
	setenv("CUFILE_ENV_PATH_JSON", json("f.json", 48), 1);
	props_batch_is(48); /* cuFileDriverGetProperties opens the driver */
	CHECK(batchsize() == 48, "io_batchsize after an implicit open: %zu", batchsize());
	CU_ERR(L.cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, 8), CU_FILE_DRIVER_ALREADY_OPEN);
}

int main(int argc, char **argv)
{
	dt_load(argc, argv);
	dt_watchdog(120);
	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	unsetenv("CUFILE_LOGGING_LEVEL");
	static const struct dt_case cases[] = {
		{ "preopen", c_preopen }, { "reopen", c_reopen },     { "api_wins", c_api_wins },
		{ "env_wins", c_env_wins }, { "implicit", c_implicit },
	};
	int rc = dt_run_cases(cases, sizeof(cases) / sizeof(*cases));
	static const char *const names[] = { "a", "b", "c", "d", "e", "f" };
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		char p[128];
		snprintf(p, sizeof p, "%s/%s.json", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
	return rc;
}
