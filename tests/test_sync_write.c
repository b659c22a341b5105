/*
 * test_sync_write [--backend=NAME]
 *
 * opends_sync_write: every write updates an in-memory oracle of the file,
 * then the file is read back with plain POSIX pread (not through the
 * library, so a library that reads back its own mistakes cannot hide them)
 * and compared whole, size included. Run on an fd without and with
 * O_DIRECT: with O_DIRECT, unaligned writes need read-modify-write of the
 * edge blocks, which is where neighbouring bytes get lost.
 */
#include "common.h"

#include <pthread.h>
#include <sys/resource.h>

#define BASE_SIZE (256 * T_KiB + 777)

static int fd_rw;          /* the handle's fd (maybe O_DIRECT) */
static int fd_check;       /* a plain buffered fd for reading back */
static bool direct;
static uint8_t *oracle;    /* expected file content */
static size_t osize;       /* expected file size */
static size_t ocap;
static uint8_t *src;       /* data to write */
static size_t src_len;
static uint64_t gseed = 1;

static void oracle_write(uint64_t off, const uint8_t *p, size_t n)
{
	if (off + n > ocap) {
		size_t cap = (off + n) * 2;
		oracle = realloc(oracle, cap);
		CHECK(oracle);
		memset(oracle + ocap, 0, cap - ocap);
		ocap = cap;
	}
	if (off + n > osize) {
		/* a hole reads as zeros */
		if (off > osize)
			memset(oracle + osize, 0, off - osize);
		osize = off + n;
	}
	memcpy(oracle + off, p, n);
}

/* Compare the whole file (size and bytes) with the oracle. */
static void check_file(const char *what)
{
	char w[200];
	snprintf(w, sizeof(w), "%s%s", what, direct ? " (O_DIRECT)" : "");
	t_check_file_fd(fd_check, oracle, osize, w);
}

/* Write size bytes from src + shift + boff at off: fresh data each time. */
static void wr_at(opends_handle_t fh, size_t shift, uint64_t off, size_t size, size_t boff)
{
	CHECK(shift + boff + size <= src_len);
	t_fill_seed(src + shift + boff, gseed++, size);
	ssize_t got = opends_sync_write(fh, src + shift, size, (off_t)off, (off_t)boff);
	if (got != (ssize_t)size)
		FAILF("write(size %zu, off %llu, buf_offset %zu, ptr+%zu)%s returned %zd (%s), expected %zu", size,
		      (unsigned long long)off, boff, shift, direct ? " O_DIRECT" : "", got,
		      got < 0 ? t_errname(got) : "bytes", size);
	if (size)
		oracle_write(off, src + shift + boff, size);
	char what[160];
	snprintf(what, sizeof what, "after write(size %zu, off %llu, buf_offset %zu, ptr+%zu)", size,
		 (unsigned long long)off, boff, shift);
	check_file(what);
}

static void wr(opends_handle_t fh, uint64_t off, size_t size)
{
	wr_at(fh, 0, off, size, 0);
}

static void shapes(opends_handle_t fh)
{
	t_phase = "aligned blocks";
	wr(fh, 0, 4096);
	wr(fh, 8192, 3 * 4096);
	wr(fh, 65536, 65536);

	t_phase = "unaligned edges";
	wr(fh, 1, 10);
	wr(fh, 4095, 2);
	wr(fh, 4090, 8200);
	wr(fh, 100, 412);
	wr(fh, 511, 2);
	wr(fh, 4097, 8191);
	wr(fh, 4, 8);
	wr(fh, 12345, 1);
	wr(fh, 20000, 30000);

	t_phase = "buf_offset and unaligned pointers";
	wr_at(fh, 0, 3000, 5000, 1);
	wr_at(fh, 1, 7000, 4096, 0);
	wr_at(fh, 3, 7001, 4095, 4096);
	wr_at(fh, 3, 100, 9000, 333);

	t_phase = "zero size";
	wr(fh, 0, 0);
	wr(fh, 5000, 0);
	wr_at(fh, 1, 9, 0, 3);

	t_phase = "overlapping writes";
	/* A then B over part of it: B wins in the overlap, A elsewhere */
	wr(fh, 40000, 10000);
	wr(fh, 45000, 10000);
	wr(fh, 39000, 3000);

	t_phase = "sequential writes";
	for (uint64_t off = 70000; off < 70000 + 30000; off += 3001)
		wr(fh, off, 3001);

	t_phase = "write sweep";
	const uint64_t offs[] = { 0, 1, 511, 512, 4095, 4096, 4097, 8191, 65537, BASE_SIZE - 4097, BASE_SIZE - 10 };
	const size_t sizes[] = { 1, 3, 8, 511, 513, 4095, 4096, 4097, 8193 };
	unsigned k = 0;
	for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++)
		for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++, k++)
			wr_at(fh, k % 3 == 2 ? 3 : k % 3, offs[i], sizes[j], k % 2 ? 5 : 0);
}

