#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "baselines.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef BENCH_HAVE_URING
#include <liburing.h>
#endif

#include "gpu.h"
#include "stats.h"

static double cpu_now(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int open_ro(const char *path, bool direct)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
	if (fd < 0 && direct && errno == EINVAL)
		fd = open(path, O_RDONLY | O_CLOEXEC); /* no O_DIRECT here */
	return fd;
}

/* ---- threads × pread --------------------------------------------------- */

/* Work items: whole small files, and 64 MiB ranges of large ones, so that
 * one big file is read by every thread (a ceiling measured with one thread
 * per file under-reports a single 8 GiB file). */
struct pread_item {
	unsigned file;
	uint64_t off, len;
};

#define ITEM_SPAN (64ull << 20)

struct pread_ctx {
	const struct dataset *ds;
	bool direct;
	size_t block;
	struct pread_item *items;
	unsigned nitems;
	atomic_uint next;
	atomic_uint_fast64_t bytes;
	atomic_int err;
};

static void *pread_worker(void *arg)
{
	struct pread_ctx *c = arg;
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, c->block)) {
		atomic_store(&c->err, -ENOMEM);
		return NULL;
	}
	for (;;) {
		unsigned i = atomic_fetch_add(&c->next, 1);
		if (i >= c->nitems)
			break;
		if (st_expired()) {
			atomic_store(&c->err, -ETIMEDOUT);
			break;
		}
		const struct pread_item *it = &c->items[i];
		int fd = open_ro(c->ds->files[it->file].path, c->direct);
		if (fd < 0) {
			atomic_store(&c->err, -errno);
			break;
		}
		for (uint64_t off = it->off; off < it->off + it->len;) {
			size_t n = it->off + it->len - off < c->block ? (size_t)(it->off + it->len - off) : c->block;
			n = (n + 4095) & ~(size_t)4095; /* O_DIRECT lengths; EOF stops short */
			ssize_t r = pread(fd, buf, n, (off_t)off);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				atomic_store(&c->err, -errno);
				break;
			}
			if (r == 0)
				break;
			off += (uint64_t)r;
			atomic_fetch_add(&c->bytes, (uint64_t)r);
		}
		close(fd);
	}
	free(buf);
	return NULL;
}

static void pread_config(const struct dataset *ds, const unsigned *order, bool direct, unsigned threads,
			 size_t block, struct leg_result *r)
{
	struct pread_ctx c = { .ds = ds, .direct = direct, .block = block };
	if (threads > 256)
		threads = 256;
	memset(r, 0, sizeof(*r));
	unsigned n_items = 0;
	for (unsigned f = 0; f < ds->nfiles; f++)
		n_items += (unsigned)((ds->files[f].size + ITEM_SPAN - 1) / ITEM_SPAN);
	c.items = malloc((n_items ? n_items : 1) * sizeof(*c.items));
	if (!c.items) {
		r->error = -ENOMEM;
		return;
	}
	for (unsigned k = 0; k < ds->nfiles; k++) {
		unsigned f = order ? order[k] : k;
		for (uint64_t off = 0; off < ds->files[f].size; off += ITEM_SPAN) {
			uint64_t len = ds->files[f].size - off < ITEM_SPAN ? ds->files[f].size - off : ITEM_SPAN;
			c.items[c.nitems++] = (struct pread_item){ f, off, len };
		}
	}
	snprintf(r->config, sizeof(r->config), "pread%s %u threads x %zu KiB%s", direct ? " O_DIRECT" : "", threads,
		 block >> 10, order ? ", leg order" : "");
	double c0 = cpu_now();
	uint64_t t0 = st_now_ns();
	st_run_threads(threads, pread_worker, &c, 0);
	r->seconds = st_seconds(t0, st_now_ns());
	r->cpu_s = cpu_now() - c0;
	r->bytes = atomic_load(&c.bytes);
	r->files = ds->nfiles;
	r->error = atomic_load(&c.err);
	free(c.items);
}

/* ---- one thread, one deep io_uring -------------------------------------- */

