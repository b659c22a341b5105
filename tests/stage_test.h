/*
 * What the staging engine's own tests (test_stage.c, test_stage_fair.c)
 * share: they link the library's objects and drive src/core/stage.h with
 * movers of their own.
 */
#ifndef STAGE_TEST_H
#define STAGE_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include "stage.h"

#define FAIL(...)                                                                                                      \
	do {                                                                                                           \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
		fprintf(stderr, __VA_ARGS__);                                                                          \
		fprintf(stderr, "\n");                                                                                 \
		exit(1);                                                                                               \
	} while (0)

/* a mover's per-worker state: only the worker's number (+1, never NULL) */
static inline int stage_test_worker_open(struct ods_stage *s, unsigned idx, void **ctx)
{
	(void)s;
	*ctx = (void *)(uintptr_t)(idx + 1);
	return 0;
}

static inline void stage_test_worker_close(void *ctx)
{
	(void)ctx;
}

#endif
