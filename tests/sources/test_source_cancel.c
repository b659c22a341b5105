/*
 * test_source_cancel: opends_batch_cancel on source handles, with a source
 * whose completions the test holds and releases.
 *
 * The source (asynchronous form, its own domain, 2 requests in flight at
 * most) keeps every piece it is given until the test lets it go; later
 * pieces complete at once. A batch of reads (then one of writes) is
 * submitted: entry 0 is three 4 KiB pieces, entries 1..7 one piece each.
 * Once the source holds two pieces (entry 0's first two), another thread
 * calls opends_batch_cancel; when that thread sleeps inside cancel (the
 * flags are set), the held pieces are released and cancel returns.
 *
 * Checked on every backend and memory kind: an entry is OPENDS_CANCELED
 * exactly when the source never saw any of its bytes, and then its memory
 * (reads) or the object (writes) is untouched and ret is -ECANCELED; an
 * entry that reached the source is OPENDS_COMPLETE with its full size and
 * exact bytes (cancel never cuts a started request short); each entry is
 * delivered once; the batch works again afterwards; release runs once.
 * Where requests are direct (host memory, not ref: the request is one run
 * of pieces started at submit), the outcome is exact: entry 0 had started,
 * so it completes (its third piece still goes to the source), and the
 * seven still waiting behind the caps are cancelled without reaching it:
 * the source sees 3 pieces. Elsewhere (ref runs each request whole on a
 * worker; device memory is staged) the engine decides what had started,
 * and the counts are printed.
 */
#include "../common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#define OBJ ((size_t)64 * 1024)
#define N 8
#define PIECE ((size_t)4096)

struct held {
	bool rd;
	void *buf;
	size_t len;
	uint64_t off;
	opends_source_done_t done;
	void *token;
};

static struct {
	pthread_mutex_t lock;
	uint8_t data[OBJ];
	struct held h[64];
	unsigned nheld;
	bool hold; /* keep pieces until released */
	uint64_t seen[64]; /* offsets of every piece started */
	unsigned nseen;
	atomic_int released;
} src = { .lock = PTHREAD_MUTEX_INITIALIZER };

static ssize_t move(bool rd, void *buf, size_t len, uint64_t off)
{
	pthread_mutex_lock(&src.lock);
	size_t n = off >= OBJ ? 0 : t_min(len, OBJ - (size_t)off);
	if (rd)
		memcpy(buf, src.data + off, n);
	else
		memcpy(src.data + off, buf, n);
	pthread_mutex_unlock(&src.lock);
	return rd ? (ssize_t)n : (ssize_t)len;
}

static int start(bool rd, void *buf, size_t len, uint64_t off, opends_source_done_t done, void *token)
{
	pthread_mutex_lock(&src.lock);
	if (src.nseen < 64)
		src.seen[src.nseen++] = off;
	if (src.hold && src.nheld < 64) {
		src.h[src.nheld++] = (struct held){ rd, buf, len, off, done, token };
		pthread_mutex_unlock(&src.lock);
		return 0;
	}
	pthread_mutex_unlock(&src.lock);
	done(token, move(rd, buf, len, off));
	return 0;
}

static int s_read_async(void *s, void *buf, size_t len, uint64_t off, opends_source_done_t done, void *token)
{
	(void)s;
	return start(true, buf, len, off, done, token);
}
static int s_write_async(void *s, const void *buf, size_t len, uint64_t off, opends_source_done_t done, void *token)
{
	(void)s;
	return start(false, (void *)buf, len, off, done, token);
}
static void s_release(void *s)
{
	(void)s;
	atomic_fetch_add(&src.released, 1);
}

static const opends_source_ops_t ops = {
	.struct_size = sizeof(opends_source_ops_t),
	.name = "held://obj",
	.read_async = s_read_async,
	.write_async = s_write_async,
	.release = s_release,
};

/* Release every held piece (from this thread), stop holding. */
static void let_go(void)
{
	pthread_mutex_lock(&src.lock);
	src.hold = false;
	unsigned n = src.nheld;
	struct held h[64];
	memcpy(h, src.h, n * sizeof(h[0]));
	src.nheld = 0;
	pthread_mutex_unlock(&src.lock);
	for (unsigned i = 0; i < n; i++)
		h[i].done(h[i].token, move(h[i].rd, h[i].buf, h[i].len, h[i].off));
}

