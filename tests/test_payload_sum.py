"""An aggregate's payload sum when the compiled core handed it over
(pcapgro/gro/payload.py payload_sum): the compiled ``_native.sum16`` where
the extension is there, numpy's batch sum with ``PCAPGRO_NO_C``, the
same value as the readable ``checksum.ones_sum``.  A merge whose compiled
run hands UDP aggregates over at the end of input (``--udp gro``,
``--fraglist``) no longer imports numpy for them (~0.1 s of CPU and 12
MiB of memory per run: bench/bench_modes.py's fraglist and UDP GRO modes).
"""

import os
import random
import subprocess
import sys

import pytest

from pcapgro.checksum import ones_sum
from pcapgro.gro import cfast
from pcapgro.gro.payload import payload_sum

from capture_helpers import REPO


@pytest.mark.parametrize("no_c", [False, True])
def test_payload_sum_is_the_ones_complement_sum(no_c, monkeypatch):
    if no_c:
        monkeypatch.setenv("PCAPGRO_NO_C", "1")
    rnd = random.Random(5)
    for n in (1, 3, 4095, 4096, 4097, 9001, 65535, 65536):
        parts = []
        left = n
        while left:
            k = min(left, rnd.randint(1, 3000))
            parts.append(bytes(rnd.randrange(256) for _ in range(k)))
            left -= k
        assert payload_sum(parts) == ones_sum(b"".join(parts))
    assert payload_sum([b"\xff" * 8192]) == ones_sum(b"\xff" * 8192)


SCRIPT = """
import io, sys
sys.path.insert(0, {tests!r})
from pktbuild import Flow
from pcapgro.capture.pcap import PcapReader, PcapWriter
from pcapgro import pipeline
from pcapgro.gro import GROConfig, GROEngine
from pcapgro.record import Interface, Packet, Section
f = Flow(4, sport=4000, dport=4789, ipid="inc")
t = 1_700_000_000 * 10**9
pkts = [f.udp(1200, ts=t + k * 1000) for k in range(100)]
src = io.BytesIO()
w = PcapWriter(src)
w.write_batch([Section("<"), Interface(1, 262144, 9)] + pkts)
w.close()
eng = GROEngine(GROConfig(annotate=False, {cfg}))
out = io.BytesIO()
w = PcapWriter(out)
pipeline.run(PcapReader(io.BytesIO(src.getvalue())), w, eng.process)
assert eng.stats.aggregates == 2 and eng.py_records == 0, eng.stats.to_dict()
print("numpy" in sys.modules)
"""


@pytest.mark.skipif(not cfast.available(), reason="compiled extension not built")
@pytest.mark.parametrize("cfg", ['udp="gro"', "fraglist=True"])
def test_udp_aggregates_handed_over_at_the_end_need_no_numpy(cfg):
    # 100 datagrams of one flow: the compiled core merges the first 64
    # (UDP_GRO_CNT_MAX) and holds the rest at the end of input, which the
    # reference path completes and sums
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c",
                        SCRIPT.format(tests=str(REPO / "tests"), cfg=cfg)],
                       capture_output=True, text=True, env=env, check=True)
    assert r.stdout.strip() == "False"
