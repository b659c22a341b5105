/*
 * test_cufile_dropin_threads --lib=PATH [SECONDS]
 *
 * cuFileDriverClose while other threads do I/O (a cuFile program on the
 * drop-in, host memory). Worker threads, each with a file of its own
 * (its own pattern, so a read served from another thread's file shows),
 * loop for SECONDS (default 2): register a handle (the driver opens on
 * first use), read through it and through a handle registered once at the
 * start, register and deregister a buffer, deregister. Meanwhile the main
 * thread opens and closes the driver over and over (cuFileDriverOpen, a
 * few ms, cuFileDriverClose: the last close closes OpenDS under them).
 * Every call must end cleanly:
 *   - cuFileHandleRegister, cuFileBufRegister: success (a closed driver
 *     opens again on first use);
 *   - cuFileRead: the bytes, exactly the thread's own file's; or, through
 *     a handle the close released, -CU_FILE_HANDLE_NOT_REGISTERED (-5027);
 *   - cuFileBufDeregister: success, or CU_FILE_MEMORY_NOT_REGISTERED when
 *     a close released the buffer;
 *   - cuFileDriverOpen / cuFileDriverClose: success, every time;
 * and nothing crashes or hangs (watchdog). Exit 0 pass, 1 fail.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "dropin_test.h"

#define NT 6
#define FSZ (256u << 10)
#define IOMAX 65536u

/* two fds per thread (an fd is registered once at a time) on its file,
 * unlinked as soon as it is written: nothing is left behind a failure */
static int fds[NT][2];
static atomic_bool stop;
static atomic_ulong reads_ok, reads_stale, cycles;

static uint8_t pat(unsigned t, uint64_t off)
{
	uint64_t x = (off + 1 + ((uint64_t)t << 40)) * 0x9E3779B97F4A7C15ull;
	return (uint8_t)(x >> 56);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* a read through fh: the thread's own bytes, or the handle was released
 * by a close (false) */
static bool read_one(unsigned t, CUfileHandle_t fh, uint8_t *buf, uint64_t *seed)
{
	uint64_t off = rnd(seed) % (FSZ - IOMAX);
	size_t n = 1 + rnd(seed) % IOMAX;
	ssize_t r = L.cuFileRead(fh, buf, n, (off_t)off, 0);
	if (r == -(ssize_t)CU_FILE_HANDLE_NOT_REGISTERED) {
		atomic_fetch_add(&reads_stale, 1);
		return false;
	}
	CHECK(r == (ssize_t)n, "thread %u: cuFileRead %zu at %llu: %zd (errno %d)", t, n, (unsigned long long)off, r,
	      errno);
	for (size_t i = 0; i < n; i++)
		CHECK(buf[i] == pat(t, off + i), "thread %u: byte %zu of a read at %llu is another file's", t, i,
		      (unsigned long long)off);
	atomic_fetch_add(&reads_ok, 1);
	return true;
}

static void *worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint64_t seed = 0x1234567ull + t;
	int fd = fds[t][0], kfd = fds[t][1];
	uint8_t *buf = malloc(IOMAX);
	CHECK(buf, "malloc");
	CUfileHandle_t kept = dt_reg(kfd);
	while (!atomic_load(&stop)) {
		CUfileHandle_t fh = dt_reg(fd);
		read_one(t, fh, buf, &seed);
		if (!read_one(t, kept, buf, &seed)) {
			L.cuFileHandleDeregister(kept); /* released: nothing to do */
			kept = dt_reg(kfd);
		}
		CUfileError_t e = L.cuFileBufRegister(buf, IOMAX, 0);
		CHECK(e.err == CU_FILE_SUCCESS, "thread %u: cuFileBufRegister: %d", t, (int)e.err);
		read_one(t, fh, buf, &seed);
		e = L.cuFileBufDeregister(buf);
		CHECK(e.err == CU_FILE_SUCCESS || e.err == CU_FILE_MEMORY_NOT_REGISTERED,
		      "thread %u: cuFileBufDeregister: %d", t, (int)e.err);
		L.cuFileHandleDeregister(fh);
	}
	L.cuFileHandleDeregister(kept);
	free(buf);
	close(fd);
	close(kfd);
	return NULL;
}

int main(int argc, char **argv)
{
	dt_load(argc, argv);
	double secs = 2;
	for (int i = 1; i < argc; i++)
		if (strncmp(argv[i], "--lib=", 6))
			secs = atof(argv[i]);
	dt_watchdog((unsigned)secs + 120);
	const char *tmp = getenv("TMPDIR");
	uint8_t *b = malloc(FSZ);
	CHECK(b, "malloc");
	for (unsigned t = 0; t < NT; t++) {
		char path[256];
		snprintf(path, sizeof(path), "%s/cufile-thr-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		int fd = mkstemp(path);
		CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
		for (uint64_t i = 0; i < FSZ; i++)
			b[i] = pat(t, i);
		CHECK(pwrite(fd, b, FSZ, 0) == (ssize_t)FSZ, "pwrite");
		fds[t][0] = fd;
		fds[t][1] = open(path, O_RDONLY);
		CHECK(fds[t][1] >= 0, "open: %s", strerror(errno));
		unlink(path);
	}
	free(b);

	CHECK(L.cuFileDriverOpen().err == CU_FILE_SUCCESS, "first cuFileDriverOpen");
	pthread_t th[NT];
	for (unsigned t = 0; t < NT; t++)
		CHECK(pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t) == 0, "pthread_create");
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t seed = 99;
	for (;;) {
		struct timespec d = { 0, (long)(1 + rnd(&seed) % 4) * 1000000L };
		nanosleep(&d, NULL);
		CUfileError_t e = L.cuFileDriverClose_v2();
		CHECK(e.err == CU_FILE_SUCCESS, "cuFileDriverClose_v2: %d", (int)e.err);
		atomic_fetch_add(&cycles, 1);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 > secs)
			break;
		e = L.cuFileDriverOpen();
		CHECK(e.err == CU_FILE_SUCCESS, "cuFileDriverOpen: %d", (int)e.err);
	}
	atomic_store(&stop, true);
	for (unsigned t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	/* the workers' implicit opens leave it open (or closed) */
	(void)L.cuFileDriverClose_v2();
	printf("%lu open/close cycles under %d threads: %lu reads exact, %lu through a handle a close released\n",
	       atomic_load(&cycles), NT, atomic_load(&reads_ok), atomic_load(&reads_stale));
	CHECK(atomic_load(&cycles) >= 3 && atomic_load(&reads_ok) > 0, "too little happened to mean anything");
	return 0;
}
