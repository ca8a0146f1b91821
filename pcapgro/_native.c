/*
 * pcapgro._native: compiled fast paths (optional; each has a Python twin).
 *
 *   Engine      the GRO fast path for classic pcap and pcapng chunks
 *               (below; used by pcapgro/gro/cfast.py)
 *   records()   the record walk of a classic pcap chunk (the loop of
 *               PcapReader._chunks in pcapgro/capture/pcap.py)
 *   epbs()      the walk of a run of enhanced packet blocks of one
 *               interface (PcapngReader._epb_run in capture/pcapng.py)
 *   buffer()    a bytearray whose bytes are not zeroed first (input chunks
 *               are filled by readinto right away)
 *   restore_rows()  the per-segment part of a restore record (the row
 *               encoding of pcapgro/restore.py encode_rows; pcapng output)
 *
 * The GRO engine:
 * What it is.  The kernel inlines its GRO fast path (dev_gro_receive ->
 * inet_gro_receive -> tcp4_gro_receive) because call depth costs cycles;
 * in CPython every per-packet statement costs ~50 ns, so pcapgro keeps the
 * common case -- Ethernet (any number of VLAN tags) / IPv4 (no options, no
 * fragment) or IPv6 (extension headers walked) / TCP or UDP,
 * directly or inside one tunnel level (IPIP, SIT, IP4IP6, IP6IP6, GRE,
 * VXLAN, Geneve), and the packets GRO passes up unchanged before flow
 * matching (ARP, ICMP, fragments, bad checksums...) -- in C as one flat
 * loop over the records of an input chunk (classic pcap records, or a
 * run of pcapng EPBs of one interface: PcapngReader's EpbChunk), reading
 * them in place and writing the output records (pass-through packets and
 * built aggregates) into one buffer: classic pcap records (in the input's
 * format, or the one output() gives), or pcapng EPBs on the input's
 * interface (with annotated output's comments, flags and restore records:
 * _annotate.h).  Each record goes through two steps: its header
 * (pcap_header or epb_header: frame and time), then its frame
 * (parse_frame: link layer, IP, [tunnel, inner IP,] TCP / UDP).  The Python engine
 * (pcapgro/gro/engine.py, the reference) stays in charge of everything
 * else: this loop stops at the first record it
 * does not handle and hands the aggregates it holds to the Python engine
 * (Engine.release), which continues from there.
 *
 * The rules are those of the Python reference, which mirrors Linux 6.18:
 *   net/core/gro.c       dev_gro_receive, gro_flush_oldest, __gro_flush,
 *                        gro_complete; bucket = hash & 7, at most 8 each
 *   net/core/gro.c       dev_gro_receive: no packet_offload (not IP)
 *   net/ipv4/af_inet.c   inet_gro_receive (reject options, fragments, bad
 *                        header checksum, protocols without a handler;
 *                        L3 flush on a length mismatch or the reserved
 *                        bit), inet_gro_complete (total length,
 *                        header checksum; 0 above 65535 = BIG TCP)
 *   net/ipv4/tcp_offload.c tcp_gro_receive (flush on CWR, flag word but
 *                        FIN/PSH, ack, options, mss, seq; final check on
 *                        short segment and URG/PSH/RST/SYN/FIN),
 *                        tcp4_gro_complete
 *   include/net/gro.h    inet_gro_flush (TTL, TOS, DF, IPv4 ID
 *                        incrementing or fixed, decided at the 2nd segment)
 *   net/ipv4/udp_offload.c udp_gro_receive_segment (UDP length, longer
 *                        datagram, size within 65536, 64 datagrams, a
 *                        shorter one ends the aggregate), udp_gro_complete
 *   net/ipv6/ip6_offload.c, tcpv6_offload.c, udpv6 (IPv6 twins;
 *                        ipv6_gro_complete's jumbo header for BIG TCP)
 *   tunnels, one level (encap_mark; pcapgro/gro/encap.py and the modules
 *   below): net/ipv4/af_inet.c ipip_gro_receive / ipip_gro_complete,
 *   net/ipv6/ip6_offload.c sit_ip6ip6_gro_receive / ip4ip6_gro_receive
 *   (ipip.py), net/ipv4/gre_offload.c gre_gro_receive (gre.py: version 0,
 *   K and C only, the checksum verified), net/ipv4/udp_offload.c
 *   udp_gro_receive's tunnel branch with drivers/net/vxlan/vxlan_core.c
 *   vxlan_gro_receive and drivers/net/geneve.c geneve_gro_receive
 *   (udp_tunnel.py, on the configured ports), net/ethernet/eth.c
 *   eth_gro_receive for an inner Ethernet header; gro_receive_network_flush
 *   on both IP levels (outer_* reasons); completion of both levels
 *   net/core/gro.c       skb_gro_receive_list and the fraglist branches of
 *                        tcp_gro_receive / udp_gro_receive_segment (rx-gro-list:
 *                        the whole flag word, ip_summed, 64 packets, 65536
 *                        bytes with every header; checksum of the first kept)
 * and the NAPI models of engine.py: the gap model (a poll ends at an
 * arrival gap > poll_gap_ns, or after napi_budget packets) or the work
 * model (gro/napi.py PollClock: work_clock, its state carried to and from
 * the Python engine with each run; net/core/dev.c __napi_poll,
 * napi_complete_done, drivers/net/veth.c veth_poll, the delivery of the
 * gro_normal_batch list); at a budget end (__napi_poll) the budget flush,
 * old packets only when hz >= 1000; at a poll end every held packet is
 * completed, bucket 0..7, oldest first, or with gro_flush_timeout only
 * those from an older jiffy, the rest when the timer fires before the
 * next packet (napi_complete_done).  Poll ends that find packets held are
 * counted by their arrival gap, and packets where a poll start would move
 * with the timing x2 / x0.5 (napi.py PollShifts: two more clocks, or the
 * gap doubled and halved) while packets are held (timing_stats()).
 *
 * A record is handled here when: its record header is one the loop reads
 * (captured <= original length; an EPB: the chunk's interface, a time the
 * output holds; its options, if any, kept as the reference writes them:
 * _annotate.h ng_meta_opts, or the restore record's m= of a merged
 * segment), and its
 * frame is either
 *   - passed up unchanged before flow matching, as the reference passes
 *     it (parse_frame, seg_csum; reasons of pcapgro/gro/flush.py Pass):
 *     no IPv4 / IPv6 reachable (not_ip: ARP, a frame cut short, ...),
 *     VLAN-tagged without VLAN GRO or an IP protocol without a GRO handler
 *     (no_handler: ICMP, ...), IPv4 options, IPv4 fragments or an IPv6
 *     Fragment header, an IPv6 extension header GRO cannot walk, a bad
 *     IPv4 header checksum, a header cut short (truncated), a TCP data
 *     offset below 5, a bad TCP / UDP checksum (when verified); such a
 *     packet counts in the NAPI poll and leaves what is held as it is;
 *   - or a segment: Ethernet with any number of VLAN tags (0x8100 /
 *     0x88a8, when VLAN GRO is on; the whole tag stack compared within a
 *     flow), Linux cooked (SLL, SLL2), raw IP or BSD
 *     loopback (NULL, LOOP), then IPv4 (header 0x45, TCP or UDP) or IPv6
 *     (Hop-by-Hop, Routing and Destination Options headers walked, any
 *     number of bytes of them, compared within a flow; an aggregate's payload
 *     length above 65535, BIG TCP, gets a jumbo Hop-by-Hop header as 6.18
 *     inserts it: ipv6_jumbo), then TCP or UDP
 *     (fraglist with --fraglist, else standard GRO with --udp gro, else
 *     passed; with --fraglist a flow to a --local-port takes standard GRO:
 *     TCP always, UDP with --udp gro).  An IP length other
 *     than the bytes on the wire or the IPv4 reserved bit set the L3 flush
 *     (never held; completes its flow's aggregate: l3_flush); a UDP
 *     checksum 0 or a UDP length other than the bytes present pass at UDP
 *     (udp_zero_csum, udp_length).  With checksums verified, a good TCP /
 *     UDP checksum or the pseudo-header seed of a sender's
 *     CHECKSUM_PARTIAL packet (trusted, as pcapgro/gro/csum.py) is taken;
 *     an L3 flush or a UDP checksum 0 is not summed (counted skipped).
 *     A segment cut by a snaplen (captured < original length) counts its
 *     lengths from the original length, is not summed (skipped_truncated)
 *     and its aggregate keeps the payload up to the end of the first cut
 *     segment (the rest counted as left out), with the pseudo-header seed
 *     for a checksum (payload.payloads, complete.build).
 *   - or, inside one tunnel level (an IP protocol whose GRO handler is
 *     not TCP / UDP: inet_handlers, or UDP to a VXLAN / Geneve port;
 *     rx_tunnel), an outer IP level taken as the segment's above (its
 *     passes, its L3 flush, a snaplen cut), carrying IPIP / SIT / IP4IP6 /
 *     IP6IP6, GRE or UDP to a VXLAN / Geneve port, then an inner IP level
 *     and TCP or UDP taken the same way (an inner Ethernet header with any
 *     number of tags; the L3 flush of either level; a cut anywhere); or a
 *     tunnelled packet the reference passes unmerged (a header cut short,
 *     a second tunnel level, GRE flags, a Geneve version / OAM, an inner
 *     EtherType or protocol without a handler, inner IP options or
 *     fragments, a bad GRE, outer UDP or inner checksum).
 * Anything else ends the run: a tunnel's headers beyond HDRMAX or its
 * outer bytes beyond TKEYMAX, three or more VLAN tags or over 256 bytes of
 * IPv6 extension headers before a tunnel.
 *
 * Checksums are one's-complement sums kept mod 0xFFFF (RFC 1071, RFC 1624),
 * with the edge cases of pcapgro/checksum.py (fold, checksum).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>

#include "_annotate.h"      /* pcapng output: restore records, EPB options */

#define NBUCKETS 8          /* GRO_HASH_BUCKETS */
#define MAXPER 8            /* MAX_GRO_SKBS */
#define MAXHELD (NBUCKETS * MAXPER)
#define MAXTAGS 2           /* VLAN tags of a tunnelled frame handled here
                               (802.1Q / 802.1ad; any number otherwise) */
#define L3MAX (14 + 4 * MAXTAGS)    /* link header bytes in a flow key (find
                                       compares the rest of a longer one) */
#define JUMBO_HBH 8         /* the Hop-by-Hop jumbo header of IPv6 BIG TCP */
#define EXTMAX 256          /* bytes of IPv6 extension headers handled in a
                               tunnelled frame (any number otherwise) */
#define HDRMAX 1024         /* headers up to the payload held in place: a
                               tunnel's two levels at most (rx_tunnel
                               checks); a longer header (VLAN tags, IPv6
                               extension headers) grows Agg.hdr */
#define KEYMAX 72           /* MAC header (up to L3MAX bytes), [IPv6 word
                               0], addresses, ports, [IPv6 extension header
                               length, 4 bytes]; the last byte: the tunnel
                               kind */
#define TKEYMAX 640         /* a tunnel's outer bytes compared within a flow */
#define NREFS 64            /* payloads referred to in place, per aggregate */
#define UDP_GRO_CNT_MAX 64  /* datagrams per UDP aggregate */
#define TCP_FRAGLIST_MAX 64 /* segments per TCP fraglist aggregate */
/* tunnel kinds (pcapgro/gro/seg.py Outer.kind); T_NONE: not tunnelled */
enum { T_NONE, T_IPIP, T_SIT, T_IP4IP6, T_IP6IP6, T_GRE, T_VXLAN, T_GENEVE, T_N };
/* aggregate kinds (GROStats.by_kind), named by KIND_NAMES: the four of
 * pcapgro/gro/stats.py KINDS, then "<tunnel>_tcp", "<tunnel>_udp" per
 * tunnel kind (core.py NAPI.complete) */
enum { K_TCP, K_TCP_FRAGLIST, K_UDP, K_UDP_FRAGLIST, K_TUN0, K_N = K_TUN0 + 2 * (T_N - 1) };
static const char *const KIND_NAMES[] = {
    "tcp", "tcp_fraglist", "udp", "udp_fraglist", "ipip_tcp", "ipip_udp", "sit_tcp",
    "sit_udp", "ip4ip6_tcp", "ip4ip6_udp", "ip6ip6_tcp", "ip6ip6_udp", "gre_tcp", "gre_udp",
    "vxlan_tcp", "vxlan_udp", "geneve_tcp", "geneve_udp"};
/* the annotated aggregate's comment names them (complete.py _tunnelled) */
static const char *const KIND_NOTES[] = {
    "TCP", "fraglist TCP", "UDP", "fraglist UDP", "IPIP/TCP", "IPIP/UDP", "SIT/TCP",
    "SIT/UDP", "IP4IP6/TCP", "IP4IP6/UDP", "IP6IP6/TCP", "IP6IP6/UDP", "GRE/TCP", "GRE/UDP",
    "VXLAN/TCP", "VXLAN/UDP", "GENEVE/TCP", "GENEVE/UDP"};
_Static_assert(sizeof KIND_NAMES / sizeof *KIND_NAMES == K_N, "a name per kind");
_Static_assert(sizeof KIND_NOTES / sizeof *KIND_NOTES == K_N, "a note per kind");
#define GRO_LEGACY_MAX_SIZE 65536   /* UDP aggregates never grow beyond it */

/* Flush reason codes; FLUSH_NAMES (exported as _native.FLUSH_NAMES, from
 * which pcapgro/gro/cfast.py builds FLUSH_CODES) names them: the values of
 * pcapgro.gro.flush.Flush */
enum {
    F_CWR, F_FLAGS_CHANGED, F_HEADER_LEN_CHANGED, F_WINDOW_CHANGED,
    F_ACK_CHANGED, F_OPTIONS_CHANGED, F_TTL_CHANGED, F_TOS_CHANGED,
    F_DF_CHANGED, F_IP_ID, F_OUTER_TTL_CHANGED, F_OUTER_TOS_CHANGED,
    F_OUTER_DF_CHANGED, F_OUTER_IP_ID, F_MSS_EXCEEDED, F_PURE_ACK, F_SEQ_GAP,
    F_SIZE_LIMIT, F_PSH, F_FIN, F_URG, F_RST, F_SYN, F_SHORT_SEGMENT,
    F_BUCKET_FULL, F_POLL_END, F_LONGER_DATAGRAM, F_SHORT_DATAGRAM, F_SEGMENT_LIMIT,
    F_CSUM_STATE, F_BUDGET, F_FLUSH_TIMEOUT, F_L3_FLUSH, F_N
};
/* Pass reason codes; named by PASS_NAMES (pcapgro.gro.flush.Pass values) */
enum { P_PURE_ACK, P_FLAGS, P_NO_UDP_GRO, P_UDP_LENGTH, P_CSUM_STATE,
       /* passed before flow matching (parse_frame, seg_csum) */
       P_NOT_IP, P_NO_HANDLER, P_IP_OPTIONS, P_FRAGMENT, P_EXT_HEADER, P_BAD_IP_CSUM,
       P_BAD_TCP_CSUM, P_BAD_UDP_CSUM, P_TRUNCATED, P_BAD_TCP_HEADER, P_L3_FLUSH,
       P_UDP_ZERO_CSUM,
       /* tunnels (rx_tunnel) */
       P_TUNNEL_NESTED, P_TUNNEL_INNER, P_GRE_FLAGS, P_GENEVE_HEADER, P_BAD_GRE_CSUM, P_N };

static const char *const FLUSH_NAMES[] = {
    [F_CWR] = "cwr", [F_FLAGS_CHANGED] = "flags_changed",
    [F_HEADER_LEN_CHANGED] = "header_len_changed", [F_WINDOW_CHANGED] = "window_changed",
    [F_ACK_CHANGED] = "ack_changed", [F_OPTIONS_CHANGED] = "options_changed",
    [F_TTL_CHANGED] = "ttl_changed", [F_TOS_CHANGED] = "tos_changed",
    [F_DF_CHANGED] = "df_changed", [F_IP_ID] = "ip_id",
    [F_OUTER_TTL_CHANGED] = "outer_ttl_changed", [F_OUTER_TOS_CHANGED] = "outer_tos_changed",
    [F_OUTER_DF_CHANGED] = "outer_df_changed", [F_OUTER_IP_ID] = "outer_ip_id",
    [F_MSS_EXCEEDED] = "mss_exceeded",
    [F_PURE_ACK] = "pure_ack", [F_SEQ_GAP] = "seq_gap", [F_SIZE_LIMIT] = "size_limit",
    [F_PSH] = "psh", [F_FIN] = "fin", [F_URG] = "urg", [F_RST] = "rst", [F_SYN] = "syn",
    [F_SHORT_SEGMENT] = "short_segment", [F_BUCKET_FULL] = "bucket_full",
    [F_POLL_END] = "poll_end", [F_LONGER_DATAGRAM] = "longer_datagram",
    [F_SHORT_DATAGRAM] = "short_datagram", [F_SEGMENT_LIMIT] = "segment_limit",
    [F_CSUM_STATE] = "csum_state", [F_BUDGET] = "budget",
    [F_FLUSH_TIMEOUT] = "flush_timeout", [F_L3_FLUSH] = "l3_flush",
};
static const char *const PASS_NAMES[] = {[P_PURE_ACK] = "pure_ack", [P_FLAGS] = "flags",
                                         [P_NO_UDP_GRO] = "no_udp_gro",
                                         [P_UDP_LENGTH] = "udp_length",
                                         [P_CSUM_STATE] = "csum_state",
                                         [P_NOT_IP] = "not_ip", [P_NO_HANDLER] = "no_handler",
                                         [P_IP_OPTIONS] = "ip_options",
                                         [P_FRAGMENT] = "fragment",
                                         [P_EXT_HEADER] = "ext_header",
                                         [P_BAD_IP_CSUM] = "bad_ip_csum",
                                         [P_BAD_TCP_CSUM] = "bad_tcp_csum",
                                         [P_BAD_UDP_CSUM] = "bad_udp_csum",
                                         [P_TRUNCATED] = "truncated",
                                         [P_BAD_TCP_HEADER] = "bad_tcp_header",
                                         [P_L3_FLUSH] = "l3_flush",
                                         [P_UDP_ZERO_CSUM] = "udp_zero_csum",
                                         [P_TUNNEL_NESTED] = "tunnel_nested",
                                         [P_TUNNEL_INNER] = "tunnel_inner_no_handler",
                                         [P_GRE_FLAGS] = "gre_flags",
                                         [P_GENEVE_HEADER] = "geneve_header",
                                         [P_BAD_GRE_CSUM] = "bad_gre_csum"};
_Static_assert(sizeof FLUSH_NAMES / sizeof *FLUSH_NAMES == F_N, "a name per flush code");
_Static_assert(sizeof PASS_NAMES / sizeof *PASS_NAMES == P_N, "a name per pass code");

