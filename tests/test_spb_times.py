"""Simple Packet Blocks carry no time (pcapng 4.4): the reader gives one the
time of the packet before it in its section, or interface 0's time origin
(if_tsoffset) when it comes first, so that

* GRO's NAPI timing sees it in its place (a time of 0 would open a gap of
  decades before the next packet and end the poll there);
* an aggregate it starts gets a time an EPB of its interface can hold (0
  lies before an if_tsoffset: merge used to exit 2, "a timestamp ... does
  not fit pcapng's fields");
* passed through unchanged, it is written back as an SPB, with no time;
  classic pcap has no record without one, so there it is written with that
  time (editcap writes 0, 1970: a time going backwards in mid-capture,
  which verify, tcpreplay and the aggregates it starts would inherit).

The rule, end to end: a capture where a TCP segment is stored as an SPB
merges exactly as the same capture with that segment as an EPB stamped with
the time of the packet before it.
"""

import io
import struct

import pytest

from builders import epb, idb, shb, spb
from capture_helpers import REPO, run_cli, tshark
from pktbuild import arp_frame
from pcapgro.capture import open_reader
from pcapgro.capture.pcapng import PcapngReader
from pcapgro.record import BLOCK_SPB, Packet

S = 10**9
OFFSET = 100                                        # if_tsoffset, s
IDB_OPTS = [(14, struct.pack("<q", OFFSET))]        # if_tsoffset; if_tsresol: us


def _read(data):
    return [e for e in PcapngReader(io.BytesIO(data), b"") if type(e) is Packet]


def test_reader_spb_takes_time_of_packet_before():
    data = (shb() + idb("<", 1, 0, IDB_OPTS) + spb("<", b"a" * 20)
            + epb("<", 0, 7, b"b" * 20) + spb("<", b"c" * 20) + spb("<", b"d" * 20)
            + shb() + idb("<", 1, 0) + spb("<", b"e" * 20))
    got = [(p.ts, p.meta.block if p.meta else None) for p in _read(data)]
    assert got == [(OFFSET * S, BLOCK_SPB),             # first: interface 0's origin
                   (OFFSET * S + 7000, None),
                   (OFFSET * S + 7000, BLOCK_SPB), (OFFSET * S + 7000, BLOCK_SPB),
                   (0, BLOCK_SPB)]                      # a new section: its own origin


def test_reader_spb_after_a_run_of_epbs_and_across_chunks():
    # more EPBs than one lazy chunk run holds, then an SPB: its time is the
    # last EPB's, whether that EPB came in this chunk or an earlier one
    n = 3000
    body = b"".join(epb("<", 0, 1000 + i, bytes(600)) for i in range(n))
    data = shb() + idb("<", 1, 0, IDB_OPTS) + body + spb("<", bytes(600))
    r = PcapngReader(io.BytesIO(data), b"")
    last = None
    for batch in r.batches(lazy=True):
        if getattr(batch, "lazy", False):
            continue                        # an EpbChunk: EPBs only
        for ev in batch:
            if type(ev) is Packet and ev.meta is not None:
                last = ev
    assert last.meta.block == BLOCK_SPB
    assert last.ts == OFFSET * S + (1000 + n - 1) * 1000


BULK = [p for p in open_reader(REPO / "samples" / "tcp4-bulk-wire.pcap") if type(p) is Packet]


def _bulk(as_spb, times_as_spb):
    """Records 300..399 of samples/tcp4-bulk-wire.pcap as pcapng, us EPBs
    with if_tsoffset 100 s; the records in ``as_spb`` as SPBs, or, with
    ``times_as_spb``, as EPBs stamped with the time of the record before."""
    pk = BULK
    blocks = [shb(), idb("<", 1, 0, IDB_OPTS)]
    prev = None
    for i in range(300, 400):
        p = pk[i]
        ticks = p.ts // 1000 - OFFSET * 10**6
        if i in as_spb and not times_as_spb:
            blocks.append(spb("<", p.data, p.orig_len))
            continue
        if i in as_spb:
            ticks = 0 if prev is None else prev     # first: the origin
        blocks.append(epb("<", 0, ticks, p.data, p.orig_len))
        prev = ticks
    return b"".join(blocks)


