"""The compiled fast path: classic pcap chunks and pcapng runs of EPBs of
IPv4/IPv6 TCP and UDP -- directly or inside one tunnel level (IPIP, SIT,
IP4IP6, IP6IP6, GRE, VXLAN, Geneve) -- behind Ethernet (VLAN-tagged or
not), Linux cooked (SLL, SLL2), raw IP or BSD loopback link headers,
standard or fraglist GRO, in C.

:mod:`pcapgro._native` (``pcapgro/_native.c``, built by ``setup.py`` when a
C compiler is there; optional) runs GRO over the records of an input chunk
in place (a pcap reader's RecordChunk, or a pcapng reader's EpbChunk: EPBs
of one interface), one flat loop for the common case, and writes what is
handed up as classic pcap records (:class:`RawRecords`) or EPBs
(:class:`RawBlocks`).
The kernel inlines its GRO fast path for the same reason: per-packet calls
cost; in CPython they cost ~100 times more.

The Python engine (:class:`pcapgro.gro.engine.GROEngine`) stays the
reference and is in charge: it gives a chunk to the compiled loop only when
it holds nothing itself; the loop passes up what GRO passes unchanged (ARP,
ICMP, fragments, bad checksums..., under the reference's Pass reasons) and
stops at the first record it does not handle (see ``_native.c`` for which:
a tunnelled packet behind a third VLAN tag...), and the aggregates it
holds then are handed over as
:class:`pcapgro.gro.seg.Agg` objects
(:meth:`CEngine.release`, ``GROEngine.adopt``), so the Python engine
continues exactly where it stopped; at a poll start after an arrival gap
where the Python engine then holds nothing (:func:`poll_start`) the loop
may take over again: at the first one before ``MIN_RUN`` records in a row
it handles (:meth:`CEngine.scan`), so traffic it mostly does not take is
handed over once, not once per packet (under the work model the poll
starts are those its clock finds: ``GROEngine._poll_starts``).  Same output, statistics and GRO
state as the Python paths (tests/test_gro_cfast.py).

Used when the input is classic pcap and the output either classic pcap
of the input's byte order and resolution (``GROEngine.raw_out``, no
annotations) or pcapng (``GROEngine.ng_out``: the loop writes the EPBs,
with the comments, TSO flag and restore records of annotated output, as
:class:`RawBlocks`; ``pcapgro/_annotate.h``); or when the input is pcapng
(EPBs of a decimal or binary timestamp resolution, with or without
options: a passed packet or an aggregate's head keeps them, a merged
segment's go into the restore record's ``m=``, as the reference writes
them; handed over, an aggregate's head gets its PacketMeta back,
:func:`_meta`, and ``Agg.metas0`` the ``m=`` entries) and the output
pcapng (EPBs on the packet's own interface in its own units) or classic
pcap as the writer lays it out (``GROEngine.raw_layout``, no annotations):
see :func:`layout`; and the configuration is one the loop models: standard
or fraglist GRO (fraglist: local sockets too), UDP tunnel sockets
(``--vxlan-port``, ``--geneve-port``), the gap or the work poll model (the
work model's PollClock state, ``GROEngine._clock``, goes to the loop and
back with each run, so either path goes on with the same clock), with or
without a NAPI budget and gro_flush_timeout.  An aggregate handed over
carries the restore rows of what the loop merged (``Agg.rows0``); a
tunnelled one's head is parsed again through the tunnel callback
(:func:`_head_seg`).  The poll
count (``GROEngine.in_poll``) goes to the loop and back with each run.
``PCAPGRO_NO_C=1`` in the environment turns it off.
"""

import os

from ..capture import _stream, pcapng
from ..record import BLOCK_EPB, Packet, RawBlocks, RawRecords
from .flush import Flush, Pass
from .offload import inet_offload

try:  # the extension is optional (no C compiler at install time)
    from .. import _native
except ImportError:          # pragma: no cover - depends on the build
    _native = None