#define TH_FIN 0x01
#define TH_SYN 0x02
#define TH_RST 0x04
#define TH_PSH 0x08
#define TH_URG 0x20
#define TH_CWR 0x80
#define TH_FINAL (TH_URG | TH_PSH | TH_RST | TH_SYN | TH_FIN)

/* a tunnelled packet's outer level (pcapgro/gro/seg.py Outer: what
 * NAPI_GRO_CB keeps of it with encap_mark set) */
typedef struct {
    int kind;               /* T_*; T_NONE: not tunnelled (then only l3 is set) */
    int v6;                 /* outer IPv6 (else IPv4) */
    uint32_t l3;            /* outer IP header (network_offsets[0]) */
    uint32_t toff;          /* UDP / GRE header; IP-in-IP: the inner IP header */
    uint32_t csum_at;       /* outer checksum rewritten at completion (UDP when
                               nonzero, GRE with C), 0 = none */
    uint32_t tosttl, df, ipid;   /* the outer IP fields inet_gro_flush compares */
    uint32_t klen;          /* bytes of key */
    uint8_t key[TKEYMAX];   /* outer_id + the tunnel header's same-flow bytes +
                               the inner MAC header (encap.py inner_receive) */
} Tun;

typedef struct {
    uint8_t key[KEYMAX];    /* flow key (seg_fields), zero-padded */
    uint64_t khash;
    uint32_t hash;          /* flow hash (bucket = hash & 7) */
    uint8_t *hdr;           /* the head's frame up to its payload (hcap */
    size_t hcap;            /* bytes, at least HDRMAX; malloc'ed by hold) */
    uint32_t hlen;          /* bytes of hdr (up to the payload) */
    uint32_t l3;            /* network header offset (link header + 4 per tag) */
    uint32_t l4;            /* TCP / UDP header offset */
    uint32_t tags;          /* in-band VLAN tags (Ethernet) */
    int v6;                 /* IPv6 (else IPv4) */
    int udp;                /* UDP (else TCP) */
    int flist, partial;     /* fraglist; the head's checksum field held the seed */
    int64_t head_ts, head_idx, age;
    uint8_t *pay;           /* payloads copied (head first), paylen bytes */
    size_t paylen, paycap;
    struct { const uint8_t *p; uint32_t n; } refs[NREFS];
    int nrefs;              /* then payloads still in the input chunk */
    size_t reflen;
    uint32_t head_L, count, mss, seq_next, size, word, ack, ipid;
    /* a segment cut by a snaplen (payload.payloads): the payload is kept
     * up to the end of the first cut one; left: captured payload bytes of
     * later segments, left out.  head_cl: the head's captured payload */
    int cut;
    uint32_t head_cl;
    uint64_t left;
    uint32_t tosttl, df;
    int fin_psh, fixedid, tail_odd;
    int outer_fixedid;      /* the outer IPv4 ID found fixed (tunnels) */
    Tun t;                  /* the outer level of a tunnelled flow */
    uint32_t head_psum, tail_psum;   /* payload sums mod 0xFFFF */
    sbuf rows;              /* annotated: the restore record's s= rows so far */
    sbuf mrows;             /* annotated: its m= entries so far (sb_meta_row) */
    sbuf hopt;              /* pcapng output: the head's EPB options as read */
    int hopt_swap;          /* their byte order: not the host's */
} Agg;

/* the work poll model's clock (pcapgro/gro/napi.py PollClock): costs
 * poll_wake_ns, poll_rx_ns, deliver_ns, deliver_seg_ns; a poll is open,
 * done with its packets so far at now, took n packets; the last delivery
 * ends at free (has_free) */
typedef struct {
    int open, has_free;
    int64_t now, n, free;
    int64_t poll_wake_ns, poll_rx_ns, deliver_ns, deliver_seg_ns;
} Clock;

/* poll ends by their arrival gap (napi.py gap_bucket): < 1 us, then
 * [2**(k-1), 2**k) us for k = 1..10, then 1024 us and more */
#define GAP_BUCKETS 12

typedef struct {
    PyObject_HEAD
    Agg aggs[MAXHELD];
    int used[MAXHELD];
    int nheld;
    int bn[NBUCKETS];
    int bk[NBUCKETS][MAXPER];        /* slot indices, oldest first */
    /* configuration */
    uint32_t limit;
    int64_t gap, jiffy;
    int verify, csum_valid, hash_flow, vlan;
    int linktype;           /* of the records of the current run() / scan() */
    int udp_gro;            /* UDP datagrams take standard GRO (--udp gro) */
    int fraglist;           /* rx-gro-list: TCP and UDP flows take fraglist GRO */
    uint8_t inet[256];      /* IP protocols with a GRO handler (offload.inet_offload):
                               1 TCP / UDP, 2 another's (a tunnel: rx_tunnel) */
    int nlocal;             /* local_ports given: destination ports (bit set) */
    uint8_t local[65536 / 8];   /* with a local socket (tcp.uses_fraglist, udp.udp_mode) */
    int ntun;               /* UDP tunnel sockets given: destination ports of */
    uint8_t vxlan[65536 / 8], geneve[65536 / 8];    /* VXLAN, Geneve (bit sets) */
    /* the NAPI model (engine.py): gro_flush_timeout (ns, 0 = none), NAPI
     * budget (packets per poll, 0 = none; a full poll's flush is old-only
     * when budget_old: hz >= 1000), packets taken by the current poll */
    int64_t timeout, budget, in_poll;
    int budget_old;
    /* the work poll model (poll_model 'work'; pcapgro/gro/napi.py
     * PollClock, whose state goes to and back with each run), and where
     * poll starts would move with the timing x2 / x0.5 (PollShifts) */
    int work;
    Clock clk[3];           /* the model's, then with costs x2 and x0.5 */
    /* the gap model's poll gap doubled and halved (saturated) */
    int64_t gap2, gaph;
    /* pcapng output (else classic pcap records): EPBs on interface
     * ng_iface in the byte order ng_swap says, timestamps in units of
     * ng_div ns from ng_off (ng_bin k > 0: units of 2**-k s, rounded
     * up as pcapng.ns_to_ts does; ng_fine m > 0: units of 1/m ns, a
     * decimal resolution finer than 1 ns); annotate: comments, flags, restore
     * records.  ng_tmax: input times (and last_out_ts) are under it, so
     * that every record time (never later than the latest of them: a
     * flush timeout's comes before the next packet) has an EPB timestamp
     * that fits 64 bits (epb_header, run) */
    int ng, ng_swap, annotate, ng_bin;
    int64_t ng_div, ng_off, ng_tmax, ng_fine;
    uint32_t ng_iface;
    /* the input records of the current run() / scan(): classic pcap
     * (16-byte headers, fraction unit in_mul ns) or EPBs (in_epb: of
     * interface in_iface, time ticks * in_mul + in_off ns, or with in_bin
     * k > 0 (ticks * 10**9 >> k) + in_off, or with in_fine d > 0 ticks //
     * d + in_off: pcapng.ts_to_ns); in_swap: not in host byte order */
    int in_epb, in_swap;
    int64_t in_mul, in_off, in_fine;
    int in_bin;
    uint32_t in_iface;
    int out_fixed;          /* output() set swap / mul: not the input's */
    sbuf opts, txt, rec;    /* scratch: one record's options and texts */
    sbuf hbig;              /* scratch: headers written, longer than HDRMAX */
    const uint8_t *ropt;    /* the options of the EPB in hand (roptn bytes, */
    uint32_t roptn;         /* 0: none or a classic pcap record) */
    /* statistics since the last stats() */
    uint64_t poll_gaps[GAP_BUCKETS], budget_ends, moved2, movedh;
    uint64_t flush[F_N], pass[P_N], verified, seed, singles, aggregates, segs;
    uint64_t csum_bad, skip_l3, skip_cut;    /* csum.verify: bad, skipped_l3_flush,
                                                skipped_truncated */
    uint64_t skip_udp0;     /* csum.verify: skipped_udp_zero */
    uint64_t cut_aggs, cut_left;             /* GROStats.note_cut */
    uint64_t kind_aggs[K_N], kind_segs[K_N];  /* aggregates, segs by kind */
    uint32_t *hist;
    size_t hist_n, hist_cap;
    /* output of the current run: a bytearray, filled from its start */
    PyObject *outobj;
    uint8_t *out;
    size_t outlen, outcap;
    Py_ssize_t nout;
    unsigned long long outbytes;    /* captured bytes of the records written */
    uint32_t maxcap;
    int swap;               /* classic pcap output: byte order, fraction unit */
    int64_t mul;
    int64_t last_out_ts;
    int64_t last_ts;
    int have_last;
    int error;              /* memory error inside a run */
} Engine;

/* ------------------------------------------------------------ helpers */

