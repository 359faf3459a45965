#!/usr/bin/env bash
# Builds the Debian package of softverbs: the normal build into build/
# (scripts/build.sh), then CPack.  Prints the path of the .deb.
# Install it with `apt install ./build/softverbs_*.deb` (or dpkg -i),
# remove it with `dpkg -r softverbs`.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh" "$top/build"
(cd "$top/build" && cpack --config CPackConfig.cmake >/dev/null)
ls -1t "$top"/build/softverbs_*.deb | head -1
