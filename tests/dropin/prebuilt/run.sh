#!/bin/sh
# Prebuilt cuFile programs on the drop-in (issue 21): build a C and a C++
# program (and cufile_conform.c, the doc's conventions) the way users do - against NVIDIA's cufile.h, linked against
# NVIDIA's libcufile.so.0 - then run them unchanged on OpenDS's drop-in with
# the host accelerator. Also checks that the drop-in exports every function
# NVIDIA's cufile.h declares and NEEDs libstdc++.so.6 (NVIDIA's does, and
# exports some of its symbols to the programs linked against it).
#
# usage: run.sh <builddir> <folder of NVIDIA's cufile.h> <NVIDIA's libcufile.so.0>
#               <folder of a cuda.h> [<b_sanitize> [<expected answers>]]
# Exit 77 (skip) without NVIDIA's library or a C++ compiler.
set -eu
build=$(cd "$1" && pwd)
nv_inc=$2
nv_lib=$3
cuda_inc=$4
san=${5:-none}
here=$(cd "$(dirname "$0")" && pwd)
expected=${6:-$here/expected.txt}
dropin=$build/src/dropin/cufile/libcufile.so.0
CC=${CC:-cc}
CXX=${CXX:-c++}

[ -f "$nv_inc/cufile.h" ] && [ -f "$nv_lib" ] || { echo "SKIP: no NVIDIA cufile.h/libcufile.so.0 (the nvidia-cufile wheel, see .ci/run)"; exit 77; }
command -v "$CXX" >/dev/null 2>&1 || { echo "SKIP: no C++ compiler ($CXX)"; exit 77; }
[ -f "$dropin" ] || { echo "FAIL: no drop-in at $dropin"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# 1. every function NVIDIA's header declares is exported
decl=$(grep -oE '^[A-Za-z_][A-Za-z0-9_ *]*[ *](cuFile[A-Za-z0-9_]*)[ ]*\(' "$nv_inc/cufile.h" |
	grep -oE 'cuFile[A-Za-z0-9_]*' | sort -u)
have=$(nm -D --defined-only "$dropin" | awk '{print $3}' | sort -u)
missing=$(printf '%s\n' "$decl" | while read -r f; do
	printf '%s\n' "$have" | grep -qx "$f" || echo "$f"; done)
n=$(printf '%s\n' "$decl" | grep -c .)
if [ -n "$missing" ]; then
	echo "FAIL: the drop-in does not export what NVIDIA's cufile.h declares:"; echo "$missing"; fail=1
else
	echo "ok: the drop-in exports all $n functions NVIDIA's cufile.h declares"
fi

# 2. libstdc++ for the C++ programs linked against NVIDIA's library
if readelf -d "$dropin" | grep -q 'NEEDED.*\[libstdc++\.so\.6\]'; then
	echo "ok: the drop-in NEEDs libstdc++.so.6, as NVIDIA's does"
else
	echo "FAIL: the drop-in does not NEED libstdc++.so.6"; fail=1
fi

# 3. build as users do
sanflags=
[ "$san" = none ] || sanflags="-fsanitize=$san"
nv_dir=$(dirname "$nv_lib")
# shellcheck disable=SC2086
"$CC" -std=c11 -Wall -Wextra -O1 $sanflags -I"$nv_inc" -I"$cuda_inc" "$here/cufile_prog.c" \
	-o "$tmp/cufile_prog" -L"$nv_dir" -l:libcufile.so.0 -ldl
# shellcheck disable=SC2086
"$CXX" -std=c++17 -Wall -Wextra -O1 $sanflags -I"$nv_inc" -I"$cuda_inc" "$here/cufile_prog.cpp" \
	-o "$tmp/cufile_prog_cxx" -Wl,--as-needed -L"$nv_dir" -l:libcufile.so.0
# shellcheck disable=SC2086
"$CC" -std=c11 -Wall -Wextra -O1 $sanflags -I"$nv_inc" -I"$cuda_inc" "$here/cufile_conform.c" \
	-o "$tmp/cufile_conform" -L"$nv_dir" -l:libcufile.so.0 -ldl
echo "built against $nv_lib; the C++ program NEEDs:" \
	$(readelf -d "$tmp/cufile_prog_cxx" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')

# 4. run on the drop-in: LD_LIBRARY_PATH finds it first by its SONAME
export OPENDS_ACCEL=host ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
libpath=$build/src/dropin/cufile:$build/src
mkdir "$tmp/data"
if LD_LIBRARY_PATH=$libpath timeout 120 "$tmp/cufile_prog" "$tmp/data" >"$tmp/c.out" 2>&1; then
	grep '^PASS' "$tmp/c.out"
	if grep '^= ' "$tmp/c.out" | diff -u "$expected" - >"$tmp/diff"; then
		echo "ok: the C program's answers are the expected ones ($(grep -c '^= ' "$tmp/c.out") lines)"
	else
		echo "FAIL: answers differ from $expected:"; cat "$tmp/diff"; fail=1
	fi
else
	echo "FAIL: the C program on the drop-in:"; cat "$tmp/c.out"; fail=1
fi
# the doc's conventions for the calls programs use most (cufile_conform.c)
if OPENDS_CHUNK_SIZE=2m LD_LIBRARY_PATH=$libpath timeout 120 "$tmp/cufile_conform" "$tmp/data" >"$tmp/conf.out" 2>&1; then
	grep '^PASS' "$tmp/conf.out"
else
	echo "FAIL: cufile_conform on the drop-in:"; cat "$tmp/conf.out"; fail=1
fi
if LD_LIBRARY_PATH=$libpath timeout 120 "$tmp/cufile_prog_cxx" "$tmp/data" >"$tmp/cxx.out" 2>&1; then
	grep '^PASS' "$tmp/cxx.out"
else
	echo "FAIL: the C++ program on the drop-in (LD_LIBRARY_PATH):"; cat "$tmp/cxx.out"; fail=1
fi

# 5. LD_PRELOAD wins even when NVIDIA's library is first on the search
# path (pip-installed programs load theirs by path): NVIDIA's is then not
# loaded at all, its SONAME being taken (without a GPU it would hang).
# (a sanitized build: its runtimes must come first)
preload=$dropin
case $san in
*undefined*) preload="$($CC -print-file-name=libubsan.so) $preload" ;;
esac
case $san in
*address*) preload="$($CC -print-file-name=libasan.so) $preload" ;;
esac
if LD_PRELOAD=$preload LD_LIBRARY_PATH=$nv_dir:$build/src timeout 120 "$tmp/cufile_prog_cxx" "$tmp/data" \
	>"$tmp/pre.out" 2>&1; then
	echo "ok: LD_PRELOAD=<drop-in> with NVIDIA's folder first on LD_LIBRARY_PATH: $(grep '^PASS' "$tmp/pre.out")"
else
	echo "FAIL: the C++ program with LD_PRELOAD:"; cat "$tmp/pre.out"; fail=1
fi
exit $fail
