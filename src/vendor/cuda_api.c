/* The CUDA driver API loader (cuda_api.h). */
#include "cuda_api.h"

#include <dlfcn.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct ods_cuda_api ods_cu;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static bool loaded; /* ods_cu is complete and cuInit succeeded */

#define ODS_STR_(x) #x
#define ODS_STR(x) ODS_STR_(x) /* the versioned name cuda.h maps f to */

static void say(char *why, size_t n, const char *fmt, const char *a)
{
	if (why && n)
		snprintf(why, n, fmt, a);
}

enum ods_cu_status ods_cu_load(char *why, size_t why_len)
{
	pthread_mutex_lock(&load_lock);
	enum ods_cu_status st = ODS_CU_OK;
	if (loaded)
		goto out;
	/* kept open for the life of the process: a second dlopen of the same
	 * library only takes a reference, and the driver is not made to be
	 * unloaded under live contexts */
	static void *lib;
	if (!lib && !(lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) {
		say(why, why_len, "libcuda.so.1 not found (%s)", dlerror());
		st = ODS_CU_NO_DRIVER;
		goto out;
	}
	struct ods_cuda_api api;
	memset(&api, 0, sizeof(api));
#define REQ(f)                                                                                        \
	if (!(api.f = (__typeof__(api.f))dlsym(lib, ODS_STR(f)))) {                                   \
		say(why, why_len, "libcuda.so.1 has no %s (driver too old)", ODS_STR(f));             \
		st = ODS_CU_TOO_OLD;                                                                  \
		goto out;                                                                             \
	}
	ODS_CU_REQUIRED(REQ)
#undef REQ
#define OPT(f) api.f = (__typeof__(api.f))dlsym(lib, ODS_STR(f));
	ODS_CU_OPTIONAL(OPT)
#undef OPT
	CUresult r = api.cuInit(0);
	if (r != CUDA_SUCCESS) {
		const char *s = NULL;
		api.cuGetErrorString(r, &s);
		say(why, why_len, "cuInit failed: %s", s ? s : "unknown error");
		st = r == CUDA_ERROR_NO_DEVICE ? ODS_CU_NO_DEVICE : ODS_CU_INIT_FAILED;
		goto out;
	}
	ods_cu = api;
	loaded = true;
out:
	pthread_mutex_unlock(&load_lock);
	return st;
}

void ods_cu_after_fork(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	load_lock = fresh;
}

const char *ods_cu_missing(const char *const *names)
{
	static const struct {
		const char *name;
		size_t off;
	} opt[] = {
#define ENTRY(f) { #f, offsetof(struct ods_cuda_api, f) },
		ODS_CU_OPTIONAL(ENTRY)
#undef ENTRY
	};
	for (; names && *names; names++) {
		if (!loaded)
			return *names; /* nothing is there before a load */
		for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
			if (!strcmp(opt[i].name, *names) && !*(void **)((char *)&ods_cu + opt[i].off))
				return *names;
	}
	return NULL;
}

const char *ods_cu_errstr(CUresult r)
{
	const char *s = NULL;
	if (ods_cu.cuGetErrorString)
		ods_cu.cuGetErrorString(r, &s);
	return s ? s : "unknown CUDA error";
}
