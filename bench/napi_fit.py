"""Fit the work model's four costs jointly over real wire/receiver pairs
(issue 21; how the defaults in docs/napi-timing.md were found).

Usage: python bench/napi_fit.py [--wake US,..] [--rx US,..] [--deliver US,..]
       [--seg US,..] [--budget N,..] [--top K] DIR ...

Each pair is merged once with no poll boundary at all (``poll_gap`` 10^12
ns): the joins GRO's rules allow.  The kernel's joins are traced from its
capture.  A setting's poll boundaries (:class:`pcapgro.gro.napi.PollClock`,
arrival times only) then decide each pair without a merge: a boundary
inside a kernel join is a missing join, a rule join the kernel did not
make that no boundary splits is an extra one.  Settings are ranked by
pairs exact, then shared pairs (``tests/data/kernel``) exact, then joins
wrong; confirm the best with real merges (``bench/napi_agreement.py --opt
poll_model=work --opt poll_wake=NS ...``).  Costs are given in µs.
"""
import bisect
import glob
import itertools
import os
import sys

from pcapgro.agreement import _joins, merge_packets, read_packets, trace
from pcapgro.gro import GROConfig
from pcapgro.gro.napi import PollClock

from napi_agreement import pair_options

US = 1000


def load(dirs):
    """[(name, shared, arrival times ns, rule joins {i: j}, kernel joins set)]."""
    out = []
    for d in dirs:
        for w in sorted(glob.glob(os.path.join(d, "*-wire.pcap"))):
            r = w[:-10] + "-gro.pcap"
            if not os.path.exists(r):
                continue
            name = os.path.basename(w)[:-10]
            wire, received = read_packets(w), read_packets(r)
            ours, _ = merge_packets(wire, csum="kernel", poll_gap=10**12, **pair_options(name))
            out.append((name, os.path.basename(os.path.normpath(d)) == "kernel",
                        [p.ts for p in wire], _joins(trace(wire, ours)),
                        set(_joins(trace(wire, received)))))
    return out


def wrong(pair, starts):
    """(extra, missing) joins of poll starts ``starts`` (sorted wire indexes)."""
    _, _, _, rule, kern = pair

    def split(i, j):
        k = bisect.bisect_right(starts, i)
        return k < len(starts) and starts[k] <= j

    extra = sum(1 for i, j in rule.items() if i not in kern and not split(i, j))
    missing = sum(1 for i, j in rule.items() if i in kern and split(i, j))
    return extra, missing


def score(pairs, wake, rx, dp, ds, budget):
    """(pairs exact, shared exact, -joins wrong, per-pair (name, extra, missing))."""
    cfg = GROConfig(poll_model="work", poll_wake_ns=wake * US, poll_rx_ns=rx * US,
                    deliver_ns=dp * US, deliver_seg_ns=ds * US, napi_budget=budget)
    ok = shared = total = 0
    rows = []
    for p in pairs:
        e, m = wrong(p, [i for i, _ in PollClock(cfg).ends(p[2])])
        ok += not (e or m)
        shared += p[1] and not (e or m)
        total += e + m
        rows.append((p[0], e, m))
    return ok, shared, -total, rows


def _ints(s):
    return tuple(int(x) for x in s.split(","))


def main(argv):
    grid = {"--wake": (2, 8, 16, 24, 28, 32, 40, 64), "--rx": (2, 3, 4, 5, 6, 8),
            "--deliver": (0, 5, 10, 20, 40), "--seg": (0, 1, 2, 3, 4), "--budget": (0, 64)}
    top = 5
    while argv and argv[0].startswith("--"):
        if argv[0] == "--top":
            top = int(argv[1])
        else:
            grid[argv[0]] = _ints(argv[1])
        argv = argv[2:]
    pairs = load(argv)
    results = []
    for c in itertools.product(*(grid[k] for k in ("--wake", "--rx", "--deliver", "--seg",
                                                   "--budget"))):
        results.append((score(pairs, *c), c))
    results.sort(key=lambda r: r[0][:3], reverse=True)
    for (ok, shared, neg, rows), c in results[:top]:
        bad = ", ".join(f"{n} +{e}/-{m}" for n, e, m in rows if e or m)
        print(f"wake {c[0]} rx {c[1]} deliver {c[2]} seg {c[3]} budget {c[4]}: exact {ok} of "
              f"{len(pairs)} ({shared} shared), joins wrong {-neg}; wrong: {bad}")


if __name__ == "__main__":
    main(sys.argv[1:])
