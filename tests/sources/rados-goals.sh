#!/usr/bin/env bash
# The issue-20 goals, measured side by side in alternating rounds on a
# cluster (tests/sources/ceph-cluster.sh start): the same objects, in the
# same order, read by
#   rados bench seq -t 16, plain rados_aio_read (16 in flight), and OpenDS
#   (rados:// handles, 16 async reads in flight) into host memory
#   (OPENDS_ACCEL=host) and into simulated device memory (hostdev);
# then 1000 small objects (4-256 KiB) by plain aio and by OpenDS's batch
# API, 32 in flight. Prints each round (with the load average) and, per
# goal, the ratio of the medians and the median of the per-round ratios
# (each round's legs run back to back, so a round's ratio is robust to the
# cluster's drift between rounds). The legs' order rotates every round, so
# no leg always runs first or right after the same one.
#   tests/sources/rados-goals.sh CONF [ROUNDS] [BUILD_DIR]
set -eu
CONF=$1
ROUNDS=${2:-7}
B=${3:-build}
POOL=${OPENDS_TEST_CEPH_POOL:-opends}
G=$B/tests/sources/rados_goals
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
R() { rados -c "$CONF" -p "$POOL" "$@"; }

echo "== writing: rados bench 5 write -t 16 (4 MiB objects), 1000 small objects"
R bench 5 write -t 16 --no-cleanup >"$W/write.log"
# in rados bench seq's order (object0, object1, ...): written in that order,
# they lie in that order on the OSD's disk; `rados ls` lists them by hash,
# which made every leg but bench read them in random order (before 2026-11-30)
R ls | grep '^benchmark_data' | awk -F'object' '{print $NF, $0}' | sort -n | cut -d' ' -f2 >"$W/big.list"
echo "$(wc -l <"$W/big.list") objects of 4 MiB"
for i in $(seq 1000); do echo "goals-small-$i"; done >"$W/small.list"
"$G" put "$CONF" "$POOL" "$W/small.list" 1

# one leg: its output line ("MiB/s objects/s cpu_s/GB"; bench: MiB/s)
leg() {
	case $1 in
	b) R bench 10 seq -t 16 | awk '/^Bandwidth \(MB\/sec\)/ {print $3}' ;;
	a) "$G" aio "$CONF" "$POOL" "$W/big.list" 16 ;;
	h) OPENDS_BACKEND=uring OPENDS_ACCEL=host "$G" opends "$CONF" "$POOL" "$W/big.list" 16 ;;
	d) OPENDS_BACKEND=uring OPENDS_ACCEL=hostdev "$G" opends "$CONF" "$POOL" "$W/big.list" 16 ;;
	sa) "$G" aio "$CONF" "$POOL" "$W/small.list" 32 ;;
	sb) OPENDS_BACKEND=uring OPENDS_ACCEL=host "$G" batch "$CONF" "$POOL" "$W/small.list" 32 ;;
	esac
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
LEGS=(b a h d sa sb)
for r in $(seq "$ROUNDS"); do
	load=$(cut -d' ' -f1 /proc/loadavg)
	declare -A out=()
	for k in $(seq 0 5); do
		l=${LEGS[$(((k + r - 1) % 6))]}
		out[$l]=$(leg "$l")
	done
	b=${out[b]} a=${out[a]} h=${out[h]} d=${out[d]} sa=${out[sa]} sb=${out[sb]}
	echo "round $r (load $load, first leg ${LEGS[$(((r - 1) % 6))]}): bench seq ${b} MB/s | aio $a | opends host $h |" \
		"opends hostdev $d | small aio $sa | small batch $sb  (MiB/s obj/s cpu_s/GB)"
	echo "$b" >>"$W/b"; echo "$a" | cut -d' ' -f1 >>"$W/a"; echo "$h" | cut -d' ' -f1 >>"$W/h"
	echo "$d" | cut -d' ' -f1 >>"$W/d"; echo "$sa" | cut -d' ' -f2 >>"$W/sa"; echo "$sb" | cut -d' ' -f2 >>"$W/sb"
	echo "$a" | cut -d' ' -f3 >>"$W/ac"; echo "$h" | cut -d' ' -f3 >>"$W/hc"
	# this round's ratios
	awk -v b="$b" -v a="${a%% *}" -v h="${h%% *}" -v d="${d%% *}" -v sa="$(echo "$sa" | cut -d' ' -f2)" \
		-v sb="$(echo "$sb" | cut -d' ' -f2)" -v ac="$(echo "$a" | cut -d' ' -f3)" \
		-v hc="$(echo "$h" | cut -d' ' -f3)" 'BEGIN {
		print h / b >> "'"$W"'/r1b"; print h / a >> "'"$W"'/r1a"; print d / a >> "'"$W"'/r2"
		print sb / sa >> "'"$W"'/r3"; print hc / ac >> "'"$W"'/r7" }'
	unset out
done
mb=$(median <"$W/b"); ma=$(median <"$W/a"); mh=$(median <"$W/h"); md=$(median <"$W/d")
msa=$(median <"$W/sa"); msb=$(median <"$W/sb"); mac=$(median <"$W/ac"); mhc=$(median <"$W/hc")
# rados bench prints MB/s = 10^6... it means MiB (1048576) in pacific's output
echo "medians of $ROUNDS rounds: bench seq $mb, aio $ma, opends host $mh, opends hostdev $md (MiB/s);" \
	"small objects: aio $msa, batch $msb (obj/s); client CPU s/GB: aio $mac, opends $mhc"
echo "goal: ratio of medians | median of per-round ratios"
awk -v b="$mb" -v a="$ma" -v h="$mh" -v d="$md" -v sa="$msa" -v sb="$msb" -v ac="$mac" -v hc="$mhc" \
	-v r1b="$(median <"$W/r1b")" -v r1a="$(median <"$W/r1a")" -v r2="$(median <"$W/r2")" \
	-v r3="$(median <"$W/r3")" -v r7="$(median <"$W/r7")" 'BEGIN {
	printf "S1 opends host / bench seq %.2f | %.2f (goal >= 0.9)\n", h / b, r1b
	printf "S1 opends host / aio %.2f | %.2f (goal >= 0.9)\n", h / a, r1a
	printf "S2 opends hostdev / aio %.2f | %.2f (goal >= 0.85)\n", d / a, r2
	printf "S3 small objects batch / aio %.2f | %.2f (goal >= 0.9)\n", sb / sa, r3
	printf "S7 client CPU per GB opends / aio %.2f | %.2f (goal <= 1.2)\n", hc / ac, r7 }'
R cleanup >/dev/null 2>&1 || true
# the 1000 small objects stay (goals-small-N; a new run rewrites them)
