/*
 * Compiled only where NVIDIA's cufile.h is found: the layouts and values of
 * that header must be the ones OpenDS's own declaration
 * (include/cufile.h, used by the drop-in and the gds backend) is checked
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
