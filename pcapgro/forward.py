"""One pass through GRO and then GSO: what a Linux forwarder puts on the wire.

A Linux router (or bridge) coalesces what it receives (GRO, standard or
fraglist), forwards the aggregate as one packet, and the egress device's
software GSO cuts it again.  :class:`Forwarder` composes the unchanged
:class:`~pcapgro.gro.GROEngine` with the GSO rules of the egress path, in
one streaming pass.  As in the kernel, an aggregate GRO completed carries
its GSO fields (``Packet.gso``, a :class:`~pcapgro.record.GSOInfo`: TCP or
UDP, fraglist or not, gso_size, segments): a packet without them is
forwarded as received, unless it comes from a capture merged before (its
aggregate note holds the GSO fields: :func:`input_gso`).  The original packets
(a fraglist aggregate's chain, the IPv4 IDs of a standard one) come from
its restore record (GRO run with ``annotate=True``)::

    fwd = Forwarder(GROConfig(fraglist=True), egress_mtu=1280)
    for ev in fwd.process(reader):          # events of pcapgro.record
        writer.write(ev)
    fwd.stats.to_dict()                     # {"gro": ..., "forward": ...}

Example: what a router with rx-gro-list would emit for a sender's capture
(``udp4-fraglist-wire.pcap``: 472 datagrams, incrementing IDs) -- the same
472 datagrams, 40 aggregates, each aggregate's packets at its completion
time; only the 40 heads leave with TTL 63, the 432 chained ones keep 64::

    from pcapgro.capture import open_reader, open_writer
    r = open_reader("udp4-fraglist-wire.pcap")
    w = open_writer("out.pcap", "pcap")
    fwd = Forwarder(GROConfig(fraglist=True))
    for ev in fwd.process(r):
        w.write(ev)
    print("\n".join(fwd.stats.table()))

What goes out, per packet GRO hands up (Linux 6.18; rules checked on the
running kernel, see ``docs/kernel-findings.md``):

* Standard TCP aggregate: tcp_gso_segment with mss = the aggregate's
  gso_size; IPv4 IDs base+k, or all base when the originals had fixed IDs
  (SKB_GSO_TCP_FIXEDID); TCP checksums valid.  (Reuses
  :class:`~pcapgro.gso.GSOSplitter`.)
* Standard UDP aggregate (rx-udp-gro-forwarding): __udp_gso_segment with
  the aggregate's gso_size; IPv4 IDs always base+k, so fixed-ID senders
  come out incrementing (:data:`UDP_IDS`).
* Fraglist aggregate (rx-gro-list): skb_segment_list, the original packets
  with the head's L2 header; IPv4 IDs per :data:`FRAGLIST_IDS`, header
  checksum recomputed; TTL per :data:`FRAGLIST_TTL`.
* Anything else (singles, passed packets): forwarded as received.
* Router (default): TTL / hop limit decremented (IPv4 header checksum
  updated as ip_decrease_ttl does), a packet arriving with TTL/hop limit
  <= 1 is dropped (ICMP time exceeded counted; not checked on a kernel),
  non-IP frames are not forwarded.  ``router=False`` (bridge): nothing of that.
* ``egress_mtu`` (L3 bytes; None = everything fits): a packet whose
  segments do not all fit is, when IPv6 or IPv4 with DF, dropped as a whole
  and one ICMP "fragmentation needed" / ICMPv6 "packet too big" counted
  (statistics only: nothing is written in the reverse direction; one per
  dropped aggregate, as the kernel sends with rate limits off); IPv4
  without DF is segmented and each too-big segment IP-fragmented
  (ip_do_fragment: (mtu - header) & ~7 bytes per fragment, same ID, MF on
  all but the last).  Bridge: frames that do not fit are dropped, nothing
  counted as ICMP, nothing fragmented (model).
* FCS (frames of an interface with if_fcslen, or classic pcap's link-type
  FCS bits): every frame sent gets the FCS the egress device computes
  (Ethernet CRC-32, :mod:`pcapgro.fcs`): a received frame's is recomputed,
  a segment or fragment gets its own.  Other FCS kinds cannot be computed:
  UnusableInput.
* Timestamps: every packet made from one GRO output packet carries that
  packet's time (a passed packet's own time, an aggregate's completion
  time: see :mod:`pcapgro.gro.engine`), so output times are bunched at
  flush times and non-decreasing unless the input's are not.

Memory: what GRO holds (<= 64 aggregates) plus one aggregate's segments.
"""

