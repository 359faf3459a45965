#!/bin/bash
# SPDX-License-Identifier: MIT
# The connection manager between hosts: UNMODIFIED rdma_cm programs
# (rdmacm-utils, perftest -R, qperf -cm1, libfabric's verbs msg endpoint)
# with the server in one network namespace and the client in another
# (tests/compat/netns_lib.sh: a veth, documentation addresses, a daemon in
# each), so every REQ/REP/RTU/DREQ/DREP and SIDR message crosses the veth
# as a CM MAD on QP1 in RoCE v2, and the data follows on the wire.
#
#   wire_cm.sh NAME...   run these (exit 0 when all pass; 77 = SKIP: not
#                        root, or no namespaces here)
#   wire_cm.sh --all     all of them
#   wire_cm.sh --list    the names
#
# Each: both sides bounded by a timeout, both exit codes checked, what the
# user reads checked (the programs' own data checks where they have them),
# then both daemons hold no ufile, object or rdma_cm id, and both counted
# CM MADs sent and received (the handshake really went over the wire).
# The *_loss cases drop ~5% of B's incoming RoCE packets with nftables: the
# CM's retries and RC's retransmission carry the run through.  The
# rping4_lost_* cases drop exactly one CM MAD of one kind (netns_drop_mad),
# so each recovery path of the CM runs every time, within 30 s:
#   lost_rep   A loses B's REP: B sends it again on its timer;
#   lost_rtu   B loses A's RTU: B's REP goes again, A answers the duplicate
#              with the RTU again (B never had an MRA that would have made
#              it wait ~70 s first: MRAs go only for a duplicate);
#   lost_dreq  B loses A's DREQ, and rping's client destroys its id right
#              after rdma_disconnect: the DREQ is still sent again, or B's
#              server would wait for DISCONNECTED for ever;
#   lost_drep  A loses B's DREP: A's DREQ goes again and B answers it
#              again (from timewait, or for a connection it forgot).
# Each also checks that the lost kind of MAD came again (mad_again).
set -u

here=$(cd "$(dirname "$0")" && pwd)
SV=${SOFTVERBS:-${SV_BUILD_DIR:-$here/../../build}/bin/softverbs}
export SOFTVERBS_IDLE_TIMEOUT=120
TMO=${PAIRS_TIMEOUT:-90}
# shellcheck source=tests/compat/pairs_lib.sh
. "$here/pairs_lib.sh"
# shellcheck source=tests/compat/netns_lib.sh
. "$here/netns_lib.sh"
# shellcheck source=tests/compat/cm_lib.sh
. "$here/cm_lib.sh"

ALL="rping4 rping6 rping4_loss rping4_lost_rep rping4_lost_rtu
rping4_lost_dreq rping4_lost_drep ucmatose4 ucmatose6 udaddy4 udaddy6
rdma_server4 rdma_xserver4 rstream4 write_bw_R4 send_lat_R4 qperf_rc4 fi_msg4"

# shellcheck disable=SC2086 # ALL is a word list
case ${1:-} in
--list) printf '%s\n' $ALL; exit 0 ;;
--all) set -- $ALL ;;
"") echo "usage: wire_cm.sh NAME... | --all | --list" >&2; exit 2 ;;
esac
why=$(netns_require) || { echo "$why"; exit 77; }
netns_setup || { echo "wire_cm: cannot set up the namespaces"; exit 1; }
netns_daemon a && netns_daemon b || { echo "wire_cm: no daemons"; exit 1; }
PAIR_SRV_NS=$NS_B
PAIR_CLI_NS=$NS_A
PAIR_ADDR=$NS_B_IP4
TMP=$(mktemp -d)
trap 'netns_cleanup; rm -rf "$TMP"' EXIT

# The CM MADs a daemon counted ("cm mads: S sent, R received; ..."); a
# status call that does not answer at once is asked again.
cm_mads() {
	local v
	for _ in $(seq 1 20); do
		v=$(ns_in "$1" "$SV" daemon status 2>/dev/null |
			sed -n 's/.*cm mads: *\([0-9]*\) sent, \([0-9]*\) received.*/\1 \2/p')
		[ -n "$v" ] && { echo "$v"; return 0; }
		sleep 0.1
	done
	echo "? ?"
}

# Both daemons hold nothing, and each sent and received more CM MADs than
# before this case.
daemons_clean() {
	local ns s r b0 b1
	for ns in a b; do
		WHY=$(pairs_daemon_quiet "$(ns_name $ns)") || return 1
		[ "$(ns_in $ns "$SV" res show cm_id 2>/dev/null | grep -c cm_id)" = 0 ] ||
			{ WHY="daemon of $ns still holds rdma_cm ids"; return 1; }
		read -r s r <<<"$(cm_mads $ns)"
		b0=$(eval echo "\${MADS_$ns% *}") b1=$(eval echo "\${MADS_$ns#* }")
		[ "$s" != "?" ] && [ "$b0" != "?" ] && [ "$s" -gt "$b0" ] && [ "$r" -gt "$b1" ] ||
			{ WHY="daemon of $ns counted CM MADs '$s sent, $r received' (before: $b0, $b1)"; return 1; }
	done
}

