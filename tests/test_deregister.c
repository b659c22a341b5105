/*
 * opends_handle_deregister with requests of the handle still in flight
 * (async futures and a batch): it waits for them to finish, on every
 * backend, so nothing uses the handle or its fds after it returns (before:
 * ref's pool workers used the freed handle; ASan reported a use after
 * free). When it returns every future has completed (poll gives 1), with
 * its bytes in place, byte-exact; the fd is then the caller's to close.
 */
#include "common.h"

#define N 48
#define SZ ((size_t)512 * T_KiB)
#define FSIZE (N * SZ)

static void round_async(const char *path, const uint8_t *oracle, bool direct, uint8_t *mem)
{
	int fd = t_open(path, O_RDONLY, direct);
	if (fd == -2)
		return;
	opends_handle_t fh = t_register(fd);
	opends_async_future_t f[N];
	memset(f, 0, sizeof(f));
	memset(mem, T_CANARY, FSIZE);
	for (int i = 0; i < N; i++)
		OK(opends_async_read(fh, mem, SZ, (off_t)((size_t)i * SZ), (off_t)((size_t)i * SZ), &f[i]));
	OK(opends_handle_deregister(fh));
	int still = 0;
	for (int i = 0; i < N; i++)
		still += opends_async_poll(&f[i]) != 1;
	CHECKF(still == 0, "%s: %d of %d reads still in flight after deregister returned", direct ? "O_DIRECT" : "buffered",
	       still, N);
	close(fd); /* the caller's fd: nothing of the library uses it any more */
	for (int i = 0; i < N; i++)
		EXPECT_SSZ(opends_async_await(&f[i]), (ssize_t)SZ);
	VERIFY(mem, oracle, FSIZE, "%s: async reads before deregister", direct ? "O_DIRECT" : "buffered");
}

static void round_batch(const char *path, const uint8_t *oracle, uint8_t *mem)
{
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	opends_batch_t b;
	OK(opends_batch_setup(&b, N));
	opends_io_params_t p[N];
	memset(p, 0, sizeof(p));
	memset(mem, T_CANARY, FSIZE);
	for (int i = 0; i < N; i++)
		p[i] = t_batch_entry(fh, OPENDS_READ, mem, SZ, (off_t)((size_t)i * SZ), (off_t)((size_t)i * SZ), NULL);
	OK(opends_batch_submit(b, N, p, 0));
	OK(opends_handle_deregister(fh));
	close(fd);
	opends_io_events_t ev[N];
	t_batch_collect(b, N, ev, 60);
	for (unsigned i = 0; i < N; i++)
		CHECKF(ev[i].status == OPENDS_COMPLETE && ev[i].ret == (ssize_t)SZ, "batch entry %u: status %d ret %zd", i,
		       (int)ev[i].status, ev[i].ret);
	OK(opends_batch_destroy(b));
	VERIFY(mem, oracle, FSIZE, "batch reads before deregister");
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(240);
	char path[PATH_MAX];
	t_path(path, sizeof(path), "dereg.bin");
	t_write_pattern_file(path, FSIZE, hashpat);
	uint8_t *oracle = t_oracle(FSIZE, hashpat);
	uint8_t *mem = t_xmalloc(FSIZE);
	t_driver_open();
	for (int round = 0; round < 3; round++) {
		round_async(path, oracle, false, mem);
		round_async(path, oracle, true, mem);
		round_batch(path, oracle, mem);
	}
	OK(opends_driver_close());
	printf("deregister with %d reads in flight: waited for them, byte-exact (async buffered, O_DIRECT, batch)\n", N);
	free(mem);
	free(oracle);
	t_rm_dir();
	return 0;
}
