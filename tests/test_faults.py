"""Each named fault of issue 9, through the CLI: the one-line message, the
exit status (2 unusable, 3 damaged part-way) and, for 3, the partial
output (a valid capture holding every packet before the damage).

Message contract: exactly one line on stderr starting ``pcapgro: ``; for
damage ``pcapgro: damaged input at byte offset N: PROBLEM``; never a
Python traceback or an "internal error".
"""

import os
import struct
import subprocess
import sys

import pytest

from builders import pcap, shb, idb, epb, spb, block, opts, pkt
from capture_helpers import REPO, run_cli, KERNEL, PUBLIC
from pcapgro.capture import open_reader
from pcapgro.record import Packet, Interface

COMMANDS = [("merge",), ("merge", "--fraglist", "--udp", "gro"), ("merge", "--no-gro"),
            ("split",), ("split", "--restore")]


def pk(path):
    return [(p.ts, p.data, p.orig_len, p.iface) for p in open_reader(path) if type(p) is Packet]


def one_line(p):
    err = p.stderr.decode()
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.count("\n") == 1 and err.startswith("pcapgro: "), err
    return err.strip()


def run_fault(tmp_path, data, suffix, *args):
    f = tmp_path / ("in." + suffix)
    f.write_bytes(data)
    out = tmp_path / ("out." + suffix)
    p = run_cli("merge", "-q", "--no-gro", *args, f, out)
    return p, f, out


def no_partial_files(tmp_path):
    assert not list(tmp_path.glob(".*.part")), list(tmp_path.iterdir())


def expect_unusable(tmp_path, data, suffix, msg):
    p, f, out = run_fault(tmp_path, data, suffix)
    assert p.returncode == 2, p.stderr
    line = one_line(p)
    assert line.startswith("pcapgro: error: ") and msg in line, line
    assert not out.exists()
    no_partial_files(tmp_path)
    return line


def expect_damaged(tmp_path, data, suffix, offset, problem, good, commands=COMMANDS[:1]):
    """Exit 3 with the offset and problem; OUT holds exactly ``good``
    (the packets before the damage, as built); the same for ``commands``
    (to a file and to standard output)."""
    p, f, out = run_fault(tmp_path, data, suffix)
    assert p.returncode == 3, p.stderr
    line = one_line(p)
    assert line.startswith(f"pcapgro: damaged input at byte offset {offset}: {problem}"), line
    assert [d for _, d, _, _ in pk(out)] == good
    no_partial_files(tmp_path)
    # the same through the engines and to standard output
    for cmd in commands:
        for o in (tmp_path / ("e." + suffix), "-"):
            p = run_cli(cmd[0], "-q", *cmd[1:], f, o)
            assert p.returncode == 3, (cmd, p.stderr)
            assert one_line(p) == line
            if o == "-":
                got = tmp_path / ("stdout." + suffix)
                got.write_bytes(p.stdout)
                o = got
            assert len(pk(o)) == len(good), cmd   # pass-through of these frames
    return line


def setlen(b, n, bo="<"):
    """Block ``b`` with its leading total length rewritten to ``n``."""
    return b[:4] + struct.pack(bo + "I", n) + b[8:]


def frames(n, size=60):
    return [pkt(size, 0x41 + i) for i in range(n)]


# --- not a capture at all (exit 2) -------------------------------------------

@pytest.mark.parametrize("data,msg", [
    (b"hello world, not a capture", "not a pcap or pcapng file (starts with 0x68656c6c)"),
    (b"\x00\x00\x00\x00" * 10, "not a pcap or pcapng file (starts with 0x00000000)"),
    (b"", "empty input"),
    (b"\xd4\xc3", "not a pcap or pcapng file"),
    (b"\x1f\x8b\x08\x08" + b"\0" * 20, "gzip-compressed: decompress it first"),
    (b"\xfd7zXZ\0" + b"\0" * 20, "compressed (xz, bzip2 or zstd)"),
])
def test_bad_magic_and_empty(tmp_path, data, msg):
    expect_unusable(tmp_path, data, "pcap", msg)


