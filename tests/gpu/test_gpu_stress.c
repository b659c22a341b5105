/*
 * test_gpu_stress [THREADS [OPS [HANG_S]]]: THREADS (4) threads each run
 * OPS (600) random groups of operations on device memory, mixing every
 * family: synchronous, async, batch and stream-ordered reads and writes of
 * 1 B .. 2 MiB + 4 KiB at any alignment, on the default stream, the
 * default stream by its explicit handle, a stream made by the library, and
 * streams made by the caller, blocking (synchronizing with the legacy
 * default stream) and non-blocking. Every
 * thread works on its own 8 MiB region of one shared file and checks every
 * read byte-exact against its model of the region, with the device bytes
 * around each target checked unchanged; at the end the whole file equals
 * the models (issue 15 item 14: 2 of 12 such runs hung on the H200, one
 * thread in opends_sync_read, three in opends_stream_synchronize).
 *
 * A watchdog thread fails the test (exit 1) instead of hanging when any
 * thread makes no progress for HANG_S (60) seconds, printing what every
 * thread is doing: family, stream, operation, size and offset.
 *
 * Memory: with OPENDS_ACCEL=hostdev (the CPU test) buffers are host memory
 * the hostdev layer presents as device memory and the streams are the
 * library's own; otherwise (built with cuda.h, ODS_GS_CUDA) cuMemAlloc'd
 * memory of GPU 0 and CUDA streams, exit 77 without libcuda or a GPU.
 * The default stream: the legacy one (NULL and CU_STREAM_LEGACY), or, when
 * built with ODS_GS_PTDS (test_gpu_stress_ptds), the per-thread one
 * (CU_STREAM_PER_THREAD); the test's own copies go on that stream too.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "../common.h"

#ifdef ODS_GS_CUDA
#include "gpu_common.h"
#endif

#define REGION (8 * T_MiB)
#define MAXOP (2 * T_MiB + 4096)
#define MAXK 4
#define SLOT (MAXOP + 2 * 4096) /* device bytes per operation, canary included */

static bool cuda; /* false: hostdev */
static unsigned nthreads = 4;
static unsigned long nops = 600;
static unsigned hang_s = 60;
static opends_handle_t shared_h;
static char path[PATH_MAX + 32];
static atomic_bool all_done;

enum family { F_SYNC, F_ASYNC, F_BATCH, F_STREAM, NFAM };
static const char *const fam_name[] = { "sync", "async", "batch", "stream" };
enum skind { S_NULL, S_DEFAULT, S_LIB, S_BLOCKING, S_NONBLOCKING, NSK };
static const char *const sk_name[] = { "NULL", "default-handle", "library's", "caller's blocking",
				       "caller's non-blocking" };

/* ---- memory and copies: CUDA or hostdev ------------------------------------ */

#ifdef ODS_GS_CUDA
#ifdef ODS_GS_PTDS
#define DFLT_STREAM CU_STREAM_PER_THREAD
#else
#define DFLT_STREAM CU_STREAM_LEGACY
#endif
static CUcontext primary;

#endif

static void *default_handle(void)
{
#ifdef ODS_GS_CUDA
	if (cuda)
		return (void *)DFLT_STREAM;
#endif
	return NULL;
}

static uint8_t *dev_alloc(size_t n)
{
#ifdef ODS_GS_CUDA
	if (cuda) {
		CUdeviceptr p;
		CU(ods_cu.cuMemAlloc(&p, n));
		return (uint8_t *)(uintptr_t)p;
	}
#endif
	void *p;
	if (posix_memalign(&p, 4096, n))
		FAILF("posix_memalign");
	return p;
}

static void dev_free(uint8_t *p)
{
#ifdef ODS_GS_CUDA
	if (cuda) {
		CU(ods_cu.cuMemFree((CUdeviceptr)(uintptr_t)p));
		return;
	}
#endif
	free(p);
}

/* Copies on the program's default stream, complete when they return. */
static void to_dev(uint8_t *d, const uint8_t *h, size_t n)
{
#ifdef ODS_GS_CUDA
	if (cuda) {
		CU(ods_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)d, h, n, DFLT_STREAM));
		CU(ods_cu.cuStreamSynchronize(DFLT_STREAM));
		return;
	}
