/*
 * test_gpu: OpenDS with the cuda accelerator against a host oracle.
 *
 * Exit 77 (skip) without libcuda.so.1 or without a GPU. libcuda is loaded
 * by the library's own loader (src/vendor/cuda_api.h), so this builds
 * wherever cuda.h is.
 *
 * Covered: byte-exact reads into cuMemAlloc'ed memory over a sweep of
 * sizes, file offsets and buffer offsets, with and without O_DIRECT, with
 * the bytes around the target checked unchanged; writes from device
 * memory checked with pread; async and batch reads; stream reads followed
 * on the same stream, without a host sync, by a device-to-host copy that
 * must see the new bytes; read-ahead of sequential calls (served from it,
 * byte-exact); deferred evaluation (a host function enqueued
 * before the read sets *size); 64 streams with reads in flight at once
 * (more than the hardware queues); and the context rule: another context
 * current is no error (the buffer's context serves it), a stream of another
 * context with the buffer is OPENDS_CONTEXT_MISMATCH. First, the device
 * count and properties (what opends-info lists) against the driver. And the
 * caller's cost of a small synchronous copy, each way (timing for the probe,
 * printed, not judged; before streams(), which rewrites part of the file).
 * Several GPUs:
 * test_gpu_multi.c.
 */
#include <pthread.h>

#include "gpu_common.h"


static CUcontext primary;
static uint8_t *oracle;
static size_t fsize;
#define DEVLEN (24 * T_MiB)
static CUdeviceptr dev;
static uint8_t *host; /* DEVLEN bytes of host scratch */

static void load_cuda(void)
{
	static const char *const need[] = { "cuCtxCreate", NULL };
	gpu_open(need, 1, &primary, 1, NULL);
}

/* ---- reads into device memory --------------------------------------------- */

static void rd_dev(opends_handle_t fh, bool direct, uint64_t off, size_t size, size_t boff)
{
	size_t span = boff + size + 4096;
	CHECK(span <= DEVLEN);
	CU(ods_cu.cuMemsetD8(dev, T_CANARY, span));
	/* cuMemsetD8 may still run when it returns, and the library's copies
	 * are not ordered after the caller's stream work (as with cuFile) */
	CU(ods_cu.cuCtxSynchronize());
	size_t want = t_expect_read(fsize, off, size);
	ssize_t got = opends_sync_read(fh, (void *)(uintptr_t)dev, size, (off_t)off, (off_t)boff);
	if (got != (ssize_t)want)
		FAILF("%s read(size %zu, off %llu, buf_offset %zu) returned %zd (%s), expected %zu",
		      direct ? "O_DIRECT" : "buffered", size, (unsigned long long)off, boff, got,
		      got < 0 ? t_errname(got) : "bytes", want);
	CU(ods_cu.cuMemcpyDtoH(host, dev, span));
	VERIFY(host + boff, oracle + (want ? off : 0), want, "data, %s read(size %zu, off %llu, buf_offset %zu)",
	       direct ? "O_DIRECT" : "buffered", size, (unsigned long long)off, boff);
	VERIFY_CANARY(host, boff, "bytes before the target (size %zu, off %llu, buf_offset %zu)", size,
		      (unsigned long long)off, boff);
	VERIFY_CANARY(host + boff + want, span - boff - want, "bytes after the returned range (size %zu, off %llu, "
		      "buf_offset %zu)", size, (unsigned long long)off, boff);
}

/* Read-ahead (src/core/stage_ra.c): sequential 2 MiB calls into device
 * memory, then calls of 2 MiB + 5 at buffer offset 3, are served from it
 * after the first two (uring; none elsewhere), byte-exact with the bytes
 * around each target unchanged, the last call short at EOF. */
