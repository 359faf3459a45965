#!/bin/sh
# SPDX-License-Identifier: MIT
# Writes a man page from its template (docs/man/*.in), filling the parts
# that have a source of truth elsewhere, so the page cannot disagree with
# them:
#   @VERSION@      the build id (`softverbs --version`, first line)
#   @HELP PROG ARGS...@  the --help output of a built binary, verbatim
#   @COMMANDS@     one subsection per command that `softverbs --help` lists,
#                  holding that command's own `softverbs CMD --help`
#   @ENVIRONMENT@  the variables of docs/environment.md, in man form
# usage: gen_man.sh TEMPLATE OUT BINDIR ENVIRONMENT_MD
set -eu
tmpl=$1 out=$2 bindir=$3 envmd=$4
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

# The rows of docs/environment.md's tables before its section "Tests and
# benchmarks": | `VAR`, ... | default | meaning |, each as a tagged
# paragraph (the default, when there is one, after the meaning; links
# keep their text).
environment() {
	awk -F'|' '/^## Tests/ { exit }
		/^\|/ && $2 !~ /^ *variable *$/ && $2 !~ /^-+$/ {
			v = $2; d = $3; m = $4
			gsub(/^ +| +$/, "", v); gsub(/^ +| +$/, "", d)
			gsub(/^ +| +$/, "", m)
			print ".TP"; print v
			if (d != "") m = m " Default: " d "."
			print m
		}' "$envmd" |
	sed -e 's/\[\([^]]*\)\]([^)]*)/\1/g' |
	sed -e 's/\\/\\e/g' -e 's/-/\\-/g' |
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
