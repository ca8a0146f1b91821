"""GRO rule tests: one short packet sequence per rule, exact expected output.

Every expectation below is derived from the rules (shared/reference/
linux-gro-gso.md sections 1-3 and 7, issue 3, and the Linux 6.18 sources
the reference cites), not from what the engine happens to output.  The
cases of the kernel's own selftest (tools/testing/selftests/net/gro.c:
data, ack, flags, tcp, ip, large) are reproduced with the selftest's
packets (ports 1500->8000, seq/ack from 100, payload 100, TTL 8, DF, IP ID
0) in the ``test_selftest_*`` tests; the selftest's trailing FIN packet is
sent too, and the reasons it causes are part of the expectation.

Conventions: ``sizes(out)`` = payload bytes per output packet in output
order; reasons are compared as exact Counters of Flush / Pass values (where
several conditions hold at once the engine names the first in the
kernel's evaluation order: CWR, flag word, ack, options, TTL/TOS, DF, IP
ID, segment length, sequence, then the L3 flush flag and the size limit).
"""

import struct
from collections import Counter

import pytest
from hypothesis import given, settings, HealthCheck
from hypothesis import strategies as st

from pcapgro.gro import Flush, GROConfig, GROEngine, Pass
from pcapgro.record import EPB_FLAG_TSO, Packet

from pktbuild import (ACK, CWR, ECE, FIN, PSH, RST, SYN, URG, Flow, arp_frame,
                      dstopts, frag6, hbh, inet_fold, inet_sum, nop, parse,
                      pseudo_header, routing, sack_option, ts_option,
                      wscale_option)

T0 = 1_000_000_000_000      # 1000 s: a multiple of every jiffy length
US = 1_000
MS = 1_000_000
PL = 100                    # the selftest's PAYLOAD_LEN


# ---------------------------------------------------------------- helpers

def stamp(pkts, step=10 * US, t0=T0):
    """Give the packets arrival times t0, t0+step, ... (10 µs apart: one
    NAPI poll with the default 1 ms poll gap)."""
    return [Packet(t0 + i * step, p.data, p.orig_len, p.iface, p.linktype, p.meta)
            for i, p in enumerate(pkts)]


def _sig(out, eng):
    return ([(o.ts, o.data, o.orig_len, o.iface) for o in out],
            +Counter(eng.stats.flush), +Counter(eng.stats.passed))


def run(pkts, step=10 * US, **cfg):
    """Run the engine; returns (parsed outputs, raw outputs, engine).

    The rules must hold on both of the engine's paths: the run is repeated
    with ``compiled=False`` (the reference path) and must give the same
    packets and reasons."""
    if step is not None:
        pkts = stamp(pkts, step)
    eng = GROEngine(GROConfig(**cfg))
    out = list(eng.process(pkts))
    if "compiled" not in cfg:
        ref = GROEngine(GROConfig(compiled=False, **cfg))
        ref_out = list(ref.process(pkts))
        assert _sig(out, eng) == _sig(ref_out, ref), \
            "fast path and general path disagree"
    return [parse(p) for p in out], out, eng


def sizes(parsed):
    return [p.payload_len for p in parsed]


def seqs(parsed):
    return [p.seq for p in parsed]


def check_reasons(eng, flush=None, passed=None):
    got_f = +Counter(eng.stats.flush)
    got_p = +Counter(eng.stats.passed)
    assert got_f == Counter(flush or {}), f"flush reasons {dict(got_f)}"
    assert got_p == Counter(passed or {}), f"pass reasons {dict(got_p)}"


def check_conservation(eng, n_in, n_out):
    st_ = eng.stats
    assert st_.packets == n_in
    assert st_.segments_merged + st_.singles + sum(st_.passed.values()) == n_in
    assert st_.aggregates + st_.singles + sum(st_.passed.values()) == n_out
    assert sum(st_.flush.values()) == st_.aggregates + st_.singles


def check_aggregate(p, flow, first_seq_off, total_payload, flags=ACK):
    """An aggregate's headers: first segment's seq, lengths, checksums."""
    assert p.seq == flow.seq0 + first_seq_off
    assert p.payload_len == total_payload
    assert p.flags == flags
    assert p.tcp_csum_ok, "csum='valid' must give a correct TCP checksum"
    if p.family == 4:
        assert p.ip_csum_ok
        assert p.tot_len == p.ihl + p.doff + total_payload
    assert p.orig_len == p.caplen


def fin(flow, seq_off=2 * PL, **kw):
    """The selftest's terminating packet: FIN|ACK, no payload, seq 300."""
    return flow.pkt(seq_off, 0, ACK | FIN, **kw)


# =========================================================== selftest: data

@pytest.mark.parametrize("family", [4, 6])
def test_selftest_data_same_size_coalesce(family):
    f = Flow(family)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL), fin(f)])
    assert sizes(P) == [2 * PL, 0]
    check_aggregate(P[0], f, 0, 2 * PL)
    check_reasons(eng, {Flush.PURE_ACK: 1}, {Pass.PURE_ACK: 1})
    check_conservation(eng, 3, 2)


@pytest.mark.parametrize("family", [4, 6])
def test_selftest_data_last_smaller_merged_and_completes(family):
    f = Flow(family)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL // 2), fin(f)])
    assert sizes(P) == [PL + PL // 2, 0]
    check_aggregate(P[0], f, 0, 150)
    # the shorter segment completes the aggregate at once; the FIN then
    # finds nothing held
    check_reasons(eng, {Flush.SHORT_SEGMENT: 1}, {Pass.PURE_ACK: 1})


@pytest.mark.parametrize("family", [4, 6])
def test_selftest_data_larger_segment_starts_new_aggregate(family):
    f = Flow(family)
    P, out, eng = run([f.pkt(0, PL // 2), f.pkt(PL // 2, PL), fin(f)])
    assert sizes(P) == [PL // 2, PL, 0]
    assert seqs(P)[:2] == [100, 150]
    check_reasons(eng, {Flush.MSS_EXCEEDED: 1, Flush.PURE_ACK: 1}, {Pass.PURE_ACK: 1})


def test_mss_is_first_segment_payload():
    f = Flow()
    # 100, 100, 60 (merged, completes), then 100, 60, 100: 60 ends it
    pk = [f.pkt(0, 100), f.pkt(100, 100), f.pkt(200, 60),
          f.pkt(260, 100), f.pkt(360, 60), f.pkt(420, 100)]
    P, out, eng = run(pk)
    assert sizes(P) == [260, 160, 100]
    assert seqs(P) == [100, 360, 520]
    check_reasons(eng, {Flush.SHORT_SEGMENT: 2, Flush.END_OF_INPUT: 1})


# ============================================================ selftest: ack

@pytest.mark.parametrize("family", [4, 6])
def test_selftest_ack_pure_and_dup_acks_pass(family):
    f = Flow(family)
    pk = [f.pkt(0, 0), f.pkt(0, 0), f.pkt(0, 0, ack_off=1), fin(f)]
    P, out, eng = run(pk)
    assert sizes(P) == [0, 0, 0, 0]
    assert [o.data for o in out] == [p.data for p in pk]
    check_reasons(eng, {}, {Pass.PURE_ACK: 4})
    check_conservation(eng, 4, 4)


@pytest.mark.parametrize("ack_off", [0, 1])
def test_pure_ack_never_held_and_completes_held(ack_off):
    f = Flow()
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, 0, ack_off=ack_off)])
    assert sizes(P) == [PL, 0]
    reason = Flush.PURE_ACK if ack_off == 0 else Flush.ACK_CHANGED
    check_reasons(eng, {reason: 1}, {Pass.PURE_ACK: 1})


# ========================================================== selftest: flags

def _selftest_flags(f, psh=0, syn=0, rst=0, urg=0, cwr=0):
    """send_flags(): 5 packets; packet 2 (and, for CWR, packet 1) carry the
    flag; flag packets carry payload only for PSH and CWR."""
    plen = PL if (psh or cwr) else 0
    extra = (PSH if psh else 0) | (SYN if syn else 0) | (RST if rst else 0) \
        | (URG if urg else 0) | (CWR if cwr else 0)
    pk = []
    for i in range(5):
        if i == 2 or (i == 1 and cwr):
            pk.append(f.pkt(i * plen, plen, ACK | extra))
        else:
            pk.append(f.pkt(i * PL, PL))
    return pk + [fin(f)]


@pytest.mark.parametrize("family", [4, 6])
def test_selftest_flags_psh_merged_then_completes(family):
    f = Flow(family)
    P, out, eng = run(_selftest_flags(f, psh=1))
    assert sizes(P) == [3 * PL, 2 * PL, 0]
    check_aggregate(P[0], f, 0, 3 * PL, flags=ACK | PSH)   # PSH OR-ed in
    check_aggregate(P[1], f, 3 * PL, 2 * PL, flags=ACK)
    check_reasons(eng, {Flush.PSH: 1, Flush.PURE_ACK: 1}, {Pass.PURE_ACK: 1})


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("flag", ["syn", "rst", "urg"])
def test_selftest_flags_syn_rst_urg_end_coalescing(family, flag):
    f = Flow(family)
    P, out, eng = run(_selftest_flags(f, **{flag: 1}))
    assert sizes(P) == [2 * PL, 0, 2 * PL, 0]
    bit = {"syn": SYN, "rst": RST, "urg": URG}[flag]
    assert P[1].flags == ACK | bit
    assert out[1].data == _selftest_flags(Flow(family), **{flag: 1})[2].data
    check_reasons(eng, {Flush.FLAGS_CHANGED: 1, Flush.PURE_ACK: 1}, {Pass.PURE_ACK: 2})


@pytest.mark.parametrize("family", [4, 6])
def test_selftest_flags_cwr_618(family):
    """Linux 6.18 (tcp_gro_receive: ``flush |= flags & TCP_FLAG_CWR`` and,
    since 6.15, CWR no longer masked out of the flag-word compare): a CWR
    segment never joins a held aggregate and is held alone; the next
    segment (CWR or not) flushes it.  Packets: 100, CWR 100, CWR 100, 100,
    100, FIN -> 100, 100, 100, 200, 0.

    (The selftest in 6.18.y-era trees expects 100, 200, 200: that is the
    2026 AccECN rule "gro: flushing when CWR is set negatively affects
    AccECN", where runs of CWR segments coalesce; not 6.18 mainline.)"""
    f = Flow(family)
    P, out, eng = run(_selftest_flags(f, cwr=1))
    assert sizes(P) == [PL, PL, PL, 2 * PL, 0]
    assert [p.flags & CWR for p in P[:4]] == [0, CWR, CWR, 0]
    check_reasons(eng, {Flush.CWR: 2, Flush.FLAGS_CHANGED: 1, Flush.PURE_ACK: 1},
                  {Pass.PURE_ACK: 1})


def test_cwr_alone_then_end():
    f = Flow()
    P, out, eng = run([f.pkt(0, PL, ACK | CWR), f.pkt(PL, PL)])
    assert sizes(P) == [PL, PL]
    assert out[0].data == f.pkt(0, PL, ACK | CWR).data
    check_reasons(eng, {Flush.FLAGS_CHANGED: 1, Flush.END_OF_INPUT: 1})


@pytest.mark.parametrize("flag", [PSH, SYN, RST, URG, FIN])
def test_flag_segment_without_held_aggregate_passes(flag):
    f = Flow()
    pk = [f.pkt(0, PL, ACK | flag)]
    P, out, eng = run(pk)
    assert [o.data for o in out] == [pk[0].data]
    check_reasons(eng, {}, {Pass.FLAGS: 1})
    assert eng.stats.singles == 0


def test_fin_with_payload_merged_and_ored():
    f = Flow()
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL), f.pkt(2 * PL, PL, ACK | FIN | PSH)])
    assert sizes(P) == [3 * PL]
    check_aggregate(P[0], f, 0, 3 * PL, flags=ACK | FIN | PSH)
    # merged, then completed at once by the final-check flags (FIN named
    # first); nothing passed
    check_reasons(eng, {Flush.FIN: 1})


