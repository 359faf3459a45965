#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A flood of valid RoCE v2 packets to QPNs that do not exist must not
# slow the QPs that do (docs/wire.md "Hostile packets"; issue 26 item 4's
# target: under 20,000 such packets/s an ibv_rc_pingpong's time per
# iteration stays within 1.5x of its unflooded time, in one run).
#
# Two network namespaces joined by a veth (tests/compat/netns_lib.sh), a
# daemon in each, as bench/wire_bench.sh.  ibv_rc_pingpong (IPv4 GIDs,
# -n ITERS, the default 4096 bytes) runs between them under softverbs
# run, server in B, client in A, in ROUNDS rounds.  Each round runs the
# pair unflooded and again while bench/roce_flood.c sends from A to B's
# UDP port 4791 at each rate of RATES (UD SEND-only packets to random
# QPNs in 0x800000-0xffffff, correct ICRCs), the flood started before
# the server and stopped after both ended; odd rounds run the unflooded
# pair first, even rounds last (the load of a shared machine drifts, and
# that must favour neither).  Per run: the
# usec/iter the client prints, what the flood sent, and in B: the
# daemon's rx_no_qp and requests (`softverbs daemon status --json`), the
# kernel's UDP drops, the daemon's CPU time and the server program's
# (/usr/bin/time).  Medians over the rounds; the ratio flooded/unflooded.
#
#   bench/wire_flood.sh            (root: it makes namespaces)
#
# Environment:
#   SV_BUILD_DIR=DIR or SOFTVERBS=DIR/bin/softverbs  the build to measure
#                      (else a Release tree is built in build-bench/)
#   FLOOD_ROUNDS=5  FLOOD_ITERS=20000  FLOOD_RATES="5000 20000"
#   FLOOD_BEFORE_DIR=DIR  also measure the build in DIR (the commit before
#                      the fix) in the same run, reported apart, labelled
#                      "before"; FLOOD_BEFORE_ROUNDS=1,
#                      FLOOD_BEFORE_ITERS=2000 (it took ms per iteration)
#   FLOOD_REPORT=FILE  the report (default bench/reports/wire_flood.md;
#                      its data beside it, .tsv)
#   WIRE_TIMEOUT=120   seconds for one pair
#
# Numbers are printed and reported, never asserted.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${SV_BUILD_DIR:-}" ] && [ -z "${SOFTVERBS:-}" ]; then
	SOFTVERBS=$(cd "$SV_BUILD_DIR" && pwd)/bin/softverbs
fi
# shellcheck source=bench/bench_lib.sh
. "$top/bench/bench_lib.sh"
bench_build
export SOFTVERBS=$SV
FLOOD=${ROCE_FLOOD:-$build/bin/roce_flood}
ROUNDS=${FLOOD_ROUNDS:-5}
ITERS=${FLOOD_ITERS:-20000}
RATES=${FLOOD_RATES:-5000 20000}
BEFORE=${FLOOD_BEFORE_DIR:-}
BEFORE_ROUNDS=${FLOOD_BEFORE_ROUNDS:-1}
BEFORE_ITERS=${FLOOD_BEFORE_ITERS:-2000}
REPORT=${FLOOD_REPORT:-$top/bench/reports/wire_flood.md}
TMO=${WIRE_TIMEOUT:-120}
[ -x "$FLOOD" ] || { echo "wire_flood: no $FLOOD (build the roce_flood target)"; exit 1; }
if [ -n "$BEFORE" ] && [ ! -x "$BEFORE/bin/softverbs" ]; then
	echo "wire_flood: no $BEFORE/bin/softverbs"
	exit 1
fi
# shellcheck source=tests/compat/netns_lib.sh
. "$top/tests/compat/netns_lib.sh"
# shellcheck source=tests/compat/pairs_lib.sh
. "$top/tests/compat/pairs_lib.sh"
why=$(netns_require) || { echo "wire_flood: $why"; exit 1; }

