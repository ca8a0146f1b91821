"""The compiled segmenter (``pcapgro._gso``, ``pcapgro/_gso.c``) and the
classic-pcap record path of ``split`` that uses it.

When split reads classic pcap and writes classic pcap in the same byte
order and resolution (the pipeline sets ``GSOSplitter.raw_out``), the
reader's chunks of records go in whole (``RecordChunk``) and out go
:class:`~pcapgro.record.RawRecords`: records passed unchanged are copied
verbatim, and the segments of a super-frame are laid out by the compiled
segmenter straight into the output buffer (no Packet object per segment).
The decisions (which packets are split, the segment size, timestamps,
statistics) are the Python engine's (:mod:`pcapgro.gso.engine`,
:mod:`pcapgro.gso.tunnel`: the reference), made again in C by the
compiled chunk loop (:func:`chunk_run`) for the records it takes (plain
Ethernet / IPv4 / TCP and tunnelled frames); the C code
writes the same bytes as :func:`pcapgro.gso.tcp.segment` /
:func:`pcapgro.gso.udp.segment` (tests/test_gso_cseg.py runs both), and,
for a TCP super-frame inside a tunnel (VXLAN, Geneve, GRE, IPIP, SIT,
IP4IP6, IP6IP6, GSO_PARTIAL; ``outer``: :func:`tunnel_outer`), the same
bytes as :func:`pcapgro.gso.tunnel.split`'s Python segmenter, each
segment's outer headers fixed too (tests/test_gso_tunnels_cseg.py).

The extension is optional (built by ``setup.py`` when a C compiler is
there); ``PCAPGRO_NO_C=1`` in the environment turns it off: then the
Python segmenter runs (same output, slower).
"""

import os
import struct

from ..checksum import pseudo_sum_v4, pseudo_sum_v6
from ..record import RawRecords
from .reasons import Pass, SizeSource

NATIVE_BO = "<" if __import__("sys").byteorder == "little" else ">"

try:
    from .. import _gso
except ImportError:         # built without a C compiler
    _gso = None

__all__ = ["available", "segment_into", "tunnel_outer", "segment_tcp4", "RecordOut", "chunk_run",
           "chunk_records", "chunk_packets"]


def available():
    """True when the compiled segmenter is built and not turned off by
    ``PCAPGRO_NO_C``."""
    return _gso is not None and not os.environ.get("PCAPGRO_NO_C")


def segment_into(out, data, l3, l4hdr_len, proto, mss, fixed_id, ts, step, mul, swap,
                 outer=None):
    """Append the segments of one super-frame to ``out`` as pcap records.

    Args:
        out:       bytearray, the records laid out so far.
        data:      captured bytes of the super-frame.
        l3:        its :class:`~pcapgro.gso.ipv4.L3`.
        l4hdr_len: TCP header length in bytes (UDP: 8).
        proto:     6 or 17.
        mss:       payload bytes per segment (gso_size).
        fixed_id:  TCP: keep the IPv4 ID on every segment.
        ts, step:  ns; segment k is stamped ``ts + k * step``.
        mul:       ns per timestamp fraction unit of the records (1000: us).
        swap:      record headers in the non-native byte order.
        outer:     None, or for a super-frame inside a tunnel (``l3`` its
                   inner L3) :func:`tunnel_outer`'s tuple: every segment's
                   outer headers are fixed as :mod:`pcapgro.gso.tunnel` does.
    Returns:
        ``(n, ncut, maxcap)``: segments written, of those not all captured
        (checksum seed left), largest captured length in bytes.
    Raises:
        ValueError: a segment does not fit its IP length field.
    """
    if l3.family == 4:
        ps = pseudo_sum_v4(l3.src, l3.pdst, proto, 0)
    else:
        ps = pseudo_sum_v6(l3.src, l3.pdst, proto, 0)
    return _gso.segment(out, data, l3.l3off, l3.hdr, l3.family, l3.ipid, fixed_id, l3.l4off,
                        l4hdr_len, proto, l3.l4len - l4hdr_len, mss, ps, ts, step, mul, swap,
                        outer)


