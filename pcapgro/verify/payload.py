"""Payload bytes taken from the capture itself, where tshark's fields say
they are (instead of asking tshark for them in hex).

tshark writing every TCP/UDP payload as hex is two thirds of its output and
~40 % of its time (measured on 100,000 bulk TCP packets: 5.2 s with the
payloads, 3.2 s without), and unhexlifying it is most of verify's own
parsing.  So verify reads each capture a second time with pcapgro's reader,
in step with tshark's lines (frame k of tshark = packet k of the file), and
takes each packet's payload from the frame: at the TCP/UDP header that the
walk below finds, which must carry the ports and (TCP) the raw sequence
number tshark reported, in a frame of the captured and original length
tshark reported.  The payload's length stays tshark's (``tcp.len``,
``udp.length``), so a header cut short or an IP length beyond the frame
gives the same bytes tshark would show.  When any check fails (a frame the
walk cannot reach: a link type pcapgro does not know, a tunnel header it
does not know; frames numbered differently) :class:`NeedPayload` is raised
and verify starts again with tshark writing the payloads (the slower,
always-right way).

The walk mirrors what tshark's key is taken from: the innermost IP header
(IPv4 in IPv4 / IPv6 and IPv6 in either are followed, as ``ip:ip:tcp``),
then IPv6's hop-by-hop, routing, destination options and AH headers; GRE
(version 0: IP, IPv6 or an Ethernet frame inside) as tshark always
dissects it, and VXLAN / Geneve on the UDP ports verify dissects them on
(:class:`Tunnels`).
"""

from __future__ import annotations

import struct

from ..capture import open_reader
from ..errors import DamagedInput
from ..linklayer import network_layer, ETH_P_IP, ETH_P_IPV6, ETH_P_TEB
from ..record import Packet

_PORTS_SEQ = struct.Struct("!HHI").unpack_from
_PORTS = struct.Struct("!HH").unpack_from
_LEN = struct.Struct("!H").unpack_from
_V6_EXT = (0, 43, 60)       # hop-by-hop, routing, destination options
_AH = 51
_IPIP, _IP6IP = 4, 41
_GRE, _UDP = 47, 17
MAX_NESTING = 4             # IP headers walked through (IP in IP in ...)


class Tunnels:
    """The UDP ports verify dissects as tunnels: ``vxlan``, ``geneve``
    (frozensets of ports; either port of a datagram, as tshark's port
    tables match).  Empty: UDP is UDP (tshark's default ports are turned
    off with the rest of its port table, see :func:`.fields.decode_as`)."""

    __slots__ = ("vxlan", "geneve")

    def __init__(self, vxlan=(), geneve=()):
        self.vxlan = frozenset(vxlan)
        self.geneve = frozenset(geneve)

    def __bool__(self):
        return bool(self.vxlan or self.geneve)

    def __repr__(self):
        return f"Tunnels(vxlan={sorted(self.vxlan)}, geneve={sorted(self.geneve)})"

    def inner(self, data, o):
        """``(offset, ethertype)`` of what the UDP header at ``o`` of
        ``data`` carries as a tunnel (an Ethernet frame: ethertype
        ``ETH_P_TEB``), or None when the datagram is not on a tunnel port
        or is too short to be a tunnel (tshark then shows it as UDP:
        malformed, and so does this walk, by stopping there)."""
        if len(data) < o + 16:
            return None
        sport, dport = _PORTS(data, o)
        if sport in self.vxlan or dport in self.vxlan:
            return o + 16, ETH_P_TEB                     # UDP + 8-byte VXLAN header
        if sport in self.geneve or dport in self.geneve:
            opt = (data[o + 8] & 0x3F) * 4               # options length, 4-byte units
            return o + 16 + opt, _LEN(data, o + 10)[0]   # protocol type: an ethertype
        return None


NO_TUNNELS = Tunnels()


def _gre_inner(data, o):
    """tshark's view of GRE, not the kernel's (pcapgro.gso.tunnel and
    pcapgro.gro.gre take only the K and C flags; tshark also dissects S).
    ``(offset, ethertype)`` of the packet inside the GRE header at
    ``o`` (RFC 2784/2890, version 0: 4 bytes plus 4 per C, K and S bit),
    or None (another version, a routing-present bit, cut short)."""
    if len(data) < o + 4:
        return None
    flags = data[o]
    if data[o + 1] & 7 or flags & 0x40:
        return None
    n = 4 + 4 * (bool(flags & 0x80) + bool(flags & 0x20) + bool(flags & 0x10))
    return o + n, _LEN(data, o + 2)[0]


class NeedPayload(Exception):
    """A packet whose payload verify cannot locate in its frame: ask
    tshark for the payloads instead (``frame``: tshark's frame number,
    ``why``: for the debug message)."""

    def __init__(self, frame, why):
        super().__init__(f"frame {frame}: {why}")
        self.frame, self.why = frame, why


