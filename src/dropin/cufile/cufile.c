/*
 * The OpenDS cuFile drop-in: a libcufile.so.0 whose cuFile* functions are
 * implemented on OpenDS's public API (include/opends.h), so that programs
 * written and built for NVIDIA's cuFile run on any OpenDS backend, with or
 * without a GPU. Layouts, status codes and calling conventions are cuFile's
 * (see src/vendor/cufile/cufile.h and cufile_layout.h); docs/cufile-dropin.md lists
 * what is provided and how each call maps.
 *
 * Conventions kept:
 * - control calls return CUfileError_t; OpenDS's codes have cuFile's
 *   numbers, so .err is the OpenDS code and .cu_err the CUresult behind an
 *   OPENDS_DEVICE_DRIVER_ERROR;
 * - cuFileRead/Write return bytes, -1 with errno set for an error of the
 *   operating system, or a negated CUfileOpError for the library's own;
 * - the driver opens implicitly on the first call that needs it, and
 *   cuFileDriverOpen/Close count uses.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dropin.h"
#include "cufile_layout.h"

ODS_CUFILE_LAYOUT_CHECKS();
ODS_CUFILE_PROTO_CHECKS();

/* OpenDS's I/O structures are cuFile's, field for field; the batch calls
 * still convert entry by entry rather than rely on it. */
_Static_assert((int)OPENDS_READ == (int)CUFILE_READ && (int)OPENDS_WRITE == (int)CUFILE_WRITE, "opcodes");
_Static_assert((int)OPENDS_BATCH == (int)CUFILE_BATCH, "batch mode");
_Static_assert((int)OPENDS_COMPLETE == (int)CUFILE_COMPLETE && (int)OPENDS_FAILED == (int)CUFILE_FAILED &&
		       (int)OPENDS_CANCELED == (int)CUFILE_CANCELED && (int)OPENDS_WAITING == (int)CUFILE_WAITING &&
		       (int)OPENDS_PENDING == (int)CUFILE_PENDING && (int)OPENDS_INVALID == (int)CUFILE_INVALID &&
		       (int)OPENDS_TIMEOUT == (int)CUFILE_TIMEOUT,
	       "status bits");
_Static_assert((int)OPENDS_INVALID_VALUE == (int)CU_FILE_INVALID_VALUE &&
		       (int)OPENDS_DEVICE_DRIVER_ERROR == (int)CU_FILE_CUDA_DRIVER_ERROR &&
		       (int)OPENDS_INVALID_CONTEXT_ERROR == (int)CU_FILE_INVALID_CONTEXT_ERROR &&
		       (int)OPENDS_MEMORY_PINNING_FAILED == (int)CU_FILE_GPU_MEMORY_PINNING_FAILED &&
		       (int)OPENDS_FS_DRIVER_ERROR == (int)CU_FILE_NVFS_DRIVER_ERROR,
	       "status codes");
_Static_assert(OPENDS_STREAM_FIXED_BUF_OFFSET == CU_FILE_STREAM_FIXED_BUF_OFFSET &&
		       OPENDS_STREAM_FIXED_FILE_OFFSET == CU_FILE_STREAM_FIXED_FILE_OFFSET &&
		       OPENDS_STREAM_FIXED_FILE_SIZE == CU_FILE_STREAM_FIXED_FILE_SIZE &&
		       OPENDS_STREAM_PAGE_ALIGNED_INPUTS == CU_FILE_STREAM_PAGE_ALIGNED_INPUTS,
	       "stream flags");
_Static_assert(sizeof(opends_handle_t) == sizeof(CUfileHandle_t), "handles are pointers");
_Static_assert(sizeof(opends_batch_t) == sizeof(CUfileBatchHandle_t), "batches are pointers");

/* The marker the gds backend looks for (dlsym) so that it never loads this
 * library in place of NVIDIA's. */
EXPORT const char opends_cufile_dropin[] = "OpenDS cuFile drop-in " ODS_CUFILE_DROPIN_VERSION;

/* The cuFile API level this library mirrors, in cuFileGetVersion's packing
 * (1000 * major + 10 * minor): 1.20, whose cufile.h declares exactly the
 * functions exported here. */
#define MIRRORED_CUFILE_VERSION 1200

