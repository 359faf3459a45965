#!/bin/bash
# SPDX-License-Identifier: MIT
# The port service between two hosts (docs/wire.md "Who owns port 4791"):
# softverbs-portd holds UDP 4791 of each namespace as root, and every
# user's daemon receives only its own QPs' packets and CM messages.
#
#  1. without the service, a daemon whose port another user's socket
#     holds says so at start and in `softverbs run`, fails an rdma_cm
#     connect to another host at once, and takes the port
#     within a second or two of it coming free; its status then says that
#     another user could have taken it first;
#  2. with it, no other user can bind 4791 (EADDRINUSE), each daemon
#     reports its QPN block, and unmodified ibv_rc_pingpong pairs of two
#     users (root and nobody) run across the namespaces at the same time,
#     each on its own block;
#  3. rdma_cm (rping) of both users across the namespaces: CM messages on
#     QP1 reach the daemon they belong to; a second user cannot listen on
#     a port another user's daemon listens on (rdma_listen: EADDRINUSE);
#  4. the service restarted under a running pair: the daemons take their
#     blocks back with the sockets they have, the pair completes, and a new
#     pair runs.
# Root only (namespaces); exit 77 otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
SV=${SOFTVERBS:-${SV_BUILD_DIR:-$here/../../build}/bin/softverbs}
PORTD=$(dirname "$SV")/softverbs-portd
export SOFTVERBS_SOCKET=svtest.portd.$$
unset SOFTVERBS_WIRE_WARN # its warnings are what this test reads
# shellcheck source=tests/compat/netns_lib.sh
. "$here/netns_lib.sh"
why=$(netns_require) || { echo "$why"; exit 77; }
id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody"; exit 77; }
TMP=$(mktemp -d)
chmod 755 "$TMP"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok $*"; }

# The other user: its own daemon name, home and temporary directory.
NOBODY_SOCKET=svtest.portd.nobody.$$
mkdir -p "$TMP/nobody" && chown nobody "$TMP/nobody"
NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups env
	HOME="$TMP/nobody" TMPDIR="$TMP/nobody"
	SOFTVERBS_SOCKET="$NOBODY_SOCKET" SOFTVERBS_IDLE_TIMEOUT=0)
as_nobody() { # NS CMD...
	local ns=$1
	shift
	ip netns exec "$ns" "${NOBODY[@]}" "$@"
}
# who_run USER NS CMD...: CMD in NS as USER (root or nobody), bounded.
who_run() {
	local who=$1 ns=$2 t=60
	shift 2
	if [ "$who" = nobody ]; then
		timeout -k 5 $t ip netns exec "$ns" "${NOBODY[@]}" "$@"
	else
		timeout -k 5 $t ip netns exec "$ns" "$@"
	fi
}

cleanup() {
	as_nobody "$NS_A" "$SV" daemon stop >/dev/null 2>&1
	as_nobody "$NS_B" "$SV" daemon stop >/dev/null 2>&1
	netns_cleanup
	rm -rf "$TMP"
}
netns_setup || { echo "cannot set up the namespaces"; exit 1; }
trap cleanup EXIT

status() { # NS [as_nobody]
	if [ "${2:-}" = nobody ]; then
		as_nobody "$1" "$SV" daemon status
	else
		ip netns exec "$1" "$SV" daemon status
	fi
}

# portd_start a|b: the service in that namespace, once it listens.
portd_start() {
	local ns
	ns=$(ns_name "$1")
	netns_bg "$1" "$PORTD" >"$TMP/portd.$1.out" 2>&1
	eval "PORTD_PID_$1=$NS_LAST_PID"
	for _ in $(seq 1 100); do
		grep -q "softverbs-portd: UDP port" "$TMP/portd.$1.out" && return 0
		kill -0 "$NS_LAST_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "softverbs-portd did not start in $ns:"
	cat "$TMP/portd.$1.out"
	return 1
}

# ---- 1. no service; the port taken by another user's plain socket
as_nobody "$NS_A" /usr/bin/python3 -c 'import os,socket,time
s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM); s.bind(("::",4791))
print("held", os.getpid(), flush=True); time.sleep(120)' >"$TMP/squat.out" 2>&1 &
for _ in $(seq 1 100); do
	grep -q held "$TMP/squat.out" && break
	sleep 0.1
done
squat=$(sed -n 's/^held //p' "$TMP/squat.out")
out=$(ip netns exec "$NS_A" env SOFTVERBS_IDLE_TIMEOUT=0 "$SV" daemon start 2>&1)
if echo "$out" | grep -q "off the wire: UDP port 4791: Address already in use" &&
	status "$NS_A" | grep -q "port 4791 NOT bound"; then
	ok "a daemon whose port is taken says so at start"
else
	bad "daemon start with 4791 taken: $out"; status "$NS_A"
