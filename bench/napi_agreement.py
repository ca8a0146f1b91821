"""Agreement of ``pcapgro merge --csum kernel`` with the kernel's GRO on
real wire/receiver pairs (issue 21): packets out, exact, joins extra and
missing, per pair.

Usage: python bench/napi_agreement.py [--opt NAME=VALUE ...] DIR ...
(every ``X-wire.pcap`` with an ``X-gro.pcap`` beside it; UDP pairs get
``udp='gro'``, names with "fraglist" ``fraglist=True``).
"""
import glob
import os
import sys

from pcapgro.agreement import measure


def pair_options(name):
    """merge options a pair's receiver was set up with (by its name)."""
    if "fraglist" in name:
        return {"fraglist": True}
    if name.startswith("udp"):
        return {"udp": "gro"}
    return {}


def main(argv):
    opts = {}
    while argv and argv[0] == "--opt":
        k, v = argv[1].split("=", 1)
        opts[k] = int(v) if v.isdigit() else v
        argv = argv[2:]
    for d in argv:
        for w in sorted(glob.glob(os.path.join(d, "*-wire.pcap"))):
            name = os.path.basename(w)[:-10]
            r = w[:-10] + "-gro.pcap"
            if not os.path.exists(r):
                continue
            a = measure(w, r, **pair_options(name), **opts)
            print(f"{name:24s} wire {a.packets_wire:5d}  {a.line()}")


if __name__ == "__main__":
    main(sys.argv[1:])
