/*
 * conform_stream: API.md "Streams". create/destroy/register/deregister's
 * codes for each misuse (NULL, a stream not made by create, unknown flag
 * bits, deregister of an unregistered stream); submit returns argument
 * errors only (NULL pointers, unknown stream, unregistered handle) and the
 * operation's result (bytes, fewer at EOF, 0 past it, or a negated error)
 * lands in *bytes_* once the stream reaches it; operations on one stream
 * run in order (a write then a read of the same range reads what was
 * written); the values behind the pointers are read when the stream
 * reaches the operation; NULL is a usable stream.
 */
#include "conform.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define FSIZE (256 * 1024 + 77)

static void misuse(opends_handle_t fh)
{
	c_case = "stream misuse";
	const opends_op_error_t IV = OPENDS_INVALID_VALUE;
	opends_stream_t s = NULL;
	int not_a_stream;
	C_ERR(opends_stream_create(NULL), IV);
	C_ERR(opends_stream_destroy(NULL), IV);
	C_OK(opends_stream_create(&s));
	C_TRUE(s != NULL, "stream_create gave NULL");
	C_ERR(opends_stream_register(s, 16), IV);
	C_ERR(opends_stream_register(s, 0x80000000u), IV);
	C_ERR(opends_stream_deregister(s), IV); /* not registered */
	C_OK(opends_stream_register(s, OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_PAGE_ALIGNED_INPUTS));
	C_OK(opends_stream_register(s, 0)); /* twice replaces */
	C_OK(opends_stream_deregister(s));
	C_ERR(opends_stream_deregister(s), IV);
	C_OK(opends_stream_register(NULL, 15));
	C_OK(opends_stream_deregister(NULL));
	unsigned char buf[64];
	size_t size = 10;
	off_t fo = 0, bo = 0;
	ssize_t got;
	C_ERR(opends_stream_read(fh, NULL, &size, &fo, &bo, &got, s), IV);
	C_ERR(opends_stream_read(fh, buf, NULL, &fo, &bo, &got, s), IV);
	C_ERR(opends_stream_read(fh, buf, &size, NULL, &bo, &got, s), IV);
	C_ERR(opends_stream_read(fh, buf, &size, &fo, NULL, &got, s), IV);
	C_ERR(opends_stream_read(fh, buf, &size, &fo, &bo, NULL, s), IV);
	C_ERR(opends_stream_read(NULL, buf, &size, &fo, &bo, &got, s), IV);
	C_ERR(opends_stream_read((opends_handle_t)buf, buf, &size, &fo, &bo, &got, s),
	      OPENDS_HANDLE_NOT_REGISTERED);
	C_ERR(opends_stream_write(fh, NULL, &size, &fo, &bo, &got, s), IV);
	C_ERR(opends_stream_write(fh, buf, &size, &fo, &bo, NULL, s), IV);
	C_OK(opends_stream_destroy(s));
	/* without an accelerator, a stream not made by create is unknown */
	const char *accel = getenv("OPENDS_ACCEL");
	if (accel && !strcmp(accel, "host")) {
		C_ERR(opends_stream_destroy(&not_a_stream), IV);
		C_ERR(opends_stream_register(&not_a_stream, 0), IV);
		C_ERR(opends_stream_synchronize(&not_a_stream), IV);
		C_ERR(opends_stream_read(fh, buf, &size, &fo, &bo, &got, &not_a_stream), IV);
		C_ERR(opends_stream_destroy(s), IV); /* destroyed */
	}
}

