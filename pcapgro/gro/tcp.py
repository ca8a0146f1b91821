"""TCP GRO rules: parsing, the merge checks, the final check, completion.

Mirrors net/ipv4/tcp_offload.c (tcp_gro_pull_header, tcp_gro_receive,
tcp_gro_complete, tcp4_gro_complete) and net/ipv6/tcpv6_offload.c of
Linux 6.18, with the network-layer checks of include/net/gro.h
(inet_gro_flush, ipv6_gro_flush) that 6.10+ evaluate from TCP.
"""

import struct

from ..checksum import fold, ones_sum
from .flush import Flush, Pass
from .network import network_flush
from .seg import Seg

__all__ = ["parse_tcp", "merge_flush", "final_flush", "FIN", "SYN", "RST",
           "PSH", "ACK", "URG", "ECE", "CWR", "FINAL_FLAGS"]

FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80
# Flags that force a flush after the segment (tcp_gro_receive, out_check_final)
FINAL_FLAGS = URG | PSH | RST | SYN | FIN
# The flag word (TCP bytes 12..15) bits that may differ inside an aggregate
_WORD_FIN_PSH = 0x00090000
_WORD_CWR = 0x00800000

_tcp_fixed = struct.Struct("!HHIIBBH")  # ports, seq, ack, doff/res, flags, window
_u32 = struct.Struct("!I").unpack_from

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


def seed(caddr, cextra):
    """The pseudo-header seed a CHECKSUM_PARTIAL packet carries in its
    checksum field: the folded pseudo-header sum, not inverted (as
    ~tcp_v4_check(len, saddr, daddr, 0) leaves it)."""
    return fold(ones_sum(caddr) + cextra)


def checksum_field(seg):
    """The TCP checksum field (int) of ``seg``."""
    d = seg.pkt.data
    return (d[seg.l4off + 16] << 8) | d[seg.l4off + 17]