static void extend(opends_handle_t fh)
{
	t_phase = "extending writes";
	/* right at EOF, unaligned: the file must grow to exactly off + size, not
	 * to the next block boundary */
	wr(fh, osize, 100);
	wr(fh, osize, 4096);
	wr(fh, osize - 5, 4103);
	/* past EOF: a hole of zeros, then the data */
	wr(fh, osize + 5000, 3000);
	wr(fh, osize + 70000, 1);
	wr(fh, ((osize + 8191) & ~(size_t)4095) + 4096, 4096);
}

static void registered(opends_handle_t fh)
{
	t_phase = "registered source buffer";
	const size_t R = 32 * T_KiB;
	uint8_t *mem = t_xmalloc(2 * R);
	OK(opends_buf_register(mem, R, 0));
	t_fill_seed(mem, gseed++, 2 * R);
	EXPECT_SSZ(opends_sync_write(fh, mem, 8192, 4096, 0), 8192);
	oracle_write(4096, mem, 8192);
	EXPECT_SSZ(opends_sync_write(fh, mem, 1000, 33, (off_t)(R - 1000)), 1000);
	oracle_write(33, mem + R - 1000, 1000);
	check_file("registered writes");
	/* crossing the registered end: refused, file untouched */
	EXPECT_SSZ(opends_sync_write(fh, mem, 1000, 0, (off_t)(R - 999)), -OPENDS_INVALID_MAPPING_RANGE);
	EXPECT_SSZ(opends_sync_write(fh, mem + 8, R, 0, 0), -OPENDS_INVALID_MAPPING_RANGE);
	check_file("refused registered writes");
	OK(opends_buf_deregister(mem));
	free(mem);
}

/* The access mode of the fd is kept on every backend. */
static void wrong_direction(const char *path)
{
	t_phase = "write through read-only fd";
	int ro = t_open(path, O_RDONLY, direct);
	CHECK(ro >= 0);
	opends_handle_t fro = t_register(ro);
	uint8_t b[8192];
	memset(b, 0x3c, sizeof b);
	EXPECT_SSZ(opends_sync_write(fro, b, 4096, 0, 0), -EBADF);
	EXPECT_SSZ(opends_sync_write(fro, b, 10, 4097, 1), -EBADF);
	/* reading through it is fine */
	EXPECT_SSZ(opends_sync_read(fro, b, 4096, 0, 0), 4096);
	VERIFY(b, oracle, 4096, "read through the read-only fd");
	OK(opends_handle_deregister(fro));
	close(ro);
	check_file("write through read-only fd");

	t_phase = "read through write-only fd";
	int wo = t_open(path, O_WRONLY, direct);
	CHECK(wo >= 0);
	opends_handle_t fwo = t_register(wo);
	memset(b, T_CANARY, sizeof b);
	EXPECT_SSZ(opends_sync_read(fwo, b, 4096, 0, 0), -EBADF);
	EXPECT_SSZ(opends_sync_read(fwo, b, 100, 4095, 3), -EBADF);
	VERIFY_CANARY(b, sizeof b, "a refused read wrote the buffer");
	/* writing through it works */
	t_fill_seed(b, gseed++, 4096);
	EXPECT_SSZ(opends_sync_write(fwo, b, 4000, 4100, 0), 4000);
	oracle_write(4100, b, 4000);
	OK(opends_handle_deregister(fwo));
	close(wo);
	check_file("write-only fd");
}

