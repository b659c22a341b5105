/*
 * The CUDA accelerator layer over the driver API, loaded at run time by
 * src/vendor/cuda_api.c: the library builds against cuda.h alone and runs
 * (falling back to the host layer under OPENDS_ACCEL=auto) where no driver
 * is installed.
 *
 * Devices and contexts (API.md, "Accelerator context — revised"): every
 * operation finds the device and context of its buffer from the pointer
 * (cuPointerGetAttributes: context, device ordinal), whatever context is
 * current on the calling thread and whichever device was current at open.
 * Each device's primary context is place N; a buffer allocated in another
 * context (cuCtxCreate) gets a place of its own. A call on a caller's
 * thread pushes the buffer's context and pops it after, so the caller's
 * context stack is left as it was; library threads (the I/O workers) switch
 * their current context as they go. Pinned staging is portable (usable by
 * every device), and each worker's lane keeps one copy stream per device.
 *
 * Copies: src/accel/cuda/cuda_copy.c. Streams: src/accel/cuda/cuda_streams.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cuda_int.h"

static bool pinned_thp; /* OPENDS_AB_PINNED_THP (cuda_pinned_alloc) */

struct cuda_state ods_cuda;
#define C ods_cuda


int ods_cu_fail(CUresult r, const char *what)
{
	/* the CUresult reaches the caller as backend_err */
	if (r == CUDA_ERROR_CONTEXT_IS_DESTROYED || r == CUDA_ERROR_INVALID_CONTEXT)
		return ods_fail_backend(OPENDS_CONTEXT_MISMATCH, (int)r,
					"cuda: %s failed: the context of the buffer or stream is gone (%s)", what,
					ods_cu_errstr(r));
	return ods_fail_backend(OPENDS_DEVICE_DRIVER_ERROR, (int)r, "cuda: %s failed: %s (CUresult %d)", what,
				ods_cu_errstr(r), (int)r);
}

int ods_cu_push(struct place *p)
{
	CUresult r = ods_cu.cuCtxPushCurrent(p->ctx);
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuCtxPushCurrent");
}

void ods_cu_pop(void)
{
	CUcontext dummy;
	ods_cu.cuCtxPopCurrent(&dummy);
}

/* ---- places ------------------------------------------------------------------ */

static struct place *place_new(int ordinal)
{
	struct place *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->ordinal = ordinal;
	pthread_mutex_init(&p->lock, NULL);
	for (int i = 0; i < SYNC_STREAMS; i++)
		pthread_mutex_init(&p->sync_lock[i], NULL);
	return p;
}

/* caller holds C.lock: retain device d's primary context for place d */
static int primary_ready(unsigned d)
{
	struct place *p = C.pl[d];
	if (p->ctx)
		return 0;
	CUcontext ctx = NULL;
	CUresult r = ods_cu.cuDevicePrimaryCtxRetain(&ctx, p->cudev);
	if (r != CUDA_SUCCESS)
		return ods_cu_fail(r, "cuDevicePrimaryCtxRetain");
	p->retained = true;
	__atomic_store_n(&p->ctx, ctx, __ATOMIC_RELEASE); /* read without the lock */
	return 0;
}

struct place *ods_cu_place(unsigned dev)
{
	if (dev >= __atomic_load_n(&C.nplaces, __ATOMIC_ACQUIRE))
		return NULL;
	struct place *p = __atomic_load_n(&C.pl[dev], __ATOMIC_ACQUIRE);
	if (p && __atomic_load_n(&p->ctx, __ATOMIC_ACQUIRE))
		return p;
	pthread_mutex_lock(&C.lock);
	int rc = p ? primary_ready(dev) : -1;
	pthread_mutex_unlock(&C.lock);
	return rc ? NULL : p;
}

