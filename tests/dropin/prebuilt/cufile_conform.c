/*
 * The drop-in's conventions (docs/cufile-dropin.md) as a cuFile program
 * sees them: built against NVIDIA's cufile.h and linked against NVIDIA's
 * libcufile.so.0 as users build, run on the drop-in by run.sh (host
 * memory). It checks what the doc promises for the calls programs use most:
 *   - cuFileDriverOpen / Close count uses; the last close closes OpenDS;
 *     closing more than opened is DRIVER_NOT_INITIALIZED; cuFileUseCount;
 *   - the first call that needs the driver opens it (use count 0: only
 *     cuFileDriverOpen counts, as NVIDIA's);
 *   - an OpenDS the program opened itself is shared and never closed;
 *   - cuFileDriverGetProperties' max_direct_io_size is KiB (the chunk), and
 *     cuFileDriverSetMaxDirectIOSize sets it for the next open;
 *   - cuFileBufRegister's flags (RDMA hints accepted, others refused), and
 *     registrations inside a registered buffer (accepted, as NVIDIA's);
 *   - cuFileRead / Write byte-exact at any offsets; a read through a
 *     write-only fd is -1 with errno 5019; a read through a handle that
 *     was deregistered is -5027;
 *   - cuFileReadAsync / WriteAsync on the NULL stream and on a registered
 *     one: byte-exact results in *bytes_*; on a write-only handle the read
 *     is accepted and *bytes_read_p is -5019 at the call;
 *   - cuFileBatchIO*: events byte-exact, cookies once each.
 * What needs OpenDS's own calls (stream synchronize without CUDA, the
 * shared driver) is looked up by name, after checking the library is the
 * drop-in (its exported opends_cufile_dropin, as the doc says programs can).
 * Prints PASS or each mismatch; exit 0 / 1.
 */
#define _GNU_SOURCE
#include <cufile.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fails;
#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: MISMATCH: ", __FILE__, __LINE__);     \
			fprintf(stderr, __VA_ARGS__);                                 \
			fprintf(stderr, "\n");                                        \
			fails++;                                                      \
		}                                                                     \
	} while (0)
