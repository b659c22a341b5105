/*
 * The drop-in's configuration and queries (dropin.h): driver properties,
 * the legacy setters, the parameter API, cufile.json (read by json.c),
 * the statistics level (stats.c keeps the statistics), and the entry
 * points of cuFile 1.20 that have no OpenDS meaning (PCIe topology, BAR
 * size, peer-to-peer flags, slab arrays). Those answer what NVIDIA's cuFile
 * answers with the feature off and never make up data; docs/cufile-dropin.md
 * has the table.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dropin.h"

/* ---- configuration set through the API ---------------------------------- */

/* Values are cuFile's units (KiB for sizes). "set" marks those set through
 * the API; those with an OpenDS counterpart are given to OpenDS as its
 * OPENDS_* variable at the next open. */
enum { P_SIZE_N = CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS + 1,
       P_BOOL_N = CUFILE_PARAM_GDS_FALLBACK_IO + 1,
       P_STR_N = CUFILE_PARAM_RDMA_TRANSPORT + 1 };

static const size_t size_default[P_SIZE_N] = {
	[CUFILE_PARAM_PROFILE_STATS] = 0,
	[CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH] = 32,  /* OpenDS's default */
	[CUFILE_PARAM_EXECUTION_MAX_IO_THREADS] = 4,       /* OpenDS's default */
	[CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB] = 8192,
	[CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM] = 4,
	[CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB] = 16384, /* OpenDS's 16 MiB */
	[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB] = 131072,
	[CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB] = 1024,
	[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB] = 33554432,
	[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE] = 128,
	[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB] = 4,
	[CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS] = 5,
};
static const size_t size_min[P_SIZE_N] = {
	[CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH] = 1,
	[CUFILE_PARAM_EXECUTION_MAX_IO_THREADS] = 1,
	[CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB] = 4,
	[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE] = 1,
};
static const size_t size_max[P_SIZE_N] = {
	[CUFILE_PARAM_PROFILE_STATS] = 3,
	[CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH] = 4096,
	[CUFILE_PARAM_EXECUTION_MAX_IO_THREADS] = 256,
	[CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB] = SIZE_MAX,
	[CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM] = SIZE_MAX,
	[CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB] = 1u << 20,
	[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB] = UINT_MAX,
	[CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB] = UINT_MAX,
	[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB] = UINT_MAX,
	[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE] = 4096,
	[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB] = SIZE_MAX,
	[CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS] = UINT_MAX,
};
static const bool bool_default[P_BOOL_N] = {
	[CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE] = true,
	[CUFILE_PARAM_EXECUTION_PARALLEL_IO] = true,
	[CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY] = true,
};
static const char *const str_default[P_STR_N] = { "ERROR", "", "", "" };

/* Before the driver first opens, a value not set through the API reads
 * as NVIDIA's libcufile 1.15.1 answers then (the H200, 2026-12-01,
 * cufile_stats with a cufile.json setting others): 0, false or an empty
 * string, min_io_threshold_size_kb 1024; cuFile reads its configuration
 * when the driver opens (config_load_locked), not before. */
static const size_t size_preopen[P_SIZE_N] = {
	[CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB] = 1024,
};

static size_t size_val[P_SIZE_N];
static bool size_set[P_SIZE_N], bool_set[P_BOOL_N], str_set[P_STR_N], posix_slabs_set;
static bool bool_val[P_BOOL_N];
static char str_val[P_STR_N][256];
static bool defaults_done;

#define SLABS_MAX 64
struct slabs {
	int len; /* 0: nothing set */
	size_t size[SLABS_MAX], count[SLABS_MAX];
};
/* The POSIX pool: none before the driver opens (NVIDIA 1.15.1 answers a
 * Get then with INVALID_VALUE), at the open the file's or cufile.json's
 * default (three slabs; NVIDIA 1.15.1 answers a Get of another length
 * with INVALID_VALUE); the GPU bounce buffers have no slab array unless
 * one is set (cuFile's uniform bounce buffers are the default). */
