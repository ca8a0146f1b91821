"""IPv6 for GSO: parse header and extension headers, write each segment's.

Mirrors net/ipv6/ip6_offload.c ipv6_gso_segment (Linux 6.18) and
include/net/ipv6.h ipv6_hopopt_jumbo_remove (5.19+): Hop-by-Hop, Routing
and Destination Options headers are copied to every segment, except a BIG
TCP Hop-by-Hop header (8 bytes, Jumbo Payload option first, next header
TCP), which is removed; payload length := segment L3 length - 40.
"""

import struct

from .ipv4 import GSO_MAX_SIZE, L3
from .reasons import Pass

__all__ = ["parse", "seg_headers"]

_u16 = struct.Struct("!H")
_u32 = struct.Struct("!I").unpack_from

NEXTHDR_HOP = 0
NEXTHDR_ROUTING = 43
NEXTHDR_FRAGMENT = 44
NEXTHDR_DEST = 60
IPV6_TLV_JUMBO = 0xC2
_EXT = (NEXTHDR_HOP, NEXTHDR_ROUTING, NEXTHDR_DEST)


def _has_jumbo(data, off, hl):
    """True when the options header at data[off:off+hl] holds a Jumbo
    Payload option (TLV walk, RFC 8200 4.2)."""
    i = off + 2
    end = off + hl
    while i < end:
        t = data[i]
        if t == 0:          # Pad1
            i += 1
            continue
        if i + 1 >= end:
            return False
        if t == IPV6_TLV_JUMBO:
            return True
        i += 2 + data[i + 1]
    return False


def parse(data, l3off, orig_len):
    """Parse the IPv6 header and extension headers at ``data[l3off:]``.

    Args:
        data:     captured bytes of the frame.
        l3off:    offset of the IPv6 header in bytes.
        orig_len: original frame length in bytes (payload length 0 with or
                  without a Jumbo option means: up to the Jumbo length, or
                  to the end of the original frame).
    Returns:
        an :class:`~pcapgro.gso.ipv4.L3` (``hdr`` = fixed header +
        extension headers to copy, jumbo HBH removed), or a :class:`Pass`
        reason (TRUNCATED, BAD_HEADER, FRAGMENT, EXT_HEADER, BAD_LENGTH;
        RECORD_LENGTHS: a length-0 / jumbo datagram beyond GSO_MAX_SIZE).
        Never raises.
    """
    n = len(data)
    if n < l3off + 40:
        return Pass.TRUNCATED
    if data[l3off] >> 4 != 6:
        return Pass.BAD_HEADER
    plen = _u16.unpack_from(data, l3off + 4)[0]
    hop = _jumbo_hop(data, l3off, plen)
    if type(hop) is Pass:
        return hop
    nh, off, fixed, jumbo = hop
    ext_start = off
    ext = _walk_ext(data, nh, off, data[l3off + 24:l3off + 40])
    if type(ext) is Pass:
        return ext
    nh, off, pdst = ext
    if plen:
        end = l3off + 40 + plen
    elif jumbo is not None:
        end = l3off + 40 + jumbo
    else:
        end = orig_len
    if not plen and end - l3off > GSO_MAX_SIZE:
        return Pass.RECORD_LENGTHS
    if end > orig_len or end < off:
        return Pass.BAD_LENGTH
    r = L3()
    r.family = 6
    r.l3off = l3off
    r.hdr = fixed + data[ext_start:off]
    r.l4off = off
    r.proto = nh
    r.l4len = end - off
    r.src = data[l3off + 8:l3off + 24]
    r.pdst = pdst
    r.ipid = 0
    r.len0 = not plen
    return r


def _jumbo_hop(data, l3off, plen):
    """ipv6_hopopt_jumbo_remove: ``(next header, offset after it, fixed
    header to copy, jumbo length or None)`` -- a Hop-by-Hop header of
    exactly the jumbo shape (payload length 0) is removed, anything else
    stays for :func:`_walk_ext` -- or a Pass reason (TRUNCATED, EXT_HEADER)."""
    nh = data[l3off + 6]
    off = l3off + 40
    fixed = data[l3off:l3off + 40]
    if nh == NEXTHDR_HOP and plen == 0:
        if len(data) < off + 8:
            return Pass.TRUNCATED
        if data[off + 1] == 0 and data[off + 2] == IPV6_TLV_JUMBO and data[off + 3] == 4:
            if data[off] != 6:
                return Pass.EXT_HEADER
            return 6, off + 8, fixed[:6] + b"\x06" + fixed[7:], _u32(data, off + 4)[0]
    return nh, off, fixed, None


def _walk_ext(data, nh, off, pdst):
    """The Hop-by-Hop (first only), Routing and Destination Options headers
    from ``off`` (next header ``nh``): ``(upper-layer protocol, its
    offset, final destination)`` (``pdst`` unless a Routing header with
    segments left names another), or a Pass reason (TRUNCATED,
    EXT_HEADER: a later Hop-by-Hop or a jumbo option; FRAGMENT)."""
    n = len(data)
    first = True
    while nh in _EXT:
        if nh == NEXTHDR_HOP and not first:
            return Pass.EXT_HEADER
        if n < off + 2:
            return Pass.TRUNCATED
        hl = (data[off + 1] + 1) << 3
        if n < off + hl:
            return Pass.TRUNCATED
        if nh != NEXTHDR_ROUTING:
            if _has_jumbo(data, off, hl):
                return Pass.EXT_HEADER
        elif data[off + 3]:             # segments left: final destination
            rtype = data[off + 2]
            if rtype == 0 and hl >= 24:
                pdst = data[off + hl - 16:off + hl]
            elif rtype in (2, 4) and hl >= 24:
                pdst = data[off + 8:off + 24]
        nh = data[off]
        off += hl
        first = False
    if nh == NEXTHDR_FRAGMENT:
        return Pass.FRAGMENT
    return nh, off, pdst


def seg_headers(l3, l4lens):
    """ipv6_gso_segment's per-segment fix-up: payload length.

    Returns a list of bytes (one L3 header block per segment), or None when
    a segment's payload length would exceed 65535.
    """
    h = bytearray(l3.hdr)
    ext = len(h) - 40
    out = []
    append = out.append
    pack = _u16.pack_into
    for L in l4lens:
        plen = ext + L
        if plen > 0xFFFF:
            return None
        pack(h, 4, plen)
        append(bytes(h))
    return out
