"""GSO/TSO emulation (``pcapgro split``): cut super-frames into the
segments Linux's software segmentation would put on the wire.

Mirrors net/core/skbuff.c skb_segment, net/ipv4/af_inet.c
inet_gso_segment, net/ipv6/ip6_offload.c ipv6_gso_segment,
net/ipv4/tcp_offload.c tcp_gso_segment and net/ipv4/udp_offload.c
__udp_gso_segment (Linux 6.18).
"""

from .config import GSOConfig
from .engine import GSOSplitter
from .reasons import Pass, SizeSource
from .stats import FlowStats, GSOStats

__all__ = ["GSOConfig", "GSOSplitter", "Pass", "SizeSource", "GSOStats", "FlowStats"]
