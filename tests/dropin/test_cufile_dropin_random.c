/*
 * test_cufile_dropin_random --lib=PATH [STEPS [SEED]]
 *
 * A randomized sequence of cuFile calls on the drop-in (host memory), as
 * a program would make them, against a model: the driver opened and
 * closed (explicitly, and implicitly by the first call after a close),
 * handles of five fds of one file registered and deregistered (read-write,
 * read-write with O_DIRECT where the file system takes it, read-only,
 * write-only, O_PATH), buffers registered and deregistered (whole, short,
 * and at pointers inside or ranges across another registration, which
 * NVIDIA accepts), and
 * cuFileRead / cuFileWrite, batches and stream-ordered reads and writes of
 * random sizes at random offsets, misuse included (negative offsets, the
 * wrong access mode, stale handles after the last close, twice-registered
 * handles and buffers, I/O past a registration, batch submits NVIDIA
 * refuses, cancelled batches reused). Every answer must be
 * the one docs/cufile-dropin.md gives (the model says which), every byte
 * read must be the oracle's (the file's contents, kept in memory as writes
 * change them, holes as zeros), and at the end the file must equal the
 * oracle byte for byte, and the level-1 statistics must count every
 * synchronous call, registration and deregistration the model made. The
 * seed is printed; a failure names the step.
 * Exit 0 pass, 1 fail.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>

#include "dropin_test.h"
#include "opends.h"

#define FMAX (4u << 20)   /* the file never grows past this */
#define BUFSZ (512u << 10) /* each buffer */
#define NBUF 3
#define NFD 5
#define BATCH 16

enum { FD_RW, FD_RW_DIRECT, FD_RO, FD_WO, FD_PATH };
static const char *const fd_name[NFD] = { "rw", "rw_direct", "ro", "wo", "path" };

static uint64_t seed;
static uint64_t rnd(void)
{
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	return seed;
}
static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* the model */
static uint8_t *oracle; /* the file's bytes, FMAX long, zeros past fsize */
static size_t fsize;
static int fds[NFD], check_fd;
static bool driver_open; /* open (explicitly or by a first call) */
static long users;       /* cuFileDriverOpen calls not closed */
static struct {
	bool reg;
	CUfileHandle_t fh;
	bool stale; /* fh was released by the last close */
} h[NFD];
static uint8_t *bufs[NBUF];
/* Registrations at NPTR pointers of each buffer (every PSTEP bytes): a
 * base (OpenDS's registration, len bytes) or an inner one (a pointer
 * inside or a range across a base: NVIDIA registers it, the drop-in
 * keeps it in a list of its own). */
#define NPTR 8
#define PSTEP (BUFSZ / NPTR)
enum { R_NONE, R_BASE, R_INNER };
static int rstate[NBUF][NPTR];
static size_t rlen[NBUF][NPTR];
static CUfileBatchHandle_t batch;
static bool batch_ok;
static opends_error_t (*stream_sync)(void *);
static long step;
/* what the level-1 statistics must say: counters in cuFile's order
 * (read_ops ok/err, write_ops, hdl_register_ops, hdl_deregister_ops,
 * buf_register_ops, buf_deregister_ops), then read_bytes, write_bytes */
static uint64_t st_want[14];
enum { S_READ, S_WRITE = 2, S_HREG = 4, S_HDEREG = 6, S_BREG = 8, S_BDEREG = 10, S_RBYTES = 12, S_WBYTES = 13 };
static void st_count(int op, bool ok)
{
	st_want[op + !ok]++;
}
static unsigned long n_ops[16];

#define STEP_CHECK(c, ...) CHECK(c, "step %ld (seed %llu): " __VA_ARGS__)
#define STEP_ARGS step, (unsigned long long)seed0
static uint64_t seed0;

/* Calls that need the driver open it when it is closed (cuFile's first
 * use); the model follows. */
static void implicit_open(void)
{
	driver_open = true;
}

/* The last close: every handle, buffer and batch of the driver is gone. */
static void forget_all(void)
{
	for (int i = 0; i < NFD; i++)
		if (h[i].reg) {
			h[i].reg = false;
			h[i].stale = true;
		}
	memset(rstate, 0, sizeof(rstate));
	batch_ok = false;
}

