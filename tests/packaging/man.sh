#!/bin/sh
# The man pages render without warnings, each tool's page names every
# option its --help prints (so a new option without a line in the page fails),
# and opends(3) names every public call (OPENDS_API in the headers).
# usage: man.sh <packaging/man dir> <opends-info> <opends-bench> [<include dir>]
# exit 0 pass, 77 skip (no groff), else fail
set -u
dir=$1 info=$2 bench=$3 inc=${4:-}
command -v groff >/dev/null 2>&1 || { echo "SKIP: no groff"; exit 77; }
fails=0
for page in "$dir"/opends.3 "$dir"/opends-info.1 "$dir"/opends-bench.1; do
	out=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$page" 2>&1)
	if [ -n "$out" ]; then
		echo "FAIL: $page: $out"; fails=$((fails + 1))
	else
		echo "ok: $page renders"
	fi
done
for pair in "$info:opends-info.1" "$bench:opends-bench.1"; do
	tool=${pair%%:*} page=$dir/${pair#*:}
	opts=$("$tool" --help 2>&1 | grep -o -- '--[a-z][a-z-]*' | sort -u)
	[ -n "$opts" ] || { echo "FAIL: $tool --help lists no options"; fails=$((fails + 1)); }
	for o in $opts; do
		esc=$(printf '%s' "$o" | sed 's/-/\\\\-/g')
		grep -q -- "$esc" "$page" || { echo "FAIL: $page does not describe $o"; fails=$((fails + 1)); }
	done
	echo "ok: $page names the options of $(basename "$tool") --help: $(echo $opts)"
done
if [ -n "$inc" ]; then
	calls=$(cat "$inc"/opends.h "$inc"/opends/*.h | tr '\n' ' ' | grep -o 'OPENDS_API [^;(]*(' |
		sed 's/($//; s/.*[ *]//' | grep '^opends_' | sort -u)
	[ -n "$calls" ] || { echo "FAIL: no OPENDS_API calls found under $inc"; fails=$((fails + 1)); }
	n=0
	for c in $calls; do
		grep -q -- "\(^\|[^a-z_]\)$c\([^a-z0-9_]\|$\)" "$dir/opends.3" || { echo "FAIL: opends.3 does not name $c"; fails=$((fails + 1)); }
		n=$((n + 1))
	done
	echo "ok: opends.3 checked for the $n public calls"
fi
[ "$fails" -eq 0 ] || exit 1
echo "man pages OK"
