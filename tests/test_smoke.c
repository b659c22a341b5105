/*
 * Smoke test: the driver life cycle and the one path every user takes
 * (open, register, read 4 KiB, verify, deregister, close), plus the
 * open/close state machine and the error-string function.
 */
#include "common.h"

static void one_read(void)
{
	char path[PATH_MAX];
	t_path(path, sizeof path, "smoke.bin");
	t_write_pattern_file(path, 16 * 4096, pat16);

	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	uint8_t *buf = t_xmalloc(4096);
	uint8_t exp[4096];
	t_fill(exp, 4096, 4096, pat16);
	EXPECT_SSZ(opends_sync_read(fh, buf, 4096, 4096, 0), 4096);
	VERIFY(buf, exp, 4096, "4 KiB read at 4096");
	OK(opends_handle_deregister(fh));
	close(fd);
	free(buf);
}

static void status_strings(void)
{
	/* Every code the header defines. */
	static const int codes[] = {
		OPENDS_DRIVER_NOT_INITIALIZED, OPENDS_DRIVER_INVALID_PROPS, OPENDS_DRIVER_UNSUPPORTED_LIMIT,
		OPENDS_DRIVER_VERSION_MISMATCH, OPENDS_DRIVER_VERSION_READ_ERROR, OPENDS_DRIVER_CLOSING,
		OPENDS_PLATFORM_NOT_SUPPORTED, OPENDS_IO_NOT_SUPPORTED, OPENDS_DEVICE_NOT_SUPPORTED,
		OPENDS_FS_DRIVER_ERROR, OPENDS_DEVICE_DRIVER_ERROR, OPENDS_POINTER_INVALID,
		OPENDS_MEMORY_TYPE_INVALID, OPENDS_POINTER_RANGE_ERROR, OPENDS_CONTEXT_MISMATCH,
		OPENDS_INVALID_MAPPING_SIZE, OPENDS_INVALID_MAPPING_RANGE, OPENDS_INVALID_FILE_TYPE,
		OPENDS_INVALID_FILE_OPEN_FLAG, OPENDS_DIO_NOT_SET, OPENDS_INVALID_VALUE,
		OPENDS_MEMORY_ALREADY_REGISTERED, OPENDS_MEMORY_NOT_REGISTERED, OPENDS_PERMISSION_DENIED,
		OPENDS_DRIVER_ALREADY_OPEN, OPENDS_HANDLE_NOT_REGISTERED, OPENDS_HANDLE_ALREADY_REGISTERED,
		OPENDS_DEVICE_NOT_FOUND, OPENDS_INTERNAL_ERROR, OPENDS_GETNEWFD_FAILED,
		OPENDS_FS_SETUP_ERROR, OPENDS_IO_DISABLED, OPENDS_BATCH_SUBMIT_FAILED,
		OPENDS_MEMORY_PINNING_FAILED, OPENDS_BATCH_FULL, OPENDS_ASYNC_NOT_SUPPORTED,
		OPENDS_NOMEM_ERROR, OPENDS_IO_ERROR, OPENDS_INVALID_CONTEXT_ERROR,
	};
	enum { NC = sizeof codes / sizeof codes[0] };
	static const int errnos[] = { EIO, EBADF, ENOSPC, EINVAL, ENOENT, EAGAIN };
	enum { NE = sizeof errnos / sizeof errnos[0] };
	/* values the cuFile list leaves out, and far-off ones */
	static const int unknown[] = { 5021, 5032, 5039, 5048, 9999, -9999, 4242424, INT_MIN + 1 };

	/* The cuFile numbering is part of the contract. */
	CHECK(OPENDS_DRIVER_NOT_INITIALIZED == 5001 && OPENDS_INVALID_VALUE == 5022);
	CHECK(OPENDS_BATCH_FULL == 5037 && OPENDS_INVALID_CONTEXT_ERROR == 5047);

	const char *all[NC + NE];
	for (int i = 0; i < NC; i++) {
		const char *p = opends_op_status_error(codes[i]);
		const char *n = opends_op_status_error(-codes[i]);
		CHECKF(p && p[0], "no string for %d", codes[i]);
		CHECKF(n && n[0], "no string for %d", -codes[i]);
		CHECKF(!strstr(p, "unknown"), "code %d is \"%s\"", codes[i], p);
		/* the negation names the same condition */
		CHECKF(!strcmp(p, n), "%d is \"%s\" but %d is \"%s\"", codes[i], p, -codes[i], n);
		all[i] = p;
	}
	for (int i = 0; i < NE; i++) {
		const char *s = opends_op_status_error(-errnos[i]);
		CHECKF(s && s[0], "no string for -%d", errnos[i]);
		CHECKF(!strstr(s, "unknown"), "-errno %d is \"%s\"", errnos[i], s);
		all[NC + i] = s;
	}
	for (int i = 0; i < NC + NE; i++)
		for (int j = i + 1; j < NC + NE; j++)
			CHECKF(strcmp(all[i], all[j]) != 0, "two codes share the string \"%s\"", all[i]);
	const char *s0 = opends_op_status_error(0);
	CHECK(s0 && s0[0]);
	for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
		const char *s = opends_op_status_error(unknown[i]);
		CHECKF(s && !strcmp(s, "unknown error"), "code %d gives \"%s\", expected \"unknown error\"",
		       unknown[i], s ? s : "(NULL)");
	}
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(100);

	t_phase = "closed";
	CHECK(opends_driver_backend() == NULL);
	unsigned ma = 99, mi = 99, pa = 99;
	OK(opends_get_version(&ma, &mi, &pa));
	CHECK(ma == OPENDS_VERSION_MAJOR && mi == OPENDS_VERSION_MINOR && pa == OPENDS_VERSION_PATCH);
	OK(opends_get_version(NULL, NULL, NULL));
	status_strings();

	t_phase = "first open";
	t_driver_open();
	char be[64];
	snprintf(be, sizeof be, "%s", opends_driver_backend());
	printf("backend: %s\n", be);
	opends_drv_props_t props;
	memset(&props, 0xff, sizeof props);
	OK(opends_driver_get_properties(&props));
	CHECK(props.max_direct_io_size > 0);
	CHECK(props.max_batch_io_size >= 1);
	for (int i = 0; i < 8; i++)
		CHECKF(props.reserved[i] == 0, "props.reserved[%d] = %u", i, props.reserved[i]);
	printf("props: version %u.%u, max_direct_io_size %zu, max_batch_io_size %u, timeout %u ms\n",
	       props.major_version, props.minor_version, props.max_direct_io_size, props.max_batch_io_size,
	       props.max_batch_io_timeout_msecs);
	/* version works while open too */
	OK(opends_get_version(&ma, NULL, &pa));

	t_phase = "read";
	one_read();

	t_phase = "open twice";
	EXPECT_ERR(opends_driver_open(), OPENDS_DRIVER_ALREADY_OPEN);
	/* still open and usable after the refused second open */
	CHECK(opends_driver_backend() != NULL);
	one_read();

	t_phase = "close";
	OK(opends_driver_close());
	CHECK(opends_driver_backend() == NULL);

	t_phase = "after close";
	EXPECT_ERR(opends_driver_get_properties(&props), OPENDS_DRIVER_NOT_INITIALIZED);
	opends_handle_t fh = NULL;
	int fd = t_open("/proc/self/exe", O_RDONLY, false);
	EXPECT_ERR(opends_handle_register(&fh, fd), OPENDS_DRIVER_NOT_INITIALIZED);
	char b[16];
	EXPECT_SSZ(opends_sync_read(fh, b, sizeof b, 0, 0), -OPENDS_DRIVER_NOT_INITIALIZED);
	close(fd);
	EXPECT_ERR(opends_driver_close(), OPENDS_DRIVER_NOT_INITIALIZED);

	t_phase = "reopen";
	t_driver_open();
	CHECK(!strcmp(opends_driver_backend(), be) || getenv("OPENDS_BACKEND") == NULL);
	one_read();
	OK(opends_driver_close());
	EXPECT_ERR(opends_driver_close(), OPENDS_DRIVER_NOT_INITIALIZED);

	printf("smoke OK\n");
	return 0;
}
