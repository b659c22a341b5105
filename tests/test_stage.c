/*
 * The staging engine (src/core/stage.h) with movers other than io_uring's:
 * the two example movers of its contract.
 *   sync    reads and writes with pread/pwrite inside read/write, on the
 *           worker, and reports there (a synchronous mover)
 *   posted  hands each chunk to a thread of its own, which moves it and
 *           reports with ods_stage_post (how a source whose library
 *           completes on its own threads, e.g. librados, plugs in)
 * Each runs random reads and writes, host memory (accelerator "host") and
 * simulated device memory ("hostdev": the engine's slots and copy stages),
 * checked byte-exact against a model of the file. Then (sync) failures the
 * mover injects on its worker: an OPENDS_* code with its sentence reaches
 * the request as io->why (kept once), an errno and a code without a
 * sentence leave none (not an earlier failure's).
 * Usage: test_stage sync|posted host|hostdev
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stage_test.h"

#define FILE_SIZE (3u << 20)

static int g_fd;

/* ---- mover 1: synchronous -------------------------------------------------- */

static int sm_req_init(struct ods_stage_req *r)
{
	struct stat st;
	if (fstat(r->io->fh->fd, &st))
		return 0;
	r->fsize = st.st_size;
	if (r->io->opcode == OPENDS_READ && r->end > r->fsize)
		r->end = r->io->off < r->fsize ? r->fsize : r->io->off;
	return r->io->opcode == OPENDS_READ && r->end == r->io->off;
}

/* read into the slot when the destination is device memory, else straight
 * into the caller's memory; returns bytes or -errno */
static long move_read(struct ods_stage_unit *u)
{
	struct ods_io *io = u->r->io;
	u->io_off = u->c0;
	u->io_len = (size_t)(u->c1 - u->c0);
	u->slot = io->mem == ODS_MEM_DEVICE;
	u->io_buf = u->slot ? ods_stage_slot(u) : io->buf + (u->c0 - io->off);
	if (!u->io_buf)
		return -ENOMEM;
	ssize_t n = ods_pread_full(io->fh->fd, u->io_buf, u->io_len, u->io_off);
	if (n >= 0)
		u->io_done = (size_t)n;
	return n;
}

static long move_write(struct ods_stage_unit *u)
{
	ssize_t n = ods_pwrite_full(u->r->io->fh->fd, u->io_buf, u->io_len, u->io_off);
	return n < 0 ? n : 0;
}

/* injected into the chunk holding this offset (sm_read, on the worker):
 * the code, with the sentence when g_fail_say */
static off_t g_fail_at = -1;
static long g_fail_res;
static bool g_fail_say;

static void sm_read(struct ods_stage_unit *u)
{
	if (g_fail_at >= u->c0 && g_fail_at < u->c1) {
		if (g_fail_say)
			ods_fail((int)-g_fail_res, "test mover: injected failure at %lld", (long long)g_fail_at);
		ods_stage_end(u, g_fail_res);
		return;
	}
	long n = move_read(u);
	if (n < 0)
		ods_stage_end(u, n);
	else
		ods_stage_read_done(u);
}

static void sm_write(struct ods_stage_unit *u)
{
	ods_stage_end(u, move_write(u));
}

static const struct ods_mover sync_mover = {
	.name = "sync",
	.worker_open = stage_test_worker_open,
	.worker_close = stage_test_worker_close,
	.req_init = sm_req_init,
	.read = sm_read,
	.write = sm_write,
	.rw_whole = ods_posix_rw,
};

/* ---- mover 2: completes on a thread of its own ------------------------------- */

static pthread_mutex_t pm_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pm_cv = PTHREAD_COND_INITIALIZER;
static struct ods_stage_unit *pm_q[4096];
static unsigned pm_n;
static bool pm_stop;
static atomic_uint pm_posted;

static void *pm_thread(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&pm_lock);
		while (!pm_n && !pm_stop)
			pthread_cond_wait(&pm_cv, &pm_lock);
		if (!pm_n) {
			pthread_mutex_unlock(&pm_lock);
			return NULL;
		}
		/* take a random one: completions come back out of order */
		unsigned i = (unsigned)rand() % pm_n;
		struct ods_stage_unit *u = pm_q[i];
		pm_q[i] = pm_q[--pm_n];
		pthread_mutex_unlock(&pm_lock);
		usleep((unsigned)rand() % 50);
		long res = u->r->io->opcode == OPENDS_READ ? move_read(u) : move_write(u);
		atomic_fetch_add(&pm_posted, 1);
		ods_stage_post(u, res);
	}
}