static const struct slabs posix_slabs_default = { 3, { 4, 1024, 16384 }, { 128, 64, 64 } };
static struct slabs posix_slabs, gpu_slabs;

/* ---- cufile.json and cuFile's environment -------------------------------- */

/* What programs configure cuFile with besides the API: the file named by
 * CUFILE_ENV_PATH_JSON, else /etc/cufile.json, and CUFILE_LOGGING_LEVEL /
 * CUFILE_LOGFILE_PATH. cuFile's precedence: a value set through the API,
 * then the environment, then the file, then the default. The keys below
 * are reported by cuFileGetParameter* and cuFileDriverGetProperties;
 * io_batchsize bounds cuFileBatchIOSetUp and cufile_stats is the
 * statistics level (stats.c). The file's max_direct_io_size_kb,
 * max_io_threads and max_io_queue_depth are not taken: OpenDS's own
 * variables (OPENDS_CHUNK_SIZE, ...) set what those would. A value out
 * of range is left out; a file that is not JSON is left out whole. */
static const struct {
	const char *key;
	int param;
} json_size[] = {
	{ "profile.cufile_stats", CUFILE_PARAM_PROFILE_STATS },
	{ "execution.min_io_threshold_size_kb", CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB },
	{ "execution.max_request_parallelism", CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM },
	{ "properties.max_device_cache_size_kb", CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB },
	{ "properties.per_buffer_cache_size_kb", CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB },
	{ "properties.max_device_pinned_mem_size_kb", CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB },
	{ "properties.io_batchsize", CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE },
	{ "properties.poll_mode_max_size_kb", CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB },
	{ "properties.batch_io_timeout_ms", CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS },
}, json_bool[] = {
	{ "properties.use_poll_mode", CUFILE_PARAM_PROPERTIES_USE_POLL_MODE },
	{ "properties.allow_compat_mode", CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE },
	{ "properties.force_compat_mode", CUFILE_PARAM_FORCE_COMPAT_MODE },
	{ "properties.use_pci_p2pdma", CUFILE_PARAM_USE_PCIP2PDMA },
	{ "execution.parallel_io", CUFILE_PARAM_EXECUTION_PARALLEL_IO },
	{ "profile.nvtx", CUFILE_PARAM_PROFILE_NVTX },
}, json_str[] = {
	{ "logging.level", CUFILE_PARAM_LOGGING_LEVEL },
	{ "logging.dir", CUFILE_PARAM_LOG_DIR },
};

/* The file's values, applied only when the whole file parsed. */
struct json_cfg {
	size_t size[P_SIZE_N];
	bool has_size[P_SIZE_N], b[P_BOOL_N], has_b[P_BOOL_N], has_str[P_STR_N];
	char str[P_STR_N][256];
	double slab_size[CFD_JSON_ARRAY_MAX], slab_count[CFD_JSON_ARRAY_MAX];
	int n_slab_size, n_slab_count;
};

static void json_leaf(const char *path, const struct cfd_json_val *v, void *arg)
{
	struct json_cfg *c = arg;
	for (size_t i = 0; i < sizeof(json_size) / sizeof(*json_size); i++) {
		int k = json_size[i].param;
		/* in range (NaN is not) before the conversion, below 2^64, whole */
		if (strcmp(path, json_size[i].key) || v->kind != CFD_JSON_NUMBER ||
		    !(v->num >= (double)size_min[k] && v->num <= (double)size_max[k] && v->num < 18446744073709551616.0) ||
		    v->num != (double)(size_t)v->num)
			continue;
		c->size[k] = (size_t)v->num;
		c->has_size[k] = true;
	}
	for (size_t i = 0; i < sizeof(json_bool) / sizeof(*json_bool); i++) {
		if (!strcmp(path, json_bool[i].key) && v->kind == CFD_JSON_BOOL) {
			c->b[json_bool[i].param] = v->b;
			c->has_b[json_bool[i].param] = true;
		}
	}
	for (size_t i = 0; i < sizeof(json_str) / sizeof(*json_str); i++) {
		if (!strcmp(path, json_str[i].key) && v->kind == CFD_JSON_STRING) {
			snprintf(c->str[json_str[i].param], sizeof(c->str[0]), "%s", v->str);
			c->has_str[json_str[i].param] = true;
		}
	}
	if (v->kind == CFD_JSON_ARRAY && !strcmp(path, "properties.posix_pool_slab_size_kb")) {
		memcpy(c->slab_size, v->arr, (size_t)v->n * sizeof(double));
		c->n_slab_size = v->n;
	}
	if (v->kind == CFD_JSON_ARRAY && !strcmp(path, "properties.posix_pool_slab_count")) {
		memcpy(c->slab_count, v->arr, (size_t)v->n * sizeof(double));
		c->n_slab_count = v->n;
	}
}

