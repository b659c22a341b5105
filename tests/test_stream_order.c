/*
 * test_stream_order [--backend=NAME]
 *
 * Stream operations whose pieces finish out of order, and many streams
 * with many operations in flight (src/core/stream_accel.c). Run under
 * OPENDS_ACCEL=hostdev: every buffer is "device" memory and the streams
 * are hostdev's simulated ones, so each read moves through staging slots,
 * gates and copies queued on the stream.
 *  - reads of a source whose requests complete late by offset (every
 *    fourth MiB waits, so later pieces finish before earlier ones): the
 *    pieces finish out of order, and the stream's bytes are exact, on a
 *    stream registered with fixed arguments and on one that is not;
 *  - later work on the same stream sees the bytes: a read queued behind a
 *    slow one on the same stream, into the same buffer, wins;
 *  - 256 streams, each with 12 reads of a file queued at once (half the
 *    streams registered with fixed arguments, some reads of many pieces),
 *    then the same on the late source: every read exact, none hangs (under
 *    a watchdog);
 *  - one thread queues 2 000 reads on a stream while another synchronizes
 *    it over and over: every sync returns, and the reads queued before it
 *    have their results.
 * test_stream_order nocall: with OPENDS_HOSTDEV_NO_CALLS=1 (hostdev refuses
 * host functions on streams), 2 000 small device reads on 64 streams,
 * fixed and not, are exact: no host function runs per staged operation
 * (on CUDA one would be a cuLaunchHostFunc); a read of size 0, which takes
 * the host-function path, is refused with OPENDS_DEVICE_DRIVER_ERROR, which
 * shows the refusal works (skip, 77, where it has no effect).
 * test_stream_order budget: stream staging counts in OPENDS_MAX_PINNED; an
 * operation whose staging would not fit takes the general way (below).
 * All of it with hostdev's stream queues bounded (OPENDS_HOSTDEV_QUEUE_MAX):
 * a call that queues a command on a full stream blocks, as on CUDA, so an
 * operation of more commands than a queue holds needs the dispatcher to
 * drain it while the caller is still queueing (the 8 GiB read that hung on
 * the H200).
 */
#include "test_stream_common.h"
#include "test_stream_late.h"

/* 27 MiB + a bit: seven 4 MiB pieces */
static const size_t F = 27 * T_MiB + 4321;
static uint8_t *oracle;

/* ---- cases --------------------------------------------------------------- */

/* hostdev: every buffer is "device" memory */
static void *host_alloc(size_t n)
{
	return t_xmalloc(n); /* every byte T_CANARY */
}

static uint8_t *host_view(void *p, size_t n)
{
	(void)n;
	return p;
}

static void host_unview(uint8_t *v)
{
	(void)v;
}

static const struct late_mem host_mem = { host_alloc, host_view, host_unview, free };

/* Later work on the stream sees the bytes: two reads into the same buffer
 * on one stream, the first slow (late source, many pieces), the second
 * quick (a file); the second's bytes must be what is left. */
