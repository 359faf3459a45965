#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The one-host data path against its targets, with the peers beside it in
# the same run (issue "the data path at the physical limit"):
#
#   latency   ib_write_lat / ib_send_lat / ib_read_lat 8 B (typical) vs
#             fi_pingpong over libfabric's shm provider, 8 B
#   bandwidth ib_write_bw 64 KiB and 1 MiB vs UCT put_bw over CMA (zcopy);
#             ib_read_bw vs UCT get over CMA (zcopy);
#             ib_write_bw and ib_send_bw 8 B vs UCX tag_bw over posix shm
#   tails     ib_write_lat 512 KiB .. 4 MiB: 99th percentile / typical,
#             beside a bare process_vm_writev ping-pong's (bench/cma_pingpong.c)
#   errors    ib_write_bw / ib_send_bw / ib_read_bw -a (2 B .. 8 MiB) with
#             -q 1, 4 and 8, DP_RUNS times each: runs that fail; the same
#             with SOFTVERBS_NO_CMA=1, at most 3 times each
#   floor     what one system call and one 8-byte process_vm_writev cost
#             here (bench/syscall_bench.c): direct execution pays one
#   fallback  the same latency and bandwidth with SOFTVERBS_NO_CMA=1
#
# Every figure compared with a peer's is the median of DP_ROUNDS (5)
# rounds, each round running every peer and, right after it, ours; the
# fallback's figures are the median of three runs (median3); the tails are
# one run each.
#
#   bench/dp_bench.sh [--quick]     (--quick: DP_RUNS=2)
#
# Writes bench/reports/dp.md (tables, ratios against the targets),
# bench/reports/dp.tsv and bench/reports/dp.png.  Numbers are printed and
# reported, never asserted.  SOFTVERBS=.../bin/softverbs uses that build,
# else a Release tree is built in build-bench/.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/bench_lib.sh
. "$top/bench/bench_lib.sh"
bench_build
export SOFTVERBS_SOCKET=svbench.dp.$$
export SOFTVERBS_IDLE_TIMEOUT=300
PY=/usr/bin/python3
TMO=${DP_TIMEOUT:-120}
RUNS=${DP_RUNS:-10}
[ "${1:-}" = --quick ] && RUNS=2
# shellcheck source=tests/compat/pairs_lib.sh
. "$top/tests/compat/pairs_lib.sh"

TMP=$(mktemp -d)
cleanup() {
	"$SV" daemon stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$reports"
tsv=$TMP/dp.tsv
printf 'what\tsize\tvalue\tnote\n' >"$tsv"
DP_LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# record WHAT SIZE VALUE [NOTE]
record() {
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:--}" >>"$tsv"
	printf '  %-28s %9s  %s %s\n' "$1" "$2" "$3" "${4:-}"
}

# perftest_row FILE SIZE COL: column COL of the result row for SIZE.
perftest_row() {
	awk -v s="$2" -v c="$3" '$1 == s && $2 ~ /^[0-9]+$/ { print $c; exit }' "$1"
}

# pt NAME SIZE ITERS COL [perftest args...]: one perftest pair; records
# column COL of its row (bw: 4 = MB/s average; lat: 5 = typical, 8 = 99%).
pt() {
	local name=$1 s=$2 n=$3 col=$4 d v
	shift 4
	d=$TMP/$name.$s
	pairs_run "$d" "$TMO" "$@" -x 0 -F -s "$s" -n "$n"
	if [ $? = 0 ] && v=$(perftest_row "$d/client.out" "$s" "$col") && [ -n "$v" ]; then
		echo "$v"
		return 0
	fi
	"$SV" daemon stop >/dev/null 2>&1
	echo failed
	return 1
}

# median: the median of the numbers on stdin, one a line (what is not a
# number is left out); "failed" when there is none.
median() {
	grep -E '^[0-9.]+$' | sort -g |
		awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "failed" }'
}

# median3 FUNC ARGS...: FUNC ARGS run three times, each printing one
# value; prints their median (of those that did not fail), or "failed".
# One run of a pair on this kind of machine lands in a slow mode now and
# then (the scheduler, the host): the median is what the pair gives.
median3() {
	local v
	v=$(for _ in 1 2 3; do "$@"; done | median)
	echo "$v"
	[ "$v" != failed ]
}

