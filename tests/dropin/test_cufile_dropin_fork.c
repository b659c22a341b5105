/*
 * test_cufile_dropin_fork --lib=PATH
 *
 * fork() in a cuFile program on the drop-in (host memory). Each case runs
 * in its own process, and forks from there:
 *   open     forked while the driver is open: in the child every call that
 *            needs the driver fails at once with
 *            CU_FILE_DRIVER_NOT_INITIALIZED (reads through the parent's
 *            handle: -5001), none opens it implicitly, the use count is 0;
 *            cuFileDriverOpen then works and the child reads and writes
 *            byte-exact through a new handle; the parent's driver, handle
 *            and use count are untouched, its reads byte-exact
 *   closed   forked while the driver is closed (never opened, or opened and
 *            closed): the child opens it on first use, as always
 *   busy     a parent thread reads without pause while the main thread
 *            forks 6 children, each as in "open" (under ASan the thread
 *            pauses around each fork: GCC 12's ASan allocator is not
 *            fork-safe, tests/reliability/rel.h)
 * Under ThreadSanitizer the children stop before opening a driver (it
 * cannot run threads started after such a fork).
 * Children have a watchdog: a hang fails the test. Exit 0 pass, 1 fail.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "dropin_test.h"

/* ThreadSanitizer cannot run a child of a multi-threaded process that
 * starts threads: under it the children check the refused calls only, and
 * the run checks the parent's side (the fork handlers against its threads). */
#if defined(__SANITIZE_THREAD__)
#define CHILD_NO_THREADS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHILD_NO_THREADS 1
#endif
#endif
#ifndef CHILD_NO_THREADS
#define CHILD_NO_THREADS 0
#endif

#define FSZ (1u << 20)
#define NV CU_FILE_DRIVER_NOT_INITIALIZED

static char path[256];
static uint8_t *oracle;

static uint8_t pat(uint64_t off)
{
	uint64_t x = (off + 1) * 0x9E3779B97F4A7C15ull;
	return (uint8_t)(x >> 56);
}

/* read n bytes at off through fh: byte-exact against the oracle */
static void read_check(CUfileHandle_t fh, uint64_t off, size_t n)
{
	uint8_t *b = malloc(n);
	CHECK(b, "malloc");
	memset(b, 0, n);
	ssize_t r = L.cuFileRead(fh, b, n, (off_t)off, 0);
	CHECK(r == (ssize_t)n, "cuFileRead %zu at %llu: %zd", n, (unsigned long long)off, r);
	for (size_t i = 0; i < n; i++)
		CHECK(b[i] == oracle[off + i], "byte %zu of the read at %llu: 0x%02x, expected 0x%02x", i,
		      (unsigned long long)off, b[i], oracle[off + i]);
	free(b);
}

/* In a child forked with the driver open: closed for everything until
 * cuFileDriverOpen, then a driver of its own. parent_fh: the parent's
 * handle. */
static void child_of_open(CUfileHandle_t parent_fh, int fd, unsigned seed)
{
	dt_who = "child";
	dt_watchdog(30);
	uint8_t buf[8192];
	CHECK(L.cuFileRead(parent_fh, buf, 4096, 0, 0) == -(ssize_t)NV, "read through the parent's handle: %zd",
	      L.cuFileRead(parent_fh, buf, 4096, 0, 0));
	CHECK(L.cuFileWrite(parent_fh, buf, 4096, 0, 0) == -(ssize_t)NV, "write through the parent's handle");
	CHECK(L.cuFileUseCount() == 0, "use count %ld in the child, expected 0", L.cuFileUseCount());
	CUfileDescr_t d;
	memset(&d, 0, sizeof(d));
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = fd;
	CUfileHandle_t h = NULL;
	CU_ERR(L.cuFileHandleRegister(&h, &d), NV); /* no implicit open */
	CU_ERR(L.cuFileBufRegister(buf, sizeof(buf), 0), NV);
	CU_ERR(L.cuFileBufDeregister(buf), NV);
	CUfileBatchHandle_t b;
	CU_ERR(L.cuFileBatchIOSetUp(&b, 4), NV);
	CUfileDrvProps_t p;
	CU_ERR(L.cuFileDriverGetProperties(&p), NV);
	CU_ERR(L.cuFileDriverClose_v2(), NV);
	L.cuFileHandleDeregister(parent_fh); /* nothing to do: no crash, no hang */
	CHECK(L.cuFileUseCount() == 0, "use count %ld after the refused calls", L.cuFileUseCount());

	if (CHILD_NO_THREADS)
		_exit(0);
	/* cuFileDriverOpen again: a driver of the child's own */
	CU_OK(L.cuFileDriverOpen());
	CHECK(L.cuFileUseCount() == 1, "use count %ld after cuFileDriverOpen", L.cuFileUseCount());
	h = dt_reg(fd);
	CU_OK(L.cuFileBufRegister(buf, sizeof(buf), 0));
	for (unsigned k = 0; k < 8; k++) {
		uint64_t off = (seed * 7919u + k * 104729u) % (FSZ - 8192);
		size_t n = 1 + (seed + k * 131u) % 8192;
		read_check(h, off, n);
	}
	/* write a range (the pattern itself: the parent reads the file too)
	 * and read it back */
	memcpy(buf, oracle + 4096, 4096);
	CHECK(L.cuFileWrite(h, buf, 4096, 4096, 0) == 4096, "child write");
	read_check(h, 4096, 4096);
	CU_OK(L.cuFileBufDeregister(buf));
	L.cuFileHandleDeregister(h);
	CU_OK(L.cuFileDriverClose_v2());
	/* closed again normally: implicit open works as it always does */
	h = dt_reg(fd);
	read_check(h, 12345, 777);
	L.cuFileHandleDeregister(h);
	CU_OK(L.cuFileDriverClose_v2());
	_exit(0);
}

