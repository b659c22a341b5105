#!/bin/sh
# opends-info as scripts use it: --help/--version exit 0, a bad option 2,
# a missing path or a configuration the driver refuses 1, and --json one
# valid JSON object saying the same as the exit status.
# usage: run.sh <opends-info>       exit 0 pass, 77 skip (no python3), else fail
set -u
info=$1
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3 for the JSON checks"; exit 77; }
fails=0
expect() { # expect RC DESCRIPTION -- CMD...
	want=$1 what=$2
	shift 3
	"$@" >/tmp/opends-info-test.$$ 2>&1
	got=$?
	if [ "$got" -ne "$want" ]; then
		echo "FAIL: $what: exit $got, want $want"; cat /tmp/opends-info-test.$$; fails=$((fails + 1))
	else
		echo "ok: $what (exit $got)"
	fi
}
expect 0 "--help" -- "$info" --help
"$info" --help | grep -q '^usage: opends-info' || { echo "FAIL: --help prints no usage"; fails=$((fails + 1)); }
expect 0 "--version" -- "$info" --version
"$info" --version | grep -Eq '^opends-info \(OpenDS\) [0-9]+\.[0-9]+\.[0-9]+$' || { echo "FAIL: --version text"; fails=$((fails + 1)); }
expect 2 "unknown option" -- "$info" --no-such-option
expect 1 "missing path" -- "$info" /nonexistent/opends-info-path
expect 1 "invalid configuration" -- env OPENDS_IO_THREADS=abc "$info"
expect 1 "unknown backend" -- env OPENDS_BACKEND=nosuch "$info"
expect 0 "a good run" -- env OPENDS_BACKEND=ref "$info" "$0"

# --json: valid, and consistent with the exit status
check_json() { # check_json WANT_OPEN PYTHON_ASSERTIONS -- ENV...
	want=$1 asserts=$2
	shift 3
	env "$@" "$info" --json "$0" >/tmp/opends-info-json.$$
	python3 - "$want" "$asserts" /tmp/opends-info-json.$$ <<'PY' || fails=$((fails + 1))
import json, sys
want, asserts, path = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(path))
assert d["driver"]["open"] is (want == "open"), d["driver"]
assert [b["name"] for b in d["backends"]] == ["gds", "uring", "ref"], d["backends"]
assert [a["name"] for a in d["accelerators"]] == ["cuda", "host"], d["accelerators"]
assert any(b["name"] == "ref" and b["usable"] for b in d["backends"]) is (want == "open")
exec(asserts)
print("ok: --json", want)
PY
}
check_json open 'assert d["driver"]["backend"] == "ref" and d["configuration"]["OPENDS_BACKEND"] == "ref"; assert d["files"] and d["files"][0]["describe"]' -- OPENDS_BACKEND=ref
check_json closed 'assert d["driver"]["error"] == "OPENDS_DRIVER_INVALID_PROPS" and "OPENDS_IO_THREADS" in d["driver"]["detail"]' -- OPENDS_IO_THREADS=abc
check_json open 'assert d["configuration"]["OPENDS_CUFILE_LIBRARY"] == "/x/" + chr(34) + "q" + chr(34) + chr(92) + "y"' -- 'OPENDS_CUFILE_LIBRARY=/x/"q"\y'
check_json open 'assert d["devices"] == []' -- OPENDS_ACCEL=host OPENDS_BACKEND=ref
check_json closed 'assert d["devices"] == []' -- OPENDS_IO_THREADS=abc

# every device, on three simulated ones (hostdev's test-only topology: device 1's node unknown)
devs="OPENDS_ACCEL=hostdev OPENDS_BACKEND=ref OPENDS_HOSTDEV_DEVICES=3 OPENDS_HOSTDEV_NUMA=0,-1,1"
env $devs "$info" >/tmp/opends-info-test.$$ 2>&1
sed -n '/^devices:/,/^$/p' /tmp/opends-info-test.$$ >/tmp/opends-info-devs.$$
cat >/tmp/opends-info-want.$$ <<'WANT'
devices: 3
  hostdev:0 simulated device, NUMA node 0; peers hostdev:1, hostdev:2
  hostdev:1 simulated device, NUMA node unknown; peers hostdev:0, hostdev:2
  hostdev:2 simulated device, NUMA node 1; peers hostdev:0, hostdev:1

WANT
if cmp -s /tmp/opends-info-devs.$$ /tmp/opends-info-want.$$; then
	echo "ok: devices (text)"
else
	echo "FAIL: devices (text):"; diff /tmp/opends-info-want.$$ /tmp/opends-info-devs.$$; fails=$((fails + 1))
fi
check_json open '
expect = [dict(index=i, layer="hostdev", name="simulated device", pci_bus_id=None, numa_node=n, pcie_gen=None,
             pcie_width=None, peers=[j for j in range(3) if j != i], nvlink_peers=[]) for i, n in enumerate([0, None, 1])]
got = [{k: v for k, v in x.items() if k != "describe"} for x in d["devices"]]
assert got == expect, got
assert d["devices"][1]["describe"] == "hostdev:1 simulated device, NUMA node unknown; peers hostdev:0, hostdev:2"' -- $devs

# the source libraries: a librados that cannot be loaded is named, with the path it was looked for at
check_json open '
assert [s["library"] for s in d["sources"]] == ["librados", "libradosstriper", "libcephfs"], d["sources"]
assert d["sources"][0]["found"] is False and "/nonexistent/opends-info/librados.so.2" in d["sources"][0]["describe"]
assert d["sources"][1]["found"] is False' -- OPENDS_BACKEND=ref OPENDS_RADOS_LIBRARY=/nonexistent/opends-info/librados.so.2
env OPENDS_BACKEND=ref "$info" >/tmp/opends-info-test.$$ 2>&1
if grep -q '^source libraries (loaded at run time):$' /tmp/opends-info-test.$$ && grep -Eq '^  librados: ' /tmp/opends-info-test.$$; then
	echo "ok: source libraries (text)"
else
	echo "FAIL: source libraries (text):"; cat /tmp/opends-info-test.$$; fails=$((fails + 1))
fi
rm -f /tmp/opends-info-test.$$ /tmp/opends-info-json.$$ /tmp/opends-info-devs.$$ /tmp/opends-info-want.$$
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "opends-info OK"
