"""split on the offload artefacts of the captures people bring (issue 17)
and on records whose lengths contradict each other (issue 18, items 1-2).

Each test is built from a rule: input packets (made-up addresses) ->
expected output packets.  Every packet split changes must also pass tshark
with checksum checks on and ``ip.tso_support`` / ``ipv6.tso_support`` off
(so tshark cannot read a length of 0 as "to the end of the frame").
"""

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from pcapgro.capture import open_writer
from pcapgro.gso import GSOConfig, GSOSplitter, Pass
from pcapgro.record import EPB_FLAG_TSO, Interface, Packet, PacketMeta, Section

from capture_helpers import REPO, run_cli
from test_gso_support import (csum16, eth, fix_l4, ip_ok, ipv4, ipv6, l3_info, l4_ok, payload,
                              pkt, read_packets, seed_tcp, tcp_hdr, udp_hdr)

DATA = Path(__file__).resolve().parent / "data" / "faults"
TS_OPT = b"\x01\x01\x08\x0a" + struct.pack("!II", 111, 222)   # 12 bytes
HAVE_TSHARK = shutil.which("tshark") is not None


def run(packets, **kw):
    s = GSOSplitter(GSOConfig(**kw))
    out = list(s.process(iter(packets)))
    return out, s.stats


def tshark_check(tmp_path, packets, linktype=1):
    """Write ``packets`` to a pcap and have tshark check every one:
    checksums on, TSO length support off.  Returns per packet
    (frame.len, ip.len or ipv6.plen, tcp.len or udp.length)."""
    if not HAVE_TSHARK:
        pytest.skip("tshark not on PATH")
    path = tmp_path / "out.pcap"
    w = open_writer(path, "pcap")
    w.write(Section())
    w.write(Interface(linktype))
    for p in packets:
        w.write(p)
    w.close()
    args = ["tshark", "-n", "-r", str(path), "-o", "ip.check_checksum:TRUE",
            "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
            "-o", "ip.tso_support:FALSE", "-o", "ipv6.tso_support:FALSE"]
    bad = subprocess.run(args + ["-Y", "ip.checksum.status==0 || tcp.checksum.status==0 || "
                                 "udp.checksum.status==0 || _ws.malformed || _ws.expert.severity>=error"
                                 " || (ip && !ip.checksum.status==1) || (tcp && !tcp.checksum.status==1)"
                                 " || (udp && !udp.checksum.status==1)"],
                         capture_output=True, text=True)
    assert bad.returncode == 0, bad.stderr
    assert bad.stdout.strip() == "", bad.stdout
    f = subprocess.run(args + ["-T", "fields", "-E", "separator=,", "-e", "frame.len",
                               "-e", "ip.len", "-e", "ipv6.plen", "-e", "tcp.len", "-e", "udp.length"],
                       capture_output=True, text=True, check=True)
    rows = []
    for line in f.stdout.splitlines():
        fl, il, pl, tl, ul = line.split(",")
        rows.append((int(fl), int(il or pl), int(tl or ul)))
    assert len(rows) == len(packets)
    return rows


def tcp_payload_len(p, l3off):
    fam, src, dst, proto, l4, end = l3_info(p.data, l3off)
    return end - l4 - (p.data[l4 + 12] >> 4) * 4


def syn(mss, fam=4, sport=2000, dport=1000, ext=b"", nh=6, **kw):
    opts = b"\x02\x04" + struct.pack("!H", mss) + b"\x04\x02\x01\x01"
    th = tcp_hdr(sport=sport, dport=dport, flags=0x12, opts=opts)
    if fam == 4:
        return pkt(fix_l4(eth(ipv4(6, th, src=b"\x0a\0\0\x02", dst=b"\x0a\0\0\x01")), 14), **kw)
    l3 = ipv6(nh, ext + th, src=b"\xfd" + b"\0" * 14 + b"\x02", dst=b"\xfd" + b"\0" * 14 + b"\x01")
    return pkt(fix_l4(eth(l3, et=0x86DD), 14), **kw)


# ------------------------------------------- 1. length-0 frames needing no cut

SLL = struct.pack("!HHH8s", 4, 1, 6, b"\2\0\0\0\0\1\0\0")
SLL2_V4 = struct.pack("!HHIHBB8s", 0x0800, 0, 3, 1, 4, 6, b"\2\0\0\0\0\1\0\0")


