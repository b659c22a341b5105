/*
 * test_errors
 *
 * The exact code for each misuse, and a detail sentence after each
 * failure: calls while closed, NULL pointers, bad fds and file types,
 * double registration, bad offsets and sizes, and every configuration
 * variable with junk in it (open must fail with OPENDS_DRIVER_INVALID_PROPS
 * and name the variable).
 */
#include "common.h"

#include <sys/socket.h>

static char path[PATH_MAX];

/* Everything fails with NOT_INITIALIZED while the driver is closed; the
 * stale objects come from an earlier open so the arguments are plausible. */
static void closed_calls(opends_handle_t fh, opends_stream_t s, opends_batch_t b, int fd)
{
	uint8_t buf[4096];
	opends_drv_props_t props;
	opends_handle_t h2;
	opends_async_future_t f;
	opends_stream_t s2;
	opends_batch_t b2;
	size_t size = 100;
	off_t fo = 0, bo = 0;
	ssize_t res = -1;
	opends_io_params_t p;
	memset(&p, 0, sizeof p);
	p.mode = OPENDS_BATCH;
	p.u.batch.buf_base = buf;
	p.u.batch.size = 100;
	p.fh = fh;
	unsigned nr = 1;
	opends_io_events_t ev;
	struct timespec ts = { 0, 0 };

	CHECK(opends_driver_backend() == NULL);
	EXPECT_ERR(opends_driver_close(), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_driver_get_properties(&props), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_handle_register(&h2, fd), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_handle_deregister(fh), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_buf_register(buf, sizeof buf, 0), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_buf_deregister(buf), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_SSZ(opends_sync_read(fh, buf, 100, 0, 0), -OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_SSZ(opends_sync_write(fh, buf, 100, 0, 0), -OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_async_read(fh, buf, 100, 0, 0, &f), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_async_write(fh, buf, 100, 0, 0, &f), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_stream_create(&s2), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_stream_destroy(s), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_stream_register(s, 0), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_stream_deregister(s), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_stream_read(fh, buf, &size, &fo, &bo, &res, s), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_stream_write(fh, buf, &size, &fo, &bo, &res, s), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_stream_read(fh, buf, &size, &fo, &bo, &res, NULL), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_stream_synchronize(s), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_stream_synchronize(NULL), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_batch_setup(&b2, 4), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_batch_submit(b, 1, &p, 0), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_batch_get_status(b, 0, &nr, &ev, &ts), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_batch_cancel(b), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_batch_destroy(b), OPENDS_DRIVER_NOT_INITIALIZED);
	CHECKF(res == -1, "a refused stream submit wrote *bytes_read");
	/* these work closed */
	unsigned ma;
	OK(opends_get_version(&ma, NULL, NULL));
	CHECK(opends_op_status_error(OPENDS_DRIVER_NOT_INITIALIZED) != NULL);
	CHECK(opends_last_error_detail() != NULL);
}

static void null_pointers(opends_handle_t fh)
{
	t_phase = "NULL pointers";
	uint8_t buf[64];
	size_t size = 10;
	off_t fo = 0, bo = 0;
	ssize_t res;
	opends_async_future_t f;
	opends_stream_t s;
	OK(opends_stream_create(&s));
	EXPECT_ERR(opends_driver_get_properties(NULL), OPENDS_INVALID_VALUE);
	int fd = open(path, O_RDONLY);
	EXPECT_ERR(opends_handle_register(NULL, fd), OPENDS_INVALID_VALUE);
	close(fd);
	EXPECT_ERR(opends_handle_deregister(NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_buf_register(NULL, 4096, 0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_buf_deregister(NULL), OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_read(fh, NULL, 10, 0, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_write(fh, NULL, 10, 0, 0), -OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_read(fh, NULL, 10, 0, 0, &f), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_read(fh, buf, 10, 0, 0, NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_write(fh, NULL, 10, 0, 0, &f), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_write(fh, buf, 10, 0, 0, NULL), OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_async_await(NULL), -OPENDS_INVALID_VALUE);
	CHECK(opends_async_poll(NULL) == -OPENDS_INVALID_VALUE);
	CHECK_DETAIL();
	EXPECT_ERR(opends_stream_create(NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_destroy(NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_read(fh, NULL, &size, &fo, &bo, &res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_read(fh, buf, NULL, &fo, &bo, &res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_read(fh, buf, &size, NULL, &bo, &res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_read(fh, buf, &size, &fo, NULL, &res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_read(fh, buf, &size, &fo, &bo, NULL, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_write(fh, NULL, &size, &fo, &bo, &res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_write(fh, buf, NULL, &fo, &bo, &res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_write(fh, buf, &size, NULL, &bo, &res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_write(fh, buf, &size, &fo, NULL, &res, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_stream_write(fh, buf, &size, &fo, &bo, NULL, s), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_setup(NULL, 4), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_submit(NULL, 1, NULL, 0), OPENDS_INVALID_VALUE);
	unsigned nr = 1;
	EXPECT_ERR(opends_batch_get_status(NULL, 0, &nr, NULL, NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_cancel(NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_batch_destroy(NULL), OPENDS_INVALID_VALUE);
	OK(opends_stream_destroy(s));
}

static void handles(void)
{
	t_phase = "handle registration";
	opends_handle_t fh;
	/* a directory and a pipe are not files */
	int dfd = open(t_tmpdir(), O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	EXPECT_ERR(opends_handle_register(&fh, dfd), OPENDS_INVALID_FILE_TYPE);
	close(dfd);
	int pp[2];
	CHECK(pipe(pp) == 0);
	EXPECT_ERR(opends_handle_register(&fh, pp[0]), OPENDS_INVALID_FILE_TYPE);
	EXPECT_ERR(opends_handle_register(&fh, pp[1]), OPENDS_INVALID_FILE_TYPE);
	close(pp[0]);
	close(pp[1]);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	EXPECT_ERR(opends_handle_register(&fh, sv[0]), OPENDS_INVALID_FILE_TYPE);
	close(sv[0]);
	close(sv[1]);
	int cfd = open("/dev/null", O_RDWR); /* a character device */
	if (cfd >= 0) {
		EXPECT_ERR(opends_handle_register(&fh, cfd), OPENDS_INVALID_FILE_TYPE);
		close(cfd);
	}

	/* closed and negative fds: INVALID_VALUE with backend_err EBADF */
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	close(fd);
	opends_error_t e = opends_handle_register(&fh, fd);
	CHECKF(e.err == OPENDS_INVALID_VALUE && e.backend_err == EBADF,
	       "closed fd: err %d (%s) backend_err %d, expected INVALID_VALUE/EBADF", e.err, t_errname(e.err),
	       e.backend_err);
	CHECK_DETAIL();
	e = opends_handle_register(&fh, -1);
	CHECKF(e.err == OPENDS_INVALID_VALUE && e.backend_err == EBADF,
	       "fd -1: err %d (%s) backend_err %d, expected INVALID_VALUE/EBADF", e.err, t_errname(e.err),
	       e.backend_err);
	CHECK_DETAIL();

	/* the same fd twice */
	fd = open(path, O_RDONLY);
	opends_handle_t a = t_register(fd);
	EXPECT_ERR(opends_handle_register(&fh, fd), OPENDS_HANDLE_ALREADY_REGISTERED);
	/* a dup of it is another fd: fine */
	int fd2 = dup(fd);
	opends_handle_t b = t_register(fd2);
	CHECK(a != b);
	OK(opends_handle_deregister(b));
	close(fd2);

	/* deregister twice; I/O on a deregistered handle */
	OK(opends_handle_deregister(a));
	EXPECT_ERR(opends_handle_deregister(a), OPENDS_HANDLE_NOT_REGISTERED);
	uint8_t buf[4096];
	EXPECT_SSZ(opends_sync_read(a, buf, 100, 0, 0), -OPENDS_HANDLE_NOT_REGISTERED);
	EXPECT_SSZ(opends_sync_write(a, buf, 100, 0, 0), -OPENDS_HANDLE_NOT_REGISTERED);
	opends_async_future_t f;
	EXPECT_ERR(opends_async_read(a, buf, 100, 0, 0, &f), OPENDS_HANDLE_NOT_REGISTERED);
	/* a made-up handle value */
	EXPECT_SSZ(opends_sync_read((opends_handle_t)(uintptr_t)0x5151515100000007ull, buf, 100, 0, 0),
		   -OPENDS_HANDLE_NOT_REGISTERED);
	EXPECT_ERR(opends_handle_deregister((opends_handle_t)(uintptr_t)0x5151515100000007ull),
		   OPENDS_HANDLE_NOT_REGISTERED);
	/* and the fd can be registered again; the new handle works */
	opends_handle_t c = t_register(fd);
	EXPECT_SSZ(opends_sync_read(c, buf, 100, 0, 0), 100);
	uint8_t exp[100];
	t_fill(exp, 0, 100, hashpat);
	VERIFY(buf, exp, 100, "read through re-registered fd");
	/* the old handle stays dead even though the fd is registered again */
	EXPECT_SSZ(opends_sync_read(a, buf, 100, 0, 0), -OPENDS_HANDLE_NOT_REGISTERED);
	OK(opends_handle_deregister(c));
	/* deregistration leaves the fd open: it is the caller's */
	CHECKF(fcntl(fd, F_GETFD) >= 0, "deregister closed the caller's fd");
	close(fd);
}

static void buffers(void)
{
	t_phase = "buffer registration";
	uint8_t *m = t_xmalloc(64 * T_KiB);
	OK(opends_buf_register(m + 4096, 8192, 0));
	/* overlaps: exact, inside, straddling either edge, containing */
	EXPECT_ERR(opends_buf_register(m + 4096, 8192, 0), OPENDS_MEMORY_ALREADY_REGISTERED);
	EXPECT_ERR(opends_buf_register(m + 5000, 100, 0), OPENDS_MEMORY_ALREADY_REGISTERED);
	EXPECT_ERR(opends_buf_register(m, 4097, 0), OPENDS_MEMORY_ALREADY_REGISTERED);
	EXPECT_ERR(opends_buf_register(m + 12287, 10, 0), OPENDS_MEMORY_ALREADY_REGISTERED);
	EXPECT_ERR(opends_buf_register(m, 32768, 0), OPENDS_MEMORY_ALREADY_REGISTERED);
	/* adjacent on both sides: no overlap */
	OK(opends_buf_register(m, 4096, 0));
	OK(opends_buf_register(m + 12288, 4096, 0));
	/* not a base */
	EXPECT_ERR(opends_buf_deregister(m + 4097), OPENDS_MEMORY_NOT_REGISTERED);
	EXPECT_ERR(opends_buf_deregister(m + 20000), OPENDS_MEMORY_NOT_REGISTERED);
	OK(opends_buf_deregister(m + 4096));
	EXPECT_ERR(opends_buf_deregister(m + 4096), OPENDS_MEMORY_NOT_REGISTERED);
	OK(opends_buf_deregister(m));
	OK(opends_buf_deregister(m + 12288));
	/* size 0, flags, wrapping */
	EXPECT_ERR(opends_buf_register(m, 0, 0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_buf_register(m, 4096, 1), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_buf_register(m, 4096, -1), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_buf_register((void *)(UINTPTR_MAX - 100), 4096, 0), OPENDS_INVALID_VALUE);
	/* all deregistered: the whole thing registers again */
	OK(opends_buf_register(m, 64 * T_KiB, 0));
	OK(opends_buf_deregister(m));
	free(m);
}

static void io_arguments(opends_handle_t fh)
{
	t_phase = "I/O argument checks";
	uint8_t *buf = t_xmalloc(8192);
	EXPECT_SSZ(opends_sync_read(fh, buf, 100, -1, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_read(fh, buf, 100, 0, -1), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_read(fh, buf, 100, INT64_MIN, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_write(fh, buf, 100, -4096, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_write(fh, buf, 100, 0, -7), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_read(fh, buf, (size_t)SSIZE_MAX + 1, 0, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_read(fh, buf, SIZE_MAX, 0, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_write(fh, buf, (size_t)SSIZE_MAX + 1, 0, 0), -OPENDS_INVALID_VALUE);
	/* file_offset + size past the largest off_t */
	EXPECT_SSZ(opends_sync_read(fh, buf, 100, INT64_MAX - 10, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_write(fh, buf, 100, INT64_MAX - 10, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_read(fh, buf, (size_t)SSIZE_MAX, 1, 0), -OPENDS_INVALID_VALUE);
	opends_async_future_t f;
	EXPECT_ERR(opends_async_read(fh, buf, 100, -1, 0, &f), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_write(fh, buf, 100, INT64_MAX - 10, 0, &f), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_read(fh, buf, (size_t)SSIZE_MAX + 1, 0, 0, &f), OPENDS_INVALID_VALUE);
	/* a never-submitted future */
	memset(&f, 0, sizeof f);
	EXPECT_SSZ(opends_async_await(&f), -OPENDS_INVALID_VALUE);
	CHECK(opends_async_poll(&f) == -OPENDS_INVALID_VALUE);
	/* nothing was written by any of these */
	VERIFY_CANARY(buf, 8192, "a refused call wrote the buffer");
	int chk = open(path, O_RDONLY);
	uint8_t *got = t_xmalloc(T_HASH_SIZE + 1);
	CHECK(t_pread_all(chk, got, T_HASH_SIZE + 1, 0) == T_HASH_SIZE);
	uint8_t *exp = t_oracle(T_HASH_SIZE, hashpat);
	VERIFY(got, exp, T_HASH_SIZE, "a refused write changed the file");
	close(chk);
	free(got);
	free(exp);
	free(buf);
}

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */

static const char *const config_vars[] = {
	"OPENDS_BACKEND", "OPENDS_ACCEL", "OPENDS_IO_THREADS", "OPENDS_QUEUE_DEPTH", "OPENDS_CHUNK_SIZE",
	"OPENDS_CPU_MASK", "OPENDS_IDLE_SPIN", "OPENDS_ASSUME_ALIGNED_ONLY",
};
static char *saved[8];

static void save_env(void)
{
	for (int i = 0; i < 8; i++) {
		const char *v = getenv(config_vars[i]);
		saved[i] = v ? strdup(v) : NULL;
	}
}

static void restore_env(void)
{
	for (int i = 0; i < 8; i++) {
		if (saved[i])
			setenv(config_vars[i], saved[i], 1);
		else
			unsetenv(config_vars[i]);
	}
}

static void bad_config(const char *var, const char *val)
{
	restore_env();
	setenv(var, val, 1);
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_SUCCESS) {
		opends_driver_close();
		FAILF("open with %s=\"%s\" succeeded; expected OPENDS_DRIVER_INVALID_PROPS", var, val);
	}
	CHECKF(e.err == OPENDS_DRIVER_INVALID_PROPS, "open with %s=\"%s\": %d (%s), expected DRIVER_INVALID_PROPS", var,
	       val, e.err, t_errname(e.err));
	const char *d = opends_last_error_detail();
	CHECKF(d && strstr(d, var), "open with %s=\"%s\": detail \"%s\" does not name the variable", var, val,
	       d ? d : "(NULL)");
	/* a failed open leaves the driver closed */
	CHECK(opends_driver_backend() == NULL);
	EXPECT_ERR(opends_driver_close(), OPENDS_DRIVER_NOT_INITIALIZED);
}

/* var=val must open and work. Extreme values come with a small companion
 * setting (var2=val2) so a backend that sizes buffers as threads x depth x
 * chunk does not need gigabytes for the test. */
static void good_config2(const char *var, const char *val, const char *var2, const char *val2)
{
	restore_env();
	setenv(var, val, 1);
	if (var2)
		setenv(var2, val2, 1);
	opends_error_t e = opends_driver_open();
	CHECKF(e.err == OPENDS_SUCCESS, "open with %s=\"%s\"%s%s%s: %d (%s), expected success", var, val,
	       var2 ? " and " : "", var2 ? var2 : "", var2 ? val2 : "", e.err, t_errname(e.err));
	/* and it works */
	int fd = open(path, O_RDONLY);
	opends_handle_t fh = t_register(fd);
	uint8_t buf[8192], exp[8192];
	t_fill(exp, 4096, 8192, hashpat);
	EXPECT_SSZ(opends_sync_read(fh, buf, 8192, 4096, 0), 8192);
	VERIFY(buf, exp, 8192, "read with %s=\"%s\"", var, val);
	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
}

static void good_config(const char *var, const char *val)
{
	good_config2(var, val, NULL, NULL);
}

static void config(void)
{
	t_phase = "configuration";
	save_env();
	static const struct {
		const char *var, *val;
	} bad[] = {
		{ "OPENDS_BACKEND", "nope" },
		{ "OPENDS_BACKEND", "REF " },
		{ "OPENDS_ACCEL", "gpu" },
		{ "OPENDS_ACCEL", "hostx" },
		{ "OPENDS_IO_THREADS", "abc" },
		{ "OPENDS_IO_THREADS", "0" },
		{ "OPENDS_IO_THREADS", "-1" },
		{ "OPENDS_IO_THREADS", "257" },
		{ "OPENDS_IO_THREADS", "100000" },
		{ "OPENDS_IO_THREADS", "4x" },
		{ "OPENDS_IO_THREADS", "99999999999999999999999" },
		{ "OPENDS_QUEUE_DEPTH", "0" },
		{ "OPENDS_QUEUE_DEPTH", "4097" },
		{ "OPENDS_QUEUE_DEPTH", "deep" },
		{ "OPENDS_CHUNK_SIZE", "1000" },
		{ "OPENDS_CHUNK_SIZE", "0" },
		{ "OPENDS_CHUNK_SIZE", "2048" },
		{ "OPENDS_CHUNK_SIZE", "2g" },
		{ "OPENDS_CHUNK_SIZE", "4q" },
		{ "OPENDS_CHUNK_SIZE", "-4096" },
		{ "OPENDS_CPU_MASK", "zz" },
		{ "OPENDS_CPU_MASK", "0xg" },
		{ "OPENDS_IDLE_SPIN", "-5" },
		{ "OPENDS_IDLE_SPIN", "fast" },
		{ "OPENDS_IDLE_SPIN", "1000001" },
		{ "OPENDS_ASSUME_ALIGNED_ONLY", "2" },
		{ "OPENDS_ASSUME_ALIGNED_ONLY", "yes" },
		{ "OPENDS_ASSUME_ALIGNED_ONLY", "-1" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		bad_config(bad[i].var, bad[i].val);

	/* an empty value means unset */
	for (int i = 0; i < 8; i++)
		good_config(config_vars[i], "");
	/* values at the edges of the documented ranges */
	static const struct {
		const char *var, *val, *var2, *val2;
	} good[] = {
		{ "OPENDS_BACKEND", "auto", NULL, NULL },
		{ "OPENDS_ACCEL", "host", NULL, NULL },
		{ "OPENDS_IO_THREADS", "1", NULL, NULL },
		{ "OPENDS_IO_THREADS", "256", "OPENDS_QUEUE_DEPTH", "1" },
		{ "OPENDS_QUEUE_DEPTH", "1", NULL, NULL },
		{ "OPENDS_QUEUE_DEPTH", "4096", "OPENDS_CHUNK_SIZE", "4096" },
		{ "OPENDS_CHUNK_SIZE", "4096", NULL, NULL },
		{ "OPENDS_CHUNK_SIZE", "8k", NULL, NULL },
		{ "OPENDS_CHUNK_SIZE", "1m", NULL, NULL },
		{ "OPENDS_CHUNK_SIZE", "64m", "OPENDS_QUEUE_DEPTH", "1" },
		{ "OPENDS_CPU_MASK", "0", NULL, NULL },
		{ "OPENDS_CPU_MASK", "0x1", NULL, NULL },
		{ "OPENDS_CPU_MASK", "1", NULL, NULL },
		{ "OPENDS_IDLE_SPIN", "0", NULL, NULL },
		{ "OPENDS_IDLE_SPIN", "busy", NULL, NULL },
		{ "OPENDS_IDLE_SPIN", "1000000", NULL, NULL },
		{ "OPENDS_ASSUME_ALIGNED_ONLY", "0", NULL, NULL },
		{ "OPENDS_ASSUME_ALIGNED_ONLY", "1", NULL, NULL },
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		good_config2(good[i].var, good[i].val, good[i].var2, good[i].val2);

	/* OPENDS_ASSUME_ALIGNED_ONLY=1: aligned I/O works, unaligned is
	 * refused with -OPENDS_INVALID_VALUE */
	t_phase = "OPENDS_ASSUME_ALIGNED_ONLY=1";
	restore_env();
	setenv("OPENDS_ASSUME_ALIGNED_ONLY", "1", 1);
	OK(opends_driver_open());
	int fd = open(path, O_RDONLY);
	opends_handle_t fh = t_register(fd);
	uint8_t *buf = t_xmalloc(16384);
	EXPECT_SSZ(opends_sync_read(fh, buf, 8192, 4096, 0), 8192);
	EXPECT_SSZ(opends_sync_read(fh, buf, 100, 4096, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_read(fh, buf, 4096, 100, 0), -OPENDS_INVALID_VALUE);
	OK(opends_handle_deregister(fh));
	close(fd);
	free(buf);
	OK(opends_driver_close());
	restore_env();
	for (int i = 0; i < 8; i++)
		free(saved[i]);
}

/* opends_err_name: every listed code by its name, negated too; errno values
 * by glibc's name; codes that name nothing give "UNKNOWN", never NULL. */
static void names(void)
{
	t_phase = "opends_err_name";
#define X(name, value, str)                                                   \
	CHECK(strcmp(opends_err_name(value), "OPENDS_" #name) == 0);         \
	CHECK(strcmp(opends_err_name(-(value)), "OPENDS_" #name) == 0);      \
	CHECK(value == 0 || value > OPENDS_ERRNO_MAX);                        \
	CHECK(strcmp(opends_op_status_error(value), str) == 0);
	OPENDS_ERROR_LIST(X)
#undef X
	CHECK(strcmp(opends_err_name(EIO), "EIO") == 0);
	CHECK(strcmp(opends_err_name(-EBADF), "EBADF") == 0);
	CHECK(strcmp(opends_err_name(5021), "UNKNOWN") == 0);
	CHECK(strcmp(opends_err_name(OPENDS_ERRNO_MAX), "UNKNOWN") == 0);
	CHECK(strcmp(opends_err_name(INT32_MIN), "UNKNOWN") == 0);
	CHECK(strcmp(opends_err_name(INT32_MAX), "UNKNOWN") == 0);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(200);
	t_path(path, sizeof path, T_HASH_NAME);
	t_write_pattern_file(path, T_HASH_SIZE, hashpat);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);

	names();

	/* before any open: with made-up object values */
	t_phase = "before open";
	closed_calls((opends_handle_t)(uintptr_t)0x100000001ull, (opends_stream_t)(uintptr_t)0x100000001ull,
		     (opends_batch_t)(uintptr_t)0x100000001ull, fd);
	CHECK_DETAIL();

	/* after close: with objects that were real while open */
	t_phase = "after close";
	t_driver_open();
	opends_handle_t fh = t_register(fd);
	opends_stream_t s;
	opends_batch_t b;
	OK(opends_stream_create(&s));
	OK(opends_batch_setup(&b, 4));
	OK(opends_driver_close());
	closed_calls(fh, s, b, fd);

	t_driver_open();
	fh = t_register(fd);
	null_pointers(fh);
	handles();
	buffers();
	io_arguments(fh);
	OK(opends_handle_deregister(fh));
	OK(opends_driver_close());
	close(fd);

	config();
	printf("errors OK\n");
	return 0;
}
