#!/bin/bash
# SPDX-License-Identifier: MIT
# librdmacm and the middleware on top of it, end to end: UNMODIFIED
# programs (Debian's rdmacm-utils, perftest -R, qperf -cm1, libfabric's
# fi_pingpong, UCX, Open MPI, infiniband-diags) under `softverbs run`, a
# server and a client as a user starts them in two terminals.
#
#   rdmacm_pairs.sh NAME...   run these (exit 0 when all pass)
#   rdmacm_pairs.sh --list    the names
#
# Each: both sides bounded by a timeout, both exit codes checked, what the
# user reads checked (the programs' own data checks where they have them:
# rping -V, rstream/riostream -T v, fi_pingpong -c, our MPI ping-pong),
# and afterwards the daemon holds no ufile, object or rdma_cm id.  The
# server is started first and the client only once the server listens
# (its rdma_cm id in `softverbs res show cm_id`, or its TCP port).
# rdma_cm ports belong to the test's own daemon (SOFTVERBS_SOCKET), so they
# never collide with other tests; TCP ports are picked free.
set -u

here=$(cd "$(dirname "$0")" && pwd)
SV=${SOFTVERBS:-${SV_BUILD_DIR:-$here/../../build}/bin/softverbs}
BIN=$(dirname "$SV")
export SOFTVERBS_SOCKET=svtest.rdmacm.$$
export SOFTVERBS_IDLE_TIMEOUT=120
TMO=${PAIRS_TIMEOUT:-90}
# shellcheck source=tests/compat/pairs_lib.sh
. "$here/pairs_lib.sh"
# shellcheck source=tests/compat/cm_lib.sh
. "$here/cm_lib.sh"

ALL="rping ucmatose ucmatose_many udaddy rdma_server rdma_xserver rstream rstream_async
riostream write_bw_R send_lat_R qperf_rc fi_msg fi_rdm_rxm ucx_info
ucx_tag_lat ucx_tag_bw ucx_put_bw ucx_ud_lat mpi_pingpong ibstat ibstatus
ucx_info_user user_cma sysfs rdma_tool ns_refused"

