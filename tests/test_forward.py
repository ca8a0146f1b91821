"""pcapgro.forward: GRO then GSO, as a Linux forwarder puts it on the wire.

Capture tests run everywhere (on shared/captures/kernel/*-wire.pcap);
tests marked ``root`` compare with a real forwarder built in network
namespaces (tests/forwarder_oracle.py) and skip, with the reason, where
that cannot run.
"""

import collections
import struct

import pytest

from pcapgro.capture import open_reader
from pcapgro.checksum import ones_sum, pseudo_sum_v4, pseudo_sum_v6
from pcapgro.forward import Forwarder
from pcapgro.gro import GROConfig
from pcapgro.record import Packet, Section

from capture_helpers import KERNEL
import forwarder_oracle as fo

WIRE = sorted(p.name[:-len("-wire.pcap")] for p in KERNEL.glob("*-wire.pcap")) \
    if KERNEL.is_dir() else []
needs_kernel_captures = pytest.mark.skipif(not WIRE, reason=f"no captures in {KERNEL}")


def packets(name):
    r = open_reader(KERNEL / f"{name}-wire.pcap")
    try:
        return [ev for ev in r if type(ev) is Packet]
    finally:
        r.close()


def forward(pkts, cfg, **kw):
    fw = Forwarder(cfg, **kw)
    return [e for e in fw.process(pkts) if type(e) is Packet], fw.stats


def l3(d):
    return 14, (4 if d[12:14] == b"\x08\x00" else 6)


def normalized(d, ttl):
    """``d`` with TTL / hop limit set to ``ttl`` and the IPv4 header
    checksum recomputed (what a forwarder may rewrite)."""
    b = bytearray(d)
    off, fam = l3(d)
    if fam == 4:
        b[off + 8] = ttl
        b[off + 10:off + 12] = b"\0\0"
        c = (~_fold(ones_sum(bytes(b[off:off + 20])))) & 0xFFFF
        b[off + 10:off + 12] = struct.pack("!H", c)
    else:
        b[off + 7] = ttl
    return bytes(b)


def _fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def ttl(d):
    off, fam = l3(d)
    return d[off + (8 if fam == 4 else 7)]


def flow(d):
    off, fam = l3(d)
    if fam == 4:
        l4 = off + (d[off] & 15) * 4
        return d[off + 9], d[off + 12:off + 20], d[l4:l4 + 4]
    return d[off + 6], d[off + 8:off + 40], d[off + 40:off + 44]


def ip_ok(d):
    off, fam = l3(d)
    return fam == 6 or ones_sum(d[off:off + 20]) % 0xFFFF == 0


def l4_ok(d):
    off, fam = l3(d)
    if fam == 4:
        tot = struct.unpack_from("!H", d, off + 2)[0]
        l4 = off + 20
        ps = pseudo_sum_v4(d[off + 12:off + 16], d[off + 16:off + 20], d[off + 9], tot - 20)
        end = off + tot
    else:
        plen = struct.unpack_from("!H", d, off + 4)[0]
        l4 = off + 40
        ps = pseudo_sum_v6(d[off + 8:off + 24], d[off + 24:off + 40], d[off + 6], plen)
        end = l4 + plen
    return (ps + ones_sum(d[l4:end])) % 0xFFFF == 0


def check_same_packets(inp, out, heads):
    """``out`` gives back ``inp`` (same packets, per-flow order kept) but
    for TTL - 1 on exactly ``heads`` packets and the IPv4 header checksum."""
    assert len(out) == len(inp)
    by_flow_in = collections.defaultdict(list)
    by_flow_out = collections.defaultdict(list)
    for p in inp:
        by_flow_in[flow(p.data)].append(p.data)
    dec = 0
    for q in out:
        d = q.data
        assert ip_ok(d)
        by_flow_out[flow(d)].append(d)
    for k, ds in by_flow_in.items():
        got = by_flow_out[k]
        assert len(got) == len(ds)
        for a, b in zip(ds, got):
            assert normalized(b, ttl(a)) == a
            assert ttl(b) in (ttl(a), ttl(a) - 1)
            dec += ttl(b) == ttl(a) - 1
    assert dec == heads


# ------------------------------------------------------------ capture tests

