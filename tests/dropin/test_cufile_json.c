/*
 * test_cufile_json
 *
 * The drop-in's cufile.json reader (src/dropin/cufile/json.c, built into
 * this test) at the ends of its input: a number as the very last token is
 * read whole and nothing past the data (the text is NUL-terminated; under
 * ASan a read past a buffer the file fills would fail here), a file of
 * exactly the reader's 1 MiB cap is read, one byte more is refused whole
 * (not cut), truncated input is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dropin.h"

static int failures;
#define CHECK(c)                                                          \
	do {                                                              \
		if (!(c)) {                                               \
			fprintf(stderr, "%s:%d: CHECK(%s)\n", __FILE__, __LINE__, #c); \
			failures++;                                       \
		}                                                         \
	} while (0)

struct seen {
	int n;
	double last;
	char path[256];
};

static void leaf(const char *path, const struct cfd_json_val *v, void *arg)
{
	struct seen *s = arg;
	s->n++;
	if (v->kind == CFD_JSON_NUMBER)
		s->last = v->num;
	snprintf(s->path, sizeof s->path, "%s", path);
}

static char dir[] = "/tmp/opends-json-XXXXXX";

static int read_text(const char *text, size_t n, struct seen *s)
{
	char path[300];
	snprintf(path, sizeof path, "%s/cufile.json", dir);
	FILE *f = fopen(path, "w");
	if (!f || fwrite(text, 1, n, f) != n || fclose(f))
		return -2;
	memset(s, 0, sizeof *s);
	int rc = cfd_json_read(path, leaf, s);
	unlink(path);
	return rc;
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	struct seen s;
	/* a number just before the end */
	CHECK(read_text("{\"properties\": {\"io_batchsize\": 128}}", 37, &s) == 0 && s.n == 1 && s.last == 128 &&
	      !strcmp(s.path, "properties.io_batchsize"));
	/* truncated after a number: refused, not read past */
	CHECK(read_text("{\"a\": 12", 8, &s) == -1);
	CHECK(read_text("{\"a\": 1e", 8, &s) == -1);
	/* exactly the cap: an object whose number ends 1 byte before the end;
	 * then the same cut after the number (the number the last token of a
	 * file that fills the reader's buffer: read past it before) */
	size_t cap = (size_t)1 << 20;
	char *big = malloc(cap + 1);
	CHECK(big != NULL);
	if (big) {
		memset(big, ' ', cap + 1);
		memcpy(big, "{\"a\":", 5);
		memcpy(big + cap - 8, "1234567}", 8);
		CHECK(read_text(big, cap, &s) == 0 && s.n == 1 && s.last == 1234567 && !strcmp(s.path, "a"));
		memcpy(big + cap - 8, " 1234567", 8);
		CHECK(read_text(big, cap, &s) == -1);
		/* one byte over the cap: refused whole, not cut */
		memcpy(big + cap - 8, "1234567}", 8);
		big[cap] = ' ';
		CHECK(read_text(big, cap + 1, &s) == -1);
		free(big);
	}
	rmdir(dir);
	if (failures)
		return 1;
	printf("ok: cufile.json reader at the ends of its input\n");
	return 0;
}
