#!/usr/bin/env bash
# The stream-ordered deadlock of bench/results/2026-11-29-h200-b/NOTES.md on
# the GPU machine: tiktokish cold stream legs alone, 40 s each (a hung one is
# killed and reported), without and with CUDA_DEVICE_MAX_CONNECTIONS=32;
# then the lmcacheish sweep with it. Logs under $OUT.
source "$(dirname "$0")/gpu-build.sh" >/dev/null 2>&1
exec > >(tee -a "$OUT/diag.log") 2>&1
D=/var/tmp/opends-bench-data
build-gpu/tools/opends-bench --data $D --datasets tiktokish --generate-only --quiet
leg() { # name env backend dataset
  echo "=== $1"
  env $2 build-gpu/tools/opends-bench --data $D --out $OUT/$1 --datasets ${4:-tiktokish} --cache cold --modes stream --backends $3 --no-baselines --quiet &
  pid=$!
  for i in $(seq 1 40); do sleep 1; kill -0 $pid 2>/dev/null || break; done
  if kill -0 $pid 2>/dev/null; then
    echo "HUNG: $1"  # each thread: name, kernel wait channel, syscall
    for t in /proc/$pid/task/*; do echo "$(cat $t/comm) $(cat $t/wchan) $(cut -d' ' -f1-3 $t/syscall)"; done
    kill -9 $pid
  fi
  wait $pid; echo "rc $?"
}
leg uring X=1 uring
leg uring32 CUDA_DEVICE_MAX_CONNECTIONS=32 uring
leg gds32 CUDA_DEVICE_MAX_CONNECTIONS=32 gds
leg ref32 CUDA_DEVICE_MAX_CONNECTIONS=32 ref
export CUDA_DEVICE_MAX_CONNECTIONS=32
OPENDS_BENCH_TIMEOUT=170 KVIKIO=0 bash bench/gpu-sweep.sh lmcacheish cold 2>&1 | grep -v "GiB, [0-9]* MiB/s$"
