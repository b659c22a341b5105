/*
 * test_diffmt [SECONDS [THREADS]]: randomized differential test of this
 * round's fast paths under concurrency, against a per-thread model.
 *
 * THREADS (4) threads each own a 3 MiB region of one file and run random
 * operations on it for SECONDS (2), each checked byte for byte against the
 * region's model: synchronous writes of over 1 MiB at block-aligned offsets
 * (from device memory with OPENDS_WRITE_PIECE set, the caller writes them
 * in large pieces itself, several threads at once sharing the engine's
 * buffers), synchronous reads of any size and
 * alignment, sequential runs of 256 KiB reads (read-ahead, whose buffers
 * are kept for the next handle), groups of small async writes then reads
 * (futures' requests recycled across threads), one batch of reads (entries
 * finishing without the batch lock), batches of writes (checked by reads
 * right after), stream reads, and a stream write followed on the same
 * stream by a read of the same range (stream order). Besides its own fd
 * handle and the shared one, each thread has a source handle over the same
 * file (tests/sources/fake.h over an fd; completing inline, from the
 * source's threads or blocking, picked by the seed) that every kind of
 * operation goes through now and then. Every thread
 * deregisters and registers its own handle again now and then (read-ahead
 * buffers handed to the next handle while other threads read ahead), with
 * O_DIRECT or without; some operations go through the one shared handle.
 * A churn thread meanwhile registers, reads through and deregisters
 * handles of a second file (its bytes checked too). At the end the whole
 * file equals the models.
 *
 * The seed (OPENDS_TEST_SEED repeats it) picks OPENDS_WRITE_PIECE (off,
 * 64 KiB .. 4 MiB) and OPENDS_RA_KEEP; backend and memory kind from
 * OPENDS_BACKEND / OPENDS_ACCEL (hostdev: every buffer is simulated device
 * memory, so the staged paths run). Exit 0 pass, 1 fail, 77 skip.
 */
#include "rel.h"

#include <inttypes.h>

#include "../sources/fake.h" /* source handles over the file (use_fd) */

#include "opends/batch.h"

#define REGION ((size_t)3 << 20)
#define BIGMAX ((size_t)3 << 19) /* 1.5 MiB */
#define MAXT 16

static unsigned nthreads = 4;
static double seconds = 2;
static int file_fd;
static char path[PATH_MAX + 32], path2[PATH_MAX + 32];
static opends_handle_t shared_h;
static atomic_bool stop;
static atomic_ulong nchecked, nbig, nreg, nchurn;
static uint64_t seed0;

struct worker {
	unsigned id;
	uint64_t rng;
	uint8_t *model; /* what the region holds */
	uint8_t *buf;   /* targets and sources */
	int fd;
	opends_handle_t h;
	opends_stream_t st;
	opends_batch_t batch;
	struct fake *src; /* a source handle over the file */
	int sfd;
	opends_handle_t sh;
};

static uint64_t wr(struct worker *w, uint64_t n)
{
	return n ? r_rand(&w->rng) % n : 0;
}

static void reopen_own(struct worker *w)
{
	if (w->h) {
		R_TRY(opends_handle_deregister(w->h));
		close(w->fd);
	}
	bool direct = wr(w, 2);
	w->fd = open(path, O_RDWR | (direct ? O_DIRECT : 0));
	if (w->fd < 0)
		w->fd = open(path, O_RDWR);
	R_CHECK(w->fd >= 0, "open: %s", strerror(errno));
	R_TRY(opends_handle_register(&w->h, w->fd));
	atomic_fetch_add(&nreg, 1);
}

static opends_handle_t pick_h(struct worker *w)
{
	unsigned k = (unsigned)wr(w, 8);
	return k == 0 ? shared_h : k == 1 ? w->sh : w->h;
}

