/*
 * The gds backend's way to the CUDA driver (src/vendor/cuda_min.h, the
 * loader's minimal mode), in the CPU suite over the stand-ins in
 * tests/gds/fake. One case per process (the loader keeps what it loaded):
 *
 *   open      OPENDS_BACKEND=gds opens over the fake libcuda and cuFile
 *   nodevice  the driver reports no GPU (FAKE_CUDA_NO_DEVICE=1): the open
 *             fails with OPENDS_PLATFORM_NOT_SUPPORTED and says cuInit
 *             found no device; a later open fails the same way
 *   nodriver  no libcuda.so.1 at all (skips where one is installed):
 *             OPENDS_PLATFORM_NOT_SUPPORTED, saying libcuda.so.1 is missing
 */
#include "../common.h"

#include <dlfcn.h>

static void expect_refused(const char *says)
{
	EXPECT_ERR(opends_driver_open(), OPENDS_PLATFORM_NOT_SUPPORTED);
	CHECKF(strstr(t_detail(), "cuFile needs a GPU") && strstr(t_detail(), says),
	       "the detail should say the GPU is missing (%s)", says);
	CHECK(opends_driver_backend() == NULL); /* nothing stays open */
}

int main(int argc, char **argv)
{
	t_watchdog(60);
	const char *c = argc > 1 ? argv[1] : "";
	if (!strcmp(c, "open")) {
		OK(opends_driver_open());
		CHECK(opends_driver_backend() && !strcmp(opends_driver_backend(), "gds"));
		OK(opends_driver_close());
	} else if (!strcmp(c, "nodevice")) {
		setenv("FAKE_CUDA_NO_DEVICE", "1", 1);
		expect_refused("cuInit failed: no CUDA-capable device is detected (CUresult 100)");
		t_phase = "again";
		expect_refused("cuInit failed");
	} else if (!strcmp(c, "nodriver")) {
		void *l = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		if (l)
			skip("a libcuda.so.1 is installed here");
		expect_refused("libcuda.so.1 not found");
	} else {
		FAILF("usage: test_gds_driver open|nodevice|nodriver");
	}
	return t_failures ? 1 : 0;
}
