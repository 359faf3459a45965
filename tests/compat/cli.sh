#!/bin/bash
# SPDX-License-Identifier: MIT
# The softverbs command, end to end: run (library path, exit status, 127),
# devices, daemon start/stop/status, res show, fault add/list/clear, --help
# of every subcommand, with Debian's unmodified ibv_devinfo, ibv_asyncwatch
# and ibv_rc_pingpong (a forced completion status, docs/faults.md).
set -u

SV=${SOFTVERBS:-${SV_BUILD_DIR:-$(dirname "$0")/../../build}/bin/softverbs}
PY=/usr/bin/python3 # Debian's, with pyverbs
export SOFTVERBS_SOCKET=svtest.cli.$$
export SOFTVERBS_IDLE_TIMEOUT=60
TMP=$(mktemp -d)
fails=0
holder=

cleanup() {
	[ -n "$holder" ] && kill "$holder" 2>/dev/null
	"$SV" daemon stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok $*"; }

# expect_rc RC DESCRIPTION CMD...: runs CMD (stdout+stderr in $TMP/out).
expect_rc() {
	local want=$1 what=$2 rc
	shift 2
	"$@" >"$TMP/out" 2>&1
	rc=$?
	if [ "$rc" != "$want" ]; then
		fail "$what: exit $rc, expected $want; output:"
		sed 's/^/    /' "$TMP/out"
		return 1
	fi
	ok "$what"
}

# expect_out PATTERN DESCRIPTION: grep -E on the last output.
expect_out() {
	if ! grep -Eq -- "$1" "$TMP/out"; then
		fail "$2: no '$1' in:"
		sed 's/^/    /' "$TMP/out"
		return 1
	fi
	ok "$2"
}

# Retries a command that fails only because another part of the library
# is still being written ("undefined symbol"): up to ~3 minutes.
retry_undefined() {
	local i
	for i in $(seq 1 36); do
		"$@" >"$TMP/out" 2>&1 && return 0
		grep -q "undefined symbol" "$TMP/out" || return 1
		echo "   (undefined symbol, retrying: $(grep -o 'undefined symbol: [^ ]*' "$TMP/out" | head -1))"
		sleep 5
	done
	return 1
}

daemon_pid() {
	"$SV" daemon status --json 2>/dev/null |
		$PY -c 'import json,sys; print(json.load(sys.stdin)["pid"])'
}

# --- usage -------------------------------------------------------------
expect_rc 2 "no arguments is a usage error" "$SV"
expect_rc 2 "unknown command is a usage error" "$SV" frobnicate
expect_out "^softverbs: unknown command 'frobnicate'" "one-line usage error"
expect_rc 0 "--help" "$SV" --help
expect_out "usage: softverbs" "--help prints usage"
for sub in run devices "daemon" res version fault; do
	expect_rc 0 "$sub --help" "$SV" $sub --help
	expect_out "usage: softverbs $sub" "$sub --help prints its usage"
done
expect_rc 0 "daemon status --help" "$SV" daemon status --help
expect_rc 0 "res show --help" "$SV" res show --help
expect_rc 2 "run without a command" "$SV" run
expect_rc 2 "daemon without a subcommand" "$SV" daemon
expect_rc 2 "daemon with a bad subcommand" "$SV" daemon reboot
expect_rc 2 "res show with a bad type" "$SV" res show widgets
expect_rc 2 "devices with an extra argument" "$SV" devices extra
expect_rc 2 "fault without a subcommand" "$SV" fault
expect_rc 2 "fault add with an unknown key" "$SV" fault add 'qp=3,bogus=1'
expect_out "unknown key 'bogus'" "the bad plan's key is named"
expect_rc 2 "fault add of two actions" "$SV" fault add 'qp=3,drop,dup'
expect_rc 2 "fault add naming no QP and no process" "$SV" fault add 'drop=0.5'
expect_rc 2 "fault clear of nothing named" "$SV" fault clear
expect_rc 0 "version" "$SV" version
expect_out "^softverbs [0-9]+\.[0-9]+" "version prints the version"

# --- daemon, none running yet --------------------------------------------
expect_rc 1 "status with no daemon exits 1" "$SV" daemon status
expect_out "^softverbs: daemon not running" "status says not running"
expect_rc 0 "stop with no daemon is fine" "$SV" daemon stop
expect_out "not running" "stop says not running"

expect_rc 0 "daemon start" "$SV" daemon start
expect_out "started, pid [0-9]+" "start prints the pid"
pid=$(grep -Eo 'pid [0-9]+' "$TMP/out" | cut -d' ' -f2)
if kill -0 "$pid" 2>/dev/null; then ok "the printed pid runs"; else fail "pid $pid not running"; fi
expect_rc 0 "second start" "$SV" daemon start
expect_out "already running, pid $pid" "second start finds the same daemon"
expect_rc 0 "daemon status" "$SV" daemon status
expect_out "pid: +$pid" "status shows the pid"
for f in uptime clients ufiles contexts objects fds requests; do
	expect_out "^  $f: " "status shows $f"
done
expect_rc 0 "daemon status --json" "$SV" daemon status --json
if $PY -m json.tool <"$TMP/out" >/dev/null; then ok "status --json parses"; else fail "status --json is not JSON"; fi
[ "$(daemon_pid)" = "$pid" ] && ok "status --json pid" || fail "status --json pid"

# --- run -----------------------------------------------------------------
expect_rc 0 "run true" "$SV" run true
expect_rc 1 "run false passes exit 1 through" "$SV" run false
expect_rc 42 "run passes any exit status through" "$SV" run sh -c 'exit 42'
expect_rc 127 "run of a missing command" "$SV" run nonexistent-cmd-$$
expect_out "^softverbs: nonexistent-cmd-$$: command not found" "command not found message"
expect_rc 0 "run sets LD_LIBRARY_PATH and SOFTVERBSD" "$SV" run sh -c \
	'echo "LD=$LD_LIBRARY_PATH"; echo "D=$SOFTVERBSD"'
libdir=$(cd "$(dirname "$SV")/../lib" && pwd -P)
expect_out "^LD=$libdir(:|$)" "our lib dir comes first"
expect_out "^D=/.*/softverbsd$" "SOFTVERBSD points at a daemon"
LD_LIBRARY_PATH=/nonexistent expect_rc 0 "run keeps the old LD_LIBRARY_PATH" "$SV" run sh -c 'echo "LD=$LD_LIBRARY_PATH"'
expect_out "^LD=$libdir:/nonexistent$" "old path kept after ours"
SOFTVERBS_LIBDIR=/nonexistent expect_rc 1 "bad SOFTVERBS_LIBDIR" "$SV" run true
expect_out "^softverbs: SOFTVERBS_LIBDIR=/nonexistent" "bad SOFTVERBS_LIBDIR message"
# 'run' starts the daemon itself.
"$SV" daemon stop >/dev/null 2>&1
expect_rc 0 "run starts the daemon" "$SV" run sh -c "$SV daemon status"
expect_out "softverbsd running" "daemon up inside run"

# --- unmodified ibverbs-utils ----------------------------------------------
if retry_undefined "$SV" run ibv_devinfo -v; then
	ok "ibv_devinfo -v"
	expect_out "hca_id:[[:space:]]+sv0" "ibv_devinfo shows sv0"
	expect_out "state:[[:space:]]+PORT_ACTIVE" "ibv_devinfo shows PORT_ACTIVE"
	expect_out "link_layer:[[:space:]]+Ethernet" "ibv_devinfo shows Ethernet"
	expect_out "::ffff:127\.0\.0\.1" "ibv_devinfo shows the 127.0.0.1 GID"
else
	fail "softverbs run ibv_devinfo -v:"
	sed 's/^/    /' "$TMP/out"
fi
expect_rc 0 "ibv_devices" "$SV" run ibv_devices
expect_out "^ +sv0[[:space:]]+[0-9a-f]{16}$" "ibv_devices lists sv0"
guid=$(grep -Eo '[0-9a-f]{16}$' "$TMP/out" | head -1)

expect_rc 0 "devices" "$SV" devices
expect_out "^ +sv0[[:space:]]+$guid$" "devices lists sv0 with ibv_devices' GUID"
expect_out "port 1: PORT_ACTIVE, Ethernet" "devices shows the port"
expect_out "GID\[ *[0-9]+\]: ::ffff:127\.0\.0\.1 +RoCE v2" "devices shows the 127.0.0.1 GID"
expect_rc 0 "devices --json" "$SV" devices --json
cp "$TMP/out" "$TMP/dev.json"
if $PY -m json.tool <"$TMP/dev.json" >/dev/null; then ok "devices --json parses"; else fail "devices --json is not JSON"; cat "$TMP/dev.json"; fi
if $PY - "$TMP/dev.json" "$guid" <<'EOF'; then ok "devices --json: sv0, its GUID, the port, the 127.0.0.1 GID"; else fail "devices --json content"; cat "$TMP/dev.json"; fi
import json, sys
devs = json.load(open(sys.argv[1]))
assert [d["name"] for d in devs] == ["sv0"], devs
d = devs[0]
assert d["node_guid"] == sys.argv[2], d
p = d["ports"][0]
assert p["port"] == 1 and p["state"] == "PORT_ACTIVE", p
assert p["link_layer"] == "Ethernet" and p["active_mtu"] >= 256, p
g = [g for g in p["gids"] if g["gid"] == "::ffff:127.0.0.1"]
assert g and g[0]["type"] == "RoCE v2", p["gids"]
assert isinstance(g[0]["index"], int), g
EOF

# --- res show ---------------------------------------------------------------
expect_rc 0 "res show --json, nothing open" "$SV" res show --json
if $PY -m json.tool <"$TMP/out" >/dev/null; then ok "res show --json parses"; else fail "res show --json is not JSON"; fi

# A program holding a context (and a PD and MR once they exist): pyverbs.
mkfifo "$TMP/ready"
cat >"$TMP/hold.py" <<'EOF'
import sys
import pyverbs.device as d
ctx = d.Context(name="sv0")
keep = [ctx]
try:
    from pyverbs.pd import PD
    from pyverbs.mr import MR
    import pyverbs.enums as e
    pd = PD(ctx)
    keep.append(pd)
    mr = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ)
    keep.append(mr)
    print("pd %d %d %d" % (pd.handle, mr.lkey, mr.rkey), flush=True)
