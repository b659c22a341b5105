/*
 * opends-info: what this machine offers OpenDS — each backend and
 * accelerator layer, usable or not and why, the one auto picks, every
 * device of the accelerator layer (its link, NUMA node and peers), O_DIRECT
 * support of given paths, and the effective configuration.
 *
 *   opends-info [--json] [PATH...]   folders: O_DIRECT support; files: also
 *                                    the path OpenDS takes for them (e.g.
 *                                    cuFile or its POSIX fallback under gds)
 *   opends-info --help | --version
 *
 * Exit status: 0 when the driver opens with this configuration and every
 * PATH exists; 1 when the driver cannot open (bad configuration, no usable
 * backend) or a PATH does not exist; 2 on a bad command line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <opends.h>

static const char *const config_vars[] = {
	"OPENDS_BACKEND",	"OPENDS_ACCEL",		 "OPENDS_IO_THREADS",	 "OPENDS_QUEUE_DEPTH",
	"OPENDS_IO_KWORKERS",
	"OPENDS_CHUNK_SIZE",	"OPENDS_MAX_PINNED",	 "OPENDS_INLINE_MAX",	 "OPENDS_INLINE_SPLIT", "OPENDS_READAHEAD",	 "OPENDS_CPU_MASK",
	"OPENDS_IDLE_SPIN",	"OPENDS_ASSUME_ALIGNED_ONLY", "OPENDS_CUFILE_LIBRARY", "OPENDS_RADOS_LIBRARY",
};
#define NVARS (sizeof(config_vars) / sizeof(*config_vars))

static bool json;
static const char *sep = ""; /* JSON: "" before the first member, "," after */

/* A JSON string (quotes included), escaping what RFC 8259 requires. */
static void jstr(const char *s)
{
	if (!s) {
		fputs("null", stdout);
		return;
	}
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

/* ,"key": at the current nesting */
static void jkey(const char *key)
{
	printf("%s", sep);
	jstr(key);
	putchar(':');
	sep = ",";
}

static void jopen(const char *key, char bracket)
{
	if (key)
		jkey(key);
	else
		printf("%s", sep);
	putchar(bracket);
	sep = "";
}

static void jclose(char bracket)
{
	putchar(bracket);
	sep = ",";
}

/* Open the driver with one variable forced; report what happened. */
static void try_open(const char *var, const char *value, const char *label)
{
	char *saved = getenv(var) ? strdup(getenv(var)) : NULL;
	setenv(var, value, 1);
	opends_error_t e = opends_driver_open();
	const char *backend = e.err == OPENDS_SUCCESS ? opends_driver_backend() : NULL;
	if (json) {
		jopen(NULL, '{');
		jkey("name");
		jstr(label);
		jkey("usable");
		fputs(e.err == OPENDS_SUCCESS ? "true" : "false", stdout);
		jkey(e.err == OPENDS_SUCCESS ? "backend" : "detail");
		jstr(e.err == OPENDS_SUCCESS ? backend : opends_last_error_detail());
		jclose('}');
	} else if (e.err == OPENDS_SUCCESS) {
		printf("  %-8s usable (backend %s)\n", label, backend);
	} else {
		printf("  %-8s not usable: %s\n", label, opends_last_error_detail());
	}
	if (e.err == OPENDS_SUCCESS)
		opends_driver_close();
	if (saved)
		setenv(var, saved, 1);
	else
		unsetenv(var);
	free(saved);
}

/* Can a file in this folder (or this file) be opened with O_DIRECT? Returns
 * false when the path does not exist. */
static bool direct_support(const char *path)
{
	struct stat st;
	char why[512] = "";
	int supported = -1; /* -1 unknown, 0 no, 1 yes */
	bool exists = stat(path, &st) == 0;
	if (!exists) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
	} else {
		char tmpl[4096];
		int fd;
		bool made = false;
		if (S_ISDIR(st.st_mode)) {
			snprintf(tmpl, sizeof(tmpl), "%s/.opends-info-XXXXXX", path);
			fd = mkstemp(tmpl);
			if (fd < 0)
				snprintf(why, sizeof(why), "cannot create a test file: %s", strerror(errno));
			else
				close(fd);
			made = fd >= 0;
		} else {
			snprintf(tmpl, sizeof(tmpl), "%s", path);
		}
		if (!why[0]) {
			fd = open(tmpl, O_RDONLY | O_DIRECT);
			supported = fd >= 0;
			if (fd < 0)
				snprintf(why, sizeof(why), "%s", strerror(errno));
			else
				close(fd);
		}
		if (made)
			unlink(tmpl);
	}
	if (json) {
		jopen(NULL, '{');
		jkey("path");
		jstr(path);
		jkey("exists");
		fputs(exists ? "true" : "false", stdout);
		jkey("o_direct");
		fputs(supported < 0 ? "null" : supported ? "true" : "false", stdout);
		if (why[0]) {
			jkey("detail");
			jstr(why);
		}
		jclose('}');
	} else if (supported == 1) {
		printf("  %s: O_DIRECT supported\n", path);
	} else if (supported == 0) {
		printf("  %s: O_DIRECT not supported (%s); OpenDS falls back to buffered I/O there\n", path, why);
	} else {
		printf("  %s: %s\n", path, why);
	}
	return exists;
}

