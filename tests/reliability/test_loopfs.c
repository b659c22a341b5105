/*
 * test_loopfs enospc|durability: tests on a tiny ext4 filesystem on a loop
 * device (skips with 77 when not root or when mkfs/mount fail).
 *
 * enospc: fill the filesystem through the library until writes fail; every
 *   write that fails returns -ENOSPC (through sync, async, batch and
 *   stream), data written earlier (another file, and the filled file up to
 *   the last successful write) reads back byte-exact, also after a cache
 *   drop, and after freeing space writes work again.
 * durability: data written with opends_sync_write (and the other families)
 *   and fdatasync'ed through the fd survives a cache drop and an
 *   unmount/remount, byte-exact, through a buffered and an O_DIRECT fd.
 */
#include "rel_mount.h"

#include <sys/statvfs.h>

static char image[PATH_MAX], mnt[PATH_MAX];

static uint8_t *abuf(size_t n)
{
	void *p;
	if (posix_memalign(&p, 4096, n))
		R_FAIL("posix_memalign");
	return p;
}

static void drop_caches(const char *path)
{
	sync();
	int fd = open(path, O_RDONLY);
	if (fd >= 0) {
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	int d = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (d >= 0) {
		if (write(d, "3", 1) != 1)
			printf("note: drop_caches refused (%s); POSIX_FADV_DONTNEED only\n", strerror(errno));
		close(d);
	}
}

static void open_driver(void)
{
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here: %s", r_backend_env(), opends_last_error_detail());
	R_TRY(e);
}

/* Read path [0, n) through the library and compare with pattern gen. */
static void verify_file(const char *path, size_t n, uint32_t g, const char *what)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		R_FAIL("%s: open %s: %s", what, path, strerror(errno));
	opends_handle_t h;
	R_TRY(opends_handle_register(&h, fd));
	uint8_t *b = abuf(n + 4096);
	ssize_t r = opends_sync_read(h, b, n + 4096, 0, 0);
	if (r < (ssize_t)n)
		R_FAIL("%s: read %zd bytes of %zu", what, r, n);
	long bad = r_first_bad(b, n, g, 0);
	if (bad >= 0)
		R_FAIL("%s: byte %ld differs after the fact", what, bad);
	R_TRY(opends_handle_deregister(h));
	close(fd);
	free(b);
}

static int enospc(void)
{
	m_loop_mount(image, mnt, 16);
	/* no blocks reserved for root, so root fills it like anyone */
	r_sh("tune2fs -m 0 \"$(findmnt -n -o SOURCE '%s')\" >/dev/null 2>&1", mnt);
	open_driver();
	char early[PATH_MAX + 16], fill[PATH_MAX + 16];
	snprintf(early, sizeof(early), "%s/early", mnt);
	snprintf(fill, sizeof(fill), "%s/fill", mnt);

	/* 1 MiB written and synced before the filesystem fills */
	const size_t EARLY = 1u << 20;
	uint8_t *b = abuf(EARLY);
	r_fill(b, EARLY, 1, 0);
	int efd = open(early, O_RDWR | O_CREAT | O_TRUNC, 0644);
	opends_handle_t eh;
	R_TRY(opends_handle_register(&eh, efd));
	if (opends_sync_write(eh, b, EARLY, 0, 0) != (ssize_t)EARLY || fdatasync(efd))
		R_FAIL("writing the early file");
	R_TRY(opends_handle_deregister(eh));
	close(efd);

	/* fill: 1 MiB writes until one fails, then 16 KiB ones */
	int fd = open(fill, O_RDWR | O_CREAT | O_TRUNC, 0644);
	opends_handle_t h;
	R_TRY(opends_handle_register(&h, fd));
	const size_t CH = 1u << 20;
	uint8_t *w = abuf(CH);
	off_t done = 0;
	unsigned writes = 0;
	for (size_t step = CH; step >= 16384; step /= 64) {
		for (;;) {
			r_fill(w, step, 2, (uint64_t)done);
			ssize_t r = opends_sync_write(h, w, step, done, 0);
			writes++;
			if (r == (ssize_t)step) {
				done += (off_t)step;
				continue;
			}
			if (r != -ENOSPC)
				R_FAIL("write %zu at %lld on a filling filesystem returned %zd, expected %zu or -ENOSPC",
				       step, (long long)done, r, step);
			break;
		}
		if (done > (off_t)(64u << 20))
			R_FAIL("wrote %lld bytes to a 16 MiB filesystem", (long long)done);
	}
	printf("filled after %lld bytes in %u writes\n", (long long)done, writes);
	if (done < (off_t)(4u << 20))
		R_FAIL("only %lld bytes fit", (long long)done);

	/* full: every family reports -ENOSPC */
	struct r_op op = { .fh = h, .opcode = OPENDS_WRITE, .buf = w, .size = CH, .off = done };
	for (int f = 0; f < R_NFAMILIES; f++) {
		r_phase = r_family_name[f];
		r_fill(w, CH, 2, (uint64_t)done);
		op.result = 0;
		r_run_ops((enum r_family)f, &op, 1);
		if (op.result != -ENOSPC)
			R_FAIL("%s write of 1 MiB on a full filesystem returned %zd, expected -ENOSPC",
			       r_family_name[f], op.result);
		printf("ok   %s write on a full filesystem: -ENOSPC\n", r_family_name[f]);
	}
	if (fdatasync(fd) && errno != ENOSPC)
		R_FAIL("fdatasync: %s", strerror(errno));

	/* everything written before is intact, before and after a cache drop */
	r_phase = "verify";
	verify_file(early, EARLY, 1, "early file");
	verify_file(fill, (size_t)done, 2, "filled file");
	drop_caches(fill);
	verify_file(early, EARLY, 1, "early file after a cache drop");
	verify_file(fill, (size_t)done, 2, "filled file after a cache drop");
	printf("ok   earlier data intact (%zu + %lld bytes)\n", EARLY, (long long)done);

	/* space freed: writing works again */
	r_phase = "after freeing";
	if (ftruncate(fd, (off_t)(2u << 20)))
		R_FAIL("ftruncate");
	fsync(fd);
	r_fill(w, CH, 2, 1u << 20);
	ssize_t r = opends_sync_write(h, w, CH, 1u << 20, 0);
	if (r != (ssize_t)CH)
		R_FAIL("write after freeing space returned %zd", r);
	verify_file(fill, 2u << 20, 2, "filled file after freeing");
	printf("ok   writes work again after space is freed\n");
	R_TRY(opends_handle_deregister(h));
	close(fd);
	R_TRY(opends_driver_close());
	free(b);
	free(w);
	return 0;
}

