"""One stream as verify keeps it while reading: a :class:`Flow` (one side's
running state of a TCP stream direction or a UDP flow, with the packets
not compared yet) and a :class:`Window` (a stretch of those packets put
together for comparison: store, arrival order, segments, flags)."""

from __future__ import annotations

from .store import _Store

SYN, FIN, RST = 0x02, 0x01, 0x04


class Flow:
    """One side's running state of one stream (TCP direction, UDP flow).

    ``pending`` holds the packets not compared yet, in arrival order, as
    records ``(frame, start, nominal length, payload bytes, categories
    (frozenset or None), rejected by GRO (bool), timestamp ns or None)``;
    ``start`` is the absolute sequence number (TCP, unwrapped from the
    first packet's) or the payload offset (UDP, bytes of the flow so far).
    Everything else is O(1) per stream (``events`` grows with SYN/FIN/RST
    positions only, ``acks`` holds pure ACKs not compared yet)."""

    __slots__ = ("key", "gen", "last", "syn_seq", "npkts", "udp_end", "events", "acks",
                 "pending", "pending_bytes", "first_start", "pair", "n_acks", "last_ack_frame",
                 "dropped", "gre_cs")

    def __init__(self, key, gen):
        self.key, self.gen = key, gen
        self.last = None            # last absolute sequence number (unwrapping)
        self.syn_seq = None
        self.npkts = 0
        self.udp_end = 0
        self.events = {}            # (kind, position) -> first frame
        self.acks = []              # (ack, frame) of pure ACKs not compared yet
        self.n_acks = 0
        self.last_ack_frame = None
        self.pending = []
        self.pending_bytes = 0
        self.first_start = None
        self.pair = None
        self.dropped = False        # the stream is settled as different: keep nothing
        self.gre_cs = ""            # the GRE checksum word of its last packet (tshark's text)

    def abs_seq(self, raw):
        """Absolute (unwrapped) sequence number of 32-bit ``raw``."""
        if self.last is None:
            self.last = raw
            return raw
        d = (raw - self.last) & 0xFFFFFFFF
        if d >= 0x80000000:
            d -= 0x100000000
        self.last += d
        return self.last

    def add(self, rec):
        """Append one packet record (see the class docstring)."""
        if self.first_start is None:
            self.first_start = rec[1]
        if self.dropped:
            return
        self.pending.append(rec)
        self.pending_bytes += len(rec[3]) + 100 if rec[3] else 350  # window.record_cost
        p = self.pair
        if p is not None and self.pending_bytes >= p.next_try:
            p.due.add(p)


class Window:
    """A stretch of one side's packets of one stream, ready to compare:
    ``store`` (first-seen bytes, arrival order), ``segs`` [(frame, start,
    nominal, captured)], ``flagged`` [(start, end, frame, categories)],
    ``rej`` (frames GRO rejects before matching), ``ts_of`` {frame: ns}.
    Bytes below ``floor`` (compared in an earlier window) are not stored
    again: data sent again there is a retransmission of compared bytes."""

    __slots__ = ("key", "gen", "store", "segs", "flagged", "rej", "ts_of", "npkts", "udp_end",
                 "events", "_idx")

    def __init__(self, key, gen, records=(), floor=None):
        self.key, self.gen = key, gen
        self.store = _Store()
        self.segs, self.flagged, self.rej, self.ts_of = [], [], set(), {}
        self.npkts = 0
        self.udp_end = 0
        self.events = {}            # set by the caller: the stream's SYN/FIN/RST
        self._idx = None
        add = self.store.add
        for fr, a, n, payload, cats, rej, ts in records:
            self.segs.append((fr, a, n, len(payload)))
            self.ts_of[fr] = ts
            if payload:
                if floor is not None and a < floor:
                    add(floor, payload[floor - a:], fr)
                else:
                    add(a, payload, fr)
            if cats:
                self.flagged.append((a, a + n, fr, cats))
            if rej:
                self.rej.add(fr)
        self.npkts = len(self.segs)

    def find_seg(self, pos, nominal=False, after=False):
        """Frame of the first segment (capture order) carrying ``pos``
        (declared range when nominal); after: the segment starting first
        after ``pos``."""
        if after:
            best = None
            for fr, s, n, c in self.segs:
                if s > pos and (best is None or s < best[1]):
                    best = (fr, s)
            return best[0] if best else None
        for fr, s, n, c in self.segs:
            if s <= pos < s + (n if nominal else c):
                return fr
        return None

    def flag_index(self):
        """({category: set of (start, end) of flagged segments}, set of the
        (start, end) of every segment)."""
        if self._idx is None:
            idx = {}
            for st, e, fr, cats in self.flagged:
                for c in cats:
                    idx.setdefault(c, set()).add((st, e))
            self._idx = (idx, {(st, st + n) for fr, st, n, c in self.segs})
        return self._idx
