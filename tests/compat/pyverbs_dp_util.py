# SPDX-License-Identifier: MIT
"""Moving data with pyverbs the way a Python user does: one side posts
(Initiator), the other owns the memory and the receives (Target).  A
Target lives in this process, in a child process (ChildTarget: the same
class driven over a pipe, `python3 pyverbs_dp_util.py --target`) or on
another host (WireTarget: driven over TCP from a target server there,
`python3 pyverbs_dp_util.py --serve ADDR PORTFILE`, whose GID is ADDR's),
so the same flow runs within one process, between two, and between hosts.

Both sides use either the legacy post API (SendWR / qp.post_send, CQ.poll)
or the extended one (QPEx wr_* built with send_ops_flags, CQEX
start_poll / poll_next / end_poll).  Every wait polls with a deadline; a
watchdog (faulthandler) ends a stuck process.

The caller sets SOFTVERBS_SOCKET before importing this module; a child
inherits it, so both sides talk to the same daemon.  Between hosts each
side talks to its own host's daemon, and the GID index on each side is the
one of the address the test names (gid_index_of: from the GID table).
"""
import errno
import faulthandler
import ipaddress
import itertools
import json
import os
import select
import socket
import subprocess
import sys
import time
import traceback

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.cq import CQ, CQEX, CompChannel, CqInitAttrEx, PollCqAttr
from pyverbs.qp import QP, QPEx, QPAttr, QPInitAttr, QPInitAttrEx, QPCap
from pyverbs.addr import AH, AHAttr, GlobalRoute, GID
from pyverbs.wr import RecvWR, SGE, SendWR
from pyverbs_common import loaded_libibverbs

WAIT = 20.0          # seconds any single completion may take
QKEY = 0x11111111
PSN = 0x123
GRH = 40
SLOT = 256           # one receive buffer (UD: GRH + payload)
NSLOTS = 8
WRITE_OFF = 2048     # target's RDMA write area
READ_OFF = 3072      # target's RDMA read source (pattern)
ATOM_OFF = 4000      # target's 8-byte atomic word
BIG_OFF = 8192       # multi-packet write target (both sides' source)
BIG = 5000           # > 4 packets at path MTU 1024
MR_LEN = 16384
ATOM_INIT = 0x1111111111111111

ALL_ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
              e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)
