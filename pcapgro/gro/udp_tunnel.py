"""UDP tunnels: VXLAN and Geneve GRO, for the ports with a tunnel socket.

Mirrors udp_gro_receive's tunnel branch (net/ipv4/udp_offload.c: a socket
with a gro_receive callback on the destination port; encap_mark; ports
equal and outer checksums both zero or both nonzero), vxlan_gro_receive
(drivers/net/vxlan/vxlan_core.c: flags and VNI equal, then eth_gro_receive)
and geneve_gro_receive (drivers/net/geneve.c: version 0, no OAM, the whole
header with its options equal, then the inner EtherType's handler) of Linux
6.18.  The receiver's sockets are ``GROConfig.vxlan_ports`` /
``geneve_ports`` (``--vxlan-port``, ``--geneve-port``); a datagram to any
other port is plain UDP (:mod:`pcapgro.gro.udp`).  Set as the UDP entry's
``tunnel`` callback of the offload table.
"""

from ..linklayer import ETH_P_TEB
from .csum import verify
from .encap import inner_ethernet, inner_receive
from .flush import Pass
from .offload import inet_offload, packet_offload
from .seg import Seg

__all__ = ["receive", "VXLAN_HLEN", "GENEVE_HLEN"]

VXLAN_HLEN = 8
GENEVE_HLEN = 8              # fixed part; options follow (opt_len x 4 bytes)


def _kind(cfg, seg):
    """The tunnel socket on ``seg``'s destination port: "vxlan", "geneve"
    or None."""
    d = seg.pkt.data
    port = (d[seg.l4off + 2] << 8) | d[seg.l4off + 3]
    if port in cfg.vxlan_ports:
        return "vxlan"
    if port in cfg.geneve_ports:
        return "geneve"
    return None


def _geneve(napi, seg, h):
    """geneve_gro_receive's header checks at offset ``h``: ``(header bytes,
    inner l3off, EtherType, inner mac or None)`` or a Pass reason."""
    d = seg.pkt.data
    if len(d) < h + GENEVE_HLEN:
        return Pass.TRUNCATED
    if d[h] >> 6 or d[h + 1] & 0x80:             # version != 0, OAM
        return Pass.GENEVE_HEADER
    hl = GENEVE_HLEN + (d[h] & 0x3F) * 4
    if len(d) < h + hl:
        return Pass.TRUNCATED
    et = (d[h + 2] << 8) | d[h + 3]
    if et == ETH_P_TEB:
        r = inner_ethernet(napi, seg, h + hl)
        if type(r) is not tuple:
            return r
        return bytes(d[h:h + hl]), r[0], r[1], h + hl
    if packet_offload(et) is None:
        return Pass.TUNNEL_INNER
    return bytes(d[h:h + hl]), h + hl, et, None


def receive(napi, seg):
    """udp_gro_receive's tunnel branch for outer UDP Seg ``seg``.

    Returns:
        ``seg`` itself when no tunnel socket has its port (plain UDP GRO
        follows), else the inner flow's Seg, or the Pass reason: a second
        tunnel level (tunnel_nested), a bad nonzero outer checksum
        (bad_udp_csum), a header cut short, Geneve version/OAM, an inner
        EtherType with no handler.
    """
    cfg = napi.cfg
    kind = _kind(cfg, seg)
    if kind is None:
        return seg
    if seg.outer is not None:
        return Pass.TUNNEL_NESTED
    if seg.ucsum and cfg.verify_csum:
        r = verify(seg, napi.stats.csum, seg.l4off + 6)
        if type(r) is not Seg:
            return r
    d = seg.pkt.data
    h = seg.pay
    if kind == "vxlan":
        if len(d) < h + VXLAN_HLEN:
            return Pass.TRUNCATED
        r = inner_ethernet(napi, seg, h + VXLAN_HLEN)
        if type(r) is not tuple:
            return r
        r = bytes(d[h:h + VXLAN_HLEN]), r[0], r[1], h + VXLAN_HLEN
    else:
        r = _geneve(napi, seg, h)
        if type(r) is not tuple:
            return r
    same, l3off, et, mac = r
    same = bytes(d[seg.l4off:seg.l4off + 4]) + (b"\1" if seg.ucsum else b"\0") + same
    return inner_receive(napi, seg, kind, et, l3off, same, mac,
                         seg.l4off + 6 if seg.ucsum else None)


inet_offload(17).tunnel = receive
