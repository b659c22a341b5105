/*
 * The reference backend: POSIX pread/pwrite into host memory. Correct for
 * any size and offset, with or without O_DIRECT on the caller's fd; the
 * oracle every other backend is tested against. Async work runs on the
 * core's worker pool (no submit of its own). Accelerator memory is staged
 * through a host buffer with synchronous copies.
 *
 * O_DIRECT fds: the block-aligned middle of a request whose buffer is
 * aligned goes straight through the caller's fd. Everything else goes
 * through the handle's buffered twin fd (the same file without O_DIRECT),
 * so partial blocks are merged by the kernel under its page locks and
 * concurrent writers to other bytes of the block lose nothing. Where no
 * twin can be opened, reads use an aligned bounce buffer and writes a
 * read-modify-write under a per-handle lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ods.h"

#define BOUNCE (1u << 20)
#define A ((off_t)ODS_ALIGN)

static int ref_probe(const struct ods_config *cfg, char *why, size_t n)
{
	(void)cfg;
	(void)why;
	(void)n;
	return 0;
}

static const struct ods_accel *ref_accel;

static int ref_open(const struct ods_config *cfg, const struct ods_accel *accel)
{
	(void)cfg;
	ref_accel = accel;
	return 0;
}

static void ref_close(void)
{
}

/* Read [off, off+size) of a direct fd through an aligned bounce buffer. */
static ssize_t bounce_read(int fd, char *dst, size_t size, off_t off)
{
	char *b = ods_aligned_alloc(BOUNCE);
	if (!b)
		return -ENOMEM;
	size_t done = 0;
	while (done < size) {
		off_t pos = off + (off_t)done;
		off_t a0 = pos & ~(A - 1);
		size_t lead = (size_t)(pos - a0);
		size_t want = size - done + lead;
		want = want > BOUNCE ? BOUNCE : (want + (size_t)A - 1) & ~((size_t)A - 1);
		ssize_t r = ods_pread_full(fd, b, want, a0);
		if (r < 0) {
			free(b);
			return r;
		}
		if ((size_t)r <= lead)
			break; /* EOF */
		size_t n = (size_t)r - lead;
		if (n > size - done)
			n = size - done;
		memcpy(dst + done, b + lead, n);
		done += n;
		if ((size_t)r < want)
			break; /* EOF inside this piece */
	}
	free(b);
	return (ssize_t)done;
}

/* Read-modify-write of one partial block range on a direct fd; only for
 * when no buffered twin exists. Serialised per handle. */
static ssize_t rmw_write(struct ods_handle *h, const char *src, size_t size, off_t off)
{
	char *b = ods_aligned_alloc(BOUNCE);
	if (!b)
		return -ENOMEM;
	ssize_t ret = 0;
	size_t done = 0;
	pthread_mutex_lock(&h->twin_lock);
	off_t old_size = ods_handle_size(h);
	while (done < size) {
		off_t pos = off + (off_t)done;
		off_t a0 = pos & ~(A - 1);
		size_t lead = (size_t)(pos - a0);
		size_t n = size - done;
		if (n > BOUNCE - lead)
			n = BOUNCE - lead;
		size_t span = (lead + n + (size_t)A - 1) & ~((size_t)A - 1);
		ssize_t r = ods_pread_full(h->fd, b, span, a0);
		if (r < 0) {
			ret = r;
			break;
		}
		memset(b + r, 0, span - (size_t)r);
		memcpy(b + lead, src + done, n);
		r = ods_pwrite_full(h->fd, b, span, a0);
		if (r < 0) {
			ret = r;
			break;
		}
		done += n;
	}
	pthread_mutex_unlock(&h->twin_lock);
	free(b);
	if (ret < 0)
		return ret;
	/* Whole blocks written past the old end leave the file longer than a
	 * pwrite would; cut it back to max(old size, end of this write). */
	off_t want = off + (off_t)size > old_size ? off + (off_t)size : old_size;
	if (!h->blockdev && old_size >= 0 && ods_handle_size(h) > want && ftruncate(h->fd, want) < 0)
		return -errno;
	return (ssize_t)size;
}

/* Transfer through the buffered path: the twin fd, or bounce/RMW. */
static ssize_t buffered_rw(struct ods_io *io, char *buf, size_t size, off_t off)
{
	int fd = ods_handle_fd_buffered(io->fh);
	if (io->opcode == OPENDS_READ)
		return fd >= 0 ? ods_pread_full(fd, buf, size, off) : bounce_read(io->fh->fd, buf, size, off);
	return fd >= 0 ? ods_pwrite_full(fd, buf, size, off) : rmw_write(io->fh, buf, size, off);
}

