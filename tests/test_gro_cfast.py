"""The compiled GRO loop (pcapgro/_native.c via pcapgro.gro.cfast) must
write exactly what the Python engine writes: same bytes, same statistics.

The Python engine is the reference (the compiled core is also tested
against it in test_gro_plan.py, test_gro_fastpath.py and test_rule_list.py);
here the same classic pcap goes through ``pipeline.run`` with the compiled
loop and without (``GROConfig(compiled=False)``).  The traffic exercises every rule the
loop implements (flag word, CWR, ack, options, TTL/TOS/DF, IPv4 ID
modes, mss, sequence gaps, size limit, final flags, pure ACKs, bucket
overflow, poll gaps, time going backwards, by microseconds or seconds, with
passed packets then keeping their earlier times) and every way it hands over to
the Python engine mid-chunk and mid-aggregate (IPv6, VLAN, UDP, bad
checksums, IPv4 options, fragments, Ethernet padding, snaplen cuts),
with chunks small enough that aggregates cross chunk boundaries.
"""

import io
import random
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pcapgro import pipeline
from pcapgro.capture import _stream
from pcapgro.capture.pcap import PcapReader, PcapWriter
from pcapgro.gro import GROConfig, GROEngine, cfast
from pcapgro.gro.napi import PollClock
from pcapgro.record import Interface, Packet, Section

from capture_helpers import merged_bytes
from pktbuild import (ACK, CWR, FIN, PSH, RST, SYN, URG, Flow, arp_frame, dstopts, frag6, hbh,
                      parse, routing, ts_option)
from test_gro_plan import traffic

pytestmark = pytest.mark.skipif(not cfast.available(),
                                reason="compiled extension pcapgro._native not built")

US = 1000
T0 = 1_700_000_000 * 10**9
# three VLAN tags: the loop's since issue 16 (it held at most two before)
TAGS3 = [(0x8100, 1), (0x8100, 2), (0x8100, 3)]


class Handed:
    """Segments of a flow (``Flow`` keywords) that the loop does not take
    but hands to the Python engine: IPIP-tunnelled behind three VLAN tags
    (a tunnel behind more than MAXTAGS; three tags on a plain frame, or
    inner IPv4 options, are the loop's since issues 16 and 23)."""

    def __init__(self, **kw):
        from tunnelbuild import Tunnel
        self.flow = Flow(4, **kw)
        self.tun = Tunnel("ipip")

    def pkt(self, seq_off=0, plen=100, flags=ACK, ts=0):
        p = self.tun.wrap(self.flow.pkt(seq_off, plen, flags), ts=ts)
        d = bytes(p.data)
        tags = b"".join(tp.to_bytes(2, "big") + v.to_bytes(2, "big") for tp, v in TAGS3)
        d = d[:12] + tags + d[12:]
        return Packet(p.ts, d, len(d), p.iface, p.linktype)


# the link and IPv6 shapes of a flow with shapes=True (rule_traffic): plain,
# 802.1Q, 802.1ad + 802.1Q, three tags, IPv6 flow labels and an extension
# header (all the loop's since issue 16)
SHAPES = [{}, {"vlans": [(0x8100, 7)]}, {"vlans": [(0x88A8, 100), (0x8100, 7)]},
          {"vlans": [(0x8100, 1), (0x8100, 2), (0x8100, 3)]}]
SHAPES6 = SHAPES + [{"flow": 0x12345}, {"exthdrs": [(60, bytes(6))]}]


def rule_traffic(seed, n_flows, n_pkts, us=False, back_p=0.004, back_ns=None, p6=0.15,
                 shapes=False):
    """Interleaved bulk flows whose segments now and then break a GRO rule
    or are something the compiled loop hands over for.  With probability
    ``back_p`` time goes backwards before a packet (a pure ACK, passed:
    often while aggregates are held), by 30 us or by one of ``back_ns``.
    ``p6``: the share of IPv6 flows; ``shapes``: each flow takes one of
    SHAPES / SHAPES6 (VLAN tags, flow labels, extension headers)."""
    rnd = random.Random(seed)
    flows = []
    for i in range(n_flows):
        fam = 6 if i and rnd.random() < p6 else 4
        shape = rnd.choice(SHAPES6 if fam == 6 else SHAPES) if shapes else {}
        f = Flow(fam, src=f"10.1.{i // 200}.{1 + i % 200}" if fam == 4 else f"fd00::{i + 1}",
                 sport=30000 + i, dport=443, ipid=rnd.choice(["inc", "inc", None]),
                 ipid0=rnd.randrange(65536), seq0=rnd.randrange(2**32),
                 mac_src=bytes([2, 0, 0, 0, 2, i % 256]),
                 options=rnd.choice([b"", ts_option(5, 6)]), **shape)
        back = Flow(fam, src=f.dst, dst=f.src, sport=443, dport=30000 + i, ipid="inc",
                    mac_dst=f.mac_src)
        flows.append([f, back, rnd.choice([1448, 1000, 777, 100]), 0])
    out = []
    ts = T0
    for k in range(n_pkts):
        fl = rnd.choice(flows) if rnd.random() < 0.4 else flows[k // 12 % n_flows]
        f, back, mss, off = fl
        ts += rnd.choice([1, 1, 3, 20]) * US
        r = rnd.random()
        if r < 0.004:
            ts += 3_000_000                       # a poll gap
        elif r < 0.004 + back_p:
            ts -= 30 * US if back_ns is None else rnd.choice(back_ns)   # time goes back
        if r < 0.08:
            out.append(back.pkt(0, 0, ACK, ts=ts, ack_off=off))
            continue
        kw = {}
        plen = mss
        flags = ACK
        e = rnd.random()
        if e < 0.75:
            pass
        elif e < 0.77:
            flags |= PSH
        elif e < 0.78:
            flags |= rnd.choice([FIN, URG, RST, SYN, CWR])
        elif e < 0.80:
            plen = rnd.randrange(1, mss)          # short: ends the aggregate
        elif e < 0.81:
            plen = mss + 1                         # longer than gso_size
        elif e < 0.82:
            off += rnd.choice([-mss, mss])         # sequence gap
        elif e < 0.83:
            kw["window"] = 1000
        elif e < 0.835:
            kw["ack_off"] = 7
        elif e < 0.84:
            kw["options"] = ts_option(9, 9) if f.options else ts_option(1, 1)
        elif e < 0.845:
            kw["ttl" if f.family == 4 else "hlim"] = 3
        elif e < 0.85:
            kw["tos" if f.family == 4 else "tc"] = 4
        elif e < 0.855 and f.family == 4:
            kw["df"] = False
        elif e < 0.86 and f.family == 4:
            kw["ident"] = rnd.randrange(65536)     # breaks the ID pattern
        elif e < 0.87:
            kw["csum"] = rnd.choice(["bad", "seed"])
        elif e < 0.875 and f.family == 4:
            kw["ip_csum"] = "bad"
        elif e < 0.88:
            kw["vlans"] = [(0x8100, 5)]
        elif e < 0.885:
            kw["pad_to"] = 1600 if plen < 1500 else 0
        elif e < 0.89 and f.family == 4:
            kw["ip_options"] = b"\x01\x01\x01\x00"
        elif e < 0.895 and f.family == 4:
            kw["mf"] = True
        elif e < 0.90:
            out.append(f.udp(200, ts=ts))
            continue
        elif e < 0.905:
            out.append(f.pkt(off, plen, flags, ts=ts, snaplen=60))
            fl[3] = off + plen
            continue
        out.append(f.pkt(off, plen, flags, ts=ts, **kw))
        fl[3] = off + plen
    if us:
        for p in out:
            p.ts -= p.ts % US
    return out


def _pcap(pkts, nanosecond=True, byteorder="<", linktype=1):
    f = io.BytesIO()
    w = PcapWriter(f, nanosecond=nanosecond, byteorder=byteorder)
    w.write_batch([Section(byteorder), Interface(linktype, 262144, 9 if nanosecond else 6)]
                  + list(pkts))
    w.close()
    return f.getvalue()


def _pipe(data, compiled, chunk, min_run, writer, annotate=False, **cfg):
    """pcap bytes through pipeline.run with a GROEngine to ``writer(f)`` on
    a real file (the writer then flushes with os.writev, as merge does),
    with the reader's chunk size ``chunk`` and cfast.MIN_RUN ``min_run``
    (1: the loop takes over again wherever it can, the most hand-overs).
    Returns (output bytes, stats dict)."""
    old, old_run = _stream.CHUNK, cfast.MIN_RUN
    _stream.CHUNK = chunk
    cfast.MIN_RUN = min_run
    try:
        out, eng = merged_bytes(PcapReader(io.BytesIO(data)), writer, annotate=annotate,
                                compiled=compiled, **cfg)
        return out, eng.stats.to_dict()
    finally:
        _stream.CHUNK, cfast.MIN_RUN = old, old_run


def run(data, compiled, chunk=1 << 22, min_run=1, **cfg):
    """pcap bytes to classic pcap (:func:`_pipe`); returns (output bytes,
    stats dict, records the compiled loop wrote)."""
    wrote = []
    orig = cfast.CEngine.run

    def counting(self, eng, lb, start=0):
        n = len(eng.out)
        k = orig(self, eng, lb, start)
        wrote.extend(getattr(x, "n", 0) for x in eng.out[n:])
        return k

    cfast.CEngine.run = counting
    try:
        out, st = _pipe(data, compiled, chunk, min_run, PcapWriter, **cfg)
    finally:
        cfast.CEngine.run = orig
    return out, st, sum(wrote)


def general(pkts, nanosecond=True, byteorder="<", **cfg):
    """The general (reference) path's output file and stats."""
    eng = GROEngine(GROConfig(annotate=False, compiled=False, **cfg))
    g = io.BytesIO()
    w = PcapWriter(g, nanosecond=nanosecond, byteorder=byteorder)
    w.write_batch([Section(byteorder), Interface(1, 262144, 9 if nanosecond else 6)])
    w.write_batch([p for p in eng.process(pkts) if type(p) is Packet])
    w.close()
    return g.getvalue(), eng.stats.to_dict()


# gro_max_size 10040 and 7052 are reached exactly by segments of 1000 or
# 100 bytes with 20 / 32 bytes of TCP header (40 + n * L, 52 + n * L)
CONFIGS = [dict(), dict(hash="none"), dict(verify_csum=False), dict(csum="kernel"),
           dict(gro_max_size=10_040), dict(gro_max_size=7_052), dict(gro_max_size=200_000),
           dict(verify_csum=False, csum="kernel"), dict(poll_gap_ns=10_000),
           dict(fraglist=True), dict(fraglist=True, csum="kernel", hash="none")]


def check(pkts, chunk, nanosecond=True, byteorder="<", **cfg):
    data = _pcap(pkts, nanosecond, byteorder)
    c_out, c_st, wrote = run(data, True, chunk, **cfg)
    p_out, p_st, _ = run(data, False, chunk, **cfg)
    assert c_st == p_st
    assert c_out == p_out
    # the default hand-over rule (fewer hand-overs) writes the same
    d_out, d_st, _ = run(data, True, chunk, min_run=cfast.MIN_RUN, **cfg)
    assert (d_out, d_st) == (p_out, p_st)
    g_out, g_st = general(pkts, nanosecond, byteorder, **cfg)
    assert c_st == g_st
    assert c_out == g_out
    return wrote


@pytest.mark.parametrize("ci", range(len(CONFIGS)))
@pytest.mark.parametrize("n_flows", [1, 4, 11])
def test_compiled_matches_python_on_rule_traffic(n_flows, ci):
    pkts = rule_traffic(n_flows * 31 + ci, n_flows, 2500)
    wrote = check(pkts, 1 << 16, **CONFIGS[ci])
    assert wrote > 0              # the compiled loop did take records


@pytest.mark.parametrize("ci", range(len(CONFIGS)))
@pytest.mark.parametrize("n_flows", [1, 3, 12])
def test_compiled_matches_python_on_bulk_traffic(n_flows, ci):
    pkts = traffic(n_flows * 7 + ci, n_flows, 3000)
    wrote = check(pkts, 1 << 15, **CONFIGS[ci])
    assert wrote > 0


@pytest.mark.parametrize("nanosecond,byteorder", [(False, "<"), (True, ">"), (False, ">")])
def test_compiled_keeps_resolution_and_byte_order(nanosecond, byteorder):
    pkts = rule_traffic(99, 5, 2000, us=not nanosecond)
    assert check(pkts, 1 << 15, nanosecond, byteorder) > 0


def test_bucket_overflow_and_poll_ends():
    # 20 flows in one bucket (hash none): the oldest is completed for each
    # 9th; poll gaps complete everything in bucket order
    pkts = traffic(3, 20, 4000)
    data = _pcap(pkts)
    c_out, c_st, wrote = run(data, True, 1 << 14, hash="none")
    assert wrote > 0
    assert c_st["flush_reasons"].get("bucket_full", 0) > 0
    assert c_st["flush_reasons"].get("poll_end", 0) > 0
    p_out, p_st, _ = run(data, False, 1 << 14, hash="none")
    assert (c_out, c_st) == (p_out, p_st)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_flows=st.integers(1, 14),
       ci=st.integers(0, len(CONFIGS) - 1), chunk=st.sampled_from([2000, 9000, 1 << 20]))