static void read_ahead(const char *path)
{
	t_phase = "read-ahead into device memory";
	usleep(150 * 1000); /* read-ahead waits for a file 100 ms unchanged */
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	opends_handle_t fh;
	OK(opends_handle_register(&fh, fd));
	/* whole blocks into the buffer's start, then odd sizes at an odd
	 * offset in it (the copy out of the device buffer is not aligned) */
	static const size_t sizes[2] = { 2 * T_MiB, 2 * T_MiB + 5 }, boffs[2] = { 0, 3 };
	unsigned long before = 0;
	for (unsigned v = 0; v < 2; v++) {
		size_t S = sizes[v];
		unsigned ncall = (unsigned)(fsize / S) + 1;
		for (unsigned k = 0; k < ncall; k++)
			rd_dev(fh, false, (uint64_t)k * S, S, boffs[v]);
		char d[1024];
		OK(opends_describe(fh, d, sizeof d));
		const char *p = strstr(d, "read ahead: ");
		unsigned long served = (p ? strtoul(p + 12, NULL, 10) : 0) - before;
		before += served;
		if (!strcmp(opends_driver_backend(), "uring") && !getenv("OPENDS_READAHEAD"))
			CHECKF(served >= ncall - 3, "read-ahead served %lu of %u calls", served, ncall);
		printf("read-ahead: %u calls of %zu bytes at buffer offset %zu byte-exact, %lu served from it\n", ncall,
		       S, boffs[v], served);
	}
	OK(opends_handle_deregister(fh));
	close(fd);
}

static void sweep(opends_handle_t fh, bool direct)
{
	t_phase = direct ? "device read sweep, O_DIRECT" : "device read sweep, buffered";
	const size_t sizes[] = { 1, 100, 4095, 4096, 4097, 65536 + 7, T_MiB, 2 * T_MiB + 4096, 3 * T_MiB + 5,
				 9 * T_MiB };
	const uint64_t offs[] = { 0, 1, 4095, 4096, T_MiB + 3, 2 * T_MiB, 0 };
	const size_t boffs[] = { 0, 1, 4096, 12345 };
	uint64_t o[sizeof offs / sizeof *offs];
	memcpy(o, offs, sizeof o);
	o[6] = fsize - 10; /* across EOF */
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
		for (size_t j = 0; j < sizeof o / sizeof *o; j++)
			for (size_t k = 0; k < sizeof boffs / sizeof *boffs; k++)
				rd_dev(fh, direct, o[j], sizes[i], boffs[k]);
	rd_dev(fh, direct, 0, fsize, 0);         /* whole file */
	rd_dev(fh, direct, fsize, 4096, 0);      /* at EOF */
	rd_dev(fh, direct, fsize + 8192, 17, 3); /* past EOF */
}

/* ---- writes from device memory ------------------------------------------- */

static void writes(const char *path, bool direct)
{
	t_phase = direct ? "device writes, O_DIRECT" : "device writes, buffered";
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR | (direct ? O_DIRECT : 0), 0644);
	CHECK(fd >= 0);
	opends_handle_t fh;
	OK(opends_handle_register(&fh, fd));
	size_t flen = 6 * T_MiB + 777;
	uint8_t *mirror = t_xmalloc(flen);
	memset(mirror, 0, flen);
	const struct { uint64_t off; size_t size; size_t boff; } w[] = {
		{ 0, 4096, 0 }, { 4096, 3 * T_MiB, 4096 }, { 1, 4094, 5 }, { 8190, 20000, 1 },
		{ 3 * T_MiB + 100, 2 * T_MiB + 333, 77 }, { 6 * T_MiB, 777, 0 }, { 5000, 1, 0 },
	};
	for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
		t_fill_seed(host, 100 + i, w[i].size + w[i].boff);
		CU(ods_cu.cuMemcpyHtoD(dev, host, w[i].size + w[i].boff));
		CU(ods_cu.cuCtxSynchronize()); /* pageable HtoD may return before its DMA ends */
		EXPECT_SSZ(opends_sync_write(fh, (void *)(uintptr_t)dev, w[i].size, (off_t)w[i].off, (off_t)w[i].boff),
			   (ssize_t)w[i].size);
		memcpy(mirror + w[i].off, host + w[i].boff, w[i].size);
	}
	OK(opends_handle_deregister(fh));
	close(fd);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(t_file_size(fd) == (off_t)flen);
	CHECK(t_pread_all(fd, host, flen, 0) == flen);
	VERIFY(host, mirror, flen, "file content after device writes");
	close(fd);
	free(mirror);
}

/* ---- async and batch ---------------------------------------------------- */

