/*
 * test_multidev: several devices in one process, on the hostdev layer's
 * simulated devices (OPENDS_HOSTDEV_DEVICES=4; device d >= 1 owns the
 * addresses [HOSTDEV_BASE + d * HOSTDEV_SPAN, + HOSTDEV_SPAN), see
 * src/accel/host/host.c), so the per-device logic runs without a GPU:
 *  - opends_device_count / _get_properties / _describe (exact fields, the
 *    simulated NUMA nodes of OPENDS_HOSTDEV_NUMA);
 *  - sync, async and batch reads into, and sync and async writes from,
 *    buffers on every device, byte-exact against the oracle, bytes around
 *    untouched;
 *  - streams: opends_stream_create gives streams of devices 0, 1, 2, 3 in
 *    turn; a stream with a buffer of its device works, with a buffer of
 *    another fails with OPENDS_CONTEXT_MISMATCH naming both devices; stream
 *    writes from every device; the NULL stream serves a buffer on any
 *    device;
 *  - one thread per device at once (sync, and stream on its device's);
 *  - opends_sync_read_fanout: one read placed on every device, byte-exact,
 *    across EOF, and its argument errors;
 *  - the staging workers (uring) move to the CPUs of the NUMA node of the
 *    device they copy to (OPENDS_HOSTDEV_NUMA and OPENDS_HOSTDEV_NODES:
 *    device 0 on CPU 0, device 1 on CPU 1);
 *  - a bad OPENDS_HOSTDEV_DEVICES refuses the driver open.
 */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common.h"

#define NDEV 4
#define HOSTDEV_BASE ((uintptr_t)0x7e8000000000ull)
#define HOSTDEV_SPAN ((uintptr_t)1 << 36)
#define LEN (12 * T_MiB)

static uint8_t *devmem[NDEV]; /* LEN bytes "on" each simulated device */
static uint8_t *oracle;
static size_t fsize;

static void map_devices(void)
{
	devmem[0] = t_xmalloc(LEN); /* any other address is device 0 */
	for (int d = 1; d < NDEV; d++) {
		void *want = (void *)(HOSTDEV_BASE + (uintptr_t)d * HOSTDEV_SPAN);
		void *p = mmap(want, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			       -1, 0);
		if (p == MAP_FAILED || p != want)
			skip("cannot map simulated device %d's memory at %p", d, want);
		devmem[d] = p;
	}
}

static void devices(void)
{
	t_phase = "device count, properties and describe";
	unsigned n = 0;
	OK(opends_device_count(&n));
	CHECKF(n == NDEV, "opends_device_count: %u, expected %d", n, NDEV);
	/* OPENDS_HOSTDEV_NUMA=0,-1,1 (main): device 3 has no entry */
	const int numa[NDEV] = { 0, -1, 1, -1 };
	for (unsigned d = 0; d < n; d++) {
		opends_device_props_t p;
		memset(&p, 0x5a, sizeof p);
		OK(opends_device_get_properties(d, &p));
		CHECKF(!strcmp(p.layer, "hostdev") && !strcmp(p.name, "simulated device") && !strcmp(p.pci_bus_id, ""),
		       "device %u: layer \"%s\" name \"%s\" bus \"%s\"", d, p.layer, p.name, p.pci_bus_id);
		CHECKF(p.numa_node == numa[d] && p.pcie_gen == -1 && p.pcie_width == -1,
		       "device %u: NUMA node %d (want %d), PCIe gen %d x%d (want -1, -1)", d, p.numa_node, numa[d],
		       p.pcie_gen, p.pcie_width);
		uint64_t others = ((1ull << NDEV) - 1) & ~(1ull << d);
		CHECKF(p.peers == others && p.peers_nvlink == 0, "device %u: peers %#llx nvlink %#llx, want %#llx and 0", d,
		       (unsigned long long)p.peers, (unsigned long long)p.peers_nvlink, (unsigned long long)others);
		for (int k = 0; k < 4; k++)
			CHECKF(p.reserved[k] == 0, "device %u: reserved[%d] not zeroed", d, k);
	}
	const char *want[NDEV] = {
		"hostdev:0 simulated device, NUMA node 0; peers hostdev:1, hostdev:2, hostdev:3",
		"hostdev:1 simulated device, NUMA node unknown; peers hostdev:0, hostdev:2, hostdev:3",
		"hostdev:2 simulated device, NUMA node 1; peers hostdev:0, hostdev:1, hostdev:3",
		"hostdev:3 simulated device, NUMA node unknown; peers hostdev:0, hostdev:1, hostdev:2",
	};
	char line[256];
	for (unsigned d = 0; d < n; d++) {
		OK(opends_device_describe(d, line, sizeof line));
		CHECKF(!strcmp(line, want[d]), "device %u described as \"%s\", want \"%s\"", d, line, want[d]);
	}
	t_phase = "describe truncates and terminates";
	memset(line, 'x', sizeof line);
	OK(opends_device_describe(2, line, 12));
	CHECKF(!strcmp(line, "hostdev:2 s") && line[12] == 'x', "truncated to \"%.20s\"", line);
	t_phase = "device argument errors";
	opends_device_props_t p;
	EXPECT_ERR(opends_device_get_properties(n, &p), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_device_get_properties(0, NULL), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_device_describe(n, line, sizeof line), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_device_describe(0, NULL, 8), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_device_describe(0, line, 0), OPENDS_INVALID_VALUE);
	EXPECT_ERR(opends_device_count(NULL), OPENDS_INVALID_VALUE);
}