#ifdef BENCH_HAVE_URING
/* threads x one io_uring each, qd reads of block bytes in flight per ring,
 * the chunks of the files in the legs' order handed out in turn: what the
 * library's io_uring backend does (8 workers x 16 chunks of 1 MiB), and
 * with one thread the deep-queue shape of the async and batch legs. */
struct uring_ctx {
	const struct dataset *ds;
	struct pread_item *chunks;
	unsigned nchunks, qd;
	bool direct;
	size_t block;
	atomic_uint next;
	atomic_uint_fast64_t bytes;
	atomic_int err;
};

static void *uring_worker(void *arg)
{
	struct uring_ctx *c = arg;
	struct io_uring ring;
	char *slots = NULL;
	int *fds = calloc(c->qd, sizeof(int));
	unsigned *free_slots = calloc(c->qd, sizeof(unsigned)), nfree = c->qd, inflight = 0;
	if (!fds || !free_slots || posix_memalign((void **)&slots, 4096, (size_t)c->qd * c->block) ||
	    io_uring_queue_init(c->qd, &ring, 0)) {
		atomic_store(&c->err, -ENOMEM);
		free(fds), free(free_slots), free(slots);
		return NULL;
	}
	for (unsigned i = 0; i < c->qd; i++)
		free_slots[i] = i;
	bool more = true;
	while (more || inflight) {
		while (more && nfree) {
			unsigned k = atomic_fetch_add(&c->next, 1);
			if (k >= c->nchunks || atomic_load(&c->err) || st_expired()) {
				if (k < c->nchunks && !atomic_load(&c->err))
					atomic_store(&c->err, -ETIMEDOUT);
				more = false;
				break;
			}
			const struct pread_item *it = &c->chunks[k];
			unsigned s = free_slots[--nfree];
			if ((fds[s] = open_ro(c->ds->files[it->file].path, c->direct)) < 0) {
				atomic_store(&c->err, -errno);
				free_slots[nfree++] = s;
				more = false;
				break;
			}
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			io_uring_prep_read(sqe, fds[s], slots + (size_t)s * c->block, (unsigned)((it->len + 4095) & ~4095ull),
					   it->off);
			io_uring_sqe_set_data64(sqe, s);
			inflight++;
		}
		if (!inflight)
			break;
		io_uring_submit(&ring);
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe))
			break;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&ring, head, cqe)
		{
			unsigned s = (unsigned)io_uring_cqe_get_data64(cqe);
			if (cqe->res < 0)
				atomic_store(&c->err, cqe->res);
			else
				atomic_fetch_add(&c->bytes, (uint64_t)cqe->res);
			close(fds[s]);
			free_slots[nfree++] = s;
			inflight--;
			seen++;
		}
		io_uring_cq_advance(&ring, seen);
	}
	io_uring_queue_exit(&ring);
	free(fds), free(free_slots), free(slots);
	return NULL;
}

static void uring_config(const struct dataset *ds, const unsigned *order, bool direct, unsigned threads, unsigned qd,
			 size_t block, struct leg_result *r)
{
	struct uring_ctx c = { .ds = ds, .qd = qd, .direct = direct, .block = block };
	memset(r, 0, sizeof(*r));
	snprintf(r->config, sizeof(r->config), "io_uring%s %u thread%s, %u x %zu KiB in flight%s, leg order",
		 direct ? " O_DIRECT" : "", threads, threads > 1 ? "s" : "", qd, block >> 10,
		 threads > 1 ? " each" : "");
	uint64_t n = 0;
	for (unsigned f = 0; f < ds->nfiles; f++)
		n += (ds->files[f].size + block - 1) / block;
	c.chunks = malloc((n ? n : 1) * sizeof(*c.chunks));
	if (!c.chunks) {
		r->error = -ENOMEM;
		return;
	}
	for (unsigned k = 0; k < ds->nfiles; k++) {
		unsigned f = order ? order[k] : k;
		for (uint64_t off = 0; off < ds->files[f].size; off += block)
			c.chunks[c.nchunks++] = (struct pread_item){ f, off,
								     ds->files[f].size - off < block ? ds->files[f].size - off : block };
	}
	double c0 = cpu_now();
	uint64_t t0 = st_now_ns();
	st_run_threads(threads, uring_worker, &c, 0);
	r->seconds = st_seconds(t0, st_now_ns());
	r->cpu_s = cpu_now() - c0;
	r->bytes = atomic_load(&c.bytes);
	r->files = ds->nfiles;
	r->error = atomic_load(&c.err);
	free(c.chunks);
}
#endif

