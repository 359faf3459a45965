#!/usr/bin/env bash
# The main job: build softverbs and run real, unmodified RDMA programs on
# the software device.  No RDMA hardware, kernel module or root needed at
# run time.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh"
sv="$top/build/bin/softverbs"

echo "== softverbs run ibv_devices"
"$sv" run ibv_devices
echo "== softverbs run ibv_devinfo -v"
"$sv" run ibv_devinfo -v
echo "== softverbs devices"
"$sv" devices
echo "== softverbs daemon status"
"$sv" daemon status

# A real ping-pong between two processes through the device: Debian's
# unmodified ibv_rc_pingpong, server in the background, client to 127.0.0.1,
# both bounded in time.  pingpong_must_pass=0 would make a failure here a
# notice instead of an error (how it was before the data path landed).
pingpong_must_pass=1
SV=$sv # used by pairs_lib.sh
# shellcheck source=tests/compat/pairs_lib.sh
. "$top/tests/compat/pairs_lib.sh"
pp=$(mktemp -d)
trap 'rm -rf "$pp"' EXIT
echo "== softverbs run ibv_rc_pingpong -g 0  (server, background)"
echo "== softverbs run ibv_rc_pingpong -g 0 127.0.0.1  (client)"
if pairs_run "$pp" 30 ibv_rc_pingpong -g 0; then
  echo "-- server (port $PAIR_PORT):"; cat "$pp/server.out"
  echo "-- client:"; cat "$pp/client.out"
else
  echo "-- server (port $PAIR_PORT, exit $PAIR_SRV_RC):"; cat "$pp/server.out"
  echo "-- client (exit $PAIR_CLI_RC):"; cat "$pp/client.out"
  if [ "$pingpong_must_pass" = 1 ]; then
    echo "softverbs: ibv_rc_pingpong failed" >&2
    exit 1
  fi
  echo "(the data path is not complete yet: the ping-pong does not run)"
fi
