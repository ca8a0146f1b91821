#!/usr/bin/env python3
"""Benchmark: ``pcapgro verify`` of a 100,000-packet pair.

Makes (cached in /tmp) bench.py's synthetic capture with N packets
(default 100,000: 8 TCP flows, MSS payloads, a pure ACK every 8 segments,
valid checksums), merges it with ``pcapgro merge`` and splits the result
back with ``pcapgro split``, then times ``pcapgro verify IN OUT`` on both
pairs: IN (N packets) vs the merged OUT (about N/5 packets) and IN vs the
split OUT (N packets, the heavier case: two full-size tshark passes).
Prints the seconds of each run (best of --repeat) and the verdict; the
goal is under 60 s per pair on the project's 2-core VM.

Usage:
    python3 bench/bench_verify.py [--packets N] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench  # noqa: E402  (the synthetic capture generator)

PCAPGRO = [sys.executable, "-c",
           f"import sys; sys.path.insert(0, {REPO!r}); from pcapgro.cli import main; main()"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1, help="runs per pair (best is kept)")
    a = ap.parse_args()

    tmp = tempfile.gettempdir()
    src = os.path.join(tmp, f"pcapgro-bench-verify-{a.packets}.pcap")
    merged = os.path.join(tmp, f"pcapgro-bench-verify-{a.packets}-gro.pcapng")
    split = os.path.join(tmp, f"pcapgro-bench-verify-{a.packets}-gso.pcap")
    if not os.path.exists(src):
        bench.generate(src, a.packets)
    if not os.path.exists(merged):
        subprocess.run(PCAPGRO + ["merge", "-q", src, merged], check=True)
    if not os.path.exists(split):
        subprocess.run(PCAPGRO + ["split", "-q", merged, split], check=True,
                       stderr=subprocess.DEVNULL)
    print(f"IN {src}: {bench.count_packets(src):,} packets, {os.path.getsize(src) / 2**20:.0f} MiB")
    print(f"{'pair':34} {'OUT frames':>11} {'seconds':>8}  verdict")
    worst = 0.0
    for name, out in (("IN vs merge OUT", merged), ("IN vs split OUT", split)):
        best = None
        for _ in range(a.repeat):
            t = time.perf_counter()
            p = subprocess.run(PCAPGRO + ["verify", "--json", src, out], capture_output=True)
            dt = time.perf_counter() - t
            if p.returncode not in (0, 1):
                print(f"{name}: exit status {p.returncode}: {p.stderr.decode().strip()}")
                return 2
            best = dt if best is None else min(best, dt)
        d = json.loads(p.stdout)
        worst = max(worst, best)
        print(f"{name:34} {d['frames_out']:>11,} {best:8.1f}  {d['result']}"
              f" ({d['problems_total']} problems)")
    print(f"slowest pair: {worst:.1f} s (goal: under 60 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
