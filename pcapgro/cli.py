"""The ``pcapgro`` command line (click).  Thin: all logic lives in
:mod:`pcapgro.capture`, :mod:`pcapgro.pipeline` and the engines.

Contract (every command): ``pcapgro COMMAND [OPTIONS] IN OUT`` with ``-``
for stdin/stdout; common options ``-q/--quiet``, ``-F pcap|pcapng``,
``--stats FILE`` (JSON, ``-`` = stdout), ``--version``, ``--help``.
Exit status: 0 done, 1 differences found (``verify``, ``--verify``), 2
usage error / unusable input, 3 input damaged part-way (output written up to
the damage), 130 interrupted (partial output removed), 143 terminated by
SIGTERM (partial output removed; a live capture ends normally instead).  Never a traceback: :func:`main` turns every error into one line.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import stat
import sys

import click

from . import __version__
from . import pipeline
from .capture import open_reader, open_writer, format_for_path, same_file, FORMATS
from .errors import (PcapgroError, DamagedInput, UnusableInput, EXIT_USAGE,
                     EXIT_DAMAGED, EXIT_INTERRUPTED, EXIT_TERMINATED)

__all__ = ["cli", "main", "run_command"]


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
    input / output); verify reads two files.  Exit status: 0 done, 1
    differences found (verify), 2 usage error or unusable input, 3 input
    damaged part-way (output written up to the damage), 130 interrupted
    (143 SIGTERM, 129 SIGHUP).
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


def _stats_table(stats):
    return ("            packets          bytes\n"
            f"  in   {stats['packets_in']:>12,} {stats['bytes_in']:>14,}\n"
            f"  out  {stats['packets_out']:>12,} {stats['bytes_out']:>14,}\n")


def _report(stats, quiet, stats_path):
    if not quiet:
        try:
            sys.stderr.write(_stats_table(stats))
        except OSError:
            pass
    if stats_path:
        text = json.dumps(stats, indent=2, sort_keys=False) + "\n"
        if stats_path == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            try:
                with open(stats_path, "w") as fh:
                    fh.write(text)
            except OSError as e:
                raise UnusableInput(f"cannot write {stats_path}: {e.strerror or e}") from None


def _clobbers(a, b):
    """``a`` would overwrite the regular file (or the same new path) ``b``:
    two names of one device or FIFO (``/dev/null``) are fine."""
    return same_file(a, b) and not (os.path.exists(a) and not os.path.isfile(a))


def _stdin_is(path):
    """Standard input is redirected from the regular file ``path``."""
    try:
        a, b = os.fstat(0), os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(a.st_mode) and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _refuse_clobber(in_path, out_path, stats_path, out_label="OUT"):
    """Usage error (exit 2) when OUT or the ``--stats`` file would overwrite
    IN, or the ``--stats`` file is OUT (editcap and tcpdump would destroy
    the capture being read; pcapgro refuses instead)."""
    if in_path == "-" and out_path != "-" and _stdin_is(out_path):
        raise click.UsageError(f"{out_label} {out_path} is the file standard input reads: "
                               "write to another file")
    if in_path is not None and _clobbers(out_path, in_path):
        raise click.UsageError(f"{out_label} {out_path} is the same file as IN: "
                               "write to another file")
    if stats_path and stats_path != "-":
        for label, p in (("IN", in_path), (out_label, out_path)):
            if p is not None and _clobbers(stats_path, p):
                raise click.UsageError(f"--stats {stats_path} is the same file as {label}: "
                                       "write the statistics to another file")


def _check_stats_path(stats_path):
    """Refuse a ``--stats`` file that could not be written (UnusableInput,
    exit 2) before any work is done: a directory, a missing directory, a
    write-protected file or directory.  Otherwise the failure would come
    only after OUT was written, or after verify had run."""
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


def run_command(in_path, out_path, quiet=False, out_format=None, stats_path=None,
                transform=None, extra_stats=None, build=None, after=None, live=None):
    """Run one IN -> OUT job with the common options.

    Args:
        in_path, out_path: paths or '-'.
        quiet:       no progress bar / statistics table.
        out_format:  'pcap', 'pcapng' or None (OUT's extension, else input's).
        stats_path:  None, a path, or '-' (stdout; refused when OUT is '-').
        transform:   None or callable(iterator of events) -> iterator of events.
        extra_stats: None or callable() -> dict of {key: dict} merged into the
                     statistics (e.g. ``{"gro": {...}}``).
        build:       None or callable(output format) -> (transform,
                     extra_stats, table) built once the output format is
                     known; ``table`` is None or callable() -> list of lines
                     printed after the packet counts (unless quiet).
        live:        None, or a :class:`pcapgro.live.LiveCapture` to read
                     instead of ``in_path``: output is flushed after every
                     batch, and SIGINT/SIGTERM end the capture normally.
        after:       None or callable() -> (stats dict, lines, status) run
                     once OUT is complete and the input was not damaged
                     (``--verify``); its statistics join the others, its
                     lines go to stderr after the table, its status (0/1)
                     is returned.
    Returns: the exit status (0, 1 or 3).
    Raises: PcapgroError (exit 2), _Exit(130) on KeyboardInterrupt, _Exit(143)
            on SIGTERM (OUT removed in both cases).
    """
    if stats_path == "-" and out_path == "-":
        raise click.UsageError("--stats - needs OUT to be a file (standard output is the capture)")
    _refuse_clobber(None if live is not None else in_path, out_path, stats_path)
    _check_stats_path(stats_path)
    if stats_path == "-" and sys.stdout is None:
        raise UnusableInput("cannot write --stats - : standard output is closed")
    reader = live.start() if live is not None else open_reader(in_path)
    status = 0
    damaged = None
    try:
        fmt = out_format or format_for_path(out_path, reader.format)
        table = None
        if build is not None:
            transform, extra_stats, table = build(fmt)
        writer = open_writer(out_path, fmt)
        if live is not None:
            _flush_each_batch(writer)
            progress, bar = None, None
        else:
            progress, bar = _progress_bar(quiet, in_path)
        try:
            pipeline.run(reader, writer, transform, progress)
        except DamagedInput as e:
            damaged = e
            writer.close()
        except KeyboardInterrupt as e:
            writer.abort()
            raise _Exit(getattr(e, "status", EXIT_INTERRUPTED),
                        getattr(e, "message", "interrupted")) from None
        except BaseException:
            writer.abort()
            raise
        else:
            writer.close()
        finally:
            if bar is not None:
                bar.close()
    finally:
        reader.close()
        if live is not None:
            live.check()
    stats = pipeline.counts(reader, writer)
    if extra_stats is not None:
        stats.update(extra_stats())
    checked = None
    if after is not None and damaged is None:
        checked = after()
        stats.update(checked[0])
    _report(stats, quiet, stats_path)
    if table is not None and not quiet:
        try:
            sys.stderr.write("".join(line + "\n" for line in table()))
        except OSError:
            pass
    if checked is not None:
        try:
            sys.stderr.write("".join(line + "\n" for line in checked[1]))
        except OSError:
            pass
        status = checked[2]
    elif after is not None and damaged is not None:
        _err("verify skipped: the input is damaged")
    if damaged is not None:
        _err(str(damaged))
        status = EXIT_DAMAGED
    return status


def _verify_option(f):
    return click.option(
        "--verify", "do_verify", is_flag=True,
        help="Then check OUT against IN through tshark, as 'pcapgro verify' does "
             "(exit 1 if they differ; needs tshark, IN and OUT files).")(f)


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


def _live(opts, quiet):
    """The LiveCapture for -i, or None; live-only options without -i are a
    usage error."""
    iface = opts.pop("iface")
    bpf, count, duration, snaplen = (opts.pop(k) for k in ("bpf", "count", "duration", "snaplen"))
    if iface is None:
        if bpf or count or duration or snaplen:
            raise click.UsageError("-f, -c, --duration and -s go with -i IFACE")
        return None
    from .live import LiveCapture
    return LiveCapture(iface, bpf=bpf, count=count, duration=duration, snaplen=snaplen,
                       quiet=quiet)


def _verify_after(in_path, out_path, quiet, csum="valid"):
    """The ``after`` hook of :func:`run_command` for ``--verify`` (None when
    not asked); refuses '-' and a missing tshark before anything is written."""
    from . import verify as vf
    for label, p in (("IN", in_path), ("OUT", out_path)):
        if p == "-":
            raise click.UsageError(f"--verify needs {label} to be a file: tshark reads IN and "
                                   f"OUT after OUT is written ('-' cannot be read again)")
        what = vf.not_a_file(p) if p is not None else None
        if what:
            raise click.UsageError(f"--verify needs {label} to be a regular file: tshark reads "
                                   f"IN and OUT after OUT is written ({p} is {what})")
    vf.tshark_path()

    def after():
        v = vf.verify(in_path, out_path, csum=csum)
        lines = v.summary_lines() if not quiet else v.problem_lines()
        return {"verify": v.to_dict()}, lines, v.status
    return after


def _gro_build(opts, quiet):
    """The GRO transform for ``merge``'s options: a builder for
    :func:`run_command` (None for ``--no-gro``)."""
    if opts["no_gro"]:
        return None
    from .gro import GROConfig, GROEngine

    def build(fmt):
        if fmt == "pcap" and not quiet and not opts["gso"]:
            _err("note: pcap output cannot hold the aggregate comments and restore "
                 "records (use -F pcapng to keep them)")
        cfg = GROConfig(
            gro_max_size=opts["gro_max_size"], verify_csum=not opts["no_verify_csum"],
            csum=opts["csum"], hz=opts["hz"], napi_budget=opts["napi_budget"],
            poll_gap_ns=opts["poll_gap"], gro_flush_timeout=opts["gro_flush_timeout"],
            hash=opts["hash"], udp=opts["udp"], fraglist=opts["fraglist"],
            local_ports=frozenset(opts["local_port"]), vlan_gro=not opts["no_vlan_gro"],
            vxlan_ports=frozenset(opts["vxlan_port"]),
            geneve_ports=frozenset(opts["geneve_port"]), annotate=fmt == "pcapng")
        if opts["gso"]:
            from .forward import Forwarder
            fwd = Forwarder(cfg, egress_mtu=opts["egress_mtu"], router=not opts["bridge"])
            return fwd.process, fwd.stats.to_dict, fwd.stats.table
        engine = GROEngine(cfg)
        return engine.process, lambda: {"gro": engine.stats.to_dict()}, engine.stats.table
    return build


_MERGE_EPILOG = """\b
Examples:
  pcapgro merge samples/tcp4-bulk-wire.pcap /tmp/gro.pcapng
  pcapgro merge --udp gro --stats - capture.pcap merged.pcap
  pcapgro merge --fraglist --local-port 443 router.pcap out.pcapng
