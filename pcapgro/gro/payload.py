"""An aggregate's payload: where its bytes are and what they sum to.

What skb_gro_receive keeps as frags of the head skb, pcapgro keeps as
entries of ``Agg.pkts`` (see :class:`pcapgro.gro.seg.Agg`); the payload sums
let the written checksum be computed without summing the bytes again
(RFC 1071 / RFC 1624 arithmetic, mod 0xFFFF).
"""

import os

from ..checksum import batch_sums, ones_sum

try:  # the compiled one's-complement sum (pcapgro/_native.c sum16; optional)
    from .._native import sum16 as _sum16
except ImportError:          # pragma: no cover - depends on the build
    _sum16 = None

__all__ = ["equal_len_sums", "payloads", "left_out", "payload_sum", "join_sums"]


def equal_len_sums(vals, L):
    """The sum (mod 0xFFFF) of payloads of ``L`` bytes each joined, from
    their sums ``vals``: with L odd every second one starts at an odd
    offset and counts byte-swapped (x 256), as in :func:`join_sums`."""
    if L & 1:
        return (sum(vals[0::2]) + 256 * sum(vals[1::2])) % 0xFFFF
    return sum(vals) % 0xFFFF


def payloads(agg):
    """The captured payload bytes of every merged segment of ``agg``
    (memoryviews or bytes, to be joined), in order; the payload length of
    each entry of ``agg.pkts``; and whether the snaplen cut one: payload is
    then contiguous only up to and including the first cut segment, so
    later ones are left out."""
    out = []
    lens = []
    app = out.append
    for p, o in zip(agg.pkts, agg.pays):
        if type(p) is bytes:
            app(p)
            lens.append(len(p))
            continue
        d = p.data
        app(memoryview(d)[o:])       # no copy: the caller joins them
        lens.append(len(d) - o)
        if len(d) < p.orig_len:
            return out, lens, True
    return out, lens, False


def left_out(agg, n):
    """Captured payload bytes (int) of the entries of ``agg.pkts`` from
    index ``n`` on: those after a segment cut by the snaplen, which the
    written aggregate leaves out (see :func:`payloads`)."""
    left = 0
    for p, o in zip(agg.pkts[n:], agg.pays[n:]):
        if type(p) is bytes:
            left += len(p)
        else:
            left += len(p.data) - o
    return left


def payload_sum(parts):
    """One's-complement sum (mod 0xFFFF) of the concatenated ``parts``:
    short ones in Python, long ones compiled (``_native.sum16``, ~5 us for
    64 KiB) or, without the extension or with ``PCAPGRO_NO_C``, by numpy
    (~55 us; its import alone costs a merge ~0.1 s of CPU and 12 MiB, which
    a compiled run paid only for the aggregates it handed over at the end
    of input: UDP ones, whose sums are always summed from the bytes)."""
    joined = b"".join(parts)
    if len(joined) < 4096:
        return ones_sum(joined)
    if _sum16 is not None and not os.environ.get("PCAPGRO_NO_C"):
        return _sum16(joined)
    return batch_sums([joined])[0]


def join_sums(ps, lens):
    """The sum of concatenated payloads from their sums ``ps`` and lengths
    ``lens``: a payload that starts at an odd offset of the concatenation
    contributes its sum byte-swapped (x 256 mod 0xFFFF)."""
    if not any(map((1).__and__, lens)):
        return sum(ps) % 0xFFFF
    odd = 0
    s = 0
    for x, n in zip(ps, lens):
        s += x * 256 if odd else x
        odd ^= n & 1
    return s % 0xFFFF
