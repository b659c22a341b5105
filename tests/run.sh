#!/usr/bin/env bash
# Run every test OpenDS has on this machine: the meson suites (CPU tests;
# GPU tests skip with 77 where there is no GPU) and the Python tests.
#   tests/run.sh                 build in build/ and test
#   tests/run.sh --sanitize      the same in build-asan/ with ASan + UBSan
# OPENDS_MESON_ARGS adds options to a fresh meson setup.
# Ends with one line "N passed, N failed, N skipped"; exits non-zero on any
# failure. With OPENDS_COUNTS=file, also appends "passed failed skipped".
set -u
cd "$(dirname "$0")/.."

builddir=build
# extra meson options for a fresh setup, e.g. -Dcufile_include=DIR
read -r -a setup_args <<<"${OPENDS_MESON_ARGS:-}"
if [ "${1:-}" = "--sanitize" ]; then
	builddir=build-asan
	setup_args+=(-Db_sanitize=address,undefined -Db_lundef=false)
	# leak checks stay on; abort on the first UBSan report so it fails
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi

if [ ! -f "$builddir/build.ninja" ]; then
	meson setup "$builddir" "${setup_args[@]}" || { echo "0 passed, 1 failed"; exit 1; }
fi
ninja -C "$builddir" || { echo "0 passed, 1 failed"; exit 1; }

meson test -C "$builddir" --print-errorlogs --num-processes 2
meson_rc=$?
# A line that does not parse (a log cut short when meson was stopped)
# counts as a failure: the summary must never read "0 failed" over a run
# that did not finish.
counts=$(python3 - "$builddir/meson-logs/testlog.json" <<'PY'
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    try:
        r = json.loads(line).get("result")
    except ValueError:
        f += 1
        continue
    if r in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif r == "SKIP":
        s += 1
    else:
        f += 1
print(p, f, s)
PY
)
read -r passed failed skipped <<<"$counts"
[ -n "$failed" ] || { passed=0; failed=1; skipped=0; echo "tests/run.sh: meson's test log could not be read" >&2; }
# meson failed without a failing test in its log (stopped, or a setup error)
[ "$meson_rc" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1

# Python tests, when the package and pytest are there.
if [ -d python/tests ]; then
	py=python3
	$py -c 'import pytest' 2>/dev/null || py=/usr/bin/python3
	if $py -c 'import pytest' 2>/dev/null; then
		xml=$builddir/pytest.xml
		rm -f "$xml"
		preload=
		if [ "$builddir" = build-asan ]; then
			# the interpreter is not instrumented: load the sanitizer
			# runtimes first, and leave leak checking to the C tests
			# (CPython keeps memory alive until exit by design)
			preload="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
		fi
		LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
			OPENDS_LIBRARY="$PWD/$builddir/src/libopends.so" PYTHONPATH="$PWD/python" \
			$py -m pytest -q python/tests tests/bench --junitxml="$xml"
		read -r pp pf ps <<<"$([ -f "$xml" ] && $py - "$xml" <<'PY'
import sys, xml.etree.ElementTree as ET
t = ET.parse(sys.argv[1]).getroot()
suites = [t] if t.tag == "testsuite" else list(t)
n = sum(int(s.get("tests", 0)) for s in suites)
f = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
sk = sum(int(s.get("skipped", 0)) for s in suites)
print(n - f - sk, f, sk)
PY
)"
		[ -n "$pp" ] || { pp=0; pf=1; ps=0; }
		passed=$((passed + pp)); failed=$((failed + pf)); skipped=$((skipped + ps))
	else
		echo "pytest not found: Python tests not run" >&2
		failed=$((failed + 1))
	fi
fi

[ -n "${OPENDS_COUNTS:-}" ] && echo "$passed $failed $skipped" >>"$OPENDS_COUNTS"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
