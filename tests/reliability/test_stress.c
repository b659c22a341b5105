/*
 * test_stress N [THREADS [WATCHDOG_S [hostile]]]: THREADS (16) threads each run N
 * groups of mixed operations (sync, async, batch and stream reads and
 * writes of 1 B..64 KiB at any alignment) on their own 1 MiB region of a
 * shared file, through the shared handle or their own one, from registered
 * or plain memory, and check every read byte-exact against a private model
 * of the region. Meanwhile a churn thread registers and deregisters other
 * buffers and handles and creates and destroys streams and batches. At
 * the end the whole file is compared with the models.
 * Backend and accelerator come from OPENDS_BACKEND / OPENDS_ACCEL (meson
 * runs each backend with host and hostdev, the simulated device memory).
 * The full run of 1M operations: test_stress 62500 (16 x 62500 groups).
 * With a fourth argument "hostile" (issue 15), two more threads run
 * alongside: one truncates a third file to a random length and writes its
 * content back, over and over, while the other reads it through sync and
 * async calls into canary-filled memory (every returned byte is the file's
 * or a zero of the extension, no byte past the returned count is
 * written); and the churn thread forks a child every ~100 ms, which must
 * see a closed driver, open its own (OPENDS_ACCEL=host), read, close and
 * exit within 30 s.
 */
#include "rel.h"

#define REGION (1u << 20)
#define MAXOP (64u * 1024)
#define MAXK 4

static unsigned nthreads = 16;
static unsigned long groups;
static char path[PATH_MAX + 32], path2[PATH_MAX + 32];
static int shared_fd;
static opends_handle_t shared_h;
static atomic_ulong ops_verified, churn_ops, trunc_ops, trunc_reads, forks;
static bool hostile;
static char path3[PATH_MAX + 32];
#define TFILE (1u << 20)
static atomic_bool workers_done;
/* the truncation pair runs at least this many reads (a race of a few
 * microseconds per read needs thousands of tries): 4 x the groups */
static unsigned long min_trunc_reads;

static bool trunc_done(void)
{
	return atomic_load(&workers_done) && atomic_load(&trunc_reads) >= min_trunc_reads;
}

/* Under ASan the busy threads park between two operations while the
 * churn thread forks (rel.h, R_FORK_GATE); the plain build forks amid
 * everything. active: the parkable threads still running. */
static atomic_uint active;

/* a parkable thread leaves */
static void park_leave(void)
{
	atomic_fetch_sub(&active, 1);
}

struct worker {
	unsigned id;
	pthread_t t;
	uint8_t *model; /* the region's expected content */
	uint8_t *mem;   /* MAXK * 2 * MAXOP of I/O memory */
	bool registered;
	opends_handle_t own_h;
	int own_fd;
	uint64_t seed;
};

static uint8_t *abuf(size_t n)
{
	void *p;
	if (posix_memalign(&p, 4096, n))
		R_FAIL("posix_memalign");
	return p;
}

static size_t rand_size(uint64_t *s)
{
	switch (r_rand(s) % 4) {
	case 0:
		return 1 + r_rand(s) % 512;
	case 1:
		return 4096 * (1 + r_rand(s) % 16);
	default:
		return 1 + r_rand(s) % MAXOP;
	}
}

