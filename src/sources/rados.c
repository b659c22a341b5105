/*
 * The rados source: Ceph RADOS objects, plain or striped (libradosstriper),
 * through librados' asynchronous calls. librados.so.2 (and
 * libradosstriper.so.1 for striped objects) are loaded at run time: the
 * build needs no Ceph headers, and the library runs where Ceph is absent.
 *
 * What the measurements (shared/research/distributed-sources.md) made rules:
 *  - rados_aio_read blocks its caller once the client's in-flight bytes pass
 *    objecter_inflight_op_bytes (100 MiB by default): the caps are 3/4 of
 *    that budget and of objecter_inflight_ops, shared by every handle on
 *    one cluster connection (domain = the rados_t);
 *  - a dead OSD hangs an operation forever unless rados_osd_op_timeout is
 *    set: open_url sets one (30 s unless op_timeout says otherwise) and
 *    describe warns when a handle has none;
 *  - one write op over osd_max_write_size (90 MiB) fails with -EMSGSIZE and
 *    a read op's result is an int: pieces are at most 64 MiB (max_io);
 *  - objects over osd_max_object_size (128 MiB) need striping (striper=1).
 * Reads past the end are short and 0 at/after it (pread semantics); a
 * missing object is -ENOENT. Pieces follow 4 MiB boundaries (the striper's
 * default stripe unit and object size).
 */
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/source.h"

#define UNIT ((size_t)4 << 20)
#define MAX_IO ((size_t)64 << 20)
#define DEF_TIMEOUT 30u
#define MAX_TIMEOUT 86400u

typedef void (*rcb_t)(void *completion, void *arg);

static struct {
	pthread_mutex_t lock;
	bool tried;
	int rc;            /* 0 loaded, else OPENDS_PLATFORM_NOT_SUPPORTED */
	char why[240];
	void *lib, *slib;  /* slib: libradosstriper, NULL when absent */
	int (*create)(void **, const char *);
	int (*conf_read_file)(void *, const char *);
	int (*conf_set)(void *, const char *, const char *);
	int (*conf_get)(void *, const char *, char *, size_t);
	int (*connect)(void *);
	void (*shutdown)(void *);
	int (*ioctx_create)(void *, const char *, void **);
	void (*ioctx_destroy)(void *);
	void *(*ioctx_get_cluster)(void *);
	void (*ioctx_set_namespace)(void *, const char *);
	int (*ioctx_get_pool_name)(void *, char *, unsigned);
	int (*aio_create_completion)(void *, rcb_t, rcb_t, void **);
	int (*aio_read)(void *, const char *, void *, char *, size_t, uint64_t);
	int (*aio_write)(void *, const char *, void *, const char *, size_t, uint64_t);
	int (*aio_get_return_value)(void *);
	void (*aio_release)(void *);
	int (*stat)(void *, const char *, uint64_t *, time_t *);
	void *(*create_write_op)(void);
	void (*release_write_op)(void *);
	void (*write_op_create)(void *, int, const char *);
	int (*write_op_operate)(void *, void *, const char *, time_t *, int);
	int (*striper_create)(void *, void **);
	void (*striper_destroy)(void *);
	int (*striper_aio_read)(void *, const char *, void *, char *, size_t, uint64_t);
	int (*striper_aio_write)(void *, const char *, void *, const char *, size_t, uint64_t);
	int (*striper_stat)(void *, const char *, uint64_t *, time_t *);
} rlib = { .lock = PTHREAD_MUTEX_INITIALIZER };

#define SYM(lib, field, name)                                        \
	do {                                                         \
		*(void **)&rlib.field = dlsym(lib, name);               \
		if (!rlib.field && !missing)                            \
			missing = name;                              \
	} while (0)

/* Load librados once per process (kept loaded: librados does not unload
 * cleanly). 0, or OPENDS_PLATFORM_NOT_SUPPORTED with the detail naming
 * what is missing. */
