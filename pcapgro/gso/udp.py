"""UDP segmentation (UDP GSO / USO, SKB_GSO_UDP_L4).

Mirrors net/ipv4/udp_offload.c __udp_gso_segment (Linux 6.18): datagram k
carries payload bytes [k*gso_size, (k+1)*gso_size) (the last the
remainder); UDP length := 8 + its payload; checksum recomputed on every
datagram, a computed 0 written as 0xFFFF; IPv4 ID base + k (UDP never sets
FIXEDID), IPv4 header checksum / IPv6 payload length as for TCP.
"""

import struct

from ..checksum import batch_sums, fold, pseudo_sum_v4, pseudo_sum_v6

__all__ = ["segment"]

_u16 = struct.Struct("!H")


def segment(data, l3, gso_size):
    """Cut one UDP super-datagram into datagrams.

    Args:
        data:     captured bytes of the super-datagram (UDP header captured).
        l3:       its :class:`~pcapgro.gso.ipv4.L3`.
        gso_size: payload bytes per datagram; the payload is larger, or
                  (length fix-up, one datagram) any size up to it.
    Returns:
        ``(frames, ncut)`` as :func:`pcapgro.gso.tcp.segment` (datagrams
        whose payload was not all captured keep the pseudo-header seed in
        their checksum field), or None when a datagram would not fit the
        IP length field.
    """
    l4off = l3.l4off
    poff = l4off + 8
    P = l3.l4len - 8
    g = gso_size
    n = max(1, (P + g - 1) // g)       # a length fix-up: one segment
    lens = [g] * (n - 1)
    lens.append(P - g * (n - 1))
    l4lens = [8 + L for L in lens]
    l3hdrs = l3.seg_headers(l4lens, False)
    if l3hdrs is None:
        return None
    cap_pay = min(len(data), l4off + l3.l4len) - poff
    m = n if cap_pay >= P else max(cap_pay, 0) // g
    mv = memoryview(data)
    sums = [0] if P == 0 else batch_sums(
        [mv[poff + k * g:poff + k * g + lens[k]] for k in range(m)])
    uh = bytearray(data[l4off:poff])
    hs0 = _u16.unpack_from(uh, 0)[0] + _u16.unpack_from(uh, 2)[0]
    if l3.family == 4:
        ps0 = pseudo_sum_v4(l3.src, l3.pdst, 17, 0)
    else:
        ps0 = pseudo_sum_v6(l3.src, l3.pdst, 17, 0)
    l2 = data[:l3.l3off]
    hl = len(l3hdrs[0])
    frames = []
    append = frames.append
    pack16 = _u16.pack_into
    for k in range(n):
        ul = l4lens[k]
        pack16(uh, 4, ul)
        start = poff + k * g
        if k < m:
            c = (-(ps0 + hs0 + ul + ul + sums[k])) % 0xFFFF   # checksum(), s > 0
            pack16(uh, 6, c or 0xFFFF)
            pay = mv[start:start + lens[k]]
            ok = True
        else:
            pack16(uh, 6, fold(ps0 + ul))
            got = max(0, min(lens[k], cap_pay - k * g))
            pay = mv[start:start + got]
            ok = False
        append((b"".join((l2, l3hdrs[k], uh, pay)), l3.l3off + hl + ul, ok))
    return frames, n - m
