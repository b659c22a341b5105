/*
 * libFuzzer target: random sequences of API calls against the ref backend
 * (host memory), checked against a model of the file, of the memory the
 * calls may write, and of what is registered.
 *
 * The input is read as a program: each step takes an opcode byte and its
 * arguments from the input. Steps: register / deregister handles (of a
 * read-write, a read-only, a write-only and an O_DIRECT fd, plus stale,
 * made-up and NULL handles), register / deregister memory ranges
 * (overlapping, zero-sized, with flags, interior pointers), sync, async,
 * batch and stream reads and writes with random sizes and offsets (valid,
 * negative, overflowing, past registered ranges, through the wrong
 * direction), draining, driver close and reopen, and calls with NULL or
 * never-submitted objects.
 *
 * For every call the model computes the set of codes the contract allows
 * (several when more than one argument is wrong, as the header does not
 * fix their order); a call must return one of them, or succeed with
 * exactly the model's byte count when the set is empty. Operations in
 * flight are drained before any step that conflicts with them (same file
 * bytes or memory with a write involved, deregistration, close), so their
 * results are deterministic; at every drain the whole memory arena must
 * equal the model (nothing written outside [buf + buf_offset, + returned))
 * and every read must have returned the model's bytes.
 *
 * Handles from an earlier driver session are not reused after a reopen:
 * that aliasing is row H17 of docs/errors.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <opends.h>

#define MAXF (128 * 1024) /* file model size */
#define ARENA (256 * 1024)
#define NFD 4
#define MAXPEND 16
#define MAXREG 8

/* acceptable-error bits */
enum { A_IV = 1, A_HNR = 2, A_IMR = 4, A_EBADF = 8, A_NOTINIT = 16, A_FULL = 32 };

static int fds[NFD];          /* rw, ro, wo, rw|O_DIRECT (or -1) */
static uint8_t *arena, *shadow;
static uint8_t fmodel[MAXF];
static size_t fsize;      /* the model's size, pending writes included */
static size_t fsize_sure; /* the size completed writes guarantee */
static char path[256];

static bool open_;
static opends_handle_t htok[NFD];
static bool hreg[NFD];
static opends_handle_t stale[8];
static unsigned nstale;

struct reg {
	size_t off, size;
};
static struct reg regs[MAXREG];
static unsigned nregs;

enum pkind { P_ASYNC, P_BATCH, P_STREAM };
struct pend {
	enum pkind kind;
	int opcode;
	size_t moff; /* target offset in the arena */
	size_t size;
	off_t fo;
	unsigned acc;      /* acceptable errors, delivered at completion */
	ssize_t want;      /* result when acc is empty */
	uint8_t *expect;   /* reads: the bytes expected */
	opends_async_future_t fut;
	size_t s_size;     /* stream arguments (must stay valid) */
	off_t s_fo, s_bo;
	ssize_t s_res;
	bool done;
	bool eof_sens; /* a read reaching past the model's EOF */
};
static struct pend pend[MAXPEND];
static unsigned npend, nbatch_pend;
static opends_batch_t batch;
static bool have_batch;
static opends_stream_t stream;
static bool have_stream;

/* ---- input reading ---- */
static const uint8_t *in;
static size_t inlen;
static uint64_t get(unsigned bytes)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < bytes; i++) {
		v <<= 8;
		if (inlen) {
			v |= *in++;
			inlen--;
		}
	}
	return v;
}

static void fail(const char *what, long got, unsigned acc, long want)
{
	fprintf(stderr, "fuzz_api: %s: got %ld, acceptable set 0x%x, else %ld; detail \"%s\"\n", what, got, acc, want,
		opends_last_error_detail());
	abort();
}

/* code -> bit */
static unsigned bit_of(long code)
{
	if (code < 0)
		code = -code;
	switch (code) {
	case OPENDS_INVALID_VALUE: return A_IV;
	case OPENDS_HANDLE_NOT_REGISTERED: return A_HNR;
	case OPENDS_INVALID_MAPPING_RANGE: return A_IMR;
	case EBADF: return A_EBADF;
	case OPENDS_DRIVER_NOT_INITIALIZED: return A_NOTINIT;
	case OPENDS_BATCH_FULL: return A_FULL;
	default: return 0x10000;
	}
}

