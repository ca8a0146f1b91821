"""File-level fuzz: mutate the real and public captures (bit flips, cut
points, length fields rewritten, block types changed, bytes inserted or
removed) and run ``merge`` (default and ``--fraglist --udp gro``),
``split`` and ``split --restore`` on each, in-process, with a timer per run.

Contract checked: exit status 0, 2 or 3; no traceback and no "internal
error"; for 2 and 3 exactly one error line (``pcapgro: error: ...`` or
``pcapgro: damaged input at byte offset N: ...``; warnings may precede
it); for 3 the output is a valid capture; no run takes longer than
``TIMEOUT`` seconds (a hang fails the test).

Deterministic: hypothesis with ``derandomize=True`` and a fixed number of
examples (500, ~13 s on a slow core; PCAPGRO_FUZZ_EXAMPLES=N for a longer
hunt: 2500 ran clean in ~40 s); every crash found
is kept in ``tests/fuzz_corpus/`` and replayed by
:func:`test_fuzz_corpus_regressions`.
"""

import contextlib
import io
import os
import random
import signal
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from capture_helpers import all_captures
from pcapgro.capture import open_reader
from pcapgro.record import Packet

CORPUS = Path(__file__).parent / "fuzz_corpus"
TIMEOUT = 20           # seconds per pcapgro run (inputs are <= ~64 KiB)
PREFIX = 48 * 1024     # big captures: a prefix of whole records is mutated
COMMANDS = [["merge"], ["merge", "--fraglist", "--udp", "gro"], ["split"], ["split", "--restore"]]


class Hang(BaseException):
    """Raised by the timer: not an Exception, so pcapgro cannot swallow it."""


def _alarm(signum, frame):
    raise Hang()