static int load(void)
{
	pthread_mutex_lock(&rlib.lock);
	if (!rlib.tried) {
		rlib.tried = true;
		const char *name = getenv("OPENDS_RADOS_LIBRARY");
		if (!name || !*name)
			name = "librados.so.2";
		/* a caller that hands us an ioctx has librados loaded: use it */
		rlib.lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
		if (!rlib.lib)
			rlib.lib = dlopen(name, RTLD_NOW);
		const char *missing = NULL;
		if (!rlib.lib) {
			const char *e = dlerror();
			snprintf(rlib.why, sizeof(rlib.why), "%s cannot be loaded (%s); install librados2 (Debian: apt-get "
				 "install librados2)", name, e ? e : "not found");
			rlib.rc = OPENDS_PLATFORM_NOT_SUPPORTED;
		} else {
			SYM(rlib.lib, create, "rados_create");
			SYM(rlib.lib, conf_read_file, "rados_conf_read_file");
			SYM(rlib.lib, conf_set, "rados_conf_set");
			SYM(rlib.lib, conf_get, "rados_conf_get");
			SYM(rlib.lib, connect, "rados_connect");
			SYM(rlib.lib, shutdown, "rados_shutdown");
			SYM(rlib.lib, ioctx_create, "rados_ioctx_create");
			SYM(rlib.lib, ioctx_destroy, "rados_ioctx_destroy");
			SYM(rlib.lib, ioctx_get_cluster, "rados_ioctx_get_cluster");
			SYM(rlib.lib, ioctx_set_namespace, "rados_ioctx_set_namespace");
			SYM(rlib.lib, ioctx_get_pool_name, "rados_ioctx_get_pool_name");
			SYM(rlib.lib, aio_create_completion, "rados_aio_create_completion");
			SYM(rlib.lib, aio_read, "rados_aio_read");
			SYM(rlib.lib, aio_write, "rados_aio_write");
			SYM(rlib.lib, aio_get_return_value, "rados_aio_get_return_value");
			SYM(rlib.lib, aio_release, "rados_aio_release");
			SYM(rlib.lib, stat, "rados_stat");
			SYM(rlib.lib, create_write_op, "rados_create_write_op");
			SYM(rlib.lib, release_write_op, "rados_release_write_op");
			SYM(rlib.lib, write_op_create, "rados_write_op_create");
			SYM(rlib.lib, write_op_operate, "rados_write_op_operate");
			if (missing) {
				snprintf(rlib.why, sizeof(rlib.why), "%s lacks %s (librados too old?)", name, missing);
				rlib.rc = OPENDS_PLATFORM_NOT_SUPPORTED;
			}
		}
		/* the striper is optional: only striped objects need it */
		if (!rlib.rc && (rlib.slib = dlopen("libradosstriper.so.1", RTLD_NOW))) {
			missing = NULL;
			SYM(rlib.slib, striper_create, "rados_striper_create");
			SYM(rlib.slib, striper_destroy, "rados_striper_destroy");
			SYM(rlib.slib, striper_aio_read, "rados_striper_aio_read");
			SYM(rlib.slib, striper_aio_write, "rados_striper_aio_write");
			SYM(rlib.slib, striper_stat, "rados_striper_stat");
			if (missing)
				rlib.striper_create = NULL;
		}
	}
	int rc = rlib.rc;
	if (rc)
		ods_fail(rc, "rados: %s", rlib.why);
	pthread_mutex_unlock(&rlib.lock);
	return rc;
}

/* ---- what opends-info reports ------------------------------------------- */

/* Where the loader found lib: its path, or "?" */
static const char *lib_path(void *lib)
{
	struct link_map *lm = NULL;
	return lib && !dlinfo(lib, RTLD_DI_LINKMAP, &lm) && lm && lm->l_name && *lm->l_name ? lm->l_name : "?";
}

/* One line per client library of the built-in sources: librados and
 * libradosstriper as the rados source loads them, and libcephfs (loaded
 * here only to ask its version: no source uses it yet). Loading librados
 * here is what the first rados:// handle would do anyway. */
OPENDS_API opends_error_t opends_source_libraries(char *buf, size_t len)
{
	if (!buf || !len)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "opends_source_libraries: %s",
					buf ? "len is 0" : "buf is NULL"), 0);
	size_t at = 0;
	buf[0] = '\0';