/* ---- choosing arguments ---- */
static int hsel_fd(int sel)
{
	return sel >= 0 && sel < NFD ? sel : -1;
}

/* sel 0..3: slot; 4: stale; 5: made-up; 6: NULL */
static opends_handle_t handle_of(int sel, unsigned *acc)
{
	if (sel < NFD) {
		if (!hreg[sel])
			*acc |= A_HNR;
		return hreg[sel] ? htok[sel] : (opends_handle_t)(uintptr_t)0x55500000777ull;
	}
	if (sel == 4 && nstale) {
		*acc |= A_HNR;
		return stale[get(1) % nstale];
	}
	if (sel == 6) {
		*acc |= A_IV;
		return NULL;
	}
	*acc |= A_HNR;
	return (opends_handle_t)(uintptr_t)0x123400000001ull;
}

static const struct reg *reg_containing(size_t off)
{
	for (unsigned i = 0; i < nregs; i++)
		if (off >= regs[i].off && off < regs[i].off + regs[i].size)
			return &regs[i];
	return NULL;
}

struct ioargs {
	int opcode, hsel;
	opends_handle_t fh;
	void *buf;
	size_t size, boff; /* boff: buf's offset in the arena */
	off_t fo, bo;
	unsigned acc;      /* argument errors (library codes) */
	bool ebadf;        /* direction error (OS) */
	ssize_t want;
};

static bool trace;
static void show(const char *what, const struct ioargs *a)
{
	if (trace)
		fprintf(stderr, "%s: op %d hsel %d buf %s+%zu size %zu fo %lld bo %lld acc 0x%x ebadf %d want %zd fsize %zu\n",
			what, a->opcode, a->hsel, a->buf ? "arena" : "NULL", a->boff, a->size, (long long)a->fo,
			(long long)a->bo, a->acc, a->ebadf, a->want, fsize);
}

static void gen_io(struct ioargs *a)
{
	memset(a, 0, sizeof(*a));
	uint8_t flags = (uint8_t)get(1);
	a->opcode = flags & 1;
	a->hsel = (int)(get(1) % 8);
	if (a->hsel == 7)
		a->hsel = 0;
	a->fh = handle_of(a->hsel, &a->acc);
	a->size = get(2) % 16384;
	if (flags & 2)
		a->size = (size_t)get(1) * 4096 % 65536;
	a->fo = (off_t)(get(3) % MAXF);
	if (flags & 4)
		a->fo &= ~(off_t)4095;
	a->boff = (size_t)(get(3) % ARENA);
	if (flags & 8)
		a->boff &= ~(size_t)4095;
	a->bo = (off_t)(get(1) % 8 == 0 ? get(2) % 8192 : 0);
	/* keep valid targets inside the arena and the file model */
	if (a->boff + (size_t)a->bo > ARENA)
		a->bo = 0;
	if (a->boff + (size_t)a->bo + a->size > ARENA)
		a->size = ARENA - a->boff - (size_t)a->bo;
	if ((size_t)a->fo + a->size > MAXF)
		a->size = MAXF - (size_t)a->fo;
	a->buf = arena + a->boff;
	switch (flags >> 4) {
	case 1: a->buf = NULL; a->acc |= A_IV; break;
	case 2: a->fo = -1 - (off_t)get(1); a->acc |= A_IV; break;
	case 3: a->bo = -1; a->acc |= A_IV; break;
	case 4: a->size = (size_t)SSIZE_MAX + 1 + get(1); a->acc |= A_IV; break;
	case 5: a->fo = INT64_MAX - (off_t)get(1); a->size = 256 + get(1); a->acc |= A_IV; break;
	default: break;
	}
	if (a->fh == NULL)
		a->acc |= A_IV;
	/* registered ranges: a target starting in one must end inside it (the
	 * contract); a target in no range whose buf is in one is outside that
	 * buf's range (cuFile's rule; row B22 of docs/errors.md) */
	if (a->buf && !(a->acc & A_IV)) {
		size_t t = a->boff + (size_t)a->bo;
		const struct reg *rt = reg_containing(t), *rb = reg_containing(a->boff);
		if (rt && t + a->size > rt->off + rt->size)
			a->acc |= A_IMR;
		if (!rt && rb && (t < rb->off || t + a->size > rb->off + rb->size))
			a->acc |= A_IMR;
	}
	int fdi = hsel_fd(a->hsel);
	if (fdi == 1 && a->opcode == 1)
		a->ebadf = true;
	if (fdi == 2 && a->opcode == 0)
		a->ebadf = true;
	if (!open_)
		a->acc = A_NOTINIT;
	if (a->opcode == 0) {
		size_t n = (size_t)a->fo < fsize ? fsize - (size_t)a->fo : 0;
		a->want = (ssize_t)(n < a->size ? n : a->size);
	} else {
		a->want = (ssize_t)a->size;
	}
}