unsigned ceiling_shapes(const struct dataset *ds, unsigned threads, struct disk_shape *out, unsigned max)
{
	unsigned n = 0;
	bool large = ds->max_size >= (64u << 20); /* each cold pass of 8 GiB costs 5-8 s: fewer shapes */
#define SHAPE(u, w, b, q)                                                            \
	do {                                                                         \
		if (n < max)                                                         \
			out[n++] = (struct disk_shape){ (u), (w), (size_t)(b), (q) }; \
	} while (0)
	/* threads x pread, the sync legs' shape; 4 MiB blocks only for files
	 * between 1 and 64 MiB (smaller: both block sizes read the same) */
	SHAPE(false, threads, 1u << 20, 1);
	if (ds->max_size > (1u << 20) && !large)
		SHAPE(false, threads, 4u << 20, 1);
	/* one thread reading 16 MiB at a time, as cuFile's compatibility mode
	 * reads a large file (it beat the pread shapes by 19-28 % on the
	 * H200's virtio disk) */
	if (large)
		SHAPE(false, 1, 16u << 20, 1);
#ifdef BENCH_HAVE_URING
	/* the library's own shape: its io_uring backend keeps 8 workers x 16
	 * chunks of 1 MiB in flight (on the H200 its cold 8 GiB read beat one
	 * deep ring by 40 % and every pread shape by 24 %: virtio wants depth
	 * from several queues); and one deep ring, the async/batch legs' shape
	 * (128 small files in flight, else 32 chunks; 16 of 16 MiB for large
	 * files) */
	SHAPE(true, 8, 1u << 20, 16);
	if (!large) /* (on the 8 GiB file it read 12 % below the one above) */
		SHAPE(true, 1, 1u << 20, ds->max_size < (1u << 20) ? 128 : 32);
	else
		SHAPE(true, 1, 16u << 20, 16);
	/* small files at the async/batch/stream legs' own concurrency (4096 in
	 * flight: 8 rings x 512, one read per file): on the x2 at 23:35 those
	 * legs read cold imagenetish 28-53 % faster than every shape above, so
	 * 128 in flight under-measured what the virtio disk gives */
	if (ds->max_size <= (256u << 10))
		SHAPE(true, 8, 256u << 10, 512);
#endif
#undef SHAPE
	return n;
}

void ceiling_shape_run(const struct dataset *ds, const unsigned *order, bool direct, const struct disk_shape *sh,
		       struct leg_result *r)
{
#ifdef BENCH_HAVE_URING
	if (sh->uring) {
		uring_config(ds, order, direct, sh->width, sh->qd, sh->block, r);
		return;
	}
#endif
	pread_config(ds, order, direct, sh->width, sh->block, r);
}

void ceiling_host(const struct dataset *ds, unsigned threads, size_t block, struct leg_result *r)
{
	pread_config(ds, NULL, false, threads, block, r);
	snprintf(r->config, sizeof(r->config), "buffered pread %u threads x %zu KiB, hot", threads, block >> 10);
}

/* ---- cuFile --------------------------------------------------------------- */

/* cuFile's types from the project's own declaration of its ABI (checked
 * against NVIDIA's header where one is found); the calls are dlsym'ed. */
#define ODS_CUFILE_NO_CUDA_H
#include "cufile.h"

/* cuFile through the project's one loader (src/vendor/cufile_api.h) */
#include "cufile_api.h"

static struct ods_cufile_api cf;
static bool cf_open;

