/*
 * test_syncflags: O_SYNC / O_DSYNC fds keep their durability on every path
 * (issue 15 item 4). The library writes partial blocks of an O_DIRECT fd
 * through a buffered twin fd of its own, and aligned blocks of a buffered
 * fd may go through an O_DIRECT twin; before the fix neither twin carried
 * the caller's O_SYNC / O_DSYNC, so partial-block writes left dirty pages
 * behind a call that had returned.
 *
 * For each of {O_DSYNC, O_SYNC} x {O_DIRECT, buffered}: register the fd,
 * write unaligned and aligned ranges through sync, async, batch and stream,
 * check the file byte-exact, then check that every fd of this process open
 * on the file (the caller's and the library's twins, found through
 * /proc/self/fd and /proc/self/fdinfo) carries the flag asked for.
 * Backend from OPENDS_BACKEND. Exit 0 pass, 1 fail, 77 skip.
 */
#include "rel.h"

#include <dirent.h>

#define FSZ (4u << 20)

static char path[PATH_MAX + 32];

static unsigned fd_flags_on_file(unsigned want, unsigned *n_files)
{
	struct stat want_st;
	R_CHECK(stat(path, &want_st) == 0, "stat");
	DIR *d = opendir("/proc/self/fd");
	R_CHECK(d, "opendir /proc/self/fd");
	unsigned bad = 0;
	*n_files = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		int n = atoi(de->d_name);
		struct stat st;
		if (de->d_name[0] == '.' || n == dirfd(d) || fstat(n, &st) || st.st_ino != want_st.st_ino ||
		    st.st_dev != want_st.st_dev)
			continue;
		char fi[64], line[256];
		snprintf(fi, sizeof(fi), "/proc/self/fdinfo/%d", n);
		FILE *f = fopen(fi, "r");
		R_CHECK(f, "fopen %s", fi);
		unsigned flags = 0;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "flags: %o", &flags) == 1)
				break;
		fclose(f);
		(*n_files)++;
		if ((flags & want) != want) {
			fprintf(stderr, "fd %d on the file has flags 0%o, without 0%o\n", n, flags, want);
			bad++;
		}
	}
	closedir(d);
	return bad;
}

static void one(int sync_flag, bool direct)
{
	const char *what = sync_flag == O_SYNC ? "O_SYNC" : "O_DSYNC";
	r_phase = what;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | sync_flag | (direct ? O_DIRECT : 0), 0600);
	if (fd < 0 && direct && errno == EINVAL) {
		printf("%s O_DIRECT: the file system refuses O_DIRECT; skipped\n", what);
		return;
	}
	R_CHECK(fd >= 0, "open: %s", strerror(errno));
	uint8_t *init = malloc(FSZ), *mem, *back;
	R_CHECK(posix_memalign((void **)&mem, 4096, FSZ) == 0 && posix_memalign((void **)&back, 4096, FSZ) == 0,
		"alloc");
	memset(init, 0, FSZ);
	R_CHECK(ftruncate(fd, FSZ) == 0, "ftruncate");
	opends_handle_t h;
	R_TRY(opends_handle_register(&h, fd));
	uint8_t *model = calloc(1, FSZ);
	/* partial blocks and aligned ones, through every family */
	struct r_op ops[8];
	static const size_t sz[8] = { 100, 5000, 8192, 4096 * 3 + 17, 1, 65536, 4095, 12288 };
	static const off_t at[8] = { 10, 4096 * 5 + 100, 4096 * 10, 4096 * 20 + 3, 4096 * 40 + 4095, 4096 * 50,
				     4096 * 70 + 1, 4096 * 80 };
	for (unsigned f = 0; f < R_NFAMILIES; f++) {
		for (unsigned i = 0; i < 8; i++) {
			ops[i] = (struct r_op){ .fh = h, .opcode = OPENDS_WRITE, .buf = mem + (size_t)i * 65536,
						.size = sz[i], .off = at[i] + (off_t)f * 4096 * 100 };
			if ((uint64_t)ops[i].off + sz[i] > FSZ)
				ops[i].off = (off_t)(FSZ - sz[i] - 4096 * i);
			r_fill(ops[i].buf, sz[i], 7 + f, (uint64_t)ops[i].off);
		}
		/* ranges of one family must not overlap each other */
		r_run_ops((enum r_family)f, ops, 8);
		for (unsigned i = 0; i < 8; i++) {
			R_CHECK(ops[i].result == (ssize_t)sz[i], "%s %s: write %u returned %zd of %zu", what,
				r_family_name[f], i, ops[i].result, sz[i]);
			memcpy(model + ops[i].off, ops[i].buf, sz[i]);
		}
	}
	unsigned n_files, bad = fd_flags_on_file((unsigned)sync_flag, &n_files);
	R_CHECK(bad == 0, "%s%s: %u of the %u fds on the file lack the flag", what, direct ? " O_DIRECT" : "", bad,
		n_files);
	R_CHECK(pread(fd, back, FSZ, 0) == FSZ || (direct && errno == EINVAL), "pread");
	int bfd = open(path, O_RDONLY);
	R_CHECK(pread(bfd, back, FSZ, 0) == FSZ, "pread");
	close(bfd);
	for (size_t i = 0; i < FSZ; i++)
		R_CHECK(back[i] == model[i], "%s: byte %zu is 0x%02x, expected 0x%02x", what, i, back[i], model[i]);
	R_TRY(opends_handle_deregister(h));
	close(fd);
	printf("%s%s: %u fds on the file (caller's and twins), all with the flag; contents byte-exact\n", what,
	       direct ? " O_DIRECT" : "", n_files);
	free(init);
	free(mem);
	free(back);
	free(model);
}

int main(void)
{
	r_watchdog(120);
	snprintf(path, sizeof(path), "%s/sync", r_tmpdir("syncflags"));
	atexit(r_rmdir_all);
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here", r_backend_env());
	R_TRY(e);
	one(O_DSYNC, true);
	one(O_SYNC, true);
	one(O_DSYNC, false);
	one(O_SYNC, false);
	R_TRY(opends_driver_close());
	return 0;
}