import re
from dataclasses import replace

from . import restore as _restore
from .checksum import fold, ones_sum
from .errors import UnusableInput
from .fcs import ETH_FCS, InterfaceFCS, refresh_fcs, with_fcs
from .gro import GROConfig, GROEngine
from .gso import GSOConfig, GSOSplitter
from .linklayer import ETH_P_IP, network_layer
from .record import BLOCK_EPB, BLOCK_SPB, GSOInfo, Packet, PacketMeta
from .text import count, fit, num

__all__ = ["Forwarder", "ForwardStats", "FRAGLIST_IDS", "FRAGLIST_TTL", "UDP_IDS"]

# Rules the reference marks "(derived)" (and one it does not cover), as
# Linux 6.18.44 does them: confirmed byte for byte with
# tests/forwarder_oracle.py, see docs/kernel-findings.md.
FRAGLIST_IDS = "increment"   # IPv4 ID of chained packet i := head ID + i ('keep')
FRAGLIST_TTL = "head"        # only the head's TTL/hop limit is decremented ('all')
UDP_IDS = "increment"        # UDP GSO: ID base + k even for fixed-ID senders


class ForwardStats:
    """Counters of a :class:`Forwarder` run (GRO's own are in ``gro``).

    Attributes (ints; counts of packets unless stated):
        gro:            the GRO engine's :class:`~pcapgro.gro.GROStats`.
        packets_out:    packets written.
        segmented:      aggregates cut again by standard GSO and sent
                        (aggregates dropped whole -- too big for the egress
                        MTU, TTL expired -- are not: the forwarding path
                        drops them before GSO).
        segments:       segments of those aggregates sent (an IP-fragmented
                        one counts once; a bridge's segments too big for
                        the MTU are dropped: in ``dropped_mtu``, not here).
        fraglist:       fraglist aggregates given back as their packets and
                        sent (same exclusions as ``segmented``).
        fraglist_packets: packets sent of them.
        id_changed:     packets written whose IPv4 ID differs from the
                        original packet's (counted per original packet).
        ts_changed:     ... whose timestamp differs.
        size_changed:   ... whose length differs (fragmented ones too).
        ttl_decremented: packets written with TTL / hop limit one lower.
        ttl_expired:    packets dropped for TTL / hop limit <= 1 (original
                        packets); icmp_time_exceeded: ICMP messages counted
                        for them (one per forwarded packet = per aggregate).
        dropped_mtu:    original packets dropped because their aggregate
                        (or they) did not fit the egress MTU.
        icmp_frag_needed / icmpv6_too_big: ICMP messages counted (one per
                        dropped forwarded packet, i.e. per aggregate).
        fragmented:     segments / packets IP-fragmented; fragments: made.
        not_forwarded:  non-IP frames a router does not forward.
        unrestorable:   aggregates without a restore record (snaplen cut
                        a payload): segmented from the aggregate itself.
    """

    FIELDS = ("packets_out", "segmented", "segments", "fraglist", "fraglist_packets",
              "id_changed", "ts_changed", "size_changed", "ttl_decremented",
              "ttl_expired", "icmp_time_exceeded", "dropped_mtu", "icmp_frag_needed",
              "icmpv6_too_big", "fragmented", "fragments", "not_forwarded",
              "unrestorable")

    def __init__(self, gro):
        self.gro = gro
        for f in self.FIELDS:
            setattr(self, f, 0)

    def to_dict(self):
        """JSON-ready dict: ``{"gro": <GROStats.to_dict()>, "forward": {...}}``."""
        return {"gro": self.gro.to_dict(),
                "forward": {f: getattr(self, f) for f in self.FIELDS}}

    def table(self):
        """Human-readable lines (list of str) for stderr: what was sent,
        then what was dropped or fragmented, in words."""
        d = self.to_dict()["forward"]
        lines = list(self.gro.table())
        lines.append(
            f"GSO: {count(d['packets_out'], 'packet')} out: {num(d['segmented'])} aggregates "
            f"sent as {count(d['segments'], 'segment')}, {num(d['fraglist'])} fraglist "
            f"aggregates sent as {count(d['fraglist_packets'], 'packet')}")
        lines.append(
            f"  changed vs input: IPv4 ID {num(d['id_changed'])}, timestamp "
            f"{num(d['ts_changed'])}, size {num(d['size_changed'])}; TTL decremented "
            f"{num(d['ttl_decremented'])}")
        if d["dropped_mtu"]:
            icmp = [f"{num(d[k])} {w}" for k, w in (("icmp_frag_needed", "ICMP fragmentation needed"),
                                               ("icmpv6_too_big", "ICMPv6 packet too big"))
                    if d[k]]
            lines.append(f"  dropped, too big for the egress MTU: {count(d['dropped_mtu'], 'packet')}"
                         + (f" ({', '.join(icmp)} counted)" if icmp else ""))
        if d["ttl_expired"]:
            lines.append(f"  dropped, TTL expired: {count(d['ttl_expired'], 'packet')} "
                         f"({num(d['icmp_time_exceeded'])} ICMP time exceeded counted)")
        if d["fragmented"]:
            lines.append(f"  IP-fragmented: {count(d['fragmented'], 'packet')} into "
                         f"{count(d['fragments'], 'fragment')}")
        if d["not_forwarded"]:
            lines.append(f"  not forwarded (not IP): {count(d['not_forwarded'], 'frame')}")
        if d["unrestorable"]:
            lines.append(f"  {count(d['unrestorable'], 'aggregate')} without a restore record "
                         "(cut by a snaplen) segmented from themselves")
        return fit(lines)


