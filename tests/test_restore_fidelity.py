"""split --restore gives back what merge took, exactly, also for pcapng
input with per-packet metadata, and never applies a record that does not
fit its packet.

Every test runs the command line on a real capture (samples/, a Linux 6.18
iperf3 capture) turned into pcapng, so it needs nothing but the repository.
"""

import json
import struct

import pytest

from capture_helpers import REPO, run_cli
from pcapgro.capture import open_reader, open_writer
from pcapgro.record import Interface, Packet, PacketMeta, Section

SAMPLE = REPO / "samples" / "tcp4-bulk-wire.pcap"


def events(path):
    r = open_reader(path)
    try:
        return list(r)
    finally:
        r.close()


def packets(path):
    return [e for e in events(path) if type(e) is Packet]


def write(path, evs):
    w = open_writer(path, "pcapng")
    for e in evs:
        w.write(e)
    w.close()


def meta_view(p):
    """A packet's metadata as a comparable tuple (None and an empty
    PacketMeta write the same block)."""
    m = p.meta
    if m is None:
        return (6, [], None, [])
    return (m.block, list(m.comments), m.flags, [(c, bytes(v)) for c, v in m.options])


def view(p):
    return (p.ts, bytes(p.data), p.orig_len, p.iface, meta_view(p))


def sample_pcapng(path, metas=None):
    """The sample as pcapng (nanosecond interface), ``metas`` {packet
    number (0-based): PacketMeta} attached.  Returns the Packets written."""
    pk = packets(SAMPLE)
    for k, m in (metas or {}).items():
        pk[k].meta = m
    write(path, [Section(), Interface(1, snaplen=262144, tsresol=9)] + pk)
    return pk


# --- 1: per-packet metadata of every segment comes back --------------------

def test_restore_gives_back_every_segments_metadata(tmp_path):
    """Comments, epb_flags (inbound 0x1) and other EPB options of packets
    that end up inside an aggregate, first or later segment, come back on
    their own packet: comments with spaces, commas, percent signs, non-ASCII
    text and bytes that are not UTF-8 included."""
    dropcount = struct.pack("<Q", 7)
    metas = {
        10: PacketMeta(comments=["first of an aggregate"], flags=0x1),
        12: PacketMeta(comments=["note"]),
        13: PacketMeta(flags=0x1),
        14: PacketMeta(options=[(4, dropcount), (0x8001, b"")]),
        15: PacketMeta(comments=["a, b; c=d %41 :/* ü", "\udcff raw byte", ""],
                       flags=0x2, options=[(6, struct.pack("<I", 3))]),
        40: PacketMeta(comments=["later"], flags=0x1),
    }
    src, m, r = tmp_path / "c.pcapng", tmp_path / "m.pcapng", tmp_path / "r.pcapng"
    want = sample_pcapng(src, metas)
    run_cli("merge", "-q", src, m, check=0)
    recs = [c for p in packets(m) if p.meta for c in p.meta.comments
            if c.startswith("pcapgro-restore v1 ") and " m=" in c]
    assert recs, "merge wrote no per-segment metadata"
    run_cli("split", "-q", "--restore", m, r, check=0)
    got = packets(r)
    assert [view(p) for p in got] == [view(p) for p in want]


def test_records_without_metadata_stay_as_before(tmp_path):
    """Classic pcap input (no metadata): no m= field, the record is what it
    was, and old records (no m=) still restore."""
    m, r = tmp_path / "m.pcapng", tmp_path / "r.pcap"
    run_cli("merge", "-q", SAMPLE, m, check=0)
    assert not any(" m=" in c for p in packets(m) if p.meta for c in p.meta.comments)
    run_cli("split", "-q", "--restore", m, r, check=0)
    assert r.read_bytes()[24:] == SAMPLE.read_bytes()[24:]
