/*
 * test_cufile_json
 *
 * The drop-in's cufile.json reader (src/dropin/cufile/json.c, built into
 * this test) at the ends of its input: a number as the very last token is
 * read whole and nothing past the data (the text is NUL-terminated; under
 * ASan a read past a buffer the file fills would fail here), a file of
 * exactly the reader's 1 MiB cap is read, one byte more is refused whole
 * (not cut), truncated input is refused; numbers follow JSON's grammar
 * whatever the program's LC_NUMERIC (a de_DE locale, compiled into the
 * test's folder where none is installed and localedef can).
 */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* An array's numbers (the leaf of path "a"). */
struct arrs {
	int *n;
	double *v;
};
static void arr_leaf(const char *path, const struct cfd_json_val *v, void *arg)
{
	struct arrs *a = arg;
	if (!strcmp(path, "a") && v->kind == CFD_JSON_ARRAY) {
		*a->n = v->n;
		for (int i = 0; i < v->n && i < 8; i++)
			a->v[i] = v->arr[i];
	}
}

static int read_arr(const char *text, int *n, double *vals)
{
	char path[300];
	snprintf(path, sizeof path, "%s/cufile.json", dir);
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		return -2;
	struct arrs a = { n, vals };
	int rc = cfd_json_read(path, arr_leaf, &a);
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
	/* numbers by JSON's grammar, whatever LC_NUMERIC says: a locale
	 * whose decimal point is ',' made strtod read "[1048576,4194304]" as
	 * one number and stop "4096.0" at the '.' (where one is installed;
	 * the grammar is checked either way) */
	static const char *const comma_locales[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE", NULL };
	const char *loc = NULL;
	for (int i = 0; comma_locales[i] && !loc; i++)
		loc = setlocale(LC_NUMERIC, comma_locales[i]) ? comma_locales[i] : NULL;
	char locdir[400] = "";
	if (!loc && access("/usr/share/i18n/locales/de_DE", R_OK) == 0) {
		/* none installed: compile one into the test's folder (2 s) */
		char cmd[600];
		snprintf(locdir, sizeof locdir, "%s/loc", dir);
		snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", locdir);
		if (mkdir(locdir, 0700) == 0 && system(cmd) == 0 && setenv("LOCPATH", locdir, 1) == 0)
			loc = setlocale(LC_NUMERIC, "de_DE.UTF-8") ? "de_DE.UTF-8 (compiled here)" : NULL;
	}
	struct arr {
		int n;
		double v[8];
	} a;
	static const struct {
		const char *text;
		int n;
		double v[4];
	} nums[] = {
		{ "{\"a\": [1048576,4194304]}", 2, { 1048576, 4194304 } },
		{ "{\"a\": [4096.0, 0.5, -2.5e3, 1E2]}", 4, { 4096, 0.5, -2500, 100 } },
		{ "{\"a\": [9007199254740993, 0, -0, 12345678901234567890]}", 4,
		  { 9007199254740992.0, 0, 0, 12345678901234567890.0 } },
	};
	for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
		memset(&a, 0, sizeof a);
		int rc = read_arr(nums[i].text, &a.n, a.v);
		CHECK(rc == 0 && a.n == nums[i].n);
		for (int k = 0; k < nums[i].n && k < a.n; k++)
			CHECK(a.v[k] == nums[i].v[k]);
	}
	/* not JSON numbers: refused whole */
	CHECK(read_text("{\"a\": 1.}", 9, &s) == -1);
	CHECK(read_text("{\"a\": .5}", 9, &s) == -1);
	CHECK(read_text("{\"a\": 1e}", 9, &s) == -1);
	CHECK(read_text("{\"a\": 0x10}", 11, &s) == -1);
	CHECK(read_text("{\"a\": nan}", 10, &s) == -1);
	setlocale(LC_NUMERIC, "C");
	if (*locdir) {
		char cmd[600];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", locdir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", locdir);
	}
	rmdir(dir);
	if (loc)
		printf("numbers read under LC_NUMERIC=%s\n", loc);
	if (failures)
		return 1;
	printf("ok: cufile.json reader at the ends of its input\n");
	return 0;
}
