#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Middleware on softverbs against the same middleware on its own
# transports, side by side in rounds (each round runs the peer and, right
# after it, ours; the report gives the medians of MW_ROUNDS, default 5):
#
#   host  one host: UCX 1.13's ucx_perftest over rc_verbs on sv0
#         (UCX_TLS=rc_verbs,ud_verbs,self, under `softverbs run`) beside
#         UCX's shared memory (UCX_TLS=posix,self): tag_lat and ucp_am_lat
#         8 B (average and median), tag_bw, ucp_put_bw, ucp_get and
#         stream_bw 64 KiB (MB/s); UCT's CMA transport put_bw and get
#         64 KiB (zero copy), the floor of a put or get between processes
#         that share no memory
#   mpi   Open MPI 4.1 with --mca pml ucx, the RDMA transport forced
#         (UCX_TLS=rc_verbs,ud_verbs,self: no shared memory), 2 and 4
#         ranks on this host, bench/mpi_bench.c (ping-pong 8 B and 1 MiB,
#         allreduce 8 B and 1 MiB), beside the same program over TCP
#         (--mca pml ob1 --mca btl tcp,self)
#   ns    two network namespaces on one veth (tests/compat/netns_lib.sh,
#         root): UCX rc_verbs beside UCX tcp (UCX_TLS=tcp,self) for
#         tag_lat 8 B, tag_bw, ucp_put_bw, ucp_get 64 KiB; libfabric's
#         fi_pingpong over verbs;ofi_rxm beside tcp;ofi_rxm, 8 B and
#         64 KiB (Debian 12 packages no fabtests, so no fi_rdm_tagged_bw),
#         as it times (from the first message) and without the
#         connection's setup (fabtests time after their warm-up: see
#         fi_steady below);
#         unmodified TCP programs under rdma-core's librspreload (rsockets
#         on our librdmacm) beside the same programs over TCP: sockperf
#         ping-pong (p50, its 14-byte messages) and throughput (1 KiB
#         messages), iperf3
#
#   bench/middleware_bench.sh [--quick]     (--quick: 3 rounds)
#   MW_ROUNDS=N  MW_ONLY="host mpi ns" (a subset of the sections)
#
# Writes bench/reports/middleware.md (tables, each target and whether it
# is met), middleware.tsv (every round's figure) and middleware.png.
# Numbers are printed and reported, never asserted.  SOFTVERBS=
# .../bin/softverbs uses that build, else a Release tree is built in
# build-bench/.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/bench_lib.sh
. "$top/bench/bench_lib.sh"
bench_build
apt_want sockperf iperf3 python3-matplotlib
export SOFTVERBS=$SV
export SOFTVERBS_SOCKET=svbench.mw.$$
export SOFTVERBS_IDLE_TIMEOUT=300
export UCX_WARN_UNUSED_ENV_VARS=n
PY=/usr/bin/python3
TMO=${MW_TIMEOUT:-120}
ROUNDS=${MW_ROUNDS:-5}
[ "${1:-}" = --quick ] && ROUNDS=${MW_ROUNDS:-3}
ONLY=${MW_ONLY:-host mpi ns}
# shellcheck source=tests/compat/pairs_lib.sh
. "$top/tests/compat/pairs_lib.sh"

TMP=$(mktemp -d)
NS_UP=
cleanup() {
	"$SV" daemon stop >/dev/null 2>&1
	[ -n "$NS_UP" ] && netns_cleanup
	rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$reports"
: >"$TMP/vals"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

on() { case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }

# val SECTION WHAT SIZE UNIT ROUND VALUE
val() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$TMP/vals"
	printf '  %-5s %-34s %8s %10s %s\n' "$1" "$2" "$3" "$6" "$4"
}

# ucx DIR MODE TEST SIZE ITERS: one ucx_perftest pair; prints its Final
# line's "p50 average MB/s" (latency in usec), or "failed".  MODE: posix
# or tcp (UCX as it is), rc (UCX over sv0, under softverbs run).
ucx() {
	local d=$1 mode=$2 t=$3 s=$4 n=$5 direct=1 tls dev=
	case $mode in
	posix) tls=posix,self ;;
	tcp) tls=tcp,self ;;
	rc) tls=rc_verbs,ud_verbs,self dev=sv0:1 direct= ;;
	esac
	if UCX_TLS=$tls UCX_NET_DEVICES=${dev:-all} PAIR_DIRECT=$direct \
		pairs_run "$d" "$TMO" ucx_perftest -t "$t" -s "$s" -n "$n" \
		-w $((n / 10)) >/dev/null; then
		awk '$1 == "Final:" { print $3, $4, $6; f = 1 }
			END { if (!f) print "failed" }' "$d/client.out"
	else
		"$SV" daemon stop >/dev/null 2>&1
		echo failed
	fi
}

