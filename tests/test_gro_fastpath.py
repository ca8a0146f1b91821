"""The compiled core and the reference path must agree.

Real Ethernet/IPv4/TCP packets from the kernel capture are mutated at
random (dropped, reordered, header fields changed, checksums broken,
padding added, snaplen cut...) and run through the engine from a classic
pcap (the compiled core takes what it models, hands over the rest) and as
Packets with ``compiled=False``: the output packets (bytes, lengths,
timestamps) and the statistics must be identical.
"""

import io
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pcapgro import pipeline
from pcapgro.capture import open_reader
from pcapgro.capture.pcap import PcapReader, PcapWriter
from pcapgro.checksum import ipv4_header_checksum, ones_sum, pseudo_sum_v4
from pcapgro.gro import GROConfig, GROEngine
from pcapgro.record import Interface, Packet, Section

from capture_helpers import KERNEL


_BASE = []


def base():
    if not _BASE:
        r = open_reader(KERNEL / "tcp4-4flows-wire.pcap")
        _BASE.extend(ev for ev in r if type(ev) is Packet)
        r.close()
    return _BASE


def fix_checksums(d):
    d = bytearray(d)
    d[24:26] = b"\0\0"
    d[24:26] = ipv4_header_checksum(bytes(d[14:34])).to_bytes(2, "big")
    tot = struct.unpack_from("!H", d, 16)[0]
    d[50:52] = b"\0\0"
    s = pseudo_sum_v4(d[26:30], d[30:34], 6, tot - 20) + ones_sum(bytes(d[34:14 + tot]))
    d[50:52] = ((~(s % 0xFFFF or 0xFFFF)) & 0xFFFF).to_bytes(2, "big")
    return bytes(d)


MUTATIONS = ["none", "drop", "swap", "ttl", "tos", "window", "flags", "id", "id_fixed",
             "ack", "tsval", "bad_tcp_csum", "bad_ip_csum", "pad", "cut", "df", "seq",
             "shorter", "cwr", "gap"]


def mutate(pkts, plan):
    out = []
    i = 0
    shift = 0
    pkts = list(pkts)
    for m, val in plan:
        if i >= len(pkts):
            break
        p = pkts[i]
        d = bytearray(p.data)
        ts = p.ts + shift
        orig = p.orig_len
        fix = True
        if m == "drop":
            i += 1
            continue
        if m == "swap" and i + 1 < len(pkts):
            pkts[i], pkts[i + 1] = pkts[i + 1], pkts[i]
            p = pkts[i]
            d = bytearray(p.data)
            orig = p.orig_len
        elif m == "ttl":
            d[22] = val & 0xFF
        elif m == "tos":
            d[15] = val & 0xFF
        elif m == "window":
            d[48] = val & 0xFF
        elif m == "flags":
            d[47] = val & 0xFF
        elif m == "cwr":
            d[47] |= 0x80
        elif m == "id":
            d[18:20] = (val & 0xFFFF).to_bytes(2, "big")
        elif m == "id_fixed":
            d[18:20] = b"\x12\x34"
        elif m == "df":
            d[20] ^= 0x40
        elif m == "ack":
            d[42] ^= 1 + (val & 0x7F)
        elif m == "seq":
            d[41] ^= 1 + (val & 0x7F)
        elif m == "tsval" and len(d) >= 66 and d[46] >> 4 >= 8:
            d[61] ^= 1 + (val & 0x7F)
        elif m == "bad_tcp_csum":
            fix = False
            d[50] ^= 0x55
        elif m == "bad_ip_csum":
            fix = False
            d[24] ^= 0x55
        elif m == "shorter" and len(d) > 100:
            cut = 1 + val % 50
            d = d[:-cut]
            d[16:18] = (struct.unpack_from("!H", d, 16)[0] - cut).to_bytes(2, "big")
            orig = len(d)
        elif m == "gap":
            shift += 2_000_000 + val * 1000
            ts += 2_000_000 + val * 1000
        if fix and m not in ("none", "drop", "gap", "swap"):
            d = bytearray(fix_checksums(d))
        if m == "pad":
            d += b"\0" * (1 + val % 7)
            orig = len(d)
        if m == "cut" and len(d) > 80:
            d = d[:60 + val % 20]   # orig_len stays: snaplen cut
        out.append(Packet(ts, bytes(d), max(orig, len(d)), 0, 1))
        i += 1
    return out


def run(pkts, fast, **kw):
    """(ts, data, orig_len) of every packet out, and the statistics: from
    a nanosecond pcap through pipeline.run (``fast``), or from Packets on
    the reference path."""
    if not fast:
        eng = GROEngine(GROConfig(compiled=False, annotate=False, **kw))
        out = [(p.ts, p.data, p.orig_len) for p in eng.process(pkts) if type(p) is Packet]
        return out, eng.stats.to_dict()
    f = io.BytesIO()
    w = PcapWriter(f, nanosecond=True)
    w.write_batch([Section(), Interface(1, 262144, 9)] + list(pkts))
    w.close()
    eng = GROEngine(GROConfig(annotate=False, **kw))
    g = io.BytesIO()
    w = PcapWriter(g, nanosecond=True)
    pipeline.run(PcapReader(io.BytesIO(f.getvalue())), w, eng.process)
    w.close()
    out = [(p.ts, bytes(p.data), p.orig_len)
           for p in PcapReader(io.BytesIO(g.getvalue())) if type(p) is Packet]
    return out, eng.stats.to_dict()


plans = st.lists(st.tuples(st.sampled_from(MUTATIONS), st.integers(0, 255)),
                 min_size=20, max_size=360)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, start=st.integers(0, 300), verify=st.booleans(),
       hash=st.sampled_from(["flow", "none"]), budget=st.sampled_from([0, 0, 8, 64]))
def test_compiled_matches_reference_path(plan, start, verify, hash, budget):
    pkts = mutate(base()[start:], plan)
    kw = dict(verify_csum=verify, hash=hash, napi_budget=budget)
    assert run(pkts, True, **kw) == run(pkts, False, **kw)


@pytest.mark.parametrize("name", ["tcp4-bulk", "tcp4-4flows"])
def test_compiled_matches_reference_on_real_captures(name):
    r = open_reader(KERNEL / f"{name}-wire.pcap")
    pkts = [ev for ev in r if type(ev) is Packet]
    r.close()
    assert run(pkts, True) == run(pkts, False)
