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


# --- 2: a record that does not fit its packet is never applied -------------

def merged(tmp_path):
    """The sample merged to pcapng (path), and its events."""
    m = tmp_path / "m.pcapng"
    run_cli("merge", "-q", SAMPLE, m, check=0)
    return m, events(m)


def record_of(p):
    for c in (p.meta.comments if p.meta else ()):
        if c.startswith("pcapgro-restore v1 ") and " h=" in c:
            return c
    return None


def restore_stats(tmp_path, evs, name):
    """split --restore of ``evs`` written as pcapng: (stats, stderr,
    restored packets)."""
    src, out, js = tmp_path / f"{name}.pcapng", tmp_path / f"{name}-r.pcapng", tmp_path / f"{name}.json"
    write(src, evs)
    p = run_cli("split", "--restore", "--stats", js, src, out, check=0)
    err = p.stderr.decode()
    assert "Traceback" not in err and "error" not in err, err
    return json.loads(js.read_text())["restore"], err, packets(out)


def expected_order(full, edited):
    """What restoring ``edited`` (merge output whose aggregates in it do not
    fit their records any more) must give: the original packets, each
    unfit aggregate unchanged in the place of its first segment."""
    from pcapgro.restore import decode
    out = {}
    skip = set()
    for p in edited:
        rec = record_of(p)
        if rec is not None:
            r = decode(rec)
            out[r["i"]] = p
            skip.update(r["i"] + s[0] for s in r["s"])
    return [out.get(k, q) for k, q in enumerate(full) if k not in skip]


@pytest.mark.parametrize("edit", ["snaplen", "chop"])
def test_edited_aggregates_pass_unchanged_and_are_counted(tmp_path, edit):
    """editcap -s 200 (captured < original length) and editcap -C -4 (4
    bytes chopped off the end): the aggregates' records no longer fit, so
    they are not applied: those packets pass unchanged in their place,
    counted, one line on stderr, exit 0, nothing dropped."""
    m, evs = merged(tmp_path)
    full = packets(SAMPLE)
    n_agg = 0
    for e in evs:
        if type(e) is Packet and record_of(e) is not None:
            n_agg += 1
            if edit == "snaplen":
                e.data = e.data[:200]
            else:
                e.data, e.orig_len = e.data[:-4], e.orig_len - 4
    st, err, got = restore_stats(tmp_path, evs, edit)
    assert n_agg and st["unfit"] == n_agg and st["restored"] == 0
    assert f"{n_agg:,} restore records do not fit their packet" in " ".join(err.split())
    edited = [e for e in evs if type(e) is Packet]
    assert [(p.ts, bytes(p.data)) for p in got] == \
        [(p.ts, bytes(p.data)) for p in expected_order(full, edited)]


