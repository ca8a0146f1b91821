"""The command-line contract: arguments, formats, stdin/stdout, statistics,
exit statuses (0, 2, 3, 130), atomic output."""

import json
import os
import signal
import struct
import subprocess
import sys
import time

import pytest

from builders import pcap, shb, idb, epb, pkt
from capture_helpers import KERNEL, REPO, run_cli
from pcapgro.capture import open_reader
from pcapgro.record import Packet

KFILES = sorted(KERNEL.glob("*.pcap"))


def pk(path):
    return [(p.ts, p.data, p.orig_len) for p in open_reader(path) if type(p) is Packet]


@pytest.fixture
def small(tmp_path):
    p = tmp_path / "in.pcap"
    p.write_bytes(pcap([(1, 2, pkt(60), 60), (3, 4, pkt(1514), 1514), (5, 6, b"", 0)]))
    return p


@pytest.mark.parametrize("path", KFILES, ids=[p.name for p in KFILES])
def test_kernel_roundtrip_identical_but_snaplen(path, tmp_path):
    out = tmp_path / "out.pcap"
    run_cli("merge", "-q", "--no-gro", path, out, check=0)
    a, b = path.read_bytes(), out.read_bytes()
    assert a[:16] == b[:16] and a[20:] == b[20:]
    assert struct.unpack("<I", b[16:20])[0] >= 262144 or struct.unpack(">I", b[16:20])[0] >= 262144


def test_kernel_captures_present():
    assert KFILES, f"no kernel captures under {KERNEL}"


def test_format_from_extension_and_F(small, tmp_path):
    run_cli("merge", "-q", "--no-gro", small, tmp_path / "a.pcapng", check=0)
    assert (tmp_path / "a.pcapng").read_bytes()[:4] == b"\n\r\r\n"
    run_cli("merge", "-q", "--no-gro", small, tmp_path / "b.out", check=0)
    assert (tmp_path / "b.out").read_bytes()[:4] == b"\xd4\xc3\xb2\xa1"
    run_cli("merge", "-q", "--no-gro", "-F", "pcapng", small, tmp_path / "c.pcap", check=0)
    assert (tmp_path / "c.pcap").read_bytes()[:4] == b"\n\r\r\n"
    run_cli("merge", "-q", "--no-gro", tmp_path / "a.pcapng", tmp_path / "d", check=0)
    assert (tmp_path / "d").read_bytes()[:4] == b"\n\r\r\n"
    for f in "abcd":
        assert pk(tmp_path / {"a": "a.pcapng", "b": "b.out", "c": "c.pcap", "d": "d"}[f]) == pk(small)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".part")]


def test_stdin_pipe_and_stdout(small, tmp_path):
    out = tmp_path / "o.pcap"
    p = subprocess.run(f"cat {small} | {sys.executable} -m pcapgro.cli merge -q --no-gro - {out}",
                       shell=True, cwd=REPO, capture_output=True)
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[24:] == small.read_bytes()[24:]
    p = run_cli("merge", "-q", "--no-gro", "-", "-", input=small.read_bytes(), check=0)
    assert p.stdout[24:] == small.read_bytes()[24:]
    ng = tmp_path / "x.pcapng"
    ng.write_bytes(shb() + idb() + epb("<", 0, 5, b"abc"))
    p = run_cli("merge", "-q", "--no-gro", "-", "-", input=ng.read_bytes(), check=0)
    assert p.stdout == ng.read_bytes()


def test_stats_json_and_table(small, tmp_path):
    st = tmp_path / "s.json"
    p = run_cli("merge", "--no-gro", "--stats", st, small, tmp_path / "o.pcap", check=0)
    s = json.loads(st.read_text())
    assert s == {"packets_in": 3, "bytes_in": 1574, "packets_out": 3, "bytes_out": 1574}
    assert b"packets" in p.stderr and b"1,574" in p.stderr
    p = run_cli("merge", "--no-gro", "-q", "--stats", "-", small, tmp_path / "o.pcap", check=0)
    assert json.loads(p.stdout)["packets_out"] == 3
    assert p.stderr == b""


ZERO = {"aggregates": 0, "segments": 0}