# ------------------------------------------------------------ header helpers

def _l3(pkt):
    """(l3off, family) of an IP frame, or (None, None)."""
    l3off, et, _ = network_layer(pkt.linktype, pkt.data)
    if l3off is None or len(pkt.data) < l3off + 20:
        return None, None
    if et == ETH_P_IP:
        return l3off, 4
    if len(pkt.data) < l3off + 40:
        return None, None
    return l3off, 6


def _l3len(d, l3off, family):
    if family == 4:
        return (d[l3off + 2] << 8) | d[l3off + 3]
    return 40 + ((d[l3off + 4] << 8) | d[l3off + 5])


def _ttl_at(l3off, family):
    return l3off + (8 if family == 4 else 7)


def _dec_ttl(b, l3off, family):
    """ip_decrease_ttl / ipv6 hop_limit-- on bytearray ``b``."""
    if family == 4:
        c = ((b[l3off + 10] << 8) | b[l3off + 11]) + 0x0100
        c = (c + (c >= 0xFFFF)) & 0xFFFF
        b[l3off + 10] = c >> 8
        b[l3off + 11] = c & 0xFF
        b[l3off + 8] -= 1
    else:
        b[l3off + 7] -= 1


def _ipv4_csum(b, l3off):
    ihl = (b[l3off] & 15) * 4
    b[l3off + 10] = b[l3off + 11] = 0
    c = (~fold(ones_sum(bytes(b[l3off:l3off + ihl])))) & 0xFFFF
    b[l3off + 10] = c >> 8
    b[l3off + 11] = c & 0xFF


def _ipid(d, l3off):
    return (d[l3off + 4] << 8) | d[l3off + 5]


def _fragment(d, orig_len, l3off, mtu):
    """ip_do_fragment (slow path) of one IPv4 frame: list of (bytes,
    orig_len).  Options are copied into every fragment (model; the kernel
    keeps only 'copied' options in later fragments)."""
    ihl = (d[l3off] & 15) * 4
    tot = (d[l3off + 2] << 8) | d[l3off + 3]
    hdr = d[:l3off + ihl]
    word = (d[l3off + 6] << 8) | d[l3off + 7]
    off0 = (word & 0x1FFF) * 8
    mf0 = word & 0x2000
    step = (mtu - ihl) & ~7
    plen = tot - ihl
    out = []
    pos = 0
    while pos < plen:
        n = min(step, plen - pos)
        last = pos + n >= plen
        b = bytearray(hdr)
        t = ihl + n
        b[l3off + 2] = t >> 8
        b[l3off + 3] = t & 0xFF
        w = (word & 0x4000) | ((off0 + pos) >> 3) | (mf0 if last else 0x2000)
        b[l3off + 6] = w >> 8
        b[l3off + 7] = w & 0xFF
        _ipv4_csum(b, l3off)
        start = l3off + ihl + pos
        body = d[start:start + n]
        out.append((bytes(b) + body, l3off + t))
        pos += n
    return out


def _strip(meta):
    """``meta`` without pcapgro's comments and TSO flag (None if empty)."""
    return _restore.strip_own(meta, True)


