"""verify through tunnels (issue 23: "verify understands tunnelled flows, the
inner flow is the flow"), with real tshark.

VXLAN / Geneve are looked inside on the ports given (``--vxlan-port``,
``--geneve-port``, as merge takes them; ``merge --verify`` passes its own,
``split --verify`` split's standard ones); GRE, IPIP, SIT, IP4IP6 and
IP6IP6 always are, as tshark always dissects them.  Payloads are still
read from the captures (``payloads: capture``), not from tshark's hex.
"""

import json
from pathlib import Path

import pytest

from pcapgro.gro import GROConfig, GROEngine
from pcapgro.record import Packet
from pcapgro.verify.fields import decode_as
from pcapgro.verify.payload import Tunnels, tunnel_peer_ports

from capture_helpers import packets, run_cli, tshark, write_events
from pktbuild import Flow, PSH, ACK
from tunnelbuild import Tunnel

DATA = Path(__file__).parent / "data"
REAL = ["vxlan4-bulk", "vxlan4-csum"]
VX = dict(vxlan_ports=frozenset({4789}), geneve_ports=frozenset({6081}))
KINDS = [("vxlan", {}, 4), ("vxlan", dict(family=6, udp_csum="valid"), 4),
         ("geneve", dict(geneve_opts=b"\x00\x01\x02\x03\x04\x05\x06\x07"), 4),
         ("gre", {}, 4), ("gre", dict(gre_key=9, gre_csum=True), 6), ("gre", dict(gre_teb=True), 4),
         ("ipip", {}, 4), ("ipip", {}, 6), ("ipip", dict(family=6), 4), ("ipip", dict(family=6), 6)]


def _verdict(tmp_path, *args, status=0):
    p = run_cli("verify", "--json", *args, check=status)
    return json.loads(p.stdout)


def test_decode_as_leaves_tunnel_and_peer_ports_out_of_data():
    d = decode_as(Tunnels((4789,), (6081,)), frozenset({50000}))
    data = [x for x in d if x.startswith("udp.port") and x.endswith(",data")]
    assert data == ["udp.port==0-4788,data", "udp.port==4790-6080,data",
                    "udp.port==6082-49999,data", "udp.port==50001-65535,data"]
    assert "udp.port==4789,vxlan" in d and "udp.port==6081,geneve" in d
    assert decode_as(Tunnels()) == ["tcp.port==0-65535,data", "udp.port==0-65535,data"]


def test_peer_ports_are_the_tunnels_source_ports():
    peers = tunnel_peer_ports([DATA / "vxlan4-bulk-wire.pcap"], Tunnels((4789,)))
    assert peers and all(p >= 1024 and p != 4789 for p in peers)


@tshark
@pytest.mark.parametrize("name", REAL)
def test_real_vxlan_merge_verifies_by_inner_flow(name, tmp_path):
    """Real iperf3 through VXLAN: pcapgro's merge and the kernel's own GRO
    both carry exactly the inner TCP streams; without the port, the same
    outputs are compared as UDP datagrams and differ (merged tunnel
    aggregates are not the datagrams that came in)."""
    wire = DATA / f"{name}-wire.pcap"
    out = tmp_path / "out.pcapng"
    run_cli("merge", "-q", "--vxlan-port", "4789", wire, out, check=0)
    v = _verdict(tmp_path, "--vxlan-port", "4789", wire, out)
    assert v["result"] == "faithful", v["problems"]
    assert v["payloads"] == "capture"
    assert v["tcp"]["streams"] == 2 and v["tcp"]["bytes"] > 300_000
    assert v["tcp"]["packets_out"] < v["tcp"]["packets_in"] / 5
    k = _verdict(tmp_path, "--csum", "kernel", "--vxlan-port", "4789", wire,
                 DATA / f"{name}-gro.pcap")
    assert k["result"] == "faithful", k["problems"]
    plain = _verdict(tmp_path, wire, out, status=1)
    assert plain["tcp"]["streams"] == 0


