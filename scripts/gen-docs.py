#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes the generated reference pages of docs/ from the shared headers.

    docs/protocol.md      <- src/common/sv_proto.h  (control protocol),
                             src/common/sv_roce.h   (RoCE v2 frames: capture)
    docs/shared-memory.md <- src/common/sv_ring.h, src/common/sv_keytab.h
    docs/queues.md        <- src/common/sv_shm.h (CQ, receive queues, QP block)

The headers are the truth: their comments (the design notes at the top,
the field tables above the structs, trailing field comments) become the
text, and a small C program compiled against the same headers gives every
field's offset and size, so the tables show the layout the compiler
really makes.  The test `docs_generated` fails when the committed pages
differ from what this script writes: after changing one of the headers,
run

    scripts/gen-docs.py            # rewrite docs/protocol.md, docs/shared-memory.md
    scripts/gen-docs.py --check    # exit 1 and show the diff if stale

Needs a C compiler and the system's <infiniband/verbs.h>.
"""
import difflib
import os
import re
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMON = os.path.join(TOP, "src", "common")
ENGINE = os.path.join(TOP, "src", "engine")


def header_path(h):
    """Headers live in src/common, the engine's shared layouts in src/engine."""
    p = os.path.join(COMMON, h)
    return p if os.path.exists(p) else os.path.join(ENGINE, h)


def header_rel(h):
    return os.path.relpath(header_path(h), TOP)

# Shared-memory structs (the private producer/consumer views are not).
PAGES = {
    "docs/protocol.md": {
        "title": "Control protocol",
        "headers": ["sv_proto.h", "sv_proto_cap.h", "sv_proto_fault.h", "sv_roce.h"],
        "structs": None,  # all of them
        "intro": (
            "How `libibverbs.so.1` and the `softverbs` command talk to "
            "`softverbsd`: one `SOCK_SEQPACKET` connection per process, one "
            "request and one reply at a time.  See "
            "[architecture.md](architecture.md) for where each op is used."
        ),
    },
    "docs/shared-memory.md": {
        "title": "Shared-memory layouts",
        "headers": ["sv_ring.h", "sv_keytab.h"],
        "structs": ["sv_ring_hdr", "sv_rec_hdr", "sv_keytab_hdr", "sv_keytab_port", "sv_keytab_gid", "sv_key_entry"],
        "intro": (
            "The regions two processes map at once: the rings between "
            "engines (one memfd per link direction) and the key table the "
            "daemon publishes to every engine.  See "
            "[architecture.md](architecture.md) for who creates and maps "
            "them."
        ),
    },
    "docs/queues.md": {
        "title": "Queues in shared memory",
        "headers": ["sv_shm.h"],
        "structs": ["sv_shm_hdr", "sv_cq_shm", "sv_recv_wqe", "sv_rq_shm",
                    "sv_srq_shm", "sv_qp_shm"],
        "intro": (
            "The queues a NIC would read and write in host memory: "
            "completion queues, receive queues, SRQs and each QP's "
            "responder block, one sealed memfd each, mapped by every "
            "engine that delivers to the QP.  See "
            "[architecture.md](architecture.md) for how direct execution "
            "uses them."
        ),
    },
}


