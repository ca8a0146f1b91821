"""Streaming comparison: each stream's packets are compared window by
window while both captures are read, so that memory stays flat whatever
their size.

A window ends at a *cut*: a position P (TCP sequence number, UDP payload
offset) where, on both sides, every packet that arrived before the cut
carries only data below P and every packet after it only data from P on,
and (TCP) the data below P has no hole.  Data below a cut can then only
come again as a retransmission of bytes already compared, which the
first-seen rule ignores anyway, so the windows together give the verdict
the whole streams would.  GRO's only reordering (a rejected packet passed
ahead of its flow's held aggregate, at most 64 segments) never straddles a
cut.  When no cut can be found while a stream holds :data:`HARD_BYTES`
(a packet lost, a hole IN has too, data reordered beyond any GRO window),
the window is closed where it is: what could not be matched in it is a
reported difference, not a reason to keep everything.
"""

from __future__ import annotations

from .compare import (compare_tcp_window, compare_udp_window, compare_events, compare_acks,
                      compare_other)
from .fields import _key_str
from .stream import Window

TRY_BYTES = 1 << 20         # pending bytes (per side) between two cut attempts
HARD_BYTES = 32 << 20       # pending bytes (per side) that force a window closed
RECORD_COST = 100           # bytes a record costs beyond its payload (pending_bytes)
EMPTY_COST = 350            # a record without payload: its tuple ~212 bytes (tracemalloc)
                            # and a pure ACK's acks entry ~132 (stream.Flow.add)


def record_cost(rec):
    """What one pending record counts toward TRY_BYTES / HARD_BYTES."""
    return len(rec[3]) + RECORD_COST if rec[3] else EMPTY_COST
UDP_REJ_MARGIN = 70         # datagrams kept away from a cut around a rejected one (> 64)


class Pair:
    """IN's and OUT's :class:`~.stream.Flow` of one stream (either may be
    None while that side has not shown it) and what was compared of it."""

    __slots__ = ("proto", "key", "gen", "flows", "floor", "failed", "acks_ok", "bytes",
                 "next_try", "due", "name", "windows")

    def __init__(self, proto, key, gen, due):
        self.proto, self.key, self.gen, self.due = proto, key, gen, due
        self.flows = [None, None]
        self.floor = None           # data below it is compared
        self.failed = False         # a content difference was reported
        self.acks_ok = True
        self.bytes = 0              # IN payload bytes compared
        self.next_try = TRY_BYTES
        self.windows = 0            # windows compared
        self.name = _key_str(key, proto) + (f" #{gen + 1}" if gen else "")

    def base(self):
        """Where relative sequence numbers count from (IN's SYN + 1, else
        its first segment)."""
        a = self.flows[0]
        if a is None:
            return 0
        return a.syn_seq + 1 if a.syn_seq is not None else (a.first_start or 0)


def _clean(recs, udp):
    """{P: index} of the positions where ``recs`` (one side's pending
    records, arrival order) can be cut: before index i, data below P
    only; from i on, new data from P on only.  Data a record carries that
    an earlier record already reached (a retransmission) does not count:
    it adds nothing to the store on either side of a cut.  Records
    without data count on neither side."""
    n = len(recs)
    if udp:
        return {r[1]: i for i, r in enumerate(recs) if i}
    inf = float("inf")
    new = [inf] * n             # where each record's new data starts (inf: none)
    top = -inf
    for i, r in enumerate(recs):
        if r[2] > 0:
            e = r[1] + r[2]
            if e > top:
                new[i] = r[1] if r[1] > top else top
                top = e
    suf = [inf] * (n + 1)
    m = inf
    for i in range(n - 1, -1, -1):
        if new[i] < m:
            m = new[i]
        suf[i] = m
    out = {}
    top = -inf
    last = None
    for i, r in enumerate(recs):
        if r[2] > 0:
            if i and top <= r[1] and suf[i] >= r[1] and r[1] not in out:
                out[r[1]] = i
            e = r[1] + r[2]
            if e > top:
                top = e
            last = i
    if last is not None and last + 1 < n and top not in out:
        # after the last data record only records without data (a pure-ACK
        # tail: the stream's data ended, or paused): cut behind them at the
        # data's end, or such a stream holds its ACKs until HARD_BYTES
        out[top] = n
    return out


def _reach(recs, floor):
    """How far the data of ``recs`` (declared lengths) covers [floor (or
    its lowest start), ...) without a hole.  At a clean position P the data
    before the cut is exactly the data below P, so that data has no hole
    when P <= this."""
    iv = sorted((r[1], r[1] + r[2]) for r in recs if r[2] > 0)
    if not iv:
        return floor
    reach = iv[0][0] if floor is None else floor
    for s, e in iv:
        if s > reach:
            break
        if e > reach:
            reach = e
    return reach


def _rej_near(recs, i, margin):
    return any(r[5] for r in recs[max(i - margin, 0):i + margin])


