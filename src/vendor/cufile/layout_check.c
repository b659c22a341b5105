/*
 * Compiled only where NVIDIA's cufile.h is found: the layouts and values of
 * that header must be the ones OpenDS's own declaration (cufile.h in this
 * folder, used by the drop-in, the loader and the gds backend) is checked
 * against in cufile.c and gds.c. A mismatch fails the build here.
 */
#include <cufile.h>

#include "cufile_layout.h"

ODS_CUFILE_LAYOUT_CHECKS();

ODS_CUFILE_PROTO_CHECKS();

/* something for the object file to hold */
int ods_cufile_layout_checked(void);
int ods_cufile_layout_checked(void)
{
	return 1;
}

/* Newer than cuFile 1.15 (the GPU machine's): checked where the header has
 * them (src/vendor/cufile/meson.build probes for each). */
#ifdef ODS_CF_HAVE_IOVEC
ODS_CF_SIZE(CUfileIOVec_t, 16);
ODS_CF_OFF(CUfileIOVec_t, len, 8);
#endif
#ifdef ODS_CF_HAVE_P2P
ODS_CF_VAL(CU_FILE_P2P_SUPPORTED, 4);
#endif
#ifdef ODS_CF_HAVE_1_20
/* cuFile 1.20 (the wheel CI uses): the entry points and values added since
 * 1.15, which the drop-in exports too */
ODS_CF_VAL(CU_FILE_MAX_TARGET_TYPES, 15);
ODS_CF_VAL(CU_FILE_FALLBACK_IO_MODE, 4);
ODS_CF_VAL(CU_FILE_VANILLA_POSIX_IO_MODE, 2);
ODS_CF_VAL(CUFILE_NVIDIA_PEERMEM, 4);
ODS_CF_VAL(CU_FILE_P2P_FLAG_PCI_P2PDMA, 1);
ODS_CF_VAL(CU_FILE_P2P_FLAG_C2C, 8);
ODS_CF_VAL(CUFILE_PARAM_GDS_FALLBACK_IO, 13);
ODS_CF_VAL(CUFILE_PARAM_RDMA_TRANSPORT, 3);
ODS_CF_VAL(CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_COUNT, 3);
ODS_CF_VAL(CUFILE_GPU_UUID_LEN, 16);
ODS_CF_SIZE(CUfileP2PFlags_t, 4);
ODS_CUFILE_PROTO_CHECKS_1_20();
#endif
