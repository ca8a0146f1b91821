"""``pcapgro verify IN OUT``: prove from the Wireshark side that OUT carries
exactly what IN carried.

Both captures are read by tshark (Wireshark's dissectors), one pass per
file, the two passes running at once in two subprocesses, their output read
in step by capture time and compared as it comes, window by window
(:mod:`.window`), so memory stays flat whatever the captures' size.  We call ``tshark -T
fields`` directly instead of going through pyshark: pyshark runs ``tshark
-T pdml``/json and builds a Python object per packet (minutes per 100,000
packets, where one ``-T fields`` pass takes 9-15 s on our slow VM), drives
tshark from an asyncio loop that breaks inside other loops (Jupyter,
``__del__``), and leaves zombie tshark processes behind when a capture is
not closed.  Here each tshark is a plain ``subprocess.Popen``; one loop
reads both pipes and parses lines as they come; every tshark is killed and
reaped in ``finally`` (:mod:`.tshark`).

tshark is asked for the headers only: each payload is read from the
capture itself, where tshark's ports and sequence number say it is
(:mod:`.payload`; tshark's hex payloads were ~40 % of its time), with
tshark's hex as the fallback; the tshark is first checked by a probe
(:mod:`.probe`: version, and fields reading as verify expects).

Modules: :mod:`.fields` (what tshark is asked for), :mod:`.tshark`
(running it), :mod:`.probe` (checking it), :mod:`.payload` (payloads from
the captures), :mod:`.side` (a line -> a packet record of its stream),
:mod:`.stream` (a stream's running state and windows), :mod:`.store`
(first-seen bytes), :mod:`.window` (where windows end), :mod:`.compare`
and :mod:`.rejected` (comparing one window), :mod:`.verdict` (the
result).

What is compared (see :func:`verify`):

* TCP: every stream direction, matched between IN and OUT by its 4-tuple
  (plus VLAN ids; a new SYN with another ISN starts a new stream), not by
  tshark's stream index.  Payload is reassembled from ``tcp.seq_raw`` +
  ``tcp.payload`` taking first-seen bytes for overlaps and retransmissions
  (Wireshark's view with out-of-order reassembly off); the bytes, the
  captured coverage (holes = bytes a packet declared but did not carry),
  the order in which new data arrived, the SYN/FIN/RST events (by sequence
  position) and the sequence of pure ACKs must be the same.
* UDP: every flow (4-tuple): the concatenated payload bytes; datagram
  boundaries where OUT still has them (each OUT datagram lies inside one IN
  datagram -- split, restore -- or starts and ends on IN boundaries --
  merge).
* One reordering is expected, as GRO makes it: a packet GRO rejects before
  flow matching (in IN: bad IPv4 header or TCP/UDP checksum, IPv4 options,
  a header cut short (malformed); UDP also checksum 0 or a UDP length that
  is not the bytes present (padding, trailer); inside GRE with a checksum,
  a TCP segment with PSH, FIN, SYN, RST or URG whose checksum word differs
  from the one before it in its stream, which gre_gro_receive makes another
  flow) is passed at once, ahead of
  the aggregate its flow holds.  Its data may arrive in OUT before data
  that came before it in IN, provided that data is all carried by the OUT
  packets right after it in its stream that were handed up together (one
  timestamp: the aggregate, or the segments ``merge --gso`` cut it into);
  the rejected packets keep their order among themselves, and nothing else
  may move.  Such packets are counted (``passed_ahead`` per protocol) and
  named in a note, not reported as differences.  UDP offsets count
  arrival order, so the flow is compared with the packet moved back to
  where IN had it.  (IP fragments are compared among the other packets,
  so overtaking a TCP/UDP aggregate changes nothing there.)
* Everything else (not TCP/UDP, ICMP, IP fragments, packets tshark cannot
  dissect as TCP/UDP): identical bytes (Wireshark's frame MD5), same order.
* OUT packets must not bring new problems: malformed packets, expert
  errors (other than checksum ones), bad IP/TCP/UDP checksums -- unless an
  IN packet whose data they carry had the same problem; with ``csum=
  "kernel"`` bad TCP/UDP checksums on aggregates (packets whose payload is
  not exactly one IN packet's) are expected.  Frame length >= captured
  length; IP length vs frame (tshark's expert errors); timestamps
  non-decreasing (when IN's are).
"""

