/* Registries of file handles and memory ranges. Both are read on every I/O
 * and written rarely, so both sit behind reader-writer locks. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

#include "ods.h"
#include "source.h"

static struct ods_slots handles;
static void region_release(const struct ods_region *r);
/* fds with a registered handle, to refuse registering one twice.
 * Adaptive (spins a little before sleeping): it is held for a fraction of
 * a microsecond by every register and deregister, and with several
 * threads each opening a File per image (8 on the H200's imagenetish sync
 * leg: register 2.2 us and deregister 4.4 us each against 0.5 and 0.2 us
 * with one thread) a plain mutex sends each loser to sleep in the kernel,
 * where a futex wake-up costs ~14 us on that VM. */
#define REG_LOCK_INIT PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
static pthread_mutex_t fd_lock = REG_LOCK_INIT;
static uint8_t *fd_used;
static size_t fd_cap;

/* Handles of fds freed by deregistration, kept for the next registration
 * (a File per image registers and deregisters one per file, issue 17):
 * one calloc and one free fewer per file on the caller's thread, where
 * many small async reads otherwise meet the workers' frees of their
 * requests in the malloc arena (and its heap top trimmed and grown back:
 * page faults). Under spare_lock, its own: not fd_lock, which every
 * register and deregister takes too. */
#define NSPARE 64
static pthread_mutex_t spare_lock = REG_LOCK_INIT;
static struct ods_handle *spare[NSPARE];
static unsigned nspare;

/* registered memory: sorted by base, non-overlapping */
static pthread_rwlock_t regions_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct ods_region *regions;
static size_t nregions, regions_cap;

int ods_registry_init(void)
{
	ods_cstats_open();
	ods_io_switches();
	ods_slots_init(&handles);
	return 0;
}

/* Wait until no public call holds h (it is out of the table: no call
 * finds it any more). Calls take microseconds, a read of a slow file
 * longer: a short spin, then naps. */
static void handle_unused(struct ods_handle *h)
{
	for (unsigned i = 0; atomic_load_explicit(&h->users, memory_order_acquire) > 0; i++) {
		if (i < 100) {
			ods_cpu_relax();
			continue;
		}
		struct timespec ts = { 0, i < 1100 ? 20000 : 1000000 };
		nanosleep(&ts, NULL);
	}
}

