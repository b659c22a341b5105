/*
 * test_faults FAULTFS: I/O errors injected by faultfs (a FUSE filesystem in
 * direct_io mode over a backing directory) reach the caller as -EIO through
 * every API family, and nothing else is disturbed:
 *   1. a bad 4 KiB block: reads and writes overlapping it return -EIO
 *      through sync, async, batch and stream; operations in flight with
 *      them that do not overlap it succeed with the right data (checked
 *      against a model of the file, and writes also in the backing file);
 *      a failed write changes nothing outside its own range; once the fault
 *      is cleared the same ranges read back correctly. Also through an
 *      O_DIRECT fd where the mount allows one.
 *   2. the n-th operation fails: exactly one of a run of operations fails
 *      (an EIO is neither retried away nor duplicated).
 *   3. short transfers (at most 1000 bytes per filesystem call): every
 *      family still returns full, correct results.
 *   4. slow operations (20 ms each) in flight when a fault is armed, and
 *      others submitted after it: all complete with the right data; only
 *      the overlapping one fails.
 * Skips (77) only where /dev/fuse is missing or the mount is refused.
 */
#include "rel_mount.h"

#define FSZ (2u << 20)
#define BAD (512u * 1024) /* the bad blocks */
#define BAD2 (1536u * 1024)
#define BAD3 (1856u * 1024)
static const off_t one_bad[] = { BAD }, three_bad[] = { BAD, BAD2, BAD3 };

static uint8_t *model;
static char back_file[PATH_MAX + 64];
static uint32_t gen = 10;
static unsigned long n_checked_ops, n_failed_as_expected;

static uint8_t *abuf(size_t n)
{
	void *p;
	if (posix_memalign(&p, 4096, n ? n : 1))
		R_FAIL("posix_memalign");
	return p;
}

static void back_read(void *dst, size_t n, off_t off)
{
	int fd = open(back_file, O_RDONLY);
	if (fd < 0 || pread(fd, dst, n, off) != (ssize_t)n)
		R_FAIL("reading the backing file: %s", strerror(errno));
	close(fd);
}

static bool overlaps_bad(off_t off, size_t size, const off_t *bad, unsigned nbad)
{
	for (unsigned i = 0; i < nbad; i++)
		if (size && off < bad[i] + 4096 && off + (off_t)size > bad[i])
			return true;
	return false;
}

/* Check ops after a run: ops overlapping a bad block must have failed
 * with -EIO, the others moved everything with the right bytes. Updates the
 * model for writes (a failed write leaves each byte of its own range either
 * old or new, and nothing else changed). */
static void check_ops(const char *what, struct r_op *ops, unsigned n, const off_t *bad, unsigned nbad)
{
	for (unsigned i = 0; i < n; i++) {
		struct r_op *o = &ops[i];
		bool should_fail = overlaps_bad(o->off, o->size, bad, nbad);
		n_checked_ops++;
		if (should_fail) {
			if (o->result != -EIO)
				R_FAIL("%s: op %u (%s %zu at %lld) overlapping the bad range returned %zd, expected -EIO",
				       what, i, o->opcode == OPENDS_READ ? "read" : "write", o->size, (long long)o->off,
				       o->result);
			n_failed_as_expected++;
			if (o->opcode == OPENDS_WRITE) {
				uint8_t *now = abuf(o->size);
				back_read(now, o->size, o->off);
				for (size_t k = 0; k < o->size; k++)
					if (now[k] != model[o->off + (off_t)k] && now[k] != o->buf[k])
						R_FAIL("%s: failed write %u left byte %zu neither old nor new", what, i, k);
				memcpy(model + o->off, now, o->size);
				free(now);
			}
			continue;
		}
		if (o->result != (ssize_t)o->size)
			R_FAIL("%s: op %u (%s %zu at %lld) returned %zd, expected %zu", what, i,
			       o->opcode == OPENDS_READ ? "read" : "write", o->size, (long long)o->off, o->result,
			       o->size);
		if (o->opcode == OPENDS_READ) {
			if (memcmp(o->buf, model + o->off, o->size))
				R_FAIL("%s: op %u read wrong data", what, i);
		} else {
			memcpy(model + o->off, o->buf, o->size);
		}
	}
	/* writes: the backing file must equal the model everywhere */
	uint8_t *all = abuf(FSZ);
	back_read(all, FSZ, 0);
	for (size_t k = 0; k < FSZ; k++)
		if (all[k] != model[k])
			R_FAIL("%s: backing file differs from the model at byte %zu", what, k);
	free(all);
}

static struct r_op mk(opends_handle_t fh, int opcode, off_t off, size_t size)
{
	struct r_op o = { .fh = fh, .opcode = opcode, .size = size, .off = off, .buf = abuf(size) };
	if (opcode == OPENDS_WRITE)
		r_fill(o.buf, size, gen++, (uint64_t)off);
	else
		memset(o.buf, 0xee, size);
	return o;
}

