/*
 * faultfs: a small fault-injecting FUSE filesystem for the reliability
 * tests. It passes every file of a flat backing directory through (create,
 * read, write, truncate, unlink, fsync), in direct_io mode so that the page
 * cache neither hides a fault nor widens it to a whole page, and injects
 * faults chosen at run time through a control file at the root:
 *
 *   faultfs BACKING_DIR MOUNTPOINT [-d]     (stays in the foreground;
 *                                            SIGTERM unmounts and exits)
 *
 * Write commands to MOUNTPOINT/.faultctl, one per line or ';'-separated:
 *   clear                       remove every rule (counters stay)
 *   eio  read|write|any OFF LEN operations of that kind overlapping
 *                               [OFF, OFF+LEN), widened to 4 KiB blocks,
 *                               fail with EIO
 *   nth  read|write|any N       the N-th such operation from now fails with
 *                               EIO (once)
 *   short MAX                   reads and writes move at most MAX bytes per
 *                               operation (short transfers, not errors)
 *   delay US                    every read and write first sleeps US µs
 *   eintr 0|1                   1: a delayed operation whose caller gets a
 *                               signal returns EINTR (FUSE interrupt)
 * Read MOUNTPOINT/.faultctl for the counters:
 *   ops=N reads=N writes=N faults=N short=N interrupted=N
 * A bad command fails the write with EINVAL.
 */
#define FUSE_USE_VERSION 31
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CTL_NAME ".faultctl"
#define CTL_FH UINT64_MAX
#define BLK 4096ull
#define MAX_RULES 64

enum kind { K_READ = 1, K_WRITE = 2, K_ANY = 3 };

struct rule {
	int kind;
	bool nth;        /* else a range */
	uint64_t lo, hi; /* range, block-aligned, [lo, hi) */
	uint64_t left;   /* nth: operations still to pass before the fault */
};

static char backing[PATH_MAX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[MAX_RULES];
static int nrules;
static uint64_t short_max, delay_us;
static bool eintr_on;
static atomic_ulong n_ops, n_reads, n_writes, n_faults, n_short, n_intr;

static void bpath(char *out, size_t n, const char *path)
{
	snprintf(out, n, "%s%s", backing, path);
}

static bool is_ctl(const char *path)
{
	return strcmp(path, "/" CTL_NAME) == 0;
}

static int parse_kind(const char *s)
{
	if (!strcmp(s, "read"))
		return K_READ;
	if (!strcmp(s, "write"))
		return K_WRITE;
	if (!strcmp(s, "any"))
		return K_ANY;
	return 0;
}

/* one command; false if malformed */
static bool command(char *line)
{
	char *argv[5];
	int argc = 0;
	for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t && argc < 5; t = strtok_r(NULL, " \t\r", &save))
		argv[argc++] = t;
	if (argc == 0)
		return true;
	if (!strcmp(argv[0], "clear") && argc == 1) {
		nrules = 0;
		short_max = delay_us = 0;
		eintr_on = false;
		return true;
	}
	if (!strcmp(argv[0], "eio") && argc == 4 && nrules < MAX_RULES) {
		int k = parse_kind(argv[1]);
		char *e1, *e2;
		unsigned long long off = strtoull(argv[2], &e1, 0), len = strtoull(argv[3], &e2, 0);
		if (!k || *e1 || *e2 || len == 0)
			return false;
		rules[nrules++] = (struct rule){ .kind = k, .lo = off & ~(BLK - 1),
						 .hi = (off + len + BLK - 1) & ~(BLK - 1) };
		return true;
	}
	if (!strcmp(argv[0], "nth") && argc == 3 && nrules < MAX_RULES) {
		int k = parse_kind(argv[1]);
		char *e;
		unsigned long long n = strtoull(argv[2], &e, 0);
		if (!k || *e || n == 0)
			return false;
		rules[nrules++] = (struct rule){ .kind = k, .nth = true, .left = n };
		return true;
	}
	if ((!strcmp(argv[0], "short") || !strcmp(argv[0], "delay") || !strcmp(argv[0], "eintr")) && argc == 2) {
		char *e;
		unsigned long long v = strtoull(argv[1], &e, 0);
		if (*e)
			return false;
		if (argv[0][0] == 's')
			short_max = v;
		else if (argv[0][0] == 'd')
			delay_us = v;
		else
			eintr_on = v != 0;
		return true;
	}
	return false;
}

