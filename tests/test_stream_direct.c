/*
 * test_stream_direct: a read on an idle stream the library made runs
 * direct (src/core/stream_accel.c, queue_direct): reached at the call, its
 * pieces started by the caller, only its waits and copies on the stream,
 * no counter and no dispatcher; its staging is held until the stream is
 * known to be past the copies. Run on hostdev (accelerator streams). This
 * program links the library's objects: it reads the count of direct
 * operations (OPENDS_STREAM_STATS) and asks the layer whether a stream is
 * idle. Each case in a process of its own:
 *  - exact: reads of one piece, several, past EOF (the bytes past it left
 *    alone), each synchronized: each runs direct, byte-exact;
 *  - busy: a read queued right behind a 64 MiB one on the same stream does
 *    not (the stream is not idle), both exact; after a sync, direct again;
 *  - release_sync / release_idle: with OPENDS_MAX_PINNED=32m (the stream
 *    pool may take 16 MiB, the staging of one 9 MiB read), 100 reads on
 *    one stream all run direct: the staging an earlier read held came back
 *    at the sync, or at the next read's idle query;
 *  - destroy / close: a read's staging held on a stream that is destroyed,
 *    or still there at close, comes back (the next read runs direct; the
 *    close returns; ASan sees no leak);
 *  - reclaim: one read on each of 20 streams, none synchronized or reused:
 *    a read that finds the pool out of budget first takes back the staging
 *    held on streams idle by then, so each runs direct;
 *  - oldest: one 100 KiB read on each of 100 streams, none synchronized:
 *    the pool makes one block of 32 buffers, then takes back what the
 *    oldest idle streams hold instead of pinning more;
 *  - off: OPENDS_STREAM_DIRECT=0: none of exact's reads runs direct, each exact;
 *  - entries: 300 streams, each destroyed with a read unsynchronized: the
 *    library knows none of them after its destroy (not until the close).
 */
#include "common.h"

#include "stream.h"

#define SENT ((ssize_t)-12345)

static char path[PATH_MAX];
static uint8_t *oracle;
static const size_t FSIZE = 70 * T_MiB + 123;
/* with OPENDS_MAX_PINNED=32m the stream pool may take 16 MiB: the staging
 * of one read of RSIZE (three pieces, 12 MiB: a class of 16), not two (the
 * engine takes 2 MiB of the budget besides) */
#define RSIZE (9 * T_MiB + 1)

/* the file, made again if a failed case's exit took the directory */
static void need_file(void)
{
	if (access(path, R_OK) == 0)
		return;
	mkdir(t_tmpdir(), 0700);
	free(oracle);
	close(t_hot_file(path, FSIZE, hashpat, &oracle));
}

static unsigned long long direct_ops(void)
{
	return atomic_load(&ods_sstats[SST_DIRECT]);
}

/* a staging budget of 32 MiB, 2 MiB of it the engine's (see RSIZE) */
static void small_budget(void)
{
	setenv("OPENDS_MAX_PINNED", "32m", 1);
	setenv("OPENDS_IO_THREADS", "2", 1);
	setenv("OPENDS_QUEUE_DEPTH", "1", 1);
	setenv("OPENDS_CHUNK_SIZE", "1m", 1);
}

/* until the layer says s is idle (no sync), and the worker's last touch
 * of the read (its reference) is over */
static void wait_idle(opends_stream_t s)
{
	double t0 = t_now();
	while (!ods_drv.accel->streams->stream_idle(0, s) && t_now() - t0 < 30)
		usleep(50);
	usleep(1000);
}

static void teardown(opends_stream_t s, opends_handle_t fh, int fd, void *mem)
{
	OK(opends_stream_destroy(s));
	OK(opends_handle_deregister(fh));
	OK(opends_driver_close());
	close(fd);
	free(mem);
}

static void open_stats(void)
{
	need_file();
	setenv("OPENDS_STREAM_STATS", "1", 1);
	t_driver_open();
}

/* the driver open, the file registered, a stream made */
static void open_one(int *fd, opends_handle_t *fh, opends_stream_t *s)
{
	open_stats();
	*fd = t_open(path, O_RDONLY, false);
	*fh = t_register(*fd);
	OK(opends_stream_create(s));
}


/* one read on s, synchronized, checked byte-exact with what lies past it
 * untouched; returns whether it ran direct */
