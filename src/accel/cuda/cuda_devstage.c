/*
 * Device staging for read-ahead (accel.h, struct ods_accel_devstage): a
 * buffer of device memory in a place's context with a stream of its own.
 * A worker queues the copy of a range it read ahead into the buffer
 * (fill); the caller's call that asks for the range queues the copy out of
 * it, within the device, on the same stream, so it runs after the fill
 * without an event, and waits for the stream. Fills of one buffer never
 * overlap: a buffer is filled again only after its copy out returned or
 * fill_wait.
 */
#include <stdlib.h>

#include "cuda_int.h"

struct dstage {
	struct place *p;
	CUdeviceptr mem;
	size_t n;
	CUstream s;
};

static void *ds_alloc(unsigned dev, size_t n)
{
	struct place *p = ods_cu_place(dev);
	if (!p) {
		ods_fail(OPENDS_INVALID_VALUE, "cuda: read-ahead buffer for unknown device %u", dev);
		return NULL;
	}
	struct dstage *d = calloc(1, sizeof(*d));
	if (!d) {
		ods_fail(OPENDS_NOMEM_ERROR, "cuda: out of memory");
		return NULL;
	}
	d->p = p;
	d->n = n;
	bool pushed;
	if (ods_cu_enter(p, &pushed)) {
		free(d);
		return NULL;
	}
	CUresult r = ods_cu.cuMemAlloc(&d->mem, n);
	if (r == CUDA_SUCCESS) {
		r = ods_cu.cuStreamCreate(&d->s, CU_STREAM_NON_BLOCKING);
		if (r != CUDA_SUCCESS)
			ods_cu.cuMemFree(d->mem);
	}
	if (pushed)
		ods_cu_pop();
	if (r != CUDA_SUCCESS) {
		ods_cu_fail(r, "a read-ahead buffer in device memory");
		free(d);
		return NULL;
	}
	return d;
}

static void ds_free(void *ds)
{
	struct dstage *d = ds;
	bool pushed;
	if (ods_cu_enter(d->p, &pushed) == 0) {
		ods_cu.cuStreamSynchronize(d->s);
		ods_cu.cuStreamDestroy(d->s);
		ods_cu.cuMemFree(d->mem);
		if (pushed)
			ods_cu_pop();
	}
	free(d);
}

static int ds_fill(void *ds, const void *src, size_t n)
{
	struct dstage *d = ds;
	bool pushed;
	int rc = n <= d->n ? ods_cu_enter(d->p, &pushed) : OPENDS_INVALID_VALUE;
	if (rc)
		return rc;
	CUresult r = ods_cu.cuMemcpyHtoDAsync(d->mem, src, n, d->s);
	if (pushed)
		ods_cu_pop();
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "queueing a read-ahead copy to the device");
}

static int ds_fill_wait(void *ds)
{
	struct dstage *d = ds;
	bool pushed;
	int rc = ods_cu_enter(d->p, &pushed);
	if (rc)
		return rc;
	CUresult r = ods_cu.cuStreamSynchronize(d->s);
	if (pushed)
		ods_cu_pop();
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "waiting for a read-ahead copy");
}

static int ds_copy_out(void *ds, void *dst, size_t n)
{
	struct dstage *d = ds;
	bool pushed;
	int rc = n <= d->n ? ods_cu_enter(d->p, &pushed) : OPENDS_INVALID_VALUE;
	if (rc)
		return rc;
	CUresult r = ods_cu.cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst, d->mem, n, d->s);
	if (r == CUDA_SUCCESS)
		r = ods_cu.cuStreamSynchronize(d->s);
	if (pushed)
		ods_cu_pop();
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "copying read-ahead bytes within the device");
}

const struct ods_accel_devstage ods_cuda_devstage = {
	.alloc = ds_alloc,
	.free = ds_free,
	.fill = ds_fill,
	.fill_wait = ds_fill_wait,
	.copy_out = ds_copy_out,
};
