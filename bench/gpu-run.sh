#!/usr/bin/env bash
# The one GPU-machine script: build (bench/gpu-build.sh: liburing from the
# carried .deps/), run the GPU test suite, then the benchmark sweep on the
# two-GPU H200 (nvidia-h200-x2), in steps, most important first:
#   A. opends-bench on filesize8gib: sync and stream (streams unregistered
#      and registered with cuFile's flags 7, mode stream:7), cold and hot,
#      with the disk and copy ceilings, cuFile, KvikIO (issues 14, 17, 18);
#   B. opends-bench on imagenetish: every mode, cold and hot, same peers;
#   C. opends-bench's caller legs: seq16m, files1t, rand4k, write16m,
#      write8t, gpu1, dev1 (GPU 1 alone: issue 19), gpu2, fanout2, with the
#      ceilings and the posix, cuFile and KvikIO peers;
#   D. the cuFile drop-in against NVIDIA's libcufile, 1 and 8 threads, hot
#      and cold (issue 21), as rows of records.csv;
#   E. the safetensors load (P7, python/bench_safetensors.py) and F. 20,000
#      small tensors against one file (issue 22, python/bench_many_tensors.py),
#      both as rows of records.csv;
#   C2. when time is left: this round's switches off, one row each beside
#      the defaults (AB=0 skips it): opends:uring+wp0 (writes), +probea
#      (files1t), +nodirect (imagenetish hot stream), +t16 (16 workers);
#   then bench/report on the folder.
# Each opends-bench step is its own command with its own time limit
# (--append into one records.csv; each command measures the ceilings its
# legs are read against; KvikIO's same legs run first in each). A leg
# stuck in a call that never returns is
# recorded as hung 30 s past --leg-timeout and ends only its command
# (exit 3): the next step still runs. Every step prints its start and
# elapsed seconds; the end prints a table of them.
#
# Measured on nvidia-h200-x2 at 18:13 (85065d7, PART=1): build 7 s, GPU
# suite 13 s, A 119 s cut at its limit just before its last ceiling (8 GiB
# generated in 5 s; KvikIO's legs 23 s; each cold pass of 8 GiB 5-7 s: 4
# ceiling shapes, cuFile sync and stream x2, OpenDS sync and stream x2, the
# best shape again), B >60 s (KvikIO's imagenetish legs 41 s, then ~17 cold
# passes of ~2-3 s: expect ~100 s), D 54 s. Estimated: A 125 s, B 100 s,
# C 120 s (writes of 4 GiB by each way, KvikIO at 3 thread counts), E 40 s,
# F 30 s: about 8.5 minutes in all, more than one call of 600 s holds; one
# call runs the steps in order and skips those that no longer fit. Split:
#   PART=1: GPU suite, A, B, D (about 300 s)
#   PART=2: C, E, F, C2 (about 220 s; SUITE=0 is implied)
# Both write <date>-<machine>-<commit>/ with records-partN.csv,
# raw/command-partN.txt and raw/logs-partN.tar.gz, so the two halves copied
# into one folder do not collide; bench/report reads every records*.csv of
# a folder. Without PART the names are records.csv, command.txt, logs.tar.gz.
#
# Everything lands in $OUT/<date>-<machine>-<commit>/: records.csv,
# machine.txt, report.md, report.png, raw/command.txt, raw/logs.tar.gz (the
# device tool brings back a few files, 2 folders deep). To keep it:
#   cp -r <files_at>/<name> bench/results/ && tar -xzf bench/results/<name>/raw/logs.tar.gz \
#     -C bench/results/<name>/raw && rm bench/results/<name>/raw/logs.tar.gz
# (with PART: both calls' folders into one, logs-part1/2 into raw/part1/2),
# a raw/ABOUT line, then bench/report --index (INDEX.md) and, for a full
# sweep, bench/report --readme.
#
# Environment: COMMIT (the short hash measured: the device's copy has no
# usable .git, so pass it; "unknown" otherwise), PART (1, 2, or unset for
# all), SWEEP=0 (build and GPU suite only), SUITE=0 (no GPU suite),
# SUITE_TIMEOUT (seconds for the GPU suite, default 150; 300 with SWEEP=0),
# CPU_SUITE=1 (the CPU suite too), GPUBENCH=1 (bench/gpubench.c too),
# KVIKIO=0, DROPIN=0, SAFETENSORS=0, MANY=0 (skip those steps), DROPIN_MIB
# (default 8192, as run d), WRITE_SIZE (default 4G), BIG_SIZE (the caller
# legs' file, default 8G: filesize8gib's), SCALE (dataset counts, default
# 1), BIGDS (step A's dataset, default filesize8gib; tiktokish to try the
# script on a small machine), LEG_TIMEOUT (seconds per leg, default 30), BUDGET (seconds the whole
# script may take, build included, default 540: the device tool stops a
# command at 600).
t_start=$(date +%s)
LOGS=/tmp/opends-gpu-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
export LOGS
source "$(dirname "$0")/gpu-build.sh"
exec > >(tee -a "$LOGS/gpu-run.log") 2>&1
elapsed() { echo $(($(date +%s) - t_start)); }
budget=${BUDGET:-540}
left() { echo $((budget - $(elapsed))); }
echo "build done ($(elapsed) s in)"
part=${PART:-}
case "$part" in "" | 1 | 2) ;; *) echo "PART must be 1, 2 or unset, not '$part'"; exit 2 ;; esac
sfx=${part:+-part$part}
in_part() { [ -z "$part" ] || [ "$part" = "$1" ]; }
# the account of where time went: "step seconds" lines
timings=()
t_step=0
name_step=""
begin() { # begin NAME: a step starts
	end_step
	name_step=$1
	t_step=$(date +%s)
	step "$1 ($(elapsed) s in, $(left) s left)"
}
end_step() {
	[ -n "$name_step" ] && timings+=("$(printf '%5d s  %s' $(($(date +%s) - t_step)) "$name_step")")
	name_step=""
}
skipped() { timings+=("$(printf '%7s  %s' skipped "$1")"); echo "=== skipped: $1 ($(left) s left)"; }

