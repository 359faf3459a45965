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
import os
import sys

os.environ["SOFTVERBS_SOCKET"] = "svtest.pyverbs_dp2.%d" % os.getpid()
os.environ.setdefault("SOFTVERBS_IDLE_TIMEOUT", "2")

import pyverbs_dp_util as dp  # noqa: E402

failures = []


def check(cond, msg):
    if not cond:
        print("FAIL: " + msg)
        failures.append(msg)


def main():
    faulthandler.dump_traceback_later(150, exit=True)
    for i_api, t_api in (("legacy", "legacy"), ("ex", "ex"),
                         ("legacy", "ex")):
        dp.rc_flow(check, i_api, t_api, True)
        dp.ud_flow(check, i_api, t_api, True)
    libs = dp.loaded_libibverbs()
    build = os.environ.get("SV_BUILD_DIR")
    check(len(libs) == 1 and (not build or libs[0].startswith(build)),
          "our libibverbs.so.1 is loaded: %s" % libs)
    print("pyverbs data path, two processes: %s" %
          ("FAILED" if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