def _run(tmp_path, cmd, data, fmt, no_c, tag):
    """The packets of ``pcapgro CMD -q -F fmt`` run on pcapng ``data``
    (compiled, or the reference with ``no_c``), as Packet objects."""
    src = tmp_path / f"in-{tag}.pcapng"
    src.write_bytes(data)
    dst = tmp_path / f"out-{tag}.{fmt}"
    run_cli(*cmd, "-q", "-F", fmt, src, dst, check=0, no_c=no_c)
    return [p for p in open_reader(dst) if type(p) is Packet]


def _merge(tmp_path, data, fmt, no_c, tag):
    return [(p.ts, p.data, p.orig_len)
            for p in _run(tmp_path, ("merge", "--csum", "kernel"), data, fmt, no_c, tag)]


@pytest.mark.parametrize("no_c", [False, True], ids=["compiled", "reference"])
@pytest.mark.parametrize("fmt", ["pcapng", "pcap"])
@pytest.mark.parametrize("which", [(301,), (300,), (301, 350, 351, 399)],
                         ids=["inside", "first", "several"])
def test_merge_spb_as_packet_at_time_before(tmp_path, fmt, no_c, which):
    got = _merge(tmp_path, _bulk(set(which), False), fmt, no_c, "spb")
    want = _merge(tmp_path, _bulk(set(which), True), fmt, no_c, "epb")
    assert got == want
    assert len(got) < 100           # merged: the SPB did not end a poll


