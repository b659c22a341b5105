#!/usr/bin/env bash
# The standard sweep on the GPU machine, one part per call (a command may
# run 10 minutes): bench/gpu-sweep.sh DATASET[,DATASET] [CACHES] [SCALE]
# Each part generates its data on the ext4 disk, measures its own ceilings
# and cuFile next to its legs (opends-bench), then KvikIO on the same files
# (bench/kvikio_bench.py, wheels carried in .whl/). Results under $OUT.
# Environment: BACKENDS (default: every one built), OPENDS_BENCH_TIMEOUT
# (seconds per backend), BASELINE_TIMEOUT, KVIKIO=0, KVIKIO_TIMEOUT,
# KVIKIO_MODES; CUDA_DEVICE_MAX_CONNECTIONS is left to the caller (the
# driver's default, 8, unless set; recorded in machine.txt).
source "$(dirname "$0")/gpu-build.sh"
datasets=${1:?usage: gpu-sweep.sh DATASETS [CACHES] [SCALE]}
caches=${2:-cold}
scale=${3:-1}
exec > >(tee -a "$OUT/sweep.log") 2>&1
data=/var/tmp/opends-bench-data

# Baselines first, then one process per backend with its own limit, so a
# backend that hangs costs its own legs only.
step "opends-bench $datasets ($caches): data, ceilings, cuFile"
backends=$(grep -oE "^ +(ref|uring|gds) +: YES" build-gpu/meson-logs/meson-log.txt | awk '{print $1}' | sort -u | paste -sd, -)
run_bench() { # limit, then opends-bench arguments
	local limit=$1
	shift
	timeout "$limit" build-gpu/tools/opends-bench --data "$data" --out "$OUT" --datasets "$datasets" \
		--cache "$caches" --scale "$scale" "$@"
	echo "opends-bench $* rc $?"
}
run_bench "${BASELINE_TIMEOUT:-240}" --backends none
for b in $(echo "${BACKENDS:-$backends}" | tr , ' '); do
	step "opends-bench $datasets ($caches): $b"
	run_bench "${OPENDS_BENCH_TIMEOUT:-240}" --no-baselines --backends "$b"
done

if [ "${KVIKIO:-1}" = 1 ] && [ -d .whl ]; then
	step "kvikio"
	python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
	PYTHONPATH=/tmp/site timeout "${KVIKIO_TIMEOUT:-240}" python3 bench/kvikio_bench.py --data "$data" \
		--out "$OUT" --datasets "$datasets" --cache "$caches" --modes "${KVIKIO_MODES:-sync,async}"
fi
step "done"
