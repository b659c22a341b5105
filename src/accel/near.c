/*
 * The CPUs nearest a device (accel.h, "the NUMA node of a device"): the
 * staging workers move to them while they copy to that device, so the
 * reads and copies they start run on the device's node (issue 19 item 4).
 *
 * Per device, once per open: the node from the layer's device_props, its
 * CPUs from <node_root>/node<N>/cpulist (sysfs), kept to the CPUs the
 * process may use at open. Nothing is preferred where that set is empty or
 * is every allowed CPU (one-node machines), so such machines never change a
 * thread's affinity.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ods.h"

enum { NEAR_UNKNOWN = 0, NEAR_NONE, NEAR_SET };

static struct {
	pthread_mutex_t lock;
	char root[256];
	cpu_set_t allowed; /* the process's affinity at open */
	unsigned char state[ODS_MAX_DEVICES];
	cpu_set_t set[ODS_MAX_DEVICES];
} near_state = { .lock = PTHREAD_MUTEX_INITIALIZER };
#define N near_state

void ods_accel_near_open(const char *node_root)
{
	pthread_mutex_lock(&N.lock);
	snprintf(N.root, sizeof(N.root), "%s", node_root && *node_root ? node_root : "/sys/devices/system/node");
	memset(N.state, NEAR_UNKNOWN, sizeof(N.state));
	if (sched_getaffinity(0, sizeof(N.allowed), &N.allowed))
		CPU_ZERO(&N.allowed); /* nothing known: nothing preferred */
	pthread_mutex_unlock(&N.lock);
}

void ods_accel_near_forget(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	N.lock = fresh; /* may have been held by a thread the child lacks */
	memset(N.state, NEAR_UNKNOWN, sizeof(N.state));
}

/* "0-3,8,10-11" into *set; false when malformed or empty */
static bool parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	bool any = false;
	while (*s && *s != '\n') {
		char *end;
		unsigned long a = strtoul(s, &end, 10), b = a;
		if (end == s)
			return false;
		if (*end == '-') {
			s = end + 1;
			b = strtoul(s, &end, 10);
			if (end == s || b < a)
				return false;
		}
		for (unsigned long c = a; c <= b && c < CPU_SETSIZE; c++) {
			CPU_SET((int)c, set);
			any = true;
		}
		s = end;
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return false;
	}
	return any;
}

/* caller holds N.lock: NEAR_NONE or NEAR_SET with N.set[dev] filled */
static int lookup(unsigned dev)
{
	const struct ods_accel *a = ods_drv.accel;
	opends_device_props_t p;
	memset(&p, 0, sizeof(p));
	p.numa_node = p.pcie_gen = p.pcie_width = -1;
	if (!a || !a->device_props || a->device_props(dev, &p) || p.numa_node < 0)
		return NEAR_NONE;
	char path[320], line[4096];
	snprintf(path, sizeof(path), "%s/node%d/cpulist", N.root, p.numa_node);
	FILE *f = fopen(path, "r");
	if (!f)
		return NEAR_NONE;
	bool ok = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	cpu_set_t node;
	if (!ok || !parse_cpulist(line, &node))
		return NEAR_NONE;
	CPU_AND(&N.set[dev], &node, &N.allowed);
	int n = CPU_COUNT(&N.set[dev]);
	return n == 0 || n == CPU_COUNT(&N.allowed) ? NEAR_NONE : NEAR_SET;
}

bool ods_accel_near_cpus(unsigned dev, cpu_set_t *set)
{
	if (dev >= ODS_MAX_DEVICES)
		return false;
	pthread_mutex_lock(&N.lock);
	if (N.state[dev] == NEAR_UNKNOWN)
		N.state[dev] = (unsigned char)lookup(dev);
	bool have = N.state[dev] == NEAR_SET;
	if (have)
		*set = N.set[dev];
	pthread_mutex_unlock(&N.lock);
	return have;
}
