/* Small POSIX and Linux helpers shared by every backend. */
#include <limits.h>
#include <signal.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ods.h"

/* Linux moves at most 0x7ffff000 bytes per call; stay below it. */
#define MAX_RW ((size_t)1 << 30)

/* A read of n bytes at pos that the kernel refused with EFAULT although
 * the file ends well before: it checks the whole range of the buffer
 * (buf + n past the top of the user address space: a buffer "as large as
 * the request" near that top, which every other path reads in pieces and
 * so fills with the bytes there are; rel's finding). The file's bytes
 * from pos rounded up to a page (O_DIRECT keeps its alignment), or 0:
 * the fault stands (the bytes the file has at pos fault too, or the size
 * is unknown). Only on that failure: one fstat, none on the way there. */
static size_t past_eof_clamp(int fd, size_t n, off_t pos)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0)
		return 0;
	if (st.st_size <= pos)
		return 0; /* (then nothing of the buffer would be written: the fault is real) */
	uint64_t left = ((uint64_t)(st.st_size - pos) + 4095) & ~(uint64_t)4095;
	return left < n ? (size_t)left : 0;
}

ssize_t ods_pread_full(int fd, void *buf, size_t size, off_t off)
{
	size_t done = 0, k;
	while (done < size) {
		size_t n = size - done < MAX_RW ? size - done : MAX_RW;
		ssize_t r = pread(fd, (char *)buf + done, n, off + (off_t)done);
		if (r < 0 && errno == EFAULT && (k = past_eof_clamp(fd, n, off + (off_t)done)) != 0) {
			size = done + k; /* asked again for what the file has (a second fault stands) */
			continue;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			/* an error part-way is still an error: a read that
			 * overlaps a bad range must not look like EOF */
			return -errno;
		}
		if (r == 0)
			break; /* EOF */
		done += (size_t)r;
	}
	return (ssize_t)done;
}

ssize_t ods_pwrite_full(int fd, const void *buf, size_t size, off_t off)
{
	size_t done = 0;
	while (done < size) {
		size_t n = size - done < MAX_RW ? size - done : MAX_RW;
		ssize_t r = pwrite(fd, (const char *)buf + done, n, off + (off_t)done);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			/* a write that stops part-way is an error: the caller
			 * asked for all of it (ENOSPC after a partial write) */
			return -errno;
		}
		if (r == 0)
			return -EIO;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

void *ods_aligned_alloc(size_t size)
{
	void *p = NULL;
	size = (size + ODS_ALIGN - 1) & ~(size_t)(ODS_ALIGN - 1);
	if (posix_memalign(&p, ODS_ALIGN, size ? size : ODS_ALIGN))
		return NULL;
	return p;
}

int ods_copy_checked(void *dst, const void *src, size_t n)
{
	static atomic_bool unavailable; /* seccomp, or a kernel without it */
	size_t done = 0;
	while (done < n && !atomic_load_explicit(&unavailable, memory_order_relaxed)) {
		size_t k = n - done < MAX_RW ? n - done : MAX_RW;
		struct iovec to = { (char *)dst + done, k }, from = { (char *)src + done, k };
		ssize_t r = process_vm_readv(getpid(), &to, 1, &from, 1, 0);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r < 0 && (errno == ENOSYS || errno == EPERM)) {
			atomic_store_explicit(&unavailable, true, memory_order_relaxed);
			break;
		}
		return -EFAULT;
	}
	if (done < n)
		memcpy((char *)dst + done, (const char *)src + done, n - done);
	return 0;
}

void ods_futex_wait(atomic_uint *addr, unsigned expected)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void ods_futex_wake_all(atomic_uint *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void ods_handle_quiesce(struct ods_handle *h)
{
	/* Deregistration is rare and what it waits for is I/O: a short spin
	 * for requests about to finish, then naps. */
	for (int i = 0; atomic_load_explicit(&h->inflight, memory_order_acquire) > 0; i++) {
		if (i < 100) {
			ods_cpu_relax();
			continue;
		}
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
}

/* ---- recycled objects (ods.h) ----------------------------------------- */

struct recycled {
	struct recycled *next;
};

void *ods_recycle_get(struct ods_recycle *r)
{
	struct recycled *m = NULL;
	if (atomic_load_explicit(&r->n, memory_order_relaxed) && pthread_mutex_trylock(&r->lock) == 0) {
		if (!r->kept)
			r->kept = atomic_exchange_explicit(&r->returned, NULL, memory_order_acquire);
		m = r->kept;
		if (m)
			r->kept = m->next;
		pthread_mutex_unlock(&r->lock);
		if (m)
			atomic_fetch_sub_explicit(&r->n, 1, memory_order_relaxed);
	}
	return m ? (void *)m : malloc(r->size < sizeof(*m) ? sizeof(*m) : r->size);
}

void ods_recycle_put(struct ods_recycle *r, void *p)
{
#if defined(__SANITIZE_ADDRESS__)
	bool keep = false;
#else
	bool keep = atomic_load_explicit(&r->n, memory_order_relaxed) < r->max;
#endif
	if (!keep) {
		free(p);
		return;
	}
	struct recycled *m = p;
	atomic_fetch_add_explicit(&r->n, 1, memory_order_relaxed);
	void *top = atomic_load_explicit(&r->returned, memory_order_relaxed);
	do
		m->next = top;
	while (!atomic_compare_exchange_weak_explicit(&r->returned, &top, m, memory_order_release,
						      memory_order_relaxed));
}

_Thread_local bool ods_tl_library_thread;

struct thread_start {
	void *(*fn)(void *);
	void *arg;
};

static void *thread_trampoline(void *p)
{
	struct thread_start ts = *(struct thread_start *)p;
	free(p);
	ods_tl_library_thread = true;
	return ts.fn(ts.arg);
}

int ods_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	static const int sync_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS };
	struct thread_start *ts = malloc(sizeof(*ts));
	if (!ts)
		return ENOMEM;
	*ts = (struct thread_start){ fn, arg };
	sigset_t all, old;
	sigfillset(&all);
	for (size_t i = 0; i < sizeof(sync_signals) / sizeof(sync_signals[0]); i++)
		sigdelset(&all, sync_signals[i]);
	/* the new thread inherits the creator's mask: block, create, restore */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(t, NULL, thread_trampoline, ts);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		free(ts);
	return rc;
}