_AGG_NOTE = re.compile(r"\((fraglist )?(TCP|UDP)\) of ([0-9]+) segments, gso_size ([0-9]{1,5})"
                       r"(?:, ended by [a-z0-9_]+)?$")


def input_gso(meta):
    """The GSO fields an input packet carries from an earlier pcapgro merge
    (a capture merged before: its aggregates are GSO packets, their fields
    stored in the pcapng aggregate note, the latest merge's), as a
    :class:`~pcapgro.record.GSOInfo`, or None.  (This merge's own
    aggregates carry theirs in ``Packet.gso``.)"""
    if meta is None:
        return None
    for c in reversed(meta.comments):
        if c.startswith(_restore.AGG_TAG):
            m = _AGG_NOTE.search(c)
            if m is None:
                return None
            return GSOInfo(m.group(2).lower(), m.group(1) is not None, int(m.group(4)),
                           int(m.group(3)))
    return None


def _wire_meta(meta):
    """``meta`` of a frame sent: without pcapgro's comments, which a packet
    of an input merged before still carries (restore gives back only this
    GRO pass's originals), and without EPB flag bit 11 when one of them was
    an aggregate note (merge set that bit); unchanged when it has none."""
    if not _restore.carries_own(meta):
        return meta
    return _restore.strip_own(meta, any(c.startswith(_restore.AGG_TAG) for c in meta.comments))


# ------------------------------------------------------------ the forwarder

