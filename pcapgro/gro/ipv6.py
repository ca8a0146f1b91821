"""IPv6 GRO: receive checks and completion fix-ups.

Mirrors net/ipv6/ip6_offload.c (ipv6_gro_receive, ipv6_gro_complete) of
Linux 6.18: Hop-by-Hop (0), Routing (43) and Destination Options (60)
headers are walked and must be identical within a flow; a Fragment header
(44) or anything else without a GRO handler is rejected.  Aggregates whose
payload length exceeds 65535 (BIG TCP) get an 8-byte Hop-by-Hop header with
a Jumbo Payload option, as 6.18 does (7.0 drops it).  Registered for
ETH_P_IPV6 in the offload table.
"""

import struct

from ..checksum import ones_sum
from ..linklayer import ETH_P_IPV6
from .flush import Pass
from .offload import PacketOffload, dev_add_offload, inet_offload
from .seg import Seg

__all__ = ["receive", "complete_header", "pseudo_sum"]

IPPROTO_UDP = 17
_EXTHDRS = (0, 43, 60)
_FRAG = 44

_u32 = struct.Struct("!I").unpack_from
_u16 = struct.Struct("!H").unpack_from


def receive(pkt, l3off, vlan):
    """Parse the IPv6 header (and walkable extension headers) at
    ``pkt.data[l3off:]`` and the TCP or UDP header.

    Returns:
        a Seg, or a Pass reason when rejected before flow matching.
    """
    data = pkt.data
    n = len(data)
    if n < l3off + 40:
        return Pass.TRUNCATED
    first = _u32(data, l3off)[0]
    plen = _u16(data, l3off + 4)[0]
    nh = data[l3off + 6]
    off = l3off + 40
    while nh in _EXTHDRS:
        if n < off + 8:
            return Pass.TRUNCATED
        nh, hlen = data[off], (data[off + 1] + 1) << 3
        off += hlen
    if nh == _FRAG:
        return Pass.FRAGMENT
    l4 = inet_offload(nh)
    if l4 is None:
        return Pass.NO_HANDLER if off == l3off + 40 else Pass.EXT_HEADER
    if n < off:
        return Pass.TRUNCATED
    present = pkt.orig_len - l3off
    seg = Seg()
    seg.pkt = pkt
    seg.family = 6
    seg.l3off = l3off
    seg.vlan = vlan
    seg.flush_l3 = plen != present - 40
    wire_end = l3off + present
    seg.proto = nh
    seg.partial = False
    seg.outer = None
    r = l4.parse(seg, data, off, wire_end)
    if r is not None:
        return r
    seg.l3len = 40 + plen
    seg.end = min(l3off + 40 + plen, n) if not seg.flush_l3 else min(wire_end, n)
    seg.tosttl = (((first >> 20) & 0xFF) << 8) | data[l3off + 7]
    seg.df = 0
    seg.ipid = None
    seg.key = (pkt.iface, data[:l3off], first & 0xF00FFFFF,
               data[l3off + 6:l3off + 7] + data[l3off + 8:off],
               data[off:off + 4], nh)
    if seg.flush_l3 or n < pkt.orig_len or (nh == IPPROTO_UDP and not seg.ucsum):
        seg.cblock = None
    else:
        tcplen = l3off + 40 + plen - off
        seg.caddr = data[l3off + 8:l3off + 40]
        if off == l3off + 40:
            seg.cblock = data[l3off + 8:seg.end]
        else:
            seg.cblock = seg.caddr + data[off:seg.end]
        seg.cextra = nh + (tcplen >> 16) + (tcplen & 0xFFFF)
    return seg


def complete_header(hdr, l3off, l3len):
    """Rewrite the IPv6 header of an aggregate (ipv6_gro_complete).

    Args:
        hdr:   bytearray of the aggregate's headers (modified in place).
        l3off: offset of the IPv6 header in ``hdr``.
        l3len: L3 length of the aggregate in bytes (40 + payload).

    Returns:
        ``(hdr, inserted)``: ``inserted`` is 8 when a Hop-by-Hop jumbo header
        was inserted after the fixed header (payload length > 65535), else 0.
    """
    plen = l3len - 40
    if plen <= 0xFFFF:
        hdr[l3off + 4] = plen >> 8
        hdr[l3off + 5] = plen & 0xFF
        return hdr, 0
    nh = hdr[l3off + 6]
    hbh = bytes((nh, 0, 0xC2, 4)) + (plen + 8).to_bytes(4, "big")
    hdr[l3off + 4] = 0
    hdr[l3off + 5] = 0
    hdr[l3off + 6] = 0
    hdr[l3off + 40:l3off + 40] = hbh
    return hdr, 8


def pseudo_sum(data, l3off, proto, l4len):
    """The unfolded one's-complement sum of the IPv6 pseudo-header
    (addresses, upper-layer length ``l4len`` bytes as 32 bits, next header
    ``proto``) of the header at ``data[l3off:]`` (RFC 8200 8.1)."""
    return ones_sum(data[l3off + 8:l3off + 40]) + proto + (l4len >> 16) + (l4len & 0xFFFF)


def _hash_input(key):
    """The bytes of an IPv6 flow key the flow hash covers: addresses, ports."""
    return key[3][1:33] + key[4]


dev_add_offload(ETH_P_IPV6, PacketOffload("ipv6", 6, receive, complete_header, pseudo_sum,
                                          _hash_input))