#define ERR(call, code)                                                               \
	do {                                                                          \
		CUfileError_t e_ = (call);                                            \
		CHECK(e_.err == (code), "%s: %d, expected %d", #call, (int)e_.err, (int)(code)); \
	} while (0)

static unsigned char byte_at(uint64_t i)
{
	return (unsigned char)((i * 2654435761u) >> 13 ^ i);
}

typedef struct {
	int err;
	int backend_err;
} ods_err;
static ods_err (*ods_open)(void), (*ods_close)(void), (*ods_sync)(void *);
static const char *(*ods_backend)(void);

static CUfileHandle_t reg(int fd)
{
	CUfileDescr_t d;
	memset(&d, 0, sizeof(d));
	d.handle.fd = fd;
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	CUfileHandle_t fh = NULL;
	ERR(cuFileHandleRegister(&fh, &d), CU_FILE_SUCCESS);
	return fh;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp";
	if (!dlsym(RTLD_DEFAULT, "opends_cufile_dropin")) {
		printf("SKIP: not the drop-in (no opends_cufile_dropin)\n");
		return 77;
	}
	ods_open = (ods_err(*)(void))dlsym(RTLD_DEFAULT, "opends_driver_open");
	ods_close = (ods_err(*)(void))dlsym(RTLD_DEFAULT, "opends_driver_close");
	ods_sync = (ods_err(*)(void *))dlsym(RTLD_DEFAULT, "opends_stream_synchronize");
	ods_backend = (const char *(*)(void))dlsym(RTLD_DEFAULT, "opends_driver_backend");
	if (!ods_open || !ods_close || !ods_sync || !ods_backend) {
		printf("FAIL: libopends's calls not found beside the drop-in\n");
		return 1;
	}
	enum { FS = 1 << 20 };
	char path[512];
	snprintf(path, sizeof(path), "%s/conform.bin", dir);
	int wfd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
	unsigned char *data = malloc(FS), *buf = malloc(FS + 8192);
	for (int i = 0; i < FS; i++)
		data[i] = byte_at((uint64_t)i);
	if (wfd < 0 || write(wfd, data, FS) != FS) {
		perror(path);
		return 1;
	}

	/* counted open/close */
	CHECK(cuFileUseCount() == 0, "use count %ld before any call", cuFileUseCount());
	ERR(cuFileDriverOpen(), CU_FILE_SUCCESS);
	ERR(cuFileDriverOpen(), CU_FILE_SUCCESS);
	CHECK(cuFileUseCount() == 2, "use count %ld after two opens", cuFileUseCount());
	ERR(cuFileDriverClose(), CU_FILE_SUCCESS);
	CHECK(ods_backend() != NULL, "the first of two closes closed OpenDS");
	ERR(cuFileDriverClose(), CU_FILE_SUCCESS);
	CHECK(ods_backend() == NULL && cuFileUseCount() == 0, "the last close left OpenDS open (use count %ld)",
	      cuFileUseCount());
	ERR(cuFileDriverClose(), CU_FILE_DRIVER_NOT_INITIALIZED);

	/* implicit open by the first call that needs it */
	int rfd = open(path, O_RDONLY);
	CUfileHandle_t fh = reg(rfd);
	CHECK(cuFileUseCount() == 0, "use count %ld after an implicit open (not counted)", cuFileUseCount());
	cuFileHandleDeregister(fh);
	ERR(cuFileDriverClose(), CU_FILE_SUCCESS);
	CHECK(ods_backend() == NULL, "closing the implicit open left OpenDS open");

	/* the program's own OpenDS is shared, never closed by the drop-in */
	CHECK(ods_open().err == 0, "opends_driver_open");
	ERR(cuFileDriverOpen(), CU_FILE_SUCCESS);
	ERR(cuFileDriverClose(), CU_FILE_SUCCESS);
	CHECK(ods_backend() != NULL, "cuFileDriverClose closed the OpenDS the program opened");
	CHECK(ods_close().err == 0, "opends_driver_close");

	ERR(cuFileDriverOpen(), CU_FILE_SUCCESS);
	CUfileDrvProps_t props;
	ERR(cuFileDriverGetProperties(&props), CU_FILE_SUCCESS);
	const char *cs = getenv("OPENDS_CHUNK_SIZE");
	if (cs && !strcmp(cs, "2m"))
		CHECK(props.nvfs.max_direct_io_size == 2048, "max_direct_io_size %zu KiB with OPENDS_CHUNK_SIZE=2m",
		      props.nvfs.max_direct_io_size);

	/* buffer registration: the RDMA hints accepted, other flags refused;
	 * twice, and an unregistered pointer, as NVIDIA answers */
	ERR(cuFileBufRegister(buf, 65536, CU_FILE_RDMA_REGISTER | CU_FILE_RDMA_RELAXED_ORDERING), CU_FILE_SUCCESS);
	ERR(cuFileBufRegister(buf, 65536, 0), CU_FILE_MEMORY_ALREADY_REGISTERED);
	ERR(cuFileBufDeregister(buf), CU_FILE_SUCCESS);
	ERR(cuFileBufRegister(buf, 65536, 4), CU_FILE_INVALID_VALUE);
	ERR(cuFileBufDeregister(buf), CU_FILE_MEMORY_NOT_REGISTERED);
	/* inside or across a registered buffer: registered and deregistered
	 * with 0, as NVIDIA answers; each such registration stands until it is
	 * deregistered (twice: ALREADY_REGISTERED), even after its buffer's */
	ERR(cuFileBufRegister(buf, 65536, 0), CU_FILE_SUCCESS);
	ERR(cuFileBufRegister(buf + 4096, 4096, 0), CU_FILE_SUCCESS);
	ERR(cuFileBufRegister(buf + 4096, 4096, 0), CU_FILE_MEMORY_ALREADY_REGISTERED);
	ERR(cuFileBufRegister(buf + 60000, 65536, 0), CU_FILE_SUCCESS);
	ERR(cuFileBufDeregister(buf + 4096), CU_FILE_SUCCESS);
	ERR(cuFileBufDeregister(buf + 4096), CU_FILE_MEMORY_NOT_REGISTERED);
	ERR(cuFileBufDeregister(buf), CU_FILE_SUCCESS);
	ERR(cuFileBufRegister(buf + 60000, 65536, 0), CU_FILE_MEMORY_ALREADY_REGISTERED);
	ERR(cuFileBufDeregister(buf + 60000), CU_FILE_SUCCESS);
	ERR(cuFileBufDeregister(buf + 60000), CU_FILE_MEMORY_NOT_REGISTERED);
	ERR(cuFileBufRegister(buf + 60000, 65536, 0), CU_FILE_SUCCESS); /* a buffer of its own now */
	ERR(cuFileBufDeregister(buf + 60000), CU_FILE_SUCCESS);
	/* an inner registration is forgotten with the driver's last close */
	ERR(cuFileBufRegister(buf, 65536, 0), CU_FILE_SUCCESS);
	ERR(cuFileBufRegister(buf + 4096, 4096, 0), CU_FILE_SUCCESS);
	ERR(cuFileDriverClose(), CU_FILE_SUCCESS);
	ERR(cuFileDriverOpen(), CU_FILE_SUCCESS);
	ERR(cuFileBufDeregister(buf + 4096), CU_FILE_MEMORY_NOT_REGISTERED);
	ERR(cuFileBufRegister(buf + 4096, 4096, 0), CU_FILE_SUCCESS);
	ERR(cuFileBufDeregister(buf + 4096), CU_FILE_SUCCESS);
	ERR(cuFileDriverClose(), CU_FILE_SUCCESS);

	/* cuFileDriverSetMaxDirectIOSize (KiB) is OPENDS_CHUNK_SIZE at the next
	 * open; out of range refused */
	ERR(cuFileDriverSetMaxDirectIOSize(4096), CU_FILE_SUCCESS);
	ERR(cuFileDriverSetMaxDirectIOSize(3), CU_FILE_INVALID_VALUE);
	ERR(cuFileDriverOpen(), CU_FILE_SUCCESS);
	ERR(cuFileDriverGetProperties(&props), CU_FILE_SUCCESS);
	CHECK(props.nvfs.max_direct_io_size == 4096, "max_direct_io_size %zu KiB after SetMaxDirectIOSize(4096)",
	      props.nvfs.max_direct_io_size);

	/* sync reads and writes */
	fh = reg(rfd);
	CUfileHandle_t wh = reg(wfd);
	static const struct {
		size_t size;
		off_t off, bo;
	} r[] = { { 1, 0, 0 }, { 4097, 4095, 3 }, { 300000, 77777, 4096 }, { 5000, FS - 100, 1 } };
	for (size_t i = 0; i < sizeof(r) / sizeof(*r); i++) {
		size_t want = (off_t)r[i].size > FS - r[i].off ? (size_t)(FS - r[i].off) : r[i].size;
		memset(buf, 0xEE, FS + 8192);
		ssize_t n = cuFileRead(fh, buf, r[i].size, r[i].off, r[i].bo);
		CHECK(n == (ssize_t)want && !memcmp(buf + r[i].bo, data + r[i].off, want) && buf[r[i].bo + want] == 0xEE &&
			      (r[i].bo == 0 || buf[r[i].bo - 1] == 0xEE),
		      "cuFileRead(size %zu, offset %lld, buf offset %lld): %zd, or wrong bytes", r[i].size,
		      (long long)r[i].off, (long long)r[i].bo, n);
	}
	for (int i = 0; i < 5000; i++)
		buf[i] = (unsigned char)~data[123 + i];
	CHECK(cuFileWrite(wh, buf, 5000, 123, 0) == 5000, "cuFileWrite of 5000 bytes");
	unsigned char back[5000];
	CHECK(pread(wfd, back, 5000, 123) == 5000 && !memcmp(back, buf, 5000), "cuFileWrite: the file differs");
	CHECK(pwrite(wfd, data + 123, 5000, 123) == 5000, "pwrite");
	int wofd = open(path, O_WRONLY);
	CUfileHandle_t woh = reg(wofd);
	errno = 0;
	ssize_t n = cuFileRead(woh, buf, 100, 0, 0);
	CHECK(n == -1 && errno == CU_FILE_INVALID_FILE_OPEN_FLAG, "cuFileRead through a write-only fd: %zd errno %d", n,
	      errno);

	/* stream-ordered */
	size_t sz = 65536, sz2 = 4096;
	off_t fo = 8191, bo = 5, fo2 = 0, bo2 = 0;
	ssize_t got = 1, got2 = 1;
	memset(buf, 0xEE, FS);
	ERR(cuFileReadAsync(fh, buf, &sz, &fo, &bo, &got, NULL), CU_FILE_SUCCESS);
	CHECK(ods_sync(NULL).err == 0, "opends_stream_synchronize(NULL)");
	CHECK(got == 65536 && !memcmp(buf + 5, data + 8191, 65536) && buf[4] == 0xEE,
	      "cuFileReadAsync on the NULL stream: %zd, or wrong bytes", got);
	ERR(cuFileReadAsync(woh, buf, &sz2, &fo2, &bo2, &got2, NULL), CU_FILE_SUCCESS);
	CHECK(got2 == -CU_FILE_INVALID_FILE_OPEN_FLAG, "cuFileReadAsync on a write-only handle: %zd at the call", got2);
	ods_sync(NULL);
	CHECK(got2 == -CU_FILE_INVALID_FILE_OPEN_FLAG, "cuFileReadAsync on a write-only handle: %zd", got2);
	size_t wsz = 3000;
	off_t wfo = 999, wbo = 0;
	ssize_t wgot = 1;
	for (int i = 0; i < 3000; i++)
		buf[i] = (unsigned char)(data[999 + i] ^ 0x5A);
	ERR(cuFileWriteAsync(wh, buf, &wsz, &wfo, &wbo, &wgot, NULL), CU_FILE_SUCCESS);
	ods_sync(NULL);
	CHECK(wgot == 3000 && pread(wfd, back, 3000, 999) == 3000 && !memcmp(back, buf, 3000),
	      "cuFileWriteAsync: %zd, or the file differs", wgot);
	CHECK(pwrite(wfd, data + 999, 3000, 999) == 3000, "pwrite");

	/* batch */
	CUfileBatchHandle_t b;
	ERR(cuFileBatchIOSetUp(&b, 4), CU_FILE_SUCCESS);
	CUfileIOParams_t p[4];
	memset(p, 0, sizeof(p));
	memset(buf, 0xEE, FS);
	for (int i = 0; i < 4; i++) {
		p[i].mode = CUFILE_BATCH;
		p[i].fh = fh;
		p[i].opcode = CUFILE_READ;
		p[i].cookie = (void *)(uintptr_t)(i + 1);
		p[i].u.batch.devPtr_base = buf + i * 65536;
		p[i].u.batch.file_offset = (off_t)i * 100003;
		p[i].u.batch.devPtr_offset = i;
		p[i].u.batch.size = 4096 * (size_t)(i + 1);
	}
	ERR(cuFileBatchIOSubmit(b, 4, p, 0), CU_FILE_SUCCESS);
	CUfileIOEvents_t ev[4];
	unsigned total = 0, seen[5] = { 0 };
	for (int tries = 0; tries < 1000 && total < 4; tries++) {
		unsigned nr = 4 - total;
		ERR(cuFileBatchIOGetStatus(b, nr, &nr, ev + total, NULL), CU_FILE_SUCCESS);
		total += nr;
	}
	CHECK(total == 4, "batch: %u events of 4", total);
	for (unsigned i = 0; i < total; i++) {
		uintptr_t c = (uintptr_t)ev[i].cookie;
		if (c < 1 || c > 4) {
			CHECK(0, "batch: cookie %p", ev[i].cookie);
			continue;
		}
		seen[c]++;
		int k = (int)c - 1;
		CHECK(ev[i].status == CUFILE_COMPLETE && ev[i].ret == 4096 * (size_t)c &&
			      !memcmp(buf + k * 65536 + k, data + k * 100003, 4096 * (size_t)c),
		      "batch entry %d: status %d ret %zu, or wrong bytes", k, (int)ev[i].status, ev[i].ret);
	}
	for (int c = 1; c <= 4; c++)
		CHECK(seen[c] == 1, "batch entry %d delivered %u times", c, seen[c]);
	cuFileBatchIODestroy(b);

	/* a deregistered handle */
	cuFileHandleDeregister(fh);
	n = cuFileRead(fh, buf, 100, 0, 0);
	CHECK(n == -CU_FILE_HANDLE_NOT_REGISTERED, "cuFileRead through a deregistered handle: %zd", n);
	cuFileHandleDeregister(wh);
	cuFileHandleDeregister(woh);
	ERR(cuFileDriverClose(), CU_FILE_SUCCESS);
	close(rfd);
	close(wfd);
	close(wofd);
	unlink(path);
	free(data);
	free(buf);
	if (fails) {
		printf("FAIL: cufile_conform: %d mismatches with docs/cufile-dropin.md\n", fails);
		return 1;
	}
	printf("PASS cufile_conform: the drop-in's conventions hold\n");
	return 0;
}
