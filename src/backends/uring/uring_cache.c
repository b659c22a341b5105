/*
 * The io_uring backend's question to the page cache: is every page of a
 * range cached? cachestat(2) (Linux 6.5) answers without side effects,
 * unlike a RWF_NOWAIT read, which starts readahead on a miss. The engine
 * (uring.c) reads cached ranges buffered and the rest with O_DIRECT; the
 * inline path (uring_inline.c) leaves cold ranges to the engine.
 */
#include <limits.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "uring_int.h"

static struct {
	long page;
	atomic_bool missing; /* the kernel has no cachestat: every range counts as cold */
} cs_state;

void ods_uring_cache_init(void)
{
	cs_state.page = sysconf(_SC_PAGESIZE);
	if (cs_state.page < (long)ODS_ALIGN)
		cs_state.page = ODS_ALIGN;
	atomic_store(&cs_state.missing, false);
}

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* same number on every architecture (generic table) */
#endif
struct ods_cachestat_range {
	uint64_t off, len;
};
struct ods_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

_Thread_local unsigned long ods_uring_cachestats;

/* Every page of [c0, c1) that exists in the file (of fsize bytes; -1:
 * unknown, then every page of the range counts) is in the page cache. */
bool ods_uring_cached(int fd, off_t c0, off_t c1, off_t fsize)
{
	if (atomic_load_explicit(&cs_state.missing, memory_order_relaxed))
		return false;
	off_t p0 = c0 & ~((off_t)cs_state.page - 1);
	off_t p1 = (fsize >= 0 && fsize < c1 ? fsize : c1);
	if (p1 > INT64_MAX - cs_state.page)
		return false; /* (rounding up would overflow; no file reaches there) */
	p1 = (p1 + cs_state.page - 1) & ~((off_t)cs_state.page - 1);
	if (p1 <= p0)
		return true; /* nothing to read: the buffered read returns 0 at once */
	struct ods_cachestat_range rg = { (uint64_t)p0, (uint64_t)(p1 - p0) };
	struct ods_cachestat cs;
	ods_uring_cachestats++;
	uint64_t t0 = ods_cs_begin();
	long rc = syscall(__NR_cachestat, fd, &rg, &cs, 0);
	ods_cs_end(ODS_CS_CACHESTAT, t0);
	if (rc != 0) {
		if (errno == ENOSYS)
			atomic_store_explicit(&cs_state.missing, true, memory_order_relaxed);
		return false;
	}
	return cs.nr_cache >= rg.len / (uint64_t)cs_state.page;
}

bool ods_uring_has_cachestat(void)
{
	return !atomic_load_explicit(&cs_state.missing, memory_order_relaxed);
}
