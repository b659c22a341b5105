/*
 * rados_goals: one leg of the issue-20 measurement (rados-goals.sh runs
 * the legs in alternating rounds). Reads every object named in LIST (one
 * name a line, e.g. what `rados bench write` left) whole, DEPTH at a time,
 * into one pre-faulted host buffer, and prints "MiB/s objects/s cpu_s":
 *   rados_goals aio    CONF POOL LIST DEPTH   plain rados_aio_read
 *   rados_goals opends CONF POOL LIST DEPTH   opends_async_read on
 *                                             rados:// handles (one per
 *                                             object), OPENDS_BACKEND /
 *                                             OPENDS_ACCEL as set
 *   rados_goals batch  CONF POOL LIST DEPTH   the same through one batch
 *                                             of DEPTH entries at a time
 *   rados_goals put    CONF POOL LIST 1       writes the objects of LIST
 *                                             (4 KiB to 256 KiB each)
 * Objects are at most 4 MiB + 1 (bigger ones are cut there). Not a test:
 * it checks nothing but the byte counts.
 */
#include <dlfcn.h>
#include <sys/resource.h>

#include "../common.h"

#define MAXOBJ ((size_t)4 * T_MiB)

static char **names;
static size_t nnames;

static void load_list(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		exit(2);
	}
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!*line)
			continue;
		names = realloc(names, (nnames + 1) * sizeof(*names));
		names[nnames++] = strdup(line);
	}
	fclose(f);
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e-6;
}

/* ---- plain librados aio ---------------------------------------------------- */

static int (*r_aio_read)(void *, const char *, void *, char *, size_t, uint64_t);
static int (*r_create_completion)(void *, void *, void *, void **);
static int (*r_wait)(void *);
static int (*r_ret)(void *);
static void (*r_release)(void *);

static size_t run_aio(void *io, char *buf, unsigned depth)
{
	void **c = calloc(depth, sizeof(*c));
	size_t *who = calloc(depth, sizeof(*who)), total = 0, next = 0;
	unsigned inflight = 0, head = 0;
	while (next < nnames || inflight) {
		while (inflight < depth && next < nnames) {
			unsigned k = (head + inflight) % depth;
			r_create_completion(NULL, NULL, NULL, &c[k]);
			r_aio_read(io, names[next], c[k], buf + (size_t)k * MAXOBJ, MAXOBJ, 0);
			who[k] = next++;
			inflight++;
		}
		r_wait(c[head]);
		int r = r_ret(c[head]);
		if (r < 0) {
			fprintf(stderr, "aio read of %s: %d\n", names[who[head]], r);
			exit(1);
		}
		total += (size_t)r;
		r_release(c[head]);
		head = (head + 1) % depth;
		inflight--;
	}
	free(c);
	free(who);
	return total;
}

/* ---- OpenDS ---------------------------------------------------------------- */

static opends_handle_t *open_all(const char *conf, const char *pool)
{
	opends_handle_t *fh = calloc(nnames, sizeof(*fh));
	for (size_t i = 0; i < nnames; i++) {
		char url[1024];
		snprintf(url, sizeof(url), "rados://%s/%s?conf=%s", pool, names[i], conf);
		opends_error_t e = opends_handle_open_url(&fh[i], url, O_RDONLY);
		if (e.err) {
			fprintf(stderr, "open_url %s: %s\n", url, opends_last_error_detail());
			exit(1);
		}
	}
	return fh;
}

static size_t run_opends(opends_handle_t *fh, char *buf, unsigned depth)
{
	opends_async_future_t *f = calloc(depth, sizeof(*f));
	size_t total = 0, next = 0;
	unsigned inflight = 0, head = 0;
	while (next < nnames || inflight) {
		while (inflight < depth && next < nnames) {
			unsigned k = (head + inflight) % depth;
			opends_async_read(fh[next++], buf, MAXOBJ, 0, (off_t)k * (off_t)MAXOBJ, &f[k]);
			inflight++;
		}
		ssize_t r = opends_async_await(&f[head]);
		if (r < 0) {
			fprintf(stderr, "opends read: %zd %s\n", r, opends_last_error_detail());
			exit(1);
		}
		total += (size_t)r;
		head = (head + 1) % depth;
		inflight--;
	}
	free(f);
	return total;
}

