# shellcheck shell=bash
# SPDX-License-Identifier: MIT
# What the rdma_cm pair tests share: rdmacm_pairs.sh (one host) and
# wire_cm.sh (two namespaces).  Source pairs_lib.sh first.  The server
# runs in network namespace $PAIR_SRV_NS and the client in $PAIR_CLI_NS
# (both here when empty); the client talks to $PAIR_ADDR.  Outputs go to
# $D/server.out and $D/client.out; $SV is the softverbs command, $TMO the
# time each side gets.

# wait_cm_listen PORT: until an rdma_cm id of the server's daemon listens
# on PORT (1 when the server $SRV died first).
wait_cm_listen() {
	for _ in $(seq 1 200); do
		in_ns "$PAIR_SRV_NS" "$SV" res show cm_id 2>/dev/null |
			grep -q "state LISTEN .* port $1 " && return 0
		kill -0 "$SRV" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# wait_tcp_listen PORT: until the server listens on TCP port PORT.
wait_tcp_listen() {
	for _ in $(seq 1 200); do
		port_listening "$1" && return 0
		kill -0 "$SRV" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# run_pair SERVER_CMD CLIENT_CMD WAIT(cm|tcp|none) PORT: both under
# `softverbs run`; SRV_RC, CLI_RC.  SERVER_RUNS_ON=1: a server that never
# exits by itself (qperf), stopped once the client is done (SRV_RC 0).
# PAIR_CLI_NICE=N: the client runs at that niceness (the retries below).
run_pair() {
	local srv_cmd=$1 cli_cmd=$2 how=$3 port=$4 wrap=("$SV" run)
	command -v stdbuf >/dev/null && wrap=(stdbuf -oL "${wrap[@]}")
	# shellcheck disable=SC2086 # commands are word lists on purpose
	timeout -k 5 "$TMO" ${PAIR_SRV_NS:+ip netns exec "$PAIR_SRV_NS"} \
		"${wrap[@]}" $srv_cmd >"$D/server.out" 2>&1 &
	SRV=$!
	case $how in
	cm) wait_cm_listen "$port" ;;
	tcp) wait_tcp_listen "$port" ;;
	*) sleep 1 ;;
	esac
	# shellcheck disable=SC2086
	timeout -k 5 "$TMO" ${PAIR_CLI_NS:+ip netns exec "$PAIR_CLI_NS"} \
		${PAIR_CLI_NICE:+nice -n "$PAIR_CLI_NICE"} \
		"${wrap[@]}" $cli_cmd >"$D/client.out" 2>&1
	CLI_RC=$?
	if [ "$CLI_RC" != 0 ]; then
		sleep 2
		kill_tree "$SRV" TERM
	elif [ -n "${SERVER_RUNS_ON:-}" ]; then
		kill_tree "$SRV" TERM
	fi
	wait "$SRV"
	SRV_RC=$?
	[ -n "${SERVER_RUNS_ON:-}" ] && [ "$CLI_RC" = 0 ] && SRV_RC=0
	return 0
}

# expect FILE REGEX [COUNT]: the output has a line matching (COUNT times);
# else WHY says what it has.
expect() {
	local n
	n=$(grep -Ec -- "$2" "$1")
	if [ -n "${3:-}" ]; then
		[ "$n" = "$3" ] || { WHY="$(basename "$1"): $n lines match /$2/, want $3"; return 1; }
	else
		[ "$n" -gt 0 ] || { WHY="$(basename "$1"): no line matches /$2/"; return 1; }
	fi
}

# perftest_ok FILE KEY COLUMN: perftest's table under the header naming
# KEY has a row with a nonzero value in COLUMN.
perftest_ok() {
	awk -v key="$2" -v c="$3" '
		/#bytes/ { on = index($0, key) > 0; next }
		on && $1 ~ /^[0-9]+$/ && $c + 0 > 0 { good++ }
		END { exit !good }' "$1" || { WHY="no nonzero $2 row"; return 1; }
}

# perftest_R PROGRAM: PROGRAM -R (rdma_cm) as server and client.  After
# the first connection (its own rdma_cm "socket") the server sets up its
# test QPs and only then listens again on the port for them, while the
# client connects to it straight away; a client that comes too early is
# rejected (nobody listening, status 8) and perftest 4.5's retry of that
# connection uses freed memory and crashes (it would on any device).  That
# one outcome is run again, five times at most, the client at the lowest
# priority then (nice 19): on a busy machine the server's setup is what
# waits for a CPU, and beside two busy loops and a third test the server
# lost the race six times in a row at the same priority (send_lat_R4).
perftest_R() {
	local nice=
	for _ in 1 2 3 4 5 6; do
		pairs_pick_port && port=$PAIR_PORT
		PAIR_CLI_NICE=$nice run_pair "$1 -R -p $port -n 200" \
			"$1 -R -p $port -n 200 $PAIR_ADDR" cm "$port"
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] && return 0
		grep -q 'RDMA_CM_EVENT_REJECTED; error: 8\.' "$D/client.out" || break
		echo "   (perftest's client came before its server's second listen: again)"
		nice=19
	done
	WHY="exit codes: server $SRV_RC, client $CLI_RC"
	return 1
}

# qperf_rc SECONDS: qperf -cm1 rc_bw rc_lat, the server forking a child
# per test; the client must print a bandwidth and a latency.  Debian's qperf (0.4.11) tells the client its rdma_cm port
# before it listens on it (strace shows the port written, then the
# listen): a client that comes first is rejected (nobody listening,
# status 8: "unexpected event from RDMA CM: Event rejected"), on any
# device.  That one outcome is run again, five times at most, the client
# at the lowest priority then (as perftest_R's).
qperf_rc() {
	local nice=
	for _ in 1 2 3 4 5 6; do
		pairs_pick_port && port=$PAIR_PORT
		PAIR_CLI_NICE=$nice SERVER_RUNS_ON=1 run_pair "qperf -lp $port" \
			"qperf -lp $port -t $1 $PAIR_ADDR -cm1 rc_bw rc_lat" tcp "$port"
		if [ "$CLI_RC" = 0 ]; then
			expect "$D/client.out" '^ +bw += +[0-9.]+ [KMG]B/sec' 1 &&
				expect "$D/client.out" '^ +latency += +[0-9.]+ [mun]?s' 1
			return
		fi
		grep -q 'unexpected event from RDMA CM: Event rejected' "$D/client.out" || break
		echo "   (qperf's client came before its server listened: again)"
		nice=19
	done
	WHY="exit codes: server $SRV_RC, client $CLI_RC"
	return 1
}
