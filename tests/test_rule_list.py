"""The rule list (pcapgro/gro/rules.py) drives one test per rule through
both implementations: the Python reference (general path, no fast path, no
compiled core) and the compiled core (a classic pcap file through
pipeline.run, as `pcapgro merge` runs it; where the compiled core does not
take a packet it hands over, and the result must still be the same).

Each case is built from the rule: a short packet sequence for which the
rule must fire (its reason is counted), and the two implementations must
give byte-identical output files and equal statistics.  A rule without a
case fails the test, so a new rule cannot be added untested; the compiled
core's reason codes must all be reasons of the list.
"""

import io
import tempfile

import pytest

from pcapgro import pipeline
from pcapgro.capture.pcap import PcapReader, PcapWriter
from pcapgro.gro import GROConfig, GROEngine, cfast
from pcapgro.gro.flush import Flush, Pass
from pcapgro.gro.rules import RULES
from pcapgro.record import Interface, Packet, Section

from pktbuild import ACK, CWR, FIN, PSH, Flow, arp_frame, frag6, ts_option
from tunnelbuild import Tunnel

T0 = 1_700_000_000 * 10**9
US = 1_000


def _bulk(f, n=3, plen=100, **kw):
    return [f.pkt(i * plen, plen, **kw) for i in range(n)]


def _udp(f, n=3, plen=100, **kw):
    return [f.udp(plen, **kw) for _ in range(n)]


def _poke(pkt, at, value, ip_fix=True):
    """``pkt`` with bytes ``value`` written at offset ``at`` (the IPv4
    header checksum of an Ethernet/IPv4 frame recomputed when ``ip_fix``)."""
    d = bytearray(pkt.data)
    d[at:at + len(value)] = value
    if ip_fix and d[12:14] == b"\x08\x00":
        d[24:26] = b"\0\0"
        s = sum(int.from_bytes(d[14 + i:16 + i], "big") for i in range(0, 20, 2))
        while s > 0xFFFF:
            s = (s & 0xFFFF) + (s >> 16)
        d[24:26] = (~s & 0xFFFF).to_bytes(2, "big")
    return Packet(pkt.ts, bytes(d), pkt.orig_len, pkt.iface, pkt.linktype, pkt.meta)


def _udp_seed(pkt):
    """A UDP/IPv4 datagram whose checksum field holds the pseudo-header
    seed (a sender's CHECKSUM_PARTIAL)."""
    d = pkt.data
    s = sum(int.from_bytes(d[26 + i:28 + i], "big") for i in range(0, 8, 2)) + 17 \
        + int.from_bytes(d[38:40], "big")
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return _poke(pkt, 40, s.to_bytes(2, "big"), ip_fix=False)


def _cut(pkt, n):
    return Packet(pkt.ts, pkt.data[:n], pkt.orig_len, pkt.iface, pkt.linktype)


def _two(f, second, first=None):
    """The flow's first segment (100 bytes), then ``second`` (kwargs or a
    Packet)."""
    p0 = first if first is not None else f.pkt(0, 100)
    p1 = second if isinstance(second, Packet) else f.pkt(100, 100, **second)
    return [p0, p1]


F4 = lambda **kw: Flow(4, **kw)     # noqa: E731
VX = dict(vxlan_ports=frozenset({4789}), geneve_ports=frozenset({6081}))


def _tun(kind, n=3, plen=100, inner=None, each=None, **tkw):
    """``n`` segments of an inner flow inside a ``kind`` tunnel; ``each(i)``
    gives the outer overrides of segment i."""
    t = Tunnel(kind, **tkw)
    f = inner or Flow(4, ipid="inc")
    return [t.wrap(f.pkt(i * plen, plen), **(each(i) if each else {})) for i in range(n)]
def _outer_flush_bad_inner():
    """Three IPIP segments; the third's outer header has the evil bit (an
    L3 flush) and its inner TCP checksum is bad: the kernel does not verify
    it, so the packet completes the held aggregate instead of passing it."""
    t, f = Tunnel("ipip"), Flow(4, ipid="inc")
    ps = [t.wrap(f.pkt(i * 100, 100, **({"csum": 0x1234} if i == 2 else {}))) for i in range(3)]
    ps[2] = _poke(ps[2], 20, bytes([ps[2].data[20] | 0x80]))
    return ps


GAP = "gap"                         # a marker: the next packet comes after a poll gap

