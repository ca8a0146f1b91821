"""Live input: pcapgro merge -i IFACE on a veth inside namespaces the test
makes (root only), stopped with SIGINT.

The test creates two uniquely named network namespaces joined by a veth
pair, sends real TCP and UDP traffic across with Python sockets, captures
it live with ``pcapgro merge -i`` (and, at the same time, a plain
``pcapgro merge --no-gro -i`` copy), stops both with SIGINT and checks:
exit 0, valid output, every payload byte present, and the same merge as
``pcapgro merge`` of the plain copy from a file.  It touches nothing but
what it made.
"""

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from pcapgro.live import parse_stats

from capture_helpers import REPO, packets

ROOT_OK = (os.geteuid() == 0 and shutil.which("ip") and shutil.which("tcpdump"))
pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not ROOT_OK, reason="needs root, ip (iproute2) and tcpdump")]


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True)


@pytest.fixture
def netns():
    tag = uuid.uuid4().hex[:6]
    a, b = f"pgro-live-{os.getpid()}-{tag}-a", f"pgro-live-{os.getpid()}-{tag}-b"
    try:
        sh("ip", "netns", "add", a)
        sh("ip", "netns", "add", b)
    except subprocess.CalledProcessError as e:
        sh("ip", "netns", "del", a, check=False)
        pytest.skip(f"cannot create network namespaces: {e.stderr.decode().strip()}")
    try:
        sh("ip", "link", "add", "va", "netns", a, "type", "veth", "peer", "name", "vb", "netns", b)
        sh("ip", "-n", a, "addr", "add", "10.77.0.1/24", "dev", "va")
        sh("ip", "-n", b, "addr", "add", "10.77.0.2/24", "dev", "vb")
        for ns, dev in ((a, "va"), (b, "vb")):
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        if shutil.which("ethtool"):
            sh("ip", "netns", "exec", a, "ethtool", "-K", "va", "tso", "off", "gso", "off", check=False)
        yield a, b
    finally:
        sh("ip", "netns", "del", a, check=False)
        sh("ip", "netns", "del", b, check=False)


SERVER = r"""
import socket, sys
t = socket.socket(); t.bind(("10.77.0.2", 5555)); t.listen()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("10.77.0.2", 5556))
c, _ = t.accept(); n = 0
while True:
    d = c.recv(65536)
    if not d: break
    n += len(d)
print(n)
"""

CLIENT = r"""
import socket, time
s = socket.create_connection(("10.77.0.2", 5555))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(20):
    s.sendall(bytes([i]) * 20000)
    u.sendto(bytes([i]) * 900, ("10.77.0.2", 5556))
    time.sleep(0.01)
s.close()
"""


