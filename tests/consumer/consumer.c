/*
 * An outside program built against the installed library through
 * pkg-config: only <opends.h> and -lopends, nothing from the build tree.
 * consumer <file>: <file> holds pat16 bytes (run.sh writes it).
 */
#include <opends.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char pat16(unsigned long x)
{
	return (unsigned char)(((x % 4096) + (x / 4096)) % 256);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	opends_error_t e = opends_driver_open();
	if (e.err != OPENDS_SUCCESS) {
		fprintf(stderr, "open: %s (%s)\n", opends_op_status_error(e.err), opends_last_error_detail());
		return 1;
	}
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0)
		return 1;
	opends_handle_t fh;
	e = opends_handle_register(&fh, fd);
	if (e.err != OPENDS_SUCCESS)
		return 1;
	static unsigned char buf[8192];
	ssize_t n = opends_sync_read(fh, buf, sizeof buf, 4096 + 3, 0);
	if (n != (ssize_t)sizeof buf) {
		fprintf(stderr, "read: %zd (%s)\n", n, opends_op_status_error((int)n));
		return 1;
	}
	for (size_t i = 0; i < sizeof buf; i++)
		if (buf[i] != pat16(4096 + 3 + i)) {
			fprintf(stderr, "mismatch at %zu\n", i);
			return 1;
		}
	opends_handle_deregister(fh);
	close(fd);
	opends_driver_close();
	unsigned ma, mi, pa;
	opends_get_version(&ma, &mi, &pa);
	printf("C consumer OK (opends %u.%u.%u)\n", ma, mi, pa);
	return 0;
}
