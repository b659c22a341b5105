/*
 * The reference backend: the core's POSIX path (src/core/posix_io.c) on
 * the calling thread, nothing else; the oracle every other backend is
 * tested against. Async work runs on the core's worker pool (no submit of
 * its own).
 */
#include <stdio.h>

#include "ods.h"

static int ref_probe(const struct ods_config *cfg, char *why, size_t n)
{
	(void)cfg;
	(void)why;
	(void)n;
	return 0;
}

static int ref_open(const struct ods_config *cfg, const struct ods_accel *accel)
{
	(void)cfg;
	(void)accel;
	return 0;
}

static void ref_close(void)
{
}

static void ref_describe(struct ods_handle *h, char *buf, size_t n)
{
	if (!h)
		snprintf(buf, n, "POSIX pread/pwrite on %u pool threads", ods_drv.cfg.io_threads ? ods_drv.cfg.io_threads : 4);
	else if (h->direct)
		snprintf(buf, n, "pread/pwrite: aligned blocks direct, partial blocks %s",
			 ods_handle_fd_buffered(h) >= 0 ? "through a buffered twin fd" : "through a bounce buffer");
	else
		snprintf(buf, n, "buffered pread/pwrite");
}

const struct ods_backend ods_backend_ref = {
	.name = "ref",
	.descr = "POSIX pread/pwrite on host memory; the reference for all others",
	.probe = ref_probe,
	.open = ref_open,
	.close = ref_close,
	.rw = ods_posix_rw,
	.describe = ref_describe,
};
