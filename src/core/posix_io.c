/*
 * The POSIX read/write path: pread/pwrite into host memory, correct for any
 * size and offset, with or without O_DIRECT on the caller's fd. A core
 * service, not a backend: the ref backend is this path alone (the oracle
 * every other backend is tested against); uring hands it the rare requests
 * its pipeline does not take, and gds the host memory and files cuFile
 * refuses. Accelerator memory is staged through a host buffer with the
 * driver's accelerator's synchronous copies.
 *
 * O_DIRECT fds: the block-aligned middle of a request whose buffer is
 * aligned goes straight through the caller's fd. Everything else goes
 * through the handle's buffered twin fd (the same file without O_DIRECT),
 * so partial blocks are merged by the kernel under its page locks and
 * concurrent writers to other bytes of the block lose nothing. Where no
 * twin can be opened, reads use an aligned bounce buffer and writes take
 * O_DIRECT off the caller's open file for the call (undirect_rw).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ods.h"

#define BOUNCE (1u << 20)
#define DIRECT_MAX ((size_t)1 << 30) /* bytes per direct pread */

/* Read [off, off+size) of a direct fd through an aligned bounce buffer. */
static ssize_t bounce_read(int fd, char *dst, size_t size, off_t off)
{
	char *b = ods_aligned_alloc(BOUNCE);
	if (!b)
		return -ENOMEM;
	size_t done = 0;
	while (done < size) {
		off_t pos = off + (off_t)done;
		off_t a0 = ods_align_down(pos);
		size_t lead = (size_t)(pos - a0);
		size_t want = size - done + lead;
		want = want > BOUNCE ? BOUNCE : (want + ODS_ALIGN - 1) & ~((size_t)ODS_ALIGN - 1);
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

/* Locks by file, not by handle: two handles (or two fds) of one file share
 * one. Striped by (device, inode): files that share a stripe only wait for
 * each other. */
#define NSTRIPE 64
static pthread_mutex_t stripes[NSTRIPE];
static pthread_once_t stripes_once = PTHREAD_ONCE_INIT;

static void stripes_init(void)
{
	for (unsigned i = 0; i < NSTRIPE; i++)
		pthread_mutex_init(&stripes[i], NULL);
}

static pthread_mutex_t *file_lock(const struct ods_handle *h)
{
	pthread_once(&stripes_once, stripes_init);
	uint64_t x = (uint64_t)h->ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)h->dev;
	return &stripes[(x >> 32) % NSTRIPE];
}

void ods_posix_forget(void)
{
	/* a thread of the parent may have held one at the fork */
	stripes_init();
}

/* A write (or read) of partial blocks on a direct fd that has no buffered
 * twin (the file's permissions changed after the caller opened it, or the
 * process dropped privileges). O_DIRECT is taken off the caller's open file
 * for the one call, under the file's lock, so the kernel merges the bytes
 * into the page cache as for any pwrite: nothing is read back and written
 * whole, so a write-only fd works, another writer of the same block (any
 * handle) loses nothing, and nothing is truncated afterwards (issue 15
 * item 2: the read-modify-write this replaces did all three). Other I/O on
 * the same open file meanwhile goes through the page cache, which the
 * kernel keeps coherent with direct I/O. */
static ssize_t undirect_rw(struct ods_io *io, char *buf, size_t size, off_t off)
{
	struct ods_handle *h = io->fh;
	pthread_mutex_t *m = file_lock(h);
	ssize_t r;
	pthread_mutex_lock(m);
	int fl = fcntl(h->fd, F_GETFL);
	if (fl < 0 || ((fl & O_DIRECT) && fcntl(h->fd, F_SETFL, fl & ~O_DIRECT) < 0)) {
		r = -errno;
	} else {
		r = io->opcode == OPENDS_READ ? ods_pread_full(h->fd, buf, size, off)
					      : ods_pwrite_full(h->fd, buf, size, off);
		if ((fl & O_DIRECT) && fcntl(h->fd, F_SETFL, fl) < 0 && r >= 0)
			r = -errno;
	}
	pthread_mutex_unlock(m);
	return r;
}

/* Transfer through the buffered path: the twin fd, else (reads) an aligned
 * bounce or (writes, and reads of a write-only fd) undirect_rw. */
static ssize_t buffered_rw(struct ods_io *io, char *buf, size_t size, off_t off)
{
	int fd = ods_handle_fd_buffered(io->fh);
	if (fd >= 0)
		return io->opcode == OPENDS_READ ? ods_pread_full(fd, buf, size, off)
						 : ods_pwrite_full(fd, buf, size, off);
	if (io->opcode == OPENDS_READ && io->fh->accmode != O_WRONLY)
		return bounce_read(io->fh->fd, buf, size, off);
	return undirect_rw(io, buf, size, off);
}

static ssize_t plain_rw(struct ods_io *io, int fd, char *buf, size_t size, off_t off)
{
	return io->opcode == OPENDS_READ ? ods_pread_full(fd, buf, size, off) : ods_pwrite_full(fd, buf, size, off);
}

/* Fill [from, to) of buf with what the buffered path reads of the file at
 * off + from, and zeros where the file now ends before: the bytes a direct
 * transfer (or cuFile) wrote past a short count after a concurrent
 * truncation become bytes of the result, so nothing past the count the
 * call returns is written (issue 15 item 10). Returns to or -errno. */
static ssize_t refill(struct ods_io *io, char *buf, size_t from, size_t to, off_t off)
{
	ssize_t r = buffered_rw(io, buf + from, to - from, off + (off_t)from);
	if (r < 0)
		return r;
	memset(buf + from + r, 0, to - from - (size_t)r);
	return (ssize_t)to;
}

/* The block-aligned middle of a read on the caller's direct fd (inside
 * the file when the call began). A direct read that comes back short has
 * met an EOF that a truncation moved since, or a file system that returns
 * short counts (FUSE); the kernel may then have written more of buf than
 * it counts: the rest of the block holding the new EOF, and (iomap) zeros
 * over the hole the truncation left, up to the end of the request. So the
 * whole rest is refilled through the buffered path and counted. A read
 * that returns 0 wrote nothing. */
static ssize_t direct_read(struct ods_io *io, char *buf, size_t size, off_t off)
{
	size_t done = 0;
	while (done < size) {
		/* a piece the kernel reads whole (it caps one read near 2 GiB):
		 * anything less than asked is short */
		size_t want = size - done < DIRECT_MAX ? size - done : DIRECT_MAX;
		ssize_t r = pread(io->fh->fd, buf + done, want, off + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		done += (size_t)r;
		if ((size_t)r < want)
			return refill(io, buf, done, size, off);
	}
	return (ssize_t)done;
}

/* Host-memory transfer of [off, off+size) to or from buf. */
static ssize_t host_rw(struct ods_io *io, char *buf, size_t size, off_t off)
{
	struct ods_handle *h = io->fh;
	if (!h->direct)
		return plain_rw(io, h->fd, buf, size, off);

	/* Split into an unaligned head, an aligned middle and a tail. The
	 * middle can go direct only when the buffer is aligned with it. A
	 * direct read of the block holding EOF fills the whole block of the
	 * caller's buffer; reads keep that block on the buffered path so
	 * nothing past the returned count is written. */
	off_t mid_end = off + (off_t)size;
	if (io->opcode == OPENDS_READ) {
		off_t eof = ods_handle_size(h);
		if (eof >= 0 && eof < mid_end)
			mid_end = eof;
	}
	struct ods_blocks s;
	if (!ods_split_blocks(off, size, mid_end, &s) || ((uintptr_t)(buf + s.head) & (ODS_ALIGN - 1)))
		return buffered_rw(io, buf, size, off);

	ssize_t r;
	if (s.head) {
		r = buffered_rw(io, buf, s.head, off);
		if (r < 0 || (size_t)r < s.head)
			return r;
	}
	off_t m0 = off + (off_t)s.head, m1 = m0 + (off_t)s.mid;
	r = io->opcode == OPENDS_READ ? direct_read(io, buf + s.head, s.mid, m0)
				      : plain_rw(io, h->fd, buf + s.head, s.mid, m0);
	if (r == -EINVAL) /* the device wants a larger alignment */
		r = buffered_rw(io, buf + s.head, s.mid, m0);
	if (r < 0)
		return r;
	if ((size_t)r < s.mid)
		return (ssize_t)(s.head + (size_t)r);
	if (s.tail) {
		r = buffered_rw(io, buf + s.head + s.mid, s.tail, m1);
		if (r < 0)
			return r;
		return (ssize_t)(s.head + s.mid + (size_t)r);
	}
	return (ssize_t)size;
}

int ods_io_to_device(const struct ods_io *io, void *dst, const void *src, size_t n)
{
	const struct ods_accel *a = ods_drv.accel;
	return a->copy_to_device_on ? a->copy_to_device_on(io->dev, dst, src, n) : a->copy_to_device(dst, src, n);
}

/* Read [pos, pos + n) of the file, clamped at fsize (its size at the
 * call), into the aligned bounce b: the blocks that cover it O_DIRECT
 * through dfd, in one pread where the kernel takes it whole. Unlike the
 * caller's memory (host_rw), a bounce may take the bytes a direct read of
 * the block holding EOF returns past it, so a small file read whole is one
 * direct read (the shape of the disk ceiling: threads x pread O_DIRECT)
 * rather than a direct middle and a buffered tail. The kernel writes dirty
 * cached pages of the range back before a direct read, so the bytes are
 * the file's; what a direct read does not return (the file shrank since
 * fsize, or a file system that returns short counts) is read again through
 * the buffered path, which stops where the file now ends. The bytes land
 * at b + (pos - ods_align_down(pos)); returns their count, -errno, or
 * -EINVAL with nothing read where dfd refuses O_DIRECT here. b holds at
 * least n + 2 * ODS_ALIGN bytes. */
static ssize_t blocks_read(struct ods_io *io, int dfd, char *b, off_t pos, size_t n, off_t fsize)
{
	off_t end = pos + (off_t)n < fsize ? pos + (off_t)n : fsize;
	if (end <= pos)
		return 0;
	off_t a0 = ods_align_down(pos);
	size_t lead = (size_t)(pos - a0);
	size_t want = ((size_t)(end - a0) + ODS_ALIGN - 1) & ~((size_t)ODS_ALIGN - 1);
	size_t done = 0;
	while (done < want) {
		size_t k = want - done < DIRECT_MAX ? want - done : DIRECT_MAX;
		ssize_t r = pread(dfd, b + done, k, a0 + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno; /* (-EINVAL at the first read: O_DIRECT refused) */
		done += (size_t)r;
		if (r == 0 || (size_t)r < k)
			break; /* EOF, or a short count: the buffered path tells */
	}
	if (a0 + (off_t)done < end) {
		ssize_t r = buffered_rw(io, b + done, (size_t)(end - a0) - done, a0 + (off_t)done);
		if (r < 0)
			return r;
		done += (size_t)r;
	}
	size_t got = done > lead ? done - lead : 0;
	return (ssize_t)(got < (size_t)(end - pos) ? got : (size_t)(end - pos));
}

/* Accelerator memory (or a lent bounce's host reads): stage each piece
 * through an aligned host buffer with the accelerator's synchronous
 * copies. Simple and slow on purpose: the fast staging pipeline is
 * uring's. Reads with an O_DIRECT fd and a known file size go in whole
 * blocks (blocks_read); the rest through host_rw. */
ssize_t ods_posix_staged(struct ods_io *io, const struct ods_bounce *lend)
{
	const struct ods_accel *accel = ods_drv.accel;
	struct ods_handle *h = io->fh;
	bool rd = io->opcode == OPENDS_READ;
	int dfd = lend ? lend->dfd : h->direct ? h->fd : -1;
	off_t fsize = !rd || dfd < 0 ? -1 : lend ? lend->fsize : ods_handle_size(h);
	size_t piece;
	char *b;
	if (lend) {
		b = lend->b;
		piece = lend->size - 2 * ODS_ALIGN;
	} else {
		/* small requests get a small bounce: a 4 MiB allocation per
		 * 4 KiB read would cost more than the read */
		piece = BOUNCE * 4;
		if (io->size < piece)
			piece = io->size;
		if (!(b = ods_aligned_alloc(piece + 2 * ODS_ALIGN)))
			return -ENOMEM;
	}
	ssize_t ret = 0;
	size_t done = 0;
	while (done < io->size) {
		size_t n = io->size - done < piece ? io->size - done : piece;
		off_t pos = io->off + (off_t)done;
		ssize_t r;
		int rc = 0;
		if (rd) {
			char *src = b;
			r = fsize >= 0 ? blocks_read(io, dfd, b, pos, n, fsize) : host_rw(io, b, n, pos);
			if (r == -EINVAL && fsize >= 0) {
				fsize = -1; /* O_DIRECT refused here (nothing of the
					       caller's memory written): the rest
					       through host_rw */
				continue;
			}
			if (fsize >= 0)
				src = b + (pos - ods_align_down(pos));
			if (r > 0 && io->mem == ODS_MEM_HOST)
				memcpy(io->buf + done, src, (size_t)r);
			else if (r > 0)
				rc = ods_io_to_device(io, io->buf + done, src, (size_t)r);
		} else {
			rc = accel->copy_to_host(b, io->buf + done, n);
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
	if (!lend)
		free(b);
	return ret < 0 ? ret : (ssize_t)done;
}

ssize_t ods_posix_rw(struct ods_io *io)
{
	if (io->mem == ODS_MEM_DEVICE)
		return ods_posix_staged(io, NULL);
	return host_rw(io, io->buf, io->size, io->off);
}
