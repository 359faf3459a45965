#!/bin/bash
# SPDX-License-Identifier: MIT
# RoCE v2 frames and `softverbs capture`, checked by decoders that are not
# ours (tests/compat/roce_check.py: Debian's tshark and python3-scapy's
# RoCE layer), with a fake engine (roce_gen) producing packets of every
# opcode the engine uses through a capture ring, as engines will:
#   - sv_roce.c's frames written directly decode right, ICRC = scapy's;
#   - the same packets through the daemon and `softverbs capture -w FILE`
#     come out byte for byte the same; the key table's capture count is 0
#     with no capture, one per capture running;
#   - `-w -` piped into tshark live; --qpn and --pid filters (a producer
#     claiming another's pid in its records is still itself); -c;
#   - SIGINT and SIGTERM leave a valid pcap of whole packets, and the
#     count printed is what the file holds; the daemon stopping ends it;
#   - a reader that stalls never stalls the producers or the daemon: the
#     daemon drops what does not fit and the command says how many;
#   - bad usage is refused.
set -u

B=${SV_BUILD_DIR:-$(dirname "$0")/../../build}
SV=${SOFTVERBS:-$B/bin/softverbs}
GEN=$B/bin/roce_gen
CHECK="/usr/bin/python3 $(dirname "$0")/roce_check.py"
export SOFTVERBS_SOCKET=svtest.capture.$$
export SOFTVERBS_IDLE_TIMEOUT=60
TMP=$(mktemp -d)
fails=0

for t in tshark /usr/bin/python3; do
	command -v "$t" >/dev/null || { echo "SKIP: $t missing (scripts/deps.sh installs it)"; exit 77; }
done
/usr/bin/python3 -c "import scapy.contrib.roce" 2>/dev/null ||
	{ echo "SKIP: python3-scapy missing (scripts/deps.sh installs it)"; exit 77; }

