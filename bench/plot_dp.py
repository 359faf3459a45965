#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Turns bench/dp_bench.sh's numbers into its report.

    plot_dp.py DP.TSV DP.MD DP.PNG

DP.TSV: what, size ("-" when none), value ("failed" when the run failed,
"k/n" for the error sweeps), note (unit).  Every target of the data-path
issue is a ratio of two numbers from the same run: the table shows both
and the ratio, and whether the target is met.  Writes the plot when
matplotlib is there (Debian: python3-matplotlib); without it, removes a
DP.PNG left by an earlier run, so no plot of other numbers stays beside
the report.
"""
import os
import platform
import sys
import time


def load(path):
    rows = {}
    with open(path) as f:
        next(f)
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) >= 3:
                rows[(p[0], p[1])] = p[2]
    return rows


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def human(size):
    s = int(size)
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if s >= div and s % div == 0:
            return "%d %s" % (s // div, unit)
    return "%d B" % s


def main():
    tsv, md, png = sys.argv[1:4]
    r = load(tsv)

    def v(what, size):
        return num(r.get((what, str(size))))

    out = ["# Data path on one host: softverbs beside its peers", ""]
    out.append("Made by `bench/dp_bench.sh` on %s (%s, %d CPUs), load average "
               "%s at the start, %s at the end.  Every line compares numbers "
               "from this one run: each figure compared with a peer's is the median "
               "of %s rounds, every round running each peer and ours right "
               "after it; the fallback's figures are the median of three runs.  "
               "Nothing here is asserted by a test."
               % (time.strftime("%Y-%m-%d %H:%M"), platform.machine(),
                  os.cpu_count() or 0, os.environ.get("DP_LOAD_START", "?"),
                  os.environ.get("DP_LOAD_END", "?"),
                  os.environ.get("DP_ROUNDS", "?")))
    out.append("")
    out.append("## Targets")
    out.append("")
    out.append("| target | softverbs | peer | ratio | aim | met |")
    out.append("|---|---:|---:|---:|---|---|")

    def line(name, ours, peer, aim, lower_better, unit):
        if ours is None or peer is None or peer == 0:
            out.append("| %s | %s | %s | - | %s | no data |" % (
                name, "failed" if ours is None else "%.2f %s" % (ours, unit),
                "failed" if peer is None else "%.2f %s" % (peer, unit), aim))
            return
        ratio = ours / peer
        limit = float(aim.split("x")[0].split(" ")[-1])
        met = ratio <= limit if lower_better else ratio >= limit
        out.append("| %s | %.2f %s | %.2f %s | %.2fx | %s | %s |" % (
            name, ours, unit, peer, unit, ratio, aim, "yes" if met else "no"))

    fi = v("fi_pingpong_shm_lat", 8)
    line("ib_write_lat 8 B typical vs fi_pingpong shm", v("write_lat_direct", 8),
         fi, "<= 2x", True, "us")
    line("ib_send_lat 8 B typical vs fi_pingpong shm", v("send_lat_direct", 8),
         fi, "<= 1.5x", True, "us")
    line("ib_read_lat 8 B typical vs fi_pingpong shm", v("read_lat_direct", 8),
         fi, "<= 1.5x", True, "us")
    for s in (65536, 1048576):
        line("ib_write_bw %s vs UCT put_bw cma zcopy" % human(s),
             v("write_bw_direct", s), v("uct_put_bw_cma", s), ">= 1.0x", False,
             "MB/s")
        line("ib_read_bw %s vs UCT get cma zcopy" % human(s),
             v("read_bw_direct", s), v("uct_get_bw_cma", s), ">= 1.0x", False,
             "MB/s")
    tag = v("ucx_tag_bw_posix", 8)
    line("ib_write_bw 8 B vs UCX tag_bw posix", v("write_bw_direct", 8), tag,
         ">= 1.0x", False, "MB/s")
    line("ib_send_bw 8 B vs UCX tag_bw posix", v("send_bw_direct", 8), tag,
         ">= 1.0x", False, "MB/s")
    for s in (524288, 1048576, 2097152, 4194304):
        line("ib_write_lat %s: 99%% / typical" % human(s),
             v("write_lat_p99", s), v("write_lat_typical", s), "<= 3x", True,
             "us")
    out.append("")
    out.append("## Tails beside the machine's own")
    out.append("")
    out.append("The same one-sided ping-pong without softverbs (bench/"
               "cma_pingpong.c: one `process_vm_writev` each way, spinning "
               "on the last byte), run right after each ib_write_lat size: "
               "where its ratio is as high, the tail is the machine's.")
    out.append("")
    out.append("| size | ib_write_lat 99% / typical | bare CMA ping-pong "
               "99% / typical |")
    out.append("|---|---:|---:|")
    for s in (524288, 1048576, 2097152, 4194304):
        cells = []
        for p99, typ in (("write_lat_p99", "write_lat_typical"),
                         ("cma_pingpong_p99", "cma_pingpong_typical")):
            a, b = v(p99, s), v(typ, s)
            cells.append("%.2f / %.2f us = %.2fx" % (a, b, a / b)
                         if a is not None and b else "-")
        out.append("| %s | %s |" % (human(s), " | ".join(cells)))
    out.append("")
    out.append("## Runs of -a (2 B .. 8 MiB) that failed")
    out.append("")
    out.append("| test | -q 1 | -q 4 | -q 8 |")
    out.append("|---|---|---|---|")
    for t in ("write_bw", "send_bw", "read_bw"):
        out.append("| ib_%s | %s |" % (t, " | ".join(
            r.get(("%s_a_q%d" % (t, q), "-"), "-") for q in (1, 4, 8))))
    for t in ("write_bw", "send_bw", "read_bw"):
        out.append("| ib_%s, SOFTVERBS_NO_CMA=1 | %s |" % (t, " | ".join(
            r.get(("%s_a_q%d_nocma" % (t, q), "-"), "-")
            for q in (1, 4, 8))))
    out.append("")
    out.append("## The floor: what a system call costs here")
    out.append("")
    out.append("Direct execution moves a message with one system call: "
               "`pwrite`/`pread` on the target's `/proc/PID/mem` for one "
               "range of up to 8 KiB, `process_vm_writev` (or `readv`) "
               "otherwise, and for a batch of small writes one for all of "
               "them; a latency can go no lower than that call.")
    out.append("")
    out.append("| what | ns |")
    out.append("|---|---:|")
    for w in ("syscall_getppid", "process_vm_writev_8B",
              "proc_pid_mem_pwrite_8B", "clock_gettime"):
        out.append("| %s | %s |" % (w, r.get((w, "-"), "-")))
    out.append("")
    pw = num(r.get(("proc_pid_mem_pwrite_8B", "-")))
    if pw and fi:
        out.append("One 8-byte `pwrite` on `/proc/PID/mem` alone takes %.2fx "
                   "fi_pingpong's 8-byte latency here.  ib_write_lat's "
                   "target waits on its memory, not on a CQ, and its own "
                   "thread sleeps: a WRITE lands through that call (or by "
                   "waking the thread, tens of microseconds), so on this "
                   "machine its latency can come no closer to the peer.  "
                   "SENDs and small READs go as packets to a target that "
                   "polls (docs/architecture.md, \"Which way a message "
                   "goes\") and pay no system call." % (pw / 1000.0 / fi))
        out.append("")
    out.append("## Direct execution and the fallback (SOFTVERBS_NO_CMA=1)")
    out.append("")
    out.append("| test | size | direct | no CMA |")
    out.append("|---|---|---:|---:|")
    for t, sizes, unit in (("write_lat", (8,), "us"), ("send_lat", (8,), "us"),
                           ("read_lat", (8,), "us"),
                           ("write_bw", (8, 65536, 1048576), "MB/s"),
                           ("read_bw", (8, 65536, 1048576), "MB/s"),
                           ("send_bw", (8, 65536, 1048576), "MB/s")):
        for s in sizes:
            out.append("| ib_%s | %s | %s | %s |" % (
                t, human(s), r.get(("%s_direct" % t, str(s)), "-"),
                r.get(("%s_nocma" % t, str(s)), "-")) + (" %s" % unit if False else ""))
    out.append("")
    out.append("Bandwidth in MB/s as the tools print it; latency in "
               "microseconds (perftest's t_typical, fi_pingpong's usec/xfer).")
    out.append("")
    with open(md, "w") as f:
        f.write("\n".join(out))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        # No plot of another run's numbers beside this report.
        if os.path.exists(png):
            os.remove(png)
        sys.stderr.write("plot_dp.py: no matplotlib, so no %s "
                         "(Debian: apt install python3-matplotlib)\n" % png)
        return 0
    labels, ours, peers = [], [], []
    for name, a, b in (
            ("write 64K", v("write_bw_direct", 65536), v("uct_put_bw_cma", 65536)),
            ("write 1M", v("write_bw_direct", 1048576), v("uct_put_bw_cma", 1048576)),
            ("read 64K", v("read_bw_direct", 65536), v("uct_get_bw_cma", 65536)),
            ("read 1M", v("read_bw_direct", 1048576), v("uct_get_bw_cma", 1048576))):
        labels.append(name)
        ours.append(a or 0)
        peers.append(b or 0)
    fig, ax = plt.subplots(figsize=(7, 4))
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], ours, 0.4, label="softverbs (perftest)")
    ax.bar([i + 0.2 for i in x], peers, 0.4, label="UCT over CMA (zcopy)")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels)
    ax.set_ylabel("MB/s")
    ax.set_title("One host: bandwidth beside UCT's CMA transport, same run")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
