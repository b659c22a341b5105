/*
 * test_misuse: one row per misuse case of docs/errors.md, asserting the
 * exact code each call returns and, for failures reported by the call
 * itself, a non-empty opends_last_error_detail() (and, where the row says
 * so, that the detail names the argument or variable at fault).
 *
 * Each row runs on a fresh thread, so the detail it sees can only come from
 * the row's own calls (the detail is per thread and starts empty), and
 * after a fresh driver open with fresh handles (state OPEN), after a close
 * that left stale handles, batches and streams behind (state CLOSED), or
 * with the driver closed and the row opening it itself (state CONFIG).
 *
 *   test_misuse                 run every row against the backend named by
 *                               OPENDS_BACKEND (meson runs one per backend)
 *   test_misuse --markdown      print the table of docs/errors.md
 *   test_misuse --doc FILE      also check that FILE lists every row id
 *   test_misuse --only ID       run one row
 */
#include "rel.h"

#include <sys/socket.h>

enum state { OPEN, CLOSED, CONFIG };
enum kind {
	ERR,   /* a failure reported by this call: detail must be non-empty */
	LATER, /* a failure delivered later (await excepted), on another
		  thread: *bytes of a stream op, a batch event's ret */
	VALUE, /* a success value (0, bytes): positive controls */
};

#define NB (-1) /* backend_err not checked */

static struct {
	char path[PATH_MAX + 16], dir[PATH_MAX];
	int rw, ro, wo, dirfd, pipefd[2], sock[2], devnull, opath;
	uint8_t *mem;   /* 1 MiB, page-aligned */
	uint8_t *reg;   /* mem + 256 KiB, registered (REG bytes) in state OPEN */
	opends_handle_t h_rw, h_ro, h_wo; /* registered in state OPEN; stale in CLOSED */
	opends_stream_t stream;          /* created in OPEN; stale in CLOSED */
	opends_batch_t batch;            /* max_nr 4, set up in OPEN; stale in CLOSED */
} c;

#define FILE_SIZE (64 * 1024)
#define REG (64 * 1024)

static _Thread_local int row_be; /* backend_err of the row's last opends_error_t */

static long E(opends_error_t e)
{
	row_be = e.backend_err;
	return (long)e.err;
}

static opends_handle_t bogus_handle(void)
{
	return (opends_handle_t)(uintptr_t)0xdead0000beefull;
}

static opends_io_params_t entry(opends_handle_t fh, int opcode, void *buf, size_t size, off_t fo, off_t bo)
{
	opends_io_params_t p;
	memset(&p, 0, sizeof(p));
	p.mode = OPENDS_BATCH;
	p.fh = fh;
	p.opcode = (opends_opcode_t)opcode;
	p.u.batch.buf_base = buf;
	p.u.batch.size = size;
	p.u.batch.file_offset = fo;
	p.u.batch.buf_offset = bo;
	p.cookie = buf;
	return p;
}

/* Submit one entry to the row's own batch; the submit's code, or the event's
 * ret when the submit succeeded (*submitted tells which). */
static long batch_one(opends_io_params_t p, bool *submitted)
{
	opends_batch_t b;
	opends_error_t e = opends_batch_setup(&b, 4);
	if (e.err)
		return E(e);
	e = opends_batch_submit(b, 1, &p, 0);
	*submitted = e.err == OPENDS_SUCCESS;
	long r = E(e);
	if (*submitted) {
		opends_io_events_t ev;
		unsigned nr = 1;
		e = opends_batch_get_status(b, 1, &nr, &ev, NULL);
		if (e.err || nr != 1)
			R_FAIL("batch_get_status: %d, nr %u", (int)e.err, nr);
		r = ev.ret;
		if ((ev.ret < 0) != (ev.status == OPENDS_FAILED))
			R_FAIL("event status 0x%x does not match ret %zd", (unsigned)ev.status, ev.ret);
	}
	opends_batch_destroy(b);
	return r;
}

static long batch_submit_code(opends_io_params_t p)
{
	bool s;
	long r = batch_one(p, &s);
	return s ? 0 : r;
}

static long batch_event_ret(opends_io_params_t p)
{
	bool s;
	long r = batch_one(p, &s);
	return s ? r : 999999; /* a refused submit is not what the row expects */
}

static long stream_rw(int opcode, opends_handle_t fh, void *buf, size_t size, off_t fo, off_t bo)
{
	ssize_t res = 777;
	opends_error_t e = opcode == OPENDS_READ ? opends_stream_read(fh, buf, &size, &fo, &bo, &res, NULL)
						 : opends_stream_write(fh, buf, &size, &fo, &bo, &res, NULL);
	if (e.err)
		return 888888; /* the rows using this expect the submit to succeed */
	R_TRY(opends_stream_synchronize(NULL));
	return (long)res;
}

static long async_result(int opcode, opends_handle_t fh, void *buf, size_t size, off_t fo, off_t bo)
{
	opends_async_future_t f;
	opends_error_t e = opcode == OPENDS_READ ? opends_async_read(fh, buf, size, fo, bo, &f)
						 : opends_async_write(fh, buf, size, fo, bo, &f);
	if (e.err)
		return E(e);
	return (long)opends_async_await(&f);
}

/* Set one configuration variable, try to open, close again if it opened,
 * and restore the variable: the open's code. */
static long cfg_try(const char *name, const char *value)
{
	const char *old = getenv(name);
	char save[256] = "";
	bool had = old != NULL;
	if (had)
		snprintf(save, sizeof(save), "%s", old);
	setenv(name, value, 1);
	opends_error_t e = opends_driver_open();
	long r = E(e);
	if (e.err == OPENDS_SUCCESS) {
		opends_error_t e2 = opends_driver_close();
		if (e2.err)
			R_FAIL("close after open with %s=%s: %d", name, value, (int)e2.err);
	} else if (opends_driver_backend() != NULL) {
		R_FAIL("a failed open (%s=%s) left the driver open", name, value);
	}
	if (had)
		setenv(name, save, 1);
	else
		unsetenv(name);
	return r;
}

/* cfg_try with OPENDS_CUFILE_LIBRARY naming a library that does not exist:
 * the same answer on every machine (and over the CPU suite's stand-in). */
static long cfg_without_cufile(const char *name, const char *value)
{
	const char *old = getenv("OPENDS_CUFILE_LIBRARY");
	char save[4096] = "";
	bool had = old != NULL;
	if (had)
		snprintf(save, sizeof(save), "%s", old);
	setenv("OPENDS_CUFILE_LIBRARY", "/nonexistent/opends-test/libcufile.so.0", 1);
	long r = cfg_try(name, value);
	if (had)
		setenv("OPENDS_CUFILE_LIBRARY", save, 1);
	else
		unsetenv("OPENDS_CUFILE_LIBRARY");
	return r;
}

/* Open with name=value, run one read, close: the read's result. */
static long cfg_read(const char *name, const char *value, size_t size, off_t fo)
{
	setenv(name, value, 1);
	opends_error_t e = opends_driver_open();
	unsetenv(name);
	if (e.err)
		return 999999;
	opends_handle_t h;
	long r;
	e = opends_handle_register(&h, c.rw);
	if (e.err)
		r = 999998;
	else
		r = (long)opends_sync_read(h, c.mem, size, fo, 0);
	char keep[256];
	snprintf(keep, sizeof(keep), "%s", opends_last_error_detail());
	opends_driver_close();
	if (r < 0 && !keep[0])
		R_FAIL("no detail after the read failed");
	return r;
}

static bool have_gpu(void)
{
	return access("/dev/nvidiactl", F_OK) == 0;
}

/*
 * The rows: X(id, state, kind, expected, alternative (0 = none), expected
 * backend_err (NB = unchecked), word the detail must contain ("" = any),
 * description for the docs, body...). The body returns the call's code:
 * .err for opends_error_t calls (through E()), the ssize_t itself for
 * byte-count calls (negated errors).
 */
