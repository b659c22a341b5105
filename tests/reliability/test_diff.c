/*
 * Randomized differential test: random sequences of API calls through
 * every family, checked byte for byte and result for result against a
 * plain pread/pwrite oracle on a second copy of the file.
 *
 * One run is a sequence of steps drawn from a seed (printed; set
 * OPENDS_TEST_SEED=N to repeat a run, OPENDS_DIFF_TRACE=1 to print each
 * step). Each step is one of: a synchronous read or write; a fan-out
 * read into several targets; a group of async reads and writes awaited in
 * random order (some polled to completion, awaited twice); a batch (some
 * submitted in two parts, some cancelled right after submit); a group of
 * stream operations on the NULL stream or a created one (ordered, so they
 * may overlap each other in the file and in memory); registering or
 * deregistering a memory range; closing and reopening one of the file's
 * handles with another access mode (read-only, write-only, read-write,
 * with or without O_DIRECT); truncating both files; closing and reopening
 * the driver.
 *
 * Operations take random sizes (0, 1 byte to 256 KiB, block multiples
 * and off by one, over 1 MiB; a tenth of the synchronous calls are writes
 * of over 1 MiB at block-aligned offsets, which the caller writes in large
 * pieces itself when OPENDS_WRITE_PIECE is set: half the sessions, and
 * OPENDS_RA_KEEP=0 a quarter), file offsets (unaligned, aligned, near and past EOF),
 * targets anywhere in a 2 MiB memory pool with random buf_offset. The
 * oracle: the same operation with pread/pwrite on a copy of the file
 * opened with the same access mode (no O_DIRECT), so -EBADF through the
 * wrong direction comes from the oracle too; a target starting inside a
 * registered range and ending past it must fail with
 * -OPENDS_INVALID_MAPPING_RANGE (a batch submit with one such entry fails
 * whole and changes nothing). Operations of one async group or batch run
 * concurrently and are unordered, so they never overlap in memory and
 * their writes never overlap anything else in the file.
 *
 * After every step the whole pool must equal the model (nothing written
 * outside [buf + buf_offset, + returned)) and the file must equal the
 * oracle's copy, size included. A difference prints the seed, the step and
 * the last steps, then fails.
 *
 * Usage: test_diff [STEPS [SECONDS]] (defaults 2000 steps, 4 s: the run
 * stops at whichever comes first). The backend and memory kind come from
 * OPENDS_BACKEND and OPENDS_ACCEL (hostdev: every target is simulated
 * device memory, so the staged paths run).
 */
#include "../sources/fake.h" /* source handles over the file (use_fd) */

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>

#define FILE_MAX ((size_t)2 * 1024 * 1024)
#define POOL ((size_t)2 * 1024 * 1024)
#define NSLOT 4
#define MAXGRP 8
#define MAXREG 6
#define LOGN 24

static uint64_t rng;
static uint64_t rnd(void)
{
	rng += 0x9e3779b97f4a7c15ull;
	return t_splitmix64(rng);
}
static uint64_t rn(uint64_t n) /* 0 .. n-1 */
{
	return n ? rnd() % n : 0;
}

static char path_t[PATH_MAX], path_o[PATH_MAX];
static int chk_t = -1, chk_o = -1; /* plain fds for the checks and truncation */
static uint8_t *pool, *shadow;     /* what the pool holds, what it must hold */
static uint8_t *fbuf_t, *fbuf_o;

struct slot {
	int fd, ofd;
	opends_handle_t fh;
	int acc;
	bool direct;
	struct fake *src; /* a source handle over the file, or NULL */
	size_t max_io, max_bytes; /* its descriptor's caps (0: none) */
	unsigned max_ops;         /* (0: the default, 16) */
};
static struct slot slots[NSLOT];
static bool have_direct = true;

struct reg {
	size_t off, len;
};
static struct reg regs[MAXREG];
static unsigned nregs;

static opends_stream_t stream;
static bool stream_fixed;
static opends_batch_t batch;

static unsigned long step;
static char logbuf[LOGN][240];
static unsigned long nops[9];
static bool trace;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	char *l = logbuf[step % LOGN];
	int n = snprintf(l, sizeof logbuf[0], "step %lu: ", step);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l + n, sizeof logbuf[0] - (size_t)n, fmt, ap);
	va_end(ap);
	if (trace)
		printf("%s\n", l);
}

static void dump_log(void)
{
	fprintf(stderr, "seed %s; the last steps (OPENDS_DIFF_TRACE=1 prints all):\n", getenv("OPENDS_TEST_SEED"));
	for (unsigned long i = step + 1 > LOGN ? step + 1 - LOGN : 0; i <= step; i++)
		fprintf(stderr, "  %s\n", logbuf[i % LOGN]);
}

#define DIFF(...)                                                                                \
	do {                                                                                     \
		dump_log();                                                                      \
		FAILF(__VA_ARGS__);                                                              \
	} while (0)