#define ADD(...)                                                                 \
	do {                                                                     \
		if (at < len) {                                                  \
			int k_ = snprintf(buf + at, len - at, __VA_ARGS__);      \
			at += k_ > 0 ? (size_t)k_ : 0;                           \
		}                                                                \
	} while (0)
	int rc = load();
	if (rc) {
		ADD("librados: not found: %s\n", rlib.why);
		ADD("libradosstriper: not tried (it needs librados)\n");
	} else {
		void (*ver)(int *, int *, int *);
		*(void **)&ver = dlsym(rlib.lib, "rados_version");
		int a = 0, b = 0, c = 0;
		if (ver)
			ver(&a, &b, &c);
		ADD("librados: API %d.%d.%d, %s (rados:// objects, opends_handle_register_rados)\n", a, b, c,
		    lib_path(rlib.lib));
		if (rlib.striper_create)
			ADD("libradosstriper: found, %s (striped objects: striper=1, OPENDS_SOURCE_RADOS_STRIPED)\n",
			    lib_path(rlib.slib));
		else
			ADD("libradosstriper: not found (libradosstriper1): striped objects are refused\n");
	}
	void *fs = dlopen("libcephfs.so.2", RTLD_NOW | RTLD_NOLOAD);
	if (!fs)
		fs = dlopen("libcephfs.so.2", RTLD_NOW);
	const char *(*cver)(int *, int *, int *) = NULL;
	if (fs)
		*(void **)&cver = dlsym(fs, "ceph_version");
	if (cver) {
		int a = 0, b = 0, c = 0;
		const char *v = cver(&a, &b, &c);
		ADD("libcephfs: Ceph %s, %s (not used: CephFS files are not a source yet)\n", v ? v : "?",
		    lib_path(fs));
	} else {
		ADD("libcephfs: not found (libcephfs2; not used: CephFS files are not a source yet)\n");
	}
#undef ADD
	if (at && at < len && buf[at - 1] == '\n')
		buf[at - 1] = '\0'; /* no trailing newline */
	return ods_ok();
}

/* ---- cluster connections of open_url, shared by conf + id + timeout ---- */

struct conn {
	char *conf, *id;
	unsigned timeout;
	void *cluster;
	unsigned refs;
	struct conn *next;
};
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conn *conns;

static bool same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static void conn_put(struct conn *c)
{
	pthread_mutex_lock(&conns_lock);
	if (--c->refs == 0) {
		struct conn **p = &conns;
		while (*p != c)
			p = &(*p)->next;
		*p = c->next;
	} else {
		c = NULL;
	}
	pthread_mutex_unlock(&conns_lock);
	if (c) {
		rlib.shutdown(c->cluster);
		free(c->conf);
		free(c->id);
		free(c);
	}
}