class Forwarder:
    """GRO on ingress, GSO (and the IP forwarding path) on egress.

    Args:
        gro_config: :class:`~pcapgro.gro.GROConfig` of the ingress device
                    (all of merge's options); ``annotate`` is forced on
                    internally (the output carries no pcapgro comments).
        egress_mtu: L3 MTU of the egress device in bytes, or None (every
                    segment fits); 68..65535 (IPv6 needs >= 1280 on a
                    real device).
        router:     True = IP router (TTL/hop limit decremented, TTL-expired
                    dropped, non-IP not forwarded); False = bridge.
        egress_macs: None (L2 headers kept) or (src, dst) 6-byte MACs
                    written into every Ethernet frame sent (a router's
                    egress MAC and the next hop's).
        fraglist_ids / fraglist_ttl / udp_ids: the derived rules (defaults:
                    what Linux 6.18 does, module constants).

    Raises (on construction):
        UnusableInput: egress_mtu outside 68..65535.
    """

    def __init__(self, gro_config=None, egress_mtu=None, router=True, egress_macs=None,
                 fraglist_ids=FRAGLIST_IDS, fraglist_ttl=FRAGLIST_TTL, udp_ids=UDP_IDS):
        if egress_mtu is not None and not 68 <= egress_mtu <= 65535:
            raise UnusableInput(f"--egress-mtu {egress_mtu}: must be 68..65535")
        cfg = gro_config or GROConfig()
        self.gro = GROEngine(replace(cfg, annotate=True))
        self.egress_mtu = egress_mtu
        self.router = router
        self.macs = None
        if egress_macs is not None:
            src, dst = egress_macs
            self.macs = bytes(dst) + bytes(src)
        self.fraglist_ids = fraglist_ids
        self.fraglist_ttl = fraglist_ttl
        self.udp_ids = udp_ids
        self.stats = ForwardStats(self.gro.stats)
        self._splitters = {}
        self.fcs = InterfaceFCS()

    # ------------------------------------------------------------------ API

    def process(self, events):
        """Generator: the events a capture on the egress link would show
        (non-Packet events passed through in order)."""
        fcs = self.fcs
        for ev in self.gro.process(events):
            if type(ev) is not Packet:
                i = fcs.event(ev)
                if i is not None:
                    n, lt = i
                    if n and (n != ETH_FCS or lt != 1):
                        raise UnusableInput(
                            f"an interface of link type {lt} has frames ending in a "
                            f"{n}-byte FCS, which forwarding would have to recompute: "
                            "pcapgro computes only Ethernet's 4-byte FCS")
                yield ev
                continue
            yield from self._forward(ev)

    # ------------------------------------------------------------ internals

    def _splitter(self, g, fixed):
        key = (g, fixed)
        s = self._splitters.get(key)
        if s is None:
            if len(self._splitters) > 64:
                self._splitters.clear()
            s = self._splitters[key] = GSOSplitter(
                GSOConfig(mss=g, gso_size=g, fixed_id=fixed, mtu=65535, link_rate=0,
                          complete_csum=False, annotate=True, from_skb=True))
        return s

    def _forward(self, p):
        """Everything the egress sends for one packet GRO handed up."""
        st = self.stats
        t = p.ts
        try:
            recs = _restore.restore(p)
        except ValueError:
            recs = None
        gso = p.gso
        if gso is None:
            gso = input_gso(p.meta)
        elif recs and gso.kind == "tcp" and not gso.fraglist:
            # a GSO packet at the head keeps its gso_size (tcp_gro_receive:
            # mss = skb_shinfo(p)->gso_size)
            head = input_gso(recs[0][1].meta)
            if head is not None:
                gso = GSOInfo(gso.kind, False, head.gso_size, gso.gso_segs)
        if gso is None:
            # a single packet: passed by GRO, or held and completed alone
            orig = recs[0][1] if recs else p
            frames = [(orig, bytearray(orig.data), orig.orig_len, orig.meta if recs
                       else p.meta)]
            return self._send(frames, t, head_only_ttl=False)
        g = gso.gso_size
        if recs is None:
            # no restore record (a payload cut by the snaplen): segment the
            # aggregate itself
            st.unrestorable += 1
            agg = Packet(p.ts, p.data, p.orig_len, p.iface, p.linktype, _strip(p.meta))
            return self._standard(agg, None, g, gso.kind, t)
        origs = [q for _, q in recs]
        if gso.fraglist:
            return self._fraglist(p, origs, t)
        return self._standard(p, origs, g, gso.kind, t)

    def _standard(self, agg, origs, g, kind, t):
        """skb_segment with gso_size ``g`` on the (TTL-decremented)
        aggregate; ``kind``: its GSOInfo.kind ('tcp' or 'udp')."""
        st = self.stats
        l3off, fam = _l3(agg)
        b = bytearray(agg.data)
        dec = False
        if self.router and l3off is not None:
            if b[_ttl_at(l3off, fam)] <= 1:
                n = len(origs) if origs else 1
                st.ttl_expired += n
                st.icmp_time_exceeded += 1
                return []
            _dec_ttl(b, l3off, fam)
            dec = True
        fixed = False
        if kind == "tcp" and fam == 4 and origs and len(origs) > 1:
            fixed = _ipid(origs[0].data, l3off) == _ipid(origs[1].data, l3off)
        meta = _strip(agg.meta)
        src = Packet(agg.ts, bytes(b), agg.orig_len, agg.iface, agg.linktype, meta)
        segs = self._splitter(g, fixed).split(src, None)
        frames = []
        for k, s in enumerate(segs):
            o = origs[k] if origs and k < len(origs) else None
            m = o.meta if o is not None else (meta if k == 0 else None)
            frames.append((o, bytearray(s.data), s.orig_len, m))
        return self._send(frames, t, head_only_ttl=False, decremented=dec, kind="segmented")

    def _fraglist(self, agg, origs, t):
        """skb_segment_list: the originals with the head's L2 header, then
        the IPv4 fix-ups (ID, checksum)."""
        st = self.stats
        l3off, fam = _l3(origs[0])
        l2 = origs[0].data[:l3off] if l3off is not None else b""
        frames = []
        for o in origs:
            b = bytearray(o.data)
            if l3off is not None:
                b[:l3off] = l2
            frames.append((o, b, o.orig_len, o.meta))
        if l3off is not None and self.router:
            if frames[0][1][_ttl_at(l3off, fam)] <= 1:
                st.ttl_expired += len(frames)
                st.icmp_time_exceeded += 1
                return []
        if fam == 4:
            base = _ipid(origs[0].data, l3off)
            for i, (_, b, _, _) in enumerate(frames):
                if self.fraglist_ids == "increment":
                    v = (base + i) & 0xFFFF
                    b[l3off + 4] = v >> 8
                    b[l3off + 5] = v & 0xFF
        return self._send(frames, t, head_only_ttl=self.fraglist_ttl == "head",
                          fraglist=True, kind="fraglist")

    def _send(self, frames, t, head_only_ttl, decremented=False, fraglist=False, kind=None):
        """The IP forwarding path for one forwarded packet (``frames``: what
        its GSO makes, as (original Packet or None, bytearray, orig_len,
        meta)): TTL, egress MTU, fragmentation, L2, statistics.

        ``kind``: None (a single packet), 'segmented' or 'fraglist' (an
        aggregate: counted by :meth:`_sent` with the frames that are sent,
        not when the forwarding path drops it).  Returns the Packets written."""
        st = self.stats
        o0 = frames[0][0]
        ref = o0 if o0 is not None else Packet(t, bytes(frames[0][1]), frames[0][2])
        l3off, fam = _l3(ref)
        if l3off is None:
            if self.router:
                st.not_forwarded += len(frames)
                return []
            self._sent(kind, len(frames))
            return self._emit(frames, t, None, None)
        if self.router and not decremented:
            b0 = frames[0][1]
            if b0[_ttl_at(l3off, fam)] <= 1:
                st.ttl_expired += len(frames)
                st.icmp_time_exceeded += 1
                return []
            for i, (_, b, _, _) in enumerate(frames):
                if i == 0 or not head_only_ttl:
                    _dec_ttl(b, l3off, fam)
        if fraglist and fam == 4:
            for _, b, _, _ in frames:
                _ipv4_csum(b, l3off)
        mtu = self.egress_mtu
        if mtu is not None:
            big = [_l3len(b, l3off, fam) > mtu for _, b, _, _ in frames]
            if any(big):
                if not self.router:
                    keep = [f for f, x in zip(frames, big) if not x]
                    st.dropped_mtu += len(frames) - len(keep)
                    self._sent(kind, len(keep))
                    return self._emit(keep, t, l3off, fam)
                b0 = frames[0][1]
                if fam == 6 or b0[l3off + 6] & 0x40:
                    st.dropped_mtu += len(frames)
                    if fam == 6:
                        st.icmpv6_too_big += 1
                    else:
                        st.icmp_frag_needed += 1
                    return []
                out = []
                for f, x in zip(frames, big):
                    if not x:
                        out.append(f)
                        continue
                    o, b, ol, m = f
                    fr = _fragment(bytes(b), ol, l3off, mtu)
                    st.fragmented += 1
                    st.fragments += len(fr)
                    for k, (fb, fl) in enumerate(fr):
                        out.append((o if k == 0 else None, bytearray(fb), fl,
                                    m if k == 0 else None, True))
                self._sent(kind, len(frames))
                return self._emit(out, t, l3off, fam)
        self._sent(kind, len(frames))
        return self._emit(frames, t, l3off, fam)

    def _sent(self, kind, n):
        """Count an aggregate of ``kind`` ('segmented', 'fraglist' or None:
        not an aggregate) whose ``n`` segments / packets are being sent
        (before IP fragmentation); nothing when ``n`` is 0."""
        if kind is None or not n:
            return
        st = self.stats
        if kind == "segmented":
            st.segmented += 1
            st.segments += n
        else:
            st.fraglist += 1
            st.fraglist_packets += n

    def _emit(self, frames, t, l3off, fam):
        st = self.stats
        out = []
        macs = self.macs
        for f in frames:
            o, b, ol, m = f[:4]
            if o is not None:
                lt, iface = o.linktype, o.iface
            else:
                lt, iface = (out[-1].linktype, out[-1].iface) if out else (1, 0)
            if macs is not None and lt == 1 and len(b) >= 12:
                b[:12] = macs
            if self.fcs.get(iface)[0]:
                # the egress device computes the FCS of every frame it sends
                if l3off is not None and ol - l3off <= _l3len(b, l3off, fam):
                    b, ol = with_fcs(b, ol)      # a segment or fragment: none yet
                else:
                    b, ol = refresh_fcs(b, ol)   # the received frame's
            d = bytes(b)
            wm = _wire_meta(m)
            if wm is not None and wm.block == BLOCK_SPB and (o is None or t != o.ts):
                # sent at another time than it came (an aggregate's
                # completion): an SPB holds no time, so it goes as an EPB
                wm = PacketMeta(BLOCK_EPB, wm.comments, wm.flags, wm.options)
            q = Packet(t, d, ol, iface, lt, wm)
            out.append(q)
            st.packets_out += 1
            if l3off is not None and self.router and o is not None:
                if d[_ttl_at(l3off, fam)] != o.data[_ttl_at(l3off, fam)]:
                    st.ttl_decremented += 1
            if o is not None:
                if t != o.ts:
                    st.ts_changed += 1
                if ol != o.orig_len or len(d) != len(o.data):
                    st.size_changed += 1
                if fam == 4 and _ipid(d, l3off) != _ipid(o.data, l3off):
                    st.id_changed += 1
        return out