/* What the driver's open reads (config_load_locked): built-in defaults,
 * the file over them, the environment over the file; a value set through
 * the API is kept. */
static void json_apply_locked(void)
{
	const char *file = getenv("CUFILE_ENV_PATH_JSON");
	if (!file || !*file)
		file = "/etc/cufile.json";
	for (int k = 0; k < P_SIZE_N; k++)
		if (!size_set[k])
			size_val[k] = size_default[k];
	for (int k = 0; k < P_BOOL_N; k++)
		if (!bool_set[k])
			bool_val[k] = bool_default[k];
	for (int k = 0; k < P_STR_N; k++)
		if (!str_set[k])
			snprintf(str_val[k], sizeof(str_val[k]), "%s", str_default[k]);
	if (!posix_slabs_set)
		posix_slabs = posix_slabs_default;
	struct json_cfg *c = calloc(1, sizeof(*c));
	if (c && cfd_json_read(file, json_leaf, c) == 0) {
		for (int k = 0; k < P_SIZE_N; k++)
			if (c->has_size[k] && !size_set[k])
				size_val[k] = c->size[k];
		for (int k = 0; k < P_BOOL_N; k++)
			if (c->has_b[k] && !bool_set[k])
				bool_val[k] = c->b[k];
		for (int k = 0; k < P_STR_N; k++)
			if (c->has_str[k] && !str_set[k])
				memcpy(str_val[k], c->str[k], sizeof(str_val[k]));
		/* the POSIX pool's slabs: sizes and counts of one length */
		int n = c->n_slab_size;
		bool ok = n > 0 && n == c->n_slab_count && !posix_slabs_set;
		for (int i = 0; ok && i < n; i++)
			ok = c->slab_size[i] >= 1 && c->slab_count[i] >= 1 && c->slab_size[i] < 4294967296.0 &&
			     c->slab_count[i] < 4294967296.0;
		if (ok) {
			posix_slabs.len = n;
			for (int i = 0; i < n; i++) {
				posix_slabs.size[i] = (size_t)c->slab_size[i];
				posix_slabs.count[i] = (size_t)c->slab_count[i];
			}
		}
	}
	free(c);
	/* the environment over the file */
	static const struct {
		const char *var;
		int param;
	} env_str[] = { { "CUFILE_LOGGING_LEVEL", CUFILE_PARAM_LOGGING_LEVEL },
			{ "CUFILE_LOGFILE_PATH", CUFILE_PARAM_ENV_LOGFILE_PATH } };
	for (size_t i = 0; i < sizeof(env_str) / sizeof(*env_str); i++) {
		const char *v = getenv(env_str[i].var);
		if (v && *v && strlen(v) < sizeof(str_val[0]) && !str_set[env_str[i].param])
			snprintf(str_val[env_str[i].param], sizeof(str_val[0]), "%s", v);
	}
}

/* The values before the first open (size_preopen). */
static void defaults_locked(void)
{
	if (defaults_done)
		return;
	memcpy(size_val, size_preopen, sizeof(size_val));
	defaults_done = true;
}