static void later_wins(opends_handle_t late, opends_handle_t file, opends_stream_t s, const char *what)
{
	t_phase = what;
	size_t n = 13 * T_MiB + 1;
	uint8_t *buf = t_xmalloc(n);
	struct sop a = { n, 0, 0, SENT }, b = { n, (off_t)(5 * T_MiB + 3), 0, SENT };
	OK(opends_stream_read(late, buf, &a.size, &a.foff, &a.boff, &a.res, s));
	OK(opends_stream_read(file, buf, &b.size, &b.foff, &b.boff, &b.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(a.res == (ssize_t)n && b.res == (ssize_t)n, "%s: reads gave %zd and %zd", what, a.res, b.res);
	VERIFY(buf, oracle + b.foff, n, "%s: the later read's bytes", what);
	free(buf);
}

/* No host function per staged operation: hostdev refuses them here. */
static void nocall(opends_handle_t fh)
{
	t_phase = "no host function per operation";
	size_t zero = 0;
	off_t zf = 0, zb = 0;
	ssize_t zr = SENT;
	uint8_t one[1];
	opends_error_t e = opends_stream_read(fh, one, &zero, &zf, &zb, &zr, NULL);
	if (e.err == OPENDS_SUCCESS)
		skip("OPENDS_HOSTDEV_NO_CALLS had no effect: a read of size 0 was queued");
	CHECKF(e.err == OPENDS_DEVICE_DRIVER_ERROR, "size-0 read under NO_CALLS: %d (%s)", e.err, t_errname(e.err));
	CHECKF(zr == SENT, "a refused read wrote its result (%zd)", zr);
	enum { NS = 64, PER = 32 };
	static opends_stream_t st[NS];
	static struct sop o[NS][PER];
	const size_t LEN = 37 * T_KiB + 5;
	uint8_t *buf = t_xmalloc((size_t)NS * PER * LEN);
	for (int i = 0; i < NS; i++) {
		OK(opends_stream_create(&st[i]));
		if (i % 2)
			OK(opends_stream_register(st[i], LATE_FIXED));
	}
	for (int j = 0; j < PER; j++)
		for (int i = 0; i < NS; i++) {
			size_t k = (size_t)i * PER + (size_t)j;
			o[i][j] = (struct sop){ LEN, (off_t)(k * 65537 % (F - LEN)), (off_t)(k * LEN), SENT };
			OK(opends_stream_read(fh, buf, &o[i][j].size, &o[i][j].foff, &o[i][j].boff, &o[i][j].res, st[i]));
		}
	for (int i = 0; i < NS; i++) {
		OK(opends_stream_synchronize(st[i]));
		for (int j = 0; j < PER; j++) {
			size_t k = (size_t)i * PER + (size_t)j;
			CHECKF(o[i][j].res == (ssize_t)LEN, "stream %d op %d gave %zd (%s)", i, j, o[i][j].res,
			       t_errname(o[i][j].res));
			VERIFY(buf + k * LEN, oracle + o[i][j].foff, LEN, "stream %d op %d", i, j);
		}
		if (i % 2)
			OK(opends_stream_deregister(st[i]));
		OK(opends_stream_destroy(st[i]));
	}
	free(buf);
	printf("%d small reads on %d streams with host functions refused: exact\n", NS * PER, NS);
}

/* Stream staging within OPENDS_MAX_PINNED (1 MiB here, ref backend): a
 * small read's staging fits and is staged (no host function, which hostdev
 * refuses here); a 9 MiB read's (16 MiB) does not, so it takes the general
 * way, whose host function is refused: OPENDS_DEVICE_DRIVER_ERROR at the
 * call, nothing written. Then, host functions allowed, it is exact. */
static ssize_t zero_read(void *src, void *b, size_t len, uint64_t off)
{
	(void)src, (void)off;
	memset(b, 0, len);
	return (ssize_t)len;
}

/* Stream staging takes at most half of the budget: after reads of many
 * sizes (each class a buffer of its own in a 1 MiB budget), the first
 * source handle still finds room for its engine's staging (it took the
 * whole budget before: rel's test_diff, OPENDS_DRIVER_INVALID_PROPS). */
static void budget_left(opends_handle_t fh, uint8_t *buf)
{
	/* all in flight at once, each in a range of its own: each holds its
	 * staging until its copy is done, so the pool grows as far as the
	 * budget lets it (the rest run the general way) */
	const size_t sz[] = { 120 * T_KiB, 120 * T_KiB, 250 * T_KiB, 500 * T_KiB, 60 * T_KiB };
	enum { NR = sizeof sz / sizeof sz[0] };
	struct sop a[NR];
	size_t at = 0;
	for (size_t i = 0; i < NR; i++) {
		a[i] = (struct sop){ sz[i], 4096, (off_t)at, SENT };
		OK(opends_stream_read(fh, buf, &a[i].size, &a[i].foff, &a[i].boff, &a[i].res, NULL));
		at += sz[i];
	}
	OK(opends_stream_synchronize(NULL));
	at = 0;
	for (size_t i = 0; i < NR; i++) {
		CHECKF(a[i].res == (ssize_t)sz[i], "read of %zu gave %zd (%s)", sz[i], a[i].res, t_errname(a[i].res));
		VERIFY(buf + at, oracle + 4096, sz[i], "read of %zu", sz[i]);
		at += sz[i];
	}
	const opends_source_ops_t ops = { .struct_size = sizeof ops, .name = "zeros", .read = zero_read };
	const opends_source_desc_t d = { .struct_size = sizeof d, .ops = &ops, .flags = OPENDS_SOURCE_BLOCKING |
										 OPENDS_SOURCE_RDONLY,
					 .size = 1 << 20 };
	opends_handle_t sh;
	OK(opends_handle_register_source(&sh, &d));
	OK(opends_handle_deregister(sh));
}

static void budget(const char *path)
{
	t_phase = "stream staging within OPENDS_MAX_PINNED";
	const size_t SMALL = 100 * T_KiB + 3, BIG = 9 * T_MiB + 5;
	uint8_t *buf = t_xmalloc(BIG + 7);
	for (int calls = 0; calls < 2; calls++) {
		if (calls)
			unsetenv("OPENDS_HOSTDEV_NO_CALLS");
		t_driver_open();
		int fd = t_open(path, O_RDONLY, false);
		opends_handle_t fh = t_register(fd);
		struct sop a = { SMALL, 4097, 7, SENT }, b = { BIG, 77, 7, SENT };
		OK(opends_stream_read(fh, buf, &a.size, &a.foff, &a.boff, &a.res, NULL));
		OK(opends_stream_synchronize(NULL));
		CHECKF(a.res == (ssize_t)SMALL, "small read gave %zd (%s)", a.res, t_errname(a.res));
		VERIFY(buf + 7, oracle + 4097, SMALL, "small read");
		opends_error_t e = opends_stream_read(fh, buf, &b.size, &b.foff, &b.boff, &b.res, NULL);
		if (!calls) {
			CHECKF(e.err == OPENDS_DEVICE_DRIVER_ERROR,
			       "a read whose staging is past the budget was staged anyway (%d, %s)", e.err,
			       t_errname(e.err));
			CHECKF(b.res == SENT, "a refused read wrote its result (%zd)", b.res);
		} else {
			OK(e);
			OK(opends_stream_synchronize(NULL));
			CHECKF(b.res == (ssize_t)BIG, "big read gave %zd (%s)", b.res, t_errname(b.res));
			VERIFY(buf + 7, oracle + 77, BIG, "big read, the general way");
			budget_left(fh, buf);
		}
		OK(opends_handle_deregister(fh));
		close(fd);
		OK(opends_driver_close());
	}
	free(buf);
	printf("stream staging within OPENDS_MAX_PINNED: small staged, big the general way, exact; "
	       "half the budget left for a source\n");
}

/* One thread queues reads on a stream without pause while another
 * synchronizes it again and again: each sync returns (the library's own
 * wait before the accelerator's is for the operations queued before the
 * call, not a stream that never empties), and every read queued before a
 * sync has its result when it returns; all exact at the end. */
enum { QN = 2000, QSZ = 9001 };
struct queuer {
	opends_handle_t fh;
	opends_stream_t s;
	uint8_t *buf;
	struct sop o[QN];
	atomic_uint n;
};

static void *queue_reads(void *p)
{
	struct queuer *q = p;
	for (unsigned i = 0; i < QN; i++) {
		q->o[i] = (struct sop){ QSZ, (off_t)((size_t)i * 4099 % (F - QSZ)), (off_t)((size_t)i * QSZ), SENT };
		OK(opends_stream_read(q->fh, q->buf, &q->o[i].size, &q->o[i].foff, &q->o[i].boff, &q->o[i].res, q->s));
		atomic_store(&q->n, i + 1);
	}
	return NULL;
}

static void sync_while_queueing(opends_handle_t fh, opends_stream_t s, const char *what)
{
	t_phase = what;
	static struct queuer q;
	q.fh = fh;
	q.s = s;
	q.buf = t_xmalloc((size_t)QN * QSZ);
	atomic_store(&q.n, 0);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, queue_reads, &q) == 0);
	unsigned syncs = 0;
	for (unsigned before; (before = atomic_load(&q.n)) < QN; syncs++) {
		OK(opends_stream_synchronize(s));
		for (unsigned i = 0; i < before; i++) {
			ssize_t r = __atomic_load_n(&q.o[i].res, __ATOMIC_ACQUIRE);
			CHECKF(r == (ssize_t)QSZ, "%s: read %u, queued before sync %u, gave %zd", what, i, syncs, r);
		}
	}
	CHECK(pthread_join(th, NULL) == 0);
	OK(opends_stream_synchronize(s));
	for (unsigned i = 0; i < QN; i++) {
		CHECKF(q.o[i].res == (ssize_t)QSZ, "%s: read %u gave %zd", what, i, q.o[i].res);
		VERIFY(q.buf + (size_t)i * QSZ, oracle + q.o[i].foff, QSZ, "%s: read %u", what, i);
	}
	free(q.buf);
	printf("%s: %u syncs while %u reads were queued, exact\n", what, syncs, QN);
}

