/*
 * One call per I/O family for the source tests: a read or write through
 * sync, async (submit + await), batch (one entry, waited for) or stream
 * (queued, then synchronized), each returning what the family reports.
 * fam_open (after the driver) makes the batch and stream they use.
 */
#ifndef FAMILIES_H
#define FAMILIES_H

#include "../common.h"

enum fam { SYNC, ASYNC, BATCH, STREAM, NFAM };
static const char *fam_name[] __attribute__((unused)) = { "sync", "async", "batch", "stream" };

static opends_batch_t batch;
static opends_stream_t stream;
static bool hostdev; /* OPENDS_ACCEL=hostdev: every buffer is "device memory" */

static ssize_t do_io(enum fam fm, int op, opends_handle_t fh, void *buf, size_t size, off_t foff, off_t boff)
{
	switch (fm) {
	case SYNC:
		return op == OPENDS_READ ? opends_sync_read(fh, buf, size, foff, boff)
					 : opends_sync_write(fh, buf, size, foff, boff);
	case ASYNC: {
		opends_async_future_t f;
		opends_error_t e = op == OPENDS_READ ? opends_async_read(fh, buf, size, foff, boff, &f)
						     : opends_async_write(fh, buf, size, foff, boff, &f);
		if (e.err)
			return -(ssize_t)e.err;
		return opends_async_await(&f);
	}
	case BATCH: {
		opends_io_params_t p;
		memset(&p, 0, sizeof(p));
		p.mode = OPENDS_BATCH;
		p.u.batch.buf_base = buf;
		p.u.batch.file_offset = foff;
		p.u.batch.buf_offset = boff;
		p.u.batch.size = size;
		p.fh = fh;
		p.opcode = (opends_opcode_t)op;
		p.cookie = (void *)(uintptr_t)0x5eed;
		OK(opends_batch_submit(batch, 1, &p, 0));
		opends_io_events_t ev;
		unsigned nr = 1;
		struct timespec ts = { 60, 0 };
		OK(opends_batch_get_status(batch, 1, &nr, &ev, &ts));
		CHECKF(nr == 1 && ev.cookie == (void *)(uintptr_t)0x5eed, "batch: %u events", nr);
		CHECKF(ev.status == OPENDS_COMPLETE || ev.status == OPENDS_FAILED, "batch status 0x%x", ev.status);
		CHECKF((ev.status == OPENDS_FAILED) == (ev.ret < 0), "batch status 0x%x with ret %zd", ev.status, ev.ret);
		return ev.ret;
	}
	case STREAM: {
		size_t sz = size;
		off_t fo = foff, bo = boff;
		ssize_t res = 12345678;
		opends_error_t e = op == OPENDS_READ ? opends_stream_read(fh, buf, &sz, &fo, &bo, &res, stream)
						     : opends_stream_write(fh, buf, &sz, &fo, &bo, &res, stream);
		if (e.err)
			return -(ssize_t)e.err;
		OK(opends_stream_synchronize(stream));
		return res;
	}
	default:
		return -1;
	}
}

static inline void fam_open(void)
{
	const char *acc = getenv("OPENDS_ACCEL");
	hostdev = acc && !strcmp(acc, "hostdev");
	OK(opends_batch_setup(&batch, 4));
	OK(opends_stream_create(&stream));
}

static inline void fam_close(void)
{
	OK(opends_stream_destroy(stream));
	OK(opends_batch_destroy(batch));
}

#endif
