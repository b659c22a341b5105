/*
 * test_sync_read [<dir>] [--backend=NAME]
 *
 * opends_sync_read against an in-memory oracle, on the two files of
 * test_sync_read_prep (pat16.bin, hash.bin). With <dir> the files there are
 * used (the upstream flow: prep, then read); without, the program writes
 * its own into a private temp directory. Each file is opened twice, without
 * and with O_DIRECT, because the backends take different paths for the two
 * (bounce buffers and block rounding only happen with O_DIRECT).
 *
 * Every read goes into a buffer pre-filled with a canary; after the read
 * the returned count, the data, and every byte outside the returned range
 * are checked. So a backend that reads whole blocks underneath and copies
 * too much, or reads the wrong sector, fails.
 */
#include "common.h"

static const uint8_t *oracle;
static size_t fsize;
static const char *fname;
static bool fdirect;

/* scratch for reads: big enough for the whole file plus offsets and slack */
static uint8_t *scratch;
static size_t scratch_len;

/* Read size bytes at off into base + shift + boff and check everything:
 * the count, the bytes, and that nothing else in the buffer changed. */
static void rd_at(opends_handle_t fh, size_t shift, uint64_t off, size_t size, size_t boff)
{
	size_t span = shift + boff + size + 64; /* 64 guard bytes after the target */
	CHECK(span <= scratch_len);
	memset(scratch, T_CANARY, span);
	size_t want = t_expect_read(fsize, off, size);
	ssize_t got = opends_sync_read(fh, scratch + shift, size, (off_t)off, (off_t)boff);
	if (got != (ssize_t)want)
		FAILF("%s%s: read(size %zu, off %llu, buf_offset %zu, ptr+%zu) returned %zd (%s), expected %zu",
		      fname, fdirect ? " O_DIRECT" : "", size, (unsigned long long)off, boff, shift, got,
		      got < 0 ? t_errname(got) : "bytes", want);
	VERIFY(scratch + shift + boff, oracle + (want ? off : 0), want,
	       "%s%s: data of read(size %zu, off %llu, buf_offset %zu, ptr+%zu)", fname,
	       fdirect ? " O_DIRECT" : "", size, (unsigned long long)off, boff, shift);
	VERIFY_CANARY(scratch, shift + boff, "%s%s: bytes before the target, read(size %zu, off %llu, buf_offset %zu)",
		      fname, fdirect ? " O_DIRECT" : "", size, (unsigned long long)off, boff);
	VERIFY_CANARY(scratch + shift + boff + want, size - want + 64,
		      "%s%s: bytes after the returned range, read(size %zu, off %llu, buf_offset %zu)", fname,
		      fdirect ? " O_DIRECT" : "", size, (unsigned long long)off, boff);
}

static void rd(opends_handle_t fh, uint64_t off, size_t size, size_t boff)
{
	rd_at(fh, 0, off, size, boff);
}

static void basic_shapes(opends_handle_t fh)
{
	size_t F = fsize;
	size_t lastblk = (F - 1) & ~(size_t)4095;

	t_phase = "single block";
	rd(fh, 0, 4096, 0);
	rd(fh, 4096, 4096, 0);

	t_phase = "multi block";
	rd(fh, 0, 16384, 0);
	rd(fh, 4096, 3 * 4096, 0);
	rd(fh, 0, 65536, 0);

	t_phase = "at offset";
	rd(fh, 8192, 4096, 0);
	rd(fh, 12345, 6789, 0);
	rd(fh, 100000, 30000, 0);

	t_phase = "full file";
	rd(fh, 0, F, 0);
	rd(fh, 0, F + 8192, 0); /* asks for more than there is: returns F */

	t_phase = "last block";
	rd(fh, lastblk, 4096, 0);
	rd(fh, lastblk, F - lastblk, 0);

	t_phase = "short at EOF";
	rd(fh, F - 100, 4096, 0);
	rd(fh, F - 1, 2, 0);
	rd(fh, F - 5000, 8192, 3);
	rd(fh, lastblk - 1, 8192, 0);

	t_phase = "at EOF";
	rd(fh, F, 4096, 0);
	rd(fh, F, 1, 0);

	t_phase = "beyond EOF";
	rd(fh, F + 1, 1, 0);
	rd(fh, F + 4096, 4096, 0);
	rd(fh, (uint64_t)F + (1ull << 30), 10, 0);

	t_phase = "zero size";
	rd(fh, 0, 0, 0);
	rd(fh, 100, 0, 17);
	rd(fh, F, 0, 0);
	rd(fh, F + 100, 0, 0);

	t_phase = "buf_offset with guards";
	rd(fh, 4096, 4096, 1);
	rd(fh, 100, 5000, 4097);
	rd(fh, 0, 4096, 12345);
	rd(fh, 777, 333, 4096);
	rd_at(fh, 3, 8191, 4097, 511);
}

