/*
 * test_rados_misc: the rados source's edges on a real cluster (skips
 * without one):
 *  - opends_handle_register_rados on the caller's own ioctx (librados
 *    loaded by the test), plain and OPENDS_SOURCE_RADOS_STRIPED; the ioctx
 *    stays the caller's;
 *  - namespaces (ns=) and percent-encoded object names;
 *  - a write past osd_max_object_size is -EFBIG; one write larger than
 *    osd_max_write_size (90 MiB) is split and lands whole;
 *  - O_WRONLY handles refuse reads (-EBADF); op_timeout=0 makes describe
 *    warn; a missing pool fails the open with OPENDS_FS_SETUP_ERROR; an
 *    object the cluster refuses to create (O_CREAT) with OPENDS_IO_ERROR;
 *  - names of 2048 bytes (osd_max_object_name_len) that differ only at
 *    the end: each handle reads and writes its own object (checked with
 *    the rados CLI), describe shows the name's head and tail around
 *    "..."; a 2049-byte name reads -ENAMETOOLONG with a detail that still
 *    ends with the offsets and the error (before, the name was cut at 199
 *    bytes in both, its tail lost and the detail's end pushed out);
 *  - 1000 open / read / deregister cycles, byte-exact (ASan: nothing leaks);
 *  - opends_source_libraries lists librados and the striper.
 */
#include <dlfcn.h>

#include "rados_util.h"

static void own_ioctx(void)
{
	t_phase = "register_rados";
	void *lib = dlopen("librados.so.2", RTLD_NOW);
	if (!lib) {
		printf("register_rados: librados.so.2 not loadable here, part skipped\n");
		return;
	}
	int (*create)(void **, const char *) = (int (*)(void **, const char *))dlsym(lib, "rados_create");
	int (*conf_read)(void *, const char *) = (int (*)(void *, const char *))dlsym(lib, "rados_conf_read_file");
	int (*connect)(void *) = (int (*)(void *))dlsym(lib, "rados_connect");
	int (*ioctx_create)(void *, const char *, void **) =
		(int (*)(void *, const char *, void **))dlsym(lib, "rados_ioctx_create");
	void (*ioctx_destroy)(void *) = (void (*)(void *))dlsym(lib, "rados_ioctx_destroy");
	void (*shutdown)(void *) = (void (*)(void *))dlsym(lib, "rados_shutdown");
	CHECK(create && conf_read && connect && ioctx_create && ioctx_destroy && shutdown);
	void *cl = NULL, *io = NULL;
	CHECK(create(&cl, NULL) == 0);
	CHECK(conf_read(cl, r_conf) == 0);
	CHECK(connect(cl) == 0);
	CHECK(ioctx_create(cl, r_pool, &io) == 0);

	char name[128];
	size_t size = 5 * T_MiB + 99;
	uint8_t *oracle = t_oracle(size, hashpat), *buf = t_xmalloc(size);
	for (int striped = 0; striped < 2; striped++) {
		snprintf(name, sizeof(name), "own-%s%s", r_tag, striped ? "-striped" : "");
		r_put(name, oracle, size, NULL, striped);
		opends_handle_t fh = NULL;
		OK(opends_handle_register_rados(&fh, io, name,
						OPENDS_SOURCE_RDONLY | (striped ? OPENDS_SOURCE_RADOS_STRIPED : 0)));
		memset(buf, 0, size);
		EXPECT_SSZ(opends_sync_read(fh, buf, size + 100, 0, 0), (ssize_t)size);
		VERIFY(buf, oracle, size, "register_rados%s read", striped ? " (striped)" : "");
		EXPECT_SSZ(opends_sync_write(fh, buf, 10, 0, 0), -EBADF);
		OK(opends_handle_deregister(fh));
		r_rm(name, NULL, striped);
	}
	/* the ioctx is still the caller's and works after deregistration */
	opends_handle_t fh = NULL;
	snprintf(name, sizeof(name), "own-missing-%s", r_tag);
	OK(opends_handle_register_rados(&fh, io, name, 0));
	EXPECT_SSZ(opends_sync_read(fh, buf, 10, 0, 0), -ENOENT);
	OK(opends_handle_deregister(fh));
	ioctx_destroy(io);
	shutdown(cl);
	free(oracle);
	free(buf);
}

