"""Tunnel GSO: TCP super-frames inside VXLAN, Geneve, GRE and IP-in-IP.

Mirrors the kernel's tunnel segmentation of Linux 6.18, one tunnel level:
__skb_udp_tunnel_segment (net/ipv4/udp_offload.c: VXLAN, Geneve; the outer
UDP length per segment, its checksum recomputed when it was set --
SKB_GSO_UDP_TUNNEL_CSUM -- and left 0 when it was 0), gre_gso_segment
(net/ipv4/gre_offload.c: the GRE checksum, when present, recomputed per
segment) and inet_gso_segment / ipv6_gso_segment for SKB_GSO_IPXIP4/6
(IPIP, SIT, IP4IP6, IP6IP6).  The inner TCP super-frame is cut as a plain
one (:func:`pcapgro.gso.tcp.segment`: seq, FIN/PSH on the last segment
only, CWR on the first, inner IPv4 ID + k unless ``--fixed-id``, inner
checksums valid); every outer header is copied and fixed per segment:
IPv4 total length, ID base + k, header checksum; IPv6 payload length.

A GSO_PARTIAL frame (i40e and similar: outer and inner headers carry the
lengths of one segment while the frame holds many) is recognised from the
frame length: the inner TCP length is taken from the frame, not the
headers, once the frame is longer than the MTU.

This module is the readable reference.  On split's record path (classic
pcap in and out, untagged Ethernet) pcapgro/_gso.c's chunk loop makes
the same decisions (tunnel_frame: locate, the inner headers, the SYN
MSS noted, the segment size, cut or passed and why) and writes the same
bytes (write_segment + fix_outer: :func:`pcapgro.gso.tcp.segment` +
:func:`_fix_outer` here); records of shapes it leaves (outer IPv6
extension headers, an inner BIG TCP jumbo header, other link layers)
come here, their segments laid out by the compiled segmenter
(:func:`pcapgro.gso.cseg.tunnel_outer`).  ``PCAPGRO_NO_C=1`` runs this
module alone; tests/test_gso_tunnels_cseg.py checks both give the same
bytes and statistics.
"""

import struct

from ..checksum import ones_sum, pseudo_sum_v4, pseudo_sum_v6, fold
from ..linklayer import ETH_P_IP, ETH_P_IPV6
from . import cseg, ipv4, ipv6, tcp
from .config import TCP_MIN_GSO_SIZE
from .reasons import Pass, SizeSource

__all__ = ["locate", "split", "UDP_TUNNEL_PORTS", "IPXIP_PROTOS"]

UDP_TUNNEL_PORTS = {4789: "vxlan", 8472: "vxlan", 6081: "geneve"}
IPXIP_PROTOS = (4, 41)
ETH_P_TEB = 0x6558
_u16 = struct.Struct("!H")


def _inner_eth(data, mac):
    """Inner l3 offset and EtherType behind an inner Ethernet header at
    ``mac`` (no VLAN tag), or None."""
    if len(data) < mac + 14:
        return None
    et = _u16.unpack_from(data, mac + 12)[0]
    return (mac + 14, et) if et in (ETH_P_IP, ETH_P_IPV6) else None


def _udp_tunnel(data, l3, kind):
    """(tun_off, inner l3off, EtherType, csum_at) of a VXLAN / Geneve frame."""
    u = l3.l4off
    h = u + 8
    if len(data) < h + 8:
        return None
    csum_at = u + 6 if data[u + 6:u + 8] != b"\0\0" else None
    if kind == "vxlan":
        r = _inner_eth(data, h + 8)
    else:
        hl = 8 + (data[h] & 0x3F) * 4
        et = _u16.unpack_from(data, h + 2)[0]
        if data[h] >> 6:
            return None
        r = _inner_eth(data, h + hl) if et == ETH_P_TEB else (
            (h + hl, et) if et in (ETH_P_IP, ETH_P_IPV6) else None)
    return None if r is None else (u, r[0], r[1], csum_at)


def _gre(data, l3):
    """(tun_off, inner l3off, EtherType, csum_at) of a GRE frame (version 0,
    K and C flags only, as gre_gso_segment takes)."""
    g = l3.l4off
    if len(data) < g + 4:
        return None
    flags, et = struct.unpack_from("!HH", data, g)
    if flags & ~0xA000:
        return None
    hl = 4 + (4 if flags & 0x2000 else 0) + (4 if flags & 0x8000 else 0)
    csum_at = g + 4 if flags & 0x8000 else None
    if et == ETH_P_TEB:
        r = _inner_eth(data, g + hl)
    else:
        r = (g + hl, et) if et in (ETH_P_IP, ETH_P_IPV6) else None
    return None if r is None else (g, r[0], r[1], csum_at)


def locate(data, l3):
    """The tunnel of outer L3 ``l3``: ``(kind, tun_off, inner l3off,
    inner EtherType, outer csum_at)`` or None (no tunnel this module cuts)."""
    if l3.proto == 17 and len(data) >= l3.l4off + 8:
        kind = UDP_TUNNEL_PORTS.get(_u16.unpack_from(data, l3.l4off + 2)[0])
        r = _udp_tunnel(data, l3, kind) if kind else None
    elif l3.proto == 47:
        kind, r = "gre", _gre(data, l3)
    elif l3.proto in IPXIP_PROTOS:
        kind = "ipip"
        r = (None, l3.l4off, ETH_P_IP if l3.proto == 4 else ETH_P_IPV6, None)
    else:
        return None
    return None if r is None else (kind,) + r


