"""The packets GRO passes up unchanged (ARP, ICMP, fragments, IP options,
bad checksums, cut headers, the L3 flush...) go through the compiled core
itself, not the reference path (issue 16): interleaved with bulk flows
whose aggregates are held, under every configuration the core models,
the core takes every record (``GROEngine.py_records == 0``) and writes
what the reference path writes, byte for byte, with the same statistics
(pcap output, and annotated pcapng: the passed packets that overtake held
ones carry their position).  Also in the core since issue 16 and tested
here the same way: segments cut by a snaplen (and a cut aggregate handed
over mid-way), pcapng EPBs with options into classic pcap, a real capture
with ARP and ICMP (root: taken on a veth between the test's namespaces),
and traffic with mutated headers (whatever is taken, the reference's
output).
"""

import io
import random
import subprocess
import sys
import time

import pytest

from pcapgro.capture.pcap import PcapReader, PcapWriter
from pcapgro.capture.pcapng import PcapngWriter
from pcapgro.gro import cfast
from pcapgro.record import Packet

from capture_helpers import merged_bytes
from pktbuild import ACK, Flow, arp_frame, frag6
from test_live import ROOT_OK, netns  # noqa: F401 (the namespaces fixture)
from test_gro_cfast import Handed
from test_rule_list import _poke, _write

pytestmark = pytest.mark.skipif(not cfast.available(),
                                reason="compiled extension pcapgro._native not built")

US = 1000
T0 = 1_700_000_000 * 10**9


def _arp(f, seq, k):
    d = arp_frame()
    return Packet(0, d, len(d))


# what a segment of flow f at sequence offset seq becomes: a packet the
# reference passes before flow matching, or one that sets the L3 flush
SPECIALS = [
    _arp,
    lambda f, seq, k: Packet(0, arp_frame()[:10], len(arp_frame())),        # cut: not_ip
    lambda f, seq, k: _poke(f.pkt(seq, 100), 23, b"\x01"),                  # ICMP: no_handler
    lambda f, seq, k: f.pkt(seq, 100, ip_options=b"\x01\x01\x01\x00"),
    lambda f, seq, k: f.pkt(seq, 100, mf=True),
    lambda f, seq, k: f.pkt(seq, 100, frag_off=8),
    lambda f, seq, k: f.pkt(seq, 100, ip_csum="bad"),
    lambda f, seq, k: f.pkt(seq, 100, csum="bad"),
    lambda f, seq, k: f.pkt(seq, 100, doff=4),
    lambda f, seq, k: f.pkt(seq, 100, snaplen=30),                          # truncated
    lambda f, seq, k: f.pkt(seq, 100, snaplen=14 + 20 + 12),                # TCP cut
    lambda f, seq, k: f.pkt(seq, 1000, evil=True),                          # L3 flush
    lambda f, seq, k: f.pkt(seq, 10, pad_to=60),                            # padding
    lambda f, seq, k: f.pkt(seq, 1000, tot_len=900),
    lambda f, seq, k: f.pkt(seq, 0, pad_to=60),                             # pure ACK, padded
    lambda f, seq, k: Flow(6).pkt(0, 100, exthdrs=[frag6()]),
    lambda f, seq, k: _poke(Flow(6, exthdrs=[(60, b"\0" * 6)]).pkt(0, 100), 54, b"\x32",
                            ip_fix=False),                                  # ext_header
    lambda f, seq, k: Flow(6).pkt(0, 100, snaplen=14 + 30),
    lambda f, seq, k: _poke(Flow(4, sport=99).udp(100), 40, b"\0\0", ip_fix=False),
    lambda f, seq, k: _poke(Flow(4, sport=98).udp(100), 40, b"\x12\x34", ip_fix=False),
    lambda f, seq, k: Flow(4, sport=97).udp(100, pad_to=300),              # udp_length
    lambda f, seq, k: Flow(4, sport=96).udp(100, evil=True),
]


def _flows():
    """Three IPv4 bulk TCP flows and one IPv6 (as [Flow, next seq]) and a
    UDP flow: the traffic of :func:`mixed` and :func:`_cut_traffic`."""
    flows = [[Flow(4, sport=1000 + i, ipid="inc"), 0] for i in range(3)]
    flows.append([Flow(6, sport=2000), 0])
    return flows, Flow(4, sport=96, ipid="inc")