static ssize_t plain_rw(struct ods_io *io, int fd, char *buf, size_t size, off_t off)
{
	return io->opcode == OPENDS_READ ? ods_pread_full(fd, buf, size, off) : ods_pwrite_full(fd, buf, size, off);
}

/* Host-memory transfer of [off, off+size) to or from buf. */
static ssize_t host_rw(struct ods_io *io, char *buf, size_t size, off_t off)
{
	struct ods_handle *h = io->fh;
	if (!h->direct)
		return plain_rw(io, h->fd, buf, size, off);

	/* Split into an unaligned head, an aligned middle and a tail. The
	 * middle can go direct only when the buffer is aligned with it. */
	off_t end = off + (off_t)size;
	off_t m0 = (off + A - 1) & ~(A - 1), m1 = end & ~(A - 1);
	if (io->opcode == OPENDS_READ) {
		/* A direct read of the block holding EOF fills the whole block
		 * of the caller's buffer; keep that block on the buffered
		 * path so nothing past the returned count is written. */
		off_t eof = ods_handle_size(h);
		if (eof >= 0 && m1 > (eof & ~(A - 1)))
			m1 = eof & ~(A - 1);
	}
	if (m1 <= m0 || ((uintptr_t)(buf + (m0 - off)) & (ODS_ALIGN - 1)))
		return buffered_rw(io, buf, size, off);

	size_t head = (size_t)(m0 - off), mid = (size_t)(m1 - m0), tail = (size_t)(end - m1);
	ssize_t r;
	if (head) {
		r = buffered_rw(io, buf, head, off);
		if (r < 0 || (size_t)r < head)
			return r;
	}
	r = plain_rw(io, h->fd, buf + head, mid, m0);
	if (r == -EINVAL) /* the device wants a larger alignment */
		r = buffered_rw(io, buf + head, mid, m0);
	if (r < 0)
		return r;
	if ((size_t)r < mid)
		return (ssize_t)(head + (size_t)r);
	if (tail) {
		r = buffered_rw(io, buf + head + mid, tail, m1);
		if (r < 0)
			return r;
		return (ssize_t)(head + mid + (size_t)r);
	}
	return (ssize_t)size;
}

/* Accelerator memory: stage each piece through an aligned host buffer
 * with the accelerator's synchronous copies. Simple and slow on purpose:
 * this is the oracle, the fast staging pipeline lives in uring. */
static ssize_t staged_rw(struct ods_io *io)
{
	/* small requests get a small bounce: a 4 MiB allocation per 4 KiB
	 * read would cost more than the read */
	size_t piece = BOUNCE * 4;
	if (io->size + 2 * ODS_ALIGN < piece)
		piece = io->size + 2 * ODS_ALIGN;
	char *b = ods_aligned_alloc(piece);
	if (!b)
		return -ENOMEM;
	ssize_t ret = 0;
	size_t done = 0;
	while (done < io->size) {
		size_t n = io->size - done < piece ? io->size - done : piece;
		off_t pos = io->off + (off_t)done;
		ssize_t r;
		int rc = 0;
		if (io->opcode == OPENDS_READ) {
			r = host_rw(io, b, n, pos);
			if (r > 0)
				rc = ref_accel->copy_to_device(io->buf + done, b, (size_t)r);
		} else {
			rc = ref_accel->copy_to_host(b, io->buf + done, n);
			r = rc ? 0 : host_rw(io, b, n, pos);
		}
		if (rc) {
			ret = -rc;
			break;
		}
		if (r < 0) {
			ret = r;
			break;
		}
		done += (size_t)r;
		if ((size_t)r < n)
			break; /* EOF */
	}
	free(b);
	return ret < 0 ? ret : (ssize_t)done;
}

static ssize_t ref_rw(struct ods_io *io)
{
	if (io->mem == ODS_MEM_DEVICE)
		return staged_rw(io);
	return host_rw(io, io->buf, io->size, io->off);
}

static void ref_describe(struct ods_handle *h, char *buf, size_t n)
{
	if (!h)
		snprintf(buf, n, "POSIX pread/pwrite on %u pool threads", ods_drv.cfg.io_threads ? ods_drv.cfg.io_threads : 4);
	else if (h->direct)
		snprintf(buf, n, "pread/pwrite: aligned blocks direct, partial blocks %s",
			 ods_handle_fd_buffered(h) >= 0 ? "through a buffered twin fd" : "through a bounce buffer");
	else
		snprintf(buf, n, "buffered pread/pwrite");
}

const struct ods_backend ods_backend_ref = {
	.name = "ref",
	.descr = "POSIX pread/pwrite on host memory; the reference for all others",
	.probe = ref_probe,
	.open = ref_open,
	.close = ref_close,
	.rw = ref_rw,
	.describe = ref_describe,
};
