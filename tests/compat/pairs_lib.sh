#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs one server/client pair of unmodified RDMA programs under
# `softverbs run`, the way a user does it in two terminals: the server in the
# background, the client connecting to 127.0.0.1 on a TCP port nobody uses.
# Sourced by tests/compat/pairs.sh and bench/perf_bench.sh.
#
# Before sourcing: SV (the softverbs command).  The caller owns the daemon
# (SOFTVERBS_SOCKET) and stops it.
#
#   pairs_run DIR TIMEOUT PROG ARGS...
#	Runs "PROG ARGS" as server and "PROG ARGS 127.0.0.1" as client, each
#	bounded by TIMEOUT seconds.  Output in DIR/server.out, DIR/client.out;
#	exit codes in PAIR_SRV_RC, PAIR_CLI_RC (124 = timed out).
#	PAIR_STOP_ROWS=N sends PAIR_STOP_SIG (default TERM) to both once the
#	client has printed N result rows (lines that start with two numbers,
#	as perftest's), or has died, or TIMEOUT is near, the client first:
#	for programs that run until stopped (a side that exits 1 because its
#	peer vanished first is the caller's to judge).  A state, not a time:
#	on a loaded machine setting up can take longer than any fixed wait.
#	PAIR_DIRECT=1 runs the programs as they are, not under softverbs
#	(UCX's ucx_perftest for comparison).
#	Returns 0 when both programs exited 0 (or, with PAIR_STOP_ROWS, died
#	by PAIR_STOP_SIG or exited 0).
#   pairs_daemon_quiet
#	Waits until the daemon has no ufiles/contexts/objects left (up to 10
#	s).  Returns 1 and prints the status when it is dead or still holds
#	something.

#   Between hosts (pairs.sh --wire4/--wire6): PAIR_SRV_NS and PAIR_CLI_NS
#	name the network namespaces the server and the client run in, and
#	PAIR_ADDR the address the client connects to (default 127.0.0.1).

PAIR_SRV_RC=
PAIR_CLI_RC=
PAIR_PORT=
: "${PAIR_ADDR:=127.0.0.1}"
: "${PAIR_SRV_NS:=}"
: "${PAIR_CLI_NS:=}"

# in_ns NS CMD...: CMD in network namespace NS (here when NS is empty).
in_ns() {
	local ns=$1
	shift
	if [ -n "$ns" ]; then
		ip netns exec "$ns" "$@"
	else
		"$@"
	fi
}
: "${PAIR_STOP_ROWS:=}"
: "${PAIR_STOP_SIG:=TERM}"