static void sequential_overlapping_repeated(opends_handle_t fh)
{
	/* Sequential: the first 64 KiB in 3000-byte pieces, each landing at its
	 * own buf_offset in one buffer; then the whole buffer is checked. */
	t_phase = "sequential regions";
	size_t total = 65536 + 1000;
	memset(scratch, T_CANARY, total + 64);
	for (size_t off = 0; off < total; off += 3000) {
		size_t n = t_min(3000, total - off);
		EXPECT_SSZ(opends_sync_read(fh, scratch, n, (off_t)off, (off_t)off), (ssize_t)n);
	}
	VERIFY(scratch, oracle, total, "%s: sequential 3000-byte pieces", fname);
	VERIFY_CANARY(scratch + total, 64, "%s: past sequential pieces", fname);

	t_phase = "overlapping regions";
	rd(fh, 0, 8192, 0);
	rd(fh, 4096, 8192, 0);
	rd(fh, 2048, 8192, 0);
	rd(fh, 6000, 3000, 0);
	/* overlapping file ranges into one buffer, later reads overwrite part
	 * of earlier ones: the result must be what the last read says */
	memset(scratch, T_CANARY, 20000);
	EXPECT_SSZ(opends_sync_read(fh, scratch, 10000, 0, 0), 10000);
	EXPECT_SSZ(opends_sync_read(fh, scratch, 10000, 5000, 5000), 10000);
	EXPECT_SSZ(opends_sync_read(fh, scratch, 3000, 7000, 7000), 3000);
	VERIFY(scratch, oracle, 15000, "%s: overlapping reads into one buffer", fname);
	VERIFY_CANARY(scratch + 15000, 5000, "%s: past overlapping reads", fname);

	t_phase = "repeated reads";
	for (int i = 0; i < 5; i++) {
		rd(fh, 4096 * 3 + 17, 9000, 0);
		rd(fh, fsize - 10, 100, 5);
	}
}

static void sweep(opends_handle_t fh)
{
	t_phase = "offset/size sweep";
	const uint64_t F = fsize;
	const uint64_t offs[] = { 0, 1, 4, 100, 511, 512, 513, 4095, 4096, 4097, 8191, 8192, 65535,
				  F - 5000, F - 4097, F - 4096, F - 1 };
	const size_t sizes[] = { 1, 2, 4, 8, 412, 511, 512, 513, 4095, 4096, 4097, 8191, 8192, 8193, 65539 };
	const size_t boffs[] = { 0, 7, 4096 };
	unsigned k = 0;
	for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++)
		for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++)
			for (size_t b = 0; b < sizeof boffs / sizeof boffs[0]; b++, k++)
				rd_at(fh, k % 3 == 2 ? 3 : k % 3, offs[i], sizes[j], boffs[b]);

	/* the combinations the brief names */
	rd(fh, 4, 8, 0);
	rd(fh, 100, 412, 0);
	rd(fh, 511, 2, 0);
	rd(fh, 4095, 4, 0);
	rd(fh, 4097, 8191, 0);
	rd(fh, 4095, 4098, 1);
	rd(fh, 1, 4096 * 5 - 2, 0);
}

