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
* Timestamps: every packet written is stamped when it is handed up: the
  arrival time of the packet whose processing completed it, the end of the
  poll (last packet's time) or the timer's expiry.  A packet passed through
  keeps its own time.  Output times never go backwards.
"""

import struct
import zlib
from itertools import repeat

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
from .fastpath import classify, classify_chunk
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
        self.last_out_ts = 0
        self.jiffy_ns = 1_000_000_000 // self.cfg.hz
        self.limit = self.cfg.gro_max_size
        self.idx = 0                     # input index of the packet in hand
        self._ps = None                  # its payload sum (or None), see _Agg
        self.last_ts = None              # arrival time of the last packet
        self.in_poll = 0                 # packets taken by the current poll

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
                        self._flush_all(Flush.SECTION_END, self.last_ts or 0)
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

    def _end(self):
        last = self.last_ts or 0
        if self.in_poll == (self.cfg.napi_budget or -1):
            self._flush_all(Flush.BUDGET, last)
        self._flush_all(Flush.END_OF_INPUT, last)

    def _packets(self, batch):
        """GRO over one list of Packets (appends to ``self.out``)."""
        cfg = self.cfg
        verify = cfg.verify_csum
        fast = cfg.fast_path
        stats = self.stats
        n = len(batch)
        base = stats.packets
        stats.packets += n
        if fast:
            cls = classify(batch, verify, cfg.csum == "valid") + ([None] * n,)
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
        a packet merged on the fast path is referred to as ``(lb, i)`` in
        ``Agg.pkts`` until the chunk is done (see :func:`_payloads`)."""
        cfg = self.cfg
        n = len(lb)
        if not n:
            return
        if not cfg.fast_path or cfg.napi_budget:
            self._packets(lb.packets())
            return
        off, cap, orig, t = lb.columns()
        cls = classify_chunk(lb, off, cap, orig, cfg.verify_csum, cfg.csum == "valid")
        if cls is None:
            self._packets(lb.packets())
            return
        stats = self.stats
        base = stats.packets
        stats.packets += n
        if cls[6]:
            stats.csum["verified"] += cls[6]
        cls += ([None] * n,)
        ts = lb.ts
        refs = list(zip(repeat(lb), range(n)))
        self._polls(ts, t, lambda a, b: self._run_fast(refs, lb.packet, base, cls, ts, a, b))
        # what stays held refers to this chunk no more: make those Packets
        for agg in self.flows.values():
            pk = agg.pkts
            for k in range(1, len(pk)):
                if type(pk[k]) is tuple:
                    pk[k] = lb.packet(pk[k][1])

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

    def _run_fast(self, refs, get, base, cls, ts, a, b):
        """Packets ``a..b-1`` (one poll) with the fast path.  ``get(i)``:
        Packet i; ``refs[i]``: what a merged packet i is kept as in
        ``Agg.pkts`` (the Packet, or a reference to it)."""
        prev, plen, pay, seqn, did, ok, _, psum, runend, owner = cls
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
                        dd = did[i]
                        if agg.count == 1:
                            agg.fixedid = dd == 0
                        elif dd != (0 if agg.fixedid else 1):
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
                            if k == 1:
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
            prev, plen, pay, seqn, did, ok, _, psum, runend, owner = cls
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
                            dd = did[i]
                            if agg.count == 1:
                                agg.fixedid = dd == 0
                            elif dd != (0 if agg.fixedid else 1):
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
        """Hand a packet up unchanged (GRO_NORMAL).  When older packets are
        held (it overtakes them) and the output is annotated, a restore
        record with its input index lets ``split --restore`` put it back."""
        self.stats.passed[reason] += 1
        ts = pkt.ts
        if ts < self.last_out_ts:
            ts = self.last_out_ts
        self.last_out_ts = ts
        if self.flows and self.cfg.annotate:
            rec = f"{restore.TAG}i={self.idx} t={pkt.ts}"
            pkt = Packet(ts, pkt.data, pkt.orig_len, pkt.iface, pkt.linktype,
                         _with_comment(pkt.meta, rec))
        elif ts != pkt.ts:
            pkt = Packet(ts, pkt.data, pkt.orig_len, pkt.iface, pkt.linktype, pkt.meta)
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

    def _hold(self, seg, t, flist=False):
        """Put ``seg`` on its GRO list as a new head (gso_size := its
        payload length), completing the bucket's oldest if the bucket is
        full (gro_flush_oldest).  ``flist``: a fraglist aggregate."""
        key = seg.key
        if self.cfg.hash == "flow":
            # an RSS-like hash over the 4-tuple: addresses and ports only
            if seg.family == 4:
                h = zlib.crc32(key[2] + key[3]) or 1
            else:
                h = zlib.crc32(key[3][1:33] + key[4]) or 1
        else:
            h = 0
        b = self.buckets[h & (GRO_HASH_BUCKETS - 1)]
        if len(b) >= MAX_GRO_SKBS:
            self._complete(b[0], Flush.BUCKET_FULL, t)
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
        agg.age = t // self.jiffy_ns
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
        """Complete a held packet (gro_complete) and hand it up at time t."""
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
                rec = f"{restore.TAG}i={agg.idxs[0]} t={pkt.ts}"
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
        payloads, cut = _payloads(agg)
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
            if tcp and None not in ps:
                psum = _join_sums(ps, payloads)
            else:
                psum = _payload_sum(payloads)
            s = pseudo + ones_sum(bytes(hdr[l4off:])) + psum
            c = (~fold(s)) & 0xFFFF
            if not tcp and c == 0:
                c = 0xFFFF
            hdr[at] = c >> 8
            hdr[at + 1] = c & 0xFF
        hdr = bytes(hdr)
        data = b"".join([hdr] + payloads)
        orig_len = l3off + ins + l3len
        meta = pkt.meta
        if self.cfg.annotate:
            old = pkt.meta
            comments = list(old.comments) if old is not None else []
            kind = "fraglist " if agg.flist else ""
            comments.append(f"pcapgro: GRO aggregate ({kind}{'TCP' if tcp else 'UDP'}) of "
                            f"{agg.count} segments, gso_size {agg.mss}")
            if not cut:
                pk = [p[0].packet(p[1]) if type(p) is tuple else p for p in agg.pkts]
                comments.append(restore.encode(hdr, pk, agg.pays, agg.idxs,
                                               old.flags if old is not None else None))
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


def _payloads(agg):
    """The captured payload bytes of every merged segment (memoryviews), in
    order, and whether the snaplen cut one: payload is then contiguous only
    up to and including the first cut segment, so later ones are left out."""
    out = []
    app = out.append
    for p, o in zip(agg.pkts, agg.pays):
        if type(p) is tuple:
            # (RecordChunk, i): a fast-path packet, never cut
            c, i = p
            s = c.off[i]
            app(c.mv[s + o:s + c.cap[i]])
            continue
        d = p.data
        app(memoryview(d)[o:])       # no copy: the caller joins them
        if len(d) < p.orig_len:
            return out, True
    return out, False


def _payload_sum(payloads):
    """One's-complement sum (mod 0xFFFF) of the concatenated payloads."""
    joined = b"".join(payloads)
    if len(joined) < 4096:
        return ones_sum(joined)
    return batch_sums([joined])[0]


def _join_sums(ps, payloads):
    """The sum of the concatenated ``payloads`` from their sums ``ps``: a
    payload that starts at an odd offset of the concatenation contributes
    its sum byte-swapped (x 256 mod 0xFFFF)."""
    lens = list(map(len, payloads))
    if not any(map((1).__and__, lens)):
        return sum(ps) % 0xFFFF
    odd = 0
    s = 0
    for x, n in zip(ps, lens):
        s += x * 256 if odd else x
        odd ^= n & 1
    return s % 0xFFFF
