/* What the benchmark needs of a GPU, through the CUDA driver API loaded at
 * run time: device memory to read into, copies back for verification, and
 * the pinned host → device copy ceiling. Absent a driver, gpu_open fails and
 * the benchmark uses host memory. */
#ifndef BENCH_GPU_H
#define BENCH_GPU_H

#include <stdbool.h>
#include <stddef.h>

bool gpu_open(char *why, size_t why_len); /* primary context of device 0, current on this thread */
void gpu_bind_thread(void);                /* make that context current here */
const char *gpu_name(void);
void *gpu_alloc(size_t n);                 /* device memory, or NULL */
void gpu_free(void *p);
int gpu_to_host(void *dst, const void *src, size_t n);
int gpu_from_host(void *dst, const void *src, size_t n);
void *gpu_host_alloc(size_t n);            /* pinned host memory, or NULL */
void gpu_host_free(void *p);
int gpu_count(void);                        /* devices the driver sees */
/* The primary context of device dev current on this thread (retained on
 * first use); false when there is no such device. */
bool gpu_bind_device(int dev);
void *gpu_alloc_on(int dev, size_t n);      /* device memory on dev; binds dev */
size_t gpu_free_bytes(void);                /* free memory of device 0 */
/* pinned host → device copy bandwidth in MiB/s, best of a few runs */
/* all of n GPUs' pinned copies at once (MiB/s); 0 without them */
double gpu_h2d_ceiling_ngpu(unsigned n);
double gpu_h2d_ceiling(size_t bytes);
/* a non-blocking stream of the context, its synchronisation, its end */
void *gpu_stream_create(void);
int gpu_stream_sync(void *stream);
void gpu_stream_destroy(void *stream);
void gpu_close(void);

#endif
