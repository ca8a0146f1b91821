"""``PCAPGRO_NO_C=1`` forces the Python reference path, and the reference
gives what the compiled core gives (issue 16): every real capture the
repository keeps, merged through the library call in each mode, comes out
byte for byte the same with and without the compiled core, with equal
statistics; and without the variable the compiled core really ran."""

import glob
import json
import os

import pytest

import pcapgro
from pcapgro.gro import cfast

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = sorted(glob.glob(os.path.join(HERE, "data", "kernel", "*.pcap"))
                  + glob.glob(os.path.join(HERE, "data", "vxlan4-*.pcap"))
                  + glob.glob(os.path.join(HERE, "data", "gre4-*.pcap"))
                  + glob.glob(os.path.join(HERE, "data", "ipip4-*.pcap"))
                  + glob.glob(os.path.join(HERE, "data", "public", "**", "*.pcap*"),
                              recursive=True))
MODES = {
    "default": {},
    "csum-kernel": dict(csum="kernel"),
    "fraglist": dict(fraglist=True),
    "udp-gro": dict(udp="gro"),
    "no-verify-csum": dict(no_verify_csum=True),
    "work-model": dict(poll_model="work"),
    "big-tcp": dict(gro_max_size=200_000),
    "budget": dict(napi_budget=64),
    "vxlan": dict(vxlan_ports=(4789,)),
}

# modes the compiled core does not model yet (cfast.usable refuses them)
NOT_COMPILED = set()


def _merge(src, out, opts):
    try:
        st = pcapgro.merge(src, out, **opts)
    except pcapgro.errors.PcapgroError as e:       # unusable input: same error both ways
        return f"error: {e}", None
    with open(out, "rb") as f:
        return f.read(), json.dumps(st, sort_keys=True, default=str)


@pytest.mark.skipif(not cfast.available(), reason="compiled core not built")
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_no_c_gives_the_same_output(mode, fmt, tmp_path, monkeypatch):
    runs = []
    real_run = cfast.CEngine.run

    def counted(self, *a, **kw):
        runs.append(1)
        return real_run(self, *a, **kw)

    monkeypatch.setattr(cfast.CEngine, "run", counted)
    for src in CAPTURES:
        name = os.path.basename(src)
        monkeypatch.delenv("PCAPGRO_NO_C", raising=False)
        compiled = _merge(src, str(tmp_path / f"c.{fmt}"), MODES[mode])
        monkeypatch.setenv("PCAPGRO_NO_C", "1")
        before = len(runs)
        reference = _merge(src, str(tmp_path / f"r.{fmt}"), MODES[mode])
        assert len(runs) == before, "PCAPGRO_NO_C=1 still ran the compiled core"
        assert compiled[0] == reference[0], f"{name}: output differs ({mode}, {fmt})"
        assert compiled[1] == reference[1], f"{name}: statistics differ ({mode}, {fmt})"
    if mode not in NOT_COMPILED:
        assert runs, "the compiled core never ran"
