/*
 * test_gds_rw: the gds backend (NVIDIA cuFile) against an in-memory oracle,
 * into CUDA device memory. GPU suite: exits 77 with the reason where there
 * is no GPU, no CUDA driver, no libcufile.so.0, or no gds backend in the
 * build.
 *
 * The same shapes as the reference suite - single and multi block, short
 * at EOF, at and past EOF, zero size, buf_offset with guard bytes, an
 * offset/size sweep with unaligned values - on one file opened without and
 * with O_DIRECT; writes the same way, checked through a separate fd; then
 * host memory (served by the POSIX path), a registered device buffer,
 * futures (run on the pool's worker threads) and a batch.
 *
 * cuFile refuses files it cannot classify (on the GPU VM: no udev data for
 * the block device). The test checks which path its handle took: it asks
 * cuFile to register the same fd again, which cuFile refuses with
 * "already registered" exactly when the backend's registration succeeded.
 * A refused file skips the test with the command that fixes it; set
 * OPENDS_TEST_GDS_ALLOW_POSIX=1 to run the shapes anyway on the POSIX path.
 *
 * Environment: OPENDS_BACKEND=gds, OPENDS_ACCEL=cuda (meson sets both);
 * TMPDIR picks the file system (not tmpfs: cuFile refuses it).
 */
#include "../common.h"
#include "cudrv.h"

#include <dlfcn.h>

#include "cufile.h"
#include "cufile_api.h"

#include <sys/sysmacros.h>

static const uint8_t *oracle;
static size_t fsize;
static bool fdirect;
static uint8_t *dev;      /* device scratch */
static uint8_t *hst;      /* host mirror of dev */
static size_t scratch_len;

/* ---- which path the backend's handle took ------------------------------- */

static struct ods_cufile_api cf; /* src/vendor/cufile_api.h */

static void load_cufile_probe(void)
{
	const char *path = getenv("OPENDS_CUFILE_LIBRARY");
	char why[256];
	/* the backend has loaded it: NOLOAD finds the same copy */
	if (ods_cufile_load(&cf, path && *path ? path : "libcufile.so.0", RTLD_NOLOAD, why, sizeof why))
		memset(&cf, 0, sizeof cf);
}

/* "cufile", or "posix" with the reason printed. */
static bool on_cufile_path(int fd, const char *what)
{
	if (!cf.lib) {
		printf("NOTE: %s: cannot tell the handle's path (libcufile not found with RTLD_NOLOAD)\n", what);
		return true;
	}
	CUfileDescr_t d;
	memset(&d, 0, sizeof d);
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = fd;
	CUfileHandle_t fh = NULL;
	CUfileError_t e = cf.cuFileHandleRegister(&fh, &d);
	if (e.err == CU_FILE_HANDLE_ALREADY_REGISTERED) { /* the backend has it */
		printf("PATH: %s: cuFile (cuFileHandleRegister of the same fd says already registered)\n", what);
		return true;
	}
	if (e.err == 0)
		cf.cuFileHandleDeregister(fh);
	struct stat st;
	fstat(fd, &st);
	printf("PATH: %s: POSIX fallback - cuFile refuses this file (a second cuFileHandleRegister returned %d).\n"
	       "      On a VM without udev, give cuFile the block device's udev entry (root):\n"
	       "      mkdir -p /run/udev/data && printf 'E:ID_FS_USAGE=filesystem\\nE:ID_FS_TYPE=ext4\\n' > "
	       "/run/udev/data/b%u:%u\n"
	       "      tmpfs files are never accepted: point TMPDIR at a disk-backed file system.\n",
	       what, (int)e.err, major(st.st_dev), minor(st.st_dev));
	return false;
}

/* ---- reads ------------------------------------------------------------- */

static void rd_at(opends_handle_t fh, size_t shift, uint64_t off, size_t size, size_t boff)
{
	size_t span = shift + boff + size + 64;
	CHECK(span <= scratch_len);
	td_memset(dev, T_CANARY, span);
	size_t want = t_expect_read(fsize, off, size);
	ssize_t got = opends_sync_read(fh, dev + shift, size, (off_t)off, (off_t)boff);
	if (got != (ssize_t)want)
		FAILF("%sread(size %zu, off %llu, buf_offset %zu, ptr+%zu) into device memory returned %zd (%s), "
		      "expected %zu",
		      fdirect ? "O_DIRECT " : "", size, (unsigned long long)off, boff, shift, got,
		      got < 0 ? t_errname(got) : "bytes", want);
	td_to_host(hst, dev, span);
	VERIFY(hst + shift + boff, oracle + (want ? off : 0), want, "%sdata of read(size %zu, off %llu, boff %zu)",
	       fdirect ? "O_DIRECT " : "", size, (unsigned long long)off, boff);
	VERIFY_CANARY(hst, shift + boff, "bytes before the target, read(size %zu, off %llu)", size,
		      (unsigned long long)off);
	VERIFY_CANARY(hst + shift + boff + want, size - want + 64, "bytes after the target, read(size %zu, off %llu)",
		      size, (unsigned long long)off);
}

