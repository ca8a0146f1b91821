"""pcapgro split (GSO/TSO) on real captures: the kernel's shared captures
and the public super-frame samples."""

import shutil
import struct
import subprocess
from collections import defaultdict

import pytest

from pcapgro.gso import GSOConfig, GSOSplitter, Pass
from pcapgro.linklayer import network_layer
from pcapgro.record import Packet

from test_gso_support import KERNEL, PUBLIC, ip_ok, l3_info, l4_ok, read_packets



def split(path, **kw):
    s = GSOSplitter(GSOConfig(**kw))
    out = [ev for ev in s.process(iter(read_packets(path)))]
    return out, s.stats


def tcp_view(p):
    """Parsed fields of a TCP packet: dict or None."""
    l3off, et, _ = network_layer(p.linktype, p.data)
    if l3off is None:
        return None
    d = p.data
    fam, src, dst, proto, l4, end = l3_info(d, l3off)
    if proto != 6:
        return None
    if end in (l3off, l3off + 40):          # TSO / BIG TCP length 0
        end = p.orig_len
    sport, dport, seq, ack, off, flags = struct.unpack_from("!HHIIBB", d, l4)
    thl = (off >> 4) * 4
    return {"fam": fam, "key": (src, dst, sport, dport), "seq": seq, "flags": flags,
            "ack": ack, "opts": d[l4 + 20:l4 + thl], "pay": d[l4 + thl:end], "l3off": l3off,
            "l4": l4, "thl": thl, "ipid": struct.unpack_from("!H", d, l3off + 4)[0] if fam == 4 else None,
            "l3len": end - l3off, "nh": d[l3off + 6] if fam == 6 else None}


def streams(pkts):
    """Per flow: the TCP byte stream (bytes placed at seq offsets from the
    first data seq), from data segments."""
    out = defaultdict(dict)
    for p in pkts:
        v = tcp_view(p)
        if v is None or not v["pay"]:
            continue
        out[v["key"]][v["seq"]] = v["pay"]
    res = {}
    for k, segs in out.items():
        buf = bytearray()
        base = min(segs)
        for seq in sorted(segs):
            pay = segs[seq]
            o = (seq - base) & 0xFFFFFFFF
            if len(buf) < o + len(pay):
                buf.extend(b"\0" * (o + len(pay) - len(buf)))
            buf[o:o + len(pay)] = pay
        res[k] = bytes(buf)
    return res


def check_all_checksums(pkts):
    for p in pkts:
        l3off, et, _ = network_layer(p.linktype, p.data)
        if l3off is None:
            continue
        if p.data[l3off] >> 4 == 4:
            assert ip_ok(p.data, l3off)
        assert l4_ok(p.data, l3off), p


# ----------------------------------------------------------- kernel captures

def test_tcp4_tso_sender():
    path = KERNEL / "tcp4-tso-sender.pcap"
    inp = read_packets(path)
    out, st = split(path)
    assert st.packets == len(inp) == 60
    assert st.split == 30 and st.segments == 1081
    assert all(type(p) is Packet for p in out)
    assert len(out) == 30 + 1081
    assert max(p.orig_len for p in out) <= 1514
    assert all(len(p.data) == p.orig_len for p in out)
    assert streams(out) == streams(inp)
    check_all_checksums(out)
    # sender's own SYN announced 1460, data carries 12 option bytes: 1448
    d = st.to_dict()
    assert d["size_sources"] == {"own_syn": 1}
    assert d["flows"][0]["segment_size"] == 1448
    for p in out:
        v = tcp_view(p)
        if v["pay"]:
            assert len(v["pay"]) <= 1448
    ts = [p.ts for p in out]
    assert ts == sorted(ts)
    assert d["pass_reasons"] == {"small": 30}
    assert d["checksums"]["completed"] == 30     # the small packets' seeds


@pytest.mark.tshark
@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not on PATH")
@pytest.mark.parametrize("name,kw", [("tcp4-tso-sender.pcap", {}),
                                     ("udp4-uso-sender.pcap", {"gso_size": 1200})])
