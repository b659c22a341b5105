/*
 * test_diffargs [STEPS [SECONDS]]: randomized differential test of the
 * argument space, every family against one model of API.md's rules.
 *
 * test_diff checks data against an oracle for valid calls; this one draws
 * the arguments themselves from the edges and checks each call's exact
 * answer, the same for sync, async, batch and stream (each family reports
 * it its own way: sync's negated result, async and batch submit's code with
 * nothing started, a stream's submit code or its *bytes after synchronize):
 *  - handles: read-write, read-only, write-only and O_DIRECT fds, source
 *    handles over the same file (async, threaded or blocking; one
 *    read-only), a deregistered handle (HANDLE_NOT_REGISTERED) and NULL
 *    (INVALID_VALUE);
 *  - one fault or none per call: buf NULL, a negative file or buffer offset,
 *    size above SSIZE_MAX, file_offset + size past the largest off_t
 *    (INVALID_VALUE), a target starting inside the registered range and
 *    ending past it (INVALID_MAPPING_RANGE), the wrong direction (-EBADF);
 *  - sizes 0, 1 .. 256 KiB, block multiples, and huge (2 GiB .. 1 TiB)
 *    reads within 4 KiB of EOF into a target that ends at a PROT_NONE page
 *    right after the bytes the file has: only those may be touched;
 *  - file offsets aligned or not, in the file, at and past EOF; buffer
 *    offsets and pointers anywhere in the pool (device memory with hostdev);
 *  - now and then the file grows or shrinks behind the library's back (a
 *    pwrite past EOF, ftruncate through another fd): later calls see it.
 * opends_sync_read_fanout is a family too: 1..4 targets apart, or nbufs 0
 * or 65, bufs NULL, two targets overlapping (INVALID_VALUE, also through a
 * write-only handle: before, its -EBADF came first), nothing read when one
 * target is refused.
 * A batch submit of good entries and one bad one must fail whole, run none
 * of them, and leave the batch usable. After every step the whole pool
 * equals its model (nothing written outside [buf + buf_offset, + returned))
 * and the file equals its model, size included.
 *
 * The seed is printed (OPENDS_TEST_SEED=N repeats a run); a difference
 * prints it with the step. Backend and memory kind from OPENDS_BACKEND /
 * OPENDS_ACCEL. Exit 0 pass, 1 fail, 77 skip.
 *
 * Built with -DDIFFARGS_CUDA (test_gpu_diffargs, suite gpu) the pool is
 * real device memory (cuMemAlloc; the last 1 MiB of a 2 MiB allocation, so
 * a huge read's target ends where the allocation does): writes' bytes go
 * in with cuMemcpyHtoD and every check copies the pool out first.
 */
#include "../sources/fake.h" /* source handles over the file (use_fd) */
#ifdef DIFFARGS_CUDA
#include "../gpu/gpu_common.h"
#endif

#include <inttypes.h>
#include <sys/mman.h>

#define FMAX ((size_t)1 << 20)         /* the file stays below this */
#define POOL ((size_t)1 << 20)         /* targets live here */
#define PAGE ((size_t)4096)

enum kind { K_RW, K_RO, K_WO, K_DIRECT, K_SRC, K_SRC_RO, K_STALE, K_NULL, NKIND };
static const char *const kname[] = { "rw", "ro", "wo", "direct", "source", "source-ro", "stale", "NULL" };
enum fault { F_NONE, F_NULLBUF, F_NEGFOFF, F_NEGBOFF, F_BIGSIZE, F_OVF, F_MAP, NFAULT };
static const char *const fname[] = { "none", "buf NULL", "negative file_offset", "negative buf_offset",
				     "size > SSIZE_MAX", "offset + size overflow", "mapping range" };
enum fam { SYNC, ASYNC, BATCH, STREAM, FANOUT };
static const char *const famname[] = { "sync", "async", "batch", "stream", "fanout" };