#endif
	memcpy(d, h, n);
}

static void to_host(uint8_t *h, const uint8_t *d, size_t n)
{
#ifdef ODS_GS_CUDA
	if (cuda) {
		CU(ods_cu.cuMemcpyDtoHAsync(h, (CUdeviceptr)(uintptr_t)d, n, DFLT_STREAM));
		CU(ods_cu.cuStreamSynchronize(DFLT_STREAM));
		return;
	}
#endif
	memcpy(h, d, n);
}

/* ---- the threads -------------------------------------------------------------- */

struct op {
	int opcode;
	size_t size, moff; /* moff: offset of the target in its device slot */
	off_t off;
	uint32_t gen; /* a write's pattern */
	/* stream arguments (read when the stream gets there) and results */
	size_t s_size;
	off_t s_foff, s_boff;
	ssize_t result;
};

struct worker {
	unsigned id;
	pthread_t t;
	uint64_t seed;
	uint8_t *model, *dev, *host; /* model: REGION; dev: MAXK slots; host: one slot */
	opends_handle_t own_h;
	int own_fd;
	void *own_stream, *blocking_stream, *caller_stream;
	/* for the watchdog */
	atomic_ulong done_groups;
	_Atomic(const char *) what;
	atomic_int fam, sk, opcode;
	atomic_size_t size;
	atomic_llong off;
	double last_progress;
};

static struct worker *W;

static uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (*s >> 33) ^ (*s << 7 >> 40);
}

static size_t rand_size(uint64_t *s)
{
	switch (rnd(s) % 5) {
	case 0:
		return 1 + rnd(s) % 512;
	case 1:
		return 4096 * (1 + rnd(s) % 16);
	case 2:
		return 2 * T_MiB; /* the size of the hung read */
	case 3:
		return 1 + rnd(s) % MAXOP;
	default:
		return 1 + rnd(s) % (64 * T_KiB);
	}
}

static uint8_t gen_byte(uint32_t gen, uint64_t pos)
{
	return hashpat(pos * 2654435761u + gen);
}

static void *stream_of(struct worker *w, enum skind k)
{
	switch (k) {
	case S_NULL:
		return NULL;
	case S_DEFAULT:
		return default_handle();
	case S_LIB:
		return w->own_stream;
	case S_BLOCKING:
		return w->blocking_stream;
	default:
		return w->caller_stream;
	}
}