static unsigned nheld(void)
{
	pthread_mutex_lock(&src.lock);
	unsigned n = src.nheld;
	pthread_mutex_unlock(&src.lock);
	return n;
}

/* did the source see a piece inside [off, off + len)? */
static bool seen(uint64_t off, size_t len)
{
	pthread_mutex_lock(&src.lock);
	bool r = false;
	for (unsigned i = 0; i < src.nseen; i++)
		r |= src.seen[i] >= off && src.seen[i] < off + len;
	pthread_mutex_unlock(&src.lock);
	return r;
}

static opends_batch_t the_batch;
static atomic_int cancel_tid;
static atomic_bool cancel_done;

static void *canceller(void *arg)
{
	(void)arg;
	atomic_store(&cancel_tid, (int)syscall(SYS_gettid));
	OK(opends_batch_cancel(the_batch));
	atomic_store(&cancel_done, true);
	return NULL;
}

/* The thread is asleep (state S) in three looks 20 ms apart. */
static bool asleep(int tid)
{
	for (int k = 0; k < 3; k++) {
		char p[64], b[256];
		snprintf(p, sizeof p, "/proc/self/task/%d/stat", tid);
		FILE *f = fopen(p, "r");
		if (!f)
			return false;
		size_t n = fread(b, 1, sizeof b - 1, f);
		fclose(f);
		b[n] = 0;
		const char *rp = strrchr(b, ')');
		if (!rp || rp[1] != ' ' || rp[2] != 'S')
			return false;
		usleep(20000);
	}
	return true;
}