/* A connected cluster for conf/id/timeout: 0 or an OPENDS_* code. */
static int conn_get(const char *conf, const char *id, unsigned timeout, struct conn **out, int *berr)
{
	pthread_mutex_lock(&conns_lock);
	for (struct conn *c = conns; c; c = c->next)
		if (same(c->conf, conf) && same(c->id, id) && c->timeout == timeout) {
			c->refs++;
			pthread_mutex_unlock(&conns_lock);
			*out = c;
			return 0;
		}
	struct conn *c = calloc(1, sizeof(*c));
	int rc = 0, r = 0;
	if (!c || (conf && !(c->conf = strdup(conf))) || (id && !(c->id = strdup(id)))) {
		rc = ods_fail(OPENDS_NOMEM_ERROR, "opends_handle_open_url: out of memory");
		*berr = ENOMEM;
		goto fail;
	}
	c->timeout = timeout;
	if ((r = rlib.create(&c->cluster, id)) < 0) {
		rc = ods_fail(OPENDS_FS_SETUP_ERROR, "rados: rados_create(id %s) failed: %s", id ? id : "admin",
			      strerror(-r));
		goto fail;
	}
	if ((r = rlib.conf_read_file(c->cluster, conf)) < 0) {
		rc = ods_fail(OPENDS_FS_SETUP_ERROR, "rados: cannot read the configuration %s: %s",
			      conf ? conf : "(librados' default search, CEPH_CONF)", strerror(-r));
		goto fail_shutdown;
	}
	/* a dead OSD or monitor: fail after the op timeout instead of hanging */
	char t[16];
	snprintf(t, sizeof(t), "%u", timeout);
	rlib.conf_set(c->cluster, "rados_osd_op_timeout", t);
	rlib.conf_set(c->cluster, "rados_mon_op_timeout", t);
	if (timeout)
		rlib.conf_set(c->cluster, "client_mount_timeout", t);
	if ((r = rlib.connect(c->cluster)) < 0) {
		rc = ods_fail(OPENDS_FS_SETUP_ERROR, "rados: cannot connect to the cluster of %s: %s",
			      conf ? conf : "the default configuration", strerror(-r));
		goto fail_shutdown;
	}
	c->refs = 1;
	c->next = conns;
	conns = c;
	pthread_mutex_unlock(&conns_lock);
	*out = c;
	return 0;
fail_shutdown:
	rlib.shutdown(c->cluster);
fail:
	*berr = r < 0 ? -r : *berr;
	pthread_mutex_unlock(&conns_lock);
	if (c) {
		free(c->conf);
		free(c->id);
		free(c);
	}
	return rc;
}

void ods_rados_forget(void)
{
	conns_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	conns = NULL; /* the parent's connections: their threads are not here */
	rlib.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
}

/* ---- the source ------------------------------------------------------------ */

struct rsrc {
	void *io;          /* rados_ioctx_t */
	void *striper;     /* rados_striper_t, or NULL: plain object */
	struct conn *conn; /* open_url's: owns io and striper; NULL: the caller's ioctx */
	char *oid;
	unsigned timeout;  /* the client's rados_osd_op_timeout, s (0: none) */
};

struct rop {
	opends_source_done_t done;
	void *token;
	size_t len;
	bool rd;
};

static void rop_done(void *comp, void *arg)
{
	struct rop *op = arg;
	int r = rlib.aio_get_return_value(comp);
	rlib.aio_release(comp);
	ssize_t res = r < 0 ? r : op->rd ? r : (ssize_t)op->len; /* writes: 0 on success */
	opends_source_done_t done = op->done;
	void *token = op->token;
	free(op);
	done(token, res);
}

static int r_start(struct rsrc *s, bool rd, void *buf, size_t len, uint64_t off, opends_source_done_t done,
		   void *token)
{
	struct rop *op = malloc(sizeof(*op));
	if (!op)
		return -ENOMEM;
	*op = (struct rop){ done, token, len, rd };
	void *comp;
	int r = rlib.aio_create_completion(op, rop_done, NULL, &comp);
	if (r < 0) {
		free(op);
		return r;
	}
	if (s->striper)
		r = rd ? rlib.striper_aio_read(s->striper, s->oid, comp, buf, len, off)
		       : rlib.striper_aio_write(s->striper, s->oid, comp, buf, len, off);
	else
		r = rd ? rlib.aio_read(s->io, s->oid, comp, buf, len, off) : rlib.aio_write(s->io, s->oid, comp, buf, len, off);
	if (r < 0) {
		rlib.aio_release(comp);
		free(op);
	}
	return r < 0 ? r : 0;
}

static int r_read_async(void *src, void *buf, size_t len, uint64_t off, opends_source_done_t done, void *token)
{
	return r_start(src, true, buf, len, off, done, token);
}

static int r_write_async(void *src, const void *buf, size_t len, uint64_t off, opends_source_done_t done, void *token)
{
	return r_start(src, false, (void *)buf, len, off, done, token);
}

static int64_t r_size(void *src)
{
	struct rsrc *s = src;
	uint64_t sz = 0;
	int r = s->striper ? rlib.striper_stat(s->striper, s->oid, &sz, NULL) : rlib.stat(s->io, s->oid, &sz, NULL);
	return r < 0 ? r : (int64_t)sz;
}

