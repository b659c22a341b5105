/*
 * opends_handle_open_url: the scheme picks a built-in source; this file
 * holds what every scheme shares (percent-decoding, query parameters).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/source.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *ods_url_decode(const char *s, size_t n, bool *bad)
{
	*bad = false;
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			*o++ = s[i];
			continue;
		}
		int hi = i + 1 < n ? hexval(s[i + 1]) : -1;
		int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(out);
			*bad = true;
			return NULL;
		}
		*o++ = (char)(hi << 4 | lo);
		i += 2;
	}
	*o = '\0';
	return out;
}

void ods_url_params_free(struct ods_url_param *p, int n)
{
	for (int i = 0; i < n; i++) {
		free(p[i].key);
		free(p[i].val);
	}
	free(p);
}

int ods_url_params(const char *q, struct ods_url_param **out, const char *url)
{
	*out = NULL;
	if (!q || !*q)
		return 0;
	int cap = 1;
	for (const char *c = q; *c; c++)
		cap += *c == '&';
	struct ods_url_param *p = calloc((size_t)cap, sizeof(*p));
	if (!p)
		return -2;
	int n = 0;
	for (const char *c = q; *c;) {
		const char *amp = strchr(c, '&'), *end = amp ? amp : c + strlen(c);
		const char *eq = memchr(c, '=', (size_t)(end - c));
		bool bad = false;
		if (!eq || eq == c) {
			ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: \"%.*s\" in \"%.100s\" is not key=value",
				 (int)(end - c), c, url);
			ods_url_params_free(p, n);
			return -1;
		}
		p[n].key = ods_url_decode(c, (size_t)(eq - c), &bad);
		p[n].val = p[n].key ? ods_url_decode(eq + 1, (size_t)(end - eq - 1), &bad) : NULL;
		if (!p[n].key || !p[n].val) {
			n++;
			ods_url_params_free(p, n);
			if (bad) {
				ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: bad percent escape in \"%.*s\"",
					 (int)(end - c), c);
				return -1;
			}
			return -2;
		}
		for (int i = 0; i < n; i++)
			if (!strcmp(p[i].key, p[n].key)) {
				ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: parameter %s given twice",
					 p[n].key);
				ods_url_params_free(p, n + 1);
				return -1;
			}
		n++;
		c = amp ? amp + 1 : end;
		if (amp && !*c) {
			ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: \"%.100s\" ends with '&'", url);
			ods_url_params_free(p, n);
			return -1;
		}
	}
	*out = p;
	return n;
}

OPENDS_API opends_error_t opends_handle_open_url(opends_handle_t *fh, const char *url, int flags)
{
	ODS_ENTER("opends_handle_open_url");
	if (!fh || !url)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: %s is NULL", fh ? "url" : "fh"),
			       0);
	int acc = flags & O_ACCMODE;
	if (acc == 3 || (flags & ~(O_ACCMODE | O_CREAT)))
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_handle_open_url: flags 0x%x: only O_RDONLY, O_WRONLY or O_RDWR, "
					"with O_CREAT, are accepted",
					(unsigned)flags),
			       0);
	const char *sep = strstr(url, "://");
	if (!sep || sep == url)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: \"%.100s\" has no scheme "
							      "(scheme://...)", url), 0);
	size_t sl = (size_t)(sep - url);
	int backend_err = 0, rc;
	if (sl == 5 && !strncmp(url, "rados", 5))
		rc = ods_url_rados(fh, sep + 3, flags, &backend_err);
	else
		rc = ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: unknown scheme \"%.*s\" (known: rados)",
			      (int)(sl < 32 ? sl : 32), url);
	return ods_err(rc, backend_err);
}
