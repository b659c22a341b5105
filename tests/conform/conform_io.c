/*
 * conform_io: API.md "Synchronous I/O" and "Async I/O". Reads land at
 * buf + buf_offset and nothing outside the returned range is written; a
 * read crossing EOF returns the bytes before it, at or past EOF 0, size 0
 * 0; any size and offsets; argument errors -OPENDS_INVALID_VALUE (NULL,
 * negative offsets, size > SSIZE_MAX, offset + size overflowing off_t);
 * concurrent writes to disjoint bytes of one block lose nothing. Futures:
 * submit returns argument errors, await I/O errors; a completed future
 * stays completed (poll 1, the same result every await); any await order;
 * a never-submitted future is -OPENDS_INVALID_VALUE; no lack of room
 * (back-pressure: thousands in flight).
 */
#include "conform.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#define FSIZE (3 * 1024 * 1024 + 1234)
#define CAN 0x5A

static opends_handle_t fh, wfh;
static int fd, wfd, chk; /* chk: a plain fd to check through */
static int direct;
#define CASE(x) (c_case = direct ? x " (O_DIRECT fds)" : x)

static void sync_read(void)
{
	CASE("sync_read");
	static const size_t sizes[] = { 1, 7, 511, 4095, 4096, 4097, 65536 + 3, 1 << 20, (1 << 20) + 4097 };
	static const off_t offs[] = { 0, 1, 4095, 4096, 12345, 1 << 20, FSIZE - 5000 };
	size_t cap = (2 << 20) + 16384;
	unsigned char *buf = malloc(cap);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++)
		for (size_t j = 0; j < sizeof(offs) / sizeof(*offs); j++) {
			off_t bo = (off_t)((i * 7 + j * 13) % 4099);
			size_t want = sizes[i];
			if ((off_t)want > FSIZE - offs[j])
				want = (size_t)(FSIZE - offs[j]);
			memset(buf, CAN, cap);
			ssize_t n = opends_sync_read(fh, buf, sizes[i], offs[j], bo);
			if (n != (ssize_t)want) {
				C_FAIL("sync_read(size %zu, file_offset %lld, buf_offset %lld): %zd, expected %zu (%s)",
				       sizes[i], (long long)offs[j], (long long)bo, n, want, opends_last_error_detail());
				continue;
			}
			C_TRUE(c_same(buf + bo, want, (uint64_t)offs[j]),
			       "sync_read(size %zu, file_offset %lld, buf_offset %lld): wrong bytes", sizes[i],
			       (long long)offs[j], (long long)bo);
			C_TRUE(c_all(buf, (size_t)bo, CAN) && c_all(buf + bo + want, cap - (size_t)bo - want, CAN),
			       "sync_read(size %zu, file_offset %lld, buf_offset %lld) wrote outside its target",
			       sizes[i], (long long)offs[j], (long long)bo);
		}
	/* EOF */
	memset(buf, CAN, cap);
	C_SSZ(opends_sync_read(fh, buf, 100, FSIZE, 0), 0);
	C_SSZ(opends_sync_read(fh, buf, 100, FSIZE + 100000, 0), 0);
	C_SSZ(opends_sync_read(fh, buf, 0, 0, 0), 0);
	C_SSZ(opends_sync_read(fh, buf, 0, FSIZE + 1, 0), 0);
	C_TRUE(c_all(buf, cap, CAN), "a read of 0 bytes wrote memory");
	/* argument errors */
	const long IV = -OPENDS_INVALID_VALUE;
	C_SSZ(opends_sync_read(fh, NULL, 10, 0, 0), IV);
	C_SSZ(opends_sync_read(fh, buf, 10, -1, 0), IV);
	C_SSZ(opends_sync_read(fh, buf, 10, 0, -1), IV);
	C_SSZ(opends_sync_read(fh, buf, (size_t)SSIZE_MAX + 1, 0, 0), IV);
	C_SSZ(opends_sync_read(fh, buf, SIZE_MAX, 0, 0), IV);
	C_SSZ(opends_sync_read(fh, buf, 4096, (off_t)(INT64_MAX - 100), 0), IV);
	C_SSZ(opends_sync_write(wfh, NULL, 10, 0, 0), IV);
	C_SSZ(opends_sync_write(wfh, buf, 10, -4096, 0), IV);
	C_SSZ(opends_sync_write(wfh, buf, 10, 0, -2), IV);
	C_SSZ(opends_sync_write(wfh, buf, (size_t)SSIZE_MAX + 1, 0, 0), IV);
	C_SSZ(opends_sync_write(wfh, buf, 4096, (off_t)(INT64_MAX - 100), 0), IV);
	C_SSZ(opends_sync_write(wfh, buf, 0, 0, 0), 0);
	C_TRUE(c_all(buf, cap, CAN), "a refused read wrote memory");
	free(buf);
}

