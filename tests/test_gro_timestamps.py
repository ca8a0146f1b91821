"""Output timestamps of merge, from the rule (man page, README, engine doc):

* a packet GRO passes through (any Pass reason, pure ACKs) keeps its own
  time, exactly, whatever was written before it;
* a held packet (aggregate or single) is stamped when it is completed (the
  arrival time of the packet whose processing completed it, the end of the
  poll, the timer's expiry), never earlier than any packet written before it;
* so output times never go backwards unless the input's do;
* each pcapng Section starts afresh: an earlier Section's times do not
  hold back a later one's.

Each case is input packets -> expected output times, run through the
general path, the Python fast paths (per Packet and per pcap chunk), the
compiled loop, and the command line (pcap and pcapng in and out).
"""

import io

import pytest

from capture_helpers import run_cli
from pcapgro import pipeline
from pcapgro.capture import open_reader
from pcapgro.capture.pcap import PcapReader, PcapWriter
from pcapgro.capture.pcapng import PcapngWriter
from pcapgro.gro import GROConfig, GROEngine, cfast
from pcapgro.record import Interface, Packet, Section

from pktbuild import ACK, PSH, Flow

US = 1000
S = 10**9
T = 1_700_000_000 * S

# flow A (data, 10.0.0.1:1000 -> 10.0.0.2:2000) and its ACKs back
A = Flow(4, src="10.0.0.1", dst="10.0.0.2", sport=1000, dport=2000, ipid="inc")
B = Flow(4, src="10.0.0.2", dst="10.0.0.1", sport=2000, dport=1000, ipid="inc")


def seg(k, t, flags=ACK):
    """Segment k (100 bytes) of flow A at time t."""
    return A.pkt(100 * k, 100, flags, ts=t)


def ack(t):
    return B.pkt(0, 0, ACK, ts=t)


# (name, input packets, expected output: (time, segments) per packet written)
CASES = [
    # the tester's case: a pure ACK stamped 5 s before the packet before it
    # (a PSH segment, passed: nothing held) keeps its time, so does the next
    ("ack_5s_back",
     [seg(0, T + 10 * S, ACK | PSH), ack(T + 5 * S), ack(T + 7 * S)],
     [(T + 10 * S, 1), (T + 5 * S, 1), (T + 7 * S, 1)]),
    # passed while an aggregate is held, after a step back: own time; the
    # aggregate is then stamped at its completion (the PSH segment)
    ("pass_back_while_held",
     [ack(T + 100 * US), seg(0, T + 101 * US), seg(1, T + 102 * US), ack(T + 40 * US),
      ack(T + 41 * US), seg(2, T + 103 * US, ACK | PSH)],
     [(T + 100 * US, 1), (T + 40 * US, 1), (T + 41 * US, 1), (T + 103 * US, 3)]),
    # an aggregate completed at a time before the latest written is stamped
    # with that time (never earlier than any packet written before it), a
    # pass in between keeps its own; the single held at the end too
    ("aggregate_clamped_pass_not",
     [ack(T + 200 * US), seg(0, T + 150 * US), seg(1, T + 151 * US, ACK | PSH),
      ack(T + 152 * US), seg(2, T + 153 * US)],
     [(T + 200 * US, 1), (T + 200 * US, 2), (T + 152 * US, 1), (T + 200 * US, 1)]),
    # a pass earlier than the one before it does not lower the bound for an
    # aggregate completed after it
    ("bound_is_latest_written",
     [ack(T + 300 * US), ack(T + 100 * US), seg(0, T + 110 * US),
      seg(1, T + 120 * US, ACK | PSH)],
     [(T + 300 * US, 1), (T + 100 * US, 1), (T + 300 * US, 2)]),
    # monotonic input: the rule changes nothing
    ("monotonic",
     [seg(0, T + 1 * US), ack(T + 2 * US), seg(1, T + 3 * US), seg(2, T + 4 * US, ACK | PSH),
      ack(T + 5 * US)],
     [(T + 2 * US, 1), (T + 4 * US, 3), (T + 5 * US, 1)]),
]
IDS = [c[0] for c in CASES]


