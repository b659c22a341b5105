/*
 * test_registry_calls: what a public call keeps on its thread (ods.h,
 * struct ods_calls), checked through the library's internals:
 *  - backend_err: an accelerator failure recorded inside a synchronous read
 *    (ods_fail_backend; the read returns a number, nothing takes the code)
 *    is not reported by a later call that fails with the same code and no
 *    record of its own (before: the later call reported the read's code);
 *    within one call, a failure reports its own code once;
 *  - holds: inside a call, ods_handle_lookup holds the handle (users 1)
 *    until that call returns; looked up again (a batch of one handle, a
 *    nested call while the outer one holds it) it is held once, and the
 *    outer hold outlives the nested call; a library thread (no call) holds
 *    nothing; deregister of a handle held by this thread's call is refused
 *    with OPENDS_INVALID_VALUE and the handle stays registered; a held
 *    handle of another thread makes deregister wait until it is given back.
 * Links the library's objects. Backend from the environment.
 */
#include <pthread.h>
#include <time.h>

#include "common.h"

#include "ods.h"

#define FAKE_RESULT 4242

/* stands for a public call: ODS_ENTER, then fn's failure or look-up */
static opends_error_t call_failing_without_record(void)
{
	ODS_ENTER("test call");
	return ods_err(OPENDS_DEVICE_DRIVER_ERROR, 0);
}

static opends_error_t call_failing_with_record(void)
{
	ODS_ENTER("test call");
	return ods_err(ods_fail_backend(OPENDS_DEVICE_DRIVER_ERROR, FAKE_RESULT, "test: a driver call failed"), 0);
}

static long users_of(struct ods_handle *h)
{
	return atomic_load(&h->users);
}

static struct ods_handle *g_h;
static opends_handle_t g_fh;

static long nested_users;
static void nested_call(void)
{
	ODS_ENTER_OR("nested", (void)0);
	struct ods_handle *h = ods_handle_lookup(g_fh);
	nested_users = h ? users_of(h) : -1;
}

static opends_error_t deregister_inside_call(opends_handle_t fh, long *users_before)
{
	ODS_ENTER("test call");
	struct ods_handle *h = ods_handle_lookup(fh);
	*users_before = h ? users_of(h) : -1;
	return opends_handle_deregister(fh);
}

static long in_call_users, after_nested_users;
static void lookup_in_call(void)
{
	ODS_ENTER_OR("test call", (void)0);
	struct ods_handle *h = ods_handle_lookup(g_fh);
	(void)ods_handle_lookup(g_fh); /* the same handle again: held once */
	in_call_users = users_of(h);
	nested_call();
	after_nested_users = users_of(h);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static atomic_int holder_state; /* 1 holding, 2 let go */
static void *holder(void *arg)
{
	(void)arg;
	ODS_ENTER_OR("holder", NULL);
	(void)ods_handle_lookup(g_fh);
	atomic_store(&holder_state, 1);
	sleep_ms(100);
	atomic_store(&holder_state, 2);
	return NULL;
}

int main(int argc, char **argv)
{
	t_args(argc, argv);
	t_watchdog(60);
	char path[PATH_MAX];
	t_path(path, sizeof(path), "registry_calls.bin");
	uint8_t *oracle;
	int fd = t_hot_file(path, 64 * T_KiB, hashpat, &oracle);
	t_driver_open();

	t_phase = "backend_err";
	/* a synchronous read's failure: recorded, never taken (it returns a
	 * number) */
	ods_fail_backend(OPENDS_DEVICE_DRIVER_ERROR, FAKE_RESULT, "test: a copy failed in a synchronous read");
	opends_error_t e = call_failing_without_record();
	CHECKF(e.err == OPENDS_DEVICE_DRIVER_ERROR && e.backend_err == 0,
	       "a later failure with the same code and no record: err %d backend_err %d, want %d and 0 (the earlier "
	       "read's code reported by another call)",
	       e.err, e.backend_err, OPENDS_DEVICE_DRIVER_ERROR);
	e = call_failing_with_record();
	CHECKF(e.err == OPENDS_DEVICE_DRIVER_ERROR && e.backend_err == FAKE_RESULT,
	       "a failure with its own code: err %d backend_err %d, want %d and %d", e.err, e.backend_err,
	       OPENDS_DEVICE_DRIVER_ERROR, FAKE_RESULT);
	e = call_failing_without_record();
	CHECKF(e.backend_err == 0, "the next failure without a record: backend_err %d, want 0", e.backend_err);

	t_phase = "holds";
	g_fh = t_register(fd);
	g_h = ods_handle_lookup(g_fh); /* no call on this thread: nothing held */
	CHECK(g_h != NULL);
	CHECKF(users_of(g_h) == 0, "a look-up outside a call holds the handle (users %ld)", users_of(g_h));
	lookup_in_call();
	CHECKF(in_call_users == 1, "inside a call, two look-ups: users %ld, want 1", in_call_users);
	CHECKF(nested_users == 1 && after_nested_users == 1,
	       "a nested call's look-up of the handle its outer call holds: users %ld inside it, %ld after it, want 1 "
	       "and 1", nested_users,
	       after_nested_users);
	CHECKF(users_of(g_h) == 0, "after the call returned: users %ld, want 0", users_of(g_h));

	long before = -1;
	e = deregister_inside_call(g_fh, &before);
	CHECKF(before == 1 && e.err == OPENDS_INVALID_VALUE,
	       "deregister of a handle this thread's call holds: %s (users %ld), want OPENDS_INVALID_VALUE",
	       t_errname(e.err), before);
	CHECKF(ods_handle_lookup(g_fh) == g_h && users_of(g_h) == 0, "the refused handle is gone or still held");

	pthread_t th;
	CHECK(pthread_create(&th, NULL, holder, NULL) == 0);
	while (atomic_load(&holder_state) == 0)
		sleep_ms(1);
	OK(opends_handle_deregister(g_fh));
	CHECKF(atomic_load(&holder_state) == 2, "deregister returned while another thread's call held the handle");
	CHECK(pthread_join(th, NULL) == 0);
	EXPECT_SSZ(opends_sync_read(g_fh, oracle, 4096, 0, 0), -(ssize_t)OPENDS_HANDLE_NOT_REGISTERED);

	OK(opends_driver_close());
	close(fd);
	unlink(path);
	t_rm_dir();
	free(oracle);
	if (!t_failures)
		printf("backend_err: a call reports only its own failure's code; holds: one per handle per call, given "
		       "back when the call returns, deregister refuses its own and waits for others'\n");
	return t_failures ? 1 : 0;
}
