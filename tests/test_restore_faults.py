"""Faults of issue 18 on the restore side, each on the fuzzing campaign's
input (tests/data/faults/, a real capture with one field changed):

3. the compiled restore-record encoder and the Python one give the same
   record for a timestamp delta that does not fit 64 bits;
4. a damaged restore record is not applied (counted ``unfit``, its packet
   passes unchanged);
5. a non-packet block that arrives while GRO holds packets comes back in
   its place after ``split --restore``;
6. a snaplen-cut Simple Packet Block that passes ahead of an aggregate
   comes back as an SPB, and the IDB snaplen merge raised comes back down.
"""

import json
import os
import subprocess
import sys

import pytest

from capture_helpers import REPO, run_cli, read_events, write_events
from pcapgro.record import Block, Interface, Packet, PacketMeta
from pcapgro import restore

DATA = REPO / "tests" / "data" / "faults"
SAMPLE = REPO / "samples" / "tcp4-bulk-wire.pcap"

try:
    from pcapgro._native import restore_rows
except ImportError:          # pragma: no cover - depends on the build
    restore_rows = None




def stats(p):
    return json.loads(p.stdout)


# --- 3: timestamp delta beyond 64 bits ---------------------------------------

@pytest.mark.skipif(restore_rows is None, reason="compiled extension not built")
@pytest.mark.parametrize("dt", [1 << 64, -(1 << 64) + 1, (1 << 63), -(1 << 63) - 1,
                                (1 << 63) - 1, -(1 << 63)])
def test_compiled_rows_take_any_delta(dt):
    """A delta of +-2**64 ns (a timestamp 0xFFFFFFFF:FFFFFFFF beside one
    near 0) is written in decimal by both encoders."""
    ref = bytes(54)
    h = bytearray(ref)
    h[18] = 7
    args = (ref, [bytes(h)], [dt], [100], [1])
    assert restore_rows(*args) == restore._rows_py(*args) == f"1,{dt},100,18:07"


def test_merge_ts_overflow_same_with_and_without_c(tmp_path):
    """The fuzzing input (one EPB timestamp 0xFFFFFFFF:FFFFFFFF) merges to
    pcapng with exit 0 through the compiled encoder, byte-identical with
    the Python path, and split --restore gives the input back."""
    src = DATA / "merge-ts-overflow.pcapng"
    c, py, back = tmp_path / "c.pcapng", tmp_path / "py.pcapng", tmp_path / "b.pcapng"
    run_cli("merge", "-q", "-F", "pcapng", src, c, check=0)
    p = subprocess.run([sys.executable, "-m", "pcapgro.cli", "merge", "-q", "-F", "pcapng",
                        str(src), str(py)], capture_output=True, cwd=REPO,
                       env=dict(os.environ, PCAPGRO_NO_C="1"))
    assert p.returncode == 0, p.stderr.decode()
    assert c.read_bytes() == py.read_bytes()
    run_cli("split", "-q", "--restore", c, back, check=0)
    assert back.read_bytes() == src.read_bytes()


# --- 4: damaged records -------------------------------------------------------

def test_damaged_record_from_fuzzing_is_unfit(tmp_path):
    """``16:05dc`` -> ``16:00dc`` in the first record (an old record, no
    ``k=``): the IPv4 total length it would give back (220) is not the
    packet's size, so it is unfit and that aggregate passes unchanged;
    every packet written has a good IPv4 length."""
    src = DATA / "restore-damaged-record.pcapng"
    out = tmp_path / "r.pcapng"
    p = run_cli("split", "-q", "--restore", "--stats", "-", src, out, check=0)
    st = stats(p)["restore"]
    assert st["unfit"] == 1
    ins = [e for e in read_events(src) if type(e) is Packet]
    outs = [e for e in read_events(out) if type(e) is Packet]
    damaged = [e for e in ins if e.meta and any("16:00dc" in c for c in e.meta.comments)]
    assert len(damaged) == 1
    assert sum(bytes(e.data) == bytes(damaged[0].data) for e in outs) == 1
    for e in outs:
        assert int.from_bytes(e.data[16:18], "big") == len(e.data) - 14