/* Write path through every family with fd opened with flags, fdatasync. */
static void write_synced(const char *path, int flags, size_t n, uint32_t g)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | flags, 0644);
	if (fd < 0)
		R_FAIL("open %s: %s", path, strerror(errno));
	opends_handle_t h;
	R_TRY(opends_handle_register(&h, fd));
	uint8_t *b = abuf(n);
	r_fill(b, n, g, 0);
	/* four parts, one per family, with unaligned boundaries */
	size_t cut[5] = { 0, n / 4 + 123, n / 2 - 4095, 3 * n / 4 + 1, n };
	for (int f = 0; f < R_NFAMILIES; f++) {
		struct r_op op = { .fh = h, .opcode = OPENDS_WRITE, .buf = b + cut[f], .size = cut[f + 1] - cut[f],
				   .off = (off_t)cut[f] };
		r_run_ops((enum r_family)f, &op, 1);
		if (op.result != (ssize_t)op.size)
			R_FAIL("%s write of %zu returned %zd", r_family_name[f], op.size, op.result);
	}
	if (fdatasync(fd))
		R_FAIL("fdatasync: %s", strerror(errno));
	R_TRY(opends_handle_deregister(h));
	close(fd);
	free(b);
}

/* After a cache drop or a remount (when): both files read back exact (the
 * patterns 5 and 6 durability wrote) through a fresh driver, which stays
 * open. */
static void verify_synced(const char *f1, size_t n1, const char *f2, size_t n2, bool direct, const char *when)
{
	char what[96];
	open_driver();
	snprintf(what, sizeof(what), "buffered file after %s", when);
	verify_file(f1, n1, 5, what);
	snprintf(what, sizeof(what), "O_DIRECT file after %s", when);
	if (direct)
		verify_file(f2, n2, 6, what);
}

static int durability(void)
{
	m_loop_mount(image, mnt, 32);
	open_driver();
	char f1[PATH_MAX + 16], f2[PATH_MAX + 16];
	snprintf(f1, sizeof(f1), "%s/buffered", mnt);
	snprintf(f2, sizeof(f2), "%s/direct", mnt);
	const size_t N1 = (4u << 20) + 777, N2 = 3u << 20;
	write_synced(f1, 0, N1, 5);
	int dfd = open(f2, O_RDWR | O_CREAT | O_DIRECT, 0644);
	bool direct = dfd >= 0;
	if (dfd >= 0)
		close(dfd);
	if (direct)
		write_synced(f2, O_DIRECT, N2, 6);
	R_TRY(opends_driver_close());

	r_phase = "cache drop";
	drop_caches(f1);
	verify_synced(f1, N1, f2, N2, direct, "a cache drop");
	R_TRY(opends_driver_close());
	printf("ok   synced data survives a cache drop\n");

	r_phase = "remount";
	m_loop_remount(image);
	verify_synced(f1, N1, f2, N2, direct, "a remount");
	struct stat st;
	if (stat(f1, &st) || st.st_size != (off_t)N1)
		R_FAIL("size after remount: %lld, expected %zu", (long long)st.st_size, N1);
	R_TRY(opends_driver_close());
	printf("ok   synced data survives unmount and remount (%zu + %zu bytes)\n", N1, direct ? N2 : 0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "enospc") && strcmp(argv[1], "durability"))) {
		fprintf(stderr, "usage: %s enospc|durability\n", argv[0]);
		return 2;
	}
	r_watchdog(150);
	if (geteuid() != 0)
		r_skip("not root");
	const char *tmp = r_tmpdir(argv[1]);
	snprintf(image, sizeof(image), "%s/fs.img", tmp);
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmp);
	printf("backend %s\n", r_backend_env());
	return !strcmp(argv[1], "enospc") ? enospc() : durability();
}
