/*
 * test_stream_fault [--backend=NAME]
 *
 * The accelerator fails while a stream operation is being queued
 * (src/core/stream_accel.c, op_cut): hostdev's failure injection
 * (OPENDS_HOSTDEV_FAIL_AFTER=N: stream commands after the first N fail,
 * and keep failing) is swept over every command of a run of operations,
 * each N in its own process. Whatever N:
 *  - the enqueue calls before the failure succeed, the one it hits and all
 *    later ones return OPENDS_DEVICE_DRIVER_ERROR;
 *  - synchronizing the stream returns (a watchdog fails a hang): every
 *    gate that reached the stream opens;
 *  - the operations queued whole read exactly the file; the one cut short
 *    gives -OPENDS_DEVICE_DRIVER_ERROR (or nothing, when none of it was
 *    queued), and its target holds no byte other than its own earlier
 *    bytes, zeros, or the file's bytes (no stale staging);
 *  - the driver closes.
 * On a stream registered with fixed arguments too. With
 * OPENDS_HOSTDEV_FAIL_QUEUED=1 the failing wait reaches the stream though
 * its call fails (CUDA's gate in two calls, the second refused): the
 * same must hold (before the fix, N=0 hung: that gate never opened).
 * Skips (77) under the
 * host layer (no accelerator streams) or when hostdev has no injection.
 */
#include <sys/wait.h>

#include "common.h"

#define SENT ((ssize_t)-12345)
#define FIXED (OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET | OPENDS_STREAM_FIXED_FILE_SIZE)

static const size_t F = 137 * T_MiB + 1000; /* 35 pieces: more than 32 slots */
static char path[PATH_MAX];

struct sop {
	size_t size;
	off_t foff, boff;
	ssize_t res;
};

/* Sizes of the runs of operations: (0) one piece, many pieces, nothing to
 * move (a host function, no staging), one piece, swept over every
 * command; (1) more pieces than slots, at a few points (its first
 * commands, where the waits of the pieces that reuse slots are queued,
 * its last). */
static const size_t runs[2][4] = { { 300 * T_KiB + 1, 9 * T_MiB + 5, 0, 4096 }, { 137 * T_MiB } };
static const long big_at[] = { 0, 2, 50, 97, 98, 99, 100, 101, 103, 200 };
enum { NOPS = 4 };
static const size_t *sizes;
static int nops;

/* One process: the run with the Nth command failing. Returns how many
 * enqueue calls succeeded. */
static int one(long n, int fixed, const uint8_t *oracle)
{
	char v[32];
	snprintf(v, sizeof v, "%ld", n);
	setenv("OPENDS_HOSTDEV_FAIL_AFTER", v, 1);
	t_driver_open();
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	opends_stream_t s;
	OK(opends_stream_create(&s));
	if (fixed)
		OK(opends_stream_register(s, FIXED));
	uint8_t *buf[NOPS];
	struct sop o[NOPS];
	memset(buf, 0, sizeof buf);
	int ok = 0;
	bool failed = false;
	for (int i = 0; i < nops; i++) {
		buf[i] = t_xmalloc(sizes[i] + 1);
		o[i] = (struct sop){ sizes[i], (off_t)(i * 4099), 0, SENT };
		opends_error_t e = opends_stream_read(fh, buf[i], &o[i].size, &o[i].foff, &o[i].boff, &o[i].res, s);
		if (!failed && e.err == OPENDS_SUCCESS) {
			ok++;
			continue;
		}
		CHECKF(e.err == OPENDS_DEVICE_DRIVER_ERROR, "N=%ld op %d: enqueue gave %d (%s)", n, i, e.err,
		       t_errname(e.err));
		failed = true;
	}
	OK(opends_stream_synchronize(s));
	for (int i = 0; i < nops; i++) {
		size_t want = t_expect_read(F, (uint64_t)o[i].foff, sizes[i]);
		if (i < ok) {
			CHECKF(o[i].res == (ssize_t)want, "N=%ld op %d: gave %zd (%s), expected %zu", n, i, o[i].res,
			       t_errname(o[i].res), want);
			if (want)
				VERIFY(buf[i], oracle + o[i].foff, want, "N=%ld op %d", n, i);
		} else {
			if (i == ok)
				CHECKF(o[i].res == SENT || o[i].res == -OPENDS_DEVICE_DRIVER_ERROR,
				       "N=%ld cut op %d: gave %zd (%s)", n, i, o[i].res, t_errname(o[i].res));
			else
				CHECKF(o[i].res == SENT, "N=%ld op %d refused but gave %zd", n, i, o[i].res);
			for (size_t b = 0; b < sizes[i]; b++) {
				uint8_t x = buf[i][b];
				if (x != T_CANARY && x != 0 && x != oracle[(size_t)o[i].foff + b])
					FAILF("N=%ld op %d: byte %zu is 0x%02x: neither its own, zero, nor the file's", n,
					      i, b, x);
			}
		}
		VERIFY_CANARY(buf[i] + sizes[i], 1, "N=%ld op %d: past the target", n, i);
		free(buf[i]);
	}
	OK(opends_stream_destroy(s));
	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
	return ok;
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	/* no watchdog over the whole sweep (~60 children: under TSan on a
	 * loaded machine it outlived 280 s without any hang); each child has
	 * its own (alarms are not inherited), so a hang fails naming its N */
	const char *acc = getenv("OPENDS_ACCEL");
	if (!acc || strcmp(acc, "hostdev"))
		skip("needs hostdev's simulated streams and failure injection (OPENDS_ACCEL=hostdev)");
	t_path(path, sizeof path, "fault.bin");
	t_write_pattern_file(path, F, hashpat);
	uint8_t *oracle = t_oracle(F, hashpat);

	for (int run = 0; run < 2; run++)
		for (int fixed = 0; fixed < 2; fixed++) {
			sizes = runs[run];
			nops = run ? 1 : NOPS;
			long total = -1;
			for (unsigned j = 0; j < 1000 && total < 0; j++) {
				long n = run ? (j < sizeof big_at / sizeof big_at[0] ? big_at[j] : -1) : (long)j;
				if (n < 0)
					break;
				fflush(stdout);
				pid_t pid = fork();
				CHECK(pid >= 0);
				if (pid == 0) {
					t_watchdog(60);
					int ok = one(n, fixed, oracle);
					_exit(t_failures ? 1 : ok == nops ? 100 : 0);
				}
				int st;
				CHECK(waitpid(pid, &st, 0) == pid);
				CHECKF(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 100),
				       "run %d fixed=%d N=%ld: child %s %d", run, fixed, n,
				       WIFEXITED(st) ? "exited" : "killed by signal",
				       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
				if (WEXITSTATUS(st) == 100) {
					if (n == 0)
						skip("hostdev has no failure injection (OPENDS_HOSTDEV_FAIL_AFTER had "
						     "no effect)");
					total = n;
				}
			}
			CHECKF(total > 0, "run %d fixed=%d: never completed whole", run, fixed);
			printf("run %d fixed=%d: failures up to command %ld left no stream waiting\n", run, fixed,
			       total);
		}
	free(oracle);
	return 0;
}
