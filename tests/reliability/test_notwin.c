/*
 * test_notwin: writes through O_DIRECT fds when the library cannot open its
 * buffered twin of the fd (issue 15 item 2). The twin is the same file
 * reopened through /proc/self/fd; it fails when the file's permissions
 * changed after the caller opened it, or the process dropped privileges.
 * Here a child opens the fds, then drops to uid/gid 65534 (as root) or
 * chmods the file to 0 (otherwise), checks that the reopen fails, and:
 *   wronly   partial-block writes of every family through a write-only
 *            O_DIRECT fd (failed with -EBADF before: a read-modify-write
 *            needs to read)
 *   handles  two threads, each through its own O_DIRECT handle of the
 *            file, write interleaved 10-byte records into the same blocks
 *            (the per-handle read-modify-write lost bytes before)
 *   append   two threads append 10-byte records through one handle, each
 *            taking the next offset from a shared counter, so the file
 *            grows under both (before: records lost, and the file cut
 *            short by a truncation after the lock was released)
 * The parent (with its privileges) checks the file byte-exact against the
 * records every write reported done. Backend from OPENDS_BACKEND.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include "rel.h"

#include <grp.h>

#define REC 10u
#define NREC 300u

static char path[PATH_MAX + 32];

static void rec_fill(uint8_t *p, unsigned thread, unsigned seq)
{
	snprintf((char *)p, REC + 1, "%c%08u|", 'A' + thread, seq);
}

struct wargs {
	opends_handle_t h;
	unsigned thread;
	atomic_ullong *next; /* append: the shared end of the file */
};

static enum r_family fam_of(unsigned seq)
{
	return (enum r_family)(seq % R_NFAMILIES);
}

static void write_rec(opends_handle_t h, unsigned thread, unsigned seq, off_t off)
{
	uint8_t b[REC + 1];
	rec_fill(b, thread, seq);
	struct r_op op = { .fh = h, .opcode = OPENDS_WRITE, .buf = b, .size = REC, .off = off };
	r_run_ops(fam_of(seq), &op, 1);
	R_CHECK(op.result == REC, "thread %u record %u (%s) at %lld: %zd", thread, seq, r_family_name[fam_of(seq)],
		(long long)off, op.result);
}

static void *interleave(void *arg)
{
	struct wargs *a = arg;
	for (unsigned i = 0; i < NREC; i++)
		write_rec(a->h, a->thread, i, (off_t)((2 * i + a->thread) * REC));
	return NULL;
}

static void *appender(void *arg)
{
	struct wargs *a = arg;
	for (unsigned i = 0; i < NREC; i++)
		write_rec(a->h, a->thread, i, (off_t)atomic_fetch_add(a->next, REC));
	return NULL;
}

static void drop(void)
{
	if (geteuid() == 0) {
		if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			R_FAIL("dropping privileges: %s", strerror(errno));
	} else if (chmod(path, 0)) {
		R_FAIL("chmod 0: %s", strerror(errno));
	}
}

static int child(const char *what)
{
	r_watchdog(100);
	int flags = !strcmp(what, "wronly") ? O_WRONLY : O_RDWR;
	int fd = open(path, flags | O_DIRECT);
	if (fd < 0 && errno == EINVAL)
		r_skip("the file system refuses O_DIRECT");
	R_CHECK(fd >= 0, "open: %s", strerror(errno));
	int fd2 = open(path, O_RDWR | O_DIRECT);
	R_CHECK(fd2 >= 0, "open: %s", strerror(errno));
	drop();
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	int t = open(p, O_RDONLY);
	if (t >= 0)
		r_skip("the file can still be reopened through %s", p);
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here", r_backend_env());
	R_TRY(e);
	opends_handle_t h, h2;
	R_TRY(opends_handle_register(&h, fd));
	R_TRY(opends_handle_register(&h2, fd2));
	if (!strcmp(what, "wronly")) {
		r_phase = "wronly";
		/* records at unaligned places, some across a block boundary */
		for (unsigned i = 0; i < NREC; i++)
			write_rec(h, 0, i, (off_t)(i * 4096 / 3 * REC / 7 + 4090 * (i % 2)));
	} else {
		atomic_ullong next = 0;
		struct wargs a[2] = { { h, 0, &next }, { !strcmp(what, "handles") ? h2 : h, 1, &next } };
		r_phase = what;
		pthread_t th[2];
		for (int i = 0; i < 2; i++)
			pthread_create(&th[i], NULL, !strcmp(what, "handles") ? interleave : appender, &a[i]);
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
	}
	R_TRY(opends_handle_deregister(h));
	R_TRY(opends_handle_deregister(h2));
	R_TRY(opends_driver_close());
	return 0;
}

