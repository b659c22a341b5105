/*
 * test_stage_write: synchronous writes from device memory run on the
 * calling thread in large pieces (src/core/stage_wr.c, OPENDS_WRITE_PIECE),
 * uring on the simulated device (hostdev: every pointer is device memory,
 * so the copies to the host run as on a GPU, in two halves).
 *
 * One case per process (the switch is read when the driver opens):
 *   exact     block-aligned writes of 2, 3 MiB + 4 KiB (a short last
 *             piece), 1 MiB + 4 KiB, at odd buffer offsets, extending the
 *             file and inside it: each taken this way (counted), the file
 *             byte-exact against an oracle; a write of exactly 1 MiB and
 *             one of unaligned size are not taken and are exact too
 *   direct    the same through a handle of an O_DIRECT fd
 *   off       0: nothing taken, the same bytes; unset or not a size: the
 *             default piece (taken where it is not 0)
 *   errors    a read-only fd and an offset past the largest file: the
 *             same result with the switch on as off, nothing written
 *   threads   4 threads writing their own ranges at once (TSan): at most
 *             one at a time this way, the others through the engine, all
 *             exact
 *   lone      while another write of the file runs (begun with the
 *             backend's own ods_ra_write_begin) a write goes through the
 *             engine; once it ended, the next is taken; both exact
 *   budget    a buffer that does not fit the staging budget: the engine
 *             writes it, exact
 *   reclaim   a buffer that fits only with read-ahead's kept buffers given
 *             back: they are, and the write is taken, exact
 *   readahead a sequential reader's read-ahead holds the next range; a
 *             write of that range this way, then the read: the new bytes
 */
#include "common.h"
#include "ods.h" /* (internal: ods_ra_write_begin, ods_handle_lookup) */

#include <pthread.h>
#include <stdatomic.h>

extern atomic_ulong ods_stage_caller_writes;
size_t ods_pinned_left(void);
extern const size_t ods_stage_write_def_piece;

#define MiB ((size_t)1 << 20)
#define FMAX (16 * MiB)

static unsigned long taken(void)
{
	return atomic_load(&ods_stage_caller_writes);
}

static void open_with(const char *piece)
{
	if (piece)
		setenv("OPENDS_WRITE_PIECE", piece, 1);
	else
		unsetenv("OPENDS_WRITE_PIECE");
	t_driver_open();
}

struct wr {
	off_t off;
	size_t size, boff;
	bool caller; /* taken this way */
};

static const struct wr plan[] = {
	{ 0, 2 * MiB, 0, true },                           /* two whole pieces, extending */
	{ 2 * MiB, 3 * MiB + 4096, 7, true },              /* a short last piece, odd buffer offset */
	{ 5 * MiB + 4096, MiB + 4096, 4093, true },        /* one piece and a block */
	{ 4096, 2 * MiB, 3, true },                        /* inside the file */
	{ 6 * MiB + 8192, MiB, 0, false },                 /* 1 MiB: the engine's */
	{ 7 * MiB + 8192, 2 * MiB + 100, 0, false },       /* unaligned size: the engine's */
	{ 9 * MiB + 8192 + 4096 * 3, 4 * MiB, 1, true },   /* past a hole */
};

/* the plan's writes from seeded data through fh; the oracle follows */
static void run_plan(opends_handle_t fh, uint8_t *oracle, size_t *fsize, uint64_t seed, bool on)
{
	uint8_t *src = t_xmalloc(FMAX + 8192);
	for (size_t i = 0; i < sizeof(plan) / sizeof(plan[0]); i++) {
		const struct wr *w = &plan[i];
		t_fill_seed(src + w->boff, seed + i, w->size);
		unsigned long before = taken();
		EXPECT_SSZ(opends_sync_write(fh, src, w->size, w->off, (off_t)w->boff), (ssize_t)w->size);
		unsigned long got = taken() - before;
		CHECKF(got == (on && w->caller ? 1u : 0u), "write %zu (%zu bytes at %lld): taken %lu times", i, w->size,
		       (long long)w->off, got);
		memcpy(oracle + w->off, src + w->boff, w->size);
		if ((size_t)w->off + w->size > *fsize)
			*fsize = (size_t)w->off + w->size;
	}
	free(src);
}

