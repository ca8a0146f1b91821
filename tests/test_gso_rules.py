"""pcapgro split rules on packets built byte by byte."""

import struct

import pytest

from pcapgro.errors import DamagedInput, UnusableInput
from pcapgro.gso import GSOConfig, GSOSplitter, Pass, SizeSource
from pcapgro.record import EPB_FLAG_TSO, Block, Interface, Packet, PacketMeta, Section

from test_gso_support import (eth, fix_l4, ip_ok, ipv4, ipv6, l3_info, l4_ok, payload, pkt,
                              seed_tcp, tcp_hdr, udp_hdr)

TS_OPT = b"\x01\x01\x08\x0a" + struct.pack("!II", 111, 222)   # 12 bytes


def run(packets, **kw):
    s = GSOSplitter(GSOConfig(**kw))
    out = list(s.process(iter(packets)))
    return out, s.stats


def tcp4_frame(n, flags=0x18, seq=1000, ident=100, opts=TS_OPT, tot=None, seed=True, **kw):
    f = eth(ipv4(6, tcp_hdr(seq=seq, flags=flags, opts=opts, **kw) + payload(n), ident=ident,
                 tot=tot))
    return seed_tcp(f, 14) if seed else fix_l4(f, 14)


def tcp_fields(p, l3off=14):
    fam, src, dst, proto, l4, end = l3_info(p.data, l3off)
    sport, dport, seq, ack, off, flags, win, check, urg = struct.unpack_from("!HHIIBBHHH", p.data, l4)
    return {"seq": seq, "flags": flags, "urg": urg, "win": win, "ack": ack,
            "pay": p.data[l4 + (off >> 4) * 4:end], "l4": l4, "end": end}


def ipid(p, l3off=14):
    return struct.unpack_from("!H", p.data, l3off + 4)[0]


def all_valid(out, l3off=14):
    for p in out:
        if p.data[l3off] >> 4 == 4:
            assert ip_ok(p.data, l3off)
        assert l4_ok(p.data, l3off)


# ------------------------------------------------------------------ TCP flags

def test_fin_psh_only_on_last_cwr_only_on_first():
    f = tcp4_frame(5000, flags=0x80 | 0x40 | 0x20 | 0x10 | 0x08 | 0x01, urg=7)
    out, st = run([pkt(f)], mss=1000)
    assert len(out) == 5 and st.segments == 5
    fl = [tcp_fields(p)["flags"] for p in out]
    assert fl[0] == 0x80 | 0x40 | 0x20 | 0x10            # CWR ECE URG ACK, no FIN/PSH
    assert all(x == 0x40 | 0x20 | 0x10 for x in fl[1:4])
    assert fl[4] == 0x40 | 0x20 | 0x10 | 0x08 | 0x01      # last: FIN PSH, no CWR
    assert all(tcp_fields(p)["urg"] == 7 for p in out)    # urgent pointer copied
    assert [tcp_fields(p)["seq"] for p in out] == [1000 + 1000 * k for k in range(5)]
    all_valid(out)


def test_single_segment_keeps_all_flags_and_seq_wraps():
    f = tcp4_frame(1500, flags=0x80 | 0x10 | 0x08, seq=0xFFFFFF00)
    out, _ = run([pkt(f)], mss=1000)
    assert [tcp_fields(p)["flags"] for p in out] == [0x90, 0x18]
    assert [tcp_fields(p)["seq"] for p in out] == [0xFFFFFF00, (0xFFFFFF00 + 1000) & 0xFFFFFFFF]
    all_valid(out)


def test_options_ack_window_copied_and_payload_order():
    f = tcp4_frame(3000, ack=777, win=4321)
    out, _ = run([pkt(f)], mss=1448)
    pay = b"".join(tcp_fields(p)["pay"] for p in out)
    assert pay == payload(3000)
    for p in out:
        t = tcp_fields(p)
        assert t["ack"] == 777 and t["win"] == 4321
        assert p.data[t["l4"] + 20:t["l4"] + 32] == TS_OPT


# ------------------------------------------------------------------ IPv4 IDs