static const char *acc_name(int acc)
{
	return acc == O_RDONLY ? "ro" : acc == O_WRONLY ? "wo" : "rw";
}

/* ---- the oracle ------------------------------------------------------------ */

/* pread/pwrite until n bytes or EOF (fake.h's loop); size 0 still makes the
 * call, so a read-only or write-only fd answers -EBADF as the library must */
static ssize_t o_rw(int fd, bool rd, uint8_t *p, size_t n, off_t off)
{
	if (n == 0) {
		ssize_t r = rd ? pread(fd, p, 0, off) : pwrite(fd, p, 0, off);
		return r < 0 ? -errno : 0;
	}
	return fake_fd_do(fd, rd, p, n, (uint64_t)off);
}

static size_t fsize_now(void)
{
	return (size_t)t_file_size(chk_o);
}

/* ---- operations -------------------------------------------------------------- */

struct op {
	int s;        /* slot */
	int rd;       /* 1 read, 0 write */
	size_t size;
	off_t foff;
	size_t base;  /* buf_base - pool */
	off_t boff;
	ssize_t want; /* the oracle's result (filled when it runs) */
	bool imr;     /* must fail with -OPENDS_INVALID_MAPPING_RANGE */
	/* stream: the values behind the pointers */
	size_t ssize;
	off_t sfoff, sboff;
	ssize_t got;
	opends_async_future_t fut;
};

static size_t pick_size(size_t cap)
{
	size_t n;
	switch (rn(10)) {
	case 0: n = 0; break;
	case 1: case 2: n = 1 + rn(16); break;
	case 3: case 4: n = 4096 * (1 + rn(8)) + rn(3) - 1; break;
	case 5: case 6: case 7: n = 1 + rn(64 * 1024); break;
	case 8: n = 1 + rn(256 * 1024); break;
	default: /* over 1 MiB at times, block multiples among them (a
		    synchronous write of those from device memory runs on the
		    caller with OPENDS_WRITE_PIECE) */
		n = rn(4) ? 1 + rn(256 * 1024) : rn(2) ? 1024 * 1024 + rn(256 * 1024) : 1024 * 1024 + 4096 * (1 + rn(96));
		break;
	}
	return n > cap ? cap : n;
}

static off_t pick_foff(size_t size, bool wr)
{
	size_t fs = fsize_now();
	off_t o;
	switch (rn(10)) {
	case 0: o = (off_t)(4096 * rn(fs / 4096 + 3)); break;
	case 1: o = (off_t)(fs + rn(16 * 1024)); break; /* at or past EOF */
	case 2: o = (off_t)(fs > 100 ? fs - rn(100) : 0); break; /* crossing EOF */
	default: o = (off_t)rn(fs + 1); break;
	}
	if (wr && (size_t)o + size > FILE_MAX)
		o = (off_t)(FILE_MAX - size);
	return o;
}

/* the registered range holding a, or -1 */
static int reg_at(size_t a)
{
	for (unsigned i = 0; i < nregs; i++)
		if (a >= regs[i].off && a < regs[i].off + regs[i].len)
			return (int)i;
	return -1;
}

/* The library's rule: the range holding the target decides, else the one
 * holding buf_base; the target must lie inside it. */
static bool breaks_mapping(const struct op *o)
{
	size_t t = o->base + (size_t)o->boff;
	int r = reg_at(t);
	if (r < 0)
		r = reg_at(o->base);
	if (r < 0)
		return false;
	return t < regs[r].off || t + o->size > regs[r].off + regs[r].len;
}

/* A random operation whose target lies in [lo, hi) of the pool. Writes
 * fill their source bytes first (pool and model alike). */
static void make_op(struct op *o, size_t lo, size_t hi, bool allow_imr)
{
	memset(o, 0, sizeof(*o));
	o->s = (int)rn(NSLOT);
	o->rd = rn(3) != 0;
	size_t room = hi - lo;
	o->size = pick_size(room > 8192 ? room - 8192 : room / 2);
	o->boff = (off_t)(rn(4) ? rn(4096) : 0);
	if ((size_t)o->boff + o->size > room)
		o->boff = 0;
	o->base = lo + rn(room - o->size - (size_t)o->boff + 1);
	/* now and then a target inside a registered range, at times past its end */
	if (nregs && rn(3) == 0) {
		const struct reg *g = &regs[rn(nregs)];
		if (g->off >= lo && g->off + g->len <= hi) {
			o->base = g->off;
			o->boff = (off_t)rn(g->len);
			size_t left = g->len - (size_t)o->boff, max = hi - g->off - (size_t)o->boff;
			if (allow_imr && rn(4) == 0)
				o->size = pick_size(max); /* may run past it */
			else
				o->size = pick_size(left);
		}
	}
	o->foff = pick_foff(o->size, !o->rd);
	if (!(o->size % 4096) && rn(2)) /* block-aligned as a whole (O_DIRECT's and the large writes' shape) */
		o->foff &= ~(off_t)4095;
	o->imr = breaks_mapping(o);
	if (!allow_imr && o->imr) {
		o->base = lo, o->boff = 0, o->size = 0; /* harmless */
		o->imr = breaks_mapping(o);
	}
	if (!o->rd && !o->imr) {
		uint8_t *p = pool + o->base + o->boff;
		for (size_t i = 0; i < o->size; i++)
			p[i] = (uint8_t)rnd();
		memcpy(shadow + o->base + o->boff, p, o->size);
	}
}

