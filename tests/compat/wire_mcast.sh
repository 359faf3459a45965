#!/bin/bash
# SPDX-License-Identifier: MIT
# Multicast with UNMODIFIED mckey (rdmacm-utils): rdma_join_multicast,
# the MULTICAST_JOIN event's address handle, UD sends to QP 0xFFFFFF and
# rdma_leave_multicast, through our librdmacm and libibverbs.
#
#   one_host      a sender and two receivers in one namespace (the
#                 receivers' copies come from the sender's engine)
#   across_ipv4   the sender in namespace S, one receiver in R1 and one in
#   across_ipv6   R2, on a bridge in S (IPv4 group 239.51.100.9, IPv6
#                 ff0e::5133:9): a tcpdump on the bridge must hold the
#                 receivers' IGMP (MLD) reports for the group and every
#                 message as RoCE v2 -- UDP 4791 to the group's address,
#                 BTH destination QP 0xFFFFFF, decoded by tshark when it
#                 is there
#
#   wire_mcast.sh [NAME...]   (none: all; exit 77 = SKIP: not root, no
#                             namespaces, no mckey or tcpdump)
#
# Each mckey runs bounded by a timeout; the receivers must print "data
# transfers complete" and "return status 0" and exit 0.  Addresses are from
# the documentation ranges only (198.51.100.0/24, 2001:db8::/32); the
# namespaces, the bridge and the veths are this test's and go at exit.
set -u

here=$(cd "$(dirname "$0")" && pwd)
SV=${SOFTVERBS:-${SV_BUILD_DIR:-$here/../../build}/bin/softverbs}
TMO=60
TAG=$$
NS_S=svmc-s-$TAG
NS_R1=svmc-r1-$TAG
NS_R2=svmc-r2-$TAG
BR=svbr$TAG
export SOFTVERBS_SOCKET=svtest.mcast.$TAG
export SOFTVERBS_IDLE_TIMEOUT=120
OUT=$(mktemp -d /tmp/wire_mcast.XXXXXX)
PIDS=()
CAP_PID=

