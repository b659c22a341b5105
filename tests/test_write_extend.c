/*
 * Writes that end past the end of the file (issue 17's write16m and the
 * single large write: the uring backend allocates such a write's range
 * first, so that its O_DIRECT pieces run at once; src/core/stage_ra.c
 * allocate_first). Whatever the backend does to get there, the file must
 * end up exactly as pwrite would leave it:
 *   gap        a 3 MiB write starting 5 MiB past the end: the size is its
 *              end, the gap reads as zeros, the bytes exact (buffered and
 *              O_DIRECT fds)
 *   together   four threads write adjacent 2 MiB + 4 KiB ranges past the
 *              end at once, in reverse order of offset: every byte exact,
 *              the size the furthest end, never shortened
 *   front      a file written front to back in 16 MiB calls, then one
 *              call of 40 MiB: exact, size exact
 *   read-only  a write past the end through a read-only fd: -EBADF, and
 *              the file's size and blocks unchanged
 */
#include "common.h"

#include <pthread.h>
#include <sys/stat.h>

#define MiB ((size_t)1 << 20)

static char path[PATH_MAX];

static uint8_t patW(uint64_t x)
{
	return (uint8_t)(hashpat(x) ^ 0x3c);
}

static void fill(uint8_t *p, uint64_t off, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = patW(off + i);
}

static off_t size_of(int fd)
{
	struct stat st;
	CHECK(fstat(fd, &st) == 0);
	return st.st_size;
}

/* the file holds patW over [off, off + n) */
static void check_range(int fd, uint64_t off, size_t n, const char *what)
{
	uint8_t *b = t_xmalloc(n);
	CHECKF(pread(fd, b, n, (off_t)off) == (ssize_t)n, "%s: pread back", what);
	for (size_t i = 0; i < n; i++)
		if (b[i] != patW(off + i)) {
			FAILF("%s: byte %llu is 0x%02x, want 0x%02x", what, (unsigned long long)(off + i), b[i],
			      patW(off + i));
			break;
		}
	free(b);
}

static void check_zeros(int fd, uint64_t off, size_t n, const char *what)
{
	uint8_t *b = t_xmalloc(n);
	CHECKF(pread(fd, b, n, (off_t)off) == (ssize_t)n, "%s: pread back", what);
	size_t at;
	if (t_first_not(b, n, 0, &at))
		FAILF("%s: byte %llu of the gap is not zero", what, (unsigned long long)(off + at));
	free(b);
}

static int fresh(bool direct)
{
	unlink(path);
	return t_open(path, O_RDWR | O_CREAT | O_TRUNC, direct);
}

static void gap(void)
{
	for (int direct = 0; direct < 2; direct++) {
		int fd = fresh(direct);
		if (fd == -2)
			continue;
		opends_handle_t fh = t_register(fd);
		uint8_t *b = t_xmalloc(4 * MiB);
		fill(b, 0, 1 * MiB);
		EXPECT_SSZ(opends_sync_write(fh, b, 1 * MiB, 0, 0), (ssize_t)MiB);
		uint64_t off = 6 * MiB + 4096;
		size_t n = 3 * MiB;
		fill(b, off, n);
		EXPECT_SSZ(opends_sync_write(fh, b, n, (off_t)off, 0), (ssize_t)n);
		CHECKF(size_of(fd) == (off_t)(off + n), "gap: size %lld, want %llu", (long long)size_of(fd),
		       (unsigned long long)(off + n));
		int rd = open(path, O_RDONLY);
		check_range(rd, 0, MiB, "gap: the first write");
		check_zeros(rd, MiB, off - MiB, "gap");
		check_range(rd, off, n, "gap: the write past the end");
		close(rd);
		OK(opends_handle_deregister(fh));
		close(fd);
		free(b);
		printf("gap (%s): exact, the gap zeros, size the write's end\n", direct ? "O_DIRECT" : "buffered");
	}
}

#define NT 4
#define SPAN (2 * MiB + 4096)

struct wr {
	opends_handle_t fh;
	unsigned i;
	pthread_barrier_t *go;
};

static void *writer(void *arg)
{
	struct wr *w = arg;
	uint64_t off = (uint64_t)(NT - 1 - w->i) * SPAN; /* the furthest first */
	uint8_t *b = t_xmalloc(SPAN);
	fill(b, off, SPAN);
	pthread_barrier_wait(w->go);
	EXPECT_SSZ(opends_sync_write(w->fh, b, SPAN, (off_t)off, 0), (ssize_t)SPAN);
	free(b);
	return NULL;
}

static void together(void)
{
	int fd = fresh(false);
	opends_handle_t fh = t_register(fd);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, NT);
	pthread_t t[NT];
	struct wr w[NT];
	for (unsigned i = 0; i < NT; i++) {
		w[i] = (struct wr){ fh, i, &go };
		CHECK(pthread_create(&t[i], NULL, writer, &w[i]) == 0);
	}
	for (unsigned i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	CHECKF(size_of(fd) == (off_t)(NT * SPAN), "together: size %lld, want %zu", (long long)size_of(fd),
	       (size_t)(NT * SPAN));
	check_range(fd, 0, NT * SPAN, "together");
	OK(opends_handle_deregister(fh));
	close(fd);
	printf("together: %d writers past the end at once, exact\n", NT);
}

static void front(void)
{
	int fd = fresh(true);
	if (fd == -2)
		fd = fresh(false);
	opends_handle_t fh = t_register(fd);
	size_t call = 16 * MiB, big = 40 * MiB;
	uint8_t *b = t_xmalloc(big);
	for (uint64_t off = 0; off < 3 * call; off += call) {
		fill(b, off, call);
		EXPECT_SSZ(opends_sync_write(fh, b, call, (off_t)off, 0), (ssize_t)call);
	}
	fill(b, 3 * call, big);
	EXPECT_SSZ(opends_sync_write(fh, b, big, (off_t)(3 * call), 0), (ssize_t)big);
	CHECKF(size_of(fd) == (off_t)(3 * call + big), "front: size %lld", (long long)size_of(fd));
	int rd = open(path, O_RDONLY);
	check_range(rd, 0, 3 * call + big, "front");
	close(rd);
	OK(opends_handle_deregister(fh));
	close(fd);
	free(b);
	printf("front to back: 3 x 16 MiB then 40 MiB in one call, exact\n");
}

static void read_only(void)
{
	int fd = fresh(false);
	uint8_t *b = t_xmalloc(4 * MiB);
	fill(b, 0, MiB);
	CHECK(pwrite(fd, b, MiB, 0) == (ssize_t)MiB);
	close(fd);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	struct stat before, after;
	CHECK(fstat(fd, &before) == 0);
	opends_handle_t fh = t_register(fd);
	EXPECT_SSZ(opends_sync_write(fh, b, 4 * MiB, (off_t)MiB, 0), -EBADF);
	CHECK(fstat(fd, &after) == 0);
	CHECKF(after.st_size == before.st_size && after.st_blocks == before.st_blocks,
	       "read-only: size %lld blocks %lld, were %lld and %lld", (long long)after.st_size,
	       (long long)after.st_blocks, (long long)before.st_size, (long long)before.st_blocks);
	OK(opends_handle_deregister(fh));
	close(fd);
	free(b);
	printf("read-only fd: -EBADF, size and blocks unchanged\n");
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(240);
	t_path(path, sizeof(path), "extend.bin");
	t_driver_open();
	gap();
	together();
	front();
	read_only();
	OK(opends_driver_close());
	unlink(path);
	t_rm_dir();
	return t_failures ? 1 : 0;
}