echo "== floor: system calls on this machine"
if [ -x "$build/bin/syscall_bench" ]; then
	"$build/bin/syscall_bench" | while read -r what v; do record "$what" - "$v" "ns"; done
fi

# The peers run as they are (PAIR_DIRECT): no softverbs.
# fi_pingpong's -p is the provider: its ports are -B (server) and -P.
fi_lat() {
	local v=failed
	if pairs_pick_port; then
		timeout "$TMO" fi_pingpong -p shm -e rdm -B "$PAIR_PORT" -S 8 -I 50000 \
			>"$TMP/fi.srv" 2>&1 &
		sleep 0.5
		timeout "$TMO" fi_pingpong -p shm -e rdm -P "$PAIR_PORT" -S 8 -I 50000 \
			127.0.0.1 >"$TMP/fi.cli" 2>&1 &&
			v=$(awk '$1 == 8 && $2 ~ /k$/ { print $7; exit }' "$TMP/fi.cli")
		wait
	fi
	echo "${v:-failed}"
}
# ucx NAME ucx_perftest-args...: one ucx_perftest pair; its final
# bandwidth (MB/s).
ucx() {
	local d=$TMP/ucx.$1 v=failed
	shift
	PAIR_DIRECT=1 pairs_run "$d" "$TMO" ucx_perftest "$@" >/dev/null &&
		v=$(awk '$1 == "Final:" { print $6 }' "$d/client.out")
	echo "${v:-failed}"
}

# One round: every peer and, right after it, what is compared with it
# (a figure of ours beside a figure of the peer's from the same minute:
# this machine's speed drifts by more than the margins of the targets
# over the minutes a whole run takes).  Each value goes to $TMP/vals,
# one line "WHAT SIZE UNIT VALUE"; the report takes the median of the
# rounds.
val() {
	printf '%s %s %s %s\n' "$1" "$2" "$3" "$4" >>"$TMP/vals"
}
round() {
	local s n mode=direct
	val fi_pingpong_shm_lat 8 usec "$(fi_lat)"
	for t in write_lat send_lat read_lat; do
		val "${t}_$mode" 8 usec "$(pt "$t.$mode" 8 20000 5 "ib_$t")"
	done
	# As many 8-byte messages as UCX measures (1,000,000): 200,000 took
	# about 30 ms here, and six such ib_send_bw runs gave 41-65 MB/s,
	# six of 2,000,000 55-64 (none had gone direct instead of packets).
	val ucx_tag_bw_posix 8 MB/s "$(UCX_TLS=posix,self ucx tag_bw -t tag_bw -s 8 -n 1000000 -w 100000)"
	val "write_bw_$mode" 8 MB/s "$(pt "wbw.$mode" 8 1000000 4 ib_write_bw)"
	val "send_bw_$mode" 8 MB/s "$(pt "sbw.$mode" 8 1000000 4 ib_send_bw)"
	val "read_bw_$mode" 8 MB/s "$(pt "rbw.$mode" 8 1000000 4 ib_read_bw)"
	for s in 65536 1048576; do
		n=$(( s > 65536 ? 5000 : 20000 ))
		val uct_put_bw_cma "$s" MB/s "$(ucx "put.$s" -t put_bw -d memory -x cma \
			-D zcopy -s "$s" -n $((4294967296 / s)) -w 100)"
		val "write_bw_$mode" "$s" MB/s "$(pt "wbw.$mode" "$s" $n 4 ib_write_bw)"
		val uct_get_bw_cma "$s" MB/s "$(ucx "get.$s" -t get -d memory -x cma \
			-D zcopy -s "$s" -n $((4294967296 / s)) -w 100)"
		val "read_bw_$mode" "$s" MB/s "$(pt "rbw.$mode" "$s" $n 4 ib_read_bw)"
		val "send_bw_$mode" "$s" MB/s "$(pt "sbw.$mode" "$s" $n 4 ib_send_bw)"
	done
}

