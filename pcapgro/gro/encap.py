"""What every tunnel shares: the inner level's receive and the aggregate's
completion through both levels.

Mirrors the parts of the kernel's tunnel GRO that are the same for VXLAN,
Geneve, GRE and IP-in-IP (Linux 6.18): the encap_mark (one tunnel level
only: a second one is passed), the inner EtherType's handler found in the
offload table (gro_find_receive_by_type, eth_gro_receive for an inner
Ethernet header), the inner packet's flush flag OR-ed with the outer's, and
napi_gro_complete running every level's gro_complete: outer IP length and
header checksum, UDP length and checksum (udp4_gro_complete: the
pseudo-header seed when it was nonzero), the GRE checksum left as the first
packet's (gre_gro_complete does not touch it), inner IP and inner L4 as for
a plain packet.  The tunnel modules (:mod:`pcapgro.gro.udp_tunnel`,
:mod:`pcapgro.gro.gre`, :mod:`pcapgro.gro.ipip`) call these.
"""

import struct

from ..checksum import fold, ones_sum
from ..linklayer import LINKTYPE_ETHERNET, network_layer
from .flush import Pass
from .offload import inet_offload, l3_offload, packet_offload
from .payload import left_out, payload_sum, payloads
from .seg import Outer, Seg

__all__ = ["inner_receive", "inner_ethernet", "complete_levels", "outer_id"]

_u32 = struct.Struct("!I").unpack_from


def outer_id(seg):
    """The bytes of an outer Seg ``seg`` that say "same tunnel" at the IP
    level: IPv4 protocol and addresses (inet_gro_receive), IPv6 version,
    flow label, next header, addresses and extension headers
    (ipv6_gro_receive)."""
    d = seg.pkt.data
    o = seg.l3off
    if seg.family == 4:
        return bytes(d[o + 9:o + 10]) + bytes(d[o + 12:o + 20])
    return seg.key[2].to_bytes(4, "big") + bytes(seg.key[3])


def inner_ethernet(napi, seg, mac):
    """The inner Ethernet header at ``mac`` of outer Seg ``seg``
    (eth_gro_receive): ``(l3off, ethertype)`` of the inner IP header, or a
    Pass reason (cut short; EtherType without a handler; in-band VLAN tags
    with ``vlan_gro`` off)."""
    d = seg.pkt.data
    if len(d) < mac + 14:
        return Pass.TRUNCATED
    off, et, vlan = network_layer(LINKTYPE_ETHERNET, memoryview(d)[mac:])
    if off is None or packet_offload(et) is None:
        return Pass.TUNNEL_INNER
    if vlan and not napi.cfg.vlan_gro:
        return Pass.NO_HANDLER
    return mac + off, et


def inner_receive(napi, seg, kind, et, l3off, same, mac=None, csum_at=None):
    """The inner packet of outer Seg ``seg`` (a ``kind`` tunnel) parsed by
    EtherType ``et``'s handler from ``l3off`` on.

    Args:
        napi:    the NAPI instance (its config: nested UDP tunnels).
        seg:     the outer Seg, its L4 fields the tunnel header's.
        kind:    tunnel kind (:class:`pcapgro.gro.seg.Outer`).
        et:      inner EtherType (0x0800 / 0x86dd).
        l3off:   inner IP header offset, bytes.
        same:    bytes of the tunnel header that must be equal within a
                 flow (UDP ports and checksum zero-ness, VNI, GRE key...).
        mac:     inner Ethernet header offset, or None.
        csum_at: outer checksum field to rewrite at completion, or None.

    Returns:
        the inner Seg (``outer`` set, key over both levels, ``l3len`` the
        outer datagram's, ``flush_l3`` of both levels), or a Pass reason.
    """
    if seg.outer is not None:
        return Pass.TUNNEL_NESTED
    inner = packet_offload(et).gro_receive(seg.pkt, l3off, 0)
    if type(inner) is not Seg:
        return inner
    l4 = inet_offload(inner.proto)
    if l4.tunnel is not None:
        # encap_mark is set: a second tunnel level is not merged
        inner.outer = _ENCAP_MARK
        r = l4.tunnel(napi, inner)
        if r is not inner:
            return Pass.TUNNEL_NESTED if type(r) is Seg else r
    o = Outer()
    o.kind, o.family, o.l3off = kind, seg.family, seg.l3off
    o.tun_off = None if kind in _IPXIP else seg.l4off
    o.inner_mac, o.csum_at = mac, csum_at
    o.tosttl, o.df, o.ipid = seg.tosttl, seg.df, seg.ipid
    d = seg.pkt.data
    inner.outer = o
    inner.vlan = seg.vlan
    inner.l3len = seg.l3len
    if seg.flush_l3:
        # the outer level flagged the packet flush (NAPI_GRO_CB(skb)->flush
        # is one flag for all levels): tcp4/udp4_gro_receive skip the inner
        # checksum ("Don't bother verifying checksum if we're going to flush
        # anyway"), so a bad one completes its flow's aggregate as any
        # flushed packet does instead of passing ahead of it (seen on 6.18)
        inner.flush_l3 = True
        inner.cblock = None
    head = bytes(d[:seg.l3off]) + outer_id(seg) + same
    if mac is not None:
        head += bytes(d[mac:l3off])
    inner.key = (inner.key[0], head) + inner.key[2:]
    return inner


