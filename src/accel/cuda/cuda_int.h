/*
 * What the two files of the CUDA layer share: the devices ("places") and
 * how a call enters one's context. cuda.c: devices, memory, lanes;
 * cuda_copy.c: synchronous and peer copies; cuda_streams.c: stream-ordered
 * commands and gates.
 */
#ifndef ODS_CUDA_INT_H
#define ODS_CUDA_INT_H

#include "cuda_api.h"
#include "ods.h"

#define SYNC_STREAMS 8

/* A place device memory lives in: device N's primary context is place N;
 * a buffer of another context (cuCtxCreate) gets a place of its own after
 * the devices. Places are made once and live until close. */
struct place {
	CUcontext ctx;        /* NULL until first used (primary: retained then) */
	CUdevice cudev;
	int ordinal;
	bool retained;        /* we hold a reference on the primary context */
	bool null_used;       /* stream commands went to its default stream */
	pthread_mutex_t lock; /* sync_stream, peer_stream, peers */
	CUstream sync_stream[SYNC_STREAMS]; /* synchronous copies (sync_copy) */
	pthread_mutex_t sync_lock[SYNC_STREAMS];
	CUstream peer_stream; /* peer copies into this place */
	int peer_err;         /* first failure of a peer copy since the last wait */
	uint64_t peers_tried; /* places whose memory this one was given access to */
};

struct cuda_state {
	int ndev;                  /* CUDA devices */
	unsigned nplaces;          /* ndev + contexts of their own */
	struct place *pl[ODS_MAX_DEVICES];
	CUcontext base;            /* device 0's primary context (retained) */
	pthread_mutex_t lock;      /* making places */
};
extern struct cuda_state ods_cuda;

/* An OPENDS_* code with the detail set for a failed call: a destroyed
 * context is OPENDS_CONTEXT_MISMATCH, anything else a driver error. */
int ods_cu_fail(CUresult r, const char *what);
/* The place (made ready: context known) of index dev, or NULL. */
struct place *ods_cu_place(unsigned dev);
/* The place index of a context (made on first sight); -1 with the detail
 * set when none can be made. */
int ods_cu_place_of_ctx(CUcontext ctx, int ordinal);
/* Push a place's context on the calling thread; pop it after. */
int ods_cu_push(struct place *p);
/* p's context current on the calling thread: pushed (*pushed: pop it
 * after) unless it is current already. 0 or a code. */
int ods_cu_enter(struct place *p, bool *pushed);
void ods_cu_pop(void);

/* What memory p is: its place index; -1 for host memory (and anything the
 * driver does not know), -2 for device memory without a usable context
 * (the detail set). */
int ods_cu_place_of_ptr(const void *p);
/* set on library threads (lanes' thread_attach): cuda_copy.c's plain
 * synchronous copy is never taken there */
extern __thread bool ods_cu_tl_worker;

/* cuda_copy.c: the layer's synchronous and peer copies (struct ods_accel's) */
void ods_cu_sync_copy_setup(void); /* at open: OPENDS_CUDA_SYNC_COPY */
int ods_cu_copy_to_device(void *dst, const void *src, size_t n);
int ods_cu_copy_to_host(void *dst, const void *src, size_t n);
int ods_cu_copy_to_device_on(unsigned dev, void *dst, const void *src, size_t n);
int ods_cu_copy_to_device_begin(unsigned dev, void *dst, const void *src, size_t n, struct ods_copy_op *op);
int ods_cu_copy_to_host_begin(unsigned dev, void *dst, const void *src, size_t n, struct ods_copy_op *op);
int ods_cu_copy_end(struct ods_copy_op *op);
int ods_cu_peer_copy(unsigned dst_dev, void *dst, unsigned src_dev, const void *src, size_t n);
int ods_cu_peer_wait(unsigned dst_dev);

/* cuda_streams.c */
extern const struct ods_accel_streams ods_cuda_streams;
void ods_cuda_streams_close(void);
void ods_cuda_streams_forget(void);

#endif
