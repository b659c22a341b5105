/*
 * The misuse table of docs/errors.md: one row per misuse case, asserting
 * the exact code each call returns and, for failures reported by the call
 * itself, a non-empty opends_last_error_detail() (and, where the row says
 * so, that the detail names the argument or variable at fault). One program
 * per family of rows, each including this header (the fixture, the
 * helpers the rows call, and the runner):
 *
 *   test_misuse_handles   D driver state, H file handles, B registered buffers
 *   test_misuse_io        S sizes and offsets, R direction of the fd, A futures
 *   test_misuse_stream    T streams
 *   test_misuse_batch     X batches
 *   test_misuse_config    C configuration variables
 *
 * Each row runs on a fresh thread, so the detail it sees can only come from
 * the row's own calls (the detail is per thread and starts empty), and
 * after a fresh driver open with fresh handles (state OPEN), after a close
 * that left stale handles, batches and streams behind (state CLOSED), or
 * with the driver closed and the row opening it itself (state CONFIG).
 *
 *   test_misuse_X               run the program's rows against the backend
 *                               named by OPENDS_BACKEND (meson runs one per
 *                               backend)
 *   test_misuse_X --markdown    print its part of the table of docs/errors.md
 *   test_misuse_X --doc FILE    also check that FILE lists every row id
 *   test_misuse_X --only ID     run one row
 */
#ifndef ODS_TEST_MISUSE_H
#define ODS_TEST_MISUSE_H

#include "rel.h"

#include <sys/socket.h>

enum state { OPEN, CLOSED, CONFIG };
enum kind {
	ERR,   /* a failure reported by this call: detail must be non-empty */
	LATER, /* a failure delivered later (await excepted), on another
		  thread: *bytes of a stream op, a batch event's ret */
	VALUE, /* a success value (0, bytes): positive controls */
};

#define NB (-1) /* backend_err not checked */

static struct misuse_fixture {
	char path[PATH_MAX + 16], dir[PATH_MAX];
	int rw, ro, wo, dirfd, pipefd[2], sock[2], devnull, opath;
	uint8_t *mem;   /* 1 MiB, page-aligned */
	uint8_t *reg;   /* mem + 256 KiB, registered (REG bytes) in state OPEN */
	opends_handle_t h_rw, h_ro, h_wo; /* registered in state OPEN; stale in CLOSED */
	opends_stream_t stream;          /* created in OPEN; stale in CLOSED */
	opends_batch_t batch;            /* max_nr 4, set up in OPEN; stale in CLOSED */
} fx;

#define FILE_SIZE (64 * 1024)
#define REG (64 * 1024)

static _Thread_local int row_be; /* backend_err of the row's last opends_error_t */

static inline long E(opends_error_t e)
{
	row_be = e.backend_err;
	return (long)e.err;
}

static inline opends_handle_t bogus_handle(void)
{
	return (opends_handle_t)(uintptr_t)0xdead0000beefull;
}

/* A batch entry whose cookie is its buffer. */
static inline opends_io_params_t entry(opends_handle_t fh, int opcode, void *buf, size_t size, off_t fo, off_t bo)
{
	return t_batch_entry(fh, opcode, buf, size, fo, bo, buf);
}

/* Submit one entry to the row's own batch; the submit's code, or the event's
 * ret when the submit succeeded (*submitted tells which). */
static inline long batch_one(opends_io_params_t p, bool *submitted)
{
	opends_batch_t b;
	opends_error_t e = opends_batch_setup(&b, 4);
	if (e.err)
		return E(e);
	e = opends_batch_submit(b, 1, &p, 0);
	*submitted = e.err == OPENDS_SUCCESS;
	long r = E(e);
	if (*submitted) {
		opends_io_events_t ev;
		unsigned nr = 1;
		e = opends_batch_get_status(b, 1, &nr, &ev, NULL);
		if (e.err || nr != 1)
			R_FAIL("batch_get_status: %d, nr %u", (int)e.err, nr);
		r = ev.ret;
		if ((ev.ret < 0) != (ev.status == OPENDS_FAILED))
			R_FAIL("event status 0x%x does not match ret %zd", (unsigned)ev.status, ev.ret);
	}
	opends_batch_destroy(b);
	return r;
}

