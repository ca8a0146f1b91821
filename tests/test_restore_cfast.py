"""The compiled restore (pcapgro/_restore.c) against the Python reference
(pcapgro/restore.py): ``split --restore`` to classic pcap gives the same
bytes, statistics and messages with and without it (PCAPGRO_NO_C=1), on
real captures merged to pcapng, and on each packet the compiled record
reader either declines (None) or gives back exactly what
:func:`pcapgro.restore.restore` does, also for damaged records."""

import json
import os
import random
import subprocess
import sys

import pytest

from capture_helpers import REPO, run_cli, compiled_then_python, read_events
from pcapgro import pipeline, restore
from pcapgro.capture import open_reader, open_writer
from pcapgro.capture.pcap import PcapWriter
from pcapgro.record import Block, Interface, Packet

try:
    from pcapgro import _restore
except ImportError:          # pragma: no cover - depends on the build
    _restore = None

needs_c = pytest.mark.skipif(_restore is None, reason="pcapgro._restore not built")

INPUTS = [REPO / "samples" / "tcp4-bulk-wire.pcap",
          REPO / "samples" / "tcp4-tso-sender.pcap",
          REPO / "tests" / "data" / "kernel" / "tcp4-4flows-wire.pcap",
          REPO / "tests" / "data" / "kernel" / "tcp6-bulk-wire.pcap",
          REPO / "tests" / "data" / "kernel" / "udp4-fwd-wire.pcap",
          REPO / "tests" / "data" / "vxlan4-bulk-wire.pcap"]


def _merged(tmp_path, src):
    m = tmp_path / (src.stem + "-m.pcapng")
    run_cli("merge", "-q", "-F", "pcapng", src, m, check=0)
    return m


def _restore_cli(src, out, no_c):
    rc, stdout, stderr, _ = _restore_any(src, out, no_c)
    assert rc == 0, stderr
    return json.loads(stdout), stderr



@needs_c
@pytest.mark.parametrize("src", INPUTS, ids=lambda p: p.stem)
def test_cli_same_output_with_and_without_c(tmp_path, src):
    m = _merged(tmp_path, src)
    a, ea = _restore_cli(m, tmp_path / "c.pcap", no_c=False)
    b, eb = _restore_cli(m, tmp_path / "py.pcap", no_c=True)
    assert (tmp_path / "c.pcap").read_bytes() == (tmp_path / "py.pcap").read_bytes()
    assert a == b and ea == eb


def _records(buf):
    """(ts ns, data, orig_len) of each host-order ns pcap record in buf."""
    out, off = [], 0
    while off < len(buf):
        sec, frac, cap, orig = (int.from_bytes(buf[off + 4 * k:off + 4 * k + 4], sys.byteorder)
                                for k in range(4))
        out.append((sec * 10 ** 9 + frac, bytes(buf[off + 16:off + 16 + cap]), orig))
        off += 16 + cap
    return out


def _compiled(p, rec):
    """What the compiled reader gives back for Packet p and record text rec:
    None, or [(index, ts, data, orig_len)]."""
    r = _restore.restore(p.data, p.orig_len, p.linktype, rec)
    if r is None:
        return None
    runs, n, tmin, tmax = r
    out = []
    for k, count, buf, a, b, mx in runs:
        recs = _records(memoryview(buf)[a:b])
        assert len(recs) == count and mx == max(len(d) for _, d, _ in recs)
        out += [(k + j, ts, d, o) for j, (ts, d, o) in enumerate(recs)]
    assert len(out) == n and tmin == min(x[1] for x in out) and tmax == max(x[1] for x in out)
    return out


def _python(p):
    """restore(p) as [(index, ts, data, orig_len)], or None when it raises."""
    try:
        segs = restore.restore(p)
    except restore.RecordMismatch:
        return None
    if segs is None:
        return None
    return [(k, q.ts, bytes(q.data), q.orig_len) for k, q in segs]


def _check(p, rec):
    """The compiled reader declines or agrees with Python; True when it did not decline."""
    c = _compiled(p, rec)
    if c is not None:
        assert c == _python(p)
    return c is not None