static bool readable(int f)
{
	return f == FD_RW || f == FD_RW_DIRECT || f == FD_RO;
}
static bool writable(int f)
{
	return f == FD_RW || f == FD_RW_DIRECT || f == FD_WO;
}

/* A random live handle (registered with the current driver), or -1. */
static int live_handle(void)
{
	int start = (int)below(NFD);
	for (int k = 0; k < NFD; k++) {
		int f = (start + k) % NFD;
		if (h[f].reg)
			return f;
	}
	return -1;
}

/* The bytes a read of n at off returns (a short read at the end). */
static size_t expect_read(size_t n, off_t off)
{
	if ((size_t)off >= fsize)
		return 0;
	return n < fsize - (size_t)off ? n : fsize - (size_t)off;
}

static void check_bytes(const uint8_t *got, size_t off, size_t n, const char *what)
{
	if (!n || !memcmp(got, oracle + off, n))
		return;
	size_t i = 0;
	while (got[i] == oracle[off + i])
		i++;
	STEP_CHECK(0, "%s: byte %zu of %zu at file offset %zu is 0x%02x, the oracle's 0x%02x", STEP_ARGS, what, i, n, off,
		   got[i], oracle[off + i]);
}

/* A write's range in the model: the oracle takes the bytes, the file may
 * grow (the hole reads as zeros: the oracle is zeros there already). */
static void model_write(const uint8_t *src, size_t off, size_t n)
{
	if (!n) /* a write of nothing does not extend the file */
		return;
	memcpy(oracle + off, src, n);
	if (off + n > fsize)
		fsize = off + n;
}

static void op_driver(void)
{
	if (below(2)) {
		CU_OK(L.cuFileDriverOpen());
		driver_open = true;
		users++;
		return;
	}
	CUfileError_t e = L.cuFileDriverClose_v2();
	if (!driver_open) {
		STEP_CHECK(e.err == CU_FILE_DRIVER_NOT_INITIALIZED, "close of a closed driver: %d", STEP_ARGS, (int)e.err);
		return;
	}
	STEP_CHECK(e.err == CU_FILE_SUCCESS, "close: %d", STEP_ARGS, (int)e.err);
	if (users > 0)
		users--;
	if (users == 0) {
		driver_open = false;
		forget_all();
	}
}

static void op_handle(void)
{
	int f = (int)below(NFD);
	if (h[f].reg && below(4)) {
		L.cuFileHandleDeregister(h[f].fh);
		st_count(S_HDEREG, true);
		h[f].reg = false;
		return;
	}
	CUfileDescr_t d;
	memset(&d, 0, sizeof(d));
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = fds[f];
	CUfileHandle_t fh = NULL;
	CUfileError_t e = L.cuFileHandleRegister(&fh, &d);
	implicit_open();
	st_count(S_HREG, e.err == CU_FILE_SUCCESS);
	if (h[f].reg) { /* the same fd twice (an O_PATH one too: NVIDIA knows fds) */
		STEP_CHECK(e.err == CU_FILE_HANDLE_ALREADY_REGISTERED, "%s registered twice: %d", STEP_ARGS, fd_name[f],
			   (int)e.err);
		return;
	}
	STEP_CHECK(e.err == CU_FILE_SUCCESS, "register %s: %d", STEP_ARGS, fd_name[f], (int)e.err);
	h[f].reg = true;
	h[f].stale = false;
	h[f].fh = fh;
}

static bool overlaps_base(int b, size_t off, size_t len)
{
	for (int k = 0; k < NPTR; k++) {
		size_t ko = (size_t)k * PSTEP;
		if (rstate[b][k] == R_BASE && off < ko + rlen[b][k] && ko < off + len)
			return true;
	}
	return false;
}

/* The base registration holding buffer b's byte at off, or -1. */
static int base_at(int b, size_t off)
{
	for (int k = 0; k < NPTR; k++) {
		size_t ko = (size_t)k * PSTEP;
		if (rstate[b][k] == R_BASE && off >= ko && off < ko + rlen[b][k])
			return k;
	}
	return -1;
}