CASES = {
    "engine.not_ip": lambda: ([Packet(0, arp_frame(), len(arp_frame()))], {}),
    "engine.no_vlan_handler": lambda: (_bulk(F4(vlans=[(0x8100, 5)])), dict(vlan_gro=False)),
    "ipv4.no_handler": lambda: ([_poke(F4().pkt(0, 100), 23, b"\x32")], {}),
    "ipv4.options": lambda: (_bulk(F4(), ip_options=b"\x01\x01\x01\x00"), {}),
    "ipv4.fragment": lambda: (_bulk(F4(), mf=True), {}),
    "ipv4.bad_header_csum": lambda: (_bulk(F4(), ip_csum="bad"), {}),
    "ipv4.truncated": lambda: ([_cut(F4().pkt(0, 100), 24)], {}),
    # Destination Options whose next header (ESP, 50) has no GRO handler
    "ipv6.ext_header": lambda: ([_poke(Flow(6, exthdrs=[(60, b"\0" * 6)]).pkt(0, 100), 54,
                                       b"\x32", ip_fix=False)], {}),
    "ipv6.fragment": lambda: (_bulk(Flow(6, exthdrs=[frag6()])), {}),
    "ipv4.l3_flush": lambda: ([F4().pkt(0, 100, evil=True)], {}),
    "csum.bad_tcp": lambda: (_bulk(F4(), csum="bad"), {}),
    "csum.bad_udp": lambda: ([_poke(F4().udp(100), 40, b"\x12\x34", ip_fix=False)],
                             dict(udp="gro")),
    "tcp.bad_header": lambda: ([F4().pkt(0, 100, doff=4)], {}),
    "tcp.pure_ack_passed": lambda: ([F4().pkt(0, 0)], {}),
    "tcp.flags_passed": lambda: ([F4().pkt(0, 100, ACK | PSH)], {}),
    "tcp.cwr": lambda: (_two(F4(), dict(flags=ACK | CWR)), {}),
    "tcp.flags_changed": lambda: (_two(F4(), dict(flags=ACK | 0x40)), {}),
    "tcp.header_len_changed": lambda: (_two(F4(), F4(options=ts_option(1, 2)).pkt(100, 100)),
                                       {}),
    "tcp.window_changed": lambda: (_two(F4(), dict(window=9)), {}),
    "tcp.ack_changed": lambda: (_two(F4(), dict(ack_off=5)), {}),
    "tcp.options_changed": lambda: (_two(F4(), F4(options=ts_option(3, 2)).pkt(100, 100),
                                         F4(options=ts_option(1, 2)).pkt(0, 100)), {}),
    "network.ttl_changed": lambda: (_two(F4(), dict(ttl=3)), {}),
    "network.tos_changed": lambda: (_two(F4(), dict(tos=4)), {}),
    "network.df_changed": lambda: (_two(F4(), dict(df=False)), {}),
    "network.ip_id": lambda: (_bulk(F4(ipid="inc"), 2) + [F4().pkt(200, 100, ident=77)], {}),
    "tcp.mss_exceeded": lambda: ([F4().pkt(0, 100), F4().pkt(100, 101)], {}),
    "tcp.pure_ack": lambda: ([F4().pkt(0, 100), F4().pkt(100, 0)], {}),
    "tcp.seq_gap": lambda: ([F4().pkt(0, 100), F4().pkt(300, 100)], {}),
    "tcp.l3_flush": lambda: (_two(F4(), dict(evil=True)), {}),
    "tcp.size_limit": lambda: (_bulk(F4(), 4), dict(gro_max_size=300)),
    "tcp.psh": lambda: (_two(F4(), dict(flags=ACK | PSH)), {}),
    "tcp.fin": lambda: (_two(F4(), dict(flags=ACK | FIN)), {}),
    "tcp.short_segment": lambda: ([F4().pkt(0, 100), F4().pkt(100, 50)], {}),
    "tcp.fraglist_flags": lambda: (_two(F4(), dict(flags=ACK | PSH)), dict(fraglist=True)),
    "tcp.fraglist_csum_state": lambda: (_two(F4(), dict(csum="seed")),
                                        dict(fraglist=True, verify_csum=True)),
    "tcp.fraglist_segment_limit": lambda: (_bulk(F4(), 66), dict(fraglist=True)),
    "tcp.fraglist_size_limit": lambda: (_bulk(F4(), 50, 1400), dict(fraglist=True)),
    "udp.no_gro": lambda: ([F4().udp(100)], {}),
    "udp.zero_csum": lambda: ([_poke(F4().udp(100), 40, b"\0\0", ip_fix=False)],
                              dict(udp="gro")),
    "udp.length": lambda: ([F4().udp(100, pad_to=300)], dict(udp="gro")),
    "udp.truncated": lambda: ([_cut(F4().udp(100), 38)], dict(udp="gro")),
    "udp.csum_state": lambda: ([F4().udp(100), _udp_seed(F4().udp(100))], dict(fraglist=True)),
    "udp.longer_datagram": lambda: ([F4().udp(100), F4().udp(101)], dict(udp="gro")),
    "udp.short_datagram": lambda: ([F4().udp(100), F4().udp(50)], dict(udp="gro")),
    "udp.segment_limit": lambda: (_udp(F4(), 66), dict(udp="gro")),
    "udp.size_limit": lambda: (_udp(F4(), 4), dict(udp="gro", gro_max_size=300)),
    "udp.l3_flush": lambda: ([F4().udp(100), F4().udp(100, evil=True)], dict(udp="gro")),
    "tunnel.nested": lambda: ([Tunnel("ipip").wrap(p) for p in _tun("vxlan")], VX),
    "tunnel.inner_no_handler": lambda: ([Tunnel("vxlan").wrap(Packet(0, arp_frame(),
                                                                      len(arp_frame())))], VX),
    "tunnel.outer_ttl_changed": lambda: (_tun("gre", each=lambda i: {"ttl": 9 + (i > 1)}), {}),
    "tunnel.outer_tos_changed": lambda: (_tun("ipip", each=lambda i: {"tos": 4 * (i > 1)}), {}),
    "tunnel.outer_df_changed": lambda: (_tun("vxlan", each=lambda i: {"df": i > 1}), VX),
    "tunnel.outer_ip_id": lambda: (_tun("vxlan", each=lambda i: {"ident": 5 + 3 * i}), VX),
    "tunnel.outer_flush_inner_csum": lambda: (_outer_flush_bad_inner(), {}),
    "vxlan.bad_outer_udp_csum": lambda: (_tun("vxlan", udp_csum="valid",
                                              each=lambda i: {"csum": 0x1234 + i}), VX),
    "vxlan.truncated": lambda: ([_cut(p, 14 + 20 + 8 + 4) for p in _tun("vxlan")], VX),
    "geneve.header": lambda: (_tun("geneve", geneve_ver=1), VX),
    "gre.flags": lambda: (_tun("gre", gre_flags=0x1000), {}),
    "gre.bad_csum": lambda: (_tun("gre", gre_csum=True, each=lambda i: {"csum": 0x1234 + i}),
                             {}),
    "core.bucket_full": lambda: ([Flow(4, sport=1000 + i).pkt(0, 100) for i in range(9)],
                                 dict(hash="none")),
    "core.poll_end": lambda: (_bulk(F4(), 2) + [GAP, F4().pkt(200, 100)], {}),
    "core.budget": lambda: (_bulk(F4(), 4), dict(napi_budget=2)),
    "core.flush_timeout": lambda: (_bulk(F4(), 2) + [GAP, Flow(4, sport=9).pkt(0, 100)],
                                   dict(gro_flush_timeout=200 * US)),
    "core.end_of_input": lambda: (_bulk(F4(), 2), {}),
    "core.section_end": lambda: ([F4().pkt(0, 100), Section("<"), Interface(1, 262144, 9),
                                  F4().pkt(100, 100)], {}),
}