def _len0_frame(l2, et, l3):
    """A frame whose link-layer part is ``l2`` (+ EtherType ``et`` when
    not None) over ``l3``, IP length field zeroed, TCP seed checksum."""
    frame = l2 + (struct.pack("!H", et) if et is not None else b"") + l3
    off = len(frame) - len(l3)
    frame = seed_tcp(frame, off)
    b = bytearray(frame)
    if b[off] >> 4 == 4:
        b[off + 2:off + 4] = b"\0\0"
        b[off + 10:off + 12] = b"\0\0"
    else:
        b[off + 4:off + 6] = b"\0\0"
    return bytes(b), off


L0_CASES = {
    "eth-v4": (1, eth(b"")[:12], 0x0800, 4),
    "vlan-v4": (1, eth(b"")[:12] + struct.pack("!HH", 0x8100, 7), 0x0800, 4),
    "qinq-v4": (1, eth(b"")[:12] + struct.pack("!HHHH", 0x88A8, 5, 0x8100, 7), 0x0800, 4),
    "sll-v4": (113, SLL, 0x0800, 4),
    "sll2-v4": (276, SLL2_V4, None, 4),
    "eth-v6": (1, eth(b"")[:12], 0x86DD, 6),
    "vlan-v6": (1, eth(b"")[:12] + struct.pack("!HH", 0x8100, 7), 0x86DD, 6),
}


@pytest.mark.parametrize("name", sorted(L0_CASES))
@pytest.mark.parametrize("n", [0, 1000, 1448])
def test_length_zero_frame_needing_no_cut_gets_its_lengths(tmp_path, name, n):
    """IPv4 total length 0 / IPv6 payload length 0 (no jumbo option) on a
    frame holding one MSS or less: the lengths are filled in from the
    frame, after every link-layer header, and the checksums are valid;
    counted as a fix-up, not a pass."""
    lt, l2, et, fam = L0_CASES[name]
    th = tcp_hdr(flags=0x18 if n else 0x10, opts=TS_OPT) + payload(n)
    l3 = ipv4(6, th, ident=77) if fam == 4 else ipv6(6, th)
    frame, off = _len0_frame(l2, et, l3)
    out, st = run([syn(1460, fam=fam), pkt(frame, linktype=lt)])
    p = out[1]
    assert len(out) == 2 and len(p.data) == len(frame) == p.orig_len
    want = (l3[:2] + struct.pack("!H", len(l3)) if fam == 4 else
            l3[:4] + struct.pack("!H", len(l3) - 40))
    assert p.data[off:off + len(want)] == want
    assert p.data[:off] == frame[:off]
    if fam == 4:
        assert ip_ok(p.data, off) and p.data[off + 4:off + 6] == struct.pack("!H", 77)
    assert l4_ok(p.data, off)
    assert p.data[off + len(l3) - n:] == payload(n)
    d = st.to_dict()
    assert d["fixed"] == {"length_zero": 1}
    assert d["passed"] == 1 and d["split"] == 0       # the SYN passed, the frame fixed
    if lt == 1:
        rows = tshark_check(tmp_path, [p])
        assert rows == [(len(frame), len(l3) if fam == 4 else len(l3) - 40, n)]


def test_length_zero_udp_needing_no_cut():
    l3 = ipv4(17, udp_hdr(length=8 + 500) + payload(500))
    frame, off = _len0_frame(eth(b"")[:12], 0x0800, l3)
    # a UDP seed checksum (the UDP length field stays; the IPv4 one is 0)
    frame = seed_tcp(frame[:16] + struct.pack("!H", len(l3)) + frame[18:], 14)
    frame = frame[:16] + b"\0\0" + frame[18:]
    out, st = run([pkt(frame)], gso_size=1000)
    assert struct.unpack_from("!H", out[0].data, 16)[0] == len(l3)
    assert ip_ok(out[0].data, 14) and l4_ok(out[0].data, 14)
    assert st.fixed["length_zero"] == 1


# ------------------------------------------------ 2. everything touched is valid

