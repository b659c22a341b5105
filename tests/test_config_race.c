/*
 * test_config_race: opends_driver_get_setting on one thread while another
 * closes and reopens the driver with other settings. get_setting checks
 * that the driver is open and then copies the value the last open kept;
 * a reopen in between replaced (freed) that value. Each answer must be
 * OPENDS_DRIVER_NOT_INITIALIZED or exactly one of the values an open used,
 * with the source that open gave it; under ThreadSanitizer (tsan.sh runs
 * this) the copy and the replacement must not race, under ASan the copy
 * must not read freed memory.
 *   test_config_race [CYCLES]   (default 2000)
 * Exit 0 pass, 1 fail.
 */
#include "common.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

static atomic_bool stop;
static atomic_long answers, values;

/* long values so that a copy of a freed one shows as garbage */
static const char *const chunk[2] = { "1048576", "2097152" };

static void *reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		char v[64];
		opends_setting_source_t src = (opends_setting_source_t)99;
		opends_error_t e = opends_driver_get_setting("OPENDS_CHUNK_SIZE", v, sizeof(v), &src);
		atomic_fetch_add(&answers, 1);
		if (e.err == OPENDS_DRIVER_NOT_INITIALIZED)
			continue;
		if (e.err != OPENDS_SUCCESS) {
			FAILF("get_setting: %s (%s)", t_errname(e.err), t_detail());
			continue;
		}
		atomic_fetch_add(&values, 1);
		CHECKF(!strcmp(v, chunk[0]) || !strcmp(v, chunk[1]), "OPENDS_CHUNK_SIZE read as \"%.64s\"", v);
		CHECKF(src == OPENDS_SETTING_EXPLICIT, "source %d, expected explicit", (int)src);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long cycles = argc > 1 ? atol(argv[1]) : 2000;
	setenv("OPENDS_ACCEL", "host", 1);
	setenv("OPENDS_BACKEND", "ref", 1);
	setenv("OPENDS_IO_THREADS", "1", 1);
	opends_setting_t s = { "OPENDS_CHUNK_SIZE", chunk[0] };
	OK(opends_driver_open_with(&s, 1));
	pthread_t t;
	CHECK(pthread_create(&t, NULL, reader, NULL) == 0);
	for (long i = 1; i <= cycles; i++) {
		t_phase = "close";
		OK(opends_driver_close());
		s.value = chunk[i % 2];
		t_phase = "open";
		OK(opends_driver_open_with(&s, 1));
		/* every 64th open stays until the reader has read a value in
		 * it (at most 200 ms): on a loaded machine the reader can
		 * otherwise miss every short open window (8 values of 2000
		 * opens with 8 copies on 2 CPUs; 0 failed CI once), and a run
		 * that read no value tested nothing */
		if (i % 64 == 0) {
			long v0 = atomic_load(&values);
			double t0 = t_now();
			while (atomic_load(&values) == v0 && t_now() - t0 < 0.2)
				sched_yield();
		}
	}
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	OK(opends_driver_close());
	printf("test_config_race: %ld cycles, %ld answers, %ld values\n", cycles, atomic_load(&answers),
	       atomic_load(&values));
	CHECKF(atomic_load(&values) > 0, "the reader never saw the driver open");
	return t_failures ? 1 : 0;
}
