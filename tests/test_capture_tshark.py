"""merge --no-gro of every public capture keeps, per packet, what tshark
reports for the input: timestamp (ns), interface, lengths, bytes, comments."""

import pytest

from capture_helpers import PUBLIC, run_cli, tshark, tshark_packets
from pcapgro.capture import open_reader
from pcapgro.record import Packet, Interface, BLOCK_SPB

FILES = sorted(p for p in PUBLIC.rglob("*") if p.suffix in (".pcap", ".pcapng"))
IDS = [str(p.relative_to(PUBLIC)) for p in FILES]

pytestmark = [pytest.mark.tshark, tshark]


def test_public_captures_present():
    assert FILES, f"no captures under {PUBLIC}"
    assert any("output_be" in i for i in IDS) and any("output_le" in i for i in IDS)


def _ours(path):
    out = []
    for ev in open_reader(path):
        if type(ev) is Packet:
            spb = ev.meta is not None and ev.meta.block == BLOCK_SPB
            out.append({"ts": None if spb else ev.ts, "iface": ev.iface, "len": ev.orig_len,
                        "caplen": len(ev.data), "data": ev.data,
                        "comments": list(ev.meta.comments) if ev.meta else []})
    return out


def _link_types_and_res(path):
    lts, fine, coarse = set(), False, False
    for ev in open_reader(path):
        if type(ev) is Interface:
            lts.add(ev.linktype)
            if ev.tsresol in (6,) or ev.tsresol < 6 or ev.tsresol == 0x80:
                coarse = True
            else:
                fine = True
    return lts, fine and coarse


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_reader_matches_tshark(path):
    assert _ours(path) == tshark_packets(path)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_passthrough_pcapng_matches_tshark(path, tmp_path):
    out = tmp_path / "out.pcapng"
    run_cli("merge", "-q", "--no-gro", path, out, check=0)
    assert tshark_packets(out) == tshark_packets(path)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_passthrough_pcap_matches_tshark(path, tmp_path):
    out = tmp_path / "out.pcap"
    lts, mixed_res = _link_types_and_res(path)
    p = run_cli("merge", "-q", "--no-gro", path, out)
    if len(lts) > 1:
        assert p.returncode == 2
        assert b"use -F pcapng" in p.stderr
        assert p.stderr.count(b"\n") == 1
        assert not out.exists()
        return
    if mixed_res:
        assert p.returncode == 2
        return
    assert p.returncode == 0, p.stderr
    want = tshark_packets(path)
    ours = [ev.ts for ev in open_reader(path) if type(ev) is Packet]
    for w, t in zip(want, ours):       # what classic pcap cannot hold
        w["iface"] = 0
        w["comments"] = []
        if w["ts"] is None:
            # an SPB: the time of the packet before it (tests/test_spb_times.py)
            w["ts"] = t
    assert tshark_packets(out) == want
    if any(ev.meta is not None and (ev.meta.comments or ev.meta.flags is not None)
           for ev in open_reader(path) if type(ev) is Packet):
        assert p.stderr.count(b"\n") <= 1 and b"dropped" in p.stderr