# What the extended post API must be able to build.
SEND_OPS = (e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_SEND_WITH_IMM |
            e.IBV_QP_EX_WITH_RDMA_WRITE |
            e.IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
            e.IBV_QP_EX_WITH_RDMA_READ | e.IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
            e.IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
UD_SEND_OPS = e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_SEND_WITH_IMM


class Timeout(Exception):
    pass


def pattern(seed, n):
    """n bytes nobody else writes (differs per seed and per offset)."""
    return bytes((seed * 37 + i * 7 + (i >> 8)) & 0xff for i in range(n))


def open_ctx():
    devs = d.get_device_list()
    return d.Context(name=devs[0].name.decode())


def gid_bytes(gid_str):
    return bytes.fromhex(gid_str.replace(":", ""))


def addr_gid(addr):
    """The 16 bytes of the RoCE v2 GID of an IP address (IPv4: mapped)."""
    ip = ipaddress.ip_address(addr)
    if ip.version == 4:
        return bytes(10) + b"\xff\xff" + ip.packed
    return ip.packed


def gid_index_of(ctx, addr):
    """The index of addr's RoCE v2 GID in port 1's GID table, or None."""
    want = addr_gid(addr)
    n = ctx.query_port(1).gid_tbl_len
    for ent in ctx.query_gid_table(n):
        if (ent.port_num == 1 and ent.gid_type == e.IBV_GID_TYPE_ROCE_V2 and
                gid_bytes(str(ctx.query_gid(1, ent.gid_index))) == want):
            return ent.gid_index
    return None


def make_cq(ctx, api, channel=None):
    if api == "ex":
        return CQEX(ctx, CqInitAttrEx(cqe=64, channel=channel,
                                      wc_flags=e.IBV_WC_STANDARD_FLAGS))
    return CQ(ctx, 64, None, channel, 0)


def make_qp(ctx, pd, cq, qp_type, api, rcq=None):
    """A QP in RESET; api "ex" gives a QPEx with the wr_* builders."""
    rcq = rcq or cq
    cap = QPCap(max_send_wr=16, max_recv_wr=NSLOTS, max_send_sge=2,
                max_recv_sge=2, max_inline_data=64)
    if api == "ex":
        ops = UD_SEND_OPS if qp_type == e.IBV_QPT_UD else SEND_OPS
        ia = QPInitAttrEx(qp_type=qp_type, scq=cq, rcq=rcq, cap=cap, pd=pd,
                          comp_mask=e.IBV_QP_INIT_ATTR_PD |
                          e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                          send_ops_flags=ops)
        return QPEx(ctx, ia)
    return QP(pd, QPInitAttr(qp_type=qp_type, scq=cq, rcq=rcq, cap=cap))


def bring_up(qp, qp_type, peer_qpn=0, peer_gid=None, sgid_index=0):
    """RESET -> INIT -> RTR -> RTS with the masks the kernel requires."""
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index, a.port_num = 0, 1
    mask = (e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT)
    if qp_type == e.IBV_QPT_UD:
        a.qkey = QKEY
        mask |= e.IBV_QP_QKEY
    else:
        a.qp_access_flags = (e.IBV_ACCESS_REMOTE_WRITE |
                             e.IBV_ACCESS_REMOTE_READ |
                             e.IBV_ACCESS_REMOTE_ATOMIC)
        mask |= e.IBV_QP_ACCESS_FLAGS
    qp.modify(a, mask)

    a = QPAttr(qp_state=e.IBV_QPS_RTR)
    mask = e.IBV_QP_STATE
    if qp_type == e.IBV_QPT_RC:
        a.path_mtu = e.IBV_MTU_1024
        a.dest_qp_num = peer_qpn
        a.rq_psn = PSN
        a.max_dest_rd_atomic = 4
        a.min_rnr_timer = 12
        a.ah_attr = AHAttr(port_num=1, is_global=1,
                           gr=GlobalRoute(dgid=GID(peer_gid),
                                          sgid_index=sgid_index))
        mask |= (e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
                 e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC |
                 e.IBV_QP_MIN_RNR_TIMER)
    qp.modify(a, mask)

    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.sq_psn = PSN
    mask = e.IBV_QP_STATE | e.IBV_QP_SQ_PSN
    if qp_type == e.IBV_QPT_RC:
        a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic = 14, 7, 7, 4
        mask |= (e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
                 e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC)
    qp.modify(a, mask)


def wc_dict(wr_id, status, opcode, byte_len, imm, src_qp, qp_num, flags):
    return {"wr_id": wr_id, "status": status, "opcode": opcode,
            "byte_len": byte_len, "imm": imm, "src_qp": src_qp,
            "qp_num": qp_num, "wc_flags": flags}


def poll(cq, n, timeout=WAIT):
    """n completions as dicts, or Timeout.  CQ: ibv_poll_cq; CQEX: one
    start_poll / poll_next... / end_poll batch per round."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        if isinstance(cq, CQEX):
            if cq.start_poll(PollCqAttr()) == 0:
                try:
                    while True:
                        got.append(read_cqex(cq))
                        if len(got) == n or cq.poll_next() != 0:
                            break
                finally:
                    cq.end_poll()
        else:
            k, wcs = cq.poll(n - len(got))
            for w in wcs[:k]:
                got.append(wc_dict(w.wr_id, w.status, w.opcode, w.byte_len,
                                   w.imm_data if w.wc_flags &
                                   e.IBV_WC_WITH_IMM else None,
                                   w.src_qp, w.qp_num, w.wc_flags))
        if len(got) < n:
            if time.monotonic() > deadline:
                raise Timeout("%d of %d completions after %ss: %s" %
                              (len(got), n, timeout, got))
            time.sleep(0.0005)
    return got


def read_cqex(cq):
    # read_* are valid only for a successful completion (man ibv_create_cq_ex).
    if cq.status != e.IBV_WC_SUCCESS:
        return wc_dict(cq.wr_id, cq.status, None, None, None, None,
                       None, None)
    flags = cq.read_wc_flags()
    return wc_dict(cq.wr_id, cq.status, cq.read_opcode(), cq.read_byte_len(),
                   cq.read_imm_data() if flags & e.IBV_WC_WITH_IMM else None,
                   cq.read_src_qp(), cq.read_qp_num(), flags)


class Target:
    """The passive side: memory the initiator reads, writes and updates
    atomically, receive buffers, and (RC) a second MR without
    REMOTE_WRITE.  sgid_index: the GID it is reached at."""

    def __init__(self, qp_type, api, sgid_index=0):
        self.qp_type, self.api = qp_type, api
        self.sgid_index = sgid_index
        self.ctx = open_ctx()
        self.pd = PD(self.ctx)
        self.cq = make_cq(self.ctx, api)
        self.qp = make_qp(self.ctx, self.pd, self.cq, qp_type, api)
        self.mr = MR(self.pd, MR_LEN, ALL_ACCESS)
        self.mr.write(bytes(MR_LEN), MR_LEN)
        self.mr.write(pattern(99, 1024), 1024, READ_OFF)
        self.mr.write(ATOM_INIT.to_bytes(8, "little"), 8, ATOM_OFF)
        self.ro = MR(self.pd, 256, e.IBV_ACCESS_LOCAL_WRITE |
                     e.IBV_ACCESS_REMOTE_READ)
        self.ro.write(pattern(7, 256), 256)
        if qp_type == e.IBV_QPT_UD:
            bring_up(self.qp, qp_type)

    def info(self):
        return {"qpn": self.qp.qp_num,
                "gid": str(self.ctx.query_gid(1, self.sgid_index)),
                "rkey": self.mr.rkey, "addr": self.mr.buf,
                "ro_rkey": self.ro.rkey, "ro_addr": self.ro.buf,
                "pid": os.getpid(), "libs": loaded_libibverbs()}

    def connect(self, peer_qpn, peer_gid):
        bring_up(self.qp, self.qp_type, peer_qpn, peer_gid, self.sgid_index)

    def post_recvs(self, first, n):
        for i in range(first, first + n):
            self.qp.post_recv(RecvWR(wr_id=0x100 + i, num_sge=1, sg=[
                SGE(self.mr.buf + i * SLOT, SLOT, self.mr.lkey)]))

    def collect(self, n):
        """n receive completions, each with its slot's bytes (hex)."""
        wcs = poll(self.cq, n)
        for w in wcs:
            slot = w["wr_id"] - 0x100
            if 0 <= slot < NSLOTS:
                w["data"] = self.mr.read(SLOT, slot * SLOT).hex()
        return wcs

    def read_mem(self, off, n, ro=False):
        return (self.ro if ro else self.mr).read(n, off).hex()

    def close(self):
        for o in (self.qp, self.ro, self.mr, self.cq, self.pd, self.ctx):
            o.close()


class RemoteTarget:
    """A Target in another process, its methods called as JSON lines
    ([op, args] there, [ok, result] back) over a pair of fds: a child's
    pipes (ChildTarget) or a TCP connection to a target server on another
    host (WireTarget)."""

    def __init__(self, wfd, rfd, who):
        self.wfd, self.rfd, self.who, self.buf = wfd, rfd, who, b""

    def _call(self, op, *args):
        msg = (json.dumps([op, args]) + "\n").encode()
        while msg:
            msg = msg[os.write(self.wfd, msg):]
        deadline = time.monotonic() + WAIT + 10
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.rfd], [], [], max(left, 0))
            if not r:
                raise Timeout("%s: no answer to %s" % (self.who, op))
            chunk = os.read(self.rfd, 65536)
            if not chunk:
                raise RuntimeError("%s gone during %s%s" %
                                   (self.who, op, self._gone()))
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        ok, val = json.loads(line)
        if not ok:
            raise RuntimeError("%s: %s" % (self.who, val))
        return val

    def __getattr__(self, op):
        return lambda *args: self._call(op, *args)

    def close(self):
        try:
            self._call("close")
        finally:
            self._done()


