# shellcheck shell=bash disable=SC2034,SC2154 # sets/uses the caller's variables
# SPDX-License-Identifier: MIT
# What the benchmark scripts share.  Source it with $top set to the
# repository.

# bench_build: the build to measure, SOFTVERBS's tree (SOFTVERBS=
# .../bin/softverbs) or else a Release tree built in build-bench/ (the
# packages it needs installed first).  Sets reports (bench/reports),
# build, SV (the softverbs command) and exports SOFTVERBSD.
bench_build() {
	reports=$top/bench/reports
	if [ -n "${SOFTVERBS:-}" ]; then
		build=$(cd "$(dirname "$SOFTVERBS")/.." && pwd)
	else
		build=$top/build-bench
		"$top/scripts/deps.sh" || exit 1
		"$top/scripts/build.sh" "$build" -DCMAKE_BUILD_TYPE=Release || exit 1
	fi
	SV=$build/bin/softverbs
	export SOFTVERBSD=$build/bin/softverbsd
}