def test_compiled_matches_python_random(seed, n_flows, ci, chunk):
    check(rule_traffic(seed, n_flows, 600), chunk, **CONFIGS[ci])


@pytest.mark.parametrize("ci", [0, 1, 4, 8])
@pytest.mark.parametrize("n_flows", [1, 5])
def test_compiled_matches_python_time_going_far_back(n_flows, ci):
    # steps back of up to 5 s, often: the packets passed after them keep
    # their own times (earlier than what was written), aggregates completed
    # after them are stamped no earlier than the latest time written
    pkts = rule_traffic(n_flows * 13 + ci, n_flows, 2500, back_p=0.04,
                        back_ns=[40 * US, 2_000_000, 5 * 10**9])
    assert check(pkts, 1 << 15, **CONFIGS[ci]) > 0
    out = [p for p in PcapReader(io.BytesIO(run(_pcap(pkts), True, 1 << 15,
                                                **CONFIGS[ci])[0]))
           if type(p) is Packet]
    ts = [p.ts for p in out]
    assert ts != sorted(ts)
    # TCP packets without payload are always passed: each keeps its time
    def zero_payload(ps):
        times = {}
        for p in ps:
            if len(p.data) == p.orig_len and parse(p).payload_len == 0:
                times.setdefault(bytes(p.data), []).append(p.ts)
        return times

    acks = zero_payload(pkts)
    assert sum(map(len, acks.values())) > 100
    assert zero_payload(out) == acks


def test_pass_after_step_back_while_held():
    # the loop holds flow A's aggregate when a pure ACK 60 us earlier than
    # the packet written before it arrives: the ACK keeps its time; then a
    # UDP datagram (handed over to the Python engine) also earlier, then
    # the aggregate completed by PSH at its time; same on every path
    a = Flow(4, src="10.9.0.1", dst="10.9.0.2", sport=1111, dport=2222, ipid="inc")
    b = Flow(4, src="10.9.0.2", dst="10.9.0.1", sport=2222, dport=1111, ipid="inc")
    pre = [a.pkt(100 * k, 100, ACK, ts=T0 + k * US) for k in range(40)]
    pre.append(a.pkt(4000, 100, ACK | PSH, ts=T0 + 40 * US))
    t = T0 + 100 * US
    pkts = pre + [b.pkt(0, 0, ACK, ts=t), a.pkt(4100, 100, ACK, ts=t + US),
                  a.pkt(4200, 100, ACK, ts=t + 2 * US), b.pkt(0, 0, ACK, ts=t - 60 * US),
                  b.udp(50, ts=t - 59 * US), b.pkt(0, 0, ACK, ts=t - 58 * US),
                  a.pkt(4300, 100, ACK | PSH, ts=t + 3 * US)]
    for chunk in (1 << 20, 3000):
        assert check(pkts, chunk) > 0
    out = [p for p in PcapReader(io.BytesIO(run(_pcap(pkts), True)[0])) if type(p) is Packet]
    assert [p.ts - T0 for p in out[-5:]] == [100 * US, 40 * US, 41 * US, 42 * US, 103 * US]
    assert len(out[-1].data) == 54 + 300


def test_pcapng_second_section_earlier():
    # a second pcapng Section whose times are 5 s before the first's: it
    # starts afresh (no packet of it is held back to the first's times);
    # every path writes the same
    from pcapgro.capture.pcapng import PcapngReader, PcapngWriter
    first = rule_traffic(5, 3, 600)
    second = rule_traffic(6, 3, 600)
    shift = first[-1].ts - second[0].ts + 5 * 10**9
    for p in second:
        p.ts -= shift
    ng = io.BytesIO()
    w = PcapngWriter(ng)
    w.write_batch([Section(), Interface(1, 262144, 9)] + first
                  + [Section(), Interface(1, 262144, 9)] + second)
    w.close()
    outs = []
    for cfg in (dict(compiled=True), dict(compiled=False)):
        eng = GROEngine(GROConfig(annotate=False, **cfg))
        f = io.BytesIO()
        w = PcapWriter(f)
        pipeline.run(PcapngReader(io.BytesIO(ng.getvalue())), w, eng.process)
        w.close()
        outs.append((f.getvalue(), eng.stats.to_dict()))
    assert outs[0] == outs[1]
    out = [p for p in PcapReader(io.BytesIO(outs[0][0])) if type(p) is Packet]
    n1 = next(i for i, p in enumerate(out) if p.ts < first[0].ts)
    assert max(p.ts for p in out[:n1]) <= first[-1].ts
    # the second section: exactly what it gives alone
    eng = GROEngine(GROConfig(annotate=False))
    alone = [p for p in eng.process([Section(), Interface(1, 262144, 9)] + second)
             if type(p) is Packet]
    assert [(p.ts, bytes(p.data)) for p in out[n1:]] == [(p.ts, bytes(p.data)) for p in alone]


def test_not_used_for_configurations_it_does_not_model():
    # annotations need pcapng output: the engine decides that per output
    # (GROEngine.ng_out); the configuration alone does not exclude them
    assert cfast.usable(GROConfig(annotate=True))
    # issue 16: fraglist with local sockets is modelled too
    assert cfast.usable(GROConfig(annotate=False, fraglist=True, local_ports=frozenset([80])))
    assert cfast.usable(GROConfig(annotate=False, fraglist=True))
    # issue 16: the loop models the NAPI budget and gro_flush_timeout
    assert cfast.usable(GROConfig(annotate=False, napi_budget=64))
    assert cfast.usable(GROConfig(annotate=False, gro_flush_timeout=1000))
    assert cfast.usable(GROConfig(annotate=False, napi_budget=64, gro_flush_timeout=1000))
    assert not cfast.usable(GROConfig(annotate=False, compiled=False))
    assert cfast.usable(GROConfig(annotate=False))
    # issue 23: UDP tunnel sockets (VXLAN, Geneve) are modelled
    assert cfast.usable(GROConfig(annotate=False, vxlan_ports=frozenset({4789}),
                                  geneve_ports=frozenset({6081})))
    # with the work poll model too (issue 21)
    assert cfast.usable(GROConfig(annotate=False, poll_model="work", vxlan_ports=frozenset({4789})))


