"""Giving back the original packets of pcapgro's own aggregates.

When ``pcapgro merge`` writes pcapng, every aggregate (and every held
packet whose timestamp it moved) carries, besides a readable comment, a
second ``opt_comment`` that records how to give back its original packets
exactly::

    pcapgro-restore v1 i=<n> t=<ns> b=<type> f=<flags> h=<len>,<diffs> s=<di>,<dt>,<len>,<diffs>;... m=<row>:<items>;... k=<crc> x=<n>,...

* ``i``: the first packet's input index (0-based packet number), ``t``
  its original timestamp (ns since the epoch), ``b`` (optional) its block
  type when it was not an EPB (3 = Simple Packet Block, 2 = obsolete
  Packet Block: merge writes it as an EPB), ``f`` (optional) its
  original epb_flags word.
* A record with only ``i`` and ``t`` marks a packet written unchanged but
  out of its input position or time: a held packet that merged nothing, or
  a packet that overtook held ones.
* ``h``: the first packet's payload length and how its original headers
  differ from the aggregate's (written) headers.
* ``s``: for every further packet: input index minus ``i``, timestamp
  minus ``t`` (ns), payload length, and how its headers differ from the
  first packet's original ones.
* ``<diffs>``: runs ``offset:hex`` joined by ``/`` (empty when identical);
  ``*hex`` when the header lengths differ (the whole original header).
* ``m`` (optional; absent when no further packet had any, e.g. always for
  classic pcap input): the pcapng metadata of further packets, one entry
  per packet that had some, ``<row>:<items>`` joined by ``;``.  ``<row>``
  is the packet's 1-based position in ``s``; ``<items>``, joined by ``,``,
  in this order: ``b<type>`` its block type when not an EPB (3 = SPB),
  ``f<flags>`` its epb_flags word, ``c<text>`` each comment (UTF-8,
  percent-encoded: every byte but ``A-Z a-z 0-9 _ . - ~`` as ``%XX``),
  ``o<code>.<hex>`` each other option (its value as stored, in the
  section's byte order).  The first packet's metadata is the aggregate's
  own (its comments before pcapgro's, its options, ``f``).  Readers that
  predate ``m`` ignore it (they give back the packets without their
  metadata); records without ``m`` restore further packets with none.

* ``k`` (full records; absent in those of earlier versions): CRC-32
  (zlib) of the record's text before `` k=`` and of the written headers
  the diffs apply to (:func:`record_crc`): a record or header changed after
  merge does not fit.  Whatever a record gives back must also look like a
  packet GRO took (:func:`_check_fit`), with or without ``k``.
* ``x`` (optional, after ``k``): a non-packet block (NRB, ISB, custom) merge
  wrote just before this packet while GRO held packets across it goes
  before input index ``i + n`` (one ``n`` per such block, in order;
  :class:`BlockClaims`).

An IDB whose snaplen an aggregate could exceed (the pcapng writer raises it
at close) carries the comment ``pcapgro-restore v1 snaplen=<bytes>``;
restore writes the IDB with that snaplen again (:func:`note_snaplen`).

A capture merge already annotated (merged again): an input packet's
comments, pcapgro's included, are part of the packet.  merge appends its
own comments after them, and gives every packet that carries pcapgro
comments a record (a short one when it is written unchanged in place), so
the last pcapgro comment of a packet is always the last merge's
(:func:`level`).  ``split --restore`` undoes that merge only: each packet
given back keeps its own older records and comments, so a second
``split --restore`` gives back the capture before the first merge.

Why a comment and not a custom option: a comment is what Wireshark shows
(``frame.comment``) and editcap keeps, it needs no IANA Private Enterprise
Number, and it stays readable; custom options (2988/2989) need a PEN.  The
payload bytes themselves are in the aggregate, so the record only holds
what differs per packet (IPv4 ID, lengths, checksums, sequence numbers,
flags, timestamps).
"""

import os
import re
import sys
import zlib
from collections import deque

from .capture import _stream
from .capture.pcapng import epb_packet, ns_to_ts
from .checksum import LazyNumpy, ipv4_header_ok
from .linklayer import ETH_P_IP, network_layer
from .record import (BLOCK_EPB, BLOCK_PB, BLOCK_SPB, EPB_FLAG_TSO, HostRecords, Interface,
                     Packet, PacketMeta, Section)

__all__ = ["TAG", "encode", "decode", "restore", "Restorer", "RecordMismatch"]

np = LazyNumpy(globals())      # numpy, imported when merge first diffs headers

TAG = "pcapgro-restore v1 "
AGG_TAG = "pcapgro: GRO aggregate"
MOVED_TAG = "pcapgro: held by GRO"


def _diffs(orig, ref):
    """Runs of ``orig`` bytes that differ from ``ref`` (same length) as
    'off:hex/off:hex'; '*hex' when the lengths differ."""
    if len(orig) != len(ref):
        return "*" + orig.hex()
    a = np.frombuffer(orig, dtype=np.uint8)
    b = np.frombuffer(ref, dtype=np.uint8)
    idx = np.flatnonzero(a != b)
    if not len(idx):
        return ""
    runs = []
    start = prev = int(idx[0])
    for i in idx[1:].tolist():
        if i != prev + 1:
            runs.append(f"{start}:{orig[start:prev + 1].hex()}")
            start = i
        prev = i
    runs.append(f"{start}:{orig[start:prev + 1].hex()}")
    return "/".join(runs)


def _diffs_many(hdrs, ref):
    """``[_diffs(h, ref) for h in hdrs]`` for headers all as long as ``ref``,
    in a few numpy operations over the whole aggregate (one call per
    segment cost ~15 us; merge --annotate spent most of its time there)."""
    k, n = len(hdrs), len(ref)
    if not n or not k:
        return [""] * k
    joined = b"".join(hdrs)
    d = (np.frombuffer(joined, dtype=np.uint8).reshape(k, n)
         != np.frombuffer(ref, dtype=np.uint8))
    pad = np.zeros((k, 1), dtype=np.int8)
    edges = np.diff(np.concatenate([pad, d.view(np.int8), pad], axis=1), axis=1)
    rows, starts = np.nonzero(edges == 1)      # row-major: runs in order
    ends = np.nonzero(edges == -1)[1]
    out = [[] for _ in range(k)]
    hx = joined.hex()
    w = 2 * n
    for r, a, e in zip(rows.tolist(), starts.tolist(), ends.tolist()):
        base = r * w
        out[r].append(f"{a}:{hx[base + 2 * a:base + 2 * e]}")
    return ["/".join(x) for x in out]


_DIFFS = re.compile(r"[0-9]+:(?:[0-9a-f][0-9a-f])+(?:/[0-9]+:(?:[0-9a-f][0-9a-f])+)*")


def _apply(ref, diffs):
    """``ref`` (bytes) with ``diffs`` (see :func:`_diffs`) applied.

    Raises:
        ValueError: ``diffs`` is not what :func:`_diffs` writes (bad hex or
        offsets, runs out of order or past the end of ``ref``)."""
    if not diffs:
        return ref
    if diffs[0] == "*":
        return _hex(diffs[1:])
    if not _DIFFS.fullmatch(diffs):
        raise ValueError(f"bad header diffs {diffs[:40]!r}")
    b = bytearray(ref)
    n = len(b)
    end = 0
    for run in diffs.split("/"):
        off, hx = run.split(":")
        off = int(off)
        if off < end:
            raise ValueError(f"header diffs out of order at {run[:40]!r}")
        v = bytes.fromhex(hx)
        end = off + len(v)
        if end > n:
            raise ValueError(f"header diff {run[:40]!r} runs past the {n}-byte header")
        b[off:end] = v
    return bytes(b)


