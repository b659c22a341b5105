/*
 * What test_batch_release.c and test_stream_release.c share: the file's
 * shape and a look at a handle's in-flight count (the library's internals:
 * both tests check that a collect or sync leaves the handle idle at once).
 */
#ifndef RELEASE_TEST_H
#define RELEASE_TEST_H

#include "ods.h"

#define ROUNDS 2000u
#define PIECE ((size_t)64 << 10)
#define NPIECE 16u
#define FSIZE (NPIECE * PIECE)

static inline long inflight_of(opends_handle_t fh)
{
	struct ods_handle *h = ods_handle_lookup(fh);
	return h ? atomic_load(&h->inflight) : -1;
}

#endif
