"""How closely a merge agrees with a receiver's own capture after GRO.

:func:`compare` takes the wire side (the packets GRO got), pcapgro's merge
of it and the receiver's capture (what the kernel's GRO made of the same
packets) and says how many packets each has, whether they are byte for
byte the same, and which joins (two packets of a flow, consecutive on the
wire, in one output packet) only one of them made.  It is what
``pcapgro calibrate`` fits against (:mod:`pcapgro.calibrate`) and what the
NAPI-timing measurements of issue 21 report.

Each output packet is traced back to the wire packets it holds by its
flow (addresses, protocol, ports) and payload: it takes, in order, the
next wire packets of its flow whose payloads, joined, are its payload.
"""

from dataclasses import dataclass, field
import struct

from .capture import open_reader
from .linklayer import network_layer
from .record import Packet

__all__ = ["Agreement", "compare", "read_packets", "trace", "flow_view"]


@dataclass
class Agreement:
    """The result of :func:`compare`.

    Attributes:
        packets_wire:   wire packets.
        packets_ours:   packets in the merge.
        packets_kernel: packets in the receiver's capture.
        exact:          True: the merge is the receiver's capture byte for
                        byte, packet for packet (times aside).
        same_packets:   merge packets whose wire packets and bytes are
                        those of a receiver packet.
        extra:          joins the merge made and the receiver did not:
                        sorted wire indexes i (0-based) of the first packet
                        of each pair (i and the next packet of its flow).
        missing:        joins the receiver made and the merge did not.
        untraced:       receiver packets not made of wire packets (their
                        indexes in the receiver capture): a different
                        capture, or lost packets.
        lost:           wire packets in no receiver packet (lost before
                        the receiver's capture); joins with them are not
                        counted.
    """

    packets_wire: int = 0
    packets_ours: int = 0
    packets_kernel: int = 0
    exact: bool = False
    same_packets: int = 0
    extra: list = field(default_factory=list)
    missing: list = field(default_factory=list)
    untraced: list = field(default_factory=list)
    lost: int = 0

    def to_dict(self):
        """A JSON-ready dict (counts; the first 20 extra/missing joins)."""
        return {"packets_wire": self.packets_wire, "packets_ours": self.packets_ours,
                "packets_kernel": self.packets_kernel, "exact": self.exact,
                "same_packets": self.same_packets, "extra_joins": len(self.extra),
                "missing_joins": len(self.missing), "untraced": len(self.untraced), "lost": self.lost,
                "extra_at": self.extra[:20], "missing_at": self.missing[:20]}

    def line(self):
        """One line: packets out (ours / kernel), exact, joins extra/missing."""
        return (f"packets {self.packets_ours}/{self.packets_kernel} (ours/kernel), "
                f"{'exact' if self.exact else 'not exact'}, "
                f"joins extra {len(self.extra)}, missing {len(self.missing)}"
                + (f", untraced {len(self.untraced)}" if self.untraced else "")
                + (f", lost {self.lost}" if self.lost else ""))


def read_packets(path):
    """The Packets of the capture at ``path`` (a list; other events left
    out).  Raises what :func:`pcapgro.capture.open_reader` raises."""
    r = open_reader(path)
    try:
        return [ev for ev in r if type(ev) is Packet]
    finally:
        r.close()


def flow_view(pkt, with_seq=False):
    """(flow key, L4 payload bytes) of an IPv4/IPv6 TCP or UDP packet, or
    (None, None); ``with_seq``: (key, payload, TCP sequence number or None).
    The key holds the interface, addresses, protocol and ports; the payload
    ends at the IP length (Ethernet padding left out)."""
    none = (None, None, None) if with_seq else (None, None)
    l3, et, _ = network_layer(pkt.linktype, pkt.data)
    d = pkt.data
    if l3 is None:
        return none
    try:
        if et == 0x0800:
            ihl = (d[l3] & 15) * 4
            proto = d[l3 + 9]
            end = l3 + (struct.unpack_from("!H", d, l3 + 2)[0] or len(d) - l3)
            addrs = d[l3 + 12:l3 + 20]
            l4 = l3 + ihl
        elif et == 0x86DD:
            proto = d[l3 + 6]
            end = l3 + 40 + struct.unpack_from("!H", d, l3 + 4)[0]
            addrs = d[l3 + 8:l3 + 40]
            l4 = l3 + 40
        else:
            return none
        seq = None
        if proto == 6:
            pay = l4 + (d[l4 + 12] >> 4) * 4
            seq = struct.unpack_from("!I", d, l4 + 4)[0]
        elif proto == 17:
            pay = l4 + 8
        else:
            return none
        key = (pkt.iface, bytes(addrs), proto, bytes(d[l4:l4 + 4]))
        pay = bytes(d[pay:min(end, len(d))])
        return (key, pay, seq) if with_seq else (key, pay)
    except (IndexError, struct.error):
        return none


