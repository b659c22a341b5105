/* --source URL: the read caller legs (seq16m, rand4k) on a source handle
 * (opends_handle_open_url, e.g. a Ceph RADOS object) instead of a file,
 * through OpenDS only (no peer reads such a URL). The object's bytes are
 * not the benchmark's generated content, so they are not verified; sizes
 * are (every call must return what it asked for). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <opends.h>

#include "bench.h"
#include "stats.h"

#define CALL ((size_t)16 << 20)

struct src_leg {
	const char *mode;
	char *dest;
	double *lat;
	unsigned nreads;
	uint64_t seed;
};

static int src_once(void *ctx, struct leg_result *r)
{
	struct src_leg *x = ctx;
	bool seq = !strcmp(x->mode, "seq16m");
	uint64_t total = seq ? opt.source_size : (uint64_t)x->nreads * 4096;
	char label[64];
	snprintf(label, sizeof(label), "%s source", x->mode);
	progress_start(label, total);
	double c0 = cpu_now();
	uint64_t t0 = st_now_ns();
	opends_handle_t fh;
	opends_error_t e = opends_handle_open_url(&fh, opt.source, O_RDONLY);
	if (e.err)
		r->error = (int)e.err;
	uint64_t span = opt.source_size / 4096, st = x->seed;
	for (uint64_t off = 0, i = 0; !r->error && (seq ? off < opt.source_size : i < x->nreads); i++) {
		if (st_expired()) {
			r->error = -ETIMEDOUT;
			break;
		}
		size_t n = seq ? (opt.source_size - off < CALL ? (size_t)(opt.source_size - off) : CALL) : 4096;
		uint64_t at = off;
		if (!seq) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			at = ((st >> 20) % (span ? span : 1)) * 4096;
		}
		uint64_t s = st_now_ns();
		ssize_t got = opends_sync_read(fh, x->dest, n, (off_t)at, seq ? (off_t)at : 0);
		if (!seq)
			x->lat[i] = (double)(st_now_ns() - s) / 1e3;
		if (got != (ssize_t)n)
			r->error = got < 0 ? (int)got : -EIO;
		else
			progress_add(n);
		off += n;
	}
	if (!e.err)
		opends_handle_deregister(fh);
	r->seconds = st_seconds(t0, st_now_ns());
	r->cpu_s = cpu_now() - c0;
	progress_stop();
	r->bytes = r->error ? 0 : total;
	r->files = 1;
	if (!r->error && !seq) {
		r->p50_us = st_percentile(x->lat, x->nreads, 50);
		r->p99_us = st_percentile(x->lat, x->nreads, 99);
	}
	snprintf(r->config, sizeof(r->config), "%s of %.60s (not verified)",
		 seq ? "opends_sync_read 16 MiB calls" : "opends_sync_read 4 KiB at random offsets", opt.source);
	return r->error;
}

void run_source(void)
{
	if (opt.source_size < 4096) {
		fprintf(stderr, "opends-bench: --source needs --source-size (the object's bytes, a whole number of MiB, at least 16M)\n");
		bench_failures++;
		return;
	}
	char *dest = dest_alloc(opt.source_size);
	double *lat = calloc(opt.rand_reads, sizeof(*lat));
	if (!dest || !lat) {
		fprintf(stderr, "--source: cannot allocate %llu MiB of destination memory\n",
			(unsigned long long)(opt.source_size >> 20));
		bench_failures++;
		goto out;
	}
	char list[256];
	snprintf(list, sizeof(list), "%s", opt.backends);
	for (char *save = NULL, *b = strtok_r(list, ",", &save); b; b = strtok_r(NULL, ",", &save)) {
		if (!strcmp(b, "none") || !bench_driver_open(b, "source"))
			continue;
		char name[64];
		snprintf(name, sizeof(name), "opends:%s", opends_driver_backend());
		static const char *const legs[] = { "seq16m", "rand4k" };
		for (unsigned i = 0; i < 2; i++) {
			if (!in_list(opt.callers, legs[i]) && !in_list(opt.callers, "all"))
				continue;
			struct src_leg x = { legs[i], dest, lat, opt.rand_reads, 0x4a11 };
			struct leg_result r;
			repeat_leg(src_once, &x, &r);
			struct rec k = { "source", legs[i], name, "-", opt.use_gpu ? "device" : "host", 1, 0,
					 i ? 4096 : CALL, 0 };
			record(&k, &r);
		}
		opends_driver_close();
	}
out:
	free(lat);
	if (dest)
		dest_free(dest);
}