int main(int argc, char **argv)
{
	const char *mode = t_args(argc, argv);
	bool nc = mode && !strcmp(mode, "nocall"), bud = mode && !strcmp(mode, "budget");
	t_watchdog(bud ? 120 : 280);
	char path[PATH_MAX];
	t_path(path, sizeof path, bud ? "order_budget.bin" : "order.bin");
	t_write_pattern_file(path, F, hashpat);
	oracle = t_oracle(F, hashpat);
	if (bud) {
		setenv("OPENDS_HOSTDEV_NO_CALLS", "1", 1);
		setenv("OPENDS_MAX_PINNED", "1m", 1);
		setenv("OPENDS_BACKEND", "ref", 1);
		budget(path);
		free(oracle);
		printf("stream order (budget): OK\n");
		return 0;
	}

	/* hostdev's streams take at most 16 commands queued, as a CUDA stream
	 * blocks the caller when its queue is full: an operation of more
	 * commands than that must still complete (the dispatcher has to
	 * know it before its last commands are queued) */
	setenv("OPENDS_HOSTDEV_QUEUE_MAX", "16", 1);
	if (nc)
		setenv("OPENDS_HOSTDEV_NO_CALLS", "1", 1);
	t_driver_open();
	printf("backend %s\n", opends_driver_backend());
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t file = t_register(fd);
	if (nc) {
		nocall(file);
		OK(opends_handle_deregister(file));
		close(fd);
		OK(opends_driver_close());
		free(oracle);
		printf("stream order (no host functions): OK\n");
		return 0;
	}
	opends_handle_t late = late_register(oracle, F, 3000);
	opends_stream_t s, sf;
	late_streams(&s, &sf);

	late_out_of_order(&host_mem, late, F, oracle, s, "out of order, values read at the stream");
	late_out_of_order(&host_mem, late, F, oracle, sf, "out of order, fixed values");
	later_wins(late, file, s, "later work sees the bytes");
	later_wins(late, file, sf, "later work sees the bytes (fixed)");
	late_many(&host_mem, file, F, oracle, "256 streams, a file");
	late_many(&host_mem, late, F, oracle, "256 streams, the late source");
	sync_while_queueing(file, s, "sync while another thread queues");
	sync_while_queueing(file, sf, "sync while another thread queues (fixed)");

	late_end(s, sf, late, file, fd);
	free(oracle);
	printf("stream order: OK\n");
	return 0;
}
