# SPDX-License-Identifier: MIT
"""What the pyverbs tests here share: a private daemon per run, checks that
print FAIL lines and are counted, opening the one device, and making sure
the libibverbs.so.1 in this process is ours.

Import this and call private_daemon() before importing pyverbs: the
library reads SOFTVERBS_SOCKET when it is loaded.
"""
import os

failures = []


def private_daemon(name):
    """A daemon of our own (the runner's default socket is shared)."""
    os.environ["SOFTVERBS_SOCKET"] = "svtest.%s.%d" % (name, os.getpid())
    os.environ.setdefault("SOFTVERBS_IDLE_TIMEOUT", "2")


def check(cond, msg):
    if not cond:
        print("FAIL: " + msg)
        failures.append(msg)


def expect_errno(fn, err, msg):
    from pyverbs.pyverbs_error import PyverbsRDMAError

    try:
        fn()
    except PyverbsRDMAError as ex:
        check(ex.error_code == err,
              "%s: errno %d, expected %d" % (msg, ex.error_code, err))
        return
    check(False, "%s: no error" % msg)


def open_only_device():
    """A Context on the device, checking it is the only one."""
    import pyverbs.device as d

    devs = d.get_device_list()
    check(len(devs) == 1, "one device")
    return d.Context(name=devs[0].name.decode())


def loaded_libibverbs():
    with open("/proc/self/maps") as f:
        return sorted({l.split()[-1] for l in f if "libibverbs.so.1" in l})


def check_our_library():
    """Exactly one libibverbs.so.1 is mapped, from SV_BUILD_DIR if set."""
    libs = loaded_libibverbs()
    build = os.environ.get("SV_BUILD_DIR")
    check(len(libs) == 1 and (not build or libs[0].startswith(build)),
          "our libibverbs.so.1 is loaded: %s" % libs)


def finish(what):
    """Prints the verdict; the exit status."""
    print("%s: %s" % (what, "FAILED" if failures else "ok"))
    return 1 if failures else 0
