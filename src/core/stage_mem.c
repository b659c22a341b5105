/*
 * The staging engine's memory (stage.h): the staging memory budget
 * (OPENDS_MAX_PINNED), each worker's slots, and the copies between slots
 * and accelerator memory on the worker's lane.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stage_int.h"

bool ods_stage_async_copies(const struct ods_accel *a)
{
	return a->lanes != NULL;
}

/* ---- the staging memory budget ----------------------------------------------- */

static atomic_size_t pinned_reserved;

size_t ods_pinned_budget(const struct ods_config *cfg)
{
	if (cfg->max_pinned)
		return cfg->max_pinned;
	/* a quarter of the memory: the defaults (8 workers x 16 x 1 MiB, plus
	 * stream staging) use a small part of it on any machine the library is
	 * for, the largest chunk (1 GiB) still fits once per worker on a 16 GiB
	 * machine, and settings that ask for more get a smaller depth or are
	 * refused at open instead of pinning memory the machine does not have */
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	size_t ram = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : (size_t)8 << 30;
	size_t b = ram / 4;
	return b < ((size_t)256 << 20) ? (size_t)256 << 20 : b;
}

bool ods_pinned_reserve(size_t n)
{
	size_t budget = ods_pinned_budget(&ods_drv.cfg);
	size_t cur = atomic_load(&pinned_reserved);
	do {
		if (n > budget || cur > budget - n)
			return false;
	} while (!atomic_compare_exchange_weak(&pinned_reserved, &cur, cur + n));
	return true;
}

size_t ods_pinned_left(void)
{
	size_t budget = ods_pinned_budget(&ods_drv.cfg), held = atomic_load(&pinned_reserved);
	return held < budget ? budget - held : 0;
}

void ods_pinned_release(size_t n)
{
	atomic_fetch_sub(&pinned_reserved, n);
}

void ods_pinned_forget(void)
{
	atomic_store(&pinned_reserved, 0);
	ods_ra_keep_forget();
	ods_stage_why_forget();
}

/* Fit threads x depth x chunk of staging into what is left of the budget:
 * the depth is cut to fit; refused when not even one chunk per worker fits. */
int ods_stage_fit_budget(struct ods_stage_params *p, const struct ods_mover *m, const struct ods_config *cfg,
			 size_t *reserved)
{
	size_t budget = ods_pinned_budget(cfg), per_unit = (size_t)p->threads * p->chunk;
	size_t left = budget - (atomic_load(&pinned_reserved) < budget ? atomic_load(&pinned_reserved) : budget);
	size_t fit = left / per_unit;
	if (fit < p->depth)
		p->depth = fit ? (unsigned)fit : 1;
	size_t need = per_unit * p->depth;
	if (need / p->depth != per_unit || !ods_pinned_reserve(need))
		return ods_fail(OPENDS_DRIVER_INVALID_PROPS,
				"%s: %u workers (OPENDS_IO_THREADS) x %u chunk(s) (OPENDS_QUEUE_DEPTH) of %zu KiB "
				"(OPENDS_CHUNK_SIZE) need %zu MiB of staging memory; OPENDS_MAX_PINNED allows %zu MiB "
				"(%zu MiB of it free)",
				m->name, p->threads, p->depth, p->chunk >> 10, need >> 20, budget >> 20, left >> 20);
	*reserved = need;
	return 0;
}

size_t ods_stage_chunk_fit(const struct ods_stage_params *p, const struct ods_mover *m, const struct ods_config *cfg,
			   const struct ods_accel *accel)
{
	size_t budget = ods_pinned_budget(cfg), held = atomic_load(&pinned_reserved);
	size_t left = budget - (held < budget ? held : budget);
	size_t workers = (size_t)p->threads + ods_stage_extra_workers(p, m, cfg, accel);
	size_t each = workers ? left / workers : 0, c = ODS_ALIGN;
	if (each >= p->chunk)
		return p->chunk;
	if (each < c)
		return 0;
	while (c * 2 <= each)
		c *= 2;
	return c;
}

/* ---- slots and copies ---------------------------------------------------- */

