/*
 * Read-ahead across sequential synchronous reads (issue 17, opends_handle_advise,
 * OPENDS_READAHEAD): byte-exact, never older than a completed write, bounded to
 * what it promises. On every backend x accelerator: where read-ahead applies
 * (uring into device memory, i.e. OPENDS_ACCEL=hostdev here) the handle's
 * opends_describe must count calls served from it, so the checks below
 * cannot pass by never reading ahead; elsewhere it must count none.
 *   sequential   S-sized calls over the file, buffered and O_DIRECT,
 *                byte-exact, nothing written past the count, EOF short
 *   own write    after read-ahead has read the next range, a write through
 *                another handle of the same file changes it: the next call
 *                returns the new bytes (sync write, then async write)
 *   other proc   the same written by another process (pwrite), which then
 *                signals through a pipe; and a truncation
 *   switches     OPENDS_READAHEAD=0 and OPENDS_ADVICE_RANDOM serve none,
 *                OPENDS_ADVICE_SEQUENTIAL from the second call; bad advice
 *   deregister   while a read-ahead is in flight (ASan/TSan catch misuse)
 *   two threads  each reads its half of the file sequentially through the
 *                same handle: byte-exact whatever read-ahead makes of it
 *   taking turns two threads take strict turns, each call continuing the
 *                other thread's: no stream (a stream is one thread's), so
 *                nothing is read ahead or served from it; byte-exact
 *   budget       read-ahead takes at most half of what is left of the
 *                staging budget: the fourth of four handles gets none
 *   other device (hostdev, two simulated devices) the calls go to device
 *                0, then device 1, then device 0 again: byte-exact, served
 *                from read-ahead across the switches
 */
#include "common.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define S ((size_t)2 * T_MiB) /* above the inline limit (the chunk, 1 MiB) */
#define NCALL 24
#define FSIZE (NCALL * S + 777)

static char path[PATH_MAX];
static bool applies; /* read-ahead is expected to serve calls here */

/* the file's times must be old enough for read-ahead to start (100 ms) */
static void settle(void)
{
	usleep(150 * 1000);
}

static void write_file(t_patfn fn)
{
	t_write_pattern_file(path, FSIZE, fn);
	settle();
}

static uint8_t patB(uint64_t x)
{
	return (uint8_t)(hashpat(x) ^ 0x5a);
}
static uint8_t patC(uint64_t x)
{
	return (uint8_t)(hashpat(x) ^ 0xc3);
}

/* read call k (S bytes at k * S) into mem and check it against fn */
static void read_call(opends_handle_t fh, uint8_t *mem, unsigned k, t_patfn fn, const char *what)
{
	uint64_t off = (uint64_t)k * S;
	memset(mem, T_CANARY, S + 4096);
	ssize_t r = opends_sync_read(fh, mem, S, (off_t)off, 0);
	size_t want = t_expect_read(FSIZE, off, S);
	if (r != (ssize_t)want) {
		FAILF("%s: call %u: %zd, want %zu (%s)", what, k, r, want, t_detail());
		return;
	}
	for (size_t i = 0; i < want; i++)
		if (mem[i] != fn(off + i)) {
			FAILF("%s: call %u: byte %zu is old or wrong (0x%02x, want 0x%02x)", what, k, i, mem[i],
			      fn(off + i));
			return;
		}
	size_t at;
	if (t_first_not(mem + want, S - want + 4096, T_CANARY, &at))
		FAILF("%s: call %u wrote past the %zu bytes returned", what, k, want);
}

static void sequential(uint8_t *mem)
{
	write_file(hashpat);
	for (int direct = 0; direct < 2; direct++) {
		int fd = t_open(path, O_RDONLY, direct);
		if (fd == -2)
			continue;
		opends_handle_t fh = t_register(fd);
		for (unsigned k = 0; k <= NCALL; k++)
			read_call(fh, mem, k, hashpat, direct ? "sequential, O_DIRECT" : "sequential, buffered");
		unsigned long n = t_ra_served(fh);
		if (applies)
			CHECKF(n >= NCALL - 3, "sequential: %lu of %u calls served from read-ahead", n, NCALL + 1);
		else
			CHECKF(n == 0, "sequential: %lu calls served from read-ahead where it does not apply", n);
		printf("sequential %s: %u calls byte-exact, %lu from read-ahead\n", direct ? "O_DIRECT" : "buffered",
		       NCALL + 1, n);
		OK(opends_handle_deregister(fh));
		close(fd);
	}
}

