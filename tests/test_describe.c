/* opends_describe: the driver's and each handle's path, in words, and the
 * errors of its misuse. A user debugging "why is this slow" reads it (and
 * opends-info prints it), so it must name the backend and the file's mode. */
#include "common.h"

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(60);
	char buf[512];
	EXPECT_ERR(opends_describe(NULL, buf, sizeof(buf)), OPENDS_DRIVER_NOT_INITIALIZED);
	t_driver_open();

	OK(opends_describe(NULL, buf, sizeof(buf)));
	printf("driver: %s\n", buf);
	CHECKF(strstr(buf, opends_driver_backend()) != NULL, "driver description \"%s\" lacks the backend", buf);

	char path[4096];
	t_path(path, sizeof(path), "describe.bin");
	t_write_pattern_file(path, 8192, pat16);
	for (int direct = 0; direct < 2; direct++) {
		int fd = t_open(path, O_RDONLY, direct);
		if (fd == -2)
			continue;
		opends_handle_t fh = t_register(fd);
		OK(opends_describe(fh, buf, sizeof(buf)));
		printf("handle (%s): %s\n", direct ? "O_DIRECT" : "buffered", buf);
		char want[32];
		snprintf(want, sizeof(want), "fd %d", fd);
		CHECKF(strstr(buf, want) != NULL, "handle description \"%s\" lacks \"%s\"", buf, want);
		CHECKF((strstr(buf, "file, O_DIRECT,") != NULL) == (direct != 0),
		       "handle description \"%s\" gets the fd's O_DIRECT wrong", buf);
		/* truncation keeps the string terminated */
		char tiny[8];
		memset(tiny, 'x', sizeof(tiny));
		OK(opends_describe(fh, tiny, sizeof(tiny)));
		CHECKF(strlen(tiny) == sizeof(tiny) - 1, "truncated description has length %zu", strlen(tiny));
		EXPECT_ERR(opends_describe(fh, NULL, 10), OPENDS_INVALID_VALUE);
		EXPECT_ERR(opends_describe(fh, buf, 0), OPENDS_INVALID_VALUE);
		OK(opends_handle_deregister(fh));
		EXPECT_ERR(opends_describe(fh, buf, sizeof(buf)), OPENDS_HANDLE_NOT_REGISTERED);
		close(fd);
	}
	OK(opends_driver_close());
	printf("describe ok\n");
	return 0;
}