static bool read_one(opends_handle_t fh, opends_stream_t s, uint8_t *mem, size_t cap, size_t size, off_t foff,
		     off_t boff, bool sync)
{
	memset(mem, T_CANARY, cap);
	unsigned long long d0 = direct_ops();
	ssize_t got = SENT;
	OK(opends_stream_read(fh, mem, &size, &foff, &boff, &got, s));
	bool direct = direct_ops() == d0 + 1;
	if (sync)
		OK(opends_stream_synchronize(s));
	else
		while (__atomic_load_n(&got, __ATOMIC_ACQUIRE) == SENT)
			usleep(100);
	size_t want = t_expect_read(FSIZE, (uint64_t)foff, size);
	if (!sync) /* the result is out; the copy may still be on the stream */
		OK(opends_stream_synchronize(s));
	CHECKF(got == (ssize_t)want, "read of %zu at %lld: got %zd, want %zu", size, (long long)foff, got, want);
	size_t at;
	if (t_first_diff(mem + boff, oracle + foff, want, &at))
		FAILF("read of %zu at %lld: byte %zu differs", size, (long long)foff, at);
	if (t_first_not(mem, (size_t)boff, T_CANARY, &at) ||
	    t_first_not(mem + boff + want, cap - (size_t)boff - want, T_CANARY, &at))
		FAILF("read of %zu at %lld: a byte outside the result was written", size, (long long)foff);
	return direct;
}