TMP=$(mktemp -d)
FLOOD_PID=
FLOOD_CPU=0
stop_flood() {
	[ -n "$FLOOD_PID" ] || return 0
	FLOOD_CPU=$(cpu_ticks "$FLOOD_PID")
	kill -TERM "$FLOOD_PID" 2>/dev/null
	netns_wait "$FLOOD_PID" roce_flood
	FLOOD_PID=
}
netns_setup || exit 1
trap 'stop_flood; netns_cleanup; rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PAIR_SRV_NS=$NS_B
PAIR_CLI_NS=$NS_A
PAIR_ADDR=$NS_B_IP4
tsv=$TMP/flood.tsv
printf 'build\tround\trate\tus_iter\tflood_sent\tflood_rate\trx_no_qp\trequests\tudp_drops\tpair_drops\tdaemon_cpu_ms\tserver_cpu_s\tclient_s\tflood_cpu_ms\tnote\n' >"$tsv"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
HZ=$(getconf CLK_TCK)

# use_build DIR: the daemons of both namespaces run DIR's softverbsd,
# and the pairs run under DIR's softverbs.
use_build() {
	SV=$1/bin/softverbs
	NS_SV=$SV
	export SOFTVERBS=$SV SOFTVERBSD=$1/bin/softverbsd
	ns_a "$SV" daemon stop >/dev/null 2>&1
	ns_b "$SV" daemon stop >/dev/null 2>&1
	netns_daemon a && netns_daemon b || exit 1
}

# What a build is: its source's commit, and whether src/ was as committed.
describe() { # BUILD_DIR
	local src c
	src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$1/CMakeCache.txt" 2>/dev/null)
	c=$(git -C "$src" rev-parse --short HEAD 2>/dev/null) || { echo "unknown"; return; }
	if [ -z "$(git -C "$src" status --porcelain --untracked-files=no -- src 2>/dev/null)" ]; then
		echo "$c (src/ as committed)"
	else
		echo "$c with uncommitted changes in src/"
	fi
}

status_field() { # FIELD [NS]: a number from B's (NS's) daemon status --json
	ip netns exec "${2:-$NS_B}" "$SV" daemon status --json 2>/dev/null |
		sed -n "s/.*\"$1\": *\([0-9][0-9]*\).*/\1/p"
}

# Packets of the pair that softverbs or the kernel dropped in both
# namespaces (the flood's, counted as rx_no_qp, left out): softverbs'
# other drops (malformed, ring full, not from the peer, above the MTU),
# bad ICRCs, send errors, and the kernel's UDP receive errors in A.
pair_drops() {
	local ns s=0
	for ns in "$NS_A" "$NS_B"; do
		s=$((s + $(status_field rx_dropped "$ns") - $(status_field rx_no_qp "$ns") +
			$(status_field rx_bad_icrc "$ns") + $(status_field tx_errors "$ns")))
	done
	echo $((s + $(nstat_udp "$NS_A")))
}

nstat_udp() { # NS: datagrams the kernel's UDP dropped (InErrors counts
	# the receive buffer's overflows, RcvbufErrors, among them)
	ip netns exec "$1" nstat -az 2>/dev/null |
		awk '$1 ~ /^Udp6?InErrors$/ { s += $2 } END { print s + 0 }'
}

