/*
 * A libcufile.so.0 loaded at run time: the one cuFile loader of the gds
 * backend, the tools and the tests. It takes NVIDIA's cuFile or any library
 * with cuFile's ABI (OpenDS's drop-in too, which it recognises by its marker
 * symbol and reports in .dropin; each user decides whether to accept it).
 *
 * Use: include a declaration of cuFile first (OpenDS's, cufile/cufile.h in
 * this folder, which layout_check.c proves equal to NVIDIA's), then
 * ods_cufile_load(&api, path, ...) and call through the table, e.g.
 * api.cuFileRead(fh, buf, n, off, 0). Optional members are NULL where the
 * library lacks the function: check before calling.
 *
 * Not part of the public API. The library links its own hidden copy (for
 * gds); a tool or test links the static library "ods_cufile_api".
 */
#ifndef ODS_VENDOR_CUFILE_API_H
#define ODS_VENDOR_CUFILE_API_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* What every cuFile release has: a library without one of them is
 * refused. (cuFileDriverClose_v2 is looked up under its older name,
 * cuFileDriverClose, where the _v2 symbol is missing.) */
#define ODS_CUFILE_REQUIRED(X)                                                                       \
	X(cuFileDriverOpen) X(cuFileDriverClose_v2) X(cuFileDriverGetProperties) X(cuFileHandleRegister) \
	X(cuFileHandleDeregister) X(cuFileBufRegister) X(cuFileBufDeregister) X(cuFileRead) X(cuFileWrite)

/* Newer or less used entry points: NULL where the library lacks them. */
#define ODS_CUFILE_OPTIONAL(X)                                                                          \
	X(cuFileUseCount) X(cuFileGetVersion) X(cuFileDriverSetPollMode) X(cuFileDriverSetMaxDirectIOSize) \
	X(cuFileDriverSetMaxCacheSize) X(cuFileDriverSetMaxPinnedMemSize) X(cuFileGetParameterSizeT)      \
	X(cuFileGetParameterBool) X(cuFileGetParameterString) X(cuFileGetParameterMinMaxValue)            \
	X(cuFileSetParameterSizeT) X(cuFileSetParameterBool) X(cuFileSetParameterString)                  \
	X(cuFileReadv) X(cuFileWritev) X(cuFileBatchIOSetUp) X(cuFileBatchIOSubmit)                       \
	X(cuFileBatchIOGetStatus) X(cuFileBatchIOCancel) X(cuFileBatchIODestroy) X(cuFileReadAsync)       \
	X(cuFileWriteAsync) X(cuFileStreamRegister) X(cuFileStreamDeregister)

struct ods_cufile_api {
	void *lib;
	char where[PATH_MAX];  /* the file the dynamic loader picked */
	bool dropin;           /* OpenDS's drop-in (exports opends_cufile_dropin) */
	int version;           /* cuFileGetVersion's number, 0 where absent */
#define ODS_CUFILE_MEMBER(f) __typeof__(f) *f;
	ODS_CUFILE_REQUIRED(ODS_CUFILE_MEMBER)
	ODS_CUFILE_OPTIONAL(ODS_CUFILE_MEMBER)
#undef ODS_CUFILE_MEMBER
};

/* Load the library at path (a file name is searched as dlopen searches)
 * with dlopen(path, RTLD_NOW | RTLD_LOCAL | extra_flags) and fill *api.
 * 0, or -1 with why (the library is then not kept). Loading the same api
 * twice without ods_cufile_unload leaks the first handle. */
int ods_cufile_load(struct ods_cufile_api *api, const char *path, int extra_flags, char *why, size_t n);

/* dlclose and clear. */
void ods_cufile_unload(struct ods_cufile_api *api);

#endif