/* calls 0..2, so that call 3's range has been read ahead by now */
static void lead_in(opends_handle_t fh, uint8_t *mem, t_patfn fn, const char *what)
{
	for (unsigned k = 0; k < 3; k++)
		read_call(fh, mem, k, fn, what);
	usleep(30 * 1000); /* the read-ahead of call 3 has finished: it holds the old bytes */
}

static void own_write(uint8_t *mem, bool async)
{
	const char *what = async ? "own async write" : "own sync write";
	write_file(hashpat);
	int fd = t_open(path, O_RDONLY, false);
	int wfd = t_open(path, O_RDWR, false);
	opends_handle_t fh = t_register(fd), wh = t_register(wfd);
	lead_in(fh, mem, hashpat, what);
	unsigned long before = t_ra_served(fh);
	if (applies)
		CHECKF(before >= 1, "%s: no call served from read-ahead in the lead-in", what);
	/* call 3's range, and call 4's, get new bytes */
	uint8_t *nb = t_xmalloc(2 * S);
	t_fill(nb, 3 * S, 2 * S, patB);
	if (async) {
		opends_async_future_t f;
		memset(&f, 0, sizeof(f));
		OK(opends_async_write(wh, nb, 2 * S, (off_t)(3 * S), 0, &f));
		EXPECT_SSZ(opends_async_await(&f), (ssize_t)(2 * S));
	} else {
		EXPECT_SSZ(opends_sync_write(wh, nb, 2 * S, (off_t)(3 * S), 0), (ssize_t)(2 * S));
	}
	read_call(fh, mem, 3, patB, what);
	read_call(fh, mem, 4, patB, what);
	read_call(fh, mem, 5, hashpat, what);
	free(nb);
	OK(opends_handle_deregister(wh));
	OK(opends_handle_deregister(fh));
	close(wfd);
	close(fd);
	printf("%s: the next calls return the new bytes\n", what);
}

/* Another process writes (or truncates) while this one reads, then signals. */
static void other_process(uint8_t *mem, bool truncate)
{
	const char *what = truncate ? "other process truncates" : "other process writes";
	write_file(hashpat);
	int go[2], ack[2];
	CHECK(pipe(go) == 0 && pipe(ack) == 0);
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	lead_in(fh, mem, hashpat, what);
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		int wfd = open(path, O_RDWR);
		if (wfd < 0)
			_exit(3);
		if (truncate) {
			if (ftruncate(wfd, (off_t)(3 * S + 100)) != 0)
				_exit(4);
		} else {
			uint8_t *nb = malloc(S);
			t_fill(nb, 3 * S, S, patC);
			if (!nb || pwrite(wfd, nb, S, (off_t)(3 * S)) != (ssize_t)S)
				_exit(4);
		}
		close(wfd);
		_exit(write(ack[1], "k", 1) == 1 ? 0 : 5);
	}
	CHECK(pid > 0);
	char c;
	CHECK(write(go[1], "g", 1) == 1 && read(ack[0], &c, 1) == 1);
	int st = 0;
	waitpid(pid, &st, 0);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the writer failed (%d)", what, st);
	if (truncate) {
		memset(mem, T_CANARY, S + 4096);
		EXPECT_SSZ(opends_sync_read(fh, mem, S, (off_t)(3 * S), 0), 100);
		VERIFY_CANARY(mem + 100, S, "%s: bytes past the new end were written", what);
		for (size_t i = 0; i < 100; i++)
			if (mem[i] != hashpat(3 * S + i)) {
				FAILF("%s: byte %zu", what, i);
				break;
			}
	} else {
		read_call(fh, mem, 3, patC, what);
		read_call(fh, mem, 4, hashpat, what);
	}
	OK(opends_handle_deregister(fh));
	close(fd);
	close(go[0]);
	close(go[1]);
	close(ack[0]);
	close(ack[1]);
	printf("%s: the next call sees it\n", what);
}

