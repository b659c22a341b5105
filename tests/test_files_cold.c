/*
 * test_files_cold: a small file read whole, cold, runs on the calling
 * thread (issue 17, imagenetish cold sync): its blocks O_DIRECT into a
 * bounce, no hand-off to the engine. And a hot file asked for more than
 * it holds (a buffer larger than the file) stays on the caller too.
 *
 * uring, the page cache of each file dropped before each cold read
 * (fdatasync + POSIX_FADV_DONTNEED). Sizes around the inline probe
 * (16 KiB), the block, and the bounce (1 MiB: the default inline limit;
 * one past it goes to the engine); reads of the whole file, past its end,
 * from an unaligned offset to its end, into an unaligned buffer offset.
 * Every read byte-exact with nothing written outside the bytes returned,
 * through a buffered handle and an O_DIRECT one (whose uncached reads into
 * device memory go through the same pinned bounce).
 * Stale data: a cold file whose first block is rewritten (dirty in the
 * page cache, the rest not cached) reads the new bytes. Counted by the
 * backend's io_uring submissions (this program links the library's
 * objects): none for reads at most 1 MiB that reach EOF, where the file
 * system takes O_DIRECT. And a hot read through a buffered handle, whole
 * or with a buffer larger than the file, costs the caller one cachestat
 * and no fstat (counted by the library's per-thread counters). Host
 * memory and the simulated device (hostdev): OPENDS_ACCEL from the
 * environment.
 * Hot streak: a thread reading hot files one after the other (a File per
 * image: register, read whole, deregister) stops asking the page cache
 * for each after 32 hot answers in a row (one read in 16 still asks),
 * every read byte-exact, also a file dropped from the cache in the middle
 * of the streak; with OPENDS_AB_INLINE_PROBE=always every read asks.
 * A worker's hot streak: 400 hot files read by futures (one worker, so
 * one streak) are probed on the worker for the first 32 and then one in
 * 16, every read byte-exact, also a file dropped from the cache in the
 * middle; with OPENDS_AB_WORKER_PROBE=always no probe is skipped.
 * The engine's cap on a worker's device reads in flight
 * (OPENDS_AB_DIRECT_INFLIGHT=1m: one 1 MiB chunk) counts uring's O_DIRECT
 * reads (u->device_io): a cold 8 MiB read, synchronous and by a future,
 * completes byte-exact (a count never given back would stall the worker).
 */
#include "common.h"

#include <stdatomic.h>
#include <sys/syscall.h>

extern atomic_ulong ods_uring_submits;
/* this thread's cachestat and fstat calls (uring_cache.c, registry.c) */
extern _Thread_local unsigned long ods_uring_cachestats, ods_size_lookups;
/* this thread's reads whose page-cache probe was skipped on a hot streak,
 * and the workers' (uring_cache.c) */
extern _Thread_local unsigned long ods_uring_probes_skipped;
extern atomic_ulong ods_uring_worker_skips;

#define SLACK 4096

