#!/usr/bin/env bash
# On the GPU machine: the drop-in against NVIDIA's libcufile on the shape
# issue 21's goal names (hot 8 GiB into device memory, 16 MiB cuFileRead
# calls, 1 and 8 threads), each line the median of --repeat passes in one
# process with its spread, plus the drop-in with 8 threads under the
# engine's knobs (workers, depth), to tell noise from a setting.
#
# usage: tests/dropin/gpu-bench.sh [builddir]     (default build-gpu)
#   NV_LIB overrides NVIDIA's library (/usr/local/cuda/lib64/libcufile.so.0),
#   MIB the file size (8192), REPEAT the passes per line (5),
#   F the file (/var/tmp/cufile-bench.bin, created when missing and kept).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=$(cd "${1:-build-gpu}" && pwd) || exit 1
NV_LIB=${NV_LIB:-/usr/local/cuda/lib64/libcufile.so.0}
MIB=${MIB:-8192}
REPEAT=${REPEAT:-5}
F=${F:-/var/tmp/cufile-bench.bin}
bench=$B/tests/dropin/cufile_dropin_bench
dlib=$B/src/dropin/cufile/libcufile.so.0
[ -x "$bench" ] && [ -f "$dlib" ] || { echo "no bench or drop-in in $B (build it first)"; exit 1; }
echo "machine: $(nproc) CPUs, $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') GPUs"
one() { # $1: label, $2: environment (VAR=value, space-separated), rest: bench arguments
	local label=$1 envs=$2
	shift 2
	printf '%-42s ' "$label"
	# shellcheck disable=SC2086
	env $envs timeout 120 "$bench" --file="$F" --size-mib="$MIB" --mode=hot --repeat="$REPEAT" "$@" 2>&1 | tail -1
}
for t in 1 8; do
	[ -f "$NV_LIB" ] && one "nvidia, $t threads" "" --lib="$NV_LIB" --threads=$t
	one "drop-in, $t threads" OPENDS_ACCEL=cuda --lib="$dlib" --threads=$t
done
# knobs: workers, depth, spin, and the staging chunk (1 MiB by default;
# pinned copies of 1 MiB reach about 47 GB/s here against 55 at 64 MiB+)
for v in OPENDS_IO_THREADS=16 OPENDS_QUEUE_DEPTH=32 OPENDS_IDLE_SPIN=0 OPENDS_CHUNK_SIZE=2m \
	OPENDS_CHUNK_SIZE=4m "OPENDS_CHUNK_SIZE=4m OPENDS_QUEUE_DEPTH=8" "OPENDS_CHUNK_SIZE=4m OPENDS_IO_THREADS=16"; do
	one "drop-in, 8 threads, $v" "OPENDS_ACCEL=cuda $v" --lib="$dlib" --threads=8
done
one "drop-in, 1 thread, OPENDS_CHUNK_SIZE=4m" "OPENDS_ACCEL=cuda OPENDS_CHUNK_SIZE=4m" --lib="$dlib" --threads=1
# several NUMA nodes: both libraries with CPUs and memory on GPU 0's node
nodes=$(numactl -H 2>/dev/null | sed -n 's/^available: \([0-9]*\) nodes.*/\1/p')
echo "NUMA nodes: ${nodes:-unknown}"
if [ "${nodes:-1}" -gt 1 ]; then
	bdf=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr 'A-F' 'a-f' | sed 's/^0000//')
	node=$(cat "/sys/bus/pci/devices/$bdf/numa_node" 2>/dev/null || echo 0) # 00000000:19:00.0 -> 0000:19:00.0
	[ "$node" -ge 0 ] 2>/dev/null || node=0
	for lib in "$NV_LIB" "$dlib"; do
		[ -f "$lib" ] || continue
		printf '%-42s ' "node $node only: $(basename "$(dirname "$lib")"), 8 threads"
		OPENDS_ACCEL=cuda numactl --cpunodebind="$node" --membind="$node" timeout 120 "$bench" --file="$F" \
			--size-mib="$MIB" --mode=hot --repeat="$REPEAT" --lib="$lib" --threads=8 2>&1 | tail -1
	done
fi