static inline long batch_submit_code(opends_io_params_t p)
{
	bool s;
	long r = batch_one(p, &s);
	return s ? 0 : r;
}

static inline long batch_event_ret(opends_io_params_t p)
{
	bool s;
	long r = batch_one(p, &s);
	return s ? r : 999999; /* a refused submit is not what the row expects */
}

static inline long stream_rw(int opcode, opends_handle_t fh, void *buf, size_t size, off_t fo, off_t bo)
{
	ssize_t res = 777;
	opends_error_t e = opcode == OPENDS_READ ? opends_stream_read(fh, buf, &size, &fo, &bo, &res, NULL)
						 : opends_stream_write(fh, buf, &size, &fo, &bo, &res, NULL);
	if (e.err)
		return 888888; /* the rows using this expect the submit to succeed */
	R_TRY(opends_stream_synchronize(NULL));
	return (long)res;
}

static inline long async_result(int opcode, opends_handle_t fh, void *buf, size_t size, off_t fo, off_t bo)
{
	opends_async_future_t f;
	opends_error_t e = opcode == OPENDS_READ ? opends_async_read(fh, buf, size, fo, bo, &f)
						 : opends_async_write(fh, buf, size, fo, bo, &f);
	if (e.err)
		return E(e);
	return (long)opends_async_await(&f);
}

/* Set one configuration variable, try to open, close again if it opened,
 * and restore the variable: the open's code. */

/*
 * The rows: X(id, state, kind, expected, alternative (0 = none), expected
 * backend_err (NB = unchecked), word the detail must contain ("" = any),
 * description for the docs, body...). The body returns the call's code:
 * .err for opends_error_t calls (through E()), the ssize_t itself for
 * byte-count calls (negated errors).
 */

struct row {
	const char *id;
	enum state state;
	enum kind kind;
	long expect, alt;
	int be;
	const char *word, *desc;
	long (*fn)(void);
};

static int misuse_main(int argc, char **argv, const struct row *rows, size_t nrows);

/* A program of rows: ROWS(X) lists them (the X-macro above); this
 * defines one function per row, the table, and main(). */
#define MISUSE_DECL(id, st, kd, ex, alt, be, word, desc, ...) static long row_##id(void) __VA_ARGS__
#define MISUSE_ENTRY(id, st, kd, ex, alt, be, word, desc, ...) { #id, st, kd, ex, alt, be, word, desc, row_##id },
#define MISUSE_PROGRAM(ROWS)                                                                 \
	ROWS(MISUSE_DECL)                                                                    \
	static const struct row misuse_rows[] = { ROWS(MISUSE_ENTRY) };                      \
	int main(int argc, char **argv)                                                      \
	{                                                                                    \
		return misuse_main(argc, argv, misuse_rows, sizeof(misuse_rows) / sizeof(misuse_rows[0])); \
	}