def test_sum16_matches_reference():
    from pcapgro._native import sum16
    from pcapgro.checksum import ones_sum
    rnd = random.Random(1)
    for n in list(range(70)) + [1447, 1448, 9000]:
        d = bytes(rnd.randrange(256) for _ in range(n))
        assert sum16(d) == ones_sum(d)
    assert sum16(b"\xff" * 64) == ones_sum(b"\xff" * 64)
    # words that carry out of 64 bits on every addition (add_carry)
    for n in list(range(80)) + [65535, 65536]:
        for d in (b"\xff" * n, (b"\xff\xfe" * n)[:n], (b"\x80" * n)):
            assert sum16(d) == ones_sum(d)


def test_sum16_vector_blocks_match_scalar():
    """sum16's AVX2 blocks (64 bytes each, from 128 bytes on, at most
    2**20 at a time) give the scalar loop's sum: every length around the
    block edges, odd starts, all-ones words that fill the 32-bit lanes,
    and more than one 2**20-byte block."""
    from pcapgro._native import sum16
    from pcapgro.checksum import ones_sum
    rnd = random.Random(2)
    data = bytes(rnd.randrange(256) for _ in range(5000))
    for n in list(range(120, 270)) + [1447, 1448, 1500, 4097]:
        for start in (0, 1, 3):
            d = data[start:start + n]
            assert sum16(d) == sum16(d, False) == ones_sum(d)
    for n in ((1 << 20) - 1, 1 << 20, (1 << 20) + 65, 3 << 20):
        for d in (b"\xff" * n, (b"\xff\xfe" * n)[:n]):
            assert sum16(d) == sum16(d, False) == ones_sum(d)


def test_records_walk_matches_python():
    from pcapgro._native import records
    import struct
    recs = b"".join(struct.pack("<IIII", 1, 2, n, n) + b"x" * n for n in (10, 0, 70, 5))
    assert records(recs, 0, len(recs), 16, False) == ([0, 26, 42, 128], len(recs), -1)
    # the last record cut by the end: dropped, its start and caplen given
    assert records(recs, 0, len(recs) - 2, 16, False) == ([0, 26, 42], 128, 5)
    # a header cut by the end
    assert records(recs, 0, 130, 16, False) == ([0, 26, 42], 128, -1)
    big = b"".join(struct.pack(">IIII", 1, 2, n, n) + b"y" * n for n in (3, 4))
    assert records(big, 0, len(big), 16, True) == ([0, 19], len(big), -1)


# ---- cases a review found (each failed before its fix)

def test_head_longer_than_gro_max_size():
    # a packet is held as a head whatever gro_max_size says; its payload
    # (1448 bytes) is longer than the limit: the loop's storage grows
    # (it overflowed a limit-sized buffer)
    pkts = traffic(21, 3, 1500)
    for limit in (1, 100, 1000):
        assert check(pkts, 1 << 14, gro_max_size=limit) > 0


def test_poll_gap_beyond_int64():
    pkts = traffic(22, 2, 800)
    assert check(pkts, 1 << 14, poll_gap_ns=2**63) > 0


def test_more_than_65535_segments_ip_id_count_is_u16():
    # inet_gro_flush compares the ID offset with NAPI_GRO_CB(p)->count, a
    # u16: the 65537th one-byte segment of an incrementing-ID flow still
    # merges (BIG TCP limit); every path agrees
    f = Flow(4, ipid="inc", ipid0=10)
    pkts = [f.pkt(k, 1, ACK, ts=T0 + k) for k in range(66_000)]
    pkts.append(f.pkt(66_000, 1, ACK | FIN, ts=T0 + 66_000))   # completes it
    data = _pcap(pkts)
    c_out, c_st, wrote = run(data, True, gro_max_size=524_280)
    p_out, p_st, _ = run(data, False, gro_max_size=524_280)
    assert wrote > 0
    assert (c_out, c_st) == (p_out, p_st)
    assert c_st["aggregates"] == 1 and c_st["segments_merged"] == 66_001
    assert general(pkts, gro_max_size=524_280) == (c_out, c_st)


def test_writer_snaplen_covers_raw_records_before_smaller_packets():
    # a RawRecords with a 300,000-byte record, then in the same batch a
    # 270,000-byte Packet: the header snaplen is the larger
    from pcapgro.record import RawRecords
    import struct
    big = struct.pack("<IIII", 1, 0, 300_000, 300_000) + bytes(300_000)
    f = io.BytesIO()
    w = PcapWriter(f)
    w.write_batch([Section("<"), Interface(1, 262144, 6)])
    w.write_batch([RawRecords(big, 1, 300_000, 10**9), Packet(2 * 10**9, bytes(270_000), 270_000)])
    w.close()
    assert struct.unpack_from("<I", f.getvalue(), 16)[0] == 300_000


def test_writer_timestamp_beyond_pcap_range_is_one_clear_error():
    from pcapgro.errors import UnusableInput
    w = PcapWriter(io.BytesIO())
    w.write_batch([Section("<"), Interface(1, 262144, 6)])
    with pytest.raises(UnusableInput, match="32-bit"):
        w.write_batch([Packet(2**32 * 10**9, b"x" * 60, 60)])


def test_writer_keeps_packets_after_raw_records_that_flush():
    # a batch of Packets, RawRecords big enough to flush (os.writev starts a
    # new parts list), then Packets: every record reaches the file (the
    # ones after the flush were appended to the old list and lost)
    from pcapgro.record import RawRecords
    raw = b"".join(struct.pack("<IIII", 5, k, 1000, 1000) + bytes(1000) for k in range(3000))
    evs = [Packet(10**9 + k, bytes([k]) * 1500, 1500) for k in range(3)]
    evs.append(RawRecords(raw, 3000, 1000, 5 * 10**9))
    evs += [Packet(6 * 10**9 + k, bytes([k]) * 1500, 1500) for k in range(3)]
    with tempfile.TemporaryFile() as f:
        w = PcapWriter(f)
        w.write_batch([Section("<"), Interface(1, 262144, 6)])
        w.write_batch(evs)
        w.close()
        f.seek(0)
        back = [ev for ev in PcapReader(f) if type(ev) is Packet]
    assert len(back) == 3006 == w.packets
    assert [p.ts for p in back[-3:]] == [6 * 10**9, 6 * 10**9, 6 * 10**9]


def test_pcapng_input_to_pcap_output():
    # the compiled loop is only for classic pcap input; asking the writer
    # about a pcapng reader must say no, not fail
    from pcapgro.capture.pcapng import PcapngReader, PcapngWriter
    pkts = traffic(4, 2, 300)
    ng = io.BytesIO()
    w = PcapngWriter(ng)
    w.write_batch([Section(), Interface(1, 262144, 9)] + pkts)
    w.close()
    outs = []
    for compiled in (True, False):
        eng = GROEngine(GROConfig(annotate=False, compiled=compiled))
        f = io.BytesIO()
        w = PcapWriter(f)
        pipeline.run(PcapngReader(io.BytesIO(ng.getvalue())), w, eng.process)
        w.close()
        outs.append((f.getvalue(), eng.stats.to_dict()))
    assert outs[0] == outs[1]
    assert outs[0][1]["aggregates"] > 0


def test_fraction_out_of_range_counted_once():
    # a record whose microsecond field is >= 1e6 ends the loop's run before
    # its checksum is verified (the Python engine verifies it)
    f = Flow(4, ipid="inc")
    pkts = [f.pkt(k * 100, 100, ACK, ts=T0 + k * US) for k in range(6)]
    data = bytearray(_pcap(pkts, nanosecond=False))
    # the 4th record's fraction field := 1,500,000 us
    pos = 24
    for _ in range(3):
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    struct.pack_into("<I", data, pos + 4, 1_500_000)
    c = run(bytes(data), True)
    p = run(bytes(data), False)
    assert c[:2] == p[:2]
    assert c[1]["checksums"]["verified"] == 6


def test_reason_names_come_from_c():
    # the codes the loop counts by are named in C; each name is a member
    from pcapgro import _native
    from pcapgro.gro.flush import Flush, Pass
    assert len(_native.FLUSH_NAMES) == len(set(_native.FLUSH_NAMES)) > 0
    assert {Flush(v) for v in _native.FLUSH_NAMES} <= set(Flush)
    assert {Pass(v) for v in _native.PASS_NAMES} <= set(Pass)
    assert [c.value for c in cfast.FLUSH_CODES] == list(_native.FLUSH_NAMES)
    assert [c.value for c in cfast.PASS_CODES] == list(_native.PASS_NAMES)


def _calls(data, chunk=1 << 22, **cfg):
    """(output, stats, calls of CEngine.run, calls of GROEngine._chunk_py);
    ``chunk``: the reader's chunk size."""
    from pcapgro.gro.engine import GROEngine as E
    runs, pys = [], []
    orig_run, orig_py = cfast.CEngine.run, E._chunk_py

    def counting_run(self, eng, lb, start=0):
        runs.append(start)
        return orig_run(self, eng, lb, start)

    def counting_py(self, lb):
        pys.append(len(lb))
        return orig_py(self, lb)

    cfast.CEngine.run, E._chunk_py = counting_run, counting_py
    try:
        out, st, _ = run(data, True, chunk, min_run=cfast.MIN_RUN, **cfg)
    finally:
        cfast.CEngine.run, E._chunk_py = orig_run, orig_py
    return out, st, len(runs), len(pys)