TMP=$(mktemp -d)
cleanup() {
	"$SV" daemon stop >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

# run_one CMD: one program; its output in $D/client.out, exit in CLI_RC.
run_one() {
	# shellcheck disable=SC2086
	timeout -k 5 "$TMO" "$SV" run $1 >"$D/client.out" 2>&1
	CLI_RC=$?
	SRV_RC=0
	: >"$D/server.out"
}

daemon_clean() {
	local left
	WHY=$(pairs_daemon_quiet) || return 1
	left=$("$SV" res show cm_id 2>/dev/null | grep -c cm_id)
	[ "$left" = 0 ] || { WHY="daemon still holds $left rdma_cm ids"; return 1; }
}

ucx_env() {
	export UCX_TLS=$1 UCX_NET_DEVICES=sv0:1 UCX_WARN_UNUSED_ENV_VARS=n
}

ucx_perf() {
	local port t=$1 size=$2
	pairs_pick_port || return 1
	port=$PAIR_PORT
	run_pair "ucx_perftest -p $port" "ucx_perftest 127.0.0.1 -p $port -t $t -n 2000 -s $size" tcp "$port"
	[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] || return 1
	expect "$D/client.out" '^Final:'
}

one() {
	local name=$1 port
	D=$TMP/$name
	mkdir -p "$D"
	WHY=
	SRV_RC=- CLI_RC=-
	echo "== $name"
	case $name in
	rping)
		run_pair "rping -s -a 0.0.0.0 -p 7174 -C 100 -V" \
			"rping -c -a 127.0.0.1 -p 7174 -C 100 -v -V" cm 7174
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^ping data: rdma-ping-[0-9]+: ' 100 ;;
	ucmatose)
		run_pair "ucmatose -p 7175" "ucmatose -s 127.0.0.1 -p 7175" cm 7175
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^return status 0' 1 &&
			expect "$D/server.out" '^return status 0' 1 ;;
	ucmatose_many)
		run_pair "ucmatose -p 7176 -c 8 -C 50" \
			"ucmatose -s 127.0.0.1 -p 7176 -c 8 -C 50" cm 7176
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^return status 0' 1 &&
			expect "$D/server.out" '^data transfers complete' 1 ;;
	udaddy)
		# udaddy's port is fixed (7174, UDP port space).
		run_pair "udaddy" "udaddy -s 127.0.0.1" cm 7174
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^data transfers complete' 1 &&
			expect "$D/server.out" '^return status 0' 1 ;;
	rdma_server)
		run_pair "rdma_server -p 7177" "rdma_client -s 127.0.0.1 -p 7177" cm 7177
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^rdma_client: end 0' 1 &&
			expect "$D/server.out" '^rdma_server: end 0' 1 ;;
	rdma_xserver)
		# XRC over the rdma_cm (RDMA_PS_IB): the server's TGT QP and
		# XRC SRQ, its SRQ number in the REP's private data; the
		# client's INI QP SENDs to that SRQ.
		run_pair "rdma_xserver -c x -p 7181" \
			"rdma_xclient -c x -s 127.0.0.1 -p 7181" cm 7181
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^rdma_xclient: end 0' 1 &&
			expect "$D/server.out" '^rdma_xserver: end 0' 1 ;;
	rstream)
		run_pair "rstream -p 7178 -T v -T b -C 200 -S 10000" \
			"rstream -s 127.0.0.1 -p 7178 -T v -T b -C 200 -S 10000" cm 7178
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^custom +9\.7k +200 +1 ' 1 ;;
	rstream_async)
		run_pair "rstream -p 7179 -T a -T v -C 200 -S 3000" \
			"rstream -s 127.0.0.1 -p 7179 -T a -T v -C 200 -S 3000" cm 7179
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^custom +2\.9k +200 +1 ' 1 ;;
	riostream)
		run_pair "riostream -p 7180 -T v -C 100 -S 10000" \
			"riostream -s 127.0.0.1 -p 7180 -T v -C 100 -S 10000" cm 7180
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^custom +9\.7k +100 +1 ' 1 ;;
	write_bw_R)
		perftest_R ib_write_bw && perftest_ok "$D/client.out" "BW average" 4 ;;
	send_lat_R)
		perftest_R ib_send_lat && perftest_ok "$D/client.out" "t_avg" 6 ;;
	qperf_rc)
		qperf_rc 2 ;;
	fi_msg | fi_rdm_rxm)
		local prov=verbs ep=msg attempt
		[ "$name" = fi_rdm_rxm ] && prov="verbs;ofi_rxm" ep=rdm
		for attempt in 1 2; do
			pairs_pick_port && port=$PAIR_PORT
			run_pair "fi_pingpong -p $prov -e $ep -B $port -c -I 100" \
				"fi_pingpong -p $prov -e $ep -P $port -c -I 100 127.0.0.1" tcp "$port"
			[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] && break
			# rxm's teardown race (docs/differences.md, "rdma_cm"):
			# every size passed its data check on both sides, then
			# the first side done closed, and rxm on the other handled
			# the DISCONNECTED before its last completion -- flushed
			# or never seen.  Beside busy loops now and then (once in
			# 2 of 3 loaded full runs): run again, once.
			[ "$attempt" = 1 ] && [ "$name" = fi_rdm_rxm ] &&
				grep -Eq '^1m +100 +=100 ' "$D/client.out" &&
				grep -Eq '^1m +100 +=100 ' "$D/server.out" || break
			echo "   (rxm's teardown race after the last size: again)"
		done
		[ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
			expect "$D/client.out" '^1m +100 +=100 ' 1 ;;
	ucx_info)
		run_one "ucx_info -d"
		[ "$CLI_RC" = 0 ] && expect "$D/client.out" '^# Memory domain: sv0$' 1 &&
			expect "$D/client.out" 'Transport: rc_verbs' &&
			expect "$D/client.out" 'Transport: ud_verbs' &&
			expect "$D/client.out" 'Device: sv0:1' ;;
	# rc_verbs needs an auxiliary transport for its wire-up: ud_verbs.
	ucx_tag_lat) ucx_env rc_verbs,ud_verbs,self && ucx_perf tag_lat 8 ;;
	ucx_tag_bw) ucx_env rc_verbs,ud_verbs,self && ucx_perf tag_bw 65536 ;;
	ucx_put_bw) ucx_env rc_verbs,ud_verbs,self && ucx_perf ucp_put_bw 65536 ;;
	ucx_ud_lat) ucx_env ud_verbs,self && ucx_perf tag_lat 8 ;;
	mpi_pingpong)
		[ -x "$BIN/mpi_pingpong" ] || { WHY="mpi_pingpong not built (libopenmpi-dev)"; false; } &&
		ucx_env rc_verbs,ud_verbs,self &&
		run_one "mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ucx --mca btl ^openib -x UCX_TLS -x UCX_NET_DEVICES $BIN/mpi_pingpong 200" &&
		[ "$CLI_RC" = 0 ] && expect "$D/client.out" '^mpi_pingpong: 200 round trips of 1 B \.\. 1 MiB, data checked$' 1 ;;
	ibstat)
		run_one "ibstat"
		[ "$CLI_RC" = 0 ] && expect "$D/client.out" "^CA 'sv0'" 1 &&
			expect "$D/client.out" 'State: Active' 1 &&
			expect "$D/client.out" 'Link layer: Ethernet' 1 ;;
	ibstatus)
		run_one "ibstatus"
		[ "$CLI_RC" = 0 ] && expect "$D/client.out" "^Infiniband device 'sv0' port 1 status:" 1 &&
			expect "$D/client.out" 'state:[[:space:]]+4: ACTIVE' 1 ;;
	ucx_info_user)
		# An ordinary user gets the device through a user namespace.
		if [ "$(id -u)" != 0 ]; then
			run_one "ucx_info -d"
		elif ! setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$SV"; then
			echo "   (skipped: uid 65534 cannot execute $SV)"
			return 0
		else
			timeout -k 5 "$TMO" setpriv --reuid=65534 --regid=65534 --clear-groups \
				env SOFTVERBS_SOCKET=svtest.rdmacm.user.$$ SOFTVERBS_IDLE_TIMEOUT=2 \
				"$SV" run sh -c 'id -u; ls -l /dev/infiniband/uverbs0; exec ucx_info -d' >"$D/client.out" 2>&1
			CLI_RC=$?
			SRV_RC=0
		fi
		[ "$CLI_RC" = 0 ] && expect "$D/client.out" '^# Memory domain: sv0$' 1 &&
			expect "$D/client.out" '^crw-rw-rw- .* /dev/infiniband/uverbs0$' 1 ;;
	user_cma)
		# An ordinary user's process inside `softverbs run`'s user
		# namespace and one outside it (SOFTVERBS_NAMESPACE=0), each way
		# round: rping's RDMA READ and WRITE move the data between them
		# and the client checks it (-V).  The kernel refuses CMA from
		# inside to outside; the engine goes through the owner's then.
		local as=() sock=svtest.rdmacm.cma.$$ side bad=0
		[ "$(id -u)" = 0 ] && as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
		if ! "${as[@]}" test -x "$SV"; then
			echo "   (skipped: uid 65534 cannot execute $SV)"
			return 0
		fi
		for side in server client; do
			pairs_pick_port && port=$PAIR_PORT
			local srv_ns=1 cli_ns=0
			[ $side = client ] && srv_ns=0 cli_ns=1
			timeout -k 5 "$TMO" "${as[@]}" env SOFTVERBS_SOCKET=$sock SOFTVERBS_IDLE_TIMEOUT=3 \
				SOFTVERBS_NAMESPACE=$srv_ns "$SV" run rping -s -a 127.0.0.1 -p "$port" -C 50 -V \
				>"$D/server.out" 2>&1 &
			SRV=$!
			for _ in $(seq 1 200); do
				"${as[@]}" env SOFTVERBS_SOCKET=$sock "$SV" res show cm_id 2>/dev/null |
					grep -q "state LISTEN .* port $port " && break
				sleep 0.05
			done
			timeout -k 5 "$TMO" "${as[@]}" env SOFTVERBS_SOCKET=$sock SOFTVERBS_IDLE_TIMEOUT=3 \
				SOFTVERBS_NAMESPACE=$cli_ns "$SV" run rping -c -a 127.0.0.1 -p "$port" -C 50 -V -v \
				>"$D/client.out" 2>&1
			CLI_RC=$?
			[ "$CLI_RC" = 0 ] || kill_tree "$SRV" TERM
			wait "$SRV"
			SRV_RC=$?
			# (A failure ends the loop, not the function: the
			# report below shows both sides' output.)
			{ [ "$SRV_RC" = 0 ] && [ "$CLI_RC" = 0 ] &&
				expect "$D/client.out" '^ping data: rdma-ping-' 50; } ||
				{ WHY="${WHY:-exit codes $SRV_RC/$CLI_RC} (namespace on the $side side)"
				  bad=1; break; }
		done
		"${as[@]}" env SOFTVERBS_SOCKET=$sock "$SV" daemon stop >/dev/null 2>&1
		[ $bad = 0 ] ;;
	sysfs)
		# The namespace's tree agrees with what the device answers, and
		# the host's /sys is as it was outside.
		timeout -k 5 "$TMO" "$SV" run sh -c 'cd /sys/class/infiniband/sv0 &&
			echo "guid $(cat node_guid)"; cat ports/1/gids/1 ports/1/gid_attrs/types/1 \
			ports/1/state /sys/class/infiniband_verbs/uverbs0/ibdev; ibv_devinfo -v;
			test -c /dev/infiniband/uverbs0 && echo uverbs0-chardev' >"$D/client.out" 2>&1
		CLI_RC=$?
		SRV_RC=0
		local guid
		guid=$(sed -n 's/^guid //p' "$D/client.out")
		[ "$CLI_RC" = 0 ] && [ -n "$guid" ] &&
			expect "$D/client.out" "^[[:space:]]+node_guid:[[:space:]]+$guid\$" 1 &&
			expect "$D/client.out" '^0000:0000:0000:0000:0000:ffff:7f00:0001$' 1 &&
			expect "$D/client.out" 'GID\[ *1\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2' 1 &&
			expect "$D/client.out" '^RoCE v2$' 1 && expect "$D/client.out" '^4: ACTIVE$' 1 &&
			expect "$D/client.out" '^sv0$' 1 && expect "$D/client.out" '^uverbs0-chardev$' 1 &&
			{ [ ! -e /sys/class/infiniband/sv0 ] || { WHY="the host's /sys shows sv0"; false; }; } ;;
	rdma_tool)
		# iproute2's rdma inside answers for sv0 (pyverbs' tests find the
		# port's network device with `rdma link show -j`), agreeing with
		# sysfs' device/net/ and /sys/class/net; the host's rdma outside
		# is untouched.
		timeout -k 5 "$TMO" "$SV" run /usr/bin/python3 -c '