@pytest.mark.parametrize("bit", [ECE, URG, SYN, RST])
def test_flag_difference_flushes(bit):
    f = Flow()
    pk = [f.pkt(0, PL), f.pkt(PL, PL), f.pkt(2 * PL, PL, ACK | bit)]
    P, out, eng = run(pk)
    assert sizes(P) == [2 * PL, PL]
    if bit == ECE:       # not a "final" flag: the ECE segment is held
        check_reasons(eng, {Flush.FLAGS_CHANGED: 1, Flush.END_OF_INPUT: 1})
    else:                # URG/SYN/RST: never held
        check_reasons(eng, {Flush.FLAGS_CHANGED: 1}, {Pass.FLAGS: 1})
        assert out[1].data == pk[2].data


def test_ece_segments_coalesce_among_themselves():
    f = Flow()
    P, out, eng = run([f.pkt(0, PL, ACK | ECE), f.pkt(PL, PL, ACK | ECE)])
    assert sizes(P) == [2 * PL]
    check_aggregate(P[0], f, 0, 2 * PL, flags=ACK | ECE)


# ============================================================ selftest: tcp

@pytest.mark.parametrize("family", [4, 6])
def test_selftest_tcp_changed_checksum(family):
    f = Flow(family)
    pk = [f.pkt(0, PL), f.pkt(PL, PL, csum="bad"), fin(f)]
    P, out, eng = run(pk)
    # the bad segment is rejected before matching and overtakes the held one
    assert sizes(P) == [PL, PL, 0]
    assert seqs(P) == [200, 100, 300]
    assert out[0].data == pk[1].data
    check_reasons(eng, {Flush.PURE_ACK: 1}, {Pass.BAD_TCP_CSUM: 1, Pass.PURE_ACK: 1})
    assert eng.stats.csum["bad"] == 1


@pytest.mark.parametrize("family", [4, 6])
def test_selftest_tcp_wrong_seq(family):
    f = Flow(family)
    pk = [f.pkt(0, PL), f.pkt(PL + 1, PL), fin(f)]
    P, out, eng = run(pk)
    assert sizes(P) == [PL, PL, 0]
    assert seqs(P) == [100, 201, 300]
    check_reasons(eng, {Flush.SEQ_GAP: 1, Flush.PURE_ACK: 1}, {Pass.PURE_ACK: 1})


def _ts_opts(ts, order):
    """add_standard_tcp_options(): a permutation of {TS, NOP, NOP}."""
    if order == 0:
        return nop() + nop() + ts_option(ts)
    if order == 1:
        return nop() + ts_option(ts) + nop()
    return ts_option(ts) + nop() + nop()


@pytest.mark.parametrize("family", [4, 6])
def test_selftest_tcp_changed_timestamp_and_padding(family):
    f = Flow(family)
    pk = [f.pkt(0, PL, options=_ts_opts(0, 0)),
          f.pkt(PL, PL, options=_ts_opts(0, 0)),
          f.pkt(2 * PL, PL, options=_ts_opts(100, 0)),
          f.pkt(3 * PL, PL, options=_ts_opts(100, 1)),
          f.pkt(4 * PL, PL, options=_ts_opts(100, 2)),
          fin(f)]
    P, out, eng = run(pk)
    assert sizes(P) == [2 * PL, PL, PL, PL, 0]
    assert P[0].options == _ts_opts(0, 0)
    # the FIN has no options: its header length differs from the held one
    check_reasons(eng, {Flush.OPTIONS_CHANGED: 3, Flush.HEADER_LEN_CHANGED: 1},
                  {Pass.PURE_ACK: 1})


@pytest.mark.parametrize("family", [4, 6])
def test_selftest_tcp_different_options(family):
    f = Flow(family)
    pk = [f.pkt(0, PL, options=_ts_opts(0, 0)),
          f.pkt(PL, PL, options=_ts_opts(0, 0)),
          f.pkt(2 * PL, PL, options=nop() + wscale_option(0)),
          fin(f)]
    P, out, eng = run(pk)
    assert sizes(P) == [2 * PL, PL, 0]
    check_reasons(eng, {Flush.HEADER_LEN_CHANGED: 2}, {Pass.PURE_ACK: 1})


@pytest.mark.parametrize("name,o1,o2", [
    ("tsval", ts_option(1000, 7), ts_option(1001, 7)),
    ("tsecr", ts_option(1000, 7), ts_option(1000, 8)),
    ("sack", nop() + nop() + sack_option((5000, 6000)), nop() + nop() + sack_option((5000, 7000))),
    ("sack_vs_nops", nop() * 2 + sack_option((5000, 6000)), nop() * 12),
    ("ts_padding", nop() + nop() + ts_option(5), ts_option(5) + nop() + nop()),
])
def test_option_byte_change_flushes(name, o1, o2):
    f = Flow(options=nop() + nop() + ts_option(0))
    pk = [f.pkt(0, PL, options=o1), f.pkt(PL, PL, options=o1), f.pkt(2 * PL, PL, options=o2)]
    P, out, eng = run(pk)
    assert sizes(P) == [2 * PL, PL]
    assert P[0].options.rstrip(b"\0") == o1.rstrip(b"\0")
    assert P[1].options.rstrip(b"\0") == o2.rstrip(b"\0")
    check_reasons(eng, {Flush.OPTIONS_CHANGED: 1, Flush.END_OF_INPUT: 1})


def test_identical_timestamps_merge_ipv4_ts_mss1448():
    f = Flow(options=nop() + nop() + ts_option(77, 66))
    P, out, eng = run([f.pkt(i * 1448, 1448) for i in range(4)])
    assert sizes(P) == [4 * 1448]
    check_aggregate(P[0], f, 0, 4 * 1448)
    assert P[0].options == nop() + nop() + ts_option(77, 66)


def test_ack_change_flushes():
    f = Flow()
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, ack_off=1)])
    assert sizes(P) == [PL, PL]
    assert [p.ack for p in P] == [100, 101]
    check_reasons(eng, {Flush.ACK_CHANGED: 1, Flush.END_OF_INPUT: 1})


def test_window_change_flushes():
    f = Flow()
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, window=1000)])
    assert sizes(P) == [PL, PL]
    check_reasons(eng, {Flush.WINDOW_CHANGED: 1, Flush.END_OF_INPUT: 1})


def test_header_length_change_flushes():
    f = Flow()
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, options=nop() * 4)])
    assert sizes(P) == [PL, PL]
    check_reasons(eng, {Flush.HEADER_LEN_CHANGED: 1, Flush.END_OF_INPUT: 1})


