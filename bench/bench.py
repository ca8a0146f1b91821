#!/usr/bin/env python3
"""Benchmark: pcapgro vs editcap copying the same synthetic capture.

Generates (no root, cached in /tmp) a classic microsecond pcap of at least
500,000 realistic TCP packets: Ethernet / IPv4 / TCP with the timestamp
option, several interleaved flows, continuous sequence numbers, MSS 1448
payloads, a pure ACK every 8 segments in the reverse direction, valid IPv4
and TCP checksums (built from a template per flow with incremental one's
complement sums).  Timestamp options tick as Linux's do, once per
millisecond on both ends (``--ts-clock ms``, the default: aggregates then
end where the kernel's do on such traffic, mostly at the 64 KiB limit), or,
``--ts-clock ack``, at every ACK (the receiver's TSval, echoed in TSecr,
changes every 8 segments: 8-segment aggregates, the worst case for
per-aggregate work).  Then times, in the same run, ``editcap`` copying it and
``pcapgro merge --no-gro`` (plus any ``--args`` sets), and prints packets/s,
the ratio to editcap and the peak RSS of each command.

Usage:
    python3 bench/bench.py [--packets N] [--repeat R] [--args "merge --no-verify-csum"] ...
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time

MSS = 1448
FLOWS = 8
BURST = 16          # segments of one flow in a row (NAPI-like interleaving)
ACK_EVERY = 8


def _sum16(b):
    if len(b) & 1:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    return s


def _fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


class _Flow:
    """One TCP connection's templates and state."""

    def __init__(self, i):
        self.cli = bytes([10, 0, 0, 1])
        self.srv = bytes([10, 0, 1, 1 + i])
        self.sport = 40000 + i
        self.dport = 5201
        self.seq = 1000000 * (i + 1)
        self.ack = 5000 * (i + 1)
        self.ipid = 100 * i
        self.rid = 7 * i
        self.tsval = 1000 + i
        self.tsecr = 2000 + i
        self.payload = bytes((j * 7 + i) & 0xFF for j in range(MSS))
        self.psum = _sum16(self.payload)
        self.mac_c = bytes([2, 0, 0, 0, 0, 1])
        self.mac_s = bytes([2, 0, 0, 0, 1, i + 1])


def _segment(src, dst, smac, dmac, sport, dport, seq, ack, ipid, tsval, tsecr, flags,
             payload, psum):
    tcp_len = 32 + len(payload)
    ip_len = 20 + tcp_len
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, ipid, 0x4000, 64, 6, 0, src, dst)
    ipc = 0xFFFF - _fold(_sum16(ip))
    ip = ip[:10] + struct.pack("!H", ipc) + ip[12:]
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 8 << 4, flags, 1024, 0, 0) \
        + struct.pack("!BBBBII", 1, 1, 8, 10, tsval, tsecr)
    pseudo = src + dst + struct.pack("!BBH", 0, 6, tcp_len)
    c = 0xFFFF - _fold(_sum16(pseudo) + _sum16(tcp) + psum)
    tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
    return dmac + smac + b"\x08\x00" + ip + tcp + payload


