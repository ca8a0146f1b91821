"""The ``pcapgro`` command line (click).  Thin: it parses options (merge's
and split's from the tables in :mod:`pcapgro.jobs.options`), calls the
library's jobs (:mod:`pcapgro.jobs`) and prints what they return.

Contract (every command): ``pcapgro COMMAND [OPTIONS] IN OUT`` with ``-``
for stdin/stdout; common options ``-q/--quiet``, ``-F pcap|pcapng``,
``--stats FILE`` (JSON, ``-`` = stdout), ``--version``, ``--help``.
Exit status: 0 done, 1 differences found (``verify``, ``--verify``), 2
usage error / unusable input, 3 input damaged part-way (output written up to
the damage), 4 packets lost by a live capture (``-i``: the kernel or the
interface dropped some; one warning line even with ``-q``), 130 interrupted (partial output removed), 141 OUT closed by its
reader (statistics of what was written, no message), 143 terminated by
SIGTERM (partial output removed; a live capture ends normally instead).  Never a traceback: :func:`main` turns every error into one line.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import stat
import sys

import click

from click.core import ParameterSource

from . import __version__
from . import jobs
from .capture import FORMATS
from .errors import (PcapgroError, DamagedInput, OptionError, OutputClosed, UnusableInput,
                     EXIT_USAGE, EXIT_DAMAGED, EXIT_INTERRUPTED, EXIT_PIPE, EXIT_TERMINATED)
from .jobs.run import lost_line
from .jobs import files
from .jobs.options import CALIBRATE_OPTIONS, MERGE_OPTIONS, SPLIT_OPTIONS, TUNNEL_OPTIONS

__all__ = ["cli", "main", "table_options"]


class _Exit(Exception):
    """Internal: leave with this exit status (message already printed)."""

    def __init__(self, status, message="interrupted"):
        self.status = status
        self.message = message


class _Terminated(KeyboardInterrupt):
    """Raised by the SIGTERM/SIGHUP handler :func:`main` installs: handled
    like Ctrl-C (partial output removed) but exits 128 + the signal number
    (143 for SIGTERM, 129 for SIGHUP), as a shell reports a program the
    signal ended.  Live capture replaces the handler while tcpdump runs:
    there these signals end the capture normally."""

    def __init__(self, signum=signal.SIGTERM):
        super().__init__()
        self.status = EXIT_TERMINATED if signum == signal.SIGTERM else 128 + int(signum)
        self.message = "terminated" if signum == signal.SIGTERM else "hangup"


def _on_sigterm(signum, frame):
    raise _Terminated(signum)


def _install_signal_handlers():
    """SIGTERM and SIGHUP abort like Ctrl-C (:class:`_Terminated`); a
    signal the parent ignores (``nohup``) stays ignored."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_sigterm)
        except (ValueError, OSError):       # not the main thread
            pass


def _err(msg):
    try:
        sys.stderr.write(f"pcapgro: {msg}\n")
        sys.stderr.flush()
    except OSError:
        pass


def _in_out(ctx, param, value):
    """IN OUT, or OUT alone with -i (live input)."""
    live = ctx.params.get("iface")
    if live is not None:
        if len(value) != 1:
            raise click.UsageError("with -i IFACE give OUT (and no IN)")
        return (None, value[0])
    if len(value) != 2:
        raise click.UsageError("give IN and OUT (or -i IFACE and OUT)")
    return tuple(value)


