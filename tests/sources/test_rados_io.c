/*
 * test_rados_io: RADOS objects through every family, on a real cluster
 * (skips without one: rados_util.h), checked against the rados CLI.
 *  - reads of a plain object put by `rados put`: whole, odd offsets and
 *    sizes across 4 MiB pieces, short at the end, 0 after it; nothing
 *    outside the target is written;
 *  - a missing object is -ENOENT (sync detail names it); writes through a
 *    read-only handle are -EBADF;
 *  - writes (O_CREAT) land byte-exact as `rados get` sees them;
 *  - a striped object (striper=1) written and read back, as
 *    `rados --striper get` sees it.
 * Runs per backend and accelerator layer.
 */
#include "families.h"
#include "rados_util.h"

#define PLAIN ((size_t)9 * T_MiB + 4321)

static void read_case(opends_handle_t fh, enum fam fm, const uint8_t *oracle, size_t osize, off_t foff, size_t size,
		      off_t boff)
{
	size_t want = t_expect_read(osize, (uint64_t)foff, size);
	size_t blen = (size_t)boff + size + 64;
	uint8_t *buf = t_xmalloc(blen);
	ssize_t r = do_io(fm, OPENDS_READ, fh, buf, size, foff, boff);
	CHECKF(r == (ssize_t)want, "%s read of %zu at %lld: %zd (%s), want %zu", fam_name[fm], size, (long long)foff,
	       r, r < 0 ? t_errname(r) : "bytes", want);
	if (r == (ssize_t)want) {
		VERIFY(buf + boff, oracle + foff, want, "%s read of %zu at %lld", fam_name[fm], size, (long long)foff);
		VERIFY_CANARY(buf, (size_t)boff, "%s read: bytes before buf_offset", fam_name[fm]);
		VERIFY_CANARY(buf + boff + want, blen - (size_t)boff - want, "%s read: bytes after the result",
			      fam_name[fm]);
	}
	free(buf);
}

static void reads(void)
{
	t_phase = "reads of a plain object";
	char name[128], url[512];
	snprintf(name, sizeof(name), "plain-%s", r_tag);
	uint8_t *oracle = t_oracle(PLAIN, hashpat);
	r_put(name, oracle, PLAIN, NULL, false);
	r_url(url, sizeof(url), name, "op_timeout=60");
	opends_handle_t fh = r_open(url, O_RDONLY);
	for (int fm = 0; fm < NFAM; fm++) {
		read_case(fh, fm, oracle, PLAIN, 0, PLAIN, 0);
		read_case(fh, fm, oracle, PLAIN, 1, 5 * T_MiB + 3, 3);
		read_case(fh, fm, oracle, PLAIN, 4 * (off_t)T_MiB - 7, 3 * 4096, 1);
		read_case(fh, fm, oracle, PLAIN, (off_t)PLAIN - 100, 1000, 5);
		read_case(fh, fm, oracle, PLAIN, (off_t)PLAIN, 10, 0);
		read_case(fh, fm, oracle, PLAIN, (off_t)PLAIN + 12345, 10, 0);
	}
	uint8_t b[16];
	EXPECT_SSZ(opends_sync_write(fh, b, sizeof(b), 0, 0), -EBADF);
	char d[512];
	OK(opends_describe(fh, d, sizeof(d)));
	CHECKF(strstr(d, name) && strstr(d, "op timeout 60 s"), "describe: %s", d);
	printf("describe: %s\n", d);
	OK(opends_handle_deregister(fh));
	r_rm(name, NULL, false);
	free(oracle);

	t_phase = "a missing object";
	snprintf(name, sizeof(name), "missing-%s", r_tag);
	r_url(url, sizeof(url), name, NULL);
	fh = r_open(url, O_RDONLY);
	for (int fm = 0; fm < NFAM; fm++) {
		ssize_t r = do_io(fm, OPENDS_READ, fh, b, sizeof(b), 0, 0);
		CHECKF(r == -ENOENT, "%s read of a missing object: %zd (%s)", fam_name[fm], r, t_errname(r));
		if (fm == ASYNC)
			CHECKF(strstr(t_detail(), name) && strstr(t_detail(), "failed at offset 0"),
			       "the async detail does not name the object and offset: %s", t_detail());
	}
	EXPECT_SSZ(opends_sync_read(fh, b, sizeof(b), 0, 0), -ENOENT);
	CHECKF(strstr(t_detail(), name), "the detail does not name the object: %s", t_detail());
	OK(opends_handle_deregister(fh));
}

static void writes(bool striped)
{
	t_phase = striped ? "writes, striped" : "writes, plain";
	char url[512];
	for (int fm = 0; fm < NFAM; fm++) {
		char name[128];
		snprintf(name, sizeof(name), "w-%s-%s%s", fam_name[fm], r_tag, striped ? "-striped" : "");
		r_rm(name, NULL, striped);
		r_url(url, sizeof(url), name, striped ? "striper=1" : NULL);
		opends_handle_t fh = r_open(url, O_RDWR | O_CREAT);
		size_t size = (striped ? 10 : 6) * T_MiB + 77;
		off_t foff = 1, boff = 3;
		uint8_t *src = t_xmalloc((size_t)boff + size);
		t_fill_seed(src + boff, (uint64_t)fm + 11, size);
		ssize_t r = do_io(fm, OPENDS_WRITE, fh, src, size, foff, boff);
		CHECKF(r == (ssize_t)size, "%s write of %zu: %zd (%s)", fam_name[fm], size, r, t_errname(r));
		size_t n = 0;
		uint8_t *got = r_get(name, &n, NULL, striped);
		CHECKF(got && n == (size_t)foff + size, "rados get %s: %s, %zu bytes", name, got ? "ok" : "failed", n);
		if (got && n == (size_t)foff + size) {
			CHECKF(got[0] == 0, "byte 0 (never written) is 0x%02x", got[0]);
			VERIFY(got + foff, src + boff, size, "%s write, as rados get sees it", fam_name[fm]);
			/* and read back through the library, every family */
			for (int rf = 0; rf < NFAM; rf++)
				read_case(fh, rf, got, n, 0, n + 10, 2);
		}
		free(got);
		OK(opends_handle_deregister(fh));
		r_rm(name, NULL, striped);
		free(src);
	}
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	r_setup();
	t_watchdog(280);
	t_driver_open();
	fam_open();
	reads();
	writes(false);
	writes(true);
	fam_close();
	OK(opends_driver_close());
	printf("rados io: every family byte-exact against the rados CLI (%s, %s)\n",
	       getenv("OPENDS_BACKEND") ? getenv("OPENDS_BACKEND") : "auto",
	       getenv("OPENDS_ACCEL") ? getenv("OPENDS_ACCEL") : "auto");
	return 0;
}
