/*
 * The misuse rows of configuration variables (C): junk, negative, out-of-range and
 * boundary values of every OPENDS_* variable (src/core/config.c), as
 * docs/errors.md lists them; misuse.h has the runner and how to run it.
 */
#include "misuse.h"

/* Set one configuration variable, try to open, close again if it opened,
 * and restore the variable: the open's code. */
static long cfg_try(const char *name, const char *value)
{
	const char *old = getenv(name);
	char save[256] = "";
	bool had = old != NULL;
	if (had)
		snprintf(save, sizeof(save), "%s", old);
	setenv(name, value, 1);
	opends_error_t e = opends_driver_open();
	long r = E(e);
	if (e.err == OPENDS_SUCCESS) {
		opends_error_t e2 = opends_driver_close();
		if (e2.err)
			R_FAIL("close after open with %s=%s: %d", name, value, (int)e2.err);
	} else if (opends_driver_backend() != NULL) {
		R_FAIL("a failed open (%s=%s) left the driver open", name, value);
	}
	if (had)
		setenv(name, save, 1);
	else
		unsetenv(name);
	return r;
}

/* cfg_try with OPENDS_CUFILE_LIBRARY naming a library that does not exist:
 * the same answer on every machine (and over the CPU suite's stand-in). */
static long cfg_without_cufile(const char *name, const char *value)
{
	const char *old = getenv("OPENDS_CUFILE_LIBRARY");
	char save[4096] = "";
	bool had = old != NULL;
	if (had)
		snprintf(save, sizeof(save), "%s", old);
	setenv("OPENDS_CUFILE_LIBRARY", "/nonexistent/opends-test/libcufile.so.0", 1);
	long r = cfg_try(name, value);
	if (had)
		setenv("OPENDS_CUFILE_LIBRARY", save, 1);
	else
		unsetenv("OPENDS_CUFILE_LIBRARY");
	return r;
}

/* Open with name=value, run one read, close: the read's result. */
static long cfg_read(const char *name, const char *value, size_t size, off_t fo)
{
	setenv(name, value, 1);
	opends_error_t e = opends_driver_open();
	unsetenv(name);
	if (e.err)
		return 999999;
	opends_handle_t h;
	long r;
	e = opends_handle_register(&h, fx.rw);
	if (e.err)
		r = 999998;
	else
		r = (long)opends_sync_read(h, fx.mem, size, fo, 0);
	char keep[256];
	snprintf(keep, sizeof(keep), "%s", opends_last_error_detail());
	opends_driver_close();
	if (r < 0 && !keep[0])
		R_FAIL("no detail after the read failed");
	return r;
}

static bool have_gpu(void)
{
	return access("/dev/nvidiactl", F_OK) == 0;
}

