/* The safetensors header indexer (src/formats/st_index.c): exact arrays for
 * a header it indexes, 1 for every header it must leave to the Python
 * parser, and no crash, leak or read past the header's end on any
 * corruption of a valid header (every byte cut, changed or dropped; run
 * under ASan by tests/run.sh --sanitize). The differential test against
 * the Python parser and the safetensors package is
 * python/tests/test_stindex.py. */
#include "common.h"

#include "opends.h"

static const char DTYPES[] = "BOOL\0U8\0F16\0F32\0F4\0";
static const uint8_t BITS[] = {8, 8, 16, 32, 4};

/* hdr copied into an allocation of exactly its length (ASan sees any read
 * past it), indexed with data_len. */
static int index_exact(const char *hdr, size_t len, uint64_t data_len, opends_safetensors_index_t **ix)
{
	char *copy = malloc(len ? len : 1);
	CHECK(copy != NULL);
	memcpy(copy, hdr, len);
	int rc = opends_safetensors_index(copy, len, data_len, DTYPES, BITS, ix);
	free(copy);
	return rc;
}

static int rc_of(const char *hdr, uint64_t data_len)
{
	opends_safetensors_index_t *ix = NULL;
	int rc = index_exact(hdr, strlen(hdr), data_len, &ix);
	CHECKF((rc == 0) == (ix != NULL), "rc %d with ix %p", rc, (void *)ix);
	opends_safetensors_index_free(ix);
	return rc;
}

static const char VALID[] =
	"{\"__metadata__\":{\"format\":\"pt\",\"n\":[1,2.5e1,null,true]},"
	"\"w\\u00e9\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
	"\"b\" : { \"shape\" : [] , \"data_offsets\" : [24,25], \"dtype\" : \"U8\" },"
	"\"e\":{\"dtype\":\"F16\",\"shape\":[0,4],\"data_offsets\":[25,25]},"
	"\"q\\ud83d\\ude00\":{\"dtype\":\"F4\",\"shape\":[4],\"data_offsets\":[26,28]}}";

static void test_valid(void)
{
	opends_safetensors_index_t *ix = NULL;
	CHECK(index_exact(VALID, strlen(VALID), 30, &ix) == 0);
	CHECK(ix->n == 4);
	static const char names[] = "w\xc3\xa9\0b\0e\0q\xf0\x9f\x98\x80";
	CHECK(ix->names_len == sizeof(names));
	CHECK(memcmp(ix->names, names, sizeof(names)) == 0);
	const uint8_t dt[] = {3, 1, 2, 4}, nd[] = {2, 0, 2, 1};
	const int64_t dims[] = {2, 3, 0, 4, 4}, b[] = {0, 24, 25, 26}, e[] = {24, 25, 25, 28}, numel[] = {6, 1, 0, 4};
	CHECK(ix->ndims == 5 && memcmp(ix->dims, dims, sizeof(dims)) == 0);
	for (int i = 0; i < 4; i++)
		CHECKF(ix->dtype[i] == dt[i] && ix->ndim[i] == nd[i] && ix->begin[i] == b[i] && ix->end[i] == e[i] &&
			       ix->numel[i] == numel[i],
		       "tensor %d", i);
	opends_safetensors_index_free(ix);
	CHECK(rc_of("{}", 0) == 0);
	CHECK(rc_of(" {\"__metadata__\" : null} ", 0) == 0);
	opends_safetensors_index_free(NULL);
}

/* The library's error convention (a negated OPENDS_* code, the detail
 * naming the parameter), *out NULL on every failure. */
static void expect_invalid(int rc, opends_safetensors_index_t *const *ix, const char *names)
{
	EXPECT_SSZ(rc, -OPENDS_INVALID_VALUE);
	CHECK(*ix == NULL);
	const char *d = opends_last_error_detail();
	CHECKF(strstr(d, names) != NULL, "detail \"%s\" does not name %s", d, names);
}

static void test_errors(void)
{
	opends_safetensors_index_t *ix = (opends_safetensors_index_t *)(uintptr_t)1;
	static const uint8_t zero_bits[] = {8, 0, 16, 32, 4};
	EXPECT_SSZ(opends_safetensors_index(VALID, 1, 0, DTYPES, BITS, NULL), -OPENDS_INVALID_VALUE);
	CHECKF(strstr(opends_last_error_detail(), "out") != NULL, "%s", opends_last_error_detail());
	expect_invalid(opends_safetensors_index(NULL, 1, 0, DTYPES, BITS, &ix), &ix, "hdr");
	ix = (opends_safetensors_index_t *)(uintptr_t)1;
	expect_invalid(opends_safetensors_index(VALID, 1, 0, NULL, BITS, &ix), &ix, "dtypes");
	ix = (opends_safetensors_index_t *)(uintptr_t)1;
	expect_invalid(opends_safetensors_index(VALID, 1, 0, DTYPES, NULL, &ix), &ix, "bits");
	ix = (opends_safetensors_index_t *)(uintptr_t)1;
	expect_invalid(opends_safetensors_index(VALID, strlen(VALID), 30, DTYPES, zero_bits, &ix), &ix, "bits[1]");
	/* 257 names: one more than a uint8_t index can tell apart */
	static char many[257 * 2 + 1];
	static uint8_t bits8[257];
	for (int i = 0; i < 257; i++) {
		many[2 * i] = 'a';
		bits8[i] = 8;
	}
	ix = (opends_safetensors_index_t *)(uintptr_t)1;
	expect_invalid(opends_safetensors_index("{}", 2, 0, many, bits8, &ix), &ix, "dtypes");
	/* 256 are fine */
	many[2 * 256] = '\0';
	ix = NULL;
	CHECK(opends_safetensors_index("{}", 2, 0, many, bits8, &ix) == 0 && ix && ix->n == 0);
	opends_safetensors_index_free(ix);
	/* and none: every tensor's dtype is unknown, "{}" still indexes */
	CHECK(rc_of("{}", 0) == 0);
	ix = NULL;
	CHECK(opends_safetensors_index("{}", 2, 0, "", BITS, &ix) == 0 && ix && ix->n == 0);
	opends_safetensors_index_free(ix);
}

