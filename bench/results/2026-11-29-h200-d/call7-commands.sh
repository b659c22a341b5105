#!/usr/bin/env bash
# call 7: d86181c plus the OPENDS_HOT_MAX override of call6-commands.sh
source bench/gpu-build.sh >/dev/null 2>&1
exec > >(tee -a "$OUT/x.log") 2>&1
F=/var/tmp/cufile-bench.bin
B=build-gpu/tests/compat/cufile_dropin_bench
D=build-gpu/src/compat/cufile/libcufile.so.0
run() { local v=$1; shift; echo "--- $v $*"; env OPENDS_ACCEL=cuda $v timeout 60 $B --lib=$D --file=$F --size-mib=8192 --mode=hot "$@" 2>&1 | sed 's/lib=opends-dropin mode=hot mem=device size_mib=8192//'; }
for i in 1 2; do
run "X=1" --threads=1
run "OPENDS_HOT_MAX=1" --threads=1
run "OPENDS_HOT_MAX=1 OPENDS_IO_THREADS=4" --threads=1
run "OPENDS_HOT_MAX=2 OPENDS_IO_THREADS=4" --threads=1
run "OPENDS_HOT_MAX=1" --threads=8
run "X=1" --threads=8
run "OPENDS_HOT_MAX=1" --threads=1 --mem=host
run "X=1" --threads=1 --mem=host
done
rm -f $F
