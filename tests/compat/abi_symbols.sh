#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Our libibverbs.so.1 is a drop-in for rdma-core v44's.  This checks it the
# way the dynamic linker and real consumers see it:
#   1. the dynamic symbol table equals Debian's libibverbs.so.1: same
#      (type, binding, name@version / name@@version) set, nothing else
#      exported (no sv_* leak), same version nodes and parents, same SONAME;
#   2. the pure helpers (strings, rates, kernel marshalling, sysfs) answer
#      byte for byte what rdma-core answers (abi_dump run on both);
#   3. Debian's libmlx5/libefa/librdmacm load on ours, bind to ours, and
#      refuse our device; compat and provider stubs fail cleanly (abi_load);
#   4. every pyverbs module imports on ours and sees our device;
#   5. ibverbs-utils' ibv_devices and ibv_devinfo -v show our device.
# Env (set by CMake): SV_BUILD_DIR, SOFTVERBS, SOFTVERBSD.
set -u

: "${SV_BUILD_DIR:?SV_BUILD_DIR must point at the build directory}"
OURS="$SV_BUILD_DIR/lib/libibverbs.so.1"
BIN="$SV_BUILD_DIR/bin"
HERE="$(cd "$(dirname "$0")" && pwd)"
PY=/usr/bin/python3 # Debian's: pyverbs belongs to it

REF=
for d in "/usr/lib/$(uname -m)-linux-gnu" /usr/lib64 /usr/lib; do
	if [ -e "$d/libibverbs.so.1" ]; then
		REF="$d/libibverbs.so.1"
		break
	fi
done

# Our own daemon, so concurrent tests are not disturbed.
export SOFTVERBS_SOCKET="svtest.abi.$$"
export SOFTVERBS_IDLE_TIMEOUT="${SOFTVERBS_IDLE_TIMEOUT:-5}"
export SOFTVERBSD="${SOFTVERBSD:-$BIN/softverbsd}"
SOFTVERBS="${SOFTVERBS:-$BIN/softverbs}"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/sv-abi.XXXXXX")"
fails=0

