#!/usr/bin/env python3
"""Benchmark: pcapgro split of tunnelled TCP super-frames vs editcap.

Generates (once, cached in /tmp) a classic pcap of inner TCP super-frames
of ``--payload`` bytes inside VXLAN (outer UDP checksum zero and set),
Geneve, GRE (plain, key + checksum), IPIP, SIT, IP4IP6 and IP6IP6, built
with tests/tunnelbuild.py, one flow per tunnel kind, a pure inner ACK
after every 4th super-frame, or ``--acks K`` after every one (the reverse
direction of a bulk transfer, inside the same tunnel).  ``--real
CAPTURE`` instead repeats a real classic pcap (e.g.
tests/data/vxlan4-bulk-gro.pcap) ``--copies`` times, each copy's times
shifted past the last.  Then times, in the same run and in turns, ``editcap -F pcap``
copying the input and ``pcapgro split`` of it (outputs on /dev/shm, each
run starting with no output file): median CPU time (user + system) and
wall time of ``--repeat`` runs each, and the ratio of split to editcap;
also editcap copying a capture the size of split's output (split's
output itself, made once and cached beside the input), the cost of
writing that many packets.

Usage:
    python3 bench/bench_split_tunnels.py [--frames N] [--payload B] [--repeat R]
                                         [--pcapgro CMD] [--no-c]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench  # noqa: E402

KINDS = [("vxlan", {}, 4), ("vxlan", dict(udp_csum="valid"), 4),
         ("geneve", dict(geneve_opts=b"\1\2\3\4"), 4), ("gre", {}, 4),
         ("gre", dict(gre_key=3, gre_csum=True), 4), ("ipip", {}, 4), ("ipip", {}, 6),
         ("ipip", dict(family=6), 6), ("ipip", dict(family=6), 4)]


def generate(path, frames, payload, acks=0):
    """``frames`` super-frames (``payload`` inner TCP bytes each), the
    tunnel kinds in turn, 1 ms apart, an inner ACK after every 4th (or
    ``acks`` after each)."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from pktbuild import ACK, Flow
    from tunnelbuild import Tunnel
    flows = [(Tunnel(k, **kw), Flow(fam, ipid="inc", sport=2000 + i),
              Flow(fam, ipid="inc", sport=8000, dport=2000 + i,
                   src=("192.168.1.100" if fam == 4 else "fdaa::1"),
                   dst=("192.168.1.200" if fam == 4 else "fdaa::2")))
             for i, (k, kw, fam) in enumerate(KINDS)]
    seqs = [0] * len(flows)
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        t = 1_000_000
        for i in range(frames):
            j = i % len(flows)
            tun, fw, rv = flows[j]
            csum = "seed" if tun.udp_csum == "valid" else None
            sup = tun.wrap(fw.pkt(seqs[j], payload, csum="seed"), csum=csum)
            seqs[j] += payload
            pkts = [sup]
            if acks or i % 4 == 3:
                pkts += [tun.wrap(rv.pkt(0, 0, flags=ACK, ack_off=seqs[j] - a * 2800))
                         for a in range(max(acks, 1))]
            for p in pkts:
                d = bytes(p.data)
                f.write(struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(d), len(d)))
                f.write(d)
                t += 1000


