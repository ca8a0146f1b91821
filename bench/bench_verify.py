#!/usr/bin/env python3
"""Benchmark: ``pcapgro verify`` of IN vs its merge at several sizes.

IN is a real capture (default: ``tests/data/kernel/tcp4-bulk-wire.pcap``)
repeated with shifted timestamps and sequence numbers
(``repeat_capture.py``) to N packets; OUT is ``pcapgro merge`` of it.  Both
are cached in /tmp.  For each size it runs ``pcapgro verify -q`` (--repeat
times), polling every 0.1 s the peak RSS (``VmHWM``, the kernel's own
high-water mark, so nothing between two polls is missed) of each process
of the tree (pcapgro, each tshark, named by what it reads), and prints the
median seconds, packets/s (IN packets) and the peak RSS of every process;
editcap copying IN is timed in the same run for the ratio (the machine is
noisy).  ``--big`` adds 5,000,000 packets (minutes: the pair is ~15 GB).

Usage:
    python3 bench/bench_verify.py [--sizes 100000,1000000] [--big] [--repeat R]
        [--src CAPTURE] [--pcapgro "python -m pcapgro.cli"]
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import repeat_capture  # noqa: E402

PCAPGRO = [sys.executable, "-c",
           f"import sys; sys.path.insert(0, {REPO!r}); from pcapgro.cli import main; main()"]
SRC = os.path.join(REPO, "tests", "data", "kernel", "tcp4-bulk-wire.pcap")


def _tree(pid):
    out = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            for c in f.read().split():
                out += _tree(int(c))
    except OSError:
        pass
    return out


def _rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                if ln.startswith("VmHWM"):
                    return int(ln.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _comm(pid):
    """'pcapgro', 'tshark-IN' / 'tshark-OUT' (by the file it reads),
    'tshark-probe' (its version and field check), or the command name."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode("utf-8", "replace").split("\0")
        with open(f"/proc/{pid}/comm") as f:
            comm = f.read().strip()
    except OSError:
        return "?"
    if comm.startswith("python"):
        return "pcapgro"
    if comm == "tshark":
        path = argv[argv.index("-r") + 1] if "-r" in argv else ""
        if path.endswith("-gro.pcap"):
            return "tshark-OUT"
        if path.startswith(tempfile.gettempdir()) and "bench-verify" in path:
            return "tshark-IN"
        return "tshark-probe"
    return comm


def run_sampled(cmd):
    """(exit status, seconds, CPU seconds of the whole tree, {"name:pid":
    peak RSS bytes}) of ``cmd``."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = {}
    while p.poll() is None:
        for q in _tree(p.pid):
            k = f"{_comm(q)}:{q}"
            peak[k] = max(peak.get(k, 0), _rss(q))
        time.sleep(0.1)
    p.communicate()
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    return p.returncode, dt, cpu, peak


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--big", action="store_true", help="add 5,000,000 packets (slow)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--src", default=SRC)
    ap.add_argument("--pcapgro", help="command that runs pcapgro (default: this checkout)")
    a = ap.parse_args()
    pcapgro = shlex.split(a.pcapgro) if a.pcapgro else PCAPGRO
    tmp = tempfile.gettempdir()
    print(f"{'packets':>10} {'seconds':>8} {'packets/s':>10} {'CPU s':>7} {'vs editcap':>10}  "
          "peak RSS MiB")
    sizes = [int(x) for x in a.sizes.split(",")] + ([5_000_000] if a.big else [])
    for n in sizes:
        src = os.path.join(tmp, f"pcapgro-bench-verify-r{n}.pcap")
        out = os.path.join(tmp, f"pcapgro-bench-verify-r{n}-gro.pcap")
        if not os.path.exists(src):
            repeat_capture.repeat(a.src, src, n)
        if not os.path.exists(out):
            subprocess.run(pcapgro + ["merge", "-q", src, out], check=True)
        secs, cpus, peaks, ed = [], [], [], []
        for _ in range(a.repeat):
            t = time.perf_counter()
            subprocess.run(["editcap", "-F", "pcap", src, "/dev/null"], check=True,
                           stderr=subprocess.DEVNULL)
            ed.append(time.perf_counter() - t)
            rc, dt, cpu, peak = run_sampled(pcapgro + ["verify", "-q", src, out])
            if rc not in (0, 1):
                print(f"{n}: verify exit status {rc}")
                return 2
            secs.append(dt)
            cpus.append(cpu)
            peaks.append(peak)
        s = statistics.median(secs)
        worst = {}
        for pk in peaks:        # per process kind: the highest peak of the runs
            for k, v in pk.items():
                name = k.split(":")[0]
                worst[name] = max(worst.get(name, 0), v)
        rss = " ".join(f"{k}={v / 2**20:.0f}" for k, v in worst.items())
        print(f"{n:>10,} {s:8.1f} {n / s:>10,.0f} {statistics.median(cpus):7.1f} "
              f"{statistics.median(ed) / s:>10.3f}  {rss}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
