#!/bin/bash
# SPDX-License-Identifier: MIT
# Real conversations between two hosts, captured twice and decoded by
# decoders that are not ours (issue 9, "independent decoders"): two
# network namespaces joined by a veth (tests/compat/netns_lib.sh), a
# daemon in each; tcpdump on B's veth and `softverbs capture` of A's
# daemon record, while UNMODIFIED programs talk across over IPv4 GIDs:
#
#   ibv_rc_pingpong      RC SEND first/middle/last, ACKs
#   ib_write_bw          RDMA WRITE first/last
#   ib_read_bw           RDMA READ request and responses
#   ib_atomic_bw         fetch-and-add, atomic ACKs
#   ibv_ud_pingpong      UD SEND with DETH
#   ib_send_lat          a ping-pong: each ACK the answer's train's
#                        second segment (IPv4 identification 1)
#   rping                the rdma_cm handshake: CM MADs on QP1
#
# and, captured apart, fi_pingpong over libfabric's verbs;ofi_rxm, whose
# ACKs must ride with the answers too though rxm polls between them,
# then tests/compat/wire_decode.py checks each capture with Debian's tshark
# (every packet InfiniBand over UDP 4791, opcode, QPN, PSN, nothing
# malformed) and Debian's scapy RoCE layer (same fields, and its ICRC
# equals the packet's).  Both captures must hold each opcode family.
# Root only: SKIP (77) otherwise.
set -u

here=$(cd "$(dirname "$0")" && pwd)
SV=${SOFTVERBS:-${SV_BUILD_DIR:-$here/../../build}/bin/softverbs}
export SOFTVERBS_IDLE_TIMEOUT=120
TMO=${PAIRS_TIMEOUT:-60}
# shellcheck source=tests/compat/pairs_lib.sh
. "$here/pairs_lib.sh"
# shellcheck source=tests/compat/netns_lib.sh
. "$here/netns_lib.sh"

for t in tshark tcpdump /usr/bin/python3; do
	command -v "$t" >/dev/null || { echo "SKIP: $t missing (scripts/deps.sh)"; exit 77; }
done
/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null ||
	{ echo "SKIP: python3-scapy missing (scripts/deps.sh)"; exit 77; }
why=$(netns_require) || { echo "$why"; exit 77; }
netns_setup || { echo "wire_capture: cannot set up the namespaces"; exit 1; }
netns_daemon a && netns_daemon b || { echo "wire_capture: no daemons"; exit 1; }
TMP=$(mktemp -d)
CAP_PID=
stop_capture() {
	[ -n "$CAP_PID" ] || return 0
	kill -INT "$CAP_PID" 2>/dev/null
	wait "$CAP_PID" 2>/dev/null
	CAP_PID=
}
trap 'stop_capture; netns_cleanup; [ -n "${WIRE_CAPTURE_KEEP:-}" ] || rm -rf "$TMP"' EXIT
PAIR_SRV_NS=$NS_B
PAIR_CLI_NS=$NS_A
PAIR_ADDR=$NS_B_IP4

G=$(ns_a "$SV" devices --json |
	sed -n "s/.*\"index\": \([0-9]*\), \"gid\": \"::ffff:$NS_A_IP4\".*/\1/p")
[ -n "$G" ] || { echo "wire_capture: no GID for $NS_A_IP4"; exit 1; }

netns_capture b "$TMP/veth.pcap" || exit 1
ip netns exec "$NS_A" "$SV" capture -w "$TMP/sv.pcap" 2>"$TMP/sv.log" &
CAP_PID=$!
# The capture runs once the key table counts it (roce_gen reads it).
for _ in $(seq 1 100); do
	[ "$(ns_a "$(dirname "$SV")/roce_gen" count 2>/dev/null)" = 1 ] && break
	sleep 0.05
done

fail=0
# acks_behind PCAP MIN WHAT: at least MIN ACKs in PCAP left as the second
# segment of their answer's train (eng_wire.c ack_behind): IPv4
# identification 1, their ICRCs made for it (the decoders check those).
acks_behind() {
	local n
	n=$(tshark -r "$1" -Y "infiniband.bth.opcode == 17 && ip.id == 1" 2>/dev/null | wc -l)
	if [ "$n" -ge "$2" ]; then
		echo "ok $3: $n ACKs as the second segment of a train"
	else
		echo "FAIL $3: $n ACKs as a train's second segment, want at least $2"
		fail=1
	fi
}
pair() { # NAME PROGRAM ARGS...
	local name=$1
	shift
	mkdir -p "$TMP/$name"
	if pairs_run "$TMP/$name" "$TMO" "$@"; then
		echo "ok $name (across)"
	else
		echo "FAIL $name: server $PAIR_SRV_RC, client $PAIR_CLI_RC"
		sed 's/^/   server | /' "$TMP/$name/server.out" | tail -15
		sed 's/^/   client | /' "$TMP/$name/client.out" | tail -15
		fail=1
	fi
}
pair rc_pingpong ibv_rc_pingpong -g "$G" -n 20 -s 3000
pair write_bw ib_write_bw -x "$G" -n 20 -s 8192
pair read_bw ib_read_bw -x "$G" -n 20 -s 4096
pair atomic_bw ib_atomic_bw -x "$G" -n 20
pair ud_pingpong ibv_ud_pingpong -g "$G" -n 20 -s 512
# A ping-pong: each side's ACK leaves with its answer, as the last
# segment of the answer's train (eng_wire.c ack_behind).
pair send_lat ib_send_lat -x "$G" -n 200 -s 8

