/*
 * cufile_dropin_bench --lib=PATH --file=PATH [--size-mib=N] [--chunk-mib=N]
 *                     [--threads=N] [--mode=hot|cold] [--mem=device|host]
 *                     [--repeat=N]
 *
 * Reads a whole file into memory with cuFileRead through the libcufile.so.0
 * named by --lib (NVIDIA's or OpenDS's drop-in: run it once per library on
 * the same file), in chunks spread over threads, and prints one line with
 * the throughput. The file is created (--size-mib, default 4096) when it is
 * missing or shorter.
 *   hot:  an fd without O_DIRECT, after one pass with pread has put the file
 *         in the page cache;
 *   cold: the page cache is dropped first (as root: drop_caches; else
 *         posix_fadvise DONTNEED) and the fd has O_DIRECT.
 * A 4 KiB sample of every chunk is checked against the pattern written.
 * Into device memory, the line also gives the pinned host-to-device copy
 * ceiling measured in the same run and the ratio to it.
 * --repeat=N reads the whole file N times in the one process (default 3
 * hot, 1 cold; cold passes drop the cache before each) and reports the
 * median pass, with the spread (docs/bench.md's rule for repeated legs):
 * one 8 GiB hot pass lasts 0.2 s, so one pass alone swings by 10 % or more.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cufile.h"
#include "cufile_api.h"

#include "../gds/cudrv.h"

#ifdef cuFileDriverClose
#undef cuFileDriverClose
#endif

static struct ods_cufile_api L; /* src/vendor/cufile_api.h */

static CUfileHandle_t fh;
static uint8_t *mem;
static size_t fsize, chunk;
static unsigned nthreads;
static bool device = true;
static int failed;

static uint8_t pat(uint64_t x)
{
	return (uint8_t)((x * 2654435761u) >> 13);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint8_t *slot = mem + (size_t)t * chunk;
	uint8_t sample[4096];
	if (device)
		td_bind_thread();
	for (size_t i = t; i * chunk < fsize; i += nthreads) {
		size_t off = i * chunk, n = fsize - off < chunk ? fsize - off : chunk;
		ssize_t r = L.cuFileRead(fh, slot, n, (off_t)off, 0);
		if (r != (ssize_t)n) {
			fprintf(stderr, "cuFileRead(%zu at %zu) = %zd (errno %d)\n", n, off, r, errno);
			failed = 1;
			return NULL;
		}
		size_t s = n < sizeof sample ? n : sizeof sample;
		size_t at = n - s; /* the end of the chunk */
		if (device)
			td_to_host(sample, slot + at, s);
		else
			memcpy(sample, slot + at, s);
		for (size_t k = 0; k < s; k++)
			if (sample[k] != pat(off + at + k)) {
				fprintf(stderr, "data mismatch at file offset %zu\n", off + at + k);
				failed = 1;
				return NULL;
			}
	}
	return NULL;
}