/* I/O of n bytes at buffer b's offset boff (named by the buffer's start):
 * the registration holding the target, else the one holding the start,
 * must hold all of it (OpenDS's rule, NVIDIA's "exceeds registered
 * length"; inner registrations pin nothing and do not count). */
static bool past_registration(int b, size_t boff, size_t n)
{
	int k = base_at(b, boff);
	if (k < 0 && boff)
		k = base_at(b, 0);
	if (k < 0)
		return false;
	size_t ko = (size_t)k * PSTEP;
	return boff < ko || boff + n > ko + rlen[b][k];
}

static void op_buf(void)
{
	/* pointers inside: buffer 0 only (the batch and stream buffers 1 and 2
	 * stay registered whole or not at all) */
	int b = (int)below(NBUF), k = b != 0 || below(2) ? 0 : (int)below(NPTR);
	size_t off = (size_t)k * PSTEP;
	int *st = &rstate[b][k];
	if ((*st != R_NONE && below(2)) || below(4) == 0) {
		CUfileError_t e = L.cuFileBufDeregister(bufs[b] + off);
		implicit_open();
		st_count(S_BDEREG, e.err == CU_FILE_SUCCESS);
		STEP_CHECK((int)e.err == (*st != R_NONE ? CU_FILE_SUCCESS : CU_FILE_MEMORY_NOT_REGISTERED),
			   "buffer %d + %zu deregistered (state %d): %d", STEP_ARGS, b, off, *st, (int)e.err);
		*st = R_NONE;
		return;
	}
	/* buffer 0's base may be registered short (its I/O past the length is
	 * refused: INVALID_MAPPING_RANGE); the batch and stream buffers (1, 2)
	 * are registered whole at their base */
	size_t len = k == 0 && (b != 0 || below(2)) ? BUFSZ : 4096 * (1 + below((BUFSZ - off) / 4096));
	CUfileError_t e = L.cuFileBufRegister(bufs[b] + off, len, 0);
	implicit_open();
	st_count(S_BREG, e.err == CU_FILE_SUCCESS);
	int want = CU_FILE_SUCCESS, next = R_BASE;
	if (*st != R_NONE) /* registered already, as a base or inside one */
		want = CU_FILE_MEMORY_ALREADY_REGISTERED, next = *st;
	else if (overlaps_base(b, off, len)) /* NVIDIA's 0: the drop-in's inner list */
		next = R_INNER;
	STEP_CHECK((int)e.err == want, "buffer %d + %zu (%zu bytes, state %d) registered: %d, expected %d", STEP_ARGS, b,
		   off, len, *st, (int)e.err, want);
	if (*st == R_NONE)
		rlen[b][k] = len;
	*st = next;
}

/* A size: mostly small, sometimes 0, sometimes up to the buffer. */
static size_t rnd_size(size_t room)
{
	switch (below(8)) {
	case 0:
		return 0;
	case 1:
		return below(room + 1);
	default:
		return 1 + below(room < 65536 ? room : 65536);
	}
}

/* An offset: inside the file, across or past its end, rarely negative. */
static off_t rnd_off(void)
{
	if (below(16) == 0)
		return -(off_t)(1 + below(8192));
	return (off_t)below(fsize + 65536);
}

