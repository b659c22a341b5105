/*
 * A stand-in libcufile.so.0 for the CPU suite: cuFile's calls over POSIX,
 * on memory the test addresses directly (the hostdev accelerator layer
 * presents host memory as device memory). It lets every gds test run the
 * backend's own logic (which range goes to cuFile, which to the POSIX
 * path, handles cuFile refuses, error translation) on a machine without a
 * GPU, next to libcuda.so.1's stand-in (fake_cuda.c).
 *
 * It behaves as NVIDIA's 1.15 did in compatibility mode on the H200 where
 * that matters to the backend, and is strict where cuFile's rules are:
 * - files on tmpfs are refused (no block device behind them);
 * - a read that reaches EOF writes past the bytes it returns, up to the
 *   size asked (0xEE), as NVIDIA's did: the backend must not ask for them;
 * - on an O_DIRECT fd, writes must be whole aligned blocks: the backend
 *   keeps partial blocks on its buffered path so concurrent writers to the
 *   rest of a block lose nothing; reads take any range (bounced).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#define ODS_CUFILE_NO_CUDA_H
#include "cufile.h"

#define BLK 4096
#define TMPFS_MAGIC_ 0x01021994

struct fh {
	int fd;
	bool direct;
};

static int opens;

static CUfileError_t ok(void)
{
	return (CUfileError_t){ CU_FILE_SUCCESS, 0 };
}

static CUfileError_t err(CUfileOpError e)
{
	return (CUfileError_t){ e, 0 };
}

CUfileError_t cuFileDriverOpen(void)
{
	__atomic_add_fetch(&opens, 1, __ATOMIC_RELAXED);
	return ok();
}

CUfileError_t cuFileDriverClose_v2(void)
{
	if (__atomic_sub_fetch(&opens, 1, __ATOMIC_RELAXED) < 0) {
		__atomic_store_n(&opens, 0, __ATOMIC_RELAXED);
		return err(CU_FILE_DRIVER_NOT_INITIALIZED);
	}
	return ok();
}

#undef cuFileDriverClose /* the header maps it to _v2; the old symbol exists too */
CUfileError_t cuFileDriverClose(void)
{
	return cuFileDriverClose_v2();
}

CUfileError_t cuFileGetVersion(int *version)
{
	if (!version)
		return err(CU_FILE_INVALID_VALUE);
	*version = 1150;
	return ok();
}

/* compatibility mode: no nvidia-fs, no P2P */
CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *p)
{
	if (!p)
		return err(CU_FILE_INVALID_VALUE);
	memset(p, 0, sizeof(*p));
	p->nvfs.dcontrolflags = 1u << CU_FILE_ALLOW_COMPAT_MODE;
	p->max_device_cache_size = 128 << 10;
	p->max_device_pinned_mem_size = (size_t)1 << 30;
	p->nvfs.max_direct_io_size = 16384;
	p->max_batch_io_size = 128;
	return ok();
}

CUfileError_t cuFileHandleRegister(CUfileHandle_t *out, CUfileDescr_t *d)
{
	if (!out || !d || d->type != CU_FILE_HANDLE_TYPE_OPAQUE_FD || d->handle.fd < 0)
		return err(CU_FILE_INVALID_VALUE);
	struct statfs sf;
	if (fstatfs(d->handle.fd, &sf) != 0)
		return err(CU_FILE_INVALID_FILE_TYPE);
	if (sf.f_type == TMPFS_MAGIC_)
		return err(CU_FILE_HANDLE_NOT_REGISTERED); /* NVIDIA's 5027 */
	int fl = fcntl(d->handle.fd, F_GETFL);
	struct fh *h = malloc(sizeof(*h));
	if (!h)
		return err(CU_FILE_INTERNAL_ERROR);
	h->fd = d->handle.fd;
	h->direct = fl >= 0 && (fl & O_DIRECT);
	*out = h;
	return ok();
}

void cuFileHandleDeregister(CUfileHandle_t fh)
{
	free(fh);
}

CUfileError_t cuFileBufRegister(const void *p, size_t n, int flags)
{
	(void)flags;
	return p && n ? ok() : err(CU_FILE_INVALID_VALUE);
}

CUfileError_t cuFileBufDeregister(const void *p)
{
	return p ? ok() : err(CU_FILE_INVALID_VALUE);
}

static ssize_t fail_errno(int e)
{
	errno = e;
	return -1;
}

ssize_t cuFileRead(CUfileHandle_t fh, void *base, size_t size, off_t off, off_t boff)
{
	struct fh *h = fh;
	if (!h || !base || off < 0 || boff < 0)
		return -CU_FILE_INVALID_VALUE;
	char *dst = (char *)base + boff;
	size_t got = 0;
	if (!h->direct) {
		while (got < size) {
			ssize_t r = pread(h->fd, dst + got, size - got, off + (off_t)got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return -1;
			if (r == 0)
				break;
			got += (size_t)r;
		}
	} else {
		/* the covering aligned blocks through an aligned bounce */
		off_t a0 = off & ~(off_t)(BLK - 1);
		size_t span = ((size_t)(off - a0) + size + BLK - 1) & ~(size_t)(BLK - 1);
		char *b;
		if (posix_memalign((void **)&b, BLK, span ? span : BLK))
			return fail_errno(ENOMEM);
		size_t have = 0;
		while (have < span) {
			ssize_t r = pread(h->fd, b + have, span - have, a0 + (off_t)have);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				free(b);
				return -1;
			}
			if (r == 0)
				break;
			have += (size_t)r;
			if (have & (BLK - 1))
				break; /* EOF inside a block */
		}
		size_t skip = (size_t)(off - a0);
		got = have > skip ? have - skip : 0;
		if (got > size)
			got = size;
		memcpy(dst, b + skip, got);
		free(b);
	}
	if (got < size)
		memset(dst + got, 0xEE, size - got); /* NVIDIA's write past EOF */
	return (ssize_t)got;
}

ssize_t cuFileWrite(CUfileHandle_t fh, const void *base, size_t size, off_t off, off_t boff)
{
	struct fh *h = fh;
	if (!h || !base || off < 0 || boff < 0)
		return -CU_FILE_INVALID_VALUE;
	const char *src = (const char *)base + boff;
	if (h->direct && ((off | (off_t)size) & (BLK - 1)))
		return fail_errno(EINVAL);
	const char *from = src;
	char *b = NULL;
	if (h->direct && ((uintptr_t)src & (BLK - 1))) {
		if (posix_memalign((void **)&b, BLK, size ? size : BLK))
			return fail_errno(ENOMEM);
		memcpy(b, src, size);
		from = b;
	}
	size_t done = 0;
	while (done < size) {
		ssize_t r = pwrite(h->fd, from + done, size - done, off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;
			free(b);
			return fail_errno(e);
		}
		done += (size_t)r;
	}
	free(b);
	return (ssize_t)done;
}
