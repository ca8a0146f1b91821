"""The running kernel as a forwarder oracle: sender -> router -> receiver.

What it builds (root, Linux 6.18), all in namespaces it creates and
removes again (try/finally; it never touches an interface outside them):

* three namespaces ``pfwd-<pid>-<rand>-{s,r,d}`` (sender, router,
  receiver), veth pairs ``fw<rand>s0``(s) -- ``fw<rand>r1``(r) (ingress)
  and ``fw<rand>r2``(r) -- ``fw<rand>d3``(d) (egress);
* router: IPv4 and IPv6 forwarding on, ICMP rate limits off (every ICMP
  the kernel makes is sent, so counts can be compared), host routes and
  permanent neighbours for the captures' addresses (10.88.0.1 / fd88::1
  behind r1, 10.88.0.2 / fd88::2 behind r2), rp_filter off;
* ingress r1: MAC = the capture's destination MAC, ``gro on`` (puts a veth
  in NAPI mode on 6.18), optionally ``rx-gro-list on`` (fraglist) or
  ``rx-udp-gro-forwarding on``, ``gro_flush_timeout`` 1 ms and
  ``napi_defer_hard_irqs`` 1 (so a burst is taken in one NAPI poll, as in
  tests/kernel_oracle.py);
* sender s0: ``tso gso off`` (else veth_xmit keeps its frames out of the
  peer's NAPI, i.e. no GRO, unless the peer has rx-gro-list /
  rx-udp-gro-forwarding);
* egress r2: ``tso gso tx-udp-segmentation tx-gso-list tx off`` (software
  GSO and software checksums: the frames on the wire are final), MTU =
  ``egress_mtu``; receiver d3 with GRO off;
* captures: ``tcpdump -Q in`` on d3 (what the router put on the wire), on
  r1 (the router's GRO aggregates) and on s0 (ICMP errors coming back).

Replay: a Python AF_PACKET socket in the sender namespace sends the frames
in groups (default 8 frames back to back), a pause of ``gap_ms`` between
groups.  pcapgro's :class:`~pcapgro.forward.Forwarder` is given the same
frames with timestamps 10 us apart inside a group and ``gap_ms`` between
groups, ``GROConfig(hash='none')`` (injected frames carry no flow hash),
so both see the same NAPI polls.

Command line (as root)::

    python tests/forwarder_oracle.py CAPTURE [--fraglist] [--udp-gro] [--mtu N]
    python tests/forwarder_oracle.py --synthetic udp-fixedid [--fraglist|--udp-gro]
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (str(HERE), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from pcapgro.record import Packet  # noqa: E402

SRC_MAC = bytes.fromhex("6e11ac8c5222")    # the shared captures' sender
DST_MAC = bytes.fromhex("3ad7e62f4362")    # ... and receiver (= router ingress here)
R2_MAC = bytes.fromhex("020000000002")     # router egress
D3_MAC = bytes.fromhex("020000000003")     # receiver
STEP_NS = 10_000
T0 = 1_000_000_000_000


def requirements_missing():
    """None when the harness can run here, else the reason why not."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, AF_PACKET)"
    for tool in ("ip", "tcpdump", "ethtool"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH"
    rel = os.uname().release
    if not rel.startswith("6.18."):
        return f"kernel {rel} is not 6.18.* (findings are for 6.18)"
    try:
        subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        return f"'ip netns' unusable: {e}"
    return None


# ------------------------------------------------------------ pcap files

def write_pcap(path, frames):
    """Classic pcap (ns, Ethernet) of ``frames`` (bytes or Packet)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for i, fr in enumerate(frames):
            if isinstance(fr, Packet):
                ts, data, orig = fr.ts, bytes(fr.data), fr.orig_len
            else:
                ts, data, orig = T0 + i * STEP_NS, bytes(fr), len(fr)
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), orig))
            f.write(data)


def read_pcap(path):
    """Packets of a classic pcap file (us or ns), [] when missing/empty."""
    try:
        b = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    if len(b) < 24:
        return []
    magic = struct.unpack_from("<I", b)[0]
    end, scale = {0xA1B2C3D4: ("<", 1000), 0xA1B23C4D: ("<", 1),
                  0xD4C3B2A1: (">", 1000), 0x4D3CB2A1: (">", 1)}[magic]
    off, out = 24, []
    while len(b) - off >= 16:
        sec, frac, cap, orig = struct.unpack_from(end + "IIII", b, off)
        if len(b) - off - 16 < cap:
            break
        out.append(Packet(sec * 10**9 + frac * scale, b[off + 16:off + 16 + cap], orig))
        off += 16 + cap
    return out


# ------------------------------------------------------------ the namespaces

_SENDER = r"""
import socket, struct, sys, time, json
dev, path, plan, gap = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
b = open(path, 'rb').read()
end = '<' if struct.unpack_from('<I', b)[0] in (0xA1B2C3D4, 0xA1B23C4D) else '>'
frames, off = [], 24
while off + 16 <= len(b):
    _, _, cap, _ = struct.unpack_from(end + 'IIII', b, off)
    frames.append(b[off + 16:off + 16 + cap]); off += 16 + cap
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
s.bind((dev, 0))
i = 0
for n in plan:
    grp = frames[i:i + n]; i += n
    for fr in grp:
        s.send(fr)
    t = time.perf_counter() + gap / 1000
    time.sleep(max(0.0, gap / 1000 - 0.0005))
    while time.perf_counter() < t:
        pass
"""


def _mac(b):
    return ":".join(f"{x:02x}" for x in b)


class ForwarderNS:
    """Sender, router and receiver namespaces (see the module docstring).

    Use as a context manager; :meth:`replay` may be called several times
    (the egress MTU can be changed in between with :meth:`set_mtu`)."""

    def __init__(self, fraglist=False, udp_gro=False, egress_mtu=1500,
                 flush_timeout_ns=1_000_000, gap_ms=6.0):
        tag = f"{random.getrandbits(24):06x}"
        base = f"pfwd-{os.getpid()}-{tag}"
        self.ns = {k: f"{base}-{k}" for k in "srd"}
        self.dev = {k: f"fw{tag}{k}" for k in ("s0", "r1", "r2", "d3")}
        self.fraglist = fraglist
        self.udp_gro = udp_gro
        self.egress_mtu = egress_mtu
        self.timeout = flush_timeout_ns
        self.gap_ms = gap_ms
        self.made = []
        self.tmp = Path(tempfile.mkdtemp(prefix="pfwd-"))
        self.procs = []

    # -- plumbing
    def _ip(self, ns, *args, check=True):
        return self._run("ip", "-n", self.ns[ns], *args, check=check)

    def _x(self, ns, *cmd, check=True):
        return self._run("ip", "netns", "exec", self.ns[ns], *cmd, check=check)

    @staticmethod
    def _run(*cmd, check=True):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if check and p.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip() or p.returncode}")
        return p

    def __enter__(self):
        try:
            self.setup()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc):
        self.teardown()

    def setup(self):
        ns, dev = self.ns, self.dev
        for k in "srd":
            self._run("ip", "netns", "add", ns[k])
            self.made.append(ns[k])
        self._ip("s", "link", "add", dev["s0"], "type", "veth", "peer", "name", dev["r1"],
                 "netns", ns["r"])
        self._ip("r", "link", "add", dev["r2"], "type", "veth", "peer", "name", dev["d3"],
                 "netns", ns["d"])
        for k in "sd":
            self._x(k, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1")
        for k in ("net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
                  "net.ipv4.icmp_ratelimit=0", "net.ipv4.icmp_msgs_per_sec=1000000",
                  "net.ipv4.icmp_msgs_burst=1000000", "net.ipv6.icmp.ratelimit=0",
                  "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
                  "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
                  "net.ipv6.conf.default.router_solicitations=0"):
            self._x("r", "sysctl", "-qw", k, check=False)
        self._ip("s", "link", "set", dev["s0"], "address", _mac(SRC_MAC), "mtu", "1500", "up")
        self._ip("r", "link", "set", dev["r1"], "address", _mac(DST_MAC), "mtu", "1500")
        self._ip("r", "link", "set", dev["r2"], "address", _mac(R2_MAC),
                 "mtu", str(self.egress_mtu))
        self._ip("d", "link", "set", dev["d3"], "address", _mac(D3_MAC),
                 "mtu", str(max(self.egress_mtu, 1500)))
        r1, r2 = dev["r1"], dev["r2"]
        feats = ["gro", "on"]
        if self.fraglist:
            feats += ["rx-gro-list", "on"]
        if self.udp_gro:
            feats += ["rx-udp-gro-forwarding", "on"]
        # "gro on" only enables the veth's NAPI when it changes the feature
        # set (veth_set_features): switch it off first
        self._x("r", "ethtool", "-K", r1, "gro", "off", check=False)
        self._x("r", "ethtool", "-K", r1, *feats)
        self._x("r", "ethtool", "-K", r2, "tso", "off", "gso", "off", "tx-udp-segmentation",
                "off", "tx-gso-list", "off", "tx", "off", check=False)
        self._x("d", "ethtool", "-K", dev["d3"], "gro", "off", check=False)
        # veth_xmit hands a frame to the peer's NAPI (and so to GRO) only when
        # the sending veth has no TSO (veth_skb_is_eligible_for_gro), unless
        # the peer has rx-gro-list / rx-udp-gro-forwarding and the frame
        # comes from a socket: TSO off on the sender's veth
        self._x("s", "ethtool", "-K", dev["s0"], "tso", "off", "gso", "off")
        self._x("r", "sh", "-c",
                f"echo {self.timeout} > /sys/class/net/{r1}/gro_flush_timeout && "
                f"echo 1 > /sys/class/net/{r1}/napi_defer_hard_irqs")
        for k, d in (("r", r1), ("r", r2), ("d", dev["d3"])):
            self._ip(k, "link", "set", d, "up")
        for d, a4, a6 in ((r1, "10.99.1.1/24", "fd99:1::1/64"), (r2, "10.99.2.1/24", "fd99:2::1/64")):
            self._ip("r", "addr", "add", a4, "dev", d)
            self._ip("r", "-6", "addr", "add", a6, "dev", d, "nodad")
        for d, a4, a6, mac in ((r1, "10.88.0.1", "fd88::1", SRC_MAC),
                               (r2, "10.88.0.2", "fd88::2", D3_MAC)):
            self._ip("r", "route", "add", a4 + "/32", "dev", d)
            self._ip("r", "-6", "route", "add", a6 + "/128", "dev", d)
            self._ip("r", "neigh", "replace", a4, "lladdr", _mac(mac), "dev", d, "nud", "permanent")
            self._ip("r", "-6", "neigh", "replace", a6, "lladdr", _mac(mac), "dev", d,
                     "nud", "permanent")
        self._x("r", "sysctl", "-qw", f"net.ipv4.conf.{r1}.rp_filter=0", check=False)

    def features(self, ns, d):
        return self._x(ns, "ethtool", "-k", self.dev[d]).stdout

    def set_mtu(self, mtu):
        self._ip("r", "link", "set", self.dev["r2"], "mtu", str(mtu))
        self.egress_mtu = mtu

    def teardown(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
        self.procs = []
        for n in reversed(self.made):
            self._run("ip", "netns", "del", n, check=False)
        self.made = []
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- one replay
    def _tcpdump(self, ns, dev, path, filt):
        cmd = ["ip", "netns", "exec", self.ns[ns], "tcpdump", "-i", self.dev[dev], "-Q", "in",
               "-s", "0", "-U", "--immediate-mode", "-w", str(path), "-nn"] + filt.split()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def replay(self, frames, plan, name="run"):
        """Send ``frames`` (bytes) in groups ``plan`` (list of ints);
        returns dict ``egress``, ``ingress`` (router's GRO view), ``back``
        (ICMP errors at the sender): lists of Packets."""
        src = self.tmp / f"{name}-in.pcap"
        write_pcap(src, frames)
        files = {k: self.tmp / f"{name}-{k}.pcap" for k in ("egress", "ingress", "back")}
        caps = [self._tcpdump("d", "d3", files["egress"], "not ether multicast and (ip or ip6)"),
                self._tcpdump("r", "r1", files["ingress"], "not ether multicast and (ip or ip6)"),
                self._tcpdump("s", "s0", files["back"], "icmp or icmp6")]
        deadline = time.time() + 10
        for p in caps:
            buf = b""
            while b"listening" not in buf and time.time() < deadline:
                c = p.stderr.read1(256) if hasattr(p.stderr, "read1") else p.stderr.read(1)
                if not c:
                    break
                buf += c
        time.sleep(0.2)
        self._x("s", sys.executable, "-c", _SENDER, self.dev["s0"], str(src),
                json.dumps(list(plan)), str(self.gap_ms))
        time.sleep(0.5)
        for p in caps:
            p.send_signal(signal.SIGINT)
        for p in caps:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
            self.procs.remove(p)
        return {k: read_pcap(f) for k, f in files.items()}


# ------------------------------------------------------------ pcapgro's side

def plan_for(n, group=8):
    out = []
    while n > 0:
        out.append(min(group, n))
        n -= group
    return out


def timed(frames, plan, gap_ms=6.0):
    """Packets with the timestamps pcapgro is given for a replay."""
    out, t, i = [], T0, 0
    for n in plan:
        for fr in frames[i:i + n]:
            out.append(Packet(t, bytes(fr), len(fr)))
            t += STEP_NS
        i += n
        t += int(gap_ms * 1e6)
    return out


def predict(frames, plan, fraglist=False, udp_gro=False, egress_mtu=None, gap_ms=6.0,
            **fwd_kw):
    """pcapgro's Forwarder on the replay: (packets out, stats dict)."""
    from pcapgro.forward import Forwarder
    from pcapgro.gro import GROConfig
    cfg = GROConfig(hash="none", fraglist=fraglist, udp="gro" if udp_gro else "off")
    fw = Forwarder(cfg, egress_mtu=egress_mtu, egress_macs=(R2_MAC, D3_MAC), **fwd_kw)
    out = [e for e in fw.process(timed(frames, plan, gap_ms)) if type(e) is Packet]
    return out, fw.stats.to_dict()


def icmp_counts(back):
    """(ICMP frag needed, ICMPv6 packet too big, ICMP time exceeded) in ``back``."""
    fn = ptb = te = 0
    for p in back:
        d = p.data
        if d[12:14] == b"\x08\x00" and d[23] == 1:
            l4 = 14 + (d[14] & 15) * 4
            if d[l4] == 3 and d[l4 + 1] == 4:
                fn += 1
            elif d[l4] == 11:
                te += 1
        elif d[12:14] == b"\x86\xdd" and d[20] == 58:
            if d[54] == 2:
                ptb += 1
            elif d[54] == 3:
                te += 1
    return fn, ptb, te


def compare(kernel, ours):
    """List of differences (str) between two packet lists (bytes only)."""
    diffs = []
    if len(kernel) != len(ours):
        diffs.append(f"{len(kernel)} packets from the kernel, {len(ours)} from pcapgro")
    for i, (a, b) in enumerate(zip(kernel, ours)):
        if a.data != b.data:
            at = next(j for j in range(min(len(a.data), len(b.data)) + 1)
                      if j >= min(len(a.data), len(b.data)) or a.data[j] != b.data[j])
            diffs.append(f"#{i}: first byte difference at {at} (len {len(a.data)} vs "
                         f"{len(b.data)}): kernel {a.data[at:at + 8].hex()} "
                         f"pcapgro {b.data[at:at + 8].hex()}")
            if len(diffs) > 8:
                break
    return diffs


def udp_frames(n_bursts=6, burst=8, payload=1000, ident=None, df=False, family=4,
               last_short=True):
    """Synthetic UDP bursts 10.88.0.1:4000 -> 10.88.0.2:5000 (or IPv6):
    ``ident`` None = incrementing IDs, else that fixed ID for all."""
    from pktbuild import eth, ipv4, ipv6, udp_datagram
    frames, k = [], 0
    for b in range(n_bursts):
        for j in range(burst):
            n = payload // 2 if (last_short and j == burst - 1) else payload
            pay = bytes([(b * 31 + j) & 0xFF]) * n
            if family == 4:
                u = udp_datagram("10.88.0.1", "10.88.0.2", 4000, 5000, pay)
                l3 = ipv4(u, "10.88.0.1", "10.88.0.2", proto=17, ttl=64,
                          ident=(0x1000 + k) if ident is None else ident, df=df)
                et = 0x0800
            else:
                u = udp_datagram("fd88::1", "fd88::2", 4000, 5000, pay)
                l3 = ipv6(u, "fd88::1", "fd88::2", nh=17, hlim=64)
                et = 0x86DD
            frames.append(eth(l3, et, src=SRC_MAC, dst=DST_MAC))
            k += 1
    return frames, [burst] * n_bursts


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture", nargs="?")
    ap.add_argument("--synthetic", choices=["udp-fixedid", "udp-incr", "udp-nodf-big"])
    ap.add_argument("--fraglist", action="store_true")
    ap.add_argument("--udp-gro", action="store_true")
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--show", type=int, default=0, help="print N egress packets")
    a = ap.parse_args(argv)
    why = requirements_missing()
    if why:
        print("cannot run:", why)
        return 2
    if a.synthetic:
        kw = {"udp-fixedid": dict(ident=0, df=True), "udp-incr": {},
              "udp-nodf-big": dict(payload=1400, df=False)}[a.synthetic]
        frames, plan = udp_frames(**kw)
    else:
        frames = [p.data for p in read_pcap(a.capture)]
        plan = plan_for(len(frames), a.group)
    with ForwarderNS(fraglist=a.fraglist, udp_gro=a.udp_gro, egress_mtu=a.mtu) as fns:
        got = fns.replay(frames, plan)
    ours, st = predict(frames, plan, a.fraglist, a.udp_gro,
                       None if a.mtu >= 1500 else a.mtu)
    kin = got["ingress"]
    print(f"sent {len(frames)}; router GRO saw {len(kin)} packets; egress {len(got['egress'])};"
          f" pcapgro {len(ours)}; back: frag-needed/ptb/time-exceeded {icmp_counts(got['back'])}")
    print("pcapgro forward stats:", json.dumps(st["forward"]))
    print("pcapgro gro aggregates:", st["gro"]["aggregates"], "kernel multi-seg:",
          sum(1 for p in kin if len(p.data) > 1514))
    for p in got["egress"][:a.show]:
        d = p.data
        if d[12:14] == b"\x08\x00":
            print(f"  v4 len {len(d)} id {struct.unpack_from('!H', d, 18)[0]:#06x} "
                  f"frag {struct.unpack_from('!H', d, 20)[0]:#06x} ttl {d[22]}")
        else:
            print(f"  v6 len {len(d)} hlim {d[21]}")
    diffs = compare(got["egress"], ours)
    print("MATCH" if not diffs else "DIFF:\n  " + "\n  ".join(diffs))
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