def test_sparse_traffic_not_handed_over_per_packet():
    # issue 18.7: segments 2 ms apart (every one its own NAPI poll), which
    # the loop does not take (Handed), go to the Python engine in one piece
    f = Handed(ipid="inc")
    pkts = [f.pkt(k * 1000, 1000, ACK, ts=T0 + k * 2_000_000) for k in range(400)]
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data)
    assert (out, st) == run(data, False)[:2]
    assert runs == 1 and pys == 1


def test_mixed_sparse_traffic_hand_overs_bounded():
    # segments the loop takes and ones it does not (Handed) alternating,
    # 2 ms apart: the loop would take one record at a time; it takes over
    # again only before MIN_RUN records it handles
    f = Flow(4, ipid="inc")
    g = Handed(ipid="inc")
    pkts = []
    for k in range(300):
        ts = T0 + k * 2_000_000
        pkts.append(g.pkt(k * 100, 100, ACK, ts=ts) if k % 2
                    else f.pkt(k * 100, 100, ACK, ts=ts))
    # then a long bulk run in one poll: the loop takes it
    pkts += [f.pkt(30_000 + k * 1448, 1448, ACK, ts=T0 + 10**9 + k * US) for k in range(300)]
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data)
    assert (out, st) == run(data, False)[:2]
    assert pys == 1 and runs == 2
    assert st["aggregates"] > 0


@pytest.mark.parametrize("cfg", [dict(), dict(csum="kernel")])
def test_seed_checksums_stay_in_the_compiled_loop(cfg):
    # issue 16.1: a sender's capture (CHECKSUM_PARTIAL: every TCP checksum
    # field holds the pseudo-header seed, as the shared *-sender and veth
    # captures do) is trusted and merged by the compiled loop itself, not
    # handed to the Python engine; statistics count the seeds
    f = Flow(4, ipid="inc")
    back = Flow(4, src=f.dst, dst=f.src, sport=f.dport, dport=f.sport, ipid="inc")
    pkts = []
    for k in range(600):
        ts = T0 + k * US
        pkts.append(f.pkt(k * 1448, 1448, ACK | (PSH if k % 40 == 39 else 0), ts=ts,
                          csum="seed" if k % 3 else "valid"))
        if k % 10 == 9:
            pkts.append(back.pkt(0, 0, ACK, ts=ts, ack_off=k * 1448, csum="seed"))
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data, **cfg)
    assert pys == 0 and runs == 1
    assert (out, st) == run(data, False, **cfg)[:2]
    assert general(pkts, **cfg)[1] == st
    assert st["checksums"]["seed"] == 400 + 60
    assert st["aggregates"] == 15


@pytest.mark.parametrize("ci", range(len(CONFIGS)))
@pytest.mark.parametrize("n_flows", [1, 6, 13])
def test_compiled_ipv6_and_vlan_flows(n_flows, ci):
    # issue 16.2/16.5: IPv6 TCP (no extension headers) and frames behind
    # one or two VLAN tags are merged by the loop itself (and, since issue
    # 16, behind extension headers and three or more tags)
    pkts = rule_traffic(n_flows * 17 + ci, n_flows, 2500, p6=0.5, shapes=True)
    assert check(pkts, 1 << 16, **CONFIGS[ci]) > 0


@pytest.mark.parametrize("shape", SHAPES[:3] + [{"family": 6}, {"family": 6, "flow": 7},
                                                {"family": 6, "vlans": [(0x8100, 9)]}])
@pytest.mark.parametrize("cfg", [dict(), dict(csum="kernel"), dict(verify_csum=False)])
def test_ipv6_and_vlan_bulk_stays_in_the_compiled_loop(shape, cfg):
    _bulk_in_the_loop(shape, cfg)


# three and more VLAN tags (802.1Q, 802.1ad, as linklayer.network_layer
# walks them: any number): the loop's since issue 16, the whole tag stack
# compared between segments of a flow (ipv4.py / ipv6.py's key holds the
# link header whole)
MANY_TAGS = [TAGS3, [(0x88A8, 1), (0x8100, 2), (0x8100, 3), (0x8100, 4)],
             [(0x8100, k) for k in range(1, 13)], [(0x8100, k) for k in range(1, 301)]]


@pytest.mark.parametrize("tags", range(len(MANY_TAGS)))
@pytest.mark.parametrize("fam", [4, 6])
@pytest.mark.parametrize("cfg", [dict(), dict(csum="kernel"), dict(fraglist=True)])
def test_many_vlan_tags_stay_in_the_compiled_loop(tags, fam, cfg):
    _bulk_in_the_loop({"family": fam, "vlans": MANY_TAGS[tags]}, cfg, fixed=False)


def test_many_vlan_tags_tell_flows_apart():
    # flows that differ only in a tag beyond the key's link bytes (the
    # 12th of 12): two flows, merged apart, as the reference keeps them
    tags = [(0x8100, k) for k in range(1, 13)]
    other = tags[:11] + [(0x8100, 99)]
    f, g = Flow(4, ipid="inc", vlans=tags), Flow(4, ipid="inc", vlans=other)
    pkts = []
    for k in range(400):
        pkts.append((f if k % 2 else g).pkt(k // 2 * 1000, 1000, ACK, ts=T0 + k * US))
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data)
    assert pys == 0 and runs == 1
    assert (out, st) == run(data, False)[:2]
    assert st["segments_merged"] == 400 and not st["pass_reasons"]


def _bulk_in_the_loop(shape, cfg, fixed=True):
    """A bulk flow of ``shape`` (Flow keywords, "family") with pure ACKs
    back, taken by the loop in one run: the reference's output."""
    shape = dict(shape)
    fam = shape.pop("family", 4)
    f = Flow(fam, ipid="inc", **shape)
    back = Flow(fam, src=f.dst, dst=f.src, sport=f.dport, dport=f.sport, ipid="inc", **shape)
    pkts = []
    for k in range(500):
        ts = T0 + k * US
        pkts.append(f.pkt(k * 1448, 1448 - (k % 50 == 49) * 700, ACK, ts=ts,
                          csum="seed" if k % 7 == 3 else "valid"))
        if k % 10 == 9:
            pkts.append(back.pkt(0, 0, ACK, ts=ts, ack_off=k * 1448))
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data, **cfg)
    assert pys == 0 and runs == 1
    assert (out, st) == run(data, False, **cfg)[:2]
    g_out, g_st = general(pkts, **cfg)
    assert (out, st) == (g_out, g_st)
    if not fixed:
        assert st["aggregates"] >= 20
        return
    # every 50th segment is short (ends its aggregate), 45 of 1448 bytes
    # reach the size limit: two aggregates per 50
    assert st["aggregates"] == 20
    assert st["flush_reasons"]["short_segment"] == 10


def test_vlan_off_passed_in_the_compiled_loop():
    # without VLAN GRO tagged frames pass (no_handler): the loop passes
    # them itself since issue 16
    cfg = dict(vlan_gro=False)
    f = Flow(4, ipid="inc", vlans=[(0x8100, 7)])
    pkts = [f.pkt(k * 1448, 1448, ACK, ts=T0 + k * US) for k in range(300)]
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data, **cfg)
    assert not pys and st["pass_reasons"]["no_handler"] == 300
    assert (out, st) == run(data, False, **cfg)[:2]
    assert general(pkts, **cfg) == (out, st)


@pytest.mark.parametrize("cfg", [dict(gro_max_size=200_000),
                                 dict(gro_max_size=200_000, csum="kernel"),
                                 dict(gro_max_size=100_000, verify_csum=False),
                                 dict(gro_max_size=150_000, hash="none")])
@pytest.mark.parametrize("shape", [{}, {"exthdrs": [(60, bytes(6))]}, {"vlans": [(0x8100, 7)]}])
def test_ipv6_big_tcp_in_the_compiled_loop(cfg, shape):
    # an IPv6 aggregate beyond 65535 bytes of payload gets a jumbo
    # Hop-by-Hop header (BIG TCP, ipv6_gro_complete): written by the loop
    # itself since issue 16, as the reference writes it (pcap and
    # annotated pcapng, whose restore record names the inserted header)
    f = Flow(6, **shape)
    g = Flow(4, ipid="inc", sport=7)
    pkts = []
    for k in range(300):
        pkts.append(f.pkt(k * 1428, 1428, ACK | (PSH if k % 100 == 99 else 0),
                          ts=T0 + 2 * k * US))
        pkts.append(g.pkt(k * 1448, 1448, ACK, ts=T0 + (2 * k + 1) * US))
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data, **cfg)
    assert not pys
    assert (out, st) == run(data, False, **cfg)[:2]
    assert general(pkts, **cfg) == (out, st)
    got = [parse(p) for p in PcapReader(io.BytesIO(out)) if type(p) is Packet]
    jumbo = [p for p in got if p.family == 6 and p.jumbo]
    assert jumbo and all(p.jumbo > 65535 for p in jumbo)
    assert run_ng(data, True, **cfg)[:2] == run_ng(data, False, **cfg)[:2]


def run_ng(data, compiled, chunk=1 << 22, annotate=True, min_run=1, **cfg):
    """pcap bytes to pcapng, merge's default output (:func:`_pipe`):
    (output bytes, stats dict, EPBs the compiled loop wrote)."""
    from pcapgro.capture.pcapng import PcapngWriter
    from pcapgro.record import RawBlocks
    blocks = []
    orig = PcapngWriter._raw_blocks

    def counting(self, ev):
        assert type(ev) is RawBlocks
        blocks.append(ev.n)
        return orig(self, ev)

    PcapngWriter._raw_blocks = counting
    try:
        out, st = _pipe(data, compiled, chunk, min_run, PcapngWriter, annotate, **cfg)
    finally:
        PcapngWriter._raw_blocks = orig
    return out, st, sum(blocks)