__all__ = ["available", "usable", "layout", "poll_start", "CEngine", "FLUSH_CODES", "PASS_CODES",
           "LINKTYPES"]

# the link types the loop walks (linklayer.network_layer's): EN10MB, Linux
# cooked v1 and v2, raw IP (RAW, the two DLT_RAW numbers, IPV4, IPV6), BSD
# loopback (NULL, LOOP)
LINKTYPES = frozenset((1, 113, 276, 101, 12, 14, 228, 229, 0, 108))

# the reason codes of _native.c, in its order, from the names it exports
# (a name that is not a Flush/Pass value raises ValueError at import)
FLUSH_CODES = tuple(Flush(v) for v in _native.FLUSH_NAMES) if _native else ()
PASS_CODES = tuple(Pass(v) for v in _native.PASS_NAMES) if _native else ()
# the aggregate kinds of its statistics (GROStats.by_kind keys), in its order
KINDS = _native.KIND_NAMES if _native else ()

# the compiled loop takes over again from the Python engine only where at
# least this many records in a row are ones it handles: a hand-over costs
# about as much as the Python paths spend on ~50 records, so on traffic the
# loop mostly does not take it never hands over per packet (issue 18.7)
MIN_RUN = 64


def available():
    """True when the compiled extension is importable and not turned off by
    ``PCAPGRO_NO_C``."""
    return _native is not None and not os.environ.get("PCAPGRO_NO_C")


def usable(cfg):
    """True when :class:`pcapgro.gro.GROConfig` ``cfg`` is one the compiled
    loop models (see the module doc): with this and :func:`layout` (which
    chunks, written how), the one place that decides which path runs.  It
    models both poll models, the work model's costs (pcapgro.gro.napi)
    each under ``WORK_COST_END`` ns, and UDP tunnel sockets."""
    return (available() and cfg.compiled
            and (cfg.poll_model == "gap" or cfg.poll_model == "work" and all(
                0 <= c < WORK_COST_END for c in _work_costs(cfg)))
            and cfg.hash in ("flow", "none") and cfg.csum in ("valid", "kernel")
            and 1 <= cfg.gro_max_size <= 0x7FFFFFFF and cfg.hz > 0)


# the compiled loop's work model costs stay under 2**30 ns (~1.07 s) each,
# so that its clock (int64 ns) cannot overflow for any capture time
WORK_COST_END = 1 << 30


def _work_costs(cfg):
    """The work model's costs of ``cfg`` (ns): poll_wake_ns, poll_rx_ns,
    deliver_ns, deliver_seg_ns, as PollClock takes them."""
    return (int(cfg.poll_wake_ns), int(cfg.poll_rx_ns), int(cfg.deliver_ns),
            int(cfg.deliver_seg_ns))


def poll_start(eng, ts, reason=None):
    """End the NAPI poll of GROEngine ``eng`` before the packet at ``ts``
    (ns; a poll start: an arrival gap after ``eng.last_ts``, or under the
    work model one its PollClock finds, ended for ``reason``, Flush.BUDGET
    or Flush.POLL_END) as its Python paths would (``_polls``,
    ``_loop_budget``: the budget flush when the poll took ``napi_budget``
    packets, else the poll end), but only when that leaves nothing held,
    so the compiled loop can take over there; True then.  Else nothing is
    done and False returned: the Python paths go on and end that poll
    themselves (ending it here as well would flush twice: a budget end
    followed by a gap's poll end).  An old-only flush (the budget's with
    hz >= 1000, a poll end's with gro_flush_timeout) leaves the packets
    held in the current jiffy.  (Under the work model the loop's clock
    then finds the same poll end again, with nothing left to flush.)"""
    if not eng.flows:
        return True
    cfg = eng.cfg
    last = eng.last_ts
    now = last // eng.jiffy_ns
    young = any(agg.age == now for agg in eng.flows.values())
    if reason is None:
        budget_end = cfg.napi_budget and eng.in_poll == cfg.napi_budget
    else:
        budget_end = reason == Flush.BUDGET
    if budget_end:
        if cfg.hz >= 1000 and young:
            return False
        if reason is not None:          # the work model's (the gap model's
            eng.stats.count_moves(*eng.moves_at(ts))    # ignores the gap)
    else:
        timeout = cfg.gro_flush_timeout
        if timeout and young and not ts - last > timeout:
            return False
        eng.stats.count_moves(*eng.moves_at(ts))
    eng._poll_boundary(Flush.BUDGET if budget_end else Flush.POLL_END, last, ts)
    if cfg.napi_budget and reason is None:
        eng.in_poll = 0
    return True


