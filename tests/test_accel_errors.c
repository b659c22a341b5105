/*
 * test_accel_errors: opends_error_t.backend_err carries the accelerator
 * driver's result code (API.md "Errors"; a CUresult under CUDA), through
 * hostdev's failure injection (OPENDS_HOSTDEV_FAIL_AFTER=0: every stream
 * command fails with the simulated result 719, src/accel/host/host.c):
 *  - a stream read whose commands fail: OPENDS_DEVICE_DRIVER_ERROR with
 *    backend_err 719, and again on the next one (not used up by the first);
 *  - the calls after it that fail for another reason report no stale
 *    code: an argument error (OPENDS_INVALID_VALUE) has backend_err 0, a
 *    stream synchronize that succeeds has 0, and an errno still wins where
 *    the call names one (handle_register of a closed fd: EBADF);
 *  - the same failure on another thread reports it there, and the code
 *    of one thread never shows on another.
 * The checks run in a child that leaves with _exit, as test_stream_fault's:
 * a stream command that failed loses its gate by contract (accel.h), which
 * a leak check at exit would report. Skips (77) unless
 * OPENDS_ACCEL=hostdev.
 */
#include <pthread.h>
#include <sys/wait.h>

#include "common.h"

#define INJECTED 719 /* host.c HOSTDEV_INJECTED_RESULT (CUDA_ERROR_LAUNCH_FAILED) */

static opends_handle_t g_fh;
static opends_stream_t g_s;
static uint8_t g_buf[8192];

static opends_error_t failing_read(void)
{
	static size_t size;
	static off_t foff, boff;
	static ssize_t res;
	size = 4096;
	foff = boff = 0;
	res = -1;
	return opends_stream_read(g_fh, g_buf, &size, &foff, &boff, &res, g_s);
}

static void *other_thread(void *arg)
{
	(void)arg;
	/* nothing failed on this thread yet: an argument error has no code */
	opends_error_t e = opends_stream_read(g_fh, NULL, NULL, NULL, NULL, NULL, g_s);
	CHECKF(e.err == OPENDS_INVALID_VALUE && e.backend_err == 0,
	       "other thread, NULL arguments: err %d backend_err %d, want %d and 0", e.err, e.backend_err,
	       OPENDS_INVALID_VALUE);
	e = failing_read();
	CHECKF(e.err == OPENDS_DEVICE_DRIVER_ERROR && e.backend_err == INJECTED,
	       "other thread, injected failure: err %d (%s) backend_err %d, want %d and %d", e.err, t_errname(e.err),
	       e.backend_err, OPENDS_DEVICE_DRIVER_ERROR, INJECTED);
	return NULL;
}

static void checks(const char *path)
{
	setenv("OPENDS_HOSTDEV_FAIL_AFTER", "0", 1);
	t_driver_open();
	int fd = t_open(path, O_RDONLY, false);
	g_fh = t_register(fd);
	OK(opends_stream_create(&g_s));

	t_phase = "an injected accelerator failure";
	opends_error_t e = failing_read();
	CHECKF(e.err == OPENDS_DEVICE_DRIVER_ERROR, "stream read with failing commands: %d (%s), want %d", e.err,
	       t_errname(e.err), OPENDS_DEVICE_DRIVER_ERROR);
	CHECKF(e.backend_err == INJECTED, "backend_err %d, want the driver's result %d (detail: %s)", e.backend_err,
	       INJECTED, t_detail());
	e = failing_read();
	CHECKF(e.err == OPENDS_DEVICE_DRIVER_ERROR && e.backend_err == INJECTED,
	       "the second failure: err %d backend_err %d, want %d and %d", e.err, e.backend_err,
	       OPENDS_DEVICE_DRIVER_ERROR, INJECTED);

	t_phase = "later failures of other kinds carry no stale code";
	e = opends_stream_read(g_fh, NULL, NULL, NULL, NULL, NULL, g_s);
	CHECKF(e.err == OPENDS_INVALID_VALUE && e.backend_err == 0,
	       "NULL arguments after an accelerator failure: err %d backend_err %d, want %d and 0", e.err,
	       e.backend_err, OPENDS_INVALID_VALUE);
	e = failing_read();
	CHECK(e.err == OPENDS_DEVICE_DRIVER_ERROR);
	int closed = dup(fd);
	CHECK(closed >= 0);
	close(closed);
	opends_handle_t fh2 = NULL;
	e = opends_handle_register(&fh2, closed);
	CHECKF(e.err == OPENDS_INVALID_VALUE && e.backend_err == EBADF,
	       "register of a closed fd after an accelerator failure: err %d backend_err %d, want %d and EBADF", e.err,
	       e.backend_err, OPENDS_INVALID_VALUE);
	e = failing_read();
	CHECK(e.err == OPENDS_DEVICE_DRIVER_ERROR);
	e = opends_stream_synchronize(g_s);
	CHECKF(e.err == OPENDS_SUCCESS && e.backend_err == 0, "synchronize after a failure: err %d backend_err %d",
	       e.err, e.backend_err);

	t_phase = "per thread";
	e = failing_read();
	CHECK(e.err == OPENDS_DEVICE_DRIVER_ERROR);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, other_thread, NULL) == 0);
	CHECK(pthread_join(th, NULL) == 0);

	OK(opends_stream_destroy(g_s));
	OK(opends_handle_deregister(g_fh));
	close(fd);
	OK(opends_driver_close());
	printf("backend_err: the injected result %d on accelerator failures (twice, on two threads), 0 or the errno "
	       "on the calls after them\n",
	       INJECTED);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(60);
	const char *acc = getenv("OPENDS_ACCEL");
	if (!acc || strcmp(acc, "hostdev"))
		skip("needs hostdev's failure injection (OPENDS_ACCEL=hostdev)");
	char path[PATH_MAX];
	t_path(path, sizeof path, "accel_errors.bin");
	t_write_pattern_file(path, 64 * T_KiB, hashpat);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		checks(path);
		fflush(NULL);
		_exit(t_failures ? 1 : 0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	unlink(path);
	t_rm_dir();
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the checks' process %s %d",
	       WIFEXITED(st) ? "exited" : "was killed by signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return t_failures ? 1 : 0;
}
