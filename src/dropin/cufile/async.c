/*
 * The drop-in's batch and stream-ordered calls (cuFileBatchIO*,
 * cuFileReadAsync / WriteAsync, cuFileStreamRegister / Deregister) on
 * OpenDS's opends_batch_* and opends_stream_*. Where NVIDIA's libcufile
 * answers misuse differently from OpenDS's contract, NVIDIA's answer is
 * given (measured with the shaped programs of tests/dropin/prebuilt on the
 * H200, libcufile 1.15.1, main 1e4557c, 2026-12-01: the logs are in
 * bench/results/2026-12-01-h200-62972db/raw/compare-1e4557c/), so that a
 * program written and tested against NVIDIA's library behaves the same on
 * this one; docs/cufile-dropin.md lists each and the few kept on purpose.
 */
#include <stdlib.h>
#include <string.h>

#include "dropin.h"

struct pset cfd_cancelled = PSET_INIT, cfd_streams = PSET_INIT;

/* The last cuFileDriverClose: OpenDS forgets its batches and stream
 * registrations, so does the drop-in. */
void cfd_async_forget(void)
{
	pset_clear(&cfd_cancelled);
	pset_clear(&cfd_streams);
}

/* ---- batch -------------------------------------------------------------- */

EXPORT CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *batch_idp, unsigned nr)
{
	if (!batch_idp)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	/* no more than the max_batch_io_size reported: cuFile's io_batchsize
	 * (128 unless set) may be below OpenDS's own limit, which
	 * opends_batch_setup applies. Read once the driver is open (the
	 * configuration is read by the open), before entering the gate
	 * (cfd_batch_size takes cfd_lock). */
	CUfileError_t oe0 = cfd_ensure_open();
	if (oe0.err)
		return oe0;
	if (nr > cfd_batch_size())
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	CFD_ENTER(e);
	if (e.err)
		return e;
	opends_batch_t b = NULL;
	opends_error_t oe = opends_batch_setup(&b, nr);
	if (cfd_stats_on())
		cfd_stats_op(CFD_ST_BATCH_SETUP, !oe.err);
	if (oe.err)
		return cfd_from_ods(oe);
	*batch_idp = (CUfileBatchHandle_t)b;
	return cfd_st(CU_FILE_SUCCESS, 0);
}

/* The entries NVIDIA refuses at the submit that OpenDS would accept and
 * fail in their events, or refuse with another code: a negative file
 * offset, an opcode other than read and write, a read through a
 * write-only handle, a write through a read-only one (each
 * INTERNAL_BATCH_SUBMIT_ERROR, the whole submit: nothing is queued;
 * NVIDIA 1.15.1 on the H200, 2026-12-01). */
static bool entries_refused(unsigned nr, const CUfileIOParams_t *p)
{
	bool wronly = atomic_load_explicit(&cfd_wronly.count, memory_order_relaxed) != 0;
	bool rdonly = atomic_load_explicit(&cfd_rdonly.count, memory_order_relaxed) != 0;
	for (unsigned i = 0; i < nr; i++) {
		if (p[i].opcode != CUFILE_READ && p[i].opcode != CUFILE_WRITE)
			return true;
		if (p[i].u.batch.file_offset < 0)
			return true;
		if (wronly && p[i].opcode == CUFILE_READ && pset_has(&cfd_wronly, p[i].fh))
			return true;
		if (rdonly && p[i].opcode == CUFILE_WRITE && pset_has(&cfd_rdonly, p[i].fh))
			return true;
	}
	return false;
}