/* sync, async and batch on every device */
static void families(opends_handle_t fh, const char *wpath)
{
	for (int d = 0; d < NDEV; d++) {
		t_phase = "sync read per device";
		uint8_t *m = devmem[d];
		memset(m, T_CANARY, LEN);
		size_t size = 3 * T_MiB + 17, boff = 4096 + (size_t)d;
		off_t off = 1000 + d * 4097;
		EXPECT_SSZ(opends_sync_read(fh, m, size, off, (off_t)boff), (ssize_t)size);
		VERIFY(m + boff, oracle + off, size, "device %d sync read", d);
		VERIFY_CANARY(m, boff, "device %d before the target", d);
		VERIFY_CANARY(m + boff + size, 4096, "device %d after the target", d);

		t_phase = "async read per device";
		opends_async_future_t f;
		memset(m, 0, LEN);
		OK(opends_async_read(fh, m, 2 * T_MiB, 7 + d, 3, &f));
		EXPECT_SSZ_ND(opends_async_await(&f), (ssize_t)(2 * T_MiB));
		VERIFY(m + 3, oracle + 7 + d, 2 * T_MiB, "device %d async read", d);
	}

	t_phase = "one batch with an entry on every device";
	opends_batch_t b;
	OK(opends_batch_setup(&b, NDEV));
	opends_io_params_t p[NDEV];
	memset(p, 0, sizeof p);
	for (int d = 0; d < NDEV; d++) {
		memset(devmem[d], 0, LEN);
		p[d].mode = OPENDS_BATCH;
		p[d].fh = fh;
		p[d].opcode = OPENDS_READ;
		p[d].u.batch.buf_base = devmem[d];
		p[d].u.batch.buf_offset = d + 1;
		p[d].u.batch.file_offset = d * 12289;
		p[d].u.batch.size = T_MiB + (size_t)d;
		p[d].cookie = (void *)(uintptr_t)(d + 1);
	}
	OK(opends_batch_submit(b, NDEV, p, 0));
	opends_io_events_t ev[NDEV];
	unsigned got = 0;
	while (got < NDEV) {
		unsigned nr = NDEV - got;
		OK(opends_batch_get_status(b, 1, &nr, ev + got, NULL));
		got += nr;
	}
	for (int i = 0; i < NDEV; i++) {
		size_t k = (size_t)(uintptr_t)ev[i].cookie - 1;
		CHECKF(k < NDEV && ev[i].status == OPENDS_COMPLETE && ev[i].ret == (ssize_t)(T_MiB + k),
		       "batch event %d (entry %zu): status %d ret %zd", i, k, (int)ev[i].status, ev[i].ret);
	}
	OK(opends_batch_destroy(b));
	for (int d = 0; d < NDEV; d++)
		VERIFY(devmem[d] + d + 1, oracle + d * 12289, T_MiB + (size_t)d, "batch entry on device %d", d);

	t_phase = "writes from every device";
	int wfd = open(wpath, O_CREAT | O_TRUNC | O_RDWR, 0644);
	CHECK(wfd >= 0);
	opends_handle_t wh = t_register(wfd);
	uint8_t *want = t_xmalloc(NDEV * T_MiB);
	for (int d = 0; d < NDEV; d++) {
		t_fill_seed(devmem[d], 50 + (uint64_t)d, T_MiB + 5);
		memcpy(want + (size_t)d * T_MiB, devmem[d] + 5, T_MiB);
		EXPECT_SSZ(opends_sync_write(wh, devmem[d], T_MiB, (off_t)((size_t)d * T_MiB), 5), (ssize_t)T_MiB);
	}
	uint8_t *back = t_xmalloc(NDEV * T_MiB);
	CHECK(t_pread_all(wfd, back, NDEV * T_MiB, 0) == NDEV * T_MiB);
	VERIFY(back, want, NDEV * T_MiB, "file written from every device");

	t_phase = "async writes from every device at once";
	opends_async_future_t wf[NDEV];
	for (int d = 0; d < NDEV; d++) {
		t_fill_seed(devmem[d], 70 + (uint64_t)d, T_MiB + 9);
		memcpy(want + (size_t)d * T_MiB, devmem[d] + 9, T_MiB);
		OK(opends_async_write(wh, devmem[d], T_MiB, (off_t)((size_t)d * T_MiB), 9, &wf[d]));
	}
	for (int d = 0; d < NDEV; d++)
		EXPECT_SSZ_ND(opends_async_await(&wf[d]), (ssize_t)T_MiB);
	CHECK(t_pread_all(wfd, back, NDEV * T_MiB, 0) == NDEV * T_MiB);
	VERIFY(back, want, NDEV * T_MiB, "file written by async writes from every device");
	OK(opends_handle_deregister(wh));
	close(wfd);
	free(want);
	free(back);
}