def test_urgent_pointer_and_checksum_not_compared():
    f = Flow()
    # bytes 16..19 (checksum, urgent pointer) are not compared
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, urg_ptr=7)])
    assert sizes(P) == [2 * PL]


def test_sequence_number_wraps():
    f = Flow(4, seq0=0xFFFFFFFF - 149)
    P, out, eng = run([f.pkt(i * PL, PL) for i in range(4)])
    assert sizes(P) == [4 * PL]
    assert P[0].seq == 0xFFFFFFFF - 149
    check_aggregate(P[0], f, 0, 4 * PL)


@pytest.mark.parametrize("ipid", [None, "inc"])
def test_long_flow_across_engine_batches(ipid):
    # 600 segments of 100 bytes (40 + 60000 < 65536): one aggregate, also
    # when the input is processed in several batches
    f = Flow(4, ipid=ipid, ipid0=65000)
    P, out, eng = run([f.pkt(i * PL, PL) for i in range(600)], step=1 * US)
    assert sizes(P) == [600 * PL]
    check_aggregate(P[0], f, 0, 600 * PL)
    assert P[0].ipid == (0 if ipid is None else 65000)


def test_sequence_gap_and_retransmission():
    f = Flow()
    pk = [f.pkt(0, PL), f.pkt(PL, PL), f.pkt(PL, PL), f.pkt(3 * PL, PL)]
    P, out, eng = run(pk)
    assert sizes(P) == [2 * PL, PL, PL]
    assert seqs(P) == [100, 200, 400]
    check_reasons(eng, {Flush.SEQ_GAP: 2, Flush.END_OF_INPUT: 1})


# ============================================================= selftest: ip

@pytest.mark.parametrize("family", [4, 6])
def test_selftest_ip_changed_ecn(family):
    f = Flow(family)
    pk = [f.pkt(0, PL), f.pkt(PL, PL, tos=0x02) if family == 4 else f.pkt(PL, PL, tc=0x02), fin(f)]
    P, out, eng = run(pk)
    assert sizes(P) == [PL, PL, 0]
    # the FIN (TOS 0) also differs from the held ECT(0) segment
    check_reasons(eng, {Flush.TOS_CHANGED: 2}, {Pass.PURE_ACK: 1})


@pytest.mark.parametrize("family", [4, 6])
def test_selftest_ip_changed_tos(family):
    f = Flow(family)
    pk = [f.pkt(0, PL), f.pkt(PL, PL, tos=1) if family == 4 else f.pkt(PL, PL, tc=0xF0), fin(f)]
    P, out, eng = run(pk)
    assert sizes(P) == [PL, PL, 0]
    check_reasons(eng, {Flush.TOS_CHANGED: 2}, {Pass.PURE_ACK: 1})


def test_selftest_ip_changed_ttl():
    f = Flow(4)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, ttl=7), fin(f)])
    assert sizes(P) == [PL, PL, 0]
    check_reasons(eng, {Flush.TTL_CHANGED: 2}, {Pass.PURE_ACK: 1})


@pytest.mark.parametrize("family", [4, 6])
def test_ecn_ce_mark_splits(family):
    f = Flow(family, tos=0x02)                      # ECT(0)
    key = "tos" if family == 4 else "tc"
    pk = [f.pkt(0, PL), f.pkt(PL, PL), f.pkt(2 * PL, PL, **{key: 0x03}),   # CE
          f.pkt(3 * PL, PL, **{key: 0x03})]
    P, out, eng = run(pk)
    assert sizes(P) == [2 * PL, 2 * PL]
    assert (P[1].tos if family == 4 else P[1].tc) == 0x03
    check_reasons(eng, {Flush.TOS_CHANGED: 1, Flush.END_OF_INPUT: 1})


def test_ipv6_hop_limit_change_flushes():
    f = Flow(6)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, hlim=7)])
    assert sizes(P) == [PL, PL]
    assert [p.hlim for p in P] == [8, 7]
    check_reasons(eng, {Flush.TTL_CHANGED: 1, Flush.END_OF_INPUT: 1})


def test_df_change_flushes():
    f = Flow(4)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, df=False)])
    assert sizes(P) == [PL, PL]
    check_reasons(eng, {Flush.DF_CHANGED: 1, Flush.END_OF_INPUT: 1})


def _ip_ts_option():
    # IPv4 timestamp option (type 68, length 8, pointer 5, TS only)
    return bytes((68, 8, 5, 0)) + b"\0" * 4


def test_selftest_ip_options_pass_and_overtake():
    f = Flow(4)
    pk = [f.pkt(0, PL), f.pkt(PL, PL, ip_options=_ip_ts_option()), f.pkt(2 * PL, PL), fin(f)]
    P, out, eng = run(pk)
    assert sizes(P) == [PL, PL, PL, 0]
    assert seqs(P) == [200, 100, 300, 300]
    assert out[0].data == pk[1].data
    check_reasons(eng, {Flush.SEQ_GAP: 1, Flush.PURE_ACK: 1},
                  {Pass.IP_OPTIONS: 1, Pass.PURE_ACK: 1})


def test_selftest_ip_fragment4_passes():
    f = Flow(4)
    frag = f.pkt(PL, PL, mf=True, csum="bad")      # DF=1, MF=1
    P, out, eng = run([f.pkt(0, PL), frag, fin(f)])
    assert sizes(P) == [PL, PL, 0]
    assert out[0].data == frag.data
    check_reasons(eng, {Flush.PURE_ACK: 1}, {Pass.FRAGMENT: 1, Pass.PURE_ACK: 1})


@pytest.mark.parametrize("kw", [dict(mf=True), dict(frag_off=185)])
def test_ipv4_fragment_overtakes_and_aggregate_stays_held(kw):
    f = Flow(4)
    frag = f.pkt(2 * PL, PL, **kw)
    pk = [f.pkt(0, PL), f.pkt(PL, PL), frag, f.pkt(2 * PL, PL), f.pkt(3 * PL, PL)]
    P, out, eng = run(pk)
    assert sizes(P) == [PL, 4 * PL]
    assert out[0].data == frag.data
    check_aggregate(P[1], f, 0, 4 * PL)
    check_reasons(eng, {Flush.END_OF_INPUT: 1}, {Pass.FRAGMENT: 1})


def test_bad_ipv4_header_checksum_passes_and_overtakes():
    f = Flow(4)
    bad = f.pkt(2 * PL, PL, ip_csum="bad")
    pk = [f.pkt(0, PL), f.pkt(PL, PL), bad, f.pkt(2 * PL, PL)]
    P, out, eng = run(pk)
    assert sizes(P) == [PL, 3 * PL]
    assert out[0].data == bad.data
    check_reasons(eng, {Flush.END_OF_INPUT: 1}, {Pass.BAD_IP_CSUM: 1})


@pytest.mark.parametrize("case,ids,df,expect", [
    (0, (8, 9), True, [2 * PL]),                  # DF=1, incrementing
    (1, (8, 8), True, [2 * PL]),                  # DF=1, fixed
    (2, (8, 9), False, [2 * PL]),                 # DF=0, incrementing
    (3, (8, 8), False, [2 * PL]),                 # DF=0, fixed (6.18: merges)
    (4, (8, 9, 9), True, [2 * PL, PL]),           # 2 incrementing, then fixed
    (5, (8, 8, 9), True, [2 * PL, PL]),           # 2 fixed, then incrementing
])
def test_selftest_ip_flush_id(case, ids, df, expect):
    f = Flow(4, df=df)
    pk = [f.pkt(i * PL, PL, ident=x) for i, x in enumerate(ids)]
    P, out, eng = run(pk)
    assert sizes(P) == expect
    assert P[0].ipid == 8                          # first segment's ID
    if len(expect) == 2:
        check_reasons(eng, {Flush.IP_ID: 1, Flush.END_OF_INPUT: 1})
    else:
        check_reasons(eng, {Flush.END_OF_INPUT: 1})


