"""Every GRO rule, listed once: its name, the reason it is counted under,
the kernel function it mirrors and the module holding the reference check.

The list is data for the tests (tests/test_rule_list.py runs each rule
through the reference path and the compiled core, and checks the compiled
core's reason codes against it) and for readers: one place that says which
kernel function decides what.  Kernel functions are Linux 6.18's.
"""

from typing import NamedTuple, Union

from .flush import Flush, Pass

__all__ = ["Rule", "RULES", "by_reason"]


class Rule(NamedTuple):
    """One named GRO check.

    Attributes:
        name:   dotted name, "<module>.<check>".
        reason: the Flush (a held aggregate completed) or Pass (a packet
                handed up unheld) value the statistics count it under.
        kernel: the kernel function (file) that makes the decision.
        module: the pcapgro.gro module holding the reference check.
    """

    name: str
    reason: Union[Flush, Pass]
    kernel: str
    module: str


def _r(name, reason, kernel):
    return Rule(name, reason, kernel, name.split(".")[0])


RULES = (
    # link layer and network layer, before flow matching (rejected: pass)
    _r("engine.not_ip", Pass.NOT_IP, "dev_gro_receive: no packet_offload (net/core/gro.c)"),
    _r("engine.no_vlan_handler", Pass.NO_HANDLER, "vlan_gro_receive absent without "
       "CONFIG_VLAN_8021Q (net/8021q/vlan_core.c)"),
    _r("ipv4.no_handler", Pass.NO_HANDLER, "inet_gro_receive: no inet_offloads[proto] "
       "(net/ipv4/af_inet.c)"),
    _r("ipv4.options", Pass.IP_OPTIONS, "inet_gro_receive: *(u8 *)iph != 0x45"),
    _r("ipv4.fragment", Pass.FRAGMENT, "inet_gro_receive: ip_is_fragment"),
    _r("ipv4.bad_header_csum", Pass.BAD_IP_CSUM, "inet_gro_receive: ip_fast_csum"),
    _r("ipv4.truncated", Pass.TRUNCATED, "inet_gro_receive: skb_gro_header"),
    _r("ipv6.ext_header", Pass.EXT_HEADER, "ipv6_gro_receive: ipv6_gso_pull_exthdrs "
       "(net/ipv6/ip6_offload.c)"),
    _r("ipv6.fragment", Pass.FRAGMENT, "ipv6_gro_receive: no inet6_offloads[NEXTHDR_FRAGMENT]"),
    _r("ipv4.l3_flush", Pass.L3_FLUSH, "inet_gro_receive: tot_len != skb_gro_len, IP_CE "
       "reserved bit (NAPI_GRO_CB(skb)->flush)"),
    # checksums (L4 receive)
    _r("csum.bad_tcp", Pass.BAD_TCP_CSUM, "tcp4_gro_receive: skb_gro_checksum_validate "
       "(net/ipv4/tcp_offload.c)"),
    _r("csum.bad_udp", Pass.BAD_UDP_CSUM, "udp4_gro_receive: skb_gro_checksum_validate_zero_check "
       "(net/ipv4/udp_offload.c)"),
    # TCP (net/ipv4/tcp_offload.c tcp_gro_receive)
    _r("tcp.bad_header", Pass.BAD_TCP_HEADER, "tcp_gro_pull_header: thlen < sizeof(*th)"),
    _r("tcp.pure_ack_passed", Pass.PURE_ACK, "tcp_gro_receive: out_check_final, len == 0"),
    _r("tcp.flags_passed", Pass.FLAGS, "tcp_gro_receive: out_check_final, TCP_FLAG_URG|PSH|"
       "RST|SYN|FIN"),
    _r("tcp.cwr", Flush.CWR, "tcp_gro_receive: flush = tcp_flag_word(th) & TCP_FLAG_CWR"),
    _r("tcp.flags_changed", Flush.FLAGS_CHANGED, "tcp_gro_receive: (flags ^ th2 flags) & "
       "~(TCP_FLAG_FIN | TCP_FLAG_PSH)"),
    _r("tcp.header_len_changed", Flush.HEADER_LEN_CHANGED, "tcp_gro_receive: flag word "
       "(data offset) differs"),
    _r("tcp.window_changed", Flush.WINDOW_CHANGED, "tcp_gro_receive: th->window != th2->window"),
    _r("tcp.ack_changed", Flush.ACK_CHANGED, "tcp_gro_receive: th->ack_seq ^ th2->ack_seq"),
    _r("tcp.options_changed", Flush.OPTIONS_CHANGED, "tcp_gro_receive: option bytes differ"),
    _r("network.ttl_changed", Flush.TTL_CHANGED, "inet_gro_flush / ipv6_gro_flush: ttl, "
       "hop_limit (include/net/gro.h)"),
    _r("network.tos_changed", Flush.TOS_CHANGED, "inet_gro_flush / ipv6_gro_flush: tos, "
       "traffic class"),
    _r("network.df_changed", Flush.DF_CHANGED, "inet_gro_flush: (iph->frag_off ^ iph2->frag_off) "
       "& htons(IP_DF)"),
    _r("network.ip_id", Flush.IP_ID, "inet_gro_flush: ID neither incrementing nor fixed"),
    _r("tcp.mss_exceeded", Flush.MSS_EXCEEDED, "tcp_gro_receive: (len - 1) >= mss"),
    _r("tcp.pure_ack", Flush.PURE_ACK, "tcp_gro_receive: len == 0 (unsigned len - 1 >= mss)"),
    _r("tcp.seq_gap", Flush.SEQ_GAP, "tcp_gro_receive: ntohl(th2->seq) + skb_gro_len(p) ^ "
       "ntohl(th->seq)"),
    _r("tcp.l3_flush", Flush.L3_FLUSH, "tcp_gro_receive: NAPI_GRO_CB(skb)->flush"),
    _r("tcp.size_limit", Flush.SIZE_LIMIT, "skb_gro_receive: p->len + len >= gro_max_size "
       "(net/core/gro.c)"),
    _r("tcp.psh", Flush.PSH, "tcp_gro_receive: out_check_final, TCP_FLAG_PSH"),
    _r("tcp.fin", Flush.FIN, "tcp_gro_receive: out_check_final, TCP_FLAG_FIN"),
    _r("tcp.urg", Flush.URG, "tcp_gro_receive: out_check_final, TCP_FLAG_URG"),
    _r("tcp.rst", Flush.RST, "tcp_gro_receive: out_check_final, TCP_FLAG_RST"),
    _r("tcp.syn", Flush.SYN, "tcp_gro_receive: out_check_final, TCP_FLAG_SYN"),
    _r("tcp.short_segment", Flush.SHORT_SEGMENT, "tcp_gro_receive: out_check_final, len < mss"),
    _r("tcp.fraglist_flags", Flush.FLAGS_CHANGED, "tcp_gro_receive (fraglist): "
       "tcp_flag_word differs (FIN/PSH included)"),
    _r("tcp.fraglist_csum_state", Flush.CSUM_STATE, "tcp_gro_receive (fraglist): "
       "skb->ip_summed != p->ip_summed"),
    _r("tcp.fraglist_segment_limit", Flush.SEGMENT_LIMIT, "skb_gro_receive_list: "
       "NAPI_GRO_CB(p)->count >= 64 (MAX_SKB_FRAGS)"),
    _r("tcp.fraglist_size_limit", Flush.SIZE_LIMIT, "skb_gro_receive_list: p->len + skb "
       "headers >= 65536"),
    # UDP (net/ipv4/udp_offload.c udp_gro_receive, udp_gro_receive_segment)
    _r("udp.no_gro", Pass.NO_UDP_GRO, "udp_gro_receive: no UDP_GRO socket, no "
       "NETIF_F_GRO_UDP_FWD / NETIF_F_GRO_FRAGLIST"),
    _r("udp.zero_csum", Pass.UDP_ZERO_CSUM, "udp_gro_receive_segment: !uh->check"),
    _r("udp.length", Pass.UDP_LENGTH, "udp_gro_receive_segment: ulen <= sizeof(*uh) || ulen "
       "!= skb_gro_len"),
    _r("udp.truncated", Pass.TRUNCATED, "udp_gro_udphdr: header not in the packet"),
    _r("udp.mode_changed", Flush.MODE_CHANGED, "udp_gro_receive_segment: "
       "NAPI_GRO_CB(skb)->is_flist != NAPI_GRO_CB(p)->is_flist"),
    _r("udp.mode_changed_passed", Pass.MODE_CHANGED, "udp_gro_receive_segment: the datagram "
       "after a mode change (flush = 1)"),
    _r("udp.csum_state", Pass.CSUM_STATE, "udp_gro_receive_segment (fraglist): ip_summed "
       "differs"),
    _r("udp.longer_datagram", Flush.LONGER_DATAGRAM, "udp_gro_receive_segment: ulen > "
       "ntohs(uh2->len)"),
    _r("udp.short_datagram", Flush.SHORT_DATAGRAM, "udp_gro_receive_segment: ulen != "
       "ntohs(uh2->len) after merging"),
    _r("udp.segment_limit", Flush.SEGMENT_LIMIT, "udp_gro_receive_segment: "
       "NAPI_GRO_CB(p)->count >= UDP_GRO_CNT_MAX"),
    _r("udp.size_limit", Flush.SIZE_LIMIT, "skb_gro_receive: p->len + len >= "
       "min(gro_max_size, 65536)"),
    _r("udp.l3_flush", Flush.L3_FLUSH, "udp_gro_receive_segment: NAPI_GRO_CB(skb)->flush"),
    # tunnels (one level: encap_mark), outer IP level (include/net/gro.h)
    _r("tunnel.nested", Pass.TUNNEL_NESTED, "ipip_gro_receive / gre_gro_receive / "
       "udp_gro_receive: NAPI_GRO_CB(skb)->encap_mark already set"),
    _r("tunnel.inner_no_handler", Pass.TUNNEL_INNER, "eth_gro_receive / gre_gro_receive / "
       "geneve_gro_receive: gro_find_receive_by_type(type) == NULL"),
    _r("tunnel.outer_ttl_changed", Flush.OUTER_TTL_CHANGED, "gro_receive_network_flush: "
       "inet_gro_flush / ipv6_gro_flush on network_offsets[0]"),
    _r("tunnel.outer_tos_changed", Flush.OUTER_TOS_CHANGED, "gro_receive_network_flush: "
       "outer tos / traffic class"),
    _r("tunnel.outer_df_changed", Flush.OUTER_DF_CHANGED, "gro_receive_network_flush: "
       "outer (frag_off ^ frag_off2) & IP_DF"),
    _r("tunnel.outer_ip_id", Flush.OUTER_IP_ID, "inet_gro_flush (outer): ID neither "
       "incrementing nor fixed (ip_fixedid bit 0, 6.18)"),
    _r("tunnel.outer_flush_inner_csum", Flush.L3_FLUSH, "tcp4_gro_receive / udp4_gro_receive: "
       "no skb_gro_checksum_validate when NAPI_GRO_CB(skb)->flush, which the outer level's "
       "inet_gro_receive set (a bad inner checksum completes the flow, as seen on 6.18)"),
    _r("vxlan.bad_outer_udp_csum", Pass.BAD_UDP_CSUM, "udp4_gro_receive: "
       "skb_gro_checksum_validate_zero_check (nonzero outer checksum)"),
    _r("vxlan.truncated", Pass.TRUNCATED, "vxlan_gro_prepare_receive: skb_gro_header"),
    _r("geneve.header", Pass.GENEVE_HEADER, "geneve_gro_receive: gh->ver != GENEVE_VER || "
       "gh->oam (drivers/net/geneve.c)"),
    _r("gre.flags", Pass.GRE_FLAGS, "gre_gro_receive: greh->flags & ~(GRE_KEY | GRE_CSUM) "
       "(net/ipv4/gre_offload.c)"),
    _r("gre.bad_csum", Pass.BAD_GRE_CSUM, "gre_gro_receive: skb_gro_checksum_simple_validate"),
    # the engine core (net/core/gro.c, net/core/dev.c)
    _r("core.bucket_full", Flush.BUCKET_FULL, "dev_gro_receive: gro_flush_oldest "
       "(MAX_GRO_SKBS 8)"),
    _r("core.poll_end", Flush.POLL_END, "napi_complete_done: gro_flush_normal"),
    _r("core.budget", Flush.BUDGET, "__napi_poll: budget exhausted, gro_flush_normal"),
    _r("core.flush_timeout", Flush.FLUSH_TIMEOUT, "napi_watchdog (gro_flush_timeout hrtimer)"),
    _r("core.end_of_input", Flush.END_OF_INPUT, "(pcapgro) the capture ended"),
    _r("core.section_end", Flush.SECTION_END, "(pcapgro) a new pcapng section began"),
)


def by_reason(reason):
    """The rules counted under Flush/Pass ``reason`` (tuple of Rule)."""
    return tuple(r for r in RULES if r.reason == reason)
