/*
 * Plain types shared by the core (ods.h) and the accelerator layers
 * (src/accel/accel.h), so that accel.h compiles on its own and the include
 * arrows run one way: ods.h -> accel.h -> ods_types.h. Not public.
 */
#ifndef ODS_TYPES_H
#define ODS_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- configuration (src/core/config.c) -------------------------------- */

struct ods_config {
	char backend[32];   /* "auto" or a backend name */
	char accel[16];     /* "auto", "cuda", "host" or "hostdev" */
	unsigned io_threads;  /* 0: backend default */
	unsigned queue_depth; /* 0: backend default */
	unsigned io_kworkers;  /* uring: kernel copy workers per ring; 0: backend default */
	size_t chunk_size;    /* 0: backend default */
	uint64_t cpu_mask;    /* 0: no pinning */
	long idle_spin_us;    /* -1: never sleep ("busy"); -2: unset */
	size_t max_pinned;    /* staging memory budget in bytes; 0: default (ods_pinned_budget) */
	bool inline_set;      /* OPENDS_INLINE_MAX was given; else the backend's default */
	size_t inline_max;    /* synchronous requests up to this run on the caller (0: none) */
	unsigned inline_split; /* OPENDS_INLINE_SPLIT (uring); 0: unset, the default */
	bool no_readahead;    /* OPENDS_READAHEAD=0: never read ahead (stage_ra.c) */
	bool aligned_only;
};

/* ---- memory ----------------------------------------------------------- */

enum ods_mem_kind { ODS_MEM_HOST = 0, ODS_MEM_DEVICE = 1 };

/* The most devices an accelerator layer numbers (ods_io.dev is below it). */
#define ODS_MAX_DEVICES 64u
/* The device classify gives device memory that cannot be served (its
 * context is gone): operations on it fail with OPENDS_CONTEXT_MISMATCH, the
 * detail set by classify. */
#define ODS_DEV_NONE 0xffffu

#endif
