/*
 * gpubench: file -> GPU memory through OpenDS, next to the ceilings that
 * bound it, measured in the same run (the disk's speed varies between runs).
 *
 *   gpubench <dir> [<dir> ...]   one 4 GiB file per dir (e.g. /dev/shm and
 *                                a folder on the ext4 disk)
 * Environment: GPUBENCH_GIB (file size, default 4), GPUBENCH_THREADS (list
 * of OPENDS_IO_THREADS values to try, default "4 8 12").
 *
 * Per file: the raw host-read ceiling (8 threads x 4 MiB pread: O_DIRECT
 * cold, buffered hot), then opends_sync_read of the whole file into
 * cuMemAlloc'ed memory (uring; cold after dropping the page cache, and hot),
 * then 4 KiB hot random reads (latency p50/p99) into device and host
 * memory. Once: the pinned host-to-device copy ceiling at 2 MiB and 64 MiB
 * copies. Sampled pages of every device read are checked.
 * Needs root for drop_caches (else cold runs use posix_fadvise DONTNEED).
 */
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <opends.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h" /* the project's one libcuda loader (src/vendor/) */

#define MiB ((size_t)1 << 20)
#define DIE(...)                                        \
	do {                                            \
		fprintf(stderr, "gpubench: " __VA_ARGS__); \
		fprintf(stderr, "\n");                  \
		exit(1);                                \
	} while (0)
#define CU(call)                                                       \
	do {                                                           \
		CUresult r_ = (call);                                  \
		if (r_ != CUDA_SUCCESS)                                \
			DIE("%s failed: CUresult %d", #call, (int)r_); \
	} while (0)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t word_at(uint64_t off)
{
	return (off / 8) * 0x9e3779b97f4a7c15ull;
}

static void make_file(const char *path, size_t size)
{
	struct stat st;
	if (stat(path, &st) == 0 && (size_t)st.st_size == size)
		return;
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT, 0644);
	if (fd < 0)
		fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		DIE("open %s: %s", path, strerror(errno));
	size_t blk = 16 * MiB;
	uint64_t *b;
	if (posix_memalign((void **)&b, 4096, blk))
		DIE("out of memory");
	for (size_t off = 0; off < size; off += blk) {
		for (size_t i = 0; i < blk / 8; i++)
			b[i] = word_at(off + i * 8);
		if (pwrite(fd, b, blk, (off_t)off) != (ssize_t)blk)
			DIE("write %s: %s", path, strerror(errno));
	}
	fsync(fd);
	close(fd);
	free(b);
}

static void drop_cache(const char *path)
{
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "3", 1) != 1)
			perror("drop_caches");
		close(fd);
	}
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
}

static void warm(const char *path, size_t size)
{
	int fd = open(path, O_RDONLY);
	char *b = malloc(16 * MiB);
	for (size_t off = 0; off < size; off += 16 * MiB)
		if (pread(fd, b, 16 * MiB, (off_t)off) < 0)
			break;
	free(b);
	close(fd);
}

/* ---- raw host-read ceiling: T threads x 4 MiB pread ----------------------- */

struct rarg {
	int fd;
	size_t size, blk;
	unsigned t, nt;
};

static void *rthread(void *p)
{
	struct rarg *a = p;
	char *b;
	if (posix_memalign((void **)&b, 4096, a->blk))
		return NULL;
	for (size_t off = (size_t)a->t * a->blk; off < a->size; off += (size_t)a->nt * a->blk)
		if (pread(a->fd, b, a->blk, (off_t)off) < 0)
			break;
	free(b);
	return NULL;
}