struct sargs {
	size_t size;
	off_t foff, boff;
	ssize_t res;
};

static void streams(opends_handle_t fh)
{
	t_phase = "streams of every device";
	opends_stream_t s[NDEV];
	for (int d = 0; d < NDEV; d++)
		OK(opends_stream_create(&s[d])); /* devices 0, 1, 2, 3 in turn */
	static struct sargs a[NDEV];
	for (int d = 0; d < NDEV; d++) {
		memset(devmem[d], 0, LEN);
		a[d] = (struct sargs){ 5 * T_MiB + 3, 333 * (off_t)d, 11, -1 };
		OK(opends_stream_read(fh, devmem[d], &a[d].size, &a[d].foff, &a[d].boff, &a[d].res, s[d]));
	}
	for (int d = 0; d < NDEV; d++) {
		OK(opends_stream_synchronize(s[d]));
		CHECKF(a[d].res == (ssize_t)(5 * T_MiB + 3), "stream of device %d: bytes_read %zd", d, a[d].res);
		VERIFY(devmem[d] + 11, oracle + 333 * d, 5 * T_MiB + 3, "stream read on device %d", d);
	}

	t_phase = "stream writes from every device, each on a stream of its own";
	char wpath[PATH_MAX];
	t_path(wpath, sizeof wpath, "multidev_sw.bin");
	int wfd = open(wpath, O_CREAT | O_TRUNC | O_RDWR, 0644);
	CHECK(wfd >= 0);
	opends_handle_t wh = t_register(wfd);
	for (int d = 0; d < NDEV; d++) {
		t_fill_seed(devmem[d], 90 + (uint64_t)d, T_MiB + 4);
		a[d] = (struct sargs){ T_MiB + 1, (off_t)((size_t)d * (T_MiB + 1)), 3, -1 };
		OK(opends_stream_write(wh, devmem[d], &a[d].size, &a[d].foff, &a[d].boff, &a[d].res, s[d]));
	}
	uint8_t *back = t_xmalloc(T_MiB + 1);
	for (int d = 0; d < NDEV; d++) {
		OK(opends_stream_synchronize(s[d]));
		CHECKF(a[d].res == (ssize_t)(T_MiB + 1), "stream write from device %d: bytes_written %zd", d, a[d].res);
		CHECK(t_pread_all(wfd, back, T_MiB + 1, (off_t)((size_t)d * (T_MiB + 1))) == T_MiB + 1);
		VERIFY(back, devmem[d] + 3, T_MiB + 1, "stream write from device %d", d);
	}
	free(back);
	OK(opends_handle_deregister(wh));
	close(wfd);
	unlink(wpath);

	t_phase = "a stream of one device with a buffer of another";
	for (int d = 0; d < NDEV; d++) {
		int other = (d + 1) % NDEV;
		struct sargs x = { 4096, 0, 0, -7 };
		EXPECT_ERR(opends_stream_read(fh, devmem[other], &x.size, &x.foff, &x.boff, &x.res, s[d]),
			   OPENDS_CONTEXT_MISMATCH);
		char w1[32], w2[32];
		snprintf(w1, sizeof w1, "device %d", d);
		snprintf(w2, sizeof w2, "device %d", other);
		const char *det = t_detail();
		CHECKF(strstr(det, w1) && strstr(det, w2), "the detail \"%s\" does not name both devices", det);
		CHECKF(x.res == -7, "a refused operation wrote bytes_read (%zd)", x.res);
		EXPECT_ERR(opends_stream_write(fh, devmem[other], &x.size, &x.foff, &x.boff, &x.res, s[d]),
			   OPENDS_CONTEXT_MISMATCH);
	}

	t_phase = "the NULL stream serves every device";
	for (int d = 0; d < NDEV; d++) {
		memset(devmem[d], 0, LEN);
		a[d] = (struct sargs){ T_MiB + 1, 4096 * (off_t)d + 1, 0, -1 };
		OK(opends_stream_read(fh, devmem[d], &a[d].size, &a[d].foff, &a[d].boff, &a[d].res, NULL));
	}
	OK(opends_stream_synchronize(NULL));
	for (int d = 0; d < NDEV; d++) {
		CHECKF(a[d].res == (ssize_t)(T_MiB + 1), "NULL stream, device %d: bytes_read %zd", d, a[d].res);
		VERIFY(devmem[d], oracle + 4096 * d + 1, T_MiB + 1, "NULL stream read on device %d", d);
	}
	for (int d = 0; d < NDEV; d++)
		OK(opends_stream_destroy(s[d]));
}

