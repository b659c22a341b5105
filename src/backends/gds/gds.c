/*
 * The gds backend: NVIDIA's cuFile (GPUDirect Storage) moves device memory
 * to and from files whose handle cuFile accepts. libcufile.so.0 is loaded
 * with dlopen at driver open (OPENDS_CUFILE_LIBRARY names another path),
 * never linked, so one build runs with or without it. docs/gds.md has the
 * whole story; in short:
 *
 * - probe: auto takes gds only when cuFile's direct path works (nvidia-fs
 *   or PCI P2PDMA); in compatibility mode cuFile is POSIX inside and the
 *   uring backend is faster, so auto moves on. OPENDS_BACKEND=gds runs in
 *   either mode. OpenDS's own cuFile drop-in is recognised by its marker
 *   symbol and refused (it would call back into OpenDS).
 * - handles: cuFileHandleRegister at registration; a file cuFile refuses
 *   (no udev data, tmpfs, block devices, unsupported file systems) is still
 *   served, through the core's POSIX path (src/core/posix_io.c). Each handle
 *   records which path it took.
 * - data: device memory on a cuFile handle goes through cuFileRead/Write;
 *   host memory and handles cuFile refused go through the POSIX path.
 *   Writes on O_DIRECT handles send their partial head and tail blocks
 *   through the POSIX path's buffered twin, so concurrent writers to other
 *   bytes of those blocks lose nothing (the contract of opends_sync_write).
 * - async, batches, streams: the core's pool runs rw (submit is NULL); the
 *   batch and stream engines are the core's over that pool.
 * - errors: cuFile's negated CUfileOpError and its -1 with errno both
 *   become the contract's -OPENDS_* or -errno.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ods.h"

#define ODS_CUFILE_NO_CUDA_H
#include "../../vendor/cufile/cufile.h"
#include "../../vendor/cufile/cufile_layout.h"
#include "../../vendor/cufile_api.h"
#include "../../vendor/cuda_min.h"

ODS_CUFILE_LAYOUT_CHECKS();
ODS_CUFILE_PROTO_CHECKS();

#define MAX_CALL ((size_t)1 << 30) /* bytes per cuFile call */

/* ---- the loaded libraries ------------------------------------------------ */

/* NVIDIA's cuFile (src/vendor/cufile_api.h: the one loader) */
static struct ods_cufile_api cf;

static struct {
	char path[PATH_MAX]; /* what was asked for */
	bool drv_open;      /* cuFileDriverOpen succeeded and not closed */
	bool direct;        /* nvidia-fs or P2PDMA reported */
	int auto_verdict;   /* for path: 0 not probed, 1 direct, -1 compat */
	char mode[320];     /* how cuFile runs, for messages */
} gs;


/* The CUDA driver (a GPU must be there before cuFile is asked anything,
 * and device pointers need a current context on worker threads) comes
 * through the one libcuda loader's minimal mode, ods_cu_min
 * (src/vendor/cuda_min.h): this file compiles against OpenDS's cuFile
 * declaration, whose CUDA types are stand-ins, so it cannot include cuda.h.
 * Loaded by gpu_present, before the driver opens. */

static const struct ods_accel *gds_accel;

/* The library's name from the environment: OPENDS_CUFILE_LIBRARY, else the
 * SONAME the loader searches. */
static const char *wanted_path(void)
{
	const char *p = getenv("OPENDS_CUFILE_LIBRARY");
	return p && *p ? p : "libcufile.so.0";
}

static void unload(void)
{
	ods_cufile_unload(&cf);
	memset(&gs, 0, sizeof(gs));
}

/* Load libcufile (once per process and path; kept loaded: unloading
 * cuFile is a known source of crashes). 0 or an OPENDS_* code with why. */