int ods_cu_place_of_ctx(CUcontext ctx, int ordinal)
{
	/* fast path: a context seen before */
	unsigned n = __atomic_load_n(&C.nplaces, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; ctx && i < n; i++)
		if (__atomic_load_n(&C.pl[i]->ctx, __ATOMIC_ACQUIRE) == ctx)
			return (int)i;
	if (ordinal < 0 || ordinal >= C.ndev) {
		CUdevice d;
		CUresult pr = ctx ? ods_cu.cuCtxPushCurrent(ctx) : CUDA_SUCCESS;
		if (!ctx || pr != CUDA_SUCCESS)
			return ods_fail_backend(OPENDS_CONTEXT_MISMATCH, (int)pr,
						"cuda: a context the library cannot use (destroyed?)"),
			       -1;
		CUresult r = ods_cu.cuCtxGetDevice(&d);
		ods_cu_pop();
		if (r != CUDA_SUCCESS)
			return ods_cu_fail(r, "cuCtxGetDevice"), -1;
		ordinal = -1;
		for (int i = 0; i < C.ndev; i++)
			if (C.pl[i]->cudev == d)
				ordinal = i;
		if (ordinal < 0)
			return ods_fail(OPENDS_DEVICE_NOT_FOUND, "cuda: a context of an unknown device"), -1;
	}
	int idx = -1;
	pthread_mutex_lock(&C.lock);
	struct place *prim = C.pl[ordinal];
	if (!ctx) {
		/* memory without a context (cuMemCreate/cuMemMap): its device's
		 * primary context serves it */
		idx = primary_ready((unsigned)ordinal) ? -1 : ordinal;
		goto out;
	}
	for (unsigned i = 0; i < C.nplaces; i++)
		if (C.pl[i]->ctx == ctx) { /* made meanwhile */
			idx = (int)i;
			goto out;
		}
	if (!prim->ctx) {
		/* is ctx the device's primary context? Only an active one can be,
		 * and retaining an active one creates nothing */
		unsigned flags = 0;
		int active = 0;
		if (ods_cu.cuDevicePrimaryCtxGetState(prim->cudev, &flags, &active) == CUDA_SUCCESS && active &&
		    primary_ready((unsigned)ordinal) == 0 && prim->ctx == ctx) {
			idx = ordinal;
			goto out;
		}
	}
	if (C.nplaces == ODS_MAX_DEVICES) {
		ods_fail(OPENDS_NOMEM_ERROR, "cuda: more than %u contexts in use", ODS_MAX_DEVICES);
		goto out;
	}
	struct place *p = place_new(ordinal);
	if (!p) {
		ods_fail(OPENDS_NOMEM_ERROR, "cuda: out of memory");
		goto out;
	}
	p->cudev = prim->cudev;
	p->ctx = ctx;
	C.pl[C.nplaces] = p;
	idx = (int)C.nplaces;
	__atomic_store_n(&C.nplaces, C.nplaces + 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&C.lock);
	return idx;
}

/* ---- open / close -------------------------------------------------------- */

/* Only the contexts the library retained are entered: a place of a
 * caller's own context (cuCtxCreate) may have been destroyed by now, and
 * pushing a destroyed context is undefined (it crashed in
 * cuCtxPopCurrent at close on the GPU machine); that context's streams went
 * with it, or stay with it (a few streams) while it lives. Device 0's
 * primary context is released last, after its streams are gone. */