if [ "${SUITE:-1}" = 1 ] && [ "$part" != 2 ]; then
	begin "gpu suite"
	# bounded: a hung GPU test must not eat the sweep (SUITE_TIMEOUT)
	TMPDIR=/var/tmp timeout "${SUITE_TIMEOUT:-$([ "${SWEEP:-1}" = 0 ] && echo 300 || echo 150)}" meson test -C build-gpu --no-rebuild --suite gpu --print-errorlogs -v \
		>"$LOGS/test-gpu.log" 2>&1
	echo "gpu suite rc $?"
	grep -E "^ *[0-9]+/[0-9]+ .*(OK|FAIL|SKIP|TIMEOUT)|^Ok:|^Fail:|^Skipped:" "$LOGS/test-gpu.log" | head -40
	cp build-gpu/meson-logs/testlog.txt "$LOGS/testlog-gpu.txt" 2>/dev/null
fi

if [ "${CPU_SUITE:-0}" = 1 ]; then
	begin "cpu suite"
	timeout 300 meson test -C build-gpu --no-rebuild --suite cpu --num-processes 16 >"$LOGS/test-cpu.log" 2>&1
	echo "cpu suite rc $?"
	grep -E "^Ok:|^Fail:|^Skipped:|^Timeout:| FAIL | TIMEOUT " "$LOGS/test-cpu.log"
fi

if [ "${GPUBENCH:-0}" = 1 ]; then
	# the older probe: 4 GiB from /dev/shm and ext4, ceilings, 4 KiB latency
	begin "gpubench"
	gcc -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -Iinclude -Isrc/vendor -I/usr/local/cuda/include \
		bench/gpubench.c src/vendor/cuda_api.c -o build-gpu/gpubench -Lbuild-gpu/src -lopends -ldl -lpthread &&
		mkdir -p /var/tmp/gpubench &&
		GPUBENCH_THREADS=${GPUBENCH_THREADS:-8} timeout 240 build-gpu/gpubench /dev/shm /var/tmp/gpubench 2>&1 |
		tee "$LOGS/gpubench.log"
	rm -rf /var/tmp/gpubench /dev/shm/gpubench-*.bin
fi

