/*
 * The accelerator layer's interface: what memory a pointer is, the context
 * rule, pinned host memory, copies and stream hooks. One implementation per
 * vendor under src/accel/<vendor>/; "host" is the one without a device.
 * Included by src/core/ods.h; not public.
 */
#ifndef ODS_ACCEL_H
#define ODS_ACCEL_H

struct ods_accel {
	const char *name;
	/* 0 when usable; else an OPENDS_* code with why[] filled */
	int (*open)(const struct ods_config *cfg, char *why, size_t why_len);
	void (*close)(void);
	/* what memory p is; ODS_MEM_HOST for anything the accelerator does
	 * not own */
	enum ods_mem_kind (*classify)(const void *p);
	/* 0, or OPENDS_CONTEXT_MISMATCH when the calling thread's current
	 * context differs from the one captured at open */
	int (*check_context)(void);
	/* register / deregister a buffer range (pin host memory, ...) */
	int (*buf_register)(void *p, size_t n, enum ods_mem_kind k, void **priv);
	void (*buf_deregister)(void *p, size_t n, enum ods_mem_kind k, void *priv);
	/* synchronous copies between host memory and this accelerator's
	 * memory: 0 or an OPENDS_* code */
	int (*copy_to_device)(void *dst, const void *src, size_t n);
	int (*copy_to_host)(void *dst, const void *src, size_t n);

	/* ---- optional: what a staging pipeline needs (NULL in layers without
	 * a device; uring then runs the same pipeline with synchronous copies
	 * performed when it asks whether they are done) ---------------------- */
	/* Called on each library worker thread before its first accelerator
	 * call and when it ends: make the library's context current. */
	int (*thread_attach)(void);
	void (*thread_detach)(void);
	/* n bytes (a multiple of ODS_ALIGN) of page-aligned anonymous host
	 * memory pinned for the accelerator's DMA, so io_uring can also
	 * register it as fixed buffers. NULL on failure. */
	void *(*pinned_alloc)(size_t n);
	void (*pinned_free)(void *p, size_t n);
	/* A lane: one in-order copy queue (a stream) with nfences numbered
	 * fences, owned by one worker thread. */
	void *(*lane_create)(unsigned nfences);
	void (*lane_destroy)(void *lane);
	/* Queue a copy on the lane; src (to_device) or dst (to_host) is host
	 * memory from pinned_alloc. 0 or an OPENDS_* code. */
	int (*copy_to_device_async)(void *lane, void *dst, const void *src, size_t n);
	int (*copy_to_host_async)(void *lane, void *dst, const void *src, size_t n);
	/* Fence i is reached when every copy queued on the lane before this
	 * call has completed. query: 1 reached, 0 not yet, or a negated
	 * OPENDS_* code; wait: 0 or a negated OPENDS_* code. */
	int (*fence_record)(void *lane, unsigned i);
	int (*fence_query)(void *lane, unsigned i);
	int (*fence_wait)(void *lane, unsigned i);

	/* ---- optional: stream-ordered I/O on the accelerator's own streams
	 * (docs/stream-ordering.md). NULL: opends_stream_* use the core's
	 * host-ordered queues. Each stream_* call below queues one command
	 * after everything queued on the stream before it: 0, or an OPENDS_*
	 * code with nothing queued. -------------------------------------------- */
	int (*stream_create)(void **stream);   /* 0 or an OPENDS_* code */
	int (*stream_destroy)(void *stream);   /* waits for the stream first */
	int (*stream_sync)(void *stream);
	/* fn(arg) is called when the stream gets here, on a thread that must
	 * not call the accelerator, and must return at once; later work on
	 * the stream does not wait for what it starts. */
	int (*stream_call)(void *stream, void (*fn)(void *arg), void *arg);
	/* A gate holds later work on a stream until gate_open (any thread,
	 * once). gate_get gives a closed one (NULL when out of memory); each
	 * goes to stream_wait once or back through gate_put. A gate whose
	 * stream_wait failed is lost: it may still be opened, and is never
	 * handed out again. */
	void *(*gate_get)(void);
	void (*gate_put)(void *gate);
	int (*stream_wait)(void *stream, void *gate);
	void (*gate_open)(void *gate);
	/* a copy between host memory from pinned_alloc and device memory */
	int (*stream_copy)(void *stream, void *dst, const void *src, size_t n, bool to_device);
	/* A counter the stream writes and the host reads: how the host
	 * learns how far a stream got without a host function, which holds
	 * the stream for a round trip to the host. counter_get gives one at
	 * 0 (NULL when out of memory); counter_put takes it back once no
	 * queued stream_mark can still write it. */
	void *(*counter_get)(void);
	void (*counter_put)(void *counter);
	int (*stream_mark)(void *stream, void *counter, uint32_t value);
	uint32_t (*counter_read)(void *counter);
};

/* The host layer in two modes: "host" (every pointer is host memory) and
 * "hostdev" (a simulated device: every pointer is treated as device memory
 * and copies are memcpy, so the staging paths of every backend run and are
 * tested on machines without a GPU). */
extern const struct ods_accel ods_accel_host;
extern const struct ods_accel ods_accel_hostdev;
/* CUDA driver API loaded at run time (src/accel/cuda/cuda.c) */
extern const struct ods_accel ods_accel_cuda;

#endif
