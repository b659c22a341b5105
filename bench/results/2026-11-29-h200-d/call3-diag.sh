#!/usr/bin/env bash
# temporary: drop-in hot sweep of knobs
source bench/gpu-build.sh
exec > >(tee -a "$OUT/diag.log") 2>&1
F=/var/tmp/cufile-bench.bin
B=build-gpu/tests/compat/cufile_dropin_bench
D=build-gpu/src/compat/cufile/libcufile.so.0
run() { # "VAR=.. VAR=.." args...
	local v=$1; shift
	echo "--- $v $*"
	env OPENDS_ACCEL=cuda OPENDS_URING_STATS=1 $v timeout 60 $B --lib=$D --file=$F --size-mib=8192 --mode=hot "$@" 2>&1 | grep -v "^DIAG"
}
rund() { local v=$1; shift; echo "--- (stats) $v $*"; env OPENDS_ACCEL=cuda OPENDS_URING_STATS=1 $v timeout 60 $B --lib=$D --file=$F --size-mib=8192 --mode=hot "$@" 2>&1; }
for i in 1 2 3; do
run "X=1" --threads=8
run "X=1" --threads=1
done
for i in 1 2; do
run "OPENDS_HOT_MAX=2" --threads=8
run "X=1" --threads=1 --chunk-mib=1024
run "OPENDS_HOT_MAX=100" --threads=1 --chunk-mib=1024
done
run "OPENDS_HOT_MAX=2" --threads=1
run "OPENDS_IDLE_SPIN=300" --threads=1
rund "X=1" --threads=1
run "X=1" --threads=8 --mem=host
run "X=1" --threads=8 --mode=cold
run "X=1" --threads=1 --mode=cold
rm -f $F
