"""Real iperf3 traffic through tunnels between two namespaces on Linux
6.18: VXLAN (tests/data/vxlan4-*.pcap, made by tests/data/capture-vxlan.sh)
and GRE / IPIP (tests/data/gre4-*.pcap, ipip4-*.pcap, made by
tests/data/capture-gre.sh through user-space tunnel endpoints).  ``pcapgro
merge --csum kernel`` of the wire side (with ``--vxlan-port 4789`` for
VXLAN; GRE and IPIP need no option) must give the receiver's packets after
GRO exactly -- same bytes, same order -- compiled and with PCAPGRO_NO_C=1."""

import json
import struct
from pathlib import Path

import pytest

from pcapgro.capture import open_reader
from pcapgro.record import Packet

from capture_helpers import run_cli

DATA = Path(__file__).parent / "data"
NAMES = ["vxlan4-bulk", "vxlan4-csum"]
# GRE / IPIP captures: the by_kind key of their tunnelled TCP, the offset of
# the inner IPv4 header (14 Ethernet + 20 outer IPv4 + the tunnel header)
TUNNELS = {"gre4-bulk": ("gre_tcp", 38), "gre4-keycsum": ("gre_tcp", 46),
           "ipip4-bulk": ("ipip_tcp", 34)}


def packets(path):
    r = open_reader(path)
    try:
        return [bytes(ev.data) for ev in r if type(ev) is Packet]
    finally:
        r.close()


@pytest.mark.parametrize("name", NAMES)
def test_merge_reproduces_the_receiver(name, tmp_path):
    wire = DATA / f"{name}-wire.pcap"
    kernel = packets(DATA / f"{name}-gro.pcap")
    out = tmp_path / "out.pcap"
    run_cli("merge", "-q", "--vxlan-port", "4789", "--csum", "kernel", "--stats",
            tmp_path / "st.json", wire, out, check=0)
    ours = packets(out)
    assert len(kernel) < len(packets(wire)) / 5          # the kernel merged
    assert ours == kernel
    st = __import__("json").loads((tmp_path / "st.json").read_text())["gro"]
    assert st["by_kind"]["vxlan_tcp"]["aggregates"] > 0
    assert st["by_kind"]["tcp"]["aggregates"] == 0


def test_outer_checksums_as_captured():
    """vxlan4-bulk carries outer UDP checksum 0 (kept 0 on aggregates),
    vxlan4-csum a set one (the pseudo-header seed on aggregates)."""
    for name, zero in (("vxlan4-bulk", True), ("vxlan4-csum", False)):
        for d in packets(DATA / f"{name}-wire.pcap"):
            assert (d[40:42] == b"\0\0") == zero


def test_without_the_socket_nothing_merges(tmp_path):
    wire = DATA / "vxlan4-bulk-wire.pcap"
    out = tmp_path / "out.pcap"
    run_cli("merge", "-q", wire, out, check=0)
    assert packets(out) == packets(wire)


def test_merge_then_split_restore_gives_the_wire_back(tmp_path):
    """pcapng aggregates of tunnelled flows carry restore records (the
    inner payload found through the tunnel): split --restore gives the
    wire capture back, times included."""
    _restore_gives_wire_back(DATA / "vxlan4-bulk-wire.pcap", tmp_path, "--vxlan-port", "4789")


def _restore_gives_wire_back(wire, tmp_path, *merge_args):
    """merge WIRE to pcapng (``merge_args``), split --restore it: the
    packets of WIRE, times and bytes."""
    m = tmp_path / "m.pcapng"
    run_cli("merge", "-q", *merge_args, "-F", "pcapng", wire, m, check=0)
    out = tmp_path / "r.pcap"
    run_cli("split", "-q", "--restore", m, out, check=0)
    r = open_reader(out)
    got = [(ev.ts, bytes(ev.data)) for ev in r if type(ev) is Packet]
    r.close()
    r = open_reader(wire)
    want = [(ev.ts, bytes(ev.data)) for ev in r if type(ev) is Packet]
    r.close()
    assert got == want


def test_forwarding_segments_tunnel_aggregates(tmp_path):
    """merge --gso: a router forwarding the tunnel (outer TTL - 1) sends
    every aggregate as the wire frames it was made of, IDs unchanged."""
    wire = DATA / "vxlan4-bulk-wire.pcap"
    out = tmp_path / "f.pcap"
    run_cli("merge", "-q", "--gso", "--vxlan-port", "4789", wire, out, check=0)
    got, want = packets(out), packets(wire)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[22] == w[22] - 1                      # outer TTL
        assert g[34:] == w[34:] and g[18:20] == w[18:20]