def _merged_sample(tmp_path):
    src, m = tmp_path / "in.pcapng", tmp_path / "m.pcapng"
    pk = [e for e in read_events(SAMPLE) if type(e) is Packet]
    write_events(src, [Interface(1, snaplen=262144, tsresol=9)] + pk)
    run_cli("merge", "-q", src, m, check=0)
    return src, m


def _edit_first_record(m, edit):
    """Copy of merge output ``m`` with ``edit(record) -> record`` applied to
    the first aggregate's record; returns (events, the aggregate)."""
    evs = read_events(m)
    for e in evs:
        if type(e) is Packet and e.meta and any(" h=" in c for c in e.meta.comments):
            k = max(i for i, c in enumerate(e.meta.comments) if c.startswith(restore.TAG))
            e.meta.comments[k] = edit(e.meta.comments[k])
            return evs, e
    raise AssertionError("no aggregate")


@pytest.mark.parametrize("edit", [
    # one digit of a later segment's payload length moved between two rows:
    # the lengths still add up, the headers still apply
    lambda r: r.replace(",1448,", ",1447,", 1).replace(",1448,", ",1449,", 1),
    # one hex digit of a header diff (a sequence number byte)
    lambda r: r[:r.index(" s=")] + r[r.index(" s="):].replace("a", "b", 1),
    # a time offset
    lambda r: r.replace(" s=1,", " s=1,1", 1),
])
def test_changed_record_is_unfit(tmp_path, edit):
    """Any change to a record merge wrote (lengths, diffs, times) is caught
    by its checksum ``k=``: the record is counted unfit, its packet passes
    unchanged, every other aggregate is restored."""
    src, m = _merged_sample(tmp_path)
    evs, agg = _edit_first_record(m, edit)
    bad, out = tmp_path / "bad.pcapng", tmp_path / "r.pcapng"
    write_events(bad, evs)
    p = run_cli("split", "-q", "--restore", "--stats", "-", bad, out, check=0)
    st = stats(p)["restore"]
    assert st["unfit"] == 1
    outs = [e for e in read_events(out) if type(e) is Packet]
    assert sum(bytes(e.data) == bytes(agg.data) for e in outs) == 1
    ins = [e for e in read_events(src) if type(e) is Packet]
    assert len(outs) == len(ins) - (restore.decode(agg.meta.comments[-1])["s"].__len__())


def test_record_checksum_covers_the_headers(tmp_path):
    """An aggregate whose headers were changed after merge (its TTL) no
    longer matches its record's ``k=``: unfit, passed unchanged."""
    src, m = _merged_sample(tmp_path)
    evs, agg = _edit_first_record(m, lambda r: r)
    d = bytearray(agg.data)
    d[22] -= 1
    agg.data = bytes(d)
    bad, out = tmp_path / "bad.pcapng", tmp_path / "r.pcapng"
    write_events(bad, evs)
    p = run_cli("split", "-q", "--restore", "--stats", "-", bad, out, check=0)
    assert stats(p)["restore"]["unfit"] == 1


def test_record_checksum_field_format():
    """``k=`` is the last field, eight lowercase hex digits, CRC-32 of the
    text before it and the written headers; a reader ignores nothing after
    it (a field after ``k=`` is refused)."""
    h0 = bytes(range(54))
    p0 = Packet(1000, h0 + b"A" * 10, 64)
    rec = restore.encode_rows(h0, p0, 54, 0, None, [h0], [5], [10], [1])
    text, k = rec.rsplit(" k=", 1)
    assert len(k) == 8 and int(k, 16) == restore.record_crc(text, h0)
    assert restore.decode(rec)["k"] == (int(k, 16), text)
    with pytest.raises(ValueError):
        restore.decode(rec + " z=1")


# --- 6: snaplen-cut SPB ahead of an aggregate --------------------------------

