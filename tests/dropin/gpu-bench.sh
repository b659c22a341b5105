#!/usr/bin/env bash
# On the GPU machine: the drop-in against NVIDIA's libcufile on the shape
# issue 21's goal names (hot 8 GiB into device memory, 16 MiB cuFileRead
# calls, 1 and 8 threads), each line the median of --repeat passes in one
# process with its spread, then the drop-in with 8 threads under the
# settings that could lift it to 0.80x the copy ceiling, so that one GPU
# call tells which one does.
#
# usage: tests/dropin/gpu-bench.sh [builddir]     (default build-gpu)
#   NV_LIB overrides NVIDIA's library (/usr/local/cuda/lib64/libcufile.so.0),
#   MIB the file size (8192), REPEAT the passes per line (5),
#   F the file (/var/tmp/cufile-bench.bin, created when missing and kept),
#   QUICK=1 the reference lines and the first group of variants only.
#
# What the variants test (docs/cufile-dropin.md, "Performance"):
# - OPENDS_READAHEAD=0: 8 threads on one handle, thread t reading chunks
#   t, t+8, ..., look like one sequential stream to the read-ahead
#   (stage_ra.c), which then reads ranges another thread asks for and
#   drops them (measured on the CPU machine: 14 of 19 ranges dropped,
#   each drop a wait before the call's own request is queued);
# - OPENDS_IO_KWORKERS (where the library has it): kernel workers per
#   ring, i.e. how many threads copy cached pages. uring's default is
#   CPUs / workers (2 on the 16-CPU H200, 4 on the 32-CPU two-GPU
#   machine); the drop-in opens OpenDS with 1 unless the variable is set
#   (x2 at 9761314: 0.85x at 1, 0.81 at 2, 0.79 at 3, 0.76 at 4);
# - workers, depth, chunk size, spin, and GPU 0's NUMA node.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
B=$(cd "${1:-build-gpu}" && pwd) || exit 1
NV_LIB=${NV_LIB:-/usr/local/cuda/lib64/libcufile.so.0}
MIB=${MIB:-8192}
REPEAT=${REPEAT:-5}
F=${F:-/var/tmp/cufile-bench.bin}
bench=$B/tests/dropin/cufile_dropin_bench
dlib=$B/src/dropin/cufile/libcufile.so.0
if [ ! -x "$bench" ] || [ ! -f "$dlib" ]; then
	echo "no bench or drop-in in $B (build it first)"
	exit 1
fi
echo "machine: $(nproc) CPUs, $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') GPUs"
one() { # $1: label, $2: environment (VAR=value, space-separated), rest: bench arguments
	local label=$1 envs=$2
	shift 2
	printf '%-50s ' "$label"
	# shellcheck disable=SC2086
	env $envs timeout 120 "$bench" --file="$F" --size-mib="$MIB" --mode=hot --repeat="$REPEAT" "$@" 2>&1 | tail -1
}
d8() { # the drop-in, 8 threads, under the settings given
	one "drop-in, 8 threads, $*" "OPENDS_ACCEL=cuda $*" --lib="$dlib" --threads=8
}
for t in 1 8; do
	[ -f "$NV_LIB" ] && one "nvidia, $t threads" "" --lib="$NV_LIB" --threads=$t
	one "drop-in, $t threads" OPENDS_ACCEL=cuda --lib="$dlib" --threads=$t
done
# 1: the read-ahead across threads
d8 OPENDS_READAHEAD=0
# 2: copying threads (the variable is ignored by a library without it)
if grep -q OPENDS_IO_KWORKERS "$B"/src/libopends.so* 2>/dev/null; then
	for k in 1 2 3 4; do
		d8 OPENDS_IO_KWORKERS=$k
	done
	for k in 2 4; do
		one "drop-in, 1 thread, OPENDS_IO_KWORKERS=$k" "OPENDS_ACCEL=cuda OPENDS_IO_KWORKERS=$k" --lib="$dlib" --threads=1
	done
else
	echo "(this library has no OPENDS_IO_KWORKERS: kernel-worker lines skipped)"
fi
d8 OPENDS_READAHEAD=0 OPENDS_IO_THREADS=16
d8 OPENDS_READAHEAD=0 OPENDS_IO_THREADS=12
[ "${QUICK:-0}" = 1 ] && exit 0
# 3: the rest of the engine's knobs, read-ahead off
for v in OPENDS_IO_THREADS=6 OPENDS_QUEUE_DEPTH=4 OPENDS_QUEUE_DEPTH=8 OPENDS_IDLE_SPIN=200 \
	OPENDS_CHUNK_SIZE=2m OPENDS_CHUNK_SIZE=4m "OPENDS_CHUNK_SIZE=4m OPENDS_QUEUE_DEPTH=4"; do
	# shellcheck disable=SC2086 # (a setting may be two variables)
	d8 OPENDS_READAHEAD=0 $v
done
one "drop-in, 1 thread, OPENDS_READAHEAD=0" "OPENDS_ACCEL=cuda OPENDS_READAHEAD=0" --lib="$dlib" --threads=1
# the default again: how far the same setting moves within one call
one "drop-in, 8 threads (again)" OPENDS_ACCEL=cuda --lib="$dlib" --threads=8
# 4: several NUMA nodes: both libraries with CPUs and memory on GPU 0's node
nodes=$(numactl -H 2>/dev/null | sed -n 's/^available: \([0-9]*\) nodes.*/\1/p')
echo "NUMA nodes: ${nodes:-unknown}"
if [ "${nodes:-1}" -gt 1 ]; then
	bdf=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr 'A-F' 'a-f' | sed 's/^0000//')
	node=$(cat "/sys/bus/pci/devices/$bdf/numa_node" 2>/dev/null || echo 0) # 00000000:19:00.0 -> 0000:19:00.0
	[ "$node" -ge 0 ] 2>/dev/null || node=0
	for lib in "$NV_LIB" "$dlib" "$dlib RA0"; do
		envs="OPENDS_ACCEL=cuda"
		[ "${lib#* }" = RA0 ] && envs="$envs OPENDS_READAHEAD=0"
		lib=${lib% RA0}
		[ -f "$lib" ] || continue
		printf '%-50s ' "node $node only: $(basename "$(dirname "$lib")"), 8 threads, $envs"
		# shellcheck disable=SC2086
		env $envs numactl --cpunodebind="$node" --membind="$node" timeout 120 "$bench" --file="$F" \
			--size-mib="$MIB" --mode=hot --repeat="$REPEAT" --lib="$lib" --threads=8 2>&1 | tail -1
	done
fi