@needs_kernel_captures
@pytest.mark.parametrize("name", WIRE)
def test_fraglist_gives_back_input(name):
    """Fraglist GRO then skb_segment_list: the input packets, byte for byte,
    but for the head's TTL (chained packets keep theirs, as on 6.18) and the
    IPv4 header checksum; IDs already incrementing stay."""
    inp = packets(name)
    out, st = forward(inp, GROConfig(fraglist=True))
    g = st.gro
    forwarded = g.aggregates + g.singles + sum(g.passed.values())
    check_same_packets(inp, out, heads=forwarded)
    d = st.to_dict()["forward"]
    assert d["fraglist"] == g.aggregates > 0
    assert d["id_changed"] == d["size_changed"] == 0
    assert d["ttl_decremented"] == forwarded


@needs_kernel_captures
@pytest.mark.parametrize("name", WIRE)
def test_standard_same_payloads_sizes_predicted_headers(name):
    """Standard GRO (UDP: rx-udp-gro-forwarding) then GSO: the same
    packets with TTL - 1 on every one, valid IP and L4 checksums; sizes and
    payloads equal (the senders' IDs were incrementing, so IDs stay)."""
    inp = packets(name)
    udp = name.startswith("udp")
    out, st = forward(inp, GROConfig(udp="gro" if udp else "off"))
    check_same_packets(inp, out, heads=len(inp))
    assert all(l4_ok(q.data) for q in out)
    d = st.to_dict()["forward"]
    assert d["segmented"] == st.gro.aggregates > 0
    assert d["segments"] == st.gro.segments_merged
    assert d["size_changed"] == d["id_changed"] == 0


@needs_kernel_captures
@pytest.mark.parametrize("name", WIRE)
def test_timestamps_bunched_and_non_decreasing(name):
    inp = packets(name)
    out, st = forward(inp, GROConfig(fraglist=True))
    ts = [q.ts for q in out]
    assert ts == sorted(ts)
    # every packet of an aggregate leaves at the same time
    assert len(set(ts)) <= st.gro.aggregates + st.gro.singles + sum(st.gro.passed.values())
    assert st.ts_changed > 0


@needs_kernel_captures
def test_bridge_keeps_ttl():
    inp = packets("udp4-fraglist")
    out, st = forward(inp, GROConfig(fraglist=True), router=False)
    assert [q.data for q in out] == [p.data for p in inp]
    assert st.ttl_decremented == 0


@needs_kernel_captures
@pytest.mark.parametrize("name,field", [("tcp4-bulk", "icmp_frag_needed"),
                                        ("tcp6-bulk", "icmpv6_too_big")])
def test_egress_mtu_drops_df_and_ipv6(name, field):
    """Egress MTU 1280 on a 1500-MTU capture: every forwarded packet whose
    segments are larger (DF IPv4 TCP, IPv6) is dropped whole, one ICMP per
    forwarded packet (aggregate); the small ones pass."""
    inp = packets(name)
    out, st = forward(inp, GROConfig(), egress_mtu=1280)
    assert all(len(q.data) - 14 <= 1280 for q in out)
    big = sum(1 for p in inp if len(p.data) - 14 > 1280)
    # the short last segment of a too-big aggregate goes with it
    assert big <= st.dropped_mtu == len(inp) - len(out)
    n_icmp = getattr(st, field)
    assert 0 < n_icmp < big
    assert st.icmp_frag_needed + st.icmpv6_too_big == n_icmp


@needs_kernel_captures
@pytest.mark.parametrize("fraglist", [False, True])
def test_aggregates_dropped_whole_are_not_counted_as_sent(fraglist):
    """Egress MTU 68: every DF aggregate is dropped before GSO (ICMP
    fragmentation needed), so none counts as segmented / given back; the
    table says what was dropped instead of "29 aggregates cut into 1080
    segments"."""
    inp = packets("tcp4-bulk")
    out, st = forward(inp, GROConfig(fraglist=fraglist), egress_mtu=68)
    d = st.to_dict()["forward"]
    assert st.gro.aggregates > 0 and len(out) == d["packets_out"] < 30
    assert d["segmented"] == d["segments"] == d["fraglist"] == d["fraglist_packets"] == 0
    assert d["dropped_mtu"] == len(inp) - len(out)
    assert all(len(line) <= 80 for line in st.table())
    table = " ".join(" ".join(st.table()).split())          # lines wrapped at 80 columns
    assert "0 aggregates sent as 0 segments, 0 fraglist aggregates sent as 0 packets" in table
    assert (f"dropped, too big for the egress MTU: {d['dropped_mtu']:,} packets "
            f"({d['icmp_frag_needed']} ICMP fragmentation needed counted)") in table
    # a bridge drops only the segments that do not fit: the short last
    # segment of an aggregate is sent, so that aggregate counts, with it alone
    out, st = forward(inp, GROConfig(), egress_mtu=1000, router=False)
    d = st.to_dict()["forward"]
    assert 0 < d["segmented"] == d["segments"] < st.gro.aggregates
    assert d["packets_out"] == len(out)


