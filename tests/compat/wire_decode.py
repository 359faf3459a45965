#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks a capture of real RoCE v2 traffic with decoders that are not ours.

    wire_decode.py PCAP [--min N] [--opcodes A,B,..] [--qpns Q,..] [--name W]

PCAP: tcpdump on a veth (Ethernet frames) or `softverbs capture` (raw IP).
Every UDP datagram to port 4791 in it must be a RoCE v2 packet both
Debian's tshark and Debian's scapy read as such:

tshark: IP/UDP/InfiniBand, a BTH opcode, DestQP and PSN, no malformed
packet, no expert info of warning level or above, IP and UDP checksums not
bad (the payload heuristics are off, as in roce_check.py).

scapy (scapy.contrib.roce): a BTH with the same opcode, DestQP and PSN as
tshark's, and the ICRC scapy computes (IPv4; IPv6 from the definition, as
roce_check.py) equals the frame's last 4 bytes.

A UDP checksum that holds only the pseudo-header's sum is a segment of
a UDP_SEGMENT train (eng_wire.c "Trains") captured on a veth: the kernel
left the sum to a NIC, and a veth has none to compute it; such a frame is
taken as a NIC would send it (the ICRC, which masks the UDP checksum, is
still checked).

--min N: at least N RoCE packets.  --opcodes: each of these BTH opcodes
(numbers) appears.  --qpns: every DestQP is one of these.

Prints "ok W: ..." (or "FAIL W: ..." and the problems); exit 0 or 1.
"""
import logging
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import IP, IPv6, UDP, raw, rdpcap  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

import roce_check  # noqa: E402


def csum_left_to_nic(p):
    """Whether p's UDP checksum is the pseudo-header's sum alone, folded
    and not inverted: what Linux leaves for a NIC to finish (a segment of
    a UDP_SEGMENT datagram crossing a veth, which never finishes it)."""
    u = p[UDP]
    if IP in p:
        ph = (bytes(map(int, p[IP].src.split("."))) +
              bytes(map(int, p[IP].dst.split("."))) +
              struct.pack("!BBH", 0, 17, u.len))
    elif IPv6 in p:
        ph = (socket.inet_pton(socket.AF_INET6, p[IPv6].src) +
              socket.inet_pton(socket.AF_INET6, p[IPv6].dst) +
              struct.pack("!IxxxB", u.len, 17))
    else:
        return False
    s = sum(struct.unpack("!%dH" % (len(ph) // 2), ph))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return u.chksum == s


def main():
    a = sys.argv[1:]
    pcap = a[0]
    opt = {a[i]: a[i + 1] for i in range(1, len(a) - 1, 2)}
    name = opt.get("--name", os.path.basename(pcap))
    errs = []

    rows = [t for t in roce_check.tshark(pcap) if t["udp.dstport"] == "4791"]
    errs += roce_check.errors
    pkts = [(i + 1, p) for i, p in enumerate(rdpcap(pcap))
            if UDP in p and p[UDP].dport == 4791]
    offloaded = {n for n, p in pkts if csum_left_to_nic(p)}
    for t in rows:
        where = "frame %s" % t["frame.number"]
        nic = int(t["frame.number"]) in offloaded
        if "infiniband" not in t["frame.protocols"] or t["infiniband.bth.opcode"] == "":
            errs.append("%s: tshark does not decode InfiniBand (%s)"
                        % (where, t["frame.protocols"]))
        if t["_ws.malformed"]:
            errs.append("%s: tshark says malformed" % where)
        for sev, msg in zip(t["_ws.expert.severity"].split(","),
                            t["_ws.expert.message"].split(",")):
            if nic and msg.startswith("Bad checksum"):
                continue
            if sev and int(sev) >= roce_check.SEV_WARN:
                errs.append("%s: tshark expert info: %s" % (where, msg))
        for k in ("ip.checksum.status", "udp.checksum.status"):
            # 0: bad (tshark's PROTO_CHECKSUM_E_BAD)
            if t[k] == "0" and not (nic and k == "udp.checksum.status"):
                errs.append("%s: tshark: bad %s" % (where, k))

    # Each of scapy's packets beside tshark's row of the same frame.
    by_frame = {int(t["frame.number"]): t for t in rows}
    if sorted(by_frame) != [n for n, _ in pkts]:
        errs.append("scapy sees %d RoCE datagrams, tshark %d (or other frames)"
                    % (len(pkts), len(rows)))
    opcodes, qpns = set(), set()
    for n, p in pkts:
        where = "frame %d" % n
        t = by_frame.get(n, {})
        if BTH not in p:
            errs.append("%s: scapy finds no BTH" % where)
            continue
        b = p[BTH]
        opcodes.add(b.opcode)
        qpns.add(b.dqpn)
        try:
            tt = (int(t["infiniband.bth.opcode"]), int(t["infiniband.bth.destqp"], 0),
                  int(t["infiniband.bth.psn"]))
        except (KeyError, ValueError):
            tt = None
        if tt != (b.opcode, b.dqpn, b.psn):
            errs.append("%s: tshark %s, scapy %s" % (where, tt, (b.opcode, b.dqpn, b.psn)))
        ipl = p[IP] if IP in p else p[IPv6]
        frame = raw(ipl)
        want = b.compute_icrc(None) if IP in p else roce_check.icrc_v6(frame)
        if frame[-4:] != want:
            errs.append("%s: ICRC %s, scapy/definition %s"
                        % (where, frame[-4:].hex(), want.hex()))

    if len(rows) < int(opt.get("--min", "1")):
        errs.append("%d RoCE packets, want at least %s" % (len(rows), opt.get("--min", "1")))
    for o in filter(None, opt.get("--opcodes", "").split(",")):
        if int(o, 0) not in opcodes:
            errs.append("opcode %s never seen (seen: %s)" % (o, sorted(opcodes)))
    if "--qpns" in opt:
        allowed = {int(q, 0) for q in opt["--qpns"].split(",") if q}
        if not qpns <= allowed:
            errs.append("DestQPs %s not among %s" % (sorted(qpns - allowed), sorted(allowed)))

    v6 = sum(1 for p in pkts if IPv6 in p)
    summary = "%d RoCE packets (%d IPv4, %d IPv6), opcodes %s" % (
        len(rows), len(rows) - v6, v6, ",".join(hex(o) for o in sorted(opcodes)))
    if errs:
        print("FAIL %s: %s" % (name, summary))
        for e in errs[:20]:
            print("   " + e)
        if len(errs) > 20:
            print("   ... %d more" % (len(errs) - 20))
        return 1
    print("ok %s: %s" % (name, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
