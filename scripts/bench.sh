#!/usr/bin/env bash
# Builds and runs the benchmarks; reports land in bench/reports/:
# ctrl.md (control path), perf.md / perf.png / perf.tsv (data path) and
# rdmacm.md (UCX over rc_verbs beside UCX posix).
# Arguments go to the data-path benchmark (e.g. --quick).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/deps.sh"
"$top/scripts/build.sh" "$top/build-bench" -DCMAKE_BUILD_TYPE=Release
export SOFTVERBSD="$top/build-bench/bin/softverbsd"
export SOFTVERBS_SOCKET="svbench.$$"
export SV_SOURCE_DIR="$top"
"$top/build-bench/bin/ctrl_bench"
"$top/build-bench/bin/softverbs" daemon stop >/dev/null 2>&1 || true
SOFTVERBS="$top/build-bench/bin/softverbs" "$top/bench/perf_bench.sh" "$@"
SOFTVERBS="$top/build-bench/bin/softverbs" "$top/bench/rdmacm_bench.sh"
SOFTVERBS="$top/build-bench/bin/softverbs" "$top/bench/dp_bench.sh" "$@"
SOFTVERBS="$top/build-bench/bin/softverbs" "$top/bench/wire_bench.sh"
