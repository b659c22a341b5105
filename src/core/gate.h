/*
 * Calls in progress, against close (src/core/gate.c).
 *
 * A library whose close frees what its calls use must know that no call is
 * inside when it frees. Every public call that uses the driver's state
 * takes a pass (ods_gate_enter .. ods_gate_leave); close marks the gate
 * closing, waits until no pass is out (ods_gate_drain), then tears down.
 * A call that comes after the mark is refused at once, never half run.
 *
 * Cost on the I/O path: the count is spread over cache lines by thread
 * (one line per thread up to ODS_GATE_SHARDS threads), so a call pays one
 * uncontended atomic increment, one load of the state and one decrement;
 * no lock and no line shared by two threads that call at once.
 * Entering is an increment then a load of the state; closing is a store of
 * the state then loads of the counts, all sequentially consistent: either
 * the call sees the gate closing, or close sees the call.
 *
 * A call made from inside a call on the same thread (a source's callback
 * run by opends_sync_read calling OpenDS again) is let in while its outer
 * call is: close waits for the outer one anyway. A thread inside a call or
 * inside a callback the library runs must not close (close would wait for
 * itself): ods_gate_busy_here() says so, and close refuses.
 *
 * One mechanism, compiled into each library that needs one gate: the core
 * (opends_driver_close) and the cuFile drop-in (cuFileDriverClose).
 */
#ifndef ODS_GATE_H
#define ODS_GATE_H

#include <stdbool.h>

/* never 0: ods_gate_enter returns 0 for "inside" */
enum { ODS_GATE_CLOSED = 1, ODS_GATE_OPEN = 2, ODS_GATE_CLOSING = 3 };

/* What a call holds while inside: the count it raised (NULL: not inside). */
struct ods_gate_pass {
	void *count;
};

/* 0: inside (leave with ods_gate_leave); else the state that refused the
 * call, ODS_GATE_CLOSED or ODS_GATE_CLOSING (p->count is NULL then). */
int ods_gate_enter(struct ods_gate_pass *p);
/* Leave; no-op when p is not inside (usable as a cleanup function). */
void ods_gate_leave(struct ods_gate_pass *p);
/* After a successful open: calls may enter. */
void ods_gate_open(void);
/* OPEN -> CLOSING (true), or false when the gate was not open (closed,
 * or another thread's close got there first: ods_gate_state says which). */
bool ods_gate_begin_close(void);
/* While CLOSING: wait until no call is inside. */
void ods_gate_drain(void);
/* At the end of close: CLOSING -> CLOSED. */
void ods_gate_closed(void);
int ods_gate_state(void);
/* Callbacks into the user's code (a source's read, write, release,
 * describe) run between these: close refuses to run inside one. */
void ods_gate_callback_begin(void);
void ods_gate_callback_end(void);
/* This thread is inside a call or a callback. */
bool ods_gate_busy_here(void);
/* In the child of fork(): only this thread exists; no call is inside. */
void ods_gate_forget(void);

#endif /* ODS_GATE_H */
