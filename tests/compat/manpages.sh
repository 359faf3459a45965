#!/bin/bash
# SPDX-License-Identifier: MIT
# Man pages and bash completion agree with the command.
#  - softverbs(1) holds, line for line, `softverbs --help` and the --help of
#    every command that --help lists; softverbsd(8) holds `softverbsd
#    --help`; groff renders both without warnings.
#  - The ENVIRONMENT sections hold every variable of docs/environment.md
#    (its tables before "Tests and benchmarks"); every SOFTVERBS* variable
#    the sources read (getenv) or a --help text names is in those tables.
#  - Installed (`cmake --install`), `man softverbs` and `man 8 softverbsd`
#    find them, and bash-completion's loader finds the completion.
#  - Completion offers each command, each command's words and options as
#    its --help shows them, and hands over to the program after `run`.
set -u

BUILD=${SV_BUILD_DIR:-$(dirname "$0")/../../build}
BUILD=$(cd "$BUILD" && pwd -P)
SRC=${SV_SOURCE_DIR:-$(dirname "$0")/../..}
SV=$BUILD/bin/softverbs
export SOFTVERBS_SOCKET=svtest.man.$$
unset SOFTVERBSD SOFTVERBS_LIBDIR LD_LIBRARY_PATH
TMP=$(mktemp -d)
fails=0
trap 'rm -rf "$TMP"' EXIT

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() { echo "ok $*"; }

command -v man >/dev/null || { echo "SKIP: man (man-db) is not installed"; exit 77; }

# Renders a man page as plain text, one space between words (so section
# headings are the only lines without a leading space).
render() {
	LC_ALL=C.UTF-8 MANWIDTH=200 man -l "$1" 2>/dev/null | col -bx | tr -s ' \t' ' '
}

# contains_help TEXTFILE WHAT CMD...: each line of CMD's output is a line
# of TEXTFILE (blanks squeezed).
contains_help() {
	local text=$1 what=$2 line missing=0
	shift 2
	while IFS= read -r line; do
		[ -z "$line" ] && continue
		if ! grep -qxF -- "$line" "$text"; then
			fail "$what: '$line' is not in the man page"
			missing=1
		fi
	done < <("$@" | tr -s ' \t' ' ' | sed 's/^ //; s/ $//')
	[ $missing = 0 ] && ok "$what: every line is in the man page"
}

for page in softverbs.1 softverbsd.8; do
	f=$BUILD/man/$page
	[ -s "$f" ] && [ -s "$f.gz" ] && ok "built $page(.gz)" || fail "$f or $f.gz missing"
	w=$(LC_ALL=C MANWIDTH=80 man --warnings -l "$f" 2>&1 >/dev/null)
	[ -z "$w" ] && ok "$page renders without warnings" || fail "$page: $w"
done
render "$BUILD/man/softverbs.1" >"$TMP/sv.raw"
render "$BUILD/man/softverbsd.8" >"$TMP/svd.raw"
for page in sv svd; do
	sed 's/^ //; s/ $//' "$TMP/$page.raw" >"$TMP/$page.txt"
done

contains_help "$TMP/sv.txt" "softverbs --help" "$SV" --help
cmds=$("$SV" --help | awk '/^commands:/ { f = 1; next } f && /^  [a-z]/ { print $1 } f && /^$/ { exit }')
[ -n "$cmds" ] && ok "commands: $(echo $cmds)" || fail "no commands in softverbs --help"
for c in $cmds; do
	contains_help "$TMP/sv.txt" "softverbs $c --help" "$SV" "$c" --help
	grep -qE "^softverbs $c( |$)" "$TMP/sv.txt" && ok "softverbs(1) has a section for $c" ||
		fail "softverbs(1) has no section for $c"
done
contains_help "$TMP/svd.txt" "softverbsd --help" "$BUILD/bin/softverbsd" --help

# Environment: docs/environment.md <-> man pages <-> sources <-> --help texts.
awk -F'|' '/^## Tests/ { exit } /^\|/ && $2 !~ /^ *variable *$/ && $2 !~ /^-+$/ { print $2 }' \
	"$SRC/docs/environment.md" | grep -oE '[A-Z][A-Z0-9_]+' | sort -u >"$TMP/doc_env"
[ -s "$TMP/doc_env" ] && ok "docs/environment.md: $(tr '\n' ' ' <"$TMP/doc_env")" ||
	fail "no variables in docs/environment.md"
bad=0
for page in sv svd; do
	sed -n '/^ENVIRONMENT$/,/^[A-Z]/p' "$TMP/$page.raw" >"$TMP/$page.env"
	while read -r v; do
		grep -qw -- "$v" "$TMP/$page.env" && continue
		fail "$v (docs/environment.md) is not in the ENVIRONMENT of $page"
		bad=1
	done <"$TMP/doc_env"