def layout(lb, eng):
    """How the compiled loop would write the records of chunk ``lb`` (a
    pcap reader's RecordChunk or a pcapng reader's EpbChunk) for GROEngine
    ``eng``: ``(iface, swap, unit, off)`` for ``_native.Engine.output``
    (pcapng: EPBs on interface ``iface``, timestamps ``(ns - off) //
    unit``; classic pcap: fraction unit ``unit`` ns; ``swap``: not in host
    byte order), or None when it does not take the chunk.

    RecordChunk (16-byte record headers): pcapng output as ``eng.ng_out`` agreed (interface 0), or
    classic pcap in the input's format (``eng.raw_out``, not annotated).
    EpbChunk of any timestamp resolution up to 2**-63 s or 10**-19 s
    (unit: :func:`_in_unit`): pcapng
    output on the packets' own interface in its own units
    (``eng.ng_out == (byteorder or None, None)``: the writer numbers the
    interfaces as the reader does) or classic pcap as the writer's
    ``record_layout`` says (``eng.raw_layout``, not annotated)."""
    if lb.linktype not in LINKTYPES:
        return None
    annotate = eng.cfg.annotate
    if not lb.epb:
        if lb.hl != 16:
            return None         # modified pcap: longer record headers
        if eng.ng_out and eng.ng_out[1] is not None:
            return 0, eng.ng_out[0] != _NATIVE, eng.ng_out[1], 0
        if eng.raw_out and not annotate:
            return 0, lb.byteorder != _NATIVE, lb.mul, 0
        return None
    unit = _in_unit(lb)
    if unit is None:
        return None
    if eng.ng_out and eng.ng_out[1] is None:
        return lb.iface, (eng.ng_out[0] or lb.byteorder) != _NATIVE, unit, lb.tsoff
    rl = eng.raw_layout(lb.linktype) if eng.raw_layout is not None and not annotate else None
    if rl is None:
        return None
    return lb.iface, rl[0] != _NATIVE, rl[1], 0