/* Decide the fate of one operation: 0, or -EIO; *limit = short cap. */
static int judge(int kind, uint64_t off, size_t size, uint64_t *limit, uint64_t *delay, bool *intr)
{
	int rc = 0;
	atomic_fetch_add(&n_ops, 1);
	atomic_fetch_add(kind == K_READ ? &n_reads : &n_writes, 1);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		if (!(r->kind & kind))
			continue;
		if (r->nth) {
			if (r->left && --r->left == 0)
				rc = -EIO;
		} else if (size && off < r->hi && off + size > r->lo) {
			rc = -EIO;
		}
	}
	*limit = short_max;
	*delay = delay_us;
	*intr = eintr_on;
	pthread_mutex_unlock(&lock);
	if (rc)
		atomic_fetch_add(&n_faults, 1);
	return rc;
}

/* Sleep us µs in 1 ms steps; -EINTR if the caller was interrupted and
 * interrupts are to be reported. */
static int pause_us(uint64_t us, bool intr)
{
	while (us) {
		uint64_t step = us > 1000 ? 1000 : us;
		struct timespec ts = { 0, (long)step * 1000 };
		nanosleep(&ts, NULL);
		us -= step;
		if (intr && fuse_interrupted()) {
			atomic_fetch_add(&n_intr, 1);
			return -EINTR;
		}
	}
	return 0;
}

static void *ffs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->direct_io = 1;
	cfg->entry_timeout = 0;
	cfg->attr_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->use_ino = 0;
	cfg->hard_remove = 1;
	return NULL;
}

static int ffs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	if (is_ctl(path)) {
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFREG | 0666;
		st->st_nlink = 1;
		return 0;
	}
	int r;
	if (fi && fi->fh != CTL_FH)
		r = fstat((int)fi->fh, st);
	else {
		char p[PATH_MAX + 256];
		bpath(p, sizeof(p), path);
		r = lstat(p, st);
	}
	return r < 0 ? -errno : 0;
}

static int ffs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
		       enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	char p[PATH_MAX + 256];
	bpath(p, sizeof(p), path);
	DIR *d = opendir(p);
	if (!d)
		return -errno;
	fill(buf, CTL_NAME, NULL, 0, 0);
	for (struct dirent *e; (e = readdir(d));)
		fill(buf, e->d_name, NULL, 0, 0);
	closedir(d);
	return 0;
}

static int ffs_open(const char *path, struct fuse_file_info *fi)
{
	fi->direct_io = 1;
	fi->keep_cache = 0;
	if (is_ctl(path)) {
		fi->fh = CTL_FH;
		return 0;
	}
	char p[PATH_MAX + 256];
	bpath(p, sizeof(p), path);
	/* O_DIRECT is not passed down: the backing file is read buffered;
	 * the mount itself is direct_io */
	int fd = open(p, fi->flags & ~(O_DIRECT | O_CREAT | O_EXCL | O_TRUNC | O_APPEND));
	if (fd < 0)
		return -errno;
	if (fi->flags & O_TRUNC)
		if (ftruncate(fd, 0) < 0) {
			close(fd);
			return -errno;
		}
	fi->fh = (uint64_t)fd;
	return 0;
}

static int ffs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	if (is_ctl(path))
		return -EEXIST;
	char p[PATH_MAX + 256];
	bpath(p, sizeof(p), path);
	int fd = open(p, (fi->flags & ~O_DIRECT) | O_CREAT, mode);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	fi->direct_io = 1;
	return 0;
}

static int ffs_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	if (fi->fh != CTL_FH)
		close((int)fi->fh);
	return 0;
}

/* What happens to one read or write: its delay (EINTR if interrupted
 * there), an injected error, or a shortened *size. 0 to go on. */
