"""The chunk planner: one NAPI poll of a pcap chunk taken flow by flow.

The per-packet loop of :meth:`pcapgro.gro.engine.GROEngine._run_fast` with
the work per aggregate, not per packet: when every record of the poll is a
plain Ethernet/IPv4/TCP packet with good checksums, arrival times do not go
backwards and no bucket can overflow, flows cannot interact, so each flow's
packets are taken in order, flows one after the other, and the output is
put back in arrival order.  Same output, statistics and GRO state as the
loop and the general path (tests/test_gro_plan.py, tests/test_gro_chunks.py).
"""

import numpy as np

from .config import GRO_HASH_BUCKETS, MAX_GRO_SKBS
from .flush import Flush, Pass
from .network import ipid_step
from .payload import Run, block_psum
from .seg import Seg

__all__ = ["plan_poll"]


class _Plan:
    """One poll's plan: records ``a..b-1`` of chunk ``lb`` for engine
    ``eng`` (classify's columns ``cls``, payload offsets ``runs``)."""

    __slots__ = ("eng", "lb", "base", "cls", "runs", "order", "stops", "groups",
                 "last0", "ev_at", "ev")

    def __init__(self, eng, lb, base, cls, runs):
        self.eng = eng
        self.lb = lb
        self.base = base
        self.cls = cls
        self.runs = runs
        self.last0 = eng.last_out_ts
        self.ev_at = []         # record index of each general step's output
        self.ev = []            # ... and the output

    def groups_of(self, t, a, b):
        """Sort the poll's records by flow; False when the planner does not
        apply (a record off the fast path, time going backwards, a bucket
        that could overflow).  Sets ``order`` (record indices flow by flow),
        ``stops`` (where a walk restarts: a record that does not continue
        its flow's previous one, an IPv4 ID step change, a flow's first)
        and ``groups`` ((flow key, start, end) into ``order``)."""
        arrs = self.cls.arrs
        if not arrs.fast[a:b].all():
            return False
        tt = t[a:b]
        if int(tt[0]) < self.last0 or (b - a > 1 and bool((tt[1:] < tt[:-1]).any())):
            return False
        inv = arrs.inv[a:b]
        so = np.argsort(inv, kind="stable")
        sinv = inv[so]
        cut = (np.flatnonzero(sinv[1:] != sinv[:-1]) + 1).tolist()
        so += a
        dd_s = arrs.did[so]
        stop = arrs.prev[so] < 0
        stop[1:] |= dd_s[1:] != dd_s[:-1]
        stop[cut] = True
        stop[0] = True
        self.stops = np.flatnonzero(stop).tolist()
        self.stops.append(b - a)
        self.order = so.tolist()
        return self._flow_groups(cut + [b - a])

    def _flow_groups(self, ends):
        """``groups`` from the flows' ``ends`` in ``order``; False when a
        flow held anew could overflow its bucket."""
        eng, order, plen = self.eng, self.order, self.cls.plen
        buf, off, flows = self.lb.buf, self.lb.off, eng.flows
        self.groups = groups = []
        load = None
        s0 = 0
        for e in ends:
            o = off[order[s0]]
            key = (0, bytes(buf[o:o + 14]), bytes(buf[o + 26:o + 34]),
                   bytes(buf[o + 34:o + 38]), 6)
            groups.append((key, s0, e))
            if key not in flows and any(map(plen.__getitem__, order[s0:e])):
                # a flow that may be held anew: room in its bucket?
                if load is None:
                    load = [len(x) for x in eng.buckets]
                bk = eng.flow_hash(key, 4) & (GRO_HASH_BUCKETS - 1)
                load[bk] += 1
                if load[bk] > MAX_GRO_SKBS:
                    return False
            s0 = e
        return True

    def walk(self):
        """Take every flow's records: pure ACKs of a flow with nothing held
        are passed as a block, every other flow is walked segment by
        segment (:meth:`_segment`)."""
        eng, order, stops, plen = self.eng, self.order, self.stops, self.cls.plen
        si = 0
        for key, fs, fe in self.groups:
            if key not in eng.flows and not any(map(plen.__getitem__, order[fs:fe])):
                xs = order[fs:fe]
                eng.stats.passed[Pass.PURE_ACK] += fe - fs
                self.ev_at += xs
                self.ev += [[p] for p in map(self.lb.packet, xs)]
                while stops[si] < fe:
                    si += 1
                continue
            while stops[si] < fe:
                q0 = stops[si]
                si += 1
                self._segment(key, q0, min(stops[si], fe))

    def _segment(self, key, k, q1):
        """Records ``order[k:q1]`` of one flow: continuations of the held
        aggregate are merged in blocks (:meth:`_merge_block`); every other
        record takes the general path exactly as in the loop, its output
        kept aside with its record index."""
        eng, order = self.eng, self.order
        prev, plen, owner = self.cls.prev, self.cls.plen, self.cls.owner
        p = prev[order[k]]
        cur = owner[p] if p >= 0 else None
        while k < q1:
            x = order[k]
            if cur is not None and cur.fast:
                id_ok = ipid_step(cur, self.cls.did[x])
                end = self._merge_block(cur, k, q1) if id_ok else k
                if end > k:
                    k = end
                    continue
                eng.out = o = []
                eng.last_out_ts = self.last0
                cur = self._restart(cur, x) if id_ok else self._general(x)
            else:
                eng.out = o = []
                eng.last_out_ts = self.last0
                if not plen[x] and key not in eng.flows:
                    eng.stats.passed[Pass.PURE_ACK] += 1
                    o.append(self.lb.packet(x))
                    cur = None
                else:
                    cur = self._general(x)
            if o:
                self.ev_at.append(x)
                self.ev.append(o)
            k += 1

    def _merge_block(self, cur, k, q1):
        """Merge records ``order[k:]`` (up to ``q1``) into ``cur`` as far as
        the size limit allows (the IPv4 ID step is the same all along: one
        segment of the walk); returns where the block ends (``k``: none)."""
        order = self.order
        plen, seqn, psum, owner = self.cls.plen, self.cls.seqn, self.cls.psum, self.cls.owner
        x = order[k]
        L = plen[x]
        n_size = (self.eng.limit - 1 - cur.size) // L
        if n_size <= 0:
            return k
        end = min(k + n_size, q1)
        blk = order[k:end]
        nb = end - k
        cur.count += nb
        cur.size += nb * L
        cur.seq_next = seqn[blk[-1]]
        cur.pkts.append(Run(self.lb, blk, self.runs[0], self.runs[1], psum, L))
        cur.pays.append(L)
        cur.idxs.append(self.base + x)
        cur.psums.append(block_psum(psum, blk, L))
        owner[blk[-1]] = cur
        return end

    def _restart(self, cur, x):
        """Record ``x`` continues ``cur``, which is full: what tcp's
        gro_receive does (complete: size limit; hold it as the new head),
        its Seg made from the old head's (a continuation has the same
        headers but for seq and ID)."""
        eng = self.eng
        pk = self.lb.packet(x)
        L = self.cls.plen[x]
        seg = _next_head(cur.head, pk, (self.cls.seqn[x] - L) & 0xFFFFFFFF)
        eng.idx = self.base + x
        eng.psum = self.cls.psum[x]
        eng.complete(cur, Flush.SIZE_LIMIT, pk.ts)
        cur = self.cls.owner[x] = eng.hold(seg, pk.ts, False, cur.hash)
        return cur

    def _general(self, x):
        """Record ``x`` on the general path (checksums already good)."""
        cur = self.cls.owner[x] = self.eng._general(self.lb.packet(x), self.base + x,
                                                   self.lb.ts[x], self.cls.psum[x], True)
        return cur

    def write(self, out0):
        """Put the general steps' outputs into ``out0`` in record order and
        restore the engine's output list, ``last_out_ts`` and bucket order."""
        eng, ev = self.eng, self.ev
        eng.out = out0
        if ev:
            if len(ev) > 1:
                for i in sorted(range(len(ev)), key=self.ev_at.__getitem__):
                    out0 += ev[i]
            else:
                out0 += ev[0]
            # times do not go backwards here (checked), so what was written
            # last is the latest
            eng.last_out_ts = max(self.last0, out0[-1].ts)
        else:
            eng.last_out_ts = self.last0
        for bk in eng.buckets:
            if len(bk) > 1:
                bk.sort(key=_head_index)