cpu_ticks() { # PID: user + system clock ticks so far
	awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

gid_index() { # NS GID
	ip netns exec "$1" "$SV" devices --json |
		sed -n "s/.*\"index\": \([0-9]*\), \"gid\": \"$2\".*/\1/p"
}

# one LABEL ROUND RATE ITERS: one ibv_rc_pingpong pair, flooded at RATE
# packets/s (0: not), one row of the table.
one() {
	local label=$1 round=$2 rate=$3 iters=$4 d g us sent frate nq rq ud dcpu scpu
	local nq0 rq0 ud0 dpid dt0 pd0 pd wall fcpu note=
	d=$TMP/$label.$round.$rate
	mkdir -p "$d"
	g=$(gid_index "$NS_B" "::ffff:$NS_B_IP4")
	dpid=$(status_field pid)
	dt0=$(cpu_ticks "$dpid")
	nq0=$(status_field rx_no_qp)
	rq0=$(status_field requests)
	ud0=$(nstat_udp "$NS_B")
	pd0=$(pair_drops)
	if [ "$rate" != 0 ]; then
		# ip netns exec execs the program: $! is roce_flood itself.
		ip netns exec "$NS_A" "$FLOOD" "$NS_B_IP4" "$rate" $((TMO + 30)) \
			>"$d/flood.out" 2>&1 &
		FLOOD_PID=$!
		sleep 0.2
	fi
	pairs_run "$d" "$TMO" /usr/bin/time -f "sv_cpu %U %S %e" \
		ibv_rc_pingpong -g "$g" -n "$iters"
	FLOOD_CPU=0
	stop_flood
	fcpu=$((FLOOD_CPU * 1000 / HZ))
	us=$(awk '/iters in/ { print $(NF - 1) }' "$d/client.out")
	if [ "$PAIR_CLI_RC" != 0 ] || [ "$PAIR_SRV_RC" != 0 ] || [ -z "$us" ]; then
		us=failed
		note=$(sed -n 's/.*Failed status \(.*\) for wr_id.*/\1/p' "$d/client.out" | head -1)
		[ "$PAIR_CLI_RC" = 124 ] && note="timed out after $TMO s"
		echo "    client: $(grep -hiE -m2 "error|failed|status" "$d/client.out" | tr '\n' ' ')"
		echo "    server: $(grep -hiE -m2 "error|failed|status" "$d/server.out" | tr '\n' ' ')"
	fi
	sent=0 frate=0
	if [ "$rate" != 0 ]; then
		sent=$(sed -n 's/.*sent \([0-9]*\) packets.*/\1/p' "$d/flood.out")
		frate=$(sed -n 's/.*: \([0-9]*\) packets\/s.*/\1/p' "$d/flood.out")
	fi
	# What the daemon thread or an engine read lands in the counters
	# within a moment.
	sleep 0.3
	nq=$(($(status_field rx_no_qp) - nq0))
	rq=$(($(status_field requests) - rq0))
	ud=$(($(nstat_udp "$NS_B") - ud0))
	pd=$(($(pair_drops) - pd0))
	dcpu=$((($(cpu_ticks "$dpid") - dt0) * 1000 / HZ))
	scpu=$(awk '$1 == "sv_cpu" { print $2 + $3 }' "$d/server.out")
	wall=$(awk '$1 == "sv_cpu" { print $4 }' "$d/client.out")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$round" "$rate" \
		"$us" "${sent:-0}" "${frate:-0}" "$nq" "$rq" "$ud" "$pd" "$dcpu" "${scpu:-?}" \
		"${wall:-?}" "$fcpu" "$note" >>"$tsv"
	printf '  %-6s round %s %6s/s: %9s us/iter  flood %7s sent  rx_no_qp +%-7s requests +%-4s udp drops +%-5s pair drops +%-3s daemon %5s ms  server %5s s\n' \
		"$label" "$round" "$rate" "$us" "${sent:-0}" "$nq" "$rq" "$ud" "$pd" "$dcpu" "${scpu:-?}"
}

# measure LABEL BUILD_DIR ROUNDS ITERS
measure() {
	local label=$1 bdir=$2 rounds=$3 iters=$4 r rate order
	use_build "$bdir"
	echo "== $label: $(describe "$bdir"), $rounds rounds of ibv_rc_pingpong -n $iters"
	for r in $(seq 1 "$rounds"); do
		if [ $((r % 2)) = 1 ]; then
			order="0 $RATES"
		else
			order="$(echo "$RATES" | tr ' ' '\n' | tac | tr '\n' ' ') 0"
		fi
		for rate in $order; do
			one "$label" "$r" "$rate" "$iters"
		done
	done
}

AFTER_DESC=$(describe "$build")
measure after "$build" "$ROUNDS" "$ITERS"
BEFORE_DESC=
if [ -n "$BEFORE" ]; then
	BEFORE_DESC=$(describe "$BEFORE")
	measure before "$BEFORE" "$BEFORE_ROUNDS" "$BEFORE_ITERS"
fi
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

mkdir -p "$(dirname "$REPORT")"
cp "$tsv" "${REPORT%.md}.tsv"
/usr/bin/python3 - "$tsv" "$REPORT" "$LOAD_START" "$LOAD_END" "$AFTER_DESC" \
	"$BEFORE_DESC" "$ITERS" "$BEFORE_ITERS" "$(nproc)" "$(uname -r)" \
	"$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" <<'EOF'
import statistics
import sys

(tsv, out_path, load0, load1, after_desc, before_desc, iters, before_iters,
 ncpu, kernel, cpu) = sys.argv[1:]
lines = open(tsv).read().splitlines()
head = lines[0].split("\t")
rows = [dict(zip(head, l.split("\t"))) for l in lines[1:]]
TARGET_RATE, GOAL = 20000, 1.5


def num(v):
    try:
        return float(v)
    except ValueError:
        return None


def runs(label, rate):
    return [r for r in rows if r["build"] == label and r["rate"] == str(rate)]


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v, f="%.2f"):
    return "n/a" if v is None else f % v


