/*
 * test_source_errors: what a caller gets when a source handle is misused
 * or the source fails, through sync, async and batch:
 *  - registration refuses bad descriptors with OPENDS_INVALID_VALUE and a
 *    detail, and never calls release for them;
 *  - a piece's -errno is the operation's result; the sync detail names the
 *    source and the offset where it failed;
 *  - read_async refusing to start (-errno) is the same;
 *  - over-long results, short pieces before a known end and data after a
 *    short piece are -EIO;
 *  - writes through a read-only source (flag, or no write form) are -EBADF;
 *  - OPENDS_SOURCE_DEVICE_MEMORY: the source gets the caller's buffer
 *    (with hostdev, "device memory"), and without it never does;
 *  - a source name of 600 bytes: details and describe show its head and
 *    its tail around "...", and a failure's detail still ends with the
 *    offsets and the error (before: the name was cut at 199 bytes, its
 *    tail lost, and the detail ended inside the name).
 */
#include "fake.h"
#include "families.h"

#define OBJ ((size_t)300 * T_KiB + 17)

static void registration(void)
{
	t_phase = "registration";
	struct fake *f = fake_new(FAKE_INLINE, OBJ, hashpat);
	opends_handle_t fh = NULL;
	opends_source_desc_t d = fake_desc(f);
	EXPECT_ERR(opends_handle_register_source(NULL, &d), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_handle_register_source(&fh, NULL), OPENDS_INVALID_VALUE);
	d.struct_size = 8;
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_INVALID_VALUE);
	CHECKF(strstr(t_detail(), "struct_size"), "detail does not name struct_size: %s", t_detail());
	d = fake_desc(f);
	d.ops = NULL;
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_INVALID_VALUE);
	opends_source_ops_t ops = fake_ops;
	d = fake_desc(f);
	d.ops = &ops;
	ops.struct_size = 4;
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_INVALID_VALUE);
	ops = fake_ops;
	ops.read_async = NULL;
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_INVALID_VALUE);
	CHECKF(strstr(t_detail(), "read_async"), "detail does not name read_async: %s", t_detail());
	ops = fake_ops;
	ops.read = NULL;
	d.flags = OPENDS_SOURCE_BLOCKING;
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_INVALID_VALUE);
	d = fake_desc(f);
	d.flags = 0x80;
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_INVALID_VALUE);
	d = fake_desc(f);
	d.flags = 0x100; /* not a register_source flag */
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_INVALID_VALUE);
	d = fake_desc(f);
	d.io_unit = 100;
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_INVALID_VALUE);
	d = fake_desc(f);
	d.max_io = 1;
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_INVALID_VALUE);
	d = fake_desc(f);
	d.size = -2;
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_INVALID_VALUE);
	CHECKF(fh == NULL, "a refused registration set *fh");
	CHECKF(atomic_load(&f->released) == 0, "release called for a refused registration");
	CHECKF(atomic_load(&f->calls) == 0, "registration did I/O");
	/* a larger struct from a newer caller is accepted (extra bytes ignored) */
	struct {
		opends_source_desc_t d;
		char future[32];
	} big;
	memset(&big, 0, sizeof(big));
	big.d = fake_desc(f);
	big.d.struct_size = sizeof(big);
	fh = fake_register(&big.d);
	CHECKF(atomic_load(&f->calls) == 0, "registration did I/O");
	OK(opends_handle_deregister(fh));
	CHECKF(atomic_load(&f->released) == 1, "release called %d times", atomic_load(&f->released));
	EXPECT_ERR(opends_handle_deregister(fh), OPENDS_HANDLE_NOT_REGISTERED);
	CHECKF(atomic_load(&f->released) == 1, "release called again by a second deregister");
	fake_free(f);
}

/* every family gets want for a read of size at off */
static void expect_read(opends_handle_t fh, size_t size, off_t off, ssize_t want, const char *what)
{
	uint8_t *buf = t_xmalloc(size);
	ssize_t r = opends_sync_read(fh, buf, size, off, 0);
	CHECKF(r == want, "%s: sync read got %zd (%s), want %zd (%s)", what, r, r < 0 ? t_errname(r) : "bytes", want,
	       want < 0 ? t_errname(want) : "bytes");
	if (want < 0) {
		CHECKF(strstr(t_detail(), "fake://obj"), "%s: the detail does not name the source: %s", what,
		       t_detail());
	}
	r = do_io(ASYNC, OPENDS_READ, fh, buf, size, off, 0);
	CHECKF(r == want, "%s: async read got %zd, want %zd", what, r, want);
	if (want < 0) {
		/* await repeats the failure's own detail, not a generic one */
		CHECKF(strstr(t_detail(), "opends_async_await: fake://obj: read of") && strstr(t_detail(), "failed at offset"),
		       "%s: the async detail does not name the source and offset: %s", what, t_detail());
	}
	r = do_io(BATCH, OPENDS_READ, fh, buf, size, off, 0);
	CHECKF(r == want, "%s: batch read got %zd, want %zd", what, r, want);
	if (want < 0) {
		/* the status call repeats the failed entry's own detail */
		CHECKF(strstr(t_detail(), "opends_batch_get_status: the entry with cookie") &&
			       strstr(t_detail(), "fake://obj: read of") && strstr(t_detail(), "failed at offset"),
		       "%s: the batch detail does not name the source and offset: %s", what, t_detail());
	}
	free(buf);
}

