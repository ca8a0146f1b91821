"""Real NAPI-timing captures on this machine's veth (issue 21), as root.

Usage::

    python3 bench/napi_captures.py OUTDIR [CASE ...]     # make captures
    python3 bench/napi_captures.py --list                 # the cases

For each case it makes two network namespaces ``nc<pid>tx`` / ``nc<pid>rx``
joined by a veth pair ``nc<pid>a`` / ``nc<pid>b`` (removed on exit, also
after an error), turns the sender's offloads off (``tso gso gro tx off``:
wire-sized frames with complete checksums) and the receiver's GRO on (plus
``rx-udp-gro-forwarding`` or ``rx-gro-list`` for the UDP cases), and runs
two tcpdumps: ``-Q out`` on the sender's end (``CASE-wire.pcap``) and
``-Q in`` on the receiver's end, after its GRO (``CASE-gro.pcap``).  IPv4
only (IPv6 is disabled in both namespaces: no ND/MLD frames).

The traffic generators are this file itself, run in a namespace with
``--role``: ``udp-send`` (one 1400-byte datagram per ``sendto``, paced by a
busy wait, no socket listening on the receiver: UDP forwarding GRO),
``udp-gso`` (UDP_SEGMENT sends: SIZE bytes cut into SEG-byte datagrams by
the sender's stack, every INTERVAL µs), ``tcp-send`` (a TCP client writing SIZE bytes every INTERVAL µs),
``tcp-sink`` (a TCP server reading everything), ``rr-server`` /
``rr-client`` (request/response: a 64-byte request from the receiver side,
a RESP-byte reply from the sender side).  Bulk TCP uses iperf3.
"""

import os
import socket
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
PY = sys.executable

# name -> (receiver features, command in the sender namespace (None:
#          rr-client in the receiver's), helper started first in the other
#          namespace (receiver's; rr-server: sender's) or None)
CASES = {
    "udp-10us": ("fwd", ["udp-send", "1400", "10", "2000"], None),
    "udp-30us": ("fwd", ["udp-send", "1400", "30", "2000"], None),
    "udp-100us": ("fwd", ["udp-send", "1400", "100", "2000"], None),
    "udp-1ms": ("fwd", ["udp-send", "1400", "1000", "600"], None),
    "udp-fraglist-30us": ("flist", ["udp-send", "1400", "30", "2000"], None),
    # UDP GSO (UDP_SEGMENT 1200): one 12,000-byte sendmsg cut into 10
    # datagrams by the sender's stack, one send every INTERVAL µs
    "udp-gso-1ms": ("fwd", ["udp-gso", "12000", "1200", "1000", "300"], None),
    "udp-gso-200us": ("fwd", ["udp-gso", "12000", "1200", "200", "300"], None),
    "tcp-bulk-1": ("off", ["iperf3", "-c", "10.89.0.2", "-n", "700K", "-P", "1"], "iperf3"),
    "tcp-bulk-8": ("off", ["iperf3", "-c", "10.89.0.2", "-n", "700K", "-P", "8"], "iperf3"),
    "tcp-bulk-32": ("off", ["iperf3", "-c", "10.89.0.2", "-n", "4M", "-P", "32"], "iperf3"),
    "tcp-app-200B-100us": ("off", ["tcp-send", "200", "100", "3000"], "tcp-sink"),
    "tcp-app-1000B-1ms": ("off", ["tcp-send", "1000", "1000", "1000"], "tcp-sink"),
    "tcp-app-4000B-300us": ("off", ["tcp-send", "4000", "300", "1000"], "tcp-sink"),
    "tcp-app-16000B-2ms": ("off", ["tcp-send", "16000", "2000", "300"], "tcp-sink"),
    # request/response: the server (sender side) starts first, the client
    # (receiver side) runs in the foreground
    "tcp-rr-16K": ("off", None, ["rr-server", "16000"]),
    "tcp-rr-60K": ("off", None, ["rr-server", "60000"]),
}

SRC, DST = "10.89.0.1", "10.89.0.2"
PORT = 5301


def _sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)


class Veth:
    """Two namespaces joined by a veth pair, removed by :meth:`close`."""

    def __init__(self, tag):
        self.na, self.nb = f"nc{tag}tx", f"nc{tag}rx"
        self.a, self.b = f"nc{tag}a", f"nc{tag}b"
        _sh("ip", "netns", "add", self.na)
        _sh("ip", "netns", "add", self.nb)
        _sh("ip", "link", "add", self.a, "netns", self.na, "type", "veth",
            "peer", "name", self.b, "netns", self.nb)
        for ns, dev, addr in ((self.na, self.a, SRC), (self.nb, self.b, DST)):
            _sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                "net.ipv6.conf.all.disable_ipv6=1")
            _sh("ip", "-n", ns, "addr", "add", addr + "/24", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "-n", ns, "link", "set", dev, "up")
        _sh("ip", "netns", "exec", self.na, "ethtool", "-K", self.a, "tx", "off",
            "tso", "off", "gso", "off", "gro", "off", check=False)

    def rx_features(self, mode):
        flist = "on" if mode == "flist" else "off"
        fwd = "on" if mode == "fwd" else "off"
        _sh("ip", "netns", "exec", self.nb, "ethtool", "-K", self.b, "gro", "on",
            "tso", "off", "gso", "off", "rx-gro-list", flist,
            "rx-udp-gro-forwarding", fwd, check=False)

    def close(self):
        _sh("ip", "netns", "del", self.na, check=False)
        _sh("ip", "netns", "del", self.nb, check=False)


