/*
 * test_source_io: reads and writes on a source handle through every family
 * (sync, async, batch, stream), byte-exact, with the source completing
 * inline, from other threads in random order, or blocking.
 *  - reads: whole object, odd offsets and sizes, short at the end, 0 at
 *    and after it, size 0 never reaching the source; with the size known
 *    and unknown;
 *  - nothing outside [buf_offset, buf_offset + n) of the caller's buffer
 *    is written;
 *  - pieces stay inside the request, at most max_io;
 *  - writes are split at max_io and land byte-exact;
 *  - many requests in flight at once (futures, one batch).
 *  - with OPENDS_ACCEL=hostdev (every buffer is "device memory") the
 *    source never sees the caller's buffer: it is staged.
 * Runs per backend and accelerator layer (tests/sources/meson.build).
 */
#include "fake.h"
#include "families.h"

#define OBJ ((size_t)1 * T_MiB + 12345)
#define UNIT ((size_t)64 * T_KiB)
#define MAXIO ((size_t)40 * T_KiB)


/* One read checked byte for byte, with guard bytes around the target. */
static void read_case(struct fake *f, opends_handle_t fh, enum fam fm, const uint8_t *oracle, size_t osize, off_t foff,
		      size_t size, off_t boff)
{
	size_t want = t_expect_read(osize, (uint64_t)foff, size);
	size_t blen = (size_t)boff + size + 64;
	uint8_t *buf = t_xmalloc(blen);
	atomic_store(&f->lo, (uint64_t)foff);
	atomic_store(&f->hi, (uint64_t)foff + size);
	if (hostdev) {
		f->forbid_lo = buf;
		f->forbid_hi = buf + blen;
	}
	long calls0 = atomic_load(&f->calls);
	ssize_t r = do_io(fm, OPENDS_READ, fh, buf, size, foff, boff);
	CHECKF(r == (ssize_t)want, "%s read of %zu at %lld: got %zd (%s), want %zu", fam_name[fm], size,
	       (long long)foff, r, r < 0 ? t_errname(r) : "bytes", want);
	if (r == (ssize_t)want) {
		VERIFY(buf + boff, oracle + foff, want, "%s read of %zu at %lld", fam_name[fm], size, (long long)foff);
		VERIFY_CANARY(buf, (size_t)boff, "%s read: bytes before buf_offset", fam_name[fm]);
		VERIFY_CANARY(buf + boff + want, blen - (size_t)boff - want, "%s read: bytes after the result",
			      fam_name[fm]);
	}
	if (size == 0)
		CHECKF(atomic_load(&f->calls) == calls0, "a size-0 %s read reached the source", fam_name[fm]);
	CHECKF(atomic_load(&f->out_of_range) == 0, "%s read of %zu at %lld: a piece outside the request",
	       fam_name[fm], size, (long long)foff);
	CHECKF(atomic_load(&f->saw_forbidden) == 0, "%s read: the source got the caller's device buffer",
	       fam_name[fm]);
	f->forbid_lo = f->forbid_hi = NULL;
	atomic_store(&f->lo, 0);
	atomic_store(&f->hi, UINT64_MAX);
	free(buf);
}