def live_options(f):
    """The live-input options (merge and split): -i replaces IN."""
    for dec in reversed([
        click.option("-i", "iface", metavar="IFACE", is_eager=True,
                     help="Capture live from IFACE (through tcpdump) instead of IN; "
                          "'any' for all interfaces (LINUX_SLL2). Ctrl-C ends it normally."),
        click.option("-f", "bpf", metavar="FILTER",
                     help="Capture filter (BPF, as tcpdump's), with -i."),
        click.option("-c", "count", type=click.IntRange(1), metavar="COUNT",
                     help="Stop after COUNT packets, with -i."),
        click.option("--duration", type=click.FloatRange(0, min_open=True), metavar="SECONDS",
                     help="Stop after SECONDS, with -i."),
        click.option("-s", "snaplen", type=click.IntRange(0, 262144), default=0, metavar="SNAPLEN",
                     help="Bytes captured per packet, with -i (0 = 262144)."),
        click.option("-B", "--buffer-size", "buffer_size", type=click.IntRange(1),
                     metavar="KiB",
                     help="Kernel capture buffer in KiB, as tcpdump's -B, with -i "
                          "(default 65536: a 1 Gbit/s stream is merged without drops)."),
    ]):
        f = dec(f)
    return f


def common_options(f):
    """Decorate a command with the options every command has and the
    positional arguments IN and OUT."""
    @click.argument("paths", nargs=-1, metavar="IN OUT", callback=_in_out)
    @click.option("-q", "--quiet", is_flag=True,
                  help="No progress bar and no statistics table (errors are still printed).")
    @click.option("-F", "out_format", type=click.Choice(FORMATS),
                  help="Output format (default: from OUT's extension, else the input's).")
    @click.option("--stats", "stats_path", metavar="FILE",
                  help="Write statistics as JSON to FILE ('-' = standard output).")
    @click.version_option(__version__, prog_name="pcapgro")
    @functools.wraps(f)
    def wrapper(paths, **kw):
        kw["in_path"], kw["out_path"] = paths
        return f(**kw)
    return wrapper


class _OutputClosed(Exception):
    """Internal: standard output was closed by its reader (EPIPE).  Not an
    OSError, so that click does not turn it into a silent exit 1."""


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise _OutputClosed() from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pcapgro")
def cli():
    """Rewrite packet captures the way Linux GRO (merge) and GSO (split) do.

    merge and split read IN and write OUT (pcap or pcapng; '-' for standard
    input / output); verify reads two files; calibrate fits merge's NAPI
    timing to a receiver's capture (WIRE RECEIVED).  Exit status: 0 done, 1
    differences found (verify; calibrate: not a GRO result), 2 usage error or unusable input, 3 input
    damaged part-way (output written up to the damage), 4 packets lost by
    a live capture (-i), 130 interrupted (143 SIGTERM, 129 SIGHUP).
    """


def _progress_bar(quiet, in_path):
    """A tqdm bar on stderr (bytes of input) when stderr is a terminal and
    not quiet; returns (callback or None, bar or None)."""
    if quiet:
        return None, None
    try:
        if not sys.stderr.isatty():
            return None, None
    except (AttributeError, ValueError):
        return None, None
    from tqdm import tqdm
    total = None
    if in_path != "-":
        try:
            st = os.stat(in_path)
            if stat.S_ISREG(st.st_mode):
                total = st.st_size
        except OSError:
            pass
    bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
               file=sys.stderr, leave=False, dynamic_ncols=True)

    def progress(n, bar=bar):
        bar.update(n - bar.n)
    return progress, bar