static void async_batch(opends_handle_t fh)
{
	t_phase = "async reads into device memory";
	enum { N = 8 };
	opends_async_future_t f[N];
	for (int i = 0; i < N; i++)
		OK(opends_async_read(fh, (void *)(uintptr_t)dev, T_MiB + 3, (off_t)(i * 777), (off_t)(i * 2 * T_MiB),
				     &f[i]));
	for (int i = 0; i < N; i++)
		EXPECT_SSZ_ND(opends_async_await(&f[i]), (ssize_t)(T_MiB + 3));
	CU(ods_cu.cuMemcpyDtoH(host, dev, N * 2 * T_MiB));
	for (int i = 0; i < N; i++)
		VERIFY(host + i * 2 * T_MiB, oracle + i * 777, T_MiB + 3, "async read %d", i);

	t_phase = "batch reads into device memory";
	opends_batch_t b;
	OK(opends_batch_setup(&b, N));
	opends_io_params_t p[N];
	memset(p, 0, sizeof p);
	for (int i = 0; i < N; i++) {
		p[i].mode = OPENDS_BATCH;
		p[i].fh = fh;
		p[i].opcode = OPENDS_READ;
		p[i].u.batch.buf_base = (void *)(uintptr_t)dev;
		p[i].u.batch.buf_offset = (off_t)(i * 2 * T_MiB + 1);
		p[i].u.batch.file_offset = (off_t)(i * 4096 * 3 + 5);
		p[i].u.batch.size = 2 * T_MiB - 1;
		p[i].cookie = (void *)(uintptr_t)(i + 1);
	}
	CU(ods_cu.cuMemsetD8(dev, 0, N * 2 * T_MiB));
	CU(ods_cu.cuCtxSynchronize());
	OK(opends_batch_submit(b, N, p, 0));
	unsigned got = 0;
	opends_io_events_t ev[N];
	while (got < N) {
		unsigned nr = N - got;
		OK(opends_batch_get_status(b, 1, &nr, ev + got, NULL));
		got += nr;
	}
	for (int i = 0; i < N; i++) {
		CHECKF(ev[i].status == OPENDS_COMPLETE && ev[i].ret == (ssize_t)(2 * T_MiB - 1),
		       "batch event %d: status %d ret %zd", i, (int)ev[i].status, ev[i].ret);
	}
	OK(opends_batch_destroy(b));
	CU(ods_cu.cuMemcpyDtoH(host, dev, N * 2 * T_MiB));
	for (int i = 0; i < N; i++)
		VERIFY(host + i * 2 * T_MiB + 1, oracle + i * 4096 * 3 + 5, 2 * T_MiB - 1, "batch entry %d", i);
}

/* ---- streams -------------------------------------------------------------- */

struct sargs {
	size_t size;
	off_t foff, boff;
	ssize_t res;
};

static void CUDA_CB set_size(void *p)
{
	struct sargs *a = p;
	a->size = 3 * T_MiB + 1; /* the read was enqueued with size 0 */
}