/* How a regular file would be served, opened plain and O_DIRECT. */
static void describe_files(int n, char **paths)
{
	char desc[512];
	if (json)
		jopen("files", '[');
	for (int i = 0; i < n; i++) {
		struct stat st;
		if (stat(paths[i], &st) || !S_ISREG(st.st_mode))
			continue;
		for (int direct = 0; direct < 2; direct++) {
			int fd = open(paths[i], O_RDONLY | (direct ? O_DIRECT : 0));
			opends_handle_t fh;
			if (fd < 0)
				continue;
			if (opends_handle_register(&fh, fd).err == OPENDS_SUCCESS) {
				opends_describe(fh, desc, sizeof(desc));
				if (json) {
					jopen(NULL, '{');
					jkey("path");
					jstr(paths[i]);
					jkey("o_direct");
					fputs(direct ? "true" : "false", stdout);
					jkey("describe");
					jstr(desc);
					jclose('}');
				} else {
					printf("  %s%s: %s\n", paths[i], direct ? " (opened O_DIRECT)" : "", desc);
				}
				opends_handle_deregister(fh);
			}
			close(fd);
		}
	}
	if (json)
		jclose(']');
}

/* JSON: a number, or null where the library says -1 (unknown) */
static void jint(int v)
{
	if (v < 0)
		fputs("null", stdout);
	else
		printf("%d", v);
}

/* JSON: the devices whose bits are set, as an array of indexes */
static void jbits(const char *key, uint64_t bits)
{
	jopen(key, '[');
	for (unsigned j = 0; j < 64; j++)
		if (bits >> j & 1) {
			printf("%s%u", sep, j);
			sep = ",";
		}
	jclose(']');
}

/* Every device the accelerator layer sees (driver open): index, name, bus,
 * PCIe link, NUMA node and peers (NVLink-class where the link has native
 * atomics). */
static void describe_devices(void)
{
	unsigned n = 0;
	opends_device_count(&n);
	if (json)
		jopen("devices", '[');
	else
		printf("\ndevices: %u\n", n);
	for (unsigned d = 0; d < n; d++) {
		opends_device_props_t p;
		char line[1024];
		if (opends_device_get_properties(d, &p).err || opends_device_describe(d, line, sizeof(line)).err)
			continue;
		if (!json) {
			printf("  %s\n", line);
			continue;
		}
		jopen(NULL, '{');
		jkey("index");
		printf("%u", d);
		jkey("layer");
		jstr(p.layer);
		jkey("name");
		jstr(p.name);
		jkey("pci_bus_id");
		jstr(p.pci_bus_id[0] ? p.pci_bus_id : NULL);
		jkey("numa_node");
		jint(p.numa_node);
		jkey("pcie_gen");
		jint(p.pcie_gen);
		jkey("pcie_width");
		jint(p.pcie_width);
		jbits("peers", p.peers);
		jbits("nvlink_peers", p.peers_nvlink);
		jkey("describe");
		jstr(line);
		jclose('}');
	}
	if (json)
		jclose(']');
}

/* The client libraries of the built-in sources (librados, ...): found or
 * not, version and path; one line each from opends_source_libraries. */
static void describe_sources(void)
{
	char text[2048];
	if (opends_source_libraries(text, sizeof(text)).err)
		text[0] = '\0';
	if (json)
		jopen("sources", '[');
	else
		printf("\nsource libraries (loaded at run time):\n");
	for (char *line = text, *next; *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		else
			next = line + strlen(line);
		if (!json) {
			printf("  %s\n", line);
			continue;
		}
		char *colon = strchr(line, ':');
		jopen(NULL, '{');
		jkey("library");
		if (colon)
			*colon = '\0';
		jstr(line);
		if (colon)
			*colon = ':';
		jkey("found");
		fputs(colon && !strncmp(colon, ": not ", 6) ? "false" : "true", stdout);
		jkey("describe");
		jstr(line);
		jclose('}');
	}
	if (json)
		jclose(']');
}