static void places_free(void)
{
	CUdevice base_dev = C.base ? C.pl[0]->cudev : 0;
	for (unsigned i = 0; i < C.nplaces; i++) {
		struct place *p = C.pl[i];
		if (p->ctx && p->retained && ods_cu.cuCtxPushCurrent(p->ctx) == CUDA_SUCCESS) {
			for (int k = 0; k < SYNC_STREAMS; k++)
				if (p->sync_stream[k])
					ods_cu.cuStreamDestroy(p->sync_stream[k]);
			if (p->peer_stream)
				ods_cu.cuStreamDestroy(p->peer_stream);
			ods_cu_pop();
		}
		if (p->retained)
			ods_cu.cuDevicePrimaryCtxRelease(p->cudev);
		for (int k = 0; k < SYNC_STREAMS; k++)
			pthread_mutex_destroy(&p->sync_lock[k]);
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
	if (C.base)
		ods_cu.cuDevicePrimaryCtxRelease(base_dev);
	pthread_mutex_destroy(&C.lock);
	memset(&C, 0, sizeof(C));
}

static int cuda_open(const struct ods_config *cfg, char *why, size_t why_len)
{
	(void)cfg;
	memset(&C, 0, sizeof(C));
	switch (ods_cu_load(why, why_len)) {
	case ODS_CU_OK:
		break;
	case ODS_CU_NO_DEVICE:
		return OPENDS_DEVICE_NOT_FOUND;
	default:
		return OPENDS_PLATFORM_NOT_SUPPORTED;
	}
	CUresult r = ods_cu.cuDeviceGetCount(&C.ndev);
	if (r != CUDA_SUCCESS || C.ndev <= 0) {
		snprintf(why, why_len, "no CUDA device (%s)", r == CUDA_SUCCESS ? "count 0" : ods_cu_errstr(r));
		return OPENDS_DEVICE_NOT_FOUND;
	}
	if (C.ndev > (int)ODS_MAX_DEVICES)
		C.ndev = (int)ODS_MAX_DEVICES;
	pthread_mutex_init(&C.lock, NULL);
	for (int i = 0; i < C.ndev; i++) {
		struct place *p = place_new(i);
		if (!p || ods_cu.cuDeviceGet(&p->cudev, i) != CUDA_SUCCESS) {
			free(p);
			snprintf(why, why_len, "cuda: cannot set up device %d", i);
			places_free();
			return OPENDS_DEVICE_NOT_FOUND;
		}
		C.pl[i] = p;
		C.nplaces = (unsigned)i + 1;
	}
	/* Device 0's primary context: where pinned memory, gates and pointer
	 * queries are made (all usable by every device); it is not the
	 * context of any operation unless its buffer is there. */
	if ((r = ods_cu.cuDevicePrimaryCtxRetain(&C.base, C.pl[0]->cudev)) != CUDA_SUCCESS) {
		snprintf(why, why_len, "device 0's primary context unusable: %s", ods_cu_errstr(r));
		C.base = NULL;
		places_free();
		return OPENDS_DEVICE_NOT_FOUND;
	}
	ods_accel_near_open(NULL);
	ods_cu_sync_copy_setup();
	const char *thp = getenv("OPENDS_AB_PINNED_THP");
	pinned_thp = thp && !strcmp(thp, "1");
	return 0;
}

static void cuda_close(void)
{
	ods_cuda_streams_close();
	places_free();
}

/* In a forked child: forget the parent's devices, streams and gates
 * (leaked, never touched); a later open starts from nothing and fails
 * cleanly, since CUDA refuses a child of an initialised parent. */
static void cuda_forget(void)
{
	memset(&C, 0, sizeof(C));
	ods_accel_near_forget();
	ods_cuda_streams_forget();
	ods_cu_after_fork();
}

/* ---- devices -------------------------------------------------------------- */

static unsigned cuda_device_count(void)
{
	return (unsigned)C.ndev;
}

/* A file under the device's PCI folder in sysfs, first line; "" if none. */
static void pci_read(int ordinal, const char *file, char *out, size_t n)
{
	char bus[32] = "", path[128];
	out[0] = 0;
	if (ods_cu.cuDeviceGetPCIBusId(bus, sizeof(bus), C.pl[ordinal]->cudev) != CUDA_SUCCESS)
		return;
	for (char *c = bus; *c; c++)
		*c = (char)(*c >= 'A' && *c <= 'F' ? *c - 'A' + 'a' : *c);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", bus, file);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(out, (int)n, f))
		out[0] = 0;
	fclose(f);
	out[strcspn(out, "\n")] = 0;
}

/* PCIe generation from sysfs's link speed ("32.0 GT/s PCIe"), -1 unknown */
/* "2.5 GT/s PCIe", "16.0 GT/s PCIe": read in tenths by hand, not with
 * atof, which follows the program's LC_NUMERIC (under de_DE "2.5" read as
 * 2, a Gen1 link as unknown: rel's finding) */
static int pcie_gen_of(const char *speed)
{
	static const struct {
		int tenths;
		int gen;
	} g[] = { { 25, 1 }, { 50, 2 }, { 80, 3 }, { 160, 4 }, { 320, 5 }, { 640, 6 } };
	int v = 0;
	const char *c = speed;
	for (; *c >= '0' && *c <= '9' && v < 100000; c++)
		v = v * 10 + (*c - '0');
	v *= 10;
	if (*c == '.' && c[1] >= '0' && c[1] <= '9')
		v += c[1] - '0';
	for (size_t i = 0; i < sizeof(g) / sizeof(*g); i++)
		if (v == g[i].tenths)
			return g[i].gen;
	return -1;
}

/* Topology from the driver (name, bus id, host NUMA node, peer access and
 * whether a peer link has native atomics) and, for what the driver does
 * not say (the PCIe link; the NUMA node on drivers before 12.2), the
 * device's PCI folder in sysfs. */
static int cuda_device_props(unsigned dev, struct opends_device_props *p)
{
	if (dev >= (unsigned)C.ndev)
		return ods_fail(OPENDS_INVALID_VALUE, "device %u: there are %d CUDA devices", dev, C.ndev);
	CUdevice d = C.pl[dev]->cudev;
	snprintf(p->layer, sizeof(p->layer), "cuda");
	if (ods_cu.cuDeviceGetName(p->name, sizeof(p->name), d) != CUDA_SUCCESS)
		p->name[0] = 0;
	if (ods_cu.cuDeviceGetPCIBusId(p->pci_bus_id, sizeof(p->pci_bus_id), d) != CUDA_SUCCESS)
		p->pci_bus_id[0] = 0;
	char v[64];
	int numa = -1;
#if CUDA_VERSION >= 12020
	if (ods_cu.cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, d) != CUDA_SUCCESS)
		numa = -1;
#endif
	if (numa < 0) {
		pci_read((int)dev, "numa_node", v, sizeof(v));
		numa = v[0] ? atoi(v) : -1;
	}
	p->numa_node = numa;
	pci_read((int)dev, "current_link_speed", v, sizeof(v));
	p->pcie_gen = pcie_gen_of(v);
	pci_read((int)dev, "current_link_width", v, sizeof(v));
	p->pcie_width = v[0] && atoi(v) > 0 ? atoi(v) : -1;
	for (int j = 0; j < C.ndev && j < 64; j++) {
		int can = 0, atomics = 0;
		if (j == (int)dev || ods_cu.cuDeviceCanAccessPeer(&can, d, C.pl[j]->cudev) != CUDA_SUCCESS || !can)
			continue;
		p->peers |= 1ull << j;
		/* native atomics over the link: NVLink (PCIe peers have none) */
		if (ods_cu.cuDeviceGetP2PAttribute(&atomics, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, d,
						   C.pl[j]->cudev) == CUDA_SUCCESS &&
		    atomics)
			p->peers_nvlink |= 1ull << j;
	}
	return 0;
}