def encode(written_hdr, pkts, pays, idxs, flags=None):
    """The restore record (str) of an aggregate.

    Args:
        written_hdr: the aggregate's headers as written (bytes).
        pkts:  the original Packets, first one first (their ``data`` from
               offset ``pays[i]`` on is payload, all captured in full; the
               ``meta`` of the further ones goes into ``m=``).
        pays:  payload offset of each packet, bytes.
        idxs:  input index of each packet.
        flags: the first packet's original epb_flags, or None.
    The first packet's block type, when not an EPB, is recorded (``b=``).
    """
    p0 = pkts[0]
    t0, i0 = p0.ts, idxs[0]
    rest = list(zip(pkts[1:], pays[1:], idxs[1:]))
    return encode_rows(written_hdr, p0, pays[0], i0, flags,
                       [p.data[:o] for p, o, _ in rest],
                       [p.ts - t0 for p, _, _ in rest],
                       [len(p.data) - o for p, o, _ in rest],
                       [i - i0 for _, _, i in rest],
                       [(k, p.meta) for k, (p, _, _) in enumerate(rest, 1)
                        if p.meta is not None])


def encode_rows(written_hdr, p0, pay0, i0, flags, hdrs, dts, lens, dis, metas=None,
                rows0=None, metas0=None):
    """:func:`encode` from the first Packet ``p0`` (payload from offset
    ``pay0``, input index ``i0``) and, for each later segment, its header
    bytes (bytes or memoryview), timestamp offset from ``p0`` (ns), payload
    length (bytes) and input index offset from ``i0`` (lists, one entry per
    segment): the engine calls it without making a Packet per segment.
    ``metas``: None or a list of ``(row, PacketMeta)`` for the later
    segments that carry metadata, ``row`` their 1-based position in the
    lists, ascending (the ``m=`` field, which counts the ``rows0`` rows
    too; empty metadata is left out).
    The first packet's block type, when not an EPB, is recorded (``b=``).
    ``rows0``: None or the encoded rows (str) of segments before those in
    the lists (the compiled loop's, handed over with the aggregate);
    ``metas0``: None or the ``m=`` entries (str, ``row:items`` joined by
    ';') of those segments."""
    h0 = p0.data[:pay0]
    parts = [f"{TAG}i={i0} t={p0.ts}" + block_field(p0.meta)]
    if flags is not None:
        parts.append(f"f={flags}")
    parts.append(f"h={len(p0.data) - pay0},{_diff1(h0, written_hdr)}")
    rows = _rows(h0, hdrs, dts, lens, dis)
    n0 = 0                  # rows before those of the lists
    if rows0:
        n0 = rows0.count(";") + 1
        rows = rows0 + ";" + rows if rows else rows0
    parts.append("s=" + rows)
    m = [metas0] if metas0 else []
    if metas:
        for row, meta in metas:
            items = _meta_items(meta)
            if items:
                m.append(f"{row + n0}:{items}")
    if m:
        parts.append("m=" + ";".join(m))
    text = " ".join(parts)
    return f"{text} k={record_crc(text, written_hdr):08x}"


def record_crc(text, written_hdr):
    """The ``k=`` field of a full restore record: CRC-32 (zlib, IEEE 802.3)
    of the record's text before `` k=`` (UTF-8) followed by the headers the
    record's diffs apply to (the aggregate's headers as written, bytes).
    A record or header changed after merge no longer matches, so restore
    does not give back packets from it (counted ``unfit``)."""
    crc = zlib.crc32(text.encode("utf-8", "surrogateescape"))
    return zlib.crc32(written_hdr, crc)


_DIGITS = re.compile(r"[0-9]+")
_HEXDIGITS = re.compile(r"(?:[0-9a-f][0-9a-f])*")


def _uint(v, limit):
    """``v`` (str of ASCII digits) as an int below ``limit``.

    Raises:
        ValueError: anything else (sign, spaces, other digits, too large)."""
    if not _DIGITS.fullmatch(v) or int(v) >= limit:
        raise ValueError(f"bad number {v[:40]!r}")
    return int(v)


def _hex(v, empty=False):
    """``v`` (lowercase hex, even length; empty only when ``empty``) as bytes.

    Raises:
        ValueError: anything else."""
    if not _HEXDIGITS.fullmatch(v) or not (v or empty):
        raise ValueError(f"bad hex {v[:40]!r}")
    return bytes.fromhex(v)


# (", ended by REASON" since issue 21; earlier merges wrote none)
_GSO_SIZE = re.compile(r", gso_size ([0-9]{1,5})(?:, ended by [a-z0-9_]+)?$")


def recorded_gso_size(meta):
    """The gso_size (bytes, int) pcapgro merge recorded in the comment of an
    aggregate it wrote ("pcapgro: GRO aggregate (TCP) of N segments,
    gso_size M"; the latest merge's when there are several), or 0 when
    ``meta`` (PacketMeta or None) has none."""
    if meta is None:
        return 0
    for c in reversed(meta.comments):
        if c.startswith(AGG_TAG):
            m = _GSO_SIZE.search(c)
            return int(m.group(1)) if m else 0
    return 0


def block_field(meta):
    """`` b=<type>`` for a packet (its PacketMeta or None) stored in a
    Simple or obsolete Packet Block (merge writes it as an EPB, with its
    record), else ''."""
    return f" b={meta.block}" if meta is not None and meta.block != BLOCK_EPB else ""


def _meta_items(meta):
    """The ``m=`` items (str) of one packet's PacketMeta: ``b<type>``,
    ``f<flags>``, ``c<percent-encoded comment>``..., ``o<code>.<hex>``...
    joined by ',' ('' when it carries nothing)."""
    items = []
    if meta.block != BLOCK_EPB:
        items.append(f"b{meta.block}")
    if meta.flags is not None:
        items.append(f"f{meta.flags}")
    if meta.comments:
        # here: urllib.parse (and the ipaddress it imports) was ~2 ms of
        # every start-up, and only packets with comments need it
        from urllib.parse import quote
        for c in meta.comments:
            items.append("c" + quote(c.encode("utf-8", "surrogateescape"), safe=""))
    for code, v in meta.options:
        items.append(f"o{code}.{bytes(v).hex()}")
    return ",".join(items)


_OPT_AS_ITEM = (0, 1, 2)     # opt_endofopt; opt_comment -> c, epb_flags -> f
_OPT_LEN = {4: 8, 5: 8, 6: 4}   # epb_dropcount, epb_packetid, epb_queue (bytes)