class CEngine:
    """The compiled loop bound to one GROEngine's configuration.

    Args:
        cfg: the GROConfig (``usable(cfg)`` must be True).
    """

    def __init__(self, cfg, ng_out=None):
        _stream.keep_heap()
        self.cfg = cfg
        # pcapng output: (byteorder, div) of the EPBs (PcapngWriter.accepts_blocks)
        self.ng_out = ng_out
        self.linktype = 1       # of the records of the last run
        self.iface = 0          # their interface
        self.lay = None         # the output layout set (layout(); set_output)
        ng = {} if ng_out is None else dict(pcapng=True,
                                            pcapng_swap=(ng_out[0] or _NATIVE) != _NATIVE,
                                            pcapng_div=ng_out[1] or 1, annotate=cfg.annotate)
        # a gap beyond 2**62 ns is never reached by pcap times (< 2**32 s)
        self.c = _native.Engine(limit=cfg.gro_max_size,
                                poll_gap_ns=max(min(cfg.poll_gap_ns, 1 << 62), -(1 << 62)),
                              jiffy_ns=1_000_000_000 // cfg.hz, verify=cfg.verify_csum,
                              csum_valid=cfg.csum == "valid", hash_flow=cfg.hash == "flow",
                              vlan=cfg.vlan_gro, udp_gro=cfg.udp == "gro",
                              fraglist=cfg.fraglist,
                              gro_flush_timeout=min(cfg.gro_flush_timeout, 1 << 62),
                              napi_budget=cfg.napi_budget, budget_old_only=cfg.hz >= 1000,
                              local_ports=_port_set(cfg.local_ports),
                              inet_handlers=_inet_handlers(),
                              vxlan_ports=_port_set(cfg.vxlan_ports),
                              geneve_ports=_port_set(cfg.geneve_ports),
                              **ng, **_work_args(cfg))

    @property
    def held(self):
        """Aggregates (and single packets) the loop holds."""
        return self.c.held

    def set_output(self, lay):
        """Write records as ``lay`` (what :func:`layout` gave) from now on;
        call while the loop holds nothing."""
        assert not self.c.held
        self.iface, swap, unit, off = lay
        self.c.output(swap, unit, off, self.iface)
        self.lay = lay

    def run(self, eng, lb, start=0):
        """GRO over records ``start..`` of chunk ``lb`` (RecordChunk or
        EpbChunk, written as :meth:`set_output` said) for GROEngine ``eng``
        (its ``last_ts``, ``in_poll``, ``last_out_ts``, ``stats`` and
        ``out`` are updated; the records handed up are appended to
        ``eng.out`` as one :class:`RawRecords` or :class:`RawBlocks`).
        Returns the index of the first record not taken (``len(lb)`` when
        all were; ``start`` when the engine's times are beyond what the
        loop takes)."""
        st = eng.stats
        last = eng.last_ts
        if not (-(1 << 61) <= (last or 0) < (1 << 62)
                and eng.last_out_ts < (1 << 62 if self.ng_out else _PCAP_TS_END)):
            return start
        clocks = None
        if eng._clock is not None:            # the work model's, x2, x0.5
            clocks = (eng._clock,) + eng._shifts.clocks
            if not all(map(_clock_fits, clocks)):
                return start
            self.c.clocks = tuple((c.open, c.now, c.n, c.free) for c in clocks)
        self.c.in_poll = eng.in_poll          # the NAPI poll goes on
        k, data, n, maxcap, last_ts, have, last_out, nbytes = self.c.run(
            lb.buf, lb.recs, start, st.packets - start, _in_unit(lb), lb.byteorder != _NATIVE,
            last if last is not None else 0, last is not None, eng.last_out_ts, lb.linktype,
            *_epb_args(lb))
        self.linktype = lb.linktype
        eng.in_poll = self.c.in_poll
        if clocks is not None:
            for c, state in zip(clocks, self.c.clocks):
                c.open, c.now, c.n, c.free = state
        st.packets += k - start
        if have:
            eng.last_ts = last_ts
        eng.last_out_ts = last_out
        if n:
            eng.out.append(RawRecords(data, n, maxcap, last_out) if self.ng_out is None
                           else RawBlocks(data, n, maxcap, nbytes, last_out, self.iface,
                                          self._block_layout()))
        self.collect(st)
        return k

    def _block_layout(self):
        """RawBlocks.layout of what :meth:`run` writes: None for a classic
        pcap input's (the section accepts_blocks agreed), else (byteorder,
        unit, off) of the interface's EPBs."""
        if self.ng_out[1] is not None:
            return None
        _, swap, unit, off = self.lay
        return (_OTHER if swap else _NATIVE), unit, off

    def scan(self, lb, start, run=1):
        """The index ``i`` of the first record from ``start`` on of
        RecordChunk ``lb`` such that :meth:`run` would take records ``i ..
        i + run - 1`` (or up to the chunk's end); ``len(lb)`` when none.
        Counts nothing."""
        return self.c.scan(lb.buf, lb.recs, start, _in_unit(lb), lb.byteorder != _NATIVE, run,
                           lb.linktype, *_epb_args(lb))

    def collect(self, st):
        """Add the loop's counters to GROStats ``st`` (and reset them); the
        counts by reason, kind and gap come as (index, count) pairs of the
        nonzero ones."""
        (flush, passed, verified, seed, singles, aggs, segs, hist, kind_aggs,
         kind_segs, bad, skip_l3, skip_cut, cut_aggs, cut_left, skip_udp0) = self.c.stats()
        for k, v in flush:
            st.flush[FLUSH_CODES[k]] += v
        for k, v in passed:
            st.passed[PASS_CODES[k]] += v
        if verified:
            st.csum["verified"] += verified
        if seed:
            st.csum["seed"] += seed
        if bad:
            st.csum["bad"] += bad
        if skip_l3:
            st.csum["skipped_l3_flush"] += skip_l3
        if skip_cut:
            st.csum["skipped_truncated"] += skip_cut
        if skip_udp0:
            st.csum["skipped_udp_zero"] += skip_udp0
        st.singles += singles
        if cut_aggs:
            st.cut_aggregates += cut_aggs
            st.cut_bytes_left_out += cut_left
        if aggs:
            st.aggregates += aggs
            st.segments_merged += segs
            for (k, a), (_, n) in zip(kind_aggs, kind_segs):
                st.by_kind[KINDS[k]] += a
                st.segments_by_kind[KINDS[k]] += n
            st.hist.update(hist)
        gaps, budget_ends, moved2, movedh = self.c.timing_stats()
        for k, v in gaps:
            st.poll_gaps[k] += v
        st.budget_ends += budget_ends
        st.count_moves(moved2, 0)
        st.count_moves(0, movedh)

    def release(self, eng):
        """Hand every aggregate the loop holds to GROEngine ``eng`` (its
        ``flows`` and ``buckets``, in bucket order), as the Python engine
        would hold them; the loop then holds nothing.  ``eng.in_poll``
        (the NAPI poll's packet count) is left as it is: :meth:`run` has
        given it back already."""
        if not self.c.held:
            return
        valid = self.cfg.csum == "valid"     # sums are only used for that
        for (b, h, head, head_ts, head_idx, tail, count, mss, seq_next, size, fin_psh,
             fixedid, age, head_psum, tail_psum, rows, flist, partial, head_orig, cut,
             left, outer_fixedid, hopt, hswap, mrows) in self.c.release():
            pkt = Packet(head_ts, head, head_orig, self.iface, self.linktype,
                         _meta(hopt, hswap))
            agg = eng.adopt(_head_seg(eng, pkt), h, age, bool(flist))
            agg.outer_fixedid = bool(outer_fixedid)
            agg.head.partial = bool(partial)     # csum.verify's verdict
            agg.idxs = [head_idx]
            agg.psums = [head_psum if valid else None]
            if count > 1:
                # what was merged, as one entry of payload bytes (ending
                # with a segment cut by the snaplen: a Packet shorter than
                # its original length, as payload.payloads finds it)
                if cut and len(head) == head_orig:
                    tail = Packet(head_ts, tail, len(tail) + 1, self.iface, self.linktype,
                                  None)
                self._merged(agg, tail, head_idx + 1, tail_psum if valid else None)
                if left:
                    # the payload after the cut, left out: only its length counts
                    self._merged(agg, bytes(left), head_idx + 2, None)
                # annotated: the restore rows of what was merged, and the
                # m= entries of those that had EPB options
                agg.rows0 = rows or None
                agg.metas0 = mrows or None
            agg.count = count
            agg.mss = mss
            agg.seq_next = seq_next
            agg.size = size
            agg.fin_psh = fin_psh
            agg.fixedid = bool(fixedid)
            assert agg.bucket is eng.buckets[b]

    @staticmethod
    def _merged(agg, entry, idx, psum):
        """Append ``entry`` (payload bytes, or a Packet whose payload starts
        at 0) to Agg ``agg``'s merged entries."""
        agg.pkts.append(entry)
        agg.pays.append(0)
        agg.idxs.append(idx)
        agg.psums.append(psum)