static void results(opends_handle_t fh, opends_stream_t s, const char *which)
{
	c_case = which;
	enum { N = 6 };
	unsigned char *buf = malloc(FSIZE + 8192);
	memset(buf, 0x5A, FSIZE + 8192);
	/* values are read when the stream reaches the operation: the pointers
	 * stay valid until synchronize, the values differ per operation */
	size_t size[N] = { 4096, 1, 100000, 5000, 10, 0 };
	off_t fo[N] = { 0, 4096, 4097, FSIZE - 1000, FSIZE + 10, 7 };
	off_t bo[N] = { 0, 4096, 4097, 104097, 200000, 0 };
	ssize_t want[N] = { 4096, 1, 100000, 1000, 0, 0 }, got[N];
	for (int i = 0; i < N; i++) {
		got[i] = 12345;
		C_OK(opends_stream_read(fh, buf, &size[i], &fo[i], &bo[i], &got[i], s));
	}
	C_OK(opends_stream_synchronize(s));
	for (int i = 0; i < N; i++) {
		C_SSZ(got[i], want[i]);
		if (got[i] == want[i])
			C_TRUE(c_same(buf + bo[i], (size_t)want[i], (uint64_t)fo[i]), "operation %d: wrong bytes", i);
	}
	C_TRUE(buf[105097] == 0x5A && buf[200000] == 0x5A, "bytes past a short read were written");
	/* errors land in *bytes_*: a negative offset behind the pointer */
	size_t sz = 10;
	off_t neg = -1, zero = 0;
	ssize_t r = 12345;
	C_OK(opends_stream_read(fh, buf, &sz, &neg, &zero, &r, s));
	C_OK(opends_stream_synchronize(s));
	C_SSZ(r, -OPENDS_INVALID_VALUE);
	/* in order: write a range, read it back on the same stream */
	unsigned char *w = malloc(8192), *back = malloc(8192);
	for (int i = 0; i < 8192; i++)
		w[i] = (unsigned char)(c_byte((uint64_t)i) ^ 0x33);
	memset(back, 0, 8192);
	size_t ws = 8192, rs = 8192;
	off_t wo = 12288, ro = 12288, z1 = 0, z2 = 0;
	ssize_t wr = 1, rr = 1;
	C_OK(opends_stream_write(fh, w, &ws, &wo, &z1, &wr, s));
	C_OK(opends_stream_read(fh, back, &rs, &ro, &z2, &rr, s));
	C_OK(opends_stream_synchronize(s));
	C_SSZ(wr, 8192);
	C_SSZ(rr, 8192);
	C_TRUE(!memcmp(w, back, 8192), "a read queued after a write on one stream did not see it");
	/* put the file back */
	for (int i = 0; i < 8192; i++)
		w[i] = c_byte(12288 + (uint64_t)i);
	C_OK(opends_stream_write(fh, w, &ws, &wo, &z1, &wr, s));
	C_OK(opends_stream_synchronize(s));
	C_SSZ(wr, 8192);
	free(w);
	free(back);
	free(buf);
}

/* A source whose reads wait until released: an operation queued behind
 * one of its reads has not been reached yet. */
static atomic_int gate_open;
static ssize_t held_read(void *src, void *buf, size_t len, uint64_t off)
{
	(void)src;
	for (int i = 0; i < 20000 && !atomic_load(&gate_open); i++) {
		struct timespec ts = { 0, 500 * 1000 };
		nanosleep(&ts, NULL);
	}
	memset(buf, (int)(off & 0xff), len);
	return (ssize_t)len;
}

/* API.md: *size, *file_offset and *buf_offset are read when the stream
 * reaches the operation: values changed after the call, before the stream
 * gets there, are the ones used */
static void late_values(opends_handle_t fh, opends_stream_t s, const char *which)
{
	c_case = which;
	opends_source_ops_t ops = { .struct_size = sizeof(ops), .name = "held", .read = held_read };
	opends_source_desc_t d = { .struct_size = sizeof(d), .ops = &ops, .flags = OPENDS_SOURCE_BLOCKING,
				   .size = 1 << 20 };
	opends_handle_t held;
	C_OK(opends_handle_register_source(&held, &d));
	atomic_store(&gate_open, 0);
	unsigned char *hb = malloc(4096), *buf = malloc(65536);
	memset(buf, 0x5A, 65536);
	size_t hs = 4096, size = 10;
	off_t hfo = 0, hbo = 0, fo = 0, bo = 0;
	ssize_t hgot = 1, got = 1;
	C_OK(opends_stream_read(held, hb, &hs, &hfo, &hbo, &hgot, s));
	C_OK(opends_stream_read(fh, buf, &size, &fo, &bo, &got, s));
	size = 20000; /* changed before the stream reaches it */
	fo = 4097;
	bo = 33;
	atomic_store(&gate_open, 1);
	C_OK(opends_stream_synchronize(s));
	C_SSZ(hgot, 4096);
	C_SSZ(got, 20000);
	C_TRUE(c_same(buf + 33, 20000, 4097) && c_all(buf, 33, 0x5A) && c_all(buf + 20033, 65536 - 20033, 0x5A),
	       "the values changed before the stream reached the read were not the ones used");
	C_OK(opends_handle_deregister(held));
	free(hb);
	free(buf);
}

int main(void)
{
	const char *path = c_file("st", FSIZE);
	if (opends_driver_open().err) {
		fprintf(stderr, "open: %s\n", opends_last_error_detail());
		return 1;
	}
	int fd = c_open(path, O_RDWR);
	opends_handle_t fh;
	C_OK(opends_handle_register(&fh, fd));
	misuse(fh);
	results(fh, NULL, "the NULL stream");
	opends_stream_t s;
	C_OK(opends_stream_create(&s));
	results(fh, s, "a created stream");
	late_values(fh, NULL, "values read when the NULL stream reaches the operation");
	late_values(fh, s, "values read when a created stream reaches the operation");
	C_OK(opends_stream_register(s, OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET |
					       OPENDS_STREAM_FIXED_FILE_SIZE));
	results(fh, s, "a stream registered with every FIXED_* flag");
	C_OK(opends_stream_deregister(s));
	C_OK(opends_stream_destroy(s));
	C_OK(opends_handle_deregister(fh));
	close(fd);
	opends_driver_close();
	return c_done("conform_stream");
}