def _tamper(rec, how):
    head, _, rows = rec.partition(" s=")
    rows, _, meta = rows.partition(" m=")
    first, _, rest = rows.partition(";")
    di, dt, n, d = first.split(",", 3)
    if how == "bad hex":
        return rec.replace(" h=1448,", " h=1448,0:zz/", 1)
    if how == "odd hex":
        return rec.replace(" h=1448,", " h=1448,0:abc/", 1)
    if how == "upper hex":
        return rec.replace(" h=1448,", " h=1448,0:AB/", 1)
    if how == "diff past header":
        return rec.replace(" h=1448,", " h=1448,4000:00/", 1)
    if how == "bad int":
        return rec.replace(" t=", " t=1x", 1)
    if how == "signed int":
        return rec.replace(" i=", " i=+", 1)
    if how == "unicode digits":
        return rec.replace(" h=1448,", " h=١٤٤٨,", 1)
    if how == "negative index":
        return f"{head} s=-{di},{dt},{n},{d};{rest}"
    if how == "duplicate index":
        return f"{head} s={di},{dt},{n},{d};{first};{rest}".rstrip(";")
    if how == "payload one short":
        return f"{head} s={di},{dt},{int(n) - 1},{d};{rest}".rstrip(";")
    if how == "payload one long":
        return f"{head} s={di},{dt},{int(n) + 1},{d};{rest}".rstrip(";")
    if how == "field twice":
        return rec + " t=5"
    if how == "truncated":
        return rec[:len(rec) // 2]
    raise AssertionError(how)


TAMPER = ["bad hex", "odd hex", "upper hex", "diff past header", "bad int", "signed int",
          "unicode digits", "negative index", "duplicate index", "payload one short",
          "payload one long", "field twice", "truncated"]


@pytest.mark.parametrize("how", TAMPER)
def test_tampered_record_is_never_applied(tmp_path, how):
    """A record changed by hand (bad hex, bad numbers, negative or
    duplicate indexes, payload lengths that do not add up): the packet
    passes unchanged and is counted; everything else is restored; no
    Python-internal message, exit 0, nothing dropped."""
    m, evs = merged(tmp_path)
    victim = next(e for e in evs if type(e) is Packet and record_of(e) is not None
                  and " h=1448," in record_of(e))
    rec = record_of(victim)
    victim.meta.comments[victim.meta.comments.index(rec)] = _tamper(rec, how)
    st, err, got = restore_stats(tmp_path, evs, how.replace(" ", "_"))
    assert st["unfit"] == 1, st
    assert st["restored"] == sum(1 for e in evs if type(e) is Packet and record_of(e)) - 1
    assert "1 restore record does not fit their packet" in err
    assert sum(1 for p in got if p.data == victim.data) == 1
    from pcapgro.restore import decode
    segs = 1 + len(decode(rec)["s"])
    assert len(got) == len(packets(SAMPLE)) - segs + 1


# --- 3: split (GSO) of merge's output drops pcapgro's own annotations ------

def test_gso_split_of_merged_output_drops_pcapgro_annotations(tmp_path):
    """split cuts merge's aggregates: their pcapgro comment, restore record
    and EPB flag bit 11 do not go onto the segments (they describe the
    aggregate), the packet's other comments and flags stay; split --restore
    of the result then has nothing to undo and passes everything."""
    src, m, gs, r = (tmp_path / n for n in ("c.pcapng", "m.pcapng", "gs.pcapng", "r.pcapng"))
    sample_pcapng(src, {10: PacketMeta(comments=["mine"], flags=0x1)})
    run_cli("merge", "-q", src, m, check=0)
    run_cli("split", "-q", m, gs, check=0)
    segs = packets(gs)
    assert len(segs) == len(packets(SAMPLE))
    for p in segs:
        cs = p.meta.comments if p.meta else []
        assert not any(c.startswith("pcapgro: GRO aggregate") for c in cs)
        assert not any(c.startswith("pcapgro-restore v1 ") and " h=" in c for c in cs)
        assert not (p.meta and p.meta.flags and p.meta.flags & 0x800)
    assert [p.meta.comments for p in segs if p.meta and p.meta.comments
            and not p.meta.comments[0].startswith("pcapgro")] == [["mine"]]
    assert next(p for p in segs if p.meta and "mine" in p.meta.comments).meta.flags == 0x1
    p = run_cli("split", "-q", "--restore", "--stats", "-", gs, r, check=0)
    st = json.loads(p.stdout)["restore"]
    assert st["restored"] == 0 and st["unfit"] == 0 and st["packets"] == len(segs)


# --- 4: merging a merged capture, then restoring, undoes one merge ---------

@pytest.mark.parametrize("first", [[], ["--poll-gap", "0"], ["--fraglist", "--gro-max-size", "6000"]],
                         ids=["default", "small-aggregates", "fraglist"])
def test_restore_undoes_one_merge_of_a_merged_capture(tmp_path, first):
    """merge S m1; merge m1 m2; split --restore m2 gives back m1 exactly
    (bytes, times, comments, flags, options: each packet keeps its own
    older record), and a second split --restore gives back S.  With
    ``--poll-gap 0`` first, m2 merges m1's packets (records on first and
    later segments); by default m2 passes m1's aggregates unchanged."""
    m1, m2, r2, r1 = (tmp_path / n for n in ("m1.pcapng", "m2.pcapng", "r2.pcapng", "r1.pcap"))
    run_cli("merge", "-q", *first, SAMPLE, m1, check=0)
    run_cli("merge", "-q", m2.parent / "m1.pcapng", m2, check=0)
    p = run_cli("split", "-q", "--restore", "--stats", "-", m2, r2, check=0)
    st = json.loads(p.stdout)["restore"]
    assert st["unfit"] == 0 and st["unrecorded"] == 0
    assert [view(q) for q in packets(r2)] == [view(q) for q in packets(m1)]
    run_cli("split", "-q", "--restore", r2, r1, check=0)
    assert [view(q) for q in packets(r1)] == [view(q) for q in packets(SAMPLE)]


@pytest.mark.parametrize("first", [[], ["--poll-gap", "0"]], ids=["default", "small-aggregates"])
def test_forwarding_a_merged_capture_writes_no_pcapgro_comments(tmp_path, first):
    """merge --gso of a capture merged before: the frames a router sends
    carry none of pcapgro's comments (older merges' records included) and
    no flag bit 11 from them; the wire bytes are those of forwarding the
    original capture."""
    m1, f1, f0 = tmp_path / "m1.pcapng", tmp_path / "f1.pcapng", tmp_path / "f0.pcapng"
    run_cli("merge", "-q", *first, SAMPLE, m1, check=0)
    run_cli("merge", "-q", "--gso", m1, f1, check=0)
    run_cli("merge", "-q", "--gso", SAMPLE, f0, check=0)
    out = packets(f1)
    assert not any(c.startswith("pcapgro") for p in out if p.meta for c in p.meta.comments)
    assert not any(p.meta and p.meta.flags and p.meta.flags & 0x800 for p in out)
    assert [bytes(p.data) for p in out] == [bytes(p.data) for p in packets(f0)]


# --- input indexes run over the whole file, every section ------------------

def test_restore_of_a_file_of_several_sections(tmp_path):
    """A pcapng of two sections (two captures concatenated): merge counts
    input indexes over the whole file, so restore must not start again at
    a section: it gives back both sections exactly."""
    one, two, m, r = (tmp_path / n for n in ("one.pcapng", "two.pcapng", "m.pcapng", "r.pcapng"))
    sample_pcapng(one, {12: PacketMeta(comments=["note"])})
    two.write_bytes(one.read_bytes() * 2)
    run_cli("merge", "-q", two, m, check=0)
    run_cli("split", "-q", "--restore", m, r, check=0)
    want, got = events(two), events(r)
    assert [type(e).__name__ for e in got] == [type(e).__name__ for e in want]
    assert [view(p) for p in got if type(p) is Packet] == \
        [view(p) for p in want if type(p) is Packet]


def _held_back(path):
    """The most restored packets split --restore keeps back at once on
    ``path`` (given back by the records read so far, not yet yielded)."""
    from pcapgro.restore import Restorer
    r = Restorer()
    most = out = 0
    for ev in r.process(iter(events(path))):
        out += type(ev) is Packet
        most = max(most, r.stats["segments"] + r.stats["passed"] - out)
    return most


def test_restore_holds_no_more_in_a_later_section(tmp_path):
    """In the second section, restore places packets by their input index
    as in the first (no index counted from 0 again, which would keep
    restored packets back until the next packet without a record)."""
    one, two = tmp_path / "one.pcapng", tmp_path / "two.pcapng"
    sample_pcapng(one)
    two.write_bytes(one.read_bytes() * 2)
    m1, m2 = tmp_path / "m1.pcapng", tmp_path / "m2.pcapng"
    run_cli("merge", "-q", one, m1, check=0)
    run_cli("merge", "-q", two, m2, check=0)
    assert _held_back(m2) == _held_back(m1)


def test_simple_packet_blocks_come_back_as_such(tmp_path):
    """Every third packet a Simple Packet Block (no timestamp): merge must
    write the held singles and aggregate heads among them as EPBs; their
    records say b=3, so split --restore gives the file back byte for byte
    (they used to come back as EPBs stamped 1970-01-01)."""
    from pcapgro.record import BLOCK_SPB
    evs = []
    k = 0
    for e in events(SAMPLE):
        if type(e) is Packet:
            k += 1
            if k % 3 == 0:
                e = Packet(0, e.data, e.orig_len, 0, e.linktype, PacketMeta(block=BLOCK_SPB))
        evs.append(e)
    src, m, r = tmp_path / "spb.pcapng", tmp_path / "m.pcapng", tmp_path / "r.pcapng"
    write(src, evs)
    run_cli("merge", "-q", src, m, check=0)
    assert any(" b=3" in c for p in packets(m) if p.meta for c in p.meta.comments)
    run_cli("split", "-q", "--restore", m, r, check=0)
    assert r.read_bytes() == src.read_bytes()