def _meta_decode(items):
    """PacketMeta from :func:`_meta_items` output.

    Raises:
        ValueError: an item that :func:`_meta_items` cannot have written."""
    block, flags, comments, options = BLOCK_EPB, None, [], []
    seen = set()
    for it in items.split(","):
        k, v = it[:1], it[1:]
        if k in ("b", "f"):
            if k in seen:
                raise ValueError(f"item {k} twice")
            seen.add(k)
        if k == "b":
            block = _uint(v, 1 << 32)
            if block not in (BLOCK_SPB, BLOCK_PB):      # an EPB is written without b
                raise ValueError(f"bad block type {v[:12]!r}")
        elif k == "f":
            flags = _uint(v, 1 << 32)
        elif k == "c":
            from urllib.parse import quote, unquote_to_bytes
            b = unquote_to_bytes(v)
            if quote(b, safe="") != v:
                raise ValueError(f"bad comment encoding {v[:40]!r}")
            comments.append(b.decode("utf-8", "surrogateescape"))
        elif k == "o":
            code, dot, hx = v.partition(".")
            if not dot:
                raise ValueError(f"bad option item {it[:40]!r}")
            code, val = _uint(code, 1 << 16), _hex(hx, empty=True)
            if code in _OPT_AS_ITEM or len(val) > 0xFFFF or (
                    code in _OPT_LEN and len(val) != _OPT_LEN[code]):
                # end of options, comments and flags are never o items, and
                # a fixed-size option of another size is no option at all
                raise ValueError(f"bad option item {it[:40]!r}")
            options.append((code, val))
        else:
            raise ValueError(f"bad metadata item {it[:40]!r}")
    return PacketMeta(block=block, comments=comments, flags=flags, options=options)


def _rows_py(h0, hdrs, dts, lens, dis):
    """The ``s=`` body of a restore record: ``di,dt,len,diffs`` per segment
    (header diffs against the first packet's original header ``h0``),
    joined by ``;``.  The reference for the compiled
    ``_native.restore_rows`` (tests/test_restore_record.py)."""
    n0 = len(h0)
    diffs = iter(_diffs_many([h for h in hdrs if len(h) == n0], h0))
    return ";".join([
        f"{di},{dt},{n},{next(diffs) if len(h) == n0 else _diffs(bytes(h), h0)}"
        for h, dt, n, di in zip(hdrs, dts, lens, dis)])


def _pick_place():
    """The compiled placement (``pcapgro._restore.place``, see
    :meth:`Restorer._batch`), or None as for :func:`_pick_restore`."""
    if _pick_restore() is None:
        return None
    from ._restore import place
    _stream.keep_heap()     # chunk-sized blocks reused, not fresh pages each time
    return place


def _first(run):
    return run[0]


def _pick_rows():
    """The compiled row encoder (one C pass, no numpy or f-string per
    segment: annotated pcapng output spent ~40% of its time here) unless
    the extension is missing or ``PCAPGRO_NO_C`` is set."""
    if os.environ.get("PCAPGRO_NO_C"):
        return _rows_py
    try:
        from ._native import restore_rows
    except ImportError:      # pragma: no cover - depends on the build
        return _rows_py
    return restore_rows


_rows = _pick_rows()


def _pick_restore():
    """The compiled restore (``pcapgro/_restore.c``: the common kind of
    record laid out as pcap records, see :class:`Restorer`), or None when
    the extension is missing or ``PCAPGRO_NO_C`` is set."""
    if os.environ.get("PCAPGRO_NO_C"):
        return None
    try:
        from . import _restore
    except ImportError:      # pragma: no cover - depends on the build
        return None
    return _restore.restore


def _diff1(orig, ref):
    """:func:`_diffs` of one header through the row encoder (the compiled
    one skips numpy's per-call cost: ~100 us an aggregate)."""
    return _rows(ref, [orig], [0], [0], [0])[6:]      # after "0,0,0,"


# one s= entry: index offset, time offset (signed), payload length, diffs
_ROW = re.compile(r"([0-9]+),(-?[0-9]+),([0-9]+),([^,;]*)")
# restored timestamps: |t| < 2**64 s in ns (pcapng: 64-bit ticks of up to
# a second, plus a signed if_tsoffset); whether the output interface can
# hold one is checked per packet (Restorer)
_TS_END = (1 << 64) * 1_000_000_000
_SIGNED = re.compile(r"-?[0-9]+")


def _int(v, limit):
    """``v`` (str: ASCII digits, optionally after '-') as an int of
    magnitude below ``limit``.

    Raises:
        ValueError: anything else."""
    if not _SIGNED.fullmatch(v) or v.startswith("-0") or abs(int(v)) >= limit:
        raise ValueError(f"bad number {v[:40]!r}")
    return int(v)


def decode(text):
    """Parse a restore record.  Returns a dict with ``i`` (int), ``t``
    (int ns), ``f`` (int or None), ``h`` ((len, diffs) or None for a
    single packet), ``s`` (list of (di, dt, len, diffs), ``di`` > 0 and
    ascending), ``m`` (list of (row, PacketMeta), rows ascending, 1-based
    into ``s``), ``k`` ((CRC-32, the text it covers) or None: records of
    earlier versions have none), ``x`` (list of int: where the blocks
    written just ahead of this packet go, input index minus ``i``).
    Fields this version does not know are ignored (a later version may add
    some); the header diffs are checked when applied.

    Raises:
        ValueError: ``text`` is not a valid record (a field twice, a
        number that is not plain ASCII digits or out of range, indexes
        not ascending, ``s``/``m``/``f`` without ``h``, ...)."""
    if not text.startswith(TAG):
        raise ValueError("not a pcapgro restore record")
    out = {"f": None, "h": None, "s": [], "m": [], "b": None, "k": None, "x": []}
    seen = set()
    fields = text[len(TAG):].split(" ")
    for j, field in enumerate(fields):
        k, eq, v = field.partition("=")
        if not eq or k in seen or ("k" in seen and k != "x"):
            # after the checksum only x=, which merge may add once the
            # record is made (where blocks written ahead of it belong)
            raise ValueError(f"bad field {field[:40]!r}")
        seen.add(k)
        if k == "k":
            if len(v) != 8 or not _HEXDIGITS.fullmatch(v):
                raise ValueError(f"bad record checksum {v[:12]!r}")
            out["k"] = (int(v, 16), TAG + " ".join(fields[:j]))
        elif k == "x":
            out["x"] = [_int(x, 1 << 64) for x in v.split(",")]
        else:
            _decode_field(out, k, v, field)
    if "t" not in out or "i" not in out:
        raise ValueError("incomplete pcapgro restore record")
    if out["h"] is None and ("s" in seen or "m" in seen or "f" in seen):
        raise ValueError("segment fields in a single packet's record")
    if out["m"] and out["m"][-1][0] > len(out["s"]):
        raise ValueError("metadata for a packet the record does not have")
    return out


