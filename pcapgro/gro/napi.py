"""The work-driven NAPI poll model (issue 21, ``poll_model='work'``).

A capture shows no poll boundaries.  The gap model (``poll_gap_ns``) ends a
poll at a long arrival gap.  This model follows the receiver's work instead
(net/core/dev.c __napi_poll, napi_complete_done; drivers/net/veth.c
veth_poll): a packet that finds the device idle starts a poll
``poll_wake_ns`` later; the poll takes every packet that has arrived by the
time it gets to it, each costing ``poll_rx_ns`` of receive work; it ends
when the queue is empty (the next packet arrives after the poll clock) or
when ``napi_budget`` packets were taken.  Handing its packets up (the GRO
normal list, ``gro_normal_batch``) then keeps the receiver busy for
``deliver_ns`` plus ``deliver_seg_ns`` per packet of the poll; packets that
arrive meanwhile wait in the queue and start the next poll as soon as the
delivery is done, without a wake-up delay.

Boundaries depend on arrival times only (delivery cost is charged per
packet taken, not per aggregate made), so they are computed ahead of GRO
and the same for every path: the compiled loop runs the same clock
(``_native.c`` work_clock), its state handed to it and back with each run.

:class:`PollShifts` says where the boundaries would move with the timing
off by a factor of two (the statistics' ``poll_ends.would_move``).
"""

from .flush import Flush

__all__ = ["PollClock", "PollShifts", "GAP_BUCKETS", "gap_bucket", "gap_label"]


class PollClock:
    """Where the work model ends polls, packet by packet, across batches.

    Attributes:
        wake, rx, dp, ds: the model's costs, ns (``poll_wake_ns``,
                          ``poll_rx_ns``, ``deliver_ns``, ``deliver_seg_ns``).
        budget:           packets per poll, 0 = none.
        open:             a poll is running.
        now:              the poll clock: when the poll is done with the
                          packets taken so far, ns.
        n:                packets taken by the running poll.
        free:             when the last delivery ends, ns.
    """

    def __init__(self, cfg, scale=1.0):
        """``cfg``: a GROConfig; ``scale``: every cost multiplied by it
        (what :mod:`pcapgro.gro.stats` uses to count boundaries that move
        when the costs are off by a factor of two)."""
        self.wake = int(cfg.poll_wake_ns * scale)
        self.rx = int(cfg.poll_rx_ns * scale)
        self.dp = int(cfg.deliver_ns * scale)
        self.ds = int(cfg.deliver_seg_ns * scale)
        self.budget = cfg.napi_budget
        self.open = False
        self.now = 0
        self.n = 0
        self.free = None

    def ends(self, ts):
        """Poll boundaries among packets arriving at ``ts`` (ns, in order;
        continuing the previous call's packets): a list of (i, reason):
        a new poll starts at packet i (0: before this call's first), the
        one before it ended for ``reason`` (Flush.POLL_END: its queue was
        empty; Flush.BUDGET: it took ``budget`` packets)."""
        out = []
        rx, budget = self.rx, self.budget
        now, n, is_open, free = self.now, self.n, self.open, self.free
        for i, t in enumerate(ts):
            if is_open:
                if budget and n >= budget:
                    out.append((i, Flush.BUDGET))
                    now = max(now + self.dp + self.ds * n, t) + rx
                    n = 1
                    continue
                if t <= now:
                    now += rx
                    n += 1
                    continue
                out.append((i, Flush.POLL_END))
                free = now + self.dp + self.ds * n
            start = free if free is not None and t <= free else t + self.wake
            now = start + rx
            n = 1
            is_open = True
        self.now, self.n, self.open, self.free = now, n, is_open, free
        return out


# poll ends by the arrival gap that made them (GROStats.poll_gaps): bucket
# 0 under 1 µs, k = 1..10 from 2**(k-1) to 2**k µs, 11 from 1024 µs on
GAP_BUCKETS = 12


def gap_bucket(d):
    """The GAP_BUCKETS bucket of an arrival gap of ``d`` ns (int)."""
    us = d // 1000
    return 0 if us <= 0 else min(us.bit_length(), GAP_BUCKETS - 1)


def gap_label(k):
    """Bucket ``k``'s range in µs, as the statistics name it."""
    if k == 0:
        return "<1"
    if k == GAP_BUCKETS - 1:
        return f">={1 << (k - 1)}"
    return f"{1 << (k - 1)}-{1 << k}"


class PollShifts:
    """Where poll boundaries would move if the timing were off by a factor
    of two: the work model's costs (a PollClock each for x2 and x0.5, whose
    state the compiled loop carries too) or the gap model's ``poll_gap_ns``
    (2 * gap, gap >> 1).  Only a boundary where GRO holds packets moves an
    aggregate end, so the engine counts the packets :meth:`points` names
    while it holds some (GROStats.moved)."""

    def __init__(self, cfg):
        if cfg.poll_model == "work":
            self.clocks = (PollClock(cfg, 2), PollClock(cfg, 0.5))
        else:
            self.clocks = None
            self.gaps = (cfg.poll_gap_ns, cfg.poll_gap_ns * 2, cfg.poll_gap_ns >> 1)

    def points(self, ts, last, starts):
        """Packets of ``ts`` (arrival times, ns, continuing from one at
        ``last``, ns or None) where a poll would start under x2 or x0.5 but
        does not now (``starts``: the indexes where one does), or the other
        way round: a list of (i, moved under x2, moved under x0.5),
        ascending.  Under the gap model a packet after a budget end is not
        one (the budget, not the gap, ends that poll)."""
        now = set(starts)
        if self.clocks is not None:
            x2 = now.symmetric_difference(i for i, _ in self.clocks[0].ends(ts))
            xh = now.symmetric_difference(i for i, _ in self.clocks[1].ends(ts))
            return [(i, i in x2, i in xh) for i in sorted(x2 | xh)]
        # only a gap between 2 * gap and gap >> 1 can move (either order:
        # a negative gap reverses them)
        lo, hi = sorted(self.gaps[1:])
        near = [i for i in range(1, len(ts)) if lo < ts[i] - ts[i - 1] <= hi]
        if last is not None and ts and lo < ts[0] - last <= hi:
            near.insert(0, 0)
        out = []
        for i in near:
            m2, mh = self.gap_moves(ts[i] - (ts[i - 1] if i else last))
            if m2 or mh:
                out.append((i, m2, mh))
        return out

    def gap_moves(self, d):
        """Gap model: would a poll end at an arrival gap of ``d`` ns move
        (appear or go) under 2 * gap, under gap >> 1: (bool, bool)."""
        gap, g2, gh = self.gaps
        end = d > gap
        return end != (d > g2), end != (d > gh)