@needs_c
@pytest.mark.parametrize("src", INPUTS[:4], ids=lambda p: p.stem)
def test_each_record_same_as_python(tmp_path, src):
    pk = [e for e in read_events(_merged(tmp_path, src))
          if type(e) is Packet and e.meta is not None and e.meta.comments]
    done = sum(_check(p, p.meta.comments[-1]) for p in pk)
    assert done == len(pk)      # merge's own TCP records: every one compiled


def _mutations(rng, rec):
    s = list(rec)
    k = rng.randrange(len(restore.TAG), len(s))     # the tag itself stays
    how = rng.randrange(6)
    if how == 0:
        s[k] = rng.choice("0123456789abcdefABx-,;:/* =")
    elif how == 1:
        del s[k]
    elif how == 2:
        s.insert(k, rng.choice("0123456789af,;:/ -"))
    elif how == 3:
        s[k:k] = list(rng.choice([" x=1", " m=1:f1", " f=0", " z=1", ";", "/0:00"]))
    elif how == 4:
        j = min(len(s), k + rng.randrange(1, 12))
        del s[k:j]
    else:
        s = s[:k]
    return "".join(s)


@needs_c
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_damaged_records_declined_or_same(tmp_path, seed):
    """Records and headers changed at random: whenever the compiled reader
    gives packets back, the Python reference gives back the same ones."""
    rng = random.Random(seed)
    src = INPUTS[(seed - 1) % 4]
    pk = [e for e in read_events(_merged(tmp_path, src))
          if type(e) is Packet and e.meta is not None and e.meta.comments]
    taken = 0
    for _ in range(400):
        p = rng.choice(pk)
        rec = p.meta.comments[-1]
        data = p.data
        if rng.random() < 0.3:
            d = bytearray(data)
            d[rng.randrange(min(len(d), 80))] ^= 1 << rng.randrange(8)
            data = bytes(d)
        else:
            rec = _mutations(rng, rec)
        q = Packet(p.ts, data, len(data) if rng.random() < 0.9 else len(data) + 1, p.iface,
                   p.linktype, type(p.meta)(p.meta.block, p.meta.comments[:-1] + [rec],
                                            p.meta.flags, []))
        taken += _check(q, rec)
    assert 0 < taken < 400, taken


NRB = Block(4, b"\0" * 4)


@needs_c
@pytest.mark.parametrize("nano,bo", [(True, "<"), (False, "<"), (True, ">"), (False, ">")])
def test_writer_formats_and_blocks_same_as_python(tmp_path, monkeypatch, nano, bo):
    """In-process, with non-packet blocks inside aggregates (they go before
    their input index, splitting a run of records), into every pcap byte
    order and resolution: the same file as the Python path."""
    pk = [e for e in read_events(INPUTS[0]) if type(e) is Packet]
    evs = [Interface(1, snaplen=262144, tsresol=9)]
    for j, p in enumerate(pk):
        if j in (12, 13, 40, 300):
            evs.append(NRB)
        evs.append(p)
    src, m = tmp_path / "in.pcapng", tmp_path / "m.pcapng"
    w = open_writer(src, "pcapng")
    for e in evs:
        w.write(e)
    w.close()
    run_cli("merge", "-q", src, m, check=0)
    outs = []
    for no_c in compiled_then_python(monkeypatch):
        out = tmp_path / f"o{no_c}.pcap"
        r = restore.Restorer()
        with open(out, "wb") as f:
            wr = PcapWriter(f, nanosecond=nano, byteorder=bo)
            rd = open_reader(m)
            try:
                pipeline.run(rd, wr, r.process)
            finally:
                rd.close()
            wr.close()
        assert r.records_out
        outs.append((out.read_bytes(), dict(r.stats)))
    assert outs[0] == outs[1]
    assert outs[0][1]["restored"] > 0