def test_live_merge_stopped_with_sigint(netns, tmp_path):
    a, b = netns
    live = tmp_path / "live.pcapng"
    raw = tmp_path / "raw.pcap"
    py = sys.executable
    cmd = ["ip", "netns", "exec", b, py, "-m", "pcapgro.cli"]
    p1 = subprocess.Popen(cmd + ["merge", "-q", "-i", "vb", "-f", "tcp or udp", str(live)],
                          cwd=REPO, stderr=subprocess.PIPE)
    p2 = subprocess.Popen(cmd + ["merge", "-q", "--no-gro", "-i", "vb", "-f", "tcp or udp", str(raw)],
                          cwd=REPO, stderr=subprocess.PIPE)
    time.sleep(1.5)
    srv = subprocess.Popen(["ip", "netns", "exec", b, py, "-c", SERVER], stdout=subprocess.PIPE)
    time.sleep(0.5)
    subprocess.run(["ip", "netns", "exec", a, py, "-c", CLIENT], check=True, timeout=30)
    got = int(srv.communicate(timeout=30)[0])
    assert got == 20 * 20000
    time.sleep(0.5)
    for p in (p1, p2):
        p.send_signal(signal.SIGINT)
    for p in (p1, p2):
        _, err = p.communicate(timeout=30)
        assert p.returncode == 0, err.decode()
        assert b"Traceback" not in err
    ours = packets(live)
    plain = packets(raw)
    assert len(plain) > len(ours) > 0
    # every TCP payload byte of the stream is there (counted once: under
    # load the sender may retransmit a segment, and both captures hold it)
    def tcp_bytes(pkts):
        spans = []
        for q in pkts:
            d = q.data
            if d[12:14] == b"\x08\x00" and d[23] == 6 and d[36:38] == (5555).to_bytes(2, "big"):
                tot = int.from_bytes(d[16:18], "big")
                n = tot - 20 - (d[46] >> 4) * 4
                if n:
                    spans.append((int.from_bytes(d[38:42], "big"), n))
        if not spans:
            return 0
        s0 = spans[0][0]              # the first data segment seen
        covered, end = 0, None
        for a, n in sorted(((s - s0) % 2**32, n) for s, n in spans):
            if end is None or a >= end:
                covered += n
                end = a + n
            elif a + n > end:
                covered += a + n - end
                end = a + n
        return covered
    assert tcp_bytes(ours) == tcp_bytes(plain) == 20 * 20000
    # the same merge as from a file of the same packets.  The packets are
    # given back from the live output's own restore records, so they carry
    # the live capture's timestamps: the second tcpdump stamps each packet
    # on its own, microseconds apart, and a gap near poll_gap_ns (1 ms) can
    # end a NAPI poll in one capture and not in the other (a CI flake when
    # the file merge was of the plain copy).
    restored = tmp_path / "restored.pcap"
    r = subprocess.run([py, "-m", "pcapgro.cli", "split", "-q", "--restore", str(live),
                        str(restored)], cwd=REPO)
    assert r.returncode == 0
    assert [q.data for q in packets(restored)] == [q.data for q in plain]
    out = tmp_path / "file.pcapng"
    r = subprocess.run([py, "-m", "pcapgro.cli", "merge", "-q", str(restored), str(out)], cwd=REPO)
    assert r.returncode == 0
    assert [q.data for q in packets(out)] == [q.data for q in ours]


@pytest.mark.parametrize("quiet", [["-q"], []])
@pytest.mark.parametrize("args, what", [(["-i", "nosuchdev0"], "nosuchdev0"),
                                        (["-i", "vb", "-f", "tcp port"], "bad capture filter")])
def test_live_errors_are_one_line(netns, quiet, args, what):
    """An unknown interface or a bad filter: one line of pcapgro's (not
    tcpdump's lines and then pcapgro's), with or without -q; exit 2."""
    a, b = netns
    r = subprocess.run(["ip", "netns", "exec", b, sys.executable, "-m", "pcapgro.cli",
                        "merge", *quiet, *args, "/dev/null"],
                       cwd=REPO, capture_output=True, timeout=30)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert "Traceback" not in err and what in err
    assert len(err.strip().splitlines()) == 1, err