static void op_sync(void)
{
	int f = (int)below(NFD);
	if (!h[f].reg && !h[f].stale)
		return;
	int b = (int)below(NBUF);
	size_t boff = below(BUFSZ / 2);
	size_t n = rnd_size(BUFSZ - boff);
	off_t off = rnd_off();
	bool write = below(3) == 0;
	uint8_t *buf = bufs[b];
	if (write)
		for (size_t i = 0; i < n; i++)
			buf[boff + i] = (uint8_t)rnd();
	else
		memset(buf + boff, 0xEE, n);
	if (write && off >= 0 && (size_t)off + n > FMAX)
		off = (off_t)(FMAX - n);
	errno = 0;
	ssize_t r = write ? L.cuFileWrite(h[f].fh, buf, n, off, (off_t)boff) : L.cuFileRead(h[f].fh, buf, n, off, (off_t)boff);
	int err = errno;
	implicit_open();
	st_count(write ? S_WRITE : S_READ, r >= 0);
	if (r > 0)
		st_want[write ? S_WBYTES : S_RBYTES] += (uint64_t)r;
	const char *what = write ? "write" : "read";
	if (!h[f].reg) { /* released by the last close: unknown to this driver */
		STEP_CHECK(r == -CU_FILE_HANDLE_NOT_REGISTERED, "%s through a stale %s handle: %zd", STEP_ARGS, what,
			   fd_name[f], r);
		return;
	}
	if (f == FD_PATH) { /* NVIDIA's: -1, EPERM for a read, EIO for a write */
		STEP_CHECK(r == -1 && err == (write ? EIO : EPERM), "%s through O_PATH: %zd errno %d", STEP_ARGS, what, r,
			   err);
		return;
	}
	if (off < 0) { /* checked before the size: a 0-byte call at -1 too */
		STEP_CHECK(r == -1 && err == CU_FILE_INVALID_VALUE, "%s at %lld: %zd errno %d", STEP_ARGS, what,
			   (long long)off, r, err);
		return;
	}
	if (past_registration(b, boff, n)) {
		/* NVIDIA's -1 and errno INVALID_MAPPING_RANGE */
		STEP_CHECK(r == -1 && err == CU_FILE_INVALID_MAPPING_RANGE,
			   "%s of %zu at buffer %d offset %zu runs past its registration: %zd errno %d", STEP_ARGS, what, n, b,
			   boff, r, err);
		return;
	}
	if (write && !writable(f)) { /* the access mode before the size too */
		STEP_CHECK(r == -1 && err == EIO, "write through read-only: %zd errno %d", STEP_ARGS, r, err);
		return;
	}
	if (!write && !readable(f)) {
		STEP_CHECK(r == -1 && err == CU_FILE_INVALID_FILE_OPEN_FLAG, "read through write-only: %zd errno %d",
			   STEP_ARGS, r, err);
		return;
	}
	if (!n) {
		STEP_CHECK(r == 0, "%s of 0 bytes at %lld through %s: %zd errno %d", STEP_ARGS, what, (long long)off, fd_name[f], r, err);
		return;
	}
	if (write) {
		STEP_CHECK(r == (ssize_t)n, "write %zu at %lld through %s: %zd (errno %d)", STEP_ARGS, n, (long long)off,
			   fd_name[f], r, err);
		model_write(buf + boff, (size_t)off, n);
		n_ops[1]++;
		return;
	}
	size_t want = expect_read(n, off);
	STEP_CHECK(r == (ssize_t)want, "read %zu at %lld (file %zu) through %s: %zd, expected %zu (errno %d)", STEP_ARGS,
		   n, (long long)off, fsize, fd_name[f], r, want, err);
	check_bytes(buf + boff, (size_t)off, want, "read");
	n_ops[0]++;
}

static void batch_setup(void)
{
	if (batch_ok)
		return;
	CU_OK(L.cuFileBatchIOSetUp(&batch, BATCH));
	implicit_open();
	batch_ok = true;
}

/* Misuse NVIDIA refuses at the submit (INTERNAL_BATCH_SUBMIT_ERROR, the
 * whole submit, nothing queued), and min_nr above the room. */
static void op_batch_misuse(int f)
{
	CUfileIOParams_t p;
	memset(&p, 0, sizeof(p));
	p.mode = CUFILE_BATCH;
	p.fh = h[f].fh;
	p.opcode = CUFILE_READ;
	p.u.batch.devPtr_base = bufs[0];
	p.u.batch.size = 4096;
	int what = (int)below(5);
	unsigned nr = 1;
	if (what == 0)
		nr = 0;
	else if (what == 1)
		p.opcode = (CUfileOpcode_t)(2 + below(100));
	else if (what == 2)
		p.u.batch.file_offset = -4096;
	else if (what == 3)
		nr = BATCH + 1;
	if (what == 4) {
		unsigned room = 1;
		CUfileIOEvents_t ev;
		CU_ERR(L.cuFileBatchIOGetStatus(batch, 2, &room, &ev, NULL), CU_FILE_INVALID_VALUE);
		return;
	}
	CUfileIOParams_t many[BATCH + 1];
	for (unsigned i = 0; i < BATCH + 1; i++)
		many[i] = p;
	CU_ERR(L.cuFileBatchIOSubmit(batch, nr, many, 0), CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR);
}