# ucx_round SECTION ROUND PEER TEST SIZE ITERS: the peer, then ours.
ucx_round() {
	local sec=$1 r=$2 peer=$3 t=$4 s=$5 n=$6 mode p50 avg mbs
	for mode in "$peer" rc; do
		read -r p50 avg mbs < <(ucx "$TMP/$sec.$t.$s.$mode.$r" "$mode" \
			"$t" "$s" "$n")
		if [ "$p50" = failed ]; then
			val "$sec" "ucx_${t}_$mode" "$s" - "$r" failed
		elif [ "$s" = 8 ]; then
			val "$sec" "ucx_${t}_$mode" "$s" usec "$r" "$avg"
			val "$sec" "ucx_${t}_${mode}_p50" "$s" usec "$r" "$p50"
		else
			val "$sec" "ucx_${t}_$mode" "$s" MB/s "$r" "$mbs"
		fi
	done
}

# fi DIR PROV SIZE ITERS: fi_pingpong (rdm) across the namespaces; prints
# "usec/xfer MB/s" of its size's row, or "failed".
fi_pp() {
	local d=$1 prov=$2 s=$3 n=$4 wrap=() v
	case $prov in verbs*) wrap=("$SV" run) ;; esac
	mkdir -p "$d"
	pairs_pick_port || { echo failed; return; }
	timeout -k 5 "$TMO" ip netns exec "$NS_B" "${wrap[@]}" fi_pingpong \
		-p "$prov" -e rdm -B "$PAIR_PORT" -S "$s" -I "$n" >"$d/server.out" 2>&1 &
	for _ in $(seq 1 100); do
		port_listening "$PAIR_PORT" 2>/dev/null && break
		sleep 0.1
	done
	# fi_pingpong's control socket is TCP: the server listens on it
	# before its fabric is up, and the client retries its connect.
	timeout -k 5 "$TMO" ip netns exec "$NS_A" "${wrap[@]}" fi_pingpong \
		-p "$prov" -e rdm -P "$PAIR_PORT" -S "$s" -I "$n" "$NS_B_IP4" \
		>"$d/client.out" 2>&1
	wait
	v=$(awk -v s="$s" '($1 == s || $1 == s / 1024 "k") && $2 ~ /^[0-9]+k?$/ {
		print $7, $6; exit }' "$d/client.out")
	echo "${v:-failed}"
}

# fi_steady SECTION WHAT SIZE ROUND N US MBS US0: records fi_pingpong's
# figure of N iterations as it gives it (WHAT: usec/xfer for 8 B, MB/s
# above), and the same without the connection's setup (WHAT_steady):
# fi_pingpong starts its clock before the first message, and rxm connects
# at the first message -- over verbs it then allocates, clears and
# registers buffer pools for the connection (three of about 17 MB in each
# process: about 250 ms in all on this VM, whose page faults are slow),
# over tcp a short run of 8 B takes about 25 ms (of 64 KiB, 200 ms: not
# traced).  fabtests, fi_rdm_tagged_bw among them, start theirs after a
# warm-up.  A run of FI_SHORT
# iterations (US0 usec/xfer) is that setup and FI_SHORT messages; the
# difference of the two runs' times over the difference of their
# messages is the time of a message (usec/xfer = elapsed / iterations
# / 2 in fi_pingpong).  WHAT_setup: the short run's time, in ms.
FI_SHORT=10
fi_steady() {
	local sec=$1 what=$2 s=$3 r=$4 n=$5 us=$6 mbs=$7 us0=$8 st
	if [ "$us" = failed ]; then
		val "$sec" "$what" "$s" - "$r" failed
		val "$sec" "${what}_steady" "$s" - "$r" failed
		return
	fi
	if [ "$s" = 8 ]; then
		val "$sec" "$what" "$s" usec "$r" "$us"
	else
		val "$sec" "$what" "$s" MB/s "$r" "$mbs"
	fi
	if [ "${us0:-failed}" = failed ]; then
		val "$sec" "${what}_steady" "$s" - "$r" failed
		return
	fi
	val "$sec" "${what}_setup" "$s" ms "$r" \
		"$(awk -v u="$us0" -v k="$FI_SHORT" 'BEGIN { printf "%.1f", u * k * 2 / 1000 }')"
	st=$(awk -v u="$us" -v n="$n" -v u0="$us0" -v k="$FI_SHORT" 'BEGIN {
		t = (u * n - u0 * k) / (n - k); if (t > 0) printf "%.3f", t }')
	if [ -z "$st" ]; then
		val "$sec" "${what}_steady" "$s" - "$r" failed
	elif [ "$s" = 8 ]; then
		val "$sec" "${what}_steady" "$s" usec "$r" "$st"
	else
		val "$sec" "${what}_steady" "$s" MB/s "$r" \
			"$(awk -v s="$s" -v t="$st" 'BEGIN { printf "%.1f", s / t }')"
	fi
}

