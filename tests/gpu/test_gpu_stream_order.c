/*
 * test_gpu_stream_order: stream reads into device memory on real CUDA
 * streams (issue 18; the hostdev twin is tests/test_stream_order.c).
 *
 * Exit 77 (skip) without libcuda.so.1 or without a GPU.
 *  - pieces finishing out of order (a source whose every fourth MiB
 *    answers late): byte-exact in device memory, the bytes around the
 *    target unchanged, on a stream with values read at the stream and on
 *    one registered with fixed values;
 *  - 256 streams (32x the driver's default hardware queues), 12 reads
 *    each, queued at once, half of them fixed, some of many pieces: every
 *    read exact, none hangs (watchdog);
 *  - waiting costs no CPU: a stream held ~0.4 s by a late read; the
 *    process's CPU time while opends_stream_synchronize waits must stay
 *    under a quarter of the wait (a spinning wait, e.g. cuStreamSynchronize
 *    under the default CU_CTX_SCHED_AUTO, uses all of it). This is what
 *    the cold stream legs' CPU-s/GiB measures;
 *  - a read on a blocking stream (cuStreamCreate(0)) with nothing queued,
 *    behind a host function on the legacy default stream that sets its
 *    values: the values set there are used;
 *  - small reads as the imagenetish stream leg makes them (4096 streams,
 *    ~110 KB each, one thread): reads/s and CPU by thread printed;
 *  - a cold 1 GiB read (dropped from the page cache; OPENDS_TEST_COLD_MIB
 *    sets another size) exact, its CPU-s/GiB
 *    and the CPU of each thread printed, for the record (where the cold
 *    stream legs' CPU goes; the dispatcher is "ods-dispatch").
 */
#include <dirent.h>
#include <sys/resource.h>

#include "../test_stream_common.h"
#include "../test_stream_late.h"
#include "gpu_common.h"



static const size_t F = 27 * T_MiB + 4321;
static uint8_t *oracle;
static CUcontext primary;

static void load_cuda(void)
{
	gpu_open(NULL, 1, &primary, 1, NULL);
}

/* device memory of n bytes, every byte T_CANARY */
static CUdeviceptr dev_canary(size_t n)
{
	CUdeviceptr d = 0;
	CU(ods_cu.cuMemAlloc(&d, n));
	CU(ods_cu.cuMemsetD8(d, T_CANARY, n));
	CU(ods_cu.cuCtxSynchronize());
	return d;
}

static uint8_t *dev_fetch(CUdeviceptr d, size_t n)
{
	uint8_t *h = t_xmalloc(n);
	CU(ods_cu.cuMemcpyDtoH(h, d, n));
	return h;
}

static void *dev_alloc(size_t n)
{
	return (void *)(uintptr_t)dev_canary(n);
}

static uint8_t *dev_view(void *p, size_t n)
{
	return dev_fetch((CUdeviceptr)(uintptr_t)p, n);
}

static void dev_release(void *p)
{
	CU(ods_cu.cuMemFree((CUdeviceptr)(uintptr_t)p));
}

static void host_unview(uint8_t *v)
{
	free(v);
}

static const struct late_mem dev_mem = { dev_alloc, dev_view, host_unview, dev_release };

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* The stream is held by a read whose first MiB answers 0.4 s late; the
 * wait for it must sleep, not spin. */
static void quiet_wait(opends_handle_t late, opends_stream_t s, const char *what)
{
	t_phase = what;
	atomic_store(&L.late_us, 400000);
	CUdeviceptr d = dev_canary(2 * T_MiB);
	struct sop a = { 2 * T_MiB, 0, 0, SENT };
	OK(opends_stream_read(late, (void *)(uintptr_t)d, &a.size, &a.foff, &a.boff, &a.res, s));
	double c0 = cpu_s(), t0 = t_now();
	OK(opends_stream_synchronize(s));
	double wall = t_now() - t0, cpu = cpu_s() - c0;
	atomic_store(&L.late_us, 3000);
	CHECKF(a.res == (ssize_t)(2 * T_MiB), "%s: read gave %zd (%s)", what, a.res, t_errname(a.res));
	uint8_t *buf = dev_fetch(d, 2 * T_MiB);
	VERIFY(buf, oracle, 2 * T_MiB, "%s: data", what);
	free(buf);
	CU(ods_cu.cuMemFree(d));
	printf("%s: waited %.3f s, process CPU %.3f s (%.0f%%)\n", what, wall, cpu, 100 * cpu / wall);
	CHECKF(wall > 0.3, "%s: the stream was held only %.3f s: the case did not hold it", what, wall);
	CHECKF(cpu < 0.25 * wall, "%s: %.3f CPU-s while waiting %.3f s: something spins", what, cpu, wall);
}