def _segments(p):
    """Payload bytes / 100 (this file's segments carry 100 bytes each)."""
    return max(1, (len(p.data) - 54) // 100)


def _got(out):
    return [(p.ts, _segments(p)) for p in out if type(p) is Packet]


def _pcap_bytes(pkts):
    f = io.BytesIO()
    w = PcapWriter(f, nanosecond=True)
    w.write_batch([Section("<"), Interface(1, 262144, 9)] + list(pkts))
    w.close()
    return f.getvalue()


def _pcapng_bytes(sections):
    f = io.BytesIO()
    w = PcapngWriter(f)
    evs = []
    for pkts in sections:
        evs += [Section("<"), Interface(1, 262144, 9)] + list(pkts)
    w.write_batch(evs)
    w.close()
    return f.getvalue()


ENGINES = {"general": dict(compiled=False),
           "budget": dict(napi_budget=64), "annotated": dict(annotate=True)}


@pytest.mark.parametrize("kind", sorted(ENGINES))
@pytest.mark.parametrize("name,pkts,want", CASES, ids=IDS)
def test_engine_process(name, pkts, want, kind):
    eng = GROEngine(GROConfig(**ENGINES[kind]))
    assert _got(eng.process([Section(), Interface(1, 262144, 9)] + pkts)) == want


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("name,pkts,want", CASES, ids=IDS)
def test_pcap_pipeline(name, pkts, want, compiled):
    # pcap chunks: the compiled core (pcap output of the same format), or
    # the reference path
    f = io.BytesIO()
    calls = _through(PcapReader(io.BytesIO(_pcap_bytes(pkts))), PcapWriter(f), compiled)
    assert _got(PcapReader(io.BytesIO(f.getvalue()))) == want
    assert bool(calls) == (compiled and cfast.available())


def _through(reader, writer, compiled):
    """Run reader through a GRO engine into writer (closed after); returns
    the interfaces of the chunks the compiled loop was given."""
    calls = []
    orig = cfast.CEngine.run

    def counting(self, eng, lb, start=0):
        calls.append(getattr(lb, "iface", 0))
        return orig(self, eng, lb, start)

    eng = GROEngine(GROConfig(annotate=False, compiled=compiled))
    cfast.CEngine.run = counting
    try:
        pipeline.run(reader, writer, eng.process)
        writer.close()
    finally:
        cfast.CEngine.run = orig
    return calls


def _cli(tmp_path, data, ext, *args, no_c=False):
    src = tmp_path / f"in.{ext}"
    src.write_bytes(data)
    outs = {}
    for fmt in ("pcap", "pcapng"):
        dst = tmp_path / f"out-{fmt}"
        run_cli("merge", "-q", "-F", fmt, *args, src, dst, check=0, no_c=no_c)
        outs[fmt] = _got(open_reader(dst))
    return outs


@pytest.mark.parametrize("no_c", [False, True])
@pytest.mark.parametrize("name,pkts,want", CASES, ids=IDS)
def test_cli_merge_pcap(name, pkts, want, no_c, tmp_path):
    outs = _cli(tmp_path, _pcap_bytes(pkts), "pcap", no_c=no_c)
    assert outs == {"pcap": want, "pcapng": want}


# two pcapng Sections, the second's times 5 s before the first's: each
# Section starts afresh (its packets are not held back to the first's times)
SECTIONS = [
    [ack(T + 10 * S), seg(0, T + 10 * S + 1 * US), seg(1, T + 10 * S + 2 * US)],
    [ack(T + 5 * S), seg(0, T + 5 * S + 1 * US), seg(1, T + 5 * S + 2 * US, ACK | PSH),
     seg(2, T + 5 * S + 3 * US)],
]
# the first Section's aggregate is completed at its end (its last packet's
# time), the second's held single at the end of input
SECTIONS_WANT = [(T + 10 * S, 1), (T + 10 * S + 2 * US, 2),
                 (T + 5 * S, 1), (T + 5 * S + 2 * US, 2), (T + 5 * S + 3 * US, 1)]


@pytest.mark.parametrize("kind", sorted(ENGINES))
def test_sections_engine(kind):
    eng = GROEngine(GROConfig(**ENGINES[kind]))
    evs = []
    for pkts in SECTIONS:
        evs += [Section(), Interface(1, 262144, 9)] + pkts
    out = list(eng.process(evs))
    assert _got(out) == SECTIONS_WANT
    assert sum(type(e) is Section for e in out) == 2
    assert eng.stats.to_dict()["flush_reasons"]["section_end"] == 1


@pytest.mark.parametrize("no_c", [False, True])
def test_sections_cli_merge(no_c, tmp_path):
    outs = _cli(tmp_path, _pcapng_bytes(SECTIONS), "pcapng", no_c=no_c)
    assert outs == {"pcap": SECTIONS_WANT, "pcapng": SECTIONS_WANT}


def test_gso_forward_keeps_passed_times(tmp_path):
    # merge --gso: the forwarder sends a passed packet at its own time too
    pkts = CASES[1][1]
    outs = _cli(tmp_path, _pcap_bytes(pkts), "pcap", "--gso")
    # the aggregate of 3 comes out as its 3 segments, at its completion time
    want = [(T + 100 * US, 1), (T + 40 * US, 1), (T + 41 * US, 1)] + [(T + 103 * US, 1)] * 3
    assert outs == {"pcap": want, "pcapng": want}


# ---------------------------------------------------------------------------
# interfaces of different timestamp resolutions (pcapng): interface 0 counts
# in ms (if_tsresol 3), interface 1 in ns.  A held packet of interface 0
# completed at interface 1's time (the poll ended by its packet) is written
# on interface 0's tick at or before that time, as the input's own records
# of that interface are: it reads back earlier than the packet before it, by
# less than one tick.  Stamping it on the next tick instead (tried in
# session 13) moved the jump onto the packets after it, by up to a whole
# tick (a 1 s interface: ~1 s back), which is worse.

MS = 10**6


def _on(p, iface):
    return Packet(p.ts, p.data, p.orig_len, iface, p.linktype)


def _mixed_pcapng(res, pkts):
    f = io.BytesIO()
    w = PcapngWriter(f)
    w.write_batch([Section("<"), Interface(1, 262144, res), Interface(1, 262144, 9)] + pkts)
    w.close()
    return f.getvalue()


@pytest.mark.parametrize("no_c", [False, True], ids=["compiled", "reference"])
def test_mixed_resolutions_coarse_aggregate_on_its_tick(no_c, tmp_path):
    pkts = [_on(seg(0, T + MS), 0), _on(seg(1, T + MS), 0), _on(seg(2, T + MS), 0),
            _on(ack(T + MS + 456_789), 1), _on(seg(3, T + 20 * MS), 0)]
    src, dst = tmp_path / "in.pcapng", tmp_path / "out.pcapng"
    src.write_bytes(_mixed_pcapng(3, pkts))
    run_cli("merge", "-q", src, dst, check=0, no_c=no_c)
    got = [(p.iface, p.ts, _segments(p)) for p in open_reader(dst) if type(p) is Packet]
    assert got == [(1, T + MS + 456_789, 1), (0, T + MS, 3), (0, T + 20 * MS, 1)]
