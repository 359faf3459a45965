# SPDX-License-Identifier: MIT
"""pyverbs on the data-path objects: CQs, completion channels, QPs (RC, UD)
through the kernel state machine, query round trips, flush on ERR, SRQs,
AHs, and the extended QP/CQ creation.

Then data moved within this process the way Python users move it
(pyverbs_dp_util.py): RC send / send-imm / write / write-imm / read /
fetch-add / compare-swap and REM_ACCESS_ERR, UD sends with the GRH, with
the legacy and the extended post APIs (CQ.poll and CQEX), and completion
events on a channel.  Between two processes: pyverbs_dp2_test.py.

Run with Debian's /usr/bin/python3 and our library first on
LD_LIBRARY_PATH (tests/compat/tests.cmake).
"""
import errno
import faulthandler
import sys

from pyverbs_common import (check, check_our_library, expect_errno,
                            finish, open_only_device, private_daemon)

private_daemon("pyverbs_dp")

import pyverbs.enums as e  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.cq import CQ, CompChannel, CQEX, CqInitAttrEx  # noqa: E402
from pyverbs.qp import QP, QPAttr, QPInitAttr, QPCap  # noqa: E402
from pyverbs.srq import SRQ, SrqInitAttr, SrqAttr  # noqa: E402
from pyverbs.addr import AH, AHAttr, GlobalRoute  # noqa: E402
from pyverbs.wr import RecvWR, SGE, SendWR  # noqa: E402
import pyverbs_dp_util as dp  # noqa: E402

def poll_n(cq, n):
    got = []
    for _ in range(1000000):
        k, wcs = cq.poll(n - len(got))
        got += wcs[:k]
        if len(got) == n:
            break
    return got


def qp_attr(ctx, gid):
    a = QPAttr(port_num=1)
    a.qkey = 0x11111111
    a.path_mtu = e.IBV_MTU_1024
    a.max_dest_rd_atomic = 1
    a.max_rd_atomic = 1
    a.min_rnr_timer = 12
    a.timeout = 14
    a.retry_cnt = 7
    a.rnr_retry = 7
    gr = GlobalRoute(dgid=gid, sgid_index=0)
    a.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
    return a


def rc_cycle(ctx, pd, cq, gid):
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1,
                max_recv_sge=1, max_inline_data=32)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap),
            qp_attr(ctx, gid))
    check(qp.qp_state == e.IBV_QPS_INIT, "RC QP in INIT after create")
    check(1 < qp.qp_num <= 0xffffff, "QPN range")
    attr, init = qp.query(e.IBV_QP_STATE | e.IBV_QP_CAP)
    check(init.cap.max_inline_data >= 32, "inline cap reported")
    a = qp_attr(ctx, gid)
    a.dest_qp_num = qp.qp_num
    # INIT -> RTS directly is not a transition.
    rts = QPAttr(qp_state=e.IBV_QPS_RTS)
    expect_errno(lambda: qp.modify(rts, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN),
                 errno.EINVAL, "INIT -> RTS")
    qp.to_rtr(a)  # pyverbs: INIT -> INIT -> RTR
    check(qp.qp_state == e.IBV_QPS_RTR, "RTR")
    rts = QPAttr(qp_state=e.IBV_QPS_RTS)
    rts.timeout, rts.retry_cnt, rts.rnr_retry, rts.max_rd_atomic = 14, 7, 7, 1
    qp.modify(rts, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT |
              e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
              e.IBV_QP_MAX_QP_RD_ATOMIC)
    check(qp.qp_state == e.IBV_QPS_RTS, "RTS")
    attr, init = qp.query(e.IBV_QP_STATE | e.IBV_QP_DEST_QPN)
    check(attr.dest_qp_num == qp.qp_num, "dest QPN round trip")
    check(attr.timeout == 14 and attr.retry_cnt == 7, "RC attrs round trip")

    buf = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
    for i in range(3):
        qp.post_recv(RecvWR(wr_id=i, num_sge=1,
                            sg=[SGE(buf.buf, 64, buf.lkey)]))
    expect_errno(lambda: qp.post_send(SendWR(opcode=99, num_sge=1,
                                             sg=[SGE(buf.buf, 8, buf.lkey)])),
                 errno.EINVAL, "bad opcode")
    a = QPAttr(qp_state=e.IBV_QPS_ERR)
    qp.modify(a, e.IBV_QP_STATE)
    wcs = poll_n(cq, 3)
    check([w.wr_id for w in wcs] == [0, 1, 2], "flushed in order")
    check(all(w.status == e.IBV_WC_WR_FLUSH_ERR for w in wcs), "flush status")
    qp.close()
    buf.close()


def main():
    faulthandler.dump_traceback_later(100, exit=True)
    with open_only_device() as ctx:
        gid = ctx.query_gid(1, 0)
        pd = PD(ctx)
        ch = CompChannel(ctx)
        cq = CQ(ctx, 16, None, ch, 0)
        check(cq.cqe >= 16, "cqe")
        expect_errno(lambda: CQ(ctx, 0), errno.EINVAL, "CQ of 0")
        rc_cycle(ctx, pd, cq, gid)
        cq.resize(32)
        check(cq.cqe >= 32, "resize")

        # UD: QP(pd, attr, qp_attr) goes all the way to RTS.
        cap = QPCap(max_send_wr=2, max_recv_wr=2)
        ud = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap),
                qp_attr(ctx, gid))
        check(ud.qp_state == e.IBV_QPS_RTS, "UD in RTS")
        attr, _ = ud.query(e.IBV_QP_QKEY)
        check(attr.qkey == 0x11111111, "qkey round trip")
        # (pd.close() would close the QP first: pyverbs tracks children,
        # so the EBUSY rule is covered by test_qp's busy_rules.)

        ah = AH(pd, attr=AHAttr(port_num=1, is_global=1,
                                gr=GlobalRoute(dgid=gid, sgid_index=0)))
        expect_errno(lambda: AH(pd, attr=AHAttr(port_num=1, is_global=0)),
                     errno.EINVAL, "AH without GRH")
        ah.close()
        ud.close()

        srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1)))
        sattr = srq.query()
        check(sattr.max_wr >= 8, "SRQ max_wr")
        srq.modify(SrqAttr(srq_limit=2), e.IBV_SRQ_LIMIT)
        check(srq.query().srq_limit == 2, "SRQ limit")
        expect_errno(lambda: srq.modify(SrqAttr(srq_limit=100),
                                        e.IBV_SRQ_LIMIT),
                     errno.EINVAL, "limit above max_wr")
        srq.close()

        cqx = CQEX(ctx, CqInitAttrEx(cqe=8,
                                     wc_flags=e.IBV_WC_STANDARD_FLAGS))
        cqx.close()
        # Completion timestamps are there (test_cq checks their values);
        # VLAN information is not.
        CQEX(ctx, CqInitAttrEx(
            cqe=8, wc_flags=e.IBV_WC_STANDARD_FLAGS |
            e.IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
            e.IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)).close()
        expect_errno(lambda: CQEX(ctx, CqInitAttrEx(
            cqe=8, wc_flags=e.IBV_WC_EX_WITH_CVLAN)),
            errno.EOPNOTSUPP, "VLAN")
        cq.close()
        ch.close()
        pd.close()
    # Data, one process (each flow opens its own contexts).
    for api in ("legacy", "ex"):
        dp.rc_flow(check, api, api, False)
        dp.ud_flow(check, api, api, False)
    dp.channel_flow(check)
    check_our_library()
    return finish("pyverbs data path, one process")


if __name__ == "__main__":
    sys.exit(main())
