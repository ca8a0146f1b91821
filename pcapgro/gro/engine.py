"""The GRO engine: one emulated NAPI instance.

Mirrors net/core/gro.c of Linux 6.18 (dev_gro_receive, gro_list_prepare,
gro_flush_oldest, __gro_flush, gro_complete) and the poll-end rules of
net/core/dev.c (napi_complete_done, __napi_poll).  The protocol rules are in
:mod:`pcapgro.gro.ipv4`, :mod:`pcapgro.gro.ipv6` and :mod:`pcapgro.gro.tcp`.

Model (a capture shows no NAPI poll boundaries, so they are modelled):

* One NAPI instance, 8 buckets of at most 8 held packets.  The bucket is
  the flow hash & 7; ``hash='flow'`` gives each flow its own 32-bit hash
  (CRC-32 of addresses and ports, as RSS or a local socket would give a
  distinct one), ``hash='none'`` gives every flow hash 0 (bucket 0), as
  packets injected into a veth by tcpreplay get.
* A NAPI poll ends when the gap to the next packet exceeds ``poll_gap_ns``,
  or after ``napi_budget`` packets (if set).  At a poll end, with
  gro_flush_timeout 0, every held packet is completed (bucket 0..7, oldest
  first); with a budget-exhausted poll and HZ >= 1000 only packets held
  since an older jiffy are.  With gro_flush_timeout > 0 a poll end completes
  only packets from older jiffies, and the timer completes the rest once the
  gap exceeds the timeout.
* Timestamps: a packet passed through keeps its own time, always.  A held
  packet (aggregate or single) is stamped when it is completed and handed
  up: the arrival time of the packet whose processing completed it, the end
  of the poll (last packet's time) or the timer's expiry, but never earlier
  than any packet written before it in the same pcapng section
  (``last_out_ts``).  So output times never go backwards unless the
  input's do.
"""

import struct
import zlib
from bisect import bisect_right
from operator import itemgetter

import numpy as np

from ..checksum import batch_sums, fold, ones_sum
from ..errors import DamagedInput
from ..linklayer import ETH_P_IP, network_layer
from .. import restore
from ..record import BLOCK_EPB, EPB_FLAG_TSO, Packet, PacketMeta, Section
from . import ipv4, ipv6
from .config import GRO_HASH_BUCKETS, GRO_LEGACY_MAX_SIZE, MAX_GRO_SKBS, GROConfig
from .flush import Flush, Pass
from .seg import Agg, Seg
from .fastpath import classify, classify_chunk, derived_psum, fill_lazy
from . import cfast
from .stats import GROStats
from .tcp import PSH, FIN, final_flush, merge_flush, seed
from .udp import UDP_GRO_CNT_MAX, segment_checks
from .network import network_flush

__all__ = ["GROEngine"]

_BATCH = 256        # Packets per batch in process()
_MAX_BATCH = 4096   # at most this many Packets classified at once
_ONLY_PACKETS = {Packet}
_FIN_PSH = FIN | PSH
_WORD_MASK = ~0x00090000     # TCP flag word without FIN and PSH

# The fast path: Ethernet (no VLAN tag) / IPv4 (no options) / TCP, as one
# unpack of bytes 0..53: EtherType, the IPv4 header, the fixed TCP header.
_fast_hdr = struct.Struct("!12xHBBHHHBBH8s4sIIIHH")


def _batches(it, n):
    """Yield runs of up to ``n`` Packets as lists, and every other event
    alone (in a list of its own).  On an error from ``it`` yield what was read
    before it, then re-raise, so nothing read is lost."""
    buf = []
    try:
        for ev in it:
            if type(ev) is Packet:
                buf.append(ev)
                if len(buf) >= n:
                    yield buf
                    buf = []
            else:
                if buf:
                    yield buf
                    buf = []
                yield [ev]
    except BaseException:
        if buf:
            yield buf
        raise
    if buf:
        yield buf


class _Agg(Agg):
    """An Agg with ``psums``: per merged packet, the one's-complement sum
    (mod 0xFFFF) of its payload bytes as the fast path computed it, or None
    (then the aggregate's checksum is summed from the bytes)."""

    __slots__ = ("psums",)