"""


@cli.command(epilog=_MERGE_EPILOG)
@click.option("--no-gro", is_flag=True,
              help="GRO off (as 'ethtool -K dev gro off'): a pure pass-through.")
@click.option("--no-verify-csum", is_flag=True,
              help="Do not verify TCP/UDP checksums (the kernel verifies them; a bad one never "
                   "merges): trust them, so an aggregate's TCP checksum is computed from its "
                   "segments' fields, not their bytes.")
@click.option("--csum", type=click.Choice(["valid", "kernel"]), default="valid", show_default=True,
              help="Checksum written on aggregates: a valid one, or what the kernel leaves "
                   "(pseudo-header seed; fraglist: the first packet's).")
@click.option("--gro-max-size", type=click.IntRange(1, 524280), default=65536, show_default=True,
              metavar="BYTES", help="gro_max_size: aggregates stay below it; above 65536 is BIG TCP "
                                    "(IPv4 total length 0, IPv6 Hop-by-Hop jumbo).")
@click.option("--gro-flush-timeout", type=click.IntRange(0), default=0, show_default=True,
              metavar="NS", help="gro_flush_timeout: hold packets across polls for this long (ns).")
@click.option("--napi-budget", type=click.IntRange(0), default=0, show_default=True, metavar="N",
              help="Packets per NAPI poll (64 in most drivers); 0 = polls end only at gaps.")
@click.option("--hz", type=click.Choice(["100", "250", "300", "1000"]), default="250",
              show_default=True, callback=lambda c, p, v: int(v),
              help="Kernel tick rate, for the 'old packets only' flush rule.")
@click.option("--poll-gap", type=click.IntRange(0), default=1_000_000, show_default=True,
              metavar="NS", help="A gap between packets longer than this ends a NAPI poll (ns).")
@click.option("--hash", type=click.Choice(["flow", "none"]), default="flow", show_default=True,
              help="Flow hash: 'flow' = each flow its own (RSS, local sockets), "
                   "'none' = all in GRO bucket 0 (tcpreplay into a veth).")
@click.option("--udp", type=click.Choice(["off", "gro"]), default="off", show_default=True,
              help="UDP GRO: 'gro' = rx-udp-gro-forwarding on and UDP_GRO on local sockets.")
@click.option("--fraglist", is_flag=True,
              help="rx-gro-list on: forwarded TCP and UDP flows use fraglist GRO.")
@click.option("--local-port", type=click.IntRange(0, 65535), multiple=True, metavar="PORT",
              help="Flows to PORT have a local socket (repeatable).")
@click.option("--vxlan-port", type=click.IntRange(0, 65535), multiple=True, metavar="PORT",
              help="The receiver has a VXLAN socket on UDP PORT (4789; repeatable): "
                   "VXLAN frames to it merge by their inner flow.  Off by default.")
@click.option("--geneve-port", type=click.IntRange(0, 65535), multiple=True, metavar="PORT",
              help="The receiver has a Geneve socket on UDP PORT (6081; repeatable).")
@click.option("--no-vlan-gro", is_flag=True,
              help="No VLAN GRO handler (a kernel built without CONFIG_VLAN_8021Q): "
                   "802.1Q/802.1ad-tagged frames pass unmerged.")
@click.option("--gso", is_flag=True,
              help="Forward: after GRO, segment every aggregate as a Linux forwarder's "
                   "egress GSO does (TTL/hop limit - 1; fraglist gives the packets back).")
@click.option("--egress-mtu", type=click.IntRange(68, 65535), metavar="N",
              help="With --gso: egress MTU; DF/IPv6 aggregates that do not fit are dropped "
                   "(ICMP counted), IPv4 without DF is fragmented.")
@click.option("--bridge", is_flag=True, help="With --gso: a bridge, not a router (no TTL change).")
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
    if do_verify and live is not None:
        raise click.UsageError("--verify needs IN as a file, not live input")
    if (opts["egress_mtu"] or opts["bridge"]) and not opts["gso"]:
        raise click.UsageError("--egress-mtu and --bridge go with --gso")
    if opts["gso"] and opts["no_gro"]:
        raise click.UsageError("--gso needs GRO (drop --no-gro)")
    after = (_verify_after(in_path, out_path, quiet, "valid" if opts["no_gro"] else opts["csum"])
             if do_verify else None)
    build = _gro_build(opts, quiet)
    sys.exit(run_command(in_path, out_path, quiet, out_format, stats_path, build=build,
                         after=after, live=live))


def _split_build(opts, quiet):
    def build(fmt):
        if opts["restore"]:
            from .restore import Restorer
            r = Restorer()
            return (r.process, lambda: {"restore": dict(r.stats)}, lambda: _restore_table(r.stats))
        from .gso import GSOConfig, GSOSplitter
        cfg = GSOConfig(mss=opts["mss"], mtu=opts["mtu"], gso_size=opts["gso_size"],
                        fixed_id=opts["fixed_id"], annotate=fmt == "pcapng")
        sp = GSOSplitter(cfg)
        return sp.process, lambda: {"gso": sp.stats.to_dict()}, sp.stats.table
    return build


_SPLIT_EPILOG = """\b
Examples:
  pcapgro split samples/tcp4-tso-sender.pcap /tmp/wire.pcap
  pcapgro split --gso-size 1200 samples/udp4-uso-sender.pcap /tmp/wire.pcap
  pcapgro split --restore merged.pcapng original.pcapng
