/*
 * A reader for cuFile's configuration file (cufile.json): JSON with // and
 * block comments, as NVIDIA ships it. It hands every leaf to a callback
 * with its dotted path ("properties.io_batchsize"); arrays of numbers come
 * whole. config.c decides what each key means. Nothing here allocates
 * beyond the file's text.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dropin.h"

struct jp {
	const char *s, *end;
	cfd_json_fn fn;
	void *arg;
	int depth;
};

static void skip(struct jp *p)
{
	while (p->s < p->end) {
		if (isspace((unsigned char)*p->s)) {
			p->s++;
		} else if (p->s + 1 < p->end && p->s[0] == '/' && p->s[1] == '/') {
			while (p->s < p->end && *p->s != '\n')
				p->s++;
		} else if (p->s + 1 < p->end && p->s[0] == '/' && p->s[1] == '*') {
			const char *e = p->s + 2;
			while (e + 1 < p->end && !(e[0] == '*' && e[1] == '/'))
				e++;
			p->s = e + 1 < p->end ? e + 2 : p->end;
		} else {
			break;
		}
	}
}

static bool eat(struct jp *p, char c)
{
	skip(p);
	if (p->s < p->end && *p->s == c) {
		p->s++;
		return true;
	}
	return false;
}

/* A string into out (cut at outlen - 1); escapes kept simple: \uXXXX
 * becomes '?'. */
static bool string(struct jp *p, char *out, size_t outlen)
{
	size_t n = 0;
	if (!eat(p, '"'))
		return false;
	while (p->s < p->end && *p->s != '"') {
		char c = *p->s++;
		if (c == '\\' && p->s < p->end) {
			c = *p->s++;
			switch (c) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'u':
				c = '?';
				for (int i = 0; i < 4 && p->s < p->end; i++)
					p->s++;
				break;
			default: break; /* \" \\ \/ */
			}
		}
		if (n + 1 < outlen)
			out[n++] = c;
	}
	if (outlen)
		out[n] = 0;
	return p->s < p->end && *p->s++ == '"';
}

/* A JSON number, read by its grammar (-? digits (. digits)? ([eE] [+-]?
 * digits)?) rather than strtod: strtod follows the program's LC_NUMERIC,
 * so after setlocale(LC_NUMERIC, "de_DE.UTF-8") it stops at '.' and reads
 * "1048576,4194304" as one number; JSON is locale-free. Integers up to
 * 2^53 (all cufile.json holds) are exact; fractions are near enough (the
 * keys read want whole numbers and refuse others). */
static bool number(struct jp *p, double *v)
{
	skip(p);
	const char *c = p->s, *end = p->end;
	bool neg = c < end && *c == '-';
	c += neg;
	if (c >= end || !isdigit((unsigned char)*c))
		return false;
	uint64_t mant = 0; /* the first 19 significant digits */
	int digits = 0, exp10 = 0;
	for (; c < end && isdigit((unsigned char)*c); c++) {
		if (digits < 19) {
			mant = mant * 10 + (uint64_t)(*c - '0');
			digits += mant != 0;
		} else {
			exp10++; /* a digit past the 19th: only its place counts */
		}
	}
	if (c < end && *c == '.') {
		c++;
		if (c >= end || !isdigit((unsigned char)*c))
			return false;
		for (; c < end && isdigit((unsigned char)*c); c++) {
			if (digits < 19) {
				mant = mant * 10 + (uint64_t)(*c - '0');
				digits += mant != 0;
				exp10--;
			}
		}
	}
	if (c < end && (*c == 'e' || *c == 'E')) {
		c++;
		bool eneg = c < end && (*c == '-' || *c == '+') ? *c++ == '-' : false;
		if (c >= end || !isdigit((unsigned char)*c))
			return false;
		int e = 0;
		for (; c < end && isdigit((unsigned char)*c); c++)
			if (e < 100000)
				e = e * 10 + (*c - '0');
		exp10 += eneg ? -e : e;
	}
	double x = (double)mant;
	/* scale by 10^exp10; past the range of a double it ends at inf or 0,
	 * which the range checks of the keys refuse */
	for (; exp10 > 0 && x != 0 && x <= 1e300; exp10--)
		x *= 10;
	if (exp10 > 0 && x != 0)
		x *= 1e300 * 1e10; /* inf */
	for (; exp10 < 0 && x != 0; exp10++)
		x /= 10;
	*v = neg ? -x : x;
	p->s = c;
	return true;
}

