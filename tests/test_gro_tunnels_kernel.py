"""The running kernel as oracle for tunnel GRO (issue 23).

Wire-side tunnel frames are replayed into a veth with GRO on and captured
after GRO (:mod:`kernel_oracle`).  The receiver namespace gets a vxlan
device on port 4789 (its UDP tunnel socket makes udp_gro_receive call
vxlan_gro_receive) and one on port 6081 (the socket that lets an
option-less Geneve frame merge: vxlan_gro_receive compares the same 8
header bytes geneve_gro_receive would).  GRE, IPIP, SIT, IP4IP6 and
IP6IP6 need no device: their GRO handlers are built in and run on the
veth's receive path whatever device (none here) would take the packet.
(The vxlan devices have no IPv6 socket here -- IPv6 is off in the
namespaces -- so VXLAN over an outer IPv6 header is covered by the rule
tests only.)  pcapgro must give the same frames with ``--vxlan-port 4789 --geneve-port
6081 --csum kernel``.
"""

from pathlib import Path

import pytest

import kernel_oracle as ko
from pcapgro.capture import open_reader
from pcapgro.record import Packet
from pktbuild import Flow
from tunnelbuild import Tunnel

REASON = ko.requirements_missing()
CFG = dict(vxlan_ports=frozenset({4789}), geneve_ports=frozenset({6081}))


class TunnelOracle(ko.KernelOracle):
    """A KernelOracle whose receiver has vxlan devices on 4789 and 6081."""

    def _setup(self):
        super()._setup()
        for name, vni, port in (("pgvx0", 42, 4789), ("pgvx1", 43, 6081)):
            ko._run("ip", "-n", self.ns_b, "link", "add", name, "type", "vxlan", "id", str(vni),
                    "dstport", str(port))
            ko._run("ip", "-n", self.ns_b, "link", "set", name, "up")


@pytest.fixture(scope="module")
def oracle():
    if REASON:
        pytest.skip(f"kernel oracle: {REASON}")
    orc = TunnelOracle()
    try:
        orc.start()
    except RuntimeError as e:
        orc.close()
        pytest.skip(f"kernel oracle could not start: {e}")
    yield orc
    orc.close()


def _frames(tun, n=6, plen=1000, inner=None, each=None):
    f = inner or Flow(4, ipid="inc")
    out = []
    for i in range(n):
        kw = each(i) if each else {}
        ikw = kw.pop("inner", {})
        out.append(tun.wrap(f.pkt(i * plen, plen, **ikw), **kw).data)
    return out


def _outer_evil(fr):
    """Frame ``fr`` (Ethernet, outer IPv4) with the outer header's reserved
    bit set (an L3 flush) and its header checksum fixed."""
    fr = bytearray(fr)
    fr[20] |= 0x80
    fr[24:26] = b"\0\0"
    s = sum(int.from_bytes(fr[14 + i:16 + i], "big") for i in range(0, 20, 2))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    fr[24:26] = (~s & 0xFFFF).to_bytes(2, "big")
    return bytes(fr)


