/*
 * test_cufile_sets
 *
 * The drop-in's pointer sets (src/dropin/cufile/sets.c, built into this
 * test): 200,000 random adds, deletes and look-ups of keys shaped as the
 * drop-in's are (OpenDS handle tokens: generation << 32 | slot; O_PATH
 * handles: fd << 32; heap pointers 16 bytes apart), against a plain
 * array. Deletion shifts probe runs back (no tombstones), so every
 * look-up after many deletes must still find exactly the members; the
 * count must equal the array's; NULL is never a member; a clear empties.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "dropin.h"

#define NKEYS 4096

static int failures;
#define CHECK(c)                                                                         \
	do {                                                                             \
		if (!(c) && failures++ < 10)                                             \
			fprintf(stderr, "%s:%d: CHECK(%s)\n", __FILE__, __LINE__, #c); \
	} while (0)

static uint64_t seed = 88172645463325252ull;
static uint64_t rnd(void)
{
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	return seed;
}

int main(void)
{
	static void *keys[NKEYS];
	static bool in[NKEYS];
	for (int i = 0; i < NKEYS; i++) {
		uint64_t k;
		switch (i % 3) {
		case 0: /* an OpenDS token: generation, slot + 1 */
			k = ((uint64_t)(1 + i / 3) << 32) | (uint64_t)(1 + (i * 7) % 512);
			break;
		case 1: /* an O_PATH handle: fd + 1 in the high half */
			k = (uint64_t)(1 + i) << 32;
			break;
		default: /* heap pointers, 16 bytes apart */
			k = 0x55880bab4000ull + 16u * (uint64_t)i;
		}
		keys[i] = (void *)(uintptr_t)k;
	}
	struct pset s = PSET_INIT;
	size_t n = 0;
	for (int op = 0; op < 200000; op++) {
		int i = (int)(rnd() % NKEYS);
		switch (rnd() % 4) {
		case 0:
		case 1:
			CHECK(pset_add(&s, keys[i]));
			n += !in[i];
			in[i] = true;
			break;
		case 2:
			CHECK(pset_del(&s, keys[i]) == in[i]);
			n -= in[i];
			in[i] = false;
			break;
		default:
			CHECK(pset_has(&s, keys[i]) == in[i]);
		}
		CHECK(atomic_load(&s.count) == n);
		if (op % 50000 == 49999) /* every member, and no other key */
			for (int k = 0; k < NKEYS; k++)
				CHECK(pset_has(&s, keys[k]) == in[k]);
	}
	CHECK(pset_add(&s, NULL) && !pset_has(&s, NULL) && !pset_del(&s, NULL));
	pset_clear(&s);
	CHECK(atomic_load(&s.count) == 0);
	for (int k = 0; k < NKEYS; k++)
		CHECK(!pset_has(&s, keys[k]));
	CHECK(pset_add(&s, keys[5]) && pset_has(&s, keys[5]));
	free(s.v);
	if (failures)
		return 1;
	printf("ok: 200000 operations on keys as the drop-in's, the set always the array's\n");
	return 0;
}