def test_pcap_truncated_file_header(tmp_path):
    expect_unusable(tmp_path, pcap([(1, 0, pkt(60), 60)])[:12], "pcap",
                    "truncated pcap file header (12 of 24 bytes)")


def test_pcapng_bad_byte_order_magic(tmp_path):
    data = shb()
    data = data[:8] + b"\x11\x22\x33\x44" + data[12:]
    expect_unusable(tmp_path, data, "pcapng", "byte-order magic")


def test_pcapng_shb_unknown_major_version(tmp_path):
    s = shb()
    s = s[:12] + struct.pack("<H", 2) + s[14:]
    expect_unusable(tmp_path, s + idb() + epb("<", 0, 1, pkt(60)), "pcapng",
                    "unsupported pcapng version 2.0")


def test_pcapng_truncated_in_first_shb(tmp_path):
    """Nothing readable at all: unusable (2), as a cut pcap file header is."""
    line = expect_unusable(tmp_path, shb()[:20], "pcapng", "truncated")
    assert "section header" in line


# --- pcap records ------------------------------------------------------------

def pcap_with_len(n_good, bad_caplen, tail=b""):
    fr = frames(n_good + 1)
    data = pcap([(i, 0, f, len(f)) for i, f in enumerate(fr)])
    at = 24 + n_good * (16 + 60)
    return data[:at + 8] + struct.pack("<I", bad_caplen) + data[at + 12:] + tail, at, fr[:n_good]


@pytest.mark.parametrize("caplen", [0xFFFFFFFF, 0x80000000, (1 << 28) + 1])
def test_pcap_absurd_record_length(tmp_path, caplen):
    data, at, good = pcap_with_len(2, caplen)
    expect_damaged(tmp_path, data, "pcap", at, f"implausible record length {caplen}", good)


def test_pcap_record_length_beyond_the_file(tmp_path):
    data, at, good = pcap_with_len(3, 1000)
    expect_damaged(tmp_path, data, "pcap", at,
                   "truncated record (captured length 1000, 60 bytes present)", good, COMMANDS)


def test_pcap_record_length_beyond_the_snaplen_is_kept(tmp_path):
    """caplen > the header's snaplen but plausible: kept, as libpcap (up to
    262144) and Wireshark do; the output header's snaplen covers it."""
    data = pcap([(1, 0, pkt(60), 60), (2, 0, pkt(1000), 1000), (3, 0, pkt(60), 60)], snaplen=100)
    p, f, out = run_fault(tmp_path, data, "pcap")
    assert p.returncode == 0 and p.stderr == b""
    assert [len(d) for _, d, _, _ in pk(out)] == [60, 1000, 60]
    assert struct.unpack("<I", out.read_bytes()[16:20])[0] >= 1000


def test_pcap_truncated_mid_record_header(tmp_path):
    fr = frames(3)
    data = pcap([(i, 0, f, 60) for i, f in enumerate(fr)])
    at = 24 + 2 * 76
    expect_damaged(tmp_path, data[:at + 9], "pcap", at,
                   "truncated record header (9 of 16 bytes)", fr[:2])


def test_pcap_truncated_mid_record(tmp_path):
    fr = frames(3)
    data = pcap([(i, 0, f, 60) for i, f in enumerate(fr)])
    at = 24 + 2 * 76
    expect_damaged(tmp_path, data[:at + 16 + 25], "pcap", at,
                   "truncated record (captured length 60, 25 bytes present)", fr[:2], COMMANDS)


def test_pcap_header_only_is_empty_capture(tmp_path):
    p, f, out = run_fault(tmp_path, pcap([]), "pcap")
    assert p.returncode == 0 and pk(out) == []


# --- pcapng blocks -----------------------------------------------------------

def ng(n_good, bad):
    fr = frames(n_good)
    head = shb() + idb() + b"".join(epb("<", 0, i, f) for i, f in enumerate(fr))
    return head + bad, len(head), fr