/* At each open of the driver (cufile.c, under cfd_lock): cuFile reads its
 * configuration file and environment when the driver opens, so a program
 * may set CUFILE_ENV_PATH_JSON any time before cuFileDriverOpen (or the
 * first call that opens the driver), and the file is read again by a new
 * open after the last close. */
void cfd_config_load_locked(void)
{
	defaults_locked();
	json_apply_locked();
}

/* Settings the drop-in opens OpenDS with where neither the environment
 * nor the parameter API gives them (docs/cufile-dropin.md, "Performance").
 * OPENDS_IO_KWORKERS=1: one kernel thread per uring worker copies cached
 * pages, 8 copying threads with the default 8 workers. nvidia-h200-x2
 * (32 CPUs, where uring's own default is 4), hot 8 GiB in 16 MiB
 * cuFileRead calls from 8 threads, ratio to the pinned copy ceiling:
 * 0.85 at 1, 0.81 at 2, 0.79 at 3, 0.76 at 4 (tests/dropin/gpu-bench.sh
 * at 9761314; docs/cufile-dropin.md). The library keeps CPUs / workers:
 * two GPUs read at once want the extra copying threads. Given to
 * opends_driver_open_with, never put into the environment: the program's
 * threads may be reading it, and its children must not inherit ours. */
static const struct {
	const char *var, *val;
} dropin_default[] = {
	{ "OPENDS_IO_KWORKERS", "1" },
};

size_t cfd_config_settings_locked(opends_setting_t *out, char (*buf)[32])
{
	/* The values set through the API that OpenDS has a variable for:
	 * they beat the environment, as they always did. */
	static const struct {
		int param;
		const char *var;
		size_t mult;
	} map[] = {
		{ CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, "OPENDS_CHUNK_SIZE", 1024 },
		{ CUFILE_PARAM_EXECUTION_MAX_IO_THREADS, "OPENDS_IO_THREADS", 1 },
		{ CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH, "OPENDS_QUEUE_DEPTH", 1 },
	};
	_Static_assert(sizeof(map) / sizeof(*map) + sizeof(dropin_default) / sizeof(*dropin_default) <=
			       CFD_SETTINGS_MAX,
		       "CFD_SETTINGS_MAX");
	size_t n = 0;
	defaults_locked();
	for (size_t i = 0; i < sizeof(map) / sizeof(*map); i++) {
		if (!size_set[map[i].param])
			continue;
		snprintf(buf[n], sizeof(buf[n]), "%zu", size_val[map[i].param] * map[i].mult);
		out[n].name = map[i].var;
		out[n].value = buf[n];
		n++;
	}
	/* The drop-in's own defaults give way to the program's environment
	 * (an empty value counts as unset, as OpenDS reads it). */
	for (size_t i = 0; i < sizeof(dropin_default) / sizeof(*dropin_default); i++) {
		const char *cur = getenv(dropin_default[i].var);
		if (cur && *cur)
			continue;
		out[n].name = dropin_default[i].var;
		out[n].value = dropin_default[i].val;
		n++;
	}
	return n;
}

static unsigned clamp_uint(size_t v)
{
	return v > UINT_MAX ? UINT_MAX : (unsigned)v;
}

