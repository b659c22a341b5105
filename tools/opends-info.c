/*
 * opends-info: what this machine offers OpenDS — each backend and
 * accelerator layer, usable or not and why, the one auto picks, O_DIRECT
 * support of given paths, and the effective configuration.
 *
 *   opends-info [PATH...]    folders: O_DIRECT support; files: also the
 *                            path OpenDS takes for them (e.g. cuFile or
 *                            its POSIX fallback under gds)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <opends.h>

static const char *const config_vars[] = {
	"OPENDS_BACKEND",   "OPENDS_ACCEL",    "OPENDS_IO_THREADS",	       "OPENDS_QUEUE_DEPTH",
	"OPENDS_CHUNK_SIZE", "OPENDS_CPU_MASK", "OPENDS_IDLE_SPIN", "OPENDS_ASSUME_ALIGNED_ONLY",
};

/* Open the driver with one variable forced; report what happened. */
static void try_open(const char *var, const char *value, const char *label)
{
	char *saved = getenv(var) ? strdup(getenv(var)) : NULL;
	setenv(var, value, 1);
	opends_error_t e = opends_driver_open();
	if (e.err == OPENDS_SUCCESS) {
		printf("  %-8s usable (backend %s)\n", label, opends_driver_backend());
		opends_driver_close();
	} else {
		printf("  %-8s not usable: %s\n", label, opends_last_error_detail());
	}
	if (saved)
		setenv(var, saved, 1);
	else
		unsetenv(var);
	free(saved);
}

/* Can a file in this folder (or this file) be opened with O_DIRECT and
 * read with 4 KiB alignment? */
static void direct_support(const char *path)
{
	struct stat st;
	if (stat(path, &st)) {
		printf("  %s: %s\n", path, strerror(errno));
		return;
	}
	char tmpl[4096];
	int fd;
	bool made = false;
	if (S_ISDIR(st.st_mode)) {
		snprintf(tmpl, sizeof(tmpl), "%s/.opends-info-XXXXXX", path);
		fd = mkstemp(tmpl);
		if (fd < 0) {
			printf("  %s: cannot create a test file: %s\n", path, strerror(errno));
			return;
		}
		made = true;
		close(fd);
	} else {
		snprintf(tmpl, sizeof(tmpl), "%s", path);
	}
	fd = open(tmpl, O_RDONLY | O_DIRECT);
	if (fd < 0)
		printf("  %s: O_DIRECT not supported (%s); OpenDS falls back to buffered I/O there\n", path,
		       strerror(errno));
	else
		printf("  %s: O_DIRECT supported\n", path);
	if (fd >= 0)
		close(fd);
	if (made)
		unlink(tmpl);
}

int main(int argc, char **argv)
{
	unsigned maj, min, pat;
	opends_get_version(&maj, &min, &pat);
	struct utsname u;
	uname(&u);
	printf("OpenDS %u.%u.%u on %s %s (%s)\n", maj, min, pat, u.sysname, u.release, u.machine);

	printf("\nconfiguration (environment):\n");
	for (size_t i = 0; i < sizeof(config_vars) / sizeof(*config_vars); i++) {
		const char *v = getenv(config_vars[i]);
		printf("  %-27s %s\n", config_vars[i], v && *v ? v : "(unset: default)");
	}
	opends_error_t e = opends_driver_open();
	if (e.err) {
		printf("\nopends_driver_open fails with this configuration: %s\n  %s\n", opends_op_status_error(e.err),
		       opends_last_error_detail());
		return 1;
	}
	opends_drv_props_t props;
	opends_driver_get_properties(&props);
	char desc[512];
	opends_describe(NULL, desc, sizeof(desc));
	printf("\nactive: %s\n  max_direct_io_size %zu bytes, max_batch_io_size %u\n", desc,
	       props.max_direct_io_size, props.max_batch_io_size);
	/* how each regular file named on the command line would be served */
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) || !S_ISREG(st.st_mode))
			continue;
		for (int direct = 0; direct < 2; direct++) {
			int fd = open(argv[i], O_RDONLY | (direct ? O_DIRECT : 0));
			opends_handle_t fh;
			if (fd < 0)
				continue;
			if (opends_handle_register(&fh, fd).err == OPENDS_SUCCESS) {
				opends_describe(fh, desc, sizeof(desc));
				printf("  %s%s: %s\n", argv[i], direct ? " (opened O_DIRECT)" : "", desc);
				opends_handle_deregister(fh);
			}
			close(fd);
		}
	}
	opends_driver_close();

	printf("\naccelerator layers:\n");
	try_open("OPENDS_ACCEL", "cuda", "cuda");
	try_open("OPENDS_ACCEL", "host", "host");
	printf("\nbackends:\n");
	try_open("OPENDS_BACKEND", "gds", "gds");
	try_open("OPENDS_BACKEND", "uring", "uring");
	try_open("OPENDS_BACKEND", "ref", "ref");

	printf("\nO_DIRECT:\n");
	if (argc < 2) {
		direct_support(".");
		direct_support("/dev/shm");
	}
	for (int i = 1; i < argc; i++)
		direct_support(argv[i]);
	return 0;
}