def trace(wire, out):
    """For each packet of ``out`` (Packets), the wire indexes it holds:
    a list of lists ([] for a packet not traced).  A packet is traced when
    wire packets of its flow, consecutive in that flow and not yet taken,
    joined give its payload (TCP: starting at its sequence number); wire
    packets the trace skips to find a match (lost before the receiver's
    capture) are never taken, nor is a wire packet without payload taken
    into one with payload.  Packets that are not TCP/UDP are matched to
    the next wire packet of the same bytes."""
    flows = {}
    others = {}
    for i, p in enumerate(wire):
        k, pay, seq = flow_view(p, True)
        if k is None:
            others.setdefault(bytes(p.data), []).append(i)
            continue
        flows.setdefault(k, []).append((i, pay, seq))
    pos = {k: 0 for k in flows}
    groups = []
    for p in out:
        k, pay, seq = flow_view(p, True)
        if k is None or k not in flows:
            lst = others.get(bytes(p.data))
            groups.append([lst.pop(0)] if lst else [])
            continue
        ws = flows[k]
        for j in range(pos[k], min(len(ws), pos[k] + 4096)):
            if ws[j][2] != seq or not pay.startswith(ws[j][1]):
                continue
            idx, j2 = _take(ws, j, pay)
            if idx:
                pos[k] = j2
                groups.append(idx)
                break
        else:
            groups.append([])
    return groups


def _take(ws, j, pay):
    """Wire entries ws[j:] (index, payload, seq) joined into ``pay``:
    (their indexes, the next j), or ([], j) when they do not make it."""
    got, idx = 0, []
    while j < len(ws):
        i, wp, _ = ws[j]
        # a pure ACK (no payload) is never part of a packet that has one:
        # it would be when earlier packets of the flow are lost and the ACK
        # has the sequence number the packet starts at
        if pay[got:got + len(wp)] != wp or (pay and not wp):
            break
        got += len(wp)
        idx.append(i)
        j += 1
        if got == len(pay):
            break
    return (idx, j) if got == len(pay) and idx else ([], j)


def _joins(groups):
    """First wire index of every join (two consecutive packets of a flow in
    one output packet) in ``groups``."""
    return {g[m]: g[m + 1] for g in groups for m in range(len(g) - 1)}


def compare(wire, ours, kernel):
    """How ``ours`` (pcapgro's merge of ``wire``) agrees with ``kernel``
    (the receiver's capture of the same packets after its GRO): all three
    lists of Packets.  Returns an :class:`Agreement`."""
    go = trace(wire, ours)
    gk = trace(wire, kernel)
    seen = {i for g in gk for i in g}
    lost = len(wire) - len(seen)
    # a join with a packet the receiver's capture lacks says nothing
    jo = {i for i, j in _joins(go).items() if i in seen and j in seen}
    jk = set(_joins(gk))
    kb = {tuple(g): bytes(p.data) for g, p in zip(gk, kernel) if g}
    same = sum(1 for g, p in zip(go, ours) if g and kb.get(tuple(g)) == bytes(p.data))
    exact = len(ours) == len(kernel) and all(
        bytes(a.data) == bytes(b.data) for a, b in zip(ours, kernel))
    return Agreement(len(wire), len(ours), len(kernel), exact, same,
                     sorted(jo - jk), sorted(jk - jo),
                     [n for n, g in enumerate(gk) if not g], lost)



def merge_packets(wire, **options):
    """pcapgro's merge of the Packets ``wire`` with merge's ``options``
    (names of :data:`pcapgro.jobs.options.MERGE_OPTIONS`, e.g.
    ``csum='kernel'``, ``udp='gro'``): (output Packets, GROStats).  The
    Python engine, in memory (same results as ``pcapgro merge``).  Raises
    OptionError for a bad option value."""
    from .gro import GROEngine
    from .jobs.options import MERGE_OPTIONS, gro_config, resolve
    values, _ = resolve(MERGE_OPTIONS, options)
    eng = GROEngine(gro_config(values, annotate=False))
    out = [ev for ev in eng.process(iter(wire)) if type(ev) is Packet]
    return out, eng.stats


def measure(wire_path, received_path, **options):
    """:func:`compare` of merge (``csum='kernel'`` unless given, plus
    ``options``) of the capture at ``wire_path`` with the receiver's
    capture at ``received_path``.  Returns an :class:`Agreement`."""
    options.setdefault("csum", "kernel")
    wire = read_packets(wire_path)
    ours, _ = merge_packets(wire, **options)
    return compare(wire, ours, read_packets(received_path))
