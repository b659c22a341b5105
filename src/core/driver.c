/* Driver lifecycle: configuration, choice of accelerator layer and
 * backend, and the properties the caller can query. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ods.h"

struct ods_driver ods_drv;

/* Order matters: auto takes the first backend whose probe succeeds, so the
 * fastest come first. */
const struct ods_backend *const ods_backends[] = {
#ifdef ODS_HAVE_GDS
	&ods_backend_gds,
#endif
#ifdef ODS_HAVE_URING
	&ods_backend_uring,
#endif
	&ods_backend_ref,
	NULL,
};

const struct ods_accel *const ods_accels[] = {
#ifdef ODS_HAVE_CUDA
	&ods_accel_cuda,
#endif
	&ods_accel_host,
	&ods_accel_hostdev, /* only when asked for: auto stops at host */
	NULL,
};

static int choose_accel(const struct ods_config *cfg, const struct ods_accel **out)
{
	char why[200] = "";
	bool any = !strcmp(cfg->accel, "auto");
	for (const struct ods_accel *const *a = ods_accels; *a; a++) {
		if (!any && strcmp((*a)->name, cfg->accel))
			continue;
		int rc = (*a)->open(cfg, why, sizeof(why));
		if (rc == 0) {
			*out = *a;
			return 0;
		}
		if (!any)
			return ods_fail(rc, "OPENDS_ACCEL=%s cannot be used: %s", cfg->accel, why);
	}
	return ods_fail(OPENDS_PLATFORM_NOT_SUPPORTED, "OPENDS_ACCEL=%s: this build has no such accelerator layer",
			cfg->accel);
}

static int choose_backend(const struct ods_config *cfg, const struct ods_backend **out)
{
	char why[200] = "";
	bool any = !strcmp(cfg->backend, "auto");
	for (const struct ods_backend *const *b = ods_backends; *b; b++) {
		if (!any && strcmp((*b)->name, cfg->backend))
			continue;
		why[0] = '\0';
		int rc = (*b)->probe ? (*b)->probe(cfg, why, sizeof(why)) : 0;
		if (rc == 0) {
			*out = *b;
			return 0;
		}
		if (!any)
			return ods_fail(rc, "OPENDS_BACKEND=%s cannot run here: %s", cfg->backend, why);
	}
	return ods_fail(OPENDS_PLATFORM_NOT_SUPPORTED, "OPENDS_BACKEND=%s: this build does not include it",
			cfg->backend);
}

/* fork() while open: the child starts with the driver closed. Only the
 * forking thread exists there, so nothing of the parent's engine can be
 * waited for or shut down; every module forgets its state instead (see
 * ods_registry_forget) and the child may open its own driver. */