cleanup() {
	# Our daemon only (SOFTVERBS_SOCKET); if the CLI cannot, the idle
	# timeout ends it.
	if [ -x "$SOFTVERBS" ]; then
		"$SOFTVERBS" daemon stop >/dev/null 2>&1 || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# Runs a program on our library: through `softverbs run` once the CLI can,
# else with LD_LIBRARY_PATH.  Either way abi_load/abi_pyverbs verify which
# libibverbs.so.1 actually got mapped.
have_run=0
if [ -x "$SOFTVERBS" ] && "$SOFTVERBS" run true >/dev/null 2>&1; then
	have_run=1
fi
on_ours() {
	if [ "$have_run" = 1 ]; then
		"$SOFTVERBS" run "$@"
	else
		LD_LIBRARY_PATH="$SV_BUILD_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
	fi
}
on_ref() {
	env -u LD_LIBRARY_PATH -u LD_PRELOAD "$@"
}

[ -n "$REF" ] || { echo "FAIL: Debian's libibverbs.so.1 not found"; exit 1; }
[ -e "$OURS" ] || { echo "FAIL: $OURS not built"; exit 1; }
echo "reference: $REF"
echo "ours:      $OURS (softverbs run: $([ $have_run = 1 ] && echo yes || echo no))"

# --- 1. symbol table -------------------------------------------------------

# Defined dynamic symbols as "TYPE BIND SIZE name@ver" (@@ = default
# version, @ = hidden compat version); SIZE only for data objects.
symtab() {
	readelf -W --dyn-syms "$1" |
		awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && NF >= 8 {
			print $4, $5, ($4 == "OBJECT" ? $3 : "-"), $8 }' |
		sort -k4
}
verdefs() {
	readelf -W -V "$1" | sed -n '/^Version definition/,/^Version needs/p' |
		sed -n 's/.*\(Name\|Parent [0-9]*\): \(.*\)/\1 \2/p'
}

symtab "$REF" >"$TMP/ref.syms"
symtab "$OURS" >"$TMP/ours.syms"
if [ "$(wc -l <"$TMP/ref.syms")" -lt 150 ]; then
	fail "reference symbol table looks wrong ($(wc -l <"$TMP/ref.syms") symbols)"
fi
if ! diff -u "$TMP/ref.syms" "$TMP/ours.syms" >"$TMP/syms.diff"; then
	fail "exported symbols differ from rdma-core (- rdma-core, + ours):"
	grep '^[-+][^-+]' "$TMP/syms.diff"
fi
if grep -E ' (sv_|svd_)' "$TMP/ours.syms"; then
	fail "internal symbols leak from our library"
fi
hidden=$(grep -c ' [A-Za-z_0-9]*@IBVERBS_1\.0$' "$TMP/ours.syms")
[ "$hidden" = 33 ] || fail "$hidden hidden @IBVERBS_1.0 symbols, want 33"

verdefs "$REF" | sed 1d >"$TMP/ref.verdefs"   # line 1: the file's own name
verdefs "$OURS" | sed 1d >"$TMP/ours.verdefs"
if ! diff -u "$TMP/ref.verdefs" "$TMP/ours.verdefs"; then
	fail "version nodes or their parents differ"
fi

soname=$(readelf -d "$OURS" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libibverbs.so.1 ] || fail "SONAME is '$soname'"
echo "symbols: $(wc -l <"$TMP/ours.syms") checked"

# --- 2. pure helpers answer like rdma-core ---------------------------------

if on_ref "$BIN/abi_dump" >"$TMP/ref.dump" 2>&1 &&
	on_ours "$BIN/abi_dump" >"$TMP/ours.dump" 2>&1; then
	if ! diff -u "$TMP/ref.dump" "$TMP/ours.dump" >"$TMP/dump.diff"; then
		fail "helpers answer differently from rdma-core:"
		head -60 "$TMP/dump.diff"
	fi
else
	fail "abi_dump crashed or failed"
	tail -n 5 "$TMP/ref.dump" "$TMP/ours.dump"
fi
# SYSFS_PATH is honoured (trailing slashes dropped) by both.
r=$(SYSFS_PATH=/tmp/sv-sysfs// on_ref "$BIN/abi_dump" | grep '^sysfs_path')
o=$(SYSFS_PATH=/tmp/sv-sysfs// on_ours "$BIN/abi_dump" | grep '^sysfs_path')
[ "$r" = "$o" ] || fail "SYSFS_PATH: rdma-core '$r', ours '$o'"

# --- 3. providers and stubs on our library ---------------------------------

on_ours "$BIN/abi_load" || fail "abi_load (see above)"

# --- 4. pyverbs ------------------------------------------------------------

if [ -x "$PY" ] && "$PY" -c 'import pyverbs' 2>/dev/null; then
	on_ours "$PY" "$HERE/abi_pyverbs.py" || fail "pyverbs (see above)"
else
	fail "Debian's python3-pyverbs is not installed"
fi

# --- 5. ibverbs-utils ------------------------------------------------------

fails_before=$fails
if command -v ibv_devinfo >/dev/null && command -v ibv_devices >/dev/null; then
	if on_ours ibv_devices >"$TMP/devices" 2>&1; then
		grep -Eq '^[[:space:]]+sv0[[:space:]]+[0-9a-f]{16}$' "$TMP/devices" ||
			{ fail "ibv_devices does not list sv0:"; cat "$TMP/devices"; }
	else
		fail "ibv_devices exited with $?"; cat "$TMP/devices"
	fi
	if on_ours ibv_devinfo -v >"$TMP/devinfo" 2>&1; then
		for want in 'hca_id:[[:space:]]+sv0$' \
			'state:[[:space:]]+PORT_ACTIVE \(4\)$' \
			'link_layer:[[:space:]]+Ethernet$' \
			'phys_port_cnt:[[:space:]]+1$' \
			'GID\[ *0\]:'; do
			grep -Eq "$want" "$TMP/devinfo" ||
				fail "ibv_devinfo -v lacks /$want/"
		done
		# Garbage: anything but printable ASCII, tabs and newlines, or
		# unset strings printed as (null).
		if LC_ALL=C grep -n '[^[:print:][:space:]]\|(null)' "$TMP/devinfo"; then
			fail "ibv_devinfo -v prints garbage (lines above)"
		fi
	else
		fail "ibv_devinfo -v exited with $?:"; tail -20 "$TMP/devinfo"
	fi
	[ "$fails" = "$fails_before" ] || { echo "--- ibv_devinfo -v:"; cat "$TMP/devinfo"; }
else
	fail "ibverbs-utils (ibv_devinfo, ibv_devices) not installed"
fi

if [ "$fails" != 0 ]; then
	echo "abi_symbols: $fails failure(s)"
	exit 1
fi
echo "abi_symbols: all checks passed"
