/*
 * The misuse rows of the OpenDS extensions and sources (E), as
 * docs/errors.md lists them: devices, opends_handle_advise,
 * opends_sync_read_fanout, opends_describe, and the source calls
 * (register_source, open_url, register_rados, source_libraries);
 * misuse.h has the runner and how to run it.
 */
#include "misuse.h"

/* A source for the rows: reads zeros, counts its calls and releases. */
static atomic_int src_calls, src_released;
static ssize_t z_read(void *s, void *buf, size_t len, uint64_t off)
{
	(void)s;
	(void)off;
	atomic_fetch_add(&src_calls, 1);
	memset(buf, 0, len);
	return (ssize_t)len;
}
static void z_release(void *s)
{
	(void)s;
	atomic_fetch_add(&src_released, 1);
}
static const opends_source_ops_t z_ops = {
	.struct_size = sizeof(opends_source_ops_t),
	.name = "zeros://row",
	.read = z_read,
	.release = z_release,
};
static inline opends_source_desc_t z_desc(void)
{
	opends_source_desc_t d;
	memset(&d, 0, sizeof d);
	d.struct_size = sizeof d;
	d.ops = &z_ops;
	d.flags = OPENDS_SOURCE_BLOCKING | OPENDS_SOURCE_RDONLY;
	d.size = 1 << 20;
	return d;
}
/* register_source with one field of the descriptor changed: the code; a
 * refused registration must never call release (99999 if it did). */
#define REG_SRC(change)                                                                                      \
	{                                                                                                    \
		opends_source_desc_t d = z_desc();                                                           \
		opends_source_ops_t o = z_ops;                                                               \
		d.ops = &o;                                                                                  \
		change;                                                                                      \
		opends_handle_t h;                                                                           \
		long r = E(opends_handle_register_source(&h, &d));                                           \
		return atomic_load(&src_released) ? 99999 : r;                                               \
	}

static inline opends_handle_t z_handle(void)
{
	opends_source_desc_t d = z_desc();
	opends_handle_t h = NULL;
	if (opends_handle_register_source(&h, &d).err)
		return NULL;
	return h;
}

static inline long url(const char *u, int flags)
{
	opends_handle_t h;
	return E(opends_handle_open_url(&h, u, flags));
}

/* fanout into fx.mem targets 64 KiB apart; first target's bytes unchanged
 * after a refused call (nothing read): 77777 if they changed */
static inline long fanout(opends_handle_t fh, void *const *bufs, const off_t *boffs, unsigned n, size_t size,
			  off_t fo)
{
	memset(fx.mem, 0x5a, 4096);
	ssize_t r = opends_sync_read_fanout(fh, bufs, boffs, n, size, fo);
	if (r < 0)
		for (int i = 0; i < 4096; i++)
			if (fx.mem[i] != 0x5a)
				return 77777;
	return (long)r;
}
#define TWO { fx.mem, fx.mem + 65536 }