/* write at odd places and read back through a plain pread */
static void sync_write(void)
{
	CASE("sync_write");
	static const struct {
		size_t size;
		off_t off, bo;
	} w[] = { { 1, 0, 0 }, { 3, 4095, 1 }, { 4097, 4094, 3 }, { 100000, 123457, 11 }, { 1 << 20, 8191, 4095 } };
	unsigned char *src = malloc((1 << 20) + 8192), *back = malloc((1 << 20) + 8192);
	for (size_t i = 0; i < sizeof(w) / sizeof(*w); i++) {
		for (size_t k = 0; k < w[i].size; k++)
			src[w[i].bo + (off_t)k] = (unsigned char)(c_byte(k + 77 * i) ^ 0xFF);
		C_SSZ(opends_sync_write(wfh, src, w[i].size, w[i].off, w[i].bo), (ssize_t)w[i].size);
		unsigned char before, after;
		C_TRUE(pread(chk, back, w[i].size, w[i].off) == (ssize_t)w[i].size &&
			       !memcmp(back, src + w[i].bo, w[i].size),
		       "sync_write(size %zu, file_offset %lld, buf_offset %lld): the file does not hold the bytes",
		       w[i].size, (long long)w[i].off, (long long)w[i].bo);
		if (w[i].off > 0)
			C_TRUE(pread(chk, &before, 1, w[i].off - 1) == 1 && before == c_byte((uint64_t)w[i].off - 1),
			       "sync_write(size %zu, file_offset %lld) changed the byte before it", w[i].size,
			       (long long)w[i].off);
		C_TRUE(pread(chk, &after, 1, w[i].off + (off_t)w[i].size) == 1 &&
			       after == c_byte((uint64_t)w[i].off + w[i].size),
		       "sync_write(size %zu, file_offset %lld) changed the byte after it", w[i].size,
		       (long long)w[i].off);
		/* put the original back */
		for (size_t k = 0; k < w[i].size; k++)
			back[k] = c_byte((uint64_t)w[i].off + k);
		C_TRUE(pwrite(chk, back, w[i].size, w[i].off) == (ssize_t)w[i].size, "pwrite");
	}
	free(src);
	free(back);
}

/* API.md: concurrent writes to disjoint byte ranges never lose each other's
 * data, even inside one disk block */
#define NT 8
static void *interleave(void *arg)
{
	long t = (long)arg;
	/* thread t writes the bytes i of block 1 (4096..8191) with i % NT == t,
	 * one byte per call */
	unsigned char v = (unsigned char)(0x80 | t);
	for (off_t i = 4096 + t; i < 8192; i += NT)
		if (opends_sync_write(wfh, &v, 1, i, 0) != 1)
			return (void *)1;
	return NULL;
}

static void disjoint(void)
{
	CASE("disjoint writes");
	pthread_t t[NT];
	for (long i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, interleave, (void *)i);
	int bad = 0;
	for (int i = 0; i < NT; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += r != NULL;
	}
	C_TRUE(!bad, "%d writer threads failed a write", bad);
	unsigned char blk[4096];
	C_TRUE(pread(chk, blk, sizeof(blk), 4096) == 4096, "pread");
	size_t lost = 0;
	for (off_t i = 0; i < 4096; i++) {
		unsigned char want = (unsigned char)(0x80 | (i % NT));
		if (blk[i] != want)
			lost++;
	}
	C_TRUE(lost == 0, "concurrent writes of disjoint bytes in one block: %zu bytes lost", lost);
	for (off_t i = 0; i < 4096; i++)
		blk[i] = c_byte(4096 + (uint64_t)i);
	C_TRUE(pwrite(chk, blk, 4096, 4096) == 4096, "pwrite");
}

