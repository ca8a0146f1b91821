"""pcapgro.agreement: tracing output packets back to the wire and counting
the joins a merge and the kernel disagree on (issue 21)."""

from pathlib import Path

import pytest

from pcapgro.agreement import compare, measure, merge_packets, read_packets, trace
from pcapgro.record import Packet

from capture_helpers import KERNEL
from pktbuild import eth, ipv4, tcp_segment

NAPI = Path(__file__).parent / "captures" / "napi"


def _segs(n):
    """``n`` in-order 100-byte segments of one TCP flow, 1 µs apart."""
    out = []
    for k in range(n):
        d = eth(ipv4(tcp_segment("192.168.1.200", "192.168.1.100", 4000, 80,
                                 1000 + 100 * k, 1, payload=bytes([k]) * 100)), 0x0800)
        out.append(Packet(1000 * k, d, len(d)))
    return out


@pytest.mark.parametrize("name,opts", [("tcp4-bulk", {}), ("tcp4-4flows", {}),
                                       ("udp4-fwd", {"udp": "gro"}),
                                       ("udp4-fraglist", {"fraglist": True})])
def test_shared_kernel_captures_agree_exactly(name, opts):
    a = measure(KERNEL / f"{name}-wire.pcap", KERNEL / f"{name}-gro.pcap", **opts)
    assert a.exact and not a.extra and not a.missing and not a.untraced
    assert a.packets_ours == a.packets_kernel == a.same_packets


def test_udp_one_per_send_kernel_hands_each_up_alone():
    """The kernel's output of udp-10us is its input; the gap model joins
    them (the disagreement issue 21 is about, measured)."""
    a = measure(NAPI / "udp-10us-wire.pcap", NAPI / "udp-10us-gro.pcap", udp="gro")
    assert a.packets_kernel == a.packets_wire == 400
    assert not a.missing and not a.lost
    assert len(a.extra) == a.packets_wire - a.packets_ours


def test_joins_counted_from_packets():
    """Three segments of one flow: ours joins all three, the 'kernel' only
    the first two -> one extra join at wire index 1."""
    segs = _segs(3)
    ours, _ = merge_packets(segs, csum="kernel")
    assert len(ours) == 1
    kernel, _ = merge_packets(segs[:2], csum="kernel")
    kernel.append(segs[2])
    assert trace(segs, kernel) == [[0, 1], [2]]
    a = compare(segs, ours, kernel)
    assert a.extra == [1] and a.missing == [] and not a.exact


def test_lost_wire_packet_is_not_a_join():
    segs = _segs(3)
    a = compare(segs, segs, [segs[0], segs[2]])
    assert a.lost == 1 and a.extra == [] and a.missing == []