class GROEngine:
    """Linux GRO over a stream of capture events.

    :meth:`process` takes and yields events; :meth:`transform_batches`
    (what :func:`pcapgro.pipeline.run` uses) takes and yields lists of them,
    and also takes a pcap reader's ``RecordChunk`` objects, making Packets
    only for what the general path handles.  Both give the same output.

    Usage::

        engine = GROEngine(GROConfig())
        for ev in engine.process(reader):   # events of pcapgro.record
            writer.write(ev)
        engine.stats.to_dict()

    ``parts_out`` (default False; :func:`pcapgro.pipeline.run` sets it for
    a writer with ``takes_parts``): an aggregate's ``Packet.data`` is then
    the list of its parts (header bytes, payload memoryviews of the input)
    instead of their join.

    ``process`` is a generator: memory stays bounded by what GRO holds (at
    most 64 held aggregates of < gro_max_size bytes each), whatever the
    input size.  A DamagedInput raised by the input is re-raised after every
    held packet has been completed and yielded.
    """

    def __init__(self, config=None):
        self.cfg = config or GROConfig()
        self.stats = GROStats()
        self.flows = {}                  # flow key -> Agg
        self.buckets = [[] for _ in range(GRO_HASH_BUCKETS)]  # oldest first
        self.out = []
        # the latest time written in this section: held packets completed
        # are stamped no earlier (passed packets keep their own time)
        self.last_out_ts = 0
        self.jiffy_ns = 1_000_000_000 // self.cfg.hz
        self.limit = self.cfg.gro_max_size
        self.idx = 0                     # input index of the packet in hand
        self._ps = None                  # its payload sum (or None), see _Agg
        self.last_ts = None              # arrival time of the last packet
        self.in_poll = 0                 # packets taken by the current poll
        # True (set by pipeline.run for a writer with ``takes_parts``): an
        # aggregate's Packet.data is the list of its parts (header bytes,
        # payload memoryviews of the input), written without joining them
        self.parts_out = False
        # True (set by pipeline.run for a classic pcap writer that takes the
        # input's records verbatim): chunks may go through the compiled
        # loop (pcapgro.gro.cfast), whose output is RawRecords
        self.raw_out = False
        self._c = None                   # its CEngine, made on first use
        self._c_ok = cfast.usable(self.cfg)

    # ------------------------------------------------------------------ API

    def process(self, events):
        """Run GRO over ``events`` (an iterable of record events), yielding
        the events a receiving host would see, in order."""
        for out in self.transform_batches(_batches(events, _BATCH)):
            yield from out

    def transform_batches(self, batches):
        """Run GRO over ``batches`` (an iterable of lists of record events,
        e.g. a reader's ``batches()``), yielding lists of the events a
        receiving host would see, in order (what :meth:`process` yields, in
        lists: one per input list, plus one at the end).  Same results as
        :meth:`process`; cheaper, as no event goes through a generator."""
        try:
            for batch in batches:
                if getattr(batch, "lazy", False):
                    self._chunk(batch)
                    out = self.out
                    self.out = []
                    yield out
                    continue
                if batch and set(map(type, batch)) == _ONLY_PACKETS:
                    if len(batch) <= _MAX_BATCH:
                        self._packets(batch)
                    else:
                        for a in range(0, len(batch), _MAX_BATCH):
                            self._packets(batch[a:a + _MAX_BATCH])
                    out = self.out
                    self.out = []
                    yield out
                    continue
                run = None
                for ev in batch:
                    if type(ev) is Packet:
                        if run is None:
                            run = []
                        run.append(ev)
                        continue
                    if run:
                        self._packets(run)
                        run = None
                    if type(ev) is Section:
                        self._release()
                        self._flush_all(Flush.SECTION_END, self.last_ts or 0)
                        # a new section's times do not depend on an earlier one's
                        self.last_out_ts = 0
                    self.out.append(ev)
                if run:
                    for a in range(0, len(run), _MAX_BATCH):
                        self._packets(run[a:a + _MAX_BATCH])
                if self.out:
                    out = self.out
                    self.out = []
                    yield out
        except DamagedInput:
            self._end()
            out = self.out
            self.out = []
            yield out
            raise
        self._end()
        out = self.out
        self.out = []
        yield out

    def _release(self):
        """Hand what the compiled loop holds to this engine's GRO lists."""
        if self._c is not None and self._c.held:
            self._c.release(self, 1)

    def _end(self):
        self._release()
        last = self.last_ts or 0
        if self.in_poll == (self.cfg.napi_budget or -1):
            self._flush_all(Flush.BUDGET, last)
        self._flush_all(Flush.END_OF_INPUT, last)

    def _packets(self, batch):
        """GRO over one list of Packets (appends to ``self.out``)."""
        self._release()
        cfg = self.cfg
        verify = cfg.verify_csum
        fast = cfg.fast_path
        stats = self.stats
        n = len(batch)
        base = stats.packets
        stats.packets += n
        if fast:
            cls = classify(batch, verify, cfg.csum == "valid") + [[None] * n]
            if cls[6]:
                stats.csum["verified"] += cls[6]
        else:
            cls = None
        if cfg.napi_budget:
            self._loop_budget(batch, base, cls)
            return
        ts = [ev.ts for ev in batch]
        try:
            t = np.array(ts, dtype=np.int64)
        except OverflowError:
            t = None
        if fast:
            self._polls(ts, t, lambda a, b: self._run_fast(batch, batch.__getitem__,
                                                           base, cls, ts, a, b))
        else:
            self._polls(ts, t, lambda a, b: self._run_general(batch, base, ts, a, b))

    def _chunk(self, lb):
        """GRO over a RecordChunk (records of a pcap chunk, not yet
        Packets): Packets are made only for what the general path takes;
        packets merged on the fast path are kept in ``Agg.pkts`` as run
        entries referring to the chunk until it is done (see
        :func:`_run_payloads`)."""
        n = len(lb)
        if not n:
            return
        if not (self._c_ok and self.raw_out and lb.linktype == 1 and lb.hl == 16):
            self._release()
            self._chunk_py(lb)
            return
        # the compiled loop takes records as far as it goes, whenever this
        # engine holds nothing; what it holds when it stops is handed over
        # and the Python paths go on up to the next poll end (a gap: every
        # held packet is then completed), where the loop may start again
        if self._c is None:
            self._c = cfast.CEngine(self.cfg)
        i = 0
        starts = None
        while True:
            if not self.flows:
                i = self._c.run(self, lb, i)
                if i == n:
                    return
                self._release()
            if starts is None:
                t = lb.columns()[3]
                starts = (np.flatnonzero(np.diff(t) > self.cfg.poll_gap_ns) + 1).tolist()
                starts.append(n)
            g = starts[bisect_right(starts, i)]
            self._chunk_py(lb.part(i, g))
            if g == n:
                return
            if self.flows:
                # what _polls does before the poll that starts at g
                self._poll_end(self.last_ts, lb.ts[g], self.cfg.gro_flush_timeout)
            i = g

    def _chunk_py(self, lb):
        """:meth:`_chunk` on the Python paths."""
        cfg = self.cfg
        n = len(lb)
        if not cfg.fast_path or cfg.napi_budget:
            self._packets(lb.packets())
            return
        off, cap, orig, t = lb.columns()
        plan = None if cfg.annotate or cfg.fraglist else self._plan
        cls = classify_chunk(lb, off, cap, orig, cfg.verify_csum, cfg.csum == "valid",
                             lazy=plan is not None)
        stats = self.stats
        base = stats.packets
        stats.packets += n
        if cls[6]:
            stats.csum["verified"] += cls[6]
        cls.append([None] * n)
        ts = lb.ts
        arrs = cls[9]
        # payload start and end of each record in the chunk (run entries)
        lb_pe = (off + cap).tolist()
        lb_ps = (off + arrs.pay).tolist()
        runs = (lb_ps, lb_pe)
        run_fast = self._run_fast

        def run(a, b):
            if plan is None or not plan(lb, base, cls, runs, t, a, b):
                fill_lazy(cls)
                run_fast(lb, lb.packet, base, cls, ts, a, b, runs)

        self._polls(ts, t, run)
        # memory stays bounded by what GRO holds: what stays held may refer
        # to this chunk and the one before (most aggregates held at a chunk's
        # end are completed in the next), not to older ones: their runs
        # become Packets (annotated output needs each one for the restore
        # record) or one bytes object of payload
        annotate = cfg.annotate
        cfg_sums = cfg.csum == "valid" and not cfg.verify_csum
        for agg in self.flows.values():
            pk = agg.pkts
            for k in range(1, len(pk)):
                e = pk[k]
                if type(e) is tuple and e[0] is not lb:
                    if annotate:
                        self._expand_run(agg, k)
                        break
                    if agg.psums[k] is None and cfg_sums:
                        agg.psums[k] = _run_psum(e)
                    pk[k] = b"".join(_run_payloads(e))

    def _plan(self, lb, base, cls, runs, t, a, b):
        """Records ``a..b-1`` of chunk ``lb`` (one poll) flow by flow: the
        per-packet loop of :meth:`_run_fast` with the work per aggregate,
        not per packet.  Returns False (nothing done) unless every record is
        a plain Ethernet/IPv4/TCP packet with good checksums (``ok``),
        arrival times do not go backwards and no bucket can overflow (so
        that flows do not interact: each flow's packets are then taken in
        order, flows one after the other, and the output is put back in
        arrival order).

        For a flow, each packet that continues its held aggregate (classify's
        ``prev``) is merged in blocks: as many as the size limit and the
        IPv4 ID mode allow, computed, not looped over; every other packet
        takes the general path (:meth:`_general`) exactly as in the loop:
        a new head, a flush, a pure ACK passed.  What each general step
        writes is kept with its record index; the steps' outputs are then
        written in index order.  Same output, statistics and GRO state as
        :meth:`_run_fast` and the general path (tests/test_gro_plan.py,
        tests/test_gro_chunks.py)."""
        prev, plen, pay, seqn, did, ok, _, psum, runend, arrs, owner = cls
        if not arrs.fast[a:b].all():
            return False
        last0 = self.last_out_ts
        tt = t[a:b]
        if int(tt[0]) < last0 or (b - a > 1 and bool((tt[1:] < tt[:-1]).any())):
            return False
        inv = arrs.inv[a:b]
        so = np.argsort(inv, kind="stable")
        sinv = inv[so]
        cut = (np.flatnonzero(sinv[1:] != sinv[:-1]) + 1).tolist()
        so += a
        # segments of each flow's packets (in sorted order) to walk: each
        # starts at a packet that does not continue the flow's previous one
        # (classify), at an IPv4 ID step change, or at the flow's first
        pv_s = arrs.prev[so]
        dd_s = arrs.did[so]
        stop = pv_s < 0
        stop[1:] |= dd_s[1:] != dd_s[:-1]
        stop[cut] = True
        stop[0] = True
        stops = np.flatnonzero(stop).tolist()
        order = so.tolist()
        buf = lb.buf
        off = lb.off
        flows = self.flows
        groups = []
        load = None
        s0 = 0
        for e in cut + [b - a]:
            o = off[order[s0]]
            key = (0, bytes(buf[o:o + 14]), bytes(buf[o + 26:o + 34]), bytes(buf[o + 34:o + 38]), 6)
            groups.append((key, s0, e))
            if key not in flows and any(map(plen.__getitem__, order[s0:e])):
                # a flow that may be held anew: room in its bucket?
                h = self._flow_hash(key, 4)
                if load is None:
                    load = [len(x) for x in self.buckets]
                bk = h & (GRO_HASH_BUCKETS - 1)
                load[bk] += 1
                if load[bk] > MAX_GRO_SKBS:
                    return False
            s0 = e
        stops.append(b - a)
        lb_ps, lb_pe = runs
        limit = self.limit
        general = self._general
        stats = self.stats
        packet = lb.packet
        ts_l = lb.ts
        out0 = self.out
        ev_at = []
        ev = []
        si = 0
        for key, fs, fe in groups:
            if key not in flows and not any(map(plen.__getitem__, order[fs:fe])):
                # pure ACKs of a flow with nothing held: all passed
                xs = order[fs:fe]
                stats.passed[Pass.PURE_ACK] += fe - fs
                ev_at += xs
                ev += [[p] for p in map(packet, xs)]
                while stops[si] < fe:
                    si += 1
                continue
            while True:
                q0 = stops[si]
                if q0 >= fe:
                    break
                si += 1
                q1 = stops[si]
                if q1 > fe:
                    q1 = fe
                k = q0
                p = prev[order[k]]
                cur = owner[p] if p >= 0 else None
                while k < q1:
                    x = order[k]
                    if cur is not None and cur.fast:
                        L = plen[x]
                        n_size = (limit - 1 - cur.size) // L
                        d0 = did[x]
                        id_ok = _ipid_step(cur, d0)
                        if n_size > 0 and id_ok:
                            # merged: the segment's packets up to the size
                            # limit (the ID step is the same all along)
                            end = k + n_size
                            if end > q1:
                                end = q1
                            blk = order[k:end]
                            nb = end - k
                            cur.count += nb
                            cur.size += nb * L
                            cur.seq_next = seqn[blk[-1]]
                            cur.pkts.append((lb, blk, lb_ps, lb_pe, psum, L))
                            cur.pays.append(L)
                            cur.idxs.append(base + x)
                            cur.psums.append(_block_psum(psum, blk, L))
                            owner[blk[-1]] = cur
                            k = end
                            continue
                        # the general path, its output kept aside
                        self.out = o = []
                        self.last_out_ts = last0
                        if id_ok:
                            # it continues the aggregate, which is full: what
                            # _receive does (complete: size limit; hold it as
                            # the new head), its Seg from the old head's (a
                            # continuation has the same headers but for seq, ID)
                            pk = packet(x)
                            seg = _next_head(cur.head, pk, (seqn[x] - L) & 0xFFFFFFFF)
                            self.idx = base + x
                            self._ps = psum[x]
                            tx = pk.ts
                            self._complete(cur, Flush.SIZE_LIMIT, tx)
                            cur = owner[x] = self._hold(seg, tx, False, cur.hash)
                        else:
                            cur = owner[x] = general(packet(x), base + x, ts_l[x],
                                                     psum[x], True)
                    else:
                        # the general path, its output kept aside
                        self.out = o = []
                        self.last_out_ts = last0
                        if not plen[x] and key not in flows:
                            stats.passed[Pass.PURE_ACK] += 1
                            o.append(packet(x))
                            cur = None
                        else:
                            cur = owner[x] = general(packet(x), base + x, ts_l[x],
                                                     psum[x], True)
                    if o:
                        ev_at.append(x)
                        ev.append(o)
                    k += 1
        self.out = out0
        if ev:
            if len(ev) > 1:
                for i in sorted(range(len(ev)), key=ev_at.__getitem__):
                    out0 += ev[i]
            else:
                out0 += ev[0]
            # times do not go backwards here (checked above), so what was
            # written last is the latest
            self.last_out_ts = max(last0, out0[-1].ts)
        else:
            self.last_out_ts = last0
        for bk in self.buckets:
            if len(bk) > 1:
                bk.sort(key=_head_index)
        return True

    def _polls(self, ts, t, run):
        """Split packets with arrival times ``ts`` (list; ``t``: the same
        as a numpy array or None) at the poll ends (gaps: polls end only at
        gaps here), calling ``run(a, b)`` for each run of packets a..b-1 of
        one poll and ending the polls in between."""
        cfg = self.cfg
        gap = cfg.poll_gap_ns
        n = len(ts)
        if t is not None:
            ends = (np.flatnonzero(np.diff(t) > gap) + 1).tolist()
        else:
            ends = [i for i in range(1, n) if ts[i] - ts[i - 1] > gap]
        last = self.last_ts
        if last is not None and ts[0] - last > gap:
            ends.insert(0, 0)
        ends.append(n)
        self.last_ts = ts[-1]
        timeout = cfg.gro_flush_timeout
        a = 0
        for b in ends:
            if b == 0:
                if self.flows:
                    self._poll_end(last, ts[0], timeout)
                continue
            if a:
                if self.flows:
                    self._poll_end(ts[a - 1], ts[a], timeout)
            run(a, b)
            a = b

    def _run_general(self, batch, base, ts, a, b):
        """Packets ``a..b-1`` of ``batch`` (one poll) on the general path."""
        general = self._general
        for i in range(a, b):
            general(batch[i], base + i, ts[i])

    def _run_fast(self, refs, get, base, cls, ts, a, b, runs=None):
        """Packets ``a..b-1`` (one poll) with the fast path.  ``get(i)``:
        Packet i; ``refs``: the list of Packets (``refs[i]`` is packet i),
        or the RecordChunk they are records of: merged runs i..j-1 of its
        records are then kept in ``Agg.pkts`` as one entry (see
        :func:`_run_payloads`), not as Packets."""
        prev, plen, pay, seqn, did, ok, _, psum, runend, _, owner = cls
        chunk = None if isinstance(refs, list) else refs
        limit = self.limit
        general = self._general
        flows = self.flows
        i = a
        while i < b:
            p = prev[i]
            if p >= 0:
                # ---- fast path: continues its flow's aggregate
                agg = owner[p]
                if agg is not None and agg.fast:
                    L = plen[i]
                    if agg.size + L < limit:
                        if not _ipid_step(agg, did[i]):
                            agg = None
                        if agg is not None:
                            j = runend[i]
                            if j > i + 1:
                                # the packets after i that continue it too,
                                # as far as the size limit and the ID mode
                                # allow (each has L == plen[i], did 0 or 1)
                                if j > b:
                                    j = b
                                k = i + (limit - 1 - agg.size) // L
                                if k < j:
                                    j = k
                                if j > i + 1:
                                    try:
                                        j = did.index(1 if agg.fixedid else 0, i + 1, j)
                                    except ValueError:
                                        pass
                            k = j - i
                            agg.count += k
                            agg.size += k * L
                            agg.seq_next = seqn[j - 1]
                            if chunk is not None:
                                blk = range(i, j)
                                agg.pkts.append((chunk, blk, runs[0], runs[1], psum, L))
                                agg.pays.append(L)
                                agg.idxs.append(base + i)
                                agg.psums.append(_block_psum(psum, blk, L))
                            elif k == 1:
                                agg.pkts.append(refs[i])
                                agg.pays.append(pay[i])
                                agg.idxs.append(base + i)
                                agg.psums.append(psum[i])
                            else:
                                agg.pkts += refs[i:j]
                                agg.pays += pay[i:j]
                                agg.idxs += range(base + i, base + j)
                                agg.psums += psum[i:j]
                            owner[j - 1] = agg
                            i = j
                            continue
            # ---- general path
            ev = get(i)
            self.idx = base + i
            if ok[i]:
                if not plen[i]:
                    # a pure ACK of a flow with nothing held is passed
                    # (_receive: final_flush says so for an empty segment)
                    d = ev.data
                    if (ev.iface, d[:14], d[26:34], d[34:38], 6) not in flows:
                        self._pass(ev, Pass.PURE_ACK)
                        i += 1
                        continue
                owner[i] = general(ev, base + i, ts[i], psum[i], True)
            else:
                owner[i] = general(ev, base + i, ts[i])
            i += 1

    def _loop_budget(self, batch, base, cls):
        """The per-packet loop with a NAPI budget (polls end at gaps and
        after ``napi_budget`` packets)."""
        cfg = self.cfg
        gap = cfg.poll_gap_ns
        timeout = cfg.gro_flush_timeout
        budget = cfg.napi_budget
        fast = cls is not None
        flows = self.flows
        limit = self.limit
        last_ts = self.last_ts
        in_poll = self.in_poll
        if fast:
            prev, plen, pay, seqn, did, ok, _, psum, runend, _, owner = cls
        try:
            for i in range(len(batch)):
                ev = batch[i]
                t = ev.ts
                if last_ts is not None:
                    if in_poll == budget:
                        # the poll took its whole budget (__napi_poll)
                        if flows:
                            self._flush(Flush.BUDGET, last_ts, old_only=cfg.hz >= 1000)
                        in_poll = 0
                    elif t - last_ts > gap:
                        if flows:
                            self._poll_end(last_ts, t, timeout)
                        in_poll = 0
                last_ts = t
                in_poll += 1
                if fast:
                    p = prev[i]
                    if p >= 0:
                        agg = owner[p]
                        L = plen[i]
                        if agg is not None and agg.fast and agg.size + L < limit:
                            if not _ipid_step(agg, did[i]):
                                agg = None
                            if agg is not None:
                                agg.count += 1
                                agg.size += L
                                agg.seq_next = seqn[i]
                                agg.pkts.append(ev)
                                agg.pays.append(pay[i])
                                agg.idxs.append(base + i)
                                agg.psums.append(psum[i])
                                owner[i] = agg
                                continue
                    if ok[i]:
                        owner[i] = self._general(ev, base + i, t, psum[i], True)
                    else:
                        owner[i] = self._general(ev, base + i, t)
                else:
                    self._general(ev, base + i, t)
        finally:
            self.last_ts = last_ts
            self.in_poll = in_poll

    def _general(self, ev, idx, t, ps=None, checked=False):
        """The general (reference) path for one packet: parse, verify,
        receive or pass.  ``idx``: its input index; ``t``: its time;
        ``checked``: classify already found it a plain Ethernet/IPv4/TCP
        packet with good checksums (it is not verified again), ``ps`` its
        payload sum from classify.  Returns the Agg now holding it, or None."""
        self.idx = idx
        self._ps = ps
        if checked:
            seg = ipv4.receive(ev, 14, 0)   # checksums already good
        else:
            seg = self._parse(ev)
            if self.cfg.verify_csum and type(seg) is Seg:
                seg = self._verify_one(seg)
        if type(seg) is not Seg:
            self._pass(ev, seg)
            return None
        if seg.proto == 6:
            return self._receive(seg, t)
        return self._receive_udp(seg, t)

    # -------------------------------------------------------------- parsing

    def _parse(self, pkt):
        """Seg for a TCP or UDP packet GRO handles, else a Pass reason."""
        l3off, et, vlan = network_layer(pkt.linktype, pkt.data)
        if l3off is None:
            return Pass.NOT_IP
        if vlan and not self.cfg.vlan_gro:
            return Pass.NO_HANDLER      # kernel without CONFIG_VLAN_8021Q
        if et == ETH_P_IP:
            return ipv4.receive(pkt, l3off, vlan)
        return ipv6.receive(pkt, l3off, vlan)

    def _verify_one(self, seg):
        """Checksum verdict for a general-path Seg (slow path: one at a time).
        Returns the Seg (``partial`` set when its field holds the
        pseudo-header seed), or Pass.BAD_TCP_CSUM / Pass.BAD_UDP_CSUM."""
        csum = self.stats.csum
        if seg.cblock is None:
            csum["skipped_l3_flush" if seg.flush_l3 else "skipped_truncated"] += 1
            return seg
        if (ones_sum(seg.cblock) + seg.cextra) % 0xFFFF == 0:
            csum["verified"] += 1
            return seg
        d = seg.pkt.data
        at = seg.l4off + (16 if seg.proto == 6 else 6)
        field = (d[at] << 8) | d[at + 1]
        if field == seed(seg.caddr, seg.cextra):
            csum["seed"] += 1
            seg.partial = True
            return seg
        csum["bad"] += 1
        return Pass.BAD_TCP_CSUM if seg.proto == 6 else Pass.BAD_UDP_CSUM

    # ------------------------------------------------------------- receive

    def _pass(self, pkt, reason):
        """Hand a packet up unchanged (GRO_NORMAL), at its own time (even
        when that is earlier than packets written before it: the input's
        times went backwards); ``last_out_ts`` is raised to it if later.
        When older packets are held (it overtakes them) and the output is
        annotated, a restore record with its input index lets ``split
        --restore`` put it back; so does a packet that already carries
        pcapgro's comments (input merged before), so that the last record
        on a packet is always this merge's (:func:`pcapgro.restore.level`)."""
        self.stats.passed[reason] += 1
        ts = pkt.ts
        if ts > self.last_out_ts:
            self.last_out_ts = ts
        if self.cfg.annotate and (self.flows or restore.carries_own(pkt.meta)):
            rec = f"{restore.TAG}i={self.idx} t={ts}" + restore.block_field(pkt.meta)
            pkt = Packet(ts, pkt.data, pkt.orig_len, pkt.iface, pkt.linktype,
                         _with_comment(pkt.meta, rec))
        self.out.append(pkt)

    def _receive(self, seg, t):
        """dev_gro_receive + tcp_gro_receive for one parsed TCP segment.

        Returns the Agg now holding the segment (merged into it, or held
        as its head), or None when the segment was passed or completed."""
        agg = self.flows.get(seg.key)
        L = seg.L
        if agg is None:
            reason = final_flush(seg, 1)
            if reason is not None:
                self._pass(seg.pkt, Pass.PURE_ACK if L == 0 else Pass.FLAGS)
            elif seg.flush_l3:
                self._pass(seg.pkt, Pass.L3_FLUSH)
            else:
                return self._hold(seg, t, self._tcp_fraglist(seg))
            return None
        reason = merge_flush(agg, seg)
        if reason is None:
            if agg.flist:
                # the fraglist branch of tcp_gro_receive + skb_gro_receive_list
                if seg.word != agg.head.word:
                    reason = Flush.FLAGS_CHANGED      # FIN/PSH count too
                elif seg.partial != agg.head.partial:
                    reason = Flush.CSUM_STATE
                elif agg.count >= 64:
                    reason = Flush.SEGMENT_LIMIT
                elif seg.flush_l3:
                    reason = Flush.L3_FLUSH
                elif agg.size + seg.l3len + 4 * seg.vlan >= GRO_LEGACY_MAX_SIZE:
                    reason = Flush.SIZE_LIMIT
            elif seg.flush_l3:
                reason = Flush.L3_FLUSH
            elif agg.size + L >= self._limit(agg):
                reason = Flush.SIZE_LIMIT
        if reason is None:
            # skb_gro_receive (standard) or skb_gro_receive_list (fraglist)
            agg.count += 1
            agg.seq_next = (agg.seq_next + L) & 0xFFFFFFFF
            agg.size += L
            if not agg.flist:
                agg.fin_psh |= seg.flags & _FIN_PSH
            agg.pkts.append(seg.pkt)
            agg.pays.append(seg.pay)
            agg.idxs.append(self.idx)
            agg.psums.append(self._ps)
            after = final_flush(seg, agg.mss)
            if after is not None:
                self._complete(agg, after, t)
                return None
            return agg
        self._complete(agg, reason, t)
        after = final_flush(seg, 1)
        if after is not None:
            self._pass(seg.pkt, Pass.PURE_ACK if L == 0 else Pass.FLAGS)
        elif seg.flush_l3:
            self._pass(seg.pkt, Pass.L3_FLUSH)
        else:
            return self._hold(seg, t, agg.flist)
        return None

    def _tcp_fraglist(self, seg):
        """tcp4/6_check_fraglist_gro: with rx-gro-list on, a TCP flow with
        no local (established) socket uses fraglist GRO."""
        return self.cfg.fraglist and _dport(seg) not in self.cfg.local_ports

    def _udp_mode(self, seg):
        """udp_gro_receive's choice for a datagram: None (no L4 GRO: the
        datagram is passed), 'std' or 'flist'.

        No local socket: fraglist if rx-gro-list, else standard if
        rx-udp-gro-forwarding, else none.  A local socket is only found when
        UDP_GRO sockets exist (the encap static key): then standard if it
        enabled UDP_GRO, else fraglist if rx-gro-list, else none."""
        cfg = self.cfg
        if _dport(seg) in cfg.local_ports and cfg.udp == "gro":
            return "std"
        if cfg.fraglist:
            return "flist"
        if cfg.udp == "gro":
            return "std"
        return None

    def _receive_udp(self, seg, t):
        """udp_gro_receive / udp_gro_receive_segment for one datagram.

        Returns the Agg now holding the datagram, or None."""
        mode = self._udp_mode(seg)
        if mode is None:
            self._pass(seg.pkt, Pass.NO_UDP_GRO)
            return None
        r = segment_checks(seg, seg.L + 8)
        if r is not None:
            self._pass(seg.pkt, r)
            return None
        flist = mode == "flist"
        agg = self.flows.get(seg.key)
        if agg is None:
            if seg.flush_l3:
                self._pass(seg.pkt, Pass.L3_FLUSH)
                return None
            return self._hold(seg, t, flist)
        if agg.flist != flist:
            self._complete(agg, Flush.MODE_CHANGED, t)
            self._pass(seg.pkt, Pass.MODE_CHANGED)
            return None
        head = agg.head
        reason = network_flush(agg, seg)
        if reason is None and seg.ulen > head.ulen:
            reason = Flush.LONGER_DATAGRAM
        if reason is None:
            if flist:
                if seg.partial != head.partial:
                    self._pass(seg.pkt, Pass.CSUM_STATE)   # p stays held
                    return agg
                if seg.flush_l3:
                    reason = Flush.L3_FLUSH
                elif agg.size + seg.l3len + 4 * seg.vlan >= GRO_LEGACY_MAX_SIZE:
                    reason = Flush.SIZE_LIMIT
            elif seg.flush_l3:
                reason = Flush.L3_FLUSH
            elif agg.size + seg.L >= min(self.limit, GRO_LEGACY_MAX_SIZE):
                reason = Flush.SIZE_LIMIT
        if reason is None:
            agg.count += 1
            agg.size += seg.L
            agg.pkts.append(seg.pkt)
            agg.pays.append(seg.pay)
            agg.idxs.append(self.idx)
            agg.psums.append(None)
            if seg.ulen != head.ulen:
                self._complete(agg, Flush.SHORT_DATAGRAM, t)
                return None
            if agg.count >= UDP_GRO_CNT_MAX:
                self._complete(agg, Flush.SEGMENT_LIMIT, t)
                return None
            return agg
        self._complete(agg, reason, t)
        if seg.flush_l3:
            self._pass(seg.pkt, Pass.L3_FLUSH)
            return None
        return self._hold(seg, t, flist)

    def _limit(self, agg):
        """gro_max_size for this aggregate (skb_gro_receive): above 65536
        only plain TCP may grow (BIG TCP)."""
        return self.limit

    def _flow_hash(self, key, family):
        """The 32-bit hash of the flow with key ``key`` (a Seg's) and IP
        ``family``: ``hash='flow'``: an RSS-like hash over the 4-tuple
        (addresses and ports only), never 0; else 0."""
        if self.cfg.hash != "flow":
            return 0
        if family == 4:
            return zlib.crc32(key[2] + key[3]) or 1
        return zlib.crc32(key[3][1:33] + key[4]) or 1

    def _hold(self, seg, t, flist=False, h=None):
        """Put ``seg`` on its GRO list as a new head (gso_size := its
        payload length), completing the bucket's oldest if the bucket is
        full (gro_flush_oldest).  ``flist``: a fraglist aggregate; ``h``:
        the flow's hash when known (else computed from the key)."""
        key = seg.key
        if h is None:
            h = self._flow_hash(key, seg.family)
        b = self.buckets[h & (GRO_HASH_BUCKETS - 1)]
        if len(b) >= MAX_GRO_SKBS:
            self._complete(b[0], Flush.BUCKET_FULL, t)
        return self.adopt(seg, h, t // self.jiffy_ns, flist)

    def adopt(self, seg, h, age, flist=False):
        """Hold ``seg`` as a new head at the end of its bucket (flow hash
        ``h``, held since jiffy ``age``), with no room check: what
        :meth:`_hold` does once there is room, and how the aggregates of the
        compiled loop are handed over (:mod:`pcapgro.gro.cfast`).  Returns
        the new Agg."""
        key = seg.key
        b = self.buckets[h & (GRO_HASH_BUCKETS - 1)]
        agg = _Agg()
        agg.key = key
        agg.hash = h
        agg.bucket = b
        agg.head = seg
        agg.pkts = [seg.pkt]
        agg.pays = [seg.pay]
        agg.idxs = [self.idx]
        agg.psums = [self._ps]
        agg.held = True
        agg.flist = flist
        agg.fast = not flist and seg.proto == 6
        agg.count = 1
        agg.mss = seg.L
        agg.seq_next = (seg.seq + seg.L) & 0xFFFFFFFF
        agg.size = seg.l3len + 4 * seg.vlan
        agg.fin_psh = 0
        agg.fixedid = False
        agg.age = age
        agg.ack = int.from_bytes(seg.ackopt[:4], "big")
        agg.opts = seg.ackopt[4:]
        b.append(agg)
        self.flows[key] = agg
        return agg

    # ------------------------------------------------------------ flushing

    def _poll_end(self, last_ts, next_ts, timeout):
        """The poll that took the packet at ``last_ts`` ended before the one
        at ``next_ts`` arrived (napi_complete_done)."""
        if not timeout:
            self._flush(Flush.POLL_END, last_ts, old_only=False)
            return
        self._flush(Flush.POLL_END, last_ts, old_only=True)
        if self.flows and next_ts - last_ts > timeout:
            self._flush(Flush.FLUSH_TIMEOUT, last_ts + timeout, old_only=False)

    def _flush(self, reason, t, old_only):
        """__gro_flush: buckets 0..7, oldest first; with ``old_only`` stop a
        bucket's scan at the first packet held in the current jiffy."""
        now = t // self.jiffy_ns
        for b in self.buckets:
            while b:
                agg = b[0]
                if old_only and agg.age == now:
                    break
                self._complete(agg, reason, t)

    def _flush_all(self, reason, t):
        if self.flows:
            self._flush(reason, t, old_only=False)

    def _complete(self, agg, reason, t):
        """Complete a held packet (gro_complete) and hand it up at time t,
        or at ``last_out_ts`` (the latest time written) if t is earlier."""
        agg.bucket.remove(agg)
        del self.flows[agg.key]
        agg.held = False
        agg.fast = False
        st = self.stats
        st.flush[reason] += 1
        if t < self.last_out_ts:
            t = self.last_out_ts
        self.last_out_ts = t
        head = agg.head
        pkt = head.pkt
        if agg.count == 1:
            st.singles += 1
            if self.cfg.annotate:
                rec = f"{restore.TAG}i={agg.idxs[0]} t={pkt.ts}" + restore.block_field(pkt.meta)
                self.out.append(Packet(t, pkt.data, pkt.orig_len, pkt.iface, pkt.linktype,
                                       _with_comment(pkt.meta, rec)))
            else:
                self.out.append(pkt if pkt.ts == t else
                                Packet(t, pkt.data, pkt.orig_len, pkt.iface, pkt.linktype,
                                       pkt.meta))
            return
        st.aggregates += 1
        st.segments_merged += agg.count
        st.hist[agg.count] += 1
        kind = ("tcp" if head.proto == 6 else "udp") + ("_fraglist" if agg.flist else "")
        st.by_kind[kind] += 1
        st.segments_by_kind[kind] += agg.count
        self.out.append(self._build(agg, t))

    def _expand_run(self, agg, k):
        """Replace run entries ``agg.pkts[k:]`` by one Packet entry per record
        (what annotated output needs for its restore records)."""
        pk, pays, idxs, psums = agg.pkts, agg.pays, agg.idxs, agg.psums
        npk, npay, nidx, nps = pk[:k], pays[:k], idxs[:k], psums[:k]
        for m in range(k, len(pk)):
            e = pk[m]
            if type(e) is not tuple:
                npk.append(e)
                npay.append(pays[m])
                nidx.append(idxs[m])
                nps.append(psums[m])
                continue
            c, xs, ps, _, psum, _ = e
            x0 = xs[0]
            npk += map(c.packet, xs)
            npay += [ps[x] - c.off[x] for x in xs]
            nidx += [idxs[m] + x - x0 for x in xs]
            nps += [psum[x] for x in xs]
        agg.pkts, agg.pays, agg.idxs, agg.psums = npk, npay, nidx, nps

    def _derived_psums(self, agg):
        """``agg.psums`` with every None of a TCP segment's packet filled in
        from its checksum field (:func:`pcapgro.gro.fastpath.derived_psum`;
        checksums are not verified) or, for a pseudo-header seed, from its
        payload bytes."""
        head = agg.head
        asum = ones_sum(head.caddr)
        hl = head.pay - head.l4off
        out = list(agg.psums)
        for k, p in enumerate(agg.pkts):
            if out[k] is not None:
                continue
            if type(p) is tuple:
                out[k] = _run_psum(p)
                continue
            if type(p) is not Packet:
                continue
            d = p.data
            o = agg.pays[k]
            x = derived_psum(asum, d[o - hl:o], len(d) - o + hl)
            out[k] = x if x is not None else ones_sum(d[o:])
        return out

    def _build(self, agg, t):
        """The aggregate as a receiver's capture shows it: the first
        segment's headers, every payload, lengths and checksums rewritten
        (inet_gro_complete / ipv6_gro_complete, tcp4_gro_complete,
        udp4_gro_complete and their IPv6 twins).

        Standard TCP: FIN/PSH OR-ed in, checksum = pseudo-header seed
        (csum='kernel') or valid.  Fraglist TCP: header untouched (kernel) or
        checksum made valid.  UDP: length = aggregate's; checksum = seed
        (standard, kernel), the first datagram's (fraglist, kernel), or
        valid."""
        head = agg.head
        pkt = head.pkt
        d = pkt.data
        l3off = head.l3off
        l3len = agg.size - 4 * head.vlan
        hdr = bytearray(d[:head.pay])
        l4off = head.l4off
        ins = 0
        if head.family == 4:
            ipv4.complete_header(hdr, l3off, l3len)
        else:
            hdr, ins = ipv6.complete_header(hdr, l3off, l3len)
            l4off += ins
        tcp = head.proto == 6
        l4len = l3len - (head.l4off - l3off)
        if tcp:
            at = l4off + 16
            if not agg.flist:
                hdr[l4off + 13] |= agg.fin_psh
        else:
            at = l4off + 6
            hdr[l4off + 4] = (l4len >> 8) & 0xFF
            hdr[l4off + 5] = l4len & 0xFF
        if head.family == 4:
            pseudo = ones_sum(d[l3off + 12:l3off + 20]) + head.proto + l4len
        else:
            pseudo = (ones_sum(d[l3off + 8:l3off + 40]) + head.proto
                      + (l4len >> 16) + (l4len & 0xFFFF))
        payloads, plens, cut = _payloads(agg)
        if cut:
            self.stats.note_cut(_left_out(agg, len(plens)))
        if self.cfg.csum == "kernel" or cut:
            if not agg.flist:
                c = fold(pseudo)
                hdr[at] = c >> 8
                hdr[at + 1] = c & 0xFF
            # fraglist: the first packet's checksum stays
        else:
            hdr[at] = 0
            hdr[at + 1] = 0
            ps = agg.psums
            if tcp and None in ps and not self.cfg.verify_csum:
                ps = self._derived_psums(agg)
            if tcp and None not in ps:
                psum = _join_sums(ps, plens)
            else:
                psum = _payload_sum(payloads)
            s = pseudo + ones_sum(bytes(hdr[l4off:])) + psum
            c = (~fold(s)) & 0xFFFF
            if not tcp and c == 0:
                c = 0xFFFF
            hdr[at] = c >> 8
            hdr[at + 1] = c & 0xFF
        hdr = bytes(hdr)
        payloads.insert(0, hdr)
        # parts_out: the writer takes the parts as they are (no copy here)
        data = payloads if self.parts_out else b"".join(payloads)
        orig_len = l3off + ins + l3len
        meta = pkt.meta
        if self.cfg.annotate:
            old = pkt.meta
            comments = list(old.comments) if old is not None else []
            kind = "fraglist " if agg.flist else ""
            comments.append(f"pcapgro: GRO aggregate ({kind}{'TCP' if tcp else 'UDP'}) of "
                            f"{agg.count} segments, gso_size {agg.mss}")
            if not cut:
                comments.append(_restore_record(hdr, agg, old.flags if old is not None else None))
            flags = (old.flags or 0) if old is not None else 0
            meta = PacketMeta(block=old.block if old is not None else BLOCK_EPB,
                              comments=comments, flags=flags | EPB_FLAG_TSO,
                              options=list(old.options) if old is not None else [])
        return Packet(t, data, orig_len, pkt.iface, pkt.linktype, meta)


def _with_comment(meta, text):
    """A copy of ``meta`` (PacketMeta or None) with comment ``text`` added."""
    if meta is None:
        return PacketMeta(comments=[text])
    return PacketMeta(block=meta.block, comments=list(meta.comments) + [text],
                      flags=meta.flags, options=list(meta.options))


def final_flush_reason(flags, L, mss):
    """final_flush for a merged segment, from its flags and length."""
    if L < mss:
        return Flush.SHORT_SEGMENT
    for bit, reason in ((FIN, Flush.FIN), (PSH, Flush.PSH), (0x20, Flush.URG),
                        (0x04, Flush.RST), (0x02, Flush.SYN)):
        if flags & bit:
            return reason
    return None


def _dport(seg):
    """Destination port of a parsed segment (int)."""
    d = seg.pkt.data
    return (d[seg.l4off + 2] << 8) | d[seg.l4off + 3]


def _run_payloads(run):
    """memoryviews of the payloads of a run entry of ``Agg.pkts``:
    ``(chunk, xs, ps, pe, psum, L)``, records ``xs`` (a list or range of
    indices) of a RecordChunk merged on the fast path (never cut by the
    snaplen, each with ``L`` bytes of payload); ``ps``, ``pe``: the chunk's
    payload start and end offsets, ``psum`` its payload sums (lists, one per
    record; nothing that refers to engine state, so no reference cycle
    keeps a chunk alive)."""
    c, xs, ps, pe, _, _ = run
    mv = c.mv
    return [mv[ps[x]:pe[x]] for x in xs]


def _block_psum(psum, xs, L):
    """The payload sum (mod 0xFFFF) of records ``xs`` joined, each of ``L``
    bytes, from their sums (list ``psum``); None when one has none."""
    if len(xs) == 1:
        return psum[xs[0]]
    vals = itemgetter(*xs)(psum) if type(xs) is not range else psum[xs.start:xs.stop]
    if None in vals:
        return None
    return _equal_len_sums(vals, L)


def _equal_len_sums(vals, L):
    """The sum (mod 0xFFFF) of payloads of ``L`` bytes each joined, from
    their sums ``vals``: with L odd every second one starts at an odd
    offset and counts byte-swapped (x 256), as in :func:`_join_sums`."""
    if L & 1:
        return (sum(vals[0::2]) + 256 * sum(vals[1::2])) % 0xFFFF
    return sum(vals) % 0xFFFF


def _run_psum(run):
    """The payload sum of a run entry's payloads joined, a record without
    a sum from classify (its checksum field held the pseudo-header seed)
    summed from its bytes."""
    c, xs, ps, pe, psum, L = run
    mv = c.mv
    vals = [psum[x] if psum[x] is not None else ones_sum(bytes(mv[ps[x]:pe[x]]))
            for x in xs]
    return _equal_len_sums(vals, L)


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
    return seg


def _ipid_step(agg, d):
    """The IPv4 ID rule (inet_gro_flush, 6.18) for a segment continuing
    ``agg`` whose ID is ``d`` (0 or 1, classify's ``did``) more than the
    previous segment's: at the second segment ``d`` decides the mode (0:
    fixed, sets ``agg.fixedid``), later it must be the mode's step.
    Returns whether the segment may be merged."""
    if agg.count == 1:
        agg.fixedid = d == 0
        return True
    return d == (0 if agg.fixedid else 1)


def _head_index(agg):
    """Input index of an aggregate's first packet (bucket order)."""
    return agg.idxs[0]


def _payloads(agg):
    """The captured payload bytes of every merged segment (memoryviews or
    bytes, to be joined), in order; the payload length of each entry of
    ``agg.pkts``; and whether the snaplen cut one: payload is then
    contiguous only up to and including the first cut segment, so later
    ones are left out.

    Entries of ``agg.pkts``: a Packet (payload from ``agg.pays[k]`` on), a
    run ``(chunk, xs, ps, pe, psum, L)`` (see :func:`_run_payloads`), or bytes (a
    run's payloads joined when its chunk was done)."""
    out = []
    lens = []
    app = out.append
    for p, o in zip(agg.pkts, agg.pays):
        t = type(p)
        if t is tuple:
            out += _run_payloads(p)
            lens.append(len(p[1]) * p[5])
            continue
        if t is bytes:
            app(p)
            lens.append(len(p))
            continue
        d = p.data
        app(memoryview(d)[o:])       # no copy: the caller joins them
        lens.append(len(d) - o)
        if len(d) < p.orig_len:
            return out, lens, True
    return out, lens, False


def _restore_record(hdr, agg, flags):
    """The restore record (str) of aggregate ``agg`` written with headers
    ``hdr``: :func:`pcapgro.restore.encode`, with run entries read from
    their chunk in place instead of made into a Packet per record (run
    entries come from classic pcap chunks: no metadata; a later segment's
    PacketMeta goes into the record's ``m=`` field)."""
    pk, pays, idxs = agg.pkts, agg.pays, agg.idxs
    p0 = pk[0]
    t0, i0 = p0.ts, idxs[0]
    hdrs, dts, lens, dis = [], [], [], []
    metas = None                 # (row, PacketMeta) of segments that have some
    for m in range(1, len(pk)):
        e = pk[m]
        if type(e) is tuple:
            c, xs, ps, _, _, L = e
            mv, off, ts = c.mv, c.off, c.ts
            d0 = idxs[m] - xs[0] - i0
            hdrs += [mv[off[x]:ps[x]] for x in xs]
            dts += [ts[x] - t0 for x in xs]
            lens += [L] * len(xs)
            dis += [d0 + x for x in xs]
        else:
            d = e.data
            o = pays[m]
            hdrs.append(d[:o])
            dts.append(e.ts - t0)
            lens.append(len(d) - o)
            dis.append(idxs[m] - i0)
            if e.meta is not None:
                if metas is None:
                    metas = []
                metas.append((len(hdrs), e.meta))
    return restore.encode_rows(hdr, p0, pays[0], i0, flags, hdrs, dts, lens, dis, metas)


def _left_out(agg, n):
    """Captured payload bytes (int) of the entries of ``agg.pkts`` from
    index ``n`` on: those after a segment cut by the snaplen, which the
    written aggregate leaves out (see :func:`_payloads`)."""
    left = 0
    for p, o in zip(agg.pkts[n:], agg.pays[n:]):
        t = type(p)
        if t is tuple:
            left += len(p[1]) * p[5]
        elif t is bytes:
            left += len(p)
        else:
            left += len(p.data) - o
    return left


def _payload_sum(payloads):
    """One's-complement sum (mod 0xFFFF) of the concatenated payloads."""
    joined = b"".join(payloads)
    if len(joined) < 4096:
        return ones_sum(joined)
    return batch_sums([joined])[0]


def _join_sums(ps, lens):
    """The sum of concatenated payloads from their sums ``ps`` and lengths
    ``lens``: a payload that starts at an odd offset of the concatenation
    contributes its sum byte-swapped (x 256 mod 0xFFFF)."""
    if not any(map((1).__and__, lens)):
        return sum(ps) % 0xFFFF
    odd = 0
    s = 0
    for x, n in zip(ps, lens):
        s += x * 256 if odd else x
        odd ^= n & 1
    return s % 0xFFFF