def test_ipv4_id_increments_and_wraps():
    out, _ = run([pkt(tcp4_frame(4000, ident=0xFFFE))], mss=1000)
    assert [ipid(p) for p in out] == [0xFFFE, 0xFFFF, 0, 1]
    all_valid(out)


def test_fixed_id_keeps_id():
    out, _ = run([pkt(tcp4_frame(4000, ident=0))], mss=1000, fixed_id=True)
    assert [ipid(p) for p in out] == [0, 0, 0, 0]
    all_valid(out)


def test_ipv4_options_copied():
    opts = b"\x94\x04\x00\x00"            # Router Alert
    f = seed_tcp(eth(ipv4(6, tcp_hdr(flags=0x10) + payload(3000), opts=opts)), 14)
    out, _ = run([pkt(f)], mss=1000)
    assert len(out) == 3
    for p in out:
        assert p.data[14] == 0x46 and p.data[34:38] == opts
    all_valid(out)


def test_total_length_zero_takes_frame_length():
    f = tcp4_frame(70000, tot=0)
    out, st = run([pkt(f)])
    assert st.split == 1
    assert sum(len(tcp_fields(p)["pay"]) for p in out) == 70000
    assert all(p.orig_len <= 1514 for p in out)
    assert all(struct.unpack_from("!H", p.data, 16)[0] == p.orig_len - 14 for p in out)
    all_valid(out)


# ------------------------------------------------------------------ IPv6

def test_ipv6_extension_headers_copied_and_final_destination():
    final = b"\xfd" + b"\0" * 14 + b"\x99"
    hbh = struct.pack("!BB", 60, 0) + b"\x01\x04\0\0\0\0"            # HBH, PadN
    dest = struct.pack("!BB", 43, 0) + b"\x01\x04\0\0\0\0"           # DestOpts
    srh = struct.pack("!BBBBBBH", 6, 2, 4, 1, 0, 0, 0) + final       # SRH, 1 left
    tcp = tcp_hdr(flags=0x18, opts=TS_OPT) + payload(3000)
    f = eth(ipv6(0, hbh + dest + srh + tcp), et=0x86DD)
    f = seed_tcp(f, 14)
    out, st = run([pkt(f)], mss=1000)
    assert st.split == 1 and len(out) == 3
    ext = f[54:54 + 8 + 8 + 24]
    for p in out:
        assert p.data[20] == 0 and p.data[54:54 + 40] == ext
        assert struct.unpack_from("!H", p.data, 18)[0] == len(p.data) - 54
    all_valid(out)                      # helper uses the SRH's final destination


def test_ipv6_jumbo_hbh_removed():
    tcp = tcp_hdr(flags=0x18, opts=TS_OPT) + payload(70000)
    hbh = struct.pack("!BBBBI", 6, 0, 0xC2, 4, 8 + len(tcp))
    f = eth(ipv6(0, hbh + tcp, plen=0), et=0x86DD)
    out, st = run([pkt(f)])
    assert st.split == 1
    assert all(p.data[20] == 6 and p.orig_len <= 1514 for p in out)
    assert b"".join(tcp_fields(p)["pay"] for p in out) == payload(70000)
    all_valid(out)


def test_ipv6_jumbo_in_other_shape_passes():
    tcp = tcp_hdr(flags=0x18) + payload(3000)
    hbh = struct.pack("!BBBBI", 17, 0, 0xC2, 4, 8 + len(tcp))    # next header UDP
    f = eth(ipv6(0, hbh + tcp, plen=0), et=0x86DD)
    out, st = run([pkt(f)], mss=1000)
    assert out[0].data == f and st.passed == {Pass.EXT_HEADER: 1}


def test_ipv6_fragment_passes():
    f = eth(ipv6(44, b"\x06\0\0\x01\0\0\0\x01" + tcp_hdr() + payload(3000)), et=0x86DD)
    out, st = run([pkt(f)], mss=1000)
    assert out[0].data == f and st.passed == {Pass.FRAGMENT: 1}


# ------------------------------------------------------------------ link types