pthread_mutex_t cfd_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_bool cfd_is_open;
static bool we_opened; /* we called opends_driver_open */
static long users;     /* cuFileDriverOpen calls not yet closed */
/* This process is a child forked while the driver was open, and has not
 * called cuFileDriverOpen since: see "fork" below. */
static atomic_bool forked;

/* ---- small sets of pointers ---------------------------------------------- */

/* Handles opened write-only and batches cancelled: what cuFile answers
 * differently from OpenDS's contract. The count is read without the lock,
 * so the common case (an empty set) costs one load. */
struct pset {
	pthread_mutex_t m;
	void **v;
	size_t n, cap;
	atomic_size_t count;
};
static struct pset wronly = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 };
static struct pset cancelled = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 };
/* Buffers registered through the drop-in (bases), and registrations of a
 * pointer inside one of them (inner): NVIDIA's libcufile 1.15.1 accepts
 * those and deregisters them (0 and 0, as it answers on the H200,
 * 2026-12-01) where OpenDS refuses an overlap; a base registered twice is
 * MEMORY_ALREADY_REGISTERED in both. An inner registration pins nothing
 * more: I/O into it is I/O into the enclosing buffer (or, once that is
 * deregistered, into an unregistered one). */
static struct pset bases = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 };
static struct pset inner = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 };

static bool pset_add(struct pset *s, void *p)
{
	bool ok = true;
	pthread_mutex_lock(&s->m);
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		void **v = realloc(s->v, cap * sizeof(*v));
		if (v) {
			s->v = v;
			s->cap = cap;
		} else {
			ok = false;
		}
	}
	if (ok) {
		s->v[s->n++] = p;
		atomic_store(&s->count, s->n);
	}
	pthread_mutex_unlock(&s->m);
	return ok;
}

static void pset_del(struct pset *s, void *p)
{
	if (!atomic_load_explicit(&s->count, memory_order_relaxed))
		return;
	pthread_mutex_lock(&s->m);
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i] == p) {
			s->v[i] = s->v[--s->n];
			break;
		}
	}
	atomic_store(&s->count, s->n);
	pthread_mutex_unlock(&s->m);
}

static bool pset_has(struct pset *s, void *p)
{
	if (!atomic_load_explicit(&s->count, memory_order_relaxed))
		return false;
	bool found = false;
	pthread_mutex_lock(&s->m);
	for (size_t i = 0; i < s->n && !found; i++)
		found = s->v[i] == p;
	pthread_mutex_unlock(&s->m);
	return found;
}

static void pset_clear(struct pset *s)
{
	pthread_mutex_lock(&s->m);
	s->n = 0;
	atomic_store(&s->count, 0);
	pthread_mutex_unlock(&s->m);
}

/* ---- fork ---------------------------------------------------------------- */

/* fork() while the driver is open: the child has none of the parent's
 * threads, rings or CUDA context, and OpenDS forgets its driver there
 * (include/opends.h). As cuFile asks of a child, it must call
 * cuFileDriverOpen again; until then every call that needs the driver
 * fails with CU_FILE_DRIVER_NOT_INITIALIZED and none opens it implicitly
 * (a program that meant to go on with the parent's handles would
 * otherwise get a new driver that knows none of them). A child forked
 * while the driver was closed keeps opening it on first use.
 * The drop-in's locks are taken around the fork, so the child's copy of
 * its state is whole and no lock is held by a thread that is not there;
 * nothing is freed in the child (the sets keep their memory). */
static void fork_prepare(void)
{
	pthread_mutex_lock(&cfd_lock);
	pthread_mutex_lock(&wronly.m);
	pthread_mutex_lock(&cancelled.m);
	pthread_mutex_lock(&bases.m);
	pthread_mutex_lock(&inner.m);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&inner.m);
	pthread_mutex_unlock(&bases.m);
	pthread_mutex_unlock(&cancelled.m);
	pthread_mutex_unlock(&wronly.m);
	pthread_mutex_unlock(&cfd_lock);
}

static void fork_child(void)
{
	if (atomic_load(&cfd_is_open)) {
		atomic_store(&forked, true);
		atomic_store(&cfd_is_open, false);
		users = 0;
		we_opened = false;
		wronly.n = cancelled.n = bases.n = inner.n = 0;
		atomic_store(&wronly.count, 0);
		atomic_store(&cancelled.count, 0);
		atomic_store(&bases.count, 0);
		atomic_store(&inner.count, 0);
	}
	/* the calls inside were the parent's threads'; the gate is closed */
	ods_gate_forget();
	fork_parent();
}

