/*
 * conform_driver: API.md "Driver and configuration". Every call but open
 * made while the driver is closed (before the first open and after a
 * close) fails with OPENDS_DRIVER_NOT_INITIALIZED or its negation; the
 * calls that need no driver work; open twice, close twice; properties and
 * version; opends_driver_backend is exactly the backend's name; every
 * OPENDS_* variable is validated at every open whichever backend runs
 * (OPENDS_DRIVER_INVALID_PROPS, a detail naming the variable), an empty
 * one is unset; open -> close -> open leaks no fds or threads.
 */
#include "conform.h"

#include <dirent.h>

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* every call of every family with the driver closed */
static void closed(const char *when)
{
	c_case = when;
	char path[600];
	snprintf(path, sizeof(path), "%s", c_file("closed", 4096));
	int fd = c_open(path, O_RDWR);
	const int NI = OPENDS_DRIVER_NOT_INITIALIZED;
	unsigned char buf[4096];
	opends_handle_t fh = NULL;
	opends_drv_props_t props;
	C_ERR(opends_driver_close(), NI);
	C_ERR(opends_driver_get_properties(&props), NI);
	char v[64];
	C_ERR(opends_driver_get_setting("OPENDS_BACKEND", v, sizeof(v), NULL), NI);
	C_TRUE(opends_driver_backend() == NULL, "opends_driver_backend() is \"%s\" with the driver closed",
	       opends_driver_backend());
	C_ERR(opends_handle_register(&fh, fd), NI);
	C_ERR(opends_handle_deregister((opends_handle_t)buf), NI);
	C_ERR(opends_handle_advise((opends_handle_t)buf, OPENDS_ADVICE_NORMAL), NI);
	C_ERR(opends_describe(NULL, v, sizeof(v)), NI);
	C_ERR(opends_buf_register(buf, sizeof(buf), 0), NI);
	C_ERR(opends_buf_deregister(buf), NI);
	C_SSZ(opends_sync_read((opends_handle_t)buf, buf, 1, 0, 0), -NI);
	C_SSZ(opends_sync_write((opends_handle_t)buf, buf, 1, 0, 0), -NI);
	void *bufs[1] = { buf };
	C_SSZ(opends_sync_read_fanout((opends_handle_t)buf, bufs, NULL, 1, 1, 0), -NI);
	opends_async_future_t f;
	C_ERR(opends_async_read((opends_handle_t)buf, buf, 1, 0, 0, &f), NI);
	C_ERR(opends_async_write((opends_handle_t)buf, buf, 1, 0, 0, &f), NI);
	opends_stream_t s = NULL;
	size_t size = 1;
	off_t fo = 0, bo = 0;
	ssize_t got = 0;
	C_ERR(opends_stream_create(&s), NI);
	C_ERR(opends_stream_destroy((opends_stream_t)buf), NI);
	C_ERR(opends_stream_register(NULL, 0), NI);
	C_ERR(opends_stream_deregister(NULL), NI);
	C_ERR(opends_stream_read((opends_handle_t)buf, buf, &size, &fo, &bo, &got, NULL), NI);
	C_ERR(opends_stream_write((opends_handle_t)buf, buf, &size, &fo, &bo, &got, NULL), NI);
	C_ERR(opends_stream_synchronize(NULL), NI);
	opends_batch_t b = NULL;
	unsigned nr = 0;
	opends_io_events_t ev;
	opends_io_params_t io = { 0 };
	C_ERR(opends_batch_setup(&b, 1), NI);
	C_ERR(opends_batch_submit((opends_batch_t)buf, 1, &io, 0), NI);
	C_ERR(opends_batch_get_status((opends_batch_t)buf, 0, &nr, &ev, NULL), NI);
	C_ERR(opends_batch_cancel((opends_batch_t)buf), NI);
	C_ERR(opends_batch_destroy((opends_batch_t)buf), NI);
	unsigned count;
	opends_device_props_t dp;
	C_ERR(opends_device_count(&count), NI);
	C_ERR(opends_device_get_properties(0, &dp), NI);
	C_ERR(opends_device_describe(0, v, sizeof(v)), NI);
	opends_source_ops_t ops = { .struct_size = sizeof(ops) };
	opends_source_desc_t desc = { .struct_size = sizeof(desc), .ops = &ops, .size = -1 };
	C_ERR(opends_handle_register_source(&fh, &desc), NI);
	C_ERR(opends_handle_open_url(&fh, "rados://pool/obj", O_RDONLY), NI);
	C_ERR(opends_handle_register_rados(&fh, buf, "obj", 0), NI);
	/* these need no driver */
	unsigned ma = 99, mi = 99, pa = 99;
	C_OK(opends_get_version(&ma, &mi, &pa));
	C_TRUE(ma == OPENDS_VERSION_MAJOR && mi == OPENDS_VERSION_MINOR && pa == OPENDS_VERSION_PATCH,
	       "get_version %u.%u.%u, header %d.%d.%d", ma, mi, pa, OPENDS_VERSION_MAJOR, OPENDS_VERSION_MINOR,
	       OPENDS_VERSION_PATCH);
	C_OK(opends_get_version(NULL, NULL, NULL));
	C_TRUE(opends_op_status_error(OPENDS_IO_ERROR) != NULL, "op_status_error NULL while closed");
	char lib[1024];
	C_OK(opends_source_libraries(lib, sizeof(lib)));
	close(fd);
}

