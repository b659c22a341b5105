/*
 * test_threads [--backend=NAME]
 *
 * Everything but open/close is thread-safe. 6 threads share one read
 * handle (O_DIRECT, so the bounce/alignment paths run concurrently) and a
 * second handle for writes; each thread mixes sync reads (verified byte-
 * exact), async reads with several in flight, and sync/async writes to its
 * own disjoint, unaligned region of the second file. The write file is
 * verified at the end with plain pread.
 */
#include "common.h"

#include <pthread.h>

#define NT 6
#define ITERS 600
#define REGION (24 * 1024 + 13) /* per thread, unaligned so regions share blocks */
#define WBASE 1001

static uint8_t *roracle;
static const size_t RF = T_HASH_SIZE;
static opends_handle_t rfh, wfh;
static uint8_t final_region[NT][REGION];

struct ctx {
	int t;
	char err[256];
};

#define TFAIL(c, ...)                                                              \
	do {                                                                       \
		snprintf((c)->err, sizeof (c)->err, __VA_ARGS__);                  \
		return NULL;                                                       \
	} while (0)

static void *worker(void *arg)
{
	struct ctx *c = arg;
	const int t = c->t;
	uint8_t *buf = t_xmalloc(70000);
	enum { AW = 8 };
	opends_async_future_t fut[AW];
	uint8_t *abuf[AW];
	uint64_t aoff[AW];
	size_t asz[AW];
	for (int i = 0; i < AW; i++)
		abuf[i] = t_xmalloc(9000);
	uint8_t *mine = final_region[t]; /* what this thread's region should hold */
	uint8_t *wb = t_xmalloc(REGION);
	uint64_t rng = 0x1234567ull * (uint64_t)(t + 1);

	for (int it = 0; it < ITERS; it++) {
		uint64_t x = t_splitmix64(rng++);
		/* a sync read anywhere, any size up to 64 KiB */
		uint64_t off = x % (RF + 100);
		size_t size = 1 + (size_t)(x >> 32) % 65536;
		size_t boff = (size_t)(x >> 56) % 5;
		size_t want = t_expect_read(RF, off, size);
		ssize_t r = opends_sync_read(rfh, buf, size, (off_t)off, (off_t)boff);
		if (r != (ssize_t)want)
			TFAIL(c, "thread %d it %d: sync_read(size %zu off %llu) = %zd, expected %zu", t, it, size,
			      (unsigned long long)off, r, want);
		if (want && memcmp(buf + boff, roracle + off, want))
			TFAIL(c, "thread %d it %d: sync_read(size %zu off %llu) data mismatch", t, it, size,
			      (unsigned long long)off);

		/* async reads: keep AW in flight, reap the oldest */
		int s = it % AW;
		if (it >= AW) {
			size_t aw = t_expect_read(RF, aoff[s], asz[s]);
			r = opends_async_await(&fut[s]);
			if (r != (ssize_t)aw)
				TFAIL(c, "thread %d: async read = %zd, expected %zu", t, r, aw);
			if (memcmp(abuf[s], roracle + aoff[s], aw))
				TFAIL(c, "thread %d: async read data mismatch", t);
		}
		aoff[s] = (x >> 7) % RF;
		asz[s] = 1 + (size_t)(x >> 20) % 9000;
		opends_error_t e = opends_async_read(rfh, abuf[s], asz[s], (off_t)aoff[s], 0, &fut[s]);
		if (e.err)
			TFAIL(c, "thread %d: async_read submit: %s", t, t_errname(e.err));

		/* a write into this thread's region: random sub-range */
		if (it % 3 == 0) {
			size_t wo = (size_t)(x >> 11) % REGION;
			size_t wn = 1 + (size_t)(x >> 29) % (REGION - wo);
			t_fill_seed(wb, x, wn);
			uint64_t foff = WBASE + (uint64_t)t * REGION + wo;
			if (it % 2) {
				r = opends_sync_write(wfh, wb, wn, (off_t)foff, 0);
			} else {
				opends_async_future_t wf;
				e = opends_async_write(wfh, wb, wn, (off_t)foff, 0, &wf);
				if (e.err)
					TFAIL(c, "thread %d: async_write submit: %s", t, t_errname(e.err));
				r = opends_async_await(&wf);
			}
			if (r != (ssize_t)wn)
				TFAIL(c, "thread %d: write(size %zu off %llu) = %zd", t, wn, (unsigned long long)foff, r);
			memcpy(mine + wo, wb, wn);
		}
	}
	for (int i = 0; i < AW && i < ITERS; i++) {
		size_t aw = t_expect_read(RF, aoff[i], asz[i]);
		ssize_t r = opends_async_await(&fut[i]);
		if (r != (ssize_t)aw || memcmp(abuf[i], roracle + aoff[i], aw))
			TFAIL(c, "thread %d: final async read %d = %zd or data mismatch", t, i, r);
	}
	for (int i = 0; i < AW; i++)
		free(abuf[i]);
	free(buf);
	free(wb);
	return NULL;
}

