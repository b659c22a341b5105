/*
 * cufile_prog [--mem=host|device] [--gpu=N] DIR
 *
 * A cuFile program as users write it: built against NVIDIA's cufile.h and
 * linked against NVIDIA's libcufile.so.0 (tests/dropin/prebuilt/run.sh
 * builds it so), then run unchanged on NVIDIA's library or on OpenDS's
 * drop-in. It does real I/O in DIR and checks every byte (a mismatch fails
 * it, exit 1); it prints each call's answer to misuse as a "= name value"
 * line, so that the two libraries' answers can be compared line by line
 * (run.sh against the expected answers, gpu-compare.sh between libraries).
 * "#" lines are information that may differ (versions, properties).
 *
 * --gpu=N: device memory on GPU N: the driver is opened with GPU 0's
 * context current, then GPU N's is made current and every buffer lives
 * there (cuFile serves a buffer in the context it belongs to).
 *
 * Device memory needs the program built with -DPROG_CUDA and -lcuda (as
 * CUDA programs are; gpu-compare.sh does); without, it has host memory only.
 *
 * Functions newer than cuFile 1.15 are looked up with dlsym, as programs
 * do that run on several releases, so the program builds and loads with
 * cuFile 1.15 and later.
 */
/* FAIL, CU_OK, device memory and the answer lines: prog.h, shared with
 * the shaped programs of this folder */
#include "prog.h"