/* The process's CPU by thread (name, user+system seconds) since the last
 * call, for the record: where a stream read's CPU goes (issue 18's cold
 * CPU-s/GiB). Threads that used under 10 ms are left out. */
static void cpu_by_thread(const char *what)
{
	static struct {
		long tid;
		unsigned long t;
	} seen[512];
	static int nseen;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	long hz = sysconf(_SC_CLK_TCK);
	printf("%s: CPU by thread:", what);
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char p[300], comm[64] = "?", st[1024];
		snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(p, "r");
		if (f) {
			if (fgets(comm, sizeof comm, f))
				comm[strcspn(comm, "\n")] = 0;
			fclose(f);
		}
		snprintf(p, sizeof p, "/proc/self/task/%s/stat", e->d_name);
		if (!(f = fopen(p, "r")))
			continue;
		char *q = fgets(st, sizeof st, f) ? strrchr(st, ')') : NULL;
		fclose(f);
		unsigned long ut = 0, stt = 0;
		/* after ") ": state, then fields 4..13; utime and stime are 14, 15 */
		if (!q || sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &stt) != 2)
			continue;
		long tid = atol(e->d_name);
		unsigned long t = ut + stt, prev = 0;
		int k;
		for (k = 0; k < nseen && seen[k].tid != tid; k++)
			;
		if (k < nseen)
			prev = seen[k].t;
		else if (nseen < 512)
			seen[nseen].tid = tid, k = nseen++;
		if (k < 512)
			seen[k].t = t;
		if ((t - prev) * 100 >= (unsigned long)hz)
			printf(" %s %.2f", comm, (double)(t - prev) / (double)hz);
	}
	closedir(d);
	printf("\n");
}

/* A cold read (the file dropped from the page cache) into device memory:
 * exact, and its CPU printed by thread. */
static void cold_read(const char *path, size_t size, const uint8_t *want, opends_stream_t s, const char *what)
{
	t_phase = what;
	int fd = t_open(path, O_RDONLY, false);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	opends_handle_t h = t_register(fd);
	CUdeviceptr d = dev_canary(size);
	struct sop a = { size, 0, 0, SENT };
	cpu_by_thread("(before)");
	double c0 = cpu_s(), t0 = t_now(), u0 = thread_cpu_s();
	OK(opends_stream_read(h, (void *)(uintptr_t)d, &a.size, &a.foff, &a.boff, &a.res, s));
	double u1 = thread_cpu_s(), t1 = t_now();
	OK(opends_stream_synchronize(s));
	double wall = t_now() - t0, cpu = cpu_s() - c0, u2 = thread_cpu_s();
	cpu_by_thread(what);
	printf("%s: caller: opends_stream_read %.3f s (%.3f CPU-s), opends_stream_synchronize %.3f s (%.3f CPU-s)\n",
	       what, t1 - t0, u1 - u0, wall - (t1 - t0), u2 - u1);
	CHECKF(a.res == (ssize_t)size, "%s: read gave %zd (%s)", what, a.res, t_errname(a.res));
	uint8_t *buf = dev_fetch(d, size);
	VERIFY(buf, want, size, "%s: data", what);
	free(buf);
	CU(ods_cu.cuMemFree(d));
	OK(opends_handle_deregister(h));
	close(fd);
	printf("%s: %.3f s, %.3f CPU-s (%.2f CPU-s/GiB)\n", what, wall, cpu, cpu / ((double)size / (double)(1u << 30)));
}

