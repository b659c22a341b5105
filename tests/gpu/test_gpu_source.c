/*
 * test_gpu_source: a source handle read into CUDA device memory through
 * every family (sync, async, batch, stream), byte-exact against the
 * oracle. The source is the in-process one of the source tests
 * (tests/sources/fake.h: an object in memory, no Ceph), completing inline,
 * later from its own threads in random order, or blocking; with the
 * object's size known and unknown.
 *  - reads: whole object (three staging chunks), odd offsets and sizes
 *    across chunk and piece boundaries, odd buffer offsets, short at the
 *    end, 0 at and after it; the device bytes around the result unchanged;
 *  - the source never sees a device pointer (no OPENDS_SOURCE_DEVICE_MEMORY:
 *    the engine stages through host memory);
 *  - writes from device memory land byte-exact in the object;
 *  - 16 async reads and one batch of 16 entries in flight at once.
 * Exit 77 without libcuda or a GPU. With OPENDS_ACCEL=hostdev (run by hand
 * on a CPU machine) "device memory" is the hostdev layer's host memory and
 * the same checks run; built only where cuda.h is (tests/gpu/meson.build).
 */
#include "../sources/fake.h"
#include "../sources/families.h"
#include "gpu_common.h"

#define OBJ ((size_t)9 * T_MiB + 12345)
#define UNIT ((size_t)1 * T_MiB)
#define MAXIO ((size_t)256 * T_KiB)
#define DEVLEN ((size_t)12 * T_MiB)
#define NFLY 16
#define FLYLEN ((size_t)512 * T_KiB + 333)

static bool cuda;
static CUcontext primary;
static uint8_t *dev;  /* DEVLEN bytes of device memory (cuda) or host memory (hostdev) */
static uint8_t *host; /* DEVLEN bytes of host scratch */
static uint8_t *oracle;

static void to_dev(uint8_t *d, const uint8_t *h, size_t n)
{
	if (cuda) {
		CU(ods_cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)d, h, n));
		CU(ods_cu.cuCtxSynchronize());
	} else {
		memcpy(d, h, n);
	}
}

static void from_dev(uint8_t *h, const uint8_t *d, size_t n)
{
	if (cuda)
		CU(ods_cu.cuMemcpyDtoH(h, (CUdeviceptr)(uintptr_t)d, n));
	else
		memcpy(h, d, n);
}

static void canary_dev(size_t n)
{
	if (cuda) {
		CU(ods_cu.cuMemsetD8((CUdeviceptr)(uintptr_t)dev, T_CANARY, n));
		/* the library's copies are not ordered after the caller's stream work */
		CU(ods_cu.cuCtxSynchronize());
	} else {
		memset(dev, T_CANARY, n);
	}
}

static opends_handle_t reg(struct fake *f, bool known)
{
	opends_source_desc_t d = fake_desc(f);
	d.io_unit = UNIT;
	d.max_io = MAXIO;
	d.size = known ? (int64_t)f->size : -1;
	f->forbid_lo = dev;
	f->forbid_hi = dev + DEVLEN;
	return fake_register(&d);
}

static void read_case(opends_handle_t fh, enum fam fm, off_t foff, size_t size, off_t boff)
{
	size_t want = t_expect_read(OBJ, (uint64_t)foff, size);
	size_t span = (size_t)boff + size + 4096;
	CHECK(span <= DEVLEN);
	canary_dev(span);
	ssize_t r = do_io(fm, OPENDS_READ, fh, dev, size, foff, boff);
	CHECKF(r == (ssize_t)want, "%s read of %zu at %lld (buf_offset %lld): got %zd (%s), want %zu", fam_name[fm],
	       size, (long long)foff, (long long)boff, r, r < 0 ? t_errname(r) : "bytes", want);
	from_dev(host, dev, span);
	VERIFY(host + boff, oracle + foff, want, "%s read of %zu at %lld", fam_name[fm], size, (long long)foff);
	VERIFY_CANARY(host, (size_t)boff, "%s read: device bytes before buf_offset", fam_name[fm]);
	VERIFY_CANARY(host + boff + want, span - (size_t)boff - want, "%s read: device bytes after the result",
		      fam_name[fm]);
}