static void drop(int fd)
{
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

static unsigned long submits(void)
{
	return atomic_load(&ods_uring_submits);
}

/* read [off, off + size) of fd's file (fsize bytes) into mem + bo: the
 * bytes the oracle says, nothing else written */
static void read_check(opends_handle_t fh, uint8_t *mem, const uint8_t *oracle, size_t fsize, off_t off, size_t size,
		       size_t bo, const char *what)
{
	memset(mem, T_CANARY, size + bo + SLACK);
	ssize_t r = opends_sync_read(fh, mem, size, off, (off_t)bo);
	size_t want = t_expect_read(fsize, (uint64_t)off, size);
	if (r != (ssize_t)want) {
		FAILF("%s: file of %zu, read %zu at %lld: %zd, want %zu", what, fsize, size, (long long)off, r, want);
		return;
	}
	size_t at;
	if (t_first_diff(mem + bo, oracle + off, want, &at))
		FAILF("%s: file of %zu, read %zu at %lld: byte %zu differs", what, fsize, size, (long long)off, at);
	if (t_first_not(mem, bo, T_CANARY, &at) || t_first_not(mem + bo + want, size - want + SLACK, T_CANARY, &at))
		FAILF("%s: file of %zu, read %zu at %lld wrote outside the %zu bytes returned", what, fsize, size,
		      (long long)off, want);
}

/* n files of about 100 KB read hot, each through its own registration;
 * the file `cold` (if < n) dropped from the page cache first. Counts this
 * thread's probes and skipped probes. */
static void streak_files(const char *path, const uint8_t *oracle, size_t fsize, unsigned n, unsigned cold,
			 unsigned long *probes, unsigned long *skipped)
{
	uint8_t *mem = t_xmalloc(fsize + SLACK);
	unsigned long c0 = ods_uring_cachestats, k0 = ods_uring_probes_skipped;
	for (unsigned i = 0; i < n; i++) {
		int fd = t_open(path, O_RDONLY, false);
		if (i == cold)
			drop(fd);
		opends_handle_t fh = t_register(fd);
		read_check(fh, mem, oracle, fsize, 0, fsize, 0, i == cold ? "streak, cold file" : "streak");
		OK(opends_handle_deregister(fh));
		close(fd);
	}
	*probes = ods_uring_cachestats - c0;
	*skipped = ods_uring_probes_skipped - k0;
	free(mem);
}

static void hot_streak(bool always)
{
	size_t fsize = 100003;
	uint8_t *oracle = t_oracle(fsize, hashpat);
	char path[PATH_MAX];
	t_path(path, sizeof(path), always ? "streak-a.bin" : "streak.bin");
	t_write_pattern_file(path, fsize, hashpat);
	int fd = t_open(path, O_RDONLY, false);
	uint8_t *warm = t_xmalloc(fsize);
	CHECK(t_pread_all(fd, warm, fsize, 0) == fsize);
	close(fd);
	free(warm);
	if (always)
		setenv("OPENDS_AB_INLINE_PROBE", "always", 1);
	t_driver_open();
	unsigned long probes, skipped;
	/* a read slower than the page cache (a loaded machine) ends the
	 * streak, so the skips are looked for over several rounds */
	unsigned long p = 0, k = 0;
	for (int round = 0; round < 20 && (always ? round < 1 : k == 0); round++) {
		streak_files(path, oracle, fsize, 200, 100, &probes, &skipped);
		CHECKF(probes + skipped == 200, "200 hot reads: %lu probes + %lu skipped", probes, skipped);
		p += probes;
		k += skipped;
	}
	printf("hot streak%s: %lu reads probed, %lu skipped\n", always ? " (always)" : "", p, k);
	if (always)
		CHECKF(k == 0 && p == 200, "OPENDS_AB_INLINE_PROBE=always: %lu probes, %lu skipped of 200 reads", p, k);
	else
		CHECKF(k > 0, "no probe skipped in %lu hot reads in a row", p + k);
	OK(opends_driver_close());
	unlink(path);
	free(oracle);
}

/* n hot files of fsize bytes read whole by futures, up to 64 in flight,
 * each through its own registration, the file `cold` dropped from the
 * page cache first: byte-exact, and how many probes the workers skipped */
static unsigned long worker_streak_files(const char *path, const uint8_t *oracle, size_t fsize, unsigned n,
					 unsigned cold)
{
	enum { W = 64 };
	static opends_async_future_t fut[W];
	static opends_handle_t fh[W];
	static int fds[W];
	uint8_t *mem = t_xmalloc(W * (fsize + SLACK));
	memset(mem, T_CANARY, W * (fsize + SLACK));
	unsigned long k0 = atomic_load(&ods_uring_worker_skips);
	for (unsigned i = 0; i < n + W; i++) {
		unsigned w = i % W;
		if (i >= W) { /* the read of file i - W: check it and let it go */
			uint8_t *m = mem + w * (fsize + SLACK);
			EXPECT_SSZ_ND(opends_async_await(&fut[w]), (ssize_t)fsize);
			size_t at;
			if (t_first_diff(m, oracle, fsize, &at))
				FAILF("worker streak: file %u: byte %zu differs", i - W, at);
			if (t_first_not(m + fsize, SLACK, T_CANARY, &at))
				FAILF("worker streak: file %u: wrote past the file's bytes", i - W);
			memset(m, T_CANARY, fsize);
			OK(opends_handle_deregister(fh[w]));
			close(fds[w]);
		}
		if (i >= n)
			continue;
		fds[w] = t_open(path, O_RDONLY, false);
		if (i == cold)
			drop(fds[w]);
		fh[w] = t_register(fds[w]);
		OK(opends_async_read(fh[w], mem + w * (fsize + SLACK), fsize, 0, 0, &fut[w]));
	}
	free(mem);
	return atomic_load(&ods_uring_worker_skips) - k0;
}

static void worker_streak(bool always)
{
	size_t fsize = 100003;
	uint8_t *oracle = t_oracle(fsize, hashpat);
	char path[PATH_MAX];
	t_path(path, sizeof(path), always ? "wstreak-a.bin" : "wstreak.bin");
	t_write_pattern_file(path, fsize, hashpat);
	int fd = t_open(path, O_RDONLY, false);
	uint8_t *warm = t_xmalloc(fsize);
	CHECK(t_pread_all(fd, warm, fsize, 0) == fsize);
	close(fd);
	free(warm);
	if (always)
		setenv("OPENDS_AB_WORKER_PROBE", "always", 1);
	setenv("OPENDS_IO_THREADS", "1", 1); /* one worker: one streak */
	t_driver_open();
	unsigned long skipped = worker_streak_files(path, oracle, fsize, 400, 200);
	printf("worker streak%s: %lu of 400 probes skipped\n", always ? " (always)" : "", skipped);
	if (always)
		CHECKF(skipped == 0, "OPENDS_AB_WORKER_PROBE=always: %lu probes skipped", skipped);
	else /* at most 400 - 32, and at least the sampled share after the
		cold file ends the streak: (200 - 32) * 15 / 16 before it */
		CHECKF(skipped >= 150 && skipped <= 368, "400 hot reads on one worker: %lu probes skipped", skipped);
	OK(opends_driver_close());
	unlink(path);
	free(oracle);
}

static void worker_streak_default(void)
{
	worker_streak(false);
}

static void worker_streak_always(void)
{
	worker_streak(true);
}

static void direct_cap(void)
{
	size_t fsize = ((size_t)8 << 20) + 777;
	uint8_t *oracle = t_oracle(fsize, hashpat);
	char path[PATH_MAX];
	t_path(path, sizeof(path), "dcap.bin");
	t_write_pattern_file(path, fsize, hashpat);
	setenv("OPENDS_AB_DIRECT_INFLIGHT", "1m", 1);
	t_driver_open();
	uint8_t *mem = t_xmalloc(fsize + SLACK);
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	drop(fd);
	read_check(fh, mem, oracle, fsize, 0, fsize, 0, "cold 8 MiB, device reads capped");
	drop(fd);
	memset(mem, T_CANARY, fsize + SLACK);
	opends_async_future_t fut;
	OK(opends_async_read(fh, mem, fsize, 0, 0, &fut));
	EXPECT_SSZ_ND(opends_async_await(&fut), (ssize_t)fsize);
	size_t at;
	if (t_first_diff(mem, oracle, fsize, &at))
		FAILF("cold 8 MiB by a future, device reads capped: byte %zu differs", at);
	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
	unlink(path);
	free(mem);
	free(oracle);
	printf("cold reads with the device-read cap: OK\n");
}

static void hot_streak_default(void)
{
	hot_streak(false);
}

static void hot_streak_always(void)
{
	hot_streak(true);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(120);
	setenv("OPENDS_BACKEND", "uring", 1);
	const size_t sizes[] = { 1,	    100,	4095,	     4096,	 4097,	   16383,
				 16384,	    16385,	65536 + 7,   123457,	 300001,   (size_t)1 << 20,
				 ((size_t)1 << 20) - 4096 + 1, ((size_t)1 << 20) + 1 };
	const size_t nsizes = sizeof(sizes) / sizeof(*sizes);
	const size_t big = ((size_t)1 << 20) + 1;
	uint8_t *oracle = t_oracle(2 * big, hashpat);
	uint8_t *mem = t_xmalloc(2 * big + 2 * SLACK);
	char path[PATH_MAX];
	t_path(path, sizeof(path), "probe.bin");
	t_write_pattern_file(path, 8192, hashpat);
	int probe = t_open(path, O_RDONLY, true);
	bool direct_ok = probe >= 0;
	if (probe >= 0)
		close(probe);
	t_driver_open();
	/* cachestat(2) is Linux 6.5: without it nothing is asked */
	bool has_cachestat = syscall(451, -1, NULL, NULL, 0) < 0 && errno != ENOSYS;

	unsigned long engine = 0, engine_big = 0;
	for (size_t i = 0; i < 2 * nsizes; i++) {
		/* a buffered handle, then (byte-exact only) an O_DIRECT one */
		bool direct = i >= nsizes;
		size_t fsize = sizes[i % nsizes];
		if (direct && !direct_ok)
			break;
		char name[64];
		snprintf(name, sizeof(name), "f%zu.bin", fsize);
		t_path(path, sizeof(path), name);
		t_write_pattern_file(path, fsize, hashpat);
		int fd = t_open(path, O_RDONLY, false);
		int hfd = direct ? t_open(path, O_RDONLY, true) : fd;
		opends_handle_t fh = t_register(hfd);
		/* counted: the buffered handle's reads (an O_DIRECT one never
		 * went to the engine at these sizes) */
		unsigned long ignored = 0;
		bool small = fsize <= ((size_t)1 << 20);
		unsigned long s0;
		/* whole, cold */
		drop(fd);
		s0 = submits();
		read_check(fh, mem, oracle, fsize, 0, fsize, 0, "cold whole");
		*(direct ? &ignored : small ? &engine : &engine_big) += submits() - s0;
		/* past EOF, cold, unaligned buffer offset */
		drop(fd);
		s0 = submits();
		read_check(fh, mem, oracle, fsize, 0, fsize + 5000, 123, "cold past EOF");
		if (fsize + 5000 <= ((size_t)1 << 20))
			*(direct ? &ignored : &engine) += submits() - s0;
		/* from an unaligned offset to the end, cold */
		if (fsize > 777) {
			drop(fd);
			s0 = submits();
			read_check(fh, mem, oracle, fsize, 777, fsize - 777, 5, "cold tail");
			if (small)
				*(direct ? &ignored : &engine) += submits() - s0;
		}
		/* hot (read through the page cache first: the direct reads
		 * above left it empty), asked for twice the file: stays on the
		 * caller */
		CHECK(t_pread_all(fd, mem, fsize, 0) == fsize);
		read_check(fh, mem, oracle, fsize, 0, fsize, 0, "warm-up");
		s0 = submits();
		unsigned long c0 = ods_uring_cachestats, l0 = ods_size_lookups;
		read_check(fh, mem, oracle, fsize, 0, 2 * fsize, 0, "hot past EOF");
		if (2 * fsize <= ((size_t)1 << 20))
			*(direct ? &ignored : &engine) += submits() - s0;
		/* one question to the page cache (the size at registration
		 * bounds it) and no fstat: what a buffered handle's hot read
		 * costs beyond its pread, a buffer larger than the file or not */
		if (!direct && fsize >= 16384 && 2 * fsize <= ((size_t)1 << 20) && has_cachestat)
			CHECKF(ods_uring_cachestats - c0 == 1 && ods_size_lookups - l0 == 0,
			       "file of %zu, hot, read past EOF: %lu cachestat and %lu fstat calls, want 1 and 0", fsize,
			       ods_uring_cachestats - c0, ods_size_lookups - l0);
		c0 = ods_uring_cachestats;
		l0 = ods_size_lookups;
		read_check(fh, mem, oracle, fsize, 0, fsize, 0, "hot whole");
		if (!direct && fsize >= 16384 && fsize <= ((size_t)1 << 20) && has_cachestat)
			CHECKF(ods_uring_cachestats - c0 == 1 && ods_size_lookups - l0 == 0,
			       "file of %zu, hot, read whole: %lu cachestat and %lu fstat calls, want 1 and 0", fsize,
			       ods_uring_cachestats - c0, ods_size_lookups - l0);
		OK(opends_handle_deregister(fh));
		if (direct)
			close(hfd);
		close(fd);
		unlink(path);
	}

	/* stale data: the first block rewritten, dirty in the page cache, the
	 * rest of the file not cached: the direct read writes it back first */
	size_t fsize = 200000;
	t_path(path, sizeof(path), "stale.bin");
	t_write_pattern_file(path, fsize, hashpat);
	int fd = t_open(path, O_RDWR, false);
	uint8_t *newer = t_xmalloc(fsize);
	memcpy(newer, oracle, fsize);
	for (int direct = 0; direct < (direct_ok ? 2 : 1); direct++) {
		drop(fd);
		for (size_t k = 0; k < 4096; k++)
			newer[k] = (uint8_t)~newer[k];
		t_pwrite_all(fd, newer, 4096, 0);
		int hfd = direct ? t_open(path, O_RDONLY, true) : fd;
		opends_handle_t fh = t_register(hfd);
		read_check(fh, mem, newer, fsize, 0, fsize, 0,
			   direct ? "O_DIRECT handle, rewritten first block, rest cold"
				  : "rewritten first block, rest cold");
		OK(opends_handle_deregister(fh));
		if (direct)
			close(hfd);
	}
	close(fd);
	free(newer);

	OK(opends_driver_close());
	printf("io_uring submissions: cold reads to EOF of at most 1 MiB: %lu; of the file of 1 MiB + 1: %lu\n", engine,
	       engine_big);
	if (direct_ok) {
		CHECKF(engine == 0, "small reads that reach EOF went to the engine (%lu io_uring submissions)", engine);
		CHECKF(engine_big > 0, "the 1 MiB + 1 file's cold read made no io_uring submission (the counter is off)");
	} else {
		printf("NOTE: no O_DIRECT in %s: submission counts not checked\n", t_tmpdir());
	}
	free(mem);
	free(oracle);
	CHECK(t_case_in_child("cold reads, OPENDS_AB_DIRECT_INFLIGHT=1m", direct_cap));
	if (has_cachestat) {
		CHECK(t_case_in_child("hot streak", hot_streak_default));
		CHECK(t_case_in_child("hot streak, OPENDS_AB_INLINE_PROBE=always", hot_streak_always));
		CHECK(t_case_in_child("worker hot streak", worker_streak_default));
		CHECK(t_case_in_child("worker hot streak, OPENDS_AB_WORKER_PROBE=always", worker_streak_always));
	}
	t_rm_dir();
	printf("OK\n");
	return 0;
}