class _LiveBar:
    """The progress line of a live capture on a terminal (tqdm on stderr):
    packets captured, packets/s, packets out (aggregates and the rest) and
    tcpdump's drops so far (asked for every second), redrawn by a thread
    every :data:`TICK` seconds.  Nothing on a pipe or with -q."""

    TICK = 0.5

    @classmethod
    def start(cls, quiet, job):
        """A running bar for ``job`` (a :class:`~pcapgro.jobs.Job` with
        live input), or None when quiet or stderr is not a terminal."""
        if quiet:
            return None
        try:
            if not sys.stderr.isatty():
                return None
        except (AttributeError, ValueError):
            return None
        return cls(job)

    def __init__(self, job):
        import threading
        from tqdm import tqdm
        self.job = job
        self.bar = tqdm(total=None, unit=" pkt", file=sys.stderr, leave=False,
                        dynamic_ncols=True, desc=f"capturing on {job.live.iface}")
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="pcapgro-live-bar")
        self.thread.start()

    def _run(self):
        ticks = 0
        while not self.done.wait(self.TICK):
            ticks += 1
            try:
                self._draw(ticks)
            except Exception:       # a progress line never ends a capture
                pass

    def _draw(self, ticks):
        live = self.job.live
        if ticks % 2 == 0:
            live.request_stats()
        c = self.job.counts()
        if c is None:
            return
        st = live.statistics()
        drops = "" if st["dropped_kernel"] is None else f", {live.lost():,} dropped"
        self.bar.set_postfix_str(f"{c['packets_out']:,} out{drops}", refresh=False)
        if c["packets_in"] > self.bar.n:
            self.bar.update(c["packets_in"] - self.bar.n)     # draws the line
        else:
            self.bar.refresh()

    def close(self):
        """Stop the thread and take the line away."""
        self.done.set()
        self.thread.join(timeout=2)
        self.bar.close()


def _stats_table(stats):
    return ("            packets          bytes\n"
            f"  in   {stats['packets_in']:>12,} {stats['bytes_in']:>14,}\n"
            f"  out  {stats['packets_out']:>12,} {stats['bytes_out']:>14,}\n")


def _write_err(lines):
    try:
        sys.stderr.write("".join(line + "\n" for line in lines))
    except OSError:
        pass


def _report(report, quiet, stats_path, verify_lines=None):
    """Print a job's :class:`~pcapgro.jobs.Report` (the table on stderr
    unless quiet) and write its ``--stats`` (a file: atomically)."""
    if not quiet:
        try:
            sys.stderr.write(_stats_table(report))
        except OSError:
            pass
    if stats_path:
        if stats_path == "-":
            import json     # here: only --stats needs it (~1.5 ms of start-up)
            sys.stdout.write(json.dumps(report, indent=2, sort_keys=False) + "\n")
            sys.stdout.flush()
        else:
            files.write_stats(stats_path, report)
    if not quiet:
        _write_err(report.lines)
    warning = lost_line(report)
    if warning is not None:
        _err(warning)       # even with -q: a script must not miss it
    if report.verdict is not None:
        v = report.verdict
        _write_err(v.summary_lines() if not quiet else v.problem_lines())


def _refuse_stats_clobber(in_path, out_path, stats_path, out_label="OUT"):
    """Usage error (exit 2) when the ``--stats`` file would overwrite IN or
    OUT."""
    if stats_path and stats_path != "-":
        for label, p in (("IN", in_path), (out_label, out_path)):
            if p is not None and files.clobbers(stats_path, p):
                raise click.UsageError(f"--stats {stats_path} is the same file as {label}: "
                                       "write the statistics to another file")