static void streams(const char *path)
{
	t_phase = "stream: read, then DtoH on the same stream, no host sync";
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	opends_handle_t fh;
	OK(opends_handle_register(&fh, fd));
	opends_stream_t s;
	OK(opends_stream_create(&s));
	uint8_t *pinned = NULL;
	size_t n = 4 * T_MiB + 123;
	CU(ods_cu.cuMemHostAlloc((void **)&pinned, n, 0));
	uint8_t *want = t_xmalloc(n);
	for (int rep = 0; rep < 20; rep++) {
		t_fill_seed(want, 1000 + (uint64_t)rep, n);
		t_pwrite_all(fd, want, n, 4096 + 5);
		struct sargs a = { n, 4096 + 5, 3, -1 };
		OK(opends_stream_read(fh, (void *)(uintptr_t)dev, &a.size, &a.foff, &a.boff, &a.res, s));
		CU(ods_cu.cuMemcpyDtoHAsync(pinned, dev + 3, n, (CUstream)s));
		CU(ods_cu.cuStreamSynchronize((CUstream)s));
		CHECKF(a.res == (ssize_t)n, "rep %d: bytes_read %zd", rep, a.res);
		VERIFY(pinned, want, n, "rep %d: the copy after the stream read saw old bytes", rep);
	}

	t_phase = "stream: deferred evaluation through a host function";
	struct sargs d = { 0, 4096 + 5, 0, -1 };
	CU(ods_cu.cuMemsetD8(dev, 0, n));
	CU(ods_cu.cuCtxSynchronize());
	CU(ods_cu.cuLaunchHostFunc((CUstream)s, set_size, &d));
	OK(opends_stream_read(fh, (void *)(uintptr_t)dev, &d.size, &d.foff, &d.boff, &d.res, s));
	CU(ods_cu.cuMemcpyDtoHAsync(pinned, dev, n, (CUstream)s));
	OK(opends_stream_synchronize(s));
	CHECKF(d.res == (ssize_t)(3 * T_MiB + 1), "deferred: bytes_read %zd, expected %zu (size read at submit?)",
	       d.res, 3 * T_MiB + 1);
	VERIFY(pinned, want, 3 * T_MiB + 1, "deferred read data");

	t_phase = "stream: write then read back on the NULL stream";
	struct sargs w = { T_MiB, 12345, 0, -1 }, r = { T_MiB, 12345, 2 * T_MiB, -1 };
	t_fill_seed(host, 77, T_MiB);
	CU(ods_cu.cuMemcpyHtoD(dev, host, T_MiB));
	CU(ods_cu.cuCtxSynchronize());
	OK(opends_stream_write(fh, (void *)(uintptr_t)dev, &w.size, &w.foff, &w.boff, &w.res, NULL));
	OK(opends_stream_read(fh, (void *)(uintptr_t)dev, &r.size, &r.foff, &r.boff, &r.res, NULL));
	OK(opends_stream_synchronize(NULL));
	CHECKF(w.res == (ssize_t)T_MiB && r.res == (ssize_t)T_MiB, "NULL stream: %zd %zd", w.res, r.res);
	CU(ods_cu.cuMemcpyDtoH(pinned, dev + 2 * T_MiB, T_MiB));
	VERIFY(pinned, host, T_MiB, "NULL stream write/read");

	t_phase = "stream: register hints, destroy";
	OK(opends_stream_register(s, OPENDS_STREAM_FIXED_FILE_SIZE));
	OK(opends_stream_deregister(s));
	EXPECT_ERR(opends_stream_deregister(s), OPENDS_INVALID_VALUE);
	OK(opends_stream_destroy(s));
	EXPECT_ERR(opends_stream_destroy(s), OPENDS_INVALID_VALUE);
	CU(ods_cu.cuMemFreeHost(pinned));
	free(want);
	OK(opends_handle_deregister(fh));
	close(fd);
}

/* More streams than the driver has hardware queues (8 by default), each
 * with reads in flight: every stream's wait for its own I/O shares a queue
 * with other streams' work. Before the copies moved onto the caller's
 * stream, this hung (docs/stream-ordering.md); the watchdog catches a
 * hang. */
static void many_streams(const char *path)
{
	t_phase = "64 streams with reads in flight";
	enum { NS = 64, PER = 3 };
	const size_t L = 100 * T_KiB + 17;
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	opends_handle_t fh;
	OK(opends_handle_register(&fh, fd));
	opends_stream_t st[NS];
	static struct sargs o[NS][PER];
	for (int i = 0; i < NS; i++)
		OK(opends_stream_create(&st[i]));
	CU(ods_cu.cuMemsetD8(dev, 0, (size_t)NS * PER * L));
	CU(ods_cu.cuCtxSynchronize());
	for (int j = 0; j < PER; j++)
		for (int i = 0; i < NS; i++) {
			size_t k = (size_t)i * PER + (size_t)j;
			o[i][j] = (struct sargs){ L, (off_t)(k * 65537 % (fsize - L)), (off_t)(k * L), -1 };
			OK(opends_stream_read(fh, (void *)(uintptr_t)dev, &o[i][j].size, &o[i][j].foff, &o[i][j].boff,
					      &o[i][j].res, st[i]));
		}
	for (int i = 0; i < NS; i++)
		OK(opends_stream_synchronize(st[i]));
	CU(ods_cu.cuMemcpyDtoH(host, dev, (size_t)NS * PER * L));
	for (int i = 0; i < NS; i++) {
		for (int j = 0; j < PER; j++) {
			size_t k = (size_t)i * PER + (size_t)j;
			CHECKF(o[i][j].res == (ssize_t)L, "stream %d op %d: bytes_read %zd", i, j, o[i][j].res);
			VERIFY(host + k * L, oracle + o[i][j].foff, L, "stream %d op %d", i, j);
		}
		OK(opends_stream_destroy(st[i]));
	}
	OK(opends_handle_deregister(fh));
	close(fd);
}

