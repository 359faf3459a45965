#!/bin/sh
# SPDX-License-Identifier: MIT
# Writes a man page from its template (docs/man/*.in), filling the parts
# that have a source of truth elsewhere, so the page cannot disagree with
# them:
#   @VERSION@      the build id (`softverbs --version`, first line)
#   @HELP PROG ARGS...@  the --help output of a built binary, verbatim
#   @COMMANDS@     one subsection per command that `softverbs --help` lists,
#                  holding that command's own `softverbs CMD --help`
#   @ENVIRONMENT@  the README's environment table, in man form
# usage: gen_man.sh TEMPLATE OUT BINDIR README
set -eu
tmpl=$1 out=$2 bindir=$3 readme=$4
sv=$bindir/softverbs

# The help of a binary never starts the daemon; keep it from logging.
export SOFTVERBS_LOG=error

# roff-escapes preformatted text: backslashes, leading dots and quotes,
# minus signs (so that options copy and paste as ASCII).
esc() {
	sed -e 's/\\/\\e/g' -e 's/^\([.'\'']\)/\\\&\1/' -e 's/-/\\-/g'
}

# Verbatim help text of "$@".
help_block() {
	echo ".nf"
	"$@" --help | esc
	echo ".fi"
}

commands() {
	"$sv" --help | awk '/^commands:/ { f = 1; next }
		f && /^  [a-z]/ { sub(/^  /, ""); sub(/  +[^ ].*$/, ""); print }
		f && /^$/ { exit }' |
	while read -r cmd args; do
		printf '.SS "softverbs %s' "$cmd"
		[ -n "$args" ] && printf ' %s' "$args" | sed 's/\\/\\e/g; s/-/\\-/g'
		printf '"\n'
		help_block "$sv" "$cmd"
	done
}

# The README's table after the line "Environment:": | `VAR`, ... | text |
environment() {
	awk '/^Environment:$/ { f = 1; next }
		f && /^\|/ { t = 1; print; next }
		t { exit }' "$readme" |
	sed -n '3,$p' |
	sed -e 's/\\/\\e/g' -e 's/-/\\-/g' |
	sed -e 's/^| *\(.*[^ ]\) *| *\(.*[^ ]\) *|$/.TP\n\1\n\2/' |
	sed -e 's/`\([^`]*\)`/\\fB\1\\fR/g' -e 's/^\([.'\'']\)\([^T]\)/\\\&\1\2/'
}

version=$("$sv" --version 2>/dev/null | sed -n '1s/^softverbs \(.*\), protocol.*/\1/p')
while IFS= read -r line; do
	case $line in
	@COMMANDS@) commands ;;
	@ENVIRONMENT@) environment ;;
	@HELP\ *@)
		set -- $(echo "$line" | sed 's/^@HELP \(.*\)@$/\1/')
		prog=$1
		shift
		help_block "$bindir/$prog" "$@" ;;
	*) printf '%s\n' "$line" | sed "s/@VERSION@/$version/g" ;;
	esac
done <"$tmpl" >"$out.tmp"
mv "$out.tmp" "$out"
