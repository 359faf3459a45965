# SPDX-License-Identifier: MIT
# Two hosts on one machine, for the tests between hosts (issue 9): two
# network namespaces joined by a veth pair, a softverbs daemon in each
# (the daemon's abstract socket belongs to its namespace, so each
# namespace is a host with its own device), and what a lossy network and
# a packet capture need.  Root only.  Source it:
#
#   . tests/compat/netns_lib.sh
#   netns_require || exit 77   # root, ip netns, nft: else says why
#   netns_setup                # A and B up, addresses, MTU 1500, cleanup trap
#   ns_a ping -c1 "$NS_B_IP4"  # a command in A (ns_b: in B)
#   netns_daemon a; netns_daemon b
#   netns_loss b 5             # B drops ~5% of the UDP 4791 packets it gets
#   netns_drop_mad b 0x14      # B drops the first CM MAD (RTU here) it gets
#   netns_capture b FILE       # tcpdump of UDP 4791 on B's veth, until
#   netns_capture_stop         #   stopped (or cleanup); netns_capture_count
#                              #   FILE: packets in it so far
#
# Names carry this shell's pid, so tests run side by side; addresses are
# only from the documentation ranges (RFC 5737, RFC 3849), never a real
# network's:
#   A: 198.51.100.1/24, 2001:db8::1/64 on sva<pid>
#   B: 198.51.100.2/24, 2001:db8::2/64 on svb<pid>
# netns_cleanup (run by the trap on EXIT, INT and TERM; safe to call twice)
# stops the daemons and background commands, and deletes both namespaces,
# which takes the veth pair, the addresses and the nftables rules with
# them.

NS_TAG=${NS_TAG:-$$}
NS_A=svtest-a-$NS_TAG
NS_B=svtest-b-$NS_TAG
NS_IF_A=sva$NS_TAG
NS_IF_B=svb$NS_TAG
NS_A_IP4=198.51.100.1
NS_B_IP4=198.51.100.2
NS_A_IP6=2001:db8::1
NS_B_IP6=2001:db8::2
NS_MTU=1500
# The daemons: this test's socket name in both namespaces (each has its
# own abstract socket namespace, so they do not meet).
export SOFTVERBS_SOCKET=${SOFTVERBS_SOCKET:-svtest.netns.$NS_TAG}
NS_SV=${SOFTVERBS:-${SV_BUILD_DIR:-$(dirname "${BASH_SOURCE[0]}")/../../build}/bin/softverbs}
NS_PIDS=()	   # background commands to stop at cleanup
NS_CAPTURE_PID=

# The reason on stdout and status 1 when this machine cannot run the
# namespace tests (not root, no ip netns, no nftables).
netns_require() {
	if [ "$(id -u)" != 0 ]; then
		echo "SKIP: network namespaces need root (CI runs the tests as root)"
		return 1
	fi
	local t
	for t in ip nft; do
		command -v $t >/dev/null ||
			{ echo "SKIP: $t missing (scripts/deps.sh installs it)"; return 1; }
	done
	if ! ip netns add "svtest-probe-$NS_TAG" 2>/dev/null; then
		echo "SKIP: cannot create network namespaces here (no CAP_SYS_ADMIN?)"
		return 1
	fi
	ip netns del "svtest-probe-$NS_TAG"
	return 0
}

ns_a() { ip netns exec "$NS_A" "$@"; }
ns_b() { ip netns exec "$NS_B" "$@"; }
# ns_name a|b: the namespace's name.
ns_name() {
	case $1 in
	a | A) echo "$NS_A" ;;
	b | B) echo "$NS_B" ;;
	*) echo "netns: no namespace '$1'" >&2; return 2 ;;
	esac
}
# ns_in a|b CMD...
ns_in() {
	local ns
	ns=$(ns_name "$1") || return 2
	shift
	ip netns exec "$ns" "$@"
}

