/*
 * conform_handles: API.md "Handles and buffers" and the header's lists:
 * handle_register's codes for each misuse (NULL, bad fd with backend_err
 * EBADF, a directory / pipe / character device, the same fd twice, O_PATH,
 * O_APPEND on a writable fd), the access mode kept (-EBADF both ways),
 * deregister's; buf_register's (NULL, size 0, flags, wrap, every kind of
 * overlap; adjacent is fine), buf_deregister's (not a base, twice); a
 * target that starts inside a registered range must end inside it
 * (-OPENDS_INVALID_MAPPING_RANGE on sync, async, batch and stream I/O);
 * unregistered memory works; describe and advise.
 */
#include "conform.h"

#include <sys/mman.h>

static void handles(void)
{
	c_case = "handle_register";
	const char *path = c_file("h", 8192);
	char dir[600];
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	int fd = c_open(path, O_RDWR);
	opends_handle_t fh = NULL, fh2 = NULL;
	C_ERR(opends_handle_register(NULL, fd), OPENDS_INVALID_VALUE);
	opends_error_t e = opends_handle_register(&fh, -1);
	C_TRUE(e.err == OPENDS_INVALID_VALUE && e.backend_err == EBADF, "fd -1: %s / %d, expected INVALID_VALUE / EBADF",
	       c_name(e.err), e.backend_err);
	int closed_fd = c_open(path, O_RDONLY);
	close(closed_fd);
	e = opends_handle_register(&fh, closed_fd);
	C_TRUE(e.err == OPENDS_INVALID_VALUE && e.backend_err == EBADF,
	       "closed fd: %s / %d, expected INVALID_VALUE / EBADF", c_name(e.err), e.backend_err);
	int dfd = c_open(dir, O_RDONLY | O_DIRECTORY);
	C_ERR(opends_handle_register(&fh, dfd), OPENDS_INVALID_FILE_TYPE);
	close(dfd);
	int p[2];
	if (pipe(p) == 0) {
		C_ERR(opends_handle_register(&fh, p[0]), OPENDS_INVALID_FILE_TYPE);
		C_ERR(opends_handle_register(&fh, p[1]), OPENDS_INVALID_FILE_TYPE);
		close(p[0]);
		close(p[1]);
	}
	int nfd = c_open("/dev/null", O_RDWR);
	C_ERR(opends_handle_register(&fh, nfd), OPENDS_INVALID_FILE_TYPE);
	close(nfd);
	int pfd = c_open(path, O_PATH);
	C_ERR(opends_handle_register(&fh, pfd), OPENDS_INVALID_FILE_OPEN_FLAG);
	close(pfd);
	int afd = c_open(path, O_WRONLY | O_APPEND);
	C_ERR(opends_handle_register(&fh, afd), OPENDS_INVALID_FILE_OPEN_FLAG);
	close(afd);
	afd = c_open(path, O_RDONLY | O_APPEND); /* read-only O_APPEND is fine */
	C_OK(opends_handle_register(&fh, afd));
	C_OK(opends_handle_deregister(fh));
	close(afd);

	C_OK(opends_handle_register(&fh, fd));
	C_ERR(opends_handle_register(&fh2, fd), OPENDS_HANDLE_ALREADY_REGISTERED);
	C_OK(opends_handle_deregister(fh));
	C_ERR(opends_handle_deregister(NULL), OPENDS_INVALID_VALUE);
	C_ERR(opends_handle_deregister(fh), OPENDS_HANDLE_NOT_REGISTERED);
	C_ERR(opends_handle_deregister((opends_handle_t)&fh), OPENDS_HANDLE_NOT_REGISTERED);
	/* the fd stays the caller's */
	C_TRUE(fcntl(fd, F_GETFD) >= 0, "deregister closed the caller's fd");
	/* a deregistered handle, NULL: I/O refused */
	unsigned char buf[64];
	C_SSZ(opends_sync_read(fh, buf, 1, 0, 0), -OPENDS_HANDLE_NOT_REGISTERED);
	C_SSZ(opends_sync_read(NULL, buf, 1, 0, 0), -OPENDS_INVALID_VALUE);
	close(fd);

	c_case = "access mode";
	int ro = c_open(path, O_RDONLY), wo = c_open(path, O_WRONLY);
	opends_handle_t hro, hwo;
	C_OK(opends_handle_register(&hro, ro));
	C_OK(opends_handle_register(&hwo, wo));
	memset(buf, 7, sizeof(buf));
	C_SSZ(opends_sync_write(hro, buf, sizeof(buf), 0, 0), -EBADF);
	C_SSZ(opends_sync_read(hwo, buf, sizeof(buf), 0, 0), -EBADF);
	opends_async_future_t f;
	C_OK(opends_async_write(hro, buf, sizeof(buf), 0, 0, &f));
	C_SSZ(opends_async_await(&f), -EBADF);
	C_OK(opends_async_read(hwo, buf, sizeof(buf), 0, 0, &f));
	C_SSZ(opends_async_await(&f), -EBADF);
	C_SSZ(opends_sync_read(hro, buf, sizeof(buf), 0, 0), (ssize_t)sizeof(buf));
	C_TRUE(c_same(buf, sizeof(buf), 0), "a refused write changed the file");
	C_OK(opends_handle_deregister(hro));
	C_OK(opends_handle_deregister(hwo));
	close(ro);
	close(wo);

	c_case = "deregister waits";
	/* the handle's async reads already handed to the backend finish
	 * before deregister returns (include/opends/handles.h) */
	{
		enum { N = 32 };
		int rfd = c_open(path, O_RDONLY);
		opends_handle_t h;
		opends_async_future_t fs[N];
		unsigned char *big = malloc(N * 256);
		memset(big, 0x5A, N * 256);
		C_OK(opends_handle_register(&h, rfd));
		for (int i = 0; i < N; i++)
			C_OK(opends_async_read(h, big + i * 256, 256, (off_t)i * 200, 0, &fs[i]));
		C_OK(opends_handle_deregister(h));
		for (int i = 0; i < N; i++) {
			C_TRUE(opends_async_poll(&fs[i]) == 1, "future %d not complete after deregister returned", i);
			C_SSZ(opends_async_await(&fs[i]), 256);
			C_TRUE(c_same(big + i * 256, 256, (uint64_t)i * 200), "future %d: wrong bytes", i);
		}
		free(big);
		close(rfd);
	}

	c_case = "describe/advise";
	fd = c_open(path, O_RDONLY);
	C_OK(opends_handle_register(&fh, fd));
	char d[256];
	C_ERR(opends_describe(fh, NULL, 10), OPENDS_INVALID_VALUE);
	C_ERR(opends_describe(fh, d, 0), OPENDS_INVALID_VALUE);
	C_ERR(opends_describe((opends_handle_t)d, d, sizeof(d)), OPENDS_HANDLE_NOT_REGISTERED);
	C_OK(opends_describe(fh, d, sizeof(d)));
	C_TRUE(strlen(d) > 0, "describe(fh) is empty");
	char tiny[5];
	memset(tiny, 'x', sizeof(tiny));
	C_OK(opends_describe(fh, tiny, sizeof(tiny)));
	C_TRUE(strlen(tiny) == 4 && !strncmp(tiny, d, 4), "describe into 5 bytes: \"%s\", expected \"%.4s\"", tiny, d);
	C_OK(opends_describe(NULL, tiny, 1));
	C_TRUE(tiny[0] == '\0', "describe into 1 byte is not \"\"");
	C_ERR(opends_handle_advise(NULL, OPENDS_ADVICE_NORMAL), OPENDS_INVALID_VALUE);
	C_ERR(opends_handle_advise(fh, 3), OPENDS_INVALID_VALUE);
	C_ERR(opends_handle_advise(fh, -1), OPENDS_INVALID_VALUE);
	C_ERR(opends_handle_advise((opends_handle_t)d, OPENDS_ADVICE_RANDOM), OPENDS_HANDLE_NOT_REGISTERED);
	C_OK(opends_handle_advise(fh, OPENDS_ADVICE_SEQUENTIAL));
	C_OK(opends_handle_deregister(fh));
	close(fd);
}