static void r_release(void *src)
{
	struct rsrc *s = src;
	if (s->striper && s->conn)
		rlib.striper_destroy(s->striper);
	if (s->conn) {
		rlib.ioctx_destroy(s->io);
		conn_put(s->conn);
	} else if (s->striper) {
		rlib.striper_destroy(s->striper);
	}
	free(s->oid);
	free(s);
}

static void r_describe(void *src, char *buf, size_t len)
{
	struct rsrc *s = src;
	if (s->timeout)
		snprintf(buf, len, "librados %s, op timeout %u s", s->striper ? "striper aio" : "aio", s->timeout);
	else
		snprintf(buf, len, "librados %s; WARNING: no op timeout (rados_osd_op_timeout 0): a dead OSD hangs "
				   "I/O forever", s->striper ? "striper aio" : "aio");
}

static const opends_source_ops_t rados_ops = {
	.struct_size = sizeof(opends_source_ops_t),
	.read_async = r_read_async,
	.write_async = r_write_async,
	.size = r_size,
	.release = r_release,
	.describe = r_describe,
};

/* A number of the client's configuration. librados prints these options
 * as plain integers (ceph's own parser refuses "0.5" for them); they are
 * read with the one parser of the OPENDS_* numbers, not strtod, whose
 * decimal separator follows the program's LC_NUMERIC (a program that set
 * de_DE would read "1,5" as one and a half). Anything else: dflt. */
static size_t conf_num(void *cluster, const char *name, size_t dflt)
{
	char v[64] = "";
	uint64_t n;
	if (rlib.conf_get(cluster, name, v, sizeof(v)) < 0 || !ods_parse_u64(v, &n) || n > SIZE_MAX)
		return dflt;
	return (size_t)n;
}

/* Register s (on success it belongs to the handle). */
static int r_register(opends_handle_t *fh, struct rsrc *s, const char *pool, const char *ns, bool rdonly)
{
	void *cluster = rlib.ioctx_get_cluster(s->io);
	s->timeout = (unsigned)conf_num(cluster, "rados_osd_op_timeout", 0);
	/* 3/4 of the client's budget: past it rados_aio_read blocks its caller */
	size_t budget = conf_num(cluster, "objecter_inflight_op_bytes", (size_t)100 << 20);
	size_t ops = conf_num(cluster, "objecter_inflight_ops", 1024);
	opends_source_desc_t d;
	memset(&d, 0, sizeof(d));
	opends_source_ops_t o = rados_ops;
	/* the whole name: registration abbreviates it to fit (source.c) */
	size_t ln = strlen(pool) + strlen(s->oid) + (ns ? strlen(ns) : 0) + 40;
	char *label = malloc(ln);
	if (!label)
		return ods_fail(OPENDS_NOMEM_ERROR, "rados: out of memory");
	/* the namespace too: two objects of one name in two namespaces are
	 * told apart in details and describe */
	snprintf(label, ln, "rados://%s/%s%s%s%s", pool, s->oid, ns && *ns ? "?ns=" : "", ns && *ns ? ns : "",
		 s->striper ? " (striped)" : "");
	o.name = label;
	d.struct_size = sizeof(d);
	d.ops = &o;
	d.src = s;
	d.flags = rdonly ? OPENDS_SOURCE_RDONLY : 0;
	d.size = -1;
	d.io_unit = UNIT;
	d.max_io = MAX_IO;
	d.max_inflight_bytes = budget / 4 * 3;
	if (d.max_inflight_bytes < MAX_IO)
		d.max_io = d.max_inflight_bytes < ODS_SRC_MIN_IO ? ODS_SRC_MIN_IO : d.max_inflight_bytes;
	if (d.max_inflight_bytes < ODS_SRC_MIN_IO)
		d.max_inflight_bytes = ODS_SRC_MIN_IO;
	size_t nops = ops / 4 * 3;
	d.max_inflight = nops == 0 ? 1u : nops < 64 ? (unsigned)nops : 64u;
	d.domain = (uint64_t)(uintptr_t)cluster;
	opends_error_t e = opends_handle_register_source(fh, &d);
	free(label);
	return e.err;
}

