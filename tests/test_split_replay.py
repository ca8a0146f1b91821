"""split output replays on a 1500-byte MTU (root only).

A TSO sender's capture holds frames of up to 65 KB: tcpreplay into a
1500-MTU veth fails on them ("Message too long").  After ``pcapgro split``
every packet is sent.  The test makes its own network namespaces and veth
pair and removes them; it touches nothing else.
"""

import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest

from capture_helpers import KERNEL, REPO

OK = os.geteuid() == 0 and shutil.which("ip") and shutil.which("tcpreplay")
pytestmark = [pytest.mark.root,
              pytest.mark.skipif(not OK, reason="needs root, ip (iproute2) and tcpreplay")]


def sh(*a, check=True):
    return subprocess.run(a, check=check, capture_output=True)


@pytest.fixture
def veth():
    ns = f"pgro-replay-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    peer = ns + "-b"
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "netns", "add", peer)
    except subprocess.CalledProcessError as e:
        sh("ip", "netns", "del", ns, check=False)
        pytest.skip(f"cannot create network namespaces: {e.stderr.decode().strip()}")
    try:
        sh("ip", "link", "add", "ra", "netns", ns, "mtu", "1500", "type", "veth",
           "peer", "name", "rb", "netns", peer, "mtu", "1500")
        sh("ip", "-n", ns, "link", "set", "ra", "up")
        sh("ip", "-n", peer, "link", "set", "rb", "up")
        yield ns
    finally:
        sh("ip", "netns", "del", ns, check=False)
        sh("ip", "netns", "del", peer, check=False)


def replay(ns, path):
    r = subprocess.run(["ip", "netns", "exec", ns, "tcpreplay", "-i", "ra", "-t", str(path)],
                       capture_output=True, timeout=120)
    out = (r.stdout + r.stderr).decode()
    ok = re.search(r"Successful packets:\s+(\d+)", out)
    bad = re.search(r"Failed packets:\s+(\d+)", out)
    return (int(ok.group(1)) if ok else 0), (int(bad.group(1)) if bad else None), out


@pytest.mark.parametrize("name,args", [("tcp4-tso-sender", []),
                                       ("udp4-uso-sender", ["--gso-size", "1200"])])
def test_split_output_replays_on_1500_mtu(veth, tmp_path, name, args):
    src = KERNEL / f"{name}.pcap"
    sent, failed, out = replay(veth, src)
    assert failed or "Message too long" in out, f"the unsplit capture should not replay:\n{out}"
    dst = tmp_path / "wire.pcap"
    r = subprocess.run([sys.executable, "-m", "pcapgro.cli", "split", "-q", *args, str(src), str(dst)],
                       cwd=REPO, capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    sent, failed, out = replay(veth, dst)
    assert failed == 0, out
    from pcapgro.capture import open_reader
    from pcapgro.record import Packet
    rd = open_reader(dst)
    n = sum(1 for ev in rd if type(ev) is Packet)
    rd.close()
    assert sent == n, out
