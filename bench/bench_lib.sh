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

# apt_want PKG...: installs the missing ones (root or sudo), like
# scripts/deps.sh; a failure only costs the comparison, not the run.
apt_want() {
	local p missing=() sudo=
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || { echo "bench: not root and no sudo: skipping ${missing[*]}" >&2; return 1; }
		sudo=sudo
	fi
	echo "bench: installing ${missing[*]}" >&2
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		{ $sudo apt-get update -qq >/dev/null 2>&1 &&
			$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; } ||
		{ echo "bench: could not install ${missing[*]}" >&2; return 1; }
}