#define ROWS(X)                                                                                                    \
	/* ---- driver state ---- */                                                                              \
	X(D01, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_driver_close() before any open", {    \
		return E(opends_driver_close());                                                                   \
	})                                                                                                         \
	X(D02, OPEN, ERR, OPENDS_DRIVER_ALREADY_OPEN, 0, NB, "", "opends_driver_open() while open (double open)",  \
	  { return E(opends_driver_open()); })                                                                     \
	X(D03, OPEN, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_driver_close() twice (double close)", { \
		if (opends_driver_close().err)                                                                     \
			return -1;                                                                                 \
		return E(opends_driver_close());                                                                   \
	})                                                                                                         \
	X(D04, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "props", "opends_driver_get_properties(NULL)",              \
	  { return E(opends_driver_get_properties(NULL)); })                                                       \
	X(D05, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_driver_get_properties() after close", { \
		opends_drv_props_t p;                                                                              \
		return E(opends_driver_get_properties(&p));                                                        \
	})                                                                                                         \
	X(D06, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_handle_register() after close", {    \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, c.rw));                                                        \
	})                                                                                                         \
	X(D07, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "",                                              \
	  "opends_handle_deregister(handle of the closed session)", { return E(opends_handle_deregister(c.h_rw)); }) \
	X(D08, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_buf_register() after close",         \
	  { return E(opends_buf_register(c.mem, 4096, 0)); })                                                      \
	X(D09, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_buf_deregister() after close",       \
	  { return E(opends_buf_deregister(c.reg)); })                                                             \
	X(D10, CLOSED, ERR, -OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_sync_read() after close",           \
	  { return opends_sync_read(c.h_rw, c.mem, 4096, 0, 0); })                                                 \
	X(D11, CLOSED, ERR, -OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_sync_write() after close",          \
	  { return opends_sync_write(c.h_rw, c.mem, 4096, 0, 0); })                                                \
	X(D12, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_async_read() after close", {         \
		opends_async_future_t f;                                                                           \
		return E(opends_async_read(c.h_rw, c.mem, 4096, 0, 0, &f));                                        \
	})                                                                                                         \
	X(D13, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_async_write() after close", {        \
		opends_async_future_t f;                                                                           \
		return E(opends_async_write(c.h_rw, c.mem, 4096, 0, 0, &f));                                       \
	})                                                                                                         \
	X(D14, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_create() after close", {      \
		opends_stream_t s;                                                                                 \
		return E(opends_stream_create(&s));                                                                \
	})                                                                                                         \
	X(D15, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_read() after close", {        \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r = 777;                                                                                   \
		long code = E(opends_stream_read(c.h_rw, c.mem, &n, &fo, &bo, &r, c.stream));                      \
		return r == 777 ? code : -1;                                                                       \
	})                                                                                                         \
	X(D16, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_write() on the default stream after close", { \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r = 777;                                                                                   \
		long code = E(opends_stream_write(c.h_rw, c.mem, &n, &fo, &bo, &r, NULL));                         \
		return r == 777 ? code : -1;                                                                       \
	})                                                                                                         \
	X(D17, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_synchronize(NULL) after close", \
	  { return E(opends_stream_synchronize(NULL)); })                                                          \
	X(D18, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_register() after close",      \
	  { return E(opends_stream_register(c.stream, 0)); })                                                      \
	X(D19, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_deregister() after close",    \
	  { return E(opends_stream_deregister(NULL)); })                                                           \
	X(D20, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_destroy() after close",       \
	  { return E(opends_stream_destroy(c.stream)); })                                                          \
	X(D21, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_batch_setup() after close", {        \
		opends_batch_t b;                                                                                  \
		return E(opends_batch_setup(&b, 4));                                                               \
	})                                                                                                         \
	X(D22, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_batch_submit() after close", {       \
		opends_io_params_t p = entry(c.h_rw, OPENDS_READ, c.mem, 4096, 0, 0);                              \
		return E(opends_batch_submit(c.batch, 1, &p, 0));                                                  \
	})                                                                                                         \
	X(D23, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_batch_get_status() after close", {   \
		unsigned nr = 1;                                                                                   \
		opends_io_events_t ev;                                                                             \
		return E(opends_batch_get_status(c.batch, 0, &nr, &ev, NULL));                                     \
	})                                                                                                         \
	X(D24, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_batch_cancel() after close",         \
	  { return E(opends_batch_cancel(c.batch)); })                                                             \
	X(D25, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_batch_destroy() after close",        \
	  { return E(opends_batch_destroy(c.batch)); })                                                            \
	X(D26, CLOSED, VALUE, 0, 0, NB, "", "opends_driver_backend() after close is NULL (0 here means NULL)",     \
	  { return opends_driver_backend() == NULL ? 0 : 1; })                                                     \
	X(D27, CLOSED, VALUE, 0, 0, NB, "", "opends_get_version(NULL, NULL, NULL) with the driver closed",         \
	  { return E(opends_get_version(NULL, NULL, NULL)); })                                                     \
	/* ---- file handles ---- */                                                                              \
	X(H01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_handle_register(NULL, fd)",                   \
	  { return E(opends_handle_register(NULL, c.rw)); })                                                       \
	X(H02, OPEN, ERR, OPENDS_INVALID_VALUE, 0, EBADF, "fd", "opends_handle_register(&fh, -1)", {              \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, -1));                                                          \
	})                                                                                                         \
	X(H03, OPEN, ERR, OPENDS_INVALID_VALUE, 0, EBADF, "fd", "opends_handle_register() of a closed fd", {       \
		opends_handle_t h;                                                                                 \
		int fd = dup(c.rw);                                                                                \
		close(fd);                                                                                         \
		return E(opends_handle_register(&h, fd));                                                          \
	})                                                                                                         \
	X(H04, OPEN, ERR, OPENDS_INVALID_FILE_TYPE, 0, NB, "", "opends_handle_register() of a directory", {       \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, c.dirfd));                                                     \
	})                                                                                                         \
	X(H05, OPEN, ERR, OPENDS_INVALID_FILE_TYPE, 0, NB, "", "opends_handle_register() of a pipe", {            \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, c.pipefd[0]));                                                 \
	})                                                                                                         \
	X(H06, OPEN, ERR, OPENDS_INVALID_FILE_TYPE, 0, NB, "", "opends_handle_register() of a socket", {          \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, c.sock[0]));                                                   \
	})                                                                                                         \
	X(H07, OPEN, ERR, OPENDS_INVALID_FILE_TYPE, 0, NB, "", "opends_handle_register() of /dev/null (char device)", { \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, c.devnull));                                                   \
	})                                                                                                         \
	X(H08, OPEN, ERR, OPENDS_INVALID_FILE_OPEN_FLAG, 0, NB, "",                                                \
	  "opends_handle_register() of an O_PATH fd of a regular file (not in the header's list)", {              \
		  opends_handle_t h;                                                                               \
		  return E(opends_handle_register(&h, c.opath));                                                   \
	  })                                                                                                       \
	X(H09, OPEN, ERR, OPENDS_HANDLE_ALREADY_REGISTERED, 0, NB, "", "opends_handle_register() of an fd already registered", { \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, c.rw));                                                        \
	})                                                                                                         \
	X(H10, OPEN, VALUE, 0, 0, NB, "", "opends_handle_register() of a dup() of a registered fd (another fd: allowed)", { \
		opends_handle_t h;                                                                                 \
		int fd = dup(c.rw);                                                                                \
		long r = E(opends_handle_register(&h, fd));                                                        \
		if (!r)                                                                                            \
			r = E(opends_handle_deregister(h));                                                        \
		close(fd);                                                                                         \
		return r;                                                                                          \
	})                                                                                                         \
	X(H11, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_handle_deregister(NULL)",                     \
	  { return E(opends_handle_deregister(NULL)); })                                                           \
	X(H12, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "", "opends_handle_deregister() of a made-up handle", \
	  { return E(opends_handle_deregister(bogus_handle())); })                                                 \
	X(H13, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "", "opends_handle_deregister() twice", {           \
		if (opends_handle_deregister(c.h_rw).err)                                                          \
			return -1;                                                                                 \
		return E(opends_handle_deregister(c.h_rw));                                                        \
	})                                                                                                         \
	X(H14, OPEN, ERR, -OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh",                                              \
	  "opends_sync_read() through a deregistered handle (its slot reused by a new handle)", {                  \
		  opends_handle_t h2;                                                                              \
		  if (opends_handle_deregister(c.h_rw).err || opends_handle_deregister(c.h_ro).err ||              \
		      opends_handle_register(&h2, c.ro).err)                                                       \
			  return -1;                                                                               \
		  return opends_sync_read(c.h_rw, c.mem, 4096, 0, 0);                                              \
	  })                                                                                                       \
	X(H15, OPEN, ERR, -OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh", "opends_sync_write() through a made-up handle", \
	  { return opends_sync_write(bogus_handle(), c.mem, 4096, 0, 0); })                                        \
	X(H16, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_sync_read(NULL handle)",                     \
	  { return opends_sync_read(NULL, c.mem, 4096, 0, 0); })                                                   \
	X(H17, OPEN, ERR, -OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh",                                              \
	  "handle released by opends_driver_close, used after a reopen in which another fd was registered", {    \
		  opends_handle_t old = c.h_rw, h2;                                                                \
		  if (opends_driver_close().err || opends_driver_open().err ||                                     \
		      opends_handle_register(&h2, c.ro).err)                                                       \
			  return -1;                                                                               \
		  return opends_sync_read(old, c.mem, 4096, 0, 0);                                                 \
	  })                                                                                                       \
	X(H18, OPEN, VALUE, 0, 0, NB, "", "an fd deregistered can be registered again", {                          \
		opends_handle_t h;                                                                                 \
		if (opends_handle_deregister(c.h_rw).err)                                                          \
			return -1;                                                                                 \
		return E(opends_handle_register(&h, c.rw));                                                        \
	})                                                                                                         \
	/* issue 15 item 3: writes through O_APPEND would land at EOF, not at file_offset */                      \
	X(H19, OPEN, ERR, OPENDS_INVALID_FILE_OPEN_FLAG, 0, NB, "O_APPEND",                                        \
	  "opends_handle_register() of an O_WRONLY O_APPEND fd (writes would land at EOF)", {                      \
		  opends_handle_t h;                                                                               \
		  return E(opends_handle_register(&h, open(c.path, O_WRONLY | O_APPEND)));                         \
	  })                                                                                                       \
	X(H20, OPEN, ERR, OPENDS_INVALID_FILE_OPEN_FLAG, 0, NB, "O_APPEND",                                        \
	  "opends_handle_register() of an O_RDWR O_APPEND O_DIRECT fd", {                                         \
		  opends_handle_t h;                                                                               \
		  return E(opends_handle_register(&h, open(c.path, O_RDWR | O_APPEND | O_DIRECT)));                \
	  })                                                                                                       \
	X(H21, OPEN, VALUE, 0, 0, NB, "", "opends_handle_register() of an O_RDONLY O_APPEND fd (cannot write: allowed)", { \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, open(c.path, O_RDONLY | O_APPEND)));                           \
	})                                                                                                         \
	/* ---- registered buffers ---- */                                                                        \
	X(B01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_buf_register(NULL, 4096, 0)",                \
	  { return E(opends_buf_register(NULL, 4096, 0)); })                                                       \
	X(B02, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "size", "opends_buf_register(buf, 0, 0) (zero size)",        \
	  { return E(opends_buf_register(c.mem, 0, 0)); })                                                         \
	X(B03, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "flags", "opends_buf_register(buf, 4096, 1) (flags != 0)",  \
	  { return E(opends_buf_register(c.mem, 4096, 1)); })                                                      \
	X(B04, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_buf_register() of a range that wraps the address space", \
	  { return E(opends_buf_register((void *)(UINTPTR_MAX - 4095), 8192, 0)); })                               \
	X(B05, OPEN, ERR, OPENDS_MEMORY_ALREADY_REGISTERED, 0, NB, "", "opends_buf_register() of a registered range again", \
	  { return E(opends_buf_register(c.reg, REG, 0)); })                                                       \
	X(B06, OPEN, ERR, OPENDS_MEMORY_ALREADY_REGISTERED, 0, NB, "", "overlapping registration: starts inside a registered range", \
	  { return E(opends_buf_register(c.reg + REG - 4096, 8192, 0)); })                                         \
	X(B07, OPEN, ERR, OPENDS_MEMORY_ALREADY_REGISTERED, 0, NB, "", "overlapping registration: ends inside a registered range", \
	  { return E(opends_buf_register(c.reg - 4096, 8192, 0)); })                                               \
	X(B08, OPEN, ERR, OPENDS_MEMORY_ALREADY_REGISTERED, 0, NB, "", "overlapping registration: contains a registered range", \
	  { return E(opends_buf_register(c.reg - 4096, REG + 8192, 0)); })                                         \
	X(B09, OPEN, VALUE, 0, 0, NB, "", "registration adjacent to a registered range (no overlap: allowed)", {  \
		long r = E(opends_buf_register(c.reg + REG, 4096, 0));                                             \
		long r2 = E(opends_buf_register(c.reg - 1, 1, 0));                                                 \
		return r ? r : r2;                                                                                 \
	})                                                                                                         \
	X(B10, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_buf_deregister(NULL)",                       \
	  { return E(opends_buf_deregister(NULL)); })                                                              \
	X(B11, OPEN, ERR, OPENDS_MEMORY_NOT_REGISTERED, 0, NB, "", "opends_buf_deregister() of memory never registered", \
	  { return E(opends_buf_deregister(c.mem)); })                                                             \
	X(B12, OPEN, ERR, OPENDS_MEMORY_NOT_REGISTERED, 0, NB, "", "opends_buf_deregister() of a pointer inside a range (not its base)", \
	  { return E(opends_buf_deregister(c.reg + 4096)); })                                                      \
	X(B13, OPEN, ERR, OPENDS_MEMORY_NOT_REGISTERED, 0, NB, "", "opends_buf_deregister() twice", {              \
		if (opends_buf_deregister(c.reg).err)                                                              \
			return -1;                                                                                 \
		return E(opends_buf_deregister(c.reg));                                                            \
	})                                                                                                         \
	X(B14, OPEN, ERR, -OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "opends_sync_read(): buf_offset + size runs past the registered range", \
	  { return opends_sync_read(c.h_rw, c.reg, 4096, 0, REG - 100); })                                         \
	X(B15, OPEN, ERR, -OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "opends_sync_read(): target starts inside a registered range, ends past it", \
	  { return opends_sync_read(c.h_rw, c.reg + 100, REG, 0, 0); })                                            \
	X(B16, OPEN, ERR, -OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "opends_sync_write() from past the end of a registered range", \
	  { return opends_sync_write(c.h_rw, c.reg, 8192, 0, REG - 4096); })                                       \
	X(B17, OPEN, ERR, OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "opends_async_read() past a registered range (refused at submit)", { \
		opends_async_future_t f;                                                                           \
		return E(opends_async_read(c.h_rw, c.reg, 8192, 0, REG - 4096, &f));                               \
	})                                                                                                         \
	X(B18, OPEN, ERR, OPENDS_INVALID_MAPPING_RANGE, 0, NB, "params[0]", "batch entry past a registered range (refused at submit)", \
	  { return batch_submit_code(entry(c.h_rw, OPENDS_READ, c.reg, 8192, 0, REG - 4096)); })                   \
	X(B19, OPEN, LATER, -OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "stream read past a registered range (*bytes_read)", \
	  { return stream_rw(OPENDS_READ, c.h_rw, c.reg, 8192, 0, REG - 4096); })                                  \
	X(B20, OPEN, VALUE, 4096, 0, NB, "", "read that ends exactly at the end of a registered range",            \
	  { return opends_sync_read(c.h_rw, c.reg, 4096, 0, REG - 4096); })                                        \
	X(B21, OPEN, VALUE, 8192, 0, NB, "", "read into memory once registered, after deregistration, past the old end", { \
		if (opends_buf_deregister(c.reg).err)                                                              \
			return -1;                                                                                 \
		return opends_sync_read(c.h_rw, c.reg, 8192, 0, REG - 4096);                                       \
	})                                                                                                         \
	X(B22, OPEN, VALUE, 4096, 0, NB, "",                                                                       \
	  "buf in one registered range, buf + buf_offset inside another, target within it (allowed)", {           \
		  if (opends_buf_register(c.reg + REG, REG, 0).err)                                                \
			  return -1;                                                                               \
		  return opends_sync_read(c.h_rw, c.reg, 4096, 0, REG + 4096);                                     \
	  })                                                                                                       \
	/* ---- sizes and offsets ---- */                                                                         \
	X(S01, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "file_offset", "opends_sync_read(): negative file_offset", \
	  { return opends_sync_read(c.h_rw, c.mem, 4096, -1, 0); })                                                \
	X(S02, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "buf_offset", "opends_sync_write(): negative buf_offset",  \
	  { return opends_sync_write(c.h_rw, c.mem, 4096, 0, -4096); })                                            \
	X(S03, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "size", "opends_sync_read(): size SSIZE_MAX + 1",          \
	  { return opends_sync_read(c.h_rw, c.mem, (size_t)SSIZE_MAX + 1, 0, 0); })                                \
	X(S04, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "", "opends_sync_read(): file_offset + size past the largest off_t", \
	  { return opends_sync_read(c.h_rw, c.mem, 100, INT64_MAX - 10, 0); })                                     \
	X(S05, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "", "opends_sync_write(): file_offset = largest off_t, size 1", \
	  { return opends_sync_write(c.h_rw, c.mem, 1, INT64_MAX, 0); })                                           \
	X(S06, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_sync_read(buf NULL)",                       \
	  { return opends_sync_read(c.h_rw, NULL, 4096, 0, 0); })                                                  \
	X(S07, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_sync_write(buf NULL)",                      \
	  { return opends_sync_write(c.h_rw, NULL, 4096, 0, 0); })                                                 \
	X(S08, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "", "opends_sync_read(): buf + buf_offset + size wraps the address space", \
	  { return opends_sync_read(c.h_rw, (void *)(UINTPTR_MAX - 100), 100, 0, 50); })                           \
	X(S09, OPEN, VALUE, 0, 0, NB, "", "opends_sync_read(): size 0 returns 0",                                  \
	  { return opends_sync_read(c.h_rw, c.mem, 0, 0, 0); })                                                    \
	X(S10, OPEN, VALUE, 0, 0, NB, "", "opends_sync_write(): size 0 returns 0",                                 \
	  { return opends_sync_write(c.h_rw, c.mem, 0, 0, 0); })                                                   \
	X(S11, OPEN, VALUE, 0, 0, NB, "", "opends_async_read(): size 0 completes with 0",                          \
	  { return async_result(OPENDS_READ, c.h_rw, c.mem, 0, 0, 0); })                                           \
	X(S12, OPEN, VALUE, 100, 0, NB, "", "opends_sync_read(): huge size (largest off_t - file_offset), 100 bytes before EOF, returns 100", \
	  { return opends_sync_read(c.h_rw, c.mem, (size_t)(INT64_MAX - (FILE_SIZE - 100)), FILE_SIZE - 100, 0); })                      \
	X(S13, OPEN, VALUE, 0, 0, NB, "", "opends_sync_read() at EOF returns 0",                                   \
	  { return opends_sync_read(c.h_rw, c.mem, 4096, FILE_SIZE, 0); })                                         \
	X(S14, OPEN, VALUE, 0, 0, NB, "", "opends_sync_read() 1 byte at the largest off_t - 1 returns 0 (past EOF)", \
	  { return opends_sync_read(c.h_rw, c.mem, 1, INT64_MAX - 1, 0); })                                        \
	X(S15, OPEN, ERR, -EFBIG, 0, NB, "", "opends_sync_write() of 1 byte ending at the largest off_t (-EFBIG from the OS)", \
	  { return opends_sync_write(c.h_rw, c.mem, 1, INT64_MAX - 1, 0); })                                       \
	X(S16, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "file_offset", "opends_async_write(): negative file_offset (refused at submit)", { \
		opends_async_future_t f;                                                                           \
		return E(opends_async_write(c.h_rw, c.mem, 4096, -5, 0, &f));                                      \
	})                                                                                                         \
	X(S17, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "size", "batch entry with size SSIZE_MAX + 1",              \
	  { return batch_submit_code(entry(c.h_rw, OPENDS_READ, c.mem, (size_t)SSIZE_MAX + 1, 0, 0)); })           \
	X(S18, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "batch entry with file_offset + size past the largest off_t", \
	  { return batch_submit_code(entry(c.h_rw, OPENDS_WRITE, c.mem, 4096, INT64_MAX - 100, 0)); })             \
	/* ---- direction of the fd ---- */                                                                       \
	X(R01, OPEN, ERR, -EBADF, 0, NB, "", "opends_sync_write() through a read-only fd",                         \
	  { return opends_sync_write(c.h_ro, c.mem, 4096, 0, 0); })                                                \
	X(R02, OPEN, ERR, -EBADF, 0, NB, "", "opends_sync_read() through a write-only fd",                         \
	  { return opends_sync_read(c.h_wo, c.mem, 4096, 0, 0); })                                                 \
	X(R03, OPEN, ERR, -EBADF, 0, NB, "", "opends_async_write() through a read-only fd (submit ok, await -EBADF)", \
	  { return async_result(OPENDS_WRITE, c.h_ro, c.mem, 4096, 0, 0); })                                       \
	X(R04, OPEN, ERR, -EBADF, 0, NB, "", "opends_async_read() through a write-only fd (await -EBADF)",         \
	  { return async_result(OPENDS_READ, c.h_wo, c.mem, 4096, 0, 0); })                                        \
	X(R05, OPEN, LATER, -EBADF, 0, NB, "", "batch write through a read-only fd (event OPENDS_FAILED, ret -EBADF)", \
	  { return batch_event_ret(entry(c.h_ro, OPENDS_WRITE, c.mem, 4096, 0, 0)); })                             \
	X(R06, OPEN, LATER, -EBADF, 0, NB, "", "stream write through a read-only fd (*bytes_written -EBADF)",      \
	  { return stream_rw(OPENDS_WRITE, c.h_ro, c.mem, 4096, 0, 0); })                                          \
	X(R07, OPEN, LATER, -EBADF, 0, NB, "", "stream read through a write-only fd (*bytes_read -EBADF)",         \
	  { return stream_rw(OPENDS_READ, c.h_wo, c.mem, 4096, 0, 0); })                                           \
	/* ---- futures ---- */                                                                                   \
	X(A01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_read(future NULL)",                 \
	  { return E(opends_async_read(c.h_rw, c.mem, 4096, 0, 0, NULL)); })                                       \
	X(A02, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_write(future NULL)",                \
	  { return E(opends_async_write(c.h_rw, c.mem, 4096, 0, 0, NULL)); })                                      \
	X(A03, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_await(NULL)",                      \
	  { return opends_async_await(NULL); })                                                                    \
	X(A04, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_await() of a never-submitted (zeroed) future", { \
		opends_async_future_t f;                                                                           \
		memset(&f, 0, sizeof(f));                                                                          \
		return opends_async_await(&f);                                                                     \
	})                                                                                                         \
	X(A05, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_poll(NULL)",                       \
	  { return opends_async_poll(NULL); })                                                                     \
	X(A06, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_poll() of a zeroed future", {      \
		opends_async_future_t f;                                                                           \
		memset(&f, 0, sizeof(f));                                                                          \
		return opends_async_poll(&f);                                                                      \
	})                                                                                                         \
	X(A07, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh", "opends_async_read() through a made-up handle", { \
		opends_async_future_t f;                                                                           \
		return E(opends_async_read(bogus_handle(), c.mem, 4096, 0, 0, &f));                                \
	})                                                                                                         \
	X(A08, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_async_write(buf NULL)", {                   \
		opends_async_future_t f;                                                                           \
		return E(opends_async_write(c.h_rw, NULL, 4096, 0, 0, &f));                                        \
	})                                                                                                         \
	X(A09, OPEN, VALUE, 4096, 0, NB, "", "opends_async_await() twice returns the same result", {              \
		opends_async_future_t f;                                                                           \
		if (opends_async_read(c.h_rw, c.mem, 4096, 0, 0, &f).err)                                          \
			return -1;                                                                                 \
		ssize_t a = opends_async_await(&f), b = opends_async_await(&f);                                    \
		return a == b && opends_async_poll(&f) == 1 ? (long)a : -2;                                        \
	})                                                                                                         \
	/* ---- streams ---- */                                                                                   \
	X(T01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "stream", "opends_stream_create(NULL)",                     \
	  { return E(opends_stream_create(NULL)); })                                                               \
	X(T02, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_destroy(NULL) (not made by stream_create)", \
	  { return E(opends_stream_destroy(NULL)); })                                                              \
	X(T03, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_destroy() of a made-up stream",          \
	  { return E(opends_stream_destroy((opends_stream_t)(uintptr_t)0x1234567)); })                             \
	X(T04, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_destroy() twice", {                      \
		if (opends_stream_destroy(c.stream).err)                                                           \
			return -1;                                                                                 \
		return E(opends_stream_destroy(c.stream));                                                         \
	})                                                                                                         \
	X(T05, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "flag", "opends_stream_register() with an unknown flag bit (0x10)", \
	  { return E(opends_stream_register(c.stream, 0x10)); })                                                   \
	X(T06, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_register() of a made-up stream",         \
	  { return E(opends_stream_register((opends_stream_t)(uintptr_t)0x1234567, 0)); })                         \
	X(T07, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_deregister() of a stream never registered", \
	  { return E(opends_stream_deregister(c.stream)); })                                                       \
	X(T08, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "size", "opends_stream_read(size NULL)", {                  \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(c.h_rw, c.mem, NULL, &fo, &bo, &r, c.stream));                         \
	})                                                                                                         \
	X(T09, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "file_offset", "opends_stream_read(file_offset NULL)", {    \
		size_t n = 4096;                                                                                   \
		off_t bo = 0;                                                                                      \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(c.h_rw, c.mem, &n, NULL, &bo, &r, c.stream));                          \
	})                                                                                                         \
	X(T10, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf_offset", "opends_stream_read(buf_offset NULL)", {      \
		size_t n = 4096;                                                                                   \
		off_t fo = 0;                                                                                      \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(c.h_rw, c.mem, &n, &fo, NULL, &r, c.stream));                          \
	})                                                                                                         \
	X(T11, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "bytes_read", "opends_stream_read(bytes_read NULL)", {      \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		return E(opends_stream_read(c.h_rw, c.mem, &n, &fo, &bo, NULL, c.stream));                         \
	})                                                                                                         \
	X(T12, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_stream_read(buf NULL)", {                    \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(c.h_rw, NULL, &n, &fo, &bo, &r, c.stream));                            \
	})                                                                                                         \
	X(T13, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_stream_write(fh NULL)", {                     \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		return E(opends_stream_write(NULL, c.mem, &n, &fo, &bo, &r, c.stream));                            \
	})                                                                                                         \
	X(T14, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "bytes_written", "opends_stream_write(bytes_written NULL)", { \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		return E(opends_stream_write(c.h_rw, c.mem, &n, &fo, &bo, NULL, NULL));                            \
	})                                                                                                         \
	X(T15, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh", "opends_stream_read() through a made-up handle", { \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(bogus_handle(), c.mem, &n, &fo, &bo, &r, c.stream));                   \
	})                                                                                                         \
	X(T16, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "stream", "opends_stream_read() on a made-up stream", {     \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(c.h_rw, c.mem, &n, &fo, &bo, &r, (opends_stream_t)(uintptr_t)0x1234567)); \
	})                                                                                                         \
	X(T17, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "stream", "opends_stream_write() on a destroyed stream", {  \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		if (opends_stream_destroy(c.stream).err)                                                           \
			return -1;                                                                                 \
		return E(opends_stream_write(c.h_rw, c.mem, &n, &fo, &bo, &r, c.stream));                          \
	})                                                                                                         \
	X(T18, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_synchronize() of a made-up stream",      \
	  { return E(opends_stream_synchronize((opends_stream_t)(uintptr_t)0x1234567)); })                         \
	X(T19, OPEN, LATER, -OPENDS_INVALID_VALUE, 0, NB, "", "stream read with *file_offset negative (submit ok, *bytes_read)", \
	  { return stream_rw(OPENDS_READ, c.h_rw, c.mem, 4096, -4096, 0); })                                       \
	X(T20, OPEN, LATER, -OPENDS_INVALID_VALUE, 0, NB, "", "stream write with *size SSIZE_MAX + 1 (*bytes_written)", \
	  { return stream_rw(OPENDS_WRITE, c.h_rw, c.mem, (size_t)SSIZE_MAX + 1, 0, 0); })                         \
	X(T21, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh", "opends_stream_read() through a deregistered handle", { \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r = 777;                                                                                   \
		if (opends_handle_deregister(c.h_rw).err)                                                          \
			return -1;                                                                                 \
		long code = E(opends_stream_read(c.h_rw, c.mem, &n, &fo, &bo, &r, c.stream));                      \
		return r == 777 ? code : -2;                                                                       \
	})                                                                                                         \
	/* ---- batches ---- */                                                                                   \
	X(X01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_setup(NULL, 4)",                     \
	  { return E(opends_batch_setup(NULL, 4)); })                                                              \
	X(X02, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "max_nr", "opends_batch_setup(&b, 0)", {                    \
		opends_batch_t b;                                                                                  \
		return E(opends_batch_setup(&b, 0));                                                               \
	})                                                                                                         \
	X(X03, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "max_nr", "opends_batch_setup(): max_nr = max_batch_io_size + 1", { \
		opends_batch_t b;                                                                                  \
		opends_drv_props_t p;                                                                              \
		if (opends_driver_get_properties(&p).err)                                                          \
			return -1;                                                                                 \
		return E(opends_batch_setup(&b, p.max_batch_io_size + 1));                                         \
	})                                                                                                         \
	X(X04, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_submit() to a made-up batch", {      \
		opends_io_params_t p = entry(c.h_rw, OPENDS_READ, c.mem, 4096, 0, 0);                              \
		return E(opends_batch_submit((opends_batch_t)(uintptr_t)0x7777, 1, &p, 0));                        \
	})                                                                                                         \
	X(X05, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "params", "opends_batch_submit(params NULL)",               \
	  { return E(opends_batch_submit(c.batch, 1, NULL, 0)); })                                                 \
	X(X06, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "nr", "opends_batch_submit(nr 0)", {                        \
		opends_io_params_t p = entry(c.h_rw, OPENDS_READ, c.mem, 4096, 0, 0);                              \
		return E(opends_batch_submit(c.batch, 0, &p, 0));                                                  \
	})                                                                                                         \
	X(X07, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "flags", "opends_batch_submit(flags 1)", {                  \
		opends_io_params_t p = entry(c.h_rw, OPENDS_READ, c.mem, 4096, 0, 0);                              \
		return E(opends_batch_submit(c.batch, 1, &p, 1));                                                  \
	})                                                                                                         \
	X(X08, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "params[0]", "batch entry with a bad mode (0)", {           \
		opends_io_params_t p = entry(c.h_rw, OPENDS_READ, c.mem, 4096, 0, 0);                              \
		p.mode = (opends_batch_mode_t)0;                                                                   \
		return batch_submit_code(p);                                                                       \
	})                                                                                                         \
	X(X09, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "params[0]", "batch entry with a bad opcode (7)",           \
	  { return batch_submit_code(entry(c.h_rw, 7, c.mem, 4096, 0, 0)); })                                      \
	X(X10, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "batch entry with buf_base NULL",                    \
	  { return batch_submit_code(entry(c.h_rw, OPENDS_READ, NULL, 4096, 0, 0)); })                             \
	X(X11, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "file_offset", "batch entry with a negative file_offset",   \
	  { return batch_submit_code(entry(c.h_rw, OPENDS_READ, c.mem, 4096, -1, 0)); })                           \
	X(X12, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf_offset", "batch entry with a negative buf_offset",     \
	  { return batch_submit_code(entry(c.h_rw, OPENDS_WRITE, c.mem, 4096, 0, -1)); })                          \
	X(X13, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "params[0]", "batch entry through a made-up handle", \
	  { return batch_submit_code(entry(bogus_handle(), OPENDS_READ, c.mem, 4096, 0, 0)); })                    \
	X(X14, OPEN, ERR, OPENDS_BATCH_FULL, 0, NB, "", "opends_batch_submit(): nr 5 > max_nr 4", {                \
		opends_io_params_t p[5];                                                                           \
		for (int i = 0; i < 5; i++)                                                                        \
			p[i] = entry(c.h_rw, OPENDS_READ, c.mem + i * 4096, 4096, 0, 0);                           \
		return E(opends_batch_submit(c.batch, 5, p, 0));                                                   \
	})                                                                                                         \
	X(X15, OPEN, ERR, OPENDS_BATCH_FULL, 0, NB, "", "opends_batch_submit(): 3 in flight + 2 > max_nr 4", {     \
		opends_io_params_t p[3];                                                                           \
		for (int i = 0; i < 3; i++)                                                                        \
			p[i] = entry(c.h_rw, OPENDS_READ, c.mem + i * 4096, 4096, 0, 0);                           \
		if (opends_batch_submit(c.batch, 3, p, 0).err)                                                     \
			return -1;                                                                                 \
		long r = E(opends_batch_submit(c.batch, 2, p, 0));                                                 \
		char keep[256];                                                                                    \
		snprintf(keep, sizeof(keep), "%s", opends_last_error_detail());                                    \
		opends_io_events_t ev[3];                                                                          \
		unsigned nr = 3;                                                                                   \
		R_TRY(opends_batch_get_status(c.batch, 3, &nr, ev, NULL));                                          \
		(void)keep;                                                                                        \
		return nr == 3 ? r : -2;                                                                           \
	})                                                                                                         \
	X(X16, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "nr", "opends_batch_get_status(nr NULL)", {                 \
		opends_io_events_t ev;                                                                             \
		return E(opends_batch_get_status(c.batch, 0, NULL, &ev, NULL));                                    \
	})                                                                                                         \
	X(X17, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "events", "opends_batch_get_status(events NULL, *nr 1)", {  \
		unsigned nr = 1;                                                                                   \
		return E(opends_batch_get_status(c.batch, 0, &nr, NULL, NULL));                                    \
	})                                                                                                         \
	X(X18, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "timeout", "opends_batch_get_status(): negative timeout", { \
		unsigned nr = 1;                                                                                   \
		opends_io_events_t ev;                                                                             \
		struct timespec ts = { -1, 0 };                                                                    \
		return E(opends_batch_get_status(c.batch, 0, &nr, &ev, &ts));                                      \
	})                                                                                                         \
	X(X19, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "timeout", "opends_batch_get_status(): timeout tv_nsec = 1e9", { \
		unsigned nr = 1;                                                                                   \
		opends_io_events_t ev;                                                                             \
		struct timespec ts = { 0, 1000000000L };                                                           \
		return E(opends_batch_get_status(c.batch, 0, &nr, &ev, &ts));                                      \
	})                                                                                                         \
	X(X20, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_get_status() of a made-up batch", {  \
		unsigned nr = 1;                                                                                   \
		opends_io_events_t ev;                                                                             \
		return E(opends_batch_get_status((opends_batch_t)(uintptr_t)0x7777, 0, &nr, &ev, NULL));           \
	})                                                                                                         \
	X(X21, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_destroy() twice", {                  \
		if (opends_batch_destroy(c.batch).err)                                                             \
			return -1;                                                                                 \
		return E(opends_batch_destroy(c.batch));                                                           \
	})                                                                                                         \
	X(X22, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_cancel() of a made-up batch",        \
	  { return E(opends_batch_cancel((opends_batch_t)(uintptr_t)0x7777)); })                                   \
	X(X23, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_submit() to a destroyed batch", {    \
		opends_io_params_t p = entry(c.h_rw, OPENDS_READ, c.mem, 4096, 0, 0);                              \
		if (opends_batch_destroy(c.batch).err)                                                             \
			return -1;                                                                                 \
		return E(opends_batch_submit(c.batch, 1, &p, 0));                                                  \
	})                                                                                                         \
	X(X24, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "params[1]",                                                \
	  "second entry invalid: all or nothing (the valid first write must not happen)", {                       \
		  uint8_t *src = c.mem + 8192;                                                                     \
		  memset(src, 0x5a, 4096);                                                                         \
		  opends_io_params_t p[2] = { entry(c.h_rw, OPENDS_WRITE, src, 4096, 3 * 4096, 0),                 \
					      entry(c.h_rw, OPENDS_READ, c.mem, 4096, -7, 0) };                    \
		  long r = E(opends_batch_submit(c.batch, 2, p, 0));                                               \
		  char keep[256];                                                                                  \
		  snprintf(keep, sizeof(keep), "%s", opends_last_error_detail());                                  \
		  unsigned nr = 2;                                                                                 \
		  opends_io_events_t ev[2];                                                                        \
		  struct timespec ts = { 0, 20 * 1000 * 1000 };                                                    \
		  R_TRY(opends_batch_get_status(c.batch, 2, &nr, ev, &ts));                                         \
		  uint8_t chk[4096];                                                                               \
		  if (pread(c.rw, chk, 4096, 3 * 4096) != 4096 || r_first_bad(chk, 4096, 1, 3 * 4096) >= 0)       \
			  R_FAIL("a refused batch submit wrote its valid entry");                                  \
		  if (nr)                                                                                          \
			  R_FAIL("a refused batch submit delivered %u events", nr);                                \
		  (void)keep;                                                                                      \
		  return r;                                                                                        \
	  })                                                                                                       \
	X(X25, OPEN, VALUE, OPENDS_SUCCESS, 0, NB, "", "opends_batch_get_status(*nr 0, events NULL) is allowed", { \
		unsigned nr = 0;                                                                                   \
		return E(opends_batch_get_status(c.batch, 0, &nr, NULL, NULL));                                    \
	})                                                                                                         \
	/* ---- configuration ---- */                                                                             \
	X(C01, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_BACKEND", "OPENDS_BACKEND=junk",           \
	  { return cfg_try("OPENDS_BACKEND", "junk"); })                                                           \
	X(C02, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_BACKEND", "OPENDS_BACKEND=REF (names are case-sensitive)", \
	  { return cfg_try("OPENDS_BACKEND", "REF"); })                                                            \
	X(C03, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_BACKEND", "OPENDS_BACKEND=\" ref\" (leading space)", \
	  { return cfg_try("OPENDS_BACKEND", " ref"); })                                                           \
	X(C04, CONFIG, ERR, OPENDS_PLATFORM_NOT_SUPPORTED, 0, NB, "OPENDS_BACKEND",                                \
	  "OPENDS_BACKEND=gds where cuFile cannot be loaded (a known backend that cannot run)",                   \
	  { return cfg_without_cufile("OPENDS_BACKEND", "gds"); })                                                 \
	X(C05, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_ACCEL", "OPENDS_ACCEL=junk",               \
	  { return cfg_try("OPENDS_ACCEL", "junk"); })                                                             \
	X(C06, CONFIG, ERR, OPENDS_PLATFORM_NOT_SUPPORTED, OPENDS_DEVICE_NOT_FOUND, NB, "OPENDS_ACCEL",            \
	  "OPENDS_ACCEL=cuda on a machine without a GPU (either code)", {                                        \
		  if (have_gpu())                                                                                  \
			  return OPENDS_PLATFORM_NOT_SUPPORTED;                                                    \
		  return cfg_try("OPENDS_ACCEL", "cuda");                                                          \
	  })                                                                                                       \
	X(C07, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=0",        \
	  { return cfg_try("OPENDS_IO_THREADS", "0"); })                                                           \
	X(C08, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=257",      \
	  { return cfg_try("OPENDS_IO_THREADS", "257"); })                                                         \
	X(C09, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=-1",       \
	  { return cfg_try("OPENDS_IO_THREADS", "-1"); })                                                          \
	X(C10, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=abc",      \
	  { return cfg_try("OPENDS_IO_THREADS", "abc"); })                                                         \
	X(C11, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=4x",       \
	  { return cfg_try("OPENDS_IO_THREADS", "4x"); })                                                          \
	X(C12, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=\" 4\"",   \
	  { return cfg_try("OPENDS_IO_THREADS", " 4"); })                                                          \
	X(C13, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS",                               \
	  "OPENDS_IO_THREADS=18446744073709551620 (overflows 64 bits)",                                            \
	  { return cfg_try("OPENDS_IO_THREADS", "18446744073709551620"); })                                        \
	X(C14, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=+4",       \
	  { return cfg_try("OPENDS_IO_THREADS", "+4"); })                                                          \
	X(C15, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_QUEUE_DEPTH", "OPENDS_QUEUE_DEPTH=0",      \
	  { return cfg_try("OPENDS_QUEUE_DEPTH", "0"); })                                                          \
	X(C16, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_QUEUE_DEPTH", "OPENDS_QUEUE_DEPTH=4097",   \
	  { return cfg_try("OPENDS_QUEUE_DEPTH", "4097"); })                                                       \
	X(C17, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_QUEUE_DEPTH", "OPENDS_QUEUE_DEPTH=-5",     \
	  { return cfg_try("OPENDS_QUEUE_DEPTH", "-5"); })                                                         \
	X(C18, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_QUEUE_DEPTH", "OPENDS_QUEUE_DEPTH=1e3",    \
	  { return cfg_try("OPENDS_QUEUE_DEPTH", "1e3"); })                                                        \
	X(C19, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=4095",     \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "4095"); })                                                        \
	X(C20, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=6000 (not a multiple of 4096)", \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "6000"); })                                                        \
	X(C21, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=2g (above 1 GiB)", \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "2g"); })                                                          \
	X(C22, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=1025m",    \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "1025m"); })                                                       \
	X(C23, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=0",        \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "0"); })                                                           \
	X(C24, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=-4096",    \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "-4096"); })                                                       \
	X(C25, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=4kb",      \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "4kb"); })                                                         \
	X(C26, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=k",        \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "k"); })                                                           \
	X(C27, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE",                               \
	  "OPENDS_CHUNK_SIZE=17179869184g (overflows when scaled)",                                                \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "17179869184g"); })                                                \
	X(C28, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CPU_MASK", "OPENDS_CPU_MASK=xyz",          \
	  { return cfg_try("OPENDS_CPU_MASK", "xyz"); })                                                           \
	X(C29, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CPU_MASK", "OPENDS_CPU_MASK=0x",           \
	  { return cfg_try("OPENDS_CPU_MASK", "0x"); })                                                            \
	X(C30, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CPU_MASK", "OPENDS_CPU_MASK=-1",           \
	  { return cfg_try("OPENDS_CPU_MASK", "-1"); })                                                            \
	X(C31, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CPU_MASK", "OPENDS_CPU_MASK=0x1ffffffffffffffff (65 bits)", \
	  { return cfg_try("OPENDS_CPU_MASK", "0x1ffffffffffffffff"); })                                           \
	X(C32, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IDLE_SPIN", "OPENDS_IDLE_SPIN=-1",         \
	  { return cfg_try("OPENDS_IDLE_SPIN", "-1"); })                                                           \
	X(C33, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IDLE_SPIN", "OPENDS_IDLE_SPIN=1000001",    \
	  { return cfg_try("OPENDS_IDLE_SPIN", "1000001"); })                                                      \
	X(C34, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IDLE_SPIN", "OPENDS_IDLE_SPIN=busyy",      \
	  { return cfg_try("OPENDS_IDLE_SPIN", "busyy"); })                                                        \
	X(C35, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IDLE_SPIN", "OPENDS_IDLE_SPIN=10us",       \
	  { return cfg_try("OPENDS_IDLE_SPIN", "10us"); })                                                         \
	X(C36, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_ASSUME_ALIGNED_ONLY", "OPENDS_ASSUME_ALIGNED_ONLY=2", \
	  { return cfg_try("OPENDS_ASSUME_ALIGNED_ONLY", "2"); })                                                  \
	X(C37, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_ASSUME_ALIGNED_ONLY", "OPENDS_ASSUME_ALIGNED_ONLY=yes", \
	  { return cfg_try("OPENDS_ASSUME_ALIGNED_ONLY", "yes"); })                                                \
	X(C38, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_ASSUME_ALIGNED_ONLY", "OPENDS_ASSUME_ALIGNED_ONLY=-1", \
	  { return cfg_try("OPENDS_ASSUME_ALIGNED_ONLY", "-1"); })                                                 \
	X(C39, CONFIG, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "",                                              \
	  "opends_driver_close() after an open refused for OPENDS_IO_THREADS=0 (the driver stayed closed)", {     \
		  if (cfg_try("OPENDS_IO_THREADS", "0") != OPENDS_DRIVER_INVALID_PROPS)                            \
			  return -1;                                                                               \
		  return E(opends_driver_close());                                                                 \
	  })                                                                                                       \
	X(C40, CONFIG, ERR, -OPENDS_INVALID_VALUE, 0, NB, "OPENDS_ASSUME_ALIGNED_ONLY",                            \
	  "OPENDS_ASSUME_ALIGNED_ONLY=1, then a read at an unaligned offset",                                     \
	  { return cfg_read("OPENDS_ASSUME_ALIGNED_ONLY", "1", 4096, 100); })                                      \
	X(C41, CONFIG, VALUE, 4096, 0, NB, "", "OPENDS_ASSUME_ALIGNED_ONLY=1, then an aligned read (works)",       \
	  { return cfg_read("OPENDS_ASSUME_ALIGNED_ONLY", "1", 4096, 4096); })                                     \
	X(C42, CONFIG, VALUE, 0, 0, NB, "", "boundary values accepted: IO_THREADS=256 QUEUE_DEPTH=4096 CHUNK_SIZE=1g IDLE_SPIN=busy", { \
		long r = cfg_try("OPENDS_IO_THREADS", "256");                                                      \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_QUEUE_DEPTH", "4096");                                                 \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_CHUNK_SIZE", "1g");                                                    \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_IDLE_SPIN", "busy");                                                   \
		return r;                                                                                          \
	})                                                                                                         \
	X(C43, CONFIG, VALUE, 0, 0, NB, "", "boundary values accepted: IO_THREADS=1 QUEUE_DEPTH=1 CHUNK_SIZE=4k IDLE_SPIN=1000000", { \
		long r = cfg_try("OPENDS_IO_THREADS", "1");                                                        \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_QUEUE_DEPTH", "1");                                                    \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_CHUNK_SIZE", "4k");                                                    \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_IDLE_SPIN", "1000000");                                                \
		return r;                                                                                          \
	})                                                                                                         \
	X(C44, CONFIG, VALUE, 0, 0, NB, "", "empty values mean unset; CPU_MASK=0 and 0X3 accepted", {              \
		long r = cfg_try("OPENDS_IO_THREADS", "");                                                         \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_CPU_MASK", "0");                                                       \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_CPU_MASK", "0X3");                                                     \
		return r;                                                                                          \
	})                                                                                                         \
	/* issue 15: the header lists the suffixes and plain decimal numbers */                                 \
	X(C45, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE",                               \
	  "OPENDS_CHUNK_SIZE=04096 (leading zero: numbers are plain decimal)",                                     \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "04096"); })                                                       \
	X(C46, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=08 (leading zero)", \
	  { return cfg_try("OPENDS_IO_THREADS", "08"); })                                                          \
	X(C47, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=0004k (leading zeros before a suffix)", \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "0004k"); })                                                       \
	X(C48, CONFIG, VALUE, 0, 0, NB, "", "OPENDS_CHUNK_SIZE=4K and 1M: upper-case suffixes accepted as documented", { \
		long r = cfg_try("OPENDS_CHUNK_SIZE", "4K");                                                       \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_CHUNK_SIZE", "1M");                                                    \
		return r;                                                                                          \
	})

/* ---------------------------------------------------------------------- */

#define DECL(id, st, kd, ex, alt, be, word, desc, ...) static long row_##id(void) __VA_ARGS__
ROWS(DECL)

struct row {
	const char *id;
	enum state state;
	enum kind kind;
	long expect, alt;
	int be;
	const char *word, *desc;
	long (*fn)(void);
};

#define ENTRY(id, st, kd, ex, alt, be, word, desc, ...) { #id, st, kd, ex, alt, be, word, desc, row_##id },
static const struct row rows[] = { ROWS(ENTRY) };
#define NROWS (sizeof(rows) / sizeof(rows[0]))

static const char *code_name(long v, char *buf, size_t n)
{
	static const struct {
		long v;
		const char *name;
	} names[] = {
#define N(name, value, str) { value, "OPENDS_" #name },
		OPENDS_ERROR_LIST(N)
#undef N
	};
	long a = v < 0 ? -v : v;
	if (v == 0) {
		snprintf(buf, n, "0");
		return buf;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (names[i].v == a) {
			snprintf(buf, n, "%s%s", v < 0 ? "-" : "", names[i].name);
			return buf;
		}
	if (a < 5000 && v < 0) {
		const char *e = strerrorname_np((int)a);
		if (e) {
			snprintf(buf, n, "-%s", e);
			return buf;
		}
	}
	snprintf(buf, n, "%ld", v);
	return buf;
}

/* ---- per-row state ---- */

static void teardown(void)
{
	if (opends_driver_backend())
		opends_driver_close();
}

static void setup_open(void)
{
	teardown();
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here: %s", r_backend_env(), opends_last_error_detail());
	R_TRY(e);
	R_TRY(opends_handle_register(&c.h_rw, c.rw));
	R_TRY(opends_handle_register(&c.h_ro, c.ro));
	R_TRY(opends_handle_register(&c.h_wo, c.wo));
	R_TRY(opends_buf_register(c.reg, REG, 0));
	R_TRY(opends_stream_create(&c.stream));
	R_TRY(opends_batch_setup(&c.batch, 4));
	/* the file holds pattern 1 at the start of every row */
	uint8_t *p = malloc(FILE_SIZE);
	r_fill(p, FILE_SIZE, 1, 0);
	if (pwrite(c.rw, p, FILE_SIZE, 0) != FILE_SIZE || ftruncate(c.rw, FILE_SIZE))
		R_FAIL("resetting the data file: %s", strerror(errno));
	free(p);
}

struct run {
	const struct row *row;
	long got;
	int be;
	char detail[512];
};

static void *row_thread(void *arg)
{
	struct run *r = arg;
	row_be = -12345;
	r->got = r->row->fn();
	r->be = row_be;
	snprintf(r->detail, sizeof(r->detail), "%s", opends_last_error_detail());
	return NULL;
}

static int run_row_here(const struct row *row)
{
	char b1[64], b2[64];
	switch (row->state) {
	case OPEN:
		setup_open();
		break;
	case CLOSED:
		setup_open();
		R_TRY(opends_driver_close());
		break;
	case CONFIG:
		teardown();
		break;
	}
	r_phase = row->id;
	r_watchdog(10); /* per row: a hang names its row */
	struct run r = { .row = row };
	pthread_t t;
	if (pthread_create(&t, NULL, row_thread, &r))
		R_FAIL("pthread_create");
	pthread_join(t, NULL);

	int bad = 0;
	if (r.got != row->expect && !(row->alt && r.got == row->alt)) {
		printf("FAIL %s: %s\n    expected %s, got %s\n", row->id, row->desc,
		       code_name(row->expect, b1, sizeof(b1)), code_name(r.got, b2, sizeof(b2)));
		bad = 1;
	} else if (row->be != NB && r.be != row->be) {
		printf("FAIL %s: %s\n    backend_err expected %d, got %d\n", row->id, row->desc, row->be, r.be);
		bad = 1;
	} else if (row->kind == ERR && !r.detail[0]) {
		printf("FAIL %s: %s\n    returned %s but opends_last_error_detail() is empty\n", row->id, row->desc,
		       code_name(r.got, b2, sizeof(b2)));
		bad = 1;
	} else if (row->kind == ERR && row->word[0] && !strstr(r.detail, row->word)) {
		printf("FAIL %s: %s\n    the detail does not name \"%s\": \"%s\"\n", row->id, row->desc, row->word,
		       r.detail);
		bad = 1;
	} else {
		printf("ok   %s %-36s %s%s%s\n", row->id, code_name(r.got, b2, sizeof(b2)), row->desc,
		       r.detail[0] && row->kind == ERR ? "\n         detail: " : "",
		       r.detail[0] && row->kind == ERR ? r.detail : "");
	}
	fflush(stdout);
	return bad;
}

/* Each row runs in a child process, so a row that hangs or crashes fails
 * alone (with its id named) and the others still run. */
static int run_row(const struct row *row)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		R_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		r_dir[0] = '\0'; /* the parent removes the directory */
		int bad = run_row_here(row);
		teardown();
		fflush(stdout);
		_exit(bad);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
		return 1;
	printf("FAIL %s: %s\n    the row %s (status 0x%x)\n", row->id, row->desc,
	       WIFSIGNALED(st) ? "crashed" : "hung or died", st);
	fflush(stdout);
	return 1;
}

static void markdown(void)
{
	char b1[64], b2[64];
	printf("| ID | Misuse | Returns | Detail names |\n|---|---|---|---|\n");
	for (size_t i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		char exp[160];
		if (r->kind == VALUE)
			snprintf(exp, sizeof(exp), "%s (success)", code_name(r->expect, b1, sizeof(b1)));
		else
			snprintf(exp, sizeof(exp), "`%s`%s%s%s%s", code_name(r->expect, b1, sizeof(b1)),
				 r->alt ? " or `" : "", r->alt ? code_name(r->alt, b2, sizeof(b2)) : "",
				 r->alt ? "`" : "", r->be != NB ? ", backend_err = EBADF" : "");
		if (r->kind == LATER)
			snprintf(exp + strlen(exp), sizeof(exp) - strlen(exp), " (delivered later)");
		/* escape | in descriptions */
		printf("| %s | %s | %s | %s |\n", r->id, r->desc, exp,
		       r->kind == ERR ? (r->word[0] ? r->word : "(any sentence)") : "-");
	}
}

static void check_doc(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		R_FAIL("cannot open %s", path);
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	for (size_t i = 0; i < NROWS; i++) {
		char key[16];
		snprintf(key, sizeof(key), "| %s |", rows[i].id);
		if (!strstr(text, key))
			R_FAIL("%s does not list row %s", path, rows[i].id);
	}
}

static void cleanup(void)
{
	r_rmdir_all();
}

int main(int argc, char **argv)
{
	const char *only = NULL, *doc = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--markdown")) {
			markdown();
			return 0;
		} else if (!strcmp(argv[i], "--doc") && i + 1 < argc) {
			doc = argv[++i];
		} else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			only = argv[++i];
		} else {
			fprintf(stderr, "usage: %s [--markdown] [--doc FILE] [--only ID]\n", argv[0]);
			return 2;
		}
	}
	if (doc)
		check_doc(doc);
	/* a backend built here that cannot run here (gds without a GPU): skip
	 * the whole table rather than fail every row that opens the driver */
	opends_error_t pe = opends_driver_open();
	if (pe.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here: %s", r_backend_env(), opends_last_error_detail());
	if (pe.err == OPENDS_SUCCESS)
		opends_driver_close();
	atexit(cleanup);
	r_watchdog_cleanup = cleanup;
	signal(SIGPIPE, SIG_IGN);

	const char *d = r_tmpdir("misuse");
	snprintf(c.path, sizeof(c.path), "%s/data", d);
	snprintf(c.dir, sizeof(c.dir), "%s", d);
	c.rw = open(c.path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	c.ro = open(c.path, O_RDONLY);
	c.wo = open(c.path, O_WRONLY);
	c.dirfd = open(d, O_RDONLY | O_DIRECTORY);
	c.devnull = open("/dev/null", O_RDWR);
	c.opath = open(c.path, O_PATH);
	if (c.rw < 0 || c.ro < 0 || c.wo < 0 || c.dirfd < 0 || c.devnull < 0 || c.opath < 0 || pipe(c.pipefd) ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, c.sock))
		R_FAIL("setting up the fds: %s", strerror(errno));
	if (posix_memalign((void **)&c.mem, 4096, 1 << 20))
		R_FAIL("posix_memalign");
	memset(c.mem, 0, 1 << 20);
	c.reg = c.mem + 256 * 1024;

	printf("backend %s, accel %s, %zu rows\n", r_backend_env(), getenv("OPENDS_ACCEL") ? getenv("OPENDS_ACCEL") : "auto",
	       NROWS);
	int bad = 0, ran = 0;
	for (size_t i = 0; i < NROWS; i++) {
		if (only && strcmp(only, rows[i].id))
			continue;
		bad += run_row(&rows[i]);
		ran++;
	}
	teardown();
	printf("%d rows run, %d passed, %d failed\n", ran, ran - bad, bad);
	return bad ? 1 : 0;
}
