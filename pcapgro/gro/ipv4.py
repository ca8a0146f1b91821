"""IPv4 GRO: receive checks and completion fix-ups.

Mirrors net/ipv4/af_inet.c (inet_gro_receive, inet_gro_complete) of
Linux 6.18; registered for ETH_P_IP in the offload table.  The TTL/TOS/DF/ID
comparisons that 6.10+ evaluate from the L4 handler live in
:func:`pcapgro.gro.network.network_flush`.
"""

import struct

from ..checksum import ipv4_header_checksum, ones_sum
from ..linklayer import ETH_P_IP
from .flush import Pass
from .offload import PacketOffload, dev_add_offload, inet_offload
from .seg import Seg

__all__ = ["receive", "complete_header", "pseudo_sum", "IPPROTO_TCP", "IPPROTO_UDP"]

IPPROTO_TCP = 6
IPPROTO_UDP = 17

_hdr = struct.Struct("!BBHHHBBH")


def receive(pkt, l3off, vlan):
    """Parse the IPv4 header at ``pkt.data[l3off:]`` and the TCP or UDP
    header, applying inet_gro_receive's reject and flush rules.

    Args:
        pkt:   the Packet.
        l3off: offset of the IPv4 header, bytes.
        vlan:  number of in-band VLAN tags before it.

    Returns:
        a Seg (checksum not yet verified: ``cblock`` set when it must be), or
        a Pass reason when the packet is rejected before flow matching (it is
        then passed unchanged and overtakes its flow's held aggregate).
    """
    data = pkt.data
    n = len(data)
    if n < l3off + 20:
        return Pass.TRUNCATED
    proto = data[l3off + 9]
    # protocols with an IPv4 GRO handler in a 6.18 kernel: TCP, UDP, GRE,
    # IPIP, SIT, ESP; those without one in the offload table pass
    l4 = inet_offload(proto)
    if l4 is None:
        return Pass.NO_HANDLER
    vihl, tos, tot_len, ipid, frag, ttl, _p, _c = _hdr.unpack_from(data, l3off)
    if vihl != 0x45:
        return Pass.IP_OPTIONS
    if frag & 0x3FFF:
        return Pass.FRAGMENT
    if int.from_bytes(data[l3off:l3off + 20], "big") % 0xFFFF:
        return Pass.BAD_IP_CSUM
    present = pkt.orig_len - l3off      # bytes on the wire from the IP header
    seg = Seg()
    seg.pkt = pkt
    seg.family = 4
    seg.l3off = l3off
    seg.vlan = vlan
    seg.flush_l3 = tot_len != present or bool(frag & 0x8000)
    wire_end = l3off + present
    seg.proto = proto
    seg.partial = False
    seg.outer = None
    r = l4.parse(seg, data, l3off + 20, wire_end)
    if r is not None:
        return r
    seg.l3len = tot_len
    seg.end = min(l3off + tot_len, n) if not seg.flush_l3 else min(wire_end, n)
    seg.tosttl = (tos << 8) | ttl
    seg.df = frag & 0x4000
    seg.ipid = ipid
    seg.key = (pkt.iface, data[:l3off], data[l3off + 12:l3off + 20],
               data[seg.l4off:seg.l4off + 4], proto)
    if seg.flush_l3 or n < pkt.orig_len or (proto == IPPROTO_UDP and not seg.ucsum):
        seg.cblock = None
    else:
        # src, dst and the L4 segment are contiguous: one block to sum
        seg.cblock = data[l3off + 12:seg.end]
        seg.caddr = data[l3off + 12:l3off + 20]
        seg.cextra = proto + tot_len - 20
    return seg


def complete_header(hdr, l3off, l3len):
    """Rewrite the IPv4 header of an aggregate (inet_gro_complete).

    Args:
        hdr:   bytearray holding the aggregate's headers (modified in place).
        l3off: offset of the IPv4 header in ``hdr``.
        l3len: the aggregate's L3 length in bytes; above 65535 (BIG TCP)
               the total length field becomes 0 (iph_set_totlen).

    Returns:
        ``(hdr, 0)``: total length and header checksum updated, nothing
        inserted.
    """
    tot = l3len if l3len <= 0xFFFF else 0
    hdr[l3off + 2] = tot >> 8
    hdr[l3off + 3] = tot & 0xFF
    c = ipv4_header_checksum(bytes(hdr[l3off:l3off + 20]))
    hdr[l3off + 10] = c >> 8
    hdr[l3off + 11] = c & 0xFF
    return hdr, 0


def pseudo_sum(data, l3off, proto, l4len):
    """The unfolded one's-complement sum of the IPv4 pseudo-header
    (addresses, protocol, L4 length ``l4len`` bytes) of the header at
    ``data[l3off:]``."""
    return ones_sum(data[l3off + 12:l3off + 20]) + proto + l4len


def _hash_input(key):
    """The bytes of an IPv4 flow key the flow hash covers: addresses, ports."""
    return key[2] + key[3]


dev_add_offload(ETH_P_IP, PacketOffload("ipv4", 4, receive, complete_header, pseudo_sum,
                                        _hash_input))
