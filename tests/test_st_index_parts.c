/* The safetensors header indexer's parallel parse (src/formats/st_index.c:
 * a header of 512 KiB or more is parsed in parts, a thread each, where the
 * process may run on two CPUs or more) gives exactly the one-pass parse's
 * result, the same arrays or the same 1, on headers made to fool its
 * guesses of where a part starts: names ending in "},", __metadata__ with
 * nested objects across a part's start, tensors out of file order or a
 * name twice across parts, two __metadata__ in different parts, writers'
 * spacing. The one-pass result comes from the same call with this thread
 * on one CPU (the indexer never splits there). */
#include "common.h"

#include <sched.h>

#include "opends.h"

static const char DTYPES[] = "BOOL\0U8\0F16\0F32\0F4\0";
static const uint8_t BITS[] = {8, 8, 16, 32, 4};

struct hdr {
	char *p;
	size_t len, cap;
};

static void add(struct hdr *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct hdr *h, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(h->p + h->len, h->cap - h->len, fmt, ap);
		va_end(ap);
		CHECK(n >= 0);
		if (h->len + (size_t)n < h->cap) {
			h->len += (size_t)n;
			return;
		}
		h->cap = h->cap ? 2 * h->cap + (size_t)n : 1 << 20;
		h->p = realloc(h->p, h->cap);
		CHECK(h->p != NULL);
	}
}

static int index_exact(const struct hdr *h, uint64_t data_len, opends_safetensors_index_t **ix)
{
	char *copy = malloc(h->len ? h->len : 1); /* exact size: ASan sees a read past it */
	CHECK(copy != NULL);
	memcpy(copy, h->p, h->len);
	int rc = opends_safetensors_index(copy, h->len, data_len, DTYPES, BITS, ix);
	free(copy);
	return rc;
}

static cpu_set_t all_cpus;

/* rc of h in parts (where this machine allows) and in one pass: equal,
 * want_rc, and the same arrays. */
static void both_ways(const struct hdr *h, uint64_t data_len, int want_rc, const char *what)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all_cpus)) {
			CPU_SET(c, &one);
			break;
		}
	opends_safetensors_index_t *a = NULL, *b = NULL;
	int ra = index_exact(h, data_len, &a);
	CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
	int rb = index_exact(h, data_len, &b);
	CHECK(sched_setaffinity(0, sizeof all_cpus, &all_cpus) == 0);
	CHECKF(ra == want_rc && rb == want_rc, "%s: in parts %d, one pass %d, want %d", what, ra, rb, want_rc);
	CHECKF((a != NULL) == (ra == 0) && (b != NULL) == (rb == 0), "%s", what);
	if (a) {
		CHECKF(a->n == b->n && a->ndims == b->ndims && a->names_len == b->names_len, "%s: %llu/%llu tensors", what,
		       (unsigned long long)a->n, (unsigned long long)b->n);
		CHECKF(!memcmp(a->names, b->names, a->names_len) && !memcmp(a->dtype, b->dtype, a->n) &&
			       !memcmp(a->ndim, b->ndim, a->n) && !memcmp(a->dims, b->dims, a->ndims * 8) &&
			       !memcmp(a->begin, b->begin, a->n * 8) && !memcmp(a->end, b->end, a->n * 8) &&
			       !memcmp(a->numel, b->numel, a->n * 8),
		       "%s: arrays differ", what);
	}
	opends_safetensors_index_free(a);
	opends_safetensors_index_free(b);
}

enum { N = 24000 }; /* ~1.5 MB of header: four parts */

/* A header of N tensors: F32 [2] (8 bytes) each, tensor i at 8 * i unless
 * swap (tensors swap and swap + 1 trade offsets); names by name(i). */
static void tensors(struct hdr *h, const char *name_fmt, const char *colon, const char *comma, int swap, int dup)
{
	for (int i = 0; i < N; i++) {
		int at = swap < 0 ? i : i == swap ? i + 1 : i == swap + 1 ? i - 1 : i;
		add(h, "%s", i ? comma : "");
		add(h, name_fmt, i == dup ? dup - 1 : i);
		add(h, "%s{\"dtype\"%s\"F32\"%s\"shape\"%s[2]%s\"data_offsets\"%s[%d%s%d]}", colon, colon, comma, colon,
		    comma, colon, 8 * at, comma, 8 * at + 8);
	}
}

