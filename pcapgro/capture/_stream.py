"""Buffered byte input and output shared by the pcap and pcapng readers/writers.

Input is read in chunks (512 KiB, CHUNK) and records are decoded with precompiled
``struct.Struct.unpack_from`` straight out of the chunk; output records are
collected in a list and written per >= 1 MiB, with one ``os.writev`` per
IOV_MAX parts when the output is a plain file or pipe and the parts are big
(no join copy), else with one ``b"".join`` and ``write``.  This is what
makes pcapgro fast enough in pure Python: no per-record ``read()`` or
``write()`` system call, no per-record file object method call.
"""

from __future__ import annotations

import io
import os
import sys

from ..errors import DamagedInput, UnusableInput

try:  # compiled helpers (optional, see setup.py)
    from .. import _native
except ImportError:          # pragma: no cover - depends on the build
    _native = None
# a bytearray of n bytes for readinto to fill: not zeroed first when the
# compiled helper is there (every byte is read into or cut off before use)
new_buffer = _native.buffer if _native is not None else bytearray

def keep_heap():
    """Have glibc's malloc keep chunk-sized blocks in its heap
    (:func:`pcapgro._restore.keep_heap`): the compiled record paths (GRO,
    split, split --restore) allocate and free a few MiB per reader chunk
    (the chunk, the output records), and with glibc's default mmap
    threshold each is fresh memory from the kernel (page faults and
    zeroing: a quarter to a third of their CPU time on a bulk capture).
    Process-wide; nothing done without that extension or off glibc."""
    try:
        from .._restore import keep_heap as keep
    except ImportError:     # pragma: no cover - built without a C compiler
        return
    keep()


# bytes per read() of the input.  512 KiB: what merge's compiled loop writes
# for a chunk is then written while it is still in the CPU's caches; with
# 4 MiB (sized once for numpy's per-chunk costs, gone) the kernel's copy of
# the output from cold memory was most of a merge's time on tmpfs (medians
# of 5 against editcap in the same run: real bulk capture 0.98-1.05x ->
# 1.08-1.16x, mixed 0.92-0.94x -> 1.07x, to pcapng 0.46-0.72x -> 0.84-0.87x)
CHUNK = 1 << 19
FLUSH = 1 << 20          # bytes collected before one write() of the output
# bytes per read() with direct_reads() (at most CHUNK): the compiled walk of
# split --restore takes the whole chunk, which with the records it lays out
# then stays in the CPU's L2 cache until written (4 MiB: ~10% more CPU time)
DIRECT_CHUNK = 1 << 19

# file object types whose readinto(b) is read(len(b)) copied into b
_READINTO = (io.FileIO, io.BufferedReader, io.BufferedRandom, io.BytesIO)
_SLACK = 1 << 16         # ByteSource(into=True) buffers: allocation granule
WRITEV_MIN = 1024        # ByteSink: os.writev when parts average this many bytes
try:
    IOV_MAX = max(16, min(1024, os.sysconf("SC_IOV_MAX")))
except (AttributeError, ValueError, OSError):
    IOV_MAX = 16