def repeat(src, path, copies):
    """Classic pcap ``src`` (microsecond or nanosecond, any byte order)
    written ``copies`` times to ``path``, each copy shifted 1 ms past the
    last record of the one before."""
    with open(src, "rb") as f:
        raw = f.read()
    bo = "<" if raw[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    # ns per unit of the fraction field: 1 for nanosecond pcap, 1000 for microsecond
    mul = 1 if raw[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d") else 1000
    recs, i = [], 24
    while i + 16 <= len(raw):
        sec, frac, cap, orig = struct.unpack_from(bo + "IIII", raw, i)
        recs.append((sec * 1_000_000_000 + frac * mul, raw[i + 8:i + 16 + cap]))
        i += 16 + cap
    span = recs[-1][0] - recs[0][0] + 1_000_000
    with open(path, "wb") as f:
        f.write(raw[:24])
        for c in range(copies):
            for t, rest in recs:
                t += c * span
                f.write(struct.pack(bo + "II", t // 1_000_000_000, t % 1_000_000_000 // mul))
                f.write(rest)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2400)
    ap.add_argument("--payload", type=int, default=63000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pcapgro", default=None,
                    help="pcapgro command (default: this checkout's python -m pcapgro.cli)")
    ap.add_argument("--no-c", action="store_true", help="PCAPGRO_NO_C=1 for the split runs")
    ap.add_argument("--acks", type=int, default=0, help="inner ACKs after every super-frame")
    ap.add_argument("--real", metavar="CAPTURE", help="repeat this classic pcap instead")
    ap.add_argument("--copies", type=int, default=350, help="copies of --real")
    a = ap.parse_args()
    if a.real:
        src = os.path.join(tempfile.gettempdir(), "pcapgro-bench-tunnels-"
                           f"{os.path.splitext(os.path.basename(a.real))[0]}-x{a.copies}.pcap")
        if not os.path.exists(src):
            repeat(a.real, src, a.copies)
    else:
        src = os.path.join(tempfile.gettempdir(),
                           f"pcapgro-bench-tunnels-{a.frames}-{a.payload}-{a.acks}.pcap")
        if not os.path.exists(src):
            generate(src, a.frames, a.payload, a.acks)
    pg = shlex.split(a.pcapgro) if a.pcapgro else [
        sys.executable, "-c",
        f"import sys; sys.path.insert(0, {REPO!r}); from pcapgro.cli import main; main()"]
    # byte-compiled as an installed package is (with PYTHONDONTWRITEBYTECODE
    # every run would compile every module first, ~0.1 s); --pcapgro: its own
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(REPO, "pcapgro")],
                   check=True)
    if a.no_c:
        os.environ["PCAPGRO_NO_C"] = "1"
    outsized = os.path.splitext(src)[0] + "-split.pcap"     # split's output, kept
    if not os.path.exists(outsized):
        subprocess.run(pg + ["split", "-q", src, outsized], check=True)
    cmds = {"editcap": ["editcap", "-F", "pcap", src, "/dev/shm/bench-tun-editcap.pcap"],
            "split": pg + ["split", "-q", src, "/dev/shm/bench-tun-split.pcap"],
            "editcap-out": ["editcap", "-F", "pcap", outsized, "/dev/shm/bench-tun-eout.pcap"]}
    res = {k: [] for k in cmds}
    for _ in range(a.repeat):
        for k, cmd in cmds.items():
            if os.path.exists(cmd[-1]):
                os.unlink(cmd[-1])
            rc, dt, rss, cpu = bench.timed_cpu(cmd)
            if rc:
                sys.exit(f"{k} failed: exit {rc}")
            res[k].append((cpu, dt))
    nin = bench.count_packets(src)
    nout = bench.count_packets(cmds["split"][-1])
    print(f"input {nin} packets ({os.path.getsize(src) / 2**20:.1f} MiB), "
          f"split output {nout} packets")
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v))
           for k, v in res.items()}
    for k, (cpu, wall) in med.items():
        print(f"{k:8s} CPU {cpu:.3f} s  wall {wall:.3f} s")
    print(f"split/editcap CPU ratio {med['split'][0] / med['editcap'][0]:.2f}x, "
          f"wall {med['split'][1] / med['editcap'][1]:.2f}x; "
          f"split {nout / med['split'][0]:,.0f} output packets per CPU second; "
          f"editcap-out (editcap copying a capture of split's output) "
          f"{med['split'][0] / med['editcap-out'][0]:.2f}x")
    for p in (cmds["editcap"][-1], cmds["split"][-1], cmds["editcap-out"][-1]):
        os.unlink(p)


if __name__ == "__main__":
    main()
