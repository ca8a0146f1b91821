"""Per-packet GRO state: the parsed segment and the held aggregate.

The kernel keeps this in one control block per skb (NAPI_GRO_CB); pcapgro
keeps it in two slotted objects: :class:`Seg` for the packet being received,
:class:`Agg` for a packet held on a GRO list (with everything merged into it).
"""

__all__ = ["Seg", "Agg", "Outer"]


class Seg:
    """A received TCP segment or UDP datagram, parsed down to its payload
    (the kernel's NAPI_GRO_CB(skb) with the offsets it keeps).

    Offsets are bytes into ``pkt.data``.

    Attributes:
        pkt:      the Packet.
        family:   4 or 6; proto: 6 (TCP) or 17 (UDP).
        ulen, ucsum: UDP length and checksum fields (UDP only).
        partial:  True when the checksum field held the pseudo-header seed
                  (CHECKSUM_PARTIAL), False when verified (UNNECESSARY).
        l3off:    start of the IP header; l4off: start of the TCP header.
        pay:      start of the TCP payload; end: end of the IP datagram in the
                  captured bytes (capped at the captured length).
        L:        TCP payload length in bytes as the kernel sees it
                  (skb_gro_len: wire bytes after the TCP header, taken from
                  the original length, so Ethernet padding counts).
        l3len:    IP datagram length in bytes (IPv4 total length / IPv6 40 +
                  payload length).
        key:      flow key (interface, MAC header, addresses, ports, ...).
        flags:    TCP flags byte; word: TCP bytes 12..15 as int (data offset,
                  flags, window); seq: sequence number.
        ackopt:   bytes: ack_seq + all option bytes (compared as a whole).
        tosttl:   IPv4 (TOS << 8 | TTL) / IPv6 (traffic class << 8 | hop limit).
        df:       IPv4 DF bit (0x4000 or 0); 0 for IPv6.
        ipid:     IPv4 ID, None for IPv6.
        flush_l3: the L3 flush flag (length mismatch, evil bit).
        vlan:     in-band VLAN tags crossed (count toward the size limit).
        cblock:   bytes whose one's-complement sum + cextra is ≡ 0 mod 0xFFFF
                  when the TCP checksum is valid, or None (not verified).
        cextra:   int, the rest of the pseudo-header sum (protocol + length).
        caddr:    bytes: the pseudo-header addresses (for the seed check).
        outer:    None, or the :class:`Outer` level of a tunnelled packet
                  (NAPI_GRO_CB's encap_mark set).  Then ``l3off`` is the
                  inner IP header (network_offsets[1], inner_network_offset),
                  the L4 fields are the inner flow's, ``l3len`` is the
                  outer IP datagram's length (what GRO's p->len counts) and
                  ``key`` covers the outer headers and the inner flow.
    """

    __slots__ = ("pkt", "family", "proto", "l3off", "l4off", "pay", "end", "L",
                 "l3len", "key", "flags", "word", "seq", "ackopt", "tosttl", "df",
                 "ipid", "flush_l3", "vlan", "cblock", "cextra", "caddr", "ulen",
                 "ucsum", "partial", "outer")


class Outer:
    """The outer level of a tunnelled packet: what NAPI_GRO_CB keeps of it
    (network_offsets[0], encap_mark, the tunnel header's offset) and the
    outer IP fields the same-flow checks compare (gro_receive_network_flush
    runs inet_gro_flush / ipv6_gro_flush on both levels).

    Offsets are bytes into the packet's data.

    Attributes:
        kind:      tunnel kind: "vxlan", "geneve", "gre", "ipip" (IPv4 in
                   IPv4), "sit" (IPv6 in IPv4), "ip4ip6", "ip6ip6".
        family:    outer IP version, 4 or 6.
        l3off:     the outer IP header (network_offsets[0]).
        tun_off:   the UDP (VXLAN, Geneve) or GRE header, None for IP-in-IP.
        inner_mac: the inner Ethernet header (VXLAN, Geneve, GRE with
                   ETH_P_TEB; skb's inner_mac_header), else None.
        csum_at:   the outer checksum field written at completion (UDP
                   checksum when nonzero, GRE checksum when the C bit is
                   set), else None.
        tosttl, df, ipid: the outer IP header's TOS/traffic class << 8 |
                   TTL/hop limit, DF bit (0x4000 or 0), IPv4 ID (None for
                   IPv6), as in :class:`Seg`.
    """

    __slots__ = ("kind", "family", "l3off", "tun_off", "inner_mac", "csum_at", "tosttl",
                 "df", "ipid")


class Agg:
    """A held packet on a GRO list and what has been merged into it.

    Attributes:
        key, bucket, hash: flow key, bucket index (hash & 7), 32-bit flow hash.
        head:     the first Seg (its headers become the aggregate's).
        pkts:     the merged Packets, in order (head first).
        pays:     offset of the TCP payload in each of them, bytes.
        idxs:     input index (0-based packet number) of each of them.
        held:     still on its GRO list (False once completed).
        flist:    a fraglist aggregate (packets chained, not merged).
        count:    segments merged (NAPI_GRO_CB(p)->count).
        mss:      gso_size: payload length of the first segment, bytes.
        seq_next: sequence number the next segment must carry.
        size:     p->len: L3 bytes so far + 4 per in-band VLAN tag.
        fin_psh:  FIN|PSH bits OR-ed from merged segments.
        fixedid:  True once the IPv4 ID pattern was found fixed (6.18).
        outer_fixedid: the same for the outer IPv4 header of a tunnelled
                  flow (6.18 decides each level apart: ip_fixedid bits).
        age:      jiffy when the head was held.
        psums:    per entry of ``pkts``, the one's-complement sum (mod
                  0xFFFF) of its payload bytes as the compiled core computed
                  it, or None (then the checksum is summed from the bytes).

    ended:    the Flush reason it was completed for (set by
              NAPI.complete; the pcapng annotation names it).

    Entries of ``pkts``: a Packet (payload from ``pays[k]`` on), or bytes
    (what the compiled core merged before it handed the aggregate over:
    then ``rows0`` holds those segments' restore rows, annotated output,
    and ``metas0`` the ``m=`` entries (str) of those that had EPB options,
    or None).
    """

    __slots__ = ("key", "bucket", "hash", "head", "count", "mss",
                 "seq_next", "size", "fin_psh", "fixedid", "outer_fixedid", "age", "held",
                 "pkts", "pays", "idxs", "psums", "flist", "rows0", "metas0", "ended")

    @classmethod
    def start(cls, seg, h, bucket, idx, psum, age, flist):
        """A new held head: Seg ``seg`` of input index ``idx`` (payload sum
        ``psum`` or None), flow hash ``h``, on list ``bucket``, held since
        jiffy ``age``; ``flist``: a fraglist aggregate."""
        agg = cls()
        agg.key = seg.key
        agg.hash = h
        agg.bucket = bucket
        agg.head = seg
        agg.pkts = [seg.pkt]
        agg.pays = [seg.pay]
        agg.idxs = [idx]
        agg.psums = [psum]
        agg.held = True
        agg.flist = flist
        agg.count = 1
        agg.mss = seg.L
        agg.seq_next = (seg.seq + seg.L) & 0xFFFFFFFF
        agg.size = seg.l3len + 4 * seg.vlan
        agg.fin_psh = 0
        agg.fixedid = False
        agg.outer_fixedid = False
        agg.age = age
        agg.rows0 = None
        agg.metas0 = None
        return agg
