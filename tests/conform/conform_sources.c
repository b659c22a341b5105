/*
 * conform_sources: API.md "Sources". A caller's source (a byte array behind
 * the callback table, async and blocking forms): registration's codes for
 * each misuse and no release for a refused one; the descriptor and ops may
 * be freed right after; file semantics (any offset and size, short only at
 * the end, 0 at or after it, size 0 never reaches the source, pieces never
 * past the request, writes split at max_io); a source's error as its
 * -errno with a detail naming the source and the offset; over-long and
 * early-short results -EIO; read-only sources -EBADF on write; release
 * exactly once by the time deregister returns; every family (sync, async,
 * batch, stream). open_url's and register_rados's argument codes and a
 * client library that cannot be loaded (OPENDS_PLATFORM_NOT_SUPPORTED,
 * naming it).
 */
#include "conform.h"

#include <pthread.h>

#define SSIZE (1000 * 1000 + 3) /* the source's bytes */

struct mem {
	unsigned char *data;
	int64_t size;
	pthread_mutex_t lock;
	int releases, calls, zero_calls, past_request, past_end;
	size_t max_write;
	int mode; /* 0 normal, 1 over-long, 2 short early, 3 -ENOENT */
	uint64_t req_end; /* the current request's end, for the pieces check */
};

static ssize_t m_read(void *src, void *buf, size_t len, uint64_t off)
{
	struct mem *m = src;
	pthread_mutex_lock(&m->lock);
	m->calls++;
	m->zero_calls += len == 0;
	m->past_request += m->req_end && off + len > m->req_end;
	pthread_mutex_unlock(&m->lock);
	if (m->mode == 3)
		return -ENOENT;
	if ((int64_t)off >= m->size)
		return 0;
	size_t n = (int64_t)(off + len) > m->size ? (size_t)(m->size - (int64_t)off) : len;
	if (m->mode == 2 && n > 1)
		n /= 2;
	memcpy(buf, m->data + off, n);
	return m->mode == 1 ? (ssize_t)len + 1 : (ssize_t)n;
}

static ssize_t m_write(void *src, const void *buf, size_t len, uint64_t off)
{
	struct mem *m = src;
	pthread_mutex_lock(&m->lock);
	m->calls++;
	m->zero_calls += len == 0;
	if (len > m->max_write)
		m->max_write = len;
	pthread_mutex_unlock(&m->lock);
	if ((int64_t)(off + len) > m->size)
		return -EFBIG;
	memcpy(m->data + off, buf, len);
	return (ssize_t)len;
}

static int m_read_async(void *src, void *buf, size_t len, uint64_t off, opends_source_done_t done, void *token)
{
	done(token, m_read(src, buf, len, off)); /* allowed: before returning */
	return 0;
}

static int m_write_async(void *src, const void *buf, size_t len, uint64_t off, opends_source_done_t done,
			 void *token)
{
	done(token, m_write(src, buf, len, off));
	return 0;
}

static void m_release(void *src)
{
	struct mem *m = src;
	pthread_mutex_lock(&m->lock);
	m->releases++;
	pthread_mutex_unlock(&m->lock);
}

static struct mem mem;

static void reset(int mode, uint64_t req_end)
{
	mem.mode = mode;
	mem.req_end = req_end;
	mem.calls = mem.zero_calls = mem.past_request = 0;
}

/* register with a descriptor on the heap, freed (and scribbled) at once */
static opends_error_t reg(opends_handle_t *fh, unsigned flags, size_t max_io, int with_write, int blocking_form)
{
	opends_source_ops_t *ops = calloc(1, sizeof(*ops));
	opends_source_desc_t *d = calloc(1, sizeof(*d));
	ops->struct_size = sizeof(*ops);
	ops->name = "conform-mem";
	if (blocking_form) {
		ops->read = m_read;
		ops->write = with_write ? m_write : NULL;
	} else {
		ops->read_async = m_read_async;
		ops->write_async = with_write ? m_write_async : NULL;
	}
	ops->release = m_release;
	d->struct_size = sizeof(*d);
	d->ops = ops;
	d->src = &mem;
	d->flags = flags | (blocking_form ? OPENDS_SOURCE_BLOCKING : 0);
	d->size = mem.size;
	d->io_unit = 65536;
	d->max_io = max_io;
	opends_error_t e = opends_handle_register_source(fh, d);
	memset(ops, 0xEE, sizeof(*ops));
	memset(d, 0xEE, sizeof(*d));
	free(ops);
	free(d);
	return e;
}

