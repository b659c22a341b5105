/*
 * libFuzzer target: configuration parsing. Built together with the
 * library's src/core/config.c and src/core/errors.c (ods_config_parse is
 * hidden in the shared library). Input: byte 0 picks the variable (one of
 * the eight, or an unknown name), the rest up to the first NUL is its value.
 * Every value is checked against an independent model of what
 * include/opends.h documents each variable accepts: accepted values must
 * set exactly the documented field; refused ones must return
 * OPENDS_DRIVER_INVALID_PROPS with a detail naming the variable.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ods.h"

static const char *const names[] = { "OPENDS_BACKEND",    "OPENDS_ACCEL",     "OPENDS_IO_THREADS",
				     "OPENDS_QUEUE_DEPTH", "OPENDS_CHUNK_SIZE", "OPENDS_CPU_MASK",
				     "OPENDS_IDLE_SPIN",  "OPENDS_ASSUME_ALIGNED_ONLY", "OPENDS_NOT_A_VARIABLE" };

static void die(const char *what, const char *name, const char *value)
{
	fprintf(stderr, "fuzz_config: %s: %s=\"%s\"\n", what, name, value);
	abort();
}

/* decimal digits only, no sign, spaces or leading zeros ("0" is fine);
 * false on overflow */
static bool dec(const char *s, uint64_t *v)
{
	if (!*s || (s[0] == '0' && s[1]))
		return false;
	unsigned __int128 x = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		x = x * 10 + (unsigned)(*s - '0');
		if (x > UINT64_MAX)
			return false;
	}
	*v = (uint64_t)x;
	return true;
}

static bool hex(const char *s, uint64_t *v)
{
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	if (!*s)
		return false;
	unsigned __int128 x = 0;
	for (; *s; s++) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			return false;
		x = x * 16 + (unsigned)d;
		if (x > UINT64_MAX)
			return false;
	}
	*v = (uint64_t)x;
	return true;
}

static bool one_of(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, list[i]))
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *name = names[data[0] % (sizeof(names) / sizeof(*names))];
	char value[256];
	size_t n = size - 1 < sizeof(value) - 1 ? size - 1 : sizeof(value) - 1;
	memcpy(value, data + 1, n);
	value[n] = '\0';

	struct ods_config cfg, before;
	memset(&cfg, 0x5a, sizeof(cfg));
	cfg.aligned_only = false; /* a bool must hold 0 or 1 */
	cfg.backend[sizeof(cfg.backend) - 1] = cfg.accel[sizeof(cfg.accel) - 1] = '\0';
	before = cfg;
	int rc = ods_config_parse(&cfg, name, value);

	/* the model */
	bool ok;
	uint64_t v = 0;
	bool empty = value[0] == '\0';
	if (!strcmp(name, "OPENDS_NOT_A_VARIABLE")) {
		ok = false;
	} else if (empty) {
		ok = true; /* empty = unset */
	} else if (!strcmp(name, "OPENDS_BACKEND")) {
		static const char *const l[] = { "auto", "ref", "uring", "gds" };
		ok = one_of(value, l, 4);
	} else if (!strcmp(name, "OPENDS_ACCEL")) {
		static const char *const l[] = { "auto", "cuda", "host", "hostdev" };
		ok = one_of(value, l, 4);
	} else if (!strcmp(name, "OPENDS_IO_THREADS")) {
		ok = dec(value, &v) && v >= 1 && v <= 256;
	} else if (!strcmp(name, "OPENDS_QUEUE_DEPTH")) {
		ok = dec(value, &v) && v >= 1 && v <= 4096;
	} else if (!strcmp(name, "OPENDS_CHUNK_SIZE")) {
		char num[256];
		size_t l = strlen(value);
		uint64_t mult = 1;
		memcpy(num, value, l + 1);
		char last = (char)tolower((unsigned char)num[l - 1]);
		if (last == 'k' || last == 'm' || last == 'g') {
			mult = last == 'k' ? 1u << 10 : last == 'm' ? 1u << 20 : 1u << 30;
			num[l - 1] = '\0';
		}
		/* no leading zeros, so a valid value is at most 11 characters */
		ok = dec(num, &v) && v <= (1ull << 30) / mult && v * mult >= 4096 &&
		     (v * mult) % 4096 == 0;
		v *= mult;
	} else if (!strcmp(name, "OPENDS_CPU_MASK")) {
		ok = hex(value, &v);
	} else if (!strcmp(name, "OPENDS_IDLE_SPIN")) {
		ok = !strcmp(value, "busy") || (dec(value, &v) && v <= 1000000);
	} else {
		ok = !strcmp(value, "0") || !strcmp(value, "1");
	}

	if (ok && rc != 0)
		die("refused a value the documentation accepts", name, value);
	if (!ok && rc != OPENDS_DRIVER_INVALID_PROPS)
		die(rc ? "refused with a code other than OPENDS_DRIVER_INVALID_PROPS"
		       : "accepted a value the documentation refuses",
		    name, value);
	if (!ok) {
		const char *d = opends_last_error_detail();
		if (!d || !strstr(d, name))
			die("the detail does not name the variable", name, value);
		if (memcmp(&cfg, &before, sizeof(cfg)))
			die("a refused value changed the configuration", name, value);
		return 0;
	}
	/* accepted: exactly the documented field changed, to the value */
	struct ods_config want = before;
	if (!empty) {
		if (!strcmp(name, "OPENDS_BACKEND"))
			snprintf(want.backend, sizeof(want.backend), "%s", value);
		else if (!strcmp(name, "OPENDS_ACCEL"))
			snprintf(want.accel, sizeof(want.accel), "%s", value);
		else if (!strcmp(name, "OPENDS_IO_THREADS"))
			want.io_threads = (unsigned)v;
		else if (!strcmp(name, "OPENDS_QUEUE_DEPTH"))
			want.queue_depth = (unsigned)v;
		else if (!strcmp(name, "OPENDS_CHUNK_SIZE"))
			want.chunk_size = (size_t)v;
		else if (!strcmp(name, "OPENDS_CPU_MASK"))
			want.cpu_mask = v;
		else if (!strcmp(name, "OPENDS_IDLE_SPIN"))
			want.idle_spin_us = !strcmp(value, "busy") ? -1 : (long)v;
		else
			want.aligned_only = value[0] == '1';
	}
	if (strcmp(cfg.backend, want.backend) || strcmp(cfg.accel, want.accel) || cfg.io_threads != want.io_threads ||
	    cfg.queue_depth != want.queue_depth || cfg.chunk_size != want.chunk_size ||
	    cfg.cpu_mask != want.cpu_mask || cfg.idle_spin_us != want.idle_spin_us ||
	    cfg.aligned_only != want.aligned_only)
		die("an accepted value set the wrong field or value", name, value);
	return 0;
}