EXPORT CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch_idp, unsigned nr, CUfileIOParams_t *iocbp,
					 unsigned int flags)
{
	/* flags: cuFile's are reserved; NVIDIA 1.15.1 takes flags 1 and runs
	 * the entries, so none is refused here (OpenDS has none) */
	(void)flags;
	CFD_ENTER(e);
	if (e.err)
		return e;
	uint64_t t0 = cfd_stats_on() ? cfd_stats_t0() : 0;
	/* NVIDIA answers every submit it refuses with INTERNAL_BATCH_SUBMIT_ERROR
	 * (5040): 0 entries, more than set up, the entries above */
	if (!iocbp || nr == 0 || entries_refused(nr, iocbp)) {
		if (t0)
			cfd_stats_submit(nr, iocbp, false, t0);
		return cfd_st(CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR, 0);
	}
	opends_io_params_t small[16];
	opends_io_params_t *p = nr <= 16 ? small : malloc(nr * sizeof(*p));
	if (!p)
		return cfd_st(CU_FILE_NOMEM_ERROR, 0);
	for (unsigned i = 0; i < nr; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].mode = (opends_batch_mode_t)iocbp[i].mode;
		p[i].u.batch.buf_base = iocbp[i].u.batch.devPtr_base;
		p[i].u.batch.file_offset = iocbp[i].u.batch.file_offset;
		p[i].u.batch.buf_offset = iocbp[i].u.batch.devPtr_offset;
		p[i].u.batch.size = iocbp[i].u.batch.size;
		p[i].fh = (opends_handle_t)iocbp[i].fh;
		p[i].opcode = (opends_opcode_t)iocbp[i].opcode;
		p[i].cookie = iocbp[i].cookie;
	}
	opends_error_t oe = opends_batch_submit((opends_batch_t)batch_idp, nr, p, 0);
	if (p != small)
		free(p);
	if (t0)
		cfd_stats_submit(nr, iocbp, !oe.err, t0);
	if (!oe.err) /* new work is reported again (a refused submit changes nothing) */
		pset_del(&cfd_cancelled, batch_idp);
	if (oe.err == OPENDS_BATCH_FULL) /* NVIDIA 1.15.1: more entries than set up */
		return cfd_st(CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR, 0);
	return cfd_from_ods(oe);
}

EXPORT CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch_idp, unsigned min_nr, unsigned *nr,
					    CUfileIOEvents_t *iocbp, struct timespec *timeout)
{
	CFD_ENTER(e);
	if (e.err)
		return e;
	/* min_nr above the room given: NVIDIA 1.15.1 refuses the call (no
	 * events taken; the entries stay in flight for the next call) */
	if (!nr || min_nr > *nr)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	if (pset_has(&cfd_cancelled, batch_idp)) {
		/* cancelled: NVIDIA's cuFile reports no events */
		*nr = 0;
		return cfd_st(CU_FILE_SUCCESS, 0);
	}
	unsigned room = *nr;
	opends_io_events_t small[16];
	opends_io_events_t *ev = NULL;
	if (room && iocbp) {
		ev = room <= 16 ? small : malloc(room * sizeof(*ev));
		if (!ev)
			return cfd_st(CU_FILE_NOMEM_ERROR, 0);
	}
	opends_error_t oe = opends_batch_get_status((opends_batch_t)batch_idp, min_nr, nr, ev, timeout);
	if (oe.err == OPENDS_SUCCESS && ev) {
		for (unsigned i = 0; i < *nr && i < room; i++) {
			iocbp[i].cookie = ev[i].cookie;
			iocbp[i].status = (CUfileStatus_t)ev[i].status;
			iocbp[i].ret = (size_t)ev[i].ret; /* negative errors wrap, as in cuFile */
		}
		if (cfd_stats_on())
			cfd_stats_events(iocbp, *nr < room ? *nr : room);
	}
	if (ev && ev != small)
		free(ev);
	return cfd_from_ods(oe);
}

EXPORT CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t batch_idp)
{
	CFD_ENTER(e);
	if (e.err)
		return e;
	CUfileError_t r = cfd_from_ods(opends_batch_cancel((opends_batch_t)batch_idp));
	if (cfd_stats_on())
		cfd_stats_op(CFD_ST_BATCH_CANCEL, !r.err);
	if (r.err == CU_FILE_SUCCESS) {
		/* NVIDIA delivers no events after a cancel; OpenDS keeps one per
		 * entry (CANCELED, or COMPLETE for those that had run) and they
		 * would hold the batch's room and come back after the next
		 * submit, mixed with its own. Nothing of the batch runs once
		 * opends_batch_cancel returns, so they are all there to take
		 * now: the batch is empty, and reusable at once. */
		opends_io_events_t ev[64];
		struct timespec now = { 0, 0 };
		unsigned n;
		do {
			n = 64;
			if (opends_batch_get_status((opends_batch_t)batch_idp, 0, &n, ev, &now).err)
				break;
		} while (n > 0);
	}
	if (r.err == CU_FILE_SUCCESS && !pset_add(&cfd_cancelled, batch_idp))
		return cfd_st(CU_FILE_NOMEM_ERROR, 0);
	return r;
}

