/* The safetensors header indexer (include/opends/tensors.h): one pass over
 * the JSON that fills arrays, instead of ~10 Python objects per tensor. It parses the
 * subset of JSON a safetensors writer produces and gives up (returns 1,
 * the Python parser decides) on anything else, so that whatever it accepts
 * the Python parser accepts with the same tensors:
 *   - the top level: an object; "__metadata__" an object (any JSON inside,
 *     skipped) or null, at most once;
 *   - each tensor: exactly the keys dtype (a known name), shape (a list of
 *     non-negative integers) and data_offsets ([begin, end] integers), once
 *     each; integers of at most 18 digits, no sign, fraction or exponent;
 *   - names: strict UTF-8, JSON escapes; no \u0000 (names come back
 *     '\0'-separated), no lone surrogate (json and orjson differ there);
 *   - no duplicate name; offsets within the data region, end >= begin,
 *     shape x bits == (end - begin) x 8; non-empty tensors in file order,
 *     not overlapping (other orders: the Python parser sorts and checks).
 * safetensors' own rules (safetensors/src/tensor.rs) and the Python
 * parser's (python/opends/safetensors.py _parse) are the reference; the
 * differential test is python/tests/test_stindex.py. */
#include "st_index.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NOT_INDEXED 1
#define MAX_DEPTH 64 /* of __metadata__'s nesting: deeper is the Python parser's call */


static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * elem);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static int put(struct parser *p, struct bytes *b, const void *src, size_t n)
{
	if (reserve((void **)&b->p, &b->cap, b->len + n, 1)) {
		p->oom = 1;
		return -1;
	}
	memcpy(b->p + b->len, src, n);
	b->len += n;
	return 0;
}


static inline bool eat(struct parser *p, unsigned char c)
{
	if (p->s < p->e && *p->s == c) { /* a writer's compact JSON: no space */
		p->s++;
		return true;
	}
	ws(p);
	if (p->s < p->e && *p->s == c) {
		p->s++;
		return true;
	}
	return false;
}

/* One strict UTF-8 sequence at s (first byte >= 0x80): its length, or 0
 * (what Python's utf-8 decoder refuses: overlong, surrogate, > U+10FFFF). */
static size_t utf8_len(const unsigned char *s, const unsigned char *e)
{
	unsigned c = s[0];
	size_t n;
	unsigned lo = 0x80, hi = 0xBF;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		n = 3;
		if (c == 0xE0)
			lo = 0xA0;
		if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4;
		if (c == 0xF0)
			lo = 0x90;
		if (c == 0xF4)
			hi = 0x8F;
	} else
		return 0;
	if ((size_t)(e - s) < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return n;
}