static void run_group(struct worker *w, enum family f, enum skind sk, struct op *ops, unsigned k)
{
	opends_handle_t h = rnd(&w->seed) % 2 ? shared_h : w->own_h;
	atomic_store(&w->fam, f);
	atomic_store(&w->sk, sk);
	switch (f) {
	case F_SYNC:
		for (unsigned i = 0; i < k; i++) {
			uint8_t *b = w->dev + i * SLOT + ops[i].moff;
			atomic_store(&w->what, ops[i].opcode == OPENDS_READ ? "in opends_sync_read" : "in opends_sync_write");
			ops[i].result = ops[i].opcode == OPENDS_READ ? opends_sync_read(h, b, ops[i].size, ops[i].off, 0)
								     : opends_sync_write(h, b, ops[i].size, ops[i].off, 0);
		}
		break;
	case F_ASYNC: {
		opends_async_future_t fut[MAXK];
		atomic_store(&w->what, "submitting async");
		for (unsigned i = 0; i < k; i++) {
			uint8_t *b = w->dev + i * SLOT + ops[i].moff;
			OK(ops[i].opcode == OPENDS_READ ? opends_async_read(h, b, ops[i].size, ops[i].off, 0, &fut[i])
							: opends_async_write(h, b, ops[i].size, ops[i].off, 0, &fut[i]));
		}
		atomic_store(&w->what, "in opends_async_await");
		for (unsigned i = k; i-- > 0;)
			ops[i].result = opends_async_await(&fut[i]);
		break;
	}
	case F_BATCH: {
		opends_batch_t b;
		opends_io_params_t p[MAXK];
		opends_io_events_t ev[MAXK];
		atomic_store(&w->what, "submitting a batch");
		OK(opends_batch_setup(&b, k));
		memset(p, 0, sizeof(p));
		for (unsigned i = 0; i < k; i++) {
			p[i].mode = OPENDS_BATCH;
			p[i].fh = h;
			p[i].opcode = (opends_opcode_t)ops[i].opcode;
			p[i].u.batch.buf_base = w->dev + i * SLOT;
			p[i].u.batch.buf_offset = (off_t)ops[i].moff;
			p[i].u.batch.size = ops[i].size;
			p[i].u.batch.file_offset = ops[i].off;
			p[i].cookie = &ops[i];
			ops[i].result = 1234567;
		}
		OK(opends_batch_submit(b, k, p, 0));
		atomic_store(&w->what, "in opends_batch_get_status");
		for (unsigned got = 0; got < k;) {
			unsigned nr = k - got;
			OK(opends_batch_get_status(b, 1, &nr, ev, NULL));
			for (unsigned j = 0; j < nr; j++) {
				struct op *o = ev[j].cookie;
				if (o < ops || o >= ops + k || o->result != 1234567)
					FAILF("batch event with a bad or repeated cookie");
				o->result = ev[j].status == OPENDS_COMPLETE ? ev[j].ret : -OPENDS_IO_ERROR;
			}
			got += nr;
		}
		OK(opends_batch_destroy(b));
		break;
	}
	default: {
		void *s = stream_of(w, sk);
		atomic_store(&w->what, "enqueueing stream operations");
		for (unsigned i = 0; i < k; i++) {
			struct op *o = &ops[i];
			o->s_size = o->size;
			o->s_foff = o->off;
			o->s_boff = (off_t)o->moff;
			o->result = 1234567;
			uint8_t *b = w->dev + i * SLOT;
			OK(o->opcode == OPENDS_READ
				   ? opends_stream_read(h, b, &o->s_size, &o->s_foff, &o->s_boff, &o->result, s)
				   : opends_stream_write(h, b, &o->s_size, &o->s_foff, &o->s_boff, &o->result, s));
		}
		atomic_store(&w->what, "in opends_stream_synchronize");
		OK(opends_stream_synchronize(s));
		break;
	}
	}
	atomic_store(&w->what, "checking");
}

static void *work(void *arg)
{
	struct worker *w = arg;
#ifdef ODS_GS_CUDA
	if (cuda) /* the test's own copies need the context on this thread */
		CU(ods_cu.cuCtxSetCurrent(primary));
#endif
	off_t base = (off_t)w->id * (off_t)REGION;
	struct op ops[MAXK];
	uint32_t gen = w->id * 1000003u;
	for (unsigned long g = 0; g < nops; g++) {
		enum family f = (enum family)(rnd(&w->seed) % NFAM);
		enum skind sk = (enum skind)(rnd(&w->seed) % NSK);
		unsigned k = f == F_SYNC ? 1 : 1 + (unsigned)(rnd(&w->seed) % MAXK);
		atomic_store(&w->what, "preparing");
		for (unsigned i = 0; i < k; i++) {
			struct op *o = &ops[i];
			size_t slot = REGION / k, sz = rand_size(&w->seed);
			if (sz > slot)
				sz = slot;
			size_t in = (size_t)(rnd(&w->seed) % (slot - sz + 1));
			if (rnd(&w->seed) % 2)
				in &= ~(size_t)4095;
			o->opcode = rnd(&w->seed) % 2 ? OPENDS_WRITE : OPENDS_READ;
			o->size = sz;
			o->off = base + (off_t)(i * slot + in);
			o->moff = 4096 + (rnd(&w->seed) % 2 ? 0 : (size_t)(rnd(&w->seed) % 4096));
			/* the device slot: canary, and for a write the new bytes */
			memset(w->host, T_CANARY, SLOT);
			if (o->opcode == OPENDS_WRITE) {
				o->gen = ++gen;
				for (size_t j = 0; j < sz; j++)
					w->host[o->moff + j] = gen_byte(gen, (uint64_t)o->off + j);
			}
			to_dev(w->dev + i * SLOT, w->host, SLOT);
		}
		atomic_store(&w->opcode, ops[0].opcode);
		atomic_store(&w->size, ops[0].size);
		atomic_store(&w->off, (long long)ops[0].off);
		run_group(w, f, sk, ops, k);
		for (unsigned i = 0; i < k; i++) {
			struct op *o = &ops[i];
			if (o->result != (ssize_t)o->size)
				FAILF("thread %u group %lu: %s %s on stream %s of %zu at %lld returned %zd (%s)", w->id, g,
				      fam_name[f], o->opcode == OPENDS_READ ? "read" : "write", sk_name[sk], o->size,
				      (long long)o->off, o->result, o->result < 0 ? t_errname(o->result) : "short");
			uint8_t *m = w->model + (o->off - base);
			to_host(w->host, w->dev + i * SLOT, SLOT);
			size_t at;
			if (o->opcode == OPENDS_WRITE) {
				for (size_t j = 0; j < o->size; j++)
					m[j] = gen_byte(o->gen, (uint64_t)o->off + j);
				if (t_first_diff(w->host + o->moff, m, o->size, &at))
					FAILF("thread %u group %lu: %s write on stream %s changed its source at byte %zu",
					      w->id, g, fam_name[f], sk_name[sk], at);
			} else if (t_first_diff(w->host + o->moff, m, o->size, &at))
				FAILF("thread %u group %lu: %s read on stream %s of %zu at %lld: byte %zu is 0x%02x, "
				      "expected 0x%02x",
				      w->id, g, fam_name[f], sk_name[sk], o->size, (long long)o->off, at,
				      w->host[o->moff + at], m[at]);
			if (t_first_not(w->host, o->moff, T_CANARY, &at) ||
			    t_first_not(w->host + o->moff + o->size, SLOT - o->moff - o->size, T_CANARY, &at))
				FAILF("thread %u group %lu: %s %s on stream %s of %zu at %lld changed device bytes "
				      "outside its target",
				      w->id, g, fam_name[f], o->opcode == OPENDS_READ ? "read" : "write", sk_name[sk],
				      o->size, (long long)o->off);
		}
		atomic_fetch_add(&w->done_groups, 1);
	}
	atomic_store(&w->what, "finished");
	return NULL;
}