static void free_ops(struct r_op *ops, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(ops[i].buf);
}

/* Part 1 for one handle and one family. */
static void bad_block(opends_handle_t fh, const char *fdname, enum r_family f)
{
	char what[128];
	for (int opcode = OPENDS_READ; opcode <= OPENDS_WRITE; opcode++) {
		snprintf(what, sizeof(what), "bad block, %s fd, %s %s", fdname, r_family_name[f],
			 opcode == OPENDS_READ ? "reads" : "writes");
		r_phase = "bad block";
		m_ctl("clear; eio any %u 4096; eio any %u 4096; eio any %u 4096", BAD, BAD2, BAD3);
		/* no two ranges overlap, so the outcome does not depend on order */
		struct r_op ops[] = {
			mk(fh, opcode, 0, 65536),                 /* far before: fine */
			mk(fh, opcode, BAD - 20000, 40000),       /* across a bad block */
			mk(fh, opcode, BAD + 24576, 8192),        /* just after that: fine */
			mk(fh, opcode, BAD2 + 100, 10),           /* inside a bad block */
			mk(fh, opcode, BAD - 24576, 4096),        /* just before: fine */
			mk(fh, opcode, 1u << 20, 300000),         /* large: fine */
			mk(fh, opcode, BAD3 - 150000, 190000),    /* large, across a bad block */
			mk(fh, opcode, BAD2 - 4096, 4096),        /* ends where a bad block starts */
			mk(fh, opcode, BAD2 + 4096, 5000),        /* starts where it ends */
		};
		unsigned n = sizeof(ops) / sizeof(*ops);
		r_run_ops(f, ops, n);
		check_ops(what, ops, n, three_bad, 3);
		free_ops(ops, n);

		/* cleared: the same ranges work again */
		m_ctl("clear");
		struct r_op again[] = { mk(fh, OPENDS_READ, BAD - 20000, 40000), mk(fh, OPENDS_READ, BAD2 + 100, 10),
					mk(fh, opcode, BAD3 - 150000, 190000) };
		snprintf(what, sizeof(what), "after clearing, %s fd, %s", fdname, r_family_name[f]);
		r_run_ops(f, again, 3);
		check_ops(what, again, 3, NULL, 0);
		free_ops(again, 3);
	}
}

/* Part 2: exactly one of n sequential operations fails. */
static void nth(opends_handle_t fh, enum r_family f)
{
	for (int opcode = OPENDS_READ; opcode <= OPENDS_WRITE; opcode++) {
		r_phase = "nth";
		m_ctl("clear; nth %s 3", opcode == OPENDS_READ ? "read" : "write");
		struct r_op ops[6];
		for (unsigned i = 0; i < 6; i++)
			ops[i] = mk(fh, opcode, (off_t)(i * 3 + 1) * 4096, 4096);
		r_run_ops(f, ops, 6);
		unsigned failed = 0;
		for (unsigned i = 0; i < 6; i++) {
			n_checked_ops++;
			if (ops[i].result == -EIO) {
				failed++;
				n_failed_as_expected++;
				if (opcode == OPENDS_WRITE) { /* nothing or everything */
					uint8_t now[4096];
					back_read(now, 4096, ops[i].off);
					memcpy(model + ops[i].off, now, 4096);
				}
			} else if (ops[i].result != 4096) {
				R_FAIL("nth %s: op %u returned %zd", r_family_name[f], i, ops[i].result);
			} else if (opcode == OPENDS_READ) {
				if (memcmp(ops[i].buf, model + ops[i].off, 4096))
					R_FAIL("nth %s: op %u read wrong data", r_family_name[f], i);
			} else {
				memcpy(model + ops[i].off, ops[i].buf, 4096);
			}
		}
		if (failed != 1)
			R_FAIL("nth %s %s: %u operations failed, expected exactly 1 (an EIO must be neither "
			       "retried away nor repeated)",
			       r_family_name[f], opcode == OPENDS_READ ? "read" : "write", failed);
		free_ops(ops, 6);
		m_ctl("clear");
		check_ops("after nth", NULL, 0, NULL, 0);
	}
}

/* Part 3: short transfers. */
static void short_io(opends_handle_t fh, enum r_family f)
{
	r_phase = "short";
	m_ctl("clear; short 1000");
	unsigned long before = m_stat("short");
	struct r_op ops[] = { mk(fh, OPENDS_READ, 4096, 200000), mk(fh, OPENDS_WRITE, 1u << 20, 150001),
			      mk(fh, OPENDS_READ, 777, 5000), mk(fh, OPENDS_WRITE, 300001, 70000) };
	r_run_ops(f, ops, 4);
	m_ctl("clear");
	check_ops("short transfers", ops, 4, NULL, 0);
	if (m_stat("short") == before)
		R_FAIL("faultfs made no short transfer");
	free_ops(ops, 4);
}