import json, os, subprocess as sp
link = json.loads(sp.check_output(["rdma", "link", "show", "-j"]))
assert len(link) == 1, link
l = link[0]
nd = os.listdir("/sys/class/infiniband/sv0/device/net")
assert l["ifname"] == "sv0" and l["port"] == 1, l
assert l["state"] == "ACTIVE" and l["physical_state"] == "LINK_UP", l
assert [l["netdev"]] == nd, (l, nd)
idx = open("/sys/class/net/%s/ifindex" % nd[0]).read().strip()
assert str(l["netdev_index"]) == idx, (l, idx)
print("link ok", l["netdev"])
dev = json.loads(sp.check_output(["rdma", "-j", "-p", "dev"]))
guid = open("/sys/class/infiniband/sv0/node_guid").read().strip()
assert dev[0]["ifname"] == "sv0" and dev[0]["node_guid"] == guid, dev
assert dev[0]["node_type"] == "ca", dev
print("dev ok", guid)
print(sp.run(["rdma", "link"], stdout=sp.PIPE, text=True).stdout, end="")
r = sp.run(["rdma", "resource", "show"], stderr=sp.PIPE, text=True)
assert r.returncode == 1 and "not available" in r.stderr, r
r = sp.run(["rdma", "link", "show", "sv9/1"], stderr=sp.PIPE, text=True)
assert r.returncode == 1 and "Wrong device name" in r.stderr, r
print("errors ok")
' >"$D/client.out" 2>&1
		CLI_RC=$?
		SRV_RC=0
		[ "$CLI_RC" = 0 ] && expect "$D/client.out" '^link ok ' 1 &&
			expect "$D/client.out" '^dev ok ' 1 && expect "$D/client.out" '^errors ok$' 1 &&
			expect "$D/client.out" '^link sv0/1 state ACTIVE physical_state LINK_UP netdev [^ ]+ $' 1 &&
			{ ! command -v rdma >/dev/null || ! rdma -V 2>&1 | grep -q softverbs ||
				{ WHY="the host's rdma is ours"; false; }; } ;;
	ns_refused)
		# Namespaces refused: one warning, and the program runs without
		# /dev/infiniband (libibverbs still finds the device).
		timeout -k 5 "$TMO" env SOFTVERBS_FAULT=run_ns "$SV" run \
			sh -c 'ibv_devices; test -e /dev/infiniband/uverbs0 && echo VISIBLE; exit 0' \
			>"$D/client.out" 2>&1
		CLI_RC=$?
		SRV_RC=0
		[ "$CLI_RC" = 0 ] && expect "$D/client.out" '^softverbs: warning: no private mount namespace' 1 &&
			expect "$D/client.out" '^[[:space:]]+sv0[[:space:]]' 1 &&
			expect "$D/client.out" 'VISIBLE' 0 ;;
	*) echo "unknown '$name' (see --list)"; return 2 ;;
	esac
	local ok=$?
	if [ $ok = 0 ] && { [ "$SRV_RC" != 0 ] || [ "$CLI_RC" != 0 ]; }; then
		ok=1
	fi
	[ $ok = 0 ] || [ -n "$WHY" ] || WHY="exit codes: server $SRV_RC, client $CLI_RC (124 = timed out)"
	if [ $ok = 0 ]; then
		daemon_clean || ok=1
	fi
	if [ $ok = 0 ]; then
		echo "ok $name"
		return 0
	fi
	echo "FAIL $name: $WHY"
	echo "   --- server output"
	sed 's/^/   | /' "$D/server.out" | tail -40
	echo "   --- client output"
	sed 's/^/   | /' "$D/client.out" | tail -40
	echo "   --- the daemon's connection manager (its log)"
	grep -h "cm" "$TMP"/softverbsd-*.log 2>/dev/null | tail -30 | sed 's/^/   | /'
	"$SV" daemon stop >/dev/null 2>&1
	# The next case's daemon logs here too.
	TMPDIR=$TMP SOFTVERBS_LOG=debug "$SV" daemon start >/dev/null 2>&1
	return 1
}

[ $# -ge 1 ] || { echo "usage: rdmacm_pairs.sh NAME... | --list" >&2; exit 2; }
# shellcheck disable=SC2086
case $1 in
--list) printf '%s\n' $ALL; exit 0 ;;
--all) set -- $ALL ;;
esac
# The daemon logs what its connection manager did (REJ reasons) into
# $TMP, shown when a case fails.
TMPDIR=$TMP SOFTVERBS_LOG=debug "$SV" daemon start >/dev/null 2>&1
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