/* ---- the context rule (API.md, "Accelerator context — revised") ---------- */

static void contexts(opends_handle_t fh)
{
	t_phase = "another context current: the buffer's context serves it";
	CUdevice d;
	CU(ods_cu.cuDeviceGet(&d, 0));
	CUcontext other;
#if CUDA_VERSION >= 13000
	CU(ods_cu.cuCtxCreate(&other, NULL, 0, d));
#else
	CU(ods_cu.cuCtxCreate(&other, 0, d));
#endif
	/* cuCtxCreate made it current on this thread; dev belongs to the
	 * primary context */
	CU(ods_cu.cuMemsetD8(dev, 0, 8192));
	CU(ods_cu.cuCtxSynchronize());
	EXPECT_SSZ(opends_sync_read(fh, (void *)(uintptr_t)dev, 4096, 5, 0), 4096);
	CU(ods_cu.cuMemcpyDtoH(host, dev, 4096));
	VERIFY(host, oracle + 5, 4096, "read with another context current");
	CUcontext cur = NULL;
	CU(ods_cu.cuCtxGetCurrent(&cur));
	CHECKF(cur == other, "the library changed the caller's current context");

	t_phase = "a stream of another context with the buffer of the primary one";
	CUstream s_other;
	CU(ods_cu.cuStreamCreate(&s_other, CU_STREAM_NON_BLOCKING));
	struct sargs a = { 4096, 0, 0, -1 };
	EXPECT_ERR(opends_stream_read(fh, (void *)(uintptr_t)dev, &a.size, &a.foff, &a.boff, &a.res, s_other),
		   OPENDS_CONTEXT_MISMATCH);
	CHECKF(strstr(t_detail(), "cuda:0"), "the detail \"%s\" does not name the devices", t_detail());
	CU(ods_cu.cuStreamDestroy(s_other));

	t_phase = "the NULL stream is the buffer's device's default stream";
	a = (struct sargs){ 4096, 77, 0, -1 };
	OK(opends_stream_read(fh, (void *)(uintptr_t)dev, &a.size, &a.foff, &a.boff, &a.res, NULL));
	CU(ods_cu.cuCtxSetCurrent(primary));
	OK(opends_stream_synchronize(NULL));
	CHECKF(a.res == 4096, "NULL stream read: bytes_read %zd", a.res);
	CU(ods_cu.cuMemcpyDtoH(host, dev, 4096));
	VERIFY(host, oracle + 77, 4096, "NULL stream read with another context current");
	CU(ods_cu.cuCtxDestroy(other));

	t_phase = "no context current";
	CU(ods_cu.cuCtxSetCurrent(NULL));
	EXPECT_SSZ(opends_sync_read(fh, (void *)(uintptr_t)dev, 4096, 0, 0), 4096);
	CU(ods_cu.cuCtxSetCurrent(primary));
}

