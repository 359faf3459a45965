#!/bin/bash
# SPDX-License-Identifier: MIT
# Proves the two-host harness (tests/compat/netns_lib.sh) before the tests
# between hosts rely on it: both namespaces come up with their documentation
# addresses; ping and UDP (IPv4 and IPv6, to port 4791) cross the veth;
# each namespace has its own softverbsd (another pid on the same socket
# name) whose `softverbs devices` lists that namespace's addresses as
# RoCE v2 GIDs and not the other's; the nftables loss rule drops about its
# share of UDP 4791 and nothing else; tcpdump on the veth sees the
# packets; and cleanup leaves nothing behind, also when the test is killed.
# Root only: exit 77 (skipped) otherwise.
set -u
here=$(dirname "$0")
. "$here/netns_lib.sh"
netns_require || exit 77
PY=/usr/bin/python3
TMP=$(mktemp -d)
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok $*"; }

# udp_recv NS FAMILY ADDR PORT SECONDS: a receiver in NS; prints how many
# datagrams arrived (bound and ready when its "ready" line is read).
udp_recv() {
	ns_in "$1" $PY -c '
import socket, sys, time
fam = socket.AF_INET6 if sys.argv[1] == "6" else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind((sys.argv[2], int(sys.argv[3])))
print("ready", flush=True)
s.settimeout(float(sys.argv[4]))
n = 0
try:
    while True:
        s.recv(2048)
        n += 1
        s.settimeout(0.5)
except socket.timeout:
    pass
print(n, flush=True)
' "$2" "$3" "$4" "$5"
}
# udp_send NS FAMILY ADDR PORT COUNT: COUNT datagrams of 200 bytes, paced.
udp_send() {
	ns_in "$1" $PY -c '
import socket, sys, time
fam = socket.AF_INET6 if sys.argv[1] == "6" else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
for i in range(int(sys.argv[4])):
    s.sendto(b"x" * 200, (sys.argv[2], int(sys.argv[3])))
    if i % 50 == 49:
        time.sleep(0.001)
' "$2" "$3" "$4" "$5"
}
# udp_through FAMILY DST PORT COUNT: sends COUNT from A to B; prints the
# number B received.
udp_through() {
	local fifo=$TMP/recv.$RANDOM n
	mkfifo "$fifo"
	udp_recv b "$1" "$2" "$3" 5 >"$fifo" &
	local rpid=$!
	exec 9<"$fifo"
	read -r -t 10 ready <&9
	udp_send a "$1" "$2" "$3" "$4"
	read -r -t 20 n <&9
	exec 9<&-
	wait $rpid
	rm -f "$fifo"
	echo "${n:-0}"
}

# ---- up, addresses, link
netns_setup || { fail "setup"; exit 1; }
ip netns list | grep -qw "$NS_A" && ip netns list | grep -qw "$NS_B" &&
	ok "namespaces $NS_A and $NS_B exist" || fail "namespaces missing"
ns_a ip -o addr show dev "$NS_IF_A" | grep -q "inet $NS_A_IP4/24" &&
	ns_a ip -o addr show dev "$NS_IF_A" | grep -q "inet6 $NS_A_IP6/64" &&
	ns_b ip -o addr show dev "$NS_IF_B" | grep -q "inet $NS_B_IP4/24" &&
	ns_b ip -o addr show dev "$NS_IF_B" | grep -q "inet6 $NS_B_IP6/64" &&
	ok "addresses from the documentation ranges" || fail "addresses"
[ "$(ns_a cat /sys/class/net/$NS_IF_A/mtu)" = 1500 ] &&
	[ "$(ns_b cat /sys/class/net/$NS_IF_B/mtu)" = 1500 ] &&
	ok "MTU 1500 on both ends" || fail "MTU"
ip link show "$NS_IF_A" >/dev/null 2>&1 && fail "veth visible in the root namespace" ||
	ok "veth only inside the namespaces"

# ---- ping and UDP
ns_a ping -c 2 -i 0.2 -W 2 "$NS_B_IP4" >/dev/null && ok "ping A -> B IPv4" || fail "ping IPv4"
ns_b ping -6 -c 2 -i 0.2 -W 2 "$NS_A_IP6" >/dev/null && ok "ping B -> A IPv6" || fail "ping IPv6"
n=$(udp_through 4 "$NS_B_IP4" 4791 200)
[ "$n" = 200 ] && ok "UDP A -> B IPv4 port 4791: 200/200" || fail "UDP IPv4: $n/200"
n=$(udp_through 6 "$NS_B_IP6" 4791 200)
[ "$n" = 200 ] && ok "UDP A -> B IPv6 port 4791: 200/200" || fail "UDP IPv6: $n/200"

# ---- a softverbs host in each namespace
netns_daemon a && netns_daemon b || fail "daemons"
pa=$(ns_a "$NS_SV" daemon status 2>/dev/null | sed -n 's/^ *pid: *//p')
pb=$(ns_b "$NS_SV" daemon status 2>/dev/null | sed -n 's/^ *pid: *//p')
[ -n "$pa" ] && [ -n "$pb" ] && [ "$pa" != "$pb" ] &&
	ok "one daemon per namespace on @$SOFTVERBS_SOCKET (pids $pa, $pb)" ||
	fail "daemons: '$pa' '$pb'"
