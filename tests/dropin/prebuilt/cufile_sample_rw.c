/*
 * cufile_sample_rw [--mem=host|device] DIR
 *
 * The flow of NVIDIA's cuFile samples, as programs copy it: open a file
 * with O_DIRECT, open the driver, register the handle and a buffer, write,
 * read back and compare; then what such programs meet next: chunked writes
 * with bufPtr_offset past the end of the file, unregistered and unaligned
 * buffers, a pointer inside a registered buffer, short reads at the end of
 * the file, read-only and non-O_DIRECT fds, register/deregister loops, and
 * the answers to descriptors that are not files and to buffer misuse.
 * Data is checked byte for byte (a mismatch fails, exit 1); answers print
 * as "= name value" lines (run1.sh: prebuilt/cufile_sample_rw.expected;
 * gpu-compare.sh: NVIDIA's answers).
 */
#include "prog.h"

#include <sys/stat.h>

#define SZ (4u << 20)
#define SRC_SZ (SZ + 1234u) /* not a multiple of 4 KiB: a short read at the end */

/* Register fd and print the answer; one that registers is deregistered. */
static void reg_bad(const char *name, int fd)
{
	CUfileHandle_t fh;
	CUfileError_t e = reg_fd(fd, &fh);
	ans(name, e);
	if (!e.err)
		cuFileHandleDeregister(fh);
}