def _rounds(ts_clock="ms"):
    """The benchmark traffic, endlessly: per round (BURST segments of every
    flow in turn, with their ACKs) ``(parts, packets)``, ``parts`` the
    classic-pcap records (16-byte header, frame, ...).  ``ts_clock``: 'ms'
    (TSval of both ends = milliseconds, as Linux) or 'ack' (the receiver's
    TSval steps at every ACK)."""
    flows = [_Flow(i) for i in range(FLOWS)]
    rec = struct.Struct("<IIII").pack
    ts = 1_700_000_000 * 10**6
    while True:
        out = []
        for fl in flows:
            for k in range(BURST):
                if ts_clock == "ms":
                    fl.tsval = (1000 + ts // 1000) & 0xFFFFFFFF
                fr = _segment(fl.cli, fl.srv, fl.mac_c, fl.mac_s, fl.sport, fl.dport,
                              fl.seq, fl.ack, fl.ipid, fl.tsval, fl.tsecr, 0x10,
                              fl.payload, fl.psum)
                fl.seq = (fl.seq + MSS) & 0xFFFFFFFF
                fl.ipid = (fl.ipid + 1) & 0xFFFF
                ts += 1
                out += (rec(ts // 10**6, ts % 10**6, len(fr), len(fr)), fr)
                if k % ACK_EVERY == ACK_EVERY - 1:
                    if ts_clock == "ms":
                        fl.tsecr = (5000 + ts // 1000) & 0xFFFFFFFF
                    else:
                        fl.tsecr += 1
                    fr = _segment(fl.srv, fl.cli, fl.mac_s, fl.mac_c, fl.dport, fl.sport,
                                  fl.ack, fl.seq, fl.rid, fl.tsecr, fl.tsval, 0x10, b"", 0)
                    fl.rid = (fl.rid + 1) & 0xFFFF
                    out += (rec(ts // 10**6, ts % 10**6, len(fr), len(fr)), fr)
            if ts_clock != "ms":
                fl.tsval += 1
        yield out, len(out) // 2


_HEADER = b"\xd4\xc3\xb2\xa1" + struct.pack("<HHiIII", 2, 4, 0, 0, 262144, 1)


def generate(path, n_packets, ts_clock="ms"):
    """Write the synthetic capture to ``path`` (at least ``n_packets``, whole
    rounds of :func:`_rounds`)."""
    n = 0
    with open(path + ".tmp", "wb") as f:
        f.write(_HEADER)
        for parts, k in _rounds(ts_clock):
            if n >= n_packets:
                break
            f.write(b"".join(parts))
            n += k
    os.replace(path + ".tmp", path)
    return n


def stream(f, n_bytes):
    """Write a synthetic capture of about ``n_bytes`` to the binary file
    object ``f`` (a pipe) as it is generated: the traffic of
    :func:`generate` (ms TCP timestamp clock), nothing kept on disk.
    Returns (packets, bytes) written."""
    n = 0
    size = len(_HEADER)
    f.write(_HEADER)
    for parts, k in _rounds("ms"):
        if size >= n_bytes:
            break
        data = b"".join(parts)
        f.write(data)
        size += len(data)
        n += k
    return n, size


# Runs ARGV[2:] and writes its peak RSS (KiB) to the file ARGV[1].  pcapgro
# is started from this small process, not from the caller: Linux counts a
# forked child's peak RSS from its parent's RSS at fork (ru_maxrss survives
# exec), so a big caller (a pytest process that ran other tests) would
# inflate it.
LAUNCH = ("import resource, subprocess, sys\n"
          "r = subprocess.run(sys.argv[2:])\n"
          "open(sys.argv[1], 'w').write(str(resource.getrusage("
          "resource.RUSAGE_CHILDREN).ru_maxrss))\n"
          "sys.exit(r.returncode)\n")


def stream_merge(n_bytes, pcapgro, args=("merge",)):
    """Stream ``n_bytes`` of :func:`stream` traffic into ``pcapgro ARGS -q -
    -`` (output to /dev/null) through a pipe.  Returns (exit status, packets,
    bytes, seconds, peak RSS of pcapgro in KiB (ru_maxrss, measured by a
    small launcher process, see LAUNCH))."""
    t = time.perf_counter()
    fd, report = tempfile.mkstemp(prefix="pcapgro-rss-")
    os.close(fd)
    try:
        p = subprocess.Popen([sys.executable, "-c", LAUNCH, report, *pcapgro, *args,
                              "-q", "-", "-"], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL)
        try:
            n, size = stream(p.stdin, n_bytes)
            p.stdin.close()
        except BrokenPipeError:
            n, size = -1, -1
        rc = p.wait()
        with open(report) as f:
            rss = int(f.read() or 0)
    finally:
        os.unlink(report)
    return rc, n, size, time.perf_counter() - t, rss


def count_packets(path):
    """Number of records of a classic pcap (walks the record headers), or
    of packets of a pcapng file (read with pcapgro's reader)."""
    n = 0
    with open(path, "rb") as f:
        if f.read(4) == b"\x0a\x0d\x0d\x0a":
            sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            from pcapgro.capture import open_reader
            from pcapgro.record import Packet
            r = open_reader(path)
            n = sum(type(e) is Packet for b in r.batches() for e in b)
            r.close()
            return n
        f.seek(24)
        hdr = struct.Struct("<IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return n
            f.seek(hdr.unpack(h)[2], 1)
            n += 1


WRAP = ("import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
        "dt = time.perf_counter() - t\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(r.returncode, dt, u.ru_maxrss, u.ru_utime + u.ru_stime)\n")


def timed_cpu(cmd):
    """Run ``cmd``; returns (exit status, seconds, peak RSS KiB, CPU seconds:
    user + system, steadier than wall time on a shared machine)."""
    p = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True)
    rc, dt, rss, cpu = p.stdout.split()
    return int(rc), float(dt), int(rss), float(cpu)


def timed(cmd):
    """Run ``cmd``; returns (exit status, seconds, peak RSS KiB)."""
    return timed_cpu(cmd)[:3]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per command (best is kept)")
    ap.add_argument("--args", action="append", default=[],
                    help='extra pcapgro argument set, e.g. "merge --no-verify-csum" (repeatable)')
    ap.add_argument("--pcapgro", default=None, help="pcapgro command (default: this checkout)")
    ap.add_argument("--ts-clock", choices=["ms", "ack"], default="ms",
                    help="TCP timestamp clock of the generated traffic (see above)")
    ap.add_argument("--stream-gb", type=float, metavar="N",
                    help="instead: stream N GB of generated traffic into 'pcapgro merge - -' "
                         "through a pipe (no file on disk) and print pcapgro's peak RSS")
    a = ap.parse_args()
    if a.stream_gb:
        return main_stream(a)

    cache = os.path.join(tempfile.gettempdir(), f"pcapgro-bench-{a.packets}-{a.ts_clock}.pcap")
    if not os.path.exists(cache):
        t = time.perf_counter()
        generate(cache, a.packets, a.ts_clock)
        print(f"generated {cache} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    n = count_packets(cache)
    size = os.path.getsize(cache)
    print(f"input: {cache}: {n:,} packets, {size / 2**20:.0f} MiB")

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pcapgro = shlex.split(a.pcapgro) if a.pcapgro else [sys.executable, "-c",
        f"import sys; sys.path.insert(0, {repo!r}); from pcapgro.cli import main; main()"]
    # outputs on tmpfs when there is one: measure CPU, not the disk
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    outdir = tempfile.mkdtemp(prefix="pcapgro-bench-", dir=shm)
    jobs = []
    if shutil.which("editcap"):
        jobs.append(("editcap -F pcap", ["editcap", "-F", "pcap", cache, os.path.join(outdir, "e.pcap")]))
    else:
        print("editcap not found: no reference figure")
    for argset in ["merge --no-gro"] + a.args:
        jobs.append((f"pcapgro {argset}", pcapgro + shlex.split(argset) + ["-q", cache,
                                                                        os.path.join(outdir, "p.pcap")]))
    ref = None
    print(f"{'command':40} {'pkt/s':>12} {'vs editcap':>10} {'peak RSS':>10}")
    try:
        for name, cmd in jobs:
            best = None
            for _ in range(a.repeat):
                rc, dt, rss = timed(cmd)
                if rc not in (0,):
                    print(f"{name}: exit status {rc}")
                    break
                if best is None or dt < best[0]:
                    best = (dt, rss)
            if best is None:
                continue
            rate = n / best[0]
            if name.startswith("editcap"):
                ref = rate
            ratio = f"{rate / ref:.2f}x" if ref else "-"
            print(f"{name:40} {rate:12,.0f} {ratio:>10} {best[1] / 1024:8.0f} MiB")
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def _pcapgro_cmd(a):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return shlex.split(a.pcapgro) if a.pcapgro else [sys.executable, "-c",
        f"import sys; sys.path.insert(0, {repo!r}); from pcapgro.cli import main; main()"]


def main_stream(a):
    """--stream-gb N: bounded memory on a big streamed capture."""
    for argset in ["merge"] + a.args:
        rc, n, size, dt, rss = stream_merge(int(a.stream_gb * 1e9), _pcapgro_cmd(a),
                                            shlex.split(argset))
        print(f"pcapgro {argset} - -: {size / 1e9:.2f} GB streamed, {n:,} packets, "
              f"{dt:.0f} s, exit {rc}, peak RSS {rss / 1024:.0f} MiB")
        if rc != 0:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
