/*
 * A stand-in libcuda.so.1 for the CPU suite's gds tests: the driver calls
 * the gds backend makes before and around cuFile (a GPU is present, a
 * context is current), answered as on a machine with one GPU. They are the
 * loader's minimal table (src/vendor/cuda_min.h), which refuses a library
 * without any one of them. FAKE_CUDA_NO_DEVICE=1 makes cuInit answer as on
 * a machine without a GPU (tests/gds/test_gds_driver.c). The data
 * itself is host memory presented as device memory by the hostdev layer,
 * and fake_cufile.c moves it. Only tests load it, through LD_LIBRARY_PATH.
 */
#include <stdlib.h>

#pragma GCC visibility push(default) /* the project builds with hidden */
int cuInit(unsigned flags);
int cuGetErrorString(int error, const char **str);
int cuDeviceGetCount(int *count);
int cuCtxGetCurrent(void **ctx);
int cuCtxSetCurrent(void *ctx);
int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr);

static char the_ctx;

int cuInit(unsigned flags)
{
	const char *nodev = getenv("FAKE_CUDA_NO_DEVICE");
	if (nodev && *nodev == '1')
		return 100; /* CUDA_ERROR_NO_DEVICE */
	return flags == 0 ? 0 : 1; /* CUDA_ERROR_INVALID_VALUE */
}

int cuGetErrorString(int error, const char **str)
{
	if (!str)
		return 1;
	*str = error == 0 ? "no error" : error == 100 ? "no CUDA-capable device is detected" : "an error of the fake libcuda";
	return 0;
}

int cuDeviceGetCount(int *count)
{
	if (!count)
		return 1;
	*count = 1;
	return 0;
}

int cuCtxGetCurrent(void **ctx)
{
	if (!ctx)
		return 1;
	*ctx = &the_ctx;
	return 0;
}

int cuCtxSetCurrent(void *ctx)
{
	(void)ctx;
	return 0;
}

int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr)
{
	(void)attribute;
	(void)ptr;
	if (data)
		*(void **)data = &the_ctx;
	return 0;
}
#pragma GCC visibility pop