static const char *desc(const struct op *o)
{
	static char b[200];
	snprintf(b, sizeof b, "%s slot %d (%s%s) size %zu foff %lld buf pool+%zu boff %lld%s", o->rd ? "read" : "write",
		 o->s, acc_name(slots[o->s].acc), slots[o->s].direct ? ",direct" : "", o->size, (long long)o->foff,
		 o->base, (long long)o->boff, o->imr ? " [past registered range]" : "");
	if (slots[o->s].src)
		snprintf(b + strlen(b), sizeof b - strlen(b), " [source, %s]", fake_mode_name(slots[o->s].src->mode));
	return b;
}

/* Run o on the oracle and the model: the result the library must give. */
static void oracle(struct op *o)
{
	if (o->imr) {
		o->want = -OPENDS_INVALID_MAPPING_RANGE;
		return;
	}
	uint8_t *m = shadow + o->base + o->boff;
	o->want = o_rw(slots[o->s].ofd, o->rd, m, o->size, o->foff);
}

static void expect(const struct op *o, ssize_t got, const char *fam)
{
	if (got != o->want)
		DIFF("%s %s: returned %zd (%s), the oracle %zd (%s)", fam, desc(o), got, opends_err_name((int)got),
		     o->want, opends_err_name((int)o->want));
}

/* ---- the checks -------------------------------------------------------------- */

static void check_all(const char *what)
{
	size_t at;
	if (t_first_diff(pool, shadow, POOL, &at))
		DIFF("after %s: pool byte %zu is 0x%02x, the model's 0x%02x", what, at, pool[at], shadow[at]);
	off_t st = t_file_size(chk_t), so = t_file_size(chk_o);
	if (st != so)
		DIFF("after %s: file is %lld bytes, the oracle's %lld", what, (long long)st, (long long)so);
	size_t nt = t_pread_all(chk_t, fbuf_t, (size_t)st, 0), no = t_pread_all(chk_o, fbuf_o, (size_t)so, 0);
	CHECK(nt == (size_t)st && no == (size_t)so);
	if (t_first_diff(fbuf_t, fbuf_o, nt, &at))
		DIFF("after %s: file byte %zu is 0x%02x, the oracle's 0x%02x", what, at, fbuf_t[at], fbuf_o[at]);
}

/* ---- handles ----------------------------------------------------------------- */

static void slot_open(int i)
{
	static const int accs[] = { O_RDWR, O_RDWR, O_RDONLY, O_WRONLY };
	struct slot *s = &slots[i];
	s->acc = accs[rn(4)];
	s->direct = have_direct && rn(2);
	s->src = NULL;
	if (rn(4) == 0) {
		/* a source: read-write or read-only (no write-only form) */
		s->acc = s->acc == O_WRONLY ? O_RDWR : s->acc;
		s->direct = false;
		/* the file through callbacks: answered inline, from two threads
		 * in random order, or by the blocking form */
		s->src = fake_new((enum fake_mode)rn(3), 0, NULL);
		s->src->delay_us = 50;
		s->src->use_fd = true;
		s->src->fd = s->fd = open(path_t, O_RDWR);
		CHECKF(s->fd >= 0, "open(%s): %s", path_t, strerror(errno));
		opends_source_desc_t d = fake_desc(s->src);
		d.flags |= s->acc == O_RDONLY ? OPENDS_SOURCE_RDONLY : 0;
		d.io_unit = rn(2) ? 0 : 4096 * (1 + rn(16));
		d.max_io = rn(2) ? 0 : 4096 * (1 + rn(8));
		d.max_inflight = (unsigned)rn(5);
		d.max_inflight_bytes = rn(3) ? 0 : 65536 * (1 + rn(4));
		d.domain = rn(2);
		/* the engine cuts pieces at io_unit (4 MiB when 0); ref's
		 * oracle runs a request in max_io pieces, not at units */
		if (strcmp(opends_driver_backend(), "ref"))
			s->src->unit = d.io_unit ? d.io_unit : (4u << 20);
		s->max_io = d.max_io;
		s->max_bytes = d.max_inflight_bytes;
		s->max_ops = d.max_inflight ? d.max_inflight : 16;
		s->fh = NULL;
		OK(opends_handle_register_source(&s->fh, &d));
	} else {
		s->fd = open(path_t, s->acc | (s->direct ? O_DIRECT : 0));
		CHECKF(s->fd >= 0, "open(%s): %s", path_t, strerror(errno));
		s->fh = NULL;
		OK(opends_handle_register(&s->fh, s->fd));
	}
	s->ofd = open(path_o, s->acc);
	CHECKF(s->ofd >= 0, "open(%s): %s", path_o, strerror(errno));
}

