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

/* ---- what OpenDS does not keep ------------------------------------------ */

/* Handles opened write-only and read-only: NVIDIA checks the access mode
 * when a stream or batch operation is enqueued (async.c), OpenDS when it
 * runs. */
struct pset cfd_wronly = PSET_INIT, cfd_rdonly = PSET_INIT;
/* Buffers registered through the drop-in (bases), and registrations of a
 * pointer inside one of them (inner): NVIDIA's libcufile 1.15.1 accepts
 * those and deregisters them (0 and 0, as it answers on the H200,
 * 2026-12-01) where OpenDS refuses an overlap; a base registered twice is
 * MEMORY_ALREADY_REGISTERED in both. An inner registration pins nothing
 * more: I/O into it is I/O into the enclosing buffer (or, once that is
 * deregistered, into an unregistered one). */
static struct pset bases = PSET_INIT, inner = PSET_INIT;
/* Handles of O_PATH fds (see cuFileHandleRegister). */
static struct pset paths = PSET_INIT;

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
static struct pset *const all_sets[] = { &cfd_wronly, &cfd_rdonly, &cfd_cancelled, &cfd_streams,
					  &bases,      &inner,      &paths };
#define N_SETS (sizeof(all_sets) / sizeof(*all_sets))

static void fork_prepare(void)
{
	pthread_mutex_lock(&cfd_lock);
	for (size_t i = 0; i < N_SETS; i++)
		pthread_mutex_lock(&all_sets[i]->m);
}

static void fork_parent(void)
{
	for (size_t i = N_SETS; i-- > 0;)
		pthread_mutex_unlock(&all_sets[i]->m);
	pthread_mutex_unlock(&cfd_lock);
}

static void fork_child(void)
{
	if (atomic_load(&cfd_is_open)) {
		atomic_store(&forked, true);
		atomic_store(&cfd_is_open, false);
		users = 0;
		we_opened = false;
		for (size_t i = 0; i < N_SETS; i++)
			pset_clear_locked(all_sets[i]);
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
	cfd_config_load_locked(); /* cuFile reads its configuration at the open */
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
	cfd_stats_refresh_locked(cfd_config_stats_level_locked()); /* cufile.json's level counts from the open */
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
		pset_clear(&cfd_wronly);
		pset_clear(&cfd_rdonly);
		pset_clear(&bases);
		pset_clear(&inner);
		pset_clear(&paths);
		cfd_async_forget();
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

/* O_PATH fds: NVIDIA's libcufile 1.15.1 registers one (0) and fails its
 * reads with -1 and errno EPERM (the H200, 2026-12-01), where OpenDS
 * refuses it at the register (INVALID_FILE_OPEN_FLAG). A program that
 * registers every fd it has and reads through some must go on working,
 * and the read still fails as on NVIDIA's, so the drop-in gives such an
 * fd a handle of its own that OpenDS never knows: its value has the fd in
 * the high half and 0 in the low one, which no OpenDS handle has (OpenDS's
 * tokens carry a slot number from 1 in their low half: src/core/slots.c),
 * so OpenDS answers HANDLE_NOT_REGISTERED for it and the synchronous calls
 * turn that into -1 / EPERM or EIO (path_io). Like NVIDIA, which knows
 * handles by fd number, the same fd twice is HANDLE_ALREADY_REGISTERED. */
static CUfileHandle_t path_handle(int fd)
{
	return (CUfileHandle_t)(uintptr_t)((uint64_t)(unsigned)(fd + 1) << 32);
}

bool cfd_is_path_handle(CUfileHandle_t fh)
{
	uint64_t t = (uint64_t)(uintptr_t)fh;
	return t && !(uint32_t)t && pset_has(&paths, fh);
}

static CUfileError_t path_register(CUfileHandle_t *fh, int fd)
{
	CUfileHandle_t h = path_handle(fd);
	CUfileError_t e = cfd_st(CU_FILE_SUCCESS, 0);
	if (pset_has(&paths, h))
		e = cfd_st(CU_FILE_HANDLE_ALREADY_REGISTERED, 0);
	else if (!pset_add(&paths, h))
		e = cfd_st(CU_FILE_NOMEM_ERROR, 0);
	if (cfd_stats_on())
		cfd_stats_op(CFD_ST_HDL_REG, !e.err);
	if (!e.err)
		*fh = h;
	return e;
}

/* A synchronous read or write's result through an O_PATH fd's handle:
 * NVIDIA's -1 with errno EPERM for a read, EIO for a write (as through a
 * read-only fd), measured on the H200, 2026-12-01 (probe 1: read_o_path,
 * write_o_path). Only failures pay for the check. */
static ssize_t path_io(CUfileHandle_t fh, ssize_t r, int opcode)
{
	if (r == -(ssize_t)CU_FILE_HANDLE_NOT_REGISTERED && cfd_is_path_handle(fh)) {
		errno = opcode == OPENDS_READ ? EPERM : EIO;
		return -1;
	}
	return r;
}

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
	int fd = descr->handle.fd;
	int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
	if (fl >= 0 && (fl & O_PATH))
		return path_register(fh, fd);
	opends_handle_t h = NULL;
	opends_error_t oe = opends_handle_register(&h, fd);
	if (cfd_stats_on())
		cfd_stats_op(CFD_ST_HDL_REG, !oe.err);
	if (oe.err)
		return cfd_from_ods(oe);
	/* NVIDIA checks the access mode when stream and batch operations are
	 * enqueued; OpenDS when they run (async.c) */
	struct pset *mode = fl < 0 ? NULL
			    : (fl & O_ACCMODE) == O_WRONLY ? &cfd_wronly
			    : (fl & O_ACCMODE) == O_RDONLY ? &cfd_rdonly
							   : NULL;
	if (mode && !pset_add(mode, h)) {
		(void)opends_handle_deregister(h);
		return cfd_st(CU_FILE_NOMEM_ERROR, 0);
	}
	*fh = (CUfileHandle_t)h;
	return cfd_st(CU_FILE_SUCCESS, 0);
}

EXPORT void cuFileHandleDeregister(CUfileHandle_t fh)
{
	CFD_GATE(g);
	if (!fh || !enter_if_open(&g))
		return;
	bool ok;
	if (cfd_is_path_handle(fh)) {
		ok = pset_del(&paths, fh);
	} else {
		if (!pset_del(&cfd_rdonly, fh))
			pset_del(&cfd_wronly, fh);
		ok = !opends_handle_deregister((opends_handle_t)fh).err;
	}
	if (cfd_stats_on())
		cfd_stats_op(CFD_ST_HDL_DEREG, ok);
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
	ssize_t r = path_io(fh,
			    io_ret(opends_sync_read((opends_handle_t)fh, bufPtr_base, size, file_offset, bufPtr_offset),
				   OPENDS_READ),
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
	ssize_t r = path_io(fh,
			    io_ret(opends_sync_write((opends_handle_t)fh, bufPtr_base, size, file_offset, bufPtr_offset),
				   OPENDS_WRITE),
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
			return path_io(fh, io_ret(r, opcode), opcode);
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