/* on: each read runs direct; off (OPENDS_STREAM_DIRECT=0): none does */
static void exact_run(bool on)
{
	if (!on)
		setenv("OPENDS_STREAM_DIRECT", "0", 1);
	int fd;
	opends_handle_t fh;
	opends_stream_t s;
	open_one(&fd, &fh, &s);
	size_t cap = 10 * T_MiB;
	uint8_t *mem = t_xmalloc(cap);
	static const struct {
		size_t size;
		off_t foff, boff;
	} r[] = {
		{ 4096, 0, 0 },
		{ 300 * T_KiB + 1, 12345, 77 },
		{ 4 * T_MiB, 4 * T_MiB, 4096 },
		{ 9 * T_MiB + 5, 1000, 3 },           /* 3 pieces */
		{ 2 * T_MiB, (off_t)FSIZE - 5000, 9 }, /* past EOF */
		{ 4096, (off_t)FSIZE + 10, 0 },        /* wholly past EOF */
	};
	for (unsigned i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		CHECKF(read_one(fh, s, mem, cap, r[i].size, r[i].foff, r[i].boff, true) == on, "read %u: direct is not %d",
		       i, on);
	/* the result is out before the sync: a read waited for by its result */
	CHECK(read_one(fh, s, mem, cap, 300 * T_KiB, 5 * T_MiB, 0, false) == on);
	if (!on)
		CHECKF(direct_ops() == 0, "%llu reads ran direct with OPENDS_STREAM_DIRECT=0", direct_ops());
	teardown(s, fh, fd, mem);
}

static void case_exact(void)
{
	exact_run(true);
}

static void case_off(void)
{
	exact_run(false);
}

static void case_busy(void)
{
	int fd;
	opends_handle_t fh;
	opends_stream_t s;
	open_one(&fd, &fh, &s);
	size_t big = 64 * T_MiB, small = 100 * T_KiB;
	uint8_t *mem = t_xmalloc(big + small);
	memset(mem, T_CANARY, big + small);
	size_t s1 = big, s2 = small;
	off_t f1 = 0, b1 = 0, f2 = 3 * T_MiB + 5, b2 = (off_t)big;
	ssize_t g1 = SENT, g2 = SENT;
	unsigned long long d0 = direct_ops();
	OK(opends_stream_read(fh, mem, &s1, &f1, &b1, &g1, s));
	CHECKF(direct_ops() == d0 + 1, "the read of 64 MiB on an idle stream did not run direct");
	OK(opends_stream_read(fh, mem, &s2, &f2, &b2, &g2, s));
	CHECKF(direct_ops() == d0 + 1, "a read queued behind 64 MiB on the same stream ran direct");
	OK(opends_stream_synchronize(s));
	CHECKF(g1 == (ssize_t)big && g2 == (ssize_t)small, "results %zd %zd", g1, g2);
	VERIFY(mem, oracle, big, "the 64 MiB read");
	VERIFY(mem + big, oracle + f2, small, "the read behind it");
	/* idle again */
	CHECK(read_one(fh, s, mem, big, small, 777, 1, true));
	teardown(s, fh, fd, mem);
}

/* 100 reads of 9 MiB on one stream with a 32 MiB staging budget: each
 * one's staging must be back before the next */
static void release_run(bool sync)
{
	small_budget();
	int fd;
	opends_handle_t fh;
	opends_stream_t s;
	open_one(&fd, &fh, &s);
	size_t cap = RSIZE + 4096;
	uint8_t *mem = t_xmalloc(cap);
	unsigned direct = 0;
	for (unsigned i = 0; i < 100; i++) {
		size_t size = RSIZE;
		off_t foff = (off_t)(i * 611 * T_KiB % (60 * T_MiB)), boff = (off_t)(i % 4096);
		memset(mem, T_CANARY, cap);
		ssize_t got = SENT;
		unsigned long long d0 = direct_ops();
		OK(opends_stream_read(fh, mem, &size, &foff, &boff, &got, s));
		if (direct_ops() == d0 + 1)
			direct++;
		else
			printf("read %u did not run direct\n", i);
		if (sync) {
			OK(opends_stream_synchronize(s));
		} else {
			/* no sync: wait for the stream to be idle, as the layer
			 * sees it (the next read's query then finds it so) */
			wait_idle(s);
		}
		CHECKF(got == (ssize_t)size, "read %u: got %zd", i, got);
		VERIFY(mem + boff, oracle + foff, size, "read %u", i);
	}
	printf("%s: %u of 100 reads ran direct\n", sync ? "synchronized" : "idle", direct);
	CHECKF(direct == 100, "%u of 100 reads ran direct: an earlier read's staging was not given back", direct);
	teardown(s, fh, fd, mem);
}

static void case_release_sync(void)
{
	release_run(true);
}

static void case_release_idle(void)
{
	release_run(false);
}

/* a read whose result is out, its stream destroyed (or the driver closed)
 * without a sync: the staging it held comes back */
static void case_destroy_close(void)
{
	small_budget();
	size_t cap = RSIZE;
	uint8_t *mem = t_xmalloc(cap);
	off_t last = 0;
	for (int round = 0; round < 2; round++) {
		open_stats();
		int fd = t_open(path, O_RDONLY, false);
		opends_handle_t fh = t_register(fd);
		for (unsigned i = 0; i < 5; i++) {
			opends_stream_t s;
			OK(opends_stream_create(&s));
			size_t size = cap;
			off_t foff = (off_t)(i * T_MiB), boff = 0;
			ssize_t got = SENT;
			unsigned long long d0 = direct_ops();
			OK(opends_stream_read(fh, mem, &size, &foff, &boff, &got, s));
			CHECKF(direct_ops() == d0 + 1, "round %d read %u did not run direct", round, i);
			while (__atomic_load_n(&got, __ATOMIC_ACQUIRE) == SENT)
				usleep(100);
			CHECKF(got == (ssize_t)cap, "got %zd", got);
			if (round == 1 && i == 4) {
				last = foff;
				break; /* left as it is, its copy maybe still queued */
			}
			OK(opends_stream_destroy(s)); /* no sync first: it waits for the stream */
			VERIFY(mem, oracle + foff, cap, "round %d read %u", round, i);
		}
		OK(opends_handle_deregister(fh));
		OK(opends_driver_close()); /* round 1: a stream with a read's staging held */
		if (round == 1)
			VERIFY(mem, oracle + last, cap, "the read left to the close");
		close(fd);
	}
	free(mem);
}

/* One read of sz on each of ns streams, none synchronized or reused until
 * the end (each waited idle before the next); each must run direct.
 * Returns the pinned allocations the staging pool made. */
static unsigned long long one_per_stream(unsigned ns, size_t sz, off_t step, const char *what)
{
	open_stats();
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	opends_stream_t *s = t_xmalloc(ns * sizeof(*s));
	uint8_t *mem = t_xmalloc(sz);
	unsigned direct = 0;
	for (unsigned i = 0; i < ns; i++) {
		OK(opends_stream_create(&s[i]));
		size_t size = sz;
		off_t foff = (off_t)i * step, boff = 0;
		ssize_t got = SENT;
		unsigned long long d0 = direct_ops();
		OK(opends_stream_read(fh, mem, &size, &foff, &boff, &got, s[i]));
		direct += direct_ops() == d0 + 1;
		wait_idle(s[i]);
		CHECKF(got == (ssize_t)sz, "%s read %u: got %zd", what, i, got);
		VERIFY(mem, oracle + foff, sz, "%s read %u", what, i);
	}
	unsigned long long made = atomic_load(&ods_sstats[SST_POOL_NEW]);
	printf("%s: %u of %u reads on streams never synchronized ran direct; %llu pinned allocations\n", what, direct,
	       ns, made);
	CHECKF(direct == ns, "%s: %u of %u reads ran direct: staging held on idle streams was not given back", what,
	       direct, ns);
	for (unsigned i = 0; i < ns; i++)
		OK(opends_stream_destroy(s[i]));
	OK(opends_handle_deregister(fh));
	OK(opends_driver_close());
	close(fd);
	free(mem);
	free(s);
	return made;
}

/* 20 streams, a budget of one read's staging: a read that finds the pool
 * out of budget first gives back what idle streams hold */
static void case_reclaim(void)
{
	small_budget();
	one_per_stream(20, RSIZE, 3 * T_MiB, "reclaim");
}

/* 100 reads of 100 KiB: from the 33rd on, each finds the pool's block of
 * 32 such buffers used up and takes back what the oldest idle stream
 * holds instead of pinning more */
static void case_oldest(void)
{
	unsigned long long made = one_per_stream(100, 100 * T_KiB, 77 * T_KiB, "oldest");
	CHECKF(made == 1, "the staging pool made %llu pinned allocations for 100 reads of 100 KiB on idle streams, "
	       "not 1 (a block of 32 buffers): staging held on idle streams was not taken back", made);
}

/* 300 streams made, each with one read left unsynchronized, destroyed:
 * the destroy lets the stream's entry go (the read's last piece lets it go
 * just after its gate opens, which may come after the destroy's own look:
 * the destroy waits for it), so the library knows no stream afterwards,
 * not one per stream destroyed until the close */
static void case_entries(void)
{
	int fd;
	opends_handle_t fh;
	open_stats();
	fd = t_open(path, O_RDONLY, false);
	fh = t_register(fd);
	size_t sz = 100 * T_KiB;
	uint8_t *mem = t_xmalloc(sz);
	unsigned left = 0;
	for (unsigned i = 0; i < 300; i++) {
		opends_stream_t s;
		OK(opends_stream_create(&s));
		size_t size = sz;
		off_t foff = (off_t)i * 4097, boff = 0;
		ssize_t got = SENT;
		OK(opends_stream_read(fh, mem, &size, &foff, &boff, &got, s));
		OK(opends_stream_destroy(s));
		CHECKF(got == (ssize_t)sz, "read %u: got %zd", i, got);
		VERIFY(mem, oracle + foff, sz, "read %u", i);
		left += ods_astreams_count() != 0;
	}
	CHECKF(left == 0, "after %u of 300 destroys the library still knew the destroyed stream", left);
	OK(opends_handle_deregister(fh));
	OK(opends_driver_close());
	close(fd);
	free(mem);
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(240);
	const char *acc = getenv("OPENDS_ACCEL");
	if (!acc || strcmp(acc, "hostdev")) {
		printf("SKIP: needs OPENDS_ACCEL=hostdev (accelerator streams)\n");
		return 77;
	}
	t_path(path, sizeof(path), "stream_direct.bin");
	int fd = t_hot_file(path, FSIZE, hashpat, &oracle);
	close(fd);
	bool ok = t_case_in_child("exact", case_exact);
	ok &= t_case_in_child("busy", case_busy);
	ok &= t_case_in_child("release_sync", case_release_sync);
	ok &= t_case_in_child("release_idle", case_release_idle);
	ok &= t_case_in_child("destroy_close", case_destroy_close);
	ok &= t_case_in_child("reclaim", case_reclaim);
	ok &= t_case_in_child("off", case_off);
	ok &= t_case_in_child("oldest", case_oldest);
	ok &= t_case_in_child("entries", case_entries);
	free(oracle);
	t_rm_dir();
	CHECKF(ok, "a case failed");
	printf("OK\n");
	return 0;
}