OPENDS_API opends_error_t opends_handle_register_rados(opends_handle_t *fh, void *rados_ioctx, const char *oid,
						       unsigned flags)
{
	const char *fn = "opends_handle_register_rados";
	ODS_ENTER("opends_handle_register_rados");
	if (!fh || !rados_ioctx || !oid || !*oid)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "%s: %s", fn,
					!fh ? "fh is NULL" : !rados_ioctx ? "rados_ioctx is NULL" : "oid is NULL or empty"),
			       0);
	if (flags & ~(OPENDS_SOURCE_RDONLY | OPENDS_SOURCE_RADOS_STRIPED))
		return ods_err(ods_fail(OPENDS_INVALID_VALUE, "%s: flags 0x%x: only OPENDS_SOURCE_RDONLY and "
							      "OPENDS_SOURCE_RADOS_STRIPED are accepted", fn, flags), 0);
	int rc = load();
	if (rc)
		return ods_err(rc, 0);
	if ((flags & OPENDS_SOURCE_RADOS_STRIPED) && !rlib.striper_create)
		return ods_err(ods_fail(OPENDS_PLATFORM_NOT_SUPPORTED, "%s: libradosstriper.so.1 cannot be loaded "
								       "(Debian: libradosstriper1)", fn), 0);
	struct rsrc *s = calloc(1, sizeof(*s));
	if (!s || !(s->oid = strdup(oid))) {
		free(s);
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "%s: out of memory", fn), ENOMEM);
	}
	s->io = rados_ioctx;
	int r;
	if ((flags & OPENDS_SOURCE_RADOS_STRIPED) && (r = rlib.striper_create(s->io, &s->striper)) < 0) {
		free(s->oid);
		free(s);
		return ods_err(ods_fail(OPENDS_FS_SETUP_ERROR, "%s: rados_striper_create: %s", fn, strerror(-r)), -r);
	}
	char pool[128] = "?";
	if (rlib.ioctx_get_pool_name(s->io, pool, sizeof(pool)) < 0)
		strcpy(pool, "?");
	rc = r_register(fh, s, pool, NULL, flags & OPENDS_SOURCE_RDONLY);
	if (rc) {
		if (s->striper)
			rlib.striper_destroy(s->striper);
		free(s->oid);
		free(s);
	}
	return ods_err(rc, 0);
}

/* ---- rados://POOL/OID?conf=&id=&ns=&op_timeout=&striper= ------------------ */