def tunnel_outer(l3, tun_off, csum_at, udp):
    """The ``outer`` argument of :func:`segment_into` for a tunnel whose
    outer L3 is ``l3``: ``tun_off`` the offset of its UDP / GRE header
    (None: IP-in-IP), ``csum_at`` that of the outer UDP / GRE checksum to
    recompute (None: none, or a UDP checksum of 0), ``udp``: VXLAN or
    Geneve (the UDP length is set per segment)."""
    ps = 0
    if udp:
        ps = (pseudo_sum_v4 if l3.family == 4 else pseudo_sum_v6)(l3.src, l3.pdst, 17, 0)
    return (l3.l3off, len(l3.hdr), l3.family, l3.ipid, -1 if tun_off is None else tun_off,
            -1 if csum_at is None else csum_at, udp, ps)


def segment_tcp4(out, frame, mss, fixed_id, psum, ts, step, mul, swap):
    """:func:`segment_into` for an untagged Ethernet / IPv4 (no options) /
    TCP frame captured in full (``frame``: bytes-like, its TCP header
    length read from it); ``psum``: pseudo-header sum without the
    length."""
    thl = (frame[46] >> 4) << 2
    ident = (frame[18] << 8) | frame[19]
    tot = (frame[16] << 8) | frame[17]
    return _gso.segment(out, frame, 14, frame[14:34], 4, ident, fixed_id, 34, thl, 6,
                        tot - 20 - thl, mss, psum, ts, step, mul, swap)


# _gso.segment itself (see pcapgro/_gso.c), for callers that have the header
# fields at hand; None without the extension
segment = _gso.segment if _gso is not None else None


