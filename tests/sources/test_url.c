/*
 * test_url: opends_handle_open_url and opends_handle_register_rados where
 * librados cannot be loaded (OPENDS_RADOS_LIBRARY names a missing file):
 *  - malformed URLs, unknown schemes, parameters and bad values are
 *    OPENDS_INVALID_VALUE with a detail, before any library is needed;
 *  - flags other than open(2)'s access modes and O_CREAT are refused;
 *  - a well-formed rados URL is OPENDS_PLATFORM_NOT_SUPPORTED, and the
 *    detail names the library; so is register_rados;
 *  - opends_source_libraries names the missing librados.
 * Needs no Ceph: runs everywhere.
 */
#include "../common.h"

static void bad(const char *url, int flags, const char *in_detail)
{
	opends_handle_t fh = NULL;
	opends_error_t e = opends_handle_open_url(&fh, url, flags);
	CHECKF(e.err == OPENDS_INVALID_VALUE, "open_url(\"%s\", 0x%x): %d (%s), want OPENDS_INVALID_VALUE", url, flags,
	       e.err, t_errname(e.err));
	CHECK_DETAIL();
	if (in_detail)
		CHECKF(strstr(t_detail(), in_detail), "open_url(\"%s\"): the detail does not name %s: %s", url,
		       in_detail, t_detail());
	CHECK(fh == NULL);
}

int main(void)
{
	t_watchdog(60);
	setenv("OPENDS_RADOS_LIBRARY", "/nonexistent/opends-test/librados.so.2", 1);
	opends_handle_t fh = NULL;
	EXPECT_ERR(opends_handle_open_url(&fh, "rados://p/o", O_RDONLY), OPENDS_DRIVER_NOT_INITIALIZED);
	t_driver_open();
	EXPECT_ERR(opends_handle_open_url(NULL, "rados://p/o", O_RDONLY), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_handle_open_url(&fh, NULL, O_RDONLY), OPENDS_INVALID_VALUE);
	bad("", O_RDONLY, NULL);
	bad("rados:/p/o", O_RDONLY, "scheme");
	bad("://p/o", O_RDONLY, "scheme");
	bad("s3://bucket/key", O_RDONLY, "unknown scheme");
	bad("file:///etc/passwd", O_RDONLY, "unknown scheme");
	bad("rados://", O_RDONLY, "rados://POOL/OBJECT");
	bad("rados://pool", O_RDONLY, "rados://POOL/OBJECT");
	bad("rados://pool/", O_RDONLY, "rados://POOL/OBJECT");
	bad("rados:///obj", O_RDONLY, "rados://POOL/OBJECT");
	bad("rados://pool?conf=x/obj", O_RDONLY, "rados://POOL/OBJECT");
	bad("rados://pool/o%zz", O_RDONLY, "percent");
	bad("rados://pool/o%2", O_RDONLY, "percent");
	bad("rados://pool/o%00x", O_RDONLY, "percent");
	bad("rados://pool/obj?op_timeout=abc", O_RDONLY, "op_timeout");
	bad("rados://pool/obj?op_timeout=-1", O_RDONLY, "op_timeout");
	bad("rados://pool/obj?op_timeout=", O_RDONLY, "op_timeout");
	bad("rados://pool/obj?op_timeout=99999999999", O_RDONLY, "op_timeout");
	/* numbers as the configuration variables take them: plain decimal
	 * digits, no sign, spaces or leading zeros (strtoul would take these) */
	bad("rados://pool/obj?op_timeout=+5", O_RDONLY, "op_timeout");
	bad("rados://pool/obj?op_timeout=%205", O_RDONLY, "op_timeout");
	bad("rados://pool/obj?op_timeout=05", O_RDONLY, "op_timeout");
	bad("rados://pool/obj?op_timeout=5%20", O_RDONLY, "op_timeout");
	bad("rados://pool/obj?op_timeout=18446744073709551616", O_RDONLY, "op_timeout"); /* 2^64 */
	bad("rados://pool/obj?op_timeout=0x10", O_RDONLY, "op_timeout");
	bad("rados://pool/obj?striper=2", O_RDONLY, "striper");
	bad("rados://pool/obj?colour=blue", O_RDONLY, "colour");
	bad("rados://pool/obj?conf", O_RDONLY, "key=value");
	bad("rados://pool/obj?=x", O_RDONLY, "key=value");
	bad("rados://pool/obj?id=a&id=b", O_RDONLY, "twice");
	bad("rados://pool/obj?id=a&", O_RDONLY, "&");
	bad("rados://pool/obj?conf=%zz", O_RDONLY, "percent");
	bad("rados://pool/obj", O_RDONLY | O_TRUNC, "flags");
	bad("rados://pool/obj", O_RDONLY | O_APPEND, "flags");
	bad("rados://pool/obj", O_ACCMODE, "flags");

	/* well-formed: the library is what is missing */
	const char *good[] = { "rados://pool/obj", "rados://p%20q/dir%2Fobj%25?conf=%2Fetc%2Fceph%2Fceph.conf",
			       "rados://pool/a/b/c?id=admin&ns=n1&op_timeout=0&striper=1", "rados://pool/obj?ns=" };
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
		fh = NULL;
		opends_error_t e = opends_handle_open_url(&fh, good[i], O_RDWR | O_CREAT);
		CHECKF(e.err == OPENDS_PLATFORM_NOT_SUPPORTED, "open_url(\"%s\"): %d (%s), want "
							       "OPENDS_PLATFORM_NOT_SUPPORTED", good[i], e.err,
		       t_errname(e.err));
		CHECKF(strstr(t_detail(), "/nonexistent/opends-test/librados.so.2"), "the detail does not name the "
										      "library: %s", t_detail());
		CHECK(fh == NULL);
	}
	int dummy;
	EXPECT_ERR(opends_handle_register_rados(&fh, &dummy, "obj", 0), OPENDS_PLATFORM_NOT_SUPPORTED);
	CHECKF(strstr(t_detail(), "librados.so.2"), "the detail does not name the library: %s", t_detail());
	EXPECT_ERR(opends_handle_register_rados(&fh, NULL, "obj", 0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_handle_register_rados(&fh, &dummy, "", 0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_handle_register_rados(&fh, &dummy, "obj", 0x8), OPENDS_INVALID_VALUE);
	OK(opends_driver_close());

	/* opends-info's list: a missing librados is named, with the path it was looked for at */
	char libs[1024];
	OK(opends_source_libraries(libs, sizeof(libs)));
	CHECKF(strstr(libs, "librados: not found: ") && strstr(libs, "/nonexistent/opends-test/librados.so.2"),
	       "source libraries: %s", libs);
	CHECKF(strstr(libs, "\nlibcephfs: "), "source libraries lack libcephfs: %s", libs);
	CHECKF(libs[strlen(libs) - 1] != '\n', "source libraries end with a newline");
	char tiny[8];
	OK(opends_source_libraries(tiny, sizeof(tiny)));
	CHECKF(strlen(tiny) == 7 && !strncmp(tiny, "librado", 7), "a short buffer: \"%s\"", tiny);
	EXPECT_ERR(opends_source_libraries(NULL, 10), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_source_libraries(libs, 0), OPENDS_INVALID_VALUE);
	printf("url: malformed URLs refused with details; a missing librados is named\n");
	return 0;
}