/* one thread per device at once, each into its own device: sync reads,
 * then stream reads on a stream of its device */
struct thr {
	int dev;
	opends_handle_t fh;
	opends_stream_t st;
	int bad;
};

static void *reader(void *arg)
{
	struct thr *t = arg;
	uint8_t *m = devmem[t->dev];
	for (int r = 0; r < 16 && !t->bad; r++) {
		off_t off = (off_t)((size_t)(t->dev * 7 + r) * 65537 % (fsize - 2 * T_MiB));
		if (r % 2 == 0) {
			if (opends_sync_read(t->fh, m, 2 * T_MiB, off, 0) != (ssize_t)(2 * T_MiB))
				t->bad = r + 1;
		} else {
			size_t size = 2 * T_MiB;
			off_t foff = off, boff = 0;
			ssize_t res = -1;
			if (opends_stream_read(t->fh, m, &size, &foff, &boff, &res, t->st).err ||
			    opends_stream_synchronize(t->st).err || res != (ssize_t)(2 * T_MiB))
				t->bad = r + 1;
		}
		if (!t->bad && memcmp(m, oracle + off, 2 * T_MiB))
			t->bad = r + 1;
	}
	return NULL;
}

static void threads(opends_handle_t fh)
{
	t_phase = "one thread per device at once";
	struct thr t[NDEV];
	pthread_t th[NDEV];
	for (int d = 0; d < NDEV; d++) {
		t[d] = (struct thr){ d, fh, NULL, 0 };
		OK(opends_stream_create(&t[d].st)); /* devices 0, 1, 2, 3 in turn */
	}
	for (int d = 0; d < NDEV; d++)
		CHECK(pthread_create(&th[d], NULL, reader, &t[d]) == 0);
	for (int d = 0; d < NDEV; d++) {
		pthread_join(th[d], NULL);
		CHECKF(!t[d].bad, "the thread of device %d failed or read wrong bytes (round %d)", d, t[d].bad);
		OK(opends_stream_destroy(t[d].st));
	}
}