/* After the handle is gone (deregistered, or the driver closed): a
 * source's release has run exactly once. */
static void slot_close(int i, bool dereg)
{
	struct slot *s = &slots[i];
	if (dereg)
		OK(opends_handle_deregister(s->fh));
	if (s->src) {
		int n = atomic_load(&s->src->released);
		if (n != 1)
			DIFF("slot %d: the source's release ran %d times by deregistration", i, n);
		/* what the source saw kept to its descriptor (sources.h): no
		 * piece over max_io, never more pieces or bytes in flight than
		 * its caps (a domain shares the smallest), no piece of 0 bytes */
		struct fake *f = s->src;
		if (s->max_io && (size_t)atomic_load(&f->max_len) > s->max_io)
			DIFF("slot %d: a piece of %ld bytes, max_io %zu", i, atomic_load(&f->max_len), s->max_io);
		if ((unsigned)atomic_load(&f->max_inflight) > s->max_ops)
			DIFF("slot %d: %d pieces in flight at once, max_inflight %u", i, atomic_load(&f->max_inflight),
			     s->max_ops);
		if (s->max_bytes && (size_t)atomic_load(&f->max_inflight_bytes) > s->max_bytes)
			DIFF("slot %d: %ld bytes in flight at once, max_inflight_bytes %zu", i,
			     atomic_load(&f->max_inflight_bytes), s->max_bytes);
		if (atomic_load(&f->crossed))
			DIFF("slot %d: %d pieces crossed an io_unit boundary (%" PRIu64 ")", i, atomic_load(&f->crossed),
			     f->unit);
		if (atomic_load(&f->zero_len_calls))
			DIFF("slot %d: %ld pieces of 0 bytes reached the source", i, atomic_load(&f->zero_len_calls));
		fake_free(s->src);
		s->src = NULL;
	}
	close(s->fd);
	close(s->ofd);
}

/* Half of the sessions run with tiny pieces (8 KiB chunks, 2 per queue,
 * 2 workers, nothing inline; half of those in 1 MiB of staging), so
 * transfers split everywhere and queues fill; the others with the
 * defaults. A quarter without read-ahead. */
static void driver_up(void)
{
	static const char *const vars[] = { "OPENDS_CHUNK_SIZE", "OPENDS_QUEUE_DEPTH", "OPENDS_IO_THREADS",
					    "OPENDS_INLINE_MAX", "OPENDS_MAX_PINNED" };
	static const char *const small[] = { "8k", "2", "2", "0", "1m" };
	bool tiny = rn(2);
	bool pinned = tiny && rn(2); /* and a staging budget of 1 MiB: stream staging runs out of it */
	for (int i = 0; i < 5; i++)
		if (tiny && (i < 4 || pinned))
			setenv(vars[i], small[i], 1);
		else
			unsetenv(vars[i]);
	if (rn(4) == 0)
		setenv("OPENDS_READAHEAD", "0", 1);
	else
		unsetenv("OPENDS_READAHEAD");
	/* this round's switches: a synchronous write from device memory in
	 * large pieces on the caller (half the sessions, pieces of 64 KiB to
	 * 4 MiB), read-ahead buffers kept for the next handle or not */
	static const char *const pieces[] = { "64k", "256k", "1m", "4m" };
	if (rn(2))
		setenv("OPENDS_WRITE_PIECE", pieces[rn(4)], 1);
	else
		unsetenv("OPENDS_WRITE_PIECE");
	if (rn(4) == 0)
		setenv("OPENDS_RA_KEEP", "0", 1);
	else
		unsetenv("OPENDS_RA_KEEP");
	if (trace)
		printf("driver open%s%s%s\n", tiny ? " with tiny pieces" : "",
		       getenv("OPENDS_WRITE_PIECE") ? ", write piece " : "",
		       getenv("OPENDS_WRITE_PIECE") ? getenv("OPENDS_WRITE_PIECE") : "");
	t_driver_open();
	for (int i = 0; i < NSLOT; i++)
		slot_open(i);
	OK(opends_stream_create(&stream));
	stream_fixed = false;
	OK(opends_batch_setup(&batch, 2 * MAXGRP));
	nregs = 0;
}

/* ---- the families ------------------------------------------------------------ */

/* A synchronous write of over 1 MiB, block-aligned in the file: from
 * device memory (hostdev) with OPENDS_WRITE_PIECE set, the caller writes
 * it in large pieces itself (stage_wr.c), not the engine. */
static void make_big_write(struct op *o)
{
	memset(o, 0, sizeof(*o));
	o->s = (int)rn(NSLOT);
	o->size = ((size_t)1 << 20) + 4096 * (1 + rn(96));
	o->base = rn(POOL - o->size + 1);
	o->boff = 0;
	size_t fs = fsize_now();
	size_t top = fs + 8192 < FILE_MAX - o->size ? fs + 8192 : FILE_MAX - o->size;
	o->foff = (off_t)(4096 * rn(top / 4096 + 1));
	o->imr = breaks_mapping(o);
	if (!o->imr) {
		uint8_t *p = pool + o->base;
		for (size_t i = 0; i < o->size; i++)
			p[i] = (uint8_t)rnd();
		memcpy(shadow + o->base, p, o->size);
	}
}