BAD_LENGTHS = [
    (lambda e: setlen(e, len(e) - 2), "bad block length 90"),       # not a multiple of 4
    (lambda e: setlen(e, len(e) + 2), "bad block length 94"),
    (lambda e: setlen(e, 8), "bad block length 8"),                 # smaller than 12
    (lambda e: setlen(e, 0), "bad block length 0"),
    (lambda e: setlen(e, 0xFFFFFFFC), "bad block length 4294967292"),
    (lambda e: setlen(e, 12), "block total length 12 does not match its trailing length 0"),
    # too small for an EPB (trailing length right), also as the file's last block
    (lambda e: struct.pack("<III", 6, 12, 12), "bad block length 12 for an enhanced packet block"),
    (lambda e: struct.pack("<II", 6, 28) + b"\0" * 16 + struct.pack("<I", 28),
     "bad block length 28 for an enhanced packet block"),
]


@pytest.mark.parametrize("i", range(len(BAD_LENGTHS)))
def test_pcapng_bad_block_length(tmp_path, i):
    make, problem = BAD_LENGTHS[i]
    for tail in (epb("<", 0, 10, pkt(60)), b""):
        data, at, good = ng(2, make(epb("<", 0, 9, pkt(60))) + tail)
        expect_damaged(tmp_path, data, "pcapng", at, problem, good)


@pytest.mark.parametrize("bt", [3, 5, 0x7777, 0x40000BAD, 1])
def test_pcapng_bad_block_length_other_types(tmp_path, bt):
    """SPB, ISB, unknown, do-not-copy custom, IDB with bad lengths."""
    for bl in (8, 14, 12 if bt in (3, 1) else 10):
        if bl >= 12 and bl % 4 == 0:      # consistent, but too small for the type
            bad = struct.pack("<II", bt, bl) + b"\0" * (bl - 12) + struct.pack("<I", bl)
        else:
            bad = struct.pack("<II", bt, bl) + b"\0" * 4
        data, at, good = ng(2, bad + epb("<", 0, 10, pkt(60)))
        line = expect_damaged(tmp_path, data, "pcapng", at, f"bad block length {bl}", good)
        assert "block" in line


def test_pcapng_trailing_length_mismatch(tmp_path):
    e = epb("<", 0, 9, pkt(60))
    bad = e[:-4] + struct.pack("<I", len(e) + 4)
    data, at, good = ng(2, bad + epb("<", 0, 10, pkt(60)))
    expect_damaged(tmp_path, data, "pcapng", at,
                   f"block total length {len(e)} does not match its trailing length {len(e) + 4}",
                   good, COMMANDS)


def test_pcapng_block_length_beyond_the_file(tmp_path):
    e = epb("<", 0, 9, pkt(60))
    data, at, good = ng(2, setlen(e, len(e) + 400))
    expect_damaged(tmp_path, data, "pcapng", at,
                   f"truncated block ({len(e)} bytes left, {len(e) + 400} needed)", good)


def test_pcapng_truncated_mid_block_header(tmp_path):
    data, at, good = ng(2, epb("<", 0, 9, pkt(60))[:7])
    expect_damaged(tmp_path, data, "pcapng", at, "truncated block (7 bytes left, 12 needed)", good)


def test_pcapng_truncated_mid_block(tmp_path):
    e = epb("<", 0, 9, pkt(60))
    data, at, good = ng(3, e[:50])
    expect_damaged(tmp_path, data, "pcapng", at, f"truncated block (50 bytes left, {len(e)} needed)",
                   good, COMMANDS)


def test_pcapng_packet_for_missing_interface(tmp_path):
    data, at, good = ng(2, epb("<", 0, 9, pkt(60))[:8] + struct.pack("<I", 5)
                        + epb("<", 0, 9, pkt(60))[12:])
    expect_damaged(tmp_path, data, "pcapng", at,
                   "packet for interface 5, but the section has 1 interface(s)", good)


