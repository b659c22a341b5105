#!/bin/bash
# ThreadSanitizer run of the drop-in's threaded tests: the statistics'
# level and switch under concurrent changes (test_cufile_dropin_stats) and
# cuFileDriverClose under threads doing I/O (test_cufile_dropin_threads),
# on each backend built, host memory.
#   tests/dropin/tsan.sh [SOURCE_ROOT [BUILD_DIR]] [-- MESON_SETUP_ARGS...]
# Configures BUILD_DIR (default build-tsan, the one tests/reliability/tsan.sh
# uses) with -Db_sanitize=thread if it is not configured, builds the
# drop-in and the two tests only. Exit 0 pass, 77 when ThreadSanitizer
# cannot run here, anything else fail.
set -u
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${2:-$src/build-tsan}
shift $(( $# < 2 ? $# : 2 ))
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
# newer kernels randomise mmap more than older TSan runtimes accept
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
lib=$build/src/dropin/cufile/libcufile.so.0
ninja -C "$build" src/dropin/cufile/libcufile.so.0 tests/dropin/test_cufile_dropin_stats \
	tests/dropin/test_cufile_dropin_threads >"$probe/build.log" 2>&1 ||
	{ tail -30 "$probe/build.log"; echo "FAIL: build"; exit 1; }

export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1 exitcode=66}
rc=0
for b in ref uring; do
	for t in "test_cufile_dropin_stats 300" "test_cufile_dropin_threads 1"; do
		# shellcheck disable=SC2086
		OPENDS_BACKEND=$b OPENDS_ACCEL=host "${run[@]}" "$build/tests/dropin/${t%% *}" --lib="$lib" ${t#* } >"$probe/out" 2>&1
		r=$?
		case $r in
		0) echo "ok   tsan ${t%% *} $b" ;;
		77) echo "skip tsan ${t%% *} $b (backend not here)" ;;
		*) echo "FAIL tsan ${t%% *} $b: exit $r"; tail -40 "$probe/out"; rc=1 ;;
		esac
	done
done
exit $rc