def _offloaded(n, flags, windows=False, ip_csum0=True):
    """A sender's small TCP packet as VMware / Windows captures show it:
    IPv4 header checksum 0, TCP checksum the pseudo-header sum (Windows
    LSO: without the length)."""
    opts = b"\x02\x04\x05\xb4" if flags & 0x02 else TS_OPT
    f = bytearray(seed_tcp(eth(ipv4(6, tcp_hdr(flags=flags, opts=opts) + payload(n))), 14))
    if windows:
        fam, src, dst, proto, l4, end = l3_info(bytes(f), 14)
        s = csum16(src + dst) + 6
        s = (s & 0xFFFF) + (s >> 16)
        f[50:52] = struct.pack("!H", s)
    if ip_csum0:
        f[24:26] = b"\0\0"
    return bytes(f)


@pytest.mark.parametrize("windows", [False, True])
@pytest.mark.parametrize("flags,n", [(0x02, 0), (0x10, 0), (0x18, 600)])
def test_offloaded_small_packets_leave_valid(tmp_path, windows, flags, n):
    """IPv4 header checksum 0 and a TCP seed (Linux: with the length;
    Windows LSO: without) on packets that need no split: the packet leaves
    with valid IPv4 and TCP checksums, everything else unchanged."""
    f = _offloaded(n, flags, windows)
    out, st = run([pkt(f)])
    d = out[0].data
    assert ip_ok(d, 14) and l4_ok(d, 14)
    assert d[:24] == f[:24] and d[26:50] == f[26:50] and d[52:] == f[52:]
    assert st.csum["completed"] == 1 and st.csum["ip_completed"] == 1
    tshark_check(tmp_path, out)


def test_ip_checksum_zero_alone_completed_and_valid_packets_untouched():
    only_ip = _offloaded(300, 0x18, ip_csum0=True)
    only_ip = fix_l4(only_ip, 14)
    good = fix_l4(eth(ipv4(6, tcp_hdr(flags=0x18, opts=TS_OPT) + payload(300))), 14)
    bad = bytearray(good)
    bad[50] ^= 0x5A                             # a damaged checksum stays damaged
    out, st = run([pkt(only_ip), pkt(good), pkt(bytes(bad))])
    assert ip_ok(out[0].data, 14) and out[0].data[:24] == only_ip[:24]
    assert out[0].data[26:] == only_ip[26:]
    assert out[1].data == good and out[2].data == bytes(bad)
    assert st.csum["ip_completed"] == 1 and st.csum["completed"] == 0


def test_fast_path_and_general_path_agree_on_offload_artefacts():
    ps = [pkt(_offloaded(n, fl, w), ts=i) for i, (n, fl, w) in
          enumerate([(0, 0x02, False), (100, 0x18, True), (0, 0x10, False), (1448, 0x10, True)])]
    a = list(GSOSplitter(GSOConfig(), fast_path=True).process(iter(ps)))
    b = list(GSOSplitter(GSOConfig(), fast_path=False).process(iter(ps)))
    assert [p.data for p in a] == [p.data for p in b]
    assert all(ip_ok(p.data, 14) and l4_ok(p.data, 14) for p in a)


# ------------------------------------------------------- 3. --mtu wins over MSS

def test_explicit_mtu_caps_a_loopback_mss(tmp_path):
    """Loopback: the SYN announces MSS 65495.  With ``--mtu 1500`` the
    segment size is the smaller of that and what 1500 leaves after the
    flow's own headers (20 IP + 32 TCP: 1448)."""
    sup = seed_tcp(eth(ipv4(6, tcp_hdr(flags=0x18, opts=TS_OPT) + payload(60000))), 14)
    ps = [syn(65495), pkt(sup)]
    out, st = run(ps, mtu=1500)
    segs = out[1:]
    assert max(p.orig_len for p in segs) <= 1514
    assert [tcp_payload_len(p, 14) for p in segs] == [1448] * 41 + [60000 - 41 * 1448]
    assert st.to_dict()["flows"][0]["source"] == "mtu"
    # without --mtu the announced MSS stands (loopback's own wire)
    out, _ = run(ps)
    assert [tcp_payload_len(p, 14) for p in out[1:]] == [60000]
    # --mss still wins over --mtu
    out, _ = run(ps, mtu=1500, mss=2000)
    assert tcp_payload_len(out[1], 14) == 2000
    rows = tshark_check(tmp_path, segs)
    assert max(r[0] for r in rows) <= 1514