static void run(const char *what, const char *pre, const char *name_fmt, const char *colon, const char *comma,
		int swap, int dup, const char *post, int want_rc)
{
	struct hdr h = {0};
	add(&h, "{%s", pre);
	tensors(&h, name_fmt, colon, comma, swap, dup);
	add(&h, "%s}", post);
	both_ways(&h, 8ull * N, want_rc, what);
	free(h.p);
}

/* __metadata__ of about n bytes: nested objects, so "}," + '"' all through */
static char *nested_meta(size_t n)
{
	struct hdr h = {0};
	add(&h, "\"__metadata__\":{");
	for (int i = 0; h.len < n; i++)
		add(&h, "%s\"k%d\":{\"a\":{\"b\":\"},\\\"x\"},\"c\":[1,{\"d\":null}]}", i ? "," : "", i);
	add(&h, "},");
	return h.p;
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(300);
	CHECK(sched_getaffinity(0, sizeof all_cpus, &all_cpus) == 0);
	if (CPU_COUNT(&all_cpus) < 2)
		printf("st_index_parts: one CPU: both ways are one pass here\n");
	/* writers' spacing: serde's compact and Python json.dumps' default */
	run("compact", "", "\"layers.%d.w\"", ":", ",", -1, -1, "", 0);
	run("spaced", "", "\"layers.%d.w\"", ": ", ", ", -1, -1, "", 0);
	run("newlines", "\n ", "\"layers.%d.w\"\n", "\n:\n", "\n,\n ", -1, -1, "\n", 0);
	/* every name ends in "},": a guess lands inside a name (long ones:
	 * almost surely) */
	run("names ending in },", "", "\"t%d},\"", ":", ",", -1, -1, "", 0);
	run("long names ending in },", "", "\"%0200d},\"", ":", ",", -1, -1, "", 0);
	run("names with },\\\"", "", "\"t%d},\\\"\"", ":", ",", -1, -1, "", 0);
	/* __metadata__ over the first part's end, at the end, and twice */
	char *meta = nested_meta(2 << 20); /* (more than half the header: over every first guess) */
	run("big nested metadata first", meta, "\"w%d\"", ":", ",", -1, -1, "", 0);
	size_t ml = strlen(meta);
	meta[ml - 1] = 0; /* (no trailing comma) */
	char *post = malloc(ml + 2);
	CHECK(post != NULL);
	snprintf(post, ml + 2, ",%s", meta);
	run("big nested metadata last", "", "\"w%d\"", ":", ",", -1, -1, post, 0);
	run("small metadata last", "", "\"w%d\"", ":", ",", -1, -1, ",\"__metadata__\":{\"format\":\"pt\"}", 0);
	run("metadata twice", "\"__metadata__\":null,", "\"w%d\"", ":", ",", -1, -1, ",\"__metadata__\":{}", 1);
	meta[ml - 1] = ',';
	run("metadata twice, one big", meta, "\"w%d\"", ":", ",", -1, -1, ",\"__metadata__\":null", 1);
	/* out of file order or a duplicate where parts meet (and elsewhere) */
	for (int at = 1; at < N - 1; at += N / 37) {
		char what[64];
		snprintf(what, sizeof what, "swap at %d", at);
		run(what, "", "\"layers.%d.w\"", ":", ",", at, -1, "", 1);
		snprintf(what, sizeof what, "duplicate at %d", at);
		run(what, "", "\"layers.%d.w\"", ":", ",", -1, at, "", 1);
	}
	/* invalid at the end, after many valid parts */
	run("no closing brace", "", "\"w%d\"", ":", ",", -1, -1, ",\"x\":{\"dtype\":\"F32\"", 1);
	run("trailing comma", "", "\"w%d\"", ":", ",", -1, -1, ",", 1);
	run("trailing junk", "", "\"w%d\"", ":", ",", -1, -1, "} x", 1);
	free(meta);
	free(post);
	printf("st_index_parts: ok\n");
	return 0;
}