static int hex4(const unsigned char *s, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned c = s[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

/* A JSON string at p (after ws), unescaped into out (NULL: only checked). */
static int string(struct parser *p, struct bytes *out)
{
	ws(p);
	if (p->s >= p->e || *p->s != '"')
		return -1;
	p->s++;
	for (;;) {
		const unsigned char *run = p->s;
		while (p->s < p->e && *p->s >= 0x20 && *p->s != '"' && *p->s != '\\' && *p->s < 0x80)
			p->s++;
		if (out && p->s > run && put(p, out, run, (size_t)(p->s - run)))
			return -1;
		if (p->s >= p->e || *p->s < 0x20)
			return -1; /* unterminated, or a raw control character */
		unsigned c = *p->s;
		if (c == '"') {
			p->s++;
			return 0;
		}
		if (c >= 0x80) {
			size_t n = utf8_len(p->s, p->e);
			if (!n || (out && put(p, out, p->s, n)))
				return -1;
			p->s += n;
			continue;
		}
		/* an escape */
		if (p->e - p->s < 2)
			return -1;
		char one;
		switch (p->s[1]) {
		case '"': one = '"'; break;
		case '\\': one = '\\'; break;
		case '/': one = '/'; break;
		case 'b': one = '\b'; break;
		case 'f': one = '\f'; break;
		case 'n': one = '\n'; break;
		case 'r': one = '\r'; break;
		case 't': one = '\t'; break;
		case 'u': one = 0; break;
		default: return -1;
		}
		if (one) {
			if (out && put(p, out, &one, 1))
				return -1;
			p->s += 2;
			continue;
		}
		unsigned u, lo;
		if (p->e - p->s < 6 || hex4(p->s + 2, &u) || u == 0)
			return -1; /* \u0000: names come back '\0'-separated */
		p->s += 6;
		if (u >= 0xDC00 && u <= 0xDFFF)
			return -1; /* a lone low surrogate */
		if (u >= 0xD800 && u <= 0xDBFF) {
			if (p->e - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u' || hex4(p->s + 2, &lo) || lo < 0xDC00 ||
			    lo > 0xDFFF)
				return -1; /* a lone high surrogate */
			p->s += 6;
			u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
		}
		char enc[4];
		size_t n;
		if (u < 0x80) {
			enc[0] = (char)u;
			n = 1;
		} else if (u < 0x800) {
			enc[0] = (char)(0xC0 | u >> 6);
			enc[1] = (char)(0x80 | (u & 0x3F));
			n = 2;
		} else if (u < 0x10000) {
			enc[0] = (char)(0xE0 | u >> 12);
			enc[1] = (char)(0x80 | (u >> 6 & 0x3F));
			enc[2] = (char)(0x80 | (u & 0x3F));
			n = 3;
		} else {
			enc[0] = (char)(0xF0 | u >> 18);
			enc[1] = (char)(0x80 | (u >> 12 & 0x3F));
			enc[2] = (char)(0x80 | (u >> 6 & 0x3F));
			enc[3] = (char)(0x80 | (u & 0x3F));
			n = 4;
		}
		if (out && put(p, out, enc, n))
			return -1;
	}
}

/* A non-negative integer of at most 18 digits (no sign, fraction or
 * exponent: the Python parser's int, well inside int64). */
static int unsigned_int(struct parser *p, int64_t *v)
{
	ws(p);
	const unsigned char *d = p->s;
	int64_t x = 0;
	while (p->s < p->e && *p->s >= '0' && *p->s <= '9' && p->s - d < 18)
		x = x * 10 + (*p->s++ - '0');
	size_t n = (size_t)(p->s - d);
	if (n == 0 || (n > 1 && d[0] == '0')) /* (a 19th digit is refused below) */
		return -1;
	if (p->s < p->e && (*p->s == '.' || *p->s == 'e' || *p->s == 'E' || (*p->s >= '0' && *p->s <= '9')))
		return -1;
	*v = x;
	return 0;
}

static bool literal(struct parser *p, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(p->e - p->s) < n || memcmp(p->s, word, n))
		return false;
	p->s += n;
	return true;
}

/* Any standard JSON value (for __metadata__'s contents). */
static int skip_value(struct parser *p, int depth)
{
	ws(p);
	if (p->s >= p->e || depth > MAX_DEPTH)
		return -1;
	unsigned c = *p->s;
	if (c == '"')
		return string(p, NULL);
	if (c == '{' || c == '[') {
		unsigned close = c == '{' ? '}' : ']';
		p->s++;
		if (eat(p, (unsigned char)close))
			return 0;
		do {
			if (c == '{' && (string(p, NULL) || !eat(p, ':')))
				return -1;
			if (skip_value(p, depth + 1))
				return -1;
		} while (eat(p, ','));
		return eat(p, (unsigned char)close) ? 0 : -1;
	}
	if (literal(p, "true") || literal(p, "false") || literal(p, "null"))
		return 0;
	/* a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
	if (p->s < p->e && *p->s == '-')
		p->s++;
	const unsigned char *d = p->s;
	while (p->s < p->e && *p->s >= '0' && *p->s <= '9')
		p->s++;
	if (p->s == d || (p->s - d > 1 && *d == '0'))
		return -1;
	if (p->s < p->e && *p->s == '.') {
		d = ++p->s;
		while (p->s < p->e && *p->s >= '0' && *p->s <= '9')
			p->s++;
		if (p->s == d)
			return -1;
	}
	if (p->s < p->e && (*p->s == 'e' || *p->s == 'E')) {
		p->s++;
		if (p->s < p->e && (*p->s == '+' || *p->s == '-'))
			p->s++;
		d = p->s;
		while (p->s < p->e && *p->s >= '0' && *p->s <= '9')
			p->s++;
		if (p->s == d)
			return -1;
	}
	return 0;
}


static bool is(const struct bytes *k, const char *word)
{
	return k->len == strlen(word) && !memcmp(k->p, word, k->len);
}

int st_grow(struct state *st, size_t need)
{
	opends_safetensors_index_t *ix = st->ix;
	size_t c = st->cap_n;
	if (need <= c)
		return 0;
	while (c < need)
		c = c ? c * 2 : 256;
	void *a = realloc(ix->dtype, c), *b = realloc(ix->ndim, c);
	if (a)
		ix->dtype = a;
	if (b)
		ix->ndim = b;
	void *q[4] = {realloc(ix->begin, c * 8), realloc(ix->end, c * 8), realloc(ix->numel, c * 8),
		      realloc(st->name_at, c * 8)};
	if (q[0])
		ix->begin = q[0];
	if (q[1])
		ix->end = q[1];
	if (q[2])
		ix->numel = q[2];
	if (q[3])
		st->name_at = q[3];
	if (!a || !b || !q[0] || !q[1] || !q[2] || !q[3]) {
		st->p.oom = 1;
		return -1;
	}
	st->cap_n = c;
	return 0;
}

/* An entry's key as a bit: 1 dtype, 2 shape, 4 data_offsets, 0 another
 * key or no string. The keys as writers spell them are matched in place;
 * others (an escape in them) are unescaped first. */
static unsigned entry_key(struct state *st)
{
	static const struct {
		const char *s;
		size_t n;
	} keys[] = {{"\"dtype\"", 7}, {"\"shape\"", 7}, {"\"data_offsets\"", 14}};
	struct parser *p = &st->p;
	ws(p);
	if (p->e - p->s > 14) { /* by the second character, then one compare */
		unsigned i = p->s[1] == 's' ? 1 : p->s[1] == 'd' ? (p->s[2] == 't' ? 0 : 2) : 3;
		if (i < 3 && !memcmp(p->s, keys[i].s, keys[i].n)) {
			p->s += keys[i].n;
			return 1u << i;
		}
	}
	st->key.len = 0;
	if (string(p, &st->key))
		return 0;
	return is(&st->key, "dtype") ? 1 : is(&st->key, "shape") ? 2 : is(&st->key, "data_offsets") ? 4 : 0;
}

/* A dtype value: its index in the caller's list, or -1. A name without
 * escapes (as writers spell them) is matched in place. */
static int dtype_value(struct state *st)
{
	struct parser *p = &st->p;
	ws(p);
	const unsigned char *q = p->s + 1, *e = p->s < p->e && *p->s == '"' ? memchr(q, '"', (size_t)(p->e - q)) : NULL;
	const unsigned char *name = q;
	size_t len = e ? (size_t)(e - q) : 0;
	if (!e || memchr(q, '\\', len)) { /* no string, or an escape: unescape first */
		st->key.len = 0;
		if (string(p, &st->key))
			return -1;
		name = (const unsigned char *)st->key.p;
		len = st->key.len;
	} else
		p->s = e + 1;
	for (int k = 0; k < st->ndtypes; k++)
		if (st->dt_len[k] == len && len && st->dt_name[k][0] == (char)name[0] && !memcmp(st->dt_name[k], name, len))
			return k;
	return -1;
}

/* One tensor's {"dtype", "shape", "data_offsets"} into slot i. */
static int entry(struct state *st, uint64_t i)
{
	struct parser *p = &st->p;
	opends_safetensors_index_t *ix = st->ix;
	unsigned seen = 0;
	int64_t begin = 0, end = 0;
	uint64_t numel = 1;
	int dt = -1;
	if (!eat(p, '{'))
		return -1;
	do {
		unsigned bit = entry_key(st);
		if (!eat(p, ':'))
			return -1;
		if (!bit || (seen & bit))
			return -1; /* another key, or one twice: the Python parser's call */
		seen |= bit;
		if (bit == 1) {
			dt = dtype_value(st);
			if (dt < 0)
				return -1;
		} else if (bit == 2) {
			if (!eat(p, '['))
				return -1;
			unsigned nd = 0;
			if (!eat(p, ']')) {
				do {
					int64_t d;
					if (unsigned_int(p, &d) || nd == 255)
						return -1;
					if (reserve((void **)&ix->dims, &st->cap_dims, ix->ndims + 1, sizeof(int64_t))) {
						p->oom = 1;
						return -1;
					}
					ix->dims[ix->ndims++] = d;
					nd++;
					if (__builtin_mul_overflow(numel, (uint64_t)d, &numel))
						return -1;
				} while (eat(p, ','));
				if (!eat(p, ']'))
					return -1;
			}
			ix->ndim[i] = (uint8_t)nd;
		} else {
			if (!eat(p, '[') || unsigned_int(p, &begin) || !eat(p, ',') || unsigned_int(p, &end) || !eat(p, ']'))
				return -1;
		}
	} while (eat(p, ','));
	if (!eat(p, '}') || seen != 7)
		return -1;
	uint64_t want;
	if (end < begin || (uint64_t)end > st->data_len || __builtin_mul_overflow(numel, st->bits[dt], &want) ||
	    want != (uint64_t)(end - begin) * 8)
		return -1;
	if (end > begin) {
		if (begin < st->last_end)
			return -1; /* out of file order or overlapping: the Python parser sorts */
		if (st->first_begin < 0)
			st->first_begin = begin;
		st->last_end = end;
	}
	ix->dtype[i] = (uint8_t)dt;
	ix->begin[i] = begin;
	ix->end[i] = end;
	ix->numel[i] = (int64_t)numel;
	return 0;
}

static uint64_t hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static size_t name_len(const struct state *st, uint64_t i)
{
	uint64_t next = i + 1 < st->ix->n ? st->name_at[i + 1] : st->names.len;
	return (size_t)(next - st->name_at[i] - 1);
}

/* Any name twice: -1 (safetensors rejects it; the Python parser says so). */
static int no_duplicates(struct state *st)
{
	uint64_t n = st->ix->n;
	size_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	uint64_t *slot = calloc(cap, sizeof *slot);
	if (!slot) {
		st->p.oom = 1;
		return -1;
	}
	int rc = 0;
	for (uint64_t i = 0; i < n && !rc; i++) {
		const char *a = st->names.p + st->name_at[i];
		size_t len = name_len(st, i);
		for (size_t h = hash(a, len) & (cap - 1);; h = (h + 1) & (cap - 1)) {
			if (!slot[h]) {
				slot[h] = i + 1;
				break;
			}
			uint64_t j = slot[h] - 1;
			if (name_len(st, j) == len && !memcmp(st->names.p + st->name_at[j], a, len)) {
				rc = -1;
				break;
			}
		}
	}
	free(slot);
	return rc;
}

/* One member of the top-level object at p (a name expected): a tensor, or
 * "__metadata__". */
static int member(struct state *st)
{
	struct parser *p = &st->p;
	opends_safetensors_index_t *ix = st->ix;
	size_t at = st->names.len;
	if (string(p, &st->names) || !eat(p, ':'))
		return -1;
	if (st->names.len - at == 12 && !memcmp(st->names.p + at, "__metadata__", 12)) {
		st->names.len = at;
		ws(p);
		if (st->metas++ || (!literal(p, "null") && (p->s >= p->e || *p->s != '{' || skip_value(p, 0))))
			return -1;
		return 0;
	}
	if (put(p, &st->names, "", 1) || st_grow(st, ix->n + 1))
		return -1;
	st->name_at[ix->n] = at;
	ix->ndim[ix->n] = 0;
	if (entry(st, ix->n))
		return -1;
	ix->n++;
	return 0;
}

/* Members from p (a name expected) to the object's closing '}' (returns
 * 1) or, with stop, up to the first member that starts at or past stop
 * (returns 0, p->s there); -1: not indexed. */
int st_members(struct state *st, const unsigned char *stop)
{
	struct parser *p = &st->p;
	for (;;) {
		if (member(st))
			return -1;
		if (!eat(p, ','))
			return eat(p, '}') ? 1 : -1;
		if (stop) {
			ws(p);
			if (p->s >= stop)
				return 0;
		}
	}
}

/* The whole header in one pass. */
static int header(struct state *st)
{
	struct parser *p = &st->p;
	if (!eat(p, '{'))
		return -1;
	if (!eat(p, '}') && st_members(st, NULL) != 1)
		return -1;
	ws(p);
	return p->s == p->e ? 0 : -1;
}

void st_state_free(struct state *st)
{
	free(st->name_at);
	free(st->key.p);
	if (st->ix)
		st->ix->names = st->names.p;
	else
		free(st->names.p);
	opends_safetensors_index_free(st->ix);
}

void opends_safetensors_index_free(opends_safetensors_index_t *ix)
{
	if (!ix)
		return;
	free(ix->names);
	free(ix->dtype);
	free(ix->ndim);
	free(ix->dims);
	free(ix->begin);
	free(ix->end);
	free(ix->numel);
	free(ix);
}

int opends_safetensors_index(const char *hdr, size_t len, uint64_t data_len, const char *dtypes, const uint8_t *bits,
			     opends_safetensors_index_t **out)
{
	if (!out)
		return -ods_fail(OPENDS_INVALID_VALUE, "opends_safetensors_index: out is NULL");
	*out = NULL;
	if (!hdr || !dtypes || !bits)
		return -ods_fail(OPENDS_INVALID_VALUE, "opends_safetensors_index: %s is NULL",
				 !hdr ? "hdr" : !dtypes ? "dtypes" : "bits");
	struct state st = {.p = {(const unsigned char *)hdr, (const unsigned char *)hdr + len, 0},
			   .bits = bits,
			   .data_len = data_len,
			   .first_begin = -1};
	for (const char *d = dtypes; *d; d += st.dt_len[st.ndtypes++] + 1) {
		if (st.ndtypes == 256)
			return -ods_fail(OPENDS_INVALID_VALUE, "opends_safetensors_index: dtypes lists more than 256 names");
		st.dt_name[st.ndtypes] = d;
		st.dt_len[st.ndtypes] = strlen(d);
		if (!bits[st.ndtypes])
			return -ods_fail(OPENDS_INVALID_VALUE, "opends_safetensors_index: bits[%d] (of dtype \"%s\") is 0",
					 st.ndtypes, d);
	}
	int parts = st_parts_for(len), bad = 0;
	int done = parts > 1 ? st_header_parts(&st, parts) : 0;
	st.p.s = (const unsigned char *)hdr;
	st.p.oom |= done < 0;
	if (done == 0) {
		st.ix = calloc(1, sizeof *st.ix);
		/* sized for a writer's entries (~80 bytes each) at once: no
		 * copies as the arrays grow */
		bad = !st.ix || st_grow(&st, len / 64 + 1) || header(&st);
		st.p.oom |= !st.ix;
	}
	if (!bad && !st.p.oom)
		bad = no_duplicates(&st);
	if (st.p.oom || bad) {
		st_state_free(&st);
		if (st.p.oom)
			return -ods_fail(OPENDS_NOMEM_ERROR, "opends_safetensors_index: out of memory for a header of %zu bytes",
					 len);
		return NOT_INDEXED;
	}
	free(st.name_at);
	free(st.key.p);
	st.ix->names = st.names.p;
	st.ix->names_len = st.names.len;
	*out = st.ix;
	return 0;
}
