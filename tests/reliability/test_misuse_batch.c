/*
 * The misuse rows of batches (X), as
 * docs/errors.md lists them; misuse.h has the runner and how to run it.
 */
#include "misuse.h"

#define ROWS(X)                                                                                                    \
	/* ---- batches ---- */                                                                                   \
	X(X01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_setup(NULL, 4)",                     \
	  { return E(opends_batch_setup(NULL, 4)); })                                                              \
	X(X02, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "max_nr", "opends_batch_setup(&b, 0)", {                    \
		opends_batch_t b;                                                                                  \
		return E(opends_batch_setup(&b, 0));                                                               \
	})                                                                                                         \
	X(X03, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "max_nr", "opends_batch_setup(): max_nr = max_batch_io_size + 1", { \
		opends_batch_t b;                                                                                  \
		opends_drv_props_t p;                                                                              \
		if (opends_driver_get_properties(&p).err)                                                          \
			return -1;                                                                                 \
		return E(opends_batch_setup(&b, p.max_batch_io_size + 1));                                         \
	})                                                                                                         \
	X(X04, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_submit() to a made-up batch", {      \
		opends_io_params_t p = entry(fx.h_rw, OPENDS_READ, fx.mem, 4096, 0, 0);                              \
		return E(opends_batch_submit((opends_batch_t)(uintptr_t)0x7777, 1, &p, 0));                        \
	})                                                                                                         \
	X(X05, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "params", "opends_batch_submit(params NULL)",               \
	  { return E(opends_batch_submit(fx.batch, 1, NULL, 0)); })                                                 \
	X(X06, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "nr", "opends_batch_submit(nr 0)", {                        \
		opends_io_params_t p = entry(fx.h_rw, OPENDS_READ, fx.mem, 4096, 0, 0);                              \
		return E(opends_batch_submit(fx.batch, 0, &p, 0));                                                  \
	})                                                                                                         \
	X(X07, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "flags", "opends_batch_submit(flags 1)", {                  \
		opends_io_params_t p = entry(fx.h_rw, OPENDS_READ, fx.mem, 4096, 0, 0);                              \
		return E(opends_batch_submit(fx.batch, 1, &p, 1));                                                  \
	})                                                                                                         \
	X(X08, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "params[0]", "batch entry with a bad mode (0)", {           \
		opends_io_params_t p = entry(fx.h_rw, OPENDS_READ, fx.mem, 4096, 0, 0);                              \
		p.mode = (opends_batch_mode_t)0;                                                                   \
		return batch_submit_code(p);                                                                       \
	})                                                                                                         \
	X(X09, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "params[0]", "batch entry with a bad opcode (7)",           \
	  { return batch_submit_code(entry(fx.h_rw, 7, fx.mem, 4096, 0, 0)); })                                      \
	X(X10, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "batch entry with buf_base NULL",                    \
	  { return batch_submit_code(entry(fx.h_rw, OPENDS_READ, NULL, 4096, 0, 0)); })                             \
	X(X11, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "file_offset", "batch entry with a negative file_offset",   \
	  { return batch_submit_code(entry(fx.h_rw, OPENDS_READ, fx.mem, 4096, -1, 0)); })                           \
	X(X12, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf_offset", "batch entry with a negative buf_offset",     \
	  { return batch_submit_code(entry(fx.h_rw, OPENDS_WRITE, fx.mem, 4096, 0, -1)); })                          \
	X(X13, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "params[0]", "batch entry through a made-up handle", \
	  { return batch_submit_code(entry(bogus_handle(), OPENDS_READ, fx.mem, 4096, 0, 0)); })                    \
	X(X14, OPEN, ERR, OPENDS_BATCH_FULL, 0, NB, "", "opends_batch_submit(): nr 5 > max_nr 4", {                \
		opends_io_params_t p[5];                                                                           \
		for (int i = 0; i < 5; i++)                                                                        \
			p[i] = entry(fx.h_rw, OPENDS_READ, fx.mem + i * 4096, 4096, 0, 0);                           \
		return E(opends_batch_submit(fx.batch, 5, p, 0));                                                   \
	})                                                                                                         \
	X(X15, OPEN, ERR, OPENDS_BATCH_FULL, 0, NB, "", "opends_batch_submit(): 3 in flight + 2 > max_nr 4", {     \
		opends_io_params_t p[3];                                                                           \
		for (int i = 0; i < 3; i++)                                                                        \
			p[i] = entry(fx.h_rw, OPENDS_READ, fx.mem + i * 4096, 4096, 0, 0);                           \
		if (opends_batch_submit(fx.batch, 3, p, 0).err)                                                     \
			return -1;                                                                                 \
		long r = E(opends_batch_submit(fx.batch, 2, p, 0));                                                 \
		char keep[256];                                                                                    \
		snprintf(keep, sizeof(keep), "%s", opends_last_error_detail());                                    \
		opends_io_events_t ev[3];                                                                          \
		unsigned nr = 3;                                                                                   \
		R_TRY(opends_batch_get_status(fx.batch, 3, &nr, ev, NULL));                                          \
		(void)keep;                                                                                        \
		return nr == 3 ? r : -2;                                                                           \
	})                                                                                                         \
	X(X16, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "nr", "opends_batch_get_status(nr NULL)", {                 \
		opends_io_events_t ev;                                                                             \
		return E(opends_batch_get_status(fx.batch, 0, NULL, &ev, NULL));                                    \
	})                                                                                                         \
	X(X17, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "events", "opends_batch_get_status(events NULL, *nr 1)", {  \
		unsigned nr = 1;                                                                                   \
		return E(opends_batch_get_status(fx.batch, 0, &nr, NULL, NULL));                                    \
	})                                                                                                         \
	X(X18, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "timeout", "opends_batch_get_status(): negative timeout", { \
		unsigned nr = 1;                                                                                   \
		opends_io_events_t ev;                                                                             \
		struct timespec ts = { -1, 0 };                                                                    \
		return E(opends_batch_get_status(fx.batch, 0, &nr, &ev, &ts));                                      \
	})                                                                                                         \
	X(X19, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "timeout", "opends_batch_get_status(): timeout tv_nsec = 1e9", { \
		unsigned nr = 1;                                                                                   \
		opends_io_events_t ev;                                                                             \
		struct timespec ts = { 0, 1000000000L };                                                           \
		return E(opends_batch_get_status(fx.batch, 0, &nr, &ev, &ts));                                      \
	})                                                                                                         \
	X(X20, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_get_status() of a made-up batch", {  \
		unsigned nr = 1;                                                                                   \
		opends_io_events_t ev;                                                                             \
		return E(opends_batch_get_status((opends_batch_t)(uintptr_t)0x7777, 0, &nr, &ev, NULL));           \
	})                                                                                                         \
	X(X21, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_destroy() twice", {                  \
		if (opends_batch_destroy(fx.batch).err)                                                             \
			return -1;                                                                                 \
		return E(opends_batch_destroy(fx.batch));                                                           \
	})                                                                                                         \
	X(X22, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_cancel() of a made-up batch",        \
	  { return E(opends_batch_cancel((opends_batch_t)(uintptr_t)0x7777)); })                                   \
	X(X23, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "batch", "opends_batch_submit() to a destroyed batch", {    \
		opends_io_params_t p = entry(fx.h_rw, OPENDS_READ, fx.mem, 4096, 0, 0);                              \
		if (opends_batch_destroy(fx.batch).err)                                                             \
			return -1;                                                                                 \
		return E(opends_batch_submit(fx.batch, 1, &p, 0));                                                  \
	})                                                                                                         \
	X(X24, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "params[1]",                                                \
	  "second entry invalid: all or nothing (the valid first write must not happen)", {                       \
		  uint8_t *src = fx.mem + 8192;                                                                     \
		  memset(src, 0x5a, 4096);                                                                         \
		  opends_io_params_t p[2] = { entry(fx.h_rw, OPENDS_WRITE, src, 4096, 3 * 4096, 0),                 \
					      entry(fx.h_rw, OPENDS_READ, fx.mem, 4096, -7, 0) };                    \
		  long r = E(opends_batch_submit(fx.batch, 2, p, 0));                                               \
		  char keep[256];                                                                                  \
		  snprintf(keep, sizeof(keep), "%s", opends_last_error_detail());                                  \
		  unsigned nr = 2;                                                                                 \
		  opends_io_events_t ev[2];                                                                        \
		  struct timespec ts = { 0, 20 * 1000 * 1000 };                                                    \
		  R_TRY(opends_batch_get_status(fx.batch, 2, &nr, ev, &ts));                                         \
		  uint8_t chk[4096];                                                                               \
		  if (pread(fx.rw, chk, 4096, 3 * 4096) != 4096 || r_first_bad(chk, 4096, 1, 3 * 4096) >= 0)       \
			  R_FAIL("a refused batch submit wrote its valid entry");                                  \
		  if (nr)                                                                                          \
			  R_FAIL("a refused batch submit delivered %u events", nr);                                \
		  (void)keep;                                                                                      \
		  return r;                                                                                        \
	  })                                                                                                       \
	X(X25, OPEN, VALUE, OPENDS_SUCCESS, 0, NB, "", "opends_batch_get_status(*nr 0, events NULL) is allowed", { \
		unsigned nr = 0;                                                                                   \
		return E(opends_batch_get_status(fx.batch, 0, &nr, NULL, NULL));                                    \
	})

MISUSE_PROGRAM(ROWS)
