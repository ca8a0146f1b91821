#!/usr/bin/env python3
"""Benchmark every merge mode against editcap, in the same run (issue 16).

Inputs:
* a real capture (``--real FILE``: e.g. made by bench/real_capture.py, the
  wire side of an iperf3 bulk transfer over a veth), and
* a generated mixed capture (cached in /tmp): IPv4 and IPv6 TCP bulk flows
  with TCP timestamps and a pure ACK every 8 segments back, UDP forwarding
  bursts of up to 10 datagrams (IPv4 and IPv6), 64 flows interleaved in
  bursts, valid checksums.

For each input: ``editcap -F pcap`` and ``editcap -F pcapng`` copy it, and
``pcapgro merge`` runs to pcap (checksums verified and not), to pcapng
(annotated), with ``--fraglist``, ``--udp gro``, a NAPI budget and a flush
timeout.  Each command runs
``--repeat`` times, the commands taking turns, each run with no output
file beforehand (see run_input); the median time is kept (this machine is
shared and noisy), printed as packets/s and as the ratio to the editcap copy of the
same output format measured in the same run, by wall time and by CPU time
(user + system: steadier on a shared machine), with the peak RSS.

``--merge-args`` adds arguments to every merge (``--vxlan-port 4789`` for a
VXLAN capture), ``--only`` keeps the jobs named (the editcap copies always
run), ``--no-mixed`` skips the generated capture, ``--base DIR`` runs every
merge job of another checkout too (built in place), in the same turns
(its rows marked ``@base``).

Usage:
    python3 bench/bench_modes.py [--real FILE] [--packets N] [--repeat R]
                                 [--merge-args ARGS] [--only NAME ...] [--no-mixed]
                                 [--base DIR]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import _fold, _sum16, count_packets, timed_cpu  # noqa: E402

FLOWS = 64
BURST = 16


class _Flow:
    """One flow's templates: ``kind`` 'tcp4', 'tcp6', 'udp4' or 'udp6'."""

    def __init__(self, i, kind):
        self.kind = kind
        self.v6 = kind.endswith("6")
        if self.v6:
            self.cli = bytes.fromhex("fd000000000000000000000000000001")
            self.srv = bytes.fromhex("fd0000000000000000000000000001") + bytes([i + 1])
        else:
            self.cli = bytes([10, 0, 0, 1])
            self.srv = bytes([10, 0, 2, i + 1])
        self.sport, self.dport = 40000 + i, 5201 if kind.startswith("tcp") else 4789 + i
        self.seq, self.ack, self.ipid, self.rid = 1000 * (i + 1), 7 * i, 100 * i, 9 * i
        mss = (1428 if self.v6 else 1448) if kind.startswith("tcp") else 1200
        self.payload = bytes((j * 7 + i) & 0xFF for j in range(mss))
        self.psum = _sum16(self.payload)
        self.mac_c, self.mac_s = bytes([2, 0, 0, 0, 0, 1]), bytes([2, 0, 0, 0, 1, i + 1])


def _ip(f, src, dst, proto, l4len, ipid):
    """(IP header bytes, pseudo-header sum) of a packet of flow ``f``."""
    if f.v6:
        h = struct.pack("!IHBB16s16s", 0x60000000, l4len, proto, 64, src, dst)
        return h, _sum16(src + dst) + proto + l4len
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + l4len, ipid, 0x4000, 64, proto, 0, src, dst)
    h = h[:10] + struct.pack("!H", 0xFFFF - _fold(_sum16(h))) + h[12:]
    return h, _sum16(src + dst) + proto + l4len


def _frame(f, back, l4, ipid, proto, psum):
    src, dst = (f.srv, f.cli) if back else (f.cli, f.srv)
    smac, dmac = (f.mac_s, f.mac_c) if back else (f.mac_c, f.mac_s)
    ip, pseudo = _ip(f, src, dst, proto, len(l4[0]) + l4[1], ipid)
    at = 16 if proto == 6 else 6
    c = 0xFFFF - _fold(pseudo + _sum16(l4[0]) + psum)
    hdr = l4[0][:at] + struct.pack("!H", c or 0xFFFF) + l4[0][at + 2:]
    return dmac + smac + (b"\x86\xdd" if f.v6 else b"\x08\x00") + ip + hdr