def test_ttl_expired_aggregates_are_not_counted_as_sent():
    frames, plan = fo.udp_frames(n_bursts=2, burst=4)
    inp = fo.timed(frames, plan)
    for p in inp:
        b = bytearray(p.data)
        b[22] = 1                       # TTL 1: the router drops the aggregate
        p.data = normalized(bytes(b), 1)
    for cfg in (GROConfig(fraglist=True, hash="none"), GROConfig(udp="gro", hash="none")):
        out, st = forward(inp, cfg)
        d = st.to_dict()["forward"]
        assert out == [] and d["ttl_expired"] == len(inp) and st.gro.aggregates == 2
        assert d["segmented"] == d["fraglist"] == d["segments"] == d["fraglist_packets"] == 0
        assert "dropped, TTL expired: 8 packets (2 ICMP time exceeded counted)" in "\n".join(st.table())


def test_no_df_fragmented_and_reassembles():
    frames, plan = fo.udp_frames(n_bursts=2, burst=4, payload=1400, df=False,
                                  last_short=False)
    inp = fo.timed(frames, plan)
    out, st = forward(inp, GROConfig(udp="gro", hash="none"), egress_mtu=1000)
    assert st.fragmented == len(inp) and st.fragments == 2 * len(inp)
    assert st.dropped_mtu == st.icmp_frag_needed == 0
    for k, p in enumerate(inp):
        a, b = out[2 * k].data, out[2 * k + 1].data
        assert struct.unpack_from("!H", a, 20)[0] == 0x2000           # MF, offset 0
        assert struct.unpack_from("!H", b, 20)[0] == (1000 - 20) // 8  # last, offset 976
        assert ip_ok(a) and ip_ok(b)
        assert a[18:20] == b[18:20] == p.data[18:20]                 # same ID
        assert a[34:] + b[34:] == p.data[34:]                         # payload back
        assert len(a) - 14 <= 1000


def test_fixed_ids_renumbered_by_fraglist_and_udp_gso():
    """IPv4 ID 0 (DF) senders: fraglist GSO and UDP GSO both write base+i
    (confirmed on 6.18, docs/kernel-findings.md)."""
    frames, plan = fo.udp_frames(n_bursts=3, burst=5, ident=0, df=True)
    inp = fo.timed(frames, plan)
    for cfg in (GROConfig(fraglist=True, hash="none"), GROConfig(udp="gro", hash="none")):
        out, st = forward(inp, cfg)
        ids = [struct.unpack_from("!H", q.data, 18)[0] for q in out]
        assert ids == [0, 1, 2, 3, 4] * 3
        assert st.id_changed == 12
        assert all(ip_ok(q.data) for q in out)


def test_ttl_expired_dropped():
    from pktbuild import eth, ipv4, udp_datagram
    u = udp_datagram("10.0.0.1", "10.0.0.2", 1, 2, b"x" * 10)
    pk = [Packet(1000 + i, eth(ipv4(u, "10.0.0.1", "10.0.0.2", proto=17, ttl=t), 0x0800),
                 0) for i, t in enumerate((1, 2))]
    for p in pk:
        p.orig_len = len(p.data)
    out, st = forward(pk, GROConfig())
    assert len(out) == 1 and ttl(out[0].data) == 1
    assert st.ttl_expired == 1 == st.icmp_time_exceeded


def test_bad_egress_mtu():
    from pcapgro.errors import UnusableInput
    with pytest.raises(UnusableInput):
        Forwarder(GROConfig(), egress_mtu=60)


def test_streaming_and_events_pass():
    frames, plan = fo.udp_frames(n_bursts=300, burst=4)  # > GRO batch (256)
    pk = fo.timed(frames, plan)
    seen = []

    def src():
        yield Section()
        for p in pk:
            seen.append(p)
            yield p
    fw = Forwarder(GROConfig(udp="gro", hash="none"))
    it = fw.process(src())
    first = next(it)
    assert type(first) is Section
    nxt = next(it)
    assert type(nxt) is Packet and len(seen) < len(pk)
    rest = list(it)
    assert len(rest) + 1 == len(pk)
    d = fw.stats.to_dict()
    assert set(d) == {"gro", "forward"} and d["forward"]["packets_out"] == len(pk)
    assert any(line.startswith("GSO:") for line in fw.stats.table())


