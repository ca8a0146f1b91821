"""The result of verify: problems found (kind, frames, stream, message),
counts, statistics, notes, and the lines of the summary."""

from __future__ import annotations

import os

from ..errors import EXIT_OK, EXIT_DIFFER
from ..text import count, fit
from .fields import _RANK, MAX_PROBLEMS

class Verdict:
    """Result of :func:`verify`: ``status`` (0 faithful, 1 differences),
    ``problems`` (dicts: kind, out_frame, in_frame, stream, message; the
    first :data:`MAX_PROBLEMS`), ``problems_total``, ``stats``."""

    def __init__(self, in_path, out_path, csum):
        self.in_path, self.out_path, self.csum = in_path, out_path, csum
        self.problems = []
        self.problems_total = 0
        self.by_kind = {}
        self.stats = {}
        self.notes = []
        self.ahead = {"tcp": 0, "udp": 0}   # packets GRO rejected that overtook (not problems)
        self.seconds = 0.0
        # (stream, position, problem) of holes whose next OUT frame was not
        # read yet when their window closed: named by a later window
        # (window.Comparer._close), so the name does not depend on how far
        # tshark's OUT output had come
        self.unnamed = []

    def add(self, kind, message, out_frame=None, in_frame=None, stream=None):
        """Count a problem and keep it (the first MAX_PROBLEMS); returns its
        dict, or None when it is beyond them."""
        self.problems_total += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if len(self.problems) >= MAX_PROBLEMS:
            return None
        p = {"kind": kind, "out_frame": out_frame, "in_frame": in_frame,
             "stream": stream, "message": message}
        self.problems.append(p)
        return p

    @property
    def status(self):
        return EXIT_DIFFER if self.problems_total else EXIT_OK

    def sorted_problems(self):
        """By OUT frame; at one frame, content differences first."""
        return sorted(self.problems, key=lambda p: (p["out_frame"] is None, p["out_frame"] or 0,
                                                    _RANK.get(p["kind"], 9), p["in_frame"] or 0))

    def to_dict(self):
        return {"result": "differ" if self.problems_total else "faithful",
                "in": os.fspath(self.in_path), "out": os.fspath(self.out_path),
                "csum": self.csum, **self.stats, "seconds": round(self.seconds, 3),
                "notes": self.notes, "problems_total": self.problems_total,
                "problems_by_kind": self.by_kind, "problems": self.sorted_problems()}

    def problem_lines(self, limit=10):
        lines = []
        for p in self.sorted_problems()[:limit]:
            where = f"OUT frame {p['out_frame']}" if p["out_frame"] else "OUT"
            if p["in_frame"]:
                where += f" (IN frame {p['in_frame']})"
            st = f", {p['stream']}" if p["stream"] else ""
            lines.append(f"  {where}{st}: {p['message']}")
        if self.problems_total > limit:
            lines.append(f"  ... {self.problems_total - limit:,} more "
                         f"({', '.join(f'{k} {n:,}' for k, n in sorted(self.by_kind.items()))})")
        return fit(lines)

    def summary_lines(self, limit=10):
        s = self.stats
        t, u, o = s["tcp"], s["udp"], s["other"]
        lines = [
            f"verify  IN  {self.in_path}: {count(s['frames_in'], 'frame')}",
            f"        OUT {self.out_path}: {count(s['frames_out'], 'frame')}",
            f"  TCP    {count(t['streams'], 'stream')} ({count(t['connections'], 'connection')}): "
            f"{count(t['bytes'], 'payload byte')} compared, {t['events']:,} SYN/FIN/RST, "
            f"{count(t['pure_acks'], 'pure ACK')}; {t['packets_in']:,} -> "
            f"{count(t['packets_out'], 'packet')}",
            f"  UDP    {count(u['flows'], 'flow')}: {count(u['bytes'], 'payload byte')} compared; "
            f"{u['datagrams_in']:,} -> {count(u['datagrams_out'], 'datagram')}",
            f"  other  {count(o['packets'], 'packet')} compared "
            + ("byte for byte (frame MD5)" if o["md5"] else "by length (no frame MD5 in this tshark)"),
            "  checks payload, order, SYN/FIN/RST, ACKs, datagram boundaries, "
            f"checksums (csum {self.csum}), malformed, expert errors, lengths, timestamps",
        ]
        lines += [f"  note: {n}" for n in self.notes]
        if self.problems_total:
            lines.append(f"DIFFERENT: {self.problems_total:,} problem"
                         f"{'s' if self.problems_total != 1 else ''} ({self.seconds:.1f} s)")
            lines += self.problem_lines(limit)
        else:
            lines.append(f"faithful: OUT carries exactly what IN carried ({self.seconds:.1f} s)")
        return lines[:2] + fit(lines[2:])       # IN and OUT lines: the paths as given

