"""The running kernel as the GRO oracle: replay frames into a veth pair,
capture what the kernel's GRO made of them, compare with pcapgro.

How it works (Linux 6.18, HZ=250, root):

* Two network namespaces ``pgro-<pid>-<rand>-a`` (sender) and ``-b``
  (receiver) joined by a veth pair (``pgro<rand>a`` / ``pgro<rand>b``),
  MTU 65535 on both ends (the selftest's large frames), IPv6 disabled in
  both namespaces (no ND/MLD noise).  The receiving veth gets
  ``ethtool -K DEV gro on tso off gso off`` (as
  ``shared/tools/capture-veth.sh`` does: on 6.18 ``gro on`` is what puts a
  veth into NAPI mode, so that its receive path runs GRO at all), plus
  optionally ``rx-gro-list`` / ``rx-udp-gro-forwarding``, and
  ``gro_flush_timeout`` / ``napi_defer_hard_irqs`` in its sysfs (written
  inside its namespace).  The receiving veth's MAC is set to
  ``pktbuild.MAC_DST``.
* ONE ``tcpdump --immediate-mode -U -Q in`` on the receiving veth and ONE
  sender (a Python AF_PACKET socket in the sender namespace, fed frames
  over a pipe) serve many cases.
* Every run of a case ("instance") gets a unique 32-bit tag written into
  bytes 1..4 of the source MAC address (``02:TT:TT:TT:TT:xx``; the last
  byte is kept from the case's frame).  The MAC is part of GRO's same-flow
  compare, so instances never interact, and every captured frame (VLAN,
  ARP, fragments, ...) can be attributed to its instance.  Instances are
  also separated by a sleep longer than the flush timeout.
* After each batch the sender emits a marker frame (EtherType 0x88B5, tag
  0xFFFFFFFF); the harness reads the capture file incrementally until the
  marker arrives.
* Timing discipline of the sender (all three found necessary on 2 slow
  cores): it reads a whole batch from its pipe before sending any of it (a
  sender blocked on the pipe mid-case lets a timer poll find no work, which
  completes every aggregate); it starts each instance just after a jiffy
  tick (it waits for CLOCK_MONOTONIC_COARSE to advance), so a case of a
  few hundred frames does not straddle a jiffy; and it paces frames at
  least 8 us apart, so that fewer than 64 frames (the veth's NAPI budget)
  reach one poll (a poll that uses its whole budget completes every
  aggregate, HZ < 1000) -- without it 70-datagram UDP cases came out
  [64, 1, 5] instead of [64, 6].  The runs of a case are spread round
  robin over the batch, and a difference from pcapgro is confirmed by two
  more rounds.
* UDP: the receiving namespace has no UDP socket, no address and IP
  forwarding off; GRO still applies (it runs before routing), standard with
  ``rx-udp-gro-forwarding on`` and fraglist with ``rx-gro-list on``
  (:data:`UDP_ORACLE`; pcapgro ``udp='gro'`` / ``fraglist=True``).

Why a flush timeout: a frame sent from a process through a veth is
received in a NAPI poll that runs as soon as the send returns (softirq on
bottom-half enable), so with the default ``gro_flush_timeout`` 0 every
frame is completed in its own poll and nothing merges (checked: 10
segments -> 10 frames).  With ``gro_flush_timeout=200000`` and
``napi_defer_hard_irqs=1`` (the values of the kernel's own
``tools/testing/selftests/net/setup_veth.sh``) the veth does not re-arm
its notification after a poll with work, so the rest of a burst waits for
the 200 us timer and is taken in one poll; the timer poll that finds no
work completes everything.  A poll end in a later jiffy than an
aggregate's first segment completes it early ("old only" flush), so a case
that straddles a 4 ms jiffy boundary can come out split: each case is run
(at least) twice and a kernel result that changes between runs is retried,
never reported as a mismatch.

pcapgro gets the same frames (tag zeroed) with synthetic timestamps 10 us
apart (one NAPI poll; a ``GAP`` in a case is 5 ms, i.e. a poll end) and
``GROConfig(hash='none', csum='kernel')``: injected frames carry no flow
hash (bucket 0 for every flow), and with ``csum='kernel'`` the aggregate's
TCP checksum field holds the pseudo-header seed as the kernel leaves it, so
the frames must be byte-identical to the kernel's.

Findings on this kernel (6.18.44, HZ=250, no CONFIG_VLAN_8021Q), all
recorded under tests/regress/:

1. CWR (q1-*): a CWR segment never joins a held aggregate and nothing joins
   it: runs of CWR (or CWR|ECE) segments come out one frame each; a CWR
   segment followed by plain ones gives [CWR alone] + [the plain ones
   merged].  (6.18 mainline; not the 2026 AccECN rule.)
2. Fixed IPv4 ID with DF clear (q2-*) merges (IDs 8,8,8,8 DF=0 -> one
   aggregate, ID 8); random IDs never merge.
3. VLAN (q3-*): 802.1Q, 802.1AD, QinQ and 0x9100 tagged frames never
   merge (no VLAN GRO handler without the 8021q module).  pcapgro merges
   0x8100/0x88a8 tags: the one known mismatch.
4. Ethernet padding (q4-*): a short final segment padded to 60 bytes is
   not merged (IP length != bytes present) but completes the held
   aggregate first ([200, 4-padded]); short padded segments never merge
   with each other; a trailer on a full-size segment: that segment stands
   alone, the aggregate before it is completed.
5. Pure ACK (q5-*): completes the held aggregate of its flow (same or new
   ack number) and is itself passed; a pure ACK of another flow does not
   disturb it.
Destination MAC: GRO runs before the PACKET_OTHERHOST drop and tcpdump
sees the frames either way (mac-otherhost merges like the rest).
Checksums: the veth does not mark injected frames CHECKSUM_UNNECESSARY;
the kernel verifies TCP checksums (bad ones are passed, never merged).

Split (GSO, ``KernelOracle(gso=True)``): the sender namespace's veth has
``tx off tso off gso off tx-udp-segmentation off``, the receiver ``gro
off``; a super-frame is sent through a second AF_PACKET socket with
PACKET_VNET_HDR (a struct virtio_net_hdr in front: NEEDS_CSUM, csum_start
/ csum_offset at the TCP/UDP checksum field holding the pseudo-header seed,
gso_type TCPV4/TCPV6 (+ECN)/UDP_L4, gso_size) and the kernel's software
GSO cuts it on transmit with full checksums.  Compared with
``GSOSplitter(GSOConfig(mss=gso_size | gso_size=gso_size)).split``
byte for byte: identical for every case tried (TCP v4/v6 with options,
FIN/PSH/CWR/ECE/URG, ECN bit, sizes not a multiple of the MSS, IPv4 IDs
base+k incl. wrap, IP options, IPv6 dstopts; UDP up to 128 datagrams).
The kernel refuses two injected forms (:func:`kernel_refuses`): UDP_L4
with more than 128 datagrams (EINVAL), and TCP with payload <= gso_size <
TCP options + payload (virtio_net_hdr_to_skb counts 20 header bytes, so the
frame is marked GSO, then dropped on transmit); neither is built by a TCP
or UDP stack.  Not reachable through virtio_net_hdr: fixed-ID TCP GSO
(SKB_GSO_TCP_FIXEDID), fraglist GSO, tunnels.

Command line (as root)::

    python tests/kernel_oracle.py smoke              # 10 segments -> 1 aggregate
    python tests/kernel_oracle.py explore -n 2000    # generated cases, print mismatches
    python tests/kernel_oracle.py questions          # the issue-7 questions
    python tests/kernel_oracle.py record-regress     # (re)write tests/regress/
    python tests/kernel_oracle.py udp [--mode std|flist]      # named UDP cases
    python tests/kernel_oracle.py udp-explore -n 1000
    python tests/kernel_oracle.py udp-record-regress # tests/regress/udp-{std,flist}-*
    python tests/kernel_oracle.py gso                # named split cases
    python tests/kernel_oracle.py gso-explore -n 2000
    python tests/kernel_oracle.py gso-record-regress # tests/regress/gso-*
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (str(HERE), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from pktbuild import MAC_DST, parse  # noqa: E402
from pcapgro.record import Packet  # noqa: E402

REGRESS = HERE / "regress"

GAP = "GAP"                      # a poll end inside a case (sleep)
GAP_US_IN_CASE = 5000
MARKER_TYPE = 0x88B5
MARKER_TAG = 0xFFFFFFFF
TICK_SYNC = 0xFFFFFFFE           # sender: wait for the next jiffy tick
T0 = 1_000_000_000_000           # pcapgro-side case start: 1000 s (jiffy aligned)
STEP = 10_000                    # pcapgro-side spacing, ns


# ------------------------------------------------------------ requirements

def requirements_missing(need_kernel=True):
    """None when the kernel harness can run here, else the reason why not."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, AF_PACKET)"
    for tool in ("ip", "tcpdump", "ethtool"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH"
    rel = os.uname().release
    if need_kernel and not rel.startswith("6.18."):
        return f"kernel {rel} is not 6.18.* (the oracle's expectations are for 6.18)"
    try:
        subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        return f"'ip netns' unusable: {e}"
    return None


# ------------------------------------------------------------ pcap files

def write_pcap(path, frames, ts_list=None):
    """Classic pcap (microseconds, Ethernet) of ``frames`` (bytes or Packet)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        for i, fr in enumerate(frames):
            if isinstance(fr, Packet):
                ts, data, orig = fr.ts, bytes(fr.data), fr.orig_len
            else:
                ts = ts_list[i] if ts_list else T0 + i * STEP
                data, orig = bytes(fr), len(fr)
            us = ts // 1000
            f.write(struct.pack("<IIII", us // 1_000_000, us % 1_000_000, len(data), orig))
            f.write(data)


def read_pcap(path):
    """Packets of a classic pcap file (µs or ns)."""
    data = Path(path).read_bytes()
    rd = _PcapTail()
    return rd.feed(data)


class _PcapTail:
    """Incremental classic-pcap parser (tolerates a partial last record)."""

    def __init__(self):
        self.buf = b""
        self.hdr = None
        self.scale = 1000

    def feed(self, chunk):
        self.buf += chunk
        out = []
        if self.hdr is None:
            if len(self.buf) < 24:
                return out
            magic = struct.unpack_from("<I", self.buf)[0]
            if magic == 0xA1B2C3D4:
                self.end = "<"
            elif magic == 0xA1B23C4D:
                self.end, self.scale = "<", 1
            elif magic == 0xD4C3B2A1:
                self.end = ">"
            elif magic == 0x4D3CB2A1:
                self.end, self.scale = ">", 1
            else:
                raise ValueError(f"not a classic pcap (magic {magic:#x})")
            self.hdr = self.buf[:24]
            self.buf = self.buf[24:]
        off = 0
        b = self.buf
        fmt = self.end + "IIII"
        while len(b) - off >= 16:
            sec, frac, cap, orig = struct.unpack_from(fmt, b, off)
            if len(b) - off - 16 < cap:
                break
            d = b[off + 16:off + 16 + cap]
            out.append(Packet((sec * 1_000_000_000) + frac * self.scale, d, orig))
            off += 16 + cap
        self.buf = b[off:]
        return out


# ------------------------------------------------------------ tags

class VnetFrame:
    """A frame sent through the PACKET_VNET_HDR socket: ``vnet`` (the
    10-byte struct virtio_net_hdr, host byte order) + ``frame``."""

    __slots__ = ("vnet", "frame")

    def __init__(self, vnet, frame):
        self.vnet, self.frame = bytes(vnet), bytes(frame)

    def __eq__(self, other):
        return isinstance(other, VnetFrame) and (self.vnet, self.frame) == (other.vnet, other.frame)

    def __hash__(self):
        return hash((self.vnet, self.frame))


def tag_frame(frame, tag):
    """Write the instance tag into source-MAC bytes 1..4 (byte 0 = 0x02)."""
    if isinstance(frame, VnetFrame):
        return VnetFrame(frame.vnet, tag_frame(frame.frame, tag))
    f = bytearray(frame)
    f[6] = 0x02
    f[7:11] = struct.pack("!I", tag)
    return bytes(f)


def frame_tag(frame):
    if len(frame) < 14 or frame[6] != 0x02:
        return None
    return struct.unpack_from("!I", frame, 7)[0]


def normalize(frame):
    """The frame with the tag bytes zeroed (what pcapgro is given/compared)."""
    return tag_frame(frame, 0)


def marker_frame(n):
    f = bytes(MAC_DST) + tag_frame(b"\0" * 12, MARKER_TAG)[6:12] + \
        struct.pack("!HQ", MARKER_TYPE, n)
    return f + b"\0" * (60 - len(f))


# ------------------------------------------------------------ the oracle

_SENDER = r"""
import gc, socket, struct, sys, time
gc.disable()
dev = sys.argv[1]
pace = float(sys.argv[2]) / 1e6   # s between two sends at least
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
s.bind((dev, 0))
# a second socket with PACKET_VNET_HDR (SOL_PACKET 263, option 15): its
# frames start with a struct virtio_net_hdr (GSO super-frames)
v = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
v.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
v.setsockopt(263, 15, 1)
v.bind((dev, 0))
inp = sys.stdin.buffer
def rd(n):
    b = inp.read(n)
    if len(b) < n:
        sys.exit(0)
    return b
def wait(us):
    end = time.perf_counter() + us / 1e6
    time.sleep(max(0.0, us / 1e6 - 0.0002))
    while time.perf_counter() < end:
        pass
def tick():
    # wait for the next tick: CLOCK_MONOTONIC_COARSE advances with
    # jiffies, so what follows starts early in a jiffy
    c0 = time.clock_gettime(6)   # CLOCK_MONOTONIC_COARSE
    while time.clock_gettime(6) == c0:
        time.sleep(0.00005)
# A batch is read whole (up to the EXEC message) before anything is sent:
# a sender waiting on its pipe in the middle of a case would end the NAPI
# poll sequence there (a timer poll without work completes every aggregate).
batch = []
nxt = 0.0
while True:
    (ln,) = struct.unpack("!I", rd(4))
    if ln == 0:
        (us,) = struct.unpack("!I", rd(4))
        if us == 0xFFFFFFFF:
            sys.exit(0)
        if us != 0xFFFFFFFD:
            batch.append((None, us))
            continue
        for sock, x in batch:
            if sock is None:
                if x == 0xFFFFFFFE:
                    tick()
                else:
                    wait(x)
                continue
            now = time.perf_counter()
            while now < nxt:
                now = time.perf_counter()
            nxt = now + pace
            try:
                sock.send(x)
            except OSError as e:
                sys.stderr.write(f"send {len(x)} bytes{' (vnet)' if sock is v else ''}: {e}\n")
                sys.stderr.flush()
        batch = []
        continue
    sock = s
    if ln & 0x80000000:
        ln &= 0x7FFFFFFF
        sock = v
    batch.append((sock, rd(ln)))
"""


def _run(*cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and p.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip() or p.returncode}")
    return p


def remove_stale_namespaces():
    """Delete namespaces ``pgro-<pid>-<rand>-a|b`` whose creating process is
    gone (a harness killed before its cleanup could run).  Only names of
    this harness' own pattern are touched."""
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) != 4 or parts[0] != "pgro" or parts[3] not in ("a", "b") \
                or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid() or os.path.exists(f"/proc/{pid}"):
            continue
        # processes left in it (a tcpdump whose harness was killed)
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True,
                              timeout=10).stdout.split()
        for x in pids:
            try:
                os.kill(int(x), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


class KernelOracle:
    """One namespace pair, one capture, one sender; many cases.

    ``KernelOracle(gro_flush_timeout=200000, napi_defer_hard_irqs=1,
    gro_list=False, udp_gro_fwd=False)``; use as a context manager or call
    :meth:`start` / :meth:`close`.  :meth:`run` sends instances and returns
    the captured frames per instance.
    """

    def __init__(self, gro_flush_timeout=200_000, napi_defer_hard_irqs=1,
                 gro_list=False, udp_gro_fwd=False, workdir=None, gso=False,
                 tick_sync=True, pace_us=8):
        rnd = "%06x" % random.getrandbits(24)
        self.ns_a = f"pgro-{os.getpid()}-{rnd}-a"
        self.ns_b = f"pgro-{os.getpid()}-{rnd}-b"
        self.dev_a = f"pgro{rnd}a"
        self.dev_b = f"pgro{rnd}b"
        self.timeout_ns = gro_flush_timeout
        self.defer = napi_defer_hard_irqs
        self.gro_list = gro_list
        self.udp_gro_fwd = udp_gro_fwd
        # gso=True: the split oracle: no GRO on the receiver (the segments
        # arrive as the sender's software GSO made them), no TSO/GSO/USO/
        # checksum offload on the sender
        self.gso = gso
        # start every instance right after a jiffy tick (see TICK_SYNC)
        self.tick_sync = tick_sync
        # at least this long between two frames: fewer than 64 frames (the
        # veth's NAPI budget) reach one poll (a poll that uses its whole
        # budget completes every aggregate: HZ < 1000)
        self.pace_us = pace_us
        # longer than the flush timeout plus its timer poll, with margin
        self.gap_us = max(2000, 3 * gro_flush_timeout // 1000 + 1000)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else None
        self._made_ns = []
        self.tcpdump = None
        self.sender = None
        self._tail = None
        self._fh = None
        self._next_tag = 1
        self._marker = 0
        self.pending = {}          # tag -> list of captured Packets
        self.stray = 0             # captured frames without a known tag
        self.started = False

    # ---- lifecycle

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        reason = requirements_missing(need_kernel=False)
        if reason:
            raise RuntimeError(reason)
        atexit.register(self.close)
        if self.workdir is None:
            import tempfile
            self.workdir = Path(tempfile.mkdtemp(prefix="pgro-oracle-"))
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        self.started = True
        return self

    def _nsx(self, ns, *cmd, check=True):
        return _run("ip", "netns", "exec", ns, *cmd, check=check)

    def _setup(self):
        remove_stale_namespaces()
        a, b, na, nb = self.dev_a, self.dev_b, self.ns_a, self.ns_b
        for ns in (na, nb):
            _run("ip", "netns", "add", ns)
            self._made_ns.append(ns)
        _run("ip", "link", "add", a, "netns", na, "type", "veth", "peer", "name", b, "netns", nb)
        for ns in (na, nb):
            self._nsx(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                      "net.ipv6.conf.default.disable_ipv6=1", check=False)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", nb, "link", "set", b, "address", MAC_DST.hex(":"))
        _run("ip", "-n", na, "link", "set", a, "mtu", "65535", "up")
        _run("ip", "-n", nb, "link", "set", b, "mtu", "65535", "up")
        self._nsx(na, "ethtool", "-K", a, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
                  check=False)
        if self.gso:
            self._nsx(na, "ethtool", "-K", a, "tx-udp-segmentation", "off")
            self._nsx(nb, "ethtool", "-K", b, "gro", "off", "tso", "off", "gso", "off",
                      "rx-gro-list", "off", "rx-udp-gro-forwarding", "off")
        else:
            self._nsx(nb, "ethtool", "-K", b, "gro", "on", "tso", "off", "gso", "off",
                      "rx-gro-list", "on" if self.gro_list else "off",
                      "rx-udp-gro-forwarding", "on" if self.udp_gro_fwd else "off")
        self._nsx(nb, "sh", "-c",
                  f"echo {int(self.timeout_ns)} > /sys/class/net/{b}/gro_flush_timeout && "
                  f"echo {int(self.defer)} > /sys/class/net/{b}/napi_defer_hard_irqs")
        self.cap_path = self.workdir / "rx.pcap"
        self.tcpdump = subprocess.Popen(
            ["ip", "netns", "exec", nb, "tcpdump", "--immediate-mode", "-U", "-Q", "in",
             "-s", "0", "-B", "32768", "-i", b, "-w", str(self.cap_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        self.sender = subprocess.Popen(
            ["ip", "netns", "exec", na, sys.executable, "-u", "-c", _SENDER, a, str(self.pace_us)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        deadline = time.monotonic() + 15
        while not self.cap_path.exists() or self.cap_path.stat().st_size < 24:
            if time.monotonic() > deadline or self.tcpdump.poll() is not None:
                raise RuntimeError("tcpdump did not start: " + self._tcpdump_err())
            time.sleep(0.02)
        self._fh = open(self.cap_path, "rb")
        self._tail = _PcapTail()
        # wait until the capture sees traffic (tcpdump may open the file
        # before its socket is attached)
        for _ in range(100):
            if self._sync(timeout=0.2, quiet=True):
                break
        else:
            raise RuntimeError("capture sees no marker frames: " + self._tcpdump_err())

    def _tcpdump_err(self):
        if self.tcpdump and self.tcpdump.poll() is not None and self.tcpdump.stderr:
            return self.tcpdump.stderr.read().decode(errors="replace")
        return ""

    def close(self):
        """Stop tcpdump and the sender, delete the namespaces (and with
        them the veth pair).  Idempotent."""
        for proc in (self.sender, self.tcpdump):
            if proc is None:
                continue
            try:
                if proc is self.sender and proc.stdin:
                    try:
                        proc.stdin.write(struct.pack("!II", 0, 0xFFFFFFFF))
                        proc.stdin.close()
                    except OSError:
                        pass
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT if proc is self.tcpdump else signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
            except Exception:
                pass
            # the process group it leads (start_new_session): anything it
            # left behind
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass
        self.sender = self.tcpdump = None
        if self._fh:
            self._fh.close()
            self._fh = None
        while self._made_ns:
            ns = self._made_ns.pop()
            try:
                subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
            except (OSError, subprocess.SubprocessError):
                pass
        if self._own_workdir and self.workdir and self.workdir.exists():
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.started = False

    # ---- sending and capturing

    def _write(self, chunks):
        try:
            # EXEC (0, 0xFFFFFFFD): the sender runs what it has read
            self.sender.stdin.write(b"".join(chunks) + struct.pack("!II", 0, 0xFFFFFFFD))
            self.sender.stdin.flush()
        except BrokenPipeError:
            try:
                err = self.sender.stderr.read().decode(errors="replace")
            except Exception:
                err = ""
            raise RuntimeError("sender died: " + err) from None

    @staticmethod
    def _enc_frame(fr):
        if isinstance(fr, VnetFrame):
            b = fr.vnet + bytes(fr.frame)
            return struct.pack("!I", 0x80000000 | len(b)) + b
        return struct.pack("!I", len(fr)) + bytes(fr)

    @staticmethod
    def _enc_gap(us):
        return struct.pack("!II", 0, us)

    def _sync(self, timeout=60.0, quiet=False):
        """Send a marker and read the capture until it shows up."""
        self._marker += 1
        want = self._marker
        self._write([self._enc_gap(self.gap_us), self._enc_frame(marker_frame(want))])
        deadline = time.monotonic() + timeout
        while True:
            for p in self._tail.feed(self._fh.read()):
                d = p.data
                tag = frame_tag(d)
                if tag == MARKER_TAG and len(d) >= 22 and struct.unpack_from("!H", d, 12)[0] == MARKER_TYPE:
                    if struct.unpack_from("!Q", d, 14)[0] == want:
                        return True
                    continue
                if tag is not None and tag in self.pending:
                    self.pending[tag].append(p)
                else:
                    self.stray += 1
            if time.monotonic() > deadline:
                if quiet:
                    return False
                raise RuntimeError("marker frame not captured: " + self._tcpdump_err())
            if self.sender.poll() is not None:
                raise RuntimeError("sender died: " + self.sender.stderr.read().decode(errors="replace"))
            time.sleep(0.001)

    def run(self, cases, batch=100):
        """Send every case once; returns, per case, (tagged input frames,
        captured frames).  A case is a list of frames (bytes) and ``GAP``."""
        results = []
        for i in range(0, len(cases), batch):
            chunk = cases[i:i + batch]
            tags, msgs = [], []
            for case in chunk:
                tag = self._next_tag
                self._next_tag += 1
                if self._next_tag >= MARKER_TAG:
                    self._next_tag = 1
                self.pending[tag] = []
                tags.append(tag)
                if self.tick_sync:
                    msgs.append(self._enc_gap(TICK_SYNC))
                for fr in case:
                    if fr is GAP or fr == GAP:
                        msgs.append(self._enc_gap(GAP_US_IN_CASE))
                    else:
                        msgs.append(self._enc_frame(tag_frame(fr, tag)))
                msgs.append(self._enc_gap(self.gap_us))
            self._write(msgs)
            self._sync()
            for tag, case in zip(tags, chunk):
                results.append(([fr if fr is GAP else tag_frame(fr, tag) for fr in case],
                                self.pending.pop(tag)))
        return results


# ------------------------------------------------------------ pcapgro side

def case_packets(case):
    """Normalized input Packets of a case with synthetic timestamps."""
    out, t = [], T0
    for fr in case:
        if fr is GAP or fr == GAP:
            t += GAP_US_IN_CASE * 1000
            continue
        fr = normalize(fr)
        out.append(Packet(t, fr, len(fr)))
        t += STEP
    return out


def pcapgro_merge(case, **cfg):
    from pcapgro.gro import GROConfig, GROEngine
    # this kernel is built without CONFIG_VLAN_8021Q: no VLAN GRO handler
    conf = dict(hash="none", csum="kernel", vlan_gro=False)
    conf.update(cfg)
    eng = GROEngine(GROConfig(**conf))
    return [bytes(ev.data) for ev in eng.process(case_packets(case)) if type(ev) is Packet]


# ------------------------------------------------------------ comparison

def describe(frame):
    """One line per frame: L3/L4 fields that matter for GRO."""
    try:
        p = parse(Packet(0, frame, len(frame)))
    except Exception:
        return f"len={len(frame)} (unparsed)"
    if p.family is None:
        return f"len={len(frame)} ethertype={p.ethertype:#06x} vlans={p.vlans}"
    s = f"v{p.family} len={len(frame)}"
    if p.vlans:
        s += f" vlans={[(hex(t), c) for t, c in p.vlans]}"
    if p.family == 4:
        s += f" id={p.ipid} df={int(p.df)} ttl={p.ttl} tos={p.tos:#x} tot={p.tot_len}"
    else:
        s += f" hlim={p.hlim} tc={p.tc:#x} flow={p.flow} plen={p.plen}"
    if getattr(p, "proto", None) == 17:
        l4 = p.l3off + (p.ihl if p.family == 4 else 40 + sum(len(r) for _, r in p.exts))
        if len(frame) >= l4 + 8:
            sp, dp, ul, uc = struct.unpack_from("!HHHH", frame, l4)
            s += f" udp {sp}>{dp} ulen={ul} csum={uc:#06x}"
        return s
    if p.seq is not None:
        names = "FSRPAUEC"
        fl = "".join(n for i, n in enumerate(names) if p.flags & (1 << i))
        s += (f" {p.sport}>{p.dport} seq={p.seq} ack={p.ack} len={p.payload_len} [{fl}]"
              f" win={p.window} doff={p.doff} csum={p.csum:#06x}"
              f"{' ok' if p.tcp_csum_ok else (' seed' if p.csum == getattr(p, 'pseudo_seed', -1) else ' bad')}")
    return s


def compare(kernel, ours):
    """None when equal, else a text diff (normalized frames)."""
    k = [normalize(bytes(p.data if isinstance(p, Packet) else p)) for p in kernel]
    o = [normalize(bytes(p)) for p in ours]
    if k == o:
        return None
    lines = [f"kernel: {len(k)} frames, pcapgro: {len(o)} frames"]
    for i in range(max(len(k), len(o))):
        a = describe(k[i]) if i < len(k) else "-"
        b = describe(o[i]) if i < len(o) else "-"
        mark = "  " if i < len(k) and i < len(o) and k[i] == o[i] else "!!"
        lines.append(f"{mark} [{i}] kernel : {a}")
        if mark == "!!":
            lines.append(f"   [{i}] pcapgro: {b}")
            if i < len(k) and i < len(o) and len(k[i]) == len(o[i]):
                diff = [j for j in range(len(k[i])) if k[i][j] != o[i][j]]
                lines.append(f"   bytes differ at offsets {diff[:12]}")
    return "\n".join(lines)


def signature(frames):
    return tuple(normalize(bytes(p.data if isinstance(p, Packet) else p)) for p in frames)


@dataclass
class CaseResult:
    name: str
    case: list
    kernel: list = field(default_factory=list)     # agreed kernel frames (normalized bytes)
    ours: list = field(default_factory=list)
    status: str = "ok"                               # ok | mismatch | unstable
    runs: int = 0
    diff: str | None = None
    timing: bool = False        # kernel runs differed / one run matched: retried
    kernel_packets: list = field(default_factory=list)

    def input_lines(self):
        out = []
        for fr in self.case:
            out.append("GAP (5 ms)" if fr is GAP else describe(normalize(fr)))
        return out


def check_cases(oracle, cases, names=None, rounds=2, max_runs=6, **cfg):
    """Run every case ``rounds`` times; a kernel result counts once two runs
    agree (more runs, up to ``max_runs``, when they do not).  A stable kernel
    result that differs from pcapgro is re-run twice more; if any run then
    matches pcapgro the difference was timing (status 'ok' after retry)."""
    names = names or [f"case{i}" for i in range(len(cases))]
    res = [CaseResult(n, c) for n, c in zip(names, cases)]
    sigs = [[] for _ in cases]
    todo = list(range(len(cases)))
    runs = rounds
    while todo:
        # round robin: the runs of one case are far apart in time (a slow
        # moment of the machine does not hit them all)
        batch = [cases[i] for _ in range(runs) for i in todo]
        got = oracle.run(batch)
        for j, i in enumerate(todo):
            for r in range(runs):
                _inp, kp = got[r * len(todo) + j]
                sigs[i].append((signature(kp), kp))
                res[i].runs += 1
        nxt = []
        for i in todo:
            counts = {}
            for s, kp in sigs[i]:
                counts.setdefault(s, [0, kp])[0] += 1
            best = max(counts.items(), key=lambda kv: kv[1][0])
            if best[1][0] >= 2 and len(counts) == 1 or best[1][0] >= 2 and res[i].runs >= rounds + 2:
                res[i].kernel = list(best[0])
                res[i].kernel_packets = best[1][1]
            elif res[i].runs >= max_runs:
                res[i].status = "unstable"
                res[i].kernel = list(best[0])
                res[i].kernel_packets = best[1][1]
            else:
                nxt.append(i)
        todo, runs = nxt, 2
    # compare with pcapgro
    confirm = []
    for i, r in enumerate(res):
        r.ours = pcapgro_merge(r.case, **cfg)
        ours = signature(r.ours)
        match = [kp for s, kp in sigs[i] if s == ours]
        if r.status == "unstable":
            if match:
                r.status, r.timing = "ok", True
                r.kernel, r.kernel_packets = list(ours), match[0]
            continue
        r.diff = compare(r.kernel, r.ours)
        if r.diff:
            if match:
                # one run matched: timing.  The run that matched is what
                # a regress file records.
                r.status, r.diff, r.timing = "ok", None, True
                r.kernel, r.kernel_packets = list(ours), match[0]
            else:
                confirm.append(i)
    # a difference is confirmed by two more rounds of runs, a round apart
    for _round in range(2):
        if not confirm:
            break
        got = oracle.run([res[i].case for i in confirm])
        nxt = []
        for j, i in enumerate(confirm):
            res[i].runs += 1
            kp = got[j][1]
            if signature(kp) == signature(res[i].ours):
                res[i].status, res[i].diff, res[i].timing = "ok", None, True
                res[i].kernel, res[i].kernel_packets = list(signature(kp)), kp
            else:
                nxt.append(i)
        confirm = nxt
    for i in confirm:
        res[i].status = "mismatch"
    return res


def report(results, limit=50):
    bad = [r for r in results if r.status != "ok"]
    lines = []
    for r in bad[:limit]:
        lines.append(f"== {r.name}: {r.status} (kernel runs {r.runs})")
        lines.append("input:")
        lines += ["   " + x for x in r.input_lines()]
        lines.append(r.diff or compare(r.kernel, r.ours) or "(pcapgro matched one run)")
    return "\n".join(lines)


# ------------------------------------------------------------ regress files

def save_regress(name, case, kernel_frames, directory=REGRESS, config=None):
    """tests/regress/NAME/{input,kernel-output}.pcap (tags zeroed; the
    input's timestamps are pcapgro-side: 10 us apart, GAP = 5 ms), plus
    config.json when ``config`` is given: {"engine": "merge" | "split",
    "config": keyword arguments of GROConfig / GSOConfig}."""
    import json
    d = Path(directory) / name
    d.mkdir(parents=True, exist_ok=True)
    write_pcap(d / "input.pcap", case_packets(case))
    write_pcap(d / "kernel-output.pcap",
               [Packet(p.ts, normalize(bytes(p.data)), p.orig_len) for p in kernel_frames])
    if config is not None:
        (d / "config.json").write_text(json.dumps(config, sort_keys=True) + "\n")


def regress_config(d):
    """(engine, config kwargs) of a regress directory: ('merge', {}) when it
    has no config.json (the TCP set)."""
    import json
    f = Path(d) / "config.json"
    if not f.exists():
        return "merge", {}
    c = json.loads(f.read_text())
    return c.get("engine", "merge"), c.get("config", {})


def load_regress(d):
    """(input Packets, kernel output Packets) of one regress directory."""
    d = Path(d)
    return read_pcap(d / "input.pcap"), read_pcap(d / "kernel-output.pcap")


def regress_case(inp):
    """A case (list of frames and GAP) back from stored input Packets."""
    case, last = [], None
    for p in inp:
        if last is not None and p.ts - last > 1_000_000:
            case.append(GAP)
        case.append(bytes(p.data))
        last = p.ts
    return case


# ------------------------------------------------------------ cases

def _flow(family=4, **kw):
    from pktbuild import Flow
    return Flow(family, **kw)


def smoke_cases():
    f = _flow(4)
    return [("smoke-10x1448", [f.pkt(i * 1448, 1448).data for i in range(10)])]


PL = 100


def _fin(f, seq_off=2 * PL):
    from pktbuild import ACK, FIN
    return f.pkt(seq_off, 0, ACK | FIN).data


def _selftest_flags(f, psh=0, syn=0, rst=0, urg=0, cwr=0):
    from pktbuild import ACK, CWR, PSH, RST, SYN, URG
    plen = PL if (psh or cwr) else 0
    extra = (PSH if psh else 0) | (SYN if syn else 0) | (RST if rst else 0) \
        | (URG if urg else 0) | (CWR if cwr else 0)
    pk = []
    for i in range(5):
        if i == 2 or (i == 1 and cwr):
            pk.append(f.pkt(i * plen, plen, ACK | extra).data)
        else:
            pk.append(f.pkt(i * PL, PL).data)
    return pk + [_fin(f)]


def _ts_opts(ts, order):
    from pktbuild import nop, ts_option
    return [nop() + nop() + ts_option(ts), nop() + ts_option(ts) + nop(),
            ts_option(ts) + nop() + nop()][order]


def selftest_cases():
    """Every case of tools/testing/selftests/net/gro.c (data, ack, flags,
    tcp, ip, large), built as tests/test_gro_rules.py builds them."""
    from pktbuild import dstopts, frag6, nop, wscale_option
    out = []
    for fam in (4, 6):
        F = lambda **kw: _flow(fam, **kw)   # noqa: E731
        v = f"v{fam}"
        f = F(); out.append((f"selftest-data-same-{v}", [f.pkt(0, PL).data, f.pkt(PL, PL).data, _fin(f)]))
        f = F(); out.append((f"selftest-data-smaller-{v}", [f.pkt(0, PL).data, f.pkt(PL, PL // 2).data, _fin(f)]))
        f = F(); out.append((f"selftest-data-larger-{v}", [f.pkt(0, PL // 2).data, f.pkt(PL // 2, PL).data, _fin(f)]))
        f = F(); out.append((f"selftest-ack-{v}", [f.pkt(0, 0).data, f.pkt(0, 0).data,
                                                  f.pkt(0, 0, ack_off=1).data, _fin(f)]))
        for flag in ("psh", "syn", "rst", "urg", "cwr"):
            out.append((f"selftest-flags-{flag}-{v}", _selftest_flags(F(), **{flag: 1})))
        f = F(); out.append((f"selftest-tcp-csum-{v}", [f.pkt(0, PL).data, f.pkt(PL, PL, csum="bad").data, _fin(f)]))
        f = F(); out.append((f"selftest-tcp-seq-{v}", [f.pkt(0, PL).data, f.pkt(PL + 1, PL).data, _fin(f)]))
        f = F()
        out.append((f"selftest-tcp-ts-{v}", [
            f.pkt(0, PL, options=_ts_opts(0, 0)).data, f.pkt(PL, PL, options=_ts_opts(0, 0)).data,
            f.pkt(2 * PL, PL, options=_ts_opts(100, 0)).data, f.pkt(3 * PL, PL, options=_ts_opts(100, 1)).data,
            f.pkt(4 * PL, PL, options=_ts_opts(100, 2)).data, _fin(f)]))
        f = F()
        out.append((f"selftest-tcp-options-{v}", [
            f.pkt(0, PL, options=_ts_opts(0, 0)).data, f.pkt(PL, PL, options=_ts_opts(0, 0)).data,
            f.pkt(2 * PL, PL, options=nop() + wscale_option(0)).data, _fin(f)]))
        k = "tos" if fam == 4 else "tc"
        f = F(); out.append((f"selftest-ip-ecn-{v}", [f.pkt(0, PL).data, f.pkt(PL, PL, **{k: 0x02}).data, _fin(f)]))
        f = F(); out.append((f"selftest-ip-tos-{v}", [f.pkt(0, PL).data,
                                                      f.pkt(PL, PL, **{k: 1 if fam == 4 else 0xF0}).data, _fin(f)]))
        k = "ttl" if fam == 4 else "hlim"
        f = F(); out.append((f"selftest-ip-ttl-{v}", [f.pkt(0, PL).data, f.pkt(PL, PL, **{k: 7}).data, _fin(f)]))
        MSS = 4096 - 20 - 40
        MAXP = 65535 - 20 - 40
        offset = 20 if fam == 4 else 0
        for name, rem in (("fits", (MAXP + offset) % MSS), ("over", (MAXP + offset) % MSS + 1)):
            f = F()
            pk = [f.pkt(i * MSS, MSS).data for i in range(MAXP // MSS)]
            pk.append(f.pkt((MAXP // MSS) * MSS, rem).data)
            pk.append(f.pkt((MAXP // MSS + 1) * MSS, rem).data)
            out.append((f"selftest-large-{name}-{v}", pk + [_fin(f)]))
    f = _flow(4)
    ipopt = bytes((68, 8, 5, 0)) + b"\0" * 4
    out.append(("selftest-ip-options-v4", [f.pkt(0, PL).data, f.pkt(PL, PL, ip_options=ipopt).data,
                                           f.pkt(2 * PL, PL).data, _fin(f)]))
    f = _flow(4)
    out.append(("selftest-ip-frag4", [f.pkt(0, PL).data, f.pkt(PL, PL, mf=True, csum="bad").data, _fin(f)]))
    for case, ids, df in [(0, (8, 9), True), (1, (8, 8), True), (2, (8, 9), False),
                          (3, (8, 8), False), (4, (8, 9, 9), True), (5, (8, 8, 9), True)]:
        f = _flow(4, df=df)
        out.append((f"selftest-ip-flush-id-{case}", [f.pkt(i * PL, PL, ident=x).data for i, x in enumerate(ids)]))
    f = _flow(6)
    out.append(("selftest-ip-frag6", [f.pkt(0, PL).data, f.pkt(PL, PL).data, GAP,
                                      f.pkt(2 * PL, PL, exthdrs=[frag6()]).data, f.pkt(3 * PL, PL).data, _fin(f)]))
    f, g = _flow(6, exthdrs=[dstopts(b"\0" * 6)]), _flow(6)
    out.append(("selftest-ipv6-ext-same", [f.pkt(0, PL).data, f.pkt(PL, PL).data, GAP, _fin(g)]))
    f = _flow(6)
    out.append(("selftest-ipv6-ext-different", [f.pkt(0, PL, exthdrs=[dstopts(b"\0" * 6)]).data,
                                                f.pkt(PL, PL, exthdrs=[dstopts(b"\x11" * 6)]).data]))
    return out


def question_cases():
    """The issue-7 questions (CWR, fixed ID without DF, VLAN, padding,
    pure ACK) and a frame for another MAC."""
    from pktbuild import ACK, CWR, ECE, PSH
    out = []
    f = _flow(4)
    out.append(("q1-cwr-middle", [f.pkt(0, PL).data, f.pkt(PL, PL, ACK | CWR).data,
                                  f.pkt(2 * PL, PL, ACK | CWR).data, f.pkt(3 * PL, PL, ACK | CWR).data,
                                  f.pkt(4 * PL, PL).data, f.pkt(5 * PL, PL).data]))
    f = _flow(4)
    out.append(("q1-cwr-run", [f.pkt(i * PL, PL, ACK | CWR).data for i in range(4)]))
    f = _flow(6)
    out.append(("q1-cwr-ece-run-v6", [f.pkt(i * PL, PL, ACK | CWR | ECE).data for i in range(3)]))
    f = _flow(4)
    out.append(("q1-cwr-first-then-plain", [f.pkt(0, PL, ACK | CWR).data] + [f.pkt(i * PL, PL).data for i in range(1, 4)]))
    for name, ids, df in [("fixed-nodf", (8, 8, 8, 8), False), ("fixed-df", (8, 8, 8, 8), True),
                          ("inc-nodf", (8, 9, 10, 11), False), ("random-nodf", (8, 4000, 123, 9), False),
                          ("zero-nodf", (0, 0, 0), False)]:
        f = _flow(4, df=df)
        out.append((f"q2-ipid-{name}", [f.pkt(i * PL, PL, ident=x).data for i, x in enumerate(ids)]))
    for tpid in (0x8100, 0x88A8, 0x9100):
        f = _flow(4, vlans=[(tpid, 5)])
        out.append((f"q3-vlan-{tpid:04x}", [f.pkt(i * PL, PL).data for i in range(4)]))
    f = _flow(4, vlans=[(0x88A8, 5), (0x8100, 7)])
    out.append(("q3-qinq", [f.pkt(i * PL, PL).data for i in range(3)]))
    f = _flow(4)
    out.append(("q4-pad-final-short", [f.pkt(0, PL).data, f.pkt(PL, PL).data, f.pkt(2 * PL, 4, pad_to=60).data]))
    f = _flow(4)
    out.append(("q4-pad-all-short", [f.pkt(i * 4, 4, pad_to=60).data for i in range(4)]))
    f = _flow(4)
    out.append(("q4-pad-final-short-psh", [f.pkt(0, PL).data, f.pkt(PL, PL).data,
                                           f.pkt(2 * PL, 2, ACK | PSH, pad_to=60).data]))
    f = _flow(4)
    out.append(("q4-trailer-full", [f.pkt(0, PL).data, f.pkt(PL, PL, trailer=b"\0" * 4).data, f.pkt(2 * PL, PL).data]))
    f = _flow(6)
    out.append(("q4-v6-trailer", [f.pkt(0, 1).data, f.pkt(1, 1).data, f.pkt(2, 1, trailer=b"\0" * 4).data]))
    f = _flow(4)
    out.append(("q5-pure-ack-between", [f.pkt(0, PL).data, f.pkt(PL, PL).data, f.pkt(2 * PL, 0).data,
                                        f.pkt(2 * PL, PL).data, f.pkt(3 * PL, PL).data]))
    f = _flow(4)
    out.append(("q5-pure-ack-new-ackno", [f.pkt(0, PL).data, f.pkt(PL, PL).data, f.pkt(2 * PL, 0, ack_off=50).data,
                                          f.pkt(2 * PL, PL, ack_off=50).data, f.pkt(3 * PL, PL, ack_off=50).data]))
    f, g = _flow(4), _flow(4, sport=1501)
    out.append(("q5-pure-ack-other-flow", [f.pkt(0, PL).data, f.pkt(PL, PL).data, g.pkt(0, 0).data,
                                           f.pkt(2 * PL, PL).data]))
    f = _flow(4, mac_dst=bytes.fromhex("021122334455"))
    out.append(("mac-otherhost", [f.pkt(i * PL, PL).data for i in range(10)]))
    return out


def extra_cases():
    """Rules the generator reaches rarely: bucket overflow, the 64 KiB
    limit, IPv6 extension headers, checksum 0, IP length mismatch."""
    from pktbuild import ACK, PSH, SYN, hbh, nop, routing, ts_option
    out = []
    fl = [_flow(4, sport=3000 + i) for i in range(10)]
    out.append(("x-bucket-overflow-10-flows", [g.pkt(0, PL).data for g in fl] + [g.pkt(PL, PL).data for g in fl]))
    f = _flow(4, options=nop() + nop() + ts_option(1, 2))
    out.append(("x-size-limit-46x1448", [f.pkt(i * 1448, 1448).data for i in range(46)]))
    f = _flow(6)
    out.append(("x-size-limit-v6-46x1448", [f.pkt(i * 1448, 1448).data for i in range(46)]))
    for name, ext in (("hbh", [hbh()]), ("routing", [routing()]), ("hbh-routing", [hbh(), routing()])):
        f = _flow(6, exthdrs=ext)
        out.append((f"x-v6-ext-{name}", [f.pkt(i * PL, PL).data for i in range(3)]))
    f = _flow(4)
    out.append(("x-tcp-csum-zero", [f.pkt(0, PL).data, f.pkt(PL, PL, csum="zero").data, f.pkt(2 * PL, PL).data]))
    f = _flow(4)
    out.append(("x-ip-totlen-short", [f.pkt(0, PL).data, f.pkt(PL, PL, tot_len=20 + 20 + 50).data,
                                      f.pkt(2 * PL, PL).data]))
    f = _flow(4)
    out.append(("x-syn-with-payload", [f.pkt(0, PL).data, f.pkt(PL, PL, ACK | SYN).data, f.pkt(2 * PL + 1, PL).data]))
    f = _flow(4)
    out.append(("x-psh-then-more", [f.pkt(0, PL).data, f.pkt(PL, PL, ACK | PSH).data,
                                    f.pkt(2 * PL, PL).data, f.pkt(3 * PL, PL).data]))
    f = _flow(4, ipid="inc", ipid0=65534)
    out.append(("x-ipid-wrap", [f.pkt(i * PL, PL).data for i in range(5)]))
    return out


# ---- generated cases (hypothesis)

ACTIONS = (["data"] * 8 + ["short", "long", "psh", "fin", "fin_data", "cwr", "ece", "cwr_ece",
           "urg", "rst", "syn", "pure_ack", "dup_ack", "ack_change", "window", "tsval",
           "ttl", "tos_ce", "tos", "df_flip", "id_jump", "id_same", "seq_gap", "retrans",
           "bad_csum", "pad", "trailer", "gap", "ip_opts", "frag", "ip_bad_csum", "mac_other",
           "urg_ptr_only", "evil"])


def case_strategy(max_events=24):
    """A short multi-flow TCP packet sequence (a spec; :func:`materialize`
    turns it into frames)."""
    from hypothesis import strategies as st
    flow_st = st.fixed_dictionaries({
        "family": st.sampled_from([4, 6]),
        "mss": st.sampled_from([1, 7, 100, 536, 1000, 1448, 1448, 4000]),
        "opts": st.sampled_from(["none", "ts", "ts_sack", "sack"]),
        "df": st.booleans(),
        "ipid": st.sampled_from(["inc", "inc", "fixed", "zero", "random"]),
        "id0": st.sampled_from([0, 1, 65533, 40000]),
        "tos": st.sampled_from([0, 0, 0x02, 0x10]),
        "ttl": st.sampled_from([64, 8]),
        "label": st.sampled_from([0, 0, 0x12345]),
        "ext": st.sampled_from([False, False, False, True]),
        "seq0": st.sampled_from([100, 100, 0xFFFFFF00]),
    })
    ev_st = st.tuples(st.integers(0, 9), st.sampled_from(ACTIONS), st.integers(0, 1 << 16))
    return st.tuples(st.one_of(st.lists(flow_st, min_size=1, max_size=3),
                               st.lists(flow_st, min_size=4, max_size=10)),
                     st.lists(ev_st, min_size=1, max_size=max_events))


def materialize(spec):
    """Frames of a :func:`case_strategy` spec."""
    from pktbuild import ACK, CWR, ECE, FIN, PSH, RST, SYN, URG, Flow, dstopts, nop, sack_option, ts_option
    flows, events = spec
    st_ = []
    for i, fd in enumerate(flows):
        fam = fd["family"]
        f = Flow(fam, sport=2000 + i, dport=8000, df=fd["df"], ttl=fd["ttl"], tos=fd["tos"],
                 flow=fd["label"] if fam == 6 else 0, seq0=fd["seq0"],
                 exthdrs=[dstopts(b"\0" * 6)] if (fam == 6 and fd["ext"]) else [])
        st_.append(dict(f=f, d=fd, seq=0, ack=0, ts=1000, tos=fd["tos"], ttl=fd["ttl"], df=fd["df"],
                        win=65535, id=fd["id0"]))
    frames = []
    for fi, act, r in events:
        s = st_[fi % len(st_)]
        f, d = s["f"], s["d"]
        fam = d["family"]
        mss = d["mss"]
        flags, plen, kw = ACK, mss, {}
        adv_id = True
        if act == "gap":
            frames.append(GAP)
            continue
        if act == "short":
            plen = 1 + r % max(1, mss - 1) if mss > 1 else 1
        elif act == "long":
            plen = mss + 1 + r % 200
        elif act == "psh":
            flags |= PSH
        elif act == "fin":
            flags |= FIN
            plen = 0
        elif act == "fin_data":
            flags |= FIN | PSH if r & 1 else FIN
        elif act == "cwr":
            flags |= CWR
        elif act == "ece":
            flags |= ECE
        elif act == "cwr_ece":
            flags |= CWR | ECE
        elif act == "urg":
            flags |= URG
            kw["urg_ptr"] = 1
        elif act == "rst":
            flags = RST | ACK
            plen = 0
        elif act == "syn":
            flags = SYN | ACK
            plen = 0
        elif act in ("pure_ack", "dup_ack"):
            plen = 0
            if act == "pure_ack":
                s["ack"] += 1 + r % 3000
        elif act == "ack_change":
            s["ack"] += 1 + r % 3000
        elif act == "window":
            s["win"] = 1000 + r % 60000
        elif act == "tsval":
            s["ts"] += 1 + r % 4
        elif act == "ttl":
            s["ttl"] = 1 + r % 255
        elif act == "tos_ce":
            s["tos"] |= 0x03
        elif act == "tos":
            s["tos"] = r & 0xFC
        elif act == "df_flip":
            s["df"] = not s["df"]
        elif act == "id_jump":
            s["id"] = (s["id"] + 1 + r % 5000) & 0xFFFF
        elif act == "id_same":
            adv_id = False
        elif act == "seq_gap":
            s["seq"] += 1 + r % 2000
        elif act == "retrans":
            s["seq"] = max(0, s["seq"] - mss)
        elif act == "bad_csum":
            kw["csum"] = "bad"
        elif act == "pad":
            plen = r % 6
            kw["pad_to"] = 60
        elif act == "trailer":
            kw["trailer"] = b"\0" * (1 + r % 4)
        elif act == "ip_opts" and fam == 4:
            kw["ip_options"] = bytes((68, 8, 5, 0)) + b"\0" * 4
        elif act == "frag":
            if fam == 4:
                kw["mf"] = True
            else:
                from pktbuild import frag6
                kw["exthdrs"] = list(f.exthdrs) + [frag6(m=True)]
        elif act == "ip_bad_csum" and fam == 4:
            kw["ip_csum"] = "bad"
        elif act == "evil" and fam == 4:
            kw["evil"] = True
        elif act == "mac_other":
            kw["mac_dst"] = bytes.fromhex("021122334455")
        elif act == "urg_ptr_only":
            kw["urg_ptr"] = 1 + r % 100
        o = d["opts"]
        if o == "ts":
            kw["options"] = nop() + nop() + ts_option(s["ts"], 77)
        elif o == "ts_sack":
            kw["options"] = nop() + nop() + ts_option(s["ts"], 77) + nop() + nop() + sack_option((5000, 6000))
        elif o == "sack":
            kw["options"] = nop() + nop() + sack_option((5000 + s["ack"], 6000))
        if fam == 4:
            m = d["ipid"]
            if m == "random":
                ident = (r * 2654435761) & 0xFFFF
            elif m == "zero":
                ident = 0
            elif m == "fixed":
                ident = d["id0"]
            else:
                ident = s["id"]
                if adv_id:
                    s["id"] = (s["id"] + 1) & 0xFFFF
            kw.update(ident=ident, tos=s["tos"], ttl=s["ttl"], df=s["df"])
        else:
            kw.update(tc=s["tos"], hlim=s["ttl"])
        pkt = f.pkt(s["seq"], plen, flags, ack_off=s["ack"], window=s["win"], **kw)
        frames.append(pkt.data)
        if act not in ("retrans",):
            s["seq"] += plen + (1 if flags & (FIN | SYN) else 0)
    while frames and frames[-1] is GAP:
        frames.pop()
    return frames


def generated_cases(n, seed=None, max_events=24, strategy=None, build=None, prefix="gen"):
    """``n`` distinct generated cases [(name, frames)] (hypothesis'
    generate phase only: no database, no shrinking).  ``strategy`` /
    ``build``: another generator (default the TCP one: :func:`case_strategy`
    / :func:`materialize`)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    specs = []
    strategy = strategy if strategy is not None else case_strategy(max_events)
    materialize_ = build or materialize

    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(spec):
        specs.append(spec)

    if seed is not None:
        collect = hseed(seed)(collect)
    seen, out = set(), []
    for _ in range(5):
        collect()
        for sp in specs:
            fr = materialize_(sp)
            key = tuple(fr)
            if fr and key not in seen:
                seen.add(key)
                out.append((f"{prefix}{len(out)}", fr))
        specs.clear()
        if len(out) >= n:
            break
        if seed is not None:
            collect = hseed(seed + 1 + len(out))(collect)
    return out[:n]


# ------------------------------------------------------------ UDP GRO cases
#
# The receiving namespace has no UDP socket: the datagrams are "forwarded"
# traffic for udp_gro_receive (no socket found -> standard GRO with
# rx-udp-gro-forwarding, fraglist with rx-gro-list).  Checked on 6.18.44:
# GRO applies with ip_forward=0 and no address or route in the receiving
# namespace (GRO runs before routing); the frames are dropped after the
# capture.  pcapgro: GROConfig(udp='gro') / GROConfig(fraglist=True).

UDP_MODES = {"std": dict(udp="gro"), "flist": dict(fraglist=True)}
UDP_ORACLE = {"std": dict(udp_gro_fwd=True), "flist": dict(gro_list=True)}


def _csum(data):
    """Internet checksum of ``data`` (fast: the 16-bit one's-complement sum
    is the big-endian integer mod 0xFFFF, 0xFFFF for a nonzero multiple)."""
    if len(data) & 1:
        data += b"\0"
    x = int.from_bytes(data, "big")
    s = x % 0xFFFF
    if s == 0 and x:
        s = 0xFFFF
    return ~s & 0xFFFF


def udp_frame(fam, plen, sport=3000, dport=9000, fill=0x75, csum="valid", ident=0, df=True,
              tos=0, ttl=64, label=0, ext=False, ulen=None, mf=False, ip_options=b"",
              ip_csum="valid", pad_to=0, trailer=b"", mac_dst=None):
    """One Ethernet/IP/UDP frame.  ``csum``: 'valid', 'zero' (no checksum)
    or 'bad' (valid - 1, never 0); ``ulen``: a UDP length field other than
    the real one."""
    from pktbuild import ETH_P_IP, ETH_P_IPV6, dstopts, eth, frag6, ipv4, ipv6, pseudo_header
    src, dst = ("192.168.1.200", "192.168.1.100") if fam == 4 else ("fdaa::2", "fdaa::1")
    pay = bytes((fill & 0xFF,)) * plen
    ln = 8 + plen
    ul = ln if ulen is None else ulen
    d = bytearray(struct.pack("!HHHH", sport, dport, ul & 0xFFFF, 0) + pay)
    c = _csum(pseudo_header(src, dst, 17, ln) + bytes(d)) or 0xFFFF
    if csum == "zero":
        c = 0
    elif csum == "bad":
        c = (c - 1) & 0xFFFF or 0xFFFE
    struct.pack_into("!H", d, 6, c)
    if fam == 4:
        l3 = ipv4(bytes(d), src, dst, proto=17, tos=tos, ttl=ttl, ident=ident, df=df, mf=mf,
                  options=ip_options, csum=ip_csum)
        et = ETH_P_IP
    else:
        exts = [dstopts(b"\0" * 6)] if ext else []
        if mf:
            exts = exts + [frag6(m=True)]
        l3 = ipv6(bytes(d), src, dst, nh=17, tc=tos, flow=label, hlim=ttl, exthdrs=exts)
        et = ETH_P_IPV6
    return eth(l3, et, dst=mac_dst or MAC_DST, pad_to=pad_to, trailer=trailer)


UDP_ACTIONS = (["data"] * 10 + ["burst"] * 3 + ["short", "short", "long", "long", "tiny",
               "csum0", "bad_csum", "ttl", "tos", "tos_ce", "df_flip", "id_jump", "id_same",
               "pad", "trailer", "gap", "gap", "frag", "ip_opts", "ip_bad_csum", "mac_other",
               "ulen_bad", "size_change"])


def udp_case_strategy(max_events=16):
    """A short multi-flow UDP datagram sequence (a spec for
    :func:`materialize_udp`)."""
    from hypothesis import strategies as st
    flow_st = st.fixed_dictionaries({
        "family": st.sampled_from([4, 6]),
        "size": st.sampled_from([1, 8, 100, 536, 1000, 1472, 1472, 4000, 8000]),
        "df": st.booleans(),
        "ipid": st.sampled_from(["inc", "inc", "fixed", "zero", "random"]),
        "id0": st.sampled_from([0, 1, 65533, 40000]),
        "tos": st.sampled_from([0, 0, 0x02, 0x10]),
        "ttl": st.sampled_from([64, 8]),
        "label": st.sampled_from([0, 0, 0x12345]),
        "ext": st.sampled_from([False, False, False, True]),
        "csum0": st.sampled_from([False, False, False, False, True]),
        "sameport": st.booleans(),
    })
    ev_st = st.tuples(st.integers(0, 9), st.sampled_from(UDP_ACTIONS), st.integers(0, 1 << 16))
    return st.tuples(st.one_of(st.lists(flow_st, min_size=1, max_size=3),
                               st.lists(flow_st, min_size=4, max_size=10)),
                     st.lists(ev_st, min_size=1, max_size=max_events))


def materialize_udp(spec):
    """Frames of a :func:`udp_case_strategy` spec."""
    flows, events = spec
    st_ = []
    for i, fd in enumerate(flows):
        st_.append(dict(d=fd, sport=3000 + i, dport=9000 if fd["sameport"] else 9000 + i,
                        tos=fd["tos"], ttl=fd["ttl"], df=fd["df"], id=fd["id0"], size=fd["size"],
                        fill=0x41 + i))
    frames = []

    def one(s, plen, adv_id=True, **kw):
        d = s["d"]
        fam = d["family"]
        m = d["ipid"]
        if m == "random":
            ident = random.Random(len(frames) * 7919 + s["sport"]).getrandbits(16)
        elif m == "zero":
            ident = 0
        elif m == "fixed":
            ident = d["id0"]
        else:
            ident = s["id"]
            if adv_id:
                s["id"] = (s["id"] + 1) & 0xFFFF
        kw.setdefault("csum", "zero" if d["csum0"] else "valid")
        s["fill"] = (s["fill"] + 1) & 0xFF
        frames.append(udp_frame(fam, plen, s["sport"], s["dport"], fill=s["fill"], ident=ident,
                                df=s["df"], tos=s["tos"], ttl=s["ttl"], label=d["label"],
                                ext=d["ext"], **kw))

    for fi, act, r in events:
        s = st_[fi % len(st_)]
        fam = s["d"]["family"]
        size = s["size"]
        if act == "gap":
            frames.append(GAP)
            continue
        if act == "burst":
            n = 2 + r % 80
            # long bursts of large datagrams straddle jiffies (unstable)
            n = min(n, max(2, 120_000 // (size + 60)))
            for _ in range(n):
                one(s, size)
            if r & 0x100 and size > 1:
                one(s, 1 + (r >> 9) % (size - 1))      # a shorter last one
            continue
        plen, kw, adv = size, {}, True
        if act == "short":
            plen = max(1, 1 + r % max(1, size - 1)) if size > 1 else 1
        elif act == "long":
            plen = size + 1 + r % 300
        elif act == "size_change":
            s["size"] = [1, 8, 100, 536, 1000, 1472, 4000][r % 7]
            plen = s["size"]
        elif act == "tiny":
            plen = 0
        elif act == "csum0":
            kw["csum"] = "zero"
        elif act == "bad_csum":
            kw["csum"] = "bad"
        elif act == "ttl":
            s["ttl"] = 1 + r % 255
        elif act == "tos":
            s["tos"] = r & 0xFC
        elif act == "tos_ce":
            s["tos"] |= 0x03
        elif act == "df_flip":
            s["df"] = not s["df"]
        elif act == "id_jump":
            s["id"] = (s["id"] + 1 + r % 5000) & 0xFFFF
        elif act == "id_same":
            adv = False
        elif act == "pad":
            plen = r % 12
            kw["pad_to"] = 60
        elif act == "trailer":
            kw["trailer"] = b"\0" * (1 + r % 4)
        elif act == "frag":
            kw["mf"] = True
        elif act == "ip_opts" and fam == 4:
            kw["ip_options"] = bytes((68, 8, 5, 0)) + b"\0" * 4
        elif act == "ip_bad_csum" and fam == 4:
            kw["ip_csum"] = "bad"
        elif act == "mac_other":
            kw["mac_dst"] = bytes.fromhex("021122334455")
        elif act == "ulen_bad":
            kw["ulen"] = 8 + plen + (1 if r & 1 else -1)
        one(s, plen, adv, **kw)
    # a case must fit in about a jiffy (4 ms) of sending, or the kernel's
    # result varies from run to run: at most 100 frames / 150 kB
    total = 0
    for i, fr in enumerate(frames):
        total += 0 if fr is GAP else len(fr) + 2000
        if i >= 100 or total > 150_000:
            del frames[i:]
            break
    while frames and frames[-1] is GAP:
        frames.pop()
    return frames


def generated_udp_cases(n, seed=None, max_events=16):
    return generated_cases(n, seed=seed, strategy=udp_case_strategy(max_events),
                           build=materialize_udp, prefix="udpgen")


def udp_cases():
    """Named UDP cases (recorded under tests/regress/udp-{std,flist}-*)."""
    U = udp_frame
    out = []
    for fam in (4, 6):
        v = f"v{fam}"
        out.append((f"same-5-{v}", [U(fam, 500, fill=i) for i in range(5)]))
        out.append((f"short-last-{v}", [U(fam, 500, fill=i) for i in range(4)] + [U(fam, 100)]))
        out.append((f"short-then-more-{v}", [U(fam, 500), U(fam, 100), U(fam, 500), U(fam, 500)]))
        out.append((f"longer-second-{v}", [U(fam, 500), U(fam, 600), U(fam, 600), U(fam, 600)]))
        out.append((f"70-datagrams-{v}", [U(fam, 200, fill=i) for i in range(70)]))
        out.append((f"size-limit-8000-{v}", [U(fam, 8000, fill=i) for i in range(10)]))
        out.append((f"size-limit-1472-{v}", [U(fam, 1472, fill=i) for i in range(50)]))
        out.append((f"csum-zero-middle-{v}", [U(fam, 300), U(fam, 300), U(fam, 300, csum="zero"),
                                            U(fam, 300), U(fam, 300)]))
        out.append((f"csum-zero-all-{v}", [U(fam, 300, csum="zero") for _ in range(4)]))
        out.append((f"bad-csum-{v}", [U(fam, 300), U(fam, 300, csum="bad"), U(fam, 300)]))
        out.append((f"ttl-change-{v}", [U(fam, 300), U(fam, 300), U(fam, 300, ttl=7), U(fam, 300, ttl=7)]))
        out.append((f"tos-change-{v}", [U(fam, 300), U(fam, 300, tos=0x10), U(fam, 300, tos=0x10)]))
        out.append((f"ecn-ce-{v}", [U(fam, 300), U(fam, 300, tos=0x03), U(fam, 300)]))
        out.append((f"pad-short-{v}", [U(fam, 300), U(fam, 300), U(fam, 2, pad_to=60), U(fam, 300)]))
        out.append((f"pad-all-{v}", [U(fam, 2, pad_to=60) for _ in range(3)]))
        out.append((f"trailer-{v}", [U(fam, 300), U(fam, 300, trailer=b"\0" * 4), U(fam, 300)]))
        out.append((f"ulen-mismatch-{v}", [U(fam, 300), U(fam, 300, ulen=300), U(fam, 300)]))
        out.append((f"tiny-empty-{v}", [U(fam, 0), U(fam, 0), U(fam, 0)]))
        out.append((f"two-flows-{v}", [U(fam, 400, sport=3000 + (i & 1), fill=i) for i in range(8)]))
        out.append((f"gap-{v}", [U(fam, 400), U(fam, 400), GAP, U(fam, 400), U(fam, 400)]))
        out.append((f"frag-{v}", [U(fam, 400), U(fam, 400, mf=True), U(fam, 400)]))
        out.append((f"mac-otherhost-{v}", [U(fam, 400, mac_dst=bytes.fromhex("021122334455"))
                                           for _ in range(4)]))
    out.append(("flowlabel-v6", [U(6, 300), U(6, 300, label=5), U(6, 300, label=5)]))
    out.append(("ext-dstopts-v6", [U(6, 300, ext=True) for _ in range(4)]))
    for name, ids, df in [("fixed-nodf", (8, 8, 8, 8), False), ("fixed-df", (8, 8, 8, 8), True),
                          ("inc-nodf", (8, 9, 10, 11), False), ("inc-df", (8, 9, 10, 11), True),
                          ("random-df", (8, 4000, 123, 9), True),
                          ("fixed-then-inc", (8, 8, 9, 10), True), ("inc-then-same", (8, 9, 9, 10), True),
                          ("wrap", (65534, 65535, 0, 1), False)]:
        out.append((f"ipid-{name}", [U(4, 300, ident=x, df=df) for x in ids]))
    out.append(("df-flip", [U(4, 300, ident=1), U(4, 300, ident=2), U(4, 300, ident=3, df=False),
                            U(4, 300, ident=4, df=False)]))
    out.append(("ip-options-v4", [U(4, 300), U(4, 300, ip_options=bytes((68, 8, 5, 0)) + b"\0" * 4),
                                  U(4, 300)]))
    out.append(("ip-bad-csum-v4", [U(4, 300), U(4, 300, ip_csum="bad"), U(4, 300)]))
    return out


def check_udp_cases(oracle, named, mode):
    """:func:`check_cases` for UDP in ``mode`` 'std' or 'flist'."""
    return check_cases(oracle, [c for _, c in named], [n for n, _ in named], **UDP_MODES[mode])


# ------------------------------------------------------------ GSO (split)
#
# The split oracle (KernelOracle(gso=True)): a super-frame is sent through
# the PACKET_VNET_HDR socket with a struct virtio_net_hdr (flags
# NEEDS_CSUM, csum_start/csum_offset at the TCP/UDP checksum field, which
# holds the pseudo-header seed as a CHECKSUM_PARTIAL sender leaves it;
# gso_type TCPV4/TCPV6/UDP_L4 (+ ECN), gso_size) on a veth with tx
# checksumming, TSO, GSO and tx-udp-segmentation off, so the kernel's
# software GSO (skb_gso_segment in validate_xmit_skb) cuts it and
# skb_checksum_help / the GSO checksum code writes full checksums; the peer
# has GRO off, so its capture shows the segments as made.  pcapgro:
# GSOSplitter(GSOConfig(mss=gso_size) or GSOConfig(gso_size=gso_size)).

VIRTIO_NET_HDR_F_NEEDS_CSUM = 1
VIRTIO_GSO_TCPV4, VIRTIO_GSO_UDP_L4, VIRTIO_GSO_TCPV6, VIRTIO_GSO_ECN = 1, 5, 4, 0x80


def vnet_hdr(gso_type, hdr_len, gso_size, csum_start, csum_offset,
             flags=VIRTIO_NET_HDR_F_NEEDS_CSUM):
    """struct virtio_net_hdr {u8 flags; u8 gso_type; u16 hdr_len; u16
    gso_size; u16 csum_start; u16 csum_offset} in host (little-endian)
    byte order."""
    return struct.pack("<BBHHHH", flags, gso_type, hdr_len, gso_size, csum_start, csum_offset)


def _seed(src, dst, proto, ln):
    """The pseudo-header partial sum (folded, not inverted) a
    CHECKSUM_PARTIAL sender leaves in the checksum field."""
    from pktbuild import inet_fold, pseudo_header
    b = pseudo_header(src, dst, proto, ln)
    x = int.from_bytes(b, "big") % 0xFFFF
    return inet_fold(x) or 0xFFFF if x == 0 and any(b) else x


def _payload(n, rot):
    pat = bytes(range(256))
    pat = pat[rot % 256:] + pat[:rot % 256]
    return (pat * (n // 256 + 1))[:n]


def gso_super(fam, proto, plen, size, *, flags=0x10, options=b"", ecn=False, ident=1000, df=True,
              tos=0, ttl=64, label=0, ext=False, ip_options=b"", seq=1000, ack=5000,
              window=65535, urg_ptr=0, rot=0, sport=4000, dport=5000, gso=True):
    """(VnetFrame, GSOConfig kwargs) of one super-frame: ``plen`` payload
    bytes, gso_size ``size``.  ``gso=False``: gso_type NONE (a plain frame
    with a partial checksum)."""
    from pktbuild import ETH_P_IP, ETH_P_IPV6, dstopts, eth, ipv4, ipv6, tcp_segment
    src, dst = ("192.168.1.200", "192.168.1.100") if fam == 4 else ("fdaa::2", "fdaa::1")
    pay = _payload(plen, rot)
    if proto == 6:
        l4 = bytearray(tcp_segment(src, dst, sport, dport, seq, ack, flags, window, options, pay,
                                   csum=0, urg_ptr=urg_ptr))
        struct.pack_into("!H", l4, 16, _seed(src, dst, 6, len(l4)))
        thl = (l4[12] >> 4) * 4
        coff = 16
    else:
        l4 = bytearray(struct.pack("!HHHH", sport, dport, 8 + plen, 0) + pay)
        struct.pack_into("!H", l4, 6, _seed(src, dst, 17, len(l4)))
        thl, coff = 8, 6
    if fam == 4:
        l3 = ipv4(bytes(l4), src, dst, proto=proto, tos=tos, ttl=ttl, ident=ident, df=df,
                  options=ip_options)
        frame = eth(l3, ETH_P_IP)
        l4off = 14 + 20 + len(ip_options) + (-len(ip_options)) % 4
    else:
        exts = [dstopts(b"\0" * 6)] if ext else []
        l3 = ipv6(bytes(l4), src, dst, nh=proto, tc=tos, flow=label, hlim=ttl, exthdrs=exts)
        frame = eth(l3, ETH_P_IPV6)
        l4off = 14 + 40 + 8 * len(exts)
    if proto == 6:
        gt = (VIRTIO_GSO_TCPV4 if fam == 4 else VIRTIO_GSO_TCPV6) | (VIRTIO_GSO_ECN if ecn else 0)
        cfg = {"mss": size}
    else:
        gt = VIRTIO_GSO_UDP_L4
        cfg = {"gso_size": size}
    if not gso:
        gt = 0
    return VnetFrame(vnet_hdr(gt, l4off + thl, size if gso else 0, l4off, coff), frame), cfg


def pcapgro_split(vf, cfg):
    """pcapgro's segments (bytes) of a super-frame (tag zeroed)."""
    from pcapgro.gso import GSOConfig, GSOSplitter
    fr = normalize(vf.frame)
    sp = GSOSplitter(GSOConfig(link_rate=0, **cfg))
    return [bytes(p.data) for p in sp.split(Packet(T0, fr, len(fr)), None)]


def gso_cases():
    """Named split cases (recorded under tests/regress/gso-*)."""
    from pktbuild import ACK, CWR, ECE, FIN, PSH, URG, nop, sack_option, ts_option
    ts = nop() + nop() + ts_option(12345, 678)
    out = []
    for fam in (4, 6):
        v = f"v{fam}"
        out.append((f"tcp-10x1448-{v}", gso_super(fam, 6, 10 * 1448, 1448)))
        out.append((f"tcp-rem-{v}", gso_super(fam, 6, 10 * 1448 + 100, 1448, options=ts)))
        out.append((f"tcp-64k-{v}", gso_super(fam, 6, 65535 - 20 - 40 - (20 if fam == 4 else 0) - 12,
                                               1448, options=ts)))
        out.append((f"tcp-fin-psh-{v}", gso_super(fam, 6, 5000, 1000, flags=ACK | PSH | FIN)))
        out.append((f"tcp-cwr-ece-{v}", gso_super(fam, 6, 5000, 1000, flags=ACK | CWR | ECE, ecn=True)))
        out.append((f"tcp-cwr-noecnbit-{v}", gso_super(fam, 6, 5000, 1000, flags=ACK | CWR)))
        out.append((f"tcp-urg-{v}", gso_super(fam, 6, 5000, 1000, flags=ACK | URG | PSH, urg_ptr=3000)))
        out.append((f"tcp-sack-{v}", gso_super(fam, 6, 4000, 1000,
                                               options=ts + nop() + nop() + sack_option((1, 2), (3, 4)))))
        out.append((f"tcp-mss8-{v}", gso_super(fam, 6, 100, 8)))
        out.append((f"tcp-not-super-{v}", gso_super(fam, 6, 1000, 1448)))
        out.append((f"tcp-equal-mss-{v}", gso_super(fam, 6, 1448, 1448)))
        out.append((f"tcp-mss-plus-1-{v}", gso_super(fam, 6, 1449, 1448)))
        out.append((f"tcp-plain-partial-{v}", gso_super(fam, 6, 1000, 1448, gso=False)))
        out.append((f"udp-5x1000-{v}", gso_super(fam, 17, 5000, 1000)))
        out.append((f"udp-rem-{v}", gso_super(fam, 17, 5000 + 7, 1000)))
        out.append((f"udp-1472-{v}", gso_super(fam, 17, 40 * 1472, 1472)))
        # 128 = UDP_MAX_SEGMENTS: one more datagram and send() fails with
        # EINVAL (virtio_net_hdr_to_skb; udp_send_skb has the same limit)
        out.append((f"udp-128-segs-{v}", gso_super(fam, 17, 128 * 100, 100)))
        out.append((f"udp-not-super-{v}", gso_super(fam, 17, 500, 1000)))
        out.append((f"udp-plain-partial-{v}", gso_super(fam, 17, 500, 1000, gso=False)))
    out.append(("tcp-v4-nodf", gso_super(4, 6, 5000, 1000, df=False)))
    out.append(("tcp-v4-id-wrap", gso_super(4, 6, 5000, 1000, ident=65534)))
    out.append(("tcp-v4-tos-ttl", gso_super(4, 6, 5000, 1000, tos=0x23, ttl=3)))
    out.append(("tcp-v4-ip-options", gso_super(4, 6, 5000, 1000, ip_options=bytes((68, 8, 5, 0)) + b"\0" * 4)))
    out.append(("tcp-v6-ext-dstopts", gso_super(6, 6, 5000, 1000, ext=True)))
    out.append(("tcp-v6-label-tc", gso_super(6, 6, 5000, 1000, label=0x12345, tos=0x23)))
    out.append(("tcp-seq-wrap", gso_super(4, 6, 5000, 1000, seq=0xFFFFF000)))
    out.append(("udp-v4-nodf-id", gso_super(4, 17, 5000, 1000, df=False, ident=65533)))
    out.append(("udp-v6-ext-dstopts", gso_super(6, 17, 5000, 1000, ext=True)))
    return out


def gso_case_strategy():
    from hypothesis import strategies as st
    return st.fixed_dictionaries({
        "family": st.sampled_from([4, 6]),
        "proto": st.sampled_from([6, 6, 6, 17]),
        "size": st.sampled_from([8, 9, 100, 536, 1000, 1400, 1448, 1460, 1472, 4000, 9000]),
        "nseg": st.sampled_from([1, 2, 2, 3, 5, 10, 20, 45, 100]),
        "rem": st.sampled_from([0, 0, 1, 7, -1, "half"]),
        "opts": st.sampled_from(["none", "ts", "ts", "ts_sack", "mss_ws"]),
        "flags": st.lists(st.sampled_from(["fin", "psh", "cwr", "ece", "urg"]), max_size=5),
        "ecn": st.booleans(),
        "df": st.booleans(),
        "ident": st.sampled_from([0, 1, 1000, 65535, 65500]),
        "tos": st.sampled_from([0, 0, 0x02, 0x10, 0xE3]),
        "ttl": st.sampled_from([64, 1, 255]),
        "label": st.sampled_from([0, 0xABCDE]),
        "ext": st.sampled_from([False, False, True]),
        "ipopt": st.sampled_from([False, False, False, True]),
        "seq": st.sampled_from([1000, 0xFFFFFF00]),
        "rot": st.integers(0, 255),
    })


def materialize_gso(d):
    from pktbuild import ACK, CWR, ECE, FIN, PSH, URG, nop, sack_option, ts_option, wscale_option
    fam, proto, size = d["family"], d["proto"], d["size"]
    opts = {"none": b"", "ts": nop() + nop() + ts_option(99, 77),
            "ts_sack": nop() + nop() + ts_option(99, 77) + nop() + nop() + sack_option((5, 6)),
            "mss_ws": nop() + wscale_option(7)}[d["opts"]] if proto == 6 else b""
    hdr = (20 if fam == 4 else 40) + (8 if fam == 6 and d["ext"] else 0) \
        + (8 if fam == 4 and d["ipopt"] else 0) + (20 + len(opts) if proto == 6 else 8)
    rem = d["rem"]
    rem = size // 2 if rem == "half" else rem
    plen = d["nseg"] * size + rem
    # at most 300 TCP segments, 128 UDP datagrams (UDP_MAX_SEGMENTS: the
    # kernel refuses more, see gso_cases)
    plen = max(1, min(plen, 65535 - hdr, (300 if proto == 6 else 128) * size))
    fl = ACK
    for f in d["flags"]:
        fl |= {"fin": FIN, "psh": PSH, "cwr": CWR, "ece": ECE, "urg": URG}[f]
    return gso_super(fam, proto, plen, size, flags=fl, options=opts, ecn=d["ecn"] and proto == 6,
                     ident=d["ident"], df=d["df"], tos=d["tos"], ttl=d["ttl"], label=d["label"],
                     ext=d["ext"], ip_options=bytes((68, 8, 5, 0)) + b"\0" * 4 if d["ipopt"] else b"",
                     seq=d["seq"], urg_ptr=77 if fl & URG else 0, rot=d["rot"])


def generated_gso_cases(n, seed=None):
    """``n`` distinct generated split cases [(name, (VnetFrame, cfg))]."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    specs = []

    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(gso_case_strategy())
    def collect(spec):
        specs.append(spec)

    seen, out = set(), []
    for k in range(5):
        (hseed(seed + k)(collect) if seed is not None else collect)()
        for sp in specs:
            vf, cfg = materialize_gso(sp)
            key = (vf, tuple(sorted(cfg.items())))
            if key not in seen:
                seen.add(key)
                out.append((f"gsogen{len(out)}", (vf, cfg)))
        specs.clear()
        if len(out) >= n:
            break
    return out[:n]


@dataclass
class GSOResult:
    name: str
    vf: VnetFrame
    cfg: dict
    kernel: list = field(default_factory=list)      # normalized bytes
    ours: list = field(default_factory=list)
    status: str = "ok"                                # ok | mismatch | unstable
    runs: int = 0
    diff: str | None = None
    kernel_packets: list = field(default_factory=list)

    def input_lines(self):
        fl, gt, hl, gs, cs, co = struct.unpack("<BBHHHH", self.vf.vnet)
        return [f"vnet flags={fl} gso_type={gt:#x} hdr_len={hl} gso_size={gs} "
                f"csum_start={cs} csum_offset={co}; pcapgro {self.cfg}",
                describe(normalize(self.vf.frame))]


def kernel_refuses(vf):
    """Why the kernel sends nothing for this injected super-frame (6.18.44,
    checked), or None.

    * UDP_L4 with more than 128 datagrams (UDP_MAX_SEGMENTS): send() fails
      with EINVAL (virtio_net_hdr_to_skb; a UDP socket refuses the same).
    * TCP with payload <= gso_size < TCP options + payload:
      virtio_net_hdr_to_skb counts only 20 header bytes (thlen =
      sizeof(struct tcphdr)), so it marks the frame GSO; tcp_gso_segment
      then finds nothing to cut and the frame is dropped on transmit (the
      sending veth's TX dropped counter rises).  A TCP stack never builds
      such a frame; pcapgro passes it unchanged (checksum completed).
    """
    fl, gt, hl, gs, cs, _co = struct.unpack("<BBHHHH", vf.vnet)
    fr = vf.frame
    et = struct.unpack_from("!H", fr, 12)[0]
    l3len = (struct.unpack_from("!H", fr, 16)[0] if et == 0x0800
             else 40 + struct.unpack_from("!H", fr, 18)[0])
    l4len = 14 + l3len - cs
    if gt & 0x7F == VIRTIO_GSO_UDP_L4:
        if l4len - 8 > 128 * gs:
            return "UDP GSO with more than 128 (UDP_MAX_SEGMENTS) datagrams: EINVAL"
    elif gt & 0x7F in (VIRTIO_GSO_TCPV4, VIRTIO_GSO_TCPV6):
        thl = (fr[cs + 12] >> 4) * 4
        if l4len - thl <= gs < l4len - 20:
            return "TCP payload <= gso_size < options + payload: dropped on transmit"
    return None


def check_gso_cases(oracle, named, rounds=2):
    """Send every super-frame ``rounds`` times (round robin); the kernel's
    segments must agree between runs, and equal pcapgro's split."""
    res = [GSOResult(n, vf, cfg) for n, (vf, cfg) in named]
    got = oracle.run([[r.vf] for _ in range(rounds) for r in res])
    for j, r in enumerate(res):
        sigs = [signature(got[k * len(res) + j][1]) for k in range(rounds)]
        r.runs = rounds
        r.kernel = list(sigs[0])
        r.kernel_packets = got[j][1]
        r.ours = pcapgro_split(r.vf, r.cfg)
        if len(set(sigs)) != 1:
            r.status = "unstable"
            r.diff = "kernel runs differ: " + str([len(s) for s in sigs])
            continue
        if not r.kernel and kernel_refuses(r.vf):
            r.status, r.diff = "refused", kernel_refuses(r.vf)
            continue
        r.diff = compare(r.kernel, r.ours)
        if r.diff:
            r.status = "mismatch"
    return res


def gso_report(results, limit=30):
    lines = []
    for r in [r for r in results if r.status not in ("ok", "refused")][:limit]:
        lines.append(f"== {r.name}: {r.status}")
        lines += ["   " + x for x in r.input_lines()]
        lines.append(r.diff or "")
    return "\n".join(lines)


def save_gso_regress(r, directory=REGRESS):
    d = Path(directory) / f"gso-{r.name}"
    save_regress(d.name, [r.vf.frame], r.kernel_packets, directory,
                 config={"engine": "split", "config": r.cfg, "vnet": r.vf.vnet.hex()})


def load_gso_regress(d):
    """(VnetFrame, cfg, kernel output Packets) of a tests/regress/gso-* dir."""
    import json
    inp, kern = load_regress(d)
    c = json.loads((Path(d) / "config.json").read_text())
    return VnetFrame(bytes.fromhex(c["vnet"]), bytes(inp[0].data)), c["config"], kern


# ------------------------------------------------------------ command line

def _main(argv):
    import argparse
    casemod = sys.modules[__name__]
    ap = argparse.ArgumentParser(prog="kernel_oracle")
    ap.add_argument("what", choices=["smoke", "explore", "questions", "extra", "record-regress",
                                     "udp", "udp-explore", "udp-record-regress",
                                     "gso", "gso-explore", "gso-record-regress"])
    ap.add_argument("--mode", choices=["std", "flist"], default=None,
                    help="udp*: standard UDP GRO or fraglist (default: both)")
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--save-mismatches", action="store_true",
                    help="explore: store each mismatch under tests/regress/mismatch-*")
    a = ap.parse_args(argv)
    reason = requirements_missing()
    if reason:
        print("cannot run:", reason)
        return 2
    t0 = time.monotonic()
    if a.what.startswith("udp"):
        return _main_udp(a, t0)
    if a.what.startswith("gso"):
        return _main_gso(a, t0)
    with KernelOracle() as orc:
        if a.what == "smoke":
            named = casemod.smoke_cases()
        elif a.what == "questions":
            named = casemod.question_cases()
        elif a.what == "extra":
            named = casemod.extra_cases()
        elif a.what == "record-regress":
            named = casemod.selftest_cases() + casemod.question_cases() + casemod.extra_cases()
        else:
            named = casemod.generated_cases(a.n, seed=a.seed)
        names = [n for n, _ in named]
        res = check_cases(orc, [c for _, c in named], names)
        print(report(res))
        if a.what in ("smoke", "questions", "extra"):
            for r in res:
                print(f"-- {r.name}: {r.status}")
                for fr in r.kernel:
                    print("   kernel  " + describe(fr))
        if a.what == "record-regress":
            for r in res:
                if r.status != "unstable":
                    save_regress(r.name, r.case, r.kernel_packets)
        if a.what == "explore" and a.save_mismatches:
            for r in res:
                if r.status == "mismatch":
                    save_regress("mismatch-" + r.name, r.case, r.kernel_packets)
        n_bad = sum(r.status == "mismatch" for r in res)
        n_uns = sum(r.status == "unstable" for r in res)
        runs = sum(r.runs for r in res)
        n_t = sum(r.timing for r in res)
        print(f"{len(res)} cases, {runs} kernel runs, {n_bad} mismatches, {n_uns} unstable, "
              f"{n_t} accepted after a timing retry, "
              f"{orc.stray} stray frames, {time.monotonic() - t0:.1f} s")
    return 1 if n_bad else 0


def _summary(res, orc, t0):
    n_bad = sum(r.status == "mismatch" for r in res)
    n_uns = sum(r.status == "unstable" for r in res)
    print(f"{len(res)} cases, {sum(r.runs for r in res)} kernel runs, {n_bad} mismatches, "
          f"{n_uns} unstable, {sum(r.timing for r in res)} accepted after a timing retry, "
          f"{orc.stray} stray frames, {time.monotonic() - t0:.1f} s")
    return n_bad


def _main_gso(a, t0):
    named = [("gso-" + n, c) for n, c in gso_cases()]
    if a.what == "gso-explore":
        named = generated_gso_cases(a.n, seed=a.seed)
    with KernelOracle(gso=True) as orc:
        res = check_gso_cases(orc, named)
        print(gso_report(res))
        if a.what == "gso":
            for r in res:
                print(f"-- {r.name}: {r.status}: {len(r.kernel)} segments")
        for r in res:
            if r.status in ("ok", "mismatch") and (a.what == "gso-record-regress" or (
                    a.what == "gso-explore" and a.save_mismatches and r.status == "mismatch")):
                r.name = r.name.replace("gso-", "", 1)
                save_gso_regress(r)
        n_bad = sum(r.status == "mismatch" for r in res)
        print(f"{len(res)} cases, {sum(r.runs for r in res)} kernel runs, {n_bad} mismatches, "
              f"{sum(r.status == 'unstable' for r in res)} unstable, "
              f"{sum(r.status == 'refused' for r in res)} refused by the kernel, "
              f"{orc.stray} stray frames, "
              f"{time.monotonic() - t0:.1f} s")
    return 1 if n_bad else 0


def _main_udp(a, t0):
    named = [("udp-" + n, c) for n, c in udp_cases()]
    if a.what == "udp-explore":
        named = generated_udp_cases(a.n, seed=a.seed)
    n_bad = 0
    for mode in ([a.mode] if a.mode else ["std", "flist"]):
        with KernelOracle(**UDP_ORACLE[mode]) as orc:
            res = check_udp_cases(orc, named, mode)
            print(f"-- UDP {mode}")
            print(report(res))
            if a.what == "udp":
                for r in res:
                    print(f"-- {r.name}: {r.status}")
                    for fr in r.kernel:
                        print("   kernel  " + describe(fr))
            for r in res:
                if a.what == "udp-record-regress" and r.status != "unstable":
                    save_regress(r.name.replace("udp-", f"udp-{mode}-", 1), r.case,
                                 r.kernel_packets, config={"engine": "merge",
                                                           "config": UDP_MODES[mode]})
                if a.what == "udp-explore" and a.save_mismatches and r.status == "mismatch":
                    save_regress(f"mismatch-udp-{mode}-{r.name}", r.case, r.kernel_packets,
                                 config={"engine": "merge", "config": UDP_MODES[mode]})
            n_bad += _summary(res, orc, t0)
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
