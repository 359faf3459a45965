# SPDX-License-Identifier: MIT
"""pyverbs (Debian's python3-pyverbs) on our libibverbs.so.1.

Run with Debian's /usr/bin/python3 by abi_symbols.sh, our library first on
LD_LIBRARY_PATH.  Every pyverbs extension module must import (they link
libibverbs, libmlx5, libefa and librdmacm, so a missing symbol or version
fails here), the libibverbs.so.1 in the process must be ours, and pyverbs
must see and use our device.  Prints FAIL lines and exits 1 on failure.
"""
import glob
import importlib
import os
import sys

failures = []


def fail(msg):
    print("FAIL: " + msg)
    failures.append(msg)


def module_names():
    import pyverbs
    root = os.path.dirname(os.path.dirname(pyverbs.__file__))
    names = []
    for path in glob.glob(os.path.join(root, "pyverbs", "**", "*.so"),
                          recursive=True):
        rel = os.path.relpath(path, root)
        names.append(rel.split(".", 1)[0].replace(os.sep, "."))
    return sorted(names)


def mapped_libibverbs():
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libibverbs.so.1"):
                return path
    return None


def main():
    names = module_names()
    if len(names) < 10:
        fail("only %d pyverbs modules found: %s" % (len(names), names))
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # an ImportError names the missing symbol
            fail("import %s: %s" % (name, exc))
    print("imported %d pyverbs modules" % len(names))

    lib = mapped_libibverbs()
    want = os.path.realpath(os.path.join(os.environ["SV_BUILD_DIR"], "lib"))
    if not lib or not lib.startswith(want + "/"):
        fail("libibverbs.so.1 mapped from %s, expected under %s" % (lib, want))

    import pyverbs.device as device
    import pyverbs.enums as enums
    devs = [d.name.decode() for d in device.get_device_list()]
    if devs != ["sv0"]:
        fail("get_device_list: %s" % devs)
        return
    ctx = device.Context(name="sv0")
    try:
        attr = ctx.query_device()
        if attr.phys_port_cnt != 1:
            fail("phys_port_cnt %d" % attr.phys_port_cnt)
        port = ctx.query_port(1)
        if port.state != enums.IBV_PORT_ACTIVE:
            fail("port state %d" % port.state)
        if port.link_layer != enums.IBV_LINK_LAYER_ETHERNET:
            fail("link layer %d" % port.link_layer)
    finally:
        ctx.close()


main()
if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
print("abi_pyverbs: all checks passed")
