"""Old classic pcap variants with longer record headers (issue 19, item 7):
Nokia IPSO, Red Hat 6.1 (ss990417) and SuSE 6.3 (ss990915) "modified"
pcap, and the ss991029 modified pcap, are read as Wireshark reads them
(wiretap/libpcap.c), not as damaged files.

tests/data/oldpcap holds the same 14 records of samples/tcp4-bulk-wire.pcap
in each layout (made by make_oldpcap.py there, without pcapgro); tshark
must read each as its variant and as the same frames as plain.pcap."""

import shutil
import subprocess

import pytest

from capture_helpers import DATA, all_captures, run_cli, tshark, tshark_packets
from pcapgro.capture import open_reader
from pcapgro.capture.pcapvariant import MODIFIED, STANDARD, choose
from pcapgro.record import Packet

OLD = DATA / "oldpcap"
PLAIN = OLD / "plain.pcap"
# file -> (variant pcapgro detects, record header bytes, capinfos' name)
VARIANTS = {
    "ss990417-le.pcap": ("ss990417", 24, "RedHat 6.1 tcpdump - pcap"),
    "ss990417-be.pcap": ("ss990417", 24, "RedHat 6.1 tcpdump - pcap"),
    "ss990915-le.pcap": ("ss990915", 28, "SuSE 6.3 tcpdump - pcap"),
    "ss990915-be.pcap": ("ss990915", 28, "SuSE 6.3 tcpdump - pcap"),
    "ss991029-le.pcap": ("ss991029", 24, "Modified tcpdump - pcap"),
    "ss991029-be.pcap": ("ss991029", 24, "Modified tcpdump - pcap"),
    "nokia-le.pcap": ("nokia", 20, "Nokia tcpdump - pcap"),
}
NAMES = sorted(VARIANTS)


def packets(path):
    r = open_reader(path)
    try:
        return r, [(p.ts, bytes(p.data), p.orig_len, p.linktype) for p in r if type(p) is Packet]
    finally:
        r.close()


@pytest.mark.parametrize("name", NAMES)
def test_reader_takes_the_variant_and_its_records(name):
    """The variant is told from the records; every record comes out as in
    the plain file (timestamps, bytes, original lengths)."""
    variant, hl, _ = VARIANTS[name]
    r, got = packets(OLD / name)
    assert (r.variant, r.record_header) == (variant, hl)
    assert got == packets(PLAIN)[1] and len(got) == 14


@pytest.mark.parametrize("name", NAMES)
def test_read_from_a_pipe_too(name, tmp_path):
    """On standard input (looked at only as far as it has arrived) the
    same records."""
    p = run_cli("merge", "-q", "--no-gro", "-F", "pcap", "-", "-", input=(OLD / name).read_bytes())
    assert p.returncode == 0, p.stderr.decode()
    out = tmp_path / "o.pcap"
    out.write_bytes(p.stdout)
    assert packets(out)[1] == packets(PLAIN)[1]
    if name.endswith("-le.pcap"):
        assert p.stdout == PLAIN.read_bytes()


@pytest.mark.parametrize("name", NAMES)
def test_merge_writes_standard_pcap_with_one_warning(name, tmp_path):
    """merge reads the variant (exit 0, was 3 "damaged"), says once that
    the extra fields are not kept, and writes what it writes for the plain
    file (little-endian inputs: byte for byte)."""
    variant, hl, _ = VARIANTS[name]
    out, ref = tmp_path / "o.pcapng", tmp_path / "ref.pcapng"
    p = run_cli("merge", OLD / name, out)
    assert p.returncode == 0, p.stderr.decode()
    warnings = [ln for ln in p.stderr.decode().splitlines() if "warning" in ln]
    assert len(warnings) == 1 and f"({hl - 16} bytes) are not kept" in warnings[0], warnings
    run_cli("merge", "-q", PLAIN, ref, check=0)
    assert packets(out)[1] == packets(ref)[1]
    s = run_cli("split", "--restore", "-q", out, tmp_path / "back.pcap", check=0)
    assert s.returncode == 0
    if name.endswith("-le.pcap"):
        assert (tmp_path / "back.pcap").read_bytes() == PLAIN.read_bytes()


@tshark
@pytest.mark.parametrize("name", NAMES)
def test_tshark_reads_each_file_as_pcapgro_does(name, tmp_path):
    """tshark takes each file as its variant (capinfos' file type) and
    reads the same frames as from plain.pcap; pcapgro's copy of it reads
    the same in tshark too."""
    *_, wtap_name = VARIANTS[name]
    if shutil.which("capinfos"):
        info = subprocess.run(["capinfos", "-t", str(OLD / name)], capture_output=True, text=True)
        assert wtap_name in info.stdout, info.stdout
    ref = tshark_packets(PLAIN)
    assert tshark_packets(OLD / name) == ref
    out = tmp_path / "o.pcap"
    run_cli("merge", "-q", "--no-gro", OLD / name, out, check=0)
    assert tshark_packets(out) == ref


def test_plain_captures_stay_plain():
    """No capture the project carries is taken for an old variant."""
    for p in all_captures((".pcap",)):
        if p.parent != OLD:
            r = open_reader(p)
            assert r.variant == "pcap", p
            r.close()


# ------------------------------------------------ the heuristic, as Wireshark's

def _rec(bo, incl, orig, usec=0, extra=b""):
    import struct
    return struct.pack(bo + "IIII", 1, usec, incl, orig) + extra + b"\xee" * incl


def test_choose_first_fitting_else_least_bad():
    import struct
    ss = struct.pack("<IHB", 2, 0x0800, 0) + b"\0"
    nokia = struct.pack("<I", 0x9FBFB601)
    for recs, want in ((b"".join(_rec("<", 60, 60) for _ in range(3)), "pcap"),
                       (b"".join(_rec("<", 60, 60, extra=ss) for _ in range(3)), "ss990417"),
                       (b"".join(_rec("<", 60, 60, extra=nokia) for _ in range(3)), "nokia"),
                       (b"", "pcap")):
        assert choose(STANDARD, lambda n, b=b"\0" * 24 + recs: b, 24, "<", 65535) == want
    ss915 = ss[:7] + b"\0" * 5
    recs = b"".join(_rec(">", 60, 60, extra=ss915.replace(ss[:7], struct.pack(">IHB", 2, 0x0800, 0)))
                    for _ in range(3))
    assert choose(MODIFIED, lambda n: b"\0" * 24 + recs, 24, ">", 65535) == "ss990915"
    # a pipe that has delivered only the file header: the first candidate
    assert choose(MODIFIED, lambda n: b"\0" * 24, 24, "<", 65535, complete=False) == "ss991029"