static void handle_free(struct ods_handle *h)
{
	handle_unused(h);      /* calls that looked it up (a synchronous read) */
	ods_handle_quiesce(h); /* requests in flight still use the handle and its fds */
	if (h->src) { /* a source: no fd, no backend state */
		ods_source_free(h);
		pthread_mutex_destroy(&h->twin_lock);
		free(h);
		return;
	}
	if (ods_drv.be->handle_close)
		ods_drv.be->handle_close(h);
	if (h->twin_fd >= 0)
		close(h->twin_fd);
	pthread_mutex_destroy(&h->twin_lock);
	pthread_mutex_lock(&spare_lock);
	if (nspare < NSPARE) {
		spare[nspare++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&spare_lock);
	free(h);
}

/* a zeroed handle: a spare, else a new one */
static struct ods_handle *handle_new(void)
{
	pthread_mutex_lock(&spare_lock);
	struct ods_handle *h = nspare ? spare[--nspare] : NULL;
	pthread_mutex_unlock(&spare_lock);
	if (!h)
		return calloc(1, sizeof(*h));
	memset(h, 0, sizeof(*h));
	return h;
}

static void handle_free_cb(void *h)
{
	handle_free(h);
}

void ods_registry_fini(void)
{
	ods_cstats_close();
	ods_slots_fini(&handles, handle_free_cb);
	while (nspare)
		free(spare[--nspare]);
	free(fd_used);
	fd_used = NULL;
	fd_cap = 0;
	for (size_t i = 0; i < nregions; i++)
		region_release(&regions[i]);
	free(regions);
	regions = NULL;
	nregions = regions_cap = 0;
}

/* In a child after fork(): forget the parent's handles and ranges without
 * reading them (another thread may have been changing them at the fork)
 * or taking their locks (it may have held them). The memory is left: the
 * child cannot know what is consistent. The fds the library opened (twins)
 * stay open in the child, as copies of the parent's, closed on exec. */
void ods_registry_forget(void)
{
	ods_slots_init(&handles);
	fd_lock = (pthread_mutex_t)REG_LOCK_INIT;
	spare_lock = (pthread_mutex_t)REG_LOCK_INIT;
	nspare = 0;
	fd_used = NULL;
	fd_cap = 0;
	regions_lock = (pthread_rwlock_t)PTHREAD_RWLOCK_INITIALIZER;
	regions = NULL;
	nregions = regions_cap = 0;
}

/* ---- handles ---------------------------------------------------------- */

static bool fd_mark(int fd, bool used)
{
	if ((size_t)fd >= fd_cap) {
		size_t ncap = fd_cap ? fd_cap : 1024;
		while (ncap <= (size_t)fd)
			ncap *= 2;
		uint8_t *n = realloc(fd_used, ncap);
		if (!n)
			return false;
		memset(n + fd_cap, 0, ncap - fd_cap);
		fd_used = n;
		fd_cap = ncap;
	}
	fd_used[fd] = used;
	return true;
}

/* Hold h for the public call in progress on this thread (ods.h). */
static void hold(struct ods_handle *h)
{
	struct ods_calls *c = &ods_calls;
	unsigned i = c->nheld;
	if (i && (i <= 2 ? c->held[i - 1] : c->more[i - 3]) == h)
		return; /* held already (a batch's entries on one file) */
	if (i >= 2) {
		if (i - 2 == c->cap) {
			unsigned ncap = c->cap ? c->cap * 2 : 16;
			struct ods_handle **n = realloc(c->more, ncap * sizeof(*n));
			if (!n) /* out of memory: this call runs unheld, as a
				   library thread does (never a failure of its own) */
				return;
			c->more = n;
			c->cap = ncap;
		}
		c->more[i - 2] = h;
	} else {
		c->held[i] = h;
	}
	atomic_fetch_add_explicit(&h->users, 1, memory_order_relaxed);
	c->nheld = i + 1;
}

void ods_handles_release(unsigned mark)
{
	struct ods_calls *c = &ods_calls;
	while (c->nheld > mark) {
		unsigned i = --c->nheld;
		struct ods_handle *h = i < 2 ? c->held[i] : c->more[i - 2];
		atomic_fetch_sub_explicit(&h->users, 1, memory_order_release);
	}
	if (!c->nheld && c->more) { /* a large batch's list: not kept by the thread */
		free(c->more);
		c->more = NULL;
		c->cap = 0;
	}
}

static bool held_here(const struct ods_handle *h)
{
	const struct ods_calls *c = &ods_calls;
	for (unsigned i = 0; i < c->nheld; i++)
		if ((i < 2 ? c->held[i] : c->more[i - 2]) == h)
			return true;
	return false;
}

/* The handle of token fh, the table's lock held (ods_slots_get's look-up:
 * the generation must match, so a stale token finds nothing). */
static struct ods_handle *find_locked(opends_handle_t fh)
{
	uint64_t t = (uint64_t)(uintptr_t)fh;
	uint32_t i = (uint32_t)t - 1, g = (uint32_t)(t >> 32);
	if ((uint32_t)t == 0 || g == 0 || i >= handles.cap || handles.gen[i] != g)
		return NULL;
	return handles.obj[i];
}

/* 1: fh is held by this thread's calls, or its source is serving a
 * callback on this thread; 2: this thread is inside a source's callback and
 * fh still has I/O, which deregister would wait for (source.c,
 * ods_handle_waits: that I/O may wait for this callback); else 0. Under the
 * lock: another thread's deregister of fh cannot free it while this looks
 * at it. */
static int in_use_here(opends_handle_t fh)
{
	/* A thread that holds no handle and serves no callback (every
	 * deregister outside a callback: a File per image) has nothing to
	 * find: no look-up, no hold of the table's lock, which every other
	 * thread's register, read and deregister takes too. */
	if (!ods_calls.nheld && !ods_calls.serving)
		return 0;
	pthread_rwlock_rdlock(&handles.lock);
	struct ods_handle *h = find_locked(fh);
	int busy = 0;
	if (h && (held_here(h) || (h->src && h->src == ods_calls.serving)))
		busy = 1;
	else if (h && ods_calls.serving && ods_handle_waits(h))
		busy = 2;
	pthread_rwlock_unlock(&handles.lock);
	return busy;
}

static opends_error_t handle_register(opends_handle_t *fh, int fd);

OPENDS_API opends_error_t opends_handle_register(opends_handle_t *fh, int fd)
{
	ODS_ENTER("opends_handle_register");
	uint64_t t0 = ods_cs_begin();
	opends_error_t e = handle_register(fh, fd);
	ods_cs_end(ODS_CS_REGISTER, t0);
	return e;
}

static opends_error_t handle_register(opends_handle_t *fh, int fd)
{
	struct stat st;
	int fl;

	if (!fh)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_handle_register: fh is NULL"), 0);
	if (fd < 0 || (fl = fcntl(fd, F_GETFL)) < 0 || fstat(fd, &st) < 0)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_handle_register: fd %d is not an open file descriptor", fd),
			       EBADF);
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return ods_err(ods_fail(OPENDS_INVALID_FILE_TYPE,
					"opends_handle_register: fd %d is neither a regular file nor a block device", fd),
			       0);
	if (fl & O_PATH)
		return ods_err(ods_fail(OPENDS_INVALID_FILE_OPEN_FLAG,
					"opends_handle_register: fd %d was opened with O_PATH and cannot do I/O", fd), 0);

	/* pwrite on an O_APPEND fd writes at the end of the file whatever the
	 * offset (pwrite(2), BUGS), and so would every path the library has;
	 * an fd that can write is refused rather than writing elsewhere than
	 * asked (issue 15 item 3). A read-only one reads as any other. */
	if ((fl & O_APPEND) && (fl & O_ACCMODE) != O_RDONLY)
		return ods_err(ods_fail(OPENDS_INVALID_FILE_OPEN_FLAG,
					"opends_handle_register: fd %d was opened with O_APPEND: writes would land at the "
					"end of the file instead of their file_offset; open it without O_APPEND",
					fd),
			       0);

	struct ods_handle *h = handle_new();
	if (!h)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_handle_register: out of memory"), ENOMEM);
	h->fd = fd;
	h->accmode = fl & O_ACCMODE;
	h->direct = (fl & O_DIRECT) != 0;
	h->sync_flags = fl & (O_SYNC | O_DSYNC);
	h->blockdev = S_ISBLK(st.st_mode);
	h->dev = st.st_dev;
	h->ino = st.st_ino;
	h->size_hint = S_ISREG(st.st_mode) ? st.st_size : 0;
	h->twin_fd = -1;
	pthread_mutex_init(&h->twin_lock, NULL);
	if (h->blockdev) {
		uint64_t sz = 0;
		if (ioctl(fd, BLKGETSIZE64, &sz) == 0)
			h->blk_size = (off_t)sz;
	}

	pthread_mutex_lock(&fd_lock);
	if ((size_t)fd < fd_cap && fd_used[fd]) {
		pthread_mutex_unlock(&fd_lock);
		pthread_mutex_destroy(&h->twin_lock);
		free(h);
		return ods_err(ods_fail(OPENDS_HANDLE_ALREADY_REGISTERED,
					"opends_handle_register: fd %d is already registered", fd),
			       0);
	}
	int rc = ods_drv.be->handle_open ? ods_drv.be->handle_open(h) : 0;
	if (rc == 0) {
		h->token = ods_slots_add(&handles, h);
		if (!h->token || !fd_mark(fd, true)) {
			if (h->token)
				ods_slots_take(&handles, h->token);
			rc = ods_fail(OPENDS_NOMEM_ERROR, "opends_handle_register: out of memory");
			if (ods_drv.be->handle_close)
				ods_drv.be->handle_close(h);
		}
	}
	pthread_mutex_unlock(&fd_lock);
	if (rc) {
		pthread_mutex_destroy(&h->twin_lock);
		free(h);
		return ods_err(rc, 0);
	}
	*fh = (opends_handle_t)(uintptr_t)h->token;
	return ods_ok();
}