def test_pcapng_interface_ids_restart_with_each_section(tmp_path):
    """An interface of section 1 does not exist in section 2."""
    head = shb() + idb() + idb() + epb("<", 0, 1, pkt(60)) + epb("<", 1, 1, pkt(61)) + shb() + idb()
    data = head + epb("<", 1, 2, pkt(62))
    expect_damaged(tmp_path, data, "pcapng", len(head),
                   "packet for interface 1, but the section has 1 interface(s)", [pkt(60), pkt(61)])


def test_pcapng_later_shb_unknown_version(tmp_path):
    s = shb()
    s = s[:12] + struct.pack("<H", 3) + s[14:]
    data, at, good = ng(2, s + idb() + epb("<", 0, 1, pkt(60)))
    expect_damaged(tmp_path, data, "pcapng", at, "unsupported pcapng version 3.0", good)


def test_pcapng_option_past_its_block(tmp_path):
    e = epb("<", 0, 9, pkt(60), options=[(1, b"comment")])
    # the comment option claims 200 bytes
    i = 28 + 60 + 2
    bad = e[:i] + struct.pack("<H", 200) + e[i + 2:]
    data, at, good = ng(2, bad)
    expect_damaged(tmp_path, data, "pcapng", at, "option 1 runs past the end of its block", good)


def _claim(b, at, n, bo="<"):
    """Block ``b`` with the 16-bit length field at ``at`` set to ``n``."""
    return b[:at] + struct.pack(bo + "H", n) + b[at + 2:]


_ISB = block("<", 5, struct.pack("<III", 0, 1, 2) + opts("<", [(4, bytes(8))]))
_NRB = block("<", 4, struct.pack("<HH", 1, 8) + b"\x0a\0\0\x01ab\0\0" + b"\0\0\0\0"
             + opts("<", [(2, b"dns")]))
_DSB = block("<", 0xA, struct.pack("<II", 0x544C534B, 5) + b"CLNT\n\0\0\0" + opts("<", [(1, b"hi")]))
_SJEB = block("<", 9, b"__REALTIME_TIMESTAMP=1\nMESSAGE=x\n\n")

# (bad block, problem): option lists and records of every non-packet block
# type whose layout is known are walked as the EPB's are
BAD_BLOCKS = [
    (_claim(_ISB, 22, 200), "option 4 runs past the end of its block"),
    (block("<", 5, struct.pack("<II", 0, 0)), "bad block length 20 for an interface statistics block"),
    (_claim(_NRB, 10, 300), "name resolution record of type 1 runs past the end of its block"),
    (_claim(_NRB, 26, 99), "option 2 runs past the end of its block"),
    (block("<", 4, struct.pack("<HH", 1, 2) + b"\x0a\0\0\0"),
     "name resolution record of type 1 has length 2, shorter than its 4-byte address"),
    (block("<", 4, struct.pack("<HH", 2, 19) + bytes(16) + b"abc\0"),
     "name resolution record of type 2 has a name not ending in NUL"),
    (block("<", 4, b""), "bad block length 12 for a name resolution block"),
    (_claim(_DSB, 26, 77), "option 1 runs past the end of its block"),
    (block("<", 0xA, struct.pack("<II", 0x544C534B, 400) + b"CLNT"),
     "decryption secrets of 400 bytes run past the end of their block"),
    (block("<", 0xA, struct.pack("<I", 0x544C534B)), "bad block length 16 for a decryption secrets block"),
    (block("<", 0xBAD, b""), "bad block length 12 for a custom block"),
    (block("<", 0x40000BAD, b""), "bad block length 12 for a custom block"),
    (block("<", 9, b"A=1\n\n"), "bad block length 20 for a systemd journal export block"),
]


@pytest.mark.parametrize("i", range(len(BAD_BLOCKS)))
def test_pcapng_damaged_non_packet_block(tmp_path, i):
    """A damaged ISB, NRB, DSB, custom or journal block is damage (exit 3),
    as a damaged EPB is, not copied verbatim into an output tshark refuses."""
    bad, problem = BAD_BLOCKS[i]
    data, at, good = ng(2, bad + epb("<", 0, 10, pkt(60)))
    expect_damaged(tmp_path, data, "pcapng", at, problem, good)