def _check_stats_path(stats_path):
    """Refuse a ``--stats`` file that could not be written (UnusableInput,
    exit 2) before any work is done: a directory, a missing directory, a
    write-protected file or directory.  Otherwise the failure would come
    only after OUT was written, or after verify had run."""
    if stats_path == "":
        # as an empty IN or OUT is worded (issue 19): not silently ignored
        raise UnusableInput("cannot write --stats '': empty file name")
    if not stats_path or stats_path == "-":
        return
    real = os.path.realpath(stats_path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UnusableInput(f"cannot write {stats_path}: {e.strerror or e}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise UnusableInput(f"cannot write {stats_path}: Is a directory")
        if not os.access(real, os.W_OK):
            raise UnusableInput(f"cannot write {stats_path}: Permission denied")
        return
    d = os.path.dirname(real) or "."
    if not os.path.isdir(d):
        raise UnusableInput(f"cannot write {stats_path}: No such file or directory")
    if not os.access(d, os.W_OK | os.X_OK):
        raise UnusableInput(f"cannot write {stats_path}: Permission denied")


def _usage(make):
    """``make()``, with the library's OptionError shown as a usage error."""
    try:
        return make()
    except OptionError as e:
        raise click.UsageError(str(e)) from None


def _run_job(job, in_path, out_path, quiet, stats_path, do_verify):
    """Run a checked :class:`~pcapgro.jobs.Job` with the common options and
    return the exit status: 0, 1 (``--verify`` found differences), 3 (IN
    damaged part-way), 4 (a live capture lost packets), 141 (OUT closed
    by its reader)."""
    if stats_path == "-" and out_path == "-":
        raise click.UsageError("--stats - needs OUT to be a file (standard output is the capture)")
    _refuse_stats_clobber(None if job.live is not None else in_path, out_path, stats_path)
    _check_stats_path(stats_path)
    if stats_path == "-" and sys.stdout is None:
        raise UnusableInput("cannot write --stats - : standard output is closed")
    if job.live is not None:
        progress, bar = None, _LiveBar.start(quiet, job)
    else:
        progress, bar = _progress_bar(quiet, in_path)
    try:
        report = job.run(progress)
    except KeyboardInterrupt as e:
        raise _Exit(getattr(e, "status", EXIT_INTERRUPTED),
                    getattr(e, "message", "interrupted")) from None
    except DamagedInput as e:
        _report(e.report, quiet, stats_path)
        if do_verify:
            _err("verify skipped: the input is damaged")
        _err(str(e))
        return EXIT_DAMAGED
    except OutputClosed as e:
        # the reader had enough (editcap exits 141 here): no error line
        _report(e.report, quiet, stats_path)
        _stdout_to_devnull()
        return EXIT_PIPE
    finally:
        if bar is not None:
            bar.close()
    _report(report, quiet, stats_path)
    return report.status


def _stdout_to_devnull():
    """Standard output's reader is gone: nothing more may be written there
    (Python's flush at exit would fail on it)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
    except OSError:
        pass


def _verify_option(f):
    return click.option(
        "--verify", "do_verify", is_flag=True,
        help="Then check OUT against IN through tshark, as 'pcapgro verify' does "
             "(exit 1 if they differ; needs tshark, IN and OUT files).")(f)


def _live(opts, quiet):
    """The LiveCapture for -i, or None; live-only options without -i are a
    usage error."""
    iface = opts.pop("iface")
    bpf, count, duration, snaplen, buffer_size = (
        opts.pop(k) for k in ("bpf", "count", "duration", "snaplen", "buffer_size"))
    if iface is None:
        if bpf or count or duration or snaplen or buffer_size is not None:
            raise click.UsageError("-f, -c, --duration, -s and -B go with -i IFACE")
        return None
    from .live import LiveCapture
    return LiveCapture(iface, bpf=bpf, count=count, duration=duration, snaplen=snaplen,
                       quiet=quiet, buffer_size=buffer_size)


def table_options(table):
    """Decorator adding one click option per :class:`~pcapgro.jobs.options.
    Option` of ``table`` (``--help`` lists them in table order)."""
    def deco(f):
        for o in reversed(table):
            kw = {"help": o.help}
            if o.is_flag:
                kw["is_flag"] = True
            else:
                kw["type"] = o.type
                if o.default is not None:
                    kw["default"] = o.default
                    kw["show_default"] = not o.multiple
                if o.metavar:
                    kw["metavar"] = o.metavar
                if o.multiple:
                    kw["multiple"] = True
            f = click.option(o.flag, o.name, **kw)(f)
        return f
    return deco


def _given(table, opts):
    """The options of ``table`` set on the command line: {name: value}."""
    ctx = click.get_current_context()
    unset = (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)
    return {o.name: opts[o.name] for o in table
            if ctx.get_parameter_source(o.name) not in unset}


_MERGE_EPILOG = """\b
Examples:
  pcapgro merge samples/tcp4-bulk-wire.pcap /tmp/gro.pcapng
  pcapgro merge --udp gro --stats - capture.pcap merged.pcap
  pcapgro merge --fraglist --local-port 443 router.pcap out.pcapng
"""


@cli.command(epilog=_MERGE_EPILOG)
@table_options(MERGE_OPTIONS)
@_verify_option
@live_options
@common_options
def merge(in_path, out_path, quiet, out_format, stats_path, do_verify, **opts):
    """Merge packets of IN the way Linux GRO does and write OUT.

    TCP segments of a flow are coalesced into aggregates as a Linux 6.18
    receiver's GRO would hand them up; everything else passes unchanged,
    in order.  With --no-gro, copy IN to OUT unchanged.
    """
    live = _live(opts, quiet)
    note = None if quiet else _err
    job = _usage(lambda: jobs.plan_merge(
        live if live is not None else in_path, out_path, out_format=out_format,
        verify=do_verify, note=note, explicit=True, **_given(MERGE_OPTIONS, opts)))
    sys.exit(_run_job(job, in_path, out_path, quiet, stats_path, do_verify))


_SPLIT_EPILOG = """\b
Examples:
  pcapgro split samples/tcp4-tso-sender.pcap /tmp/wire.pcap
  pcapgro split --gso-size 1200 samples/udp4-uso-sender.pcap /tmp/wire.pcap
  pcapgro split --restore merged.pcapng original.pcapng
"""


@cli.command(epilog=_SPLIT_EPILOG)
@table_options(SPLIT_OPTIONS)
@_verify_option
@live_options
@common_options
def split(in_path, out_path, quiet, out_format, stats_path, do_verify, **opts):
    """Split oversized packets of IN into wire-sized segments the way Linux
    GSO/TSO does and write OUT.

    TCP super-frames (including IPv4 total length 0 and IPv6 jumbograms)
    become MSS-sized segments with correct headers and checksums; UDP
    super-packets need --gso-size (pcapgro merge's own aggregates record
    it).  Packets that need no split pass
    unchanged (partial checksums from a sender's offload are completed).
    """
    live = _live(opts, quiet)
    job = _usage(lambda: jobs.plan_split(
        live if live is not None else in_path, out_path, out_format=out_format,
        verify=do_verify, explicit=True, **_given(SPLIT_OPTIONS, opts)))
    sys.exit(_run_job(job, in_path, out_path, quiet, stats_path, do_verify))


_VERIFY_EPILOG = """\b
Examples:
  pcapgro verify samples/tcp4-bulk-wire.pcap /tmp/gro.pcapng
  pcapgro verify --csum kernel wire.pcap kernel-gro.pcap
  pcapgro verify --json in.pcap out.pcapng | jq .problems
"""


@cli.command("verify", epilog=_VERIFY_EPILOG)
@click.argument("in_path", metavar="IN")
@click.argument("out_path", metavar="OUT")
@click.option("--csum", type=click.Choice(["valid", "kernel"]), default="valid", show_default=True,
              help="Checksums OUT was written with: valid ones, or the kernel's on aggregates "
                   "(merge --csum kernel, kernel GRO captures): bad TCP/UDP checksums on "
                   "aggregates are then expected.")
@click.option("--json", "as_json", is_flag=True, help="The verdict as JSON on standard output.")
@click.option("--stats", "stats_path", metavar="FILE",
              help="Also write the verdict as JSON to FILE ('-' = standard output).")
@click.option("-q", "--quiet", is_flag=True, help="No summary: only the differences are listed.")
@click.option("--max-problems", type=click.IntRange(1), default=10, show_default=True,
              metavar="N", help="Differences listed in the summary.")
@table_options(TUNNEL_OPTIONS)
@click.version_option(__version__, prog_name="pcapgro")
def verify_cmd(in_path, out_path, csum, as_json, stats_path, quiet, max_problems, **tunnels):
    """Check through tshark that OUT carries exactly what IN carried.

    TCP streams (matched by 4-tuple): same payload bytes in the same order,
    same SYN/FIN/RST and pure ACKs; UDP flows: same payload, datagram
    boundaries where OUT keeps them; other packets: identical bytes, same
    order.  OUT must not add malformed packets, expert errors or bad
    checksums, and has consistent lengths and non-decreasing timestamps.
    VXLAN / Geneve on the ports given (as to merge) and GRE, IPIP, SIT
    and IP6IP6 always are compared by their inner flow.
    Exit status: 0 faithful, 1 differences (first ones named by OUT frame
    number and stream), 2 unusable input or no tshark.
    """
    for label, p in (("IN", in_path), ("OUT", out_path)):
        if p == "-":
            raise click.UsageError(f"verify needs {label} to be a file (tshark reads it; "
                                   "'-' is not supported)")
    _refuse_stats_clobber(None, out_path, stats_path)
    _refuse_stats_clobber(in_path, None, stats_path)
    _check_stats_path(stats_path)
    if sys.stdout is None and (as_json or stats_path == "-" or not quiet):
        # -q alone may run with stdout closed: the exit status is the answer
        raise UnusableInput("cannot write the result: standard output is closed")
    progress, bar = _progress_bar(quiet or as_json, in_path)
    try:
        report = _usage(lambda: jobs.verify(in_path, out_path, csum=csum, progress=progress,
                                                **tunnels))
    finally:
        if bar is not None:
            bar.close()
    v = report.verdict
    if sys.stdout is None:
        pass
    elif as_json or stats_path == "-":
        import json
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    elif quiet:
        if v.problems_total:
            sys.stdout.write("".join(ln + "\n" for ln in v.problem_lines(max_problems)))
    else:
        sys.stdout.write("".join(ln + "\n" for ln in v.summary_lines(max_problems)))
    if sys.stdout is not None:
        sys.stdout.flush()
    if stats_path and stats_path != "-":
        files.write_stats(stats_path, report)
    sys.exit(report.status)


_CALIBRATE_EPILOG = """\b
Examples:
  pcapgro calibrate tests/data/kernel/udp4-fwd-wire.pcap tests/data/kernel/udp4-fwd-gro.pcap
  pcapgro calibrate --udp gro --stats fit.json wire.pcap receiver.pcap
  $(pcapgro calibrate -q wire.pcap receiver.pcap | sed 's/ OUT$/ out.pcap/')
"""


@cli.command("calibrate", epilog=_CALIBRATE_EPILOG)
@click.argument("wire_path", metavar="WIRE")
@click.argument("received_path", metavar="RECEIVED")
@table_options(CALIBRATE_OPTIONS)
@click.option("--max-merges", type=click.IntRange(1), default=None, metavar="N",
              help="Merges the fit may run (default 150; each is one merge of WIRE in memory).")
@click.option("--stats", "stats_path", metavar="FILE",
              help="Write the fit as JSON to FILE ('-' = standard output).")
@click.option("-q", "--quiet", is_flag=True,
              help="Print only the fitted 'pcapgro merge' command line.")
@click.version_option(__version__, prog_name="pcapgro")
def calibrate_cmd(wire_path, received_path, max_merges, stats_path, quiet, **opts):
    """Fit merge's NAPI timing to a receiver's own capture.

    WIRE is what the receiver's GRO got (tcpdump -Q out on the sender's
    end), RECEIVED the receiver's capture after its GRO (tcpdump -Q in).
    Fits the gap model (--poll-gap) and the work model (--poll-model work
    and its costs), picks the best agreement (fewest joins extra and
    missing, then packets out, both over the packets RECEIVED holds) and
    prints it as a 'pcapgro merge' command line, with the agreement
    reached, each parameter's sensitivity and the aggregate boundaries no
    setting explains.  Options given (--udp, --fraglist, --csum, ...) are
    kept; --udp/--fraglist are detected from RECEIVED's UDP aggregates when
    not given (a receiver that merged no datagram: give them).  Exit
    status: 0 fitted (exact or not: the report says), 1 RECEIVED is not a
    GRO result of this kernel/configuration (first offending packet
    named), 2 unusable input (WIRE and RECEIVED not both '-').
    """
    _refuse_stats_clobber(None, wire_path, stats_path, "WIRE")
    _refuse_stats_clobber(None, received_path, stats_path, "RECEIVED")
    _check_stats_path(stats_path)
    if sys.stdout is None:
        raise UnusableInput("cannot write the result: standard output is closed")
    report = _usage(lambda: jobs.calibrate(wire_path, received_path, max_merges=max_merges,
                                           **_given(CALIBRATE_OPTIONS, opts)))
    c = report.calibration
    if not c.explainable:
        _err(report.lines[0])
    elif stats_path != "-":
        text = [report["command"]] if quiet else report.lines
        sys.stdout.write("".join(ln + "\n" for ln in text))
    if stats_path == "-":
        import json
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    sys.stdout.flush()
    if stats_path and stats_path != "-":
        files.write_stats(stats_path, report)
    sys.exit(report.status)


def _fill_closed_std_fds():
    """Started with standard input, output or error closed (``2>&-``):
    give each closed descriptor 0-2 ``/dev/null``, so that no file opened
    later (OUT, a temp file) lands on descriptor 1 or 2 where tshark or
    tcpdump would write into it, and messages to a closed stderr are
    dropped instead of failing.  ``sys.stdin``/``sys.stdout`` stay None
    (Python's mark of a closed stream): reading ``-`` or writing ``-`` is
    then refused with one line (exit 2)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                n = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if n != fd:     # a lower descriptor was free: filled on its turn
                os.dup2(n, fd)
                os.close(n)
    if sys.stderr is None:
        try:
            sys.stderr = open(os.devnull, "w")
        except OSError:
            pass


def main(argv=None):
    """Console entry point: runs :data:`cli` and maps every error to one
    stderr line and an exit status (never a traceback).  SIGTERM is handled
    like Ctrl-C (partial output removed), with exit status 143; closed
    standard streams are handled by :func:`_fill_closed_std_fds`.

    Run as the program (``argv`` None: the console script, ``python -m
    pcapgro.cli``), it first freezes the cyclic GC's objects
    (:func:`gc.freeze`): what the imports made lives until exit anyway,
    and neither the run's collections nor the interpreter's at exit then
    walk it (~6 ms of every command).  Every file is still closed by the
    job itself; a caller passing ``argv`` (a test, in its own process)
    keeps its GC as it is."""
    if argv is None:
        gc.freeze()
    _fill_closed_std_fds()
    _install_signal_handlers()
    try:
        rv = cli.main(args=argv, prog_name="pcapgro", standalone_mode=False)
        status = rv if isinstance(rv, int) else 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except click.exceptions.Exit as e:
        status = e.exit_code
    except click.ClickException as e:
        e.show()
        status = e.exit_code
    except click.exceptions.Abort as e:
        # click turns a KeyboardInterrupt (also our _Terminated) into Abort
        why = e.__cause__ or e.__context__
        _err(getattr(why, "message", "interrupted"))
        status = getattr(why, "status", EXIT_INTERRUPTED)
    except _Exit as e:
        _err(e.message)
        status = e.status
    except KeyboardInterrupt as e:
        _err(getattr(e, "message", "interrupted"))
        status = getattr(e, "status", EXIT_INTERRUPTED)
    except (BrokenPipeError, _OutputClosed):
        # standard output closed while writing statistics or a verdict
        # (EPIPE on OUT itself ends a job with 141, see _run_job)
        _err("error: output closed (broken pipe)")
        _stdout_to_devnull()
        status = EXIT_USAGE
    except PcapgroError as e:
        _err(f"error: {e}")
        status = e.exit_status
    except MemoryError:
        _err("error: out of memory")
        status = EXIT_USAGE
    except Exception as e:      # a bug: still one line, never a traceback
        _err(f"error: internal error: {type(e).__name__}: {e}")
        status = EXIT_USAGE
    sys.exit(status)


if __name__ == "__main__":
    main()