static void usage(FILE *f)
{
	fprintf(f, "usage: opends-info [--json] [PATH...]\n"
		   "       opends-info --help | --version\n\n"
		   "Reports what this machine offers OpenDS: the configuration read from the OPENDS_*\n"
		   "environment variables, the backend and accelerator layer the driver opens with,\n"
		   "every device of that layer (name, PCI address, PCIe link, NUMA node, peer access,\n"
		   "NVLink-class peers), each backend and layer usable or not and why, the client libraries of\n"
		   "the built-in sources (librados, libradosstriper, libcephfs), and O_DIRECT support of each PATH\n"
		   "(default: . and /dev/shm); for a regular file also the path OpenDS takes for it.\n\n"
		   "  --json      one JSON object on stdout instead of the text report\n"
		   "  --help      this text\n"
		   "  --version   the library's version\n\n"
		   "Exit status: 0 when the driver opens and every PATH exists; 1 when the driver\n"
		   "cannot open with this configuration or a PATH does not exist; 2 on a bad\n"
		   "command line. See opends-info(1).\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },
		{ "version", no_argument, 0, 'V' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V': {
			unsigned a, b, p;
			opends_get_version(&a, &b, &p);
			printf("opends-info (OpenDS) %u.%u.%u\n", a, b, p);
			return 0;
		}
		default:
			usage(stderr);
			return 2;
		}
	}
	int npaths = argc - optind;
	char **paths = argv + optind;

	unsigned maj, min, pat;
	opends_get_version(&maj, &min, &pat);
	char version[48];
	snprintf(version, sizeof(version), "%u.%u.%u", maj, min, pat);
	struct utsname u;
	uname(&u);
	if (json) {
		jopen(NULL, '{');
		jkey("version");
		jstr(version);
		jkey("system");
		char sys[3 * 65 + 8];
		snprintf(sys, sizeof(sys), "%s %s %s", u.sysname, u.release, u.machine);
		jstr(sys);
		jopen("configuration", '{');
	} else {
		printf("OpenDS %s on %s %s (%s)\n", version, u.sysname, u.release, u.machine);
		printf("\nconfiguration (environment):\n");
	}
	for (size_t i = 0; i < NVARS; i++) {
		const char *v = getenv(config_vars[i]);
		if (json) {
			jkey(config_vars[i]);
			jstr(v && *v ? v : NULL);
		} else {
			printf("  %-27s %s\n", config_vars[i], v && *v ? v : "(unset: default)");
		}
	}
	if (json)
		jclose('}');

	int rc = 0;
	opends_error_t e = opends_driver_open();
	if (e.err) {
		rc = 1;
		if (json) {
			jopen("driver", '{');
			jkey("open");
			fputs("false", stdout);
			jkey("error");
			jstr(opends_err_name(e.err));
			jkey("detail");
			jstr(opends_last_error_detail());
			jclose('}');
		} else {
			printf("\nopends_driver_open fails with this configuration: %s\n  %s\n",
			       opends_op_status_error(e.err), opends_last_error_detail());
		}
		if (json)
			jopen("devices", '['), jclose(']');
	} else {
		opends_drv_props_t props;
		opends_driver_get_properties(&props);
		char desc[512];
		opends_describe(NULL, desc, sizeof(desc));
		if (json) {
			jopen("driver", '{');
			jkey("open");
			fputs("true", stdout);
			jkey("backend");
			jstr(opends_driver_backend());
			jkey("active");
			jstr(desc);
			jkey("max_direct_io_size");
			printf("%zu", props.max_direct_io_size);
			jkey("max_batch_io_size");
			printf("%u", props.max_batch_io_size);
			jclose('}');
		} else {
			printf("\nactive: %s\n  max_direct_io_size %zu bytes, max_batch_io_size %u\n", desc,
			       props.max_direct_io_size, props.max_batch_io_size);
		}
		describe_devices();
		describe_files(npaths, paths);
		opends_driver_close();
	}

	describe_sources();
	if (json)
		jopen("accelerators", '[');
	else
		printf("\naccelerator layers:\n");
	try_open("OPENDS_ACCEL", "cuda", "cuda");
	try_open("OPENDS_ACCEL", "host", "host");
	if (json)
		jclose(']'), jopen("backends", '[');
	else
		printf("\nbackends:\n");
	try_open("OPENDS_BACKEND", "gds", "gds");
	try_open("OPENDS_BACKEND", "uring", "uring");
	try_open("OPENDS_BACKEND", "ref", "ref");

	if (json)
		jclose(']'), jopen("paths", '[');
	else
		printf("\nO_DIRECT:\n");
	if (npaths == 0) {
		direct_support(".");
		direct_support("/dev/shm");
	}
	for (int i = 0; i < npaths; i++)
		if (!direct_support(paths[i]))
			rc = 1;
	if (json) {
		jclose(']');
		jclose('}');
		putchar('\n');
	}
	return rc;
}