/* The thread's source handle over the file (fake.h, mode from the seed). */
static void open_source(struct worker *w)
{
	w->sfd = open(path, O_RDWR);
	R_CHECK(w->sfd >= 0, "open: %s", strerror(errno));
	w->src = fake_new((enum fake_mode)wr(w, 3), 0, NULL);
	w->src->fd = w->sfd;
	w->src->use_fd = true;
	opends_source_desc_t d = fake_desc(w->src);
	R_TRY(opends_handle_register_source(&w->sh, &d));
}

/* r bytes read into b from region offset ro: the model's */
static void check(struct worker *w, const char *what, ssize_t r, size_t want, const uint8_t *b, size_t ro)
{
	R_CHECK(r == (ssize_t)want, "thread %u %s of %zu at region+%zu returned %zd (%s); seed %" PRIu64, w->id, what,
		want, ro, r, r < 0 ? opends_err_name((int)r) : "short", seed0);
	for (size_t i = 0; i < want; i++)
		if (b[i] != w->model[ro + i])
			R_FAIL("thread %u %s of %zu at region+%zu: byte %zu is 0x%02x, the model's 0x%02x; seed %" PRIu64,
			       w->id, what, want, ro, i, b[i], w->model[ro + i], seed0);
	atomic_fetch_add(&nchecked, 1);
}

static void fill(struct worker *w, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)r_rand(&w->rng);
}