# rsock DIR KIND WHAT: one unmodified TCP program pair across the
# namespaces, plain (KIND tcp) or under rdma-core's librspreload (KIND
# rs: its rsockets on our librdmacm and sv0).  WHAT: pp (sockperf
# ping-pong, prints the p50 one-way latency in usec), tp (sockperf
# throughput of 1 KiB messages, MB/s), ip (iperf3, MB/s); "failed" else.
RSPRELOAD=
for f in /usr/lib/*/rsocket/librspreload.so; do
	[ -e "$f" ] && RSPRELOAD=$f
done
rsock() {
	local d=$1 kind=$2 what=$3 wrap=() srv cli pid v
	mkdir -p "$d"
	[ "$kind" = rs ] && wrap=("$SV" run env LD_PRELOAD="$RSPRELOAD")
	case $what in
	pp | tp)
		srv=(sockperf server -i "$NS_B_IP4" -p 11111 --tcp)
		if [ "$what" = pp ]; then
			cli=(sockperf ping-pong -i "$NS_B_IP4" -p 11111 -t 3 --tcp)
		else
			cli=(sockperf throughput -i "$NS_B_IP4" -p 11111 -t 3 --tcp -m 1024)
		fi ;;
	ip)
		srv=(iperf3 -s -1 -B "$NS_B_IP4")
		cli=(iperf3 -c "$NS_B_IP4" -t 3 -f M) ;;
	esac
	ip netns exec "$NS_B" timeout -k 5 "$TMO" "${wrap[@]}" "${srv[@]}" \
		>"$d/server.out" 2>&1 &
	pid=$!
	# The server listens before it takes anything: wait for it.
	for _ in $(seq 1 100); do
		PAIR_SRV_NS=$NS_B port_listening "$([ "$what" = ip ] && echo 5201 || echo 11111)" && break
		sleep 0.1
	done
	ip netns exec "$NS_A" timeout -k 5 "$TMO" "${wrap[@]}" "${cli[@]}" \
		>"$d/client.out" 2>&1
	kill_tree "$pid" TERM
	wait "$pid" 2>/dev/null
	case $what in
	pp) v=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' "$d/client.out") ;;
	tp) v=$(sed -n 's/.*BandWidth is \([0-9.]*\) MBps.*/\1/p' "$d/client.out") ;;
	ip) v=$(awk '/receiver/ { for (i = 1; i < NF; i++) if ($(i + 1) == "MBytes/sec") print $i }' "$d/client.out") ;;
	esac
	echo "${v:-failed}"
}

