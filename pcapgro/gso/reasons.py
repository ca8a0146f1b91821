"""Named reasons: why a packet passed through the splitter unchanged, and
where a flow's segment size came from.

The kernel has no such names (a packet that needs no segmentation simply
takes the non-GSO path in validate_xmit_skb / skb_gso_segment); pcapgro
names them so that statistics can count them and tests can assert them.
"""

import enum

__all__ = ["Pass", "SizeSource"]


class Pass(str, enum.Enum):
    """Why a packet was written unchanged (byte-identical) by ``split``."""

    SMALL = "small"                # TCP/UDP payload fits one segment (not a super-frame)
    NOT_IP = "not_ip"              # no IPv4/IPv6 reachable (ARP, unknown link type)
    NO_HANDLER = "no_handler"      # neither TCP nor UDP (ICMP, ESP, AH, SCTP, ...)
    FRAGMENT = "fragment"          # IPv4 MF/offset set, or IPv6 Fragment header
    EXT_HEADER = "ext_header"      # IPv6 extension header that cannot be walked or
                                   # copied (unknown, or a jumbo option in a shape
                                   # ipv6_hopopt_jumbo_remove does not accept)
    TRUNCATED = "truncated"        # network / transport header cut short by snaplen
    BAD_HEADER = "bad_header"      # IPv4 IHL < 5, TCP data offset < 5, version mismatch
    BAD_LENGTH = "bad_length"      # length fields inconsistent with the frame
    RECORD_LENGTHS = "record_lengths"  # the record's lengths contradict each other:
                                   # captured > original length, or an IP length
                                   # field of 0 (or a tunnel frame whose headers
                                   # say less: GSO_PARTIAL) with an original
                                   # length beyond GSO_MAX_SIZE (damage, not a
                                   # super-frame)
    TUNNEL = "tunnel"              # super-frame inside VXLAN / Geneve / IP-in-IP / GRE
                                   # that tunnel GSO (gso/tunnel.py) does not cut: UDP
                                   # inside, a second level, GRE seq: written unchanged
    FLAGS = "flags"                # TCP super-frame with SYN or RST: not segmented
    SEGMENT_TOO_BIG = "segment_too_big"  # a segment would not fit the IP length field
    FCS = "fcs"                    # super-frame or seed ending in an FCS that is not
                                   # Ethernet's 4-byte CRC-32: not recomputed, so
                                   # written unchanged


class SizeSource(str, enum.Enum):
    """Where the segment size (gso_size) used for a flow came from.

    OPTION:  ``GSOConfig.mss`` (``--mss``) or, for UDP, ``gso_size``.
    SYN:     the MSS option of the peer's SYN / SYN-ACK (the reverse
             direction), less the TCP option bytes the data segments carry.
    OWN_SYN: no peer SYN in the capture: the MSS option of the sender's own
             SYN, less the option bytes (the sender never sends more than it
             could receive over its own MTU; the kernel's shared captures
             hold only the sender's SYN).
    RECORDED: the packet is an aggregate ``pcapgro merge`` wrote (pcapng):
             its comment records the gso_size GRO gave it (what the kernel's
             skb carries into GSO); used when no SYN gives the MSS, and for
             UDP when ``gso_size`` is not given.
    LARGEST: the largest segment of the flow seen so far that was not a
             super-frame (its L3 length fitted ``mtu``).
    MTU:     what fits ``mtu``: L3 length of every segment <= mtu.
    """

    OPTION = "option"
    SYN = "syn"
    OWN_SYN = "own_syn"
    RECORDED = "recorded"
    LARGEST = "largest"
    MTU = "mtu"