@tshark
def test_damaged_inner_payload_is_found(tmp_path):
    """One byte of an inner TCP payload changed in an aggregate: a payload
    difference in the inner stream, named by OUT frame."""
    wire = DATA / "vxlan4-bulk-wire.pcap"
    out = tmp_path / "out.pcap"
    run_cli("merge", "-q", "--vxlan-port", "4789", wire, out, check=0)
    from capture_helpers import read_events
    evs = read_events(out)
    pk = [e for e in evs if type(e) is Packet]
    big = max(range(len(pk)), key=lambda i: len(pk[i].data))
    d = bytearray(pk[big].data)
    d[-100] ^= 0xFF
    pk[big].data = bytes(d)
    bad = tmp_path / "bad.pcap"
    write_events(bad, evs, "pcap")
    v = _verdict(tmp_path, "--vxlan-port", "4789", wire, bad, status=1)
    kinds = {p["kind"] for p in v["problems"]}
    assert "payload" in kinds
    assert any(p["kind"] == "payload" and p["out_frame"] == big + 1
               and p["stream"].startswith("tcp 10.99.0.1:") for p in v["problems"]), v["problems"]


def _tunnel_capture(kind, tkw, fam, path, n=12):
    """A TCP transfer inside one tunnel ending in a PSH segment, written to
    ``path``; returns what pcapgro's GRO makes of it (Packets)."""
    t = Tunnel(kind, **tkw)
    f = Flow(fam, ipid="inc")
    pkts = [t.wrap(f.pkt(i * 500, 500, flags=ACK | PSH if i == n - 1 else ACK,
                         fill=bytes([65 + i])), ts=(i + 1) * 1000) for i in range(n)]
    write_events(path, pkts, "pcap")
    eng = GROEngine(GROConfig(annotate=False, **VX))
    out = [e for e in eng.process(pkts) if type(e) is Packet]
    assert len(out) == 1
    return out


@tshark
@pytest.mark.parametrize("kind,tkw,fam", KINDS, ids=lambda x: str(x))
def test_every_tunnel_kind_verifies_by_inner_flow(kind, tkw, fam, tmp_path):
    wire, out = tmp_path / "wire.pcap", tmp_path / "out.pcap"
    write_events(out, _tunnel_capture(kind, tkw, fam, wire), "pcap")
    v = _verdict(tmp_path, "--vxlan-port", "4789", "--geneve-port", "6081", wire, out)
    assert v["result"] == "faithful", v["problems"]
    assert v["tcp"]["streams"] == 1
    assert (v["tcp"]["packets_in"], v["tcp"]["packets_out"]) == (12, 1)
    assert v["payloads"] == "capture"


@tshark
def test_merge_and_split_verify_pass_their_tunnel_ports(tmp_path):
    wire = DATA / "vxlan4-bulk-wire.pcap"
    out, back = tmp_path / "out.pcapng", tmp_path / "back.pcap"
    p = run_cli("merge", "--vxlan-port", "4789", "--verify", wire, out, check=0)
    assert b"faithful: OUT carries exactly" in p.stderr
    p = run_cli("split", "--verify", out, back, check=0)
    assert b"faithful: OUT carries exactly" in p.stderr


@tshark
@pytest.mark.parametrize("name", ["gre4-bulk", "gre4-keycsum", "ipip4-bulk"])
def test_real_gre_ipip_merge_verifies_by_inner_flow(name, tmp_path):
    """Real iperf3 through GRE / IPIP (tests/data/capture-gre.sh): merge's
    output and the kernel's own GRO output verify faithful.  In GRE with key
    and checksum, gre_gro_receive compares the checksum word, so a short last
    segment is another flow and goes up ahead of its burst's held aggregate
    (tests/test_gro_tunnels_capture.py): verify counts it as GRO's one
    reordering (``passed_ahead``), not as data out of order."""
    wire = DATA / f"{name}-wire.pcap"
    out = tmp_path / "out.pcap"
    run_cli("merge", "-q", "--csum", "kernel", wire, out, check=0)
    for got in (out, DATA / f"{name}-gro.pcap"):
        v = _verdict(tmp_path, "--csum", "kernel", wire, got)
        assert v["result"] == "faithful", v["problems"]
        assert v["tcp"]["streams"] == 2 and v["tcp"]["bytes"] > 300_000
        if name == "gre4-keycsum":
            assert v["tcp"]["passed_ahead"] >= 1