/* At load, so that the locks are covered whenever they can be held. */
__attribute__((constructor)) static void fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- status ------------------------------------------------------------- */

/* An OpenDS ssize_t result in cuFile's convention: library errors stay
 * negated codes, operating-system errors become -1 with errno. Where the
 * same misuse gets another answer from NVIDIA's cuFile (1.15.1, measured on
 * the H200), NVIDIA's is given (docs/cufile-dropin.md, "Misuse"); only
 * failures pay for the checks. */
static ssize_t io_ret(ssize_t r, int opcode)
{
	if (r >= 0)
		return r;
	switch (r) {
	case -CU_FILE_INVALID_VALUE:
	case -CU_FILE_INVALID_FILE_OPEN_FLAG:
	case -CU_FILE_INVALID_MAPPING_RANGE: /* past the registered buffer */
		/* NVIDIA's checks of the arguments: -1 with the cuFile code
		 * in errno (1.15.1, the three measured) */
		errno = (int)-r;
		return -1;
	case -EBADF:
		/* reading through a write-only fd: as the argument checks;
		 * writing through a read-only one: NVIDIA says EIO */
		errno = opcode == OPENDS_READ ? CU_FILE_INVALID_FILE_OPEN_FLAG : EIO;
		return -1;
	default:
		break;
	}
	if (r <= -CUFILEOP_BASE_ERR)
		return r;
	errno = (int)-r;
	return -1;
}

static CUfileError_t open_locked(void)
{
	if (atomic_load(&cfd_is_open))
		return cfd_st(CU_FILE_SUCCESS, 0);
	opends_setting_t set[CFD_SETTINGS_MAX];
	char val[CFD_SETTINGS_MAX][32];
	size_t n = cfd_config_settings_locked(set, val);
	opends_error_t e = opends_driver_open_with(set, n);
	if (e.err == OPENDS_DRIVER_ALREADY_OPEN) {
		/* the program opened OpenDS itself; share it, never close it */
		we_opened = false;
	} else if (e.err != OPENDS_SUCCESS) {
		/* why: opends_last_error_detail() on this thread */
		return cfd_from_ods(e);
	} else {
		we_opened = true;
	}
	atomic_store(&cfd_is_open, true);
	ods_gate_open();
	cfd_stats_refresh(cfd_config_stats_level_locked()); /* cufile.json's level counts from the open */
	return cfd_st(CU_FILE_SUCCESS, 0);
}

/* cuFile opens itself on first use (not in a forked child: see "fork"). */
CUfileError_t cfd_ensure_open(void)
{
	if (atomic_load_explicit(&cfd_is_open, memory_order_acquire))
		return cfd_st(CU_FILE_SUCCESS, 0);
	pthread_mutex_lock(&cfd_lock);
	CUfileError_t e = atomic_load(&forked) ? cfd_st(CU_FILE_DRIVER_NOT_INITIALIZED, 0) : open_locked();
	pthread_mutex_unlock(&cfd_lock);
	return e;
}

/* ---- calls in progress, against cuFileDriverClose ------------------------ */

/* OpenDS waits for its own calls in progress when it closes, but the
 * drop-in must also know when none of its calls is inside OpenDS: cuFile
 * programs close the driver while other threads still do I/O, and a call
 * that comes after the last close must open the driver again (cuFile opens
 * on first use) rather than fail. Every call into OpenDS holds a pass of
 * the drop-in's own gate (src/core/gate.c, compiled into this library: the
 * core's mechanism, its own instance); the last cuFileDriverClose closes
 * the gate, waits until no pass is out, then closes OpenDS. A call that
 * finds the gate closed waits for cfd_lock and opens the driver again;
 * handles and buffers of the closed driver are then unknown to it
 * (HANDLE_NOT_REGISTERED, MEMORY_NOT_REGISTERED), never another's:
 * OpenDS's tokens are unique in the process. The I/O path pays the gate's
 * two uncontended atomic operations (one cache line per thread). */

/* Inside, with the driver open (false: closed, not entered). */
static bool enter_if_open(struct cfd_gate *g)
{
	return ods_gate_enter(&g->pass) == 0;
}