cleanup() {
	local p
	for p in $(jobs -p); do kill "$p" 2>/dev/null; done
	"$SV" daemon stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok $*"; }

# check WHAT PCAP MANIFEST [roce_check options]: queued; the decoders run
# once, at the end, over every pcap (their start-up is most of the cost).
jobs=()
check() {
	local what=$1
	shift
	[ ${#jobs[@]} -gt 0 ] && jobs+=(+)
	jobs+=("$@" --name "$what")
}

# waits (up to 20 s) until `roce_gen count` prints N
wait_count() {
	local i
	for i in $(seq 1 200); do
		[ "$("$GEN" count 2>/dev/null)" = "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

"$SV" daemon start >/dev/null || { echo "FAIL: daemon start"; exit 1; }

# ---- sv_roce.c's frames, written directly
"$GEN" pcap "$TMP/direct.pcap" "$TMP/direct.tsv" || fail "roce_gen pcap"
N=$(wc -l <"$TMP/direct.tsv")
check "direct frames" "$TMP/direct.pcap" "$TMP/direct.tsv"

# ---- through the daemon: the same bytes
[ "$("$GEN" count)" = 0 ] && ok "no capture: the key table says 0" ||
	fail "capture count $("$GEN" count) with no capture"
timeout 30 "$SV" capture -w "$TMP/cap.pcap" -c "$N" 2>"$TMP/cap.err" &
cap=$!
wait_count 1 && ok "a capture runs: the key table says 1" || fail "capture count not 1"
timeout 30 "$GEN" produce "$TMP/cap.tsv" >"$TMP/gen.out" || fail "producer: $(cat "$TMP/gen.out")"
wait $cap && ok "capture -c $N ends by itself" || fail "capture -c: exit $?"
grep -q "^softverbs: $N packets written to $TMP/cap.pcap, 0 dropped" "$TMP/cap.err" &&
	ok "capture reports $N packets, 0 dropped" || fail "capture said: $(cat "$TMP/cap.err")"
check "captured frames" "$TMP/cap.pcap" "$TMP/cap.tsv" --same-frames "$TMP/direct.pcap"
wait_count 0 && ok "capture over: the key table says 0" || fail "capture count not back to 0"

# ---- two at once, one live into tshark
timeout 30 "$SV" capture -w - -c "$N" 2>"$TMP/live.err" |
	tee "$TMP/live.pcap" | tshark -l -n -r - -T fields -e infiniband.bth.opcode \
		>"$TMP/live.txt" 2>/dev/null &
live=$!
timeout 30 "$SV" capture -w "$TMP/two.pcap" -c "$N" 2>/dev/null &
two=$!
wait_count 2 && ok "two captures: the key table says 2" || fail "capture count not 2"
timeout 30 "$GEN" produce "$TMP/live.tsv" >/dev/null || fail "producer (live)"
wait $live $two
[ "$(grep -c . "$TMP/live.txt")" = "$N" ] &&
	ok "capture -w - | tshark -r -: $N packets decoded live" ||
	fail "tshark read $(grep -c . "$TMP/live.txt") packets live, expected $N"
check "live stream" "$TMP/live.pcap" "$TMP/live.tsv" --same-frames "$TMP/direct.pcap"
check "second capture" "$TMP/two.pcap" "$TMP/live.tsv"

# ---- --qpn: by DestQP, and by the local QP that sent or received it
q1=$(awk -F'\t' 'NR==6 { print $3 }' "$TMP/direct.tsv")  # a DestQP
q2=$(awk -F'\t' 'NR==9 { print $10 }' "$TMP/direct.tsv") # a local QP
for q in "$q1" "$q2"; do
	timeout 30 "$SV" capture -w "$TMP/q$q.pcap" --qpn "$q" -c 3 2>/dev/null &
	cap=$!
	wait_count 1
	timeout 30 "$GEN" produce "$TMP/q$q.tsv" --repeat 3 >/dev/null || fail "producer (qpn)"
	wait $cap || fail "capture --qpn $q: exit $?"
	check "capture --qpn $q" "$TMP/q$q.pcap" "$TMP/q$q.tsv" --only-qpn "$q"
	wait_count 0
done

# ---- --pid: the process that handed the ring, whatever its records say
# (no `timeout` in front: $! must be roce_gen itself; it bounds its waits)
"$GEN" produce "$TMP/a.tsv" >/dev/null &
a=$!
"$GEN" produce "$TMP/b.tsv" --qpn-base 0x800000 --fake-pid "$a" >/dev/null &
b=$!
timeout 30 "$SV" capture -w "$TMP/pid.pcap" --pid "$a" 2>"$TMP/pid.err" &
cap=$!
wait $a $b || fail "producers (pid)"
size=$(stat -c %s "$TMP/direct.pcap") # A's packets, same sizes
for i in $(seq 1 100); do
	[ "$(stat -c %s "$TMP/pid.pcap")" -ge "$size" ] && break
	sleep 0.1
done
sleep 0.2 # (more than A's would show as a failure below, not be cut)
kill -INT $cap
wait $cap || fail "capture --pid: exit $?"
check "capture --pid (a second producer claims that pid)" "$TMP/pid.pcap" "$TMP/a.tsv"
wait_count 0

# ---- SIGINT after everything arrived: all of it, nothing cut
timeout 30 "$SV" capture -w "$TMP/int.pcap" 2>"$TMP/int.err" &
cap=$!
wait_count 1
timeout 30 "$GEN" produce "$TMP/int.tsv" >/dev/null || fail "producer (SIGINT)"
size=$(stat -c %s "$TMP/direct.pcap")
for i in $(seq 1 100); do
	[ "$(stat -c %s "$TMP/int.pcap")" -ge "$size" ] && break
	sleep 0.1
done
kill -INT $cap
wait $cap && ok "SIGINT: exit 0" || fail "SIGINT: exit $?"
check "after SIGINT" "$TMP/int.pcap" "$TMP/int.tsv"
grep -q "^softverbs: $N packets written" "$TMP/int.err" &&
	ok "SIGINT: reports $N packets" || fail "SIGINT: $(cat "$TMP/int.err")"

# ---- SIGTERM in the middle of a stream: whole packets, as many as said
timeout 30 "$SV" capture -w "$TMP/term.pcap" 2>"$TMP/term.err" &
cap=$!
wait_count 1
timeout 30 "$GEN" produce "$TMP/term.tsv" --repeat 300 >/dev/null &
gen=$!
for i in $(seq 1 1000); do
	[ "$(stat -c %s "$TMP/term.pcap")" -gt 200000 ] && break
	sleep 0.01
done
kill -TERM $cap
wait $cap && ok "SIGTERM: exit 0" || fail "SIGTERM: exit $?"
wait $gen || fail "producer (SIGTERM)"
n=$(sed -n 's/^softverbs: \([0-9]*\) packets written.*/\1/p' "$TMP/term.err")
[ -n "$n" ] && ok "SIGTERM mid-stream: $n packets reported" ||
	fail "SIGTERM: $(cat "$TMP/term.err")"
# On a busy machine the reader may fall behind even here: the frames the
# daemon dropped (and counted) are missing from the middle, so the rest is
# checked as a subset of the stream, in order.
d=$(sed -n 's/^softverbs: [0-9]* packets written.*, \([0-9]*\) dropped.*/\1/p' "$TMP/term.err")
if [ "${d:-0}" = 0 ]; then
	check "after SIGTERM (the $n reported, whole, 0 dropped)" "$TMP/term.pcap" "$TMP/term.tsv" \
		--count "${n:-0}" --frames "${n:-0}" --scapy-max 300
else
	check "after SIGTERM (the $n reported, whole; $d dropped)" "$TMP/term.pcap" \
		"$TMP/term.tsv" --subset --frames "${n:-0}" --scapy-max 300
fi

# ---- a reader that stalls: producers and the daemon carry on, drops counted
# (the reader reads nothing until told; a daemon that waited for it would
# hold the producer, whose drain wait then times out, and daemon status)
mkfifo "$TMP/fifo"
(exec 3<"$TMP/fifo"
 while [ ! -e "$TMP/go" ]; do sleep 0.05; done
 cat <&3 >"$TMP/slow.pcap") &
reader=$!
timeout 60 "$SV" capture -w - >"$TMP/fifo" 2>"$TMP/slow.err" &
cap=$!
wait_count 1
timeout 30 "$GEN" produce "$TMP/slow.tsv" --repeat 100 >/dev/null &&
	ok "stalled reader: $((N * 100)) packets produced and taken while nobody reads" ||
	fail "a stalled reader held the producer"
timeout 10 "$SV" daemon status >/dev/null &&
	ok "stalled reader: daemon status answers" ||
	fail "daemon status with a stalled reader"
touch "$TMP/go"
kill -INT $cap
wait $cap || fail "stalled reader: capture exit $?"
wait $reader
n=$(sed -n 's/^softverbs: \([0-9]*\) packets written.*/\1/p' "$TMP/slow.err")
d=$(sed -n 's/.*, \([0-9]*\) dropped.*/\1/p' "$TMP/slow.err")
[ -n "$d" ] && [ "$d" -gt 0 ] && [ "$((n + d))" -le "$((N * 100))" ] &&
	ok "stalled reader: $n written, $d dropped, reported on stderr" ||
	fail "stalled reader: $(cat "$TMP/slow.err")"
check "stalled reader (the $n reported, whole, in order)" "$TMP/slow.pcap" \
	"$TMP/slow.tsv" --subset --frames "${n:-0}" --scapy-max 300

# ---- a daemon that started for a capture stays while it runs (idle 1 s);
# its going away ends the capture with a valid file
"$SV" daemon stop >/dev/null
SOFTVERBS_IDLE_TIMEOUT=1 timeout 30 "$SV" capture -w "$TMP/end.pcap" 2>"$TMP/end.err" &
cap=$!
wait_count 1
sleep 2.5
"$SV" daemon status >/dev/null 2>&1 && kill -0 $cap 2>/dev/null &&
	ok "no idle exit while a capture runs" || fail "the daemon left a capture for idleness"
"$SV" daemon stop >/dev/null
wait $cap && grep -q "the daemon ended the capture" "$TMP/end.err" &&
	[ "$(stat -c %s "$TMP/end.pcap")" = 24 ] &&
	ok "daemon stopped: capture ends, an empty valid pcap" ||
	fail "daemon stopped: $(cat "$TMP/end.err")"

# ---- usage
expect_rc() {
	local want=$1 what=$2 rc
	shift 2
	"$@" >"$TMP/out" 2>&1
	rc=$?
	[ "$rc" = "$want" ] && ok "$what" || fail "$what: exit $rc, expected $want: $(cat "$TMP/out")"
}
expect_rc 2 "capture without -w" "$SV" capture
expect_rc 2 "capture --qpn beyond 24 bits" "$SV" capture -w "$TMP/x" --qpn 0x1000000
expect_rc 2 "capture -c 0" "$SV" capture -w "$TMP/x" -c 0
expect_rc 2 "capture --pid junk" "$SV" capture -w "$TMP/x" --pid 12x
expect_rc 1 "capture to a file it cannot write" "$SV" capture -w /nonexistent/dir/x.pcap
expect_rc 0 "capture --help" "$SV" capture --help

# ---- the decoders, over everything above
$CHECK "${jobs[@]}" >"$TMP/check.out" 2>&1
cat "$TMP/check.out"
fails=$((fails + $(grep -c '^FAIL' "$TMP/check.out")))
grep -q '^ok' "$TMP/check.out" || fail "roce_check did not run"

echo "capture: $fails failure(s)"
[ $fails -eq 0 ]