def run_inprocess(args):
    """``pcapgro.cli.main(args)`` -> (exit status, stderr text); raises
    AssertionError on a hang (TIMEOUT)."""
    from pcapgro.cli import main
    err = io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
    try:
        with contextlib.redirect_stderr(err):
            try:
                main(args)
                status = 0
            except SystemExit as e:
                status = e.code
    except Hang:
        raise AssertionError(f"hang: pcapgro {' '.join(map(str, args))} ran over {TIMEOUT} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return status, err.getvalue()


def check_contract(path, workdir):
    """Run every command on ``path``; assert the contract; returns the
    exit statuses."""
    statuses = []
    for i, cmd in enumerate(COMMANDS):
        out = os.path.join(workdir, f"out{i}.pcapng")
        if os.path.exists(out):
            os.unlink(out)
        args = [*cmd, "-q", str(path), out]
        status, err = run_inprocess(args)
        where = f"pcapgro {' '.join(args)}: exit {status}\n{err}"
        assert status in (0, 2, 3), where
        assert "Traceback" not in err and "internal error" not in err, where
        lines = err.splitlines()
        assert all(ln.startswith("pcapgro: ") for ln in lines), where
        errors = [ln for ln in lines if not ln.startswith("pcapgro: warning: ")
                  and not ln.startswith("pcapgro: note: ")]
        if status == 0:
            assert errors == [], where
        else:
            assert len(errors) == 1 and lines[-1] == errors[0], where
            if status == 3:
                assert errors[0].startswith("pcapgro: damaged input at byte offset "), where
            else:
                assert errors[0].startswith("pcapgro: error: "), where
        if status in (0, 3):
            # a valid capture (possibly holding nothing but headers)
            n = sum(1 for e in open_reader(out) if type(e) is Packet)
            assert n >= 0
        else:
            assert not os.path.exists(out), where
        statuses.append(status)
    assert not [f for f in os.listdir(workdir) if f.endswith(".part")]
    return statuses


# --- seeds: every capture the project has ------------------------------------

def _layout(data):
    """(byte order, fmt, fields): fields are (offset, size, kind) of the
    structural fields of ``data`` -- record/block lengths, block types,
    interface ids -- for targeted rewrites."""
    fields = []
    if data[:4] == b"\n\r\r\n":
        bo = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        pos = 0
        while pos + 12 <= len(data):
            bt, bl = struct.unpack_from(bo + "II", data, pos)
            if bl < 12 or bl & 3 or pos + bl > len(data):
                break
            fields += [(pos, 4, "type"), (pos + 4, 4, "len"), (pos + bl - 4, 4, "len")]
            if bt == 6 and bl >= 32:
                fields += [(pos + 8, 4, "iface"), (pos + 20, 4, "len"), (pos + 24, 4, "len")]
            elif bt == 1 and bl >= 20:
                fields += [(pos + 8, 2, "linktype"), (pos + 12, 4, "len")]
            elif bt == 0x0A0D0D0A and bl >= 28:
                fields += [(pos + 12, 2, "version"), (pos + 8, 4, "bom")]
            pos += bl
        return bo, "pcapng", fields, pos
    bo = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\x34\xcd\xb2\xa1") else ">"
    hl = 24 if data[:4] in (b"\x34\xcd\xb2\xa1", b"\xa1\xb2\xcd\x34") else 16
    fields += [(0, 4, "magic"), (16, 4, "len"), (20, 4, "linktype")]
    pos = 24
    while pos + hl <= len(data):
        cl = struct.unpack_from(bo + "I", data, pos + 8)[0]
        if pos + hl + cl > len(data):
            break
        fields += [(pos + 8, 4, "len"), (pos + 12, 4, "len")]
        pos += hl + cl
    return bo, "pcap", fields, pos


def _bounds(data):
    """Offsets where records / blocks of ``data`` end (in order)."""
    out = []
    if data[:4] == b"\n\r\r\n":
        bo = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        pos = 0
        while pos + 12 <= len(data):
            bl = struct.unpack_from(bo + "I", data, pos + 4)[0]
            if bl < 12 or pos + bl > len(data):
                break
            pos += bl
            out.append(pos)
        return out
    bo = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\x34\xcd\xb2\xa1") else ">"
    hl = 24 if data[:4] in (b"\x34\xcd\xb2\xa1", b"\xa1\xb2\xcd\x34") else 16
    pos = 24
    while pos + hl <= len(data):
        e = pos + hl + struct.unpack_from(bo + "I", data, pos + 8)[0]
        if e > len(data):
            break
        pos = e
        out.append(pos)
    return out


def _seed_files():
    return all_captures((".pcap", ".pcapng", ".ntar"))


_SEEDS = {}


def seeds():
    """{name: bytes}: each capture, cut to whole records/blocks within PREFIX."""
    if not _SEEDS:
        for p in _seed_files():
            data = p.read_bytes()
            if len(data) > PREFIX:
                bounds = _bounds(data)
                cut = max([b for b in bounds if b <= PREFIX] + bounds[:3])
                data = data[:cut]
            _SEEDS[str(p)] = data
    return _SEEDS


def mutate(data, rnd):
    """One to three mutations of ``data`` (bytes) -> bytes."""
    d = bytearray(data)
    bo, fmt, fields, _ = _layout(bytes(d))
    for _ in range(rnd.choice([1, 1, 1, 2, 3])):
        op = rnd.randrange(8)
        if op == 0 and d:                                     # bit flips
            for _ in range(rnd.randint(1, 8)):
                i = rnd.randrange(len(d))
                d[i] ^= 1 << rnd.randrange(8)
        elif op == 1 and d:                                   # cut point
            d = d[:rnd.randrange(len(d))]
        elif op in (2, 3) and fields:                         # a length/type field rewritten
            off, size, kind = rnd.choice([f for f in fields if f[0] + f[1] <= len(d)] or [(0, 1, "x")])
            if off + size > len(d):
                continue
            cur = int.from_bytes(d[off:off + size], "little" if bo == "<" else "big")
            v = rnd.choice([0, 1, 4, 8, 11, 12, 13, 16, 20, 27, 28, 32, 0xFFFF, 0x7FFFFFFF,
                            0xFFFFFFFC, 0xFFFFFFFF, cur + 1, cur - 1, cur + 4, cur - 4,
                            cur * 2, cur + 1000, rnd.randrange(1 << (8 * size))])
            v &= (1 << (8 * size)) - 1
            if kind == "type" and rnd.random() < 0.6:
                v = rnd.choice([1, 2, 3, 4, 5, 6, 7, 0x0A0D0D0A, 0xBAD, 0x40000BAD, 0x80000001, 9])
            d[off:off + size] = v.to_bytes(size, "little" if bo == "<" else "big")
        elif op == 4 and d:                                   # bytes inserted
            i = rnd.randrange(len(d))
            d[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.choice([1, 2, 4, 8, 13])))
        elif op == 5 and len(d) > 8:                          # bytes removed
            i = rnd.randrange(len(d) - 4)
            del d[i:i + rnd.choice([1, 2, 4, 8, 16])]
        elif op == 6 and len(d) > 40:                         # a chunk duplicated
            i = rnd.randrange(len(d) - 32)
            j = rnd.randrange(i, len(d))
            d[j:j] = d[i:i + rnd.randint(4, 200)]
        elif op == 7 and d:                                   # a run of random bytes
            i = rnd.randrange(len(d))
            n = rnd.randint(1, 64)
            d[i:i + n] = bytes(rnd.randrange(256) for _ in range(n))
    return bytes(d)


