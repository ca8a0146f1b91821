"""Capture files in and out: classic pcap and pcapng readers and writers.

pcapgro does not use dpkt's pcap/pcapng Reader/Writer (they lose the
original length, interfaces, nanoseconds and comments, and are slow); :mod:`.pcap` and :mod:`.pcapng` read 512 KiB chunks and decode records
with precompiled ``struct.Struct.unpack_from``, and write through a list of
parts flushed per >= 1 MiB (``os.writev``, or one join).

* :func:`open_reader` -- ``path`` or ``'-'`` (stdin) -> a reader (format
  detected from the magic, without seeking, so pipes work).
* :func:`open_writer` -- ``path`` or ``'-'`` (stdout), ``'pcap'|'pcapng'``
  -> a writer; a regular file is written to a temp file beside the target
  (a symbolic link's target) and renamed into place by ``close()``
  (``abort()`` removes it); devices and FIFOs are written directly.
* :func:`same_file` -- do two paths name one file (IN = OUT refused).

Readers: iterable of events (:mod:`pcapgro.record`), plus ``batches()``
(lists of events), attributes ``format``, ``nanosecond``, ``bytes_read``,
``packets``, ``packet_bytes``; ``close()``.
Writers: ``write(event)``, ``write_batch(events)``, ``close()``,
``abort()``; attributes ``format``, ``packets``, ``packet_bytes``.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from ..errors import UnusableInput
from ._stream import read_head
from .pcap import PcapReader, PcapWriter, PCAP_MAGICS
from .pcapng import PcapngReader, PcapngWriter, PCAPNG_MAGIC

__all__ = ["open_reader", "open_reader_file", "open_writer", "PcapReader", "PcapWriter",
           "PcapngReader", "PcapngWriter", "FORMATS", "format_for_path"]

FORMATS = ("pcap", "pcapng")


def open_reader(path):
    """Open a capture for reading.

    Args:
        path: file path (str / PathLike) or ``'-'`` for standard input.
    Returns:
        a :class:`PcapReader` or :class:`PcapngReader` (chosen by the first
        four bytes, read without seeking).
    Raises:
        UnusableInput: cannot open, empty, or neither pcap nor pcapng.
    """
    name = "stdin" if path == "-" else os.fspath(path)
    if not name:                # as open_writer words it
        raise UnusableInput("cannot open '': empty file name")
    if path == "-":
        if sys.stdin is None:       # started with standard input closed (<&-)
            raise UnusableInput("cannot read standard input: it is closed")
        f = sys.stdin.buffer
    else:
        try:
            f = open(path, "rb", buffering=0)
        except OSError as e:
            raise UnusableInput(f"cannot open {name}: {e.strerror or e}") from None
    return open_reader_file(f, name, close_on_error=path != "-")


def open_reader_file(f, name, close_on_error=True):
    """Open a capture already open as binary file object ``f`` (a file, a
    pipe from a capture program...).  Never seeks.

    Args:
        f:    binary file object; reads may return partial data (pipes).
        name: how messages name the input.
        close_on_error: close ``f`` when it is not a capture.
    Returns / Raises: as :func:`open_reader`.
    """
    try:
        try:
            head = read_head(f, 4)
        except OSError as e:
            raise UnusableInput(f"cannot read {name}: {e.strerror or e}") from None
        if not head:
            raise UnusableInput(f"{name}: empty input")
        if head == PCAPNG_MAGIC:
            return PcapngReader(f, head, name)
        if head in PCAP_MAGICS:
            return PcapReader(f, head, name)
        if head[:2] == b"\x1f\x8b":
            raise UnusableInput(f"{name}: gzip-compressed: decompress it first "
                                f"(zcat FILE | pcapgro ... - OUT)")
        if head[:3] in (b"\xfd7z", b"BZh", b"\x28\xb5\x2f"):
            raise UnusableInput(f"{name}: compressed (xz, bzip2 or zstd): decompress it first")
        raise UnusableInput(f"{name}: not a pcap or pcapng file (starts with 0x{head.hex()})")
    except BaseException:
        if close_on_error:
            f.close()
        raise


def format_for_path(path, default):
    """Output format for ``path``: '.pcapng' -> 'pcapng', '.pcap' -> 'pcap',
    anything else (and '-') -> ``default``."""
    p = os.fspath(path).lower()
    if p.endswith(".pcapng"):
        return "pcapng"
    if p.endswith(".pcap"):
        return "pcap"
    return default


def open_writer(path, fmt, nanosecond=None, byteorder=None):
    """Open a capture for writing.

    Args:
        path:       file path or ``'-'`` for standard output.  A regular
                    file is written as a temp file in the same directory and
                    renamed to ``path`` (a link's target) by ``close()``;
                    ``abort()`` removes it.  Devices and FIFOs are written
                    directly (see :func:`_open_out`).
        fmt:        'pcap' or 'pcapng'.
        nanosecond: pcap only: True/False force the resolution, None = from
                    the first Interface event.
        byteorder:  None = as the input's sections ('<'/'>'/'=' to force).
    Returns:
        a :class:`PcapWriter` or :class:`PcapngWriter`.
    Raises:
        UnusableInput: unknown format, or the directory is not writable.
    """
    if fmt not in FORMATS:
        raise UnusableInput(f"unknown output format {fmt!r} (pcap or pcapng)")
    direct = False
    if path == "-":
        if sys.stdout is None:      # started with standard output closed (>&-)
            raise UnusableInput("cannot write standard output: it is closed")
        f = sys.stdout.buffer
        tmp = None
    else:
        path = os.fspath(path)
        target, f, tmp, direct = _open_out(path)
    if fmt == "pcap":
        w = PcapWriter(f, nanosecond=nanosecond, byteorder=byteorder)
    else:
        w = PcapngWriter(f, byteorder=byteorder)

    def close_quietly():
        try:
            f.close()
        except OSError:
            pass

    if tmp is None:
        # a device, a FIFO or standard output: written directly
        finish, where = (f.close, path) if direct else (f.flush, "output")

        def on_close():
            try:
                finish()
            except BrokenPipeError:
                raise
            except OSError as e:
                raise UnusableInput(f"cannot write {where}: {e.strerror or e}") from None
        on_abort = close_quietly if direct else on_close
    else:
        def on_close():
            f.close()
            try:
                os.replace(tmp, target)
            except OSError as e:
                _unlink(tmp)
                raise UnusableInput(f"cannot write {path}: {e.strerror or e}") from None

        def on_abort():
            close_quietly()
            _unlink(tmp)
    w._on_close = on_close
    w._on_abort = on_abort
    return w


def same_file(a, b):
    """True when paths ``a`` and ``b`` name the same file: the same inode
    when both exist, else the same path once links are resolved.  ``'-'``
    (a standard stream) is never the same file as anything."""
    if a == "-" or b == "-" or a is None or b is None:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _open_out(path):
    """Open OUT the way editcap and tcpdump -w treat it, without ever
    leaving a half-written capture in place of a good file.

    * A symbolic link is followed: its target is written, the link stays.
    * An existing character/block device, FIFO or socket (``/dev/null``, a
      named pipe a reader waits on) is opened and written directly.
    * A regular file (new or existing) is written as a temp file in the same
      directory and renamed over it by ``close()``; an existing file keeps
      its permission bits (and owner, where allowed); a file the user may
      not write is refused, as the shell and editcap refuse it.  The
      directory must be writable: OUT is never written in place, so a
      failure or an interrupt never leaves a half-written capture where a
      good one was.

    Returns (file written: OUT with links resolved, binary file object,
    temp path or None, True when written directly).
    Raises UnusableInput when OUT cannot be opened.
    """
    if not os.fspath(path):
        raise UnusableInput("cannot write '': empty file name")
    try:
        st = os.stat(path)          # links followed
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UnusableInput(f"cannot write {path}: {e.strerror or e}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UnusableInput(f"cannot write {path}: Is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        # opened by the name given: /dev/stdout and /dev/fd/N (a shell's
        # process substitution) are links to pipes that realpath cannot name
        try:
            return path, open(path, "wb", buffering=0), None, True
        except OSError as e:
            raise UnusableInput(f"cannot write {path}: {e.strerror or e}") from None
    real = os.path.realpath(path)
    if st is not None and not os.access(real, os.W_OK):
        # replacing it by a rename would ignore its write protection
        raise UnusableInput(f"cannot write {path}: Permission denied")
    d = os.path.dirname(real)
    try:
        # the temp name adds 15 characters ("." + 8 random + ".part"): the
        # name in it is cut so that an OUT name the file system takes (up to
        # 255 bytes) still has a temp name it takes
        fd, tmp = tempfile.mkstemp(dir=d, prefix="." + _name_head(os.path.basename(real)) + ".",
                                   suffix=".part")
    except OSError as e:
        # never written in place: a failure or an interrupt would leave a
        # half-written capture where a good one was
        raise UnusableInput(f"cannot write {path}: {e.strerror or e}") from None
    if st is not None:
        mode = stat.S_IMODE(st.st_mode)
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except OSError:
            pass
    else:
        mask = os.umask(0)
        os.umask(mask)
        mode = 0o666 & ~mask
    try:
        os.fchmod(fd, mode)
    except OSError:
        pass
    return real, os.fdopen(fd, "wb", buffering=0), tmp, False


def _name_head(name, limit=240):
    """The first ``limit`` bytes (file system encoding) of ``name``: the
    part of OUT's name its temp file's name carries (255 bytes, NAME_MAX,
    less the 15 the temp name adds)."""
    return os.fsdecode(os.fsencode(name)[:limit])


def _unlink(p):
    try:
        os.unlink(p)
    except OSError:
        pass
