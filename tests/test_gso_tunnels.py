"""Tunnel GSO rule by rule (issue 23): a TCP super-frame inside a tunnel
cut as __skb_udp_tunnel_segment / gre_gso_segment / inet_gso_segment
(SKB_GSO_IPXIP4/6) do; expected segments built here with
tunnelbuild/pktbuild (no pcapgro), compared byte for byte."""

import pytest

from pcapgro.gro import GROConfig, GROEngine
from pcapgro.gso import GSOConfig, GSOSplitter, Pass
from pcapgro.record import Packet

from pktbuild import ACK, PSH, Flow
from tunnelbuild import Tunnel

CASES = [("vxlan", {}, 4), ("vxlan", dict(udp_csum="valid"), 4),
         ("vxlan", dict(family=6, udp_csum="valid"), 6),
         ("geneve", dict(geneve_opts=b"\1\2\3\4"), 4),
         ("gre", {}, 4), ("gre", dict(gre_key=3, gre_csum=True), 6), ("gre", dict(gre_teb=True), 4),
         ("ipip", {}, 4), ("ipip", {}, 6), ("ipip", dict(family=6), 6)]


def _hdrs(kind, tkw, fam):
    """Bytes of every header before the inner TCP payload."""
    f = Flow(fam)
    return len(Tunnel(kind, **tkw).wrap(f.pkt(0, 0)).data) - 14


def split(pkts, **cfg):
    sp = GSOSplitter(GSOConfig(**cfg))
    return [e for e in sp.process(pkts) if type(e) is Packet], sp.stats


@pytest.mark.parametrize("kind,tkw,fam", CASES, ids=str)
def test_cut_like_the_kernel(kind, tkw, fam):
    """Inner: seq, PSH on the last segment only, inner IPv4 ID + k, TCP
    checksum valid; outer: every length, IPv4 ID + k and header checksum,
    a set UDP / GRE checksum recomputed, a zero UDP checksum kept 0."""
    mss = 1500 - _hdrs(kind, tkw, fam)
    n = 4
    sup = Tunnel(kind, **tkw).wrap(Flow(fam, ipid=1000).pkt(0, (n - 1) * mss + mss - 7,
                                                            flags=ACK | PSH, csum="seed"),
                                   csum="seed" if tkw.get("udp_csum") == "valid" else None)
    out, st = split([sup])
    t, f = Tunnel(kind, **tkw), Flow(fam)
    idk = (lambda k: {"ident": 1000 + k}) if fam == 4 else (lambda k: {})
    want = [t.wrap(f.pkt(k * mss, mss if k < n - 1 else mss - 7,
                         flags=ACK | (PSH if k == n - 1 else 0), **idk(k))).data
            for k in range(n)]
    assert [p.data for p in out] == want
    assert st.split == 1 and st.segments == n


def test_gso_partial_from_the_frame_length():
    """GSO_PARTIAL: outer and inner headers carry one segment's lengths,
    the frame holds several -- recognised from the frame length."""
    mss = 1500 - _hdrs("vxlan", {}, 4)
    full = Tunnel("vxlan").wrap(Flow(4, ipid=7).pkt(0, 3 * mss))
    one = Tunnel("vxlan").wrap(Flow(4, ipid=7).pkt(0, mss))
    d = bytearray(full.data)
    d[14:14 + 64 + 20] = one.data[14:14 + 64 + 20]       # outer + inner headers of one
    sup = Packet(0, bytes(d), len(d), 0, 1)
    out, st = split([sup])
    assert st.split == 1 and len(out) == 3
    assert all(len(p.data) == 1514 for p in out)


def test_gso_partial_bounded_by_gso_max_size():
    """GSO_PARTIAL takes the inner length from the frame's original length:
    never from one beyond GSO_MAX_SIZE (a damaged record: 0xFFFFFFFF once
    gave 3 million segments), which passes unchanged, counted
    record_lengths; at the bound the frame is still cut."""
    from pcapgro.gso.ipv4 import GSO_MAX_SIZE
    mss = 1500 - _hdrs("vxlan", {}, 4)
    one = Tunnel("vxlan").wrap(Flow(4, ipid=7).pkt(0, mss))
    sup = Packet(0, one.data, 0xFFFFFFFF, 0, 1)
    out, st = split([sup])
    assert out == [sup] and st.passed == {Pass.RECORD_LENGTHS: 1} and st.split == 0
    at = Packet(0, one.data, 14 + GSO_MAX_SIZE, 0, 1)
    out, st = split([at])
    assert st.split == 1 and len(out) == -(-(GSO_MAX_SIZE - (1500 - mss)) // mss)


def test_non_tcp_inside_a_tunnel_passes():
    t = Tunnel("ipip")
    f = Flow(4)
    sup = t.wrap(f.udp(4000))
    out, st = split([sup])
    assert out == [sup] and st.passed == {Pass.TUNNEL: 1}


def test_merge_then_split_gives_the_segments_back():
    """merge --vxlan-port then split: the gso_size merge recorded (pcapng
    comment) cuts the aggregate back into the wire frames."""
    t, f = Tunnel("vxlan", udp_csum="valid"), Flow(4, ipid="inc")
    wire = [t.wrap(f.pkt(k * 1000, 1000), ts=k * 1000) for k in range(5)]
    eng = GROEngine(GROConfig(vxlan_ports=frozenset({4789})))
    merged = [e for e in eng.process(wire) if type(e) is Packet]
    assert len(merged) == 1
    out, st = split(merged)
    assert [p.data for p in out] == [p.data for p in wire]


def test_inner_syn_mss_decides_the_size():
    """An inner SYN's MSS option (seen inside the tunnel) is the gso_size
    of its flow's super-frames, as for plain TCP."""
    from pktbuild import mss_option
    t, f = Tunnel("vxlan"), Flow(4, ipid=5)
    syn = t.wrap(f.pkt(-1, 0, flags=0x02, options=mss_option(1000)))
    sup = t.wrap(f.pkt(0, 3000))
    out, st = split([syn, sup])
    assert out[0].data == syn.data
    assert [len(p.data) - 14 - 50 - 40 for p in out[1:]] == [1000, 1000, 1000]


def test_mss_option_cuts_frames_under_the_mtu():
    """--mss cuts a tunnelled segment longer than it, as for plain TCP."""
    sup = Tunnel("vxlan").wrap(Flow(4).pkt(0, 1200))
    out, st = split([sup], mss=600)
    assert len(out) == 2 and st.split == 1