def _helper(ns, args):
    if isinstance(args, str):
        args = [args]
    if args[0] == "iperf3":
        cmd = ["iperf3", "-s", "-1"] if len(args) == 1 else args
    else:
        cmd = [PY, HERE, "--role"] + args
    return ["ip", "netns", "exec", ns] + cmd


def capture(out, name):
    """Make ``OUT/NAME-wire.pcap`` and ``OUT/NAME-gro.pcap`` for case
    ``name`` (see :data:`CASES`)."""
    mode, send, recv = CASES[name]
    v = Veth(f"{os.getpid() % 100000}")
    procs = []
    try:
        v.rx_features(mode)
        for ns, dev, q, f in ((v.na, v.a, "out", "wire"), (v.nb, v.b, "in", "gro")):
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, "tcpdump", "--immediate-mode", "-U", "-B", "65536",
                 "-Q", q, "-s", "0", "-i", dev, "-w", f"{out}/{name}-{f}.pcap",
                 "ip and (tcp or udp)"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        time.sleep(1.0)
        if recv:
            ns = v.na if send is None else v.nb
            srv = subprocess.Popen(_helper(ns, recv), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            procs.append(srv)
            time.sleep(0.5)
        fg = _helper(v.nb, ["rr-client"]) if send is None else _helper(v.na, send)
        subprocess.run(fg, timeout=60, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait()
        v.close()
    for p, f in zip(procs, ("wire", "gro")):
        err = p.stderr.read().decode(errors="replace")
        p.stderr.close()
        drop = [ln for ln in err.splitlines() if "dropped" in ln and not ln.startswith("0 ")]
        if drop:
            print(f"{name}-{f}: {'; '.join(drop)}", file=sys.stderr)


# ------------------------------------------------------------------ roles

def _spin_until(t):
    while time.perf_counter_ns() < t:
        pass


def _udp_send(size, gap_us, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    t = time.perf_counter_ns()
    for k in range(int(n)):
        s.sendto(k.to_bytes(4, "big") * (int(size) // 4), (DST, 9999))
        t += int(gap_us) * 1000
        _spin_until(t)


def _udp_gso(size, seg, gap_us, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_UDP, 103, int(seg))         # UDP_SEGMENT
    t = time.perf_counter_ns()
    for k in range(int(n)):
        s.sendto(k.to_bytes(4, "big") * (int(size) // 4), (DST, 9999))
        t += int(gap_us) * 1000
        _spin_until(t)


def _tcp_send(size, gap_us, n):
    time.sleep(0.3)
    s = socket.create_connection((DST, PORT))
    data = bytes(range(256)) * (int(size) // 256 + 1)
    t = time.perf_counter_ns()
    for k in range(int(n)):
        s.sendall(data[k % 256: k % 256 + int(size)])
        t += int(gap_us) * 1000
        _spin_until(t)
    s.close()


def _tcp_sink():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((DST, PORT))
    ls.listen(1)
    c, _ = ls.accept()
    while c.recv(1 << 16):
        pass


def _rr_server(resp):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((SRC, PORT))
    ls.listen(1)
    c, _ = ls.accept()
    data = bytes(range(256)) * (int(resp) // 256 + 1)
    k = 0
    while True:
        req = c.recv(64)
        if not req:
            break
        c.sendall(data[k % 256: k % 256 + int(resp)])
        k += 1


def _rr_client(rounds=200):
    time.sleep(0.3)
    s = socket.create_connection((SRC, PORT))
    for k in range(rounds):
        s.sendall(b"q" * 64)
        need = None
        got = 0
        # the reply's length is not sent: read until it stops for 2 ms
        s.settimeout(0.05)
        while True:
            try:
                b = s.recv(1 << 16)
            except socket.timeout:
                break
            if not b:
                return
            got += len(b)
            s.settimeout(0.002)
        del need, got
        s.settimeout(None)


ROLES = {"udp-send": _udp_send, "udp-gso": _udp_gso, "tcp-send": _tcp_send, "tcp-sink": _tcp_sink,
         "rr-server": _rr_server, "rr-client": _rr_client}


def main(argv):
    if argv and argv[0] == "--role":
        ROLES[argv[1]](*argv[2:])
        return 0
    if argv and argv[0] == "--list":
        print("\n".join(CASES))
        return 0
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    out = argv[0]
    os.makedirs(out, exist_ok=True)
    for name in argv[1:] or list(CASES):
        capture(out, name)
        print(name, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