/* apply a successful operation to the model; returns the expected bytes
 * of a read (malloc'ed) */
static uint8_t *apply(const struct ioargs *a)
{
	size_t t = a->boff + (size_t)a->bo;
	if (a->opcode == 1) {
		if (!a->size) /* a write of 0 bytes does not extend the file */
			return NULL;
		memcpy(fmodel + a->fo, shadow + t, a->size);
		if ((size_t)a->fo + a->size > fsize)
			fsize = (size_t)a->fo + a->size;
		return NULL;
	}
	uint8_t *e = malloc(a->want ? (size_t)a->want : 1);
	memcpy(e, fmodel + a->fo, (size_t)a->want);
	memcpy(shadow + t, e, (size_t)a->want);
	return e;
}

static void check_result(const char *what, ssize_t got, unsigned acc, ssize_t want, const uint8_t *expect,
			 size_t t)
{
	if (acc) {
		if (got >= 0 || !(bit_of(got) & acc))
			fail(what, got, acc, want);
		return;
	}
	if (got != want)
		fail(what, got, 0, want);
	if (expect && memcmp(arena + t, expect, (size_t)want))
		fail("read returned wrong bytes", got, 0, want);
}

/* ---- draining ---- */
static void drain(void)
{
	if (!npend)
		return;
	if (nbatch_pend) {
		opends_io_events_t ev[MAXPEND];
		unsigned got = 0;
		while (got < nbatch_pend) {
			unsigned nr = MAXPEND;
			opends_error_t e = opends_batch_get_status(batch, nbatch_pend - got, &nr, ev, NULL);
			if (e.err)
				fail("batch_get_status", e.err, 0, 0);
			for (unsigned k = 0; k < nr; k++) {
				struct pend *p = ev[k].cookie;
				if (p < pend || p >= pend + npend || p->kind != P_BATCH || p->done)
					fail("batch event cookie", 0, 0, 0);
				if ((ev[k].ret < 0) != (ev[k].status == OPENDS_FAILED))
					fail("batch event status", ev[k].status, 0, ev[k].ret);
				p->done = true;
				check_result("batch entry", ev[k].ret, p->acc, p->want, p->expect, p->moff);
			}
			got += nr;
		}
		nbatch_pend = 0;
	}
	if (have_stream)
		opends_stream_synchronize(stream);
	opends_stream_synchronize(NULL);
	for (unsigned i = 0; i < npend; i++) {
		struct pend *p = &pend[i];
		if (p->kind == P_ASYNC) {
			ssize_t r = opends_async_await(&p->fut);
			check_result("async await", r, p->acc, p->want, p->expect, p->moff);
			if (opends_async_poll(&p->fut) != 1 || opends_async_await(&p->fut) != r)
				fail("async await again", 0, 0, 0);
		} else if (p->kind == P_STREAM) {
			check_result("stream result", p->s_res, p->acc, p->want, p->expect, p->moff);
		}
		free(p->expect);
	}
	npend = 0;
	fsize_sure = fsize;
	if (memcmp(arena, shadow, ARENA)) {
		size_t k = 0;
		while (arena[k] == shadow[k])
			k++;
		fail("memory outside the targets was written", (long)k, 0, 0);
	}
}