@pytest.mark.parametrize("name", sorted(TUNNELS))
def test_merge_reproduces_the_receiver_through_gre_and_ipip(name, tmp_path, monkeypatch):
    """GRE without options, GRE with key and checksum, IPIP: merge of the
    wire side gives the receiver's packets after gre_gro_receive /
    ipip_gro_receive, compiled and reference alike (same statistics).
    The sender sent in batches 2 ms apart, one NAPI poll each: some
    aggregates end at a poll end, the others at a GRO rule (PSH, a short
    segment)."""
    wire = DATA / f"{name}-wire.pcap"
    kernel = packets(DATA / f"{name}-gro.pcap")
    stats = []
    for no_c in (False, True):
        if no_c:
            monkeypatch.setenv("PCAPGRO_NO_C", "1")
        else:
            monkeypatch.delenv("PCAPGRO_NO_C", raising=False)
        out, st = tmp_path / f"out{no_c}.pcap", tmp_path / f"st{no_c}.json"
        run_cli("merge", "-q", "--csum", "kernel", "--stats", st, wire, out, check=0)
        assert packets(out) == kernel
        stats.append(json.loads(st.read_text()))
    assert stats[0] == stats[1]
    assert len(kernel) < len(packets(wire)) / 5          # the kernel merged
    gro = stats[0]["gro"]
    kind = TUNNELS[name][0]
    assert gro["by_kind"][kind]["aggregates"] > 0
    assert gro["by_kind"]["tcp"]["aggregates"] == 0
    assert gro["flush_reasons"]["poll_end"] > 0 and gro["flush_reasons"]["psh"] > 0


def _inner_seq(d, off):
    ihl = (d[off] & 15) * 4
    return struct.unpack_from("!I", d, off + ihl + 4)[0]


def test_gre_and_ipip_headers_as_captured():
    """What the relays sent: outer IPv4 with DF and IDs counting up by one,
    protocol 47 / 4; GRE flags 0, or C|K with key 42 and a valid
    checksum; inner IPv4."""
    from pcapgro.checksum import ones_sum
    for name, (kind, off) in TUNNELS.items():
        ids = []
        for d in packets(DATA / f"{name}-wire.pcap"):
            assert d[23] == (4 if kind == "ipip_tcp" else 47)
            assert d[20] & 0x40 and d[off] >> 4 == 4
            ids.append(struct.unpack_from("!H", d, 18)[0])
            if name == "gre4-bulk":
                assert d[34:38] == b"\x00\x00\x08\x00"
            elif name == "gre4-keycsum":
                assert d[34:38] == b"\xa0\x00\x08\x00" and d[40:46] == struct.pack("!HI", 0, 42)
                assert ones_sum(d[34:]) % 0xFFFF == 0
        assert all(b - a == 1 for a, b in zip(ids, ids[1:]))


def test_gre_checksum_of_aggregates_is_the_first_segments():
    """gre_gro_complete does not touch the GRE checksum: on the receiver an
    aggregate carries its first segment's checksum, which no longer
    matches (merge --csum kernel writes the same)."""
    from pcapgro.checksum import ones_sum
    off = TUNNELS["gre4-keycsum"][1]
    first = {}
    for d in packets(DATA / "gre4-keycsum-wire.pcap"):
        first.setdefault(_inner_seq(d, off), d[38:40])
    merged = 0
    for d in packets(DATA / "gre4-keycsum-gro.pcap"):
        if len(d) > 1514:
            merged += 1
            assert d[38:40] == first[_inner_seq(d, off)]
            assert ones_sum(d[34:]) % 0xFFFF != 0
    assert merged > 10


def test_gre_key_csum_short_last_segments_overtake():
    """With K and C the kernel compares the checksum word as if it were the
    key (gre_gro_receive, ``*(greh + 1)``): full-size segments of a flow
    share it, a shorter last segment (with PSH) has another one, so it is
    another flow and goes up at once, ahead of its burst's aggregate, which
    waits for the poll end.  Without C the short segments merge (ended by
    short_segment / psh)."""
    out = {}
    for name in ("gre4-keycsum", "gre4-bulk"):
        off = TUNNELS[name][1]
        pk = packets(DATA / f"{name}-gro.pcap")
        port = max(pk, key=len)[off + 20:off + 22]              # the data connection
        got = [(len(d), _inner_seq(d, off)) for d in pk if d[off + 20:off + 22] == port
               and (d[off + 20 + 13] & 0x08 or len(d) > 1514)]  # PSH or aggregates
        out[name] = sum(1 for (l1, s1), (l2, s2) in zip(got, got[1:])
                        if l1 < 1514 and l2 > 1514 and s1 > s2)
    assert out["gre4-keycsum"] >= 2 and out["gre4-bulk"] == 0


@pytest.mark.parametrize("name", sorted(TUNNELS))
def test_gre_and_ipip_merge_then_restore_gives_the_wire_back(name, tmp_path):
    """split --restore of the pcapng aggregates gives the wire capture back,
    times included."""
    _restore_gives_wire_back(DATA / f"{name}-wire.pcap", tmp_path)


@pytest.mark.parametrize("name", sorted(TUNNELS))
def test_forwarding_segments_gre_and_ipip_aggregates(name, tmp_path):
    """merge --gso: a router forwarding the tunnel (outer TTL - 1) sends
    every aggregate as the wire frames it was made of: outer IDs counting
    up again, a GRE checksum computed per segment.  In outer-ID order: with
    key and checksum the short last segments overtook their aggregates."""
    wire = DATA / f"{name}-wire.pcap"
    out = tmp_path / "f.pcap"
    run_cli("merge", "-q", "--gso", wire, out, check=0)
    got, want = packets(out), packets(wire)
    assert len(got) == len(want)
    if name == "gre4-keycsum":
        assert got != sorted(got, key=lambda d: d[18:20])
        got = sorted(got, key=lambda d: d[18:20])
    for g, w in zip(got, want):
        assert g[22] == w[22] - 1                      # outer TTL
        assert g[34:] == w[34:] and g[18:20] == w[18:20]
