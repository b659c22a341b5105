#!/bin/sh
# One shaped cuFile program of this folder (prog.h) on the drop-in: built
# as users build it - against NVIDIA's cufile.h, linked against NVIDIA's
# libcufile.so.0 (a .cpp one with -Wl,--as-needed) - then run unchanged on
# OpenDS's drop-in by LD_LIBRARY_PATH, host memory, OPENDS_ACCEL as the
# environment says (host by default). It must pass (every byte checked)
# and its "= name value" answers must equal <program>.expected beside it.
#
# usage: run1.sh <builddir> <folder of NVIDIA's cufile.h> <NVIDIA's libcufile.so.0>
#                <folder of a cuda.h> <b_sanitize> <program source>
# Exit 77 (skip) without NVIDIA's header and library or, for C++, a compiler.
set -eu
build=$(cd "$1" && pwd)
nv_inc=$2
nv_lib=$3
cuda_inc=$4
san=$5
src=$6
name=$(basename "$src" | sed 's/\.[^.]*$//')
expected=${src%.*}.expected
dropin=$build/src/dropin/cufile/libcufile.so.0
CC=${CC:-cc}
CXX=${CXX:-c++}

[ -f "$nv_inc/cufile.h" ] && [ -f "$nv_lib" ] || { echo "SKIP: no NVIDIA cufile.h/libcufile.so.0 (the nvidia-cufile wheel, see .ci/run)"; exit 77; }
[ -f "$dropin" ] || { echo "FAIL: no drop-in at $dropin"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sanflags=
[ "$san" = none ] || sanflags="-fsanitize=$san"
nv_dir=$(dirname "$nv_lib")
case $src in
*.cpp)
	command -v "$CXX" >/dev/null 2>&1 || { echo "SKIP: no C++ compiler ($CXX)"; exit 77; }
	# shellcheck disable=SC2086
	"$CXX" -std=c++17 -Wall -Wextra -Werror -O2 -D_FORTIFY_SOURCE=2 $sanflags -I"$nv_inc" -I"$cuda_inc" "$src" -o "$tmp/$name" \
		-Wl,--as-needed -L"$nv_dir" -l:libcufile.so.0 -ldl -pthread ;;
*)
	# shellcheck disable=SC2086
	"$CC" -std=c11 -Wall -Wextra -Werror -O2 -D_FORTIFY_SOURCE=2 $sanflags -I"$nv_inc" -I"$cuda_inc" "$src" -o "$tmp/$name" \
		-L"$nv_dir" -l:libcufile.so.0 -ldl ;;
esac
mkdir "$tmp/data"
export OPENDS_ACCEL=${OPENDS_ACCEL:-host} ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
rc=0
LD_LIBRARY_PATH=$build/src/dropin/cufile:$build/src timeout 240 "$tmp/$name" "$tmp/data" >"$tmp/out" 2>&1 || rc=$?
if [ "$rc" = 77 ]; then
	cat "$tmp/out"
	exit 77
fi
if [ "$rc" != 0 ]; then
	echo "FAIL: $name on the drop-in (OPENDS_ACCEL=$OPENDS_ACCEL), rc $rc:"
	cat "$tmp/out"
	exit 1
fi
grep '^PASS' "$tmp/out"
if grep '^= ' "$tmp/out" | diff -u "$expected" - >"$tmp/diff"; then
	echo "ok: $(grep -c '^= ' "$tmp/out") answers as $(basename "$expected")"
else
	echo "FAIL: answers differ from $expected:"
	cat "$tmp/diff"
	exit 1
fi