#define ROWS(X)                                                                                                    \
	/* ---- devices ---- */                                                                                    \
	X(E01, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "count", "opends_device_count(NULL)",                       \
	  { return E(opends_device_count(NULL)); })                                                                \
	X(E02, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_device_count() after close", {       \
		unsigned c;                                                                                        \
		return E(opends_device_count(&c));                                                                 \
	})                                                                                                         \
	X(E03, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "device", "opends_device_get_properties() of device count (one past the last)", { \
		unsigned c;                                                                                        \
		opends_device_props_t p;                                                                           \
		if (opends_device_count(&c).err)                                                                   \
			return -1;                                                                                 \
		return E(opends_device_get_properties(c, &p));                                                     \
	})                                                                                                         \
	X(E04, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_device_get_properties(0, NULL)",               \
	  { return E(opends_device_get_properties(0, NULL)); })                                                    \
	X(E05, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "device", "opends_device_describe(UINT_MAX, buf, len)", {   \
		char b[64];                                                                                        \
		return E(opends_device_describe(UINT_MAX, b, sizeof b));                                           \
	})                                                                                                         \
	X(E06, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "opends_device_describe(0, NULL, 64)",                 \
	  { return E(opends_device_describe(0, NULL, 64)); })                                                      \
	X(E07, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_device_describe() after close", {    \
		char b[64];                                                                                        \
		return E(opends_device_describe(0, b, sizeof b));                                                  \
	})                                                                                                         \
	/* ---- advice ---- */                                                                                     \
	X(E08, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "advice", "opends_handle_advise(fh, 3) (unknown advice)",   \
	  { return E(opends_handle_advise(fx.h_rw, 3)); })                                                          \
	X(E09, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "advice", "opends_handle_advise(fh, -1)",                   \
	  { return E(opends_handle_advise(fx.h_rw, -1)); })                                                         \
	X(E10, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_handle_advise(NULL, NORMAL)",                 \
	  { return E(opends_handle_advise(NULL, OPENDS_ADVICE_NORMAL)); })                                         \
	X(E11, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "", "opends_handle_advise() of a made-up handle",   \
	  { return E(opends_handle_advise(bogus_handle(), OPENDS_ADVICE_RANDOM)); })                               \
	X(E12, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_handle_advise() after close",        \
	  { return E(opends_handle_advise(fx.h_rw, OPENDS_ADVICE_NORMAL)); })                                       \
	X(E13, OPEN, VALUE, 0, 0, NB, "", "opends_handle_advise(fh, SEQUENTIAL) of a source handle (no read-ahead: accepted)", { \
		opends_handle_t h = z_handle();                                                                    \
		return h ? E(opends_handle_advise(h, OPENDS_ADVICE_SEQUENTIAL)) : -1;                              \
	})                                                                                                         \
	/* ---- read fan-out ---- */                                                                               \
	X(E14, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "bufs", "opends_sync_read_fanout(bufs NULL)",             \
	  { return fanout(fx.h_rw, NULL, NULL, 2, 4096, 0); })                                                      \
	X(E15, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "nbufs", "opends_sync_read_fanout(nbufs 0)", {             \
		void *b[2] = TWO;                                                                                  \
		return fanout(fx.h_rw, b, NULL, 0, 4096, 0);                                                        \
	})                                                                                                         \
	X(E16, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "nbufs", "opends_sync_read_fanout(nbufs 65)", {            \
		void *b[65];                                                                                       \
		for (int i = 0; i < 65; i++)                                                                       \
			b[i] = fx.mem + 4096 * i;                                                                  \
		return fanout(fx.h_rw, b, NULL, 65, 4096, 0);                                                       \
	})                                                                                                         \
	X(E17, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "overlap", "opends_sync_read_fanout(): two targets overlap (nothing read)", { \
		void *b[2] = { fx.mem, fx.mem };                                                                   \
		off_t o[2] = { 0, 100 };                                                                           \
		return fanout(fx.h_rw, b, o, 2, 4096, 0);                                                           \
	})                                                                                                         \
	X(E18, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_sync_read_fanout(): the second target NULL (nothing read)", { \
		void *b[2] = { fx.mem, NULL };                                                                     \
		return fanout(fx.h_rw, b, NULL, 2, 4096, 0);                                                        \
	})                                                                                                         \
	X(E19, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "buf_offset", "opends_sync_read_fanout(): a negative buf_offset (nothing read)", { \
		void *b[2] = TWO;                                                                                  \
		off_t o[2] = { 0, -1 };                                                                            \
		return fanout(fx.h_rw, b, o, 2, 4096, 0);                                                           \
	})                                                                                                         \
	X(E20, OPEN, ERR, -OPENDS_INVALID_MAPPING_RANGE, 0, NB, "", "opends_sync_read_fanout(): the second target past a registered range (nothing read)", { \
		void *b[2] = { fx.mem, fx.reg };                                                                   \
		off_t o[2] = { 0, REG - 100 };                                                                     \
		return fanout(fx.h_rw, b, o, 2, 4096, 0);                                                           \
	})                                                                                                         \
	X(E21, OPEN, ERR, -OPENDS_INVALID_VALUE, 0, NB, "off_t", "opends_sync_read_fanout(): file_offset + size overflows off_t", { \
		void *b[2] = TWO;                                                                                  \
		return fanout(fx.h_rw, b, NULL, 2, 4096, INT64_MAX - 100);                                          \
	})                                                                                                         \
	X(E22, OPEN, ERR, -EBADF, 0, NB, "", "opends_sync_read_fanout() through a write-only fd", {               \
		void *b[2] = TWO;                                                                                  \
		return fanout(fx.h_wo, b, NULL, 2, 4096, 0);                                                        \
	})                                                                                                         \
	X(E23, OPEN, ERR, -OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "", "opends_sync_read_fanout() through a made-up handle", { \
		void *b[2] = TWO;                                                                                  \
		return fanout(bogus_handle(), b, NULL, 2, 4096, 0);                                                 \
	})                                                                                                         \
	X(E24, CLOSED, ERR, -OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_sync_read_fanout() after close", {  \
		void *b[2] = TWO;                                                                                  \
		return fanout(fx.h_rw, b, NULL, 2, 4096, 0);                                                        \
	})                                                                                                         \
	X(E25, OPEN, VALUE, 0, 0, NB, "", "opends_sync_read_fanout(): size 0 returns 0", {                          \
		void *b[2] = TWO;                                                                                  \
		return fanout(fx.h_rw, b, NULL, 2, 0, 0);                                                           \
	})                                                                                                         \
	X(E26, OPEN, VALUE, 100, 0, NB, "", "opends_sync_read_fanout(): a read crossing EOF returns the bytes before it", { \
		void *b[2] = TWO;                                                                                  \
		return fanout(fx.h_rw, b, NULL, 2, 4096, FILE_SIZE - 100);                                          \
	})                                                                                                         \
	/* ---- describe ---- */                                                                                   \
	X(E27, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_describe(fh, NULL, 64)",                    \
	  { return E(opends_describe(fx.h_rw, NULL, 64)); })                                                        \
	X(E28, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "len", "opends_describe(fh, buf, 0)", {                   \
		char b[8];                                                                                         \
		return E(opends_describe(fx.h_rw, b, 0));                                                           \
	})                                                                                                         \
	X(E29, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "", "opends_describe() of a made-up handle", {      \
		char b[64];                                                                                        \
		return E(opends_describe(bogus_handle(), b, sizeof b));                                            \
	})                                                                                                         \
	X(E30, OPEN, VALUE, 0, 0, NB, "", "opends_describe(fh, buf, 1) writes just the terminator", {              \
		char b[2] = { 'x', 'y' };                                                                          \
		long r = E(opends_describe(fx.h_rw, b, 1));                                                         \
		return r ? r : (b[0] == 0 && b[1] == 'y') ? 0 : 66666;                                             \
	})                                                                                                         \
	X(E31, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_describe(NULL, ...) after close", {  \
		char b[64];                                                                                        \
		return E(opends_describe(NULL, b, sizeof b));                                                      \
	})                                                                                                         \
	/* ---- opends_handle_register_source ---- */                                                              \
	X(E32, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_handle_register_source(NULL, desc)", {       \
		opends_source_desc_t d = z_desc();                                                                 \
		return E(opends_handle_register_source(NULL, &d));                                                 \
	})                                                                                                         \
	X(E33, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "desc", "opends_handle_register_source(&fh, NULL)", {      \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register_source(&h, NULL));                                                 \
	})                                                                                                         \
	X(E34, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "struct_size", "register_source: desc->struct_size too small (release never called)", \
	  REG_SRC(d.struct_size = 8))                                                                               \
	X(E35, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "ops", "register_source: desc->ops NULL", REG_SRC(d.ops = NULL)) \
	X(E36, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "struct_size", "register_source: ops->struct_size 0",      \
	  REG_SRC(o.struct_size = 0))                                                                               \
	X(E37, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "register_source: OPENDS_SOURCE_BLOCKING without a read op", \
	  REG_SRC(o.read = NULL))                                                                                   \
	X(E38, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "", "register_source: no async read op without OPENDS_SOURCE_BLOCKING", \
	  REG_SRC(d.flags = OPENDS_SOURCE_RDONLY))                                                                  \
	X(E39, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "io_unit", "register_source: io_unit 100 (1 to 4095)",     \
	  REG_SRC(d.io_unit = 100))                                                                                 \
	X(E40, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "max_io", "register_source: max_io 4095",                  \
	  REG_SRC(d.max_io = 4095))                                                                                 \
	X(E41, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "io_unit", "register_source: io_unit over 1 GiB",          \
	  REG_SRC(d.io_unit = ((size_t)1 << 30) + 4096))                                                            \
	X(E42, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "max_inflight_bytes", "register_source: max_inflight_bytes 1", \
	  REG_SRC(d.max_inflight_bytes = 1))                                                                        \
	X(E43, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "size", "register_source: size -2", REG_SRC(d.size = -2))   \
	X(E44, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "flags", "register_source: unknown flag bits",             \
	  REG_SRC(d.flags |= 0x80000000u))                                                                          \
	X(E45, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_handle_register_source() after close", \
	  REG_SRC((void)0))                                                                                         \
	X(E46, OPEN, ERR, -EBADF, 0, NB, "", "opends_sync_write() through a read-only source", {                  \
		opends_handle_t h = z_handle();                                                                    \
		return h ? opends_sync_write(h, fx.mem, 4096, 0, 0) : -1;                                          \
	})                                                                                                         \
	X(E47, OPEN, VALUE, 0, 0, NB, "", "a source read of size 0 returns 0 and never reaches the source", {      \
		opends_handle_t h = z_handle();                                                                    \
		ssize_t r = h ? opends_sync_read(h, fx.mem, 0, 0, 0) : -1;                                         \
		return r ? r : atomic_load(&src_calls);                                                            \
	})                                                                                                         \
	X(E48, OPEN, VALUE, 1, 0, NB, "", "a source handle deregistered: release ran once (1 here)", {             \
		opends_handle_t h = z_handle();                                                                    \
		if (!h || opends_handle_deregister(h).err)                                                         \
			return -1;                                                                                 \
		return atomic_load(&src_released);                                                                 \
	})                                                                                                         \
	X(E49, OPEN, ERR, OPENDS_HANDLE_NOT_REGISTERED, 0, NB, "", "a source handle deregistered twice", {         \
		opends_handle_t h = z_handle();                                                                    \
		if (!h || opends_handle_deregister(h).err)                                                         \
			return -1;                                                                                 \
		return E(opends_handle_deregister(h));                                                             \
	})                                                                                                         \
	/* ---- opends_handle_open_url: refused before any client library is loaded ---- */                       \
	X(E50, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "fh", "opends_handle_open_url(NULL, url, O_RDONLY)", {      \
		return E(opends_handle_open_url(NULL, "rados://p/o", O_RDONLY));                                   \
	})                                                                                                         \
	X(E51, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "url", "opends_handle_open_url(&fh, NULL, O_RDONLY)", {    \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_open_url(&h, NULL, O_RDONLY));                                              \
	})                                                                                                         \
	X(E52, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "flags", "opends_handle_open_url(): O_TRUNC",              \
	  { return url("rados://p/o", O_RDWR | O_TRUNC); })                                                          \
	X(E53, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "flags", "opends_handle_open_url(): access mode 3",         \
	  { return url("rados://p/o", 3); })                                                                         \
	X(E54, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "scheme", "opends_handle_open_url(): no scheme",           \
	  { return url("p/o", O_RDONLY); })                                                                          \
	X(E55, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "scheme", "opends_handle_open_url(): unknown scheme s3://", \
	  { return url("s3://bucket/key", O_RDONLY); })                                                              \
	X(E56, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "POOL", "opends_handle_open_url(): rados://pool (no object)", \
	  { return url("rados://pool", O_RDONLY); })                                                                 \
	X(E57, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "percent", "opends_handle_open_url(): a bad percent escape", \
	  { return url("rados://pool/o%zz", O_RDONLY); })                                                            \
	X(E58, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "op_timeout", "opends_handle_open_url(): op_timeout=abc",  \
	  { return url("rados://pool/o?op_timeout=abc", O_RDONLY); })                                                \
	X(E59, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "op_timeout", "opends_handle_open_url(): op_timeout=+5 (a sign)", \
	  { return url("rados://pool/o?op_timeout=+5", O_RDONLY); })                                                 \
	X(E60, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "colour", "opends_handle_open_url(): an unknown parameter", \
	  { return url("rados://pool/o?colour=blue", O_RDONLY); })                                                   \
	X(E61, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "twice", "opends_handle_open_url(): a parameter twice",     \
	  { return url("rados://pool/o?id=a&id=b", O_RDONLY); })                                                     \
	X(E62, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_handle_open_url() after close",     \
	  { return url("rados://pool/o", O_RDONLY); })                                                               \
	/* ---- opends_handle_register_rados, opends_source_libraries ---- */                                      \
	X(E63, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "rados_ioctx", "opends_handle_register_rados(&fh, NULL, oid, 0)", { \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register_rados(&h, NULL, "o", 0));                                          \
	})                                                                                                         \
	X(E64, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "oid", "opends_handle_register_rados(): oid \"\"", {        \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register_rados(&h, fx.mem, "", 0));                                         \
	})                                                                                                         \
	X(E65, OPEN, ERR, OPENDS_INVALID_VALUE, 0, NB, "flags", "opends_handle_register_rados(): unknown flags", { \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register_rados(&h, fx.mem, "o", OPENDS_SOURCE_BLOCKING));                   \
	})                                                                                                         \
	X(E66, CLOSED, ERR, OPENDS_DRIVER_NOT_INITIALIZED, 0, NB, "", "opends_handle_register_rados() after close", { \
		opends_handle_t h;                                                                                 \
		return E(opends_handle_register_rados(&h, fx.mem, "o", 0));                                        \
	})                                                                                                         \
	X(E67, CLOSED, ERR, OPENDS_INVALID_VALUE, 0, NB, "buf", "opends_source_libraries(NULL, 64) (needs no driver)", \
	  { return E(opends_source_libraries(NULL, 64)); })                                                        \
	X(E68, CLOSED, ERR, OPENDS_INVALID_VALUE, 0, NB, "len", "opends_source_libraries(buf, 0)", {              \
		char b[8];                                                                                         \
		return E(opends_source_libraries(b, 0));                                                           \
	})                                                                                                         \
	/* ---- error strings ---- */                                                                              \
	X(E69, CLOSED, VALUE, 0, 0, NB, "", "opends_op_status_error() and opends_err_name() of INT_MIN, INT_MAX, -1, 0, 5021, 99999 are never NULL", { \
		static const int codes[] = { INT_MIN, INT_MAX, -1, 0, 5021, -5021, 99999, -OPENDS_ERRNO_MAX, 4999 }; \
		for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)                                        \
			if (!opends_op_status_error(codes[i]) || !opends_err_name(codes[i]))                       \
				return 1000 + (long)i;                                                             \
		return 0;                                                                                          \
	})

MISUSE_PROGRAM(ROWS)
