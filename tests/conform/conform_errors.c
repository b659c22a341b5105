/*
 * conform_errors: API.md "Errors". The code values (cuFile's), the error
 * struct, opends_op_status_error for any code (positive, negated, errno
 * range, unknown: never NULL), opends_err_name, and
 * opends_last_error_detail ("" before any failure on a thread, a sentence
 * naming the argument after one, kept by successful calls). Needs no
 * backend; runs with the driver closed and open.
 */
#include "conform.h"

#include <pthread.h>

static const struct {
	int value;
	opends_op_error_t code;
	const char *name;
} codes[] = {
#define E(n, v) { v, OPENDS_##n, "OPENDS_" #n }
	E(SUCCESS, 0),
	E(DRIVER_NOT_INITIALIZED, 5001),
	E(DRIVER_INVALID_PROPS, 5002),
	E(DRIVER_UNSUPPORTED_LIMIT, 5003),
	E(DRIVER_VERSION_MISMATCH, 5004),
	E(DRIVER_VERSION_READ_ERROR, 5005),
	E(DRIVER_CLOSING, 5006),
	E(PLATFORM_NOT_SUPPORTED, 5007),
	E(IO_NOT_SUPPORTED, 5008),
	E(DEVICE_NOT_SUPPORTED, 5009),
	E(FS_DRIVER_ERROR, 5010),
	E(DEVICE_DRIVER_ERROR, 5011),
	E(POINTER_INVALID, 5012),
	E(MEMORY_TYPE_INVALID, 5013),
	E(POINTER_RANGE_ERROR, 5014),
	E(CONTEXT_MISMATCH, 5015),
	E(INVALID_MAPPING_SIZE, 5016),
	E(INVALID_MAPPING_RANGE, 5017),
	E(INVALID_FILE_TYPE, 5018),
	E(INVALID_FILE_OPEN_FLAG, 5019),
	E(DIO_NOT_SET, 5020),
	E(INVALID_VALUE, 5022),
	E(MEMORY_ALREADY_REGISTERED, 5023),
	E(MEMORY_NOT_REGISTERED, 5024),
	E(PERMISSION_DENIED, 5025),
	E(DRIVER_ALREADY_OPEN, 5026),
	E(HANDLE_NOT_REGISTERED, 5027),
	E(HANDLE_ALREADY_REGISTERED, 5028),
	E(DEVICE_NOT_FOUND, 5029),
	E(INTERNAL_ERROR, 5030),
	E(GETNEWFD_FAILED, 5031),
	E(FS_SETUP_ERROR, 5033),
	E(IO_DISABLED, 5034),
	E(BATCH_SUBMIT_FAILED, 5035),
	E(MEMORY_PINNING_FAILED, 5036),
	E(BATCH_FULL, 5037),
	E(ASYNC_NOT_SUPPORTED, 5038),
	E(NOMEM_ERROR, 5043),
	E(IO_ERROR, 5044),
	E(INVALID_CONTEXT_ERROR, 5047),
#undef E
};

/* the struct API.md gives, field for field */
_Static_assert(sizeof(((opends_error_t *)0)->backend_err) == sizeof(int), "backend_err is an int");
_Static_assert(offsetof(opends_error_t, err) == 0, "err comes first");
_Static_assert(sizeof(opends_async_future_t) <= 64, "a future is at most 64 bytes");
_Static_assert(_Alignof(opends_async_future_t) >= 8, "a future is 8-byte aligned");

static void *fresh_thread(void *arg)
{
	(void)arg;
	const char *d = opends_last_error_detail();
	C_TRUE(d && !strcmp(d, ""), "last_error_detail on a thread with no failure: \"%s\", expected \"\"",
	       d ? d : "(NULL)");
	return NULL;
}