# True when some TCP socket (v4 or v6, any state) uses local port $1.
port_in_use() {
	local hex
	hex=$(printf '%04X' "$1")
	in_ns "$PAIR_SRV_NS" awk -v p=":$hex" \
		'NR > 1 && substr($2, length($2) - 4) == p { f = 1 }
		END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# True when something listens on TCP port $1 (state 0A = LISTEN), in the
# server's namespace.
port_listening() {
	local hex
	hex=$(printf '%04X' "$1")
	in_ns "$PAIR_SRV_NS" awk -v p=":$hex" \
		'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
		END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# A free port from a range derived from our pid (so parallel ctest runs
# start far apart), skipping ports in use and ports already tried.
pairs_pick_port() {
	local p
	: "${PAIR_NEXT_PORT:=$((20000 + ($$ % 4000) * 10))}"
	for _ in $(seq 0 200); do
		p=$PAIR_NEXT_PORT
		PAIR_NEXT_PORT=$((PAIR_NEXT_PORT + 1))
		[ "$PAIR_NEXT_PORT" -ge 60000 ] && PAIR_NEXT_PORT=20000
		port_in_use "$p" || {
			PAIR_PORT=$p
			return 0
		}
	done
	echo "pairs: no free TCP port" >&2
	return 1
}

# Kills the process tree rooted at pid $1 with signal $2 (timeout ->
# softverbs run exec'd into the program: usually a single process).
kill_tree() {
	local pid=$1 sig=$2 c
	for c in $(pgrep -P "$pid" 2>/dev/null); do
		kill_tree "$c" "$sig"
	done
	kill -s "$sig" "$pid" 2>/dev/null
}

# One attempt; returns 2 when the server could not listen (port taken).
pair_once() {
	local dir=$1 tmo=$2 srv cli wrap=("$SV" run)
	shift 2
	[ -n "${PAIR_DIRECT:-}" ] && wrap=()
	# Line-buffered stdout: a program stopped by a signal (or the timeout)
	# still shows what it printed, in order with its stderr.
	command -v stdbuf >/dev/null && wrap=(stdbuf -oL "${wrap[@]}")
	: >"$dir/server.out"
	: >"$dir/client.out"
	timeout -k 5 "$tmo" ${PAIR_SRV_NS:+ip netns exec "$PAIR_SRV_NS"} \
		"${wrap[@]}" "$@" -p "$PAIR_PORT" >"$dir/server.out" 2>&1 &
	srv=$!
	# The server opens the device, makes its QPs, then listens: wait for
	# the listen (or its death) before starting the client.
	for _ in $(seq 1 300); do
		port_listening "$PAIR_PORT" && break
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.1
	done
	if ! port_listening "$PAIR_PORT"; then
		kill_tree "$srv" KILL
		wait "$srv"
		PAIR_SRV_RC=$?
		PAIR_CLI_RC=-
		echo "(client not started: the server never listened on port $PAIR_PORT)" >"$dir/client.out"
		if grep -qiE "couldn't listen|address already in use|bind" "$dir/server.out"; then
			return 2
		fi
		return 1
	fi
	timeout -k 5 "$tmo" ${PAIR_CLI_NS:+ip netns exec "$PAIR_CLI_NS"} \
		"${wrap[@]}" "$@" -p "$PAIR_PORT" "$PAIR_ADDR" >"$dir/client.out" 2>&1 &
	cli=$!
	if [ -n "$PAIR_STOP_ROWS" ]; then
		# Until the rows are there (or the client is gone), polling;
		# the timeout's last 10 s are left for the stop itself.
		for _ in $(seq 1 $(((tmo > 20 ? tmo - 10 : tmo) * 10))); do
			[ "$(grep -cE '^[[:space:]]*[0-9]+[[:space:]]+[0-9]+[[:space:]]' \
				"$dir/client.out")" -ge "$PAIR_STOP_ROWS" ] && break
			kill -0 "$cli" 2>/dev/null || break
			sleep 0.1
		done
		# Both, as a user's Ctrl-C to both terminals, the client (the
		# side that drives the traffic) first: a client that outlived
		# its server would see its work fail (on one host at once,
		# RETRY_EXC_ERR as a NIC's after its retries: the peer is gone)
		# and exit 1 before its own signal lands.  A server that
		# outlives its client by a moment sees the TCP socket close and
		# may exit on its own (the caller's to judge).
		# shellcheck disable=SC2046 # pid lists
		kill -s "$PAIR_STOP_SIG" $(pgrep -P "$cli") "$cli" 2>/dev/null
		# shellcheck disable=SC2046
		kill -s "$PAIR_STOP_SIG" $(pgrep -P "$srv") "$srv" 2>/dev/null
	fi
	wait "$cli"
	PAIR_CLI_RC=$?
	# A client that failed leaves the server waiting for nothing: give it a
	# few seconds to notice (the socket closed), then stop it.
	if [ "$PAIR_CLI_RC" != 0 ] && [ -z "$PAIR_STOP_ROWS" ]; then
		for _ in $(seq 1 50); do
			kill -0 "$srv" 2>/dev/null || break
			sleep 0.1
		done
		kill_tree "$srv" TERM
	fi
	wait "$srv"
	PAIR_SRV_RC=$?
	return 0
}

pairs_run() {
	local dir=$1 tmo=$2 rc ok_rc=0
	shift 2
	mkdir -p "$dir"
	for _ in 1 2 3; do
		pairs_pick_port || return 1
		pair_once "$dir" "$tmo" "$@"
		rc=$?
		[ $rc = 2 ] || break
		echo "   (port $PAIR_PORT taken, retrying)" >&2
	done
	[ $rc = 0 ] || return 1
	if [ -n "$PAIR_STOP_ROWS" ]; then
		ok_rc=$((128 + $(kill -l "$PAIR_STOP_SIG")))
	fi
	{ [ "$PAIR_SRV_RC" = 0 ] || [ "$PAIR_SRV_RC" = "$ok_rc" ]; } &&
		{ [ "$PAIR_CLI_RC" = 0 ] || [ "$PAIR_CLI_RC" = "$ok_rc" ]; }
}

# Prints the daemon's status field $1 (a number) from `daemon status
# --json`, of the daemon of namespace $2 (default: here).
daemon_field() {
	in_ns "${2:-}" "$SV" daemon status --json 2>/dev/null |
		sed -n "s/.*\"$1\": *\([0-9][0-9]*\).*/\1/p"
}

# pairs_daemon_quiet [NS]: the daemon (of namespace NS) answers and holds
# nothing.
pairs_daemon_quiet() {
	local u c o ns=${1:-}
	for _ in $(seq 1 100); do
		if ! in_ns "$ns" "$SV" daemon status >/dev/null 2>&1; then
			echo "daemon${ns:+ of $ns} does not answer 'softverbs daemon status':"
			in_ns "$ns" "$SV" daemon status 2>&1 | sed 's/^/    /'
			return 1
		fi
		u=$(daemon_field ufiles "$ns")
		c=$(daemon_field contexts "$ns")
		o=$(daemon_field objects "$ns")
		[ "$u" = 0 ] && [ "$c" = 0 ] && [ "$o" = 0 ] && return 0
		sleep 0.1
	done
	echo "daemon${ns:+ of $ns} still holds ufiles=$u contexts=$c objects=$o after both programs exited:"
	in_ns "$ns" "$SV" daemon status 2>&1 | sed 's/^/    /'
	return 1
}
