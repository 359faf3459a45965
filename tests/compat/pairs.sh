#!/bin/bash
# SPDX-License-Identifier: MIT
# Data path, end to end: one server/client pair of UNMODIFIED programs
# (Debian's ibverbs-utils pingpongs, perftest) under `softverbs run`,
# talking through our device between two processes.
#
#   pairs.sh NAME...     run these pairs (exit 0 when all pass)
#   pairs.sh --list      the names, one a line
#   pairs.sh --all       every pair, with a summary (by hand, not in ctest)
#   pairs.sh --lockstep  the -q/-t sweep of QPs sharing a CQ (lockstep_names)
#   pairs.sh --wire4 NAME... | --wire6 NAME...
#                        the same pairs between two hosts: the server in one
#                        network namespace, the client in another, joined by
#                        a veth (tests/compat/netns_lib.sh; root, else SKIP
#                        with status 77), a daemon in each, RoCE v2 on the
#                        wire with the IPv4 (--wire4) or IPv6 (--wire6)
#                        GIDs of the veth's addresses (-g / -x pick them)
#
# Each pair: both programs bounded by a timeout, both exit codes checked,
# what the user reads checked (pingpong's "N bytes in S seconds" with the
# right N; perftest's result line with a nonzero bandwidth or latency), and
# afterwards the daemon still answers and holds no ufile, context or object.
# Output of both sides is printed when anything fails.
set -u

