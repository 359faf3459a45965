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
