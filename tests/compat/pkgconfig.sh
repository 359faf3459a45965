#!/bin/bash
# SPDX-License-Identifier: MIT
# pkg-config: `cmake --install` into a temporary prefix, then a tiny verbs
# program (pc_prog.c) built with `pkg-config --cflags --libs softverbs` runs
# on softverbs by itself: no LD_LIBRARY_PATH, no `softverbs run`.  It loads
# the installed library (the .pc gives it a RUNPATH), which starts the
# installed daemon.  The same program linked plainly (-libverbs) gets
# rdma-core's library instead: the .pc is what makes the difference.
set -u

BUILD=${SV_BUILD_DIR:-$(dirname "$0")/../../build}
HERE=$(cd "$(dirname "$0")" && pwd)
export SOFTVERBS_SOCKET=svtest.pc.$$
export SOFTVERBS_IDLE_TIMEOUT=60
# A device name nobody else has: proof the device is ours.
export SOFTVERBS_DEVICE_NAME=svpc$$
unset SOFTVERBSD SOFTVERBS_LIBDIR LD_LIBRARY_PATH PKG_CONFIG_PATH
TMP=$(mktemp -d)
P=$TMP/prefix
fails=0

cleanup() {
	[ -x "$P/bin/softverbs" ] && "$P/bin/softverbs" daemon stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok $*"; }

command -v pkg-config >/dev/null || { echo "SKIP: pkg-config is not installed"; exit 77; }
if ! cmake --install "$BUILD" --prefix "$P" >"$TMP/out" 2>&1; then
	fail "cmake --install: $(cat "$TMP/out")"
	exit 1
fi
P=$(cd "$P" && pwd -P)
pc=$(ls "$P"/lib*/pkgconfig/softverbs.pc "$P"/lib/*/pkgconfig/softverbs.pc 2>/dev/null | head -1)
[ -n "$pc" ] && ok "installed $pc" || { fail "no softverbs.pc under $P"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")

flags=$(pkg-config --cflags --libs softverbs 2>&1)
[ $? = 0 ] && ok "pkg-config --cflags --libs softverbs: $flags" || fail "pkg-config: $flags"
ver=$(pkg-config --modversion softverbs)
"$P/bin/softverbs" --version | grep -q "^softverbs $ver[ ,]" &&
	ok "pkg-config --modversion ($ver) is the installed build's version" ||
	fail "modversion $ver vs $("$P/bin/softverbs" --version | head -1)"
libdir=$(pkg-config --variable=libdir softverbs)
[ "$(cd "$libdir" 2>/dev/null && pwd -P)" = "$(cd "$P"/lib*/softverbs 2>/dev/null && pwd -P)" ] &&
	ok "libdir is the installed private library folder" || fail "libdir=$libdir"

# shellcheck disable=SC2086
if cc -o "$TMP/prog" "$HERE/pc_prog.c" $flags >"$TMP/out" 2>&1; then
	ok "built pc_prog.c with the pkg-config flags"
else
	fail "cc with the pkg-config flags: $(cat "$TMP/out")"
	exit 1
fi
(cd / && "$TMP/prog") >"$TMP/out" 2>&1
rc=$?
[ $rc = 0 ] && ok "the program runs on its own" || fail "the program: exit $rc: $(cat "$TMP/out")"
grep -qx "lib $libdir/libibverbs.so.1" "$TMP/out" &&
	ok "it loaded the installed softverbs library" ||
	fail "loaded: $(grep ^lib "$TMP/out")"
grep -qx "device $SOFTVERBS_DEVICE_NAME" "$TMP/out" &&
	ok "it sees the softverbs device $SOFTVERBS_DEVICE_NAME" ||
	fail "devices: $(grep ^device "$TMP/out")"
grep -q "^mr lkey " "$TMP/out" && ok "PD and MR made on it" || fail "no PD/MR: $(cat "$TMP/out")"
pid=$("$P/bin/softverbs" daemon status --json 2>/dev/null | grep -Eo '"pid": [0-9]+' | grep -Eo '[0-9]+')
[ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe")" = "$P/bin/softverbsd" ] &&
	ok "the installed daemon serves it" || fail "daemon pid '$pid' is not $P/bin/softverbsd"

# Without the .pc: Debian's libibverbs.so, no RUNPATH to ours.
if [ -e /usr/include/infiniband/verbs.h ] &&
	cc -o "$TMP/plain" "$HERE/pc_prog.c" -libverbs >/dev/null 2>&1; then
	(cd / && "$TMP/plain") >"$TMP/out" 2>&1
	if grep -q "^lib $libdir/" "$TMP/out" || grep -qx "device $SOFTVERBS_DEVICE_NAME" "$TMP/out"; then
		fail "a plainly linked program got softverbs too: $(cat "$TMP/out")"
	else
		ok "linked plainly, the program gets rdma-core's library instead"
	fi
fi

echo "$fails failed"
[ $fails = 0 ]