netns_setup() {
	trap netns_cleanup EXIT
	trap 'netns_cleanup; exit 130' INT
	trap 'netns_cleanup; exit 143' TERM
	ip netns add "$NS_A" || return 1
	ip netns add "$NS_B" || return 1
	ip link add "$NS_IF_A" mtu $NS_MTU netns "$NS_A" type veth \
		peer name "$NS_IF_B" mtu $NS_MTU netns "$NS_B" || return 1
	# IPv6 addresses usable at once (nodad): nothing else is on the link.
	ns_a ip addr add "$NS_A_IP4/24" dev "$NS_IF_A" &&
		ns_a ip -6 addr add "$NS_A_IP6/64" dev "$NS_IF_A" nodad &&
		ns_b ip addr add "$NS_B_IP4/24" dev "$NS_IF_B" &&
		ns_b ip -6 addr add "$NS_B_IP6/64" dev "$NS_IF_B" nodad &&
		ns_a ip link set lo up && ns_b ip link set lo up &&
		ns_a ip link set "$NS_IF_A" up && ns_b ip link set "$NS_IF_B" up ||
		return 1
	# The link is up when both ends say so.
	local i
	for i in $(seq 1 100); do
		ns_a ip -o link show "$NS_IF_A" | grep -q "state UP" &&
			ns_b ip -o link show "$NS_IF_B" | grep -q "state UP" && return 0
		sleep 0.05
	done
	echo "netns: the veth pair did not come up" >&2
	return 1
}

# netns_bg a|b CMD...: CMD in the background in that namespace, stopped
# at cleanup; its pid in $NS_LAST_PID (CMD's own: `ip netns exec` execs
# it, and no shell function stands between, so a signal reaches it).
netns_bg() {
	local ns
	ns=$(ns_name "$1") || return 2
	shift
	ip netns exec "$ns" "$@" &
	NS_LAST_PID=$!
	NS_PIDS+=("$NS_LAST_PID")
}

# netns_daemon a|b: the namespace's softverbsd (started, idle timeout off).
netns_daemon() {
	ns_in "$1" env SOFTVERBS_IDLE_TIMEOUT=0 "$NS_SV" daemon start >/dev/null
}

# netns_loss a|b PERCENT: that namespace drops about PERCENT% of the UDP
# packets to port 4791 it receives (nftables: this kernel has no netem).
# netns_loss_dropped a|b prints how many it dropped so far.
netns_loss() {
	ns_in "$1" nft -f - <<EOF
table inet svloss {
	chain input {
		type filter hook input priority 0; policy accept;
		udp dport 4791 numgen random mod 100 < $2 counter drop
	}
}
EOF
}
netns_loss_dropped() {
	ns_in "$1" nft list table inet svloss 2>/dev/null |
		sed -n 's/.*counter packets \([0-9]*\) .*/\1/p'
}
netns_loss_off() { ns_in "$1" nft delete table inet svloss 2>/dev/null; }

# netns_drop_mad a|b ATTR: that namespace drops the first CM MAD with
# attribute ID ATTR (0x10 REQ, 0x11 MRA, 0x12 REJ, 0x13 REP, 0x14 RTU,
# 0x15 DREQ, 0x16 DREP) it receives, and only that one: a loss the CM
# must recover from at a known step.  The match is on the RoCE v2 bytes
# after the UDP header (@th, in bits): BTH 12 + DETH 8, then the MAD
# header, management class at MAD byte 1 (0x07: CM) and attribute ID at
# MAD byte 16.  "Only the first": an nftables quota counts the bytes of
# the packets that reached it (each MAD is one 308-byte IPv4 or 328-byte
# IPv6 packet) and stops matching once the count reaches the limit, so a
# limit of 400 bytes lets exactly one through to the drop.  A second rule
# counts the MADs of that kind let in afterwards (the ones sent again).
# netns_drop_mad_dropped a|b prints how many it dropped (0 or 1),
# netns_drop_mad_passed a|b how many of the kind it let in since.
netns_drop_mad() {
	ns_in "$1" nft -f - <<EOF
table inet svdropmad {
	chain input {
		type filter hook input priority 0; policy accept;
		udp dport 4791 @th,232,8 0x07 @th,352,16 $2 quota until 400 bytes counter drop
		udp dport 4791 @th,232,8 0x07 @th,352,16 $2 counter
	}
}
EOF
}
netns_drop_mad_dropped() {
	ns_in "$1" nft list table inet svdropmad 2>/dev/null |
		sed -n 's/.*counter packets \([0-9]*\) .* drop$/\1/p'
}
netns_drop_mad_passed() {
	ns_in "$1" nft list table inet svdropmad 2>/dev/null |
		sed -n '/drop$/!s/.*counter packets \([0-9]*\) .*/\1/p'
}
netns_drop_mad_off() { ns_in "$1" nft delete table inet svdropmad 2>/dev/null; }