# rping: its handshake's MADs on QP1 (and its data on RC).
ns_b timeout -k 5 "$TMO" "$SV" run rping -s -a "$NS_B_IP4" -p 7174 -C 5 -V \
	>"$TMP/rping_s.out" 2>&1 &
rs=$!
for _ in $(seq 1 200); do
	ns_b "$SV" res show cm_id 2>/dev/null | grep -q "state LISTEN .* port 7174 " && break
	sleep 0.05
done
if ns_a timeout -k 5 "$TMO" "$SV" run rping -c -a "$NS_B_IP4" -p 7174 -C 5 -V \
	>"$TMP/rping_c.out" 2>&1 && wait "$rs"; then
	echo "ok rping (across)"
else
	echo "FAIL rping"; tail -n 5 "$TMP/rping_c.out" "$TMP/rping_s.out"
	fail=1
fi
wait "$rs" 2>/dev/null

# capture_settle FILE [MIN]: waits (10 s at most) until tcpdump has
# written at least MIN packets to FILE and its count stops growing: it
# drops what it has not read when stopped (netns_lib.sh).
capture_settle() {
	local last=-1 n
	for _ in $(seq 1 50); do
		n=$(netns_capture_count "$1")
		[ "$n" -ge "${2:-0}" ] && [ "$n" = "$last" ] && return 0
		last=$n
		sleep 0.2
	done
}

# Everything sent has been seen: the veth's count stops growing.
capture_settle "$TMP/veth.pcap"
netns_capture_stop
stop_capture
echo "   tcpdump on B's veth: $(netns_capture_count "$TMP/veth.pcap") packets;" \
	"softverbs capture in A: $(tail -2 "$TMP/sv.log" | tr '\n' ' ')"

# Opcodes every capture must hold: SEND first/middle/last (0-2), SEND
# only (4), WRITE first/last with immediate or only (6, 9/11), READ
# request and responses (12, 13, 15 or 16), ACK (17), atomic ACK (18),
# fetch-and-add (20), UD SEND only (100).
OPS=0,4,12,17,18,20,100
for f in veth sv; do
	/usr/bin/python3 "$here/wire_decode.py" "$TMP/$f.pcap" --min 200 \
		--opcodes "$OPS" --name "$f capture" || fail=1
done
# QP1's CM MADs are in both: UD SEND to QP 1.
for f in veth sv; do
	n=$(tshark -r "$TMP/$f.pcap" \
		-Y "infiniband.bth.destqp == 1" 2>/dev/null | wc -l)
	if [ "$n" -ge 4 ]; then
		echo "ok $f capture: $n packets to QP1 (CM MADs)"
	else
		echo "FAIL $f capture: $n packets to QP1, want the CM handshake's"
		fail=1
	fi
done
# Streams leave in UDP_SEGMENT trains (eng_wire.c "Trains"), which the
# veth cut as a NIC would: IPv4 segments after a train's first carry
# identification 1, 2, ... (their ICRCs, made for it, were checked
# above), and no datagram is above the path MTU (the veth's 1500).
n=$(tshark -r "$TMP/veth.pcap" -Y "udp.dstport == 4791 && ip.id > 0" 2>/dev/null | wc -l)
big=$(tshark -r "$TMP/veth.pcap" -Y "udp.dstport == 4791 && ip.len > $NS_MTU" 2>/dev/null | wc -l)
if [ "$n" -ge 1 ] && [ "$big" = 0 ]; then
	echo "ok veth capture: $n segments of trains, none above the MTU"
else
	echo "FAIL veth capture: $n segments of trains (want some), $big datagrams above the MTU $NS_MTU"
	fail=1
fi
# The ping-pong's ACKs behind their answers.
acks_behind "$TMP/veth.pcap" 20 "veth capture"
# Trains handed over whole (the veths as they come: no gso_max_segs), so
# A's port reads aggregates (UDP_GRO): the kernel counts fewer UDP
# datagrams than softverbs counts packets, and `softverbs capture` still
# shows each packet alone, decoded and with its ICRC.
ns_a ip link set dev "$NS_IF_A" gso_max_segs 65535 2>/dev/null
ns_b ip link set dev "$NS_IF_B" gso_max_segs 65535 2>/dev/null
udp_in() { ns_a nstat -az 2>/dev/null | awk '$1 ~ /^Udp6?InDatagrams$/ { s += $2 } END { print s + 0 }'; }
rx_pkts() { ns_a "$SV" daemon status --json 2>/dev/null | sed -n 's/.*"rx_packets": *\([0-9][0-9]*\).*/\1/p'; }
ip netns exec "$NS_A" "$SV" capture -w "$TMP/gro.pcap" 2>"$TMP/gro.log" &
CAP_PID=$!
for _ in $(seq 1 100); do
	[ "$(ns_a "$(dirname "$SV")/roce_gen" count 2>/dev/null)" = 1 ] && break
	sleep 0.05
