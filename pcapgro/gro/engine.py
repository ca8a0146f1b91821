"""The GRO engine: the loops that feed one emulated NAPI instance.

A capture shows no NAPI poll boundaries, so they are modelled: a poll ends
at an arrival gap over ``poll_gap_ns`` or after ``napi_budget`` packets
(net/core/dev.c napi_complete_done, __napi_poll; README "The NAPI model"),
or where the receiver's work ends it (``poll_model='work'``,
:mod:`pcapgro.gro.napi`).
The GRO lists, hold, flush and completion are the engine core
(:mod:`pcapgro.gro.core`, net/core/gro.c); the protocol rules are the
modules of the offload table (:mod:`pcapgro.gro.offload`).  This module
walks the input -- batches, capture chunks, polls -- and sends each packet
down one of the two paths that give the same result: the compiled core
(:mod:`pcapgro.gro.cfast`) where it models the packet and the
configuration, else the reference path through the offload table.
"""

from bisect import bisect_left
import copy

from ..errors import DamagedInput
from ..linklayer import network_layer
from .. import restore
from ..record import Interface, Packet, Section
from . import cfast
from .core import NAPI
from .csum import verify
from .flush import Flush, Pass
from .offload import inet_offload, packet_offload
from .napi import PollClock, PollShifts
from .seg import Seg

__all__ = ["GROEngine"]

_BATCH = 256        # Packets per batch in process()
_MAX_BATCH = 4096   # at most this many Packets per _packets() call
_ONLY_PACKETS = {Packet}


def _gaps(ts, gap):
    """The indexes ``i`` (list, ascending) where arrival times ``ts`` (list
    of ns) jump by more than ``gap`` ns from ``ts[i - 1]``: poll starts.
    (Plain Python: numpy's import alone costs more than this on the
    packets the reference path takes.)"""
    return [i for i in range(1, len(ts)) if ts[i] - ts[i - 1] > gap]