static void do_sync(void)
{
	struct op o;
	if (rn(10) == 0)
		make_big_write(&o);
	else
		make_op(&o, 0, POOL, true);
	note("sync %s", desc(&o));
	oracle(&o);
	ssize_t got = o.rd ? opends_sync_read(slots[o.s].fh, pool + o.base, o.size, o.foff, o.boff)
			   : opends_sync_write(slots[o.s].fh, pool + o.base, o.size, o.foff, o.boff);
	expect(&o, got, "sync");
	nops[0]++;
}

/* One read into n disjoint targets of one size. */
static void do_fanout(void)
{
	unsigned n = 1 + (unsigned)rn(3);
	size_t part = POOL / n;
	struct op o[3];
	void *bufs[3];
	off_t boffs[3];
	make_op(&o[0], 0, part, false);
	o[0].rd = 1;
	for (unsigned i = 1; i < n; i++) {
		size_t lo = part * i;
		o[i] = o[0];
		o[i].base = lo + rn(part - o[0].size - (size_t)o[0].boff + 1);
		o[i].imr = breaks_mapping(&o[i]);
	}
	bool imr = false;
	for (unsigned i = 0; i < n; i++) {
		imr |= o[i].imr;
		bufs[i] = pool + o[i].base;
		boffs[i] = o[i].boff;
	}
	note("fanout x%u %s", n, desc(&o[0]));
	ssize_t want;
	if (imr) {
		want = -OPENDS_INVALID_MAPPING_RANGE;
	} else {
		for (unsigned i = 0; i < n; i++)
			oracle(&o[i]);
		want = o[0].want;
	}
	ssize_t got = opends_sync_read_fanout(slots[o[0].s].fh, bufs, boffs, n, o[0].size, o[0].foff);
	/* two faults at once (a target past its range, a write-only fd): the
	 * header fixes no order between them */
	if (imr && slots[o[0].s].acc == O_WRONLY && got == -EBADF)
		want = got;
	o[0].want = want;
	expect(&o[0], got, "fanout");
	nops[1]++;
}

/* n operations that may run concurrently: disjoint targets, and no write
 * overlapping another operation's file range. */
static unsigned make_group(struct op *g, unsigned n, bool allow_imr)
{
	size_t part = POOL / n;
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++) {
		make_op(&g[k], part * i, part * (i + 1), allow_imr);
		bool clash = false;
		for (unsigned j = 0; j < k && !clash; j++) {
			off_t a0 = g[j].foff, a1 = a0 + (off_t)g[j].size, b0 = g[k].foff, b1 = b0 + (off_t)g[k].size;
			bool ov = a0 < b1 && b0 < a1;
			/* a read of g[j] past EOF may see a write of g[k] extending it */
			bool ext = (g[j].rd && !g[k].rd && b1 > a0) || (g[k].rd && !g[j].rd && a1 > b0);
			clash = (!g[j].rd || !g[k].rd) && (ov || ext);
		}
		if (clash)
			continue; /* dropped; a write's source bytes stay (pool = model) */
		k++;
	}
	return k;
}

static void do_async(void)
{
	struct op g[MAXGRP];
	unsigned n = make_group(g, 1 + (unsigned)rn(MAXGRP), true);
	note("async group of %u", n);
	for (unsigned i = 0; i < n; i++) {
		struct op *o = &g[i];
		if (trace)
			printf("    %s\n", desc(o));
		opends_error_t e = o->rd ? opends_async_read(slots[o->s].fh, pool + o->base, o->size, o->foff, o->boff,
							     &o->fut)
					 : opends_async_write(slots[o->s].fh, pool + o->base, o->size, o->foff, o->boff,
							      &o->fut);
		if (o->imr) {
			if (e.err != OPENDS_INVALID_MAPPING_RANGE)
				DIFF("async submit %s: %d (%s), expected OPENDS_INVALID_MAPPING_RANGE", desc(o), e.err,
				     opends_err_name(e.err));
			o->s = -1; /* nothing started */
		} else if (e.err != OPENDS_SUCCESS) {
			DIFF("async submit %s: %d (%s)", desc(o), e.err, opends_err_name(e.err));
		}
	}
	/* the oracle in any order: they do not depend on each other */
	for (unsigned i = 0; i < n; i++)
		if (g[i].s >= 0)
			oracle(&g[i]);
	/* await in a random order; some polled first, some awaited twice */
	unsigned ord[MAXGRP];
	for (unsigned i = 0; i < n; i++)
		ord[i] = i;
	for (unsigned i = n; i > 1; i--) {
		unsigned j = (unsigned)rn(i), t = ord[i - 1];
		ord[i - 1] = ord[j];
		ord[j] = t;
	}
	for (unsigned k = 0; k < n; k++) {
		struct op *o = &g[ord[k]];
		if (o->s < 0)
			continue;
		if (rn(3) == 0) {
			double t0 = t_now();
			int p;
			while ((p = opends_async_poll(&o->fut)) == 0)
				if (t_now() - t0 > 30)
					DIFF("async %s: not done after 30 s of polling", desc(o));
			if (p != 1)
				DIFF("async poll %s: %d", desc(o), p);
		}
		ssize_t got = opends_async_await(&o->fut);
		expect(o, got, "async");
		if (rn(4) == 0) {
			if (opends_async_poll(&o->fut) != 1)
				DIFF("async %s: poll after await is not 1", desc(o));
			expect(o, opends_async_await(&o->fut), "async (awaited again)");
		}
	}
	nops[2] += n;
}

