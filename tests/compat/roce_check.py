#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks a pcap of RoCE v2 frames with two decoders that are not ours.

    roce_check.py PCAP MANIFEST [--only-qpn N] [--count N] [--subset]
                  [--same-frames PCAP2] [--frames N] [--name WHAT]
                  [+ PCAP MANIFEST [options]]...

Several checks may go in one run, separated by "+" (tshark and scapy
start once: that is most of the time); each prints one line, "ok WHAT"
or "FAIL WHAT" with the problems.

MANIFEST (tests/compat/roce_gen.c) lists the packets that were sent, one
line each: index, opcode, DestQP, PSN, ipv6, source, destination, IBTA
length, pad count, local QPN, name.  The pcap must hold exactly those
packets in that order (with --only-qpn, exactly those to or from QP N;
with --count, the first N; with --subset, some of them in order, as a
capture that dropped packets holds).

tshark (Debian's): every frame decodes as IP/UDP/InfiniBand on port 4791
with the manifest's opcode, DestQP, PSN and pad count, addresses and
ports; no malformed packet and no expert info of warning or error level
(IP and UDP checksums verified: -o *.check_checksum:TRUE); its ICRC field
is the frame's last 4 bytes (for IBTA 1.5's opcodes, which tshark 4.0
does not know, and for XRC's, whose XRCETH it does not decode, the end of
the data it shows).  The payload's heuristic
decoders (RPC-over-RDMA, iSER, SMB Direct, ...) are switched off: a payload is the
application's bytes, which they would guess at (RPCoRDMA throws on a
3-byte SEND).  tshark 4.0 has no ICRC check of its own.

