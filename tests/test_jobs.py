"""The library calls (pcapgro.merge / split / verify) and the options table
they share with the CLI (issue 16 item 4), and the CLI contract of issue 19
items 4-6: EPIPE on OUT exits 141 with the statistics, ``--stats FILE`` is
written atomically, GRO options with ``--no-gro`` are refused."""

import io
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import fields

import pytest

import pcapgro
from pcapgro.errors import DamagedInput, OptionError, OutputClosed, UnusableInput
from pcapgro.gro import GROConfig
from pcapgro.gso import GSOConfig
from pcapgro.jobs.options import MERGE_OPTIONS, SPLIT_OPTIONS, gro_config, gso_config, resolve

from builders import pcap, pkt
from capture_helpers import REPO, run_cli, HAVE_TSHARK

SAMPLE = REPO / "samples" / "tcp4-bulk-wire.pcap"


def cli_stats(*args):
    p = run_cli(*args, "--stats", "-", check=0)
    return json.loads(p.stdout)


# ------------------------------------------------------------ library calls

def test_merge_returns_what_the_cli_writes(tmp_path):
    st = pcapgro.merge(SAMPLE, tmp_path / "a.pcapng", fraglist=True, local_ports=[5201])
    ref = cli_stats("merge", "-q", "--fraglist", "--local-port", "5201", SAMPLE,
                    tmp_path / "b.pcapng")
    assert dict(st) == ref
    assert st["packets_in"] == 1109 and st["packets_out"] == 58
    assert (tmp_path / "a.pcapng").read_bytes() == (tmp_path / "b.pcapng").read_bytes()
    assert st.lines and st.lines[0].startswith("GRO: 1,109 packets in")


def test_merge_streams_in_and_out(tmp_path):
    out = io.BytesIO()
    with open(SAMPLE, "rb") as f:
        st = pcapgro.merge(f, out, out_format="pcap", csum="kernel")
        assert not f.closed
    ref = tmp_path / "ref.pcap"
    pcapgro.merge(SAMPLE, ref, csum="kernel")
    assert out.getvalue() == ref.read_bytes()
    assert st["packets_out"] == 58 and st["bytes_out"] == 1_577_225


def test_split_restore_gives_back_the_input(tmp_path):
    pcapgro.merge(SAMPLE, tmp_path / "m.pcapng")
    st = pcapgro.split(tmp_path / "m.pcapng", tmp_path / "back.pcap", restore=True)
    assert (tmp_path / "back.pcap").read_bytes() == SAMPLE.read_bytes()
    assert st["restore"]["restored"] == 29 and st["packets_out"] == 1109
    st = pcapgro.split(tmp_path / "m.pcapng", tmp_path / "cut.pcap", mss=1000)
    assert st["gso"]["split"] > 0


def test_no_gro_and_forwarding(tmp_path):
    st = pcapgro.merge(SAMPLE, tmp_path / "n.pcap", no_gro=True)
    assert (tmp_path / "n.pcap").read_bytes() == SAMPLE.read_bytes() and "gro" not in st
    st = pcapgro.merge(SAMPLE, tmp_path / "f.pcap", gso=True, egress_mtu=1500)
    assert st["forward"]["packets_out"] == 1109 and st["forward"]["segmented"] == 29


def test_errors_are_raised_not_exits(tmp_path):
    with pytest.raises(OptionError, match=r"^--fraglist needs GRO \(drop --no-gro\)$"):
        pcapgro.merge(SAMPLE, tmp_path / "o.pcap", no_gro=True, fraglist=True)
    with pytest.raises(OptionError, match="--restore takes no segmentation options"):
        pcapgro.split(SAMPLE, tmp_path / "o.pcap", restore=True, mss=1000)
    with pytest.raises(OptionError, match="--gro-max-size: 0 is not in the range"):
        pcapgro.merge(SAMPLE, tmp_path / "o.pcap", gro_max_size=0)
    with pytest.raises(OptionError, match="is the same file as IN"):
        pcapgro.merge(SAMPLE, SAMPLE)
    with pytest.raises(TypeError, match="unknown option: frag_list"):
        pcapgro.merge(SAMPLE, tmp_path / "o.pcap", frag_list=True)
    with pytest.raises(UnusableInput, match="not a pcap or pcapng file"):
        pcapgro.merge(io.BytesIO(b"hello world"), tmp_path / "o.pcap")
    assert not (tmp_path / "o.pcap").exists()
    # library defaults count as not given: no_gro with fraglist=False is fine
    pcapgro.merge(SAMPLE, tmp_path / "o.pcap", no_gro=True, fraglist=False, csum="valid")


