"""The GSO splitter: cut super-frames into wire-sized segments.

Mirrors the kernel's software segmentation (net/core/dev.c
skb_gso_segment -> net/ipv4/af_inet.c inet_gso_segment /
net/ipv6/ip6_offload.c ipv6_gso_segment -> net/ipv4/tcp_offload.c
tcp_gso_segment / net/ipv4/udp_offload.c __udp_gso_segment ->
net/core/skbuff.c skb_segment) of Linux 6.18.  Protocol rules live in
:mod:`.ipv4`, :mod:`.ipv6`, :mod:`.tcp` and :mod:`.udp`.

What a capture lacks, and how it is modelled:

* gso_size.  TCP: ``--mss``, else the MSS option of the peer's SYN /
  SYN-ACK, else of the sender's own SYN (both less the TCP option bytes the
  data segment carries, as tcp_current_mss does), else the gso_size
  pcapgro merge recorded in its aggregate's comment (what the kernel's
  skb carries into GSO; :func:`pcapgro.restore.recorded_gso_size`), else
  the largest non-super segment of the flow so far, else what fits
  ``mtu``.  Without ``--mss``, a SYN MSS or a recorded gso_size a TCP
  packet is a super-frame only when its L3 length exceeds ``mtu``.  UDP:
  ``gso_size``, else the recorded one.
* Segment timestamps.  Segment k of n gets ``ts + k * step`` (integer ns):
  ``step`` is the wire time of the first (full-sized) segment's frame at
  ``link_rate`` (``ceil(orig_len * 8 * 1e9 / link_rate)``, no preamble or
  gap counted), capped at ``(next_ts - ts) // n`` where ``next_ts`` is the
  timestamp of the next packet in the input, so the last segment never
  overtakes it (and at 0 when the next packet is not later).  With no next
  packet known (end of input, or a new section / more than 64 other blocks
  in between) only the wire time applies; ``link_rate=0`` stamps every
  segment with the super-frame's time.  Timestamps within a split are
  non-decreasing; packets passed through keep their own.

Frames that end in an FCS (the interface's if_fcslen, or classic pcap's
link-type FCS bits): the IP lengths tell the FCS from the payload; each
segment gets its own FCS and a completed checksum a recomputed one
(Ethernet CRC-32, :mod:`pcapgro.fcs`); an FCS of another kind leaves the
packet unchanged (``Pass.FCS``).

Memory: one packet of lookahead (plus up to 64 non-packet events read
after it), and per TCP flow its SYN MSS and largest segment size.
"""

import struct

from ..capture._stream import warn
from ..errors import DamagedInput, UnusableInput
from ..fcs import ETH_FCS, InterfaceFCS, refresh_fcs, with_fcs
from ..linklayer import ETH_P_IP, network_layer
from ..checksum import checksum, fold, ones_sum, pseudo_sum_v4, pseudo_sum_v6
from ..record import EPB_FLAG_TSO, Packet, PacketMeta, Section
from ..restore import own_comment, recorded_gso_size
from . import cseg, ipv4, ipv6, tcp, tunnel, udp
from .config import TCP_MIN_GSO_SIZE, GSOConfig
from .reasons import Pass, SizeSource
from .stats import FlowStats, GSOStats

__all__ = ["GSOSplitter", "TUNNEL_PORTS", "TUNNEL_PROTOS"]

TUNNEL_PORTS = (4789, 6081, 8472)   # VXLAN (IANA, Linux legacy 8472), Geneve
TUNNEL_PROTOS = (4, 41, 47)         # IPIP, IPv6-in-IP (SIT), GRE
EPB_FLAG_CSUM_NOT_READY = 1 << 9
_MAX_PENDING = 64
_SYN_RST = tcp.SYN | tcp.RST
_RAW = ()       # split()'s answer when the segments went into the record buffer
_ports = struct.Struct("!HH").unpack_from
_v4_len_frag = struct.Struct("!H2xH").unpack_from      # total length, frag word
_addr_words = struct.Struct("!HHHH").unpack_from       # IPv4 src + dst as 16-bit words