bool cufile_available(char *why, unsigned long why_len)
{
	if (cf_open)
		return true;
	if (cf.lib) { /* loaded before and refused */
		snprintf(why, why_len, "%s", cf.dropin ? "libcufile.so.0 is the OpenDS drop-in, not NVIDIA's"
						       : "cuFileDriverOpen failed");
		return false;
	}
	const char *path = getenv("OPENDS_BENCH_CUFILE");
	if (ods_cufile_load(&cf, path && *path ? path : "libcufile.so.0", 0, why, why_len))
		return false;
	if (cf.dropin) {
		snprintf(why, why_len, "libcufile.so.0 is the OpenDS drop-in, not NVIDIA's");
		return false;
	}
	CUfileError_t e = cf.cuFileDriverOpen();
	if (e.err) {
		snprintf(why, why_len, "cuFileDriverOpen failed: %d", e.err);
		return false;
	}
	cf_open = true;
	return true;
}

void cufile_close(void)
{
	if (cf_open)
		cf.cuFileDriverClose_v2();
	cf_open = false;
}

struct cf_ctx {
	const struct dataset *ds;
	void **dest;
	atomic_uint next;
	atomic_uint_fast64_t bytes;
	atomic_int err;
};

struct cf_arg {
	struct cf_ctx *c;
	unsigned index;
};

static void *cf_worker(void *arg)
{
	struct cf_arg *a = arg;
	struct cf_ctx *c = a->c;
	gpu_bind_thread();
	for (;;) {
		unsigned i = atomic_fetch_add(&c->next, 1);
		if (i >= c->ds->nfiles)
			break;
		if (st_expired()) {
			atomic_store(&c->err, -ETIMEDOUT);
			break;
		}
		const struct ds_file *f = &c->ds->files[i];
		int fd = open_ro(f->path, true);
		if (fd < 0) {
			atomic_store(&c->err, -errno);
			break;
		}
		CUfileDescr_t d;
		memset(&d, 0, sizeof(d));
		d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
		d.handle.fd = fd;
		CUfileHandle_t h;
		CUfileError_t e = cf.cuFileHandleRegister(&h, &d);
		if (e.err) {
			atomic_store(&c->err, -e.err);
			close(fd);
			break;
		}
		ssize_t r = cf.cuFileRead(h, c->dest[a->index], f->size, 0, 0);
		if (r < 0)
			atomic_store(&c->err, r == -1 ? -errno : (int)r);
		else
			atomic_fetch_add(&c->bytes, (uint64_t)r);
		cf.cuFileHandleDeregister(h);
		close(fd);
		if (r < 0)
			break;
	}
	return NULL;
}

int cufile_sync_leg(const struct dataset *ds, unsigned threads, void **dest, struct leg_result *res)
{
	struct cf_ctx c = { .ds = ds, .dest = dest };
	struct cf_arg args[256];
	memset(res, 0, sizeof(*res));
	snprintf(res->config, sizeof(res->config), "cuFileRead %u threads", threads);
	double c0 = cpu_now();
	uint64_t t0 = st_now_ns();
	if (threads > 256)
		threads = 256;
	for (unsigned n = 0; n < threads; n++)
		args[n] = (struct cf_arg){ &c, n };
	st_run_threads(threads, cf_worker, args, sizeof(args[0]));
	res->seconds = st_seconds(t0, st_now_ns());
	res->cpu_s = cpu_now() - c0;
	res->bytes = atomic_load(&c.bytes);
	res->files = ds->nfiles;
	res->error = atomic_load(&c.err);
	return res->error;
}

/* One file of a batch or stream slot: opened O_DIRECT and registered. */
struct cf_slot {
	int fd;
	int file;
	CUfileHandle_t h;
	size_t size;
	off_t file_offset, buf_offset;
	ssize_t done;
};

static int cf_open_slot(const struct dataset *ds, unsigned i, struct cf_slot *s)
{
	s->fd = open_ro(ds->files[i].path, true);
	if (s->fd < 0)
		return -errno;
	CUfileDescr_t d;
	memset(&d, 0, sizeof(d));
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = s->fd;
	CUfileError_t e = cf.cuFileHandleRegister(&s->h, &d);
	if (e.err) {
		close(s->fd);
		return -e.err;
	}
	s->file = (int)i;
	return 0;
}

