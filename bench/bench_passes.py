#!/usr/bin/env python3
"""Benchmark merge on traffic with a sprinkling of packets GRO passes up
unchanged (issue 16: the compiled core passes them itself instead of
handing the chunk to the reference path), against editcap, in the same run.

Input: bench_modes.py's mixed capture (IPv4/IPv6 TCP and UDP, 64 flows)
with one record in ``--every`` (default 100: 1%) after it replaced in turn
by an ARP request, an ICMP echo and a copy of the TCP segment before it
with a bad checksum.  Each command (``editcap -F pcap``, then ``pcapgro
merge`` of every ``--pcapgro`` checkout given, default this one) runs
``--repeat`` times (``--snaplen``: every record cut, as ``tcpdump -s``
writes it), outputs to /dev/shm; medians of wall and CPU time
(user + system) are printed, as ratios to editcap.

Usage:
    python3 bench/bench_passes.py [--packets N] [--every K] [--snaplen S]
        [--repeat R] [--pcapgro DIR ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import timed_cpu  # noqa: E402
from bench_modes import generate_mixed  # noqa: E402

MAC = bytes.fromhex("020000000001020000000002")


def _arp():
    body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, MAC[6:], bytes([10, 0, 0, 1]),
                       bytes(6), bytes([10, 0, 0, 2]))
    return (MAC + b"\x08\x06" + body).ljust(60, b"\0")


def _icmp():
    icmp = b"\x08\x00\x00\x00\x12\x34\x00\x01" + bytes(56)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 1, 0x4000, 64, 1, 0,
                               bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])))
    s = sum(struct.unpack("!10H", ip))
    s = (s & 0xFFFF) + (s >> 16)
    ip[10:12] = struct.pack("!H", ~s & 0xFFFF)
    return MAC + b"\x08\x00" + bytes(ip) + icmp


def _bad_csum(frame):
    """A copy of Ethernet/IPv4 or IPv6 TCP ``frame`` with its TCP checksum
    off by one (None when it is not TCP)."""
    et = frame[12:14]
    if et == b"\x08\x00" and frame[23] == 6:
        at = 14 + 20 + 16
    elif et == b"\x86\xdd" and frame[20] == 6:
        at = 14 + 40 + 16
    else:
        return None
    d = bytearray(frame)
    d[at + 1] ^= 1
    return bytes(d)


def sprinkle(src, dst, every, snaplen=0):
    """Write ``src`` (classic pcap, little-endian) to ``dst`` with one
    record in ``every`` replaced by a passed packet (none when ``every`` is
    0), each cut to ``snaplen`` bytes when given; returns how many were
    replaced."""
    d = open(src, "rb").read()
    out = [d[:24]]
    off, k, n = 24, 0, 0
    last = None
    while off + 16 <= len(d):
        s, f, cap, orig = struct.unpack_from("<IIII", d, off)
        fr = d[off + 16:off + 16 + cap]
        off += 16 + cap
        k += 1
        if every and k % every == 0:
            kind = (k // every) % 3
            new = _arp() if kind == 0 else _icmp() if kind == 1 else _bad_csum(last or b"")
            if new is not None:
                fr = new
                n += 1
        else:
            last = fr
        cut = fr[:snaplen] if snaplen else fr
        out.append(struct.pack("<IIII", s, f, len(cut), len(fr)) + cut)
    with open(dst, "wb") as w:
        w.write(b"".join(out))
    return n


def _cmd(repo):
    return [sys.executable, "-c",
            f"import sys; sys.path.insert(0, {repo!r}); from pcapgro.cli import main; main()"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=400_000)
    ap.add_argument("--every", type=int, default=100, help="1 record in EVERY passed (0: none)")
    ap.add_argument("--snaplen", type=int, default=0, help="cut every record to this length")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pcapgro", action="append", default=[],
                    help="a checkout to time (repeatable; default this one)")
    a = ap.parse_args()
    repos = a.pcapgro or [os.path.dirname(HERE)]
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix="pcapgro-passes-", dir=shm)
    try:
        mixed = os.path.join(tempfile.gettempdir(), f"pcapgro-bench-mixed-{a.packets}.pcap")
        if not os.path.exists(mixed):
            generate_mixed(mixed, a.packets)
        inp = os.path.join(work, "in.pcap")
        n = sprinkle(mixed, inp, a.every, a.snaplen)
        for r in repos:
            subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(r, "pcapgro")],
                           check=True)
        jobs = [("editcap -F pcap", ["editcap", "-F", "pcap", inp, os.path.join(work, "o.pcap")])]
        jobs += [(f"merge ({r})", _cmd(r) + ["merge", "-q", inp, os.path.join(work, "o.pcap")])
                 for r in repos]
        res = {name: ([], []) for name, _ in jobs}
        for _ in range(a.repeat):         # interleaved: load changes hit all alike
            for name, cmd in jobs:
                rc, dt, _rss, cpu = timed_cpu(cmd)
                if rc:
                    raise SystemExit(f"{name}: exit status {rc}")
                res[name][0].append(dt)
                res[name][1].append(cpu)
        print(f"{a.packets:,} packets, {n:,} of them passed (1 in {a.every}), "
              f"snaplen {a.snaplen or 'none'}, median of {a.repeat}")
        ew, ec = (statistics.median(x) for x in res[jobs[0][0]])
        for name, _ in jobs:
            w, c = (statistics.median(x) for x in res[name])
            print(f"{name:60} wall {w:6.3f} s ({ew / w:4.2f}x)  CPU {c:6.3f} s ({ec / c:4.2f}x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
