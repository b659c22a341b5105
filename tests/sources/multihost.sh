#!/usr/bin/env bash
# The multi-host suite (on request, not in CI): a Ceph cluster of three OSD
# "hosts", each in its own network namespace, plus one for the monitor and
# the client, joined by a bridge in a namespace of its own. Addresses
# (198.18.0.0/24, the benchmarking range) exist only inside those
# namespaces: the machine's own network is never touched. The pool is
# replicated 3 times, one copy per host (crush: chooseleaf host), so every
# write crosses the bridge to three OSDs and reads go to each object's
# primary, wherever it is. The rados tests then run in the client's
# namespace, every backend x host/hostdev.
#   sudo tests/sources/multihost.sh [BUILD_DIR]     exit 0 pass, 77 skip, else fail
# Needs root, iproute2 (ip netns, bridge, veth) and Debian's ceph-mon,
# ceph-osd, ceph-common. Everything it starts is stopped by PID and every
# namespace deleted on the way out, also on failure or Ctrl-C.
# Env: OPENDS_MULTIHOST_DELAY (e.g. 200us): a netem delay on every host link.
set -u
B=${1:-build}
N=3
P=odsmh$$ # namespace prefix: one set per run
D=$(mktemp -d "${TMPDIR:-/tmp}/opends-multihost.XXXXXX")
C=$D/ceph.conf
HOSTS="${P}c $(seq -f "${P}o%g" 1 $N)"

skip() { echo "SKIP: $*"; rm -rf "$D"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "no ip (iproute2)"
for t in ceph-mon ceph-osd ceph monmaptool rados; do
	command -v $t >/dev/null || skip "$t not found (apt-get install ceph-mon ceph-osd ceph-common)"
done
[ -x "$B/tests/sources/test_rados_io" ] || { echo "FAIL: $B/tests/sources/test_rados_io not built"; exit 1; }
B=$(cd "$B" && pwd)

ns() { ip netns exec "$@"; }
. "$(dirname "$0")/ceph-common.sh"

cleanup() {
	ceph_stop "$D/pids" multihost
	for h in $HOSTS ${P}f; do ip netns del "$h" 2>/dev/null; done
	rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cli() { # a ceph CLI call from the client's namespace, retried (it may ask before it has the monitor map)
	local out
	for _ in $(seq 60); do
		if out=$(ns ${P}c timeout 10 ceph -c "$C" "$@" 2>/dev/null); then
			echo "$out"
			return 0
		fi
		sleep 0.25
	done
	echo "multihost: 'ceph $*' kept failing" >&2
	return 1
}
remember() {
	for _ in $(seq 100); do [ -s "$2" ] && break; sleep 0.1; done
	[ -s "$2" ] || { echo "multihost: $1 wrote no pid file" >&2; exit 1; }
	echo "$1 $(cat "$2")" >>"$D/pids"
}

# ---- the network: one bridge, one veth per host ----
ip netns add ${P}f || exit 1
ns ${P}f ip link add br0 type bridge
ns ${P}f ip link set br0 up
i=0
for h in $HOSTS; do
	i=$((i + 1))
	ip netns add "$h" || exit 1
	ns ${P}f ip link add "v$i" type veth peer name eth0 netns "$h" || exit 1
	ns ${P}f ip link set "v$i" master br0 up
	ns "$h" ip link set lo up
	ns "$h" ip addr add "198.18.0.$i/24" dev eth0
	ns "$h" ip link set eth0 up
	[ -n "${OPENDS_MULTIHOST_DELAY:-}" ] && ns "$h" tc qdisc add dev eth0 root netem delay "$OPENDS_MULTIHOST_DELAY"
done

# ---- the cluster ----
mkdir -p "$D/mon" "$D/log"
fsid=$(cat /proc/sys/kernel/random/uuid)
ceph_conf "$D" "$fsid" 198.18.0.1:6789 198.18.0.0/24 3 1 4294967296 >"$C"
for i in $(seq 1 $N); do
	printf '[osd.%d]\npublic addr = 198.18.0.%d\ncluster addr = 198.18.0.%d\n' $((i - 1)) $((i + 1)) $((i + 1)) >>"$C"
done
monmaptool --create --add a 198.18.0.1:6789 --fsid "$fsid" "$D/monmap" >/dev/null || exit 1
ns ${P}c ceph-mon --mkfs -i a --monmap "$D/monmap" -c "$C" || exit 1
ns ${P}c ceph-mon -i a -c "$C" </dev/null >>"$D/log/daemons.out" 2>&1 || exit 1
remember mon.a "$D/mon.a.pid"
cli mon stat >/dev/null || exit 1
for i in $(seq 1 $N); do
	uuid=$(cat /proc/sys/kernel/random/uuid)
	id=$(cli osd new "$uuid") || exit 1
	mkdir -p "$D/osd$id"
	ns "${P}o$i" ceph-osd -i "$id" --mkfs --osd-uuid "$uuid" -c "$C" >"$D/log/osd$id-mkfs.log" 2>&1 ||
		{ echo "multihost: osd.$id mkfs failed:"; tail -5 "$D/log/osd$id-mkfs.log"; exit 1; }
	cli osd crush add-bucket "host$i" host >/dev/null || exit 1
	cli osd crush move "host$i" root=default >/dev/null || exit 1
	cli osd crush add "osd.$id" 1.0 root=default "host=host$i" >/dev/null || exit 1
	ns "${P}o$i" ceph-osd -i "$id" -c "$C" </dev/null >>"$D/log/daemons.out" 2>&1 || exit 1
	remember "osd.$id" "$D/osd.$id.pid"
done
for _ in $(seq 300); do
	up=$(cli osd stat -f json | sed -n 's/.*"num_up_osds":\([0-9]*\).*/\1/p')
	[ "$up" = $N ] && break
	sleep 0.2
done
[ "$up" = $N ] || { echo "FAIL: $up of $N OSDs came up"; exit 1; }
cli osd pool create opends 32 >/dev/null || exit 1
cli osd pool application enable opends rados >/dev/null
ns ${P}c timeout 180 rados -c "$C" -p opends put opends-ready-probe "$C" || { echo "FAIL: the pool is not writable"; exit 1; }
cli osd tree | sed 's/^/  /'
echo "multihost: $N OSD hosts up (pool opends, 3 copies, one per host)"

# ---- the tests, from the client's namespace ----
fails=0
run() { # run NAME BACKEND ACCEL
	local out rc
	out=$(ns ${P}c env LD_LIBRARY_PATH="$B/src" OPENDS_TEST_CEPH_CONF="$C" OPENDS_BACKEND="$2" OPENDS_ACCEL="$3" \
		timeout 600 "$B/tests/sources/$1" 2>&1)
	rc=$?
	if [ $rc = 0 ]; then
		echo "ok: $1 $2 $3"
	else
		echo "FAIL: $1 $2 $3 (exit $rc)"
		echo "$out" | tail -15
		fails=$((fails + 1))
	fi
}
for be in ref uring; do
	for acc in host hostdev; do run test_rados_io $be $acc; done
done
run test_rados_misc uring host
[ $fails = 0 ] && echo "multihost: all passed" || echo "multihost: $fails failed"
[ $fails = 0 ]
