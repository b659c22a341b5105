/* The host accelerator layer: no device. In "host" mode every pointer is
 * host memory; in "hostdev" mode every pointer is treated as device memory
 * of a simulated device whose copies are memcpy, so that each backend's
 * staging path (slots, copies, ordering) runs and is tested without a GPU.
 * Neither has a context to check or anything to pin. */
#include <string.h>

#include "ods.h"

static int host_open(const struct ods_config *cfg, char *why, size_t why_len)
{
	(void)cfg;
	(void)why;
	(void)why_len;
	return 0;
}

static void host_close(void)
{
}

static enum ods_mem_kind host_classify(const void *p)
{
	(void)p;
	return ODS_MEM_HOST;
}

static enum ods_mem_kind hostdev_classify(const void *p)
{
	(void)p;
	return ODS_MEM_DEVICE;
}

static int host_copy(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

const struct ods_accel ods_accel_host = {
	.name = "host",
	.open = host_open,
	.close = host_close,
	.classify = host_classify,
	.copy_to_device = host_copy,
	.copy_to_host = host_copy,
};

const struct ods_accel ods_accel_hostdev = {
	.name = "hostdev",
	.open = host_open,
	.close = host_close,
	.classify = hostdev_classify,
	.copy_to_device = host_copy,
	.copy_to_host = host_copy,
};