def _fix_outer(f, n, l3, tun_off, csum_at, k, ok, udp):
    """Segment ``k``'s outer headers in bytearray ``f`` (a frame of ``n``
    bytes on the wire):
    IPv4 total length / ID base + k / header checksum, or IPv6 payload
    length; UDP length; the outer UDP or GRE checksum recomputed when it
    was set (``ok``: the segment's bytes are all there)."""
    o = l3.l3off
    if l3.family == 4:
        _u16.pack_into(f, o + 2, n - o)
        _u16.pack_into(f, o + 4, (l3.ipid + k) & 0xFFFF)
        f[o + 10:o + 12] = b"\0\0"
        _u16.pack_into(f, o + 10, (~fold(ones_sum(bytes(f[o:o + len(l3.hdr)])))) & 0xFFFF)
    else:
        _u16.pack_into(f, o + 4, n - o - 40)
    if udp:
        _u16.pack_into(f, tun_off + 4, n - tun_off)
    if csum_at is None or not ok:
        return
    f[csum_at:csum_at + 2] = b"\0\0"
    s = ones_sum(bytes(f[tun_off:]))
    if udp:
        ps = pseudo_sum_v4 if l3.family == 4 else pseudo_sum_v6
        s += ps(l3.src, l3.pdst, 17, n - tun_off)
    c = (~fold(s)) & 0xFFFF
    _u16.pack_into(f, csum_at, c or (0xFFFF if udp else 0))


def _mss(sp, l3, inner, thl, key, recorded):
    """The inner gso_size: --mss, the inner flow's SYN, pcapgro merge's
    recorded gso_size, else what fits the MTU with every header.  Returns
    ``(mss, SizeSource)`` or None."""
    cfg = sp.cfg
    if cfg.mss:
        return cfg.mss, SizeSource.OPTION
    opt = thl - 20
    fl = sp.flows.get(key)
    if fl is not None and fl.syn_mss - opt >= TCP_MIN_GSO_SIZE:
        return fl.syn_mss - opt, SizeSource.OWN_SYN
    if recorded >= TCP_MIN_GSO_SIZE:
        return recorded, SizeSource.RECORDED
    m = cfg.mtu - (inner.l4off + thl - l3.l3off)
    return (m, SizeSource.MTU) if m >= TCP_MIN_GSO_SIZE else None


def split(sp, pkt, l3, next_ts, recorded, flow_cls):
    """Segment tunnelled TCP super-frame ``pkt`` (outer L3 ``l3``) for
    GSOSplitter ``sp``; ``recorded``: the gso_size pcapgro merge recorded
    (or 0); ``flow_cls``: the splitter's per-flow record class.  Returns
    the segment Packets, or None when this module does not cut it (the
    caller passes it, "tunnel"), or Pass.RECORD_LENGTHS when only the
    record's original length makes it a super-frame and that length is
    beyond GSO_MAX_SIZE (damage: a mutated original length of 4 GiB once
    gave 3 million segments of nothing)."""
    data = pkt.data
    t = locate(data, l3)
    if t is None:
        return None
    kind, tun_off, off, et, csum_at = t
    end = pkt.orig_len - sp._fcs
    inner = (ipv4 if et == ETH_P_IP else ipv6).parse(data, off, end)
    if type(inner) is Pass or inner.proto != 6:
        return None
    big = end - l3.l3off > sp.cfg.mtu
    if big and inner.l4off + inner.l4len < end:
        if end - l3.l3off > ipv4.GSO_MAX_SIZE:
            return Pass.RECORD_LENGTHS      # no skb GSO is handed is that long
        inner.l4len = end - inner.l4off                   # GSO_PARTIAL
    r = tcp.parse(data, inner.l4off, inner.l4len)
    if type(r) is Pass:
        return None
    thl, flags = r
    sport, dport = struct.unpack_from("!HH", data, inner.l4off)
    key = (sp.section, pkt.iface, kind, inner.src, inner.pdst, sport, dport)
    if flags & tcp.SYN:
        m = tcp.syn_mss(data, inner.l4off, thl)
        if m:
            sp.flows.setdefault(key, flow_cls()).syn_mss = m
    P = inner.l4len - thl
    got = _mss(sp, l3, inner, thl, key, recorded)
    if got is None or P <= got[0] or flags & (tcp.SYN | tcp.RST):
        return None
    if not big and got[1] is SizeSource.MTU:
        return None                     # fits: not a super-frame
    mss, src = got
    udp = kind in ("vxlan", "geneve")
    first = inner.l4off + thl + min(mss, P)        # the longest segment's wire bytes
    if (first - l3.l3off - (0 if l3.family == 4 else 40) > 0xFFFF
            or (udp and first - tun_off > 0xFFFF)):
        return None                     # an outer length field would overflow
    if sp._rec is not None and not sp._fcs:
        # the record path: the compiled segmenter writes the same bytes
        return sp._emit_raw(pkt, inner, thl, 6, mss, key, sport, dport, "tcp", src, next_ts,
                            cseg.tunnel_outer(l3, tun_off, csum_at, udp))
    res = tcp.segment(data, inner, thl, mss, sp.cfg.fixed_id)
    if res is None:
        return None
    frames, ncut = res
    fixed = []
    for k, (d, ol, ok) in enumerate(frames):
        f = bytearray(d)
        _fix_outer(f, ol, l3, tun_off, csum_at, k, ok, udp)
        fixed.append((bytes(f), ol, ok))
    return sp._emit(pkt, (fixed, ncut), key, inner, sport, dport, "tcp", src, mss, next_ts)
