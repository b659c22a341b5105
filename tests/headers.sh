#!/bin/sh
# The public headers: <opends.h> and each family header under opends/
# compile on their own as strict C11 and as C++; every function the library
# exports is declared OPENDS_API in them and every OPENDS_API declaration is
# exported (a call added to the .map-exported library without a declaration,
# or declared but never built, fails here); every family header is included
# by opends.h and installed (listed in src/meson.build's install_headers).
# usage: headers.sh <include dir> <libopends.so> [<compiler id: gcc, clang>]
# ($CC and $CXX, when set, name the compilers)
# exit 0 pass, 77 skip (no nm), else fail
set -u
inc=$1 lib=$2
case ${3:-gcc} in
clang) CC=${CC:-clang}; CXX=${CXX:-clang++} ;;
*) CC=${CC:-cc}; CXX=${CXX:-c++} ;;
esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/opends-headers-XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fails=0
have_cxx=1
command -v "$CXX" >/dev/null 2>&1 || have_cxx=0
for h in "$inc"/opends.h "$inc"/opends/*.h; do
	rel=${h#"$inc"/}
	printf '#include <%s>\n#include <%s>\nint main(void) { return 0; }\n' "$rel" "$rel" >"$tmp/t.c"
	"$CC" -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -pedantic -I"$inc" -c "$tmp/t.c" \
		-o "$tmp/t.o" 2>"$tmp/err" || { echo "FAIL: $rel alone as C11:"; cat "$tmp/err"; fails=$((fails + 1)); }
	if [ $have_cxx = 1 ]; then
		cp "$tmp/t.c" "$tmp/t.cpp"
		"$CXX" -std=c++11 -Wall -Wextra -Werror -pedantic -I"$inc" -c "$tmp/t.cpp" -o "$tmp/t.o" 2>"$tmp/err" ||
			{ echo "FAIL: $rel alone as C++:"; cat "$tmp/err"; fails=$((fails + 1)); }
	fi
done
echo "ok: each header compiles alone (C11$([ $have_cxx = 1 ] && echo ', C++'))"

mesonfile=$inc/../src/meson.build
for h in "$inc"/opends/*.h; do
	name=${h##*/}
	grep -q "^#include \"opends/$name\"" "$inc/opends.h" ||
		{ echo "FAIL: opends.h does not include opends/$name"; fails=$((fails + 1)); }
	[ ! -f "$mesonfile" ] || grep -q "include/opends/$name'" "$mesonfile" ||
		{ echo "FAIL: src/meson.build does not install opends/$name"; fails=$((fails + 1)); }
done
[ "$fails" -eq 0 ] && echo "ok: every family header is included by opends.h and installed"

command -v nm >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }
nm -D --defined-only "$lib" | awk '$2 == "T" {sub(/@.*/, "", $3); print $3}' | sort -u >"$tmp/exported"
# a declaration: OPENDS_API <type> [*]name(
cat "$inc"/opends.h "$inc"/opends/*.h | tr '\n' ' ' |
	grep -o 'OPENDS_API [^;(]*(' | sed 's/($//; s/.*[ *]//' | grep '^opends_' | sort -u >"$tmp/declared"
[ "$(wc -l <"$tmp/exported")" -gt 30 ] || { echo "FAIL: only $(wc -l <"$tmp/exported") functions exported by $lib"; exit 1; }
missing=$(comm -23 "$tmp/exported" "$tmp/declared")
[ -z "$missing" ] || { echo "FAIL: exported but declared in no public header:" $missing; fails=$((fails + 1)); }
unbuilt=$(comm -13 "$tmp/exported" "$tmp/declared")
[ -z "$unbuilt" ] || { echo "FAIL: declared OPENDS_API but not exported:" $unbuilt; fails=$((fails + 1)); }
[ -n "$missing$unbuilt" ] || echo "ok: $(wc -l <"$tmp/declared") OPENDS_API functions, each exported; $(wc -l <"$tmp/exported") exported, each declared"
[ "$fails" -eq 0 ] || exit 1
echo "headers OK"