def test_damaged_input_raises_with_the_report(tmp_path):
    data = pcap([(1, 0, pkt(60), 60), (2, 0, pkt(60), 60)])
    out = tmp_path / "o.pcap"
    with pytest.raises(DamagedInput) as e:
        pcapgro.merge(io.BytesIO(data[:-10]), out)
    assert e.value.report["packets_out"] == 1 and out.exists()


def test_output_closed_raises_with_the_report():
    class Closed(io.RawIOBase):
        def writable(self):
            return True

        def write(self, b):
            raise BrokenPipeError(32, "Broken pipe")
    with pytest.raises(OutputClosed) as e:
        pcapgro.merge(SAMPLE, Closed(), out_format="pcap")
    # the report counts what was read when OUT closed: the input is read in
    # chunks (512 KiB), so that is part or all of the sample's 1,109 packets
    assert 0 < e.value.report["packets_in"] <= 1109 and e.value.exit_status == 141


@pytest.mark.skipif(not HAVE_TSHARK, reason="tshark not installed")
def test_verify_and_the_readme_example(tmp_path):
    st = pcapgro.merge(SAMPLE, tmp_path / "m.pcapng", verify=True)
    assert st["verify"]["result"] == "faithful" and st.status == 0
    v = pcapgro.verify(SAMPLE, tmp_path / "m.pcapng")
    assert v["result"] == "faithful" and v.verdict.status == 0
    with pytest.raises(OptionError):
        pcapgro.verify("-", tmp_path / "m.pcapng")
    # README's library example, run as written (its /tmp paths in tmp_path)
    text = (REPO / "README.md").read_text()
    code = re.search(r"## Library\n.*?```python\n(.*?)```", text, re.S).group(1)
    assert len(code.strip().splitlines()) == 5
    code = code.replace("/tmp/", f"{tmp_path}/")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("1109 -> 58 {")


# ------------------------------------------------------------ options table

@pytest.mark.parametrize("table,cls,internal", [
    (MERGE_OPTIONS, GROConfig, {"compiled", "annotate"}),
    (SPLIT_OPTIONS, GSOConfig, {"link_rate", "complete_csum", "annotate", "from_skb"})])
def test_every_config_field_has_one_option(table, cls, internal):
    """Each configuration field the user can set is set by exactly one
    option, and the options' defaults give the configuration's defaults."""
    mapped = [o.field for o in table if o.field]
    assert len(mapped) == len(set(mapped))
    assert set(mapped) == {f.name for f in fields(cls)} - internal
    values, given = resolve(table, {})
    build = gro_config if cls is GROConfig else gso_config
    assert build(values, annotate=True) == cls() and given == ()


def test_cli_options_are_the_table(tmp_path):
    """--help lists each table option once, with its help text."""
    for cmd, table in (("merge", MERGE_OPTIONS), ("split", SPLIT_OPTIONS)):
        env = dict(os.environ, COLUMNS="400")
        h = subprocess.run([sys.executable, "-m", "pcapgro.cli", cmd, "--help"], cwd=REPO,
                           env=env, capture_output=True, text=True).stdout
        flat = "".join(h.split())
        for o in table:
            assert re.search(rf"^\s+{o.flag}\b", h, re.M), o.flag
            assert "".join(o.help.split()) in flat, o.flag


# ------------------------------------------------- issue 19, items 4, 5, 6

GRO_ARGS = [("--fraglist",), ("--csum", "kernel"), ("--csum", "valid"), ("--udp", "gro"),
            ("--hz", "1000"), ("--local-port", "443"), ("--no-verify-csum",),
            ("--gro-max-size", "65536"), ("--hash", "none"), ("--no-vlan-gro",),
            ("--napi-budget", "64"), ("--poll-gap", "0"), ("--gro-flush-timeout", "1"),
            ("--gso",)]


