/*
 * test_stream_caller: a read on an idle stream the library made that is
 * too large to queue without waiting for the stream (more than 128
 * pieces) runs on the caller as a synchronous read does
 * (src/core/stream_accel.c, caller_run): nothing queued on the stream, the
 * result out when the call returns. Run on hostdev; this program links the
 * library's objects to read the count of such reads (OPENDS_STREAM_STATS).
 * Pieces of 1 MiB for operations of 256 MiB and more
 * (OPENDS_STREAM_BIG=1,4), so a read of 256 MiB has 256 pieces. Each case
 * in a process of its own:
 *  - exact: a read of 260 MiB at an odd offset runs on the caller, and one
 *    past EOF too (the bytes past the result left alone), each with its
 *    result out at the return, byte-exact;
 *  - busy: the same read queued right behind another on the same stream
 *    (the stream is not idle) runs staged, both exact;
 *  - small: a read of 200 MiB (50 pieces of 4 MiB: the caller would not
 *    wait) runs staged;
 *  - off: OPENDS_STREAM_CALLER=0: none runs on the caller, each exact.
 */
#include "common.h"

#include "stream.h"

#define SENT ((ssize_t)-12345)

static char path[PATH_MAX];
static uint8_t *oracle;
static const size_t FSIZE = 262 * T_MiB + 77;
#define BIG (260 * T_MiB + 3)

static unsigned long long caller_ops(void)
{
	return atomic_load(&ods_sstats[SST_CALLER]);
}

/* one read on s; true when it ran on the caller. Synchronized (sync) or
 * checked at the return (the result must be out); byte-exact with the
 * bytes past it untouched */
static bool read_one(opends_handle_t fh, opends_stream_t s, uint8_t *mem, size_t size, off_t foff, bool sync)
{
	unsigned long long c0 = caller_ops();
	ssize_t got = SENT;
	off_t boff = 0;
	OK(opends_stream_read(fh, mem, &size, &foff, &boff, &got, s));
	bool caller = caller_ops() == c0 + 1;
	size_t want = t_expect_read(FSIZE, (uint64_t)foff, size);
	if (caller)
		CHECKF(__atomic_load_n(&got, __ATOMIC_ACQUIRE) == (ssize_t)want,
		       "read on the caller: result %zd at the return, expected %zu", got, want);
	if (sync)
		OK(opends_stream_synchronize(s));
	CHECKF(got == (ssize_t)want, "read of %zu at %lld: got %zd, expected %zu", size, (long long)foff, got, want);
	VERIFY(mem, oracle + foff, want, "read of %zu at %lld", size, (long long)foff);
	VERIFY_CANARY(mem + want, size + 1 - want, "past the result of the read at %lld", (long long)foff);
	return caller;
}

/* the file, made again if a failed case's exit took the directory */
static void need_file(void)
{
	if (access(path, R_OK) == 0)
		return;
	mkdir(t_tmpdir(), 0700);
	free(oracle);
	close(t_hot_file(path, FSIZE, hashpat, &oracle));
}

/* a target of n bytes and one more, filled with the canary (before the
 * driver opens: filling 260 MiB takes longer than a read behind which a
 * test queues another) */
static uint8_t *target(size_t n)
{
	uint8_t *m = t_xmalloc(n + 1);
	memset(m, T_CANARY, n + 1);
	return m;
}

static void open_one(int *fd, opends_handle_t *fh, opends_stream_t *s)
{
	need_file();
	setenv("OPENDS_STREAM_STATS", "1", 1);
	setenv("OPENDS_STREAM_BIG", "1,4", 1);
	t_driver_open();
	*fd = t_open(path, O_RDONLY, false);
	*fh = t_register(*fd);
	OK(opends_stream_create(s));
}

static void teardown(opends_stream_t s, opends_handle_t fh, int fd, void *mem)
{
	OK(opends_stream_destroy(s));
	OK(opends_handle_deregister(fh));
	OK(opends_driver_close());
	close(fd);
	free(mem);
}

static void case_exact(void)
{
	int fd;
	opends_handle_t fh;
	opends_stream_t s;
	open_one(&fd, &fh, &s);
	uint8_t *mem = target(BIG);
	CHECKF(read_one(fh, s, mem, BIG, 4099, true), "a read of %zu on an idle stream did not run on the caller",
	       (size_t)BIG);
	memset(mem, T_CANARY, BIG + 1);
	/* past EOF: 2 MiB + 74 bytes of it inside the file */
	CHECKF(read_one(fh, s, mem, BIG, (off_t)(FSIZE - BIG + 3 * T_MiB), false),
	       "a read past EOF on an idle stream did not run on the caller");
	teardown(s, fh, fd, mem);
}

static void case_busy(void)
{
	int fd;
	opends_handle_t fh;
	opends_stream_t s;
	uint8_t *first = target(64 * T_MiB), *mem = target(BIG);
	open_one(&fd, &fh, &s);
	size_t size = 64 * T_MiB;
	off_t foff = 1000, boff = 0;
	ssize_t got = SENT;
	OK(opends_stream_read(fh, first, &size, &foff, &boff, &got, s));
	CHECKF(!read_one(fh, s, mem, BIG, 12345, true), "a read queued behind another ran on the caller");
	CHECKF(got == (ssize_t)(64 * T_MiB), "the first read gave %zd", got);
	VERIFY(first, oracle + 1000, 64 * T_MiB, "the first read");
	free(first);
	teardown(s, fh, fd, mem);
}

static void case_small(void)
{
	int fd;
	opends_handle_t fh;
	opends_stream_t s;
	uint8_t *mem = target(200 * T_MiB);
	open_one(&fd, &fh, &s);
	CHECKF(!read_one(fh, s, mem, 200 * T_MiB, 777, true), "a read of 50 pieces ran on the caller");
	teardown(s, fh, fd, mem);
}

static void case_off(void)
{
	setenv("OPENDS_STREAM_CALLER", "0", 1);
	int fd;
	opends_handle_t fh;
	opends_stream_t s;
	uint8_t *mem = target(BIG);
	open_one(&fd, &fh, &s);
	CHECKF(!read_one(fh, s, mem, BIG, 4099, true), "OPENDS_STREAM_CALLER=0: a read ran on the caller");
	memset(mem, T_CANARY, BIG + 1);
	CHECKF(!read_one(fh, s, mem, BIG, (off_t)(FSIZE - BIG + 3 * T_MiB), true),
	       "OPENDS_STREAM_CALLER=0: a read past EOF ran on the caller");
	teardown(s, fh, fd, mem);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(240);
	const char *acc = getenv("OPENDS_ACCEL");
	if (!acc || strcmp(acc, "hostdev")) {
		printf("SKIP: needs OPENDS_ACCEL=hostdev (accelerator streams)\n");
		return 77;
	}
	t_path(path, sizeof(path), "stream_caller.bin");
	int fd = t_hot_file(path, FSIZE, hashpat, &oracle);
	close(fd);
	bool ok = t_case_in_child("exact", case_exact);
	ok &= t_case_in_child("busy", case_busy);
	ok &= t_case_in_child("small", case_small);
	ok &= t_case_in_child("off", case_off);
	free(oracle);
	t_rm_dir();
	CHECKF(ok, "a case failed");
	printf("OK\n");
	return 0;
}
