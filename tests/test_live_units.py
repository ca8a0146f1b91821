"""Live capture without root or a network (issue 22): tcpdump's statistics
parsed, the pump process, the -B option, and the CLI's reports driven by a
stand-in ``tcpdump`` on PATH (a script writing a small pcap and the
statistics a real one prints)."""

import json
import os
import struct
import subprocess
import sys

import pytest

from pcapgro.live import LiveCapture, parse_stats, DEFAULT_BUFFER_KIB

from capture_helpers import REPO

CLOSING = ["tcpdump: listening on vb, link-type EN10MB (Ethernet), snapshot length 262144 bytes",
           "120 packets captured", "130 packets received by filter",
           "10 packets dropped by kernel"]


def test_parse_closing_statistics():
    assert parse_stats(CLOSING) == {"captured": 120, "received_by_filter": 130,
                                    "dropped_kernel": 10, "dropped_interface": 0}
    assert parse_stats(CLOSING + ["3 packets dropped by interface"])["dropped_interface"] == 3
    assert parse_stats(["1 packet captured", "1 packet received by filter",
                        "0 packets dropped by kernel"])["captured"] == 1
    assert parse_stats(["tcpdump: listening on vb"]) == {}


def test_parse_takes_the_last_report():
    usr1 = ("tcpdump: 5 packets captured, 9 packets received by filter, 4 packets dropped "
            "by kernel, 2 packets dropped by interface")
    assert parse_stats([usr1]) == {"captured": 5, "received_by_filter": 9,
                                   "dropped_kernel": 4, "dropped_interface": 2}
    # a later report without "dropped by interface" (0 again) replaces it
    assert parse_stats([usr1] + CLOSING)["dropped_interface"] == 0


def test_command_has_buffer_size():
    cmd = LiveCapture("eth0").command()
    assert cmd[cmd.index("-B") + 1] == str(DEFAULT_BUFFER_KIB)
    assert "--immediate-mode" not in cmd
    cmd = LiveCapture("eth0", buffer_size=1, immediate=True).command()
    assert cmd[cmd.index("-B") + 1] == "1" and "--immediate-mode" in cmd


def test_pump_passes_every_byte():
    data = os.urandom(3 << 20)
    pump = os.path.join(REPO, "pcapgro", "livepump.py")
    r = subprocess.run([sys.executable, "-s", "-E", pump, str(1 << 20)], input=data,
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout == data
    assert r.stderr.startswith(b"peak ")


FAKE = r'''#!{py}
import os, struct, sys, time
mode = os.environ.get("FAKE_TCPDUMP", "drops")
if mode == "nodev":
    sys.stderr.write("tcpdump: nosuchif0: No such device exists\n(SIOCGIFHWADDR: No such device)\n")
    sys.exit(1)
if mode == "warn":
    sys.stderr.write("tcpdump: WARNING: fake0: no IPv4 address assigned\n")
sys.stderr.write("tcpdump: listening on fake0, link-type EN10MB (Ethernet), snapshot length 262144 bytes\n")
sys.stderr.flush()
out = sys.stdout.buffer
out.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1))
frame = bytes(12) + b"\x88\xb5" + bytes(50)
for i in range(3):
    out.write(struct.pack("<IIII", 1000 + i, 0, len(frame), len(frame)) + frame)
out.flush()
drops = 2 if mode == "drops" else 0
sys.stderr.write(f"3 packets captured\n{{3 + drops}} packets received by filter\n"
                 f"{{drops}} packets dropped by kernel\n")
'''


@pytest.fixture
def fake_tcpdump(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    t = d / "tcpdump"
    t.write_text(FAKE.format(py=sys.executable))
    t.chmod(0o755)
    return dict(os.environ, PATH=f"{d}:{os.environ['PATH']}")


def _run(env, *args, mode="drops"):
    return subprocess.run([sys.executable, "-m", "pcapgro.cli", *map(str, args)], cwd=REPO,
                          env=dict(env, FAKE_TCPDUMP=mode), capture_output=True, timeout=60)


def test_drops_reported_table_json_exit(fake_tcpdump, tmp_path):
    st = tmp_path / "st.json"
    r = _run(fake_tcpdump, "merge", "-i", "fake0", "--stats", st, tmp_path / "o.pcapng")
    err = r.stderr.decode()
    assert r.returncode == 4, err
    assert "live: 3 packets captured by tcpdump, 5 received by filter, 2 dropped by kernel" in err
    assert err.count("pcapgro: warning: 2 packets lost (2 dropped by kernel, -B 65536 KiB)") == 1
    live = json.loads(st.read_text())["live"]
    assert (live["captured"], live["dropped_kernel"], live["dropped_interface"]) == (3, 2, 0)
    assert live["buffer_kib"] == DEFAULT_BUFFER_KIB


def test_drops_warned_with_quiet(fake_tcpdump, tmp_path):
    r = _run(fake_tcpdump, "merge", "-q", "-i", "fake0", "-B", "1", tmp_path / "o.pcap")
    lines = r.stderr.decode().splitlines()
    assert r.returncode == 4
    assert len(lines) == 1 and lines[0].startswith("pcapgro: warning: 2 packets lost"), lines
    assert lines[0] == "pcapgro: warning: 2 packets lost (2 dropped by kernel, -B 1 KiB)"


def test_clean_capture_exits_0(fake_tcpdump, tmp_path):
    r = _run(fake_tcpdump, "merge", "-i", "fake0", "--stats", "-", tmp_path / "o.pcap",
             mode="clean")
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["live"]["dropped_kernel"] == 0
    assert b"warning" not in r.stderr and b"listening" not in r.stderr


@pytest.mark.parametrize("quiet", [(), ("-q",)])
def test_capture_error_is_one_line(fake_tcpdump, tmp_path, quiet):
    r = _run(fake_tcpdump, "merge", *quiet, "-i", "nosuchif0", tmp_path / "o.pcap", mode="nodev")
    err = r.stderr.decode()
    assert r.returncode == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "unknown interface 'nosuchif0'" in err and "No such device" in err
    assert not (tmp_path / "o.pcap").exists()


@pytest.mark.parametrize("args", [("-B", "64"), ("--buffer-size", "64")])
def test_buffer_size_needs_live_input(tmp_path, args):
    r = subprocess.run([sys.executable, "-m", "pcapgro.cli", "merge", *args,
                        str(REPO / "samples" / "tcp4-bulk-wire.pcap"), str(tmp_path / "o.pcap")],
                       cwd=REPO, capture_output=True, timeout=60)
    assert r.returncode == 2 and b"go with -i" in r.stderr


def test_buffer_size_at_least_1(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pcapgro.cli", "merge", "-i", "lo", "-B", "0",
                        str(tmp_path / "o.pcap")], cwd=REPO, capture_output=True, timeout=60)
    assert r.returncode == 2 and b"-B" in r.stderr


def test_tcpdump_warning_after_the_table(fake_tcpdump, tmp_path):
    r = _run(fake_tcpdump, "merge", "-i", "fake0", tmp_path / "o.pcap", mode="warn")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert err.count("WARNING") == 1
    assert err.index("live: ") < err.index("tcpdump: WARNING: fake0: no IPv4 address assigned")
    r = _run(fake_tcpdump, "merge", "-q", "-i", "fake0", tmp_path / "o.pcap", mode="warn")
    assert r.returncode == 0 and r.stderr == b""