/* Fail, printing every thread's state, when one makes no progress. */
static void *watchdog(void *arg)
{
	(void)arg;
	unsigned long *last = calloc(nthreads, sizeof(*last));
	double *since = calloc(nthreads, sizeof(*since));
	for (unsigned i = 0; i < nthreads; i++)
		since[i] = t_now();
	while (!atomic_load(&all_done)) {
		struct timespec ts = { 0, 200 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		double now = t_now();
		for (unsigned i = 0; i < nthreads; i++) {
			unsigned long d = atomic_load(&W[i].done_groups);
			if (d != last[i] || !strcmp(atomic_load(&W[i].what), "finished")) {
				last[i] = d;
				since[i] = now;
			}
			if (now - since[i] < hang_s)
				continue;
			fprintf(stderr, "FAIL: HANG: thread %u made no progress for %u s; every thread:\n", i, hang_s);
			for (unsigned j = 0; j < nthreads; j++)
				fprintf(stderr,
					"  thread %u: group %lu of %lu, %s; family %s, stream %s, first op %s of %zu "
					"at %lld; no progress for %.1f s\n",
					j, atomic_load(&W[j].done_groups), nops, atomic_load(&W[j].what),
					fam_name[atomic_load(&W[j].fam)], sk_name[atomic_load(&W[j].sk)],
					atomic_load(&W[j].opcode) == OPENDS_READ ? "read" : "write",
					atomic_load(&W[j].size), (long long)atomic_load(&W[j].off), now - since[j]);
			fflush(stderr);
			t_rm_dir();
			_exit(1);
		}
	}
	free(last);
	free(since);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		nthreads = (unsigned)strtoul(argv[1], NULL, 10);
	if (argc > 2)
		nops = strtoul(argv[2], NULL, 10);
	if (argc > 3)
		hang_s = (unsigned)strtoul(argv[3], NULL, 10);
	if (nthreads < 1 || nthreads > 64)
		FAILF("THREADS must be 1..64");
	const char *accel = getenv("OPENDS_ACCEL");
	cuda = !(accel && !strcmp(accel, "hostdev"));
	if (cuda) {
#ifdef ODS_GS_CUDA
		gpu_open(NULL, 1, &primary, 1, NULL);
#else
		skip("built without cuda.h: run with OPENDS_ACCEL=hostdev");
#endif
	}
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		skip("%s", t_detail());
	OK(e);

	snprintf(path, sizeof(path), "%s/stress", t_tmpdir());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	OK(opends_handle_register(&shared_h, fd));
	/* OPENDS_GS_SEED=N repeats a run */
	uint64_t seed0 = getenv("OPENDS_GS_SEED") ? strtoull(getenv("OPENDS_GS_SEED"), NULL, 0) : (uint64_t)time(NULL);
	W = calloc(nthreads, sizeof(*W));
	for (unsigned i = 0; i < nthreads; i++) {
		struct worker *w = &W[i];
		w->id = i;
		w->seed = 0x9e3779b97f4a7c15ull * (i + 1) ^ seed0;
		w->model = t_xmalloc(REGION);
		for (size_t j = 0; j < REGION; j++)
			w->model[j] = gen_byte(7, (uint64_t)i * REGION + j);
		CHECK(pwrite(fd, w->model, REGION, (off_t)i * (off_t)REGION) == (ssize_t)REGION);
		w->dev = dev_alloc(MAXK * SLOT);
		w->host = t_xmalloc(SLOT);
		/* every other thread's own fd is O_DIRECT */
		w->own_fd = open(path, O_RDWR | (i % 2 ? O_DIRECT : 0));
		if (w->own_fd < 0)
			w->own_fd = open(path, O_RDWR);
		OK(opends_handle_register(&w->own_h, w->own_fd));
		OK(opends_stream_create(&w->own_stream));
#ifdef ODS_GS_CUDA
		if (cuda) {
			CUstream s, b;
			CU(ods_cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
			CU(ods_cu.cuStreamCreate(&b, CU_STREAM_DEFAULT)); /* synchronizes with the legacy stream */
			w->caller_stream = s;
			w->blocking_stream = b;
		} else
#endif
		{
			OK(opends_stream_create(&w->caller_stream));
			OK(opends_stream_create(&w->blocking_stream));
		}
		atomic_store(&w->what, "starting");
	}
	printf("OPENDS_GS_SEED=%llu; %u threads x %lu groups, %s memory, default stream %s\n",
	       (unsigned long long)seed0, nthreads, nops, cuda ? "CUDA device" : "hostdev",
#ifdef ODS_GS_PTDS
	       "per-thread"
#else
	       "legacy"
#endif
	);
	fflush(stdout); /* a hang ends in _exit */
	double t0 = t_now();
	pthread_t wd;
	pthread_create(&wd, NULL, watchdog, NULL);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&W[i].t, NULL, work, &W[i]);
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(W[i].t, NULL);
	atomic_store(&all_done, true);
	pthread_join(wd, NULL);
	double dt = t_now() - t0;

	uint8_t *chk = t_xmalloc(REGION);
	for (unsigned i = 0; i < nthreads; i++) {
		struct worker *w = &W[i];
		CHECKF(pread(fd, chk, REGION, (off_t)i * (off_t)REGION) == (ssize_t)REGION &&
			       !memcmp(chk, w->model, REGION),
		       "region %u of the file differs from its model at the end", i);
		OK(opends_stream_destroy(w->own_stream));
#ifdef ODS_GS_CUDA
		if (cuda) {
			CU(ods_cu.cuStreamDestroy((CUstream)w->caller_stream));
			CU(ods_cu.cuStreamDestroy((CUstream)w->blocking_stream));
		} else
#endif
		{
			OK(opends_stream_destroy(w->caller_stream));
			OK(opends_stream_destroy(w->blocking_stream));
		}
		OK(opends_handle_deregister(w->own_h));
		close(w->own_fd);
		dev_free(w->dev);
		free(w->host);
		free(w->model);
	}
	OK(opends_handle_deregister(shared_h));
	OK(opends_driver_close());
	close(fd);
	free(chk);
	free(W);
	printf("figures: backend %s, %u threads x %lu groups of mixed families byte-exact in %.1f s\n",
	       getenv("OPENDS_BACKEND") ? getenv("OPENDS_BACKEND") : "auto", nthreads, nops, dt);
	t_rm_dir();
	return 0;
}