def plan_poll(eng, lb, base, cls, runs, t, a, b):
    """Records ``a..b-1`` of chunk ``lb`` (one poll) flow by flow for
    GROEngine ``eng`` (``cls``: classify's columns; ``runs``: the chunk's
    payload start and end offsets; ``t``: arrival times, numpy).  Returns
    False (nothing done) when the planner does not apply (see the module
    doc), else True."""
    pl = _Plan(eng, lb, base, cls, runs)
    if not pl.groups_of(t, a, b):
        return False
    out0 = eng.out
    pl.walk()
    pl.write(out0)
    return True


def _next_head(h, pkt, seq):
    """The Seg of ``pkt``, a plain Ethernet/IPv4/TCP packet with good
    checksums that continues the aggregate whose head is ``h`` (so its
    headers equal the head's but for sequence number, IPv4 ID and
    checksums): a copy of ``h`` with those (what ipv4.receive would give).
    What a head cut by the snaplen lacks or has cut (``end``, ``caddr``,
    ``cextra``) is taken from ``pkt``, which is whole."""
    d = pkt.data
    seg = Seg()
    seg.pkt = pkt
    seg.family = h.family
    seg.proto = h.proto
    seg.l3off = h.l3off
    seg.l4off = h.l4off
    seg.pay = h.pay
    seg.end = len(d)
    seg.L = h.L
    seg.l3len = h.l3len
    seg.key = h.key
    seg.flags = h.flags
    seg.word = h.word
    seg.seq = seq
    seg.ackopt = h.ackopt
    seg.tosttl = h.tosttl
    seg.df = h.df
    seg.ipid = (d[18] << 8) | d[19]
    seg.flush_l3 = False
    seg.vlan = 0
    seg.cblock = None
    seg.cextra = 6 + h.l3len - 20
    seg.caddr = d[26:34]
    seg.partial = False
    seg.outer = None
    return seg


def _head_index(agg):
    """Input index of an aggregate's first packet (bucket order)."""
    return agg.idxs[0]
