#!/usr/bin/env bash
# The one GPU-machine script: build (bench/gpu-build.sh: liburing from the
# carried .deps/), run the GPU test suite, then the benchmark sweep sized to
# finish in about 7 minutes on the two-GPU H200 (nvidia-h200-x2):
#   - one opends-bench command (--legs): filesize8gib sync cold and hot and
#     stream hot, imagenetish every mode cold and hot (issue 14's regression
#     legs: hot 8 GiB sync and stream, imagenetish cold and hot; issue 17's
#     cold big read); stream legs also with streams registered with cuFile's
#     flags 7 (mode stream:7, issue 18); every caller leg (seq16m, files1t, rand4k,
#     write16m, write8t, gpu1, gpu2, fanout2) with the ceilings, through
#     OpenDS, the plain POSIX way, cuFile, and KvikIO (--kvikio, wheels from
#     the carried .whl/);
#   - the cuFile drop-in against NVIDIA's libcufile, 1 and 8 threads, hot
#     and cold (tests/dropin or tests/compat, whichever the tree has);
#   - the safetensors load (P7: python/bench_safetensors.py), as rows;
#   - bench/report on the folder.
# Everything lands in $OUT/<date>-<machine>-<commit>/: records.csv,
# machine.txt, report.md, report.png, raw/command.txt, raw/logs.tar.gz (the
# device tool brings back 8 files, 2 folders deep). To keep it:
#   cp -r <files_at>/<name> bench/results/ && tar -xzf bench/results/<name>/raw/logs.tar.gz \
#     -C bench/results/<name>/raw && rm bench/results/<name>/raw/logs.tar.gz
# then a line in bench/results/INDEX.md (bench/report --index).
#
# Expected on nvidia-h200-x2 (32 cores): build 10 s, GPU suite 15 s, data
# generation 60 s (8 GiB + 25,000 small files), filesize8gib legs and
# ceilings 90 s, imagenetish 80 s, caller legs 50 s, KvikIO 50 s, drop-in
# (8 GiB) 45 s, safetensors 45 s, report 10 s: about 7.5 minutes.
#
# Environment: COMMIT (the short hash measured: the device's copy has no
# usable .git, so pass it; "unknown" otherwise),
# SWEEP=0 (build and GPU suite only), CPU_SUITE=1 (the CPU suite too),
# GPUBENCH=1 (bench/gpubench.c too), KVIKIO=0, DROPIN=0, SAFETENSORS=0, DROPIN_MIB (default 8192, as run d), WRITE_SIZE
# (default 4G), BIG_SIZE (the caller legs' file, default 8G: filesize8gib's),
# LEGS (opends-bench --legs, default
# filesize8gib:sync:*,filesize8gib:stream:hot,imagenetish:*:*), LEG_TIMEOUT
# (seconds per leg, default 60),
# SCALE (dataset counts, default 1), BUDGET (seconds the whole
# script may take, default 540: the device tool stops a command at 600; the
# steps after opends-bench are skipped when the budget runs out).
LOGS=/tmp/opends-gpu-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
export LOGS
source "$(dirname "$0")/gpu-build.sh"
exec > >(tee -a "$LOGS/gpu-run.log") 2>&1
t_start=$(date +%s)
elapsed() { echo $(($(date +%s) - t_start)); }
budget=${BUDGET:-540}
left() { echo $((budget - $(elapsed))); }

step "gpu suite"
TMPDIR=/var/tmp timeout 300 meson test -C build-gpu --no-rebuild --suite gpu --print-errorlogs -v \
	>"$LOGS/test-gpu.log" 2>&1
echo "gpu suite rc $?"
grep -E "^ *[0-9]+/[0-9]+ .*(OK|FAIL|SKIP|TIMEOUT)|^Ok:|^Fail:|^Skipped:" "$LOGS/test-gpu.log" | head -40
cp build-gpu/meson-logs/testlog.txt "$LOGS/testlog-gpu.txt" 2>/dev/null

if [ "${CPU_SUITE:-0}" = 1 ]; then
	step "cpu suite"
	timeout 300 meson test -C build-gpu --no-rebuild --suite cpu --num-processes 16 >"$LOGS/test-cpu.log" 2>&1
	echo "cpu suite rc $?"
	grep -E "^Ok:|^Fail:|^Skipped:|^Timeout:| FAIL | TIMEOUT " "$LOGS/test-cpu.log"
fi

if [ "${GPUBENCH:-0}" = 1 ]; then
	# the older probe: 4 GiB from /dev/shm and ext4, ceilings, 4 KiB latency
	step "gpubench"
	gcc -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -Iinclude -Isrc/vendor -I/usr/local/cuda/include \
		bench/gpubench.c src/vendor/cuda_api.c -o build-gpu/gpubench -Lbuild-gpu/src -lopends -ldl -lpthread &&
		mkdir -p /var/tmp/gpubench &&
		GPUBENCH_THREADS=${GPUBENCH_THREADS:-8} timeout 240 build-gpu/gpubench /dev/shm /var/tmp/gpubench 2>&1 |
		tee "$LOGS/gpubench.log"
	rm -rf /var/tmp/gpubench /dev/shm/gpubench-*.bin