static void plan_case(const char *piece, bool direct)
{
	char path[PATH_MAX];
	t_path(path, sizeof path, "w.bin");
	unlink(path);
	open_with(piece);
	int fd = t_open(path, O_RDWR | O_CREAT | O_TRUNC, direct);
	if (fd == -2) {
		OK(opends_driver_close());
		return;
	}
	opends_handle_t fh = t_register(fd);
	uint8_t *oracle = calloc(1, FMAX);
	size_t fsize = 0;
	/* unset or not a size: the default piece; "0": off */
	bool on = piece && strcmp(piece, "0") && strcmp(piece, "1x") ? true
		  : piece && !strcmp(piece, "0")			 ? false
									 : ods_stage_write_def_piece != 0;
	run_plan(fh, oracle, &fsize, 11, on);
	OK(opends_handle_deregister(fh));
	close(fd);
	fd = t_open(path, O_RDONLY, false);
	t_check_file_fd(fd, oracle, fsize, piece ? piece : "unset");
	close(fd);
	free(oracle);
	OK(opends_driver_close());
}

static void c_exact(void)
{
	plan_case("1m", false);
	plan_case("512k", false); /* more pieces, each written while the next copies */
}

static void c_direct(void)
{
	plan_case("1m", true);
}

static void c_off(void) /* (and the default) */
{
	plan_case(NULL, false);
	plan_case("0", false);
	plan_case("1x", false);
}

/* what a 2 MiB write at off through a handle of an fd opened with flags
 * returns, with the switch set to piece; the file must stay as it was */
static ssize_t err_write(const char *piece, int flags, off_t off)
{
	char path[PATH_MAX];
	t_path(path, sizeof path, "e.bin");
	t_write_pattern_file(path, 8192, hashpat);
	open_with(piece);
	int fd = t_open(path, flags, false);
	opends_handle_t fh = t_register(fd);
	uint8_t *src = t_xmalloc(2 * MiB);
	memset(src, 0x77, 2 * MiB);
	ssize_t r = opends_sync_write(fh, src, 2 * MiB, off, 0);
	OK(opends_handle_deregister(fh));
	close(fd);
	fd = t_open(path, O_RDONLY, false);
	uint8_t *exp = t_oracle(8192, hashpat);
	t_check_file_fd(fd, exp, 8192, "after a failed write");
	close(fd);
	free(exp);
	free(src);
	OK(opends_driver_close());
	return r;
}

static void c_errors(void)
{
	ssize_t a = err_write("0", O_RDONLY, 0), b = err_write("1m", O_RDONLY, 0);
	CHECKF(a < 0 && a == b, "read-only fd: %zd off, %zd on", a, b);
	off_t far = (off_t)1 << 62;
	a = err_write("0", O_RDWR, far);
	b = err_write("1m", O_RDWR, far);
	CHECKF(a < 0 && a == b, "offset 2^62: %zd off, %zd on", a, b);
	printf("errors: read-only %s, far offset %s, the same either way\n", t_errname(err_write("1m", O_RDONLY, 0)),
	       t_errname(b));
}

struct targ {
	opends_handle_t fh;
	unsigned idx;
	uint8_t *oracle;
};

#define TCALLS 6
#define TSIZE (MiB + 3 * 4096)

static void *twriter(void *p)
{
	struct targ *a = p;
	uint8_t *src = t_xmalloc(TSIZE + 1);
	for (unsigned k = 0; k < TCALLS; k++) {
		off_t off = (off_t)(a->idx * TCALLS + k) * TSIZE;
		t_fill_seed(src + 1, 100 + a->idx * TCALLS + k, TSIZE);
		EXPECT_SSZ(opends_sync_write(a->fh, src, TSIZE, off, 1), (ssize_t)TSIZE);
		memcpy(a->oracle + off, src + 1, TSIZE);
	}
	free(src);
	return NULL;
}