@pytest.mark.parametrize("annotate", [True, False])
@pytest.mark.parametrize("ci", [0, 1, 3, 4, 8, 9])
@pytest.mark.parametrize("n_flows", [1, 7])
def test_compiled_pcapng_output_matches_python(n_flows, ci, annotate):
    # issue 16.6: pcapng output, annotated (comments, TSO flag, restore
    # records) or not, written by the loop itself: the same bytes as the
    # Python engine's, across hand-overs (an aggregate the loop merged
    # part of carries its rows over) and chunk boundaries
    pkts = rule_traffic(n_flows * 19 + ci, n_flows, 2500, p6=0.3, shapes=True)
    data = _pcap(pkts)
    for chunk in (1 << 22, 9000):
        c_out, c_st, blocks = run_ng(data, True, chunk, annotate, **CONFIGS[ci])
        p_out, p_st, none = run_ng(data, False, chunk, annotate, **CONFIGS[ci])
        assert blocks > 0 and none == 0
        assert c_st == p_st
        assert c_out == p_out


@pytest.mark.parametrize("nanosecond,byteorder", [(True, "<"), (False, ">")])
def test_compiled_pcapng_output_resolution_and_byte_order(nanosecond, byteorder):
    pkts = rule_traffic(77, 4, 1500, us=not nanosecond)
    data = _pcap(pkts, nanosecond, byteorder)
    c = run_ng(data, True)
    p = run_ng(data, False)
    assert c[2] > 0
    assert c[:2] == p[:2]


def test_compiled_pcapng_output_restores_the_input():
    # split --restore of what the loop wrote gives the input back, byte
    # for byte (the restore records are exact)
    pkts = traffic(3, 5, 3000)
    f = Flow(6, src="fd00::7", ipid="inc", vlans=[(0x8100, 7)], flow=3)
    pkts += [f.pkt(k * 1448, 1448, ACK, ts=pkts[-1].ts + (k + 1) * US) for k in range(200)]
    data = _pcap(pkts)
    out, st, blocks = run_ng(data, True, 9000)
    assert blocks > 0 and st["aggregates"] > 100
    import os
    import subprocess
    import sys
    exe = os.path.join(os.path.dirname(sys.executable), "pcapgro")
    with tempfile.TemporaryDirectory() as d:
        src, dst = f"{d}/m.pcapng", f"{d}/back.pcap"
        with open(src, "wb") as f:
            f.write(out)
        r = subprocess.run([exe, "split", "--restore", "-q", src, dst],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        with open(dst, "rb") as f:
            back = [p for p in PcapReader(f) if type(p) is Packet]
    orig = [p for p in PcapReader(io.BytesIO(data)) if type(p) is Packet]
    assert [(p.ts, bytes(p.data)) for p in back] == [(p.ts, bytes(p.data)) for p in orig]


def _udp_fix(pkt, ulen=None, csum=None):
    """``pkt`` (a Flow.udp Packet) with its UDP length field set to
    ``ulen`` and its checksum recomputed (valid), or set to ``csum``: an
    int, or 'seed' (the pseudo-header seed of a CHECKSUM_PARTIAL sender)."""
    from pcapgro.checksum import fold, ones_sum
    from pcapgro.linklayer import network_layer
    d = bytearray(pkt.data)
    l3, et, _ = network_layer(1, d)
    v6 = et == 0x86DD
    l4 = l3 + (40 if v6 else 20)
    if ulen is not None:
        d[l4 + 4:l4 + 6] = ulen.to_bytes(2, "big")
    n = len(d) - l4
    addrs = bytes(d[l3 + 8:l3 + 40]) if v6 else bytes(d[l3 + 12:l3 + 20])
    pseudo = ones_sum(addrs) + 17 + n
    d[l4 + 6:l4 + 8] = b"\0\0"
    if csum == "seed":
        c = fold(pseudo)
    elif csum is not None:
        c = csum
    else:
        c = (~fold(pseudo + ones_sum(bytes(d[l4:])))) & 0xFFFF or 0xFFFF
    d[l4 + 6:l4 + 8] = c.to_bytes(2, "big")
    return Packet(pkt.ts, bytes(d), len(d), pkt.iface, pkt.linktype)


def udp_traffic(seed, n_flows, n_pkts, p6=0.3, shapes=True):
    """Interleaved UDP forwarding bursts (1 to 80 datagrams of one size, now
    and then a shorter or longer one, a TTL change, a zero, bad or seed
    checksum, a wrong UDP length), with TCP segments and poll gaps between."""
    rnd = random.Random(seed)
    flows = []
    for i in range(n_flows):
        fam = 6 if i and rnd.random() < p6 else 4
        shape = rnd.choice(SHAPES6 if fam == 6 else SHAPES) if shapes else {}
        flows.append([Flow(fam, src=f"10.2.{i // 200}.{1 + i % 200}" if fam == 4
                           else f"fd00::2:{i + 1}", sport=40000 + i, dport=4000 + i % 3,
                           ipid=rnd.choice(["inc", "inc", None]), ipid0=rnd.randrange(65536),
                           mac_src=bytes([2, 0, 0, 0, 3, i % 256]), **shape),
                      rnd.choice([1400, 1000, 333, 100, 1])])
    tcp = Flow(4, src="10.9.9.9", sport=5555, ipid="inc")
    out = []
    ts = T0
    off = 0
    while len(out) < n_pkts:
        f, size = rnd.choice(flows)
        for k in range(rnd.choice([1, 2, 5, 20, 64, 80])):
            ts += rnd.choice([1, 1, 2, 10]) * US
            e = rnd.random()
            plen, kw, fix = size, {}, None
            if e < 0.02:
                plen = max(1, size // 2)
            elif e < 0.03:
                plen = size + 10
            elif e < 0.035:
                kw["ttl" if f.family == 4 else "hlim"] = 2
            elif e < 0.04:
                fix = dict(csum=0)
            elif e < 0.045:
                fix = dict(csum=0x1234)
            elif e < 0.06:
                fix = dict(csum="seed")
            elif e < 0.065:
                fix = dict(ulen=8 + plen - 1)
            elif e < 0.07:
                fix = dict(ulen=8)
            p = f.udp(plen, ts=ts, **kw)
            out.append(p if fix is None else _udp_fix(p, **fix))
        r = rnd.random()
        if r < 0.1:
            ts += 3_000_000
        elif r < 0.3:
            ts += US
            out.append(tcp.pkt(off, 1448, ACK, ts=ts))
            off += 1448
    return out


UDP_CONFIGS = [dict(udp="gro"), dict(udp="gro", csum="kernel"), dict(udp="gro", hash="none"),
               dict(udp="gro", verify_csum=False), dict(udp="gro", gro_max_size=20_000),
               dict(udp="off"), dict(fraglist=True), dict(fraglist=True, udp="gro", csum="kernel")]


@pytest.mark.parametrize("ci", range(len(UDP_CONFIGS)))
@pytest.mark.parametrize("n_flows", [1, 5, 12])
def test_compiled_udp_matches_python(n_flows, ci):
    # issue 16.3: standard UDP GRO (udp_gro_receive_segment) in the loop:
    # longer datagram, short last one, 64 per aggregate, size limit
    # (<= 65536), length and checksum rules, IPv4/IPv6, VLAN; with
    # --udp off every datagram is passed (no_udp_gro) by the loop itself
    pkts = udp_traffic(n_flows * 23 + ci, n_flows, 3000, shapes=n_flows > 1)
    wrote = check(pkts, 1 << 16, **UDP_CONFIGS[ci])
    assert wrote > 0


@pytest.mark.parametrize("annotate", [True, False])
@pytest.mark.parametrize("ci", [0, 1, 5, 6])
def test_compiled_udp_pcapng_output_matches_python(ci, annotate):
    pkts = udp_traffic(ci + 99, 6, 3000)
    data = _pcap(pkts)
    for chunk in (1 << 22, 7000):
        c_out, c_st, blocks = run_ng(data, True, chunk, annotate, **UDP_CONFIGS[ci])
        p_out, p_st, _ = run_ng(data, False, chunk, annotate, **UDP_CONFIGS[ci])
        assert blocks > 0
        assert (c_out, c_st) == (p_out, p_st)


def test_udp_forwarding_stays_in_the_compiled_loop():
    f = Flow(4, ipid="inc")
    g = Flow(6, sport=7, vlans=[(0x8100, 3)])
    pkts = []
    for k in range(1000):
        pkts.append((f if k % 2 else g).udp(500 if k % 200 < 198 else 250, ts=T0 + k * US))
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data, udp="gro")
    assert pys == 0 and runs == 1
    assert (out, st) == run(data, False, udp="gro")[:2]
    assert general(pkts, udp="gro") == (out, st)
    assert st["by_kind"]["udp"]["aggregates"] == st["aggregates"] > 0
    assert st["flush_reasons"]["segment_limit"] > 0
    assert st["flush_reasons"]["short_datagram"] == 10


@pytest.mark.parametrize("cfg", [dict(fraglist=True), dict(fraglist=True, csum="kernel")])
def test_fraglist_stays_in_the_compiled_loop(cfg):
    # issue 16.4: fraglist GRO (rx-gro-list) in the loop: TCP chains at
    # most 64 segments, a segment of the other ip_summed (seed checksum)
    # ends the chain (csum_state), a UDP datagram of the other ip_summed is
    # passed while its flow's chain stays held; kernel checksums keep the
    # first packet's
    f = Flow(4, ipid="inc")
    u = Flow(6, sport=9, dport=4789 + 1)
    pkts = []
    for k in range(300):
        ts = T0 + k * US
        pkts.append(f.pkt(k * 1000, 1000, ACK, ts=ts, csum="seed" if k == 100 else "valid"))
        p = u.udp(500, ts=ts)
        pkts.append(_udp_fix(p, csum="seed") if k == 150 else p)
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data, **cfg)
    assert pys == 0 and runs == 1
    assert (out, st) == run(data, False, **cfg)[:2]
    assert general(pkts, **cfg) == (out, st)
    assert st["by_kind"]["tcp_fraglist"]["aggregates"] > 4
    assert st["by_kind"]["udp_fraglist"]["aggregates"] > 4
    assert st["flush_reasons"]["segment_limit"] > 0
    # the seed segment ends the chain before it and its own (the next is valid)
    assert st["flush_reasons"]["csum_state"] == 2
    assert st["pass_reasons"]["csum_state"] == 1