/* Part 4: slow operations in flight when a fault is armed. */
static void in_flight(opends_handle_t fh)
{
	r_phase = "in flight";
	m_ctl("clear; delay 20000");
	opends_async_future_t fut[17];
	struct r_op ops[17];
	for (unsigned i = 0; i < 8; i++)
		ops[i] = mk(fh, i % 2 ? OPENDS_WRITE : OPENDS_READ, (off_t)(i * 16384), 16384);
	ops[8] = mk(fh, OPENDS_READ, BAD - 4096, 12288);
	for (unsigned i = 9; i < 17; i++)
		ops[i] = mk(fh, i % 2 ? OPENDS_READ : OPENDS_WRITE, (off_t)(1u << 20) + (off_t)(i * 20000), 20000);
	for (unsigned i = 0; i < 17; i++) {
		if (i == 8)
			m_ctl("eio read %u 4096", BAD); /* armed while 0..7 are in flight */
		struct r_op *o = &ops[i];
		opends_error_t e = o->opcode == OPENDS_READ ? opends_async_read(fh, o->buf, o->size, o->off, 0, &fut[i])
							   : opends_async_write(fh, o->buf, o->size, o->off, 0, &fut[i]);
		if (e.err)
			R_FAIL("async submit %u: %s", i, opends_op_status_error(e.err));
	}
	for (unsigned i = 0; i < 17; i++)
		ops[i].result = opends_async_await(&fut[i]);
	m_ctl("clear");
	check_ops("in flight", ops, 17, one_bad, 1);
	free_ops(ops, 17);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s FAULTFS_BINARY\n", argv[0]);
		return 2;
	}
	r_watchdog(200);
	const char *tmp = r_tmpdir("faults");
	char back[PATH_MAX + 16], mnt[PATH_MAX + 16], data[PATH_MAX + 32];
	snprintf(back, sizeof(back), "%s/back", tmp);
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmp);
	snprintf(back_file, sizeof(back_file), "%s/data", back);
	mkdir(back, 0755);
	model = abuf(FSZ);
	r_fill(model, FSZ, 1, 0);
	int bfd = open(back_file, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (bfd < 0 || pwrite(bfd, model, FSZ, 0) != (ssize_t)FSZ)
		R_FAIL("writing the backing file");
	close(bfd);

	m_faultfs_start(argv[1], back, mnt);
	snprintf(data, sizeof(data), "%s/data", mnt);

	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		r_skip("backend %s cannot run here: %s", r_backend_env(), opends_last_error_detail());
	R_TRY(e);
	printf("backend %s on faultfs at %s\n", opends_driver_backend(), mnt);

	int fd = open(data, O_RDWR);
	if (fd < 0)
		R_FAIL("open %s: %s", data, strerror(errno));
	opends_handle_t fh, fhd = NULL;
	R_TRY(opends_handle_register(&fh, fd));
	int dfd = open(data, O_RDWR | O_DIRECT);
	if (dfd >= 0)
		R_TRY(opends_handle_register(&fhd, dfd));
	else
		printf("note: O_DIRECT open on the mount failed (%s); O_DIRECT part not run\n", strerror(errno));

	for (int f = 0; f < R_NFAMILIES; f++) {
		bad_block(fh, "buffered", (enum r_family)f);
		if (fhd)
			bad_block(fhd, "O_DIRECT", (enum r_family)f);
		nth(fh, (enum r_family)f);
		short_io(fh, (enum r_family)f);
		if (fhd)
			short_io(fhd, (enum r_family)f);
		printf("ok   %s: bad block, n-th operation, short transfers\n", r_family_name[f]);
		fflush(stdout);
	}
	in_flight(fh);
	printf("ok   faults armed with slow operations in flight\n");

	/* the library is still usable: a new handle, a full read */
	r_phase = "still usable";
	R_TRY(opends_handle_deregister(fh));
	R_TRY(opends_handle_register(&fh, fd));
	struct r_op last = mk(fh, OPENDS_READ, 0, FSZ);
	r_run_ops(R_SYNC, &last, 1);
	check_ops("final full read", &last, 1, NULL, 0);
	free(last.buf);

	unsigned long faults = m_stat("faults"), fops = m_stat("ops");
	if (fhd)
		R_TRY(opends_handle_deregister(fhd));
	R_TRY(opends_handle_deregister(fh));
	R_TRY(opends_driver_close());
	close(fd);
	if (dfd >= 0)
		close(dfd);
	printf("figures: %lu operations checked, %lu failed with -EIO as expected; faultfs saw %lu "
	       "reads+writes and injected %lu faults\n",
	       n_checked_ops, n_failed_as_expected, fops, faults);
	return 0;
}
