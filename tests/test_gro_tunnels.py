"""Tunnel GRO rule by rule (issue 23): inputs built here, expected outputs
exact (tunnelbuild/pktbuild compute them without pcapgro).

Kernel: udp_gro_receive's tunnel branch + vxlan_gro_receive /
geneve_gro_receive, gre_gro_receive, ipip_gro_receive,
sit_ip6ip6_gro_receive, ip4ip6_gro_receive, and the completions that
rewrite both levels (Linux 6.18).  The same shapes against the running
kernel: tests/test_gro_tunnels_kernel.py.
"""

import pytest

from pcapgro.gro import GROConfig, GROEngine
from pcapgro.record import Packet

from pktbuild import PSH, ACK, Flow
from tunnelbuild import Tunnel

VX = dict(vxlan_ports=frozenset({4789}), geneve_ports=frozenset({6081}))
KINDS = [("vxlan", {}, 4, "vxlan"), ("vxlan", dict(udp_csum="valid"), 6, "vxlan"),
         ("vxlan", dict(family=6, udp_csum="valid"), 4, "vxlan"),
         ("geneve", dict(geneve_opts=b"\x00\x01\x02\x03\x04\x05\x06\x07"), 4, "geneve"),
         ("gre", {}, 4, "gre"), ("gre", dict(gre_key=9), 6, "gre"),
         ("gre", dict(gre_csum=True), 4, "gre"), ("gre", dict(gre_teb=True), 4, "gre"),
         ("gre", dict(family=6, gre_key=1), 4, "gre"),
         ("ipip", {}, 4, "ipip"), ("ipip", {}, 6, "sit"),
         ("ipip", dict(family=6), 4, "ip4ip6"), ("ipip", dict(family=6), 6, "ip6ip6")]


def merge(pkts, **cfg):
    conf = dict(annotate=False)
    conf.update(cfg)
    eng = GROEngine(GROConfig(**conf))
    out = [e for e in eng.process(pkts) if type(e) is Packet]
    return out, eng.stats.to_dict()


def _seq(kind, tkw, fam=4, n=4, plen=100, each=None):
    t = Tunnel(kind, **tkw)
    f = Flow(fam, ipid="inc")
    return [t.wrap(f.pkt(i * plen, plen), ts=i * 1000, **(each(i) if each else {}))
            for i in range(n)]


@pytest.mark.parametrize("kind,tkw,fam,name", KINDS, ids=lambda x: str(x))
@pytest.mark.parametrize("csum", ["valid", "kernel"])
def test_merge_rewrites_both_levels(kind, tkw, fam, name, csum):
    """4 segments -> one aggregate: the first frame's headers, every outer
    and inner length rewritten; checksums valid, or as the kernel leaves
    them (inner TCP and a nonzero outer UDP checksum: the pseudo-header
    seed; the GRE checksum: the first packet's)."""
    pkts = _seq(kind, tkw, fam)
    out, st = merge(pkts, csum=csum, **VX)
    inner = Flow(fam, ipid="inc").pkt(0, 400, csum="valid" if csum == "valid" else "seed")
    outer_csum = None
    if csum == "kernel":
        if kind in ("vxlan", "geneve"):
            outer_csum = "seed" if tkw.get("udp_csum") == "valid" else "zero"
        elif tkw.get("gre_csum"):
            d = pkts[0].data
            outer_csum = int.from_bytes(d[38:40], "big")
    want = Tunnel(kind, **tkw).wrap(inner, csum=outer_csum, ts=pkts[-1].ts)
    assert [p.data for p in out] == [want.data]
    assert out[0].orig_len == len(want.data)
    assert st["by_kind"][f"{name}_tcp"] == {"aggregates": 1, "segments": 4}
    assert st["by_kind"]["tcp"] == {"aggregates": 0, "segments": 0}