ns_a "$NS_SV" devices >"$TMP/dev_a" 2>&1
ns_b "$NS_SV" devices >"$TMP/dev_b" 2>&1
grep -q "::ffff:$NS_A_IP4 .*RoCE v2 *$NS_IF_A" "$TMP/dev_a" &&
	grep -q "$NS_A_IP6 .*RoCE v2 *$NS_IF_A" "$TMP/dev_a" &&
	grep -q "::ffff:$NS_B_IP4 .*RoCE v2 *$NS_IF_B" "$TMP/dev_b" &&
	grep -q "$NS_B_IP6 .*RoCE v2 *$NS_IF_B" "$TMP/dev_b" &&
	ok "softverbs devices: each namespace's addresses as RoCE v2 GIDs" ||
	{ fail "devices:"; cat "$TMP/dev_a" "$TMP/dev_b"; }
grep -q "$NS_B_IP4\|$NS_B_IP6 " "$TMP/dev_a" || grep -q "$NS_A_IP4\|$NS_A_IP6 " "$TMP/dev_b" &&
	fail "a namespace lists the other's addresses" ||
	ok "softverbs devices: not the other namespace's addresses"
ns_a "$NS_SV" devices --json | $PY -c '
import json, sys
d = json.load(sys.stdin)
gids = [g["gid"] for dev in d for p in dev["ports"] for g in p["gids"]]
want = {"::ffff:198.51.100.1", "2001:db8::1"}
sys.exit(0 if want <= set(gids) else 1)' 2>/dev/null &&
	ok "softverbs devices --json: the GIDs" || fail "devices --json: $(ns_a "$NS_SV" devices --json)"

# ---- loss: about its share of UDP 4791, nothing else
# (B's daemon binds UDP 4791, the wire's port: the raw datagrams below
# need it free.)
ns_b "$NS_SV" daemon stop >/dev/null 2>&1
netns_loss b 30
n=$(udp_through 4 "$NS_B_IP4" 4791 2000)
d=$(netns_loss_dropped b)
# 30% of 2000: 600 dropped, standard deviation ~20; allow 5 of them.
[ "$n" -ge 1300 ] && [ "$n" -le 1500 ] && [ "$((n + d))" = 2000 ] &&
	ok "loss 30%: $n/2000 arrived, $d dropped by the rule" ||
	fail "loss 30%: $n/2000 arrived, $d dropped"
n=$(udp_through 6 "$NS_B_IP6" 4792 500)
[ "$n" = 500 ] && ok "loss rule spares other ports: 500/500 to 4792" ||
	fail "port 4792 under the loss rule: $n/500"
netns_loss_off b
n=$(udp_through 4 "$NS_B_IP4" 4791 500)
[ "$n" = 500 ] && ok "loss rule removed: 500/500" || fail "after removing the rule: $n/500"

# ---- tcpdump on the veth
netns_capture b "$TMP/veth.pcap" || fail "tcpdump"
udp_through 4 "$NS_B_IP4" 4791 7 >/dev/null
udp_through 6 "$NS_B_IP6" 4791 5 >/dev/null
for i in $(seq 1 100); do
	[ "$(netns_capture_count "$TMP/veth.pcap")" -ge 12 ] && break
	sleep 0.1
done
netns_capture_stop
c=$(tshark -r "$TMP/veth.pcap" -n 2>/dev/null | wc -l)
[ "$c" = 12 ] && ok "tcpdump on the veth: 12 UDP 4791 packets" || fail "tcpdump saw $c packets, expected 12"

# ---- cleanup leaves nothing, on exit and when killed
leftovers() {
	ip netns list | grep -q "svtest-[ab]-$1" && echo "namespace"
	ip link show 2>/dev/null | grep -q "sv[ab]$1[:@]" && echo "veth"
	# (a zombie has no environ: it is not running)
	for p in $(pgrep -x softverbsd); do
		{ tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null |
			grep -qx "SOFTVERBS_SOCKET=svtest.netns.$1" && echo "daemon $p"
	done
}
for how in exit kill; do
	tag=$$$((RANDOM % 100))
	NS_TAG=$tag SOFTVERBS_SOCKET=svtest.netns.$tag bash -c '
		. "$1/netns_lib.sh"
		netns_setup && netns_daemon a && netns_daemon b && netns_loss b 5 &&
			netns_capture a "$3/child.pcap" || exit 1
		echo up
		# (a foreground sleep would hold the trap until it ends)
		[ "$2" = kill ] && { sleep 60 & wait $!; }
		exit 0' _ "$here" "$how" "$TMP" >"$TMP/child.out" 2>&1 &
	child=$!
	for i in $(seq 1 100); do
		grep -q up "$TMP/child.out" && break
		sleep 0.1
	done
	[ "$how" = kill ] && kill -TERM $child
	wait $child
	[ "$(leftovers $tag)" = "" ] && grep -q up "$TMP/child.out" &&
		ok "cleanup on $how: nothing left (namespaces, veth, daemons)" ||
		fail "cleanup on $how left: $(leftovers $tag) / $(cat "$TMP/child.out")"
done

netns_cleanup
[ "$(leftovers "$NS_TAG")" = "" ] && ok "this test's own cleanup: nothing left" ||
	fail "left: $(leftovers "$NS_TAG")"
rm -rf "$TMP"
echo "netns_smoke: $fails failure(s)"
[ $fails -eq 0 ]