static void cf_close_slot(struct cf_slot *s)
{
	cf.cuFileHandleDeregister(s->h);
	close(s->fd);
	s->file = -1;
}

static void leg_begin(struct leg_result *res, const struct dataset *ds, const char *config, double *c0, uint64_t *t0)
{
	memset(res, 0, sizeof(*res));
	snprintf(res->config, sizeof(res->config), "%s", config);
	res->files = ds->nfiles;
	*c0 = cpu_now();
	*t0 = st_now_ns();
}

static void leg_end(struct leg_result *res, double c0, uint64_t t0)
{
	res->seconds = st_seconds(t0, st_now_ns());
	res->cpu_s = cpu_now() - c0;
}

/* cuFile refuses (or cuts short) batch entries larger than its
 * max_direct_io_size (16 MiB in /etc/cufile.json on the H200): a cuFile
 * program reads a large file as pieces of that size, up to 128 in flight. */
#define CF_PIECE ((size_t)16 << 20)
#define CF_STALL_S 20

int cufile_batch_leg(const struct dataset *ds, unsigned conc, char *dest, size_t slot, struct leg_result *res)
{
	double c0;
	uint64_t t0;
	/* Entry sl writes into region sl of dest. Small files: one entry per
	 * file, conc in flight, as the other batch legs. Large files: pieces
	 * of CF_PIECE, as many in flight as dest (conc regions of slot bytes)
	 * has pieces for, at most 128. */
	size_t region = slot;
	if (slot > CF_PIECE) {
		size_t fit = (size_t)conc * (slot / CF_PIECE);
		region = CF_PIECE;
		conc = fit > 128 ? 128 : (unsigned)fit;
	}
	if (conc > 128)
		conc = 128;
	char cfg[64];
	snprintf(cfg, sizeof(cfg), "cuFileBatchIO %u in flight x <=%zu MiB", conc, region >> 20);
	if (!cf.cuFileBatchIOSetUp || !cf.cuFileBatchIOSubmit || !cf.cuFileBatchIOGetStatus || !cf.cuFileBatchIODestroy) {
		memset(res, 0, sizeof(*res));
		return res->error = -ENOSYS;
	}
	gpu_bind_thread();
	CUfileBatchHandle_t b;
	CUfileError_t e = cf.cuFileBatchIOSetUp(&b, conc);
	if (e.err) {
		memset(res, 0, sizeof(*res));
		return res->error = -e.err;
	}
	struct cf_slot *s = calloc(conc, sizeof(*s));
	CUfileIOParams_t *p = calloc(conc, sizeof(*p));
	CUfileIOEvents_t *ev = calloc(conc, sizeof(*ev));
	unsigned *freel = calloc(conc, sizeof(*freel)), nfree = conc, k = 0, busy = 0;
	size_t koff = 0; /* next piece of file k */
	uint64_t last = st_now_ns();
	bool abandoned = false;
	leg_begin(res, ds, cfg, &c0, &t0);
	if (!s || !p || !ev || !freel)
		res->error = -ENOMEM;
	for (unsigned i = 0; !res->error && i < conc; i++)
		freel[i] = i;
	while (!res->error && (k < ds->nfiles || busy)) {
		unsigned np = 0;
		if (k < ds->nfiles && st_expired()) {
			res->error = -ETIMEDOUT; /* stop submitting; what is in flight is abandoned below */
			abandoned = busy > 0;
			break;
		}
		while (nfree && k < ds->nfiles && !res->error) {
			unsigned sl = freel[--nfree], i = k;
			size_t fsz = ds->files[i].size, n = fsz - koff < region ? fsz - koff : region;
			int rc = cf_open_slot(ds, i, &s[sl]);
			if (rc) {
				res->error = rc;
				freel[nfree++] = sl;
				break;
			}
			s[sl].size = n;
			memset(&p[np], 0, sizeof(p[np]));
			p[np].mode = CUFILE_BATCH;
			p[np].u.batch.devPtr_base = dest + (size_t)sl * region;
			p[np].u.batch.file_offset = (off_t)koff;
			p[np].u.batch.size = n;
			p[np].fh = s[sl].h;
			p[np].opcode = CUFILE_READ;
			p[np].cookie = (void *)(uintptr_t)sl;
			np++;
			koff += n;
			if (koff >= fsz) {
				k++;
				koff = 0;
			}
		}
		if (np) {
			e = cf.cuFileBatchIOSubmit(b, np, p, 0);
			if (e.err) {
				res->error = -e.err;
				for (unsigned j = 0; j < np; j++)
					cf_close_slot(&s[(uintptr_t)p[j].cookie]);
				break;
			}
			busy += np;
		}
		if (!busy)
			break;
		/* NVIDIA's compatibility mode has left entries pending for
		 * minutes on the H200 (filesize8gib cold, imagenetish hot):
		 * without progress for CF_STALL_S the leg fails as timed out,
		 * and the batch is abandoned, not destroyed under I/O. */
		unsigned nr = conc;
		struct timespec tmo = { 1, 0 };
		e = cf.cuFileBatchIOGetStatus(b, 1, &nr, ev, &tmo);
		if (e.err) {
			res->error = -e.err;
			break;
		}
		if (nr)
			last = st_now_ns();
		else if (st_now_ns() - last > (uint64_t)CF_STALL_S * 1000000000u) {
			res->error = -ETIMEDOUT;
			abandoned = true;
			break;
		}
		for (unsigned j = 0; j < nr; j++) {
			unsigned sl = (unsigned)(uintptr_t)ev[j].cookie;
			if (ev[j].status != CUFILE_COMPLETE || ev[j].ret != s[sl].size)
				res->error = res->error ? res->error : -EIO;
			else
				res->bytes += ev[j].ret;
			cf_close_slot(&s[sl]);
			freel[nfree++] = sl;
			busy--;
		}
	}
	leg_end(res, c0, t0);
	if (abandoned) {
		fprintf(stderr, "cuFile batch: stopped (%s) with %u entries in flight; leg abandoned\n",
			res->error == -ETIMEDOUT && st_expired() ? "time limit" : "no completion in 20 s", busy);
		return res->error; /* its memory stays with cuFile's threads */
	}
	cf.cuFileBatchIODestroy(b);
	free(s);
	free(p);
	free(ev);
	free(freel);
	return res->error;
}

