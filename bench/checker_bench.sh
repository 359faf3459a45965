#!/bin/bash
# SPDX-License-Identifier: MIT
# What the misuse checker costs when it is off (docs/checker.md): the same
# perftest pairs under two builds' `softverbs run`, alternating, checker
# off (SOFTVERBS_CHECK unset) in both.
#
#   bench/checker_bench.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]
#
# Each round runs ib_write_lat -s 8 (typical latency, us) and ib_send_bw
# -s 8 (average MB/s) under BEFORE then AFTER; prints every round and the
# medians.  Numbers are printed, never asserted; bench/reports/checker.md
# keeps a run.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
before=$1 after=$2 rounds=${3:-5}
unset SOFTVERBS_CHECK
export SOFTVERBS_IDLE_TIMEOUT=60 SOFTVERBS_WIRE_WARN=0
# shellcheck source=tests/compat/pairs_lib.sh
. "$top/tests/compat/pairs_lib.sh"
TMP=$(mktemp -d)
trap 'for b in "$before" "$after"; do SOFTVERBS_SOCKET=svbench.ck.$$ "$b/bin/softverbs" daemon stop >/dev/null 2>&1; done; rm -rf "$TMP"' EXIT

# one BUILD NAME COL perftest-args...: column COL of the 8-byte row.
one() {
	local b=$1 name=$2 col=$3 d
	shift 3
	d=$TMP/$name
	SV=$b/bin/softverbs SOFTVERBS_SOCKET=svbench.ck.$$ \
		pairs_run "$d" 120 "$@" -x 0 -F -s 8 >/dev/null 2>&1 &&
		awk -v c="$col" '$1 == 8 && $2 ~ /^[0-9]+$/ { print $c; exit }' "$d/client.out"
}

median() {
	sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "failed" }'
}

echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
	for which in before after; do
		b=$before
		[ $which = after ] && b=$after
		lat=$(one "$b" "lat.$which.$r" 5 ib_write_lat -n 5000)
		bw=$(one "$b" "bw.$which.$r" 4 ib_send_bw -n 20000)
		echo "round $r $which ib_write_lat_us ${lat:-failed} ib_send_bw_MBps ${bw:-failed}" |
			tee -a "$TMP/rounds"
	done
done
for which in before after; do
	echo "median $which ib_write_lat_us $(awk -v w=$which '$3 == w { print $5 }' "$TMP/rounds" | grep -E '^[0-9.]+$' | median)" \
		"ib_send_bw_MBps $(awk -v w=$which '$3 == w { print $7 }' "$TMP/rounds" | grep -E '^[0-9.]+$' | median)"
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