def test_udp_tunnel_needs_a_socket_on_the_port():
    """Without --vxlan-port (a host without the device) VXLAN is plain UDP:
    passed (no UDP GRO); with rx-udp-gro-forwarding the outer datagrams
    would merge as UDP, which needs a nonzero checksum."""
    pkts = _seq("vxlan", {}, 4)
    out, st = merge(pkts)
    assert [p.data for p in out] == [p.data for p in pkts]
    assert st["pass_reasons"] == {"no_udp_gro": 4}
    out, st = merge(pkts, vxlan_ports=frozenset({4790}))
    assert st["pass_reasons"] == {"no_udp_gro": 4}
    out, st = merge(pkts, geneve_ports=frozenset({4789}))   # parsed as Geneve: not TEB
    assert st["aggregates"] == 0


def test_vni_and_outer_checksum_zeroness_make_flows():
    """A different VNI, or a zero vs nonzero outer UDP checksum, is another
    flow (vxlan_gro_prepare_receive, udp_gro_receive's same_flow): both
    are held side by side, neither flushes the other."""
    f = Flow(4, ipid="inc")
    a, b = Tunnel("vxlan", vni=1), Tunnel("vxlan", vni=2, ipid0=500)
    c = Tunnel("vxlan", vni=1, udp_csum="valid", ipid0=900)
    pkts = []
    for i in range(3):
        p = f.pkt(i * 100, 100)
        pkts += [a.wrap(p), b.wrap(p), c.wrap(p)]
    out, st = merge(pkts, **VX)
    assert st["by_kind"]["vxlan_tcp"] == {"aggregates": 3, "segments": 9}
    assert st["flush_reasons"] == {"end_of_input": 3}


@pytest.mark.parametrize("over,reason", [
    ({"ttl": 9}, "outer_ttl_changed"), ({"tos": 8}, "outer_tos_changed"),
    ({"df": True}, "outer_df_changed"), ({"ident": 4000}, "outer_ip_id")])
def test_outer_ip_header_flushes(over, reason):
    """The outer IPv4 header is checked like the inner one
    (gro_receive_network_flush on both levels): the aggregate is
    completed, the segment starts a new one (and the next segment, back
    to the first's fields, flushes that one again)."""
    pkts = _seq("vxlan", {}, 4, each=lambda i: over if i == 2 else {})
    out, st = merge(pkts, **VX)
    assert st["flush_reasons"].get(reason) == 2
    assert [p.data for p in out[1:]] == [pkts[2].data, pkts[3].data]


def test_outer_fixed_id_decided_apart_from_inner():
    """6.18 decides fixed/incrementing per level: outer ID fixed while the
    inner increments merges; an outer ID that then moves flushes."""
    pkts = _seq("gre", dict(ipid=33), 4)
    out, st = merge(pkts)
    assert st["segments_merged"] == 4
    pkts = _seq("gre", dict(ipid=33), 4, each=lambda i: {"ident": 34} if i == 3 else {})
    out, st = merge(pkts)
    assert st["flush_reasons"].get("outer_ip_id") == 1


def test_gre_key_then_csum_word_is_compared():
    """With K and C both set the kernel compares ``*(greh + 1)``: the
    checksum word, not the key.  Over valid inner packets of one length
    that word is the same (the inner checksums cancel what changes), so
    they merge; inner segments carrying the pseudo-header seed
    (CHECKSUM_PARTIAL) with other payload bytes give other GRE checksums:
    different flows, never merged.  Without C the key decides."""
    pkts = _seq("gre", dict(gre_key=5, gre_csum=True), n=4)
    out, st = merge(pkts)
    assert st["aggregates"] == 1
    t, f = Tunnel("gre", gre_key=5, gre_csum=True), Flow(4, ipid="inc")
    pkts = [t.wrap(f.pkt(0, 100, fill=b"a", csum="seed")),
            t.wrap(f.pkt(100, 100, fill=b"b", csum="seed"))]
    out, st = merge(pkts)
    assert st["aggregates"] == 0 and st["singles"] == 2
    pkts = _seq("gre", dict(gre_key=5), 2) + _seq("gre", dict(gre_key=6, ipid0=300), 2)
    out, st = merge(pkts)
    assert st["aggregates"] == 2