def test_stats_documented_keys_always_present(tmp_path):
    """gro.checksums has its five documented keys and gro.by_kind its four
    kinds even when they count nothing (a reader may index them); the
    table still names only what happened."""
    wire = KERNEL / "tcp4-bulk-wire.pcap"
    p = run_cli("merge", "--stats", "-", wire, tmp_path / "o.pcap", check=0)
    g = json.loads(p.stdout)["gro"]
    assert g["checksums"] == {"verified": 1109, "bad": 0, "seed": 0, "skipped_truncated": 0,
                              "skipped_l3_flush": 0, "skipped_udp_zero": 0}
    assert g["by_kind"] == {"tcp": {"aggregates": 29, "segments": 1080},
                            "tcp_fraglist": ZERO, "udp": ZERO, "udp_fraglist": ZERO}
    err = p.stderr.decode()
    assert "checksums:         verified 1,109\n" in err and "by kind" not in err
    # checksums not verified, UDP only: every key there, 0
    p = run_cli("merge", "-q", "--no-verify-csum", "--udp", "gro", "--stats", "-",
                KERNEL / "udp4-fwd-wire.pcap", tmp_path / "u.pcap", check=0)
    g = json.loads(p.stdout)["gro"]
    assert g["checksums"] == dict.fromkeys(("verified", "bad", "seed", "skipped_truncated",
                                            "skipped_l3_flush", "skipped_udp_zero"), 0)
    assert g["by_kind"]["tcp"] == g["by_kind"]["udp_fraglist"] == ZERO
    assert g["by_kind"]["udp"]["aggregates"] > 0


def test_exit_2_stats_stdout_with_stdout(small):
    p = run_cli("merge", "--no-gro", "--stats", "-", small, "-")
    assert p.returncode == 2 and b"Traceback" not in p.stderr


@pytest.mark.parametrize("content,msg", [(b"hello world, not a capture", b"not a pcap or pcapng"),
                                         (b"", b"empty input"),
                                         (b"\xd4\xc3\xb2\xa1\2\0", b"truncated pcap file header")])
def test_exit_2_unusable(tmp_path, content, msg):
    f = tmp_path / "bad.pcap"
    f.write_bytes(content)
    out = tmp_path / "o.pcap"
    p = run_cli("merge", "--no-gro", f, out)
    assert p.returncode == 2 and msg in p.stderr
    assert p.stderr.count(b"\n") == 1 and p.stderr.startswith(b"pcapgro: error: ")
    assert not out.exists() and not list(tmp_path.glob("*.part"))


def test_exit_2_usage(small, tmp_path):
    assert run_cli("merge", "--bogus", small, tmp_path / "o").returncode == 2
    assert run_cli("merge", "--no-gro", small).returncode == 2
    assert run_cli("merge", "--no-gro", "-F", "erf", small, tmp_path / "o").returncode == 2
    p = run_cli("merge", "--no-gro", tmp_path / "missing.pcap", tmp_path / "o")
    assert p.returncode == 2 and b"No such file" in p.stderr and b"Traceback" not in p.stderr
    p = run_cli("merge", "--no-gro", tmp_path, tmp_path / "o")
    assert p.returncode == 2 and b"Traceback" not in p.stderr
    p = run_cli("merge", "--no-gro", small, tmp_path / "nodir" / "o.pcap")
    assert p.returncode == 2 and b"Traceback" not in p.stderr


def test_version_and_help():
    for args in (["--version"], ["merge", "--version"]):
        p = run_cli(*args, check=0)
        assert b"0.1.0" in p.stdout
    p = run_cli("merge", "--help", check=0)
    for opt in (b"--quiet", b"-F", b"--stats", b"--no-gro", b"--version"):
        assert opt in p.stdout


