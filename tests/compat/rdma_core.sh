#!/bin/bash
# SPDX-License-Identifier: MIT
# rdma-core's own test suite on our library: the pyverbs tests Debian's
# python3-pyverbs ships in /usr/share/doc/rdma-core/tests (some gzipped),
# copied and run with Debian's python3 under `softverbs run` (our
# libibverbs.so.1 and librdmacm.so.1, and the /sys/class/infiniband in
# which the rdma_cm tests look up the device's interface).
# rdma_core_suite.py judges the result: no failure, no error, no skip for
# a reason docs/verbs.md does not document.  Three runs: as it comes (direct
# execution over CMA), with SOFTVERBS_DIRECT=0 (every message as packets
# through the rings) and with SOFTVERBS_NO_CMA=1 (the owner's engine
# copies).  As root, 2 MiB huge pages are reserved for the run (and given
# back) so the suite's huge-page tests run too.  Exit 77 (skipped) when
# the suite or pyverbs is not installed.
#
# SV_PRELOAD (the sanitizer build's ctest sets it): the sanitizer runtimes
# to preload into python3, which is not instrumented, so that it can load
# an instrumented library; Python's own allocations are not ours to
# check for leaks (detect_leaks=0), every other report ends the run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# (canonical: the library check below compares the mapped library's
# path; `softverbs run` puts its build's lib first itself)
SV_BUILD_DIR=$(cd "${SV_BUILD_DIR:-$here/../../build}" && pwd) || exit 1
PY=/usr/bin/python3
SV=${SOFTVERBS:-$SV_BUILD_DIR/bin/softverbs}
SRC=${RDMA_CORE_TESTS:-/usr/share/doc/rdma-core/tests}
if [ ! -e "$SRC/run_tests.py" ] || ! "$PY" -c 'import pyverbs' 2>/dev/null; then
	echo "rdma-core's tests not installed ($SRC, package python3-pyverbs): skipped"
	exit 77
fi

if [ -n "${SV_PRELOAD:-}" ]; then
	export LD_PRELOAD="$SV_PRELOAD${LD_PRELOAD:+ $LD_PRELOAD}"
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi

# A daemon of its own (stopped at the end), whatever this run's sanitizer
# options make of it.
export SOFTVERBS_SOCKET=svtest.rdmacore.$$
TMP=$(mktemp -d)
huge_was=
cleanup() {
	"$SV" daemon stop >/dev/null 2>&1
	if [ -n "$huge_was" ]; then
		echo "$huge_was" >/proc/sys/vm/nr_hugepages 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
cp -r "$SRC" "$TMP/tests"
find "$TMP/tests" -name '*.gz' -exec gunzip -f {} +

# Which library the suite's process maps: ours, or the run proves nothing.
lib=$("$SV" run "$PY" -c '
import pyverbs.device
for l in open("/proc/self/maps"):
    if "libibverbs.so" in l:
        print(l.split()[-1]); break')
case "$lib" in
"$SV_BUILD_DIR"/*) ;;
*) echo "FAIL: pyverbs maps $lib, not $SV_BUILD_DIR/lib's libibverbs.so.1"; exit 1 ;;
esac

# The suite's huge-page tests want 2 MiB pages; reserve a few when none
# are (root only; the kernel reserves what its free memory allows, and
# with none the tests skip, for a reason the suite's judge accepts).
if [ "$(id -u)" = 0 ] && [ -w /proc/sys/vm/nr_hugepages ] &&
	[ "$(cat /proc/sys/vm/nr_hugepages)" = 0 ]; then
	huge_was=0
	echo 32 >/proc/sys/vm/nr_hugepages 2>/dev/null
fi

dev=$("$SV" devices --json 2>/dev/null |
	sed -n 's/.*"name": *"\([^"]*\)".*/\1/p' | head -1)
[ -n "$dev" ] || dev=sv0

fails=0
for mode in "" SOFTVERBS_DIRECT=0 SOFTVERBS_NO_CMA=1; do
	echo "== rdma-core's tests on $dev${mode:+ with $mode}"
	# shellcheck disable=SC2086 # mode is one word or none
	if ! env $mode timeout 600 "$SV" run "$PY" "$here/rdma_core_suite.py" \
		"$TMP/tests" "$dev" >"$TMP/out" 2>&1; then
		if grep -q "^rdma-core suite" "$TMP/out"; then
			grep -E "^(FAIL|ERROR|UNEXPECTED SKIP)|^rdma-core suite" "$TMP/out"
			echo "--- the run's failures:"
			sed -n '/^=\{20,\}$/,$p' "$TMP/out" | head -200
		else
			echo "--- the suite did not finish; its last lines:"
			tail -60 "$TMP/out"
		fi
		fails=$((fails + 1))
	else
		grep "^rdma-core suite" "$TMP/out"
	fi
done
if [ $fails != 0 ]; then
	echo "rdma-core's tests: $fails of 3 runs failed"
	exit 1
fi
echo "rdma-core's tests: ok"
