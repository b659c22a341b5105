/* Configuration, read and validated at every driver open: settings the
 * caller gives opends_driver_open_with, then the environment, then the
 * defaults (the first that gives a variable wins). Each variable is a row
 * of one table: its name, what it accepts (for the error detail) and its
 * parser; both sources go through it. A bad value fails the open whichever
 * backend would have used it: OPENDS_INVALID_VALUE for an explicit setting
 * (an argument of the call), OPENDS_DRIVER_INVALID_PROPS for the
 * environment. What each variable came to is kept for
 * opends_driver_get_setting. */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ods.h"
#include "opends.h"

/* Backend names known to the project, built here or not: naming one that
 * was not built is a platform problem, naming anything else a typo. */
static const char *const known_backends[] = { "ref", "uring", "gds" };

/* Parse an unsigned decimal (or 0x hex when hex) number without sign,
 * spaces or junk. Returns false on any of those or overflow. A decimal
 * number has no leading zeros ("0" itself is fine): "010" could mean 8 to a
 * reader used to C or the shell, so it is refused rather than guessed. */
static bool parse_u64(const char *s, uint64_t *out, bool hex)
{
	int base = 10;
	if (hex) {
		base = 16;
		if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
			s += 2;
	}
	if (!*s || (!hex && s[0] == '0' && s[1]))
		return false;
	uint64_t v = 0;
	for (; *s; s++) {
		int d;
		if (isdigit((unsigned char)*s))
			d = *s - '0';
		else if (hex && isxdigit((unsigned char)*s))
			d = tolower((unsigned char)*s) - 'a' + 10;
		else
			return false;
		if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return false;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	*out = v;
	return true;
}

static bool in_range(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
	return parse_u64(s, v, false) && *v >= lo && *v <= hi;
}

static bool p_backend(struct ods_config *c, const char *s)
{
	bool known = strcmp(s, "auto") == 0;
	for (size_t i = 0; !known && i < sizeof(known_backends) / sizeof(*known_backends); i++)
		known = strcmp(s, known_backends[i]) == 0;
	if (!known)
		return false;
	snprintf(c->backend, sizeof(c->backend), "%s", s);
	return true;
}

static bool p_accel(struct ods_config *c, const char *s)
{
	if (strcmp(s, "auto") && strcmp(s, "cuda") && strcmp(s, "host") && strcmp(s, "hostdev"))
		return false;
	snprintf(c->accel, sizeof(c->accel), "%s", s);
	return true;
}

static bool p_threads(struct ods_config *c, const char *s)
{
	uint64_t v;
	if (!in_range(s, 1, 256, &v))
		return false;
	c->io_threads = (unsigned)v;
	return true;
}

static bool p_kworkers(struct ods_config *c, const char *s)
{
	uint64_t v;
	if (!in_range(s, 1, 64, &v))
		return false;
	c->io_kworkers = (unsigned)v;
	return true;
}

static bool p_depth(struct ods_config *c, const char *s)
{
	uint64_t v;
	if (!in_range(s, 1, 4096, &v))
		return false;
	c->queue_depth = (unsigned)v;
	return true;
}

/* A size in bytes with an optional k, m or g suffix, at most max. */
static bool parse_size(const char *s, uint64_t max, uint64_t *out)
{
	char num[32];
	size_t n = strlen(s);
	uint64_t mult = 1, v;
	if (n == 0 || n >= sizeof(num))
		return false;
	memcpy(num, s, n + 1);
	switch (tolower((unsigned char)num[n - 1])) {
	case 'k': mult = 1ull << 10; break;
	case 'm': mult = 1ull << 20; break;
	case 'g': mult = 1ull << 30; break;
	default: break;
	}
	if (mult != 1)
		num[n - 1] = '\0';
	if (!parse_u64(num, &v, false) || v > max / mult)
		return false;
	*out = v * mult;
	return true;
}

static bool p_chunk(struct ods_config *c, const char *s)
{
	uint64_t v;
	if (!parse_size(s, 1ull << 30, &v) || v < ODS_ALIGN || v % ODS_ALIGN)
		return false;
	c->chunk_size = (size_t)v;
	return true;
}

static bool p_pinned(struct ods_config *c, const char *s)
{
	uint64_t v;
	if (!parse_size(s, 1ull << 40, &v) || v < (1ull << 20))
		return false;
	c->max_pinned = (size_t)v;
	return true;
}

static bool p_inline(struct ods_config *c, const char *s)
{
	uint64_t v;
	if (!parse_size(s, 1ull << 30, &v))
		return false;
	c->inline_max = (size_t)v;
	c->inline_set = true;
	return true;
}

static bool p_split(struct ods_config *c, const char *s)
{
	uint64_t v;
	if (!in_range(s, 1, 16, &v))
		return false;
	c->inline_split = (unsigned)v;
	return true;
}

static bool p_mask(struct ods_config *c, const char *s)
{
	return parse_u64(s, &c->cpu_mask, true);
}

static bool p_spin(struct ods_config *c, const char *s)
{
	uint64_t v;
	if (strcmp(s, "busy") == 0) {
		c->idle_spin_us = -1;
		return true;
	}
	if (!in_range(s, 0, 1000000, &v))
		return false;
	c->idle_spin_us = (long)v;
	return true;
}

static bool p_aligned(struct ods_config *c, const char *s)
{
	if (strcmp(s, "0") && strcmp(s, "1"))
		return false;
	c->aligned_only = s[0] == '1';
	return true;
}

static bool p_readahead(struct ods_config *c, const char *s)
{
	if (strcmp(s, "0") && strcmp(s, "1"))
		return false;
	c->no_readahead = s[0] == '0';
	return true;
}

static bool p_cufile_lib(struct ods_config *c, const char *s)
{
	/* a path or a bare name for the loader; checked when gds loads it */
	(void)c;
	return strlen(s) < 4096;
}

/* env_only: read from the environment where the library is loaded (gds,
 * rados sources), not at the open, so an explicit setting could not reach
 * it: refused rather than ignored. */
static const struct {
	const char *name;
	const char *accepts;
	bool (*parse)(struct ods_config *c, const char *s);
	bool env_only;
} vars[] = {
	{ "OPENDS_BACKEND", "auto, ref, uring or gds", p_backend },
	{ "OPENDS_ACCEL", "auto, cuda, host or hostdev", p_accel },
	{ "OPENDS_IO_THREADS", "an integer from 1 to 256", p_threads },
	{ "OPENDS_QUEUE_DEPTH", "an integer from 1 to 4096", p_depth },
	{ "OPENDS_IO_KWORKERS", "an integer from 1 to 64", p_kworkers },
	{ "OPENDS_CHUNK_SIZE", "a size from 4k to 1g that is a multiple of 4096 (suffix k, m or g, either case; no leading zeros)",
	  p_chunk },
	{ "OPENDS_MAX_PINNED", "a size from 1m to 1024g (suffix k, m or g allowed)", p_pinned },
	{ "OPENDS_INLINE_MAX", "a size from 0 to 1g (suffix k, m or g allowed)", p_inline },
	{ "OPENDS_INLINE_SPLIT", "an integer from 1 to 16", p_split },
	{ "OPENDS_READAHEAD", "0 or 1", p_readahead },
	{ "OPENDS_CPU_MASK", "a hexadecimal CPU mask of at most 64 bits, e.g. 0xf0", p_mask },
	{ "OPENDS_IDLE_SPIN", "microseconds from 0 to 1000000, or busy", p_spin },
	{ "OPENDS_ASSUME_ALIGNED_ONLY", "0 or 1", p_aligned },
	{ "OPENDS_CUFILE_LIBRARY", "a path to NVIDIA's libcufile.so.0, or a file name the loader searches (under 4096 characters)",
	  p_cufile_lib, true },
	{ "OPENDS_RADOS_LIBRARY", "a path to librados.so.2, or a file name the loader searches (under 4096 characters)",
	  p_cufile_lib, true },
};

#define NVARS (sizeof(vars) / sizeof(*vars))

/* What each variable came to at the last load: its value (NULL: default)
 * and where it came from. A load replaces them while the driver is closed,
 * but opends_driver_get_setting checks "open" and then reads them, so a
 * thread that reopens the driver between the two could free a value that
 * is being copied: both sides hold eff_lock (a load swaps the arrays under
 * it and frees the old values after). */
static pthread_mutex_t eff_lock = PTHREAD_MUTEX_INITIALIZER;
static char *eff_val[NVARS];
static opends_setting_source_t eff_src[NVARS];

static void defaults(struct ods_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->backend, "auto");
	strcpy(c->accel, "auto");
	c->idle_spin_us = -2;
}

