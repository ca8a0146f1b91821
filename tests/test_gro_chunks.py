"""GRO straight from pcap chunks (``pipeline.run`` with a GROEngine: the
reader's RecordChunks, Packets made only where the general path needs them)
must write exactly what the engine writes from Packet objects
(``GROEngine.process``): same bytes out, same statistics."""

import io

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pcapgro import pipeline
from pcapgro.capture import _stream, open_reader
from pcapgro.capture.pcap import PcapReader, PcapWriter
from pcapgro.capture.pcapng import PcapngWriter
from pcapgro.gro import GROConfig, GROEngine
from pcapgro.record import Interface, Packet, Section

from capture_helpers import KERNEL
from test_gro_fastpath import MUTATIONS, base, mutate



def _pcap(pkts, nano=False):
    f = io.BytesIO()
    w = PcapWriter(f, nanosecond=nano)
    w.write_batch([Section(), Interface(1, 262144, 9 if nano else 6)] + list(pkts))
    w.close()
    return f.getvalue()


def _writer(fmt, f):
    return PcapWriter(f) if fmt == "pcap" else PcapngWriter(f)


def _both(data, fmt, **kw):
    """(output, stats) via the chunk path and via Packets."""
    cfg = dict(annotate=fmt == "pcapng", **kw)
    eng = GROEngine(GROConfig(**cfg))
    f = io.BytesIO()
    w = _writer(fmt, f)
    pipeline.run(PcapReader(io.BytesIO(data)), w, eng.process)
    w.close()
    ref = GROEngine(GROConfig(**cfg))
    g = io.BytesIO()
    w = _writer(fmt, g)
    for ev in ref.process(iter(PcapReader(io.BytesIO(data)))):
        w.write(ev)
    w.close()
    return (f.getvalue(), eng.stats.to_dict()), (g.getvalue(), ref.stats.to_dict())


@pytest.mark.parametrize("chunk", [1 << 20, 3000])
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("name", sorted(p.name for p in KERNEL.glob("*.pcap")) if KERNEL.is_dir() else [])
def test_chunks_match_packets_on_real_captures(name, fmt, chunk, monkeypatch):
    monkeypatch.setattr(_stream, "CHUNK", chunk)
    r = open_reader(KERNEL / name)
    pkts = [ev for ev in r if type(ev) is Packet]
    r.close()
    if len({p.linktype for p in pkts}) > 1:
        pytest.skip("several link types")
    data = _pcap(pkts, nano=True)
    a, b = _both(data, fmt)
    assert a == b


plans = st.lists(st.tuples(st.sampled_from(MUTATIONS), st.integers(0, 255)),
                 min_size=20, max_size=360)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, start=st.integers(0, 300), verify=st.booleans(),
       csum=st.sampled_from(["valid", "kernel"]), fmt=st.sampled_from(["pcap", "pcapng"]),
       chunk=st.sampled_from([1 << 20, 2000, 9000]), nano=st.booleans())
def test_chunks_match_packets_on_mutated_captures(plan, start, verify, csum, fmt, chunk, nano):
    pkts = mutate(base()[start:], plan)
    if not nano:
        pkts = [Packet(p.ts // 1000 * 1000, p.data, p.orig_len) for p in pkts]
    old = _stream.CHUNK
    _stream.CHUNK = chunk
    try:
        a, b = _both(_pcap(pkts, nano), fmt, verify_csum=verify, csum=csum)
    finally:
        _stream.CHUNK = old
    assert a == b