def test_tshark_checksums(tmp_path, name, kw):
    from pcapgro.capture import open_reader, open_writer
    r = open_reader(KERNEL / name)
    o = tmp_path / "out.pcap"
    w = open_writer(o, "pcap")
    for ev in GSOSplitter(GSOConfig(**kw)).process(iter(r)):
        w.write(ev)
    w.close()
    r.close()
    args = ["tshark", "-r", str(o), "-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
            "-o", "udp.check_checksum:TRUE", "-o", "ip.tso_support:FALSE",
            "-o", "ipv6.tso_support:FALSE"]
    bad = subprocess.run(args + ["-Y", "tcp.checksum.status==0 || ip.checksum.status==0 || "
                                 "udp.checksum.status==0"], capture_output=True, text=True)
    assert bad.returncode == 0, bad.stderr
    assert bad.stdout.strip() == ""
    good = subprocess.run(args + ["-Y", "tcp.checksum.status==1 || udp.checksum.status==1",
                                  "-T", "fields", "-e", "frame.len"], capture_output=True, text=True)
    lens = [int(x) for x in good.stdout.split()]
    assert len(lens) == len(read_packets(o)) and max(lens) <= 1514


def udp_flows(pkts):
    """Flows in order of appearance, each the list of UDP payloads."""
    flows = {}
    for p in pkts:
        l3off, et, _ = network_layer(p.linktype, p.data)
        fam, src, dst, proto, l4, end = l3_info(p.data, l3off)
        if proto != 17:
            continue
        key = (src, dst) + struct.unpack_from("!HH", p.data, l4)
        ulen = struct.unpack_from("!H", p.data, l4 + 4)[0]
        assert ulen == end - l4
        flows.setdefault(key, []).append(p.data[l4 + 8:end])
    return list(flows.values())