def _tcp(f, ts_ms, back=False):
    """A data segment of ``f`` (or, ``back``, its pure ACK)."""
    pay = b"" if back else f.payload
    seq, ack = (f.ack, f.seq) if back else (f.seq, f.ack)
    sp, dp = (f.dport, f.sport) if back else (f.sport, f.dport)
    th = struct.pack("!HHIIBBHHHBBBBII", sp, dp, seq, ack, 8 << 4, 0x10, 1024, 0, 0,
                     1, 1, 8, 10, ts_ms & 0xFFFFFFFF, (ts_ms - 1) & 0xFFFFFFFF)
    ipid = f.rid if back else f.ipid
    return _frame(f, back, (th, len(pay)), ipid, 6, 0 if back else f.psum) + pay


def _udp(f):
    uh = struct.pack("!HHHH", f.sport, f.dport, 8 + len(f.payload), 0)
    return _frame(f, False, (uh, len(f.payload)), f.ipid, 17, f.psum) + f.payload


def generate_mixed(path, n_packets):
    """Write the mixed capture (classic pcap, microseconds) to ``path``."""
    kinds = ["tcp4"] * 32 + ["tcp6"] * 16 + ["udp4"] * 8 + ["udp6"] * 8
    flows = [_Flow(i, k) for i, k in enumerate(kinds)]
    rec = struct.Struct("<IIII").pack
    ts = 1_700_000_000 * 10**6
    n = 0
    with open(path + ".tmp", "wb") as out:
        out.write(b"\xd4\xc3\xb2\xa1" + struct.pack("<HHiIII", 2, 4, 0, 0, 262144, 1))
        while n < n_packets:
            parts = []
            for f in flows:
                burst = BURST if f.kind.startswith("tcp") else 1 + (f.seq // 7) % 10
                for k in range(burst):
                    ts += 2
                    if f.kind.startswith("tcp"):
                        fr = _tcp(f, ts // 1000)
                        f.seq = (f.seq + len(f.payload)) & 0xFFFFFFFF
                    else:
                        fr = _udp(f)
                        f.seq += 1
                    f.ipid = (f.ipid + 1) & 0xFFFF
                    parts += (rec(ts // 10**6, ts % 10**6, len(fr), len(fr)), fr)
                    n += 1
                    if f.kind.startswith("tcp") and k % 8 == 7:
                        fr = _tcp(f, ts // 1000, back=True)
                        f.rid = (f.rid + 1) & 0xFFFF
                        parts += (rec(ts // 10**6, ts % 10**6, len(fr), len(fr)), fr)
                        n += 1
            out.write(b"".join(parts))
    os.replace(path + ".tmp", path)
    return n


JOBS = [  # (name, output extension, pcapgro arguments or None for editcap)
    ("editcap -F pcap", "pcap", None),
    ("editcap -F pcapng", "pcapng", None),
    ("merge", "pcap", "merge"),
    ("merge --no-verify-csum", "pcap", "merge --no-verify-csum"),
    ("merge -> pcapng (annotated)", "pcapng", "merge"),
    ("merge --fraglist", "pcap", "merge --fraglist"),
    ("merge --udp gro", "pcap", "merge --udp gro"),
    ("merge --napi-budget 64", "pcap", "merge --napi-budget 64"),
    ("merge --gro-flush-timeout 200000", "pcap", "merge --gro-flush-timeout 200000"),
]


def run_input(path, pcapgro, repeat, outdir, jobs=JOBS, extra=""):
    """Time every job on ``path``; returns rows (name, pkt/s, ratio, CPU
    ratio, RSS MiB): the ratios are to the editcap copy of the same output
    format, by median wall time and by median CPU time.

    The jobs run round-robin (every job once, ``repeat`` times over), so a
    slow spell of this shared machine falls on all of them alike rather
    than on the few that ran through it; and every run starts with no
    output file.  The latter matters on tmpfs in a VM: editcap truncates
    an existing OUT in place, while pcapgro writes a temp file and renames
    it over OUT (README "Command line"), so with OUT left from the run
    before, pcapgro's run alone needed a second output's worth of fresh
    pages, which the host may have to back first (measured: 0.2 to 1.4 s
    of system time writing the same 512 MiB)."""
    n = count_packets(path)
    times = {name: [] for name, _, _ in jobs}
    cpus = {name: [] for name, _, _ in jobs}
    rss = dict.fromkeys(times, 0)
    for _ in range(repeat):
        for name, ext, args in jobs:
            out = os.path.join(outdir, "o." + ext)
            if os.path.exists(out):
                os.unlink(out)
            pg = pcapgro[name.endswith("@base")]
            cmd = (["editcap", "-F", ext, path, out] if args is None
                   else pg + shlex.split(args) + shlex.split(extra) + ["-q", path, out])
            rc, dt, r, cpu = timed_cpu(cmd)
            if rc != 0:
                raise SystemExit(f"{name}: exit status {rc}")
            times[name].append(dt)
            cpus[name].append(cpu)
            rss[name] = max(rss[name], r)
    ref = {}
    rows = []
    for name, ext, args in jobs:
        wall, cpu = statistics.median(times[name]), statistics.median(cpus[name])
        if args is None:
            ref[ext] = (wall, cpu)
        rows.append((name, n / wall, ref[ext][0] / wall, ref[ext][1] / cpu, rss[name] / 1024))
    return n, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", help="a real capture (classic pcap, or pcapng: then every merge "
                    "reads pcapng), e.g. from real_capture.py")
    ap.add_argument("--packets", type=int, default=400_000, help="mixed capture size")
    ap.add_argument("--repeat", type=int, default=5, help="runs per command (median kept)")
    ap.add_argument("--merge-args", default="", help="more arguments for every merge")
    ap.add_argument("--only", nargs="+", default=None, help="names of the jobs to run")
    ap.add_argument("--no-mixed", action="store_true", help="only the --real capture")
    ap.add_argument("--base", help="another checkout whose merge jobs run too")
    a = ap.parse_args()
    jobs = [j for j in JOBS if j[2] is None or a.only is None
            or j[0] in a.only]
    if a.base:
        jobs += [(n + " @base", ext, args) for n, ext, args in jobs if args is not None]
    mixed = os.path.join(tempfile.gettempdir(), f"pcapgro-bench-mixed-{a.packets}.pcap")
    if not a.no_mixed and not os.path.exists(mixed):
        generate_mixed(mixed, a.packets)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # byte-compiled as an installed package is (pip compiles at install;
    # with PYTHONDONTWRITEBYTECODE every run would compile every module)
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(repo, "pcapgro")],
                   check=True)
    pcapgro = [[sys.executable, "-c",
                f"import sys; sys.path.insert(0, {d!r}); from pcapgro.cli import main; main()"]
               for d in (repo, a.base or repo)]
    if a.base:
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(a.base, "pcapgro")],
                       check=True)
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    outdir = tempfile.mkdtemp(prefix="pcapgro-bench-", dir=shm)
    try:
        for path in ([a.real] if a.real else []) + ([] if a.no_mixed else [mixed]):
            n, rows = run_input(path, pcapgro, a.repeat, outdir, jobs, a.merge_args)
            print(f"\n{os.path.basename(path)}: {n:,} packets, median of {a.repeat}")
            print(f"{'command':32} {'pkt/s':>10} {'vs editcap':>10} {'CPU vs':>7} "
                  f"{'peak RSS':>9}")
            for name, rate, ratio, cratio, rss in rows:
                print(f"{name:32} {rate:10,.0f} {ratio:9.2f}x {cratio:6.2f}x {rss:6.0f} MiB")
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


if __name__ == "__main__":
    main()