def mixed(seed, n=600, p=0.12):
    """Bulk TCP flows (IPv4 and IPv6) and a UDP flow, 10 us apart with now
    and then a poll gap, a share ``p`` of the packets one of SPECIALS
    (built on a flow whose aggregate is likely held)."""
    rnd = random.Random(seed)
    flows, udp = _flows()
    out = []
    ts = T0
    for k in range(n):
        ts += 10 * US if rnd.random() > 0.01 else 5_000_000
        fl = rnd.choice(flows)
        f, seq = fl
        if rnd.random() < p:
            pkt = rnd.choice(SPECIALS)(f if f.family == 4 else flows[0][0],
                                       seq if f.family == 4 else flows[0][1], k)
        elif rnd.random() < 0.15:
            pkt = udp.udp(rnd.choice([100, 100, 100, 60]))
        else:
            pkt = f.pkt(seq, 1000, ACK)
            fl[1] += 1000
        out.append(Packet(ts, pkt.data, pkt.orig_len, pkt.iface, pkt.linktype))
    return out


def _merge(pkts, compiled, annotate, **cfg):
    """(output bytes, stats, GROEngine) of merge over ``pkts`` written as a
    classic pcap; to pcap, or annotated pcapng."""
    src = io.BytesIO()
    _write(pkts, src)
    out, eng = merged_bytes(PcapReader(io.BytesIO(src.getvalue())),
                            PcapngWriter if annotate else PcapWriter, annotate=annotate,
                            compiled=compiled, **cfg)
    return out, eng.stats.to_dict(), eng


CONFIGS = [dict(), dict(verify_csum=False), dict(csum="kernel"), dict(udp="gro"),
           dict(fraglist=True), dict(fraglist=True, udp="gro", verify_csum=False),
           dict(napi_budget=5), dict(gro_flush_timeout=20 * US, hz=1000),
           dict(hash="none", gro_max_size=3000)]


@pytest.mark.parametrize("annotate", [False, True])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
                         or "default")
@pytest.mark.parametrize("seed", [1, 2])
def test_passes_stay_in_the_compiled_core(seed, cfg, annotate):
    pkts = mixed(seed)
    ref, ref_st, _ = _merge(pkts, False, annotate, **cfg)
    got, got_st, eng = _merge(pkts, True, annotate, **cfg)
    # only the segments cut by a snaplen (and whatever the reference path
    # then takes up to the next poll start) are handed over
    cut = [p for p in pkts if len(p.data) < p.orig_len and len(p.data) >= 14 + 20 + 20
           and p.data[12:14] == b"\x08\x00"]
    if not cut:
        assert eng.py_records == 0
    assert got_st == ref_st
    assert got == ref
    passed = ref_st["pass_reasons"]
    assert passed["not_ip"] and passed["fragment"] and passed["truncated"]


@pytest.mark.parametrize("cfg", CONFIGS[:5])
def test_every_pass_without_a_hand_over(cfg):
    # SPECIALS but the cut TCP segment: the core takes every record
    specials = [s for k, s in enumerate(SPECIALS) if k != 10]
    rnd = random.Random(7)
    pkts = []
    flow = Flow(4, sport=1000, ipid="inc")
    ts = T0
    for k in range(400):
        ts += 10 * US
        if k % 4 == 3:
            p = rnd.choice(specials)(flow, 1000 * k, k)
        else:
            p = flow.pkt(1000 * k, 1000, ACK)
        pkts.append(Packet(ts, p.data, p.orig_len, p.iface, p.linktype))
    for annotate in (False, True):
        ref, ref_st, _ = _merge(pkts, False, annotate, **cfg)
        got, got_st, eng = _merge(pkts, True, annotate, **cfg)
        assert eng.py_records == 0
        assert (got, got_st) == (ref, ref_st)
        assert ref_st["aggregates"] > 0


# ------------------------------------------------- a real capture (root)

SERVER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.2", 5301)); s.listen(1); print("ready", flush=True)
c, _ = s.accept()
while c.recv(1 << 16):
    pass
"""

CLIENT = """
import socket
c = socket.create_connection(("10.77.0.2", 5301))
buf = bytes(1 << 16)
for _ in range(400):
    c.sendall(buf)
c.close()
"""

# ICMP echo requests (the peer answers them) while the transfer runs, and
# the neighbour cache flushed now and then: ARP requests and replies
PINGER = """
import socket, struct, subprocess, time
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
for i in range(200):
    b = struct.pack("!BBHHH", 8, 0, 0, 0x77, i) + bytes(56)
    t = sum(struct.unpack("!32H", b)); t = (t & 0xFFFF) + (t >> 16); t += t >> 16
    try:
        s.sendto(b[:2] + struct.pack("!H", ~t & 0xFFFF) + b[4:], ("10.77.0.2", 0))
    except OSError:
        pass            # no buffer space while the neighbour resolves
    if i % 40 == 20:
        subprocess.run(["ip", "neigh", "flush", "dev", "va"])
    time.sleep(0.002)