def test_pcapng_good_non_packet_blocks_kept(tmp_path):
    """The undamaged blocks BAD_BLOCKS are made from are copied verbatim."""
    data, _, _ = ng(1, _ISB + _NRB + _DSB + _SJEB + epb("<", 0, 10, pkt(60)))
    p, f, out = run_fault(tmp_path, data, "pcapng")
    assert p.returncode == 0 and p.stderr == b""
    assert out.read_bytes() == data


def test_pcapng_isb_option_overrun_big_endian_public(tmp_path):
    """The tester's case: an ISB option length of test102.pcapng (big
    endian) overwritten with 12808."""
    src = PUBLIC / "pcapng-test-generator/output_be/advanced/test102.pcapng"
    data = bytearray(src.read_bytes())
    data[1126:1128] = b"\x32\x08"
    p, f, out = run_fault(tmp_path, bytes(data), "pcapng")
    assert p.returncode == 3, p.stderr
    assert one_line(p) == ("pcapgro: damaged input at byte offset 1104: "
                           "option 2 runs past the end of its block")


def test_pcapng_unknown_blocks_kept_not_an_error(tmp_path):
    """Unknown block types (and ISB/NRB) are copied verbatim to pcapng,
    dropped with one warning line to pcap; never an error."""
    unknown = block("<", 0x7777, b"whatever")
    local = block("<", 0x80000001, b"local use")   # reserved for local use
    data = shb() + idb() + unknown + epb("<", 0, 1, pkt(60)) + local + epb("<", 0, 2, pkt(61))
    p, f, out = run_fault(tmp_path, data, "pcapng")
    assert p.returncode == 0 and p.stderr == b""
    assert out.read_bytes() == data
    o2 = tmp_path / "o2.pcap"
    p = run_cli("merge", "-q", "--no-gro", f, o2)
    assert p.returncode == 0
    assert one_line(p).startswith("pcapgro: warning: ") and "2 blocks" in p.stderr.decode()
    assert [d for _, d, _, _ in pk(o2)] == [pkt(60), pkt(61)]


def test_pcapng_idb_after_packets_is_valid(tmp_path):
    """An IDB may follow packets in its section (dumpcap adds interfaces as
    they appear); packets for it are read and written back."""
    data = (shb() + idb("<", 1) + epb("<", 0, 1, pkt(60)) + idb("<", 101)
            + epb("<", 1, 2, pkt(61)) + epb("<", 0, 3, pkt(62)))
    p, f, out = run_fault(tmp_path, data, "pcapng")
    assert p.returncode == 0 and p.stderr == b""
    evs = list(open_reader(out))
    assert [e.linktype for e in evs if type(e) is Interface] == [1, 101]
    assert [(e.iface, e.linktype, e.data) for e in evs if type(e) is Packet] == \
        [(0, 1, pkt(60)), (1, 101, pkt(61)), (0, 1, pkt(62))]
    for cmd in COMMANDS:
        p = run_cli(cmd[0], "-q", *cmd[1:], f, tmp_path / "c.pcapng")
        assert p.returncode == 0, (cmd, p.stderr)


def test_pcapng_spb_before_any_interface(tmp_path):
    head = shb()
    data = head + spb("<", pkt(60))
    # nothing readable before it but the SHB: still a damaged (3) capture
    p, f, out = run_fault(tmp_path, data, "pcapng")
    assert p.returncode == 3
    assert one_line(p) == (f"pcapgro: damaged input at byte offset {len(head)}: "
                           "simple packet block before any interface")
    assert pk(out) == []


# --- files and directories ----------------------------------------------------

def test_missing_file(tmp_path):
    p = run_cli("merge", "-q", tmp_path / "nope.pcap", tmp_path / "o.pcap")
    assert p.returncode == 2
    assert one_line(p) == f"pcapgro: error: cannot open {tmp_path / 'nope.pcap'}: No such file or directory"


