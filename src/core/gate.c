/* Calls in progress, against close: see gate.h. */
#include <stdatomic.h>
#include <time.h>

#include "gate.h"

#define SHARDS 32

static atomic_int state = ODS_GATE_CLOSED;
static struct {
	_Alignas(64) atomic_long n;
} inside[SHARDS];
static atomic_uint next_shard;

/* This thread's shard (+1; 0: not chosen yet), its passes out and the
 * callbacks it is running: one thread-local block, so that a call costs
 * one look-up of it (initial-exec: no __tls_get_addr call; 12 bytes of the
 * static TLS that glibc keeps for libraries loaded later, by dlopen). */
static _Thread_local struct {
	unsigned shard, depth, callbacks;
} me __attribute__((tls_model("initial-exec")));

int ods_gate_enter(struct ods_gate_pass *p)
{
	if (!me.shard)
		me.shard = atomic_fetch_add_explicit(&next_shard, 1, memory_order_relaxed) % SHARDS + 1;
	atomic_long *c = &inside[me.shard - 1].n;
	atomic_fetch_add(c, 1);
	if (me.depth == 0) { /* nested calls ride on their outer call's pass */
		int st = atomic_load(&state);
		if (st != ODS_GATE_OPEN) {
			atomic_fetch_sub_explicit(c, 1, memory_order_release);
			p->count = NULL;
			return st;
		}
	}
	me.depth++;
	p->count = c;
	return 0;
}

void ods_gate_leave(struct ods_gate_pass *p)
{
	if (!p->count)
		return;
	me.depth--;
	atomic_fetch_sub_explicit((atomic_long *)p->count, 1, memory_order_release);
	p->count = NULL;
}

void ods_gate_open(void)
{
	atomic_store(&state, ODS_GATE_OPEN);
}

bool ods_gate_begin_close(void)
{
	int open = ODS_GATE_OPEN;
	return atomic_compare_exchange_strong(&state, &open, ODS_GATE_CLOSING);
}

void ods_gate_drain(void)
{
	/* Calls inside finish on their own: those that wait by design (a
	 * stream synchronize, a batch get_status, a synchronous read) wait for
	 * I/O the engine still runs, as close itself would. Short sleeps
	 * first (most calls take microseconds), then 1 ms. */
	for (unsigned round = 0;; round++) {
		long n = 0;
		for (int i = 0; i < SHARDS; i++)
			n += atomic_load(&inside[i].n);
		if (n == 0)
			return;
		struct timespec ts = { 0, round < 100 ? 20 * 1000 : 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

void ods_gate_closed(void)
{
	atomic_store(&state, ODS_GATE_CLOSED);
}

int ods_gate_state(void)
{
	return atomic_load(&state);
}

void ods_gate_callback_begin(void)
{
	me.callbacks++;
}

void ods_gate_callback_end(void)
{
	me.callbacks--;
}

bool ods_gate_busy_here(void)
{
	return me.depth || me.callbacks;
}

void ods_gate_forget(void)
{
	/* The child has only the forking thread: the other threads' passes
	 * are gone, but its own (a fork from inside a call, e.g. a source's
	 * callback) are given back when its calls return, so they stay
	 * counted; else that leave would take the count below zero and a
	 * later close in the child would wait forever. */
	atomic_store_explicit(&state, ODS_GATE_CLOSED, memory_order_relaxed);
	for (int i = 0; i < SHARDS; i++)
		atomic_store_explicit(&inside[i].n, 0, memory_order_relaxed);
	if (me.shard)
		atomic_store_explicit(&inside[me.shard - 1].n, (long)me.depth, memory_order_relaxed);
}