class _Flow:
    """Per TCP flow (one direction): MSS option of its SYN, largest
    payload (bytes) of a segment that fitted the MTU."""

    __slots__ = ("syn_mss", "largest")

    def __init__(self):
        self.syn_mss = 0
        self.largest = 0


def _name(src, dst, sport, dport):
    """'a:sport > b:dport' ('[a]:...' for IPv6) of 4- or 16-byte addresses."""
    import ipaddress        # here, once per flow: ~1 ms of start-up otherwise
    a = ipaddress.ip_address(bytes(src))
    b = ipaddress.ip_address(bytes(dst))
    if a.version == 6:
        return f"[{a}]:{sport} > [{b}]:{dport}"
    return f"{a}:{sport} > {b}:{dport}"


def _flow_name(l3, sport, dport):
    return _name(l3.src, l3.pdst, sport, dport)


def _key_name(key):
    """:func:`_flow_name` of a flow key (section, iface, [tunnel kind,]
    src, dst, sport, dport)."""
    return _name(*key[-4:])


class GSOSplitter:
    """Linux GSO/TSO over a stream of capture events.

    Usage::

        splitter = GSOSplitter(GSOConfig(gso_size=1200))
        for ev in splitter.process(reader):     # events of pcapgro.record
            writer.write(ev)
        splitter.stats.to_dict()

    Attributes:
        cfg:   the :class:`~pcapgro.gso.config.GSOConfig`.
        stats: :class:`~pcapgro.gso.stats.GSOStats`.
    """

    def __init__(self, config=None, fast_path=True):
        """Args:
            config:    a GSOConfig (default GSOConfig()).
            fast_path: use the flat path for untagged Ethernet/IPv4/TCP
                       packets that need no split (same result as the
                       general path; False only for tests comparing both).
        """
        self.cfg = config or GSOConfig()
        self.fast_path = fast_path
        self.stats = GSOStats()
        self.flows = {}          # (section, iface, src, dst, sport, dport) -> _Flow
        self.section = 0
        self.fcs = InterfaceFCS()   # FCS length per interface (Interface events)
        self._fcs = 0            # that of the packet being split
        # set by the pipeline when the writer takes the input's pcap records
        # as they are (RawRecords): then transform_batches lays out output
        # records itself, segments through the compiled segmenter
        self.raw_out = False
        self._rec = None         # the cseg.RecordOut being filled, in that mode
        # records of lazy chunks (classic pcap) that split() decided, the
        # Python reference: all of them without the compiled loop, only
        # those it leaves with it (0 when it took every one: tests)
        self.py_records = 0

    # ------------------------------------------------------------------ API

    def process(self, events):
        """Split every super-frame of ``events`` (an iterable of record
        events), yielding the events in order: non-Packet events and
        packets that need no split unchanged, super-frames replaced by
        their segments.

        Raises:
            UnusableInput: a UDP super-packet (L3 length > mtu) and no
                ``gso_size``, or a TCP super-frame cut by the MTU rule whose
                headers and 8 bytes of payload exceed ``mtu`` (the message
                names the flow).
            DamagedInput:  re-raised from ``events`` after everything read
                before the damage has been yielded.
        """
        held = None
        pending = []
        split = self.split
        try:
            for ev in events:
                if type(ev) is Packet:
                    if held is not None:
                        yield from split(held, ev.ts)
                        if pending:
                            yield from self._drain(pending)
                    held = ev
                    continue
                if held is None:
                    pending.append(ev)
                    yield from self._drain(pending)
                elif type(ev) is Section or len(pending) >= _MAX_PENDING:
                    yield from split(held, None)
                    held = None
                    pending.append(ev)
                    yield from self._drain(pending)
                else:
                    pending.append(ev)
        except DamagedInput:
            if held is not None:
                yield from split(held, None)
            yield from self._drain(pending)
            raise
        if held is not None:
            yield from split(held, None)
        yield from self._drain(pending)
        self._finish()

    def _finish(self):
        """The one warning line at the end of the input, if any."""
        bad = self.stats.passed[Pass.RECORD_LENGTHS]
        if bad:
            warn(f"split: {bad} record{'s' if bad != 1 else ''} whose lengths contradict "
                 "each other (captured > original length, or an original length beyond "
                 f"{ipv4.GSO_MAX_SIZE} bytes that the IP or tunnel headers do not "
                 "say) passed unchanged")

    def transform_batches(self, batches):
        """List in, list out form of :meth:`process` for the pipeline (see
        :mod:`pcapgro.gso.batches`): ``batches`` are lists of events or
        RecordChunks; yields lists of events (with ``raw_out``:
        RawRecords in the input's pcap format).  Same output bytes as
        :meth:`process`; raises as it does."""
        from .batches import transform_batches
        return transform_batches(self, batches)

    def _chunk_run(self, lb):
        """For the record path: ``f(i, rec) -> end``, which lays out into
        the :class:`~pcapgro.gso.cseg.RecordOut` ``rec`` the records of
        RecordChunk ``lb`` from ``i`` on that the compiled loop handles
        (``split_chunk`` in pcapgro/_gso.c: pure ACKs and the like and
        data segments :meth:`_fast_small_tcp4` passes, copied verbatim;
        untagged Ethernet / IPv4 / TCP super-frames cut with the size
        :meth:`_tcp` would choose; tunnelled frames (VXLAN, Geneve, GRE,
        IPIP, SIT, IP4IP6, IP6IP6 under untagged Ethernet, the outer IP
        without extension headers) decided as :meth:`split` and
        :func:`tunnel.split` decide them, cut or copied: the same bytes,
        statistics and flow state as :meth:`split`), stopping at the
        first record it does not (that one goes through :meth:`split`);
        ``f.one(rec, i, next_ts)`` takes record ``i`` alone (see
        :func:`cseg.chunk_run`).  None when it cannot be used (no
        extension, another link type, an FCS, the flat path off)."""
        cfg = self.cfg
        if (not self.fast_path or lb.linktype != 1 or self.fcs.get(0)[0]
                or not cseg.available() or type(cfg.link_rate) is not int):
            return None
        return cseg.chunk_run(lb, cfg, self.flows, self.section, _Flow, self._count_chunk)

    def _count_chunk(self, npassed, nseg, ncut, aggs, passes=()):
        """Statistics of what one compiled run did: ``npassed`` packets
        passed (small), ``passes`` tunnelled ones passed (``(Pass,
        packets)`` each), super-frames ``aggs`` (``(flow key, n,
        SizeSource, size)`` each; a tunnelled one's key names the tunnel
        kind) cut into ``nseg`` segments (``ncut`` not all captured)."""
        st = self.stats
        st.packets += npassed + len(aggs)
        if npassed:
            st.passed[Pass.SMALL] += npassed
        for reason, k in passes:
            st.packets += k
            st.passed[reason] += k
        if not aggs:
            return
        st.split += len(aggs)
        st.segments += nseg
        st.cut_segments += ncut
        st.csum["computed"] += nseg - ncut
        st.csum["seed_truncated"] += ncut
        flows = st.flows
        for key, n, src, size in aggs:
            fkey = ("tcp",) + key
            fs = flows.get(fkey)
            if fs is None:
                fs = flows[fkey] = FlowStats(_key_name(key), "tcp")
            fs.split += 1
            fs.segments += n
            fs.sources[src] += 1
            fs.source = src
            fs.size = size

    def split(self, pkt, next_ts=None):
        """Segment one packet.

        Args:
            pkt:     a :class:`~pcapgro.record.Packet`.
            next_ts: timestamp (int ns) of the packet that follows it in the
                     capture, or None; segments are stamped before it.
        Returns:
            ``[pkt]`` (the same object, unchanged) when it needs no split,
            else the list of segment Packets.  Updates per-flow state and
            statistics.
        Raises:
            UnusableInput: UDP super-packet without ``gso_size``; TCP
                super-frame whose headers do not fit ``mtu``.
        """
        data = pkt.data
        if len(data) > pkt.orig_len:
            # damage: merge keeps such records unchanged, and so does split
            self.stats.packets += 1
            return self._pass(pkt, Pass.RECORD_LENGTHS)
        fcs = self._fcs = self.fcs.get(pkt.iface)[0]
        if (self.fast_path and data[12:15] == b"\x08\x00\x45" and data[23:24] == b"\x06"
                and pkt.linktype == 1):
            r = self._fast_small_tcp4(pkt, data)
            if r is not None:
                return r
        self.stats.packets += 1
        l3off, et, _ = network_layer(pkt.linktype, data)
        if l3off is None:
            return self._pass(pkt, Pass.NOT_IP)
        # the FCS is not part of the datagram (IPv4 total length 0 and IPv6
        # payload length 0 run to the end of the frame)
        if et == ETH_P_IP:
            l3 = ipv4.parse(data, l3off, pkt.orig_len - fcs)
        else:
            l3 = ipv6.parse(data, l3off, pkt.orig_len - fcs)
        if type(l3) is Pass:
            return self._pass(pkt, l3)
        proto = l3.proto
        if proto == 6:
            return self._tcp(pkt, l3, next_ts)
        if proto == 17:
            return self._udp(pkt, l3, next_ts)
        if proto in TUNNEL_PROTOS:
            big = max(len(l3.hdr) + l3.l4len, pkt.orig_len - fcs - l3off) > self.cfg.mtu
            if big or self.cfg.mss:
                return self._tunnel(pkt, l3, next_ts, Pass.TUNNEL if big else Pass.NO_HANDLER)
        return self._pass(pkt, Pass.NO_HANDLER)

    # ------------------------------------------------------------ internals

    def _tunnel(self, pkt, l3, next_ts, reason):
        """A tunnelled super-frame: cut by :mod:`pcapgro.gso.tunnel`, else
        passed for ``reason``."""
        if self._fcs and (self._fcs != ETH_FCS or pkt.linktype != 1):
            return self._pass(pkt, Pass.FCS)
        rec = recorded_gso_size(pkt.meta)
        out = tunnel.split(self, pkt, l3, next_ts, rec if rec else 0, _Flow)
        if type(out) is Pass:
            return self._pass(pkt, out)
        return out if out is not None else self._pass(pkt, reason)

    def _drain(self, pending):
        fcs = self.fcs
        for ev in pending:
            if type(ev) is Section:
                self.section += 1
                self.flows.clear()
            fcs.event(ev)
            yield ev
        pending.clear()

    def _pass(self, pkt, reason):
        self.stats.passed[reason] += 1
        return [pkt]

    def _fast_small_tcp4(self, pkt, d):
        """Flat path for an untagged Ethernet / IPv4 (no options) / TCP
        frame: when it needs no split, do what the general path does
        (flow state, statistics, seed completion) and return ``[packet]``;
        otherwise return None having changed nothing."""
        n = len(d)
        if n < 54 or self._fcs:
            return None
        tot, frag = _v4_len_frag(d, 16)
        cfg = self.cfg
        if frag & 0x3FFF or tot < 40 or tot > cfg.mtu or tot + 14 > pkt.orig_len:
            return None
        thl = (d[46] >> 4) << 2
        flags = d[47]
        if thl < 20 or tot < 20 + thl or n < 34 + thl or flags & tcp.SYN:
            return None
        P = tot - 20 - thl
        src = d[26:30]
        dst = d[30:34]
        sport, dport = _ports(d, 34)
        sec = self.section
        iface = pkt.iface
        key = (sec, iface, src, dst, sport, dport)
        flows = self.flows
        fl = flows.get(key)
        if P:
            if cfg.mss:
                if P > cfg.mss:
                    return None
            else:
                opt = thl - 20
                peer = flows.get((sec, iface, dst, src, dport, sport))
                if peer is not None and peer.syn_mss - opt >= TCP_MIN_GSO_SIZE:
                    if P > peer.syn_mss - opt:
                        return None
                elif fl is not None and fl.syn_mss - opt >= TCP_MIN_GSO_SIZE:
                    if P > fl.syn_mss - opt:
                        return None
                elif pkt.meta is not None and recorded_gso_size(pkt.meta) >= TCP_MIN_GSO_SIZE:
                    return None         # pcapgro's own aggregate: the general path decides
        if fl is None:
            fl = flows[key] = _Flow()
        if P > fl.largest:
            fl.largest = P
        complete = cfg.complete_csum and n >= 14 + tot
        if complete:
            field = (d[50] << 8) | d[51]
            seed = sum(_addr_words(d, 26)) + 6
            if field != fold(seed + tot - 20):
                if field == fold(seed) or not (d[24] or d[25]):
                    # a Windows LSO seed or an offloaded IPv4 header
                    # checksum (0): the general path completes them
                    return None
                complete = False
        st = self.stats
        st.packets += 1
        st.passed[Pass.SMALL] += 1
        if not complete:
            return [pkt]
        return self._complete(pkt, 4, src, dst, 6, 34, tot - 20, field, 14)

    def _small(self, pkt, l3, proto):
        """Pass a TCP/UDP packet that needs no split.  With
        ``complete_csum``, the offload artefacts of a sender's capture are
        completed to what its NIC puts on the wire: a TCP/UDP checksum field
        holding the pseudo-header seed (CHECKSUM_PARTIAL: with the length as
        Linux leaves it, or without it as Windows LSO does) and an IPv4
        header checksum of 0 (IP checksum offload); a packet so touched
        leaves with valid IPv4 and TCP/UDP checksums.  Anything else is
        passed byte-identical."""
        if l3.len0:
            return self._fix_length(pkt, l3, proto)
        self.stats.passed[Pass.SMALL] += 1
        if not self.cfg.complete_csum:
            return [pkt]
        data = pkt.data
        l4off = l3.l4off
        end = l4off + l3.l4len
        if len(data) < end:
            return [pkt]                # payload not captured: cannot complete
        coff = l4off + (16 if proto == 6 else 6)
        field = (data[coff] << 8) | data[coff + 1]
        L = l3.l4len
        if l3.family == 4:
            ps = pseudo_sum_v4(l3.src, l3.pdst, proto, 0)
            ip0 = not (data[l3.l3off + 10] or data[l3.l3off + 11])
        else:
            ps = pseudo_sum_v6(l3.src, l3.pdst, proto, 0)
            ip0 = False
        if field != fold(ps + L) and field != fold(ps) and not ip0:
            return [pkt]
        return self._complete(pkt, l3.family, l3.src, l3.pdst, proto, l4off, L, field,
                              l3.l3off)

    def _fix_length(self, pkt, l3, proto):
        """A packet that needs no split whose IP length field is 0 (IPv4
        total length, IPv6 payload length: a TSO sender's capture): written
        as the one segment GSO makes of it, lengths filled in from the
        frame (after every link-layer header) and valid checksums (counted
        ``fixed["length_zero"]``, not as a pass)."""
        if self._fcs and (self._fcs != ETH_FCS or pkt.linktype != 1):
            return self._pass(pkt, Pass.FCS)
        data = pkt.data
        if proto == 6:
            thl = (data[l3.l4off + 12] >> 4) << 2
            res = tcp.segment(data, l3, thl, max(l3.l4len - thl, 1), True)
        else:
            res = udp.segment(data, l3, max(l3.l4len - 8, 1))
        if res is None:
            return self._pass(pkt, Pass.BAD_LENGTH)
        self.stats.fixed["length_zero"] += 1
        return self._packets(pkt, res[0], 0)

    def _complete(self, pkt, family, src, dst, proto, l4off, L, field, l3off):
        """A copy of ``pkt`` with a valid TCP/UDP checksum (field value
        ``field``, a seed: computed over its ``L`` transport bytes at
        ``l4off``; a field that already is valid stays) and, for IPv4 (its
        header at ``l3off``), a valid header checksum; ``[pkt]`` itself
        when both already are valid."""
        data = pkt.data
        end = l4off + L
        coff = l4off + (16 if proto == 6 else 6)
        if family == 4:
            ps = pseudo_sum_v4(src, dst, proto, L)
        else:
            ps = pseudo_sum_v6(src, dst, proto, L)
        c = field
        if field == fold(ps) or field == fold(ps - L):
            # a seed, with or without the length: what the NIC writes
            block = bytearray(data[l4off:end])
            block[coff - l4off:coff - l4off + 2] = b"\0\0"
            c = checksum(ps + ones_sum(block))
            if proto == 17 and c == 0:
                c = 0xFFFF
        ipc = None
        if family == 4:
            ihl = (data[l3off] & 15) << 2
            h = bytearray(data[l3off:l3off + ihl])
            old_ipc = (h[10] << 8) | h[11]
            h[10:12] = b"\0\0"
            ipc = checksum(ones_sum(h))
            if ipc == old_ipc:
                ipc = None
        if c == field and ipc is None:
            return [pkt]
        ol = pkt.orig_len
        if self._fcs and (self._fcs != ETH_FCS or pkt.linktype != 1):
            return [pkt]                # an FCS not recomputed: left as it is
        d = bytearray(data)
        d[coff] = c >> 8
        d[coff + 1] = c & 0xFF
        st = self.stats
        if c != field:
            st.csum["completed"] += 1
        if ipc is not None:
            d[l3off + 10] = ipc >> 8
            d[l3off + 11] = ipc & 0xFF
            st.csum["ip_completed"] += 1
        if self._fcs:
            d, ol = refresh_fcs(d, ol)
        return [Packet(pkt.ts, bytes(d), ol, pkt.iface, pkt.linktype, pkt.meta)]

    def _tcp(self, pkt, l3, next_ts):
        """tcp_gso_segment: choose gso_size for the flow, decide, cut."""
        data = pkt.data
        l4off = l3.l4off
        r = tcp.parse(data, l4off, l3.l4len)
        if type(r) is Pass:
            return self._pass(pkt, r)
        thl, flags = r
        sport, dport = _ports(data, l4off)
        key = (self.section, pkt.iface, l3.src, l3.pdst, sport, dport)
        flows = self.flows
        fl = flows.get(key)
        if fl is None:
            fl = flows[key] = _Flow()
        if flags & tcp.SYN:
            m = tcp.syn_mss(data, l4off, thl)
            if m:
                fl.syn_mss = m
        P = l3.l4len - thl
        if P <= 0:
            return self._small(pkt, l3, 6)
        fits = len(l3.hdr) + l3.l4len <= self.cfg.mtu
        mss, src = self._tcp_mss(pkt, l3, thl, fl, (l3.pdst, l3.src, dport, sport), fits)
        if P <= mss:
            if fits and P > fl.largest:
                fl.largest = P
            return self._small(pkt, l3, 6)
        if flags & _SYN_RST:
            return self._pass(pkt, Pass.FLAGS)
        if self._fcs and (self._fcs != ETH_FCS or pkt.linktype != 1):
            return self._pass(pkt, Pass.FCS)
        if self._rec is not None and not self._fcs:
            return self._emit_raw(pkt, l3, thl, 6, mss, key, sport, dport, "tcp", src, next_ts)
        res = tcp.segment(data, l3, thl, mss, self.cfg.fixed_id)
        if res is None:
            return self._pass(pkt, Pass.SEGMENT_TOO_BIG)
        return self._emit(pkt, res, key, l3, sport, dport, "tcp", src, mss, next_ts)

    def _tcp_mss(self, pkt, l3, thl, fl, peer_key, fits):
        """The flow's segment size: ``(mss, SizeSource)``; ``(P, None)``
        (no split) when no size is known and the packet fits the MTU.

        A SYN's MSS counts neither TCP options nor IP options / IPv6
        extension headers: the sender subtracts both (tcp_current_mss,
        __tcp_mtu_to_mss: ``mss_clamp - icsk_ext_hdr_len``; a removed BIG
        TCP jumbo header is not one).  An explicit ``--mtu`` caps every
        size but ``--mss``: at most what fits the MTU after the flow's own
        headers.

        Raises:
            UnusableInput: the MTU leaves no room for 8 bytes of payload.
        """
        cfg = self.cfg
        opt = thl - 20
        hl = len(l3.hdr)
        if cfg.mss:
            return cfg.mss, SizeSource.OPTION
        ext = opt + hl - (20 if l3.family == 4 else 40)
        peer = self.flows.get((self.section, pkt.iface) + peer_key)
        if peer is not None and peer.syn_mss - ext >= TCP_MIN_GSO_SIZE:
            mss, src = peer.syn_mss - ext, SizeSource.SYN
        elif fl.syn_mss - ext >= TCP_MIN_GSO_SIZE:
            mss, src = fl.syn_mss - ext, SizeSource.OWN_SYN
        elif (rec := recorded_gso_size(pkt.meta)) >= TCP_MIN_GSO_SIZE:
            mss, src = rec, SizeSource.RECORDED
        elif fits:
            return l3.l4len - thl, None
        elif fl.largest:
            mss, src = fl.largest, SizeSource.LARGEST
        else:
            mss, src = 1 << 30, SizeSource.MTU
        if src is SizeSource.MTU or cfg.mtu_explicit:
            cap = cfg.mtu - hl - thl
            if cap < mss:
                mss, src = cap, SizeSource.MTU
            if src is SizeSource.MTU and mss < TCP_MIN_GSO_SIZE and l3.l4len - thl > mss:
                # segments of the smallest gso_size would exceed the MTU
                sport, dport = _ports(pkt.data, l3.l4off)
                raise UnusableInput(
                    f"TCP super-frame in flow {_flow_name(l3, sport, dport)}: its "
                    f"headers ({hl} bytes IP, {thl} bytes TCP) and "
                    f"{TCP_MIN_GSO_SIZE} bytes of payload do not fit --mtu {cfg.mtu}; "
                    f"give --mtu {hl + thl + TCP_MIN_GSO_SIZE} or more, or --mss N")
        return mss, src

    def _udp(self, pkt, l3, next_ts):
        """__udp_gso_segment for SKB_GSO_UDP_L4 super-packets."""
        data = pkt.data
        l4off = l3.l4off
        if len(data) < l4off + 8:
            return self._pass(pkt, Pass.TRUNCATED)
        if l3.l4len < 8:
            return self._pass(pkt, Pass.BAD_LENGTH)
        sport, dport = _ports(data, l4off)
        P = l3.l4len - 8
        cfg = self.cfg
        g = cfg.gso_size
        src = SizeSource.OPTION
        if g is None and (rec := recorded_gso_size(pkt.meta)) >= 8:
            g, src = rec, SizeSource.RECORDED
        l3len = len(l3.hdr) + l3.l4len
        if dport in TUNNEL_PORTS:
            # GSO_PARTIAL: the headers say one segment, the frame holds many
            if max(l3len, pkt.orig_len - self._fcs - l3.l3off) > cfg.mtu or (
                    g is not None and P > g):
                return self._tunnel(pkt, l3, next_ts, Pass.TUNNEL)
            # notes an inner SYN's MSS; cuts only with --mss (as plain TCP)
            out = tunnel.split(self, pkt, l3, next_ts, 0, _Flow)
            if out is None or type(out) is Pass:
                return self._pass(pkt, Pass.SMALL if out is None else out)
            return out
        if g is None:
            if l3len > cfg.mtu:
                raise UnusableInput(
                    f"UDP super-packet in flow {_flow_name(l3, sport, dport)} "
                    f"({P} bytes of payload, L3 length {l3len} > MTU {cfg.mtu}): "
                    "its datagram boundaries are unknown; give --gso-size N")
            return self._small(pkt, l3, 17)
        if P <= g:
            return self._small(pkt, l3, 17)
        if self._fcs and (self._fcs != ETH_FCS or pkt.linktype != 1):
            return self._pass(pkt, Pass.FCS)
        key = (self.section, pkt.iface, 17, l3.src, l3.pdst, sport, dport)
        if self._rec is not None and not self._fcs:
            return self._emit_raw(pkt, l3, 8, 17, g, key, sport, dport, "udp", src, next_ts)
        res = udp.segment(data, l3, g)
        if res is None:
            return self._pass(pkt, Pass.SEGMENT_TOO_BIG)
        return self._emit(pkt, res, key, l3, sport, dport, "udp", src, g, next_ts)

    def _emit(self, pkt, res, key, l3, sport, dport, proto, src, size, next_ts):
        """Statistics, timestamps and Packet objects for one split."""
        frames, ncut = res
        n = len(frames)
        self._count(n, ncut, key, l3, sport, dport, proto, src, size)
        return self._packets(pkt, frames, self._step(frames[0][1], n, pkt.ts, next_ts))

    def _emit_raw(self, pkt, l3, l4hdr_len, proto, size, key, sport, dport, pname, src,
                  next_ts, outer=None):
        """One split laid out by the compiled segmenter into the record
        buffer (``self._rec``); same statistics and timestamps as
        :meth:`_emit`.  Returns ``_RAW``, or ``[pkt]`` (passed,
        SEGMENT_TOO_BIG) when a segment does not fit its IP length field.
        ``outer``: a tunnelled super-frame's outer headers
        (:func:`cseg.tunnel_outer`; ``l3`` is then the inner L3): a
        segment that does not fit a length field returns None instead
        (:func:`tunnel.split`'s "not cut")."""
        P = l3.l4len - l4hdr_len
        n = -(-P // size) if P else 1
        first = l3.l3off + len(l3.hdr) + l4hdr_len + min(size, P)
        rec = self._rec
        step = self._step(first, n, pkt.ts, next_ts)
        try:
            n, ncut, maxcap = cseg.segment_into(rec.buf, pkt.data, l3, l4hdr_len, proto, size,
                                                self.cfg.fixed_id, pkt.ts, step, rec.mul,
                                                rec.swap, outer)
        except ValueError:
            return None if outer is not None else self._pass(pkt, Pass.SEGMENT_TOO_BIG)
        rec.n += n
        rec.ts = pkt.ts + (n - 1) * step
        if maxcap > rec.maxcap:
            rec.maxcap = maxcap
        self._count(n, ncut, key, l3, sport, dport, pname, src, size)
        return _RAW

    def _count(self, n, ncut, key, l3, sport, dport, proto, src, size):
        """Statistics of one split into ``n`` segments (``ncut`` cut)."""
        st = self.stats
        st.split += 1
        st.segments += n
        st.cut_segments += ncut
        st.csum["computed"] += n - ncut
        st.csum["seed_truncated"] += ncut
        fkey = (proto,) + key
        fs = st.flows.get(fkey)
        if fs is None:
            fs = st.flows[fkey] = FlowStats(_flow_name(l3, sport, dport), proto)
        fs.split += 1
        fs.segments += n
        fs.sources[src] += 1
        fs.source = src
        fs.size = size

    def _step(self, first_len, n, ts, next_ts):
        """ns between two segments' timestamps: the wire time of the first
        segment's ``first_len`` bytes at ``link_rate``, capped so that the
        last of ``n`` does not overtake ``next_ts``."""
        rate = self.cfg.link_rate
        step = 0
        if rate:
            step = -(-first_len * 8_000_000_000 // rate)
            if next_ts is not None:
                gap = next_ts - ts
                cap = gap // n if gap > 0 else 0
                if cap < step:
                    step = cap
        return step

    def _packets(self, pkt, frames, step):
        """Packet objects for ``frames`` (``(bytes, orig_len, csum_ok)``)
        cut from ``pkt``: segment k stamped ``pkt.ts + k * step`` (ns),
        with its own FCS when the interface has one; pcapng metadata: the
        first segment keeps the comments that are not pcapgro's own; EPB
        flags lose "TCP segmentation offloaded" (and "checksum not ready"
        on computed checksums) and are not written when that leaves 0."""
        ts = pkt.ts
        meta = pkt.meta
        if meta is not None:
            # pcapgro's own comments (aggregate note, restore records) describe
            # the packet as merge wrote it, not its segments: they go
            comments = [c for c in meta.comments if not own_comment(c)]
        iface = pkt.iface
        lt = pkt.linktype
        out = []
        append = out.append
        fcs = self._fcs
        for k, (d, ol, ok) in enumerate(frames):
            if fcs:
                # each segment on the wire has its own FCS
                d, ol = with_fcs(d, ol)
            m = None
            if meta is not None:
                flags = meta.flags
                if flags is not None and self.cfg.annotate:
                    flags &= ~EPB_FLAG_TSO
                    if ok:
                        flags &= ~EPB_FLAG_CSUM_NOT_READY
                if not flags:
                    flags = None            # no flags option for 0
                m = PacketMeta(meta.block, comments if k == 0 else [],
                               flags, list(meta.options))
            append(Packet(ts + k * step, d, ol, iface, lt, m))
        return out
