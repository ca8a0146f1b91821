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
and the same for every path.
"""

from .flush import Flush

__all__ = ["PollClock"]


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