/* drain when a new operation conflicts with one in flight */
static void maybe_drain(const struct ioargs *a)
{
	if (a->acc) /* refused: touches nothing */
		return;
	size_t t = a->boff + (size_t)a->bo;
	/* a read reaching past EOF depends on every write that may extend
	 * the file, wherever it is */
	bool eof_sens = a->opcode == 0 && (size_t)a->fo + a->size > fsize_sure;
	for (unsigned i = 0; i < npend; i++) {
		const struct pend *p = &pend[i];
		bool file = a->fo < p->fo + (off_t)p->size && p->fo < a->fo + (off_t)a->size;
		file = file || (eof_sens && p->opcode == 1) || (p->eof_sens && a->opcode == 1);
		bool mem = t < p->moff + p->size && p->moff < t + a->size;
		if ((file && (a->opcode == 1 || p->opcode == 1)) || (mem && (a->opcode == 0 || p->opcode == 0)) ||
		    npend == MAXPEND) {
			drain();
			return;
		}
	}
}

/* ---- steps ---- */
static void step_sync(void)
{
	struct ioargs a;
	gen_io(&a);
	show("sync", &a);
	if (!a.acc && a.size)
		maybe_drain(&a);
	unsigned acc = a.acc | (a.ebadf ? A_EBADF : 0);
	ssize_t r = a.opcode ? opends_sync_write(a.fh, a.buf, a.size, a.fo, a.bo)
			     : opends_sync_read(a.fh, a.buf, a.size, a.fo, a.bo);
	uint8_t *e = !acc ? apply(&a) : NULL;
	if (!acc && a.opcode && a.size && (size_t)a.fo + a.size > fsize_sure)
		fsize_sure = (size_t)a.fo + a.size;
	check_result(a.opcode ? "sync_write" : "sync_read", r, acc, a.want, e, a.boff + (size_t)a.bo);
	free(e);
}

static struct pend *new_pend(enum pkind k, const struct ioargs *a)
{
	struct pend *p = &pend[npend];
	memset(p, 0, sizeof(*p));
	p->kind = k;
	p->opcode = a->opcode;
	p->moff = a->boff + (size_t)a->bo;
	p->size = a->size;
	p->fo = a->fo;
	p->want = a->want;
	p->eof_sens = a->opcode == 0 && (size_t)a->fo + a->size > fsize_sure;
	if (a->acc) { /* refused when the stream reaches it: touches nothing */
		p->moff = p->size = 0;
		p->fo = 0;
		p->eof_sens = false;
	}
	return p;
}

static void step_async(void)
{
	struct ioargs a;
	gen_io(&a);
	show("async", &a);
	if (!a.acc)
		maybe_drain(&a);
	if (npend == MAXPEND)
		drain();
	struct pend *p = new_pend(P_ASYNC, &a);
	opends_error_t e = a.opcode ? opends_async_write(a.fh, a.buf, a.size, a.fo, a.bo, &p->fut)
				    : opends_async_read(a.fh, a.buf, a.size, a.fo, a.bo, &p->fut);
	if (a.acc) {
		if (e.err == OPENDS_SUCCESS || !(bit_of(e.err) & a.acc))
			fail("async submit", e.err, a.acc, 0);
		return;
	}
	if (e.err)
		fail("async submit", e.err, 0, 0);
	p->acc = a.ebadf ? A_EBADF : 0;
	if (!p->acc)
		p->expect = apply(&a);
	npend++;
}

static void step_stream(void)
{
	struct ioargs a;
	gen_io(&a);
	show("stream", &a);
	if (!open_ || (a.acc & A_NOTINIT)) {
		size_t sz = a.size;
		off_t fo = a.fo, bo = a.bo;
		ssize_t res;
		opends_error_t e = opends_stream_read(a.fh, arena, &sz, &fo, &bo, &res, NULL);
		if (e.err != OPENDS_DRIVER_NOT_INITIALIZED)
			fail("stream while closed", e.err, 0, 0);
		return;
	}
	if (!a.acc)
		maybe_drain(&a);
	if (npend == MAXPEND)
		drain();
	bool use_created = have_stream && get(1) % 2;
	struct pend *p = new_pend(P_STREAM, &a);
	p->s_size = a.size;
	p->s_fo = a.fo;
	p->s_bo = a.bo;
	p->s_res = 777777;
	/* at submit only a NULL buf/handle or an unregistered handle fail */
	unsigned submit_acc = (a.buf == NULL || a.fh == NULL ? A_IV : 0) | (a.acc & A_HNR);
	opends_stream_t s = use_created ? stream : NULL;
	opends_error_t e = a.opcode ? opends_stream_write(a.fh, a.buf, &p->s_size, &p->s_fo, &p->s_bo, &p->s_res, s)
				    : opends_stream_read(a.fh, a.buf, &p->s_size, &p->s_fo, &p->s_bo, &p->s_res, s);
	if (e.err) {
		if (!(bit_of(e.err) & submit_acc))
			fail("stream submit", e.err, submit_acc, 0);
		return;
	}
	if (submit_acc & ~A_IV & A_HNR)
		fail("stream submit accepted an unregistered handle", 0, submit_acc, 0);
	p->acc = a.acc | (a.ebadf ? A_EBADF : 0);
	if (!p->acc)
		p->expect = apply(&a);
	npend++;
}

