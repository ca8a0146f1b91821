"""``split --restore`` across aggregates merge wrote without a restore
record (a segment cut by the snaplen: the later segments' bytes are not
all there).  Such an aggregate passes as merge wrote it (counted
``unrecorded``), at the place of its first packet, and every other packet
is given back byte for byte in its input place: the input indexes no
record names, once a packet in its input position comes, are the cut
aggregates' (their note says how many).  Before, restore counted the cut
aggregate as one input packet and lost its place after it: with 10 of them
in ``rule_traffic(5, 6, 3000)``, 334 later records were "unfit".  Both
the Python reference (PCAPGRO_NO_C=1) and the compiled restore and
placement (pcapgro/_restore.c) run."""

import json

import pytest

from capture_helpers import (compiled_then_python, read_events, restore_in_process, run_cli,
                             write_events)
from pcapgro import restore
from pcapgro.capture import _stream
from pcapgro.record import Interface, Packet, PacketMeta
from test_gro_cfast import rule_traffic

AGG = "pcapgro: GRO aggregate"


def _key(p):
    return p.ts, bytes(p.data), p.orig_len


def _is_cut(p):
    cs = p.meta.comments if p.meta else []
    return any(c.startswith(AGG) for c in cs) and not any(c.startswith(restore.TAG)
                                                          for c in cs)


@pytest.fixture(scope="module")
def cut_merge(tmp_path_factory):
    """rule_traffic(5, 6, 3000) (snaplen cuts among its segments) as pcapng,
    merged to pcapng: (input Packets, merge output path, merge stats)."""
    d = tmp_path_factory.mktemp("cut")
    src, m, st = d / "src.pcapng", d / "m.pcapng", d / "m.json"
    pk = rule_traffic(5, 6, 3000)
    assert sum(len(p.data) < p.orig_len for p in pk) >= 10
    write_events(src, [Interface(1, snaplen=262144, tsresol=9)] + pk)
    run_cli("merge", "-q", "--stats", st, "-F", "pcapng", src, m, check=0)
    return pk, m, json.loads(st.read_text())


def _restore_in_process(src, out, chunk=None, monkeypatch=None):
    r = restore.Restorer()
    if chunk is not None:
        monkeypatch.setattr(_stream, "CHUNK", chunk)
    restore_in_process(src, out, r, nanosecond=True)
    return dict(r.stats)


def _check_places(inp, out, cut_aggs):
    """``out`` (Packets) is ``inp`` (Packets) with each of ``cut_aggs``
    (the merge output's aggregates without a record) in place of input
    packets: what is not a cut aggregate comes in input order, byte for byte
    with its time, and each cut aggregate sits where input packets are
    missing.  Returns how many input packets are missing."""
    keys = [_key(p) for p in inp]
    cut_keys = {_key(p) for p in cut_aggs}
    assert sorted(_key(p) for p in out if _key(p) in cut_keys) == sorted(cut_keys)
    at = []                    # input position of each packet given back, or None
    j = 0
    for p in out:
        if _key(p) in cut_keys:
            at.append(None)
            continue
        k = _key(p)
        while j < len(keys) and keys[j] != k:
            j += 1
        assert j < len(keys), "a packet given back out of input order or changed"
        at.append(j)
        j += 1
    kept = [a for a in at if a is not None]
    for n, a in enumerate(at):
        if a is None:
            before = next((x for x in reversed(at[:n]) if x is not None), -1)
            after = next((x for x in at[n + 1:] if x is not None), len(keys))
            assert after - before > 1, "a cut aggregate where no input packet is missing"
    return len(keys) - len(kept)


def test_cut_aggregates_keep_every_later_packet_in_place(tmp_path, monkeypatch, cut_merge):
    pk, m, mst = cut_merge
    merged = [e for e in read_events(m) if type(e) is Packet]
    cut_aggs = [p for p in merged if _is_cut(p)]
    n_cut = mst["gro"]["snaplen"]["aggregates"]
    assert n_cut == len(cut_aggs) >= 5
    segs = sum(restore._unrecorded(p.meta) for p in cut_aggs)
    assert segs > 2 * n_cut
    outs = []
    for no_c in compiled_then_python(monkeypatch):
        out = tmp_path / f"r{no_c}.pcap"
        p = run_cli("split", "-q", "--restore", "--stats", "-", m, out, check=0)
        st = json.loads(p.stdout)["restore"]
        assert st["unfit"] == 0 and st["unrecorded"] == n_cut
        assert st["packets"] == len(merged)
        back = [e for e in read_events(out) if type(e) is Packet]
        assert len(back) == len(pk) - segs + n_cut
        assert _check_places(pk, back, cut_aggs) == segs
        outs.append((out.read_bytes(), st))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("chunk", [4096, 1 << 16])
def test_cut_aggregates_compiled_placement_same_as_python(tmp_path, monkeypatch, cut_merge,
                                                          chunk):
    """In process, reader chunks small enough that the compiled placement
    holds runs past a cut aggregate's holes across chunks: the same bytes
    and statistics as the Python path."""
    _, m, _ = cut_merge
    outs = []
    for no_c in compiled_then_python(monkeypatch):
        out = tmp_path / f"o{no_c}.pcap"
        st = _restore_in_process(m, out, chunk, monkeypatch)
        outs.append((out.read_bytes(), st))
    assert outs[0] == outs[1] and outs[0][1]["unfit"] == 0


def test_cut_aggregate_whose_note_says_no_count_drops_nothing(tmp_path, cut_merge):
    """A cut aggregate whose note was edited (no segment count): counted as
    one input packet, as before; nothing dropped, no error."""
    _, m, _ = cut_merge
    evs = read_events(m)
    for k, e in enumerate(evs):
        if type(e) is Packet and _is_cut(e):
            evs[k] = Packet(e.ts, e.data, e.orig_len, e.iface, e.linktype,
                            PacketMeta(comments=[AGG + " (TCP)"], flags=e.meta.flags))
    edited = tmp_path / "e.pcapng"
    write_events(edited, evs)
    p = run_cli("split", "-q", "--restore", "--stats", "-", edited, tmp_path / "r.pcap",
                check=0)
    st = json.loads(p.stdout)["restore"]
    assert st["unrecorded"] > 0
    back = [e for e in read_events(tmp_path / "r.pcap") if type(e) is Packet]
    assert len(back) == st["segments"] + st["passed"]
