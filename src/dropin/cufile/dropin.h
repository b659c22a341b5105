/*
 * What the drop-in's files share (cufile.c: driver, handles, I/O, batches,
 * streams; config.c: properties, parameters, statistics and the platform
 * queries). Nothing here is exported: libcufile.map exports cuFile* only.
 */
#ifndef ODS_DROPIN_H
#define ODS_DROPIN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gate.h"
#include "opends.h"

#define ODS_CUFILE_NO_CUDA_H
#include "cufile.h"

#define EXPORT __attribute__((visibility("default")))

/* Guards the driver's open state and the configuration. */
extern pthread_mutex_t cfd_lock;
/* OpenDS is open (by the drop-in or by the program). */
extern atomic_bool cfd_is_open;

static inline CUfileError_t cfd_st(int code, int cu)
{
	CUfileError_t e = { (CUfileOpError)code, (CUresult)cu };
	return e;
}

static inline CUfileError_t cfd_from_ods(opends_error_t e)
{
	return cfd_st((int)e.err, e.err == OPENDS_DEVICE_DRIVER_ERROR ? e.backend_err : 0);
}

/* Open OpenDS if it is not (cuFile opens itself on first use). For calls
 * that do not call into OpenDS afterwards. */
CUfileError_t cfd_ensure_open(void);

/* A call into OpenDS, counted so that cuFileDriverClose waits for it
 * (cufile.c, "calls in progress"): cfd_enter opens the driver if needed
 * and enters; cfd_leave leaves (nothing if not entered). Never take
 * cfd_lock, or enter again, while inside: the close holds cfd_lock while
 * it waits for the calls inside, and a second enter may need it. */
struct cfd_gate {
	struct ods_gate_pass pass;
};
CUfileError_t cfd_enter(struct cfd_gate *g);
void cfd_leave(struct cfd_gate *g);
/* A gate left when the declaring block ends, however it returns. */
#define CFD_GATE(g) struct cfd_gate g __attribute__((cleanup(cfd_leave))) = { { NULL } }
/* Enter for the rest of the calling block; e is cfd_enter's result. */
#define CFD_ENTER(e) \
	CFD_GATE(cfd_gate_); \
	CUfileError_t e = cfd_enter(&cfd_gate_)

/* sets.c: a set of pointers (hash set; NULL is never a member). The count
 * is read without the lock: a look-up in an empty set is one load. */
struct pset {
	pthread_mutex_t m;
	void **v;
	size_t n, cap;
	atomic_size_t count;
};
#define PSET_INIT { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 }
bool pset_add(struct pset *s, void *p); /* false: out of memory */
bool pset_del(struct pset *s, void *p); /* false: not a member */
bool pset_has(struct pset *s, void *p);
void pset_clear(struct pset *s);
void pset_clear_locked(struct pset *s); /* s->m held (fork) */

/* cufile.c: handles opened write-only / read-only (the access mode NVIDIA
 * checks when a stream or batch operation is enqueued, where OpenDS
 * reports it when the operation runs), and whether a handle is one of an
 * O_PATH fd (cuFileHandleRegister). */
extern struct pset cfd_wronly, cfd_rdonly;
bool cfd_is_path_handle(CUfileHandle_t fh);

/* async.c: batches cancelled, streams registered; emptied by the last
 * cuFileDriverClose (cfd_async_forget) and in a forked child. */
extern struct pset cfd_cancelled, cfd_streams;
void cfd_async_forget(void);

/* config.c: the settings to open OpenDS with (opends_driver_open_with):
 * the values set through the API that it has a variable for, and the
 * drop-in's own defaults where the environment gives none. Writes at most
 * CFD_SETTINGS_MAX entries to out, their values into buf; returns how
 * many. Under cfd_lock. */
#define CFD_SETTINGS_MAX 8
size_t cfd_config_settings_locked(opends_setting_t *out, char (*buf)[32]);

/* config.c: read cuFile's configuration (cufile.json, CUFILE_* variables)
 * as the driver opens, keeping the values set through the API. Under
 * cfd_lock. */
void cfd_config_load_locked(void);

/* config.c: the batch size cuFileDriverGetProperties reports as
 * max_batch_io_size before OpenDS's own limit is applied (the
 * PROPERTIES_IO_BATCHSIZE parameter, 128 unless set): the most entries
 * cuFileBatchIOSetUp accepts. */
unsigned cfd_batch_size(void);

/* config.c: the statistics level (cuFile's PROFILE_STATS parameter:
 * cuFileSetStatsLevel, cuFileSetParameterSizeT or cufile.json). */
int cfd_config_stats_level(void);
int cfd_config_stats_level_locked(void); /* under cfd_lock */
/* Sets the level and the statistics' switch to match, under cfd_lock. */
void cfd_config_set_stats_level(int level);

/* stats.c: cuFile's statistics. The calls count only while
 * cfd_stats_active (one relaxed load when off); an I/O call takes
 * cfd_stats_t0() before and hands it to cfd_stats_io after. */
enum cfd_stat_op {
	CFD_ST_READ,
	CFD_ST_WRITE,
	CFD_ST_READV,
	CFD_ST_WRITEV,
	CFD_ST_HDL_REG,
	CFD_ST_HDL_DEREG,
	CFD_ST_BUF_REG,
	CFD_ST_BUF_DEREG,
	CFD_ST_BATCH_SETUP,
	CFD_ST_BATCH_SUBMIT,
	CFD_ST_BATCH_COMPLETE,
	CFD_ST_BATCH_CANCEL,
	CFD_ST_BATCH_DESTROY,
	CFD_ST_N
};
extern atomic_bool cfd_stats_active;
static inline bool cfd_stats_on(void)
{
	return atomic_load_explicit(&cfd_stats_active, memory_order_relaxed);
}
uint64_t cfd_stats_t0(void);
void cfd_stats_op(enum cfd_stat_op op, bool ok);
void cfd_stats_io(enum cfd_stat_op op, ssize_t r, size_t size, uint64_t t0);
void cfd_stats_submit(unsigned nr, const CUfileIOParams_t *p, bool ok, uint64_t t0);
void cfd_stats_events(const CUfileIOEvents_t *ev, unsigned n);
/* The level is now level (it was set, or the driver opened with it):
 * counting runs from here if it is 1 or more and not stopped. Under
 * cfd_lock, with the change of the level it follows. */
void cfd_stats_refresh_locked(int level);

/* json.c: read cuFile's configuration file, handing each leaf to fn with
 * its dotted path ("properties.io_batchsize"); arrays only when all their
 * items are numbers (at most CFD_JSON_ARRAY_MAX). Returns 0, or -1 when
 * the file cannot be read or is not JSON (comments allowed): config.c
 * then applies none of it. */
#define CFD_JSON_ARRAY_MAX 64
struct cfd_json_val {
	enum { CFD_JSON_NUMBER, CFD_JSON_BOOL, CFD_JSON_STRING, CFD_JSON_ARRAY } kind;
	double num;
	bool b;
	const char *str;
	double arr[CFD_JSON_ARRAY_MAX];
	int n;
};
typedef void (*cfd_json_fn)(const char *path, const struct cfd_json_val *v, void *arg);
int cfd_json_read(const char *file, cfd_json_fn fn, void *arg);

#endif