static inline uint32_t be16(const uint8_t *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint32_t bswap32(uint32_t x)
{
    return (x >> 24) | ((x >> 8) & 0xFF00) | ((x << 8) & 0xFF0000) | (x << 24);
}

/* s + x with the carry out of 64 bits added back in (end-around carry:
 * 2**64 = 1 mod 0xFFFF, so the sum mod 0xFFFF is kept; add, adc) */
static inline uint64_t add_carry(uint64_t s, uint64_t x)
{
    s += x;
    return s + (s < x);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SUM16_SIMD 1
/* whether the CPU has AVX2 (set once at import: PyInit__native); the
 * payload sums are most of the compiled engine's own time (perf: ~9% of a
 * merge of the mixed bench capture, a 4th of it with AVX2) */
static int sum16_avx2_ok;
/* sum16_avx2 takes at most this many bytes at a time: each 32-bit lane
 * gains at most 2 x 0xFFFF per 64 bytes, so 2**20 bytes keep it < 2**32 */
#define SUM16_BLOCK ((size_t)1 << 20)

/* The native 16-bit words of n bytes (n a multiple of 64, at most
 * SUM16_BLOCK) summed, unfolded (< 2**37): the low and high halves of
 * each 32-bit lane added into two vectors of eight 32-bit lanes.  The same
 * sum mod 0xFFFF as sum16's 64-bit native loads, since 2**16 = 1 mod 0xFFFF
 * (RFC 1071's byte-order independence: csum_partial's vector variants). */
__attribute__((target("avx2")))
static uint64_t sum16_avx2(const uint8_t *p, size_t n)
{
    const __m256i lo = _mm256_set1_epi32(0xFFFF);
    __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
    for (; n; n -= 64, p += 64) {
        __m256i x = _mm256_loadu_si256((const __m256i *)p);
        __m256i y = _mm256_loadu_si256((const __m256i *)(p + 32));
        a = _mm256_add_epi32(a, _mm256_and_si256(x, lo));
        b = _mm256_add_epi32(b, _mm256_and_si256(y, lo));
        a = _mm256_add_epi32(a, _mm256_srli_epi32(x, 16));
        b = _mm256_add_epi32(b, _mm256_srli_epi32(y, 16));
    }
    uint32_t t[16];
    _mm256_storeu_si256((__m256i *)t, a);
    _mm256_storeu_si256((__m256i *)(t + 8), b);
    uint64_t s = 0;
    for (int i = 0; i < 16; i++)
        s += t[i];
    return s;
}
#endif

/* One's-complement sum of n bytes (big-endian 16-bit words, an odd last
 * byte padded with zero), mod 0xFFFF.  64-bit native loads added with
 * end-around carry (add_carry): a native sum is the byte-swapped sum on a
 * little-endian machine, and swapping is x 256 mod 0xFFFF, so the
 * big-endian sum is the native one x 256 there.  The last n % 8 bytes are
 * read by fixed-size copies (a copy of variable size is a call).  From 128
 * bytes on, on a CPU with AVX2, whole 64-byte blocks go to sum16_avx2
 * first (simd 0: never; the tests' way to reach the scalar loop). */
static uint32_t sum16_with(const uint8_t *p, size_t n, int simd)
{
    uint64_t s = 0, w, a, b, c, d;
#ifdef SUM16_SIMD
    if (simd && n >= 128 && sum16_avx2_ok) {
        while (n >= 64) {
            size_t k = n < SUM16_BLOCK ? n & ~(size_t)63 : SUM16_BLOCK;
            s += sum16_avx2(p, k);      /* < 2**37 each: no wrap before 2**27 MB */
            p += k;
            n -= k;
        }
    }
#else
    (void)simd;
#endif
    while (n >= 32) {
        memcpy(&a, p, 8); memcpy(&b, p + 8, 8); memcpy(&c, p + 16, 8); memcpy(&d, p + 24, 8);
        s = add_carry(add_carry(add_carry(add_carry(s, a), b), c), d);
        p += 32;
        n -= 32;
    }
    while (n >= 8) {
        memcpy(&w, p, 8);
        s = add_carry(s, w);
        p += 8;
        n -= 8;
    }
    if (n) {
        uint8_t z[8] = {0};     /* zero padding in memory order */
        size_t k = 0;
        if (n & 4) {
            memcpy(z, p, 4);
            k = 4;
        }
        if (n & 2) {
            memcpy(z + k, p + k, 2);
            k += 2;
        }
        if (n & 1)
            z[k] = p[k];
        memcpy(&w, z, 8);
        s = add_carry(s, w);
    }
    s %= 0xFFFF;
#if PY_LITTLE_ENDIAN
    s = (s * 256) % 0xFFFF;
#endif
    return (uint32_t)s;
}

static inline uint32_t sum16(const uint8_t *p, size_t n)
{
    return sum16_with(p, n, 1);
}

/* whether the 20-byte IPv4 header at p has a bad header checksum (its
 * one's-complement sum not 0 mod 0xFFFF, in either byte order:
 * ip_fast_csum); sum16(p, 20) != 0 in three 64-bit-or-less loads */
static inline int ip4_csum_bad(const uint8_t *p)
{
    uint64_t a, b;
    uint32_t c;
    memcpy(&a, p, 8);
    memcpy(&b, p + 8, 8);
    memcpy(&c, p + 16, 4);
    return add_carry(add_carry(a, b), c) % 0xFFFF != 0;
}

/* the unfolded one's-complement sum of the pseudo-header of protocol
 * proto, len bytes, for the IP header at l3 of f (ipv4.py / ipv6.py
 * pseudo_sum; congruent mod 0xFFFF) */
static inline uint64_t pseudo_sum(const uint8_t *f, uint32_t l3, int v6, uint32_t proto,
                                  uint32_t len)
{
    if (v6)
        return sum16(f + l3 + 8, 32) + proto + len;
    return be16(f + l3 + 12) + be16(f + l3 + 14) + be16(f + l3 + 16) + be16(f + l3 + 18)
           + proto + len;
}

/* CRC-32 (zlib's) of the flow hash: zlib.crc32(addresses + ports) or 1
 * (_crc32.h, through _annotate.h) */
static uint32_t crc32_bytes(const uint8_t *p, size_t n)
{
    return crc32_cont(0, p, n);
}

static inline uint64_t key_hash(const uint8_t *k)
{
    uint64_t h = 0;
    for (int i = 0; i < KEYMAX; i += 8) {
        uint64_t w;
        memcpy(&w, k + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    return h;
}

/* --------------------------------------------------------------- output */

static int out_reserve(Engine *e, size_t n)
{
    if (e->outlen + n <= e->outcap)
        return 0;
    /* not reached: run() sizes the output for the worst case */
    size_t cap = e->outcap ? e->outcap : 1 << 20;
    while (cap < e->outlen + n)
        cap *= 2;
    if (PyByteArray_Resize(e->outobj, (Py_ssize_t)cap) < 0) {
        PyErr_Clear();
        e->error = 1;
        return -1;
    }
    e->out = (uint8_t *)PyByteArray_AS_STRING(e->outobj);
    e->outcap = cap;
    return 0;
}

/* copy the payloads an aggregate refers to in the input into its own
 * storage (before the input chunk goes away, or when refs is full); the
 * storage grows when needed (a head alone may exceed gro_max_size) */
static void materialize(Engine *e, Agg *a)
{
    size_t need = a->paylen + a->reflen;
    if (need > a->paycap) {
        size_t cap = a->paycap * 2 > need ? a->paycap * 2 : need;
        uint8_t *p = realloc(a->pay, cap);
        if (!p) {
            e->error = 1;
            return;
        }
        a->pay = p;
        a->paycap = cap;
    }
    for (int k = 0; k < a->nrefs; k++) {
        memcpy(a->pay + a->paylen, a->refs[k].p, a->refs[k].n);
        a->paylen += a->refs[k].n;
    }
    a->nrefs = 0;
    a->reflen = 0;
}

static inline void put32(uint8_t *p, uint32_t v, int swap)
{
    if (swap)
        v = bswap32(v);
    memcpy(p, &v, 4);
}

/* pcapng.ns_to_ts for a binary resolution 2**-k s: the ticks of rel ns
 * after the interface's offset, rounded up (rel >= 0; output() and
 * epb_header keep the result under 2**64) */
static inline uint64_t ng_bin_ticks(int64_t rel, int k)
{
    return (uint64_t)((((unsigned __int128)rel << k) + 999999999) / 1000000000);
}

/* A record for ts (ns), caplen n, original length orig: a classic pcap
 * record in the input's format, or an EPB with the options opt (NULL:
 * none) already laid out around it.  Returns where its n bytes of frame
 * go. */
static uint8_t *out_record_cut(Engine *e, int64_t ts, uint32_t n, uint32_t orig,
                               const sbuf *opt)
{
    uint8_t *r;
    if (e->ng) {
        size_t pad = (4 - (n & 3)) & 3, ol = opt ? opt->n : 0;
        size_t bl = 32 + (size_t)n + pad + ol;
        if (out_reserve(e, bl) < 0)
            return NULL;
        r = e->out + e->outlen;
        uint64_t t = e->ng_bin ? ng_bin_ticks(ts - e->ng_off, e->ng_bin)
                     : e->ng_fine ? (uint64_t)(ts - e->ng_off) * (uint64_t)e->ng_fine
                     : (uint64_t)(ts - e->ng_off) / (uint64_t)e->ng_div;   /* ts >= ng_off */
        int sw = e->ng_swap;
        ng_put32(r, BT_EPB, sw);
        ng_put32(r + 4, (uint32_t)bl, sw);
        ng_put32(r + 8, e->ng_iface, sw);
        ng_put32(r + 12, (uint32_t)(t >> 32), sw);
        ng_put32(r + 16, (uint32_t)t, sw);
        ng_put32(r + 20, n, sw);
        ng_put32(r + 24, orig, sw);
        uint8_t *q = r + 28 + n;
        memset(q, 0, pad);
        if (ol)
            memcpy(q + pad, opt->p, ol);
        ng_put32(q + pad + ol, (uint32_t)bl, sw);
        e->outlen += bl;
        r += 28;
    } else {
        if (out_reserve(e, 16 + (size_t)n) < 0)
            return NULL;
        r = e->out + e->outlen;
        put32(r, (uint32_t)(ts / 1000000000), e->swap);
        put32(r + 4, (uint32_t)((ts % 1000000000) / e->mul), e->swap);
        put32(r + 8, n, e->swap);
        put32(r + 12, orig, e->swap);
        e->outlen += 16 + (size_t)n;
        r += 16;
    }
    e->nout++;
    e->outbytes += n;
    if (n > e->maxcap)
        e->maxcap = n;
    return r;
}

/* the options of a packet handed up unchanged whose input EPB had the
 * options raw (n bytes, byte order in_swap; n 0: none): with its position
 * record when pos (annotated output: annotate.passed, single), else its
 * own (PcapngWriter._packet_meta); NULL when there are none to write */
static const sbuf *packet_opts(Engine *e, int pos, int64_t idx, int64_t ts,
                               const uint8_t *raw, size_t n, int in_swap)
{
    if (!e->ng || !(pos || n))
        return NULL;
    int r = pos ? ng_position(&e->opts, &e->txt, (long long)idx, (long long)ts, raw, n,
                              in_swap, e->ng_swap)
                : ng_meta_opts(&e->opts, raw, n, in_swap, e->ng_swap, NULL, NULL, 0, 0);
    if (r < 0) {
        PyErr_Clear();
        e->error = 1;
        return NULL;
    }
    return e->opts.n ? &e->opts : NULL;
}

/* hand a packet (input index idx) up unchanged (GRO_NORMAL) at its own
 * time, even when that is earlier than a packet written before it
 * (last_out_ts: the latest time written, raised to ts if later), with its
 * EPB's options (ropt); annotated, with its position when it overtakes
 * held packets or carries pcapgro's comments (annotate.passed) */
static void pass_frame(Engine *e, int reason, const uint8_t *f, uint32_t n, uint32_t orig,
                       int64_t ts, int64_t idx)
{
    e->pass[reason]++;
    if (ts > e->last_out_ts)
        e->last_out_ts = ts;
    int pos = e->annotate && (e->nheld || (e->roptn && opt_own(e->ropt, e->roptn, e->in_swap)));
    uint8_t *d = out_record_cut(e, ts, n, orig,
                                packet_opts(e, pos, idx, ts, e->ropt, e->roptn, e->in_swap));
    if (d)
        memcpy(d, f, n);
}

/* ------------------------------------------------------------ the lists */

static void bucket_remove(Engine *e, int slot)
{
    int b = e->aggs[slot].hash & (NBUCKETS - 1);
    int *l = e->bk[b];
    int n = e->bn[b];
    for (int i = 0; i < n; i++) {
        if (l[i] == slot) {
            memmove(l + i, l + i + 1, (size_t)(n - i - 1) * sizeof(int));
            e->bn[b] = n - 1;
            return;
        }
    }
}

/* gro_complete + napi_gro_complete: hand a held packet up at time t, or at
 * last_out_ts (the latest time written) if t is earlier */
static uint32_t complete_headers(Engine *e, const Agg *a, uint8_t *d);

/* the aggregate kind of a (KIND_NAMES, KIND_NOTES) */
static inline int agg_kind(const Agg *a)
{
    return a->t.kind ? K_TUN0 + 2 * (a->t.kind - 1) + a->udp
                     : (a->udp ? K_UDP : K_TCP) + a->flist;
}

/* the options of aggregate a written with headers hdr (hn bytes):
 * annotate.aggregate (pcapng, annotated; a snaplen-cut one without a
 * restore record), else its head's own (pcapng), else NULL */
static const sbuf *agg_options(Engine *e, const Agg *a, const uint8_t *hdr, uint32_t hn,
                               int reason)
{
    if (!(e->ng && e->annotate))
        return packet_opts(e, 0, 0, 0, (const uint8_t *)a->hopt.p, a->hopt.n, a->hopt_swap);
    const char *proto = KIND_NOTES[agg_kind(a)];
    const char *ended = FLUSH_NAMES[reason];
    int r = ng_aggregate(&e->opts, &e->txt, &e->rec, (const uint8_t *)a->hopt.p, a->hopt.n,
                         a->hopt_swap, a->count, a->mss, a->cut, (long long)a->head_idx,
                         (long long)a->head_ts, a->head_L, a->hdr, a->hlen, hdr, hn, &a->rows,
                         &a->mrows, proto, ended, e->ng_swap);
    if (r < 0) {
        PyErr_Clear();
        e->error = 1;
    }
    return &e->opts;
}

/* the statistics of a completed aggregate (GROStats.count_aggregate,
 * note_cut) */
static void count_aggregate(Engine *e, const Agg *a)
{
    e->aggregates++;
    e->segs += a->count;
    int kind = agg_kind(a);
    e->kind_aggs[kind]++;
    e->kind_segs[kind] += a->count;
    if (a->cut) {
        e->cut_aggs++;
        e->cut_left += a->left;
    }
    if (e->hist_n == e->hist_cap) {
        size_t cap = e->hist_cap ? e->hist_cap * 2 : 1024;
        uint32_t *h = realloc(e->hist, cap * sizeof(uint32_t));
        if (!h) {
            e->error = 1;
            return;
        }
        e->hist = h;
        e->hist_cap = cap;
    }
    e->hist[e->hist_n++] = a->count;
}

static void complete(Engine *e, int slot, int reason, int64_t t)
{
    Agg *a = &e->aggs[slot];
    bucket_remove(e, slot);
    e->used[slot] = 0;
    e->nheld--;
    e->flush[reason]++;
    if (t < e->last_out_ts)
        t = e->last_out_ts;
    e->last_out_ts = t;
    /* the headers as written (completed below for an aggregate; IPv6 BIG
     * TCP: ins bytes of jumbo Hop-by-Hop header inserted) */
    uint8_t hbuf[HDRMAX + JUMBO_HBH], *hdr = hbuf;
    uint32_t ins = 0;
    if (a->hlen > HDRMAX) {
        e->hbig.n = 0;
        if (sb_grow(&e->hbig, a->hlen + JUMBO_HBH) < 0) {
            PyErr_Clear();
            e->error = 1;
            return;
        }
        hdr = (uint8_t *)e->hbig.p;
    }
    memcpy(hdr, a->hdr, a->hlen);
    const sbuf *opt;
    if (a->count == 1) {
        opt = packet_opts(e, e->annotate, a->head_idx, a->head_ts, (const uint8_t *)a->hopt.p,
                          a->hopt.n, a->hopt_swap);
    } else {
        ins = complete_headers(e, a, hdr);
        opt = agg_options(e, a, hdr, a->hlen + ins, reason);
    }
    /* captured: the headers and the payload kept; on the wire: the L3
     * length (a snaplen cut leaves bytes out) */
    uint32_t hn = a->hlen + ins, n = hn + (uint32_t)(a->paylen + a->reflen);
    uint8_t *d = out_record_cut(e, t, n, a->t.l3 + ins + a->size - 4 * a->tags, opt);
    if (!d)
        return;
    memcpy(d, hdr, hn);
    uint8_t *q = d + hn;
    memcpy(q, a->pay, a->paylen);
    q += a->paylen;
    for (int k = 0; k < a->nrefs; k++) {
        memcpy(q, a->refs[k].p, a->refs[k].n);
        q += a->refs[k].n;
    }
    if (a->count == 1)
        e->singles++;
    else
        count_aggregate(e, a);
}

/* ipv6_gro_complete's BIG TCP branch (ipv6.py complete_header): an
 * aggregate whose payload length exceeds 65535 gets a Hop-by-Hop header
 * with a Jumbo Payload option right after the fixed header (6.18; the
 * payload length field 0, next header 0); d holds hlen bytes of headers.
 * Returns the bytes inserted: 8, or 0 (the payload length written). */
static uint32_t ipv6_jumbo(uint8_t *d, uint32_t l3, uint32_t hlen, uint32_t plen)
{
    if (plen <= 0xFFFF) {
        d[l3 + 4] = (uint8_t)(plen >> 8);
        d[l3 + 5] = (uint8_t)plen;
        return 0;
    }
    uint8_t *x = d + l3 + 40;
    memmove(x + JUMBO_HBH, x, hlen - l3 - 40);
    uint32_t jl = plen + JUMBO_HBH;
    x[0] = d[l3 + 6];
    x[1] = 0;
    x[2] = 0xC2;                /* IPV6_TLV_JUMBO */
    x[3] = 4;
    x[4] = (uint8_t)(jl >> 24); x[5] = (uint8_t)(jl >> 16);
    x[6] = (uint8_t)(jl >> 8); x[7] = (uint8_t)jl;
    d[l3 + 4] = d[l3 + 5] = d[l3 + 6] = 0;
    return JUMBO_HBH;
}

/* inet_gro_complete / ipv6_gro_complete (ipv4.py, ipv6.py complete_header)
 * on the IP header at l3 of d, for a datagram of l3len bytes: the total
 * length (0 above 65535: BIG TCP) and header checksum, or the payload
 * length (run() handles IPv6 only where it fits 16 bits; extension
 * headers included).  Returns the pseudo-header sum for protocol proto
 * at l4. */
static uint64_t ip_complete(uint8_t *d, uint32_t l3, int v6, uint32_t l3len, uint32_t l4,
                            uint32_t proto)
{
    if (v6) {
        uint32_t plen = l3len - 40;
        d[l3 + 4] = (uint8_t)(plen >> 8);
        d[l3 + 5] = (uint8_t)plen;
    } else {
        uint32_t tot = l3len <= 0xFFFF ? l3len : 0;
        d[l3 + 2] = (uint8_t)(tot >> 8);
        d[l3 + 3] = (uint8_t)tot;
        d[l3 + 10] = d[l3 + 11] = 0;
        uint32_t c = 0xFFFF - sum16(d + l3, 20);     /* checksum(): ~fold, 0 -> 0xFFFF */
        d[l3 + 10] = (uint8_t)(c >> 8);
        d[l3 + 11] = (uint8_t)c;
    }
    return pseudo_sum(d, l3, v6, proto, l3len - (l4 - l3));
}

/* a checksum field at d + at: the pseudo-header seed fold(pseudo)
 * (--csum kernel) when valid is 0, else ~fold(s) of the block sum s
 * (s > 0), 0 written as 0xFFFF for UDP (zero: its value then) */
static void put_csum(uint8_t *d, uint32_t at, int valid, uint64_t s, uint32_t zero)
{
    uint32_t c, r = (uint32_t)(s % 0xFFFF);
    if (!valid)
        c = r ? r : 0xFFFF;
    else
        c = r ? 0xFFFF - r : zero;
    d[at] = (uint8_t)(c >> 8);
    d[at + 1] = (uint8_t)c;
}

/* _outer_checksum (encap.py) of tunnelled aggregate a, headers at d: a
 * nonzero outer UDP checksum: the outer pseudo-header seed (--csum kernel,
 * as udp4/6_gro_complete leave it) or valid; the GRE checksum: the first
 * packet's (kernel) or valid over the GRE header and all after it; an
 * aggregate cut by a snaplen as with --csum kernel.  opseudo: the outer UDP
 * pseudo-header sum; ps: the payload's sum. */
static void outer_csum(const Engine *e, const Agg *a, uint8_t *d, uint64_t opseudo, uint64_t ps)
{
    uint32_t at = a->t.csum_at;
    int udp = a->t.kind >= T_VXLAN;
    if (!e->csum_valid || a->cut) {
        if (udp)
            put_csum(d, at, 0, opseudo, 0);
        return;
    }
    d[at] = d[at + 1] = 0;
    uint64_t s = sum16(d + a->t.toff, a->hlen - a->t.toff) + ps + (udp ? opseudo : 0);
    put_csum(d, at, 1, s, udp ? 0xFFFF : 0);
}

/* napi_gro_complete's gro_complete calls on the aggregate's headers
 * written at d: a tunnel's outer level first (encap.py complete_levels:
 * inet/ipv6_gro_complete, the UDP length of VXLAN and Geneve), then
 * inet_gro_complete / ipv6_gro_complete and tcp4_gro_complete /
 * tcp6_gro_complete / udp_gro_complete; the L4 checksum the pseudo-header
 * seed (kernel; fraglist: the first packet's stays) or valid, then the
 * outer checksum */
static uint32_t complete_headers(Engine *e, const Agg *a, uint8_t *d)
{
    uint32_t l3len = a->size - 4 * a->tags;  /* size counts the tags */
    uint32_t proto = a->udp ? 17 : 6, ins = 0;
    uint64_t opseudo = 0, ps = 0, pseudo;
    if (a->t.kind) {
        uint32_t tlen = l3len - (a->t.toff - a->t.l3);
        opseudo = ip_complete(d, a->t.l3, a->t.v6, l3len, a->t.toff, 17);
        if (a->t.kind >= T_VXLAN) {
            d[a->t.toff + 4] = (uint8_t)(tlen >> 8);
            d[a->t.toff + 5] = (uint8_t)tlen;
        }
        l3len -= a->l3 - a->t.l3;
    }
    if (a->v6 && !a->t.kind) {
        /* the pseudo-header counts the L4 length as 32 bits; the payload
         * length, or the jumbo header (BIG TCP) */
        pseudo = pseudo_sum(d, a->l3, 1, proto, l3len - (a->l4 - a->l3));
        ins = ipv6_jumbo(d, a->l3, a->hlen, l3len - 40);
    } else {
        pseudo = ip_complete(d, a->l3, a->v6, l3len, a->l4, proto);
    }
    uint32_t l4 = a->l4 + ins, at = l4 + (a->udp ? 6 : 16);
    if (a->udp) {
        /* udp_gro_complete: the UDP length */
        uint32_t l4len = l3len - (a->l4 - a->l3);
        d[l4 + 4] = (uint8_t)(l4len >> 8);
        d[l4 + 5] = (uint8_t)l4len;
    } else if (!a->flist) {
        /* tcp_gro_complete: FIN/PSH of merged segments */
        d[l4 + 13] |= (uint8_t)a->fin_psh;
    }
    /* (a snaplen cut: the seed, payload.payloads' rule) */
    if (!e->csum_valid || a->cut) {
        if (!a->flist)
            put_csum(d, at, 0, pseudo, 0);
    } else {
        d[at] = d[at + 1] = 0;
        ps = a->head_psum + (uint64_t)(a->head_L & 1 ? a->tail_psum * 256u : a->tail_psum);
        put_csum(d, at, 1, pseudo + sum16(d + l4, a->hlen + ins - l4) + ps,
                 a->udp ? 0xFFFF : 0);
    }
    if (a->t.csum_at && a->t.kind)
        outer_csum(e, a, d, opseudo, ps);
    return ins;
}

static void flush_all(Engine *e, int reason, int64_t t)
{
    for (int b = 0; b < NBUCKETS; b++)
        while (e->bn[b])
            complete(e, e->bk[b][0], reason, t);
}

/* __gro_flush with flush_old (core.py NAPI.flush, old_only): buckets 0..7,
 * oldest first, each bucket's scan stopping at the first packet held in
 * the jiffy of t */
static void flush_old(Engine *e, int reason, int64_t t)
{
    int64_t now = t / e->jiffy;
    for (int b = 0; b < NBUCKETS; b++)
        while (e->bn[b] && e->aggs[e->bk[b][0]].age != now)
            complete(e, e->bk[b][0], reason, t);
}

/* napi_complete_done (core.py NAPI.poll_end): the poll that took the
 * packet at last (ns) ended before the one at next arrived.  No
 * gro_flush_timeout: everything is completed; else only what is older
 * than the current jiffy, then the rest when the timer (last + timeout)
 * fires before next */
static void poll_end(Engine *e, int64_t last, int64_t next)
{
    if (!e->timeout) {
        flush_all(e, F_POLL_END, last);
        return;
    }
    flush_old(e, F_POLL_END, last);
    if (e->nheld && next - last > e->timeout)
        flush_all(e, F_FLUSH_TIMEOUT, last + e->timeout);
}

/* The work model's clock (napi.py PollClock.ends, one packet): the
 * packet at t joins the open poll when it has arrived by the time the poll
 * gets to it (now), each packet costing poll_rx_ns of receive work;
 * else the poll ended on an empty queue (napi_complete_done) and its
 * delivery (gro_normal_batch: deliver_ns + deliver_seg_ns per packet)
 * keeps the receiver busy until free; a poll that took budget packets
 * ends for that (__napi_poll) and the next goes on after its delivery.  A
 * new poll starts poll_wake_ns after a packet finds the device idle
 * (veth_poll scheduled), or right when the delivery is done if the packet
 * waited for it.  Returns F_POLL_END or F_BUDGET when the packet at t
 * starts a poll after another ended, else -1. */
static int work_clock(Clock *c, int64_t budget, int64_t t)
{
    int reason = -1;
    if (c->open) {
        if (budget && c->n >= budget) {
            int64_t done = c->now + c->deliver_ns + c->deliver_seg_ns * c->n;
            c->now = (done > t ? done : t) + c->poll_rx_ns;
            c->n = 1;
            return F_BUDGET;
        }
        if (t <= c->now) {
            c->now += c->poll_rx_ns;
            c->n++;
            return -1;
        }
        reason = F_POLL_END;
        c->free = c->now + c->deliver_ns + c->deliver_seg_ns * c->n;
        c->has_free = 1;
    }
    int64_t start = c->has_free && t <= c->free ? c->free : t + c->poll_wake_ns;
    c->now = start + c->poll_rx_ns;
    c->n = 1;
    c->open = 1;
    return reason;
}

/* napi.py gap_bucket: the poll_gaps bucket of an arrival gap of d ns */
static int gap_bucket(int64_t d)
{
    int64_t us = d / 1000;
    if (us <= 0)
        return 0;
    int k = 64 - __builtin_clzll((unsigned long long)us);
    return k < GAP_BUCKETS - 1 ? k : GAP_BUCKETS - 1;
}

/* A poll end while packets are held (engine.py _poll_boundary): the
 * budget flush (__napi_poll; old-only when hz >= 1000) or
 * napi_complete_done's (poll_end), counted with its arrival gap */
static void end_poll(Engine *e, int reason, int64_t ts)
{
    if (reason == F_BUDGET) {
        e->budget_ends++;
        if (e->budget_old)
            flush_old(e, F_BUDGET, e->last_ts);
        else
            flush_all(e, F_BUDGET, e->last_ts);
        return;
    }
    e->poll_gaps[gap_bucket(ts - e->last_ts)]++;
    poll_end(e, e->last_ts, ts);
}

/* Before the packet at ts under the work model (engine.py _polls): the
 * poll end work_clock finds, and where the clocks with costs x2 and x0.5
 * disagree with it while packets are held (napi.py PollShifts) */
static void work_boundary(Engine *e, int64_t ts)
{
    int reason = work_clock(&e->clk[0], e->budget, ts);
    int r2 = work_clock(&e->clk[1], e->budget, ts);
    int rh = work_clock(&e->clk[2], e->budget, ts);
    if (!e->nheld)
        return;
    e->moved2 += (reason < 0) != (r2 < 0);
    e->movedh += (reason < 0) != (rh < 0);
    if (reason >= 0)
        end_poll(e, reason, ts);
}

/* Before the packet at ts: does a NAPI poll end there (engine.py
 * _loop_budget, _polls)?  The work model: work_boundary.  The gap model:
 * after budget packets (__napi_poll: the budget flush, old-only when
 * hz >= 1000), else at an arrival gap over poll_gap_ns
 * (napi_complete_done); in_poll counts the new poll's packets from 0 then
 * (only with a budget, as the Python engine counts) */
static void poll_boundary(Engine *e, int64_t ts)
{
    if (e->work) {
        work_boundary(e, ts);
        return;
    }
    if (!e->have_last)
        return;
    if (e->budget && e->in_poll == e->budget) {
        if (e->nheld)
            end_poll(e, F_BUDGET, ts);
        e->in_poll = 0;
        return;
    }
    int64_t d = ts - e->last_ts;
    int end = d > e->gap;
    if (e->nheld) {
        e->moved2 += end != (d > e->gap2);
        e->movedh += end != (d > e->gaph);
    }
    if (end) {
        if (e->nheld)
            end_poll(e, F_POLL_END, ts);
        e->in_poll = 0;
    }
}

/* the parsed segment in hand */
typedef struct {
    const uint8_t *f;       /* frame */
    uint32_t n;             /* frame length */
    uint32_t hl;            /* TCP header length */
    uint32_t l3, l4;        /* network and TCP / UDP header offsets */
    uint32_t tags;          /* in-band VLAN tags crossed (Ethernet) */
    int v6;                 /* IPv6 (else IPv4) */
    int udp;                /* UDP (else TCP); ulen its length field */
    uint32_t ulen;
    int partial;            /* the checksum field held the pseudo-header seed */
    uint32_t pay;           /* payload offset */
    uint32_t L;             /* payload length */
    uint32_t flags, word, seq, ack, tosttl, df, ipid;
    uint32_t psum;
    uint8_t key[KEYMAX];
    uint64_t kh;
    uint32_t fh;            /* flow_hash (receive: the bucket find and hold use) */
    uint32_t ext;           /* bytes of IPv6 extension headers (at l3 + 40) */
    uint32_t orig;          /* original length (n: captured) */
    const uint8_t *opt;     /* an EPB's options (optn bytes; 0: none) */
    uint32_t optn;
    int flush_l3;           /* NAPI_GRO_CB(skb)->flush at L3: length mismatch, evil bit
                               (tunnelled: of either level) */
    int cflush;             /* the L4 header's own IP level's (its checksum not
                               verified: csum_skipped) */
    uint32_t ucsum;         /* UDP checksum field */
    int pass;               /* the Pass reason of RX_PASS (parse_frame, seg_csum;
                               the tunnel steps: P_* + 1, 0 none: rx_tunnel) */
    int ocnt;               /* the outer checksum's verdict to count: 1
                               verified, 2 the seed (trusted), 3 bad, 4 / 5
                               skipped (OCNT_SKIP_L3 / _CUT), 0 none */
    Tun t;                  /* the outer level (t.kind T_NONE: none); l3, l4,
                               the TCP / UDP fields are then the inner flow's */
} Seg;

/* hand segment g up unchanged (pass_frame), captured and original lengths
 * as received */
static void pass_seg(Engine *e, int reason, const Seg *g, int64_t ts, int64_t idx)
{
    pass_frame(e, reason, g->f, g->n, g->orig, ts, idx);
}

/* what the frame step makes of a record: not handled here (the run ends),
 * a segment for the GRO lists, or a packet passed up before flow matching
 * (Seg.pass says why) */
enum { RX_NO, RX_SEG, RX_PASS, RX_TUN };

/* the held packet of g's flow, or -1: the same key, the same link header
 * when it is longer than the key holds (VLAN tags: ipv4.py / ipv6.py's key
 * holds it whole) and, behind IPv6 extension headers, the same chain
 * (ipv6_gro_receive compares the whole network header; its length is in
 * the key); tunnelled: the same outer bytes (Tun.key) */
static int find(Engine *e, const Seg *g)
{
    if (!e->nheld)
        return -1;
    /* only g's bucket (dev_gro_receive walks gro_list_prepare's one list):
     * the same key has the same addresses and ports, so the same hash */
    int b = g->fh & (NBUCKETS - 1);
    for (int i = 0; i < e->bn[b]; i++) {
        int s = e->bk[b][i];
        const Agg *a = &e->aggs[s];
        if (a->khash == g->kh && !memcmp(a->key, g->key, KEYMAX)
                && (g->t.l3 <= L3MAX || (a->t.l3 == g->t.l3
                                         && !memcmp(a->hdr + L3MAX, g->f + L3MAX,
                                                    g->t.l3 - L3MAX)))
                && (!g->ext || !memcmp(a->hdr + g->l3 + 40, g->f + g->l3 + 40, g->ext))
                && (!g->t.kind || (a->t.klen == g->t.klen
                                   && !memcmp(a->t.key, g->t.key, g->t.klen))))
            return s;
    }
    return -1;
}

/* the GRO mode of g's flow with rx-gro-list on (tcp.py uses_fraglist,
 * udp.py udp_mode): fraglist unless a local socket takes it, which for TCP
 * is any socket on its destination port, for UDP one with UDP_GRO (--udp
 * gro); 0 = standard GRO */
static int seg_flist(const Engine *e, const Seg *g)
{
    if (!e->fraglist || g->t.kind)
        return 0;               /* a tunnelled flow never (udp.udp_mode, tcp.gro_receive) */
    uint32_t port = be16(g->f + g->l4 + 2);
    int local = e->nlocal && (e->local[port >> 3] >> (port & 7) & 1);
    return g->udp ? !(local && e->udp_gro) : !local;
}

/* the flow hash of g (skb_get_hash: ipv4.py / ipv6.py _hash_input, the
 * CRC-32 of the addresses and ports, never 0), or 0 when hash_flow is off */
static uint32_t flow_hash(const Engine *e, const Seg *g)
{
    if (!e->hash_flow)
        return 0;
    uint32_t h = g->v6 ? crc32_cont(crc32_bytes(g->f + g->l3 + 8, 32), g->f + g->l4, 4)
                       : crc32_bytes(g->f + g->l3 + 12, 12);
    return h ? h : 1;
}

/* room in slot a for a payload of gro_max_size (at least 64 KiB) and a
 * header of hlen bytes; -1 (e->error set) when out of memory */
static int agg_room(Engine *e, Agg *a, uint32_t hlen)
{
    if (!a->pay) {
        size_t cap = e->limit < 65536 ? 65536 : e->limit;
        a->pay = malloc(cap);
        if (!a->pay) {
            e->error = 1;
            return -1;
        }
        a->paycap = cap;
    }
    if (a->hcap < hlen) {
        size_t cap = hlen > HDRMAX ? hlen : HDRMAX;
        uint8_t *h = realloc(a->hdr, cap);
        if (!h) {
            e->error = 1;
            return -1;
        }
        a->hdr = h;
        a->hcap = cap;
    }
    return 0;
}

/* put a segment on its GRO list as a new head (gro_flush_oldest first when
 * the bucket is full) */
static void hold(Engine *e, const Seg *g, int64_t ts, int64_t idx)
{
    uint32_t h = g->fh;
    int b = h & (NBUCKETS - 1);
    if (e->bn[b] >= MAXPER)
        complete(e, e->bk[b][0], F_BUCKET_FULL, ts);
    int slot = 0;
    while (e->used[slot])
        slot++;
    Agg *a = &e->aggs[slot];
    if (agg_room(e, a, g->pay) < 0)
        return;
    e->used[slot] = 1;
    e->nheld++;
    e->bk[b][e->bn[b]++] = slot;
    memcpy(a->key, g->key, KEYMAX);
    a->l3 = g->l3;
    a->l4 = g->l4;
    a->v6 = g->v6;
    a->udp = g->udp;
    a->flist = seg_flist(e, g);
    a->partial = g->partial;
    a->khash = g->kh;
    a->hash = h;
    a->hlen = g->pay;
    memcpy(a->hdr, g->f, g->pay);
    a->head_ts = ts;
    a->head_idx = idx;
    a->age = ts / e->jiffy;
    a->paylen = 0;
    uint32_t cl = g->n - g->pay;            /* captured payload */
    a->refs[0].p = g->f + g->pay;
    a->refs[0].n = cl;
    a->nrefs = 1;
    a->reflen = cl;
    a->head_L = g->L;
    a->head_cl = cl;
    a->cut = g->n < g->orig;
    a->left = 0;
    a->count = 1;
    a->mss = g->L;
    a->seq_next = g->seq + g->L;
    a->size = g->orig - g->t.l3 + 4 * g->tags;  /* p->len: (outer) L3 bytes + 4 per VLAN tag */
    a->outer_fixedid = 0;
    a->t.kind = g->t.kind;
    a->t.l3 = g->t.l3;
    if (g->t.kind)
        memcpy(&a->t, &g->t, offsetof(Tun, key) + g->t.klen);
    a->tags = g->tags;
    a->word = g->word;
    a->ack = g->ack;
    a->ipid = g->ipid;
    a->tosttl = g->tosttl;
    a->df = g->df;
    a->fin_psh = 0;
    a->fixedid = 0;
    a->head_psum = g->psum;
    a->tail_psum = 0;
    a->tail_odd = 0;
    a->rows.n = 0;
    a->mrows.n = 0;
    a->hopt.n = 0;
    a->hopt_swap = e->in_swap;
    if (e->ng && g->optn && sb_mem(&a->hopt, g->opt, g->optn) < 0) {
        PyErr_Clear();
        e->error = 1;
    }
}

/* inet_gro_flush / ipv6_gro_flush for one IP level (network.py
 * _level_flush): TTL, TOS and DF equal, the IPv4 ID incrementing or fixed
 * (decided at the second segment, setting *fixed); IPv6: traffic class and
 * hop limit.  base: the level's first reason (F_TTL_CHANGED, or
 * F_OUTER_TTL_CHANGED: the four in the same order).  -1 = equal */
static int level_flush(uint32_t count, int v6, uint32_t atos, uint32_t gtos, uint32_t adf,
                       uint32_t gdf, uint32_t aid, uint32_t gid, int *fixed, int base)
{
    if (gtos != atos)
        return base + (((gtos ^ atos) & 0xFF) ? 0 : 1);
    if (v6)
        return -1;
    if (gdf != adf)
        return base + 2;
    uint32_t d = (gid - aid) & 0xFFFF;
    count &= 0xFFFF;                         /* NAPI_GRO_CB(p)->count: u16 */
    if (count == 1 && d == 0)
        *fixed = 1;
    if (d != (*fixed ? 0 : count))
        return base + 3;
    return -1;
}

/* gro_receive_network_flush (network.network_flush): the inner (or only)
 * IP level, then a tunnel's outer one (include/net/gro.h) */
static int network_flush(Agg *a, const Seg *g)
{
    int r = level_flush(a->count, g->v6, a->tosttl, g->tosttl, a->df, g->df, a->ipid, g->ipid,
                        &a->fixedid, F_TTL_CHANGED);
    if (r < 0 && g->t.kind)
        r = level_flush(a->count, g->t.v6, a->t.tosttl, g->t.tosttl, a->t.df, g->t.df,
                        a->t.ipid, g->t.ipid, &a->outer_fixedid, F_OUTER_TTL_CHANGED);
    return r;
}

/* tcp_gro_receive's merge checks (with inet_gro_flush), in its order;
 * -1 = may merge */
static int merge_flush(Agg *a, const Seg *g)
{
    if (g->flags & TH_CWR)
        return F_CWR;
    uint32_t w = (g->word ^ a->word) & ~0x00090000u;
    if (w) {
        if (w & 0xF0000000u)
            return F_HEADER_LEN_CHANGED;
        if (w & 0x0FFF0000u)
            return F_FLAGS_CHANGED;
        return F_WINDOW_CHANGED;
    }
    if (g->ack != a->ack)
        return F_ACK_CHANGED;
    if (g->hl > 20 && memcmp(g->f + g->l4 + 20, a->hdr + g->l4 + 20, g->hl - 20))
        return F_OPTIONS_CHANGED;
    int r = network_flush(a, g);
    if (r >= 0)
        return r;
    if (g->L == 0)
        return F_PURE_ACK;
    if (g->L > a->mss)
        return F_MSS_EXCEEDED;
    if (g->seq != a->seq_next)
        return F_SEQ_GAP;
    return -1;
}

static int final_reason(uint32_t flags)
{
    if (flags & TH_FIN) return F_FIN;
    if (flags & TH_PSH) return F_PSH;
    if (flags & TH_URG) return F_URG;
    if (flags & TH_RST) return F_RST;
    if (flags & TH_SYN) return F_SYN;
    return -1;
}

/* a segment with no held packet to join: the final check with mss 1
 * (tcp_gro_receive's out_check_final) passes it up, else it is held */
static void pass_or_hold(Engine *e, const Seg *g, int64_t ts, int64_t idx)
{
    if (g->L < 1)
        pass_seg(e, P_PURE_ACK, g, ts, idx);
    else if (g->flags & TH_FINAL)
        pass_seg(e, P_FLAGS, g, ts, idx);
    else if (g->flush_l3)
        pass_seg(e, P_L3_FLUSH, g, ts, idx);
    else
        hold(e, g, ts, idx);
}

/* the fraglist branch of tcp_gro_receive + skb_gro_receive_list (tcp.py
 * _fraglist_flush): the whole flag word equal (FIN/PSH too), the same
 * ip_summed, at most 64 segments, 65536 bytes counting every chained
 * packet's headers (and tags); -1 = may chain */
static int fraglist_flush(const Agg *a, const Seg *g)
{
    if (g->word != a->word)
        return F_FLAGS_CHANGED;
    if (g->partial != a->partial)
        return F_CSUM_STATE;
    if (a->count >= TCP_FRAGLIST_MAX)
        return F_SEGMENT_LIMIT;
    if (g->flush_l3)
        return F_L3_FLUSH;
    if (a->size + (g->orig - g->l3 + 4 * g->tags) >= GRO_LEGACY_MAX_SIZE)
        return F_SIZE_LIMIT;
    return -1;
}

/* skb_gro_receive's size limit for TCP (tcp.py _std_flush): gro_max_size;
 * a tunnelled flow never passes GRO_LEGACY_MAX_SIZE */
static inline uint32_t tcp_limit(const Engine *e, const Seg *g)
{
    return g->t.kind && e->limit > GRO_LEGACY_MAX_SIZE ? GRO_LEGACY_MAX_SIZE : e->limit;
}

/* the standard branch's last checks (tcp.py _std_flush): the L3 flush
 * flag (tcp_gro_receive: NAPI_GRO_CB(skb)->flush), then the size limit
 * (skb_gro_receive: gro_max_size, exclusive); -1 = may merge */
static int std_flush(const Engine *e, const Agg *a, const Seg *g)
{
    if (g->flush_l3)
        return F_L3_FLUSH;
    return a->size + g->L >= tcp_limit(e, g) ? F_SIZE_LIMIT : -1;
}

/* the captured payload of g joins a's (referred to in place), unless a
 * segment before it was cut by a snaplen: then it is left out, as
 * payload.payloads leaves it (counted: left) */
static void merge_payload(Engine *e, Agg *a, const Seg *g)
{
    uint32_t cl = g->n - g->pay;
    if (a->cut) {
        a->left += cl;
        return;
    }
    if (a->nrefs == NREFS)
        materialize(e, a);
    a->refs[a->nrefs].p = g->f + g->pay;
    a->refs[a->nrefs].n = cl;
    a->nrefs++;
    a->reflen += cl;
    a->cut = g->n < g->orig;
}

/* skb_gro_receive: segment g (input index idx, time ts) joins aggregate a
 * (its payload referred to in place; annotated: its restore row) */
static void merge(Engine *e, Agg *a, const Seg *g, int64_t ts, int64_t idx)
{
    a->count++;
    a->seq_next += g->L;
    a->size += g->L;
    if (!a->flist)
        a->fin_psh |= g->flags & (TH_FIN | TH_PSH);
    merge_payload(e, a, g);
    if (e->annotate && sb_row(&a->rows, a->count == 2, (long long)(idx - a->head_idx),
                              (long long)(ts - a->head_ts), g->L, g->f, g->pay,
                              a->hdr, a->hlen) < 0) {
        PyErr_Clear();
        e->error = 1;
    }
    /* its EPB's options: the record's m= field (restore.encode_rows) */
    if (e->annotate && g->optn
            && sb_meta_row(&a->mrows, a->count - 1, g->opt, g->optn, e->in_swap) < 0) {
        PyErr_Clear();
        e->error = 1;
    }
    if (e->csum_valid) {
        uint32_t x = a->tail_odd ? g->psum * 256u % 0xFFFF : g->psum;
        a->tail_psum = (a->tail_psum + x) % 0xFFFF;
        a->tail_odd ^= g->L & 1;
    }
}

/* udp_gro_receive_segment's checks before flow matching (udp.py
 * segment_checks): checksum 0 (!uh->check), UDP length <= 8 or not the
 * bytes present; the Pass reason or -1 */
static int udp_segment_pass(const Seg *g)
{
    if (!g->ucsum)
        return P_UDP_ZERO_CSUM;
    if (g->ulen <= 8 || g->ulen != g->L + 8)
        return P_UDP_LENGTH;
    return -1;
}

/* a datagram with no held packet to join (udp.py _start): passed on the
 * L3 flush flag, else held */
static void udp_start(Engine *e, const Seg *g, int64_t ts, int64_t idx)
{
    if (g->flush_l3)
        pass_seg(e, P_L3_FLUSH, g, ts, idx);
    else
        hold(e, g, ts, idx);
}

/* udp_gro_receive + udp_gro_receive_segment (standard or fraglist GRO) for one
 * datagram (pcapgro/gro/udp.py gro_receive): no GRO path -> passed; checksum 0,
 * UDP length <= 8 or not the bytes present -> passed (a held aggregate of its
 * flow stays held); then network header, longer datagram, (fraglist:
 * ip_summed,) the L3 flush flag, size (at most
 * 65536); merged; a shorter datagram or the 64th ends the aggregate */
static void udp_receive(Engine *e, Seg *g, int64_t ts, int64_t idx)
{
    if (!e->udp_gro && (!e->fraglist || g->t.kind)) {
        /* udp.udp_mode: no fraglist inside a tunnel */
        pass_seg(e, P_NO_UDP_GRO, g, ts, idx);
        return;
    }
    int p = udp_segment_pass(g);
    if (p >= 0) {
        pass_seg(e, p, g, ts, idx);
        return;
    }
    int s = find(e, g);
    if (s < 0) {
        udp_start(e, g, ts, idx);
        return;
    }
    Agg *a = &e->aggs[s];
    int reason = network_flush(a, g);
    if (reason < 0 && g->L > a->mss)
        reason = F_LONGER_DATAGRAM;
    if (reason < 0 && a->flist) {
        if (g->partial != a->partial) {
            /* a datagram of the other ip_summed is passed, a stays held */
            pass_seg(e, P_CSUM_STATE, g, ts, idx);
            return;
        }
        if (g->flush_l3)
            reason = F_L3_FLUSH;
        else if (a->size + (g->orig - g->l3 + 4 * g->tags) >= GRO_LEGACY_MAX_SIZE)
            reason = F_SIZE_LIMIT;
    } else if (reason < 0) {
        uint32_t lim = e->limit < GRO_LEGACY_MAX_SIZE ? e->limit : GRO_LEGACY_MAX_SIZE;
        if (g->flush_l3)
            reason = F_L3_FLUSH;
        else if (a->size + g->L >= lim)
            reason = F_SIZE_LIMIT;
    }
    if (reason >= 0) {
        complete(e, s, reason, ts);
        udp_start(e, g, ts, idx);
        return;
    }
    merge(e, a, g, ts, idx);
    if (g->L != a->mss)
        complete(e, s, F_SHORT_DATAGRAM, ts);
    else if (a->count >= UDP_GRO_CNT_MAX)
        complete(e, s, F_SEGMENT_LIMIT, ts);
}

/* dev_gro_receive + tcp_gro_receive for one segment */
static void receive(Engine *e, Seg *g, int64_t ts, int64_t idx)
{
    g->fh = flow_hash(e, g);
    if (g->udp) {
        udp_receive(e, g, ts, idx);
        return;
    }
    int s = find(e, g);
    if (s < 0) {
        pass_or_hold(e, g, ts, idx);
        return;
    }
    Agg *a = &e->aggs[s];
    int reason = merge_flush(a, g);
    if (reason < 0)
        reason = a->flist ? fraglist_flush(a, g) : std_flush(e, a, g);
    if (reason < 0) {
        merge(e, a, g, ts, idx);
        int after = g->L < a->mss ? F_SHORT_SEGMENT : final_reason(g->flags);
        if (after >= 0)
            complete(e, s, after, ts);
        return;
    }
    complete(e, s, reason, ts);
    pass_or_hold(e, g, ts, idx);
}

/* ------------------------------------------------------------ Python API */

/* inet_handlers: 256 bytes, one per IP protocol: 0 no GRO handler
 * (offload.inet_offload is None: passed, no_handler), 1 TCP / UDP, 2
 * another handler (a tunnel: rx_tunnel).  Default: TCP and UDP,
 * and the tunnel protocols of Linux 6.18 (IPIP, IPv6-in-IP, GRE) */
static int set_inet(Engine *e, const char *inet, Py_ssize_t n)
{
    if (inet && n != 256) {
        PyErr_SetString(PyExc_ValueError, "inet_handlers: 256 bytes");
        return -1;
    }
    if (inet) {
        memcpy(e->inet, inet, 256);
        return 0;
    }
    memset(e->inet, 0, 256);
    e->inet[6] = e->inet[17] = 1;
    e->inet[4] = e->inet[41] = e->inet[47] = 2;
    return 0;
}

/* ts_max: the latest time (exclusive) a record of the loop may have:
 * what the output holds (classic pcap: 32-bit seconds; pcapng: 64-bit
 * ticks) and what keeps time differences within 63 bits (gaps above 2**62
 * are 2**62: cfast.py) */
#define TS_MAX_PCAP (4294967296LL * 1000000000)
#define TS_MAX_NG (1LL << 62)

/* vxlan_ports, geneve_ports: the UDP tunnel sockets' destination ports,
 * bit sets of 65536 ports (or empty: none) */
static int set_tunnel_ports(Engine *e, const char *vx, Py_ssize_t nvx, const char *gn,
                            Py_ssize_t ngn)
{
    if ((nvx && nvx != sizeof e->vxlan) || (ngn && ngn != sizeof e->geneve)) {
        PyErr_SetString(PyExc_ValueError, "vxlan_ports, geneve_ports: bit sets of 65536 ports");
        return -1;
    }
    e->ntun = nvx || ngn;
    memset(e->vxlan, 0, sizeof e->vxlan);
    memset(e->geneve, 0, sizeof e->geneve);
    if (nvx)
        memcpy(e->vxlan, vx, sizeof e->vxlan);
    if (ngn)
        memcpy(e->geneve, gn, sizeof e->geneve);
    return 0;
}

static int Engine_init(Engine *e, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"limit", "poll_gap_ns", "jiffy_ns", "verify", "csum_valid",
                             "hash_flow", "vlan", "pcapng", "pcapng_swap", "pcapng_div",
                             "annotate", "udp_gro", "fraglist", "gro_flush_timeout", "napi_budget",
                             "budget_old_only", "local_ports", "inet_handlers", "poll_work",
                             "poll_wake_ns", "poll_rx_ns", "deliver_ns", "deliver_seg_ns",
                             "vxlan_ports", "geneve_ports", NULL};
    unsigned long limit;
    long long gap, jiffy, ng_div = 1;
    int verify, csum_valid, hash_flow, vlan = 0, ng = 0, ng_swap = 0, annotate = 0;
    int udp_gro = 0, fraglist = 0, budget_old = 0, work = 0;
    long long timeout = 0, budget = 0, wake = 0, rx = 0, dp = 0, ds = 0;
    const char *local = NULL, *inet = NULL, *vx = NULL, *gn = NULL;
    Py_ssize_t nlocal = 0, ninet = 0, nvx = 0, ngn = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "kLLppp|pppLpppLLpy#y#pLLLLy#y#", kwlist, &limit,
                                     &gap, &jiffy, &verify, &csum_valid, &hash_flow, &vlan,
                                     &ng, &ng_swap, &ng_div, &annotate, &udp_gro, &fraglist,
                                     &timeout, &budget, &budget_old, &local, &nlocal, &inet,
                                     &ninet, &work, &wake, &rx, &dp, &ds, &vx, &nvx, &gn, &ngn))
        return -1;
    if (set_inet(e, inet, ninet) < 0 || set_tunnel_ports(e, vx, nvx, gn, ngn) < 0)
        return -1;
    /* cfast.usable keeps the costs under 2**30 ns: the clock stays within
     * int64 for any capture time */
    if (wake < 0 || rx < 0 || dp < 0 || ds < 0 || wake >= 1LL << 30 || rx >= 1LL << 30
        || dp >= 1LL << 30 || ds >= 1LL << 30) {
        PyErr_SetString(PyExc_ValueError, "work model costs: 0 .. 2**30 - 1 ns");
        return -1;
    }
    e->work = work;
    /* napi.py PollClock(cfg, scale): int(cost * scale) */
    static const int num[3] = {1, 2, 1}, den[3] = {1, 1, 2};
    for (int k = 0; k < 3; k++)
        e->clk[k] = (Clock){.poll_wake_ns = wake * num[k] / den[k],
                            .poll_rx_ns = rx * num[k] / den[k],
                            .deliver_ns = dp * num[k] / den[k],
                            .deliver_seg_ns = ds * num[k] / den[k]};
    if (nlocal && nlocal != sizeof e->local) {
        PyErr_SetString(PyExc_ValueError, "local_ports: a bit set of 65536 ports");
        return -1;
    }
    e->nlocal = nlocal != 0;
    memset(e->local, 0, sizeof e->local);
    if (nlocal)
        memcpy(e->local, local, sizeof e->local);
    if (timeout < 0 || budget < 0) {
        PyErr_SetString(PyExc_ValueError, "bad gro_flush_timeout or napi_budget");
        return -1;
    }
    e->timeout = timeout;
    e->budget = budget;
    e->budget_old = budget_old;
    e->in_poll = 0;
    e->udp_gro = udp_gro;
    e->fraglist = fraglist;
    if (limit < 1 || limit > 0x7FFFFFFF || jiffy <= 0 || ng_div <= 0) {
        PyErr_SetString(PyExc_ValueError, "bad limit, jiffy or pcapng_div");
        return -1;
    }
    e->ng = ng;
    e->ng_swap = ng_swap;
    e->ng_div = ng_div;
    e->ng_tmax = TS_MAX_NG;
    e->annotate = ng && annotate;     /* classic pcap holds no comments */
    e->limit = (uint32_t)limit;
    e->gap = gap;
    /* napi.py PollShifts: 2 * gap (saturated: cfast keeps gap within
     * +-2**62), gap >> 1 (arithmetic, as Python's) */
    e->gap2 = gap > INT64_MAX / 2 ? INT64_MAX : gap < INT64_MIN / 2 ? INT64_MIN : gap * 2;
    e->gaph = gap >= 0 ? gap / 2 : -((-gap + 1) / 2);
    e->jiffy = jiffy;
    e->verify = verify;
    e->csum_valid = csum_valid;
    e->hash_flow = hash_flow;
    e->vlan = vlan;
    return 0;
}

static void Engine_dealloc(Engine *e)
{
    for (int s = 0; s < MAXHELD; s++) {
        free(e->aggs[s].pay);
        free(e->aggs[s].hdr);
        PyMem_Free(e->aggs[s].rows.p);
        PyMem_Free(e->aggs[s].mrows.p);
        PyMem_Free(e->aggs[s].hopt.p);
    }
    PyMem_Free(e->opts.p);
    PyMem_Free(e->txt.p);
    PyMem_Free(e->rec.p);
    PyMem_Free(e->hbig.p);
    free(e->hist);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* The EtherType of a BSD loopback frame f (DLT_NULL 0: the address
 * family in the writer's byte order, read little-endian unless that is
 * over 0xFFFF; DLT_LOOP 108: network order), as linklayer.network_layer:
 * AF_INET 2 -> IPv4, the AF_INET6 values seen (10, 24, 28, 30) -> IPv6,
 * else 0 */
static uint32_t loop_family(int linktype, const uint8_t *f)
{
    uint32_t fam = be32(f);
    if (linktype == 0) {
        uint32_t le = bswap32(fam);
        if (le <= 0xFFFF)
            fam = le;
    }
    if (fam == 2)
        return 0x0800;
    if (fam == 10 || fam == 24 || fam == 28 || fam == 30)
        return 0x86DD;
    return 0;
}

/* The record header step for a classic pcap record at offset off of buf:
 * its frame (*f, *cap bytes captured, *orig on the wire) and time *ts (ns)
 * when captured <= original length, the frame within buf and the fraction
 * within a second; 0 when not. */
static int pcap_header(const Engine *e, const uint8_t *buf, Py_ssize_t blen, Py_ssize_t off,
                       const uint8_t **f, uint32_t *cap, uint32_t *orig, int64_t *ts)
{
    if (off < 0 || off + 16 > blen)
        return 0;
    const uint8_t *r = buf + off;
    uint32_t h[4];
    memcpy(h, r, 16);
    if (e->in_swap) {
        h[0] = bswap32(h[0]); h[1] = bswap32(h[1]);
        h[2] = bswap32(h[2]); h[3] = bswap32(h[3]);
    }
    if (h[2] > h[3] || off + 16 + (Py_ssize_t)h[2] > blen)
        return 0;
    if ((int64_t)h[1] * e->in_mul >= 1000000000)
        return 0;               /* a fraction of a second out of range */
    *f = r + 16;
    *cap = h[2];
    *orig = h[3];
    *ts = (int64_t)h[0] * 1000000000 + (int64_t)h[1] * e->in_mul;
    return 1;
}

/* The record header step for an enhanced packet block at offset off of buf
 * (checked by the reader, options included: pcapgro/capture/pcapng.py):
 * its frame, lengths, block length (*bl_out) and time ((ticks_hi << 32 |
 * ticks_lo) * in_mul + in_off ns) when it is of interface in_iface,
 * captured <= original length, and its time is one the output holds
 * (0 <= ts < ts_max); 0 when not. */
static int epb_header(const Engine *e, const uint8_t *buf, Py_ssize_t blen, Py_ssize_t off,
                      const uint8_t **f, uint32_t *cap, uint32_t *orig, int64_t *ts,
                      uint32_t *bl_out)
{
    if (off < 0 || off + 32 > blen)
        return 0;
    uint32_t h[7];
    memcpy(h, buf + off, 28);
    if (e->in_swap)
        for (int k = 0; k < 7; k++)
            h[k] = bswap32(h[k]);
    uint64_t bl = 32 + (((uint64_t)h[5] + 3) & ~(uint64_t)3);
    if (h[0] != BT_EPB || h[1] < bl || h[2] != e->in_iface
            || h[5] > h[6] || off + (Py_ssize_t)h[1] > blen)
        return 0;
    uint64_t ticks = (uint64_t)h[3] << 32 | h[4];
    int64_t t;
    if (e->in_bin) {            /* < 2**94 before the shift: may not fit 63 bits after it */
        unsigned __int128 x = ((unsigned __int128)ticks * 1000000000) >> e->in_bin;
        if (x > INT64_MAX)
            return 0;
        t = (int64_t)x;
    } else if (e->in_fine)        /* < 2**61 */
        t = (int64_t)(ticks / (uint64_t)e->in_fine);
    else if (ticks > INT64_MAX || __builtin_mul_overflow((int64_t)ticks, e->in_mul, &t))
        return 0;
    if (t < 0 || __builtin_add_overflow(t, e->in_off, &t) || t < 0
            || t >= (e->ng ? e->ng_tmax : TS_MAX_PCAP))
        return 0;
    *f = buf + off + 28;
    *cap = h[5];
    *orig = h[6];
    *ts = t;
    *bl_out = h[1];
    return 1;
}

/* The link layer step of frame f of cap bytes, as linklayer.network_layer:
 * Ethernet and every in-band 802.1Q / 802.1ad tag after it (the TPIDs
 * vlan_gro_receive registers for); Linux cooked v1 / v2; raw IP; BSD
 * loopback.  Sets *l3 (network header offset), *tags and *et: 0x0800 or
 * 0x86DD, else 0 (no IPv4 / IPv6 reachable: dev_gro_receive finds no
 * packet_offload). */
static void link_layer(const Engine *e, const uint8_t *f, uint32_t cap, uint32_t *l3p,
                       uint32_t *etp, uint32_t *tagsp)
{
    uint32_t l3 = 0, et = 0, tags = 0;
    switch (e->linktype) {
    case 1:
        if (cap < 14)
            break;
        l3 = 12;
        et = be16(f + 12);
        while (et == 0x8100 || et == 0x88A8) {
            l3 += 4;
            tags++;
            if (cap < l3 + 2) {
                et = 0;
                break;
            }
            et = be16(f + l3);
        }
        l3 += 2;
        break;
    case 113:                   /* LINUX_SLL: protocol at 14 */
        if (cap >= 16) {
            l3 = 16;
            et = be16(f + 14);
        }
        break;
    case 276:                   /* LINUX_SLL2: protocol first */
        if (cap >= 20) {
            l3 = 20;
            et = be16(f);
        }
        break;
    case 12: case 14: case 101: case 228: case 229:     /* raw IP: the version */
        if (cap)
            et = f[0] >> 4 == 4 ? 0x0800 : f[0] >> 4 == 6 ? 0x86DD : 0;
        break;
    case 0: case 108:           /* BSD loopback: a 4-byte address family */
        if (cap >= 4) {
            l3 = 4;
            et = loop_family(e->linktype, f);
        }
        break;
    }
    *l3p = l3;
    *etp = et == 0x0800 || et == 0x86DD ? et : 0;
    *tagsp = tags;
}

static inline int rx_pass(Seg *g, int reason)
{
    g->pass = reason;
    return RX_PASS;
}

/* inet_gro_receive (ipv4.py receive) up to its L4 handler, for the IPv4
 * header at g->l3: header cut short (skb_gro_header), no inet_offloads
 * handler for the protocol, options (*(u8 *)iph != 0x45), a fragment
 * (ip_is_fragment), a bad header checksum (ip_fast_csum) pass; a total
 * length other than the bytes on the wire or the reserved bit set the L3
 * flush.  RX_TUN: a protocol whose handler is not TCP / UDP (a tunnel:
 * rx_tunnel), after the same checks (g->l4, flush_l3, df set). */
static int rx_ipv4(const Engine *e, Seg *g, uint32_t *proto)
{
    const uint8_t *f = g->f;
    uint32_t l3 = g->l3;
    if (g->n < l3 + 20)
        return rx_pass(g, P_TRUNCATED);
    uint32_t p = f[l3 + 9];
    if (!e->inet[p])
        return rx_pass(g, P_NO_HANDLER);
    if (e->inet[p] > 2)
        return RX_NO;
    if (f[l3] != 0x45)
        return rx_pass(g, P_IP_OPTIONS);
    uint32_t frag = be16(f + l3 + 6);
    if (frag & 0x3FFF)
        return rx_pass(g, P_FRAGMENT);
    if (ip4_csum_bad(f + l3))
        return rx_pass(g, P_BAD_IP_CSUM);
    g->flush_l3 = be16(f + l3 + 2) != g->orig - l3 || (frag & 0x8000);
    g->df = frag & 0x4000;
    g->l4 = l3 + 20;
    *proto = p;
    return e->inet[p] == 2 ? RX_TUN : RX_SEG;
}

/* ipv6_gro_receive (ipv6.py receive) up to its L4 handler, for the IPv6
 * header at g->l3: Hop-by-Hop, Routing and Destination Options headers
 * walked (ipv6_gso_pull_exthdrs); a header cut short, a Fragment header, a
 * protocol without an inet6_offloads handler (behind extension headers:
 * ext_header) pass; a payload length other than the bytes on the wire sets
 * the L3 flush.  RX_TUN: a tunnel (rx_tunnel; g->l4, flush_l3 set); RX_NO: a
 * tunnel behind more than EXTMAX bytes of extension headers (this loop's
 * limit). */
static int rx_ipv6(const Engine *e, Seg *g, uint32_t *proto)
{
    const uint8_t *f = g->f;
    uint32_t l3 = g->l3, cap = g->n;
    if (cap < l3 + 40)
        return rx_pass(g, P_TRUNCATED);
    uint32_t off = l3 + 40, nh = f[l3 + 6];
    while (nh == 0 || nh == 43 || nh == 60) {
        if (cap < off + 8)
            return rx_pass(g, P_TRUNCATED);
        nh = f[off];
        off += (uint32_t)(f[off + 1] + 1) << 3;
    }
    if (nh == 44)
        return rx_pass(g, P_FRAGMENT);
    if (!e->inet[nh])
        return rx_pass(g, off == l3 + 40 ? P_NO_HANDLER : P_EXT_HEADER);
    if (cap < off)
        return rx_pass(g, P_TRUNCATED);
    if (e->inet[nh] > 2 || (e->inet[nh] == 2 && off - l3 - 40 > EXTMAX))
        return RX_NO;
    g->flush_l3 = be16(f + l3 + 4) != g->orig - l3 - 40;
    g->df = 0;
    g->l4 = off;
    *proto = nh;
    return e->inet[nh] == 2 ? RX_TUN : RX_SEG;
}

/* tcp_gro_pull_header / udp_gro_udphdr (tcp.py parse_tcp, udp.py
 * parse_udp) for the header at g->l4: cut short, or a TCP data offset
 * below 5, pass */
static int rx_l4(Seg *g, uint32_t proto)
{
    const uint8_t *f = g->f;
    uint32_t l4 = g->l4;
    g->udp = proto == 17;
    if (g->udp) {
        if (g->n < l4 + 8)
            return rx_pass(g, P_TRUNCATED);
        g->hl = 8;
        g->ulen = be16(f + l4 + 4);
        g->ucsum = be16(f + l4 + 6);
        return RX_SEG;
    }
    if (g->n < l4 + 20)
        return rx_pass(g, P_TRUNCATED);
    uint32_t hl = (uint32_t)(f[l4 + 12] >> 4) << 2;
    if (hl < 20)
        return rx_pass(g, P_BAD_TCP_HEADER);
    if (g->n < l4 + hl || g->orig < l4 + hl)
        return rx_pass(g, P_TRUNCATED);
    g->hl = hl;
    return RX_SEG;
}

/* ---------------------------------------------------------- tunnels
 * One tunnel level, as the Python reference walks it (pcapgro/gro/encap.py,
 * gre.py, ipip.py, udp_tunnel.py): the outer IP level (rx_ipv4 / rx_ipv6,
 * [rx_l4 for UDP], as for any packet: its L3 flush kept), then the tunnel
 * header, then the inner packet through rx_ipv4 / rx_ipv6 and rx_l4 again
 * (encap.py inner_receive: the inner EtherType's handler); the flow key
 * covers the outer bytes the kernel compares (Tun.key) and the inner flow.
 * What a tunnel may bring that the reference passes (a header cut short, a
 * second tunnel level, flags, a bad outer checksum...) is passed here the
 * same way; a frame cut by a snaplen or L3-flushed goes on as the reference
 * takes it.  Not handled here (the run stops): a key or headers over
 * TKEYMAX / HDRMAX bytes. */

#define GRE_CSUM 0x8000
#define GRE_KEY 0x2000
#define ETH_P_TEB 0x6558

/* parse step verdict: g is passed up for reason r (a tunnel case the
 * reference passes); the step returns 0 (no Seg) */
#define PASS(g, r) ((g)->pass = (r) + 1, 0)

/* Seg.ocnt values beyond the checksum verdicts: an outer checksum not
 * verified, the outer level L3-flushed or the frame cut by a snaplen
 * (csum.verify and gre._csum_ok count it skipped) */
#define OCNT_SKIP_L3 4
#define OCNT_SKIP_CUT 5

static inline int port_bit(const uint8_t *set, uint32_t port)
{
    return set[port >> 3] >> (port & 7) & 1;
}

/* The tunnel the header at l4 of protocol proto opens (the inet_offloads
 * entries with a tunnel callback: ipip_gro_receive, gre_gro_receive,
 * udp_gro_receive on a port with a tunnel socket: VXLAN first), T_NONE
 * when none */
static int tun_kind(const Engine *e, const uint8_t *f, uint32_t l4, uint32_t proto, int v6)
{
    if (proto == 4)
        return v6 ? T_IP4IP6 : T_IPIP;
    if (proto == 41)
        return v6 ? T_IP6IP6 : T_SIT;
    if (proto == 47)
        return T_GRE;
    if (proto == 17 && e->ntun) {
        uint32_t port = be16(f + l4 + 2);
        if (port_bit(e->vxlan, port))
            return T_VXLAN;
        if (port_bit(e->geneve, port))
            return T_GENEVE;
    }
    return T_NONE;
}

/* n bytes appended to the tunnel key of g; 0 when they do not fit */
static int tkey_add(Seg *g, const uint8_t *p, uint32_t n)
{
    if (g->t.klen + n > TKEYMAX)
        return 0;
    memcpy(g->t.key + g->t.klen, p, n);
    g->t.klen += n;
    return 1;
}

/* outer_id (encap.py): the outer IP bytes that say "same tunnel": IPv4
 * protocol and addresses (inet_gro_receive); IPv6 version / flow label
 * word, next header, addresses and extension headers (ipv6_gro_receive) */
static int tkey_outer(Seg *g, const uint8_t *f, uint32_t l3, uint32_t l4, int v6)
{
    g->t.klen = 0;
    if (!v6)
        return tkey_add(g, f + l3 + 9, 1) && tkey_add(g, f + l3 + 12, 8);
    uint32_t w = be32(f + l3) & 0xF00FFFFFu;
    uint8_t b[5] = {(uint8_t)(w >> 24), (uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w,
                    f[l3 + 6]};
    return tkey_add(g, b, 5) && tkey_add(g, f + l3 + 8, l4 - l3 - 8);
}

/* the outer checksum of g not verified (the outer level L3-flushed, or the
 * frame cut by a snaplen: csum.verify, gre._csum_ok), counted skipped;
 * 0 when it is to be verified */
static int ocsum_skipped(Seg *g)
{
    if (!g->flush_l3 && g->n == g->orig)
        return 0;
    g->ocnt = g->flush_l3 ? OCNT_SKIP_L3 : OCNT_SKIP_CUT;
    return 1;
}

/* eth_gro_receive for a tunnel's inner Ethernet header at mac (encap.py
 * inner_ethernet, linklayer.network_layer): cut short (truncated), a tag
 * cut short or an EtherType other than IPv4 / IPv6 (tunnel_inner), VLAN
 * tags with VLAN GRO off (no_handler) pass; the header joins the tunnel
 * key.  Sets *l3, *et; 0 when not handled or passed. */
static int inner_eth(const Engine *e, const uint8_t *f, uint32_t cap, uint32_t mac, Seg *g,
                     uint32_t *l3, uint32_t *et)
{
    uint32_t o = mac + 12, tags = 0;
    if (mac + 14 > cap)
        return PASS(g, P_TRUNCATED);
    uint32_t x = be16(f + o);
    while (x == 0x8100 || x == 0x88A8) {
        o += 4;
        tags++;
        if (o + 2 > cap)
            return PASS(g, P_TUNNEL_INNER);
        x = be16(f + o);
    }
    if (x != 0x0800 && x != 0x86DD)
        return PASS(g, P_TUNNEL_INNER);
    if (tags && !e->vlan)
        return PASS(g, P_NO_HANDLER);
    *l3 = o + 2;
    *et = x;
    return tkey_add(g, f + mac, o + 2 - mac);
}

/* gre_gro_receive (net/ipv4/gre_offload.c; gre.py receive) for the GRE
 * header at h: cut short (truncated), flags other than K and C
 * (gre_flags), an inner EtherType without a GRO handler (tunnel_inner), a
 * bad checksum when verified (skb_gro_checksum_simple_validate; skipped
 * on an L3 flush or a cut) pass; inner IPv4, IPv6 or ETH_P_TEB (an inner
 * Ethernet header); same-flow bytes: flags and protocol, with K the next
 * word (the checksum word when C is set too: the kernel compares
 * *(greh + 1)).  Sets *l3, *et; 0 when not handled or passed. */
static int gre_level(const Engine *e, const uint8_t *f, uint32_t cap, uint32_t h, Seg *g,
                     uint32_t *l3, uint32_t *et)
{
    if (h + 4 > cap)
        return PASS(g, P_TRUNCATED);
    uint32_t flags = be16(f + h), x = be16(f + h + 2);
    if (flags & ~(uint32_t)(GRE_KEY | GRE_CSUM))
        return PASS(g, P_GRE_FLAGS);
    if (x != ETH_P_TEB && x != 0x0800 && x != 0x86DD)
        return PASS(g, P_TUNNEL_INNER);
    uint32_t hl = 4 + (flags & GRE_KEY ? 4 : 0) + (flags & GRE_CSUM ? 4 : 0);
    if (h + hl > cap)
        return PASS(g, P_TRUNCATED);
    if (flags & GRE_CSUM && e->verify && !ocsum_skipped(g)) {
        g->ocnt = sum16(f + h, cap - h) ? 3 : 1;
        if (g->ocnt == 3)
            return PASS(g, P_BAD_GRE_CSUM);
    }
    g->t.csum_at = flags & GRE_CSUM ? h + 4 : 0;
    if (!tkey_add(g, f + h, flags & GRE_KEY ? 8 : 4))
        return 0;
    if (x == ETH_P_TEB)
        return inner_eth(e, f, cap, h + hl, g, l3, et);
    *l3 = h + hl;
    *et = x;
    return 1;
}

/* udp_gro_receive's tunnel branch (net/ipv4/udp_offload.c; udp_tunnel.py
 * receive) for the UDP header at u: a nonzero outer checksum verified (a
 * pseudo-header seed trusted: csum.verify; skipped on an L3 flush or a
 * cut), then vxlan_gro_receive (drivers/net/vxlan/vxlan_core.c: the 8-byte
 * header, an inner Ethernet header) or geneve_gro_receive
 * (drivers/net/geneve.c: version 0, no OAM, options, the inner
 * EtherType's handler); a header cut short passes (truncated); same-flow
 * bytes: the ports, the checksum's zero-ness, the whole tunnel header.
 * Sets *l3, *et; 0 when not handled or passed. */
static int udp_tunnel_level(const Engine *e, const uint8_t *f, uint32_t cap, uint32_t u,
                            Seg *g, uint32_t *l3, uint32_t *et)
{
    uint32_t h = u + 8, hl = 8, ck = be16(f + u + 6);
    if (ck && e->verify && !ocsum_skipped(g)) {
        uint64_t ps = pseudo_sum(f, g->t.l3, g->t.v6, 17, cap - u);
        uint32_t sd = (uint32_t)(ps % 0xFFFF);
        if ((ps + sum16(f + u, cap - u)) % 0xFFFF == 0)
            g->ocnt = 1;
        else if (ck == (sd ? sd : 0xFFFF))
            g->ocnt = 2;
        else
            return g->ocnt = 3, PASS(g, P_BAD_UDP_CSUM);
    }
    g->t.csum_at = ck ? u + 6 : 0;
    uint8_t z = ck != 0;
    if (!tkey_add(g, f + u, 4) || !tkey_add(g, &z, 1))
        return 0;
    if (h + 8 > cap)
        return PASS(g, P_TRUNCATED);
    if (g->t.kind == T_VXLAN)
        return tkey_add(g, f + h, 8) && inner_eth(e, f, cap, h + 8, g, l3, et);
    if (f[h] >> 6 || f[h + 1] & 0x80)
        return PASS(g, P_GENEVE_HEADER);
    hl += (f[h] & 0x3Fu) * 4;
    uint32_t x = be16(f + h + 2);
    if (h + hl > cap)
        return PASS(g, P_TRUNCATED);
    if (!tkey_add(g, f + h, hl))
        return 0;
    if (x == ETH_P_TEB)
        return inner_eth(e, f, cap, h + hl, g, l3, et);
    *l3 = h + hl;
    *et = x;
    return x == 0x0800 || x == 0x86DD ? 1 : PASS(g, P_TUNNEL_INNER);
}

/* The tunnel header's step (encap.py inner_receive's callers) for the
 * outer level of kind, parsed in g (l3, l4, v6, df, flush_l3), kept in
 * g->t; IP-in-IP (ipip_gro_receive, net/ipv4/af_inet.c;
 * sit_ip6ip6_gro_receive, ip4ip6_gro_receive, net/ipv6/ip6_offload.c):
 * the inner IP header right after the outer one.  Sets *il3, *et of the
 * inner IP header; 0 when not handled or passed (g->pass). */
static int tunnel_level(const Engine *e, Seg *g, int kind, uint32_t *il3, uint32_t *et)
{
    const uint8_t *f = g->f;
    uint32_t l3 = g->l3, l4 = g->l4;
    Tun *t = &g->t;
    t->kind = kind;
    t->v6 = g->v6;
    t->l3 = l3;
    t->toff = l4;
    t->csum_at = 0;
    t->df = g->df;
    if (g->v6) {
        t->tosttl = (((be32(f + l3) >> 20) & 0xFF) << 8) | f[l3 + 7];
        t->ipid = 0;
    } else {
        t->tosttl = ((uint32_t)f[l3 + 1] << 8) | f[l3 + 8];
        t->ipid = be16(f + l3 + 4);
    }
    if (!tkey_outer(g, f, l3, l4, g->v6))
        return 0;
    if (kind == T_GRE)
        return gre_level(e, f, g->n, l4, g, il3, et);
    if (kind >= T_VXLAN)
        return udp_tunnel_level(e, f, g->n, l4, g, il3, et);
    *il3 = l4;
    *et = kind == T_IPIP || kind == T_IP4IP6 ? 0x0800 : 0x86DD;
    return 1;
}

/* A tunnelled frame: g holds its outer IP level as rx_ipv4 / rx_ipv6 (and
 * rx_l4 for UDP) parsed it, proto its protocol (encap.py inner_receive).
 * The tunnel header's step, then the inner IP level and its TCP / UDP
 * header as a plain packet's (rx_ipv4 / rx_ipv6, rx_l4: the same passes);
 * an inner protocol with a tunnel callback of its own passes
 * (tunnel_nested: encap_mark, one level only).  The inner L3 flush is
 * OR-ed with the outer one (g->flush_l3, g->cflush: NAPI_GRO_CB(skb)->flush
 * is one flag, and tcp4/udp4_gro_receive skip the inner checksum when
 * either level set it, as encap.py inner_receive).  RX_SEG (g filled as
 * parse_frame fills it, the L4 fields the inner flow's, g->t the outer
 * level), RX_PASS (g->pass), RX_NO (not handled here: the Python
 * engine's). */
static int rx_tunnel(const Engine *e, Seg *g, uint32_t proto)
{
    int kind = tun_kind(e, g->f, g->l4, proto, g->v6), oflush = g->flush_l3;
    uint32_t l3, et;
    if (!kind)
        return RX_NO;
    g->pass = 0;
    if (!tunnel_level(e, g, kind, &l3, &et))
        return g->pass ? rx_pass(g, g->pass - 1) : RX_NO;
    g->l3 = l3;
    g->v6 = et == 0x86DD;
    int r = g->v6 ? rx_ipv6(e, g, &proto) : rx_ipv4(e, g, &proto);
    if (r == RX_SEG)
        r = rx_l4(g, proto);
    if (r == RX_TUN || (r == RX_SEG && g->udp && tun_kind(e, g->f, g->l4, 17, g->v6)))
        return rx_pass(g, P_TUNNEL_NESTED);
    if (r != RX_SEG)
        return r;
    if (g->l4 + g->hl > HDRMAX)
        return RX_NO;
    g->flush_l3 |= oflush;
    g->cflush = g->flush_l3;    /* one flush flag for all levels: an outer L3 flush
                                   skips the inner checksum too (encap.py) */
    return RX_SEG;
}

/* The frame step (dev_gro_receive down to the L4 handler's header pull),
 * frame f of cap bytes captured, orig on the wire: RX_SEG with g filled
 * (but for psum and seg_fields') when it is a segment for the GRO lists,
 * RX_PASS when the reference passes it before flow matching (g->pass),
 * RX_NO when this loop does not handle it (see the file comment).  The
 * checks of pcapgro/gro/engine.py _parse, ipv4.py, ipv6.py, tcp.py and
 * udp.py, in their order. */
static int parse_frame(const Engine *e, const uint8_t *f, uint32_t cap, uint32_t orig, Seg *g)
{
    uint32_t et, tags, proto = 0;
    g->f = f;
    g->n = cap;
    g->orig = orig;
    link_layer(e, f, cap, &g->l3, &et, &tags);
    if (!et)
        return rx_pass(g, P_NOT_IP);
    if (tags && !e->vlan)
        return rx_pass(g, P_NO_HANDLER);    /* no vlan_gro_receive */
    g->tags = tags;
    g->v6 = et == 0x86DD;
    g->t.kind = T_NONE;
    g->t.l3 = g->l3;
    g->ocnt = 0;
    int r = g->v6 ? rx_ipv6(e, g, &proto) : rx_ipv4(e, g, &proto);
    if (r == RX_SEG)
        r = rx_l4(g, proto);
    if (r == RX_SEG && g->udp && e->ntun && tun_kind(e, f, g->l4, 17, g->v6))
        r = RX_TUN;             /* UDP to a VXLAN / Geneve port */
    if (r == RX_TUN)
        r = tags > MAXTAGS ? RX_NO : rx_tunnel(e, g, proto);
    else
        g->cflush = g->flush_l3;
    if (r != RX_SEG)
        return r;
    g->ext = g->v6 ? g->l4 - g->l3 - 40 : 0;
    g->pay = g->l4 + g->hl;
    g->L = orig - g->pay;       /* skb_gro_len: from the original length */
    g->psum = 0;
    g->partial = 0;
    return RX_SEG;
}

/* The record at offset off of buf (a classic pcap record or an EPB, as
 * in_epb says): its time *ts and parse_frame's verdict (RX_NO as well when
 * the record header step does not take it). */
static int parse_record(const Engine *e, const uint8_t *buf, Py_ssize_t blen,
                        Py_ssize_t off, Seg *g, int64_t *ts)
{
    const uint8_t *f;
    uint32_t cap, orig, bl;
    g->opt = NULL;              /* none (a classic pcap record): Engine.ropt copies it */
    g->optn = 0;
    if (!e->in_epb)
        return pcap_header(e, buf, blen, off, &f, &cap, &orig, ts)
               ? parse_frame(e, f, cap, orig, g) : RX_NO;
    if (!epb_header(e, buf, blen, off, &f, &cap, &orig, ts, &bl))
        return RX_NO;
    /* the EPB's options: after the frame (padded to 32 bits), up to the
     * block's trailing length (bl, as epb_header read and checked it) */
    uint32_t o = 28 + ((cap + 3) & ~3u);
    g->opt = buf + off + o;
    g->optn = bl - 4 - o;
    return parse_frame(e, f, cap, orig, g);
}

/* csum.verify's verdict on a segment it does not sum (no cblock): an L3
 * flush of its own IP level, a segment cut by a snaplen, or a UDP datagram
 * without a checksum (counted as skipped: l3_flush when either level of a
 * tunnel has the L3 flush, else truncated when cut, else udp_zero) */
static int csum_skipped(Engine *e, const Seg *g, int count)
{
    int cut = g->n < g->orig;
    if (!(g->cflush || cut || (g->udp && !g->ucsum)))
        return 0;
    if (count && g->flush_l3)
        e->skip_l3++;
    else if (count && (cut || g->cflush))
        e->skip_cut++;
    else if (count)
        e->skip_udp0++;
    return 1;
}

/* the outer checksum's verdict on tunnelled packet g (GRE, a tunnel's
 * UDP: g->ocnt), counted once */
static void count_outer(Engine *e, Seg *g)
{
    e->verified += g->ocnt == 1;
    e->seed += g->ocnt == 2;
    e->csum_bad += g->ocnt == 3;
    e->skip_l3 += g->ocnt == OCNT_SKIP_L3;
    e->skip_cut += g->ocnt == OCNT_SKIP_CUT;
    g->ocnt = 0;
}

/* The payload sum of g when checksums are verified or needed for --csum
 * valid (RFC 1624: from the checksum field, or from the bytes when the
 * field holds the pseudo-header seed); the rules of pcapgro/gro/csum.py
 * (skb_gro_checksum_validate in tcp4_gro_receive / udp4_gro_receive and
 * their IPv6 twins): a bad checksum passes (RX_PASS), else RX_SEG.
 * count: add to the checksum counters. */
static int seg_csum(Engine *e, Seg *g, int count)
{
    const uint8_t *f = g->f;
    if (count)
        count_outer(e, g);          /* GRE, a tunnel's UDP: verified first */
    if (!(e->verify || e->csum_valid))
        return RX_SEG;
    if (e->verify && csum_skipped(e, g, count))
        return RX_SEG;
    if (g->n < g->orig)
        return RX_SEG;          /* cut: its aggregate's checksum is the seed */
    uint32_t l3 = g->l3, l4 = g->l4;
    uint32_t proto = g->udp ? 17 : 6, at = g->udp ? 6 : 16;
    uint64_t pseudo = pseudo_sum(f, l3, g->v6, proto, g->n - l4);
    uint32_t th = sum16(f + l4, g->hl);
    uint32_t sd = (uint32_t)(pseudo % 0xFFFF);
    if (!sd)
        sd = 0xFFFF;
    if (e->verify) {
        uint32_t ps = sum16(f + g->pay, g->L);
        if ((pseudo + th + ps) % 0xFFFF == 0) {
            if (count)
                e->verified++;
        } else if (be16(f + l4 + at) == sd) {
            /* CHECKSUM_PARTIAL (a sender's capture): trusted, csum.verify */
            if (count)
                e->seed++;
            g->partial = 1;
        } else {
            if (count)
                e->csum_bad++;
            return rx_pass(g, g->udp ? P_BAD_UDP_CSUM : P_BAD_TCP_CSUM);
        }
        g->psum = ps;
        return RX_SEG;
    }
    /* UDP and tunnelled flows: always from the bytes (complete.py
     * _l4_checksum, encap.py complete_levels) */
    if (g->udp || g->t.kind || be16(f + l4 + at) == sd)
        g->psum = sum16(f + g->pay, g->L);
    else
        g->psum = (uint32_t)((0xFFFF - (pseudo + th) % 0xFFFF) % 0xFFFF);
    return RX_SEG;
}

/* parse_record, then (a segment) seg_csum: what run() does with the record
 * at offset off of buf (RX_NO: not handled, the run ends) */
static int classify(Engine *e, const uint8_t *buf, Py_ssize_t blen, Py_ssize_t off, Seg *g,
                    int64_t *ts, int count)
{
    int r = parse_record(e, buf, blen, off, g, ts);
    return r == RX_SEG ? seg_csum(e, g, count) : r;
}

/* the TCP/IP fields tcp_gro_receive and inet_gro_flush / ipv6_gro_flush
 * compare, and the flow key of the Python reference (ipv4.receive,
 * ipv6.receive): MAC header with its tags; IPv4: addresses, ports; IPv6:
 * version and flow label, next header, addresses, ports */
static void seg_fields(Seg *g)
{
    const uint8_t *f = g->f;
    uint32_t l3 = g->l3, l4 = g->l4;
    if (g->udp) {
        g->flags = g->word = g->seq = g->ack = 0;
    } else {
        g->flags = f[l4 + 13];
        g->word = be32(f + l4 + 12);
        g->seq = be32(f + l4 + 4);
        g->ack = be32(f + l4 + 8);
    }
    memset(g->key, 0, KEYMAX);
    uint32_t ml = g->t.l3 < L3MAX ? g->t.l3 : L3MAX;
    memcpy(g->key, f, ml);                      /* the link header (find: the rest) */
    g->key[KEYMAX - 1] = (uint8_t)g->t.kind;    /* a tunnel: its key in g->t */
    uint8_t *k = g->key + ml;
    if (g->v6) {
        uint32_t first = be32(f + l3);
        g->tosttl = (((first >> 20) & 0xFF) << 8) | f[l3 + 7];
        g->ipid = 0;
        first &= 0xF00FFFFFu;
        k[0] = (uint8_t)(first >> 24); k[1] = (uint8_t)(first >> 16);
        k[2] = (uint8_t)(first >> 8); k[3] = (uint8_t)first;
        k[4] = f[l3 + 6];
        memcpy(k + 5, f + l3 + 8, 32);          /* addresses */
        memcpy(k + 37, f + l4, 4);              /* ports */
        k[41] = (uint8_t)(g->ext >> 3);         /* extension headers (find) */
        k[42] = (uint8_t)(g->ext >> 11);
        k[43] = (uint8_t)(g->ext >> 19);
        k[44] = (uint8_t)(g->ext >> 27);
    } else {
        g->tosttl = ((uint32_t)f[l3 + 1] << 8) | f[l3 + 8];
        g->ipid = be16(f + l3 + 4);
        memcpy(k, f + l3 + 12, 12);             /* addresses, ports */
        k[12] = f[l3 + 9];                      /* protocol */
    }
    g->kh = key_hash(g->key);
}

/* the output buffer of a run: at most the records from start on plus what
 * is held (an aggregate is never longer than the records it was made of) */
static int run_begin(Engine *e, PyObject *recs, Py_ssize_t start, Py_ssize_t blen)
{
    size_t bound = 0;
    if (start < PyList_GET_SIZE(recs)) {
        Py_ssize_t o = PyLong_AsSsize_t(PyList_GET_ITEM(recs, start));
        if (o >= 0 && o < blen)
            bound = (size_t)(blen - o);
        PyErr_Clear();
    }
    for (int s = 0; s < MAXHELD; s++)
        if (e->used[s])
            bound += 16 + e->aggs[s].hlen + e->aggs[s].paylen + e->aggs[s].reflen;
    e->outobj = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)bound);
    if (!e->outobj)
        return -1;
    e->out = (uint8_t *)PyByteArray_AS_STRING(e->outobj);
    e->outcap = bound;
    e->outlen = 0;
    e->nout = 0;
    e->outbytes = 0;
    e->maxcap = 0;
    e->error = 0;
    return 0;
}

/* the end of a run: what stays held stops referring to the chunk; the
 * result tuple of run() */
static PyObject *run_end(Engine *e, Py_ssize_t i)
{
    for (int s = 0; s < MAXHELD; s++)
        if (e->used[s])
            materialize(e, &e->aggs[s]);
    PyObject *out = e->outobj;
    e->outobj = NULL;
    e->out = NULL;
    if (e->error) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    if (PyErr_Occurred() || PyByteArray_Resize(out, (Py_ssize_t)e->outlen) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return Py_BuildValue("nNnkLiLK", i, out, e->nout, (unsigned long)e->maxcap,
                         (long long)e->last_ts, e->have_last, (long long)e->last_out_ts,
                         e->outbytes);
}

/* 10**e, e >= 0 */
static int64_t pow10i(int e)
{
    int64_t m = 1;
    while (e-- > 0)
        m *= 10;
    return m;
}

/* the input records of a run() / scan(): classic pcap (iface < 0) with
 * fraction unit mul, or EPBs of interface iface with time ticks * mul +
 * off; swap: not in host byte order.  Classic pcap output is in the input's
 * format unless output() said otherwise.  mul -k (1 <= k <= 63): a binary
 * resolution of EPBs, -(64 + e) (1 <= e <= 10) a decimal one of
 * 10**-(9 + e) s (cfast._in_unit) */
static void set_input(Engine *e, int linktype, long long mul, int swap, long long iface,
                      long long off)
{
    e->linktype = linktype;
    e->in_epb = iface >= 0;
    e->in_iface = (uint32_t)iface;
    e->in_mul = mul > 0 ? mul : 1;
    e->in_bin = mul < 0 && mul >= -63 ? (int)-mul : 0;
    e->in_fine = mul < -64 && mul >= -74 ? pow10i((int)(-mul - 64)) : 0;
    e->in_off = off;
    e->in_swap = swap;
    if (!e->out_fixed) {
        e->swap = swap;
        e->mul = e->in_mul;
    }
}

/* run(buf, recs, start, base, mul, swap, last_ts, have_last, last_out_ts
 * [, linktype, iface, off]) -> (k, out: bytes, n_out, max_caplen, last_ts,
 * have_last, last_out_ts, captured bytes out); iface >= 0: EPBs (set_input) */
static PyObject *Engine_run(Engine *e, PyObject *args)
{
    Py_buffer view;
    PyObject *recs;
    Py_ssize_t start;
    long long base, mul, last_ts, last_out_ts, iface = -1, ts_off = 0;
    int swap, have_last, linktype = 1;
    if (!PyArg_ParseTuple(args, "y*O!nLLpLpL|iLL", &view, &PyList_Type, &recs, &start, &base,
                          &mul, &swap, &last_ts, &have_last, &last_out_ts, &linktype, &iface,
                          &ts_off))
        return NULL;
    set_input(e, linktype, mul, swap, iface, ts_off);
    const uint8_t *buf = view.buf;
    Py_ssize_t blen = view.len;
    Py_ssize_t n = PyList_GET_SIZE(recs);
    if (e->ng && last_out_ts >= e->ng_tmax)
        n = start;              /* a time the EPBs would not hold: the reference's */
    if (run_begin(e, recs, start, blen) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    e->last_ts = last_ts;
    e->have_last = have_last;
    e->last_out_ts = last_out_ts;
    Py_ssize_t i;
    for (i = start; i < n; i++) {
        Seg g;
        int64_t ts;
        Py_ssize_t off = PyLong_AsSsize_t(PyList_GET_ITEM(recs, i));
        int r = classify(e, buf, blen, off, &g, &ts, 1);
        if (r == RX_NO)
            break;
        /* a passed packet counts in the NAPI poll as any other */
        poll_boundary(e, ts);
        e->have_last = 1;
        e->last_ts = ts;
        e->in_poll += e->budget != 0 && !e->work;
        e->ropt = g.opt;
        e->roptn = g.optn;
        if (r == RX_PASS) {
            count_outer(e, &g);
            pass_frame(e, g.pass, g.f, g.n, g.orig, ts, base + i);
        } else {
            seg_fields(&g);
            receive(e, &g, ts, base + i);
        }
        if (e->error)
            break;
    }
    PyBuffer_Release(&view);
    return run_end(e, i);
}

/* scan(buf, recs, start, mul, swap, run[, linktype, iface, off]) -> the
 * index i of the first record from start on such that run() handles
 * records i .. i+run-1 (those before len(recs)); len(recs) when none: where
 * a hand-over to the Python engine may end (issue 18.7).  Counts nothing. */
static PyObject *Engine_scan(Engine *e, PyObject *args)
{
    Py_buffer view;
    PyObject *recs;
    Py_ssize_t start, run;
    long long mul, iface = -1, ts_off = 0;
    int swap, linktype = 1;
    if (!PyArg_ParseTuple(args, "y*O!nLpn|iLL", &view, &PyList_Type, &recs, &start, &mul,
                          &swap, &run, &linktype, &iface, &ts_off))
        return NULL;
    set_input(e, linktype, mul, swap, iface, ts_off);
    Py_ssize_t n = PyList_GET_SIZE(recs), i, first = -1;
    for (i = start < 0 ? 0 : start; i < n; i++) {
        Seg g;
        int64_t ts;
        Py_ssize_t off = PyLong_AsSsize_t(PyList_GET_ITEM(recs, i));
        if (classify(e, view.buf, view.len, off, &g, &ts, 0) != RX_NO) {
            if (first < 0)
                first = i;
            if (i - first + 1 >= run)
                break;
        } else {
            first = -1;
        }
    }
    PyBuffer_Release(&view);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(first < 0 ? n : first);
}

/* the nonzero counters of a[0..n-1] as a tuple of (index, count) pairs:
 * in a run most counters stay 0, and the caller (cfast.CEngine.collect)
 * then adds only these (a run is ~350 packets: per-counter work in Python
 * was a tenth of a bulk merge's user time with the tunnel kinds) */
static PyObject *nonzero_pairs(const uint64_t *a, int n)
{
    int m = 0;
    for (int k = 0; k < n; k++)
        m += a[k] != 0;
    PyObject *t = PyTuple_New(m);
    for (int k = 0, j = 0; t && k < n; k++) {
        if (!a[k])
            continue;
        PyObject *p = Py_BuildValue("iK", k, (unsigned long long)a[k]);
        if (!p) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, j++, p);
    }
    return t;
}

/* stats() -> (flush counts, pass counts, verified, seed, singles, aggregates,
 * segments, hist list, aggregates by kind, segments by kind, checksums bad,
 * skipped_l3_flush, skipped_truncated, aggregates cut by a snaplen, bytes
 * they left out, skipped_udp_zero); the counts by reason and by kind as nonzero_pairs
 * (index: FLUSH_NAMES, PASS_NAMES, KIND_NAMES; a kind with aggregates has
 * segments, so both lists have the same indexes); resets them */
static PyObject *Engine_stats(Engine *e, PyObject *unused)
{
    PyObject *hi = PyList_New((Py_ssize_t)e->hist_n);
    if (!hi)
        return NULL;
    for (size_t k = 0; k < e->hist_n; k++)
        PyList_SET_ITEM(hi, (Py_ssize_t)k, PyLong_FromUnsignedLong(e->hist[k]));
    PyObject *r = Py_BuildValue("NNKKKKKNNNKKKKKK", nonzero_pairs(e->flush, F_N),
                                nonzero_pairs(e->pass, P_N), (unsigned long long)e->verified,
                                (unsigned long long)e->seed, (unsigned long long)e->singles,
                                (unsigned long long)e->aggregates, (unsigned long long)e->segs, hi,
                                nonzero_pairs(e->kind_aggs, K_N),
                                nonzero_pairs(e->kind_segs, K_N), (unsigned long long)e->csum_bad,
                                (unsigned long long)e->skip_l3, (unsigned long long)e->skip_cut,
                                (unsigned long long)e->cut_aggs, (unsigned long long)e->cut_left,
                                (unsigned long long)e->skip_udp0);
    if (!r)
        return NULL;
    memset(e->flush, 0, sizeof e->flush);
    memset(e->pass, 0, sizeof e->pass);
    e->verified = e->seed = e->singles = e->aggregates = e->segs = 0;
    e->csum_bad = e->skip_l3 = e->skip_cut = e->skip_udp0 = e->cut_aggs = e->cut_left = 0;
    memset(e->kind_aggs, 0, sizeof e->kind_aggs);
    memset(e->kind_segs, 0, sizeof e->kind_segs);
    e->hist_n = 0;
    return r;
}

/* release() -> list, bucket 0..7 oldest first, of (bucket, hash, head frame,
 * head_ts, head_idx, tail payload, count, mss, seq_next, size, fin_psh,
 * fixedid, age, head_psum, tail_psum, rows: the restore record's s= rows of
 * the merged segments when annotated, else '', fraglist, the head's
 * checksum held the seed, the head's original length, a segment was cut
 * by a snaplen, captured payload bytes left out after it, the outer IPv4
 * ID found fixed, the head's EPB options as read (pcapng output; b'':
 * none), their byte order not the host's, the m= entries of the merged
 * segments' options when annotated); the engine then holds nothing */
static PyObject *Engine_release(Engine *e, PyObject *unused)
{
    PyObject *lst = PyList_New(0);
    if (!lst)
        return NULL;
    for (int b = 0; b < NBUCKETS; b++) {
        for (int k = 0; k < e->bn[b]; k++) {
            Agg *a = &e->aggs[e->bk[b][k]];
            PyObject *head = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(a->hlen + a->head_cl));
            if (!head)
                goto fail;
            memcpy(PyBytes_AS_STRING(head), a->hdr, a->hlen);
            memcpy(PyBytes_AS_STRING(head) + a->hlen, a->pay, a->head_cl);
            PyObject *t = Py_BuildValue("ikNLLy#kkkkiiLkks#iikiKiy#is#", b,
                                        (unsigned long)a->hash,
                                        head, (long long)a->head_ts, (long long)a->head_idx,
                                        (const char *)a->pay + a->head_cl,
                                        (Py_ssize_t)(a->paylen - a->head_cl),
                                        (unsigned long)a->count, (unsigned long)a->mss,
                                        (unsigned long)a->seq_next, (unsigned long)a->size,
                                        a->fin_psh, a->fixedid, (long long)a->age,
                                        (unsigned long)a->head_psum, (unsigned long)a->tail_psum,
                                        a->rows.p ? a->rows.p : "", (Py_ssize_t)a->rows.n,
                                        a->flist, a->partial,
                                        (unsigned long)(a->hlen + a->head_L), a->cut,
                                        (unsigned long long)a->left, a->outer_fixedid,
                                        a->hopt.p ? a->hopt.p : "", (Py_ssize_t)a->hopt.n,
                                        a->hopt_swap, a->mrows.p ? a->mrows.p : "",
                                        (Py_ssize_t)a->mrows.n);
            if (!t || PyList_Append(lst, t) < 0) {
                Py_XDECREF(t);
                goto fail;
            }
            Py_DECREF(t);
        }
        e->bn[b] = 0;
    }
    memset(e->used, 0, sizeof e->used);
    e->nheld = 0;
    return lst;
fail:
    Py_DECREF(lst);
    return NULL;
}

/* output(swap, unit, off, iface): the layout of the records written from
 * now on (call while nothing is held).  pcapng: EPBs on interface iface,
 * not in host byte order when swap, timestamps (ts - off) // unit, or for
 * unit -k (a binary resolution, 1 <= k <= 63) or -(64 + e) (10**-(9 + e)
 * s, 1 <= e <= 10) ns_to_ts's ticks; classic
 * pcap: records not in host byte order when swap, fraction unit `unit` ns
 * (1 or 1000) -- else the input's format. */
static PyObject *Engine_output(Engine *e, PyObject *args)
{
    int swap;
    long long unit, off;
    unsigned long iface;
    if (!PyArg_ParseTuple(args, "pLLk", &swap, &unit, &off, &iface))
        return NULL;
    if ((unit <= 0 && !(e->ng && unit < 0 && unit >= -74 && unit != -64))
            || iface > 0xFFFFFFFFul
            || (!e->ng && unit != 1 && unit != 1000)) {
        PyErr_SetString(PyExc_ValueError, "output: bad unit or interface");
        return NULL;
    }
    if (e->ng) {
        e->ng_swap = swap;
        e->ng_bin = unit < 0 && unit >= -63 ? (int)-unit : 0;
        e->ng_fine = unit < -64 ? pow10i((int)(-unit - 64)) : 0;
        e->ng_div = unit < 0 ? 1 : unit;
        e->ng_tmax = TS_MAX_NG;
        if (unit < 0) {
            /* the times whose ticks (rounded up) stay under 2**64 */
            unsigned __int128 m = ((unsigned __int128)1 << 64) - 1;
            __int128 lim = (__int128)(e->ng_bin ? m * 1000000000u >> e->ng_bin
                                                : m / (uint64_t)e->ng_fine) + 1 + off;
            e->ng_tmax = lim < 0 ? 0 : lim < TS_MAX_NG ? (int64_t)lim : TS_MAX_NG;
        }
        e->ng_off = off;
        e->ng_iface = (uint32_t)iface;
    } else {
        e->out_fixed = 1;
        e->swap = swap;
        e->mul = unit;
    }
    Py_RETURN_NONE;
}

static PyObject *Engine_held(Engine *e, void *closure)
{
    return PyLong_FromLong(e->nheld);
}

/* in_poll: packets taken by the current NAPI poll (GROEngine.in_poll),
 * given before run() and read after it */
static PyObject *Engine_get_in_poll(Engine *e, void *closure)
{
    return PyLong_FromLongLong(e->in_poll);
}

static int Engine_set_in_poll(Engine *e, PyObject *v, void *closure)
{
    long long n = v ? PyLong_AsLongLong(v) : -1;
    if (n == -1 && (!v || PyErr_Occurred())) {
        if (!v)
            PyErr_SetString(PyExc_TypeError, "in_poll cannot be deleted");
        return -1;
    }
    e->in_poll = n;
    return 0;
}

/* one Clock's state as PollClock's (open, now, n, free or None) */
static PyObject *clock_state(const Clock *c)
{
    if (!c->has_free)
        return Py_BuildValue("(OLLO)", c->open ? Py_True : Py_False, (long long)c->now,
                             (long long)c->n, Py_None);
    return Py_BuildValue("(OLLL)", c->open ? Py_True : Py_False, (long long)c->now,
                         (long long)c->n, (long long)c->free);
}

static int clock_set(Clock *c, PyObject *v)
{
    PyObject *open, *free;
    long long now, n, fr = 0;
    if (!PyArg_ParseTuple(v, "OLLO", &open, &now, &n, &free))
        return -1;
    if (free != Py_None) {
        fr = PyLong_AsLongLong(free);
        if (fr == -1 && PyErr_Occurred())
            return -1;
    }
    int is_open = PyObject_IsTrue(open);
    if (is_open < 0)
        return -1;
    c->open = is_open;
    c->now = now;
    c->n = n;
    c->has_free = free != Py_None;
    c->free = fr;
    return 0;
}

/* clocks: the work model's clock and those with costs x2 and x0.5
 * (engine.py _clock, PollShifts.clocks), each as clock_state, given before
 * run() and read after it */
static PyObject *Engine_get_clocks(Engine *e, void *closure)
{
    return Py_BuildValue("(NNN)", clock_state(&e->clk[0]), clock_state(&e->clk[1]),
                         clock_state(&e->clk[2]));
}

static int Engine_set_clocks(Engine *e, PyObject *v, void *closure)
{
    if (!v || !PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 3) {
        PyErr_SetString(PyExc_TypeError, "clocks: a tuple of three clock states");
        return -1;
    }
    Clock c[3];
    memcpy(c, e->clk, sizeof c);
    for (int k = 0; k < 3; k++)
        if (clock_set(&c[k], PyTuple_GET_ITEM(v, k)) < 0)
            return -1;
    memcpy(e->clk, c, sizeof c);
    return 0;
}

/* timing_stats() -> (poll ends by gap bucket: nonzero_pairs, budget ends,
 * moved x2, moved x0.5) since the last call (GROStats.poll_gaps,
 * budget_ends, moved); resets */
static PyObject *Engine_timing_stats(Engine *e, PyObject *unused)
{
    PyObject *r = Py_BuildValue("NKKK", nonzero_pairs(e->poll_gaps, GAP_BUCKETS),
                                (unsigned long long)e->budget_ends,
                                (unsigned long long)e->moved2, (unsigned long long)e->movedh);
    if (!r)
        return NULL;
    memset(e->poll_gaps, 0, sizeof e->poll_gaps);
    e->budget_ends = e->moved2 = e->movedh = 0;
    return r;
}

static PyMethodDef Engine_methods[] = {
    {"run", (PyCFunction)Engine_run, METH_VARARGS,
     "run(buf, recs, start, base, mul, swap, last_ts, have_last, last_out_ts[, linktype, "
     "iface, off]) -> (k, out, n_out, max_caplen, last_ts, have_last, last_out_ts, "
     "nbytes): GRO over the classic pcap records (iface < 0) or EPBs of interface iface "
     "at offsets recs[start:] of buf until the first one not handled here (index k); "
     "out: the records handed up (output())."},
    {"scan", (PyCFunction)Engine_scan, METH_VARARGS,
     "scan(buf, recs, start, mul, swap, run[, linktype, iface, off]) -> index of the first "
     "record from start on that begins run records run() handles (len(recs) when none); "
     "counts nothing"},
    {"output", (PyCFunction)Engine_output, METH_VARARGS,
     "output(swap, unit, off, iface): the layout of the records written from now on"},
    {"stats", (PyCFunction)Engine_stats, METH_NOARGS,
     "stats() -> (flush, passed, verified, seed, singles, aggregates, segments, hist, "
     "aggregates by kind, segments by kind, bad, skipped_l3, skipped_cut, cut aggregates, "
     "cut bytes left); by reason / kind: (index, count) pairs of the nonzero; resets"},
    {"timing_stats", (PyCFunction)Engine_timing_stats, METH_NOARGS,
     "timing_stats() -> (poll ends by gap bucket: (index, count) pairs, budget ends, "
     "moved x2, moved x0.5); resets"},
    {"release", (PyCFunction)Engine_release, METH_NOARGS,
     "release() -> the held aggregates as tuples, bucket order; holds nothing after"},
    {NULL}
};

static PyGetSetDef Engine_getset[] = {
    {"held", (getter)Engine_held, NULL, "number of held packets", NULL},
    {"in_poll", (getter)Engine_get_in_poll, (setter)Engine_set_in_poll,
     "packets taken by the current NAPI poll (counted with a budget)", NULL},
    {"clocks", (getter)Engine_get_clocks, (setter)Engine_set_clocks,
     "the work model's clock and those with costs x2 and x0.5: three (open, now, n, free "
     "or None), as PollClock's", NULL},
    {NULL}
};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pcapgro._native.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The compiled GRO core: TCP/UDP over IPv4/IPv6, one tunnel level (see the "
              "module source).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
    .tp_getset = Engine_getset,
};

static PyObject *py_sum16(PyObject *self, PyObject *args)
{
    Py_buffer v;
    int simd = 1;
    if (!PyArg_ParseTuple(args, "y*|p", &v, &simd))
        return NULL;
    uint32_t s = sum16_with(v.buf, (size_t)v.len, simd);
    PyBuffer_Release(&v);
    return PyLong_FromUnsignedLong(s);
}

/* records(buf, pos, end, hl, bigendian) -> (recs, pos, cl): the offsets of
 * the classic pcap records that start at pos, pos + hl + caplen, ... while
 * a whole record header fits before end; then, when the last one runs past
 * end, it is dropped from recs, pos is its start and cl its caplen, else pos
 * is where the next record would start and cl is -1 */
static PyObject *py_records(PyObject *self, PyObject *args)
{
    Py_buffer v;
    Py_ssize_t pos, end, hl;
    int big;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnnp", &v, &pos, &end, &hl, &big))
        return NULL;
    if (end > v.len || hl < 16 || pos < 0) {
        PyBuffer_Release(&v);
        PyErr_SetString(PyExc_ValueError, "records: bad bounds");
        return NULL;
    }
    const uint8_t *b = v.buf;
    PyObject *recs = PyList_New(0);
    if (!recs) {
        PyBuffer_Release(&v);
        return NULL;
    }
    long long p = pos, cl = -1, last = -1;
    while (p <= (long long)end - hl) {
        const uint8_t *q = b + p + 8;
        uint32_t c = big ? be32(q) : ((uint32_t)q[0] | ((uint32_t)q[1] << 8)
                                      | ((uint32_t)q[2] << 16) | ((uint32_t)q[3] << 24));
        PyObject *o = PyLong_FromLongLong(p);
        if (!o || PyList_Append(recs, o) < 0) {
            Py_XDECREF(o);
            Py_DECREF(recs);
            PyBuffer_Release(&v);
            return NULL;
        }
        Py_DECREF(o);
        last = p;
        cl = c;
        p += hl + (long long)c;
    }
    PyBuffer_Release(&v);
    if (p > end) {
        /* the last record is cut by the end of the buffer */
        Py_ssize_t n = PyList_GET_SIZE(recs);
        if (PyList_SetSlice(recs, n - 1, n, NULL) < 0) {
            Py_DECREF(recs);
            return NULL;
        }
        p = last;
    } else {
        cl = -1;
    }
    return Py_BuildValue("NLL", recs, p, cl);
}

static inline uint32_t rd32(const uint8_t *p, int big)
{
    return big ? be32(p) : ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16)
                            | ((uint32_t)p[3] << 24));
}