static void pm_hand_over(struct ods_stage_unit *u)
{
	pthread_mutex_lock(&pm_lock);
	if (pm_n == sizeof(pm_q) / sizeof(pm_q[0]))
		FAIL("more units in flight than threads x depth");
	pm_q[pm_n++] = u;
	pthread_cond_signal(&pm_cv);
	pthread_mutex_unlock(&pm_lock);
}

static void pm_complete(struct ods_stage_unit *u, long res)
{
	if (res < 0 || u->r->io->opcode == OPENDS_WRITE)
		ods_stage_end(u, res < 0 ? res : 0);
	else
		ods_stage_read_done(u);
}

static const struct ods_mover posted_mover = {
	.name = "posted",
	.worker_open = stage_test_worker_open,
	.worker_close = stage_test_worker_close,
	.req_init = sm_req_init,
	.read = pm_hand_over,
	.write = pm_hand_over,
	.rw_whole = ods_posix_rw,
	.complete = pm_complete,
};

/* ---- the run ------------------------------------------------------------------ */

struct waiter {
	atomic_uint done;
};

static void on_done(struct ods_io *io)
{
	struct waiter *w = io->owner;
	atomic_store(&w->done, 1);
	ods_futex_wake_all(&w->done);
}

static const char *g_why; /* io.why of run_one's last request */

