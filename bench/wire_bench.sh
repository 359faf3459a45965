#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# RoCE v2 between two hosts (issue "Between hosts at the speed of the
# link"), against the kernel's TCP and UDP on the same link in the same
# run: two network namespaces joined by a veth (tests/compat/netns_lib.sh),
# a daemon in each.  In rounds (WIRE_ROUNDS, default 5), each round runs
# the peer and then ours; the report gives the medians.
#
#   bandwidth ib_write_bw, ib_read_bw, ib_send_bw at 64 KiB and 1 MiB (RC,
#             IPv4 GIDs) vs qperf tcp_bw of the same size, at MTU 1500
#             and 9000 (RoCE MTU 1024 and 4096); CPU seconds per GB of
#             each side (the process's user + system time over the bytes
#             moved), ours and qperf's; the floor under them, a bare UDP
#             stream of packets of the path MTU in trains, and the same
#             shaped as 64 KiB WRITEs' packets with an ACK datagram back
#             for each train (bench/udp_floor.c)
#   latency   ib_send_lat, ib_read_lat, ib_write_lat, ib_atomic_lat 8 B
#             typical and 99th percentile vs qperf udp_lat / tcp_lat 8 B
#             (one-way, half the round trip, but ib_read_lat's and
#             ib_atomic_lat's: perftest gives their whole round trip);
#             ib_write_lat's floor,
#             a UDP ping-pong whose sides spin on memory that a thread
#             blocked in recv() writes (bench/spin_floor.c)
#   messages  ib_write_bw, ib_send_bw 8 B and ib_atomic_bw message rate
#             vs qperf udp_bw 8 B
#   loss      ib_write_bw 64 KiB with 1% of B's RoCE packets dropped
#             (nftables), each round right after its lossless twin; and
#             5% (once): it finishes
#   drops     ib_write_bw -q 8 -a across the veth, loss-free: packets
#             dropped by softverbs and by the kernel's UDP
#
#   bench/wire_bench.sh            (root: it makes namespaces)
#   WIRE_ROUNDS=N WIRE_SECONDS=S   (defaults 5 and 4)
#   WIRE_ONLY="bw lat msg loss drops" a subset of the sections
#
# Writes bench/reports/wire.md (and wire.tsv, every round's figure, and
# wire.svg, the plot).  Numbers are printed and reported, never asserted.
# SOFTVERBS=.../bin/softverbs uses that build, else a Release tree is
# built in build-bench/.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/bench_lib.sh
. "$top/bench/bench_lib.sh"
bench_build
export SOFTVERBS=$SV
TMO=${WIRE_TIMEOUT:-120}
ROUNDS=${WIRE_ROUNDS:-5}
SECS=${WIRE_SECONDS:-4}
ONLY=${WIRE_ONLY:-bw lat msg loss drops}
# shellcheck source=tests/compat/netns_lib.sh
. "$top/tests/compat/netns_lib.sh"
# shellcheck source=tests/compat/pairs_lib.sh
. "$top/tests/compat/pairs_lib.sh"
why=$(netns_require) || { echo "wire_bench: $why"; exit 1; }

TMP=$(mktemp -d)
netns_setup || exit 1
trap 'netns_cleanup; rm -rf "$TMP"' EXIT
netns_daemon a && netns_daemon b || exit 1
PAIR_SRV_NS=$NS_B
PAIR_CLI_NS=$NS_A
PAIR_ADDR=$NS_B_IP4
mkdir -p "$reports"
tsv=$TMP/wire.tsv
printf 'round\twhat\tvalue\tunit\n' >"$tsv"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
ROUND=0

record() { # WHAT VALUE UNIT
	printf '%s\t%s\t%s\t%s\n' "$ROUND" "$1" "$2" "$3" >>"$tsv"
	printf '  r%s %-34s %10s %s\n' "$ROUND" "$1" "$2" "$3"
}
on() { case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }

gid_index() { # NS GID
	ip netns exec "$1" "$SV" devices --json |
		sed -n "s/.*\"index\": \([0-9]*\), \"gid\": \"$2\".*/\1/p"
}
G4=$(gid_index "$NS_A" "::ffff:$NS_A_IP4")