@pytest.mark.parametrize("ids,expect,n_id_flush", [
    ((5, 6, 7, 8), [4 * PL], 0),                  # incrementing
    ((5, 5, 5, 5), [4 * PL], 0),                  # fixed
    ((65534, 65535, 0, 1), [4 * PL], 0),          # incrementing across the wrap
    ((5, 7), [PL, PL], 1),                        # d = 2 at the second: neither
    ((5, 40000), [PL, PL], 1),                    # random
    ((5, 6, 6, 6), [2 * PL, 2 * PL], 1),          # new head 6 decides "fixed" anew
    ((5, 5, 6, 7), [2 * PL, 2 * PL], 1),          # new head 6 decides "incrementing"
    ((5, 6, 8), [2 * PL, PL], 1),                 # incrementing needs h + count
])
@pytest.mark.parametrize("df", [True, False])
def test_ipv4_id_pattern_decided_at_second_segment(ids, expect, n_id_flush, df):
    f = Flow(4, df=df)
    P, out, eng = run([f.pkt(i * PL, PL, ident=x) for i, x in enumerate(ids)])
    assert sizes(P) == expect
    want = {Flush.END_OF_INPUT: 1}
    if n_id_flush:
        want[Flush.IP_ID] = n_id_flush
    check_reasons(eng, want)
    heads = [0]
    for n in expect[:-1]:
        heads.append(heads[-1] + n // PL)
    assert [p.ipid for p in P] == [ids[h] for h in heads]    # first segment's ID


@pytest.mark.parametrize("gap", [False, True])
def test_selftest_ip_fragment6(gap):
    """send_fragment6(): two segments, (sleep), a Fragment-header packet,
    one more segment, FIN."""
    f = Flow(6)
    frag = f.pkt(2 * PL, PL, exthdrs=[frag6()])
    pk = stamp([f.pkt(0, PL), f.pkt(PL, PL)]) + stamp(
        [frag, f.pkt(3 * PL, PL), fin(f)], t0=T0 + (1000 * MS if gap else 20 * US))
    P, out, eng = run(pk, step=None)
    if gap:      # as the selftest (sleep 1 s = a poll end)
        assert sizes(P) == [2 * PL, PL, PL, 0]
        assert out[1].data == frag.data
        check_reasons(eng, {Flush.POLL_END: 1, Flush.PURE_ACK: 1},
                      {Pass.FRAGMENT: 1, Pass.PURE_ACK: 1})
    else:        # the fragment overtakes the held aggregate
        assert sizes(P) == [PL, 2 * PL, PL, 0]
        assert out[0].data == frag.data
        check_reasons(eng, {Flush.SEQ_GAP: 1, Flush.PURE_ACK: 1},
                      {Pass.FRAGMENT: 1, Pass.PURE_ACK: 1})



EXT_PAYLOAD_1 = b"\x00" * 6
EXT_PAYLOAD_2 = b"\x11" * 6


def test_selftest_ipv6_ext_header_same_payload_coalesces():
    f = Flow(6, exthdrs=[dstopts(EXT_PAYLOAD_1)])
    g = Flow(6)                     # the selftest's FIN has no ext header
    pk = stamp([f.pkt(0, PL), f.pkt(PL, PL)]) + stamp([fin(g)], t0=T0 + 1000 * MS)
    P, out, eng = run(pk, step=None)
    assert sizes(P) == [2 * PL, 0]
    check_aggregate(P[0], f, 0, 2 * PL)
    assert P[0].exts == [(60, bytes((6, 0)) + EXT_PAYLOAD_1)]
    assert P[0].plen == 8 + 20 + 2 * PL
    check_reasons(eng, {Flush.POLL_END: 1}, {Pass.PURE_ACK: 1})


@pytest.mark.parametrize("hash_", ["none", "flow"])
def test_selftest_ipv6_ext_header_different_payload_not_same_flow(hash_):
    """Different extension header bytes: not the same flow; both held.
    Same 4-tuple, so the RSS hash (and the bucket) is the same: at the poll
    end they are completed oldest first."""
    f = Flow(6)
    a = f.pkt(0, PL, exthdrs=[dstopts(EXT_PAYLOAD_1)])
    b = f.pkt(PL, PL, exthdrs=[dstopts(EXT_PAYLOAD_2)])
    P, out, eng = run([a, b], hash=hash_)
    assert [o.data for o in out] == [a.data, b.data]
    check_reasons(eng, {Flush.END_OF_INPUT: 2})


@pytest.mark.parametrize("ext", [
    [hbh()], [dstopts(b"\x00" * 6)], [routing()], [hbh(), dstopts(), routing()],
])
def test_ipv6_walkable_ext_headers_identical_merge(ext):
    f = Flow(6, exthdrs=ext)
    P, out, eng = run([f.pkt(i * PL, PL) for i in range(3)], csum="valid")
    assert sizes(P) == [3 * PL]
    check_aggregate(P[0], f, 0, 3 * PL)
    extlen = sum(2 + len(b) for _, b in ext)
    assert P[0].plen == extlen + 20 + 3 * PL
    assert [t for t, _ in P[0].exts] == [t for t, _ in ext]


def test_ipv6_hbh_differing_is_other_flow():
    f = Flow(6)
    a = f.pkt(0, PL, exthdrs=[hbh(b"\x1e\x02\x00\x00")])
    b = f.pkt(PL, PL, exthdrs=[hbh(b"\x1e\x02\x00\x01")])
    c = f.pkt(PL, PL, exthdrs=[hbh(b"\x1e\x02\x00\x00")])
    P, out, eng = run([a, b, c], hash="none")
    # a and c merge (b is another flow, held on its own)
    assert sizes(P) == [2 * PL, PL]
    assert out[1].data == b.data


def test_ipv6_ext_header_vs_none_is_other_flow():
    f = Flow(6)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, exthdrs=[dstopts()])], hash="none")
    assert sizes(P) == [PL, PL]
    check_reasons(eng, {Flush.END_OF_INPUT: 2})


@pytest.mark.parametrize("hash_", ["none", "flow"])
def test_ipv6_flow_label_different_flows(hash_):
    """Flow label differs: not the same flow (a0 and a1 still merge around
    b0).  Same 4-tuple -> same RSS hash and bucket -> oldest first."""
    f = Flow(6, flow=1)
    a0, b0, a1 = f.pkt(0, PL), f.pkt(PL, PL, flow=2), f.pkt(PL, PL)
    P, out, eng = run([a0, b0, a1], hash=hash_)
    assert sizes(P) == [2 * PL, PL]
    assert [p.flow for p in P] == [1, 2]
    assert out[1].data == b0.data
    check_reasons(eng, {Flush.END_OF_INPUT: 2})


def test_ipv6_traffic_class_is_flush_not_flow():
    f = Flow(6)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, tc=0x20), f.pkt(2 * PL, PL, tc=0x20)])
    assert sizes(P) == [PL, 2 * PL]
    check_reasons(eng, {Flush.TOS_CHANGED: 1, Flush.END_OF_INPUT: 1})


# ========================================================== selftest: large

MSS_ST = 4096 - 20 - 40                 # 4036
MAX_PAYLOAD = 65535 - 20 - 40           # 65475
NUM_LARGE = MAX_PAYLOAD // MSS_ST       # 16


def _send_large(f, remainder):
    pk = [f.pkt(i * MSS_ST, MSS_ST) for i in range(NUM_LARGE)]
    pk.append(f.pkt(NUM_LARGE * MSS_ST, remainder))
    pk.append(f.pkt((NUM_LARGE + 1) * MSS_ST, remainder))
    return pk + [fin(f)]


@pytest.mark.parametrize("family", [4, 6])
def test_selftest_large_fits_exactly(family):
    offset = 20 if family == 4 else 0
    rem = (MAX_PAYLOAD + offset) % MSS_ST
    f = Flow(family)
    P, out, eng = run(_send_large(f, rem))
    assert sizes(P) == [MAX_PAYLOAD + offset, rem, 0]
    check_aggregate(P[0], f, 0, MAX_PAYLOAD + offset)
    assert P[0].l3len == 65535
    check_reasons(eng, {Flush.SHORT_SEGMENT: 1, Flush.PURE_ACK: 1}, {Pass.PURE_ACK: 1})


@pytest.mark.parametrize("family", [4, 6])
def test_selftest_large_one_byte_too_many(family):
    offset = 20 if family == 4 else 0
    rem = (MAX_PAYLOAD + offset) % MSS_ST + 1
    f = Flow(family)
    P, out, eng = run(_send_large(f, rem))
    assert sizes(P) == [MAX_PAYLOAD + offset - rem + 1, rem, rem, 0]
    check_reasons(eng, {Flush.SIZE_LIMIT: 1, Flush.SEQ_GAP: 1, Flush.PURE_ACK: 1},
                  {Pass.PURE_ACK: 1})


def test_size_limit_ipv4_ts_mss1448_45_fit():
    f = Flow(4, options=nop() + nop() + ts_option(1, 2))
    P, out, eng = run([f.pkt(i * 1448, 1448) for i in range(46)])
    assert sizes(P) == [45 * 1448, 1448]
    assert P[0].tot_len == 52 + 45 * 1448 == 65212
    check_aggregate(P[0], f, 0, 45 * 1448)
    assert P[1].seq == f.seq0 + 45 * 1448
    check_reasons(eng, {Flush.SIZE_LIMIT: 1, Flush.END_OF_INPUT: 1})


def test_size_limit_ipv4_mss1460_44_fit():
    f = Flow(4)
    P, out, eng = run([f.pkt(i * 1460, 1460) for i in range(45)])
    assert sizes(P) == [44 * 1460, 1460]


def test_size_limit_is_exclusive():
    # 40 + 8 * 8187 = 65536 exactly: the 8th segment is refused
    f = Flow(4)
    P, out, eng = run([f.pkt(i * 8187, 8187) for i in range(8)])
    assert sizes(P) == [7 * 8187, 8187]
    check_reasons(eng, {Flush.SIZE_LIMIT: 1, Flush.END_OF_INPUT: 1})


@pytest.mark.parametrize("vlans,expect", [
    ([], [11 * 5954]),                               # 40 + 65494 = 65534 fits
    ([(0x8100, 5)], [10 * 5954, 5954]),              # + 4 tag bytes = 65538
])
def test_size_limit_counts_vlan_tag(vlans, expect):
    f = Flow(4, vlans=vlans)
    P, out, eng = run([f.pkt(i * 5954, 5954) for i in range(11)])
    assert sizes(P) == expect


