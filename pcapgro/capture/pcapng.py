"""pcapng files (draft-ietf-opsawg-pcapng): reader and writer.

pcapgro reads and writes pcapng itself rather than with ``dpkt.pcapng``:
dpkt's Reader honours only the first IDB and SHB, skips SPBs and drops the
interface id, comments and original length; its Writer writes microsecond
timestamps and forces ``caplen == orig_len``.  Here the input is read in
1 MiB chunks, block headers and EPB fixed fields are decoded with
precompiled ``struct.Struct.unpack_from`` out of the chunk (a new set of
structs for every section's byte order), and output blocks are packed into
a list written with one ``b"".join`` per >= 1 MiB.  Constant memory.

What is kept: every section (SHB version and options, in its byte order),
every interface (link type, snaplen, ``if_tsresol`` decimal or power of 2,
``if_tsoffset``, other options raw), EPBs (interface, timestamp, captured
and original length, comments, ``epb_flags``, other options raw), SPBs
(stay SPBs, without timestamp), obsolete PBs (read, written back as EPBs,
``pack_flags`` -> ``epb_flags``, a non-zero drops count -> ``epb_dropcount``),
copyable custom blocks (0x00000BAD) and every other non-packet block (NRB,
ISB, DSB, unknown types) verbatim as :class:`~pcapgro.record.Block`, after
the same checks a packet block gets (block length for its type, NRB
records, option lists: see ``_CHECK``).
Dropped as draft §5.2 asks: do-not-copy custom blocks (0x40000BAD) and
do-not-copy custom options (19372, 19373) of SHBs, IDBs and packet blocks.
Timestamps of a resolution finer than 1 ns are rounded down to ns (warned).
"""

from __future__ import annotations

import struct
import sys

from ..errors import UnusableInput
from ..record import (Packet, PacketMeta, Interface, Section, Block, RawBlocks,
                      BLOCK_EPB, BLOCK_SPB, BLOCK_PB)
from ._stream import ByteSource, ByteSink, FLUSH, ReaderBase, WriterBase, warn, _native

# Wireshark's WTAP_MAX_PACKET_SIZE_STANDARD and tcpdump's default snaplen:
# readers refuse larger packets ("cap_len ... is larger than 262144")
BIG_PACKET = 262144

__all__ = ["PcapngReader", "PcapngWriter", "EpbChunk", "PCAPNG_MAGIC"]

PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
SHB, IDB, PB, SPB, EPB = 0x0A0D0D0A, 1, 2, 3, 6
CB_COPY, CB_NOCOPY = 0x00000BAD, 0x40000BAD
OPT_END, OPT_COMMENT, OPT_FLAGS, OPT_DROPCOUNT = 0, 1, 2, 4
OPT_TSRESOL, OPT_TSOFFSET = 9, 14
NOCOPY_OPTIONS = (19372, 19373)
BOM = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}
MAX_BLOCK = 1 << 28
NATIVE = "<" if sys.byteorder == "little" else ">"


class _Bad(Exception):
    """Internal: damage at buffer position ``pos``."""

    def __init__(self, pos, problem):
        self.pos = pos
        self.problem = problem


def ts_to_ns(tsresol, tsoffset):
    """Return ``(mul, off, conv)`` turning a tick count of an interface into
    int ns since the epoch: ``ticks * mul + off`` when ``conv`` is None, else
    ``conv(ticks)``.  tsresol: the if_tsresol byte; tsoffset: seconds.
    A binary resolution's ``conv`` has attribute ``binary`` = k (2**-k s),
    a decimal one finer than 1 ns ``decimal`` = e (10**-(9 + e) s): the
    compiled GRO loop converts those itself (pcapgro/gro/cfast.py)."""
    off = tsoffset * 1000000000
    if tsresol & 0x80:
        k = tsresol & 0x7F
        if k == 0:
            return 1000000000, off, None
        conv = lambda t, k=k, off=off: ((t * 1000000000) >> k) + off   # noqa: E731
        conv.binary = k
        return 0, off, conv
    if tsresol <= 9:
        return 10 ** (9 - tsresol), off, None
    d = 10 ** (tsresol - 9)
    conv = lambda t, d=d, off=off: t // d + off     # noqa: E731
    conv.decimal = tsresol - 9
    return 0, off, conv