def failures(rs):
    return sum(1 for r in rs if num(r["us_iter"]) is None)


rates = sorted({int(r["rate"]) for r in rows if r["rate"] != "0"})
labels = [l for l in ("after", "before") if any(r["build"] == l for r in rows)]


def summary(label, rate):
    """Medians, ratio of medians, per-round ratios, failures."""
    base = runs(label, 0)
    fl = runs(label, rate)
    mb = med(num(r["us_iter"]) for r in base)
    mf = med(num(r["us_iter"]) for r in fl)
    ratios = []
    for r in fl:
        b = [x for x in base if x["round"] == r["round"]]
        f = num(r["us_iter"])
        u = num(b[0]["us_iter"]) if b else None
        if f is not None and u:
            ratios.append(f / u)
    return {"base": mb, "flood": mf,
            "ratio": mf / mb if mf is not None and mb else None,
            "ratios": ratios, "fail": failures(fl), "n": len(fl),
            "base_fail": failures(base), "base_n": len(base),
            "rate": med(num(r["flood_rate"]) for r in fl)}


def nrounds(label):
    return len({r["round"] for r in rows if r["build"] == label})


out = ["# A flood of packets to QPNs that do not exist (two namespaces, one veth)", "",
       "Generated by `bench/wire_flood.sh`: `ibv_rc_pingpong -g <IPv4 GID> -n N` "
       "(RC, 4096-byte messages, MTU 1024) between two network namespaces "
       "joined by a veth, under `softverbs run`, a daemon in each namespace. "
       "Each round runs the pair unflooded and again while "
       "`bench/roce_flood.c` sends valid RoCE v2 packets (UD SEND-only, "
       "correct ICRC) to random QPNs that do not exist (0x800000-0xffffff) "
       "from the client's namespace to the server's UDP port 4791, from "
       "before the server starts until both programs ended (odd rounds "
       "run the unflooded pair first, even rounds last; the table below "
       "lists the runs in the order they ran).  µs/iter is "
       "what the client prints (one round trip of a 4096-byte message each "
       "way).", "",
       "Machine: %s CPUs (%s), kernel %s; load average at start %s, at end "
       "%s.  **The machine was shared**: other engineers' builds and tests "
       "ran on the same 2 CPUs throughout, so the absolute times are mostly "
       "the scheduler's (an unloaded pair of this kind takes tens of µs per "
       "iteration).  That is why each round runs the unflooded and the "
       "flooded pairs back to back and the figures are medians."
       % (ncpu, cpu, kernel, load0, load1), "",
       "- \"after\": %s, %d rounds of %s iterations." % (after_desc, nrounds("after"), iters)]
if before_desc:
    out.append("- \"before\": the commit before the fix, %s, %d round(s) of %s "
               "iterations (fewer: flooded, it took milliseconds per iteration "
               "or failed), the same namespaces and flood, right after the "
               "\"after\" rounds." % (before_desc, nrounds("before"), before_iters))

out += ["", "## Target", "",
        "Issue 26 item 4: under a 20,000 packets/s flood of such packets the "
        "pair's time per iteration stays within 1.5× of its unflooded time, "
        "measured in one run.", "",
        "| build | flood (achieved, median) | µs/iter unflooded (median) "
        "| µs/iter flooded (median) | flooded / unflooded "
        "| per-round ratios (median) | flooded pairs failed "
        "| unflooded pairs failed | goal |",
        "|---|---|---|---|---|---|---|---|---|"]
for label in labels:
    for rate in rates:
        s = summary(label, rate)
        out.append("| %s | {:,}/s ({}) | %s | %s | %s | %s | %d of %d | %d of %d | %s |"
                   .format(rate, fmt(s["rate"], "%.0f")) % (
            label, fmt(s["base"]),
            "all failed" if s["flood"] is None and s["n"] else fmt(s["flood"]),
            fmt(s["ratio"], "%.2f×"),
            (", ".join("%.2f" % x for x in s["ratios"]) +
             " (%.2f×)" % statistics.median(s["ratios"])) if s["ratios"] else "-",
            s["fail"], s["n"], s["base_fail"], s["base_n"],
            "≤ 1.5×, no failure" if rate == TARGET_RATE else ""))