/* a pcapng option list b[p:end] as parse_options (pcapng.py) walks it: 0
 * when an option runs past end */
static int options_ok(const uint8_t *b, uint64_t p, uint64_t end, int big)
{
    while (p + 4 <= end) {
        uint32_t code = big ? be16(b + p) : b[p] | (uint32_t)b[p + 1] << 8;
        uint32_t ln = big ? be16(b + p + 2) : b[p + 2] | (uint32_t)b[p + 3] << 8;
        if (code == 0)
            return 1;
        if (p + 4 + ln > end)
            return 0;
        p += 4 + ((ln + 3) & ~3u);
    }
    return 1;
}

/* the interface of the EPB at b[pos:] (at least 32 bytes before end) and
 * its block length *bl and captured length *cl when the reader's checks
 * pass (PcapngReader._epb: length a multiple of 4, >= 32, whole before
 * end, equal to the trailing length, holding the captured bytes;
 * interface < nifs; options not running past the block); -1 when not */
static long long epb_ok(const uint8_t *b, uint64_t pos, uint64_t end, int big, long long nifs,
                        uint32_t *bl, uint32_t *cl)
{
    const uint8_t *r = b + pos;
    uint32_t n = rd32(r + 4, big), c = rd32(r + 20, big);
    uint64_t e = pos + n, oe = pos + 28 + (((uint64_t)c + 3) & ~(uint64_t)3);
    if (rd32(r, big) != BT_EPB || n < 32 || n & 3 || e > end || rd32(b + e - 4, big) != n
            || oe > e - 4 || (long long)rd32(r + 8, big) >= nifs)
        return -1;
    if (oe < e - 4 && !options_ok(b, oe, e - 4, big))
        return -1;
    *bl = n;
    *cl = c;
    return rd32(r + 8, big);
}