def find_cut(pair, forced=False):
    """(i_IN, i_OUT, P): the indexes to cut the two pending lists at and the
    position P there (None: both lists whole), or None when there is no
    cut.  ``forced``: a hole is accepted, and without any clean position
    both lists are cut whole."""
    a, b = pair.flows
    ra, rb = a.pending, b.pending
    if not ra or not rb:        # one side has nothing pending (yet): no cut inside both
        return (len(ra), len(rb), None) if forced else None
    if not ra[-1][2] and not rb[-1][2] and not any(r[2] for r in ra) and not any(r[2] for r in rb):
        return len(ra), len(rb), None   # no data: pure ACKs only
    udp = pair.proto == "udp"
    ca, cb = _clean(ra, udp), _clean(rb, udp)
    limit = None
    if not udp and not forced:
        ha, hb = _reach(ra, pair.floor), _reach(rb, pair.floor)
        limit = min(ha, hb) if ha is not None and hb is not None else None
        if limit is None:
            return None
    for p in sorted(set(ca) & set(cb), reverse=True):
        if pair.floor is not None and p <= pair.floor:
            break
        if limit is not None and p > limit:
            continue
        i, j = ca[p], cb[p]
        if udp and (_rej_near(ra, i, UDP_REJ_MARGIN) or _rej_near(rb, j, UDP_REJ_MARGIN)):
            continue
        return i, j, p
    return (len(ra), len(rb), None) if forced else None


class Comparer:
    """Drives the streaming comparison of IN and OUT into a Verdict.

    The sides call :meth:`on_flow` for every new stream; the tshark reader
    calls :meth:`after_chunk` after each chunk of lines; :meth:`finish`
    compares what is left once both captures are read."""

    def __init__(self, v, csum):
        self.v, self.csum = v, csum
        self.pairs = {}             # (proto, key, gen) -> Pair
        self.due = set()            # pairs that hold TRY_BYTES more than at their last try
        self.sides = None
        self.other_ok = True

    def on_flow(self, side, proto, flow):
        k = (proto, flow.key, flow.gen)
        p = self.pairs.get(k)
        if p is None:
            p = self.pairs[k] = Pair(proto, flow.key, flow.gen, self.due)
        p.flows[side.index] = flow
        flow.pair = p

    def after_chunk(self):
        a, b = self.sides
        if self.other_ok and a.other and b.other:
            self.other_ok = compare_other(self.v, a, b)
            if not self.other_ok:
                a.other.clear(), b.other.clear()
        if not self.other_ok:
            a.other.clear(), b.other.clear()
        while self.due:
            self._try(self.due.pop())

    def _try(self, pair):
        a, b = pair.flows
        held = max(f.pending_bytes for f in pair.flows if f is not None)
        if a is None or b is None:
            if held >= HARD_BYTES // 2:         # the stream is missing from one side
                self._close(pair, None)
            return
        cut = find_cut(pair, forced=pair.failed)
        if cut is None and held >= HARD_BYTES:
            cut = find_cut(pair, forced=True)
        if cut is not None:
            self._close(pair, cut)
        held = max(a.pending_bytes, b.pending_bytes)
        pair.next_try = held + TRY_BYTES

    def _close(self, pair, cut):
        """Compare the windows before ``cut`` (None: everything pending)."""
        wins, ends = [], []
        for k, f in enumerate(pair.flows):
            if f is None:
                wins.append(None)
                continue
            i = len(f.pending) if cut is None or cut[2] is None else cut[k]
            recs = f.pending[:i]
            del f.pending[:i]
            f.pending_bytes = sum(record_cost(r) for r in f.pending)
            ends += [r[1] + r[2] for r in recs]
            w = Window(f.key, f.gen, recs, pair.floor)
            w.events = f.events
            wins.append(w)
        wa, wb = wins
        floor = cut[2] if cut is not None and cut[2] is not None else max(ends, default=None)
        if pair.proto == "tcp" and floor is not None and (pair.floor is None or floor > pair.floor):
            pair.floor = floor
        pair.windows += 1
        if wa is not None:
            pair.bytes += wa.store.nbytes()
        cmp = compare_tcp_window if pair.proto == "tcp" else compare_udp_window
        args = (pair.base(),) if pair.proto == "tcp" else ()
        if cmp(self.v, self.csum, wa, wb, pair.name, *args, content=not pair.failed):
            pair.failed = True
        if self.v.unnamed and wb is not None:
            self._name_holes(pair.name, wb)
        for f in pair.flows:
            if f is not None and pair.failed and (wa is None or wb is None):
                f.dropped = True            # missing / extra stream: keep nothing more
                f.pending.clear()
                f.pending_bytes = 0
        self._acks(pair)

    def _name_holes(self, name, wb):
        """Name the holes of stream ``name`` reported before their next OUT
        frame was read (Verdict.unnamed) by the OUT frame of window ``wb``
        that starts first after each: the frame that follows the hole, as
        when it is in the hole's own window."""
        left = []
        for u in self.v.unnamed:
            fr = wb.find_seg(u[1], after=True) if u[0] == name else None
            if fr is None:
                left.append(u)
            else:
                u[2]["out_frame"] = fr
        self.v.unnamed = left

    def _acks(self, pair, final=False):
        a, b = pair.flows
        if pair.proto != "tcp":
            return
        if a is None or b is None or not pair.acks_ok:
            for f in (a, b):
                if f is not None and (not pair.acks_ok or final or len(f.acks) > 100_000):
                    f.acks.clear()
            return
        pair.acks_ok = compare_acks(self.v, a, b, pair.name, final)

    def finish(self):
        """Compare everything still pending, then the whole streams' events."""
        v = self.v
        a, b = self.sides
        if self.other_ok:
            compare_other(v, a, b, final=True)
        for k in sorted(self.pairs, key=lambda k: (k[0], str(k[1]), k[2])):
            pair = self.pairs[k]
            fa, fb = pair.flows
            if (fa is not None and fa.pending) or (fb is not None and fb.pending) or not pair.windows:
                self._close(pair, None)
            self._acks(pair, final=True)
            if pair.proto == "tcp" and fa is not None and fb is not None:
                compare_events(v, fa, fb, pair.name)