"$SV" daemon start >/dev/null 2>&1
ROUNDS=${DP_ROUNDS:-5}
echo "== peers and softverbs (direct), side by side, $ROUNDS rounds"
: >"$TMP/vals"
for r in $(seq "$ROUNDS"); do
	echo "  round $r"
	round
done
# The median of each figure's rounds (of those that did not fail).
cut -d' ' -f1-3 "$TMP/vals" | awk '!seen[$0]++' | while read -r w sz u; do
	record "$w" "$sz" "$(awk -v w="$w" -v s="$sz" '$1 == w && $2 == s { print $4 }' \
		"$TMP/vals" | median)" "$u"
done

# The fallback (no targets of its own: its figures are reported).
export SOFTVERBS_NO_CMA=1
mode=nocma
echo "== softverbs ($mode)"
for t in write_lat send_lat read_lat; do
	record "${t}_$mode" 8 "$(median3 pt "$t.$mode" 8 20000 5 "ib_$t")" usec
done
for s in 8 65536 1048576; do
	n=$(( s > 65536 ? 5000 : s > 8 ? 20000 : 200000 ))
	record "write_bw_$mode" "$s" "$(median3 pt "wbw.$mode" "$s" $n 4 ib_write_bw)" MB/s
	record "read_bw_$mode" "$s" "$(median3 pt "rbw.$mode" "$s" $n 4 ib_read_bw)" MB/s
	record "send_bw_$mode" "$s" "$(median3 pt "sbw.$mode" "$s" $n 4 ib_send_bw)" MB/s
done
unset SOFTVERBS_NO_CMA

echo "== ib_write_lat tails (direct)"
mode=direct
for s in 524288 1048576 2097152 4194304; do
	typ=$(pt "wlat.$mode" "$s" 500 5 ib_write_lat)
	p99=$(perftest_row "$TMP/wlat.$mode.$s/client.out" "$s" 8)
	record write_lat_typical "$s" "$typ" usec
	record write_lat_p99 "$s" "${p99:-failed}" usec
	# The machine's own tails for the same operation, right after.
	if [ -x "$build/bin/cma_pingpong" ]; then
		"$build/bin/cma_pingpong" "$s" 500 |
			while read -r what sz v; do record "$what" "$sz" "$v" usec; done
	fi
done

# sweeps RUNS SUFFIX: every -a sweep RUNS times, recorded as ..._a_qQ SUFFIX
sweeps() {
	local t q bad d
	for t in write_bw send_bw read_bw; do
		for q in 1 4 8; do
			bad=0
			for _ in $(seq "$1"); do
				d=$TMP/a.$t.$q$2
				if ! pairs_run "$d" "$TMO" "ib_$t" -x 0 -F -a -q "$q" -n 100 ||
					grep -qiE "error|failed" "$d/client.out" "$d/server.out"; then
					bad=$((bad + 1))
					echo "    failed: $(grep -hiE -m1 "error|failed|status" "$d/client.out" "$d/server.out" | head -1)"
					"$SV" daemon stop >/dev/null 2>&1
				fi
			done
			record "${t}_a_q$q$2" - "$bad/$1" "failed runs"
		done
	done
}
echo "== -a sweeps (2 B .. 8 MiB), $RUNS runs each"
sweeps "$RUNS" ""
# The fallback moves every byte through packets and the owners' engines:
# a sweep takes several times as long, so fewer runs.
NOCMA_RUNS=$(( RUNS > 3 ? 3 : RUNS ))
echo "== -a sweeps with SOFTVERBS_NO_CMA=1, $NOCMA_RUNS runs each"
"$SV" daemon stop >/dev/null 2>&1
export SOFTVERBS_NO_CMA=1
sweeps "$NOCMA_RUNS" _nocma
unset SOFTVERBS_NO_CMA
"$SV" daemon stop >/dev/null 2>&1

cp "$tsv" "$reports/dp.tsv"
DP_LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg) DP_LOAD_START="$DP_LOAD_START" DP_ROUNDS="$ROUNDS" \
	"$PY" "$top/bench/plot_dp.py" "$reports/dp.tsv" "$reports/dp.md" "$reports/dp.png"
echo "report: $reports/dp.md"
