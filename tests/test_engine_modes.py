"""Every mode, both implementations: generated traffic (IPv4 and IPv6 TCP
flows with every rule break, UDP, VLAN, pure ACKs, time going backwards,
poll gaps; tests/test_gro_cfast.rule_traffic) merged the way `pcapgro
merge` runs it -- a classic pcap file through pipeline.run, to pcap and to
annotated pcapng, the compiled core and fast paths taking what they handle
-- must give byte-identical files and equal statistics to the Python
reference (general path only, no compiled core)."""

import io

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pcapgro.capture.pcap import PcapReader, PcapWriter
from pcapgro.capture.pcapng import PcapngWriter
from pcapgro.record import Interface, Packet, Section

from capture_helpers import merged_bytes
from test_gro_cfast import rule_traffic

MODES = {
    "default": {},
    "fraglist": dict(fraglist=True),
    "fraglist-local": dict(fraglist=True, local_ports=frozenset({443})),
    "udp-gro": dict(udp="gro"),
    "udp-gro-fraglist": dict(udp="gro", fraglist=True),
    "no-verify": dict(verify_csum=False),
    "csum-kernel": dict(csum="kernel"),
    "hash-none": dict(hash="none"),
    "budget": dict(napi_budget=64),
    "flush-timeout": dict(gro_flush_timeout=200_000),
    "big-tcp": dict(gro_max_size=200_000),
    "no-vlan-gro": dict(vlan_gro=False),
    # UDP tunnel sockets (issue 23): plain traffic is unchanged by them
    "tunnel-ports": dict(vxlan_ports=frozenset({4789}), geneve_ports=frozenset({6081})),
}


def _pcap(pkts):
    f = io.BytesIO()
    w = PcapWriter(f, nanosecond=True, byteorder="<")
    w.write_batch([Section("<"), Interface(1, 262144, 9)] + list(pkts))
    w.close()
    return f.getvalue()


def merged(data, fmt, reference, **cfg):
    """``data`` (pcap bytes) merged to ``fmt``: (output bytes, stats)."""
    extra = dict(compiled=False) if reference else {}
    out, eng = merged_bytes(PcapReader(io.BytesIO(data)),
                            PcapWriter if fmt == "pcap" else PcapngWriter,
                            annotate=fmt == "pcapng", **extra, **cfg)
    return out, eng.stats.to_dict()


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), n_flows=st.integers(1, 12))
def test_mode_matches_reference(mode, fmt, seed, n_flows):
    data = _pcap(rule_traffic(seed, n_flows, 600))
    got = merged(data, fmt, False, **MODES[mode])
    ref = merged(data, fmt, True, **MODES[mode])
    assert got[1] == ref[1], f"{mode}/{fmt}: statistics differ"
    assert got[0] == ref[0], f"{mode}/{fmt}: output differs from the reference"


def test_batches_closed_by_its_consumer_yields_nothing_more():
    # a consumer that stops (Ctrl-C in merge, calibrate ending a merge
    # early) closes the generator: it must not yield what it holds then
    # (close() raised "RuntimeError: generator ignored GeneratorExit")
    from pcapgro.gro.engine import _batches
    g = _batches(iter([Packet(i, b"x", 1) for i in range(10)]), 3)
    assert len(next(g)) == 3
    g.close()