static void op_batch(void)
{
	int f = live_handle();
	if (f < 0)
		return;
	batch_setup();
	if (below(4) == 0) {
		op_batch_misuse(f);
		return;
	}
	/* all reads, or all writes of distinct ranges (one order of the
	 * entries is as good as another) through one handle */
	bool write = below(3) == 0;
	if ((!write && f == FD_WO) || (write && f == FD_RO)) {
		/* a read through a write-only handle, a write through a read-only
		 * one: NVIDIA refuses the submit */
		CUfileIOParams_t p;
		memset(&p, 0, sizeof(p));
		p.mode = CUFILE_BATCH;
		p.fh = h[f].fh;
		p.opcode = write ? CUFILE_WRITE : CUFILE_READ;
		p.u.batch.devPtr_base = bufs[0];
		p.u.batch.size = 4096;
		CU_ERR(L.cuFileBatchIOSubmit(batch, 1, &p, 0), CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR);
		return;
	}
	if (f == FD_PATH)
		return; /* OpenDS does not know the handle: not a documented batch answer */
	unsigned nr = 1 + (unsigned)below(BATCH);
	CUfileIOParams_t p[BATCH];
	size_t slot = BUFSZ / BATCH; /* each entry its own part of buffer 1 */
	off_t base = (off_t)below(fsize + 4096);
	for (unsigned i = 0; i < nr; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].mode = CUFILE_BATCH;
		p[i].fh = h[f].fh;
		p[i].opcode = write ? CUFILE_WRITE : CUFILE_READ;
		p[i].cookie = (void *)(uintptr_t)(i + 1);
		p[i].u.batch.devPtr_base = bufs[1];
		p[i].u.batch.devPtr_offset = (off_t)(i * slot);
		p[i].u.batch.size = below(slot + 1);
		/* writes: consecutive slots of the file, never overlapping */
		p[i].u.batch.file_offset = write ? base + (off_t)(i * slot) : (off_t)below(fsize + 8192);
		uint8_t *dst = bufs[1] + i * slot;
		if (write)
			for (size_t k = 0; k < p[i].u.batch.size; k++)
				dst[k] = (uint8_t)rnd();
		else
			memset(dst, 0xEE, p[i].u.batch.size);
	}
	if (write && (size_t)base + nr * slot > FMAX)
		return;
	CU_OK(L.cuFileBatchIOSubmit(batch, nr, p, 0));
	CUfileIOEvents_t ev[BATCH];
	if (!write && below(6) == 0) {
		/* cancelled: success, and no events (NVIDIA's answer) until the
		 * next submit, whose events are its own only (checked there) */
		CU_OK(L.cuFileBatchIOCancel(batch));
		unsigned room = BATCH;
		struct timespec to = { 0, 1000000 };
		CU_OK(L.cuFileBatchIOGetStatus(batch, 0, &room, ev, &to));
		STEP_CHECK(room == 0, "%u events after a cancel", STEP_ARGS, room);
		n_ops[4]++;
		return;
	}
	bool seen[BATCH] = { false };
	unsigned got = 0;
	for (int tries = 0; got < nr && tries < 1000; tries++) {
		unsigned room = nr - got;
		struct timespec to = { 1, 0 };
		CU_OK(L.cuFileBatchIOGetStatus(batch, room, &room, ev, &to));
		for (unsigned k = 0; k < room; k++) {
			unsigned i = (unsigned)(uintptr_t)ev[k].cookie - 1;
			STEP_CHECK(i < nr && !seen[i], "batch event with cookie %p", STEP_ARGS, ev[k].cookie);
			seen[i] = true;
			size_t n = p[i].u.batch.size;
			off_t off = p[i].u.batch.file_offset;
			size_t want = write ? n : expect_read(n, off);
			STEP_CHECK(ev[k].status == CUFILE_COMPLETE && ev[k].ret == want,
				   "batch %s entry %u (%zu at %lld, file %zu): status %d ret %zd, expected %zu", STEP_ARGS,
				   write ? "write" : "read", i, n, (long long)off, fsize, (int)ev[k].status,
				   (ssize_t)ev[k].ret, want);
			if (!write)
				check_bytes(bufs[1] + i * slot, (size_t)off, want, "batch read");
		}
		got += room;
	}
	STEP_CHECK(got == nr, "batch: %u of %u events", STEP_ARGS, got, nr);
	if (write)
		for (unsigned i = 0; i < nr; i++)
			model_write(bufs[1] + i * slot, (size_t)p[i].u.batch.file_offset, p[i].u.batch.size);
	n_ops[2]++;
}