EXPORT void cuFileBatchIODestroy(CUfileBatchHandle_t batch_idp)
{
	pset_del(&cfd_cancelled, batch_idp);
	CFD_GATE(g);
	if (ods_gate_enter(&g.pass) == 0) {
		opends_error_t oe = opends_batch_destroy((opends_batch_t)batch_idp);
		if (cfd_stats_on())
			cfd_stats_op(CFD_ST_BATCH_DESTROY, !oe.err);
	}
}

/* ---- stream-ordered I/O ------------------------------------------------- */

EXPORT CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p, off_t *file_offset_p,
				     off_t *bufPtr_offset_p, ssize_t *bytes_read_p, CUstream stream)
{
	CFD_ENTER(e);
	if (e.err)
		return e;
	if (bytes_read_p && size_p && file_offset_p && bufPtr_offset_p && bufPtr_base && pset_has(&cfd_wronly, fh)) {
		/* NVIDIA accepts the enqueue and the read fails with "unsupported
		 * file open flags" in *bytes_read_p; written now, not when the
		 * stream gets there (docs/cufile-dropin.md, "Misuse") */
		*bytes_read_p = -(ssize_t)CU_FILE_INVALID_FILE_OPEN_FLAG;
		return cfd_st(CU_FILE_SUCCESS, 0);
	}
	return cfd_from_ods(opends_stream_read((opends_handle_t)fh, bufPtr_base, size_p, file_offset_p, bufPtr_offset_p,
					   bytes_read_p, (opends_stream_t)stream));
}

EXPORT CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p, off_t *file_offset_p,
				      off_t *bufPtr_offset_p, ssize_t *bytes_written_p, CUstream stream)
{
	CFD_ENTER(e);
	if (e.err)
		return e;
	if (bytes_written_p && size_p && file_offset_p && bufPtr_offset_p && bufPtr_base && pset_has(&cfd_rdonly, fh)) {
		/* NVIDIA 1.15.1 accepts the enqueue and its result is -1 (its
		 * POSIX write's return: EBADF), not OpenDS's -EBADF; written
		 * now, as the read above */
		*bytes_written_p = -1;
		return cfd_st(CU_FILE_SUCCESS, 0);
	}
	return cfd_from_ods(opends_stream_write((opends_handle_t)fh, bufPtr_base, size_p, file_offset_p,
					    bufPtr_offset_p, bytes_written_p, (opends_stream_t)stream));
}

/* cuFile's stream flags; NVIDIA 1.15.1 accepts other bits (flags 16: 0)
 * and so does the drop-in, giving OpenDS the four it knows. */
#define STREAM_FLAGS_KNOWN                                                                      \
	(CU_FILE_STREAM_FIXED_BUF_OFFSET | CU_FILE_STREAM_FIXED_FILE_OFFSET | CU_FILE_STREAM_FIXED_FILE_SIZE | \
	 CU_FILE_STREAM_PAGE_ALIGNED_INPUTS)

EXPORT CUfileError_t cuFileStreamRegister(CUstream stream, unsigned flags)
{
	CFD_ENTER(e);
	if (e.err)
		return e;
	/* registered already: NVIDIA 1.15.1 answers INVALID_VALUE where
	 * OpenDS would replace the flags */
	if (pset_has(&cfd_streams, stream))
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	opends_error_t oe = opends_stream_register((opends_stream_t)stream, flags & STREAM_FLAGS_KNOWN);
	if (!oe.err && !pset_add(&cfd_streams, stream)) {
		(void)opends_stream_deregister((opends_stream_t)stream);
		return cfd_st(CU_FILE_NOMEM_ERROR, 0);
	}
	return cfd_from_ods(oe);
}

EXPORT CUfileError_t cuFileStreamDeregister(CUstream stream)
{
	CFD_ENTER(e);
	if (e.err)
		return e;
	opends_error_t oe = opends_stream_deregister((opends_stream_t)stream);
	pset_del(&cfd_streams, stream);
	return cfd_from_ods(oe);
}
