/*
 * Hooks of the gds backend that the core does not call yet: they wait for
 * the fields proposed for struct ods_backend (see docs/gds.md, "Core hooks
 * wanted"). Until then they are compiled and unused.
 */
#ifndef ODS_GDS_H
#define ODS_GDS_H

#include "ods.h"

/* Registered buffers: register device ranges with cuFileBufRegister.
 * Best effort - a range cuFile refuses is still registered with OpenDS and
 * read through cuFile's bounce buffers. *priv is non-NULL when cuFile has
 * the range. Returns 0. */
int ods_gds_buf_register(void *p, size_t n, enum ods_mem_kind k, void **priv);
void ods_gds_buf_deregister(void *p, size_t n, enum ods_mem_kind k, void *priv);

/* Stream-ordered I/O on an accelerator stream through cuFileReadAsync /
 * cuFileWriteAsync. Returns 0 when enqueued on the stream, 1 when this
 * backend does not take it (handle served by the POSIX path, no stream
 * API in the loaded cuFile: the core queues it its own way), or an
 * OPENDS_* code. */
int ods_gds_stream_rw(int opcode, struct ods_handle *h, void *buf, size_t *size, off_t *file_offset,
		      off_t *buf_offset, ssize_t *result, void *stream);
/* cuFileStreamRegister / Deregister for a stream; 0 or an OPENDS_* code;
 * 1 when the loaded cuFile has no stream API. */
int ods_gds_stream_register(void *stream, unsigned flags);
int ods_gds_stream_deregister(void *stream);

#endif