static inline const char *code_name(long v, char *buf, size_t n)
{
	static const struct {
		long v;
		const char *name;
	} names[] = {
#define N(name, value, str) { value, "OPENDS_" #name },
		OPENDS_ERROR_LIST(N)
#undef N
	};
	long a = v < 0 ? -v : v;
	if (v == 0) {
		snprintf(buf, n, "0");
		return buf;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (names[i].v == a) {
			snprintf(buf, n, "%s%s", v < 0 ? "-" : "", names[i].name);
			return buf;
		}
	if (a < 5000 && v < 0) {
		const char *e = strerrorname_np((int)a);
		if (e) {
			snprintf(buf, n, "-%s", e);
			return buf;
		}
	}
	snprintf(buf, n, "%ld", v);
	return buf;
}

/* ---- per-row state ---- */

static inline void teardown(void)
{
	if (opends_driver_backend())
		opends_driver_close();
}

/* The data file holds pattern 1 (FILE_SIZE bytes) at the start of every
 * row: from the program's start (rows of state CONFIG read it too), and
 * again before each row of state OPEN or CLOSED. */
static inline void reset_file(void)
{
	uint8_t *p = malloc(FILE_SIZE);
	if (!p)
		R_FAIL("malloc");
	r_fill(p, FILE_SIZE, 1, 0);
	if (pwrite(fx.rw, p, FILE_SIZE, 0) != FILE_SIZE || ftruncate(fx.rw, FILE_SIZE))
		R_FAIL("resetting the data file: %s", strerror(errno));
	free(p);
}

static inline void setup_open(void)
{
	teardown();
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here: %s", r_backend_env(), opends_last_error_detail());
	R_TRY(e);
	R_TRY(opends_handle_register(&fx.h_rw, fx.rw));
	R_TRY(opends_handle_register(&fx.h_ro, fx.ro));
	R_TRY(opends_handle_register(&fx.h_wo, fx.wo));
	R_TRY(opends_buf_register(fx.reg, REG, 0));
	R_TRY(opends_stream_create(&fx.stream));
	R_TRY(opends_batch_setup(&fx.batch, 4));
	reset_file();
}

struct run {
	const struct row *row;
	long got;
	int be;
	char detail[512];
};

static void *row_thread(void *arg)
{
	struct run *r = arg;
	row_be = -12345;
	r->got = r->row->fn();
	r->be = row_be;
	snprintf(r->detail, sizeof(r->detail), "%s", opends_last_error_detail());
	return NULL;
}

static inline int run_row_here(const struct row *row)
{
	char b1[64], b2[64];
	switch (row->state) {
	case OPEN:
		setup_open();
		break;
	case CLOSED:
		setup_open();
		R_TRY(opends_driver_close());
		break;
	case CONFIG:
		teardown();
		break;
	}
	r_phase = row->id;
	r_watchdog(10); /* per row: a hang names its row */
	struct run r = { .row = row };
	pthread_t t;
	if (pthread_create(&t, NULL, row_thread, &r))
		R_FAIL("pthread_create");
	pthread_join(t, NULL);

	int bad = 0;
	if (r.got != row->expect && !(row->alt && r.got == row->alt)) {
		printf("FAIL %s: %s\n    expected %s, got %s\n", row->id, row->desc,
		       code_name(row->expect, b1, sizeof(b1)), code_name(r.got, b2, sizeof(b2)));
		bad = 1;
	} else if (row->be != NB && r.be != row->be) {
		printf("FAIL %s: %s\n    backend_err expected %d, got %d\n", row->id, row->desc, row->be, r.be);
		bad = 1;
	} else if (row->kind == ERR && !r.detail[0]) {
		printf("FAIL %s: %s\n    returned %s but opends_last_error_detail() is empty\n", row->id, row->desc,
		       code_name(r.got, b2, sizeof(b2)));
		bad = 1;
	} else if (row->kind == ERR && row->word[0] && !strstr(r.detail, row->word)) {
		printf("FAIL %s: %s\n    the detail does not name \"%s\": \"%s\"\n", row->id, row->desc, row->word,
		       r.detail);
		bad = 1;
	} else {
		printf("ok   %s %-36s %s%s%s\n", row->id, code_name(r.got, b2, sizeof(b2)), row->desc,
		       r.detail[0] && row->kind == ERR ? "\n         detail: " : "",
		       r.detail[0] && row->kind == ERR ? r.detail : "");
	}
	fflush(stdout);
	return bad;
}

/* Each row runs in a child process, so a row that hangs or crashes fails
 * alone (with its id named) and the others still run. */
static inline int run_row(const struct row *row)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		R_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		r_dir[0] = '\0'; /* the parent removes the directory */
		int bad = run_row_here(row);
		teardown();
		fflush(stdout);
		_exit(bad);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
		return 1;
	printf("FAIL %s: %s\n    the row %s (status 0x%x)\n", row->id, row->desc,
	       WIFSIGNALED(st) ? "crashed" : "hung or died", st);
	fflush(stdout);
	return 1;
}

