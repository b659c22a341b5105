/*
 * cufile_threads [--mem=host|device] DIR
 *
 * A C++ program whose threads share the process's cuFile handles, as data
 * loaders do: 8 std::threads each open the driver for themselves (a
 * library inside the program does so too: the opens are counted), register
 * a buffer of their own, read interleaved chunks of one file through one
 * shared handle and write interleaved chunks of another through a second
 * shared handle, register and deregister handles of their own fds and
 * small buffers in a loop, and close the driver again. Every chunk read is
 * checked against the file, the written file against what was written.
 * Answer lines: each thread's opens and closes, the use count after.
 */
#include "prog.h"

#include <atomic>
#include <thread>
#include <vector>

static const unsigned T = 8, CHUNK = 128u << 10, NCHUNK = 64, FILE_SZ = CHUNK * NCHUNK;
static uint8_t *oracle, *wpat;
static char src[512], dst[512];
static CUfileHandle_t rfh, wfh;
static std::atomic<int> open_errs{0}, close_errs{0};

static void worker(unsigned t)
{
	prog_thread_ctx();
	if (cuFileDriverOpen().err)
		open_errs++;
	void *buf = m_alloc(8 * CHUNK), *small = m_alloc(65536);
	if (cuFileBufRegister(buf, 8 * CHUNK, 0).err)
		FAIL("thread %u: cuFileBufRegister", t);
	for (unsigned k = 0; k < NCHUNK / T * 4; k++) {
		unsigned c = (t + k * T) % NCHUNK;
		off_t bo = (off_t)(k % 8) * CHUNK;
		ssize_t r = cuFileRead(rfh, buf, CHUNK, (off_t)c * CHUNK, bo);
		if (r != (ssize_t)CHUNK)
			FAIL("thread %u: read of chunk %u: %zd (errno %d)", t, c, r, errno);
		expect_bytes(buf, (size_t)bo, oracle + (size_t)c * CHUNK, CHUNK, "shared-handle read");
	}
	for (unsigned c = t; c < NCHUNK; c += T) {
		off_t bo = (off_t)(c % 8) * CHUNK;
		m_put((uint8_t *)buf + bo, wpat + (size_t)c * CHUNK, CHUNK);
		ssize_t r = cuFileWrite(wfh, buf, CHUNK, (off_t)c * CHUNK, bo);
		if (r != (ssize_t)CHUNK)
			FAIL("thread %u: write of chunk %u: %zd (errno %d)", t, c, r, errno);
	}
	for (unsigned i = 0; i < 20; i++) {
		int fd = open(src, O_RDONLY);
		CUfileHandle_t fh = reg_ok(fd);
		if (cuFileBufRegister(small, 65536, 0).err)
			FAIL("thread %u: cuFileBufRegister of the small buffer", t);
		off_t off = (off_t)((t * 7919u + i * 104729u) % (FILE_SZ - 65536));
		ssize_t r = cuFileRead(fh, small, 65536, off, 0);
		if (r != 65536)
			FAIL("thread %u: read through its own handle: %zd", t, r);
		expect_bytes(small, 0, oracle + off, 65536, "own-handle read");
		if (cuFileBufDeregister(small).err)
			FAIL("thread %u: cuFileBufDeregister of the small buffer", t);
		cuFileHandleDeregister(fh);
		close(fd);
	}
	if (cuFileBufDeregister(buf).err)
		FAIL("thread %u: cuFileBufDeregister", t);
	m_free(buf);
	m_free(small);
	if (cuFileDriverClose().err)
		close_errs++;
}

int main(int argc, char **argv)
{
	const char *dir = prog_args(argc, argv);
	make_file(dir, "threads_src.bin", FILE_SZ, 4, &oracle, src, sizeof src);
	make_file(dir, "threads_dst.bin", FILE_SZ, 5, &wpat, dst, sizeof dst);
	for (size_t i = 0; i < FILE_SZ; i++)
		wpat[i] = (uint8_t)~wpat[i]; /* the file holds the complement until written */
	ans("driver_open", cuFileDriverOpen());
	bool direct;
	int rfd = open_direct(src, O_RDONLY, &direct), wfd = open(dst, O_RDWR);
	rfh = reg_ok(rfd);
	wfh = reg_ok(wfd);
	std::vector<std::thread> th;
	for (unsigned t = 0; t < T; t++)
		th.emplace_back(worker, t);
	for (auto &x : th)
		x.join();
	printf("= thread_driver_open_errors %d\n", open_errs.load());
	printf("= thread_driver_close_errors %d\n", close_errs.load());
	typedef long (*use_count_fn)(void);
	use_count_fn use_count = (use_count_fn)dlsym(RTLD_DEFAULT, "cuFileUseCount");
	if (use_count)
		printf("= use_count_after_threads %ld\n", use_count());
	uint8_t *h = (uint8_t *)malloc(FILE_SZ);
	if (pread(wfd, h, FILE_SZ, 0) != (ssize_t)FILE_SZ || memcmp(h, wpat, FILE_SZ))
		FAIL("the written file differs from what the threads wrote");
	/* the shared handles still work after the threads' closes */
	void *buf = m_alloc(CHUNK);
	ssize_t r = cuFileRead(rfh, buf, CHUNK, 5 * CHUNK, 0);
	if (r != (ssize_t)CHUNK)
		FAIL("read after the threads: %zd", r);
	expect_bytes(buf, 0, oracle + 5 * CHUNK, CHUNK, "read after the threads");
	m_free(buf);
	cuFileHandleDeregister(rfh);
	cuFileHandleDeregister(wfh);
	ans("driver_close", cuFileDriverClose());
	close(rfd);
	close(wfd);
	unlink(src);
	unlink(dst);
	free(h);
	free(oracle);
	free(wpat);
	printf("PASS: cufile_threads, %u threads, every byte (%s memory)\n", T, device ? "device" : "host");
	return 0;
}