int ods_url_rados(opends_handle_t *fh, const char *rest, int flags, int *berr)
{
	const char *url = rest - 8;
	const char *q = strchr(rest, '?'), *slash = strchr(rest, '/');
	const char *pend = q ? q : rest + strlen(rest);
	if (!slash || slash > pend || slash == rest || slash + 1 == pend)
		return ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: \"%.120s\" is not rados://POOL/OBJECT[?...]",
				url);
	bool bad = false;
	char *pool = ods_url_decode(rest, (size_t)(slash - rest), &bad);
	char *oid = pool ? ods_url_decode(slash + 1, (size_t)(pend - slash - 1), &bad) : NULL;
	struct ods_url_param *p = NULL;
	int np = 0, rc = 0;
	const char *conf = NULL, *id = NULL, *ns = NULL;
	unsigned timeout = DEF_TIMEOUT;
	bool striped = false;
	if (!oid) {
		rc = bad ? ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: bad percent escape in \"%.120s\"", url)
			 : ods_fail(OPENDS_NOMEM_ERROR, "opends_handle_open_url: out of memory");
		goto out;
	}
	np = q ? ods_url_params(q + 1, &p, url) : 0;
	if (np < 0) {
		rc = np == -1 ? OPENDS_INVALID_VALUE : ods_fail(OPENDS_NOMEM_ERROR, "opends_handle_open_url: out of memory");
		np = 0;
		goto out;
	}
	for (int i = 0; i < np && !rc; i++) {
		const char *k = p[i].key, *v = p[i].val;
		if (!strcmp(k, "conf") && *v)
			conf = v;
		else if (!strcmp(k, "id") && *v)
			id = v;
		else if (!strcmp(k, "ns"))
			ns = v;
		else if (!strcmp(k, "op_timeout")) {
			/* plain decimal digits, as the OPENDS_* numbers (the
			 * same parser): no sign, spaces or leading zeros */
			uint64_t t = 0;
			if (!ods_parse_u64(v, &t) || t > MAX_TIMEOUT)
				rc = ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: op_timeout=%.32s: seconds "
								    "from 0 (none) to %u", v, MAX_TIMEOUT);
			timeout = (unsigned)t;
		} else if (!strcmp(k, "striper") && (!strcmp(v, "0") || !strcmp(v, "1")))
			striped = *v == '1';
		else
			rc = ods_fail(OPENDS_INVALID_VALUE, "opends_handle_open_url: %s=%.64s: unknown parameter or bad "
							    "value (rados: conf=PATH, id=NAME, ns=NAMESPACE, "
							    "op_timeout=SECONDS, striper=0|1)", k, v);
	}
	if (rc || (rc = load()))
		goto out;
	if (striped && !rlib.striper_create) {
		rc = ods_fail(OPENDS_PLATFORM_NOT_SUPPORTED, "rados: striper=1 needs libradosstriper.so.1, which "
							     "cannot be loaded (Debian: libradosstriper1)");
		goto out;
	}
	struct conn *c = NULL;
	if ((rc = conn_get(conf, id, timeout, &c, berr)))
		goto out;
	struct rsrc *s = calloc(1, sizeof(*s));
	int r = 0;
	if (!s) {
		conn_put(c);
		rc = ods_fail(OPENDS_NOMEM_ERROR, "opends_handle_open_url: out of memory");
		goto out;
	}
	s->conn = c;
	s->oid = oid;
	oid = NULL;
	if ((r = rlib.ioctx_create(c->cluster, pool, &s->io)) < 0) {
		*berr = -r;
		rc = ods_fail(OPENDS_FS_SETUP_ERROR, "rados: pool %s: %s", pool, strerror(-r));
		s->io = NULL;
	} else {
		if (ns)
			rlib.ioctx_set_namespace(s->io, ns);
		if (striped && (r = rlib.striper_create(s->io, &s->striper)) < 0) {
			*berr = -r;
			rc = ods_fail(OPENDS_FS_SETUP_ERROR, "rados: rados_striper_create: %s", strerror(-r));
			s->striper = NULL;
		}
	}
	if (!rc && (flags & O_CREAT) && !striped) {
		/* create the object if it does not exist (idempotent) */
		void *op = rlib.create_write_op();
		r = op ? rlib.write_op_operate((rlib.write_op_create(op, 0, NULL), op), s->io, s->oid, NULL, 0) : -ENOMEM;
		if (op)
			rlib.release_write_op(op);
		if (r < 0) {
			/* the name abbreviated: the error must fit the detail */
			char what[160], *full = malloc(strlen(pool) + strlen(s->oid) + (ns ? strlen(ns) : 0) + 16);
			if (full)
				sprintf(full, "%s/%s%s%s", pool, s->oid, ns && *ns ? "?ns=" : "", ns && *ns ? ns : "");
			ods_src_abbrev(what, sizeof(what), full ? full : s->oid);
			free(full);
			*berr = -r;
			rc = ods_fail(OPENDS_IO_ERROR, "rados: creating rados://%s failed: %s", what, strerror(-r));
		}
	}
	/* striped objects are created by their first write */
	if (!rc) {
		rc = r_register(fh, s, pool, ns, (flags & O_ACCMODE) == O_RDONLY);
		if (!rc && (flags & O_ACCMODE) == O_WRONLY) {
			struct ods_handle *h = ods_handle_lookup(*fh);
			if (h)
				h->accmode = O_WRONLY;
		}
	}
	if (rc) {
		if (s->striper)
			rlib.striper_destroy(s->striper);
		if (s->io)
			rlib.ioctx_destroy(s->io);
		conn_put(c);
		free(s->oid);
		free(s);
	}
out:
	ods_url_params_free(p, np);
	free(pool);
	free(oid);
	return rc;
}