/* Registration churn while the workers do I/O: handles and buffers come
 * and go in the registries the I/O path looks things up in. */
static const char *churn_path;
static _Atomic int churn_stop;

static void *churn(void *arg)
{
	struct ctx *c = arg;
	uint8_t *mem = t_xmalloc(64 * 1024);
	int rounds = 0;
	while ((!churn_stop || rounds < 20) && rounds < 5000) {
		int fd = open(churn_path, O_RDONLY);
		if (fd < 0)
			TFAIL(c, "churn: open: %s", strerror(errno));
		opends_handle_t h;
		opends_error_t e = opends_handle_register(&h, fd);
		if (e.err)
			TFAIL(c, "churn: handle_register: %s", t_errname(e.err));
		size_t k = (size_t)(rounds % 8) * 4096;
		e = opends_buf_register(mem + k, 4096, 0);
		if (e.err)
			TFAIL(c, "churn: buf_register: %s", t_errname(e.err));
		off_t ro = (off_t)(rounds % 1000) * 100;
		ssize_t r = opends_sync_read(h, mem + k, 4096, ro, 0);
		if (r != 4096 || memcmp(mem + k, roracle + ro, 4096))
			TFAIL(c, "churn: read(4096 at %lld) = %zd or data mismatch", (long long)ro, r);
		e = opends_buf_deregister(mem + k);
		if (e.err)
			TFAIL(c, "churn: buf_deregister: %s", t_errname(e.err));
		e = opends_handle_deregister(h);
		if (e.err)
			TFAIL(c, "churn: handle_deregister: %s", t_errname(e.err));
		close(fd);
		rounds++;
	}
	free(mem);
	return NULL;
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(280);
	char rpath[PATH_MAX], wpath[PATH_MAX];
	t_path(rpath, sizeof rpath, T_HASH_NAME);
	t_path(wpath, sizeof wpath, "threads_w.bin");
	t_write_pattern_file(rpath, RF, hashpat);
	const size_t WS = WBASE + (size_t)NT * REGION + 999;
	t_write_pattern_file(wpath, WS, pat16);
	roracle = t_oracle(RF, hashpat);

	t_driver_open();
	printf("backend %s\n", opends_driver_backend());
	for (int d = 1; d >= 0; d--) {
		t_phase = d ? "threads, O_DIRECT" : "threads, buffered";
		int rfd = t_open(rpath, O_RDONLY, d), wfd = t_open(wpath, O_RDWR, d);
		if (rfd == -2 || wfd == -2)
			continue;
		rfh = t_register(rfd);
		wfh = t_register(wfd);
		/* each thread's region starts as the file's current content */
		int chk = t_open(wpath, O_RDONLY, false);
		for (int t = 0; t < NT; t++)
			CHECK(t_pread_all(chk, final_region[t], REGION, WBASE + (off_t)t * REGION) == REGION);
		uint8_t *before = t_xmalloc(WS);
		CHECK(t_pread_all(chk, before, WS, 0) == WS);

		pthread_t th[NT + 1];
		struct ctx c[NT + 1];
		churn_path = rpath;
		churn_stop = 0;
		for (int t = 0; t <= NT; t++) {
			c[t].t = t;
			c[t].err[0] = 0;
			CHECK(pthread_create(&th[t], NULL, t < NT ? worker : churn, &c[t]) == 0);
		}
		for (int t = 0; t < NT; t++)
			CHECK(pthread_join(th[t], NULL) == 0);
		churn_stop = 1;
		CHECK(pthread_join(th[NT], NULL) == 0);
		for (int t = 0; t <= NT; t++)
			CHECKF(!c[t].err[0], "%s", c[t].err);

		/* outside the regions: unchanged; inside: each thread's last
		 * writes */
		uint8_t *after = t_xmalloc(WS);
		CHECKF((size_t)t_file_size(chk) == WS, "write file size changed");
		CHECK(t_pread_all(chk, after, WS, 0) == WS);
		VERIFY(after, before, WBASE, "bytes before the thread regions");
		for (int t = 0; t < NT; t++)
			VERIFY(after + WBASE + (size_t)t * REGION, final_region[t], REGION, "thread %d's region%s", t,
			       d ? " (O_DIRECT)" : "");
		size_t end = WBASE + (size_t)NT * REGION;
		VERIFY(after + end, before + end, WS - end, "bytes after the thread regions");
		free(before);
		free(after);

		OK(opends_handle_deregister(rfh));
		OK(opends_handle_deregister(wfh));
		close(rfd);
		close(wfd);
		close(chk);
		printf("threads%s: OK\n", d ? " (O_DIRECT)" : "");
	}
	OK(opends_driver_close());
	free(roracle);
	return 0;
}