static void do_batch(void)
{
	struct op g[MAXGRP];
	unsigned n = make_group(g, 1 + (unsigned)rn(MAXGRP), true);
	if (!n)
		return;
	opends_io_params_t p[MAXGRP];
	unsigned bad = n;
	for (unsigned i = 0; i < n; i++) {
		p[i] = t_batch_entry(slots[g[i].s].fh, g[i].rd ? OPENDS_READ : OPENDS_WRITE, pool + g[i].base, g[i].size,
				     g[i].foff, g[i].boff, &g[i]);
		if (g[i].imr)
			bad = i;
	}
	bool cancel = rn(5) == 0;
	note("batch of %u%s%s", n, bad < n ? " (one past a registered range)" : "", cancel ? ", cancelled" : "");
	if (trace)
		for (unsigned i = 0; i < n; i++)
			printf("    %s\n", desc(&g[i]));
	if (bad < n) {
		/* all or nothing: refused whole, nothing moved */
		opends_error_t e = opends_batch_submit(batch, n, p, 0);
		if (e.err != OPENDS_INVALID_MAPPING_RANGE)
			DIFF("batch submit with %s: %d (%s), expected OPENDS_INVALID_MAPPING_RANGE", desc(&g[bad]),
			     e.err, opends_err_name(e.err));
		check_all("a refused batch");
		unsigned k = 0;
		for (unsigned i = 0; i < n; i++)
			if (!g[i].imr) {
				g[k] = g[i];
				p[k] = p[i];
				p[k].cookie = &g[k];
				k++;
			}
		n = k;
		if (!n)
			return;
	}
	unsigned first = rn(2) ? n : 1 + (unsigned)rn(n);
	OK(opends_batch_submit(batch, first, p, 0));
	if (first < n)
		OK(opends_batch_submit(batch, n - first, p + first, 0));
	if (cancel)
		OK(opends_batch_cancel(batch));
	opends_io_events_t ev[MAXGRP];
	t_batch_collect(batch, n, ev, 60);
	bool seen[MAXGRP] = { false };
	for (unsigned i = 0; i < n; i++) {
		struct op *o = ev[i].cookie;
		CHECKF(o >= g && o < g + n, "batch event %u: unknown cookie %p", i, ev[i].cookie);
		unsigned k = (unsigned)(o - g);
		if (seen[k])
			DIFF("batch: %s delivered twice", desc(o));
		seen[k] = true;
		if (ev[i].status == OPENDS_CANCELED) {
			if (!cancel)
				DIFF("batch: %s CANCELED without a cancel", desc(o));
			if (ev[i].ret != -ECANCELED && ev[i].ret != 0)
				DIFF("batch: cancelled %s has ret %zd", desc(o), ev[i].ret);
			continue; /* nothing moved: the model stays as it is */
		}
		oracle(o);
		opends_status_t want = o->want >= 0 ? OPENDS_COMPLETE : OPENDS_FAILED;
		if (ev[i].status != want)
			DIFF("batch %s: status 0x%x, expected 0x%x (ret %zd, the oracle %zd)", desc(o), ev[i].status, want,
			     ev[i].ret, o->want);
		expect(o, ev[i].ret, "batch");
	}
	nops[3] += n;
}

