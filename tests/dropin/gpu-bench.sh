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
for v in OPENDS_IO_THREADS=4 OPENDS_IO_THREADS=16 OPENDS_QUEUE_DEPTH=32 OPENDS_IDLE_SPIN=0; do
	one "drop-in, 8 threads, $v" "OPENDS_ACCEL=cuda $v" --lib="$dlib" --threads=8
done
