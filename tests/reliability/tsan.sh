#!/bin/bash
# ThreadSanitizer run of the stress test, the race cases of test_races, the
# source cancel test, close during reads (test_close race) and a second of the differential test:
#   tests/reliability/tsan.sh [SOURCE_ROOT [BUILD_DIR [GROUPS]]] [-- MESON_SETUP_ARGS...]
# Configures BUILD_DIR (default: build-tsan) with -Db_sanitize=thread, builds
# only the library and test_stress, and runs it briefly on every backend,
# host and simulated device memory. Exit 0 pass, 77 when ThreadSanitizer
# cannot run here (no compiler support, or a kernel whose address-space
# layout it refuses), anything else fail. CC picks the compiler (gcc or
# clang). 100 groups of 16 threads per backend and memory kind (every
# family: about 800 groups each; 300 before, which took over 4 minutes on a
# loaded machine). The runs take about 25 s on 2 cores, plus building.
set -u
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${2:-$src/build-tsan}
groups=${3:-100}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
cc=${CC:-cc}

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
cat >"$probe/t.c" <<'C'
#include <pthread.h>
static int x;
static void *f(void *a) { (void)a; __atomic_fetch_add(&x, 1, __ATOMIC_SEQ_CST); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); pthread_join(t, 0); return 0; }
C
if ! $cc -fsanitize=thread -g -O1 "$probe/t.c" -o "$probe/t" -pthread >"$probe/log" 2>&1; then
	echo "SKIP: $cc cannot build with -fsanitize=thread: $(head -3 "$probe/log")"
	exit 77
fi
# Newer kernels randomise mmap more than older TSan runtimes accept; run
# without address-space randomisation then (setarch -R), else skip.
run=()
if ! "$probe/t" >"$probe/log" 2>&1; then
	if setarch "$(uname -m)" -R "$probe/t" >"$probe/log" 2>&1; then
		run=(setarch "$(uname -m)" -R)
	else
		echo "SKIP: ThreadSanitizer programs cannot run here: $(head -3 "$probe/log")"
		exit 77
	fi
fi

if [ ! -f "$build/build.ninja" ]; then
	CC=$cc meson setup "$build" "$src" -Db_sanitize=thread -Db_lundef=false "$@" >"$probe/setup.log" 2>&1 ||
		{ cat "$probe/setup.log"; echo "FAIL: meson setup"; exit 1; }
fi
ninja -C "$build" tests/reliability/test_stress tests/reliability/test_races tests/reliability/test_diff \
	tests/reliability/test_close tests/reliability/test_reuse tests/reliability/test_diffmt tests/reliability/test_diffargs tests/sources/test_source_cancel tests/test_config_race >"$probe/build.log" 2>&1 ||
	{ tail -30 "$probe/build.log"; echo "FAIL: build"; exit 1; }

export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1 exitcode=66}
rc=0
ran=0
for b in ref uring gds; do
	for accel in host hostdev; do
		OPENDS_BACKEND=$b OPENDS_ACCEL=$accel "${run[@]}" "$build/tests/reliability/test_stress" "$groups" 16 170
		r=$?
		case $r in
		0) ran=$((ran + 1)); echo "ok   tsan $b/$accel" ;;
		77) echo "skip tsan $b/$accel (backend not here)" ;;
		*) echo "FAIL tsan $b/$accel: exit $r"; rc=1 ;;
		esac
	done
	# a source's completions on its own threads, a batch cancelled while
	# they are held (the direct requests' reaping); 1 s of the differential
	# test (sources answering from threads, every family), and 1 s of its
	# threaded form (large writes, read-ahead's kept buffers, handles
	# re-registered while other threads read)
	for accel in host hostdev; do
		for t in sources/test_source_cancel "reliability/test_diff 100000 1" "reliability/test_diffmt 1" \
			"reliability/test_diffargs 100000 1"; do
			OPENDS_BACKEND=$b OPENDS_ACCEL=$accel "${run[@]}" $build/tests/$t >/dev/null
			r=$?
			case $r in
			0) ran=$((ran + 1)); echo "ok   tsan ${t%% *} $b/$accel" ;;
			77) ;;
			*) echo "FAIL tsan ${t%% *} $b/$accel: exit $r"; rc=1 ;;
			esac
		done
	done
	# opends_driver_get_setting on a thread while main closes and reopens
	# with other settings (config.c's strings freed under a reader)
	OPENDS_BACKEND=$b OPENDS_ACCEL=host "${run[@]}" "$build/tests/test_config_race" >/dev/null
	r=$?
	case $r in
	0) ran=$((ran + 1)); echo "ok   tsan config_race $b" ;;
	77) ;;
	*) echo "FAIL tsan config_race $b: exit $r"; rc=1 ;;
	esac
	# opends_driver_close while threads read through every family
	OPENDS_BACKEND=$b OPENDS_ACCEL=host "${run[@]}" "$build/tests/reliability/test_close" race >/dev/null
	r=$?
	case $r in
	0) ran=$((ran + 1)); echo "ok   tsan close race $b" ;;
	77) ;;
	*) echo "FAIL tsan close race $b: exit $r"; rc=1 ;;
	esac
	# futures not awaited on source handles (threaded, delayed) and an fd
	# when the driver closes
	OPENDS_BACKEND=$b OPENDS_ACCEL=host "${run[@]}" "$build/tests/reliability/test_close" unawaited >/dev/null
	r=$?
	case $r in
	0) ran=$((ran + 1)); echo "ok   tsan close unawaited $b" ;;
	77) ;;
	*) echo "FAIL tsan close unawaited $b: exit $r"; rc=1 ;;
	esac
	# deregistration under calls on the handle, stale handles whose struct
	# serves a new registration (the hold of registry.c)
	for what in held self cross double reuse reuse_stream; do
		accel=host
		[ $what = reuse_stream ] && accel=hostdev # the library's streams
		OPENDS_BACKEND=$b OPENDS_ACCEL=$accel "${run[@]}" "$build/tests/reliability/test_reuse" $what 1 >/dev/null
		r=$?
		case $r in
		0) ran=$((ran + 1)); echo "ok   tsan reuse $what $b" ;;
		77) ;;
		*) echo "FAIL tsan reuse $what $b: exit $r"; rc=1 ;;
		esac
	done
	# the races of issue 15 (batch submit/collect/cancel, registry)
	for what in batch_submit batch_collect buf_register; do
		OPENDS_BACKEND=$b OPENDS_ACCEL=host "${run[@]}" "$build/tests/reliability/test_races" $what >/dev/null
		r=$?
		case $r in
		0) ran=$((ran + 1)); echo "ok   tsan races $what $b" ;;
		77) ;;
		*) echo "FAIL tsan races $what $b: exit $r"; rc=1 ;;
		esac
	done
done
[ $rc -eq 0 ] && [ $ran -eq 0 ] && { echo "SKIP: no backend ran"; exit 77; }
exit $rc
