/* Benchmark datasets: the same path always gives the same bytes, any range
 * can be verified, sizes fall inside each dataset's distribution, and a
 * generated dataset is reused when complete and regenerated when not. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/dataset.h"

#define CHECK(c)                                                              \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
			exit(1);                                              \
		}                                                             \
	} while (0)

int main(void)
{
	/* content: deterministic, position-dependent, seed-dependent */
	unsigned char a[10000], b[10000];
	uint64_t s1 = ds_seed_of("class000/sample_000001.bin"), s2 = ds_seed_of("class000/sample_000002.bin");
	CHECK(s1 == ds_seed_of("class000/sample_000001.bin"));
	CHECK(s1 != s2);
	ds_fill(s1, 0, a, sizeof(a));
	ds_fill(s1, 0, b, sizeof(b));
	CHECK(!memcmp(a, b, sizeof(a)));
	ds_fill(s2, 0, b, sizeof(b));
	CHECK(memcmp(a, b, sizeof(a)));
	/* any sub-range equals the same bytes of the whole */
	for (unsigned off = 0; off < 40; off++)
		for (unsigned n = 0; n < 30; n++) {
			ds_fill(s1, off, b, n);
			CHECK(!memcmp(a + off, b, n));
		}
	CHECK(ds_check(s1, 123, a + 123, 5000) == 0);
	a[4000] ^= 1;
	CHECK(ds_check(s1, 0, a, sizeof(a)) == 4001);
	/* 256-periodic or constant content would let a wrong-sector read pass */
	ds_fill(s1, 0, a, sizeof(a));
	CHECK(memcmp(a, a + 256, 512) && memcmp(a, a + 4096, 512));

	/* shapes */
	for (unsigned d = 0; d < ds_nspecs; d++) {
		const struct ds_spec *sp = &ds_specs[d];
		struct dataset ds, again;
		CHECK(ds_plan(&ds, sp, "/nonexistent", 1.0) == 0);
		CHECK(ds.nfiles == sp->classes * sp->per_class);
		for (unsigned i = 0; i < ds.nfiles; i++) {
			CHECK(ds.files[i].size >= sp->min_size && ds.files[i].size <= sp->max_size);
			if (sp->not_512)
				CHECK(ds.files[i].size % 512 != 0);
		}
		CHECK(ds_plan(&again, sp, "/nonexistent", 1.0) == 0);
		for (unsigned i = 0; i < ds.nfiles; i++)
			CHECK(ds.files[i].size == again.files[i].size && !strcmp(ds.files[i].path, again.files[i].path));
		ds_free(&again);
		ds_free(&ds);
	}
	CHECK(ds_find("lmcacheish") && ds_find("lmcacheish")->min_size == 14684160);
	CHECK(!ds_find("nope"));

	/* generation: complete → reused; a damaged file → regenerated */
	char dir[] = "/tmp/opends-bench-test-XXXXXX";
	CHECK(mkdtemp(dir));
	struct dataset ds;
	CHECK(ds_plan(&ds, ds_find("imagenetish"), dir, 0.002) == 0); /* 1 per class */
	CHECK(ds.nfiles == 50);
	CHECK(ds_generate(&ds, 2, false) == 0);
	for (unsigned i = 0; i < ds.nfiles; i += 7) {
		FILE *f = fopen(ds.files[i].path, "rb");
		CHECK(f);
		unsigned char *buf = malloc(ds.files[i].size);
		CHECK(fread(buf, 1, ds.files[i].size, f) == ds.files[i].size);
		CHECK(ds_check(ds.files[i].seed, 0, buf, ds.files[i].size) == 0);
		free(buf);
		fclose(f);
	}
	struct stat st0, st1;
	CHECK(stat(ds.files[3].path, &st0) == 0);
	CHECK(ds_generate(&ds, 2, false) == 0); /* reused: not rewritten */
	CHECK(stat(ds.files[3].path, &st1) == 0 && st1.st_mtim.tv_nsec == st0.st_mtim.tv_nsec &&
	      st1.st_mtim.tv_sec == st0.st_mtim.tv_sec);
	CHECK(truncate(ds.files[5].path, 10) == 0); /* partial */
	CHECK(ds_generate(&ds, 2, false) == 0);
	CHECK(stat(ds.files[5].path, &st1) == 0 && (uint64_t)st1.st_size == ds.files[5].size);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	ds_free(&ds);
	printf("bench data ok\n");
	return 0;
}