set_mtu() { # MTU: both ends of the veth
	ns_a ip link set dev "$NS_IF_A" mtu "$1" && ns_b ip link set dev "$NS_IF_B" mtu "$1"
	# The daemons follow the interfaces (netlink): wait for the port.
	local want=1024 i
	[ "$1" -ge 9000 ] && want=4096
	for i in $(seq 1 100); do
		ns_a "$SV" devices 2>/dev/null | grep -q "active_mtu $want " &&
			ns_b "$SV" devices 2>/dev/null | grep -q "active_mtu $want " && return 0
		sleep 0.1
	done
	echo "wire_bench: the port's MTU did not follow to $want" >&2
}

# The CPU one program used, in "user+system" seconds, from GNU time -o.
cpu_of() { awk '/^CPU/ { print $2 + $3; f = 1 } END { if (!f) print "" }' "$1" 2>/dev/null; }
CPUW=$TMP/cpuwrap
cat >"$CPUW" <<'EOF'
#!/bin/sh
# cpuwrap PROG ARGS...: PROG under GNU time, into $CPU_DIR/cpu.client when
# its last argument is the server's address, else $CPU_DIR/cpu.server.
eval "last=\${$#}"
side=server
case $last in *.*.*.* | *:*) side=client ;; esac
exec /usr/bin/time -f "CPU %U %S" -o "$CPU_DIR/cpu.$side" "$@"
EOF
chmod +x "$CPUW"

perftest_row() { # FILE SIZE COL
	awk -v s="$2" -v c="$3" '$1 == s && $2 ~ /^[0-9]+$/ { print $c; exit }' "$1"
}

# pt NAME SIZE COL PROG ARGS...: one perftest pair across the veth; the
# value in column COL of the size's row (or "failed").  The CPU each side
# used in $TMP/NAME.ROUND/cpu.{client,server}.
pt() {
	local name=$1 s=$2 col=$3 d v
	shift 3
	d=$TMP/$name.$ROUND
	mkdir -p "$d"
	export CPU_DIR=$d
	if pairs_run "$d" "$TMO" "$CPUW" "$@" -x "$G4" -F -s "$s" &&
		v=$(perftest_row "$d/client.out" "$s" "$col") && [ -n "$v" ]; then
		echo "$v"
	else
		echo failed
	fi
}

# per_gb CPU MBPS SECONDS: CPU seconds per GB moved.
per_gb() {
	awk -v c="$1" -v b="$2" -v t="$3" 'BEGIN {
		if (c == "" || b + 0 <= 0) print "n/a"; else printf "%.2f\n", c / (b * t / 1000) }'
}

# bw NAME PROG SIZE: ours, with CPU per GB each side.
bw() {
	local v
	v=$(pt "$1" "$3" 4 "$2" -D "$SECS")
	record "$1" "$v" MB/s
	[ "$v" = failed ] && return
	local d=$TMP/$1.$ROUND
	record "$1_cpu_client" "$(per_gb "$(cpu_of "$d/cpu.client")" "$v" "$SECS")" s/GB
	record "$1_cpu_server" "$(per_gb "$(cpu_of "$d/cpu.server")" "$v" "$SECS")" s/GB
}