static void *work(void *arg)
{
	struct worker *w = arg;
	off_t base = (off_t)w->id * REGION;
	struct r_op ops[MAXK];
	uint32_t gen = w->id * 1000003u;
	for (unsigned long g = 0; g < groups; g++) {
		r_park_here();
		enum r_family f = (enum r_family)(r_rand(&w->seed) % R_NFAMILIES);
		unsigned k = f == R_SYNC ? 1 : 1 + (unsigned)(r_rand(&w->seed) % MAXK);
		int opcode = r_rand(&w->seed) % 2 ? OPENDS_WRITE : OPENDS_READ;
		opends_handle_t h = r_rand(&w->seed) % 2 ? shared_h : w->own_h;
		/* k disjoint file slots and k disjoint memory slots */
		for (unsigned i = 0; i < k; i++) {
			size_t slot = REGION / k;
			size_t sz = rand_size(&w->seed);
			if (sz > slot)
				sz = slot;
			size_t in = (size_t)(r_rand(&w->seed) % (slot - sz + 1));
			if (r_rand(&w->seed) % 2)
				in &= ~(size_t)4095;
			size_t moff = r_rand(&w->seed) % 2 ? 0 : (size_t)(r_rand(&w->seed) % 4096);
			ops[i] = (struct r_op){ .fh = h, .opcode = opcode, .size = sz,
						.off = base + (off_t)(i * slot + in),
						.buf = w->mem + i * 2 * MAXOP + moff };
			if (opcode == OPENDS_WRITE)
				r_fill(ops[i].buf, sz, ++gen, (uint64_t)ops[i].off);
			else
				memset(ops[i].buf, 0xcc, sz);
		}
		r_run_ops(f, ops, k);
		for (unsigned i = 0; i < k; i++) {
			struct r_op *o = &ops[i];
			if (o->result != (ssize_t)o->size)
				R_FAIL("thread %u group %lu: %s %s of %zu at %lld returned %zd (%s)", w->id, g,
				       r_family_name[f], opcode == OPENDS_READ ? "read" : "write", o->size,
				       (long long)o->off, o->result,
				       o->result < 0 ? opends_op_status_error((int)o->result) : "short");
			uint8_t *m = w->model + (o->off - base);
			if (opcode == OPENDS_WRITE)
				memcpy(m, o->buf, o->size);
			else if (memcmp(m, o->buf, o->size)) {
				size_t at = 0;
				while (m[at] == o->buf[at])
					at++;
				R_FAIL("thread %u group %lu: %s read of %zu at %lld: byte %zu is 0x%02x, expected 0x%02x",
				       w->id, g, r_family_name[f], o->size, (long long)o->off, at, o->buf[at], m[at]);
			}
		}
		atomic_fetch_add_explicit(&ops_verified, k, memory_order_relaxed);
	}
	park_leave();
	return NULL;
}

/* hostile: truncate and restore a third file while reads race with it */
static void *truncator(void *arg)
{
	(void)arg;
	uint64_t seed = 99;
	uint8_t *pat = abuf(TFILE);
	r_fill(pat, TFILE, 3, 0);
	int fd = open(path3, O_RDWR);
	if (fd < 0)
		R_FAIL("truncator: open");
	while (!trunc_done()) {
		r_park_here();
		off_t l = (off_t)(r_rand(&seed) % TFILE);
		if (ftruncate(fd, l) || pwrite(fd, pat + l, TFILE - (size_t)l, l) != (ssize_t)(TFILE - (size_t)l))
			R_FAIL("truncator: %s", strerror(errno));
		atomic_fetch_add(&trunc_ops, 1);
	}
	park_leave();
	close(fd);
	free(pat);
	return NULL;
}

static void *trunc_reader(void *arg)
{
	(void)arg;
	uint64_t seed = 1234;
	uint8_t *mem = abuf(2 * MAXOP + 8192);
	/* a buffered fd and an O_DIRECT one (where the file system allows):
	 * a direct read that meets the moved EOF inside a block is the case
	 * the POSIX path refills (issue 15 item 10) */
	int fd[2] = { open(path3, O_RDONLY), open(path3, O_RDONLY | O_DIRECT) };
	opends_handle_t h[2];
	if (fd[0] < 0)
		R_FAIL("trunc_reader: open");
	if (fd[1] < 0)
		fd[1] = open(path3, O_RDONLY);
	for (int i = 0; i < 2; i++)
		R_TRY(opends_handle_register(&h[i], fd[i]));
	while (!trunc_done()) {
		r_park_here();
		size_t sz = rand_size(&seed), moff = (size_t)(r_rand(&seed) % 4096);
		off_t off = (off_t)(r_rand(&seed) % (TFILE - sz + 1));
		if (r_rand(&seed) % 2) { /* block-aligned, as direct reads are */
			moff = 0;
			off &= ~(off_t)4095;
		}
		memset(mem, 0xcc, 2 * MAXOP + 8192);
		/* every family, through either fd */
		enum r_family f = (enum r_family)(r_rand(&seed) % R_NFAMILIES);
		int which = (int)(r_rand(&seed) % 2);
		struct r_op op = { .fh = h[which], .opcode = OPENDS_READ, .buf = mem + moff, .size = sz, .off = off };
		r_run_ops(f, &op, 1);
		ssize_t r = op.result;
		if (r < 0 || (size_t)r > sz)
			R_FAIL("truncated file: %s read of %zu at %lld returned %zd", r_family_name[f], sz,
			       (long long)off, r);
		for (size_t i = 0; i < (size_t)r; i++)
			if (mem[moff + i] != r_pat(3, (uint64_t)off + i) && mem[moff + i] != 0)
				R_FAIL("truncated file: %s read of %zu at %lld: byte %zu is 0x%02x, neither the file's "
				       "nor 0", r_family_name[f], sz, (long long)off, i, mem[moff + i]);
		for (size_t i = 0; i < 2 * MAXOP + 8192; i++)
			if ((i < moff || i >= moff + (size_t)r) && mem[i] != 0xcc)
				R_FAIL("truncated file: %s read of %zu at %lld through the %s fd returned %zd but wrote "
				       "byte %lld of the buffer (0x%02x; the file now has %lld bytes)",
				       r_family_name[f], sz, (long long)off, which && fd[1] != fd[0] ? "O_DIRECT" : "buffered",
				       r, (long long)i - (long long)moff, mem[i], (long long)lseek(fd[0], 0, SEEK_END));
		atomic_fetch_add(&trunc_reads, 1);
	}
	park_leave();
	for (int i = 0; i < 2; i++) {
		R_TRY(opends_handle_deregister(h[i]));
		close(fd[i]);
	}
	free(mem);
	return NULL;
}

