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

import ipaddress
import struct

from ..errors import DamagedInput, UnusableInput
from ..fcs import ETH_FCS, InterfaceFCS, refresh_fcs, with_fcs
from ..linklayer import ETH_P_IP, network_layer
from ..checksum import checksum, fold, ones_sum, pseudo_sum_v4, pseudo_sum_v6
from ..record import EPB_FLAG_TSO, Packet, PacketMeta, Section
from ..restore import own_comment, recorded_gso_size
from . import ipv4, ipv6, tcp, tunnel, udp
from .config import TCP_MIN_GSO_SIZE, GSOConfig
from .reasons import Pass, SizeSource
from .stats import FlowStats, GSOStats

__all__ = ["GSOSplitter", "TUNNEL_PORTS", "TUNNEL_PROTOS"]

TUNNEL_PORTS = (4789, 6081, 8472)   # VXLAN (IANA, Linux legacy 8472), Geneve
TUNNEL_PROTOS = (4, 41, 47)         # IPIP, IPv6-in-IP (SIT), GRE
EPB_FLAG_CSUM_NOT_READY = 1 << 9
_MAX_PENDING = 64
_SYN_RST = tcp.SYN | tcp.RST
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


def _flow_name(l3, sport, dport):
    a = ipaddress.ip_address(bytes(l3.src))
    b = ipaddress.ip_address(bytes(l3.pdst))
    if l3.family == 6:
        return f"[{a}]:{sport} > [{b}]:{dport}"
    return f"{a}:{sport} > {b}:{dport}"


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
        st = self.stats
        st.packets += 1
        st.passed[Pass.SMALL] += 1
        if not cfg.complete_csum or n < 14 + tot:
            return [pkt]
        field = (d[50] << 8) | d[51]
        if field != fold(sum(_addr_words(d, 26)) + 6 + tot - 20):
            return [pkt]
        return self._complete(pkt, 4, src, dst, 6, 34, tot - 20, field)

    def _small(self, pkt, l3, proto):
        """Pass a TCP/UDP packet that needs no split; with
        ``complete_csum``, a checksum field holding exactly the
        pseudo-header seed (CHECKSUM_PARTIAL, as captured on a sender with
        checksum offload) is completed to the value the NIC puts on the
        wire.  Anything else is passed byte-identical."""
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
            ps = pseudo_sum_v4(l3.src, l3.pdst, proto, L)
        else:
            ps = pseudo_sum_v6(l3.src, l3.pdst, proto, L)
        if field != fold(ps):
            return [pkt]
        return self._complete(pkt, l3.family, l3.src, l3.pdst, proto, l4off, L, field)

    def _complete(self, pkt, family, src, dst, proto, l4off, L, field):
        """A copy of ``pkt`` whose TCP/UDP checksum (field value ``field``,
        the seed) is completed over its ``L`` transport bytes at
        ``l4off``; ``[pkt]`` itself when the seed already is the value."""
        data = pkt.data
        end = l4off + L
        coff = l4off + (16 if proto == 6 else 6)
        if family == 4:
            ps = pseudo_sum_v4(src, dst, proto, L)
        else:
            ps = pseudo_sum_v6(src, dst, proto, L)
        block = bytearray(data[l4off:end])
        block[coff - l4off:coff - l4off + 2] = b"\0\0"
        c = checksum(ps + ones_sum(block))
        if proto == 17 and c == 0:
            c = 0xFFFF
        if c == field:
            return [pkt]
        ol = pkt.orig_len
        if self._fcs and (self._fcs != ETH_FCS or pkt.linktype != 1):
            return [pkt]                # an FCS not recomputed: left as it is
        d = bytearray(data)
        d[coff] = c >> 8
        d[coff + 1] = c & 0xFF
        if self._fcs:
            d, ol = refresh_fcs(d, ol)
        self.stats.csum["completed"] += 1
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
        cfg = self.cfg
        l3len = len(l3.hdr) + l3.l4len
        fits = l3len <= cfg.mtu
        opt = thl - 20
        if cfg.mss:
            mss, src = cfg.mss, SizeSource.OPTION
        else:
            peer = flows.get((self.section, pkt.iface, l3.pdst, l3.src, dport, sport))
            if peer is not None and peer.syn_mss - opt >= TCP_MIN_GSO_SIZE:
                mss, src = peer.syn_mss - opt, SizeSource.SYN
            elif fl.syn_mss - opt >= TCP_MIN_GSO_SIZE:
                mss, src = fl.syn_mss - opt, SizeSource.OWN_SYN
            elif (rec := recorded_gso_size(pkt.meta)) >= TCP_MIN_GSO_SIZE:
                mss, src = rec, SizeSource.RECORDED
            elif fits:
                if P > fl.largest:
                    fl.largest = P
                return self._small(pkt, l3, 6)
            elif fl.largest:
                mss, src = fl.largest, SizeSource.LARGEST
            else:
                mss = cfg.mtu - len(l3.hdr) - thl
                if mss < TCP_MIN_GSO_SIZE:
                    # segments of the smallest gso_size would exceed the MTU
                    raise UnusableInput(
                        f"TCP super-frame in flow {_flow_name(l3, sport, dport)}: its "
                        f"headers ({len(l3.hdr)} bytes IP, {thl} bytes TCP) and "
                        f"{TCP_MIN_GSO_SIZE} bytes of payload do not fit --mtu {cfg.mtu}; "
                        f"give --mtu {len(l3.hdr) + thl + TCP_MIN_GSO_SIZE} or more, or --mss N")
                src = SizeSource.MTU
        if P <= mss:
            if fits and P > fl.largest:
                fl.largest = P
            return self._small(pkt, l3, 6)
        if flags & _SYN_RST:
            return self._pass(pkt, Pass.FLAGS)
        if self._fcs and (self._fcs != ETH_FCS or pkt.linktype != 1):
            return self._pass(pkt, Pass.FCS)
        res = tcp.segment(data, l3, thl, mss, cfg.fixed_id)
        if res is None:
            return self._pass(pkt, Pass.SEGMENT_TOO_BIG)
        return self._emit(pkt, res, key, l3, sport, dport, "tcp", src, mss, next_ts)

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
            return out if out is not None else self._pass(pkt, Pass.SMALL)
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
        res = udp.segment(data, l3, g)
        if res is None:
            return self._pass(pkt, Pass.SEGMENT_TOO_BIG)
        key = (self.section, pkt.iface, 17, l3.src, l3.pdst, sport, dport)
        return self._emit(pkt, res, key, l3, sport, dport, "udp", src, g, next_ts)

    def _emit(self, pkt, res, key, l3, sport, dport, proto, src, size, next_ts):
        """Statistics, timestamps and Packet objects for one split."""
        frames, ncut = res
        n = len(frames)
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

        ts = pkt.ts
        rate = self.cfg.link_rate
        step = 0
        if rate:
            step = -(-frames[0][1] * 8_000_000_000 // rate)
            if next_ts is not None:
                gap = next_ts - ts
                cap = gap // n if gap > 0 else 0
                if cap < step:
                    step = cap

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
                m = PacketMeta(meta.block, comments if k == 0 else [],
                               flags, list(meta.options))
            append(Packet(ts + k * step, d, ol, iface, lt, m))
        return out