def test_pcapng_to_pcap_several_linktypes_refused(tmp_path):
    f = tmp_path / "two.pcapng"
    f.write_bytes(shb() + idb("<", 1) + idb("<", 101) + epb("<", 0, 1, b"a") + epb("<", 1, 2, b"b"))
    p = run_cli("merge", "--no-gro", f, tmp_path / "o.pcap")
    assert p.returncode == 2 and b"use -F pcapng" in p.stderr
    assert not (tmp_path / "o.pcap").exists()
    run_cli("merge", "-q", "--no-gro", f, tmp_path / "o.pcapng", check=0)


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_exit_3_truncated_last_record(tmp_path, fmt):
    if fmt == "pcap":
        data = pcap([(1, 0, pkt(50), 50), (2, 0, pkt(70), 70), (3, 0, pkt(90), 90)])
        cut = data[:-5]
        off = 24 + 66 + 86
    else:
        data = shb() + idb() + epb("<", 0, 1, pkt(50)) + epb("<", 0, 2, pkt(70)) + epb("<", 0, 3, pkt(90))
        cut = data[:-5]
        off = len(data) - len(epb("<", 0, 3, pkt(90)))
    f = tmp_path / ("t." + fmt)
    f.write_bytes(cut)
    for out in (tmp_path / ("o." + fmt), "-"):
        p = run_cli("merge", "-q", "--no-gro", f, out)
        assert p.returncode == 3
        assert p.stderr.decode().strip().startswith(f"pcapgro: damaged input at byte offset {off}: truncated")
        assert p.stderr.count(b"\n") == 1
        if out == "-":
            assert len(p.stdout) > 0
    assert len(pk(tmp_path / ("o." + fmt))) == 2


def test_snaplen_header_at_least_largest(tmp_path):
    f = tmp_path / "big.pcap"
    f.write_bytes(pcap([(1, 0, pkt(100), 100), (2, 0, pkt(300000), 300000)], snaplen=65535))
    out = tmp_path / "o.pcap"
    p = run_cli("merge", "-q", "--no-gro", f, out, check=0)
    assert struct.unpack("<I", out.read_bytes()[16:20])[0] == 300000
    assert p.stderr.count(b"larger than 262144") == 1
    p = run_cli("merge", "-q", "--no-gro", f, "-", check=0)
    assert struct.unpack("<I", p.stdout[16:20])[0] == 300000
    small = tmp_path / "s.pcap"
    small.write_bytes(pcap([(1, 0, pkt(100), 100)], snaplen=96))
    run_cli("merge", "-q", "--no-gro", small, out, check=0)
    assert struct.unpack("<I", out.read_bytes()[16:20])[0] == 262144
    # pcapng output warns the same way (Wireshark refuses such packets)
    p = run_cli("merge", "-q", "--no-gro", f, tmp_path / "o.pcapng", check=0)
    assert p.stderr.count(b"larger than 262144") == 1
    p = run_cli("merge", "-q", "--no-gro", small, tmp_path / "s.pcapng", check=0)
    assert b"larger than" not in p.stderr


@pytest.mark.parametrize("sig,status,word", [(signal.SIGINT, 130, b"interrupted"),
                                              (signal.SIGTERM, 143, b"terminated"),
                                              (signal.SIGHUP, 129, b"hangup")])
