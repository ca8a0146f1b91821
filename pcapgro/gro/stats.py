"""Merge statistics: what merged, and why each aggregate ended."""

from collections import Counter

from ..text import count, fit, num
from .napi import gap_bucket, gap_label

__all__ = ["GROStats", "CHECKSUM_KEYS", "KINDS"]

# The fixed keys of the JSON statistics (README "Statistics"): always
# present, 0 when nothing was counted, so that readers can index them.
CHECKSUM_KEYS = ("verified", "bad", "seed", "skipped_truncated", "skipped_l3_flush",
                 "skipped_udp_zero")
KINDS = ("tcp", "tcp_fraglist", "udp", "udp_fraglist")


class GROStats:
    """Counters kept by the GRO engine.

    Attributes (all ints unless stated):
        packets:     packets that entered the engine.
        aggregates:  completed held packets with more than one segment.
        singles:     completed held packets that merged nothing (written
                     unchanged).
        segments_merged: segments inside aggregates (sum of their counts).
        passed:      Counter Pass reason -> packets passed without being held.
        flush:       Counter Flush reason -> held packets completed for it
                     (aggregates and singles alike).
        hist:        Counter segments-per-aggregate -> aggregates.
        csum:        Counter (:data:`CHECKSUM_KEYS`): verified, bad, seed
                     (pseudo-header seed trusted), skipped_truncated,
                     skipped_l3_flush, skipped_udp_zero (a UDP datagram
                     without a checksum); with verification off
                     (``--no-verify-csum``) nothing is counted.
        cut_aggregates: aggregates holding a segment cut by the snaplen
                     (written with the payload contiguous from the start).
        cut_bytes_left_out: captured payload bytes of segments after the
                     first cut one in such aggregates, not in the output.
        by_kind, segments_by_kind: Counter protocol and mode (:data:`KINDS`:
                     'tcp', 'tcp_fraglist', 'udp', 'udp_fraglist') ->
                     aggregates / segments in them.
        poll_gaps:   Counter gap bucket (:func:`pcapgro.gro.napi.gap_bucket`)
                     -> poll ends (napi_complete_done) that found GRO
                     holding packets, by the arrival gap after the poll's
                     last packet: the timing-made aggregate ends.
        budget_ends: polls that took their budget while GRO held packets.
        moved:       Counter 'x2' / 'x0.5' -> packets where a poll would
                     start with the timing (the work model's costs, or
                     the poll gap) doubled / halved but does not now, or
                     the other way round, while GRO held packets
                     (:class:`pcapgro.gro.napi.PollShifts`).
    """

    def __init__(self):
        self.packets = 0
        self.aggregates = 0
        self.singles = 0
        self.segments_merged = 0
        self.passed = Counter()
        self.flush = Counter()
        self.hist = Counter()
        self.csum = Counter()
        self.by_kind = Counter()
        self.segments_by_kind = Counter()
        self.cut_aggregates = 0
        self.cut_bytes_left_out = 0
        self.poll_gaps = Counter()
        self.budget_ends = 0
        self.moved = Counter()

    def count_poll_end(self, d):
        """A poll end that found GRO holding packets, after an arrival gap
        of ``d`` ns."""
        self.poll_gaps[gap_bucket(d)] += 1

    def count_moves(self, m2, mh):
        """Packets where a poll start would move under x2 (``m2``: bool or
        a count) / x0.5 (``mh``) timing, while GRO holds packets."""
        if m2:
            self.moved["x2"] += m2
        if mh:
            self.moved["x0.5"] += mh

    def count_aggregate(self, kind, count):
        """One aggregate of ``count`` segments completed; ``kind`` one of
        :data:`KINDS`."""
        self.aggregates += 1
        self.segments_merged += count
        self.hist[count] += 1
        self.by_kind[kind] += 1
        self.segments_by_kind[kind] += count

    def note_cut(self, left_out):
        """One aggregate written with a segment cut by the snaplen;
        ``left_out`` captured payload bytes (int) could not be carried."""
        self.cut_aggregates += 1
        self.cut_bytes_left_out += left_out

    def to_dict(self):
        """The statistics as a JSON-ready dict (schema in README, "gro").

        ``checksums`` always has the five :data:`CHECKSUM_KEYS` and
        ``by_kind`` the four :data:`KINDS` (each {"aggregates", "segments"}),
        0 when none; ``flush_reasons``, ``pass_reasons`` and the histogram
        list only what occurred.  Counts of packets / aggregates (ints)."""
        n_agg = self.aggregates
        return {
            "packets": self.packets,
            "aggregates": n_agg,
            "segments_merged": self.segments_merged,
            "singles": self.singles,
            "passed": sum(self.passed.values()),
            "segments_per_aggregate": {
                "mean": round(self.segments_merged / n_agg, 3) if n_agg else 0.0,
                "max": max(self.hist) if self.hist else 0,
                "histogram": {str(k): v for k, v in sorted(self.hist.items())},
            },
            "flush_reasons": {k.value: v for k, v in sorted(self.flush.items(), key=lambda kv: kv[0].value)},
            "pass_reasons": {k.value: v for k, v in sorted(self.passed.items(), key=lambda kv: kv[0].value)},
            "checksums": {**{k: self.csum[k] for k in CHECKSUM_KEYS},
                          **{k: v for k, v in sorted(self.csum.items())
                             if k not in CHECKSUM_KEYS}},
            "by_kind": {**{k: {"aggregates": self.by_kind[k],
                               "segments": self.segments_by_kind[k]} for k in KINDS},
                        **{k: {"aggregates": v, "segments": self.segments_by_kind[k]}
                           for k, v in sorted(self.by_kind.items()) if k not in KINDS}},
            "snaplen": {"aggregates": self.cut_aggregates,
                        "captured_bytes_left_out": self.cut_bytes_left_out},
            "poll_ends": {"poll_end": sum(self.poll_gaps.values()),
                          "budget": self.budget_ends,
                          "gaps_us": {gap_label(k): v for k, v in sorted(self.poll_gaps.items())},
                          "would_move": {"x2": self.moved["x2"], "x0.5": self.moved["x0.5"]}},
        }

    def table(self):
        """Human-readable lines (list of str, each at most 80 columns) for
        stderr; counts as the statistics table prints them (1,109)."""
        d = self.to_dict()
        spa = d["segments_per_aggregate"]
        lines = [
            f"GRO: {count(d['packets'], 'packet')} in: {num(d['segments_merged'])} merged into "
            f"{count(d['aggregates'], 'aggregate')} (mean {spa['mean']}, max "
            f"{count(spa['max'], 'segment')}), {num(d['singles'])} held unmerged, "
            f"{num(d['passed'])} passed",
        ]
        kinds = {k: v for k, v in d["by_kind"].items() if v["aggregates"]}
        if len(kinds) > 1 or any(k != "tcp" for k in kinds):
            lines.append("  by kind:           " + ", ".join(
                f"{k} {num(v['aggregates'])} ({count(v['segments'], 'segment')})"
                for k, v in kinds.items()))
        if d["flush_reasons"]:
            lines.append("  completed because: " + _reasons(d["flush_reasons"]))
        if d["pass_reasons"]:
            lines.append("  passed because:    " + _reasons(d["pass_reasons"]))
        if any(d["checksums"].values()):
            lines.append("  checksums:         " + ", ".join(
                f"{k} {num(v)}" for k, v in d["checksums"].items() if v))
        if self.cut_aggregates:
            lines.append(f"  snaplen:           {count(self.cut_aggregates, 'aggregate')} "
                         f"{'holds' if self.cut_aggregates == 1 else 'hold'} segments "
                         f"cut by the snaplen: they carry the payload contiguous from their "
                         f"start; {count(self.cut_bytes_left_out, 'captured byte')} of later "
                         f"segments {'is' if self.cut_bytes_left_out == 1 else 'are'} not in OUT")
        pe = d["poll_ends"]
        if pe["poll_end"] or pe["budget"]:
            lines.append(f"  poll ends:         {num(pe['poll_end'])} with packets held (gap µs "
                         + " ".join(f"{k}:{num(v)}" for k, v in pe["gaps_us"].items())
                         + f"), budget {num(pe['budget'])}; timing x2 would move "
                         f"{num(pe['would_move']['x2'])}, x0.5 {num(pe['would_move']['x0.5'])}")
        if spa["histogram"]:
            lines.append("  segments/aggregate: " + " ".join(
                f"{k}:{num(v)}" for k, v in spa["histogram"].items()))
        return fit(lines)


def _reasons(counts):
    """``{reason: n}`` as "psh 28, options_changed 1", most frequent first."""
    return ", ".join(f"{k} {num(v)}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
