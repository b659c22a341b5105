/* Error strings, names and the per-thread detail sentence. The codes, their
 * names and strings come from the one list in opends.h (OPENDS_ERROR_LIST). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ods.h"

static _Thread_local char detail[256];

int ods_fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return code;
}

OPENDS_API const char *opends_last_error_detail(void)
{
	return detail;
}

OPENDS_API const char *opends_op_status_error(int code)
{
	/* Negated values are what the ssize_t calls return; fold them. */
	if (code < 0) {
		if (code == INT32_MIN)
			return "unknown error";
		code = -code;
	}
	switch (code) {
#define X(name, value, str) \
	case value:         \
		return str;
		OPENDS_ERROR_LIST(X)
#undef X
	default:
		break;
	}
	if (code < OPENDS_ERRNO_MAX) {
		/* errno range: strerror's text is stable per errno on glibc
		 * (a static table), so returning it is safe across threads. */
		const char *s = strerrordesc_np(code);
		return s ? s : "unknown error";
	}
	return "unknown error";
}

OPENDS_API const char *opends_err_name(int code)
{
	if (code < 0) {
		if (code == INT32_MIN)
			return "UNKNOWN";
		code = -code;
	}
	switch (code) {
#define X(name, value, str) \
	case value:         \
		return "OPENDS_" #name;
		OPENDS_ERROR_LIST(X)
#undef X
	default:
		break;
	}
	if (code < OPENDS_ERRNO_MAX) {
		/* glibc's table of errno names ("EIO"); static strings */
		const char *s = strerrorname_np(code);
		return s ? s : "UNKNOWN";
	}
	return "UNKNOWN";
}