static void misuse(void)
{
	c_case = "register_source misuse";
	const opends_op_error_t IV = OPENDS_INVALID_VALUE;
	opends_handle_t fh;
	opends_source_ops_t ops = { .struct_size = sizeof(ops), .name = "x", .read_async = m_read_async,
				    .read = m_read, .release = m_release };
	opends_source_desc_t good = { .struct_size = sizeof(good), .ops = &ops, .src = &mem, .size = -1 };
	int rel0 = mem.releases;
	C_ERR(opends_handle_register_source(NULL, &good), IV);
	C_ERR(opends_handle_register_source(&fh, NULL), IV);
	for (int k = 0; k < 12; k++) {
		opends_source_desc_t d = good;
		opends_source_ops_t o = ops;
		d.ops = &o;
		switch (k) {
		case 0: d.struct_size = 8; break;
		case 1: d.ops = NULL; break;
		case 2: o.read_async = NULL; break;                         /* no async read form */
		case 3: o.read = NULL; d.flags = OPENDS_SOURCE_BLOCKING; break; /* no blocking read */
		case 4: d.io_unit = 4095; break;
		case 5: d.max_io = 1; break;
		case 6: d.max_inflight_bytes = 4095; break;
		case 7: d.io_unit = (1ull << 30) + 4096; break;
		case 8: d.size = -2; break;
		case 9: d.flags = 0x8; break;
		case 10: d.flags = 0x80000000u; break;
		case 11: o.struct_size = 4; break;
		}
		opends_error_t e = opends_handle_register_source(&fh, &d);
		C_TRUE(e.err == IV, "register_source misuse %d: %s, expected OPENDS_INVALID_VALUE", k, c_name(e.err));
		if (e.err == OPENDS_SUCCESS)
			opends_handle_deregister(fh);
	}
	C_TRUE(mem.releases == rel0, "release was called for a refused registration");

	c_case = "open_url / register_rados misuse";
	static const char *const bad[] = { "", "rados://", "rados://pool", "rados://pool/", "rados:///obj",
					   "rados://pool/obj?op_timeout=abc", "rados://pool/obj?op_timeout=-1",
					   "rados://pool/obj?bogus=1", "rados://pool/obj?striper=2",
					   "s3x://bucket/key", "file-without-scheme", "rados://pool/obj?conf" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		opends_error_t e = opends_handle_open_url(&fh, bad[i], O_RDONLY);
		C_TRUE(e.err == IV, "open_url(\"%s\"): %s, expected OPENDS_INVALID_VALUE", bad[i], c_name(e.err));
		C_TRUE(e.err != IV || *opends_last_error_detail(), "open_url(\"%s\"): no detail", bad[i]);
	}
	C_ERR(opends_handle_open_url(NULL, "rados://pool/obj", O_RDONLY), IV);
	C_ERR(opends_handle_open_url(&fh, NULL, O_RDONLY), IV);
	C_ERR(opends_handle_open_url(&fh, "rados://pool/obj", O_RDONLY | O_APPEND), IV);
	C_ERR(opends_handle_register_rados(NULL, &mem, "obj", 0), IV);
	C_ERR(opends_handle_register_rados(&fh, NULL, "obj", 0), IV);
	C_ERR(opends_handle_register_rados(&fh, &mem, NULL, 0), IV);
	C_ERR(opends_handle_register_rados(&fh, &mem, "obj", 0x8000), IV);
}

