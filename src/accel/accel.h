/*
 * The accelerator layer's interface: what memory a pointer is and on which
 * device, copies, pinned host memory, copy lanes and stream hooks. One
 * implementation per vendor under src/accel/<vendor>/; "host" is the one
 * without a device. Compiles on its own (plain types in ods_types.h);
 * included at the top of src/core/ods.h; not public.
 *
 * Devices: a layer numbers the places device memory lives in, 0 to
 * ODS_MAX_DEVICES - 1 ("devices"; for CUDA, device N's primary context is
 * N, and a buffer of any other context gets a number of its own). The
 * device of a buffer is found from the pointer, per operation; the thread's
 * current context does not matter (API.md, "Accelerator context —
 * revised").
 *
 * The table is a base every layer fills plus capability groups, each NULL
 * when the layer does not offer it (xNVMe's sub-tables).
 */
#ifndef ODS_ACCEL_H
#define ODS_ACCEL_H

#include <sched.h>

#include "../core/ods_types.h"

struct opends_device_props; /* include/opends.h */

/* ---- pinned host memory and buffer registration ------------------------- */
struct ods_accel_mem {
	/* register / deregister a buffer range (pin host memory, ...) */
	int (*buf_register)(void *p, size_t n, enum ods_mem_kind k, void **priv);
	void (*buf_deregister)(void *p, size_t n, enum ods_mem_kind k, void *priv);
	/* n bytes (a multiple of 4096) of page-aligned anonymous host memory
	 * pinned for DMA by every device (portable), so io_uring can also
	 * register it as fixed buffers. NULL on failure. */
	void *(*pinned_alloc)(size_t n);
	void (*pinned_free)(void *p, size_t n);
};

/* ---- copy lanes: what a staging pipeline needs ----------------------------
 * Without this group (host, hostdev) the pipeline runs with synchronous
 * copies performed when it asks whether they are done. */
struct ods_accel_lanes {
	/* Called on each library worker thread before its first lane call and
	 * when it ends. Lane calls are made on such threads only, which the
	 * layer may switch between device contexts as it likes. */
	int (*thread_attach)(void);
	void (*thread_detach)(void);
	/* A lane: in-order copy queues, one per device the lane's copies go to
	 * (made on first use), with nfences numbered fences; owned by one
	 * worker thread. */
	void *(*lane_create)(unsigned nfences);
	void (*lane_destroy)(void *lane);
	/* Queue a copy on the lane, on the queue of the device that owns the
	 * device side (found from the pointer); the host side is memory from
	 * mem->pinned_alloc. 0 or an OPENDS_* code. */
	int (*copy_to_device_async)(void *lane, void *dst, const void *src, size_t n);
	int (*copy_to_host_async)(void *lane, void *dst, const void *src, size_t n);
	/* Fence i is reached when the copy queued on the lane just before this
	 * call, and all before it on the same device's queue, have completed.
	 * query: 1 reached, 0 not yet, or a negated OPENDS_* code; wait: 0 or
	 * a negated OPENDS_* code. */
	int (*fence_record)(void *lane, unsigned i);
	int (*fence_query)(void *lane, unsigned i);
	int (*fence_wait)(void *lane, unsigned i);
};

/* ---- stream-ordered I/O on the accelerator's own streams ------------------
 * (docs/stream-ordering.md). Without this group, opends_stream_* use the
 * core's host-ordered queues. Each command hook queues one command after
 * everything queued on the stream before it, in the context of device dev
 * (from stream_device): 0, or an OPENDS_* code with nothing queued. */
struct ods_accel_streams {
	/* The device whose context the commands of an operation on stream run
	 * in, for a buffer of kind k on device buf_dev (buf_dev unused for
	 * host memory). A stream made by the caller is of one device: a device
	 * buffer of another gives OPENDS_CONTEXT_MISMATCH (the detail names
	 * both), as does a stream whose context was destroyed. The NULL
	 * (default) stream is taken on the buffer's device. */
	int (*stream_device)(void *stream, enum ods_mem_kind k, unsigned buf_dev, unsigned *dev);
	/* a new stream: of the device whose context is current on the calling
	 * thread, else of device 0; 0 or an OPENDS_* code */
	int (*stream_create)(void **stream);
	int (*stream_destroy)(void *stream); /* waits for the stream first */
	/* wait for the stream (NULL: every default stream the library used) */
	int (*stream_sync)(void *stream);
	/* fn(arg) is called when the stream gets here, on a thread that must
	 * not call the accelerator, and must return at once; later work on
	 * the stream does not wait for what it starts. */
	int (*stream_call)(unsigned dev, void *stream, void (*fn)(void *arg), void *arg);
	/* A gate holds later work on a stream until gate_open (any thread,
	 * once). gate_get gives a closed one (NULL when out of memory), usable
	 * on every device; each goes to stream_wait once or back through
	 * gate_put. A gate whose stream_wait failed is lost: it may still be
	 * opened, and is never handed out again. */
	void *(*gate_get)(void);
	void (*gate_put)(void *gate);
	int (*stream_wait)(unsigned dev, void *stream, void *gate);
	void (*gate_open)(void *gate);
	/* a copy between host memory from mem->pinned_alloc (or any host
	 * memory where mem is NULL) and device memory of dev */
	int (*stream_copy)(unsigned dev, void *stream, void *dst, const void *src, size_t n, bool to_device);
	/* A counter the stream writes and the host reads: how the host
	 * learns how far a stream got without a host function, which holds
	 * the stream for a round trip to the host. counter_get gives one at
	 * 0 (NULL when out of memory); counter_put takes it back once no
	 * queued stream_mark can still write it. */
	void *(*counter_get)(void);
	void (*counter_put)(void *counter);
	int (*stream_mark)(unsigned dev, void *stream, void *counter, uint32_t value);
	uint32_t (*counter_read)(void *counter);
	/* Optional: true when everything queued on stream so far has run
	 * (cuStreamQuery's CUDA_SUCCESS), so that an operation queued now is
	 * reached at once; false when work is pending or it is not known (a
	 * default stream, an error). Never waits. */
	bool (*stream_idle)(unsigned dev, void *stream);
};