static void step_batch(void)
{
	if (!open_) {
		opends_batch_t b;
		if (opends_batch_setup(&b, 4).err != OPENDS_DRIVER_NOT_INITIALIZED)
			fail("batch_setup while closed", 0, 0, 0);
		return;
	}
	if (!have_batch) {
		opends_error_t e = opends_batch_setup(&batch, 4);
		if (e.err)
			fail("batch_setup", e.err, 0, 0);
		have_batch = true;
	}
	unsigned nr = 1 + (unsigned)(get(1) % 5);
	struct ioargs a[5];
	opends_io_params_t prm[5];
	unsigned acc = 0;
	for (unsigned i = 0; i < nr; i++) {
		gen_io(&a[i]);
		show("batch entry", &a[i]);
		acc |= a[i].acc;
	}
	/* entries of one submit must not conflict with each other either */
	for (unsigned i = 0; i < nr; i++)
		maybe_drain(&a[i]);
	for (unsigned i = 0; i < nr && !acc; i++)
		for (unsigned j = 0; j < i; j++) {
			size_t ti = a[i].boff + (size_t)a[i].bo, tj = a[j].boff + (size_t)a[j].bo;
			bool file = a[i].fo < a[j].fo + (off_t)a[j].size && a[j].fo < a[i].fo + (off_t)a[i].size;
			bool eof_i = !a[i].opcode && (size_t)a[i].fo + a[i].size > fsize_sure;
			bool eof_j = !a[j].opcode && (size_t)a[j].fo + a[j].size > fsize_sure;
			file = file || (eof_i && a[j].opcode) || (eof_j && a[i].opcode);
			bool mem = ti < tj + a[j].size && tj < ti + a[i].size;
			if ((file && (a[i].opcode || a[j].opcode)) || (mem && (!a[i].opcode || !a[j].opcode)))
				a[i].size = a[i].want = 0; /* make it harmless */
		}
	if (npend + nr > MAXPEND)
		drain();
	unsigned full = nbatch_pend + nr > 4 ? A_FULL : 0;
	for (unsigned i = 0; i < nr; i++) {
		memset(&prm[i], 0, sizeof(prm[i]));
		prm[i].mode = OPENDS_BATCH;
		prm[i].fh = a[i].fh;
		prm[i].opcode = (opends_opcode_t)a[i].opcode;
		prm[i].u.batch.buf_base = a[i].buf;
		prm[i].u.batch.size = a[i].size;
		prm[i].u.batch.file_offset = a[i].fo;
		prm[i].u.batch.buf_offset = a[i].bo;
		prm[i].cookie = &pend[npend + i];
	}
	opends_error_t e = opends_batch_submit(batch, nr, prm, 0);
	if (acc || full) {
		if (e.err == OPENDS_SUCCESS || !(bit_of(e.err) & (acc | full)))
			fail("batch submit", e.err, acc | full, 0);
		return;
	}
	if (e.err)
		fail("batch submit", e.err, 0, 0);
	for (unsigned i = 0; i < nr; i++) {
		if (a[i].opcode == 0) /* a read's expected bytes come from the model now */
			a[i].want = (ssize_t)((size_t)a[i].fo < fsize
						      ? (fsize - (size_t)a[i].fo < a[i].size ? fsize - (size_t)a[i].fo
											     : a[i].size)
						      : 0);
		struct pend *p = new_pend(P_BATCH, &a[i]);
		p->acc = a[i].ebadf ? A_EBADF : 0;
		if (!p->acc)
			p->expect = apply(&a[i]);
		npend++;
	}
	nbatch_pend += nr;
}