/* Stream operations are ordered: any overlap is fine. */
static void do_stream(void)
{
	struct op g[MAXGRP];
	unsigned n = 1 + (unsigned)rn(6);
	opends_stream_t st = rn(2) ? stream : NULL;
	/* the created stream now and then with the three FIXED_* hints (on an
	 * accelerator stream its reads may start at the call: only this
	 * group's own writes, queued ahead, come between), or without them */
	if (st && rn(3) == 0) {
		stream_fixed = !stream_fixed;
		if (stream_fixed)
			OK(opends_stream_register(st, OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET |
							      OPENDS_STREAM_FIXED_FILE_SIZE));
		else
			OK(opends_stream_deregister(st));
	}
	note("stream group of %u on %s%s", n, st ? "a created stream" : "the NULL stream",
	     st && stream_fixed ? " (FIXED_* hints)" : "");
	/* every op made (and its source bytes filled) before the first is
	 * queued: the stream may run them while later ones are queued */
	for (unsigned i = 0; i < n; i++)
		make_op(&g[i], 0, POOL, true);
	for (unsigned i = 0; i < n; i++) {
		struct op *o = &g[i];
		if (trace)
			printf("    %s\n", desc(o));
		o->ssize = o->size;
		o->sfoff = o->foff;
		o->sboff = o->boff;
		o->got = 12345;
		opends_error_t e = o->rd ? opends_stream_read(slots[o->s].fh, pool + o->base, &o->ssize, &o->sfoff,
							      &o->sboff, &o->got, st)
					 : opends_stream_write(slots[o->s].fh, pool + o->base, &o->ssize, &o->sfoff,
							       &o->sboff, &o->got, st);
		if (e.err != OPENDS_SUCCESS)
			DIFF("stream submit %s: %d (%s)", desc(o), e.err, opends_err_name(e.err));
	}
	OK(opends_stream_synchronize(st));
	/* the model, in stream order */
	for (unsigned i = 0; i < n; i++) {
		oracle(&g[i]);
		expect(&g[i], g[i].got, "stream");
	}
	nops[4] += n;
}

/* Synchronous reads continuing each other (read-ahead's trigger, on
 * uring into device memory), with writes through another handle, plain
 * pwrites and truncations between them: a read never returns bytes older
 * than a write that came before it. Now and then the file is left alone
 * for 110 ms first, as read-ahead starts only on a file whose times are
 * that old. */
static void do_seqrun(void)
{
	int s = (int)rn(NSLOT);
	static const size_t sizes[] = { 4096, 65536, 131072, 262144, 1048576 };
	size_t size = sizes[rn(5)];
	unsigned n = 3 + (unsigned)rn(5);
	off_t off = (off_t)(rn(2) ? 0 : rn(FILE_MAX / 2));
	bool wait = rn(4) == 0;
	note("sequential run of %u reads of %zu from %lld, slot %d (%s%s)%s", n, size, (long long)off, s,
	     acc_name(slots[s].acc), slots[s].direct ? ",direct" : "", wait ? " after 110 ms" : "");
	if (wait)
		usleep(110 * 1000);
	for (unsigned i = 0; i < n; i++, off += (off_t)size) {
		struct op o;
		memset(&o, 0, sizeof o);
		o.s = s;
		o.rd = 1;
		o.size = size;
		o.foff = off;
		o.base = (size_t)rn(POOL - size + 1);
		o.imr = breaks_mapping(&o);
		unsigned w = (unsigned)rn(8);
		if (w == 0) { /* a write through another handle into the next read's range */
			struct op x;
			make_op(&x, 0, POOL, false);
			x.rd = 0;
			x.foff = off + (off_t)rn(size);
			if ((size_t)x.foff + x.size > FILE_MAX)
				x.foff = (off_t)(FILE_MAX - x.size);
			memcpy(pool + x.base + x.boff, shadow + x.base + x.boff, x.size);
			oracle(&x);
			if (trace)
				printf("    then %s\n", desc(&x));
			expect(&x, opends_sync_write(slots[x.s].fh, pool + x.base, x.size, x.foff, x.boff), "seqrun write");
		} else if (w == 1) { /* a plain pwrite, completed before the read */
			uint8_t b[512];
			size_t k = 1 + rn(sizeof b);
			off_t at = (off_t)t_min((size_t)off + rn(size), FILE_MAX - k);
			for (size_t j = 0; j < k; j++)
				b[j] = (uint8_t)rnd();
			if (trace)
				printf("    then pwrite %zu at %lld\n", k, (long long)at);
			t_pwrite_all(chk_t, b, k, at);
			t_pwrite_all(chk_o, b, k, at);
		} else if (w == 2) {
			off_t at = (off_t)t_min((size_t)off + rn(size), FILE_MAX);
			if (trace)
				printf("    then truncate to %lld\n", (long long)at);
			CHECK(ftruncate(chk_t, at) == 0 && ftruncate(chk_o, at) == 0);
		}
		oracle(&o);
		if (trace)
			printf("    %s\n", desc(&o));
		expect(&o, opends_sync_read(slots[s].fh, pool + o.base, o.size, o.foff, o.boff), "seqrun read");
		check_all(logbuf[step % LOGN]);
	}
	nops[0] += n;
}