here=$(cd "$(dirname "$0")" && pwd)
SV=${SOFTVERBS:-${SV_BUILD_DIR:-$here/../../build}/bin/softverbs}
export SOFTVERBS_SOCKET=svtest.pairs.$$
WIRE=
case ${1:-} in
--wire4 | --wire6) WIRE=${1#--wire}; shift ;;
esac
export SOFTVERBS_IDLE_TIMEOUT=120
TMO=${PAIRS_TIMEOUT:-60}
# shellcheck source=tests/compat/pairs_lib.sh
. "$here/pairs_lib.sh"

# ud_size: sets UD to the port's active MTU in bytes (1024 if unknown).
ud_size() {
	UD=$(in_ns "$PAIR_SRV_NS" "$SV" devices --json 2>/dev/null |
		sed -n 's/.*"active_mtu": \([0-9]*\).*/\1/p' | head -n 1)
	UD=${UD:-1024}
}

# spec NAME: sets KIND (pp = pingpong, bw, lat, inf = runs until stopped),
# CMD (program and arguments, both sides), BYTES (pingpong's expected
# "N bytes", empty = any nonzero).  Returns 1 for an unknown name.
spec() {
	BYTES="" DIRECT=""
	case $1 in
	rc_pingpong) KIND=pp CMD="ibv_rc_pingpong -g 0" BYTES=$((4096 * 1000 * 2)) ;;
	rc_pingpong_events) KIND=pp CMD="ibv_rc_pingpong -g 0 -e" BYTES=$((4096 * 1000 * 2)) ;;
	rc_pingpong_s64) KIND=pp CMD="ibv_rc_pingpong -g 0 -s 64 -n 100" BYTES=$((64 * 100 * 2)) ;;
	rc_pingpong_s64k) KIND=pp CMD="ibv_rc_pingpong -g 0 -s 65536 -n 50" BYTES=$((65536 * 50 * 2)) ;;
	rc_pingpong_chk) KIND=pp CMD="ibv_rc_pingpong -g 0 -c -n 200" BYTES=$((4096 * 200 * 2)) ;;
	uc_pingpong) KIND=pp CMD="ibv_uc_pingpong -g 0" BYTES=$((4096 * 1000 * 2)) ;;
	uc_pingpong_events) KIND=pp CMD="ibv_uc_pingpong -g 0 -e" BYTES=$((4096 * 1000 * 2)) ;;
	# UD: the message must fit the port's active MTU, which the host's
	# interfaces decide (1024 behind a 1500-byte Ethernet, as on rxe):
	# ibv_ud_pingpong refuses a larger -s.  Explicit, since the usage text
	# says 2048 but Debian's v44 binary sends 1024 by default.
	ud_pingpong) ud_size; KIND=pp CMD="ibv_ud_pingpong -g 0 -s $UD" BYTES=$((UD * 1000 * 2)) ;;
	ud_pingpong_events) ud_size; KIND=pp CMD="ibv_ud_pingpong -g 0 -s $UD -e" BYTES=$((UD * 1000 * 2)) ;;
	srq_pingpong) KIND=pp CMD="ibv_srq_pingpong -g 0" ;;
	srq_pingpong_events) KIND=pp CMD="ibv_srq_pingpong -g 0 -e" ;;
	srq_pingpong_q4) KIND=pp CMD="ibv_srq_pingpong -g 0 -q 4" ;;
	send_bw) KIND=bw CMD="ib_send_bw -x 0 -n 100" ;;
	write_bw) KIND=bw CMD="ib_write_bw -x 0 -n 100" ;;
	read_bw) KIND=bw CMD="ib_read_bw -x 0 -n 100" ;;
	atomic_bw) KIND=bw CMD="ib_atomic_bw -x 0 -n 100" ;;
	send_lat) KIND=lat CMD="ib_send_lat -x 0 -n 100" ;;
	write_lat) KIND=lat CMD="ib_write_lat -x 0 -n 100" ;;
	read_lat) KIND=lat CMD="ib_read_lat -x 0 -n 100" ;;
	atomic_lat) KIND=lat CMD="ib_atomic_lat -x 0 -n 100" ;;
	write_bw_all) KIND=bw CMD="ib_write_bw -x 0 -a -n 20" ;;
	send_bw_q4) KIND=bw CMD="ib_send_bw -x 0 -q 4 -n 100" ;;
	send_bw_uc) KIND=bw CMD="ib_send_bw -x 0 -c UC -n 100" ;;
	send_bw_ud) KIND=bw CMD="ib_send_bw -x 0 -c UD -n 100" ;;
	write_bw_uc) KIND=bw CMD="ib_write_bw -x 0 -c UC -n 100" ;;
	send_lat_inline) KIND=lat CMD="ib_send_lat -x 0 -s 64 -I 64 -n 100" ;;
	write_bw_infinite) KIND=inf CMD="ib_write_bw -x 0 -D 1 --run_infinitely" ;;
	# QPs sharing a CQ move in lock step: lockstep_OP_qQ_tT[_pk] runs
	# ib_OP_bw with Q QPs, a send queue of T (perftest lowers its
	# --cq-mod to T below 100) and 1000 8-byte messages, which T need not
	# divide.  perftest counts a whole --cq-mod for each QP's last
	# completion; once that over-count makes the total, it stops polling,
	# and a QP still a few windows behind the others waits forever.  _pk:
	# every message as packets (SOFTVERBS_DIRECT=0).
	lockstep_*)
		[[ $1 =~ ^lockstep_(write|send|read)_q([0-9]+)_t([0-9]+)(_pk)?$ ]] ||
			return 1
		KIND=bw
		CMD="ib_${BASH_REMATCH[1]}_bw -x 0 -s 8 -q ${BASH_REMATCH[2]}"
		CMD="$CMD -t ${BASH_REMATCH[3]} -n 1000"
		if [ -n "${BASH_REMATCH[4]}" ]; then DIRECT=0; fi
		;;
	*) return 1 ;;
	esac
}

# The lock-step sweep (ctest pairs_lockstep): every -q of 2, 4 and 8 with
# a send queue that is one signalled window (-t 16, 1000 = 62 x 16 + 8), a
# window of odd size (-t 3), one signal per WQE (-t 1) and perftest's
# defaults (-t 128, --cq-mod 100); SEND and READ with -q 8 -t 16; on both
# paths.  A QP that fell a window behind the others hangs the pair
# (docs/differences.md says why, in its entry on QPs sharing a CQ).
lockstep_names() {
	local q t op pk
	for pk in "" _pk; do
		for q in 2 4 8; do
			for t in 1 3 16 128; do
				echo "lockstep_write_q${q}_t${t}$pk"
			done
		done
		for op in send read; do
			echo "lockstep_${op}_q8_t16$pk"
		done
	done
}