static void step_handle(bool reg)
{
	int slot = (int)(get(1) % NFD);
	if (fds[slot] < 0)
		return;
	if (reg) {
		opends_handle_t h;
		opends_error_t e = opends_handle_register(&h, fds[slot]);
		int want = !open_ ? OPENDS_DRIVER_NOT_INITIALIZED : hreg[slot] ? OPENDS_HANDLE_ALREADY_REGISTERED : 0;
		if ((int)e.err != want)
			fail("handle_register", e.err, 0, want);
		if (!want) {
			hreg[slot] = true;
			htok[slot] = h;
		}
		return;
	}
	drain();
	int sel = (int)(get(1) % 7);
	unsigned acc = 0;
	opends_handle_t h = handle_of(sel < NFD ? slot : sel, &acc);
	if (!open_)
		acc = A_NOTINIT;
	opends_error_t e = opends_handle_deregister(h);
	if (acc) {
		if (!(bit_of(e.err) & acc))
			fail("handle_deregister", e.err, acc, 0);
		return;
	}
	if (e.err)
		fail("handle_deregister", e.err, 0, 0);
	hreg[slot] = false;
	if (nstale < 8)
		stale[nstale++] = h;
}

static void step_buf(bool reg)
{
	size_t off = (size_t)(get(3) % ARENA), size = (size_t)get(2) * (get(1) % 2 ? 1 : 16);
	if (off + size > ARENA)
		size = ARENA - off;
	/* a stream operation checks registrations when the stream reaches it:
	 * settle what is queued before registrations change */
	drain();
	if (reg) {
		int flags = get(1) % 16 == 0 ? 1 : 0;
		opends_error_t e = opends_buf_register(arena + off, size, flags);
		int want = 0;
		bool overlap = false;
		for (unsigned i = 0; i < nregs; i++)
			if (off < regs[i].off + regs[i].size && regs[i].off < off + size)
				overlap = true;
		if (!open_)
			want = OPENDS_DRIVER_NOT_INITIALIZED;
		else if (size == 0 || flags)
			want = OPENDS_INVALID_VALUE;
		else if (overlap)
			want = OPENDS_MEMORY_ALREADY_REGISTERED;
		if ((int)e.err != want)
			fail("buf_register", e.err, 0, want);
		if (!want && nregs < MAXREG)
			regs[nregs++] = (struct reg){ off, size };
		else if (!want) /* the model is full: undo */
			opends_buf_deregister(arena + off);
		return;
	}
	if (nregs && get(1) % 4)
		off = regs[get(1) % nregs].off;
	int want = !open_ ? OPENDS_DRIVER_NOT_INITIALIZED : OPENDS_MEMORY_NOT_REGISTERED;
	unsigned i;
	for (i = 0; open_ && i < nregs; i++)
		if (regs[i].off == off) {
			want = 0;
			break;
		}
	opends_error_t e = opends_buf_deregister(arena + off);
	if ((int)e.err != want)
		fail("buf_deregister", e.err, 0, want);
	if (!want)
		regs[i] = regs[--nregs];
}

static void forget_session(void)
{
	memset(hreg, 0, sizeof(hreg));
	nstale = 0;
	nregs = 0;
	have_batch = have_stream = false;
	nbatch_pend = 0;
}

static void step_cycle(void)
{
	drain();
	if (open_) {
		if (opends_driver_close().err)
			fail("driver_close", 0, 0, 0);
		open_ = false;
		forget_session();
		if (opends_driver_close().err != OPENDS_DRIVER_NOT_INITIALIZED)
			fail("second driver_close", 0, 0, 0);
	} else {
		if (opends_driver_open().err)
			fail("driver_open", 0, 0, 0);
		open_ = true;
		if (opends_driver_open().err != OPENDS_DRIVER_ALREADY_OPEN)
			fail("second driver_open", 0, 0, 0);
	}
}