"""


@cli.command(epilog=_SPLIT_EPILOG)
@click.option("--mss", type=click.IntRange(8, 65535), metavar="N",
              help="TCP segment payload size for every flow (default: per flow from the "
                   "capture: SYN MSS, gso_size recorded by pcapgro merge, largest "
                   "segment, else what fits --mtu).")
@click.option("--mtu", type=click.IntRange(68, 65535), default=1500, show_default=True, metavar="N",
              help="Largest L3 length of a segment when no MSS is known.")
@click.option("--gso-size", type=click.IntRange(8, 65535), metavar="N",
              help="UDP datagram payload size (UDP super-packets need it, except "
                   "pcapgro merge's own aggregates, which record it).")
@click.option("--fixed-id", is_flag=True, help="Keep the IPv4 ID on every segment (SKB_GSO_TCP_FIXEDID).")
@click.option("--restore", is_flag=True,
              help="Give back the exact original packets of pcapgro merge's own aggregates "
                   "(pcapng written by merge); other packets pass unchanged.")
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
    if do_verify and live is not None:
        raise click.UsageError("--verify needs IN as a file, not live input")
    if opts["restore"] and any(opts[k] for k in ("mss", "gso_size", "fixed_id")):
        raise click.UsageError("--restore takes no segmentation options")
    after = _verify_after(in_path, out_path, quiet) if do_verify else None
    sys.exit(run_command(in_path, out_path, quiet, out_format, stats_path,
                         build=_split_build(opts, quiet), after=after, live=live))


_VERIFY_EPILOG = """\b
Examples:
  pcapgro verify samples/tcp4-bulk-wire.pcap /tmp/gro.pcapng
  pcapgro verify --csum kernel wire.pcap kernel-gro.pcap
  pcapgro verify --json in.pcap out.pcapng | jq .problems
