/*
 * OpenDS public API: devices.
 * Part of <opends.h>: include that (it includes every family), not this
 * file. The conventions at the top of opends.h (errors, threads, fork,
 * accelerator contexts) hold here.
 */
#ifndef OPENDS_DEVICES_H
#define OPENDS_DEVICES_H

#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * OpenDS extension: the devices the accelerator layer sees (0 for the host
 * layer). Device memory of any of them may be used from any thread at the
 * same time; the device and context of each buffer come from the pointer,
 * whatever context is current on the calling thread (API.md, "Accelerator
 * context — revised").
 * Errors: OPENDS_INVALID_VALUE (count NULL), OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_device_count(unsigned *count);

/*
 * OpenDS extension: what the accelerator layer knows of one device, as
 * opends-info reports it. Numbers it does not know are -1, strings "".
 */
typedef struct opends_device_props {
	char layer[16];       /* the accelerator layer: "cuda", "hostdev" */
	char name[96];        /* "NVIDIA H200"; "simulated device" under hostdev */
	char pci_bus_id[32];  /* as the driver gives it, e.g. "0000:19:00.0"; "" if none */
	int numa_node;        /* the host NUMA node nearest the device */
	int pcie_gen;         /* the link to the host now: PCIe generation (1 to 6) */
	int pcie_width;       /* and lanes (x16: 16) */
	/* bit j: the device reaches device j's memory directly (peer copies
	 * without host staging; opends_sync_read_fanout uses them) */
	uint64_t peers;
	/* bit j (a subset of peers): that link has native atomics, which NVLink
	 * has and PCIe peer-to-peer has not ("NVLink-class") */
	uint64_t peers_nvlink;
	uint64_t reserved[4]; /* zero */
} opends_device_props_t;

/*
 * OpenDS extension: fill *props for device `device` (0 to count - 1).
 * Errors: OPENDS_INVALID_VALUE (device out of range, props NULL),
 * OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_device_get_properties(unsigned device, opends_device_props_t *props);

/*
 * OpenDS extension: the same as one line on device `device`: its name, PCI
 * address, link, NUMA node, and the devices it has peer access to, e.g.
 * "cuda:0 NVIDIA H200, PCI 0000:19:00.0, link PCIe gen 5 x16, NUMA node 0;
 * peers cuda:1 (NVLink-class)". Written to buf, truncated to len - 1 bytes
 * and always terminated.
 * Errors: OPENDS_INVALID_VALUE (device out of range, buf NULL or len 0),
 * OPENDS_DRIVER_NOT_INITIALIZED.
 */
OPENDS_API opends_error_t opends_device_describe(unsigned device, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* OPENDS_DEVICES_H */
