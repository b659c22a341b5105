/*
 * test_stream_release: once opends_stream_synchronize returns for a stream
 * read, the read's handle has nothing in flight, so deregistering it at
 * once does not wait (issue 18, the imagenetish stream legs: sync,
 * deregister, close per file; the worker dropped the handle's count only
 * after the piece that woke the sync had returned, and a deregister then
 * spun, then slept 20 us). Run on hostdev (accelerator streams: each read
 * moves through staging, gates and copies).
 *
 * One handle per round on a hot file: one stream read of 64 KiB (a
 * staged operation of one piece) on a stream the library made, the stream
 * synchronized, the handle's count read (this program links the library's
 * objects), the handle deregistered. Byte-exact.
 */
#include "common.h"

#include "release_test.h"

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(120);
	const char *acc = getenv("OPENDS_ACCEL");
	if (!acc || strcmp(acc, "hostdev")) {
		printf("SKIP: needs OPENDS_ACCEL=hostdev (accelerator streams)\n");
		return 77;
	}
	char path[PATH_MAX];
	t_path(path, sizeof(path), "stream_release.bin");
	uint8_t *oracle;
	int fd = t_hot_file(path, FSIZE, hashpat, &oracle);
	t_driver_open();
	uint8_t *mem = t_xmalloc(PIECE);
	opends_stream_t s;
	OK(opends_stream_create(&s));
	unsigned busy = 0;
	for (unsigned i = 0; i < ROUNDS; i++) {
		opends_handle_t fh = t_register(fd);
		memset(mem, T_CANARY, PIECE);
		size_t size = PIECE;
		off_t off = (off_t)((i % NPIECE) * PIECE), boff = 0;
		ssize_t got = -1;
		OK(opends_stream_read(fh, mem, &size, &off, &boff, &got, s));
		OK(opends_stream_synchronize(s));
		busy += inflight_of(fh) != 0;
		OK(opends_handle_deregister(fh));
		if (got != (ssize_t)PIECE) {
			FAILF("round %u: got %zd, want %zu", i, got, PIECE);
			continue;
		}
		size_t at;
		if (t_first_diff(mem, oracle + off, PIECE, &at))
			FAILF("round %u: byte %zu differs", i, at);
	}
	OK(opends_stream_destroy(s));
	OK(opends_driver_close());
	close(fd);
	printf("handle still counted busy right after the stream's sync: %u of %u\n", busy, ROUNDS);
	CHECKF(busy == 0, "%u of %u synchronized stream reads left their handle counted in flight", busy, ROUNDS);
	free(mem);
	free(oracle);
	t_rm_dir();
	printf("OK\n");
	return 0;
}
