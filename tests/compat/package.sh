#!/bin/bash
# SPDX-License-Identifier: MIT
# The Debian package, end to end, on this machine (root only: CI runs as
# root; anyone else gets a clean SKIP):
#   build it with CPack from the build tree (what scripts/package.sh does),
#   check its control fields and file list, `dpkg -i` it, then from the
#   installed paths only: `softverbs run ibv_devinfo`, an ibv_rc_pingpong
#   pair, --version, man, pkg-config, completion, and a plain ibv_devinfo
#   that must still get rdma-core's library; then `dpkg -r` with daemons of
#   two users running, and check that no daemon and no file is left.
# Runs are serialised machine-wide (flock): several checkouts may test at
# once on one machine, and there is one dpkg database.
set -u

BUILD=${SV_BUILD_DIR:-$(dirname "$0")/../../build}
BUILD=$(cd "$BUILD" && pwd -P)
HERE=$(cd "$(dirname "$0")" && pwd)
PKG=softverbs
LOCK=/run/lock/softverbs-package-test.lock
MARK=/run/lock/softverbs-package-test.installed
PFX=/usr
DAEMON=$PFX/bin/softverbsd
export SOFTVERBS_SOCKET=svtest.pkg.$$
export SOFTVERBS_IDLE_TIMEOUT=0
unset SOFTVERBSD SOFTVERBS_LIBDIR LD_LIBRARY_PATH SOFTVERBS PKG_CONFIG_PATH
fails=0

skip() {
	echo "SKIP: $*"
	exit 77
}
[ "$(id -u)" = 0 ] ||
	skip "the package test installs and removes a .deb on this machine: run it as root (CI does)"
command -v dpkg >/dev/null && command -v cpack >/dev/null ||
	skip "not a Debian system with dpkg and cpack"
[ -f "$BUILD/CPackConfig.cmake" ] || skip "no CPackConfig.cmake in $BUILD"

TMP=$(mktemp -d)
NTMP=$(mktemp -d) # TMPDIR of the second user's daemon
chmod 1777 "$NTMP"
installed=
pids=()

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok [${SECONDS}s] $*"; }

cleanup() {
	local p
	if [ -n "$installed" ]; then
		dpkg --purge "$PKG" >/dev/null 2>&1
		rm -f "$MARK"
	fi
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$TMP" "$NTMP"
}
trap cleanup EXIT

# dpkg, retried while another dpkg or apt holds its lock (up to 2 min).
dpkg_retry() {
	local i
	for i in $(seq 1 60); do
		dpkg "$@" >"$TMP/dpkg.out" 2>&1 && return 0
		grep -qi "lock" "$TMP/dpkg.out" || break
		sleep 2
	done
	cat "$TMP/dpkg.out"
	return 1
}

# Pids of every process running the installed daemon binary (also when
# its file was removed under it: "... (deleted)").
installed_daemons() {
	find /proc/[0-9]*/exe -maxdepth 0 \( -lname "$DAEMON" -o -lname "$DAEMON (deleted)" \) \
		2>/dev/null | cut -d/ -f3
}

pkg_status() { dpkg-query -W -f='${db:Status-Status}' "$PKG" 2>/dev/null; }

exec 9>"$LOCK"
flock -w 600 9 || skip "another package test held $LOCK for 10 minutes"
if [ "$(pkg_status)" = installed ]; then
	if [ -e "$MARK" ]; then
		echo "   (removing the package a previous run of this test left installed)"
		dpkg_retry --purge "$PKG" >/dev/null
		rm -f "$MARK"
	else
		skip "a $PKG package is installed on this machine: the test would replace it"
	fi
fi

# --- build the package ------------------------------------------------------
if (cd "$BUILD" && cpack --config CPackConfig.cmake -B "$TMP/pkg") >"$TMP/out" 2>&1; then
	ok "cpack built the package"
else
	fail "cpack: $(tail -20 "$TMP/out")"
	exit 1
