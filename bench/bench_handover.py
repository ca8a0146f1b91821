#!/usr/bin/env python3
"""Benchmark the compiled loop's hand-over cost on traffic it does not take
(issue 18.7), against editcap and against PCAPGRO_NO_C=1, in the same run.

Input: the records of a capture (default: the kernel capture
``udp4-fwd-wire.pcap`` of the shared captures), repeated up to ``--packets``
records and re-timed ``--gap-us`` apart (default 2000 us: every datagram is
its own NAPI poll, the case of issue 18.7; 10 us: one poll).  Each command
(``editcap -F pcap``, ``pcapgro merge`` and ``PCAPGRO_NO_C=1 pcapgro
merge``) runs ``--repeat`` times; medians are printed as seconds and as the
ratio to editcap.

Usage:
    python3 bench/bench_handover.py [--capture FILE] [--packets N] [--gap-us US ...]
        [--repeat R] [--pcapgro CMD]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import timed  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, "..", "..", "shared", "captures", "kernel", "udp4-fwd-wire.pcap")
T0 = 1_700_000_000 * 10**9


def retime(src, dst, n, gap_ns):
    """Write classic pcap ``dst``: ``src``'s records (little-endian classic
    pcap) cycled up to ``n`` records, ``gap_ns`` apart."""
    d = open(src, "rb").read()
    magic = struct.unpack_from("<I", d)[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        raise SystemExit(f"{src}: not a little-endian classic pcap")
    mul = 1000 if magic == 0xA1B2C3D4 else 1
    recs, o = [], 24
    while o + 16 <= len(d):
        cap = struct.unpack_from("<I", d, o + 8)[0]
        recs.append(d[o + 8:o + 16 + cap])
        o += 16 + cap
    out = bytearray(d[:24])
    for i in range(n):
        t = T0 + i * gap_ns
        out += struct.pack("<II", t // 10**9, t % 10**9 // mul) + recs[i % len(recs)]
    with open(dst, "wb") as f:
        f.write(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capture", default=DEFAULT)
    ap.add_argument("--packets", type=int, default=5000)
    ap.add_argument("--gap-us", type=float, action="append")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pcapgro", default=None, help="pcapgro command (default: this checkout)")
    a = ap.parse_args()
    repo = os.path.dirname(HERE)
    pcapgro = shlex.split(a.pcapgro) if a.pcapgro else [sys.executable, "-c",
        f"import sys; sys.path.insert(0, {repo!r}); from pcapgro.cli import main; main()"]
    tmp = tempfile.mkdtemp(prefix="pcapgro-handover-")
    out = os.path.join(tmp, "out.pcap")
    print(f"{'gap':>8} {'command':<22} {'median s':>9} {'/editcap':>9}")
    for gap in a.gap_us or [2000, 10]:
        src = os.path.join(tmp, f"in-{gap}.pcap")
        retime(a.capture, src, a.packets, int(gap * 1000))
        cmds = {"editcap": ["editcap", "-F", "pcap", src, out],
                "pcapgro merge": pcapgro + ["merge", "-q", src, out],
                "PCAPGRO_NO_C=1": ["env", "PCAPGRO_NO_C=1"] + pcapgro + ["merge", "-q", src, out]}
        times = {k: [] for k in cmds}
        for _ in range(a.repeat):
            for k, c in cmds.items():     # interleaved: the same noise for each
                rc, dt, _ = timed(c)
                if rc:
                    raise SystemExit(f"{k}: exit {rc}")
                times[k].append(dt)
        ed = statistics.median(times["editcap"])
        for k, v in times.items():
            m = statistics.median(v)
            print(f"{gap:>6}us {k:<22} {m:9.3f} {m / ed:9.2f}")


if __name__ == "__main__":
    main()
