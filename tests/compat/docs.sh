#!/bin/bash
# SPDX-License-Identifier: MIT
# The documentation travels with the code and agrees with it:
#  - docs/protocol.md and docs/shared-memory.md are what scripts/gen-docs.py
#    makes from the shared headers now (field tables, offsets, sizes);
#  - every relative link in README.md and docs/*.md names a file of the
#    repository (none points outside it, e.g. to ../shared), and no
#    comment or page cites DESIGN.md, STYLE.md or ../shared;
#  - the pages the README promises exist.
set -u

SRC=${SV_SOURCE_DIR:-$(dirname "$0")/../..}
SRC=$(cd "$SRC" && pwd -P)
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok $*"; }

if out=$(/usr/bin/python3 "$SRC/scripts/gen-docs.py" --check 2>&1); then
	ok "docs/protocol.md and docs/shared-memory.md match the headers"
else
	fail "generated docs are stale:"
	echo "$out" | head -60
fi

for f in architecture.md protocol.md shared-memory.md adding-a-verb.md; do
	[ -s "$SRC/docs/$f" ] && ok "docs/$f" || fail "docs/$f missing"
done

# Markdown links [text](target): relative targets must exist inside SRC.
for md in "$SRC/README.md" "$SRC"/docs/*.md; do
	dir=$(dirname "$md")
	while IFS= read -r t; do
		t=${t%%#*}
		[ -z "$t" ] && continue
		case $t in
		http://* | https://* | mailto:*) continue ;;
		esac
		p=$(realpath -m "$dir/$t")
		case $p in
		"$SRC"/*) [ -e "$p" ] && continue
			fail "${md#"$SRC"/}: link to $t: no such file" ;;
		*) fail "${md#"$SRC"/}: link to $t leaves the repository" ;;
		esac
	done < <(grep -oE '\]\([^)]+\)' "$md" | sed 's/^](//; s/)$//')
done
grep -nE '\.\./shared|DESIGN\.md|STYLE\.md' "$SRC/README.md" &&
	fail "README.md still points to files outside the repository"
# Comments and pages cite files a clone has: no design notes kept outside
# the repository (DESIGN.md, STYLE.md, ../shared).
if out=$(grep -rnE '\.\./shared|DESIGN\.md|STYLE\.md' "$SRC/src" "$SRC/docs" \
	"$SRC/tests" "$SRC/scripts" "$SRC/bench" --exclude=docs.sh 2>/dev/null); then
	fail "these cite files a clone does not have:"
	echo "$out" | head -20
else
	ok "no comment or page cites a file outside the repository"
fi
grep -q '](docs/architecture.md)' "$SRC/README.md" &&
	ok "README.md links docs/architecture.md" || fail "README.md does not link docs/architecture.md"

echo "$fails failed"
[ $fails = 0 ]