static void failures(enum fake_mode mode)
{
	char ph[64];
	snprintf(ph, sizeof(ph), "failures, %s source", fake_mode_name(mode));
	t_phase = ph;
	struct fake *f = fake_new(mode, OBJ, hashpat);
	opends_source_desc_t d = fake_desc(f);
	d.io_unit = 64 * T_KiB;
	opends_handle_t fh = fake_register(&d);

	f->fail_errno = ENOENT;
	f->fail_at = 0;
	expect_read(fh, 1000, 0, -ENOENT, "missing object");
	uint8_t b[16];
	EXPECT_SSZ(opends_sync_read(fh, b, 16, 0, 0), -ENOENT);
	CHECKF(strstr(t_detail(), "offset 0"), "the detail does not name the offset: %s", t_detail());
	f->fail_errno = ETIMEDOUT;
	f->fail_at = 200000; /* in the 4th piece */
	expect_read(fh, OBJ, 0, -ETIMEDOUT, "a piece times out");
	EXPECT_SSZ(opends_sync_read(fh, b, 16, 200000, 0), -ETIMEDOUT);
	CHECKF(strstr(t_detail(), "200000"), "the detail does not name the offset: %s", t_detail());
	EXPECT_SSZ(do_io(ASYNC, OPENDS_READ, fh, b, 16, 200000, 0), -ETIMEDOUT);
	CHECKF(strstr(t_detail(), "at offset 200000 failed at offset 200000"),
	       "the async detail does not name the offset: %s", t_detail());
	expect_read(fh, 1000, 0, 1000, "other pieces still work");
	f->fail_errno = 0;

	if (mode != FAKE_BLOCKING) {
		f->start_err = -EACCES;
		expect_read(fh, 1000, 5, -EACCES, "read_async refuses");
		f->start_err = 0;
	}

	f->overlong = true;
	expect_read(fh, 1000, 5, -EIO, "more bytes than asked");
	f->overlong = false;

	/* a short piece with data after it */
	f->short_at = 70000;
	/* ref reads one piece at a time and stops at the short one, taking it
	 * for the end; the engine reads pieces in parallel and sees the data */
	expect_read(fh, 200000, 0, !strcmp(opends_driver_backend(), "ref") ? 70000 : -EIO, "short piece, then data");
	f->short_at = -1;
	expect_read(fh, 200000, 0, 200000, "healthy again");
	OK(opends_handle_deregister(fh));

	/* known size: a short piece before it is -EIO */
	d.size = (int64_t)OBJ + 1000;
	fh = fake_register(&d);
	expect_read(fh, 4096, (off_t)OBJ - 10, -EIO, "short before the known end");
	expect_read(fh, 10, (off_t)OBJ + 1000, 0, "at the known end");
	OK(opends_handle_deregister(fh));

	/* read-only: by flag, and without a write form */
	d.size = -1;
	d.flags |= OPENDS_SOURCE_RDONLY;
	fh = fake_register(&d);
	EXPECT_SSZ(opends_sync_write(fh, b, 16, 0, 0), -EBADF);
	opends_async_future_t fu;
	OK(opends_async_write(fh, b, 16, 0, 0, &fu));
	EXPECT_SSZ(opends_async_await(&fu), -EBADF);
	OK(opends_handle_deregister(fh));
	opends_source_ops_t ro = fake_ops;
	ro.write_async = NULL;
	ro.write = NULL;
	d = fake_desc(f);
	d.ops = &ro;
	fh = fake_register(&d);
	EXPECT_SSZ(opends_sync_write(fh, b, 16, 0, 0), -EBADF);
	long calls = atomic_load(&f->calls);
	OK(opends_handle_deregister(fh));
	CHECKF(atomic_load(&f->calls) == calls, "refused writes reached the source");
	CHECKF(atomic_load(&f->released) == 4, "release called %d times for 4 handles", atomic_load(&f->released));
	fake_free(f);
}