class ByteSource:
    """A non-seeking chunked reader over a binary file object.

    Attributes:
        f:          the binary file object (may be a pipe; never seeked).
        buf:        bytes currently buffered, ``buf[pos:]`` not yet consumed.
        base:       input byte offset of ``buf[0]``.
        bytes_read: total bytes read from ``f`` so far (for progress bars).
        eof:        True once ``f.read`` (``readinto``) returned nothing.

    With ``into=True`` every buffer :meth:`refill` returns is a NEW
    ``bytearray`` (never reused nor resized afterwards: consumers may keep
    it, slices and memoryviews of it for as long as they like), filled with
    ``readinto`` where ``f`` is a plain file, pipe or BytesIO: each input
    byte is copied once (by the kernel) instead of three times (read, then
    the join with the leftover).  Slices of it are bytearrays: a consumer
    that hands out packet data converts them (``mv[s:e].tobytes()``).
    Default (``into=False``): ``bytes`` buffers (the pcapng reader hashes
    and keeps slices of them).
    """

    __slots__ = ("f", "buf", "base", "bytes_read", "eof", "_into", "_readinto", "_direct")

    def __init__(self, f, head=b"", into=False):
        self.f = f
        self.buf = head
        self.base = 0
        self.bytes_read = len(head)
        self.eof = False
        self._into = into
        # readinto only where its semantics are read()'s (a subclass or
        # another file-like object may define read() alone, or differently)
        self._readinto = f.readinto if into and type(f) in _READINTO else None
        self._direct = None         # (read_after, fd): see direct_reads()

    def direct_reads(self):
        """From now on, when ``f`` is a plain file (``io.FileIO``) and the
        buffers are bytes, refill reads straight after the leftover
        (``pcapgro._restore.read_after``: no ``b"".join`` copy of each
        chunk), ``min(CHUNK, DIRECT_CHUNK)`` bytes at a time; nothing changes without
        the extension.  The same bytes come back."""
        if self._into or type(self.f) is not io.FileIO:
            return
        try:
            from .._restore import read_after
            fd = self.f.fileno()
        except (ImportError, OSError, ValueError):     # pragma: no cover
            return
        self._direct = (read_after, fd)

    def refill(self, pos, need):
        """Drop ``buf[:pos]`` and read until at least ``need`` bytes are
        buffered (or end of file).  Returns the new buffer; the caller's
        position becomes 0.  Raises UnusableInput on an OS read error."""
        if self._into:
            return self._refill_into(pos, need)
        if self._direct is not None and len(self.buf) - pos < need and not self.eof \
                and type(self.buf) is bytes:
            return self._refill_direct(pos, need)
        buf = self.buf[pos:]
        self.base += pos
        f = self.f
        parts = [buf]
        have = len(buf)
        while have < need and not self.eof:
            try:
                chunk = f.read(max(CHUNK, need - have))
            except OSError as e:
                raise UnusableInput(f"cannot read input: {e.strerror or e}") from None
            if not chunk:
                self.eof = True
                break
            self.bytes_read += len(chunk)
            parts.append(chunk)
            have += len(chunk)
        buf = parts[0] if len(parts) == 1 else b"".join(parts)
        self.buf = buf
        return buf

    def _refill_direct(self, pos, need):
        """refill() through ``read_after`` (see :meth:`direct_reads`)."""
        read_after, fd = self._direct
        old = self.buf
        have = len(old) - pos
        try:
            buf, got = read_after(fd, old, pos, max(min(CHUNK, DIRECT_CHUNK), need - have),
                                  need)
        except OSError as e:
            raise UnusableInput(f"cannot read input: {e.strerror or e}") from None
        self.base += pos
        self.bytes_read += got
        if have + got < need:
            self.eof = True         # read(2) gave 0 bytes before need
        self.buf = buf
        return buf

    def _refill_into(self, pos, need):
        old = self.buf
        have = len(old) - pos
        self.base += pos
        if have >= need or self.eof:
            # nothing to read: only drop what was consumed
            buf = bytearray(old[pos:]) if pos or type(old) is not bytearray else old
            self.buf = buf
            return buf
        # what refill() asks for: max(CHUNK, need - have) more bytes
        cap = have + max(CHUNK, need - have)
        # The buffer is allocated for up to CHUNK more bytes and grown (by
        # doubling) only as the data come: a damaged length field may ask
        # for 256 MiB of a small file.  Its size is rounded up to _SLACK
        # (the bytearray is then cut down to what was read, which does not
        # reallocate): buffers of one size are what malloc recycles; a new
        # size every time costs ~40% of the buffer's pages in page faults
        # (freed memory given back to the system and taken again).
        size = max(CHUNK + _SLACK, -(-min(cap, have + CHUNK) // _SLACK) * _SLACK)
        buf = new_buffer(size)
        mv = memoryview(buf)
        if have:
            mv[:have] = memoryview(old)[pos:]
        old = None
        lim = min(cap, size)
        readinto = self._readinto
        read = self.f.read
        try:
            while have < need:
                if have == lim:
                    # full (lim < cap): twice the room, up to cap
                    size = min(cap, 2 * size)
                    grown = new_buffer(size)
                    grown[:have] = mv[:have]
                    mv.release()
                    buf = grown
                    mv = memoryview(buf)
                    lim = size
                try:
                    if readinto is not None:
                        k = readinto(mv[have:lim])
                    else:
                        chunk = read(lim - have)
                        k = len(chunk) if chunk else 0
                        if k > lim - have:
                            # more than asked for: keep it all, as refill()
                            mv.release()
                            del buf[have:]
                            buf += chunk
                            size = lim = cap = have + k
                            mv = memoryview(buf)
                        elif k:
                            mv[have:have + k] = chunk
                except OSError as e:
                    raise UnusableInput(f"cannot read input: {e.strerror or e}") from None
                if not k:
                    self.eof = True
                    break
                self.bytes_read += k
                have += k
        finally:
            mv.release()
        if have < len(buf):
            del buf[have:]
        self.buf = buf
        return buf

    def damaged(self, pos, problem):
        """Return a DamagedInput for buffer position ``pos``."""
        return DamagedInput(self.base + pos, problem)


def read_head(f, n):
    """Read up to ``n`` bytes from ``f`` without seeking (loops over short
    reads of pipes).  Returns bytes (shorter only at end of file)."""
    parts = []
    have = 0
    while have < n:
        chunk = f.read(n - have)
        if not chunk:
            break
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts)


class ByteSink:
    """Collects output byte strings and writes them in big chunks.

    ``parts`` is a plain list the writers append to directly (hot path);
    ``size`` is an approximate count of buffered bytes they maintain.
    ``offset`` is the output offset of ``parts[0]`` (bytes already written).
    """

    __slots__ = ("f", "parts", "size", "offset", "seekable", "start", "_fd")

    def __init__(self, f):
        self.f = f
        self.parts = []
        self.size = 0
        self.offset = 0
        try:
            self.seekable = bool(f.seekable())
            self.start = f.tell() if self.seekable else 0
        except (OSError, ValueError, AttributeError):
            self.seekable = False
            self.start = 0
        self._fd = _writev_fd(f)

    def flush(self):
        """Write everything buffered.  Raises UnusableInput on an OS error
        (disk full, closed pipe)."""
        if self.parts:
            parts = self.parts
            fd = self._fd
            if fd is not None and self.size >= len(parts) * WRITEV_MIN and not self.f.closed:
                # big parts (merged packets): straight from them to the
                # file, without first joining them into one more copy;
                # the list itself is emptied, not replaced: writers keep its
                # bound append across events that flush (RawBlocks)
                parts = list(parts)
                self.parts.clear()
                self.size = 0
                try:
                    if type(self.f) is not io.FileIO:
                        self.f.flush()      # what its buffer holds goes first
                    n = _writev_all(fd, parts)
                except BrokenPipeError:
                    raise
                except OSError as e:
                    raise UnusableInput(f"cannot write output: {e.strerror or e}") from None
                self.offset += n
                return
            data = b"".join(parts)
            parts.clear()
            self.size = 0
            try:
                n = self.f.write(data)
                if n is not None and n < len(data):
                    # a pipe may take part of a big write (and the rest
                    # raise EPIPE): never drop the rest silently
                    mv = memoryview(data)
                    while n < len(data):
                        k = self.f.write(mv[n:])
                        if not k:
                            raise UnusableInput("cannot write output: short write")
                        n += k
            except BrokenPipeError:
                raise
            except OSError as e:
                raise UnusableInput(f"cannot write output: {e.strerror or e}") from None
            self.offset += len(data)

    def tell(self):
        """Output offset of the next byte appended (exact only right after
        :meth:`flush`; writers that need offsets call flush first or keep
        their own sizes)."""
        return self.offset + sum(len(p) for p in self.parts)

    def patch(self, offset, data):
        """Overwrite ``data`` at output ``offset`` (after a flush), if the
        output is seekable.  Returns True when patched."""
        if not self.seekable:
            return False
        self.flush()
        f = self.f
        try:
            f.flush()
            here = f.tell()
            f.seek(self.start + offset)
            f.write(data)
            f.seek(here)
        except OSError:
            return False
        return True


def _writev_fd(f):
    """The file descriptor :meth:`ByteSink.flush` may ``os.writev`` to in
    place of ``f.write``: ``f`` is a plain file object (FileIO, or a
    BufferedWriter over one), open for writing, in blocking mode; else None
    (BytesIO, wrappers such as gzip files whose fileno is not where their
    bytes go, subclasses that may write differently)."""
    if not hasattr(os, "writev") or not hasattr(os, "get_blocking"):
        return None
    raw = f
    if type(f) in (io.BufferedWriter, io.BufferedRandom):
        raw = getattr(f, "raw", None)
    if type(raw) is not io.FileIO:
        return None
    try:
        if raw.closed or not raw.writable():
            return None
        fd = raw.fileno()
        if not os.get_blocking(fd):
            return None
    except (OSError, ValueError):
        return None
    return fd


def _writev_all(fd, parts):
    """Write the byte strings ``parts`` to ``fd`` in order, with as few
    ``os.writev`` calls as the kernel allows (at most IOV_MAX parts each),
    continuing exactly where a partial write (a pipe, a signal) stopped.
    Returns the number of bytes written; raises OSError."""
    iov = IOV_MAX
    total = 0
    writev = os.writev
    for k in range(0, len(parts), iov):
        batch = parts[k:k + iov]
        want = sum(map(len, batch))
        n = writev(fd, batch)
        total += n
        while n < want:
            if not n:
                raise UnusableInput("cannot write output: short write")
            # drop what was written: whole parts, then the start of one
            i = 0
            while n >= len(batch[i]):
                n -= len(batch[i])
                want -= len(batch[i])
                i += 1
            batch = [memoryview(batch[i]).cast("B")[n:]] + batch[i + 1:]
            want -= n
            n = writev(fd, batch)
            total += n
    return total


def warn(msg):
    """Print one ``pcapgro: warning: ...`` line on stderr."""
    try:
        sys.stderr.write(f"pcapgro: warning: {msg}\n")
        sys.stderr.flush()
    except OSError:
        pass


class ReaderBase:
    """What the pcap and pcapng readers share: progress, closing, context
    manager, and iteration over the events of :meth:`batches` (which each
    reader defines).  Subclasses set ``_src`` (a ByteSource) and ``_f``."""

    @property
    def bytes_read(self):
        """Bytes read from the input so far (int)."""
        return self._src.bytes_read

    def close(self):
        """Close the underlying file (not stdin)."""
        f = self._f
        if f is not None and f.fileno() > 2:
            f.close()
        self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        for batch in self.batches():
            yield from batch


class WriterBase:
    """What the pcap and pcapng writers share: abort and the context manager
    (close on success, abort on an exception).  Subclasses define
    :meth:`close` and set ``_closed`` and ``_on_abort``."""

    def abort(self):
        """Stop without completing: close and remove a temp output file."""
        self._closed = True
        if self._on_abort is not None:
            self._on_abort()

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            self.close()
        else:
            self.abort()
