"""Where a job reads and writes: paths, ``'-'``, open binary streams, live
input; IN/OUT clobbering refused; the statistics file written as OUT is."""

from __future__ import annotations

import os
import stat

from ..capture import open_reader, open_reader_file, open_writer, same_file, format_for_path
from ..capture import _open_out, _unlink       # OUT's rules, shared by the statistics file
from ..capture.pcap import PcapWriter
from ..capture.pcapng import PcapngWriter
from ..errors import OptionError, UnusableInput

__all__ = ["is_stream", "is_live", "path_of", "open_in", "close_in", "open_out", "out_format",
           "clobbers", "refuse_clobber", "write_stats"]


def is_stream(x):
    """``x`` is an open binary file object (not a path, not ``'-'``)."""
    return not isinstance(x, (str, bytes, os.PathLike)) and (
        hasattr(x, "read") or hasattr(x, "write"))


def is_live(x):
    """``x`` is a :class:`pcapgro.live.LiveCapture` (or works like one)."""
    return callable(getattr(x, "start", None)) and callable(getattr(x, "check", None))


def path_of(x):
    """The path (str) or ``'-'`` of ``x``, None for a stream or live input."""
    if is_stream(x) or is_live(x):
        return None
    return x if x == "-" else os.fspath(x)


def open_in(src):
    """A reader for ``src``: path, ``'-'`` (standard input), a binary
    stream (read from where it is, never closed here) or a started
    LiveCapture.  Raises UnusableInput."""
    if is_live(src):
        return src.start()
    if is_stream(src):
        name = getattr(src, "name", None)
        return open_reader_file(src, name if isinstance(name, str) else "input",
                                close_on_error=False)
    return open_reader(src)


def close_in(reader, src):
    """Close ``reader``, but not a stream the caller gave."""
    if is_stream(src):
        reader._f = None
    reader.close()


def out_format(dst, fmt, input_format):
    """The output format: ``fmt``, else OUT's extension (a stream's
    ``name``), else the input's."""
    if fmt:
        return fmt
    if is_stream(dst):
        name = getattr(dst, "name", None)
        return format_for_path(name, input_format) if isinstance(name, str) else input_format
    return format_for_path(dst, input_format)


def open_out(dst, fmt):
    """A writer for ``dst``: a path (temp file + rename), ``'-'``, or a
    binary stream (written from where it is, flushed, never closed here)."""
    if not is_stream(dst):
        return open_writer(dst, fmt)
    if fmt not in ("pcap", "pcapng"):
        raise UnusableInput(f"unknown output format {fmt!r} (pcap or pcapng)")
    w = PcapWriter(dst) if fmt == "pcap" else PcapngWriter(dst)
    flush = getattr(dst, "flush", None) or (lambda: None)
    w._on_close = flush
    w._on_abort = lambda: None
    return w


def clobbers(a, b):
    """``a`` would overwrite the regular file (or the same new path) ``b``:
    two names of one device or FIFO (``/dev/null``) are fine."""
    return same_file(a, b) and not (os.path.exists(a) and not os.path.isfile(a))


def stdin_is(path):
    """Standard input is redirected from the regular file ``path``."""
    try:
        a, b = os.fstat(0), os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(a.st_mode) and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def refuse_clobber(in_path, out_path, out_label="OUT"):
    """OptionError when OUT would overwrite IN (editcap and tcpdump would
    destroy the capture being read; pcapgro refuses).  Paths or '-'; None
    (a stream, live input) is never refused."""
    if out_path is None:
        return
    if in_path == "-" and out_path != "-" and stdin_is(out_path):
        raise OptionError(f"{out_label} {out_path} is the file standard input reads: "
                          "write to another file")
    if in_path is not None and clobbers(out_path, in_path):
        raise OptionError(f"{out_label} {out_path} is the same file as IN: "
                          "write to another file")


def write_stats(path, stats):
    """Write ``stats`` as JSON (2-space indent, one final newline) to
    ``path`` as OUT is written: a temp file beside it renamed into place
    when complete (a link's target; a device or FIFO directly), so a full
    disk or a failure never leaves a cut or empty file.
    Raises UnusableInput ("cannot write PATH: why")."""
    import json     # here: only --stats needs it (~1.5 ms of every start-up)
    data = (json.dumps(stats, indent=2) + "\n").encode()
    real, f, tmp, _ = _open_out(path)
    try:
        with f:
            mv = memoryview(data)
            while mv:
                n = f.write(mv)
                if not n:
                    raise OSError(28, "No space left on device")
                mv = mv[n:]
        if tmp is not None:
            os.replace(tmp, real)
    except OSError as e:
        if tmp is not None:
            _unlink(tmp)
        raise UnusableInput(f"cannot write {path}: {e.strerror or e}") from None