def _decode_field(out, k, v, field):
    """One field ``k=v`` (``field``) of a restore record into ``out`` (see
    :func:`decode`); a field this version does not know is ignored.

    Raises:
        ValueError: a bad value."""
    if k == "i":
        out["i"] = _uint(v, 1 << 64)
    elif k == "t":
        out["t"] = _int(v, _TS_END)
    elif k == "f":
        out["f"] = _uint(v, 1 << 32)
    elif k == "b":
        out["b"] = _uint(v, 1 << 32)
        if out["b"] not in (BLOCK_SPB, BLOCK_PB):
            raise ValueError(f"bad block type {v[:12]!r}")
    elif k == "h":
        n, comma, d = v.partition(",")
        if not comma:
            raise ValueError(f"bad field {field[:40]!r}")
        out["h"] = (_uint(n, 1 << 32), d)
    elif k == "s" and v:
        last = 0
        rows = out["s"]
        for item in v.split(";"):
            row = _ROW.fullmatch(item)
            if row is None:
                raise ValueError(f"bad segment entry {item[:40]!r}")
            di, dt, n, d = row.groups()
            di, n = int(di), int(n)
            if di <= last or di >= 1 << 64 or n >= 1 << 32:
                raise ValueError(f"bad segment entry {item[:40]!r} (indexes must "
                                 "ascend)")
            last = di
            rows.append((di, int(dt), n, d))
    elif k == "m":
        last = 0
        for item in v.split(";"):
            row, colon, items = item.partition(":")
            row = _uint(row, 1 << 32)
            if not colon or row <= last:
                raise ValueError(f"bad metadata entry {item[:40]!r}")
            last = row
            out["m"].append((row, _meta_decode(items)))


class RecordMismatch(ValueError):
    """A restore record that does not fit its packet (an edited capture:
    cut by a snaplen, chopped, changed) or is not a valid record.

    Attributes:
        idxs: the input indexes the record names (list of int, ascending),
              or None when it cannot be read that far.
    """

    def __init__(self, message, idxs=None):
        super().__init__(message)
        self.idxs = idxs


def payload_offset(linktype, data, tunnel=True):
    """Offset (bytes) of the TCP/UDP payload of ``data`` (a frame of link
    type ``linktype``): link layer, IPv4 header (its IHL) or IPv6 header and
    Hop-by-Hop / Routing / Destination Options headers, TCP data offset or
    the 8-byte UDP header; with ``tunnel``, one tunnel level is walked to the
    inner flow.  None when it has no such header in full."""
    t = _transport(linktype, data, tunnel)
    return None if t is None else t[3]


def _transport(linktype, data, tunnel=True):
    """``(l3off, ethertype, proto, payload offset)`` (offsets in bytes,
    proto 6 or 17) of the TCP/UDP packet in frame ``data``, or None (see
    :func:`payload_offset`)."""
    l3off, et, _ = network_layer(linktype, data)
    if l3off is None:
        return None
    return _l3_payload_offset(data, l3off, et, tunnel)


def _l3_payload_offset(data, l3off, et, outer):
    """:func:`payload_offset` from the IP header at ``l3off`` (EtherType
    ``et``); with ``outer``, one tunnel level (VXLAN, Geneve, GRE, IP-in-IP:
    :func:`pcapgro.gso.tunnel.locate`) is walked to the inner TCP flow."""
    n = len(data)
    if et == ETH_P_IP:
        if n < l3off + 20:
            return None
        off = l3off + ((data[l3off] & 0x0F) << 2)
        nh = data[l3off + 9]
    else:
        if n < l3off + 40:
            return None
        nh = data[l3off + 6]
        off = l3off + 40
        while nh in (0, 43, 60):
            if n < off + 8:
                return None
            nh, off = data[off], off + ((data[off + 1] + 1) << 3)
    if outer and nh in (4, 17, 41, 47):
        from .gso.tunnel import locate      # here: pcapgro.gso imports this module
        t = locate(data, _Where(nh, off))
        if t is not None:
            r = _l3_payload_offset(data, t[2], t[3], False)
            if r is not None:
                return r
    if nh == 6:
        if n < off + 20:
            return None
        off += (data[off + 12] >> 4) << 2
    elif nh == 17:
        off += 8
    else:
        return None
    return (l3off, et, nh, off) if off <= n else None


class _Where:
    """The two fields of an outer L3 that :func:`pcapgro.gso.tunnel.locate`
    reads: transport protocol and offset."""

    __slots__ = ("proto", "l4off")

    def __init__(self, proto, l4off):
        self.proto = proto
        self.l4off = l4off


def own_comment(c):
    """True when comment ``c`` (str) is one pcapgro writes: an aggregate
    note, a restore record (of any merge), a held-packet note."""
    return c.startswith(TAG) or c.startswith(AGG_TAG) or c.startswith(MOVED_TAG)


def carries_own(meta):
    """True when ``meta`` (PacketMeta or None) holds a comment pcapgro
    writes (the packet comes from a capture merge already annotated)."""
    return meta is not None and any(map(own_comment, meta.comments))


def level(comments):
    """Which of ``comments`` (list of str) the last merge wrote:
    ``(note, record)``, indexes into ``comments`` or None.

    merge appends its comments after a packet's own ones, and gives a
    record to every packet that already carries pcapgro comments (a merged
    capture merged again), so the last pcapgro comment is the last merge's:
    a record (with, just before it among pcapgro's comments, the aggregate
    note of a full record or a held-packet note of a short one), or an
    aggregate note alone (an aggregate without a record).  Older merges'
    comments are part of the packet."""
    k = len(comments) - 1
    while k >= 0 and not own_comment(comments[k]):
        k -= 1
    if k < 0:
        return None, None
    c = comments[k]
    if not c.startswith(TAG):
        return (k if c.startswith(AGG_TAG) else None), None
    note = AGG_TAG if " h=" in c else MOVED_TAG
    j = k - 1
    while j >= 0 and not own_comment(comments[j]):
        j -= 1
    return (j if j >= 0 and comments[j].startswith(note) else None), k


def strip_own(meta, tso_set):
    """``meta`` (PacketMeta or None) without pcapgro's comments (every
    merge's: :func:`own_comment`) and, when ``tso_set``, without the EPB
    flag bit 11 pcapgro set; None when nothing else is left.  What a frame
    forwarding sends carries (:mod:`pcapgro.forward`)."""
    if meta is None:
        return None
    return _without(meta, [c for c in meta.comments if not own_comment(c)], tso_set)


def _strip_level(meta, tso_set):
    """``meta`` without the comments the last merge wrote (:func:`level`;
    older merges' records stay: they belong to the packet given back) and,
    when ``tso_set``, without EPB flag bit 11; None when nothing is left."""
    if meta is None:
        return None
    drop = level(meta.comments)
    return _without(meta, [c for k, c in enumerate(meta.comments) if k not in drop],
                    tso_set)


def _without(meta, comments, tso_set):
    flags = meta.flags
    if tso_set and flags is not None:
        flags &= ~EPB_FLAG_TSO
        if not flags:
            flags = None
    if not comments and flags is None and not meta.options:
        return None
    return PacketMeta(block=meta.block, comments=comments, flags=flags,
                      options=list(meta.options))


def restore(pkt):
    """The original packets of ``pkt`` as a list of ``(input index,
    Packet)``, ascending, or None when it carries no restore record.

    A record is applied only when it fits the packet exactly: the packet
    captured in full (captured length = original length), its TCP/UDP
    payload exactly as long as the record's payload lengths added up, every
    header diff inside its header, every timestamp 0 <= t < 2**64 ns.

    Raises:
        RecordMismatch: the record is not valid or does not fit the packet
        (an edited capture); ``idxs`` says which input indexes it names.
    """
    meta = pkt.meta
    if meta is None or not meta.comments:
        return None
    k = level(meta.comments)[1]
    if k is None:
        return None
    rec = meta.comments[k]
    try:
        r = decode(rec)
    except ValueError as e:
        raise RecordMismatch(str(e)) from None
    i0, t0 = r["i"], r["t"]
    idxs = [i0] + [i0 + di for di, _, _, _ in r["s"]]
    try:
        return _restore(pkt, r)
    except ValueError as e:
        raise RecordMismatch(str(e), idxs) from None