/* Small reads as the imagenetish stream leg makes them: one thread, 4096
 * streams, one read of ~110 KB in flight on each, each stream synchronized
 * before its next read, from a hot file. Printed for the record (issue
 * 18's small-operation goal): reads/s and CPU by thread, and the same
 * reads by opends_sync_read from one thread; the last round is checked
 * byte-exact. */
static void small_reads(opends_handle_t h, bool fixed, const char *what)
{
	t_phase = what;
	enum { NS = 4096, N = 6 * NS };
	const size_t SZ = 110 * T_KiB + 17;
	static opends_stream_t st[NS];
	static struct sop o[NS];
	CUdeviceptr d = dev_canary((size_t)NS * SZ);
	for (int i = 0; i < NS; i++) {
		OK(opends_stream_create(&st[i]));
		if (fixed)
			OK(opends_stream_register(st[i], LATE_FIXED));
	}
	cpu_by_thread("(before)");
	/* the calling thread's CPU inside each call, first round (the staging
	 * pool grows) and the later ones apart */
	double c0 = cpu_s(), t0 = t_now(), in_read[2] = { 0, 0 }, in_sync = 0;
	for (size_t k = 0; k < N; k++) {
		size_t j = k % NS;
		double u0 = thread_cpu_s();
		if (k >= NS) {
			OK(opends_stream_synchronize(st[j]));
			CHECKF(o[j].res == (ssize_t)SZ, "%s: read %zu gave %zd (%s)", what, k - NS, o[j].res,
			       t_errname(o[j].res));
		}
		double u1 = thread_cpu_s();
		o[j] = (struct sop){ SZ, (off_t)(k * 7919 * 4096 % (F - SZ)), (off_t)(j * SZ), SENT };
		OK(opends_stream_read(h, (void *)(uintptr_t)d, &o[j].size, &o[j].foff, &o[j].boff, &o[j].res, st[j]));
		in_sync += u1 - u0;
		in_read[k >= NS] += thread_cpu_s() - u1;
	}
	for (int i = 0; i < NS; i++)
		OK(opends_stream_synchronize(st[i]));
	double wall = t_now() - t0, cpu = cpu_s() - c0;
	cpu_by_thread(what);
	printf("%s: caller CPU per read: opends_stream_read %.1f us (first round %.1f us), "
	       "opends_stream_synchronize %.1f us\n",
	       what, 1e6 * in_read[1] / (N - NS), 1e6 * in_read[0] / NS, 1e6 * in_sync / (N - NS));
	uint8_t *buf = dev_fetch(d, (size_t)NS * SZ);
	for (int j = 0; j < NS; j++) {
		CHECKF(o[j].res == (ssize_t)SZ, "%s: last round, stream %d gave %zd", what, j, o[j].res);
		VERIFY(buf + (size_t)j * SZ, oracle + o[j].foff, SZ, "%s: last round, stream %d", what, j);
	}
	free(buf);
	for (int i = 0; i < NS; i++) {
		if (fixed)
			OK(opends_stream_deregister(st[i]));
		OK(opends_stream_destroy(st[i]));
	}
	double mib = (double)N * (double)SZ / (double)T_MiB;
	printf("%s: %d reads of %zu bytes on %d streams: %.3f s, %.0f reads/s, %.0f MiB/s, %.2f CPU-s\n", what, N, SZ,
	       NS, wall, N / wall, mib / wall, cpu);
	if (!fixed) {
		t0 = t_now();
		for (size_t k = 0; k < N; k++) {
			size_t j = k % NS;
			ssize_t r = opends_sync_read(h, (void *)(uintptr_t)d, SZ, (off_t)(k * 7919 * 4096 % (F - SZ)),
						     (off_t)(j * SZ));
			CHECKF(r == (ssize_t)SZ, "%s: opends_sync_read %zu gave %zd", what, k, r);
		}
		wall = t_now() - t0;
		printf("%s, the same by opends_sync_read from one thread: %.3f s, %.0f reads/s, %.0f MiB/s\n", what,
		       wall, N / wall, mib / wall);
	}
	CU(ods_cu.cuMemFree(d));
}

