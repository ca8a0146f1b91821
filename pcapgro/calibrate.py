"""Fit merge's NAPI timing to a receiver's own capture (``pcapgro calibrate``).

A capture shows no NAPI poll boundaries; ``merge`` models them (issue 21):
the gap model (a poll ends at an arrival gap over ``poll_gap``) or the work
model (``poll_model='work'``: ``poll_wake``, ``poll_rx_cost``,
``deliver_cost``, ``deliver_seg_cost``, see :mod:`pcapgro.gro.napi`).
:func:`calibrate` takes a wire capture (what GRO got) and the receiver's
capture of the same packets after its GRO, and finds the model and values
whose merge agrees best with the receiver (:func:`pcapgro.agreement.compare`):
fewest joins extra + missing, then fewest packets-out difference, both
over the packets the receiver's capture holds (:meth:`_Fit.score`).

Before fitting it checks that the receiver's capture can be a GRO result
at all (:func:`check_received`): every received packet must be wire
packets of one flow, consecutive, joined under GRO's rules (no PSH, FIN,
SYN, RST or URG before the last segment, segments of one size with a last
one no longer, same ACK, TCP options, TTL and TOS, below gro_max_size).
The first packet that breaks one is reported and nothing is fitted.

Cost: every setting tried is one in-memory merge of the wire capture
(Python engine), except that settings giving the same poll boundaries are
merged once (boundaries depend on arrival times only).  The number of
merges is bounded by ``max_merges`` (default :data:`MAX_MERGES`): the gap
model at most 1 + ``len(GAP_GRID)`` + 3 rounds of under 2 x ``REFINE``
merges (1 when the default is exact), the work model the rest
(coarse grid of ``len(WORK_FACTORS)`` ** 4 points, nearest the defaults
first, then coordinate refinement), plus 2 per fitted parameter for the
sensitivity.  The work model is not tried when the gap model is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import itertools
import math
import shlex
import struct
import sys
import types
from typing import NamedTuple

from .agreement import Agreement, _joins, flow_view, merge_packets, read_packets, trace
from .errors import OptionError, UnusableInput
from .jobs.options import CALIBRATE_OPTIONS, MERGE_OPTIONS, resolve
from .linklayer import network_layer
from .text import count, fit, num

__all__ = ["Calibration", "Segment", "calibrate", "check_received", "detect_mode", "merge_command",
           "GAP_GRID", "WORK_PARAMS", "WORK_FACTORS", "MAX_MERGES", "REFINE"]

# poll gaps tried first, ns: 1 us to 100 ms, 1-2-5 steps
GAP_GRID = tuple(m * 10 ** e for e in range(3, 9) for m in (1, 2, 5) if m * 10 ** e <= 10 ** 8)
# the work model's parameters (merge option names) and its coarse grid,
# as factors of each option's default
WORK_PARAMS = ("poll_wake", "poll_rx_cost", "deliver_cost", "deliver_seg_cost")
WORK_FACTORS = (0.25, 1, 4)
MAX_MERGES = 150
REFINE = 12                 # poll gaps tried per refinement round
_DEFAULTS = {o.name: o.default for o in MERGE_OPTIONS}
# merge's NAPI timing options (what the fit sets)
_TIMING = ("poll_gap", "poll_model") + WORK_PARAMS
_TCP_END = 0x01 | 0x02 | 0x04 | 0x08 | 0x20      # FIN SYN RST PSH URG
_CWR = 0x80
_FLAG_NAMES = ((0x08, "PSH"), (0x01, "FIN"), (0x02, "SYN"), (0x04, "RST"), (0x20, "URG"))


@dataclass
class Calibration:
    """The result of :func:`calibrate`.

    Attributes:
        explainable: False: the received capture is not a GRO result of
                     this kernel/configuration (``offending`` says where);
                     nothing was fitted.
        offending:   None, or {"received_frame", "wire_frame", "reason"}
                     (1-based frame numbers; wire_frame may be None).
        model:       'gap' or 'work' (the best fit).
        options:     merge options of the fit (dict name -> value): the
                     fixed ones, the detected mode and the fitted timing.
        detected:    merge options found from the received capture
                     (``udp``/``fraglist``), {} when none were needed.
        agreement:   :class:`~pcapgro.agreement.Agreement` of the fit.
        default:     Agreement of the same options at the default timing.
        sensitivity: {option name: {"x2": n, "x0.5": n}}: aggregate
                     boundaries (joins) that move when it is doubled / halved.
        unexplained: joins that no setting tried gets right, first ones:
                     dicts {"kind": 'extra'|'missing', "wire_frames": [a, b],
                     "received_frames": [...]}; ``unexplained_total`` counts all.
        merges:      merges run.
        budget_stopped: True: ``max_merges`` (``budget``) left settings
                     untried (``merges`` counts the sensitivity's too).
        no_gro:      True: RECEIVED has no aggregate at all (the receiver
                     shows no GRO): only the gap model was fitted, to the
                     poll gap that keeps packets alone.
        udp_undetected: True: WIRE has UDP, RECEIVED no UDP aggregate and
                     neither ``udp`` nor ``fraglist`` was given: UDP GRO
                     was taken to be off (the report says to give it).
        status:      0 fitted (exact or not: ``agreement.exact``), 1 not a
                     GRO result (``explainable`` False).
    """

    explainable: bool = True
    offending: dict = None
    model: str = "gap"
    options: dict = field(default_factory=dict)
    detected: dict = field(default_factory=dict)
    agreement: object = None
    default: object = None
    sensitivity: dict = field(default_factory=dict)
    unexplained: list = field(default_factory=list)
    unexplained_total: int = 0
    merges: int = 0
    budget_stopped: bool = False
    budget: int = 0
    no_gro: bool = False
    udp_undetected: bool = False

    @property
    def status(self):
        """Exit status of ``pcapgro calibrate``: 0 fitted, 1 not a GRO result."""
        return 0 if self.explainable else 1

    def command(self, wire="WIRE", out="OUT"):
        """The fit as a ``pcapgro merge`` command line (str)."""
        return merge_command(self.options, wire, out)

    def to_dict(self, wire="WIRE", out="OUT"):
        """A JSON-ready dict (what ``--stats`` writes)."""
        if not self.explainable:
            return {"result": "not_gro", "offending": self.offending, "command": None}
        return {"result": "exact" if self.agreement.exact else "not_exact",
                "model": self.model, "options": _json_options(self.options),
                "detected": _json_options(self.detected),
                "command": self.command(wire, out), "agreement": self.agreement.to_dict(),
                "default_agreement": self.default.to_dict(), "sensitivity": self.sensitivity,
                "unexplained": self.unexplained, "unexplained_total": self.unexplained_total,
                "merges": self.merges, "budget_stopped": self.budget_stopped,
                "no_gro": self.no_gro}

    def lines(self, wire="WIRE", out="OUT"):
        """What ``pcapgro calibrate`` prints (list of str, wrapped at 80
        columns but the command line, which stays whole to be copied)."""
        if not self.explainable:
            return [offending_line(self.offending)]
        a, d = self.agreement, self.default
        head = [f"model: {self.model} ({count(self.merges, 'merge')})",
                f"  {self.command(wire, out)}"]
        body = [f"agreement: {a.line()}", f"  default timing: {d.line()}"]
        if self.no_gro:
            body.insert(0, "RECEIVED shows no GRO: no received packet is an aggregate (GRO off "
                           "at the receiver, or it merged nothing); only the poll gap that keeps "
                           "every packet alone is fitted, the work model is not tried"
                           + ("" if not self.udp_undetected
                              else "; UDP GRO cannot be detected without a UDP aggregate: give "
                                   "--udp gro / --fraglist if the receiver ran them"))
        if self.detected:
            body.append("detected: " + merge_command(self.detected, None, None)[14:])
        for name, s in self.sensitivity.items():
            body.append(f"sensitivity {_flag(name)}: x2 moves {num(s['x2'])}, "
                        f"x0.5 moves {num(s['x0.5'])} aggregate boundaries")
        if self.budget_stopped:
            body.append(f"the merge budget stopped the fit after {count(self.budget, 'merge')}: "
                        f"settings were left untried (raise --max-merges)")
        if self.unexplained_total:
            total = count(self.unexplained_total, "boundary", "boundaries")
            body.append(f"no setting {'tried ' if self.budget_stopped else ''}explains {total}"
                        f"{', first' if self.unexplained_total > len(self.unexplained) else ''}:")
            for u in self.unexplained:
                body.append(f"  {u['kind']} join: wire frames {u['wire_frames'][0]}-"
                            f"{u['wire_frames'][1]}, received frame"
                            f"{'s' if len(u['received_frames']) > 1 else ''} "
                            + ", ".join(map(str, u["received_frames"])))
        return head + fit(body)


def offending_line(off):
    """One line naming the first received packet GRO could not have made."""
    w = f" (wire frame {off['wire_frame']})" if off.get("wire_frame") else ""
    return (f"received frame {off['received_frame']}: not a GRO result of this "
            f"kernel/configuration: {off['reason']}{w}")


def _flag(name):
    return next(o.flag for o in MERGE_OPTIONS if o.name == name)


def _json_options(opts):
    return {k: list(v) if isinstance(v, (tuple, frozenset)) else v for k, v in opts.items()}


def merge_command(options, wire="WIRE", out="OUT"):
    """``pcapgro merge`` with the flags of ``options`` (merge option names
    -> values; values at their default left out) and WIRE OUT (None: no
    paths; one starting with '-' is written './-...')."""
    words = ["pcapgro", "merge"]
    for o in MERGE_OPTIONS:
        if o.name not in options:
            continue
        v = options[o.name]
        if o.is_flag:
            if v:
                words.append(o.flag)
        elif o.multiple:
            for x in sorted(v):
                words += [o.flag, str(x)]
        elif v is not None and v != o.default:
            words += [o.flag, str(v)]
    words += [shlex.quote(_path_word(p)) for p in (wire, out) if p is not None]
    return " ".join(words)


def _path_word(p):
    """Path ``p`` as merge's command line takes it: one starting with '-'
    (but '-' itself, standard input) gets './' so it is not read as an
    option."""
    p = str(p)
    return "./" + p if p.startswith("-") and p != "-" else p


# ---- is the received capture a GRO result at all?

class Segment(NamedTuple):
    """What GRO's merge rules look at in one packet (:func:`_segment`)."""

    l3_len: int         # bytes from the network header on
    proto: int          # 6 TCP, 17 UDP
    flags: int          # TCP flags (with NS as bit 8); 0 for UDP
    payload: int        # L4 payload bytes
    ttl: int            # TTL / hop limit
    tos: int            # TOS / traffic class
    ack: bytes          # TCP acknowledgment number (b"" for UDP)
    options: bytes      # TCP options (b"" for UDP)
    csum: bytes         # TCP/UDP checksum field
    window: bytes       # TCP window field (b"" for UDP)


def _segment(pkt):
    """The :class:`Segment` of an IPv4/IPv6 TCP/UDP packet, or None."""
    l3, et, _ = network_layer(pkt.linktype, pkt.data)
    d = pkt.data
    try:
        if et == 0x0800:
            l4, proto, ttl, tos = l3 + (d[l3] & 15) * 4, d[l3 + 9], d[l3 + 8], d[l3 + 1]
            end = l3 + (struct.unpack_from("!H", d, l3 + 2)[0] or len(d) - l3)
        elif et == 0x86DD:
            l4, proto, ttl = l3 + 40, d[l3 + 6], d[l3 + 7]
            tos = (struct.unpack_from("!H", d, l3)[0] >> 4) & 0xFF
            end = l3 + 40 + (struct.unpack_from("!H", d, l3 + 4)[0] or len(d) - l3 - 40)
        else:
            return None
        end = min(end, len(d))
        if proto == 6:
            thl = (d[l4 + 12] >> 4) * 4
            return Segment(end - l3, 6, d[l4 + 13] | (d[l4 + 12] & 1) << 8, end - l4 - thl,
                           ttl, tos, bytes(d[l4 + 8:l4 + 12]), bytes(d[l4 + 20:l4 + thl]),
                           bytes(d[l4 + 16:l4 + 18]), bytes(d[l4 + 14:l4 + 16]))
        if proto == 17:
            return Segment(end - l3, 17, 0, end - l4 - 8, ttl, tos, b"", b"",
                           bytes(d[l4 + 6:l4 + 8]), b"")
    except (IndexError, struct.error, TypeError):
        pass
    return None


# fields that must not change inside an aggregate (inet_gro_receive,
# ipv6_gro_receive, tcp_gro_receive), as the reason names them
_SAME = (("ttl", "TTL/hop limit"), ("tos", "TOS/traffic class"), ("ack", "ACK number"),
         ("options", "TCP options (timestamp)"))


# fields a GRO aggregate keeps from its first segment (the head skb's
# headers: inet_gro_complete / tcp_gro_complete only fix lengths, checksum
# and the FIN/PSH of the last segment); checked on every received packet
_HEAD = (("ttl", "TTL/hop limit"), ("tos", "TOS/traffic class"), ("ack", "ACK number"),
         ("window", "TCP window"), ("options", "TCP options"))


def _rule_broken(segs, gro_max_size, agg_len):
    """Why wire segments ``segs`` (:class:`Segment`, in order) cannot be one
    GRO aggregate of L3 length ``agg_len``: (reason, index into segs) or
    None (net/ipv4/tcp_offload.c tcp_gro_receive, udp_offload.c
    udp_gro_receive_segment, core/gro.c skb_gro_receive)."""
    if agg_len >= gro_max_size:
        return f"{agg_len} bytes, not below gro_max_size {gro_max_size}", len(segs) - 1
    first = segs[0]
    size = first.payload
    for k, s in enumerate(segs):
        last = k == len(segs) - 1
        if not last and s.flags & _TCP_END:
            name = next(n for bit, n in _FLAG_NAMES if s.flags & bit)
            return f"merged across a {name}", k
        if not k:
            continue
        if s.flags & _CWR or (s.flags ^ first.flags) & ~(_CWR | 0x01 | 0x08):
            return "merged across a CWR or changed TCP flags", k
        if s.payload > size or (not last and s.payload != size) or s.payload == 0:
            return f"segment of {s.payload} bytes in an aggregate of {size}-byte segments", k
        for name, what in _SAME:
            if getattr(s, name) != getattr(first, name):
                return f"merged across a changed {what}", k
    return None


def check_received(wire, received, groups=None, gro_max_size=_DEFAULTS["gro_max_size"],
                   udp=None, fraglist=False):
    """The first received packet GRO could not have made of ``wire``
    (both lists of Packets; ``groups``: :func:`~pcapgro.agreement.trace` of
    them, computed when None): {"received_frame", "wire_frame", "reason"}
    (1-based frames) or None when every packet can be a GRO result.
    Besides GRO's merge rules (:func:`_rule_broken`), a received packet's
    headers must be its first wire segment's where GRO keeps the head's
    (:data:`_HEAD`), and ``udp='off'`` (given, without ``fraglist``)
    refuses UDP aggregates; ``udp=None``: not given, any UDP mode."""
    groups = trace(wire, received) if groups is None else groups
    for n, (g, p) in enumerate(zip(groups, received)):
        if not g:
            return {"received_frame": n + 1, "wire_frame": None,
                    "reason": "not made of wire packets of one flow, in order"}
        segs = [_segment(wire[i]) for i in g]
        agg = _segment(p)
        if len(g) > 1 and (agg is None or None in segs):
            return {"received_frame": n + 1, "wire_frame": g[0] + 1,
                    "reason": "an aggregate of packets GRO does not merge"}
        if agg is None or segs[0] is None:
            continue
        changed = next((what for name, what in _HEAD
                        if getattr(agg, name) != getattr(segs[0], name)), None)
        if changed:
            return {"received_frame": n + 1, "wire_frame": g[0] + 1,
                    "reason": f"its {changed} is not its first segment's"}
        if len(g) < 2:
            continue
        if agg.proto == 17 and udp == "off" and not fraglist:
            return {"received_frame": n + 1, "wire_frame": g[0] + 1,
                    "reason": "a UDP aggregate with UDP GRO off (--udp off)"}
        bad = _rule_broken(segs, gro_max_size, agg.l3_len)
        if bad:
            return {"received_frame": n + 1, "wire_frame": g[bad[1]] + 1, "reason": bad[0]}
    return None


def detect_mode(wire, received, groups):
    """Merge options the received aggregates need: {"fraglist": True} when
    an aggregate keeps its first segment's checksum (fraglist GRO),
    {"udp": "gro"} for other UDP aggregates, else {}."""
    udp = False
    for g, p in zip(groups, received):
        if len(g) < 2:
            continue
        agg, first = _segment(p), _segment(wire[g[0]])
        if agg is None or first is None:
            continue
        if agg.csum == first.csum:
            return {"fraglist": True}
        udp = udp or agg.proto == 17
    return {"udp": "gro"} if udp else {}


# ---- the fit

class _Fit:
    """Merges of ``wire`` (Packets) under candidate timings, scored against
    the receiver's capture ``received`` (``kgroups``: its trace).  Every
    merge is ``fixed`` (merge options) plus the timing tried: merges are
    cached by their poll boundaries alone, which is right only because
    ``fixed`` stays the same."""

    def __init__(self, wire, received, kgroups, fixed, max_merges):
        self.wire, self.received, self.fixed = wire, received, fixed
        self.ts = [p.ts for p in wire]
        self.kgroups = kgroups
        self.max_merges = max_merges
        self.cache = {}             # boundaries -> (score, agreement, joins)
        self.merges = 0
        self.never = None           # joins wrong under every setting tried
        self.stopped = False        # a setting was left untried: max_merges
        self.seen = {i for g in kgroups for i in g}
        self.kjoins = set(_joins(kgroups))
        self.kbytes = {tuple(g): bytes(p.data) for g, p in zip(kgroups, received) if g}

    def agreement(self, ours):
        """(Agreement, our joins) of merge output ``ours``: what
        :func:`~pcapgro.agreement.compare` computes, with the receiver's
        side traced once."""
        go = self.go = trace(self.wire, ours)
        seen, kb, rec = self.seen, self.kbytes, self.received
        jo = {i for i, j in _joins(go).items() if i in seen and j in seen}
        same = sum(1 for g, p in zip(go, ours) if g and kb.get(tuple(g)) == bytes(p.data))
        exact = len(ours) == len(rec) and all(
            bytes(a.data) == bytes(b.data) for a, b in zip(ours, rec))
        a = Agreement(len(self.wire), len(ours), len(rec), exact, same,
                      sorted(jo - self.kjoins), sorted(self.kjoins - jo),
                      [n for n, g in enumerate(self.kgroups) if not g], len(self.wire) - len(seen))
        return a, jo

    def score(self, a):
        """(joins extra + missing, packets-out difference, not exact) of
        Agreement ``a`` of the last merge output traced, lowest best.  Both counts
        are over the wire packets the received capture holds: joins with a
        lost packet are not counted (:func:`~pcapgro.agreement.compare`),
        and only our packets holding a received wire packet are counted
        out, against the received packets traced to the wire.  Joins come
        first: with nothing lost, the packets-out difference is missing -
        extra and says no more."""
        seen = self.seen
        present = sum(1 for g in self.go if any(i in seen for i in g))
        traced = sum(1 for g in self.kgroups if g)
        return len(a.extra) + len(a.missing), abs(present - traced), not a.exact

    def boundaries(self, opts):
        """The poll boundaries of merge options ``opts`` (hashable)."""
        from .gro.napi import PollClock
        if opts.get("poll_model") == "work":
            values, _ = resolve(MERGE_OPTIONS, opts)
            from .jobs.options import gro_config
            return ("work", tuple(PollClock(gro_config(values, False)).ends(self.ts)))
        gap = opts.get("poll_gap", _DEFAULTS["poll_gap"])
        ts = self.ts
        return ("gap", tuple(i for i in range(1, len(ts)) if ts[i] - ts[i - 1] > gap))

    def can_merge(self):
        """True while ``max_merges`` leaves a merge to run."""
        return self.merges < self.max_merges

    def run(self, opts):
        """(score, Agreement, our joins) of merge options ``opts``; None when
        it would need a merge past ``max_merges``.  Score: :meth:`score`."""
        key = self.boundaries(opts)
        got = self.cache.get(key)
        if got is not None:
            return got
        if not self.can_merge():
            self.stopped = True
            return None
        self.merges += 1
        ours, _ = merge_packets(self.wire, **opts)
        a, joins = self.agreement(ours)
        wrong = {("extra", i) for i in a.extra} | {("missing", i) for i in a.missing}
        self.never = wrong if self.never is None else self.never & wrong
        got = (self.score(a), a, joins)
        self.cache[key] = got
        return got


def _distance(opts):
    """How far timing ``opts`` is from merge's defaults (log scale)."""
    return sum(abs(math.log((opts[k] + 1) / (_DEFAULTS[k] + 1))) for k in opts
               if k in _DEFAULTS and isinstance(opts[k], int) and k not in ("napi_budget",))


def _best(cands):
    """The best (score, opts) of ``cands``: lowest score, then nearest the defaults."""
    return min(cands, key=lambda c: (c[0], _distance(c[1])))


def _fit_gap(fit):
    """Best (score, timing options) of the gap model: :data:`GAP_GRID`,
    then rounds of :data:`REFINE` poll gaps between the best one's grid
    neighbours (the arrival gaps found there: only they change the
    boundaries)."""
    if "poll_gap" in fit.fixed:          # given: kept
        return fit.run(fit.fixed)[0], {"poll_gap": fit.fixed["poll_gap"]}
    tried = []

    def tryit(gap):
        r = fit.run({**fit.fixed, "poll_gap": gap})
        if r is not None:
            tried.append((r[0], {"poll_gap": gap}))

    for g in (_DEFAULTS["poll_gap"],) + GAP_GRID:
        tryit(g)
        if tried and tried[0][0][:2] == (0, 0):
            return tried[0]             # the default explains every boundary
    gaps = sorted({b - a for a, b in zip(fit.ts, fit.ts[1:]) if b > a})
    lo, hi = 0, GAP_GRID[-1] * 10
    best = _best(tried)
    k = GAP_GRID.index(best[1]["poll_gap"]) if best[1]["poll_gap"] in GAP_GRID else None
    if k is not None:
        lo = GAP_GRID[k - 1] if k else 0
        hi = GAP_GRID[k + 1] if k + 1 < len(GAP_GRID) else hi
    for _ in range(3):
        inside = [g for g in gaps if lo < g < hi]
        if not inside or best[0][:2] == (0, 0):
            break
        step = max(1, len(inside) // REFINE)
        for g in inside[::step] + [inside[0] - 1]:     # -1: inside[0] a boundary too
            tryit(g)
        best = _best(tried)
        if step == 1:
            break
        j = inside.index(best[1]["poll_gap"]) if best[1]["poll_gap"] in inside else None
        if j is None:
            break
        lo, hi = inside[max(0, j - step)], inside[min(len(inside) - 1, j + step)]
    return best


def _work_value(name, factor):
    return int(round(_DEFAULTS[name] * factor))


def _fit_work(fit):
    """Best (score, timing options) of the work model: the coarse grid
    (:data:`WORK_FACTORS` of each default, nearest the defaults first),
    then coordinate refinement (each parameter x/÷ 2, then x/÷ 1.41, while
    it gets better), as far as ``max_merges`` allows; None when no merge
    was left."""
    tried = []

    def tryit(t):
        r = fit.run({**fit.fixed, "poll_model": "work", **t})
        if r is not None:
            tried.append((r[0], t))
        return r

    free = [n for n in WORK_PARAMS if n not in fit.fixed]      # given ones are kept
    grid = [dict(zip(free, (_work_value(n, f) for n, f in zip(free, fs))))
            for fs in itertools.product(WORK_FACTORS, repeat=len(free))]
    for t in sorted(grid, key=_distance):
        tryit(t)
    if not tried:
        return None
    best = _best(tried)
    for step in (2.0, 2 ** 0.5):
        better = True
        while better and fit.can_merge() and best[0][:2] != (0, 0):
            better = False
            for name in free:
                for f in (step, 1 / step):
                    t = dict(best[1])
                    t[name] = max(0, int(round(t[name] * f))) or (0 if f < 1 else 1000)
                    if tryit(t) is not None and _best(tried)[1] is t:
                        best, better = _best(tried), True
    return best


def _sensitivity(fit, model, timing, joins):
    """Joins that move when each fitted parameter is doubled / halved."""
    names = ("poll_gap",) if model == "gap" else WORK_PARAMS
    out = {}
    for name in (n for n in names if n in timing and n not in fit.fixed):
        row = {}
        for label, f in (("x2", 2), ("x0.5", 0.5)):
            fit.max_merges = max(fit.max_merges, fit.merges + 1)
            t = dict(timing, **{name: int(timing[name] * f)})
            r = fit.run({**fit.fixed, **t})
            row[label] = len(joins ^ r[2])
        out[name] = row
    return out


def _unexplained(fit, limit=5):
    """Joins wrong under every setting tried: (first ``limit`` as dicts, total)."""
    where = {i: n + 1 for n, g in enumerate(fit.kgroups) for i in g}
    nxt = {}
    last = {}
    for i, p in enumerate(fit.wire):
        k = flow_view(p)[0]
        if k is not None:
            if k in last:
                nxt[last[k]] = i
            last[k] = i
    rows = []
    for kind, i in sorted(fit.never or (), key=lambda x: x[1])[:limit]:
        j = nxt.get(i, i)
        rf = sorted({where[x] for x in (i, j) if x in where})
        rows.append({"kind": kind, "wire_frames": [i + 1, j + 1], "received_frames": rf})
    return rows, len(fit.never or ())


def _load(x):
    return read_packets(x) if not isinstance(x, list) else x


def calibrate(wire, received, *, max_merges=MAX_MERGES, models=("gap", "work"),
              **fixed_options):
    """Fit merge's NAPI timing to a receiver's capture.

    Args:
        wire:      the wire side (what the receiver's GRO got): a capture
                   path, or a list of Packets.
        received:  the receiver's capture of the same packets after its GRO
                   (``tcpdump -Q in`` on the receiving device): path or list.
        max_merges: bound on the merges run for the fit (each is one
                   in-memory merge of ``wire``; settings with the same
                   poll boundaries share one), sensitivity aside.
        models:    the poll models to try ('gap', 'work').
        **fixed_options: merge options kept as given (``udp='gro'``,
                   ``fraglist=True``, ``csum``, ``gro_max_size``, ...); the
                   timing options given here are not fitted.  ``csum``
                   defaults to 'kernel' (what a receiver's capture holds);
                   ``udp``/``fraglist``, when neither is given, are
                   detected from the received aggregates.
    Returns: a :class:`Calibration`.
    Raises: UnusableInput (a capture that cannot be read), DamagedInput,
        OptionError / TypeError (a bad or unknown option).
    """
    values, _ = resolve(CALIBRATE_OPTIONS, fixed_options)      # checks names and values
    if isinstance(max_merges, bool) or not isinstance(max_merges, int) or max_merges < 1:
        raise OptionError(f"max_merges must be a whole number of at least 1, not {max_merges!r}")
    W, R = _load(wire), _load(received)
    for label, pkts in (("WIRE", W), ("RECEIVED", R)):
        _refuse_cut(label, pkts)
    return _calibrate(W, R, values, max_merges, models, fixed_options)


def _calibrate(W, R, values, max_merges, models, fixed_options):
    """:func:`calibrate` on Packets ``W``, ``R`` (checked options ``values``)."""
    kgroups = trace(W, R)
    off = check_received(W, R, kgroups, values["gro_max_size"], fixed_options.get("udp"),
                         values["fraglist"])
    if off is not None:
        return Calibration(explainable=False, offending=off)
    # no aggregate at all: the work model could only be fitted to keep
    # every packet alone, which says nothing about its costs
    no_gro = bool(R) and not _joins(kgroups)
    if no_gro and fixed_options.get("poll_model") != "work":
        models = tuple(m for m in models if m == "gap") or models
    fixed = dict(fixed_options)
    fixed.setdefault("csum", "kernel")
    detected = {}
    if "udp" not in fixed and "fraglist" not in fixed:
        detected = detect_mode(W, R, kgroups)
        fixed.update(detected)
    given = set(fixed)
    fit = _Fit(W, R, kgroups, fixed, max_merges)
    # merge's default timing (the timing options given left out): what
    # the report compares the fit with
    default = fit.run({k: v for k, v in fixed.items() if k not in _TIMING})[1]
    cands = []
    if "gap" in models and fixed.get("poll_model", "gap") == "gap" \
            and not set(WORK_PARAMS) & given:
        cands.append((*_fit_gap(fit), "gap"))
    if "work" in models and fixed.get("poll_model", "work") == "work" \
            and "poll_gap" not in given and not (cands and cands[0][0][:2] == (0, 0)):
        w = _fit_work(fit)
        if w is not None:
            cands.append((*w, "work"))
    if not cands:
        raise OptionError("nothing to fit: the timing options given fix every model")
    score, timing, model = min(cands, key=lambda c: (c[0], c[2] != "gap"))
    opts = {**fixed, **({"poll_model": "work"} if model == "work" else {}), **timing}
    _, agreement, joins = fit.run(opts)
    sens = _sensitivity(fit, model, {**({"poll_model": "work"} if model == "work" else {}),
                                     **timing}, joins)
    rows, total = _unexplained(fit)
    return Calibration(True, None, model, opts, detected, agreement, default, sens, rows,
                       total, fit.merges, budget_stopped=fit.stopped,
                       budget=max_merges, no_gro=no_gro,
                       udp_undetected=no_gro and not {"udp", "fraglist"} & given
                       and any(_segment(p) is not None and _segment(p).proto == 17 for p in W))


def _refuse_cut(label, pkts):
    """UnusableInput when capture ``label``'s Packets ``pkts`` are cut
    short of their length on the wire (a snaplen): the trace matches
    payloads and the GRO check reads lengths, neither of which a cut
    packet holds."""
    cut = next((n for n, p in enumerate(pkts) if len(p.data) < p.orig_len), None)
    if cut is not None:
        snap = max(len(p.data) for p in pkts if len(p.data) < p.orig_len)
        p = pkts[cut]
        raise UnusableInput(f"{label} is cut to {snap} bytes (snaplen): frame {cut + 1} holds "
                            f"{len(p.data)} of its {p.orig_len} bytes; calibrate needs whole "
                            f"packets (tcpdump -s 0)")


class _CallableModule(types.ModuleType):
    """This module, callable as the library's :func:`pcapgro.jobs.calibrate`
    (so ``pcapgro.calibrate(WIRE, RECEIVED)`` and ``from pcapgro import
    calibrate`` both work; pcapgro imports this module only when asked)."""

    def __call__(self, wire, received, *, max_merges=None, **options):
        from .jobs import calibrate as job
        return job(wire, received, max_merges=max_merges, **options)


sys.modules[__name__].__class__ = _CallableModule
