/*
 * OpenDS public API: tensor file formats (safetensors' header).
 * Part of <opends.h>: include that (it includes every family), not this
 * file. The conventions at the top of opends.h hold here.
 */
#ifndef OPENDS_TENSORS_H
#define OPENDS_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Tensor files: a safetensors header as arrays                            */
/* ------------------------------------------------------------------------ */

/*
 * A safetensors file (an 8-byte little-endian header length N, N bytes of
 * JSON, then the data region) has one JSON entry per tensor; a loader of
 * thousands of small tensors spent most of its time parsing it into
 * objects. opends_safetensors_index parses it once into flat arrays (the
 * Python package's loader uses it through ctypes: python/opends/_stindex.py).
 *
 * It indexes only headers it can vouch for, which it reports as 0: a JSON
 * object of tensors, each with exactly the keys "dtype" (one of the
 * caller's names), "shape" (non-negative integers) and "data_offsets"
 * ([begin, end] with end <= data_len and shape x bits == (end - begin) x 8),
 * integers of at most 18 digits, strict UTF-8 names without \u0000 or lone
 * surrogates, no name twice, non-empty tensors in file order and not
 * overlapping, and an optional "__metadata__" object (any JSON inside,
 * skipped) or null. Anything else returns 1 without saying why: either the
 * file is invalid or it is unusual (tensors out of file order, another
 * key, a float); the caller's own parser decides and gives the message.
 */

/* The tensors of an indexed header, in header order. Every array belongs to
 * the struct: opends_safetensors_index_free releases them all. */
typedef struct opends_safetensors_index {
	uint64_t n;         /* tensors ("__metadata__" is not one) */
	uint64_t names_len; /* bytes at names */
	uint64_t ndims;     /* entries at dims: the sum of ndim */
	char *names;        /* each name's UTF-8 then '\0', in header order */
	uint8_t *dtype;     /* each tensor's index into the caller's dtype list */
	uint8_t *ndim;      /* each shape's number of dimensions (at most 255) */
	int64_t *dims;      /* every shape's dimensions, one after another */
	int64_t *begin;     /* data_offsets, relative to the data region */
	int64_t *end;
	int64_t *numel;     /* each shape's product */
} opends_safetensors_index_t;

/* Index hdr[0, len) (the JSON after the 8-byte length; it need not end in
 * '\0' and is never read past len). dtypes: the dtype names, each ending in
 * '\0', the list ending with an empty name ("F16\0F32\0" is two); bits[i]:
 * the bits of one value of the i-th (4 for F4, 16 for BF16). data_len: the
 * bytes of the data region. Needs no open driver (an exception to the
 * OPENDS_DRIVER_NOT_INITIALIZED rule at the top of opends.h); thread-safe.
 * A header of 512 KiB or more (~7,000 tensors) is parsed in parts by up to
 * 4 threads (no more than the CPUs the calling thread may run on: one CPU,
 * one pass), started and joined within the call; the result is the
 * one-pass parse's, byte for byte (tests/test_st_index_parts.c).
 * Returns 0 with *out set (free it with opends_safetensors_index_free), 1
 * where the header is not indexed (*out NULL; see above), or a negated
 * OPENDS_* code as the ssize_t calls do, *out NULL (when out is not) and
 * opends_last_error_detail() naming the parameter.
 * Errors: -OPENDS_INVALID_VALUE (out, hdr, dtypes or bits NULL; more than
 * 256 dtype names; a bits[i] of 0), -OPENDS_NOMEM_ERROR. */
OPENDS_API int opends_safetensors_index(const char *hdr, size_t len, uint64_t data_len, const char *dtypes,
					const uint8_t *bits, opends_safetensors_index_t **out);

/* Release an index (NULL: nothing). */
OPENDS_API void opends_safetensors_index_free(opends_safetensors_index_t *ix);

#ifdef __cplusplus
}
#endif

#endif
