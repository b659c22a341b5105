/* The safetensors header indexer: a file's JSON header as arrays, for the
 * Python package's loader (python/opends/_stindex.py reaches it through
 * ctypes). Internal: not part of opends.h's API and not kept stable across
 * versions (the Python package loads the libopends of its own version).
 *
 * Its rule is "accept only what the Python parser accepts, with the same
 * result": anything it does not index (an error, or something unusual
 * such as a key it does not know, a float, a lone surrogate, tensors out
 * of file order) returns 1 and the Python parser decides, with its own
 * message. So the caller never sees a different result or error, only a
 * faster one for the ordinary file. */
#ifndef OPENDS_FORMATS_ST_INDEX_H
#define OPENDS_FORMATS_ST_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* A header's tensors in header order; every array is owned by the struct
 * (one opends__st_index_free). Field order is python/opends/_stindex.py's. */
struct opends_st_index {
	uint64_t n;         /* tensors (__metadata__ is not one) */
	uint64_t names_len; /* bytes at names */
	uint64_t ndims;     /* entries at dims: the sum of ndim */
	char *names;        /* each name's UTF-8 then '\0', header order */
	uint8_t *dtype;     /* index into the caller's dtype list */
	uint8_t *ndim;      /* dimensions of each shape */
	int64_t *dims;      /* every shape's dimensions, one after another */
	int64_t *begin;     /* data_offsets, relative to the data region */
	int64_t *end;
	int64_t *numel;     /* product of each shape */
};

/* Index hdr[0, len) (the JSON only, after the 8-byte length).
 * dtypes: the dtype names, each ending in '\0', the list ending in an
 * empty name; bits[i]: the bits of one value of dtypes' i-th. data_len:
 * bytes of the data region (offsets past it are errors).
 * Returns 0 with *out set; 1 where the header is not indexed here (the
 * caller's own parser decides); -ENOMEM. */
/* Exported (libopends.map's opends_*) for ctypes, but declared only here. */
#define OPENDS_ST_EXPORT __attribute__((visibility("default")))

OPENDS_ST_EXPORT int opends__st_index(const char *hdr, size_t len, uint64_t data_len, const char *dtypes, const uint8_t *bits,
				      struct opends_st_index **out);
OPENDS_ST_EXPORT void opends__st_index_free(struct opends_st_index *ix);

#endif