static void read_shapes(opends_handle_t fh)
{
	size_t F = fsize, lastblk = (F - 1) & ~(size_t)4095;
	t_phase = "read shapes";
	rd_at(fh, 0, 0, 4096, 0);
	rd_at(fh, 0, 4096, 3 * 4096, 0);
	rd_at(fh, 0, 12345, 6789, 0);
	rd_at(fh, 0, 0, F, 0);
	rd_at(fh, 0, 0, F + 8192, 0);
	rd_at(fh, 0, lastblk, 4096, 0);
	rd_at(fh, 0, F - 100, 4096, 0);
	rd_at(fh, 0, F - 5000, 8192, 3);
	rd_at(fh, 0, F, 4096, 0);
	rd_at(fh, 0, F + 4096, 4096, 0);
	rd_at(fh, 0, 100, 0, 17);
	rd_at(fh, 0, 4096, 4096, 1);
	rd_at(fh, 0, 100, 5000, 4097);
	rd_at(fh, 3, 8191, 4097, 511);

	t_phase = "read sweep";
	const uint64_t offs[] = { 0, 1, 511, 512, 4095, 4096, 4097, 65535, F - 4097, F - 1 };
	const size_t sizes[] = { 1, 412, 511, 4095, 4096, 4097, 8193, 65539, 1 << 20 };
	const size_t boffs[] = { 0, 7, 4096 };
	unsigned k = 0;
	for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++)
		for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++)
			for (size_t b = 0; b < sizeof boffs / sizeof boffs[0]; b++, k++)
				rd_at(fh, k % 3 == 2 ? 3 : k % 3, offs[i], sizes[j], boffs[b]);
}

/* ---- writes ------------------------------------------------------------ */