def strip_comment(text):
    """The text of a /* ... */ block, without the stars."""
    text = re.sub(r"^\s*/\*+", "", text)
    text = re.sub(r"\*+/\s*$", "", text)
    lines = [re.sub(r"^\s*\* ?", "", l) for l in text.split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def md_escape(s):
    return s.replace("|", "\\|")


def file_comment(src):
    """The first block comment after the SPDX line: the header's design."""
    m = re.search(r"/\* SPDX[^\n]*\*/\s*(/\*.*?\*/)", src, re.S)
    return strip_comment(m.group(1)) if m else []


def parse_structs(src):
    """[(name, comment_lines, [(type, name, trailing comment)])] in order."""
    out = []
    for m in re.finditer(
        r"(?:(/\*(?:(?!\*/).)*\*/)\s*)?^struct (\w+) \{\n(.*?)^\};", src, re.S | re.M
    ):
        comment, name, body = m.group(1), m.group(2), m.group(3)
        # Only a comment that ends right above the struct belongs to it.
        fields = []
        pending = None
        for line in body.split("\n"):
            fm = re.match(r"\s*([^;/]*?)\s*\b(\w+)((?:\[[^\]]*\])*)\s*;\s*(?:/\*\s*(.*?)\s*(\*/)?)?\s*$", line)
            if fm:
                typ, fname, dims, trail, closed = fm.groups()
                fields.append([typ.strip(), fname, dims, (trail or "").strip()])
                pending = fields[-1] if trail and not closed else None
                continue
            cm = re.match(r"\s*(?:\*\s*)?(.*?)\s*(\*/)?\s*$", line)
            if pending is not None and cm:
                pending[3] += " " + cm.group(1)
                if cm.group(2):
                    pending = None
        out.append((name, strip_comment(comment) if comment else [], fields))
    return out


def table_meanings(comment, names):
    """Field -> meaning from the '| field | meaning |' rows of a comment.

    Rows may hold several pairs on one line ('| a | x | b | y |'); a cell
    that is a field name starts a pair.  Extra columns (e.g. 'written by')
    are appended as 'column: value'."""
    text = " ".join(comment) if comment else ""
    rows = [l for l in comment if l.strip().startswith("|")]
    mean = {}
    header = None
    last = None
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if all(re.fullmatch(r"-*", c) for c in cells):
            continue
        if header is None and cells and cells[0] == "field":
            header = cells
            continue
        keys = [k.strip() for k in cells[0].split(",")] if cells else []
        if cells and cells[0] == "" and last:
            for k in last:
                mean[k] += " " + " ".join(c for c in cells[1:] if c)
            continue
        if (
            keys
            and all(k in names for k in keys)
            and last
            and mean[last[0]].count("(") > mean[last[0]].count(")")
            and len(cells) > 1
            and cells[1][:1].islower()
        ):
            # A sentence running on over the next field's row: it is one
            # meaning for both ("| a | x (y z |" then "| b |  w) |").
            for k in last:
                mean[k] += " " + cells[1]
            for k in keys:
                mean[k] = mean[last[0]]
            last = last + keys
            continue
        if keys and all(k in names for k in keys) and header and len(header) > 2:
            mi = header.index("meaning") if "meaning" in header else 1
            text_ = cells[mi] if len(cells) > mi else ""
            # Other columns, except those the generated table has itself.
            extra = [
                "%s: %s" % (header[i], cells[i])
                for i in range(1, min(len(header), len(cells)))
                if i != mi and cells[i] and header[i] not in ("size", "offset")
            ]
            if extra:
                text_ += " (" + "; ".join(extra) + ")"
            for k in keys:
                mean[k] = text_
            last = keys
            continue
        # Pairs: name cell, then meaning cells up to the next name.
        cur = None
        for c in cells:
            ks = [k.strip() for k in c.split(",")]
            if c and all(k in names for k in ks) and (cur is None or mean[cur[0]]):
                cur = ks
                for k in ks:
                    mean[k] = ""
            elif cur is not None:
                for k in cur:
                    mean[k] = (mean[k] + " | " + c) if mean[k] else c
        if cur:
            last = cur
    return {k: v.strip() for k, v in mean.items()}


def parse_enums(src):
    """[(enum name, [(member, comment)])] for named enums."""
    out = []
    for m in re.finditer(r"^enum (\w+) \{\n(.*?)^\};", src, re.S | re.M):
        name, body = m.group(1), m.group(2)
        members = []
        pending = None
        for line in body.split("\n"):
            mm = re.match(r"\s*(\w+)\s*(?:=\s*[^,]*)?,?\s*(?:/\*\s*(.*?)\s*(\*/)?)?\s*$", line)
            if mm and not line.strip().startswith(("/*", "*")):
                members.append([mm.group(1), (mm.group(2) or "").strip()])
                pending = members[-1] if mm.group(2) and not mm.group(3) else None
                continue
            cm = re.match(r"\s*(?:\*\s*)?(.*?)\s*(\*/)?\s*$", line)
            if pending is not None and cm and not line.strip().startswith("/*"):
                pending[1] += " " + cm.group(1)
                if cm.group(2):
                    pending = None
        out.append((name, members))
    return out


def parse_defines(src):
    """[(name, value text, comment)] of object-like #defines with a value."""
    out = []
    for m in re.finditer(
        r"^#define (\w+)[ \t]+([^\n/]*?)[ \t]*(?:/\*\s*(.*?)\s*\*/)?[ \t]*$", src, re.M
    ):
        name, val, com = m.groups()
        if name.endswith("_H") or not val or "\\" in val:
            continue
        out.append((name, val.strip(), (com or "").strip()))
    return out


def layout(headers, structs, enums):
    """Offsets and sizes, as the compiler lays them out."""
    prog = ["#include <stddef.h>", "#include <stdio.h>"]
    prog += ['#include "%s"' % h for h in headers]
    prog.append("int main(void) {")
    for name, _, fields in structs:
        prog.append('printf("S %s %%zu\\n", sizeof(struct %s));' % (name, name))
        for _, f, dims, _ in fields:
            # A flexible array member has no size of its own.
            size = "(size_t)0" if dims == "[]" else \
                "sizeof(((struct %s *)0)->%s)" % (name, f)
            prog.append(
                'printf("F %s %s %%zu %%zu\\n", offsetof(struct %s, %s), '
                "%s);" % (name, f, name, f, size)
            )
    for _, members in enums:
        for mem, _ in members:
            prog.append('printf("E %s %%d\\n", (int)%s);' % (mem, mem))
    prog.append("return 0; }")
    with tempfile.TemporaryDirectory() as d:
        c = os.path.join(d, "layout.c")
        exe = os.path.join(d, "layout")
        with open(c, "w") as f:
            f.write("\n".join(prog) + "\n")
        cc = os.environ.get("CC", "cc")
        subprocess.run(
            [cc, "-std=gnu11", "-D_GNU_SOURCE", "-I", COMMON, "-I", ENGINE, "-o", exe, c], check=True
        )
        res = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    sizes, offs, vals = {}, {}, {}
    for line in res.splitlines():
        p = line.split()
        if p[0] == "S":
            sizes[p[1]] = int(p[2])
        elif p[0] == "F":
            offs[(p[1], p[2])] = (int(p[3]), int(p[4]))
        else:
            vals[p[1]] = int(p[2])
    return sizes, offs, vals


def render(page, spec):
    out = [
        "<!-- Generated by scripts/gen-docs.py from %s: do not edit; change"
        " the header and run scripts/gen-docs.py. -->"
        % ", ".join(header_rel(h) for h in spec["headers"]),
        "",
        "# " + spec["title"],
        "",
        spec["intro"],
        "",
    ]
    all_structs, all_enums, texts = [], [], {}
    for h in spec["headers"]:
        with open(header_path(h)) as f:
            src = f.read()
        texts[h] = src
        ss = parse_structs(src)
        if spec["structs"] is not None:
            ss = [s for s in ss if s[0] in spec["structs"]]
        all_structs.append((h, ss))
        all_enums.append((h, parse_enums(src)))
    flat_s = [s for _, ss in all_structs for s in ss]
    flat_e = [e for _, es in all_enums for e in es]
    if spec["structs"] is not None:
        missing = set(spec["structs"]) - {s[0] for s in flat_s}
        if missing:
            sys.exit("gen-docs: structs not found: %s" % ", ".join(sorted(missing)))
    sizes, offs, vals = layout(spec["headers"], flat_s, flat_e)

    for (h, ss), (_, es) in zip(all_structs, all_enums):
        src = texts[h]
        out += ["## `%s`" % header_rel(h), ""]
        out += ["From the header:", "", "```"] + file_comment(src) + ["```", ""]
        defs = parse_defines(src)
        if defs:
            out += ["### Constants", "", "| name | value | meaning |", "|---|---|---|"]
            for n, v, c in defs:
                out.append("| `%s` | `%s` | %s |" % (n, md_escape(v), md_escape(c)))
            out.append("")
        for name, members in es:
            out += ["### `enum %s`" % name, "", "| name | value | meaning |", "|---|---|---|"]
            for mem, c in members:
                if not c and mem.startswith("SV_OP_"):
                    # Listed in a comment block: " *   ALLOC_PD   req -> rep"
                    m = re.search(
                        r"^\s*\*\s+%s\s{2,}(\S.*?)\s*$" % re.escape(mem[6:]), src, re.M
                    )
                    c = re.sub(r"\s+", " ", m.group(1)) if m else ""
                out.append("| `%s` | %d | %s |" % (mem, vals[mem], md_escape(c)))
            out.append("")
        top = file_comment(src)
        for name, comment, fields in ss:
            names = {f[1] for f in fields}
            mean = table_meanings(comment, names)
            # The header's own table (the message header of sv_proto.h)
            # when it lists every field of this struct.
            top_mean = table_meanings(top, names)
            if set(top_mean) == names:
                for k, v in top_mean.items():
                    mean.setdefault(k, v)
            prose = [l for l in comment if not l.strip().startswith("|")]
            out += ["### `struct %s` (%d bytes)" % (name, sizes[name]), ""]
            if any(l.strip() for l in prose):
                para = " ".join(l.strip() for l in prose).strip()
                out += [md_escape(para).replace("\\|", "|"), ""]
            out += ["| offset | size | field | type | meaning |", "|---:|---:|---|---|---|"]
            for typ, f, dims, trail in fields:
                o, s = offs[(name, f)]
                m = mean.get(f) or trail
                if f.startswith("pad") or f == "reserved":
                    m = m or "padding, zero"
                out.append(
                    "| %d | %d | `%s%s` | `%s` | %s |"
                    % (o, s, f, dims, typ, md_escape(m))
                )
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def main():
    check = "--check" in sys.argv[1:]
    stale = 0
    for page, spec in PAGES.items():
        text = render(page, spec)
        path = os.path.join(TOP, page)
        old = open(path).read() if os.path.exists(path) else ""
        if old == text:
            continue
        if check:
            stale = 1
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(True), text.splitlines(True), page + " (committed)",
                    page + " (from the headers)",
                )
            )
            print("%s is out of date with its headers: run scripts/gen-docs.py" % page)
        else:
            with open(path, "w") as f:
                f.write(text)
            print("wrote " + page)
    return stale


if __name__ == "__main__":
    sys.exit(main())