static void reads(enum fake_mode mode, enum fam fm, bool known)
{
	struct fake *f = fake_new(mode, OBJ, hashpat);
	opends_handle_t fh = reg(f, known);
	static const struct {
		long long off;
		size_t size;
		off_t boff;
	} c[] = {
		{ 0, OBJ, 0 },
		{ 1, 5 * T_MiB + 3, 3 },
		{ 4 * T_MiB - 5, 4 * T_MiB + 10, 4097 },
		{ 12345, 300001, 7 },
		{ (long long)MAXIO - 1, 2, 1 },
		{ (long long)OBJ - 100, 1000, 5 },
		{ (long long)OBJ - 3 * T_MiB, 3 * T_MiB + 4096, 0 },
		{ (long long)OBJ, 10, 0 },
		{ (long long)OBJ + 5000, 10, 0 },
		{ 4096, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		read_case(fh, fm, (off_t)c[i].off, c[i].size, c[i].boff);
	CHECKF(atomic_load(&f->max_len) <= (long)MAXIO, "a piece of %ld bytes, max_io %zu", atomic_load(&f->max_len),
	       MAXIO);
	CHECKF(atomic_load(&f->saw_forbidden) == 0, "%s: the source got a device pointer", fam_name[fm]);
	OK(opends_handle_deregister(fh));
	CHECKF(atomic_load(&f->released) == 1, "release ran %d times", atomic_load(&f->released));
	fake_free(f);
}

static void writes(enum fake_mode mode, enum fam fm)
{
	struct fake *f = fake_new(mode, 0, NULL);
	opends_handle_t fh = reg(f, false);
	size_t n = 5 * T_MiB + 777;
	off_t foff = 4093, boff = 11;
	t_fill_seed(host, 4242 + (uint64_t)fm, n + (size_t)boff);
	to_dev(dev, host, n + (size_t)boff);
	ssize_t r = do_io(fm, OPENDS_WRITE, fh, dev, n, foff, boff);
	CHECKF(r == (ssize_t)n, "%s write of %zu: got %zd (%s)", fam_name[fm], n, r, r < 0 ? t_errname(r) : "bytes");
	CHECKF(f->size == (size_t)foff + n, "%s write: object of %zu bytes, want %zu", fam_name[fm], f->size,
	       (size_t)foff + n);
	VERIFY(f->data + foff, host + boff, n, "%s write from device memory", fam_name[fm]);
	CHECKF(atomic_load(&f->saw_forbidden) == 0, "%s write: the source got a device pointer", fam_name[fm]);
	OK(opends_handle_deregister(fh));
	fake_free(f);
}

/* NFLY reads of FLYLEN at once: futures, then one batch of NFLY entries. */
static void in_flight(enum fake_mode mode)
{
	struct fake *f = fake_new(mode, OBJ, hashpat);
	opends_handle_t fh = reg(f, true);
	size_t span = NFLY * FLYLEN;
	for (int round = 0; round < 2; round++) {
		canary_dev(span);
		if (round == 0) {
			opends_async_future_t fut[NFLY];
			for (int i = 0; i < NFLY; i++)
				OK(opends_async_read(fh, dev, FLYLEN, (off_t)(i * 517 * T_KiB), (off_t)(i * FLYLEN),
						     &fut[i]));
			for (int i = NFLY - 1; i >= 0; i--)
				EXPECT_SSZ(opends_async_await(&fut[i]), (ssize_t)FLYLEN);
		} else {
			opends_batch_t b;
			OK(opends_batch_setup(&b, NFLY));
			opends_io_params_t p[NFLY];
			memset(p, 0, sizeof(p));
			for (int i = 0; i < NFLY; i++) {
				p[i].mode = OPENDS_BATCH;
				p[i].u.batch.buf_base = dev;
				p[i].u.batch.file_offset = (off_t)(i * 517 * T_KiB);
				p[i].u.batch.buf_offset = (off_t)(i * FLYLEN);
				p[i].u.batch.size = FLYLEN;
				p[i].fh = fh;
				p[i].opcode = OPENDS_READ;
				p[i].cookie = (void *)(uintptr_t)(i + 1);
			}
			OK(opends_batch_submit(b, NFLY, p, 0));
			unsigned got = 0, seen = 0;
			while (got < NFLY) {
				opends_io_events_t ev[NFLY];
				unsigned nr = NFLY - got;
				struct timespec ts = { 60, 0 };
				OK(opends_batch_get_status(b, 1, &nr, ev, &ts));
				CHECKF(nr > 0, "batch: no event in 60 s (%u of %d)", got, NFLY);
				for (unsigned k = 0; k < nr; k++) {
					uintptr_t id = (uintptr_t)ev[k].cookie;
					CHECKF(id >= 1 && id <= NFLY && !(seen & (1u << (id - 1))), "batch cookie %p",
					       ev[k].cookie);
					seen |= 1u << (id - 1);
					CHECKF(ev[k].status == OPENDS_COMPLETE && ev[k].ret == (ssize_t)FLYLEN,
					       "batch entry %zu: status 0x%x ret %zd", (size_t)id, ev[k].status, ev[k].ret);
				}
				got += nr;
			}
			OK(opends_batch_destroy(b));
		}
		from_dev(host, dev, span);
		for (int i = 0; i < NFLY; i++)
			VERIFY(host + (size_t)i * FLYLEN, oracle + (size_t)i * 517 * T_KiB, FLYLEN, "%s read %d in flight",
			       round ? "batch" : "async", i);
	}
	CHECKF(atomic_load(&f->saw_forbidden) == 0, "in flight: the source got a device pointer");
	OK(opends_handle_deregister(fh));
	fake_free(f);
}

int main(void)
{
	t_watchdog(280);
	const char *acc = getenv("OPENDS_ACCEL");
	if (!acc) {
		setenv("OPENDS_ACCEL", "cuda", 1);
		acc = "cuda";
	}
	cuda = strcmp(acc, "hostdev") != 0;
	if (cuda) {
		gpu_open(NULL, 1, &primary, 1, NULL);
		CUdeviceptr p;
		CU(ods_cu.cuMemAlloc(&p, DEVLEN));
		dev = (uint8_t *)(uintptr_t)p;
	} else {
		dev = t_xmalloc(DEVLEN);
	}
	OK(opends_driver_open());
	printf("backend %s, accelerator %s\n", opends_driver_backend(), acc);
	fam_open();
	host = t_xmalloc(DEVLEN);
	oracle = t_oracle(OBJ, hashpat);
	static const enum fake_mode modes[] = { FAKE_INLINE, FAKE_THREAD, FAKE_BLOCKING };
	for (size_t m = 0; m < 3; m++) {
		for (int fm = 0; fm < NFAM; fm++) {
			char ph[96];
			snprintf(ph, sizeof ph, "%s source, %s reads", fake_mode_name(modes[m]), fam_name[fm]);
			t_phase = ph;
			reads(modes[m], (enum fam)fm, true);
			reads(modes[m], (enum fam)fm, false);
			snprintf(ph, sizeof ph, "%s source, %s writes", fake_mode_name(modes[m]), fam_name[fm]);
			writes(modes[m], (enum fam)fm);
		}
		t_phase = "in flight";
		in_flight(modes[m]);
	}
	fam_close();
	OK(opends_driver_close());
	if (cuda)
		CU(ods_cu.cuMemFree((CUdeviceptr)(uintptr_t)dev));
	else
		free(dev);
	free(host);
	free(oracle);
	printf("OK\n");
	return 0;
}
