"""pcapng EPBs with options into pcapng output go through the compiled core
(issue 16), not the reference path: what a packet's options become is the
reference's (pcapgro/capture/pcapng.py parse_options and _packet_meta,
PcapngWriter._packet_meta; pcapgro/gro/annotate.py passed, single,
aggregate; pcapgro/restore.py encode_rows' ``f=`` and ``m=`` fields),
byte for byte, with the same statistics, and ``GROEngine.py_records ==
0``.

The rules, each built into the inputs below (input options -> output
options):

* a packet passed up, held alone or at the head of an aggregate keeps its
  options, rewritten as the writer lays out a PacketMeta: comments first,
  then the first 4-byte ``epb_flags``, then every other option in order
  (values as read, a second or odd-sized epb_flags among them), then
  opt_endofopt; the do-not-copy custom options (19372, 19373) and
  whatever follows opt_endofopt dropped, padding zeroed; an EPB whose
  options come to nothing (only opt_endofopt) is written without any;
* annotated: a packet passed up while packets are held, or one already
  carrying pcapgro's comments, and a packet held alone get their restore
  record after their own comments; an aggregate gets its head's comments,
  the aggregate comment, the restore record (``f=`` the head's flags,
  ``m=`` the later segments' options), epb_flags = the head's | TSO (bit
  11), the head's other options;
* an aggregate the core hands to the reference path mid-way (at an
  interface switch) carries its head's options and the ``m=`` entries of
  what the core merged (``Agg.metas0``).
"""

import io
import random
import struct

import pytest

from pcapgro.capture.pcap import PcapWriter
from pcapgro.capture.pcapng import PcapngReader, PcapngWriter
from pcapgro.gro import cfast
from pcapgro.record import Packet

from capture_helpers import merged_bytes
from pktbuild import ACK, Flow
from test_cfast_passes import CONFIGS, T0, US, _cut_traffic, mixed

pytestmark = pytest.mark.skipif(not cfast.available(),
                                reason="compiled extension pcapgro._native not built")


def _opt(bo, code, value, pad=b"\0\0\0"):
    """One pcapng option in byte order ``bo``, padded to 32 bits with
    bytes of ``pad``."""
    return struct.pack(bo + "HH", code, len(value)) + value + pad[:(-len(value)) & 3]


def _end(bo):
    return struct.pack(bo + "HH", 0, 0)


# option lists (functions of the byte order), each a rule's input
OPTIONS = [
    lambda bo: _opt(bo, 1, b"a comment") + _end(bo),
    lambda bo: _opt(bo, 2, struct.pack(bo + "I", 1)) + _end(bo),
    # flags before comments: written comments first
    lambda bo: (_opt(bo, 2, struct.pack(bo + "I", 2)) + _opt(bo, 1, b"x") + _opt(bo, 1, b"y")
                + _end(bo)),
    # a custom option (PEN 32473), copied as read
    lambda bo: _opt(bo, 2988, b"\x00\x00\x7e\xd9abc") + _end(bo),
    # do-not-copy custom options dropped
    lambda bo: (_opt(bo, 19372, b"\x00\x00\x7e\xd9zz") + _opt(bo, 1, b"kept")
                + _opt(bo, 19373, b"\x00\x00\x7e\xd9") + _end(bo)),
    lambda bo: (_opt(bo, 19372, b"\x00\x00\x7e\xd9zz") + _end(bo)),     # nothing left
    lambda bo: _end(bo),                                                # only the end
    # a second epb_flags and one of 2 bytes: other options
    lambda bo: (_opt(bo, 2, b"\x01\x02") + _opt(bo, 2, struct.pack(bo + "I", 0x10))
                + _opt(bo, 2, struct.pack(bo + "I", 0x20)) + _end(bo)),
    # comments that need percent-encoding in m= (not UTF-8, spaces, ';,:%')
    lambda bo: _opt(bo, 1, "héllo wörld;,:%/".encode() + b"\xff\xfe") + _opt(bo, 1, b"") + _end(bo),
    # what follows opt_endofopt is dropped; padding not zero
    lambda bo: (_opt(bo, 1, b"abcde", b"\xaa\xbb\xcc") + _end(bo)
                + _opt(bo, 1, b"after the end")),
    # no opt_endofopt at all
    lambda bo: _opt(bo, 1, b"no end") + _opt(bo, 3, b"\x02" + bytes(4)),
    # epb_hash, epb_dropcount, epb_packetid, epb_queue, epb_verdict
    lambda bo: (_opt(bo, 3, b"\x02\x01\x02\x03\x04") + _opt(bo, 4, struct.pack(bo + "Q", 7))
                + _opt(bo, 5, struct.pack(bo + "Q", 99)) + _opt(bo, 6, struct.pack(bo + "I", 3))
                + _opt(bo, 7, b"\x00\x01") + _end(bo)),
    # pcapgro's own comments: a packet merged before (annotate.passed)
    lambda bo: _opt(bo, 1, b"pcapgro: GRO aggregate (TCP) of 3 segments, gso_size 1000")
    + _end(bo),
    lambda bo: _opt(bo, 1, b"pcapgro-restore v1 i=5 t=17") + _end(bo),
    lambda bo: _opt(bo, 1, b"pcapgro: held by GRO 3 us") + _opt(bo, 2, b"\0\0\0\0") + _end(bo),
]