# ------------------------------------------------------------ the kernel

def _root_reason():
    why = fo.requirements_missing()
    if why:
        print(f"skipping namespace forwarder tests: {why}")
    return why


_WHY = _root_reason()
KERNEL_FRAMES = 400      # frames of a capture replayed (time: ~6 ms per group of 8)
root = pytest.mark.root
needs_root = pytest.mark.skipif(_WHY is not None, reason=f"namespace forwarder: {_WHY}")


def _kernel_vs_pcapgro(frames, plan, fraglist=False, udp_gro=False, mtu=1500, tries=3):
    """Replay on the namespace forwarder and predict with pcapgro; retried
    when the kernel's GRO grouping differs from the prediction (a group
    straddling a timer poll), never reported as a mismatch for that."""
    last = None
    for _ in range(tries):
        with fo.ForwarderNS(fraglist=fraglist, udp_gro=udp_gro, egress_mtu=mtu) as ns:
            got = ns.replay(frames, plan)
        ours, st = fo.predict(frames, plan, fraglist, udp_gro, None if mtu >= 1500 else mtu)
        diffs = fo.compare(got["egress"], ours)
        # Aggregates too big for the egress MTU are dropped with an ICMP
        # error, so a group split by a timer poll shows only in the count
        # of those errors: that too is a grouping difference, retried.
        fn, ptb, _ = fo.icmp_counts(got["back"])
        want = (st["forward"]["icmp_frag_needed"], st["forward"]["icmpv6_too_big"])
        if (fn, ptb) != want:
            diffs.append(f"ICMP errors (frag needed, too big): kernel {(fn, ptb)}, "
                         f"pcapgro {want}")
        last = (got, ours, st, diffs)
        if not last[3]:
            break
    return last


@root
@needs_root
@needs_kernel_captures
@pytest.mark.parametrize("name,kw", [("tcp4-bulk", {}), ("udp4-fwd", {"udp_gro": True}),
                                     ("tcp4-bulk", {"fraglist": True}),
                                     ("udp4-fraglist", {"fraglist": True})])
def test_matches_namespace_forwarder(name, kw):
    frames = [p.data for p in packets(name)][:KERNEL_FRAMES]
    plan = fo.plan_for(len(frames))
    got, ours, st, diffs = _kernel_vs_pcapgro(frames, plan, **kw)
    assert not diffs, diffs
    assert st["gro"]["aggregates"] > 0


@root
@needs_root
@pytest.mark.parametrize("kw", [{"fraglist": True}, {"udp_gro": True}])
def test_fixed_id_rule_on_namespace_forwarder(kw):
    frames, plan = fo.udp_frames(ident=0, df=True)
    got, ours, st, diffs = _kernel_vs_pcapgro(frames, plan, **kw)
    assert not diffs, diffs
    ids = [struct.unpack_from("!H", p.data, 18)[0] for p in got["egress"]]
    assert ids[:8] == list(range(8))


@root
@needs_root
@needs_kernel_captures
@pytest.mark.parametrize("name", ["tcp4-bulk", "tcp6-bulk"])
def test_egress_mtu_1280_matches_namespace_forwarder(name):
    frames = [p.data for p in packets(name)][:KERNEL_FRAMES]
    plan = fo.plan_for(len(frames))
    got, ours, st, diffs = _kernel_vs_pcapgro(frames, plan, mtu=1280)
    assert not diffs, diffs
    fn, ptb, _ = fo.icmp_counts(got["back"])
    f = st["forward"]
    assert (fn, ptb) == (f["icmp_frag_needed"], f["icmpv6_too_big"])
    assert fn + ptb > 0


@root
@needs_root
@pytest.mark.parametrize("kw", [{"fraglist": True}, {"udp_gro": True}])
def test_fragmentation_matches_namespace_forwarder(kw):
    frames, plan = fo.udp_frames(payload=1400, df=False)
    got, ours, st, diffs = _kernel_vs_pcapgro(frames, plan, mtu=1280, **kw)
    assert not diffs, diffs
    assert st["forward"]["fragments"] > 0


# ------------------------------------------------- GSO info, not comment text

SAMPLE = __import__("pathlib").Path(__file__).resolve().parents[1] / "samples" / "tcp4-bulk-wire.pcap"


def _sample():
    r = open_reader(SAMPLE)
    try:
        return [ev for ev in r if type(ev) is Packet]
    finally:
        r.close()