static void step_misc(void)
{
	opends_async_future_t f;
	memset(&f, 0, sizeof(f));
	unsigned nr = 1;
	opends_io_events_t ev;
	struct timespec ts = { -1, 0 };
	switch (get(1) % 8) {
	case 0:
		if (opends_async_await(&f) != -OPENDS_INVALID_VALUE || opends_async_poll(NULL) != -OPENDS_INVALID_VALUE)
			fail("await/poll of a never-submitted future", 0, 0, 0);
		break;
	case 1:
		if (open_ && opends_batch_get_status(have_batch ? batch : NULL, 0, NULL, &ev, NULL).err !=
				     OPENDS_INVALID_VALUE)
			fail("get_status nr NULL", 0, 0, 0);
		break;
	case 2:
		if (open_ && have_batch && opends_batch_get_status(batch, 0, &nr, &ev, &ts).err != OPENDS_INVALID_VALUE)
			fail("get_status negative timeout", 0, 0, 0);
		break;
	case 3:
		if (open_ && !have_stream) {
			if (opends_stream_create(&stream).err)
				fail("stream_create", 0, 0, 0);
			have_stream = true;
		}
		break;
	case 4:
		if (open_ && have_stream) {
			drain();
			if (opends_stream_destroy(stream).err)
				fail("stream_destroy", 0, 0, 0);
			have_stream = false;
			if (opends_stream_destroy(stream).err != OPENDS_INVALID_VALUE)
				fail("stream_destroy twice", 0, 0, 0);
		}
		break;
	case 5:
		if (open_ && have_batch) {
			drain();
			if (opends_batch_destroy(batch).err)
				fail("batch_destroy", 0, 0, 0);
			have_batch = false;
			if (opends_batch_destroy(batch).err != OPENDS_INVALID_VALUE)
				fail("batch_destroy twice", 0, 0, 0);
		}
		break;
	case 6:
		if (open_ && opends_stream_register(NULL, 0x100).err != OPENDS_INVALID_VALUE)
			fail("stream_register unknown flag", 0, 0, 0);
		break;
	default:
		drain();
		break;
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	trace = getenv("FUZZ_TRACE") != NULL;
	setenv("OPENDS_BACKEND", "ref", 1);
	setenv("OPENDS_ACCEL", "host", 1);
	setenv("OPENDS_IO_THREADS", "2", 1);
	const char *t = getenv("TMPDIR");
	snprintf(path, sizeof(path), "%s/opends-fuzz-api-%d", t && *t ? t : "/tmp", (int)getpid());
	fds[0] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	fds[1] = open(path, O_RDONLY);
	fds[2] = open(path, O_WRONLY);
	fds[3] = open(path, O_RDWR | O_DIRECT);
	unlink(path);
	if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0)
		abort();
	if (posix_memalign((void **)&arena, 4096, ARENA) || !(shadow = malloc(ARENA)))
		abort();
	if (opends_driver_open().err)
		abort();
	open_ = true;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	in = data;
	inlen = size;
	/* a clean start: an empty file, zeroed memory, nothing registered */
	if (!open_) {
		if (opends_driver_open().err)
			abort();
		open_ = true;
	}
	if (ftruncate(fds[0], 0))
		abort();
	fsize = fsize_sure = 0;
	memset(fmodel, 0, sizeof(fmodel));
	memset(arena, 0, ARENA);
	memset(shadow, 0, ARENA);
	for (unsigned steps = 0; inlen && steps < 200; steps++) {
		switch (get(1) % 12) {
		case 0: step_handle(true); break;
		case 1: step_handle(false); break;
		case 2: step_buf(true); break;
		case 3: step_buf(false); break;
		case 4: case 5: step_sync(); break;
		case 6: step_async(); break;
		case 7: step_batch(); break;
		case 8: step_stream(); break;
		case 9: step_misc(); break;
		case 10: if (get(1) % 8 == 0) step_cycle(); else drain(); break;
		default: step_sync(); break;
		}
	}
	drain();
	/* release everything for the next input */
	if (open_) {
		for (int i = 0; i < NFD; i++)
			if (hreg[i] && opends_handle_deregister(htok[i]).err)
				fail("final handle_deregister", 0, 0, 0);
		for (unsigned i = 0; i < nregs; i++)
			if (opends_buf_deregister(arena + regs[i].off).err)
				fail("final buf_deregister", 0, 0, 0);
		if (have_batch)
			opends_batch_destroy(batch);
		if (have_stream)
			opends_stream_destroy(stream);
	}
	forget_session();
	return 0;
}
