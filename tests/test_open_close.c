/*
 * test_open_close
 *
 * Open -> close -> open works and leaks nothing: 200 cycles, each doing
 * real work (a register, a sync read, an async read, a stream op, a batch
 * left alive for close to release), then the process must have the same
 * number of fds (/proc/self/fd) and threads (/proc/self/task) as after the
 * first cycle.
 */
#include "common.h"

#define CYCLES 200

static int count_dir(const char *dir)
{
	DIR *d = opendir(dir);
	CHECKF(d, "opendir(%s): %s", dir, strerror(errno));
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Threads of a closed driver may need a moment to leave /proc after join
 * returned; wait up to 2 s for the count to come down. */
static int settled_count(const char *dir, int want)
{
	int n = count_dir(dir);
	for (int i = 0; i < 200 && n > want; i++) {
		usleep(10000);
		n = count_dir(dir);
	}
	return n;
}

static void cycle(const char *path, const uint8_t *exp, int i)
{
	t_driver_open();
	int fd = open(path, O_RDONLY | (i % 2 ? O_DIRECT : 0));
	if (fd < 0 && errno == EINVAL)
		fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	opends_handle_t fh = t_register(fd);
	uint8_t buf[3000];
	off_t off = (off_t)((i * 4099) % (T_PAT16_SIZE - 3000));
	EXPECT_SSZ(opends_sync_read(fh, buf, sizeof buf, off, 0), (ssize_t)sizeof buf);
	VERIFY(buf, exp + off, sizeof buf, "cycle %d sync read", i);
	if (i % 4 == 0) {
		opends_async_future_t f;
		OK(opends_async_read(fh, buf, 1000, 5, 0, &f));
		EXPECT_SSZ_ND(opends_async_await(&f), 1000);
		VERIFY(buf, exp + 5, 1000, "cycle %d async read", i);
		opends_stream_t s;
		OK(opends_stream_create(&s));
		size_t sz = 500;
		off_t fo = 77, bo = 0;
		ssize_t res = -1;
		OK(opends_stream_read(fh, buf, &sz, &fo, &bo, &res, s));
		OK(opends_stream_synchronize(s));
		CHECK(res == 500);
		VERIFY(buf, exp + 77, 500, "cycle %d stream read", i);
		if (i % 8 == 0)
			OK(opends_stream_destroy(s)); /* else close releases it */
		opends_batch_t b;
		OK(opends_batch_setup(&b, 4)); /* left for close to release */
		uint8_t *reg = t_xmalloc(8192);
		OK(opends_buf_register(reg, 8192, 0));
		EXPECT_SSZ(opends_sync_read(fh, reg, 8192, 0, 0), 8192);
		/* registered buffer left registered: close releases it */
		OK(opends_driver_close());
		free(reg);
	} else {
		OK(opends_handle_deregister(fh));
		OK(opends_driver_close());
	}
	close(fd);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(250);
	char path[PATH_MAX];
	t_path(path, sizeof path, T_PAT16_NAME);
	t_write_pattern_file(path, T_PAT16_SIZE, pat16);
	uint8_t *exp = t_oracle(T_PAT16_SIZE, pat16);

	/* the first cycles may set up process-wide things once (dlopen, the
	 * sanitizer's own threads); count after them */
	cycle(path, exp, 0);
	cycle(path, exp, 1);
	int fds0 = count_dir("/proc/self/fd");
	int th0 = settled_count("/proc/self/task", 1);

	for (int i = 2; i < CYCLES; i++) {
		t_phase = "cycles";
		cycle(path, exp, i);
		if (i % 50 == 0) {
			int fds = count_dir("/proc/self/fd");
			CHECKF(fds <= fds0, "after %d cycles: %d fds open, %d after the first cycles", i, fds, fds0);
		}
	}
	int fds1 = count_dir("/proc/self/fd");
	int th1 = settled_count("/proc/self/task", th0);
	CHECKF(fds1 == fds0, "fd leak: %d open before the cycles, %d after", fds0, fds1);
	CHECKF(th1 == th0, "thread leak: %d threads before the cycles, %d after", th0, th1);
	printf("%d cycles: %d fds, %d threads before and after\n", CYCLES, fds0, th0);
	free(exp);
	return 0;
}
