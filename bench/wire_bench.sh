#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# RoCE v2 between two hosts (issue "Between hosts"), against the kernel's
# TCP on the same link in the same run: two network namespaces joined by
# a veth (tests/compat/netns_lib.sh, MTU 1500), a daemon in each.
#
#   bandwidth ib_write_bw 64 KiB (RC, -x: IPv4 and IPv6 GIDs) vs
#             qperf tcp_bw with 64 KiB messages
#   latency   ib_send_lat 8 B typical vs qperf tcp_lat 8 B (both one-way:
#             half the round trip)
#   drops     ib_write_bw -q 8 -a across the veth, loss-free: packets
#             dropped by softverbs (daemon/engine counters) and by the
#             kernel's UDP (UdpRcvbufErrors, UdpInErrors, Udp6...)
#   also      ib_read_bw, ib_send_bw 64 KiB; ib_write_lat, ib_read_lat
#             8 B; qperf udp_lat (the floor of a datagram round trip)
#
#   bench/wire_bench.sh            (root: it makes namespaces)
#
# Writes bench/reports/wire.md and bench/reports/wire.tsv.  Numbers are
# printed and reported, never asserted.  SOFTVERBS=.../bin/softverbs uses
# that build, else a Release tree is built in build-bench/.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/bench_lib.sh
. "$top/bench/bench_lib.sh"
bench_build
export SOFTVERBS=$SV
TMO=${WIRE_TIMEOUT:-120}
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
printf 'what\tvalue\tunit\n' >"$tsv"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

record() {
	printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$tsv"
	printf '  %-34s %10s %s\n' "$1" "$2" "$3"
}

gid_index() { # NS GID
	ip netns exec "$1" "$SV" devices --json |
		sed -n "s/.*\"index\": \([0-9]*\), \"gid\": \"$2\".*/\1/p"
}
G4=$(gid_index "$NS_A" "::ffff:$NS_A_IP4")
G6=$(gid_index "$NS_A" "$NS_A_IP6")

perftest_row() { # FILE SIZE COL
	awk -v s="$2" -v c="$3" '$1 == s && $2 ~ /^[0-9]+$/ { print $c; exit }' "$1"
}

# pt NAME SIZE COL GID PROG ARGS...: one perftest pair across the veth.
pt() {
	local name=$1 s=$2 col=$3 g=$4 d v
	shift 4
	d=$TMP/$name
	if pairs_run "$d" "$TMO" "$@" -x "$g" -F -s "$s" &&
		v=$(perftest_row "$d/client.out" "$s" "$col") && [ -n "$v" ]; then
		echo "$v"
	else
		echo failed
	fi
}