done
[ $bad = 0 ] && ok "every variable of docs/environment.md is in both ENVIRONMENT sections"
grep -rhoE '(secure_)?getenv\("SOFTVERBS[A-Z0-9_]*"\)' "$SRC/src" | grep -oE 'SOFTVERBS[A-Z0-9_]*' |
	sort -u >"$TMP/src_env"
{ "$SV" --help; for c in $cmds; do "$SV" "$c" --help; done; "$BUILD/bin/softverbsd" --help; } |
	grep -oE 'SOFTVERBS[A-Z0-9_]*' | sort -u >"$TMP/help_env"
bad=0
for v in $(sort -u "$TMP/src_env" "$TMP/help_env"); do
	grep -qx -- "$v" "$TMP/doc_env" && continue
	fail "$v is read by the code or named by --help but missing from docs/environment.md"
	bad=1
done
[ $bad = 0 ] && ok "the sources read $(wc -l <"$TMP/src_env") SOFTVERBS* variables, all documented"

# Installed: man finds the pages; bash-completion finds the completion.
if cmake --install "$BUILD" --prefix "$TMP/p" >"$TMP/out" 2>&1; then
	P=$(cd "$TMP/p" && pwd -P)
	w=$(MANPATH=$P/share/man man -w softverbs 2>&1)
	[ "$w" = "$P/share/man/man1/softverbs.1.gz" ] && ok "man -w softverbs finds the installed page" ||
		fail "man -w softverbs: $w"
	MANPATH=$P/share/man LC_ALL=C.UTF-8 MANWIDTH=200 man softverbs 2>/dev/null | col -bx |
		tr -s ' \t' ' ' >"$TMP/inst.txt"
	cmp -s "$TMP/inst.txt" "$TMP/sv.raw" && ok "man softverbs shows the page of this build" ||
		fail "man softverbs differs from the build's page"
	MANPATH=$P/share/man man 8 softverbsd 2>/dev/null | grep -q "softverbsd - the softverbs device daemon" &&
		ok "man 8 softverbsd" || fail "man 8 softverbsd"
	comp=$P/share/bash-completion/completions/softverbs
	[ -f "$comp" ] && ok "completion installed" || fail "no $comp"
	if [ -f /usr/share/bash-completion/bash_completion ]; then
		out=$(XDG_DATA_DIRS=$P/share PATH=$BUILD/bin:$PATH bash -c '
			. /usr/share/bash-completion/bash_completion
			__load_completion softverbs && complete -p softverbs' 2>&1)
		grep -q "_softverbs softverbs" <<<"$out" &&
			ok "bash-completion loads it from PREFIX/share" || fail "bash-completion: $out"
	fi
else
	fail "cmake --install: $(cat "$TMP/out")"
fi

# Completion, word by word, with the build's command on PATH.
cat >"$TMP/comp.sh" <<'EOS'
[ -f /usr/share/bash-completion/bash_completion ] && . /usr/share/bash-completion/bash_completion
. "$1"
shift
COMP_WORDS=("$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
_softverbs
printf '%s\n' "${COMPREPLY[@]}" | sort -u | tr '\n' ' '
EOS
# expect_comp "WANTED WORDS" WORDS...: completion of the last word is
# exactly the wanted set.
expect_comp() {
	local want got
	want=$(printf '%s\n' $1 | sort -u | tr '\n' ' ')
	shift
	got=$(PATH=$BUILD/bin:$PATH bash "$TMP/comp.sh" \
		"$SRC/packaging/bash-completion/softverbs" "$@" 2>/dev/null)
	[ "$got" = "$want" ] && ok "complete '$*': $got" ||
		fail "complete '$*': got '$got', expected '$want'"
}
expect_comp "$cmds --help --version" softverbs ""
expect_comp "devices" softverbs dev
expect_comp "start status stop --help" softverbs daemon ""
expect_comp "--json --help" softverbs daemon status ""
expect_comp "--help" softverbs daemon stop ""
expect_comp "show --help" softverbs res ""
types=$("$SV" res --help | sed -n 's/.*res show \[\([a-z_|]*\)\].*/\1/p' | tr '|' ' ')
[ -n "$types" ] || fail "no object types in softverbs res --help"
expect_comp "$types --json --help" softverbs res show ""
expect_comp "--json --help" softverbs res show pd ""
expect_comp "$types --help" softverbs res show --json ""
expect_comp "--json" softverbs devices --j
expect_comp "ibv_devices ibv_devinfo" softverbs run ibv_devi
expect_comp "-- --help" softverbs run -
if [ -f /usr/share/bash-completion/bash_completion ]; then
	# After run, the program's own completion (ours, here).
	expect_comp "start status stop" softverbs run softverbs daemon st
	expect_comp "start status stop" softverbs run -- softverbs daemon st
fi

echo "$fails failed"
[ $fails = 0 ]
