/*
 * test_async [--backend=NAME]
 *
 * Per-operation futures: opends_async_read/_write, _await, _poll.
 *  - a window of 64 reads in flight over varied sizes and offsets, awaited
 *    in reverse order (futures complete in any order), each verified;
 *  - a completed future stays completed: await again gives the same
 *    result, poll gives 1;
 *  - poll never blocks, and a future on the stack works;
 *  - argument errors come from submit, I/O errors from await;
 *  - async writes, checked with plain pread;
 *  - 10,000 small reads with up to 1000 outstanding, also with one worker
 *    and queue depth 1, so submission must apply back-pressure instead of
 *    failing; and with OPENDS_AB_ASYNC_NOWAIT=1, which queues them all;
 *  - OPENDS_CALLER_STATS=1 prints, at driver close, one line counting
 *    each kind of call the caller made (exact counts).
 */
#include "common.h"

#include <pthread.h>

static uint8_t *oracle;
static const size_t F = T_HASH_SIZE;
static opends_handle_t fh;

struct op {
	opends_async_future_t fut;
	uint8_t *buf;
	uint64_t off;
	size_t size, boff, cap;
};

static void window(opends_handle_t h, bool direct)
{
	t_phase = "window of 64, reverse await";
	enum { N = 64 };
	static struct op ops[N];
	for (int i = 0; i < N; i++) {
		struct op *o = &ops[i];
		/* sizes from 1 byte to ~200 KiB, offsets all over the file,
		 * some crossing and some past EOF */
		static const size_t sz[] = { 1, 7, 512, 4095, 4096, 4097, 12345, 65536, 200000 };
		o->size = sz[i % 9];
		o->off = (uint64_t)(i * 16411) % F;
		if (i % 13 == 5)
			o->off = F - 100;
		if (i % 17 == 3)
			o->off = F + 4096;
		o->boff = (size_t)(i % 5);
		o->cap = o->boff + o->size + 32;
		o->buf = t_xmalloc(o->cap);
		OK(opends_async_read(h, o->buf, o->size, (off_t)o->off, (off_t)o->boff, &o->fut));
	}
	for (int i = N - 1; i >= 0; i--) {
		struct op *o = &ops[i];
		size_t want = t_expect_read(F, o->off, o->size);
		ssize_t r = opends_async_await(&o->fut);
		CHECKF(r == (ssize_t)want, "op %d (size %zu off %llu%s): await %zd, expected %zu", i, o->size,
		       (unsigned long long)o->off, direct ? " O_DIRECT" : "", r, want);
		VERIFY(o->buf + o->boff, oracle + (want ? o->off : 0), want, "op %d data", i);
		VERIFY_CANARY(o->buf, o->boff, "op %d: before target", i);
		VERIFY_CANARY(o->buf + o->boff + want, o->cap - o->boff - want, "op %d: after returned range", i);
		/* completed stays completed */
		CHECKF(opends_async_poll(&o->fut) == 1, "op %d: poll after await != 1", i);
		EXPECT_SSZ_ND(opends_async_await(&o->fut), (ssize_t)want);
		EXPECT_SSZ_ND(opends_async_await(&o->fut), (ssize_t)want);
	}
	for (int i = 0; i < N; i++)
		free(ops[i].buf);
}

/* A future on the stack, polled to completion (never awaited). */
static void stack_future_poll(opends_handle_t h)
{
	t_phase = "stack future, poll";
	opends_async_future_t f;
	memset(&f, 0x5a, sizeof f); /* garbage before submit is fine */
	const size_t n = 3 * T_MiB < F ? 3 * T_MiB : F - 1;
	uint8_t *buf = t_xmalloc(n);
	OK(opends_async_read(h, buf, n, 1, 0, &f));
	double t0 = t_now();
	unsigned polls = 0;
	int p;
	double worst = 0;
	while ((p = opends_async_poll(&f)) == 0) {
		double d = t_now() - t0;
		CHECKF(d < 60, "poll still 0 after 60 s");
		polls++;
		double a = t_now();
		(void)opends_async_poll(&f);
		double b = t_now() - a;
		if (b > worst)
			worst = b;
	}
	CHECKF(p == 1, "poll returned %d", p);
	/* "never blocks": no single poll call takes anything like an I/O's time
	 * (generous for sanitizers and loaded CI machines) */
	CHECKF(worst < 2.0, "a poll call took %.3f s", worst);
	EXPECT_SSZ_ND(opends_async_await(&f), (ssize_t)n);
	VERIFY(buf, oracle + 1, n, "stack future data");
	CHECK(opends_async_poll(&f) == 1);
	printf("stack future: %u polls returned 0 before completion\n", polls);
	free(buf);
}