/* ---- memory ------------------------------------------------------------- */

/* What memory p is and its place; -1 for host memory (and anything the
 * driver does not know), -2 for device memory without a usable context
 * (the detail set). */
int ods_cu_place_of_ptr(const void *p)
{
	unsigned type = 0;
	CUcontext ctx = NULL;
	int ordinal = -1;
	CUpointer_attribute at[3] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT,
				      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
	void *data[3] = { &type, &ctx, &ordinal };
	CUdeviceptr dp = (CUdeviceptr)(uintptr_t)p;
	CUresult r = ods_cu.cuPointerGetAttributes(3, at, data, dp);
	if (r == CUDA_ERROR_INVALID_CONTEXT && ods_cu.cuCtxPushCurrent(C.base) == CUDA_SUCCESS) {
		r = ods_cu.cuPointerGetAttributes(3, at, data, dp);
		ods_cu_pop();
	}
	/* device and managed memory report DEVICE; pinned host memory HOST */
	if (r != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE)
		return -1;
	int pl = ods_cu_place_of_ctx(ctx, ordinal);
	return pl < 0 ? -2 : pl;
}

static enum ods_mem_kind cuda_classify(const void *p, unsigned *dev)
{
	int pl = ods_cu_place_of_ptr(p);
	*dev = pl >= 0 ? (unsigned)pl : pl == -2 ? ODS_DEV_NONE : 0;
	return pl == -1 ? ODS_MEM_HOST : ODS_MEM_DEVICE;
}

/* Anonymous memory, then registered, portable to every context: io_uring
 * accepts it as fixed buffers on every kernel, where cuMemHostAlloc memory
 * is file-backed and refused by older ones. */
/* OPENDS_AB_PINNED_THP=1 (A/B, read at open; small's lead): pinned
 * memory of 2 MiB or more starts on a 2 MiB boundary with MADV_HUGEPAGE
 * before cuMemHostRegister faults it in, so that the kernel's copies into
 * it (a read of cached pages) and the GPU's DMA from it may walk 2 MiB
 * pages instead of 4 KiB ones, as cuMemAllocHost memory does (the
 * machine's THP is "madvise": nothing is huge without asking). The mapping
 * is trimmed to [p, p + n), so pinned_free is the same either way; where
 * no huge page is had the pages are plain ones. */
#define THP_SIZE ((size_t)2 << 20)