static uint64_t rng, seed;
static uint64_t rnd(void)
{
	rng += 0x9e3779b97f4a7c15ull;
	return t_splitmix64(rng);
}
static uint64_t rn(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static int chk_fd = -1;
static uint8_t *fmodel, *fbuf;
static size_t fsz;
static uint8_t *pool, *shadow; /* pool: POOL bytes followed by a PROT_NONE page */
#ifdef DIFFARGS_CUDA
static uint8_t *view; /* the pool as read back for checks */
#endif

/* Put shadow[at, at + n) into the pool (host: it is there already when
 * the caller wrote the pool; device: copied in). */
static void pool_put(size_t at, size_t n)
{
#ifdef DIFFARGS_CUDA
	/* From pageable memory cuMemcpyHtoD returns once the bytes are staged,
	 * before the DMA to the device is done (CUDA's "API synchronization
	 * behavior"): only later work on the legacy stream is ordered after
	 * it, not the library's copies on its own streams, nor a created
	 * (non-blocking) stream's. A program hands the library a buffer it
	 * has finished writing: wait for the copy, as a program must (the
	 * H200 probe read stale bytes into the file without this). */
	CU(ods_cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)(pool + at), shadow + at, n));
	CU(ods_cu.cuCtxSynchronize());
#else
	memcpy(pool + at, shadow + at, n);
#endif
}

/* The pool's bytes now, for a check. */
static const uint8_t *pool_view(void)
{
#ifdef DIFFARGS_CUDA
	CU(ods_cu.cuMemcpyDtoH(view, (CUdeviceptr)(uintptr_t)pool, POOL));
	return view;
#else
	return pool;
#endif
}
static size_t reg_off, reg_len;
static opends_handle_t H[NKIND];
static int hfd[NKIND];
static struct fake *srcs[2];
static opends_batch_t batch;
static opends_stream_t stream;
static unsigned long step, ncalls[5], nfault, nhuge, noutside;
static bool trace; /* OPENDS_DIFF_TRACE=1: every call, before it is made */

#define DIFF(...)                                                                                        \
	do {                                                                                             \
		fprintf(stderr, "diffargs: seed %" PRIu64 " (OPENDS_TEST_SEED repeats it), step %lu\n", seed, \
			step);                                                                           \
		FAILF(__VA_ARGS__);                                                                      \
	} while (0)

struct op {
	enum fam fam;
	enum kind k;
	enum fault f;
	bool rd;
	void *buf;      /* as passed */
	size_t size;
	off_t foff, boff;
	size_t at;      /* target's offset in the pool (when valid) */
	long want;      /* expected: bytes, or a negated code */
	int code;       /* an argument error: the code submit reports (0: none) */
};

static const char *desc(const struct op *o)
{
	static char b[256];
	snprintf(b, sizeof b, "%s %s on %s, size %zu, file_offset %lld, buf_offset %lld, fault %s", famname[o->fam],
		 o->rd ? "read" : "write", kname[o->k], o->size, (long long)o->foff, (long long)o->boff, fname[o->f]);
	return b;
}

static bool readable(enum kind k)
{
	return k != K_WO;
}
static bool writable(enum kind k)
{
	return k == K_RW || k == K_WO || k == K_DIRECT || k == K_SRC;
}

static bool in_reg(size_t x)
{
	return x >= reg_off && x < reg_off + reg_len;
}

/* The rule (as test_diff's): a target whose start or base lies in the
 * registered range must end inside it, else INVALID_MAPPING_RANGE. */
static bool crosses(size_t at, size_t boff, size_t size)
{
	size_t t = at + boff;
	return (in_reg(t) || in_reg(at)) && (t < reg_off || t + size > reg_off + reg_len);
}

/* Where a huge read into a buffer that holds only the file's bytes is the
 * library's to handle: fd handles (it knows the file's size), in every
 * family (a staged stream read copied the device's own bytes past EOF out
 * and back, up to *size, until 7a87409: it faulted at the guard page). Not
 * sources: their size is unknown, so the pieces past EOF carry pointers up
 * to buf + size, which a pread-backed source hands the kernel (-EFAULT
 * past the address space): the caller's buffer must hold size bytes there.
 * Not fan-out: its targets are placed apart by the whole size. */
static bool past_top;
static bool huge_ok(const struct op *o)
{
	bool fd = o->k == K_RW || o->k == K_RO || o->k == K_DIRECT;
	return fd && o->fam != FANOUT;
}