static int load(char *why, size_t n)
{
	const char *path = wanted_path();
	if (cf.lib && !strcmp(gs.path, path))
		return 0;
	if (cf.lib) {
		if (gs.drv_open)
			return 0; /* the path changed while in use: keep the old */
		unload();
	}

	/* When the drop-in is already in the process, NVIDIA's library loaded
	 * by path must bind its own cuFile symbols, not the drop-in's. */
	int deep = strchr(path, '/') && dlsym(RTLD_DEFAULT, "opends_cufile_dropin") ? RTLD_DEEPBIND : 0;
	if (ods_cufile_load(&cf, path, deep, why, n)) {
		if (!getenv("OPENDS_CUFILE_LIBRARY") && strncmp(why, "cannot load", 11) == 0) {
			size_t l = strlen(why);
			snprintf(why + l, n > l ? n - l : 0, "; OPENDS_CUFILE_LIBRARY can name NVIDIA's libcufile.so.0");
		}
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	if (cf.dropin) {
		snprintf(why, n,
			 "%s is OpenDS's cuFile drop-in, not NVIDIA's cuFile; set OPENDS_CUFILE_LIBRARY to the path "
			 "of NVIDIA's libcufile.so.0",
			 cf.where);
		ods_cufile_unload(&cf);
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	snprintf(gs.path, sizeof(gs.path), "%s", path);
	return 0;
}

static const char *op_str(int code)
{
	return opends_op_status_error(code);
}

/* cuFile's answer to "does the direct path work": nvidia-fs reports its
 * version and the storage kinds it serves; PCI P2PDMA shows as the P2P
 * feature bit with use_pci_p2pdma on. Compatibility mode forced by
 * configuration wins over both. */
static bool direct_path(const CUfileDrvProps_t *p, char *mode, size_t n)
{
	bool nvfs = p->nvfs.major_version != 0 && (p->nvfs.dstatusflags & ((1u << 15) - 1)) != 0;
	bool p2p_bit = (p->fflags & (1u << CU_FILE_P2P_SUPPORTED)) != 0;
	bool p2p_on = false, forced = false, b;
	if (cf.cuFileGetParameterBool) {
		if (cf.cuFileGetParameterBool(CUFILE_PARAM_USE_PCIP2PDMA, &b).err == CU_FILE_SUCCESS)
			p2p_on = b;
		if (cf.cuFileGetParameterBool(CUFILE_PARAM_FORCE_COMPAT_MODE, &b).err == CU_FILE_SUCCESS)
			forced = b;
	}
	bool p2p = p2p_bit && p2p_on;
	snprintf(mode, n, "cuFile %d.%d from %.200s: nvidia-fs %s, PCI P2PDMA %s%s", cf.version / 1000,
		 (cf.version % 1000) / 10, cf.where,
		 nvfs ? "active" : "not loaded", p2p ? "on" : "off", forced ? ", compatibility mode forced" : "");
	return (nvfs || p2p) && !forced;
}

/* cuFile without a usable GPU can fail slowly or never return from
 * cuFileDriverOpen (seen: the 1.20 wheel spins on a machine without
 * libcuda), so a device is required before asking it. */
static int gpu_present(char *why, size_t n)
{
	char cuwhy[200];
	int r, count = 0;
	if (ods_cu_min_load(cuwhy, sizeof(cuwhy)) != ODS_CU_OK) {
		snprintf(why, n, "cuFile needs a GPU: %s", cuwhy);
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	if ((r = ods_cu_min.cuDeviceGetCount(&count)) != ODS_CU_MIN_SUCCESS || count < 1) {
		snprintf(why, n, "cuFile needs a GPU: the CUDA driver reports none (CUresult %d, %d devices)", r, count);
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	return 0;
}

static int driver_up(char *why, size_t n)
{
	if (gs.drv_open)
		return 0;
	int rc = gpu_present(why, n);
	if (rc)
		return rc;
	CUfileError_t e = cf.cuFileDriverOpen();
	if (e.err != CU_FILE_SUCCESS) {
		snprintf(why, n, "cuFileDriverOpen (%s) failed: %d (%s)%s", cf.where, (int)e.err, op_str((int)e.err),
			 e.err == CU_FILE_CUDA_DRIVER_ERROR ? "; is there a GPU and a CUDA driver?" : "");
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	CUfileDrvProps_t p;
	memset(&p, 0, sizeof(p));
	e = cf.cuFileDriverGetProperties(&p);
	if (e.err != CU_FILE_SUCCESS) {
		snprintf(why, n, "cuFileDriverGetProperties (%s) failed: %d (%s)", cf.where, (int)e.err,
			 op_str((int)e.err));
		cf.cuFileDriverClose_v2();
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	gs.direct = direct_path(&p, gs.mode, sizeof(gs.mode));
	gs.drv_open = true;
	return 0;
}

static void driver_down(void)
{
	if (gs.drv_open)
		cf.cuFileDriverClose_v2();
	gs.drv_open = false;
}

static int gds_probe(const struct ods_config *cfg, char *why, size_t n)
{
	bool is_auto = !strcmp(cfg->backend, "auto");
	if (is_auto && (!strcmp(cfg->accel, "host") || !strcmp(cfg->accel, "hostdev"))) {
		snprintf(why, n, "OPENDS_ACCEL=%s: no device memory for cuFile to serve", cfg->accel);
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	int rc = load(why, n);
	if (rc)
		return rc;
	/* auto asks once per process and library: opening cuFile is slow and
	 * writes cufile.log, and the answer does not change */
	if (is_auto && gs.auto_verdict < 0) {
		snprintf(why, n, "cuFile is in compatibility mode; uring is faster (%s)", gs.mode);
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	if ((rc = driver_up(why, n)))
		return rc;
	if (is_auto) {
		gs.auto_verdict = gs.direct ? 1 : -1;
		if (!gs.direct) {
			snprintf(why, n, "cuFile is in compatibility mode; uring is faster (%s)", gs.mode);
			driver_down();
			return OPENDS_PLATFORM_NOT_SUPPORTED;
		}
	}
	return 0;
}

static int gds_open(const struct ods_config *cfg, const struct ods_accel *accel)
{
	(void)cfg;
	char why[256] = "";
	int rc = load(why, sizeof(why));
	if (!rc)
		rc = driver_up(why, sizeof(why));
	if (rc)
		return ods_fail(rc, "OPENDS_BACKEND=gds: %s", why);
	gds_accel = accel;
	return 0;
}

static void gds_close(void)
{
	driver_down();
	gds_accel = NULL;
}

/* ---- handles ------------------------------------------------------------- */

enum gds_path { PATH_POSIX = 0, PATH_CUFILE = 1 };

struct gds_handle {
	enum gds_path path;
	CUfileHandle_t cfh;
	int refused;        /* cuFileHandleRegister's code when PATH_POSIX */
};

static int gds_handle_open(struct ods_handle *h)
{
	struct gds_handle *g = calloc(1, sizeof(*g));
	if (!g)
		return ods_fail(OPENDS_NOMEM_ERROR, "opends_handle_register: out of memory");
	CUfileDescr_t d;
	memset(&d, 0, sizeof(d));
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = h->fd;
	CUfileError_t e = cf.cuFileHandleRegister(&g->cfh, &d);
	if (e.err == CU_FILE_SUCCESS) {
		g->path = PATH_CUFILE;
	} else {
		/* still served: through the POSIX path */
		g->path = PATH_POSIX;
		g->refused = (int)e.err;
		g->cfh = NULL;
	}
	h->be = g;
	return 0;
}

static void gds_handle_close(struct ods_handle *h)
{
	struct gds_handle *g = h->be;
	if (!g)
		return;
	if (g->path == PATH_CUFILE && gs.drv_open)
		cf.cuFileHandleDeregister(g->cfh);
	free(g);
	h->be = NULL;
}

/* ---- data ---------------------------------------------------------------- */

static bool ods_code_known(int c)
{
	switch (c) {
#define ODS_X_CASE(name, value, str) case value:
		OPENDS_ERROR_LIST(ODS_X_CASE)
#undef ODS_X_CASE
		return true;
	default:
		return false;
	}
}

/* A CUfileOpError as the contract's negated code. */
static ssize_t from_op(int code)
{
	if (code > 0 && ods_code_known(code))
		return -(ssize_t)code;
	switch (code) {
	case CU_FILE_NVFS_INTERNAL_DRIVER_ERROR:
		return -OPENDS_FS_DRIVER_ERROR;
	case CU_FILE_BATCH_NOCOMPAT_ERROR:
		return -OPENDS_IO_NOT_SUPPORTED;
	case CU_FILE_INTERNAL_BATCH_SETUP_ERROR:
	case CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR:
	case CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR:
	case CU_FILE_INTERNAL_BATCH_CANCEL_ERROR:
	case CU_FILE_INTERNAL_BUF_REGISTER_ERROR:
	case CU_FILE_HASH_OPR_ERROR:
		return -OPENDS_INTERNAL_ERROR;
	default:
		return -OPENDS_IO_ERROR;
	}
}

/* cuFile's data-path result (bytes; -1 with errno; a negated CUfileOpError;
 * some releases also a plain -errno) as the contract's. */
static ssize_t from_cufile(ssize_t r, int err)
{
	if (r >= 0)
		return r;
	if (r == -1) {
		if (err > CUFILEOP_BASE_ERR)
			return from_op(err); /* some releases leave the op error in errno */
		return err > 0 ? -(ssize_t)err : -EIO;
	}
	if (r <= -CUFILEOP_BASE_ERR)
		return from_op((int)-r);
	return r; /* already -errno */
}

/* cuFile needs a current context for device memory; the pool's workers
 * have none: give them the library's (the accelerator layer's
 * thread_attach), else the one the pointer belongs to. The buffer's own
 * context is made current only for the call: on the caller's thread (the
 * synchronous path runs there) the caller's context comes back after it
 * (API.md: a thread's current context is never changed by the library). */
struct ctx_saved {
	bool set;               /* true: put prev back */
	struct CUctx_st *prev; /* the context current before (NULL: none) */
};

static struct ctx_saved bind_context(const void *p)
{
	struct ctx_saved s = { false, NULL };
	if (!ods_cu_min.cuCtxGetCurrent)
		return s; /* not loaded: no driver open, no device memory */
	/* The buffer's own context first: with several GPUs, the context
	 * current on this thread (or the one thread_attach makes current)
	 * may be another device's. */
	struct CUctx_st *ctx = NULL, *cur = NULL;
	if (ods_cu_min.cuPointerGetAttribute(&ctx, ODS_CU_MIN_POINTER_ATTRIBUTE_CONTEXT,
					     (unsigned long long)(uintptr_t)p) == ODS_CU_MIN_SUCCESS &&
	    ctx) {
		if (ods_cu_min.cuCtxGetCurrent(&cur) != ODS_CU_MIN_SUCCESS)
			cur = NULL;
		if (cur != ctx && ods_cu_min.cuCtxSetCurrent(ctx) == ODS_CU_MIN_SUCCESS) {
			s.set = true;
			s.prev = cur;
		}
		return s;
	}
	if (ods_cu_min.cuCtxGetCurrent(&cur) == ODS_CU_MIN_SUCCESS && cur)
		return s;
	if (gds_accel && gds_accel->lanes)
		gds_accel->lanes->thread_attach();
	return s;
}

static void unbind_context(struct ctx_saved s)
{
	if (s.set)
		ods_cu_min.cuCtxSetCurrent(s.prev);
}

/* [buf, buf+size) at off through cuFile; base/boff address a range cuFile
 * has registered (base = buf, boff = 0 otherwise). */
static ssize_t cufile_rw(struct ods_io *io, CUfileHandle_t cfh, char *base, off_t boff, size_t size, off_t off)
{
	size_t done = 0;
	while (done < size) {
		size_t n = size - done < MAX_CALL ? size - done : MAX_CALL;
		errno = 0;
		ssize_t r = io->opcode == OPENDS_READ
				    ? cf.cuFileRead(cfh, base, n, off + (off_t)done, boff + (off_t)done)
				    : cf.cuFileWrite(cfh, base, n, off + (off_t)done, boff + (off_t)done);
		int err = errno;
		if (r < 0) {
			ssize_t e = from_cufile(r, err);
			ods_fail((int)-e, "%s: cuFile%s(fd %d, %zu bytes at %lld) failed: %s", io->opcode == OPENDS_READ ? "read" : "write",
				 io->opcode == OPENDS_READ ? "Read" : "Write", io->fh->fd, n,
				 (long long)(off + (off_t)done), opends_op_status_error((int)e));
			return e;
		}
		if (r == 0) {
			if (io->opcode == OPENDS_READ)
				break; /* EOF */
			return -EIO;
		}
		done += (size_t)r;
	}
	return (ssize_t)done;
}

/* A piece of io through the core's POSIX path. */
static ssize_t posix_piece(const struct ods_io *io, size_t skip, size_t size)
{
	struct ods_io sub;
	memcpy(&sub, io, sizeof(sub));
	sub.buf = io->buf + skip;
	sub.off = io->off + (off_t)skip;
	sub.size = size;
	return ods_posix_rw(&sub);
}

/* A cuFile read came back short of the n bytes the file had when the call
 * began: another thread or process truncated the file meanwhile, and cuFile
 * (like a read past EOF) may have written [from, n) of the buffer. Those
 * bytes become part of the result: what the POSIX path reads there now,
 * zeros where the file ends before n. Nothing past the returned count is
 * written (issue 15 item 10); docs/errors.md has the rule. */
static ssize_t refill(struct ods_io *io, size_t from, size_t n)
{
	ssize_t r = posix_piece(io, from, n - from);
	if (r < 0)
		return r;
	static const char zeros[64 * 1024];
	for (size_t at = from + (size_t)r; at < n;) {
		size_t k = n - at < sizeof(zeros) ? n - at : sizeof(zeros);
		int rc = ods_drv.accel->copy_to_device(io->buf + at, zeros, k);
		if (rc)
			return -rc;
		at += k;
	}
	return (ssize_t)n;
}

/* device memory through cuFile, with the buffer's context current */
static ssize_t cufile_path_rw(struct ods_io *io, struct gds_handle *g)
{
	/* a range registered with cuFile must be named by its base */
	char *base = io->buf;
	off_t boff = 0;
	struct ods_region r;
	if (ods_region_find((uintptr_t)io->buf, &r) && r.be_priv) {
		base = (char *)r.base;
		boff = (off_t)((uintptr_t)io->buf - r.base);
	}

	if (io->opcode == OPENDS_READ) {
		/* NVIDIA's compatibility mode (1.15, on the H200) writes device
		 * memory past the bytes it returns when a read reaches past EOF
		 * (test_gds_rw, test_gpu and the cuFile compat test caught it):
		 * ask it for the bytes the file has, nothing beyond. Unaligned
		 * reads inside the file come back exact. (Sending the block that
		 * holds EOF through the POSIX path instead fixed this too, but
		 * hung stream-ordered reads on the H200.) */
		size_t n = ods_handle_valid(io->fh, io->off, io->size);
		ssize_t got = n ? cufile_rw(io, g->cfh, base, boff, n, io->off) : 0;
		if (got >= 0 && (size_t)got < n)
			got = refill(io, (size_t)got, n); /* truncated meanwhile */
		return got;
	}
	if (!io->fh->direct)
		return cufile_rw(io, g->cfh, base, boff, io->size, io->off);

	/* O_DIRECT write: partial blocks at either end go through the POSIX
	 * path's buffered twin, whole blocks through cuFile. */
	struct ods_blocks s;
	if (!ods_split_blocks(io->off, io->size, io->off + (off_t)io->size, &s))
		return posix_piece(io, 0, io->size);
	ssize_t n;
	if (s.head && (n = posix_piece(io, 0, s.head)) < 0)
		return n;
	if ((n = cufile_rw(io, g->cfh, base, boff + (off_t)s.head, s.mid, io->off + (off_t)s.head)) < 0)
		return n;
	if (s.tail && (n = posix_piece(io, s.head + s.mid, s.tail)) < 0)
		return n;
	return (ssize_t)io->size;
}

static ssize_t gds_rw(struct ods_io *io)
{
	struct gds_handle *g = io->fh->be;
	/* a read of a file of unknown size (/proc-like, size 0) cannot be
	 * clipped to EOF for cuFile: the POSIX path stages it exactly */
	if (io->mem != ODS_MEM_DEVICE || !g || g->path != PATH_CUFILE ||
	    (io->opcode == OPENDS_READ && ods_handle_size(io->fh) < 0))
		return ods_posix_rw(io);
	struct ctx_saved s = bind_context(io->buf);
	ssize_t n = cufile_path_rw(io, g);
	unbind_context(s);
	return n;
}

/* ---- registered buffers --------------------------------------------------- */

/* Device ranges registered with OpenDS are registered with cuFile too (best
 * effort: a range cuFile refuses is still served, through its bounce
 * buffers); priv is non-NULL when cuFile has the range. */
static int gds_buf_register(void *p, size_t n, enum ods_mem_kind k, void **priv)
{
	*priv = NULL;
	if (k != ODS_MEM_DEVICE || !gs.drv_open)
		return 0;
	struct ctx_saved s = bind_context(p);
	if (cf.cuFileBufRegister(p, n, 0).err == CU_FILE_SUCCESS)
		*priv = (void *)1;
	unbind_context(s);
	return 0;
}

static void gds_buf_deregister(void *p, size_t n, enum ods_mem_kind k, void *priv)
{
	(void)n;
	(void)k;
	if (!priv || !gs.drv_open)
		return;
	struct ctx_saved s = bind_context(p);
	cf.cuFileBufDeregister(p);
	unbind_context(s);
}

static void gds_describe(struct ods_handle *h, char *buf, size_t n)
{
	if (!h) {
		snprintf(buf, n, "%s (%s path)", gs.mode, gs.direct ? "direct" : "compatibility");
		return;
	}
	struct gds_handle *g = h->be;
	if (g && g->path == PATH_CUFILE)
		snprintf(buf, n, "cuFile for device memory (%s path), POSIX for host memory",
			 gs.direct ? "direct" : "compatibility");
	else
		snprintf(buf, n, "POSIX path: cuFileHandleRegister refused the file (%d)", g ? g->refused : 0);
}

const struct ods_backend ods_backend_gds = {
	.name = "gds",
	.descr = "NVIDIA cuFile (GPUDirect Storage) for device memory; POSIX for the rest",
	.probe = gds_probe,
	.open = gds_open,
	.close = gds_close,
	.handle_open = gds_handle_open,
	.handle_close = gds_handle_close,
	.rw = gds_rw,
	.describe = gds_describe,
	.buf_register = gds_buf_register,
	.buf_deregister = gds_buf_deregister,
};
