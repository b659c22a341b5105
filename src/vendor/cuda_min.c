/* The CUDA driver's minimal mode (cuda_min.h): opens libcuda.so.1 for
 * both loaders. Needs no cuda.h. */
#include "cuda_min.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct ods_cuda_min ods_cu_min;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static bool loaded; /* ods_cu_min is complete and cuInit succeeded */
static void *lib;

static void say(char *why, size_t n, const char *fmt, const char *a)
{
	if (why && n)
		snprintf(why, n, fmt, a);
}

enum ods_cu_status ods_cu_min_load(char *why, size_t why_len)
{
	pthread_mutex_lock(&load_lock);
	enum ods_cu_status st = ODS_CU_OK;
	if (loaded)
		goto out;
	if (!lib && !(lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) {
		say(why, why_len, "libcuda.so.1 not found (%s)", dlerror());
		st = ODS_CU_NO_DRIVER;
		goto out;
	}
	struct ods_cuda_min t;
#define SYM(f)                                                                                    \
	if (!(*(void **)&t.f = dlsym(lib, #f))) {                                                 \
		say(why, why_len, "libcuda.so.1 has no %s (driver too old)", #f);                 \
		st = ODS_CU_TOO_OLD;                                                              \
		goto out;                                                                         \
	}
	SYM(cuInit) SYM(cuGetErrorString) SYM(cuDeviceGetCount) SYM(cuCtxGetCurrent) SYM(cuCtxSetCurrent)
	SYM(cuPointerGetAttribute)
#undef SYM
	int r = t.cuInit(0);
	if (r != ODS_CU_MIN_SUCCESS) {
		const char *s = NULL;
		t.cuGetErrorString(r, &s);
		char msg[160];
		snprintf(msg, sizeof(msg), "%s (CUresult %d)", s ? s : "unknown error", r);
		say(why, why_len, "cuInit failed: %s", msg);
		st = r == ODS_CU_MIN_ERROR_NO_DEVICE ? ODS_CU_NO_DEVICE : ODS_CU_INIT_FAILED;
		goto out;
	}
	ods_cu_min = t;
	loaded = true;
out:
	pthread_mutex_unlock(&load_lock);
	return st;
}

void *ods_cu_min_library(void)
{
	pthread_mutex_lock(&load_lock);
	void *l = loaded ? lib : NULL;
	pthread_mutex_unlock(&load_lock);
	return l;
}

void ods_cu_min_after_fork(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	load_lock = fresh;
}