static void write_shapes(const char *path, bool direct)
{
	t_phase = direct ? "writes, O_DIRECT" : "writes";
	const size_t W = 256 * T_KiB + 777;
	uint8_t *wor = t_xmalloc(W + 3 * 4096); /* the file as it should be */
	memset(wor, 0, W + 3 * 4096);
	int fd = t_open(path, O_RDWR | O_CREAT | O_TRUNC, direct);
	if (fd == -2)
		return;
	opends_handle_t fh = t_register(fd);
	on_cufile_path(fd, direct ? "write file, O_DIRECT" : "write file");
	size_t fend = 0;
	uint8_t *src = t_xmalloc(W);
	const struct {
		uint64_t off;
		size_t size, boff;
	} cases[] = {
		{ 0, 4096, 0 }, { 4096, 8192, 0 }, { 1, 1, 0 }, { 100, 412, 5 }, { 4095, 2, 0 }, { 4097, 8191, 4097 },
		{ 12345, 6789, 3 }, { 65536, 65536, 0 }, { 8191, 65539, 7 }, { 200000, 40000, 11 }, { 0, W, 0 },
		{ W - 10, 10, 1 }, { W, 3 * 4096, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t off = cases[i].off;
		size_t n = cases[i].size, boff = cases[i].boff;
		t_fill_seed(src, 1000 + i, n);
		td_memset(dev, T_CANARY, boff);
		td_to_dev(dev + boff, src, n);
		EXPECT_SSZ(opends_sync_write(fh, dev, n, (off_t)off, (off_t)boff), (ssize_t)n);
		memcpy(wor + off, src, n);
		if (off + n > fend)
			fend = off + n;
	}
	/* check through an fd of our own, without O_DIRECT */
	int rfd = open(path, O_RDONLY);
	CHECK(rfd >= 0);
	t_check_file_fd(rfd, wor, fend,
			direct ? "file after device-memory writes (O_DIRECT)" : "file after device-memory writes");
	close(rfd);
	free(src);
	free(wor);
	OK(opends_handle_deregister(fh));
	close(fd);
}

/* ---- host memory, registered buffers, futures, batch -------------------- */

static void others(opends_handle_t fh)
{
	t_phase = "host memory through gds";
	uint8_t *h = t_xmalloc(70000);
	EXPECT_SSZ(opends_sync_read(fh, h, 65539, 4097, 3), 65539);
	VERIFY(h + 3, oracle + 4097, 65539, "host-memory read through gds");

	t_phase = "registered device buffer";
	const size_t R = 256 * T_KiB;
	OK(opends_buf_register(dev, R, 0));
	td_memset(dev, T_CANARY, R);
	EXPECT_SSZ(opends_sync_read(fh, dev, 8192, 100, 4097), 8192);
	EXPECT_SSZ(opends_sync_read(fh, dev + 20000, 5000, 3, 1), 5000);
	td_to_host(hst, dev, R);
	VERIFY(hst + 4097, oracle + 100, 8192, "registered read at buf_offset 4097");
	VERIFY(hst + 20001, oracle + 3, 5000, "registered read inside the range");
	EXPECT_SSZ(opends_sync_read(fh, dev, 4096, 0, (off_t)(R - 100)), -OPENDS_INVALID_MAPPING_RANGE);
	OK(opends_buf_deregister(dev));

	t_phase = "futures (worker threads)";
	enum { NF = 8 };
	opends_async_future_t fut[NF];
	const size_t piece = 100000;
	td_memset(dev, T_CANARY, NF * piece);
	for (int i = 0; i < NF; i++)
		OK(opends_async_read(fh, dev, piece - 1, (off_t)(i * 7919), (off_t)(i * piece), &fut[i]));
	for (int i = 0; i < NF; i++)
		EXPECT_SSZ_ND(opends_async_await(&fut[i]), (ssize_t)(piece - 1));
	td_to_host(hst, dev, NF * piece);
	for (int i = 0; i < NF; i++)
		VERIFY(hst + i * piece, oracle + i * 7919, piece - 1, "future %d", i);

	t_phase = "batch";
	opends_batch_t b;
	OK(opends_batch_setup(&b, 8));
	opends_io_params_t p[6];
	memset(p, 0, sizeof p);
	for (int i = 0; i < 6; i++)
		p[i] = t_batch_entry(fh, OPENDS_READ, dev, 40000 + (size_t)i, (off_t)(i * 33333 + 1), (off_t)(i * 50000),
				     (void *)(uintptr_t)(i + 1));
	OK(opends_batch_submit(b, 6, p, 0));
	opends_io_events_t ev[6];
	unsigned got = 0;
	while (got < 6) {
		unsigned nr = 6 - got;
		struct timespec ts = { 30, 0 };
		OK(opends_batch_get_status(b, nr, &nr, ev + got, &ts));
		CHECKF(nr > 0, "batch: nothing completed in 30 s");
		got += nr;
	}
	for (int i = 0; i < 6; i++) {
		int c = (int)(uintptr_t)ev[i].cookie - 1;
		CHECKF(c >= 0 && c < 6, "batch: unknown cookie");
		CHECKF(ev[i].status == OPENDS_COMPLETE && ev[i].ret == (ssize_t)(40000 + c),
		       "batch entry %d: status 0x%x ret %zd", c, ev[i].status, ev[i].ret);
	}
	td_to_host(hst, dev, 6 * 50000);
	for (int i = 0; i < 6; i++)
		VERIFY(hst + i * 50000, oracle + i * 33333 + 1, 40000 + (size_t)i, "batch entry %d", i);
	OK(opends_batch_destroy(b));
	free(h);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(900);
	if (!td_init())
		skip("%s", td_why);
	if (!getenv("OPENDS_BACKEND"))
		setenv("OPENDS_BACKEND", "gds", 1);
	if (!getenv("OPENDS_ACCEL"))
		setenv("OPENDS_ACCEL", "cuda", 1);
	t_driver_open();
	load_cufile_probe();
	bool allow_posix = getenv("OPENDS_TEST_GDS_ALLOW_POSIX") && !strcmp(getenv("OPENDS_TEST_GDS_ALLOW_POSIX"), "1");

	char path[PATH_MAX], wpath[PATH_MAX];
	t_path(path, sizeof path, T_HASH_NAME);
	t_path(wpath, sizeof wpath, "w.bin");
	fsize = T_HASH_SIZE;
	t_write_pattern_file(path, fsize, hashpat);
	oracle = t_oracle(fsize, hashpat);
	scratch_len = fsize + 3 * 65536;
	dev = td_alloc(scratch_len);
	hst = t_xmalloc(scratch_len);

	for (int pass = 0; pass < 2; pass++) {
		fdirect = pass == 1;
		int fd = t_open(path, O_RDWR, fdirect);
		if (fd == -2)
			continue;
		opends_handle_t fh = t_register(fd);
		if (!on_cufile_path(fd, fdirect ? "read file, O_DIRECT" : "read file") && !allow_posix)
			skip("cuFile refused the test file %s (see PATH above); set OPENDS_TEST_GDS_ALLOW_POSIX=1 to run "
			     "on the POSIX path",
			     path);
		read_shapes(fh);
		if (!fdirect)
			others(fh);
		OK(opends_handle_deregister(fh));
		close(fd);
	}
	write_shapes(wpath, false);
	write_shapes(wpath, true);

	td_free(dev);
	OK(opends_driver_close());
	printf("gds: all shapes byte-exact\n");
	return 0;
}