static void *map_pinnable(size_t n)
{
	if (!pinned_thp || n < THP_SIZE) {
		void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	char *b = mmap(NULL, n + THP_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED)
		return NULL;
	char *p = (char *)(((uintptr_t)b + THP_SIZE - 1) & ~(uintptr_t)(THP_SIZE - 1));
	size_t head = (size_t)(p - b), tail = THP_SIZE - head;
	if (head)
		munmap(b, head);
	if (tail)
		munmap(p + n, tail);
	madvise(p, n, MADV_HUGEPAGE); /* (best effort) */
	return p;
}

static void *cuda_pinned_alloc(size_t n)
{
	void *p = map_pinnable(n);
	if (!p)
		return NULL;
	CUresult r = ods_cu.cuCtxPushCurrent(C.base);
	if (r == CUDA_SUCCESS) {
		r = ods_cu.cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_PORTABLE);
		ods_cu_pop();
	}
	if (r != CUDA_SUCCESS) {
		ods_cu_fail(r, "cuMemHostRegister");
		munmap(p, n);
		return NULL;
	}
	return p;
}

static void cuda_pinned_free(void *p, size_t n)
{
	if (ods_cu.cuCtxPushCurrent(C.base) == CUDA_SUCCESS) {
		ods_cu.cuMemHostUnregister(p);
		ods_cu_pop();
	}
	munmap(p, n);
}

/* Device memory needs nothing. Host memory is not pinned either: the
 * library never lets the GPU copy from or to a caller's host buffer (host
 * targets are read straight into by the kernel, or memcpy'd from a slot),
 * so pinning it would cost without making anything faster. */
static const struct ods_accel_mem cuda_mem = {
	.pinned_alloc = cuda_pinned_alloc,
	.pinned_free = cuda_pinned_free,
};

/* ---- copy lanes ------------------------------------------------------------
 * Lane calls come from library worker threads only, whose current context
 * the layer switches freely; tl_ctx avoids switching to the one that is
 * already current. */

static __thread CUcontext tl_ctx;

static int use_ctx(CUcontext c)
{
	if (tl_ctx == c)
		return 0;
	CUresult r = ods_cu.cuCtxSetCurrent(c);
	if (r != CUDA_SUCCESS)
		return ods_cu_fail(r, "cuCtxSetCurrent");
	tl_ctx = c;
	return 0;
}

static int cuda_thread_attach(void)
{
	ods_cu_tl_worker = true; /* (a library thread: ods_cu_copy_to_device_on) */
	tl_ctx = NULL;
	return use_ctx(C.base);
}

static void cuda_thread_detach(void)
{
	ods_cu.cuCtxSetCurrent(NULL);
	tl_ctx = NULL;
}

struct lane_dev {  /* a lane's queue on one device */
	CUstream s;
	CUevent ev[];
};

struct lane {
	unsigned n;             /* fences */
	unsigned last;          /* the place of the last copy queued */
	struct lane_dev *d[ODS_MAX_DEVICES];
	uint8_t fence_place[];  /* where fence i was recorded */
};

static void lane_dev_free(struct lane *l, unsigned pl, bool closing)
{
	struct lane_dev *ld = l->d[pl];
	struct place *p = C.pl[pl];
	if (ld && closing && !p->retained) {
		/* a caller's context, perhaps destroyed: never entered at close
		 * (places_free); its stream and events stay with it */
		free(ld);
		l->d[pl] = NULL;
		return;
	}
	if (!ld || use_ctx(p->ctx))
		return;
	if (ld->s)
		ods_cu.cuStreamSynchronize(ld->s);
	for (unsigned i = 0; i < l->n; i++)
		if (ld->ev[i])
			ods_cu.cuEventDestroy(ld->ev[i]);
	if (ld->s)
		ods_cu.cuStreamDestroy(ld->s);
	free(ld);
	l->d[pl] = NULL;
}

static void *cuda_lane_create(unsigned nfences)
{
	struct lane *l = calloc(1, sizeof(*l) + nfences);
	if (l)
		l->n = nfences;
	return l;
}

static void cuda_lane_destroy(void *lane)
{
	struct lane *l = lane;
	for (unsigned i = 0; i < ODS_MAX_DEVICES; i++)
		lane_dev_free(l, i, true);
	free(l);
}

/* Make the lane's queue on the device owning p current; 0 or a code. The
 * device is asked for every copy (one cuPointerGetAttributes, well under a
 * microsecond against a chunk's tens): a cached address range could be
 * freed and reused by another device's allocation meanwhile. */