def _relink(pkts, link):
    """``pkts`` (Ethernet frames of pktbuild Flows) with their link header
    replaced: 'sll' / 'sll2' (Linux cooked, the source MAC as address) or
    'raw' (none); returns (packets, linktype)."""
    from pktbuild import sll, sll2
    from pcapgro.linklayer import network_layer
    out = []
    for p in pkts:
        l3, et, _ = network_layer(1, p.data)
        if l3 is None:
            continue
        body = bytes(p.data[l3:])
        d = (sll(body, et, addr=bytes(p.data[6:12])) if link == "sll" else
             sll2(body, et, addr=bytes(p.data[6:12])) if link == "sll2" else body)
        n = len(d) - (len(p.data) - p.orig_len)
        out.append(Packet(p.ts, d, n, p.iface, {"sll": 113, "sll2": 276, "raw": 101}[link]))
    return out, {"sll": 113, "sll2": 276, "raw": 101}[link]


@pytest.mark.parametrize("link", ["sll", "sll2", "raw"])
@pytest.mark.parametrize("ci", [0, 3, 9])
def test_compiled_linux_cooked_and_raw_ip(link, ci):
    # issue 16.5: `tcpdump -i any` captures (Linux cooked v1 / v2) and raw
    # IP go through the loop: the same bytes and statistics as the Python
    # engine, to pcap and to annotated pcapng
    tcp, lt = _relink(rule_traffic(ci + 5, 6, 2500, p6=0.3), link)
    udp, _ = _relink(udp_traffic(ci + 6, 4, 1500, shapes=False), link)
    pkts = sorted(tcp + udp, key=lambda p: p.ts)
    data = _pcap(pkts, linktype=lt)
    cfg = dict(CONFIGS[ci], udp="gro")
    c_out, c_st, wrote = run(data, True, 1 << 15, **cfg)
    assert wrote > 0
    assert (c_out, c_st) == run(data, False, 1 << 15, **cfg)[:2]
    n_out, n_st, blocks = run_ng(data, True, 1 << 15, True, **cfg)
    assert blocks > 0
    assert (n_out, n_st) == run_ng(data, False, 1 << 15, True, **cfg)[:2]


@pytest.mark.parametrize("link", ["sll2", "raw"])
def test_cooked_bulk_stays_in_the_compiled_loop(link):
    f = Flow(4, ipid="inc")
    pkts, lt = _relink([f.pkt(k * 1448, 1448, ACK, ts=T0 + k * US) for k in range(300)], link)
    data = _pcap(pkts, linktype=lt)
    out, st, runs, pys = _calls(data)
    assert pys == 0 and runs == 1
    assert (out, st) == run(data, False)[:2]
    assert st["aggregates"] == 7          # 45 segments of 1448 reach 65536


def test_pcapng_output_keeps_packets_after_blocks_that_flush():
    # found by a tester: RawBlocks that made the writer flush in the middle
    # of a batch sent the plain Packets after them to the old, already
    # written parts list (9 of 184 packets lost); the capture hands over to
    # the Python engine and back again now and then (tests/captures)
    from capture_helpers import REPO
    data = (REPO / "tests" / "captures" / "mixed-handover-64.pcap").read_bytes()
    for cfg in (dict(), dict(udp="gro")):
        c_out, c_st, blocks = run_ng(data, True, **cfg)
        p_out, p_st, _ = run_ng(data, False, **cfg)
        assert blocks > 0
        assert c_st == p_st
        assert c_out == p_out


# ---- issue 16: the NAPI budget, gro_flush_timeout, BSD loopback link types

def _nogap(pkts):
    """``pkts`` with every arrival gap over 500 us shrunk to 20 us (one
    poll from start to end, but for the budget's)."""
    out, shift, prev = [], 0, None
    for p in pkts:
        if prev is not None and p.ts - prev > 500 * US:
            shift += p.ts - prev - 20 * US
        prev = p.ts
        out.append(Packet(p.ts - shift, p.data, p.orig_len, p.iface, p.linktype))
    return out


# gro_flush_timeout around a jiffy (hz 1000: 1 ms, 250: 4 ms, 100: 10 ms)
# and around rule_traffic's poll gaps (3 ms and more)
@pytest.mark.parametrize("timeout", [1, 500_000, 1_000_000, 2_999_999, 3_000_000, 3_000_020,
                                     4_000_000, 10_000_000])
@pytest.mark.parametrize("hz", [100, 250, 1000])
def test_compiled_flush_timeout_matches_python(timeout, hz):
    # a poll end completes only what is older than the current jiffy; the
    # timer completes the rest when the next packet comes later
    pkts = rule_traffic(timeout % 997 + hz, 4, 1500)
    check(pkts, 9000, gro_flush_timeout=timeout, hz=hz)


@pytest.mark.parametrize("budget", [1, 2, 7, 64, 300])
@pytest.mark.parametrize("hz", [100, 250, 1000])
@pytest.mark.parametrize("gaps", [True, False])
def test_compiled_napi_budget_matches_python(budget, hz, gaps):
    # polls also end after `budget` packets (__napi_poll): the budget
    # flush, old-only when hz >= 1000; the count goes on across chunks and
    # hand-overs
    pkts = rule_traffic(budget * 3 + hz + gaps, 5, 1500)
    if not gaps:
        pkts = _nogap(pkts)
    check(pkts, 9000, napi_budget=budget, hz=hz)


@pytest.mark.parametrize("budget,timeout", [(1, 1_000_000), (7, 500_000), (7, 4_000_000),
                                            (64, 3_000_000), (64, 10_000_000), (300, 1)])
@pytest.mark.parametrize("hz", [100, 1000])
def test_compiled_budget_and_flush_timeout_match_python(budget, timeout, hz):
    pkts = rule_traffic(budget + timeout % 991 + hz, 3, 1500, p6=0.3, shapes=True)
    check(pkts, 7000, napi_budget=budget, gro_flush_timeout=timeout, hz=hz)


@pytest.mark.parametrize("cfg", [dict(napi_budget=7), dict(napi_budget=64, hz=1000),
                                 dict(gro_flush_timeout=1_000_000),
                                 dict(napi_budget=64, gro_flush_timeout=3_000_000, hz=1000),
                                 dict(napi_budget=2, fraglist=True)])
@pytest.mark.parametrize("annotate", [True, False])
def test_compiled_budget_and_timeout_pcapng_output_match_python(cfg, annotate):
    pkts = rule_traffic(len(cfg) * 11 + annotate, 4, 2000, p6=0.3, shapes=True)
    data = _pcap(pkts)
    for chunk in (1 << 22, 9000):
        c_out, c_st, blocks = run_ng(data, True, chunk, annotate, **cfg)
        p_out, p_st, none = run_ng(data, False, chunk, annotate, **cfg)
        assert blocks > 0 and none == 0
        assert (c_out, c_st) == (p_out, p_st)


def _bulk(n, gap_every=0, gap=2_000_000):
    """A bulk TCP flow (1448-byte segments 1 us apart, an ACK every 10th),
    with an arrival gap of ``gap`` ns every ``gap_every`` segments."""
    f = Flow(4, ipid="inc")
    back = Flow(4, src=f.dst, dst=f.src, sport=f.dport, dport=f.sport, ipid="inc")
    pkts, ts = [], T0
    for k in range(n):
        ts += US + (gap if gap_every and k % gap_every == gap_every - 1 else 0)
        pkts.append(f.pkt(k * 1448, 1448, ACK, ts=ts))
        if k % 10 == 9:
            pkts.append(back.pkt(0, 0, ACK, ts=ts, ack_off=k * 1448))
    return pkts


@pytest.mark.parametrize("cfg", [dict(napi_budget=64), dict(napi_budget=64, hz=1000),
                                 dict(napi_budget=7, hz=100), dict(napi_budget=1),
                                 dict(gro_flush_timeout=1_000_000),
                                 dict(gro_flush_timeout=1_999_999, hz=100),
                                 dict(napi_budget=64, gro_flush_timeout=1_000_000, hz=1000)])
def test_budget_and_flush_timeout_stay_in_the_compiled_loop(cfg):
    # issue 16: the loop runs these NAPI modes itself, across chunks
    # (polls of 150 segments 2 ms apart)
    pkts = _bulk(2000, gap_every=150)
    data = _pcap(pkts)
    for chunk in (1 << 22, 20000):
        out, st, runs, pys = _calls(data, chunk, **cfg)
        assert pys == 0 and runs == (1 if chunk > len(data) else len(data) // chunk + 1)
        assert (out, st) == run(data, False, chunk, **cfg)[:2]
    assert general(pkts, **cfg) == (out, st)
    fl = st["flush_reasons"]
    if cfg.get("napi_budget", 0) > 1:
        assert fl["budget"] > 0
    if cfg.get("gro_flush_timeout"):
        assert fl["flush_timeout"] > 0


@pytest.mark.parametrize("cfg,back", [(dict(napi_budget=64, hz=1000), True),
                                      (dict(napi_budget=64), True),
                                      (dict(napi_budget=7, gro_flush_timeout=1_000_000), True),
                                      (dict(gro_flush_timeout=1_000_000, hz=1000), True),
                                      (dict(gro_flush_timeout=10_000_000, hz=100), False)])
def test_budget_and_timeout_hand_back_at_poll_starts(cfg, back):
    # segments the loop hands over (Handed) now and then, in
    # polls of 150 bulk segments 1.5 ms apart: the loop takes over again at
    # a poll start where the Python engine then holds nothing.  A timeout
    # longer than the gaps leaves the young aggregate held at every poll
    # end (old-only flush): the Python engine goes on to the end, exactly
    pkts = _bulk(3000, gap_every=150, gap=1_500_000)
    for k in range(100, len(pkts), 700):
        p = pkts[k]
        if parse(p).payload_len:
            q = Handed(src="10.77.0.1", ipid="inc").pkt(k, 100, ACK, ts=p.ts)
            pkts[k] = q
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data, **cfg)
    assert pys >= 1
    assert (runs >= 2) == back
    assert (out, st) == run(data, False, **cfg)[:2]
    assert general(pkts, **cfg) == (out, st)


