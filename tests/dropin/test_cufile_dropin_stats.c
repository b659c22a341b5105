/*
 * test_cufile_dropin_stats --lib=PATH [ROUNDS]
 *
 * cuFile's statistics switch under concurrent changes (a cuFile program
 * on the drop-in, host memory). Each round, four threads start together:
 * two set the level (one 0, one 2), one calls cuFileStatsStop or
 * cuFileStatsStart, and one reads (counted or not, as the switch says at
 * that moment). After they join, the state the last calls left must be
 * one whole state: with the level L (cuFileGetStatsLevel) and
 * cuFileGetStatsL1's answer (INVALID_VALUE while stopped or at level 0),
 *   - L1 answers success  => level >= 1 and running: a read after a
 *     cuFileStatsReset is counted exactly once (read_ops.ok 1, its bytes);
 *   - L1 answers INVALID_VALUE => a read is not counted: once the level is
 *     1 and counting started again, read_ops.ok is 0 before the next read.
 * Before the level and the switch changed under one lock, a round could
 * end at level 2 with counting off (two cuFileSetStatsLevel calls
 * interleaving). Run under ThreadSanitizer by tests/dropin/tsan.sh. Exit 0
 * pass, 1 fail.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>

#include "dropin_test.h"

#define FSZ 65536u

/* The statistics calls (OpenDS's cufile.h leaves their structures
 * opaque): read_ops.ok and read_bytes are the first and the 13th 64-bit
 * fields of cuFile's CUfileStatsLevel1_t (src/dropin/cufile/stats.c
 * asserts the layout). */
static CUfileError_t (*set_level)(int), (*get_level)(int *), (*start)(void), (*stop)(void), (*reset)(void),
	(*get_l1)(void *);
static uint64_t l1[128]; /* 1024 bytes: larger than the 624 of level 1 */

static CUfileHandle_t fh;
static uint8_t buf[4096];
static pthread_barrier_t go;

static void *t_level0(void *a)
{
	(void)a;
	pthread_barrier_wait(&go);
	CU_OK(set_level(0));
	return NULL;
}

static void *t_level2(void *a)
{
	(void)a;
	pthread_barrier_wait(&go);
	CU_OK(set_level(2));
	return NULL;
}

static void *t_switch(void *a)
{
	pthread_barrier_wait(&go);
	CU_OK((uintptr_t)a & 1 ? stop() : start());
	return NULL;
}

static void *t_read(void *a)
{
	(void)a;
	pthread_barrier_wait(&go);
	CHECK(L.cuFileRead(fh, buf, sizeof buf, 0, 0) == (ssize_t)sizeof buf, "read");
	return NULL;
}

int main(int argc, char **argv)
{
	const char *lib = dt_load(argc, argv);
	int rounds = 2000;
	for (int i = 1; i < argc; i++)
		if (argv[i][0] != '-')
			rounds = atoi(argv[i]);
	dt_watchdog(300);
	void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	CHECK(h, "dlopen %s: %s", lib, dlerror());
	set_level = (CUfileError_t(*)(int))dlsym(h, "cuFileSetStatsLevel");
	get_level = (CUfileError_t(*)(int *))dlsym(h, "cuFileGetStatsLevel");
	start = (CUfileError_t(*)(void))dlsym(h, "cuFileStatsStart");
	stop = (CUfileError_t(*)(void))dlsym(h, "cuFileStatsStop");
	reset = (CUfileError_t(*)(void))dlsym(h, "cuFileStatsReset");
	get_l1 = (CUfileError_t(*)(void *))dlsym(h, "cuFileGetStatsL1");
	CHECK(set_level && get_level && start && stop && reset && get_l1, "statistics calls missing");

	char path[] = "/var/tmp/cufile_stats_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	static uint8_t data[FSZ];
	for (unsigned i = 0; i < FSZ; i++)
		data[i] = (uint8_t)(i * 7 + 3);
	CHECK(pwrite(fd, data, FSZ, 0) == FSZ, "pwrite");
	CU_OK(L.cuFileDriverOpen());
	fh = dt_reg(fd);
	CU_OK(set_level(1)); /* statistics have run: StatsStart succeeds at level 0 too */

	int counted = 0, not_counted = 0;
	for (int r = 0; r < rounds; r++) {
		pthread_t t[4];
		CHECK(pthread_barrier_init(&go, NULL, 4) == 0, "barrier");
		CHECK(pthread_create(&t[0], NULL, t_level0, NULL) == 0, "thread");
		CHECK(pthread_create(&t[1], NULL, t_level2, NULL) == 0, "thread");
		CHECK(pthread_create(&t[2], NULL, t_switch, (void *)(uintptr_t)r) == 0, "thread");
		CHECK(pthread_create(&t[3], NULL, t_read, NULL) == 0, "thread");
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&go);

		int level = -1;
		CU_OK(get_level(&level));
		CHECK(level == 0 || level == 2, "round %d: level %d", r, level);
		CU_OK(reset());
		CHECK(L.cuFileRead(fh, buf, sizeof buf, 4096, 0) == (ssize_t)sizeof buf, "read");
		memset(l1, 0xA5, sizeof l1);
		CUfileError_t e = get_l1(l1);
		if (e.err == CU_FILE_SUCCESS) {
			/* running at level 2: the read counted, once */
			CHECK(level == 2 && (r & 1) == 0, "round %d: L1 answered at level %d after %s", r, level,
			      r & 1 ? "a stop" : "a start");
			CHECK(l1[0] == 1 && l1[12] == sizeof buf, "round %d: read_ops.ok %llu bytes %llu, expected 1 and %zu",
			      r, (unsigned long long)l1[0], (unsigned long long)l1[12], sizeof buf);
			counted++;
		} else {
			CHECK(e.err == CU_FILE_INVALID_VALUE, "round %d: L1 %d", r, (int)e.err);
			CHECK(level == 0 || (r & 1), "round %d: L1 refused at level %d after a start", r, level);
			/* not counted: nothing since the reset */
			CU_OK(set_level(1));
			CU_OK(start());
			CU_OK(get_l1(l1));
			CHECK(l1[0] == 0 && l1[12] == 0, "round %d: a read counted while off (read_ops.ok %llu)", r,
			      (unsigned long long)l1[0]);
			not_counted++;
		}
		CU_OK(start()); /* every round starts running (level as left) */
	}
	L.cuFileHandleDeregister(fh);
	CU_OK(L.cuFileDriverClose_v2());
	close(fd);
	printf("PASS: %d rounds, %d ended counting, %d not\n", rounds, counted, not_counted);
	return 0;
}
