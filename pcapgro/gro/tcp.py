"""TCP GRO: parsing, the merge checks, the final check, completion.

Mirrors net/ipv4/tcp_offload.c (tcp_gro_pull_header, tcp_gro_receive and
its fraglist branch, tcp_gro_complete, tcp4_check_fraglist_gro) and
net/ipv6/tcpv6_offload.c of Linux 6.18, with the network-layer checks of
include/net/gro.h (inet_gro_flush, ipv6_gro_flush) that 6.10+ evaluate
from TCP.  Registered for IPPROTO_TCP in the offload table.
"""

import struct

from ..checksum import ones_sum
from .config import GRO_LEGACY_MAX_SIZE
from .flush import Flush, Pass
from .network import network_flush
from .offload import NetOffload, inet_add_offload

__all__ = ["parse_tcp", "merge_flush", "final_flush", "gro_receive", "gro_complete",
           "dport", "FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR",
           "FINAL_FLAGS"]

FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80
# Flags that force a flush after the segment (tcp_gro_receive, out_check_final)
FINAL_FLAGS = URG | PSH | RST | SYN | FIN
# The flag word (TCP bytes 12..15) bits that may differ inside an aggregate
_WORD_FIN_PSH = 0x00090000
_WORD_CWR = 0x00800000

_tcp_fixed = struct.Struct("!HHIIBBH")  # ports, seq, ack, doff/res, flags, window
_u32 = struct.Struct("!I").unpack_from

_FIN_PSH = FIN | PSH
TCP_FRAGLIST_MAX = 64       # segments per fraglist aggregate (MAX_SKB_FRAGS)

_FLAG_REASON = ((FIN, Flush.FIN), (PSH, Flush.PSH), (URG, Flush.URG),
                (RST, Flush.RST), (SYN, Flush.SYN))
_PASS_FLAGS = Pass.FLAGS


def parse_tcp(seg, data, l4off, wire_end):
    """Fill ``seg``'s TCP fields from the header at ``data[l4off:]``.

    Args:
        seg:      a Seg with family, l3off, l3len, pay... not yet set.
        data:     captured bytes.
        l4off:    TCP header offset in bytes.
        wire_end: offset where the packet's bytes end on the wire (from the
                  original length), used for the payload length L.

    Returns:
        None on success, else the Pass reason (header cut short, data offset
        < 5): tcp_gro_pull_header failing, the packet is passed unmerged.
    """
    n = len(data)
    if n < l4off + 20:
        return Pass.TRUNCATED
    doff = data[l4off + 12] >> 4
    if doff < 5:
        return Pass.BAD_TCP_HEADER
    hl = doff << 2
    pay = l4off + hl
    if n < pay or wire_end < pay:
        return Pass.TRUNCATED
    seg.l4off = l4off
    seg.pay = pay
    seg.L = wire_end - pay
    seg.flags = data[l4off + 13]
    seg.word = _u32(data, l4off + 12)[0]
    seg.seq = _u32(data, l4off + 4)[0]
    seg.ackopt = data[l4off + 8:l4off + 12] + data[l4off + 20:pay]
    return None


def _word_reason(w):
    """Name what differs in the flag word difference ``w`` (TCP bytes 12..15
    XOR-ed, FIN/PSH masked)."""
    if w & 0xF0000000:
        return Flush.HEADER_LEN_CHANGED
    if w & 0x0FFF0000:
        return Flush.FLAGS_CHANGED
    return Flush.WINDOW_CHANGED


def merge_flush(agg, seg):
    """The merge checks of tcp_gro_receive for a same-flow held ``agg``.

    Evaluated in the kernel's order; the first that fails is returned.  Has
    the kernel's side effect: at the second segment an IPv4 ID equal to the
    first makes the aggregate "fixed ID" (inet_gro_flush, 6.18: DF not
    required).

    Returns:
        None when the segment may be merged, else the Flush reason (the held
        aggregate is then completed and the segment not merged).
    """
    head = agg.head
    if seg.flags & CWR:
        return Flush.CWR
    w = (seg.word ^ head.word) & ~_WORD_FIN_PSH
    if w:
        return _word_reason(w)
    if seg.ackopt != head.ackopt:
        if seg.ackopt[:4] != head.ackopt[:4]:
            return Flush.ACK_CHANGED
        return Flush.OPTIONS_CHANGED
    r = network_flush(agg, seg)
    if r is not None:
        return r
    L = seg.L
    if L - 1 >= agg.mss or L == 0:   # unsigned (len - 1) >= mss
        return Flush.PURE_ACK if L == 0 else Flush.MSS_EXCEEDED
    if seg.seq != agg.seq_next:
        return Flush.SEQ_GAP
    return None


def final_flush(seg, mss):
    """The final check of tcp_gro_receive (out_check_final).

    Args:
        seg: the received Seg.
        mss: the held aggregate's gso_size if the segment was merged, else 1.

    Returns:
        None, or the Flush reason forcing completion (shorter than mss, or
        URG/PSH/RST/SYN/FIN set).
    """
    if seg.L < mss:
        return Flush.SHORT_SEGMENT if mss > 1 else Flush.PURE_ACK
    f = seg.flags & FINAL_FLAGS
    if f:
        for bit, reason in _FLAG_REASON:
            if f & bit:
                return reason
    return None


def dport(seg):
    """Destination port (int) of a parsed TCP or UDP segment."""
    d = seg.pkt.data
    return (d[seg.l4off + 2] << 8) | d[seg.l4off + 3]


