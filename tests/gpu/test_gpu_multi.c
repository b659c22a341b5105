/*
 * test_gpu_multi: every GPU in one process (issue 19), for any number of
 * GPUs; exit 77 (skip) with fewer than two.
 *
 * For each ordered device pair (c, b), b == c included, with device c's
 * primary context current on the calling thread and the buffer on device
 * b: sync, async, batch and stream (a stream of b, and the NULL stream)
 * reads into the buffer, byte-exact against the oracle with the bytes
 * around untouched; host memory on b's stream; sync, async and stream
 * writes from it read back with pread; a registered buffer on b; and, for
 * b != c, a stream of device c with the buffer of device b is
 * OPENDS_CONTEXT_MISMATCH naming both (the only mismatch). Then: the
 * device properties against the driver; one batch with an entry on every
 * device; one thread per GPU at once, each into its own device (sync and
 * on its own stream); opends_sync_read_fanout onto every GPU, and onto
 * every GPU plus host memory across EOF, byte-exact on each.
 */
#include <pthread.h>

#include "gpu_common.h"


#define MAXG 16
#define DEVLEN (16 * T_MiB)
static int ng;
static CUcontext prim[MAXG];
static CUdeviceptr dbuf[MAXG];
static uint8_t *host; /* DEVLEN bytes */
static uint8_t *oracle;
static size_t fsize;
static char path[PATH_MAX], wpath[PATH_MAX];

static void load_cuda(void)
{
	gpu_open(NULL, 2, prim, MAXG, &ng);
	for (int i = 0; i < ng; i++) {
		CU(ods_cu.cuCtxSetCurrent(prim[i]));
		CU(ods_cu.cuMemAlloc(&dbuf[i], DEVLEN));
	}
}

/* check [boff, boff + n) of device b's buffer against the oracle at off,
 * and the canary around it (span bytes were set to the canary) */
static void check_dev(int b, size_t boff, uint64_t off, size_t n, size_t span, const char *what, int c)
{
	CU(ods_cu.cuCtxSetCurrent(prim[b]));
	CU(ods_cu.cuMemcpyDtoH(host, dbuf[b], span));
	CU(ods_cu.cuCtxSetCurrent(prim[c]));
	VERIFY(host + boff, oracle + off, n, "%s into cuda:%d with cuda:%d current", what, b, c);
	VERIFY_CANARY(host, boff, "%s: before the target on cuda:%d", what, b);
	VERIFY_CANARY(host + boff + n, span - boff - n, "%s: after the target on cuda:%d", what, b);
}

static void canary(int b, size_t span)
{
	CU(ods_cu.cuCtxSetCurrent(prim[b]));
	CU(ods_cu.cuMemsetD8(dbuf[b], T_CANARY, span));
	CU(ods_cu.cuCtxSynchronize());
}

struct sargs {
	size_t size;
	off_t foff, boff;
	ssize_t res;
};

