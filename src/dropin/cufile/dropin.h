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

/* config.c: the settings to open OpenDS with (opends_driver_open_with):
 * the values set through the API that it has a variable for, and the
 * drop-in's own defaults where the environment gives none. Writes at most
 * CFD_SETTINGS_MAX entries to out, their values into buf; returns how
 * many. Under cfd_lock. */
#define CFD_SETTINGS_MAX 8
size_t cfd_config_settings_locked(opends_setting_t *out, char (*buf)[32]);

/* config.c: the batch size cuFileDriverGetProperties reports as
 * max_batch_io_size before OpenDS's own limit is applied (the
 * PROPERTIES_IO_BATCHSIZE parameter, 128 unless set): the most entries
 * cuFileBatchIOSetUp accepts. */
unsigned cfd_batch_size(void);

#endif