static void do_register(void)
{
	if (nregs && rn(2)) {
		unsigned i = (unsigned)rn(nregs);
		size_t off = regs[i].off;
		note("deregister pool+%zu", off);
		OK(opends_buf_deregister(pool + off));
		regs[i] = regs[--nregs];
		EXPECT_ERR(opends_buf_deregister(pool + off), OPENDS_MEMORY_NOT_REGISTERED);
		return;
	}
	if (nregs == MAXREG)
		return;
	size_t len = 4096 + rn(512 * 1024), off = rn(POOL - len);
	bool ov = false;
	for (unsigned i = 0; i < nregs; i++)
		ov |= off < regs[i].off + regs[i].len && regs[i].off < off + len;
	note("register pool+%zu +%zu%s", off, len, ov ? " (overlaps)" : "");
	EXPECT_ERR(opends_buf_register(pool + off, len, 0), ov ? OPENDS_MEMORY_ALREADY_REGISTERED : OPENDS_SUCCESS);
	if (!ov)
		regs[nregs++] = (struct reg){ off, len };
	nops[5]++;
}

static void do_reopen(void)
{
	int i = (int)rn(NSLOT);
	slot_close(i, true);
	slot_open(i);
	note("slot %d reopened %s%s", i, acc_name(slots[i].acc), slots[i].direct ? ",direct" : "");
	nops[6]++;
}

static void do_truncate(void)
{
	size_t n = rn(FILE_MAX);
	note("truncate both to %zu", n);
	CHECK(ftruncate(chk_t, (off_t)n) == 0 && ftruncate(chk_o, (off_t)n) == 0);
	nops[7]++;
}

static void do_driver_reopen(void)
{
	note("driver close and reopen");
	for (int i = 0; i < NSLOT; i++)
		if (rn(2)) /* the rest are released by close */
			OK(opends_handle_deregister(slots[i].fh));
	if (rn(2))
		OK(opends_stream_destroy(stream));
	OK(opends_driver_close());
	for (int i = 0; i < NSLOT; i++)
		slot_close(i, false);
	driver_up();
	nops[8]++;
}

int main(int argc, char **argv)
{
	unsigned long steps = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
	double secs = argc > 2 ? atof(argv[2]) : 4;
	const char *se = getenv("OPENDS_TEST_SEED");
	uint64_t seed = se && *se ? strtoull(se, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	char sb[32];
	snprintf(sb, sizeof sb, "%" PRIu64, seed);
	setenv("OPENDS_TEST_SEED", sb, 1);
	rng = seed;
	trace = getenv("OPENDS_DIFF_TRACE") && !strcmp(getenv("OPENDS_DIFF_TRACE"), "1");
	const char *be = getenv("OPENDS_BACKEND"), *ac = getenv("OPENDS_ACCEL");
	printf("diff: seed %" PRIu64 " (OPENDS_TEST_SEED=%" PRIu64 " repeats it), backend %s, accel %s\n", seed, seed,
	       be ? be : "auto", ac ? ac : "auto");
	t_watchdog(120);

	t_path(path_t, sizeof path_t, "diff.bin");
	t_path(path_o, sizeof path_o, "oracle.bin");
	pool = t_xmalloc(POOL);
	shadow = t_xmalloc(POOL);
	fbuf_t = t_xmalloc(FILE_MAX + 4096);
	fbuf_o = t_xmalloc(FILE_MAX + 4096);
	for (size_t i = 0; i < POOL; i++)
		pool[i] = (uint8_t)rnd();
	memcpy(shadow, pool, POOL);
	size_t fs0 = rn(FILE_MAX);
	uint8_t *init = t_xmalloc(fs0 + 1);
	for (size_t i = 0; i < fs0; i++)
		init[i] = (uint8_t)rnd();
	chk_t = open(path_t, O_RDWR | O_CREAT | O_TRUNC, 0644);
	chk_o = open(path_o, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(chk_t >= 0 && chk_o >= 0);
	t_pwrite_all(chk_t, init, fs0, 0);
	t_pwrite_all(chk_o, init, fs0, 0);
	free(init);
	int d = t_open(path_t, O_RDONLY, true);
	if (d < 0)
		have_direct = false;
	else
		close(d);

	driver_up();
	double t0 = t_now();
	for (step = 0; step < steps; step++) {
		if (t_now() - t0 > secs)
			break;
		t_phase = "step";
		unsigned w = (unsigned)rn(1000);
		if (w < 300)
			do_sync();
		else if (w < 380)
			do_fanout();
		else if (w < 540)
			do_async();
		else if (w < 700)
			do_batch();
		else if (w < 860)
			do_stream();
		else if (w < 900)
			do_register();
		else if (w < 930)
			do_seqrun();
		else if (w < 970)
			do_reopen();
		else if (w < 995)
			do_truncate();
		else
			do_driver_reopen();
		check_all(logbuf[step % LOGN]);
	}
	for (int i = 0; i < NSLOT; i++)
		slot_close(i, true);
	OK(opends_stream_destroy(stream));
	OK(opends_batch_destroy(batch));
	OK(opends_driver_close());
	printf("diff: %lu steps in %.1f s, all equal to the oracle: %lu sync, %lu fanout, %lu async, %lu batch, "
	       "%lu stream operations, %lu registrations, %lu reopens, %lu truncations, %lu driver reopens\n",
	       step, t_now() - t0, nops[0], nops[1], nops[2], nops[3], nops[4], nops[5], nops[6], nops[7], nops[8]);
	return 0;
}
