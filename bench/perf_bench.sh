#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Data-path benchmark: unmodified perftest pairs under softverbs, by message
# size, next to single-thread memcpy (measured in the same run) and UCX's
# ucx_perftest over shared memory (UCX_TLS=posix,self) when it is there.
#
#   bench/perf_bench.sh [--quick]
#	--quick: 8 B, 4 KiB, 64 KiB, 1 MiB, 4 MiB only (default 8 B ... 4 MiB,
#	every power of two).  PERF_SIZES="8 65536" picks sizes by hand.
#	SOFTVERBS=.../bin/softverbs uses that build; otherwise a Release tree
#	is built in build-bench/ (as scripts/bench.sh does).
#
# Writes bench/reports/perf.md (tables and where it stands),
# bench/reports/perf.tsv (the numbers) and bench/reports/perf.png (bandwidth
# by size; needs python3-matplotlib).  It prints numbers and never asserts
# speed: a pair that fails is "failed" in its cell and the run goes on.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/bench_lib.sh
. "$top/bench/bench_lib.sh"
bench_build
export SOFTVERBS_SOCKET=svbench.perf.$$
export SOFTVERBS_IDLE_TIMEOUT=120
PY=/usr/bin/python3 # Debian's: python3-matplotlib belongs to it
TMO=${PERF_TIMEOUT:-120}
# shellcheck source=tests/compat/pairs_lib.sh
. "$top/tests/compat/pairs_lib.sh"

apt_want ucx-utils
apt_want python3-matplotlib

if [ -n "${PERF_SIZES:-}" ]; then
	sizes=$PERF_SIZES
elif [ "${1:-}" = --quick ]; then
	sizes="8 4096 65536 1048576 4194304"
else
	sizes=$(s=8; while [ $s -le 4194304 ]; do echo $s; s=$((s * 2)); done)
fi

PERF_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
export PERF_LOAD
TMP=$(mktemp -d)
cleanup() {
	"$SV" daemon stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$reports"
tsv=$TMP/perf.tsv
printf 'test\tsize\tvalue\tvalue2\n' >"$tsv"

# clamp N LO HI
clamp() { local v=$1; [ "$v" -lt "$2" ] && v=$2; [ "$v" -gt "$3" ] && v=$3; echo "$v"; }

# Iterations: enough bytes to time the big sizes (1 GiB for bandwidth,
# 256 MiB for latency), enough messages to time the small ones.
bw_iters() { clamp $((1073741824 / $1)) 200 20000; }
lat_iters() { clamp $((268435456 / $1)) 100 10000; }

# record TEST SIZE VALUE [VALUE2]
record() {
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:--}" >>"$tsv"
	printf '  %-14s %8s  %s %s\n' "$1" "$2" "$3" "${4:-}"
}

# The perftest row of size $2 in file $1: prints "col4" (BW average, MiB/s)
# for bw, "col5 col6" (t_typical, t_avg, usec) for lat.
perftest_row() {
	awk -v s="$2" -v kind="$3" '$1 == s && $2 ~ /^[0-9]+$/ {
		if (kind == "bw") print $4; else print $5, $6; exit }' "$1"
}

echo "== memcpy (single thread, MiB/s)"
if [ -x "$build/bin/memcpy_bench" ]; then
	# shellcheck disable=SC2086
	"$build/bin/memcpy_bench" $sizes | while read -r s v; do record memcpy "$s" "$v"; done
else
	echo "  memcpy_bench not built"
fi

"$SV" daemon start >/dev/null 2>&1
for t in write_bw read_bw send_bw send_lat write_lat; do
	echo "== ib_$t under softverbs (${t##*_}: $([ "${t##*_}" = bw ] && echo 'BW average MiB/s' || echo 't_typical t_avg usec'))"
	for s in $sizes; do
		kind=${t##*_}
		if [ "$kind" = bw ]; then n=$(bw_iters "$s"); else n=$(lat_iters "$s"); fi
		d=$TMP/$t.$s
		pairs_run "$d" "$TMO" "ib_$t" -x 0 -F -s "$s" -n "$n"
		rc=$?
		# perftest's clock calibration (r^2 < 0.9) misses on a busy machine.
		if grep -q "Correlation coefficient" "$d/server.out" "$d/client.out"; then
			pairs_run "$d" "$TMO" "ib_$t" -x 0 -F -s "$s" -n "$n"
			rc=$?
		fi
		if [ $rc = 0 ] &&
			v=$(perftest_row "$d/client.out" "$s" "$kind") && [ -n "$v" ]; then
			# shellcheck disable=SC2086
			record "$t" "$s" $v
		else
			record "$t" "$s" failed
			echo "    first error: $(grep -hiE -m1 "couldn't|failed|error|unable|invalid|refused" "$d/client.out" "$d/server.out" | head -1)"
			# A pair that failed may leave state behind: start afresh.
			"$SV" daemon stop >/dev/null 2>&1
		fi
	done
done
"$SV" daemon stop >/dev/null 2>&1

if command -v ucx_perftest >/dev/null; then
	export UCX_TLS=posix,self
	for t in tag_bw ucp_put_bw tag_lat; do
		echo "== UCX $t over shared memory ($([ "$t" = tag_lat ] && echo 'latency usec: 50%ile average' || echo 'bandwidth MiB/s'))"
		for s in $sizes; do
			if [ "$t" = tag_lat ]; then n=$(clamp $((268435456 / s)) 100 100000); else n=$(clamp $((1073741824 / s)) 100 100000); fi
			d=$TMP/ucx.$t.$s
			# Final line: iterations p50 avg overall bw_avg bw_overall mr_avg mr_overall
			if PAIR_DIRECT=1 pairs_run "$d" "$TMO" ucx_perftest -t "$t" -s "$s" -n "$n" -w $((n / 10 + 1)) -f &&
				v=$(awk -v n="$n" '$1 == n && NF == 8 { print (t == "lat" ? $2 " " $3 : $6) }' t="${t##*_}" "$d/client.out") &&
				[ -n "$v" ]; then
				# shellcheck disable=SC2086
				record "ucx_$t" "$s" $v
			else
				record "ucx_$t" "$s" failed
			fi
		done
	done
	unset UCX_TLS
else
	echo "== UCX: ucx_perftest not installed (Debian package ucx-utils): no comparison"
fi

cp "$tsv" "$reports/perf.tsv"
"$PY" "$top/bench/plot_perf.py" "$reports/perf.tsv" "$reports/perf.md" "$reports/perf.png"
echo "report: $reports/perf.md"