static void after_fork_child(void)
{
	ods_gate_forget(); /* the parent's calls in progress are not here */
	if (!atomic_load_explicit(&ods_drv.open, memory_order_relaxed))
		return;
	atomic_store_explicit(&ods_drv.open, false, memory_order_relaxed);
	ods_registry_forget();
	ods_batches_forget();
	ods_streams_forget();
	ods_posix_forget();
	ods_sources_forget();
	ods_pinned_forget();
	/* the accelerator's streams and threads (hostdev, CUDA) too: their
	 * locks may be held by a parent thread that does not exist here */
	if (ods_drv.accel && ods_drv.accel->forget)
		ods_drv.accel->forget();
	memset(&ods_drv, 0, sizeof(ods_drv));
	atomic_store_explicit(&ods_inflight, 0, memory_order_relaxed);
	atomic_store_explicit(&ods_forked, true, memory_order_relaxed);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_install(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}

OPENDS_API opends_error_t opends_driver_open(void)
{
	return opends_driver_open_with(NULL, 0);
}

OPENDS_API opends_error_t opends_driver_open_with(const opends_setting_t *settings, size_t n)
{
	pthread_once(&atfork_once, atfork_install);
	/* In the reverse order of close's steps (gate CLOSING, drain, open =
	 * false, teardown, gate CLOSED): once open reads false, the gate reads
	 * CLOSING while close still tears down, CLOSED once it is done. The
	 * other order could read OPEN, then false after close's open = false,
	 * and set up a driver that close then tears down. */
	if (ods_is_open() && ods_gate_state() != ODS_GATE_CLOSING)
		return ods_err(ods_fail(OPENDS_DRIVER_ALREADY_OPEN, "opends_driver_open: the driver is already open"),
			       0);
	if (ods_is_open() || ods_gate_state() == ODS_GATE_CLOSING)
		return ods_err(ods_fail(OPENDS_DRIVER_ALREADY_OPEN, "opends_driver_open: the driver is still open: "
					"opends_driver_close is in progress on another thread"),
			       0);
	struct ods_driver d = { 0 };
	int rc = ods_config_load_with(&d.cfg, settings, n);
	if (rc)
		return ods_err(rc, 0);
	if ((rc = choose_accel(&d.cfg, &d.accel)))
		return ods_err(rc, 0);
	if ((rc = choose_backend(&d.cfg, &d.be))) {
		d.accel->close();
		return ods_err(rc, 0);
	}
	ods_drv.cfg = d.cfg;
	ods_drv.accel = d.accel;
	ods_drv.be = d.be;
	ods_registry_init();
	if ((rc = d.be->open(&ods_drv.cfg, d.accel)))
		goto fail_be;
	if (!d.be->submit) {
		unsigned threads = d.cfg.io_threads ? d.cfg.io_threads : 4;
		unsigned depth = d.cfg.queue_depth ? d.cfg.queue_depth : 32;
		ods_drv.pool = ods_pool_create(threads, threads * depth, &ods_drv.cfg);
		if (!ods_drv.pool) {
			rc = ods_fail(OPENDS_INTERNAL_ERROR, "opends_driver_open: could not start %u worker threads",
				      threads);
			goto fail_pool;
		}
	}
	if ((rc = ods_streams_init()))
		goto fail_streams;
	atomic_store_explicit(&ods_forked, false, memory_order_relaxed);
	atomic_store_explicit(&ods_drv.open, true, memory_order_release);
	ods_gate_open();
	return ods_ok();

fail_streams:
	if (ods_drv.pool)
		ods_pool_destroy(ods_drv.pool);
	ods_drv.pool = NULL;
fail_pool:
	d.be->close();
fail_be:
	ods_registry_fini();
	d.accel->close();
	ods_drv.be = NULL;
	ods_drv.accel = NULL;
	return ods_err(rc, errno);
}

int ods_enter(struct ods_gate_pass *p, const char *fn)
{
	int st = ods_gate_enter(p);
	if (st == 0)
		return 0;
	if (st == ODS_GATE_CLOSING)
		return ods_fail(OPENDS_DRIVER_NOT_INITIALIZED,
				"%s: the driver is closing (opends_driver_close is in progress on another thread)", fn);
	return ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "%s: the driver is not open", fn);
}

/* Close from another thread than the calls in progress: it marks the
 * driver closing (calls that start now are refused with
 * DRIVER_NOT_INITIALIZED), waits for the calls inside to return (gate.h),
 * then drains and frees. From inside a call or a callback the library runs
 * (a source's read, write, release or describe, possibly on a library
 * thread or a stream's host function) it would wait for itself: it is
 * refused with INVALID_VALUE and the driver stays open. */