except Exception as ex:
    print("ctx-only %s" % ex, flush=True)
sys.stdin.read()
EOF
"$SV" run $PY "$TMP/hold.py" <"$TMP/ready" >"$TMP/hold.out" 2>&1 &
holder=$!
# hold.py keeps its objects until its stdin (the fifo) reaches EOF.
exec 7>"$TMP/ready"
for i in $(seq 1 100); do grep -q . "$TMP/hold.out" 2>/dev/null && break; sleep 0.1; done
expect_rc 0 "res show with a program holding a device" "$SV" res show
expect_out "^dev sv0 ufile 0x[0-9a-f]+ ufile .*pid $holder comm python3" "res show has the program's ufile row"
expect_rc 0 "res show ufile --json" "$SV" res show ufile --json
cp "$TMP/out" "$TMP/res.json"
if $PY - "$TMP/res.json" "$holder" <<'EOF'; then ok "res show ufile --json has the program's ufile"; else fail "res show ufile --json"; cat "$TMP/res.json"; fi
import json, sys
rows = json.load(open(sys.argv[1]))
assert rows, "no rows"
assert all(r["type"] == "ufile" for r in rows), rows
assert any(r["pid"] == int(sys.argv[2]) for r in rows), rows
EOF
if grep -q "^pd " "$TMP/hold.out"; then
	read -r _ pdh lkey rkey <"$TMP/hold.out"
	expect_rc 0 "res show mr --json" "$SV" res show mr --json
	cp "$TMP/out" "$TMP/res.json"
	if $PY - "$TMP/res.json" "$pdh" "$lkey" "$rkey" <<'EOF'; then ok "res show mr: keys, pd, access, length"; else fail "res show mr --json"; cat "$TMP/res.json"; fi