fail() {
	echo "wire_mcast: FAIL: $*"
	for f in "$OUT"/*.out; do
		[ -e "$f" ] && { echo "--- $f"; tail -20 "$f"; }
	done
	exit 1
}

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: network namespaces need root"
	exit 77
fi
for t in ip mckey tcpdump stdbuf; do
	command -v $t >/dev/null ||
		{ echo "SKIP: $t missing (scripts/deps.sh installs it)"; exit 77; }
done
[ -x "$SV" ] || { echo "wire_mcast: no $SV (SV_BUILD_DIR?)"; exit 1; }

cleanup() {
	local p ns
	[ -n "$CAP_PID" ] && kill -TERM "$CAP_PID" 2>/dev/null
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for ns in "$NS_S" "$NS_R1" "$NS_R2"; do
		if ip netns list 2>/dev/null | grep -qw "$ns"; then
			ip netns exec "$ns" "$SV" daemon stop >/dev/null 2>&1
			for p in $(ip netns pids "$ns" 2>/dev/null); do
				kill -9 "$p" 2>/dev/null
			done
			ip netns del "$ns" 2>/dev/null
		fi
	done
	rm -rf "$OUT"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# S holds the bridge (its own address on it); R1 and R2 hang off it.
setup() {
	local n=0 ns
	ip netns add "$NS_S" || { echo "SKIP: cannot create namespaces"; exit 77; }
	ip netns add "$NS_R1" && ip netns add "$NS_R2" || fail "namespaces"
	in_ns "$NS_S" ip link add "$BR" type bridge mcast_snooping 0 || fail "bridge"
	for ns in "$NS_R1" "$NS_R2"; do
		n=$((n + 1))
		in_ns "$NS_S" ip link add "svm$n$TAG" type veth peer name e0 netns "$ns" &&
			in_ns "$NS_S" ip link set "svm$n$TAG" master "$BR" up &&
			in_ns "$ns" ip addr add "198.51.100.$((n + 1))/24" dev e0 &&
			in_ns "$ns" ip -6 addr add "2001:db8::$((n + 1))/64" dev e0 nodad &&
			in_ns "$ns" ip link set lo up && in_ns "$ns" ip link set e0 up ||
			fail "veth to $ns"
	done
	in_ns "$NS_S" ip addr add 198.51.100.1/24 dev "$BR" &&
		in_ns "$NS_S" ip -6 addr add 2001:db8::1/64 dev "$BR" nodad &&
		in_ns "$NS_S" ip link set lo up && in_ns "$NS_S" ip link set "$BR" up ||
		fail "bridge address"
	for ns in "$NS_R1" "$NS_R2"; do
		for n in $(seq 1 100); do
			in_ns "$ns" ping -c1 -W1 198.51.100.1 >/dev/null 2>&1 && break
			[ "$n" = 100 ] && fail "no link from $ns"
		done
	done
	for ns in "$NS_S" "$NS_R1" "$NS_R2"; do
		in_ns "$ns" env SOFTVERBS_IDLE_TIMEOUT=0 "$SV" daemon start >/dev/null ||
			fail "no daemon in $ns"
	done
}

# wait_for FILE TEXT: until FILE holds TEXT (TMO seconds at most).
wait_for() {
	local i
	for i in $(seq 1 $((TMO * 10))); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "no '$2' in $1"
}

# receiver NAME NS BIND GROUP: mckey receiving 10 messages, in the
# background, once it has joined.
receiver() {
	in_ns "$2" timeout $TMO "$SV" run stdbuf -oL mckey -m "$4" -b "$3" -C 10 \
		>"$OUT/$1.out" 2>&1 &
	PIDS+=($!)
	eval "pid_$1=$!"
	wait_for "$OUT/$1.out" "joined dgid"
}

# check_receiver NAME: it got its 10 messages and left.
check_receiver() {
	local pid
	eval "pid=\$pid_$1"
	wait "$pid" || fail "receiver $1 exited $?"
	grep -q "data transfers complete" "$OUT/$1.out" &&
		grep -q "return status 0" "$OUT/$1.out" ||
		fail "receiver $1 did not complete"
}

sender() {
	in_ns "$1" timeout $TMO "$SV" run stdbuf -oL mckey -m "$3" -b "$2" -s -C 10 \
		>"$OUT/sender.out" 2>&1 || fail "sender exited $?"
	grep -q "return status 0" "$OUT/sender.out" || fail "sender failed"
}

one_host() {
	receiver a "$NS_S" 198.51.100.1 239.51.100.8
	receiver b "$NS_S" 198.51.100.1 239.51.100.8
	sender "$NS_S" 198.51.100.1 239.51.100.8
	check_receiver a
	check_receiver b
}

# across FAMILY: the sender in S, a receiver in R1 and in R2, captured on
# the bridge from before the receivers join.
across() {
	local v=$1 grp s r1 r2 cap=$OUT/bridge.pcap n bth
	# BTH after the UDP header (tcpdump's udp[] is IPv4's alone).
	if [ "$v" = 4 ]; then
		grp=239.51.100.9 s=198.51.100.1 r1=198.51.100.2 r2=198.51.100.3
		bth="udp[8] = 0x65 and (udp[12:4] & 0xffffff) = 0xffffff"
	else
		grp=ff0e::5133:9 s=2001:db8::1 r1=2001:db8::2 r2=2001:db8::3
		bth="ip6[48] = 0x65 and (ip6[52:4] & 0xffffff) = 0xffffff"
	fi
	in_ns "$NS_S" tcpdump -i "$BR" -U --immediate-mode -n -Z root -w "$cap" \
		"igmp or ip6 or udp port 4791" 2>"$OUT/tcpdump.log" &
	CAP_PID=$!
	wait_for "$OUT/tcpdump.log" "listening on"
	receiver r1 "$NS_R1" $r1 $grp
	receiver r2 "$NS_R2" $r2 $grp
	sender "$NS_S" $s $grp
	check_receiver r1
	check_receiver r2
	# Every message on the wire to the group (tcpdump writes each packet
	# as it comes: wait for them before it stops).
	for n in $(seq 1 $((TMO * 10))); do
		[ "$(tcpdump -r "$cap" -n "udp dst port 4791 and dst host $grp" 2>/dev/null |
			wc -l)" -ge 10 ] && break
		sleep 0.1
	done
	kill -TERM "$CAP_PID" 2>/dev/null
	wait "$CAP_PID" 2>/dev/null
	CAP_PID=
	n=$(tcpdump -r "$cap" -n "udp dst port 4791 and dst host $grp" 2>/dev/null | wc -l)
	[ "$n" -ge 10 ] || fail "$n RoCE v2 datagrams to $grp on the bridge, not 10"
	# BTH (after the 8-byte UDP header): UD SEND_ONLY_WITH_IMMEDIATE
	# (0x65, mckey's opcode), destination QP 0xFFFFFF.
	n=$(tcpdump -r "$cap" -n "udp dst port 4791 and dst host $grp and $bth" \
		2>/dev/null | wc -l)
	[ "$n" -ge 10 ] || fail "$n datagrams with BTH UD SEND_ONLY_IMM to QP 0xFFFFFF"
	if command -v tshark >/dev/null; then
		n=$(tshark -r "$cap" -Y "infiniband.bth.destqp == 0xffffff" 2>/dev/null | wc -l)
		[ "$n" -ge 10 ] || fail "tshark decodes $n InfiniBand BTHs to QP 0xFFFFFF"
	fi
	# The receivers' hosts told the network they joined.
	if [ "$v" = 4 ]; then
		n=$(tcpdump -r "$cap" -n -v igmp 2>/dev/null | grep -c "$grp")
		[ "$n" -ge 2 ] || fail "$n IGMP reports for $grp"
	else
		# (an MLD report comes behind a hop-by-hop header)
		n=$(tcpdump -r "$cap" -n -v ip6 2>/dev/null |
			grep -A3 "multicast listener report v2" | grep -c "$grp")
		[ "$n" -ge 2 ] || fail "$n MLDv2 reports for $grp"
	fi
	[ -n "${WIRE_MCAST_KEEP:-}" ] && cp "$cap" "$WIRE_MCAST_KEEP.ipv$v.pcap"
	rm -f "$cap"
}

across_ipv4() { across 4; }
across_ipv6() { across 6; }

ALL="one_host across_ipv4 across_ipv6"
[ $# -gt 0 ] || set -- $ALL
setup
for t in "$@"; do
	case " $ALL " in *" $t "*) ;; *) echo "wire_mcast: no case $t"; exit 2 ;; esac
	$t
	echo "ok $t"
done