def test_directory_as_in(tmp_path):
    p = run_cli("merge", "-q", tmp_path, tmp_path / "o.pcap")
    assert p.returncode == 2
    assert one_line(p) == f"pcapgro: error: cannot open {tmp_path}: Is a directory"
    assert not (tmp_path / "o.pcap").exists()


def _as_nobody():
    os.setgid(65534)
    os.setuid(65534)


def test_unreadable_file(tmp_path):
    """chmod 000: root reads anything, so as root pcapgro is run as nobody."""
    f = tmp_path / "secret.pcap"
    f.write_bytes(pcap([(1, 0, pkt(60), 60)]))
    f.chmod(0)
    out = tmp_path / "o.pcap"
    pre = None
    if os.geteuid() == 0:
        tmp_path.chmod(0o777)
        for d in tmp_path.parents:
            if str(d) == "/" or os.stat(d).st_mode & 0o001:
                continue
            pytest.skip(f"{d} is not searchable by nobody")
        pre = _as_nobody
    try:
        p = subprocess.run([sys.executable, "-m", "pcapgro.cli", "merge", "-q", str(f), str(out)],
                           capture_output=True, cwd=REPO, preexec_fn=pre)
        if pre is not None and b"No module named" in p.stderr:
            pytest.skip("pcapgro not importable as nobody")
        assert p.returncode == 2
        assert one_line(p) == f"pcapgro: error: cannot open {f}: Permission denied"
    finally:
        f.chmod(0o644)
    assert not out.exists()


def test_out_in_missing_directory(tmp_path):
    f = tmp_path / "in.pcap"
    f.write_bytes(pcap([(1, 0, pkt(60), 60)]))
    out = tmp_path / "nodir" / "o.pcap"
    for cmd in COMMANDS:
        p = run_cli(cmd[0], "-q", *cmd[1:], f, out)
        assert p.returncode == 2
        assert one_line(p) == f"pcapgro: error: cannot write {out}: No such file or directory"


def test_stats_file_in_missing_directory(tmp_path):
    f = tmp_path / "in.pcap"
    f.write_bytes(pcap([(1, 0, pkt(60), 60)]))
    st = tmp_path / "nodir" / "s.json"
    p = run_cli("merge", "-q", "--stats", st, f, tmp_path / "o.pcap")
    assert p.returncode == 2
    assert one_line(p) == f"pcapgro: error: cannot write {st}: No such file or directory"


BIG = sorted(KERNEL.glob("*.pcap"), key=lambda p: -p.stat().st_size)[:1]


@pytest.mark.skipif(not BIG, reason="no kernel captures")
@pytest.mark.parametrize("cmd", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_stdout_closed_early(cmd):
    """``pcapgro ... - | head -c 100``: the reader had enough (issue 19):
    no message, no traceback, exit 141 (128 + SIGPIPE, as editcap), never
    0 (output lost silently)."""
    # a pipe whose reader goes away after 100 bytes
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "pcapgro.cli", *cmd, "-q", str(BIG[0]), "-"],
                            stdout=w, stderr=subprocess.PIPE, cwd=REPO)
    os.close(w)
    got = os.read(r, 100)
    os.close(r)
    err = proc.communicate(timeout=120)[1].decode()
    assert got
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err == "", err
    assert proc.returncode == 141


def test_split_mtu_below_a_flows_headers(tmp_path):
    """The tester's case: --mtu 68 on an IPv6 TSO capture (headers 40 + 32
    bytes) wrote 80-byte segments with exit 0; now exit 2 naming the flow
    and the MTU that fits, and no output."""
    src = PUBLIC / "tcpdump/gso-ipv6.pcap"
    out = tmp_path / "o.pcap"
    p = run_cli("split", "--mtu", "68", src, out)
    assert p.returncode == 2, p.stderr
    line = one_line(p)
    assert line.startswith("pcapgro: error: TCP super-frame in flow [2604:1380:4091:ce00::b]:36539 > ")
    assert line.endswith("do not fit --mtu 68; give --mtu 80 or more, or --mss N")
    assert not out.exists()
    no_partial_files(tmp_path)
    assert run_cli("split", "-q", "--mtu", "80", src, out).returncode == 0