# rping4_lost_*: the namespace that dropped the one CM MAD of kind $2 got
# one of that kind again (sent again by the peer), within 15 s.  After
# the last MAD of the connection (lost_drep: the DREP of a DREQ sent again
# once rping's client is gone) this is the only trace of the recovery.
mad_again() {
	local n
	for _ in $(seq 1 150); do
		n=$(netns_drop_mad_passed "$1")
		[ -n "$n" ] && [ "$n" -ge 1 ] && return 0
		sleep 0.1
	done
	WHY="$1 lost the CM MAD $2 and never received it again (${n:-?} since)"
	return 1
}

# xrc_cm_check PCAP: the XRC connection as tshark reads B's veth.  The
# REQ: transport 3, extended transport 1 (XRC), no SRQ bit, A's INI QP;
# B's REP: local QPN 0, its TGT QP as the local EE context, the SRQ bit
# (the kernel's cm_format_req / cm_format_rep); then A's XRC SEND (0xa4)
# to that TGT QP and its XRC ACK (0xb1) back to the INI QP.
xrc_cm_check() {
	local req rep ini tgt
	req=$(tshark -n -r "$1" -Y infiniband.cm.req.transpsvctype -T fields -E separator=, \
		-e infiniband.cm.req.transpsvctype -e infiniband.cm.req.ext_transport \
		-e infiniband.cm.req.srq -e infiniband.cm.req.localqpn 2>/dev/null | head -1)
	rep=$(tshark -n -r "$1" -Y infiniband.cm.rep.localeecn -T fields -E separator=, \
		-e infiniband.cm.rep.localqpn -e infiniband.cm.rep.localeecn \
		-e infiniband.cm.rep.srq 2>/dev/null | head -1)
	ini=${req##*,} tgt=${rep#*,} tgt=${tgt%,*}
	case $req in
	0x03,0x01,0x00,0x*) ;;
	*) WHY="REQ (transport, extended, SRQ, QPN): '$req', want 0x03,0x01,0x00,QPN"; return 1 ;;
	esac
	case $rep in
	0x000000,0x*,0x01) [ "$tgt" != 0x000000 ] ||
		{ WHY="REP names no TGT QP: '$rep'"; return 1; } ;;
	*) WHY="REP (QPN, EECN, SRQ): '$rep', want 0x000000,TGT,0x01"; return 1 ;;
	esac
	tshark -n -r "$1" -T fields -E separator=, -e infiniband.bth.opcode \
		-e infiniband.bth.destqp 2>/dev/null >"$1.bth"
	if ! grep -qx "164,$tgt" "$1.bth" || ! grep -qx "177,$ini" "$1.bth"; then
		WHY="no XRC SEND to $tgt and XRC ACK to $ini on the wire: $(tr '\n' ' ' <"$1.bth")"
		return 1
	fi
}

