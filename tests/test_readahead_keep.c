/*
 * test_readahead_keep: the buffers of a handle that read ahead are kept for
 * the next handle (src/core/stage_ra.c), so a reader that registers a
 * handle per file does not pin and unpin them each time. Linked with the
 * library's objects: the staging budget left (ods_pinned_left) shows where
 * they are. uring on the simulated device (read-ahead reads for device
 * memory), OPENDS_MAX_PINNED 200 MiB, 4 workers x 4 x 1 MiB.
 *   kept    handle A reads ahead (4 x 2 MiB reserved), is deregistered:
 *           still reserved; handle B reads ahead from them (nothing more
 *           reserved), byte-exact, served from read-ahead; a handle with
 *           8 MiB calls does not fit them and reserves its own
 *   off     OPENDS_RA_KEEP=0: given back with each handle
 *   close   the driver's close gives them back (reopened: all left)
 *   reclaim a handle whose buffers fit the budget only with the kept set's
 *           share given back: the kept set is freed and it reads ahead
 *   depth   OPENDS_RA_DEPTH=1, 4 (and 9, 0, "2x": the default 3): depth + 1
 *           buffers reserved, served, byte-exact
 */
#include "common.h"

#include <stdbool.h>

size_t ods_pinned_left(void);
bool ods_pinned_reserve(size_t n);
void ods_pinned_release(size_t n);

#define MiB ((size_t)1 << 20)
#define FSIZE (40 * MiB + 777)

static char path[PATH_MAX];
static uint8_t *oracle;

static void open_driver(void)
{
	static const opends_setting_t set[] = { { "OPENDS_MAX_PINNED", "200m" },
						{ "OPENDS_IO_THREADS", "4" },
						{ "OPENDS_QUEUE_DEPTH", "4" },
						{ "OPENDS_CHUNK_SIZE", "1m" } };
	OK(opends_driver_open_with(set, sizeof(set) / sizeof(set[0])));
}

/* a handle reads ncall calls of S bytes from the start, byte-exact; the
 * calls served from read-ahead; *during: the budget left before deregistering */
static unsigned long reader(size_t S, unsigned ncall, size_t *during)
{
	int fd = t_open(path, O_RDONLY, false);
	opends_handle_t fh = t_register(fd);
	uint8_t *mem = t_xmalloc(S);
	for (unsigned k = 0; k < ncall; k++) {
		EXPECT_SSZ(opends_sync_read(fh, mem, S, (off_t)(k * S), 0), (ssize_t)S);
		VERIFY(mem, oracle + k * S, S, "call %u of %zu bytes", k, S);
	}
	unsigned long n = t_ra_served(fh);
	*during = ods_pinned_left();
	OK(opends_handle_deregister(fh));
	close(fd);
	free(mem);
	return n;
}

static void c_kept(void)
{
	open_driver();
	size_t left0 = ods_pinned_left(), during;
	unsigned long n = reader(2 * MiB, 8, &during);
	CHECKF(n > 0 && during == left0 - 8 * MiB, "A: served %lu, reserved %zu", n, left0 - during);
	CHECKF(ods_pinned_left() == during, "A's buffers not kept: %zu MiB left, %zu while A read", ods_pinned_left() >> 20,
	       during >> 20);
	n = reader(2 * MiB, 8, &during);
	CHECKF(n > 0 && during == left0 - 8 * MiB, "B: served %lu, reserved %zu (kept ones reused: 8 MiB)", n,
	       left0 - during);
	n = reader(8 * MiB, 5, &during);
	CHECKF(n > 0 && during == left0 - 8 * MiB - 32 * MiB,
	       "C (8 MiB calls): served %lu, reserved %zu (the kept 8 MiB and its own 32)", n, left0 - during);
	/* C's set is not kept: one set only */
	CHECKF(ods_pinned_left() == left0 - 8 * MiB, "after C: %zu reserved", left0 - ods_pinned_left());
	OK(opends_driver_close());
	printf("kept: handle B read ahead in A's buffers, C's larger calls in their own\n");
}

static void c_off(void)
{
	setenv("OPENDS_RA_KEEP", "0", 1);
	open_driver();
	size_t left0 = ods_pinned_left(), during;
	unsigned long n = reader(2 * MiB, 8, &during);
	CHECKF(n > 0 && during == left0 - 8 * MiB, "served %lu, reserved %zu", n, left0 - during);
	CHECKF(ods_pinned_left() == left0, "OPENDS_RA_KEEP=0: %zu still reserved", left0 - ods_pinned_left());
	OK(opends_driver_close());
}

static void c_close(void)
{
	open_driver();
	size_t left0 = ods_pinned_left(), during;
	CHECK(reader(2 * MiB, 8, &during) > 0);
	CHECK(ods_pinned_left() < left0);
	OK(opends_driver_close());
	open_driver();
	CHECKF(ods_pinned_left() == left0, "after a close and an open: %zu reserved", left0 - ods_pinned_left());
	OK(opends_driver_close());
}

static void c_reclaim(void)
{
	open_driver();
	size_t during;
	CHECK(reader(2 * MiB, 8, &during) > 0); /* 8 MiB kept */
	/* 60 MiB left: 8 MiB calls want 4 x 8 = 32, more than half of it;
	 * with the kept 8 back, 68 MiB left, and 32 fits half of that */
	size_t left1 = ods_pinned_left(), pad = left1 - 60 * MiB;
	CHECK(left1 > 60 * MiB && ods_pinned_reserve(pad));
	unsigned long n = reader(8 * MiB, 5, &during);
	CHECKF(n > 0 && during == 36 * MiB, "served %lu, %zu MiB left while reading (36: the kept set given back)", n,
	       during >> 20);
	CHECKF(ods_pinned_left() == 36 * MiB, "after: %zu MiB left (its own set kept)", ods_pinned_left() >> 20);
	ods_pinned_release(pad);
	OK(opends_driver_close());
	printf("reclaim: the kept set gave its budget back to a handle that needed it\n");
}

static void depth_case(const char *v, unsigned nb)
{
	setenv("OPENDS_RA_DEPTH", v, 1);
	open_driver();
	size_t left0 = ods_pinned_left(), during;
	unsigned long n = reader(2 * MiB, 8, &during);
	CHECKF(n > 0 && during == left0 - nb * 2 * MiB, "OPENDS_RA_DEPTH=%s: served %lu, reserved %zu MiB (%u buffers)",
	       v, n, (left0 - during) >> 20, nb);
	OK(opends_driver_close());
}

static void c_depth(void)
{
	depth_case("1", 2);
	depth_case("4", 5);
	depth_case("2", 3);
	depth_case("9", 4);
	depth_case("0", 4);
	depth_case("2x", 4);
}

int main(int argc, char **argv)
{
	const char *c = t_args(argc, argv);
	t_watchdog(120);
	setenv("OPENDS_BACKEND", "uring", 1);
	setenv("OPENDS_ACCEL", "hostdev", 1);
	t_path(path, sizeof(path), "keep.bin");
	t_write_pattern_file(path, FSIZE, hashpat);
	oracle = t_oracle(FSIZE, hashpat);
	usleep(150 * 1000); /* read-ahead waits for a file 100 ms unchanged */
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = { { "kept", c_kept },	    { "off", c_off },	  { "close", c_close },
		      { "reclaim", c_reclaim }, { "depth", c_depth } };
	bool ok = true;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!c || !strcmp(c, cases[i].name))
			ok &= t_case_in_child(cases[i].name, cases[i].fn);
	free(oracle);
	return ok && !t_failures ? 0 : 1;
}
