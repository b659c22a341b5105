#!/usr/bin/env bash
# call 6: d86181c plus, in uring_open, after "U.hot_max = U.kworkers;":
#   if (getenv("OPENDS_HOT_MAX")) U.hot_max = (unsigned)atoi(getenv("OPENDS_HOT_MAX"));
source bench/gpu-build.sh
exec > >(tee -a "$OUT/var.log") 2>&1
data=/var/tmp/opends-bench-data
F=/var/tmp/cufile-bench.bin
B=build-gpu/tests/compat/cufile_dropin_bench
D=build-gpu/src/compat/cufile/libcufile.so.0
$B --lib=/usr/local/cuda/lib64/libcufile.so.0 --file=$F --size-mib=8192 --mode=hot --threads=8
for i in 1 2 3 4 5 6; do OPENDS_ACCEL=cuda timeout 60 $B --lib=$D --file=$F --size-mib=8192 --mode=hot --threads=8; done
OPENDS_HOT_MAX=16 OPENDS_ACCEL=cuda timeout 60 $B --lib=$D --file=$F --size-mib=8192 --mode=hot --threads=8
rm -f $F
for h in 2 16 2 16 4; do
echo "--- HOT_MAX=$h"
OPENDS_HOT_MAX=$h timeout 100 build-gpu/tools/opends-bench --data "$data" --out "$OUT" --cache hot --datasets filesize8gib --no-baselines --backends uring --modes sync,stream --quiet
done
rm -rf $data