static void open_close(void)
{
	c_case = "open/close";
	C_OK(opends_driver_open());
	C_ERR(opends_driver_open(), OPENDS_DRIVER_ALREADY_OPEN);
	C_ERR(opends_driver_open_with(NULL, 0), OPENDS_DRIVER_ALREADY_OPEN);
	const char *want = getenv("OPENDS_BACKEND"), *b = opends_driver_backend();
	if (want && *want && strcmp(want, "auto"))
		C_TRUE(b && !strcmp(b, want), "opends_driver_backend() is \"%s\", OPENDS_BACKEND is %s",
		       b ? b : "(NULL)", want);
	else
		C_TRUE(b && (!strcmp(b, "ref") || !strcmp(b, "uring") || !strcmp(b, "gds")),
		       "opends_driver_backend() is \"%s\", not a backend's name", b ? b : "(NULL)");
	opends_drv_props_t p;
	memset(&p, 0xff, sizeof(p));
	C_ERR(opends_driver_get_properties(NULL), OPENDS_INVALID_VALUE);
	C_OK(opends_driver_get_properties(&p));
	C_TRUE(p.major_version == OPENDS_VERSION_MAJOR && p.minor_version == OPENDS_VERSION_MINOR,
	       "properties' version %u.%u", p.major_version, p.minor_version);
	C_TRUE(p.max_direct_io_size >= 4096 && p.max_direct_io_size % 4096 == 0,
	       "max_direct_io_size %zu is not a byte count of whole blocks", p.max_direct_io_size);
	C_TRUE(p.max_batch_io_size >= 1, "max_batch_io_size is 0");
	for (int i = 0; i < 8; i++)
		C_TRUE(p.reserved[i] == 0, "reserved[%d] is %u, not zero", i, p.reserved[i]);
	C_OK(opends_driver_close());
	C_ERR(opends_driver_close(), OPENDS_DRIVER_NOT_INITIALIZED);
	/* OPENDS_CHUNK_SIZE sets max_direct_io_size (bytes, not KiB) */
	setenv("OPENDS_CHUNK_SIZE", "2m", 1);
	C_OK(opends_driver_open());
	C_OK(opends_driver_get_properties(&p));
	C_TRUE(p.max_direct_io_size == 2u << 20, "max_direct_io_size %zu with OPENDS_CHUNK_SIZE=2m",
	       p.max_direct_io_size);
	C_OK(opends_driver_close());
	unsetenv("OPENDS_CHUNK_SIZE");
}

/* every variable the library defines, bad: the open fails with
 * DRIVER_INVALID_PROPS naming it, whichever backend is chosen; empty: unset */