def test_big_tcp_ipv4_total_length_zero():
    f = Flow(4, options=nop() + nop() + ts_option(1, 2))
    P, out, eng = run([f.pkt(i * 1448, 1448) for i in range(60)], gro_max_size=200_000)
    assert sizes(P) == [60 * 1448]
    p = P[0]
    assert p.tot_len == 0                          # > 65535: total length 0
    assert p.ip_csum_ok
    assert out[0].orig_len == len(out[0].data) == 14 + 52 + 60 * 1448
    assert p.tcp_csum_ok
    check_reasons(eng, {Flush.END_OF_INPUT: 1})


def test_big_tcp_ipv4_65535_keeps_length():
    f = Flow(4)
    P, out, eng = run([f.pkt(i * 13099, 13099) for i in range(6)], gro_max_size=200_000)
    assert sizes(P) == [6 * 13099]
    assert P[0].tot_len == 0
    P, out, eng = run([f.pkt(i * 13099, 13099) for i in range(5)], gro_max_size=200_000)
    assert P[0].tot_len == 65535


def test_big_tcp_ipv6_jumbo_hbh():
    f = Flow(6)
    P, out, eng = run([f.pkt(i * 8000, 8000) for i in range(9)], gro_max_size=200_000)
    p = P[0]
    plen = 20 + 9 * 8000                           # 72020 > 65535
    assert p.plen == 0 and p.nh == 0
    assert len(p.exts) == 1
    t, raw = p.exts[0]
    assert t == 0 and raw[:4] == bytes((6, 0, 0xC2, 4))
    assert struct.unpack("!I", raw[4:8])[0] == plen + 8 == p.jumbo
    assert p.payload_len == 9 * 8000
    assert out[0].orig_len == len(out[0].data) == 14 + 40 + 8 + plen
    assert p.tcp_csum_ok
    assert p.seq == f.seq0


def test_big_tcp_ipv6_payload_65535_no_jumbo():
    f = Flow(6)
    # 20 + 5 * 13103 = 65535: fits the 16-bit field, no HBH
    P, out, eng = run([f.pkt(i * 13103, 13103) for i in range(5)], gro_max_size=200_000)
    assert sizes(P) == [5 * 13103]
    assert P[0].plen == 65535 and P[0].exts == []
    # with the default limit, 40 + 65535 >= 65536: the 5th is refused
    P, out, eng = run([f.pkt(i * 13103, 13103) for i in range(5)])
    assert sizes(P) == [4 * 13103, 13103]


def test_big_tcp_limit_still_applies():
    f = Flow(4)
    # gro_max_size 100000: 40 + n*8000 < 100000 -> 12 fit (96040), 13th not
    P, out, eng = run([f.pkt(i * 8000, 8000) for i in range(13)], gro_max_size=100_000)
    assert sizes(P) == [12 * 8000, 8000]


# ====================================================== L3 rejects / flushes

def test_ethernet_padding_flagged_flush():
    """IP total length != bytes present (padding of a short frame): the held
    aggregate of the flow is completed first, then the packet is written
    unchanged (padding kept); it is never held."""
    f = Flow(4)
    padded = f.pkt(2 * PL, 2, pad_to=60)
    assert len(padded.data) == 60
    pk = [f.pkt(0, PL), f.pkt(PL, PL), padded, f.pkt(2 * PL + 2, PL)]
    P, out, eng = run(pk)
    assert sizes(P) == [2 * PL, 2, PL]
    assert out[1].data == padded.data
    check_reasons(eng, {Flush.L3_FLUSH: 1, Flush.END_OF_INPUT: 1}, {Pass.L3_FLUSH: 1})
    assert eng.stats.csum["skipped_l3_flush"] == 1


def test_ethernet_padding_without_held_passes():
    f = Flow(4)
    padded = f.pkt(0, 1, pad_to=60)
    P, out, eng = run([padded])
    assert [o.data for o in out] == [padded.data]
    check_reasons(eng, {}, {Pass.L3_FLUSH: 1})


def test_padded_pure_ack_completes_held():
    f = Flow(4)
    ack = f.pkt(2 * PL, 0, pad_to=60)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL), ack])
    assert sizes(P) == [2 * PL, 0]
    assert out[1].data == ack.data
    assert sum(eng.stats.passed.values()) == 1
    assert sum(eng.stats.flush.values()) == 1


@pytest.mark.parametrize("family", [4, 6])
def test_trailer_flagged_flush(family):
    f = Flow(family)
    tr = f.pkt(2 * PL, PL // 2, trailer=b"\xde\xad\xbe\xef")    # e.g. an FCS
    pk = [f.pkt(0, PL), f.pkt(PL, PL), tr, f.pkt(2 * PL + PL // 2, PL)]
    P, out, eng = run(pk)
    assert sizes(P) == [2 * PL, PL // 2, PL]
    assert out[1].data == tr.data
    check_reasons(eng, {Flush.L3_FLUSH: 1, Flush.END_OF_INPUT: 1}, {Pass.L3_FLUSH: 1})


def test_trailer_on_full_segment():
    # with the trailer the kernel's segment length (skb_gro_len) is 104 >
    # mss 100: the length check is the first to fail; still flushed
    f = Flow(4)
    tr = f.pkt(2 * PL, PL, trailer=b"\0" * 4)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL), tr])
    assert sizes(P) == [2 * PL, PL]
    assert out[1].data == tr.data
    check_reasons(eng, {Flush.MSS_EXCEEDED: 1}, {Pass.L3_FLUSH: 1})


def test_ip_length_larger_than_bytes_present():
    f = Flow(4)
    short = f.pkt(2 * PL, PL, tot_len=20 + 20 + 2 * PL)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL), short])
    assert len(out) == 2 and out[1].data == short.data
    check_reasons(eng, {Flush.L3_FLUSH: 1}, {Pass.L3_FLUSH: 1})


def test_ipv4_evil_bit_flagged_flush():
    f = Flow(4)
    evil = f.pkt(2 * PL, PL, evil=True)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL), evil])
    assert sizes(P) == [2 * PL, PL]
    assert out[1].data == evil.data
    check_reasons(eng, {Flush.L3_FLUSH: 1}, {Pass.L3_FLUSH: 1})


# ================================================================ checksums

def test_bad_tcp_checksum_passes_and_overtakes():
    f = Flow(4)
    bad = f.pkt(2 * PL, PL, csum="bad")
    pk = [f.pkt(0, PL), f.pkt(PL, PL), bad, f.pkt(2 * PL, PL)]
    P, out, eng = run(pk)
    assert sizes(P) == [PL, 3 * PL]
    assert out[0].data == bad.data
    check_aggregate(P[1], f, 0, 3 * PL)
    check_reasons(eng, {Flush.END_OF_INPUT: 1}, {Pass.BAD_TCP_CSUM: 1})


def test_zero_tcp_checksum_is_bad():
    f = Flow(4)
    z = f.pkt(PL, PL, csum="zero")
    P, out, eng = run([f.pkt(0, PL), z])
    assert out[0].data == z.data
    check_reasons(eng, {Flush.END_OF_INPUT: 1}, {Pass.BAD_TCP_CSUM: 1})


@pytest.mark.parametrize("family", [4, 6])
def test_pseudo_header_seed_trusted(family):
    f = Flow(family)
    pk = [f.pkt(0, PL, csum="seed"), f.pkt(PL, PL, csum="seed"), f.pkt(2 * PL, PL)]
    P, out, eng = run(pk)
    assert sizes(P) == [3 * PL]
    check_aggregate(P[0], f, 0, 3 * PL)
    assert eng.stats.csum["seed"] == 2
    check_reasons(eng, {Flush.END_OF_INPUT: 1})


def test_no_verify_merges_bad_checksum():
    # --no-verify-csum trusts the checksum fields: the aggregate's checksum
    # is derived from them (RFC 1624), so a damaged segment leaves the
    # aggregate's checksum bad instead of being laundered into a good one
    f = Flow(4)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, csum="bad")], verify_csum=False)
    assert sizes(P) == [2 * PL]
    assert not P[0].tcp_csum_ok


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("mss", [100, 101, 1448])
def test_no_verify_checksum_from_fields(family, mss):
    # good fields (and pseudo-header seeds, summed from the bytes) give a
    # valid aggregate checksum without the payload being summed
    f = Flow(family, options=nop() + nop() + ts_option(3, 4))
    pk = [f.pkt(i * mss, mss, fill=bytes(range(i, i + 7)),
                csum="seed" if i in (2, 3) else "valid") for i in range(6)]
    pk.append(f.pkt(6 * mss, 33, fill=b"xyz"))
    P, out, eng = run(pk, verify_csum=False)
    assert sizes(P) == [6 * mss + 33]
    assert P[0].tcp_csum_ok


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("mss", [100, 101, 1448])
def test_csum_valid_mode_independent_check(family, mss):
    f = Flow(family, options=nop() + nop() + ts_option(3, 4),
             exthdrs=[dstopts()] if family == 6 else ())
    pk = [f.pkt(i * mss, mss, fill=bytes(range(i, i + 7))) for i in range(5)]
    pk.append(f.pkt(5 * mss, 33, fill=b"xyz"))
    P, out, eng = run(pk, csum="valid")
    assert sizes(P) == [5 * mss + 33]
    p = P[0]
    assert p.tcp_csum_ok
    assert p.payload == b"".join(x.data[parse(x).l4off + parse(x).doff:] for x in pk)
    if family == 4:
        assert p.ip_csum_ok