int cufile_stream_leg(const struct dataset *ds, unsigned conc, char *dest, size_t slot, unsigned flags,
		      struct leg_result *res)
{
	double c0;
	uint64_t t0;
	char cfg[64];
	snprintf(cfg, sizeof(cfg), "cuFileReadAsync on %u streams%s", conc, flags ? ", registered" : "");
	if (!cf.cuFileReadAsync) {
		memset(res, 0, sizeof(*res));
		return res->error = -ENOSYS;
	}
	gpu_bind_thread();
	struct cf_slot *s = calloc(conc, sizeof(*s));
	void **st = calloc(conc, sizeof(*st));
	for (unsigned i = 0; st && i < conc; i++) {
		st[i] = gpu_stream_create();
		if (flags && cf.cuFileStreamRegister)
			cf.cuFileStreamRegister(st[i], flags);
	}
	leg_begin(res, ds, cfg, &c0, &t0);
	if (!s || !st)
		res->error = -ENOMEM;
	for (unsigned i = 0; !res->error && i < conc; i++)
		s[i].file = -1;
	for (unsigned k = 0; !res->error && k < ds->nfiles; k++) {
		struct cf_slot *x = &s[k % conc];
		if (st_expired()) {
			res->error = -ETIMEDOUT;
			break;
		}
		if (x->file >= 0) {
			gpu_stream_sync(st[k % conc]);
			if (x->done != (ssize_t)ds->files[x->file].size)
				res->error = -EIO;
			else
				res->bytes += (uint64_t)x->done;
			cf_close_slot(x);
		}
		int rc = cf_open_slot(ds, k, x);
		if (rc) {
			res->error = rc;
			break;
		}
		x->size = ds->files[k].size;
		x->file_offset = 0;
		x->buf_offset = 0;
		x->done = 0;
		CUfileError_t e = cf.cuFileReadAsync(x->h, dest + (size_t)(k % conc) * slot, &x->size, &x->file_offset,
						&x->buf_offset, &x->done, st[k % conc]);
		if (e.err) {
			res->error = -e.err;
			cf_close_slot(x);
		}
	}
	for (unsigned j = 0; s && st && j < conc; j++)
		if (s[j].file >= 0) {
			gpu_stream_sync(st[j]);
			if (s[j].done != (ssize_t)ds->files[s[j].file].size)
				res->error = res->error ? res->error : -EIO;
			else
				res->bytes += (uint64_t)s[j].done;
			cf_close_slot(&s[j]);
		}
	leg_end(res, c0, t0);
	for (unsigned i = 0; st && i < conc; i++) {
		if (flags && cf.cuFileStreamDeregister)
			cf.cuFileStreamDeregister(st[i]);
		gpu_stream_destroy(st[i]);
	}
	free(st);
	free(s);
	return res->error;
}

