"""Completion: the aggregate a receiver's capture shows.

Mirrors napi_gro_complete of net/core/gro.c calling the offload table's
gro_complete callbacks: inet_gro_complete / ipv6_gro_complete (lengths, IPv4
header checksum, the IPv6 BIG TCP jumbo header), then tcp_gro_complete /
udp_gro_complete (FIN/PSH, UDP length), and the L4 checksum as
tcp4_gro_complete leaves it (the pseudo-header seed, ``--csum kernel``) or
valid (``--csum valid``, what a capture tool can show as good).
"""

from ..checksum import fold, ones_sum
from ..record import GSOInfo, Packet
from . import annotate
from .encap import complete_levels
from .offload import inet_offload, l3_offload
from .payload import join_sums, left_out, payload_sum, payloads

__all__ = ["build"]


def _l4_checksum(napi, agg, l4, hdr, l4off, pseudo, parts, plens):
    """The valid L4 checksum (int) of the aggregate whose headers are
    ``hdr`` (L4 header at ``l4off``, checksum field zeroed), payload
    ``parts`` of lengths ``plens``, pseudo-header sum ``pseudo``: from the
    segments' payload sums where every one is known, else from the bytes."""
    ps = agg.psums
    if l4.field_psums is not None and None in ps and not napi.cfg.verify_csum:
        ps = l4.field_psums(agg)
    if l4.field_psums is not None and None not in ps:
        psum = join_sums(ps, plens)
    else:
        psum = payload_sum(parts)
    c = (~fold(pseudo + ones_sum(bytes(hdr[l4off:])) + psum)) & 0xFFFF
    return c or l4.csum_zero


def build(napi, agg, t):
    """The aggregate ``agg`` completed at time ``t`` (ns) as a Packet: the
    first segment's headers, every payload, lengths and checksums rewritten.

    Standard TCP: FIN/PSH OR-ed in, checksum = pseudo-header seed
    (csum='kernel') or valid.  Fraglist: the first packet's checksum
    (kernel) or valid.  UDP: length = the aggregate's; checksum = seed
    (standard, kernel), the first datagram's (fraglist, kernel), or valid.
    A segment cut by the snaplen makes the payload contiguous only up to it
    (counted in ``napi.stats``) and the checksum the seed.  With
    ``napi.parts_out`` the Packet's data is the list of its parts.  A
    tunnelled aggregate is completed through both levels
    (:func:`pcapgro.gro.encap.complete_levels`)."""
    head = agg.head
    if head.outer is not None:
        return _tunnelled(napi, agg, t)
    pkt = head.pkt
    d = pkt.data
    l3off = head.l3off
    l3len = agg.size - 4 * head.vlan
    l3 = l3_offload(head.family)
    l4 = inet_offload(head.proto)
    hdr, ins = l3.gro_complete(bytearray(d[:head.pay]), l3off, l3len)
    l4off = head.l4off + ins
    l4len = l3len - (head.l4off - l3off)
    l4.gro_complete(hdr, agg, l4off, l4len)
    at = l4off + l4.csum_at
    pseudo = l3.pseudo_sum(d, l3off, head.proto, l4len)
    parts, plens, cut = payloads(agg)
    if cut:
        napi.stats.note_cut(left_out(agg, len(plens)))
    if napi.cfg.csum == "kernel" or cut:
        if not agg.flist:
            c = fold(pseudo)
            hdr[at:at + 2] = c.to_bytes(2, "big")
        # fraglist: the first packet's checksum stays
    else:
        hdr[at:at + 2] = b"\0\0"
        c = _l4_checksum(napi, agg, l4, hdr, l4off, pseudo, parts, plens)
        hdr[at:at + 2] = c.to_bytes(2, "big")
    hdr = bytes(hdr)
    parts.insert(0, hdr)
    data = parts if napi.parts_out else b"".join(parts)
    meta = pkt.meta
    if napi.cfg.annotate:
        meta = annotate.aggregate(meta, hdr, agg, l4.name.upper(), cut)
    # skb_shinfo()'s GSO fields, as tcp/udp_gro_complete set them
    return Packet(t, data, l3off + ins + l3len, pkt.iface, pkt.linktype, meta,
                  GSOInfo(l4.name, agg.flist, agg.mss, agg.count))


def _tunnelled(napi, agg, t):
    """:func:`build` for an aggregate of a tunnelled flow."""
    head = agg.head
    pkt = head.pkt
    hdr, parts, cut = complete_levels(napi, agg)
    parts.insert(0, hdr)
    data = parts if napi.parts_out else b"".join(parts)
    meta = pkt.meta
    if napi.cfg.annotate:
        name = head.outer.kind.upper() + "/" + inet_offload(head.proto).name.upper()
        meta = annotate.aggregate(meta, hdr, agg, name, cut)
    return Packet(t, data, head.outer.l3off + agg.size - 4 * head.vlan, pkt.iface,
                  pkt.linktype, meta,
                  GSOInfo(head.outer.kind + "_" + inet_offload(head.proto).name, False,
                          agg.mss, agg.count))