static opends_error_t handle_deregister(opends_handle_t fh);

OPENDS_API opends_error_t opends_handle_deregister(opends_handle_t fh)
{
	ODS_ENTER("opends_handle_deregister");
	uint64_t t0 = ods_cs_begin();
	opends_error_t e = handle_deregister(fh);
	ods_cs_end(ODS_CS_DEREGISTER, t0);
	return e;
}

static opends_error_t handle_deregister(opends_handle_t fh)
{
	if (!fh)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_handle_deregister: fh is NULL"), 0);
	/* A callback of I/O on this very handle (a source's read run by a
	 * synchronous read on this thread, or by a library thread for a read
	 * that a caller waits for) would wait for its own I/O. */
	int busy = in_use_here(fh);
	if (busy == 1)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_handle_deregister: fh is in use by a call on this thread (a callback of "
					"I/O on it); deregister it after that call returns"),
			       0);
	if (busy == 2)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_handle_deregister: fh still has I/O in flight and this thread is inside "
					"a source's callback, which that I/O may be waiting for; deregister it after the "
					"callback returns"),
			       0);
	pthread_mutex_lock(&fd_lock);
	struct ods_handle *h = ods_slots_take(&handles, (uint64_t)(uintptr_t)fh);
	if (h && !h->src)
		fd_mark(h->fd, false);
	pthread_mutex_unlock(&fd_lock);
	if (!h)
		return ods_err(ods_fail(OPENDS_HANDLE_NOT_REGISTERED,
					"opends_handle_deregister: fh is not a registered handle"), 0);
	handle_free(h);
	return ods_ok();
}

