/*
 * The io_uring backend's parts (private): uring.c, the staging engine's
 * fd mover and the backend; uring_inline.c, small synchronous reads on the
 * caller's thread; uring_cache.c, whether a range is in the page cache.
 */
#ifndef ODS_URING_INT_H
#define ODS_URING_INT_H

#include "stage.h"

/* Every page of [c0, c1) that exists in the file (of fsize bytes; -1:
 * unknown, then every page of the range counts) is in the page cache
 * (cachestat(2)); false also where the kernel lacks cachestat. */
bool ods_uring_cached(int fd, off_t c0, off_t c1, off_t fsize);
/* false once cachestat was found missing (kernels before 6.5) */
bool ods_uring_has_cachestat(void);
/* at driver open (uring_cache.c) */
void ods_uring_cache_init(void);

/* io_uring_enter calls that submitted reads or writes (worker threads;
 * for tests, which link the library's objects) */
extern atomic_ulong ods_uring_submits;

/* The backend's rw_inline (uring_inline.c) and its bounce pool, made at
 * open (chunk: the engine's, the default inline limit) and freed at close. */
ssize_t ods_uring_inline(struct ods_io *io);
void ods_uring_bounces_init(const struct ods_accel *accel, size_t chunk);
void ods_uring_bounces_fini(void);
/* The file's size the inline path found at this io's call, handing it to
 * the engine as cold; -2 where it did not */
off_t ods_uring_known_size(const struct ods_io *io);
/* cachestat calls made on this thread (tests count a path's system calls) */
extern _Thread_local unsigned long ods_uring_cachestats;

/* The page-cache probe on a hot streak (uring_cache.c): ods_uring_cached,
 * or, on a thread whose last STREAK probes all found their range cached,
 * true without asking for all but one read in SAMPLE (*skipped). who: the
 * inline path on a caller's thread, or a worker's one-chunk read
 * (decide), each with its own A/B switch. */
enum { ODS_PROBE_INLINE, ODS_PROBE_WORKER };
bool ods_uring_probe(int fd, off_t c0, off_t c1, off_t fsize, unsigned who, bool *skipped);
/* a read of n bytes whose probe was skipped took ns: slower than the page
 * cache gives ends this thread's streak */
void ods_uring_read_took(size_t n, uint64_t ns);
/* reads whose page-cache probe this thread skipped on a hot streak */
extern _Thread_local unsigned long ods_uring_probes_skipped;
/* the workers' skipped probes, all of them (tests) */
extern atomic_ulong ods_uring_worker_skips;

#endif