/* A stream made with cuStreamCreate(0) is blocking: its work waits for
 * earlier work on the legacy default stream, which its own cuStreamQuery
 * does not see. A read queued on it, with nothing else queued on it, behind
 * a host function on the legacy stream that sets the read's values, must
 * use the values set there (read when the stream gets there), not those
 * at the call: only streams the library made (non-blocking) are taken as
 * reached at the call when idle. */
static struct sop lw;
static void CUDA_CB set_late(void *p)
{
	(void)p;
	usleep(50000);
	lw.size = 2 * T_MiB;
	lw.foff = 8192;
}

static void legacy_wait(opends_handle_t h)
{
	t_phase = "a blocking stream behind the legacy default stream";
	CUstream b = NULL;
	CU(ods_cu.cuStreamCreate(&b, 0));
	CUdeviceptr d = dev_canary(4 * T_MiB);
	for (int reg = 0; reg < 2; reg++) {
		if (reg)
			OK(opends_stream_register(b, 0));
		CU(ods_cu.cuMemsetD8(d, T_CANARY, 4 * T_MiB));
		CU(ods_cu.cuCtxSynchronize());
		lw = (struct sop){ T_MiB, 4096, 0, SENT };
		CU(ods_cu.cuLaunchHostFunc(NULL, set_late, NULL));
		OK(opends_stream_read(h, (void *)(uintptr_t)d, &lw.size, &lw.foff, &lw.boff, &lw.res, b));
		OK(opends_stream_synchronize(b));
		CHECKF(lw.res == (ssize_t)(2 * T_MiB), "%s%s: read gave %zd (%s), expected the size set on the legacy "
		       "stream ahead of it", t_phase, reg ? " (registered)" : "", lw.res, t_errname(lw.res));
		uint8_t *buf = dev_fetch(d, 4 * T_MiB);
		VERIFY(buf, oracle + 8192, 2 * T_MiB, "%s: the offset set on the legacy stream", t_phase);
		VERIFY_CANARY(buf + 2 * T_MiB, 2 * T_MiB, "%s: past the bytes read", t_phase);
		free(buf);
	}
	OK(opends_stream_deregister(b));
	CU(ods_cu.cuStreamDestroy(b));
	CU(ods_cu.cuMemFree(d));
	printf("%s: values set there used, exact\n", t_phase);
}

/* What one driver call of a stream operation costs the calling thread
 * (CPU us per call, printed for the record): the caller of small stream
 * reads is the bound of their rate (issue 18), and each read queues a few
 * of these. */