fi
deb=$(ls "$TMP"/pkg/${PKG}_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { fail "no .deb in $TMP/pkg"; exit 1; }
ok "package $(basename "$deb")"
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|; s|/$||' >"$TMP/list"
dpkg-deb -f "$deb" Depends >"$TMP/depends"
grep -q "libc6" "$TMP/depends" && ok "Depends: $(cat "$TMP/depends")" ||
	fail "Depends lacks libc6: $(cat "$TMP/depends")"
grep -qE "ibverbs-providers|libibverbs1|rdma-core" "$TMP/depends" &&
	fail "the package depends on rdma-core's packages: $(cat "$TMP/depends")"
for f in $PFX/bin/softverbs $DAEMON $PFX/bin/softverbs-portd \
	$PFX/lib/systemd/system/softverbs-portd.service \
	$PFX/lib/softverbs/libibverbs.so.1 \
	$PFX/lib/pkgconfig/softverbs.pc $PFX/share/man/man1/softverbs.1.gz \
	$PFX/share/man/man8/softverbsd.8.gz \
	$PFX/share/bash-completion/completions/softverbs \
	$PFX/share/doc/softverbs/README.md $PFX/share/doc/softverbs/copyright; do
	grep -qx -- "$f" "$TMP/list" || fail "the package lacks $f"
done
for f in "$HERE"/../../docs/*.md; do
	[ -e "$f" ] || continue
	grep -qx -- "$PFX/share/doc/softverbs/$(basename "$f")" "$TMP/list" ||
		fail "the package lacks docs/$(basename "$f")"
done
ok "binaries, library, .pc, man pages, completion and docs are in the package"
if grep -E "/lib[^/]*\.so" "$TMP/list" | grep -v "^$PFX/lib/softverbs/"; then
	fail "libraries outside the private folder $PFX/lib/softverbs (they would shadow rdma-core)"
else
	ok "every library is under $PFX/lib/softverbs"
fi
# Every softverbs library the build made (librdmacm.so.1 once it exists) is
# packaged: the build marker tells ours from other files in build/lib.
for f in "$BUILD"/lib/lib*.so.[0-9]*; do
	[ -L "$f" ] && [[ $(basename "$f") =~ ^lib.*\.so\.[0-9]+$ ]] || continue
	grep -q "softverbs-build " "$f" || continue
	grep -qx -- "$PFX/lib/softverbs/$(basename "$f")" "$TMP/list" &&
		ok "built $(basename "$f") is packaged" ||
		fail "the build made $(basename "$f") but the package lacks it"
done

# --- install -----------------------------------------------------------------
touch "$MARK"
installed=1
if dpkg_retry -i "$deb"; then
	ok "dpkg -i"
else
	fail "dpkg -i failed"
	exit 1
fi
[ "$(pkg_status)" = installed ] && ok "dpkg says installed" || fail "status $(pkg_status)"

# From the installed paths only, in a directory of no importance.
cd "$TMP" || exit 1
export PATH=$PFX/bin:$PATH TMPDIR=$TMP
SV=$PFX/bin/softverbs
[ "$(command -v softverbs)" = "$SV" ] && ok "softverbs is $SV on PATH" ||
	fail "softverbs on PATH is $(command -v softverbs)"
LD_DEBUG=libs softverbs run ibv_devinfo >"$TMP/out" 2>&1
rc=$?
[ $rc = 0 ] && ok "softverbs run ibv_devinfo" || fail "softverbs run ibv_devinfo: exit $rc: $(tail -5 "$TMP/out")"
grep -Eq "hca_id:[[:space:]]+sv0" "$TMP/out" && ok "ibv_devinfo shows sv0" || fail "no sv0 in ibv_devinfo"
grep -q "calling init: $PFX/lib/softverbs/libibverbs.so.1$" "$TMP/out" &&
	ok "it ran on $PFX/lib/softverbs/libibverbs.so.1" ||
	fail "libraries: $(grep -o 'calling init: .*libibverbs.*' "$TMP/out")"
pid=$(softverbs daemon status --json 2>/dev/null | grep -Eo '"pid": [0-9]+' | grep -Eo '[0-9]+')
[ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe")" = "$DAEMON" ] &&
	ok "the installed daemon runs (pid $pid)" || fail "daemon '$pid' is not $DAEMON"
[ -n "$pid" ] && pids+=("$pid")

# Programs not started with softverbs run keep rdma-core's library.
LD_DEBUG=libs ibv_devinfo >"$TMP/out" 2>&1
if grep -q "calling init: .*/softverbs/libibverbs" "$TMP/out"; then
	fail "a plain ibv_devinfo loaded the softverbs library"
else
	ok "a plain ibv_devinfo still gets rdma-core's library"
fi
ldconfig -p | grep -q "/softverbs/" && fail "ldconfig's cache names the private folder" ||
	ok "the private folder is not in ldconfig's cache"

softverbs --version >"$TMP/out" 2>&1
want=$("$BUILD/bin/softverbs" --version | head -1)
[ "$(head -1 "$TMP/out")" = "$want" ] && ok "--version: $want" ||
	fail "--version: $(head -1 "$TMP/out"), the build says $want"
grep -q "^library *$PFX/lib/softverbs/libibverbs.so.1, build " "$TMP/out" &&
	ok "--version names the installed library" || fail "--version: $(cat "$TMP/out")"

# An ibv_rc_pingpong pair through the installed command.
. "$HERE/pairs_lib.sh"
if pairs_run "$TMP/pair" 60 ibv_rc_pingpong -g 0; then
	ok "ibv_rc_pingpong pair"
	grep -q "8192000 bytes in" "$TMP/pair/client.out" && grep -q "8192000 bytes in" "$TMP/pair/server.out" &&
		ok "both sides moved 8192000 bytes" || fail "pingpong output: $(cat "$TMP/pair/"*.out)"
else
	fail "ibv_rc_pingpong pair: server $PAIR_SRV_RC, client $PAIR_CLI_RC"
	sed 's/^/    /' "$TMP/pair/server.out" "$TMP/pair/client.out"
fi

if grep -qs "^path-exclude.*/usr/share/man" /etc/dpkg/dpkg.cfg.d/*; then
	# Minimal images tell dpkg to drop every man page.
	echo "   (dpkg excludes /usr/share/man here: man pages not checked)"
else
	w=$(man -w softverbs 2>&1)
	[ "$w" = "$PFX/share/man/man1/softverbs.1.gz" ] && ok "man softverbs: $w" || fail "man -w softverbs: $w"
	man 8 softverbsd 2>/dev/null | grep -q "softverbsd - the softverbs device daemon" &&
		ok "man 8 softverbsd" || fail "man 8 softverbsd"
fi
flags=$(pkg-config --cflags --libs softverbs 2>&1)
# shellcheck disable=SC2086
if cc -o "$TMP/prog" "$HERE/pc_prog.c" $flags >"$TMP/out" 2>&1 && "$TMP/prog" >"$TMP/out" 2>&1 &&
	grep -qx "lib $PFX/lib/softverbs/libibverbs.so.1" "$TMP/out" && grep -qx "device sv0" "$TMP/out"; then
	ok "a program built with pkg-config --libs softverbs ($flags) runs on sv0"
else
	fail "pkg-config program ($flags): $(cat "$TMP/out")"
fi
if [ -f /usr/share/bash-completion/bash_completion ]; then
	out=$(bash -c '. /usr/share/bash-completion/bash_completion
		__load_completion softverbs && COMP_WORDS=(softverbs daemon st) COMP_CWORD=2 &&
		_softverbs && echo "${COMPREPLY[*]}"' 2>/dev/null)
	[ "$(tr ' ' '\n' <<<"$out" | sort | tr '\n' ' ')" = "start status stop " ] &&
		ok "installed completion: softverbs daemon st -> $out" || fail "completion: '$out'"
fi

# A second user's daemon: the prerm must stop every user's.
NSOCK=svtest.pkg.nobody.$$
setpriv --reuid=65534 --regid=65534 --clear-groups -- env TMPDIR="$NTMP" \
	SOFTVERBS_SOCKET=$NSOCK SOFTVERBS_IDLE_TIMEOUT=0 "$SV" daemon start >"$TMP/out" 2>&1 &&
	npid=$(grep -Eo 'pid [0-9]+' "$TMP/out" | cut -d' ' -f2)
if [ -n "${npid:-}" ] && [ "$(stat -c %u "/proc/$npid")" = 65534 ]; then
	ok "a daemon of uid 65534 runs too (pid $npid)"
	pids+=("$npid")
else
	fail "no daemon for uid 65534: $(cat "$TMP/out")"
fi
running=$(installed_daemons | wc -l)
[ "$running" -ge 2 ] && ok "$running installed daemons run before removal" ||
	fail "$running installed daemons before removal"

# --- remove ------------------------------------------------------------------
cd / || exit 1
t0=$(date +%s%N)
if dpkg_retry -r "$PKG"; then
	ok "dpkg -r ($((($(date +%s%N) - t0) / 1000000)) ms)"
else
	fail "dpkg -r failed"
fi
left=$(installed_daemons)
[ -z "$left" ] && ok "no daemon left running" || fail "daemons left: $left"
# A stopped daemon is reparented to PID 1, which may reap it a while
# later: until then it is a zombie, which kill -0 still finds.  Dead or
# a zombie is stopped.
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
for p in "${pids[@]}"; do
	alive "$p" && fail "daemon $p still runs: $(cat "/proc/$p/stat" 2>/dev/null)"
done
# Shared folders (/usr/bin ...) stay; nothing of ours does.
bad=0
while read -r f; do
	[ -e "$f" ] || [ -L "$f" ] || continue
	if [ ! -d "$f" ] || [[ $f == *softverbs* ]]; then
		fail "left behind: $f"
		bad=1
	fi
done <"$TMP/list"
[ $bad = 0 ] && ok "no file or folder of the package is left"
dpkg_retry --purge "$PKG" >/dev/null || fail "dpkg --purge"
st=$(pkg_status)
[ -z "$st" ] || [ "$st" = not-installed ] && ok "purged: dpkg knows it no more" ||
	fail "after purge: status '$st'"
installed=
rm -f "$MARK"

echo "$fails failed"
[ $fails = 0 ]