# qp NAME TEST [qperf args]: qperf across the veth; the value in MB/s, us
# or K msgs/s (udp_bw: the receiver's message rate).  CPU of each side in
# $TMP/qperf.NAME.{server,client}.cpu.
qp() {
	local name=$1 out=$TMP/qperf.$1 v srv
	shift
	ip netns exec "$NS_B" timeout "$TMO" /usr/bin/time -f "CPU %U %S" \
		-o "$out.server.cpu" qperf >/dev/null 2>&1 &
	srv=$!
	sleep 0.5
	ip netns exec "$NS_A" timeout "$TMO" /usr/bin/time -f "CPU %U %S" \
		-o "$out.client.cpu" qperf "$NS_B_IP4" -t "$SECS" -v "$@" >"$out" 2>&1
	# The server (qperf under time under timeout): stop qperf itself,
	# so time still writes what it used.
	kill_tree "$srv" TERM
	wait "$srv" 2>/dev/null
	v=$(awk '/^ *bw *=|latency *=/ { v = $3; u = $4 }
		/recv_bw *=/ { v = $3; u = $4 }
		END { if (u == "GB/sec") v *= 1000; if (u == "KB/sec") v /= 1000;
		      if (u == "ms") v *= 1000; if (u == "ns") v /= 1000; print v }' "$out")
	if [ "$1" = udp_bw ]; then
		v=$(awk '/msg_rate *=/ { v = $3; u = $4; gsub(",", "", v)
			if (u ~ /^M/) v *= 1000; if (u !~ /^[KM]/) v /= 1000; print v }' "$out")
	fi
	echo "${v:-failed}"
}

serve_b() { # OUT CMD...: CMD in the background in B, once it printed "ready"
	local out=$1 i
	shift
	ns_b "$@" >"$out" 2>&1 &
	for i in $(seq 1 100); do
		grep -q ready "$out" && break
		sleep 0.05
	done
}

# floor NAME PAYLOAD [roce]: the UDP floor (bench/udp_floor.c), MB/s
# received; roce: the RoCE-shaped one (64 KiB WRITEs' packets and trains,
# an ACK datagram back for each one read).
floor() {
	local v=failed
	if [ -x "$build/bin/udp_floor" ]; then
		serve_b "$TMP/floor.out" "$build/bin/udp_floor" recv 4792 "$SECS" \
			${3:+ack}
		ns_a "$build/bin/udp_floor" send "$NS_B_IP4" 4792 "$SECS" "$2" \
			${3:+roce} >/dev/null 2>&1
		wait
		v=$(tail -1 "$TMP/floor.out" | awk 'NF == 2 { print $1 }')
	fi
	record "$1" "${v:-failed}" MB/s
}

# spin_floor: ib_write_lat's floor (bench/spin_floor.c), a UDP ping-pong
# in which each side spins on a word that a thread blocked in recv()
# writes, and acknowledges: typical and 99th percentile, one-way.
spin_floor() {
	local v=""
	if [ -x "$build/bin/spin_floor" ]; then
		serve_b "$TMP/sfloor.out" timeout 60 "$build/bin/spin_floor" server 4796 5000
		v=$(ns_a timeout 60 "$build/bin/spin_floor" client "$NS_B_IP4" 4796 5000 2>/dev/null)
		wait
	fi
	set -- $v
	record spin_floor_lat_8 "${1:-failed}" us
	record spin_floor_lat_8_p99 "${2:-failed}" us
}

qbw() { # NAME SIZE: qperf tcp_bw, with CPU per GB each side
	local v
	v=$(qp "$1" tcp_bw -m "$2")
	record "$1" "$v" MB/s
	record "$1_cpu_client" "$(per_gb "$(cpu_of "$TMP/qperf.$1.client.cpu")" "$v" "$SECS")" s/GB
	record "$1_cpu_server" "$(per_gb "$(cpu_of "$TMP/qperf.$1.server.cpu")" "$v" "$SECS")" s/GB
}

nstat_udp() { # NS: the kernel's UDP drop counters, summed
	ip netns exec "$1" nstat -az 2>/dev/null |
		awk '$1 ~ /^Udp6?(RcvbufErrors|InErrors)$/ { s += $2 } END { print s + 0 }'
}

wire_field() { # NS FIELD: from daemon status --json's wire object
	ip netns exec "$1" "$SV" daemon status --json 2>/dev/null |
		sed -n "s/.*\"$2\": *\([0-9][0-9]*\).*/\1/p"
}

# perftest's latency rows: #bytes, #iterations, t_min, t_max, t_typical,
# t_avg, t_stdev, 99% percentile, 99.9% percentile.
lat() { # NAME PROG
	local d v p99
	v=$(pt "$1" 8 5 "$2" -n 5000)
	record "$1" "$v" us
	d=$TMP/$1.$ROUND
	p99=$(awk '$1 == 8 && $2 ~ /^[0-9]+$/ { print $8; exit }' "$d/client.out" 2>/dev/null)
	record "$1_p99" "${p99:-failed}" us
}

msgrate() { # NAME PROG: perftest's MsgRate column (Mpps) as K msgs/s
	local v
	v=$(pt "$1" 8 5 "$2" -D "$SECS")
	[ "$v" != failed ] && v=$(awk -v m="$v" 'BEGIN { printf "%.1f\n", m * 1000 }')
	record "$1" "$v" "K msgs/s"
}

# The 1% loss figure right after its lossless twin of the same round
# (the ratio is taken round by round: this machine's figures wander by
# half from one minute to the next).
loss1() {
	netns_loss b 1
	bw write_bw_64k_loss1 ib_write_bw 65536
	netns_loss_off b
}

for ROUND in $(seq 1 "$ROUNDS"); do
	echo "== round $ROUND of $ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg))"
	if on bw; then
		for mtu in 1500 9000; do
			set_mtu $mtu
			floor "udp_floor_m$mtu" $((mtu == 1500 ? 1024 : 4096))
			floor "udp_floor_roce_m$mtu" $((mtu == 1500 ? 1024 : 4096)) roce
			qbw "qperf_tcp_bw_64k_m$mtu" 64k
			bw "write_bw_64k_m$mtu" ib_write_bw 65536
			[ "$mtu" = 1500 ] && on loss && loss1
			bw "read_bw_64k_m$mtu" ib_read_bw 65536
			bw "send_bw_64k_m$mtu" ib_send_bw 65536
			qbw "qperf_tcp_bw_1m_m$mtu" 1m
			bw "write_bw_1m_m$mtu" ib_write_bw 1048576
			bw "read_bw_1m_m$mtu" ib_read_bw 1048576
			bw "send_bw_1m_m$mtu" ib_send_bw 1048576
		done
		set_mtu 1500
	fi
	if on lat; then
		record qperf_udp_lat_8 "$(qp udp_lat udp_lat -m 8)" us
		record qperf_tcp_lat_8 "$(qp tcp_lat tcp_lat -m 8)" us
		spin_floor
		lat send_lat_8 ib_send_lat
		lat read_lat_8 ib_read_lat
		lat write_lat_8 ib_write_lat
		lat atomic_lat_8 ib_atomic_lat
	fi
	if on msg; then
		record qperf_udp_bw_8_rate "$(qp udp_bw udp_bw -m 8)" "K msgs/s"
		msgrate write_bw_8_rate ib_write_bw
		msgrate send_bw_8_rate ib_send_bw
		msgrate atomic_bw_rate ib_atomic_bw
	fi
	if on loss && ! on bw; then
		bw write_bw_64k_m1500 ib_write_bw 65536
		loss1
	fi
done

if on loss; then
	ROUND=1
	echo "== 5% loss"
	netns_loss b 5
	v=$(pt loss5 65536 4 ib_write_bw -n 2000)
	record write_bw_64k_loss5 "$v" MB/s
	netns_loss_off b
fi

if on drops; then
	ROUND=1
	echo "== drops during ib_write_bw -q 8 -a (loss-free veth)"
	ka=$(nstat_udp "$NS_A")
	kb=$(nstat_udp "$NS_B")
	da=$(( $(wire_field "$NS_A" rx_dropped) + $(wire_field "$NS_A" tx_errors) ))
	db=$(( $(wire_field "$NS_B" rx_dropped) + $(wire_field "$NS_B" tx_errors) ))
	d=$TMP/aq8
	if pairs_run "$d" "$TMO" ib_write_bw -x "$G4" -F -a -q 8 -n 200; then
		record write_bw_a_q8 ok run
	else
		record write_bw_a_q8 failed run
		echo "    client: $(grep -hiE -m2 "error|failed|status|coefficient" "$d/client.out" | tr '\n' ' ')"
		echo "    server: $(grep -hiE -m2 "error|failed|status|coefficient" "$d/server.out" | tr '\n' ' ')"
	fi
	record dropped_by_softverbs $(( $(wire_field "$NS_A" rx_dropped) + $(wire_field "$NS_A" tx_errors) - da +
		$(wire_field "$NS_B" rx_dropped) + $(wire_field "$NS_B" tx_errors) - db )) packets
	record dropped_by_kernel_udp $(( $(nstat_udp "$NS_A") - ka + $(nstat_udp "$NS_B") - kb )) packets
fi

cp "$tsv" "$reports/wire.tsv"
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
/usr/bin/python3 "$top/bench/wire_report.py" "$reports/wire.tsv" "$reports/wire.md" \
	"$reports/wire.svg" "$LOAD_START" "$LOAD_END" "$ROUNDS" "$(git -C "$top" rev-parse --short HEAD 2>/dev/null)"
echo "report: $reports/wire.md"