/* Slots: with an accelerator that pins memory, every slot of a worker is
 * allocated and pinned when it starts (pinning later, while a caller's
 * stream waits on an operation of ours, could meet an implicit device
 * synchronisation). Otherwise each slot is mapped when a unit first needs
 * one, so a small read costs one chunk, not depth x chunk. A slot that
 * cannot be had fails that chunk with -ENOMEM only: the next one tries
 * again. ods_stage_open keeps threads x depth x chunk within the budget. */
static void slot_set(struct ods_stage_unit *u, char *p)
{
	const struct ods_mover *m = u->w->s->mv;
	u->slot_mem = p;
	if (m->slot_added)
		m->slot_added(u->w->ctx, u->idx, p, u->w->s->p.chunk);
}

void ods_stage_block_alloc(struct ods_stage_worker *w)
{
	struct ods_stage *s = w->s;
	size_t n = (size_t)s->p.depth * s->p.chunk;
	char *p = s->accel->mem->pinned_alloc(n);
	w->block_pinned = p != NULL;
	if (!p) {
		/* pinning failed: plain pages still work, the accelerator's
		 * copies from them are just slower */
		void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		p = m == MAP_FAILED ? NULL : m;
	}
	if (!p)
		return; /* slots then come one by one, on first use */
	w->block = p;
	for (unsigned i = 0; i < s->p.depth; i++)
		slot_set(&w->units[i], p + (size_t)i * s->p.chunk);
}

void ods_stage_slots_free(struct ods_stage_worker *w)
{
	struct ods_stage *s = w->s;
	size_t chunk = s->p.chunk;
	if (s->mv->slots_removed)
		s->mv->slots_removed(w->ctx);
	if (w->block) {
		if (w->block_pinned)
			s->accel->mem->pinned_free(w->block, (size_t)s->p.depth * chunk);
		else
			munmap(w->block, (size_t)s->p.depth * chunk);
		w->block = NULL;
	} else {
		for (unsigned i = 0; i < s->p.depth; i++)
			if (w->units[i].slot_mem)
				munmap(w->units[i].slot_mem, chunk);
	}
	for (unsigned i = 0; i < s->p.depth; i++)
		w->units[i].slot_mem = NULL;
}

char *ods_stage_slot(struct ods_stage_unit *u)
{
	if (!u->slot_mem) {
		void *m = mmap(NULL, u->w->s->p.chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return NULL;
		slot_set(u, m);
	}
	return u->slot_mem;
}

/* Start the copy of a unit; completion is asked with copy_poll. */
int ods_stage_copy_start(struct ods_stage_unit *u, void *dst, const void *src, size_t n, bool to_dev)
{
	struct ods_stage_worker *w = u->w;
	const struct ods_accel_lanes *a = w->s->accel->lanes;
	if (w->lane) {
		int rc = to_dev ? a->copy_to_device_async(w->lane, dst, src, n)
				: a->copy_to_host_async(w->lane, dst, src, n);
		return rc ? rc : a->fence_record(w->lane, u->idx);
	}
	u->cp_dst = dst;
	u->cp_src = src;
	u->cp_n = n;
	u->cp_to_dev = to_dev;
	u->cp_polls = 0;
	return 0;
}

/* 1 done, 0 not yet, or a negated OPENDS_* code. */
int ods_stage_copy_poll(struct ods_stage_unit *u, bool wait)
{
	struct ods_stage_worker *w = u->w;
	const struct ods_accel *acc = w->s->accel;
	const struct ods_accel_lanes *a = acc->lanes;
	if (w->lane) {
		if (!wait)
			return a->fence_query(w->lane, u->idx);
		int rc = a->fence_wait(w->lane, u->idx);
		return rc ? rc : 1;
	}
	if (!wait && u->cp_polls++ == 0)
		return 0; /* see the header: the pipeline must cope with "not yet" */
	int rc = u->cp_to_dev ? acc->copy_to_device(u->cp_dst, u->cp_src, u->cp_n)
			      : acc->copy_to_host(u->cp_dst, u->cp_src, u->cp_n);
	return rc ? -rc : 1;
}
