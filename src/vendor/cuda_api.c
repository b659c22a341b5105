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

/* The minimal table (cuda_min.h) declares these with plain C types and
 * looks them up by their plain names: both must agree with cuda.h. */
_Static_assert(sizeof(CUresult) == sizeof(int) && sizeof(CUpointer_attribute) == sizeof(int), "4-byte enums");
_Static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long), "CUdeviceptr");
_Static_assert(__builtin_types_compatible_p(CUcontext, struct CUctx_st *), "CUcontext");
_Static_assert(CUDA_SUCCESS == ODS_CU_MIN_SUCCESS && CUDA_ERROR_NO_DEVICE == ODS_CU_MIN_ERROR_NO_DEVICE &&
		       CU_POINTER_ATTRIBUTE_CONTEXT == ODS_CU_MIN_POINTER_ATTRIBUTE_CONTEXT,
	       "the minimal table's constants");
#define ODS_CU_UNVERSIONED(f) _Static_assert(sizeof(ODS_STR(f)) == sizeof(#f), #f " is versioned in cuda.h");
ODS_CU_UNVERSIONED(cuInit)
ODS_CU_UNVERSIONED(cuGetErrorString)
ODS_CU_UNVERSIONED(cuDeviceGetCount)
ODS_CU_UNVERSIONED(cuCtxGetCurrent)
ODS_CU_UNVERSIONED(cuCtxSetCurrent)
ODS_CU_UNVERSIONED(cuPointerGetAttribute)
#undef ODS_CU_UNVERSIONED

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
	if ((st = ods_cu_min_load(why, why_len)) != ODS_CU_OK)
		goto out; /* libcuda.so.1 missing, or cuInit failed */
	void *lib = ods_cu_min_library();
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
	ods_cu_min_after_fork();
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