@pytest.mark.parametrize("family", [4, 6])
def test_csum_kernel_mode_pseudo_header_seed(family):
    f = Flow(family)
    pk = [f.pkt(i * PL, PL) for i in range(3)]
    P, out, eng = run(pk, csum="kernel")
    p = P[0]
    tcp_len = 20 + 3 * PL
    # the folded pseudo-header sum (saddr, daddr, proto 6, TCP length), not inverted
    seed = inet_fold(inet_sum(pseudo_header(p.src, p.dst, 6, tcp_len)))
    assert p.csum == seed
    assert not p.tcp_csum_ok
    if family == 4:
        assert p.ip_csum_ok


def test_csum_kernel_mode_singles_and_passes_unchanged():
    f = Flow(4)
    pk = [f.pkt(0, PL), f.pkt(PL, 0)]
    P, out, eng = run(pk, csum="kernel")
    assert [o.data for o in out] == [p.data for p in pk]


# ============================================================== snaplen cut

def test_snaplen_cut_uses_orig_len_and_keeps_contiguous_bytes():
    f = Flow(4)
    s0 = f.pkt(0, 1000, fill=b"A")
    s1 = f.pkt(1000, 1000, fill=b"B", snaplen=200, csum="bad")   # not verifiable
    s2 = f.pkt(2000, 1000, fill=b"C")
    P, out, eng = run([s0, s1, s2])
    assert len(out) == 1
    o = out[0]
    assert o.orig_len == 14 + 40 + 3000                 # full original length
    # first segment's headers (lengths rewritten), then the contiguous
    # captured payload only: s0's, then the part of s1 the snaplen kept
    assert o.data[:16] == s0.data[:16]
    assert o.data[54:] == s0.data[54:] + s1.data[54:200]
    p = P[0]
    assert p.tot_len == 3040 and p.ip_csum_ok and p.seq == f.seq0
    assert eng.stats.csum["skipped_truncated"] == 1
    assert eng.stats.csum["verified"] == 2
    check_reasons(eng, {Flush.END_OF_INPUT: 1})
    # what the aggregate could not carry is counted, never silent: s2's 1000
    assert eng.stats.to_dict()["snaplen"] == {"aggregates": 1, "captured_bytes_left_out": 1000}
    assert "1,000 captured bytes" in " ".join(" ".join(eng.stats.table()).split())


def test_snaplen_cut_lengths_from_orig_len():
    # every segment cut to 96 bytes: each is still 1000 bytes long on the
    # wire, so they merge; only the first's captured payload is contiguous
    f = Flow(4)
    pk = [f.pkt(i * 1000, 1000, snaplen=96) for i in range(3)]
    P, out, eng = run(pk)
    assert len(out) == 1
    assert out[0].orig_len == 54 + 3000
    assert len(out[0].data) == 96
    assert out[0].data[54:] == pk[0].data[54:96]
    assert parse(out[0]).tot_len == 3040
    assert eng.stats.csum["skipped_truncated"] == 3
    assert eng.stats.to_dict()["snaplen"] == {"aggregates": 1,
                                              "captured_bytes_left_out": 2 * (96 - 54)}


def test_snaplen_nothing_left_out_when_uncut():
    f = Flow(4)
    P, out, eng = run([f.pkt(i * 1000, 1000) for i in range(3)])
    assert eng.stats.to_dict()["snaplen"] == {"aggregates": 0, "captured_bytes_left_out": 0}
    assert not any("snaplen" in ln for ln in eng.stats.table())


# =============================================================== link layer

def test_vlan_tagged_frames_merge():
    f = Flow(4, vlans=[(0x8100, 100)])
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL)])
    assert sizes(P) == [2 * PL]
    assert P[0].vlans == [(0x8100, 100)]
    check_aggregate(P[0], f, 0, 2 * PL)


def test_different_vlan_ids_do_not_merge():
    f = Flow(4, vlans=[(0x8100, 100)])
    a, b, c = f.pkt(0, PL), f.pkt(PL, PL, vlans=[(0x8100, 200)]), f.pkt(PL, PL)
    P, out, eng = run([a, b, c])
    assert sizes(P) == [2 * PL, PL]
    assert [p.vlans for p in P] == [[(0x8100, 100)], [(0x8100, 200)]]
    check_reasons(eng, {Flush.END_OF_INPUT: 2})


def test_tagged_and_untagged_do_not_merge():
    f = Flow(4)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, vlans=[(0x8100, 1)])], hash="none")
    assert sizes(P) == [PL, PL]


def test_qinq_stacked_tags_merge():
    f = Flow(6, vlans=[(0x88A8, 10), (0x8100, 20)])
    P, out, eng = run([f.pkt(i * PL, PL) for i in range(3)])
    assert sizes(P) == [3 * PL]
    assert P[0].vlans == [(0x88A8, 10), (0x8100, 20)]
    check_aggregate(P[0], f, 0, 3 * PL)
    g = Flow(6, vlans=[(0x88A8, 10), (0x8100, 21)])
    P, out, eng = run([f.pkt(0, PL), g.pkt(PL, PL)])
    assert sizes(P) == [PL, PL]


def test_tpid_0x9100_has_no_gro_handler():
    """Only IPv4, IPv6, 802.1Q (0x8100) and 802.1ad (0x88a8) have GRO
    handlers (section 1.1; vlan_packet_offloads in net/8021q/vlan_core.c);
    a frame with the old QinQ TPID 0x9100 passes as "normal"."""
    f = Flow(4, vlans=[(0x9100, 10)])
    pk = [f.pkt(0, PL), f.pkt(PL, PL)]
    P, out, eng = run(pk)
    assert [o.data for o in out] == [p.data for p in pk]
    assert sum(eng.stats.passed.values()) == 2


def test_different_mac_is_other_flow():
    f = Flow(4)
    a = f.pkt(0, PL)
    b = f.pkt(PL, PL, mac_src=bytes.fromhex("aa00000000ff"))
    c = f.pkt(PL, PL)
    P, out, eng = run([a, b, c], hash="none")
    assert sizes(P) == [2 * PL, PL]
    assert out[1].data == b.data


def test_different_interface_is_other_flow():
    f = Flow(4)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL, iface=1), f.pkt(PL, PL)], hash="none")
    assert sizes(P) == [2 * PL, PL]
    assert [o.iface for o in out] == [0, 1]


@pytest.mark.parametrize("link", ["sll", "sll2", "raw"])
@pytest.mark.parametrize("family", [4, 6])
def test_other_link_types_merge(link, family):
    f = Flow(family, link=link)
    P, out, eng = run([f.pkt(i * PL, PL) for i in range(3)] + [f.pkt(3 * PL, 40)])
    assert sizes(P) == [3 * PL + 40]
    check_aggregate(P[0], f, 0, 3 * PL + 40)
    assert out[0].linktype == f.linktype
    assert out[0].data[:P[0].l3off] == f.pkt(0, PL).data[:P[0].l3off]


def test_non_ip_passes():
    arp = Packet(0, arp_frame(), 60)
    f = Flow(4)
    pk = [f.pkt(0, PL), arp, f.pkt(PL, PL)]
    P, out, eng = run(pk)
    assert len(out) == 2
    assert out[0].data == arp.data
    assert sizes([P[1]]) == [2 * PL]
    check_reasons(eng, {Flush.END_OF_INPUT: 1}, {Pass.NOT_IP: 1})


@pytest.mark.parametrize("family", [4, 6])
def test_udp_passes(family):
    f = Flow(family)
    u = f.udp(PL)
    pk = [f.pkt(0, PL), u, u, f.pkt(PL, PL)]
    P, out, eng = run(pk)
    assert [o.data for o in out[:2]] == [u.data, u.data]
    assert sizes(P[2:]) == [2 * PL]
    assert sum(eng.stats.passed.values()) == 2


# =================================================== NAPI model: buckets, polls

def test_bucket_full_evicts_oldest():
    flows = [Flow(4, sport=1000 + i) for i in range(9)]
    pk = [fl.pkt(0, PL) for fl in flows]
    P, out, eng = run(pk, hash="none")
    assert [p.sport for p in P] == [1000 + i for i in range(9)]
    assert out[0].data == pk[0].data
    check_reasons(eng, {Flush.BUCKET_FULL: 1, Flush.END_OF_INPUT: 8})


def test_bucket_full_evicts_oldest_head_even_if_it_merged():
    flows = [Flow(4, sport=1000 + i) for i in range(9)]
    pk = [fl.pkt(0, PL) for fl in flows[:8]] + [flows[0].pkt(PL, PL), flows[8].pkt(0, PL)]
    P, out, eng = run(pk, hash="none")
    assert (P[0].sport, P[0].payload_len) == (1000, 2 * PL)
    assert [p.sport for p in P[1:]] == [1000 + i for i in range(1, 9)]
    check_reasons(eng, {Flush.BUCKET_FULL: 1, Flush.END_OF_INPUT: 8})


def test_flush_order_oldest_first_single_bucket():
    a, b = Flow(4, sport=1), Flow(4, sport=2)
    # a restarts (seq gap) after b was held: a's new head is the newest
    pk = [a.pkt(0, PL), b.pkt(0, PL), a.pkt(5 * PL, PL)]
    P, out, eng = run(pk, hash="none")
    assert [(p.sport, p.seq) for p in P] == [(1, 100), (2, 100), (1, 600)]