int ods_handle_add(struct ods_handle *h)
{
	h->token = ods_slots_add(&handles, h);
	return h->token ? 0 : ods_fail(OPENDS_NOMEM_ERROR, "handle registration: out of memory");
}

struct ods_handle *ods_handle_lookup(opends_handle_t fh)
{
	if (!ods_calls.depth) /* a library thread: holds nothing (ods.h) */
		return ods_slots_get(&handles, (uint64_t)(uintptr_t)fh);
	/* Found and held under the table's read lock: deregistration takes the
	 * handle out under the write lock, then waits for users, so it sees
	 * every hold of a call that found the handle, and no call finds it
	 * after. */
	pthread_rwlock_rdlock(&handles.lock);
	struct ods_handle *h = find_locked(fh);
	if (h)
		hold(h);
	pthread_rwlock_unlock(&handles.lock);
	return h;
}

/* The twin is the same file opened through /proc/self/fd with the caller's
 * access mode and the other O_DIRECT setting. Opened lazily: most handles
 * never need it. */
static int twin(struct ods_handle *h)
{
	pthread_mutex_lock(&h->twin_lock);
	if (h->twin_fd == -1) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", h->fd);
		/* the caller's O_SYNC / O_DSYNC too: a write through the twin
		 * must be as durable as one through the caller's fd (item 4) */
		int fl = h->accmode | O_CLOEXEC | h->sync_flags | (h->direct ? 0 : O_DIRECT);
		int fd = open(path, fl);
		h->twin_fd = fd >= 0 ? fd : -2;
	}
	int fd = h->twin_fd;
	pthread_mutex_unlock(&h->twin_lock);
	return fd >= 0 ? fd : -1;
}

int ods_handle_fd_direct(struct ods_handle *h)
{
	return h->direct ? h->fd : twin(h);
}

int ods_handle_fd_buffered(struct ods_handle *h)
{
	return h->direct ? twin(h) : h->fd;
}

_Thread_local unsigned long ods_size_lookups;

off_t ods_handle_size(const struct ods_handle *h)
{
	struct stat st;
	if (h->src) /* a source's size when given at registration */
		return h->src_size;
	if (h->blockdev)
		return h->blk_size > 0 ? h->blk_size : -1;
	ods_size_lookups++;
	if (fstat(h->fd, &st) != 0)
		return -1;
	/* A regular file of size 0 may have content its file system does not
	 * size (/proc, debugfs, some FUSE): unknown, so every backend reads
	 * until a read returns 0, as a pread loop does (issue 15 item 12). An
	 * empty file costs one pread that returns 0. */
	if (st.st_size == 0 && S_ISREG(st.st_mode))
		return -1;
	return st.st_size;
}

size_t ods_handle_valid(const struct ods_handle *h, off_t off, size_t size)
{
	off_t fs = ods_handle_size(h);
	if (fs < 0) /* unknown size (a source, a file of size 0, a block
		       device without BLKGETSIZE64): none are known to be
		       there, so a stream's plan keeps what the buffer holds
		       past the bytes read */
		return 0;
	if (fs <= off)
		return 0;
	return (uint64_t)(fs - off) < size ? (size_t)(fs - off) : size;
}

/* ---- memory ----------------------------------------------------------- */

/* Undo what the backend and the accelerator did at registration, in the
 * reverse order. */
static void region_release(const struct ods_region *r)
{
	if (ods_drv.be->buf_deregister)
		ods_drv.be->buf_deregister((void *)r->base, r->size, r->kind, r->be_priv);
	const struct ods_accel_mem *am = ods_drv.accel->mem;
	if (am && am->buf_deregister)
		am->buf_deregister((void *)r->base, r->size, r->kind, r->accel_priv);
}

