"""The GRO engine: the loops that feed one emulated NAPI instance.

A capture shows no NAPI poll boundaries, so they are modelled: a poll ends
at an arrival gap over ``poll_gap_ns`` or after ``napi_budget`` packets
(net/core/dev.c napi_complete_done, __napi_poll; README "The NAPI model").
The GRO lists, hold, flush and completion are the engine core
(:mod:`pcapgro.gro.core`, net/core/gro.c); the protocol rules are the
modules of the offload table (:mod:`pcapgro.gro.offload`).  This module
walks the input -- batches, pcap chunks, polls -- and sends each packet
down one of the paths that give the same result: the compiled core
(:mod:`pcapgro.gro.cfast`), the numpy fast path (:mod:`pcapgro.gro.fastpath`,
:mod:`pcapgro.gro.plan`) or the general (reference) path through the
offload table.
"""

from bisect import bisect_left

import numpy as np

from ..errors import DamagedInput
from ..linklayer import ETH_P_IP, network_layer
from .. import restore
from ..record import Interface, Packet, Section
from . import cfast
from .core import NAPI
from .csum import verify
from .fastpath import classify, classify_chunk, fill_lazy
from .flush import Flush, Pass
from .offload import inet_offload, packet_offload
from .network import ipid_step
from .payload import Run, block_psum, run_psum, run_payloads
from .napi import PollClock
from .plan import plan_poll
from .seg import Seg

__all__ = ["GROEngine"]

_BATCH = 256        # Packets per batch in process()
_MAX_BATCH = 4096   # at most this many Packets classified at once
_ONLY_PACKETS = {Packet}
_IPV4 = packet_offload(ETH_P_IP)


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