static void registered_buffers(opends_handle_t fh)
{
	t_phase = "registered buffers";
	const size_t R = 64 * T_KiB;
	/* registered [reg, reg+R) inside a bigger allocation, so a read that
	 * is refused for crossing the registered end would still be valid
	 * memory if the library wrote it anyway */
	uint8_t *mem = t_xmalloc(2 * R);
	uint8_t *reg = mem;
	OK(opends_buf_register(reg, R, 0));

	memset(mem, T_CANARY, 2 * R);
	EXPECT_SSZ(opends_sync_read(fh, reg, 4096, 0, 0), 4096);
	VERIFY(reg, oracle, 4096, "%s: registered read at 0", fname);
	EXPECT_SSZ(opends_sync_read(fh, reg, 8192, 100, 4097), 8192);
	VERIFY(reg + 4097, oracle + 100, 8192, "%s: registered read, buf_offset 4097", fname);
	VERIFY_CANARY(reg + 4097 + 8192, 2 * R - 4097 - 8192, "%s: after registered read", fname);
	/* a pointer inside the registered range, ending exactly at its end */
	EXPECT_SSZ(opends_sync_read(fh, reg + 1000, R - 1000 - 24, 5, 24), (ssize_t)(R - 1000 - 24));
	VERIFY(reg + 1024, oracle + 5, R - 1024, "%s: read ending at the registered end", fname);

	/* crossing the registered end: refused, nothing written */
	memset(mem, T_CANARY, 2 * R);
	EXPECT_SSZ(opends_sync_read(fh, reg, 4096, 0, (off_t)(R - 100)), -OPENDS_INVALID_MAPPING_RANGE);
	EXPECT_SSZ(opends_sync_read(fh, reg + R - 1, 2, 0, 0), -OPENDS_INVALID_MAPPING_RANGE);
	EXPECT_SSZ(opends_sync_read(fh, reg + 4096, R, 0, 0), -OPENDS_INVALID_MAPPING_RANGE);
	VERIFY_CANARY(mem, 2 * R, "%s: a refused read wrote the buffer", fname);

	OK(opends_buf_deregister(reg));
	/* unregistered now: the same read is just a read */
	EXPECT_SSZ(opends_sync_read(fh, reg, 4096, 0, (off_t)(R - 100)), 4096);
	VERIFY(reg + R - 100, oracle, 4096, "%s: read after deregister", fname);

	/* registered at an unaligned address, read through an unaligned ptr */
	memset(mem, T_CANARY, 2 * R);
	OK(opends_buf_register(mem + 3, 10000, 0));
	EXPECT_SSZ(opends_sync_read(fh, mem + 3, 9999, 1, 1), 9999);
	VERIFY(mem + 4, oracle + 1, 9999, "%s: unaligned registered read", fname);
	VERIFY_CANARY(mem, 4, "%s: before unaligned registered read", fname);
	VERIFY_CANARY(mem + 10003, 2 * R - 10003, "%s: after unaligned registered read", fname);
	OK(opends_buf_deregister(mem + 3));
	free(mem);
}

static void unaligned_pointers(opends_handle_t fh)
{
	t_phase = "unaligned host pointers";
	const size_t shifts[] = { 1, 3, 511, 4095 };
	for (size_t i = 0; i < 4; i++) {
		rd_at(fh, shifts[i], 0, 4096, 0);
		rd_at(fh, shifts[i], 777, 10000, 0);
		rd_at(fh, shifts[i], 4096, 8192, 1);
		rd_at(fh, shifts[i], fsize - 3000, 8192, 0);
	}
}

static void run_file(const char *path, const char *name, t_patfn fn, size_t size, bool direct)
{
	int fd = t_open(path, O_RDONLY, direct);
	if (fd == -2)
		return;
	uint8_t *orc = t_oracle(size, fn);
	oracle = orc;
	fsize = size;
	fname = name;
	fdirect = direct;
	CHECKF((size_t)t_file_size(fd) == size, "%s has the wrong size", path);

	opends_handle_t fh = t_register(fd);
	basic_shapes(fh);
	sequential_overlapping_repeated(fh);
	sweep(fh);
	registered_buffers(fh);
	unaligned_pointers(fh);
	OK(opends_handle_deregister(fh));
	close(fd);
	free(orc);
	printf("%s%s: OK\n", name, direct ? " (O_DIRECT)" : "");
}

/*
 * Offsets past 4 GiB (off_t is 64-bit everywhere, nothing may truncate to
 * 32 bits): a sparse file of 5 GiB + 100 bytes with hashpat data in two
 * islands, one across the 4 GiB line and one at the end; the rest is a
 * hole and reads as zeros.
 */
#define G4 ((uint64_t)4 << 30)
#define SP_SIZE (((uint64_t)5 << 30) + 100)
static const uint64_t isl[2][2] = { { G4 - 3000, G4 + 3000 }, { SP_SIZE - 10100, SP_SIZE } };

static uint8_t sparse_byte(uint64_t x)
{
	for (int i = 0; i < 2; i++)
		if (x >= isl[i][0] && x < isl[i][1])
			return hashpat(x);
	return 0;
}

