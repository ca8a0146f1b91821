"""Classic libpcap files: reader and writer.

pcapgro reads and writes these itself rather than with ``dpkt.pcap``:
dpkt's Reader drops the original length, returns float/Decimal timestamps
and costs ~2.8 us per record; dpkt's Writer writes ``snaplen=1500`` and
``caplen == len``.  Here the input is read in 512 KiB chunks (each a new
bytearray, filled by ``readinto``) and record headers are decoded with a
precompiled ``struct.Struct.unpack_from`` directly out of the chunk; output
records are packed with ``struct.Struct.pack`` into a list and written per
>= 1 MiB (``os.writev`` of the parts, or one ``b"".join``).  Constant
memory.

File header (24 bytes): magic, version 2.4, thiszone, sigfigs, snaplen,
linktype.  Magics understood (both byte orders): 0xa1b2c3d4 (microsecond),
0xa1b23c4d (nanosecond), 0xa1b2cd34 (Kuznetzov "modified" pcap).  Old
variants with longer record headers are told apart from the first records
as Wireshark does (:mod:`.pcapvariant`): modified pcap of 1999-10-29 (8
extra bytes: ifindex, protocol, pkt_type) and of 1999-09-15 (SuSE 6.3, 12
extra bytes), and with the standard magic Red Hat 6.1's (ss990417, 8 extra
bytes) and Nokia IPSO's (4 extra bytes).  pcapgro does not keep the extra
fields; a warning says so.  ``thiszone`` and ``sigfigs`` are ignored (as
libpcap does) and written as 0.

The link-type field's upper bits (pcap-linktype(7), LT_FCS_DATALINK_EXT):
bit 26 (0x04000000) says the FCS length in bits 28-31 (in 16-bit words) is
known.  The reader gives it as the Interface's ``if_fcslen`` option (code
13, one byte, the FCS length in bytes as Wireshark reads it), so that it
reaches a pcapng output as an IDB option, and the writer puts an
``if_fcslen`` of its Interface back into the field, as tcpdump keeps it.
The frames are not changed: an FCS stays at their end.  The reserved bits
16-25 and 27 are ignored, as readers must.
"""

from __future__ import annotations

import os
import stat
import struct
import sys

from ..errors import UnusableInput
from ..fcs import OPT_FCSLEN, fcs_option
from ..record import Packet, Interface, Section, Block, RawRecords, HostRecords
from ._stream import ByteSource, ByteSink, FLUSH, ReaderBase, WriterBase, warn, _native
from .pcapvariant import MODIFIED, RECORD_HEADER, STANDARD, choose

__all__ = ["PcapReader", "PcapWriter", "PCAP_MAGICS", "SNAPLEN_DEFAULT", "VARIANT_NAMES"]

SNAPLEN_DEFAULT = 262144     # tcpdump's default; header snaplen is never below
MAX_RECORD = 1 << 28         # a caplen above this is taken as damage
LT_FCS_PRESENT = 0x04000000  # link-type field: the FCS length (bits 28-31) is known

# how the warning names a variant with a longer record header (pcapvariant)
VARIANT_NAMES = {"ss990417": "Red Hat 6.1 (ss990417 modified)",
                 "ss991029": "modified (Kuznetzov ss991029)",
                 "ss990915": "SuSE 6.3 (ss990915 modified)",
                 "nokia": "Nokia"}


def _regular(f):
    """Is ``f`` a regular file (not a pipe, socket or terminal)?"""
    try:
        return stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except (OSError, AttributeError, ValueError):
        return False


# first four bytes -> (byte order, tsresol (6 = us, 9 = ns), modified magic)
PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 6, False),
    b"\xa1\xb2\xc3\xd4": (">", 6, False),
    b"\x4d\x3c\xb2\xa1": ("<", 9, False),
    b"\xa1\xb2\x3c\x4d": (">", 9, False),
    b"\x34\xcd\xb2\xa1": ("<", 6, True),
    b"\xa1\xb2\xcd\x34": (">", 6, True),
}


