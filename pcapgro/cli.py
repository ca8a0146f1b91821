"""The ``pcapgro`` command line (click).  Thin: all logic lives in
:mod:`pcapgro.capture`, :mod:`pcapgro.pipeline` and the engines.

Contract (every command): ``pcapgro COMMAND [OPTIONS] IN OUT`` with ``-``
for stdin/stdout; common options ``-q/--quiet``, ``-F pcap|pcapng``,
``--stats FILE`` (JSON, ``-`` = stdout), ``--version``, ``--help``.
Exit status: 0 done, 2 usage error / unusable input, 3 input damaged
part-way (output written up to the damage), 130 interrupted (partial output
removed).  Never a traceback: :func:`main` turns every error into one line.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import sys

import click

from . import __version__
from . import pipeline
from .capture import open_reader, open_writer, format_for_path, FORMATS
from .errors import (PcapgroError, DamagedInput, UnusableInput, EXIT_USAGE,
                     EXIT_DAMAGED, EXIT_INTERRUPTED)

__all__ = ["cli", "main", "run_command"]


class _Exit(Exception):
    """Internal: leave with this exit status (message already printed)."""

    def __init__(self, status):
        self.status = status


def _err(msg):
    try:
        sys.stderr.write(f"pcapgro: {msg}\n")
        sys.stderr.flush()
    except OSError:
        pass


def common_options(f):
    """Decorate a command with the options every command has and the two
    positional arguments IN and OUT."""
    @click.argument("in_path", metavar="IN")
    @click.argument("out_path", metavar="OUT")
    @click.option("-q", "--quiet", is_flag=True,
                  help="No progress bar and no statistics table (errors are still printed).")
    @click.option("-F", "out_format", type=click.Choice(FORMATS),
                  help="Output format (default: from OUT's extension, else the input's).")
    @click.option("--stats", "stats_path", metavar="FILE",
                  help="Write statistics as JSON to FILE ('-' = standard output).")
    @click.version_option(__version__, prog_name="pcapgro")
    @functools.wraps(f)
    def wrapper(**kw):
        return f(**kw)
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pcapgro")
def cli():
    """Rewrite packet captures the way Linux GRO (merge) and GSO (split) do.

    Every command reads IN and writes OUT (pcap or pcapng; '-' for standard
    input / output).  Exit status: 0 done, 2 usage error or unusable input,
    3 input damaged part-way (output written up to the damage), 130
    interrupted.
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


def run_command(in_path, out_path, quiet=False, out_format=None, stats_path=None,
                transform=None, extra_stats=None):
    """Run one IN -> OUT job with the common options.

    Args:
        in_path, out_path: paths or '-'.
        quiet:       no progress bar / statistics table.
        out_format:  'pcap', 'pcapng' or None (OUT's extension, else input's).
        stats_path:  None, a path, or '-' (stdout; refused when OUT is '-').
        transform:   None or callable(iterator of events) -> iterator of events.
        extra_stats: None or callable() -> dict of {key: dict} merged into the
                     statistics (e.g. ``{"gro": {...}}``).
    Returns: the exit status (0 or 3).
    Raises: PcapgroError (exit 2), _Exit(130) on KeyboardInterrupt.
    """
    if stats_path == "-" and out_path == "-":
        raise click.UsageError("--stats - needs OUT to be a file (standard output is the capture)")
    reader = open_reader(in_path)
    status = 0
    damaged = None
    try:
        fmt = out_format or format_for_path(out_path, reader.format)
        writer = open_writer(out_path, fmt)
        progress, bar = _progress_bar(quiet, in_path)
        try:
            pipeline.run(reader, writer, transform, progress)
        except DamagedInput as e:
            damaged = e
            writer.close()
        except KeyboardInterrupt:
            writer.abort()
            raise _Exit(EXIT_INTERRUPTED) from None
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
    stats = pipeline.counts(reader, writer)
    if extra_stats is not None:
        stats.update(extra_stats())
    _report(stats, quiet, stats_path)
    if damaged is not None:
        _err(str(damaged))
        status = EXIT_DAMAGED
    return status


def _gro_transform(options):
    """Build the GRO transform from the merge options.  Returns
    ``(transform, extra_stats)``; ``(None, None)`` for ``--no-gro``.
    Raises UnusableInput while the engine is not available."""
    if options.get("no_gro"):
        return None, None
    try:
        from .gro import GROEngine          # the engine (pcapgro/gro/)
    except ImportError:
        raise UnusableInput("the GRO engine is not available in this build; "
                            "use --no-gro for a pass-through") from None
    engine = GROEngine()

    def extra():
        st = getattr(engine, "stats", None)
        if st is None:
            return {}
        if hasattr(st, "to_dict"):
            st = st.to_dict()
        elif callable(st):
            st = st()
        return {"gro": st}
    return engine.process, extra


@cli.command()
@click.option("--no-gro", is_flag=True,
              help="GRO off (as 'ethtool -K dev gro off'): a pure pass-through.")
@common_options
def merge(in_path, out_path, quiet, out_format, stats_path, no_gro):
    """Merge packets of IN the way Linux GRO does and write OUT.

    With --no-gro, copy IN to OUT unchanged (format conversion only).
    """
    transform, extra = _gro_transform({"no_gro": no_gro})
    sys.exit(run_command(in_path, out_path, quiet, out_format, stats_path, transform, extra))


def main(argv=None):
    """Console entry point: runs :data:`cli` and maps every error to one
    stderr line and an exit status (never a traceback)."""
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
    except click.exceptions.Abort:
        _err("interrupted")
        status = EXIT_INTERRUPTED
    except _Exit as e:
        _err("interrupted")
        status = e.status
    except KeyboardInterrupt:
        _err("interrupted")
        status = EXIT_INTERRUPTED
    except BrokenPipeError:
        _err("error: output closed (broken pipe)")
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
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