/* Stream-ordered: on the NULL stream, synchronized before the check. */
static void op_async(void)
{
	int f = live_handle();
	if (f < 0 || f == FD_PATH)
		return;
	bool write = below(3) == 0;
	size_t boff = below(BUFSZ / 2);
	size_t n = 1 + below(65536);
	off_t off = below(12) == 0 ? -4096 : (off_t)below(fsize + 8192);
	off_t bo = (off_t)boff;
	ssize_t res = -12345;
	uint8_t *buf = bufs[2];
	if (write)
		for (size_t i = 0; i < n; i++)
			buf[boff + i] = (uint8_t)rnd();
	else
		memset(buf + boff, 0xEE, n);
	if (write && off >= 0 && (size_t)off + n > FMAX)
		return;
	CUfileError_t e = write ? L.cuFileWriteAsync(h[f].fh, buf, &n, &off, &bo, &res, NULL)
				: L.cuFileReadAsync(h[f].fh, buf, &n, &off, &bo, &res, NULL);
	STEP_CHECK(e.err == CU_FILE_SUCCESS, "async enqueue: %d", STEP_ARGS, (int)e.err);
	STEP_CHECK(stream_sync(NULL).err == OPENDS_SUCCESS, "synchronize", STEP_ARGS);
	ssize_t want;
	if (write && !writable(f))
		want = -1; /* NVIDIA's answer */
	else if (!write && !readable(f))
		want = -CU_FILE_INVALID_FILE_OPEN_FLAG;
	else if (off < 0)
		want = -CU_FILE_INVALID_VALUE;
	else
		want = write ? (ssize_t)n : (ssize_t)expect_read(n, off);
	STEP_CHECK(res == want, "async %s %zu at %lld through %s (file %zu): %zd, expected %zd", STEP_ARGS,
		   write ? "write" : "read", n, (long long)off, fd_name[f], fsize, res, want);
	if (want > 0 && write)
		model_write(buf + boff, (size_t)off, n);
	else if (want > 0)
		check_bytes(buf + boff, (size_t)off, (size_t)want, "async read");
	n_ops[3]++;
}