def test_interrupt_or_sigterm_removes_output(tmp_path, sig, status, word):
    """Ctrl-C exits 130, SIGTERM 143 (128 + 15); either way the partial OUT
    and its hidden temp file are removed (SIGTERM used to leave the
    ``.OUT.*.part`` file behind)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = tmp_path / "o.pcap"
    proc = subprocess.Popen([sys.executable, "-m", "pcapgro.cli", "merge", "-q", "--no-gro", str(fifo), str(out)],
                            cwd=REPO, stderr=subprocess.PIPE)
    with open(fifo, "wb") as w:
        w.write(pcap([(1, 0, pkt(60), 60)] * 100))
        w.flush()
        time.sleep(1.0)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == status, err
    assert b"Traceback" not in err and err.strip().endswith(word)
    assert not out.exists() and not list(tmp_path.glob("*.part"))
    assert not list(tmp_path.glob(".*"))


def test_no_traceback_on_merge_without_engine_or_with(small, tmp_path):
    p = run_cli("merge", "-q", small, tmp_path / "o.pcap")
    assert b"Traceback" not in p.stderr
    assert p.returncode in (0, 2)


def test_snaplen_cut_merge_and_restore_say_what_they_leave(tmp_path):
    """A capture cut by a snaplen: merge counts the captured bytes its
    aggregates cannot carry, split --restore counts the aggregates it cannot
    give back (no restore record); neither is silent."""
    from builders import pcap as build_pcap
    src = KERNEL / "tcp4-bulk-wire.pcap"
    recs = [(p.ts // 10 ** 9, (p.ts % 10 ** 9) // 1000, p.data[:200], p.orig_len)
            for p in open_reader(src) if type(p) is Packet]
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(build_pcap(recs))
    m = tmp_path / "m.pcapng"
    p = run_cli("merge", "--stats", tmp_path / "s.json", cut, m, check=0)
    sn = json.loads((tmp_path / "s.json").read_text())["gro"]["snaplen"]
    assert sn["aggregates"] > 0 and sn["captured_bytes_left_out"] > 0
    assert f"{sn['captured_bytes_left_out']:,} captured bytes" in " ".join(p.stderr.decode().split())
    p = run_cli("split", "--restore", "--stats", tmp_path / "r.json", m, tmp_path / "r.pcapng",
                check=0)
    r = json.loads((tmp_path / "r.json").read_text())["restore"]
    assert r["restored"] == 0 and r["unrecorded"] == sn["aggregates"]
    assert f"{sn['aggregates']:,} aggregates carry no restore record" in " ".join(p.stderr.decode().split())


def _sh(cmd, tmp_path):
    """Run ``python -m pcapgro.cli`` through sh with the redirections in
    ``cmd`` (a shell fragment after the command name)."""
    full = f"{sys.executable} -m pcapgro.cli {cmd}"
    return subprocess.run(["sh", "-c", full], capture_output=True, cwd=REPO, timeout=120)


def test_closed_standard_streams(tmp_path):
    """Started with stdin, stdout or stderr closed (``<&- >&- 2>&-``): the
    job still runs and writes OUT (it used to fail on the closed stderr
    with no output and exit 1); reading or writing a closed ``-`` is one
    line and exit 2, never an internal error."""
    src = tmp_path / "in.pcap"
    src.write_bytes(pcap([(1, 0, pkt(60), 60), (2, 0, pkt(1514), 1514)]))
    for redir in ("2>&-", ">&- 2>&-", "<&- >&- 2>&-", "<&-"):
        out = tmp_path / "o.pcapng"
        if out.exists():
            out.unlink()
        p = _sh(f"merge {src} {out} {redir}", tmp_path)
        assert p.returncode == 0, (redir, p.stderr)
        assert len([e for e in open_reader(out) if type(e) is Packet]) == 2
        assert b"internal error" not in p.stderr
    for cmd, word in ((f"merge -q {src} - >&-", b"standard output"),
                      (f"merge -q - {tmp_path / 'x.pcap'} <&-", b"standard input"),
                      (f"merge -q --stats - {src} {tmp_path / 'y.pcap'} >&-", b"standard output"),
                      (f"split -q {src} - >&-", b"standard output")):
        p = _sh(cmd, tmp_path)
        assert p.returncode == 2, (cmd, p.stderr)
        assert word in p.stderr and b"closed" in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and b"internal error" not in p.stderr
    assert not (tmp_path / "x.pcap").exists() and not (tmp_path / "y.pcap").exists()


def test_ignored_sighup_stays_ignored(tmp_path):
    """Under nohup (SIGHUP ignored by the parent) a hangup does not abort
    the job: the output is complete, exit 0."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = tmp_path / "o.pcap"
    proc = subprocess.Popen([sys.executable, "-m", "pcapgro.cli", "merge", "-q", "--no-gro",
                             str(fifo), str(out)], cwd=REPO, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    with open(fifo, "wb") as w:
        w.write(pcap([(1, 0, pkt(60), 60)] * 100))
        w.flush()
        time.sleep(1.0)
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert len([e for e in open_reader(out) if type(e) is Packet]) == 100


def test_verify_sigterm_exit_143_and_no_temp_dir(tmp_path):
    """SIGTERM during verify (tshark running): exit 143, tshark gone, and
    its temporary configuration directory removed (click turns the
    interrupt into Abort; the signal's status is kept)."""
    import shutil
    if not shutil.which("tshark"):
        pytest.skip("needs tshark")
    big = tmp_path / "big.pcap"
    big.write_bytes(pcap([(i // 1000, i % 1000, pkt(1514), 1514) for i in range(40000)]))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    proc = subprocess.Popen([sys.executable, "-m", "pcapgro.cli", "verify", str(big), str(big)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while not list(tmp.glob("pcapgro-verify-*")) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.skip("verify ended before the signal")
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    if proc.returncode == 0:
        pytest.skip("verify ended before the signal")
    assert proc.returncode == 143, err
    assert err.strip().endswith(b"terminated") and b"Traceback" not in err
    assert not list(tmp.iterdir())
