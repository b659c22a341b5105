/*
 * cufile_stats [--mem=host|device] DIR
 *
 * A program configured through cufile.json and reading cuFile's
 * statistics: it writes DIR/cufile.json (NVIDIA's format, comments
 * included) and runs itself again with CUFILE_ENV_PATH_JSON pointing at it,
 * as users set it before starting a program. It then prints what the
 * parameter API and the driver's properties report of the file's values,
 * and the statistics of a known sequence of calls (levels 1 and 2, with
 * cuFileStatsStop, Reset, Start and level changes between them), as
 * "= name value" lines: run1.sh compares them with cufile_stats.expected.
 * The statistics and parameter calls are newer than cuFile 1.15 and are
 * looked up by name ("= name absent" where the library lacks them).
 * Reads and writes are checked byte for byte.
 */
#include "prog.h"

#include <stddef.h>
#include <sys/stat.h>

#define FSZ (1u << 20)

static const char json[] =
	"{\n"
	"  // as NVIDIA's cufile.json: comments, sections, arrays\n"
	"  \"logging\": { \"dir\": \"/tmp\", \"level\": \"WARN\" },\n"
	"  \"profile\": { \"nvtx\": false, \"cufile_stats\": 2 },\n"
	"  \"execution\": { \"max_io_threads\": 4, \"parallel_io\": false,\n"
	"                 \"min_io_threshold_size_kb\": 2048, \"max_request_parallelism\": 2 },\n"
	"  \"properties\": {\n"
	"    /* bounce buffers */ \"max_device_cache_size_kb\": 65536, \"per_buffer_cache_size_kb\": 2048,\n"
	"    \"use_poll_mode\": true, \"poll_mode_max_size_kb\": 8, \"allow_compat_mode\": true,\n"
	"    \"io_batchsize\": 256, \"rdma_dev_addr_list\": [ ],\n"
	"    \"posix_pool_slab_size_kb\": [4, 64], \"posix_pool_slab_count\": [32, 16]\n"
	"  },\n"
	"  \"fs\": { \"generic\": { \"posix_unaligned_writes\": false } }\n"
	"}\n";

typedef CUfileError_t (*get_size_fn)(int, size_t *);
typedef CUfileError_t (*get_bool_fn)(int, bool *);
typedef CUfileError_t (*get_str_fn)(int, char *, int);
typedef CUfileError_t (*slab_fn)(size_t *, size_t *, int);
typedef CUfileError_t (*int_fn)(int);
typedef CUfileError_t (*pint_fn)(int *);
typedef CUfileError_t (*void_fn)(void);
typedef CUfileError_t (*ptr_fn)(void *);

static void *sym(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	if (!p)
		printf("= %s absent\n", name);
	return p;
}

static void show_l1(const char *when, const CUfileStatsLevel1_t *s)
{
	printf("= %s read_ops %llu/%llu bytes %llu write_ops %llu/%llu bytes %llu\n", when,
	       (unsigned long long)s->read_ops.ok, (unsigned long long)s->read_ops.err,
	       (unsigned long long)s->read_bytes, (unsigned long long)s->write_ops.ok,
	       (unsigned long long)s->write_ops.err, (unsigned long long)s->write_bytes);
	printf("= %s hdl_register %llu/%llu hdl_deregister %llu buf_register %llu/%llu buf_deregister %llu\n", when,
	       (unsigned long long)s->hdl_register_ops.ok, (unsigned long long)s->hdl_register_ops.err,
	       (unsigned long long)s->hdl_deregister_ops.ok, (unsigned long long)s->buf_register_ops.ok,
	       (unsigned long long)s->buf_register_ops.err, (unsigned long long)s->buf_deregister_ops.ok);
	printf("= %s batch setup %llu submit %llu/%llu complete %llu/%llu destroy %llu read_bytes %llu\n", when,
	       (unsigned long long)s->batch_setup_ops.ok, (unsigned long long)s->batch_submit_ops.ok,
	       (unsigned long long)s->batch_submit_ops.err, (unsigned long long)s->batch_complete_ops.ok,
	       (unsigned long long)s->batch_complete_ops.err, (unsigned long long)s->batch_destroy_ops.ok,
	       (unsigned long long)s->batch_read_bytes);
	printf("# %s read_lat_sum_us %llu avg %llu bw %llu B/s\n", when, (unsigned long long)s->read_lat_sum_us,
	       (unsigned long long)s->read_lat_avg_us, (unsigned long long)s->read_bw_bytes_per_sec);
}

/* What the parameter API reports, as "= <when>param_<name> err value"
 * lines (the calls are newer than 1.15: looked up by name). */
