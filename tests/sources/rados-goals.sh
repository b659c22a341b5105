#!/usr/bin/env bash
# The issue-20 goals, measured side by side in alternating rounds on a
# cluster (tests/sources/ceph-cluster.sh start): the same objects read by
#   rados bench seq -t 16, plain rados_aio_read (16 in flight), and OpenDS
#   (rados:// handles, 16 async reads in flight) into host memory
#   (OPENDS_ACCEL=host) and into simulated device memory (hostdev);
# then 1000 small objects (4-256 KiB) by plain aio and by OpenDS's batch
# API, 32 in flight. Prints each round and the medians with ratios.
#   tests/sources/rados-goals.sh CONF [ROUNDS] [BUILD_DIR]
set -eu
CONF=$1
ROUNDS=${2:-5}
B=${3:-build}
POOL=${OPENDS_TEST_CEPH_POOL:-opends}
G=$B/tests/sources/rados_goals
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
R() { rados -c "$CONF" -p "$POOL" "$@"; }

echo "== writing: rados bench 5 write -t 16 (4 MiB objects), 1000 small objects"
R bench 5 write -t 16 --no-cleanup >"$W/write.log"
R ls | grep '^benchmark_data' >"$W/big.list"
echo "$(wc -l <"$W/big.list") objects of 4 MiB"
for i in $(seq 1000); do echo "goals-small-$i"; done >"$W/small.list"
"$G" put "$CONF" "$POOL" "$W/small.list" 1

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for r in $(seq "$ROUNDS"); do
	b=$(R bench 10 seq -t 16 | awk '/^Bandwidth \(MB\/sec\)/ {print $3}')
	a=$("$G" aio "$CONF" "$POOL" "$W/big.list" 16)
	h=$(OPENDS_BACKEND=uring OPENDS_ACCEL=host "$G" opends "$CONF" "$POOL" "$W/big.list" 16)
	d=$(OPENDS_BACKEND=uring OPENDS_ACCEL=hostdev "$G" opends "$CONF" "$POOL" "$W/big.list" 16)
	sa=$("$G" aio "$CONF" "$POOL" "$W/small.list" 32)
	sb=$(OPENDS_BACKEND=uring OPENDS_ACCEL=host "$G" batch "$CONF" "$POOL" "$W/small.list" 32)
	echo "round $r: bench seq ${b} MB/s | aio $a | opends host $h | opends hostdev $d | small aio $sa | small batch $sb  (MiB/s obj/s cpu_s/GB)"
	echo "$b" >>"$W/b"; echo "$a" | cut -d' ' -f1 >>"$W/a"; echo "$h" | cut -d' ' -f1 >>"$W/h"
	echo "$d" | cut -d' ' -f1 >>"$W/d"; echo "$sa" | cut -d' ' -f2 >>"$W/sa"; echo "$sb" | cut -d' ' -f2 >>"$W/sb"
	echo "$a" | cut -d' ' -f3 >>"$W/ac"; echo "$h" | cut -d' ' -f3 >>"$W/hc"
done
mb=$(median <"$W/b"); ma=$(median <"$W/a"); mh=$(median <"$W/h"); md=$(median <"$W/d")
msa=$(median <"$W/sa"); msb=$(median <"$W/sb"); mac=$(median <"$W/ac"); mhc=$(median <"$W/hc")
# rados bench prints MB/s = 10^6... it means MiB (1048576) in pacific's output
echo "medians of $ROUNDS rounds: bench seq $mb, aio $ma, opends host $mh, opends hostdev $md (MiB/s);" \
	"small objects: aio $msa, batch $msb (obj/s); client CPU s/GB: aio $mac, opends $mhc"
awk -v b="$mb" -v a="$ma" -v h="$mh" -v d="$md" -v sa="$msa" -v sb="$msb" -v ac="$mac" -v hc="$mhc" 'BEGIN {
	printf "S1 opends host / bench seq %.2f (goal >= 0.9), / aio %.2f (>= 0.9)\n", h / b, h / a
	printf "S2 opends hostdev / aio %.2f (>= 0.85)\n", d / a
	printf "S3 small objects batch / aio %.2f (>= 0.9)\n", sb / sa
	printf "S7 client CPU per GB opends / aio %.2f (<= 1.2)\n", hc / ac }'
R cleanup >/dev/null 2>&1 || true
# the 1000 small objects stay (goals-small-N; a new run rewrites them)