class RecordOut:
    """The output records of one chunk, laid out in the input's format.

    Attributes:
        buf:    bytearray of records (16-byte header + frame each).
        n:      records in ``buf``.
        maxcap: largest captured length among them, bytes.
        mul:    ns per timestamp fraction unit (1000 for microsecond pcap).
        swap:   True when the headers are in the non-native byte order.
        ts:     time (ns) of the last record written.
    """

    __slots__ = ("buf", "n", "maxcap", "mul", "swap", "ts", "_hdr")

    def __init__(self, byteorder, mul, swap):
        self.buf = bytearray()
        self.n = 0
        self.maxcap = 0
        self.mul = mul
        self.swap = swap
        self.ts = 0
        self._hdr = struct.Struct(byteorder + "IIII").pack

    def packet(self, p):
        """Append Packet ``p`` as one record."""
        d = p.data
        n = len(d)
        ts = p.ts
        self.buf += self._hdr(ts // 1000000000, ts % 1000000000 // self.mul, n, p.orig_len)
        self.buf += d
        self.n += 1
        self.ts = ts
        if n > self.maxcap:
            self.maxcap = n

    def record(self, mv, start, cap, ts):
        """Append the record whose data (``cap`` bytes) starts at ``start``
        of memoryview ``mv`` (its 16-byte header before it), verbatim."""
        self.buf += mv[start - 16:start + cap]
        self.n += 1
        self.ts = ts
        if cap > self.maxcap:
            self.maxcap = cap

    def run(self, mv, a, b, n, maxcap, ts):
        """Append ``n`` verbatim records, bytes ``a..b`` of memoryview
        ``mv``, the largest ``maxcap`` bytes captured, the last at ``ts``."""
        self.buf += mv[a:b]
        self.n += n
        self.ts = ts
        if maxcap > self.maxcap:
            self.maxcap = maxcap

    def take(self):
        """The records so far as a RawRecords (None when there are none);
        starts a new buffer."""
        if not self.n:
            return None
        r = RawRecords(self.buf, self.n, self.maxcap, self.ts)
        self.buf = bytearray()
        self.n = 0
        self.maxcap = 0
        return r


# split_chunk's size source codes (pcapgro/_gso.c, enum SRC_*)
_SOURCES = (SizeSource.OPTION, SizeSource.SYN, SizeSource.OWN_SYN, SizeSource.LARGEST,
            SizeSource.MTU)
# split_chunk's pass reasons of tunnelled records (pcapgro/_gso.c, enum PASS_*)
_PASSES = (Pass.SMALL, Pass.NO_HANDLER, Pass.TUNNEL, Pass.RECORD_LENGTHS, Pass.TRUNCATED,
           Pass.BAD_LENGTH)


def chunk_run(lb, cfg, flows, section, flow_cls, count):
    """``f(i, rec, tail=-2) -> end``: the compiled loop ``_gso.split_chunk``
    over RecordChunk ``lb`` from record ``i``, its output records appended
    to RecordOut ``rec``, its statistics handed to ``count(npassed, nseg,
    ncut, aggs, passes)`` (see ``GSOSplitter._count_chunk``); ``cfg``:
    the GSOConfig, ``flows`` the splitter's flow dict (``flow_cls()``
    makes a new entry); ``tail``: the time (ns) of the record after the
    chunk's last (-1: none, the end of the input; -2: not known yet, the
    loop stops before a last record it would cut).  ``f.one(rec, i,
    tail)``: record ``i`` alone, its next record's time ``tail``
    (-1: none): True when the compiled loop took it."""
    run = _gso.split_chunk
    buf, recs, swap = lb.buf, lb.recs, lb.byteorder != NATIVE_BO
    if type(recs) is not list:
        recs = list(recs)
    mul, mtu, complete, mss = lb.mul, cfg.mtu, cfg.complete_csum, cfg.mss or 0
    gso = -1 if cfg.gso_size is None else cfg.gso_size
    explicit, fixed, rate = cfg.mtu_explicit, cfg.fixed_id, cfg.link_rate
    sec = section
    src = _SOURCES
    why = _PASSES

    def g(i, rec, tail, recs):
        end, nrec, maxcap, ts, npassed, nseg, ncut, aggs, passes = run(
            rec.buf, buf, recs, i, swap, mul, mtu, complete, mss, explicit, fixed, rate,
            flows, sec, flow_cls, gso, tail)
        if nrec:
            rec.n += nrec
            rec.ts = ts
            if maxcap > rec.maxcap:
                rec.maxcap = maxcap
            count(npassed, nseg, ncut, [(k, n, src[h], m) for k, n, h, m in aggs],
                  [(why[j], c) for j, c in enumerate(passes) if c])
        return end

    def f(i, rec, tail=-2):
        return g(i, rec, tail, recs)

    def one(rec, i, tail):
        return g(0, rec, tail, [recs[i]]) == 1
    # (no reference back to f: no cycle keeping the chunk alive until a
    # garbage collection)
    f.one = one
    f.fmt = (swap, mul)
    return f


def chunk_records(lb):
    """``f(i) -> (data offset, captured length, original length, time ns)``
    of record ``i`` of RecordChunk ``lb`` (16-byte record headers), read
    from its header (what ``lb.columns()`` gives for every record, without
    numpy: the compiled loop reads the headers itself)."""
    hdr = struct.Struct(lb.byteorder + "IIII").unpack_from
    buf, recs, mul = lb.buf, lb.recs, lb.mul

    def f(i):
        r = recs[i]
        sec, frac, cap, orig = hdr(buf, r)
        return r + 16, cap, orig, sec * 1000000000 + frac * mul
    return f


def chunk_packets(lb):
    """The Packets of RecordChunk or EpbChunk ``lb`` (the path without raw
    output)."""
    if lb.epb:
        return lb.packets()     # pcapng EPBs (PcapngReader.batches(lazy=True))
    lb.columns()
    return [lb.packet(i) for i in range(len(lb))]