def test_live_count_and_stdout(netns):
    a, b = netns
    p = subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-m", "pcapgro.cli",
                          "merge", "-q", "-i", "vb", "-c", "5", "-F", "pcap", "-"],
                         cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.5)
    subprocess.run(["ip", "netns", "exec", a, "ping", "-c", "8", "-i", "0.1", "10.77.0.2"],
                   capture_output=True, timeout=30)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err.decode()
    assert out[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")


# --- issue 22: a capture that keeps up, and says so when it does not --------

IPERF = shutil.which("iperf3")
needs_iperf = pytest.mark.skipif(not IPERF, reason="needs iperf3")


def _iperf(netns, *args, seconds=3):
    """iperf3 from namespace a to b for ``seconds`` (server: -1, one test)."""
    a, b = netns
    srv = subprocess.Popen(["ip", "netns", "exec", b, IPERF, "-s", "-1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        subprocess.run(["ip", "netns", "exec", a, IPERF, "-c", "10.77.0.2", "-t", str(seconds),
                        *args], check=True, capture_output=True, timeout=seconds + 30)
    finally:
        srv.wait(timeout=30)


def _stop(procs):
    time.sleep(0.5)
    for p in procs:
        p.send_signal(signal.SIGINT)
    return [p.communicate(timeout=120) for p in procs]


@needs_iperf
def test_live_1gbit_loses_nothing(netns, tmp_path):
    """3 s of iperf3 at 1 Gbit/s through the veth: pcapgro's live merge
    (default -B) counts zero drops and its output restores to exactly the
    packets a plain tcpdump beside it captured."""
    a, b = netns
    live, plain, st = tmp_path / "live.pcapng", tmp_path / "plain.pcap", tmp_path / "st.json"
    ours = subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-m", "pcapgro.cli",
                             "merge", "-i", "vb", "-f", "tcp", "--stats", str(st), str(live)],
                            cwd=REPO, stderr=subprocess.PIPE)
    ref = subprocess.Popen(["ip", "netns", "exec", b, "tcpdump", "-i", "vb", "-B", "131072",
                            "-s", "262144", "-w", str(plain), "tcp"], stderr=subprocess.PIPE)
    time.sleep(2.0)
    _iperf(netns, "-b", "1G", seconds=3)
    # the plain tcpdump drops its ring's open block when interrupted
    # (TPACKET_V3): the kernel's block timer hands it over within 2 s
    time.sleep(2.5)
    (_, err), (_, ref_err) = _stop([ours, ref])
    assert ours.returncode == 0, err.decode()
    assert b"Traceback" not in err and b"warning" not in err
    stats = json.loads(st.read_text())
    lv = stats["live"]
    assert lv["dropped_kernel"] == 0 and lv["dropped_interface"] == 0, lv
    assert lv["captured"] == stats["packets_in"] > 100_000
    assert b"0 dropped by kernel" in err        # the table's live line
    assert b"capturing on" not in err           # no progress line on a pipe
    ref_st = parse_stats(ref_err.decode().splitlines())
    if ref_st.get("captured") != ref_st.get("received_by_filter"):
        pytest.skip(f"the plain tcpdump beside it lost packets: {ref_st}")
    restored = tmp_path / "restored.pcap"
    r = subprocess.run([sys.executable, "-m", "pcapgro.cli", "split", "-q", "--restore",
                        str(live), str(restored)], cwd=REPO)
    assert r.returncode == 0
    got, want = [q.data for q in packets(restored)], [q.data for q in packets(plain)]
    assert len(got) == len(want) == lv["captured"]
    _same_packets_nearly_same_order(got, want)


def _same_packets_nearly_same_order(got, want, reach=128):
    """``got`` and ``want`` (lists of packet bytes) hold the same packets
    byte for byte, each as many times, each within ``reach`` places of
    where the other has it.  Exact order cannot be asked of two packet
    sockets: the kernel hands packets to the taps on both CPUs at once (a
    segment received and an ACK sent; veth packets of one flow in two
    CPUs' backlogs), so two captures of the same interface can list the
    packets of one microsecond in different orders (seen: adjacent pairs
    swapped, stamped the same microsecond in one capture; on a loaded
    2-core machine one packet 23 places away in 270,000)."""
    assert collections.Counter(got) == collections.Counter(want)
    where = collections.defaultdict(collections.deque)
    for i, d in enumerate(want):
        where[d].append(i)
    far = [(i, j) for i, d in enumerate(got) for j in (where[d].popleft(),) if abs(i - j) > reach]
    assert not far, f"{len(far)} packets out of place, first (ours, plain): {far[:5]}"


@needs_iperf
def test_live_drops_counted(netns, tmp_path):
    """-B 1 (tcpdump's smallest buffer) with iperf3 at full speed: the kernel
    drops, and pcapgro says so in the table, the JSON (-q too) and the exit
    status 4."""
    a, b = netns
    cmd = ["ip", "netns", "exec", b, sys.executable, "-m", "pcapgro.cli", "merge", "-i", "vb",
           "-B", "1", "-f", "tcp"]
    loud = subprocess.Popen(cmd + ["--stats", str(tmp_path / "loud.json"),
                                   str(tmp_path / "loud.pcapng")], cwd=REPO, stderr=subprocess.PIPE)
    quiet = subprocess.Popen(cmd + ["-q", "--stats", str(tmp_path / "quiet.json"),
                                    str(tmp_path / "quiet.pcapng")], cwd=REPO,
                             stderr=subprocess.PIPE)
    time.sleep(2.0)
    _iperf(netns, seconds=2)
    (_, err), (_, qerr) = _stop([loud, quiet])
    for p, e, name in ((loud, err, "loud"), (quiet, qerr, "quiet")):
        assert p.returncode == 4, e.decode()
        lv = json.loads((tmp_path / f"{name}.json").read_text())["live"]
        assert lv["dropped_kernel"] > 0 and lv["buffer_kib"] == 1, lv
        assert lv["captured"] < lv["received_by_filter"]
        warn = [ln for ln in e.decode().splitlines() if "warning" in ln]
        assert len(warn) == 1 and f"{lv['dropped_kernel']:,} dropped by kernel" in warn[0], e
        assert packets(tmp_path / f"{name}.pcapng")      # what was captured is written
    assert re.search(r"live: [\d,]+ packets captured by tcpdump, [\d,]+ received by filter, "
                     r"[1-9][\d,]* dropped by kernel", err.decode()), err.decode()
    assert qerr.decode().strip().count("\n") == 0       # -q: the warning line alone


