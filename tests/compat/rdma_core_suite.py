#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""rdma-core's own test suite (pyverbs, as Debian ships it in
/usr/share/doc/rdma-core/tests) on the device: run_tests.py's load, run with
a result that is judged here.

    rdma_core_suite.py TESTS-DIR DEVICE [unittest -k patterns...]

Passes when no test fails or errs and every skipped test is skipped for a
reason docs/verbs.md ("Verbs and their status") gives: another vendor's device
(mlx5, EFA, VFIO), hardware this machine lacks (a GPU's dma-buf, CUDA,
huge pages), or a feature softverbs leaves out (raw packet QPs and flow
steering, tag matching).  A test that a
regression turns into a skip ("... is not supported") fails the run.
"""
import importlib.util
import os
import re
import sys
import unittest

# (test id, reason): both regular expressions, searched.
EXPECTED_SKIPS = [
    # Other vendors' devices and interfaces.
    (r"\.test_(mlx5|efa)", r""),
    (r"", r"non (MLX5|EFA) device|not an MLX5 device|"
          r"PCI device must be passed"),
    # This machine: no GPU memory, CUDA or huge pages to test with.
    (r"", r"dmabuf|dma-buf|DmaBuf|[Cc][Uu][Dd][Aa]|huge pages"),
    # Left out (docs/verbs.md): raw packet QPs (QP type 8) with their
    # flow steering and RSS, tag matching.  (XRC runs: its skip is gone.)
    (r"", r"Create QP type 8 is not supported|Raw Packet QP"),
    (r"\.test_tag_matching\.", r"Extended CQ is not supported"),
]


def expected(test_id, reason):
    return any(re.search(i, test_id) and re.search(r, reason)
               for i, r in EXPECTED_SKIPS)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    tdir = os.path.abspath(sys.argv[1])
    dev = sys.argv[2]
    patterns = sys.argv[3:]
    sys.path.insert(0, tdir)
    os.chdir(tdir)
    from args_parser import parser  # noqa: E402 (rdma-core's)
    sys.argv = [sys.argv[0], "--dev", dev]
    parser.parse_args()
    spec = importlib.util.spec_from_file_location(
        "tests", os.path.join(tdir, "__init__.py"),
        submodule_search_locations=[tdir])
    tests = importlib.util.module_from_spec(spec)
    sys.modules["tests"] = tests
    spec.loader.exec_module(tests)
    loader = unittest.TestLoader()
    if patterns:
        loader.testNamePatterns = ["*%s*" % p for p in patterns]
    suite = loader.loadTestsFromModule(tests)
    res = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    unexpected = [(t.id(), r) for t, r in res.skipped
                  if not expected(t.id(), r)]
    ran = res.testsRun - len(res.skipped)
    print("rdma-core suite on %s: %d tests, %d ran, %d skipped "
          "(%d for a reason not documented), %d failed, %d errors"
          % (dev, res.testsRun, ran, len(res.skipped), len(unexpected),
             len(res.failures), len(res.errors)))
    for tid, r in unexpected:
        print("UNEXPECTED SKIP %s: %s" % (tid, r))
    ok = res.wasSuccessful() and not unexpected and ran > 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