static void step(struct worker *w)
{
	off_t base = (off_t)(w->id * REGION);
	switch (wr(w, 10)) {
	case 0:
	case 1: { /* a large aligned synchronous write */
		size_t n = ((size_t)1 << 20) + 4096 * (1 + wr(w, (BIGMAX - (1u << 20)) / 4096));
		size_t ro = 4096 * wr(w, (REGION - n) / 4096 + 1);
		fill(w, w->buf, n);
		ssize_t r = opends_sync_write(pick_h(w), w->buf, n, base + (off_t)ro, 0);
		R_CHECK(r == (ssize_t)n, "thread %u big write of %zu at region+%zu: %zd; seed %" PRIu64, w->id, n, ro, r,
			seed0);
		memcpy(w->model + ro, w->buf, n);
		atomic_fetch_add(&nbig, 1);
		break;
	}
	case 2: { /* a synchronous read of any size and alignment */
		size_t n = 1 + wr(w, wr(w, 2) ? 65536 : BIGMAX);
		size_t ro = wr(w, REGION - n + 1), bo = wr(w, 4096);
		memset(w->buf, 0xee, n + bo);
		ssize_t r = opends_sync_read(pick_h(w), w->buf, n, base + (off_t)ro, (off_t)bo);
		check(w, "sync read", r, n, w->buf + bo, ro);
		break;
	}
	case 3: { /* a sequential run (read-ahead) */
		size_t ro = wr(w, REGION / 2);
		for (int k = 0; k < 6 && ro + 262144 <= REGION; k++, ro += 262144) {
			ssize_t r = opends_sync_read(w->h, w->buf, 262144, base + (off_t)ro, 0);
			check(w, "sequential read", r, 262144, w->buf, ro);
		}
		break;
	}
	case 4: { /* small async writes, then reads of them */
		enum { K = 8 };
		opends_async_future_t f[K];
		size_t ro[K], n[K];
		for (int k = 0; k < K; k++) { /* disjoint: slot k of the region */
			n[k] = 1 + wr(w, 16384);
			ro[k] = (size_t)k * (REGION / K) + wr(w, REGION / K - n[k]);
			fill(w, w->buf + (size_t)k * 32768, n[k]);
			R_TRY(opends_async_write(pick_h(w), w->buf, n[k], base + (off_t)ro[k], (off_t)k * 32768, &f[k]));
		}
		for (int k = K; k-- > 0;) {
			ssize_t r = opends_async_await(&f[k]);
			R_CHECK(r == (ssize_t)n[k], "thread %u async write: %zd; seed %" PRIu64, w->id, r, seed0);
			memcpy(w->model + ro[k], w->buf + (size_t)k * 32768, n[k]);
		}
		for (int k = 0; k < K; k++)
			R_TRY(opends_async_read(pick_h(w), w->buf, n[k], base + (off_t)ro[k], (off_t)k * 32768, &f[k]));
		for (int k = 0; k < K; k++)
			check(w, "async read", opends_async_await(&f[k]), n[k], w->buf + (size_t)k * 32768, ro[k]);
		break;
	}
	case 5: { /* a batch of reads */
		enum { K = 6 };
		opends_io_params_t p[K];
		size_t ro[K], n[K];
		for (int k = 0; k < K; k++) {
			n[k] = 1 + wr(w, 131072);
			ro[k] = wr(w, REGION - n[k] + 1);
			p[k] = t_batch_entry(pick_h(w), OPENDS_READ, w->buf + (size_t)k * 131072, n[k], base + (off_t)ro[k],
					     0, (void *)(uintptr_t)k);
		}
		R_TRY(opends_batch_submit(w->batch, K, p, 0));
		opends_io_events_t ev[K];
		unsigned got = 0;
		while (got < K) {
			unsigned nr = K - got;
			R_TRY(opends_batch_get_status(w->batch, 1, &nr, ev, NULL));
			for (unsigned i = 0; i < nr; i++) {
				int k = (int)(uintptr_t)ev[i].cookie;
				R_CHECK(ev[i].status == OPENDS_COMPLETE, "thread %u batch entry status 0x%x ret %zd", w->id,
					(unsigned)ev[i].status, ev[i].ret);
				check(w, "batch read", ev[i].ret, n[k], w->buf + (size_t)k * 131072, ro[k]);
			}
			got += nr;
		}
		break;
	}
	case 6: { /* stream reads, synchronized */
		enum { K = 3 };
		size_t sz[K], n[K], ro[K];
		off_t fo[K], bo[K];
		ssize_t res[K];
		for (int k = 0; k < K; k++) {
			n[k] = sz[k] = 1 + wr(w, 262144);
			ro[k] = wr(w, REGION - n[k] + 1);
			fo[k] = base + (off_t)ro[k];
			bo[k] = (off_t)k * 262144;
			res[k] = -1;
			R_TRY(opends_stream_read(pick_h(w), w->buf, &sz[k], &fo[k], &bo[k], &res[k], w->st));
		}
		R_TRY(opends_stream_synchronize(w->st));
		for (int k = 0; k < K; k++)
			check(w, "stream read", res[k], n[k], w->buf + (size_t)k * 262144, ro[k]);
		break;
	}
	case 7: { /* a batch of writes, each read back at once */
		enum { K = 4 };
		opends_io_params_t p[K];
		size_t ro[K], n[K];
		for (int k = 0; k < K; k++) { /* disjoint: slot k of the region and of buf */
			n[k] = 1 + wr(w, 65536);
			ro[k] = (size_t)k * (REGION / K) + wr(w, REGION / K - n[k]);
			fill(w, w->buf + (size_t)k * 65536, n[k]);
			p[k] = t_batch_entry(pick_h(w), OPENDS_WRITE, w->buf, n[k], base + (off_t)ro[k], (off_t)k * 65536,
					     (void *)(uintptr_t)k);
		}
		R_TRY(opends_batch_submit(w->batch, K, p, 0));
		opends_io_events_t ev[K];
		unsigned got = 0;
		while (got < K) {
			unsigned nr = K - got;
			R_TRY(opends_batch_get_status(w->batch, 1, &nr, ev, NULL));
			for (unsigned i = 0; i < nr; i++) {
				int k = (int)(uintptr_t)ev[i].cookie;
				R_CHECK(ev[i].status == OPENDS_COMPLETE && ev[i].ret == (ssize_t)n[k],
					"thread %u batch write status 0x%x ret %zd of %zu; seed %" PRIu64, w->id,
					(unsigned)ev[i].status, ev[i].ret, n[k], seed0);
				memcpy(w->model + ro[k], w->buf + (size_t)k * 65536, n[k]);
			}
			got += nr;
		}
		for (int k = 0; k < K; k++) {
			uint8_t *b = w->buf + (size_t)K * 65536;
			check(w, "read after a batch write", opends_sync_read(pick_h(w), b, n[k], base + (off_t)ro[k], 0),
			      n[k], b, ro[k]);
		}
		break;
	}
	case 8: { /* a stream write, then a read of it on the same stream */
		size_t n = 1 + wr(w, 262144), ro = wr(w, REGION - n + 1);
		size_t sw = n, sr = n;
		off_t fw = base + (off_t)ro, fr = fw, bw = 0, br = 262144 + (off_t)wr(w, 4096);
		ssize_t rw = -1, rr = -1;
		fill(w, w->buf, n);
		memset(w->buf + br, 0xee, n);
		R_TRY(opends_stream_write(pick_h(w), w->buf, &sw, &fw, &bw, &rw, w->st));
		R_TRY(opends_stream_read(pick_h(w), w->buf, &sr, &fr, &br, &rr, w->st));
		R_TRY(opends_stream_synchronize(w->st));
		R_CHECK(rw == (ssize_t)n, "thread %u stream write of %zu: %zd; seed %" PRIu64, w->id, n, rw, seed0);
		memcpy(w->model + ro, w->buf, n);
		check(w, "stream read after a stream write", rr, n, w->buf + br, ro);
		break;
	}
	default: /* its own handle again (read-ahead's kept buffers) */
		reopen_own(w);
		break;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	reopen_own(w);
	open_source(w);
	R_TRY(opends_stream_create(&w->st));
	R_TRY(opends_batch_setup(&w->batch, 8));
	while (!atomic_load(&stop))
		step(w);
	R_TRY(opends_batch_destroy(w->batch));
	R_TRY(opends_stream_destroy(w->st));
	R_TRY(opends_handle_deregister(w->h));
	close(w->fd);
	R_TRY(opends_handle_deregister(w->sh));
	R_CHECK(atomic_load(&w->src->released) == 1, "thread %u: the source was released %d times", w->id,
		atomic_load(&w->src->released));
	fake_free(w->src);
	close(w->sfd);
	return NULL;
}

/* handles of the second file (pattern 9): register, read, deregister */
static void *churn_main(void *arg)
{
	(void)arg;
	uint64_t rng = seed0 ^ 0x5555;
	uint8_t *b = malloc(1 << 20);
	while (!atomic_load(&stop)) {
		int fd = open(path2, O_RDONLY | (r_rand(&rng) % 2 ? O_DIRECT : 0));
		if (fd < 0)
			fd = open(path2, O_RDONLY);
		R_CHECK(fd >= 0, "open 2: %s", strerror(errno));
		opends_handle_t h;
		R_TRY(opends_handle_register(&h, fd));
		for (int k = 0; k < 4; k++) {
			size_t n = 1 + r_rand(&rng) % (1 << 19), off = r_rand(&rng) % ((1 << 20) - n + 1);
			ssize_t r = opends_sync_read(h, b, n, (off_t)off, 0);
			R_CHECK(r == (ssize_t)n && r_first_bad(b, n, 9, off) < 0, "churn read of %zu at %zu: %zd", n, off,
				r);
		}
		R_TRY(opends_handle_deregister(h));
		close(fd);
		atomic_fetch_add(&nchurn, 1);
	}
	free(b);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		seconds = atof(argv[1]);
	if (argc > 2)
		nthreads = (unsigned)atoi(argv[2]);
	R_CHECK(nthreads >= 1 && nthreads <= MAXT, "THREADS 1..%d", MAXT);
	r_watchdog(120);
	const char *se = getenv("OPENDS_TEST_SEED");
	seed0 = se && *se ? strtoull(se, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	uint64_t rng = seed0 + 1;
	static const char *const pieces[] = { NULL, "64k", "256k", "1m", "4m" };
	const char *piece = pieces[r_rand(&rng) % 5];
	bool keep = r_rand(&rng) % 4 != 0;
	if (piece)
		setenv("OPENDS_WRITE_PIECE", piece, 1);
	if (!keep)
		setenv("OPENDS_RA_KEEP", "0", 1);
	printf("diffmt: seed %" PRIu64 " (OPENDS_TEST_SEED repeats it), backend %s, accel %s, write piece %s, "
	       "read-ahead keep %s, %u threads, %.1f s\n",
	       seed0, r_backend_env(), getenv("OPENDS_ACCEL") ? getenv("OPENDS_ACCEL") : "auto",
	       piece ? piece : "off", keep ? "on" : "off", nthreads, seconds);

	atexit(r_rmdir_all);
	const char *dir = r_tmpdir("diffmt");
	snprintf(path, sizeof(path), "%s/f", dir);
	snprintf(path2, sizeof(path2), "%s/g", dir);
	file_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	int fd2 = open(path2, O_RDWR | O_CREAT | O_TRUNC, 0600);
	R_CHECK(file_fd >= 0 && fd2 >= 0, "open: %s", strerror(errno));
	struct worker w[MAXT];
	memset(w, 0, sizeof(w));
	for (unsigned i = 0; i < nthreads; i++) {
		w[i].id = i;
		w[i].rng = seed0 * 31 + i + 7;
		w[i].model = malloc(REGION);
		w[i].buf = aligned_alloc(4096, BIGMAX + 8192);
		R_CHECK(w[i].model && w[i].buf, "out of memory");
		fill(&w[i], w[i].model, REGION);
		R_CHECK(pwrite(file_fd, w[i].model, REGION, (off_t)(i * REGION)) == (ssize_t)REGION, "pwrite");
	}
	uint8_t *g = malloc(1 << 20);
	r_fill(g, 1 << 20, 9, 0);
	R_CHECK(pwrite(fd2, g, 1 << 20, 0) == 1 << 20, "pwrite 2");
	close(fd2);

	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here", r_backend_env());
	R_TRY(e);
	R_TRY(opends_handle_register(&shared_h, file_fd));
	pthread_t t[MAXT], c;
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, worker_main, &w[i]);
	pthread_create(&c, NULL, churn_main, NULL);
	r_sleep_ms((long)(seconds * 1000));
	atomic_store(&stop, true);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	pthread_join(c, NULL);
	R_TRY(opends_handle_deregister(shared_h));
	R_TRY(opends_driver_close());

	r_phase = "the whole file";
	uint8_t *chk = malloc(REGION);
	for (unsigned i = 0; i < nthreads; i++) {
		R_CHECK(pread(file_fd, chk, REGION, (off_t)(i * REGION)) == (ssize_t)REGION, "pread");
		for (size_t k = 0; k < REGION; k++)
			if (chk[k] != w[i].model[k])
				R_FAIL("region %u byte %zu is 0x%02x, the model's 0x%02x; seed %" PRIu64, i, k, chk[k],
				       w[i].model[k], seed0);
		free(w[i].model);
		free(w[i].buf);
	}
	free(chk);
	free(g);
	close(file_fd);
	/* a run that checked nothing (threads starved on a loaded machine)
	 * proves nothing: fail rather than pass empty */
	R_CHECK(atomic_load(&nchecked) > 0, "no read was checked in the run; seed %" PRIu64, seed0);
	printf("diffmt: %lu reads checked, %lu large writes, %lu registrations of the threads' own handles, %lu "
	       "churn handles; the file equals the models\n",
	       atomic_load(&nchecked), atomic_load(&nbig), atomic_load(&nreg), atomic_load(&nchurn));
	return 0;
}
