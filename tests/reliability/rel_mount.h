/*
 * Mounting for the reliability tests: a faultfs FUSE mount (a child
 * process) and a tiny ext4 filesystem on a loop device. Whatever is
 * mounted is unmounted at exit, from the watchdog, and on SIGTERM/SIGINT
 * (meson's timeout), so a failing or hanging test leaves no mount behind;
 * the faultfs child also dies with its parent (PR_SET_PDEATHSIG).
 */
#ifndef OPENDS_REL_MOUNT_H
#define OPENDS_REL_MOUNT_H

#include "rel.h"

#include <sys/mount.h>
#include <sys/prctl.h>

static char m_point[PATH_MAX + 64]; /* what is mounted, or "" */
static pid_t m_fuse_pid;
static bool m_cleanup_installed;

static inline void m_unmount(void)
{
	if (m_point[0]) {
		if (umount2(m_point, 0) < 0 && umount2(m_point, MNT_DETACH) < 0 && m_fuse_pid) {
			char cmd[PATH_MAX + 96];
			snprintf(cmd, sizeof(cmd), "fusermount3 -u -z '%s' >/dev/null 2>&1", m_point);
			if (system(cmd) != 0) {
			}
		}
		m_point[0] = '\0';
	}
	if (m_fuse_pid > 0) {
		kill(m_fuse_pid, SIGTERM);
		int st;
		for (int i = 0; i < 200 && waitpid(m_fuse_pid, &st, WNOHANG) == 0; i++)
			usleep(10000);
		kill(m_fuse_pid, SIGKILL);
		waitpid(m_fuse_pid, &st, WNOHANG);
		m_fuse_pid = 0;
	}
}

static inline void m_cleanup_all(void)
{
	m_unmount();
	r_rmdir_all();
}

static inline void m_on_signal(int sig)
{
	static const char m[] = "reliability test: signal received, unmounting\n";
	if (write(2, m, sizeof m - 1) < 0) {
	}
	m_cleanup_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static inline void m_install_cleanup(void)
{
	if (m_cleanup_installed)
		return;
	m_cleanup_installed = true;
	atexit(m_cleanup_all);
	r_watchdog_cleanup = m_cleanup_all;
	signal(SIGTERM, m_on_signal);
	signal(SIGINT, m_on_signal);
	signal(SIGHUP, m_on_signal);
}

static inline bool m_is_mountpoint(const char *dir)
{
	char parent[PATH_MAX + 80];
	struct stat a, b;
	snprintf(parent, sizeof(parent), "%s/..", dir);
	return stat(dir, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* Start faultfs over backing dir and mount it at mnt; skips (77) where
 * /dev/fuse is missing or the mount fails for lack of privilege. */
static inline void m_faultfs_start(const char *faultfs, const char *backing, const char *mnt)
{
	m_install_cleanup();
	if (access("/dev/fuse", R_OK | W_OK) != 0)
		r_skip("/dev/fuse is not usable: %s", strerror(errno));
	if (access(faultfs, X_OK) != 0)
		R_FAIL("faultfs binary %s: %s", faultfs, strerror(errno));
	mkdir(mnt, 0755);
	char log[PATH_MAX + 64];
	snprintf(log, sizeof(log), "%s.log", mnt);
	pid_t pid = fork();
	if (pid < 0)
		R_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(faultfs, faultfs, backing, mnt, (char *)NULL);
		_exit(127);
	}
	m_fuse_pid = pid;
	snprintf(m_point, sizeof(m_point), "%s", mnt);
	for (int i = 0; i < 500; i++) {
		if (m_is_mountpoint(mnt))
			return;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			m_fuse_pid = 0;
			m_point[0] = '\0';
			char buf[512] = "";
			FILE *f = fopen(log, "r");
			if (f) {
				size_t n = fread(buf, 1, sizeof(buf) - 1, f);
				buf[n] = '\0';
				fclose(f);
			}
			r_skip("faultfs could not mount (status 0x%x): %s", st, buf);
		}
		usleep(10000);
	}
	R_FAIL("faultfs did not mount %s within 5 s", mnt);
}

/* Send commands to the mounted faultfs. */
static inline void m_ctl(const char *fmt, ...)
{
	char cmd[512], path[PATH_MAX + 96];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), "%s/.faultctl", m_point);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, cmd, strlen(cmd)) != (ssize_t)strlen(cmd))
		R_FAIL("faultfs control \"%s\": %s", cmd, strerror(errno));
	close(fd);
}

/* One counter of the mounted faultfs ("faults", "reads", ...). */
static inline unsigned long m_stat(const char *name)
{
	char path[PATH_MAX + 96], buf[512], key[64];
	snprintf(path, sizeof(path), "%s/.faultctl", m_point);
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	snprintf(key, sizeof(key), "%s=", name);
	const char *p = strstr(buf, key);
	return p ? strtoul(p + strlen(key), NULL, 10) : 0;
}

/* A fresh ext4 filesystem of mib MiB in image, mounted at mnt through a
 * loop device. Skips (77) when not root or when mkfs/mount fail. */
static inline void m_loop_mount(const char *image, const char *mnt, unsigned mib)
{
	m_install_cleanup();
	if (geteuid() != 0)
		r_skip("not root: cannot mount a loop device");
	mkdir(mnt, 0755);
	if (r_sh("truncate -s %uM '%s' && mkfs.ext4 -q -F -b 4096 -E nodiscard '%s' >/dev/null 2>&1", mib, image,
		 image) != 0)
		r_skip("mkfs.ext4 on %s failed", image);
	if (r_sh("mount -o loop '%s' '%s' >/dev/null 2>&1", image, mnt) != 0)
		r_skip("mount -o loop failed (no loop devices or no privilege)");
	snprintf(m_point, sizeof(m_point), "%s", mnt);
}

static inline void m_loop_remount(const char *image)
{
	char mnt[sizeof(m_point)];
	snprintf(mnt, sizeof(mnt), "%s", m_point);
	if (umount2(mnt, 0) < 0)
		R_FAIL("umount %s: %s", mnt, strerror(errno));
	m_point[0] = '\0';
	if (r_sh("mount -o loop '%s' '%s' >/dev/null 2>&1", image, mnt) != 0)
		R_FAIL("remounting %s failed", image);
	snprintf(m_point, sizeof(m_point), "%s", mnt);
}

#endif
