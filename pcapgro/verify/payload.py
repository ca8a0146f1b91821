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
walk cannot reach: GRE, a tunnel, a link type pcapgro does not know; frames
numbered differently) :class:`NeedPayload` is raised and verify starts again
with tshark writing the payloads (the slower, always-right way).

The walk mirrors what tshark's key is taken from: the innermost IP header
(IPv4 in IPv4 / IPv6 and IPv6 in either are followed, as ``ip:ip:tcp``),
then IPv6's hop-by-hop, routing, destination options and AH headers.
"""

from __future__ import annotations

import struct

from ..capture import open_reader
from ..errors import DamagedInput
from ..linklayer import network_layer, ETH_P_IP, ETH_P_IPV6
from ..record import Packet

_PORTS_SEQ = struct.Struct("!HHI").unpack_from
_PORTS = struct.Struct("!HH").unpack_from
_LEN = struct.Struct("!H").unpack_from
_V6_EXT = (0, 43, 60)       # hop-by-hop, routing, destination options
_AH = 51
_IPIP, _IP6IP = 4, 41
MAX_NESTING = 4             # IP headers walked through (IP in IP in ...)


class NeedPayload(Exception):
    """A packet whose payload verify cannot locate in its frame: ask
    tshark for the payloads instead (``frame``: tshark's frame number,
    ``why``: for the debug message)."""

    def __init__(self, frame, why):
        super().__init__(f"frame {frame}: {why}")
        self.frame, self.why = frame, why


def l4_offset(linktype, data, proto):
    """``(offset, end)``: where the innermost IP header's TCP (``proto`` 6)
    or UDP (17) header starts in ``data`` (one frame of link type
    ``linktype``) and where that IP packet ends by its length field (the
    frame's end for length 0: TSO/GSO super-frames, jumbograms), or
    ``(None, None)`` when the walk does not reach one (see the module
    docstring).  Never raises."""
    off, et, _ = network_layer(linktype, data)
    n = len(data)
    end = n
    for _ in range(MAX_NESTING):
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
        if p == proto:
            return nxt, end
        if p == _IPIP:
            off, et = nxt, ETH_P_IP
        elif p == _IP6IP:
            off, et = nxt, ETH_P_IPV6
        else:
            return None, None
    return None, None


def tcp_payload(pkt, frame, sport, dport, seq, nominal):
    """The captured TCP payload of ``pkt`` (bytes, at most ``nominal``),
    checked against tshark's ports and raw sequence number; raises
    :class:`NeedPayload` when they do not match."""
    data = pkt.data
    o, _ = l4_offset(pkt.linktype, data, 6)
    if o is None or len(data) < o + 13:
        raise NeedPayload(frame, "no TCP header found")
    if _PORTS_SEQ(data, o) != (sport, dport, seq):
        raise NeedPayload(frame, "TCP header differs from tshark's")
    s = o + (data[o + 12] >> 4) * 4
    return data[s:s + nominal]


def udp_payload(pkt, frame, sport, dport, declared):
    """The captured UDP payload of ``pkt`` (bytes, at most ``declared`` and
    not beyond its IP packet's end: no Ethernet padding or trailer),
    checked against tshark's ports; raises :class:`NeedPayload` when they
    do not match."""
    data = pkt.data
    o, end = l4_offset(pkt.linktype, data, 17)
    if o is None or len(data) < o + 4:
        raise NeedPayload(frame, "no UDP header found")
    if _PORTS(data, o) != (sport, dport):
        raise NeedPayload(frame, "UDP header differs from tshark's")
    return data[o + 8:min(o + 8 + declared, end)]


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