def _as_block(meta, block):
    """``meta`` (PacketMeta or None) as stored in a block of type ``block``
    (the record's ``b=``: the first packet was a Simple or obsolete Packet
    Block, which merge had to write as an EPB); unchanged when None."""
    if block is None:
        return meta
    if meta is None:
        return PacketMeta(block=block)
    return PacketMeta(block=block, comments=list(meta.comments), flags=meta.flags,
                      options=list(meta.options))


def _restore(pkt, r):
    """:func:`restore` once record ``r`` (from :func:`decode`) is read.

    Raises:
        ValueError: it does not fit ``pkt``."""
    meta = pkt.meta
    if r["h"] is None:              # written unchanged, moved in time/order
        return [(r["i"], Packet(r["t"], pkt.data, pkt.orig_len, pkt.iface,
                                pkt.linktype, _as_block(_strip_level(meta, False), r["b"])))]
    data = pkt.data
    if len(data) != pkt.orig_len:
        raise ValueError(f"{len(data)} of {pkt.orig_len} bytes captured (cut by a "
                         "snaplen): the record's packets are not all there")
    n0, d0 = r["h"]
    total_pay = n0 + sum(n for _, _, n, _ in r["s"])
    # a tunnelled aggregate's payload starts after the inner TCP header; a
    # tunnel's datagrams merged as plain UDP (no tunnel socket) after the
    # outer UDP header: the record's payload total tells which
    tunnel = True
    hlen = payload_offset(pkt.linktype, data)
    if hlen is not None and total_pay != len(data) - hlen:
        plain = payload_offset(pkt.linktype, data, tunnel=False)
        if plain is not None and plain != hlen and total_pay == len(data) - plain:
            tunnel, hlen = False, plain
    if hlen is None:
        raise ValueError("no TCP/UDP header to restore from")
    if total_pay != len(data) - hlen:
        raise ValueError(f"the record's payloads add up to {total_pay} bytes, the "
                         f"packet carries {len(data) - hlen}")
    if r["k"] is not None:
        crc, text = r["k"]
        if record_crc(text, data[:hlen]) != crc:
            raise ValueError("the record's checksum (k=) does not match the record "
                             "and the packet's headers: changed after merge")
    h0 = _apply(data[:hlen], d0)
    pos = hlen + n0
    m0 = _as_block(_strip_level(meta, True), r["b"])
    if r["f"] is not None:
        m0 = m0 or PacketMeta()
        m0.flags = r["f"]
    i0, t0 = r["i"], r["t"]
    p0data = h0 + data[hlen:pos]
    _check_fit(pkt.linktype, p0data, len(h0), tunnel)
    out = [(i0, Packet(t0, p0data, len(p0data), pkt.iface, pkt.linktype, m0))]
    metas = dict(r["m"])
    for row, (di, dt, n, d) in enumerate(r["s"], 1):
        t = t0 + dt
        if not -_TS_END < t < _TS_END:
            raise ValueError(f"timestamp {t} out of range")
        h = _apply(h0, d)
        b = h + data[pos:pos + n]
        _check_fit(pkt.linktype, b, len(h), tunnel)
        pos += n
        out.append((i0 + di, Packet(t, b, len(b), pkt.iface, pkt.linktype,
                                    metas.get(row))))
    return out


def _check_fit(linktype, data, hlen, tunnel=True):
    """Check that a packet given back (``data``, bytes, of link type
    ``linktype``, headers ``hlen`` bytes long) is one GRO could have taken:
    its TCP/UDP payload starts at ``hlen``, its IPv4 total length / IPv6
    payload length / UDP length say exactly the bytes present and its IPv4
    header checksum is good (inet_gro_receive and the checks before it
    pass nothing else into an aggregate).  A damaged record fails here
    even when it carries no ``k=`` (records of earlier versions).
    ``tunnel``: the aggregate was merged by its inner flow.

    Raises:
        ValueError: it does not."""
    t = _transport(linktype, data, tunnel)
    if t is None or t[3] != hlen:
        raise ValueError("a packet given back has no TCP/UDP header where the record "
                         "puts it")
    l3off, et, proto, _ = t
    n = len(data)
    if et == ETH_P_IP:
        if int.from_bytes(data[l3off + 2:l3off + 4], "big") != n - l3off:
            raise ValueError("a packet given back has an IPv4 total length other "
                             "than its size")
        if not ipv4_header_ok(data, l3off, (data[l3off] & 0x0F) << 2):
            raise ValueError("a packet given back has a bad IPv4 header checksum")
    elif int.from_bytes(data[l3off + 4:l3off + 6], "big") != n - l3off - 40:
        raise ValueError("a packet given back has an IPv6 payload length other "
                         "than its size")
    if proto == 17 and int.from_bytes(data[hlen - 4:hlen - 2], "big") != n - hlen + 8:
        raise ValueError("a packet given back has a UDP length other than its size")


OPT_COMMENT = 1
SNAPLEN_TAG = TAG + "snaplen="
# room for the link layer, VLAN tags and a BIG TCP Hop-by-Hop header on top
# of the aggregate's IP packet (bytes)
_L2_ROOM = 256


def note_snaplen(iface, gro_max_size):
    """``iface`` (an Interface), with an IDB comment recording its snaplen
    (``pcapgro-restore v1 snaplen=<bytes>``) when an aggregate of up to
    ``gro_max_size`` bytes could exceed it: the pcapng writer then raises
    the IDB snaplen at close, and ``split --restore`` lowers it back from
    this comment (:func:`restore_interface`).  Unchanged otherwise."""
    snap = iface.snaplen
    if not snap or snap >= gro_max_size + _L2_ROOM:
        return iface
    note = f"{SNAPLEN_TAG}{snap}".encode("ascii")
    return Interface(iface.linktype, snap, iface.tsresol, iface.tsoffset,
                     list(iface.options) + [(OPT_COMMENT, note)])


def restore_interface(iface):
    """``iface`` as it was before the merge that wrote it: the last
    :func:`note_snaplen` comment removed and its snaplen put back (a damaged
    note is left alone).  Unchanged when it carries none."""
    opts = iface.options
    for k in range(len(opts) - 1, -1, -1):
        code, v = opts[k]
        if code != OPT_COMMENT:
            continue
        v = bytes(v)
        if not v.startswith(SNAPLEN_TAG.encode()):
            return iface
        try:
            snap = _uint(v[len(SNAPLEN_TAG):].decode("ascii"), 1 << 32)
        except (UnicodeDecodeError, ValueError):
            return iface
        return Interface(iface.linktype, snap, iface.tsresol, iface.tsoffset,
                         opts[:k] + opts[k + 1:])
    return iface