/* Draw one call. */
static void make(struct op *o, enum fam fam, bool allow_write)
{
	memset(o, 0, sizeof(*o));
	o->fam = fam;
	o->rd = !allow_write || rn(3) != 0;
	unsigned kw = (unsigned)rn(100);
	o->k = kw < 30 ? K_RW : kw < 40 ? K_RO : kw < 48 ? K_WO : kw < 63 ? K_DIRECT : kw < 83 ? K_SRC
	     : kw < 90 ? K_SRC_RO : kw < 95 ? K_STALE : K_NULL;
	o->f = rn(3) == 0 ? (enum fault)(1 + rn(NFAULT - 1)) : F_NONE;
	if (o->f && o->k >= K_STALE) /* one fault per call: its answer is exact */
		o->k = K_RW;
	/* size and offsets of a valid call */
	switch (rn(5)) {
	case 0: o->size = rn(8) == 0 ? 0 : 1 + rn(64); break;
	case 1: o->size = PAGE * (1 + rn(16)) + (rn(2) ? 0 : rn(3) - 1); break;
	default: o->size = 1 + rn(256 << 10); break;
	}
	o->foff = (off_t)(rn(2) ? PAGE * rn(FMAX / PAGE / 2) : rn(fsz + 8192));
	if (!o->rd && (size_t)o->foff + o->size > FMAX)
		o->foff = (off_t)(FMAX - o->size - rn(PAGE));
	o->boff = (off_t)(rn(2) ? 0 : rn(PAGE));
	o->at = rn(POOL - o->size - (size_t)o->boff + 1);
	/* a huge read near EOF: its target ends at the guard page right after
	 * the bytes that exist (only on a readable handle, without a fault) */
	bool huge = o->rd && o->f == F_NONE && huge_ok(o) && rn(12) == 0;
	if (huge) {
		size_t left = rn(PAGE);
		o->foff = (off_t)(fsz > left ? fsz - left : 0);
		o->size = ((size_t)1 << 31) + rn((size_t)1 << 40);
		size_t n = fsz - (size_t)o->foff;
		o->boff = (off_t)rn(64);
		o->at = POOL - n - (size_t)o->boff;
		/* sizes may pass the top of the user address space: ref gave
		 * -EFAULT there until c5262ca (the kernel checks the whole
		 * count before it clamps it). OPENDS_DIFFARGS_PAST_TOP=0 keeps
		 * them below it. */
		uintptr_t top = (uintptr_t)0x7ffffffff000ull, t = (uintptr_t)(pool + o->at + (size_t)o->boff);
		if (!past_top && t < top && o->size > top - t - 1)
			o->size = (size_t)(top - t - 1) > n ? (size_t)(top - t - 1) : n;
		nhuge++;
	}
	o->buf = pool + o->at;
	if (crosses(o->at, (size_t)o->boff, o->size)) {
		/* a valid target may not leave the registered range it (or its
		 * base) starts in: move it behind the range, or before it */
		if (!huge && reg_off + reg_len + o->size + (size_t)o->boff <= POOL)
			o->at = reg_off + reg_len;
		else
			o->at = 0, o->boff = 0, o->size = t_min(o->size, reg_off);
		o->buf = pool + o->at;
	}
	switch (o->f) {
	case F_NULLBUF: o->buf = NULL; o->code = OPENDS_INVALID_VALUE; break;
	case F_NEGFOFF: o->foff = -1 - (off_t)rn(1 << 20); o->code = OPENDS_INVALID_VALUE; break;
	case F_NEGBOFF: o->boff = -1 - (off_t)rn(4096); o->code = OPENDS_INVALID_VALUE; break;
	case F_BIGSIZE: o->size = (size_t)SSIZE_MAX + 1 + rn(1 << 20); o->code = OPENDS_INVALID_VALUE; break;
	case F_OVF: {
		o->foff = INT64_MAX - (off_t)rn(1 << 20);
		o->size = (size_t)(INT64_MAX - o->foff) + 1 + rn(4096);
		o->code = OPENDS_INVALID_VALUE;
		break;
	}
	case F_MAP: /* starts inside the registered range, ends past it */
		o->at = reg_off;
		o->boff = (off_t)rn(reg_len);
		o->size = reg_len - (size_t)o->boff + 1 + rn(4096);
		o->buf = pool + o->at;
		o->code = OPENDS_INVALID_MAPPING_RANGE;
		break;
	default: break;
	}
	if (!o->code && o->k == K_STALE)
		o->code = OPENDS_HANDLE_NOT_REGISTERED;
	if (!o->code && o->k == K_NULL)
		o->code = OPENDS_INVALID_VALUE;
	if (o->code)
		o->want = -o->code;
	else if (o->rd ? !readable(o->k) : !writable(o->k))
		o->want = -EBADF;
	else
		o->want = o->rd ? (long)t_expect_read(fsz, (uint64_t)o->foff, o->size) : (long)o->size;
	if (o->code)
		nfault++;
	if (trace)
		printf("step %lu: %s, want %ld\n", step, desc(o), o->want);
}

