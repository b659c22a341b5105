// The same check from C++: the header must compile as C++ (extern "C",
// no C-only constructs) and link without name mangling trouble.
#include <opends.h>

#include <cstdio>
#include <fcntl.h>
#include <unistd.h>
#include <vector>

static unsigned char pat16(unsigned long x)
{
	return static_cast<unsigned char>(((x % 4096) + (x / 4096)) % 256);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	opends_error_t e = opends_driver_open();
	if (e.err != OPENDS_SUCCESS) {
		std::fprintf(stderr, "open: %s\n", opends_op_status_error(e.err));
		return 1;
	}
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0)
		return 1;
	opends_handle_t fh = nullptr;
	if (opends_handle_register(&fh, fd).err != OPENDS_SUCCESS)
		return 1;
	std::vector<unsigned char> buf(10000);
	opends_async_future_t fut{};
	if (opends_async_read(fh, buf.data(), buf.size(), 1, 0, &fut).err != OPENDS_SUCCESS)
		return 1;
	ssize_t n = opends_async_await(&fut);
	if (n != static_cast<ssize_t>(buf.size())) {
		std::fprintf(stderr, "read: %zd (%s)\n", n, opends_op_status_error(static_cast<int>(n)));
		return 1;
	}
	for (size_t i = 0; i < buf.size(); i++)
		if (buf[i] != pat16(1 + i)) {
			std::fprintf(stderr, "mismatch at %zu\n", i);
			return 1;
		}
	opends_handle_deregister(fh);
	close(fd);
	opends_driver_close();
	std::printf("C++ consumer OK\n");
	return 0;
}