fi

pack() {
	local dir=$1
	(cd "$LOGS" && tar -czf "$dir/raw/logs.tar.gz" .)
	ls -la "$dir" "$dir/raw"
}

if [ "${SWEEP:-1}" = 0 ]; then
	mkdir -p "$OUT/gpu-suite/raw"
	pack "$OUT/gpu-suite"
	step "done"
	exit 0
fi

commit=${COMMIT:-unknown}
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
machine=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oiE "[A-Z][0-9]{2,4}" | head -1 |
	tr 'A-Z' 'a-z')
[ "$ngpu" -gt 1 ] && machine="${machine:-gpu}x$ngpu"
name=$(date -u +%F)-${machine:-gpu}-$commit
res=$OUT/$name
mkdir -p "$res/raw"
data=/var/tmp/opends-bench-data

kvikio=()
if [ "${KVIKIO:-1}" = 1 ] && ls .whl/*.whl >/dev/null 2>&1; then
	step "kvikio wheels"
	python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
		.whl/*.whl 2>&1 | tail -2
	export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
	kvikio=(--kvikio bench/kvikio_bench.py)
fi

step "opends-bench: filesize8gib + imagenetish legs, every caller leg ($(elapsed) s in)"
cmd=(build-gpu/tools/opends-bench --data "$data" --out "$res" --commit "$commit"
	--datasets filesize8gib,imagenetish --legs "${LEGS:-filesize8gib:sync:*,filesize8gib:stream:hot,imagenetish:*:*}"
	--leg-timeout "${LEG_TIMEOUT:-60}"
	--scale "${SCALE:-1}" --callers all --big-size "${BIG_SIZE:-8G}" --write-size "${WRITE_SIZE:-4G}"
	--stream-flags 0,7 "${kvikio[@]}")
echo "${cmd[*]}" | tee "$res/raw/command.txt"
# what is left, less about 2 minutes for the drop-in, safetensors and report
limit=$(($(left) - 120))
[ "$limit" -lt 120 ] && limit=120
PYTHONUNBUFFERED=1 timeout "$limit" "${cmd[@]}" 2>&1 | tee "$LOGS/opends-bench.log"
echo "opends-bench rc ${PIPESTATUS[0]} ($(elapsed) s in)"

if [ "${DROPIN:-1}" = 1 ] && [ "$(left)" -gt 80 ]; then
	MIB=${DROPIN_MIB:-8192}
	step "cuFile drop-in vs NVIDIA libcufile ($MIB MiB, hot and cold, 1 and 8 threads; $(elapsed) s in)"
	# each line carries the pinned copy ceiling measured in the same process
	dbench=$(find build-gpu/tests -name cufile_dropin_bench -type f | head -1)
	dlib=$(find build-gpu/src -name libcufile.so.0 | head -1)
	F=/var/tmp/cufile-bench.bin
	if [ -n "$dbench" ] && [ -n "$dlib" ]; then
		for m in hot cold; do
			for t in 1 8; do
				timeout 30 "$dbench" --lib=/usr/local/cuda/lib64/libcufile.so.0 --file=$F --size-mib=$MIB \
					--mode=$m --threads=$t 2>&1 | tee -a "$LOGS/cufile-dropin.log"
				OPENDS_ACCEL=cuda timeout 30 "$dbench" --lib="$dlib" --file=$F --size-mib=$MIB --mode=$m \
					--threads=$t 2>&1 | tee -a "$LOGS/cufile-dropin.log"
			done
		done
	else
		echo "drop-in bench or library not built (bench: '$dbench', library: '$dlib')"
	fi
	rm -f $F
fi

if [ "${SAFETENSORS:-1}" = 1 ] && [ "$(left)" -gt 60 ]; then
	step "safetensors load, P7 ($(elapsed) s in)"
	OPENDS_LIBRARY=$PWD/build-gpu/src/libopends.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} \
		timeout $(($(left) - 25)) python3 python/bench_safetensors.py --size-gib 2 --runs 2 --dir /var/tmp \
		--out "$LOGS/safetensors.csv" 2>&1 | tail -12
	[ -s "$LOGS/safetensors.csv" ] && python3 bench/report --add-safetensors "$LOGS/safetensors.csv" "$res"
fi

step "report ($(elapsed) s in)"
python3 bench/report "$res"
sed -n '/### Summary/,/### Datasets/p' "$res/report.md" | head -40
sed -n '/### Callers/,/### Ceilings/p' "$res/report.md" | head -30
cp "$res/report.md" "$LOGS/" 2>/dev/null
pack "$res"
rm -rf "$data/callers-write.bin" "$data/callers-write-kvikio.bin"
step "done ($(elapsed) s)"