OPENDS_API opends_error_t opends_driver_close(void)
{
	if (ods_gate_busy_here()) /* before "not open": close's own callbacks run after open is cleared */
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_driver_close: called from inside an OpenDS call or a callback it runs (a "
					"source's read, write, release or describe); close waits for those to return: "
					"close from another thread, after it returned"),
			       0);
	if (!ods_is_open())
		return ods_err(ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "opends_driver_close: the driver is not open"),
			       0);
	if (!ods_gate_begin_close())
		return ods_err(ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "opends_driver_close: the driver is closing "
					"(opends_driver_close is in progress on another thread)"),
			       0);
	ods_gate_drain();
	/* Drain everything that can still complete, then tear down in the
	 * reverse order of open. */
	ods_streams_fini();
	ods_batches_fini();
	if (ods_drv.pool)
		ods_pool_destroy(ods_drv.pool);
	ods_drv.pool = NULL;
	/* futures nobody awaited may still run on a backend's own engine */
	while (atomic_load_explicit(&ods_inflight, memory_order_acquire) > 0) {
		struct timespec ts = { 0, 100 * 1000 };
		nanosleep(&ts, NULL);
	}
	atomic_store_explicit(&ods_drv.open, false, memory_order_release);
	ods_registry_fini();
	ods_sources_fini(); /* source handles are gone: their threads and slots */
	ods_drv.be->close();
	ods_drv.accel->close();
	ods_drv.be = NULL;
	ods_drv.accel = NULL;
	ods_gate_closed();
	return ods_ok();
}

OPENDS_API opends_error_t opends_driver_get_properties(opends_drv_props_t *props)
{
	ODS_ENTER("opends_driver_get_properties");
	if (!props)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_driver_get_properties: props is NULL"), 0);
	memset(props, 0, sizeof(*props));
	props->major_version = OPENDS_VERSION_MAJOR;
	props->minor_version = OPENDS_VERSION_MINOR;
	props->max_direct_io_size = ods_drv.cfg.chunk_size ? ods_drv.cfg.chunk_size : (size_t)16 << 20;
	props->max_batch_io_size = ODS_MAX_BATCH;
	props->max_batch_io_timeout_msecs = 0;
	return ods_ok();
}

OPENDS_API opends_error_t opends_driver_get_setting(const char *name, char *value, size_t len,
						     opends_setting_source_t *source)
{
	ODS_ENTER("opends_driver_get_setting");
	return ods_err(ods_config_get(name, value, len, source), 0);
}

OPENDS_API opends_error_t opends_get_version(unsigned *major, unsigned *minor, unsigned *patch)
{
	if (major)
		*major = OPENDS_VERSION_MAJOR;
	if (minor)
		*minor = OPENDS_VERSION_MINOR;
	if (patch)
		*patch = OPENDS_VERSION_PATCH;
	return ods_ok();
}

OPENDS_API const char *opends_driver_backend(void)
{
	/* NULL when not open is its answer, not a failure: no detail */
	struct ods_gate_pass pass __attribute__((cleanup(ods_gate_leave))) = { NULL };
	if (ods_gate_enter(&pass))
		return NULL;
	return ods_drv.be->name;
}

OPENDS_API opends_error_t opends_describe(opends_handle_t fh, char *buf, size_t len)
{
	ODS_ENTER("opends_describe");
	if (!buf || !len)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_describe: buf is NULL or len is 0"), 0);
	struct ods_handle *h = NULL;
	if (fh && !(h = ods_handle_lookup(fh)))
		return ods_err(ods_fail(OPENDS_HANDLE_NOT_REGISTERED, "opends_describe: fh is not a registered handle"),
			       0);
	if (h && h->src) {
		ods_source_describe(h, buf, len);
		return ods_ok();
	}
	char extra[512] = "";
	if (ods_drv.be->describe)
		ods_drv.be->describe(h, extra, sizeof(extra));
	if (!h)
		snprintf(buf, len, "backend %s, accelerator %s%s%s", ods_drv.be->name, ods_drv.accel->name,
			 extra[0] ? "; " : "", extra);
	else
		snprintf(buf, len, "fd %d (%s%s, %s): %s", h->fd, h->blockdev ? "block device" : "regular file",
			 h->direct ? ", O_DIRECT" : "",
			 h->accmode == O_RDONLY ? "read-only" : h->accmode == O_WRONLY ? "write-only" : "read-write",
			 extra[0] ? extra : ods_drv.be->descr);
	return ods_ok();
}
