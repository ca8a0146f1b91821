"""UDP GRO: parsing, the mode choice, the segment-coalescing checks,
completion.

Mirrors net/ipv4/udp_offload.c (udp_gro_receive, udp_gro_receive_segment,
udp4_gro_complete, udp_gro_complete) and net/ipv6/udp_offload.c of Linux
6.18.  Which datagrams take part (standard L4 GRO, fraglist, or none) is
decided per packet from the emulated device features and sockets
(:func:`udp_mode`).  Registered for IPPROTO_UDP in the offload table.
"""

import struct

from .config import GRO_LEGACY_MAX_SIZE
from .flush import Flush, Pass
from .network import network_flush
from .offload import NetOffload, inet_add_offload
from .tcp import dport

__all__ = ["parse_udp", "segment_checks", "udp_mode", "gro_receive", "gro_complete",
           "UDP_GRO_CNT_MAX"]

UDP_GRO_CNT_MAX = 64          # datagrams per aggregate
_udp = struct.Struct("!HHHH")
_u32 = struct.Struct("!I").unpack_from


def parse_udp(seg, data, l4off, wire_end):
    """Fill ``seg``'s UDP fields from the header at ``data[l4off:]``.

    Args:
        seg:      a Seg whose IP fields are set.
        data:     captured bytes.
        l4off:    UDP header offset, bytes.
        wire_end: offset where the packet ends on the wire (original length).

    Returns:
        None, or Pass.TRUNCATED when the 8-byte header is not all captured
        (udp_gro_udphdr fails: the packet is passed).
    """
    if len(data) < l4off + 8:
        return Pass.TRUNCATED
    _sp, _dp, ulen, csum = _udp.unpack_from(data, l4off)
    seg.l4off = l4off
    seg.pay = l4off + 8
    seg.L = wire_end - l4off - 8      # skb_gro_len after the UDP header
    seg.ulen = ulen
    seg.ucsum = csum
    seg.flags = 0
    seg.word = 0
    seg.seq = 0
    seg.ackopt = b""
    return None


def segment_checks(seg, present):
    """The checks of udp_gro_receive_segment made before flow matching.

    Args:
        seg:     the received UDP Seg.
        present: bytes after the IP header(s) on the wire (skb_gro_len).

    Returns:
        None, or the Pass reason (the datagram is passed, a held aggregate
        of its flow stays held): checksum 0 ("symmetry with GSO"), UDP
        length <= 8 or not equal to the bytes present (padding).
    """
    if seg.ucsum == 0:
        return Pass.UDP_ZERO_CSUM
    if seg.ulen <= 8 or seg.ulen != present:
        return Pass.UDP_LENGTH
    return None


def udp_mode(cfg, seg):
    """udp_gro_receive's choice for a datagram under GROConfig ``cfg``:
    None (no L4 GRO: the datagram is passed), 'std' or 'flist'.

    No local socket: fraglist if rx-gro-list, else standard if
    rx-udp-gro-forwarding, else none.  A local socket is only found when
    UDP_GRO sockets exist (the encap static key): then standard if it
    enabled UDP_GRO, else fraglist if rx-gro-list, else none.  A datagram
    inside a tunnel never takes the fraglist mode (udp4_gro_complete does
    fraglist only with no outer encap)."""
    if dport(seg) in cfg.local_ports and cfg.udp == "gro":
        return "std"
    if cfg.fraglist and seg.outer is None:      # not inside a tunnel
        return "flist"
    if cfg.udp == "gro":
        return "std"
    return None


def _flush(napi, agg, seg, flist):
    """udp_gro_receive_segment's checks for a same-flow held ``agg``:
    network header, a longer datagram, the L3 flush flag and the size limit
    (fraglist: 65536 with every header; standard: gro_max_size, at most
    65536).  Returns the Flush reason or None; Pass.CSUM_STATE when a
    fraglist datagram's ip_summed differs (it is passed, ``agg`` stays)."""
    head = agg.head
    reason = network_flush(agg, seg)
    if reason is None and seg.ulen > head.ulen:
        reason = Flush.LONGER_DATAGRAM
    if reason is not None:
        return reason
    if flist:
        if seg.partial != head.partial:
            return Pass.CSUM_STATE
        if seg.flush_l3:
            return Flush.L3_FLUSH
        if agg.size + seg.l3len + 4 * seg.vlan >= GRO_LEGACY_MAX_SIZE:
            return Flush.SIZE_LIMIT
    elif seg.flush_l3:
        return Flush.L3_FLUSH
    elif agg.size + seg.L >= min(napi.limit, GRO_LEGACY_MAX_SIZE):
        return Flush.SIZE_LIMIT
    return None


def _start(napi, seg, t, flist):
    """A datagram of a flow with nothing held: passed on the L3 flush flag,
    else held as a new head."""
    if seg.flush_l3:
        napi.pass_up(seg.pkt, Pass.L3_FLUSH)
        return None
    return napi.hold(seg, t, flist)


def gro_receive(napi, seg, t):
    """udp_gro_receive / udp_gro_receive_segment for one datagram, after
    dev_gro_receive's flow lookup in ``napi`` (:class:`pcapgro.gro.core.NAPI`)
    at time ``t`` (ns).

    Returns:
        the Agg now holding the datagram, or None (passed or completed).
    """
    mode = udp_mode(napi.cfg, seg)
    if mode is None:
        napi.pass_up(seg.pkt, Pass.NO_UDP_GRO)
        return None
    r = segment_checks(seg, seg.L + 8)
    if r is not None:
        napi.pass_up(seg.pkt, r)
        return None
    flist = mode == "flist"
    agg = napi.flows.get(seg.key)
    if agg is None:
        return _start(napi, seg, t, flist)
    if agg.flist != flist:
        napi.complete(agg, Flush.MODE_CHANGED, t)
        napi.pass_up(seg.pkt, Pass.MODE_CHANGED)
        return None
    reason = _flush(napi, agg, seg, flist)
    if reason is Pass.CSUM_STATE:
        napi.pass_up(seg.pkt, reason)
        return agg
    if reason is not None:
        napi.complete(agg, reason, t)
        return _start(napi, seg, t, flist)
    napi.merge(agg, seg, None)
    if seg.ulen != agg.head.ulen:
        napi.complete(agg, Flush.SHORT_DATAGRAM, t)
        return None
    if agg.count >= UDP_GRO_CNT_MAX:
        napi.complete(agg, Flush.SEGMENT_LIMIT, t)
        return None
    return agg


def gro_complete(hdr, agg, l4off, l4len):
    """udp_gro_complete for an aggregate's headers ``hdr`` (bytearray, UDP
    header at ``l4off``): the UDP length becomes the aggregate's ``l4len``
    bytes; the checksum is written by the engine
    (:mod:`pcapgro.gro.complete`)."""
    hdr[l4off + 4] = (l4len >> 8) & 0xFF
    hdr[l4off + 5] = l4len & 0xFF


inet_add_offload(17, NetOffload("udp", parse_udp, gro_receive, gro_complete, csum_at=6,
                                csum_zero=0xFFFF))