def test_gre_key_csum_short_last_segment_is_another_flow():
    """Seen on tests/data/gre4-keycsum-*.pcap (iperf3, Linux 6.18): with K
    and C the compared word is the checksum, and over valid inner packets
    it depends on their length, so a shorter last segment is another flow
    (gre_gro_receive clears same_flow).  With PSH it finds no held packet
    in its flow (tcp_gro_receive: no p, PSH -> flush) and goes up at once,
    ahead of the full-size segments' aggregate, which stays held (here to
    the end of the input).  Key only: the short segment merges as the last
    one (short_segment)."""
    t, f = Tunnel("gre", gre_key=5, gre_csum=True), Flow(4, ipid="inc")
    pkts = [t.wrap(f.pkt(i * 100, 100), ts=i * 1000) for i in range(3)]
    last = t.wrap(f.pkt(300, 60, flags=ACK | PSH), ts=3000)
    assert last.data[38:40] != pkts[0].data[38:40]
    out, st = merge(pkts + [last], csum="kernel")
    inner = Flow(4, ipid="inc").pkt(0, 300, csum="seed")
    want = Tunnel("gre", gre_key=5, gre_csum=True).wrap(
        inner, csum=int.from_bytes(pkts[0].data[38:40], "big"))
    assert [p.data for p in out] == [last.data, want.data]
    assert st["pass_reasons"] == {"flags": 1} and st["flush_reasons"] == {"end_of_input": 1}
    t, f = Tunnel("gre", gre_key=5), Flow(4, ipid="inc")
    pkts = [t.wrap(f.pkt(i * 100, 100), ts=i * 1000) for i in range(3)]
    pkts.append(t.wrap(f.pkt(300, 60, flags=ACK | PSH), ts=3000))
    out, st = merge(pkts, csum="kernel")
    assert len(out) == 1 and st["flush_reasons"] == {"short_segment": 1}
    assert st["by_kind"]["gre_tcp"] == {"aggregates": 1, "segments": 4}


def test_second_tunnel_level_is_passed():
    """One tunnel level only: VXLAN inside IPIP is passed (tunnel_nested)."""
    pkts = [Tunnel("ipip").wrap(p) for p in _seq("vxlan", {}, n=3)]
    out, st = merge(pkts, **VX)
    assert [p.data for p in out] == [p.data for p in pkts]
    assert st["pass_reasons"] == {"tunnel_nested": 3}


def test_inner_psh_completes_and_padding_flushes():
    """The inner TCP rules apply (PSH merged, then completed); an outer
    frame padded on the wire is flagged flush (l3_flush)."""
    t, f = Tunnel("ipip"), Flow(4, ipid="inc")
    pkts = [t.wrap(f.pkt(0, 100)), t.wrap(f.pkt(100, 100, flags=ACK | PSH)),
            t.wrap(f.pkt(200, 100))]
    out, st = merge(pkts)
    assert st["flush_reasons"].get("psh") == 1 and st["segments_merged"] == 2


def test_tunnel_aggregates_stay_under_65536():
    """Only plain TCP grows beyond GRO_LEGACY_MAX_SIZE (BIG TCP): with
    gro_max_size 200000 a tunnelled flow still completes below 65536."""
    pkts = _seq("gre", {}, n=60, plen=1400)
    out, st = merge(pkts, gro_max_size=200000)
    assert max(len(p.data) - 14 for p in out) < 65536
    assert st["flush_reasons"].get("size_limit", 0) >= 1


def test_fraglist_does_not_apply_inside_tunnels():
    """With --fraglist a tunnelled TCP flow merges in standard mode (the
    aggregate is rewritten, not chained): by_kind vxlan_tcp."""
    pkts = _seq("vxlan", {}, 4)
    out, st = merge(pkts, fraglist=True, **VX)
    assert st["by_kind"]["vxlan_tcp"]["aggregates"] == 1
    assert "tcp_fraglist" not in [k for k, v in st["by_kind"].items() if v["aggregates"]]


def test_annotated_aggregate_names_the_tunnel():
    pkts = _seq("vxlan", {}, n=3)
    out, _ = merge(pkts, annotate=True, **VX)
    assert "GRO aggregate (VXLAN/TCP) of 3 segments" in out[0].meta.comments[0]