# rules a capture cannot trigger in pcapgro's model, with the reason
UNREACHABLE = {
    "udp.mode_changed": "a flow's UDP mode is fixed by --local-port/--udp/--fraglist; the "
                        "kernel's changes when a socket appears mid-flow",
    "udp.mode_changed_passed": "as udp.mode_changed",
    # a head with URG, RST or SYN is never held (out_check_final with
    # mss 1), so a segment carrying one differs from every head in the flag
    # word: the earlier check names it FLAGS_CHANGED (tcp.flags_changed)
    "tcp.urg": "URG differs from every held head's flag word: flags_changed",
    "tcp.rst": "RST differs from every held head's flag word: flags_changed",
    "tcp.syn": "SYN differs from every held head's flag word: flags_changed",
}


def _stamp(items):
    """Packets with arrival times 10 us apart (one NAPI poll), 5 ms more
    after each GAP marker; other events as they are."""
    out = []
    t = T0
    for it in items:
        if it == GAP:
            t += 5_000_000
            continue
        if type(it) is Packet:
            out.append(Packet(t, it.data, it.orig_len, it.iface, it.linktype, it.meta))
            t += 10 * US
        else:
            out.append(it)
    return out


def _write(events, f):
    w = PcapWriter(f, nanosecond=True, byteorder="<")
    w.write_batch([Section("<"), Interface(1, 262144, 9)] + [e for e in events
                                                             if type(e) is Packet])
    w.close()


def reference(pkts, **cfg):
    """Output pcap bytes and stats of the Python reference path."""
    eng = GROEngine(GROConfig(annotate=False, compiled=False, **cfg))
    out = list(eng.process(pkts))
    f = io.BytesIO()
    _write(out, f)
    return f.getvalue(), eng.stats.to_dict()