@pytest.mark.parametrize("annotate", [True, False])
def test_aggregates_carry_gso_info(annotate):
    """Every aggregate GRO writes carries skb_shinfo's GSO fields (kind,
    fraglist, gso_size = first segment's payload, gso_segs = segments),
    with or without annotations; singles and passed packets none."""
    from pcapgro.gro import GROEngine
    from pcapgro.record import GSOInfo
    eng = GROEngine(GROConfig(annotate=annotate))
    out = [e for e in eng.process(_sample()) if type(e) is Packet]
    aggs = [p for p in out if p.gso is not None]
    st = eng.stats.to_dict()
    assert len(aggs) == st["aggregates"] == 29
    assert sorted(p.gso.gso_segs for p in aggs) == sorted(
        int(k) for k, n in st["segments_per_aggregate"]["histogram"].items() for _ in range(n))
    assert {(p.gso.kind, p.gso.fraglist, p.gso.gso_size) for p in aggs} == {("tcp", False, 1448)}
    assert aggs[0].gso == GSOInfo("tcp", False, 1448, aggs[0].gso.gso_segs)


def test_fraglist_udp_aggregates_carry_gso_info():
    from pcapgro.gro import GROEngine
    if not WIRE:
        pytest.skip(f"no captures in {KERNEL}")
    eng = GROEngine(GROConfig(fraglist=True))
    aggs = [e for e in eng.process(packets("udp4-fraglist")) if type(e) is Packet and e.gso]
    assert aggs and all(p.gso.kind == "udp" and p.gso.fraglist for p in aggs)
    assert sum(p.gso.gso_segs for p in aggs) == eng.stats.segments_merged


def test_forwarding_reads_gso_info_not_comments():
    """This merge's aggregates are segmented by their GSO info: a comment
    naming another gso_size (text a user could edit) changes nothing; a
    packet whose only pcapgro-like comment is not an aggregate note is
    forwarded as received."""
    from pcapgro.gro import GROEngine
    from pcapgro.record import PacketMeta
    merged = [e for e in GROEngine(GROConfig()).process(_sample()) if type(e) is Packet]
    agg = next(p for p in merged if p.gso is not None and p.gso.gso_segs == 45)
    fw = Forwarder(GROConfig(), router=False)
    want = fw._forward(agg)
    assert len(want) == 45 and {len(q.data) for q in want[:-1]} == {14 + 20 + 32 + 1448}
    c = [x.replace("gso_size 1448", "gso_size 100") for x in agg.meta.comments]
    lied = Packet(agg.ts, agg.data, agg.orig_len, agg.iface, agg.linktype,
                  PacketMeta(comments=c, flags=agg.meta.flags), agg.gso)
    assert [q.data for q in Forwarder(GROConfig(), router=False)._forward(lied)] == \
        [q.data for q in want]
    plain = Packet(agg.ts, agg.data, agg.orig_len, agg.iface, agg.linktype,
                   PacketMeta(comments=["pcapgro: GRO aggregate? no, a user note"]))
    assert [q.data for q in Forwarder(GROConfig(), router=False)._forward(plain)] == [agg.data]


def test_input_gso_from_an_earlier_merge():
    from pcapgro.forward import input_gso
    from pcapgro.record import GSOInfo, PacketMeta
    m = PacketMeta(comments=["x", "pcapgro: GRO aggregate (fraglist UDP) of 7 segments, "
                             "gso_size 1200", "pcapgro-restore v1 i=3 t=5"])
    assert input_gso(m) == GSOInfo("udp", True, 1200, 7)
    assert input_gso(PacketMeta(comments=["note"])) is None and input_gso(None) is None


@pytest.mark.parametrize("size", range(1, 8))
def test_segments_below_tcp_min_gso_size_are_forwarded(size):
    """An aggregate of 1..7-byte segments has a gso_size below
    TCP_MIN_GSO_SIZE (8), which bounds only what a sender picks
    (tcp_output.c); tcp_gso_segment cuts any gso_size.  merge --gso used to
    stop the whole run with "--mss N: must be at least 8" (found by the
    session-13 tester): it now forwards them, as the same segments with
    the TTL one lower and valid checksums."""
    from pktbuild import Flow
    f = Flow(4, ipid="inc")
    inp = [f.pkt(k * size, size, ts=1_000_000 + k * 1000) for k in range(6)]
    out, st = forward(inp, GROConfig())
    assert [bytes(p.data) for p in out] == [normalized(bytes(p.data), ttl(bytes(p.data)) - 1)
                                            for p in inp]
    assert all(ip_ok(bytes(p.data)) and l4_ok(bytes(p.data)) for p in out)