static void semantics(int blocking_form)
{
	c_case = blocking_form ? "source semantics (blocking form)" : "source semantics (async form)";
	opends_handle_t fh, ro;
	int rel0 = mem.releases;
	C_OK(reg(&fh, 0, 100000, 1, blocking_form));
	unsigned char *buf = malloc(SSIZE + 8192);
	static const struct {
		size_t size;
		off_t off;
	} r[] = { { 1, 0 }, { 4097, 1 }, { 300001, 65535 }, { 100, SSIZE - 10 }, { 100, SSIZE }, { 5, SSIZE + 5 } };
	for (size_t i = 0; i < sizeof(r) / sizeof(*r); i++) {
		size_t want = r[i].off >= SSIZE ? 0 : (size_t)(SSIZE - r[i].off) < r[i].size ? (size_t)(SSIZE - r[i].off) : r[i].size;
		memset(buf, 0x5A, SSIZE + 8192);
		reset(0, (uint64_t)r[i].off + r[i].size);
		C_SSZ(opends_sync_read(fh, buf, r[i].size, r[i].off, 3), (ssize_t)want);
		C_TRUE(!memcmp(buf + 3, mem.data + r[i].off, want) && c_all(buf, 3, 0x5A) &&
			       c_all(buf + 3 + want, SSIZE + 8192 - 3 - want, 0x5A),
		       "sync_read(size %zu, offset %lld) of a source: wrong bytes", r[i].size, (long long)r[i].off);
		C_TRUE(mem.past_request == 0, "a piece extended past the request (size %zu, offset %lld)", r[i].size,
		       (long long)r[i].off);
	}
	reset(0, 0);
	C_SSZ(opends_sync_read(fh, buf, 0, 10, 0), 0);
	C_SSZ(opends_sync_write(fh, buf, 0, 10, 0), 0);
	C_TRUE(mem.calls == 0 && mem.zero_calls == 0, "a size-0 request reached the source (%d calls)", mem.calls);
	/* writes are split at max_io (100000) */
	unsigned char *w = malloc(350000);
	for (int i = 0; i < 350000; i++)
		w[i] = (unsigned char)(c_byte((uint64_t)i) ^ 0x77);
	mem.max_write = 0;
	C_SSZ(opends_sync_write(fh, w, 350000, 5000, 0), 350000);
	C_TRUE(mem.max_write <= 100000, "a write request of %zu bytes reached a source with max_io 100000", mem.max_write);
	C_TRUE(!memcmp(mem.data + 5000, w, 350000), "a source write: wrong bytes");
	/* the source's errors */
	reset(3, 0);
	C_SSZ(opends_sync_read(fh, buf, 1000, 123456, 0), -ENOENT);
	const char *d = opends_last_error_detail();
	C_TRUE(strstr(d, "conform-mem") && strstr(d, "123456"), "the detail \"%s\" names neither the source nor the offset",
	       d);
	reset(1, 0);
	C_SSZ(opends_sync_read(fh, buf, 1000, 0, 0), -EIO);
	reset(2, 0);
	C_SSZ(opends_sync_read(fh, buf, 1000, 0, 0), -EIO);
	reset(0, 0);
	/* other families */
	opends_async_future_t f;
	C_OK(opends_async_read(fh, buf, 7777, 9999, 0, &f));
	C_SSZ(opends_async_await(&f), 7777);
	C_TRUE(!memcmp(buf, mem.data + 9999, 7777), "async read of a source: wrong bytes");
	opends_batch_t b;
	C_OK(opends_batch_setup(&b, 1));
	opends_io_params_t p = { .mode = OPENDS_BATCH, .fh = fh, .opcode = OPENDS_READ, .cookie = &mem };
	p.u.batch.buf_base = buf;
	p.u.batch.size = 5000;
	p.u.batch.file_offset = SSIZE - 1000;
	C_OK(opends_batch_submit(b, 1, &p, 0));
	opends_io_events_t ev;
	unsigned nr = 1;
	C_OK(opends_batch_get_status(b, 1, &nr, &ev, NULL));
	C_TRUE(nr == 1 && ev.status == OPENDS_COMPLETE && ev.ret == 1000 && ev.cookie == &mem,
	       "batch read of a source: %u events, status 0x%x, ret %zd", nr, ev.status, ev.ret);
	C_OK(opends_batch_destroy(b));
	size_t sz = 4096;
	off_t fo = 400000, bo = 0;
	ssize_t got = 0;
	C_OK(opends_stream_read(fh, buf, &sz, &fo, &bo, &got, NULL));
	C_OK(opends_stream_synchronize(NULL));
	C_SSZ(got, 4096);
	C_TRUE(!memcmp(buf, mem.data + 400000, 4096), "stream read of a source: wrong bytes");
	char desc[256];
	C_OK(opends_describe(fh, desc, sizeof(desc)));
	C_TRUE(strstr(desc, "conform-mem") != NULL, "describe of a source \"%s\" does not name it", desc);
	/* read-only, and no write form: -EBADF */
	C_OK(reg(&ro, OPENDS_SOURCE_RDONLY, 0, 1, blocking_form));
	C_SSZ(opends_sync_write(ro, w, 10, 0, 0), -EBADF);
	C_OK(opends_handle_deregister(ro));
	C_OK(reg(&ro, 0, 0, 0, blocking_form));
	C_SSZ(opends_sync_write(ro, w, 10, 0, 0), -EBADF);
	C_OK(opends_handle_deregister(ro));
	C_OK(opends_handle_deregister(fh));
	C_TRUE(mem.releases == rel0 + 3, "release called %d times for 3 deregistered sources", mem.releases - rel0);
	/* driver close releases what is still registered */
	C_OK(reg(&fh, 0, 0, 1, blocking_form));
	C_OK(opends_driver_close());
	C_TRUE(mem.releases == rel0 + 4, "driver close: release called %d times for 4 sources", mem.releases - rel0);
	C_OK(opends_driver_open());
	free(w);
	free(buf);
}

int main(void)
{
	/* a client library that cannot be loaded: platform not supported,
	 * the detail naming it (set before anything loads it) */
	setenv("OPENDS_RADOS_LIBRARY", "/nonexistent/librados.so.2", 1);
	mem.size = SSIZE;
	mem.data = malloc(SSIZE);
	for (int64_t i = 0; i < SSIZE; i++)
		mem.data[i] = c_byte((uint64_t)i);
	pthread_mutex_init(&mem.lock, NULL);
	if (opends_driver_open().err) {
		fprintf(stderr, "open: %s\n", opends_last_error_detail());
		return 1;
	}
	c_case = "client library";
	opends_handle_t fh;
	C_ERR(opends_handle_open_url(&fh, "rados://pool/obj", O_RDONLY), OPENDS_PLATFORM_NOT_SUPPORTED);
	C_TRUE(strstr(opends_last_error_detail(), "librados") != NULL, "the detail \"%s\" does not name librados",
	       opends_last_error_detail());
	misuse();
	semantics(0);
	semantics(1);
	opends_driver_close();
	return c_done("conform_sources");
}