/* epbs(buf, pos, end, bigendian, nifs, recs) -> (pos, iface, nbytes): the
 * EPB run walk of pcapgro/capture/pcapng.py (_epb_run, its Python twin
 * _epb_run_py): appends to recs the offsets of the consecutive EPBs from
 * pos on that pass the reader's checks (epb_ok), all of the first one's
 * interface, and stops at the first block that is not one of them (any
 * other block, a damaged or cut one: the reader's own loop takes it).
 * pos: where it stopped; iface: the run's (-1 when none); nbytes: their
 * captured bytes. */
static PyObject *py_epbs(PyObject *self, PyObject *args)
{
    Py_buffer v;
    Py_ssize_t pos, end;
    long long nifs, iface = -1;
    int big;
    PyObject *recs;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnpLO!", &v, &pos, &end, &big, &nifs, &PyList_Type, &recs))
        return NULL;
    if (end > v.len || pos < 0) {
        PyBuffer_Release(&v);
        PyErr_SetString(PyExc_ValueError, "epbs: bad bounds");
        return NULL;
    }
    unsigned long long nbytes = 0;
    uint32_t bl, cl;
    while (end - pos >= 32) {
        long long i = epb_ok(v.buf, (uint64_t)pos, (uint64_t)end, big, nifs, &bl, &cl);
        if (i < 0 || (iface >= 0 && i != iface))
            break;
        PyObject *o = PyLong_FromSsize_t(pos);
        if (!o || PyList_Append(recs, o) < 0) {
            Py_XDECREF(o);
            PyBuffer_Release(&v);
            return NULL;
        }
        Py_DECREF(o);
        iface = i;
        nbytes += cl;
        pos += bl;
    }
    PyBuffer_Release(&v);
    return Py_BuildValue("nLK", pos, iface, nbytes);
}

