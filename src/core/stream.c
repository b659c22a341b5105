/*
 * Stream-ordered I/O: the public calls and their argument checks. The work
 * is done by one of two engines (stream.h), chosen once when the driver
 * opens: on the accelerator's own streams when the layer has stream hooks
 * (stream_accel.c), else on library-owned host queues (stream_host.c).
 * Either way the arguments behind the caller's pointers are read when the
 * stream reaches the operation.
 */
#include "stream.h"

#define KNOWN_FLAGS                                                                                     \
	(OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET | OPENDS_STREAM_FIXED_FILE_SIZE | \
	 OPENDS_STREAM_PAGE_ALIGNED_INPUTS)

static const struct ods_stream_engine *engine; /* chosen by ods_streams_init */

int ods_streams_init(void)
{
	engine = ods_drv.accel->streams ? &ods_stream_accel : &ods_stream_host;
	return engine->init();
}

void ods_streams_fini(void)
{
	engine->fini(); /* engine stays: a call racing with close finds the driver closing */
}

void ods_streams_forget(void)
{
	ods_stream_host.forget();
	ods_stream_accel.forget();
}

#define REQUIRE_OPEN(fn) ODS_ENTER(fn) /* also holds close off until the call returns (gate.h) */

static opends_error_t enqueue(const char *fn, int opcode, opends_handle_t fh, const void *buf, size_t *size,
			      off_t *file_offset, off_t *buf_offset, ssize_t *result, opends_stream_t stream)
{
	if (!ods_is_open())
		return ods_err(ods_fail(OPENDS_DRIVER_NOT_INITIALIZED, "%s: the driver is not open", fn), 0);
	const char *null = !fh ? "fh" : !buf ? "buf" : !size ? "size" : !file_offset ? "file_offset"
		: !buf_offset ? "buf_offset" : !result ? (opcode == OPENDS_READ ? "bytes_read" : "bytes_written")
							: NULL;
	if (null)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "%s: %s is NULL", fn, null), 0);
	if (!ods_handle_lookup(fh))
		return ods_err(ods_fail(OPENDS_HANDLE_NOT_REGISTERED, "%s: fh is not a registered handle", fn), 0);
	const struct ods_sargs args = { opcode, fh, buf, size, file_offset, buf_offset, result };
	return engine->enqueue(fn, &args, stream);
}

OPENDS_API opends_error_t opends_stream_read(opends_handle_t fh, void *buf, size_t *size, off_t *file_offset,
					     off_t *buf_offset, ssize_t *bytes_read, opends_stream_t stream)
{
	ODS_ENTER("opends_stream_read");
	return enqueue("opends_stream_read", OPENDS_READ, fh, buf, size, file_offset, buf_offset, bytes_read,
		       stream);
}

OPENDS_API opends_error_t opends_stream_write(opends_handle_t fh, const void *buf, size_t *size,
					      off_t *file_offset, off_t *buf_offset, ssize_t *bytes_written,
					      opends_stream_t stream)
{
	ODS_ENTER("opends_stream_write");
	return enqueue("opends_stream_write", OPENDS_WRITE, fh, buf, size, file_offset, buf_offset, bytes_written,
		       stream);
}

OPENDS_API opends_error_t opends_stream_create(opends_stream_t *stream)
{
	REQUIRE_OPEN("opends_stream_create");
	if (!stream)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_create: stream is NULL"), 0);
	return engine->create(stream);
}

OPENDS_API opends_error_t opends_stream_destroy(opends_stream_t stream)
{
	REQUIRE_OPEN("opends_stream_destroy");
	return engine->destroy(stream);
}

OPENDS_API opends_error_t opends_stream_register(opends_stream_t stream, unsigned flags)
{
	REQUIRE_OPEN("opends_stream_register");
	if (flags & ~KNOWN_FLAGS)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_register: unknown flag bits 0x%x",
					flags & ~KNOWN_FLAGS),
			       0);
	return engine->reg(stream, flags);
}

OPENDS_API opends_error_t opends_stream_deregister(opends_stream_t stream)
{
	REQUIRE_OPEN("opends_stream_deregister");
	if (!engine->dereg(stream))
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_stream_deregister: stream %p is not registered",
					stream),
			       0);
	return ods_ok();
}

OPENDS_API opends_error_t opends_stream_synchronize(opends_stream_t stream)
{
	REQUIRE_OPEN("opends_stream_synchronize");
	return engine->sync(stream);
}
