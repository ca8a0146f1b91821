"""IP-in-IP GRO: IPIP, SIT, IP4IP6 and IP6IP6.

Mirrors ipip_gro_receive / ipip_gro_complete (net/ipv4/af_inet.c) and
sit_ip6ip6_gro_receive / ip4ip6_gro_receive (net/ipv6/ip6_offload.c) of
Linux 6.18: with no encap_mark yet, the inner IP header is received as a
second IP level (inet_gro_receive / ipv6_gro_receive), else the packet is
passed (one tunnel level only).  Registered for IPPROTO_IPIP (4) and
IPPROTO_IPV6 (41) over IPv4 and IPv6.
"""

from ..linklayer import ETH_P_IP, ETH_P_IPV6
from .encap import inner_receive
from .flush import Pass
from .gre import _no_complete, _unreached, tunnel_parse
from .offload import NetOffload, inet_add_offload

__all__ = ["receive", "IPPROTO_IPIP", "IPPROTO_IPV6", "KINDS"]

IPPROTO_IPIP = 4
IPPROTO_IPV6 = 41
# (outer family, inner protocol) -> tunnel kind
KINDS = {(4, IPPROTO_IPIP): "ipip", (4, IPPROTO_IPV6): "sit",
         (6, IPPROTO_IPIP): "ip4ip6", (6, IPPROTO_IPV6): "ip6ip6"}


def receive(napi, seg):
    """ipip_gro_receive / sit_ip6ip6_gro_receive / ip4ip6_gro_receive for
    outer Seg ``seg`` (its l4off: the inner IP header).  Returns the inner
    flow's Seg or a Pass reason (tunnel_nested, or the inner header's)."""
    if seg.outer is not None:
        return Pass.TUNNEL_NESTED
    et = ETH_P_IP if seg.proto == IPPROTO_IPIP else ETH_P_IPV6
    return inner_receive(napi, seg, KINDS[seg.family, seg.proto], et, seg.l4off, b"")


for _proto in (IPPROTO_IPIP, IPPROTO_IPV6):
    inet_add_offload(_proto, NetOffload("ipip", tunnel_parse, _unreached, _no_complete,
                                        csum_at=0, tunnel=receive))