static void strings(void)
{
	c_case = "strings";
	for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++) {
		C_TRUE((int)codes[i].code == codes[i].value, "%s is %d, cuFile's value is %d", codes[i].name,
		       (int)codes[i].code, codes[i].value);
		const char *s = opends_op_status_error(codes[i].value), *m = opends_op_status_error(-codes[i].value);
		C_TRUE(s && *s, "op_status_error(%d) is NULL or empty", codes[i].value);
		C_TRUE(m && s && !strcmp(s, m), "op_status_error(-%d) differs from op_status_error(%d)",
		       codes[i].value, codes[i].value);
		const char *n = opends_err_name(codes[i].value), *nn = opends_err_name(-codes[i].value);
		C_TRUE(n && !strcmp(n, codes[i].name), "err_name(%d) is \"%s\", expected %s", codes[i].value,
		       n ? n : "(NULL)", codes[i].name);
		C_TRUE(nn && n && !strcmp(n, nn), "err_name(-%d) differs", codes[i].value);
	}
	/* the errno range (< 5000): the system's message */
	static const int errs[] = { EIO, EBADF, ENOSPC, ENOENT, ETIMEDOUT, EFBIG };
	for (size_t i = 0; i < sizeof(errs) / sizeof(*errs); i++) {
		const char *s = opends_op_status_error(-errs[i]), *p = opends_op_status_error(errs[i]);
		C_TRUE(s && p && !strcmp(s, p) && !strcmp(s, strerror(errs[i])),
		       "op_status_error(-%d) is \"%s\", expected strerror's \"%s\"", errs[i], s ? s : "(NULL)",
		       strerror(errs[i]));
	}
	C_TRUE(!strcmp(opends_err_name(-EIO), "EIO"), "err_name(-EIO) is %s", opends_err_name(-EIO));
	C_TRUE(!strcmp(opends_err_name(EBADF), "EBADF"), "err_name(EBADF) is %s", opends_err_name(EBADF));
	/* unknown codes, the unused 5021 and 5032 included, and the extremes */
	static const int unknown[] = { 5021, 5032, 5045, 5999, 6000, 4999, INT_MAX, INT_MIN, -INT_MAX };
	for (size_t i = 0; i < sizeof(unknown) / sizeof(*unknown); i++) {
		const char *s = opends_op_status_error(unknown[i]);
		C_TRUE(s != NULL && *s, "op_status_error(%d) is NULL or empty", unknown[i]);
		C_TRUE(opends_err_name(unknown[i]) != NULL, "err_name(%d) is NULL", unknown[i]);
	}
	C_TRUE(!strcmp(opends_err_name(5021), "UNKNOWN"), "err_name(5021) is %s, expected UNKNOWN",
	       opends_err_name(5021));
	C_TRUE(!strcmp(opends_op_status_error(6000), "unknown error"), "op_status_error(6000) is \"%s\"",
	       opends_op_status_error(6000));
}

static void detail(void)
{
	c_case = "detail";
	pthread_t t;
	pthread_create(&t, NULL, fresh_thread, NULL);
	pthread_join(t, NULL);
	fresh_thread(NULL); /* this thread has not failed yet either */
	/* a failure names the argument at fault */
	C_ERR(opends_driver_open(), OPENDS_SUCCESS);
	C_ERR(opends_driver_get_properties(NULL), OPENDS_INVALID_VALUE);
	const char *d = opends_last_error_detail();
	C_TRUE(strstr(d, "props"), "detail \"%s\" does not name props", d);
	/* a successful call keeps it */
	opends_drv_props_t p;
	C_OK(opends_driver_get_properties(&p));
	C_TRUE(strstr(opends_last_error_detail(), "props"), "a successful call changed the detail to \"%s\"",
	       opends_last_error_detail());
	/* the detail is the calling thread's */
	pthread_create(&t, NULL, fresh_thread, NULL);
	pthread_join(t, NULL);
	/* success: backend_err 0; a failure of the library's own: 0 too */
	C_TRUE(opends_driver_get_properties(&p).backend_err == 0, "success with backend_err != 0");
	C_TRUE(opends_driver_get_properties(NULL).backend_err == 0, "an argument error with backend_err != 0");
	/* a failed system call: its errno */
	opends_handle_t fh;
	opends_error_t e = opends_handle_register(&fh, -1);
	C_TRUE(e.err == OPENDS_INVALID_VALUE && e.backend_err == EBADF,
	       "handle_register(fd -1): %s / backend_err %d, expected OPENDS_INVALID_VALUE / EBADF (%d)",
	       c_name(e.err), e.backend_err, EBADF);
	C_OK(opends_driver_close());
}

int main(void)
{
	strings();
	detail();
	return c_done("conform_errors");
}