from __future__ import annotations

import os
import stat
import sys
import time
import types

from ..errors import UnusableInput
from .fields import TSHARK_PREFS, INSTALL_HINT, MAX_PROBLEMS, tshark_path, decode_as
from .payload import Tunnels, tunnel_peer_ports
from .side import Side
from .tshark import read_both, check_tshark, tshark_version
from .verdict import Verdict
from .window import Comparer

__all__ = ["verify", "Verdict", "tshark_path", "tshark_version", "TSHARK_PREFS", "INSTALL_HINT",
           "not_a_file", "MAX_PROBLEMS"]


def not_a_file(path):
    """What ``path`` is when it exists but is neither a regular file nor a
    directory ('a FIFO', 'a character device', ...), else None.  verify
    reads IN and OUT more than once (pcapgro's header check, then tshark):
    a FIFO would hang the second reader and a device gives nothing to
    compare, so both are refused up front (UnusableInput, exit 2)."""
    try:
        m = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(m) or stat.S_ISDIR(m):
        return None
    if stat.S_ISFIFO(m):
        return "a FIFO"
    if stat.S_ISCHR(m):
        return "a character device"
    if stat.S_ISBLK(m):
        return "a block device"
    if stat.S_ISSOCK(m):
        return "a socket"
    return "not a regular file"


def _check_capture(label, path):
    """Refuse ``path`` as merge and split would (UnusableInput, exit 2):
    opened and its header read by pcapgro's own reader, so that a
    directory, a missing or unreadable file, an empty file or a
    non-capture gives the same message as there, named ``label``."""
    from ..capture import open_reader_file
    name = f"{label} {os.fspath(path)}"
    if not os.fspath(path):     # as merge and split word it
        raise UnusableInput(f"cannot open {label} '': empty file name")
    if not_a_file(path):
        raise UnusableInput(f"verify needs {name} to be a regular file: tshark reads it "
                            f"after pcapgro has checked it (it is {not_a_file(path)})")
    try:
        f = open(path, "rb", buffering=0)
    except OSError as e:
        raise UnusableInput(f"cannot open {name}: {e.strerror or e}") from None
    open_reader_file(f, name).close()



def verify(in_path, out_path, csum="valid", progress=None, vxlan_ports=(), geneve_ports=()):
    """Compare captures IN and OUT through tshark (streaming: memory flat).

    Args:
        in_path, out_path: capture files (pcap / pcapng; not '-').
        csum: 'valid' (every OUT checksum must be good unless IN's data had a
              bad one) or 'kernel' (OUT aggregates carry the kernel's
              checksum: pseudo-header seed / first packet's).
        progress: optional callable(bytes of IN read so far: int), called
              as tshark's output comes (a progress bar's update).
        vxlan_ports, geneve_ports: UDP ports whose datagrams are VXLAN /
              Geneve (as merge's ``--vxlan-port`` / ``--geneve-port``): the
              flow inside is compared, not the datagrams (GRE, IPIP, SIT,
              IP6IP6 always are).  Other UDP is UDP.
    Returns: a :class:`Verdict` (``status`` 0 faithful / 1 differences,
        ``problems``, ``to_dict()`` for JSON, ``stats``).
    Raises: UnusableInput (no tshark or one too old; IN or OUT missing, a
            directory, unreadable, empty or not a capture: as merge would
            say; tshark refusing IN).
    """
    t0 = time.perf_counter()
    tshark = tshark_path()
    for label, p in (("IN", in_path), ("OUT", out_path)):
        if p == "-":
            raise UnusableInput(f"verify needs {label} to be a file, not standard input/output")
        _check_capture(label, p)
    state = {}
    tunnels = Tunnels(vxlan_ports, geneve_ports)
    decode = decode_as(tunnels, tunnel_peer_ports((in_path, out_path), tunnels)
                       if tunnels else frozenset())

    def make_sides(md5):
        v = state["v"] = Verdict(in_path, out_path, csum)
        c = state["c"] = Comparer(v, csum)
        sides = [Side("IN", in_path, 0, c.on_flow, tunnels, decode),
                 Side("OUT", out_path, 1, c.on_flow, tunnels, decode)]
        for s in sides:
            s.md5 = md5
        c.sides = sides
        return sides

    def after_chunk():
        state["c"].after_chunk()
        if progress is not None:
            progress(state["c"].sides[0].bytes_read)
    a, b = read_both(tshark, make_sides, after_chunk)
    v, c = state["v"], state["c"]
    if b.error:
        v.add("damaged", f"OUT is damaged after frame {b.frames + b.cb_frames}: {b.error}")
    c.finish()
    _compare_frames(a, b, v)
    v.stats = _stats(a, b, c, v)
    n = v.ahead["tcp"] + v.ahead["udp"]
    if n:
        v.notes.append(f"{n} packet{'s' if n != 1 else ''} GRO rejects before matching "
                       "(bad checksum, IPv4 options, header cut short; in GRE with a "
                       "checksum, another checksum word) arrived ahead of "
                       "the held aggregate of their flow, as Linux passes them: expected, "
                       "not a difference")
    v.seconds = time.perf_counter() - t0
    return v