static void errors(const char *path, bool direct)
{
	t_phase = "async errors";
	uint8_t b[4096];
	opends_async_future_t f;
	EXPECT_ERR(opends_async_read(fh, b, sizeof b, 0, 0, NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_write(fh, b, sizeof b, 0, 0, NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_read(fh, NULL, sizeof b, 0, 0, &f), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_read(fh, b, sizeof b, -1, 0, &f), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_read(fh, b, sizeof b, 0, -1, &f), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_async_read(fh, b, (size_t)SSIZE_MAX + 1, 0, 0, &f), OPENDS_INVALID_VALUE);

	/* a never-submitted future */
	opends_async_future_t z;
	memset(&z, 0, sizeof z);
	EXPECT_SSZ(opends_async_await(&z), -OPENDS_INVALID_VALUE);
	CHECK(opends_async_poll(&z) == -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_async_await(NULL), -OPENDS_INVALID_VALUE);
	CHECK(opends_async_poll(NULL) == -OPENDS_INVALID_VALUE);

	/* a handle that is no longer registered: refused at submit */
	int fd2 = t_open(path, O_RDONLY, direct);
	opends_handle_t stale = t_register(fd2);
	OK(opends_handle_deregister(stale));
	EXPECT_ERR(opends_async_read(stale, b, sizeof b, 0, 0, &f), OPENDS_HANDLE_NOT_REGISTERED);
	EXPECT_ERR(opends_async_write(stale, b, sizeof b, 0, 0, &f), OPENDS_HANDLE_NOT_REGISTERED);

	/* writing through a read-only fd is an I/O error: submit succeeds,
	 * await says -EBADF */
	opends_handle_t ro = t_register(fd2);
	OK(opends_async_write(ro, b, sizeof b, 0, 0, &f));
	EXPECT_SSZ_ND(opends_async_await(&f), -EBADF);
	CHECK(opends_async_poll(&f) == 1);
	EXPECT_SSZ_ND(opends_async_await(&f), -EBADF);
	OK(opends_handle_deregister(ro));
	close(fd2);
	/* and the file is unchanged */
	int chk = t_open(path, O_RDONLY, false);
	CHECK(t_pread_all(chk, b, sizeof b, 0) == sizeof b);
	VERIFY(b, oracle, sizeof b, "file after refused async write");
	close(chk);
}

static void writes(bool direct)
{
	t_phase = "async writes";
	char path[PATH_MAX];
	t_path(path, sizeof path, "async_w.bin");
	const size_t W = 512 * T_KiB + 99;
	t_write_pattern_file(path, W, pat16);
	uint8_t *exp = t_oracle(W, pat16);
	int fd = t_open(path, O_RDWR, direct);
	opends_handle_t h = t_register(fd);
	enum { N = 48 };
	static opends_async_future_t f[N];
	static uint8_t *bufs[N];
	/* disjoint unaligned ranges: op i writes [i*10000+i, +size) */
	for (int i = 0; i < N; i++) {
		size_t size = 1 + (size_t)(i * 977) % 9000;
		uint64_t off = (uint64_t)i * 10000 + (uint64_t)i;
		bufs[i] = t_xmalloc(size + 3);
		t_fill_seed(bufs[i] + 3, 1000 + (uint64_t)i, size);
		memcpy(exp + off, bufs[i] + 3, size);
		OK(opends_async_write(h, bufs[i], size, (off_t)off, 3, &f[i]));
	}
	/* one more extending the file, unaligned */
	uint8_t tail[5000];
	t_fill_seed(tail, 77, sizeof tail);
	opends_async_future_t ft;
	OK(opends_async_write(h, tail, sizeof tail, (off_t)(W - 1000), 0, &ft));
	for (int i = 0; i < N; i++) {
		size_t size = 1 + (size_t)(i * 977) % 9000;
		EXPECT_SSZ_ND(opends_async_await(&f[i]), (ssize_t)size);
		free(bufs[i]);
	}
	EXPECT_SSZ_ND(opends_async_await(&ft), (ssize_t)sizeof tail);
	OK(opends_handle_deregister(h));
	close(fd);

	size_t nsize = W - 1000 + sizeof tail;
	exp = realloc(exp, nsize);
	CHECK(exp);
	memcpy(exp + W - 1000, tail, sizeof tail);
	int chk = t_open(path, O_RDONLY, false);
	t_check_file_fd(chk, exp, nsize, direct ? "file after async writes (O_DIRECT)" : "file after async writes");
	close(chk);
	free(exp);
	unlink(path);
}

/* More operations than any queue holds: submission waits for room. */
static void backpressure(opends_handle_t h, unsigned total, unsigned outstanding)
{
	t_phase = "back-pressure";
	enum { SLOT = 600 };
	opends_async_future_t *f = calloc(outstanding, sizeof *f);
	uint8_t *bufs = t_xmalloc((size_t)outstanding * SLOT);
	uint64_t *offs = calloc(outstanding, sizeof *offs);
	size_t *sizes = calloc(outstanding, sizeof *sizes);
	CHECK(f && offs && sizes);
	for (unsigned i = 0; i < total + outstanding; i++) {
		unsigned s = i % outstanding;
		if (i >= outstanding) {
			/* reap the op that used this slot */
			size_t want = t_expect_read(F, offs[s], sizes[s]);
			ssize_t r = opends_async_await(&f[s]);
			CHECKF(r == (ssize_t)want, "op %u: await %zd (%s), expected %zu", i - outstanding, r,
			       r < 0 ? t_errname(r) : "bytes", want);
			VERIFY(bufs + (size_t)s * SLOT, oracle + offs[s], want, "op %u data", i - outstanding);
		}
		if (i >= total)
			continue;
		uint64_t x = t_splitmix64(i);
		offs[s] = x % (F - 16);
		sizes[s] = 16 + (size_t)(x >> 40) % (SLOT - 16);
		OK(opends_async_read(h, bufs + (size_t)s * SLOT, sizes[s], (off_t)offs[s], 0, &f[s]));
	}
	free(f);
	free(bufs);
	free(offs);
	free(sizes);
}

/* Futures are not tied to the submitting thread: submit here, await on
 * other threads while this one polls. */
enum { XN = 32, XT = 4 };
static opends_async_future_t xf[XN];
static uint8_t *xbuf[XN];
static ssize_t xres[XN];

static void *xawait(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int i = t; i < XN; i += XT)
		xres[i] = opends_async_await(&xf[i]);
	return NULL;
}

static void cross_thread(opends_handle_t h)
{
	t_phase = "await on another thread";
	for (int i = 0; i < XN; i++) {
		xbuf[i] = t_xmalloc(20000);
		OK(opends_async_read(h, xbuf[i], 20000, (off_t)i * 30011, 0, &xf[i]));
	}
	pthread_t th[XT];
	for (int t = 0; t < XT; t++)
		CHECK(pthread_create(&th[t], NULL, xawait, (void *)(intptr_t)t) == 0);
	for (int k = 0; k < 1000; k++)
		for (int i = 0; i < XN; i++) {
			int p = opends_async_poll(&xf[i]);
			CHECKF(p == 0 || p == 1, "poll while another thread awaits: %d", p);
		}
	for (int t = 0; t < XT; t++)
		CHECK(pthread_join(th[t], NULL) == 0);
	for (int i = 0; i < XN; i++) {
		CHECKF(xres[i] == 20000, "future %d awaited on another thread: %zd", i, xres[i]);
		VERIFY(xbuf[i], oracle + (size_t)i * 30011, 20000, "future %d data", i);
		CHECK(opends_async_poll(&xf[i]) == 1);
		free(xbuf[i]);
	}
}

/* OPENDS_CALLER_STATS=1: the line on stderr at close counts exactly the
 * calls made (1 register, 8 submits and awaits, 1 sync read, 1
 * deregister), and the reads are unchanged by it. */
static void caller_stats(const char *path)
{
	t_phase = "OPENDS_CALLER_STATS=1";
	char log[PATH_MAX];
	t_path(log, sizeof log, "caller_stats.log");
	int lfd = open(log, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECKF(lfd >= 0, "open %s: %s", log, strerror(errno));
	fflush(stderr);
	int saved = dup(2);
	CHECKF(saved >= 0 && dup2(lfd, 2) == 2, "redirecting stderr: %s", strerror(errno));
	setenv("OPENDS_CALLER_STATS", "1", 1);
	t_driver_open();
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t h = t_register(fd);
	enum { N = 8 };
	static opends_async_future_t fut[N];
	static uint8_t dst[N][8192];
	for (unsigned i = 0; i < N; i++)
		OK(opends_async_read(h, dst[i], 8192, (off_t)i * 8192, 0, &fut[i]));
	for (unsigned i = 0; i < N; i++) {
		EXPECT_SSZ_ND(opends_async_await(&fut[i]), 8192);
		VERIFY(dst[i], oracle + (size_t)i * 8192, 8192, "future %u with stats on", i);
	}
	EXPECT_SSZ_ND(opends_sync_read(h, dst[0], 4096, 4096, 0), 4096);
	VERIFY(dst[0], oracle + 4096, 4096, "sync read with stats on");
	OK(opends_handle_deregister(h));
	close(fd);
	OK(opends_driver_close());
	unsetenv("OPENDS_CALLER_STATS");
	fflush(stderr);
	CHECKF(dup2(saved, 2) == 2, "restoring stderr: %s", strerror(errno));
	close(saved);
	char text[2048];
	ssize_t n = pread(lfd, text, sizeof(text) - 1, 0);
	close(lfd);
	unlink(log);
	CHECKF(n > 0, "no statistics line on stderr");
	text[n] = 0;
	static const char *const want[] = { "opends caller stats:", " register 1 x ", " deregister 1 x ",
					    " sync_read 1 x ", " async_submit 8 x ", " await 8 x " };
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECKF(strstr(text, want[i]) != NULL, "statistics line lacks '%s': %s", want[i], text);
	printf("caller statistics: OK\n");
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(280);
	char path[PATH_MAX];
	t_path(path, sizeof path, T_HASH_NAME);
	t_write_pattern_file(path, F, hashpat);
	oracle = t_oracle(F, hashpat);

	t_driver_open();
	printf("backend %s\n", opends_driver_backend());
	for (int d = 0; d < 2; d++) {
		int fd = t_open(path, O_RDONLY, d);
		if (fd == -2)
			continue;
		fh = t_register(fd);
		window(fh, d);
		stack_future_poll(fh);
		cross_thread(fh);
		errors(path, d);
		writes(d);
		backpressure(fh, d ? 3000 : 10000, 1000);
		OK(opends_handle_deregister(fh));
		close(fd);
		printf("async%s: OK\n", d ? " (O_DIRECT)" : "");
	}
	OK(opends_driver_close());

	/* the smallest queues the configuration allows */
	t_phase = "reopen with 1 thread, queue depth 1";
	setenv("OPENDS_IO_THREADS", "1", 1);
	setenv("OPENDS_QUEUE_DEPTH", "1", 1);
	t_driver_open();
	int fd = t_open(path, O_RDONLY, false);
	fh = t_register(fd);
	backpressure(fh, 5000, 1000);
	window(fh, false);
	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
	printf("async with 1 thread / depth 1: OK\n");

	/* the same without waiting for room (OPENDS_AB_ASYNC_NOWAIT=1): the
	 * requests queue past the engine's cap, every byte still right */
	t_phase = "OPENDS_AB_ASYNC_NOWAIT=1, 1 thread, queue depth 1";
	setenv("OPENDS_AB_ASYNC_NOWAIT", "1", 1);
	t_driver_open();
	fd = t_open(path, O_RDONLY, false);
	fh = t_register(fd);
	backpressure(fh, 5000, 1000);
	window(fh, false);
	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
	unsetenv("OPENDS_AB_ASYNC_NOWAIT");
	printf("async without waiting for room: OK\n");

	/* Closing the driver with futures nobody awaited: close waits for
	 * them (they must not run against freed handles), and each future
	 * then holds its result. */
	t_phase = "close with futures in flight";
	t_driver_open();
	fd = t_open(path, O_RDONLY, false);
	fh = t_register(fd);
	enum { NF = 256 };
	static opends_async_future_t fut[NF];
	static uint8_t dst[NF][4096];
	for (unsigned i = 0; i < NF; i++)
		OK(opends_async_read(fh, dst[i], 4096, (off_t)i * 4096, 0, &fut[i]));
	OK(opends_driver_close());
	for (unsigned i = 0; i < NF; i++) {
		CHECKF(opends_async_poll(&fut[i]) == 1, "future %u not complete after driver close", i);
		EXPECT_SSZ_ND(opends_async_await(&fut[i]), 4096);
		VERIFY(dst[i], oracle + (size_t)i * 4096, 4096, "future %u after close", i);
	}
	close(fd);
	printf("close with futures in flight: OK\n");
	caller_stats(path);
	free(oracle);
	return 0;
}