static void switches(uint8_t *mem)
{
	write_file(hashpat);
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	EXPECT_ERR(opends_handle_advise(fh, 3), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_handle_advise(fh, -1), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_handle_advise(NULL, OPENDS_ADVICE_RANDOM), OPENDS_INVALID_VALUE);
	OK(opends_handle_advise(fh, OPENDS_ADVICE_RANDOM));
	for (unsigned k = 0; k < 8; k++)
		read_call(fh, mem, k, hashpat, "OPENDS_ADVICE_RANDOM");
	CHECKF(t_ra_served(fh) == 0, "OPENDS_ADVICE_RANDOM: %lu calls served from read-ahead", t_ra_served(fh));
	/* sequential from the first call: call 1 is already served */
	OK(opends_handle_advise(fh, OPENDS_ADVICE_SEQUENTIAL));
	read_call(fh, mem, 10, hashpat, "OPENDS_ADVICE_SEQUENTIAL");
	usleep(20 * 1000);
	read_call(fh, mem, 11, hashpat, "OPENDS_ADVICE_SEQUENTIAL");
	unsigned long n = t_ra_served(fh);
	CHECKF(applies ? n == 1 : n == 0, "OPENDS_ADVICE_SEQUENTIAL: %lu calls served after two", n);
	OK(opends_handle_advise(fh, OPENDS_ADVICE_NORMAL));
	/* deregistered with a read-ahead in flight (or done and unused) */
	read_call(fh, mem, 12, hashpat, "deregister");
	OK(opends_handle_deregister(fh));
	EXPECT_ERR(opends_handle_advise(fh, OPENDS_ADVICE_NORMAL), OPENDS_HANDLE_NOT_REGISTERED);
	close(fd);
	OK(opends_driver_close());
	EXPECT_ERR(opends_handle_advise(fh, OPENDS_ADVICE_NORMAL), OPENDS_DRIVER_NOT_INITIALIZED);

	setenv("OPENDS_READAHEAD", "0", 1);
	t_driver_open();
	fd = t_open(path, O_RDONLY, false);
	fh = t_register(fd);
	for (unsigned k = 0; k < 8; k++)
		read_call(fh, mem, k, hashpat, "OPENDS_READAHEAD=0");
	CHECKF(t_ra_served(fh) == 0, "OPENDS_READAHEAD=0: %lu calls served from read-ahead", t_ra_served(fh));
	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
	unsetenv("OPENDS_READAHEAD");
	printf("switches: OPENDS_ADVICE_*, OPENDS_READAHEAD=0\n");
}

struct half {
	opends_handle_t fh;
	unsigned k0;
};

static void *half_reader(void *arg)
{
	struct half *x = arg;
	uint8_t *mem = t_xmalloc(S + 4096);
	for (int round = 0; round < 3; round++)
		for (unsigned k = x->k0; k < x->k0 + NCALL / 2; k++)
			read_call(x->fh, mem, k, hashpat, "two threads");
	free(mem);
	return NULL;
}

static void two_threads(void)
{
	t_driver_open();
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	struct half h[2] = { { fh, 0 }, { fh, NCALL / 2 } };
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, half_reader, &h[i]) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("two threads: %d calls byte-exact, %lu from read-ahead\n", 6 * (NCALL / 2), t_ra_served(fh));
	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
}

static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cv = PTHREAD_COND_INITIALIZER;
static unsigned turn_k; /* the next call; thread k % 2 makes it */

static void *turn_reader(void *arg)
{
	struct half *x = arg; /* k0: 0 or 1 */
	uint8_t *mem = t_xmalloc(S + 4096);
	for (;;) {
		pthread_mutex_lock(&turn_lock);
		while (turn_k < NCALL && turn_k % 2 != x->k0)
			pthread_cond_wait(&turn_cv, &turn_lock);
		unsigned k = turn_k;
		pthread_mutex_unlock(&turn_lock);
		if (k >= NCALL)
			break;
		read_call(x->fh, mem, k, hashpat, "taking turns");
		pthread_mutex_lock(&turn_lock);
		turn_k++;
		pthread_cond_broadcast(&turn_cv);
		pthread_mutex_unlock(&turn_lock);
	}
	free(mem);
	return NULL;
}

static void taking_turns(void)
{
	t_driver_open();
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	struct half h[2] = { { fh, 0 }, { fh, 1 } };
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, turn_reader, &h[i]) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	unsigned long n = t_ra_served(fh);
	CHECKF(n == 0, "taking turns: %lu calls served from read-ahead; two threads' calls are no stream", n);
	printf("taking turns: %d calls byte-exact, none from read-ahead\n", NCALL);
	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
}

#define HOSTDEV_BASE ((uintptr_t)0x7e8000000000ull) /* src/accel/host/host.c */
#define HOSTDEV_SPAN ((uintptr_t)1 << 36)