# qp NAME TEST [qperf args]: qperf across the veth, the value in MB/s or us.
qp() {
	local out=$TMP/qperf.$1 v
	shift
	ip netns exec "$NS_B" timeout "$TMO" qperf >/dev/null 2>&1 &
	local srv=$!
	sleep 0.5
	ip netns exec "$NS_A" timeout "$TMO" qperf "$NS_B_IP4" -t 4 -vu "$@" >"$out" 2>&1
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	v=$(awk '/bw *=/ { v = $3; u = $4 } /latency *=/ { v = $3; u = $4 }
		END { if (u == "GB/sec") v *= 1000; if (u == "KB/sec") v /= 1000;
		      if (u == "ms") v *= 1000; if (u == "ns") v /= 1000; print v }' "$out")
	echo "${v:-failed}"
}

nstat_udp() { # NS: the kernel's UDP drop counters, summed
	ip netns exec "$1" nstat -az 2>/dev/null |
		awk '$1 ~ /^Udp6?(RcvbufErrors|InErrors)$/ { s += $2 } END { print s + 0 }'
}

wire_field() { # NS FIELD: from daemon status --json's wire object
	ip netns exec "$1" "$SV" daemon status --json 2>/dev/null |
		sed -n "s/.*\"$2\": *\([0-9][0-9]*\).*/\1/p"
}

echo "== TCP and UDP on the veth (qperf)"
record qperf_tcp_bw_64k "$(qp tcpbw tcp_bw -m 64k)" MB/s
record qperf_tcp_lat_8 "$(qp tcplat tcp_lat -m 8)" us
record qperf_udp_lat_8 "$(qp udplat udp_lat -m 8)" us

echo "== softverbs across the veth"
record write_bw_64k_v4 "$(pt wbw4 65536 4 "$G4" ib_write_bw -D 4)" MB/s
record write_bw_64k_v6 "$(pt wbw6 65536 4 "$G6" ib_write_bw -D 4)" MB/s
record read_bw_64k_v4 "$(pt rbw4 65536 4 "$G4" ib_read_bw -D 4)" MB/s
record send_bw_64k_v4 "$(pt sbw4 65536 4 "$G4" ib_send_bw -D 4)" MB/s
record send_lat_8_v4 "$(pt slat4 8 5 "$G4" ib_send_lat -n 5000)" us
record send_lat_8_v6 "$(pt slat6 8 5 "$G6" ib_send_lat -n 5000)" us
record write_lat_8_v4 "$(pt wlat4 8 5 "$G4" ib_write_lat -n 5000)" us
record read_lat_8_v4 "$(pt rlat4 8 5 "$G4" ib_read_lat -n 5000)" us

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
record wire_rx_packets_b "$(wire_field "$NS_B" rx_packets)" packets

cp "$tsv" "$reports/wire.tsv"
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
/usr/bin/python3 - "$reports/wire.tsv" "$reports/wire.md" "$LOAD_START" "$LOAD_END" <<'EOF'
import sys
rows = {}
for line in open(sys.argv[1]).read().splitlines()[1:]:
    w, v, u = line.split("\t")
    rows[w] = (v, u)

def num(k):
    try:
        return float(rows[k][0])
    except (KeyError, ValueError):
        return None

def ratio(a, b, higher_better=True):
    x, y = num(a), num(b)
    if x is None or y is None or y == 0:
        return "n/a"
    return "%.2fx" % (x / y)

out = ["# RoCE v2 between two hosts (two namespaces, one veth, MTU 1500)", "",
       "Generated by `bench/wire_bench.sh`; load average at start %s, at end %s "
       "(2 CPUs shared with whatever else ran)." % (sys.argv[3], sys.argv[4]), "",
       "## Targets", "",
       "| target | softverbs | peer | ratio | goal |", "|---|---|---|---|---|",
       "| ib_write_bw 64 KiB (IPv4 GIDs) vs qperf tcp_bw 64 KiB | %s MB/s | %s MB/s | %s | >= 1.0x |"
       % (rows.get("write_bw_64k_v4", ("?",))[0], rows.get("qperf_tcp_bw_64k", ("?",))[0],
          ratio("write_bw_64k_v4", "qperf_tcp_bw_64k")),
       "| ib_send_lat 8 B typical vs qperf tcp_lat 8 B | %s us | %s us | %s | <= 1.0x |"
       % (rows.get("send_lat_8_v4", ("?",))[0], rows.get("qperf_tcp_lat_8", ("?",))[0],
          ratio("send_lat_8_v4", "qperf_tcp_lat_8")),
       "| packets dropped by softverbs during ib_write_bw -q 8 -a | %s | | | 0 |"
       % rows.get("dropped_by_softverbs", ("?",))[0],
       "| packets dropped by the kernel's UDP meanwhile | %s | | | 0 |"
       % rows.get("dropped_by_kernel_udp", ("?",))[0],
       "", "## All figures", "", "| what | value | unit |", "|---|---|---|"]
for w, (v, u) in rows.items():
    out.append("| %s | %s | %s |" % (w, v, u))
out += ["", "qperf's latency is one-way (half the round trip), as perftest's.",
        "Why the bandwidth is what it is: docs/wire.md \"Speed\"."]
open(sys.argv[2], "w").write("\n".join(out) + "\n")
EOF
echo "report: $reports/wire.md"
