#!/usr/bin/env python3
"""Tunnelled bulk captures for the merge benchmarks (issue 23): the wire
side of 8 inner TCP bulk transfers (1448-byte segments, a PSH every 44th,
inner pure ACKs back every 2nd segment), each in its own tunnel of one kind
(outer addresses 10.0.0.x / 10.0.1.x, the outer IPv4 ID incrementing per
tunnel, as a sender's tunnel device numbers them), built with
tests/tunnelbuild.py, the flows interleaved in bursts of 8 segments 2 us
apart, 100 us between bursts; copies of a built block, each 1 ms after the
one before, make it ``--packets`` long.

Usage:
    python3 bench/tunnel_bulk.py {gre,vxlan,geneve,ipip} OUT [--packets N]
    python3 bench/tunnel_bulk.py real IN OUT --copies C   (a real capture repeated)
"""

import argparse
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

KW = {"gre": dict(gre_key=5), "vxlan": dict(udp_csum="zero"),
      "geneve": dict(geneve_opts=b"\1\2\3\4"), "ipip": {}}


def block(kind, flows, segs):
    """(time ns, frame bytes) of ``segs`` segments per flow and their ACKs."""
    from pktbuild import ACK, PSH, Flow
    from tunnelbuild import Tunnel
    tuns = [Tunnel(kind, src=f"10.0.0.{i + 1}", dst=f"10.0.1.{i + 1}", **KW[kind])
            for i in range(flows)]
    backs = [Tunnel(kind, src=t.dst, dst=t.src, **KW[kind]) for t in tuns]
    fw = [Flow(4, ipid="inc", sport=40000 + i, dport=5201) for i in range(flows)]
    rv = [Flow(4, ipid="inc", sport=5201, dport=40000 + i, src=f.dst, dst=f.src) for i, f in
          enumerate(fw)]
    out, t, sent = [], 0, [0] * flows
    while min(sent) < segs:
        for i in range(flows):
            for _ in range(8):
                k = sent[i]
                flags = ACK | PSH if k % 44 == 43 else ACK
                out.append((t, bytes(tuns[i].wrap(fw[i].pkt(k * 1448, 1448, flags=flags)).data)))
                t += 2000
                sent[i] += 1
                if k % 2:
                    ack = rv[i].pkt(0, 0, ack_off=(k + 1) * 1448)
                    out.append((t, bytes(backs[i].wrap(ack).data)))
                    t += 2000
            t += 100_000
    return out


def write(path, recs, copies):
    span = recs[-1][0] + 1_000_000
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for c in range(copies):
            for t, d in recs:
                t += c * span + 1_000_000_000
                f.write(struct.pack("<IIII", t // 10**9, t % 10**9, len(d), len(d)))
                f.write(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=sorted(KW) + ["real"])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--packets", type=int, default=120_000)
    ap.add_argument("--copies", type=int, default=350)
    a = ap.parse_args()
    if a.kind == "real":
        import bench_split_tunnels
        bench_split_tunnels.repeat(a.paths[0], a.paths[1], a.copies)
        return
    recs = block(a.kind, 8, 440)
    write(a.paths[0], recs, -(-a.packets // len(recs)))


if __name__ == "__main__":
    main()