/* Out of the page cache: drop_caches as root, else posix_fadvise. */
static void drop_cache(const char *file)
{
	sync();
	int dc = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (dc < 0 || write(dc, "3\n", 2) != 2) {
		int fd = open(file, O_RDONLY);
		if (fd >= 0) {
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
	if (dc >= 0)
		close(dc);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *lib = NULL, *file = NULL, *mode = "hot";
	size_t size_mib = 4096, chunk_mib = 16;
	nthreads = 1;
	unsigned repeat = 0;
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--lib=", 6))
			lib = argv[i] + 6;
		else if (!strncmp(argv[i], "--file=", 7))
			file = argv[i] + 7;
		else if (!strncmp(argv[i], "--size-mib=", 11))
			size_mib = strtoull(argv[i] + 11, NULL, 10);
		else if (!strncmp(argv[i], "--chunk-mib=", 12))
			chunk_mib = strtoull(argv[i] + 12, NULL, 10);
		else if (!strncmp(argv[i], "--threads=", 10))
			nthreads = (unsigned)strtoul(argv[i] + 10, NULL, 10);
		else if (!strncmp(argv[i], "--mode=", 7))
			mode = argv[i] + 7;
		else if (!strncmp(argv[i], "--repeat=", 9))
			repeat = (unsigned)strtoul(argv[i] + 9, NULL, 10);
		else if (!strcmp(argv[i], "--mem=host"))
			device = false;
		else if (!strcmp(argv[i], "--mem=device"))
			device = true;
		else {
			fprintf(stderr, "unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	bool cold = !strcmp(mode, "cold");
	if (!lib || !file || !size_mib || !chunk_mib || !nthreads || (!cold && strcmp(mode, "hot"))) {
		fprintf(stderr, "usage: %s --lib=PATH --file=PATH [--size-mib=N] [--chunk-mib=N] [--threads=N] "
				"[--mode=hot|cold] [--mem=device|host] [--repeat=N]\n",
			argv[0]);
		return 2;
	}
	fsize = size_mib << 20;
	chunk = chunk_mib << 20;
	if (device && !td_init()) {
		printf("SKIP: %s\n", td_why);
		return 77;
	}
	char why[512];
	if (ods_cufile_load(&L, lib, 0, why, sizeof(why))) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	bool dropin = L.dropin;

	/* the file */
	struct stat st;
	if (stat(file, &st) != 0 || (size_t)st.st_size < fsize) {
		int fd = open(file, O_CREAT | O_TRUNC | O_WRONLY, 0644);
		if (fd < 0) {
			perror(file);
			return 1;
		}
		size_t piece = 16 << 20;
		uint8_t *b = malloc(piece);
		for (size_t off = 0; off < fsize; off += piece) {
			size_t n = fsize - off < piece ? fsize - off : piece;
			for (size_t k = 0; k < n; k++)
				b[k] = pat(off + k);
			if (pwrite(fd, b, n, (off_t)off) != (ssize_t)n) {
				perror("pwrite");
				return 1;
			}
		}
		free(b);
		fsync(fd);
		close(fd);
	}
	if (!repeat)
		repeat = cold ? 1 : 3;
	if (repeat > 15)
		repeat = 15;
	if (cold) {
		drop_cache(file);
	} else {
		int fd = open(file, O_RDONLY);
		size_t piece = 16 << 20;
		uint8_t *b = malloc(piece);
		for (size_t off = 0; fd >= 0 && off < fsize; off += piece)
			if (pread(fd, b, piece, (off_t)off) <= 0)
				break;
		free(b);
		if (fd >= 0)
			close(fd);
	}

	CUfileError_t e = L.cuFileDriverOpen();
	if (e.err != CU_FILE_SUCCESS) {
		fprintf(stderr, "cuFileDriverOpen: %d\n", (int)e.err);
		return 1;
	}
	int fd = open(file, O_RDONLY | (cold ? O_DIRECT : 0));
	if (fd < 0) {
		perror(file);
		return 1;
	}
	CUfileDescr_t d;
	memset(&d, 0, sizeof d);
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = fd;
	e = L.cuFileHandleRegister(&fh, &d);
	if (e.err != CU_FILE_SUCCESS) {
		fprintf(stderr, "cuFileHandleRegister: %d (see /run/udev/data advice in docs/cufile-dropin.md)\n",
			(int)e.err);
		return 1;
	}
	size_t memsz = chunk * nthreads;
	if (device) {
		mem = td_alloc(memsz);
	} else if (posix_memalign((void **)&mem, 4096, memsz)) {
		return 1;
	}
	if (L.cuFileBufRegister)
		L.cuFileBufRegister(mem, memsz, 0);

	pthread_t th[256];
	if (nthreads > 256)
		nthreads = 256;
	double pass[15];
	for (unsigned k = 0; k < repeat && !failed; k++) {
		if (cold && k)
			drop_cache(file);
		double t0 = now();
		for (unsigned t = 0; t < nthreads; t++)
			pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
		for (unsigned t = 0; t < nthreads; t++)
			pthread_join(th[t], NULL);
		pass[k] = now() - t0;
	}
	qsort(pass, repeat, sizeof(*pass), cmp_double);
	double dt = pass[repeat / 2]; /* the median pass (the upper one of an even count) */

	if (L.cuFileBufDeregister)
		L.cuFileBufDeregister(mem);
	L.cuFileHandleDeregister(fh);
	close(fd);
	L.cuFileDriverClose_v2();
	double gbs = (double)fsize / dt / 1e9;
	char ceil[64] = "";
	double c = device ? td_h2d_ceiling((size_t)256 << 20, now) : 0;
	if (c > 0)
		snprintf(ceil, sizeof ceil, " h2d_ceiling_GB/s=%.2f ratio=%.2f", c, gbs / c);
	char spread[96] = "";
	if (repeat > 1)
		snprintf(spread, sizeof spread, " passes=%u GB/s_min..max=%.2f..%.2f", repeat,
			 (double)fsize / pass[repeat - 1] / 1e9, (double)fsize / pass[0] / 1e9);
	printf("lib=%s mode=%s mem=%s size_mib=%zu chunk_mib=%zu threads=%u seconds=%.3f GB/s=%.2f%s%s%s\n",
	       dropin ? "opends-dropin" : "nvidia-cufile", mode, device ? "device" : "host", size_mib, chunk_mib,
	       nthreads, dt, gbs, ceil, spread, failed ? " FAILED" : "");
	return failed;
}
