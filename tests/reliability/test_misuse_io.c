/*
 * The misuse rows of sizes and offsets (S), the direction of the fd (R) and futures (A), as
 * docs/errors.md lists them; misuse.h has the runner and how to run it.
 */
#include "misuse.h"

#define ROWS(X)                                                                                                    \
	/* ---- sizes and offsets ---- */                                                                         \
	X(S01, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "file_offset", "opends_sync_read(): negative file_offset", \
	  { return opends_sync_read(fx.h_rw, fx.mem, 4096, -1, 0); })                                                \
	X(S02, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "buf_offset", "opends_sync_write(): negative buf_offset",  \
	  { return opends_sync_write(fx.h_rw, fx.mem, 4096, 0, -4096); })                                            \
	X(S03, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "size", "opends_sync_read(): size SSIZE_MAX + 1",          \
	  { return opends_sync_read(fx.h_rw, fx.mem, (size_t)SSIZE_MAX + 1, 0, 0); })                                \
	X(S04, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "", "opends_sync_read(): file_offset + size past the largest off_t", \
	  { return opends_sync_read(fx.h_rw, fx.mem, 100, INT64_MAX - 10, 0); })                                     \
	X(S05, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "", "opends_sync_write(): file_offset = largest off_t, size 1", \
	  { return opends_sync_write(fx.h_rw, fx.mem, 1, INT64_MAX, 0); })                                           \
	X(S06, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_sync_read(buf NULL)",                       \
	  { return opends_sync_read(fx.h_rw, NULL, 4096, 0, 0); })                                                  \
	X(S07, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_sync_write(buf NULL)",                      \
	  { return opends_sync_write(fx.h_rw, NULL, 4096, 0, 0); })                                                 \
	X(S08, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "", "opends_sync_read(): buf + buf_offset + size wraps the address space", \
	  { return opends_sync_read(fx.h_rw, (void *)(UINTPTR_MAX - 100), 100, 0, 50); })                           \
	X(S09, OPEN, VALUE, 0, 0, NB, "", "opends_sync_read(): size 0 returns 0",                                  \
	  { return opends_sync_read(fx.h_rw, fx.mem, 0, 0, 0); })                                                    \
	X(S10, OPEN, VALUE, 0, 0, NB, "", "opends_sync_write(): size 0 returns 0",                                 \
	  { return opends_sync_write(fx.h_rw, fx.mem, 0, 0, 0); })                                                   \
	X(S11, OPEN, VALUE, 0, 0, NB, "", "opends_async_read(): size 0 completes with 0",                          \
	  { return async_result(OPENDS_READ, fx.h_rw, fx.mem, 0, 0, 0); })                                           \
	X(S12, OPEN, VALUE, 100, 0, NB, "", "opends_sync_read(): huge size (largest off_t - file_offset), 100 bytes before EOF, returns 100", \
	  { return opends_sync_read(fx.h_rw, fx.mem, (size_t)(INT64_MAX - (FILE_SIZE - 100)), FILE_SIZE - 100, 0); })                      \
	X(S13, OPEN, VALUE, 0, 0, NB, "", "opends_sync_read() at EOF returns 0",                                   \
	  { return opends_sync_read(fx.h_rw, fx.mem, 4096, FILE_SIZE, 0); })                                         \
	X(S14, OPEN, VALUE, 0, 0, NB, "", "opends_sync_read() 1 byte at the largest off_t - 1 returns 0 (past EOF)", \
	  { return opends_sync_read(fx.h_rw, fx.mem, 1, INT64_MAX - 1, 0); })                                        \
	X(S15, OPEN, ERR, -EFBIG, 0, NB, "", "opends_sync_write() of 1 byte ending at the largest off_t (-EFBIG from the OS)", \
	  { return opends_sync_write(fx.h_rw, fx.mem, 1, INT64_MAX - 1, 0); })                                       \
	X(S16, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "file_offset", "opends_async_write(): negative file_offset (refused at submit)", { \
		opends_async_future_t f;                                                                           \
		return E(opends_async_write(fx.h_rw, fx.mem, 4096, -5, 0, &f));                                      \
	})                                                                                                         \
	X(S17, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "size", "batch entry with size SSIZE_MAX + 1",              \
	  { return batch_submit_code(entry(fx.h_rw, OPENDS_READ, fx.mem, (size_t)SSIZE_MAX + 1, 0, 0)); })           \
	X(S18, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "batch entry with file_offset + size past the largest off_t", \
	  { return batch_submit_code(entry(fx.h_rw, OPENDS_WRITE, fx.mem, 4096, INT64_MAX - 100, 0)); })             \
	/* ---- direction of the fd ---- */                                                                       \
	X(R01, OPEN, ERR, -EBADF, 0, NB, "", "opends_sync_write() through a read-only fd",                         \
	  { return opends_sync_write(fx.h_ro, fx.mem, 4096, 0, 0); })                                                \
	X(R02, OPEN, ERR, -EBADF, 0, NB, "", "opends_sync_read() through a write-only fd",                         \
	  { return opends_sync_read(fx.h_wo, fx.mem, 4096, 0, 0); })                                                 \
	X(R03, OPEN, ERR, -EBADF, 0, NB, "", "opends_async_write() through a read-only fd (submit ok, await -EBADF)", \
	  { return async_result(OPENDS_WRITE, fx.h_ro, fx.mem, 4096, 0, 0); })                                       \
	X(R04, OPEN, ERR, -EBADF, 0, NB, "", "opends_async_read() through a write-only fd (await -EBADF)",         \
	  { return async_result(OPENDS_READ, fx.h_wo, fx.mem, 4096, 0, 0); })                                        \
	X(R05, OPEN, LATER, -EBADF, 0, NB, "", "batch write through a read-only fd (event OPENDS_FAILED, ret -EBADF)", \
	  { return batch_event_ret(entry(fx.h_ro, OPENDS_WRITE, fx.mem, 4096, 0, 0)); })                             \
	X(R06, OPEN, LATER, -EBADF, 0, NB, "", "stream write through a read-only fd (*bytes_written -EBADF)",      \
	  { return stream_rw(OPENDS_WRITE, fx.h_ro, fx.mem, 4096, 0, 0); })                                          \
	X(R07, OPEN, LATER, -EBADF, 0, NB, "", "stream read through a write-only fd (*bytes_read -EBADF)",         \
	  { return stream_rw(OPENDS_READ, fx.h_wo, fx.mem, 4096, 0, 0); })                                           \
	/* ---- futures ---- */                                                                                   \
	X(A01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_read(future NULL)",                 \
	  { return E(opends_async_read(fx.h_rw, fx.mem, 4096, 0, 0, NULL)); })                                       \
	X(A02, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_write(future NULL)",                \
	  { return E(opends_async_write(fx.h_rw, fx.mem, 4096, 0, 0, NULL)); })                                      \
	X(A03, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_await(NULL)",                      \
	  { return opends_async_await(NULL); })                                                                    \
	X(A04, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_await() of a never-submitted (zeroed) future", { \
		opends_async_future_t f;                                                                           \
		memset(&f, 0, sizeof(f));                                                                          \
		return opends_async_await(&f);                                                                     \
	})                                                                                                         \
	X(A05, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_poll(NULL)",                       \
	  { return opends_async_poll(NULL); })                                                                     \
	X(A06, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "future", "opends_async_poll() of a zeroed future", {      \
		opends_async_future_t f;                                                                           \
		memset(&f, 0, sizeof(f));                                                                          \
		return opends_async_poll(&f);                                                                      \
	})                                                                                                         \
	X(A07, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh", "opends_async_read() through a made-up handle", { \
		opends_async_future_t f;                                                                           \
		return E(opends_async_read(bogus_handle(), fx.mem, 4096, 0, 0, &f));                                \
	})                                                                                                         \
	X(A08, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_async_write(buf NULL)", {                   \
		opends_async_future_t f;                                                                           \
		return E(opends_async_write(fx.h_rw, NULL, 4096, 0, 0, &f));                                        \
	})                                                                                                         \
	X(A09, OPEN, VALUE, 4096, 0, NB, "", "opends_async_await() twice returns the same result", {              \
		opends_async_future_t f;                                                                           \
		if (opends_async_read(fx.h_rw, fx.mem, 4096, 0, 0, &f).err)                                          \
			return -1;                                                                                 \
		ssize_t a = opends_async_await(&f), b = opends_async_await(&f);                                    \
		return a == b && opends_async_poll(&f) == 1 ? (long)a : -2;                                        \
	})

MISUSE_PROGRAM(ROWS)
