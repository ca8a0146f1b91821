"""How pcapgro's report lines read on a terminal, as a tcpdump user reads
them: one number format (thousands separated by commas, as the statistics
table prints them), singular nouns for one ("1 flow"), and lines of at most
80 columns, wrapped between words.

* :func:`num` -- ``1109`` -> ``"1,109"``.
* :func:`count` -- ``(1, "flow")`` -> ``"1 flow"``, ``(2, "flow")`` ->
  ``"2 flows"``.
* :func:`fit` -- list of lines -> list of lines of at most :data:`WIDTH`
  columns.
"""

import re

__all__ = ["WIDTH", "num", "count", "fit"]

WIDTH = 80
"""Columns a report line may take (a terminal's default width)."""

_CONTINUATION = "    "
# "  completed because: ", "GRO: ": a short label the value follows
_LABEL = re.compile(r"^ *[A-Za-z][A-Za-z/ ]{0,22}: +(?=\S)")


def num(n):
    """An integer count as printed everywhere: ``1,109``."""
    return f"{n:,}"


def count(n, noun, plural=None):
    """``n`` and ``noun``, plural unless ``n`` is 1: ``count(1, "flow")``
    is ``"1 flow"``, ``count(1109, "packet")`` is ``"1,109 packets"``.
    ``plural`` when the noun does not just take an "s"."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def fit(lines, width=WIDTH):
    """``lines`` (iterable of str) with every line longer than ``width``
    columns wrapped between words.  Continuation lines start under the
    value of a ``label: value`` line (``"  passed because:    "``), else 4
    columns deeper than the line they continue.  A single word longer than
    the width (a long path) stays whole on its own line.  Returns a new
    list of str."""
    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        body = line.lstrip(" ")
        lead = " " * (len(line) - len(body))
        label = _LABEL.match(line)
        more = " " * len(label.group(0)) if label else lead + _CONTINUATION
        import textwrap     # here: ~1 ms of start-up, for long lines only
        out += textwrap.wrap(body, width=width, initial_indent=lead, subsequent_indent=more,
                             break_long_words=False, break_on_hyphens=False)
    return out
