# Sourced by ceph-cluster.sh (one node: CI) and multihost.sh (three OSD
# hosts in network namespaces): the ceph.conf both write, and stopping the
# daemons by the PIDs they recorded.

ceph_alive() { # running (a zombie counts as gone)
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	[ "$(echo "$st" | awk '{print $3}')" != Z ]
}

# ceph_stop PIDS_FILE LABEL: every daemon of "NAME PID" lines, last started
# first: resumed (a test may have stopped it) and asked to end, killed after
# 10 s; the file is removed.
ceph_stop() {
	local f=$1 label=$2 name pid left
	[ -f "$f" ] || return 0
	while read -r name pid; do
		ceph_alive "$pid" && kill -CONT "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null
	done < <(tac "$f")
	for _ in $(seq 100); do
		left=0
		while read -r name pid; do ceph_alive "$pid" && left=1; done <"$f"
		[ $left = 0 ] && break
		sleep 0.1
	done
	while read -r name pid; do
		ceph_alive "$pid" && kill -KILL "$pid" 2>/dev/null && echo "$label: killed $name ($pid)" >&2
	done <"$f"
	rm -f "$f"
}

# ceph_conf DIR FSID MON_ADDR NETWORK COPIES CHOOSELEAF BLOCK_BYTES: the
# ceph.conf text. No auth; daemons keep pid files, logs and sockets in DIR;
# BlueStore on a sparse file of BLOCK_BYTES per OSD (memstore would need
# twice the stored bytes in RAM); CHOOSELEAF 0 puts copies on OSDs of one
# host, 1 on different hosts. The caller adds per-OSD sections.
ceph_conf() {
	local d=$1 fsid=$2 mon=$3 net=$4 copies=$5 leaf=$6 block=$7
	cat <<CONF
[global]
fsid = $fsid
mon host = $mon
mon initial members = a
public network = $net
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = $copies
osd pool default min size = $((copies > 1 ? copies - 1 : 1))
osd crush chooseleaf type = $leaf
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
run dir = $d
pid file = $d/\$name.pid
log file = $d/log/\$name.log
admin socket = $d/\$name.\$pid.asok
ms bind ipv4 = true
ms bind ipv6 = false
osd objectstore = bluestore
bluestore block create = true
bluestore block size = $block
bluestore fsck on mkfs = false
osd memory target = 939524096
osd class update on start = false
osd crush update on start = false
[mon.a]
mon data = $d/mon
public addr = $mon
[osd]
osd data = $d/osd\$id
CONF
}
