"""verify at scale: damage after the first million packets is found and
named, in a stream compared window by window (slow: ~1-2 min)."""

import json
import struct
import sys

import pytest

from capture_helpers import KERNEL, REPO, run_cli, tshark

sys.path.insert(0, str(REPO / "bench"))
import repeat_capture  # noqa: E402

pytestmark = [pytest.mark.tshark, tshark, pytest.mark.slow]


def test_flipped_byte_after_a_million_packets(tmp_path):
    src, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    repeat_capture.repeat(KERNEL / "tcp4-bulk-wire.pcap", src, 1_050_000)
    run_cli("merge", "-q", src, out, check=0)
    data = bytearray(out.read_bytes())
    e = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    off, n, offs = 24, 0, []
    while off + 16 <= len(data):
        cl = struct.unpack_from(e + "I", data, off + 8)[0]
        offs.append((off + 16, cl))
        off += 16 + cl
    # the last big aggregate (carries data of IN packets past the millionth)
    k = max(i for i, (o, cl) in enumerate(offs) if cl > 60000)
    o, cl = offs[k]
    data[o + cl - 10] ^= 0x20
    out.write_bytes(bytes(data))
    p = run_cli("verify", "--json", src, out)
    assert p.returncode == 1, p.stderr.decode()
    d = json.loads(p.stdout)
    assert d["frames_in"] > 1_000_000
    first = d["problems"][0]
    assert first["kind"] == "payload" and first["out_frame"] == k + 1
    assert first["in_frame"] > 1_000_000
