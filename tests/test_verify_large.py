"""verify at scale: damage after the first million packets is found and
named, in a stream compared window by window.  50-85 s on the 2-core VM
(most of it tshark dissecting the million packets; the upper figure with
other jobs loading it): marked slow for ``-m "not slow"``, but nothing
deselects it, so it runs in the default suite."""

import json
import struct
import sys

import pytest

from capture_helpers import KERNEL, REPO, run_cli, tshark

sys.path.insert(0, str(REPO / "bench"))
import repeat_capture  # noqa: E402

pytestmark = [pytest.mark.tshark, tshark, pytest.mark.slow]


def _records(path):
    """[(offset of the record's data, captured length)] of a classic pcap,
    read header by header (the file is ~1.4 GB: never loaded whole)."""
    out = []
    with open(path, "rb") as f:
        magic = f.read(24)[:4]
        e = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        off = 24
        while True:
            f.seek(off)
            h = f.read(16)
            if len(h) < 16:
                return out
            cl = struct.unpack(e + "I", h[8:12])[0]
            out.append((off + 16, cl))
            off += 16 + cl


def test_damage_after_a_million_packets(tmp_path):
    """One verify of a 1,050,000-packet pair finds both: a flipped byte in
    the last big aggregate (data of IN packets past the millionth) and a
    pure ACK changed near the end (the other stream direction), each named
    by its OUT and IN frame, the stream compared window by window."""
    src, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    n = repeat_capture.repeat(KERNEL / "tcp4-bulk-wire.pcap", src, 1_050_000)
    run_cli("merge", "-q", src, out, check=0)
    recs = _records(out)
    k = max(i for i, (o, cl) in enumerate(recs) if cl > 60000)
    # a pure ACK (Ethernet + IPv4 + TCP with timestamps, no payload) after it
    j = next(i for i in range(k + 1, len(recs)) if recs[i][1] in (54, 66))
    with open(out, "r+b") as f:
        for pos in (recs[k][0] + recs[k][1] - 10, recs[j][0] + 14 + 20 + 8 + 3):
            f.seek(pos)             # a payload byte; the ACK number's low byte
            b = f.read(1)[0]
            f.seek(pos)
            f.write(bytes([b ^ 0x20]))
    p = run_cli("verify", "--json", src, out)
    assert p.returncode == 1, p.stderr.decode()
    d = json.loads(p.stdout)
    assert d["frames_in"] == n > 1_000_000 and d["payloads"] == "capture"
    first = d["problems"][0]
    assert first["kind"] == "payload" and first["out_frame"] == k + 1
    assert first["in_frame"] > 1_000_000
    acks = [q for q in d["problems"] if q["kind"] == "ack"]
    assert acks and acks[0]["out_frame"] == j + 1 and acks[0]["in_frame"] > 1_000_000, \
        d["problems"][:5]
    assert acks[0]["stream"].startswith("tcp 10.88.0.")
    assert d["tcp"]["windows"] > 100            # compared window by window
