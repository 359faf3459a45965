#!/usr/bin/env bash
# Installs what softverbs needs on Debian 12 when it is missing:
# build tools, the system's <infiniband/verbs.h>, and the unmodified RDMA
# programs the tests run (ibverbs-utils, perftest, pyverbs, the rdma_cm
# programs, qperf, libfabric, UCX, Open MPI, infiniband-diags); for the
# package (scripts/package.sh): dpkg-dev and file (CPack's dependency
# list), man-db and bash-completion (its man pages and completion, tested);
# for the wire (issue 9): tshark and python3-scapy (the independent
# decoders of tests/compat/capture.sh), and iproute2, nftables, tcpdump
# and iputils-ping for the network namespaces of tests/compat/netns_*.sh;
# gdb, with which the test runner shows a hung case's stacks
# (tests/lib/sv_test.c).
set -euo pipefail

pkgs=(cmake make gcc libc6-dev pkg-config binutils procps iproute2
      libibverbs-dev ibverbs-utils ibverbs-providers perftest
      python3-pyverbs rdmacm-utils librdmacm1 librdmacm-dev qperf
      libfabric-bin ucx-utils openmpi-bin libopenmpi-dev infiniband-diags
      dpkg-dev file man-db groff-base bsdextrautils bash-completion util-linux
      tshark python3-scapy nftables tcpdump iputils-ping gdb)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "softverbs: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "softverbs: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
# wireshark-common asks whether non-root users may capture: no (the tests
# read files; nothing here captures as a user).
echo "wireshark-common wireshark-common/install-setuid boolean false" |
	$SUDO debconf-set-selections
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