def _stats(a, b, c, v):
    pairs = c.pairs.values()
    tcp = [p for p in pairs if p.proto == "tcp"]
    udp = [p for p in pairs if p.proto == "udp"]

    def side(ps, k, attr):
        return sum(getattr(p.flows[k], attr) for p in ps if p.flows[k] is not None)
    return {
        "frames_in": a.frames, "frames_out": b.frames,
        "tcp": {"streams": len(tcp),
                "connections": len({_conn(p.key) for p in tcp}),
                "bytes": sum(p.bytes for p in tcp),
                "events": sum(len(p.flows[0].events) for p in tcp if p.flows[0] is not None),
                "pure_acks": side(tcp, 0, "n_acks"),
                "packets_in": side(tcp, 0, "npkts"), "packets_out": side(tcp, 1, "npkts"),
                "passed_ahead": v.ahead["tcp"], "windows": sum(p.windows for p in tcp)},
        "udp": {"flows": len(udp), "bytes": sum(p.bytes for p in udp),
                "datagrams_in": side(udp, 0, "npkts"), "datagrams_out": side(udp, 1, "npkts"),
                "passed_ahead": v.ahead["udp"], "windows": sum(p.windows for p in udp)},
        "other": {"packets": a.n_other, "md5": a.md5},
        "payloads": "capture" if a.pkts is not None else "tshark",
    }


def _conn(key):
    vlan, src, sp, dst, dp = key
    return (vlan,) + tuple(sorted([(src, sp), (dst, dp)]))


def _compare_frames(a, b, v):
    for fr, msg in b.len_bad:
        v.add("length", msg, out_frame=fr)
    for _ in range(b.n_len_bad - len(b.len_bad)):
        v.add("length", "captured length > frame length")
    if b.n_ts_back:
        if a.n_ts_back:
            v.notes.append(f"timestamps go backwards {b.n_ts_back} times in OUT "
                           f"({a.n_ts_back} in IN)")
        else:
            for fr in b.ts_back:
                v.add("timestamp", "timestamp earlier than the previous frame's", out_frame=fr)
            extra = b.n_ts_back - len(b.ts_back)
            v.problems_total += extra
            v.by_kind["timestamp"] = v.by_kind.get("timestamp", 0) + extra


class _CallableModule(types.ModuleType):
    """This module, callable as the library's :func:`pcapgro.jobs.verify`
    (so ``pcapgro.verify(IN, OUT)`` and ``from pcapgro import verify`` both
    keep working; pcapgro imports this module only when asked for it)."""

    def __call__(self, in_path, out_path, csum="valid", progress=None):
        from ..jobs import verify as job
        return job(in_path, out_path, csum, progress)


sys.modules[__name__].__class__ = _CallableModule
