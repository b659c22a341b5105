/*
 * Several devices in one process: what the accelerator layer sees
 * (opends_device_count, opends_device_get_properties, opends_device_describe) and "read once, place
 * everywhere" (opends_sync_read_fanout).
 *
 * The fan-out reads the range from storage once, into the first target,
 * through the backend's usual path, in segments, two in flight; each
 * segment, once read, is copied from the first target to every other one
 * (GPU to GPU over a peer link where the devices have one, staged by the
 * driver otherwise) while the next segment is read. Loading replicated weights onto N GPUs
 * then costs one read of the storage (or page cache), which on a shared
 * host is the bound, plus peer copies that are an order of magnitude
 * faster (issue 19: NVLink 390 GB/s, the page cache about 45 GB/s).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ods.h"

/* A segment is read, then fanned out while the next is read: about an
 * eighth of the range, so that the last segment's copies (the only ones
 * not overlapped) are short, between 4 MiB (one read still spreads over
 * the staging engine's workers) and 128 MiB. */
#define SEGMENT_MIN ((size_t)4 << 20)
#define SEGMENT_MAX ((size_t)128 << 20)

static size_t segment_of(size_t size)
{
	size_t seg = (size / 8 + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
	return seg < SEGMENT_MIN ? SEGMENT_MIN : seg > SEGMENT_MAX ? SEGMENT_MAX : seg;
}
#define MAX_TARGETS ODS_MAX_DEVICES

OPENDS_API opends_error_t opends_device_count(unsigned *count)
{
	ODS_ENTER("opends_device_count");
	if (!count)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_device_count: count is NULL"), 0);
	*count = ods_drv.accel->device_count ? ods_drv.accel->device_count() : 0;
	return ods_ok();
}

/* 0 with *p filled, or an OPENDS_* code with the detail set */
static int props_of(const char *fn, unsigned device, opends_device_props_t *p)
{
	if (!ods_is_open())
		return ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "%s: the driver is not open", fn);
	unsigned n = ods_drv.accel->device_count ? ods_drv.accel->device_count() : 0;
	if (device >= n || !ods_drv.accel->device_props)
		return ods_fail(OPENDS_INVALID_VALUE, "%s: device %u: the %s layer has %u", fn, device,
				ods_drv.accel->name, n);
	memset(p, 0, sizeof(*p));
	p->numa_node = p->pcie_gen = p->pcie_width = -1;
	int rc = ods_drv.accel->device_props(device, p);
	/* (the driver's result code, if the layer gave one, stays backend_err) */
	return rc ? ods_fail_backend(rc, ods_backend_err_take(rc), "%s: device %u: the %s layer cannot say", fn, device,
				     ods_drv.accel->name)
		  : 0;
}

OPENDS_API opends_error_t opends_device_get_properties(unsigned device, opends_device_props_t *props)
{
	const char *fn = "opends_device_get_properties";
	ODS_ENTER(fn);
	if (!props && ods_is_open())
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "%s: props is NULL", fn), 0);
	opends_device_props_t p;
	int rc = props_of(fn, device, &p);
	if (rc)
		return ods_err(rc, 0);
	*props = p;
	return ods_ok();
}

/* appends to buf[*at..n), keeping it terminated when it runs out */
static void add(char *buf, size_t n, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t n, size_t *at, const char *fmt, ...)
{
	if (*at >= n)
		return;
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(buf + *at, n - *at, fmt, ap);
	va_end(ap);
	*at = k < 0 ? n : *at + (size_t)k;
}

OPENDS_API opends_error_t opends_device_describe(unsigned device, char *buf, size_t len)
{
	const char *fn = "opends_device_describe";
	ODS_ENTER(fn);
	if (!buf || !len)
		return ods_err(ods_is_open() ? ods_fail(OPENDS_INVALID_VALUE, "%s: buf is NULL or len is 0", fn)
					     : ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "%s: the driver is not open", fn),
			       0);
	opends_device_props_t p;
	int rc = props_of(fn, device, &p);
	if (rc)
		return ods_err(rc, 0);
	size_t at = 0;
	buf[0] = 0;
	add(buf, len, &at, "%s:%u %s", p.layer, device, p.name[0] ? p.name : "(no name)");
	if (p.pci_bus_id[0])
		add(buf, len, &at, ", PCI %s", p.pci_bus_id);
	if (p.pcie_gen > 0 || p.pcie_width > 0) {
		add(buf, len, &at, ", link PCIe");
		if (p.pcie_gen > 0)
			add(buf, len, &at, " gen %d", p.pcie_gen);
		if (p.pcie_width > 0)
			add(buf, len, &at, " x%d", p.pcie_width);
	}
	if (p.numa_node >= 0)
		add(buf, len, &at, ", NUMA node %d", p.numa_node);
	else
		add(buf, len, &at, ", NUMA node unknown");
	const char *lead = "; peers ";
	for (unsigned j = 0; j < 64; j++)
		if (p.peers >> j & 1) {
			add(buf, len, &at, "%s%s:%u%s", lead, p.layer, j, p.peers_nvlink >> j & 1 ? " (NVLink-class)" : "");
			lead = ", ";
		}
	return ods_ok();
}

