"""Messages as a tcpdump user reads them (issue 19, item 8): one number
format (1,109, as the statistics table prints it) in every report line,
lines of at most 80 columns wrapped between words, "1 flow" not "1 flows",
one wording for an empty IN or OUT name, "truncated" for a pcapng shorter
than its first block.  README's "What the main job prints" is what merge
prints."""

import re
import subprocess
import sys

import pytest

from capture_helpers import KERNEL, PUBLIC, REPO, run_cli, tshark
from pcapgro.text import count, fit, num

SAMPLE = REPO / "samples" / "tcp4-bulk-wire.pcap"


# ----------------------------------------------------------------- helpers

def test_num_and_count():
    assert num(1109) == "1,109" and num(0) == "0"
    assert count(1, "flow") == "1 flow"
    assert count(0, "flow") == "0 flows"
    assert count(1109, "packet") == "1,109 packets"
    assert count(2, "pure ACK") == "2 pure ACKs"


def test_fit_wraps_between_words_under_the_value():
    line = "  completed because: " + ", ".join(f"reason_{i} {i}" for i in range(12))
    out = fit([line, "short"])
    assert out[-1] == "short" and len(out) > 2
    assert all(len(x) <= 80 for x in out)
    assert all(x.startswith(" " * 21) and x[21] != " " for x in out[1:-1])
    assert " ".join(" ".join(out[:-1]).split()) == " ".join(line.split())   # no word cut
    # a word longer than the line stays whole
    long = "  x " + "p" * 100
    assert fit([long]) == ["  x", "      " + "p" * 100]


# ------------------------------------------------------ what the CLI prints

def _readme_block():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("### What the main job prints\n", 1)[1].split("\n\n", 2)[0].strip("\n")
    lines = [ln[4:] for ln in block.splitlines()]
    assert lines[0].startswith("$ pcapgro merge ")
    return lines[0][2:].split(), lines[1:]


def test_readme_shows_what_merge_prints(tmp_path):
    """README's block, line for line (the command run on the sample)."""
    cmd, want = _readme_block()
    assert cmd[:3] == ["pcapgro", "merge", "samples/tcp4-bulk-wire.pcap"]
    p = run_cli(*cmd[1:3], tmp_path / "gro.pcapng", check=0)
    assert p.stderr.decode().splitlines() == want


def test_gro_summary_numbers_and_width(tmp_path):
    """The GRO summary line counts as the table does (1,109, not 1109),
    and no line is wider than 80 columns (it was 112, wrapped mid-word by
    the terminal)."""
    p = run_cli("merge", SAMPLE, tmp_path / "gro.pcapng", check=0)
    err = p.stderr.decode().splitlines()
    assert "  in          1,109      1,646,591" in err
    assert err[3].startswith("GRO: 1,109 packets in: 1,080 merged into 29 aggregates")
    assert "  checksums:         verified 1,109" in err
    assert max(map(len, err)) <= 80
    assert not re.search(r"\d{4}", " ".join(err).replace("1,109", "").replace("1,080", "")
                         .replace("1,646,591", "").replace("1,577,225", "")), err


REPORTS = [
    (["merge", SAMPLE], "o.pcapng"),
    (["merge", "--udp", "gro", KERNEL / "udp4-fwd-wire.pcap"], "o.pcapng"),
    (["merge", "--gso", "--fraglist", "--egress-mtu", "1000", SAMPLE], "o.pcap"),
    (["split", KERNEL / "tcp4-tso-sender.pcap"], "o.pcap"),
    (["split", "--gso-size", "1200", KERNEL / "udp4-uso-sender.pcap"], "o.pcap"),
    (["split", "--mtu", "1280", PUBLIC / "tcpdump" / "gso-ipv6.pcap"], "o.pcap"),
]


@pytest.mark.parametrize("args,out", REPORTS, ids=[" ".join(map(str, a[:-1])) for a, _ in REPORTS])
def test_report_lines_fit_80_columns_with_one_number_format(args, out, tmp_path):
    """Every statistics line of merge, merge --gso and split fits 80
    columns, and no count of 1,000 or more is printed without its comma."""
    p = run_cli(*args, tmp_path / out)
    assert p.returncode == 0, p.stderr.decode()
    err = p.stderr.decode().splitlines()
    assert err and max(map(len, err)) <= 80, [ln for ln in err if len(ln) > 80]
    for ln in err:
        # addresses (10.88.0.1:5201) aside, a bare 4-digit count is wrong
        words = [w for w in re.split(r"[\s,;()]+", ln) if w and not re.search(r"[.:]\d", w)]
        assert not [w for w in words if re.fullmatch(r"\d{4,}", w)], ln


