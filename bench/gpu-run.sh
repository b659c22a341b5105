#!/usr/bin/env bash
# One call on the GPU machine: build (bench/gpu-build.sh), run the GPU test
# suite, and a short measurement: bench/gpubench.c (4 GiB into GPU memory
# from /dev/shm and ext4, cold and hot, with the ceilings, and 4 KiB read
# latency) plus the cuFile drop-in against NVIDIA's libcufile. Logs go under
# $OUT. Set CPU_SUITE=1 to also run the CPU suite there, GPUBENCH=0 to skip
# gpubench, DROPIN_MIB to change the drop-in's file size (default 8192:
# long enough that thread start and first calls do not weigh).
source "$(dirname "$0")/gpu-build.sh"
exec > >(tee -a "$OUT/gpu-run.log") 2>&1

step "gpu suite"
TMPDIR=/var/tmp timeout 300 meson test -C build-gpu --no-rebuild --suite gpu --print-errorlogs -v \
	>"$OUT/test-gpu.log" 2>&1
echo "gpu suite rc $?"
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:|^Skipped:|PATH:|NOTE:" "$OUT/test-gpu.log" | head -40
cp build-gpu/meson-logs/testlog.txt "$OUT/testlog-gpu.txt" 2>/dev/null

if [ "${CPU_SUITE:-0}" = 1 ]; then
	step "cpu suite"
	timeout 300 meson test -C build-gpu --no-rebuild --suite cpu --num-processes 8 >"$OUT/test-cpu.log" 2>&1
	echo "cpu suite rc $?"
	grep -E "^Ok:|^Fail:|^Skipped:|^Timeout:| FAIL | TIMEOUT " "$OUT/test-cpu.log"
fi

if [ "${GPUBENCH:-1}" = 1 ]; then
step "gpubench"
gcc -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -Iinclude -I/usr/local/cuda/include bench/gpubench.c \
	-o build-gpu/gpubench -Lbuild-gpu/src -lopends -ldl -lpthread || exit 1
mkdir -p /var/tmp/gpubench
GPUBENCH_THREADS=${GPUBENCH_THREADS:-8} timeout "${BENCH_TIMEOUT:-240}" build-gpu/gpubench /dev/shm /var/tmp/gpubench 2>&1 |
	tee "$OUT/gpubench.log"
rm -rf /var/tmp/gpubench /dev/shm/gpubench-*.bin
fi

MIB=${DROPIN_MIB:-8192}
step "cuFile drop-in vs NVIDIA libcufile ($MIB MiB, hot and cold, 1 and 8 threads)"
# each line carries the pinned copy ceiling measured in the same process
F=/var/tmp/cufile-bench.bin
for m in hot cold; do
	for t in 1 8; do
		build-gpu/tests/dropin/cufile_dropin_bench --lib=/usr/local/cuda/lib64/libcufile.so.0 --file=$F \
			--size-mib=$MIB --mode=$m --threads=$t 2>&1 | tee -a "$OUT/cufile-dropin.log"
		OPENDS_ACCEL=cuda build-gpu/tests/dropin/cufile_dropin_bench \
			--lib=build-gpu/src/dropin/cufile/libcufile.so.0 --file=$F --size-mib=$MIB --mode=$m --threads=$t 2>&1 |
			tee -a "$OUT/cufile-dropin.log"
	done
done
rm -f $F
step "done"