def ns_to_ts(tsresol, tsoffset):
    """Inverse of :func:`ts_to_ns`: ``(div, off, conv)`` with ticks =
    ``(ns - off) // div`` when conv is None, else ``conv(ns)``.  Exact for
    every value :func:`ts_to_ns` produced when the resolution is >= 1 ns.
    A binary resolution's ``conv`` has attribute ``binary`` = k, a decimal
    one finer than 1 ns ``decimal`` = e."""
    off = tsoffset * 1000000000
    if tsresol & 0x80:
        k = tsresol & 0x7F
        if k == 0:
            return 1000000000, off, None
        conv = lambda ns, k=k, off=off: -((-(ns - off) << k) // 1000000000)   # noqa: E731
        conv.binary = k
        return 0, off, conv
    if tsresol <= 9:
        return 10 ** (9 - tsresol), off, None
    m = 10 ** (tsresol - 9)
    conv = lambda ns, m=m, off=off: (ns - off) * m     # noqa: E731
    conv.decimal = tsresol - 9
    return 0, off, conv


def parse_options(buf, start, end, bo, pos=0):
    """Parse a pcapng option list ``buf[start:end]`` in byte order ``bo``.

    Returns a list of ``(code, value_bytes)`` without opt_endofopt and
    without do-not-copy custom options.  Raises _Bad(pos, ...) when an
    option runs past ``end``."""
    out = []
    hdr = struct.Struct(bo + "HH").unpack_from
    while start + 4 <= end:
        code, ln = hdr(buf, start)
        if code == OPT_END:
            break
        v0 = start + 4
        if v0 + ln > end:
            raise _Bad(pos, f"option {code} runs past the end of its block")
        if code not in NOCOPY_OPTIONS:
            out.append((code, buf[v0:v0 + ln]))
        start = v0 + ((ln + 3) & ~3)
    return out


def _check_isb(buf, pos, e, bl, bo):
    if bl < 24:
        raise _Bad(pos, f"bad block length {bl} for an interface statistics block")
    parse_options(buf, pos + 20, e - 4, bo, pos)


def _check_nrb(buf, pos, e, bl, bo):
    """Walk the records of an NRB as readers do (Wireshark refuses a record
    past the block, an address record shorter than its address or a name
    not ending in NUL), then its options."""
    if bl < 16:
        raise _Bad(pos, f"bad block length {bl} for a name resolution block")
    hdr = struct.Struct(bo + "HH").unpack_from
    p = pos + 8
    end = e - 4
    while p + 4 <= end:
        rt, ln = hdr(buf, p)
        p += 4
        if rt == 0:
            break
        if p + ((ln + 3) & ~3) > end:
            raise _Bad(pos, f"name resolution record of type {rt} runs past the end of its block")
        alen = 4 if rt == 1 else 16 if rt == 2 else None
        if alen is not None:
            if ln < alen:
                raise _Bad(pos, f"name resolution record of type {rt} has length {ln}, "
                                f"shorter than its {alen}-byte address")
            if ln > alen and buf[p + ln - 1] != 0:
                raise _Bad(pos, f"name resolution record of type {rt} has a name "
                                "not ending in NUL")
        p += (ln + 3) & ~3
    parse_options(buf, p, end, bo, pos)


def _check_dsb(buf, pos, e, bl, bo):
    if bl < 20:
        raise _Bad(pos, f"bad block length {bl} for a decryption secrets block")
    ln = struct.unpack_from(bo + "I", buf, pos + 12)[0]
    s = pos + 16 + ((ln + 3) & ~3)
    if s > e - 4:
        raise _Bad(pos, f"decryption secrets of {ln} bytes run past the end of their block")
    parse_options(buf, s, e - 4, bo, pos)


def _check_cb(buf, pos, e, bl, bo):
    if bl < 16:
        raise _Bad(pos, f"bad block length {bl} for a custom block")


def _check_sjeb(buf, pos, e, bl, bo):
    # Wireshark refuses an entry shorter than "__REALTIME_TIMESTAMP=N\n\n"
    if bl < 36:
        raise _Bad(pos, f"bad block length {bl} for a systemd journal export block")


# Non-packet blocks copied verbatim whose layout is known: checked as
# packet blocks are (lengths, records, option lists), so that damage is
# reported (exit 3) instead of copied into an output readers refuse.
# Custom block data and options cannot be told apart (the layout is the
# PEN owner's), nor can those of unknown block types: they are copied as
# they are.
_CHECK = {4: _check_nrb, 5: _check_isb, 9: _check_sjeb, 0xA: _check_dsb, CB_COPY: _check_cb}


def epb_packet(buf, pos, e, bo, ts, lt):
    """The Packet of the EPB at ``buf[pos:e]`` (byte order ``bo``, checked
    by the reader; time ``ts`` ns, link type ``lt``), as the reader makes
    it: for an EPB a :attr:`PcapngReader.epb_hook` took instead."""
    iface, _, _, cl, ol = struct.unpack_from(bo + "IIIII", buf, pos + 8)
    s = pos + 28
    oe = s + ((cl + 3) & ~3)
    return Packet(ts, buf[s:s + cl], ol, iface, lt,
                  None if oe == e - 4 else
                  _packet_meta(BLOCK_EPB, parse_options(buf, oe, e - 4, bo, pos), bo))


def _packet_meta(block, opts, bo):
    comments = []
    flags = None
    other = []
    for code, v in opts:
        if code == OPT_COMMENT:
            comments.append(v.decode("utf-8", "surrogateescape"))
        elif code == OPT_FLAGS and len(v) == 4 and flags is None:
            flags = struct.unpack(bo + "I", v)[0]
        else:
            other.append((code, v))
    return PacketMeta(block, comments, flags, other)


# struct unpackers by byte order: (block type and length, EPB fields after
# the block length: interface, time high, time low, captured, original
# length, EPB fields from the block length on)
_STRUCTS = {bo: (struct.Struct(bo + "II").unpack_from, struct.Struct(bo + "IIIII").unpack_from,
                 struct.Struct(bo + "4xIIIIII").unpack_from) for bo in "<>"}

# batches(lazy=True): runs of fewer EPBs than this come as Packets (an
# EpbChunk costs the GRO engine more than a few Packets)
MIN_CHUNK = 8


def _epb_run_py(buf, pos, end, bo, nifs, recs):
    """The Python twin of ``_native.epbs`` (pcapgro/_native.c): appends to
    ``recs`` the offsets of the consecutive EPBs from ``pos`` on that pass
    the reader's checks (:meth:`PcapngReader._epb`, the block length checks
    of :meth:`PcapngReader._blocks`), all of the first one's interface;
    returns ``(pos after them, their interface or -1, captured bytes)``."""
    tl, _, epb = _STRUCTS[bo]
    iface = -1
    nb = 0
    while end - pos >= 32:
        bt, bl = tl(buf, pos)
        e = pos + bl
        if bt != EPB or bl < 32 or bl & 3 or e > end or tl(buf, e - 8)[1] != bl:
            break
        _, i, _, _, cl, _ = epb(buf, pos)
        oe = pos + 28 + ((cl + 3) & ~3)
        if oe > e - 4 or i >= nifs or (iface >= 0 and i != iface):
            break
        if oe < e - 4:
            try:
                parse_options(buf, oe, e - 4, bo, pos)
            except _Bad:
                break
        recs.append(pos)
        iface = i
        nb += cl
        pos = e
    return pos, iface, nb


def _grouped(out, lazy):
    """What batches() yields for the events ``out`` of one input chunk: the
    list itself, or (lazy) each EpbChunk alone and the events between them
    as lists."""
    if not lazy:
        if out:
            yield out
        return
    run = []
    for ev in out:
        if type(ev) is EpbChunk:
            if run:
                yield run
                run = []
            yield ev
        else:
            run.append(ev)
    if run:
        yield run


class EpbChunk:
    """A run of EPBs of one interface in one input chunk, not yet made into
    Packets: what :meth:`PcapngReader.batches` yields for it with
    ``lazy=True`` (the duck type of :class:`pcapgro.capture.pcap.RecordChunk`).

    Attributes:
        buf:       the chunk (bytes).
        recs:      offset in ``buf`` of each EPB (its block type).
        hl:        28: a packet's bytes start at ``rec + 28``.
        byteorder: the section's, '<' or '>'.
        linktype, iface: the interface's link type and index.
        mul, tsoff, conv: the interface's timestamp conversion
                   (:func:`ts_to_ns`): a packet's time is ``ticks * mul +
                   tsoff`` ns when ``conv`` is None (decimal resolutions
                   10^-k, k <= 9: the compiled GRO loop takes those), else
                   ``conv(ticks)``.
    Every EPB passed the reader's checks (options included): the Packets
    made here are those :meth:`PcapngReader.batches` makes without lazy.
    """

    __slots__ = ("buf", "recs", "hl", "byteorder", "linktype", "iface", "mul", "tsoff", "conv")
    lazy = True
    epb = True          # what tells it from a RecordChunk (whose hl may be 28 too)

    def __len__(self):
        return len(self.recs)

    def part(self, a, b):
        """An EpbChunk of this one's EPBs ``a..b-1`` (same buffer)."""
        c = EpbChunk()
        for k in self.__slots__:
            setattr(c, k, getattr(self, k))
        c.recs = self.recs[a:b]
        return c

    def times(self):
        """Each packet's time, int ns (list)."""
        u = _STRUCTS[self.byteorder][2]
        buf = self.buf
        mul, off, conv = self.mul, self.tsoff, self.conv
        if conv is None:
            return [(hi << 32 | lo) * mul + off
                    for _, _, hi, lo, _, _ in [u(buf, r) for r in self.recs]]
        return [conv(hi << 32 | lo) for _, _, hi, lo, _, _ in [u(buf, r) for r in self.recs]]

    def last_time(self):
        """The last packet's time, int ns."""
        _, _, hi, lo, _, _ = _STRUCTS[self.byteorder][2](self.buf, self.recs[-1])
        return (hi << 32 | lo) * self.mul + self.tsoff if self.conv is None else self.conv(hi << 32 | lo)

    def packet(self, i):
        """Packet ``i``."""
        return self._make(self.recs[i:i + 1])[0]

    def packets(self):
        """Every packet (a list of :class:`Packet`)."""
        return self._make(self.recs)

    def _make(self, recs):
        u = _STRUCTS[self.byteorder][2]
        buf = self.buf
        bo = self.byteorder
        mul, off, conv, lt = self.mul, self.tsoff, self.conv, self.linktype
        P = Packet
        out = []
        app = out.append
        for r in recs:
            bl, iface, hi, lo, cl, ol = u(buf, r)
            s = r + 28
            oe = s + ((cl + 3) & ~3)
            e = r + bl - 4
            t = hi << 32 | lo
            app(P(t * mul + off if conv is None else conv(t), buf[s:s + cl], ol, iface, lt,
                  None if oe == e else
                  _packet_meta(BLOCK_EPB, parse_options(buf, oe, e, bo, r), bo)))
        return out


def _frame_place(pos, e, bl, cl, iface, hi, lo, ifs, kind):
    """Where the frame of the EPB or PB at ``pos`` (ending at ``e``, block
    length ``bl``, captured length ``cl``, interface ``iface``, timestamp
    ticks ``hi``/``lo``) leaves off and what it is: ``(options start, link
    type, time in ns)``.  Raises _Bad(pos, problem) when the frame overruns
    the block or the interface is not defined; ``kind`` names the block."""
    oe = pos + 28 + ((cl + 3) & ~3)
    if oe > e - 4:
        raise _Bad(pos, f"bad block length {bl} for {kind} of captured length {cl}")
    try:
        lt, mul, off, conv, _ = ifs[iface]
    except IndexError:
        raise _Bad(pos, f"packet for interface {iface}, but the section "
                        f"has {len(ifs)} interface(s)") from None
    ticks = hi << 32 | lo
    return oe, lt, ticks * mul + off if conv is None else conv(ticks)


class PcapngReader(ReaderBase):
    """Reads a pcapng file from a binary file object, without seeking.

    Iterating yields, in block order: :class:`Section` per SHB,
    :class:`Interface` per IDB, :class:`Packet` per EPB/SPB/PB (``ts`` int
    ns with if_tsoffset applied; SPB: the time of the packet before it in
    its section (or interface 0's time origin), iface 0, caplen from the block
    and the IDB snaplen, ``meta.block == BLOCK_SPB``; EPB without options:
    ``meta`` None), :class:`Block` for other blocks kept verbatim.
    :meth:`batches` yields the same events as lists (faster); with
    ``lazy=True`` runs of EPBs come as :class:`EpbChunk` objects.

    Attributes: ``format`` 'pcapng'; ``nanosecond`` True once an interface
    finer than 1 us has been read; ``bytes_read``; ``packets`` and
    ``packet_bytes`` (captured bytes) yielded so far.

    Raises (while iterating): UnusableInput when the file does not start
    with a valid SHB; DamagedInput(offset, problem) after yielding every
    complete block before the damage (truncated block, bad block length,
    packet for an undefined interface, option overrun in any block whose
    layout is known, bad NRB record, bad later SHB).
    """

    format = "pcapng"
    lazy_batches = True     # batches(lazy=True): pcapgro.pipeline.run for GRO

    def __init__(self, f, head=b"", name="input"):
        self.name = name
        self._f = f
        self._src = src = ByteSource(f, head)
        buf = src.refill(0, 12)
        if buf[:4] != PCAPNG_MAGIC:
            raise UnusableInput(f"{name}: not a pcapng file")
        if len(buf) < 12:       # shorter than the smallest block header
            raise UnusableInput(f"{name}: truncated section header block "
                                f"({len(buf)} of at least 28 bytes)")
        if buf[8:12] not in BOM:
            raise UnusableInput(f"{name}: pcapng section header without a valid byte-order magic")
        self.nanosecond = False
        self.packets = 0
        self.packet_bytes = 0
        self._warned_fine = False
        self._prev_ts = None    # the last packet's time (ns) before this chunk, in its section
        # f(buf, pos, end, byteorder, ifs, out, packets, bytes) -> (pos,
        # packets, bytes): takes a run of EPBs from pos, appending its own
        # events to out and counting them (split --restore's compiled
        # restore: pcapgro.restore.Restorer.reader_hook)
        self._epb_hook = None

    @property
    def epb_hook(self):
        """The hook :meth:`batches` calls before each block it reads itself
        (see the comment in ``__init__``), or None.  Setting one also has
        the chunks read straight after the leftover bytes
        (:meth:`ByteSource.direct_reads`: no join copy per chunk)."""
        return self._epb_hook

    @epb_hook.setter
    def epb_hook(self, f):
        self._epb_hook = f
        if f is not None:
            self._src.direct_reads()

    def _interface(self, buf, pos, e, bo):
        lt, _res, snap = struct.unpack_from(bo + "HHI", buf, pos + 8)
        opts = parse_options(buf, pos + 16, e - 4, bo, pos)
        tsresol, tsoffset, other = 6, 0, []
        for code, v in opts:
            if code == OPT_TSRESOL and len(v) >= 1:
                tsresol = v[0]
            elif code == OPT_TSOFFSET and len(v) == 8:
                tsoffset = struct.unpack(bo + "q", v)[0]
            else:
                other.append((code, v))
        fine = (tsresol & 0x7F) >= 30 if tsresol & 0x80 else tsresol > 9
        if fine and not self._warned_fine:
            self._warned_fine = True
            warn(f"{self.name}: interface timestamp resolution finer than 1 ns; "
                 "timestamps are rounded down to ns")
        if not ((tsresol & 0x80 == 0 and tsresol <= 6) or tsresol == 0x80):
            self.nanosecond = True
        return Interface(lt, snap, tsresol, tsoffset, other)

    def batches(self, lazy=False):
        """Yield lists of events in block order (one list per input chunk).

        With ``lazy``, a run of at least ``MIN_CHUNK`` consecutive EPBs of
        one interface within a chunk comes as one :class:`EpbChunk` instead
        (between lists of the events before and after it): what the GRO
        engine takes (:mod:`pcapgro.gro.cfast`).  Runs of EPBs are walked by
        :meth:`_epb_run` (compiled), or by :attr:`epb_hook` when set; every
        other block by :meth:`_blocks`; the end of a chunk goes to
        :meth:`_next_chunk`.  Raises as the class docstring says."""
        src = self._src
        buf = src.buf
        pos = 0
        end = len(buf)
        self._bo = BOM[buf[8:12]]
        self._first = True
        ifs = []        # per interface: (linktype, mul, off, conv, snaplen)
        hook = self.epb_hook
        if hook is not None:
            take = hook
        else:
            take = self._epb_chunks if lazy else self._epb_packets
        if lazy:
            src.direct_reads()      # the chunks are walked in place: no join copy
        while True:
            out = []
            try:
                pos, need = self._blocks(buf, pos, end, ifs, out, take)
            except _Bad as b:
                yield from _grouped(out, lazy)
                if self._first and b.pos == 0:
                    raise UnusableInput(f"{self.name}: {b.problem}") from None
                raise src.damaged(b.pos, b.problem) from None
            yield from _grouped(out, lazy)
            buf = self._next_chunk(pos, end, need, self._first)
            if buf is None:
                return
            pos = 0
            end = len(buf)

    def _blocks(self, buf, pos, end, ifs, out, take):
        """The whole blocks of ``buf`` from ``pos`` on: their events appended
        to ``out``, runs of EPBs by ``take(buf, pos, end, bo, ifs, out,
        packets, bytes) -> (pos, packets, bytes)``, the others here; the
        reader's counters counted.  Returns ``(pos, need)``: where the
        first block not whole in ``buf`` starts, and how many bytes from
        there are needed.  Raises _Bad."""
        bo = self._bo
        tl = _STRUCTS[bo][0]
        app = out.append
        n0 = nb = 0
        try:
            while end - pos >= 12:
                p0 = pos
                pos, n0, nb = take(buf, pos, end, bo, ifs, out, n0, nb)
                if pos != p0:
                    continue        # the next run may start here (another interface)
                bt, bl = tl(buf, pos)
                if bt == SHB:
                    sbo = BOM.get(buf[pos + 8:pos + 12])
                    if sbo is None:
                        raise _Bad(pos, "section header block with a bad byte-order magic")
                    if sbo != bo:
                        self._bo = bo = sbo
                        tl = _STRUCTS[bo][0]
                        bt, bl = tl(buf, pos)
                e = pos + bl
                if e > end:
                    if bl < 12 or bl & 3 or bl > MAX_BLOCK:
                        raise _Bad(pos, f"bad block length {bl} (block type 0x{bt:08x})")
                    return pos, bl
                if bl < 12 or bl & 3:
                    raise _Bad(pos, f"bad block length {bl} (block type 0x{bt:08x})")
                if tl(buf, e - 8)[1] != bl:
                    raise _Bad(pos, f"block total length {bl} does not match its "
                                    f"trailing length {tl(buf, e - 8)[1]}")
                if bt == EPB:
                    ev = self._epb(buf, pos, e, bl, bo, ifs)
                else:
                    ev = self._other_block(bt, buf, pos, e, bl, bo, ifs)
                    if bt == SPB:
                        ev.ts = self._time_before(out, ifs)
                if ev is not None:
                    app(ev)
                    if type(ev) is Packet:
                        n0 += 1
                        nb += len(ev.data)
                    elif bt == SHB:
                        self._first = False
                pos = e
            return pos, 12
        finally:
            self.packets += n0
            self.packet_bytes += nb
            self._prev_ts = self._time_before(out, None)

    def _time_before(self, out, ifs):
        """The time (ns) an SPB gets, with ``out`` the events of this chunk
        so far: an SPB carries none (pcapng 4.4), so it takes the time of
        the packet before it in its section, or, first in its section, the
        time origin of interface 0 (its if_tsoffset).  This keeps it in its
        place for GRO's NAPI timing, and gives an aggregate it starts a time
        an EPB of its interface can hold (0 would lie before the offset).
        With ``ifs`` None: the last packet's time, or None (none in the
        section)."""
        for ev in reversed(out):
            t = type(ev)
            if t is Packet:
                return ev.ts
            if t is EpbChunk:
                return ev.last_time()
            if t is Section:
                break
        else:
            if self._prev_ts is not None:
                return self._prev_ts
        if ifs is None:
            return None
        _lt, mul, off, conv, _snap = ifs[0]
        return off if conv is None else conv(0)

    def _epb_run(self, buf, pos, end, bo, ifs):
        """The run of EPBs from ``pos`` that the reader's checks pass (as
        :meth:`_epb`), all of one interface: an EpbChunk of them (empty
        when none), the position after them and their captured bytes."""
        c = EpbChunk()
        c.buf = buf
        c.recs = recs = []
        c.hl = 28
        c.byteorder = bo
        if _native is not None:
            pos, iface, nb = _native.epbs(buf, pos, end, bo == ">", len(ifs), recs)
        else:
            pos, iface, nb = _epb_run_py(buf, pos, end, bo, len(ifs), recs)
        if recs:
            c.iface = iface
            c.linktype, c.mul, c.tsoff, c.conv, _ = ifs[iface]
        return c, pos, nb

    def _epb_chunks(self, buf, pos, end, bo, ifs, out, n0, nb):
        """batches(lazy=True)'s ``take``: a run of EPBs as one EpbChunk
        (as Packets when shorter than MIN_CHUNK)."""
        c, pos, k = self._epb_run(buf, pos, end, bo, ifs)
        n = len(c.recs)
        if n >= MIN_CHUNK:
            out.append(c)
        elif n:
            out += c.packets()
        return pos, n0 + n, nb + k

    def _epb_packets(self, buf, pos, end, bo, ifs, out, n0, nb):
        """batches()'s ``take``: a run of EPBs as Packets."""
        c, pos, k = self._epb_run(buf, pos, end, bo, ifs)
        if c.recs:
            out += c.packets()
        return pos, n0 + len(c.recs), nb + k

    def _epb(self, buf, pos, e, bl, bo, ifs):
        """The Packet of one EPB at ``buf[pos:e]`` (its length already
        checked against the trailer) that no run took.  Raises _Bad."""
        if bl < 32:
            raise _Bad(pos, f"bad block length {bl} for an enhanced packet block")
        iface, hi, lo, cl, ol = _STRUCTS[bo][1](buf, pos + 8)
        oe, lt, ts = _frame_place(pos, e, bl, cl, iface, hi, lo, ifs, "an enhanced packet block")
        return Packet(ts, buf[pos + 28:pos + 28 + cl], ol, iface, lt, None if oe == e - 4 else
                      _packet_meta(BLOCK_EPB, parse_options(buf, oe, e - 4, bo, pos), bo))

    def _other_block(self, bt, buf, pos, e, bl, bo, ifs):
        """One block other than an EPB at ``buf[pos:e]`` (its length already
        checked against the trailer) -> the event to yield, or None (a
        do-not-copy custom block).  An IDB appends its interface to ``ifs``;
        an SHB clears it.  Raises _Bad(pos, problem)."""
        if bt == SPB:
            if not ifs:
                raise _Bad(pos, "simple packet block before any interface")
            if bl < 16:
                raise _Bad(pos, f"bad block length {bl} for a simple packet block")
            ol = struct.unpack_from(bo + "I", buf, pos + 8)[0]
            lt, snap = ifs[0][0], ifs[0][4]
            cl = min(ol, bl - 16)
            if snap and snap < cl:
                cl = snap
            return Packet(0, buf[pos + 12:pos + 12 + cl], ol, 0, lt, PacketMeta(BLOCK_SPB))
        if bt == IDB:
            if bl < 20:
                raise _Bad(pos, f"bad block length {bl} for an interface block")
            ev = self._interface(buf, pos, e, bo)
            mul, off, conv = ts_to_ns(ev.tsresol, ev.tsoffset)
            ifs.append((ev.linktype, mul, off, conv, ev.snaplen))
            return ev
        if bt == SHB:
            if bl < 28:
                raise _Bad(pos, f"bad block length {bl} for a section header block")
            major, minor = struct.unpack_from(bo + "HH", buf, pos + 12)
            if major != 1:
                raise _Bad(pos, f"unsupported pcapng version {major}.{minor}")
            opts = parse_options(buf, pos + 24, e - 4, bo, pos)
            ifs.clear()
            return Section(bo, opts, major, minor)
        if bt == PB:
            return self._obsolete_packet(buf, pos, e, bl, bo, ifs)
        if bt == CB_NOCOPY:
            if bl < 16:
                raise _Bad(pos, f"bad block length {bl} for a custom block")
            return None
        if bt in _CHECK:
            _CHECK[bt](buf, pos, e, bl, bo)
        return Block(bt, buf[pos + 8:e - 4])

    def _obsolete_packet(self, buf, pos, e, bl, bo, ifs):
        """An obsolete Packet Block -> Packet (pack_flags as epb_flags, a
        non-zero drops count as epb_dropcount).  Raises _Bad."""
        if bl < 32:
            raise _Bad(pos, f"bad block length {bl} for a packet block")
        iface, drops, hi, lo, cl, ol = struct.unpack_from(bo + "HHIIII", buf, pos + 8)
        oe, lt, ts = _frame_place(pos, e, bl, cl, iface, hi, lo, ifs, "a packet block")
        meta = _packet_meta(BLOCK_PB, parse_options(buf, oe, e - 4, bo, pos), bo)
        if drops and drops != 0xFFFF:
            meta.options.append((OPT_DROPCOUNT, struct.pack(bo + "Q", drops)))
        return Packet(ts, buf[pos + 28:pos + 28 + cl], ol, iface, lt, meta)

    def _next_chunk(self, pos, end, need, first):
        """After a chunk's blocks up to ``pos``: the next buffer (``need``
        bytes at least from ``pos`` on), or None at a clean end of input.
        Raises UnusableInput (no complete first SHB) or DamagedInput
        (truncated block)."""
        src = self._src
        if src.eof:
            if pos == end:
                return None
            if first:
                raise UnusableInput(f"{self.name}: truncated section header block "
                                    f"({end - pos} of {need} bytes)")
            raise src.damaged(pos, f"truncated block ({end - pos} bytes left, "
                                   f"{need} needed)")
        buf = src.refill(pos, need)
        end = len(buf)
        if end < need:
            if end == 0:
                return None
            if first:
                raise UnusableInput(f"{self.name}: truncated section header block "
                                    f"({end} of {need} bytes)")
            raise src.damaged(0, f"truncated block ({end} bytes left, {need} needed)")
        return buf


def _tick_code(conv):
    """The compiled GRO loop's unit code of an interface whose timestamps
    :func:`ts_to_ns` / :func:`ns_to_ts` convert with ``conv``: -k for a
    binary resolution 2**-k s (1 <= k <= 63), -(64 + e) for a decimal one
    of 10**-(9 + e) s (1 <= e <= 10), else None (pcapgro/gro/cfast.py
    _in_unit; RawBlocks.layout)."""
    k = getattr(conv, "binary", None)
    if k is not None:
        return -k if 1 <= k <= 63 else None
    e = getattr(conv, "decimal", None)
    return -(64 + e) if e is not None and 1 <= e <= 10 else None


def _options(bo, opts):
    """Encode ``[(code, value_bytes)]`` plus opt_endofopt (b"" if empty)."""
    if not opts:
        return b""
    h = struct.Struct(bo + "HH").pack
    parts = []
    for code, v in opts:
        parts.append(h(code, len(v)))
        parts.append(v)
        pad = (-len(v)) & 3
        if pad:
            parts.append(b"\0" * pad)
    parts.append(h(0, 0))
    return b"".join(parts)


def _block(bo, btype, body):
    """Encode one block: type, total length, body (padded), total length."""
    pad = (-len(body)) & 3
    bl = 12 + len(body) + pad
    return struct.pack(bo + "II", btype, bl) + body + b"\0" * pad + struct.pack(bo + "I", bl)


class PcapngWriter(WriterBase):
    """Writes a pcapng file to a binary file object.

    Args:
        f:         binary file object (pipe fine; seekable output lets IDB
                   snaplens be raised at close when a packet exceeds them).
        byteorder: None = every section in the byte order its Section event
                   had; '<' / '>' / '=' to force one.

    Events: :class:`Section` -> SHB (version and options kept, section length
    -1); :class:`Interface` -> IDB (options kept, ``if_tsresol`` /
    ``if_tsoffset`` written when not 6 / 0); :class:`Packet` -> EPB with
    the timestamp converted back to its interface's tsresol/tsoffset, and
    ``meta`` comments, flags and options as EPB options, or an SPB when
    ``meta.block == BLOCK_SPB`` and the SPB can express it (interface 0,
    captured length = min(orig_len, snaplen)); :class:`Block` verbatim.
    A Packet before any Section/Interface gets a default SHB (native byte
    order) and an IDB for its link type with nanosecond resolution.
    ``Packet.iface`` indexes the current section's interfaces; an index
    with no interface raises ValueError.

    Attributes: ``packets``, ``packet_bytes`` (captured bytes) written.
    """

    format = "pcapng"

    def __init__(self, f, byteorder=None):
        self._sink = ByteSink(f)
        self.byteorder = byteorder
        self._bo = None
        self._ifs = []          # (div, off, conv, snaplen_limit, index)
        self._idbs = []         # all IDBs: [snaplen field offset, snaplen, maxlen, bo, spb_cut]
        self.packets = 0
        self.packet_bytes = 0
        self._on_close = None
        self._on_abort = None
        self._closed = False
        self._warned_big = False

    def _section(self, ev):
        bo = self.byteorder or ev.byteorder
        if bo == "=" or bo not in ("<", ">"):
            bo = NATIVE
        self._bo = bo
        self._hdr = struct.Struct(bo + "IIIIIII").pack
        self._tail = [struct.Struct(bo + "%dxI" % p).pack for p in range(4)]
        self._ifs = []
        major = ev.major if ev.major == 1 else 1
        minor = ev.minor if ev.major == 1 else 0
        body = struct.pack(bo + "IHHq", 0x1A2B3C4D, major, minor, -1) + _options(bo, ev.options)
        self._sink.parts.append(_block(bo, SHB, body))

    def _interface(self, ev):
        if self._bo is None:
            self._section(Section(NATIVE))
        bo = self._bo
        opts = list(ev.options)
        if ev.tsresol != 6:
            opts.append((OPT_TSRESOL, bytes([ev.tsresol])))
        if ev.tsoffset:
            opts.append((OPT_TSOFFSET, struct.pack(bo + "q", ev.tsoffset)))
        body = struct.pack(bo + "HHI", ev.linktype, 0, ev.snaplen) + _options(bo, opts)
        sink = self._sink
        off = sink.tell() + 12      # snaplen field offset of this IDB
        sink.parts.append(_block(bo, IDB, body))
        div, toff, conv = ns_to_ts(ev.tsresol, ev.tsoffset)
        rec = [off, ev.snaplen, 0, bo, False]
        self._idbs.append(rec)
        self._ifs.append((div, toff, conv, ev.snaplen or 0xFFFFFFFF, rec))

    def write(self, ev):
        """Write one event (Section, Interface, Packet or Block)."""
        t = type(ev)
        if t is Packet:
            self.write_batch((ev,))
        elif t is Interface:
            self._interface(ev)
        elif t is Section:
            self._section(ev)
        elif t is Block:
            if self._bo is None:
                self._section(Section(NATIVE))
            self._sink.parts.append(_block(self._bo, ev.type, ev.body))
        elif t is RawBlocks:
            self._raw_blocks(ev)
        else:
            raise TypeError(f"not a capture event: {ev!r}")

    def accepts_blocks(self, reader):
        """The EPB layout the compiled GRO loop may write for ``reader``'s
        records, or None; nothing may be written yet.

        ``(byteorder, div)`` when ``reader`` is a classic pcap (16-byte
        record headers, no FCS): its header events then become this
        section's SHB and its one IDB (interface 0, if_tsresol 9 or 6, no
        offset): EPB timestamps are ``ns // div``, fields in ``byteorder``
        ('<' or '>').

        ``(byteorder, None)`` when ``reader`` is a pcapng reader: its
        Section and Interface events become this file's SHBs and IDBs one
        for one, so a packet's interface index is its input one, and the
        EPBs are laid out per interface (RawBlocks.layout: its timestamp
        units, the section's byte order: ``byteorder``, or each section's
        own when None)."""
        from .pcap import PcapReader
        if self.packets or self._bo is not None:
            return None
        if type(reader) is PcapngReader:
            bo = self.byteorder
            if bo is not None and bo not in ("<", ">"):
                bo = NATIVE
            return (bo, None)
        if type(reader) is not PcapReader or reader.modified or reader.fcs_len is not None:
            return None
        bo = self.byteorder or reader.byteorder
        if bo not in ("<", ">"):
            bo = NATIVE
        self._agreed = (bo, 1 if reader.nanosecond else 1000)
        return self._agreed

    def _raw_blocks(self, ev):
        """Append RawBlocks ``ev`` (laid out as :meth:`accepts_blocks`
        agreed, or as ``ev.layout`` says).  Raises ValueError when the
        section written since is not the one agreed, or its interface
        ``ev.iface`` not the one laid out for (a bug, not bad input)."""
        ifs = self._ifs
        lay = ev.layout
        if lay is None:
            agreed = getattr(self, "_agreed", None)
            if (agreed is None or len(ifs) != 1 or self._bo != agreed[0]
                    or ifs[0][:3] != (agreed[1], 0, None)):
                raise ValueError("RawBlocks for a section other than the one agreed")
        elif (ev.iface >= len(ifs) or self._bo != lay[0]
                or ifs[ev.iface][:3] != (lay[1], lay[2], None) and not (
                    lay[1] < 0 and ifs[ev.iface][1] == lay[2]
                    and _tick_code(ifs[ev.iface][2]) == lay[1])):
            raise ValueError("RawBlocks for an interface other than the one laid out for")
        rec = ifs[ev.iface][4]
        if ev.maxcap > ifs[ev.iface][3] and ev.maxcap > rec[2]:
            rec[2] = ev.maxcap
        sink = self._sink
        sink.parts.append(ev.data)
        sink.size += len(ev.data)
        self.packets += ev.n
        self.packet_bytes += ev.nbytes
        if ev.maxcap > BIG_PACKET and not self._warned_big:
            self._warned_big = True
            warn(f"a packet of {ev.maxcap} bytes is larger than {BIG_PACKET}: written, but "
                 "Wireshark and libpcap-based tools (tcpdump, tcpreplay) may refuse it")
        if sink.size >= FLUSH:
            sink.flush()

    packet = write

    def write_batch(self, events):
        """Write a sequence of events; Packets without meta take the fast path.

        Raises:
            UnusableInput: a packet's timestamp does not fit the 64-bit EPB
                field in its interface's if_tsresol / if_tsoffset (before
                the epoch of the offset, or too far after it), or a length
                does not fit 32 bits.
            ValueError: a packet for an interface the section lacks."""
        try:
            self._write_batch(events)
        except struct.error:
            raise UnusableInput("a timestamp or length does not fit pcapng's fields for its "
                                "interface (if_tsresol / if_tsoffset): the time is before "
                                "the interface's offset or too far after it") from None

    def _write_batch(self, events):
        sink = self._sink
        app = sink.parts.append
        ifs = self._ifs
        hdr = self._hdr if self._bo is not None else None
        tail = self._tail if self._bo is not None else None
        n_pk = 0
        n_by = 0
        big = 0
        for ev in events:
            if type(ev) is Packet:
                if not ifs:
                    if self._bo is None:
                        self._section(Section(NATIVE))
                    self._interface(Interface(ev.linktype, 0, 9, 0, []))
                    hdr = self._hdr
                    tail = self._tail
                d = ev.data
                n = len(d)
                iface = ev.iface
                try:
                    div, off, conv, snap, rec = ifs[iface]
                except IndexError:
                    raise ValueError(f"packet for interface {iface}, but the output "
                                     f"section has {len(ifs)} interface(s)") from None
                if n > snap and n > rec[2]:
                    rec[2] = n
                if n > big:
                    big = n
                m = ev.meta
                if m is None:
                    t = (ev.ts - off) // div if conv is None else conv(ev.ts)
                    pad = (-n) & 3
                    bl = 32 + n + pad
                    app(hdr(EPB, bl, iface, t >> 32, t & 0xFFFFFFFF, n, ev.orig_len))
                    app(d)
                    app(tail[pad](bl))
                else:
                    self._packet_meta(ev, n, div, off, conv, snap, rec)
                n_pk += 1
                n_by += n
            else:
                self.write(ev)
                ifs = self._ifs
                if self._bo is not None:
                    hdr = self._hdr
                    tail = self._tail
        self.packets += n_pk
        self.packet_bytes += n_by
        if big > BIG_PACKET and not self._warned_big:
            self._warned_big = True
            warn(f"a packet of {big} bytes is larger than {BIG_PACKET}: written, but "
                 "Wireshark and libpcap-based tools (tcpdump, tcpreplay) may refuse it")
        sink.size += n_by + 32 * n_pk
        if sink.size >= FLUSH:
            sink.flush()

    def _packet_meta(self, ev, n, div, off, conv, snap, rec):
        bo = self._bo
        m = ev.meta
        d = ev.data
        pad = (-n) & 3
        app = self._sink.parts.append
        if (m.block == BLOCK_SPB and ev.iface == 0 and not m.comments and m.flags is None
                and not m.options and n == min(ev.orig_len, snap)):
            if n < ev.orig_len:
                rec[4] = True
            bl = 16 + n + pad
            app(struct.pack(bo + "III", SPB, bl, ev.orig_len))
            app(d)
            app(self._tail[pad](bl))
            return
        opts = [(OPT_COMMENT, c.encode("utf-8", "surrogateescape")) for c in m.comments]
        if m.flags is not None:
            opts.append((OPT_FLAGS, struct.pack(bo + "I", m.flags)))
        opts.extend(m.options)
        ob = _options(bo, opts)
        t = (ev.ts - off) // div if conv is None else conv(ev.ts)
        bl = 32 + n + pad + len(ob)
        app(self._hdr(EPB, bl, ev.iface, t >> 32, t & 0xFFFFFFFF, n, ev.orig_len))
        app(d)
        app(b"\0" * pad + ob + struct.pack(bo + "I", bl))

    def close(self):
        """Flush, raise IDB snaplens that a packet exceeded (seekable output;
        else warn), and close (rename a temp file into place when opened by
        :func:`pcapgro.capture.open_writer`)."""
        if self._closed:
            return
        if self._bo is None:
            self._section(Section(NATIVE))
        sink = self._sink
        sink.flush()
        for off, snap, maxlen, bo, spb_cut in self._idbs:
            if maxlen > snap and snap:
                if spb_cut or not sink.patch(off, struct.pack(bo + "I", maxlen)):
                    warn(f"an interface snaplen {snap} is smaller than a packet of "
                         f"{maxlen} bytes written on it")
        self._closed = True
        if self._on_close is not None:
            self._on_close()