/* the test file, unlinked as soon as it is written: nothing is left
 * behind a failure; each case takes its own fd on it */
static int base_fd = -1;

static int open_file(void)
{
	int fd = dup(base_fd);
	CHECK(fd >= 0, "dup: %s", strerror(errno));
	return fd;
}

static void c_open(void)
{
	int fd = open_file();
	CU_OK(L.cuFileDriverOpen());
	CUfileHandle_t fh = dt_reg(fd);
	read_check(fh, 0, 65536);
	pid_t pid = dt_fork();
	if (pid == 0)
		child_of_open(fh, fd, 1);
	dt_wait_ok(pid);
	/* the parent is not affected */
	CHECK(L.cuFileUseCount() == 1, "parent's use count %ld, expected 1", L.cuFileUseCount());
	read_check(fh, 1000, 200000);
	read_check(fh, FSZ - 5000, 5000);
	L.cuFileHandleDeregister(fh);
	CU_OK(L.cuFileDriverClose_v2());
	close(fd);
}

/* a child of a process whose driver is closed: opens on first use */
static void child_of_closed(int fd)
{
	dt_who = "child";
	dt_watchdog(30);
	if (CHILD_NO_THREADS)
		_exit(0);
	CUfileHandle_t h = dt_reg(fd); /* opens the driver */
	CHECK(L.cuFileUseCount() == 0, "use count %ld after the implicit open (not counted)", L.cuFileUseCount());
	read_check(h, 777, 33333);
	L.cuFileHandleDeregister(h);
	CU_OK(L.cuFileDriverClose_v2());
	_exit(0);
}

static void c_closed(void)
{
	int fd = open_file();
	for (int round = 0; round < 2; round++) {
		if (round == 1) { /* opened and closed before the fork */
			CU_OK(L.cuFileDriverOpen());
			CUfileHandle_t fh = dt_reg(fd);
			read_check(fh, 0, 4096);
			L.cuFileHandleDeregister(fh);
			CU_OK(L.cuFileDriverClose_v2());
		}
		pid_t pid = dt_fork();
		if (pid == 0)
			child_of_closed(fd);
		dt_wait_ok(pid);
	}
	close(fd);
}

static CUfileHandle_t busy_fh;
static atomic_bool busy_stop, park_ask, parked;
static atomic_ulong busy_reads;

static void *busy(void *arg)
{
	(void)arg;
	unsigned k = 0;
	while (!atomic_load(&busy_stop)) {
		if (atomic_load(&park_ask)) {
			atomic_store(&parked, true);
			while (atomic_load(&park_ask))
				usleep(100);
			atomic_store(&parked, false);
		}
		uint64_t off = (k++ * 65537u) % (FSZ - 65536);
		read_check(busy_fh, off, 1 + k % 65536);
		atomic_fetch_add(&busy_reads, 1);
	}
	return NULL;
}

static void c_busy(void)
{
	int fd = open_file();
	CU_OK(L.cuFileDriverOpen());
	busy_fh = dt_reg(fd);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, busy, NULL) == 0, "pthread_create");
	for (unsigned i = 0; i < 6; i++) {
		usleep(20000);
		if (DT_ASAN) {
			atomic_store(&park_ask, true);
			while (!atomic_load(&parked))
				usleep(100);
		}
		pid_t pid = dt_fork();
		if (pid == 0)
			child_of_open(busy_fh, fd, 100 + i);
		if (DT_ASAN)
			atomic_store(&park_ask, false);
		dt_wait_ok(pid);
	}
	atomic_store(&busy_stop, true);
	pthread_join(t, NULL);
	CHECK(atomic_load(&busy_reads) > 0, "the busy thread read nothing");
	read_check(busy_fh, 0, FSZ);
	L.cuFileHandleDeregister(busy_fh);
	CU_OK(L.cuFileDriverClose_v2());
	close(fd);
}

int main(int argc, char **argv)
{
	dt_load(argc, argv);
	dt_watchdog(240);
	const char *tmp = getenv("TMPDIR");
	snprintf(path, sizeof(path), "%s/cufile-fork-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	oracle = malloc(FSZ);
	CHECK(oracle, "malloc");
	for (uint64_t i = 0; i < FSZ; i++)
		oracle[i] = pat(i);
	CHECK(pwrite(fd, oracle, FSZ, 0) == (ssize_t)FSZ, "pwrite");
	unlink(path);
	base_fd = fd;
	static const struct dt_case cases[] = { { "open", c_open }, { "closed", c_closed }, { "busy", c_busy } };
	int rc = dt_run_cases(cases, sizeof(cases) / sizeof(*cases));
	close(base_fd);
	free(oracle);
	return rc;
}