static void run(bool rd, bool direct)
{
	t_phase = rd ? "cancel reads" : "cancel writes";
	for (size_t i = 0; i < OBJ; i++)
		src.data[i] = hashpat(i);
	uint8_t before[OBJ];
	memcpy(before, src.data, OBJ);
	src.nseen = 0;
	src.hold = true;
	opends_source_desc_t d;
	memset(&d, 0, sizeof d);
	d.struct_size = sizeof d;
	d.ops = &ops;
	d.size = OBJ;
	d.io_unit = PIECE;
	d.max_inflight = 2;
	opends_handle_t fh = NULL;
	OK(opends_handle_register_source(&fh, &d));

	/* entry 0: 3 pieces at 0; entry i: one piece at 16 KiB + 4 KiB i */
	size_t len[N];
	uint64_t off[N];
	uint8_t *buf = t_xmalloc(OBJ), *wsrc = t_xmalloc(OBJ);
	memset(buf, T_CANARY, OBJ);
	for (size_t i = 0; i < OBJ; i++)
		wsrc[i] = (uint8_t)~hashpat(i);
	opends_io_params_t p[N];
	for (unsigned i = 0; i < N; i++) {
		len[i] = i ? PIECE : 3 * PIECE;
		off[i] = i ? 16 * T_KiB + PIECE * i : 0;
		p[i] = t_batch_entry(fh, rd ? OPENDS_READ : OPENDS_WRITE, rd ? buf : wsrc, len[i], (off_t)off[i],
				     (off_t)off[i], (void *)(uintptr_t)(i + 1));
	}
	OK(opends_batch_setup(&the_batch, N));
	OK(opends_batch_submit(the_batch, N, p, 0));
	double t0 = t_now();
	while (nheld() < 2)
		CHECKF(t_now() - t0 < 10, "the source holds %u pieces after 10 s, expected 2", nheld());
	usleep(20000);
	CHECKF(nheld() == 2, "the source holds %u pieces under a cap of 2", nheld());

	atomic_store(&cancel_tid, 0);
	atomic_store(&cancel_done, false);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, canceller, NULL) == 0);
	while (!atomic_load(&cancel_tid))
		usleep(1000);
	t0 = t_now();
	while (!asleep(atomic_load(&cancel_tid)))
		CHECKF(t_now() - t0 < 10, "the cancelling thread never waits");
	CHECKF(!atomic_load(&cancel_done), "opends_batch_cancel returned while 2 pieces were held by the source");
	let_go();
	CHECK(pthread_join(th, NULL) == 0);

	opends_io_events_t ev[N];
	unsigned nr = N;
	struct timespec ts = { 0, 0 };
	/* cancel returned once nothing of the batch runs: all N are ready */
	OK(opends_batch_get_status(the_batch, 0, &nr, ev, &ts));
	CHECKF(nr == N, "%u events ready after cancel returned, expected %d", nr, N);
	bool got[N] = { false };
	unsigned ncancel = 0;
	for (unsigned k = 0; k < nr; k++) {
		unsigned i = (unsigned)(uintptr_t)ev[k].cookie - 1;
		CHECKF(i < N && !got[i], "event %u: cookie %p unknown or delivered twice", k, ev[k].cookie);
		got[i] = true;
		bool reached = seen(off[i], len[i]);
		if (ev[k].status == OPENDS_CANCELED) {
			ncancel++;
			CHECKF(!reached, "entry %u is CANCELED, but the source saw its bytes", i);
			CHECKF(ev[k].ret == -ECANCELED, "cancelled entry %u: ret %zd, expected -ECANCELED", i, ev[k].ret);
			size_t at;
			if (rd)
				CHECKF(!t_first_not(buf + off[i], len[i], T_CANARY, &at),
				       "cancelled read %u wrote its buffer at +%zu", i, at);
			else
				CHECKF(!t_first_diff(src.data + off[i], before + off[i], len[i], &at),
				       "cancelled write %u changed the object at +%zu", i, at);
		} else {
			CHECKF(ev[k].status == OPENDS_COMPLETE, "entry %u: status 0x%x, ret %zd (%s)", i, ev[k].status,
			       ev[k].ret, t_errname(ev[k].ret));
			CHECKF(reached, "entry %u is COMPLETE, but the source never saw it", i);
			CHECKF(ev[k].ret == (ssize_t)len[i], "entry %u: ret %zd, expected %zu (a started request runs "
			       "to its end)", i, ev[k].ret, len[i]);
			if (rd)
				VERIFY(buf + off[i], before + off[i], len[i], "read %u", i);
			else
				VERIFY(src.data + off[i], wsrc + off[i], len[i], "write %u", i);
		}
	}
	printf("%s: %u of %d entries cancelled, the source saw %u pieces\n", t_phase, ncancel, N, src.nseen);
	if (direct) {
		CHECKF(ncancel == N - 1, "direct requests: %u cancelled, expected %d (all but entry 0)", ncancel, N - 1);
		CHECKF(src.nseen == 3, "direct requests: the source saw %u pieces, expected 3 (entry 0's)", src.nseen);
	}

	/* the batch works again after a cancel */
	t_phase = "after cancel";
	memset(buf, T_CANARY, OBJ);
	OK(opends_batch_submit(the_batch, N, p, 0));
	t_batch_collect(the_batch, N, ev, 30);
	for (unsigned k = 0; k < N; k++) {
		unsigned i = (unsigned)(uintptr_t)ev[k].cookie - 1;
		CHECKF(i < N && ev[k].status == OPENDS_COMPLETE && ev[k].ret == (ssize_t)len[i],
		       "after cancel: entry %u status 0x%x ret %zd", i, ev[k].status, ev[k].ret);
		if (rd)
			VERIFY(buf + off[i], src.data + off[i], len[i], "read %u after cancel", i);
		else
			VERIFY(src.data + off[i], wsrc + off[i], len[i], "write %u after cancel", i);
	}
	/* a cancel with nothing in flight returns at once */
	OK(opends_batch_cancel(the_batch));
	OK(opends_batch_destroy(the_batch));
	int r0 = atomic_load(&src.released);
	OK(opends_handle_deregister(fh));
	CHECKF(atomic_load(&src.released) == r0 + 1, "release ran %d times at deregistration",
	       atomic_load(&src.released) - r0);
	free(buf);
	free(wsrc);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(120);
	t_driver_open();
	const char *be = opends_driver_backend(), *acc = getenv("OPENDS_ACCEL");
	bool direct = strcmp(be, "ref") != 0 && (!acc || strcmp(acc, "hostdev") != 0);
	run(true, direct);
	run(false, direct);
	OK(opends_driver_close());
	printf("OK: batch cancel on a source (%s, %s requests)\n", be, direct ? "direct" : "engine");
	return 0;
}