EXPORT CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *props)
{
	if (!props)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	/* inside the gate for OpenDS's answer only: cfd_lock is taken below */
	struct cfd_gate g;
	CUfileError_t e = cfd_enter(&g);
	if (e.err)
		return e;
	opends_drv_props_t p;
	opends_error_t oe = opends_driver_get_properties(&p);
	cfd_leave(&g);
	if (oe.err)
		return cfd_from_ods(oe);
	memset(props, 0, sizeof(*props));
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	/* No nvidia-fs behind this library: no direct-path storage kinds,
	 * version 0.0, compatibility mode allowed - what NVIDIA's cuFile
	 * reports in compatibility mode. */
	props->nvfs.major_version = 0;
	props->nvfs.minor_version = 0;
	props->nvfs.poll_thresh_size = size_val[CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB];
	props->nvfs.max_direct_io_size = p.max_direct_io_size / 1024;
	props->nvfs.dstatusflags = 0;
	props->nvfs.dcontrolflags = (1u << CU_FILE_ALLOW_COMPAT_MODE) |
				    (bool_val[CUFILE_PARAM_PROPERTIES_USE_POLL_MODE] ? 1u << CU_FILE_USE_POLL_MODE : 0);
	props->fflags = (1u << CU_FILE_BATCH_IO_SUPPORTED) | (1u << CU_FILE_STREAMS_SUPPORTED) |
			(1u << CU_FILE_PARALLEL_IO_SUPPORTED);
	props->max_device_cache_size = clamp_uint(size_val[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB]);
	/* 0, as NVIDIA's libcufile 1.15.1 reports it (compatibility mode,
	 * the H200, 2026-12-01) while the parameter reads the value set
	 * (cufile_stats: 2048 both ways) */
	props->per_buffer_cache_size = 0;
	props->max_device_pinned_mem_size =
		clamp_uint(size_val[CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB]);
	size_t bs = size_val[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE];
	props->max_batch_io_size = clamp_uint(bs < p.max_batch_io_size ? bs : p.max_batch_io_size);
	props->max_batch_io_timeout_msecs = clamp_uint(size_val[CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS]);
	pthread_mutex_unlock(&cfd_lock);
	return cfd_st(CU_FILE_SUCCESS, 0);
}

unsigned cfd_batch_size(void)
{
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	unsigned n = clamp_uint(size_val[CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE]);
	pthread_mutex_unlock(&cfd_lock);
	return n;
}

/* The legacy setters work whether or not the driver is open; a value with
 * an OpenDS counterpart takes effect at the next open of OpenDS. */