# mpi DIR KIND NP: mpirun of mpi_bench with NP ranks on this host; KIND
# rc (pml ucx over rc_verbs on sv0, under softverbs run) or tcp (pml ob1,
# btl tcp).  Prints mpi_bench's lines, or nothing.
MPIBIN=$build/bin/mpi_bench
mpi() {
	local d=$1 kind=$2 np=$3 args
	args=(--allow-run-as-root --oversubscribe -np "$np" --bind-to none)
	mkdir -p "$d"
	if [ "$kind" = rc ]; then
		UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=sv0:1 \
			timeout -k 5 "$TMO" "$SV" run mpirun "${args[@]}" \
			--mca pml ucx --mca btl ^openib \
			-x UCX_TLS -x UCX_NET_DEVICES -x UCX_WARN_UNUSED_ENV_VARS \
			"$MPIBIN" 2000 >"$d/out" 2>&1
	else
		timeout -k 5 "$TMO" mpirun "${args[@]}" --mca pml ob1 \
			--mca btl tcp,self --mca btl_tcp_if_include lo \
			"$MPIBIN" 2000 >"$d/out" 2>&1
	fi
	grep -E '^(pingpong_lat|pingpong_bw|allreduce) ' "$d/out"
}

# mpi_ns DIR KIND: mpi_bench with 2 ranks, one in each namespace,
# started the way a cluster's users start it: mpirun (in A) reaches the
# other host through an rsh agent ($TMP/agent.sh: ip netns exec instead
# of ssh), and the ranks talk over the veth -- KIND tcp (pml ob1, btl
# tcp) or rc (pml ucx over rc_verbs on each namespace's sv0).
mpi_ns() {
	local d=$1 kind=$2 args
	mkdir -p "$d"
	cat >"$TMP/agent.sh" <<AGENT
#!/bin/sh
# An rsh agent for mpirun: HOST COMMAND... runs COMMAND in HOST's namespace.
h=\$1
shift
case \$h in
$NS_A_IP4) ns=$NS_A ;;
$NS_B_IP4) ns=$NS_B ;;
*) echo "agent: no namespace has \$h" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
AGENT
	chmod +x "$TMP/agent.sh"
	args=(--allow-run-as-root -np 2 --host "$NS_A_IP4:1,$NS_B_IP4:1"
		--mca plm_rsh_agent "$TMP/agent.sh" --bind-to none
		--mca oob_tcp_if_include 198.51.100.0/24)
	if [ "$kind" = rc ]; then
		UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=sv0:1 \
			ip netns exec "$NS_A" timeout -k 5 "$TMO" "$SV" run mpirun \
			"${args[@]}" --mca pml ucx --mca btl ^openib \
			-x UCX_TLS -x UCX_NET_DEVICES -x UCX_WARN_UNUSED_ENV_VARS \
			-x LD_LIBRARY_PATH -x SOFTVERBS_SOCKET -x SOFTVERBSD -x PATH \
			"$MPIBIN" 2000 >"$d/out" 2>&1
	else
		ip netns exec "$NS_A" timeout -k 5 "$TMO" mpirun "${args[@]}" \
			--mca pml ob1 --mca btl tcp,self \
			--mca btl_tcp_if_include 198.51.100.0/24 \
			"$MPIBIN" 2000 >"$d/out" 2>&1
	fi
	grep -E '^(pingpong_lat|pingpong_bw|allreduce) ' "$d/out"
}

mpi_round() { # ROUND NP
	local r=$1 np=$2 kind what s v u
	for kind in tcp rc; do
		mpi "$TMP/mpi.$kind.$np.$r" "$kind" "$np" >"$TMP/mpi.out"
		if ! [ -s "$TMP/mpi.out" ]; then
			"$SV" daemon stop >/dev/null 2>&1
			val mpi "mpi${np}_pingpong_lat_$kind" 8 usec "$r" failed
			continue
		fi
		while read -r what s v; do
			case $what in pingpong_bw) u=MB/s ;; *) u=usec ;; esac
			val mpi "mpi${np}_${what}_$kind" "$s" "$u" "$r" "$v"
		done <"$TMP/mpi.out"
	done
}

"$SV" daemon start >/dev/null 2>&1
if on host; then
	echo "== one host: UCX posix, then UCX rc_verbs on sv0; $ROUNDS rounds"
	for r in $(seq "$ROUNDS"); do
		echo " round $r"
		ucx_round host "$r" posix tag_lat 8 100000
		ucx_round host "$r" posix ucp_am_lat 8 100000
		for t in tag_bw ucp_put_bw ucp_get stream_bw; do
			ucx_round host "$r" posix "$t" 65536 20000
		done
		# The floor of a put or get between two processes that share
		# no memory: one process_vm_writev/readv a message (UCT's CMA
		# transport, zero copy), what softverbs' direct path pays.
		for t in put_bw get; do
			d=$TMP/host.cma.$t.$r
			if PAIR_DIRECT=1 pairs_run "$d" "$TMO" ucx_perftest -t "$t" \
				-d memory -x cma -D zcopy -s 65536 -n 20000 -w 2000 \
				>/dev/null; then
				v=$(awk '$1 == "Final:" { print $6 }' "$d/client.out")
			else
				v=failed
			fi
			val host "uct_${t}_cma" 65536 MB/s "$r" "${v:-failed}"
		done
	done