report_times() {
	end_step
	echo
	echo "=== where the time went (budget $budget s, $(elapsed) s used)"
	printf '%s\n' "${timings[@]}" | tee "$LOGS/timings.txt"
}

pack() {
	local dir=$1
	report_times
	(cd "$LOGS" && tar -czf "$dir/raw/logs$sfx.tar.gz" .)
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
: >"$res/raw/command$sfx.txt"

kvikio=()
if [ "${KVIKIO:-1}" = 1 ] && ls .whl/*.whl >/dev/null 2>&1; then
	begin "kvikio wheels"
	python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
		.whl/*.whl 2>&1 | tail -2
	export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
	kvikio=(--kvikio bench/kvikio_bench.py)
fi

# bench NAME CAP RESERVE ARGS...: one opends-bench command appending to the
# folder's records, limited to CAP seconds and to what is left less RESERVE
# (the later steps' share); skipped when under 40 s would be left to it.
bench() {
	local what=$1 cap=$2 reserve=$3
	shift 3
	local limit=$(($(left) - reserve))
	[ "$limit" -gt "$cap" ] && limit=$cap
	if [ "$limit" -lt 40 ]; then
		skipped "$what (would have $limit s)"
		return
	fi
	begin "$what (limit $limit s)"
	local kv=("${kvikio[@]}")
	[ "${BENCH_KV:-1}" = 0 ] && kv=()
	local cmd=(build-gpu/tools/opends-bench --data "$data" --out "$res" --append --commit "$commit"
		--leg-timeout "${LEG_TIMEOUT:-30}" --scale "${SCALE:-1}" --big-size "${BIG_SIZE:-8G}"
		--write-size "${WRITE_SIZE:-4G}" --stream-flags 0,7 "${kv[@]}" "$@")
	echo "${cmd[*]}" | tee -a "$res/raw/command$sfx.txt"
	PYTHONUNBUFFERED=1 timeout "$limit" "${cmd[@]}" 2>&1 | tee -a "$LOGS/opends-bench.log"
	bench_rc=${PIPESTATUS[0]}
	local rc=$bench_rc
	echo "opends-bench rc $rc ($what; $(elapsed) s in)$([ "$rc" = 3 ] && echo ": a leg hung, see HUNG above")$([ "$rc" = 124 ] && echo ": stopped at its limit")"
}

# A, B: the regression legs of issues 14/17/18; C: the callers (17, 19).
# The reserves are the later steps' share of this call: PART=1 holds A, B,
# D; PART=2 holds C, E, F; one call holds all (and skips what no longer fits).
one() { [ "$part" = "$1" ] && echo "$2" || echo "$3"; }
if in_part 1; then
	big=${BIGDS:-filesize8gib}
	bench "A: $big sync+stream cold+hot, ceilings, cuFile, KvikIO" 180 "$(one 1 150 250)" \
		--datasets "$big" --legs "$big:sync:*,$big:stream:*" --callers none
	# an unregistered stream leg hung (its command ended): the registered
	# ones (stream:7, issue 18) did not run; they get a command of their own
	# with their ceilings (KvikIO's rows are in already: it runs first)
	if [ "${bench_rc:-0}" = 3 ] && grep -q "HUNG: '$big stream " "$LOGS/opends-bench.log"; then
		BENCH_KV=0 bench "A2: $big stream:7 cold+hot after the hung stream leg" 100 "$(one 1 160 300)" \
			--datasets "$big" --legs "$big:stream:*" --callers none --stream-flags 7
	fi
	# flags 0 only: NVIDIA cuFile's own stream:7 cold leg on 4096 streams
	# hung here (bdd8582's sweep) and ended the step before OpenDS's legs
	bench "B: imagenetish every mode cold+hot, ceilings, cuFile, KvikIO" 140 "$(one 1 60 180)" \
		--datasets imagenetish --legs "imagenetish:*:*" --callers none --stream-flags 0
fi
if in_part 2; then
	bench "C: caller legs, ceilings, posix, cuFile, KvikIO" 180 "$(one 2 75 100)" \
		--datasets none --callers all
fi

if [ "${DROPIN:-1}" = 1 ] && in_part 1; then
	MIB=${DROPIN_MIB:-8192}
	if [ "$(left)" -lt 70 ]; then
		skipped "D: drop-in"
	else
		begin "D: cuFile drop-in vs NVIDIA libcufile ($MIB MiB, hot and cold, 1 and 8 threads)"
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
			python3 bench/report --add-dropin "$LOGS/cufile-dropin.log" "$res"
		else
			echo "drop-in bench or library not built (bench: '$dbench', library: '$dlib')"
		fi
		rm -f $F
	fi
fi

pyenv() {
	OPENDS_LIBRARY=$PWD/build-gpu/src/libopends.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} "$@"
}
if [ "${SAFETENSORS:-1}" = 1 ] && in_part 2; then
	if [ "$(left)" -lt 60 ]; then
		skipped "E: safetensors"
	else
		begin "E: safetensors load, P7"
		pyenv timeout $(($(left) - 45)) python3 python/bench_safetensors.py --size-gib 2 --runs 2 --dir /var/tmp \
			--out "$LOGS/safetensors.csv" 2>&1 | tail -12
		[ -s "$LOGS/safetensors.csv" ] && python3 bench/report --add-safetensors "$LOGS/safetensors.csv" "$res"
	fi
fi
if [ "${MANY:-1}" = 1 ] && in_part 2; then
	if [ "$(left)" -lt 45 ]; then
		skipped "F: many tensors"
	else
		begin "F: 20,000 small tensors vs one file (issue 22)"
		pyenv timeout $(($(left) - 15)) python3 python/bench_many_tensors.py --device cuda:0 --runs 5 --dir /var/tmp \
			--loaders opends,opends-readfirst,opends-pyparse,safetensors,fastsafetensors 2>&1 | tee "$LOGS/many-tensors.log"
		python3 bench/report --add-many-tensors "$LOGS/many-tensors.log" "$res"
	fi
fi

# C2 (this round's A/B, when time is left): each switch a helper landed on,
# off, beside C's and B's default rows: the caller's large-piece write
# (OPENDS_WRITE_PIECE=0: the engine's way), the inline path's page-cache
# probe on every read (OPENDS_AB_INLINE_PROBE=always), the direct stream
# path off (OPENDS_STREAM_DIRECT=0), and hot small files with 16 workers
if [ "${AB:-1}" = 1 ] && in_part 2; then
	OPENDS_WRITE_PIECE=0 BENCH_KV=0 bench "C2: write16m/write8t with OPENDS_WRITE_PIECE=0 (A/B)" 60 10 \
		--datasets none --write-size "${WRITE_SIZE:-4G}" --callers write16m,write8t --no-baselines --tag wp0
	OPENDS_AB_INLINE_PROBE=always BENCH_KV=0 bench "C2: files1t with OPENDS_AB_INLINE_PROBE=always (A/B)" 40 10 \
		--datasets none --callers files1t --no-baselines --tag probea
	OPENDS_STREAM_DIRECT=0 BENCH_KV=0 bench "C2: imagenetish hot stream with OPENDS_STREAM_DIRECT=0 (A/B)" 40 10 \
		--datasets imagenetish --legs imagenetish:stream:hot --stream-flags 0 --callers none --no-baselines --tag nodirect
	OPENDS_IO_THREADS=16 BENCH_KV=0 bench "C2: imagenetish hot async/batch with OPENDS_IO_THREADS=16 (A/B)" 40 10 \
		--datasets imagenetish --legs imagenetish:async:hot,imagenetish:batch:hot --callers none \
		--no-baselines --tag t16
fi

# a PART's records under their own name, so the halves can share a folder
[ -n "$part" ] && [ -f "$res/records.csv" ] && mv "$res/records.csv" "$res/records$sfx.csv"
begin "report"
python3 bench/report "$res"
sed -n '/### Summary/,/### Datasets/p' "$res/report.md" | head -40
sed -n '/### Callers/,/### Ceilings/p' "$res/report.md" | head -30
cp "$res/report.md" "$LOGS/" 2>/dev/null
rm -rf "$data/callers-write.bin" "$data/callers-write-kvikio.bin"
pack "$res"
step "done ($(elapsed) s)"
