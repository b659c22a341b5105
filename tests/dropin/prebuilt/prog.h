/*
 * What the shaped cuFile programs of this folder share (cufile_sample_rw.c,
 * cufile_batch_poll.c, cufile_async.c, cufile_threads.cpp): memory on the
 * host or (built with -DPROG_CUDA and -lcuda) on a GPU, the file oracle,
 * failing, and the "= name value" answer lines that run1.sh compares with
 * an expected file and gpu-compare.sh with NVIDIA's library.
 *
 * Usage of every program: PROG [--mem=host|device] DIR. Exit 0 pass,
 * 1 fail, 77 skip (device memory asked of a build without CUDA, or no GPU).
 * Only cuFile 1.15's functions are linked by name, so that the programs
 * build against the toolkit's cufile.h on the GPU machine too.
 */
#ifndef PROG_H
#define PROG_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cufile.h>

#define FAIL(...)                                                  \
	do {                                                       \
		fprintf(stderr, "FAIL line %d: ", __LINE__);       \
		fprintf(stderr, __VA_ARGS__);                      \
		fprintf(stderr, "\n");                             \
		exit(1);                                           \
	} while (0)

#define SKIP(...)                                                  \
	do {                                                       \
		printf("SKIP: ");                                  \
		printf(__VA_ARGS__);                               \
		printf("\n");                                      \
		exit(77);                                          \
	} while (0)

static bool device;

#ifdef PROG_CUDA
static CUcontext prog_ctx;
#define CU_OK(call)                                                      \
	do {                                                             \
		CUresult r_ = (call);                                    \
		if (r_ != CUDA_SUCCESS)                                  \
			FAIL("%s: CUresult %d", #call, (int)r_);         \
	} while (0)
#endif

#ifdef PROG_CUDA
/* GPU 0's primary context, current on this thread (others call
 * prog_thread_ctx); skip without a GPU. */
static inline void prog_cuda_ctx(void)
{
	CUdevice dev;
	if (prog_ctx)
		return;
	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS)
		SKIP("no usable GPU");
	CU_OK(cuDevicePrimaryCtxRetain(&prog_ctx, dev));
	CU_OK(cuCtxSetCurrent(prog_ctx));
}
#endif

/* Parse --mem=; return DIR. Device memory: prog_cuda_ctx. */
static inline const char *prog_args(int argc, char **argv)
{
	const char *dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mem=device"))
			device = true;
		else if (!strcmp(argv[i], "--mem=host"))
			device = false;
		else if (argv[i][0] != '-')
			dir = argv[i];
	}
	if (!dir)
		FAIL("usage: %s [--mem=host|device] DIR", argv[0]);
	if (device) {
#ifdef PROG_CUDA
		prog_cuda_ctx();
#else
		SKIP("built without CUDA (-DPROG_CUDA): host memory only");
#endif
	}
	return dir;
}

static inline void prog_thread_ctx(void)
{
#ifdef PROG_CUDA
	if (prog_ctx)
		CU_OK(cuCtxSetCurrent(prog_ctx));
#endif
}

static inline uint8_t pat(uint64_t i, unsigned seed)
{
	return (uint8_t)((i * 2654435761u) >> 13 ^ (i >> 7) ^ seed);
}

static inline void *m_alloc(size_t n)
{
#ifdef PROG_CUDA
	if (device) {
		CUdeviceptr d = 0;
		CU_OK(cuMemAlloc(&d, n));
		return (void *)(uintptr_t)d;
	}
#endif
	void *p = NULL;
	if (posix_memalign(&p, 4096, n))
		FAIL("out of memory");
	return p;
}

static inline void m_free(void *p)
{
#ifdef PROG_CUDA
	if (device) {
		CU_OK(cuMemFree((CUdeviceptr)(uintptr_t)p));
		return;
	}
#endif
	free(p);
}

static inline void m_get(void *dst, const void *src, size_t n)
{
#ifdef PROG_CUDA
	if (device) {
		CU_OK(cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, n));
		return;
	}
#endif
	memcpy(dst, src, n);
}

static inline void m_put(void *dst, const void *src, size_t n)
{
#ifdef PROG_CUDA
	if (device) {
		CU_OK(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, n));
		return;
	}
#endif
	memcpy(dst, src, n);
}

static inline void m_fill(void *dst, int byte, size_t n)
{
#ifdef PROG_CUDA
	if (device) {
		CU_OK(cuMemsetD8((CUdeviceptr)(uintptr_t)dst, (unsigned char)byte, n));
		return;
	}
#endif
	memset(dst, byte, n);
}

/* The n bytes at buf + boff equal want; fail naming what otherwise. */
static inline void expect_bytes(const void *buf, size_t boff, const uint8_t *want, size_t n, const char *what)
{
	uint8_t *h = (uint8_t *)malloc(n ? n : 1);
	if (!h)
		FAIL("out of memory");
	m_get(h, (const uint8_t *)buf + boff, n);
	for (size_t i = 0; i < n; i++)
		if (h[i] != want[i])
			FAIL("%s: byte %zu is 0x%02x, expected 0x%02x", what, i, h[i], want[i]);
	free(h);
}

/* A file of n pattern bytes (seed) at dir/name; its bytes in *oracle. */
static inline int make_file(const char *dir, const char *name, size_t n, unsigned seed, uint8_t **oracle, char *path,
		     size_t pathlen)
{
	snprintf(path, pathlen, "%s/%s", dir, name);
	uint8_t *o = (uint8_t *)malloc(n ? n : 1);
	if (!o)
		FAIL("out of memory");
	for (size_t i = 0; i < n; i++)
		o[i] = pat(i, seed);
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0 || write(fd, o, n) != (ssize_t)n)
		FAIL("%s: %s", path, strerror(errno));
	close(fd);
	if (oracle)
		*oracle = o;
	else
		free(o);
	return 0;
}

/* Open with O_DIRECT where the file system allows it (tmpfs does not). */
static inline int open_direct(const char *path, int flags, bool *direct)
{
	int fd = open(path, flags | O_DIRECT, 0644); /* a mode always: flags may hold O_CREAT */
	*direct = fd >= 0;
	if (fd < 0 && errno == EINVAL)
		fd = open(path, flags, 0644);
	if (fd < 0)
		FAIL("%s: %s", path, strerror(errno));
	return fd;
}

static inline CUfileError_t reg_fd(int fd, CUfileHandle_t *fh)
{
	CUfileDescr_t d;
	memset(&d, 0, sizeof d);
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = fd;
	*fh = NULL;
	return cuFileHandleRegister(fh, &d);
}

static inline CUfileHandle_t reg_ok(int fd)
{
	CUfileHandle_t fh;
	CUfileError_t e = reg_fd(fd, &fh);
	if (e.err != CU_FILE_SUCCESS)
		FAIL("cuFileHandleRegister(fd %d): %d", fd, (int)e.err);
	return fh;
}

/* Answer lines: the status of a control call; a sync call's result (bytes,
 * -1 with errno read after the call, or -CU_FILE_*). */
static inline void ans(const char *name, CUfileError_t e)
{
	printf("= %s %d\n", name, (int)e.err);
}

static inline void ans_io(const char *name, ssize_t r)
{
	int err = errno;
	if (r == -1)
		printf("= %s -1 errno %d\n", name, err);
	else
		printf("= %s %zd\n", name, r);
}

#endif