static ssize_t run_one(struct ods_stage *s, struct ods_handle *h, int op, char *buf, size_t n, off_t off, int mem)
{
	struct ods_io io;
	struct waiter w;
	memset(&io, 0, sizeof(io));
	atomic_init(&w.done, 0);
	io.fh = h;
	io.buf = buf;
	io.size = n;
	io.off = off;
	io.opcode = (uint8_t)op;
	io.mem = (uint8_t)mem;
	io.done = on_done;
	io.owner = &w;
	atomic_fetch_add(&ods_inflight, 1);
	ods_stage_submit(s, &io, true);
	while (!atomic_load(&w.done))
		ods_futex_wait(&w.done, 0);
	g_why = io.why;
	return io.result;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		FAIL("usage: test_stage sync|posted host|hostdev");
	bool posted = !strcmp(argv[1], "posted");
	bool dev = !strcmp(argv[2], "hostdev");
	const struct ods_accel *accel = dev ? &ods_accel_hostdev : &ods_accel_host;
	srand(42);

	char path[] = "/tmp/opends-stage-XXXXXX";
	if (getenv("TMPDIR")) {
		static char p2[4096];
		snprintf(p2, sizeof(p2), "%s/opends-stage-XXXXXX", getenv("TMPDIR"));
		g_fd = mkstemp(p2);
		unlink(p2);
	} else {
		g_fd = mkstemp(path);
		unlink(path);
	}
	if (g_fd < 0)
		FAIL("mkstemp");
	char *model = malloc(FILE_SIZE + (1u << 20)), *buf = malloc(FILE_SIZE + (1u << 20));
	for (size_t i = 0; i < FILE_SIZE; i++)
		model[i] = (char)rand();
	if (ods_pwrite_full(g_fd, model, FILE_SIZE, 0) != FILE_SIZE)
		FAIL("prepare the file");
	size_t fsize = FILE_SIZE;

	struct ods_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	struct ods_handle h;
	memset(&h, 0, sizeof(h));
	h.fd = g_fd;
	h.twin_fd = -1;
	pthread_mutex_init(&h.twin_lock, NULL);

	pthread_t pt;
	if (posted && pthread_create(&pt, NULL, pm_thread, NULL))
		FAIL("pthread_create");
	/* small chunks and depth: many units per request, slots reused */
	struct ods_stage_params p = { .threads = 3, .depth = 4, .chunk = 64u << 10, .spin_us = 0 };
	struct ods_stage *s;
	if (ods_stage_open(&s, &p, posted ? &posted_mover : &sync_mover, &cfg, accel))
		FAIL("ods_stage_open: %s", opends_last_error_detail());

	for (int it = 0; it < 400; it++) {
		size_t n = 1 + (size_t)rand() % (rand() % 4 ? 300000 : 8192);
		off_t off = (off_t)((size_t)rand() % (fsize + 4096));
		int mem = dev ? ODS_MEM_DEVICE : ODS_MEM_HOST;
		if (rand() % 3) {
			memset(buf, 0x5a, n + 64);
			ssize_t r = run_one(s, &h, OPENDS_READ, buf, n, off, mem);
			size_t want = (size_t)off >= fsize ? 0 : fsize - (size_t)off < n ? fsize - (size_t)off : n;
			if (r != (ssize_t)want)
				FAIL("read %zu at %lld: %zd, want %zu", n, (long long)off, r, want);
			if (memcmp(buf, model + off, want))
				FAIL("read %zu at %lld: bytes differ", n, (long long)off);
			for (size_t i = want; i < n + 64; i++)
				if (buf[i] != 0x5a)
					FAIL("read %zu at %lld wrote byte %zu past the count", n, (long long)off, i);
		} else {
			if ((size_t)off >= FILE_SIZE)
				continue;
			if ((size_t)off + n > FILE_SIZE)
				n = FILE_SIZE - (size_t)off;
			if (!n)
				continue;
			for (size_t i = 0; i < n; i++)
				buf[i] = (char)rand();
			ssize_t r = run_one(s, &h, OPENDS_WRITE, buf, n, off, mem);
			if (r != (ssize_t)n)
				FAIL("write %zu at %lld: %zd", n, (long long)off, r);
			memcpy(model + off, buf, n);
			if ((size_t)off + n > fsize)
				fsize = (size_t)off + n;
		}
	}
	if (!posted) {
		int mem = dev ? ODS_MEM_DEVICE : ODS_MEM_HOST;
		const char *want = "test mover: injected failure at 200000";
		g_fail_at = 200000;
		g_fail_res = -OPENDS_DEVICE_DRIVER_ERROR;
		g_fail_say = true;
		ssize_t r = run_one(s, &h, OPENDS_READ, buf, 300000, 0, mem);
		if (r != -OPENDS_DEVICE_DRIVER_ERROR || !g_why || strcmp(g_why, want))
			FAIL("injected code: %zd, why \"%s\"", r, g_why ? g_why : "(none)");
		const char *first = g_why;
		r = run_one(s, &h, OPENDS_READ, buf, 300000, 100000, mem);
		if (r != -OPENDS_DEVICE_DRIVER_ERROR || g_why != first)
			FAIL("the same failure again: %zd, why %p, the first %p", r, (const void *)g_why, (const void *)first);
		g_fail_res = -EIO;
		g_fail_say = true;
		r = run_one(s, &h, OPENDS_READ, buf, 300000, 0, mem);
		if (r != -EIO || g_why)
			FAIL("an errno: %zd, why \"%s\"", r, g_why ? g_why : "(none)");
		g_fail_res = -OPENDS_DEVICE_DRIVER_ERROR;
		g_fail_say = false; /* the code alone: not the sentence of a failure before */
		r = run_one(s, &h, OPENDS_READ, buf, 300000, 0, mem);
		if (r != -OPENDS_DEVICE_DRIVER_ERROR || g_why)
			FAIL("a code without a sentence: %zd, why \"%s\"", r, g_why ? g_why : "(none)");
		g_fail_at = -1;
		r = run_one(s, &h, OPENDS_READ, buf, 300000, 0, mem);
		if (r != 300000 || memcmp(buf, model, 300000) || g_why)
			FAIL("after the failures: %zd", r);
	}
	ods_stage_close(s);
	if (posted) {
		pthread_mutex_lock(&pm_lock);
		pm_stop = true;
		pthread_cond_broadcast(&pm_cv);
		pthread_mutex_unlock(&pm_lock);
		pthread_join(pt, NULL);
		if (!atomic_load(&pm_posted))
			FAIL("no completion came through ods_stage_post");
	}
	char *back = malloc(FILE_SIZE);
	if (ods_pread_full(g_fd, back, FILE_SIZE, 0) != (ssize_t)fsize || memcmp(back, model, fsize))
		FAIL("the file differs from the model");
	printf("stage %s %s: 400 operations byte-exact\n", argv[1], argv[2]);
	free(back);
	free(model);
	free(buf);
	close(g_fd);
	return 0;
}