static size_t run_batch(opends_handle_t *fh, char *buf, unsigned depth)
{
	opends_batch_t b;
	opends_batch_setup(&b, depth);
	opends_io_params_t *p = calloc(depth, sizeof(*p));
	opends_io_events_t *ev = calloc(depth, sizeof(*ev));
	size_t total = 0, next = 0;
	unsigned inflight = 0;
	unsigned *freek = calloc(depth, sizeof(*freek)), nfree = depth;
	for (unsigned k = 0; k < depth; k++)
		freek[k] = k;
	while (next < nnames || inflight) {
		unsigned n = 0;
		while (nfree && next < nnames) {
			unsigned k = freek[--nfree];
			memset(&p[n], 0, sizeof(p[n]));
			p[n].mode = OPENDS_BATCH;
			p[n].u.batch.buf_base = buf;
			p[n].u.batch.buf_offset = (off_t)k * (off_t)MAXOBJ;
			p[n].u.batch.size = MAXOBJ;
			p[n].fh = fh[next++];
			p[n].opcode = OPENDS_READ;
			p[n].cookie = (void *)(uintptr_t)k;
			n++;
		}
		if (n && opends_batch_submit(b, n, p, 0).err) {
			fprintf(stderr, "batch submit: %s\n", opends_last_error_detail());
			exit(1);
		}
		inflight += n;
		unsigned got = depth;
		opends_batch_get_status(b, 1, &got, ev, NULL);
		for (unsigned i = 0; i < got; i++) {
			if (ev[i].ret < 0) {
				fprintf(stderr, "batch entry: %zd\n", ev[i].ret);
				exit(1);
			}
			total += (size_t)ev[i].ret;
			freek[nfree++] = (unsigned)(uintptr_t)ev[i].cookie;
		}
		inflight -= got;
	}
	opends_batch_destroy(b);
	free(p);
	free(ev);
	free(freek);
	return total;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s aio|opends|batch CONF POOL LIST DEPTH\n", argv[0]);
		return 2;
	}
	const char *mode = argv[1], *conf = argv[2], *pool = argv[3];
	unsigned depth = (unsigned)atoi(argv[5]);
	load_list(argv[4]);
	char *buf = t_xmalloc(depth * MAXOBJ); /* pre-faulted (t_xmalloc fills it) */
	size_t total;
	double t0, c0;
	if (!strcmp(mode, "aio")) {
		void *lib = dlopen("librados.so.2", RTLD_NOW);
		int (*create)(void **, const char *) = (int (*)(void **, const char *))dlsym(lib, "rados_create");
		int (*conf_read)(void *, const char *) = (int (*)(void *, const char *))dlsym(lib, "rados_conf_read_file");
		int (*connect)(void *) = (int (*)(void *))dlsym(lib, "rados_connect");
		int (*ioctx_create)(void *, const char *, void **) =
			(int (*)(void *, const char *, void **))dlsym(lib, "rados_ioctx_create");
		*(void **)&r_aio_read = dlsym(lib, "rados_aio_read");
		*(void **)&r_create_completion = dlsym(lib, "rados_aio_create_completion");
		*(void **)&r_wait = dlsym(lib, "rados_aio_wait_for_complete");
		*(void **)&r_ret = dlsym(lib, "rados_aio_get_return_value");
		*(void **)&r_release = dlsym(lib, "rados_aio_release");
		void *cl, *io;
		if (create(&cl, NULL) || conf_read(cl, conf) || connect(cl) || ioctx_create(cl, pool, &io)) {
			fprintf(stderr, "librados setup failed\n");
			return 1;
		}
		t0 = t_now();
		c0 = cpu_s();
		total = run_aio(io, buf, depth);
	} else if (!strcmp(mode, "put")) {
		/* make the objects of LIST: 4 KiB to 256 KiB each */
		if (opends_driver_open().err)
			return 1;
		/* one handle open throughout keeps the cluster connection:
		 * without it every object connects anew (slow, and under load
		 * a connect can time out) */
		char kurl[1024];
		opends_handle_t keep;
		snprintf(kurl, sizeof(kurl), "rados://%s/%s?conf=%s", pool, names[0], conf);
		if (opends_handle_open_url(&keep, kurl, O_RDWR | O_CREAT).err) {
			fprintf(stderr, "put %s: %s\n", kurl, opends_last_error_detail());
			return 1;
		}
		for (size_t i = 0; i < nnames; i++) {
			char url[1024];
			opends_handle_t fh;
			snprintf(url, sizeof(url), "rados://%s/%s?conf=%s", pool, names[i], conf);
			size_t n = 4096 * (1 + (size_t)t_splitmix64(i) % 64);
			if (opends_handle_open_url(&fh, url, O_RDWR | O_CREAT).err ||
			    opends_sync_write(fh, buf, n, 0, 0) != (ssize_t)n) {
				fprintf(stderr, "put %s: %s\n", url, opends_last_error_detail());
				return 1;
			}
			opends_handle_deregister(fh);
		}
		opends_handle_deregister(keep);
		opends_driver_close();
		return 0;
	} else {
		if (opends_driver_open().err) {
			fprintf(stderr, "driver open: %s\n", opends_last_error_detail());
			return 1;
		}
		opends_handle_t *fh = open_all(conf, pool);
		t0 = t_now();
		c0 = cpu_s();
		total = !strcmp(mode, "batch") ? run_batch(fh, buf, depth) : run_opends(fh, buf, depth);
	}
	double dt = t_now() - t0, dc = cpu_s() - c0;
	printf("%.1f %.1f %.3f\n", (double)total / T_MiB / dt, (double)nnames / dt, dc / ((double)total / 1e9));
	return 0;
}
