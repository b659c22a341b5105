// cufile_prog_cxx DIR
//
// A C++ cuFile program as users write one: std::string, std::vector and
// string streams around cuFile's C API, built with g++ against NVIDIA's
// cufile.h and linked against NVIDIA's libcufile.so.0 with the linker's
// --as-needed (Ubuntu's default). NVIDIA's library NEEDs libstdc++.so.6 and
// exports some of its template instantiations, so such a program may take
// std:: symbols from it; on the drop-in it must load and run all the same
// (issue 21). It writes a file through cuFile from host memory, reads it
// back at several offsets and checks every byte; exit 1 on any difference.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <cufile.h>

namespace {

std::string status(const CUfileError_t &e)
{
	std::ostringstream s;
	s << e.err << " (" << cufileop_status_error(e.err) << ")";
	return s.str();
}

void ok(const CUfileError_t &e, const std::string &what)
{
	if (e.err != CU_FILE_SUCCESS)
		throw std::runtime_error(what + ": " + status(e));
}

std::uint8_t pat(std::size_t i)
{
	return static_cast<std::uint8_t>((i * 7919u + 13u) >> 3);
}

class File {
public:
	File(const std::string &path, int flags) : fd_(::open(path.c_str(), flags, 0644))
	{
		if (fd_ < 0)
			throw std::runtime_error("open " + path + ": " + std::strerror(errno));
		CUfileDescr_t d;
		std::memset(&d, 0, sizeof d);
		d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
		d.handle.fd = fd_;
		ok(cuFileHandleRegister(&fh_, &d), "cuFileHandleRegister " + path);
	}
	~File()
	{
		cuFileHandleDeregister(fh_);
		::close(fd_);
	}
	File(const File &) = delete;
	File &operator=(const File &) = delete;
	CUfileHandle_t handle() const { return fh_; }

private:
	int fd_;
	CUfileHandle_t fh_ = nullptr;
};

} // namespace

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	const std::string path = std::string(argv[1]) + "/prog-cxx.bin";
	const std::size_t size = 3 * 1048576 + 4321;
	try {
		ok(cuFileDriverOpen(), "cuFileDriverOpen");
		std::vector<std::uint8_t> out(size);
		for (std::size_t i = 0; i < size; i++)
			out[i] = pat(i);
		{
			File f(path, O_CREAT | O_TRUNC | O_RDWR);
			ssize_t n = cuFileWrite(f.handle(), out.data(), size, 0, 0);
			if (n != static_cast<ssize_t>(size))
				throw std::runtime_error("cuFileWrite returned " + std::to_string(n));
		}
		{
		File f(path, O_RDONLY);
		const std::vector<std::pair<std::size_t, std::size_t>> reads = {
			{ 0, size }, { 1, 4095 }, { 4096, 1048576 }, { 777777, 123456 }, { size - 10, 10 }
		};
		for (const auto &r : reads) {
			std::vector<std::uint8_t> in(r.second + 64, 0xee);
			ssize_t n = cuFileRead(f.handle(), in.data(), r.second, static_cast<off_t>(r.first), 32);
			std::ostringstream what;
			what << "cuFileRead(" << r.second << " at " << r.first << ")";
			if (n != static_cast<ssize_t>(r.second))
				throw std::runtime_error(what.str() + " returned " + std::to_string(n));
			if (std::memcmp(in.data() + 32, out.data() + r.first, r.second) != 0)
				throw std::runtime_error(what.str() + ": the bytes differ from the file's");
			for (std::size_t i = 0; i < 32; i++)
				if (in[i] != 0xee || in[32 + r.second + i] != 0xee)
					throw std::runtime_error(what.str() + ": wrote outside its range");
			std::printf("= %s %zd\n", what.str().c_str(), n);
		}
		}
		ok(cuFileDriverClose(), "cuFileDriverClose");
	} catch (const std::exception &ex) {
		std::fprintf(stderr, "FAIL: %s\n", ex.what());
		return 1;
	}
	::unlink(path.c_str());
	std::printf("PASS: C++ program, every byte as the file holds it\n");
	return 0;
}