static void sparse_rd(opends_handle_t fh, uint64_t off, size_t size, size_t boff, bool direct)
{
	size_t want = off >= SP_SIZE ? 0 : (size_t)t_min(size, SP_SIZE - off);
	uint8_t *exp = t_xmalloc(want + 1);
	for (size_t i = 0; i < want; i++)
		exp[i] = sparse_byte(off + i);
	memset(scratch, T_CANARY, boff + size + 64);
	ssize_t got = opends_sync_read(fh, scratch, size, (off_t)off, (off_t)boff);
	if (got != (ssize_t)want)
		FAILF("sparse%s: read(size %zu, off %llu) returned %zd (%s), expected %zu", direct ? " O_DIRECT" : "",
		      size, (unsigned long long)off, got, got < 0 ? t_errname(got) : "bytes", want);
	VERIFY(scratch + boff, exp, want, "sparse%s: read(size %zu, off %llu)", direct ? " O_DIRECT" : "", size,
	       (unsigned long long)off);
	VERIFY_CANARY(scratch, boff, "sparse: before target");
	VERIFY_CANARY(scratch + boff + want, size - want + 64, "sparse: after returned range, read(size %zu, off %llu)",
		      size, (unsigned long long)off);
	free(exp);
}

static void sparse_file(void)
{
	t_phase = "offsets past 4 GiB";
	char path[PATH_MAX];
	t_path(path, sizeof path, "sparse.bin");
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
	CHECK(fd >= 0);
	if (ftruncate(fd, (off_t)SP_SIZE) != 0) {
		printf("NOTE: cannot make a 5 GiB sparse file (%s); offsets past 4 GiB not tested\n", strerror(errno));
		close(fd);
		unlink(path);
		return;
	}
	for (int i = 0; i < 2; i++) {
		size_t n = (size_t)(isl[i][1] - isl[i][0]);
		uint8_t *b = t_xmalloc(n);
		t_fill(b, isl[i][0], n, hashpat);
		t_pwrite_all(fd, b, n, (off_t)isl[i][0]);
		free(b);
	}
	CHECK(fsync(fd) == 0);
	close(fd);
	for (int d = 0; d < 2; d++) {
		fd = t_open(path, O_RDONLY, d);
		if (fd == -2)
			continue;
		opends_handle_t fh = t_register(fd);
		sparse_rd(fh, G4 - 3000, 6000, 0, d);
		sparse_rd(fh, G4 - 1, 2, 3, d);
		sparse_rd(fh, G4, 4096, 0, d);
		sparse_rd(fh, G4 - 5000, 12000, 1, d); /* hole, data, hole */
		sparse_rd(fh, G4 + 4096 * 3, 8192, 0, d); /* all hole */
		sparse_rd(fh, SP_SIZE - 9000, 12000, 0, d); /* short at EOF */
		sparse_rd(fh, SP_SIZE - 4196, 4096, 0, d);
		sparse_rd(fh, SP_SIZE, 10, 0, d);
		sparse_rd(fh, (uint64_t)1 << 33, 10, 0, d); /* past EOF, 8 GiB */
		OK(opends_handle_deregister(fh));
		close(fd);
	}
	unlink(path);
	printf("offsets past 4 GiB: OK\n");
}

int main(int argc, char **argv)
{
	const char *dir = t_args(argc, argv);
	t_watchdog(280);

	char p16[PATH_MAX], ph[PATH_MAX];
	if (dir) {
		snprintf(p16, sizeof p16, "%s/%s", dir, T_PAT16_NAME);
		snprintf(ph, sizeof ph, "%s/%s", dir, T_HASH_NAME);
	} else {
		t_path(p16, sizeof p16, T_PAT16_NAME);
		t_path(ph, sizeof ph, T_HASH_NAME);
		t_write_pattern_file(p16, T_PAT16_SIZE, pat16);
		t_write_pattern_file(ph, T_HASH_SIZE, hashpat);
	}

	scratch_len = T_HASH_SIZE + 3 * 8192 + 65536 + 4096;
	scratch = t_xmalloc(scratch_len);

	t_driver_open();
	printf("backend %s\n", opends_driver_backend());
	for (int d = 0; d < 2; d++) {
		run_file(p16, T_PAT16_NAME, pat16, T_PAT16_SIZE, d);
		run_file(ph, T_HASH_NAME, hashpat, T_HASH_SIZE, d);
	}
	sparse_file();
	OK(opends_driver_close());

	/* Small chunks and queues: every read above 8 KiB is split into many
	 * pieces, the pieces' edges land everywhere, and the queues fill. */
	t_driver_open_small_pieces();
	for (int d = 0; d < 2; d++)
		run_file(ph, T_HASH_NAME, hashpat, T_HASH_SIZE, d);
	OK(opends_driver_close());
	free(scratch);
	return 0;
}
