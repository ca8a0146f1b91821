"""range_sums (vectorised one's-complement sums of byte ranges of one buffer)
against the reference ones_sum, range by range."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pcapgro.checksum import ones_sum, range_sums


def reference(buf, starts, ends):
    data = bytes(buf)
    return [ones_sum(data[s:e]) for s, e in zip(starts, ends)]


def check(buf, starts, ends):
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    got = range_sums(buf, starts, ends)
    assert got.dtype == np.int64
    assert got.shape == starts.shape
    assert got.tolist() == reference(buf, starts, ends)
    return got


def random_bytes(rng, n):
    return rng.integers(0, 256, n, dtype=np.uint8).tobytes()


def all_ranges(size):
    """Every (start, end) with 0 <= start <= end <= size."""
    s, e = np.triu_indices(size + 1)
    return s, e


@pytest.mark.parametrize("size", range(0, 19))
def test_every_range_of_small_buffers(size):
    # all parities of start and end, empty ranges, lengths 1..3, the whole
    # buffer, ends at len(buf) (odd and even sizes), buffers shorter than a
    # 32-bit word
    buf = random_bytes(np.random.default_rng(size), size)
    s, e = all_ranges(size)
    check(buf, s, e)                        # sorted by start, overlapping
    order = np.random.default_rng(100 + size).permutation(len(s))
    check(buf, s[order], e[order])          # any order


@pytest.mark.parametrize("size", [4093, 4094, 4095, 4096])
@pytest.mark.parametrize("start_par", [0, 1, 2, 3])
@pytest.mark.parametrize("end_par", [0, 1, 2, 3])
def test_offsets_of_every_parity(size, start_par, end_par):
    rng = np.random.default_rng(size * 16 + start_par * 4 + end_par)
    buf = random_bytes(rng, size)
    s = rng.integers(0, size // 4, 200) * 4 + start_par
    e = rng.integers(0, size // 4, 200) * 4 + end_par
    s, e = np.minimum(s, e), np.maximum(s, e)
    s, e = np.minimum(s, size), np.minimum(e, size)
    check(buf, s, e)
    # short ranges at those offsets: lengths 0..3
    check(buf, s, np.minimum(s + rng.integers(0, 4, 200), size))


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 6, 7, 8, 1023, 1024, 1025, 1026, 1027])
def test_ranges_at_the_end(size):
    buf = random_bytes(np.random.default_rng(size), size)
    s = np.array([max(size - k, 0) for k in range(min(size, 9) + 1)])
    check(buf, s, np.full(len(s), size))                # each ends at len(buf)
    check(buf, s[::-1].copy(), np.full(len(s), size))   # longest first
    check(buf, [0], [size])                             # the whole buffer
    check(buf, [size, size], [size, size])              # empty, at the end


def test_chunk_of_packets():
    # the caller's case: TCP payloads of the packets of a 1 MiB chunk, at
    # even offsets ~1514 bytes apart, full-sized and odd-length ones
    rng = np.random.default_rng(7)
    buf = random_bytes(rng, 1 << 20)
    n = (len(buf) - 1600) // 1514
    s = np.arange(n, dtype=np.int64) * 1514 + 66
    lens = np.full(n, 1448, dtype=np.int64)
    short = rng.random(n) < 0.2
    lens[short] = rng.integers(0, 1448, int(short.sum()))
    check(buf, s, s + lens)
    # header + payload of each packet as adjacent ranges, in one call
    hs = s - 32
    check(buf, np.stack((hs, s), axis=1).ravel(), np.stack((s, s + lens), axis=1).ravel())
    # the last payload ending at the end of the buffer
    e = s + lens
    e[-1] = len(buf)
    check(buf, s, e)


def test_bytes_bytearray_memoryview():
    rng = np.random.default_rng(3)
    data = random_bytes(rng, 2001)
    s = rng.integers(0, 2002, 300)
    e = rng.integers(0, 2002, 300)
    s, e = np.minimum(s, e), np.maximum(s, e)
    want = check(data, s, e).tolist()
    assert range_sums(bytearray(data), s, e).tolist() == want
    assert range_sums(memoryview(data), s, e).tolist() == want
    assert range_sums(np.frombuffer(data, dtype=np.uint8), s, e).tolist() == want
    # views at every alignment of the buffer's memory
    for lead in range(8):
        big = bytearray(b"\xAA" * lead) + data + b"\x55" * 5
        assert range_sums(memoryview(big)[lead:lead + len(data)], s, e).tolist() == want
    # offsets are in bytes whatever the item size
    words = memoryview(data[:2000]).cast("I")
    check(words, [1, 0, 3], [1999, 2000, 4])
    # python lists of ints are accepted
    assert range_sums(data, [1, 0], [7, 2001]).tolist() == reference(data, [1, 0], [7, 2001])


def test_repeated_and_nested_ranges():
    rng = np.random.default_rng(11)
    buf = random_bytes(rng, 10000)
    s = np.array([0, 0, 5, 5, 101, 3, 9999, 10000, 0, 4000])
    e = np.array([10000, 10000, 9995, 5, 102, 4, 10000, 10000, 1, 4001])
    check(buf, s, e)
    check(buf, s[::-1].copy(), e[::-1].copy())
    # the same range many times
    check(buf, np.full(50, 3), np.full(50, 9001))


def test_all_ones_buffer_sums():
    # the largest words: 0xFF...: a sum of k 16-bit words of 0xFFFF is 0 mod
    # 0xFFFF, an odd trailing byte adds 0xFF00
    buf = b"\xff" * 100001
    s = np.array([0, 1, 0, 1, 2, 0])
    e = np.array([100001, 100001, 100000, 100000, 5, 1])
    assert range_sums(buf, s, e).tolist() == [0xFF00, 0, 0, 0xFF00, 0xFF00, 0xFF00]
    check(buf, s, e)


def test_empty_inputs():
    got = range_sums(b"abc", np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert got.dtype == np.int64 and got.shape == (0,)
    assert range_sums(b"", [0, 0], [0, 0]).tolist() == [0, 0]
    assert range_sums(b"abcd", [2, 0, 4], [2, 0, 4]).tolist() == [0, 0, 0]


@pytest.mark.parametrize("starts, ends", [
    ([-1], [2]),            # before the buffer
    ([0], [11]),            # past its end
    ([5], [4]),             # start > end
    ([0, 12], [1, 12]),     # sorted, past its end
    ([4, 0], [3, 10]),      # unsorted, start > end
    ([4, -2], [5, 1]),      # unsorted, before the buffer
    ([0, 1], [1]),          # different lengths
    ([[0]], [[1]]),         # not 1-d
])
def test_bad_ranges_raise(starts, ends):
    with pytest.raises(ValueError):
        range_sums(b"0123456789", starts, ends)


def test_big_buffer_no_overflow():
    # 0xFF bytes: the 32-bit word sums of 2**26 + 8 bytes pass 2**56, the
    # headroom of the uint64 accumulator for the byte swap (x 256)
    for size in ((1 << 26) + 9,):
        buf = b"\xff" * size
        s = np.array([0, 1, 0, 2, size - 3, 5])
        e = np.array([size, size, size - 1, size - 2, size, size - 4])
        # k words of 0xFFFF sum to 0 mod 0xFFFF; an odd trailing byte adds 0xFF00
        assert range_sums(buf, s, e).tolist() == [0xFF00 if (b - a) & 1 else 0
                                                  for a, b in zip(s, e)]


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=300),
       raw=st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300)), max_size=20),
       shuffle=st.booleans())
def test_hypothesis_matches_ones_sum(data, raw, shuffle):
    size = len(data)
    pairs = [(min(a, b, size), min(max(a, b), size)) for a, b in raw]
    if not shuffle:
        pairs.sort()
    s = np.array([p[0] for p in pairs], dtype=np.int64)
    e = np.array([p[1] for p in pairs], dtype=np.int64)
    check(data, s, e)
