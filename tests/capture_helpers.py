"""Shared test helpers: where the test captures are, running the CLI, tshark."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Every capture the tests read is carried in the repository (a fresh clone
# needs nothing beside it): tests/data/kernel (real Linux 6.18 veth
# captures; the four shipped in samples/ are symlinks to them),
# tests/data/public (public test captures, see SOURCES.md there).
DATA = REPO / "tests" / "data"
PUBLIC = DATA / "public"
KERNEL = DATA / "kernel"
SAMPLES = REPO / "samples"


def all_captures(suffixes=(".pcap", ".pcapng")):
    """Every capture file the project carries (tests/data, samples), each
    once (a symlink and its target count once), sorted: list of Path."""
    seen, out = set(), []
    for root in (DATA, SAMPLES):
        for p in sorted(root.rglob("*")):
            if p.suffix in suffixes and p.is_file() and p.resolve() not in seen:
                seen.add(p.resolve())
                out.append(p)
    return out


HAVE_TSHARK = shutil.which("tshark") is not None


def run_cli(*args, input=None, check=None, no_c=None):
    """Run ``python -m pcapgro.cli ARGS``; returns CompletedProcess (bytes).
    ``no_c``: True forces the Python reference (PCAPGRO_NO_C=1), False the
    compiled path (PCAPGRO_NO_C unset), None leaves the environment as it is."""
    env = None
    if no_c is not None:
        env = dict(os.environ)
        env.pop("PCAPGRO_NO_C", None)
        if no_c:
            env["PCAPGRO_NO_C"] = "1"
    p = subprocess.run([sys.executable, "-m", "pcapgro.cli", *map(str, args)],
                       input=input, capture_output=True, cwd=REPO, env=env)
    if check is not None:
        assert p.returncode == check, (p.returncode, p.stderr.decode())
    return p


_CACHE = {}


def tshark_packets(path):
    """Cached per path + mtime; see :func:`_tshark_packets`."""
    import copy
    st = os.stat(path)
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _CACHE:
        _CACHE[key] = _tshark_packets(path)
    return copy.deepcopy(_CACHE[key])


def _tshark_packets(path):
    """Per packet frame of ``path`` as tshark sees it (custom-block frames,
    which have no interface id, left out): dicts with ts (int ns or None),
    iface, len, caplen, data (bytes), comments (list of str)."""
    p = subprocess.run(["tshark", "-r", str(path), "-T", "json", "-x", "--no-duplicate-keys"],
                       capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"tshark refused {path}: {p.stderr.decode()[-300:]}")
    out = []
    for pkt in json.loads(p.stdout or b"[]"):
        layers = pkt["_source"]["layers"]
        frame = layers["frame"]
        if "frame.cb_pen" in frame or "frame.cb_copy" in frame:
            continue        # a custom block, not a packet
        t = frame.get("frame.time_epoch")
        ts = None
        if t is not None:
            sec, _, frac = t.partition(".")
            ts = int(sec) * 10**9 + int((frac + "000000000")[:9])
        com = layers.get("pkt_comment", {})
        if isinstance(com, list):
            comments = [c["frame.comment"] for c in com]
        else:
            comments = com.get("frame.comment", [])
            if isinstance(comments, str):
                comments = [comments]
        raw = layers["frame_raw"]
        if isinstance(raw, list) and raw and isinstance(raw[0], list):
            raw = raw[0]
        hexs = raw[0] if isinstance(raw, list) else raw
        out.append({"ts": ts, "iface": int(frame.get("frame.interface_id", 0)),
                    "len": int(frame["frame.len"]), "caplen": int(frame["frame.cap_len"]),
                    "data": bytes.fromhex(hexs), "comments": list(comments)})
    return out


tshark = pytest.mark.skipif(not HAVE_TSHARK, reason="tshark not on PATH")


def compiled_then_python(monkeypatch):
    """Yield False with the compiled paths on, then True with
    ``PCAPGRO_NO_C=1`` (the Python reference) set through ``monkeypatch``:
    ``for no_c in compiled_then_python(monkeypatch): ...`` runs one body
    under both."""
    for no_c in (False, True):
        if no_c:
            monkeypatch.setenv("PCAPGRO_NO_C", "1")
        else:
            monkeypatch.delenv("PCAPGRO_NO_C", raising=False)
        yield no_c


def read_events(path):
    """Every event (Section, Interface, Packet, Block) of the capture at
    ``path``, as a list; the reader is closed."""
    from pcapgro.capture import open_reader
    r = open_reader(path)
    try:
        return list(r)
    finally:
        r.close()


def packets(path):
    """The Packets of capture ``path``, in order (list)."""
    from pcapgro.capture import open_reader
    from pcapgro.record import Packet
    r = open_reader(path)
    try:
        return [ev for ev in r if type(ev) is Packet]
    finally:
        r.close()


def write_events(path, events, fmt="pcapng"):
    """Write ``events`` to a new capture at ``path`` in ``fmt``."""
    from pcapgro.capture import open_writer
    w = open_writer(path, fmt)
    for e in events:
        w.write(e)
    w.close()


def restore_in_process(src, out, restorer, each=None, nanosecond=False):
    """Run ``restorer`` (a :class:`pcapgro.restore.Restorer`) over capture
    ``src`` through :func:`pcapgro.pipeline.run`, as ``split --restore``
    does, writing classic pcap to ``out``; ``each(event)`` (optional) sees
    every event the Restorer yields."""
    from pcapgro import pipeline
    from pcapgro.capture import open_reader
    from pcapgro.capture.pcap import PcapWriter
    wr = PcapWriter(open(out, "wb"), nanosecond=nanosecond)
    rd = open_reader(src)

    def events(evs):
        for e in restorer.process(evs):
            if each is not None:
                each(e)
            yield e
    events.__self__ = restorer       # the pipeline sets the Restorer up
    try:
        pipeline.run(rd, wr, events)
    finally:
        rd.close()
    wr.close()


def merged_bytes(reader, writer_cls, **cfg):
    """(output bytes, GROEngine) of a GROEngine(GROConfig(**cfg)) run over
    ``reader`` (pipeline.run) into ``writer_cls`` on a real temporary file,
    so that the writer flushes with os.writev as merge does."""
    import tempfile
    from pcapgro import pipeline
    from pcapgro.gro import GROConfig, GROEngine
    eng = GROEngine(GROConfig(**cfg))
    with tempfile.TemporaryFile() as f:
        w = writer_cls(f)
        pipeline.run(reader, w, eng.process)
        w.close()
        f.seek(0)
        return f.read(), eng
