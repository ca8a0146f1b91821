"""The work-driven NAPI poll model (issue 21, --poll-model work)."""

from pathlib import Path

from pcapgro.agreement import measure, merge_packets
from pcapgro.gro import GROConfig
from pcapgro.gro.flush import Flush
from pcapgro.gro.napi import PollClock

from test_agreement import _segs

NAPI = Path(__file__).parent / "captures" / "napi"
US = 1000


def clock(**kw):
    base = dict(poll_wake_ns=2 * US, poll_rx_ns=2 * US, deliver_ns=10 * US,
                deliver_seg_ns=1 * US)
    base.update(kw)
    return PollClock(GROConfig(**base))


def test_poll_takes_what_arrived_and_ends_on_empty_queue():
    # poll starts at 2 µs, done with packet 0 at 4, 1 at 6, 2 at 8; 50 µs
    # finds the queue empty since 8: a new poll
    assert clock().ends([0, 1 * US, 2 * US, 50 * US]) == [(3, Flush.POLL_END)]


def test_packets_arriving_while_delivering_start_the_next_poll():
    # poll of packet 0: done at 4 µs, delivery until 4 + 10 + 1 = 15 µs;
    # 5 µs and 14 µs wait and are taken together from 15 µs
    c = clock()
    assert c.ends([0, 5 * US, 14 * US, 16 * US]) == [(1, Flush.POLL_END)]
    assert c.now == 15 * US + 3 * 2 * US


def test_budget_ends_a_poll():
    c = clock(napi_budget=2)
    assert c.ends([0, 1, 2]) == [(2, Flush.BUDGET)]


def test_state_carries_across_batches():
    c = clock()
    assert c.ends([0, 1 * US]) == []
    assert c.ends([2 * US, 50 * US]) == [(1, Flush.POLL_END)]


def test_segments_apart_longer_than_a_poll_are_not_merged():
    """Three TCP segments 1 µs apart merge in both models; 100 µs apart
    (longer than a poll of one packet at the default costs, 28 + 5 µs)
    only the gap model merges them."""
    segs = _segs(3)
    assert len(merge_packets(segs, poll_model="work")[0]) == 1
    for k, p in enumerate(segs):
        p.ts = 100 * US * k
    assert len(merge_packets(segs)[0]) == 1
    out, st = merge_packets(segs, poll_model="work")
    assert len(out) == 3
    assert st.flush[Flush.POLL_END] == 2


def test_udp_one_per_send_kernel_captures():
    """Kernel-made: one datagram per sendto 100 µs / 1 ms apart, each
    handed up alone; the work model gives exactly that, the gap model
    does not."""
    for name in ("udp-100us", "udp-1ms"):
        w, r = NAPI / f"{name}-wire.pcap", NAPI / f"{name}-gro.pcap"
        assert measure(w, r, udp="gro", poll_model="work").exact
        assert not measure(w, r, udp="gro").exact


def test_tcp_app_limited_kernel_capture():
    w, r = NAPI / "tcp-app-200B-100us-wire.pcap", NAPI / "tcp-app-200B-100us-gro.pcap"
    assert measure(w, r, poll_model="work").exact


# ---- issue 21 item 2: timing-made boundaries in the statistics

def test_gap_buckets():
    from pcapgro.gro.napi import gap_bucket, gap_label
    assert [gap_bucket(d) for d in (-5, 0, 999, 1000, 1999, 2000, 30 * US, 1023 * US,
                                    1024 * US, 10**9)] == [0, 0, 0, 1, 1, 2, 5, 10, 11, 11]
    assert [gap_label(k) for k in (0, 1, 5, 11)] == ["<1", "1-2", "16-32", ">=1024"]


def test_poll_ends_counted_with_their_gap():
    # three segments 100 µs apart: the work model ends two polls, each
    # after a gap of 64-128 µs; doubling or halving its costs still ends
    # them there
    segs = _segs(3)
    for k, p in enumerate(segs):
        p.ts = 100 * US * k
    _, st = merge_packets(segs, poll_model="work")
    pe = st.to_dict()["poll_ends"]
    assert pe == {"poll_end": 2, "budget": 0, "gaps_us": {"64-128": 2},
                  "would_move": {"x2": 0, "x0.5": 0}}
    for k, p in enumerate(segs):
        p.ts = 30 * US * k
    # the gap model at 40 µs: no poll end, but at 20 µs both gaps would
    # end one (while a segment is held)
    out, st = merge_packets(segs, poll_gap=40 * US)
    assert len(out) == 1
    assert st.to_dict()["poll_ends"] == {"poll_end": 0, "budget": 0, "gaps_us": {},
                                         "would_move": {"x2": 0, "x0.5": 2}}
    # at 25 µs: both end polls, and at 50 µs neither would
    _, st = merge_packets(segs, poll_gap=25 * US)
    assert st.to_dict()["poll_ends"]["would_move"] == {"x2": 2, "x0.5": 0}
    assert "poll ends:" in " ".join(st.table())


def test_budget_ends_counted():
    segs = _segs(6)
    _, st = merge_packets(segs, poll_model="work", napi_budget=2)
    assert st.to_dict()["poll_ends"]["budget"] == 2
    _, st = merge_packets(segs, napi_budget=2)
    assert st.to_dict()["poll_ends"]["budget"] == 2


def test_pcapng_annotation_names_why_each_aggregate_ended():
    # two polls of three segments (100 µs apart: the work model ends the
    # first at an empty queue), the last with PSH; compiled and reference
    # write the same comment
    import io
    import os
    from pcapgro.capture.pcapng import PcapngReader
    from pcapgro.forward import input_gso
    from pcapgro.jobs import merge
    from pcapgro.record import Packet
    from pcapgro.restore import recorded_gso_size
    from test_gro_cfast import _pcap
    segs = _segs(6)
    for k, p in enumerate(segs):
        p.ts = 10**15 + k * US + (100 * US if k >= 3 else 0)
    last = bytearray(segs[-1].data)
    last[14 + 20 + 13] |= 0x08                                     # PSH
    segs[-1] = Packet(segs[-1].ts, bytes(last), len(last))
    src = _pcap(segs)
    notes = []
    for no_c in ("", "1"):
        os.environ["PCAPGRO_NO_C"] = no_c
        try:
            b = io.BytesIO()
            merge(io.BytesIO(src), b, out_format="pcapng", poll_model="work",
                  no_verify_csum=True)
        finally:
            os.environ.pop("PCAPGRO_NO_C")
        out = [e for e in PcapngReader(io.BytesIO(b.getvalue())) if type(e) is Packet]
        notes.append([e.meta.comments[0] for e in out])
        assert [recorded_gso_size(e.meta) for e in out] == [100, 100]
        assert [input_gso(e.meta).gso_segs for e in out] == [3, 3]
    assert notes[0] == notes[1]
    assert [n.rsplit(", ", 1)[1] for n in notes[0]] == ["ended by poll_end", "ended by psh"]
