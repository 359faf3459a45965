# SPDX-License-Identifier: MIT
"""pyverbs moving data between two hosts: this process posts from one
network namespace, a target server (pyverbs_dp_util.py --serve) in the
other owns the memory and the receives; each talks to its own host's
daemon, and QPN, GID, rkey and address cross a TCP connection between the
two addresses, as a Python user's out-of-band exchange would.  The flows
of pyverbs_dp2_test.py (RC send / send-imm / write / write-imm / read /
fetch-add / compare-swap and REM_ACCESS_ERR, UD sends with the GRH, both
post APIs), every byte compared, go over RoCE v2 between the GIDs of the
two addresses: IPv4-mapped or IPv6, as the addresses are.

  pyverbs_wire_test.py LOCAL_ADDR PEER_ADDR PORT

Run by tests/compat/pyverbs_wire.sh (which makes the hosts and starts
the server) with Debian's /usr/bin/python3 and our library first on
LD_LIBRARY_PATH.
"""
import faulthandler
import sys

from pyverbs_common import check, check_our_library, finish

import pyverbs_dp_util as dp  # noqa: E402


def main():
    faulthandler.dump_traceback_later(80, exit=True)
    local, peer = sys.argv[1], (sys.argv[2], int(sys.argv[3]))
    ctx = dp.open_ctx()
    sgid_index = dp.gid_index_of(ctx, local)
    # The peer's GID is not this host's: the data has to cross the wire.
    foreign = dp.gid_index_of(ctx, peer[0])
    ctx.close()
    check(sgid_index is not None, "a RoCE v2 GID for %s here" % local)
    check(foreign is None, "%s is not a GID here (index %s)" %
          (peer[0], foreign))
    if sgid_index is not None:
        for i_api, t_api in (("legacy", "legacy"), ("ex", "ex"),
                             ("legacy", "ex")):
            dp.rc_flow(check, i_api, t_api, peer, sgid_index)
            dp.ud_flow(check, i_api, t_api, peer, sgid_index)
    check(dp.stop_server(peer) > 0, "target server ends")
    check_our_library()
    return finish("pyverbs data path between hosts, %s -> %s" %
                  (local, peer[0]))


if __name__ == "__main__":
    sys.exit(main())