static void test_left_to_python(void)
{
	static const char *const bad[] = {
		"", "[]", "{", "{} x", "{,}", "\xef\xbb\xbf{}",
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		"\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", /* a duplicate */
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
		"\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", /* out of order */
		"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", /* not in the list */
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", /* size */
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", /* past data_len 4 */
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}",
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}",
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,0]}}",
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[1000000000000000000],\"data_offsets\":[0,4]}}",
		/* 19 and more nines: refused before any multiply past int64 (UBSan) */
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,0,9999999999999999999],\"data_offsets\":[0,0]}}",
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999999]}}",
		"{\"\\u0000\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		"{\"\\ud800\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		"{\"\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		"{\"__metadata__\":\"x\"}", "{\"__metadata__\":{\"a\":NaN}}", "{\"__metadata__\":{},\"__metadata__\":{}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECKF(rc_of(bad[i], 4) == 1, "case %zu: %s", i, bad[i]);
	/* nesting past MAX_DEPTH in __metadata__ */
	char deep[600] = "{\"__metadata__\":";
	size_t at = strlen(deep);
	for (int i = 0; i < 100; i++)
		deep[at++] = '[';
	for (int i = 0; i < 100; i++)
		deep[at++] = ']';
	deep[at++] = '}';
	deep[at] = 0;
	CHECK(rc_of(deep, 0) == 1);
}

/* Every cut, every byte changed to a few values, every byte dropped: no
 * crash (ASan), and 0 only with a table that checks out. */
static void test_corruptions(void)
{
	size_t len = strlen(VALID);
	char *buf = malloc(len + 1);
	CHECK(buf != NULL);
	int indexed = 0;
	static const char vals[] = {'"', '\\', '{', '}', '[', ']', ',', ':', '0', '9', '-', 0, (char)0xff, 'u'};
	for (size_t i = 0; i <= len; i++) {
		opends_safetensors_index_t *ix = NULL;
		int rc = index_exact(VALID, i, 30, &ix); /* a cut */
		opends_safetensors_index_free(ix);
		CHECK(rc == 0 || rc == 1);
		if (i == len)
			break;
		for (size_t v = 0; v < sizeof(vals); v++) {
			memcpy(buf, VALID, len);
			buf[i] = vals[v];
			ix = NULL;
			rc = index_exact(buf, len, 30, &ix);
			CHECK(rc == 0 || rc == 1);
			if (rc == 0) {
				indexed++;
				for (uint64_t k = 0; k < ix->n; k++)
					CHECK(ix->begin[k] <= ix->end[k] && ix->end[k] <= 30);
			}
			opends_safetensors_index_free(ix);
		}
		memcpy(buf, VALID, i);
		memcpy(buf + i, VALID + i + 1, len - i - 1); /* a byte dropped */
		ix = NULL;
		CHECK(index_exact(buf, len - 1, 30, &ix) <= 1);
		opends_safetensors_index_free(ix);
	}
	free(buf);
	CHECK(indexed > 0); /* (whitespace changes, equal digits) */
}

/* 20,000 tensors: the arrays grow past their first sizes. */
static void test_many(void)
{
	size_t cap = 20000 * 80 + 16, at = 0;
	char *h = malloc(cap);
	CHECK(h != NULL);
	at += (size_t)sprintf(h + at, "{");
	for (int i = 0; i < 20000; i++)
		at += (size_t)sprintf(h + at, "%s\"layers.%d.w\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[%d,%d]}",
				      i ? "," : "", i, i * 16, i * 16 + 16);
	at += (size_t)sprintf(h + at, "}");
	opends_safetensors_index_t *ix = NULL;
	CHECK(index_exact(h, at, 20000 * 16, &ix) == 0);
	CHECK(ix->n == 20000 && ix->ndims == 20000);
	for (int i = 0; i < 20000; i += 997)
		CHECK(ix->begin[i] == i * 16 && ix->numel[i] == 8 && ix->dtype[i] == 2);
	opends_safetensors_index_free(ix);
	free(h);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(120);
	test_valid();
	test_errors();
	test_left_to_python();
	test_corruptions();
	test_many();
	printf("st_index: ok\n");
	return 0;
}
