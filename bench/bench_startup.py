#!/usr/bin/env python3
"""Benchmark the fixed cost of a pcapgro command: start-up and shutdown.

Runs one command line (default: ``merge`` of the 392-packet sample
``samples/udp4-fwd-wire.pcap`` to ``/dev/shm``) many times through the
console script's own code (``from pcapgro.cli import main``), in turns
between one or more source trees (``--tree NAME=DIR``: ``PYTHONPATH=DIR``,
e.g. the branch under test and an export of ``main`` with its extensions
built), and prints each tree's median, quartiles and mean wall time and
its median CPU time (user + system: less disturbed by other work on the
machine).  With ``--importtime`` it also runs ``python -X importtime`` as
many times and prints the median total of all imports (the sum of their
self times), of those under ``pcapgro``, and the cumulative time of
``pcapgro.cli`` (it and everything it imports).

Byte-code: by default every tree gets its own ``PYTHONPYCACHEPREFIX`` (warmed
before timing), as an installed pcapgro has its ``.pyc`` files;
``--no-pyc`` sets ``PYTHONDONTWRITEBYTECODE=1``, so every pcapgro module
of a tree without ``__pycache__`` is compiled from source at every run (a
source checkout run so; the standard library keeps its own ``.pyc``).

Usage:
    python3 bench/bench_startup.py --tree base=/tmp/base --tree new=. [--runs 30]
        [--python PY] [--no-pyc] [--importtime] [-- merge IN OUT ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRY = """\
import re
import sys
from pcapgro.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def _env(tree, cache, pyc):
    """The environment of a run of ``tree``."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    if pyc:
        # the standard library's byte-code is looked for there too: it is
        # written there in the warm-up runs
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache
    else:
        env.pop("PYTHONPYCACHEPREFIX", None)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(python, entry, args, env, importtime=False):
    """One run: (wall seconds, CPU seconds (user + system), exit status,
    stderr bytes)."""
    cmd = [python] + (["-X", "importtime"] if importtime else []) + [entry] + args
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, p.returncode, p.stderr


def _import_totals(stderr):
    """(all imports, those of pcapgro, ``pcapgro.cli`` with what it
    imports) in ms: sums of ``-X importtime``'s self times, and the
    cumulative time of ``pcapgro.cli``."""
    total = ours = cli = 0
    for line in stderr.decode(errors="replace").splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative, name = line[len("import time:"):].split("|")
        us = int(self_us)
        name = name.strip()
        total += us
        if name == "pcapgro" or name.startswith("pcapgro."):
            ours += us
        if name == "pcapgro.cli":
            cli = int(cumulative)
    return total / 1000, ours / 1000, cli / 1000


def _quartiles(xs):
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def main():
    """Parse the options, run the turns, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", metavar="NAME=DIR",
                    help="a source tree to time (repeatable; default: this one)")
    ap.add_argument("--runs", type=int, default=30, help="runs per tree (default 30)")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter with click, tqdm and numpy (default: this one)")
    ap.add_argument("--no-pyc", action="store_true",
                    help="no byte-code files: every module compiled at every run")
    ap.add_argument("--importtime", action="store_true",
                    help="also the median -X importtime totals")
    ap.add_argument("args", nargs="*", help="the pcapgro command line")
    o = ap.parse_args()
    args = o.args or ["merge", os.path.join(REPO, "samples", "udp4-fwd-wire.pcap"),
                      "/dev/shm/pcapgro-bench-startup.pcap"]
    trees = [t.split("=", 1) for t in (o.tree or [f"this={REPO}"])]
    work = tempfile.mkdtemp(prefix="pcapgro-bench-startup-")
    try:
        _bench(o, args, trees, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _bench(o, args, trees, work):
    """The warm-up runs, the timed turns and the table (``work``: a
    directory for the entry script and the byte-code caches)."""
    entry = os.path.join(work, "pcapgro")
    with open(entry, "w") as f:
        f.write(ENTRY)
    envs = {}
    for name, tree in trees:
        envs[name] = _env(tree, os.path.join(work, "pyc-" + name), not o.no_pyc)
        for _ in range(2):          # warm: .pyc written, files cached
            _, _, rc, err = _run(o.python, entry, args, envs[name])
        print(f"{name}: {tree} (exit {rc})", file=sys.stderr)
    times = {name: [] for name, _ in trees}
    cpus = {name: [] for name, _ in trees}
    imports = {name: [] for name, _ in trees}
    for _ in range(o.runs):
        for name, _ in trees:
            wall, cpu, _, _ = _run(o.python, entry, args, envs[name])
            times[name].append(wall)
            cpus[name].append(cpu)
        if o.importtime:
            for name, _ in trees:
                imports[name].append(_import_totals(
                    _run(o.python, entry, args, envs[name], importtime=True)[3]))
    print(f"{' '.join(args)}; {o.runs} runs each, in turns"
          f"{', no .pyc' if o.no_pyc else ''}")
    print(f"{'tree':10} {'median ms':>10} {'q1':>8} {'q3':>8} {'mean':>8} {'cpu med':>8}"
          + (f" {'imports ms':>11} {'pcapgro ms':>11} {'cli cum ms':>11}" if o.importtime
             else ""))
    for name, _ in trees:
        xs = [t * 1000 for t in times[name]]
        q1, q3 = _quartiles(xs)
        line = f"{name:10} {statistics.median(xs):10.1f} {q1:8.1f} {q3:8.1f} " \
               f"{statistics.mean(xs):8.1f} {statistics.median(cpus[name]) * 1000:8.1f}"
        if o.importtime:
            line += "".join(f" {statistics.median(x[k] for x in imports[name]):11.1f}"
                            for k in range(3))
        print(line)


if __name__ == "__main__":
    main()
