"""One IN -> OUT job: reader, transform, writer, statistics.

What every merge and split run does, whoever calls it (the CLI or a
program): open IN (path, ``'-'``, stream or live capture), pick the output
format, build the transform for it, write OUT (temp file + rename: a
failure or an interrupt leaves no partial OUT), collect the statistics and
optionally verify OUT against IN.  Errors are raised, never turned into
exit statuses here (:mod:`pcapgro.cli` does that).
"""

from __future__ import annotations

from .. import pipeline
from ..errors import DamagedInput, OutputClosed, EXIT_LOST
from ..text import num
from . import files

__all__ = ["Report", "Job", "live_lines", "lost_line"]


class Report(dict):
    """The statistics dict of a job (what ``--stats`` writes:
    ``packets_in``, ``bytes_in``, ``packets_out``, ``bytes_out`` and the
    engine's object: ``gro``, ``gso``, ``restore``, ``forward``,
    ``verify``; ``live`` with live input: tcpdump's counts, see
    :meth:`pcapgro.live.LiveCapture.statistics`), plus what the CLI
    prints, as attributes.

    Attributes:
        lines:   list of str: the engine's summary, printed after the
                 packet counts (empty for a pass-through).
        verdict: the :class:`pcapgro.verify.Verdict` of ``verify=True``
                 (or of :func:`pcapgro.verify`), else None.
        status:  0, 1 when the verdict found differences, 4
                 (:data:`~pcapgro.errors.EXIT_LOST`) when a live capture
                 lost packets (``live.dropped_kernel`` or
                 ``live.dropped_interface`` not zero).
    """

    def __init__(self, stats=(), lines=(), verdict=None):
        super().__init__(stats)
        self.lines = list(lines)
        self.verdict = verdict
        self.status = verdict.status if verdict is not None else 0
        if not self.status and lost(self):
            self.status = EXIT_LOST


def lost(stats):
    """Packets a live capture's statistics (``stats["live"]``) say the
    kernel or the interface dropped (int; 0 for file input)."""
    live = stats.get("live") or {}
    return ((live.get("dropped_kernel") or 0) + (live.get("dropped_interface") or 0)
            + (live.get("lost_at_stop") or 0))


def live_lines(live):
    """The statistics table's lines of a live capture (``live``: the
    ``"live"`` dict of a :class:`Report`): list of str."""
    if live.get("captured") is None:
        return ["live: tcpdump gave no statistics (ended by a signal?)"]
    line = (f"live: {num(live['captured'])} packets captured by tcpdump, "
            f"{num(live['received_by_filter'])} received by filter, "
            f"{num(live['dropped_kernel'])} dropped by kernel")
    if live["dropped_interface"]:
        line += f", {num(live['dropped_interface'])} dropped by interface"
    lines = [line]
    if live.get("lost_at_stop"):
        lines.append(f"      {num(live['lost_at_stop'])} received before the stop and never "
                     "handed over (tcpdump ended first)")
    return lines


def lost_line(stats):
    """The warning of a live capture that lost packets (None if it lost
    none): one line, printed even with -q."""
    n = lost(stats)
    if not n:
        return None
    live = stats["live"]
    why = [f"{num(live['dropped_kernel'] or 0)} dropped by kernel"]
    if live.get("dropped_interface"):
        why.append(f"{num(live['dropped_interface'])} by interface")
    if live.get("lost_at_stop"):
        why.append(f"{num(live['lost_at_stop'])} at the stop")
    return f"warning: {num(n)} packets lost ({', '.join(why)}, -B {live['buffer_kib']} KiB)"


class Job:
    """A checked IN -> OUT job, ready to :meth:`run`.

    Args:
        src:   IN: a path, ``'-'`` (standard input), a binary stream or a
               :class:`pcapgro.live.LiveCapture` (not started yet).
        dst:   OUT: a path, ``'-'`` (standard output) or a binary stream.
        build: callable(output format) -> (transform or None, callable()
               -> dict of engine statistics, callable() -> list of str).
        out_format: 'pcap', 'pcapng' or None (OUT's extension, else IN's).
        after: None or callable() -> Verdict, run once OUT is complete
               and IN was not damaged (``verify=True``).

    Raises (on construction): OptionError when OUT names IN.
    """

    def __init__(self, src, dst, build, out_format=None, after=None):
        self.src, self.dst, self.build = src, dst, build
        self.out_format = out_format
        self.after = after
        self.live = src if files.is_live(src) else None
        self._io = None
        files.refuse_clobber(files.path_of(src), files.path_of(dst))

    def counts(self):
        """The running job's counts so far (:func:`pipeline.counts`: packets
        and bytes in and out), or None before it opened IN and OUT.  Safe
        to call from another thread (a progress line)."""
        io = self._io
        return pipeline.counts(*io) if io is not None else None

    def run(self, progress=None):
        """Run the job.

        Args:
            progress: None or callable(bytes read so far: int).
        Returns: a :class:`Report`.
        Raises:
            DamagedInput: IN damaged part-way; OUT holds everything before
                the damage, ``e.report`` the statistics.
            OutputClosed: OUT's reader closed it (EPIPE); ``e.report``.
            UnusableInput: IN or OUT unusable.
            KeyboardInterrupt: OUT removed (a temp file) first.
        """
        reader = files.open_in(self.src)
        try:
            fmt = files.out_format(self.dst, self.out_format, reader.format)
            transform, extra, table = self.build(fmt)
            writer = files.open_out(self.dst, fmt)
            self._io = (reader, writer)
            if self.live is not None:
                _flush_each_batch(writer)
                progress = None
            damaged, closed = _write(reader, writer, transform, progress)
        finally:
            files.close_in(reader, self.src)
            if self.live is not None:
                self.live.check()
        stats = pipeline.counts(reader, writer)
        stats.update(extra())
        if self.live is not None:
            stats["live"] = self.live.statistics()
        verdict = None
        if self.after is not None and damaged is None and not closed:
            verdict = self.after()
            stats["verify"] = verdict.to_dict()
        lines = table()
        if self.live is not None:
            lines = (live_lines(stats["live"]) + list(lines)
                     + [f"tcpdump: {w}" for w in self.live.warnings()])
        report = Report(stats, lines, verdict)
        if closed:
            raise OutputClosed(report)
        if damaged is not None:
            damaged.report = report
            raise damaged
        return report


def _write(reader, writer, transform, progress):
    """pipeline.run, then close OUT.  Returns (DamagedInput or None,
    True when OUT's reader closed it); OUT aborted on any other error."""
    damaged = None
    try:
        try:
            pipeline.run(reader, writer, transform, progress)
        except DamagedInput as e:
            damaged = e         # everything before it is written: kept
        writer.close()
    except BrokenPipeError:
        try:
            writer.abort()
        except OSError:
            pass
        return damaged, True
    except BaseException:
        writer.abort()
        raise
    return damaged, False


def _flush_each_batch(writer):
    """Live output: write every batch out as soon as it is made (so
    ``pcapgro merge -i eth0 - | wireshark -k -i -`` shows packets as they
    come), instead of collecting 1 MiB first."""
    wb = writer.write_batch
    sink = writer._sink
    # the pcap writer puts its file header in front at its first flush
    flush = getattr(writer, "_flush", None) or sink.flush

    def write_batch(events):
        wb(events)
        flush()
        try:
            sink.f.flush()
        except (AttributeError, OSError, ValueError):
            pass
    writer.write_batch = write_batch