ALL="rc_pingpong rc_pingpong_events rc_pingpong_s64 rc_pingpong_s64k
rc_pingpong_chk uc_pingpong uc_pingpong_events ud_pingpong ud_pingpong_events
srq_pingpong srq_pingpong_events srq_pingpong_q4 send_bw write_bw read_bw
atomic_bw send_lat write_lat read_lat atomic_lat write_bw_all send_bw_q4
send_bw_uc send_bw_ud write_bw_uc send_lat_inline write_bw_infinite"

TMP=$(mktemp -d)
cleanup() {
	if [ -n "$WIRE" ]; then
		netns_cleanup
	else
		"$SV" daemon stop >/dev/null 2>&1
	fi
	rm -rf "$TMP"
}

# Between hosts: two namespaces, a daemon in each; G = the GID index of
# the veth's IPv4 or IPv6 address (the same on both sides).
G=0
if [ -n "$WIRE" ]; then
	# shellcheck source=tests/compat/netns_lib.sh
	. "$here/netns_lib.sh"
	why=$(netns_require) || { echo "$why"; rm -rf "$TMP"; exit 77; }
	netns_setup || { echo "pairs: cannot set up the namespaces"; exit 1; }
	netns_daemon a && netns_daemon b || { echo "pairs: no daemons"; exit 1; }
	PAIR_SRV_NS=$NS_B
	PAIR_CLI_NS=$NS_A
	# The programs' own TCP exchange goes over IPv4 either way.
	PAIR_ADDR=$NS_B_IP4
	gid_index() { # NS ADDRESS-AS-GID
		ip netns exec "$1" "$SV" devices --json |
			sed -n "s/.*\"index\": \([0-9]*\), \"gid\": \"$2\".*/\1/p"
	}
	if [ "$WIRE" = 4 ]; then
		ga=$(gid_index "$NS_A" "::ffff:$NS_A_IP4")
		gb=$(gid_index "$NS_B" "::ffff:$NS_B_IP4")
	else
		ga=$(gid_index "$NS_A" "$NS_A_IP6")
		gb=$(gid_index "$NS_B" "$NS_B_IP6")
	fi
	if [ -z "$ga" ] || [ "$ga" != "$gb" ]; then
		echo "pairs: the veth's GIDs are at index '$ga' and '$gb': want one index"
		ip netns exec "$NS_A" "$SV" devices
		ip netns exec "$NS_B" "$SV" devices
		exit 1
	fi
	G=$ga
fi
trap cleanup EXIT

# The first line of output that looks like an error, for summaries.
first_error() {
	grep -hiE -m1 "couldn't|failed|error|unable|not supported|invalid|refused|abort|signal|timed out|client not started" \
		"$@" 2>/dev/null | head -1 | grep . ||
		echo "(no error line; last line: $(grep -v '^[ -]*$' "$1" | tail -1 | sed 's/^ *//'))"
}

# check_pp FILE: "N bytes in S seconds = R Mbit/sec" and
# "I iters in S seconds = T usec/iter", N as expected (or nonzero).
check_pp() {
	local n
	n=$(sed -n 's/^\([0-9][0-9]*\) bytes in [0-9.]* seconds = .*/\1/p' "$1" | head -1)
	[ -n "$n" ] || { echo "no 'N bytes in S seconds' line in $(basename "$1")"; return 1; }
	grep -Eq '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter' "$1" ||
		{ echo "no 'I iters in S seconds' line in $(basename "$1")"; return 1; }
	if [ -n "$BYTES" ]; then
		[ "$n" = "$BYTES" ] || { echo "$(basename "$1"): $n bytes, expected $BYTES"; return 1; }
	else
		[ "$n" -gt 0 ] || { echo "$(basename "$1"): 0 bytes"; return 1; }
	fi
	return 0
}