def _cases():
    T = Tunnel
    c = {
        "vxlan": _frames(T("vxlan")),
        "vxlan_csum": _frames(T("vxlan", udp_csum="valid")),
        "vxlan_bad_outer_csum": _frames(T("vxlan", udp_csum="valid"),
                                        each=lambda i: {"csum": 0x1234} if i == 2 else {}),
        "vxlan_csum_mixed": _frames(T("vxlan", udp_csum="valid"),
                                    each=lambda i: {"csum": "zero"} if i == 3 else {}),
        "vxlan_outer_ttl": _frames(T("vxlan"), each=lambda i: {"ttl": 9} if i == 3 else {}),
        "vxlan_outer_tos": _frames(T("vxlan"), each=lambda i: {"tos": 4} if i == 3 else {}),
        "vxlan_outer_df": _frames(T("vxlan"), each=lambda i: {"df": True} if i == 3 else {}),
        "vxlan_outer_id_fixed": _frames(T("vxlan", ipid=7)),
        "vxlan_outer_id_jump": _frames(T("vxlan"), each=lambda i: {"ident": 900} if i == 3
                                       else {}),
        "vxlan_outer_df_id_fixed": _frames(T("vxlan", df=True, ipid=0)),
        "vxlan_inner_psh": _frames(T("vxlan"), each=lambda i: {"inner": {"flags": 0x18}}
                                   if i == 2 else {}),
        "vxlan_v6_inner": _frames(T("vxlan"), inner=Flow(6)),
        "vxlan_other_port": _frames(T("vxlan", dport=4790)),
        "geneve_no_opts": _frames(T("geneve")),
        "gre": _frames(T("gre")),
        "gre_key": _frames(T("gre", gre_key=77)),
        "gre_csum": _frames(T("gre", gre_csum=True)),
        "gre_key_csum": _frames(T("gre", gre_key=77, gre_csum=True)),
        "gre_seq": _frames(T("gre", gre_flags=0x1000)),
        "gre_teb": _frames(T("gre", gre_teb=True)),
        "gre_v6_inner": _frames(T("gre"), inner=Flow(6)),
        "gre_v6_outer": _frames(T("gre", family=6)),
        "gre_outer_id_jump": _frames(T("gre"), each=lambda i: {"ident": 900} if i == 3 else {}),
        "ipip": _frames(T("ipip")),
        "sit": _frames(T("ipip"), inner=Flow(6)),
        "ip4ip6": _frames(T("ipip", family=6)),
        "ip6ip6": _frames(T("ipip", family=6), inner=Flow(6)),
        "ipip_outer_ttl": _frames(T("ipip"), each=lambda i: {"ttl": 9} if i == 3 else {}),
    }
    # the outer header flagged flush (its reserved "evil" bit) and the inner
    # TCP checksum bad: tcp4_gro_receive does not verify it (one flush flag
    # for all levels), so the packet completes its flow's aggregate rather
    # than passing ahead of it; with a good checksum, the same
    for kind in ("ipip", "gre", "vxlan"):
        for bad in (True, False):
            fr = _frames(T(kind), each=(lambda i: {"inner": {"csum": 0x1234}} if i == 3 else {})
                         if bad else None)
            fr[3] = _outer_evil(fr[3])
            c[f"{kind}_outer_flush" + ("_bad_inner_csum" if bad else "")] = fr
    # a second tunnel level: VXLAN inside IPIP is not merged
    vx = Tunnel("vxlan")
    outer = Tunnel("ipip")
    f = Flow(4, ipid="inc")
    c["vxlan_in_ipip"] = [outer.wrap(vx.wrap(f.pkt(i * 1000, 1000))).data for i in range(6)]
    return c


def _iperf3_inner(n=200):
    """The inner Ethernet frames of the real iperf3 flow in
    tests/data/vxlan4-bulk-wire.pcap (behind 50 bytes of outer headers)."""
    r = open_reader(Path(__file__).parent / "data" / "vxlan4-bulk-wire.pcap")
    try:
        return [Packet(0, bytes(ev.data[50:]), len(ev.data) - 50)
                for ev in r if type(ev) is Packet][:n]
    finally:
        r.close()


def test_real_flow_in_gre_and_ipip_matches_the_kernel(oracle):
    """A real iperf3 flow (PSH segments, timestamp changes, pure ACKs of
    the control connection) re-encapsulated in GRE with a key and in IPIP,
    replayed: the kernel's GRE and IPIP GRO and pcapgro agree."""
    inner = _iperf3_inner()
    named = [("gre_key_iperf3", [Tunnel("gre", gre_key=7).wrap(p).data for p in inner]),
             ("ipip_iperf3", [Tunnel("ipip").wrap(p).data for p in inner])]
    res = ko.check_cases(oracle, [c for _, c in named], [n for n, _ in named],
                         csum="kernel", **CFG)
    bad = [r for r in res if r.status != "ok"]
    assert not bad, ko.report(res)


def test_tunnel_gro_matches_the_kernel(oracle):
    named = sorted(_cases().items())
    res = ko.check_cases(oracle, [c for _, c in named], [n for n, _ in named],
                         csum="kernel", **CFG)
    bad = [r for r in res if r.status != "ok"]
    assert not bad, ko.report(res)