def _batches(it, n):
    """Yield runs of up to ``n`` Packets as lists, and every other event
    alone (in a list of its own).  On an error from ``it`` yield what was read
    before it, then re-raise, so nothing read is lost (but when the
    consumer closes this generator: a yield then would be a RuntimeError,
    "generator ignored GeneratorExit", e.g. on Ctrl-C)."""
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
    except GeneratorExit:
        raise               # closed by its consumer: nothing more to yield
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
    and also takes a reader's lazy chunks (``RecordChunk``, ``EpbChunk``:
    records not yet made into Packets), which the compiled core takes in
    place where it can.  Both give the same output.

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
        # which path runs: cfast.usable (this configuration) and
        # cfast.layout (each chunk) decide
        self._c_ok = cfast.usable(self.cfg)
        # the work poll model (pcapgro.gro.napi): its clock, which the
        # compiled loop moves too (cfast.CEngine.run)
        self._clock = PollClock(self.cfg) if self.cfg.poll_model == "work" else None
        # where poll starts would move with the timing off by x2 / x0.5
        self._shifts = PollShifts(self.cfg)
        # blocks written ahead of held packets (pcapgro.restore.BlockClaims)
        self._claims = restore.BlockClaims()
        # records of lazy chunks the reference path took (hand-overs from
        # the compiled core, or chunks it does not take): 0 when the
        # compiled core took every one (tests/test_rule_list.py)
        self.py_records = 0

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
        """GRO over one list of Packets on the reference path (appends to
        ``self.out``)."""
        self._release()
        stats = self.stats
        base = stats.packets
        stats.packets += len(batch)
        if self.cfg.napi_budget and self._clock is None:
            self._loop_budget(batch, base)
            return
        ts = [ev.ts for ev in batch]
        self._polls(ts, lambda a, b: self._run_general(batch, base, ts, a, b))

    def _chunk(self, lb):
        """GRO over a lazy chunk (a RecordChunk: records of a classic pcap
        chunk; an EpbChunk: a run of pcapng EPBs of one interface; not yet
        Packets): the compiled core takes records in place as far as it
        goes (laid out as :func:`cfast.layout` says), whenever this engine
        holds nothing; what it holds when it stops is handed over and the
        reference path goes on up to a poll start (a gap, or one the work
        model's clock finds: :meth:`_poll_starts`; every held packet is
        then completed), where the core may start again."""
        n = len(lb)
        if not n:
            return
        lay = cfast.layout(lb, self) if self._c_ok else None
        if lay is None:
            self._release()
            self._chunk_py(lb)
            return
        if self._c is None:
            self._c = cfast.CEngine(self.cfg, self.ng_out)
        if lay != self._c.lay:
            # what it holds is another interface's (laid out for it): handed
            # over, and completed here when the chunk starts a poll
            self._release()
            self._c.set_output(lay)
            if self.flows and self.last_ts is not None:
                t0 = lb.part(0, 1).times()[0]
                ends = self._poll_starts([t0], 0)
                if ends[0]:
                    cfast.poll_start(self, t0, ends[1][0])
        i = 0
        starts = None
        while True:
            if not self.flows:
                i = self._c.run(self, lb, i)
                if i == n:
                    return
                self._release()
            if starts is None:
                ts = lb.times()
                starts, why = self._poll_starts(ts, i)
                starts.append(n)
            # the reference path goes on to the first poll start at or after
            # the next cfast.MIN_RUN records the core takes (issue 18.7)
            k = bisect_left(starts, self._c.scan(lb, i + 1, cfast.MIN_RUN))
            g = starts[k]
            self._chunk_py(lb.part(i, g))
            if g == n:
                return
            # what the reference path does before the poll that starts at
            # g, when that leaves nothing held (else it goes on from g)
            cfast.poll_start(self, ts[g], why[k])
            i = g

    def _poll_starts(self, ts, i):
        """The poll starts among packets ``i..`` with arrival times ``ts``
        (list of ns; those before ``i`` taken already) and why the poll
        before each ended: (list of indexes, list of Flush reasons, or of
        None under the gap model: cfast.poll_start tells then).  The work
        model's are its PollClock's from where it stands now (a copy: the
        clock moves as the packets are taken, by either path)."""
        if self._clock is None:
            starts = _gaps(ts, self.cfg.poll_gap_ns)
            if i == 0 and self.last_ts is not None and ts[0] - self.last_ts > self.cfg.poll_gap_ns:
                starts.insert(0, 0)
            return starts, [None] * len(starts)
        clock = copy.copy(self._clock)
        got = clock.ends(ts[i:])
        return [i + j for j, _ in got], [r for _, r in got]

    def _chunk_py(self, lb):
        """:meth:`_chunk` on the reference path (a hand-over): the chunk's
        records as Packets."""
        self.py_records += len(lb)
        self._packets(lb.packets())

    def _polls(self, ts, run):
        """Split packets with arrival times ``ts`` (list of ns) at the poll
        ends (gaps, or the work model's ends), calling ``run(a, b)`` for
        each run of packets a..b-1 of one poll and ending the polls in
        between; where GRO holds packets, a poll end is counted with its
        gap and a packet where the timing x2 / x0.5 would move a poll
        start with its move (GROStats)."""
        n = len(ts)
        last = self.last_ts
        if self._clock is not None:
            ends, why = self._work_ends(ts)
        else:
            gap = self.cfg.poll_gap_ns
            ends = _gaps(ts, gap)
            if last is not None and ts[0] - last > gap:
                ends.insert(0, 0)
            why = [Flush.POLL_END] * len(ends)
        moves = {i: (m2, mh) for i, m2, mh in self._shifts.points(ts, last, ends)}
        reason = dict(zip(ends, why))
        points = sorted(reason.keys() | moves.keys())
        points.append(n)
        self.last_ts = ts[-1]
        a = 0
        for b in points:
            if b > a:
                run(a, b)
                a = b
            if b == n or not self.flows:
                continue
            if b in moves:
                self.stats.count_moves(*moves[b])
            if b in reason:
                self._poll_boundary(reason[b], last if b == 0 else ts[b - 1], ts[b])

    def _poll_boundary(self, reason, prev, nxt):
        """End the poll whose last packet came at ``prev`` before the one at
        ``nxt`` (ns) for ``reason`` while GRO holds packets: Flush.BUDGET,
        the budget flush (__napi_poll; old-only when hz >= 1000), or
        Flush.POLL_END (napi_complete_done: NAPI.poll_end), counted with
        its gap."""
        if reason == Flush.BUDGET:
            self.stats.budget_ends += 1
            self.flush(Flush.BUDGET, prev, old_only=self.cfg.hz >= 1000)
        else:
            self.stats.count_poll_end(nxt - prev)
            self.poll_end(prev, nxt, self.cfg.gro_flush_timeout)

    def _work_ends(self, ts):
        """The work model's poll starts among ``ts`` (list of indexes) and
        why the poll before each ended (list of Flush reasons)."""
        got = self._clock.ends(ts)
        return [i for i, _ in got], [r for _, r in got]

    def moves_at(self, t):
        """(x2, x0.5): would the poll start before a packet at ``t`` (ns),
        after ``last_ts``, which ends a poll at a gap or by the work
        model's clock, move with the timing off by that factor (the
        clocks are not moved: copies)."""
        sh = self._shifts
        if sh.clocks is None:
            return sh.gap_moves(t - self.last_ts)
        return tuple(not copy.copy(c).ends([t]) for c in sh.clocks)

    def _run_general(self, batch, base, ts, a, b):
        """Packets ``a..b-1`` of ``batch`` (one poll) on the reference path."""
        general = self._general
        for i in range(a, b):
            general(batch[i], base + i, ts[i])

    def _loop_budget(self, batch, base):
        """The per-packet loop with a NAPI budget (polls end at gaps and
        after ``napi_budget`` packets: __napi_poll)."""
        cfg = self.cfg
        gap = cfg.poll_gap_ns
        timeout = cfg.gro_flush_timeout
        budget = cfg.napi_budget
        flows = self.flows
        last_ts = self.last_ts
        in_poll = self.in_poll
        stats = self.stats
        gap_moves = self._shifts.gap_moves
        lo, hi = sorted(self._shifts.gaps[1:])     # gaps where a poll end moves
        try:
            for i, ev in enumerate(batch):
                t = ev.ts
                if last_ts is not None:
                    if in_poll == budget:
                        # the poll took its whole budget
                        if flows:
                            stats.budget_ends += 1
                            self.flush(Flush.BUDGET, last_ts, old_only=cfg.hz >= 1000)
                        in_poll = 0
                    else:
                        d = t - last_ts
                        if flows and lo < d <= hi:
                            stats.count_moves(*gap_moves(d))
                        if d > gap:
                            if flows:
                                stats.count_poll_end(d)
                                self.poll_end(last_ts, t, timeout)
                            in_poll = 0
                last_ts = t
                in_poll += 1
                self._general(ev, base + i, t)
        finally:
            self.last_ts = last_ts
            self.in_poll = in_poll

    def _general(self, ev, idx, t):
        """The reference path for one packet: parse, verify, receive or
        pass, each step through the offload table.  ``idx``: its input
        index; ``t``: its time (ns).  Returns the Agg now holding it, or
        None."""
        self.idx = idx
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
