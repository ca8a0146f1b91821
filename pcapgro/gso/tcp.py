"""TCP segmentation (TSO emulation).

Mirrors net/ipv4/tcp_offload.c tcp_gso_segment (Linux 6.18, no AccECN) on
top of net/core/skbuff.c skb_segment: segment k carries payload bytes
[k*mss, (k+1)*mss) (the last the remainder), seq = seq + k*mss; FIN and PSH
only on the last segment, CWR only on the first; ack, window, urgent
pointer, options (timestamps included) and every other flag copied; a
valid checksum on each segment (software GSO computes it; an offloading
NIC writes the same value on the wire).
"""

import struct

from ..checksum import batch_sums, fold, pseudo_sum_v4, pseudo_sum_v6
from .reasons import Pass

__all__ = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR",
           "parse", "syn_mss", "segment"]

FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80
_FIN_PSH = FIN | PSH

_u32 = struct.Struct("!I")
_u16 = struct.Struct("!H")


def parse(data, l4off, l4len):
    """Check the TCP header at ``data[l4off:]``.

    Args:
        data:  captured bytes.
        l4off: offset of the TCP header in bytes.
        l4len: TCP header + payload length in bytes (from the L3 length).
    Returns:
        ``(header_len, flags)`` in bytes / the flags byte, or a Pass reason
        (TRUNCATED: header not captured; BAD_HEADER: data offset < 5;
        BAD_LENGTH: header longer than the L3 length says).
    """
    n = len(data)
    if n < l4off + 20:
        return Pass.TRUNCATED
    thl = (data[l4off + 12] >> 4) << 2
    if thl < 20:
        return Pass.BAD_HEADER
    if l4len < thl:
        return Pass.BAD_LENGTH
    if n < l4off + thl:
        return Pass.TRUNCATED
    return thl, data[l4off + 13]


def syn_mss(data, l4off, thl):
    """The MSS option value (bytes) of the TCP header at ``data[l4off:]``
    of length ``thl`` bytes, or None when it has none (option walk as
    tcp_parse_options)."""
    i = l4off + 20
    end = l4off + thl
    while i < end:
        kind = data[i]
        if kind == 0:
            return None
        if kind == 1:
            i += 1
            continue
        if i + 1 >= end:
            return None
        size = data[i + 1]
        if size < 2:
            return None
        if kind == 2 and size == 4 and i + 4 <= end:
            return _u16.unpack_from(data, i + 2)[0]
        i += size
    return None


def segment(data, l3, thl, mss, fixed_id):
    """Cut one TCP super-frame into segments.

    Args:
        data:     captured bytes of the super-frame.
        l3:       its :class:`~pcapgro.gso.ipv4.L3`.
        thl:      TCP header length in bytes.
        mss:      payload bytes per segment (gso_size), >= 1; payload >
                  mss, or any payload (0 too) <= mss for a length fix-up
                  (one segment: lengths and checksums filled in).
        fixed_id: keep the IPv4 ID on every segment.
    Returns:
        ``(frames, ncut)``: frames = list of ``(bytes, orig_len, csum_valid)``
        per segment (bytes = link-layer header + L3 + TCP header + the
        captured part of its payload; orig_len = its full length in bytes;
        csum_valid False = payload not all captured, the checksum field
        holds the pseudo-header seed, as CHECKSUM_PARTIAL leaves it); ncut =
        number of such segments.  None when a segment would not fit the IP
        length field.
    """
    l4off = l3.l4off
    poff = l4off + thl
    P = l3.l4len - thl
    lens = _seg_lens(P, mss)
    n = len(lens)
    l4lens = [thl + L for L in lens]
    l3hdrs = l3.seg_headers(l4lens, fixed_id)
    if l3hdrs is None:
        return None
    cap_pay = min(len(data), l4off + l3.l4len) - poff
    m = n if cap_pay >= P else max(cap_pay, 0) // mss     # segments captured whole
    mv = memoryview(data)
    sums = [0] if P == 0 else batch_sums(
        [mv[poff + k * mss:poff + k * mss + lens[k]] for k in range(m)])
    frames = _frames(data, l3, thl, mss, lens, l4lens, l3hdrs, m, cap_pay, sums)
    return frames, n - m


def _seg_lens(P, mss):
    """Payload bytes of each segment (list of int) of a ``P``-byte payload
    cut every ``mss`` bytes: one segment (of ``P``, 0 too) when ``P <= mss``."""
    n = max(1, (P + mss - 1) // mss)       # a length fix-up: one segment
    lens = [mss] * (n - 1)
    lens.append(P - mss * (n - 1))
    return lens


def _tcp_template(data, l3, thl):
    """The super-frame's TCP header with sequence number, flags and checksum
    zeroed (bytearray), its sequence number and flags, the pseudo-header sum
    without the length (``ps0``) and ``ps0`` plus the template's sum."""
    l4off = l3.l4off
    th = bytearray(data[l4off:l4off + thl])
    seq0 = _u32.unpack_from(th, 4)[0]
    flags0 = th[13]
    th[4:8] = b"\0\0\0\0"
    th[13] = 0
    th[16:18] = b"\0\0"
    hs0 = int.from_bytes(th, "big") % 0xFFFF
    if l3.family == 4:
        ps0 = pseudo_sum_v4(l3.src, l3.pdst, 6, 0)
    else:
        ps0 = pseudo_sum_v6(l3.src, l3.pdst, 6, 0)
    return th, seq0, flags0, ps0, ps0 + hs0


def _frames(data, l3, thl, mss, lens, l4lens, l3hdrs, m, cap_pay, sums):
    """tcp_gso_segment's per-segment fix-up (seq, FIN/PSH on the last only,
    CWR on the first only, checksum) of each segment: the list of
    ``(bytes, orig_len, csum_valid)`` (see :func:`segment`); the first
    ``m`` captured whole (``sums``: their payloads' sums), the others cut
    (``cap_pay`` payload bytes captured in all) with the seed."""
    th, seq0, flags0, ps0, base = _tcp_template(data, l3, thl)
    poff = l3.l4off + thl
    mv = memoryview(data)
    l2 = data[:l3.l3off]
    hl = len(l3hdrs[0])
    frames = []
    append = frames.append
    pack32 = _u32.pack_into
    pack16 = _u16.pack_into
    n = len(lens)
    last = n - 1
    for k in range(n):
        flags = flags0
        if k < last:
            flags &= ~_FIN_PSH
        if k:
            flags &= ~CWR
        seq = (seq0 + k * mss) & 0xFFFFFFFF
        tl = l4lens[k]
        pack32(th, 4, seq)
        th[13] = flags
        start = poff + k * mss
        if k < m:
            s = base + tl + (seq >> 16) + (seq & 0xFFFF) + flags + sums[k]
            pack16(th, 16, (-s) % 0xFFFF)   # == checksum(s) for s > 0
            pay = mv[start:start + lens[k]]
            ok = True
        else:
            pack16(th, 16, fold(ps0 + tl))       # the seed (CHECKSUM_PARTIAL)
            got = max(0, min(lens[k], cap_pay - k * mss))
            pay = mv[start:start + got]
            ok = False
        append((b"".join((l2, l3hdrs[k], th, pay)), l3.l3off + hl + tl, ok))
    return frames