def uses_fraglist(cfg, seg):
    """tcp4/6_check_fraglist_gro: with rx-gro-list on (``cfg.fraglist``), a
    TCP flow with no local (established) socket uses fraglist GRO."""
    return cfg.fraglist and dport(seg) not in cfg.local_ports


def _std_flush(napi, agg, seg):
    """The standard branch's last checks: the L3 flush flag, then the size
    limit (skb_gro_receive: gro_max_size, exclusive; a tunnelled flow never
    passes GRO_LEGACY_MAX_SIZE: only plain TCP may grow beyond it)."""
    if seg.flush_l3:
        return Flush.L3_FLUSH
    limit = napi.limit if seg.outer is None else min(napi.limit, GRO_LEGACY_MAX_SIZE)
    if agg.size + seg.L >= limit:
        return Flush.SIZE_LIMIT
    return None


def _fraglist_flush(napi, agg, seg):
    """The fraglist branch of tcp_gro_receive + skb_gro_receive_list: the
    whole flag word equal (FIN/PSH count too), the same ip_summed, at most
    64 segments, the L3 flush flag, and 65536 bytes counting every chained
    packet's headers."""
    if seg.word != agg.head.word:
        return Flush.FLAGS_CHANGED
    if seg.partial != agg.head.partial:
        return Flush.CSUM_STATE
    if agg.count >= TCP_FRAGLIST_MAX:
        return Flush.SEGMENT_LIMIT
    if seg.flush_l3:
        return Flush.L3_FLUSH
    if agg.size + seg.l3len + 4 * seg.vlan >= GRO_LEGACY_MAX_SIZE:
        return Flush.SIZE_LIMIT
    return None


def _start(napi, seg, t, flist):
    """A segment of a flow with nothing held: passed (no payload or a final
    flag: never held alone; L3 flush) or held as a new head."""
    if final_flush(seg, 1) is not None:
        napi.pass_up(seg.pkt, Pass.PURE_ACK if seg.L == 0 else Pass.FLAGS)
    elif seg.flush_l3:
        napi.pass_up(seg.pkt, Pass.L3_FLUSH)
    else:
        return napi.hold(seg, t, flist)
    return None


def gro_receive(napi, seg, t):
    """tcp_gro_receive for one parsed segment, after dev_gro_receive's
    flow lookup in ``napi`` (:class:`pcapgro.gro.core.NAPI`) at time ``t``
    (ns).

    Returns:
        the Agg now holding the segment (merged into it, or held as its
        head), or None when the segment was passed or its aggregate
        completed.
    """
    agg = napi.flows.get(seg.key)
    if agg is None:
        return _start(napi, seg, t, seg.outer is None and uses_fraglist(napi.cfg, seg))
    reason = merge_flush(agg, seg)
    if reason is None:
        reason = (_fraglist_flush if agg.flist else _std_flush)(napi, agg, seg)
    if reason is not None:
        napi.complete(agg, reason, t)
        return _start(napi, seg, t, agg.flist)
    # skb_gro_receive (standard) or skb_gro_receive_list (fraglist)
    napi.merge(agg, seg, None)
    agg.seq_next = (agg.seq_next + seg.L) & 0xFFFFFFFF
    if not agg.flist:
        agg.fin_psh |= seg.flags & _FIN_PSH
    after = final_flush(seg, agg.mss)
    if after is not None:
        napi.complete(agg, after, t)
        return None
    return agg


def derived_psum(caddr_sum, tcp_hdr, tcp_len):
    """The payload sum (mod 0xFFFF) of one TCP segment taken from its
    checksum field (checksums not verified, so not summed from the bytes):
    for a valid checksum, pseudo-header + TCP header (field included) +
    payload sums to 0 mod 0xFFFF, so the payload's sum is minus the rest
    (RFC 1624's incremental arithmetic).  None when the field holds the
    pseudo-header seed.  ``caddr_sum``: ones_sum of the pseudo-header
    addresses; ``tcp_hdr``: the TCP header bytes (options included);
    ``tcp_len``: TCP header + payload length (bytes)."""
    pseudo = caddr_sum + 6 + (tcp_len >> 16) + (tcp_len & 0xFFFF)
    sd = pseudo % 0xFFFF or 0xFFFF
    if (tcp_hdr[16] << 8) | tcp_hdr[17] == sd:
        return None
    return (-(pseudo + int.from_bytes(tcp_hdr, "big"))) % 0xFFFF


def field_psums(agg):
    """``agg.psums`` with every None filled in from its segment's checksum
    field (:func:`derived_psum`) or, for a pseudo-header seed, from its
    payload bytes: the payload sums of an aggregate whose checksums were
    not verified (``--no-verify-csum``)."""
    head = agg.head
    asum = ones_sum(head.caddr)
    hl = head.pay - head.l4off
    out = list(agg.psums)
    for k, p in enumerate(agg.pkts):
        if out[k] is not None:
            continue
        if type(p) is bytes:
            continue
        d = p.data
        o = agg.pays[k]
        x = derived_psum(asum, d[o - hl:o], len(d) - o + hl)
        out[k] = x if x is not None else ones_sum(d[o:])
    return out


def gro_complete(hdr, agg, l4off, l4len):
    """tcp_gro_complete for an aggregate's headers ``hdr`` (bytearray, TCP
    header at ``l4off``): standard mode ORs the merged segments' FIN/PSH in;
    the checksum is written by the engine (:mod:`pcapgro.gro.complete`)."""
    if not agg.flist:
        hdr[l4off + 13] |= agg.fin_psh


inet_add_offload(6, NetOffload("tcp", parse_tcp, gro_receive, gro_complete, csum_at=16,
                              field_psums=field_psums))