CUfileError_t cfd_enter(struct cfd_gate *g)
{
	g->pass.count = NULL;
	while (!enter_if_open(g)) {
		CUfileError_t e = cfd_ensure_open();
		if (e.err)
			return e;
	}
	return cfd_st(CU_FILE_SUCCESS, 0);
}

void cfd_leave(struct cfd_gate *g)
{
	ods_gate_leave(&g->pass);
}

/* ---- driver ------------------------------------------------------------- */

EXPORT CUfileError_t cuFileDriverOpen(void)
{
	pthread_mutex_lock(&cfd_lock);
	CUfileError_t e = open_locked();
	if (e.err == CU_FILE_SUCCESS) {
		users++;
		atomic_store(&forked, false);
	}
	pthread_mutex_unlock(&cfd_lock);
	return e;
}

EXPORT CUfileError_t cuFileDriverClose_v2(void)
{
	pthread_mutex_lock(&cfd_lock);
	if (!atomic_load(&cfd_is_open)) {
		pthread_mutex_unlock(&cfd_lock);
		return cfd_st(CU_FILE_DRIVER_NOT_INITIALIZED, 0);
	}
	if (users > 0)
		users--;
	opends_error_t e = { OPENDS_SUCCESS, 0 };
	if (users == 0) {
		atomic_store(&cfd_is_open, false);
		ods_gate_begin_close();
		ods_gate_drain();
		if (we_opened)
			e = opends_driver_close();
		ods_gate_closed();
		pset_clear(&wronly);
		pset_clear(&cancelled);
		pset_clear(&bases);
		pset_clear(&inner);
		we_opened = false;
	}
	pthread_mutex_unlock(&cfd_lock);
	return cfd_from_ods(e);
}

/* The unversioned name, for programs that resolve it directly. */
#undef cuFileDriverClose
EXPORT CUfileError_t cuFileDriverClose(void)
{
	return cuFileDriverClose_v2();
}

/* The cuFileDriverOpen calls not yet closed: an implicit open (the
 * driver opened by a first call) is not counted, as NVIDIA's libcufile
 * 1.15.1 answers on the H200, 2026-12-01 (0 after cuFileDriverGetProperties
 * before any open). */
EXPORT long cuFileUseCount(void)
{
	pthread_mutex_lock(&cfd_lock);
	long n = atomic_load(&cfd_is_open) ? users : 0;
	pthread_mutex_unlock(&cfd_lock);
	return n;
}

EXPORT CUfileError_t cuFileGetVersion(int *version)
{
	if (!version)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	*version = MIRRORED_CUFILE_VERSION;
	return cfd_st(CU_FILE_SUCCESS, 0);
}

/* ---- handles and buffers ------------------------------------------------ */

