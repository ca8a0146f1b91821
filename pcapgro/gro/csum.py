"""Checksum validation of a received segment, as GRO does it.

Mirrors the skb_gro_checksum_validate calls of tcp4_gro_receive /
tcp6_gro_receive and udp4_gro_receive / udp6_gro_receive (Linux 6.18): a
packet whose TCP or UDP checksum is bad never merges and is passed; a
sender's CHECKSUM_PARTIAL packet (the field holds the pseudo-header seed,
as a capture on a sender with offloads shows it) is trusted.
"""

from ..checksum import fold, ones_sum
from .flush import Pass

__all__ = ["seed", "verify"]


def seed(caddr, cextra):
    """The pseudo-header seed a CHECKSUM_PARTIAL packet carries in its
    checksum field: the folded pseudo-header sum, not inverted (as
    ~tcp_v4_check(len, saddr, daddr, 0) leaves it).  ``caddr``: the
    pseudo-header address bytes; ``cextra``: protocol + length (int)."""
    return fold(ones_sum(caddr) + cextra)


def _skipped(seg):
    """Why ``seg`` is not summed (no cblock), as a GROStats.csum key: an L3
    flush, a payload cut by the snaplen, or else a UDP datagram without a
    checksum (udp_gro_receive_segment passes those: ``udp_zero_csum``)."""
    if seg.flush_l3:
        return "skipped_l3_flush"
    if len(seg.pkt.data) < seg.pkt.orig_len or seg.proto != 17 or seg.ucsum:     # 17: UDP
        return "skipped_truncated"
    return "skipped_udp_zero"


def verify(seg, csum, at):
    """The checksum verdict for Seg ``seg`` whose checksum field is at byte
    ``at`` of its packet, counted in Counter ``csum`` (GROStats.csum).

    Returns:
        ``seg`` (``partial`` set when its field holds the pseudo-header
        seed; not verified when ``seg.cblock`` is None: L3 flush or cut by
        the snaplen), or Pass.BAD_TCP_CSUM / Pass.BAD_UDP_CSUM.
    """
    if seg.cblock is None:
        csum[_skipped(seg)] += 1
        return seg
    if (ones_sum(seg.cblock) + seg.cextra) % 0xFFFF == 0:
        csum["verified"] += 1
        return seg
    d = seg.pkt.data
    field = (d[at] << 8) | d[at + 1]
    if field == seed(seg.caddr, seg.cextra):
        csum["seed"] += 1
        seg.partial = True
        return seg
    csum["bad"] += 1
    return Pass.BAD_TCP_CSUM if seg.proto == 6 else Pass.BAD_UDP_CSUM