int main(int argc, char **argv)
{
	const char *dir = prog_args(argc, argv);
	char src[512], out[512];
	uint8_t *oracle;
	make_file(dir, "sample_src.bin", SRC_SZ, 1, &oracle, src, sizeof src);
	snprintf(out, sizeof out, "%s/sample_out.bin", dir);
	uint8_t *h = malloc(3 * SZ);
	if (!h)
		FAIL("out of memory");

	/* a call before cuFileDriverOpen (cuFile opens on first use), then
	 * the program's own open: the use count after each */
	typedef long (*use_count_fn)(void);
	use_count_fn use_count = (use_count_fn)dlsym(RTLD_DEFAULT, "cuFileUseCount");
	CUfileDrvProps_t props;
	ans("props_before_open", cuFileDriverGetProperties(&props));
	if (use_count)
		printf("= use_count_after_props %ld\n", use_count());
	ans("driver_open", cuFileDriverOpen());
	if (use_count)
		printf("= use_count_after_open %ld\n", use_count());
	ans("props", cuFileDriverGetProperties(&props));
	printf("# max_direct_io_size %zu KiB, max_batch_io_size %u\n", (size_t)props.nvfs.max_direct_io_size,
	       props.max_batch_io_size);

	/* 1. write, read back, compare (the sample's core) */
	bool direct;
	int fd = open_direct(out, O_CREAT | O_TRUNC | O_RDWR, &direct);
	printf("# %s: %s\n", out, direct ? "O_DIRECT" : "no O_DIRECT (the file system refuses it)");
	CUfileHandle_t fh = reg_ok(fd);
	int chk = open(out, O_RDONLY); /* the oracle's reads: no O_DIRECT */
	void *wbuf = m_alloc(SZ), *rbuf = m_alloc(SZ);
	m_put(wbuf, oracle, SZ);
	m_fill(rbuf, 0xEE, SZ);
	ans("buf_register_w", cuFileBufRegister(wbuf, SZ, 0));
	ans("buf_register_r", cuFileBufRegister(rbuf, SZ, 0));
	ssize_t r = cuFileWrite(fh, wbuf, SZ, 0, 0);
	if (r != (ssize_t)SZ)
		FAIL("cuFileWrite of %u bytes: %zd (errno %d)", SZ, r, errno);
	r = cuFileRead(fh, rbuf, SZ, 0, 0);
	if (r != (ssize_t)SZ)
		FAIL("cuFileRead of %u bytes: %zd (errno %d)", SZ, r, errno);
	expect_bytes(rbuf, 0, oracle, SZ, "read back after cuFileWrite");
	if (pread(chk, h, SZ, 0) != (ssize_t)SZ || memcmp(h, oracle, SZ))
		FAIL("the file does not hold what cuFileWrite wrote");

	/* 2. chunked writes through bufPtr_offset, starting past the end of
	 * the file (8 MiB: a 4 MiB hole that must read as zeros) */
	for (unsigned i = 0; i < 8; i++) {
		size_t c = SZ / 8;
		r = cuFileWrite(fh, wbuf, c, (off_t)(2 * SZ + i * c), (off_t)(i * c));
		if (r != (ssize_t)c)
			FAIL("chunk %u: cuFileWrite %zd (errno %d)", i, r, errno);
	}
	struct stat st;
	if (fstat(fd, &st) || st.st_size != 3 * (off_t)SZ)
		FAIL("file size %lld after writing up to %u", (long long)st.st_size, 3 * SZ);
	if (pread(chk, h, 3 * SZ, 0) != 3 * (ssize_t)SZ)
		FAIL("pread");
	for (size_t i = SZ; i < 2 * SZ; i++)
		if (h[i])
			FAIL("the hole at byte %zu is 0x%02x", i, h[i]);
	if (memcmp(h + 2 * SZ, oracle, SZ))
		FAIL("chunked writes: the file differs");
	m_fill(rbuf, 0xEE, SZ);
	r = cuFileRead(fh, rbuf, SZ, (off_t)SZ + 4096, 0); /* half hole, half data */
	if (r != (ssize_t)SZ)
		FAIL("read across the hole: %zd", r);
	memset(h, 0, SZ);
	memcpy(h + SZ - 4096, oracle, 4096);
	expect_bytes(rbuf, 0, h, SZ, "read across the hole");

	/* 3. the source file through a read-only fd (no O_DIRECT) */
	int rofd = open(src, O_RDONLY);
	CUfileHandle_t rfh = reg_ok(rofd);
	void *ubuf = m_alloc(SZ);
	m_fill(ubuf, 0xEE, SZ);
	r = cuFileRead(rfh, (uint8_t *)ubuf + 3, 100001, 12345, 0); /* unregistered, unaligned */
	if (r != 100001)
		FAIL("unaligned read into an unregistered buffer: %zd", r);
	expect_bytes(ubuf, 3, oracle + 12345, 100001, "unaligned unregistered read");
	r = cuFileRead(rfh, rbuf, SZ, SZ - 4096, 0); /* 4096 + 1234 bytes are left */
	ans_io("read_short_at_eof", r);
	if (r == 4096 + 1234)
		expect_bytes(rbuf, 0, oracle + SZ - 4096, 4096 + 1234, "short read at the end");
	ans_io("read_at_eof", cuFileRead(rfh, rbuf, 4096, SRC_SZ, 0));
	ans_io("read_past_eof", cuFileRead(rfh, rbuf, 4096, SRC_SZ + 100000, 0));
	ans_io("read_size_0", cuFileRead(rfh, rbuf, 0, 0, 0));
	/* a pointer inside a registered buffer, as base (cuFile asks for the
	 * registered base plus bufPtr_offset; programs do both) */
	m_fill(rbuf, 0xEE, SZ);
	r = cuFileRead(rfh, (uint8_t *)rbuf + 65536, 65536, 4096, 0);
	ans_io("read_into_registered_interior", r);
	if (r == 65536)
		expect_bytes(rbuf, 65536, oracle + 4096, 65536, "read into a registered buffer's interior");
	r = cuFileRead(rfh, (uint8_t *)rbuf + 65536, 65536, 4096, 8192);
	ans_io("read_into_registered_interior_offset", r);
	if (r == 65536)
		expect_bytes(rbuf, 65536 + 8192, oracle + 4096, 65536, "interior pointer plus bufPtr_offset");
	errno = 0;
	ans_io("write_read_only_fd", cuFileWrite(rfh, wbuf, 4096, 0, 0));

	/* 4. the same file with O_DIRECT, read-only, and a second
	 * descriptor of one file registered beside the first */
	int dfd = open_direct(src, O_RDONLY, &direct);
	CUfileHandle_t dfh;
	ans("handle_register_second_fd_same_file", reg_fd(dfd, &dfh));
	m_fill(rbuf, 0xEE, SZ);
	r = cuFileRead(dfh, rbuf, SZ - 8192, 4096, 0);
	if (r != (ssize_t)SZ - 8192)
		FAIL("read through the O_DIRECT fd: %zd", r);
	expect_bytes(rbuf, 0, oracle + 4096, SZ - 8192, "read through the O_DIRECT fd");
	cuFileHandleDeregister(dfh);
	close(dfd);

	/* 5. register/deregister loops, each turn byte-exact */
	int loops_ok = 0;
	for (int i = 0; i < 100; i++) {
		/* a dup of rofd (registered as rfh): another fd of the file */
		int d = dup(rofd);
		CUfileHandle_t lfh;
		CUfileError_t e = reg_fd(d, &lfh);
		if (e.err)
			FAIL("loop %d: cuFileHandleRegister of a dup: %d", i, (int)e.err);
		off_t off = (off_t)(i * 40009) % (SRC_SZ - 8192);
		r = cuFileRead(lfh, rbuf, 8192, off, (off_t)i);
		if (r != 8192)
			FAIL("loop %d: read %zd", i, r);
		expect_bytes(rbuf, (size_t)i, oracle + off, 8192, "handle loop read");
		cuFileHandleDeregister(lfh);
		close(d);
		e = cuFileBufRegister(ubuf, 65536, 0);
		if (e.err)
			FAIL("loop %d: cuFileBufRegister: %d", i, (int)e.err);
		r = cuFileRead(rfh, ubuf, 65536, (off_t)i * 4096, 0);
		if (r != 65536)
			FAIL("loop %d: read into the registered buffer: %zd", i, r);
		expect_bytes(ubuf, 0, oracle + (size_t)i * 4096, 65536, "buffer loop read");
		e = cuFileBufDeregister(ubuf);
		if (e.err)
			FAIL("loop %d: cuFileBufDeregister: %d", i, (int)e.err);
		loops_ok++;
	}
	printf("= register_loops %d\n", loops_ok);
	cuFileHandleDeregister(rfh);
	CUfileHandle_t again;
	ans("handle_register_after_deregister", reg_fd(rofd, &again));
	r = cuFileRead(again, rbuf, 4096, 1, 0);
	if (r != 4096)
		FAIL("read after registering again: %zd", r);
	expect_bytes(rbuf, 0, oracle + 1, 4096, "read after registering again");
	cuFileHandleDeregister(again);

	/* 6. descriptors that are not regular files, and bad ones; one that
	 * registers is deregistered at once (NVIDIA's cuFile knows handles by
	 * fd number: a leaked one makes the next fd of that number "already
	 * registered") */
	reg_bad("handle_register_fd_minus_1", -1);
	int closed = open(src, O_RDONLY);
	close(closed);
	reg_bad("handle_register_closed_fd", closed);
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY);
	reg_bad("handle_register_directory", dirfd);
	close(dirfd);
	int pfd[2];
	if (pipe(pfd))
		FAIL("pipe");
	reg_bad("handle_register_pipe", pfd[0]);
	close(pfd[0]);
	close(pfd[1]);
	int appfd = open(src, O_WRONLY | O_APPEND);
	reg_bad("handle_register_o_append", appfd);
	close(appfd);
	int pathfd = open(src, O_PATH);
	/* NVIDIA's cuFile registers an O_PATH fd (as the drop-in does since
	 * it took that answer); I/O through it must fail, and the file keep
	 * its bytes (checked below) */
	CUfileHandle_t pfh, pfh2;
	CUfileError_t pe = reg_fd(pathfd, &pfh);
	ans("handle_register_o_path", pe);
	if (!pe.err) {
		errno = 0;
		ans_io("read_o_path", cuFileRead(pfh, rbuf, 4096, 0, 0));
		errno = 0;
		ans_io("write_o_path", cuFileWrite(pfh, rbuf, 4096, 0, 0));
		CUfileError_t pe2 = reg_fd(pathfd, &pfh2);
		ans("handle_register_o_path_twice", pe2);
		if (!pe2.err)
			cuFileHandleDeregister(pfh2);
		cuFileHandleDeregister(pfh);
	}
	close(pathfd);
	if (pread(rofd, h, 4096, 0) != 4096 || memcmp(h, oracle, 4096))
		FAIL("the file changed through an O_PATH fd's handle");
	int nullfd = open("/dev/null", O_RDWR);
	reg_bad("handle_register_dev_null", nullfd);
	close(nullfd);

	/* 7. buffer misuse */
	ans("buf_register_null", cuFileBufRegister(NULL, 4096, 0));
	ans("buf_deregister_null", cuFileBufDeregister(NULL));
	ans("buf_register_overlapping", cuFileBufRegister((uint8_t *)rbuf + 4096, 4096, 0));
	ans("buf_deregister_interior", cuFileBufDeregister((uint8_t *)rbuf + 4096));
	ans("buf_deregister_r", cuFileBufDeregister(rbuf));
	ans("buf_deregister_r_again", cuFileBufDeregister(rbuf));
	ans("buf_deregister_w", cuFileBufDeregister(wbuf));

	cuFileHandleDeregister(fh);
	ans("driver_close", cuFileDriverClose());
	if (use_count)
		printf("= use_count_after_close %ld\n", use_count());
	close(fd);
	close(chk);
	close(rofd);
	unlink(out);
	unlink(src);
	m_free(wbuf);
	m_free(rbuf);
	m_free(ubuf);
	free(h);
	free(oracle);
	printf("PASS: cufile_sample_rw, every byte as written (%s memory)\n", device ? "device" : "host");
	return 0;
}