class RecordChunk:
    """The records of one input chunk, not yet made into Packets (what
    ``PcapReader.batches(lazy=True)`` yields instead of a list of Packets).

    Attributes:
        buf:  the chunk (a bytearray, never modified nor reused by the
              reader).
        recs: offset in ``buf`` of each record header (list of int).
        hl:   record header length (16, or 24 for modified pcap); a
              packet's bytes start at ``rec + hl``.
        byteorder: '<' or '>' (of the record headers).
        linktype: every packet's link type (their iface is 0).
        mul:  timestamp fraction unit in ns (1000 for microsecond pcap).
        off, cap, orig, ts: lists (int) of each packet's data offset in
              ``buf``, captured length, original length and time (ns),
              once :meth:`columns` was called; ``mv``: then a memoryview
              of ``buf``.
    """

    __slots__ = ("buf", "recs", "hl", "byteorder", "linktype", "mul",
                 "off", "cap", "orig", "ts", "mv")
    lazy = True
    epb = False         # not pcapng EPBs (pcapgro.capture.pcapng.EpbChunk)

    def __len__(self):
        return len(self.recs)

    def columns(self):
        """numpy int64 arrays ``(off, cap, orig, ts)`` (also kept as lists
        in the attributes of the same names)."""
        import numpy as np
        recs = self.recs
        r = np.fromiter(recs, np.int64, len(recs))
        buf = self.buf
        # the 4 uint32 at every byte offset of the chunk (a view, no copy):
        # the rows of the record headers are gathered
        rows = np.ndarray((len(buf) - 15, 4), self.byteorder + "u4", buf, 0, (1, 4))
        h = rows[r].astype(np.int64)
        off = r + self.hl
        cap = h[:, 2]
        orig = h[:, 3]
        ts = h[:, 0] * 1000000000 + h[:, 1] * self.mul
        self.off = off.tolist()
        self.cap = cap.tolist()
        self.orig = orig.tolist()
        self.ts = ts.tolist()
        self.mv = memoryview(self.buf)
        return off, cap, orig, ts

    def times(self):
        """Each record's time, int ns (list; ``columns()[3].tolist()``)."""
        if getattr(self, "off", None) is not None:
            return self.ts
        u = struct.Struct(self.byteorder + "II").unpack_from
        buf = self.buf
        mul = self.mul
        return [s * 1000000000 + f * mul for s, f in [u(buf, r) for r in self.recs]]

    def part(self, a, b):
        """A RecordChunk of this one's records ``a..b-1`` (same buffer;
        columns not yet taken)."""
        c = RecordChunk()
        c.buf = self.buf
        c.recs = self.recs[a:b]
        c.hl = self.hl
        c.byteorder = self.byteorder
        c.linktype = self.linktype
        c.mul = self.mul
        c.off = None
        return c

    def packet(self, i):
        """Packet ``i`` (after :meth:`columns`); its data is ``bytes`` (a
        copy: ``buf`` is a bytearray)."""
        s = self.off[i]
        return Packet(self.ts[i], self.mv[s:s + self.cap[i]].tobytes(), self.orig[i], 0,
                      self.linktype, None)

    def packets(self):
        """Every record as a Packet (list)."""
        if getattr(self, "off", None) is None:
            self.columns()
        P = Packet
        mv = self.mv
        lt = self.linktype
        return [P(t, mv[s:s + c].tobytes(), o, 0, lt, None)
                for s, c, o, t in zip(self.off, self.cap, self.orig, self.ts)]