# netns_capture a|b FILE [FILTER]: tcpdump on that namespace's veth (UDP
# 4791 unless FILTER), writing FILE packet by packet, until
# netns_capture_stop.  Returns once it listens.
netns_capture() {
	local which=$1 file=$2 filter=${3:-udp port 4791} dev ns i
	case $which in a | A) dev=$NS_IF_A ;; *) dev=$NS_IF_B ;; esac
	ns=$(ns_name "$which") || return 2
	# Each end of the veth cuts a UDP_SEGMENT train (eng_wire.c
	# "Trains") into its packets as a NIC would, instead of handing the
	# train over whole: the capture shows the datagrams a wire carries.
	ns_a ip link set dev "$NS_IF_A" gso_max_segs 1 2>/dev/null
	ns_b ip link set dev "$NS_IF_B" gso_max_segs 1 2>/dev/null
	# -Z root: write FILE as root (tcpdump would drop to its own user).
	# -s and -B: in --immediate-mode libpcap's ring has fixed slots of
	# the snap length, and its default 2 MiB held 8 of 256 KiB: while
	# two ping-pong programs spun on both CPUs it dropped 978 of 1200
	# packets (tests/compat/wire_capture.sh counts what it captured).
	# 9216 bytes hold a packet of the largest veth MTU we use (9000).
	ip netns exec "$ns" tcpdump -i "$dev" -U --immediate-mode -s 9216 -B 16384 \
		-n -Z root -w "$file" $filter 2>"$file.log" &
	NS_CAPTURE_PID=$!
	for i in $(seq 1 100); do
		grep -q "listening on" "$file.log" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "netns: tcpdump did not start: $(cat "$file.log")" >&2
	return 1
}
# (tcpdump drops what it has not read from its socket yet when stopped:
# wait for what you expect first, netns_capture_count FILE says how many.)
netns_capture_stop() {
	[ -n "$NS_CAPTURE_PID" ] || return 0
	kill -INT "$NS_CAPTURE_PID" 2>/dev/null
	netns_wait "$NS_CAPTURE_PID" tcpdump
	NS_CAPTURE_PID=
}

# netns_wait PID WHAT: waits for our child PID to end, at most 10 s; then
# says so and kills it, so that a cleanup never hangs a test (ctest would
# only report a timeout, with nothing to say where).
netns_wait() {
	local i
	for i in $(seq 1 200); do
		# Gone, or a zombie: it has stopped (the same test as
		# package.sh's alive, which reads a command name with spaces).
		if [ ! -e "/proc/$1" ] ||
			grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; then
			wait "$1" 2>/dev/null
			return 0
		fi
		sleep 0.05
	done
	echo "netns: $2 (pid $1) still runs 10 s after it was told to stop: killed" >&2
	kill -9 "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

netns_capture_count() {
	tcpdump -r "$1" -n 2>/dev/null | wc -l
}

netns_cleanup() {
	local p ns
	netns_capture_stop
	for p in "${NS_PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${NS_PIDS[@]}"; do
		netns_wait "$p" "a background command"
	done
	NS_PIDS=()
	for ns in "$NS_A" "$NS_B"; do
		if ip netns list 2>/dev/null | grep -qw "$ns"; then
			ip netns exec "$ns" "$NS_SV" daemon stop >/dev/null 2>&1
			# Whatever still runs in it (a test's stray program).
			for p in $(ip netns pids "$ns" 2>/dev/null); do
				kill -9 "$p" 2>/dev/null
			done
			ip netns del "$ns" 2>/dev/null
		fi
	done
	# The veth pair goes with the namespaces; make sure of it.
	ip link del "$NS_IF_A" 2>/dev/null
	ip link del "$NS_IF_B" 2>/dev/null
	return 0
}