fi
out=$(ip netns exec "$NS_A" "$SV" run true 2>&1)
echo "$out" | grep -q "off the wire" && ok "softverbs run says so too" ||
	bad "softverbs run with the port taken: '$out'"
# A connect to another host fails at once (the REQ cannot leave), not
# after the CM's retries (a minute and more).
out=$(timeout -k 5 30 ip netns exec "$NS_A" "$SV" run rping -c -a "$NS_B_IP4" \
	-p 7499 -C 1 2>&1)
if echo "$out" | grep -q "UNREACHABLE"; then
	ok "an rdma_cm connect while off the wire fails at once (UNREACHABLE)"
else
	bad "rping -c while off the wire: '$out'"
fi
kill "$squat" 2>/dev/null
for _ in $(seq 1 100); do
	status "$NS_A" | grep -q "bound by this daemon" && break
	sleep 0.1
done
if status "$NS_A" | grep -q "bound by this daemon: no port service"; then
	ok "the daemon takes the port once it is free, and says there is no service"
else
	bad "status after the port came free:"; status "$NS_A"
fi
ip netns exec "$NS_A" "$SV" daemon stop >/dev/null

# ---- 2. the service, two users
portd_start a && portd_start b || exit 1
bind_4791() { # NS [as_nobody]: prints the errno name of binding UDP 4791
	local py='import socket,errno
s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM)
try:
    s.bind(("::",4791)); print("bound")
except OSError as e:
    print(errno.errorcode[e.errno])'
	if [ "${2:-}" = nobody ]; then
		as_nobody "$1" /usr/bin/python3 -c "$py"
	else
		ip netns exec "$1" /usr/bin/python3 -c "$py"
	fi
}
got=$(bind_4791 "$NS_B" nobody)
[ "$got" = EADDRINUSE ] && ok "another user cannot bind 4791 ($got)" ||
	bad "user nobody binding UDP 4791 under the service: $got"

netns_daemon a && netns_daemon b || { echo "no daemons"; exit 1; }
as_nobody "$NS_A" "$SV" daemon start >/dev/null &&
	as_nobody "$NS_B" "$SV" daemon start >/dev/null ||
	{ echo "no daemons for nobody"; exit 1; }
ba=$(status "$NS_A" | sed -n 's/.*through the port service (QPN block \(0x[0-9a-f]*\)).*/\1/p')
bn=$(status "$NS_A" nobody | sed -n 's/.*through the port service (QPN block \(0x[0-9a-f]*\)).*/\1/p')
if [ -n "$ba" ] && [ -n "$bn" ] && [ "$ba" != "$bn" ]; then
	ok "each daemon has its block (root $ba, nobody $bn)"
else
	bad "blocks: root '$ba', nobody '$bn'"; status "$NS_A"; status "$NS_A" nobody
fi

gid_index() { # NS ADDRESS-AS-GID
	ip netns exec "$1" "$SV" devices --json |
		sed -n "s/.*\"index\": \([0-9]*\), \"gid\": \"$2\".*/\1/p"
}
G=$(gid_index "$NS_A" "::ffff:$NS_A_IP4")
[ -n "$G" ] || { echo "no IPv4 GID"; ip netns exec "$NS_A" "$SV" devices; exit 1; }

# pingpong USER TCP-PORT: an ibv_rc_pingpong pair, server in B; its two
# outputs in $TMP/pp.USER.{s,c}; returns both exit codes' sum.
pingpong() {
	local who=$1 port=$2 s c
	who_run "$who" "$NS_B" "$SV" run ibv_rc_pingpong -g "$G" \
		-n 200 -p "$port" >"$TMP/pp.$who.s" 2>&1 &
	s=$!
	for _ in $(seq 1 300); do
		ip netns exec "$NS_B" ss -ltn | grep -q ":$port " && break
		kill -0 $s 2>/dev/null || break
		sleep 0.1
	done
	who_run "$who" "$NS_A" "$SV" run ibv_rc_pingpong -g "$G" \
		-n 200 -p "$port" "$NS_B_IP4" >"$TMP/pp.$who.c" 2>&1
	c=$?
	wait $s
	return $((c + $?))
}
pingpong root 18515 &
pr=$!
pingpong nobody 18516 &
pn=$!
wait $pr; rr=$?
wait $pn; rn=$?
if [ $rr = 0 ] && [ $rn = 0 ] && grep -q "bytes in" "$TMP/pp.root.c" &&
	grep -q "bytes in" "$TMP/pp.nobody.c"; then
	ok "two users' ibv_rc_pingpong pairs across at the same time"
else
	bad "pingpong pairs: root $rr, nobody $rn"
	for f in "$TMP"/pp.*; do echo "--- $f"; cat "$f"; done