class PcapReader(ReaderBase):
    """Reads a classic pcap file from a binary file object, without seeking.

    Iterating yields one :class:`Section`, one :class:`Interface`, then one
    :class:`Packet` per record (``ts`` int ns, ``iface`` 0, ``meta`` None).
    :meth:`batches` yields the same events as lists (faster).

    Attributes:
        format:     'pcap'.
        nanosecond: True for a nanosecond-magic file.
        linktype, snaplen: from the file header (linktype's upper FCS bits
                    are masked off).
        fcs_len:    FCS length in bytes the header's link-type field gives
                    (its bits 26 and 28-31), or None when it says nothing.
        bytes_read: bytes read from the input so far.
        packets:    packets yielded so far; ``packet_bytes``: their captured
                    bytes.

    Raises (while iterating): UnusableInput for a short/unknown file header,
    DamagedInput(offset, ...) after yielding every complete record when the
    file ends in the middle of a record or a record length is implausible.
    """

    format = "pcap"
    lazy_batches = True     # batches(lazy=True): pcapgro.pipeline.run for GRO

    def __init__(self, f, head=b"", name="input"):
        self.name = name
        self._src = src = ByteSource(f, head, into=True)
        buf = src.refill(0, 24)
        magic = bytes(buf[:4])
        if len(buf) < 4 or magic not in PCAP_MAGICS:
            raise UnusableInput(f"{name}: not a pcap file")
        bo, res, modified = PCAP_MAGICS[magic]
        if len(buf) < 24:
            raise UnusableInput(f"{name}: truncated pcap file header ({len(buf)} of 24 bytes)")
        major, minor, _zone, _sigfigs, snaplen, linktype = struct.unpack_from(bo + "HHiIII", buf, 4)
        self.byteorder = bo
        self.nanosecond = res == 9
        # old variants with longer record headers (pcapvariant: as Wireshark)
        self.variant = self._variant(f, modified, res, (major, minor), bo, snaplen)
        self.record_header = RECORD_HEADER[self.variant]
        self.modified = self.record_header != 16
        self.snaplen = snaplen
        self.linktype = linktype & 0xFFFF     # LT_LINKTYPE: FCS and reserved bits off, as libpcap
        # LT_FCS_LENGTH, in 16-bit words, when LT_FCS_LENGTH_PRESENT
        self.fcs_len = (linktype >> 28) * 2 if linktype & LT_FCS_PRESENT else None
        self.version = (major, minor)
        self._pos = 24
        self.packets = 0
        self.packet_bytes = 0
        self._f = f

    def _variant(self, f, modified, res, version, bo, snaplen):
        """The record layout (pcapvariant.RECORD_HEADER key): one of the
        modified magic's two, or for a standard microsecond 2.4 file one of
        the three that share its magic; else plain pcap.  A regular file is
        read ahead as needed, a pipe only as far as it has arrived."""
        if modified:
            candidates = MODIFIED
        elif res == 6 and version >= (2, 4) and version[0] != 543:
            candidates = STANDARD
        else:
            return "pcap"
        src = self._src
        if _regular(f):
            return choose(candidates, lambda n: src.refill(0, n), 24, bo, snaplen)
        return choose(candidates, lambda n: src.buf, 24, bo, snaplen, complete=False)

    def _warn_variant(self):
        """One warning for a longer record header: its extra fields are
        not kept."""
        if self.variant != "pcap":
            warn(f"{self.name}: {VARIANT_NAMES[self.variant]} pcap: the extra per-record "
                 f"fields ({self.record_header - 16} bytes) are not kept")

    def batches(self, lazy=False):
        """Yield lists of events; the first list is ``[Section, Interface]``,
        then lists of Packets (one list per input chunk of ~512 KiB).  With
        ``lazy``, :class:`RecordChunk` objects instead of those lists."""
        yield self.header_events()
        if lazy:
            yield from self._chunks()
            return
        src = self._src
        self._warn_variant()
        rec = struct.Struct(self.byteorder + "IIII" + f"{self.record_header - 16}x")
        hl = rec.size
        unpack = rec.unpack_from
        mul = 1 if self.nanosecond else 1000
        lt = self.linktype
        P = Packet
        buf = src.buf
        pos = self._pos
        end = len(buf)
        while True:
            # buf is a bytearray: Packet data are bytes copied out of it
            mv = memoryview(buf)
            out = []
            app = out.append
            start = pos
            cl = -1
            if mul == 1000:
                while pos + hl <= end:
                    sec, frac, cl, ol = unpack(buf, pos)
                    s = pos + hl
                    e = s + cl
                    if e > end:
                        break
                    app(P(sec * 1000000000 + frac * 1000, mv[s:e].tobytes(), ol, 0, lt, None))
                    pos = e
                    cl = -1
            else:
                while pos + hl <= end:
                    sec, frac, cl, ol = unpack(buf, pos)
                    s = pos + hl
                    e = s + cl
                    if e > end:
                        break
                    app(P(sec * 1000000000 + frac, mv[s:e].tobytes(), ol, 0, lt, None))
                    pos = e
                    cl = -1
            if out:
                n = len(out)
                self.packets += n
                self.packet_bytes += pos - start - n * hl
                yield out
            # need more input: either a record header or a whole record
            buf = self._more(src, pos, end, hl, cl)
            if buf is None:
                return
            pos = 0
            end = len(buf)

    def _more(self, src, pos, end, hl, cl):
        """More input after the last whole record, which ends at ``pos`` of a
        buffer of ``end`` bytes; ``cl`` is the captured length of the record
        cut by the buffer's end (-1: its header is cut).

        Returns the refilled buffer (records start at 0), or None at a clean
        end of input.  Raises DamagedInput: an implausible record length, or
        a record cut by the end of the file."""
        if cl > MAX_RECORD:
            raise src.damaged(pos, f"implausible record length {cl}")
        need = hl if cl < 0 else hl + cl
        if src.eof:
            if pos == end:
                return None
            raise self._truncated(src, pos, end, hl, cl)
        buf = src.refill(pos, need)
        end = len(buf)
        if end < need:
            if end == 0:
                return None
            raise self._truncated(src, 0, end, hl, cl)
        return buf

    def _chunks(self):
        """batches(lazy=True) after the header events."""
        src = self._src
        self._warn_variant()
        hl = self.record_header
        caplen = struct.Struct(self.byteorder + "8xI").unpack_from
        mul = 1 if self.nanosecond else 1000
        buf = src.buf
        pos = self._pos
        end = len(buf)
        walk = _native.records if _native is not None else None
        big = self.byteorder == ">"
        while True:
            start = pos
            if walk is not None:
                # the loop below, compiled
                recs, pos, cl = walk(buf, pos, end, hl, big)
            else:
                recs = []
                rapp = recs.append
                lim = end - hl
                # each record's start is taken, then whether it ends inside
                # the buffer is seen from the next start: one check per record
                while pos <= lim:
                    (cl,) = caplen(buf, pos)
                    pos += hl + cl
                if pos > end:
                    # the last record is cut by the end of the buffer
                    pos = recs.pop()
                else:
                    cl = -1
            if recs:
                n = len(recs)
                self.packets += n
                self.packet_bytes += pos - start - n * hl
                c = RecordChunk()
                c.buf = buf
                c.recs = recs
                c.hl = hl
                c.byteorder = self.byteorder
                c.linktype = self.linktype
                c.mul = mul
                c.off = None
                yield c
            buf = self._more(src, pos, end, hl, cl)
            if buf is None:
                return
            pos = 0
            end = len(buf)

    def raw_batches(self):
        """Pass-through fast path: yield ``(records, n, maxcaplen)`` where
        ``records`` is a bytes-like object (memoryview) holding ``n`` complete records exactly as in the
        file (16-byte header + data each) and ``maxcaplen`` the largest
        captured length among them.  Call *after* consuming the first list
        of :meth:`batches` is not needed: this yields the records only (use
        :meth:`header_events` for the Section and Interface).  Not for
        modified pcap.  Raises like :meth:`batches`."""
        if self.modified:
            raise ValueError("raw_batches: modified pcap has no verbatim record layout")
        src = self._src
        caplen = struct.Struct(self.byteorder + "8xI").unpack_from
        buf = src.buf
        pos = self._pos
        end = len(buf)
        while True:
            start = pos
            cls = []
            capp = cls.append
            lim = end - 16
            # as in _chunks: one check per record
            while pos <= lim:
                (cl,) = caplen(buf, pos)
                capp(cl)
                pos += 16 + cl
            if pos > end:
                # the last record is cut by the end of the buffer
                cl = cls.pop()
                pos -= 16 + cl
            else:
                cl = -1
            n = len(cls)
            mx = max(cls) if n else 0
            if n:
                self.packets += n
                self.packet_bytes += pos - start - 16 * n
                yield memoryview(buf)[start:pos], n, mx
            if cl > MAX_RECORD:
                raise src.damaged(pos, f"implausible record length {cl}")
            need = 16 if cl < 0 else 16 + cl
            if src.eof:
                if pos == end:
                    return
                raise self._truncated(src, pos, end, 16, cl)
            buf = src.refill(pos, need)
            pos = 0
            end = len(buf)
            if end < need:
                if end == 0:
                    return
                raise self._truncated(src, pos, end, 16, cl)

    def header_events(self):
        """``[Section, Interface]`` describing the file header (the FCS
        length of the link-type field as the Interface's if_fcslen)."""
        opts = [] if self.fcs_len is None else [(OPT_FCSLEN, bytes([self.fcs_len]))]
        return [Section(self.byteorder, [], 1, 0),
                Interface(self.linktype, self.snaplen, 9 if self.nanosecond else 6, 0, opts)]

    @staticmethod
    def _truncated(src, pos, end, hl, cl):
        if cl < 0:
            return src.damaged(pos, f"truncated record header ({end - pos} of {hl} bytes)")
        return src.damaged(pos, f"truncated record (captured length {cl}, "
                                f"{end - pos - hl} bytes present)")