@pytest.mark.parametrize("linktype,l2", [
    (1, eth(b"", vlans=(5,))[:-2]),
    (113, struct.pack("!HHH8s", 4, 1, 6, b"\2\0\0\0\0\1\0\0")),
    (276, struct.pack("!HHIHBB8s", 0x0800, 0, 3, 1, 4, 6, b"\2\0\0\0\0\1\0\0")),
    (101, b""),
])
def test_link_types(linktype, l2):
    l3 = ipv4(6, tcp_hdr(flags=0x18, opts=TS_OPT) + payload(5000))
    if linktype == 1:
        frame = l2 + b"\x08\x00" + l3
    elif linktype == 113:
        frame = l2 + b"\x08\x00" + l3
    else:
        frame = l2 + l3
    off = len(frame) - len(l3)
    frame = seed_tcp(frame, off)
    out, st = run([pkt(frame, linktype=linktype)])
    assert st.split == 1 and len(out) == 4
    for p in out:
        assert p.linktype == linktype and p.data[:off] == frame[:off]
        assert p.orig_len - off <= 1500
    all_valid(out, off)


# ------------------------------------------------------------------ MSS sources

def syn(mss, sport=1000, dport=2000, src=b"\x0a\0\0\x01", dst=b"\x0a\0\0\x02"):
    opts = b"\x02\x04" + struct.pack("!H", mss) + b"\x04\x02\x01\x01"
    return pkt(fix_l4(eth(ipv4(6, tcp_hdr(sport=sport, dport=dport, flags=0x02, opts=opts),
                               src=src, dst=dst)), 14))


def test_mss_from_peer_syn_ack():
    peer = syn(1300, sport=2000, dport=1000, src=b"\x0a\0\0\x02", dst=b"\x0a\0\0\x01")
    own = syn(1460)
    out, st = run([own, peer, pkt(tcp4_frame(5000))])
    segs = out[2:]
    assert [len(tcp_fields(p)["pay"]) for p in segs] == [1288, 1288, 1288, 1136]
    d = st.to_dict()
    assert d["size_sources"] == {"syn": 1}
    assert d["flows"][0]["segment_size"] == 1288
    all_valid(segs)


def test_mss_from_own_syn_without_peer():
    out, st = run([syn(1400), pkt(tcp4_frame(5000))])
    assert [len(tcp_fields(p)["pay"]) for p in out[1:]] == [1388, 1388, 1388, 836]
    assert st.to_dict()["size_sources"] == {"own_syn": 1}


def test_syn_mss_splits_below_mtu():
    # two 500-byte segments merged (GRO) into 1000 bytes: under the MTU,
    # but above the SYN's MSS: split
    out, st = run([syn(512), pkt(tcp4_frame(1000))])
    assert [len(tcp_fields(p)["pay"]) for p in out[1:]] == [500, 500]


def test_mss_largest_non_super_segment():
    small = [pkt(tcp4_frame(n, seq=1, seed=False), ts=1_000 + i) for i, n in enumerate((100, 1200, 700))]
    out, st = run(small + [pkt(tcp4_frame(5000, seq=2001), ts=2000)])
    assert out[:3] == small                                   # same objects
    assert [len(tcp_fields(p)["pay"]) for p in out[3:]] == [1200] * 4 + [200]
    assert st.to_dict()["size_sources"] == {"largest": 1}
    assert st.passed == {Pass.SMALL: 3}


def test_largest_does_not_split_packets_that_fit():
    # without a SYN, a packet that fits the MTU is never a super-frame
    ps = [pkt(tcp4_frame(n), ts=i) for i, n in enumerate((100, 1448, 1000))]
    out, st = run(ps)
    assert st.split == 0 and len(out) == 3


def test_mss_from_mtu():
    out, st = run([pkt(tcp4_frame(5000))], mtu=1000)
    assert [len(tcp_fields(p)["pay"]) for p in out] == [948] * 5 + [260]
    assert all(p.orig_len - 14 <= 1000 for p in out)
    assert st.to_dict()["size_sources"] == {"mtu": 1}