/* What o may write in the pool: [lo, hi) (empty for a refused call). */
static void span(const struct op *o, size_t *lo, size_t *hi)
{
	*lo = *hi = 0;
	if (o->code || o->want <= 0)
		return;
	*lo = o->at + (size_t)o->boff;
	*hi = *lo + (o->rd ? (size_t)o->want : o->size);
}

/* o[i] of a group whose calls run at once: drawn again until its memory
 * is apart from the others' (unordered calls into one byte would leave
 * either's data). */
static void make_apart(struct op *o, unsigned i, enum fam fam, bool allow_write)
{
	for (int tries = 0;; tries++) {
		make(&o[i], fam, allow_write);
		size_t lo, hi, l2, h2;
		span(&o[i], &lo, &hi);
		bool apart = true;
		for (unsigned j = 0; j < i && apart; j++) {
			span(&o[j], &l2, &h2);
			apart = hi <= l2 || h2 <= lo;
		}
		if (apart)
			return;
		if (tries > 50) { /* give up: a size-0 read touches nothing */
			o[i].size = 0;
			o[i].want = o[i].code ? o[i].want : readable(o[i].k) ? 0 : -EBADF;
			o[i].rd = true;
			return;
		}
	}
}

/* The model of a call that succeeded (writes: the data is pool's). */
static void apply(const struct op *o, long got)
{
	if (got <= 0)
		return;
	const uint8_t *t = shadow + o->at + o->boff; /* a write's bytes (fill_src put them there too) */
	if (o->rd) {
		memcpy(shadow + o->at + o->boff, fmodel + o->foff, (size_t)got);
		return;
	}
	if ((size_t)o->foff > fsz)
		memset(fmodel + fsz, 0, (size_t)o->foff - fsz);
	memcpy(fmodel + o->foff, t, (size_t)got);
	if ((size_t)o->foff + (size_t)got > fsz)
		fsz = (size_t)o->foff + (size_t)got;
}

static void check_result(const struct op *o, long got, const char *how)
{
	if (got != o->want)
		DIFF("%s: %s returned %ld (%s), the model %ld (%s); detail: %s", desc(o), how, got,
		     got < 0 ? t_errname(got) : "bytes", o->want, o->want < 0 ? t_errname(o->want) : "bytes",
		     t_detail());
}

static void check_all(const char *what)
{
	size_t at;
	const uint8_t *v = pool_view();
	if (t_first_diff(v, shadow, POOL, &at))
		DIFF("after %s: pool byte %zu is 0x%02x, its model 0x%02x (written outside a target)", what, at, v[at],
		     shadow[at]);
	off_t sz = t_file_size(chk_fd);
	if ((size_t)sz != fsz)
		DIFF("after %s: the file has %lld bytes, its model %zu", what, (long long)sz, fsz);
	t_pread_all(chk_fd, fbuf, fsz, 0);
	if (t_first_diff(fbuf, fmodel, fsz, &at))
		DIFF("after %s: file byte %zu is 0x%02x, its model 0x%02x", what, at, fbuf[at], fmodel[at]);
}

