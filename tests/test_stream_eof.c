/*
 * test_stream_eof [--backend=NAME]
 *
 * A stream read into device memory whose *size reaches past EOF reads and
 * writes nothing of the target past the file's bytes (src/core/
 * stream_accel.c: each piece copies only its bytes inside the file seen at
 * the call). The target ends right there: a PROT_NONE page follows it, so
 * touching a byte past the result faults (on a GPU, a copy past a
 * cudaMalloc'd buffer of the file's size is CUDA_ERROR_ILLEGAL_ADDRESS, a
 * sticky context error; before, the staged read copied the device's own
 * bytes past EOF into its slot and back: rel's finding). Cases, each with
 * the result and bytes checked:
 *  - one piece and many pieces (past the 32 slots) on an idle stream the
 *    library made (read at the call, direct or not);
 *  - the same on a stream busy with an earlier read (read when the stream
 *    gets there), and on one registered with fixed arguments;
 *  - a piece wholly past EOF (the read's end in the next piece).
 * Skips (77) without accelerator streams (OPENDS_ACCEL=hostdev).
 */
#include <sys/mman.h>

#include "test_stream_common.h"

#define FIXED (OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET | OPENDS_STREAM_FIXED_FILE_SIZE)

static const size_t F = 137 * T_MiB + 4321; /* 35 pieces: more than 32 slots */
static uint8_t *oracle;
static opends_handle_t fh;

/* a read of size bytes at foff, into a target holding exactly the file's
 * bytes from foff and a PROT_NONE page after them; s is busied first
 * with a read of 32 MiB when busy */
static void one(opends_stream_t s, size_t size, off_t foff, bool busy, const char *what)
{
	t_phase = what;
	size_t want = F - (size_t)foff, pg = 4096, span = (want + pg - 1) / pg * pg;
	uint8_t *m = mmap(NULL, span + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	CHECK(mprotect(m + span, pg, PROT_NONE) == 0);
	uint8_t *t = m + span - want;
	memset(m, T_CANARY, span);
	uint8_t *first = busy ? t_xmalloc(32 * T_MiB) : NULL;
	struct sop b = { 32 * T_MiB, 999, 0, SENT }, a = { size, foff, 0, SENT };
	if (busy)
		OK(opends_stream_read(fh, first, &b.size, &b.foff, &b.boff, &b.res, s));
	OK(opends_stream_read(fh, t, &a.size, &a.foff, &a.boff, &a.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(a.res == (ssize_t)want, "%s: a read of %zu at %lld gave %zd (%s), expected %zu", what, size,
	       (long long)foff, a.res, t_errname(a.res), want);
	VERIFY(t, oracle + foff, want, "%s", what);
	VERIFY_CANARY(m, span - want, "%s: before the target", what);
	if (busy) {
		CHECKF(b.res == (ssize_t)(32 * T_MiB), "%s: the read ahead gave %zd", what, b.res);
		VERIFY(first, oracle + 999, 32 * T_MiB, "%s: the read ahead", what);
		free(first);
	}
	munmap(m, span + pg);
}

static void cases(opends_stream_t s, const char *kind)
{
	char w[96];
	for (int busy = 0; busy < 2; busy++) {
		snprintf(w, sizeof w, "%s%s: one piece", kind, busy ? ", busy" : "");
		one(s, 1 * T_MiB, (off_t)(F - 1000), busy, w);
		snprintf(w, sizeof w, "%s%s: many pieces", kind, busy ? ", busy" : "");
		one(s, F, 5 * T_MiB + 3, busy, w);
		/* the file ends 100 bytes into piece 1; piece 2 wholly past it */
		snprintf(w, sizeof w, "%s%s: a piece past EOF", kind, busy ? ", busy" : "");
		one(s, 12 * T_MiB, (off_t)(F - 4 * T_MiB - 100), busy, w);
	}
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(240);
	const char *acc = getenv("OPENDS_ACCEL");
	if (!acc || strcmp(acc, "hostdev"))
		skip("needs accelerator streams (OPENDS_ACCEL=hostdev)");
	char path[PATH_MAX];
	t_path(path, sizeof path, "eof.bin");
	int fd = t_hot_file(path, F, hashpat, &oracle);
	t_driver_open();
	fh = t_register(fd);
	opends_stream_t s, f;
	OK(opends_stream_create(&s));
	cases(s, "idle stream");
	OK(opends_stream_create(&f));
	OK(opends_stream_register(f, FIXED));
	cases(f, "fixed stream");
	OK(opends_stream_destroy(s));
	OK(opends_stream_destroy(f));
	OK(opends_handle_deregister(fh));
	OK(opends_driver_close());
	close(fd);
	free(oracle);
	t_rm_dir();
	printf("OK\n");
	return 0;
}