static void fanout(opends_handle_t fh)
{
	t_phase = "read once, place on every device";
	void *bufs[NDEV];
	off_t boffs[NDEV];
	const size_t sizes[] = { 1, 4097, 3 * T_MiB + 11, 9 * T_MiB };
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		size_t size = sizes[k];
		off_t off = (off_t)(k * 12345);
		for (int d = 0; d < NDEV; d++) {
			memset(devmem[d], T_CANARY, LEN);
			bufs[d] = devmem[(d + (int)k) % NDEV]; /* each device first in turn */
			boffs[d] = 100 + d;
		}
		EXPECT_SSZ(opends_sync_read_fanout(fh, bufs, boffs, NDEV, size, off), (ssize_t)size);
		for (int d = 0; d < NDEV; d++) {
			uint8_t *m = bufs[d];
			VERIFY(m + boffs[d], oracle + off, size, "fan-out of %zu bytes, target %d", size, d);
			VERIFY_CANARY(m, (size_t)boffs[d], "before fan-out target %d", d);
			VERIFY_CANARY(m + boffs[d] + size, 4096, "after fan-out target %d", d);
		}
	}

	t_phase = "fan-out across EOF and past it";
	for (int d = 0; d < NDEV; d++) {
		memset(devmem[d], T_CANARY, LEN);
		bufs[d] = devmem[d];
	}
	size_t want = 1000;
	EXPECT_SSZ(opends_sync_read_fanout(fh, bufs, NULL, NDEV, 8192, (off_t)(fsize - want)), (ssize_t)want);
	for (int d = 0; d < NDEV; d++) {
		VERIFY(devmem[d], oracle + fsize - want, want, "fan-out across EOF, target %d", d);
		VERIFY_CANARY(devmem[d] + want, 8192, "past EOF, target %d", d);
	}
	t_phase = "fan-out in three segments, EOF in the second";
	for (int d = 0; d < NDEV; d++) {
		memset(devmem[d], T_CANARY, LEN);
		bufs[d] = devmem[(d + 2) % NDEV];
		boffs[d] = 4096 - d;
	}
	want = 6 * T_MiB + 5; /* 4 MiB segments: [0, 4) [4, 8) [8, 12) MiB of the range */
	EXPECT_SSZ(opends_sync_read_fanout(fh, bufs, boffs, NDEV, 12 * T_MiB - 4096, (off_t)(fsize - want)),
		   (ssize_t)want);
	for (int d = 0; d < NDEV; d++) {
		uint8_t *m = bufs[d];
		VERIFY(m + boffs[d], oracle + fsize - want, want, "fan-out with EOF in segment 2, target %d", d);
		VERIFY_CANARY(m, (size_t)boffs[d], "before fan-out target %d", d);
		VERIFY_CANARY(m + boffs[d] + want, LEN - (size_t)boffs[d] - want, "past EOF, target %d", d);
	}
	for (int d = 0; d < NDEV; d++)
		bufs[d] = devmem[d];
	EXPECT_SSZ(opends_sync_read_fanout(fh, bufs, NULL, NDEV, 100, (off_t)fsize + 5), 0);
	EXPECT_SSZ(opends_sync_read_fanout(fh, bufs, NULL, 1, T_MiB, 3), (ssize_t)T_MiB);
	VERIFY(devmem[0], oracle + 3, T_MiB, "fan-out to one target");

	t_phase = "fan-out argument errors";
	EXPECT_SSZ(opends_sync_read_fanout(fh, NULL, NULL, 2, 10, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_read_fanout(fh, bufs, NULL, 0, 10, 0), -OPENDS_INVALID_VALUE);
	EXPECT_SSZ(opends_sync_read_fanout(fh, bufs, NULL, 65, 10, 0), -OPENDS_INVALID_VALUE);
	void *ovl[2] = { devmem[1], devmem[1] + 100 };
	memset(devmem[1], T_CANARY, 4096);
	EXPECT_SSZ(opends_sync_read_fanout(fh, ovl, NULL, 2, 200, 0), -OPENDS_INVALID_VALUE);
	VERIFY_CANARY(devmem[1], 4096, "refused fan-out wrote nothing");
	off_t neg[2] = { 0, -1 };
	void *two[2] = { devmem[2], devmem[3] };
	EXPECT_SSZ(opends_sync_read_fanout(fh, two, neg, 2, 10, 0), -OPENDS_INVALID_VALUE);
	void *withnull[3] = { devmem[2], devmem[3], NULL };
	EXPECT_SSZ(opends_sync_read_fanout(fh, withnull, NULL, 3, 10, 0), -OPENDS_INVALID_VALUE);
	CHECKF(strstr(t_detail(), "bufs[2]"), "the detail \"%s\" does not name the target bufs[2]", t_detail());
	EXPECT_SSZ(opends_sync_read_fanout(fh, two, neg, 2, 10, 0), -OPENDS_INVALID_VALUE);
	CHECKF(strstr(t_detail(), "bufs[1]"), "the detail \"%s\" does not name the target bufs[1]", t_detail());
	EXPECT_SSZ(opends_sync_read_fanout(NULL, two, NULL, 2, 10, 0), -OPENDS_INVALID_VALUE); /* as opends_sync_read */
}

