/* The safetensors header indexer's internals (include/opends/tensors.h):
 * st_index.c parses, st_parts.c parses a big header in parts, a thread
 * each. */
#ifndef ODS_ST_INDEX_H
#define ODS_ST_INDEX_H

#include "../core/ods.h"

#include <stdbool.h>

struct parser {
	const unsigned char *s, *e;
	int oom;
};

struct bytes {
	char *p;
	size_t len, cap;
};

struct state {
	struct parser p;
	opends_safetensors_index_t *ix;
	struct bytes names, key;
	size_t cap_n, cap_dims;
	uint64_t *name_at; /* offset of each name in names */
	const char *dt_name[256]; /* the caller's dtype names and their lengths */
	size_t dt_len[256];
	int ndtypes;
	const uint8_t *bits;
	uint64_t data_len;
	int64_t last_end;    /* of the last non-empty tensor so far */
	int64_t first_begin; /* of the first non-empty tensor; -1: none yet */
	int metas;           /* "__metadata__" members seen */
};

static inline void ws(struct parser *p)
{
	while (p->s < p->e && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

/* st_index.c */
/* room for need tensors: 0, or -1 (p.oom set) */
ODS_HIDDEN int st_grow(struct state *st, size_t need);
/* Members from p (a name expected) to the object's closing '}' (returns
 * 1) or, with stop, up to the first member that starts at or past stop
 * (returns 0, p->s there); -1: not indexed. */
ODS_HIDDEN int st_members(struct state *st, const unsigned char *stop);
/* Free what st holds (its index too). */
ODS_HIDDEN void st_state_free(struct state *st);

/* st_parts.c */
/* How many parts a header of len bytes is parsed in (1: one pass). */
ODS_HIDDEN int st_parts_for(size_t len);
/* The header in parts: 1 (st holds the merged index, to be checked for
 * duplicates), 0 (not done: parse it in one pass), -1 (out of memory). */
ODS_HIDDEN int st_header_parts(struct state *st, int parts);

#endif
