#!/usr/bin/env python3
"""Benchmark: pcapgro split and split --restore vs editcap copying the
output-sized capture.

Uses bench.py's generated capture (500,112 Ethernet/IPv4/TCP packets,
cached in /tmp), merges it once with pcapgro (to classic pcap for
``split``, to pcapng for ``split --restore``; cached beside it), then
times, in the same run, ``editcap -F pcap`` copying the generated capture
(what split writes back: the output-sized capture) and each split command
(outputs on /dev/shm), and ``editcap -F pcap`` copying split's input
(the merged capture: the reference bench/bench_split_tunnels.py uses).
Prints the median of ``--repeat`` runs of each, wall and CPU time (user +
system: steadier on a shared machine), packets/s of output, the ratios to
both editcap copies (wall; CPU) and peak RSS.

With ``--input CAPTURE`` (a classic pcap, e.g. a real capture made by
``bench/real_capture.py``) that capture is the output-sized one instead:
it is merged once (cached beside it as ``<name>-merged.pcap`` /
``-merged.pcapng``) and the last ``split --restore`` output is compared
with it byte for byte.

Usage:
    python3 bench/bench_split.py [--packets N | --input CAPTURE] [--repeat R] [--no-c]
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=5, help="runs per command (median kept)")
    ap.add_argument("--no-c", action="store_true", help="PCAPGRO_NO_C=1 for the split runs")
    ap.add_argument("--input", metavar="CAPTURE",
                    help="classic pcap to use as the output-sized capture (default: generated)")
    a = ap.parse_args()
    if a.input:
        cache = a.input
    else:
        cache = os.path.join(tempfile.gettempdir(), f"pcapgro-bench-{a.packets}-ms.pcap")
        if not os.path.exists(cache):
            bench.generate(cache, a.packets, "ms")
    n = bench.count_packets(cache)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pcapgro = [sys.executable, "-c",
               f"import sys; sys.path.insert(0, {repo!r}); from pcapgro.cli import main; main()"]
    merged = {}
    for ext in ("pcap", "pcapng"):
        m = os.path.splitext(cache)[0] + f"-merged.{ext}"
        if not os.path.exists(m):
            subprocess.run(pcapgro + ["merge", "-q", cache, m], check=True)
        merged[ext] = m
    print(f"output-sized capture: {cache}: {n:,} packets; split input: "
          f"{bench.count_packets(merged['pcap']):,} packets")
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    outdir = tempfile.mkdtemp(prefix="pcapgro-bench-split-", dir=shm)
    env = dict(os.environ, PCAPGRO_NO_C="1") if a.no_c else None
    jobs = [("editcap -F pcap (copy of the output)",
             ["editcap", "-F", "pcap", cache, os.path.join(outdir, "e.pcap")]),
            ("editcap -F pcap (copy of the input)",
             ["editcap", "-F", "pcap", merged["pcap"], os.path.join(outdir, "i.pcap")]),
            ("pcapgro split", pcapgro + ["split", "-q", merged["pcap"],
                                         os.path.join(outdir, "s.pcap")]),
            ("pcapgro split --restore", pcapgro + ["split", "--restore", "-q", merged["pcapng"],
                                                   os.path.join(outdir, "r.pcap")])]
    times = {name: [] for name, _ in jobs}
    cpus = {name: [] for name, _ in jobs}
    rss = {}
    try:
        # interleaved: each round runs every command once (load drifts)
        for _ in range(a.repeat):
            for name, cmd in jobs:
                old = os.environ.copy()
                if env and name.startswith("pcapgro"):
                    os.environ.update(env)
                try:
                    rc, dt, r, cpu = bench.timed_cpu(cmd)
                finally:
                    os.environ.clear()
                    os.environ.update(old)
                if rc != 0:
                    raise SystemExit(f"{name}: exit status {rc}")
                times[name].append(dt)
                cpus[name].append(cpu)
                rss[name] = max(rss.get(name, 0), r)
        if a.input:
            same = filecmp.cmp(cache, os.path.join(outdir, "r.pcap"), shallow=False)
            print(f"split --restore output {'is' if same else 'is NOT'} the input byte for byte")
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    med = {name: statistics.median(times[name]) for name, _ in jobs}
    cpu = {name: statistics.median(cpus[name]) for name, _ in jobs}
    eo, ei = (name for name, _ in jobs[:2])
    print(f"{'command':40} {'wall s':>7} {'CPU s':>7} {'pkt/s out':>10} "
          f"{'x editcap out':>15} {'x editcap in':>15} {'peak RSS':>9}")
    for name, _ in jobs:
        print(f"{name:40} {med[name]:7.3f} {cpu[name]:7.3f} {n / med[name]:10,.0f} "
              f"{med[name] / med[eo]:6.2f} {cpu[name] / cpu[eo]:6.2f} "
              f"{med[name] / med[ei]:7.2f} {cpu[name] / cpu[ei]:6.2f} {rss[name] / 1024:6.0f} MiB")
    print("(x editcap: time / editcap's time in the same run, wall and CPU; "
          "out: editcap copying the output-sized capture, in: split's input)")


if __name__ == "__main__":
    sys.exit(main())
