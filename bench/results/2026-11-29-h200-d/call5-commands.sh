#!/usr/bin/env bash
# call 5, run from the repository root on the GPU machine (bash call5-commands.sh)
# hot sweep legs that the uring change touches, with their ceilings and
# cuFile, then the drop-in against NVIDIA's library
source bench/gpu-build.sh
exec > >(tee -a "$OUT/sweep.log") 2>&1
data=/var/tmp/opends-bench-data
ob() { timeout "$1" build-gpu/tools/opends-bench --data "$data" --out "$OUT" --cache hot "${@:2}"; echo "opends-bench ${*:2} rc $?"; }
step "baselines: ceilings and cuFile sync/async/stream (cuFile batch stalls in compat mode)"
ob 200 --datasets filesize8gib,imagenetish --backends none --modes sync,async,stream
step "uring"
ob 150 --datasets filesize8gib,imagenetish --no-baselines --backends uring --modes sync,async,stream,batch
rm -rf "$data"
step "drop-in hot"
F=/var/tmp/cufile-bench.bin
for t in 1 8; do for l in /usr/local/cuda/lib64/libcufile.so.0 build-gpu/src/compat/cufile/libcufile.so.0 \
	/usr/local/cuda/lib64/libcufile.so.0 build-gpu/src/compat/cufile/libcufile.so.0; do
	OPENDS_ACCEL=cuda timeout 60 build-gpu/tests/compat/cufile_dropin_bench --lib=$l --file=$F --size-mib=8192 --mode=hot --threads=$t 2>&1 | tee -a "$OUT/cufile-dropin.log"
done; done
rm -f $F
step done
