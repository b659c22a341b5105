/* The benchmark's arithmetic, kept apart so it can be unit-tested, and
 * the one way its legs start and wait for threads. */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MIB 1048576.0

/* MiB/s for bytes moved in seconds; 0 when seconds <= 0. */
double st_mib_s(uint64_t bytes, double seconds);
/* Nearest-rank percentile p (0..100) of n values; sorts v in place.
 * 0 when n is 0. */
double st_percentile(double *v, size_t n, double p);
/* a / b, or -1 when b is 0 (printed as n/a). */
double st_ratio(double a, double b);
/* seconds between two CLOCK_MONOTONIC readings given as ns */
double st_seconds(uint64_t t0_ns, uint64_t t1_ns);
uint64_t st_now_ns(void);
/* Run fn on n threads (at most 256), thread i given args + i * stride
 * (stride 0: all share args), and wait for them all. Returns how many
 * started: fewer than n when the system refuses a thread. */
/* The running leg's time limit: st_deadline(s) from now (0: none);
 * st_expired() is true past it. Legs check it between calls and stop,
 * recording -ETIMEDOUT, so one slow leg cannot eat a whole sweep. */
void st_deadline(double seconds);
bool st_expired(void);
unsigned st_run_threads(unsigned n, void *(*fn)(void *), void *args, size_t stride);

#endif