def test_spb_cut_ahead_of_aggregate_round_trip(tmp_path):
    """test012 of the pcapng test generator (IDB snaplen 315, two SPBs, one
    cut to 315 of 342 bytes, two EPBs): with --udp gro the first SPB and
    the first EPB merge into a 586-byte aggregate (IDB snaplen raised to
    586, the IDB records 315) and the cut SPB passes ahead; split --restore
    gives the file back byte for byte: the cut SPB as an SPB, snaplen 315."""
    src = REPO / "tests/data/public/pcapng-test-generator/output_le/basic/test012.pcapng"
    m, back = tmp_path / "m.pcapng", tmp_path / "b.pcapng"
    run_cli("merge", "-q", "--udp", "gro", "-F", "pcapng", src, m, check=0)
    ifs = [e for e in read_events(m) if type(e) is Interface]
    assert [i.snaplen for i in ifs] == [586]
    run_cli("split", "-q", "--restore", m, back, check=0)
    assert back.read_bytes() == src.read_bytes()


def test_snaplen_note_only_when_an_aggregate_could_exceed_it():
    big = Interface(1, snaplen=262144)
    assert restore.note_snaplen(big, 65536) is big
    assert restore.note_snaplen(Interface(1, snaplen=0), 65536).options == []
    small = restore.note_snaplen(Interface(1, snaplen=96, options=[(2, b"eth0")]), 65536)
    assert small.options == [(2, b"eth0"), (1, b"pcapgro-restore v1 snaplen=96")]
    small.snaplen = 65550
    back = restore.restore_interface(small)
    assert (back.snaplen, back.options) == (96, [(2, b"eth0")])


# --- 5: non-packet blocks inside what GRO holds --------------------------------

def test_nrb_inside_an_aggregate_from_fuzzing(tmp_path):
    """A 16-byte NRB between two segments of what becomes an aggregate:
    merge writes it ahead of the aggregate (when it reads it), the record
    of the next packet written says where it was (``x=``), and split
    --restore gives the input back byte for byte."""
    src = DATA / "restore-nrb-reordered.pcapng"
    m, back = tmp_path / "m.pcapng", tmp_path / "b.pcapng"
    run_cli("merge", "-q", "-F", "pcapng", src, m, check=0)
    evs = read_events(m)
    k = next(j for j, e in enumerate(evs) if type(e) is Block)
    after = evs[k + 1]
    assert type(after) is Packet and " x=" in after.meta.comments[-1]
    run_cli("split", "-q", "--restore", m, back, check=0)
    assert back.read_bytes() == src.read_bytes()


NRB = Block(4, b"\0" * 4)                       # end-of-records only
ISB = Block(5, b"\0" * 12)                      # interface 0, time 0, no options
CUSTOM = Block(0x00000BAD, b"\x00\x00\x7f\x00" + b"pcapgro test")   # copyable


@pytest.mark.parametrize("at", [
    [12], [12, 12], [12, 13, 40], [0], [30, 31, 32, 33, 34], [1108],
])
def test_blocks_anywhere_come_back_in_place(tmp_path, at):
    """NRB, ISB and custom blocks put between any packets (inside an
    aggregate, several in a row, right after one another's aggregate,
    before the first and the last packet) come back in place: merge then
    split --restore is the identity."""
    pk = [e for e in read_events(SAMPLE) if type(e) is Packet]
    evs = [Interface(1, snaplen=262144, tsresol=9)]
    kinds = [NRB, ISB, CUSTOM]
    for j, p in enumerate(pk):
        for n in range(at.count(j)):
            evs.append(kinds[(j + n) % 3])
        evs.append(p)
    src, m, back = tmp_path / "in.pcapng", tmp_path / "m.pcapng", tmp_path / "b.pcapng"
    write_events(src, evs)
    run_cli("merge", "-q", src, m, check=0)
    run_cli("split", "-q", "--restore", m, back, check=0)
    assert back.read_bytes() == src.read_bytes()


def test_block_where_nothing_is_held_takes_no_claim(tmp_path):
    """A block read while GRO holds nothing stays where it is and adds
    nothing to any record (the merge output is what it was)."""
    pk = [e for e in read_events(SAMPLE) if type(e) is Packet][:3]    # SYN, SYN-ACK, ACK
    src, m = tmp_path / "in.pcapng", tmp_path / "m.pcapng"
    write_events(src, [Interface(1, snaplen=262144, tsresol=9), pk[0], NRB] + pk[1:])
    run_cli("merge", "-q", src, m, check=0)
    assert m.read_bytes() == src.read_bytes()
