"""UDP GRO rules: parsing and the segment-coalescing checks.

Mirrors net/ipv4/udp_offload.c (udp_gro_receive, udp_gro_receive_segment,
udp4_gro_complete, udp_gro_complete) and net/ipv6/udp_offload.c of Linux
6.18.  Which datagrams take part (standard L4 GRO, fraglist, or none) is
decided per packet from the emulated device features and sockets, see
:meth:`pcapgro.gro.engine.GROEngine._udp_mode`.
"""

import struct

from .flush import Flush, Pass
from .network import network_flush  # noqa: F401  (re-exported: same checks as TCP)

__all__ = ["parse_udp", "segment_checks", "UDP_GRO_CNT_MAX"]

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