def _meta(opts, swap):
    """The PacketMeta the pcapng reader makes of an EPB whose options are
    ``opts`` (bytes; byte order not the host's when ``swap``): None when it
    had none."""
    if not opts:
        return None
    bo = _OTHER if swap else _NATIVE
    return pcapng._packet_meta(BLOCK_EPB, pcapng.parse_options(opts, 0, len(opts), bo), bo)


def _work_args(cfg):
    """The Engine() keywords of the work poll model: none under the gap
    model."""
    if cfg.poll_model != "work":
        return {}
    wake, rx, dp, ds = _work_costs(cfg)
    return dict(poll_work=True, poll_wake_ns=wake, poll_rx_ns=rx, deliver_ns=dp,
                deliver_seg_ns=ds)


def _clock_fits(clock):
    """True when PollClock ``clock``'s state is one the loop's int64 clock
    holds (times under 2**62 ns, as ``run`` asks of ``last_ts``)."""
    return (-(1 << 61) <= clock.now < (1 << 62) and 0 <= clock.n < (1 << 40)
            and (clock.free is None or -(1 << 61) <= clock.free < (1 << 62)))


def _head_seg(eng, pkt):
    """The Seg GROEngine ``eng`` holds for the head ``pkt`` of an aggregate
    the loop hands over: parsed, and through the tunnel callback for a
    tunnelled flow (the inner flow's Seg) as ``GROEngine._general`` does,
    without counting that callback's checksum verdict a second time."""
    seg = eng._parse(pkt)
    tunnel = inet_offload(seg.proto).tunnel
    if tunnel is None:
        return seg
    csum = eng.stats.csum
    before = dict(csum)
    seg = tunnel(eng, seg)
    csum.clear()
    csum.update(before)
    return seg