/* A write's source bytes: fresh random bytes in its target (the model too). */
static void fill_src(const struct op *o)
{
	if (o->rd || o->want <= 0)
		return;
	uint8_t *t = shadow + o->at + o->boff;
	for (size_t i = 0; i < o->size; i++)
		t[i] = (uint8_t)rnd();
	pool_put(o->at + (size_t)o->boff, o->size);
}

static void do_sync(void)
{
	struct op o;
	make(&o, SYNC, true);
	fill_src(&o);
	ssize_t r = o.rd ? opends_sync_read(H[o.k], o.buf, o.size, o.foff, o.boff)
			 : opends_sync_write(H[o.k], o.buf, o.size, o.foff, o.boff);
	check_result(&o, (long)r, "the call");
	apply(&o, (long)r);
}

/* 1..3 calls in flight at once: reads into disjoint memory, at most one
 * write (alone). Argument errors come from submit, with nothing started. */
static void do_async(void)
{
	struct op o[3];
	opends_async_future_t fu[3];
	bool sub[3];
	unsigned n = 1 + (unsigned)rn(3);
	for (unsigned i = 0; i < n; i++) {
		make_apart(o, i, ASYNC, n == 1);
		fill_src(&o[i]);
	}
	for (unsigned i = 0; i < n; i++) {
		opends_error_t e = o[i].rd ? opends_async_read(H[o[i].k], o[i].buf, o[i].size, o[i].foff, o[i].boff, &fu[i])
					   : opends_async_write(H[o[i].k], o[i].buf, o[i].size, o[i].foff, o[i].boff, &fu[i]);
		sub[i] = e.err == OPENDS_SUCCESS;
		if ((int)e.err != o[i].code)
			DIFF("%s: submit returned %d (%s), the model %d", desc(&o[i]), e.err, t_errname(e.err), o[i].code);
	}
	unsigned ord[3] = { 0, 1, 2 }; /* await in a random order */
	for (unsigned j = n; j > 1; j--) {
		unsigned r = (unsigned)rn(j), t = ord[j - 1];
		ord[j - 1] = ord[r];
		ord[r] = t;
	}
	for (unsigned j = 0; j < n; j++) {
		unsigned i = ord[j];
		if (!sub[i])
			continue;
		long r = (long)opends_async_await(&fu[i]);
		check_result(&o[i], r, "await");
		if (opends_async_await(&fu[i]) != r)
			DIFF("%s: a second await gave another result", desc(&o[i]));
	}
	for (unsigned i = 0; i < n; i++)
		apply(&o[i], o[i].want);
}

/* One submit of 1..3 entries; with a bad one, none runs. */
static void do_batch(void)
{
	struct op o[3];
	opends_io_params_t p[3];
	unsigned n = 1 + (unsigned)rn(3);
	int code = 0;
	for (unsigned i = 0; i < n; i++) {
		make_apart(o, i, BATCH, n == 1);
		if (o[i].code && !code)
			code = o[i].code;
		fill_src(&o[i]);
		p[i] = t_batch_entry(H[o[i].k], o[i].rd ? OPENDS_READ : OPENDS_WRITE, o[i].buf, o[i].size, o[i].foff,
				     o[i].boff, (void *)(uintptr_t)i);
	}
	opends_error_t e = opends_batch_submit(batch, n, p, 0);
	bool ok = false;
	for (unsigned i = 0; i < n; i++)
		ok |= (int)e.err == o[i].code && o[i].code; /* with two bad entries, either one's code */
	if (code ? !ok : e.err != OPENDS_SUCCESS)
		DIFF("batch of %u, first entry %s: submit returned %d (%s), the model %d", n, desc(&o[0]), e.err,
		     t_errname(e.err), code);
	if (code) { /* nothing ran: the pool and file checks say so; the batch still works */
		opends_io_events_t ev[3];
		unsigned nr = 3;
		struct timespec ts = { 0, 0 };
		OK(opends_batch_get_status(batch, 0, &nr, ev, &ts));
		if (nr)
			DIFF("a refused batch submit delivered %u events", nr);
		return;
	}
	opends_io_events_t ev[3];
	t_batch_collect(batch, n, ev, 30);
	for (unsigned i = 0; i < n; i++) {
		unsigned k = (unsigned)(uintptr_t)ev[i].cookie;
		struct op *q = &o[k];
		opends_status_t want = q->want < 0 ? OPENDS_FAILED : OPENDS_COMPLETE;
		if (ev[i].status != want)
			DIFF("%s: event status 0x%x ret %zd, the model 0x%x", desc(q), (unsigned)ev[i].status, ev[i].ret,
			     (unsigned)want);
		check_result(q, (long)ev[i].ret, "the event");
	}
	for (unsigned i = 0; i < n; i++)
		apply(&o[i], o[i].want);
}