# check_table FILE KEY COL [ALT]: perftest's result table: every numeric
# row after a header row containing KEY has a nonzero value in column COL
# or, failing that, ALT (BW average is the 4th column of the BW table,
# MsgRate the 5th: 20 two-byte writes show "0.00" MB/sec on a busy machine;
# t_avg is the 6th of the latency table).  Rows of -a: one per size.
check_table() {
	awk -v key="$2" -v c="$3" -v alt="${4:-$3}" '
		/#bytes/ { on = index($0, key) > 0; next }
		on && $1 ~ /^[0-9]+$/ && NF >= c {
			rows++
			if ($c + 0 > 0 || $alt + 0 > 0) good++; else bad = bad "\n    " $0
		}
		END {
			if (!rows) { print "no result row under a \"" key "\" header"; exit 1 }
			if (bad != "") { print "zero " key " in:" bad; exit 1 }
		}' "$1"
}

# run_kind DIR: runs the pair of the current spec (0 = exit codes fine).
run_kind() {
	# shellcheck disable=SC2086 # CMD is a word list on purpose
	if [ "$KIND" = inf ]; then
		PAIR_STOP_ROWS=2 PAIR_STOP_SIG=TERM pairs_run "$1" "$TMO" $CMD
	else
		pairs_run "$1" "$TMO" $CMD
	fi
}
# run_cmd DIR: the same, with SOFTVERBS_DIRECT=$DIRECT when the spec sets
# DIRECT.
run_cmd() {
	if [ -n "$DIRECT" ]; then
		SOFTVERBS_DIRECT=$DIRECT run_kind "$1"
	else
		run_kind "$1"
	fi
}

