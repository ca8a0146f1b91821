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
    needed for it).  IPv6: traffic class and hop limit equal.  A tunnelled
    flow's outer IP header is checked the same way after the inner one
    (gro_receive_network_flush with encap_mark), under the OUTER_* reasons.

    Returns:
        None, or the Flush reason.  Side effect as the kernel's: sets
        ``agg.fixedid`` when the second segment repeats the first's ID.
    """
    head = agg.head
    r = _level_flush(agg, seg, head, False)
    if r is None and seg.outer is not None:
        r = _level_flush(agg, seg.outer, head.outer, True)
    return r


_INNER = (Flush.TTL_CHANGED, Flush.TOS_CHANGED, Flush.DF_CHANGED, Flush.IP_ID)
_OUTER = (Flush.OUTER_TTL_CHANGED, Flush.OUTER_TOS_CHANGED, Flush.OUTER_DF_CHANGED,
          Flush.OUTER_IP_ID)


def _level_flush(agg, x, h, outer):
    """inet_gro_flush / ipv6_gro_flush for one IP level: ``x`` and ``h``
    (Seg, or Outer when ``outer``) the new packet's and the head's fields;
    the fixed-ID bit of that level (``agg.fixedid`` / ``agg.outer_fixedid``)
    is set at the second packet.  Returns the level's Flush reason or None."""
    names = _OUTER if outer else _INNER
    if x.tosttl != h.tosttl:
        return names[0] if (x.tosttl ^ h.tosttl) & 0xFF else names[1]
    if x.ipid is not None:
        if x.df != h.df:
            return names[2]
        d = (x.ipid - h.ipid) & 0xFFFF
        count = agg.count & 0xFFFF       # NAPI_GRO_CB(p)->count is a u16
        fixed = agg.outer_fixedid if outer else agg.fixedid
        if count == 1 and d == 0:
            fixed = True
            if outer:
                agg.outer_fixedid = True
            else:
                agg.fixedid = True
        if d != (0 if fixed else count):
            return names[3]
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