static void config(void)
{
	c_case = "config";
	static const char *const bad[][2] = {
		{ "OPENDS_BACKEND", "nvme" },         { "OPENDS_ACCEL", "rocm" },
		{ "OPENDS_IO_THREADS", "0" },         { "OPENDS_IO_THREADS", "257" },
		{ "OPENDS_IO_THREADS", "four" },      { "OPENDS_IO_THREADS", "-1" },
		{ "OPENDS_IO_THREADS", "4 " },        { "OPENDS_IO_THREADS", "08" },
		{ "OPENDS_QUEUE_DEPTH", "0" },        { "OPENDS_QUEUE_DEPTH", "4097" },
		{ "OPENDS_IO_KWORKERS", "65" },       { "OPENDS_IO_KWORKERS", "0" },
		{ "OPENDS_CHUNK_SIZE", "4095" },      { "OPENDS_CHUNK_SIZE", "5000" },
		{ "OPENDS_CHUNK_SIZE", "2g" },        { "OPENDS_CHUNK_SIZE", "1t" },
		{ "OPENDS_MAX_PINNED", "1023k" },     { "OPENDS_MAX_PINNED", "1025g" },
		{ "OPENDS_INLINE_MAX", "2g" },        { "OPENDS_INLINE_MAX", "x" },
		{ "OPENDS_READAHEAD", "2" },          { "OPENDS_READAHEAD", "yes" },
		{ "OPENDS_CPU_MASK", "0xg" },         { "OPENDS_CPU_MASK", "0x10000000000000000" },
		{ "OPENDS_IDLE_SPIN", "1000001" },    { "OPENDS_IDLE_SPIN", "spin" },
		{ "OPENDS_ASSUME_ALIGNED_ONLY", "2" }, { "OPENDS_IO_THREADS", "99999999999999999999" },
		{ "OPENDS_INLINE_SPLIT", "0" },       { "OPENDS_INLINE_SPLIT", "17" },
		{ "OPENDS_INLINE_SPLIT", "two" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		const char *old = getenv(bad[i][0]);
		char keep[64] = "";
		if (old)
			snprintf(keep, sizeof(keep), "%s", old);
		setenv(bad[i][0], bad[i][1], 1);
		opends_error_t e = opends_driver_open();
		if (e.err == OPENDS_SUCCESS) {
			C_FAIL("%s=\"%s\" opened the driver", bad[i][0], bad[i][1]);
			opends_driver_close();
		} else {
			C_TRUE(e.err == OPENDS_DRIVER_INVALID_PROPS, "%s=\"%s\": %s, expected OPENDS_DRIVER_INVALID_PROPS",
			       bad[i][0], bad[i][1], c_name(e.err));
			C_TRUE(strstr(opends_last_error_detail(), bad[i][0]) != NULL,
			       "%s=\"%s\": the detail \"%s\" does not name the variable", bad[i][0], bad[i][1],
			       opends_last_error_detail());
			C_TRUE(strstr(opends_last_error_detail(), "accepts") != NULL,
			       "%s=\"%s\": the detail \"%s\" does not say what it accepts", bad[i][0], bad[i][1],
			       opends_last_error_detail());
			C_TRUE(opends_driver_backend() == NULL, "a refused open left the driver open");
		}
		if (old)
			setenv(bad[i][0], keep, 1);
		else
			unsetenv(bad[i][0]);
	}
	/* empty = unset */
	static const char *const vars[] = { "OPENDS_IO_THREADS", "OPENDS_QUEUE_DEPTH", "OPENDS_CHUNK_SIZE",
					    "OPENDS_MAX_PINNED", "OPENDS_CPU_MASK", "OPENDS_IDLE_SPIN",
					    "OPENDS_ASSUME_ALIGNED_ONLY", "OPENDS_READAHEAD", "OPENDS_INLINE_SPLIT" };
	for (size_t i = 0; i < sizeof(vars) / sizeof(*vars); i++)
		setenv(vars[i], "", 1);
	C_OK(opends_driver_open());
	C_OK(opends_driver_close());
	for (size_t i = 0; i < sizeof(vars) / sizeof(*vars); i++)
		unsetenv(vars[i]);
}

/* open -> close -> open works and leaks nothing (fds, threads) */
static void cycles(void)
{
	c_case = "cycles";
	C_OK(opends_driver_open());
	C_OK(opends_driver_close());
	int fds = count_dir("/proc/self/fd"), tasks = count_dir("/proc/self/task");
	const char *path = c_file("cycle", 8192);
	for (int i = 0; i < 30; i++) {
		C_OK(opends_driver_open());
		int fd = c_open(path, O_RDONLY);
		opends_handle_t fh;
		unsigned char buf[100];
		C_OK(opends_handle_register(&fh, fd));
		C_SSZ(opends_sync_read(fh, buf, sizeof(buf), 4000, 0), (ssize_t)sizeof(buf));
		C_OK(opends_driver_close()); /* releases the handle */
		close(fd);
	}
	C_TRUE(count_dir("/proc/self/fd") == fds, "30 open/close cycles: %d fds, %d before",
	       count_dir("/proc/self/fd"), fds);
	C_TRUE(count_dir("/proc/self/task") == tasks, "30 open/close cycles: %d threads, %d before",
	       count_dir("/proc/self/task"), tasks);
}

int main(void)
{
	closed("before the first open");
	open_close();
	closed("after close");
	config();
	cycles();
	return c_done("conform_driver");
}
