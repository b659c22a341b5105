/*
 * Small synchronous reads run on the calling thread (issue 17,
 * OPENDS_INLINE_MAX): byte-exact against the file, nothing written outside
 * [buf + buf_offset, + returned), on every backend and accelerator
 * (OPENDS_BACKEND, OPENDS_ACCEL from the environment). Sizes straddle the
 * threshold, so both the inline path and the engine run; offsets are
 * aligned and not, inside, across and past the end; handles are buffered
 * and O_DIRECT; the page cache is dropped between rounds so cached and
 * uncached ranges both occur. Then the same with OPENDS_INLINE_MAX=0
 * (never inline) and 64k (the default is the chunk size, 1m), and with
 * hot device reads in pieces (OPENDS_INLINE_SPLIT=3).
 * A read far larger than the file into a buffer near the top of the user
 * address space (buf + size past it) returns the bytes the file has, as
 * cuFile does, sync and by a future, buffered and O_DIRECT: the kernel
 * refuses such a pread whole (EFAULT), which ref passed on (rel's finding).
 */
#include "common.h"

#include <sys/mman.h>

#define FSIZE ((size_t)3 * T_MiB + 1234)
#define SLACK 4096

static void rounds(const char *what, const char *path, const uint8_t *oracle)
{
	t_driver_open();
	uint8_t *mem = t_xmalloc(2 * T_MiB + 2 * SLACK);
	uint8_t *warm = t_xmalloc(FSIZE);
	int wfd = t_open(path, O_RDONLY, false);
	for (int direct = 0; direct < 2; direct++) {
		int fd = t_open(path, O_RDONLY, direct);
		if (fd == -2)
			continue;
		opends_handle_t fh = t_register(fd);
		const size_t sizes[] = { 1, 100, 4095, 4096, 4097, 65535, 65536, 262143, 262144, 262145, 1048576 };
		for (int i = 0; i < 400; i++) {
			if (i % 50 == 0)
				posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			if (i % 50 == 25) /* all cached again (direct reads do not fill the cache) */
				CHECK(t_pread_all(wfd, warm, FSIZE, 0) == FSIZE);
			size_t size = i % 3 ? sizes[(size_t)rand() % (sizeof(sizes) / sizeof(*sizes))]
					    : 1 + (size_t)rand() % (600 * T_KiB);
			uint64_t off = (uint64_t)rand() % (FSIZE + 8192);
			if (i % 4 == 0)
				off &= ~(uint64_t)4095;
			size_t bo = i % 5 ? (size_t)rand() % 4096 : 0;
			memset(mem, T_CANARY, size + bo + SLACK);
			ssize_t r = opends_sync_read(fh, mem, size, (off_t)off, (off_t)bo);
			size_t want = t_expect_read(FSIZE, off, size);
			if (r != (ssize_t)want) {
				FAILF("%s, %s: read %zu at %llu: %zd, want %zu", what, direct ? "O_DIRECT" : "buffered",
				      size, (unsigned long long)off, r, want);
				continue;
			}
			size_t at;
			if (t_first_diff(mem + bo, oracle + off, want, &at))
				FAILF("%s, %s: read %zu at %llu: byte %zu differs", what, direct ? "O_DIRECT" : "buffered",
				      size, (unsigned long long)off, at);
			if (t_first_not(mem, bo, T_CANARY, &at) ||
			    t_first_not(mem + bo + want, size - want + SLACK, T_CANARY, &at))
				FAILF("%s, %s: read %zu at %llu wrote outside the %zu bytes returned", what,
				      direct ? "O_DIRECT" : "buffered", size, (unsigned long long)off, want);
		}
		OK(opends_handle_deregister(fh));
		close(fd);
	}
	close(wfd);
	free(warm);
	free(mem);
	OK(opends_driver_close());
	printf("%s: 800 reads byte-exact\n", what);
}

static void past_user_space(const char *path, const uint8_t *oracle)
{
	t_phase = "a read past the top of the user address space";
	char *buf = mmap((void *)0x7ffff0000000ull, 1 << 20, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (buf == MAP_FAILED || buf != (char *)0x7ffff0000000ull) {
		printf("past the user address space: SKIP (no mapping at 0x7ffff0000000)\n");
		if (buf != MAP_FAILED)
			munmap(buf, 1 << 20);
		return;
	}
	const size_t huge = 627247189900ull;
	const off_t off = (off_t)FSIZE - 100;
	t_driver_open();
	for (int d = 0; d < 2; d++) {
		int fd = t_open(path, O_RDONLY, d);
		if (fd == -2)
			continue;
		opends_handle_t fh = t_register(fd);
		memset(buf, T_CANARY, 1 << 20);
		EXPECT_SSZ_ND(opends_sync_read(fh, buf, huge, off, 0), 100);
		VERIFY(buf, oracle + off, 100, "sync read past the user space%s", d ? " (O_DIRECT)" : "");
		memset(buf, T_CANARY, 1 << 20);
		opends_async_future_t f;
		OK(opends_async_read(fh, buf, huge, off, 0, &f));
		EXPECT_SSZ_ND(opends_async_await(&f), 100);
		VERIFY(buf, oracle + off, 100, "async read past the user space%s", d ? " (O_DIRECT)" : "");
		OK(opends_handle_deregister(fh));
		close(fd);
	}
	OK(opends_driver_close());
	munmap(buf, 1 << 20);
	printf("past the user address space: OK\n");
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(240);
	srand(7);
	char path[PATH_MAX];
	t_path(path, sizeof(path), "inline.bin");
	t_write_pattern_file(path, FSIZE, hashpat);
	uint8_t *oracle = t_oracle(FSIZE, hashpat);
	rounds("default threshold", path, oracle);
	setenv("OPENDS_INLINE_MAX", "0", 1);
	rounds("OPENDS_INLINE_MAX=0", path, oracle);
	setenv("OPENDS_INLINE_MAX", "64k", 1);
	rounds("OPENDS_INLINE_MAX=64k", path, oracle);
	/* hot device reads in pieces, each copied while the next is read */
	unsetenv("OPENDS_INLINE_MAX");
	setenv("OPENDS_INLINE_SPLIT", "3", 1);
	rounds("OPENDS_INLINE_SPLIT=3", path, oracle);
	unsetenv("OPENDS_INLINE_SPLIT");
	past_user_space(path, oracle);
	free(oracle);
	t_rm_dir();
	return 0;
}