_IPXIP = ("ipip", "sit", "ip4ip6", "ip6ip6")
# what ``Seg.outer`` holds while the inner level's own tunnel callback is
# asked (it only checks that the mark is set)
_ENCAP_MARK = Outer()


def _outer_checksum(napi, o, hdr, d, tlen, psum, cut):
    """Write the outer checksum of tunnel level ``o`` into ``hdr``: UDP
    (nonzero): the outer pseudo-header seed (``--csum kernel``, as
    udp4_gro_complete / udp6_gro_complete leave it) or valid; GRE (C bit):
    the first packet's (kernel) or valid over the GRE header and all that
    follows.  ``tlen``: bytes from the tunnel header to the end; ``psum``:
    the payload's sum."""
    at = o.csum_at
    if at is None:
        return
    udp = o.kind in ("vxlan", "geneve")
    if napi.cfg.csum == "kernel" or cut:
        if udp:
            c = fold(l3_offload(o.family).pseudo_sum(d, o.l3off, 17, tlen))
            hdr[at:at + 2] = c.to_bytes(2, "big")
        return
    hdr[at:at + 2] = b"\0\0"
    s = ones_sum(bytes(hdr[o.tun_off:])) + psum
    if udp:
        s += l3_offload(o.family).pseudo_sum(d, o.l3off, 17, tlen)
    c = (~fold(s)) & 0xFFFF
    hdr[at:at + 2] = (c or (0xFFFF if udp else 0)).to_bytes(2, "big")


def complete_levels(napi, agg):
    """The headers (bytes) and payload parts of tunnelled aggregate ``agg``
    completed through both levels (napi_gro_complete -> inet/ipv6 ->
    udp/gre/ipip -> [eth] -> inet/ipv6 -> tcp/udp gro_complete): every
    length and checksum of both levels rewritten.  Returns ``(hdr, parts,
    cut)``; ``cut``: the snaplen cut a segment (payload contiguous up to it,
    checksums the seeds)."""
    head = agg.head
    o = head.outer
    d = head.pkt.data
    hdr = bytearray(d[:head.pay])
    olen = agg.size - 4 * head.vlan                      # outer L3 length
    l3_offload(o.family).gro_complete(hdr, o.l3off, olen)
    tlen = olen - ((o.tun_off or o.l3off) - o.l3off)
    if o.kind in ("vxlan", "geneve"):
        hdr[o.tun_off + 4:o.tun_off + 6] = tlen.to_bytes(2, "big")
    l3len = olen - (head.l3off - o.l3off)
    l3 = l3_offload(head.family)
    l3.gro_complete(hdr, head.l3off, l3len)
    l4 = inet_offload(head.proto)
    l4len = l3len - (head.l4off - head.l3off)
    l4.gro_complete(hdr, agg, head.l4off, l4len)
    at = head.l4off + l4.csum_at
    pseudo = l3.pseudo_sum(d, head.l3off, head.proto, l4len)
    parts, plens, cut = payloads(agg)
    if cut:
        napi.stats.note_cut(left_out(agg, len(plens)))
    psum = 0
    if napi.cfg.csum == "kernel" or cut:
        hdr[at:at + 2] = fold(pseudo).to_bytes(2, "big")
    else:
        psum = payload_sum(parts)
        hdr[at:at + 2] = b"\0\0"
        c = (~fold(pseudo + ones_sum(bytes(hdr[head.l4off:])) + psum)) & 0xFFFF
        hdr[at:at + 2] = (c or l4.csum_zero).to_bytes(2, "big")
    _outer_checksum(napi, o, hdr, d, tlen, psum, cut)
    return bytes(hdr), parts, cut
