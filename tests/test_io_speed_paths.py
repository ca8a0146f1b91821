"""The fast input/output paths of the classic pcap layer (``_stream``):

* ``ByteSource(into=True)`` (the pcap reader): each refill is a NEW
  bytearray filled by ``readinto`` (or by ``read`` for other file objects),
  exact across short reads of pipes, never reused (consumers keep chunks);
  Packet data made from it are ``bytes``.
* the record walks with one bounds check per record: same records, same
  DamagedInput offsets, at every chunk size.
* ``ByteSink.flush`` with ``os.writev`` (plain files and pipes): partial
  writes resumed exactly, batches of at most IOV_MAX parts, the same errors
  as the join path, byte-identical output.
"""

import errno
import io
import os
import random
import struct
import threading

import pytest

from builders import pcap, pkt
from pcapgro.capture import _stream, open_reader, open_writer
from pcapgro.capture.pcap import PcapReader, PcapWriter, RecordChunk
from pcapgro.capture._stream import ByteSink, ByteSource
from pcapgro.errors import DamagedInput, UnusableInput
from pcapgro.record import Interface, Packet, Section


def records(n, seed=0, res="us"):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        size = rnd.choice([0, 1, 13, 60, 61, 1514, 3001, 9000])
        data = bytes(rnd.getrandbits(8) for _ in range(min(size, 64))) * (size // 64 + 1)
        data = data[:size]
        out.append((1700000000 + i, rnd.randrange(10 ** (9 if res == "ns" else 6)), data,
                    size + rnd.choice([0, 0, 5])))
    return out


def expected(recs, res="us"):
    mul = 1 if res == "ns" else 1000
    return [(s * 10 ** 9 + f * mul, d, o) for s, f, d, o in recs]


def got(events):
    return [(p.ts, p.data, p.orig_len) for p in events if type(p) is Packet]


class ShortReader(io.RawIOBase):
    """A file object with read() only (no usable readinto of its own in
    ByteSource's eyes: not one of the plain types), returning at most
    ``step`` bytes per call (a slow pipe)."""

    def __init__(self, data, step):
        self.data = data
        self.pos = 0
        self.step = step
        self.sizes = []

    def readable(self):
        return True

    def read(self, n=-1):
        self.sizes.append(n)
        k = min(self.step, n if n >= 0 else len(self.data))
        b = self.data[self.pos:self.pos + k]
        self.pos += len(b)
        return b


class GreedyReader(ShortReader):
    """Returns MORE than asked for (a misbehaving file object): kept."""

    def read(self, n=-1):
        b = self.data[self.pos:self.pos + max(n, 0) + 100]
        self.pos += len(b)
        return b


def pipe_feeder(data, step):
    """A real pipe (FileIO, readinto) fed ``step`` bytes per write."""
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb", buffering=0) as f:
            for i in range(0, len(data), step):
                f.write(data[i:i + step])

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    return os.fdopen(r, "rb", buffering=0), t


# --- ByteSource(into=True) ----------------------------------------------

@pytest.mark.parametrize("chunk", [1 << 20, 3000, 17])
@pytest.mark.parametrize("how", ["bytesio", "short", "greedy", "pipe", "file"])
def test_reader_over_short_reads(how, chunk, monkeypatch, tmp_path):
    monkeypatch.setattr(_stream, "CHUNK", chunk)
    recs = records(300, seed=chunk)
    data = pcap(recs)
    t = None
    if how == "bytesio":
        f = io.BytesIO(data)
    elif how == "short":
        f = ShortReader(data, 7)
    elif how == "greedy":
        f = GreedyReader(data, 0)
    elif how == "pipe":
        f, t = pipe_feeder(data, 1001)
    else:
        p = tmp_path / "in.pcap"
        p.write_bytes(data)
        f = open(p, "rb", buffering=0)
    r = PcapReader(f)
    evs = [e for b in r.batches() for e in b]
    assert got(evs) == expected(recs)
    assert all(type(p.data) is bytes for p in evs if type(p) is Packet)
    assert r.bytes_read == len(data)
    assert r._src.eof and r._src.base + len(r._src.buf) == len(data)
    assert r.packets == len(recs) and r.packet_bytes == sum(len(x[2]) for x in recs)
    if t is not None:
        t.join()
    f.close()


def test_refill_semantics():
    data = bytes(range(256)) * 40
    old = _stream.CHUNK
    _stream.CHUNK = 1000
    try:
        for into in (True, False):          # the same bytes, the same state
            src = ByteSource(io.BytesIO(data[4:]), data[:4], into=into)
            typ = bytearray if into else bytes
            assert src.bytes_read == 4
            b1 = src.refill(0, 10)
            assert type(b1) is typ and b1 == data[:1004] and src.base == 0
            keep = memoryview(b1)[500:600]       # a consumer keeps a view
            b2 = src.refill(900, 2000)           # more than one CHUNK needed
            assert b2 is not b1 and type(b2) is typ
            assert b2 == data[900:2900] and src.base == 900
            assert bytes(keep) == data[500:600] and b1 == data[:1004]   # untouched
            b3 = src.refill(len(b2), 1)
            assert b3 == data[2900:3900] and src.base == 2900 and not src.eof
            b4 = src.refill(500, 10 ** 6)        # to the end of the input
            assert b4 == data[3400:] and src.eof and src.base == 3400
            assert src.bytes_read == len(data)
            b5 = src.refill(len(b4), 16)         # at the end: nothing more
            assert b5 == b"" and type(b5) is typ and src.base == len(data)
            assert src.bytes_read == len(data)
    finally:
        _stream.CHUNK = old


def test_refill_read_error():
    class Bad(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, b):
            raise OSError(errno.EIO, "Input/output error")

    for into in (False, True):
        src = ByteSource(Bad(), b"abcd", into=into)
        with pytest.raises(UnusableInput, match="cannot read input: Input/output error"):
            src.refill(0, 24)


def test_readinto_only_for_plain_types(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x")

    class MyFile(io.FileIO):
        pass

    with open(p, "rb", buffering=0) as f:
        assert ByteSource(f, into=True)._readinto is not None
    with open(p, "rb") as f:
        assert ByteSource(f, into=True)._readinto is not None
    with MyFile(p, "rb") as f:
        assert ByteSource(f, into=True)._readinto is None
    assert ByteSource(ShortReader(b"", 1), into=True)._readinto is None
    assert ByteSource(io.BytesIO(b""), into=False)._readinto is None


@pytest.mark.parametrize("chunk", [1 << 20, 5000, 100])
@pytest.mark.parametrize("res", ["us", "ns", "mod"])
def test_chunks_are_fresh_bytearrays_and_data_bytes(chunk, res, monkeypatch):
    """Every chunk kept by the consumer stays valid after later refills;
    every Packet's data is bytes, the same from each path."""
    monkeypatch.setattr(_stream, "CHUNK", chunk)
    recs = records(200, seed=3, res="ns" if res == "ns" else "us")
    data = pcap(recs, res)
    want = expected(recs, "ns" if res == "ns" else "us")
    r = PcapReader(io.BytesIO(data))
    chunks = [c for c in r.batches(lazy=True) if type(c) is RecordChunk]
    assert len({id(c.buf) for c in chunks}) == len(chunks)
    assert all(type(c.buf) is bytearray for c in chunks)
    # columns and packets only now, after every refill
    out = []
    for c in chunks:
        off, cap, orig, ts = c.columns()
        assert off.tolist() == c.off and cap.tolist() == c.cap
        one = [c.packet(i) for i in range(len(c))]
        many = c.packets()
        assert [(p.ts, p.data, p.orig_len) for p in one] == \
            [(p.ts, p.data, p.orig_len) for p in many]
        assert all(type(p.data) is bytes for p in one + list(many))
        out += many
    assert got(out) == want
    # the eager path and the raw path agree
    assert got(e for b in PcapReader(io.BytesIO(data)).batches() for e in b) == want
    if res != "mod":
        r = PcapReader(io.BytesIO(data))
        raw = b"".join(bytes(x) for x, n, mx in r.raw_batches())
        assert raw == data[24:]


@pytest.mark.parametrize("chunk", [1 << 20, 4096, 64])
@pytest.mark.parametrize("bo", ["<", ">"])
def test_columns_both_byte_orders(chunk, bo, monkeypatch):
    monkeypatch.setattr(_stream, "CHUNK", chunk)
    recs = [(4000000000 - i, 999999 - i, pkt(40 + i % 9), 1500 + i) for i in range(500)]
    r = PcapReader(io.BytesIO(pcap(recs, "us", bo)))
    n = 0
    for c in r.batches(lazy=True):
        if type(c) is not RecordChunk:
            continue
        off, cap, orig, ts = c.columns()
        for i in range(len(c)):
            s, f, d, o = recs[n]
            assert (ts[i], cap[i], orig[i]) == (s * 10 ** 9 + f * 1000, len(d), o)
            assert bytes(c.buf[off[i]:off[i] + cap[i]]) == d
            n += 1
    assert n == len(recs)


# --- damage found by the walks: same offsets at every chunk size ---------

def damaged_inputs():
    recs = records(40, seed=9)
    good = pcap(recs)
    ends = [24]
    for s, f, d, o in recs:
        ends.append(ends[-1] + 16 + len(d))
    cases = []
    for k in (1, 7, 20, 39):
        # file cut inside record k's header / inside its data
        cases.append((good[:ends[k] + 5], k, ends[k], "truncated record header (5 of 16 bytes)"))
        cl = len(recs[k][2])
        if cl > 2:
            cases.append((good[:ends[k] + 16 + cl - 1], k, ends[k],
                          f"truncated record (captured length {cl}, {cl - 1} bytes present)"))
        # an implausible caplen
        bad = bytearray(good)
        struct.pack_into("<I", bad, ends[k] + 8, (1 << 28) + 1)
        cases.append((bytes(bad), k, ends[k], f"implausible record length {(1 << 28) + 1}"))
    return recs, cases


@pytest.mark.parametrize("chunk", [1 << 20, 3000, 50])
@pytest.mark.parametrize("path", ["eager", "lazy", "raw"])
def test_damage_offsets(path, chunk, monkeypatch):
    monkeypatch.setattr(_stream, "CHUNK", chunk)
    recs, cases = damaged_inputs()
    for data, k, off, problem in cases:
        r = PcapReader(io.BytesIO(data))
        seen = []
        with pytest.raises(DamagedInput) as ei:
            if path == "eager":
                for b in r.batches():
                    seen += [p for p in b if type(p) is Packet]
            elif path == "lazy":
                for b in r.batches(lazy=True):
                    if type(b) is RecordChunk:
                        seen += b.packets()
            else:
                for x, n, mx in r.raw_batches():
                    seen += [None] * n
        assert (ei.value.offset, ei.value.problem) == (off, problem)
        assert len(seen) == k == r.packets
        if path != "raw":
            assert got(seen) == expected(recs[:k])


@pytest.mark.parametrize("how", ["bytesio", "file", "short"])
def test_huge_length_field_does_not_allocate_it(how, tmp_path):
    """A damaged caplen just under the plausibility limit asks for ~256 MiB
    of a small file: the buffer grows only as data come (a zero-filled
    bytearray of the requested size would be resident memory)."""
    import tracemalloc
    data = bytearray(pcap([(1, 0, pkt(60), 60)] * 50))
    struct.pack_into("<I", data, 24 + 10 * 76 + 8, (1 << 28) - 16)
    data = bytes(data)
    p = tmp_path / "d.pcap"
    p.write_bytes(data)
    for lazy in (False, True):
        f = (io.BytesIO(data) if how == "bytesio" else ShortReader(data, 999)
             if how == "short" else open(p, "rb", buffering=0))
        tracemalloc.start()
        try:
            r = PcapReader(f)
            with pytest.raises(DamagedInput) as ei:
                for b in r.batches(lazy=lazy):
                    pass
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            f.close()
        assert ei.value.offset == 24 + 10 * 76
        assert "truncated record" in ei.value.problem
        assert peak < 16 << 20, peak


@pytest.mark.parametrize("chunk", [1 << 20, 1000])
def test_records_bigger_than_a_chunk(chunk, monkeypatch):
    """need > CHUNK: the buffer is grown to exactly what refill() reads."""
    monkeypatch.setattr(_stream, "CHUNK", chunk)
    recs = [(1, 0, bytes([i]) * n, n) for i, n in enumerate([10, 300000, 5, 2500000, 70000, 1])]
    data = pcap(recs, snaplen=262144)
    for lazy in (False, True):
        r = PcapReader(ShortReader(data, 100000) if lazy else io.BytesIO(data))
        out = []
        for b in r.batches(lazy=lazy):
            if type(b) is RecordChunk:
                out += b.packets()
            else:
                out += b
        assert got(out) == expected(recs)


def test_clean_end_on_a_chunk_boundary(monkeypatch):
    recs = [(1, 0, pkt(84), 84)] * 10          # 100-byte records
    data = pcap(recs)
    for chunk in (76, 100, 176, 1000):
        monkeypatch.setattr(_stream, "CHUNK", chunk)
        for lazy in (False, True):
            r = PcapReader(io.BytesIO(data))
            n = 0
            for b in r.batches(lazy=lazy):
                n += len(b) if type(b) is RecordChunk else sum(type(e) is Packet for e in b)
            assert n == 10 == r.packets
        r = PcapReader(io.BytesIO(data))
        assert sum(n for _, n, _ in r.raw_batches()) == 10


# --- ByteSink with os.writev ---------------------------------------------

def parts_for(n, seed=1, sizes=(16, 45000, 66, 1514, 0, 3)):
    rnd = random.Random(seed)
    return [rnd.randbytes(rnd.choice(sizes)) for _ in range(n)]


class FakeWritev:
    """os.writev that takes at most a few bytes of a call (as a pipe or a
    signal may), records the iovec counts, and can fail."""

    def __init__(self, real, rnd, fail_after=None, err=None, zero=False):
        self.real = real
        self.rnd = rnd
        self.counts = []
        self.fail_after = fail_after
        self.err = err
        self.zero = zero
        self.total = 0

    def __call__(self, fd, bufs):
        bufs = list(bufs)
        self.counts.append(len(bufs))
        if self.zero:
            return 0
        want = sum(len(memoryview(b).cast("B")) for b in bufs)
        if self.fail_after is not None and self.total >= self.fail_after:
            raise OSError(self.err, os.strerror(self.err))
        take = want if self.rnd.random() < 0.3 else self.rnd.randrange(0, want + 1) if want else 0
        if want and not take:
            take = 1
        out = []
        left = take
        for b in bufs:
            m = memoryview(b).cast("B")
            if left <= 0:
                break
            out.append(m[:left])
            left -= len(m[:left])
        n = self.real(fd, out) if out else 0
        self.total += n
        return n


def sink_to(path):
    f = open(path, "wb", buffering=0)
    return f, ByteSink(f)


@pytest.mark.parametrize("iov", [1024, 16, 3])
def test_writev_partial_writes_exact(iov, tmp_path, monkeypatch):
    monkeypatch.setattr(_stream, "IOV_MAX", iov)
    fake = FakeWritev(os.writev, random.Random(iov))
    monkeypatch.setattr(os, "writev", fake)
    f, sink = sink_to(tmp_path / "o")
    want = []
    for rnd in range(5):
        ps = parts_for(300, seed=rnd)
        ps.append(memoryview(bytearray(b"xyz" * 1000))[5:2005])   # raw records
        want += ps
        sink.parts += ps
        sink.size += 10 ** 9                # force the writev path
        sink.flush()
        assert sink.parts == [] and sink.size == 0
    f.close()
    data = b"".join(bytes(p) for p in want)
    assert (tmp_path / "o").read_bytes() == data
    assert sink.offset == len(data)
    assert max(fake.counts) <= iov
    assert len(fake.counts) > 5


def test_writev_batches_over_iov_max(tmp_path, monkeypatch):
    calls = []
    real = os.writev

    def spy(fd, bufs):
        calls.append(len(bufs))
        return real(fd, bufs)

    monkeypatch.setattr(os, "writev", spy)
    f, sink = sink_to(tmp_path / "o")
    ps = [bytes([i & 0xFF]) * 1500 for i in range(3 * _stream.IOV_MAX + 7)]
    sink.parts += ps
    sink.size = sum(map(len, ps))
    sink.flush()
    f.close()
    assert calls == [_stream.IOV_MAX] * 3 + [7]
    assert (tmp_path / "o").read_bytes() == b"".join(ps)


def test_join_path_for_small_parts_and_other_files(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "writev", lambda fd, b: calls.append(1) or os.write(fd, b""))
    # small parts (per-part cost of writev > the join): joined
    f, sink = sink_to(tmp_path / "o")
    ps = [b"a" * 66, b"b" * 16] * 100
    sink.parts += ps
    sink.size = sum(map(len, ps))
    sink.flush()
    f.close()
    assert (tmp_path / "o").read_bytes() == b"".join(ps) and not calls
    # no fd: BytesIO, subclasses, read-only, non-blocking
    assert ByteSink(io.BytesIO())._fd is None

    class MyFile(io.FileIO):
        pass

    with MyFile(tmp_path / "m", "wb") as g:
        assert ByteSink(g)._fd is None
    with open(tmp_path / "o", "rb", buffering=0) as g:
        assert ByteSink(g)._fd is None
    r, w = os.pipe()
    os.set_blocking(w, False)
    with os.fdopen(w, "wb", buffering=0) as g:
        assert ByteSink(g)._fd is None
    os.close(r)
    with open(tmp_path / "b", "wb") as g:          # BufferedWriter over FileIO
        assert ByteSink(g)._fd == g.fileno()


def test_writev_after_buffered_writer_data(tmp_path):
    """What a BufferedWriter (stdout) holds is written before the parts."""
    with open(tmp_path / "o", "wb") as f:
        f.write(b"held in the buffer;")
        sink = ByteSink(f)
        assert sink._fd is not None
        sink.parts += [b"A" * 5000, b"B" * 5000]
        sink.size = 10000
        sink.flush()
        f.write(b";after")
    assert (tmp_path / "o").read_bytes() == b"held in the buffer;" + b"A" * 5000 + b"B" * 5000 + b";after"


@pytest.mark.parametrize("writev", [True, False])
def test_write_errors_same_both_paths(writev, tmp_path, monkeypatch):
    if not writev:
        monkeypatch.setattr(_stream, "WRITEV_MIN", 1 << 60)
    big = [b"x" * 40000] * 40
    # ENOSPC (/dev/full)
    if os.path.exists("/dev/full"):
        with open("/dev/full", "wb", buffering=0) as f:
            sink = ByteSink(f)
            sink.parts += big
            sink.size = 40000 * 40
            with pytest.raises(UnusableInput) as ei:
                sink.flush()
            assert str(ei.value) == "cannot write output: No space left on device"
    # EPIPE: BrokenPipeError goes up as it is (the CLI's one line)
    r, w = os.pipe()
    os.close(r)
    with os.fdopen(w, "wb", buffering=0) as f:
        sink = ByteSink(f)
        sink.parts += big
        sink.size = 40000 * 40
        with pytest.raises(BrokenPipeError):
            sink.flush()


@pytest.mark.parametrize("fake_kw,msg", [
    (dict(fail_after=1000, err=errno.ENOSPC), "No space left on device"),
    (dict(zero=True), "short write"),
])
def test_writev_errors_after_partial(tmp_path, monkeypatch, fake_kw, msg):
    monkeypatch.setattr(os, "writev", FakeWritev(os.writev, random.Random(5), **fake_kw))
    f, sink = sink_to(tmp_path / "o")
    sink.parts += [b"y" * 3000] * 10
    sink.size = 30000
    with pytest.raises(UnusableInput, match=f"cannot write output: {msg}"):
        sink.flush()
    f.close()


def test_writev_to_a_pipe_read_slowly():
    """A real pipe: the kernel takes the parts a pipe buffer at a time."""
    r, w = os.pipe()
    ps = parts_for(2000, seed=7)
    want = b"".join(ps)
    got_parts = []

    def drain():
        with os.fdopen(r, "rb", buffering=0) as f:
            while True:
                b = f.read(4096)
                if not b:
                    break
                got_parts.append(b)

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    with os.fdopen(w, "wb", buffering=0) as f:
        sink = ByteSink(f)
        assert sink._fd is not None
        sink.parts += ps
        sink.size = len(want)
        sink.flush()
    t.join(60)
    assert b"".join(got_parts) == want and sink.offset == len(want)


# --- the writers end to end: byte-identical through either path ----------

def events(seed=0):
    rnd = random.Random(seed)
    evs = [Section(), Interface(1, 262144, 6)]
    for i in range(3000):
        n = rnd.choice([54, 66, 1514, 45000, 65000, 300000 if i == 2500 else 66])
        evs.append(Packet(1700000000 * 10 ** 9 + i * 1000, rnd.randbytes(n), n + rnd.choice([0, 4])))
    return evs


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_writer_output_identical(fmt, tmp_path, monkeypatch):
    evs = events()
    outs = []
    for mode in ("bytesio", "file", "file-join", "partial"):
        with monkeypatch.context() as m:
            if mode == "file-join":
                m.setattr(_stream, "WRITEV_MIN", 1 << 60)
            if mode == "partial":
                m.setattr(os, "writev", FakeWritev(os.writev, random.Random(1)))
            if mode == "bytesio":
                f = io.BytesIO()
                w = PcapWriter(f) if fmt == "pcap" else None
                if w is None:
                    from pcapgro.capture.pcapng import PcapngWriter
                    w = PcapngWriter(f)
                for k in range(0, len(evs), 100):
                    w.write_batch(evs[k:k + 100])
                w.close()
                outs.append(f.getvalue())
            else:
                p = tmp_path / f"{mode}.{fmt}"
                w = open_writer(p, fmt)
                for k in range(0, len(evs), 100):
                    w.write_batch(evs[k:k + 100])
                w.close()
                outs.append(p.read_bytes())
    assert outs[0] == outs[1] == outs[2] == outs[3]
    if fmt == "pcap":
        # the snaplen was patched at close (a 300000-byte packet came late)
        assert struct.unpack("<I", outs[1][16:20])[0] == 300000


def test_raw_copy_through_writev(tmp_path, monkeypatch):
    """pcap -> pcap pass-through: memoryviews of the reader's bytearrays go
    to os.writev as they are."""
    monkeypatch.setattr(_stream, "CHUNK", 5000)
    monkeypatch.setattr(os, "writev", FakeWritev(os.writev, random.Random(2)))
    recs = records(400, seed=11)
    data = pcap(recs, snaplen=262144)
    src = tmp_path / "in.pcap"
    src.write_bytes(data)
    from pcapgro import pipeline
    r = open_reader(src)
    w = open_writer(tmp_path / "out.pcap", "pcap")
    pipeline.run(r, w)
    w.close()
    r.close()
    assert (tmp_path / "out.pcap").read_bytes() == data