/* buffer(n) -> a bytearray of n bytes, not zeroed */
static PyObject *py_buffer(PyObject *self, PyObject *args)
{
    Py_ssize_t n;
    (void)self;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "buffer: negative size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, n);
}

/* ---- restore records (pcapgro/restore.py, encode_rows) ----
 * restore_rows(ref, hdrs, dts, lens, dis) -> str: the body of a restore
 * record's "s=" field, i.e. ";".join("%d,%d,%d,%s" % (di, dt, len, diffs))
 * over the segments, where diffs are the runs "off:hex" joined by "/" in
 * which the segment's header differs from ref (empty when identical), or
 * "*hex" (the whole header) when the lengths differ.  Byte-identical with
 * the Python twin restore._rows_py (tests/test_restore_record.py). */

/* item i of seq (an int) in decimal, then the character end: by hand when
 * it fits a long long, else through str() (a timestamp delta between a
 * packet near 2**64 ns and one near 0 does not fit 64 bits; the Python
 * twin writes any int, so this one must too) */
static int sb_item(sbuf *b, PyObject *seq, Py_ssize_t i, char end)
{
    PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow) {
        if (v == -1 && PyErr_Occurred())
            return -1;
        return sb_ll(b, v, end);
    }
    PyObject *str = PyObject_Str(o);
    if (!str)
        return -1;
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(str, &n);
    int rc = -1;
    if (u && sb_grow(b, (size_t)n + 1) == 0) {
        memcpy(b->p + b->n, u, (size_t)n);
        b->n += (size_t)n;
        if (end)
            b->p[b->n++] = end;
        rc = 0;
    }
    Py_DECREF(str);
    return rc;
}