def _in_unit(lb):
    """The time unit of chunk ``lb``'s records for the loop: ``lb.mul``
    (ns per tick, or per fraction unit of a classic pcap record), or for
    EPBs whose ticks pcapng.ts_to_ns converts with a function
    (``lb.conv``): -k for a binary resolution 2**-k s (``(ticks * 10**9
    >> k) + off`` ns; 1 <= k <= 63), -(64 + e) for a decimal one of
    10**-(9 + e) s (``ticks // 10**e + off``; 1 <= e <= 10); None when the
    loop does not convert them (finer still)."""
    conv = getattr(lb, "conv", None)
    if conv is None:
        return lb.mul
    return pcapng._tick_code(conv)


def _epb_args(lb):
    """The run() / scan() arguments after the link type for chunk ``lb``:
    none for classic pcap records, (iface, offset ns) for EPBs."""
    return (lb.iface, lb.tsoff) if lb.epb else ()


def _inet_handlers():
    """The loop's table of IP protocols (256 bytes): 0 without a GRO handler
    in the offload table (passed: no_handler), 1 TCP / UDP, 2 another
    handler's (a tunnel's: the loop's tunnel steps, rx_tunnel)."""
    table = bytearray(256)
    for p in range(256):
        off = inet_offload(p)
        if off is not None:
            table[p] = 1 if off.name in ("tcp", "udp") else 2
    return bytes(table)


def _port_set(ports):
    """``ports`` (ints 0..65535) as the loop's bit set: 8192 bytes, port p
    at bit p % 8 of byte p // 8; b"" when there are none."""
    if not ports:
        return b""
    bits = bytearray(65536 // 8)
    for p in ports:
        if 0 <= p < 65536:            # no other port is ever a segment's
            bits[p >> 3] |= 1 << (p & 7)
    return bytes(bits)


_NATIVE = "<" if __import__("sys").byteorder == "little" else ">"
_OTHER = ">" if _NATIVE == "<" else "<"
_PCAP_TS_END = (1 << 32) * 1_000_000_000     # classic pcap: 32-bit seconds
