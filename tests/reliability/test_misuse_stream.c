/*
 * The misuse rows of streams (T), as
 * docs/errors.md lists them; misuse.h has the runner and how to run it.
 */
#include "misuse.h"

#define ROWS(X)                                                                                                    \
	/* ---- streams ---- */                                                                                   \
	X(T01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "stream", "opends_stream_create(NULL)",                     \
	  { return E(opends_stream_create(NULL)); })                                                               \
	X(T02, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_destroy(NULL) (not made by stream_create)", \
	  { return E(opends_stream_destroy(NULL)); })                                                              \
	X(T03, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_destroy() of a made-up stream",          \
	  { return E(opends_stream_destroy((opends_stream_t)(uintptr_t)0x1234567)); })                             \
	X(T04, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_destroy() twice", {                      \
		if (opends_stream_destroy(fx.stream).err)                                                           \
			return -1;                                                                                 \
		return E(opends_stream_destroy(fx.stream));                                                         \
	})                                                                                                         \
	X(T05, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "flag", "opends_stream_register() with an unknown flag bit (0x10)", \
	  { return E(opends_stream_register(fx.stream, 0x10)); })                                                   \
	X(T06, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_register() of a made-up stream",         \
	  { return E(opends_stream_register((opends_stream_t)(uintptr_t)0x1234567, 0)); })                         \
	X(T07, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_deregister() of a stream never registered", \
	  { return E(opends_stream_deregister(fx.stream)); })                                                       \
	X(T08, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "size", "opends_stream_read(size NULL)", {                  \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(fx.h_rw, fx.mem, NULL, &fo, &bo, &r, fx.stream));                         \
	})                                                                                                         \
	X(T09, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "file_offset", "opends_stream_read(file_offset NULL)", {    \
		size_t n = 4096;                                                                                   \
		off_t bo = 0;                                                                                      \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(fx.h_rw, fx.mem, &n, NULL, &bo, &r, fx.stream));                          \
	})                                                                                                         \
	X(T10, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf_offset", "opends_stream_read(buf_offset NULL)", {      \
		size_t n = 4096;                                                                                   \
		off_t fo = 0;                                                                                      \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(fx.h_rw, fx.mem, &n, &fo, NULL, &r, fx.stream));                          \
	})                                                                                                         \
	X(T11, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "bytes_read", "opends_stream_read(bytes_read NULL)", {      \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		return E(opends_stream_read(fx.h_rw, fx.mem, &n, &fo, &bo, NULL, fx.stream));                         \
	})                                                                                                         \
	X(T12, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_stream_read(buf NULL)", {                    \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(fx.h_rw, NULL, &n, &fo, &bo, &r, fx.stream));                            \
	})                                                                                                         \
	X(T13, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_stream_write(fh NULL)", {                     \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		return E(opends_stream_write(NULL, fx.mem, &n, &fo, &bo, &r, fx.stream));                            \
	})                                                                                                         \
	X(T14, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "bytes_written", "opends_stream_write(bytes_written NULL)", { \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		return E(opends_stream_write(fx.h_rw, fx.mem, &n, &fo, &bo, NULL, NULL));                            \
	})                                                                                                         \
	X(T15, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh", "opends_stream_read() through a made-up handle", { \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(bogus_handle(), fx.mem, &n, &fo, &bo, &r, fx.stream));                   \
	})                                                                                                         \
	X(T16, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "stream", "opends_stream_read() on a made-up stream", {     \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		return E(opends_stream_read(fx.h_rw, fx.mem, &n, &fo, &bo, &r, (opends_stream_t)(uintptr_t)0x1234567)); \
	})                                                                                                         \
	X(T17, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "stream", "opends_stream_write() on a destroyed stream", {  \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r;                                                                                         \
		if (opends_stream_destroy(fx.stream).err)                                                           \
			return -1;                                                                                 \
		return E(opends_stream_write(fx.h_rw, fx.mem, &n, &fo, &bo, &r, fx.stream));                          \
	})                                                                                                         \
	X(T18, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_stream_synchronize() of a made-up stream",      \
	  { return E(opends_stream_synchronize((opends_stream_t)(uintptr_t)0x1234567)); })                         \
	X(T19, OPEN, LATER, -OPENDS_INVALID_VALUE, 0, NB, "", "stream read with *file_offset negative (submit ok, *bytes_read)", \
	  { return stream_rw(OPENDS_READ, fx.h_rw, fx.mem, 4096, -4096, 0); })                                       \
	X(T20, OPEN, LATER, -OPENDS_INVALID_VALUE, 0, NB, "", "stream write with *size SSIZE_MAX + 1 (*bytes_written)", \
	  { return stream_rw(OPENDS_WRITE, fx.h_rw, fx.mem, (size_t)SSIZE_MAX + 1, 0, 0); })                         \
	X(T21, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh", "opends_stream_read() through a deregistered handle", { \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r = 777;                                                                                   \
		if (opends_handle_deregister(fx.h_rw).err)                                                          \
			return -1;                                                                                 \
		long code = E(opends_stream_read(fx.h_rw, fx.mem, &n, &fo, &bo, &r, fx.stream));                      \
		return r == 777 ? code : -2;                                                                       \
	})

MISUSE_PROGRAM(ROWS)