static int lane_enter(struct lane *l, const void *p)
{
	int place = ods_cu_place_of_ptr(p);
	if (place < 0)
		return ods_fail(OPENDS_INVALID_VALUE, "cuda: %p is not device memory", p);
	unsigned pl = (unsigned)place;
	struct place *pp = ods_cu_place(pl);
	if (!pp)
		return OPENDS_CONTEXT_MISMATCH;
	int rc = use_ctx(pp->ctx);
	if (rc)
		return rc;
	if (!l->d[pl]) {
		struct lane_dev *ld = calloc(1, sizeof(*ld) + l->n * sizeof(CUevent));
		if (!ld)
			return ods_fail(OPENDS_NOMEM_ERROR, "cuda: out of memory for a copy lane");
		l->d[pl] = ld;
		CUresult r = ods_cu.cuStreamCreate(&ld->s, CU_STREAM_NON_BLOCKING);
		for (unsigned i = 0; r == CUDA_SUCCESS && i < l->n; i++)
			r = ods_cu.cuEventCreate(&ld->ev[i], CU_EVENT_DISABLE_TIMING);
		if (r != CUDA_SUCCESS) {
			lane_dev_free(l, pl, false);
			return ods_cu_fail(r, "creating a copy stream and its events");
		}
	}
	l->last = pl;
	return 0;
}

static int cuda_copy_to_device_async(void *lane, void *dst, const void *src, size_t n)
{
	struct lane *l = lane;
	int rc = lane_enter(l, dst);
	if (rc)
		return rc;
	CUresult r = ods_cu.cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, n, l->d[l->last]->s);
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuMemcpyHtoDAsync");
}

static int cuda_copy_to_host_async(void *lane, void *dst, const void *src, size_t n)
{
	struct lane *l = lane;
	int rc = lane_enter(l, src);
	if (rc)
		return rc;
	CUresult r = ods_cu.cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, n, l->d[l->last]->s);
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuMemcpyDtoHAsync");
}

static int cuda_fence_record(void *lane, unsigned i)
{
	struct lane *l = lane;
	struct lane_dev *ld = l->d[l->last];
	if (!ld)
		return ods_fail(OPENDS_INTERNAL_ERROR, "cuda: a fence before any copy");
	l->fence_place[i] = (uint8_t)l->last;
	CUresult r = ods_cu.cuEventRecord(ld->ev[i], ld->s); /* the lane's context is current */
	return r == CUDA_SUCCESS ? 0 : ods_cu_fail(r, "cuEventRecord");
}

static int cuda_fence_query(void *lane, unsigned i)
{
	struct lane *l = lane;
	int rc = use_ctx(C.pl[l->fence_place[i]]->ctx);
	if (rc)
		return -rc;
	CUresult r = ods_cu.cuEventQuery(l->d[l->fence_place[i]]->ev[i]);
	if (r == CUDA_SUCCESS)
		return 1;
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	return -ods_cu_fail(r, "cuEventQuery");
}

static int cuda_fence_wait(void *lane, unsigned i)
{
	struct lane *l = lane;
	int rc = use_ctx(C.pl[l->fence_place[i]]->ctx);
	if (rc)
		return -rc;
	CUresult r = ods_cu.cuEventSynchronize(l->d[l->fence_place[i]]->ev[i]);
	return r == CUDA_SUCCESS ? 0 : -ods_cu_fail(r, "cuEventSynchronize");
}

static const struct ods_accel_lanes cuda_lanes = {
	.thread_attach = cuda_thread_attach,
	.thread_detach = cuda_thread_detach,
	.lane_create = cuda_lane_create,
	.lane_destroy = cuda_lane_destroy,
	.copy_to_device_async = cuda_copy_to_device_async,
	.copy_to_host_async = cuda_copy_to_host_async,
	.fence_record = cuda_fence_record,
	.fence_query = cuda_fence_query,
	.fence_wait = cuda_fence_wait,
};

const struct ods_accel ods_accel_cuda = {
	.name = "cuda",
	.open = cuda_open,
	.close = cuda_close,
	.forget = cuda_forget,
	.classify = cuda_classify,
	.device_count = cuda_device_count,
	.device_props = cuda_device_props,
	.copy_to_device = ods_cu_copy_to_device,
	.copy_to_host = ods_cu_copy_to_host,
	.copy_to_device_on = ods_cu_copy_to_device_on,
	.copy_to_device_begin = ods_cu_copy_to_device_begin,
	.copy_to_host_begin = ods_cu_copy_to_host_begin,
	.copy_end = ods_cu_copy_end,
	.peer_copy = ods_cu_peer_copy,
	.peer_wait = ods_cu_peer_wait,
	.mem = &cuda_mem,
	.lanes = &cuda_lanes,
	.streams = &ods_cuda_streams,
};
