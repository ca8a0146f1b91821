"""pcapgro merge against the kernel's own GRO on real captures.

Each ``*-wire.pcap`` in shared/captures/kernel was captured leaving a
Linux 6.18 sender, ``*-gro.pcap`` arriving at the receiver after its GRO.
pcapgro's merge of the wire capture must give exactly the kernel's
aggregates; with ``csum='kernel'`` (the pseudo-header seed the kernel
leaves) the packets are byte-identical and in the same order.
"""

import collections
import struct

import pytest

from pcapgro.gro import GROConfig, GROEngine
from pcapgro.record import Packet

from capture_helpers import KERNEL, packets

TCP_CAPTURES = ["tcp4-bulk", "tcp6-bulk", "tcp4-4flows"]



def merge(pkts, **kw):
    eng = GROEngine(GROConfig(**kw))
    return [ev for ev in eng.process(pkts) if type(ev) is Packet], eng.stats


def tcp_view(p):
    """(flow, seq, payload length, flags) of an Ethernet/IPv4|IPv6/TCP frame."""
    d = p.data
    if d[12:14] == b"\x08\x00":
        l4 = 14 + (d[14] & 15) * 4
        end = 14 + (struct.unpack_from("!H", d, 16)[0] or len(d) - 14)
        flow = d[26:34] + d[l4:l4 + 4]
        if d[23] != 6:
            return None
    else:
        l4 = 54
        end = 54 + struct.unpack_from("!H", d, 18)[0]
        flow = d[22:54] + d[l4:l4 + 4]
        if d[20] != 6:
            return None
    hl = (d[l4 + 12] >> 4) * 4
    return flow, struct.unpack_from("!I", d, l4 + 4)[0], end - l4 - hl, d[l4 + 13], d[l4 + hl:end]


def per_flow(pkts):
    flows = collections.defaultdict(list)
    for p in pkts:
        v = tcp_view(p)
        if v:
            flows[v[0]].append(v[1:4])
    return dict(flows)


@pytest.mark.parametrize("name", TCP_CAPTURES)
def test_same_aggregates_as_kernel(name):
    wire = packets(KERNEL / f"{name}-wire.pcap")
    kernel = packets(KERNEL / f"{name}-gro.pcap")
    ours, _ = merge(wire)
    assert len(ours) == len(kernel)
    assert per_flow(ours) == per_flow(kernel)


@pytest.mark.parametrize("name", TCP_CAPTURES)
def test_kernel_csum_mode_is_byte_identical(name):
    wire = packets(KERNEL / f"{name}-wire.pcap")
    kernel = packets(KERNEL / f"{name}-gro.pcap")
    ours, _ = merge(wire, csum="kernel")
    assert [p.data for p in ours] == [p.data for p in kernel]
    assert [p.orig_len for p in ours] == [p.orig_len for p in kernel]


@pytest.mark.parametrize("name", TCP_CAPTURES)
def test_conservation(name):
    wire = packets(KERNEL / f"{name}-wire.pcap")
    ours, st = merge(wire)
    assert st.segments_merged + st.singles + sum(st.passed.values()) == len(wire)

    def stream(pkts):
        s = collections.defaultdict(bytes)
        for p in pkts:
            v = tcp_view(p)
            if v:
                s[v[0]] += v[4]
        return dict(s)
    assert stream(ours) == stream(wire)
    ts = [p.ts for p in ours]
    assert ts == sorted(ts)


@pytest.mark.parametrize("name", TCP_CAPTURES)
def test_valid_checksums_on_aggregates(name):
    from pcapgro.checksum import ones_sum, pseudo_sum_v4, pseudo_sum_v6
    ours, _ = merge(packets(KERNEL / f"{name}-wire.pcap"))
    for p in ours:
        d = p.data
        if d[12:14] == b"\x08\x00":
            assert ones_sum(d[14:34]) == 0
            tot = struct.unpack_from("!H", d, 16)[0]
            ps = pseudo_sum_v4(d[26:30], d[30:34], 6, tot - 20)
            assert (ps + ones_sum(d[34:14 + tot])) % 0xFFFF == 0
        else:
            plen = struct.unpack_from("!H", d, 18)[0]
            ps = pseudo_sum_v6(d[22:38], d[38:54], 6, plen)
            assert (ps + ones_sum(d[54:54 + plen])) % 0xFFFF == 0


UDP_CAPTURES = [("udp4-fwd", {"udp": "gro"}), ("udp6-fwd", {"udp": "gro"}),
                ("udp4-fraglist", {"fraglist": True})]


@pytest.mark.parametrize("name,kw", UDP_CAPTURES)
def test_udp_and_fraglist_byte_identical_to_kernel(name, kw):
    """UDP GRO forwarding (standard) and fraglist GRO: with csum='kernel'
    (standard: the seed; fraglist: the first datagram's checksum), the
    output is the kernel's, byte for byte and in order."""
    wire = packets(KERNEL / f"{name}-wire.pcap")
    kernel = packets(KERNEL / f"{name}-gro.pcap")
    ours, st = merge(wire, csum="kernel", **kw)
    assert [p.data for p in ours] == [p.data for p in kernel]
    assert st.aggregates > 0