static void async(void)
{
	CASE("async");
	opends_async_future_t f, zero;
	memset(&zero, 0, sizeof(zero));
	unsigned char *buf = malloc(1 << 20);
	const opends_op_error_t IV = OPENDS_INVALID_VALUE;
	/* argument errors at submit, nothing started */
	C_ERR(opends_async_read(fh, buf, 10, 0, 0, NULL), IV);
	C_ERR(opends_async_read(fh, NULL, 10, 0, 0, &f), IV);
	C_ERR(opends_async_read(fh, buf, 10, -1, 0, &f), IV);
	C_ERR(opends_async_read(fh, buf, 10, 0, -1, &f), IV);
	C_ERR(opends_async_read(fh, buf, (size_t)SSIZE_MAX + 1, 0, 0, &f), IV);
	C_ERR(opends_async_read(fh, buf, 10, (off_t)(INT64_MAX - 5), 0, &f), IV);
	C_ERR(opends_async_read(NULL, buf, 10, 0, 0, &f), IV);
	C_ERR(opends_async_read((opends_handle_t)buf, buf, 10, 0, 0, &f), OPENDS_HANDLE_NOT_REGISTERED);
	C_ERR(opends_async_write(wfh, NULL, 10, 0, 0, &f), IV);
	C_ERR(opends_async_write(wfh, buf, 10, 0, 0, NULL), IV);
	C_SSZ(opends_async_await(NULL), -(int)IV);
	C_SSZ(opends_async_poll(NULL), -(int)IV);
	C_SSZ(opends_async_await(&zero), -(int)IV);
	C_SSZ(opends_async_poll(&zero), -(int)IV);
	/* results: as sync; completed stays completed */
	memset(buf, CAN, 1 << 20);
	C_OK(opends_async_read(fh, buf, 5000, FSIZE - 1000, 3, &f));
	C_SSZ(opends_async_await(&f), 1000);
	C_SSZ(opends_async_await(&f), 1000);
	C_SSZ(opends_async_poll(&f), 1);
	C_SSZ(opends_async_await(&f), 1000);
	C_TRUE(c_same(buf + 3, 1000, FSIZE - 1000) && c_all(buf, 3, CAN) && c_all(buf + 1003, (1 << 20) - 1003, CAN),
	       "async_read across EOF: wrong bytes or bytes outside the target");
	C_OK(opends_async_read(fh, buf, 10, FSIZE, 0, &f));
	C_SSZ(opends_async_await(&f), 0);
	C_OK(opends_async_read(fh, buf, 0, 0, 0, &f));
	C_SSZ(opends_async_await(&f), 0);
	/* poll until done without blocking, then the result */
	C_OK(opends_async_read(fh, buf, 65536, 4096, 0, &f));
	/* (bounded by time, not a count of polls: on a loaded 2-core CI
	 * machine the worker may not run for longer than 10 million polls) */
	int p;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((p = opends_async_poll(&f)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 30)
			break;
		sched_yield();
	}
	C_SSZ(p, 1);
	C_SSZ(opends_async_await(&f), 65536);
	C_TRUE(c_same(buf, 65536, 4096), "async_read after poll: wrong bytes");
	/* await in reverse order */
	enum { N = 16 };
	opends_async_future_t fs[N];
	for (int i = 0; i < N; i++)
		C_OK(opends_async_read(fh, buf + i * 4096, 4096, (off_t)i * 10007, 0, &fs[i]));
	for (int i = N - 1; i >= 0; i--) {
		C_SSZ(opends_async_await(&fs[i]), 4096);
		C_TRUE(c_same(buf + i * 4096, 4096, (uint64_t)i * 10007), "future %d: wrong bytes", i);
	}
	/* a write, then reuse of the future */
	unsigned char w[333];
	for (size_t i = 0; i < sizeof(w); i++)
		w[i] = c_byte(500000 + i);
	C_OK(opends_async_write(wfh, w, sizeof(w), 500000, 0, &f));
	C_SSZ(opends_async_await(&f), (ssize_t)sizeof(w));
	/* back-pressure: many in flight, none refused */
	enum { M = 4096 };
	opends_async_future_t *many = malloc(M * sizeof(*many));
	unsigned char *targets = malloc((size_t)M * 4096); /* one each: no two reads write one byte */
	int refused = 0;
	for (int i = 0; i < M; i++)
		if (opends_async_read(fh, targets + (size_t)i * 4096, 4096, (off_t)(i % 700) * 4096, 0, &many[i]).err)
			refused++;
	C_TRUE(refused == 0, "%d of %d async reads in flight refused (API.md: back-pressure, never lack of room)",
	       refused, M);
	int wrong = 0;
	for (int i = 0; i < M; i++)
		wrong += opends_async_await(&many[i]) != 4096 ||
			 !c_same(targets + (size_t)i * 4096, 4096, (uint64_t)(i % 700) * 4096);
	C_TRUE(wrong == 0, "%d of %d awaits did not return 4096 or the file's bytes", wrong, M);
	free(targets);
	free(many);
	free(buf);
}

int main(void)
{
	const char *path = c_file("io", FSIZE);
	if (opends_driver_open().err) {
		fprintf(stderr, "open: %s\n", opends_last_error_detail());
		return 1;
	}
	/* plain fds, then O_DIRECT ones where the file system has it
	 * (alignment is the library's problem either way) */
	chk = c_open(path, O_RDWR);
	for (direct = 0; direct < 2; direct++) {
		int fl = direct ? O_DIRECT : 0;
		fd = open(path, O_RDONLY | fl);
		wfd = open(path, O_RDWR | fl);
		if (fd < 0 || wfd < 0) {
			printf("conform_io: no O_DIRECT here (%s)\n", strerror(errno));
			break;
		}
		if (opends_handle_register(&fh, fd).err || opends_handle_register(&wfh, wfd).err) {
			fprintf(stderr, "register: %s\n", opends_last_error_detail());
			return 1;
		}
		sync_read();
		sync_write();
		disjoint();
		async();
		opends_handle_deregister(fh);
		opends_handle_deregister(wfh);
		close(fd);
		close(wfd);
	}
	opends_driver_close();
	return c_done("conform_io");
}
