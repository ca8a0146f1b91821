"""Fuzz the engines with damaged packets: no exception, nothing lost.

Real packets from every shared capture are mutated (bit flips, cuts at
random points, length fields rewritten, random bytes) and run through the
GRO engine (every mode, fast and reference path), the GSO splitter and the
restorer.  Nothing may raise (but UnusableInput where the contract says
so), and the GRO statistics must account for every packet.
"""

import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pcapgro.capture import open_reader
from pcapgro.errors import UnusableInput
from pcapgro.gro import GROConfig, GROEngine
from pcapgro.gso import GSOConfig, GSOSplitter
from pcapgro.record import Packet
from pcapgro.restore import Restorer

from capture_helpers import all_captures

_POOL = []


def pool():
    if not _POOL:
        files = all_captures((".pcap",))
        for f in files:
            try:
                r = open_reader(f)
                n = 0
                for ev in r:
                    if type(ev) is Packet:
                        _POOL.append(ev)
                        n += 1
                        if n >= 80:
                            break
                r.close()
            except Exception:
                continue
    return _POOL


def mutate(p, rnd):
    d = bytearray(p.data)
    op = rnd.randrange(7)
    if op == 0 and d:
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(d))
            d[i] ^= 1 << rnd.randrange(8)
    elif op == 1 and d:
        d = d[:rnd.randrange(len(d))]
    elif op == 2 and len(d) > 20:
        i = rnd.randrange(12, min(len(d) - 1, 60))
        d[i] = rnd.randrange(256)
        d[i + 1] = rnd.randrange(256)
    elif op == 3:
        d += bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 40)))
    elif op == 4:
        d = bytearray(rnd.randrange(256) for _ in range(rnd.randint(0, 120)))
    orig = len(d) if rnd.random() < 0.8 else len(d) + rnd.randint(0, 3000)
    lt = p.linktype if rnd.random() < 0.9 else rnd.choice([0, 1, 101, 113, 228, 229, 276, 147])
    return Packet(p.ts, bytes(d), orig, p.iface, lt)


CONFIGS = [dict(), dict(udp="gro"), dict(fraglist=True), dict(fraglist=True, udp="gro"),
           dict(verify_csum=False), dict(hash="none", napi_budget=8, hz=1000),
           dict(gro_flush_timeout=200_000, csum="kernel"), dict(gro_max_size=200_000)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), ci=st.integers(0, len(CONFIGS) - 1),
       fast=st.booleans(), rate=st.floats(0.0, 1.0))
def test_engines_survive_damaged_packets(seed, ci, fast, rate):
    rnd = random.Random(seed)
    base = pool()
    start = rnd.randrange(max(1, len(base) - 200))
    pkts = []
    ts = 1_700_000_000_000_000_000
    for p in base[start:start + 200]:
        q = mutate(p, rnd) if rnd.random() < rate else p
        ts += rnd.choice([1000, 1000, 5000, 2_000_000])
        pkts.append(Packet(ts, q.data, max(q.orig_len, len(q.data)), 0, q.linktype))
    cfg = GROConfig(compiled=fast, **CONFIGS[ci])
    eng = GROEngine(cfg)
    out = list(eng.process(pkts))
    stt = eng.stats
    assert stt.segments_merged + stt.singles + sum(stt.passed.values()) == len(pkts)
    back = [p for p in Restorer().process(out) if type(p) is Packet]
    assert [(p.ts, p.data) for p in back] == [(p.ts, p.data) for p in pkts]
    try:
        list(GSOSplitter(GSOConfig(gso_size=rnd.choice([None, 1200]))).process(pkts))
    except UnusableInput:
        pass