/* A copy begun by copy_to_device_begin, for copy_end: the layer's own */
struct ods_copy_op {
	void *a;
	const void *b;
	size_t n;
	unsigned i;
};

struct ods_accel {
	const char *name;
	/* 0 when usable; else an OPENDS_* code with why[] filled */
	int (*open)(const struct ods_config *cfg, char *why, size_t why_len);
	void (*close)(void);
	/* Optional: in the child after fork(), drop every reference to the
	 * parent's streams, threads and pinned state without freeing, joining
	 * or locking anything (only the forking thread exists there); the
	 * next open starts clean, and fails cleanly where the device cannot
	 * be used in a forked child. */
	void (*forget)(void);
	/* What memory p is; for device memory, *dev is its device. Anything
	 * the accelerator does not own is ODS_MEM_HOST. */
	enum ods_mem_kind (*classify)(const void *p, unsigned *dev);
	/* How many devices the layer sees (0 for host). */
	unsigned (*device_count)(void);
	/* What the layer knows of device dev (name, bus, link, NUMA node,
	 * peers) into *p, which the caller zeroed with every number at -1; 0
	 * or OPENDS_INVALID_VALUE. NULL: no devices to describe. */
	int (*device_props)(unsigned dev, struct opends_device_props *p);
	/* Synchronous copies between host memory and device memory (whose
	 * device is found from the pointer): 0 or an OPENDS_* code. */
	int (*copy_to_device)(void *dst, const void *src, size_t n);
	int (*copy_to_host)(void *dst, const void *src, size_t n);
	/* Optional: copy_to_device into memory of dev, the device classify
	 * gave for dst (no second lookup of dst). NULL: copy_to_device. */
	int (*copy_to_device_on)(unsigned dev, void *dst, const void *src, size_t n);
	/* Optional pair: copy_to_device_on in two halves, so that the calling
	 * thread can do other work while the copy runs. begin queues it (dev:
	 * as copy_to_device_on's): 0 (then copy_end must follow, on the same
	 * thread, before the thread copies anything else) or an OPENDS_* code
	 * (nothing to end). end waits for it: 0 or an OPENDS_* code. NULL:
	 * copy_to_device_on. */
	int (*copy_to_device_begin)(unsigned dev, void *dst, const void *src, size_t n, struct ods_copy_op *op);
	/* Optional: the same from device memory of dev to host memory,
	 * ended by copy_end (src/core/stage_wr.c). NULL: not offered. */
	int (*copy_to_host_begin)(unsigned dev, void *dst, const void *src, size_t n, struct ods_copy_op *op);
	int (*copy_end)(struct ods_copy_op *op);
	/* Start a copy of n bytes from device memory of src_dev to device
	 * memory of dst_dev: GPU to GPU where peer access exists, staged by the
	 * driver otherwise. peer_wait(dst_dev) waits for every copy started to
	 * dst_dev: 0 or the first failure (an OPENDS_* code). */
	int (*peer_copy)(unsigned dst_dev, void *dst, unsigned src_dev, const void *src, size_t n);
	int (*peer_wait)(unsigned dst_dev);

	const struct ods_accel_mem *mem;         /* NULL: nothing to pin */
	const struct ods_accel_lanes *lanes;     /* NULL: synchronous copies */
	const struct ods_accel_streams *streams; /* NULL: host-ordered queues */
};

/* ---- the NUMA node of a device (src/accel/near.c) --------------------------
 * A library thread that copies to or from a device runs best on the CPUs of
 * the device's NUMA node. ods_accel_near_cpus gives them: true with *set =
 * the CPUs of device dev's node (device_props' numa_node) that the process
 * may use (its affinity when the driver opened); false when there is nothing
 * to prefer: node unknown, or that node holds every allowed CPU (machines of
 * one node) or none. Cached per device until the next open. Each layer with
 * devices calls ods_accel_near_open at open (node_root: the folder of
 * node<N>/cpulist, NULL for /sys/devices/system/node) and
 * ods_accel_near_forget from its forget hook. */
void ods_accel_near_open(const char *node_root);
void ods_accel_near_forget(void);
bool ods_accel_near_cpus(unsigned dev, cpu_set_t *set);

/* The host layer in two modes: "host" (every pointer is host memory) and
 * "hostdev" (simulated devices: every pointer is device memory, copies are
 * memcpy, so the staging paths of every backend run and are tested on
 * machines without a GPU; OPENDS_HOSTDEV_DEVICES=N simulates N devices,
 * see host.c). */
extern const struct ods_accel ods_accel_host;
extern const struct ods_accel ods_accel_hostdev;
/* CUDA driver API loaded at run time (src/accel/cuda/cuda.c) */
extern const struct ods_accel ods_accel_cuda;

#endif