/* the devices as opends-info reports them, against the driver's answers */
static void devices(void)
{
	t_phase = "device count and properties";
	int n = 0;
	unsigned cnt = 0;
	CU(ods_cu.cuDeviceGetCount(&n));
	OK(opends_device_count(&cnt));
	CHECKF((int)cnt == n, "opends_device_count %u, the driver says %d", cnt, n);
	for (int i = 0; i < n; i++) {
		CUdevice d;
		char name[96], bus[32], line[512];
		opends_device_props_t p;
		CU(ods_cu.cuDeviceGet(&d, i));
		CU(ods_cu.cuDeviceGetName(name, sizeof name, d));
		CU(ods_cu.cuDeviceGetPCIBusId(bus, sizeof bus, d));
		OK(opends_device_get_properties((unsigned)i, &p));
		OK(opends_device_describe((unsigned)i, line, sizeof line));
		printf("%s\n", line);
		CHECKF(!strcmp(p.layer, "cuda") && !strcmp(p.name, name) && !strcmp(p.pci_bus_id, bus),
		       "cuda:%d: layer \"%s\", name \"%s\" (driver \"%s\"), bus \"%s\" (driver \"%s\")", i, p.layer,
		       p.name, name, p.pci_bus_id, bus);
		CHECKF(!(p.peers >> i & 1) && !(p.peers_nvlink & ~p.peers), "cuda:%d: peers %#llx, nvlink %#llx", i,
		       (unsigned long long)p.peers, (unsigned long long)p.peers_nvlink);
		CHECKF(p.pcie_gen == -1 || (p.pcie_gen >= 1 && p.pcie_gen <= 6), "cuda:%d: PCIe gen %d", i, p.pcie_gen);
	}
	opends_device_props_t p;
	EXPECT_ERR(opends_device_get_properties((unsigned)n, &p), OPENDS_INVALID_VALUE);
}

/* ---- what a small synchronous copy costs the caller ------------------------ */

/* Timing for the GPU probe (issue 17's files1t), checked byte-exact but not
 * judged: the caller's cost of one small copy into device memory, the
 * driver's two ways (the floor), then opends_sync_read of a hot range (the
 * inline path: pread into a pinned bounce, one copy) with each way of
 * cuda's synchronous copy (OPENDS_CUDA_SYNC_COPY), the driver reopened per
 * way. Best mean of 3 rounds of 500 calls. Leaves the driver open with the
 * caller's setting. */
static double per_call_us(double t0, unsigned n)
{
	return (t_now() - t0) * 1e6 / n;
}