if TARGET_RATE in rates and "after" in labels:
    s = summary("after", TARGET_RATE)
    paired = statistics.median(s["ratios"]) if s["ratios"] else None
    ok = [v is not None and v <= GOAL for v in (s["ratio"], paired)]
    figs = ("under %s packets/s the median time per iteration is %s the "
            "unflooded median, and the median of the rounds' own ratios is %s"
            % ("{:,}".format(TARGET_RATE), fmt(s["ratio"], "%.2f×"),
               fmt(paired, "%.2f×")))
    fails = ("%d of %d flooded pairs failed, %d of %d unflooded ones"
             % (s["fail"], s["n"], s["base_fail"], s["base_n"]))
    if all(ok) and not s["fail"]:
        verdict = "**Target met**: %s; %s." % (figs, fails)
    elif any(ok) and not s["fail"]:
        verdict = ("**Target not met with confidence** (one figure within "
                   "%.1f×, the other not): %s; %s." % (GOAL, figs, fails))
    else:
        verdict = "**Target not met** (goal ≤ %.1f×, no failure): %s; %s." % (
            GOAL, figs, fails)
    out += ["", verdict]
if "before" in labels:
    for rate in rates:
        b = runs("before", rate)
        if b:
            out.append("")
            out.append("Before the fix, %s/s: %s; the server's daemon served "
                       "%s requests during the run, %s unflooded (after the "
                       "fix: %s flooded, %s unflooded)." % (
                "{:,}".format(rate), "; ".join(("%s µs/iter" % r["us_iter"]) if num(r["us_iter"])
                                else "failed after %s s (%s)" % (r["client_s"], r["note"] or "?")
                                for r in b),
                ", ".join(r["requests"] for r in b),
                ", ".join(r["requests"] for r in runs("before", 0)) or "n/a",
                ", ".join(r["requests"] for r in runs("after", rate)) or "n/a",
                ", ".join(r["requests"] for r in runs("after", 0)) or "n/a"))

out += ["", "## Every run", "",
        "In the server's namespace: `rx_no_qp` and `requests` are how much the "
        "daemon's counters (`softverbs daemon status --json`) grew over the "
        "run: the packets dropped for want of a QP by whoever read the port, "
        "and the requests the daemon served (the script's own status calls "
        "and the pair's setup included, so the unflooded run shows the "
        "baseline).  `udp drops` are the kernel's UDP receive errors there. "
        "`pair drops`: what softverbs (both namespaces: bad ICRC, malformed, "
        "ring full, not from the peer, above the MTU, send errors) and the "
        "client namespace's UDP dropped besides the flood.  `daemon CPU` is "
        "the server-side daemon's user + system time over the run, `server "
        "CPU` the server program's (it polls its CQ, so about its running "
        "time), `client s` the client's wall time, `flood CPU` the "
        "sender's own (it runs on the same CPUs, as do the kernel's "
        "receive path for its packets: a real flood would come from "
        "another host).", "",
        "| build | round | flood /s | µs/iter | flood sent | flood rate /s "
        "| rx_no_qp | requests | udp drops | pair drops | daemon CPU ms "
        "| server CPU s | client s | flood CPU ms | failure |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    fl = r["rate"] != "0"
    out.append("| %s |" % " | ".join([
        r["build"], r["round"], r["rate"] if fl else "none", r["us_iter"],
        r["flood_sent"] if fl else "", r["flood_rate"] if fl else "",
        r["rx_no_qp"], r["requests"], r["udp_drops"], r["pair_drops"],
        r["daemon_cpu_ms"], r["server_cpu_s"], r["client_s"],
        r["flood_cpu_ms"] if fl else "", r["note"]]))
out += ["", "Why such packets cost a load now, not a daemon call: the map of "
        "live QPNs in src/common/sv_wire.h (docs/wire.md \"Hostile packets\")."]
open(out_path, "w").write("\n".join(out) + "\n")
EOF
echo "report: $REPORT"
