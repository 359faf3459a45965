#!/bin/bash
# SPDX-License-Identifier: MIT
# `cmake --install` into a temporary prefix, then the installed tree on its
# own: `softverbs run ibv_devinfo` loads the installed library (from
# PREFIX/lib/softverbs, which must not shadow rdma-core's in PREFIX/lib) and
# the installed daemon, with no SOFTVERBSD and nothing from the build tree.
set -u

BUILD=${SV_BUILD_DIR:-$(dirname "$0")/../../build}
PY=/usr/bin/python3
export SOFTVERBS_SOCKET=svtest.install.$$
export SOFTVERBS_IDLE_TIMEOUT=60
# The test environment points both at the build tree: the installed tree
# must find its own pieces.
unset SOFTVERBSD SOFTVERBS_LIBDIR LD_LIBRARY_PATH
TMP=$(mktemp -d)
P=$TMP/prefix
SV=$P/bin/softverbs
fails=0

cleanup() {
	[ -x "$SV" ] && "$SV" daemon stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok $*"; }

# check_out PATTERN DESCRIPTION: grep -E on $TMP/out.
check_out() {
	if grep -Eq -- "$1" "$TMP/out"; then
		ok "$2"
	else
		fail "$2: no '$1' in:"
		sed 's/^/    /' "$TMP/out"
	fi
}

# Prints the exe of the running daemon (empty when none answers).
daemon_exe() {
	local pid
	pid=$("$SV" daemon status --json 2>/dev/null |
		$PY -c 'import json,sys; print(json.load(sys.stdin)["pid"])' 2>/dev/null)
	[ -n "$pid" ] && readlink "/proc/$pid/exe"
}

if ! cmake --install "$BUILD" --prefix "$P" >"$TMP/out" 2>&1; then
	fail "cmake --install:"
	sed 's/^/    /' "$TMP/out"
	exit 1
fi
ok "cmake --install"
P=$(cd "$P" && pwd -P)
SV=$P/bin/softverbs
for f in bin/softverbs bin/softverbsd lib/softverbs/libibverbs.so.1 lib/softverbs/librdmacm.so.1; do
	[ -e "$P/$f" ] && ok "installed $f" || fail "$f not installed"
done
if ls -d "$P"/lib/libibverbs* "$P"/lib/librdmacm* 2>/dev/null | grep -q .; then
	fail "libibverbs or librdmacm in $P/lib would shadow rdma-core's: $(ls "$P"/lib)"
else
	ok "nothing named libibverbs or librdmacm directly in PREFIX/lib"
fi

# softverbs run: the installed library, and the installed daemon started.
LD_DEBUG=libs "$SV" run ibv_devinfo >"$TMP/out" 2>&1
rc=$?
[ $rc = 0 ] && ok "installed softverbs run ibv_devinfo" ||
	fail "installed softverbs run ibv_devinfo: exit $rc"
check_out "hca_id:[[:space:]]+sv0" "ibv_devinfo shows sv0"
check_out "calling init: $P/lib/softverbs/libibverbs\.so\.1$" \
	"ibv_devinfo runs on the installed library"
if grep -E "calling init: .*libibverbs\.so" "$TMP/out" |
	grep -v "calling init: $P/lib/softverbs/" >"$TMP/other"; then
	fail "another libibverbs loaded too: $(cat "$TMP/other")"
else
	ok "no other libibverbs loaded"
fi
exe=$(daemon_exe)
[ "$exe" = "$P/bin/softverbsd" ] && ok "the installed daemon runs" ||
	fail "daemon exe '$exe', expected $P/bin/softverbsd"

# The library alone (no `softverbs run`, hence no SOFTVERBSD from it) finds
# the installed daemon next to itself.
"$SV" daemon stop >/dev/null 2>&1
[ -z "$(daemon_exe)" ] && ok "daemon stopped" || fail "daemon still running"
LD_LIBRARY_PATH=$P/lib/softverbs ibv_devices >"$TMP/out" 2>&1
rc=$?
[ $rc = 0 ] && ok "ibv_devices on the installed library" ||
	fail "ibv_devices on the installed library: exit $rc"
check_out "^ +sv0[[:space:]]+[0-9a-f]{16}$" "ibv_devices lists sv0"
exe=$(daemon_exe)
[ "$exe" = "$P/bin/softverbsd" ] && ok "the library started the installed daemon" ||
	fail "daemon exe '$exe', expected $P/bin/softverbsd"

"$SV" daemon stop >"$TMP/out" 2>&1
rc=$?
[ $rc = 0 ] && ok "installed softverbs daemon stop" ||
	fail "installed softverbs daemon stop: exit $rc"
check_out "stopped" "daemon stop reports it stopped"

echo "$fails failed"
[ $fails = 0 ]