#define ROWS(X)                                                                                                    \
	/* ---- configuration ---- */                                                                             \
	X(C01, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_BACKEND", "OPENDS_BACKEND=junk",           \
	  { return cfg_try("OPENDS_BACKEND", "junk"); })                                                           \
	X(C02, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_BACKEND", "OPENDS_BACKEND=REF (names are case-sensitive)", \
	  { return cfg_try("OPENDS_BACKEND", "REF"); })                                                            \
	X(C03, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_BACKEND", "OPENDS_BACKEND=\" ref\" (leading space)", \
	  { return cfg_try("OPENDS_BACKEND", " ref"); })                                                           \
	X(C04, CONFIG, ERR, OPENDS_PLATFORM_NOT_SUPPORTED, 0, NB, "OPENDS_BACKEND",                                \
	  "OPENDS_BACKEND=gds where cuFile cannot be loaded (a known backend that cannot run)",                   \
	  { return cfg_without_cufile("OPENDS_BACKEND", "gds"); })                                                 \
	X(C05, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_ACCEL", "OPENDS_ACCEL=junk",               \
	  { return cfg_try("OPENDS_ACCEL", "junk"); })                                                             \
	X(C06, CONFIG, ERR, OPENDS_PLATFORM_NOT_SUPPORTED, OPENDS_DEVICE_NOT_FOUND, NB, "OPENDS_ACCEL",            \
	  "OPENDS_ACCEL=cuda on a machine without a GPU (either code)", {                                        \
		  if (have_gpu())                                                                                  \
			  return OPENDS_PLATFORM_NOT_SUPPORTED;                                                    \
		  return cfg_try("OPENDS_ACCEL", "cuda");                                                          \
	  })                                                                                                       \
	X(C07, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=0",        \
	  { return cfg_try("OPENDS_IO_THREADS", "0"); })                                                           \
	X(C08, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=257",      \
	  { return cfg_try("OPENDS_IO_THREADS", "257"); })                                                         \
	X(C09, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=-1",       \
	  { return cfg_try("OPENDS_IO_THREADS", "-1"); })                                                          \
	X(C10, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=abc",      \
	  { return cfg_try("OPENDS_IO_THREADS", "abc"); })                                                         \
	X(C11, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=4x",       \
	  { return cfg_try("OPENDS_IO_THREADS", "4x"); })                                                          \
	X(C12, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=\" 4\"",   \
	  { return cfg_try("OPENDS_IO_THREADS", " 4"); })                                                          \
	X(C13, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS",                               \
	  "OPENDS_IO_THREADS=18446744073709551620 (overflows 64 bits)",                                            \
	  { return cfg_try("OPENDS_IO_THREADS", "18446744073709551620"); })                                        \
	X(C14, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=+4",       \
	  { return cfg_try("OPENDS_IO_THREADS", "+4"); })                                                          \
	X(C15, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_QUEUE_DEPTH", "OPENDS_QUEUE_DEPTH=0",      \
	  { return cfg_try("OPENDS_QUEUE_DEPTH", "0"); })                                                          \
	X(C16, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_QUEUE_DEPTH", "OPENDS_QUEUE_DEPTH=4097",   \
	  { return cfg_try("OPENDS_QUEUE_DEPTH", "4097"); })                                                       \
	X(C17, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_QUEUE_DEPTH", "OPENDS_QUEUE_DEPTH=-5",     \
	  { return cfg_try("OPENDS_QUEUE_DEPTH", "-5"); })                                                         \
	X(C18, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_QUEUE_DEPTH", "OPENDS_QUEUE_DEPTH=1e3",    \
	  { return cfg_try("OPENDS_QUEUE_DEPTH", "1e3"); })                                                        \
	X(C19, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=4095",     \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "4095"); })                                                        \
	X(C20, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=6000 (not a multiple of 4096)", \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "6000"); })                                                        \
	X(C21, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=2g (above 1 GiB)", \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "2g"); })                                                          \
	X(C22, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=1025m",    \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "1025m"); })                                                       \
	X(C23, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=0",        \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "0"); })                                                           \
	X(C24, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=-4096",    \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "-4096"); })                                                       \
	X(C25, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=4kb",      \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "4kb"); })                                                         \
	X(C26, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=k",        \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "k"); })                                                           \
	X(C27, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE",                               \
	  "OPENDS_CHUNK_SIZE=17179869184g (overflows when scaled)",                                                \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "17179869184g"); })                                                \
	X(C28, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CPU_MASK", "OPENDS_CPU_MASK=xyz",          \
	  { return cfg_try("OPENDS_CPU_MASK", "xyz"); })                                                           \
	X(C29, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CPU_MASK", "OPENDS_CPU_MASK=0x",           \
	  { return cfg_try("OPENDS_CPU_MASK", "0x"); })                                                            \
	X(C30, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CPU_MASK", "OPENDS_CPU_MASK=-1",           \
	  { return cfg_try("OPENDS_CPU_MASK", "-1"); })                                                            \
	X(C31, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CPU_MASK", "OPENDS_CPU_MASK=0x1ffffffffffffffff (65 bits)", \
	  { return cfg_try("OPENDS_CPU_MASK", "0x1ffffffffffffffff"); })                                           \
	X(C32, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IDLE_SPIN", "OPENDS_IDLE_SPIN=-1",         \
	  { return cfg_try("OPENDS_IDLE_SPIN", "-1"); })                                                           \
	X(C33, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IDLE_SPIN", "OPENDS_IDLE_SPIN=1000001",    \
	  { return cfg_try("OPENDS_IDLE_SPIN", "1000001"); })                                                      \
	X(C34, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IDLE_SPIN", "OPENDS_IDLE_SPIN=busyy",      \
	  { return cfg_try("OPENDS_IDLE_SPIN", "busyy"); })                                                        \
	X(C35, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IDLE_SPIN", "OPENDS_IDLE_SPIN=10us",       \
	  { return cfg_try("OPENDS_IDLE_SPIN", "10us"); })                                                         \
	X(C36, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_ASSUME_ALIGNED_ONLY", "OPENDS_ASSUME_ALIGNED_ONLY=2", \
	  { return cfg_try("OPENDS_ASSUME_ALIGNED_ONLY", "2"); })                                                  \
	X(C37, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_ASSUME_ALIGNED_ONLY", "OPENDS_ASSUME_ALIGNED_ONLY=yes", \
	  { return cfg_try("OPENDS_ASSUME_ALIGNED_ONLY", "yes"); })                                                \
	X(C38, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_ASSUME_ALIGNED_ONLY", "OPENDS_ASSUME_ALIGNED_ONLY=-1", \
	  { return cfg_try("OPENDS_ASSUME_ALIGNED_ONLY", "-1"); })                                                 \
	X(C39, CONFIG, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "",                                              \
	  "opends_driver_close() after an open refused for OPENDS_IO_THREADS=0 (the driver stayed closed)", {     \
		  if (cfg_try("OPENDS_IO_THREADS", "0") != OPENDS_DRIVER_INVALID_PROPS)                            \
			  return -1;                                                                               \
		  return E(opends_driver_close());                                                                 \
	  })                                                                                                       \
	X(C40, CONFIG, ERR, -OPENDS_INVALID_VALUE, 0, NB, "OPENDS_ASSUME_ALIGNED_ONLY",                            \
	  "OPENDS_ASSUME_ALIGNED_ONLY=1, then a read at an unaligned offset",                                     \
	  { return cfg_read("OPENDS_ASSUME_ALIGNED_ONLY", "1", 4096, 100); })                                      \
	X(C41, CONFIG, VALUE, 4096, 0, NB, "", "OPENDS_ASSUME_ALIGNED_ONLY=1, then an aligned read (works)",       \
	  { return cfg_read("OPENDS_ASSUME_ALIGNED_ONLY", "1", 4096, 4096); })                                     \
	X(C42, CONFIG, VALUE, 0, 0, NB, "", "boundary values accepted: IO_THREADS=256 QUEUE_DEPTH=4096 CHUNK_SIZE=1g IDLE_SPIN=busy", { \
		long r = cfg_try("OPENDS_IO_THREADS", "256");                                                      \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_QUEUE_DEPTH", "4096");                                                 \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_CHUNK_SIZE", "1g");                                                    \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_IDLE_SPIN", "busy");                                                   \
		return r;                                                                                          \
	})                                                                                                         \
	X(C43, CONFIG, VALUE, 0, 0, NB, "", "boundary values accepted: IO_THREADS=1 QUEUE_DEPTH=1 CHUNK_SIZE=4k IDLE_SPIN=1000000", { \
		long r = cfg_try("OPENDS_IO_THREADS", "1");                                                        \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_QUEUE_DEPTH", "1");                                                    \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_CHUNK_SIZE", "4k");                                                    \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_IDLE_SPIN", "1000000");                                                \
		return r;                                                                                          \
	})                                                                                                         \
	X(C44, CONFIG, VALUE, 0, 0, NB, "", "empty values mean unset; CPU_MASK=0 and 0X3 accepted", {              \
		long r = cfg_try("OPENDS_IO_THREADS", "");                                                         \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_CPU_MASK", "0");                                                       \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_CPU_MASK", "0X3");                                                     \
		return r;                                                                                          \
	})                                                                                                         \
	/* issue 15: the header lists the suffixes and plain decimal numbers */                                 \
	X(C45, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE",                               \
	  "OPENDS_CHUNK_SIZE=04096 (leading zero: numbers are plain decimal)",                                     \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "04096"); })                                                       \
	X(C46, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_IO_THREADS", "OPENDS_IO_THREADS=08 (leading zero)", \
	  { return cfg_try("OPENDS_IO_THREADS", "08"); })                                                          \
	X(C47, CONFIG, ERR, OPENDS_DRIVER_INVALID_PROPS, 0, NB, "OPENDS_CHUNK_SIZE", "OPENDS_CHUNK_SIZE=0004k (leading zeros before a suffix)", \
	  { return cfg_try("OPENDS_CHUNK_SIZE", "0004k"); })                                                       \
	X(C48, CONFIG, VALUE, 0, 0, NB, "", "OPENDS_CHUNK_SIZE=4K and 1M: upper-case suffixes accepted as documented", { \
		long r = cfg_try("OPENDS_CHUNK_SIZE", "4K");                                                       \
		if (!r)                                                                                            \
			r = cfg_try("OPENDS_CHUNK_SIZE", "1M");                                                    \
		return r;                                                                                          \
	})

MISUSE_PROGRAM(ROWS)
