"""The network-layer checks every L4 GRO handler applies to a same-flow pair.

Mirrors gro_receive_network_flush / inet_gro_flush / ipv6_gro_flush of
include/net/gro.h (Linux 6.18), which tcp_gro_receive and (since April
2024) udp_gro_receive_segment call: all IP header fields must match except
length and checksum; the IPv4 ID must be incrementing or fixed.
"""

from .flush import Flush

__all__ = ["network_flush", "ipid_step"]


def network_flush(agg, seg):
    """Compare ``seg``'s IP header with the head of the held ``agg``.

    IPv4: TTL, TOS and DF equal; ID = first ID + count (incrementing) or =
    first ID (fixed: decided at the second segment, and since 6.18 DF is not
    needed for it).  IPv6: traffic class and hop limit equal.

    Returns:
        None, or the Flush reason.  Side effect as the kernel's: sets
        ``agg.fixedid`` when the second segment repeats the first's ID.
    """
    head = agg.head
    if seg.tosttl != head.tosttl:
        if (seg.tosttl ^ head.tosttl) & 0xFF:
            return Flush.TTL_CHANGED
        return Flush.TOS_CHANGED
    if seg.ipid is not None:
        if seg.df != head.df:
            return Flush.DF_CHANGED
        d = (seg.ipid - head.ipid) & 0xFFFF
        count = agg.count & 0xFFFF       # NAPI_GRO_CB(p)->count is a u16
        if count == 1 and d == 0:
            agg.fixedid = True
        if d != (0 if agg.fixedid else count):
            return Flush.IP_ID
    return None


def ipid_step(agg, d):
    """The IPv4 ID rule (inet_gro_flush, 6.18) for a segment continuing
    ``agg`` whose ID is ``d`` (0 or 1, classify's ``did``) more than the
    previous segment's: at the second segment ``d`` decides the mode (0:
    fixed, sets ``agg.fixedid``), later it must be the mode's step.
    Returns whether the segment may be merged."""
    if agg.count == 1:
        agg.fixedid = d == 0
        return True
    return d == (0 if agg.fixedid else 1)
