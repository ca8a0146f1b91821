"""Split statistics: what was cut, what passed and why, and where each
flow's segment size came from."""

from collections import Counter

from ..text import count, fit, num
from .reasons import SizeSource

__all__ = ["GSOStats", "FlowStats"]


class FlowStats:
    """Per-flow split counters (only flows that had a super-frame split).

    Attributes:
        name:     "SRC:PORT > DST:PORT" with IPv6 addresses in brackets.
        proto:    'tcp' or 'udp'.
        source:   SizeSource of the most recent split.
        size:     segment payload size in bytes used by the most recent split.
        sources:  Counter SizeSource -> super-frames split with it.
        split:    super-frames split.
        segments: segments made.
    """

    __slots__ = ("name", "proto", "source", "size", "sources", "split", "segments")

    def __init__(self, name, proto):
        self.name = name
        self.proto = proto
        self.source = None
        self.size = 0
        self.sources = Counter()
        self.split = 0
        self.segments = 0

    def to_dict(self):
        """JSON-ready dict of this flow's counters."""
        return {"flow": self.name, "proto": self.proto, "source": self.source.value,
                "segment_size": self.size, "split": self.split, "segments": self.segments,
                "sources": {k.value: v for k, v in sorted(self.sources.items(),
                                                          key=lambda kv: kv[0].value)}}


class GSOStats:
    """Counters kept by :class:`~pcapgro.gso.engine.GSOSplitter`.

    Attributes (ints unless stated):
        packets:    packets that entered the splitter.
        split:      super-frames cut into segments.
        segments:   segments made from them (sum over split packets).
        passed:     Counter Pass -> packets written unchanged.
        cut_segments: segments whose payload was not all captured (snaplen):
                    written with headers, full original length, the captured
                    bytes only, and the checksum seed.
        csum:       Counter: 'computed' (valid TCP/UDP checksum written on a
                    segment), 'seed_truncated' (seed left on a segment:
                    payload not captured), 'completed' (a passed packet's
                    seed checksum completed, GSOConfig.complete_csum),
                    'ip_completed' (a passed packet's IPv4 header checksum
                    of 0, IP checksum offload, completed).
        fixed:      Counter: 'length_zero' (a packet needing no split whose
                    IP length field was 0: lengths filled in, checksums
                    valid; not counted in ``passed``).
        flows:      dict flow key -> FlowStats (flows that had a split).
    """

    def __init__(self):
        self.packets = 0
        self.split = 0
        self.segments = 0
        self.passed = Counter()
        self.cut_segments = 0
        self.csum = Counter()
        self.fixed = Counter()
        self.flows = {}

    def to_dict(self):
        """The statistics as a JSON-ready dict::

            {"packets": int, "split": int, "segments": int, "passed": int,
             "pass_reasons": {reason: packets},
             "size_sources": {source: flows that used it},
             "split_by_source": {source: super-frames},
             "cut_segments": int,
             "fixed": {"length_zero": int},
             "checksums": {"computed": int, "seed_truncated": int,
                           "completed": int, "ip_completed": int},
             "flows": [FlowStats.to_dict(), ...]}   # in order of first split
        """
        by_flows = Counter()
        by_frames = Counter()
        for f in self.flows.values():
            for src, v in f.sources.items():
                by_flows[src] += 1
                by_frames[src] += v
        order = [s for s in SizeSource]
        return {
            "packets": self.packets,
            "split": self.split,
            "segments": self.segments,
            "passed": sum(self.passed.values()),
            "pass_reasons": {k.value: v for k, v in sorted(self.passed.items(),
                                                           key=lambda kv: kv[0].value)},
            "size_sources": {s.value: by_flows[s] for s in order if by_flows[s]},
            "split_by_source": {s.value: by_frames[s] for s in order if by_frames[s]},
            "cut_segments": self.cut_segments,
            "fixed": {"length_zero": self.fixed["length_zero"]},
            "checksums": {"computed": self.csum["computed"],
                          "seed_truncated": self.csum["seed_truncated"],
                          "completed": self.csum["completed"],
                          "ip_completed": self.csum["ip_completed"]},
            "flows": [f.to_dict() for f in self.flows.values()],
        }

    def table(self):
        """Human-readable lines (list of str) for stderr."""
        d = self.to_dict()
        fixed = (f", {num(d['fixed']['length_zero'])} fixed"
                 if d["fixed"]["length_zero"] else "")
        lines = [f"GSO: {count(d['packets'], 'packet')} in: {num(d['split'])} split into "
                 f"{count(d['segments'], 'segment')}{fixed}, {num(d['passed'])} passed"]
        if d["pass_reasons"]:
            lines.append("  passed because:  " + ", ".join(
                f"{k} {num(v)}" for k, v in sorted(d["pass_reasons"].items(), key=lambda kv: -kv[1])))
        if d["size_sources"]:
            lines.append("  segment size from: " + ", ".join(
                f"{k} {count(v, 'flow')}" for k, v in d["size_sources"].items()))
        if d["fixed"]["length_zero"]:
            lines.append(f"  {count(d['fixed']['length_zero'], 'packet')} with IP length 0 "
                         "(TSO capture) that need no split: lengths filled in, checksums valid")
        if d["checksums"]["ip_completed"]:
            lines.append(f"  {count(d['checksums']['ip_completed'], 'passed packet')}: IPv4 "
                         "header checksum 0 (offload) completed")
        if d["checksums"]["completed"]:
            lines.append(f"  {count(d['checksums']['completed'], 'passed packet')}: partial (seed) "
                         "checksum completed")
        if d["cut_segments"]:
            lines.append(f"  {count(d['cut_segments'], 'segment')} cut by snaplen "
                         "(captured bytes only, checksum seed left)")
        for f in d["flows"][:20]:
            lines.append(f"  {f['proto']} {f['flow']}: {num(f['split'])} split, "
                         f"{count(f['segments'], 'segment')} of {count(f['segment_size'], 'byte')} "
                         f"({f['source']})")
        if len(d["flows"]) > 20:
            lines.append(f"  ... and {count(len(d['flows']) - 20, 'more flow')}")
        return fit(lines)