/* OPENDS_SOURCE_DEVICE_MEMORY: the source sees the caller's buffer. */
static void device_flag(void)
{
	t_phase = "device-memory flag";
	uint8_t *oracle = t_oracle(OBJ, hashpat);
	struct fake *f = fake_new(FAKE_THREAD, OBJ, hashpat);
	opends_source_desc_t d = fake_desc(f);
	d.flags = OPENDS_SOURCE_DEVICE_MEMORY;
	opends_handle_t fh = fake_register(&d);
	uint8_t *buf = t_xmalloc(OBJ);
	f->forbid_lo = buf;
	f->forbid_hi = buf + OBJ;
	EXPECT_SSZ(opends_sync_read(fh, buf, OBJ, 0, 0), (ssize_t)OBJ);
	VERIFY(buf, oracle, OBJ, "read with OPENDS_SOURCE_DEVICE_MEMORY");
	CHECKF(atomic_load(&f->saw_forbidden) > 0, "with OPENDS_SOURCE_DEVICE_MEMORY the source did not get the "
						   "caller's buffer");
	OK(opends_handle_deregister(fh));
	/* without it: only with hostdev is the buffer "device memory" */
	atomic_store(&f->saw_forbidden, 0);
	d.flags = 0;
	fh = fake_register(&d);
	memset(buf, 0, OBJ);
	EXPECT_SSZ(opends_sync_read(fh, buf, OBJ, 0, 0), (ssize_t)OBJ);
	VERIFY(buf, oracle, OBJ, "read without the flag");
	if (hostdev)
		CHECKF(atomic_load(&f->saw_forbidden) == 0, "a source without OPENDS_SOURCE_DEVICE_MEMORY got device "
							    "memory");
	OK(opends_handle_deregister(fh));
	fake_free(f);
	free(buf);
	free(oracle);
}

/* Two objects whose 600-byte names differ only at the end. */
static void long_name(void)
{
	t_phase = "long name";
	static char name[601];
	memset(name, 'p', 600);
	memcpy(name, "fake://", 7);
	memcpy(name + 600 - 8, "-tail-42", 8);
	struct fake *f = fake_new(FAKE_INLINE, OBJ, hashpat);
	opends_source_ops_t ops = fake_ops;
	ops.name = name;
	opends_source_desc_t d = fake_desc(f);
	d.ops = &ops;
	opends_handle_t fh = fake_register(&d);
	char desc[1024];
	OK(opends_describe(fh, desc, sizeof(desc)));
	CHECKF(strstr(desc, "fake://ppp") && strstr(desc, "...") && strstr(desc, "pp-tail-42 ("),
	       "describe does not show the name's head, \"...\" and tail: %s", desc);
	f->fail_errno = ENOENT;
	f->fail_at = 0;
	uint8_t b[16];
	static const char *const fname[] = { "sync", "async", "batch" };
	for (int fam = 0; fam < 3; fam++) {
		EXPECT_SSZ(fam ? do_io(fam == 1 ? ASYNC : BATCH, OPENDS_READ, fh, b, 16, 0, 0)
			       : opends_sync_read(fh, b, 16, 0, 0),
			   -ENOENT);
		const char *det = t_detail();
		CHECKF(strstr(det, "fake://ppp") && strstr(det, "...") && strstr(det, "-tail-42: read of 16 bytes"),
		       "%s detail does not show the name's head and tail: %s", fname[fam], det);
		CHECKF(strstr(det, "at offset 0 failed at offset 0: ") &&
			       strlen(det) < 256 && strstr(det, opends_op_status_error(-ENOENT)),
		       "%s detail does not end with the offsets and the error: %s", fname[fam], det);
	}
	OK(opends_handle_deregister(fh));
	fake_free(f);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(120);
	const char *acc = getenv("OPENDS_ACCEL");
	opends_handle_t fh = NULL;
	opends_source_desc_t d;
	memset(&d, 0, sizeof(d));
	EXPECT_ERR(opends_handle_register_source(&fh, &d), OPENDS_DRIVER_NOT_INITIALIZED);
	t_driver_open();
	fam_open();
	registration();
	for (int m = FAKE_INLINE; m <= FAKE_BLOCKING; m++)
		failures((enum fake_mode)m);
	device_flag();
	long_name();
	fam_close();
	OK(opends_driver_close());
	printf("source errors: registration checks, -errno, -EIO, -EBADF, device flag (%s, %s)\n",
	       getenv("OPENDS_BACKEND") ? getenv("OPENDS_BACKEND") : "auto", acc ? acc : "auto");
	return 0;
}
