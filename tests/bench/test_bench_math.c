/* The benchmark's arithmetic: throughput, percentiles and ratios must be
 * right, or every committed figure is wrong. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/stats.h"

static int fails;
#define NEAR(a, b)                                                                               \
	do {                                                                                     \
		double _a = (a), _b = (b);                                                       \
		if (fabs(_a - _b) > 1e-9 * (fabs(_b) + 1)) {                                     \
			fprintf(stderr, "%s:%d: %s = %.12g, expected %.12g\n", __FILE__, __LINE__, #a, \
				_a, _b);                                                         \
			fails++;                                                                 \
		}                                                                                \
	} while (0)

int main(void)
{
	NEAR(st_mib_s(1048576, 1.0), 1.0);
	NEAR(st_mib_s(3u << 20, 0.5), 6.0);
	NEAR(st_mib_s(12345, 0), 0);
	NEAR(st_seconds(1000000000ull, 3500000000ull), 2.5);

	double v[] = { 5, 1, 4, 2, 3 };
	NEAR(st_percentile(v, 5, 50), 3);
	NEAR(st_percentile(v, 5, 0), 1);
	NEAR(st_percentile(v, 5, 100), 5);
	NEAR(st_percentile(v, 5, 20), 1); /* nearest rank: ceil(0.2 * 5) = 1st */
	NEAR(st_percentile(v, 5, 21), 2);
	NEAR(st_percentile(v, 0, 50), 0);
	double w[100];
	for (int i = 0; i < 100; i++)
		w[i] = 100 - i; /* 100..1 */
	NEAR(st_percentile(w, 100, 99), 99);
	NEAR(st_percentile(w, 100, 50), 50);
	double one[] = { 7 };
	NEAR(st_percentile(one, 1, 99), 7);

	NEAR(st_ratio(1, 4), 0.25);
	NEAR(st_ratio(3, 0), -1);
	if (fails)
		return 1;
	printf("bench math ok\n");
	return 0;
}
