/*
 * conform_devices: API.md "Accelerator context (any number of GPUs)" on
 * the simulated devices (OPENDS_ACCEL=hostdev with two devices,
 * docs/multi-gpu.md: device 1 owns [0x7e8000000000 + 2^36, + 2^36)), and
 * the device calls' codes (also on the host layer: no devices).
 *   - opends_device_count / _get_properties / _describe and their misuse;
 *   - I/O into each device's memory from one thread, byte-exact, whichever
 *     device's stream was used last;
 *   - OPENDS_CONTEXT_MISMATCH only for a stream of one device given a
 *     buffer of another, with a detail naming both devices;
 *   - a source registered without OPENDS_SOURCE_DEVICE_MEMORY never gets a
 *     pointer into the caller's device buffer (staged through the host);
 *   - opends_sync_read_fanout: every target byte-exact, its misuse.
 */
#include "conform.h"

#include <sys/mman.h>

#define DEV1 ((uintptr_t)0x7e8000000000ull + ((uintptr_t)1 << 36))
#define FSIZE (2 * 1024 * 1024 + 555)

static void calls(unsigned want)
{
	c_case = "device calls";
	unsigned n = 99;
	C_ERR(opends_device_count(NULL), OPENDS_INVALID_VALUE);
	C_OK(opends_device_count(&n));
	C_TRUE(n == want, "opends_device_count: %u, expected %u", n, want);
	opends_device_props_t p;
	C_ERR(opends_device_get_properties(n, &p), OPENDS_INVALID_VALUE);
	C_ERR(opends_device_get_properties(0xffffffffu, &p), OPENDS_INVALID_VALUE);
	char line[256];
	C_ERR(opends_device_describe(n, line, sizeof(line)), OPENDS_INVALID_VALUE);
	for (unsigned d = 0; d < n; d++) {
		C_ERR(opends_device_get_properties(d, NULL), OPENDS_INVALID_VALUE);
		memset(&p, 0x5A, sizeof(p));
		C_OK(opends_device_get_properties(d, &p));
		C_TRUE(!strcmp(p.layer, "hostdev"), "device %u: layer \"%.16s\"", d, p.layer);
		for (int i = 0; i < 4; i++)
			C_TRUE(p.reserved[i] == 0, "device %u: reserved[%d] is not zero", d, i);
		C_TRUE((p.peers_nvlink & ~p.peers) == 0, "device %u: peers_nvlink is not a subset of peers", d);
		C_ERR(opends_device_describe(d, NULL, 10), OPENDS_INVALID_VALUE);
		C_ERR(opends_device_describe(d, line, 0), OPENDS_INVALID_VALUE);
		C_OK(opends_device_describe(d, line, sizeof(line)));
		char tiny[6];
		C_OK(opends_device_describe(d, tiny, sizeof(tiny)));
		C_TRUE(strlen(tiny) == 5 && !strncmp(tiny, line, 5), "describe into 6 bytes: \"%s\" of \"%s\"", tiny, line);
	}
}

static const unsigned char *seen_lo[64], *seen_hi[64];
static int nseen;
static ssize_t src_read(void *src, void *buf, size_t len, uint64_t off)
{
	const unsigned char *data = src;
	if (nseen < 64) {
		seen_lo[nseen] = buf;
		seen_hi[nseen] = (unsigned char *)buf + len;
		nseen++;
	}
	if (off >= FSIZE)
		return 0;
	if (off + len > FSIZE)
		len = FSIZE - off;
	memcpy(buf, data + off, len);
	return (ssize_t)len;
}