scapy (Debian's python3-scapy, scapy.contrib.roce): every frame parses to
BTH with the manifest's opcode, DestQP and PSN, and the ICRC scapy
computes (BTH.compute_icrc, IPv4 only in scapy 2.5) equals the frame's.
IPv6 frames, which scapy's RoCE layer does not cover, get the same
computation done here from the definition: zlib's CRC-32 over 8 bytes of
0xff, the IPv6 header with traffic class, flow label and hop limit all
ones, the UDP header with its checksum all ones, the BTH with resv8a all
ones, and the rest of the packet.

--same-frames: the frames (not the timestamps) equal PCAP2's, byte for
byte: a capture through the daemon writes what sv_roce.c writes directly.
--frames N: the pcap holds N frames (what the capture said it wrote).
--scapy-max N: scapy looks at the first N frames only (it takes about a
millisecond a frame; tshark still reads them all).

Exit 0 when all agree, 1 with one line per difference otherwise.
"""
import logging
import os
import struct
import subprocess
import sys
import zlib

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import IP, IPv6, UDP, RawPcapReader, raw, rdpcap  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

FIELDS = ["frame.number", "frame.protocols", "ip.src", "ip.dst", "ipv6.src",
          "ipv6.dst", "udp.dstport", "infiniband.bth.opcode",
          "infiniband.bth.destqp", "infiniband.bth.psn",
          "infiniband.bth.padcnt", "infiniband.invariant.crc",
          "infiniband.vendor", "_ws.malformed", "_ws.expert.severity", "_ws.expert.message",
          "ip.checksum.status", "udp.checksum.status"]
SEV_WARN = 0x00600000  # PI_WARN; PI_ERROR is 0x00800000
# IBTA 1.5's opcodes (RC FLUSH 0x1c, ATOMIC WRITE 0x1d): tshark 4.0 names
# them "Unknown" and shows what follows the BTH as data, ICRC included.
NEWER = (0x1c, 0x1d)
XRC = 0b101  # the transport of the XRC opcodes (0xa0..0xbf)

errors = []


def err(msg):
    errors.append(msg)


def manifest(path, only_qpn, count):
    rows = []
    with open(path) as f:
        for line in f:
            c = line.rstrip("\n").split("\t")
            row = {"idx": int(c[0]), "opcode": int(c[1]), "dqpn": int(c[2]),
                   "psn": int(c[3]), "v6": c[4] == "1", "src": c[5],
                   "dst": c[6], "ib_len": int(c[7]), "pad": int(c[8]),
                   "qpn": int(c[9]), "name": c[10]}
            if only_qpn is not None and only_qpn not in (row["dqpn"], row["qpn"]):
                continue
            rows.append(row)
    return rows[:count] if count is not None else rows


_heur = None


def tshark(pcap):
    global _heur
    if _heur is None:
        _heur = subprocess.run(["tshark", "-G", "heuristic-decodes"],
                               capture_output=True, text=True).stdout
    heur = _heur
    cmd = ["tshark", "-r", pcap, "-n", "-o", "ip.check_checksum:TRUE",
           "-o", "udp.check_checksum:TRUE", "-T", "fields",
           "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for line in heur.splitlines():
        c = line.split("\t")
        if len(c) >= 2 and c[0] == "infiniband.payload":
            cmd += ["--disable-protocol", c[1]]
    for f in FIELDS:
        cmd += ["-e", f]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        err("tshark failed: " + p.stderr.strip())
        return []
    out = []
    for line in p.stdout.splitlines():
        c = line.split("\t")
        out.append(dict(zip(FIELDS, c + [""] * (len(FIELDS) - len(c)))))
    return out


def icrc_v6(frame):
    """The ICRC of an IPv6 frame from the definition (Annex A17, as rxe)."""
    ip = bytearray(frame[:40])
    ip[0] |= 0x0f
    ip[1] = ip[2] = ip[3] = 0xff  # traffic class, flow label
    ip[7] = 0xff  # hop limit
    udp = bytearray(frame[40:48])
    udp[6] = udp[7] = 0xff
    bth = bytearray(frame[48:60])
    bth[4] = 0xff  # resv8a
    rest = frame[60:-4]
    c = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + rest)
    return struct.pack("<I", c & 0xffffffff)


def check(args):
    pcap, man = args[0], args[1]
    only_qpn = count = None
    if "--only-qpn" in args:
        only_qpn = int(args[args.index("--only-qpn") + 1], 0)
    if "--count" in args:
        count = int(args[args.index("--count") + 1])
    rows = manifest(man, only_qpn, count)

    # ---- tshark
    ts = tshark(pcap)
    if "--subset" in args:
        # Align each frame with the next manifest row of the same BTH.
        kept, j = [], 0
        for t in ts:
            key = (t["infiniband.bth.opcode"], t["infiniband.bth.destqp"],
                   t["infiniband.bth.psn"])
            while j < len(rows) and key != (str(rows[j]["opcode"]),
                                            "0x%06x" % rows[j]["dqpn"],
                                            str(rows[j]["psn"])):
                j += 1
            if j == len(rows):
                err("frame %s is none of the manifest's packets (in order)"
                    % t["frame.number"])
                break
            kept.append(rows[j])
            j += 1
        rows = kept
    if len(ts) != len(rows):
        err("tshark: %d frames, expected %d" % (len(ts), len(rows)))
    smax = int(args[args.index("--scapy-max") + 1]) if "--scapy-max" in args else None
    frames = rdpcap(pcap, count=smax or -1)
    nframes = sum(1 for _ in RawPcapReader(pcap)) if smax else len(frames)
    for i, (t, r) in enumerate(zip(ts, rows)):
        where = "frame %d (%s, %s)" % (i + 1, r["name"], "IPv6" if r["v6"] else "IPv4")
        proto = "raw:ipv6:udp:infiniband" if r["v6"] else "raw:ip:udp:infiniband"
        if not t["frame.protocols"].startswith(proto):
            err("%s: tshark decodes it as %s" % (where, t["frame.protocols"]))
            continue
        want = {"infiniband.bth.opcode": r["opcode"],
                "infiniband.bth.destqp": r["dqpn"],
                "infiniband.bth.psn": r["psn"],
                "infiniband.bth.padcnt": r["pad"],
                "udp.dstport": 4791}
        for k, v in want.items():
            got = t[k]
            if got == "" or int(got, 0) != v:
                err("%s: tshark %s = %r, expected %d" % (where, k, got, v))
        src = t["ipv6.src" if r["v6"] else "ip.src"]
        dst = t["ipv6.dst" if r["v6"] else "ip.dst"]
        if (src, dst) != (r["src"], r["dst"]):
            err("%s: tshark addresses %s > %s, expected %s > %s" %
                (where, src, dst, r["src"], r["dst"]))
        if t["_ws.malformed"]:
            err("%s: tshark says malformed" % where)
        for sev, msg in zip(t["_ws.expert.severity"].split(","),
                            t["_ws.expert.message"].split(",")):
            if sev and int(sev) >= SEV_WARN:
                err("%s: tshark expert info: %s" % (where, msg))
        for k in ("ip.checksum.status", "udp.checksum.status"):
            if t[k] == "2":
                err("%s: tshark: bad %s" % (where, k))
        if i < len(frames):
            tail = raw(frames[i])[-4:]
            rest = t["infiniband.vendor"].split(",")[-1]
            if (r["opcode"] in NEWER or r["opcode"] >> 5 == XRC) and \
               t["infiniband.invariant.crc"] == "" and rest.endswith(tail.hex()):
                pass  # all after the BTH is data to it, the ICRC its end
            elif t["infiniband.invariant.crc"] == "" or \
               int(t["infiniband.invariant.crc"], 16) != int.from_bytes(tail, "big"):
                err("%s: tshark's ICRC field %s is not the frame's last 4 bytes"
                    % (where, t["infiniband.invariant.crc"]))

    # ---- scapy
    if nframes != len(rows):
        err("scapy: %d frames, expected %d" % (nframes, len(rows)))
    for i, (p, r) in enumerate(zip(frames, rows)):
        where = "frame %d (%s)" % (i + 1, r["name"])
        if BTH not in p or UDP not in p:
            err("%s: scapy finds no UDP/BTH: %s" % (where, p.summary()))
            continue
        b = p[BTH]
        if (b.opcode, b.dqpn, b.psn, b.padcount) != (r["opcode"], r["dqpn"], r["psn"], r["pad"]):
            err("%s: scapy BTH %s" % (where, (b.opcode, b.dqpn, b.psn, b.padcount)))
        frame = raw(p)
        if IP in p:
            want = b.compute_icrc(None)
            if (p[IP].src, p[IP].dst) != (r["src"], r["dst"]):
                err("%s: scapy addresses %s > %s" % (where, p[IP].src, p[IP].dst))
        else:
            want = icrc_v6(frame)
            if IPv6 not in p or (p[IPv6].src, p[IPv6].dst) != (r["src"], r["dst"]):
                err("%s: scapy addresses wrong" % where)
        if frame[-4:] != want:
            err("%s: ICRC %s, scapy/definition %s" % (where, frame[-4:].hex(), want.hex()))
        ib_len = len(frame) - (48 if r["v6"] else 28) - 4
        if ib_len != r["ib_len"]:
            err("%s: IBTA length %d, expected %d" % (where, ib_len, r["ib_len"]))

    if "--same-frames" in args:
        other = [raw(p) for p in rdpcap(args[args.index("--same-frames") + 1])]
        mine = [raw(p) for p in frames]
        if other != mine:
            diff = [i + 1 for i, (a, b) in enumerate(zip(mine, other)) if a != b]
            err("frames differ from the other pcap's (%d vs %d frames; differing: %s)"
                % (len(mine), len(other), diff[:10]))

    if "--frames" in args and nframes != int(args[args.index("--frames") + 1]):
        err("%d frames, the capture said %s" % (nframes, args[args.index("--frames") + 1]))

    v6 = sum(1 for r in rows if r["v6"])
    return "%s: %d frames (%d IPv4, %d IPv6), %d opcodes" % (
        os.path.basename(pcap), len(rows), len(rows) - v6, v6,
        len(set(r["opcode"] for r in rows)))


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    jobs, cur = [], []
    for a in args:
        if a == "+":
            jobs.append(cur)
            cur = []
        else:
            cur.append(a)
    jobs.append(cur)
    failed = 0
    for job in jobs:
        name = job[job.index("--name") + 1] if "--name" in job else job[0]
        del errors[:]
        try:
            what = check(job)
        except Exception as e:  # a pcap scapy cannot read, ...
            err("%s: %r" % (job[0], e))
            what = job[0]
        if errors:
            failed += 1
            print("FAIL %s: %d problem(s) in %s" % (name, len(errors), what))
            for e in errors[:40]:
                print("    " + e)
        else:
            print("ok %s: tshark and scapy agree on %s" % (name, what))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