def test_poll_end_at_gap():
    f = Flow(4)
    pk = stamp([f.pkt(0, PL)]) + stamp([f.pkt(PL, PL)], t0=T0 + 2 * MS)
    P, out, eng = run(pk, step=None)
    assert sizes(P) == [PL, PL]
    assert out[0].ts == T0                      # completed when that poll ended
    check_reasons(eng, {Flush.POLL_END: 1, Flush.END_OF_INPUT: 1})


def test_gap_not_longer_than_poll_gap_keeps_poll():
    f = Flow(4)
    pk = stamp([f.pkt(0, PL)]) + stamp([f.pkt(PL, PL)], t0=T0 + 1 * MS)   # == poll_gap_ns
    P, out, eng = run(pk, step=None)
    assert sizes(P) == [2 * PL]


def test_76us_gaps_merge_with_defaults():
    f = Flow(4, options=nop() + nop() + ts_option(9, 9))
    P, out, eng = run([f.pkt(i * 1448, 1448) for i in range(10)], step=76 * US)
    assert sizes(P) == [10 * 1448]


def test_poll_gap_configurable():
    f = Flow(4)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL)], step=76 * US, poll_gap_ns=50 * US)
    assert sizes(P) == [PL, PL]
    check_reasons(eng, {Flush.POLL_END: 1, Flush.END_OF_INPUT: 1})


def test_gro_flush_timeout_holds_across_short_gap():
    f = Flow(4)
    pk = [f.pkt(0, PL), f.pkt(PL, PL)]
    t = [T0 + 100 * US, T0 + 2100 * US]          # 2 ms gap, same 4 ms jiffy
    pk = [Packet(ts, p.data, p.orig_len) for ts, p in zip(t, pk)]
    P, out, eng = run(pk, step=None, gro_flush_timeout=3 * MS)
    assert sizes(P) == [2 * PL]
    check_reasons(eng, {Flush.END_OF_INPUT: 1})
    # without the timeout the gap ends the poll and completes the first
    P, out, eng = run(pk, step=None)
    assert sizes(P) == [PL, PL]


def test_gro_flush_timeout_timer_completes():
    f = Flow(4)
    pk = [f.pkt(0, PL), f.pkt(PL, PL)]
    t = [T0 + 100 * US, T0 + 10 * MS]
    pk = [Packet(ts, p.data, p.orig_len) for ts, p in zip(t, pk)]
    P, out, eng = run(pk, step=None, gro_flush_timeout=3 * MS)
    assert sizes(P) == [PL, PL]
    assert out[0].ts == T0 + 100 * US + 3 * MS   # when the timer fired
    check_reasons(eng, {Flush.FLUSH_TIMEOUT: 1, Flush.END_OF_INPUT: 1})


def test_gro_flush_timeout_old_jiffy_completed_at_poll_end():
    # HZ 250: jiffy = 4 ms.  s0 held in jiffy 0; s1 (jiffy 1) merges; the
    # poll that took s1 ends (gap > poll gap) in jiffy 1: s0's aggregate
    # is old and completed, even though the timer has not fired.
    f = Flow(4)
    t = [T0 + 3500 * US, T0 + 4800 * US, T0 + 6000 * US]
    pk = [Packet(ts, p.data, p.orig_len)
          for ts, p in zip(t, [f.pkt(0, PL), f.pkt(PL, PL), f.pkt(2 * PL, PL)])]
    P, out, eng = run(pk, step=None, gro_flush_timeout=3 * MS, hz=250)
    assert sizes(P) == [2 * PL, PL]
    assert out[0].ts == T0 + 4800 * US
    check_reasons(eng, {Flush.POLL_END: 1, Flush.END_OF_INPUT: 1})




def test_napi_budget_hz250_full_flush():
    f = Flow(4)
    P, out, eng = run([f.pkt(i * PL, PL) for i in range(6)], napi_budget=4, hz=250)
    assert sizes(P) == [4 * PL, 2 * PL]
    check_reasons(eng, {Flush.BUDGET: 1, Flush.END_OF_INPUT: 1})


def test_napi_budget_exactly_used_up_at_end():
    # 4 packets, budget 4: the poll used its whole budget (BUDGET flush)
    f = Flow(4)
    P, out, eng = run([f.pkt(i * PL, PL) for i in range(4)], napi_budget=4, hz=250)
    assert sizes(P) == [4 * PL]
    check_reasons(eng, {Flush.BUDGET: 1})


def test_napi_budget_flush_time_is_end_of_that_poll():
    # the poll that took packets 1-4 ends after packet 4: the aggregate is
    # completed then (as a poll end stamps with the poll's last packet)
    f = Flow(4)
    P, out, eng = run([f.pkt(i * PL, PL) for i in range(6)], napi_budget=4, hz=250)
    assert out[0].ts == T0 + 3 * 10 * US


def test_napi_budget_hz1000_old_only():
    f = Flow(4)
    P, out, eng = run([f.pkt(i * PL, PL) for i in range(6)], napi_budget=4, hz=1000)
    assert sizes(P) == [6 * PL]
    check_reasons(eng, {Flush.END_OF_INPUT: 1})


def test_napi_budget_hz1000_next_jiffy_flushes():
    f = Flow(4)
    pk = stamp([f.pkt(i * PL, PL) for i in range(9)], step=100 * US, t0=T0 + 600 * US)
    # budget ends after packets 4 (0.9 ms, jiffy 0: kept) and 8 (1.3 ms,
    # jiffy 1: the aggregate held since jiffy 0 is old -> completed)
    P, out, eng = run(pk, step=None, napi_budget=4, hz=1000)
    assert sizes(P) == [8 * PL, PL]
    check_reasons(eng, {Flush.BUDGET: 1, Flush.END_OF_INPUT: 1})


def test_napi_budget_counts_from_poll_start_after_gap():
    """A gap ends the poll whether or not anything is held (the model: "a
    NAPI poll ends when the gap to the next packet exceeds poll_gap_ns, or
    after napi_budget packets").  Three ACKs, a 5 ms gap, five segments:
    the second poll's budget of 4 is used up by segments 1-4."""
    f = Flow(4)
    acks = stamp([f.pkt(0, 0), f.pkt(0, 0), f.pkt(0, 0)])
    data = stamp([f.pkt(i * PL, PL) for i in range(5)], t0=T0 + 5 * MS)
    P, out, eng = run(acks + data, step=None, napi_budget=4, hz=250)
    assert sizes(P) == [0, 0, 0, 4 * PL, PL]
    check_reasons(eng, {Flush.BUDGET: 1, Flush.END_OF_INPUT: 1}, {Pass.PURE_ACK: 3})


# ============================================= the written aggregate, timing

def test_aggregate_headers_are_first_segments():
    f = Flow(4, ipid="inc", ipid0=1000, options=nop() + nop() + ts_option(5, 6))
    pk = [f.pkt(i * PL, PL) for i in range(4)]
    P, out, eng = run(pk)
    p = P[0]
    first = parse(pk[0])
    assert (p.ipid, p.ttl, p.tos, p.df, p.seq, p.ack, p.window, p.options) == \
        (1000, first.ttl, first.tos, first.df, first.seq, first.ack, first.window, first.options)
    assert out[0].data[:14] == pk[0].data[:14]
    assert p.payload == b"a" * 4 * PL


def test_aggregate_timestamp_is_completion_time():
    f = Flow(4)
    pk = [f.pkt(0, PL), f.pkt(PL, PL), f.pkt(2 * PL, PL, ACK | PSH)]
    P, out, eng = run(pk, step=10 * US)
    assert out[0].ts == T0 + 20 * US            # the PSH segment completed it
    pk = [f.pkt(0, PL), f.pkt(PL, PL), f.pkt(5 * PL, PL)]
    P, out, eng = run(pk, step=10 * US)
    assert [o.ts for o in out] == [T0 + 20 * US, T0 + 20 * US]


def test_passed_packet_keeps_its_time_and_output_never_goes_back():
    f = Flow(4)
    pk = [f.pkt(0, PL), f.pkt(PL, PL), f.pkt(2 * PL, PL, csum="bad"), f.pkt(2 * PL, PL)]
    P, out, eng = run(pk, step=10 * US)
    assert out[0].ts == T0 + 20 * US
    ts = [o.ts for o in out]
    assert ts == sorted(ts)


def test_aggregate_annotation():
    f = Flow(4)
    P, out, eng = run([f.pkt(0, PL), f.pkt(PL, PL), f.pkt(2 * PL, PL)])
    m = out[0].meta
    assert m is not None and m.flags & EPB_FLAG_TSO
    assert any("3" in c and str(PL) in c for c in m.comments)


# ======================================================= flows interleaved

def test_interleaved_flows_keep_per_flow_order():
    flows = [Flow(4, sport=2000 + i) for i in range(3)] + [Flow(6, sport=3000)]
    pk = []
    for k in range(4):
        for fl in flows:
            flags = ACK | PSH if k == 3 else ACK
            pk.append(fl.pkt(k * PL, PL, flags, fill=bytes([65 + k])))
    P, out, eng = run(pk)
    assert len(P) == 4
    for p in P:
        assert p.payload_len == 4 * PL and p.flags == ACK | PSH
        assert p.payload == b"A" * PL + b"B" * PL + b"C" * PL + b"D" * PL
    check_reasons(eng, {Flush.PSH: 4})