def _gre_csum_burst(psh):
    """GRE with key and checksum: 5 full segments, a 300-byte one (PSH when
    ``psh``), 5 full ones, 10 us apart: the short one is another GRO flow
    (another checksum word)."""
    t, f = Tunnel("gre", gre_key=7, gre_csum=True), Flow(4, ipid="inc")
    out, seq = [], 0
    for k in range(11):
        n = 300 if k == 5 else 1400
        fl = ACK | PSH if k == 5 and psh else ACK
        out.append(t.wrap(f.pkt(seq, n, flags=fl), ts=10**11 + k * 10_000))
        seq += n
    return out


@tshark
@pytest.mark.parametrize("psh", [True, False], ids=["psh", "no_psh"])
def test_gre_csum_short_segment_overtakes_only_when_handed_up_at_once(psh, tmp_path):
    """A short segment in GRE with a checksum goes up ahead of the aggregate
    before it only when tcp_gro_receive flushes it at once (PSH here):
    merge puts it there and verify accepts it; without PSH GRO holds it
    (after that aggregate), so OUT with it moved ahead is DIFFERENT."""
    wire, out = tmp_path / "w.pcap", tmp_path / "m.pcap"
    write_events(wire, _gre_csum_burst(psh), "pcap")
    run_cli("merge", "-q", "--csum", "kernel", wire, out, check=0)
    got = packets(out)
    short = next(i for i, p in enumerate(got) if len(p.data) < 400)
    if psh:
        assert short == 0               # ahead of the held aggregate, as the kernel
        v = _verdict(tmp_path, "--csum", "kernel", wire, out)
        assert v["result"] == "faithful" and v["tcp"]["passed_ahead"] == 1
        return
    assert short == 1                   # held, after the aggregate
    moved = tmp_path / "moved.pcap"
    p = got[short]
    got[0:2] = [Packet(got[0].ts, p.data, p.orig_len), got[0]]
    write_events(moved, got, "pcap")
    v = _verdict(tmp_path, "--csum", "kernel", wire, moved, status=1)
    assert v["result"] == "differ"


@tshark
def test_real_reordering_after_an_accepted_one_names_the_moved_frame(tmp_path):
    """GRE with key and checksum, two bursts each ending in a short PSH
    segment: merge hands each short one up ahead of its burst's aggregate
    (OUT: short, aggregate, short, aggregate, aggregate), which verify
    accepts.  With the second short segment moved ahead of the first
    aggregate too (ahead of two aggregates: not what GRO does) the
    difference is named by that moved frame (OUT frame 2), not by the first
    short segment (frame 1), whose move GRO explains."""
    t, f = Tunnel("gre", gre_key=7, gre_csum=True), Flow(4, ipid="inc")
    pkts, seq = [], 0
    for k in range(17):
        short = k in (5, 11)
        n = 300 if short else 1400
        pkts.append(t.wrap(f.pkt(seq, n, flags=ACK | PSH if short else ACK),
                           ts=10**11 + k * 10_000))
        seq += n
    wire, out, moved = tmp_path / "w.pcap", tmp_path / "m.pcap", tmp_path / "moved.pcap"
    write_events(wire, pkts, "pcap")
    run_cli("merge", "-q", "--csum", "kernel", wire, out, check=0)
    got = packets(out)
    assert [len(p.data) < 400 for p in got] == [True, False, True, False, False]
    v = _verdict(tmp_path, "--csum", "kernel", wire, out)
    assert v["result"] == "faithful" and v["tcp"]["passed_ahead"] == 2
    s2 = got[2]
    got = [got[0], Packet(got[0].ts, s2.data, s2.orig_len), got[1], got[3], got[4]]
    write_events(moved, got, "pcap")
    v = _verdict(tmp_path, "--csum", "kernel", wire, moved, status=1)
    assert v["problems_total"] == 1 and v["tcp"]["passed_ahead"] == 0
    p = v["problems"][0]
    assert (p["kind"], p["out_frame"], p["in_frame"]) == ("order", 2, 12), p
    assert p["message"] == ("data at seq 14400 (relative 14300) arrives before seq 100 "
                            "(relative 0) (out of order compared with IN)")
