/* A big safetensors header parsed in parts, a thread each (the indexer:
 * st_index.c, include/opends/tensors.h). */
#include "st_index.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* ---- a big header in parts, one thread each ----------------------------
 * A writer's header of 20,000 tensors is ~1.5 MB: one pass took as long
 * as making the tensors from it. Parts start where a member probably
 * starts (after '}' ',' and at a '"': a guess, which a name or
 * __metadata__ containing those can fool) and end where the next part
 * starts. The parts are one parse exactly when each part ends exactly at
 * the next one's start: part 0 starts at the header's start, so by
 * induction every part then started where the one-pass parse would have
 * been in the same state (a name expected), and the one-pass parse is
 * deterministic. The state carried across members is checked at the
 * merge: file order across parts, one __metadata__ at most; duplicate
 * names are looked for in the merged index. Anything else (a guess that
 * was wrong, a part not indexed, a thread not started) parses the header
 * again in one pass. */
#define PART_MIN ((size_t)256 << 10) /* header bytes per part, at least */
#define MAX_PARTS 4

struct part {
	struct state st;
	const unsigned char *stop; /* the next part's start; NULL: the last part */
	int rc;
	pthread_t tid;
	bool threaded;
};

static bool is_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The first '"' at or after from that follows '}' [ws] ',' [ws]; NULL. */
static const unsigned char *guess_member(const unsigned char *from, const unsigned char *e)
{
	while (from < e && (from = memchr(from, '}', (size_t)(e - from)))) {
		const unsigned char *q = ++from;
		while (q < e && is_ws(*q))
			q++;
		if (q < e && *q == ',') {
			q++;
			while (q < e && is_ws(*q))
				q++;
			if (q < e && *q == '"')
				return q;
		}
	}
	return NULL;
}

int st_parts_for(size_t len)
{
	size_t n = len / PART_MIN;
	if (n < 2)
		return 1;
	cpu_set_t set;
	int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
	if ((size_t)cpus < n)
		n = (size_t)cpus;
	return n < MAX_PARTS ? (int)n : MAX_PARTS;
}

static void *part_run(void *arg)
{
	struct part *c = arg;
	c->rc = st_members(&c->st, c->stop);
	return NULL;
}

static void *alloc(struct state *st, size_t n)
{
	void *q = malloc(n ? n : 1);
	if (!q)
		st->p.oom = 1;
	return q;
}

/* The parts' indexes into st (its own arrays unset): 0, or -1 (out of
 * memory: st->p.oom set). */
static int merge(struct state *st, struct part *c, int parts)
{
	uint64_t n = 0, ndims = 0;
	size_t names_len = 0;
	for (int k = 0; k < parts; k++) {
		n += c[k].st.ix->n;
		ndims += c[k].st.ix->ndims;
		names_len += c[k].st.names.len;
	}
	opends_safetensors_index_t *ix = st->ix = calloc(1, sizeof *ix);
	if (!ix) {
		st->p.oom = 1;
		return -1;
	}
	ix->dtype = alloc(st, n);
	ix->ndim = alloc(st, n);
	ix->dims = alloc(st, ndims * 8);
	ix->begin = alloc(st, n * 8);
	ix->end = alloc(st, n * 8);
	ix->numel = alloc(st, n * 8);
	st->name_at = alloc(st, n * 8);
	st->names.p = alloc(st, names_len);
	if (st->p.oom)
		return -1;
	for (int k = 0; k < parts; k++) {
		const opends_safetensors_index_t *a = c[k].st.ix;
		memcpy(ix->dtype + ix->n, a->dtype, a->n);
		memcpy(ix->ndim + ix->n, a->ndim, a->n);
		memcpy(ix->begin + ix->n, a->begin, a->n * 8);
		memcpy(ix->end + ix->n, a->end, a->n * 8);
		memcpy(ix->numel + ix->n, a->numel, a->n * 8);
		memcpy(ix->dims + ix->ndims, a->dims, a->ndims * 8);
		for (uint64_t i = 0; i < a->n; i++)
			st->name_at[ix->n + i] = c[k].st.name_at[i] + st->names.len;
		memcpy(st->names.p + st->names.len, c[k].st.names.p, c[k].st.names.len);
		ix->n += a->n;
		ix->ndims += a->ndims;
		st->names.len += c[k].st.names.len;
	}
	st->names.cap = names_len;
	return 0;
}

/* The header in parts: 1 (st holds the merged index, to be checked for
 * duplicates), 0 (not done: parse in one pass), -1 (out of memory). */
int st_header_parts(struct state *st, int parts)
{
	const unsigned char *s = st->p.s, *e = st->p.e;
	size_t len = (size_t)(e - s);
	struct part c[MAX_PARTS];
	const unsigned char *start[MAX_PARTS];
	int k, ok = 1;
	ws(&st->p);
	if (st->p.s >= e || *st->p.s != '{')
		return 0;
	start[0] = st->p.s + 1;
	for (k = 1; k < parts; k++) {
		start[k] = guess_member(s + len / (size_t)parts * (size_t)k, e);
		if (!start[k] || start[k] <= start[k - 1])
			break;
	}
	parts = k;
	if (parts < 2)
		return 0;
	for (k = 0; k < parts; k++) {
		c[k].st = *st;
		c[k].st.p.s = start[k];
		c[k].stop = k + 1 < parts ? start[k + 1] : NULL;
		c[k].rc = -1;
		c[k].threaded = false;
		c[k].st.ix = calloc(1, sizeof *c[k].st.ix);
		if (!c[k].st.ix || st_grow(&c[k].st, len / (size_t)parts / 64 + 1))
			ok = 0;
	}
	for (k = 1; k < parts && ok; k++)
		c[k].threaded = pthread_create(&c[k].tid, NULL, part_run, &c[k]) == 0;
	if (ok) {
		part_run(&c[0]);
		for (k = 1; k < parts; k++)
			if (!c[k].threaded)
				part_run(&c[k]);
	}
	for (k = 1; k < parts; k++)
		if (c[k].threaded)
			pthread_join(c[k].tid, NULL);
	int oom = !ok, metas = 0;
	int64_t last_end = 0;
	for (k = 0; k < parts; k++) {
		struct state *t = &c[k].st;
		oom |= t->p.oom;
		if (k + 1 < parts ? c[k].rc != 0 || t->p.s != c[k].stop : c[k].rc != 1)
			ok = 0;
		metas += t->metas;
		if (t->first_begin >= 0) {
			if (t->first_begin < last_end)
				ok = 0; /* out of order across parts: as the one-pass check */
			last_end = t->last_end;
		}
	}
	if (ok && !oom) {
		ws(&c[parts - 1].st.p);
		ok = c[parts - 1].st.p.s == e && metas <= 1;
	}
	if (ok && !oom && merge(st, c, parts))
		oom = 1;
	for (k = 0; k < parts; k++)
		st_state_free(&c[k].st);
	return oom ? -1 : ok;
}