static void buffers(void)
{
	c_case = "buf_register";
	size_t pg = 4096;
	unsigned char *m = mmap(NULL, 16 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	C_ERR(opends_buf_register(NULL, pg, 0), OPENDS_INVALID_VALUE);
	C_ERR(opends_buf_register(m, 0, 0), OPENDS_INVALID_VALUE);
	C_ERR(opends_buf_register(m, pg, 1), OPENDS_INVALID_VALUE);
	C_ERR(opends_buf_register(m, SIZE_MAX, 0), OPENDS_INVALID_VALUE); /* wraps */
	C_OK(opends_buf_register(m + 4 * pg, 4 * pg, 0));                /* [4, 8) */
	C_ERR(opends_buf_register(m + 4 * pg, 4 * pg, 0), OPENDS_MEMORY_ALREADY_REGISTERED);
	C_ERR(opends_buf_register(m + 2 * pg, 3 * pg, 0), OPENDS_MEMORY_ALREADY_REGISTERED); /* front */
	C_ERR(opends_buf_register(m + 7 * pg, 3 * pg, 0), OPENDS_MEMORY_ALREADY_REGISTERED); /* back */
	C_ERR(opends_buf_register(m + 5 * pg, 1, 0), OPENDS_MEMORY_ALREADY_REGISTERED);      /* inside */
	C_ERR(opends_buf_register(m, 16 * pg, 0), OPENDS_MEMORY_ALREADY_REGISTERED);         /* around */
	C_ERR(opends_buf_register(m + 8 * pg - 1, 2, 0), OPENDS_MEMORY_ALREADY_REGISTERED);  /* last byte */
	C_OK(opends_buf_register(m + 8 * pg, pg, 0));                                        /* adjacent after */
	C_OK(opends_buf_register(m + 3 * pg, pg, 0));                                        /* adjacent before */

	c_case = "buf_deregister";
	C_ERR(opends_buf_deregister(NULL), OPENDS_INVALID_VALUE);
	C_ERR(opends_buf_deregister(m + 5 * pg), OPENDS_MEMORY_NOT_REGISTERED); /* not a base */
	C_ERR(opends_buf_deregister(m), OPENDS_MEMORY_NOT_REGISTERED);
	C_OK(opends_buf_deregister(m + 3 * pg));
	C_ERR(opends_buf_deregister(m + 3 * pg), OPENDS_MEMORY_NOT_REGISTERED); /* twice */
	C_OK(opends_buf_deregister(m + 8 * pg));

	c_case = "mapping range";
	const char *path = c_file("m", 64 * 1024);
	int fd = c_open(path, O_RDWR);
	opends_handle_t fh;
	C_OK(opends_handle_register(&fh, fd));
	unsigned char *r = m + 4 * pg; /* registered: 4 pages */
	const int MR = OPENDS_INVALID_MAPPING_RANGE;
	memset(m, 0xA5, 16 * pg);
	C_SSZ(opends_sync_read(fh, r, 4 * pg + 1, 0, 0), -MR);
	C_SSZ(opends_sync_read(fh, r, 2 * pg, 0, 3 * pg), -MR); /* buf_offset moves the target */
	C_SSZ(opends_sync_write(fh, r + pg, 3 * pg + 1, 0, 0), -MR);
	C_TRUE(c_all(m, 16 * pg, 0xA5), "a refused read wrote memory");
	opends_async_future_t f;
	C_ERR(opends_async_read(fh, r, 4 * pg + 1, 0, 0, &f), MR);
	C_ERR(opends_async_write(fh, r, 1, 0, 4 * pg, &f), MR);
	opends_batch_t b;
	C_OK(opends_batch_setup(&b, 2));
	opends_io_params_t io = { .mode = OPENDS_BATCH, .fh = fh, .opcode = OPENDS_READ };
	io.u.batch.buf_base = r;
	io.u.batch.size = 4 * pg + 1;
	C_ERR(opends_batch_submit(b, 1, &io, 0), MR);
	C_OK(opends_batch_destroy(b));
	size_t size = 4 * pg + 1;
	off_t fo = 0, bo = 0;
	ssize_t got = 12345;
	opends_error_t e = opends_stream_read(fh, r, &size, &fo, &bo, &got, NULL);
	if (e.err == OPENDS_SUCCESS) { /* checks of the values land in *bytes_read */
		C_OK(opends_stream_synchronize(NULL));
		C_SSZ(got, -MR);
	} else
		C_TRUE((int)e.err == MR, "stream_read past a registered range: %s", c_name(e.err));
	C_TRUE(c_all(m, 16 * pg, 0xA5), "a refused read wrote memory");
	/* inside is fine, byte-exact; and unregistered memory works */
	C_SSZ(opends_sync_read(fh, r, 4 * pg, 100, 0), (ssize_t)(4 * pg));
	C_TRUE(c_same(r, 4 * pg, 100), "a read into a registered range is not the file's bytes");
	C_SSZ(opends_sync_read(fh, m + 12 * pg, 3 * pg, 7, 5), (ssize_t)(3 * pg));
	C_TRUE(c_same(m + 12 * pg + 5, 3 * pg, 7), "a read into unregistered memory is not the file's bytes");
	C_OK(opends_buf_deregister(r));
	/* deregistered: the same target is fine now */
	C_SSZ(opends_sync_read(fh, r, 4 * pg + 1, 0, 0), (ssize_t)(4 * pg + 1));
	C_OK(opends_handle_deregister(fh));
	close(fd);
	munmap(m, 16 * pg);
}

int main(void)
{
	if (opends_driver_open().err) {
		fprintf(stderr, "open: %s\n", opends_last_error_detail());
		return 1;
	}
	handles();
	buffers();
	opends_driver_close();
	return c_done("conform_handles");
}