EXPORT CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr)
{
	if (!fh || !descr)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	/* only Linux file descriptors (a Windows handle: "not supported on
	 * this file", as NVIDIA's); no user-space file-system callbacks */
	if (descr->type == CU_FILE_HANDLE_TYPE_OPAQUE_WIN32)
		return cfd_st(CU_FILE_IO_NOT_SUPPORTED, 0);
	if (descr->type != CU_FILE_HANDLE_TYPE_OPAQUE_FD)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	CFD_ENTER(e);
	if (e.err)
		return e;
	opends_handle_t h = NULL;
	opends_error_t oe = opends_handle_register(&h, descr->handle.fd);
	if (cfd_stats_on())
		cfd_stats_op(CFD_ST_HDL_REG, !oe.err);
	if (oe.err)
		return cfd_from_ods(oe);
	/* cuFile refuses stream reads on a write-only handle when they are
	 * enqueued; OpenDS reports it when the stream runs them */
	int fl = fcntl(descr->handle.fd, F_GETFL);
	if (fl >= 0 && (fl & O_ACCMODE) == O_WRONLY && !pset_add(&wronly, h)) {
		(void)opends_handle_deregister(h);
		return cfd_st(CU_FILE_NOMEM_ERROR, 0);
	}
	*fh = (CUfileHandle_t)h;
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT void cuFileHandleDeregister(CUfileHandle_t fh)
{
	pset_del(&wronly, fh);
	CFD_GATE(g);
	if (fh && enter_if_open(&g)) {
		opends_error_t oe = opends_handle_deregister((opends_handle_t)fh);
		if (cfd_stats_on())
			cfd_stats_op(CFD_ST_HDL_DEREG, !oe.err);
	}
}

EXPORT CUfileError_t cuFileBufRegister(const void *bufPtr_base, size_t length, int flags)
{
	/* the RDMA hints mean nothing here and are accepted */
	if (flags & ~(CU_FILE_RDMA_REGISTER | CU_FILE_RDMA_RELAXED_ORDERING))
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	CFD_ENTER(e);
	if (e.err)
		return e;
	/* an inner registration stands until deregistered, whether or not
	 * its enclosing buffer still does */
	opends_error_t oe = { OPENDS_MEMORY_ALREADY_REGISTERED, 0 };
	if (pset_has(&inner, (void *)bufPtr_base)) {
		/* registered twice: oe says so */
	} else if ((oe = opends_buf_register(bufPtr_base, length, 0)).err == OPENDS_SUCCESS) {
		if (!pset_add(&bases, (void *)bufPtr_base)) {
			(void)opends_buf_deregister(bufPtr_base);
			oe.err = OPENDS_NOMEM_ERROR;
		}
	} else if (oe.err == OPENDS_MEMORY_ALREADY_REGISTERED && !pset_has(&bases, (void *)bufPtr_base)) {
		/* inside (or across) a registered buffer: see "inner" */
		oe.err = pset_add(&inner, (void *)bufPtr_base) ? OPENDS_SUCCESS : OPENDS_NOMEM_ERROR;
	}
	if (cfd_stats_on())
		cfd_stats_op(CFD_ST_BUF_REG, !oe.err);
	return cfd_from_ods(oe);
}

EXPORT CUfileError_t cuFileBufDeregister(const void *bufPtr_base)
{
	CFD_ENTER(e);
	if (e.err)
		return e;
	opends_error_t oe = { OPENDS_SUCCESS, 0 };
	if (pset_has(&inner, (void *)bufPtr_base)) {
		pset_del(&inner, (void *)bufPtr_base);
	} else {
		oe = opends_buf_deregister(bufPtr_base);
		if (!oe.err)
			pset_del(&bases, (void *)bufPtr_base);
	}
	if (cfd_stats_on())
		cfd_stats_op(CFD_ST_BUF_DEREG, !oe.err);
	return cfd_from_ods(oe);
}

/* ---- synchronous I/O ---------------------------------------------------- */

EXPORT ssize_t cuFileRead(CUfileHandle_t fh, void *bufPtr_base, size_t size, off_t file_offset, off_t bufPtr_offset)
{
	CFD_ENTER(e);
	if (e.err)
		return -(ssize_t)e.err;
	bool st = cfd_stats_on(); /* off: one relaxed load, no clock read */
	uint64_t t0 = st ? cfd_stats_t0() : 0;
	ssize_t r = io_ret(opends_sync_read((opends_handle_t)fh, bufPtr_base, size, file_offset, bufPtr_offset),
			   OPENDS_READ);
	if (st)
		cfd_stats_io(CFD_ST_READ, r, size, t0);
	return r;
}

EXPORT ssize_t cuFileWrite(CUfileHandle_t fh, const void *bufPtr_base, size_t size, off_t file_offset,
			   off_t bufPtr_offset)
{
	CFD_ENTER(e);
	if (e.err)
		return -(ssize_t)e.err;
	bool st = cfd_stats_on(); /* off: one relaxed load, no clock read */
	uint64_t t0 = st ? cfd_stats_t0() : 0;
	ssize_t r = io_ret(opends_sync_write((opends_handle_t)fh, bufPtr_base, size, file_offset, bufPtr_offset),
			   OPENDS_WRITE);
	if (st)
		cfd_stats_io(CFD_ST_WRITE, r, size, t0);
	return r;
}

/* Scatter/gather: the segments one after another at consecutive file
 * offsets; a short read stops at EOF; an error anywhere is the result. */
static ssize_t rwv(int opcode, CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt, off_t file_offset,
		   unsigned flags)
{
	CFD_ENTER(e);
	if (e.err)
		return -(ssize_t)e.err;
	if ((!iov && iovcnt) || flags != 0 || file_offset < 0)
		return io_ret(-(ssize_t)CU_FILE_INVALID_VALUE, opcode);
	size_t total = 0;
	for (size_t i = 0; i < iovcnt; i++) {
		if (iov[i].len > (size_t)SSIZE_MAX - total)
			return io_ret(-(ssize_t)CU_FILE_INVALID_VALUE, opcode);
		off_t pos = file_offset + (off_t)total;
		ssize_t r = opcode == OPENDS_READ
				    ? opends_sync_read((opends_handle_t)fh, iov[i].base, iov[i].len, pos, 0)
				    : opends_sync_write((opends_handle_t)fh, iov[i].base, iov[i].len, pos, 0);
		if (r < 0)
			return io_ret(r, opcode);
		total += (size_t)r;
		if ((size_t)r < iov[i].len)
			break;
	}
	return (ssize_t)total;
}

/* rwv, counted when statistics are on */
static ssize_t rwv_counted(int opcode, CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt, off_t file_offset,
			   unsigned flags)
{
	if (!cfd_stats_on())
		return rwv(opcode, fh, iov, iovcnt, file_offset, flags);
	uint64_t t0 = cfd_stats_t0();
	ssize_t r = rwv(opcode, fh, iov, iovcnt, file_offset, flags);
	cfd_stats_io(opcode == OPENDS_READ ? CFD_ST_READV : CFD_ST_WRITEV, r, 0, t0);
	return r;
}

EXPORT ssize_t cuFileReadv(CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt, off_t file_offset,
			   unsigned flags)
{
	return rwv_counted(OPENDS_READ, fh, iov, iovcnt, file_offset, flags);
}

EXPORT ssize_t cuFileWritev(CUfileHandle_t fh, const CUfileIOVec_t *iov, size_t iovcnt, off_t file_offset,
			    unsigned flags)
{
	return rwv_counted(OPENDS_WRITE, fh, iov, iovcnt, file_offset, flags);
}

/* ---- batch -------------------------------------------------------------- */

EXPORT CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *batch_idp, unsigned nr)
{
	if (!batch_idp)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	/* no more than the max_batch_io_size reported: cuFile's io_batchsize
	 * (128 unless set) may be below OpenDS's own limit, which
	 * opends_batch_setup applies */
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

EXPORT CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch_idp, unsigned nr, CUfileIOParams_t *iocbp,
					 unsigned int flags)
{
	CFD_ENTER(e);
	if (e.err)
		return e;
	pset_del(&cancelled, batch_idp); /* new work is reported again */
	uint64_t t0 = cfd_stats_on() ? cfd_stats_t0() : 0;
	if (!iocbp || nr == 0)
		return cfd_from_ods(opends_batch_submit((opends_batch_t)batch_idp, nr, NULL, flags));
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
	opends_error_t oe = opends_batch_submit((opends_batch_t)batch_idp, nr, p, flags);
	if (p != small)
		free(p);
	if (t0)
		cfd_stats_submit(nr, iocbp, !oe.err, t0);
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
	if (!nr)
		return cfd_st(CU_FILE_INVALID_VALUE, 0);
	if (pset_has(&cancelled, batch_idp)) {
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
	if (r.err == CU_FILE_SUCCESS && !pset_add(&cancelled, batch_idp))
		return cfd_st(CU_FILE_NOMEM_ERROR, 0);
	return r;
}

EXPORT void cuFileBatchIODestroy(CUfileBatchHandle_t batch_idp)
{
	pset_del(&cancelled, batch_idp);
	CFD_GATE(g);
	if (enter_if_open(&g)) {
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
	if (bytes_read_p && size_p && file_offset_p && bufPtr_offset_p && bufPtr_base && pset_has(&wronly, fh)) {
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
	return cfd_from_ods(opends_stream_write((opends_handle_t)fh, bufPtr_base, size_p, file_offset_p,
					    bufPtr_offset_p, bytes_written_p, (opends_stream_t)stream));
}

EXPORT CUfileError_t cuFileStreamRegister(CUstream stream, unsigned flags)
{
	CFD_ENTER(e);
	if (e.err)
		return e;
	return cfd_from_ods(opends_stream_register((opends_stream_t)stream, flags));
}

EXPORT CUfileError_t cuFileStreamDeregister(CUstream stream)
{
	CFD_ENTER(e);
	if (e.err)
		return e;
	return cfd_from_ods(opends_stream_deregister((opends_stream_t)stream));
}