/* The staging workers move to the CPUs of the NUMA node of the device they
 * copy to (src/accel/near.c; the uring backend's staging engine). hostdev's
 * simulated topology: device 0 on node 0 = CPU 0, device 1 on node 1 = CPU
 * 1, in a folder standing for /sys/devices/system/node. */
static int threads_on(const char *cpus)
{
	DIR *dir = opendir("/proc/self/task");
	int n = 0;
	struct dirent *e;
	while (dir && (e = readdir(dir))) {
		char path[300], line[256];
		snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof line, f))
			if (!strncmp(line, "Cpus_allowed_list:", 18)) {
				char *v = line + 18;
				v += strspn(v, " \t");
				v[strcspn(v, "\n")] = 0;
				n += !strcmp(v, cpus);
			}
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	return n;
}

static void numa_follow(opends_handle_t *fh, int fd)
{
	t_phase = "workers move to the NUMA node of the device they copy to";
	cpu_set_t all;
	if (sched_getaffinity(0, sizeof all, &all) || !CPU_ISSET(0, &all) || !CPU_ISSET(1, &all) || CPU_COUNT(&all) < 2) {
		printf("numa case skipped: CPUs 0 and 1 are not both ours\n");
		return;
	}
	const char *be = opends_driver_backend();
	if (strcmp(be, "uring")) {
		printf("numa case skipped: the %s backend has no staging workers\n", be);
		return;
	}
	char dir[PATH_MAX], p[PATH_MAX + 32];
	t_path(dir, sizeof dir, "nodes");
	mkdir(dir, 0755);
	for (int n = 0; n < 2; n++) {
		snprintf(p, sizeof p, "%s/node%d", dir, n);
		mkdir(p, 0755);
		snprintf(p, sizeof p, "%s/node%d/cpulist", dir, n);
		FILE *f = fopen(p, "w");
		CHECK(f && fprintf(f, "%d\n", n) > 0 && fclose(f) == 0);
	}
	OK(opends_handle_deregister(*fh));
	OK(opends_driver_close());
	setenv("OPENDS_HOSTDEV_NODES", dir, 1);
	setenv("OPENDS_HOSTDEV_NUMA", "0,1", 1);
	t_driver_open();
	*fh = t_register(fd);
	CHECKF(threads_on("0") == 0 && threads_on("1") == 0, "threads pinned before any copy: %d on CPU 0, %d on CPU 1",
	       threads_on("0"), threads_on("1"));
	for (int r = 0; r < 4; r++)
		EXPECT_SSZ(opends_sync_read(*fh, devmem[1], 8 * T_MiB, r * 4096, 0), (ssize_t)(8 * T_MiB));
	VERIFY(devmem[1], oracle + 3 * 4096, 8 * T_MiB, "read into device 1 (node 1)");
	CHECKF(threads_on("1") > 0 && threads_on("0") == 0, "after reads into device 1: %d threads on CPU 1, %d on CPU 0",
	       threads_on("1"), threads_on("0"));
	for (int r = 0; r < 4; r++)
		EXPECT_SSZ(opends_sync_read(*fh, devmem[0], 8 * T_MiB, r * 4096, 0), (ssize_t)(8 * T_MiB));
	CHECKF(threads_on("0") > 0, "after reads into device 0: no thread on CPU 0 (%d on CPU 1)", threads_on("1"));
	unsetenv("OPENDS_HOSTDEV_NODES");
	for (int n = 0; n < 2; n++) {
		snprintf(p, sizeof p, "%s/node%d/cpulist", dir, n);
		unlink(p);
		snprintf(p, sizeof p, "%s/node%d", dir, n);
		rmdir(p);
	}
	rmdir(dir);
}