/*
 * Concurrent writers of disjoint, interleaved byte ranges inside the same
 * blocks: thread t owns the bytes x with (x / 7) % T == t. With O_DIRECT a
 * naive read-modify-write of the block by two threads at once loses one
 * thread's bytes; the contract says that must not happen (as with pwrite).
 */
#define CT 4
#define C_OFF 5000
#define C_LEN (3 * 4096 + 100)

struct cw {
	opends_handle_t fh;
	int t;
	uint64_t seed;
	ssize_t bad;      /* first bad return, 0 if none */
	size_t bad_off;
};

static uint8_t cval(uint64_t seed, int t, size_t x)
{
	return wpat(seed * CT + (uint64_t)t, x);
}

static void *cw_main(void *arg)
{
	struct cw *c = arg;
	uint8_t run[7];
	for (size_t x = 0; x < C_LEN; x += 7) {
		if ((x / 7) % CT != (size_t)c->t)
			continue;
		size_t n = t_min(7, C_LEN - x);
		for (size_t i = 0; i < n; i++)
			run[i] = cval(c->seed, c->t, x + i);
		ssize_t r = opends_sync_write(c->fh, run, n, (off_t)(C_OFF + x), 0);
		if (r != (ssize_t)n && !c->bad) {
			c->bad = r ? r : -1;
			c->bad_off = x;
		}
	}
	return NULL;
}

static void concurrent(opends_handle_t fh)
{
	t_phase = "concurrent disjoint writers";
	for (int round = 0; round < 3; round++) {
		struct cw c[CT];
		pthread_t th[CT];
		uint64_t s = gseed++;
		for (int t = 0; t < CT; t++) {
			c[t] = (struct cw){ .fh = fh, .t = t, .seed = s };
			CHECK(pthread_create(&th[t], NULL, cw_main, &c[t]) == 0);
		}
		for (int t = 0; t < CT; t++)
			CHECK(pthread_join(th[t], NULL) == 0);
		for (int t = 0; t < CT; t++)
			CHECKF(!c[t].bad, "thread %d: write at byte %zu returned %zd (%s)", t, c[t].bad_off, c[t].bad,
			       t_errname(c[t].bad));
		for (size_t x = 0; x < C_LEN; x++)
			oracle[C_OFF + x] = cval(s, (int)((x / 7) % CT), x);
		check_file("concurrent disjoint writers");
	}
}

static void run(const char *path, bool d)
{
	/* fresh file each time: hashpat content, odd size */
	t_write_pattern_file(path, BASE_SIZE, hashpat);
	fd_rw = t_open(path, O_RDWR, d);
	if (fd_rw == -2)
		return;
	direct = d;
	fd_check = t_open(path, O_RDONLY, false);
	free(oracle);
	ocap = BASE_SIZE;
	oracle = t_oracle(ocap, hashpat);
	osize = BASE_SIZE;
	check_file("initial");

	opends_handle_t fh = t_register(fd_rw);
	shapes(fh);
	registered(fh);
	wrong_direction(path);
	concurrent(fh);
	extend(fh);
	OK(opends_handle_deregister(fh));
	close(fd_rw);
	close(fd_check);
	printf("writes%s: OK\n", d ? " (O_DIRECT)" : "");
}

/*
 * No fd to spare: with RLIMIT_NOFILE at the current fd count, a backend
 * cannot open a helper fd (a buffered twin of an O_DIRECT fd, say) and
 * must fall back to another way (bounce buffers, read-modify-write). The
 * results must be the same; that fallback path is otherwise never run.
 */
