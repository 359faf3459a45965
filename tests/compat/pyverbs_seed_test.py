# SPDX-License-Identifier: MIT
"""pyverbs PD and MR (reg, rereg, import, ODP) on our libibverbs.so.1.

Run with Debian's /usr/bin/python3 and our library first on
LD_LIBRARY_PATH (tests/compat/tests.cmake).  A private daemon per run
(SOFTVERBS_SOCKET).  Prints FAIL lines and exits 1 on failure.
"""
import mmap
import ctypes
import errno
import os
import sys

from pyverbs_common import (check, check_our_library, expect_errno,
                            finish, open_only_device, private_daemon)

private_daemon("pyverbs_seed")

import pyverbs.device as d  # noqa: E402
import pyverbs.enums as e  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402

def buf_addr(m):
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


def main():
    lw = e.IBV_ACCESS_LOCAL_WRITE
    with open_only_device() as ctx:
        pd = PD(ctx)
        mr = MR(pd, 8192, lw | e.IBV_ACCESS_REMOTE_READ)
        check(mr.lkey == mr.rkey and mr.lkey >= 256, "keys")
        check(mr.length == 8192, "length")
        mr.write(b"softverbs", 9)
        check(mr.read(9, 0) == b"softverbs", "buffer round trip")
        expect_errno(lambda: MR(pd, 4096, e.IBV_ACCESS_REMOTE_WRITE),
                     errno.EINVAL, "remote write without local write")

        # rereg: keys and handle stay; errors map to PyverbsRDMAError.
        keys = (mr.lkey, mr.rkey, mr.handle)
        mr.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, pd, 0, 0,
                 lw | e.IBV_ACCESS_REMOTE_WRITE)
        pd2 = PD(ctx)
        mr.rereg(e.IBV_REREG_MR_CHANGE_PD, pd2, 0, 0, 0)
        region = mmap.mmap(-1, 16384)
        mr.rereg(e.IBV_REREG_MR_CHANGE_TRANSLATION, pd, buf_addr(region),
                 16384, 0)
        check((mr.lkey, mr.rkey, mr.handle) == keys, "keys after rereg")
        try:
            mr.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, pd, 0, 0,
                     e.IBV_ACCESS_REMOTE_WRITE)
            check(False, "rereg with bad access")
        except PyverbsRDMAError:
            pass

        # Import through another context of the same ufile.
        with d.Context(cmd_fd=os.dup(ctx.cmd_fd)) as ctx2:
            ipd = PD(ctx2, handle=pd2.handle)
            check(ipd.handle == pd2.handle, "imported pd handle")
            imr = MR(ipd, handle=mr.handle)
            check(imr.lkey == keys[0] and imr.rkey == keys[1],
                  "imported keys")
            check(imr.length == 16384, "imported length")
            imr.unimport()
            imr = MR(ipd, handle=mr.handle)
            imr.unimport()
            expect_errno(lambda: MR(ipd, handle=4242), errno.ENOENT,
                         "import of a bogus handle")
            expect_errno(lambda: PD(ctx2, handle=mr.handle), errno.EINVAL,
                         "import of an MR handle as a PD")
            ipd.unimport()

        # ODP, explicit and implicit.
        odp = MR(pd, 4096, lw | e.IBV_ACCESS_ON_DEMAND)
        imp = MR(pd, 0, lw | e.IBV_ACCESS_ON_DEMAND, implicit=True)
        check(imp.length == 2**64 - 1, "implicit ODP length")
        odp.close()
        imp.close()
        mr.close()
        pd2.close()
        pd.close()
        region.close()
    check_our_library()
    return finish("pyverbs PD/MR")


if __name__ == "__main__":
    sys.exit(main())