static void names(void)
{
	t_phase = "namespaces and percent-encoded names";
	char name[160], url[600], extra[64];
	uint8_t data[3000], buf[4000];
	t_fill(data, 77, sizeof(data), hashpat);
	snprintf(name, sizeof(name), "ns-%s", r_tag);
	r_put(name, data, sizeof(data), "n1", false);
	snprintf(extra, sizeof(extra), "ns=n1");
	r_url(url, sizeof(url), name, extra);
	opends_handle_t fh = r_open(url, O_RDONLY);
	EXPECT_SSZ(opends_sync_read(fh, buf, sizeof(buf), 0, 0), (ssize_t)sizeof(data));
	VERIFY(buf, data, sizeof(data), "read in namespace n1");
	char d[512];
	OK(opends_describe(fh, d, sizeof(d)));
	CHECKF(strstr(d, "?ns=n1"), "describe does not name the namespace: %s", d);
	OK(opends_handle_deregister(fh));
	r_url(url, sizeof(url), name, NULL);
	fh = r_open(url, O_RDONLY);
	EXPECT_SSZ(opends_sync_read(fh, buf, sizeof(buf), 0, 0), -ENOENT);
	OK(opends_handle_deregister(fh));
	r_rm(name, "n1", false);

	snprintf(name, sizeof(name), "odd name/%s%%&?", r_tag);
	r_put(name, data, sizeof(data), NULL, false);
	char enc[300], *o = enc;
	for (const char *c = name; *c; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-')
			*o++ = *c;
		else
			o += sprintf(o, "%%%02X", (unsigned char)*c);
	}
	*o = 0;
	r_url(url, sizeof(url), enc, NULL);
	fh = r_open(url, O_RDONLY);
	EXPECT_SSZ(opends_sync_read(fh, buf, sizeof(buf), 0, 0), (ssize_t)sizeof(data));
	VERIFY(buf, data, sizeof(data), "read of \"%s\" by %s", name, url);
	OK(opends_handle_deregister(fh));
	r_rm(name, NULL, false);
}

static void long_names(void)
{
	t_phase = "2048-byte names";
	static char name[2][2049], url[2][4096];
	static uint8_t data[2][4096], buf[4096];
	for (int i = 0; i < 2; i++) {
		int k = snprintf(name[i], sizeof(name[i]), "long-%s-", r_tag);
		memset(name[i] + k, 'k', 2048 - (size_t)k - 6);
		snprintf(name[i] + 2048 - 6, 7, "-end-%c", 'A' + i);
		CHECK(strlen(name[i]) == 2048);
		r_url(url[i], sizeof(url[i]), name[i], NULL);
		t_fill(data[i], (uint64_t)(11 + i) << 20, sizeof(data[i]), hashpat);
	}
	opends_handle_t fh[2];
	for (int i = 0; i < 2; i++) {
		fh[i] = r_open(url[i], O_RDWR | O_CREAT);
		EXPECT_SSZ(opends_sync_write(fh[i], data[i], sizeof(data[i]), 0, 0), (ssize_t)sizeof(data[i]));
		char d[512];
		OK(opends_describe(fh[i], d, sizeof(d)));
		char tail[16];
		snprintf(tail, sizeof(tail), "kk-end-%c (", 'A' + i);
		CHECKF(strstr(d, "rados://") && strstr(d, "...") && strstr(d, tail),
		       "describe does not show the name's head, \"...\" and tail %s: %s", tail, d);
	}
	for (int i = 0; i < 2; i++) {
		memset(buf, 0, sizeof(buf));
		EXPECT_SSZ(opends_sync_read(fh[i], buf, sizeof(buf), 0, 0), (ssize_t)sizeof(buf));
		VERIFY(buf, data[i], sizeof(buf), "object %c read through its handle", 'A' + i);
		size_t n = 0;
		uint8_t *got = r_get(name[i], &n, NULL, false);
		CHECKF(got && n == sizeof(data[i]), "rados get of object %c: %zu bytes", 'A' + i, n);
		VERIFY(got, data[i], n, "object %c as the rados CLI reads it", 'A' + i);
		free(got);
		OK(opends_handle_deregister(fh[i]));
		r_rm(name[i], NULL, false);
	}

	t_phase = "a 2049-byte name";
	static char lname[2050], lurl[4096];
	memcpy(lname, name[0], 2048);
	lname[2048] = 'Z';
	r_url(lurl, sizeof(lurl), lname, NULL);
	opends_handle_t lh = r_open(lurl, O_RDONLY);
	EXPECT_SSZ(opends_sync_read(lh, buf, 16, 0, 0), -ENAMETOOLONG);
	const char *det = t_detail();
	CHECKF(strstr(det, "rados://") && strstr(det, "...") &&
		       strstr(det, "kk-end-AZ: read of 16 bytes at offset 0 failed at offset 0: ") &&
		       strstr(det, strerror(ENAMETOOLONG)),
	       "the detail does not name the object's head and tail, the offsets and the error: %s", det);
	OK(opends_handle_deregister(lh));
}

