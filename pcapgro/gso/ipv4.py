"""IPv4 for GSO: parse the super-frame's header, write each segment's.

Mirrors net/ipv4/af_inet.c inet_gso_segment (Linux 6.18): every segment
gets a copy of the whole IPv4 header (options included), its own total
length, ID = base + i (unless fixed-ID) and a recomputed header checksum.
"""

import struct

from .reasons import Pass

__all__ = ["L3", "parse", "GSO_MAX_SIZE"]

# bytes: the largest skb GSO can be handed (include/linux/netdevice.h
# GSO_MAX_SIZE, 8 x GSO_LEGACY_MAX_SIZE, BIG TCP).  A length-0 IP header
# whose record claims a longer datagram has contradicting lengths.
GSO_MAX_SIZE = 524280

_hdr = struct.Struct("!BBHHH")     # ver/ihl, tos, tot_len, id, frag
_u16 = struct.Struct("!H")


class L3:
    """The network-layer part of a super-frame, as segments will copy it.

    Attributes:
        family: 4 or 6.
        l3off:  offset in bytes of the IP header in the frame.
        hdr:    bytes of the L3 header block every segment starts with (IPv4
                header with options; IPv6 header + extension headers, a BIG
                TCP jumbo Hop-by-Hop header already removed).
        l4off:  offset in bytes of the transport header in the frame.
        proto:  transport protocol number.
        l4len:  bytes of transport header + payload of the super-frame (from
                the length field, or from the original frame length when the
                field is 0).
        src, pdst: raw source address and pseudo-header destination (IPv6:
                the final destination when a Routing header has segments
                left, RFC 8200 8.1).
        ipid:   IPv4 identification (IPv6: 0).
        len0:   True when the length field was 0 (TSO / BIG TCP capture):
                the length was taken from the original frame length.
    """

    __slots__ = ("family", "l3off", "hdr", "l4off", "proto", "l4len", "src", "pdst", "ipid",
                 "len0")

    def seg_headers(self, l4lens, fixed_id):
        """The L3 header (bytes) of each segment.

        Args:
            l4lens:   transport length in bytes of each segment.
            fixed_id: IPv4: keep the ID on every segment (FIXEDID).
        Returns:
            list of bytes, one per segment, or None when a segment's length
            does not fit the 16-bit length field.
        """
        if self.family == 4:
            return _v4_headers(self, l4lens, fixed_id)
        from .ipv6 import seg_headers
        return seg_headers(self, l4lens)


def parse(data, l3off, orig_len):
    """Parse the IPv4 header at ``data[l3off:]``.

    Args:
        data:     captured bytes of the frame.
        l3off:    offset of the IPv4 header in bytes.
        orig_len: original frame length in bytes (total length 0 -- TSO on
                  Windows/VMware, BIG TCP (Linux 6.3+) -- means the datagram
                  runs to the end of the original frame).
    Returns:
        an :class:`L3`, or a :class:`Pass` reason (TRUNCATED, BAD_HEADER,
        FRAGMENT, BAD_LENGTH; RECORD_LENGTHS: total length 0 and an original
        length beyond GSO_MAX_SIZE).  Never raises.
    """
    n = len(data)
    if n < l3off + 20:
        return Pass.TRUNCATED
    vihl, _tos, tot_len, ident, frag = _hdr.unpack_from(data, l3off)
    if vihl >> 4 != 4:
        return Pass.BAD_HEADER
    ihl = (vihl & 15) << 2
    if ihl < 20:
        return Pass.BAD_HEADER
    if n < l3off + ihl:
        return Pass.TRUNCATED
    if frag & 0x3FFF:
        return Pass.FRAGMENT
    wire = orig_len - l3off
    if tot_len == 0:
        if wire > GSO_MAX_SIZE:
            return Pass.RECORD_LENGTHS
        l3len = wire
    elif tot_len < ihl or tot_len > wire:
        return Pass.BAD_LENGTH
    else:
        l3len = tot_len
    if l3len < ihl:
        return Pass.BAD_LENGTH
    r = L3()
    r.family = 4
    r.l3off = l3off
    r.hdr = data[l3off:l3off + ihl]
    r.l4off = l3off + ihl
    r.proto = data[l3off + 9]
    r.l4len = l3len - ihl
    r.src = data[l3off + 12:l3off + 16]
    r.pdst = data[l3off + 16:l3off + 20]
    r.ipid = ident
    r.len0 = tot_len == 0
    return r


def _v4_headers(l3, l4lens, fixed_id):
    """inet_gso_segment's per-segment fix-up: tot_len, id, check."""
    h = bytearray(l3.hdr)
    hl = len(h)
    h[2:6] = b"\0\0\0\0"
    h[10:12] = b"\0\0"
    s0 = int.from_bytes(h, "big") % 0xFFFF
    base = l3.ipid
    out = []
    append = out.append
    pack = _u16.pack_into
    for i, L in enumerate(l4lens):
        tot = hl + L
        if tot > 0xFFFF:
            return None
        ident = base if fixed_id else (base + i) & 0xFFFF
        pack(h, 2, tot)
        pack(h, 4, ident)
        pack(h, 10, (-(s0 + tot + ident)) % 0xFFFF)   # checksum(), sum > 0
        append(bytes(h))
    return out