/* index of the first region whose end is above p */
static size_t region_search(uintptr_t p)
{
	size_t lo = 0, hi = nregions;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (regions[mid].base + regions[mid].size <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool ods_region_find(uintptr_t p, struct ods_region *out)
{
	bool found = false;
	pthread_rwlock_rdlock(&regions_lock);
	if (nregions) {
		size_t i = region_search(p);
		if (i < nregions && regions[i].base <= p) {
			*out = regions[i];
			found = true;
		}
	}
	pthread_rwlock_unlock(&regions_lock);
	return found;
}

OPENDS_API opends_error_t opends_buf_register(const void *buf, size_t size, int flags)
{
	uintptr_t b = (uintptr_t)buf;
	ODS_ENTER("opends_buf_register");
	if (!buf)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_buf_register: buf is NULL"), 0);
	if (size == 0)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_buf_register: size is 0"), 0);
	if (flags != 0)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_buf_register: flags is %d; it must be 0", flags),
			       0);
	if (b + size < b)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_buf_register: buf + size wraps the address space"),
			       0);

	struct ods_region r = { .base = b, .size = size };
	r.kind = ods_drv.accel->classify(buf, &r.dev);
	if (r.kind == ODS_MEM_DEVICE && r.dev >= ODS_MAX_DEVICES)
		return ods_err(OPENDS_CONTEXT_MISMATCH, 0); /* detail set by classify */
	const struct ods_accel_mem *am = ods_drv.accel->mem;
	int rc;

	pthread_rwlock_wrlock(&regions_lock);
	size_t i = region_search(b);
	if (i < nregions && regions[i].base < b + size) {
		/* copied under the lock: once it is released another thread may
		 * move or reallocate the table (issue 15 item 9) */
		struct ods_region hit = regions[i];
		pthread_rwlock_unlock(&regions_lock);
		return ods_err(ods_fail(OPENDS_MEMORY_ALREADY_REGISTERED,
					"opends_buf_register: [%p, +%zu) overlaps the registered range [%p, +%zu)", buf,
					size, (void *)hit.base, hit.size),
			       0);
	}
	if (nregions == regions_cap) {
		size_t ncap = regions_cap ? regions_cap * 2 : 16;
		struct ods_region *n = realloc(regions, ncap * sizeof(*n));
		if (!n) {
			pthread_rwlock_unlock(&regions_lock);
			return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_buf_register: out of memory"), ENOMEM);
		}
		regions = n;
		regions_cap = ncap;
	}
	/* Pinning under the write lock keeps a racing overlapping register from
	 * pinning the same pages twice; registration is not a hot path. */
	if (am && am->buf_register) {
		rc = am->buf_register((void *)buf, size, r.kind, &r.accel_priv);
		if (rc) {
			pthread_rwlock_unlock(&regions_lock);
			return ods_err(rc, 0);
		}
	}
	if (ods_drv.be->buf_register) {
		rc = ods_drv.be->buf_register((void *)buf, size, r.kind, &r.be_priv);
		if (rc) {
			if (am && am->buf_deregister)
				am->buf_deregister((void *)buf, size, r.kind, r.accel_priv);
			pthread_rwlock_unlock(&regions_lock);
			return ods_err(rc, 0);
		}
	}
	memmove(&regions[i + 1], &regions[i], (nregions - i) * sizeof(*regions));
	regions[i] = r;
	nregions++;
	pthread_rwlock_unlock(&regions_lock);
	return ods_ok();
}

OPENDS_API opends_error_t opends_buf_deregister(const void *buf)
{
	uintptr_t b = (uintptr_t)buf;
	ODS_ENTER("opends_buf_deregister");
	if (!buf)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_buf_deregister: buf is NULL"), 0);
	pthread_rwlock_wrlock(&regions_lock);
	size_t i = nregions ? region_search(b) : 0;
	if (i >= nregions || regions[i].base != b) {
		pthread_rwlock_unlock(&regions_lock);
		return ods_err(ods_fail(OPENDS_MEMORY_NOT_REGISTERED,
					"opends_buf_deregister: %p is not the base of a registered range", buf),
			       0);
	}
	struct ods_region r = regions[i];
	memmove(&regions[i], &regions[i + 1], (nregions - i - 1) * sizeof(*regions));
	nregions--;
	pthread_rwlock_unlock(&regions_lock);
	region_release(&r);
	return ods_ok();
}