def test_seeds_present():
    s = seeds()
    assert any(k.endswith(".pcapng") for k in s) and any(k.endswith(".pcap") for k in s), sorted(s)


EXAMPLES = int(os.environ.get("PCAPGRO_FUZZ_EXAMPLES", "500"))


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(idx=st.integers(0, 10**6), seed=st.integers(0, 2**32 - 1))
def test_fuzz_mutated_captures(idx, seed):
    names = sorted(seeds())
    name = names[idx % len(names)]
    data = mutate(seeds()[name], random.Random(seed))
    with tempfile.TemporaryDirectory(prefix="pcapgro-fuzz-") as wd:
        path = os.path.join(wd, "in" + os.path.splitext(name)[1])
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            check_contract(path, wd)
        except AssertionError as e:
            raise AssertionError(f"seed {name} mutated with Random({seed}): {e}") from None


def test_fuzz_unmutated_seeds_clean():
    """The seeds themselves (cut to whole records) are fine: exit 0."""
    with tempfile.TemporaryDirectory(prefix="pcapgro-fuzz-") as wd:
        for name, data in sorted(seeds().items()):
            path = os.path.join(wd, "in" + os.path.splitext(name)[1])
            with open(path, "wb") as fh:
                fh.write(data)
            statuses = check_contract(path, wd)
            assert set(statuses) <= {0, 2}, (name, statuses)


# --- kept crash inputs -------------------------------------------------------

CORPUS_FILES = sorted(p for p in CORPUS.glob("*") if p.suffix in (".pcap", ".pcapng"))


@pytest.mark.parametrize("path", CORPUS_FILES, ids=[p.name for p in CORPUS_FILES])
def test_fuzz_corpus_regressions(path, tmp_path):
    """Each kept input: the contract, and the exact message in ``NAME.expect``
    (first line: exit status; second: the stderr line) when present."""
    statuses = check_contract(path, tmp_path)
    exp = path.with_suffix(path.suffix + ".expect")
    if exp.exists():
        want_status, want_line = exp.read_text().splitlines()[:2]
        for cmd in COMMANDS:
            status, err = run_inprocess([*cmd, "-q", str(path), str(tmp_path / "o.pcapng")])
            assert status == int(want_status) and err.splitlines()[-1] == want_line, (cmd, err)
    assert statuses
