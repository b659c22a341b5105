#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

double st_mib_s(uint64_t bytes, double seconds)
{
	return seconds > 0 ? (double)bytes / MIB / seconds : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double st_percentile(double *v, size_t n, double p)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	if (p <= 0)
		return v[0];
	if (p >= 100)
		return v[n - 1];
	/* nearest rank: the smallest value with at least p% at or below */
	size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999999);
	if (rank < 1)
		rank = 1;
	return v[rank - 1];
}

double st_ratio(double a, double b)
{
	return b != 0 ? a / b : -1;
}

double st_seconds(uint64_t t0_ns, uint64_t t1_ns)
{
	return (double)(t1_ns - t0_ns) / 1e9;
}

uint64_t st_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

unsigned st_run_threads(unsigned n, void *(*fn)(void *), void *args, size_t stride)
{
	pthread_t t[256];
	unsigned started = 0;
	if (n > 256)
		n = 256;
	for (; started < n; started++)
		if (pthread_create(&t[started], NULL, fn, (char *)args + started * stride))
			break;
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	return started;
}

static atomic_uint_fast64_t deadline_ns; /* 0: no limit */

void st_deadline(double seconds)
{
	atomic_store(&deadline_ns, seconds > 0 ? st_now_ns() + (uint64_t)(seconds * 1e9) : 0);
}

bool st_expired(void)
{
	uint64_t d = atomic_load(&deadline_ns);
	return d && st_now_ns() > d;
}
