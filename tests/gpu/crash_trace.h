/*
 * A GPU test that crashes on the GPU machine must say where: stdout line
 * buffered (a killed test loses a full buffer), and on SIGSEGV/SIGBUS/SIGFPE
 * the phase and a backtrace on stderr (executables linked with -rdynamic
 * name their own functions; the library's hidden ones show as
 * libopends.so.0(+offset), for addr2line -f -e build-gpu/src/libopends.so.0),
 * then the signal's default action, so the exit status stays a crash.
 * Include after common.h; call t_crash_trace() after t_watchdog() in main
 * (it replaces common.h's t_crash_fire, which names the phase only).
 */
#ifndef ODS_TEST_CRASH_TRACE_H
#define ODS_TEST_CRASH_TRACE_H

#include <execinfo.h>
#include <signal.h>

static void t_crash_trace_fire(int sig)
{
	static const char m[] = "\nFAIL: crashed by signal ";
	char num[4] = { (char)('0' + sig / 10 % 10), (char)('0' + sig % 10), '\n', 0 };
	const char *p = t_phase;
	void *frames[64];
	int n = backtrace(frames, 64);
	if (write(2, m, sizeof m - 1) < 0 || write(2, num, 3) < 0 || write(2, "phase: ", 7) < 0 ||
	    write(2, p, strlen(p)) < 0 || write(2, "\n", 1) < 0)
		_exit(3);
	backtrace_symbols_fd(frames, n, 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

static inline void t_crash_trace(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	void *warm[1];
	backtrace(warm, 1); /* loads libgcc's unwinder now, not in the handler */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = t_crash_trace_fire;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGFPE, &sa, NULL);
}

#endif