def _epb(bo, iface, ts, data, orig, opts):
    """An EPB (nanosecond interface) with the raw options ``opts``."""
    pad = (-len(data)) & 3
    bl = 32 + len(data) + pad + len(opts)
    return (struct.pack(bo + "IIIIIII", 6, bl, iface, ts >> 32, ts & 0xFFFFFFFF, len(data), orig)
            + data + b"\0" * pad + opts + struct.pack(bo + "I", bl))


def _pcapng(pkts, seed, bo="<", share=0.4, n_ifs=1, burst=50, only=None, ifaces=None):
    """``pkts`` as a pcapng section (``n_ifs`` nanosecond interfaces, the
    packets given to them in random bursts, or as ``ifaces`` says), a
    share of the EPBs with one of OPTIONS (``only``: that one)."""
    rnd = random.Random(seed)
    shb = struct.pack(bo + "IHHq", 0x1A2B3C4D, 1, 0, -1)
    out = [struct.pack(bo + "II", 0x0A0D0D0A, 28) + shb + struct.pack(bo + "I", 28)]
    idb = struct.pack(bo + "HHI", 1, 0, 262144) + _opt(bo, 9, b"\x09") + _end(bo)
    for _ in range(n_ifs):
        out.append(struct.pack(bo + "II", 1, 12 + len(idb)) + idb + struct.pack(bo + "I", 12 + len(idb)))
    iface = left = 0
    for k, p in enumerate(pkts):
        if ifaces is not None:
            iface, left = ifaces[k], 1
        elif left == 0:
            iface, left = rnd.randrange(n_ifs), rnd.randint(1, burst)
        left -= 1
        opts = b""
        if rnd.random() < share:
            opts = (OPTIONS[only] if only is not None else rnd.choice(OPTIONS))(bo)
        out.append(_epb(bo, iface, p.ts, p.data, p.orig_len, opts))
    return b"".join(out)


def _merge(data, compiled, annotate, writer=PcapngWriter, **cfg):
    """(output bytes, stats, py_records) of merge over pcapng ``data``."""
    out, eng = merged_bytes(PcapngReader(io.BytesIO(data)), writer, annotate=annotate,
                            compiled=compiled, **cfg)
    return out, eng.stats.to_dict(), eng.py_records


def _same(data, annotate, writer=PcapngWriter, **cfg):
    ref = _merge(data, False, annotate, writer, **cfg)
    got = _merge(data, True, annotate, writer, **cfg)
    assert got[2] == 0, "handed over to the reference path"
    assert got[1] == ref[1]
    assert got[0] == ref[0]
    return ref


def _traffic(seed):
    pkts = mixed(seed, n=400) + _cut_traffic(seed + 1, "some", n=200)
    pkts.sort(key=lambda p: p.ts)
    return pkts


@pytest.mark.parametrize("only", range(len(OPTIONS)))
@pytest.mark.parametrize("annotate", [False, True])
def test_each_option_rule(only, annotate):
    # one option list on half the packets of bulk flows with passes
    data = _pcapng(_traffic(only), only, share=0.5, only=only)
    out, st, _ = _same(data, annotate)
    assert st["aggregates"] > 0
    if only == 0:
        # the rule as the reference writes it: a comment kept on passed
        # packets and aggregate heads
        n = out.count(b"a comment")
        assert n > 0