static double raw_read(const char *path, size_t size, bool direct)
{
	int fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
	if (fd < 0)
		return -1;
	enum { T = 8 };
	pthread_t th[T];
	struct rarg a[T];
	double t0 = now();
	for (unsigned i = 0; i < T; i++) {
		a[i] = (struct rarg){ fd, size, 4 * MiB, i, T };
		pthread_create(&th[i], NULL, rthread, &a[i]);
	}
	for (unsigned i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	double dt = now() - t0;
	close(fd);
	return (double)size / dt / 1e9;
}

/* ---- pinned H2D ceiling ------------------------------------------------------ */

static double h2d(CUdeviceptr dev, size_t total, size_t piece)
{
	void *h;
	CU(ods_cu.cuMemHostAlloc(&h, 64 * MiB, 0));
	CUstream s;
	CU(ods_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU(ods_cu.cuMemcpyHtoDAsync(dev, h, piece, s)); /* warm-up */
	CU(ods_cu.cuStreamSynchronize(s));
	double t0 = now();
	for (size_t off = 0; off < total; off += piece)
		CU(ods_cu.cuMemcpyHtoDAsync(dev + (off % (total - piece + 1)), (char *)h + off % (64 * MiB - piece + 1),
				       piece, s));
	CU(ods_cu.cuStreamSynchronize(s));
	double dt = now() - t0;
	CU(ods_cu.cuMemFreeHost(h));
	return (double)total / dt / 1e9;
}

/* ---- OpenDS ------------------------------------------------------------------ */

static void check_sample(CUdeviceptr dev, size_t size)
{
	uint64_t w[512];
	for (int i = 0; i < 16; i++) {
		size_t off = (size / 16 * (size_t)i) & ~(size_t)4095;
		CU(ods_cu.cuMemcpyDtoH(w, dev + off, sizeof w));
		for (int k = 0; k < 512; k++)
			if (w[k] != word_at(off + (size_t)k * 8))
				DIE("data check failed at offset %zu", off + (size_t)k * 8);
	}
}

static double ods_read(const char *path, CUdeviceptr dev, size_t size, bool direct_fd)
{
	int fd = open(path, O_RDONLY | (direct_fd ? O_DIRECT : 0));
	if (fd < 0)
		DIE("open %s: %s", path, strerror(errno));
	opends_handle_t fh;
	opends_error_t e = opends_handle_register(&fh, fd);
	if (e.err)
		DIE("handle_register: %s", opends_last_error_detail());
	double t0 = now();
	ssize_t r = opends_sync_read(fh, (void *)(uintptr_t)dev, size, 0, 0);
	double dt = now() - t0;
	if (r != (ssize_t)size)
		DIE("opends_sync_read returned %zd (%s)", r, opends_last_error_detail());
	opends_handle_deregister(fh);
	close(fd);
	check_sample(dev, size);
	return (double)size / dt / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void latency(const char *path, size_t size, void *buf, const char *what)
{
	int fd = open(path, O_RDONLY);
	opends_handle_t fh;
	if (opends_handle_register(&fh, fd).err)
		DIE("handle_register: %s", opends_last_error_detail());
	enum { N = 20000 };
	static double us[N];
	uint64_t x = 12345;
	for (int i = 0; i < N; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		off_t off = (off_t)(((x >> 11) % (size / 4096)) * 4096);
		double t0 = now();
		ssize_t r = opends_sync_read(fh, buf, 4096, off, 0);
		us[i] = (now() - t0) * 1e6;
		if (r != 4096)
			DIE("4 KiB read returned %zd", r);
	}
	qsort(us, N, sizeof *us, cmp_d);
	printf("  4 KiB hot random read into %-6s  p50 %.1f us  p99 %.1f us\n", what, us[N / 2], us[N * 99 / 100]);
	opends_handle_deregister(fh);
	close(fd);
}

static void driver(const char *threads, const char *backend)
{
	setenv("OPENDS_BACKEND", backend, 1);
	setenv("OPENDS_ACCEL", "cuda", 1);
	if (threads)
		setenv("OPENDS_IO_THREADS", threads, 1);
	else
		unsetenv("OPENDS_IO_THREADS");
	opends_error_t e = opends_driver_open();
	if (e.err)
		DIE("driver_open: %s", opends_last_error_detail());
}

int main(int argc, char **argv)
{
	if (argc < 2)
		DIE("usage: gpubench <dir> [<dir> ...]");
	char why[256];
	if (ods_cu_load(why, sizeof(why)) != ODS_CU_OK)
		DIE("%s", why);
	CUdevice d;
	CUcontext ctx;
	CU(ods_cu.cuDeviceGet(&d, 0));
	CU(ods_cu.cuDevicePrimaryCtxRetain(&ctx, d));
	CU(ods_cu.cuCtxSetCurrent(ctx));

	size_t gib = getenv("GPUBENCH_GIB") ? strtoul(getenv("GPUBENCH_GIB"), NULL, 10) : 4;
	size_t size = gib << 30;
	const char *tl = getenv("GPUBENCH_THREADS") ? getenv("GPUBENCH_THREADS") : "4 8 12";
	CUdeviceptr dev;
	CU(ods_cu.cuMemAlloc(&dev, size));
	printf("pinned H2D copy ceiling: %.1f GB/s at 2 MiB copies, %.1f GB/s at 64 MiB copies\n",
	       h2d(dev, size, 2 * MiB), h2d(dev, size, 64 * MiB));
	void *hbuf;
	if (posix_memalign(&hbuf, 4096, 4096))
		DIE("oom");

	for (int i = 1; i < argc; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/gpubench-%zuG.bin", argv[i], gib);
		double t0 = now();
		make_file(path, size);
		printf("\n== %s (%zu GiB; made in %.1f s)\n", path, gib, now() - t0);
		drop_cache(path);
		printf("  ceiling: raw O_DIRECT pread, 8 thr x 4 MiB, cold : %.2f GB/s\n", raw_read(path, size, true));
		warm(path, size);
		printf("  ceiling: raw buffered pread, 8 thr x 4 MiB, hot  : %.2f GB/s\n", raw_read(path, size, false));
		printf("  (same, O_DIRECT on the hot file: %.2f GB/s)\n", raw_read(path, size, true));
		char buf[64];
		snprintf(buf, sizeof buf, "%s", tl);
		for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
			driver(tok, "uring");
			drop_cache(path);
			double cold = ods_read(path, dev, size, false);
			/* O_DIRECT reads leave the page cache empty: fill it */
			warm(path, size);
			double hot = ods_read(path, dev, size, false);
			warm(path, size);
			double hotd = ods_read(path, dev, size, true);
			printf("  uring %2s threads -> GPU: cold %.2f GB/s, hot %.2f GB/s (O_DIRECT fd: %.2f GB/s)\n", tok,
			       cold, hot, hotd);
			opends_driver_close();
		}
		driver(NULL, "ref");
		warm(path, size);
		printf("  ref (reference)   -> GPU: hot %.2f GB/s\n", ods_read(path, dev, size, false));
		opends_driver_close();
		driver(NULL, "uring");
		warm(path, size);
		latency(path, size, (void *)(uintptr_t)dev, "device");
		latency(path, size, hbuf, "host");
		opends_driver_close();
		if (!getenv("GPUBENCH_KEEP"))
			unlink(path);
	}
	CU(ods_cu.cuMemFree(dev));
	return 0;
}