int main(int argc, char **argv)
{
	const char *lib = dt_load(argc, argv);
	long steps = 3000;
	seed = 0x5eed0fc0ffeeull;
	int pos = 0;
	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-')
			continue;
		if (pos++ == 0)
			steps = atol(argv[i]);
		else
			seed = strtoull(argv[i], NULL, 0);
	}
	seed0 = seed;
	dt_watchdog(600);
	void *lh = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	CHECK(lh, "dlopen %s: %s", lib, dlerror());
	stream_sync = (opends_error_t(*)(void *))dlsym(lh, "opends_stream_synchronize");
	CHECK(stream_sync, "opends_stream_synchronize not found beside the drop-in");

	char path[] = "/var/tmp/cufile_random_XXXXXX";
	int fd0 = mkstemp(path);
	CHECK(fd0 >= 0, "mkstemp: %s", strerror(errno));
	oracle = calloc(1, FMAX);
	CHECK(oracle, "oom");
	fsize = 1u << 20;
	for (size_t i = 0; i < fsize; i++)
		oracle[i] = (uint8_t)(i * 131 + (i >> 12));
	CHECK(pwrite(fd0, oracle, fsize, 0) == (ssize_t)fsize, "pwrite");
	fds[FD_RW] = fd0;
	fds[FD_RW_DIRECT] = open(path, O_RDWR | O_DIRECT);
	if (fds[FD_RW_DIRECT] < 0) /* a file system without O_DIRECT (tmpfs) */
		fds[FD_RW_DIRECT] = open(path, O_RDWR);
	fds[FD_RO] = open(path, O_RDONLY);
	fds[FD_WO] = open(path, O_WRONLY);
	fds[FD_PATH] = open(path, O_PATH);
	check_fd = open(path, O_RDONLY);
	unlink(path);
	for (int i = 0; i < NFD; i++)
		CHECK(fds[i] >= 0, "open %s: %s", fd_name[i], strerror(errno));
	for (int i = 0; i < NBUF; i++) {
		CHECK(posix_memalign((void **)&bufs[i], 4096, BUFSZ) == 0, "oom");
		memset(bufs[i], 0, BUFSZ);
	}
	printf("seed %llu, %ld steps\n", (unsigned long long)seed0, steps);
	CUfileError_t (*set_level)(int) = (CUfileError_t(*)(int))dlsym(lh, "cuFileSetStatsLevel");
	CUfileError_t (*get_l1)(void *) = (CUfileError_t(*)(void *))dlsym(lh, "cuFileGetStatsL1");
	CHECK(set_level && get_l1, "statistics calls missing");
	CU_OK(set_level(1)); /* before the open: the API's level stands at every open */

	for (step = 0; step < steps; step++) {
		switch (below(20)) {
		case 0:
			op_driver();
			break;
		case 1:
		case 2:
			op_handle();
			break;
		case 3:
			op_buf();
			break;
		case 4:
		case 5:
		case 6:
			op_batch();
			break;
		case 7:
		case 8:
			op_async();
			break;
		default:
			op_sync();
			break;
		}
	}
	for (int i = 0; i < NFD; i++)
		if (h[i].reg) {
			L.cuFileHandleDeregister(h[i].fh);
			st_count(S_HDEREG, true);
		}
	/* the statistics of every synchronous call, registration and
	 * deregistration, counted across the driver's closes (the
	 * structure read needs the driver open) */
	static uint64_t l1[128];
	if (!driver_open) {
		CU_OK(L.cuFileDriverOpen());
		users++;
	}
	CU_OK(get_l1(l1));
	for (int i = 0; i < 14; i++)
		CHECK(l1[i] == st_want[i], "statistics field %d: %llu, the model's %llu (seed %llu)", i,
		      (unsigned long long)l1[i], (unsigned long long)st_want[i], (unsigned long long)seed0);
	while (users-- > 0)
		CU_OK(L.cuFileDriverClose_v2());

	/* the file, byte for byte */
	struct stat st;
	CHECK(fstat(check_fd, &st) == 0 && (size_t)st.st_size == fsize, "file size %lld, the model's %zu",
	      (long long)st.st_size, fsize);
	uint8_t *f = malloc(fsize);
	CHECK(f && pread(check_fd, f, fsize, 0) == (ssize_t)fsize, "pread");
	for (size_t i = 0; i < fsize; i++)
		CHECK(f[i] == oracle[i], "the file's byte %zu is 0x%02x, the oracle's 0x%02x (seed %llu)", i, f[i],
		      oracle[i], (unsigned long long)seed0);
	printf("PASS: %ld steps: %lu reads, %lu writes, %lu batches (%lu cancelled), %lu stream operations checked; "
	       "file %zu bytes as the oracle\n",
	       steps, n_ops[0], n_ops[1], n_ops[2], n_ops[4], n_ops[3], fsize);
	free(f);
	for (int i = 0; i < NBUF; i++)
		free(bufs[i]);
	free(oracle);
	return 0;
}