def l4_offset(linktype, data, proto, tunnels=NO_TUNNELS):
    """``(offset, end)``: where the innermost IP header's TCP (``proto`` 6)
    or UDP (17) header starts in ``data`` (one frame of link type
    ``linktype``) and where that IP packet ends by its length field (the
    frame's end for length 0: TSO/GSO super-frames, jumbograms), or
    ``(None, None)`` when the walk does not reach one (see the module
    docstring).  GRE and the UDP ports of ``tunnels`` (:class:`Tunnels`)
    are walked through to the packet inside.  Never raises."""
    off, et, _ = network_layer(linktype, data)
    n = len(data)
    end = n
    for _ in range(MAX_NESTING):
        if et == ETH_P_TEB and off is not None:
            # an Ethernet frame inside a tunnel: its VLAN tags too
            o2, et, _ = network_layer(1, data[off:])
            off = None if o2 is None else off + o2
        if off is None:
            return None, None
        if et == ETH_P_IP:
            if n < off + 20:
                return None, None
            p, nxt = data[off + 9], off + (data[off] & 15) * 4
            ln = _LEN(data, off + 2)[0]
            end = off + ln if ln else n
        elif et == ETH_P_IPV6:
            if n < off + 40:
                return None, None
            p, nxt = data[off + 6], off + 40
            ln = _LEN(data, off + 4)[0]
            end = off + 40 + ln if ln else n
            while p in _V6_EXT or p == _AH:
                if n < nxt + 2:
                    return None, None
                step = (data[nxt + 1] + 2) * 4 if p == _AH else (data[nxt + 1] + 1) * 8
                p, nxt = data[nxt], nxt + step
        else:
            return None, None
        inner = None
        if p == _UDP and tunnels:
            inner = tunnels.inner(data, nxt)
        if inner is None and p == proto:
            return nxt, end
        if inner is not None:
            off, et = inner
        elif p == _IPIP:
            off, et = nxt, ETH_P_IP
        elif p == _IP6IP:
            off, et = nxt, ETH_P_IPV6
        elif p == _GRE and (inner := _gre_inner(data, nxt)) is not None:
            off, et = inner
        else:
            return None, None
    return None, None


def tcp_payload(pkt, frame, sport, dport, seq, nominal, tunnels=NO_TUNNELS):
    """The captured TCP payload of ``pkt`` (bytes, at most ``nominal``),
    checked against tshark's ports and raw sequence number; raises
    :class:`NeedPayload` when they do not match.  ``tunnels``: as for
    :func:`l4_offset`."""
    data = pkt.data
    o, _ = l4_offset(pkt.linktype, data, 6, tunnels)
    if o is None or len(data) < o + 13:
        raise NeedPayload(frame, "no TCP header found")
    if _PORTS_SEQ(data, o) != (sport, dport, seq):
        raise NeedPayload(frame, "TCP header differs from tshark's")
    s = o + (data[o + 12] >> 4) * 4
    return data[s:s + nominal]


def udp_payload(pkt, frame, sport, dport, declared, tunnels=NO_TUNNELS):
    """The captured UDP payload of ``pkt`` (bytes, at most ``declared`` and
    not beyond its IP packet's end: no Ethernet padding or trailer),
    checked against tshark's ports; raises :class:`NeedPayload` when they
    do not match.  ``tunnels``: as for :func:`l4_offset`."""
    data = pkt.data
    o, end = l4_offset(pkt.linktype, data, 17, tunnels)
    if o is None or len(data) < o + 4:
        raise NeedPayload(frame, "no UDP header found")
    if _PORTS(data, o) != (sport, dport):
        raise NeedPayload(frame, "UDP header differs from tshark's")
    return data[o + 8:min(o + 8 + declared, end)]


def tunnel_peer_ports(paths, tunnels):
    """The UDP ports that datagrams to or from a port of ``tunnels`` (a
    :class:`Tunnels`) use at their other end, in the captures ``paths``
    (outermost UDP header of each frame; frozenset of ints).

    tshark picks a UDP port's dissector by trying one port of a datagram
    and then the other, and a 'data' Decode As entry on a VXLAN source
    port hides the VXLAN behind it; :func:`.fields.decode_as` leaves these
    ports out of its 'data' ranges so that the tunnel port decides."""
    peers = set()
    ports = tunnels.vxlan | tunnels.geneve
    for path in paths:
        for pkt in packets(path):
            data = pkt.data
            off, et, _ = network_layer(pkt.linktype, data)
            if off is None or len(data) < off + 40:
                continue
            if et == ETH_P_IP:
                if data[off + 9] != _UDP or _LEN(data, off + 6)[0] & 0x3FFF:
                    continue            # not UDP, or an IP fragment
                o = off + (data[off] & 15) * 4
            elif data[off + 6] == _UDP:
                o = off + 40
            else:
                continue
            if len(data) >= o + 4:
                sport, dport = _PORTS(data, o)
                if dport in ports:
                    peers.add(sport)
                elif sport in ports:
                    peers.add(dport)
    return frozenset(peers - ports)


def packets(path):
    """The packets of capture ``path`` in file order (what tshark numbers
    frames 1, 2, ...), read with pcapgro's reader; ends quietly where the
    capture is cut short or damaged (tshark says so itself)."""
    r = open_reader(path)
    r._warn_variant = lambda: None      # a variant's extra record fields: nothing lost here
    try:
        for batch in r.batches():
            for ev in batch:
                if type(ev) is Packet:
                    yield ev
    except DamagedInput:
        return
    finally:
        r.close()