# run_pair NAME: 0 = pass.  On failure prints why and both outputs.
run_pair() {
	local name=$1 dir=$TMP/$1 why="" ok=0
	spec "$name" || { echo "unknown pair '$name' (see --list)"; return 2; }
	CMD=${CMD/-g 0/-g $G}
	CMD=${CMD/-x 0/-x $G}
	mkdir -p "$dir"
	echo "== $name: ${DIRECT:+SOFTVERBS_DIRECT=$DIRECT }$CMD"
	run_cmd "$dir"
	ok=$?
	# perftest calibrates its clock by sampling the TSC; on a loaded machine
	# the fit can miss (r^2 < 0.9) and it refuses to report.  That is about
	# this machine, not the device: run the pair once more.
	if grep -q "Correlation coefficient" "$dir/server.out" "$dir/client.out"; then
		echo "   (perftest's clock calibration failed on a busy machine: once more)"
		run_cmd "$dir"
		ok=$?
	fi
	# Stopped together, a perftest server may see the client's socket
	# close before its own signal lands: it then says so and exits 1.
	if [ $ok != 0 ] && [ "$KIND" = inf ] && [ "$PAIR_SRV_RC" = 1 ] &&
		[ "$PAIR_CLI_RC" = 143 ] && grep -q "Couldn't read remote address" "$dir/server.out"; then
		ok=0
	fi
	if [ $ok != 0 ]; then
		why="exit codes: server $PAIR_SRV_RC, client $PAIR_CLI_RC"
		case " $PAIR_SRV_RC $PAIR_CLI_RC " in
		*" 124 "* | *" 137 "*) why="$why (124/137 = timed out after ${TMO}s)" ;;
		esac
	else
		case $KIND in
		pp) why=$(check_pp "$dir/server.out") && why=$(check_pp "$dir/client.out") ;;
		bw | inf) why=$(check_table "$dir/client.out" "BW average" 4 5) ;;
		lat) why=$(check_table "$dir/client.out" "t_avg" 6) ;;
		esac
		ok=$?
	fi
	if [ $ok = 0 ]; then
		if [ -n "$WIRE" ]; then
			why=$(pairs_daemon_quiet "$NS_A") &&
				why=$(pairs_daemon_quiet "$NS_B") || ok=1
		else
			why=$(pairs_daemon_quiet) || ok=1
		fi
	fi
	if [ $ok = 0 ]; then
		case $KIND in
		pp) grep -h "bytes in\|iters in" "$dir/client.out" | sed 's/^/   client: /' ;;
		*) grep -E '^ *[0-9]+ +[0-9]+ ' "$dir/client.out" | tail -3 | sed 's/^/   /' ;;
		esac
		echo "ok $name"
		return 0
	fi
	echo "FAIL $name: $why"
	if [ -n "$WIRE" ]; then
		# Where packets were lost, first (CI keeps only the head of a
		# long output): each daemon's wire counters, each veth's
		# drops, the kernel's backlog drops.
		local h tag ns dev
		for h in A:"$NS_A":"$NS_IF_A" B:"$NS_B":"$NS_IF_B"; do
			IFS=: read -r tag ns dev <<<"$h"
			in_ns "$ns" "$SV" daemon status 2>&1 | grep 'wire [tr]x:' |
				sed "s/^ */   $tag: /"
			ip -n "$ns" -s link show "$dev" 2>/dev/null |
				awk -v t="$tag" '/RX:|TX:/ { k = $1; getline;
					printf "   %s: veth %s %s packets, %s dropped\n", t, k, $2, $4 }'
		done
		echo "   kernel backlog drops (all CPUs, since boot): $(softnet_drops)"
	fi
	if [ "$PAIR_CLI_RC" = - ]; then
		echo "   first error: $(first_error "$dir/server.out")"
	else
		echo "   first error: $(first_error "$dir/client.out" "$dir/server.out")"
	fi
	echo "   --- server output ($CMD, port $PAIR_PORT)"
	sed 's/^/   | /' "$dir/server.out"
	echo "   --- client output ($CMD $PAIR_ADDR)"
	sed 's/^/   | /' "$dir/client.out"
	# Leave the daemon fresh for the next pair.
	if [ -n "$WIRE" ]; then
		in_ns "$NS_A" "$SV" daemon status 2>&1 | sed 's/^/   A: /'
		in_ns "$NS_B" "$SV" daemon status 2>&1 | sed 's/^/   B: /'
		in_ns "$NS_A" "$SV" daemon stop >/dev/null 2>&1
		in_ns "$NS_B" "$SV" daemon stop >/dev/null 2>&1
		netns_daemon a
		netns_daemon b
	else
		"$SV" daemon stop >/dev/null 2>&1
	fi
	return 1
}

# softnet_drops: packets the kernel's per-CPU backlogs dropped (a veth's
# peer takes them there), /proc/net/softnet_stat's second column summed.
softnet_drops() {
	local n=0 _a d _r
	while read -r _a d _r; do n=$((n + 16#$d)); done </proc/net/softnet_stat
	echo $n
}

[ $# -ge 1 ] || { echo "usage: pairs.sh NAME... | --list | --all | --lockstep" >&2; exit 2; }
# shellcheck disable=SC2086 # ALL is a word list
case $1 in
--list) printf '%s\n' $ALL; exit 0 ;;
--all) set -- $ALL ;;
--lockstep)
	# shellcheck disable=SC2046 # the names are words
	set -- $(lockstep_names)
	;;
esac
for p in ibv_rc_pingpong ib_send_bw; do
	command -v $p >/dev/null || { echo "pairs: $p not installed (scripts/deps.sh)"; exit 1; }
done
[ -n "$WIRE" ] || "$SV" daemon start >/dev/null 2>&1

pass=0 fail=0 failed=
for n in "$@"; do
	if run_pair "$n"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		failed="$failed $n"
	fi
done
[ $# -gt 1 ] && [ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
