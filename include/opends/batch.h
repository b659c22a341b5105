/*
 * OpenDS public API: batch I/O.
 * Part of <opends.h>: include that (it includes every family), not this
 * file. The conventions at the top of opends.h (errors, threads, fork,
 * accelerator contexts) hold here.
 */
#ifndef OPENDS_BATCH_H
#define OPENDS_BATCH_H

#include "handles.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Batch I/O (cuFileBatchIO*)                                               */
/* ------------------------------------------------------------------------ */

typedef struct opends_batch *opends_batch_t;

typedef enum opends_opcode { OPENDS_READ = 0, OPENDS_WRITE = 1 } opends_opcode_t;
typedef enum opends_batch_mode { OPENDS_BATCH = 1 } opends_batch_mode_t;
typedef enum opends_status {
	OPENDS_WAITING = 0x1,
	OPENDS_PENDING = 0x2,
	OPENDS_INVALID = 0x4,
	OPENDS_CANCELED = 0x8,
	OPENDS_COMPLETE = 0x10,
	OPENDS_TIMEOUT = 0x20,
	OPENDS_FAILED = 0x40,
} opends_status_t;

typedef struct opends_io_params {
	opends_batch_mode_t mode; /* OPENDS_BATCH */
	union {
		struct {
			void *buf_base;
			off_t file_offset;
			off_t buf_offset;
			size_t size;
		} batch;
	} u;
	opends_handle_t fh;
	opends_opcode_t opcode;
	void *cookie;
} opends_io_params_t;

typedef struct opends_io_events {
	void *cookie;
	opends_status_t status;
	ssize_t ret; /* bytes moved, or a negated error for OPENDS_FAILED */
} opends_io_events_t;

/* A batch able to hold max_nr entries in flight (1..max_batch_io_size).
 * Errors: OPENDS_INVALID_VALUE (batch NULL, max_nr out of range),
 * OPENDS_NOMEM_ERROR, OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_batch_setup(opends_batch_t *batch, unsigned max_nr);

/*
 * Submit nr entries; all or nothing. Entries of one submit run in no
 * particular order. flags must be 0.
 * Errors: OPENDS_INVALID_VALUE (NULL, unknown batch, nr 0, flags, an entry
 * with a bad mode, opcode, NULL buffer, negative offsets, size >
 * SSIZE_MAX; the detail names the entry), OPENDS_HANDLE_NOT_REGISTERED,
 * OPENDS_INVALID_MAPPING_RANGE, OPENDS_BATCH_FULL (entries in flight plus
 * nr would exceed max_nr), OPENDS_CONTEXT_MISMATCH,
 * OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_batch_submit(opends_batch_t batch, unsigned nr, opends_io_params_t *params,
					      unsigned flags);

/*
 * Collect completions. *nr is the room in events on entry and the number
 * delivered on return; each completion is delivered once. Waits until at
 * least min_nr (capped at *nr and at the entries still undelivered) are
 * ready; with a timeout, returns whatever is ready when it expires (a
 * timeout too large for the clock, e.g. {INT64_MAX, 999999999}, waits as
 * no timeout does). Any number of threads may submit to and collect from
 * one batch at once; a submit that does not fit fails whole with
 * OPENDS_BATCH_FULL, never partly.
 * Status: OPENDS_COMPLETE with ret = bytes (short at EOF included),
 * OPENDS_FAILED with ret = negated error, OPENDS_CANCELED.
 * Errors: OPENDS_INVALID_VALUE (NULL batch/nr/events with *nr > 0, unknown
 * batch, negative or invalid timeout), OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_batch_get_status(opends_batch_t batch, unsigned min_nr, unsigned *nr,
						  opends_io_events_t *events, struct timespec *timeout);

/* Cancel entries that have not started; those running finish. Cancelled
 * entries are delivered as OPENDS_CANCELED. Returns once nothing of the
 * batch is running.
 * Errors: OPENDS_INVALID_VALUE (not a batch made by opends_batch_setup),
 * OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_batch_cancel(opends_batch_t batch);

/* Wait for entries still in flight and free the batch.
 * Errors: OPENDS_INVALID_VALUE (not a batch made by opends_batch_setup),
 * OPENDS_DRIVER_NOT_INITIALIZED. */
OPENDS_API opends_error_t opends_batch_destroy(opends_batch_t batch);

#ifdef __cplusplus
}
#endif

#endif /* OPENDS_BATCH_H */