static void driver_costs(void)
{
	t_phase = "driver costs";
	enum { R = 4096, SZ = 110 * 1024 };
	CUstream s = NULL;
	CU(ods_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	void *flags = NULL, *pin = NULL;
	CUdeviceptr fd = 0, d = 0;
	CU(ods_cu.cuMemHostAlloc(&flags, 64, CU_MEMHOSTALLOC_DEVICEMAP));
	CU(ods_cu.cuMemHostGetDevicePointer(&fd, flags, 0));
	*(volatile uint32_t *)flags = 1;
	CU(ods_cu.cuMemHostAlloc(&pin, SZ, 0));
	CU(ods_cu.cuMemAlloc(&d, SZ));
	static const char *const names[] = { "cuCtxPushCurrent+cuCtxPopCurrent", "cuStreamGetCtx",
					     "cuStreamWriteValue32", "cuStreamWaitValue32 (open)",
					     "cuMemcpyHtoDAsync 110 KiB", "cuStreamQuery (idle)",
					     "cuPointerGetAttributes (1)",
					     "cuStreamBatchMemOp (wait (open) + write: a gate)" };
	printf("driver costs, caller CPU per call:");
	for (int w = 0; w < 8; w++) {
		if (w == 7 && !ods_cu.cuStreamBatchMemOp)
			break; /* an older driver: gates take two calls */
		double c = 0;
		for (int i = 0; i < R; i++) {
			if (i % 256 == 0)
				CU(ods_cu.cuStreamSynchronize(s));
			double u = thread_cpu_s();
			CUcontext ctx = NULL;
			unsigned type = 0;
			switch (w) {
			case 0:
				CU(ods_cu.cuCtxPushCurrent(primary));
				CU(ods_cu.cuCtxPopCurrent(&ctx));
				break;
			case 1: CU(ods_cu.cuStreamGetCtx(s, &ctx)); break;
			case 2: CU(ods_cu.cuStreamWriteValue32(s, fd + 4, (uint32_t)i, CU_STREAM_WRITE_VALUE_DEFAULT)); break;
			case 3: CU(ods_cu.cuStreamWaitValue32(s, fd, 1, CU_STREAM_WAIT_VALUE_GEQ)); break;
			case 4: CU(ods_cu.cuMemcpyHtoDAsync(d, pin, SZ, s)); break;
			case 5: CU(ods_cu.cuStreamQuery(s)); break;
			case 7: {
				CUstreamBatchMemOpParams p[2];
				memset(p, 0, sizeof(p));
				p[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
				p[0].waitValue.address = fd;
				p[0].waitValue.value = 1;
				p[0].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
				p[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
				p[1].writeValue.address = fd + 4;
				p[1].writeValue.value = (uint32_t)i;
				CU(ods_cu.cuStreamBatchMemOp(s, 2, p, 0));
				break;
			}
			default:
				CU(ods_cu.cuPointerGetAttributes(1, (CUpointer_attribute[]){ CU_POINTER_ATTRIBUTE_MEMORY_TYPE },
								 (void *[]){ &type }, d));
				break;
			}
			c += thread_cpu_s() - u;
		}
		printf(" %s %.2f us;", names[w], 1e6 * c / R);
	}
	printf("\n");
	CU(ods_cu.cuStreamSynchronize(s));
	CU(ods_cu.cuStreamDestroy(s));
	CU(ods_cu.cuMemFree(d));
	CU(ods_cu.cuMemFreeHost(pin));
	CU(ods_cu.cuMemFreeHost(flags));
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(280);
	load_cuda();
	char path[PATH_MAX];
	t_path(path, sizeof path, "gpu_order.bin");
	t_write_pattern_file(path, F, hashpat);
	oracle = t_oracle(F, hashpat);

	t_driver_open();
	printf("backend %s\n", opends_driver_backend());
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t file = t_register(fd);
	opends_handle_t late = late_register(oracle, F, 3000);
	opends_stream_t s, sf;
	late_streams(&s, &sf);

	late_out_of_order(&dev_mem, late, F, oracle, s, "out of order, values read at the stream");
	late_out_of_order(&dev_mem, late, F, oracle, sf, "out of order, fixed values");
	late_many(&dev_mem, file, F, oracle, "256 streams, a file");
	late_many(&dev_mem, late, F, oracle, "256 streams, the late source");
	legacy_wait(file);
	driver_costs();
	small_reads(file, false, "small reads, values read at the stream");
	small_reads(file, true, "small reads, fixed values");
	quiet_wait(late, s, "a held stream's wait, values read at the stream");
	quiet_wait(late, sf, "a held stream's wait, fixed values");
	/* 1 GiB + a bit: 16 MiB pieces; OPENDS_TEST_COLD_MIB=8192 for the
	 * bench's 8 GiB leg, more pieces than the caller queues ahead of the
	 * stream (stream_accel.c, QWIN) */
	const char *cm = getenv("OPENDS_TEST_COLD_MIB");
	const size_t G = (cm && atol(cm) > 0 ? (size_t)atol(cm) << 20 : (size_t)1 << 30) + 12345;
	char gpath[PATH_MAX];
	t_path(gpath, sizeof gpath, "gpu_order_1g.bin");
	t_write_pattern_file(gpath, G, hashpat);
	uint8_t *goracle = t_oracle(G, hashpat);
	cold_read(gpath, G, goracle, s, "a cold read, values read at the stream");
	cold_read(gpath, G, goracle, sf, "a cold read, fixed values");
	free(goracle);
	unlink(gpath);

	late_end(s, sf, late, file, fd);
	free(oracle);
	printf("gpu stream order: OK\n");
	return 0;
}