def test_interleaved_flows_with_splits():
    a, b = Flow(4, sport=1), Flow(4, sport=2)
    pk = [a.pkt(0, PL), b.pkt(0, 50), a.pkt(PL, PL), b.pkt(50, 50), a.pkt(2 * PL, 0),
          b.pkt(100, 50, ACK | PSH), a.pkt(2 * PL, PL), b.pkt(150, 50)]
    P, out, eng = run(pk)
    per = {}
    for p in P:
        per.setdefault(p.sport, []).append((p.seq, p.payload_len))
    assert per[1] == [(100, 200), (300, 0), (300, 100)]
    assert per[2] == [(100, 150), (250, 50)]


# ========================================= conservation (property, hypothesis)

@st.composite
def _mixes(draw):
    nflows = draw(st.integers(1, 10))
    flows = [Flow(draw(st.sampled_from([4, 6])), sport=4000 + i,
                  options=draw(st.sampled_from([b"", nop() + nop() + ts_option(1, 2)])))
             for i in range(nflows)]
    mss = [draw(st.sampled_from([50, 100, 101])) for _ in range(nflows)]
    nxt = [0] * nflows
    pkts, t = [], T0
    for _ in range(draw(st.integers(1, 40))):
        i = draw(st.integers(0, nflows - 1))
        f = flows[i]
        kind = draw(st.sampled_from(["seg"] * 6 + ["short", "psh", "ack", "badcsum",
                                                   "gap", "fin", "opt", "pad", "cut", "frag"]))
        plen = mss[i]
        kw = {}
        flags = ACK
        if kind == "short":
            plen = draw(st.integers(1, mss[i] - 1))
        elif kind == "psh":
            flags |= PSH
        elif kind == "ack":
            plen = 0
        elif kind == "badcsum":
            kw["csum"] = "bad"
        elif kind == "gap":
            nxt[i] += draw(st.integers(1, 500))
        elif kind == "fin":
            flags |= FIN
        elif kind == "opt":
            kw["options"] = nop() + nop() + ts_option(draw(st.integers(3, 9)), 2)
        elif kind == "pad":
            plen = draw(st.integers(1, 5))
            kw["pad_to"] = 60 + (20 if f.family == 6 else 0)
        elif kind == "cut":
            kw["snaplen"] = 14 + 60 + 20 + draw(st.integers(0, 10))
        elif kind == "frag" and f.family == 4:
            kw["mf"] = True
        seq_off = nxt[i]
        payload = bytes(((seq_off + j) * 7 + i) & 0xFF for j in range(plen))
        t += draw(st.sampled_from([1 * US, 10 * US, 80 * US, 2 * MS, 7 * MS]))
        pkts.append(f.pkt(seq_off, plen, flags, ts=t, payload=payload, **kw))
        if kind not in ("badcsum", "frag"):
            nxt[i] += plen
    cfg = dict(hash=draw(st.sampled_from(["flow", "none"])),
               napi_budget=draw(st.sampled_from([0, 3, 64])),
               hz=draw(st.sampled_from([250, 1000])),
               gro_flush_timeout=draw(st.sampled_from([0, 3 * MS])),
               csum=draw(st.sampled_from(["valid", "kernel"])))
    return pkts, cfg


def _byte_map(parsed_list, packets):
    """Counter of (sport, absolute seq, byte) over the captured payload of
    the TCP packets, for packets not cut by the snaplen."""
    c = Counter()
    for p, raw in zip(parsed_list, packets):
        if p.seq is None:
            continue
        for j, b in enumerate(p.payload):
            c[(p.sport, (p.seq + j) & 0xFFFFFFFF, b)] += 1
    return c


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mixes())
def test_conservation_random_mix(mix):
    pkts, cfg = mix
    eng = GROEngine(GROConfig(**cfg))
    out = list(eng.process(pkts))
    ref = GROEngine(GROConfig(compiled=False, **cfg))
    assert _sig(out, eng) == _sig(list(ref.process(pkts)), ref)
    P_in = [parse(p) for p in pkts]
    P_out = [parse(p) for p in out]
    # count conservation
    check_conservation(eng, len(pkts), len(out))
    # payload conservation per flow: wire bytes, and captured bytes at
    # their sequence numbers (an aggregate keeps only the contiguous
    # captured bytes; only compare when nothing was cut)
    wire_in, wire_out = Counter(), Counter()
    for p in P_in:
        wire_in[p.sport] += p.payload_len
    for p in P_out:
        wire_out[p.sport] += p.payload_len
    assert wire_in == wire_out
    if all(len(p.data) == p.orig_len for p in pkts):
        assert _byte_map(P_in, pkts) == _byte_map(P_out, out)
    # timestamps never go backwards
    ts = [o.ts for o in out]
    assert ts == sorted(ts)
    # every aggregate: valid IPv4 header checksum; TCP checksum per mode
    for o, p in zip(out, P_out):
        if o.meta is not None and o.meta.flags and o.meta.flags & EPB_FLAG_TSO:
            if p.family == 4:
                assert p.ip_csum_ok
            if len(o.data) == o.orig_len:
                if cfg["csum"] == "valid":
                    assert p.tcp_csum_ok
                else:
                    assert p.csum == p.pseudo_seed


def test_no_vlan_gro_passes_tagged_frames():
    """vlan_gro=False (merge --no-vlan-gro): a kernel built without
    CONFIG_VLAN_8021Q has no VLAN GRO handler, so tagged frames pass
    unmerged (confirmed on the 6.18 kernel the shared captures came from)."""
    f = Flow(4, vlans=[(0x8100, 100)])
    P, out, eng = run([f.pkt(i * PL, PL) for i in range(4)], vlan_gro=False)
    assert sizes(P) == [PL] * 4
    check_reasons(eng, {}, {Pass.NO_HANDLER: 4})


# =============================================================== TCP fraglist

def test_fraglist_psh_segment_stands_alone():
    """Fraglist (6.18): the whole flag word must be equal, so a PSH segment
    is not chained: the aggregate before it is completed, and it passes
    (its flags force a flush) -- unlike standard GRO, which merges it."""
    f = Flow(4)
    pk = [f.pkt(i * PL, PL) for i in range(3)] + [f.pkt(3 * PL, PL, ACK | PSH)]
    P, out, eng = run(pk, fraglist=True)
    assert sizes(P) == [3 * PL, PL]
    check_reasons(eng, {Flush.FLAGS_CHANGED: 1}, {Pass.FLAGS: 1})
    P, out, eng = run(pk)
    assert sizes(P) == [4 * PL]


def test_fraglist_tcp_header_untouched_with_kernel_csum():
    """A fraglist aggregate keeps its first packet's TCP header (checksum
    included) with csum='kernel'; only IP lengths/checksum change."""
    f = Flow(4)
    pk = [f.pkt(i * PL, PL) for i in range(4)]
    P, out, eng = run(pk, fraglist=True, csum="kernel")
    assert sizes(P) == [4 * PL]
    first = stamp(pk)[0].data
    agg = out[0].data
    assert agg[34:34 + 32] == first[34:34 + 32]          # TCP header as sent
    assert P[0].ip_csum_ok
    P2, out2, _ = run(pk, fraglist=True)                  # csum='valid'
    assert P2[0].tcp_csum_ok


def test_fraglist_64_segment_cap():
    """At most 64 segments in a TCP fraglist aggregate: the 65th starts a
    new one (tcp_gro_receive: count >= 64 flushes)."""
    f = Flow(4)
    P, out, eng = run([f.pkt(i * 100, 100) for i in range(70)], fraglist=True)
    assert sizes(P) == [6400, 600]
    assert eng.stats.flush[Flush.SEGMENT_LIMIT] == 1


def test_fraglist_size_cap_counts_every_header():
    """skb_gro_receive_list: p->len + the new packet's full L3 length must
    stay below 65536 (standard: + its payload only).  IPv4+TCP+timestamps
    (52 header bytes), mss 1023: standard GRO fits 64 segments
    (52 + 64 x 1023 = 65524); fraglist refuses the 64th, since 52 + 63 x
    1023 + 1075 = 65576 >= 65536: 63 segments."""
    from pktbuild import ts_option
    f = Flow(4, options=ts_option(1, 2))
    pk = [f.pkt(i * 1023, 1023) for i in range(66)]
    P, out, eng = run(pk, fraglist=True)
    assert sizes(P)[0] == 63 * 1023
    assert eng.stats.flush[Flush.SIZE_LIMIT] == 1
    P, out, eng = run(pk)
    assert sizes(P)[0] == 64 * 1023


def test_fraglist_local_port_keeps_standard_gro():
    """--local-port: a flow with a local socket uses standard GRO even with
    rx-gro-list on (tcp4_check_fraglist_gro finds the socket)."""
    f = Flow(4, dport=443)
    pk = [f.pkt(i * PL, PL) for i in range(3)] + [f.pkt(3 * PL, PL, ACK | PSH)]
    P, out, eng = run(pk, fraglist=True, local_ports=frozenset({443}))
    assert sizes(P) == [4 * PL]
    assert eng.stats.by_kind == {"tcp": 1}
