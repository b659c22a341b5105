#!/bin/sh
# Consumer check: install the project into a private DESTDIR, then build a C
# and a C++ program against it using only pkg-config, the same C program
# with CMake (find_package(opends), opends::opends) and with Meson
# (dependency('opends')), and run each. Catches a missing/incorrect
# opends.pc or opendsConfig.cmake, a header that does not compile as strict
# C11 or as C++, and symbols that are not exported. (README's "Install"
# section shows the same three ways.)
#
# usage: run.sh <builddir> <prep-program> [<b_sanitize> [<compiler id>]]
# exit 0 pass, 77 skip (no pkg-config / C++ compiler), else fail.
set -eu

builddir=$1
prep=$2
san=${3:-none}
ccid=${4:-gcc}

case $ccid in
clang) CC=${CC:-clang}; CXX=${CXX:-clang++} ;;
*) CC=${CC:-cc}; CXX=${CXX:-c++} ;;
esac
here=$(cd "$(dirname "$0")" && pwd)

command -v pkg-config >/dev/null 2>&1 || { echo "SKIP: no pkg-config"; exit 77; }
command -v meson >/dev/null 2>&1 || { echo "SKIP: no meson in PATH"; exit 77; }
command -v "$CC" >/dev/null 2>&1 || { echo "SKIP: no C compiler $CC"; exit 77; }
have_cxx=1
command -v "$CXX" >/dev/null 2>&1 || have_cxx=0

# unique per run: the build dir may be installed by others at the same time
tmp=$(mktemp -d "${TMPDIR:-/tmp}/opends-consumer-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

meson install -C "$builddir" --no-rebuild --quiet --destdir "$tmp/dest" >"$tmp/install.log" 2>&1 || {
	cat "$tmp/install.log"; echo "FAIL: meson install"; exit 1; }

pc=$(find "$tmp/dest" -name opends.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no opends.pc installed"; find "$tmp/dest"; exit 1; }
hdr=$(find "$tmp/dest" -name opends.h | head -n 1)
[ -n "$hdr" ] || { echo "FAIL: no opends.h installed"; exit 1; }
lib=$(find "$tmp/dest" -name 'libopends.so*' | head -n 1)
[ -n "$lib" ] || { echo "FAIL: no libopends.so installed"; exit 1; }
libdir=$(dirname "$lib")

# the .pc names the final prefix; the sysroot maps it into DESTDIR
PKG_CONFIG_PATH=$(dirname "$pc")
PKG_CONFIG_SYSROOT_DIR=$tmp/dest
PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1
PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_ALLOW_SYSTEM_CFLAGS PKG_CONFIG_ALLOW_SYSTEM_LIBS
pkg-config --exists opends || { echo "FAIL: pkg-config does not find opends"; cat "$pc"; exit 1; }
cflags=$(pkg-config --cflags opends)
libs=$(pkg-config --libs opends)
echo "pkg-config: cflags [$cflags] libs [$libs] version $(pkg-config --modversion opends)"

# only opends_* is exported
if command -v nm >/dev/null 2>&1; then
	extra=$(nm -D --defined-only "$lib" | awk '$2 != "A" && $3 !~ /^opends_/ {print $3}')
	[ -z "$extra" ] || { echo "FAIL: $lib exports symbols outside opends_*:"; echo "$extra"; exit 1; }
fi

sanflags=
[ "$san" = none ] || sanflags="-fsanitize=$san"

"$prep" "$tmp/data" >/dev/null

# strict C11 plus POSIX: the header must not need GNU extensions
# shellcheck disable=SC2086
"$CC" -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -pedantic $sanflags \
	"$here/consumer.c" -o "$tmp/consumer_c" $cflags $libs
OPENDS_ACCEL=host LD_LIBRARY_PATH=$libdir "$tmp/consumer_c" "$tmp/data/pat16.bin"

# the installed tools run before ldconfig: a RUNPATH relative to themselves
info=$(find "$tmp/dest" -path '*/bin/opends-info' | head -n 1)
if [ -n "$info" ]; then
	env -u LD_LIBRARY_PATH "$info" --version | grep -q '^opends-info (OpenDS)' ||
		{ echo "FAIL: the installed opends-info does not find its library"; exit 1; }
	for page in man1/opends-info.1 man1/opends-bench.1 man3/opends.3; do
		find "$tmp/dest" -path "*/man/$page" | grep -q . || { echo "FAIL: man page $page not installed"; exit 1; }
	done
fi

# CMake: the package beside the .pc, found through CMAKE_PREFIX_PATH
if command -v cmake >/dev/null 2>&1; then
	cfg=$(find "$tmp/dest" -name opendsConfig.cmake | head -n 1)
	[ -n "$cfg" ] || { echo "FAIL: no opendsConfig.cmake installed"; exit 1; }
	# installed beside the .pc: <libdir>/cmake/opends and <libdir>/pkgconfig
	[ "$(dirname "$(dirname "$cfg")")" = "$(dirname "$(dirname "$pc")")/cmake" ] ||
		{ echo "FAIL: opendsConfig.cmake at $cfg is not beside $pc"; exit 1; }
	cmake -S "$here/cmake" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/dest$(pkg-config --variable=prefix opends | sed "s#^$tmp/dest##")" \
		-DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="-Wall -Werror $sanflags" -DCMAKE_EXE_LINKER_FLAGS="$sanflags" \
		>"$tmp/cmake.log" 2>&1 && cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1 ||
		{ cat "$tmp/cmake.log"; echo "FAIL: CMake consumer"; exit 1; }
	OPENDS_ACCEL=host LD_LIBRARY_PATH=$libdir "$tmp/cmake/consumer_cmake" "$tmp/data/pat16.bin"
else
	echo "note: no cmake: the CMake consumer is not built"
fi

# Meson: dependency('opends') through the same pkg-config environment
meson_san=
[ "$san" = none ] || meson_san="-Db_sanitize=$san -Db_lundef=false"
# shellcheck disable=SC2086
CC=$CC meson setup "$tmp/meson" "$here/meson" $meson_san >"$tmp/meson.log" 2>&1 &&
	ninja -C "$tmp/meson" >>"$tmp/meson.log" 2>&1 ||
	{ cat "$tmp/meson.log"; echo "FAIL: Meson consumer"; exit 1; }
OPENDS_ACCEL=host LD_LIBRARY_PATH=$libdir "$tmp/meson/consumer_meson" "$tmp/data/pat16.bin"

if [ $have_cxx = 1 ]; then
	# shellcheck disable=SC2086
	"$CXX" -std=c++11 -Wall -Wextra -Werror $sanflags \
		"$here/consumer.cpp" -o "$tmp/consumer_cpp" $cflags $libs
	OPENDS_ACCEL=host LD_LIBRARY_PATH=$libdir "$tmp/consumer_cpp" "$tmp/data/pat16.bin"
else
	echo "SKIP: no C++ compiler ($CXX); C consumer passed"
	exit 77
fi
echo "consumer OK"