static void c_threads(void)
{
	char path[PATH_MAX];
	t_path(path, sizeof path, "t.bin");
	open_with("1m");
	int fd = t_open(path, O_RDWR | O_CREAT | O_TRUNC, false);
	opends_handle_t fh = t_register(fd);
	size_t n = 4 * TCALLS * TSIZE;
	uint8_t *oracle = t_xmalloc(n);
	pthread_t t[4];
	struct targ a[4];
	unsigned long before = taken();
	for (unsigned i = 0; i < 4; i++) {
		a[i] = (struct targ){ fh, i, oracle };
		CHECK(pthread_create(&t[i], NULL, twriter, &a[i]) == 0);
	}
	for (unsigned i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* a lone caller only (c_lone has the exact rule): the others' writes
	 * went through the engine */
	unsigned long got = taken() - before;
	CHECKF(got <= 4 * TCALLS, "taken %lu of %u", got, 4 * TCALLS);
	printf("threads: %lu of %u writes this way, the rest through the engine\n", got, 4 * TCALLS);
	OK(opends_handle_deregister(fh));
	t_check_file_fd(fd, oracle, n, "4 threads");
	close(fd);
	free(oracle);
	OK(opends_driver_close());
}

static void other_done(struct ods_io *io)
{
	(void)io;
}

static void c_lone(void)
{
	char path[PATH_MAX];
	t_path(path, sizeof path, "l.bin");
	open_with("1m");
	int fd = t_open(path, O_RDWR | O_CREAT | O_TRUNC, false);
	opends_handle_t fh = t_register(fd);
	uint8_t *src = t_xmalloc(4 * MiB), *oracle = t_xmalloc(4 * MiB);
	t_fill_seed(src, 21, 4 * MiB);
	memcpy(oracle, src, 4 * MiB);
	/* another write of the file running, as the backend counts one */
	struct ods_io other = { 0 };
	other.fh = ods_handle_lookup(fh);
	other.opcode = OPENDS_WRITE;
	other.mem = ODS_MEM_HOST;
	other.size = 4096;
	other.done = other_done;
	CHECK(other.fh != NULL);
	ods_ra_write_begin(&other);
	unsigned long before = taken();
	EXPECT_SSZ(opends_sync_write(fh, src, 2 * MiB, 0, 0), (ssize_t)(2 * MiB));
	CHECKF(taken() == before, "taken while another write of the file ran");
	other.done(&other); /* it ended */
	EXPECT_SSZ(opends_sync_write(fh, src + 2 * MiB, 2 * MiB, (off_t)(2 * MiB), 0), (ssize_t)(2 * MiB));
	CHECKF(taken() == before + 1, "a lone write not taken (%lu)", taken() - before);
	OK(opends_handle_deregister(fh));
	t_check_file_fd(fd, oracle, 4 * MiB, "lone");
	close(fd);
	free(src);
	free(oracle);
	OK(opends_driver_close());
}

static void c_budget(void)
{
	/* 8 MiB: the engine's slots take most; a 2 x 4 MiB buffer does not fit
	 * half of the rest */
	setenv("OPENDS_MAX_PINNED", "8m", 1);
	setenv("OPENDS_IO_THREADS", "2", 1);
	setenv("OPENDS_QUEUE_DEPTH", "2", 1);
	char path[PATH_MAX];
	t_path(path, sizeof path, "b.bin");
	open_with("4m");
	int fd = t_open(path, O_RDWR | O_CREAT | O_TRUNC, false);
	opends_handle_t fh = t_register(fd);
	uint8_t *src = t_xmalloc(6 * MiB), *oracle = t_xmalloc(6 * MiB);
	t_fill_seed(src, 5, 6 * MiB);
	memcpy(oracle, src, 6 * MiB);
	unsigned long before = taken();
	EXPECT_SSZ(opends_sync_write(fh, src, 6 * MiB, 0, 0), (ssize_t)(6 * MiB));
	CHECKF(taken() == before, "taken though the buffer does not fit the budget");
	OK(opends_handle_deregister(fh));
	t_check_file_fd(fd, oracle, 6 * MiB, "budget");
	close(fd);
	free(src);
	free(oracle);
	OK(opends_driver_close());
}

static void c_reclaim(void)
{
	setenv("OPENDS_MAX_PINNED", "64m", 1);
	setenv("OPENDS_IO_THREADS", "2", 1);
	setenv("OPENDS_QUEUE_DEPTH", "2", 1);
	char path[PATH_MAX];
	t_path(path, sizeof path, "c.bin");
	size_t S = 2 * MiB;
	uint8_t *oracle;
	int hot = t_hot_file(path, 8 * S, hashpat, &oracle);
	usleep(150 * 1000); /* read-ahead waits for a file 100 ms unchanged */
	open_with("1m");
	int fd = t_open(path, O_RDWR, false);
	opends_handle_t fh = t_register(fd);
	uint8_t *buf = t_xmalloc(S);
	for (unsigned k = 0; k < 8; k++) {
		EXPECT_SSZ(opends_sync_read(fh, buf, S, (off_t)(k * S), 0), (ssize_t)S);
		VERIFY(buf, oracle + k * S, S, "read %u", k);
	}
	CHECK(t_ra_served(fh) > 0);
	OK(opends_handle_deregister(fh)); /* its 4 x 2 MiB kept for the next reader */
	/* 3 MiB left: a 2 x 1 MiB buffer is more than half of it, and half of
	 * 11 once the kept 8 are back */
	size_t pad = ods_pinned_left() - 3 * MiB;
	CHECK(ods_pinned_reserve(pad));
	fh = t_register(fd);
	t_fill_seed(buf, 31, S);
	memcpy(oracle + S, buf, S);
	unsigned long before = taken();
	EXPECT_SSZ(opends_sync_write(fh, buf, S, (off_t)S, 0), (ssize_t)S);
	CHECKF(taken() == before + 1, "not taken: the kept read-ahead buffers held the budget");
	CHECKF(ods_pinned_left() == 11 * MiB - 2 * MiB, "%zu MiB left, want 9", ods_pinned_left() >> 20);
	OK(opends_handle_deregister(fh));
	t_check_file_fd(fd, oracle, 8 * S, "reclaim");
	ods_pinned_release(pad);
	close(fd);
	close(hot);
	free(buf);
	free(oracle);
	OK(opends_driver_close());
}

static void c_readahead(void)
{
	char path[PATH_MAX];
	t_path(path, sizeof path, "r.bin");
	size_t fs = 12 * MiB, S = 2 * MiB;
	uint8_t *oracle;
	int hot = t_hot_file(path, fs, hashpat, &oracle);
	usleep(150 * 1000); /* read-ahead waits for a file 100 ms unchanged */
	open_with("1m");
	int fd = t_open(path, O_RDWR, false);
	opends_handle_t fh = t_register(fd);
	uint8_t *buf = t_xmalloc(S);
	for (unsigned k = 0; k < 3; k++) { /* ranges 3 to 5 are read ahead after these */
		EXPECT_SSZ(opends_sync_read(fh, buf, S, (off_t)(k * S), 0), (ssize_t)S);
		VERIFY(buf, oracle + k * S, S, "read %u", k);
	}
	uint8_t *src = t_xmalloc(S);
	t_fill_seed(src, 9, S);
	unsigned long before = taken();
	EXPECT_SSZ(opends_sync_write(fh, src, S, (off_t)(3 * S), 0), (ssize_t)S);
	CHECKF(taken() - before == 1, "the write was not taken");
	EXPECT_SSZ(opends_sync_read(fh, buf, S, (off_t)(3 * S), 0), (ssize_t)S);
	VERIFY(buf, src, S, "the range written after it was read ahead");
	EXPECT_SSZ(opends_sync_read(fh, buf, S, (off_t)(4 * S), 0), (ssize_t)S);
	VERIFY(buf, oracle + 4 * S, S, "the range after it");
	OK(opends_handle_deregister(fh));
	close(fd);
	close(hot);
	free(src);
	free(buf);
	free(oracle);
	OK(opends_driver_close());
}

int main(int argc, char **argv)
{
	const char *c = t_args(argc, argv);
	t_watchdog(120);
	setenv("OPENDS_BACKEND", "uring", 1);
	if (!getenv("OPENDS_ACCEL"))
		setenv("OPENDS_ACCEL", "hostdev", 1);
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = { { "exact", c_exact },	{ "direct", c_direct }, { "off", c_off },
		      { "errors", c_errors },	{ "threads", c_threads }, { "lone", c_lone },
		      { "budget", c_budget },	{ "reclaim", c_reclaim },
		      { "readahead", c_readahead } };
	bool ok = true;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!c || !strcmp(c, cases[i].name))
			ok &= t_case_in_child(cases[i].name, cases[i].fn);
	return ok && !t_failures ? 0 : 1;
}