@pytest.mark.parametrize("args", GRO_ARGS, ids=lambda a: " ".join(a))
def test_gro_option_with_no_gro_is_refused(tmp_path, args):
    out = tmp_path / "o.pcap"
    p = run_cli("merge", "--no-gro", *args, SAMPLE, out)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert err.endswith(f"Error: {args[0]} needs GRO (drop --no-gro)\n"), err
    assert err.startswith("Usage: ") and not out.exists()


def _pipeline(cmd, tmp_path):
    """``pcapgro CMD | tcpdump -r - -c 3``: pcapgro's exit status and stderr."""
    sh = (f"set -o pipefail; {sys.executable} -m pcapgro.cli {cmd} 2>{tmp_path}/err "
          f"| tcpdump -r - -c 3 -nn >/dev/null 2>&1; echo ${{PIPESTATUS[0]}}")
    p = subprocess.run(["bash", "-c", sh], cwd=REPO, capture_output=True, text=True, timeout=120)
    return int(p.stdout.split()[-1]), (tmp_path / "err").read_text()


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
@pytest.mark.parametrize("cmd", ["merge", "merge --no-gro", "split --mss 100"])
def test_epipe_on_out_exits_141_with_statistics(tmp_path, cmd):
    """The issue's case: ``--stats s.json IN - | tcpdump -r - -c 3`` gave
    exit 2 and no s.json; now exit 141 (editcap's), no error line, the
    statistics of what was handed to the pipe, the table on stderr."""
    big = tmp_path / "big.pcap"
    data = SAMPLE.read_bytes()
    big.write_bytes(data + data[24:] * 3)      # > a pipe's 64 KiB and the 1 MiB buffer
    st = tmp_path / "s.json"
    status, err = _pipeline(f"{cmd} --stats {st} {big} -", tmp_path)
    assert status == 141, err
    assert "error" not in err and "Traceback" not in err, err
    assert "            packets          bytes\n" in err, err
    d = json.loads(st.read_text())
    assert 0 < d["packets_out"] and d["packets_in"] <= 4 * 1109
    status, err = _pipeline(f"{cmd} -q {big} -", tmp_path)
    assert status == 141 and err == "", err


def _root_mount_reason():
    if os.geteuid() != 0:
        return "needs root (a small tmpfs in its own mount namespace)"
    if shutil.which("unshare") is None:
        return "needs unshare (util-linux)"
    p = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return None if p.returncode == 0 else "cannot make a mount namespace here"


@pytest.mark.skipif(_root_mount_reason() is not None, reason=str(_root_mount_reason()))
@pytest.mark.parametrize("cmd", ["merge", "split"])
def test_stats_file_on_a_full_disk_is_not_left_empty(tmp_path, cmd):
    """--stats FILE on a full disk: exit 2, one line, and no FILE (before:
    a 0-byte FILE was left), no temp file; OUT (on another disk) is
    complete."""
    full = tmp_path / "full"
    full.mkdir()
    out = tmp_path / "o.pcap"
    sh = (f"mount -t tmpfs -o size=64k tmpfs {full} && "
          f"(dd if=/dev/zero of={full}/fill bs=4k 2>/dev/null; true) && "
          f"{sys.executable} -m pcapgro.cli {cmd} -q --stats {full}/s.json {SAMPLE} {out}; "
          f"echo rc=$?; ls -a {full}")
    p = subprocess.run(["unshare", "-m", "bash", "-c", sh], cwd=REPO, capture_output=True,
                       text=True, timeout=120)
    lines = p.stdout.splitlines()
    assert lines[0] == "rc=2", (p.stdout, p.stderr)
    assert p.stderr == f"pcapgro: error: cannot write {full}/s.json: No space left on device\n"
    assert sorted(lines[1:]) == [".", "..", "fill"]     # no s.json, no temp file
    assert out.stat().st_size > 0


def test_stats_file_written_by_rename(tmp_path):
    """A reader of the --stats file never sees it half written: it is a new
    file renamed over the old one (other inode), mode kept."""
    st = tmp_path / "s.json"
    st.write_text("old")
    st.chmod(0o640)
    ino = st.stat().st_ino
    run_cli("merge", "-q", "--stats", st, SAMPLE, tmp_path / "o.pcap", check=0)
    assert st.stat().st_ino != ino and oct(st.stat().st_mode & 0o777) == "0o640"
    assert json.loads(st.read_text())["packets_in"] == 1109
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
