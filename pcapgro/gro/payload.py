"""An aggregate's payload: where its bytes are and what they sum to.

What skb_gro_receive keeps as frags of the head skb, pcapgro keeps as
entries of ``Agg.pkts`` (see :class:`pcapgro.gro.seg.Agg`); the payload sums
let the written checksum be computed without summing the bytes again
(RFC 1071 / RFC 1624 arithmetic, mod 0xFFFF).
"""

from operator import itemgetter

from ..checksum import batch_sums, ones_sum

__all__ = ["Run", "run_payloads", "block_psum", "equal_len_sums", "run_psum", "payloads",
           "left_out", "payload_sum", "join_sums"]


class Run:
    """Records of a pcap chunk merged on the fast path, kept in place.

    Attributes:
        chunk: the RecordChunk they are records of.
        xs:    their indices in it (list or range), in order.
        ps, pe: lists: the chunk's payload start and end offset of each
               record (bytes into ``chunk.mv``).
        psum:  list: the chunk's payload sum of each record (or None).
        L:     payload bytes of each record (all equal; never cut by the
               snaplen).

    Nothing here refers to engine state, so no reference cycle keeps a
    chunk alive.
    """

    __slots__ = ("chunk", "xs", "ps", "pe", "psum", "L")

    def __init__(self, chunk, xs, ps, pe, psum, L):
        self.chunk = chunk
        self.xs = xs
        self.ps = ps
        self.pe = pe
        self.psum = psum
        self.L = L


def run_payloads(run):
    """memoryviews of the payloads of Run ``run``, in order."""
    mv = run.chunk.mv
    ps, pe = run.ps, run.pe
    return [mv[ps[x]:pe[x]] for x in run.xs]


def block_psum(psum, xs, L):
    """The payload sum (mod 0xFFFF) of records ``xs`` joined, each of ``L``
    bytes, from their sums (list ``psum``); None when one has none."""
    if len(xs) == 1:
        return psum[xs[0]]
    vals = itemgetter(*xs)(psum) if type(xs) is not range else psum[xs.start:xs.stop]
    if None in vals:
        return None
    return equal_len_sums(vals, L)


def equal_len_sums(vals, L):
    """The sum (mod 0xFFFF) of payloads of ``L`` bytes each joined, from
    their sums ``vals``: with L odd every second one starts at an odd
    offset and counts byte-swapped (x 256), as in :func:`join_sums`."""
    if L & 1:
        return (sum(vals[0::2]) + 256 * sum(vals[1::2])) % 0xFFFF
    return sum(vals) % 0xFFFF


def run_psum(run):
    """The payload sum of Run ``run``'s payloads joined, a record without a
    sum (its checksum field held the pseudo-header seed) summed from its
    bytes."""
    mv, ps, pe, psum = run.chunk.mv, run.ps, run.pe, run.psum
    vals = [psum[x] if psum[x] is not None else ones_sum(bytes(mv[ps[x]:pe[x]]))
            for x in run.xs]
    return equal_len_sums(vals, run.L)


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
        t = type(p)
        if t is Run:
            out += run_payloads(p)
            lens.append(len(p.xs) * p.L)
            continue
        if t is bytes:
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
        t = type(p)
        if t is Run:
            left += len(p.xs) * p.L
        elif t is bytes:
            left += len(p)
        else:
            left += len(p.data) - o
    return left


def payload_sum(parts):
    """One's-complement sum (mod 0xFFFF) of the concatenated ``parts``."""
    joined = b"".join(parts)
    if len(joined) < 4096:
        return ones_sum(joined)
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