/* The one place a variable is looked up and a value parsed, for the
 * environment and the caller's settings alike, with one message set: code
 * is OPENDS_DRIVER_INVALID_PROPS for the environment, OPENDS_INVALID_VALUE
 * for a setting (an argument of the call); where prefixes the detail with
 * the call and the setting's index ("" for the environment). */
static int lookup(const char *name, int code, const char *where, int *idx)
{
	for (size_t i = 0; i < NVARS; i++)
		if (!strcmp(vars[i].name, name)) {
			*idx = (int)i;
			return 0;
		}
	return ods_fail(code, "%s%.64s is not a configuration variable", where, name);
}

static int parse_var(struct ods_config *cfg, int i, const char *value, int code, const char *where)
{
	if (!vars[i].parse(cfg, value))
		return ods_fail(code, "%s%s=\"%.64s\" is invalid: it accepts %s", where, vars[i].name, value,
				vars[i].accepts);
	return 0;
}

int ods_config_parse(struct ods_config *cfg, const char *name, const char *value)
{
	int i = -1, rc = lookup(name, OPENDS_DRIVER_INVALID_PROPS, "", &i);
	if (rc || !value || !*value) /* empty = unset */
		return rc;
	return parse_var(cfg, i, value, OPENDS_DRIVER_INVALID_PROPS, "");
}