static void reads(enum fake_mode mode, enum fam fm, bool known)
{
	uint8_t *oracle = t_oracle(OBJ, hashpat);
	struct fake *f = fake_new(mode, OBJ, hashpat);
	opends_source_desc_t d = fake_desc(f);
	d.io_unit = UNIT;
	d.max_io = MAXIO;
	d.size = known ? (int64_t)OBJ : -1;
	opends_handle_t fh = fake_register(&d);
	static const struct {
		long long off;
		size_t size;
		off_t boff;
	} c[] = {
		{ 0, OBJ, 0 },           { 1, 100000, 3 },      { 12345, 300001, 7 },    { 65536, 65536, 0 },
		{ 65535, 2, 1 },         { (long long)OBJ - 100, 1000, 5 },            { (long long)OBJ, 10, 0 },
		{ (long long)OBJ + 5000, 10, 0 },               { 4096, 0, 0 },          { 0, 1, 4095 },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		read_case(f, fh, fm, oracle, OBJ, (off_t)c[i].off, c[i].size, c[i].boff);
	CHECKF(atomic_load(&f->max_len) <= (long)MAXIO, "a piece of %ld bytes, max_io %zu", atomic_load(&f->max_len),
	       MAXIO);
	CHECKF(atomic_load(&f->zero_len_calls) == 0, "a 0-byte request reached the source");
	OK(opends_handle_deregister(fh));
	CHECKF(atomic_load(&f->released) == 1, "release called %d times", atomic_load(&f->released));
	fake_free(f);
	free(oracle);
}

static void writes(enum fake_mode mode, enum fam fm)
{
	size_t size = 200003;
	off_t foff = 777, boff = 5;
	struct fake *f = fake_new(mode, 4096, NULL);
	memset(f->data, 0, f->cap);
	f->size = 0;
	opends_source_desc_t d = fake_desc(f);
	d.io_unit = UNIT;
	d.max_io = MAXIO;
	opends_handle_t fh = fake_register(&d);
	uint8_t *src = t_xmalloc((size_t)boff + size);
	t_fill_seed(src + boff, (uint64_t)fm * 7 + 1, size);
	if (hostdev) {
		f->forbid_lo = src;
		f->forbid_hi = src + boff + size;
	}
	atomic_store(&f->lo, (uint64_t)foff);
	atomic_store(&f->hi, (uint64_t)foff + size);
	ssize_t r = do_io(fm, OPENDS_WRITE, fh, src, size, foff, boff);
	CHECKF(r == (ssize_t)size, "%s write of %zu: %zd (%s)", fam_name[fm], size, r, r < 0 ? t_errname(r) : "bytes");
	CHECKF(f->size == (size_t)foff + size, "object is %zu bytes after the write", f->size);
	VERIFY(f->data + foff, src + boff, size, "%s write of %zu at %lld", fam_name[fm], size, (long long)foff);
	CHECKF(atomic_load(&f->max_len) <= (long)MAXIO, "a write piece of %ld bytes, max_io %zu",
	       atomic_load(&f->max_len), MAXIO);
	CHECKF(atomic_load(&f->calls) >= (long)((size + MAXIO - 1) / MAXIO), "the write was not split at max_io");
	CHECKF(atomic_load(&f->out_of_range) == 0, "a write piece outside the request");
	CHECKF(atomic_load(&f->saw_forbidden) == 0, "%s write: the source got the caller's device buffer",
	       fam_name[fm]);
	f->forbid_lo = f->forbid_hi = NULL;
	/* and read back through the library */
	read_case(f, fh, fm, f->data, f->size, foff - 1, size + 2, 1);
	EXPECT_SSZ(do_io(fm, OPENDS_WRITE, fh, src, 0, 0, 0), 0);
	OK(opends_handle_deregister(fh));
	CHECKF(atomic_load(&f->released) == 1, "release called %d times", atomic_load(&f->released));
	fake_free(f);
	free(src);
}

/* Many requests at once: 16 futures, then one batch of 32 entries. */
static void concurrent(enum fake_mode mode)
{
	uint8_t *oracle = t_oracle(OBJ, hashpat);
	struct fake *f = fake_new(mode, OBJ, hashpat);
	opends_source_desc_t d = fake_desc(f);
	d.io_unit = UNIT;
	opends_handle_t fh = fake_register(&d);
	enum { N = 16, B = 32 };
	size_t len = 70001;
	uint8_t *buf = t_xmalloc(B * len);
	opends_async_future_t fu[N];
	for (int i = 0; i < N; i++)
		OK(opends_async_read(fh, buf, len, (off_t)i * 60000 + i, (off_t)i * (off_t)len, &fu[i]));
	for (int i = N - 1; i >= 0; i--) {
		EXPECT_SSZ_ND(opends_async_await(&fu[i]), (ssize_t)len);
		VERIFY(buf + (size_t)i * len, oracle + (size_t)i * 60000 + (size_t)i, len, "future %d", i);
	}
	memset(buf, T_CANARY, B * len);
	opends_io_params_t p[B];
	memset(p, 0, sizeof(p));
	for (int i = 0; i < B; i++) {
		p[i].mode = OPENDS_BATCH;
		p[i].u.batch.buf_base = buf;
		p[i].u.batch.file_offset = (off_t)i * 30000;
		p[i].u.batch.buf_offset = (off_t)i * (off_t)len;
		p[i].u.batch.size = len;
		p[i].fh = fh;
		p[i].opcode = OPENDS_READ;
		p[i].cookie = (void *)(uintptr_t)(i + 1);
	}
	opends_batch_t b;
	OK(opends_batch_setup(&b, B));
	OK(opends_batch_submit(b, B, p, 0));
	opends_io_events_t ev[B];
	t_batch_collect(b, B, ev, 60);
	for (int k = 0; k < B; k++) {
		int i = (int)(uintptr_t)ev[k].cookie - 1;
		CHECKF(ev[k].status == OPENDS_COMPLETE && ev[k].ret == (ssize_t)len, "entry %d: status 0x%x ret %zd", i,
		       ev[k].status, ev[k].ret);
		VERIFY(buf + (size_t)i * len, oracle + (size_t)i * 30000, len, "batch entry %d", i);
	}
	OK(opends_batch_destroy(b));
	OK(opends_handle_deregister(fh));
	fake_free(f);
	free(buf);
	free(oracle);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(240);
	const char *acc = getenv("OPENDS_ACCEL");
	t_driver_open();
	fam_open();
	char ph[96];
	for (int m = FAKE_INLINE; m <= FAKE_BLOCKING; m++) {
		for (int fm = 0; fm < NFAM; fm++) {
			snprintf(ph, sizeof(ph), "%s source, %s family", fake_mode_name(m), fam_name[fm]);
			t_phase = ph;
			reads((enum fake_mode)m, (enum fam)fm, false);
			reads((enum fake_mode)m, (enum fam)fm, true);
			writes((enum fake_mode)m, (enum fam)fm);
		}
		snprintf(ph, sizeof(ph), "%s source, many in flight", fake_mode_name(m));
		concurrent((enum fake_mode)m);
	}
	fam_close();
	OK(opends_driver_close());
	printf("source io: every family x inline/thread/blocking sources byte-exact (%s, %s)\n",
	       getenv("OPENDS_BACKEND") ? getenv("OPENDS_BACKEND") : "auto", acc ? acc : "auto");
	return 0;
}