"""


@pytest.mark.root
@pytest.mark.skipif(not ROOT_OK, reason="needs root, ip (iproute2) and tcpdump")
def test_real_capture_with_arp_and_icmp_merges_in_c(netns, tmp_path):
    # a capture taken on a veth between two namespaces of this test (the
    # fixture of test_live.py): a TCP bulk transfer with ICMP echoes and
    # ARP interleaved merges without one hand-over, byte for byte as the
    # reference path merges it
    a, b = netns
    cap = tmp_path / "wire.pcap"
    ex = ("ip", "netns", "exec")
    srv = subprocess.Popen([*ex, b, sys.executable, "-c", SERVER], stdout=subprocess.PIPE)
    srv.stdout.readline()
    dump = subprocess.Popen([*ex, a, "tcpdump", "-i", "va", "-n", "-s", "0", "-U", "-w",
                             str(cap)], stderr=subprocess.DEVNULL)
    time.sleep(1)
    ping = subprocess.Popen([*ex, a, sys.executable, "-c", PINGER])
    subprocess.run([*ex, a, sys.executable, "-c", CLIENT], check=True, timeout=60)
    assert ping.wait(timeout=60) == 0
    srv.wait(timeout=60)
    time.sleep(0.5)
    dump.terminate()
    dump.wait(timeout=30)
    with open(cap, "rb") as f:
        pkts = [p for p in PcapReader(f) if type(p) is Packet]
    for annotate in (False, True):
        src = io.BytesIO()
        _write(pkts, src)
        outs = []
        for compiled in (True, False):
            out, eng = merged_bytes(PcapReader(io.BytesIO(src.getvalue())),
                                    PcapngWriter if annotate else PcapWriter,
                                    annotate=annotate, compiled=compiled)
            outs.append((out, eng.stats.to_dict(), eng))
        (got, got_st, eng), (ref, ref_st, _) = outs
        assert eng.py_records == 0
        assert (got, got_st) == (ref, ref_st)
        passed = ref_st["pass_reasons"]
        # (echoes sent while a flushed neighbour entry resolves may be dropped)
        assert passed.get("not_ip", 0) >= 2 and passed.get("no_handler", 0) >= 20
        assert ref_st["aggregates"] > 100


# ---------------------------------------- segments cut by a snaplen



def _cut_traffic(seed, snap, n=500):
    """Bulk TCP (IPv4, IPv6) and UDP flows, some packets cut to ``snap``
    bytes (all when ``snap`` is an int; else a share of them at 60..200)."""
    rnd = random.Random(seed)
    flows, udp = _flows()
    out = []
    ts = T0
    for k in range(n):
        ts += 10 * US if rnd.random() > 0.02 else 5_000_000
        if rnd.random() < 0.15:
            p = udp.udp(rnd.choice([300, 300, 300, 100]))
        else:
            fl = rnd.choice(flows)
            p = fl[0].pkt(fl[1], 1000, ACK)
            fl[1] += 1000
        cut = snap if isinstance(snap, int) else (rnd.choice([60, 80, 120, 200])
                                                  if rnd.random() < 0.1 else None)
        data = p.data[:cut] if cut else p.data
        out.append(Packet(ts, data, p.orig_len, p.iface, p.linktype))
    return out


@pytest.mark.parametrize("annotate", [False, True])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
                         or "default")
@pytest.mark.parametrize("snap", [96, "some"])
def test_snaplen_cut_segments_in_the_compiled_core(snap, cfg, annotate):
    # a capture taken with a snaplen (every packet cut to 96 bytes), or
    # with some packets cut: lengths from the original length, checksums
    # not verified (skipped_truncated), an aggregate keeps the payload up
    # to its first cut segment and the seed checksum -- all in C now
    pkts = _cut_traffic(3, snap)
    ref, ref_st, _ = _merge(pkts, False, annotate, **cfg)
    got, got_st, eng = _merge(pkts, True, annotate, **cfg)
    assert eng.py_records == 0
    assert got_st == ref_st
    assert got == ref
    assert ref_st["snaplen"]["aggregates"] > 0


@pytest.mark.parametrize("annotate", [False, True])
@pytest.mark.parametrize("cfg", [dict(), dict(verify_csum=False), dict(fraglist=True),
                                 dict(csum="kernel")])
@pytest.mark.parametrize("where", ["head", "tail", "tail_then_more"])
def test_cut_aggregate_handed_over(where, cfg, annotate):
    # the core holds an aggregate with a cut segment when a frame it does
    # not take arrives (test_gro_cfast.Handed): the reference path goes on
    # with it (payload up to the cut, later payload left out and counted)
    f = Flow(4, ipid="inc")
    pkts = []
    ts = T0
    for k in range(8):
        p = f.pkt(k * 1000, 1000, ACK)
        cut = {"head": k == 0, "tail": k == 3, "tail_then_more": k == 2}[where]
        pkts.append(Packet(ts, p.data[:100] if cut else p.data, p.orig_len))
        ts += 10 * US
        if k == 4:
            q = Handed(sport=5).pkt(0, 100, ACK)
            pkts.append(Packet(ts, q.data, q.orig_len))
            ts += 10 * US
    ref, ref_st, _ = _merge(pkts, False, annotate, **cfg)
    got, got_st, eng = _merge(pkts, True, annotate, **cfg)
    assert eng.py_records >= 1
    assert (got, got_st) == (ref, ref_st)
    assert ref_st["snaplen"]["aggregates"] == 1
    if where != "tail":
        assert ref_st["snaplen"]["captured_bytes_left_out"] > 0


# ------------------------------------------- pcapng EPBs with options

def _ng_input(pkts, seed):
    """``pkts`` as a pcapng section, a third of the EPBs with options (a
    comment, epb_flags, a custom option)."""
    from pcapgro.record import Interface, PacketMeta, Section
    rnd = random.Random(seed)
    evs = [Section("<", [], 1, 0), Interface(1, 262144, 9, 0, [])]
    for p in pkts:
        meta = None
        if rnd.random() < 0.33:
            meta = rnd.choice([PacketMeta(comments=["a comment"]), PacketMeta(flags=0x1),
                               PacketMeta(comments=["x", "y"], flags=2),
                               PacketMeta(options=[(2988, b"\x00\x00\x7e\xd9abc")])])
        evs.append(Packet(p.ts, p.data, p.orig_len, 0, 1, meta))
    f = io.BytesIO()
    w = PcapngWriter(f)
    w.write_batch(evs)
    w.close()
    return f.getvalue()


@pytest.mark.parametrize("cfg", CONFIGS[:6], ids=lambda c: ",".join(f"{k}={v}"
                                                                    for k, v in c.items())
                         or "default")
@pytest.mark.parametrize("to_pcapng", [False, True])
def test_epbs_with_options(cfg, to_pcapng):
    # EPBs with options (comments, flags, custom) among option-less ones:
    # into classic pcap (which holds none of them) and into pcapng (their
    # options as the reference writes them) the core takes them
    from pcapgro.capture.pcapng import PcapngReader
    pkts = mixed(5, n=400) + _cut_traffic(6, "some", n=200)
    pkts.sort(key=lambda p: p.ts)
    data = _ng_input(pkts, 5)
    outs = []
    for compiled in (False, True):
        out, eng = merged_bytes(PcapngReader(io.BytesIO(data)),
                                PcapngWriter if to_pcapng else PcapWriter,
                                annotate=to_pcapng, compiled=compiled, **cfg)
        outs.append((out, eng.stats.to_dict(), eng.py_records))
    (ref, ref_st, _), (got, got_st, py) = outs
    assert (got, got_st) == (ref, ref_st)
    assert py == 0


# ------------------------------------------------------ mutated traffic

@pytest.mark.parametrize("seed", range(12))
def test_mutated_headers_same_as_reference(seed):
    # SPECIALS' traffic with random header bytes changed, frames cut and
    # original lengths changed: whatever the compiled core takes or hands
    # over, the output and statistics are the reference's
    rnd = random.Random(seed)
    pkts = []
    for p in mixed(seed, n=300, p=0.1):
        d = bytearray(p.data)
        if rnd.random() < 0.3:
            for _ in range(rnd.randint(1, 3)):
                i = rnd.randrange(min(len(d), 90))
                d[i] = rnd.randrange(256) if rnd.random() < 0.5 else d[i] ^ 1 << rnd.randrange(8)
        orig = p.orig_len
        if rnd.random() < 0.1:
            d = d[:rnd.randrange(len(d) + 1)]
        if rnd.random() < 0.03:
            orig = len(d) + rnd.randrange(3)
        pkts.append(Packet(p.ts, bytes(d), max(orig, len(d)), p.iface, p.linktype))
    cfg = CONFIGS[seed % len(CONFIGS)]
    annotate = bool(seed & 1)
    ref, ref_st, _ = _merge(pkts, False, annotate, **cfg)
    got, got_st, _ = _merge(pkts, True, annotate, **cfg)
    assert (got, got_st) == (ref, ref_st)