def test_split_says_1_flow(tmp_path):
    p = run_cli("split", KERNEL / "tcp4-tso-sender.pcap", tmp_path / "o.pcap", check=0)
    assert "segment size from: own_syn 1 flow\n" in p.stderr.decode()


def test_restore_report(tmp_path):
    m = tmp_path / "m.pcapng"
    run_cli("merge", "-q", SAMPLE, m, check=0)
    p = run_cli("split", "--restore", m, tmp_path / "b.pcap", check=0)
    assert "restore: 29 aggregates given back as 1,080 packets, 29 passed\n" in p.stderr.decode()


@tshark
def test_verify_says_1_flow_and_fits(tmp_path):
    """verify's summary: "1 flow", "0 streams", lines of at most 80
    columns."""
    out = tmp_path / "u.pcapng"
    run_cli("merge", "-q", "--udp", "gro", KERNEL / "udp4-fwd-wire.pcap", out, check=0)
    p = run_cli("verify", KERNEL / "udp4-fwd-wire.pcap", out, check=0)
    text = p.stdout.decode()
    assert "  UDP    1 flow: 466,488 payload bytes compared; 392 -> 40 datagrams\n" in text
    assert "  TCP    0 streams (0 connections): 0 payload bytes compared" in text
    assert max(map(len, text.splitlines()[2:])) <= 80     # the first two name IN and OUT


# ----------------------------------------------------------- error wording

@pytest.mark.parametrize("cmd", ["merge", "split"])
def test_empty_in_and_out_names_are_worded_alike(cmd, tmp_path):
    """An empty IN and an empty OUT: the same "empty file name" line (IN
    said "cannot open : No such file or directory")."""
    p = run_cli(cmd, "", tmp_path / "o.pcap")
    assert (p.returncode, p.stderr.decode()) == (2, "pcapgro: error: cannot open '': empty file name\n")
    p = run_cli(cmd, SAMPLE, "")
    assert p.returncode == 2
    assert p.stderr.decode().splitlines()[-1] == "pcapgro: error: cannot write '': empty file name"


def test_verify_empty_names(tmp_path):
    p = run_cli("verify", "", SAMPLE)
    assert (p.returncode, p.stderr.decode()) == (2, "pcapgro: error: cannot open IN '': empty file name\n")
    p = run_cli("verify", SAMPLE, "")
    assert (p.returncode, p.stderr.decode()) == (2, "pcapgro: error: cannot open OUT '': empty file name\n")


@pytest.mark.parametrize("n", [4, 8, 10, 11])
def test_pcapng_shorter_than_its_first_block_is_truncated(n, tmp_path):
    """A pcapng cut inside its first block header is "truncated" (it said
    "section header without a valid byte-order magic"), as one cut later
    in the block already was."""
    full = (PUBLIC / "pcapng-test-generator/output_le/basic/test001.pcapng").read_bytes()
    f = tmp_path / "cut.pcapng"
    f.write_bytes(full[:n])
    p = run_cli("merge", f, tmp_path / "o.pcapng")
    assert (p.returncode, p.stderr.decode()) == (
        2, f"pcapgro: error: {f}: truncated section header block ({n} of at least 28 bytes)\n")
    f.write_bytes(full[:20])
    p = run_cli("merge", f, tmp_path / "o.pcapng")
    assert p.returncode == 2 and "truncated section header block (20 of " in p.stderr.decode()
    # a real wrong byte-order magic keeps its own message
    f.write_bytes(full[:8] + b"\x01\x02\x03\x04" + full[12:])
    p = run_cli("merge", f, tmp_path / "o.pcapng")
    assert p.returncode == 2 and "valid byte-order magic" in p.stderr.decode()


def test_empty_stats_name_is_refused(tmp_path):
    """--stats '' is one clear line and exit 2, worded as an empty IN or OUT
    is (issue 19), not a run that silently writes no statistics."""
    p = subprocess.run([sys.executable, "-m", "pcapgro.cli", "merge", "-q", "--stats", "",
                        str(REPO / "samples" / "tcp4-bulk-wire.pcap"), str(tmp_path / "o.pcapng")],
                       capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2
    assert p.stderr == "pcapgro: error: cannot write --stats '': empty file name\n"
    assert not (tmp_path / "o.pcapng").exists()