def test_explicit_mtu_on_the_command_line(tmp_path):
    from builders import pcap
    sup = seed_tcp(eth(ipv4(6, tcp_hdr(flags=0x18, opts=TS_OPT) + payload(20000))), 14)
    src = tmp_path / "lo.pcap"
    src.write_bytes(pcap([(1, 0, syn(65495).data, 78), (1, 5, sup, len(sup))]))
    out = tmp_path / "o.pcap"
    run_cli("split", "-q", "--mtu", "1500", src, out, check=0)
    assert max(p.orig_len for p in read_packets(out)) <= 1514
    run_cli("split", "-q", src, out, check=0)
    assert max(p.orig_len for p in read_packets(out)) == len(sup)


# ---------------------------------------- 4. IPv6 extension headers and the MTU

DEST8 = struct.pack("!BB", 6, 0) + b"\x01\x04\0\0\0\0"         # Destination Options -> TCP
HBH8 = struct.pack("!BB", 60, 0) + b"\x01\x04\0\0\0\0"        # Hop-by-Hop (PadN) -> DestOpts
SRH24 = struct.pack("!BBBBBBH", 6, 2, 4, 0, 0, 0, 0) + b"\xfd" + b"\0" * 14 + b"\x02"


@pytest.mark.parametrize("ext,nh", [(DEST8, 60), (HBH8 + DEST8, 0), (SRH24, 43)],
                         ids=["dstopts", "hbh+dstopts", "routing"])
