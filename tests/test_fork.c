/*
 * test_fork: what a child of fork() gets from the library (include/opends.h,
 * "fork()"). Each case runs in its own process and forks from there:
 *   open    forked with the driver open and a handle registered: in the
 *           child every call fails with exactly OPENDS_DRIVER_NOT_INITIALIZED
 *           and a detail that says the fork is why and what to do; the
 *           child opens its own driver (opends_driver_open_with too),
 *           registers the fd again and reads and writes byte-exact; after
 *           its open the detail of a closed-driver error no longer names
 *           the fork. The parent's driver, handle and bytes are untouched.
 *   closed  forked with the driver closed (opened and closed before): the
 *           child's closed-driver detail does not name the fork, and its
 *           open works.
 * (tests/reliability/test_fork.c forks amid I/O of every family.)
 * Backend from OPENDS_BACKEND, host memory. Exit 0 pass, 1 fail.
 */
#include "common.h"

#include <sys/wait.h>

#define FSZ (1u << 20)

/* GCC 12's ASan allocator is not fork-safe (tests/reliability/rel.h): a
 * worker inside malloc at the fork leaves its lock held in the child,
 * whose new threads then hang. Under ASan the workers first go idle. */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#ifndef ASAN
#define ASAN 0
#endif

static pid_t fork_quiet(void)
{
	fflush(NULL);
	if (ASAN)
		usleep(50000);
	pid_t pid = fork();
	CHECK(pid >= 0);
	return pid;
}

static char path[PATH_MAX];
static uint8_t *oracle;

static void read_exact(opends_handle_t fh, uint64_t off, size_t n, const char *what)
{
	uint8_t *b = malloc(n);
	CHECK(b);
	memset(b, 0, n);
	EXPECT_SSZ(opends_sync_read(fh, b, n, (off_t)off, 0), (ssize_t)n);
	VERIFY(b, oracle + off, n, "%s: read of %zu at %llu", what, n, (unsigned long long)off);
	free(b);
}

#define SAYS_FORK() (strstr(t_detail(), "child of fork()") != NULL)

static void wait_ok(pid_t pid)
{
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child %s %d", WIFEXITED(st) ? "exited with" : "died of signal",
	       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

static void child_of_open(opends_handle_t parent_fh, int fd)
{
	t_phase = "child, before its open";
	alarm(30);
	uint8_t b[4096];
	CHECK(opends_driver_backend() == NULL);
	EXPECT_SSZ(opends_sync_read(parent_fh, b, sizeof(b), 0, 0), -OPENDS_DRIVER_NOT_INITIALIZED);
	CHECKF(SAYS_FORK(), "the detail \"%s\" does not say the fork closed the driver", t_detail());
	EXPECT_SSZ(opends_sync_write(parent_fh, b, sizeof(b), 0, 0), -OPENDS_DRIVER_NOT_INITIALIZED);
	opends_handle_t h = NULL;
	EXPECT_ERR(opends_handle_register(&h, fd), OPENDS_DRIVER_NOT_INITIALIZED);
	CHECK(SAYS_FORK());
	char v[32];
	EXPECT_ERR(opends_driver_get_setting("OPENDS_BACKEND", v, sizeof(v), NULL), OPENDS_DRIVER_NOT_INITIALIZED);
	opends_drv_props_t p;
	EXPECT_ERR(opends_driver_get_properties(&p), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_handle_deregister(parent_fh), OPENDS_DRIVER_NOT_INITIALIZED);
	EXPECT_ERR(opends_driver_close(), OPENDS_DRIVER_NOT_INITIALIZED);
	CHECK(SAYS_FORK());

	t_phase = "child, its own driver";
	opends_setting_t s[] = { { "OPENDS_ACCEL", "host" } };
	OK(opends_driver_open_with(s, 1));
	h = t_register(fd);
	read_exact(h, 0, FSZ, "child");
	read_exact(h, 4097, 12345, "child");
	/* write the file's own bytes back (the parent reads it afterwards) */
	EXPECT_SSZ(opends_sync_write(h, oracle + 8192, 65536, 8192, 0), 65536);
	read_exact(h, 8192, 65536, "child, after its write");
	OK(opends_handle_deregister(h));
	OK(opends_driver_close());
	/* the fork is history now: a closed driver is just closed */
	EXPECT_SSZ(opends_sync_read(parent_fh, b, sizeof(b), 0, 0), -OPENDS_DRIVER_NOT_INITIALIZED);
	CHECKF(!SAYS_FORK(), "after its own open and close the detail still names the fork: \"%s\"", t_detail());
	fflush(NULL);
	_exit(t_failures ? 1 : 0);
}

static int open_file(void)
{
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	return fd;
}

static void c_open(void)
{
	int fd = open_file();
	t_driver_open();
	opends_handle_t fh = t_register(fd);
	read_exact(fh, 0, 65536, "parent, before the fork");
	pid_t pid = fork_quiet();
	if (pid == 0)
		child_of_open(fh, fd);
	wait_ok(pid);
	t_phase = "parent, after the child";
	CHECK(opends_driver_backend() != NULL);
	read_exact(fh, 0, FSZ, "parent");
	char v[32];
	OK(opends_driver_get_setting("OPENDS_ACCEL", v, sizeof(v), NULL));
	OK(opends_handle_deregister(fh));
	OK(opends_driver_close());
	close(fd);
}

static void c_closed(void)
{
	int fd = open_file();
	t_driver_open();
	OK(opends_driver_close());
	pid_t pid = fork_quiet();
	if (pid == 0) {
		t_phase = "child of a closed driver";
		alarm(30);
		opends_drv_props_t p;
		EXPECT_ERR(opends_driver_get_properties(&p), OPENDS_DRIVER_NOT_INITIALIZED);
		CHECKF(!SAYS_FORK(), "the driver was closed at the fork, yet the detail names it: \"%s\"", t_detail());
		t_driver_open();
		opends_handle_t h = t_register(fd);
		read_exact(h, 333, 100000, "child");
		OK(opends_handle_deregister(h));
		OK(opends_driver_close());
		fflush(NULL);
		_exit(t_failures ? 1 : 0);
	}
	wait_ok(pid);
	close(fd);
}

int main(void)
{
	setenv("OPENDS_ACCEL", "host", 1);
	t_watchdog(200);
	t_path(path, sizeof(path), "fork.bin");
	oracle = malloc(FSZ);
	CHECK(oracle);
	t_fill_seed(oracle, 42, FSZ);
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	CHECK(fd >= 0);
	t_pwrite_all(fd, oracle, FSZ, 0);
	close(fd);
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = { { "open", c_open }, { "closed", c_closed } };
	int failed = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		failed += !t_case_in_child(cases[i].name, cases[i].fn);
	free(oracle);
	printf("%d passed, %d failed\n", (int)(sizeof(cases) / sizeof(*cases)) - failed, failed);
	return failed ? 1 : 0;
}