fi
qpn_of() { sed -n 's/.*local address: .*QPN \(0x[0-9a-f]*\).*/\1/p' "$1" | head -n 1; }
qa=$(qpn_of "$TMP/pp.root.c")
qn=$(qpn_of "$TMP/pp.nobody.c")
if [ $((qa >> 16)) = $((ba)) ] && [ $((qn >> 16)) = $((bn)) ]; then
	ok "QPNs in their daemons' blocks ($qa, $qn)"
else
	bad "QPNs $qa (root, block $ba) and $qn (nobody, block $bn)"
fi

# ---- 3. rdma_cm through QP1
# rping_listening USER PORT: waits until USER's daemon in B has an
# rdma_cm id listening on PORT (its `softverbs res show`).
rping_listening() {
	for _ in $(seq 1 100); do
		who_run "$1" "$NS_B" "$SV" res show 2>/dev/null |
			grep "state LISTEN" | grep -q "port $2 " && return 0
		sleep 0.1
	done
	return 1
}
rping_pair() { # USER PORT: rping server in B, client in A; 0 when both did
	local who=$1 port=$2 s c
	who_run "$who" "$NS_B" "$SV" run rping -s -a "$NS_B_IP4" \
		-p "$port" -C 5 >"$TMP/rp.$who.$port.s" 2>&1 &
	s=$!
	rping_listening "$who" "$port"
	who_run "$who" "$NS_A" "$SV" run rping -c -a "$NS_B_IP4" \
		-p "$port" -C 5 -v >"$TMP/rp.$who.$port.c" 2>&1
	c=$?
	wait $s
	return $((c + $?))
}
rping_pair root 7471 &
pr=$!
rping_pair nobody 7472 &
pn=$!
wait $pr; rr=$?
wait $pn; rn=$?
if [ $rr = 0 ] && [ $rn = 0 ] && grep -q "ping data" "$TMP/rp.root.7471.c" &&
	grep -q "ping data" "$TMP/rp.nobody.7472.c"; then
	ok "two users' rping pairs across at the same time (CM on QP1)"
else
	bad "rping pairs: root $rr, nobody $rn"
	for f in "$TMP"/rp.*; do echo "--- $f"; cat "$f"; done
fi

# A port one user's daemon listens on is not another's.
timeout -k 5 30 ip netns exec "$NS_B" "$SV" run rping -s -a "$NS_B_IP4" \
	-p 7473 -C 1 >"$TMP/rp.hold" 2>&1 &
hold=$!
rping_listening root 7473
out=$(who_run nobody "$NS_B" "$SV" run rping -s -a "$NS_B_IP4" -p 7473 \
	-C 1 2>&1)
if echo "$out" | grep -qi "address already in use\|rdma_listen"; then
	ok "a second user cannot listen on a port another user's daemon has"
else
	bad "nobody listening on root's port 7473: $out"
fi
kill $hold 2>/dev/null
wait $hold 2>/dev/null

# ---- 4. the service restarts under a running pair: the daemons take
# their blocks back with the sockets they have, and the pair goes on.
ip netns exec "$NS_B" timeout -k 5 300 stdbuf -oL "$SV" run ibv_rc_pingpong \
	-g "$G" -n 50000 -p 18518 >"$TMP/long.s" 2>&1 &
ls_=$!
for _ in $(seq 1 300); do
	ip netns exec "$NS_B" ss -ltn | grep -q ":18518 " && break
	sleep 0.1
done
ip netns exec "$NS_A" timeout -k 5 300 stdbuf -oL "$SV" run ibv_rc_pingpong \
	-g "$G" -n 50000 -p 18518 "$NS_B_IP4" >"$TMP/long.c" 2>&1 &
lc=$!
for _ in $(seq 1 300); do
	grep -q "remote address" "$TMP/long.c" && break
	sleep 0.1
done
eval "kill \$PORTD_PID_b"
eval "wait \$PORTD_PID_b" 2>/dev/null
portd_start b || exit 1
running=0
kill -0 $lc 2>/dev/null && running=1
wait $lc; rc=$?
wait $ls_; rs=$?
if [ $running = 1 ] && [ $rc = 0 ] && [ $rs = 0 ] && grep -q "bytes in" "$TMP/long.c"; then
	ok "a pair running across the service's restart completes"
elif [ $running = 0 ]; then
	bad "the long pair ended before the service restarted: the case tests nothing"
else
	bad "the long pair across the restart: client $rc, server $rs"
	cat "$TMP/long.s" "$TMP/long.c"
fi
for _ in $(seq 1 50); do
	status "$NS_B" | grep -q "through the port service (QPN block $ba)" && break
	sleep 0.1
done
if pingpong root 18517 && grep -q "bytes in" "$TMP/pp.root.c"; then
	ok "after the service restarted, a pair runs again"
else
	bad "pair after the restart"; cat "$TMP/pp.root.s" "$TMP/pp.root.c"
	status "$NS_B"
fi

[ $fail = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
