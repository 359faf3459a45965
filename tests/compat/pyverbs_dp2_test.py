# SPDX-License-Identifier: MIT
"""pyverbs moving data between two processes: this one posts, a child
(pyverbs_dp_util.py --target, the same daemon) owns the memory and the
receives; QPN, GID, rkey and address cross a pipe, as a Python user's
out-of-band exchange would.  RC send / send-imm / write / write-imm /
read / fetch-add / compare-swap and REM_ACCESS_ERR, UD sends with the
GRH, each with the legacy and the extended post API, and one mixed pair
(legacy poster, CQEX target).  Every byte is compared.

Run with Debian's /usr/bin/python3 and our library first on
LD_LIBRARY_PATH (tests/compat/tests.cmake).
"""
import faulthandler
import sys

from pyverbs_common import check, check_our_library, finish, private_daemon

private_daemon("pyverbs_dp2")

import pyverbs_dp_util as dp  # noqa: E402

def main():
    faulthandler.dump_traceback_later(150, exit=True)
    for i_api, t_api in (("legacy", "legacy"), ("ex", "ex"),
                         ("legacy", "ex")):
        dp.rc_flow(check, i_api, t_api, True)
        dp.ud_flow(check, i_api, t_api, True)
    check_our_library()
    return finish("pyverbs data path, two processes")


if __name__ == "__main__":
    sys.exit(main())