class BlockClaims:
    """Where the non-packet blocks (NRB, ISB, custom, ...) merge writes
    while GRO holds packets belong (the engine writes a block when it
    reads it, so it lands ahead of the packets held across it): each
    block's input position (the number of input packets before it) goes
    into the record of the next packet written after it, as ``x=`` (input
    index minus the record's ``i``, one per block, in order), appended
    after the record's checksum.  The engine calls :meth:`add` for each
    such block and :meth:`apply` on each output list before handing it on.

    Attributes:
        n: blocks still waiting for a packet to be written after them.
    """

    def __init__(self):
        self._open = []          # [input position, index in the next list]
        self.n = 0

    def add(self, position, at):
        """A block whose input position is ``position`` (packets before it)
        was written; the first element of the output list from index
        ``at`` on comes after it."""
        self._open.append([position, at])
        self.n += 1

    def apply(self, out):
        """Put the waiting blocks' positions into the records of the first
        packets after them in ``out`` (a list of events; modified in
        place); blocks with no packet after them in ``out`` wait for the
        next list.  A packet without a record takes no claim (its blocks
        stay where merge wrote them)."""
        if not self._open:
            return
        rest = []
        by_packet = {}
        for claim in self._open:
            j = claim[1]
            while j < len(out) and type(out[j]) is not Packet:
                j += 1
            if j < len(out):
                by_packet.setdefault(j, []).append(claim[0])
            else:
                rest.append([claim[0], 0])
        for j, positions in by_packet.items():
            out[j] = _with_claims(out[j], positions)
        self._open = rest
        self.n = len(rest)


def _with_claims(pkt, positions):
    """``pkt`` with `` x=...`` (``positions`` minus its record's ``i``)
    added to the last merge's record on it; unchanged without one."""
    meta = pkt.meta
    if meta is None or not meta.comments:
        return pkt
    k = level(meta.comments)[1]
    if k is None:
        return pkt
    rec = meta.comments[k]
    m = re.match(re.escape(TAG) + r"i=([0-9]+) ", rec + " ")
    if m is None or " x=" in rec:
        return pkt
    i0 = int(m.group(1))
    x = ",".join(str(n - i0) for n in positions)
    comments = list(meta.comments)
    comments[k] = f"{rec} x={x}"
    return Packet(pkt.ts, pkt.data, pkt.orig_len, pkt.iface, pkt.linktype,
                  PacketMeta(block=meta.block, comments=comments, flags=meta.flags,
                             options=list(meta.options)))