/* every family with device c current and the buffer on device b */
static void pair(opends_handle_t fh, int c, int b)
{
	void *buf = (void *)(uintptr_t)dbuf[b];
	size_t span = 6 * T_MiB;

	t_phase = "sync read, buffer on another device than the current one";
	canary(b, span);
	CU(ods_cu.cuCtxSetCurrent(prim[c]));
	size_t n = 3 * T_MiB + 5;
	EXPECT_SSZ(opends_sync_read(fh, buf, n, 4093, 7), (ssize_t)n);
	check_dev(b, 7, 4093, n, span, "sync read", c);

	t_phase = "async reads";
	canary(b, span);
	CU(ods_cu.cuCtxSetCurrent(prim[c]));
	opends_async_future_t f[4];
	for (int i = 0; i < 4; i++)
		OK(opends_async_read(fh, buf, T_MiB, (off_t)(i * 999), (off_t)((size_t)i * T_MiB + 1), &f[i]));
	for (int i = 0; i < 4; i++)
		EXPECT_SSZ_ND(opends_async_await(&f[i]), (ssize_t)T_MiB);
	CU(ods_cu.cuCtxSetCurrent(prim[b]));
	CU(ods_cu.cuMemcpyDtoH(host, dbuf[b], span));
	CU(ods_cu.cuCtxSetCurrent(prim[c]));
	for (int i = 0; i < 4; i++)
		VERIFY(host + (size_t)i * T_MiB + 1, oracle + i * 999, T_MiB, "async read %d into cuda:%d, cuda:%d current",
		       i, b, c);

	t_phase = "batch reads";
	canary(b, span);
	CU(ods_cu.cuCtxSetCurrent(prim[c]));
	opends_batch_t bt;
	OK(opends_batch_setup(&bt, 4));
	opends_io_params_t p[4];
	memset(p, 0, sizeof p);
	for (int i = 0; i < 4; i++) {
		p[i].mode = OPENDS_BATCH;
		p[i].fh = fh;
		p[i].opcode = OPENDS_READ;
		p[i].u.batch.buf_base = buf;
		p[i].u.batch.buf_offset = (off_t)((size_t)i * T_MiB + 3);
		p[i].u.batch.file_offset = (off_t)(i * 4096 + 11);
		p[i].u.batch.size = T_MiB - 7;
		p[i].cookie = (void *)(uintptr_t)(i + 1);
	}
	OK(opends_batch_submit(bt, 4, p, 0));
	opends_io_events_t ev[4];
	unsigned got = 0;
	while (got < 4) {
		unsigned nr = 4 - got;
		OK(opends_batch_get_status(bt, 1, &nr, ev + got, NULL));
		got += nr;
	}
	for (int i = 0; i < 4; i++)
		CHECKF(ev[i].status == OPENDS_COMPLETE && ev[i].ret == (ssize_t)(T_MiB - 7), "batch event %d: %d %zd", i,
		       (int)ev[i].status, ev[i].ret);
	OK(opends_batch_destroy(bt));
	CU(ods_cu.cuCtxSetCurrent(prim[b]));
	CU(ods_cu.cuMemcpyDtoH(host, dbuf[b], span));
	CU(ods_cu.cuCtxSetCurrent(prim[c]));
	for (int i = 0; i < 4; i++)
		VERIFY(host + (size_t)i * T_MiB + 3, oracle + i * 4096 + 11, T_MiB - 7, "batch entry %d into cuda:%d", i,
		       b);

	t_phase = "stream read on a stream of the buffer's device";
	canary(b, span);
	CU(ods_cu.cuCtxSetCurrent(prim[b]));
	CUstream s;
	CU(ods_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU(ods_cu.cuCtxSetCurrent(prim[c]));
	struct sargs a = { 5 * T_MiB, 12345, 9, -1 };
	OK(opends_stream_read(fh, buf, &a.size, &a.foff, &a.boff, &a.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(a.res == (ssize_t)(5 * T_MiB), "stream read into cuda:%d: bytes_read %zd", b, a.res);
	check_dev(b, 9, 12345, 5 * T_MiB, span, "stream read", c);

	t_phase = "stream read on the NULL stream";
	canary(b, span);
	CU(ods_cu.cuCtxSetCurrent(prim[c]));
	a = (struct sargs){ 2 * T_MiB + 1, 77, 0, -1 };
	OK(opends_stream_read(fh, buf, &a.size, &a.foff, &a.boff, &a.res, NULL));
	OK(opends_stream_synchronize(NULL));
	CHECKF(a.res == (ssize_t)(2 * T_MiB + 1), "NULL stream read into cuda:%d: bytes_read %zd", b, a.res);
	check_dev(b, 0, 77, 2 * T_MiB + 1, span, "NULL stream read", c);

	t_phase = "host memory on a stream of the buffer's device";
	uint8_t *hm = t_xmalloc(2 * T_MiB + 64);
	memset(hm, T_CANARY, 2 * T_MiB + 64);
	a = (struct sargs){ 2 * T_MiB, 4097, 32, -1 };
	OK(opends_stream_read(fh, hm, &a.size, &a.foff, &a.boff, &a.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(a.res == (ssize_t)(2 * T_MiB), "host memory on a stream of cuda:%d: bytes_read %zd", b, a.res);
	VERIFY(hm + 32, oracle + 4097, 2 * T_MiB, "host memory on a stream of cuda:%d, cuda:%d current", b, c);
	VERIFY_CANARY(hm, 32, "before the host target");
	VERIFY_CANARY(hm + 32 + 2 * T_MiB, 32, "after the host target");
	free(hm);

	if (c != b) {
		t_phase = "a stream of the current device with a buffer of another";
		CUstream sc;
		CU(ods_cu.cuStreamCreate(&sc, CU_STREAM_NON_BLOCKING)); /* device c's */
		struct sargs x = { 4096, 0, 0, -7 };
		EXPECT_ERR(opends_stream_read(fh, buf, &x.size, &x.foff, &x.boff, &x.res, sc), OPENDS_CONTEXT_MISMATCH);
		char w1[24], w2[24];
		snprintf(w1, sizeof w1, "cuda:%d", c);
		snprintf(w2, sizeof w2, "cuda:%d", b);
		CHECKF(strstr(t_detail(), w1) && strstr(t_detail(), w2), "detail \"%s\" does not name both devices",
		       t_detail());
		CHECKF(x.res == -7, "a refused stream read wrote bytes_read (%zd)", x.res);
		EXPECT_ERR(opends_stream_write(fh, buf, &x.size, &x.foff, &x.boff, &x.res, sc), OPENDS_CONTEXT_MISMATCH);
		CU(ods_cu.cuStreamDestroy(sc));
	}

	t_phase = "write from a buffer on another device than the current one";
	int wfd = open(wpath, O_CREAT | O_TRUNC | O_RDWR, 0644);
	CHECK(wfd >= 0);
	opends_handle_t wh;
	OK(opends_handle_register(&wh, wfd));
	t_fill_seed(host, (uint64_t)(100 + c * MAXG + b), 2 * T_MiB);
	CU(ods_cu.cuMemcpyHtoD(dbuf[b], host, 2 * T_MiB));
	CU(ods_cu.cuCtxSynchronize());
	CU(ods_cu.cuCtxSetCurrent(prim[c]));
	EXPECT_SSZ(opends_sync_write(wh, buf, 2 * T_MiB - 1, 1, 1), (ssize_t)(2 * T_MiB - 1));
	uint8_t *back = t_xmalloc(2 * T_MiB);
	CHECK(t_pread_all(wfd, back, 2 * T_MiB - 1, 1) == 2 * T_MiB - 1);
	VERIFY(back, host + 1, 2 * T_MiB - 1, "write from cuda:%d with cuda:%d current", b, c);

	t_phase = "async write from a buffer on another device";
	opends_async_future_t wf;
	OK(opends_async_write(wh, buf, T_MiB, 3 * T_MiB, 7, &wf));
	EXPECT_SSZ_ND(opends_async_await(&wf), (ssize_t)T_MiB);
	CHECK(t_pread_all(wfd, back, T_MiB, 3 * T_MiB) == T_MiB);
	VERIFY(back, host + 7, T_MiB, "async write from cuda:%d with cuda:%d current", b, c);

	t_phase = "stream write from a buffer on a stream of its device";
	a = (struct sargs){ T_MiB + 3, 5 * T_MiB, 2, -1 };
	OK(opends_stream_write(wh, buf, &a.size, &a.foff, &a.boff, &a.res, s));
	OK(opends_stream_synchronize(s));
	CHECKF(a.res == (ssize_t)(T_MiB + 3), "stream write from cuda:%d: bytes_written %zd", b, a.res);
	CHECK(t_pread_all(wfd, back, T_MiB + 3, 5 * T_MiB) == T_MiB + 3);
	VERIFY(back, host + 2, T_MiB + 3, "stream write from cuda:%d with cuda:%d current", b, c);
	free(back);
	OK(opends_handle_deregister(wh));
	close(wfd);
	CU(ods_cu.cuCtxSetCurrent(prim[b]));
	CU(ods_cu.cuStreamDestroy(s));
	CU(ods_cu.cuCtxSetCurrent(prim[c]));

	t_phase = "a registered buffer on another device";
	canary(b, span);
	CU(ods_cu.cuCtxSetCurrent(prim[c]));
	OK(opends_buf_register(buf, DEVLEN, 0));
	EXPECT_SSZ(opends_sync_read(fh, buf, T_MiB, 5, 4096), (ssize_t)T_MiB);
	OK(opends_buf_deregister(buf));
	check_dev(b, 4096, 5, T_MiB, span, "registered read", c);
}

/* what opends_device_get_properties says against the driver itself */
static void props(int cnt)
{
	t_phase = "device properties";
	for (int i = 0; i < cnt; i++) {
		char line[512], name[96], bus[32];
		CUdevice d, e;
		opends_device_props_t p;
		OK(opends_device_describe((unsigned)i, line, sizeof line));
		printf("%s\n", line);
		OK(opends_device_get_properties((unsigned)i, &p));
		CU(ods_cu.cuDeviceGet(&d, i));
		CU(ods_cu.cuDeviceGetName(name, sizeof name, d));
		CU(ods_cu.cuDeviceGetPCIBusId(bus, sizeof bus, d));
		CHECKF(!strcmp(p.layer, "cuda") && !strcmp(p.name, name) && !strcmp(p.pci_bus_id, bus),
		       "cuda:%d: layer \"%s\", name \"%s\" (driver \"%s\"), bus \"%s\" (driver \"%s\")", i, p.layer,
		       p.name, name, p.pci_bus_id, bus);
		CHECKF((p.peers & (1ull << i)) == 0 && (p.peers_nvlink & ~p.peers) == 0,
		       "cuda:%d: peers %#llx, nvlink peers %#llx", i, (unsigned long long)p.peers,
		       (unsigned long long)p.peers_nvlink);
		for (int j = 0; j < cnt; j++) {
			int can = 0;
			if (j == i)
				continue;
			CU(ods_cu.cuDeviceGet(&e, j));
			CU(ods_cu.cuDeviceCanAccessPeer(&can, d, e));
			CHECKF(!!(p.peers >> j & 1) == !!can, "cuda:%d: peer bit of cuda:%d is %d, the driver says %d", i, j,
			       (int)(p.peers >> j & 1), can);
		}
	}
}

/* one batch with an entry on every device, device 1's first */
static void batch_all(opends_handle_t fh)
{
	t_phase = "one batch with an entry on every device";
	for (int i = 0; i < ng; i++)
		canary(i, 2 * T_MiB);
	CU(ods_cu.cuCtxSetCurrent(prim[0]));
	opends_batch_t bt;
	OK(opends_batch_setup(&bt, (unsigned)ng));
	opends_io_params_t p[MAXG];
	memset(p, 0, sizeof p);
	for (int k = 0; k < ng; k++) {
		int d = (k + 1) % ng;
		p[k].mode = OPENDS_BATCH;
		p[k].fh = fh;
		p[k].opcode = OPENDS_READ;
		p[k].u.batch.buf_base = (void *)(uintptr_t)dbuf[d];
		p[k].u.batch.buf_offset = d + 1;
		p[k].u.batch.file_offset = d * 12289;
		p[k].u.batch.size = T_MiB + (size_t)d;
		p[k].cookie = (void *)(uintptr_t)(d + 1);
	}
	OK(opends_batch_submit(bt, (unsigned)ng, p, 0));
	opends_io_events_t ev[MAXG];
	unsigned got = 0;
	while (got < (unsigned)ng) {
		unsigned nr = (unsigned)ng - got;
		OK(opends_batch_get_status(bt, 1, &nr, ev + got, NULL));
		got += nr;
	}
	for (int i = 0; i < ng; i++) {
		size_t d = (size_t)(uintptr_t)ev[i].cookie - 1;
		CHECKF(d < (size_t)ng && ev[i].status == OPENDS_COMPLETE && ev[i].ret == (ssize_t)(T_MiB + d),
		       "batch event %d (cuda:%zu): status %d ret %zd", i, d, (int)ev[i].status, ev[i].ret);
	}
	OK(opends_batch_destroy(bt));
	for (int d = 0; d < ng; d++)
		check_dev(d, (size_t)d + 1, (uint64_t)d * 12289, T_MiB + (size_t)d, 2 * T_MiB, "batch entry", 0);
}

/* one thread per GPU, each reading into its own device at once: sync
 * reads, then stream reads on a stream of its device */
struct thr {
	int dev, rounds;
	opends_handle_t fh;
	int bad;
};

static void *reader(void *arg)
{
	struct thr *t = arg;
	CUstream st = NULL;
	if (ods_cu.cuCtxSetCurrent(prim[t->dev]) != CUDA_SUCCESS ||
	    ods_cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
		t->bad = -1;
		return NULL;
	}
	uint8_t *h = malloc(4 * T_MiB);
	void *buf = (void *)(uintptr_t)dbuf[t->dev];
	for (int r = 0; r < t->rounds && h && !t->bad; r++) {
		off_t off = (off_t)((size_t)(t->dev * 7 + r) * 65537 % (fsize - 4 * T_MiB));
		if (r % 2 == 0) {
			if (opends_sync_read(t->fh, buf, 4 * T_MiB, off, 0) != (ssize_t)(4 * T_MiB))
				t->bad = r + 1;
		} else {
			size_t size = 4 * T_MiB;
			off_t foff = off, boff = 0;
			ssize_t res = -1;
			if (opends_stream_read(t->fh, buf, &size, &foff, &boff, &res, st).err ||
			    opends_stream_synchronize(st).err || res != (ssize_t)(4 * T_MiB))
				t->bad = r + 1;
		}
		if (!t->bad && (ods_cu.cuMemcpyDtoH(h, dbuf[t->dev], 4 * T_MiB) != CUDA_SUCCESS ||
				memcmp(h, oracle + off, 4 * T_MiB) != 0))
			t->bad = r + 1;
	}
	ods_cu.cuStreamDestroy(st);
	free(h);
	return NULL;
}

static void threads(opends_handle_t fh)
{
	t_phase = "one thread per GPU at once";
	pthread_t th[MAXG];
	struct thr t[MAXG];
	for (int i = 0; i < ng; i++) {
		t[i] = (struct thr){ i, 20, fh, 0 };
		CHECK(pthread_create(&th[i], NULL, reader, &t[i]) == 0);
	}
	for (int i = 0; i < ng; i++) {
		pthread_join(th[i], NULL);
		CHECKF(!t[i].bad, "the thread of cuda:%d failed or read wrong bytes (round %d; -1: no stream)", i,
		       t[i].bad);
	}
}

static void fanout(opends_handle_t fh)
{
	t_phase = "read once, place on every GPU";
	void *bufs[MAXG + 1];
	off_t boffs[MAXG + 1];
	size_t n = 9 * T_MiB + 3, span = 10 * T_MiB;
	for (int i = 0; i < ng; i++) {
		canary(i, span);
		bufs[i] = (void *)(uintptr_t)dbuf[(i + 1) % ng]; /* device 1 first */
		boffs[i] = i;
	}
	CU(ods_cu.cuCtxSetCurrent(prim[0]));
	EXPECT_SSZ(opends_sync_read_fanout(fh, bufs, boffs, (unsigned)ng, n, 4099), (ssize_t)n);
	for (int i = 0; i < ng; i++)
		check_dev((i + 1) % ng, (size_t)i, 4099, n, span, "fan-out", 0);

	t_phase = "fan-out onto every GPU and host memory, from the last device, across EOF";
	uint8_t *hm = t_xmalloc(span);
	memset(hm, T_CANARY, span);
	for (int i = 0; i < ng; i++) {
		canary(i, span);
		bufs[i] = (void *)(uintptr_t)dbuf[ng - 1 - i]; /* the last device first */
		boffs[i] = 4096;
	}
	bufs[ng] = hm;
	boffs[ng] = 3;
	size_t tail = 5 * T_MiB + 7; /* the file ends there */
	CU(ods_cu.cuCtxSetCurrent(prim[ng - 1]));
	EXPECT_SSZ(opends_sync_read_fanout(fh, bufs, boffs, (unsigned)ng + 1, 8 * T_MiB, (off_t)(fsize - tail)),
		   (ssize_t)tail);
	for (int i = 0; i < ng; i++)
		check_dev(ng - 1 - i, 4096, fsize - tail, tail, span, "fan-out across EOF", ng - 1);
	VERIFY(hm + 3, oracle + fsize - tail, tail, "fan-out across EOF into host memory");
	VERIFY_CANARY(hm, 3, "before the host fan-out target");
	VERIFY_CANARY(hm + 3 + tail, span - 3 - tail, "after the host fan-out target");
	free(hm);
}

int main(void)
{
	t_watchdog(280);
	load_cuda();
	if (!getenv("OPENDS_ACCEL"))
		setenv("OPENDS_ACCEL", "cuda", 1);
	CU(ods_cu.cuCtxSetCurrent(prim[0]));
	OK(opends_driver_open());
	printf("backend %s, %d GPUs\n", opends_driver_backend(), ng);
	unsigned cnt = 0;
	OK(opends_device_count(&cnt));
	CHECKF(cnt == (unsigned)ng, "opends_device_count %u, the driver sees %d", cnt, ng);
	props((int)cnt);
	t_path(path, sizeof path, "gpum.bin");
	t_path(wpath, sizeof wpath, "gpumw.bin");
	fsize = 12 * T_MiB + 1234;
	t_write_pattern_file(path, fsize, hashpat);
	oracle = t_oracle(fsize, hashpat);
	host = t_xmalloc(DEVLEN);
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	opends_handle_t fh;
	OK(opends_handle_register(&fh, fd));

	for (int c = 0; c < ng; c++)
		for (int b = 0; b < ng; b++) {
			printf("pair: cuda:%d current, buffer on cuda:%d\n", c, b);
			pair(fh, c, b);
		}
	batch_all(fh);
	threads(fh);
	fanout(fh);

	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
	for (int i = 0; i < ng; i++) {
		CU(ods_cu.cuCtxSetCurrent(prim[i]));
		CU(ods_cu.cuMemFree(dbuf[i]));
	}
	free(host);
	free(oracle);
	printf("OK\n");
	return 0;
}