int main(void)
{
	const char *accel = getenv("OPENDS_ACCEL");
	int hostdev = accel && !strcmp(accel, "hostdev");
	if (!accel || (strcmp(accel, "host") && !hostdev)) {
		printf("SKIP: conform_devices checks the host and hostdev layers (OPENDS_ACCEL=%s)\n",
		       accel ? accel : "unset");
		return 77;
	}
	if (hostdev)
		setenv("OPENDS_HOSTDEV_DEVICES", "2", 1);
	const char *path = c_file("dev", FSIZE);
	if (opends_driver_open().err) {
		fprintf(stderr, "open: %s\n", opends_last_error_detail());
		return 1;
	}
	calls(hostdev ? 2 : 0);
	int fd = c_open(path, O_RDWR);
	opends_handle_t fh;
	C_OK(opends_handle_register(&fh, fd));
	size_t cap = 4 << 20;
	unsigned char *d1 = NULL, *d0 = malloc(cap);
	if (hostdev) {
		d1 = mmap((void *)DEV1, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			  -1, 0);
		if (d1 == MAP_FAILED || d1 != (void *)DEV1) {
			printf("SKIP: cannot map simulated device 1's memory\n");
			return 77;
		}
	}
	unsigned char *bufs[2] = { d0, d1 };
	int ndev = hostdev ? 2 : 1;

	/* I/O into each device's memory, streams of each */
	c_case = "each device";
	opends_stream_t st[2] = { NULL, NULL };
	for (int d = 0; d < ndev; d++)
		C_OK(opends_stream_create(&st[d])); /* hostdev: devices 0, 1 in turn */
	for (int d = 0; d < ndev; d++) {
		memset(bufs[d], 0x5A, cap);
		C_SSZ(opends_sync_read(fh, bufs[d], 1 << 20, 4097, 11), 1 << 20);
		C_TRUE(c_same(bufs[d] + 11, 1 << 20, 4097) && c_all(bufs[d], 11, 0x5A), "sync_read into device %d's memory",
		       d);
		size_t sz = 65536;
		off_t fo = 3, bo = 0;
		ssize_t got = 1;
		C_OK(opends_stream_read(fh, bufs[d], &sz, &fo, &bo, &got, st[d]));
		C_OK(opends_stream_synchronize(st[d]));
		C_SSZ(got, 65536);
		C_TRUE(c_same(bufs[d], 65536, 3), "stream_read on device %d's stream into its memory", d);
	}
	if (hostdev) {
		c_case = "context mismatch";
		size_t sz = 4096;
		off_t fo = 0, bo = 0;
		ssize_t got = 1;
		opends_error_t e = opends_stream_read(fh, d1, &sz, &fo, &bo, &got, st[0]);
		if (e.err == OPENDS_SUCCESS) {
			C_OK(opends_stream_synchronize(st[0]));
			C_SSZ(got, -OPENDS_CONTEXT_MISMATCH);
		} else {
			C_TRUE(e.err == OPENDS_CONTEXT_MISMATCH, "a stream of device 0, a buffer of device 1: %s",
			       c_name(e.err));
			const char *dd = opends_last_error_detail();
			C_TRUE(strstr(dd, "0") && strstr(dd, "1"), "the detail \"%s\" does not name both devices", dd);
		}
		/* the NULL stream is the buffer's device's default stream: fine */
		got = 1;
		C_OK(opends_stream_read(fh, d1, &sz, &fo, &bo, &got, NULL));
		C_OK(opends_stream_synchronize(NULL));
		C_SSZ(got, 4096);
	}
	for (int d = 0; d < ndev; d++)
		C_OK(opends_stream_destroy(st[d]));

	c_case = "source, no device-memory flag";
	unsigned char *data = malloc(FSIZE);
	for (size_t i = 0; i < FSIZE; i++)
		data[i] = c_byte(i);
	opends_source_ops_t ops = { .struct_size = sizeof(ops), .name = "conform-dev", .read = src_read };
	opends_source_desc_t desc = { .struct_size = sizeof(desc), .ops = &ops, .src = data,
				      .flags = OPENDS_SOURCE_BLOCKING, .size = FSIZE };
	opends_handle_t sh;
	C_OK(opends_handle_register_source(&sh, &desc));
	for (int d = 0; d < ndev; d++) {
		nseen = 0;
		memset(bufs[d], 0x5A, cap);
		C_SSZ(opends_sync_read(sh, bufs[d], 300000, 1000, 5), 300000);
		C_TRUE(!memcmp(bufs[d] + 5, data + 1000, 300000), "source read into device %d's memory: wrong bytes", d);
		if (hostdev)
			for (int i = 0; i < nseen; i++)
				C_TRUE(seen_hi[i] <= bufs[d] || seen_lo[i] >= bufs[d] + cap,
				       "the source got a pointer into device %d's buffer", d);
	}
	C_OK(opends_handle_deregister(sh));

	c_case = "fanout";
	void *targets[3] = { d0, hostdev ? (void *)d1 : (void *)(d0 + (2 << 20)), NULL };
	unsigned char *hbuf = malloc(1 << 20);
	targets[2] = hbuf; /* host targets are allowed */
	memset(d0, 0x5A, cap);
	if (d1)
		memset(d1, 0x5A, cap);
	off_t o3[3] = { 7, 0, 1 };
	C_SSZ(opends_sync_read_fanout(fh, targets, o3, 3, 500000, FSIZE - 400000), 400000);
	for (int t = 0; t < 3; t++)
		C_TRUE(c_same((unsigned char *)targets[t] + o3[t], 400000, FSIZE - 400000), "fanout target %d: wrong bytes",
		       t);
	const long IV = -OPENDS_INVALID_VALUE;
	C_SSZ(opends_sync_read_fanout(fh, NULL, NULL, 1, 10, 0), IV);
	C_SSZ(opends_sync_read_fanout(fh, targets, NULL, 0, 10, 0), IV);
	C_SSZ(opends_sync_read_fanout(fh, targets, NULL, 65, 10, 0), IV);
	void *overlap[2] = { d0, d0 + 5 };
	C_SSZ(opends_sync_read_fanout(fh, overlap, NULL, 2, 10, 0), IV);
	void *withnull[2] = { d0, NULL };
	C_SSZ(opends_sync_read_fanout(fh, withnull, NULL, 2, 10, 0), IV);
	off_t neg[2] = { 0, -1 };
	C_SSZ(opends_sync_read_fanout(fh, targets, neg, 2, 10, 0), IV);
	C_SSZ(opends_sync_read_fanout(fh, targets, NULL, 2, 10, -1), IV);
	C_SSZ(opends_sync_read_fanout(fh, targets, NULL, 2, 0, 0), 0);

	C_OK(opends_handle_deregister(fh));
	close(fd);
	opends_driver_close();
	free(data);
	free(hbuf);
	free(d0);
	if (d1)
		munmap(d1, cap);
	return c_done("conform_devices");
}
