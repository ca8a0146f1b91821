"""The engine core: one NAPI instance's GRO lists.

Mirrors net/core/gro.c of Linux 6.18 -- dev_gro_receive's hold and
gro_flush_oldest, __gro_flush, napi_gro_complete, skb_gro_receive's
bookkeeping -- and the poll-end rules of net/core/dev.c
(napi_complete_done).  It knows no protocol: headers are parsed, matched and
rewritten by the modules of the offload table (:mod:`pcapgro.gro.offload`);
the loops that feed it packets are in :mod:`pcapgro.gro.engine`.
"""

import zlib

from . import annotate
from .complete import build
from .config import GRO_HASH_BUCKETS, MAX_GRO_SKBS, GROConfig
from .flush import Flush
from .offload import inet_offload, l3_offload
from .seg import Agg
from .stats import GROStats

__all__ = ["NAPI"]


class NAPI:
    """The GRO state of one emulated NAPI instance (struct gro_node).

    Attributes:
        cfg:         the :class:`GROConfig`.
        stats:       the :class:`GROStats` counted so far.
        flows:       flow key -> Agg held for it.
        buckets:     8 lists of held Aggs, oldest first (gro_list.list).
        out:         events handed up since the caller last took them.
        last_out_ts: the latest time written in this section, ns: held
                     packets completed are stamped no earlier.
        limit:       gro_max_size, bytes (exclusive).
        idx:         input index of the packet in hand.
        last_ts:     arrival time of the last packet taken, ns, or None.
        in_poll:     packets taken by the current NAPI poll.
        parts_out:   True: an aggregate's ``Packet.data`` is the list of its
                     parts (header bytes, payload memoryviews), not joined.
    """

    def __init__(self, config=None):
        self.cfg = config or GROConfig()
        self.stats = GROStats()
        self.flows = {}
        self.buckets = [[] for _ in range(GRO_HASH_BUCKETS)]
        self.out = []
        self.last_out_ts = 0
        self.jiffy_ns = 1_000_000_000 // self.cfg.hz
        self.limit = self.cfg.gro_max_size
        self.idx = 0
        self.last_ts = None
        self.in_poll = 0
        self.parts_out = False

    # --------------------------------------------------------------- receive

    def pass_up(self, pkt, reason):
        """Hand ``pkt`` up unchanged (GRO_NORMAL) at its own time, counted
        under Pass ``reason``; ``last_out_ts`` is raised to its time if
        later.  Annotated output marks it when it overtakes held packets
        (:func:`pcapgro.gro.annotate.passed`)."""
        self.stats.passed[reason] += 1
        ts = pkt.ts
        if ts > self.last_out_ts:
            self.last_out_ts = ts
        if self.cfg.annotate:
            pkt = annotate.passed(pkt, self.idx, bool(self.flows))
        self.out.append(pkt)

    def flow_hash(self, key, family):
        """The 32-bit hash of the flow with key ``key`` (a Seg's) and IP
        ``family``: ``hash='flow'``: an RSS-like hash over the 4-tuple
        (addresses and ports only), never 0; else 0."""
        if self.cfg.hash != "flow":
            return 0
        return zlib.crc32(l3_offload(family).hash_input(key)) or 1

    def hold(self, seg, t, flist=False, h=None):
        """Put ``seg`` on its GRO list as a new head (gso_size := its
        payload length), completing the bucket's oldest if the bucket is
        full (gro_flush_oldest).  ``flist``: a fraglist aggregate; ``h``:
        the flow's hash when known (else computed from the key).  Returns
        the new Agg."""
        if h is None:
            h = self.flow_hash(seg.key, seg.family)
        b = self.buckets[h & (GRO_HASH_BUCKETS - 1)]
        if len(b) >= MAX_GRO_SKBS:
            self.complete(b[0], Flush.BUCKET_FULL, t)
        return self.adopt(seg, h, t // self.jiffy_ns, flist)

    def adopt(self, seg, h, age, flist=False):
        """Hold ``seg`` as a new head at the end of its bucket (flow hash
        ``h``, held since jiffy ``age``), with no room check: what
        :meth:`hold` does once there is room, and how the aggregates of the
        compiled loop are handed over (:mod:`pcapgro.gro.cfast`).  Returns
        the new Agg."""
        b = self.buckets[h & (GRO_HASH_BUCKETS - 1)]
        agg = Agg.start(seg, h, b, self.idx, None, age, flist)
        b.append(agg)
        self.flows[seg.key] = agg
        return agg

    def merge(self, agg, seg, psum):
        """skb_gro_receive / skb_gro_receive_list's bookkeeping: ``seg``
        joins ``agg`` (count, L3 size, the packet and its payload offset,
        input index and payload sum ``psum`` or None).  The protocol updates
        its own fields (TCP: next sequence number, FIN/PSH)."""
        agg.count += 1
        agg.size += seg.L
        agg.pkts.append(seg.pkt)
        agg.pays.append(seg.pay)
        agg.idxs.append(self.idx)
        agg.psums.append(psum)

    # -------------------------------------------------------------- flushing

    def poll_end(self, last_ts, next_ts, timeout):
        """The poll that took the packet at ``last_ts`` ended before the one
        at ``next_ts`` arrived (napi_complete_done); ``timeout``:
        gro_flush_timeout, ns."""
        if not timeout:
            self.flush(Flush.POLL_END, last_ts, old_only=False)
            return
        self.flush(Flush.POLL_END, last_ts, old_only=True)
        if self.flows and next_ts - last_ts > timeout:
            self.flush(Flush.FLUSH_TIMEOUT, last_ts + timeout, old_only=False)

    def flush(self, reason, t, old_only):
        """__gro_flush: buckets 0..7, oldest first; with ``old_only`` stop a
        bucket's scan at the first packet held in the current jiffy."""
        now = t // self.jiffy_ns
        for b in self.buckets:
            while b:
                agg = b[0]
                if old_only and agg.age == now:
                    break
                self.complete(agg, reason, t)

    def flush_all(self, reason, t):
        """Complete every held packet at time ``t`` (ns) for ``reason``."""
        if self.flows:
            self.flush(reason, t, old_only=False)

    def complete(self, agg, reason, t):
        """Complete a held packet (napi_gro_complete) and hand it up at time
        ``t`` (ns), or at ``last_out_ts`` (the latest time written) if ``t``
        is earlier; counted under Flush ``reason``."""
        agg.bucket.remove(agg)
        del self.flows[agg.key]
        agg.held = False
        agg.ended = reason
        st = self.stats
        st.flush[reason] += 1
        if t < self.last_out_ts:
            t = self.last_out_ts
        self.last_out_ts = t
        if agg.count == 1:
            st.singles += 1
            self.out.append(annotate.single(agg, t, self.cfg.annotate))
            return
        head = agg.head
        kind = inet_offload(head.proto).name + ("_fraglist" if agg.flist else "")
        if head.outer is not None:
            kind = head.outer.kind + "_" + kind
        st.count_aggregate(kind, agg.count)
        self.out.append(build(self, agg, t))