one() {
	local name=$1 port ok
	D=$TMP/$name
	mkdir -p "$D"
	WHY="" SRV_RC=- CLI_RC=- SERVER_RUNS_ON=""
	MADS_a=$(cm_mads a) MADS_b=$(cm_mads b)
	echo "== $name"
	case $name in
	rping4 | rping6 | rping4_loss)
		local ip=$NS_B_IP4
		[ "$name" = rping6 ] && ip=$NS_B_IP6
		[ "$name" = rping4_loss ] && netns_loss b 5
		run_pair "rping -s -a $ip -p 7174 -C 50 -V" \
			"rping -c -a $ip -p 7174 -C 50 -v -V" cm 7174
		[ "$name" = rping4_loss ] && echo "   B dropped $(netns_loss_dropped b) packets" &&
			netns_loss_off b
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^ping data: rdma-ping-[0-9]+: ' 50 ;;
	rping4_lost_rep | rping4_lost_rtu | rping4_lost_dreq | rping4_lost_drep)
		# One recovery, one CM timeout (~4 s): well within 30 s.
		local side attr dropped TMO=30
		case $name in
		rping4_lost_rep) side=a attr=0x13 ;;
		rping4_lost_rtu) side=b attr=0x14 ;;
		rping4_lost_dreq) side=b attr=0x15 ;;
		*) side=a attr=0x16 ;;
		esac
		netns_drop_mad $side $attr
		run_pair "rping -s -a $NS_B_IP4 -p 7174 -C 50 -V" \
			"rping -c -a $NS_B_IP4 -p 7174 -C 50 -v -V" cm 7174
		dropped=$(netns_drop_mad_dropped $side)
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^ping data: rdma-ping-[0-9]+: ' 50 &&
			{ [ "$dropped" = 1 ] ||
				{ WHY="$side dropped $dropped CM MADs $attr, want 1"; false; }; } &&
			mad_again $side $attr
		ok=$?
		netns_drop_mad_off $side
		(exit $ok) ;;
	ucmatose4 | ucmatose6)
		local ip=$NS_B_IP4
		[ "$name" = ucmatose6 ] && ip=$NS_B_IP6
		# The server binds B's address of the family (unbound, the
		# wildcard of rdma_getaddrinfo is IPv4's, which takes no IPv6).
		run_pair "ucmatose -b $ip -p 7175 -c 4 -C 20" "ucmatose -s $ip -p 7175 -c 4 -C 20" cm 7175
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^return status 0' 1 &&
			expect "$D/server.out" '^data transfers complete' 1 ;;
	udaddy4 | udaddy6)
		# SIDR REQ/REP; udaddy's port is fixed (7174, UDP port space).
		local ip=$NS_B_IP4
		[ "$name" = udaddy6 ] && ip=$NS_B_IP6
		run_pair "udaddy -b $ip" "udaddy -s $ip" cm 7174
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^data transfers complete' 1 &&
			expect "$D/server.out" '^return status 0' 1 ;;
	rdma_server4)
		run_pair "rdma_server -p 7177" "rdma_client -s $NS_B_IP4 -p 7177" cm 7177
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^rdma_client: end 0' 1 &&
			expect "$D/server.out" '^rdma_server: end 0' 1 ;;
	rdma_xserver4)
		# XRC over the rdma_cm between hosts: the REQ names the XRC
		# transport and B's REP carries its TGT QP as the local EE
		# context (IBTA 12.6.5, 12.6.8; tshark reads both), then A's
		# INI QP SENDs to the SRQ B named in its private data.
		netns_capture b "$D/cm.pcap" "udp port 4791" &&
		run_pair "rdma_xserver -c x -p 7181" \
			"rdma_xclient -c x -s $NS_B_IP4 -p 7181" cm 7181
		ok=$?
		netns_capture_stop
		[ $ok = 0 ] && [ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^rdma_xclient: end 0' 1 &&
			expect "$D/server.out" '^rdma_xserver: end 0' 1 &&
			xrc_cm_check "$D/cm.pcap" ;;
	rstream4)
		run_pair "rstream -p 7178 -T v -T b -C 100 -S 10000" \
			"rstream -s $NS_B_IP4 -p 7178 -T v -T b -C 100 -S 10000" cm 7178
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^custom +9\.7k +100 +1 ' 1 ;;
	write_bw_R4)
		perftest_R ib_write_bw && perftest_ok "$D/client.out" "BW average" 4 ;;
	send_lat_R4)
		perftest_R ib_send_lat && perftest_ok "$D/client.out" "t_avg" 6 ;;
	qperf_rc4)
		# Two tests, two connections (qperf's server forks one per test).
		qperf_rc 1 ;;
	fi_msg4)
		pairs_pick_port && port=$PAIR_PORT
		run_pair "fi_pingpong -p verbs -e msg -B $port -c -I 100" \
			"fi_pingpong -p verbs -e msg -P $port -c -I 100 $NS_B_IP4" tcp "$port"
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^1m +100 +=100 ' 1 ;;
	*) echo "unknown '$name' (see --list)"; return 2 ;;
	esac
	ok=$?
	if [ $ok = 0 ] && { [ "$SRV_RC" != 0 ] || [ "$CLI_RC" != 0 ]; }; then
		ok=1
	fi
	[ $ok = 0 ] || [ -n "$WHY" ] || WHY="exit codes: server $SRV_RC, client $CLI_RC (124 = timed out)"
	[ $ok = 0 ] && { daemons_clean || ok=1; }
	if [ $ok = 0 ]; then
		echo "ok $name"
		return 0
	fi
	echo "FAIL $name: $WHY"
	echo "   --- server output (namespace B)"
	sed 's/^/   | /' "$D/server.out" | tail -40
	echo "   --- client output (namespace A)"
	sed 's/^/   | /' "$D/client.out" | tail -40
	ns_in a "$SV" daemon status 2>&1 | sed 's/^/   A: /'
	ns_in b "$SV" daemon status 2>&1 | sed 's/^/   B: /'
	# Fresh daemons for the next case.
	ns_in a "$SV" daemon stop >/dev/null 2>&1
	ns_in b "$SV" daemon stop >/dev/null 2>&1
	netns_daemon a
	netns_daemon b
	return 1
}

pass=0 fail=0 failed=
for n in "$@"; do
	if one "$n"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		failed="$failed $n"
	fi
done
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
