#!/bin/bash
# SPDX-License-Identifier: MIT
# The documentation travels with the code and agrees with it:
#  - docs/protocol.md and docs/shared-memory.md are what scripts/gen-docs.py
#    makes from the shared headers now (field tables, offsets, sizes);
#  - every relative link in README.md and docs/*.md names a file of the
#    repository (none points outside it, e.g. to ../shared), and no
#    comment or page cites DESIGN.md, STYLE.md or ../shared;
#  - the pages the README promises exist;
#  - every reference resolves (check_refs below): a markdown link's file
#    and #anchor, a path of the repository named in a comment or a page
#    (src/engine/engine.c, docs/wire.md, bench/reports/dp.md, ...), and a
#    section named after a file (docs/wire.md "Who owns port 4791",
#    sv_proto.h "Capture", README "Install"): a heading of the page; in a
#    source file, a comment paragraph or divider that starts with those
#    words, or the identifier named;
#  - every environment variable the sources read is in docs/environment.md.
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

for f in architecture.md protocol.md shared-memory.md adding-a-verb.md user-guide.md \
	environment.md verbs.md differences.md benchmarks.md; do
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

# Every reference resolves.  Prints one line per dangling reference.
check_refs() {
	/usr/bin/python3 - "$SRC" <<'PY'
import os, re, sys

top = sys.argv[1]
bad = []
texts = {}
skip_dirs = {".git", "__pycache__"}


def read(path):
    if path not in texts:
        try:
            with open(path, encoding="utf-8") as f:
                texts[path] = f.read()
        except (UnicodeDecodeError, OSError):
            texts[path] = None
    return texts[path]


def walk(d):
    for root, dirs, files in os.walk(os.path.join(top, d)):
        dirs[:] = sorted(x for x in dirs
                         if x not in skip_dirs and not x.startswith("build"))
        for f in sorted(files):
            yield os.path.join(root, f)


by_name = {}
for d in ("src", "tests", "bench", "scripts", "cmake", "packaging", "docs"):
    for f in walk(d):
        by_name.setdefault(os.path.basename(f), []).append(f)
by_name.setdefault("README.md", []).append(os.path.join(top, "README.md"))


def slug(h):
    h = h.strip().lower().replace("`", "")
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def headings(path):
    t = read(path) or ""
    t = re.sub(r"^```.*?^```", "", t, flags=re.S | re.M)
    return [m.group(1).strip() for m in re.finditer(r"^#+ +(.*)$", t, re.M)]


def has_section(path, sec):
    want = sec.lower().replace("`", "")
    if path.endswith(".md"):
        return any(h.replace("`", "").lower().startswith(want)
                   for h in headings(path))
    t = read(path) or ""
    pat = r"^\s*(?:/\*+|\*|#)[\s-]*" + re.escape(sec) + r"(?![\w])"
    if re.search(pat, t, re.M | re.I):
        return True
    return re.fullmatch(r"[a-z_][a-z0-9_]*", sec) is not None and \
        re.search(r"\b" + sec + r"\b", t) is not None


def rel(p):
    return os.path.relpath(p, top)


# (a) markdown links, with anchors.
pages = [os.path.join(top, "README.md")]
pages += sorted(f for f in walk("docs") if f.endswith(".md"))
pages += sorted(f for f in walk("bench/reports") if f.endswith(".md"))
for md in pages:
    text = re.sub(r"^```.*?^```", "", read(md) or "", flags=re.S | re.M)
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        t = m.group(1)
        if re.match(r"[a-z]+:", t):
            continue
        path, _, anchor = t.partition("#")
        target = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if not os.path.exists(target):
            bad.append(f"{rel(md)}: link to {t}: no such file")
        elif anchor and target.endswith(".md") and \
                anchor not in [slug(h) for h in headings(target)]:
            bad.append(f"{rel(md)}: link to {t}: no heading #{anchor} in {rel(target)}")

# (b) paths of the repository, (c) sections named after a file.
path_re = re.compile(r"(?<![\w./$@{-])((?:src|docs|bench|tests|scripts|cmake|packaging)"
                     r"/(?:[\w.*/-]|\[\w+\])*(?:[\w*/]|\[\w+\]))")
# NAME "Section", also with a comma, a parenthesis or a comment's line
# break between them.
sec_re = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.(?:md|c|h)|README(?:\.md)?|DESIGN(?:\.md)?)"
                    r",?(?: |\n\s*(?:\*|#)?\s*)\(?\"([^\"\n]{2,60})\"")
sources = []
for d in ("src", "tests", "bench", "scripts"):
    sources += [f for f in walk(d) if not f.endswith((".png", ".tsv"))]
sources += pages
import glob
for f in sources:
    text = read(f)
    if text is None:
        continue
    for n, line in enumerate(text.split("\n"), 1):
        for m in path_re.finditer(line):
            p = m.group(1).rstrip(".")
            if "$" in p or "{" in p:
                continue
            if not glob.glob(os.path.join(top, p)):
                bad.append(f"{rel(f)}:{n}: {p}: no such file")
    for m in sec_re.finditer(text):
        n = text.count("\n", 0, m.start()) + 1
        name, sec = m.group(1), m.group(2)
        if name.startswith("DESIGN"):
            bad.append(f"{rel(f)}:{n}: {name} \"{sec}\": there is no DESIGN document")
            continue
        if name == "README":
            name = "README.md"
        if "/" in name:
            cands = [os.path.join(top, name)]
        else:
            cands = by_name.get(name, [])
        cands = [c for c in cands if os.path.exists(c)]
        if not cands:
            bad.append(f"{rel(f)}:{n}: {name} \"{sec}\": no such file")
        elif not any(has_section(c, sec) for c in cands):
            bad.append(f"{rel(f)}:{n}: {name} \"{sec}\": no such section")
for b in bad:
    print(b)
PY
}
if out=$(check_refs) && [ -z "$out" ]; then
	ok "every link, path and section named in README.md, docs/, src/, tests/, bench/ and scripts/ exists"
else
	fail "dangling references:"
	echo "$out" | head -60
fi

# Every environment variable the sources read is documented, in a table
# row of docs/environment.md.
missing=
for v in $(grep -rhoE '(secure_getenv|getenv|env_set)\("[A-Za-z_0-9]+"\)' "$SRC/src" |
	sed 's/.*("//; s/")//' | sort -u); do
	grep -qE "^\| [^|]*\`$v\`" "$SRC/docs/environment.md" || missing="$missing $v"
done
[ -z "$missing" ] && ok "every variable src/ reads is in docs/environment.md" ||
	fail "read by src/ but not in docs/environment.md:$missing"

echo "$fails failed"
[ $fails = 0 ]
