/*
 * Helpers for the tests on a real Ceph cluster. They skip (77) unless
 * OPENDS_TEST_CEPH_CONF names the ceph.conf of a running cluster
 * (tests/sources/ceph-cluster.sh start prints it) with a pool
 * OPENDS_TEST_CEPH_POOL (default "opends"), and the rados CLI is there.
 * Objects are put and got with the rados CLI, so the data the library
 * reads and writes is checked against another client.
 */
#ifndef RADOS_UTIL_H
#define RADOS_UTIL_H

#include "../common.h"

#include <sys/wait.h>

static const char *r_conf, *r_pool;
static char r_tag[64]; /* makes object names unique per process */

static inline void r_setup(void)
{
	r_conf = getenv("OPENDS_TEST_CEPH_CONF");
	r_pool = getenv("OPENDS_TEST_CEPH_POOL");
	if (!r_pool || !*r_pool)
		r_pool = "opends";
	if (!r_conf || !*r_conf)
		skip("no Ceph cluster: OPENDS_TEST_CEPH_CONF is not set (tests/sources/ceph-cluster.sh start)");
	if (access(r_conf, R_OK))
		skip("OPENDS_TEST_CEPH_CONF=%s cannot be read", r_conf);
	if (system("command -v rados >/dev/null 2>&1") != 0)
		skip("the rados CLI is missing (ceph-common)");
	snprintf(r_tag, sizeof(r_tag), "%d-%s-%s", (int)getpid(),
		 getenv("OPENDS_BACKEND") ? getenv("OPENDS_BACKEND") : "auto",
		 getenv("OPENDS_ACCEL") ? getenv("OPENDS_ACCEL") : "auto");
}

/* rados CLI: "put"/"get"/"rm" on name (file for put/get), in namespace ns
 * (NULL: default), through the striper or not. 0 on success. */
static inline int r_cli(const char *verb, const char *name, const char *file, const char *ns, bool striped)
{
	pid_t pid = fork();
	if (pid == 0) {
		const char *argv[16];
		int n = 0;
		argv[n++] = "rados";
		argv[n++] = "-c";
		argv[n++] = r_conf;
		argv[n++] = "-p";
		argv[n++] = r_pool;
		if (ns) {
			argv[n++] = "-N";
			argv[n++] = ns;
		}
		if (striped)
			argv[n++] = "--striper";
		argv[n++] = verb;
		argv[n++] = name;
		if (file)
			argv[n++] = file;
		argv[n] = NULL;
		char ep[PATH_MAX];
		t_path(ep, sizeof(ep), "rados-cli.err");
		int efd = open(ep, O_CREAT | O_TRUNC | O_WRONLY, 0600);
		dup2(efd, 2);
		execvp("rados", (char **)argv);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (rc && strcmp(verb, "rm")) { /* say why */
		char ep[PATH_MAX], msg[512] = "";
		t_path(ep, sizeof(ep), "rados-cli.err");
		int efd = open(ep, O_RDONLY);
		ssize_t n = efd >= 0 ? read(efd, msg, sizeof(msg) - 1) : 0;
		msg[n > 0 ? n : 0] = 0;
		if (efd >= 0)
			close(efd);
		fprintf(stderr, "rados %s %s: exit %d: %s\n", verb, name, rc, msg);
	}
	return rc;
}

static inline void r_put(const char *name, const uint8_t *data, size_t n, const char *ns, bool striped)
{
	char path[PATH_MAX];
	t_path(path, sizeof(path), "rados-put.bin");
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	CHECK(fd >= 0);
	t_pwrite_all(fd, data, n, 0);
	close(fd);
	int rc = r_cli("put", name, path, ns, striped);
	CHECKF(rc == 0, "rados put %s failed (%d)", name, rc);
	unlink(path);
}

/* the object's bytes (malloc'd), *n its size; NULL if rados get fails */
static inline uint8_t *r_get(const char *name, size_t *n, const char *ns, bool striped)
{
	char path[PATH_MAX];
	t_path(path, sizeof(path), "rados-get.bin");
	unlink(path);
	int rc = -1;
	for (int i = 0; i < 3 && rc; i++) /* the CLI has failed once in many runs: say why, retry */
		rc = r_cli("get", name, path, ns, striped);
	if (rc)
		return NULL;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	*n = (size_t)t_file_size(fd);
	uint8_t *p = t_xmalloc(*n);
	t_pread_all(fd, p, *n, 0);
	close(fd);
	unlink(path);
	return p;
}

static inline void r_rm(const char *name, const char *ns, bool striped)
{
	r_cli("rm", name, NULL, ns, striped);
}

/* rados://POOL/NAME?conf=...&extra */
static inline void r_url(char *out, size_t len, const char *name, const char *extra)
{
	snprintf(out, len, "rados://%s/%s?conf=%s%s%s", r_pool, name, r_conf, extra && *extra ? "&" : "",
		 extra ? extra : "");
}

/* open_url that skips where librados or the cluster is not there */
static inline opends_handle_t r_open(const char *url, int flags)
{
	opends_handle_t fh = NULL;
	opends_error_t e = opends_handle_open_url(&fh, url, flags);
	if (e.err == OPENDS_PLATFORM_NOT_SUPPORTED)
		skip("librados cannot be loaded: %s", t_detail());
	if (e.err == OPENDS_FS_SETUP_ERROR && strstr(t_detail(), "connect"))
		skip("the cluster of %s is not reachable: %s", r_conf, t_detail());
	if (e.err != OPENDS_SUCCESS)
		FAILF("open_url(%s): %d (%s)", url, e.err, t_errname(e.err));
	return fh;
}

#endif
