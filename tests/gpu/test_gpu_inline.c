/*
 * test_gpu_inline: small synchronous reads into cuMemAlloc'ed memory, the
 * paths of issue 17's one-thread callers (files1t): a hot small file read
 * whole through the pinned bounce, in one copy or in pieces copied while
 * the next is read (OPENDS_INLINE_SPLIT 1, 2, 3, 16), a cold one read
 * O_DIRECT in whole blocks through the POSIX path's staging with a lent
 * bounce, and both through an O_DIRECT handle. Byte-exact against the
 * file, the device bytes around the target unchanged; whole files, past
 * EOF (a buffer larger than the file), from an unaligned offset to the
 * end, at buffer offsets 0 and 3. Runs on every built backend (ref: the
 * POSIX path's staging alone). Exit 77 without libcuda.so.1 or a GPU.
 */
#include "gpu_common.h"

#define DEVLEN (4 * T_MiB)

static CUcontext primary;
static CUdeviceptr dev;
static uint8_t *host;

static void rd(opends_handle_t fh, const uint8_t *oracle, size_t fsize, off_t off, size_t size, size_t boff,
	       const char *what)
{
	size_t span = boff + size + 4096;
	CHECK(span <= DEVLEN);
	CU(ods_cu.cuMemsetD8(dev, T_CANARY, span));
	CU(ods_cu.cuCtxSynchronize());
	size_t want = t_expect_read(fsize, (uint64_t)off, size);
	ssize_t got = opends_sync_read(fh, (void *)(uintptr_t)dev, size, off, (off_t)boff);
	if (got != (ssize_t)want) {
		FAILF("%s: file of %zu, read %zu at %lld (buf_offset %zu): %zd, want %zu", what, fsize, size,
		      (long long)off, boff, got, want);
		return;
	}
	CU(ods_cu.cuMemcpyDtoH(host, dev, span));
	VERIFY(host + boff, oracle + off, want, "%s: file of %zu, read %zu at %lld (buf_offset %zu)", what, fsize,
	       size, (long long)off, boff);
	VERIFY_CANARY(host, boff, "%s: bytes before the target (file of %zu, read %zu at %lld)", what, fsize, size,
		      (long long)off);
	VERIFY_CANARY(host + boff + want, span - boff - want,
		      "%s: bytes after the returned range (file of %zu, read %zu at %lld)", what, fsize, size,
		      (long long)off);
}

static void drop(int fd)
{
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

static void files(const uint8_t *oracle, const char *split)
{
	static const size_t sizes[] = { 16384, 65536, 65537, 100000, 123457, 300001, (size_t)1 << 20 };
	setenv("OPENDS_INLINE_SPLIT", split, 1);
	OK(opends_driver_open());
	for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
		size_t fsize = sizes[i];
		char path[PATH_MAX], name[64];
		snprintf(name, sizeof name, "in%zu.bin", fsize);
		t_path(path, sizeof path, name);
		t_write_pattern_file(path, fsize, hashpat);
		int bfd = open(path, O_RDONLY);
		CHECK(bfd >= 0);
		for (int direct = 0; direct < 2; direct++) {
			int fd = direct ? open(path, O_RDONLY | O_DIRECT) : bfd;
			if (fd < 0)
				continue; /* no O_DIRECT here */
			opends_handle_t fh;
			OK(opends_handle_register(&fh, fd));
			char what[96];
			for (size_t boff = 0; boff < 4; boff += 3) {
				snprintf(what, sizeof what, "split %s, %s, cold", split, direct ? "O_DIRECT" : "buffered");
				drop(bfd);
				rd(fh, oracle, fsize, 0, fsize, boff, what);
				drop(bfd);
				rd(fh, oracle, fsize, 777, fsize - 777, boff, what);
				/* hot: through the page cache first (direct reads
				 * leave it empty) */
				CHECK(t_pread_all(bfd, host, fsize, 0) == fsize);
				snprintf(what, sizeof what, "split %s, %s, hot", split, direct ? "O_DIRECT" : "buffered");
				rd(fh, oracle, fsize, 0, fsize, boff, what);
				rd(fh, oracle, fsize, 0, fsize + 5000, boff, what);
				rd(fh, oracle, fsize, 777, fsize - 777, boff, what);
			}
			OK(opends_handle_deregister(fh));
			if (direct)
				close(fd);
		}
		close(bfd);
		unlink(path);
	}
	OK(opends_driver_close());
	printf("OPENDS_INLINE_SPLIT=%s: byte-exact\n", split);
}

int main(void)
{
	t_watchdog(240);
	static const char *const need[] = { "cuCtxCreate", NULL };
	gpu_open(need, 1, &primary, 1, NULL);
	if (!getenv("OPENDS_ACCEL"))
		setenv("OPENDS_ACCEL", "cuda", 1);
	uint8_t *oracle = t_oracle((size_t)1 << 20, hashpat);
	CU(ods_cu.cuMemAlloc(&dev, DEVLEN));
	host = t_xmalloc(DEVLEN);
	static const char *const splits[] = { "1", "2", "3", "16" };
	for (size_t k = 0; k < sizeof(splits) / sizeof(*splits); k++)
		files(oracle, splits[k]);
	CU(ods_cu.cuMemFree(dev));
	free(host);
	free(oracle);
	t_rm_dir();
	printf("OK\n");
	return 0;
}