done
u0=$(udp_in)
p0=$(rx_pkts)
pair read_gro ib_read_bw -x "$G" -n 50 -s 65536
u1=$(udp_in)
p1=$(rx_pkts)
sleep 0.5
stop_capture
/usr/bin/python3 "$here/wire_decode.py" "$TMP/gro.pcap" --min 100 \
	--opcodes 12,13,14,15 --name "aggregates' capture" || fail=1
echo "   A: softverbs packets $p0 -> $p1, kernel UDP datagrams $u0 -> $u1"
if [ -n "$p0" ] && [ -n "$p1" ] && [ $((p1 - p0)) -gt $((u1 - u0)) ]; then
	echo "ok aggregates: $((p1 - p0)) packets in $((u1 - u0)) UDP datagrams"
else
	echo "FAIL aggregates: $((p1 - p0)) packets in $((u1 - u0)) UDP datagrams (want fewer datagrams)"
	fail=1
fi

# libfabric's rxm polls its CQ until it is empty before fi_pingpong
# answers: the ACK a poll kept stays kept over those polls and still
# leaves as the answer's second segment (eng_inbound.c sv_eng_drain_all,
# eng_wire.c sv_wire_flush_polled).  A hold of 1 ms, so that a loaded
# machine preempting the program between its polls does not decide.
if command -v fi_pingpong >/dev/null; then
	netns_capture b "$TMP/fi.pcap" || exit 1
	pairs_pick_port || exit 1
	ns_b env SOFTVERBS_TUNE=wire_ack_hold_ns=1000000 timeout -k 5 "$TMO" \
		"$SV" run fi_pingpong -p "verbs;ofi_rxm" -e rdm -B "$PAIR_PORT" \
		-S 8 -I 200 >"$TMP/fi_s.out" 2>&1 &
	fs=$!
	# Until it listens (a loaded machine may take long to start it), for
	# as long as it may run.
	end=$((SECONDS + TMO))
	until port_listening "$PAIR_PORT"; do
		[ $SECONDS -lt $end ] && kill -0 "$fs" 2>/dev/null || {
			echo "   fi_pingpong's server is not listening on $PAIR_PORT"
			break
		}
		sleep 0.05
	done
	if ns_a env SOFTVERBS_TUNE=wire_ack_hold_ns=1000000 timeout -k 5 "$TMO" \
		"$SV" run fi_pingpong -p "verbs;ofi_rxm" -e rdm -P "$PAIR_PORT" \
		-S 8 -I 200 "$NS_B_IP4" >"$TMP/fi_c.out" 2>&1 && wait "$fs"; then
		echo "ok fi_pingpong (across)"
	else
		echo "FAIL fi_pingpong"; tail -n 5 "$TMP/fi_c.out" "$TMP/fi_s.out"
		fail=1
	fi
	wait "$fs" 2>/dev/null
	# On a loaded machine tcpdump lags: what the check wants first.
	capture_settle "$TMP/fi.pcap" 300
	netns_capture_stop
	/usr/bin/python3 "$here/wire_decode.py" "$TMP/fi.pcap" --min 300 \
		--opcodes 4,17 --name "fi_pingpong capture" || fail=1
	acks_behind "$TMP/fi.pcap" 100 fi_pingpong
fi
# ib_write_lat: each side spins on its memory and never asks for the
# WRITE it waits for, but polls its send CQ for its own WRITE's ACK, and
# that ACK comes with the peer's WRITE: a poll that takes the WRITE keeps
# its ACK for the WRITE the program answers with, as the second segment
# of its train (eng_inbound.c sv_eng_drain_all), as for a SEND.  (A WRITE
# the progress thread takes -- the program was preempted -- is ACKed at
# once: a share of them only, more on a loaded machine.)  The hold of
# 1 ms as above.
netns_capture b "$TMP/wl.pcap" || exit 1
SOFTVERBS_TUNE=wire_ack_hold_ns=1000000 pair write_lat ib_write_lat \
	-x "$G" -n 300 -s 8
capture_settle "$TMP/wl.pcap" 400
netns_capture_stop
/usr/bin/python3 "$here/wire_decode.py" "$TMP/wl.pcap" --min 400 \
	--opcodes 10,17 --name "write_lat capture" || fail=1
acks_behind "$TMP/wl.pcap" 20 write_lat
[ $fail = 0 ] && echo "all decoded"
exit $fail