static PyObject *py_restore_rows(PyObject *self, PyObject *args)
{
    Py_buffer ref;
    PyObject *hdrs, *dts, *lens, *dis;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*OOOO", &ref, &hdrs, &dts, &lens, &dis))
        return NULL;
    PyObject *fh = NULL, *ft = NULL, *fl = NULL, *fd = NULL, *res = NULL;
    sbuf b = {NULL, 0, 0};
    fh = PySequence_Fast(hdrs, "restore_rows: hdrs must be a sequence");
    ft = fh ? PySequence_Fast(dts, "restore_rows: dts must be a sequence") : NULL;
    fl = ft ? PySequence_Fast(lens, "restore_rows: lens must be a sequence") : NULL;
    fd = fl ? PySequence_Fast(dis, "restore_rows: dis must be a sequence") : NULL;
    if (!fd)
        goto done;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fh);
    if (PySequence_Fast_GET_SIZE(ft) != k || PySequence_Fast_GET_SIZE(fl) != k
            || PySequence_Fast_GET_SIZE(fd) != k) {
        PyErr_SetString(PyExc_ValueError, "restore_rows: lists of different lengths");
        goto done;
    }
    const uint8_t *r = ref.buf;
    Py_ssize_t rn = ref.len;
    for (Py_ssize_t i = 0; i < k; i++) {
        if (i && sb_put(&b, ';') < 0)
            goto done;
        if (sb_item(&b, fd, i, ',') < 0 || sb_item(&b, ft, i, ',') < 0
                || sb_item(&b, fl, i, ',') < 0)
            goto done;
        Py_buffer h;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fh, i), &h, PyBUF_SIMPLE) < 0)
            goto done;
        int bad = sb_diffs(&b, h.buf, h.len, r, rn) < 0;
        PyBuffer_Release(&h);
        if (bad)
            goto done;
    }
    res = PyUnicode_DecodeASCII(b.p ? b.p : "", (Py_ssize_t)b.n, NULL);
