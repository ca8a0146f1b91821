"""Real iperf3 traffic through a VXLAN tunnel (tests/data/vxlan4-*.pcap,
made by tests/data/capture-vxlan.sh on Linux 6.18): ``pcapgro merge
--vxlan-port 4789 --csum kernel`` of the wire side must give the
receiver's packets after GRO exactly -- same bytes, same order."""

from pathlib import Path

import pytest

from pcapgro.capture import open_reader
from pcapgro.record import Packet

from capture_helpers import run_cli

DATA = Path(__file__).parent / "data"
NAMES = ["vxlan4-bulk", "vxlan4-csum"]


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
    wire = DATA / "vxlan4-bulk-wire.pcap"
    m = tmp_path / "m.pcapng"
    run_cli("merge", "-q", "--vxlan-port", "4789", "-F", "pcapng", wire, m, check=0)
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
