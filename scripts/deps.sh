#!/usr/bin/env bash
# Installs what softverbs needs on Debian 12 when it is missing:
# build tools, the system's <infiniband/verbs.h>, and the unmodified RDMA
# programs the tests run (ibverbs-utils, perftest, pyverbs, the rdma_cm
# programs, qperf, libfabric, UCX, Open MPI, infiniband-diags); for the
# package (scripts/package.sh): dpkg-dev and file (CPack's dependency
# list), man-db and bash-completion (its man pages and completion, tested).
set -euo pipefail

pkgs=(cmake make gcc libc6-dev pkg-config binutils procps iproute2
      libibverbs-dev ibverbs-utils ibverbs-providers perftest
      python3-pyverbs rdmacm-utils librdmacm1 librdmacm-dev qperf
      libfabric-bin ucx-utils openmpi-bin libopenmpi-dev infiniband-diags
      dpkg-dev file man-db groff-base bsdextrautils bash-completion util-linux)
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
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