int main(int argc, char **argv)
{
	R_CHECK(argc > 1, "usage: test_notwin wronly|handles|append");
	const char *what = argv[1];
	r_watchdog(120);
	const char *d = r_tmpdir("notwin");
	atexit(r_rmdir_all);
	R_CHECK(chmod(d, 0755) == 0, "chmod dir");
	snprintf(path, sizeof(path), "%s/f", d);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	R_CHECK(fd >= 0, "create: %s", strerror(errno));
	/* wronly and handles write inside the file; append grows an empty one */
	size_t fsz = strcmp(what, "append") ? 1u << 20 : 0;
	uint8_t *model = calloc(1, (1u << 20) + 2 * NREC * REC);
	R_CHECK(ftruncate(fd, (off_t)fsz) == 0, "ftruncate");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		exit(child(what));
	int st;
	R_CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	if (WIFEXITED(st) && WEXITSTATUS(st) == R_SKIP)
		r_skip("child skipped");
	R_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed (status 0x%x)", st);
	chmod(path, 0600);

	/* the model */
	struct stat sb;
	R_CHECK(fstat(fd, &sb) == 0, "fstat");
	size_t n = (size_t)sb.st_size;
	uint8_t *got = malloc(n + 1);
	R_CHECK(pread(fd, got, n, 0) == (ssize_t)n, "pread");
	if (!strcmp(what, "wronly")) {
		R_CHECK(n == fsz, "the file is %zu bytes, not %zu", n, fsz);
		for (unsigned i = 0; i < NREC; i++) {
			uint8_t b[REC + 1];
			rec_fill(b, 0, i);
			memcpy(model + i * 4096 / 3 * REC / 7 + 4090 * (i % 2), b, REC);
		}
		for (size_t i = 0; i < n; i++)
			R_CHECK(got[i] == model[i], "byte %zu is 0x%02x, expected 0x%02x", i, got[i], model[i]);
	} else if (!strcmp(what, "handles")) {
		R_CHECK(n == fsz, "the file is %zu bytes, not %zu", n, fsz);
		unsigned lost = 0;
		for (unsigned i = 0; i < NREC; i++)
			for (unsigned t = 0; t < 2; t++) {
				uint8_t b[REC + 1];
				rec_fill(b, t, i);
				lost += memcmp(got + (2 * i + t) * REC, b, REC) != 0;
			}
		R_CHECK(lost == 0, "%u of %u records lost", lost, 2 * NREC);
	} else {
		R_CHECK(n == 2 * NREC * REC, "the file is %zu bytes, not %u (cut short or grown)", n, 2 * NREC * REC);
		/* every record once, at a record boundary */
		unsigned char *seen = calloc(2, NREC);
		unsigned lost = 0;
		for (size_t o = 0; o < n; o += REC) {
			unsigned seq;
			char tc, bar;
			char s[REC + 1];
			memcpy(s, got + o, REC);
			s[REC] = 0;
			if (sscanf(s, "%c%8u%c", &tc, &seq, &bar) == 3 && (tc == 'A' || tc == 'B') && seq < NREC &&
			    bar == '|')
				seen[(unsigned)(tc - 'A') * NREC + seq]++;
		}
		for (unsigned i = 0; i < 2 * NREC; i++)
			lost += seen[i] != 1;
		R_CHECK(lost == 0, "%u of %u records lost or doubled", lost, 2 * NREC);
		free(seen);
	}
	printf("notwin %s: every acknowledged record is in the file\n", what);
	free(got);
	free(model);
	close(fd);
	return 0;
}