static bool word(struct jp *p, const char *w)
{
	size_t n = strlen(w);
	skip(p);
	if ((size_t)(p->end - p->s) >= n && !memcmp(p->s, w, n)) {
		p->s += n;
		return true;
	}
	return false;
}

static bool value(struct jp *p, char *path, size_t plen);

static bool object(struct jp *p, char *path, size_t plen)
{
	size_t base = strlen(path);
	if (eat(p, '}'))
		return true;
	do {
		char key[128];
		if (!string(p, key, sizeof key) || !eat(p, ':'))
			return false;
		if (base + 1 + strlen(key) < plen)
			snprintf(path + base, plen - base, "%s%s", base ? "." : "", key);
		if (!value(p, path, plen))
			return false;
		path[base] = 0;
	} while (eat(p, ','));
	return eat(p, '}');
}

static bool array(struct jp *p, const char *path)
{
	struct cfd_json_val v = { .kind = CFD_JSON_ARRAY };
	bool numbers = true;
	if (!eat(p, ']')) {
		do {
			skip(p);
			double d;
			if (p->s < p->end && (*p->s == '-' || isdigit((unsigned char)*p->s)) && number(p, &d)) {
				if (v.n < CFD_JSON_ARRAY_MAX)
					v.arr[v.n] = d;
				v.n++;
			} else {
				/* strings, objects: skipped, the array is not numbers */
				char tmp[2];
				numbers = false;
				skip(p);
				if (p->s < p->end && *p->s == '"' ? !string(p, tmp, sizeof tmp)
								   : !value(p, (char[2]){ 0 }, 2))
					return false;
			}
		} while (eat(p, ','));
		if (!eat(p, ']'))
			return false;
	}
	if (numbers && v.n <= CFD_JSON_ARRAY_MAX && *path)
		p->fn(path, &v, p->arg);
	return true;
}

static bool value(struct jp *p, char *path, size_t plen)
{
	struct cfd_json_val v = { 0 };
	char str[256];
	bool ok = true;
	if (++p->depth > 32)
		return false;
	skip(p);
	if (p->s >= p->end) {
		ok = false;
	} else if (*p->s == '{') {
		p->s++;
		ok = object(p, path, plen);
	} else if (*p->s == '[') {
		p->s++;
		ok = array(p, path);
	} else if (*p->s == '"') {
		ok = string(p, str, sizeof str);
		v.kind = CFD_JSON_STRING;
		v.str = str;
		if (ok && *path)
			p->fn(path, &v, p->arg);
	} else if (word(p, "true") || word(p, "false")) {
		v.kind = CFD_JSON_BOOL;
		v.b = p->s[-1] == 'e' && p->s[-2] == 'u';
		if (*path)
			p->fn(path, &v, p->arg);
	} else if (word(p, "null")) {
		/* nothing */
	} else {
		v.kind = CFD_JSON_NUMBER;
		ok = number(p, &v.num);
		if (ok && *path)
			p->fn(path, &v, p->arg);
	}
	p->depth--;
	return ok;
}

int cfd_json_read(const char *file, cfd_json_fn fn, void *arg)
{
	FILE *f = fopen(file, "re");
	if (!f)
		return -1;
	/* one byte more than the cap: a file that fills it is refused whole
	 * (not cut), and the text ends in a NUL (number() also stops at the
	 * end of the data) */
	enum { CAP = 1 << 20 };
	char *text = malloc(CAP + 1);
	size_t n = text ? fread(text, 1, CAP + 1, f) : 0;
	fclose(f);
	if (!text)
		return -1;
	if (n > CAP) {
		free(text);
		return -1;
	}
	text[n] = 0;
	struct jp p = { text, text + n, fn, arg, 0 };
	char path[256] = "";
	bool ok = value(&p, path, sizeof path);
	skip(&p);
	ok = ok && p.s == p.end;
	free(text);
	return ok ? 0 : -1;
}