def test_in_poll_carried_to_the_python_engine():
    # 320 segments in one poll, budget 64: the loop counts the poll's
    # packets; the fifth budget flush is the Python engine's at the end of
    # input (GROEngine._end), which sees the loop's count
    pkts = [p for p in _bulk(320) if parse(p).payload_len]
    data = _pcap(pkts)
    for chunk in (1 << 22, 30000):
        out, st, runs, pys = _calls(data, chunk, napi_budget=64)
        assert pys == 0
        assert (out, st) == run(data, False, chunk, napi_budget=64)[:2]
        # 45 segments of 1448 reach 65536: two aggregates per poll
        assert st["flush_reasons"] == {"budget": 5, "size_limit": 5}


def _loopback(pkts, linktype, order):
    """``pkts`` (Ethernet frames of pktbuild Flows) behind a BSD loopback
    header instead: DLT_NULL (0) with the address family in byte order
    ``order`` ('<' or '>'), DLT_LOOP (108, network order); AF_INET6 as
    one of 24, 28, 30 (and 10 for NULL) by the source address."""
    from pcapgro.linklayer import network_layer
    out = []
    af6 = [24, 28, 30, 10] if linktype == 0 else [24, 28, 30]
    for k, p in enumerate(pkts):
        l3, et, _ = network_layer(1, p.data)
        if l3 is None:
            continue
        fam = 2 if et == 0x0800 else af6[sum(p.data[l3 + 8:l3 + 24]) % len(af6)]
        d = struct.pack(order + "I", fam) + bytes(p.data[l3:])
        n = len(d) - (len(p.data) - p.orig_len)
        out.append(Packet(p.ts, d, n, p.iface, linktype))
    return out


@pytest.mark.parametrize("linktype,order", [(0, "<"), (0, ">"), (108, ">")])
@pytest.mark.parametrize("cfg", [dict(), dict(udp="gro", csum="kernel"),
                                 dict(napi_budget=7, gro_flush_timeout=1_000_000, hz=1000)])
def test_compiled_bsd_loopback(linktype, order, cfg):
    # issue 16: DLT_NULL (host byte order: both seen) and DLT_LOOP captures
    # (macOS / BSD lo0) go through the loop, IPv4 and IPv6: the same bytes
    # and statistics as the Python engine, to pcap and to annotated pcapng
    tcp = _loopback(rule_traffic(linktype + len(order) + len(cfg), 5, 2000, p6=0.4,
                                 shapes=False), linktype, order)
    udp = _loopback(udp_traffic(linktype + 3, 3, 1000, shapes=False), linktype, order)
    pkts = sorted(tcp + udp, key=lambda p: p.ts)
    # a family the loop does not know (AF_APPLETALK 16) is handed over
    pkts[500] = Packet(pkts[500].ts, struct.pack(order + "I", 16) + bytes(pkts[500].data[4:]),
                       pkts[500].orig_len, 0, linktype)
    data = _pcap(pkts, linktype=linktype)
    for chunk in (1 << 22, 9000):
        c_out, c_st, wrote = run(data, True, chunk, **cfg)
        assert wrote > 0
        assert (c_out, c_st) == run(data, False, chunk, **cfg)[:2]
        n_out, n_st, blocks = run_ng(data, True, chunk, True, **cfg)
        assert blocks > 0
        assert (n_out, n_st) == run_ng(data, False, chunk, True, **cfg)[:2]
    assert c_st["aggregates"] > 50


@pytest.mark.parametrize("linktype,order,fam", [(0, "<", 2), (0, ">", 2), (108, ">", 2),
                                                (0, "<", 30), (0, ">", 24), (108, ">", 28)])
def test_bsd_loopback_bulk_stays_in_the_compiled_loop(linktype, order, fam):
    f = Flow(4 if fam == 2 else 6, ipid="inc")
    pkts = _loopback([f.pkt(k * 1448, 1448, ACK, ts=T0 + k * US) for k in range(300)],
                     linktype, order)
    pkts = [Packet(p.ts, struct.pack(order + "I", fam) + bytes(p.data[4:]), p.orig_len, 0,
                   linktype) for p in pkts]
    data = _pcap(pkts, linktype=linktype)
    out, st, runs, pys = _calls(data)
    assert pys == 0 and runs == 1
    assert (out, st) == run(data, False)[:2]
    assert st["aggregates"] == 7          # 45 segments of 1448 reach 65536


# IPv6 extension header chains (ipv6.py walks Hop-by-Hop 0, Routing 43,
# Destination Options 60; a Fragment header 44 is rejected)
EXT_CHAINS = [[hbh(b"\x05\x02\x00\x00")], [dstopts(bytes(4))], [routing(4, 0, bytes(20))],
              [hbh(), routing(4, 1, bytes(36)), dstopts(bytes(12))],
              [dstopts(bytes(254))]]


def ext_traffic(seed, n_pkts):
    """IPv6 bulk flows behind extension header chains: two flows that
    differ only in their chain's bytes (not the same flow: ipv6_gro_receive
    compares the whole chain), a flow whose chain changes now and then, a
    chain over 256 bytes (the loop's since issue 16), Fragment headers (passed), UDP behind a
    chain, pure ACKs back."""
    rnd = random.Random(seed)
    flows = []
    for i, chain in enumerate(EXT_CHAINS + [[dstopts(bytes(4)), dstopts(bytes(4))],
                                            [dstopts(bytes(254)), dstopts(bytes(14))]]):
        f = Flow(6, src="fd00::1", sport=30000, dport=443, ipid="inc", exthdrs=chain,
                 mac_src=bytes([2, 0, 0, 0, 3, i % 3]), seq0=rnd.randrange(2**32),
                 options=rnd.choice([b"", ts_option(5, 6)]))
        back = Flow(6, src=f.dst, dst=f.src, sport=443, dport=30000, exthdrs=chain[:1])
        flows.append([f, back, rnd.choice([1448, 1000, 500]), 0])
    other = [dstopts(b"\x01\x02\x00\x00")]       # the same length as flow 1's chain
    u = Flow(6, src="fd00::9", sport=53, dport=5353, exthdrs=[hbh(), dstopts(bytes(4))])
    out, ts = [], T0
    for k in range(n_pkts):
        fl = rnd.choice(flows) if rnd.random() < 0.5 else flows[k // 10 % len(flows)]
        f, back, mss, off = fl
        ts += rnd.choice([1, 1, 3, 20]) * US
        r = rnd.random()
        if r < 0.005:
            ts += 3_000_000
        if r < 0.08:
            out.append(back.pkt(0, 0, ACK, ts=ts, ack_off=off))
            continue
        if r < 0.12:
            out.append(u.udp(300, ts=ts))
            continue
        kw = {}
        if r < 0.14:
            kw["exthdrs"] = other if f.exthdrs == EXT_CHAINS[1] else f.exthdrs[:1]
        elif r < 0.15:
            kw["exthdrs"] = [frag6()] + f.exthdrs
        elif r < 0.16:
            kw["csum"] = "bad"
        elif r < 0.18:
            kw["hlim"] = 3
        out.append(f.pkt(off, mss, ACK, ts=ts, **kw))
        fl[3] = off + mss
    return out


@pytest.mark.parametrize("cfg", [dict(), dict(csum="kernel"), dict(verify_csum=False),
                                 dict(hash="none", udp="gro"), dict(fraglist=True),
                                 dict(napi_budget=7, gro_flush_timeout=500_000)])
def test_compiled_ipv6_extension_headers(cfg):
    # issue 16: IPv6 behind Hop-by-Hop / Routing / Destination Options
    # headers (up to 256 bytes) in the loop, the whole chain compared
    # between segments; the same bytes and statistics as the Python engine
    pkts = ext_traffic(len(cfg) * 5 + 1, 3000)
    assert check(pkts, 9000, **cfg) > 0
    data = _pcap(pkts)
    n_out, n_st, blocks = run_ng(data, True, 9000, True, **cfg)
    assert blocks > 0
    assert (n_out, n_st) == run_ng(data, False, 9000, True, **cfg)[:2]


# chains over 256 bytes (the loop's limit before issue 16): 272 bytes, and
# the longest of each kind (2048 bytes apiece)
LONG_CHAINS = [[dstopts(bytes(254)), dstopts(bytes(14))],
               [hbh(bytes(2046)), routing(4, 0, bytes(2044)), dstopts(bytes(2046))]]


@pytest.mark.parametrize("chain", EXT_CHAINS + LONG_CHAINS)
def test_ipv6_extension_headers_stay_in_the_compiled_loop(chain):
    f = Flow(6, ipid="inc", exthdrs=chain)
    pkts = [f.pkt(k * 1000, 1000, ACK, ts=T0 + k * US) for k in range(300)]
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data)
    assert pys == 0 and runs == 1
    assert (out, st) == run(data, False)[:2]
    assert general(pkts) == (out, st)
    # 1000-byte segments: 65 fit 65536 with the headers, fewer behind
    # longer chains; everything merged, nothing passed
    assert st["aggregates"] >= 300 // 65 and not st["pass_reasons"]