def compiled(pkts, engine=None, **cfg):
    """Output pcap bytes and stats of `merge`'s own path: a classic pcap
    file through pipeline.run, the compiled core taking what it handles
    (the fast paths otherwise; events a pcap cannot hold go through
    GROEngine.process).  ``engine``: a list the GROEngine is appended to
    (its ``py_records``: what the reference path took)."""
    eng = GROEngine(GROConfig(annotate=False, **cfg))
    if engine is not None:
        engine.append(eng)
    if any(type(p) is not Packet for p in pkts):
        out = list(eng.process(pkts))
        f = io.BytesIO()
        _write(out, f)
        return f.getvalue(), eng.stats.to_dict()
    src = io.BytesIO()
    _write(pkts, src)
    with tempfile.TemporaryFile() as f:
        w = PcapWriter(f)
        pipeline.run(PcapReader(io.BytesIO(src.getvalue())), w, eng.process)
        w.close()
        f.seek(0)
        return f.read(), eng.stats.to_dict()


# the rules whose packets the compiled core still hands over to the
# reference path: none (a tunnelled packet cut by a snaplen, the last one,
# runs in it too); every rule's case must run in the compiled core alone
HANDED_OVER = ()


def _in_c(rule):
    """Whether every packet of ``rule``'s case must be the compiled core's
    (a classic pcap input; the extension built)."""
    return cfast.available() and not rule.name.startswith(HANDED_OVER)


def test_every_rule_has_a_case():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names)), "rule names repeat"
    missing = set(names) - set(CASES) - set(UNREACHABLE)
    assert not missing, f"rules without a case: {sorted(missing)}"
    assert not set(CASES) - set(names), "cases of no rule"


def test_every_reason_has_a_rule():
    reasons = {r.reason for r in RULES}
    assert set(Flush) <= reasons and set(Pass) <= reasons, \
        f"reasons with no rule: {sorted(set(Flush) | set(Pass) - reasons)}"


def test_compiled_reason_codes_are_rules():
    """The compiled core's reason codes are reasons of the rule list, named
    by the core itself (not matched by position in a comment)."""
    reasons = {r.reason for r in RULES}
    for code in cfast.FLUSH_CODES + cfast.PASS_CODES:
        assert code in reasons


@pytest.mark.parametrize("rule", [r for r in RULES if r.name in CASES], ids=lambda r: r.name)
def test_rule(rule):
    items, cfg = CASES[rule.name]()
    pkts = _stamp(items)
    ref, ref_stats = reference(pkts, **cfg)
    engs = []
    got, got_stats = compiled(pkts, engs, **cfg)
    counted = ref_stats["flush_reasons" if isinstance(rule.reason, Flush)
                               else "pass_reasons"]
    assert counted.get(rule.reason.value, 0) >= 1, \
        f"{rule.name}: {rule.reason.value} not counted: {ref_stats}"
    assert got == ref, f"{rule.name}: the compiled core's output differs from the reference"
    assert got_stats == ref_stats
    if _in_c(rule) and all(type(p) is Packet for p in pkts):
        assert engs[0].py_records == 0, f"{rule.name}: handed over to the reference path"


def _write_ng(events, f):
    from pcapgro.capture.pcapng import PcapngWriter
    w = PcapngWriter(f)
    w.write_batch([Section("<", [], 1, 0), Interface(1, 262144, 9, 0, [])]
                  + [e for e in events if type(e) is Packet])
    w.close()


@pytest.mark.parametrize("rule", [r for r in RULES if r.name in CASES], ids=lambda r: r.name)
def test_rule_annotated_pcapng(rule):
    # the same cases to annotated pcapng, merge's default output: the
    # compiled core lays out EPBs, comments and restore records itself
    from pcapgro.capture.pcapng import PcapngWriter
    items, cfg = CASES[rule.name]()
    pkts = _stamp(items)
    if any(type(p) is not Packet for p in pkts):
        pytest.skip("events a classic pcap input cannot carry")
    eng = GROEngine(GROConfig(annotate=True, compiled=False, **cfg))
    ref = io.BytesIO()
    _write_ng(list(eng.process(pkts)), ref)
    src = io.BytesIO()
    _write(pkts, src)
    eng2 = GROEngine(GROConfig(annotate=True, **cfg))
    with tempfile.TemporaryFile() as f:
        w = PcapngWriter(f)
        pipeline.run(PcapReader(io.BytesIO(src.getvalue())), w, eng2.process)
        w.close()
        f.seek(0)
        got = f.read()
    assert got == ref.getvalue(), f"{rule.name}: compiled pcapng output differs"
    assert eng2.stats.to_dict() == eng.stats.to_dict()
    if _in_c(rule):
        assert eng2.py_records == 0, f"{rule.name}: handed over to the reference path"