class ChildTarget(RemoteTarget):
    """A Target in a child process (same daemon), over its stdin/stdout."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--target"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        super().__init__(self.proc.stdin.fileno(), self.proc.stdout.fileno(),
                         "target process")

    def _gone(self):
        return " (rc %s)" % self.proc.wait(5)

    def _done(self):
        self.proc.stdin.close()
        self.proc.wait(WAIT)


class WireTarget(RemoteTarget):
    """A Target on another host: a connection to its target server
    (serve_tcp), which the peer (address, port) names."""

    def __init__(self, peer):
        self.sock = socket.create_connection(peer, timeout=WAIT)
        self.sock.settimeout(None)  # plain blocking fd: select() waits
        super().__init__(self.sock.fileno(), self.sock.fileno(),
                         "target server %s port %d" % peer)

    def _gone(self):
        return ""

    def _done(self):
        self.sock.close()


def serve(inp, out, sgid_index=0):
    """Drives a Target from JSON lines on inp, answering on out, until
    "close" (True) or the end of inp (False)."""
    t = None
    for line in inp:
        op, args = json.loads(line)
        try:
            if op == "start":
                t = Target(*args, sgid_index=sgid_index)
                res = t.info()
            else:
                res = getattr(t, op)(*args)
            msg = [True, res]
        except Exception:
            msg = [False, traceback.format_exc()]
        out.write(json.dumps(msg) + "\n")
        out.flush()
        if op == "close":
            return True
    return False


def target_main():
    faulthandler.dump_traceback_later(240, exit=True)
    # Protocol on a private fd; stray prints go to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    serve(sys.stdin, out)
    return 0


def serve_tcp(addr, portfile, watchdog=170):
    """The target server of a host: listens on addr (a TCP port of its
    choosing, written to portfile once it listens), one connection at a
    time, each a Target whose GID is addr's; ends at a connection that
    says "exit" (status 0), or with status 1 when addr has no GID."""
    faulthandler.dump_traceback_later(watchdog, exit=True)
    ctx = open_ctx()
    sgid_index = gid_index_of(ctx, addr)
    ctx.close()
    if sgid_index is None:
        print("target server: no RoCE v2 GID for %s" % addr, file=sys.stderr)
        return 1
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    ls = socket.create_server((addr, 0), family=family)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    while True:
        conn, _ = ls.accept()
        with conn, conn.makefile("r") as inp, conn.makefile("w") as out:
            first = inp.readline()
            if json.loads(first)[0] == "exit":
                out.write(json.dumps([True, os.getpid()]) + "\n")
                return 0
            serve(itertools.chain([first], inp), out, sgid_index)


def stop_server(peer):
    """Ends a target server (serve_tcp) at peer = (address, port)."""
    t = WireTarget(peer)
    try:
        return t._call("exit")
    finally:
        t._done()


def new_target(qp_type, api, remote):
    """(target, info): a Target here (remote False), in a child process
    (True), or on the host whose target server is at remote = (address,
    port)."""
    if remote is True:
        t = ChildTarget()
    elif remote:
        t = WireTarget(remote)
    else:
        t = Target(qp_type, api)
        return t, t.info()
    return t, t.start(qp_type, api)


class Initiator:
    """The active side: posts with the legacy or the extended API, from
    the GID at sgid_index."""

    def __init__(self, qp_type, api, channel=None, sgid_index=0):
        self.qp_type, self.api = qp_type, api
        self.sgid_index = sgid_index
        self.ctx = open_ctx()
        self.pd = PD(self.ctx)
        self.cq = make_cq(self.ctx, api, channel)
        self.qp = make_qp(self.ctx, self.pd, self.cq, qp_type, api)
        self.mr = MR(self.pd, MR_LEN, ALL_ACCESS)
        self.mr.write(bytes(MR_LEN), MR_LEN)
        self.gid = str(self.ctx.query_gid(1, sgid_index))
        self.ah = None
        if qp_type == e.IBV_QPT_UD:
            bring_up(self.qp, qp_type)

    def connect(self, info):
        if self.qp_type == e.IBV_QPT_UD:
            self.ah = AH(self.pd, attr=AHAttr(
                port_num=1, is_global=1,
                gr=GlobalRoute(dgid=GID(info["gid"]),
                               sgid_index=self.sgid_index)))
            self.remote_qpn = info["qpn"]
        else:
            bring_up(self.qp, self.qp_type, info["qpn"], info["gid"],
                     self.sgid_index)

    def post(self, op, wr_id, off, length, rkey=0, raddr=0, imm=None,
             cmp_add=0, swap=0, flags=e.IBV_SEND_SIGNALED):
        """One WR.  op: send, write, read, fadd, cswap; imm is the host
        value (goes out big-endian, as wr_*_imm does)."""
        sge = SGE(self.mr.buf + off, length, self.mr.lkey)
        if self.api == "ex":
            q = self.qp
            q.wr_start()
            q.wr_id, q.wr_flags = wr_id, flags
            if op == "send" and imm is None:
                q.wr_send()
            elif op == "send":
                q.wr_send_imm(imm)
            elif op == "write" and imm is None:
                q.wr_rdma_write(rkey, raddr)
            elif op == "write":
                q.wr_rdma_write_imm(rkey, raddr, imm)
            elif op == "read":
                q.wr_rdma_read(rkey, raddr)
            elif op == "fadd":
                q.wr_atomic_fetch_add(rkey, raddr, cmp_add)
            elif op == "cswap":
                q.wr_atomic_cmp_swp(rkey, raddr, cmp_add, swap)
            if self.ah is not None:
                q.wr_set_ud_addr(self.ah, self.remote_qpn, QKEY)
            q.wr_set_sge(sge)
            q.wr_complete()
            return
        opcode = {("send", False): e.IBV_WR_SEND,
                  ("send", True): e.IBV_WR_SEND_WITH_IMM,
                  ("write", False): e.IBV_WR_RDMA_WRITE,
                  ("write", True): e.IBV_WR_RDMA_WRITE_WITH_IMM,
                  ("read", False): e.IBV_WR_RDMA_READ,
                  ("fadd", False): e.IBV_WR_ATOMIC_FETCH_AND_ADD,
                  ("cswap", False): e.IBV_WR_ATOMIC_CMP_AND_SWP,
                  }[(op, imm is not None)]
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge],
                    send_flags=flags,
                    imm_data=socket.htonl(imm) if imm is not None else 0)
        if op in ("write", "read"):
            wr.set_wr_rdma(rkey, raddr)
        elif op in ("fadd", "cswap"):
            wr.set_wr_atomic(rkey, raddr, cmp_add, swap)
        if self.ah is not None:
            wr.set_wr_ud(self.ah, self.remote_qpn, QKEY)
        self.qp.post_send(wr)

    def close(self):
        objs = [self.qp, self.mr, self.cq]
        if self.ah is not None:
            objs.insert(0, self.ah)
        for o in objs + [self.pd, self.ctx]:
            o.close()


def be_imm(imm):
    """What wc.imm_data / read_imm_data hold for a posted host value."""
    return socket.htonl(imm)


IMM1, IMM2, IMM3 = 0x12345678, 0xa1b2c3d4, 0x0badcafe
SWAP = 0xdeadbeefcafef00d


def le64(b):
    return int.from_bytes(b, "little")


def _check_grh(check, tag, grh, sgid, dgid):
    """The 40 bytes before a UD payload: RoCE v2 between IPv4-mapped GIDs
    puts the IPv4 header in the last 20 (as the kernel's RoCE drivers do),
    otherwise an IPv6-style GRH with both GIDs."""
    v4 = bytes(10) + b"\xff\xff"
    if sgid[:12] == v4 and dgid[:12] == v4:
        check(grh[:20] == bytes(20), "%s: GRH zeros before IPv4 header" % tag)
        check(grh[20] == 0x45 and grh[29] == 17,
              "%s: IPv4/UDP header in GRH: %s" % (tag, grh[20:].hex()))
        check(grh[32:36] == sgid[12:] and grh[36:40] == dgid[12:],
              "%s: GRH addresses %s" % (tag, grh[32:40].hex()))
    else:
        check(grh[0] >> 4 == 6, "%s: GRH IP version" % tag)
        check(grh[8:24] == sgid and grh[24:40] == dgid,
              "%s: GRH GIDs %s" % (tag, grh.hex()))


def _pair(check, kind, i_api, t_api, remote, sgid_index):
    """(tag, target, its info, initiator) for a flow; remote as for
    new_target.  Checks the target is where it should be and runs our
    library."""
    qp_type = e.IBV_QPT_RC if kind == "RC" else e.IBV_QPT_UD
    where = {True: " 2proc", False: ""}.get(remote, " wire")
    tag = "%s %s->%s%s" % (kind, i_api, t_api, where)
    t, info = new_target(qp_type, t_api, remote)
    i = Initiator(qp_type, i_api, sgid_index=sgid_index)
    if remote:
        check(info["pid"] != os.getpid(), "%s: target elsewhere" % tag)
    check(info["libs"] == loaded_libibverbs(),
          "%s: target runs our library: %s" % (tag, info["libs"]))
    if remote not in (True, False):
        # The target's GID is the address it was reached at, not ours.
        check(gid_bytes(info["gid"]) == addr_gid(remote[0]) and
              info["gid"] != i.gid, "%s: GIDs %s (target) %s (here)" %
              (tag, info["gid"], i.gid))
    return tag, t, info, i


def rc_flow(check, i_api, t_api, remote, sgid_index=0):
    """Send, send with immediate, RDMA write, write with immediate, read,
    fetch-add, two compare-swaps; then a write to an rkey without
    REMOTE_WRITE (REM_ACCESS_ERR) and the flush after it."""
    tag, t, info, i = _pair(check, "RC", i_api, t_api, remote, sgid_index)
    try:
        t.connect(i.qp.qp_num, i.gid)
        i.connect(info)
        t.post_recvs(0, 3)
        a, b = pattern(1, 200), pattern(2, 100)
        w, wi = pattern(3, 300), pattern(4, 64)
        for data, off in ((a, 0), (b, 256), (w, 512), (wi, 1024)):
            i.mr.write(data, len(data), off)
        rkey, base = info["rkey"], info["addr"]
        i.post("send", 1, 0, 200)
        i.post("send", 2, 256, 100, imm=IMM1)
        i.post("write", 3, 512, 300, rkey, base + WRITE_OFF)
        i.post("write", 4, 1024, 64, rkey, base + WRITE_OFF + 512, imm=IMM2)
        i.post("read", 5, 1536, 512, rkey, base + READ_OFF)
        i.post("fadd", 6, 2048, 8, rkey, base + ATOM_OFF, cmp_add=5)
        i.post("cswap", 7, 2056, 8, rkey, base + ATOM_OFF,
               cmp_add=ATOM_INIT + 5, swap=SWAP)
        i.post("cswap", 8, 2064, 8, rkey, base + ATOM_OFF,
               cmp_add=ATOM_INIT, swap=0)  # no match: memory stays SWAP
        wcs = poll(i.cq, 8)
        check([c["wr_id"] for c in wcs] == list(range(1, 9)),
              "%s: send completions in order: %s" % (tag, wcs))
        check(all(c["status"] == e.IBV_WC_SUCCESS for c in wcs),
              "%s: send statuses %s" % (tag, [c["status"] for c in wcs]))
        check([c["opcode"] for c in wcs] ==
              [e.IBV_WC_SEND, e.IBV_WC_SEND, e.IBV_WC_RDMA_WRITE,
               e.IBV_WC_RDMA_WRITE, e.IBV_WC_RDMA_READ, e.IBV_WC_FETCH_ADD,
               e.IBV_WC_COMP_SWAP, e.IBV_WC_COMP_SWAP],
              "%s: send opcodes %s" % (tag, [c["opcode"] for c in wcs]))
        check([c["byte_len"] for c in wcs[4:]] == [512, 8, 8, 8],
              "%s: read/atomic byte_len %s" % (tag, wcs[4:]))
        check(all(c["qp_num"] == i.qp.qp_num for c in wcs),
              "%s: send qp_num" % tag)
        check(i.mr.read(512, 1536) == pattern(99, 1024)[:512],
              "%s: RDMA read data" % tag)
        got = [le64(i.mr.read(8, 2048 + 8 * k)) for k in range(3)]
        check(got == [ATOM_INIT, ATOM_INIT + 5, SWAP],
              "%s: atomic originals %s" % (tag, [hex(x) for x in got]))
        mem = bytes.fromhex(t.read_mem(ATOM_OFF, 8))
        check(le64(mem) == SWAP, "%s: atomic word %s" % (tag, mem.hex()))
        mem = bytes.fromhex(t.read_mem(WRITE_OFF, 1024))
        check(mem == w + bytes(212) + wi + bytes(1024 - 576),
              "%s: RDMA write data (and nothing around it)" % tag)

        rw = t.collect(3)
        check([c["wr_id"] for c in rw] == [0x100, 0x101, 0x102] and
              all(c["status"] == e.IBV_WC_SUCCESS for c in rw),
              "%s: receive completions %s" % (tag, rw))
        check([c["opcode"] for c in rw] ==
              [e.IBV_WC_RECV, e.IBV_WC_RECV, e.IBV_WC_RECV_RDMA_WITH_IMM],
              "%s: receive opcodes %s" % (tag, [c["opcode"] for c in rw]))
        check([c["byte_len"] for c in rw] == [200, 100, 64],
              "%s: receive byte_len %s" % (tag, [c["byte_len"] for c in rw]))
        check([c["imm"] for c in rw] == [None, be_imm(IMM1), be_imm(IMM2)],
              "%s: immediates %s" % (tag, [c["imm"] for c in rw]))
        check(all(c["qp_num"] == info["qpn"] for c in rw),
              "%s: receive qp_num" % tag)
        if len(rw) == 3:
            slots = [bytes.fromhex(c["data"]) for c in rw]
            check(slots[0] == a + bytes(SLOT - 200), "%s: send data" % tag)
            check(slots[1] == b + bytes(SLOT - 100), "%s: send imm data" % tag)
            check(slots[2] == bytes(SLOT),
                  "%s: write-imm consumed a receive, wrote no data" % tag)

        # Messages of several MTU-sized packets, there and back.
        big = pattern(5, BIG)
        i.mr.write(big, BIG, BIG_OFF)
        i.post("write", 11, BIG_OFF, BIG, rkey, base + BIG_OFF)
        i.post("read", 12, 3000, BIG, rkey, base + BIG_OFF)
        wcs = poll(i.cq, 2)
        check([(c["wr_id"], c["status"]) for c in wcs] ==
              [(11, e.IBV_WC_SUCCESS), (12, e.IBV_WC_SUCCESS)] and
              wcs[1]["byte_len"] == BIG, "%s: big write/read %s" % (tag, wcs))
        check(bytes.fromhex(t.read_mem(BIG_OFF, BIG + 16)) ==
              big + bytes(16), "%s: %d-byte write data" % (tag, BIG))
        check(i.mr.read(BIG, 3000) == big, "%s: %d-byte read data" %
              (tag, BIG))

        # The error a user meets: the MR lacks REMOTE_WRITE.
        i.post("write", 9, 0, 16, info["ro_rkey"], info["ro_addr"])
        wcs = poll(i.cq, 1)
        check(wcs[0]["wr_id"] == 9 and
              wcs[0]["status"] == e.IBV_WC_REM_ACCESS_ERR,
              "%s: write without REMOTE_WRITE: %s" % (tag, wcs))
        check(bytes.fromhex(t.read_mem(0, 256, True)) == pattern(7, 256),
              "%s: protected MR unchanged" % tag)
        check(i.qp.query(e.IBV_QP_STATE)[0].qp_state == e.IBV_QPS_ERR,
              "%s: requester QP in ERR" % tag)
        i.post("send", 10, 0, 8)
        wcs = poll(i.cq, 1)
        check(wcs[0]["wr_id"] == 10 and
              wcs[0]["status"] == e.IBV_WC_WR_FLUSH_ERR,
              "%s: post after the error flushes: %s" % (tag, wcs))
    finally:
        i.close()
        t.close()


def ud_flow(check, i_api, t_api, remote, sgid_index=0):
    """Three UD sends (one with immediate) through an AH with GRH: the
    40-byte GRH first, then the payload; src_qp names the sender."""
    tag, t, info, i = _pair(check, "UD", i_api, t_api, remote, sgid_index)
    try:
        i.connect(info)
        t.post_recvs(0, 3)
        msgs = [pattern(11, 100), pattern(12, SLOT - GRH), pattern(13, 1)]
        imms = [None, IMM3, None]
        off = 0
        for k, m in enumerate(msgs):
            i.mr.write(m, len(m), off)
            i.post("send", 20 + k, off, len(m), imm=imms[k])
            off += 512
        wcs = poll(i.cq, 3)
        check([(c["wr_id"], c["status"], c["opcode"]) for c in wcs] ==
              [(20 + k, e.IBV_WC_SUCCESS, e.IBV_WC_SEND) for k in range(3)],
              "%s: send completions %s" % (tag, wcs))
        rw = t.collect(3)
        check([(c["wr_id"], c["status"], c["opcode"]) for c in rw] ==
              [(0x100 + k, e.IBV_WC_SUCCESS, e.IBV_WC_RECV)
               for k in range(3)], "%s: receive completions %s" % (tag, rw))
        sgid, dgid = gid_bytes(i.gid), gid_bytes(info["gid"])
        for k, c in enumerate(rw[:3]):
            m = msgs[k]
            check(c["byte_len"] == GRH + len(m),
                  "%s: byte_len %s for %d" % (tag, c["byte_len"], len(m)))
            check(c["src_qp"] == i.qp.qp_num and c["qp_num"] == info["qpn"],
                  "%s: src_qp %s qp_num %s" % (tag, c["src_qp"],
                                               c["qp_num"]))
            check(c["wc_flags"] & e.IBV_WC_GRH, "%s: IBV_WC_GRH" % tag)
            want = be_imm(imms[k]) if imms[k] is not None else None
            check(c["imm"] == want, "%s: imm %s" % (tag, c["imm"]))
            data = bytes.fromhex(c["data"])
            check(data[GRH:] == m + bytes(SLOT - GRH - len(m)),
                  "%s: payload %d after the GRH" % (tag, k))
            _check_grh(check, tag, data[:GRH], sgid, dgid)
    finally:
        i.close()
        t.close()


def open_fds():
    """fds open now (the listing's own directory fd is closed again)."""
    fds = set()
    for f in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(f))
            fds.add(int(f))
        except OSError:
            pass
    return fds


def channel_flow(check):
    """Completion events on a receive CQ: solicited-only arming ignores a
    plain send and fires on a solicited one; arming for all fires on the
    next.  The channel fd is found as the one CompChannel opens, so waits
    are select() with a deadline, never a bare blocking read."""
    tag = "channel"
    ctx = open_ctx()
    pd = PD(ctx)
    before = open_fds()
    ch = CompChannel(ctx)
    new = sorted(open_fds() - before)
    check(len(new) == 1, "%s: CompChannel opens one fd: %s" % (tag, new))
    fd = new[0] if new else None
    scq = CQ(ctx, 16)
    rcq = CQ(ctx, 16, None, ch, 0)
    qa = make_qp(ctx, pd, scq, e.IBV_QPT_RC, "legacy")
    qb = make_qp(ctx, pd, scq, e.IBV_QPT_RC, "legacy", rcq=rcq)
    mr = MR(pd, MR_LEN, ALL_ACCESS)
    gid = str(ctx.query_gid(1, 0))
    try:
        bring_up(qa, e.IBV_QPT_RC, qb.qp_num, gid)
        bring_up(qb, e.IBV_QPT_RC, qa.qp_num, gid)
        for k in range(3):
            qb.post_recv(RecvWR(wr_id=k, num_sge=1, sg=[
                SGE(mr.buf + 2048 + k * SLOT, SLOT, mr.lkey)]))

        def send(k, flags):
            mr.write(pattern(40 + k, 32), 32, k * 64)
            qa.post_send(SendWR(wr_id=k, num_sge=1, send_flags=flags, sg=[
                SGE(mr.buf + k * 64, 32, mr.lkey)]))
            check(poll(scq, 1)[0]["status"] == e.IBV_WC_SUCCESS,
                  "%s: send %d" % (tag, k))

        def readable(timeout):
            if fd is None:
                return True
            return bool(select.select([fd], [], [], timeout)[0])

        def event_then_wc(k):
            check(readable(WAIT), "%s: event %d within %ss" % (tag, k, WAIT))
            ch.get_cq_event(rcq)
            rcq.ack_events(1)
            wcs = poll(rcq, 1)
            check(wcs[0]["wr_id"] == k and wcs[0]["byte_len"] == 32 and
                  mr.read(32, 2048 + k * SLOT) == pattern(40 + k, 32),
                  "%s: receive %d after its event: %s" % (tag, k, wcs))

        rcq.req_notify(1)
        send(0, e.IBV_SEND_SIGNALED)
        wcs = poll(rcq, 1)  # the completion is there...
        check(wcs[0]["wr_id"] == 0, "%s: unsolicited receive" % tag)
        check(not readable(0), "%s: ...and no event for it" % tag)
        send(1, e.IBV_SEND_SIGNALED | e.IBV_SEND_SOLICITED)
        event_then_wc(1)
        rcq.req_notify(0)
        send(2, e.IBV_SEND_SIGNALED)
        event_then_wc(2)
        check(not readable(0), "%s: one event per arming" % tag)
    finally:
        for o in (qa, qb, mr, rcq, scq, ch, pd, ctx):
            o.close()


if __name__ == "__main__":
    if sys.argv[1:] == ["--target"]:
        sys.exit(target_main())
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        sys.exit(serve_tcp(sys.argv[2], sys.argv[3]))
    sys.exit(errno.EINVAL)
