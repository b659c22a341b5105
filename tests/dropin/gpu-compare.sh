#!/usr/bin/env bash
# On the GPU machine: the prebuilt cuFile programs (tests/dropin/prebuilt/)
# built against NVIDIA's cufile.h and libcufile.so.0 as users build them,
# each run against NVIDIA's library and against OpenDS's drop-in; their
# answers ("= name value" lines) are diffed and a summary printed. Exit 0
# when every program passes on both libraries with the same answers.
#
# usage: tests/dropin/gpu-compare.sh [builddir]     (default build-gpu)
#   the build must have the drop-in (bench/gpu-build.sh makes build-gpu);
#   NV_INC / NV_LIB override NVIDIA's header folder and library
#   (default /usr/local/cuda/include, /usr/local/cuda/lib64/libcufile.so.0),
#   CUDA_DIR the toolkit (cuda.h, lib64/stubs/libcuda.so; /usr/local/cuda);
#   logs go to $OUT (default ./gpu-out/compare).
# Runs: C program with host memory, with GPU 0's memory, and (two GPUs)
# with GPU 1's memory while GPU 1's context is current; the C++ program
# with host memory by LD_LIBRARY_PATH and by LD_PRELOAD; the shaped
# programs (cufile_sample_rw, _batch_poll, _async, _threads: prog.h) with
# host memory and with GPU 0's.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=$(cd "${1:-build-gpu}" && pwd) || exit 1
NV_INC=${NV_INC:-/usr/local/cuda/include}
NV_LIB=${NV_LIB:-/usr/local/cuda/lib64/libcufile.so.0}
OUT=${OUT:-$PWD/gpu-out}/compare
here=$PWD/tests/dropin/prebuilt
mkdir -p "$OUT"
[ -f "$B/src/dropin/cufile/libcufile.so.0" ] || { echo "no drop-in in $B (build it first)"; exit 1; }
[ -f "$NV_INC/cufile.h" ] && [ -f "$NV_LIB" ] || { echo "no NVIDIA cuFile at $NV_INC / $NV_LIB"; exit 1; }
nv_dir=$(dirname "$NV_LIB")

# The VM has no udev: cuFileHandleRegister fails with 5027 ("unable to get
# volume attributes") until the block device under the file has a record
# (docs: /work/shared/GPU-MACHINE.md). The files live in /var/tmp (ext4).
work=/var/tmp/cufile-compare
rm -rf "$work" && mkdir -p "$work" || exit 1
mkdir -p /run/udev/data
dev=$(stat -c '%Hd:%Ld' "$work")
[ -f "/run/udev/data/b$dev" ] ||
	printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n' >"/run/udev/data/b$dev"

# build as users do (the C++ program with --as-needed, Ubuntu's default)
CUDA_DIR=${CUDA_DIR:-/usr/local/cuda}
gcc -std=c11 -Wall -Wextra -O1 -DPROG_CUDA -I"$NV_INC" -I"$CUDA_DIR/include" "$here/cufile_prog.c" \
	-o "$OUT/cufile_prog" -L"$nv_dir" -l:libcufile.so.0 -L"$CUDA_DIR/lib64/stubs" -lcuda -ldl || exit 1
g++ -std=c++17 -Wall -Wextra -O1 -I"$NV_INC" "$here/cufile_prog.cpp" -o "$OUT/cufile_prog_cxx" \
	-Wl,--as-needed -L"$nv_dir" -l:libcufile.so.0 || exit 1
# the programs in real programs' shapes (prog.h), with device memory too
shaped="cufile_sample_rw.c cufile_batch_poll.c cufile_async.c cufile_threads.cpp"
# statistics structures: cufile.h 1.20 and later only
grep -q cuFileGetStatsL1 "$NV_INC/cufile.h" && shaped="$shaped cufile_stats.c"
for p in $shaped; do
	case $p in
	*.cpp) g++ -std=c++17 -Wall -Wextra -O1 -DPROG_CUDA -I"$NV_INC" -I"$CUDA_DIR/include" "$here/$p" \
		-o "$OUT/${p%.*}" -Wl,--as-needed -L"$nv_dir" -l:libcufile.so.0 -L"$CUDA_DIR/lib64/stubs" -lcuda -ldl \
		-pthread || exit 1 ;;
	*) gcc -std=c11 -Wall -Wextra -O1 -DPROG_CUDA -I"$NV_INC" -I"$CUDA_DIR/include" "$here/$p" -o "$OUT/${p%.*}" \
		-L"$nv_dir" -l:libcufile.so.0 -L"$CUDA_DIR/lib64/stubs" -lcuda -ldl || exit 1 ;;
	esac
done
echo "built against $NV_LIB (cuFile $(readlink -f "$NV_LIB" | sed 's/.*\.so\.//'))"
echo "the C++ program NEEDs: $(readelf -d "$OUT/cufile_prog_cxx" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
cd "$work" || exit 1 # NVIDIA's cuFile writes cufile.log into the working folder
runs=("c-host|cufile_prog|--mem=host" "c-gpu0|cufile_prog|--mem=device")
[ "$ngpu" -ge 2 ] && runs+=("c-gpu1|cufile_prog|--gpu=1")
runs+=("cxx-host|cufile_prog_cxx|")
for p in $shaped; do
	p=${p%.*}
	runs+=("${p#cufile_}-host|$p|--mem=host" "${p#cufile_}-gpu0|$p|--mem=device")
