"""split list in, list out (``GSOSplitter.transform_batches``).

The pipeline hands the reader's batches in whole: lists of events, or, from
classic pcap, ``RecordChunk`` objects (records not yet made into Packets).
Without raw output (``GSOSplitter.raw_out`` False, or no compiled
segmenter) the batches are flattened into events for
:meth:`GSOSplitter.process`.  With it, each chunk's records are split one
by one in input order (the next record's time bounds the segments'
timestamps, as in ``process``) and the output is laid out as pcap records
in the input's format (:class:`pcapgro.gso.cseg.RecordOut`): a record
passed unchanged is copied verbatim, a changed one is encoded, and a
super-frame's segments are written by the compiled segmenter.
"""

from ..capture import _stream
from ..errors import DamagedInput
from ..record import Packet
from . import cseg
from .engine import _RAW

__all__ = ["transform_batches"]

BATCH = 1024


def _flatten(batches, sp):
    for b in batches:
        if getattr(b, "lazy", False):
            sp.py_records += len(b)
            yield from cseg.chunk_packets(b)
        else:
            yield from b


def _lists(events):
    out = []
    try:
        for ev in events:
            out.append(ev)
            if len(out) >= BATCH:
                yield out
                out = []
    except DamagedInput:
        # everything before the damage goes out before the error does
        if out:
            yield out
        raise
    if out:
        yield out


def transform_batches(sp, batches):
    """Split the events of ``batches`` (iterable of lists / RecordChunks)
    with GSOSplitter ``sp``; yields lists of events (Packets, other events,
    :class:`~pcapgro.record.RawRecords`).

    Raises:
        what :meth:`GSOSplitter.process` raises; DamagedInput after
        everything before the damage has been yielded.
    """
    if not (sp.raw_out and cseg.available()):
        yield from _lists(sp.process(_flatten(batches, sp)))
        return
    _stream.keep_heap()
    st = _RawState(sp)
    try:
        for b in batches:
            if getattr(b, "lazy", False) and b.hl == 16:
                st.chunk(b)
            else:
                for ev in (cseg.chunk_packets(b) if getattr(b, "lazy", False) else b):
                    st.event(ev)
            out = st.take()
            if out:
                yield out
    except DamagedInput:
        st.flush()
        out = st.take()
        if out:
            yield out
        raise
    st.flush()
    out = st.take()
    if out:
        yield out
    sp._finish()


class _RawState:
    """The record path's state across chunks: the packet held until the
    next one's time is known, the record buffer, the output list."""

    def __init__(self, sp):
        self.sp = sp
        self.held = None        # Packet whose split waits for the next time
        self.held_rec = None    # (memoryview, data offset) of its verbatim record
        self.held_lazy = False  # it is a record of a RecordChunk (sp.py_records)
        # or: a chunk's last record, for the compiled loop once the next
        # time is known: (chunk_run function, RecordChunk, index)
        self.held_c = None
        self.rec = None         # cseg.RecordOut (also sp._rec) while records are laid out
        self.fmt = None         # (byteorder, ns per fraction unit) of the chunks
        self.out = []

    def _open(self, byteorder, mul):
        swap = byteorder != cseg.NATIVE_BO
        r = self.rec
        if r is None or r.mul != mul or r.swap != swap:
            self._close()
            r = self.rec = cseg.RecordOut(byteorder, mul, swap)
        self.sp._rec = r

    def _close(self):
        """Records laid out so far go to the output list; Packets next."""
        if self.rec is not None:
            raw = self.rec.take()
            if raw is not None:
                self.out.append(raw)
        self.rec = None
        self.sp._rec = None

    def _held_c(self, next_ts):
        """The held chunk record through the compiled loop (its next
        record at ``next_ts``, None: none); when the loop does not take
        it, it becomes the held Packet."""
        run, lb, i = self.held_c
        self.held_c = None
        r = self.rec
        if r is not None and (r.swap, r.mul) == run.fmt and run.one(
                r, i, -1 if next_ts is None else next_ts):
            return True
        s, cap, orig, ts = cseg.chunk_records(lb)(i)
        self.held = Packet(ts, bytes(lb.buf[s:s + cap]), orig, 0, lb.linktype, None)
        self.held_rec = None
        self.held_lazy = True
        return False

    def _emit(self, next_ts):
        """Split the held packet (into the record buffer when one is open)."""
        if self.held_c is not None and self._held_c(next_ts):
            return
        p = self.held
        self.held = None
        self.sp.py_records += self.held_lazy
        res = self.sp.split(p, next_ts)
        if res is _RAW:
            return
        r = self.rec
        if r is None:
            self.out.extend(res)
        elif len(res) == 1 and res[0] is p and self.held_rec is not None:
            mv, off = self.held_rec
            r.record(mv, off, len(p.data), p.ts)
        else:
            for q in res:
                r.packet(q)

    def _pending(self):
        return self.held is not None or self.held_c is not None

    def chunk(self, lb):
        """Split every record of RecordChunk ``lb``: runs of records the
        compiled loop handles (:meth:`GSOSplitter._chunk_run`) go straight
        into the record buffer, each other record through
        :meth:`GSOSplitter.split` as a Packet (its header read alone:
        :func:`cseg.chunk_records`); the chunk's last record, when the
        loop stops there, waits for the next record's time and is offered
        to the compiled loop again then (``held_c``)."""
        at = cseg.chunk_records(lb)
        n = len(lb)
        # the packet held over from the last chunk is split into this
        # chunk's records (the compiled segmenter: same bytes)
        self.fmt = (lb.byteorder, lb.mul)
        self._open(*self.fmt)
        if self._pending():
            self._emit(at(0)[3] if n else None)
        run = self.sp._chunk_run(lb)    # None: not untagged Ethernet, an FCS, ...
        mv = memoryview(lb.buf)
        lt = lb.linktype
        i = 0
        while i < n:
            if self._pending():
                self._emit(at(i)[3])
            if run is not None:
                i = run(i, self.rec)
                if i >= n:
                    break
                if i == n - 1:
                    self.held_c = (run, lb, i)
                    break
            s, cap, orig, ts = at(i)
            self.held = Packet(ts, mv[s:s + cap].tobytes(), orig, 0, lt, None)
            self.held_rec = (mv, s)
            self.held_lazy = True
            i += 1
        # the held Packet is encoded, not copied from the chunk, when it is
        # split later (held_c keeps its chunk: the reader never modifies a
        # RecordChunk's buffer)
        self.held_rec = None

    def event(self, ev):
        """One event of a list batch."""
        if type(ev) is Packet:
            if self._pending():
                self._emit(ev.ts)
            self._close()
            self.held = ev
            self.held_rec = None
            self.held_lazy = False
            return
        self.flush()
        self._close()
        self.out.extend(self.sp._drain([ev]))

    def flush(self):
        """Split the held packet, with no next time known (into records of
        the last chunk's format, when there was one)."""
        if self._pending():
            if self.fmt is not None and self.rec is None:
                self._open(*self.fmt)
            self._emit(None)

    def take(self):
        """The output list so far (records closed first)."""
        self._close()
        out, self.out = self.out, []
        return out