class Restorer:
    """``split --restore``: give back the original packets of pcapgro's own
    aggregates (byte for byte, with their nanosecond timestamps), the
    non-packet blocks merge wrote ahead of packets GRO held in their input
    place, and the interfaces' snaplens merge raised; every other event
    passes unchanged.

    Attributes:
        stats: dict with ``packets``, ``restored`` (aggregates undone),
               ``segments`` (packets given back), ``passed``,
               ``unrecorded`` (aggregates merge wrote without a restore
               record, the ones cut by a snaplen: passed as they are, at
               the place of their first packet; the input indexes no record
               names are theirs, so later packets keep their place),
               ``unfit`` (packets whose record does not fit them or names
               input positions already taken: an edited capture; passed as
               they are, also counted in ``passed``).
        records_out: set (by the pipeline) when the writer takes
               :class:`~pcapgro.record.HostRecords`: then the packets of the
               common kind of record (untagged Ethernet / IP / TCP, no
               metadata left after the record; see pcapgro/_restore.c) are
               given back as pcap records laid out by the compiled restore,
               the same bytes as the Packets :func:`restore` gives back;
               every other packet takes the Python path.  Those the
               reader's hook restored are also placed in input order by
               compiled code (:meth:`_batch`), one HostRecords per chunk.
    """

    def __init__(self):
        self.stats = {"packets": 0, "restored": 0, "segments": 0, "passed": 0,
                      "unrecorded": 0, "unfit": 0}
        # input index -> Packet, or None for the later indexes of a packet
        # that stays an aggregate (its record did not fit)
        self._pending = {}
        self._nxt = 0            # the next input index to give out
        self._before = {}        # input index -> blocks that go just before it
        self._waiting = []       # blocks read since the last packet
        self._ifs = []           # this section's interfaces: ns_to_ts()
        self._spans = []         # per interface: the ns times it holds, [lo, hi)
        self.records_out = False
        self._c = None           # the compiled restore, once records_out is seen
        self._place = None       # the compiled placement (_restore.place), likewise
        # runs the compiled placement holds ahead of _nxt (sorted by first
        # index) while _pending is empty; put into _pending (_absorb)
        # before the Python path places anything
        self._held = []
        # aggregates without a record (cut by a snaplen), in output order:
        # [Packet or None once given out, input indexes still to account
        # for]; their indexes are the holes among the known ones (_fill_cuts)
        self._cut = deque()

    def process(self, events):
        """Generator over events (see :mod:`pcapgro.record`), giving back
        the original packets in their input order.

        Packets without a record were written by merge in their input
        position (everything before them was already written), so they are
        placed right after what is already known (and after the input
        indexes of the aggregates merge wrote without a record before them:
        :meth:`_fill_cuts`); recorded ones are placed by their input index (counted over the whole file, every section,
        as merge counts them).  A packet whose record does not fit is
        placed, unchanged, at the first index its record names when those
        are readable and free, else as a packet without a record.  A
        non-packet block (NRB, ISB, custom, ...) goes before the input index
        the next packet's record names for it (``x=``: merge wrote it while
        GRO held earlier packets), else where it is.  Memory is bounded by
        what GRO held at once.  Never raises on a record's content; nothing
        is dropped.
        """
        self._c = _pick_restore() if self.records_out else None
        self._place = _pick_place() if self.records_out else None
        for ev in events:
            t = type(ev)
            if t is list:
                # the EPBs one call of the reader's hook restored (reader_hook)
                if self._waiting:
                    yield from self._place_blocks(None)
                yield from self._batch(ev)
                continue
            if self._held and (t is Packet or t is tuple or t is Section):
                self._absorb()
            if t is tuple:
                # an EPB the reader's hook restored (reader_hook)
                if self._waiting:
                    yield from self._place_blocks(None)
                fast = self._fits_now(ev[0], ev[1])
                if fast is not None:
                    yield from self._place_runs(*fast)
                else:
                    yield from self._packet(epb_packet(*ev[4:], ev[2], ev[3]))
                continue
            if t is Packet:
                if self._waiting:
                    yield from self._place_blocks(ev.meta)
                fast = self._fast(ev) if self._c is not None else None
                if fast is not None:
                    yield from self._place_runs(*fast)
                else:
                    yield from self._packet(ev)
                continue
            if t is Section:
                yield from self._drain()
                self._ifs = []
                self._spans = []
                # merge counts input indexes over the whole file, not per
                # section: _nxt goes on
            elif t is Interface:
                yield from self._drain_waiting()
                ev = restore_interface(ev)
                self._ifs.append(ns_to_ts(ev.tsresol, ev.tsoffset))
                self._spans.append(_span(self._ifs[-1]))
            else:
                self._waiting.append(ev)
                continue
            yield ev
        if self._held:
            self._absorb()
        yield from self._drain()

    def _batch(self, items):
        """Place the packets one call of the compiled walk restored
        (``items``: its tuples, see :meth:`reader_hook`): in one compiled
        call (:func:`pcapgro._restore.place`) while the Restorer holds
        nothing of its own, else, and for a packet that call leaves
        (times, taken indexes), as :meth:`_fits_now` and :meth:`_packet`
        say.  Gives out what can go now (HostRecords, Packets, blocks)."""
        j, n = 0, len(items)
        while j < n:
            if (self._place is not None and not self._before and not self._cut
                    and self._to_held()):
                j, out = self._placed(items, j)
                if out is not None:
                    yield out
                if j == n:
                    return
            if self._held:
                self._absorb()
            ev = items[j]
            j += 1
            fast = self._fits_now(ev[0], ev[1])
            if fast is not None:
                yield from self._place_runs(*fast)
            else:
                yield from self._packet(epb_packet(*ev[4:], ev[2], ev[3]))

    def _placed(self, items, j):
        """The compiled placement of ``items[j:]`` (see :meth:`_batch`):
        where it stopped, and the HostRecords it gives out (or None)."""
        j, self._nxt, data, nrec, mx, pk, rs, sg, ps = self._place(
            items, j, self._nxt, self._held, self._spans)
        st = self.stats
        st["packets"] += pk
        st["restored"] += rs
        st["segments"] += sg
        st["passed"] += ps
        return j, (HostRecords(data, nrec, mx) if nrec else None)

    def _to_held(self):
        """True when the compiled placement may take over: nothing
        pending, or only runs of the compiled restore (then moved to
        ``_held``, sorted)."""
        pending = self._pending
        if not pending:
            return True
        runs = []
        for v in pending.values():
            if type(v) is tuple:
                runs.append(v)
            elif v is not _CONT:
                return False        # a Packet (or None) of the Python path
        runs.sort(key=_first)
        self._held = runs
        pending.clear()
        return True

    def _absorb(self):
        """Put the runs the compiled placement holds into ``_pending``
        (the Python path's form: the run at its first index, ``_CONT`` at
        the others)."""
        held, self._held = self._held, []
        pending = self._pending
        for r in held:
            k, count = r[0], r[1]
            pending[k] = r
            if count > 1:
                pending.update(dict.fromkeys(range(k + 1, k + count), _CONT))

    def _packet(self, ev):
        """Place one packet of the merge output (and what it gives back)."""
        st = self.stats
        pending = self._pending
        st["packets"] += 1
        segs, idxs = self._segments(ev)
        if segs and not _free(idxs, pending, self._nxt):
            segs, idxs = [], None      # names positions already taken
        if segs:
            if len(segs) > 1:
                st["restored"] += 1
                st["segments"] += len(segs)
            else:
                st["passed"] += 1
            for k, p in segs:
                pending[k] = p
        else:
            st["passed"] += 1
            n_cut = 0
            if segs is None:
                n_cut = _unrecorded(ev.meta)
                if n_cut:
                    st["unrecorded"] += 1
            else:
                st["unfit"] += 1
            if n_cut:
                # its input indexes are unknown: the holes left once every
                # packet before the next one in input position is known
                self._cut.append([ev, n_cut])
            elif segs is not None and idxs and _free(idxs, pending, self._nxt):
                pending[idxs[0]] = ev
                for k in idxs[1:]:
                    pending[k] = None
            else:
                # in its input position: after everything known so far
                yield from self._fill_cuts()
                if pending:        # out of step (an unfit record): catch up
                    yield from self._drain()
                yield from self._blocks_upto(self._nxt)
                yield ev
                self._nxt += 1
        yield from self._release()

    def _fill_cuts(self):
        """What is pending from ``_nxt`` on (:meth:`_release`), with the
        holes in it taken by the aggregates merge wrote without a record
        (``_cut``, in output order; each goes out at its first hole): the
        list to give out.  Called when a packet in its input position comes
        (one without a record: merge wrote everything before it already) or
        at the end, when every input index before is known: the ones no
        packet or record names are those of the aggregates written so far
        without a record (their note says how many: ``of N segments``), and
        the later records keep their place.  Linear in what is pending."""
        out = self._release()
        cut = self._cut
        if not cut:
            return out
        ahead = sorted(self._pending)
        j = 0
        while cut:
            agg = cut[0]
            if agg[0] is not None:
                out += self._blocks_upto(self._nxt)
                out.append(agg[0])
                agg[0] = None
            while j < len(ahead) and ahead[j] < self._nxt:
                j += 1
            gap = ahead[j] - self._nxt if j < len(ahead) else agg[1]
            step = min(gap, agg[1])
            agg[1] -= step
            self._nxt += step
            if not agg[1]:
                cut.popleft()
            out += self._release()
        return out

    def reader_hook(self):
        """What a PcapngReader's ``epb_hook`` may be set to while it feeds
        this Restorer with ``records_out`` (the pipeline does): the
        compiled walk of pcapgro/_restore.c, which restores the EPBs
        :meth:`_fast` would take straight from the reader's buffer (no
        Packet made), its tuples handed on as one list per call (placed by
        :meth:`_batch`); None without the extension or with PCAPGRO_NO_C."""
        if _pick_restore() is None:
            return None
        from ._restore import walk

        def hook(buf, pos, end, bo, ifs, out, n, nb):
            # the walk's packets go to process() as one list (_batch)
            items = []
            r = walk(buf, pos, end, bo, ifs, items, n, nb)
            if items:
                out.append(items)
            return r
        return hook

    def _fast(self, ev):
        """The compiled restore of ``ev``: its packets as runs of
        consecutive input indexes, tuples ``(first index, count, buffer,
        start, end, maxcap)`` (pcap records in the host's byte order with
        nanosecond fractions, bytes ``start..end`` of the buffer), and how
        many packets; or None when it takes the Python path
        (:meth:`_segments`: no record of the common kind, metadata left
        once the record goes, a record that does not fit, times its
        interface cannot hold, indexes already taken)."""
        meta = ev.meta
        if meta is None or meta.options:
            return None
        c = meta.comments
        rec = c[-1] if c else ""
        if not rec.startswith(TAG):
            return None
        full = " h=" in rec
        if len(c) > 2 or (len(c) == 2 and not c[0].startswith(AGG_TAG if full else MOVED_TAG)):
            return None             # comments of the packet's own stay: Python path
        if meta.flags is not None and (not full or meta.flags & ~EPB_FLAG_TSO):
            return None
        r = self._c(ev.data, ev.orig_len, ev.linktype, rec)
        return None if r is None else self._fits_now(r, ev.iface)

    def _fits_now(self, r, i):
        """``(runs, n)`` of the compiled restore's answer ``r`` (``(runs,
        n, tmin, tmax)``) for a packet of interface ``i`` when its times
        fit the interface and its input indexes are all still to come
        (else None: the Python path decides, see :meth:`_fast`)."""
        runs, n, tmin, tmax = r
        lo, hi = self._spans[i] if 0 <= i < len(self._spans) else (0, 1 << 64)
        if lo is None:
            if not (_ts_fits(self._ifs, _At(tmin, i)) and _ts_fits(self._ifs, _At(tmax, i))):
                return None
        elif tmin < lo or tmax >= hi:
            return None
        nxt = self._nxt
        keys = self._pending.keys()
        for run in runs:
            k = run[0]
            if k < nxt or not keys.isdisjoint(range(k, k + run[1])):
                return None         # positions taken: the Python path says so
        return runs, n

    def _place_runs(self, runs, n):
        """Place the runs :meth:`_fast` gave back for one packet (``n``
        packets; statistics as for the packets :func:`restore` gives back):
        the list of what can be given out now, a run at the next input
        index at once."""
        st = self.stats
        st["packets"] += 1
        if n > 1:
            st["restored"] += 1
            st["segments"] += n
        else:
            st["passed"] += 1
        pending = self._pending
        out = []
        for r in runs:
            k, count = r[0], r[1]
            if k == self._nxt and not self._before:
                self._nxt = k + count
                out.append(HostRecords(memoryview(r[2])[r[3]:r[4]], count, r[5]))
                continue
            pending[k] = r
            if count > 1:
                pending.update(dict.fromkeys(range(k + 1, k + count), _CONT))
        if self._nxt in pending:
            out += self._release()
        return out

    def _give_run(self, run):
        """What to give out for a run (see :meth:`_fast`) placed at
        ``_nxt`` (the blocks before its first index already given out), as
        a list: its records at once, or one by one when blocks go before
        indexes inside it."""
        pending = self._pending
        k0, count, buf, a, b, mx = run
        last = k0 + count
        _drop(map(pending.pop, range(k0 + 1, last)))     # its _CONT entries
        self._nxt = last
        before = self._before
        if not (before and any(k0 < j < last for j in before)):
            return [HostRecords(memoryview(buf)[a:b], count, mx)]
        out = []
        mv = memoryview(buf)
        for k in range(k0, last):
            cap = int.from_bytes(mv[a + 8:a + 12], sys.byteorder)
            out += self._blocks_upto(k)
            out.append(HostRecords(mv[a:a + 16 + cap], 1, cap))
            a += 16 + cap
        return out

    def _segments(self, ev):
        """``(segs, idxs)``: :func:`restore` of ``ev`` and the input indexes
        given back; ``([], idxs)`` when its record does not fit (``idxs``
        the indexes it names, or None), also when a time it gives back
        cannot be written on the packet's interface."""
        try:
            segs = restore(ev)
        except RecordMismatch as e:
            return [], e.idxs
        if segs is None:
            return None, None
        idxs = [k for k, _ in segs]
        if not all(_ts_fits(self._ifs, p) for _, p in segs):
            return [], idxs
        return segs, idxs

    def _place_blocks(self, meta):
        """The blocks read since the last packet: those the record on
        ``meta`` (of the next packet merge wrote) places (``x=``) go before
        their input index, the others are given out now, where merge wrote
        them."""
        waiting = self._waiting
        if not waiting:
            return
        self._waiting = []
        claims = _block_claims(meta)
        if len(claims) > len(waiting):
            claims = []
        free = len(waiting) - len(claims)
        for b in waiting[:free]:
            yield b
        for b, k in zip(waiting[free:], claims):
            if k <= self._nxt:
                yield from self._blocks_upto(k)
                yield b
            else:
                self._before.setdefault(k, []).append(b)

    def _blocks_upto(self, k):
        """The blocks placed before input indexes up to ``k`` (a list; they
        are taken)."""
        before = self._before
        if not before:
            return []
        out = []
        for j in sorted(x for x in before if x <= k):
            out += before.pop(j)
        return out

    def _release(self):
        """What is pending from ``_nxt`` on, as long as it is contiguous
        (each index after the blocks placed before it): the list to give
        out, taken from pending."""
        pending = self._pending
        out = []
        while self._nxt in pending:
            if self._before:
                out += self._blocks_upto(self._nxt)
            p = pending.pop(self._nxt)
            if type(p) is tuple:
                out += self._give_run(p)
                continue
            self._nxt += 1
            if p is not None:
                out.append(p)
        return out

    def _drain_waiting(self):
        waiting, self._waiting = self._waiting, []
        yield from waiting

    def _drain(self):
        """Give out everything held, in input order (section or file end)."""
        yield from self._fill_cuts()
        pending = self._pending
        for k in sorted(pending):
            if k not in pending:
                continue            # inside a run given out (_give_run)
            yield from self._blocks_upto(k)
            p = pending.pop(k)
            if type(p) is tuple:
                yield from self._give_run(p)
                continue
            if p is not None:
                yield p
            self._nxt = k + 1
        before, self._before = self._before, {}
        for k in sorted(before):
            yield from before[k]
        yield from self._drain_waiting()