done

# the machine's own search path (libcuda.so.1 may be found through it) stays behind ours
keep=${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
same=0 differ=0 failed=0
summary=()
# one run: $1 name, $2 library (nvidia|dropin|preload), $3 program, $4 args
run1() {
	local log=$OUT/$1.$2.out rc
	mkdir -p "$work/$1.$2"
	case $2 in
	nvidia) LD_LIBRARY_PATH=$nv_dir$keep timeout 300 "$OUT/$3" $4 "$work/$1.$2" >"$log" 2>&1 ;;
	dropin) OPENDS_ACCEL=cuda LD_LIBRARY_PATH=$B/src/dropin/cufile:$B/src$keep timeout 300 "$OUT/$3" $4 \
		"$work/$1.$2" >"$log" 2>&1 ;;
	preload) OPENDS_ACCEL=cuda LD_PRELOAD=$B/src/dropin/cufile/libcufile.so.0 \
		LD_LIBRARY_PATH=$nv_dir:$B/src$keep timeout 300 "$OUT/$3" $4 "$work/$1.$2" >"$log" 2>&1 ;;
	esac
	rc=$?
	echo "$rc"
}
# The answer lines of one run ($1 name, $2 library). A function that
# NVIDIA's library lacks (the program says "= <function> absent": newer than
# the installed cuFile) has its answers left out of both sides: the
# drop-in mirrors cuFile 1.20 and has them all.
declare -A row_of=([cuFileExportPCIeTopology]=topology_ [cuFileDriverGetP2PFlags]=p2p_get_
	[cuFileDriverSetP2PFlags]=p2p_set_ [cuFileReadv]=readv [cuFileWritev]=writev)
absent_pattern() {
	local f pat='^= [^ ]* absent$'
	for f in $(sed -n 's/^= \(cuFile[A-Za-z0-9_]*\) absent$/\1/p' "$OUT/$1.nvidia.out" | sort -u); do
		[ -n "${row_of[$f]:-}" ] && pat="$pat|^= ${row_of[$f]}"
	done
	echo "$pat"
}
answers() {
	grep '^= ' "$OUT/$1.$2.out" | grep -Ev "$(absent_pattern "$1")"
}
skipped() {
	local n
	n=$(grep '^= ' "$OUT/$1.dropin.out" | grep -Ec "$(absent_pattern "$1")")
	[ "$n" = 0 ] || echo "; $n drop-in lines of functions NVIDIA's cuFile lacks not compared"
}
for r in "${runs[@]}"; do
	IFS='|' read -r name prog args <<<"$r"
	echo
	echo "=== $name: $prog $args"
	rc_nv=$(run1 "$name" nvidia "$prog" "$args")
	rc_od=$(run1 "$name" dropin "$prog" "$args")
	echo "NVIDIA: rc $rc_nv, $(grep -E '^(PASS|SKIP|FAIL)' "$OUT/$name.nvidia.out" | head -1)"
	echo "drop-in: rc $rc_od, $(grep -E '^(PASS|SKIP|FAIL)' "$OUT/$name.dropin.out" | head -1)"
	[ "$rc_od" = 0 ] || { grep -v '^[=#]' "$OUT/$name.dropin.out" | tail -5; }
	[ "$rc_nv" = 0 ] || { grep -v '^[=#]' "$OUT/$name.nvidia.out" | tail -5; }
	if [ "$rc_nv" = 77 ] && [ "$rc_od" = 77 ]; then
		verdict="skipped by both"
	elif ! grep -q '^= ' "$OUT/$name.dropin.out"; then
		verdict="no answers from the drop-in"
		differ=$((differ + 1))
	elif diff <(answers "$name" nvidia) <(answers "$name" dropin) >"$OUT/$name.diff"; then
		verdict="same answers ($(answers "$name" dropin | grep -c .) lines$(skipped "$name"))"
		[ "$rc_nv" = "$rc_od" ] && same=$((same + 1)) || differ=$((differ + 1))
	else
		verdict="answers differ: $(grep -c '^[<>]' "$OUT/$name.diff") lines (< NVIDIA, > drop-in$(skipped "$name"))"
		differ=$((differ + 1))
		cat "$OUT/$name.diff"
	fi
	[ "$rc_od" = 0 ] || [ "$rc_od" = 77 ] || failed=$((failed + 1))
	summary+=("$name: NVIDIA rc $rc_nv, drop-in rc $rc_od, $verdict")
done

echo
echo "=== cxx-host by LD_PRELOAD, NVIDIA's folder first on LD_LIBRARY_PATH"
rc_pre=$(run1 cxx-host preload cufile_prog_cxx "")
echo "rc $rc_pre: $(grep -E '^(PASS|FAIL)' "$OUT/cxx-host.preload.out" | head -1)"
[ "$rc_pre" = 0 ] || failed=$((failed + 1))
summary+=("cxx-host by LD_PRELOAD: rc $rc_pre")

cp "$work"/cufile.log "$OUT/" 2>/dev/null
cd / && rm -rf "$work"
echo
echo "=== SUMMARY (logs in $OUT)"
printf '%s\n' "${summary[@]}"
echo "$same runs with the same answers, $differ differ, $failed drop-in failures"
[ "$differ" = 0 ] && [ "$failed" = 0 ]