@pytest.mark.parametrize("mtu,ok", [(68, False), (79, False), (80, True)])
def test_mtu_too_small_for_the_headers_is_refused(mtu, ok):
    """IPv4 20 + TCP 32 (timestamps) + 8 bytes of payload (the smallest
    gso_size) is 60: an MTU below it cannot be met; an IPv6 flow needs 80.
    Refused naming the flow, never segments longer than the MTU."""
    out, _ = run([pkt(tcp4_frame(500))], mtu=68)
    assert all(p.orig_len - 14 <= 68 for p in out) and len(out) > 1
    frame = fix_l4(eth(ipv6(6, tcp_hdr(opts=TS_OPT) + payload(500)), et=0x86DD), 14)
    if ok:
        out, _ = run([pkt(frame)], mtu=mtu)
        assert all(p.orig_len - 14 <= mtu for p in out) and len(out) > 1
    else:
        with pytest.raises(UnusableInput, match=rf"\[fd00::1\]:\d+ > \[fd00::2\]:\d+.*"
                                                rf"do not fit --mtu {mtu}; give --mtu 80"):
            run([pkt(frame)], mtu=mtu)
    # a known MSS is not the MTU rule: --mss wins
    out, _ = run([pkt(frame)], mtu=mtu, mss=8)
    assert len(out) > 1


def test_mss_option_overrides_syn():
    out, st = run([syn(1460), pkt(tcp4_frame(5000))], mss=2000)
    assert [len(tcp_fields(p)["pay"]) for p in out[1:]] == [2000, 2000, 1000]
    assert st.to_dict()["size_sources"] == {"option": 1}


def test_per_flow_state_is_per_direction_and_flow():
    a = syn(1000)
    other = pkt(seed_tcp(eth(ipv4(6, tcp_hdr(sport=3000, flags=0x10, opts=TS_OPT) + payload(3000))), 14))
    out, st = run([a, other])
    # the other flow has no SYN: MTU rule (1448)
    assert [len(tcp_fields(p)["pay"]) for p in out[1:]] == [1448, 1448, 104]


# ------------------------------------------------------------------ pass-through

def test_small_packets_pass_byte_identical():
    good = pkt(tcp4_frame(1000, seed=False))
    arp = pkt(b"\xff" * 12 + b"\x08\x06" + b"\0" * 28)
    icmp = pkt(eth(ipv4(1, b"\x08\0\0\0" + b"\0" * 3000)))
    frag = pkt(seed_tcp(eth(ipv4(6, tcp_hdr() + payload(3000), flags=0x2000)), 14))
    out, st = run([good, arp, icmp, frag])
    assert [p is q for p, q in zip(out, [good, arp, icmp, frag])] == [True] * 4
    assert st.passed == {Pass.SMALL: 1, Pass.NOT_IP: 1, Pass.NO_HANDLER: 1, Pass.FRAGMENT: 1}
    assert st.to_dict()["passed"] == 4


def test_seed_checksum_of_small_packet_completed():
    seeded = pkt(tcp4_frame(1000, seed=True))
    out, st = run([seeded])
    assert out[0].data != seeded.data and l4_ok(out[0].data, 14)
    assert out[0].data[:50] == seeded.data[:50] and out[0].data[52:] == seeded.data[52:]
    assert st.csum["completed"] == 1
    out, st = run([seeded], complete_csum=False)
    assert out[0] is seeded


def test_bad_checksum_of_small_packet_kept():
    f = bytearray(tcp4_frame(1000, seed=False))
    f[50] ^= 0x55
    p = pkt(bytes(f))
    out, _ = run([p])
    assert out[0] is p


def test_truncated_header_passes():
    f = tcp4_frame(5000)
    p = pkt(f[:40], orig_len=len(f))
    out, st = run([p])
    assert out[0] is p and st.passed == {Pass.TRUNCATED: 1}


def test_syn_super_frame_passes():
    p = pkt(tcp4_frame(5000, flags=0x02))
    out, st = run([p], mss=1000)
    assert out[0] is p and st.passed == {Pass.FLAGS: 1}