/* 1..3 calls queued in order on a stream, then synchronize. buf NULL and
 * the handles are submit's to refuse; the values behind the pointers are
 * checked when the stream reaches them (*bytes). */
static void do_stream(void)
{
	struct op o[3];
	size_t sz[3];
	off_t fo[3], bo[3];
	ssize_t got[3];
	unsigned n = 1 + (unsigned)rn(3);
	opends_stream_t st = rn(2) ? stream : NULL;
	for (unsigned i = 0; i < n; i++) {
		struct op *q = &o[i];
		make(q, STREAM, true); /* drawn now: the one before may have moved EOF */
		int sub = q->f == F_NULLBUF || q->k == K_STALE || q->k == K_NULL ? q->code : 0;
		fill_src(q);
		sz[i] = q->size;
		fo[i] = q->foff;
		bo[i] = q->boff;
		got[i] = 12345;
		opends_error_t e = q->rd ? opends_stream_read(H[q->k], q->buf, &sz[i], &fo[i], &bo[i], &got[i], st)
					 : opends_stream_write(H[q->k], q->buf, &sz[i], &fo[i], &bo[i], &got[i], st);
		if ((int)e.err != sub)
			DIFF("%s: stream submit returned %d (%s), the model %d", desc(q), e.err, t_errname(e.err), sub);
		if (sub)
			got[i] = -sub; /* never queued */
		OK(opends_stream_synchronize(st)); /* in order: the next one's source bytes are drawn after */
		check_result(q, (long)got[i], "*bytes");
		apply(q, q->want);
	}
}

/* The file changed behind the library's back (another process): grown by
 * a pwrite past EOF or cut by ftruncate, through the check fd. Calls after
 * it must see the new size (no size remembered from registration). */
static void do_outside(void)
{
	if (rn(2)) {
		size_t n = 1 + rn(64 << 10), at = rn(FMAX - n);
		uint8_t *b = t_xmalloc(n);
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)rnd();
		t_pwrite_all(chk_fd, b, n, (off_t)at);
		if (at > fsz)
			memset(fmodel + fsz, 0, at - fsz);
		memcpy(fmodel + at, b, n);
		if (at + n > fsz)
			fsz = at + n;
		free(b);
		if (trace)
			printf("step %lu: outside pwrite of %zu at %zu\n", step, n, at);
	} else {
		size_t to = rn(2) ? rn(fsz + 1) : rn(FMAX / 2);
		CHECK(ftruncate(chk_fd, (off_t)to) == 0);
		if (to > fsz)
			memset(fmodel + fsz, 0, to - fsz);
		fsz = to;
		if (trace)
			printf("step %lu: outside truncate to %zu\n", step, to);
	}
}

/* opends_sync_read_fanout: the read of a random call placed in 1..4
 * targets, apart from each other; or a fault of its own: nbufs 0 or 65,
 * bufs NULL, two targets overlapping (INVALID_VALUE). Every target is
 * checked before anything is read: a refused call changes no target. */