"""


def _restore_table(st):
    lines = [f"restore: {st['restored']} aggregates given back as "
             f"{st['segments']} packets, {st['passed']} passed"]
    if st["unrecorded"]:
        lines.append(f"  {st['unrecorded']} aggregates carry no restore record (cut by a "
                     "snaplen: merge keeps only their contiguous captured bytes) and "
                     "stay as they are")
    if st.get("unfit"):
        lines.append(f"  {st['unfit']} restore records do not fit their packet (the "
                     "capture was edited after merge: cut, chopped or changed) and "
                     "those packets stay as they are")
    return lines


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
@click.version_option(__version__, prog_name="pcapgro")
def verify_cmd(in_path, out_path, csum, as_json, stats_path, quiet, max_problems):
    """Check through tshark that OUT carries exactly what IN carried.

    TCP streams (matched by 4-tuple): same payload bytes in the same order,
    same SYN/FIN/RST and pure ACKs; UDP flows: same payload, datagram
    boundaries where OUT keeps them; other packets: identical bytes, same
    order.  OUT must not add malformed packets, expert errors or bad
    checksums, and has consistent lengths and non-decreasing timestamps.
    Exit status: 0 faithful, 1 differences (first ones named by OUT frame
    number and stream), 2 unusable input or no tshark.
    """
    from . import verify as vf
    for label, p in (("IN", in_path), ("OUT", out_path)):
        if p == "-":
            raise click.UsageError(f"verify needs {label} to be a file (tshark reads it; "
                                   "'-' is not supported)")
    _refuse_clobber(None, out_path, stats_path)
    if stats_path and stats_path != "-" and _clobbers(stats_path, in_path):
        raise click.UsageError(f"--stats {stats_path} is the same file as IN: "
                               "write the statistics to another file")
    _check_stats_path(stats_path)
    if sys.stdout is None and (as_json or stats_path == "-" or not quiet):
        # -q alone may run with stdout closed: the exit status is the answer
        raise UnusableInput("cannot write the result: standard output is closed")
    v = vf.verify(in_path, out_path, csum=csum)
    d = v.to_dict()
    if sys.stdout is None:
        pass
    elif as_json or stats_path == "-":
        sys.stdout.write(json.dumps(d, indent=2) + "\n")
    elif quiet:
        if v.problems_total:
            sys.stdout.write("".join(ln + "\n" for ln in v.problem_lines(max_problems)))
    else:
        sys.stdout.write("".join(ln + "\n" for ln in v.summary_lines(max_problems)))
    if sys.stdout is not None:
        sys.stdout.flush()
    if stats_path and stats_path != "-":
        try:
            with open(stats_path, "w") as fh:
                fh.write(json.dumps(d, indent=2) + "\n")
        except OSError as e:
            raise UnusableInput(f"cannot write {stats_path}: {e.strerror or e}") from None
    sys.exit(v.status)


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
    standard streams are handled by :func:`_fill_closed_std_fds`."""
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
        _err("error: output closed (broken pipe)")
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
        except OSError:
            pass
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