#ifdef PROG_CUDA
/* the CUDA driver API, linked (-lcuda) */
static CUcontext ctx;
static const char *cu_init(int dev_index)
{
	CUdevice dev;
	if (cuInit(0) != CUDA_SUCCESS)
		return "cuInit failed: no usable GPU";
	if (cuDeviceGet(&dev, dev_index) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
	    cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
		return "no such GPU";
	return NULL;
}
#endif

#define FSIZE (1u << 20)

static int gpu;
static uint8_t *oracle;

/* the file: cufile_prog's own pattern (its expected answers count on it) */
static uint8_t opat(size_t i)
{
	return (uint8_t)(i * 2654435761u >> 13);
}

static void check_bytes(const void *buf, size_t boff, size_t off, size_t n, const char *what)
{
	uint8_t *h = malloc(n ? n : 1);
	if (!h)
		FAIL("out of memory");
	m_get(h, (const uint8_t *)buf + boff, n);
	for (size_t i = 0; i < n; i++)
		if (h[i] != oracle[off + i])
			FAIL("%s: byte %zu is 0x%02x, the file has 0x%02x", what, i, h[i], oracle[off + i]);
	free(h);
}

static CUfileHandle_t reg(int fd, CUfileError_t *e)
{
	CUfileDescr_t d;
	memset(&d, 0, sizeof d);
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	d.handle.fd = fd;
	CUfileHandle_t fh = NULL;
	*e = cuFileHandleRegister(&fh, &d);
	return fh;
}

/* a sync call's result: bytes, -1 with errno, or -CU_FILE_*. errno is
 * read here, after the call: show_io(name, cuFileRead(...)) evaluates the
 * call first, where an errno argument might have been read before it. */
static void show_io(const char *name, ssize_t r)
{
	int err = errno;
	if (r == -1)
		printf("= %s -1 errno %s\n", name, err == EIO ? "EIO" : err == EBADF ? "EBADF" : err == EINVAL ? "EINVAL"
							     : strerror(err));
	else
		printf("= %s %zd\n", name, r);
}

/* newer than 1.15: looked up by name */
typedef CUfileError_t (*fn_int)(int);
typedef CUfileError_t (*fn_pint)(int *);
typedef CUfileError_t (*fn_void)(void);
typedef CUfileError_t (*fn_ptr)(void *);
typedef CUfileError_t (*fn_str)(const char *);
typedef CUfileError_t (*fn_bar)(int, size_t *);
typedef CUfileError_t (*fn_p2pget)(int, int *);
typedef CUfileError_t (*fn_p2pset)(int, int);
typedef CUfileError_t (*fn_slabset)(const size_t *, const size_t *, int);
typedef CUfileError_t (*fn_slabget)(size_t *, size_t *, int);
/* CUfileIOVec_t of cufile.h 1.20, declared here: older headers (1.15) lack
 * the type, and the program must build against them too */
struct prog_iovec {
	void *base;
	size_t len;
};
typedef ssize_t (*fn_rwv)(CUfileHandle_t, const struct prog_iovec *, size_t, off_t, unsigned);


static void *sym(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	if (!p)
		printf("= %s absent\n", name);
	return p;
}

static void newer_api(bool open)
{
	const char *when = open ? "open" : "closed";
	char n[96];
	fn_int set_level = (fn_int)sym("cuFileSetStatsLevel");
	fn_pint get_level = (fn_pint)sym("cuFileGetStatsLevel");
	fn_void start = (fn_void)sym("cuFileStatsStart"), stop = (fn_void)sym("cuFileStatsStop"),
		reset = (fn_void)sym("cuFileStatsReset");
	fn_ptr l1 = (fn_ptr)sym("cuFileGetStatsL1");
	fn_str topo = (fn_str)sym("cuFileExportPCIeTopology");
	fn_bar bar = (fn_bar)sym("cuFileGetBARSizeInKB");
	fn_p2pget p2pget = (fn_p2pget)sym("cuFileDriverGetP2PFlags");
	fn_p2pset p2pset = (fn_p2pset)sym("cuFileDriverSetP2PFlags");
	fn_slabset slabset = (fn_slabset)sym("cuFileSetParameterPosixPoolSlabArray");
	fn_slabget slabget = (fn_slabget)sym("cuFileGetParameterPosixPoolSlabArray");
	static uint64_t stats[4096]; /* larger than any level's structure */
	int level = -1;
	if (get_level) {
		printf("= stats_get_level_%s %d", when, (int)get_level(&level).err);
		printf(" level %d\n", level);
		printf("= stats_get_level_null %d\n", (int)get_level(NULL).err);
	}
	if (set_level) {
		snprintf(n, sizeof n, "stats_set_level_9_%s", when);
		printf("= %s %d\n", n, (int)set_level(9).err);
	}
	if (start)
		printf("= stats_start_%s %d\n", when, (int)start().err);
	if (l1)
		printf("= stats_l1_%s %d\n", when, (int)l1(stats).err);
	if (l1)
		printf("= stats_l1_null_%s %d\n", when, (int)l1(NULL).err);
	if (stop)
		printf("= stats_stop_%s %d\n", when, (int)stop().err);
	if (reset)
		printf("= stats_reset_%s %d\n", when, (int)reset().err);
	if (topo && open)
		printf("= topology_null %d\n", (int)topo(NULL).err);
	if (p2pget) {
		int f = -1;
		printf("= p2p_get_null_%s %d\n", when, (int)p2pget(CU_FILE_NVME_SUPPORTED, NULL).err);
		printf("= p2p_get_nvme_%s %d", when, (int)p2pget(CU_FILE_NVME_SUPPORTED, &f).err);
		printf("\n# p2p_flags_nvme_%s 0x%x\n", when, f);
		printf("= p2p_get_bad_kind_%s %d\n", when, (int)p2pget(99, &f).err);
	}
	if (p2pset)
		printf("= p2p_set_nvfs_%s %d\n", when, (int)p2pset(CU_FILE_NVME_SUPPORTED, 1 << 1).err);
	if (slabset) {
		size_t sz[2] = { 4, 1024 }, ct[2] = { 8, 4 };
		printf("= slab_set_null_%s %d\n", when, (int)slabset(NULL, ct, 2).err);
		printf("= slab_set_%s %d\n", when, (int)slabset(sz, ct, 2).err);
	}
	if (slabget && !open) {
		size_t sz[2] = { 0, 0 }, ct[2] = { 0, 0 };
		printf("= slab_get_len1 %d\n", (int)slabget(sz, ct, 1).err);
		CUfileError_t e = slabget(sz, ct, 2);
		printf("= slab_get_len2 %d", (int)e.err);
		printf(" %zu/%zu %zu/%zu\n", sz[0], ct[0], sz[1], ct[1]);
	}
	/* last: NVIDIA's (1.15.1) opens the driver here if it is not open */
	if (bar) {
		printf("= bar_null_%s %d\n", when, (int)bar(0, NULL).err);
		size_t kb = 0;
		printf("# bar_size_%s %d %zu KiB\n", when, (int)bar(0, &kb).err, kb);
		if (stop && !open)
			printf("= bar_opened_the_driver %d\n", (int)stop().err);
	}
}

/* cuFileReadv (1.20): three segments at consecutive file offsets, a short
 * read at the end of the file, and misuse */
static void readv_checks(CUfileHandle_t fh, uint8_t *buf)
{
	fn_rwv rv = (fn_rwv)sym("cuFileReadv");
	if (!rv)
		return;
	struct prog_iovec iov[3] = { { buf, 5000 }, { buf + 8192, 70000 }, { buf + 131072, 4096 } };
	ssize_t r = rv(fh, iov, 3, 12345, 0);
	show_io("readv", r);
	if (r != 79096)
		FAIL("cuFileReadv of 3 segments: %zd", r);
	check_bytes(buf, 0, 12345, 5000, "readv segment 0");
	check_bytes(buf, 8192, 12345 + 5000, 70000, "readv segment 1");
	check_bytes(buf, 131072, 12345 + 75000, 4096, "readv segment 2");
	struct prog_iovec tail[2] = { { buf, 4096 }, { buf + 65536, 4096 } };
	r = rv(fh, tail, 2, FSIZE - 6000, 0);
	show_io("readv_short_at_eof", r);
	if (r != 6000)
		FAIL("cuFileReadv across the end of the file: %zd", r);
	check_bytes(buf, 0, FSIZE - 6000, 4096, "readv at EOF, segment 0");
	check_bytes(buf, 65536, FSIZE - 1904, 1904, "readv at EOF, segment 1");
	errno = 0;
	show_io("readv_flags", rv(fh, iov, 3, 0, 1));
	errno = 0;
	show_io("readv_negative_offset", rv(fh, iov, 3, -4096, 0));
	errno = 0;
	show_io("readv_null_iov", rv(fh, NULL, 3, 0, 0));
	show_io("readv_zero_segments", rv(fh, iov, 0, 0, 0));
}

int main(int argc, char **argv)
{
	const char *dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mem=device"))
			device = true;
		else if (!strcmp(argv[i], "--mem=host"))
			device = false;
		else if (!strncmp(argv[i], "--gpu=", 6))
			device = true, gpu = atoi(argv[i] + 6);
		else
			dir = argv[i];
	}
	if (!dir) {
		fprintf(stderr, "usage: %s [--mem=host|device] DIR\n", argv[0]);
		return 2;
	}
	if (device) {
#ifdef PROG_CUDA
		const char *why = cu_init(0);
#else
		const char *why = "built without -DPROG_CUDA: host memory only";
#endif
		if (why) {
			printf("SKIP: %s\n", why);
			return 77;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	CUfileError_t e;
	int v = 0;
	e = cuFileGetVersion(&v);
	printf("# version %d (%d)\n", v, (int)e.err);

	/* before the driver opens: parameters, the newer calls */
	size_t sz = 0;
	printf("= param_get_bad %d\n", (int)cuFileGetParameterSizeT((CUFileSizeTConfigParameter_t)99, &sz).err);
	printf("= param_get_null %d\n",
	       (int)cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, NULL).err);
	size_t lo = 0, hi = 0;
	printf("= param_minmax_null %d\n",
	       (int)cuFileGetParameterMinMaxValue(CUFILE_PARAM_EXECUTION_MAX_IO_THREADS, NULL, &hi).err);
	printf("= param_minmax %d\n",
	       (int)cuFileGetParameterMinMaxValue(CUFILE_PARAM_EXECUTION_MAX_IO_THREADS, &lo, &hi).err);
	printf("# param_minmax_threads %zu..%zu\n", lo, hi);
	printf("= param_set_bool_bad %d\n", (int)cuFileSetParameterBool((CUFileBoolConfigParameter_t)99, true).err);
	printf("= param_set_string_null %d\n",
	       (int)cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL, NULL).err);
	newer_api(false);

	e = cuFileDriverOpen();
	printf("= driver_open %d\n", (int)e.err);
	if (e.err != CU_FILE_SUCCESS)
		FAIL("cuFileDriverOpen: %d", (int)e.err);
	CUfileDrvProps_t props;
	memset(&props, 0, sizeof props);
	printf("= props %d\n", (int)cuFileDriverGetProperties(&props).err);
	printf("= props_null %d\n", (int)cuFileDriverGetProperties(NULL).err);
	printf("# props nvfs %u.%u fflags 0x%x max_direct_io %zu KiB batch %u\n", props.nvfs.major_version,
	       props.nvfs.minor_version, props.fflags, props.nvfs.max_direct_io_size, props.max_batch_io_size);
#ifdef PROG_CUDA
	if (gpu && cu_init(gpu)) {
		printf("SKIP: no GPU %d\n", gpu);
		return 77;
	}
#endif
	printf("= param_set_while_open %d\n",
	       (int)cuFileSetParameterSizeT(CUFILE_PARAM_EXECUTION_MAX_IO_THREADS, 4).err);
	newer_api(true);

	/* the data */
	char path[4096], wpath[4096];
	snprintf(path, sizeof path, "%s/prog-data.bin", dir);
	snprintf(wpath, sizeof wpath, "%s/prog-write.bin", dir);
	oracle = malloc(FSIZE);
	if (!oracle)
		FAIL("out of memory");
	for (size_t i = 0; i < FSIZE; i++)
		oracle[i] = opat(i);
	int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0 || pwrite(fd, oracle, FSIZE, 0) != (ssize_t)FSIZE || fsync(fd))
		FAIL("writing %s: %s", path, strerror(errno));
	close(fd);

	int rfd = open(path, O_RDONLY);
	CUfileHandle_t fh = reg(rfd, &e);
	printf("= handle_register %d\n", (int)e.err);
	if (e.err)
		FAIL("cuFileHandleRegister: %d (on a VM without udev see GPU-MACHINE.md)", (int)e.err);
	CUfileHandle_t fh2 = reg(rfd, &e);
	printf("= handle_register_again %d\n", (int)e.err);
	if (!e.err)
		cuFileHandleDeregister(fh2);
	CUfileDescr_t d;
	memset(&d, 0, sizeof d);
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_WIN32;
	d.handle.fd = rfd;
	printf("= handle_register_win32 %d\n", (int)cuFileHandleRegister(&fh2, &d).err);
	d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
	printf("= handle_register_null_fh %d\n", (int)cuFileHandleRegister(NULL, &d).err);
	printf("= handle_register_null_descr %d\n", (int)cuFileHandleRegister(&fh2, NULL).err);

	const size_t SPAN = 256 * 1024;
	uint8_t *buf = m_alloc(SPAN);
	/* reads: aligned, unaligned, through a registered buffer, at EOF */
	const struct {
		size_t off, size, boff;
	} rd[] = { { 0, 65536, 0 }, { 4096, 131072, 4096 }, { 12345, 6789, 3 }, { FSIZE - 4096, 4096, 0 },
		   { FSIZE - 100, 100, 8 } };
	for (size_t i = 0; i < sizeof rd / sizeof rd[0]; i++) {
		ssize_t r = cuFileRead(fh, buf, rd[i].size, (off_t)rd[i].off, (off_t)rd[i].boff);
		char n[32];
		snprintf(n, sizeof n, "read_%zu", i);
		show_io(n, r);
		if (r != (ssize_t)rd[i].size)
			FAIL("cuFileRead(%zu at %zu) = %zd", rd[i].size, rd[i].off, r);
		check_bytes(buf, rd[i].boff, rd[i].off, rd[i].size, n);
	}
	show_io("read_at_eof", cuFileRead(fh, buf, 4096, FSIZE, 0));
	printf("= buf_register %d\n", (int)cuFileBufRegister(buf, SPAN, 0).err);
	printf("= buf_register_again %d\n", (int)cuFileBufRegister(buf, SPAN, 0).err);
	ssize_t r = cuFileRead(fh, buf, 65536, 8192, 4096);
	show_io("read_registered", r);
	if (r != 65536)
		FAIL("read into the registered buffer: %zd", r);
	check_bytes(buf, 4096, 8192, 65536, "read_registered");
	/* sizes past the limits: beyond the registered range */
	errno = 0;
	show_io("read_past_registered", cuFileRead(fh, buf, SPAN, 0, 4096));
	printf("= buf_deregister %d\n", (int)cuFileBufDeregister(buf).err);
	printf("= buf_register_zero_length %d\n", (int)cuFileBufRegister(buf, 0, 0).err);
	printf("= buf_deregister_again %d\n", (int)cuFileBufDeregister(buf).err);

	/* misuse of the data path */
	errno = 0;
	r = cuFileRead(fh, buf, 4096, -4096, 0);
	show_io("read_negative_offset", r);
	errno = 0;
	r = cuFileWrite(fh, buf, 4096, 0, 0);
	show_io("write_read_only_fd", r);

	/* batch: four reads; then one cancelled before its status is asked */
	CUfileBatchHandle_t b = NULL;
	printf("= batch_setup_too_many %d\n", (int)cuFileBatchIOSetUp(&b, 1u << 20).err);
	printf("= batch_setup_zero %d\n", (int)cuFileBatchIOSetUp(&b, 0).err);
	printf("= batch_setup %d\n", (int)cuFileBatchIOSetUp(&b, 4).err);
	CUfileIOParams_t p[4];
	memset(p, 0, sizeof p);
	for (int i = 0; i < 4; i++) {
		p[i].mode = CUFILE_BATCH;
		p[i].u.batch.devPtr_base = buf;
		p[i].u.batch.devPtr_offset = (off_t)i * 65536;
		p[i].u.batch.file_offset = (off_t)i * 131072;
		p[i].u.batch.size = 65536;
		p[i].fh = fh;
		p[i].opcode = CUFILE_READ;
		p[i].cookie = (void *)(uintptr_t)(i + 1);
	}
	CUfileIOParams_t p5[5];
	memcpy(p5, p, sizeof p);
	p5[4] = p[0];
	printf("= batch_submit_more_than_setup %d\n", (int)cuFileBatchIOSubmit(b, 5, p5, 0).err);
	printf("= batch_submit %d\n", (int)cuFileBatchIOSubmit(b, 4, p, 0).err);
	unsigned got = 0;
	CUfileIOEvents_t ev[4];
	for (int tries = 0; got < 4 && tries < 300; tries++) {
		unsigned nr = 4 - got;
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		e = cuFileBatchIOGetStatus(b, 1, &nr, ev + got, &ts);
		if (e.err)
			FAIL("cuFileBatchIOGetStatus: %d", (int)e.err);
		got += nr;
	}
	printf("= batch_events %u\n", got);
	for (unsigned i = 0; i < got; i++) {
		int c = (int)(uintptr_t)ev[i].cookie - 1;
		if (c < 0 || c > 3 || ev[i].status != CUFILE_COMPLETE || ev[i].ret != 65536)
			FAIL("batch event %u: cookie %d status 0x%x ret %zd", i, c, ev[i].status, (ssize_t)ev[i].ret);
		check_bytes(buf, (size_t)c * 65536, (size_t)c * 131072, 65536, "batch");
	}
	cuFileBatchIODestroy(b);
	printf("= batch_setup_2 %d\n", (int)cuFileBatchIOSetUp(&b, 4).err);
	printf("= batch_submit_2 %d\n", (int)cuFileBatchIOSubmit(b, 4, p, 0).err);
	printf("= batch_cancel %d\n", (int)cuFileBatchIOCancel(b).err);
	unsigned nr = 4;
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	e = cuFileBatchIOGetStatus(b, 0, &nr, ev, &ts);
	printf("= batch_status_after_cancel %d events %u\n", (int)e.err, nr);
	cuFileBatchIODestroy(b);
	readv_checks(fh, buf);
	cuFileHandleDeregister(fh);
	close(rfd);

	/* a write-only handle: reads are refused, writes land */
	int wfd = open(wpath, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	CUfileHandle_t wfh = reg(wfd, &e);
	printf("= handle_register_write_only %d\n", (int)e.err);
	m_put(buf, oracle, 65536);
	r = cuFileWrite(wfh, buf, 65536, 4096, 0);
	show_io("write", r);
	/* cuFileWritev (1.20): two segments at consecutive offsets from 200000,
	 * the second from the middle of the buffer */
	fn_rwv wv_fn = (fn_rwv)sym("cuFileWritev");
	if (wv_fn) {
		struct prog_iovec wv[2] = { { buf, 3000 }, { buf + 40000, 9000 } };
		r = wv_fn(wfh, wv, 2, 200000, 0);
		show_io("writev", r);
		if (r != 12000)
			FAIL("cuFileWritev of 2 segments: %zd", r);
	}
	errno = 0;
	r = cuFileRead(wfh, buf, 4096, 0, 0);
	show_io("read_write_only_fd", r);
	size_t asz = 4096;
	off_t afoff = 0, aboff = 0;
	ssize_t aret = -12345;
	e = cuFileReadAsync(wfh, buf, &asz, &afoff, &aboff, &aret, NULL);
	printf("= read_async_write_only_fd %d\n", (int)e.err);
	if (!e.err) {
		/* what the read left in *bytes_read_p once the stream ran it */
#ifdef PROG_CUDA
		if (device)
			CU_OK(cuStreamSynchronize(NULL));
#endif
		for (int i = 0; i < 2000 && __atomic_load_n(&aret, __ATOMIC_ACQUIRE) == -12345; i++)
			usleep(1000);
		printf("= read_async_write_only_fd_bytes_read %zd\n", __atomic_load_n(&aret, __ATOMIC_ACQUIRE));
	}
#ifdef PROG_CUDA
	if (device) {
		/* the same on a stream of the program's own, registered, as
		 * KvikIO calls it (device memory only: GPU runs) */
		CUstream st;
		CU_OK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
		printf("= stream_register %d\n", (int)cuFileStreamRegister(st, 0).err);
		aret = -12345;
		e = cuFileReadAsync(wfh, buf, &asz, &afoff, &aboff, &aret, st);
		printf("= read_async_write_only_fd_stream %d\n", (int)e.err);
		CU_OK(cuStreamSynchronize(st));
		printf("= read_async_write_only_fd_stream_bytes_read %zd\n", aret);
		printf("= stream_deregister %d\n", (int)cuFileStreamDeregister(st).err);
		CU_OK(cuStreamDestroy(st));
	}
#endif
	cuFileHandleDeregister(wfh);
	close(wfd);
	uint8_t *back = malloc(65536);
	int cfd = open(wpath, O_RDONLY);
	if (!back || cfd < 0 || pread(cfd, back, 65536, 4096) != 65536 || memcmp(back, oracle, 65536))
		FAIL("the file written through cuFileWrite does not hold the bytes");
	if (wv_fn && (pread(cfd, back, 12000, 200000) != 12000 || memcmp(back, oracle, 3000) ||
		       memcmp(back + 3000, oracle + 40000, 9000)))
		FAIL("the file written through cuFileWritev does not hold the bytes");
	close(cfd);
	free(back);

	printf("= driver_close %d\n", (int)cuFileDriverClose().err);
	unlink(path);
	unlink(wpath);
	if (device)
		printf("PASS: every byte as the file holds it (memory of GPU %d)\n", gpu);
	else
		printf("PASS: every byte as the file holds it (host memory)\n");
	return 0;
}