/* 1000 open / read / deregister cycles of rados:// handles (a keeper
 * holds the cluster connection, which handles share): byte-exact each
 * time; under ASan, LeakSanitizer at exit finds anything of ours left
 * (tests/sources/lsan-ceph.supp covers only Ceph's own libraries). */
static void cycles(void)
{
	t_phase = "1000 rados handle cycles";
	char name[128], url[512];
	uint8_t data[4096], buf[4096];
	t_fill(data, 99, sizeof(data), hashpat);
	snprintf(name, sizeof(name), "cycles-%s", r_tag);
	r_put(name, data, sizeof(data), NULL, false);
	r_url(url, sizeof(url), name, NULL);
	opends_handle_t keeper = r_open(url, O_RDONLY);
	for (int i = 0; i < 1000; i++) {
		opends_handle_t fh = r_open(url, O_RDONLY);
		memset(buf, 0, sizeof(buf));
		ssize_t r;
		if (i % 2) {
			r = opends_sync_read(fh, buf, sizeof(buf), 0, 0);
		} else {
			opends_async_future_t fu;
			OK(opends_async_read(fh, buf, sizeof(buf), 0, 0, &fu));
			r = opends_async_await(&fu);
		}
		CHECKF(r == (ssize_t)sizeof(data), "cycle %d: read %zd", i, r);
		VERIFY(buf, data, sizeof(data), "cycle %d", i);
		OK(opends_handle_deregister(fh));
	}
	OK(opends_handle_deregister(keeper));
	r_rm(name, NULL, false);
}