static void show_params(const char *when)
{
	get_size_fn gsz = (get_size_fn)sym("cuFileGetParameterSizeT");
	get_bool_fn gb = (get_bool_fn)sym("cuFileGetParameterBool");
	get_str_fn gs = (get_str_fn)sym("cuFileGetParameterString");
	slab_fn gslab = (slab_fn)sym("cuFileGetParameterPosixPoolSlabArray");
	if (!gsz || !gb || !gs || !gslab)
		return;
	static const struct {
		const char *name;
		int p;
	} sz[] = { { "io_batchsize", CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE },
		   { "max_device_cache_size_kb", CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB },
		   { "per_buffer_cache_size_kb", CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB },
		   { "poll_mode_max_size_kb", CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB },
		   { "min_io_threshold_size_kb", CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB },
		   { "max_request_parallelism", CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM },
		   { "cufile_stats", CUFILE_PARAM_PROFILE_STATS } };
	for (size_t i = 0; i < sizeof sz / sizeof *sz; i++) {
		size_t v = 0;
		CUfileError_t e = gsz(sz[i].p, &v);
		printf("= %sparam_%s %d %zu\n", when, sz[i].name, (int)e.err, v);
	}
	bool b = false;
	CUfileError_t e = gb(CUFILE_PARAM_PROPERTIES_USE_POLL_MODE, &b);
	printf("= %sparam_use_poll_mode %d %d\n", when, (int)e.err, (int)b);
	b = false;
	e = gb(CUFILE_PARAM_EXECUTION_PARALLEL_IO, &b);
	printf("= %sparam_parallel_io %d %d\n", when, (int)e.err, (int)b);
	char str[256] = "";
	e = gs(CUFILE_PARAM_LOGGING_LEVEL, str, (int)sizeof str);
	printf("= %sparam_logging_level %d %s\n", when, (int)e.err, str);
	str[0] = 0;
	e = gs(CUFILE_PARAM_LOG_DIR, str, (int)sizeof str);
	printf("= %sparam_log_dir %d %s\n", when, (int)e.err, str);
	size_t ss[2] = { 0 }, sc[2] = { 0 };
	e = gslab(ss, sc, 2);
	printf("= %sparam_posix_pool_slabs %d %zu/%zu %zu/%zu\n", when, (int)e.err, ss[0], sc[0], ss[1], sc[1]);
}