static void do_fanout(void)
{
	struct op o;
	make(&o, FANOUT, false);
	enum { MAXB = 65 };
	void *bufs[MAXB];
	off_t boffs[MAXB];
	size_t at[MAXB];
	unsigned nb = 1 + (unsigned)rn(4), f = o.code ? 0 : (unsigned)rn(12);
	bufs[0] = o.buf;
	boffs[0] = o.boff;
	at[0] = o.at;
	size_t span = o.code ? 0 : o.size; /* targets stay apart by the whole size */
	for (unsigned i = 1; i < nb; i++) {
		bool apart = false;
		for (int tries = 0; tries < 50 && !apart; tries++) {
			at[i] = rn(POOL - span - 64 + 1);
			boffs[i] = (off_t)rn(64);
			apart = !crosses(at[i], (size_t)boffs[i], span);
			for (unsigned j = 0; j < i && apart; j++) {
				size_t a = at[i] + (size_t)boffs[i], b = at[j] + (size_t)boffs[j];
				apart = a + span <= b || b + span <= a;
			}
		}
		if (!apart) { /* no room: fewer targets */
			nb = i;
			break;
		}
		bufs[i] = pool + at[i];
	}
	const char *what = "";
	if (f == 1) {
		nb = rn(2) ? 0 : MAXB, what = nb ? "nbufs 65" : "nbufs 0";
		for (unsigned i = 1; i < MAXB; i++)
			bufs[i] = pool, boffs[i] = 0;
	} else if (f == 2 && nb > 1 && span) {
		at[1] = at[0], boffs[1] = boffs[0], bufs[1] = bufs[0], what = "two targets overlap";
	} else {
		f = 0;
	}
	if (f) {
		o.code = OPENDS_INVALID_VALUE;
		o.want = -o.code;
	}
	bool nullbufs = !o.code && rn(40) == 0;
	if (nullbufs)
		o.code = OPENDS_INVALID_VALUE, o.want = -o.code, what = "bufs NULL";
	if (trace)
		printf("    fanout over %u targets %s\n", nb, what);
	ssize_t r = opends_sync_read_fanout(H[o.k], nullbufs ? NULL : bufs, boffs, nb, o.size, o.foff);
	if (r != o.want)
		DIFF("%s, %u targets %s: returned %zd (%s), the model %ld; detail: %s", desc(&o), nb, what, r,
		     r < 0 ? t_errname(r) : "bytes", o.want, t_detail());
	for (unsigned i = 0; r > 0 && i < nb; i++)
		memcpy(shadow + at[i] + boffs[i], fmodel + o.foff, (size_t)r);
}

static void open_handles(void)
{
	char path[PATH_MAX];
	t_path(path, sizeof path, "diffargs.bin");
	static const int acc[] = { O_RDWR, O_RDONLY, O_WRONLY };
	for (int k = K_RW; k <= K_WO; k++) {
		hfd[k] = open(path, acc[k]);
		CHECK(hfd[k] >= 0);
		OK(opends_handle_register(&H[k], hfd[k]));
	}
	hfd[K_DIRECT] = t_open(path, O_RDWR, true);
	if (hfd[K_DIRECT] < 0)
		hfd[K_DIRECT] = open(path, O_RDWR); /* no O_DIRECT here: a plain one */
	OK(opends_handle_register(&H[K_DIRECT], hfd[K_DIRECT]));
	for (int i = 0; i < 2; i++) {
		srcs[i] = fake_new((enum fake_mode)rn(3), 0, NULL);
		srcs[i]->fd = hfd[K_RW];
		srcs[i]->use_fd = true;
		opends_source_desc_t d = fake_desc(srcs[i]);
		if (i)
			d.flags |= OPENDS_SOURCE_RDONLY;
		OK(opends_handle_register_source(&H[K_SRC + i], &d));
	}
	int fd = open(path, O_RDWR);
	OK(opends_handle_register(&H[K_STALE], fd));
	OK(opends_handle_deregister(H[K_STALE])); /* its token stays stale */
	close(fd);
	H[K_NULL] = NULL;
}