def test_tunnel_ports_pass():
    """A UDP super-datagram inside VXLAN: tunnel GSO cuts inner TCP only."""
    inner = eth(ipv4(17, udp_hdr(length=8 + 4000) + payload(4000)))
    vx = b"\x08\0\0\0\0\x13\x89\0" + inner
    f = eth(ipv4(17, udp_hdr(dport=4789, length=8 + len(vx)) + vx))
    p = pkt(f)
    out, st = run([p], gso_size=1200)
    assert out[0] is p and st.passed == {Pass.TUNNEL: 1}


# ------------------------------------------------------------------ snaplen

def test_snaplen_cut_segments():
    f = tcp4_frame(5000)
    cap = 14 + 20 + 32 + 2500                         # 2500 payload bytes captured
    p = pkt(f[:cap], orig_len=len(f))
    out, st = run([p], mss=1000)
    assert len(out) == 5
    assert [p.orig_len for p in out] == [14 + 52 + 1000] * 5
    assert [len(p.data) for p in out] == [1066, 1066, 566, 66, 66]
    assert [tcp_fields(p)["seq"] for p in out] == [1000 + 1000 * k for k in range(5)]
    all_valid(out[:2])
    assert st.cut_segments == 3 and st.csum["seed_truncated"] == 3 and st.csum["computed"] == 2
    for q in out[2:]:
        # seed: pseudo-header sum for this segment's TCP length, not inverted
        s = sum(struct.unpack("!HHHH", q.data[26:34])) + 6 + 1032
        while s > 0xFFFF:
            s = (s & 0xFFFF) + (s >> 16)
        assert struct.unpack_from("!H", q.data, 50)[0] == s
        assert struct.unpack_from("!H", q.data, 16)[0] == 1052       # full IP length
        assert ip_ok(q.data, 14)
    assert out[2].data[66:] == f[66 + 2000:66 + 2500]


# ------------------------------------------------------------------ UDP

def udp4_frame(n, sport=5000, dport=9999, ident=7, seed=True):
    f = eth(ipv4(17, udp_hdr(sport, dport, 8 + n) + payload(n), ident=ident, flags=0))
    return seed_tcp(f, 14) if seed else fix_l4(f, 14)


def test_udp_split():
    out, st = run([pkt(udp4_frame(3000))], gso_size=1200)
    assert len(out) == 3
    lens = [struct.unpack_from("!H", p.data, 38)[0] for p in out]
    assert lens == [1208, 1208, 608]
    assert [ipid(p) for p in out] == [7, 8, 9]
    assert b"".join(p.data[42:] for p in out) == payload(3000)
    all_valid(out)
    assert st.to_dict()["flows"][0]["proto"] == "udp"


def test_udp_fixed_id_not_applied():
    out, _ = run([pkt(udp4_frame(3000))], gso_size=1200, fixed_id=True)
    assert [ipid(p) for p in out] == [7, 8, 9]


def test_udp_ipv6_split():
    n = 2500
    f = seed_tcp(eth(ipv6(17, udp_hdr(1, 2, 8 + n) + payload(n)), et=0x86DD), 14)
    out, _ = run([pkt(f)], gso_size=1000)
    assert [struct.unpack_from("!H", p.data, 18)[0] for p in out] == [1008, 1008, 508]
    all_valid(out)


def test_udp_zero_checksum_written_as_ffff():
    # choose the last two payload bytes of the first datagram so that its
    # computed checksum is 0
    from test_gso_support import csum16
    pay = bytearray(payload(2000))
    src, dst = b"\x0a\0\0\x01", b"\x0a\0\0\x02"
    def dgram_sum(p1):
        ph = src + dst + struct.pack("!BBH", 0, 17, 1008)
        return csum16(ph + udp_hdr(5000, 9999, 1008) + p1)
    pay[998:1000] = b"\0\0"
    s = dgram_sum(bytes(pay[:1000]))
    w = (0xFFFF - s) % 0xFFFF or 0xFFFF
    pay[998:1000] = struct.pack("!H", w)
    assert dgram_sum(bytes(pay[:1000])) == 0xFFFF            # checksum would be 0
    f = seed_tcp(eth(ipv4(17, udp_hdr(5000, 9999, 2008) + bytes(pay), flags=0)), 14)
    out, _ = run([pkt(f)], gso_size=1000)
    assert struct.unpack_from("!H", out[0].data, 40)[0] == 0xFFFF
    all_valid(out)