class GROEngine(NAPI):
    """Linux GRO over a stream of capture events (a :class:`NAPI` instance
    and the loops that feed it).

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
        super().__init__(config)
        # True (set by pipeline.run for a classic pcap writer that takes the
        # input's records verbatim): chunks may go through the compiled
        # loop (pcapgro.gro.cfast), whose output is RawRecords
        self.raw_out = False
        # or (byteorder, div) (set by pipeline.run for a pcapng writer,
        # PcapngWriter.accepts_blocks): the loop writes EPBs (RawBlocks)
        self.ng_out = None
        # or f(linktype) -> (byteorder, fraction unit) or None (set by
        # pipeline.run for a classic pcap writer and pcapng input,
        # PcapWriter.record_layout): the loop writes such records
        self.raw_layout = None
        self._c = None                   # its CEngine, made on first use
        # the compiled loop models no UDP tunnel socket: with one, UDP
        # datagrams go through the Python paths (pcapgro.gro.udp_tunnel)
        self._c_ok = cfast.usable(self.cfg) and not (self.cfg.vxlan_ports
                                                      or self.cfg.geneve_ports)
        # the work poll model (pcapgro.gro.napi) runs on the Python paths
        self._clock = PollClock(self.cfg) if self.cfg.poll_model == "work" else None
        if self._clock is not None:
            self._c_ok = False
        # blocks written ahead of held packets (pcapgro.restore.BlockClaims)
        self._claims = restore.BlockClaims()

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
                    self._claims.apply(out)
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
                    self._claims.apply(out)
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
                        self.flush_all(Flush.SECTION_END, self.last_ts or 0)
                        # a new section's times do not depend on an earlier one's
                        self.last_out_ts = 0
                    elif type(ev) is Interface and self.cfg.annotate:
                        ev = restore.note_snaplen(ev, self.limit)
                    elif self.cfg.annotate:
                        # a block (NRB, ISB, custom) written ahead of held
                        # packets: the next packet written says where it goes
                        self._release()
                        if self.flows or self._claims.n:
                            self._claims.add(self.stats.packets, len(self.out) + 1)
                    self.out.append(ev)
                if run:
                    for a in range(0, len(run), _MAX_BATCH):
                        self._packets(run[a:a + _MAX_BATCH])
                if self.out:
                    out = self.out
                    self.out = []
                    self._claims.apply(out)
                    yield out
        except DamagedInput:
            self._end()
            out = self.out
            self.out = []
            self._claims.apply(out)
            yield out
            raise
        self._end()
        out = self.out
        self.out = []
        self._claims.apply(out)
        yield out

    def _release(self):
        """Hand what the compiled loop holds to this engine's GRO lists."""
        if self._c is not None and self._c.held:
            self._c.release(self)

    def _end(self):
        self._release()
        last = self.last_ts or 0
        if self.in_poll == (self.cfg.napi_budget or -1):
            self.flush_all(Flush.BUDGET, last)
        self.flush_all(Flush.END_OF_INPUT, last)

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
            cls = classify(batch, verify, cfg.csum == "valid")
            if cls.n_verified:
                stats.csum["verified"] += cls.n_verified
        else:
            cls = None
        if cfg.napi_budget and self._clock is None:
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
        Packets) or an EpbChunk (a run of pcapng EPBs of one interface):
        the compiled loop takes what it can (:func:`cfast.layout`); Packets
        are made only for what the Python paths take; packets merged on the
        fast path are kept in ``Agg.pkts`` as run entries referring to the
        chunk until it is done (see :func:`run_payloads`)."""
        n = len(lb)
        if not n:
            return
        py = self._chunk_packets if lb.epb else self._chunk_py
        lay = (cfast.layout(lb, self) if self._c_ok and lb.linktype in cfast.LINKTYPES
               else None)
        if lay is None:
            self._release()
            py(lb)
            return
        # the compiled loop takes records as far as it goes, whenever this
        # engine holds nothing; what it holds when it stops is handed over
        # and the Python paths go on up to a poll end (a gap: every held
        # packet is then completed), where the loop may start again
        if self._c is None:
            self._c = cfast.CEngine(self.cfg, self.ng_out)
        if lay != self._c.lay:
            # what it holds is another interface's (laid out for it): handed
            # over, and completed here when the chunk starts a poll
            self._release()
            self._c.set_output(lay)
            if self.flows and self.last_ts is not None:
                t0 = lb.part(0, 1).times()[0]
                if t0 - self.last_ts > self.cfg.poll_gap_ns:
                    self.poll_end(self.last_ts, t0, self.cfg.gro_flush_timeout)
        i = 0
        starts = None
        while True:
            if not self.flows:
                i = self._c.run(self, lb, i)
                if i == n:
                    return
                self._release()
            if starts is None:
                t = lb.times()
                gap = self.cfg.poll_gap_ns
                starts = [k for k in range(1, n) if t[k] - t[k - 1] > gap]
                starts.append(n)
            # the Python paths go on to the first poll start at or after
            # the next cfast.MIN_RUN records the loop takes (issue 18.7)
            g = starts[bisect_left(starts, self._c.scan(lb, i + 1, cfast.MIN_RUN))]
            py(lb.part(i, g))
            if g == n:
                return
            if self.flows:
                # what _polls does before the poll that starts at g
                self.poll_end(self.last_ts, t[g], self.cfg.gro_flush_timeout)
            i = g

    def _chunk_packets(self, lb):
        """:meth:`_chunk` on the Python paths for an EpbChunk: its Packets."""
        self._packets(lb.packets())

    def _chunk_py(self, lb):
        """:meth:`_chunk` on the Python paths."""
        cfg = self.cfg
        n = len(lb)
        if not cfg.fast_path or (cfg.napi_budget and self._clock is None):
            self._packets(lb.packets())
            return
        off, cap, orig, t = lb.columns()
        plan = None if cfg.annotate or cfg.fraglist else self._plan
        cls = classify_chunk(lb, off, cap, orig, cfg.verify_csum, cfg.csum == "valid",
                             lazy=plan is not None)
        stats = self.stats
        base = stats.packets
        stats.packets += n
        if cls.n_verified:
            stats.csum["verified"] += cls.n_verified
        ts = lb.ts
        arrs = cls.arrs
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
                if type(e) is Run and e.chunk is not lb:
                    if annotate:
                        self._expand_run(agg, k)
                        break
                    if agg.psums[k] is None and cfg_sums:
                        agg.psums[k] = run_psum(e)
                    pk[k] = b"".join(run_payloads(e))

    def _plan(self, lb, base, cls, runs, t, a, b):
        """Records ``a..b-1`` of chunk ``lb`` (one poll) flow by flow
        (:func:`pcapgro.gro.plan.plan_poll`); False when the planner does
        not apply (nothing done)."""
        return plan_poll(self, lb, base, cls, runs, t, a, b)

    def _polls(self, ts, t, run):
        """Split packets with arrival times ``ts`` (list; ``t``: the same
        as a numpy array or None) at the poll ends (gaps: polls end only at
        gaps here), calling ``run(a, b)`` for each run of packets a..b-1 of
        one poll and ending the polls in between."""
        cfg = self.cfg
        n = len(ts)
        last = self.last_ts
        if self._clock is not None:
            ends, why = self._work_ends(ts)
        else:
            gap = cfg.poll_gap_ns
            if t is not None:
                ends = (np.flatnonzero(np.diff(t) > gap) + 1).tolist()
            else:
                ends = [i for i in range(1, n) if ts[i] - ts[i - 1] > gap]
            if last is not None and ts[0] - last > gap:
                ends.insert(0, 0)
            why = None
        ends.append(n)
        self.last_ts = ts[-1]
        timeout = cfg.gro_flush_timeout
        a = 0
        for k, b in enumerate(ends):
            if b == 0 or a:
                if self.flows:
                    prev = last if b == 0 else ts[a - 1]
                    if why is not None and why[k - (b != 0)] == Flush.BUDGET:
                        self.flush(Flush.BUDGET, prev, old_only=cfg.hz >= 1000)
                    else:
                        self.poll_end(prev, ts[b if b == 0 else a], timeout)
                if b == 0:
                    continue
            run(a, b)
            a = b

    def _work_ends(self, ts):
        """The work model's poll starts among ``ts`` (list of indexes) and
        why the poll before each ended (list of Flush reasons)."""
        got = self._clock.ends(ts)
        return [i for i, _ in got], [r for _, r in got]

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
        :func:`run_payloads`), not as Packets."""
        prev, plen, pay, seqn, did = cls.prev, cls.plen, cls.pay, cls.seqn, cls.did
        ok, psum, runend, owner = cls.ok, cls.psum, cls.runend, cls.owner
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
                        if not ipid_step(agg, did[i]):
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
                                agg.pkts.append(Run(chunk, blk, runs[0], runs[1], psum, L))
                                agg.pays.append(L)
                                agg.idxs.append(base + i)
                                agg.psums.append(block_psum(psum, blk, L))
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
                        self.pass_up(ev, Pass.PURE_ACK)
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
            prev, plen, pay, seqn, did = cls.prev, cls.plen, cls.pay, cls.seqn, cls.did
            ok, psum, owner = cls.ok, cls.psum, cls.owner
        try:
            for i in range(len(batch)):
                ev = batch[i]
                t = ev.ts
                if last_ts is not None:
                    if in_poll == budget:
                        # the poll took its whole budget (__napi_poll)
                        if flows:
                            self.flush(Flush.BUDGET, last_ts, old_only=cfg.hz >= 1000)
                        in_poll = 0
                    elif t - last_ts > gap:
                        if flows:
                            self.poll_end(last_ts, t, timeout)
                        in_poll = 0
                last_ts = t
                in_poll += 1
                if fast:
                    p = prev[i]
                    if p >= 0:
                        agg = owner[p]
                        L = plen[i]
                        if agg is not None and agg.fast and agg.size + L < limit:
                            if not ipid_step(agg, did[i]):
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
        receive or pass, each step through the offload table.  ``idx``: its
        input index; ``t``: its time (ns); ``checked``: classify already
        found it a plain Ethernet/IPv4/TCP packet with good checksums (it
        is not verified again), ``ps`` its payload sum from classify.
        Returns the Agg now holding it, or None."""
        self.idx = idx
        self.psum = ps
        if checked:
            seg = _IPV4.gro_receive(ev, 14, 0)   # checksums already good
        else:
            seg = self._parse(ev)
            if type(seg) is Seg:
                tunnel = inet_offload(seg.proto).tunnel
                if tunnel is not None:
                    # a tunnel's outer level: the inner flow's Seg from here
                    seg = tunnel(self, seg)
            if self.cfg.verify_csum and type(seg) is Seg:
                seg = verify(seg, self.stats.csum, seg.l4off + inet_offload(seg.proto).csum_at)
        if type(seg) is not Seg:
            self.pass_up(ev, seg)
            return None
        return inet_offload(seg.proto).gro_receive(self, seg, t)

    def _parse(self, pkt):
        """Seg for a packet an offload handler takes, else a Pass reason:
        the link layer is walked (:func:`pcapgro.linklayer.network_layer`),
        then the EtherType's handler parses (dev_gro_receive ->
        inet_gro_receive / ipv6_gro_receive)."""
        l3off, et, vlan = network_layer(pkt.linktype, pkt.data)
        off = packet_offload(et) if l3off is not None else None
        if off is None:
            return Pass.NOT_IP
        if vlan and not self.cfg.vlan_gro:
            return Pass.NO_HANDLER      # kernel without CONFIG_VLAN_8021Q
        return off.gro_receive(pkt, l3off, vlan)


    def _expand_run(self, agg, k):
        """Replace run entries ``agg.pkts[k:]`` by one Packet entry per record
        (what annotated output needs for its restore records)."""
        pk, pays, idxs, psums = agg.pkts, agg.pays, agg.idxs, agg.psums
        npk, npay, nidx, nps = pk[:k], pays[:k], idxs[:k], psums[:k]
        for m in range(k, len(pk)):
            e = pk[m]
            if type(e) is not Run:
                npk.append(e)
                npay.append(pays[m])
                nidx.append(idxs[m])
                nps.append(psums[m])
                continue
            c, xs, ps, psum = e.chunk, e.xs, e.ps, e.psum
            x0 = xs[0]
            npk += map(c.packet, xs)
            npay += [ps[x] - c.off[x] for x in xs]
            nidx += [idxs[m] + x - x0 for x in xs]
            nps += [psum[x] for x in xs]
        agg.pkts, agg.pays, agg.idxs, agg.psums = npk, npay, nidx, nps