@needs_c
@pytest.mark.parametrize("hlen", [66, 511, 512, 513])
def test_whole_header_rows_of_any_length(tmp_path, hlen):
    """Rows that give back whole headers (``*hex``) up to and beyond the
    compiled reader's 512-byte limit, with a valid record checksum: it
    declines or agrees with Python (and stays inside its buffer)."""
    pk = [e for e in read_events(_merged(tmp_path, INPUTS[0]))
          if type(e) is Packet and e.meta is not None and " h=" in e.meta.comments[-1]]
    p = pk[0]
    rec = p.meta.comments[-1]
    head, s_rows = rec[:rec.index(" k=")].split(" s=")
    rows = []
    for row in s_rows.split(";"):
        di, dt, n, _ = row.split(",")
        rows.append(f"{di},{dt},{n},*{bytes(range(256))[:1].hex() * hlen}")
    text = f"{head} s={';'.join(rows)}"
    hl = restore.payload_offset(p.linktype, p.data)
    rec2 = f"{text} k={restore.record_crc(text, p.data[:hl]):08x}"
    q = Packet(p.ts, p.data, p.orig_len, p.iface, p.linktype,
               type(p.meta)(p.meta.block, p.meta.comments[:-1] + [rec2], p.meta.flags, []))
    _check(q, rec2)
    # and the first packet's own header given whole, as long
    text = head.replace(head[head.index(" h="):], head[head.index(" h="):].split(",")[0]
                        + ",*" + "45" * hlen) + " s=" + s_rows
    rec3 = f"{text} k={restore.record_crc(text, p.data[:hl]):08x}"
    q = Packet(p.ts, p.data, p.orig_len, p.iface, p.linktype,
               type(p.meta)(p.meta.block, p.meta.comments[:-1] + [rec3], p.meta.flags, []))
    _check(q, rec3)


def _restore_any(src, out, no_c):
    env = dict(os.environ)
    env.pop("PCAPGRO_NO_C", None)
    if no_c:
        env["PCAPGRO_NO_C"] = "1"
    p = subprocess.run([sys.executable, "-m", "pcapgro.cli", "split", "--restore", "-q",
                        "--stats", "-", str(src), str(out)], capture_output=True, cwd=REPO,
                       env=env)
    data = out.read_bytes() if out.exists() else None
    return p.returncode, p.stdout, p.stderr, data


@needs_c
def test_sections_with_taken_indexes_same_as_python(tmp_path):
    """Merged captures one after another (sections whose input indexes
    repeat: later records name positions already given out, so the
    compiled walk's packets go back to the Python path): same as Python."""
    a, b = _merged(tmp_path, INPUTS[0]), _merged(tmp_path, INPUTS[3])
    m = tmp_path / "cat.pcapng"
    m.write_bytes(a.read_bytes() + b.read_bytes() + a.read_bytes())
    c = _restore_any(m, tmp_path / "c.pcap", False)
    p = _restore_any(m, tmp_path / "p.pcap", True)
    assert c == p and c[0] == 0 and json.loads(c[1])["restore"]["unfit"] > 0


@needs_c
@pytest.mark.parametrize("seed", [1, 2])
def test_damaged_files_same_as_python(tmp_path, seed):
    """A merged pcapng cut short or with a byte of a block header, length
    or option changed: exit status, messages, statistics and output bytes
    are those of the Python path (the compiled walk stops at anything the
    reader must judge)."""
    rng = random.Random(seed)
    raw = bytearray(_merged(tmp_path, INPUTS[2]).read_bytes())
    starts, pos = [], 0
    while pos + 8 <= len(raw):
        starts.append(pos)
        pos += int.from_bytes(raw[pos + 4:pos + 8], sys.byteorder)
    for j in range(8):
        d = bytearray(raw)
        if j == 0:
            d = d[:rng.randrange(len(d) // 2, len(d))]
        else:
            for _ in range(j):
                b = rng.choice(starts[2:])      # after the SHB and IDB
                end = b + int.from_bytes(raw[b + 4:b + 8], sys.byteorder)
                # its header (type, lengths, interface, time) or its end
                # (comments, flags, trailing length)
                k = rng.choice([b + rng.randrange(28), end - 1 - rng.randrange(96)])
                d[k] ^= 1 << rng.randrange(8)
        src = tmp_path / f"d{j}.pcapng"
        src.write_bytes(bytes(d))
        c = _restore_any(src, tmp_path / f"c{j}.pcap", False)
        p = _restore_any(src, tmp_path / f"p{j}.pcap", True)
        assert c == p, j
