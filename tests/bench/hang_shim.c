/* LD_PRELOAD shim for bench_smoke.py's hung-leg case: opends_stream_synchronize
 * never returns, as the 8 GiB stream leg did on the H200 (a061cd5), so the
 * test sees opends-bench record the leg as hung and end with exit status 3. */
#include <unistd.h>

#include <opends.h>

opends_error_t opends_stream_synchronize(opends_stream_t stream)
{
	(void)stream;
	for (;;)
		pause();
}
