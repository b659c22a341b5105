/* Slot tables: see struct ods_slots in ods.h. */
#include <stdlib.h>
#include <string.h>

#include "ods.h"

/* Generations come from one process-wide counter, so a token stays unique
 * across slot reuse and across driver close and reopen: a stale handle from
 * before a reopen is found missing instead of naming a new file. The count
 * is scrambled by a bijection of 32-bit numbers, so small made-up values
 * are not the handles registered early on. 0 is never a live generation. */
static atomic_uint next_gen = 1;

static uint32_t new_gen(void)
{
	for (;;) {
		uint32_t c = atomic_fetch_add_explicit(&next_gen, 1, memory_order_relaxed);
		uint32_t g = c * 0x9e3779b1u; /* odd multiplier: a bijection */
		g ^= g >> 16;                 /* xorshift: a bijection */
		if (g)
			return g;
	}
}

void ods_slots_init(struct ods_slots *s)
{
	memset(s, 0, sizeof(*s));
	pthread_rwlock_init(&s->lock, NULL);
}

static bool grow(struct ods_slots *s)
{
	uint32_t ncap = s->cap ? s->cap * 2 : 64;
	void **obj = realloc(s->obj, ncap * sizeof(*obj));
	if (!obj)
		return false;
	s->obj = obj;
	uint32_t *gen = realloc(s->gen, ncap * sizeof(*gen));
	if (!gen)
		return false;
	s->gen = gen;
	uint32_t *freel = realloc(s->freel, ncap * sizeof(*freel));
	if (!freel)
		return false;
	s->freel = freel;
	/* new slots go on the free list highest first, so low ones are used
	 * first */
	for (uint32_t i = ncap; i > s->cap; i--) {
		s->obj[i - 1] = NULL;
		s->gen[i - 1] = 0;
		s->freel[s->nfree++] = i - 1;
	}
	s->cap = ncap;
	return true;
}

uint64_t ods_slots_add(struct ods_slots *s, void *obj)
{
	uint64_t token = 0;
	pthread_rwlock_wrlock(&s->lock);
	if (s->nfree || grow(s)) {
		uint32_t i = s->freel[--s->nfree];
		s->obj[i] = obj;
		s->gen[i] = new_gen();
		token = ((uint64_t)s->gen[i] << 32) | (uint64_t)(i + 1);
	}
	pthread_rwlock_unlock(&s->lock);
	return token;
}

static void *find(struct ods_slots *s, uint64_t token, uint32_t *idx)
{
	uint32_t i = (uint32_t)token - 1, g = (uint32_t)(token >> 32);
	if ((uint32_t)token == 0 || g == 0 || i >= s->cap || s->gen[i] != g)
		return NULL;
	*idx = i;
	return s->obj[i];
}

void *ods_slots_get(struct ods_slots *s, uint64_t token)
{
	uint32_t i;
	pthread_rwlock_rdlock(&s->lock);
	void *o = find(s, token, &i);
	pthread_rwlock_unlock(&s->lock);
	return o;
}

void *ods_slots_take(struct ods_slots *s, uint64_t token)
{
	uint32_t i;
	pthread_rwlock_wrlock(&s->lock);
	void *o = find(s, token, &i);
	if (o) {
		s->obj[i] = NULL;
		s->gen[i] = 0;
		s->freel[s->nfree++] = i;
	}
	pthread_rwlock_unlock(&s->lock);
	return o;
}

void ods_slots_fini(struct ods_slots *s, void (*fn)(void *obj))
{
	for (uint32_t i = 0; i < s->cap; i++)
		if (s->obj[i] && fn)
			fn(s->obj[i]);
	free(s->obj);
	free(s->gen);
	free(s->freel);
	pthread_rwlock_destroy(&s->lock);
	memset(s, 0, sizeof(*s));
}
