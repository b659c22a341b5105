/*
 * The accelerator streams the library knows (stream_accel.c's engine):
 * those it made (opends_stream_create) and those registered with their
 * hints (a small array: programs use few streams), and how many stream
 * operations are in flight, so that closing waits for them.
 */
#include <stdlib.h>
#include <string.h>

#include "stream.h"

#define FIXED_ARGS \
	(OPENDS_STREAM_FIXED_BUF_OFFSET | OPENDS_STREAM_FIXED_FILE_OFFSET | OPENDS_STREAM_FIXED_FILE_SIZE)

/* What the library knows of an accelerator stream: whether it made it,
 * and the registration hints. A small array: programs use few streams. */
struct astream {
	void *s;
	bool created, registered;
	unsigned flags;
};
static pthread_mutex_t astreams_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t astreams_idle = PTHREAD_COND_INITIALIZER;
static struct astream *astreams;
static size_t nastreams, astreams_cap;
static unsigned ainflight; /* operations enqueued and not yet ended */

/* caller holds astreams_lock; NULL when unknown (add: make an entry) */
static struct astream *astream_find(void *s, bool add)
{
	for (size_t i = 0; i < nastreams; i++)
		if (astreams[i].s == s)
			return &astreams[i];
	if (!add)
		return NULL;
	if (nastreams == astreams_cap) {
		size_t ncap = astreams_cap ? astreams_cap * 2 : 16;
		struct astream *n = realloc(astreams, ncap * sizeof(*n));
		if (!n)
			return NULL;
		astreams = n;
		astreams_cap = ncap;
	}
	struct astream *a = &astreams[nastreams++];
	memset(a, 0, sizeof(*a));
	a->s = s;
	return a;
}

/* caller holds astreams_lock; drop entries that say nothing */
static void astream_trim(struct astream *a)
{
	if (!a->created && !a->registered)
		*a = astreams[--nastreams];
}

void ods_ainflight_add(int d)
{
	pthread_mutex_lock(&astreams_lock);
	ainflight += d;
	if (ainflight == 0)
		pthread_cond_broadcast(&astreams_idle);
	pthread_mutex_unlock(&astreams_lock);
}

/* Whether the values behind an operation's pointers may be read at the
 * call: its stream is registered as keeping all of them fixed. */
bool ods_astream_fixed(void *s)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(s, false);
	bool fixed = a && a->registered && (a->flags & FIXED_ARGS) == FIXED_ARGS;
	pthread_mutex_unlock(&astreams_lock);
	return fixed;
}

opends_error_t ods_astream_create(opends_stream_t *stream)
{
	void *as = NULL;
	int rc = ods_drv.accel->streams->stream_create(&as);
	if (rc)
		return ods_err(rc, 0);
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(as, true);
	if (a)
		a->created = true;
	pthread_mutex_unlock(&astreams_lock);
	if (!a) {
		ods_drv.accel->streams->stream_destroy(as);
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_stream_create: out of memory"), ENOMEM);
	}
	*stream = as;
	return ods_ok();
}

opends_error_t ods_astream_destroy(opends_stream_t stream)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = stream ? astream_find(stream, false) : NULL;
	bool ours = a && a->created;
	if (ours) {
		a->created = a->registered = false;
		astream_trim(a);
	}
	pthread_mutex_unlock(&astreams_lock);
	if (!ours)
		return ods_err(ods_fail(OPENDS_INVALID_VALUE,
					"opends_stream_destroy: stream %p was not made by opends_stream_create", stream),
			       0);
	int rc = ods_drv.accel->streams->stream_destroy(stream);
	return rc ? ods_err(rc, 0) : ods_ok();
}

/* any stream of the accelerator may be registered, the NULL (default)
 * stream included */
opends_error_t ods_astream_reg(opends_stream_t stream, unsigned flags)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(stream, true);
	if (a) {
		a->registered = true;
		a->flags = flags;
	}
	pthread_mutex_unlock(&astreams_lock);
	if (!a)
		return ods_err(ods_fail(OPENDS_NOMEM_ERROR, "opends_stream_register: out of memory"), ENOMEM);
	return ods_ok();
}

bool ods_astream_dereg(opends_stream_t stream)
{
	pthread_mutex_lock(&astreams_lock);
	struct astream *a = astream_find(stream, false);
	bool was = a && a->registered;
	if (was) {
		a->registered = false;
		a->flags = 0;
		astream_trim(a);
	}
	pthread_mutex_unlock(&astreams_lock);
	return was;
}

/* the stream holds every operation until it completed, so waiting for
 * the stream waits for them too */
opends_error_t ods_astream_sync(opends_stream_t stream)
{
	int rc = ods_drv.accel->streams->stream_sync(stream);
	return rc ? ods_err(rc, 0) : ods_ok();
}

/* every operation has ended; the streams the library made are destroyed */
void ods_astreams_fini(void)
{
	pthread_mutex_lock(&astreams_lock);
	while (ainflight)
		pthread_cond_wait(&astreams_idle, &astreams_lock);
	for (size_t i = 0; i < nastreams; i++)
		if (astreams[i].created)
			ods_drv.accel->streams->stream_destroy(astreams[i].s);
	free(astreams);
	astreams = NULL;
	nastreams = astreams_cap = 0;
	pthread_mutex_unlock(&astreams_lock);
}

void ods_astreams_forget(void)
{
	astreams_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	astreams_idle = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	astreams = NULL;
	nastreams = astreams_cap = 0;
	ainflight = 0;
}