def _ts_fits(ifs, p):
    """True when Packet ``p``'s time (ns) can be written on its interface
    (``ifs``: :func:`pcapgro.capture.pcapng.ns_to_ts` of each; pcapng keeps
    0 <= ticks < 2**64); without a known interface, 0 <= ns < 2**64."""
    if not 0 <= p.iface < len(ifs):
        return 0 <= p.ts < 1 << 64
    div, off, conv = ifs[p.iface]
    t = (p.ts - off) // div if conv is None else conv(p.ts)
    return 0 <= t < 1 << 64


def _span(conv):
    """``(lo, hi)``: the ns times an interface (``conv``: its
    :func:`~pcapgro.capture.pcapng.ns_to_ts`) holds, as :func:`_ts_fits`
    says, ``lo <= ns < hi``; ``(None, None)`` for a resolution that is not
    a power of ten of a second (ask :func:`_ts_fits`)."""
    div, off, f = conv
    if f is not None:
        return None, None
    return off, off + (div << 64)


def _block_claims(meta):
    """The absolute input indexes (list of int) before which the record on
    ``meta`` (the last merge's; see :func:`level`) places the non-packet
    blocks merge wrote just ahead of this packet (``x=``, relative to
    its ``i``), one per block, the last blocks first...last; [] when none
    or the record cannot be read."""
    if meta is None or not meta.comments:
        return []
    k = level(meta.comments)[1]
    if k is None:
        return []
    try:
        r = decode(meta.comments[k])
    except ValueError:
        return []
    return [r["i"] + x for x in r["x"]]


def _free(idxs, pending, nxt):
    """True when input indexes ``idxs`` (ascending) are all still to come:
    none given out yet (below ``nxt``) nor taken in ``pending``."""
    return idxs[0] >= nxt and not any(k in pending for k in idxs)


_SEGMENTS = re.compile(r" of ([0-9]{1,6}) segments, ")


def _unrecorded(meta):
    """How many input packets (int, >= 1) the aggregate ``meta`` belongs to
    holds when the last merge wrote it without a record (cut by a snaplen:
    "pcapgro: GRO aggregate (TCP) of N segments, ..."), else 0; 1 when
    its note does not say."""
    if meta is None:
        return 0
    note, rec = level(meta.comments)
    if rec is not None or note is None:
        return 0
    m = _SEGMENTS.search(meta.comments[note])
    return max(1, int(m.group(1))) if m else 1


_CONT = object()    # pending: an input index inside a run placed before it (_fast)
_drop = deque(maxlen=0).extend      # runs an iterator to its end, keeping nothing


class _At:
    """What :func:`_ts_fits` reads of a packet: its time and interface."""

    __slots__ = ("ts", "iface")

    def __init__(self, ts, iface):
        self.ts = ts
        self.iface = iface
