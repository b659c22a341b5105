/*
 * The cuFile loader (cufile_api.h): dlopen and one dlsym per entry point.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define ODS_CUFILE_NO_CUDA_H
#include "cufile/cufile.h"
#include "cufile_api.h"

#ifdef cuFileDriverClose
#undef cuFileDriverClose
#endif

int ods_cufile_load(struct ods_cufile_api *api, const char *path, int extra_flags, char *why, size_t n)
{
	memset(api, 0, sizeof(*api));
	dlerror();
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | extra_flags);
	if (!lib) {
		const char *e = dlerror();
		snprintf(why, n, "cannot load %s (%s)", path, e ? e : "unknown error");
		return -1;
	}
	const char *missing = NULL;
#define ODS_CUFILE_REQ(f)                                   \
	do {                                                \
		*(void **)&api->f = dlsym(lib, #f);         \
		if (!api->f && !missing)                    \
			missing = #f;                       \
	} while (0);
#define ODS_CUFILE_OPT(f) *(void **)&api->f = dlsym(lib, #f);
	ODS_CUFILE_OPTIONAL(ODS_CUFILE_OPT)
	*(void **)&api->cuFileDriverClose_v2 = dlsym(lib, "cuFileDriverClose_v2");
	if (!api->cuFileDriverClose_v2)
		*(void **)&api->cuFileDriverClose_v2 = dlsym(lib, "cuFileDriverClose");
	ODS_CUFILE_REQUIRED(ODS_CUFILE_REQ)
#undef ODS_CUFILE_REQ
#undef ODS_CUFILE_OPT

	Dl_info info;
	if (api->cuFileDriverOpen && dladdr((void *)api->cuFileDriverOpen, &info) && info.dli_fname)
		snprintf(api->where, sizeof(api->where), "%s", info.dli_fname);
	else
		snprintf(api->where, sizeof(api->where), "%s", path);
	if (missing) {
		snprintf(why, n, "%s has no %s; it is not a usable libcufile.so.0", api->where, missing);
		dlclose(lib);
		memset(api, 0, sizeof(*api));
		return -1;
	}
	api->lib = lib;
	api->dropin = dlsym(lib, "opends_cufile_dropin") != NULL;
	if (api->cuFileGetVersion)
		api->cuFileGetVersion(&api->version);
	return 0;
}

void ods_cufile_unload(struct ods_cufile_api *api)
{
	if (api->lib)
		dlclose(api->lib);
	memset(api, 0, sizeof(*api));
}