done:
    PyMem_Free(b.p);
    Py_XDECREF(fh);
    Py_XDECREF(ft);
    Py_XDECREF(fl);
    Py_XDECREF(fd);
    PyBuffer_Release(&ref);
    return res;
}

static PyMethodDef module_methods[] = {
    {"sum16", py_sum16, METH_VARARGS,
     "sum16(data[, simd]) -> one's-complement sum of data mod 0xFFFF (tests; simd False: the scalar loop only)"},
    {"records", py_records, METH_VARARGS,
     "records(buf, pos, end, hl, bigendian) -> (recs, pos, cl): the classic pcap "
     "record walk of PcapReader._chunks"},
    {"epbs", py_epbs, METH_VARARGS,
     "epbs(buf, pos, end, bigendian, nifs, recs) -> (pos, iface, nbytes): the EPB run "
     "walk of PcapngReader (pcapgro/capture/pcapng.py _epb_run)"},
    {"buffer", py_buffer, METH_VARARGS,
     "buffer(n) -> bytearray of n bytes, not zeroed"},
    {"restore_rows", py_restore_rows, METH_VARARGS,
     "restore_rows(ref, hdrs, dts, lens, dis) -> str: the 's=' body of a restore "
     "record (pcapgro/restore.py encode_rows)"},
    {NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pcapgro._native",
    "The compiled GRO core (TCP/UDP, IPv4/IPv6, one tunnel level) for capture chunks.", -1,
    module_methods
};

/* module attribute name = the tuple of n strings names, in code order */
static int add_names(PyObject *m, const char *name, const char *const *names, int n)
{
    PyObject *t = PyTuple_New(n);
    if (!t)
        return -1;
    for (int i = 0; i < n; i++) {
        PyObject *v = PyUnicode_FromString(names[i]);
        if (!v) {
            Py_DECREF(t);
            return -1;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    if (PyModule_AddObject(m, name, t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__native(void)
{
    crc32_init();
#ifdef SUM16_SIMD
    __builtin_cpu_init();
    sum16_avx2_ok = __builtin_cpu_supports("avx2");
#endif
    if (PyType_Ready(&EngineType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0) {
        Py_DECREF(&EngineType);
        Py_DECREF(m);
        return NULL;
    }
    if (add_names(m, "FLUSH_NAMES", FLUSH_NAMES, F_N) < 0
            || add_names(m, "PASS_NAMES", PASS_NAMES, P_N) < 0
            || add_names(m, "KIND_NAMES", KIND_NAMES, K_N) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
