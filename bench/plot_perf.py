#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Turns bench/perf_bench.sh's numbers into the report.

    plot_perf.py PERF.TSV PERF.MD PERF.PNG

PERF.TSV: test, size, value, value2 ("failed" when the pair failed).
Bandwidth values are MiB/s (perftest's and UCX's "MB" are 2^20 bytes);
latency values are microseconds, value = median (perftest t_typical, UCX
50%ile), value2 = average.  Writes the markdown report always and the plot
when matplotlib is installed (Debian: python3-matplotlib).
"""
import os
import platform
import sys
import time

BW = [("write_bw", "ib_write_bw"), ("read_bw", "ib_read_bw"),
      ("send_bw", "ib_send_bw"), ("memcpy", "memcpy (1 thread)"),
      ("ucx_tag_bw", "UCX tag_bw"), ("ucx_ucp_put_bw", "UCX ucp_put_bw")]
LAT = [("send_lat", "ib_send_lat"), ("write_lat", "ib_write_lat"),
       ("ucx_tag_lat", "UCX tag_lat")]


def load(path):
    data = {}
    with open(path) as f:
        next(f)
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            test, size, v1 = parts[0], int(parts[1]), parts[2]
            v2 = parts[3] if len(parts) > 3 else "-"
            data[(test, size)] = (num(v1), num(v2), v1 == "failed")
    return data


def num(s):
    try:
        return float(s)
    except ValueError:
        return None


def human(size):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div and size % div == 0:
            return "%d %s" % (size // div, unit)
    return "%d B" % size


def cell(data, test, size, lat=False):
    if (test, size) not in data:
        return ""
    v1, v2, failed = data[(test, size)]
    if failed or v1 is None:
        return "failed"
    if lat:
        return "%.2f / %.2f" % (v1, v2) if v2 is not None else "%.2f" % v1
    # Three significant figures for the small ones ("0" would hide them).
    return "%.0f" % v1 if v1 >= 100 else "%.3g" % v1


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "Linux %s, %d CPUs%s" % (platform.release(), os.cpu_count() or 0,
                                    " (%s)" % cpu if cpu else "")


def value(data, test, size):
    v = data.get((test, size))
    return None if v is None or v[2] else v[0]


def standing(data):
    out = []
    w, u, m = (value(data, "write_bw", 65536), value(data, "ucx_tag_bw", 65536),
               value(data, "memcpy", 65536))
    if w is None:
        out.append("- ib_write_bw at 64 KiB: no number (the pair failed or "
                   "was not run).")
    else:
        line = "- ib_write_bw at 64 KiB: %.0f MiB/s" % w
        if u:
            line += (", %.2fx UCX tag_bw over shared memory (%.0f MiB/s; "
                     "aim: 1x or better)" % (w / u, u))
        if m:
            line += ", %.0f%% of one thread's memcpy (%.0f MiB/s)" % (100 * w / m, m)
        out.append(line + ".")
    for t in ("send_lat", "write_lat"):
        v = value(data, t, 8)
        if v is None:
            out.append("- %s at 8 B: no number." % t)
        else:
            out.append("- %s at 8 B: %.2f us one way (median; aim: 1 us): "
                       "%s." % (t, v, "within the aim" if v <= 1.0
                                else "%.1fx the aim" % v))
    sl, wl = value(data, "send_lat", 8), value(data, "write_lat", 8)
    if sl and wl and wl > 10 * sl:
        out.append("- ib_write_lat at 8 B is %.0fx ib_send_lat: the target of "
                   "an RDMA write polls its memory, not its CQ, so the write "
                   "lands only when its progress thread runs, and that thread "
                   "sleeps armed (a doorbell wakes it) because spinning next "
                   "to the application would take its CPU: with 2 CPUs and "
                   "4 threads (2 busy-polling applications, 2 progress "
                   "threads) one wake-up, by eventfd or timer, costs tens of "
                   "microseconds on this VM, and that is the floor." %
                   (wl / sl))
    w8, u8 = value(data, "write_bw", 8), value(data, "ucx_tag_bw", 8)
    if w8 is not None:
        out.append("- small messages (ib_write_bw at 8 B: %.1f MiB/s%s): each "
                   "costs a WQE through the requester, a packet with its "
                   "headers through a ring and the responder, and an ACK "
                   "back; on 2 CPUs the passive side's progress thread shares "
                   "a CPU with the busy-polling applications, so the rate "
                   "follows the scheduler more than the code, and a thread "
                   "preempted while it holds a ring or QP lock stalls the "
                   "other side until it runs again (locks yield after a short "
                   "spin to bound that)." %
                   (w8, "; UCX tag_bw %.0f MiB/s" % u8 if u8 else ""))
    failed = ["%s %s" % (t, human(sz)) for (t, sz), v in sorted(data.items()) if v[2]]
    if failed:
        out.append("- pairs that failed (perf_bench.sh prints the first "
                   "error line of each): %s." %
                   ", ".join(failed))
    ul = value(data, "ucx_tag_lat", 8)
    if ul is not None:
        out.append("- UCX tag_lat at 8 B over shared memory: %.2f us, "
                   "for scale." % ul)
    return out


def write_md(data, path, png):
    sizes = sorted({s for (_, s) in data})
    have = {t for (t, _) in data}
    bw = [(t, n) for t, n in BW if t in have]
    lat = [(t, n) for t, n in LAT if t in have]
    L = ["# Data-path benchmark", "",
         "Run %s on %s. Unmodified perftest (`-x 0`, client and server "
         "processes on this host) under `softverbs run`; memcpy measured in "
         "the same run; UCX `ucx_perftest` with `UCX_TLS=posix,self`. "
         "`bench/perf_bench.sh` made this page; nothing here is asserted." %
         (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), machine()), ""]
    load = os.environ.get("PERF_LOAD")
    if load:
        L += ["Load average when the run started: %s (2 busy-polling "
              "processes per pair need 2 idle CPUs; a higher load makes "
              "every number noisy)." % load, ""]
    if bw:
        L += ["## Bandwidth (MiB/s)", "",
              "| size | " + " | ".join(n for _, n in bw) + " |",
              "|---:|" + "---:|" * len(bw)]
        for s in sizes:
            L.append("| %s | " % human(s) +
                     " | ".join(cell(data, t, s) for t, _ in bw) + " |")
        L.append("")
    if lat:
        L += ["## Latency (µs, one way: median / average)", "",
              "| size | " + " | ".join(n for _, n in lat) + " |",
              "|---:|" + "---:|" * len(lat)]
        for s in sizes:
            if any((t, s) in data for t, _ in lat):
                L.append("| %s | " % human(s) +
                         " | ".join(cell(data, t, s, True) for t, _ in lat) + " |")
        L.append("")
    L += ["## Where it stands", ""] + standing(data) + [""]
    if png:
        L += ["![bandwidth by message size](%s)" % os.path.basename(png), ""]
    with open(path, "w") as f:
        f.write("\n".join(L))


def plot(data, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_perf: matplotlib missing (python3-matplotlib): no plot")
        return False
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for t, name in BW:
        pts = sorted((s, v[0]) for (tt, s), v in data.items()
                     if tt == t and not v[2] and v[0] is not None)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    markersize=3, label=name,
                    linestyle="--" if t.startswith(("memcpy", "ucx")) else "-")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bandwidth (MiB/s)")
    ax.set_title("softverbs data path vs memcpy and UCX shared memory")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: plot_perf.py PERF.TSV PERF.MD PERF.PNG")
    data = load(sys.argv[1])
    png = sys.argv[3] if plot(data, sys.argv[3]) else None
    write_md(data, sys.argv[2], png)


if __name__ == "__main__":
    main()
