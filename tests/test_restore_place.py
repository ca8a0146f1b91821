"""The compiled placement of ``split --restore`` (``_restore.place``: a
reader chunk's restored packets given out in input order as one
HostRecords block, runs held ahead of the next index) against the Python
reference (PCAPGRO_NO_C=1): the same bytes and statistics when held runs
cross reader chunk boundaries, and when packets the Python path places
(a comment of their own), non-packet blocks and sections come between
them, so that what is held goes from the compiled placement to the
Restorer's pending dict and back."""

import sys

import pytest

from capture_helpers import (REPO, run_cli, compiled_then_python, read_events,
                             restore_in_process, write_events)
from pcapgro import restore
from pcapgro.capture import _stream
from pcapgro.record import Block, HostRecords, Packet, PacketMeta, Section

try:
    from pcapgro import _restore
except ImportError:          # pragma: no cover - depends on the build
    _restore = None

needs_c = pytest.mark.skipif(_restore is None, reason="pcapgro._restore not built")

BULK6 = REPO / "tests" / "data" / "kernel" / "tcp6-bulk-wire.pcap"
NRB = Block(4, b"\0" * 4)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """bench.py's synthetic traffic, 3,000 packets (~4 MB): bulk flows
    interleaved with other flows' ACKs, so that merge's aggregates give
    back several runs of input indexes, the later ones placed ahead."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import bench
    finally:
        sys.path.pop(0)
    p = tmp_path_factory.mktemp("place") / "mixed.pcap"
    bench.generate(str(p), 3000, "ms")
    return p


def _merged(tmp_path, src):
    m = tmp_path / (src.stem + "-m.pcapng")
    run_cli("merge", "-q", "-F", "pcapng", src, m, check=0)
    return m




def _restore_both(tmp_path, monkeypatch, src, chunk=None):
    """split --restore of ``src`` in-process, compiled and Python:
    [(bytes, stats)] for each, and what the compiled placement did
    ({"calls", "max_held", "blocks", "absorbed", "taken_back"}: place()
    calls, the most runs it held on return, the HostRecords given out, the
    runs it held that went to the Python path's pending dict, and those
    that came back from it)."""
    seen = {"calls": 0, "max_held": 0, "blocks": 0, "absorbed": 0, "taken_back": 0}
    place = _restore.place
    absorb = restore.Restorer._absorb

    def absorbing(self):
        seen["absorbed"] += len(self._held)
        absorb(self)
    monkeypatch.setattr(restore.Restorer, "_absorb", absorbing)
    to_held = restore.Restorer._to_held

    def taking(self):
        k = len(self._pending)
        r = to_held(self)
        if r and k:
            seen["taken_back"] += len(self._held)
        return r
    monkeypatch.setattr(restore.Restorer, "_to_held", taking)

    def counting(items, j, nxt, held, spans):
        r = place(items, j, nxt, held, spans)
        seen["calls"] += 1
        seen["max_held"] = max(seen["max_held"], len(held))
        return r
    monkeypatch.setattr(_restore, "place", counting)
    if chunk is not None:
        monkeypatch.setattr(_stream, "CHUNK", chunk)
    outs = []
    for no_c in compiled_then_python(monkeypatch):
        out = tmp_path / f"o{no_c}.pcap"
        r = restore.Restorer()

        def each(e, no_c=no_c):
            if type(e) is HostRecords and not no_c:
                seen["blocks"] += 1
        restore_in_process(src, out, r, each)
        outs.append((out.read_bytes(), dict(r.stats)))
    return outs, seen


@needs_c
@pytest.mark.parametrize("chunk", [4096, 20000, 1 << 16])
def test_held_runs_across_chunks_same_as_python(tmp_path, monkeypatch, mixed, chunk):
    """Interleaved flows (an aggregate's later runs wait for the other
    flows' packets), read in small chunks: runs held by the compiled
    placement cross chunk boundaries."""
    m = _merged(tmp_path, mixed)
    (c, p), seen = _restore_both(tmp_path, monkeypatch, m, chunk)
    assert c == p
    assert c[1]["restored"] > 0 and seen["calls"] > 0 and seen["max_held"] > 0
    # one HostRecords per place() call at most (not one per run)
    assert seen["blocks"] <= seen["calls"]


def _with_own_comments(evs, every):
    """``evs`` with a comment of the packet's own on every ``every``-th
    recorded packet (the compiled walk declines those: the Python path
    places them) and an NRB before every ``every + 1``-th packet."""
    out, k = [], 0
    for e in evs:
        if type(e) is Packet:
            k += 1
            if k % (every + 1) == 0:
                out.append(NRB)
            if e.meta is not None and e.meta.comments and k % every == 0:
                m = e.meta
                e = Packet(e.ts, e.data, e.orig_len, e.iface, e.linktype,
                           PacketMeta(m.block, ["own note"] + m.comments, m.flags, m.options))
        out.append(e)
    return out


@needs_c
@pytest.mark.parametrize("every", [3, 7, 17, 40])
def test_handover_to_python_and_back_same_as_python(tmp_path, monkeypatch, mixed, every):
    """Packets the Python path places, and blocks, between the compiled
    placement's packets while it holds runs (they go to the pending dict
    and back), in small chunks, in two sections (the second's indexes
    repeat the first's: unfit, Python's)."""
    evs = _with_own_comments(read_events(_merged(tmp_path, mixed)), every)
    evs6 = read_events(_merged(tmp_path, BULK6))
    src = tmp_path / "mixed.pcapng"
    write_events(src, evs + [Section("<", [])] + evs6[1:])
    (c, p), seen = _restore_both(tmp_path, monkeypatch, src, 1 << 15)
    assert c == p
    assert c[1]["restored"] > 0 and c[1]["unfit"] > 0
    assert seen["calls"] > 0
    if every > 3:
        # runs held by the compiled placement went to the pending dict (with
        # every 3rd packet Python's, its own pending packets keep the
        # placement in Python)
        assert seen["absorbed"] > 0
    if every == 40:
        assert seen["taken_back"] > 0       # and back to the compiled placement


@needs_c
def test_cli_bench_shape_same_as_python(tmp_path, mixed):
    """The CLI (default 4 MiB chunks, direct reads) on the merged synthetic
    capture: the same file and statistics with and without the extension."""
    import json
    import os
    import subprocess
    import sys
    m = _merged(tmp_path, mixed)
    res = []
    for no_c in (False, True):
        env = dict(os.environ)
        env.pop("PCAPGRO_NO_C", None)
        if no_c:
            env["PCAPGRO_NO_C"] = "1"
        out = tmp_path / f"cli{no_c}.pcap"
        p = subprocess.run([sys.executable, "-m", "pcapgro.cli", "split", "--restore", "-q",
                            "--stats", "-", str(m), str(out)], capture_output=True, cwd=REPO,
                           env=env)
        assert p.returncode == 0, p.stderr
        res.append((out.read_bytes(), json.loads(p.stdout), p.stderr))
    assert res[0] == res[1]
