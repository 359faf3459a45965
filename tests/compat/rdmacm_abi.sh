#!/bin/bash
# SPDX-License-Identifier: MIT
# Our librdmacm.so.1 is a drop-in for rdma-core v44's: the dynamic symbol
# table equals Debian's (same names, types, bindings and versions, nothing
# else exported), same version nodes and parents, same SONAME; it needs
# libibverbs.so.1 (ours, through the library path) and nothing of
# rdma-core's; and Debian's rdma_cm programs load it under `softverbs run`.
# Env (set by CMake): SV_BUILD_DIR, SOFTVERBS.
set -u
: "${SV_BUILD_DIR:?SV_BUILD_DIR must point at the build directory}"
OURS="$SV_BUILD_DIR/lib/librdmacm.so.1"
SV=${SOFTVERBS:-$SV_BUILD_DIR/bin/softverbs}
export SOFTVERBS_SOCKET="svtest.rdmacm_abi.$$"
REF=
for d in "/usr/lib/$(uname -m)-linux-gnu" /usr/lib64 /usr/lib; do
	[ -e "$d/librdmacm.so.1" ] && REF="$d/librdmacm.so.1" && break
done
TMP=$(mktemp -d)
trap '"$SV" daemon stop >/dev/null 2>&1; rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

[ -n "$REF" ] || { echo "FAIL: Debian's librdmacm.so.1 not found (librdmacm1)"; exit 1; }
[ -e "$OURS" ] || { echo "FAIL: $OURS not built"; exit 1; }
symtab() {
	readelf -W --dyn-syms "$1" |
		awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && NF >= 8 { print $4, $5, $8 }' | sort -k3
}
verdefs() {
	readelf -W -V "$1" | sed -n '/^Version definition/,/^Version needs/p' |
		sed -n 's/.*\(Name\|Parent [0-9]*\): \(.*\)/\1 \2/p' | sed 1d
}
symtab "$REF" >"$TMP/ref"
symtab "$OURS" >"$TMP/ours"
n=$(grep -c '@' "$TMP/ref")
[ "$n" = 68 ] || fail "reference has $n versioned functions, want 68 (72 entries with the 4 version nodes)"
diff -u "$TMP/ref" "$TMP/ours" >"$TMP/diff" ||
	{ fail "exported symbols differ (- rdma-core, + ours):"; grep '^[-+][^-+]' "$TMP/diff"; }
grep -E ' (sv_|svd_|cma_|rs_)' "$TMP/ours" && fail "internal symbols leak"
verdefs "$REF" >"$TMP/rv"
verdefs "$OURS" >"$TMP/ov"
diff -u "$TMP/rv" "$TMP/ov" || fail "version nodes or parents differ"
soname=$(readelf -d "$OURS" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = librdmacm.so.1 ] || fail "SONAME is '$soname'"
needed=$(readelf -d "$OURS" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
case " $needed" in
*" libibverbs.so.1 "*) ;;
*) fail "does not need libibverbs.so.1 (needs: $needed)" ;;
esac
# Debian's rping, run as a user would: the loader must pick ours.
out=$("$SV" run sh -c 'LD_DEBUG=libs rping -h 2>&1 | grep -m1 "calling init: .*librdmacm"')
case $out in
*"$SV_BUILD_DIR/lib/librdmacm.so.1"* | *"/lib/softverbs/librdmacm.so.1"*) ;;
*) fail "softverbs run does not load our librdmacm.so.1: $out" ;;
esac
echo "symbols: $(wc -l <"$TMP/ours") checked"
[ $fails = 0 ] && echo "rdmacm_abi: all checks passed"
[ $fails = 0 ]
