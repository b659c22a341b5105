#!/usr/bin/env bash
# A one-node Ceph cluster for the rados tests: one monitor and one OSD
# (BlueStore on a sparse file, so memory stays small whatever is stored),
# no auth, pool "opends" of size 1, bound to 127.0.0.1 only, no manager.
#   tests/sources/ceph-cluster.sh start   prints the ceph.conf path when ready
#   tests/sources/ceph-cluster.sh stop    stops exactly the daemons start
#                                         recorded (PIDs in $dir/pids)
#   tests/sources/ceph-cluster.sh osd-pid prints the OSD's PID
# Env: OPENDS_CEPH_DIR (default ${TMPDIR:-/tmp}/opends-ceph),
#      OPENDS_CEPH_PORT (monitor port; default the first free one from 6789).
# A pids file whose daemons are all gone (a run that was killed) is cleared;
# one with a daemon still running refuses to start over it.
# Needs Debian's ceph-mon, ceph-osd, ceph-common (16.2, "pacific").
#
# Pitfalls handled (shared/research/distributed-sources.md §1.9): the ceph
# CLI now and then sends a command before it has the monitor map and is
# refused (retry every call); the OSD's own crush registration at boot
# races the monitor (placed by hand instead); "pg stat" needs a manager, so
# readiness is one write that succeeds; daemons fork away from us, so
# their PIDs come from their pid files.
set -u
D=${OPENDS_CEPH_DIR:-${TMPDIR:-/tmp}/opends-ceph}
. "$(dirname "$0")/ceph-common.sh"
C=$D/ceph.conf

port_used() { # something listens on 127.0.0.1:$1
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

cli() { # a ceph CLI call, retried
	local out i
	for i in $(seq 60); do
		if out=$(timeout 10 ceph -c "$C" "$@" 2>/dev/null); then
			echo "$out"
			return 0
		fi
		sleep 0.25
	done
	echo "ceph-cluster.sh: 'ceph $*' kept failing" >&2
	return 1
}

remember() { # name pidfile
	local i
	for i in $(seq 100); do [ -s "$2" ] && break; sleep 0.1; done
	[ -s "$2" ] || { echo "ceph-cluster.sh: $1 wrote no pid file" >&2; return 1; }
	echo "$1 $(cat "$2")" >>"$D/pids"
}

stop() {
	ceph_stop "$D/pids" ceph-cluster.sh
	rm -rf "$D/osd0/block" "$D/mon"
}

start() {
	for t in ceph-mon ceph-osd ceph monmaptool rados; do
		command -v $t >/dev/null || { echo "ceph-cluster.sh: $t not found (apt-get install ceph-mon ceph-osd ceph-common)" >&2; exit 77; }
	done
	if [ -f "$D/pids" ]; then
		local name pid
		while read -r name pid; do
			if ceph_alive "$pid"; then
				echo "ceph-cluster.sh: $name (pid $pid) of an earlier start in $D still runs: stop it first" >&2
				exit 1
			fi
		done <"$D/pids"
		echo "ceph-cluster.sh: clearing $D of an earlier run whose daemons are gone" >&2
	fi
	local PORT=${OPENDS_CEPH_PORT:-}
	if [ -n "$PORT" ]; then
		if port_used "$PORT"; then
			echo "ceph-cluster.sh: OPENDS_CEPH_PORT=$PORT is in use on 127.0.0.1" >&2
			exit 1
		fi
	else
		for PORT in $(seq 6789 6889) none; do
			port_used "$PORT" || break
		done
		[ "$PORT" = none ] && { echo "ceph-cluster.sh: no free port in 6789-6889 on 127.0.0.1" >&2; exit 1; }
	fi
	rm -rf "$D"
	mkdir -p "$D/mon" "$D/osd0" "$D/log"
	local fsid uuid id i n
	fsid=$(cat /proc/sys/kernel/random/uuid)
	ceph_conf "$D" "$fsid" "127.0.0.1:$PORT" 127.0.0.0/8 1 0 8589934592 >"$C"
	monmaptool --create --add a "127.0.0.1:$PORT" --fsid "$fsid" "$D/monmap" >/dev/null || return 1
	ceph-mon --mkfs -i a --monmap "$D/monmap" -c "$C" || return 1
	ceph-mon -i a -c "$C" </dev/null >>"$D/log/daemons.out" 2>&1 || return 1
	remember mon.a "$D/mon.a.pid" || return 1
	cli mon stat >/dev/null || return 1
	uuid=$(cat /proc/sys/kernel/random/uuid)
	id=$(cli osd new "$uuid") || return 1
	ceph-osd -i "$id" --mkfs --osd-uuid "$uuid" -c "$C" >"$D/log/osd-mkfs.log" 2>&1 ||
		{ echo "ceph-cluster.sh: osd mkfs failed, see $D/log/osd-mkfs.log" >&2; return 1; }
	cli osd crush add "osd.$id" 1.0 root=default host=localhost >/dev/null || return 1
	ceph-osd -i "$id" -c "$C" </dev/null >>"$D/log/daemons.out" 2>&1 || return 1
	remember "osd.$id" "$D/osd.$id.pid" || return 1
	for i in $(seq 300); do
		n=$(cli osd stat -f json | sed -n 's/.*"num_up_osds":\([0-9]*\).*/\1/p')
		[ "$n" = 1 ] && break
		sleep 0.2
	done
	[ "$n" = 1 ] || { echo "ceph-cluster.sh: the OSD did not come up" >&2; return 1; }
	cli osd pool create opends 16 >/dev/null || return 1
	cli osd pool application enable opends rados >/dev/null || true
	# a write blocks until its placement group is active: ready then
	timeout 120 rados -c "$C" -p opends put opends-ready-probe "$C" || return 1
	rados -c "$C" -p opends rm opends-ready-probe
	echo "$C"
}

case ${1:-} in
start)
	start || { rc=$?; [ $rc = 77 ] && exit 77; stop; exit 1; }
	;;
stop) stop ;;
osd-pid) awk '$1 ~ /^osd/ {print $2}' "$D/pids" ;;
*)
	echo "usage: $0 start|stop|osd-pid" >&2
	exit 2
	;;
esac
