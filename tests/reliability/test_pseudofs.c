/*
 * test_pseudofs: files whose st_size is 0 but which have content (/proc,
 * and the same on debugfs, configfs, some FUSE file systems) read like any
 * file on every backend and family: the library reads until a read returns
 * 0, as a pread loop does (issue 15 item 12: uring returned 0 bytes, ref
 * the content).
 *
 * The files: /proc/version (a seq_file), /proc/self/cmdline and
 * /proc/self/environ; the program re-executes itself once with a 100 KiB
 * environment variable so that environ spans many pages and the reads'
 * chunking is exercised. Each is read whole and at random offsets and
 * sizes through sync, async, batch and stream calls, into canary-filled
 * memory; the oracle is a pread loop on the same file. Every result must
 * equal the oracle's count and bytes, and nothing past it is written. A
 * regular empty file still reads 0 bytes.
 *
 * Exit 0 pass, 1 fail, 77 skip (no /proc). Backend and memory from
 * OPENDS_BACKEND / OPENDS_ACCEL.
 */
#include "rel.h"

#define BIGENV (100u << 10)
#define SLACK 8192u

static size_t oracle(int fd, uint8_t *dst, size_t size, off_t off)
{
	size_t got = 0;
	while (got < size) {
		ssize_t r = pread(fd, dst + got, size - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		R_CHECK(r >= 0, "oracle pread: %s", strerror(errno));
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return got;
}

static unsigned long checked;

static void check_file(const char *path, uint64_t *seed)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		r_skip("%s: %s", path, strerror(errno));
	struct stat st;
	R_CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode), "%s: not a regular file", path);
	R_CHECK(st.st_size == 0, "%s: st_size is %lld, this test wants a file that reports 0", path,
		(long long)st.st_size);
	size_t cap = 1u << 20;
	uint8_t *want = malloc(cap), *mem;
	R_CHECK(posix_memalign((void **)&mem, 4096, cap + SLACK) == 0, "posix_memalign");
	size_t len = oracle(fd, want, cap, 0);
	R_CHECK(len > 0, "%s: no content", path);
	opends_handle_t h;
	R_TRY(opends_handle_register(&h, fd));
	for (unsigned i = 0; i < 64; i++) {
		enum r_family f = (enum r_family)(i % R_NFAMILIES);
		size_t size, moff = i % 3 ? 0 : (size_t)(r_rand(seed) % 4096);
		off_t off;
		if (i < R_NFAMILIES) { /* whole, with room to spare */
			off = 0;
			size = len + 4096;
		} else {
			off = (off_t)(r_rand(seed) % (len + 100));
			size = 1 + (size_t)(r_rand(seed) % (len + 8192));
		}
		if (moff + size > cap + SLACK)
			size = cap + SLACK - moff;
		size_t exp = (size_t)off >= len ? 0 : len - (size_t)off < size ? len - (size_t)off : size;
		memset(mem, 0xcc, cap + SLACK);
		struct r_op op = { .fh = h, .opcode = OPENDS_READ, .buf = mem + moff, .size = size, .off = off };
		r_run_ops(f, &op, 1);
		R_CHECK(op.result == (ssize_t)exp, "%s: %s read of %zu at %lld returned %zd, pread gives %zu", path,
			r_family_name[f], size, (long long)off, op.result, exp);
		R_CHECK(!memcmp(mem + moff, want + off, exp), "%s: %s read of %zu at %lld: bytes differ from pread",
			path, r_family_name[f], size, (long long)off);
		for (size_t k = 0; k < cap + SLACK; k++)
			if (k < moff || k >= moff + exp)
				R_CHECK(mem[k] == 0xcc, "%s: %s read of %zu at %lld wrote byte %lld past its count",
					path, r_family_name[f], size, (long long)off, (long long)k - (long long)moff);
		checked++;
	}
	R_TRY(opends_handle_deregister(h));
	close(fd);
	free(mem);
	free(want);
	printf("%s: %zu bytes (st_size 0), 64 reads of every family byte-exact\n", path, len);
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!getenv("OPENDS_TEST_BIGENV")) {
		/* once more with a large environment: environ spans many pages */
		char *v = malloc(BIGENV + 1);
		for (size_t i = 0; i < BIGENV; i++)
			v[i] = (char)('a' + i % 26);
		v[BIGENV] = 0;
		setenv("OPENDS_TEST_BIGENV", v, 1);
		execv("/proc/self/exe", argv);
		R_FAIL("execv /proc/self/exe: %s", strerror(errno));
	}
	r_watchdog(120);
	if (access("/proc/self/environ", R_OK))
		r_skip("no /proc");
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here: %s", r_backend_env(), opends_last_error_detail());
	R_TRY(e);
	uint64_t seed = 42;
	check_file("/proc/version", &seed);
	check_file("/proc/self/cmdline", &seed);
	check_file("/proc/self/environ", &seed);

	/* a regular empty file still reads 0 bytes, nothing written */
	atexit(r_rmdir_all);
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/empty", r_tmpdir("pseudofs"));
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	R_CHECK(fd >= 0, "open %s", path);
	opends_handle_t h;
	R_TRY(opends_handle_register(&h, fd));
	uint8_t b[8192];
	for (int f = 0; f < R_NFAMILIES; f++) {
		memset(b, 0xcc, sizeof(b));
		struct r_op op = { .fh = h, .opcode = OPENDS_READ, .buf = b, .size = 4096, .off = 0 };
		r_run_ops((enum r_family)f, &op, 1);
		R_CHECK(op.result == 0, "empty file: %s read returned %zd", r_family_name[f], op.result);
		for (size_t k = 0; k < sizeof(b); k++)
			R_CHECK(b[k] == 0xcc, "empty file: %s read wrote byte %zu", r_family_name[f], k);
	}
	R_TRY(opends_handle_deregister(h));
	close(fd);
	R_TRY(opends_driver_close());
	printf("pseudofs: %lu reads checked\n", checked);
	return 0;
}