int main(void)
{
	t_watchdog(240);
	setenv("OPENDS_ACCEL", "hostdev", 1);

	t_phase = "a bad OPENDS_HOSTDEV_DEVICES";
	setenv("OPENDS_HOSTDEV_DEVICES", "9", 1);
	EXPECT_ERR(opends_driver_open(), OPENDS_INVALID_VALUE);
	setenv("OPENDS_HOSTDEV_DEVICES", "2x", 1);
	EXPECT_ERR(opends_driver_open(), OPENDS_INVALID_VALUE);

	setenv("OPENDS_HOSTDEV_DEVICES", "2", 1);
	const char *bad_numa[] = { "0,1,2", "x", "0,", "-2", "1024", "0;1" };
	for (size_t i = 0; i < sizeof bad_numa / sizeof *bad_numa; i++) {
		setenv("OPENDS_HOSTDEV_NUMA", bad_numa[i], 1);
		EXPECT_ERR(opends_driver_open(), OPENDS_INVALID_VALUE);
		CHECKF(strstr(t_detail(), "OPENDS_HOSTDEV_NUMA"), "detail \"%s\" for NUMA \"%s\"", t_detail(),
		       bad_numa[i]);
	}

	setenv("OPENDS_HOSTDEV_DEVICES", "4", 1);
	setenv("OPENDS_HOSTDEV_NUMA", "0,-1,1", 1);
	map_devices();
	t_driver_open();
	printf("backend %s\n", opends_driver_backend());
	char path[PATH_MAX], wpath[PATH_MAX];
	t_path(path, sizeof path, "multidev.bin");
	t_path(wpath, sizeof wpath, "multidev_w.bin");
	fsize = 10 * T_MiB + 1234;
	t_write_pattern_file(path, fsize, hashpat);
	oracle = t_oracle(fsize, hashpat);
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	opends_handle_t fh = t_register(fd);

	devices();
	families(fh, wpath);
	streams(fh);
	threads(fh);
	fanout(fh);
	numa_follow(&fh, fd);

	OK(opends_handle_deregister(fh));
	close(fd);
	OK(opends_driver_close());
	for (int d = 1; d < NDEV; d++)
		munmap(devmem[d], LEN);
	free(devmem[0]);
	free(oracle);
	printf("OK\n");
	return 0;
}
