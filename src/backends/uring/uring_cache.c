/*
 * The io_uring backend's question to the page cache: is every page of a
 * range cached? cachestat(2) (Linux 6.5) answers without side effects,
 * unlike a RWF_NOWAIT read, which starts readahead on a miss. The engine
 * (uring.c) reads cached ranges buffered and the rest with O_DIRECT; the
 * inline path (uring_inline.c) leaves cold ranges to the engine.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "uring_int.h"

static struct {
	long page;
	atomic_bool missing; /* the kernel has no cachestat: every range counts as cold */
	bool always[2];      /* OPENDS_AB_INLINE_PROBE / OPENDS_AB_WORKER_PROBE=always: no hot-streak skip */
} cs_state;

static bool ab_always(const char *name)
{
	const char *v = getenv(name);
	return v && !strcmp(v, "always");
}

void ods_uring_cache_init(void)
{
	cs_state.page = sysconf(_SC_PAGESIZE);
	if (cs_state.page < (long)ODS_ALIGN)
		cs_state.page = ODS_ALIGN;
	atomic_store(&cs_state.missing, false);
	cs_state.always[ODS_PROBE_INLINE] = ab_always("OPENDS_AB_INLINE_PROBE");
	cs_state.always[ODS_PROBE_WORKER] = ab_always("OPENDS_AB_WORKER_PROBE");
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

/* ---- the probe skipped on a hot streak ---------------------------------------
 * A thread whose last STREAK probes all found the page cache holding the
 * range (one caller reading hot files one after the other: files1t; a
 * worker taking many hot small files of a batch or of futures) asks only
 * every SAMPLE-th read; the others read buffered at once, as a plain pread
 * loop does: one system call fewer per file (cachestat walks the range's
 * pages: ~1.2 us for 60 KB, ~2.4 us for 200 KB on the development VM). A
 * probe that finds a cold range ends the streak, and so does a skipped
 * read that ran slower than the page cache gives (SLOW_NS + 1 ns per 2
 * bytes: a hot 110 KB read takes ~10-20 us, a disk read of it 100 us or
 * more; callers time their reads, workers only sample), so a thread that
 * turns to cold files probes every read again within a file or SAMPLE.
 * A cold file read buffered costs only its speed: the bytes are the same.
 * OPENDS_AB_INLINE_PROBE=always / OPENDS_AB_WORKER_PROBE=always: probe
 * every read (the A of the A/B). H200, files1t: 3429 MiB/s on the streak
 * against 2670 probing every read (bench/results/2026-12-01-h200-62972db). */
#define STREAK 32u
#define SAMPLE 16u
#define SLOW_NS 20000u

/* this thread's streak: probes in a row that found the range cached, and
 * reads since the last probe while on the streak */
static _Thread_local unsigned hot_run, since_probe;
_Thread_local unsigned long ods_uring_probes_skipped;
atomic_ulong ods_uring_worker_skips;

bool ods_uring_probe(int fd, off_t c0, off_t c1, off_t fsize, unsigned who, bool *skipped)
{
	*skipped = false;
	if (!cs_state.always[who] && hot_run >= STREAK && ++since_probe < SAMPLE) {
		*skipped = true;
		ods_uring_probes_skipped++;
		if (who == ODS_PROBE_WORKER)
			atomic_fetch_add_explicit(&ods_uring_worker_skips, 1, memory_order_relaxed);
		return true;
	}
	since_probe = 0;
	bool hot = ods_uring_cached(fd, c0, c1, fsize);
	hot_run = hot ? (hot_run < STREAK ? hot_run + 1 : STREAK) : 0;
	return hot;
}

void ods_uring_read_took(size_t n, uint64_t ns)
{
	if (ns > SLOW_NS + n / 2)
		hot_run = 0;
}
