"""The offload table: which protocol module handles which header.

Mirrors the kernel's two registries: ``offload_base`` of net/core/gro.c
(``dev_add_offload``: one ``struct packet_offload`` per EtherType, e.g.
ETH_P_IP -> inet_gro_receive / inet_gro_complete) and ``inet_offloads[]`` /
``inet6_offloads[]`` of net/ipv4/protocol.c and net/ipv6/protocol.c (one
``struct net_offload`` per IP protocol: tcp4_offload, udpv4_offload...).

The engine core (:mod:`pcapgro.gro.core`) knows no protocol: it finds each
one here.  A protocol module registers its callbacks when it is imported
(:mod:`pcapgro.gro` imports them all); adding a protocol is one module and
one ``add_*`` call.
"""

__all__ = ["PacketOffload", "NetOffload", "dev_add_offload", "inet_add_offload",
           "packet_offload", "l3_offload", "inet_offload"]


class PacketOffload:
    """The network-layer callbacks of one EtherType (struct packet_offload).

    Attributes:
        name:         "ipv4" / "ipv6".
        family:       4 or 6 (``Seg.family`` of the packets it parses).
        gro_receive:  callable(pkt, l3off, vlan) -> Seg or Pass reason: parse
                      the IP header, apply the reject and flush rules
                      (inet_gro_receive / ipv6_gro_receive), then the L4
                      handler's ``parse``.
        gro_complete: callable(hdr: bytearray, l3off, l3len) -> (hdr, ins):
                      rewrite the aggregate's IP header (inet_gro_complete /
                      ipv6_gro_complete); ``ins`` bytes were inserted after
                      it (IPv6 BIG TCP Hop-by-Hop jumbo header), else 0.
        pseudo_sum:   callable(data, l3off, proto, l4len) -> int: the
                      one's-complement sum (unfolded) of the L4 pseudo-header.
        hash_input:   callable(flow key) -> bytes the RSS-like flow hash is
                      taken over (addresses and ports only).
    """

    __slots__ = ("name", "family", "gro_receive", "gro_complete", "pseudo_sum",
                 "hash_input")

    def __init__(self, name, family, gro_receive, gro_complete, pseudo_sum, hash_input):
        self.name = name
        self.family = family
        self.gro_receive = gro_receive
        self.gro_complete = gro_complete
        self.pseudo_sum = pseudo_sum
        self.hash_input = hash_input


class NetOffload:
    """The transport-layer callbacks of one IP protocol (struct net_offload).

    Attributes:
        name:         "tcp" / "udp" (also the statistics' aggregate kind).
        parse:        callable(seg, data, l4off, wire_end) -> None or Pass:
                      fill the Seg's L4 fields (tcp_gro_pull_header,
                      udp_gro_udphdr).
        gro_receive:  callable(napi, seg, t) -> Agg or None: match the held
                      aggregates and merge, hold or pass (tcp_gro_receive,
                      udp_gro_receive); ``napi`` is the
                      :class:`pcapgro.gro.core.NAPI` instance.
        gro_complete: callable(hdr: bytearray, agg, l4off, l4len): rewrite
                      the aggregate's L4 header but for its checksum
                      (tcp_gro_complete, udp_gro_complete).
        csum_at:      offset of the checksum field in the L4 header, bytes.
        csum_zero:    the value a computed checksum of 0 is written as
                      (UDP: 0xFFFF, RFC 768; TCP: 0).
        field_psums:  None, or callable(agg) -> list of payload sums taken
                      from the segments' checksum fields (TCP, when
                      checksums are not verified); with it, payload sums the
                      fast path computed are used for the written checksum.
        tunnel:       None, or callable(napi, seg) -> Seg or Pass: the
                      protocol may carry a tunnel (GRE, IPIP, a UDP tunnel
                      socket's port): given the parsed outer Seg it returns
                      the inner flow's Seg (``seg.outer`` set), a Pass
                      reason, or ``seg`` itself when this packet is not
                      tunnelled (udp_gro_receive -> the socket's gro_receive,
                      gre_gro_receive, ipip_gro_receive).
    """

    __slots__ = ("name", "parse", "gro_receive", "gro_complete", "csum_at", "csum_zero",
                 "field_psums", "tunnel")

    def __init__(self, name, parse, gro_receive, gro_complete, csum_at, csum_zero=0,
                 field_psums=None, tunnel=None):
        self.name = name
        self.parse = parse
        self.gro_receive = gro_receive
        self.gro_complete = gro_complete
        self.csum_at = csum_at
        self.csum_zero = csum_zero
        self.field_psums = field_psums
        self.tunnel = tunnel


_by_ethertype = {}      # EtherType -> PacketOffload (offload_base)
_by_family = {}         # 4 / 6 -> PacketOffload
_inet = {}              # IP protocol -> NetOffload (inet_offloads, inet6_offloads)


def dev_add_offload(ethertype, off):
    """Register PacketOffload ``off`` for EtherType ``ethertype`` (int)."""
    _by_ethertype[ethertype] = off
    _by_family[off.family] = off


def inet_add_offload(proto, off):
    """Register NetOffload ``off`` for IP protocol ``proto`` (int), for IPv4
    and IPv6 alike (tcp4/tcp6 and udp4/udp6 share their receive rules)."""
    _inet[proto] = off


def packet_offload(ethertype):
    """The PacketOffload of ``ethertype``, or None (no GRO handler)."""
    return _by_ethertype.get(ethertype)


def l3_offload(family):
    """The PacketOffload of IP version ``family`` (4 or 6).  KeyError if
    none is registered."""
    return _by_family[family]


def inet_offload(proto):
    """The NetOffload of IP protocol ``proto``, or None (no GRO handler)."""
    return _inet.get(proto)
