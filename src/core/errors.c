/* Error strings, names and the per-thread detail sentence. The codes, their
 * names and strings come from the one list in opends.h (OPENDS_ERROR_LIST). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ods.h"

static _Thread_local char detail[256];
/* ods.h: this thread's calls, held handles and the accelerator driver's
 * result code of its last failure (ods_fail_backend), for the
 * opends_error_t that reports it: taken by ods_err only for the same code,
 * and cleared by every ods_fail, every ods_err (not by ods_ok: a success
 * reports 0 without looking) and at the start of every public call, so a
 * failure never shows an older one's code (one inside a synchronous read,
 * which returns a number and no opends_error_t, is not seen by the next
 * call that fails with the same code and no detail of its own). */
_Thread_local struct ods_calls ods_calls __attribute__((tls_model("initial-exec")));

atomic_bool ods_forked;

static int vfail(int code, const char *fmt, va_list ap)
{
	int n = vsnprintf(detail, sizeof(detail), fmt, ap);
	/* "not open" in a forked child is the fork's doing: say what to do */
	if (code == OPENDS_DRIVER_NOT_INITIALIZED && atomic_load_explicit(&ods_forked, memory_order_relaxed) && n >= 0 &&
	    (size_t)n < sizeof(detail))
		snprintf(detail + n, sizeof(detail) - (size_t)n,
			 " (this process is a child of fork(): call opends_driver_open for a driver of its own)");
	return code;
}

int ods_fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(code, fmt, ap);
	va_end(ap);
	ods_calls.be_code = 0;
	return code;
}

int ods_fail_backend(int code, int backend, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(code, fmt, ap);
	va_end(ap);
	ods_calls.be_code = code;
	ods_calls.be_err = backend;
	return code;
}

int ods_backend_err_take(int code)
{
	int b = code && ods_calls.be_code == code ? ods_calls.be_err : 0;
	ods_calls.be_code = 0;
	return b;
}

OPENDS_API const char *opends_last_error_detail(void)
{
	return detail;
}

/* One entry per code of the list: its name and its string. */
struct code_entry {
	int code;
	const char *name, *str;
};
static const struct code_entry codes[] = {
#define X(name, value, str) { value, "OPENDS_" #name, str },
	OPENDS_ERROR_LIST(X)
#undef X
};

/* The list's entry for a code or its negation; NULL for any other code,
 * with *errnum set to the errno it may be (0 if none). */
static const struct code_entry *lookup(int code, int *errnum)
{
	*errnum = 0;
	if (code == INT32_MIN)
		return NULL;
	if (code < 0) /* what the ssize_t calls return */
		code = -code;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (codes[i].code == code)
			return &codes[i];
	if (code < OPENDS_ERRNO_MAX)
		*errnum = code;
	return NULL;
}

OPENDS_API const char *opends_op_status_error(int code)
{
	int e;
	const struct code_entry *c = lookup(code, &e);
	if (c)
		return c->str;
	/* errno range: glibc's texts are a static table, safe across threads */
	const char *s = e ? strerrordesc_np(e) : NULL;
	return s ? s : "unknown error";
}

OPENDS_API const char *opends_err_name(int code)
{
	int e;
	const struct code_entry *c = lookup(code, &e);
	if (c)
		return c->name;
	const char *s = e ? strerrorname_np(e) : NULL; /* "EIO": static strings */
	return s ? s : "UNKNOWN";
}