def test_udp_without_gso_size_raises():
    big = pkt(udp4_frame(3000))
    with pytest.raises(UnusableInput, match=r"10\.0\.0\.1:5000 > 10\.0\.0\.2:9999.*--gso-size"):
        run([big])
    small = pkt(udp4_frame(1000, seed=False))
    out, st = run([small])
    assert out[0] is small


# ------------------------------------------------------------------ timestamps

def test_timestamps_spread_capped_by_next_packet():
    a = pkt(tcp4_frame(10000), ts=1_000_000)
    b = pkt(tcp4_frame(100, seed=False), ts=1_001_000)
    out, _ = run([a, b], mss=1000)                   # 10 segments, 1000 ns gap
    ts = [p.ts for p in out]
    assert ts[:10] == [1_000_000 + 100 * k for k in range(10)]
    assert ts[-1] == 1_001_000
    assert ts == sorted(ts)


def test_timestamps_wire_time_when_room():
    a = pkt(tcp4_frame(10000), ts=1_000_000)
    b = pkt(tcp4_frame(100, seed=False), ts=2_000_000_000)
    out, _ = run([a, b], mss=1000, link_rate=1_000_000_000)
    step = (14 + 52 + 1000) * 8            # ns at 1 Gbit/s
    assert [p.ts for p in out[:10]] == [1_000_000 + step * k for k in range(10)]


def test_timestamps_last_packet_and_zero_rate_and_disorder():
    a = pkt(tcp4_frame(3000), ts=5_000)
    out, _ = run([a], mss=1000)
    assert [p.ts for p in out] == [5_000, 5_000 + 853, 5_000 + 2 * 853]   # 1066 B at 10G
    out, _ = run([a], mss=1000, link_rate=0)
    assert [p.ts for p in out] == [5_000] * 3
    b = pkt(tcp4_frame(10, seed=False), ts=4_000)     # next packet earlier
    out, _ = run([a, b], mss=1000)
    assert [p.ts for p in out] == [5_000] * 3 + [4_000]


# ------------------------------------------------------------------ events

def test_events_order_and_lookahead():
    sec, iface, blk = Section(), Interface(1), Block(0x40000BAD, b"x")
    a = pkt(tcp4_frame(3000), ts=10_000)
    b = pkt(tcp4_frame(10, seed=False), ts=10_300)
    out, _ = run([sec, iface, a, blk, b, Section(), Interface(1)], mss=1000)
    kinds = [type(e).__name__ for e in out]
    assert kinds == ["Section", "Interface", "Packet", "Packet", "Packet", "Block",
                     "Packet", "Section", "Interface"]
    assert [p.ts for p in out if type(p) is Packet] == [10_000, 10_100, 10_200, 10_300]


def test_damaged_input_flushes_held_packet():
    a = pkt(tcp4_frame(3000))
    def gen():
        yield Section()
        yield a
        raise DamagedInput(123, "truncated record")
    s = GSOSplitter(GSOConfig(mss=1000))
    got = []
    with pytest.raises(DamagedInput):
        for ev in s.process(gen()):
            got.append(ev)
    assert len(got) == 4 and s.stats.segments == 3


def test_meta_flags_and_comments():
    meta = PacketMeta(flags=EPB_FLAG_TSO | (1 << 9) | 1, comments=["super"], options=[(5, b"12345678")])
    out, _ = run([pkt(tcp4_frame(3000), meta=meta)], mss=1000)
    assert [p.meta.flags for p in out] == [1, 1, 1]
    assert [p.meta.comments for p in out] == [["super"], [], []]
    assert all(p.meta.options == [(5, b"12345678")] for p in out)
    assert meta.flags & EPB_FLAG_TSO                       # input untouched


# ------------------------------------------------------------------ stats

