#!/bin/bash
# SPDX-License-Identifier: MIT
# `softverbs --version` and `softverbs daemon status` tell which build is in
# use and which libibverbs.so.1 a program started with `softverbs run` gets:
# the library path they print is the one the dynamic loader really loads,
# builds are read from the files (a library or daemon of another build is
# named as such), and the build id is this checkout's `git describe`.
set -u

BUILD=${SV_BUILD_DIR:-$(dirname "$0")/../../build}
BUILD=$(cd "$BUILD" && pwd -P)
SRC=${SV_SOURCE_DIR:-$(dirname "$0")/../..}
SV=$BUILD/bin/softverbs
PY=/usr/bin/python3
export SOFTVERBS_SOCKET=svtest.version.$$
export SOFTVERBS_IDLE_TIMEOUT=60
unset SOFTVERBSD SOFTVERBS_LIBDIR LD_LIBRARY_PATH
TMP=$(mktemp -d)
fails=0

cleanup() {
	"$SV" daemon stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok $*"; }

# expect PATTERN DESCRIPTION: grep -E on $TMP/out.
expect() {
	if grep -Eq -- "$1" "$TMP/out"; then
		ok "$2"
	else
		fail "$2: no '$1' in:"
		sed 's/^/    /' "$TMP/out"
	fi
}

# Escapes a string for grep -E.
re() { printf '%s' "$1" | sed 's/[][\.*^$(){}+?|/]/\\&/g'; }

# The library `softverbs run` makes a program load (LD_DEBUG names it).
loaded_lib() {
	LD_DEBUG=libs "$SV" run ibv_devices 2>&1 >/dev/null |
		grep -Eo "calling init: .*/libibverbs\.so\.1$" | sed 's/calling init: //'
}

# Copies file $1 to $2 with its build id replaced by one as long ("X.X.X...").
other_build() {
	$PY - "$1" "$2" <<'PYEOF'
import sys
b = open(sys.argv[1], "rb").read()
m = b"@(#)softverbs-build "
i = b.index(m) + len(m)
j = b.index(b"\0", i)
fake = (b"another-build-" * 8)[: j - i]
open(sys.argv[2], "wb").write(b[:i] + fake + b[j:])
PYEOF
	chmod +x "$2"
}

"$SV" --version >"$TMP/out" 2>&1 || fail "--version failed"
id=$(sed -n '1s/^softverbs \(.*\), protocol [0-9]*$/\1/p' "$TMP/out")
[ -n "$id" ] && ok "--version prints the build: $id" || fail "--version first line: $(head -1 "$TMP/out")"
ver=$(sed -n 's/^project(softverbs VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
case "$id" in
"$ver"*) ok "the build id starts with the project version $ver" ;;
*) fail "build id '$id' does not start with $ver" ;;
esac
if desc=$(git -C "$SRC" describe --always --tags 2>/dev/null); then
	case "$id" in
	"$ver (git $desc"*) ok "the build id has this checkout's git describe ($desc)" ;;
	*) fail "build id '$id' lacks git describe '$desc' (a stale build?)" ;;
	esac
fi
expect "^command +$(re "$SV")$" "--version names the command"
expect "^library +$(re "$BUILD/lib/libibverbs.so.1"), build $(re "$id")$" \
	"--version names the build's library and its build"
expect "^daemon +$(re "$BUILD/bin/softverbsd"), build $(re "$id")$" \
	"--version names the daemon that would start"
lib=$(loaded_lib)
[ "$lib" = "$BUILD/lib/libibverbs.so.1" ] &&
	ok "a program under softverbs run loads the library --version names" ||
	fail "a program under softverbs run loaded '$lib'"

# A library of another build, chosen with SOFTVERBS_LIBDIR.
mkdir "$TMP/lib"
other_build "$BUILD/lib/libibverbs.so.1" "$TMP/lib/libibverbs.so.1"
libdir=$(cd "$TMP/lib" && pwd -P)
SOFTVERBS_LIBDIR=$libdir "$SV" --version >"$TMP/out" 2>&1
expect "^library +$(re "$libdir/libibverbs.so.1"), build another-build-.*\(another build!\)$" \
	"--version names a library of another build as such"
# Every softverbs library in that folder is listed (librdmacm.so.1 ...).
cp "$BUILD/lib/libibverbs.so.1" "$TMP/lib/libsvtest.so.7"
SOFTVERBS_LIBDIR=$libdir "$SV" --version >"$TMP/out" 2>&1
expect "^library +$(re "$libdir/libsvtest.so.7"), build $(re "$id")$" \
	"--version lists every softverbs library beside libibverbs.so.1"
rm "$TMP/lib/libsvtest.so.7"
lib=$(SOFTVERBS_LIBDIR=$libdir loaded_lib)
[ "$lib" = "$libdir/libibverbs.so.1" ] &&
	ok "with SOFTVERBS_LIBDIR the program loads the library --version names" ||
	fail "with SOFTVERBS_LIBDIR the program loaded '$lib'"

# daemon status: the running daemon's build and binary, the library.
"$SV" daemon stop >/dev/null 2>&1
"$SV" daemon start >/dev/null 2>&1 || fail "daemon start"
"$SV" daemon status >"$TMP/out" 2>&1 || fail "daemon status"
expect "^  build: +$(re "$id")$" "status shows the daemon's build"
expect "^  binary: +$(re "$BUILD/bin/softverbsd")$" "status shows the daemon's binary"
expect "^  library: +$(re "$BUILD/lib/libibverbs.so.1"), build $(re "$id")$" \
	"status shows the library programs get"
"$SV" --version >"$TMP/out" 2>&1
expect "^running +$(re "$BUILD/bin/softverbsd"), build $(re "$id")$" \
	"--version shows the running daemon"
"$SV" daemon stop >/dev/null 2>&1

# A daemon of another build (SOFTVERBSD) and the other library.
other_build "$BUILD/bin/softverbsd" "$TMP/softverbsd"
SOFTVERBSD=$TMP/softverbsd "$SV" daemon start >/dev/null 2>&1 || fail "start of the other daemon"
SOFTVERBS_LIBDIR=$libdir "$SV" daemon status --json >"$TMP/out" 2>&1
if $PY - "$TMP/out" "$(cd "$TMP" && pwd -P)/softverbsd" "$libdir/libibverbs.so.1" <<'PYEOF'; then
import json, sys
s = json.load(open(sys.argv[1]))
assert s["binary"] == sys.argv[2], s
assert s["build"].startswith("another-build-"), s
assert s["library"] == sys.argv[3], s
assert s["library_build"].startswith("another-build-"), s
PYEOF
	ok "status --json: another build's daemon and library, read from their files"
else
	fail "status --json: $(cat "$TMP/out")"
fi
SOFTVERBSD=$TMP/softverbsd "$SV" --version >"$TMP/out" 2>&1
expect "^running .*, build another-build-.*\(another build!\)$" \
	"--version marks a running daemon of another build"

echo "$fails failed"
[ $fails = 0 ]