class PcapWriter(WriterBase):
    """Writes a classic pcap file to a binary file object.

    Args:
        f:          binary file object (a pipe is fine; seekable output lets
                    the header snaplen be patched at close).
        nanosecond: True = nanosecond magic, False = microsecond, None =
                    decide from the first Interface's tsresol (finer than
                    us -> nanosecond).
        byteorder:  '<' / '>' or None = the first Section's (else native).

    Events: a :class:`Section` (first one sets the byte order), an
    :class:`Interface` (first one sets the link type, and the FCS bits of
    the link-type field from its ``if_fcslen`` option; a later one with a
    different link type or FCS length raises UnusableInput), :class:`Packet` (a record with
    ``caplen = len(data)`` and ``orig_len``), :class:`Block` (pcap cannot hold
    it: dropped and counted).  Packet comments/flags/options are dropped and
    counted too; :meth:`close` prints ONE stderr line about what was dropped.

    The header snaplen is ``max(262144, largest packet)``; the header is
    written with the first flush and patched at close if a later packet was
    larger (a non-seekable output gets a warning instead).  A packet larger
    than 262144 bytes gets one warning (libpcap tools refuse those).

    ``takes_host_records``: :class:`~pcapgro.record.HostRecords` events
    (records of split --restore's compiled restore, host byte order and
    nanoseconds) are taken, their headers turned into this file's format
    in place.

    ``takes_parts``: a Packet's ``data`` may also be a list of bytes-like
    parts (an aggregate's header and its payloads, memoryviews of the input
    chunks: :attr:`pcapgro.gro.GROEngine.parts_out`): the record is their
    concatenation, written without joining them (``os.writev``).  The
    parts must stay unchanged until the writer is flushed or closed.

    Attributes: ``packets``, ``packet_bytes`` (captured bytes) written.
    """

    format = "pcap"
    takes_parts = True
    takes_host_records = True       # HostRecords events (split --restore)

    def __init__(self, f, nanosecond=None, byteorder=None):
        self._sink = ByteSink(f)
        self.nanosecond = nanosecond
        self.byteorder = byteorder
        self.linktype = None
        self._fcs = None            # FCS length in bytes (if_fcslen) or None
        self._header_snaplen = None
        self._maxlen = SNAPLEN_DEFAULT
        self._warned_big = False
        self._dropped = {"comments": 0, "flags": 0, "options": 0, "blocks": 0, "sections": 0}
        self._sections = 0
        self._pack = None
        self._host_conv = None      # pcap_headers, when HostRecords need it
        self._host_args = None
        self.packets = 0
        self.packet_bytes = 0
        self._on_close = None
        self._on_abort = None
        self._closed = False

    # -- configuration from the event stream -------------------------------
    def _setup(self, linktype):
        if self.nanosecond is None:
            self.nanosecond = False
        self.linktype = linktype
        bo = self.byteorder
        if bo not in ("<", ">"):
            bo = "<" if sys.byteorder == "little" else ">"
        self.byteorder = bo
        self._pack = struct.Struct(bo + "IIII").pack
        # HostRecords (host byte order, ns fractions) into this format
        swap = bo != ("<" if sys.byteorder == "little" else ">")
        self._host_args = (swap, 1 if self.nanosecond else 1000)
        self._host_conv = None
        if swap or not self.nanosecond:
            try:
                from .._restore import pcap_headers
            except ImportError:     # pragma: no cover - then none are made
                pcap_headers = None
            self._host_conv = pcap_headers

    def _interface(self, ev):
        fcs = fcs_option(ev.options)
        if self.linktype is None:
            if self.nanosecond is None:
                r = ev.tsresol
                self.nanosecond = not ((r & 0x80 == 0 and r <= 6) or r == 0x80)
            if fcs is not None and (fcs & 1 or fcs > 30):
                raise UnusableInput(
                    f"an interface's FCS length of {fcs} bytes (if_fcslen) cannot be "
                    "written in classic pcap's link-type field; use -F pcapng")
            self._fcs = fcs
            self._setup(ev.linktype)
        elif ev.linktype != self.linktype:
            raise UnusableInput(
                f"input has several link types ({self.linktype}, {ev.linktype}): "
                "classic pcap holds one; use -F pcapng")
        elif (fcs or 0) != (self._fcs or 0):
            raise UnusableInput(
                "input has interfaces with different FCS lengths (if_fcslen "
                f"{self._fcs}, {fcs}): classic pcap holds one; use -F pcapng")
        elif not self.nanosecond:
            r = ev.tsresol
            if not ((r & 0x80 == 0 and r <= 6) or r == 0x80):
                raise UnusableInput(
                    "input mixes microsecond and finer timestamp resolutions: "
                    "classic pcap holds one; use -F pcapng")

    def _header(self):
        snap = max(SNAPLEN_DEFAULT, self._maxlen)
        self._header_snaplen = snap
        magic = 0xA1B23C4D if self.nanosecond else 0xA1B2C3D4
        lt = self.linktype
        if self._fcs is not None:
            # LT_FCS_DATALINK_EXT: the length in 16-bit words, and the flag
            lt |= (self._fcs // 2) << 28 | LT_FCS_PRESENT
        return struct.pack(self.byteorder + "IHHiIII", magic, 2, 4, 0, 0, snap, lt)

    def write(self, ev):
        """Write one event (Section, Interface, Packet or Block)."""
        if type(ev) is Packet:
            self.write_batch((ev,))
        elif type(ev) is Interface:
            self._interface(ev)
        elif type(ev) is Section:
            self._sections += 1
            if self.byteorder is None:
                self.byteorder = ev.byteorder
        elif type(ev) is Block:
            self._dropped["blocks"] += 1
        elif type(ev) is RawRecords:
            self.write_raw(ev.data, ev.n, ev.maxcap)
        elif type(ev) is HostRecords:
            self._host_records(ev)
        else:
            raise TypeError(f"not a capture event: {ev!r}")

    packet = write

    def write_batch(self, events):
        """Write a sequence of events; Packets take the fast path."""
        if self._pack is None:
            for i, ev in enumerate(events):
                if type(ev) is Packet:
                    if self._pack is None:
                        self._setup(ev.linktype)
                    break
                if self._pack is not None:
                    break           # set up by an Interface: the loop does the rest
                self.write(ev)
            else:
                return
            events = events[i:]
        try:
            self._loop(events)
        except struct.error:
            raise UnusableInput("a timestamp or length does not fit classic pcap's "
                                "32-bit fields (a time before 1970 or after 2106-02-07?): "
                                "use -F pcapng") from None

    def _loop(self, events):
        """write_batch's loop over ``events`` (after the first Packet set
        the writer up)."""
        sink = self._sink
        parts = sink.parts
        app = parts.append
        pack = self._pack
        maxlen = self._maxlen
        nano = self.nanosecond
        n_pk = 0
        n_by = 0
        for ev in events:
            if type(ev) is Packet:
                d = ev.data
                if type(d) is list:
                    # parts (takes_parts): written as they are, not joined
                    n = sum(map(len, d))
                else:
                    n = len(d)
                ts = ev.ts
                if n > maxlen:
                    maxlen = self._bigger(n)
                if ev.meta is not None:
                    self._meta(ev.meta)
                if nano:
                    app(pack(ts // 1000000000, ts % 1000000000, n, ev.orig_len))
                else:
                    app(pack(ts // 1000000000, ts % 1000000000 // 1000, n, ev.orig_len))
                if type(d) is list:
                    parts += d
                else:
                    app(d)
                n_pk += 1
                n_by += n
            elif type(ev) is HostRecords:
                # records of the compiled restore: headers into this
                # writer's format in place, then as they are
                d = ev.data
                if self._host_conv is not None:
                    self._host_conv(d, ev.n, *self._host_args)
                if ev.maxcap > maxlen:
                    maxlen = self._bigger(ev.maxcap)
                if type(d) is list:
                    # the compiled placement's run buffers, not joined
                    parts += d
                    n_by += sum(map(len, d)) - 16 * ev.n
                else:
                    app(d)
                    n_by += len(d) - 16 * ev.n
                n_pk += ev.n
            else:
                # counted so far first: write() may flush, and a flush may
                # start a new parts list (ByteSink.flush)
                self.packets += n_pk
                self.packet_bytes += n_by
                sink.size += n_by + 16 * n_pk
                n_pk = n_by = 0
                self.write(ev)
                pack = self._pack
                maxlen = self._maxlen     # write_raw may have raised it
                parts = sink.parts
                app = parts.append
        self.packets += n_pk
        self.packet_bytes += n_by
        sink.size += n_by + 16 * n_pk
        if sink.size >= FLUSH:
            self._flush()

    def accepts_raw(self, reader):
        """True when records of ``reader`` (a PcapReader) can be copied
        verbatim: same byte order and resolution, nothing written yet."""
        if type(reader) is not PcapReader:
            return False
        bo = self.byteorder if self.byteorder in ("<", ">") else reader.byteorder
        nano = reader.nanosecond if self.nanosecond is None else self.nanosecond
        return (not reader.modified and self.packets == 0
                and bo == reader.byteorder and nano == reader.nanosecond)

    def record_layout(self, linktype):
        """How the compiled GRO loop may lay out records of link type
        ``linktype`` from an input this writer cannot copy verbatim (pcapng:
        :func:`pcapgro.gro.cfast.layout`), to be written with
        :meth:`write_raw`: ``(byteorder, fraction unit ns)`` (unit 1 or
        1000) once an Interface of that link type set the writer up, else
        None (the Python path writes them, or says what is wrong)."""
        if self._pack is None or linktype != self.linktype:
            return None
        return self.byteorder, 1 if self.nanosecond else 1000

    def write_raw(self, records, n, maxcaplen):
        """Append ``n`` verbatim records (bytes, this writer's byte order and
        resolution, see :meth:`PcapReader.raw_batches`) whose largest
        captured length is ``maxcaplen``."""
        if self._pack is None:
            raise ValueError("write_raw before the Interface event")
        if maxcaplen > self._maxlen:
            self._bigger(maxcaplen)
        sink = self._sink
        sink.parts.append(records)
        sink.size += len(records)
        self.packets += n
        self.packet_bytes += len(records) - 16 * n
        if sink.size >= FLUSH:
            self._flush()

    def _host_records(self, ev):
        """Write a :class:`~pcapgro.record.HostRecords` event (as
        :meth:`_loop` does)."""
        if self._pack is None:
            raise ValueError("host records before the Interface event")
        self._loop((ev,))

    def _bigger(self, n):
        self._maxlen = n
        if n > SNAPLEN_DEFAULT and not self._warned_big:
            self._warned_big = True
            warn(f"a packet of {n} bytes is larger than 262144: written, but "
                 "libpcap-based tools (tcpdump, tcpreplay) may refuse it")
        return n

    def _meta(self, m):
        d = self._dropped
        if m.comments:
            d["comments"] += len(m.comments)
        if m.flags:                 # a flags word of 0 says nothing: not lost
            d["flags"] += 1
        if m.options:
            d["options"] += len(m.options)

    def _flush(self):
        sink = self._sink
        if self._header_snaplen is None:
            if self._pack is None:
                self._setup(1)
            sink.parts.insert(0, self._header())
        sink.flush()

    def close(self):
        """Flush, patch the header snaplen if needed, print the one 'dropped'
        line if anything was dropped, and close (rename a temp file into
        place when opened by :func:`pcapgro.capture.open_writer`)."""
        if self._closed:
            return
        self._flush()
        if self._maxlen > self._header_snaplen:
            snap = struct.pack(self.byteorder + "I", self._maxlen)
            if not self._sink.patch(16, snap):
                warn(f"output header snaplen {self._header_snaplen} is smaller than a "
                     f"later packet of {self._maxlen} bytes (output not seekable)")
        d = self._dropped
        if self._sections > 1:
            d["sections"] = self._sections - 1
        if any(d.values()):
            what = ", ".join(f"{v} {k if v != 1 else k[:-1]}" for k, v in d.items() if v)
            warn(f"classic pcap cannot hold pcapng metadata: dropped {what} (use -F pcapng to keep them)")
        self._closed = True
        if self._on_close is not None:
            self._on_close()
