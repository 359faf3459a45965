#!/usr/bin/env bash
# Builds and runs every test: the normal build (unit, integration and
# compat tests with unmodified ibverbs-utils and pyverbs), then an
# ASan+UBSan build of the C tests that also checks the lock order
# (src/engine/sv_lock.h).  Exits non-zero if anything fails.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
jobs=$(nproc)
# A failing check prints the stacks of its processes and daemon (gdb), as a
# case that runs out of time does: a failure seen once on a loaded machine
# must say where it was (tests/lib/sv_test.c).
export SV_TEST_STACKS=1

echo "== build"
"$top/scripts/build.sh" "$top/build"
echo "== tests"
(cd "$top/build" && ctest --output-on-failure -j"$jobs" --timeout 600)

echo "== sanitizer build (ASan + UBSan)"
"$top/scripts/build.sh" "$top/build-asan" -DSV_SANITIZE=ON -DSV_LOCK_CHECK=ON -DCMAKE_BUILD_TYPE=Debug
# The daemon's stderr (where a sanitizer report of the daemon lands) goes to
# $TMPDIR/softverbsd-UID.log: give this run its own and check it afterwards.
asan_tmp=$(mktemp -d)
export TMPDIR=$asan_tmp
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Compat tests run unmodified (non-ASan) programs: they cannot load an ASan
# library, so the sanitizer pass runs the C tests.
(cd "$top/build-asan" && ctest --output-on-failure -j"$jobs" -LE compat --timeout 600)
sleep 1
if grep -lE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$asan_tmp"/softverbsd-*.log 2>/dev/null; then
  echo "softverbs: the daemon reported sanitizer errors:" >&2
  cat "$asan_tmp"/softverbsd-*.log >&2
  exit 1
fi
# A lock taken out of order aborts its process; one a test expected to
# die (a killed peer) could hide it, so look for the message everywhere.
if grep -h "softverbs: lock order:" "$top/build-asan/Testing/Temporary/LastTest.log"; then
  echo "softverbs: a lock was taken out of order (src/engine/sv_lock.h)" >&2
  exit 1
fi
rm -rf "$asan_tmp"
echo "== all tests passed"