def test_ipv6_extension_headers_count_towards_the_mtu(tmp_path, ext, nh):
    """The SYN's MSS (1440 on a 1500 MTU) counts neither TCP options nor
    extension headers: with an 8-byte Destination Options header and
    timestamps, data segments carry 1440 - 8 - 12 = 1420 bytes
    (__tcp_mtu_to_mss: mss_clamp - icsk_ext_hdr_len), every segment keeps
    the extension headers, and frames stay within 1514 bytes."""
    src6 = b"\xfd" + b"\0" * 14 + b"\x01"
    dst6 = b"\xfd" + b"\0" * 14 + b"\x02"
    th = tcp_hdr(sport=1000, dport=2000, flags=0x18, opts=TS_OPT) + payload(20000)
    l3 = ipv6(nh, ext + th, src=src6, dst=dst6)
    sup = seed_tcp(eth(l3, et=0x86DD), 14)
    out, st = run([syn(1440, fam=6), pkt(sup)])
    segs = out[1:]
    pay = 1440 - len(ext) - 12
    assert [tcp_payload_len(p, 14) for p in segs][:-1] == [pay] * (20000 // pay)
    assert max(p.orig_len for p in segs) <= 1514
    for p in segs:
        assert p.data[54:54 + len(ext)] == ext and p.data[20] == nh
        assert l4_ok(p.data, 14)
    tshark_check(tmp_path, segs)


# ------------------------------------- 5. split --restore without restore records

def test_restore_without_records_refused(tmp_path):
    from builders import pcap
    sup = seed_tcp(eth(ipv4(6, tcp_hdr(flags=0x18, opts=TS_OPT) + payload(5000))), 14)
    small = fix_l4(eth(ipv4(6, tcp_hdr(flags=0x18) + payload(100))), 14)
    src = tmp_path / "agg.pcap"
    src.write_bytes(pcap([(1, 0, small, len(small)), (1, 5, sup, len(sup))]))
    out = tmp_path / "o.pcap"
    p = run_cli("split", "--restore", src, out)
    assert p.returncode == 2
    err = p.stderr.decode().strip().splitlines()
    assert err == ["pcapgro: error: no restore records: merge to pcapng to keep them"]
    assert not out.exists()
    # no aggregate: nothing to restore, the input comes back, exit 0
    src.write_bytes(pcap([(1, 0, small, len(small)), (1, 5, small, len(small))]))
    run_cli("split", "-q", "--restore", src, out, check=0)
    assert [p.data for p in read_packets(out)] == [small, small]
    # a pcapng can hold records: one without (merge passed its super-frames
    # unmerged, or it never was merged) is given back as it is
    from builders import epb, idb, shb
    ng = tmp_path / "agg.pcapng"
    ng.write_bytes(shb() + idb() + epb("<", 0, 1, small) + epb("<", 0, 2, sup))
    run_cli("split", "-q", "--restore", ng, out, check=0)
    assert [p.data for p in read_packets(out)] == [small, sup]


# -------------------------------------------------- 6. no flags option for 0

@pytest.mark.parametrize("flags", [0, EPB_FLAG_TSO])
def test_split_to_pcap_warns_of_no_flags_when_segments_have_none(tmp_path, flags):
    from builders import epb, idb, shb
    sup = seed_tcp(eth(ipv4(6, tcp_hdr(flags=0x18, opts=TS_OPT) + payload(5000))), 14)
    opt = [(2, struct.pack("<I", flags))]
    src = tmp_path / "lso.pcapng"
    src.write_bytes(shb() + idb() + epb("<", 0, 1, sup, options=opt))
    p = run_cli("split", "-q", "-F", "pcap", src, tmp_path / "o.pcap", check=0)
    assert b"flags" not in p.stderr, p.stderr
    out, _ = run([Packet(1, sup, len(sup), 0, 1, PacketMeta(flags=flags))])
    assert len(out) == 4 and all(p.meta.flags is None for p in out)


# ----------------------------- issue 18: records whose lengths contradict

def test_orig_len_beyond_gso_max_size_passes_unchanged():
    """IPv4 total length 0 on a record claiming 0xFFFFFFFF bytes: not a
    licence to invent segments for the uncaptured part.  The record passes
    unchanged, counted (record_lengths)."""
    f = bytearray(seed_tcp(eth(ipv4(6, tcp_hdr(flags=0x18) + payload(2000))), 14))
    f[16:18] = b"\0\0"
    p = pkt(bytes(f), orig_len=0xFFFFFFFF)
    out, st = run([p])
    assert out == [p] and st.passed == {Pass.RECORD_LENGTHS: 1}
    # IPv6 payload length 0 likewise
    g = bytearray(seed_tcp(eth(ipv6(6, tcp_hdr(flags=0x18) + payload(2000)), et=0x86DD), 14))
    g[18:20] = b"\0\0"
    q = pkt(bytes(g), orig_len=600_000)
    out, st = run([q])
    assert out == [q] and st.passed == {Pass.RECORD_LENGTHS: 1}
    # at the bound a BIG TCP frame cut by a snaplen is still split
    r = pkt(bytes(f), orig_len=14 + 524280)
    out, st = run([r])
    assert st.split == 1 and len(out) == -(-(524280 - 40) // 1460)
    assert sum(x.orig_len - 54 for x in out) == 524280 - 40


def test_captured_longer_than_original_passes_unchanged():
    """caplen > orig_len: the record contradicts itself; merge keeps it
    unchanged and so does split (no captured byte dropped)."""
    f = bytearray(seed_tcp(eth(ipv4(6, tcp_hdr(flags=0x18) + payload(2000))), 14))
    f[16:18] = b"\0\0"
    p = pkt(bytes(f), orig_len=len(f) - 40)
    out, st = run([p])
    assert out == [p] and st.passed == {Pass.RECORD_LENGTHS: 1}
    small = pkt(fix_l4(eth(ipv4(6, tcp_hdr(flags=0x18) + payload(100))), 14))
    small.orig_len -= 10
    out, st = run([small])
    assert out == [small] and st.passed == {Pass.RECORD_LENGTHS: 1}


@pytest.mark.parametrize("name", ["split-origlen-ffffffff.pcap", "split-caplen-gt-origlen.pcap"])
def test_fault_captures(tmp_path, name):
    """The fuzzing finds of issue 18: one record in, the same record out,
    exit 0, one warning line, captured bytes conserved."""
    import json
    src = DATA / name
    out = tmp_path / "o.pcap"
    p = run_cli("split", "-q", "--stats", "-", src, out, check=0)
    d = json.loads(p.stdout)
    assert d["packets_in"] == d["packets_out"] == 1
    assert d["bytes_in"] == d["bytes_out"] == 2030
    assert d["gso"]["pass_reasons"] == {"record_lengths": 1}
    assert p.stderr.decode().count("\n") == 1 and "contradict" in p.stderr.decode()
    a, b = read_packets(src), read_packets(out)
    assert [(x.data, x.orig_len) for x in a] == [(x.data, x.orig_len) for x in b]


def test_vxlan_mutant_with_a_4g_original_length(tmp_path):
    """tests/captures/vxlan4-origlen-4g-mutant.pcap (a fuzz mutant: one VXLAN
    frame whose record claims 0xFFFFFFFF bytes, headers of one segment):
    split once wrote 3 million segments for it; now every record passes
    unchanged, that one counted record_lengths with one warning line."""
    import json
    src = REPO / "tests" / "captures" / "vxlan4-origlen-4g-mutant.pcap"
    out = tmp_path / "o.pcap"
    p = run_cli("split", "-q", "--stats", "-", src, out, check=0)
    d = json.loads(p.stdout)
    assert d["packets_in"] == d["packets_out"] == 19
    assert d["bytes_in"] == d["bytes_out"]
    assert d["gso"]["pass_reasons"] == {"record_lengths": 1, "small": 18}
    assert p.stderr.decode().count("\n") == 1 and "contradict" in p.stderr.decode()
    a, b = read_packets(src), read_packets(out)
    assert [(x.data, x.orig_len) for x in a] == [(x.data, x.orig_len) for x in b]


# ------------------------------------------------ the running kernel's GSO

@pytest.fixture(scope="module")
def gso_oracle():
    import kernel_oracle as ko
    reason = ko.requirements_missing()
    if reason:
        pytest.skip(f"kernel oracle: {reason}")
    orc = ko.KernelOracle(gso=True)
    try:
        orc.start()
    except RuntimeError as e:
        orc.close()
        pytest.skip(f"kernel oracle could not start: {e}")
    try:
        yield orc
    finally:
        orc.close()


def _zero_length(frame):
    b = bytearray(frame)
    if b[14] >> 4 == 4:
        b[16:18] = b"\0\0"
        b[24:26] = b"\0\0"
    else:
        b[18:20] = b"\0\0"
    return bytes(b)


@pytest.mark.root
def test_kernel_agrees_on_length_fixups_and_extension_headers(gso_oracle):
    """The kernel's software GSO (AF_PACKET + PACKET_VNET_HDR, TSO/GSO and
    tx checksumming off) on (a) plain frames with a partial checksum: what
    it sends equals pcapgro's fix-up of the same frame with its IP length
    (and IPv4 header checksum) zeroed, as a TSO capture holds it; (b) an
    IPv6 super-frame with an 8-byte Destination Options header cut at
    1420 bytes, the size split derives from a SYN MSS of 1440: the
    kernel's segments equal split's, byte for byte."""
    import kernel_oracle as ko
    from pktbuild import nop, ts_option
    ts = nop() + nop() + ts_option(12345, 678)
    plain = [(f"fix-v{fam}-{n}", ko.gso_super(fam, 6, n, 1448, options=ts, gso=False))
             for fam in (4, 6) for n in (0, 1, 700, 1448)]
    ext = [("ext-v6-dstopts", ko.gso_super(6, 6, 20000, 1420, options=ts, ext=True))]
    res = ko.check_gso_cases(gso_oracle, plain + ext)
    for r in res[:len(plain)]:
        fr = _zero_length(ko.normalize(r.vf.frame))
        sp = GSOSplitter(GSOConfig(link_rate=0, **r.cfg))       # mss 1448
        ours = [bytes(p.data) for p in sp.split(Packet(0, fr, len(fr)), None)]
        assert sp.stats.fixed["length_zero"] == 1, (r.name, sp.stats.passed, fr.hex())
        assert ko.compare(r.kernel_packets, ours) is None, (r.name, ko.compare(r.kernel_packets, ours))
    r = res[-1]
    assert r.status == "ok", ko.gso_report([r])
    fr = ko.normalize(r.vf.frame)
    # SYN-ACK of the peer (fdaa::1 -> fdaa::2) announcing 1440
    opts = b"\x02\x04" + struct.pack("!H", 1440)
    th = tcp_hdr(sport=5000, dport=4000, flags=0x12, opts=opts)
    a, b = fr[22:38], fr[38:54]
    syn_ack = fix_l4(fr[:14] + ipv6(6, th, src=b, dst=a), 14)
    sp = GSOSplitter(GSOConfig(link_rate=0))
    out = list(sp.process(iter([Packet(0, syn_ack, len(syn_ack)), Packet(1, fr, len(fr))])))
    assert ko.compare(r.kernel_packets, [bytes(p.data) for p in out[1:]]) is None
    assert max(len(p.data) for p in out) <= 1514