def test_stats_schema_and_table():
    out, st = run([syn(1460), pkt(tcp4_frame(5000)), pkt(udp4_frame(3000))], gso_size=1200)
    d = st.to_dict()
    assert set(d) == {"packets", "split", "segments", "passed", "pass_reasons", "size_sources",
                      "split_by_source", "cut_segments", "fixed", "checksums", "flows"}
    assert d["fixed"] == {"length_zero": 0}
    assert set(d["checksums"]) == {"computed", "seed_truncated", "completed", "ip_completed"}
    assert d["packets"] == 3 and d["split"] == 2 and d["segments"] == 4 + 3
    assert d["passed"] == 1 and d["pass_reasons"] == {"small": 1}
    assert d["size_sources"] == {"option": 1, "own_syn": 1}
    assert {f["proto"]: f["source"] for f in d["flows"]} == {"tcp": "own_syn", "udp": "option"}
    import json
    json.dumps(d)
    t = st.table()
    assert t[0].startswith("GSO: 3 packets in: 2 split into 7 segments, 1 passed")
    assert any("own_syn 1 flow" in line for line in t)


def test_config_validation():
    with pytest.raises(UnusableInput):
        GSOConfig(mss=0)
    with pytest.raises(UnusableInput):
        GSOConfig(mtu=20)
    with pytest.raises(UnusableInput):
        GSOConfig(gso_size=70000)
    assert SizeSource.SYN.value == "syn"


# ------------------------------------------------------------------ fast path

def _random_tcp4_packets(seed, count=400):
    import random
    rnd = random.Random(seed)
    out = []
    ts = 1_000_000
    for i in range(count):
        sport = rnd.choice((1000, 1001, 2000))
        dport = 2000 if sport != 2000 else 1000
        src, dst = (b"\x0a\0\0\x01", b"\x0a\0\0\x02") if sport != 2000 else \
            (b"\x0a\0\0\x02", b"\x0a\0\0\x01")
        flags = rnd.choice((0x10, 0x18, 0x02, 0x12, 0x11, 0x80 | 0x10, 0x04))
        opts = b""
        if flags & 0x02:
            opts = b"\x02\x04" + struct.pack("!H", rnd.choice((536, 1000, 1460, 9000)))
        elif rnd.random() < 0.7:
            opts = TS_OPT
        n = rnd.choice((0, 1, 100, 536, 1000, 1448, 1460, 2000, 3000, 9000, 20000))
        ip_opts = b"\x01\x01\x01\x00" if rnd.random() < 0.05 else b""
        frag = 0x2000 if rnd.random() < 0.03 else 0x4000
        l3 = ipv4(6, tcp_hdr(sport=sport, dport=dport, seq=rnd.getrandbits(32), flags=flags,
                             opts=opts) + payload(n, i), src=src, dst=dst,
                  ident=rnd.getrandbits(16), flags=frag, opts=ip_opts)
        f = eth(l3)
        r = rnd.random()
        if r < 0.4:
            f = seed_tcp(f, 14)
        elif r < 0.8:
            f = fix_l4(f, 14)
        if rnd.random() < 0.05:
            f = f[:14] + f[14:16] + b"\0\0" + f[18:]            # total length 0
        orig = len(f)
        if rnd.random() < 0.05:
            f = f[:rnd.randrange(14, len(f))]                 # snaplen cut
        if rnd.random() < 0.05:
            f = f + b"\0" * 6                                 # trailer
            orig += 6
        ts += rnd.choice((0, 1, 50, 1000, 100_000))
        out.append(Packet(ts, f, orig, 0, 1, None))
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kw", [{}, {"mss": 1000}, {"mtu": 1000}, {"complete_csum": False}])
def test_fast_path_same_as_general_path(seed, kw):
    pkts = _random_tcp4_packets(seed)
    fast = GSOSplitter(GSOConfig(**kw))
    slow = GSOSplitter(GSOConfig(**kw), fast_path=False)
    a = list(fast.process(iter(pkts)))
    b = list(slow.process(iter(pkts)))
    assert [(p.ts, p.data, p.orig_len) for p in a] == [(p.ts, p.data, p.orig_len) for p in b]
    assert fast.stats.to_dict() == slow.stats.to_dict()
    assert fast.stats.split > 0 and fast.stats.passed[Pass.SMALL] > 0