/* hostile: fork; the child sees a closed driver and runs its own */
static void fork_once(void)
{
	fflush(NULL);
	if (R_FORK_GATE)
		r_park_busy(0, &active);
	pid_t pid = fork();
	if (pid != 0 && R_FORK_GATE)
		r_unpark();
	if (pid < 0)
		R_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		signal(SIGALRM, SIG_DFL); /* not the parent's watchdog: it cleans up */
		alarm(20);
		uint8_t b[4096];
		if (opends_driver_backend() != NULL || opends_sync_read(shared_h, b, 4096, 0, 0) !=
								       -OPENDS_DRIVER_NOT_INITIALIZED)
			_exit(10);
		setenv("OPENDS_ACCEL", "host", 1);
		opends_handle_t h;
		int f = open(path2, O_RDWR);
		if (opends_driver_open().err || opends_handle_register(&h, f).err ||
		    opends_sync_read(h, b, 4096, 0, 0) != 4096 || opends_handle_deregister(h).err ||
		    opends_driver_close().err)
			_exit(11);
		_exit(0);
	}
	int st;
	double t0 = r_now();
	pid_t w;
	while ((w = waitpid(pid, &st, WNOHANG)) == 0 && r_now() - t0 < 30) {
		struct timespec ts = { 0, 2 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		R_FAIL("a child of fork hung (killed after 30 s)");
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		R_FAIL("a child of fork failed: status 0x%x", st);
	atomic_fetch_add(&forks, 1);
}

/* Registration churn on other memory and fds while the workers run. */
static void *churn(void *arg)
{
	(void)arg;
	uint64_t seed = 7;
	uint8_t *mem = abuf(1u << 20);
	uint8_t rb[4096];
	int fd = open(path2, O_RDWR | O_CREAT, 0644);
	if (fd < 0 || pwrite(fd, mem, 8192, 0) != 8192)
		R_FAIL("churn file");
	double last_fork = r_now();
	while (!atomic_load(&workers_done)) {
		if (hostile && r_now() - last_fork > 0.1) {
			fork_once();
			last_fork = r_now();
		}
		size_t off = (size_t)(r_rand(&seed) % 256) * 4096, n = 4096 * (1 + r_rand(&seed) % 8);
		R_TRY(opends_buf_register(mem + off, n, 0));
		if (opends_buf_register(mem + off, n, 0).err != OPENDS_MEMORY_ALREADY_REGISTERED)
			R_FAIL("churn: double registration was not refused");
		R_TRY(opends_buf_deregister(mem + off));
		opends_handle_t h;
		int f2 = open(path2, O_RDWR);
		R_TRY(opends_handle_register(&h, f2));
		if (opends_sync_read(h, rb, 4096, 0, 0) != 4096)
			R_FAIL("churn: read through a fresh handle");
		R_TRY(opends_handle_deregister(h));
		close(f2);
		opends_stream_t s;
		R_TRY(opends_stream_create(&s));
		R_TRY(opends_stream_destroy(s));
		opends_batch_t b;
		R_TRY(opends_batch_setup(&b, 1 + (unsigned)(r_rand(&seed) % 64)));
		R_TRY(opends_batch_destroy(b));
		atomic_fetch_add(&churn_ops, 8);
	}
	close(fd);
	free(mem);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s GROUPS_PER_THREAD [THREADS [WATCHDOG_S]]\n", argv[0]);
		return 2;
	}
	groups = strtoul(argv[1], NULL, 10);
	if (argc > 2)
		nthreads = (unsigned)strtoul(argv[2], NULL, 10);
	r_watchdog(argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 300);
	hostile = argc > 4 && !strcmp(argv[4], "hostile");
	min_trunc_reads = 4 * groups;
	atexit(r_rmdir_all);
	r_watchdog_cleanup = r_rmdir_all;
	const char *tmp = r_tmpdir("stress");
	snprintf(path, sizeof(path), "%s/data", tmp);
	snprintf(path2, sizeof(path2), "%s/churn", tmp);
	snprintf(path3, sizeof(path3), "%s/trunc", tmp);
	if (hostile) {
		int f3 = open(path3, O_RDWR | O_CREAT | O_TRUNC, 0644);
		uint8_t *pat = abuf(TFILE);
		r_fill(pat, TFILE, 3, 0);
		if (f3 < 0 || pwrite(f3, pat, TFILE, 0) != TFILE)
			R_FAIL("trunc file");
		close(f3);
		free(pat);
	}

	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here: %s", r_backend_env(), opends_last_error_detail());
	R_TRY(e);
	shared_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (shared_fd < 0)
		R_FAIL("open");
	R_TRY(opends_handle_register(&shared_h, shared_fd));

	struct worker *w = calloc(nthreads, sizeof(*w));
	for (unsigned i = 0; i < nthreads; i++) {
		w[i].id = i;
		w[i].seed = 0x1234567ull * (i + 1);
		w[i].model = abuf(REGION);
		r_fill(w[i].model, REGION, 1, (uint64_t)i * REGION);
		if (pwrite(shared_fd, w[i].model, REGION, (off_t)i * REGION) != REGION)
			R_FAIL("initial content");
		w[i].mem = abuf(MAXK * 2 * MAXOP);
		w[i].registered = i % 2 == 0;
		if (w[i].registered)
			R_TRY(opends_buf_register(w[i].mem, MAXK * 2 * MAXOP, 0));
		/* half the threads' own fds use O_DIRECT where the file system allows */
		w[i].own_fd = open(path, O_RDWR | (i % 4 == 1 ? O_DIRECT : 0));
		if (w[i].own_fd < 0)
			w[i].own_fd = open(path, O_RDWR);
		R_TRY(opends_handle_register(&w[i].own_h, w[i].own_fd));
	}
	double t0 = r_now();
	pthread_t ct, tt[2];
	atomic_store(&active, nthreads + (hostile ? 2 : 0));
	pthread_create(&ct, NULL, churn, NULL);
	if (hostile) {
		pthread_create(&tt[0], NULL, truncator, NULL);
		pthread_create(&tt[1], NULL, trunc_reader, NULL);
	}
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&w[i].t, NULL, work, &w[i]);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(w[i].t, NULL);
	atomic_store(&workers_done, true);
	pthread_join(ct, NULL);
	if (hostile)
		for (int i = 0; i < 2; i++)
			pthread_join(tt[i], NULL);
	double dt = r_now() - t0;

	/* the whole file equals the models */
	uint8_t *chk = abuf(REGION);
	for (unsigned i = 0; i < nthreads; i++) {
		if (pread(shared_fd, chk, REGION, (off_t)i * REGION) != REGION || memcmp(chk, w[i].model, REGION))
			R_FAIL("region %u of the file differs from its model at the end", i);
		if (w[i].registered)
			R_TRY(opends_buf_deregister(w[i].mem));
		R_TRY(opends_handle_deregister(w[i].own_h));
		close(w[i].own_fd);
		free(w[i].mem);
		free(w[i].model);
	}
	R_TRY(opends_handle_deregister(shared_h));
	R_TRY(opends_driver_close());
	close(shared_fd);
	free(chk);
	free(w);
	printf("figures: backend %s accel %s: %u threads, %lu operations verified byte-exact, %lu churn "
	       "operations, %.1f s (%.0f ops/s)\n",
	       r_backend_env(), getenv("OPENDS_ACCEL") ? getenv("OPENDS_ACCEL") : "auto", nthreads,
	       atomic_load(&ops_verified), atomic_load(&churn_ops), dt, (double)atomic_load(&ops_verified) / dt);
	if (hostile)
		printf("hostile: %lu truncations, %lu reads of the truncated file checked, %lu forks (children "
		       "ran their own driver)\n",
		       atomic_load(&trunc_ops), atomic_load(&trunc_reads), atomic_load(&forks));
	return 0;
}
