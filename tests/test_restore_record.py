"""The restore record's header diffs: the per-aggregate numpy form gives
exactly the per-segment one, the compiled row encoder gives exactly the
Python one, and records round-trip."""

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from pcapgro.record import Packet
from pcapgro.restore import (_diffs, _diffs_many, _apply, _rows_py, encode, encode_rows,
                             decode)

try:
    from pcapgro._native import restore_rows
except ImportError:          # pragma: no cover - depends on the build
    restore_rows = None


@st.composite
def header_sets(draw):
    n = draw(st.sampled_from([0, 1, 2, 7, 54, 66, 86]))
    ref = draw(st.binary(min_size=n, max_size=n))
    rows = []
    for _ in range(draw(st.integers(0, 6))):
        b = bytearray(ref)
        for _ in range(draw(st.integers(0, 8))):
            if b:
                b[draw(st.integers(0, n - 1))] = draw(st.integers(0, 255))
        rows.append(bytes(b))
    return ref, rows


@settings(max_examples=400, deadline=None)
@given(header_sets())
def test_diffs_many_equals_diffs(case):
    ref, rows = case
    got = _diffs_many(rows, ref)
    assert got == [_diffs(h, ref) for h in rows]
    assert [_apply(ref, d) for d in got] == rows


def test_diffs_many_runs_at_both_edges():
    ref = bytes(10)
    rows = [b"\x01" + bytes(8) + b"\x02", b"\xff" * 10, bytes(10)]
    assert _diffs_many(rows, ref) == ["0:01/9:02", "0:" + "ff" * 10, ""]


def test_encode_rows_equals_encode_and_memoryviews():
    h0 = bytes(range(54))
    p0 = Packet(1000, h0 + b"A" * 100, 154)
    segs = []
    for k in range(1, 5):
        h = bytearray(h0)
        h[18] = k
        h[40] ^= k
        segs.append(Packet(1000 + 7 * k, bytes(h) + bytes([65 + k]) * 100, 154))
    odd = Packet(2000, h0 + b"\0\0" + b"Z" * 50, 106)      # another header length
    pk = [p0] + segs + [odd]
    pays = [54] * 5 + [56]
    idxs = [3, 4, 6, 7, 9, 10]
    hdr = bytes(h0[:16]) + b"\x99" + h0[17:]
    want = encode(hdr, pk, pays, idxs, flags=5)
    buf = memoryview(b"".join(p.data for p in pk))
    offs, at = [], 0
    for p in pk:
        offs.append(at)
        at += len(p.data)
    got = encode_rows(hdr, p0, 54, 3, 5,
                      [buf[offs[m]:offs[m] + pays[m]] for m in range(1, 6)],
                      [p.ts - 1000 for p in pk[1:]],
                      [len(p.data) - o for p, o in zip(pk[1:], pays[1:])],
                      [i - 3 for i in idxs[1:]])
    assert got == want
    r = decode(want)
    assert r["i"] == 3 and r["f"] == 5 and [s[0] for s in r["s"]] == [1, 3, 4, 6, 7]


@st.composite
def row_sets(draw):
    ref, rows = draw(header_sets())
    # some headers of another length (written as '*hex'), some memoryviews
    rows = [memoryview(r) if draw(st.booleans()) else r for r in rows]
    if draw(st.booleans()):
        rows.append(draw(st.binary(max_size=90)))
    k = len(rows)
    ints = st.integers(-(1 << 62), 1 << 62)
    return (ref, rows, draw(st.lists(ints, min_size=k, max_size=k)),
            draw(st.lists(st.integers(0, 1 << 20), min_size=k, max_size=k)),
            draw(st.lists(st.integers(0, 1 << 40), min_size=k, max_size=k)))


@pytest.mark.skipif(restore_rows is None, reason="no compiled extension")
@settings(max_examples=500, deadline=None)
@given(row_sets())
def test_compiled_rows_equal_python_rows(case):
    ref, hdrs, dts, lens, dis = case
    assert restore_rows(ref, hdrs, dts, lens, dis) == _rows_py(ref, hdrs, dts, lens, dis)


@pytest.mark.skipif(restore_rows is None, reason="no compiled extension")
def test_compiled_rows_refuse_bad_arguments():
    with pytest.raises(ValueError):
        restore_rows(b"ab", [b"ab"], [1, 2], [3], [4])
    with pytest.raises(TypeError):
        restore_rows(b"ab", [b"ab"], ["x"], [3], [4])
    with pytest.raises(TypeError):
        restore_rows(b"ab", [5], [1], [3], [4])
    assert restore_rows(b"", [], [], [], []) == ""


@settings(max_examples=300, deadline=None)
@given(header_sets())
def test_diff1_equals_diffs(case):
    from pcapgro.restore import _diff1
    ref, rows = case
    for h in rows + [ref + b"x", ref[:-1]]:
        assert _diff1(h, ref) == _diffs(h, ref)


def _sized(opt):
    """An option as a pcapng file can hold it: the fixed-size EPB options
    (dropcount, packetid: 8 bytes; queue: 4) at their size."""
    code, v = opt
    n = {4: 8, 5: 8, 6: 4}.get(code)
    return (code, (v + bytes(8))[:n]) if n else (code, v)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([6, 3, 2]), st.lists(st.text(max_size=30), max_size=3),
       st.none() | st.integers(0, (1 << 32) - 1),
       st.lists(st.tuples(st.integers(3, 0xFFFF), st.binary(max_size=12)).map(_sized),
                max_size=3))
def test_segment_metadata_round_trips(block, comments, flags, options):
    """The m= items of a later segment give back its PacketMeta exactly,
    whatever its comments hold (separators, '%', any Unicode)."""
    from pcapgro.record import PacketMeta
    from pcapgro.restore import _meta_items, _meta_decode
    m = PacketMeta(block=block, comments=comments, flags=flags, options=options)
    items = _meta_items(m)
    assert not set(items) & set(" ;:=")
    if not items:
        return
    back = _meta_decode(items)
    assert (back.block, back.comments, back.flags, back.options) == \
        (block, comments, flags, options)
    p0 = Packet(5, bytes(20) + b"P", 21)
    rec = encode(bytes(20), [p0, Packet(6, bytes(20) + b"Q", 21, meta=m)], [20, 20], [0, 1])
    assert decode(rec)["m"][0][0] == 1


@pytest.mark.parametrize("items", ["o0.00000000", "o1.41", "o2.0100000000", "o2.01000000",
                                   "o6.0102", "o4.01", "b6", "b9", "f1,f2", "b3,b3"])
def test_metadata_items_merge_never_writes_are_refused(items):
    """A changed m= item (an option that is an item of its own, a fixed-size
    option of another size, an EPB written as b6, an item twice) makes the
    record unfit: applied, it could write a block readers refuse."""
    from pcapgro.restore import _meta_decode
    with pytest.raises(ValueError):
        _meta_decode(items)