static inline void markdown(const struct row *rows, size_t nrows)
{
	char b1[64], b2[64];
	printf("| ID | Misuse | Returns | Detail names |\n|---|---|---|---|\n");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		char exp[160];
		if (r->kind == VALUE)
			snprintf(exp, sizeof(exp), "%s (success)", code_name(r->expect, b1, sizeof(b1)));
		else
			snprintf(exp, sizeof(exp), "`%s`%s%s%s%s", code_name(r->expect, b1, sizeof(b1)),
				 r->alt ? " or `" : "", r->alt ? code_name(r->alt, b2, sizeof(b2)) : "",
				 r->alt ? "`" : "", r->be != NB ? ", backend_err = EBADF" : "");
		if (r->kind == LATER)
			snprintf(exp + strlen(exp), sizeof(exp) - strlen(exp), " (delivered later)");
		/* escape | in descriptions */
		printf("| %s | %s | %s | %s |\n", r->id, r->desc, exp,
		       r->kind == ERR ? (r->word[0] ? r->word : "(any sentence)") : "-");
	}
}

static inline void check_doc(const char *path, const struct row *rows, size_t nrows)
{
	FILE *f = fopen(path, "r");
	if (!f)
		R_FAIL("cannot open %s", path);
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	for (size_t i = 0; i < nrows; i++) {
		char key[16];
		snprintf(key, sizeof(key), "| %s |", rows[i].id);
		if (!strstr(text, key))
			R_FAIL("%s does not list row %s", path, rows[i].id);
	}
}

static inline void cleanup(void)
{
	r_rmdir_all();
}

static int misuse_main(int argc, char **argv, const struct row *rows, size_t nrows)
{
	const char *only = NULL, *doc = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--markdown")) {
			markdown(rows, nrows);
			return 0;
		} else if (!strcmp(argv[i], "--doc") && i + 1 < argc) {
			doc = argv[++i];
		} else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			only = argv[++i];
		} else {
			fprintf(stderr, "usage: %s [--markdown] [--doc FILE] [--only ID]\n", argv[0]);
			return 2;
		}
	}
	if (doc)
		check_doc(doc, rows, nrows);
	/* a backend built here that cannot run here (gds without a GPU): skip
	 * the whole table rather than fail every row that opens the driver */
	opends_error_t pe = opends_driver_open();
	if (pe.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here: %s", r_backend_env(), opends_last_error_detail());
	if (pe.err == OPENDS_SUCCESS)
		opends_driver_close();
	atexit(cleanup);
	r_watchdog_cleanup = cleanup;
	signal(SIGPIPE, SIG_IGN);

	const char *d = r_tmpdir("misuse");
	snprintf(fx.path, sizeof(fx.path), "%s/data", d);
	snprintf(fx.dir, sizeof(fx.dir), "%s", d);
	fx.rw = open(fx.path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	fx.ro = open(fx.path, O_RDONLY);
	fx.wo = open(fx.path, O_WRONLY);
	fx.dirfd = open(d, O_RDONLY | O_DIRECTORY);
	fx.devnull = open("/dev/null", O_RDWR);
	fx.opath = open(fx.path, O_PATH);
	if (fx.rw < 0 || fx.ro < 0 || fx.wo < 0 || fx.dirfd < 0 || fx.devnull < 0 || fx.opath < 0 || pipe(fx.pipefd) ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, fx.sock))
		R_FAIL("setting up the fds: %s", strerror(errno));
	if (posix_memalign((void **)&fx.mem, 4096, 1 << 20))
		R_FAIL("posix_memalign");
	memset(fx.mem, 0, 1 << 20);
	fx.reg = fx.mem + 256 * 1024;
	reset_file();

	printf("backend %s, accel %s, %zu rows\n", r_backend_env(), getenv("OPENDS_ACCEL") ? getenv("OPENDS_ACCEL") : "auto",
	       nrows);
	int bad = 0, ran = 0;
	for (size_t i = 0; i < nrows; i++) {
		if (only && strcmp(only, rows[i].id))
			continue;
		bad += run_row(&rows[i]);
		ran++;
	}
	teardown();
	printf("%d rows run, %d passed, %d failed\n", ran, ran - bad, bad);
	return bad ? 1 : 0;
}

#endif