/* Copy n bytes of target 0 (src) to target t. 0 or an OPENDS_* code. */
static int place(const struct ods_io *t, const struct ods_io *src, size_t at, size_t n)
{
	const struct ods_accel *a = ods_drv.accel;
	char *d = t->buf + at;
	const char *s = src->buf + at;
	if (t->mem == ODS_MEM_DEVICE && src->mem == ODS_MEM_DEVICE) {
		if (a->peer_copy)
			return a->peer_copy(t->dev, d, src->dev, s, n);
		int rc = 0;
		char *bounce = malloc(n);
		if (!bounce)
			return ods_fail(OPENDS_NOMEM_ERROR, "opends_sync_read_fanout: out of memory");
		if (!(rc = a->copy_to_host(bounce, s, n)))
			rc = a->copy_to_device(d, bounce, n);
		free(bounce);
		return rc;
	}
	if (t->mem == ODS_MEM_DEVICE)
		return a->copy_to_device(d, s, n);
	if (src->mem == ODS_MEM_DEVICE)
		return a->copy_to_host(d, s, n);
	memcpy(d, s, n);
	return 0;
}

/* Wait for the peer copies started to every device target. */
static int wait_all(const struct ods_io *io, unsigned n)
{
	int first = 0;
	uint64_t waited = 0;
	for (unsigned i = 1; i < n; i++) {
		if (io[i].mem != ODS_MEM_DEVICE || io[0].mem != ODS_MEM_DEVICE || !ods_drv.accel->peer_wait)
			continue;
		if (io[i].dev < 64 && (waited & (1ull << io[i].dev)))
			continue;
		if (io[i].dev < 64)
			waited |= 1ull << io[i].dev;
		int rc = ods_drv.accel->peer_wait(io[i].dev);
		if (rc && !first)
			first = rc;
	}
	return first;
}

OPENDS_API ssize_t opends_sync_read_fanout(opends_handle_t fh, void *const *bufs, const off_t *buf_offsets,
					   unsigned nbufs, size_t size, off_t file_offset)
{
	const char *fn = "opends_sync_read_fanout";
	ODS_ENTER_SSIZE(fn);
	if (!bufs || nbufs == 0 || nbufs > MAX_TARGETS)
		return -ods_fail(OPENDS_INVALID_VALUE, "%s: bufs is NULL or nbufs %u is not 1 to %u", fn, nbufs,
				 MAX_TARGETS);
	struct ods_io *io = calloc(nbufs, sizeof(*io));
	if (!io)
		return -ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", fn);
	ssize_t r = 0, os_err = 0;
	/* every target is checked as opends_sync_read checks its one before
	 * anything is read. The handle's direction (-EBADF, prepare's last
	 * check, with the target filled in) comes after every target's
	 * argument checks, overlap included, as for one target: an argument
	 * error is INVALID_VALUE whatever handle it meets. */
	for (unsigned i = 0; i < nbufs && r == 0; i++) {
		r = ods_io_prepare(&io[i], OPENDS_READ, fh, bufs[i], size, file_offset, buf_offsets ? buf_offsets[i] : 0);
		if (r < 0 && r > -OPENDS_ERRNO_MAX) {
			if (!os_err)
				os_err = r;
			r = 0;
		}
		if (r <= -OPENDS_ERRNO_MAX && nbufs > 1) {
			/* every check of prepare is per target: say which one */
			char why[200];
			snprintf(why, sizeof(why), "%s", opends_last_error_detail());
			ods_fail((int)-r, "%s: target %u (bufs[%u]): %s", fn, i, i, why);
		}
		for (unsigned j = 0; j < i && r == 0 && size; j++)
			if (io[i].buf < io[j].buf + size && io[j].buf < io[i].buf + size)
				r = -ods_fail(OPENDS_INVALID_VALUE, "%s: targets %u and %u overlap", fn, j, i);
	}
	if (r == 0 && os_err) {
		r = os_err;
		ods_fail((int)-r, "%s", io[0].why ? io[0].why : opends_op_status_error((int)r));
	}
	if (r < 0 || size == 0)
		goto out;
	/* Two segments in flight: the engine reads segment k + 1 while
	 * segment k, complete, is fanned out, and it never drains between
	 * segments (a drain idles every worker for about one chunk's time).
	 * The targets were checked above; each segment is checked again by
	 * opends_async_read (cheap next to a segment). */
	opends_async_future_t fut[2];
	size_t seg_at[2], seg_n[2];
	unsigned q0 = 0, nq = 0;
	size_t done = 0, next = 0;
	bool placing = true; /* false after an error or EOF: the rest is drained, not placed */
	off_t boff0 = buf_offsets ? buf_offsets[0] : 0;
	size_t seg = segment_of(size);
	for (;;) {
		while (placing && nq < 2 && next < size) {
			unsigned k = (q0 + nq) % 2;
			size_t n = size - next < seg ? size - next : seg;
			opends_error_t e = opends_async_read(fh, bufs[0], n, file_offset + (off_t)next, boff0 + (off_t)next,
							     &fut[k]);
			if (e.err) {
				r = -e.err;
				placing = false;
				break;
			}
			seg_at[k] = next;
			seg_n[k] = n;
			next += n;
			nq++;
		}
		if (!nq)
			break;
		unsigned k = q0;
		q0 = (q0 + 1) % 2;
		nq--;
		ssize_t got = opends_async_await(&fut[k]);
		if (!placing)
			continue;
		if (got < 0) {
			r = got;
			placing = false;
			continue;
		}
		for (unsigned i = 1; i < nbufs && got > 0; i++) {
			int rc = place(&io[i], &io[0], seg_at[k], (size_t)got);
			if (rc) {
				r = -rc;
				placing = false;
				break;
			}
		}
		done += (size_t)got;
		if ((size_t)got < seg_n[k])
			placing = false; /* EOF: nothing past it is placed */
	}
	int rc = wait_all(io, nbufs);
	if (r == 0)
		r = rc ? -rc : (ssize_t)done;
	if (r < 0 && r > -OPENDS_ERRNO_MAX)
		ods_fail((int)-r, "%s of %zu bytes at file offset %lld failed: %s", fn, size, (long long)file_offset,
			 opends_op_status_error((int)r));
out:
	free(io);
	return r;
}