def test_udp_off_by_default_passes_everything():
    wire = packets(KERNEL / "udp4-fwd-wire.pcap")
    ours, st = merge(wire)
    assert [p.data for p in ours] == [p.data for p in wire]
    assert st.aggregates == 0


@pytest.mark.parametrize("name,kw", [(n, {}) for n in TCP_CAPTURES] + UDP_CAPTURES
                         + [("tcp4-4flows", {"fraglist": True}),
                            ("tcp4-bulk", {"fraglist": True, "local_ports": frozenset({5201})})])
def test_merge_then_restore_is_identity(name, kw):
    """Every aggregate records how to give back its packets: restoring the
    annotated output gives the input back, bytes and ns timestamps, in order."""
    from pcapgro.restore import Restorer
    wire = packets(KERNEL / f"{name}-wire.pcap")
    eng = GROEngine(GROConfig(**kw))
    out = list(eng.process(wire))
    back = [p for p in Restorer().process(out) if type(p) is Packet]
    assert [(p.ts, p.data, p.orig_len) for p in back] == \
        [(p.ts, p.data, p.orig_len) for p in wire]


def test_tcp_fraglist_keeps_headers_and_local_port_is_standard():
    """--fraglist: TCP flows without a local socket are chained (TCP header
    untouched with csum='kernel'); flows to a --local-port use standard GRO."""
    wire = packets(KERNEL / "tcp4-bulk-wire.pcap")
    fl, st = merge(wire, fraglist=True, csum="kernel")
    std, _ = merge(wire, csum="kernel")
    loc, _ = merge(wire, fraglist=True, local_ports=frozenset({5201}), csum="kernel")
    assert [p.data for p in loc] == [p.data for p in std]
    assert st.aggregates > 0
    # the first segment's TCP header (flags, checksum) stays in a fraglist aggregate
    heads = {p.data[:54 + 12] for p in wire}
    for p in fl:
        if len(p.data) > 1514:
            d = bytearray(p.data[:66])
            # only IPv4 total length and header checksum may differ
            d[16:18] = b"\0\0"
            d[24:26] = b"\0\0"
            assert any(bytes(d) == h[:16] + b"\0\0" + h[18:24] + b"\0\0" + h[26:66]
                       for h in heads)


def test_local_port_flows_standard_others_fraglist_in_one_capture():
    """--fraglist with --local-port 443: in one capture, the flow to the
    local port is merged the standard way (FIN/PSH OR-ed, a PSH segment
    merged), the forwarded flow is chained as fraglist (the PSH segment
    stands alone); statistics count each kind."""
    from pktbuild import Flow, ACK, PSH
    local = Flow(4, sport=40000, dport=443)
    fwd = Flow(4, sport=40001, dport=8000, src="192.168.1.201")
    pk = []
    for i in range(4):
        fl = PSH | ACK if i == 3 else ACK
        pk.append(local.pkt(i * 1000, 1000, flags=fl))
        pk.append(fwd.pkt(i * 1000, 1000, flags=fl))
    for i, p in enumerate(pk):
        p.ts = 1_000_000_000 + i * 10_000
    ours, st = merge(pk, fraglist=True, local_ports=frozenset({443}), csum="kernel")
    views = [(struct.unpack_from("!H", p.data, 36)[0], tcp_view(p)[2]) for p in ours]
    assert (443, 4000) in views                      # standard: PSH merged
    assert (8000, 3000) in views and (8000, 1000) in views  # fraglist: PSH alone
    assert st.by_kind == {"tcp": 1, "tcp_fraglist": 1}
    d = st.to_dict()["by_kind"]
    assert d["tcp"] == {"aggregates": 1, "segments": 4}
    assert d["tcp_fraglist"] == {"aggregates": 1, "segments": 3}


WIRE = sorted(p.name[:-len("-wire.pcap")] for p in KERNEL.glob("*-wire.pcap")) if KERNEL.is_dir() else []


@pytest.mark.parametrize("name", WIRE)
@pytest.mark.parametrize("mode", [{}, {"fraglist": True}, {"udp": "gro"}])
def test_restore_identity_every_wire_capture(name, mode):
    """merge (standard, --fraglist, --udp gro; pcapng annotations) then
    split --restore gives back every wire capture exactly."""
    from pcapgro.restore import Restorer
    wire = packets(KERNEL / f"{name}-wire.pcap")
    out = list(GROEngine(GROConfig(**mode)).process(wire))
    back = [p for p in Restorer().process(out) if type(p) is Packet]
    assert [(p.ts, p.data, p.orig_len) for p in back] == \
        [(p.ts, p.data, p.orig_len) for p in wire]
