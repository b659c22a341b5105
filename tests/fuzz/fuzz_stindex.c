/*
 * libFuzzer target: opends_safetensors_index (src/formats/st_index.c) on
 * arbitrary bytes. The input is the header JSON; its first 8 bytes, when
 * there are that many, give data_len (little-endian, the top bits cut so
 * it stays realistic). The indexer must never read outside [hdr, hdr +
 * len) (the input is copied to an exact-size allocation, so ASan sees one
 * byte past it), never crash or leak, return only 0, 1 or -OPENDS_NOMEM_ERROR, and
 * when it returns 0 the arrays must hold what its header promises:
 * n names, each '\0'-terminated, filling names_len exactly; ndims the sum
 * of ndim; dtype an index into the list; 0 <= begin <= end <= data_len;
 * numel the product of the shape and numel x bits == (end - begin) x 8;
 * non-empty tensors in file order, not overlapping; no name twice.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <opends.h>

static const char dtypes[] = "BOOL\0U8\0I8\0F8_E5M2\0F8_E4M3\0I16\0U16\0F16\0BF16\0I32\0U32\0F32\0F64\0I64\0U64\0F4\0";
static const uint8_t bits[] = { 8, 8, 8, 8, 8, 16, 16, 16, 16, 32, 32, 32, 64, 64, 64, 4 };
#define NDT (sizeof(bits))

#define BAD(...)                                                                                   \
	do {                                                                                       \
		fprintf(stderr, "fuzz_stindex: " __VA_ARGS__);                                     \
		fprintf(stderr, "\n");                                                             \
		abort();                                                                           \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t data_len = UINT64_C(1) << 40;
	if (size >= 8) {
		memcpy(&data_len, data, 8);
		data_len &= (UINT64_C(1) << 44) - 1;
		data += 8;
		size -= 8;
	}
	char *hdr = malloc(size ? size : 1);
	if (!hdr)
		return 0;
	memcpy(hdr, data, size);
	opends_safetensors_index_t *ix = (opends_safetensors_index_t *)(uintptr_t)1;
	int r = opends_safetensors_index(hdr, size, data_len, dtypes, bits, &ix);
	if (r != 0) {
		if (r != 1 && r != -OPENDS_NOMEM_ERROR)
			BAD("returned %d", r);
		if (ix != NULL)
			BAD("returned %d with *out not NULL", r);
		free(hdr);
		return 0;
	}
	if (!ix)
		BAD("returned 0 with *out NULL");
	/* names: n strings filling names_len */
	uint64_t seen = 0, at = 0;
	while (at < ix->names_len) {
		const char *z = memchr(ix->names + at, 0, ix->names_len - at);
		if (!z)
			BAD("names: the last name is not terminated within names_len");
		at = (uint64_t)(z - ix->names) + 1;
		seen++;
	}
	if (seen != ix->n)
		BAD("%llu names for n = %llu", (unsigned long long)seen, (unsigned long long)ix->n);
	uint64_t nd = 0, last_end = 0;
	const char *name = ix->names;
	for (uint64_t i = 0; i < ix->n; i++) {
		if (ix->dtype[i] >= NDT)
			BAD("tensor %llu: dtype %u", (unsigned long long)i, ix->dtype[i]);
		int64_t b = ix->begin[i], e = ix->end[i];
		if (b < 0 || e < b || (uint64_t)e > data_len)
			BAD("tensor %llu: offsets [%lld, %lld) of %llu", (unsigned long long)i, (long long)b, (long long)e,
			    (unsigned long long)data_len);
		unsigned __int128 numel = 1;
		for (unsigned k = 0; k < ix->ndim[i]; k++) {
			int64_t d = ix->dims[nd + k];
			if (d < 0)
				BAD("tensor %llu: dimension %lld", (unsigned long long)i, (long long)d);
			numel *= (uint64_t)d;
			if (numel > ((unsigned __int128)1 << 70))
				numel = (unsigned __int128)1 << 70;
		}
		nd += ix->ndim[i];
		if (ix->numel[i] < 0 || (unsigned __int128)ix->numel[i] != numel)
			BAD("tensor %llu: numel %lld", (unsigned long long)i, (long long)ix->numel[i]);
		if (numel * bits[ix->dtype[i]] != (unsigned __int128)(uint64_t)(e - b) * 8)
			BAD("tensor %llu: %lld values of %u bits in %lld bytes", (unsigned long long)i,
			    (long long)ix->numel[i], bits[ix->dtype[i]], (long long)(e - b));
		if (e > b) {
			if ((uint64_t)b < last_end)
				BAD("tensor %llu: [%lld, %lld) overlaps or comes before the previous", (unsigned long long)i,
				    (long long)b, (long long)e);
			last_end = (uint64_t)e;
		}
		const char *nm = ix->names;
		for (uint64_t j = 0; j < i; j++, nm += strlen(nm) + 1)
			if (!strcmp(nm, name))
				BAD("tensor %llu: name \"%s\" twice", (unsigned long long)i, name);
		name += strlen(name) + 1;
	}
	if (nd != ix->ndims)
		BAD("sum of ndim %llu, ndims %llu", (unsigned long long)nd, (unsigned long long)ix->ndims);
	opends_safetensors_index_free(ix);
	free(hdr);
	return 0;
}