import json, sys
rows = json.load(open(sys.argv[1]))
pd, lkey, rkey = map(int, sys.argv[2:5])
assert [r for r in rows if r["type"] != "mr"] == [], rows
m = [r for r in rows if r["lkey"] == lkey]
assert len(m) == 1, rows
m = m[0]
assert m["rkey"] == rkey and m["pd"] == pd and m["length"] == 8192, m
assert m["access"] & 1 and m["access"] & 4, m
EOF
	expect_rc 0 "res show pd" "$SV" res show pd
	expect_out "^dev sv0 ufile 0x[0-9a-f]+ pd handle $pdh .*pid $holder" "res show pd has the PD"
else
	echo "   (no PD/MR yet: $(cat "$TMP/hold.out"))"
fi
expect_rc 0 "status with a program holding a device" "$SV" daemon status --json
if $PY -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["ufiles"] >= 1 and s["contexts"] >= 1 and s["clients"] >= 1, s' "$TMP/out"; then
	ok "status counts the program's ufile, context and channel"
else
	fail "status counters: $(cat "$TMP/out")"
fi

# Stopping the daemon under a program: it sees the device die, not a hang.
expect_rc 0 "daemon stop with a client" "$SV" daemon stop
expect_out "stopped \(pid [0-9]+\)" "stop reports the pid"
exec 7>&-
wait "$holder"
holder=
expect_rc 1 "status after stop" "$SV" daemon status

# ibv_asyncwatch sees IBV_EVENT_DEVICE_FATAL when the daemon stops.
"$SV" run ibv_asyncwatch -d sv0 >"$TMP/aw.out" 2>&1 &
aw=$!
for i in $(seq 1 100); do "$SV" daemon status --json 2>/dev/null | grep -q '"ufiles": 1' && break; sleep 0.1; done
"$SV" daemon stop >/dev/null
for i in $(seq 1 100); do kill -0 $aw 2>/dev/null || break; sleep 0.1; done
if kill -0 $aw 2>/dev/null; then
	kill $aw
	fail "ibv_asyncwatch still runs after daemon stop"
