#!/bin/bash
# SPDX-License-Identifier: MIT
# The softverbs command called as a user calls it: by name through PATH
# (and through a symlink in a ~/bin-like folder), from a directory that is
# not its own, with nothing in the environment pointing at the build.  It
# must start the daemon of its own build (found from /proc/self/exe), not
# whatever `argv[0]` would name relative to the current directory.
set -u

BUILD=${SV_BUILD_DIR:-$(dirname "$0")/../../build}
BUILD=$(cd "$BUILD" && pwd -P)
export SOFTVERBS_SOCKET=svtest.path.$$
export SOFTVERBS_IDLE_TIMEOUT=60
unset SOFTVERBSD SOFTVERBS_LIBDIR LD_LIBRARY_PATH SOFTVERBS
TMP=$(mktemp -d)
fails=0

cleanup() {
	"$BUILD/bin/softverbs" daemon stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok $*"; }

# The exe of the daemon on our socket (empty when none answers).
daemon_exe() {
	local pid
	pid=$("$BUILD/bin/softverbs" daemon status --json 2>/dev/null |
		grep -Eo '"pid": [0-9]+' | grep -Eo '[0-9]+')
	[ -n "$pid" ] && readlink "/proc/$pid/exe"
}

# check NAME: `softverbs daemon start` and `softverbs run` by name, from
# $TMP/elsewhere, with PATH as set by the caller.
check() {
	local how=$1 out rc exe
	cd "$TMP/elsewhere" || exit 1
	out=$(softverbs daemon start 2>&1)
	rc=$?
	[ $rc = 0 ] && ok "$how: daemon start" ||
		fail "$how: daemon start: exit $rc: $out"
	exe=$(daemon_exe)
	[ "$exe" = "$BUILD/bin/softverbsd" ] && ok "$how: the build's daemon runs" ||
		fail "$how: daemon exe '$exe', expected $BUILD/bin/softverbsd"
	"$BUILD/bin/softverbs" daemon stop >/dev/null 2>&1
	[ -z "$(daemon_exe)" ] || fail "$how: the daemon did not stop"

	# run: the daemon is started by the command before the program runs.
	out=$(softverbs run sh -c 'echo "D=$SOFTVERBSD"; echo "L=$LD_LIBRARY_PATH"' 2>&1)
	rc=$?
	[ $rc = 0 ] && ok "$how: run" || fail "$how: run: exit $rc: $out"
	grep -qx "D=$BUILD/bin/softverbsd" <<<"$out" &&
		ok "$how: run names the build's daemon" ||
		fail "$how: run's SOFTVERBSD: $out"
	grep -qx "L=$BUILD/lib" <<<"$out" &&
		ok "$how: run puts the build's library first" ||
		fail "$how: run's LD_LIBRARY_PATH: $out"
	exe=$(daemon_exe)
	[ "$exe" = "$BUILD/bin/softverbsd" ] && ok "$how: run started the build's daemon" ||
		fail "$how: after run, daemon exe '$exe'"
	out=$(softverbs run ibv_devices 2>&1)
	grep -Eq "^ +sv0[[:space:]]+[0-9a-f]{16}$" <<<"$out" &&
		ok "$how: run ibv_devices lists sv0" ||
		fail "$how: run ibv_devices: $out"
	"$BUILD/bin/softverbs" daemon stop >/dev/null 2>&1
	cd / || exit 1
}

mkdir -p "$TMP/elsewhere" "$TMP/bin"
# The build's bin directory on PATH.
PATH="$BUILD/bin:$PATH" check "PATH=build/bin"
# A symlink in another folder on PATH (the usual ~/bin setup): the
# command still belongs to the build it points into.
ln -s "$BUILD/bin/softverbs" "$TMP/bin/softverbs"
PATH="$TMP/bin:$PATH" check "symlink on PATH"
echo "$fails failed"
[ $fails = 0 ]
