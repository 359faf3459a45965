#!/bin/bash
# SPDX-License-Identifier: MIT
# pyverbs data flows between two hosts (issue 9): two network namespaces
# joined by a veth (tests/compat/netns_lib.sh), a daemon in each, a
# target server (pyverbs_dp_util.py --serve) in B and the initiator
# (pyverbs_wire_test.py) in A, once with the IPv4 addresses (so the
# IPv4-mapped GIDs) and once with the IPv6 ones; each side picks the GID
# of its address from its port's GID table.  Both Python processes must
# end with status 0, and each daemon must have sent and received RoCE v2
# packets on the wire during the run.  Root only: exit 77 (skipped)
# otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# (canonical: check_our_library compares the mapped library's path)
SV_BUILD_DIR=$(cd "${SV_BUILD_DIR:-$here/../../build}" && pwd) || exit 1
export SV_BUILD_DIR
# Debian's python3 with our libibverbs.so.1 first (ctest sets this too).
case ":${LD_LIBRARY_PATH:-}:" in
*":$SV_BUILD_DIR/lib:"*) ;;
*) export LD_LIBRARY_PATH=$SV_BUILD_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;;
esac
# shellcheck source=tests/compat/netns_lib.sh
. "$here/netns_lib.sh"
why=$(netns_require) || { echo "$why"; exit 77; }
PY=/usr/bin/python3
TMP=$(mktemp -d)
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

netns_setup || { echo "pyverbs_wire: cannot set up the namespaces"; exit 1; }
netns_daemon a && netns_daemon b || { echo "pyverbs_wire: no daemons"; exit 1; }

# wire_count a|b tx|rx: the daemon's RoCE v2 packets sent or received.
wire_count() {
	ns_in "$1" "$NS_SV" daemon status 2>/dev/null |
		sed -n "s/^ *wire $2: *\([0-9]*\) packets.*/\1/p"
}

# run_family 4|6 A_ADDR B_ADDR
run_family() {
	local v=$1 a=$2 b=$3 port="" spid rc src before=() after=() k
	local pf=$TMP/port$v
	for k in "a tx" "a rx" "b tx" "b rx"; do
		# shellcheck disable=SC2086 # two words
		before+=("$(wire_count $k)")
	done
	netns_bg b "$PY" "$here/pyverbs_dp_util.py" --serve "$b" "$pf" \
		>"$TMP/server$v.out" 2>&1
	spid=$NS_LAST_PID
	for _ in $(seq 1 200); do
		[ -s "$pf" ] && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.05
	done
	port=$(cat "$pf" 2>/dev/null)
	if [ -z "$port" ]; then
		fail "IPv$v: the target server did not listen"
		cat "$TMP/server$v.out"
		return
	fi
	timeout -k 5 90 ip netns exec "$NS_A" "$PY" "$here/pyverbs_wire_test.py" \
		"$a" "$b" "$port"
	rc=$?
	# The initiator stops the server; give it a moment, then stop it.
	for _ in $(seq 1 100); do
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.05
	done
	kill "$spid" 2>/dev/null
	wait "$spid"
	src=$?
	[ "$rc" = 0 ] || fail "IPv$v: the initiator in A ended with status $rc"
	[ "$src" = 0 ] || {
		fail "IPv$v: the target server in B ended with status $src"
		cat "$TMP/server$v.out"
	}
	for k in "a tx" "a rx" "b tx" "b rx"; do
		# shellcheck disable=SC2086
		after+=("$(wire_count $k)")
	done
	# Three RC flows of more than ten packets each way (and three UD ones
	# from A): the data went by the wire, both ways, on both hosts.
	local low=
	for k in 0 1 2 3; do
		[ -n "${after[$k]}" ] && [ -n "${before[$k]}" ] &&
			[ $((after[k] - before[k])) -ge 30 ] || low=1
	done
	[ -z "$low" ] || fail "IPv$v: too few packets on the wire"
	echo "IPv$v: wire packets (a tx, a rx, b tx, b rx) ${before[*]} -> ${after[*]}"
}

run_family 4 "$NS_A_IP4" "$NS_B_IP4"
run_family 6 "$NS_A_IP6" "$NS_B_IP6"
netns_cleanup
rm -rf "$TMP"
echo "pyverbs_wire: $fails failure(s)"
[ $fails -eq 0 ]