else
	cp "$TMP/aw.out" "$TMP/out"
	expect_out "DEVICE_FATAL|device fatal|event_type 1[^0-9]" "ibv_asyncwatch reports the device's death"
fi
wait $aw 2>/dev/null

# --- fault plans (docs/faults.md) -------------------------------------------
# ibv_rc_pingpong reacting to a forced completion status: its 4th send
# completion fails with RETRY_EXC_ERR (after=3), its QP goes to ERR, it
# prints the status and exits 1; the client, whose peer went silent, fails
# the same way, as with a real NIC.
PORT=$((20000 + $$ % 20000))
pp_pair() { # pp_pair PORT: client against a server already started
	"$SV" run ibv_rc_pingpong -g 0 -p "$1" -n 50 127.0.0.1 >"$TMP/ppc.out" 2>&1
	echo $? >"$TMP/ppc.rc"
}
# From the environment: the server's first QP (qp=#1).
SOFTVERBS_FAULT='qp=#1,status=RETRY_EXC_ERR,after=3' \
	"$SV" run ibv_rc_pingpong -g 0 -p $PORT -n 50 >"$TMP/pps.out" 2>&1 &
srv=$!
for i in $(seq 1 100); do "$SV" res show qp 2>/dev/null | grep -q ibv_rc_pingpong && break; sleep 0.1; done
pp_pair $PORT
wait $srv
rc=$?
cp "$TMP/pps.out" "$TMP/out"
if [ $rc = 1 ]; then ok "SOFTVERBS_FAULT: the pingpong server fails (exit 1)"; else fail "server exit $rc"; fi
expect_out "Failed status transport retry counter exceeded \(12\)" "it reports RETRY_EXC_ERR"
expect_out "^softverbs-fault: pid [0-9]+ plan 'qp=#1,status=RETRY_EXC_ERR,after=3' seed 0: QP 0x[0-9a-f]+ send completion 4: RETRY_EXC_ERR" "the firing is logged on stderr"
cp "$TMP/ppc.out" "$TMP/out"
[ "$(cat "$TMP/ppc.rc")" = 1 ] && ok "the client fails too" || fail "client exit $(cat "$TMP/ppc.rc")"
expect_out "Failed status transport retry counter exceeded" "the client sees its peer go silent"

# At run time: `softverbs fault add --pid` on a server waiting for its client.
PORT=$((PORT + 1))
"$SV" run ibv_rc_pingpong -g 0 -p $PORT -n 50 >"$TMP/pps.out" 2>&1 &
srv=$!
pid=
for i in $(seq 1 100); do
	pid=$("$SV" res show qp 2>/dev/null | grep ibv_rc_pingpong | grep -o 'pid [0-9]*' | head -1 | cut -d' ' -f2)
	[ -n "$pid" ] && break
	sleep 0.1
done
expect_rc 0 "fault add --pid" "$SV" fault add --pid "$pid" 'qp=#1,status=REM_ACCESS_ERR,after=2'
expect_out "^plan ([0-9]+): pid $pid \(ibv_rc_pingpong\): qp=#1,status=REM_ACCESS_ERR,after=2" "add names the plan and its process"
plan=$(sed -n 's/^plan \([0-9]*\):.*/\1/p' "$TMP/out")
expect_rc 0 "fault list" "$SV" fault list
expect_out "^$plan +$pid +ibv_rc_pingpong +qp=#1,status=REM_ACCESS_ERR,after=2" "list shows it"
expect_rc 1 "fault add on a QP nobody holds" "$SV" fault add 'qp=16777215,drop'
expect_rc 1 "fault clear of an unknown plan" "$SV" fault clear 999999
pp_pair $PORT
wait $srv
rc=$?
cp "$TMP/pps.out" "$TMP/out"
if [ $rc = 1 ]; then ok "fault add: the pingpong server fails (exit 1)"; else fail "server exit $rc"; fi
expect_out "Failed status remote access error \(10\)" "it reports REM_ACCESS_ERR"
expect_out "^softverbs-fault: pid $pid plan $plan 'qp=#1,status=REM_ACCESS_ERR,after=2' seed 0: QP 0x[0-9a-f]+ send completion 3" "the firing is logged with the plan's number"
expect_rc 0 "fault list after the process is gone" "$SV" fault list
if grep -q ibv_rc_pingpong "$TMP/out"; then fail "the plan outlived its process"; else ok "its plan went with it"; fi
expect_rc 0 "fault clear --all" "$SV" fault clear --all

echo "$fails failed"
[ $fails = 0 ]
