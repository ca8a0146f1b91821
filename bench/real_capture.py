#!/usr/bin/env python3
"""Make a real bulk TCP capture for the benchmarks (root, network namespaces).

Two namespaces joined by a veth pair; the sender's offloads (TSO, GSO and
checksum offload) are off, so what it puts on the wire is MSS-sized
segments with complete checksums (the receiver's ACKs too); iperf3 sends
``--bytes`` of one TCP flow and tcpdump captures the sender's side of the
veth (``-Q out`` and the ACKs coming back, ``-Q inout``).  The result is the
wire side of a real Linux 6.x bulk transfer, the input `merge` is made for.

Usage (as root):
    python3 bench/real_capture.py OUT.pcap [--bytes 560M]

Namespaces are named pgro-bench-<pid>-{a,b} and removed at the end; nothing
outside them is touched.
"""

import argparse
import os
import subprocess
import sys
import time


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--bytes", default="560M", help="iperf3 -n (default 560M: ~390k segments)")
    ap.add_argument("-6", dest="v6", action="store_true", help="over IPv6")
    a = ap.parse_args()
    tag = f"pgro-bench-{os.getpid()}"
    na, nb = tag + "-a", tag + "-b"
    try:
        sh("ip", "netns", "add", na)
        sh("ip", "netns", "add", nb)
        sh("ip", "-n", na, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", nb)
        sh("ip", "-n", na, "addr", "add", "10.77.0.1/24", "dev", "va")
        sh("ip", "-n", nb, "addr", "add", "10.77.0.2/24", "dev", "vb")
        sh("ip", "-n", na, "addr", "add", "fd77::1/64", "dev", "va", "nodad")
        sh("ip", "-n", nb, "addr", "add", "fd77::2/64", "dev", "vb", "nodad")
        for ns, dev in ((na, "va"), (nb, "vb"), (na, "lo"), (nb, "lo")):
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "netns", "exec", na, "ethtool", "-K", "va", "tso", "off", "gso", "off", "tx", "off")
        sh("ip", "netns", "exec", nb, "ethtool", "-K", "vb", "tx", "off")   # ACKs: full checksums
        srv = subprocess.Popen(["ip", "netns", "exec", nb, "iperf3", "-s", "-1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dump = subprocess.Popen(["ip", "netns", "exec", na, "tcpdump", "-i", "va", "-n",
                                 "-s", "262144", "-B", "262144", "-w", a.out, "tcp"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)
        sh("ip", "netns", "exec", na, "iperf3", "-c", "fd77::2" if a.v6 else "10.77.0.2",
           "-n", a.bytes)
        time.sleep(0.5)
        dump.terminate()
        _, err = dump.communicate(timeout=30)
        srv.wait(timeout=10)
        print(err.decode().strip().splitlines()[-3:], file=sys.stderr)
    finally:
        sh("ip", "netns", "del", na, check=False)
        sh("ip", "netns", "del", nb, check=False)


if __name__ == "__main__":
    main()
