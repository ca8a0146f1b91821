"""GRE GRO: version 0 with the Key and Checksum flags only.

Mirrors net/ipv4/gre_offload.c (gre_gro_receive, gre_gro_complete) of
Linux 6.18, registered for IPPROTO_GRE over IPv4 and IPv6: any flag but K
and C (sequence numbers, routing, a version) is not merged; the
checksum, when present, must be valid (skb_gro_checksum_simple_validate);
flags, protocol and -- with K -- the 32-bit word after the base header
must be equal (the kernel compares ``*(greh + 1)``, which is the checksum
word when C is set too); the inner EtherType is found in the offload table
(ETH_P_TEB: an inner Ethernet header, eth_gro_receive).  Completion does
not touch the GRE checksum (``--csum valid`` recomputes it).
"""

from ..checksum import ones_sum
from ..linklayer import ETH_P_TEB
from .encap import inner_ethernet, inner_receive
from .flush import Pass
from .offload import NetOffload, inet_add_offload, packet_offload

__all__ = ["tunnel_parse", "receive", "IPPROTO_GRE", "GRE_CSUM", "GRE_KEY"]

IPPROTO_GRE = 47
GRE_CSUM = 0x8000
GRE_KEY = 0x2000


def tunnel_parse(seg, data, off, wire_end):
    """The L4 fields of a tunnel's outer Seg (GRE, IP-in-IP): the tunnel
    header at ``off``; no payload of its own.  Returns None."""
    seg.l4off = off
    seg.pay = off
    seg.L = wire_end - off
    seg.ulen = 0
    seg.ucsum = 0
    seg.flags = 0
    seg.word = 0
    seg.seq = 0
    seg.ackopt = b""
    return None


def _csum_ok(napi, seg, g):
    """The GRE checksum verdict (skb_gro_checksum_simple_validate over the
    GRE header and all after it), counted in the checksum statistics; not
    checked when the packet is flushed anyway or cut by the snaplen."""
    csum = napi.stats.csum
    d = seg.pkt.data
    if seg.flush_l3 or len(d) < seg.pkt.orig_len:
        csum["skipped_l3_flush" if seg.flush_l3 else "skipped_truncated"] += 1
        return True
    if ones_sum(d[g:seg.end]) % 0xFFFF:
        csum["bad"] += 1
        return False
    csum["verified"] += 1
    return True


def receive(napi, seg):
    """gre_gro_receive for outer Seg ``seg`` (its l4off: the GRE header).

    Returns:
        the inner flow's Seg, or the Pass reason: tunnel_nested,
        gre_flags, truncated, tunnel_inner_no_handler, bad_gre_csum.
    """
    if seg.outer is not None:
        return Pass.TUNNEL_NESTED
    d = seg.pkt.data
    g = seg.l4off
    if len(d) < g + 4:
        return Pass.TRUNCATED
    flags = (d[g] << 8) | d[g + 1]
    if flags & ~(GRE_KEY | GRE_CSUM):
        return Pass.GRE_FLAGS
    et = (d[g + 2] << 8) | d[g + 3]
    if et != ETH_P_TEB and packet_offload(et) is None:
        return Pass.TUNNEL_INNER
    hl = 4 + (4 if flags & GRE_KEY else 0) + (4 if flags & GRE_CSUM else 0)
    if len(d) < g + hl:
        return Pass.TRUNCATED
    if flags & GRE_CSUM and napi.cfg.verify_csum and not _csum_ok(napi, seg, g):
        return Pass.BAD_GRE_CSUM
    same = bytes(d[g:g + 8 if flags & GRE_KEY else g + 4])
    mac = None
    l3off = g + hl
    if et == ETH_P_TEB:
        mac = l3off
        r = inner_ethernet(napi, seg, mac)
        if type(r) is not tuple:
            return r
        l3off, et = r
    return inner_receive(napi, seg, "gre", et, l3off, same, mac,
                         g + 4 if flags & GRE_CSUM else None)


def _unreached(napi, seg, t):       # the tunnel callback always replaces the Seg
    napi.pass_up(seg.pkt, Pass.NO_HANDLER)


def _no_complete(hdr, agg, l4off, l4len):
    return None


inet_add_offload(IPPROTO_GRE, NetOffload("gre", tunnel_parse, _unreached, _no_complete,
                                         csum_at=4, tunnel=receive))