int main(int argc, char **argv)
{
	const char *dir = prog_args(argc, argv);
	char cfg[512];
	snprintf(cfg, sizeof cfg, "%s/cufile.json", dir);
	const char *env = getenv("CUFILE_ENV_PATH_JSON");
	if (!env || strcmp(env, cfg)) {
		FILE *f = fopen(cfg, "w");
		if (!f || fputs(json, f) < 0 || fclose(f))
			FAIL("%s: %s", cfg, strerror(errno));
		setenv("CUFILE_ENV_PATH_JSON", cfg, 1);
		execv("/proc/self/exe", argv);
		FAIL("execv: %s", strerror(errno));
	}
	char src[512];
	uint8_t *oracle;
	make_file(dir, "stats_src.bin", FSZ, 6, &oracle, src, sizeof src);

	/* what the parameter API reports before the driver opens (cuFile
	 * reads cufile.json at the open), and after */
	show_params("");
	ans("driver_open", cuFileDriverOpen());
	show_params("open_");
	CUfileDrvProps_t props;
	ans("props", cuFileDriverGetProperties(&props));
	printf("= props_max_batch_io_size %u\n", props.max_batch_io_size);
	printf("= props_max_device_cache_size %u per_buffer_cache_size %u\n", props.max_device_cache_size,
	       props.per_buffer_cache_size);
	printf("= props_poll_mode %d poll_thresh_size %zu\n",
	       (int)!!(props.nvfs.dcontrolflags & (1u << CU_FILE_USE_POLL_MODE)), (size_t)props.nvfs.poll_thresh_size);
	CUfileBatchHandle_t b;
	CUfileError_t e = cuFileBatchIOSetUp(&b, 256);
	ans("batch_setup_256", e);
	if (!e.err)
		cuFileBatchIODestroy(b);
	ans("batch_setup_257", cuFileBatchIOSetUp(&b, 257));

	int_fn set_level = (int_fn)sym("cuFileSetStatsLevel");
	pint_fn get_level = (pint_fn)sym("cuFileGetStatsLevel");
	void_fn start = (void_fn)sym("cuFileStatsStart"), stop = (void_fn)sym("cuFileStatsStop"),
		reset = (void_fn)sym("cuFileStatsReset");
	ptr_fn l1 = (ptr_fn)sym("cuFileGetStatsL1"), l2 = (ptr_fn)sym("cuFileGetStatsL2"),
	       l3 = (ptr_fn)sym("cuFileGetStatsL3");
	if (!set_level || !get_level || !start || !stop || !reset || !l1 || !l2 || !l3) {
		printf("PASS: cufile_stats: no statistics in this library\n");
		return 0;
	}
	int level = -1;
	e = get_level(&level);
	printf("= stats_level_from_json %d %d\n", (int)e.err, level);
	ans("stats_reset", reset());

	/* a known sequence of calls */
	bool direct;
	int fd = open_direct(src, O_RDWR, &direct);
	CUfileHandle_t fh = reg_ok(fd);
	void *buf = m_alloc(FSZ);
	ans("buf_register", cuFileBufRegister(buf, FSZ, 0));
	for (int i = 0; i < 10; i++) {
		ssize_t r = cuFileRead(fh, buf, 65536, (off_t)i * 65536, (off_t)i * 65536);
		if (r != 65536)
			FAIL("read %d: %zd", i, r);
	}
	expect_bytes(buf, 0, oracle, 10 * 65536, "ten reads");
	ans_io("read_negative_offset", cuFileRead(fh, buf, 4096, -4096, 0));
	for (int i = 0; i < 3; i++) {
		ssize_t r = cuFileWrite(fh, buf, 4096, (off_t)i * 4096, (off_t)i * 4096);
		if (r != 4096)
			FAIL("write %d: %zd", i, r);
	}
	ans("batch_setup", cuFileBatchIOSetUp(&b, 4));
	CUfileIOParams_t p[4];
	memset(p, 0, sizeof p);
	for (int i = 0; i < 4; i++) {
		p[i].mode = CUFILE_BATCH;
		p[i].fh = fh;
		p[i].opcode = CUFILE_READ;
		p[i].cookie = (void *)(uintptr_t)(i + 1);
		p[i].u.batch.devPtr_base = buf;
		p[i].u.batch.devPtr_offset = (off_t)i * 8192;
		p[i].u.batch.file_offset = (off_t)i * 8192;
		p[i].u.batch.size = 8192;
	}
	ans("batch_submit", cuFileBatchIOSubmit(b, 4, p, 0));
	CUfileIOEvents_t ev[4];
	unsigned got = 0;
	for (int tries = 0; got < 4 && tries < 100; tries++) {
		unsigned nr = 4 - got;
		struct timespec to = { 1, 0 };
		if (cuFileBatchIOGetStatus(b, nr, &nr, ev + got, &to).err)
			FAIL("cuFileBatchIOGetStatus");
		got += nr;
	}
	if (got != 4)
		FAIL("batch: %u events", got);
	cuFileBatchIODestroy(b);

	/* Room past each structure: cufile.h 1.15's statistics structures are
	 * 112 bytes shorter than 1.20's (no readv/writev counters), and a
	 * library of the other version writes its own size. The fields both
	 * versions have are printed; the histograms only where this header
	 * has 1.20's layout (the drop-in's). */
	static union {
		CUfileStatsLevel3_t s3;
		CUfileStatsLevel2_t s2;
		CUfileStatsLevel1_t s1;
		char room[16384];
	} u;
	CUfileStatsLevel2_t *s2 = &u.s2;
	CUfileStatsLevel1_t *s1 = &u.s1;
	ans("stats_l1", l1(s1));
	show_l1("l1", s1);
	memset(&u, 0, sizeof u);
	ans("stats_l2", l2(s2));
	if (sizeof(CUfileStatsLevel1_t) == 624 && offsetof(CUfileStatsLevel2_t, read_size_kb_hist) == 624)
		printf("= l2 read_hist_64k %llu write_hist_4k %llu\n", (unsigned long long)s2->read_size_kb_hist[6],
		       (unsigned long long)s2->write_size_kb_hist[2]);
	else
		printf("# l2 histograms not shown: this cufile.h's layout is not 1.20's\n");
	ans("stats_l3_at_level_2", l3(&u.s3));

	/* stopped: nothing more is counted */
	ans("stats_stop", stop());
	if (cuFileRead(fh, buf, 4096, 0, 0) != 4096)
		FAIL("read while stopped");
	ans("stats_l1_stopped", l1(s1));
	show_l1("stopped", s1);
	/* level 0: the counters are not enabled */
	ans("stats_set_level_0", set_level(0));
	ans("stats_l1_level_0", l1(s1));
	ans("stats_start_level_0", start());
	/* level 1 again, started, reset: one read */
	ans("stats_set_level_1", set_level(1));
	ans("stats_start", start());
	ans("stats_reset_again", reset());
	if (cuFileRead(fh, buf, 4096, 4096, 0) != 4096)
		FAIL("read after the reset");
	ans("stats_l1_after_reset", l1(s1));
	show_l1("after_reset", s1);
	ans("stats_l2_at_level_1", l2(s2));
	ans("stats_set_level_4", set_level(4));
	level = -1;
	get_level(&level);
	printf("= stats_level_now %d\n", level);

	ans("buf_deregister", cuFileBufDeregister(buf));
	cuFileHandleDeregister(fh);
	ans("driver_close", cuFileDriverClose());
	ans("stats_l1_closed", l1(s1));
	close(fd);
	unlink(src);
	unlink(cfg);
	m_free(buf);
	free(oracle);
	printf("PASS: cufile_stats (%s memory)\n", device ? "device" : "host");
	return 0;
}
