"""Named reasons: why an aggregate was completed, why a packet passed.

The kernel ORs anonymous bits into NAPI_GRO_CB(skb)->flush; pcapgro names
each condition so statistics can count them and tests can assert them.
Where several conditions hold at once, the first in the kernel's order of
evaluation (tcp_gro_receive, then the final check) is reported.
"""

import enum

__all__ = ["Flush", "Pass"]


class Flush(str, enum.Enum):
    """Why a held aggregate was completed (net/ipv4/tcp_offload.c
    tcp_gro_receive and net/core/gro.c unless stated)."""

    CWR = "cwr"                        # new segment has CWR (6.18 flushes)
    FLAGS_CHANGED = "flags_changed"    # TCP flags other than FIN/PSH differ
    HEADER_LEN_CHANGED = "header_len_changed"  # TCP data offset differs
    WINDOW_CHANGED = "window_changed"  # advertised window differs
    ACK_CHANGED = "ack_changed"        # ack_seq differs
    OPTIONS_CHANGED = "options_changed"  # some TCP option byte differs
    TTL_CHANGED = "ttl_changed"        # IPv4 TTL / IPv6 hop limit differs
    TOS_CHANGED = "tos_changed"        # IPv4 TOS / IPv6 traffic class differs
    DF_CHANGED = "df_changed"          # IPv4 DF bit differs
    IP_ID = "ip_id"                    # IPv4 ID neither incrementing nor fixed
    OUTER_TTL_CHANGED = "outer_ttl_changed"  # a tunnel's outer TTL / hop limit
    OUTER_TOS_CHANGED = "outer_tos_changed"  # outer TOS / traffic class
    OUTER_DF_CHANGED = "outer_df_changed"    # outer IPv4 DF bit
    OUTER_IP_ID = "outer_ip_id"        # outer IPv4 ID neither incrementing nor fixed
    MSS_EXCEEDED = "mss_exceeded"      # new segment longer than gso_size
    PURE_ACK = "pure_ack"              # new segment carries no payload
    SEQ_GAP = "seq_gap"                # sequence number not contiguous
    L3_FLUSH = "l3_flush"              # new packet flagged flush at L3 (length
                                       # mismatch: padding, trailer; evil bit)
    SIZE_LIMIT = "size_limit"          # aggregate would reach gro_max_size
                                       # (fraglist: 65536 with every header)
    SEGMENT_LIMIT = "segment_limit"    # 64 segments (UDP, TCP fraglist)
    LONGER_DATAGRAM = "longer_datagram"  # UDP datagram longer than the first
    SHORT_DATAGRAM = "short_datagram"  # merged a shorter last UDP datagram
    MODE_CHANGED = "mode_changed"      # fraglist vs standard differ
    CSUM_STATE = "csum_state"          # fraglist: ip_summed differs
    PSH = "psh"                        # merged a PSH segment: completed
    FIN = "fin"                        # merged a FIN segment
    URG = "urg"
    RST = "rst"
    SYN = "syn"
    SHORT_SEGMENT = "short_segment"    # merged a segment shorter than mss
    BUCKET_FULL = "bucket_full"        # 9th flow in a bucket: oldest completed
    POLL_END = "poll_end"              # NAPI poll ended (napi_complete_done)
    BUDGET = "budget"                  # poll used its whole budget
    FLUSH_TIMEOUT = "flush_timeout"    # gro_flush_timeout timer fired
    END_OF_INPUT = "end_of_input"      # the capture ended
    SECTION_END = "section_end"        # a new pcapng section began


class Pass(str, enum.Enum):
    """Why a packet was passed up unchanged without being held."""

    NOT_IP = "not_ip"                  # no IPv4/IPv6 reachable (ARP, ...)
    NO_HANDLER = "no_handler"          # protocol without GRO handler here
    IP_OPTIONS = "ip_options"          # IPv4 header not 0x45
    FRAGMENT = "fragment"              # IPv4 MF/offset, IPv6 Fragment header
    EXT_HEADER = "ext_header"          # IPv6 extension header GRO can't walk
    BAD_IP_CSUM = "bad_ip_csum"
    BAD_TCP_CSUM = "bad_tcp_csum"
    TRUNCATED = "truncated"            # header cut short (caplen)
    BAD_TCP_HEADER = "bad_tcp_header"  # data offset < 5 or beyond the packet
    L3_FLUSH = "l3_flush"              # length mismatch / evil bit: flushed
    PURE_ACK = "pure_ack"              # no payload: never held
    FLAGS = "flags"                    # PSH/URG/RST/SYN/FIN: never held alone
    NO_UDP_GRO = "no_udp_gro"          # UDP with no GRO path (default)
    UDP_ZERO_CSUM = "udp_zero_csum"    # UDP checksum 0: never coalesced
    UDP_LENGTH = "udp_length"          # UDP length <= 8 or != bytes present
    BAD_UDP_CSUM = "bad_udp_csum"
    MODE_CHANGED = "mode_changed"      # flushed: fraglist vs standard differ
    CSUM_STATE = "csum_state"          # fraglist: ip_summed differs from held
    TUNNEL_NESTED = "tunnel_nested"    # a second tunnel level (encap_mark set)
    TUNNEL_INNER = "tunnel_inner_no_handler"  # inner EtherType without a GRO handler
    GRE_FLAGS = "gre_flags"            # GRE version != 0, or S/R/other flag bits
    BAD_GRE_CSUM = "bad_gre_csum"      # GRE checksum (C bit) wrong
    GENEVE_HEADER = "geneve_header"    # Geneve version != 0, or the OAM bit