static void copy_costs(const char *path)
{
	t_phase = "small synchronous copy costs";
	static const size_t sizes[3] = { 4096, 64 << 10, 256 << 10 };
	static const char *const ways[3] = { "stream", "ptds", "legacy" };
	enum { N = 500, ROUNDS = 3 };
	void *pin;
	CUstream st;
	CU(ods_cu.cuMemAllocHost(&pin, 256 << 10));
	memset(pin, 0x5a, 256 << 10);
	CU(ods_cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	for (unsigned z = 0; z < 3; z++) {
		double best[2] = { 1e9, 1e9 };
		for (unsigned r = 0; r < ROUNDS; r++) {
			double t0 = t_now();
			for (unsigned i = 0; i < N; i++)
				CU(ods_cu.cuMemcpyHtoD(dev, pin, sizes[z]));
			double a = per_call_us(t0, N);
			t0 = t_now();
			for (unsigned i = 0; i < N; i++) {
				CU(ods_cu.cuMemcpyHtoDAsync(dev, pin, sizes[z], st));
				CU(ods_cu.cuStreamSynchronize(st));
			}
			double b = per_call_us(t0, N);
			best[0] = a < best[0] ? a : best[0];
			best[1] = b < best[1] ? b : best[1];
		}
		printf("copy cost %zu B: cuMemcpyHtoD %.2f us, cuMemcpyHtoDAsync + cuStreamSynchronize %.2f us\n",
		       sizes[z], best[0], best[1]);
	}
	/* what classifying an unregistered device pointer costs a call
	 * (cuda_classify: one cuPointerGetAttributes of 3 attributes) */
	double best = 1e9;
	for (unsigned r = 0; r < ROUNDS; r++) {
		unsigned type = 0;
		CUcontext ctx = NULL;
		int ordinal = -1;
		CUpointer_attribute at[3] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
					      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
		void *data[3] = { &type, &ctx, &ordinal };
		double t0 = t_now();
		for (unsigned i = 0; i < N; i++)
			CU(ods_cu.cuPointerGetAttributes(3, at, data, dev));
		double c = per_call_us(t0, N);
		best = c < best ? c : best;
	}
	printf("classify cost: cuPointerGetAttributes (3 attributes) %.2f us\n", best);
	CU(ods_cu.cuStreamDestroy(st));
	CU(ods_cu.cuMemFreeHost(pin));
	const char *had = getenv("OPENDS_CUDA_SYNC_COPY");
	char *keep = had ? strdup(had) : NULL;
	OK(opends_driver_close());
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	for (unsigned w = 0; w < 3; w++) {
		setenv("OPENDS_CUDA_SYNC_COPY", ways[w], 1);
		OK(opends_driver_open());
		opends_handle_t fh;
		OK(opends_handle_register(&fh, fd));
		for (int reg = 0; reg < 2; reg++) {
			/* unregistered (each call classifies the pointer), then registered */
			if (reg)
				OK(opends_buf_register((void *)(uintptr_t)dev, DEVLEN, 0));
			double cost[3];
			for (unsigned z = 0; z < 3; z++) {
				size_t n = sizes[z];
				rd_dev(fh, false, 4096, n, 0); /* byte-exact once, and the range hot */
				cost[z] = 1e9;
				for (unsigned r = 0; r < ROUNDS; r++) {
					double t0 = t_now();
					for (unsigned i = 0; i < N; i++)
						EXPECT_SSZ(opends_sync_read(fh, (void *)(uintptr_t)dev, n, 4096, 0), (ssize_t)n);
					double c = per_call_us(t0, N);
					cost[z] = c < cost[z] ? c : cost[z];
				}
			}
			printf("sync read cost (OPENDS_CUDA_SYNC_COPY=%s, buffer %s): 4096 B %.2f us, 65536 B %.2f us, "
			       "262144 B %.2f us\n",
			       ways[w], reg ? "registered" : "not registered", cost[0], cost[1], cost[2]);
			if (reg)
				OK(opends_buf_deregister((void *)(uintptr_t)dev));
		}
		OK(opends_handle_deregister(fh));
		OK(opends_driver_close());
	}
	close(fd);
	if (keep)
		setenv("OPENDS_CUDA_SYNC_COPY", keep, 1);
	else
		unsetenv("OPENDS_CUDA_SYNC_COPY");
	free(keep);
	OK(opends_driver_open());
}

int main(void)
{
	t_watchdog(240);
	load_cuda();
	if (!getenv("OPENDS_ACCEL"))
		setenv("OPENDS_ACCEL", "cuda", 1);
	OK(opends_driver_open());
	printf("backend %s\n", opends_driver_backend());
	devices();

	char path[PATH_MAX], wpath[PATH_MAX];
	t_path(path, sizeof path, "gpu.bin");
	t_path(wpath, sizeof wpath, "gpuw.bin");
	fsize = 10 * T_MiB + 1234;
	t_write_pattern_file(path, fsize, hashpat);
	oracle = t_oracle(fsize, hashpat);
	CU(ods_cu.cuMemAlloc(&dev, DEVLEN));
	host = t_xmalloc(DEVLEN);

	for (int direct = 0; direct < 2; direct++) {
		int fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
		CHECK(fd >= 0);
		opends_handle_t fh;
		OK(opends_handle_register(&fh, fd));
		sweep(fh, direct);
		if (direct) {
			async_batch(fh);
			contexts(fh);
		}
		/* host memory (and pinned host memory) through the cuda layer */
		t_phase = "host targets under the cuda layer";
		memset(host, T_CANARY, 3 * T_MiB);
		EXPECT_SSZ(opends_sync_read(fh, host, 2 * T_MiB + 1, 4093, 7), (ssize_t)(2 * T_MiB + 1));
		VERIFY(host + 7, oracle + 4093, 2 * T_MiB + 1, "host target");
		VERIFY_CANARY(host, 7, "before host target");
		OK(opends_handle_deregister(fh));
		close(fd);
	}
	read_ahead(path);
	/* before streams(), which rewrites part of the file (the oracle then
	 * no longer holds for the ranges it reads) */
	copy_costs(path);
	writes(wpath, false);
	writes(wpath, true);
	/* before streams(), which rewrites part of the file */
	many_streams(path);
	streams(path);

	CU(ods_cu.cuMemFree(dev));
	OK(opends_driver_close());
	free(host);
	free(oracle);
	printf("OK\n");
	return 0;
}
