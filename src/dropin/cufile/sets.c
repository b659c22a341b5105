/*
 * Sets of pointers (dropin.h, struct pset): what the drop-in must remember
 * about handles, buffers, batches and streams to give cuFile's answers
 * where OpenDS's contract differs (cufile.c, async.c). Open addressing
 * with linear probing and backward-shift deletion (no tombstones), so
 * add, delete and look-up stay O(1) however many handles a program
 * registers (a set of every read-only handle grows with the program's
 * files; a linear list made deregistering them quadratic). The count is
 * read without the lock, so a look-up in an empty set costs one load.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dropin.h"

static size_t slot_of(const struct pset *s, const void *p)
{
	/* pointers and OpenDS tokens: mix the high bits (a token's
	 * generation) into the low ones, then multiply (Fibonacci hashing) */
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 29;
	x *= 0x9E3779B97F4A7C15ull;
	return (size_t)(x >> 32) & (s->cap - 1);
}

/* Under s->m. Doubles the table (cap a power of two, at most half full). */
static bool grow_locked(struct pset *s)
{
	size_t cap = s->cap ? 2 * s->cap : 32;
	void **old = s->v;
	size_t ocap = s->cap;
	void **v = calloc(cap, sizeof(*v));
	if (!v)
		return false;
	s->v = v;
	s->cap = cap;
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i])
			continue;
		size_t j = slot_of(s, old[i]);
		while (v[j])
			j = (j + 1) & (cap - 1);
		v[j] = old[i];
	}
	free(old);
	return true;
}

/* The slot holding p, or the empty slot where it would go. Under s->m,
 * with cap > 0. */
static size_t find_locked(const struct pset *s, const void *p)
{
	size_t i = slot_of(s, p);
	while (s->v[i] && s->v[i] != p)
		i = (i + 1) & (s->cap - 1);
	return i;
}

bool pset_add(struct pset *s, void *p)
{
	if (!p) /* never a member: NULL is no handle, buffer, batch or stream here */
		return true;
	bool ok = true;
	pthread_mutex_lock(&s->m);
	if (2 * (s->n + 1) > s->cap)
		ok = grow_locked(s);
	if (ok) {
		size_t i = find_locked(s, p);
		if (!s->v[i]) {
			s->v[i] = p;
			s->n++;
			atomic_store(&s->count, s->n);
		}
	}
	pthread_mutex_unlock(&s->m);
	return ok;
}

bool pset_del(struct pset *s, void *p)
{
	if (!p || !atomic_load_explicit(&s->count, memory_order_relaxed))
		return false;
	pthread_mutex_lock(&s->m);
	bool found = false;
	if (s->cap) {
		size_t i = find_locked(s, p);
		found = s->v[i] != NULL;
		if (found) {
			/* backward shift: move later members of the probe run
			 * into the hole unless their home slot lies after it */
			size_t mask = s->cap - 1, j = i;
			s->v[i] = NULL;
			for (;;) {
				j = (j + 1) & mask;
				if (!s->v[j])
					break;
				size_t home = slot_of(s, s->v[j]);
				if (((j - home) & mask) >= ((j - i) & mask)) {
					s->v[i] = s->v[j];
					s->v[j] = NULL;
					i = j;
				}
			}
			s->n--;
			atomic_store(&s->count, s->n);
		}
	}
	pthread_mutex_unlock(&s->m);
	return found;
}

bool pset_has(struct pset *s, void *p)
{
	if (!p || !atomic_load_explicit(&s->count, memory_order_relaxed))
		return false;
	pthread_mutex_lock(&s->m);
	bool found = s->cap && s->v[find_locked(s, p)] != NULL;
	pthread_mutex_unlock(&s->m);
	return found;
}

void pset_clear_locked(struct pset *s)
{
	if (s->cap)
		memset(s->v, 0, s->cap * sizeof(*s->v));
	s->n = 0;
	atomic_store(&s->count, 0);
}

void pset_clear(struct pset *s)
{
	pthread_mutex_lock(&s->m);
	pset_clear_locked(s);
	pthread_mutex_unlock(&s->m);
}
