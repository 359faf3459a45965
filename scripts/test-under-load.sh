#!/usr/bin/env bash
# Runs the whole suite (scripts/test.sh) several times on a machine made
# busy on purpose, as CI machines are: tests that wait for a fixed time
# instead of a state fail here first.
#
#   scripts/test-under-load.sh [--busy N] [--runs R] [--logs DIR]
#
# --busy N  busy loops running beside the suite (default 2)
# --runs R  runs of scripts/test.sh (default 5)
# --logs D  where each run's log goes (default: a new directory in /tmp)
#
# Prints each run's result and the tests that failed in it; exits non-zero
# if any run failed.  The busy loops end with the script, however it ends.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
busy=2
runs=5
logs=

usage() {
	sed -n '6,10p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--busy) [ $# -ge 2 ] || usage; busy=$2; shift 2 ;;
	--runs) [ $# -ge 2 ] || usage; runs=$2; shift 2 ;;
	--logs) [ $# -ge 2 ] || usage; logs=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "test-under-load: unknown argument $1" >&2; usage ;;
	esac
done
[[ $busy =~ ^[0-9]+$ && $runs =~ ^[1-9][0-9]*$ ]] || usage
if [ -z "$logs" ]; then
	logs=$(mktemp -d /tmp/softverbs-load.XXXXXX)
else
	mkdir -p "$logs"
fi

pids=()
stop_busy() {
	if [ ${#pids[@]} -gt 0 ]; then
		kill "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
		pids=()
	fi
}
trap stop_busy EXIT
# An interrupted run still ends through the EXIT trap.
trap 'exit 130' INT
trap 'exit 143' TERM

for ((i = 0; i < busy; i++)); do
	(while :; do :; done) &
	pids+=($!)
done
echo "test-under-load: $runs run(s) of scripts/test.sh beside $busy busy loop(s); logs in $logs"

failed=0
for ((r = 1; r <= runs; r++)); do
	log=$logs/run-$r.log
	start=$SECONDS
	if "$top/scripts/test.sh" >"$log" 2>&1; then
		echo "run $r: pass ($((SECONDS - start)) s)"
		continue
	fi
	failed=$((failed + 1))
	echo "run $r: FAIL ($((SECONDS - start)) s), log $log"
	# ctest's list (one per pass: the normal build, then the sanitizer
	# one), then the cases that failed inside the test programs.
	names=$(awk '/The following tests FAILED:/ { on = 1; next }
		     on && /^[ \t]+[0-9]+ - / { print "  " $3 " " $4; next }
		     { on = 0 }' "$log")
	if [ -n "$names" ]; then
		echo "$names"
		grep -E '^FAIL [A-Za-z0-9_]+' "$log" | sort -u | sed 's/^/    /' || true
	else
		echo "  no test failed: the script stopped before or after them; its last lines:"
		tail -n 5 "$log" | sed 's/^/    /'
	fi
done
stop_busy
echo "test-under-load: $failed of $runs run(s) failed (busy loops: $busy); logs in $logs"
[ "$failed" -eq 0 ]