def test_udp4_uso_sender_matches_wire():
    out, st = split(KERNEL / "udp4-uso-sender.pcap", gso_size=1200)
    wire = read_packets(KERNEL / "udp4-fwd-wire.pcap")
    assert st.split == 40 and st.segments == len(wire) == 392
    check_all_checksums(out)
    a, b = udp_flows(out), udp_flows(wire)
    assert [len(f) for f in a] == [len(f) for f in b]
    for fa, fb in zip(a, b):
        assert [len(x) for x in fa] == [len(x) for x in fb]
        assert fa == fb
    assert sorted(p.orig_len for p in out) == sorted(p.orig_len for p in wire)
    # IPv4 ID base + k within each super-datagram
    inp = read_packets(KERNEL / "udp4-uso-sender.pcap")
    first = struct.unpack_from("!H", inp[0].data, 18)[0]
    n = -(-(inp[0].orig_len - 42) // 1200)
    ids = [struct.unpack_from("!H", p.data, 18)[0] for p in out[:n]]
    assert ids == [(first + k) & 0xFFFF for k in range(n)]


def test_udp_without_gso_size_names_flow():
    from pcapgro.errors import UnusableInput
    with pytest.raises(UnusableInput, match=r"10\.88\.0\.1:\d+ > 10\.88\.0\.2:9999"):
        split(KERNEL / "udp4-uso-sender.pcap")


@pytest.mark.parametrize("name", ["tcp4-bulk", "tcp6-bulk", "tcp4-4flows"])
def test_kernel_gro_aggregates_split_back_to_wire(name):
    """The receiver's GRO aggregates (Linux 6.18), split, give the
    sender's wire segments back byte for byte, in order (these senders
    increment IPv4 IDs, so no renumbering shows)."""
    out, st = split(KERNEL / f"{name}-gro.pcap")
    wire = read_packets(KERNEL / f"{name}-wire.pcap")
    assert st.split > 0
    assert len(out) == len(wire)
    check_all_checksums(out)
    for a, b in zip(out, wire):
        assert a.data == b.data and a.orig_len == b.orig_len
    ts = [p.ts for p in out]
    assert ts == sorted(ts)


# ---------------------------------------------------------- public samples

def seg_views(out):
    vs = [tcp_view(p) for p in out]
    assert all(v is not None for v in vs)
    return vs


@pytest.mark.parametrize("name,n,mss,fam", [
    ("tcpdump/gso-ipv4.pcap", 5, 1448, 4),
    ("tcpdump/gso-ipv6.pcap", 5, 1428, 6),
    ("tcpdump/bigtcp-ipv4.pcap", 56, 1448, 4),
    ("tcpdump/bigtcp-ipv6.pcap", 56, 1428, 6),
    ("tcpdump/bigtcp-ipv6-hbh.pcap", 57, 1428, 6),
    ("packetnet/ipv4_tso_frame.pcap", 4, 1460, 4),
    ("tcpdump/ipv4_tcp_http_xml_tso.pcap", 2, 1460, 4),
])
def test_public_super_frames(name, n, mss, fam):
    path = PUBLIC / name
    (sup,) = read_packets(path)
    vin = tcp_view(sup)
    out, st = split(path)
    assert st.split == 1 and st.segments == n == len(out)
    assert st.to_dict()["size_sources"] == {"mtu": 1}
    vs = seg_views(out)
    total = len(vin["pay"])
    assert sum(len(v["pay"]) for v in vs) == total
    assert b"".join(v["pay"] for v in vs) == vin["pay"]
    for k, (p, v) in enumerate(zip(out, vs)):
        assert v["seq"] == (vin["seq"] + k * mss) & 0xFFFFFFFF
        exp = mss if k < n - 1 else total - mss * (n - 1)
        assert len(v["pay"]) == exp
        assert v["l3len"] <= 1500
        assert p.orig_len == len(p.data) == v["l3off"] + v["l3len"]
        assert v["ack"] == vin["ack"] and v["opts"] == vin["opts"]
        fin_psh = vin["flags"] & 0x09
        assert v["flags"] == (vin["flags"] if k == n - 1 else vin["flags"] & ~0x09)
        if k < n - 1:
            assert not v["flags"] & 0x09 or not fin_psh
        if fam == 4:
            assert v["ipid"] == (vin["ipid"] + k) & 0xFFFF
        else:
            assert v["nh"] == 6                   # jumbo HBH removed
            assert p.data[v["l3off"] + 40:v["l3off"] + 40 + v["thl"]][:4] == p.data[v["l4"]:v["l4"] + 4]
        assert p.data[:v["l3off"]] == sup.data[:v["l3off"]]
    check_all_checksums(out)


def test_bigtcp_hbh_removed():
    out, _ = split(PUBLIC / "tcpdump/bigtcp-ipv6-hbh.pcap")
    (sup,) = read_packets(PUBLIC / "tcpdump/bigtcp-ipv6-hbh.pcap")
    assert sup.data[14 + 6] == 0              # input: Hop-by-Hop first
    for p in out:
        assert p.data[14 + 6] == 6
        assert p.data[14 + 40] == sup.data[14 + 48]     # TCP header right after IPv6
        assert struct.unpack_from("!H", p.data, 18)[0] == len(p.data) - 54


@pytest.mark.parametrize("name,fam", [("tcpdump/gso-ipv4-vxlan-ipv4.pcap", 4),
                                      ("tcpdump/gso-ipv6-geneve-ipv6.pcap", 6)])
def test_tunnel_super_frame_is_cut(name, fam):
    """A VM's TSO super-frame inside VXLAN / Geneve (inner checksum and the
    outer UDP checksum partial): tunnel GSO cuts it into MTU-sized frames
    (inner MSS 1398 / 1358 = what fits 1500 with every header), outer and
    inner lengths, outer IPv4 ID + k, every checksum valid; PSH on the last
    inner segment only (issue 23)."""
    (sup,) = read_packets(PUBLIC / name)
    out, st = split(PUBLIC / name)
    assert st.split == 1 and st.passed == {}
    assert [len(p.data) for p in out] == [1514] * 5
    mss = 1398 if fam == 4 else 1358
    seqs = []
    for k, p in enumerate(out):
        d = p.data
        if fam == 4:
            assert struct.unpack_from("!HH", d, 16) == (1500, (0x30e8 + k) & 0xFFFF)
            assert struct.unpack_from("!H", d, 38)[0] == 1480          # outer UDP length
            inner = 14 + 20 + 8 + 8 + 14
        else:
            assert struct.unpack_from("!H", d, 18)[0] == 1460
            assert struct.unpack_from("!H", d, 58)[0] == 1460
            inner = 14 + 40 + 8 + 8 + 14
        tcp_off = inner + (20 if fam == 4 else 40)
        seqs.append(struct.unpack_from("!I", d, tcp_off + 4)[0])
        assert bool(d[tcp_off + 13] & 0x08) == (k == 4)
        assert d[:inner - 14 - 8 - 8 - (20 if fam == 4 else 40)] == sup.data[:14]
    assert [b - a for a, b in zip(seqs, seqs[1:])] == [mss] * 4
    if shutil.which("tshark"):
        r = subprocess.run(["tshark", "-r", "-", "-o", "tcp.check_checksum:TRUE", "-o",
                            "udp.check_checksum:TRUE", "-T", "fields", "-e",
                            "udp.checksum.status", "-e", "tcp.checksum.status"],
                           input=_pcap(out), capture_output=True)
        assert r.stdout.decode().split() == ["1"] * 10


@pytest.mark.parametrize("name", ["packetnet/LinuxCookedCapture.pcap",
                                  "packetnet/LinuxCookedCapturev2.pcap",
                                  "packetnet/802.1q_vlan_ipv4_tcp.pcap",
                                  "packetnet/ipv6_http.pcap",
                                  "packetnet/udpPacketWithEthernetTrailers.pcap"])
def test_ordinary_captures_pass_byte_identical(name):
    inp = read_packets(PUBLIC / name)
    out, st = split(PUBLIC / name, complete_csum=False)
    assert [(p.ts, p.data, p.orig_len) for p in out] == [(p.ts, p.data, p.orig_len) for p in inp]
    assert st.split == 0


def _recorded_roundtrip(tmp_path, wire, merge_args, split_args, keep=lambda p: True):
    """merge WIRE (pcapng, annotated) then split it with SPLIT_ARGS; returns
    (packets of WIRE kept, packets split, split's size_sources)."""
    import json
    from capture_helpers import run_cli
    from pcapgro.capture import open_reader, open_writer
    src = tmp_path / "in.pcap"
    w = open_writer(src, "pcap")
    kept = []
    for e in open_reader(wire):
        if type(e) is not Packet or keep(e):
            w.write(e)
            if type(e) is Packet:
                kept.append(e.data)
    w.close()
    m, s = tmp_path / "m.pcapng", tmp_path / "s.pcap"
    run_cli("merge", "-q", *merge_args, src, m, check=0)
    p = run_cli("split", "-q", "--stats", "-", *split_args, m, s, check=0)
    got = [e.data for e in open_reader(s) if type(e) is Packet]
    return kept, got, json.loads(p.stdout)["gso"]["size_sources"]


def test_split_takes_gso_size_from_pcapgro_aggregates(tmp_path):
    """An aggregate pcapgro merge wrote records its gso_size: UDP needs no
    --gso-size, and a TCP flow without a SYN is cut at the recorded size,
    not the MTU's (merge then split gives the wire back)."""
    kept, got, src = _recorded_roundtrip(tmp_path, KERNEL / "udp4-fwd-wire.pcap",
                                         ["--udp", "gro"], [])
    assert got == kept and src == {"recorded": 1}
    no_syn = lambda p: not (len(p.data) > 47 and p.data[47] & 0x02)     # IPv4/TCP SYN bit
    kept, got, src = _recorded_roundtrip(tmp_path, KERNEL / "tcp4-bulk-wire.pcap", [],
                                         ["--mtu", "9000"], keep=no_syn)
    assert got == kept and src == {"recorded": 1}


def _pcap(pkts):
    """Classic pcap bytes (microseconds, Ethernet) of ``pkts``."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    for p in pkts:
        out.append(struct.pack("<IIII", p.ts // 10**9, p.ts % 10**9 // 1000, len(p.data),
                               p.orig_len) + bytes(p.data))
    return b"".join(out)