bool ods_parse_u64(const char *s, uint64_t *out)
{
	return s && parse_u64(s, out, false);
}

#define SETTING "opends_driver_open_with: settings[%zu]: "

/* The caller's settings, checked as arguments: each names a variable of
 * the table once, with a non-empty value. pos[i] is the index in settings
 * of variable i's setting, or -1. */
static int check_settings(const opends_setting_t *settings, size_t n, long *pos)
{
	for (size_t i = 0; i < NVARS; i++)
		pos[i] = -1;
	if (n && !settings)
		return ods_fail(OPENDS_INVALID_VALUE, "opends_driver_open_with: settings is NULL and n is %zu", n);
	for (size_t k = 0; k < n; k++) {
		const char *name = settings[k].name, *value = settings[k].value;
		char where[64];
		int i = -1, rc;
		snprintf(where, sizeof(where), SETTING, k);
		if (!name)
			return ods_fail(OPENDS_INVALID_VALUE, "opends_driver_open_with: settings[%zu].name is NULL", k);
		if ((rc = lookup(name, OPENDS_INVALID_VALUE, where, &i)))
			return rc;
		if (vars[i].env_only)
			return ods_fail(OPENDS_INVALID_VALUE,
					"%s%s is read from the environment only (where the library it names is loaded)",
					where, name);
		if (pos[i] >= 0)
			return ods_fail(OPENDS_INVALID_VALUE, "%s%s is given twice (also settings[%ld])", where, name,
					pos[i]);
		if (!value || !*value)
			return ods_fail(OPENDS_INVALID_VALUE, "%s%s has %s value", where, name,
					value ? "an empty" : "a NULL");
		pos[i] = (long)k;
	}
	return 0;
}

int ods_config_load_with(struct ods_config *cfg, const opends_setting_t *settings, size_t n)
{
	long pos[NVARS];
	const char *val[NVARS];
	opends_setting_source_t src[NVARS];
	char *keep[NVARS];
	int rc = check_settings(settings, n, pos);
	if (rc)
		return rc;
	defaults(cfg);
	for (size_t i = 0; i < NVARS; i++) {
		char where[64] = "";
		if (pos[i] >= 0) {
			val[i] = settings[pos[i]].value;
			src[i] = OPENDS_SETTING_EXPLICIT;
			snprintf(where, sizeof(where), SETTING, (size_t)pos[i]);
		} else {
			val[i] = getenv(vars[i].name);
			src[i] = val[i] && *val[i] ? OPENDS_SETTING_ENVIRONMENT : OPENDS_SETTING_DEFAULT;
		}
		if (src[i] != OPENDS_SETTING_DEFAULT &&
		    (rc = parse_var(cfg, (int)i, val[i],
				    src[i] == OPENDS_SETTING_EXPLICIT ? OPENDS_INVALID_VALUE : OPENDS_DRIVER_INVALID_PROPS,
				    where)))
			return rc;
	}
	for (size_t i = 0; i < NVARS; i++)
		keep[i] = src[i] == OPENDS_SETTING_DEFAULT ? NULL : strdup(val[i]);
	pthread_mutex_lock(&eff_lock);
	for (size_t i = 0; i < NVARS; i++) {
		char *old = eff_val[i];
		eff_val[i] = keep[i];
		eff_src[i] = keep[i] ? src[i] : OPENDS_SETTING_DEFAULT;
		keep[i] = old;
	}
	pthread_mutex_unlock(&eff_lock);
	for (size_t i = 0; i < NVARS; i++)
		free(keep[i]);
	return 0;
}

int ods_config_load(struct ods_config *cfg)
{
	return ods_config_load_with(cfg, NULL, 0);
}

/* What name came to at the last load (opends_driver_get_setting, which
 * checks that the driver is open: this file stands alone, fuzz_config
 * links it without the driver). 0 or an OPENDS_* code with the detail. */
int ods_config_get(const char *name, char *value, size_t len, opends_setting_source_t *source)
{
	if (!name || !value || !len)
		return ods_fail(OPENDS_INVALID_VALUE, "opends_driver_get_setting: %s",
				!name ? "name is NULL" : "value is NULL or len is 0");
	int i = -1, rc = lookup(name, OPENDS_INVALID_VALUE, "opends_driver_get_setting: ", &i);
	if (rc)
		return rc;
	pthread_mutex_lock(&eff_lock);
	const char *v = eff_val[i] ? eff_val[i] : "";
	opends_setting_source_t src = eff_src[i];
	size_t n = strlen(v);
	if (n < len)
		memcpy(value, v, n + 1);
	pthread_mutex_unlock(&eff_lock);
	if (n >= len)
		return ods_fail(OPENDS_INVALID_VALUE, "opends_driver_get_setting: %s's value needs %zu bytes, len is %zu",
				name, n + 1, len);
	if (source)
		*source = src;
	return 0;
}