fi
if on mpi; then
	if [ -x "$MPIBIN" ] && command -v mpirun >/dev/null; then
		echo "== one host: Open MPI over TCP, then over UCX rc_verbs on sv0; $ROUNDS rounds"
		for r in $(seq "$ROUNDS"); do
			echo " round $r"
			mpi_round "$r" 2
			mpi_round "$r" 4
		done
	else
		echo "== mpi: skipped (no $MPIBIN or mpirun: libopenmpi-dev, openmpi-bin)"
	fi
fi
"$SV" daemon stop >/dev/null 2>&1
if on ns; then
	# shellcheck source=tests/compat/netns_lib.sh
	. "$top/tests/compat/netns_lib.sh"
	if why=$(netns_require); then
		netns_setup || exit 1
		NS_UP=1
		trap cleanup EXIT
		netns_daemon a && netns_daemon b || exit 1
		PAIR_SRV_NS=$NS_B PAIR_CLI_NS=$NS_A PAIR_ADDR=$NS_B_IP4
		echo "== two namespaces: UCX tcp, then UCX rc_verbs; libfabric tcp, then verbs; $ROUNDS rounds"
		for r in $(seq "$ROUNDS"); do
			echo " round $r"
			ucx_round ns "$r" tcp tag_lat 8 20000
			for t in tag_bw ucp_put_bw ucp_get; do
				ucx_round ns "$r" tcp "$t" 65536 5000
			done
			for s in 8 65536; do
				for p in "tcp;ofi_rxm" "verbs;ofi_rxm"; do
					n=$((s > 8 ? 2000 : 10000))
					read -r us mbs < <(fi_pp "$TMP/fi.${p%%;*}.$s.$r" \
						"$p" "$s" $n)
					read -r us0 _ < <(fi_pp "$TMP/fi0.${p%%;*}.$s.$r" \
						"$p" "$s" $FI_SHORT)
					fi_steady ns "fi_pingpong_${p%%;*}" "$s" "$r" \
						"$n" "$us" "$mbs" "$us0"
				done
			done
			if [ -x "$MPIBIN" ] && command -v mpirun >/dev/null; then
				for k in tcp rc; do
					mpi_ns "$TMP/mpins.$k.$r" "$k" >"$TMP/mpi.out"
					[ -s "$TMP/mpi.out" ] ||
						val mpi "mpins_pingpong_lat_$k" 8 usec "$r" failed
					while read -r what sz v; do
						case $what in pingpong_bw) u=MB/s ;; *) u=usec ;; esac
						val mpi "mpins_${what}_$k" "$sz" "$u" "$r" "$v"
					done <"$TMP/mpi.out"
				done
			fi
			if [ -n "$RSPRELOAD" ] && command -v sockperf >/dev/null &&
				command -v iperf3 >/dev/null; then
				for w in pp tp ip; do
					for k in tcp rs; do
						v=$(rsock "$TMP/rs.$w.$k.$r" "$k" "$w")
						case $w in
						pp) val ns "sockperf_pp_$k" 14 usec "$r" "$v" ;;
						tp) val ns "sockperf_tp_$k" 1024 MB/s "$r" "$v" ;;
						ip) val ns "iperf3_$k" - MB/s "$r" "$v" ;;
						esac
					done
				done
			fi
		done
	else
		echo "== ns: skipped ($why)"
	fi
fi

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
{
	printf 'section\twhat\tsize\tunit\tround\tvalue\n'
	cat "$TMP/vals"
} >"$reports/middleware.tsv"
"$PY" "$top/bench/middleware_report.py" "$reports/middleware.tsv" \
	"$reports/middleware.md" "$reports/middleware.png" \
	"$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
	"$ROUNDS" "$LOAD_START" "$LOAD_END" "$(nproc)"
echo "wrote $reports/middleware.md"
