/*
 * The misuse rows of driver state (D), file handles (H) and registered buffers (B), as
 * docs/errors.md lists them; misuse.h has the runner and how to run it.
 */
#include "misuse.h"

#define ROWS(X)                                                                                                    \
	/* ---- driver state ---- */                                                                              \
	X(D01, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_driver_close() before any open", {    \
		return E(opends_driver_close());                                                                   \
	})                                                                                                         \
	X(D02, OPEN, ERR, OPENDS_DRIVER_ALREADY_OPEN, 0, NB, "", "opends_driver_open() while open (double open)",  \
	  { return E(opends_driver_open()); })                                                                     \
	X(D03, OPEN, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_driver_close() twice (double close)", { \
		if (opends_driver_close().err)                                                                     \
			return -1;                                                                                 \
		return E(opends_driver_close());                                                                   \
	})                                                                                                         \
	X(D04, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "props", "opends_driver_get_properties(NULL)",              \
	  { return E(opends_driver_get_properties(NULL)); })                                                       \
	X(D05, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_driver_get_properties() after close", { \
		opends_drv_props_t p;                                                                              \
		return E(opends_driver_get_properties(&p));                                                        \
	})                                                                                                         \
	X(D06, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_handle_register() after close", {    \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, fx.rw));                                                        \
	})                                                                                                         \
	X(D07, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "",                                              \
	  "opends_handle_deregister(handle of the closed session)", { return E(opends_handle_deregister(fx.h_rw)); }) \
	X(D08, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_buf_register() after close",         \
	  { return E(opends_buf_register(fx.mem, 4096, 0)); })                                                      \
	X(D09, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_buf_deregister() after close",       \
	  { return E(opends_buf_deregister(fx.reg)); })                                                             \
	X(D10, CLOSED, ERR, -OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_sync_read() after close",           \
	  { return opends_sync_read(fx.h_rw, fx.mem, 4096, 0, 0); })                                                 \
	X(D11, CLOSED, ERR, -OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_sync_write() after close",          \
	  { return opends_sync_write(fx.h_rw, fx.mem, 4096, 0, 0); })                                                \
	X(D12, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_async_read() after close", {         \
		opends_async_future_t f;                                                                           \
		return E(opends_async_read(fx.h_rw, fx.mem, 4096, 0, 0, &f));                                        \
	})                                                                                                         \
	X(D13, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_async_write() after close", {        \
		opends_async_future_t f;                                                                           \
		return E(opends_async_write(fx.h_rw, fx.mem, 4096, 0, 0, &f));                                       \
	})                                                                                                         \
	X(D14, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_create() after close", {      \
		opends_stream_t s;                                                                                 \
		return E(opends_stream_create(&s));                                                                \
	})                                                                                                         \
	X(D15, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_read() after close", {        \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r = 777;                                                                                   \
		long code = E(opends_stream_read(fx.h_rw, fx.mem, &n, &fo, &bo, &r, fx.stream));                      \
		return r == 777 ? code : -1;                                                                       \
	})                                                                                                         \
	X(D16, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_write() on the default stream after close", { \
		size_t n = 4096;                                                                                   \
		off_t fo = 0, bo = 0;                                                                              \
		ssize_t r = 777;                                                                                   \
		long code = E(opends_stream_write(fx.h_rw, fx.mem, &n, &fo, &bo, &r, NULL));                         \
		return r == 777 ? code : -1;                                                                       \
	})                                                                                                         \
	X(D17, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_synchronize(NULL) after close", \
	  { return E(opends_stream_synchronize(NULL)); })                                                          \
	X(D18, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_register() after close",      \
	  { return E(opends_stream_register(fx.stream, 0)); })                                                      \
	X(D19, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_deregister() after close",    \
	  { return E(opends_stream_deregister(NULL)); })                                                           \
	X(D20, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_stream_destroy() after close",       \
	  { return E(opends_stream_destroy(fx.stream)); })                                                          \
	X(D21, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_batch_setup() after close", {        \
		opends_batch_t b;                                                                                  \
		return E(opends_batch_setup(&b, 4));                                                               \
	})                                                                                                         \
	X(D22, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_batch_submit() after close", {       \
		opends_io_params_t p = entry(fx.h_rw, OPENDS_READ, fx.mem, 4096, 0, 0);                              \
		return E(opends_batch_submit(fx.batch, 1, &p, 0));                                                  \
	})                                                                                                         \
	X(D23, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_batch_get_status() after close", {   \
		unsigned nr = 1;                                                                                   \
		opends_io_events_t ev;                                                                             \
		return E(opends_batch_get_status(fx.batch, 0, &nr, &ev, NULL));                                     \
	})                                                                                                         \
	X(D24, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_batch_cancel() after close",         \
	  { return E(opends_batch_cancel(fx.batch)); })                                                             \
	X(D25, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_batch_destroy() after close",        \
	  { return E(opends_batch_destroy(fx.batch)); })                                                            \
	X(D26, CLOSED, VALUE, 0, 0, NB, "", "opends_driver_backend() after close is NULL (0 here means NULL)",     \
	  { return opends_driver_backend() == NULL ? 0 : 1; })                                                     \
	X(D27, CLOSED, VALUE, 0, 0, NB, "", "opends_get_version(NULL, NULL, NULL) with the driver closed",         \
	  { return E(opends_get_version(NULL, NULL, NULL)); })                                                     \
	/* ---- file handles ---- */                                                                              \
	X(H01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_handle_register(NULL, fd)",                   \
	  { return E(opends_handle_register(NULL, fx.rw)); })                                                       \
	X(H02, OPEN, ERR, OPENDS_INVALID_VALUE, 0, EBADF, "fd", "opends_handle_register(&fh, -1)", {              \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, -1));                                                          \
	})                                                                                                         \
	X(H03, OPEN, ERR, OPENDS_INVALID_VALUE, 0, EBADF, "fd", "opends_handle_register() of a closed fd", {       \
		opends_handle_t h;                                                                                 \
		int fd = dup(fx.rw);                                                                                \
		close(fd);                                                                                         \
		return E(opends_handle_register(&h, fd));                                                          \
	})                                                                                                         \
	X(H04, OPEN, ERR, OPENDS_INVALID_FILE_TYPE, 0, NB, "", "opends_handle_register() of a directory", {       \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, fx.dirfd));                                                     \
	})                                                                                                         \
	X(H05, OPEN, ERR, OPENDS_INVALID_FILE_TYPE, 0, NB, "", "opends_handle_register() of a pipe", {            \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, fx.pipefd[0]));                                                 \
	})                                                                                                         \
	X(H06, OPEN, ERR, OPENDS_INVALID_FILE_TYPE, 0, NB, "", "opends_handle_register() of a socket", {          \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, fx.sock[0]));                                                   \
	})                                                                                                         \
	X(H07, OPEN, ERR, OPENDS_INVALID_FILE_TYPE, 0, NB, "", "opends_handle_register() of /dev/null (char device)", { \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, fx.devnull));                                                   \
	})                                                                                                         \
	X(H08, OPEN, ERR, OPENDS_INVALID_FILE_OPEN_FLAG, 0, NB, "",                                                \
	  "opends_handle_register() of an O_PATH fd of a regular file (not in the header's list)", {              \
		  opends_handle_t h;                                                                               \
		  return E(opends_handle_register(&h, fx.opath));                                                   \
	  })                                                                                                       \
	X(H09, OPEN, ERR, OPENDS_HANDLE_ALREADY_REGISTERED, 0, NB, "", "opends_handle_register() of an fd already registered", { \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, fx.rw));                                                        \
	})                                                                                                         \
	X(H10, OPEN, VALUE, 0, 0, NB, "", "opends_handle_register() of a dup() of a registered fd (another fd: allowed)", { \
		opends_handle_t h;                                                                                 \
		int fd = dup(fx.rw);                                                                                \
		long r = E(opends_handle_register(&h, fd));                                                        \
		if (!r)                                                                                            \
			r = E(opends_handle_deregister(h));                                                        \
		close(fd);                                                                                         \
		return r;                                                                                          \
	})                                                                                                         \
	X(H11, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_handle_deregister(NULL)",                     \
	  { return E(opends_handle_deregister(NULL)); })                                                           \
	X(H12, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "", "opends_handle_deregister() of a made-up handle", \
	  { return E(opends_handle_deregister(bogus_handle())); })                                                 \
	X(H13, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "", "opends_handle_deregister() twice", {           \
		if (opends_handle_deregister(fx.h_rw).err)                                                          \
			return -1;                                                                                 \
		return E(opends_handle_deregister(fx.h_rw));                                                        \
	})                                                                                                         \
	X(H14, OPEN, ERR, -OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh",                                              \
	  "opends_sync_read() through a deregistered handle (its slot reused by a new handle)", {                  \
		  opends_handle_t h2;                                                                              \
		  if (opends_handle_deregister(fx.h_rw).err || opends_handle_deregister(fx.h_ro).err ||              \
		      opends_handle_register(&h2, fx.ro).err)                                                       \
			  return -1;                                                                               \
		  return opends_sync_read(fx.h_rw, fx.mem, 4096, 0, 0);                                              \
	  })                                                                                                       \
	X(H15, OPEN, ERR, -OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh", "opends_sync_write() through a made-up handle", \
	  { return opends_sync_write(bogus_handle(), fx.mem, 4096, 0, 0); })                                        \
	X(H16, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_sync_read(NULL handle)",                     \
	  { return opends_sync_read(NULL, fx.mem, 4096, 0, 0); })                                                   \
	X(H17, OPEN, ERR, -OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "fh",                                              \
	  "handle released by opends_driver_close, used after a reopen in which another fd was registered", {    \
		  opends_handle_t old = fx.h_rw, h2;                                                                \
		  if (opends_driver_close().err || opends_driver_open().err ||                                     \
		      opends_handle_register(&h2, fx.ro).err)                                                       \
			  return -1;                                                                               \
		  return opends_sync_read(old, fx.mem, 4096, 0, 0);                                                 \
	  })                                                                                                       \
	X(H18, OPEN, VALUE, 0, 0, NB, "", "an fd deregistered can be registered again", {                          \
		opends_handle_t h;                                                                                 \
		if (opends_handle_deregister(fx.h_rw).err)                                                          \
			return -1;                                                                                 \
		return E(opends_handle_register(&h, fx.rw));                                                        \
	})                                                                                                         \
	/* issue 15 item 3: writes through O_APPEND would land at EOF, not at file_offset */                      \
	X(H19, OPEN, ERR, OPENDS_INVALID_FILE_OPEN_FLAG, 0, NB, "O_APPEND",                                        \
	  "opends_handle_register() of an O_WRONLY O_APPEND fd (writes would land at EOF)", {                      \
		  opends_handle_t h;                                                                               \
		  return E(opends_handle_register(&h, open(fx.path, O_WRONLY | O_APPEND)));                         \
	  })                                                                                                       \
	X(H20, OPEN, ERR, OPENDS_INVALID_FILE_OPEN_FLAG, 0, NB, "O_APPEND",                                        \
	  "opends_handle_register() of an O_RDWR O_APPEND O_DIRECT fd", {                                         \
		  opends_handle_t h;                                                                               \
		  return E(opends_handle_register(&h, open(fx.path, O_RDWR | O_APPEND | O_DIRECT)));                \
	  })                                                                                                       \
	X(H21, OPEN, VALUE, 0, 0, NB, "", "opends_handle_register() of an O_RDONLY O_APPEND fd (cannot write: allowed)", { \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register(&h, open(fx.path, O_RDONLY | O_APPEND)));                           \
	})                                                                                                         \
	/* ---- registered buffers ---- */                                                                        \
	X(B01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_buf_register(NULL, 4096, 0)",                \
	  { return E(opends_buf_register(NULL, 4096, 0)); })                                                       \
	X(B02, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "size", "opends_buf_register(buf, 0, 0) (zero size)",        \
	  { return E(opends_buf_register(fx.mem, 0, 0)); })                                                         \
	X(B03, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "flags", "opends_buf_register(buf, 4096, 1) (flags != 0)",  \
	  { return E(opends_buf_register(fx.mem, 4096, 1)); })                                                      \
	X(B04, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_buf_register() of a range that wraps the address space", \
	  { return E(opends_buf_register((void *)(UINTPTR_MAX - 4095), 8192, 0)); })                               \
	X(B05, OPEN, ERR, OPENDS_MEMORY_ALREADY_REGISTERED, 0, NB, "", "opends_buf_register() of a registered range again", \
	  { return E(opends_buf_register(fx.reg, REG, 0)); })                                                       \
	X(B06, OPEN, ERR, OPENDS_MEMORY_ALREADY_REGISTERED, 0, NB, "", "overlapping registration: starts inside a registered range", \
	  { return E(opends_buf_register(fx.reg + REG - 4096, 8192, 0)); })                                         \
	X(B07, OPEN, ERR, OPENDS_MEMORY_ALREADY_REGISTERED, 0, NB, "", "overlapping registration: ends inside a registered range", \
	  { return E(opends_buf_register(fx.reg - 4096, 8192, 0)); })                                               \
	X(B08, OPEN, ERR, OPENDS_MEMORY_ALREADY_REGISTERED, 0, NB, "", "overlapping registration: contains a registered range", \
	  { return E(opends_buf_register(fx.reg - 4096, REG + 8192, 0)); })                                         \
	X(B09, OPEN, VALUE, 0, 0, NB, "", "registration adjacent to a registered range (no overlap: allowed)", {  \
		long r = E(opends_buf_register(fx.reg + REG, 4096, 0));                                             \
		long r2 = E(opends_buf_register(fx.reg - 1, 1, 0));                                                 \
		return r ? r : r2;                                                                                 \
	})                                                                                                         \
	X(B10, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_buf_deregister(NULL)",                       \
	  { return E(opends_buf_deregister(NULL)); })                                                              \
	X(B11, OPEN, ERR, OPENDS_MEMORY_NOT_REGISTERED, 0, NB, "", "opends_buf_deregister() of memory never registered", \
	  { return E(opends_buf_deregister(fx.mem)); })                                                             \
	X(B12, OPEN, ERR, OPENDS_MEMORY_NOT_REGISTERED, 0, NB, "", "opends_buf_deregister() of a pointer inside a range (not its base)", \
	  { return E(opends_buf_deregister(fx.reg + 4096)); })                                                      \
	X(B13, OPEN, ERR, OPENDS_MEMORY_NOT_REGISTERED, 0, NB, "", "opends_buf_deregister() twice", {              \
		if (opends_buf_deregister(fx.reg).err)                                                              \
			return -1;                                                                                 \
		return E(opends_buf_deregister(fx.reg));                                                            \
	})                                                                                                         \
	X(B14, OPEN, ERR, -OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "opends_sync_read(): buf_offset + size runs past the registered range", \
	  { return opends_sync_read(fx.h_rw, fx.reg, 4096, 0, REG - 100); })                                         \
	X(B15, OPEN, ERR, -OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "opends_sync_read(): target starts inside a registered range, ends past it", \
	  { return opends_sync_read(fx.h_rw, fx.reg + 100, REG, 0, 0); })                                            \
	X(B16, OPEN, ERR, -OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "opends_sync_write() from past the end of a registered range", \
	  { return opends_sync_write(fx.h_rw, fx.reg, 8192, 0, REG - 4096); })                                       \
	X(B17, OPEN, ERR, OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "opends_async_read() past a registered range (refused at submit)", { \
		opends_async_future_t f;                                                                           \
		return E(opends_async_read(fx.h_rw, fx.reg, 8192, 0, REG - 4096, &f));                               \
	})                                                                                                         \
	X(B18, OPEN, ERR, OPENDS_INVALID_MAPPING_RANGE, 0, NB, "params[0]", "batch entry past a registered range (refused at submit)", \
	  { return batch_submit_code(entry(fx.h_rw, OPENDS_READ, fx.reg, 8192, 0, REG - 4096)); })                   \
	X(B19, OPEN, LATER, -OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "stream read past a registered range (*bytes_read)", \
	  { return stream_rw(OPENDS_READ, fx.h_rw, fx.reg, 8192, 0, REG - 4096); })                                  \
	X(B20, OPEN, VALUE, 4096, 0, NB, "", "read that ends exactly at the end of a registered range",            \
	  { return opends_sync_read(fx.h_rw, fx.reg, 4096, 0, REG - 4096); })                                        \
	X(B21, OPEN, VALUE, 8192, 0, NB, "", "read into memory once registered, after deregistration, past the old end", { \
		if (opends_buf_deregister(fx.reg).err)                                                              \
			return -1;                                                                                 \
		return opends_sync_read(fx.h_rw, fx.reg, 8192, 0, REG - 4096);                                       \
	})                                                                                                         \
	X(B22, OPEN, VALUE, 4096, 0, NB, "",                                                                       \
	  "buf in one registered range, buf + buf_offset inside another, target within it (allowed)", {           \
		  if (opends_buf_register(fx.reg + REG, REG, 0).err)                                                \
			  return -1;                                                                               \
		  return opends_sync_read(fx.h_rw, fx.reg, 4096, 0, REG + 4096);                                     \
	  })

MISUSE_PROGRAM(ROWS)