static CUfileError_t set_size(int param, size_t v, int out_of_range)
{
	if (v < size_min[param] || v > size_max[param])
		return cfd_st(out_of_range, 0);
	if (param == CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB && v % 4)
		return cfd_st(out_of_range, 0); /* OpenDS wants 4 KiB multiples */
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	size_val[param] = v;
	size_set[param] = true;
	if (param == CUFILE_PARAM_PROFILE_STATS) /* the switch with the level */
		cfd_stats_refresh_locked((int)v);
	pthread_mutex_unlock(&cfd_lock);
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileDriverSetPollMode(bool poll, size_t poll_threshold_size)
{
	CUfileError_t e = set_size(CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB, poll_threshold_size, CU_FILE_INVALID_VALUE);
	if (e.err)
		return e;
	pthread_mutex_lock(&cfd_lock);
	bool_val[CUFILE_PARAM_PROPERTIES_USE_POLL_MODE] = poll;
	bool_set[CUFILE_PARAM_PROPERTIES_USE_POLL_MODE] = true;
	pthread_mutex_unlock(&cfd_lock);
	return e;
}

EXPORT CUfileError_t cuFileDriverSetMaxDirectIOSize(size_t max_direct_io_size)
{
	return set_size(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, max_direct_io_size, CU_FILE_INVALID_VALUE);
}

EXPORT CUfileError_t cuFileDriverSetMaxCacheSize(size_t max_cache_size)
{
	return set_size(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB, max_cache_size,
			CU_FILE_DRIVER_UNSUPPORTED_LIMIT);
}

EXPORT CUfileError_t cuFileDriverSetMaxPinnedMemSize(size_t max_pinned_size)
{
	return set_size(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB, max_pinned_size,
			CU_FILE_DRIVER_UNSUPPORTED_LIMIT);
}

/* ---- configuration parameters (set before the driver opens) -------------- */

EXPORT CUfileError_t cuFileGetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t *value)
{
	if (!value || (unsigned)param >= P_SIZE_N)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	*value = size_val[param];
	pthread_mutex_unlock(&cfd_lock);
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileGetParameterBool(CUFileBoolConfigParameter_t param, bool *value)
{
	if (!value || (unsigned)param >= P_BOOL_N)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	*value = bool_val[param];
	pthread_mutex_unlock(&cfd_lock);
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileGetParameterString(CUFileStringConfigParameter_t param, char *desc_str, int len)
{
	if (!desc_str || len <= 0 || (unsigned)param >= P_STR_N)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	snprintf(desc_str, (size_t)len, "%s", str_val[param]);
	pthread_mutex_unlock(&cfd_lock);
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileGetParameterMinMaxValue(CUFileSizeTConfigParameter_t param, size_t *min_value,
						   size_t *max_value)
{
	if (!min_value || !max_value || (unsigned)param >= P_SIZE_N)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	*min_value = size_min[param];
	*max_value = size_max[param];
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileSetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t value)
{
	if ((unsigned)param >= P_SIZE_N)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	if (atomic_load(&cfd_is_open))
		return cfd_st(CU_FILE_DRIVER_ALREADY_OPEN, 0);
	return set_size((int)param, value, CU_FILE_INVALID_VALUE);
}

EXPORT CUfileError_t cuFileSetParameterBool(CUFileBoolConfigParameter_t param, bool value)
{
	if ((unsigned)param >= P_BOOL_N)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	if (atomic_load(&cfd_is_open))
		return cfd_st(CU_FILE_DRIVER_ALREADY_OPEN, 0);
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	bool_val[param] = value;
	bool_set[param] = true;
	pthread_mutex_unlock(&cfd_lock);
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileSetParameterString(CUFileStringConfigParameter_t param, const char *desc_str)
{
	if (!desc_str || (unsigned)param >= P_STR_N || strlen(desc_str) >= sizeof(str_val[0]))
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	if (atomic_load(&cfd_is_open))
		return cfd_st(CU_FILE_DRIVER_ALREADY_OPEN, 0);
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	snprintf(str_val[param], sizeof(str_val[param]), "%s", desc_str);
	str_set[param] = true;
	pthread_mutex_unlock(&cfd_lock);
	return cfd_st(CU_FILE_SUCCESS, 0);
}

/* ---- statistics level (stats.c keeps the statistics) -------------------- */

int cfd_config_stats_level_locked(void)
{
	defaults_locked();
	return (int)size_val[CUFILE_PARAM_PROFILE_STATS];
}

int cfd_config_stats_level(void)
{
	pthread_mutex_lock(&cfd_lock);
	int level = cfd_config_stats_level_locked();
	pthread_mutex_unlock(&cfd_lock);
	return level;
}

void cfd_config_set_stats_level(int level)
{
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	size_val[CUFILE_PARAM_PROFILE_STATS] = (size_t)level;
	size_set[CUFILE_PARAM_PROFILE_STATS] = true; /* over cufile.json at the next open */
	cfd_stats_refresh_locked(level);
	pthread_mutex_unlock(&cfd_lock);
}

/* ---- platform: topology, BAR, peer-to-peer paths ------------------------- */

/* OpenDS detects no PCIe topology: cuFile's answer when it has none. */
EXPORT CUfileError_t cuFileExportPCIeTopology(const char *filename)
{
	if (!filename || !*filename)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	CUfileError_t e = cfd_ensure_open();
	return e.err ? e : cfd_st(CU_FILE_INTERNAL_ERROR, 0);
}

/* OpenDS maps no GPU memory into a BAR: 0 KiB for every index, what
 * NVIDIA's cuFile answers in compatibility mode. Like NVIDIA's (1.15.1),
 * the call opens the driver first if it is not open. */
EXPORT CUfileError_t cuFileGetBARSizeInKB(int gpuIndex, size_t *barSize)
{
	(void)gpuIndex;
	CUfileError_t e = cfd_ensure_open();
	if (e.err)
		return e;
	if (!barSize)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	*barSize = 0;
	return cfd_st(CU_FILE_SUCCESS, 0);
}

/* OpenDS moves data through host memory only: no storage kind has a
 * peer-to-peer path, and none can be turned on. */
EXPORT CUfileError_t cuFileDriverGetP2PFlags(CUfileDriverStatusFlags_t status_flag, CUfileP2PFlags_t *p2p_flags)
{
	if (!p2p_flags)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	if (!atomic_load(&cfd_is_open))
		return cfd_st(CU_FILE_DRIVER_NOT_INITIALIZED, 0);
	if ((unsigned)status_flag >= CU_FILE_MAX_TARGET_TYPES)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	*p2p_flags = (CUfileP2PFlags_t)0;
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT CUfileError_t cuFileDriverSetP2PFlags(CUfileDriverStatusFlags_t status_flag, CUfileP2PFlags_t p2p_flags)
{
	if (!atomic_load(&cfd_is_open))
		return cfd_st(CU_FILE_DRIVER_NOT_INITIALIZED, 0);
	if ((unsigned)status_flag >= CU_FILE_MAX_TARGET_TYPES)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	return cfd_st((unsigned)p2p_flags == 0 ? CU_FILE_SUCCESS : CU_FILE_PLATFORM_NOT_SUPPORTED, 0);
}

/* ---- slab arrays (stored only: OpenDS has no such pools) ----------------- */

static CUfileError_t slabs_set(struct slabs *s, const size_t *size, const size_t *count, int len, bool gpu)
{
	if (!size || !count || len <= 0 || len > SLABS_MAX)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	for (int i = 0; i < len; i++) {
		if (!size[i] || !count[i])
			return cfd_st(CU_FILE_INVALID_VALUE, 0);
		/* GPU bounce buffers: 4 KiB multiples, ascending */
		if (gpu && (size[i] % 4 || (i && size[i] <= size[i - 1])))
			return cfd_st(CU_FILE_INVALID_VALUE, 0);
	}
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	bool open = atomic_load(&cfd_is_open);
	if (!open) {
		if (s == &posix_slabs)
			posix_slabs_set = true;
		s->len = len;
		memcpy(s->size, size, (size_t)len * sizeof(*size));
		memcpy(s->count, count, (size_t)len * sizeof(*count));
	}
	pthread_mutex_unlock(&cfd_lock);
	return cfd_st(open ? CU_FILE_DRIVER_ALREADY_OPEN : CU_FILE_SUCCESS, 0);
}

/* The buffers must be exactly as long as what was set. */
static CUfileError_t slabs_get(const struct slabs *s, size_t *size, size_t *count, int len)
{
	if (!size || !count || len <= 0)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	pthread_mutex_lock(&cfd_lock);
	defaults_locked();
	bool ok = len == s->len;
	if (ok) {
		memcpy(size, s->size, (size_t)len * sizeof(*size));
		memcpy(count, s->count, (size_t)len * sizeof(*count));
	}
	pthread_mutex_unlock(&cfd_lock);
	return cfd_st(ok ? CU_FILE_SUCCESS : CU_FILE_INVALID_VALUE, 0);
}

EXPORT CUfileError_t cuFileSetParameterPosixPoolSlabArray(const size_t *size_values, const size_t *count_values,
							   int len)
{
	return slabs_set(&posix_slabs, size_values, count_values, len, false);
}

EXPORT CUfileError_t cuFileGetParameterPosixPoolSlabArray(size_t *size_values, size_t *count_values, int len)
{
	return slabs_get(&posix_slabs, size_values, count_values, len);
}

EXPORT CUfileError_t cuFileSetParameterGpuBounceBufferSlabArray(const size_t *size_values,
								 const size_t *count_values, int len)
{
	return slabs_set(&gpu_slabs, size_values, count_values, len, true);
}

EXPORT CUfileError_t cuFileGetParameterGpuBounceBufferSlabArray(size_t *size_values, size_t *count_values, int len)
{
	return slabs_get(&gpu_slabs, size_values, count_values, len);
}