static void limits(void)
{
	t_phase = "object size limits";
	char name[128], url[512];
	snprintf(name, sizeof(name), "big-%s", r_tag);
	r_url(url, sizeof(url), name, NULL);
	opends_handle_t fh = r_open(url, O_RDWR | O_CREAT);
	uint8_t b[4096] = { 1 };
	EXPECT_SSZ(opends_sync_write(fh, b, sizeof(b), (off_t)200 * (off_t)T_MiB, 0), -EFBIG);
	size_t size = 96 * T_MiB; /* over osd_max_write_size (90 MiB) */
	uint8_t *src = t_xmalloc(size), *back = t_xmalloc(size);
	t_fill_seed(src, 5, size);
	double t0 = t_now();
	EXPECT_SSZ(opends_sync_write(fh, src, size, 0, 0), (ssize_t)size);
	double tw = t_now() - t0;
	t0 = t_now();
	EXPECT_SSZ(opends_sync_read(fh, back, size, 0, 0), (ssize_t)size);
	VERIFY(back, src, size, "96 MiB written in one call, read back");
	printf("96 MiB in one call: write %.0f MiB/s, read %.0f MiB/s (%s)\n", 96 / tw, 96 / (t_now() - t0),
	       opends_driver_backend());
	OK(opends_handle_deregister(fh));
	r_rm(name, NULL, false);
	free(src);
	free(back);

	t_phase = "access modes, describe, missing pool";
	snprintf(name, sizeof(name), "wo-%s", r_tag);
	r_url(url, sizeof(url), name, "op_timeout=0");
	fh = r_open(url, O_WRONLY | O_CREAT);
	EXPECT_SSZ(opends_sync_write(fh, b, sizeof(b), 0, 0), (ssize_t)sizeof(b));
	EXPECT_SSZ(opends_sync_read(fh, b, sizeof(b), 0, 0), -EBADF);
	char d[512];
	OK(opends_describe(fh, d, sizeof(d)));
	CHECKF(strstr(d, "WARNING") && strstr(d, "op timeout"), "describe without an op timeout: %s", d);
	OK(opends_handle_deregister(fh));
	r_rm(name, NULL, false);
	snprintf(url, sizeof(url), "rados://no-such-pool-%d/obj?conf=%s", (int)getpid(), r_conf);
	opends_error_t e = opends_handle_open_url(&fh, url, O_RDONLY);
	CHECKF(e.err == OPENDS_FS_SETUP_ERROR && e.backend_err == ENOENT, "missing pool: %d (%s), backend_err %d",
	       e.err, t_errname(e.err), e.backend_err);
	CHECKF(strstr(t_detail(), "no-such-pool"), "the detail does not name the pool: %s", t_detail());

	/* O_CREAT that the cluster refuses is OPENDS_IO_ERROR with its errno
	 * (sources.h): a name over osd_max_object_name_len (2048) */
	t_phase = "O_CREAT refused";
	static char lurl[4096];
	char lname[2101];
	memset(lname, 'n', sizeof(lname) - 1);
	lname[sizeof(lname) - 1] = '\0';
	snprintf(lurl, sizeof(lurl), "rados://%s/%s?conf=%s", r_pool, lname, r_conf);
	fh = NULL;
	e = opends_handle_open_url(&fh, lurl, O_RDWR | O_CREAT);
	CHECKF(e.err == OPENDS_IO_ERROR && e.backend_err > 0, "O_CREAT of a %zu-byte name: %d (%s), backend_err %d",
	       strlen(lname), e.err, t_errname(e.err), e.backend_err);
	CHECKF(strstr(t_detail(), "creating") && strstr(t_detail(), "...") &&
		       strstr(t_detail(), strerror(ENAMETOOLONG)),
	       "the detail does not say the create failed, with the name abbreviated and the error: %s", t_detail());
	CHECK(fh == NULL);
	/* a namespace over osd_max_object_namespace_len (256): the detail
	 * names it (the object's name alone is short) */
	char lns[300];
	memset(lns, 's', sizeof(lns) - 1);
	lns[sizeof(lns) - 1] = '\0';
	snprintf(lurl, sizeof(lurl), "rados://%s/short-%s?conf=%s&ns=%s", r_pool, r_tag, r_conf, lns);
	e = opends_handle_open_url(&fh, lurl, O_RDWR | O_CREAT);
	CHECKF(e.err == OPENDS_IO_ERROR && e.backend_err == ENAMETOOLONG && strstr(t_detail(), "?ns=sss") &&
		       strstr(t_detail(), strerror(ENAMETOOLONG)),
	       "O_CREAT in a 299-byte namespace: %d (%s), backend_err %d: %s", e.err, t_errname(e.err), e.backend_err,
	       t_detail());
	printf("O_CREAT refused: OPENDS_IO_ERROR, backend_err %d (%s)\n", e.backend_err, strerror(e.backend_err));
}

int main(void)
{
	r_setup();
	t_watchdog(280);
	t_driver_open();
	names();
	long_names();
	own_ioctx();
	cycles();
	limits();
	OK(opends_driver_close());
	/* opends-info's list where Ceph is installed: librados with its API
	 * version and path, the striper found */
	char libs[1024];
	OK(opends_source_libraries(libs, sizeof(libs)));
	CHECKF(strstr(libs, "librados: API ") && strstr(libs, "librados.so.2") &&
	       strstr(libs, "libradosstriper: found, ") && strstr(libs, "\nlibcephfs: "),
	       "source libraries: %s", libs);
	printf("rados misc: register_rados, namespaces, names, EFBIG, a 96 MiB write, access modes\n");
	return 0;
}