@pytest.mark.parametrize("annotate", [False, True])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
                         or "default")
def test_options_under_every_configuration(cfg, annotate):
    data = _pcapng(_traffic(3), 3)
    _same(data, annotate, **cfg)


@pytest.mark.parametrize("bo,out_bo", [(">", None), (">", "<"), ("<", ">")])
@pytest.mark.parametrize("annotate", [False, True])
def test_byte_orders(bo, out_bo, annotate):
    # options read in one byte order and written in another: codes,
    # lengths and epb_flags turned, other values copied as read
    data = _pcapng(_traffic(4), 4, bo=bo)
    _same(data, annotate, writer=lambda f: PcapngWriter(f, byteorder=out_bo))


@pytest.mark.parametrize("annotate", [False, True])
def test_handed_over_at_interface_switches(annotate):
    # bulk flows on two interfaces in bursts of 500, a poll gap at each
    # switch: the core hands what it holds over there (it was laid out for
    # the other interface) and the reference path completes those
    # aggregates at the poll end, with their heads' options and the m=
    # entries of what the core merged into them
    fl = [Flow(4, src=f"10.0.0.{i + 1}", sport=1000 + i, ipid="inc") for i in range(3)]
    pkts = [fl[k % 3].pkt(k // 3 * 1000, 1000, ACK, ts=T0 + k * US + k // 500 * 3_000_000)
            for k in range(3000)]
    data = _pcapng(pkts, 9, share=0.6, n_ifs=2, ifaces=[k // 500 % 2 for k in range(3000)])
    released = []
    orig = cfast.CEngine.release

    def counting(self, eng):
        n = len(eng.flows)
        orig(self, eng)
        released.append(len(eng.flows) - n)

    cfast.CEngine.release = counting
    try:
        out, st, _ = _same(data, annotate)
    finally:
        cfast.CEngine.release = orig
    assert sum(released) >= 5 * 3
    assert st["aggregates"] > 40
    if annotate:
        assert b" m=" in out


def test_into_classic_pcap_still_taken():
    data = _pcapng(_traffic(5), 5)
    _same(data, False, writer=PcapWriter)


def test_output_options_as_the_rules_say():
    # the rules themselves, on one passed packet and one aggregate
    f = Flow(4, ipid="inc")
    bo = "<"
    opts = (_opt(bo, 2, struct.pack(bo + "I", 5)) + _opt(bo, 19372, b"\0\0\x7e\xd9")
            + _opt(bo, 2988, b"\0\0\x7e\xd9q") + _opt(bo, 1, b"c1") + _end(bo)
            + _opt(bo, 1, b"gone"))
    pkts = [f.pkt(k * 1000, 1000, ACK, ts=T0 + k * US) for k in range(3)]
    pkts.append(f.pkt(3000, 0, ACK, ts=T0 + 3 * US))          # a pure ACK: passed
    # every EPB with the same options
    plain = _pcapng(pkts, 0, share=0.0)
    head = plain[:len(plain) - sum(32 + len(p.data) + (-len(p.data) & 3) for p in pkts)]
    data = head + b"".join(_epb(bo, 0, p.ts, p.data, p.orig_len, opts) for p in pkts)
    out = _same(data, False)[0]
    evs = [e for e in PcapngReader(io.BytesIO(out)) if type(e) is Packet]
    assert len(evs) == 2                    # the aggregate of 3, the ACK
    for e in evs:
        assert e.meta.comments == ["c1"] and e.meta.flags == 5
        assert [(c, bytes(v)) for c, v in e.meta.options] == [(2988, b"\0\0\x7e\xd9q")]
    out = _same(data, True)[0]
    evs = [e for e in PcapngReader(io.BytesIO(out)) if type(e) is Packet]
    agg, ack = evs
    assert agg.meta.comments[0] == "c1"
    assert agg.meta.comments[1].startswith("pcapgro: GRO aggregate (TCP) of 3 segments")
    rec = agg.meta.comments[2]
    assert " f=5 h=" in rec and " m=1:f5,cc1,o2988.00007ed971;2:f5,cc1,o2988.00007ed971 k=" in rec
    assert agg.meta.flags == 5 | 1 << 11
    assert ack.meta.comments == ["c1"] and ack.meta.flags == 5