@pytest.mark.parametrize("no_c", [False, True], ids=["compiled", "reference"])
def test_aggregate_started_by_spb_keeps_its_time_in_pcap(tmp_path, no_c):
    """An SPB first in its section (interface 0's if_tsoffset), then nine
    EPBs of its flow: one aggregate, at the same time in pcap as in pcapng
    (it was written at 0 into pcap, as an SPB passed through was)."""
    pk = BULK[300:310]
    base = pk[0].ts // 1000 - OFFSET * 10**6
    data = b"".join([shb(), idb("<", 1, 0, IDB_OPTS), spb("<", pk[0].data, pk[0].orig_len)]
                    + [epb("<", 0, p.ts // 1000 - OFFSET * 10**6 - base, p.data, p.orig_len)
                       for p in pk[1:]])
    outs = {fmt: _merge(tmp_path, data, fmt, no_c, "first-" + fmt) for fmt in ("pcap", "pcapng")}
    assert outs["pcap"] == outs["pcapng"]
    assert len(outs["pcap"]) < 10 and all(t >= OFFSET * S for t, _, _ in outs["pcap"])


@tshark
def test_merge_verify_with_a_passed_spb_into_pcap(tmp_path):
    """An ARP frame stored as an SPB between EPBs of a bulk flow passes
    unchanged; into classic pcap it gets the time before it, so the output
    times do not go back and ``merge --verify`` finds OUT faithful (time 0,
    as editcap writes it, was a step back to 1970 that verify reported)."""
    pk = BULK[300:320]
    blocks = [shb(), idb("<", 1, 0, IDB_OPTS)]
    for i, p in enumerate(pk):
        blocks.append(epb("<", 0, p.ts // 1000 - OFFSET * 10**6, p.data, p.orig_len))
        if i == 4:
            blocks.append(spb("<", arp_frame()))
    src, out = tmp_path / "in.pcapng", tmp_path / "out.pcap"
    src.write_bytes(b"".join(blocks))
    r = run_cli("merge", "-q", "--verify", src, out)
    assert r.returncode == 0, r.stderr.decode()
    got = [p.ts for p in open_reader(out) if type(p) is Packet]
    assert got == sorted(got) and min(got) > OFFSET * S


# ---------------------------------------------------------------------------
# split: the segments of a super-frame stored as an SPB stay SPBs in pcapng
# (an SPB has no time: read back, each takes the time of the packet before
# it, so all take the SPB's), and are spread from that time in classic pcap.
# Writing them as EPBs of interface 0 instead (tried in session 13) put them
# before the packet ahead of them when that packet's interface counts time
# finer than interface 0: its tick rounds the SPB's time down.

def _split_input(as_spb):
    """if_tsoffset 100 s, us: a plain TCP super-frame (5 x 1400 bytes)
    first, an EPB at 50 us, a GRE-tunnelled one, an EPB at 90 us, a small
    segment; the super-frames and the last segment are SPBs (``as_spb``) or
    EPBs stamped with the time of the packet before them."""
    from pktbuild import Flow
    from tunnelbuild import Tunnel
    f, g, t = Flow(4, ipid="inc"), Flow(4, ipid="inc", sport=1600), Tunnel("gre", gre_key=5)
    pkts = [(None, bytes(f.pkt(0, 7000).data)), (50, bytes(f.pkt(7000, 100).data)),
            (None, bytes(t.wrap(g.pkt(0, 7000)).data)), (90, bytes(t.wrap(g.pkt(7000, 100)).data)),
            (None, bytes(t.wrap(g.pkt(7100, 100)).data))]
    blocks = [shb(), idb("<", 1, 0, IDB_OPTS)]
    prev = 0
    for us, d in pkts:
        if us is None and as_spb:
            blocks.append(spb("<", d))
        else:
            prev = prev if us is None else us
            blocks.append(epb("<", 0, prev, d))
    return b"".join(blocks)


def _split(tmp_path, data, fmt, no_c, tag):
    return [(p.ts, p.data, p.orig_len, p.meta is not None and p.meta.block == BLOCK_SPB)
            for p in _run(tmp_path, ("split",), data, fmt, no_c, tag)]


@pytest.mark.parametrize("no_c", [False, True], ids=["compiled", "reference"])
@pytest.mark.parametrize("fmt", ["pcapng", "pcap"])
def test_split_spb_super_frame_segments_stay_spbs(tmp_path, fmt, no_c):
    got = _split(tmp_path, _split_input(True), fmt, no_c, "spb")
    want = _split(tmp_path, _split_input(False), fmt, no_c, "epb")
    assert [g[1:3] for g in got] == [w[1:3] for w in want]
    times = [g[0] for g in got]
    assert times == sorted(times)
    if fmt == "pcap":           # spread from the SPB's time, as from an EPB's
        assert times == [w[0] for w in want] and len(set(times[:5])) == 5
    else:                       # 5 + 1 + 5 + 1 + 1 packets, SPBs as they came
        assert [g[3] for g in got] == [True] * 5 + [False] + [True] * 5 + [False, True]
        assert times[:5] == [OFFSET * S] * 5 and times[6:11] == [OFFSET * S + 50_000] * 5


@pytest.mark.parametrize("no_c", [False, True], ids=["compiled", "reference"])
@pytest.mark.parametrize("which", [(301,), (300,), (301, 350, 351, 399)],
                         ids=["inside", "first", "several"])
def test_merge_gso_sends_spb_segments_at_the_aggregate_time(tmp_path, no_c, which):
    """merge --gso sends every packet of an aggregate at its completion
    time: one stored as an SPB goes as an EPB with that time (as SPB it
    would read back with the time of the packet before it), so the output
    reads back exactly as that of the same capture with it as an EPB at the
    time before it (a packet sent at its own time stays an SPB)."""
    outs = {tag: [(p.ts, p.data, p.orig_len, p.meta is not None and p.meta.block == BLOCK_SPB)
                  for p in _run(tmp_path, ("merge", "--gso"), data, "pcapng", no_c, tag)]
            for tag, data in (("spb", _bulk(set(which), False)), ("epb", _bulk(set(which), True)))}
    assert [x[:3] for x in outs["spb"]] == [x[:3] for x in outs["epb"]]
    assert len(outs["spb"]) == 100
    if which == (301,):         # inside an aggregate: sent at its time, an EPB
        assert not any(x[3] for x in outs["spb"])