@pytest.mark.parametrize("cfg", [dict(fraglist=True, local_ports=frozenset([443])),
                                 dict(fraglist=True, local_ports=frozenset([443, 4001]),
                                      udp="gro"),
                                 dict(fraglist=True, local_ports=frozenset([4001]),
                                      csum="kernel", napi_budget=7),
                                 dict(fraglist=True, local_ports=frozenset([443, 70000]))])
def test_compiled_fraglist_with_local_ports(cfg):
    # issue 16: with rx-gro-list, flows to a port with a local socket take
    # standard GRO (TCP: any socket; UDP: one with UDP_GRO, --udp gro), the
    # others fraglist; a port beyond 65535 is never a segment's
    tcp = rule_traffic(len(cfg) + 3, 6, 2000, p6=0.3)
    udp = udp_traffic(len(cfg) + 4, 4, 1500)
    pkts = sorted(tcp + udp, key=lambda p: p.ts)
    assert check(pkts, 9000, **cfg) > 0
    data = _pcap(pkts)
    n_out, n_st, blocks = run_ng(data, True, 9000, True, **cfg)
    assert blocks > 0
    assert (n_out, n_st) == run_ng(data, False, 9000, True, **cfg)[:2]


@pytest.mark.parametrize("udp", ["off", "gro"])
def test_fraglist_with_local_ports_stays_in_the_compiled_loop(udp):
    f = Flow(4, ipid="inc", dport=443)          # a local socket: standard GRO
    g = Flow(4, ipid="inc", sport=7, dport=8080)    # forwarded: fraglist
    u = Flow(6, sport=9, dport=5353)            # local UDP socket (UDP_GRO with gro)
    pkts = []
    for k in range(300):
        ts = T0 + k * US
        pkts += [f.pkt(k * 1000, 1000, ACK, ts=ts), g.pkt(k * 1000, 1000, ACK, ts=ts),
                 u.udp(500, ts=ts)]
    cfg = dict(fraglist=True, local_ports=frozenset([443, 5353]), udp=udp)
    data = _pcap(pkts)
    out, st, runs, pys = _calls(data, **cfg)
    assert pys == 0 and runs == 1
    assert (out, st) == run(data, False, **cfg)[:2]
    assert general(pkts, **cfg) == (out, st)
    kinds = st["by_kind"]
    assert kinds["tcp"]["aggregates"] > 0 and kinds["tcp_fraglist"]["aggregates"] > 0
    assert kinds["udp" if udp == "gro" else "udp_fraglist"]["aggregates"] > 0


# ---- issue 21: the work poll model (pcapgro.gro.napi.PollClock) in the loop

# the defaults; short costs (polls end on nearly every gap); long ones (a
# poll takes most of what follows, deliveries queue packets); with a
# budget, old-only (hz 1000) or not; with gro_flush_timeout
WORK = [dict(poll_model="work"),
        dict(poll_model="work", poll_wake_ns=100, poll_rx_ns=300, deliver_ns=500,
             deliver_seg_ns=50),
        dict(poll_model="work", poll_wake_ns=50_000, poll_rx_ns=20_000, deliver_ns=300_000,
             deliver_seg_ns=10_000),
        dict(poll_model="work", napi_budget=5, hz=1000),
        dict(poll_model="work", napi_budget=64, poll_rx_ns=30_000),
        dict(poll_model="work", gro_flush_timeout=1_000_000, hz=1000),
        dict(poll_model="work", napi_budget=7, gro_flush_timeout=20_000, fraglist=True)]


def test_work_model_is_the_loops():
    assert cfast.usable(GROConfig(annotate=False, poll_model="work"))
    # costs the loop's int64 clock could not hold: the reference path
    assert not cfast.usable(GROConfig(poll_model="work", deliver_seg_ns=cfast.WORK_COST_END))


@pytest.mark.parametrize("wi", range(len(WORK)))
@pytest.mark.parametrize("n_flows", [1, 5])
def test_compiled_work_model_matches_python(n_flows, wi):
    # same boundaries, reasons and state across chunks and hand-overs
    # (rule_traffic hands over mid-poll: IPv4 options, fragments, ...)
    assert check(rule_traffic(n_flows * 13 + wi, n_flows, 1500, p6=0.3, shapes=True), 9000,
                 **WORK[wi]) > 0
    assert check(traffic(n_flows * 5 + wi, n_flows, 1500), 1 << 15, **WORK[wi]) > 0


@pytest.mark.parametrize("wi", [0, 2, 3])
def test_compiled_work_model_udp_and_pcapng_output(wi):
    cfg = dict(WORK[wi], udp="gro")
    assert check(udp_traffic(wi, 4, 1500), 9000, **cfg) > 0
    data = _pcap(rule_traffic(wi + 3, 4, 1500, p6=0.3, shapes=True))
    for chunk in (1 << 22, 9000):
        c_out, c_st, blocks = run_ng(data, True, chunk, True, **WORK[wi])
        assert blocks > 0
        assert (c_out, c_st) == run_ng(data, False, chunk, True, **WORK[wi])[:2]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), wi=st.integers(0, len(WORK) - 1),
       chunk=st.sampled_from([2000, 9000, 1 << 20]))
def test_compiled_work_model_random(seed, wi, chunk):
    check(rule_traffic(seed, 1 + seed % 9, 500, us=bool(seed & 1)), chunk, **WORK[wi])


@pytest.mark.parametrize("wi", [0, 3, 5])
def test_work_model_stays_in_the_compiled_loop(wi):
    # bulk polls 2 ms apart: no hand-over, one run per chunk, and the
    # engine's PollClock is where the clock of the whole input would be
    pkts = _bulk(2000, gap_every=150)
    data = _pcap(pkts)
    for chunk in (1 << 22, 20000):
        out, st, runs, pys = _calls(data, chunk, **WORK[wi])
        assert pys == 0 and runs == (1 if chunk > len(data) else len(data) // chunk + 1)
        assert (out, st) == run(data, False, chunk, **WORK[wi])[:2]
    fl = st["flush_reasons"]
    assert fl.get("poll_end", 0) + fl.get("flush_timeout", 0) > 0
    eng = GROEngine(GROConfig(annotate=False, **WORK[wi]))
    eng.raw_out = True
    with tempfile.TemporaryFile() as f:
        pipeline.run(PcapReader(io.BytesIO(data)), PcapWriter(f), eng.process)
    whole = PollClock(eng.cfg)
    whole.ends([p.ts for p in pkts])
    c = eng._clock
    assert (c.open, c.now, c.n, c.free) == (whole.open, whole.now, whole.n, whole.free)


@pytest.mark.parametrize("wi", [0, 1, 3, 5])
def test_work_model_hand_overs_mid_poll(wi):
    # segments the loop hands over (Handed) and ARP frames
    # (the loop's) inside polls of bulk segments: the Python engine takes
    # them with the clock where the loop left it, the loop takes over again
    # at a poll start
    pkts = _bulk(3000, gap_every=150, gap=1_500_000)
    for k in range(100, len(pkts), 350):
        p = pkts[k]
        if (k // 350) % 2:
            q = Handed(src="10.77.0.1", ipid="inc").pkt(k, 100, ACK, ts=p.ts)
        else:
            q = Packet(p.ts, arp_frame(), 60, 0, 1)
        pkts[k] = q
    data = _pcap(pkts)
    for chunk in (1 << 22, 30000):
        out, st, runs, pys = _calls(data, chunk, **WORK[wi])
        assert pys >= 1 and runs >= 2
        assert (out, st) == run(data, False, chunk, **WORK[wi])[:2]
    assert general(pkts, **WORK[wi]) == (out, st)


KERNEL_WIRE = sorted((Path(__file__).parent / "data" / "kernel").glob("*-wire.pcap")) + sorted(
    (Path(__file__).parent / "captures" / "napi").glob("*-wire.pcap"))


@pytest.mark.parametrize("wire", KERNEL_WIRE, ids=lambda p: p.name)
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_work_model_kernel_captures_in_the_compiled_loop(wire, fmt, monkeypatch):
    # the real captures (classic pcap and pcapng): every packet in the
    # loop, output and statistics as the reference path's
    from pcapgro.gro.engine import GROEngine as E
    from pcapgro.jobs import merge
    pys = []
    orig = E._chunk_py
    monkeypatch.setattr(E, "_chunk_py", lambda self, lb: (pys.append(len(lb)), orig(self, lb)))
    # the default costs, then short ones (the work model's first
    # defaults, 2 / 2 / 10 / 1 µs), with which every pair has poll ends
    # while packets are held (the fitted defaults find none on some)
    opts = dict(poll_model="work", csum="kernel", udp="gro", fraglist="fraglist" in wire.name)
    for costs in ({}, dict(poll_wake=2000, poll_rx_cost=2000, deliver_seg_cost=1000)):
        outs = []
        for no_c in ("", "1"):
            monkeypatch.setenv("PCAPGRO_NO_C", no_c)
            pys.clear()
            b = io.BytesIO()
            rep = merge(str(wire), b, out_format=fmt, **opts, **costs)
            outs.append((b.getvalue(), dict(rep)))
            if not no_c:
                assert not pys
        assert outs[0] == outs[1]
    # issue 21.2: the timing-made ends are counted (the same in both paths)
    assert outs[0][1]["gro"]["poll_ends"]["poll_end"] > 0