/* Read-ahead takes at most half of what is left of the staging budget
 * (OPENDS_MAX_PINNED), so an engine opened later still finds staging: with
 * 48 MiB, of which the engine holds 4 workers x 4 x 1 MiB, 32 MiB are left
 * and each handle reading ahead takes 4 x 2 MiB (depth 3): the first three
 * handles read ahead (8 of 32, 24, 16 left), the fourth not (8 > 8 / 2);
 * taking what fits, all four would. */
static void budget(void)
{
	if (!applies) {
		printf("budget: read-ahead does not apply here\n");
		return;
	}
	static const opends_setting_t set[] = { { "OPENDS_MAX_PINNED", "48m" },
						{ "OPENDS_IO_THREADS", "4" },
						{ "OPENDS_QUEUE_DEPTH", "4" },
						{ "OPENDS_CHUNK_SIZE", "1m" } };
	OK(opends_driver_open_with(set, sizeof(set) / sizeof(set[0])));
	uint8_t *mem = t_xmalloc(S + 4096);
	int fd[4];
	opends_handle_t fh[4];
	unsigned long n[4];
	for (int i = 0; i < 4; i++) {
		fd[i] = t_open(path, O_RDONLY, false);
		fh[i] = t_register(fd[i]);
		for (unsigned k = 0; k < 6; k++)
			read_call(fh[i], mem, k, hashpat, "budget");
		n[i] = t_ra_served(fh[i]);
	}
	CHECKF(n[0] > 0 && n[1] > 0 && n[2] > 0 && n[3] == 0,
	       "budget: calls served from read-ahead per handle %lu %lu %lu %lu, want the first three > 0 and the fourth 0",
	       n[0], n[1], n[2], n[3]);
	for (int i = 0; i < 4; i++) {
		OK(opends_handle_deregister(fh[i]));
		close(fd[i]);
	}
	free(mem);
	OK(opends_driver_close());
	printf("budget: three handles read ahead within half of what is left each (%lu %lu %lu), the fourth not\n", n[0],
	       n[1], n[2]);
}

static void other_device(void)
{
	const char *acc = getenv("OPENDS_ACCEL");
	if (!acc || strcmp(acc, "hostdev")) {
		printf("other device: hostdev only\n");
		return;
	}
	void *want = (void *)(HOSTDEV_BASE + HOSTDEV_SPAN);
	uint8_t *d1 = mmap(want, S + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (d1 == MAP_FAILED || (void *)d1 != want) {
		printf("other device: cannot map simulated device 1's memory; case skipped\n");
		return;
	}
	setenv("OPENDS_HOSTDEV_DEVICES", "2", 1);
	t_driver_open();
	uint8_t *d0 = t_xmalloc(S + 4096);
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	for (unsigned k = 0; k < NCALL; k++) {
		bool on1 = k >= NCALL / 3 && k < 2 * NCALL / 3;
		read_call(fh, on1 ? d1 : d0, k, hashpat, on1 ? "other device: device 1" : "other device: device 0");
	}
	unsigned long n = t_ra_served(fh);
	if (applies)
		CHECKF(n >= NCALL - 7, "other device: %lu of %u calls served from read-ahead", n, NCALL);
	else
		CHECKF(n == 0, "other device: %lu calls served from read-ahead where it does not apply", n);
	printf("other device: %u calls byte-exact (devices 0, 1, 0), %lu from read-ahead\n", NCALL, n);
	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
	unsetenv("OPENDS_HOSTDEV_DEVICES");
	free(d0);
	munmap(d1, S + 4096);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(240);
	t_path(path, sizeof(path), "readahead.bin");
	const char *be = getenv("OPENDS_BACKEND"), *acc = getenv("OPENDS_ACCEL");
	t_driver_open();
	applies = !strcmp(opends_driver_backend(), "uring") && acc && !strcmp(acc, "hostdev") && !getenv("OPENDS_READAHEAD");
	(void)be;
	uint8_t *mem = t_xmalloc(S + 4096);
	sequential(mem);
	own_write(mem, false);
	own_write(mem, true);
	other_process(mem, false);
	other_process(mem, true);
	switches(mem);
	two_threads();
	taking_turns();
	budget();
	other_device();
	free(mem);
	t_rm_dir();
	return t_failures ? 1 : 0;
}
