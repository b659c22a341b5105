/*
 * test_batch_release: once opends_batch_get_status hands back an entry, its
 * handle has nothing in flight, so deregistering it at once does not wait
 * (issue 17, imagenetish hot batch: the worker dropped the handle's count
 * only after waking the collector, and a collector that deregistered the
 * file at once spun, then slept 20 us, on about 5 % of files). Futures:
 * await returns the bytes, and the handle's count is dropped no later
 * than a few instructions after (reported, not asserted).
 *
 * One handle per round on a hot file: one batch entry (or one future) of
 * 64 KiB, collected, then the handle's count read (this program links the
 * library's objects) and the handle deregistered. Byte-exact. Backend and
 * memory from the environment (OPENDS_BACKEND, OPENDS_ACCEL).
 */
#include "common.h"

#include "release_test.h"

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(120);
	char path[PATH_MAX];
	t_path(path, sizeof(path), "batch_release.bin");
	uint8_t *oracle;
	int fd = t_hot_file(path, FSIZE, hashpat, &oracle);
	t_driver_open();
	uint8_t *mem = t_xmalloc(PIECE);
	opends_batch_t b;
	OK(opends_batch_setup(&b, 1));
	unsigned busy_batch = 0, busy_future = 0;
	for (unsigned i = 0; i < ROUNDS; i++) {
		off_t off = (off_t)((i % NPIECE) * PIECE);
		bool batch = i % 2 == 0;
		opends_handle_t fh = t_register(fd);
		memset(mem, T_CANARY, PIECE);
		ssize_t got;
		if (batch) {
			opends_io_params_t p = t_batch_entry(fh, OPENDS_READ, mem, PIECE, off, 0, NULL);
			OK(opends_batch_submit(b, 1, &p, 0));
			opends_io_events_t ev;
			t_batch_collect(b, 1, &ev, 30);
			busy_batch += inflight_of(fh) != 0;
			got = ev.status == OPENDS_COMPLETE ? ev.ret : -1;
		} else {
			opends_async_future_t f;
			OK(opends_async_read(fh, mem, PIECE, off, 0, &f));
			got = opends_async_await(&f);
			busy_future += inflight_of(fh) != 0;
		}
		OK(opends_handle_deregister(fh));
		if (got != (ssize_t)PIECE) {
			FAILF("round %u (%s): got %zd, want %zu", i, batch ? "batch" : "future", got, PIECE);
			continue;
		}
		size_t at;
		if (t_first_diff(mem, oracle + off, PIECE, &at))
			FAILF("round %u (%s): byte %zu differs", i, batch ? "batch" : "future", at);
	}
	OK(opends_batch_destroy(b));
	OK(opends_driver_close());
	close(fd);
	printf("handle still counted busy right after collection: batch entries %u of %u, futures %u of %u\n",
	       busy_batch, ROUNDS / 2, busy_future, ROUNDS / 2);
	CHECKF(busy_batch == 0, "%u of %u collected batch entries left their handle counted in flight", busy_batch,
	       ROUNDS / 2);
	free(mem);
	free(oracle);
	t_rm_dir();
	printf("OK\n");
	return 0;
}