/* ---- cuFile writes -------------------------------------------------------- */

struct cfw_ctx {
	CUfileHandle_t h;
	const char *src;
	uint64_t size, span;
	size_t call;
	atomic_int err;
};

struct cfw_arg {
	struct cfw_ctx *c;
	unsigned index;
};

static void *cfw_worker(void *arg)
{
	struct cfw_arg *a = arg;
	struct cfw_ctx *c = a->c;
	gpu_bind_thread();
	uint64_t lo = a->index * c->span, hi = lo + c->span < c->size ? lo + c->span : c->size;
	for (uint64_t off = lo; off < hi && !atomic_load(&c->err);) {
		size_t n = hi - off < c->call ? (size_t)(hi - off) : c->call;
		if (st_expired()) {
			atomic_store(&c->err, -ETIMEDOUT);
			break;
		}
		ssize_t r = cf.cuFileWrite(c->h, c->src, n, (off_t)off, (off_t)off);
		if (r <= 0) {
			atomic_store(&c->err, r == -1 ? -errno : r == 0 ? -EIO : (int)r);
			break;
		}
		off += (uint64_t)r;
	}
	return NULL;
}

int cufile_write_leg(const char *path, const void *src, uint64_t size, unsigned threads, size_t call,
		     struct leg_result *res)
{
	memset(res, 0, sizeof(*res));
	snprintf(res->config, sizeof(res->config), "cuFileWrite %u thread%s x %zu MiB, O_DIRECT, + fdatasync", threads,
		 threads == 1 ? "" : "s", call >> 20);
	if (threads < 1 || threads > 64)
		return res->error = -EINVAL;
	unlink(path);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
	if (fd < 0)
		return res->error = -errno;
	CUfileDescr_t d;
	memset(&d, 0, sizeof(d));
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = fd;
	struct cfw_ctx c = { .src = src, .size = size, .call = call };
	CUfileError_t e = cf.cuFileHandleRegister(&c.h, &d);
	if (e.err) {
		close(fd);
		return res->error = -e.err;
	}
	c.span = (size + threads - 1) / threads;
	c.span = (c.span + 4095) & ~4095ull;
	struct cfw_arg args[64];
	for (unsigned n = 0; n < threads; n++)
		args[n] = (struct cfw_arg){ &c, n };
	double c0 = cpu_now();
	uint64_t t0 = st_now_ns();
	st_run_threads(threads, cfw_worker, args, sizeof(args[0]));
	if (fdatasync(fd) && !atomic_load(&c.err))
		atomic_store(&c.err, -errno);
	res->seconds = st_seconds(t0, st_now_ns());
	res->cpu_s = cpu_now() - c0;
	res->error = atomic_load(&c.err);
	res->bytes = res->error ? 0 : size;
	res->files = 1;
	cf.cuFileHandleDeregister(c.h);
	close(fd);
	return res->error;
}