int main(int argc, char **argv)
{
	unsigned long steps = argc > 1 ? strtoul(argv[1], NULL, 10) : 3000;
	double secs = argc > 2 ? atof(argv[2]) : 3;
	const char *se = getenv("OPENDS_TEST_SEED");
	seed = se && *se ? strtoull(se, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	rng = seed;
	past_top = !(getenv("OPENDS_DIFFARGS_PAST_TOP") && !strcmp(getenv("OPENDS_DIFFARGS_PAST_TOP"), "0"));
	trace = getenv("OPENDS_DIFF_TRACE") && !strcmp(getenv("OPENDS_DIFF_TRACE"), "1");
	printf("diffargs: seed %" PRIu64 " (OPENDS_TEST_SEED repeats it), backend %s, accel %s\n", seed,
	       getenv("OPENDS_BACKEND") ? getenv("OPENDS_BACKEND") : "auto",
	       getenv("OPENDS_ACCEL") ? getenv("OPENDS_ACCEL") : "auto");
	t_watchdog(120);

#ifdef DIFFARGS_CUDA
	CUcontext ctx;
	static const char *const need[] = { "cuMemAlloc_v2", NULL };
	gpu_open(need, 1, &ctx, 1, NULL);
	CUdeviceptr dm;
	CU(ods_cu.cuMemAlloc(&dm, 2 * POOL));
	uint8_t *m = (uint8_t *)(uintptr_t)dm;
	pool = m + POOL; /* ends where the allocation does */
	view = t_xmalloc(POOL);
#else
	uint8_t *m = mmap(NULL, POOL + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	CHECK(mprotect(m + POOL, PAGE, PROT_NONE) == 0); /* a huge read that goes past its bytes faults */
	pool = m;
#endif
	shadow = t_xmalloc(POOL);
	fmodel = t_xmalloc(FMAX);
	fbuf = t_xmalloc(FMAX);
	for (size_t i = 0; i < POOL; i++)
		shadow[i] = (uint8_t)rnd();
	pool_put(0, POOL);
	fsz = rn(FMAX / 2);
	for (size_t i = 0; i < fsz; i++)
		fmodel[i] = (uint8_t)rnd();
	char path[PATH_MAX];
	t_path(path, sizeof path, "diffargs.bin");
	chk_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(chk_fd >= 0);
	t_pwrite_all(chk_fd, fmodel, fsz, 0);

	t_driver_open();
	open_handles();
	/* the registered range: somewhere in the first half (huge reads'
	 * targets end at the pool's end, outside it) */
	reg_len = PAGE * (1 + rn(32));
	reg_off = PAGE * rn(POOL / 2 / PAGE);
	OK(opends_buf_register(pool + reg_off, reg_len, 0));
	OK(opends_batch_setup(&batch, 8));
	OK(opends_stream_create(&stream));

	double t0 = t_now();
	for (step = 0; step < steps && t_now() - t0 < secs; step++) {
		t_phase = "step";
		if (rn(20) == 0) {
			do_outside();
			noutside++;
		}
		enum fam f = (enum fam)rn(5);
		ncalls[f]++;
		switch (f) {
		case FANOUT: do_fanout(); break;
		case SYNC: do_sync(); break;
		case ASYNC: do_async(); break;
		case BATCH: do_batch(); break;
		case STREAM: do_stream(); break;
		}
		check_all(famname[f]);
	}
	OK(opends_stream_destroy(stream));
	OK(opends_batch_destroy(batch));
	OK(opends_buf_deregister(pool + reg_off));
	for (int k = K_RW; k < K_STALE; k++)
		OK(opends_handle_deregister(H[k]));
	for (int i = 0; i < 2; i++) {
		CHECKF(atomic_load(&srcs[i]->released) == 1, "source %d released %d times", i,
		       atomic_load(&srcs[i]->released));
		/* API.md: a size-0 request never reaches a source */
		CHECKF(atomic_load(&srcs[i]->zero_len_calls) == 0, "source %d was asked for %ld pieces of 0 bytes", i,
		       atomic_load(&srcs[i]->zero_len_calls));
		fake_free(srcs[i]);
	}
	OK(opends_driver_close());
	check_all("the end");
	for (int k = K_RW; k <= K_DIRECT; k++)
		close(hfd[k]);
	close(chk_fd);
#ifdef DIFFARGS_CUDA
	CU(ods_cu.cuMemFree(dm));
	free(view);
#else
	munmap(m, POOL + PAGE);
#endif
	printf("diffargs: %lu steps (sync %lu, async %lu, batch %lu, stream %lu, fanout %lu), %lu calls with an argument error, "
	       "%lu huge reads at EOF, %lu changes of the file from outside; every answer and byte as the model\n",
	       step, ncalls[0], ncalls[1], ncalls[2], ncalls[3], ncalls[4], nfault, nhuge, noutside);
	return 0;
}
