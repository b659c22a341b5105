#!/bin/bash
# Build and run the libFuzzer targets of tests/fuzz/ with clang:
#   tests/fuzz/run_fuzz.sh [SOURCE_ROOT [WORK_DIR [SECONDS [TARGETS...]]]]
# Each target is compiled from the library's sources (fuzz_config: only
# src/core/config.c and errors.c; fuzz_api: the core, the host layer and
# the ref backend; fuzz_stindex: the safetensors header indexer) with -fsanitize=fuzzer,address,undefined, then run for
# SECONDS (default 20) from its committed seed corpus tests/fuzz/corpus/
# <target>/ (new inputs go to WORK_DIR/corpus-<target>, not to the tree).
# Exit 0 pass, 77 when clang's libFuzzer is not available, else fail.
# Prints "figures: <target>: N executions in S s" for docs/reliability.md.
set -u
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
work=${2:-$src/build-fuzz}
secs=${3:-20}
shift $(( $# < 3 ? $# : 3 ))
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_config fuzz_api fuzz_stindex)
clang=${CLANG:-clang}
mkdir -p "$work" || exit 1

if ! command -v "$clang" >/dev/null 2>&1; then
	echo "SKIP: $clang not found"
	exit 77
fi
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
	>"$work/probe.c"
if ! "$clang" -fsanitize=fuzzer "$work/probe.c" -o "$work/probe" >"$work/probe.log" 2>&1; then
	echo "SKIP: $clang has no libFuzzer (-fsanitize=fuzzer): $(head -2 "$work/probe.log")"
	exit 77
fi

flags=(-g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
	-Wall -Wextra -Wno-missing-field-initializers -I"$src/include" -I"$src/src/core")
build() {
	case $1 in
	fuzz_config) "$clang" "${flags[@]}" "$src/tests/fuzz/fuzz_config.c" "$src/src/core/config.c" \
		"$src/src/core/errors.c" -o "$work/fuzz_config" ;;
	fuzz_api) "$clang" "${flags[@]}" "$src/tests/fuzz/fuzz_api.c" "$src"/src/core/*.c "$src"/src/sources/*.c \
		"$src/src/accel/host/host.c" "$src/src/accel/near.c" "$src/src/backends/ref/ref.c" -lpthread -ldl \
		-o "$work/fuzz_api" ;;
	fuzz_stindex) "$clang" "${flags[@]}" "$src/tests/fuzz/fuzz_stindex.c" "$src"/src/formats/*.c \
		"$src/src/core/errors.c" -lpthread -o "$work/fuzz_stindex" ;; # errors.c: its details (ods_fail)
	*) echo "unknown target $1"; return 1 ;;
	esac
}

rc=0
for t in "${targets[@]}"; do
	if ! build "$t" >"$work/$t.build.log" 2>&1; then
		cat "$work/$t.build.log"
		echo "FAIL: building $t"
		rc=1
		continue
	fi
	mkdir -p "$work/corpus-$t"
	ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0 \
		"$work/$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=3072 -print_final_stats=1 \
		-artifact_prefix="$work/$t-" "$work/corpus-$t" "$src/tests/fuzz/corpus/$t" >"$work/$t.log" 2>&1
	r=$?
	runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$')
	if [ $r -ne 0 ]; then
		tail -40 "$work/$t.log"
		echo "FAIL: $t found a problem; reproducer: $(ls "$work/$t"-* 2>/dev/null | head -1)"
		rc=1
	else
		echo "figures: $t: ${runs:-?} executions in $secs s, corpus $(ls "$work/corpus-$t" | wc -l) new + $(ls "$src/tests/fuzz/corpus/$t" | wc -l) seed inputs"
	fi
done
exit $rc