static int fate(int kind, off_t off, size_t *size)
{
	uint64_t limit, delay;
	bool intr;
	int rc = judge(kind, (uint64_t)off, *size, &limit, &delay, &intr);
	if (delay && pause_us(delay, intr))
		return -EINTR;
	if (rc)
		return rc;
	if (limit && *size > limit) {
		*size = limit;
		atomic_fetch_add(&n_short, 1);
	}
	return 0;
}

static int ffs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)path;
	if (fi->fh == CTL_FH) {
		char s[256];
		int n = snprintf(s, sizeof(s), "ops=%lu reads=%lu writes=%lu faults=%lu short=%lu interrupted=%lu\n",
				 atomic_load(&n_ops), atomic_load(&n_reads), atomic_load(&n_writes),
				 atomic_load(&n_faults), atomic_load(&n_short), atomic_load(&n_intr));
		if (off >= n)
			return 0;
		size_t m = (size_t)(n - off) < size ? (size_t)(n - off) : size;
		memcpy(buf, s + off, m);
		return (int)m;
	}
	int rc = fate(K_READ, off, &size);
	if (rc)
		return rc;
	ssize_t r = pread((int)fi->fh, buf, size, off);
	return r < 0 ? -errno : (int)r;
}

static int ffs_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)path;
	if (fi->fh == CTL_FH) {
		char *s = strndup(buf, size);
		bool ok = s != NULL;
		pthread_mutex_lock(&lock);
		for (char *save = NULL, *l = ok ? strtok_r(s, ";\n", &save) : NULL; l; l = strtok_r(NULL, ";\n", &save))
			ok = command(l) && ok;
		pthread_mutex_unlock(&lock);
		free(s);
		return ok ? (int)size : -EINVAL;
	}
	int rc = fate(K_WRITE, off, &size);
	if (rc)
		return rc;
	ssize_t r = pwrite((int)fi->fh, buf, size, off);
	return r < 0 ? -errno : (int)r;
}

static int ffs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	if (is_ctl(path))
		return 0;
	int r;
	if (fi && fi->fh != CTL_FH)
		r = ftruncate((int)fi->fh, size);
	else {
		char p[PATH_MAX + 256];
		bpath(p, sizeof(p), path);
		r = truncate(p, size);
	}
	return r < 0 ? -errno : 0;
}

static int ffs_unlink(const char *path)
{
	if (is_ctl(path))
		return -EPERM;
	char p[PATH_MAX + 256];
	bpath(p, sizeof(p), path);
	return unlink(p) < 0 ? -errno : 0;
}

static int ffs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	if (fi->fh == CTL_FH)
		return 0;
	int r = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
	return r < 0 ? -errno : 0;
}

static int ffs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	(void)fi;
	if (is_ctl(path))
		return 0;
	char p[PATH_MAX + 256];
	bpath(p, sizeof(p), path);
	return utimensat(AT_FDCWD, p, tv, 0) < 0 ? -errno : 0;
}

static const struct fuse_operations ops = {
	.init = ffs_init,
	.getattr = ffs_getattr,
	.readdir = ffs_readdir,
	.open = ffs_open,
	.create = ffs_create,
	.release = ffs_release,
	.read = ffs_read,
	.write = ffs_write,
	.truncate = ffs_truncate,
	.unlink = ffs_unlink,
	.fsync = ffs_fsync,
	.utimens = ffs_utimens,
};

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s BACKING_DIR MOUNTPOINT [-d]\n", argv[0]);
		return 2;
	}
	if (!realpath(argv[1], backing)) {
		perror(argv[1]);
		return 2;
	}
	char *fargv[16];
	int fargc = 0;
	fargv[fargc++] = argv[0];
	fargv[fargc++] = argv[2];
	fargv[fargc++] = "-f";
	fargv[fargc++] = "-o";
	fargv[fargc++] = "fsname=faultfs,subtype=faultfs";
	if (getuid() == 0) {
		fargv[fargc++] = "-o";
		fargv[fargc++] = "allow_other";
	}
	for (int i = 3; i < argc && fargc < 15; i++)
		fargv[fargc++] = argv[i];
	fargv[fargc] = NULL;
	return fuse_main(fargc, fargv, &ops, NULL);
}