static void no_spare_fds(const char *path)
{
	t_phase = "no spare fds";
	struct rlimit old;
	CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
	t_write_pattern_file(path, BASE_SIZE, hashpat);
	fd_rw = t_open(path, O_RDWR, true);
	if (fd_rw == -2)
		return;
	direct = true;
	fd_check = t_open(path, O_RDONLY, false);
	free(oracle);
	ocap = BASE_SIZE;
	oracle = t_oracle(ocap, hashpat);
	osize = BASE_SIZE;
	opends_handle_t fh = t_register(fd_rw);

	/* the lowest free fd number is the count we allow */
	int probe = dup(fd_check);
	CHECK(probe >= 0);
	close(probe);
	struct rlimit lim = old;
	lim.rlim_cur = (rlim_t)probe;
	CHECK(setrlimit(RLIMIT_NOFILE, &lim) == 0);
	CHECKF(dup(fd_check) < 0 && errno == EMFILE, "could not exhaust fds");

	/* unaligned reads and writes through the O_DIRECT fd; results are
	 * checked after the limit is back (checking needs no new fds, but
	 * keep the window small) */
	struct {
		uint64_t off;
		size_t size;
	} w[] = {
		{ 1, 10 }, { 4095, 2 }, { 4090, 8200 }, { 100, 412 }, { 12345, 30000 },
		/* ends inside the last block, before EOF: EOF must stay */
		{ BASE_SIZE - 100, 50 },
		/* extends the file, twice, then ends before the new EOF */
		{ BASE_SIZE - 5, 4103 }, { BASE_SIZE + 4097, 100 }, { BASE_SIZE + 4097 + 40, 30 },
	};
	enum { NW = sizeof w / sizeof w[0] };
	ssize_t wr_res[NW], rd_res[2];
	uint8_t *rd_buf = t_xmalloc(40000);
	for (int i = 0; i < NW; i++) {
		t_fill_seed(src + i * 40000, 9000 + (uint64_t)i, w[i].size);
		wr_res[i] = opends_sync_write(fh, src + i * 40000, w[i].size, (off_t)w[i].off, 0);
	}
	const off_t tail_off = BASE_SIZE + 4097 + 100 - 3000; /* 3000 bytes before the final EOF */
	uint8_t *rd_tail = t_xmalloc(9000 + 64);
	rd_res[0] = opends_sync_read(fh, rd_buf, 30000, 12345, 0);
	rd_res[1] = opends_sync_read(fh, rd_tail, 9000, tail_off, 0);
	CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);

	/* the oracle takes the writes in the order they were made */
	for (int i = 0; i < NW; i++) {
		CHECKF(wr_res[i] == (ssize_t)w[i].size,
		       "with no spare fd: write(size %zu, off %llu) on an O_DIRECT fd returned %zd (%s)", w[i].size,
		       (unsigned long long)w[i].off, wr_res[i], t_errname(wr_res[i]));
		oracle_write(w[i].off, src + i * 40000, w[i].size);
	}
	check_file("writes with no spare fd");
	CHECKF(rd_res[0] == 30000, "with no spare fd: read(30000 at 12345) returned %zd (%s)", rd_res[0],
	       rd_res[0] < 0 ? t_errname(rd_res[0]) : "bytes");
	VERIFY(rd_buf, oracle + 12345, 30000, "with no spare fd: read back");
	CHECKF(rd_res[1] == 3000, "with no spare fd: read(9000 at EOF - 3000) returned %zd (%s)", rd_res[1],
	       rd_res[1] < 0 ? t_errname(rd_res[1]) : "bytes");
	VERIFY(rd_tail, oracle + tail_off, 3000, "with no spare fd: read crossing EOF");
	VERIFY_CANARY(rd_tail + 3000, 6000 + 64, "with no spare fd: read crossing EOF wrote past the returned range");
	free(rd_tail);
	free(rd_buf);
	OK(opends_handle_deregister(fh));
	close(fd_rw);
	close(fd_check);
	printf("writes with no spare fd (O_DIRECT): OK\n");
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(280);
	src_len = 512 * T_KiB;
	src = t_xmalloc(src_len);
	char path[PATH_MAX];
	t_path(path, sizeof path, "write.bin");

	t_driver_open();
	printf("backend %s\n", opends_driver_backend());
	run(path, false);
	run(path, true);
	no_spare_fds(path);
	OK(opends_driver_close());

	/* Small chunks: large writes split into many pieces, partial blocks
	 * at both ends of the pieces. */
	t_driver_open_small_pieces();
	run(path, false);
	run(path, true);
	OK(opends_driver_close());
	free(src);
	free(oracle);
	return 0;
}