def _tcp_payload(pkts, port=5555):
    """TCP payload bytes to ``port`` in Ethernet/IPv4 packets (aggregates
    count all their segments')."""
    n = 0
    for q in pkts:
        d = q.data
        if d[12:14] == b"\x08\x00" and d[23] == 6 and d[36:38] == port.to_bytes(2, "big"):
            n += int.from_bytes(d[16:18], "big") - 20 - (d[46] >> 4) * 4
    return n


@pytest.mark.parametrize("how", ["sigterm", "duration"])
def test_live_sigterm_and_duration_flush_everything(netns, tmp_path, how):
    """SIGTERM, and --duration, end the capture normally: exit 0, every
    held aggregate written (all the stream's payload bytes are there)."""
    a, b = netns
    live = tmp_path / "live.pcapng"
    py = sys.executable
    extra = ["--duration", "6"] if how == "duration" else []
    p = subprocess.Popen(["ip", "netns", "exec", b, py, "-m", "pcapgro.cli", "merge", "-q",
                          "-i", "vb", "-f", "tcp", *extra, str(live)],
                         cwd=REPO, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    time.sleep(1.5)
    srv = subprocess.Popen(["ip", "netns", "exec", b, py, "-c", SERVER], stdout=subprocess.PIPE)
    time.sleep(0.5)
    subprocess.run(["ip", "netns", "exec", a, py, "-c", CLIENT], check=True, timeout=30)
    assert int(srv.communicate(timeout=30)[0]) == 20 * 20000
    if how == "sigterm":
        time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err.decode()
    assert err == b""
    if how == "duration":
        assert time.monotonic() - t0 >= 6
    assert _tcp_payload(packets(live)) == 20 * 20000


def test_live_progress_line_on_a_terminal(netns, tmp_path):
    """On a terminal (a pty of 120 columns) the capture shows one progress
    line, redrawn: packets, packets/s, packets out and drops so far; it is
    taken away before the table."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    a, b = netns
    m, s = pty.openpty()
    fcntl.ioctl(s, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    p = subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-m", "pcapgro.cli", "merge",
                          "-i", "vb", "--duration", "4", str(tmp_path / "o.pcapng")],
                         cwd=REPO, stdin=s, stdout=s, stderr=s)
    os.close(s)
    ping = subprocess.Popen(["ip", "netns", "exec", a, sys.executable, "-c",
                             "import socket, time\n"
                             "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                             "for i in range(3000):\n"
                             "    u.sendto(b'x' * 100, ('10.77.0.2', 9)); time.sleep(0.001)\n"])
    out = b""
    while True:
        r, _, _ = select.select([m], [], [], 0.2)
        if r:
            try:
                d = os.read(m, 65536)
            except OSError:
                break
            if not d:
                break
            out += d
        elif p.poll() is not None:
            break
    os.close(m)
    ping.wait(timeout=30)
    assert p.wait(timeout=30) == 0, out.decode()
    text = out.decode()
    shown = re.findall(r"capturing on vb: (\d+) pkt \[[\d:]+, [\d.?]+ pkt/s(?:, ([\d,]+) out)?"
                       r"(?:, ([\d,]+) dropped)?", text)
    assert len(shown) >= 3, text
    assert max(int(n) for n, _, _ in shown) > 0
    assert any(d == "0" for _, _, d in shown), text        # tcpdump's count asked for
    assert text.rindex("capturing on") < text.index("packets          bytes")
