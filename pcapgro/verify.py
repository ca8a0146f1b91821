"""``pcapgro verify IN OUT``: prove from the Wireshark side that OUT carries
exactly what IN carried.

Both captures are read by tshark (Wireshark's dissectors), one pass per
file, the two passes running in parallel subprocesses.  We call ``tshark -T
fields`` directly instead of going through pyshark: pyshark runs ``tshark
-T pdml``/json and builds a Python object per packet (minutes per 100,000
packets, where one ``-T fields`` pass takes 9-15 s on our slow VM), drives
tshark from an asyncio loop that breaks inside other loops (Jupyter,
``__del__``), and leaves zombie tshark processes behind when a capture is
not closed.  Here each tshark is a plain ``subprocess.Popen``; one loop
reads both pipes and parses lines as they come; every tshark is killed and
reaped in ``finally``.

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
  is not the bytes present (padding, trailer)) is passed at once, ahead of
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

import binascii
import bisect
import os
import selectors
import shutil
import subprocess
import stat
import tempfile
import time

from .errors import UnusableInput, EXIT_OK, EXIT_DIFFER
from .text import count, fit

__all__ = ["verify", "Verdict", "tshark_path", "TSHARK_PREFS", "INSTALL_HINT"]

INSTALL_HINT = "tshark not found on PATH: install it (apt-get install tshark)"

# Preferences verify relies on, pinned so that Wireshark 4.0 (Debian 12) and
# 4.4 (Debian 13) see the same thing whatever their defaults are.
TSHARK_PREFS = [
    # checksums are not checked by default
    "ip.check_checksum:TRUE", "tcp.check_checksum:TRUE", "udp.check_checksum:TRUE",
    "udp.ignore_ipv6_zero_checksum:FALSE",
    # one packet = one dissection: no TCP reassembly across packets, no IP
    # defragmentation (a fragment is compared byte for byte)
    "tcp.desegment_tcp_streams:FALSE", "tcp.reassemble_out_of_order:FALSE",
    "ip.defragment:FALSE", "ipv6.defragment:FALSE",
    "tcp.analyze_sequence_numbers:TRUE",
    # IPv4 total length 0 / IPv6 payload length 0 = TSO/GSO super-frames
    "ip.tso_support:TRUE", "ipv6.tso_support:TRUE",
    # port tables before heuristics (we force 'data' on all ports below)
    "tcp.try_heuristic_first:FALSE", "udp.try_heuristic_first:FALSE",
]
# TCP and UDP payloads are handed to the 'data' dissector: application
# dissectors differ between Wireshark versions (4.4 has iperf3, ...) and
# would see aggregates differently from segments; we compare the transport.
DECODE_AS = ["tcp.port==0-65535,data", "udp.port==0-65535,data"]
MD5_PREF = "frame.generate_md5_hash:TRUE"

SEP = "\x1e"    # field separator of tshark's output
AGG = "\x1f"    # separator of a field's occurrences

FIELDS = [
    "frame.number", "frame.time_epoch", "frame.len", "frame.cap_len", "frame.protocols",
    "frame.md5_hash", "frame.cb_pen", "vlan.id",
    "ip.src", "ip.dst", "ipv6.src", "ipv6.dst",
    "ip.flags.mf", "ip.frag_offset", "ipv6.fraghdr.ident", "ip.checksum.status",
    "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw", "tcp.len", "tcp.flags",
    "tcp.checksum.status", "tcp.payload",
    "udp.srcport", "udp.dstport", "udp.length", "udp.checksum.status", "udp.payload",
    "_ws.malformed", "_ws.expert.severity", "_ws.expert.group", "_ws.expert.message",
    "ip.hdr_len", "udp.checksum", "eth.padding", "eth.trailer",
]
(F_NUM, F_TS, F_LEN, F_CAPLEN, F_PROTOS, F_MD5, F_CB, F_VLAN, F_IPSRC, F_IPDST, F_V6SRC,
 F_V6DST, F_MF, F_FRAGOFF, F_V6FRAG, F_IPCS, F_TSPORT, F_TDPORT, F_SEQ, F_ACK, F_TLEN,
 F_TFLAGS, F_TCS, F_TPAY, F_USPORT, F_UDPORT, F_ULEN, F_UCS, F_UPAY, F_MAL, F_SEV, F_GRP,
 F_MSG, F_IPHL, F_UCSUM, F_PAD, F_TRAILER) = range(len(FIELDS))
_NFIELDS = len(FIELDS)

_SEV_ERROR = {"8388608", "Error", "error"}           # PI_ERROR
_GRP_CHECKSUM = {"16777216", "Checksum", "checksum"}  # PI_CHECKSUM
_BAD = {"0", "Bad", "bad"}                            # PROTO_CHECKSUM_E_BAD
_TRUE = {"1", "True", "true", "TRUE"}
_FALSE = {"0", "False", "false", "FALSE"}

SYN, FIN, RST = 0x02, 0x01, 0x04
_RANK = {k: i for i, k in enumerate(("damaged", "payload", "missing", "extra", "order", "event",
                                     "ack", "boundary", "other", "length"))}
MAX_PROBLEMS = 1000          # kept in full; more are only counted

# problem categories carried by a packet (checked against IN's)
CAT_IPCS, CAT_L4CS, CAT_MAL, CAT_EXPERT = "ip-checksum", "checksum", "malformed", "expert"


def tshark_path():
    """Path of tshark, or raise UnusableInput with the install hint."""
    p = shutil.which("tshark")
    if p is None:
        raise UnusableInput(INSTALL_HINT)
    return p


# --------------------------------------------------------------------------
# reassembly store: disjoint, non-adjacent intervals with their bytes


class _Store:
    """First-seen byte store over an integer offset space."""

    __slots__ = ("st", "en", "buf", "order")

    def __init__(self):
        self.st, self.en, self.buf = [], [], []
        self.order = []     # [start, end, frame] of new data, arrival order, merged

    def add(self, s, data, frame):
        """Add ``data`` at offset ``s``; bytes already present win."""
        n = len(data)
        if not n:
            return
        e = s + n
        st, en, buf = self.st, self.en, self.buf
        if not st or s > en[-1]:
            st.append(s), en.append(e), buf.append(bytearray(data))
            self._new(s, e, frame)
            return
        if s == en[-1]:
            buf[-1] += data
            en[-1] = e
            self._new(s, e, frame)
            return
        lo = bisect.bisect_left(en, s)
        hi = bisect.bisect_right(st, e)
        if lo >= hi:
            st.insert(lo, s), en.insert(lo, e), buf.insert(lo, bytearray(data))
            self._new(s, e, frame)
            return
        ns, ne = min(s, st[lo]), max(e, en[hi - 1])
        out = bytearray()
        pos = ns
        for j in range(lo, hi):
            if st[j] > pos:
                out += data[pos - s:st[j] - s]
                self._new(pos, st[j], frame)
            out += buf[j]
            pos = en[j]
        if pos < ne:
            out += data[pos - s:]
            self._new(pos, ne, frame)
        st[lo:hi], en[lo:hi], buf[lo:hi] = [ns], [ne], [out]

    def _new(self, a, b, frame):
        o = self.order
        if o and o[-1][1] == a:
            o[-1][1] = b
        else:
            o.append([a, b, frame])

    def nbytes(self):
        return sum(e - s for s, e in zip(self.st, self.en))

    def get(self, s, e):
        """The stored bytes at offsets [s, e) (bytes; only those of the
        stored interval holding ``s``, so shorter where a hole begins)."""
        i = bisect.bisect_right(self.st, s) - 1
        if i < 0 or s >= self.en[i]:
            return b""
        b = self.buf[i]
        return bytes(b[s - self.st[i]:min(e, self.en[i]) - self.st[i]])


def _first_diff(a, b):
    """First offset where stores ``a`` (IN) and ``b`` (OUT) differ:
    (offset, 'missing' | 'extra' | 'differs') or None."""
    i = j = 0
    na, nb = len(a.st), len(b.st)
    while i < na or j < nb:
        if i == na:
            return b.st[j], "extra"
        if j == nb:
            return a.st[i], "missing"
        s1, e1, s2, e2 = a.st[i], a.en[i], b.st[j], b.en[j]
        if s1 != s2:
            return (s1, "missing") if s1 < s2 else (s2, "extra")
        n = min(e1, e2) - s1
        b1, b2 = a.buf[i], b.buf[j]
        if (b1 != b2) if e1 == e2 else (b1[:n] != b2[:n]):
            k, step = 0, 4096
            while k < n:
                if b1[k:k + step] != b2[k:k + step]:
                    while b1[k] == b2[k]:
                        k += 1
                    return s1 + k, "differs"
                k += step
        if e1 != e2:
            return (e2, "missing") if e1 > e2 else (e1, "extra")
        i += 1
        j += 1
    return None


# --------------------------------------------------------------------------
# per-file model


class _Stream:
    """One direction of a TCP connection, or a UDP flow (offsets = bytes of
    payload so far)."""

    __slots__ = ("key", "gen", "store", "segs", "events", "acks", "flagged", "last",
                 "syn_seq", "npkts", "udp_end", "rej", "_idx")

    def __init__(self, key, gen):
        self.key, self.gen = key, gen
        self.store = _Store()
        self.segs = []          # (frame, start, nominal length, captured length)
        self.events = {}        # (kind, position) -> first frame
        self.acks = []          # (ack, frame) of pure ACKs
        self.flagged = []       # (start, end, frame, frozenset of categories)
        self.last = None        # last absolute sequence number (unwrapping)
        self.syn_seq = None
        self.npkts = 0
        self.udp_end = 0
        self.rej = set()        # frames GRO rejects before matching (see _Side.line)
        self._idx = None

    def abs_seq(self, raw):
        if self.last is None:
            self.last = raw
            return raw
        d = (raw - self.last) & 0xFFFFFFFF
        if d >= 0x80000000:
            d -= 0x100000000
        self.last += d
        return self.last

    def find_seg(self, pos, nominal=False, after=False):
        """Frame of the first segment (capture order) carrying ``pos``
        (declared range when nominal); after: the segment starting first
        after ``pos``."""
        if after:
            best = None
            for fr, s, n, c in self.segs:
                if s > pos and (best is None or s < best[1]):
                    best = (fr, s)
            return best[0] if best else None
        for fr, s, n, c in self.segs:
            if s <= pos < s + (n if nominal else c):
                return fr
        return None

    def flag_index(self):
        """({category: set of (start, end) of flagged segments}, set of the
        (start, end) of every segment)."""
        if self._idx is None:
            idx = {}
            for st, e, fr, cats in self.flagged:
                for c in cats:
                    idx.setdefault(c, set()).add((st, e))
            self._idx = (idx, {(st, st + n) for fr, st, n, c in self.segs})
        return self._idx


class _Side:
    """What verify keeps of one capture."""

    def __init__(self, label, path):
        self.label, self.path = label, path
        self.frames = 0
        self.cb_frames = 0
        self.tcp = {}           # (key, gen) -> _Stream
        self.tcp_cur = {}       # key -> current _Stream
        self.udp = {}           # key -> _Stream
        self.other = []         # (frame, md5, len, cats)
        self.ts_back = []       # frames whose timestamp went backwards
        self.len_bad = []       # (frame, message)
        self.last_ts = None
        self.ts_of = {}         # frame -> timestamp (int ns or None)
        self.error = None       # tshark's complaint (cut short, ...)
        self.md5 = True
        self._keys = {}

    # -- one tshark output line (the hot loop: keep it lean)
    def line(self, line):
        f = line.split(SEP)
        if len(f) < _NFIELDS:
            return
        frame = int(f[F_NUM])
        if f[F_CB]:
            self.cb_frames += 1
            return
        self.frames += 1
        ts = self.ts_of[frame] = _parse_ts(f[F_TS])
        if ts is not None:
            if self.last_ts is not None and ts < self.last_ts:
                self.ts_back.append(frame)
            self.last_ts = ts
        flen, caplen = _int(f[F_LEN]), _int(f[F_CAPLEN])
        if flen is not None and caplen is not None and caplen > flen:
            self.len_bad.append((frame, f"captured length {caplen} > frame length {flen}"))
        cats = None
        if f[F_MAL] or f[F_SEV] or "0" in f[F_IPCS] or "B" in f[F_IPCS]:
            cats = set()
            if f[F_MAL]:
                cats.add(CAT_MAL)
            if f[F_SEV]:
                grps = f[F_GRP].split(AGG)
                for i, sv in enumerate(f[F_SEV].split(AGG)):
                    if sv in _SEV_ERROR and (i >= len(grps) or grps[i] not in _GRP_CHECKSUM):
                        cats.add(CAT_EXPERT)
            if f[F_IPCS] and not _BAD.isdisjoint(f[F_IPCS].split(AGG)):
                cats.add(CAT_IPCS)
        # rejected by GRO before flow matching (so it may overtake its flow's
        # held aggregate): bad IPv4 header checksum, a header cut short
        # (malformed), IPv4 options; L4 checksums are added in _tcp / _udp
        hl = f[F_IPHL]
        rej = ((cats is not None and (CAT_IPCS in cats or CAT_MAL in cats))
               or (hl != "" and hl != "20" and any(x != "20" for x in hl.split(AGG))))
        protos = f[F_PROTOS]
        mf, fo = f[F_MF], f[F_FRAGOFF]
        plain = ("icmp" not in protos and not f[F_V6FRAG]
                 and (not mf or mf in _FALSE or _TRUE.isdisjoint(mf.split(AGG)))
                 and (not fo or fo == "0" or all(x in ("", "0") for x in fo.split(AGG))))
        if plain and f[F_SEQ] and f[F_TLEN] and f[F_TSPORT] and ":tcp" in protos:
            self._tcp(frame, f, cats, rej)
        elif plain and f[F_USPORT] and f[F_ULEN] and ":udp" in protos:
            self._udp(frame, f, cats, rej)
        else:
            self.other.append((frame, f[F_MD5], flen, frozenset(cats or ())))

    def key(self, f, sport, dport):
        """(vlan ids, src, sport, dst, dport) of the innermost IP header, cached."""
        ck = (f[F_PROTOS], f[F_VLAN], f[F_IPSRC], f[F_IPDST], f[F_V6SRC], f[F_V6DST], sport, dport)
        k = self._keys.get(ck)
        if k is None:
            k = self._keys[ck] = _key(f, f[F_PROTOS].split(":"), sport, dport)
        return k

    def _tcp(self, frame, f, cats, rej=False):
        key = self.key(f, f[F_TSPORT], f[F_TDPORT])
        v = f[F_SEQ]
        raw = int(v if AGG not in v else _last(v))
        v = f[F_TLEN]
        nominal = int(v if AGG not in v else _last(v))
        v = f[F_TFLAGS]
        flags = int(v if AGG not in v else _last(v), 16) if v else 0
        v = f[F_TPAY]
        payload = _unhex(v if AGG not in v else _last(v)) if v else b""
        if len(payload) > nominal:
            payload = payload[:nominal]
        v = f[F_TCS]
        if v and (v if AGG not in v else _last(v)) in _BAD:
            if cats is None:
                cats = set()
            cats.add(CAT_L4CS)
            rej = True
        st = self.tcp_cur.get(key)
        if st is None or (flags & SYN and st.npkts and st.syn_seq is not None
                          and raw != st.syn_seq) or (flags & SYN and st.syn_seq is None
                                                      and st.npkts):
            gen = 0 if st is None else st.gen + 1
            st = _Stream(key, gen)
            self.tcp_cur[key] = st
            self.tcp[(key, gen)] = st
        st.npkts += 1
        a = st.abs_seq(raw)
        if flags & 0x07:
            if flags & SYN:
                if st.syn_seq is None:
                    st.syn_seq = raw
                st.events.setdefault(("SYN", a), frame)
                a += 1
            if flags & RST:
                st.events.setdefault(("RST", a), frame)
            if flags & FIN:
                st.events.setdefault(("FIN", a + nominal), frame)
        elif nominal == 0 and f[F_ACK]:
            st.acks.append((int(_last(f[F_ACK])), frame))
        st.segs.append((frame, a, nominal, len(payload)))
        if payload:
            st.store.add(a, payload, frame)
        if cats:
            st.flagged.append((a, a + nominal, frame, frozenset(cats)))
        if rej:
            st.rej.add(frame)

    def _udp(self, frame, f, cats, rej=False):
        key = self.key(f, f[F_USPORT], f[F_UDPORT])
        payload = _unhex(_last(f[F_UPAY])) if f[F_UPAY] else b""
        ulen = _int(_last(f[F_ULEN]))
        declared = ulen - 8 if ulen is not None and ulen >= 8 else len(payload)
        if ulen == 0:                   # IPv6 jumbogram
            declared = len(payload)
        payload = payload[:declared]
        if f[F_UCS] and _last(f[F_UCS]) in _BAD:
            if cats is None:
                cats = set()
            cats.add(CAT_L4CS)
            rej = True
        # UDP GRO also rejects checksum 0 and a UDP length other than the
        # bytes present (Ethernet padding or trailer after the datagram)
        if _last(f[F_UCSUM]) in ("0x0000", "0") or f[F_PAD] or f[F_TRAILER]:
            rej = True
        st = self.udp.get(key)
        if st is None:
            st = self.udp[key] = _Stream(key, 0)
        st.npkts += 1
        a = st.udp_end
        st.udp_end += declared
        st.segs.append((frame, a, declared, len(payload)))
        st.store.add(a, payload, frame)
        if cats:
            st.flagged.append((a, a + declared, frame, frozenset(cats)))
        if rej:
            st.rej.add(frame)


def _last(v):
    i = v.rfind(AGG)
    return v if i < 0 else v[i + 1:]


def _int(v):
    try:
        return int(_last(v))
    except ValueError:
        return None


def _unhex(h):
    if ":" in h:
        h = h.replace(":", "")
    return binascii.unhexlify(h)


def _parse_ts(v):
    sec, dot, frac = v.partition(".")
    try:
        return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9] if dot else 0)
    except ValueError:
        return None


def _key(f, protos, sport, dport):
    """(vlan ids, src, sport, dst, dport) of the innermost IP header."""
    v4 = max((i for i, p in enumerate(protos) if p == "ip"), default=-1)
    v6 = max((i for i, p in enumerate(protos) if p == "ipv6"), default=-1)
    if v6 > v4:
        src, dst = _last(f[F_V6SRC]), _last(f[F_V6DST])
    else:
        src, dst = _last(f[F_IPSRC]), _last(f[F_IPDST])
    return (f[F_VLAN], src, _last(sport), dst, _last(dport))


def _key_str(key, proto):
    vlan, src, sp, dst, dp = key
    fmt = (lambda a, p: f"[{a}]:{p}" if ":" in a else f"{a}:{p}")
    v = f" vlan {vlan.replace(AGG, '.')}" if vlan else ""
    return f"{proto} {fmt(src, sp)} -> {fmt(dst, dp)}{v}"


# --------------------------------------------------------------------------
# running tshark


def _tshark_cmd(tshark, path, md5=True):
    cmd = [tshark, "-n", "-r", os.fspath(path), "-T", "fields",
           "-E", f"separator={SEP}", "-E", "occurrence=a", "-E", f"aggregator={AGG}",
           "-E", "header=n", "-E", "quote=n"]
    for p in TSHARK_PREFS + ([MD5_PREF] if md5 else []):
        cmd += ["-o", p]
    for d in DECODE_AS:
        cmd += ["-d", d]
    for fld in FIELDS:
        cmd += ["-e", fld]
    return cmd


def _tshark_env(confdir):
    env = dict(os.environ)
    # an empty personal configuration: the user's preferences, Decode As
    # entries, disabled protocols and heuristics must not change what we see
    env["WIRESHARK_CONFIG_DIR"] = confdir
    env["XDG_CONFIG_HOME"] = confdir
    env.setdefault("LC_ALL", "C")
    return env


def _pump(procs, sides):
    """Read the tshark pipes in this one thread (selectors, 1 MiB reads) and
    parse each complete line as it comes.  No reader threads: a thread
    parsing CPU-bound while another waits on a pipe hits the GIL convoy
    effect (each small read waits a switch interval), which made two
    threads ~30 times slower than this loop."""
    sel = selectors.DefaultSelector()
    pending = {}
    for p, s in zip(procs, sides):
        fd = p.stdout.fileno()
        sel.register(fd, selectors.EVENT_READ, s)
        pending[fd] = b""
    while sel.get_map():
        for key, _ in sel.select():
            fd, side = key.fd, key.data
            data = os.read(fd, 1 << 20)
            if not data:
                sel.unregister(fd)
                if pending[fd]:
                    side.line(pending[fd].decode("utf-8", "replace"))
                continue
            data = pending[fd] + data
            cut = data.rfind(b"\n") + 1
            pending[fd] = data[cut:]
            if cut:
                line = side.line
                for ln in data[:cut - 1].decode("utf-8", "replace").split("\n"):
                    line(ln)
    sel.close()


def _stderr_lines(f):
    f.seek(0)
    return [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines()
            if ln.strip() and "Running as user" not in ln and "dangerous" not in ln]


def _read_both(tshark, sides):
    """Run tshark over both sides in parallel; fills them in."""
    confdir = tempfile.mkdtemp(prefix="pcapgro-verify-")
    env = _tshark_env(confdir)
    try:
        md5 = True
        for attempt in (0, 1):
            procs, errs = [], []
            try:
                for s in sides:
                    errs.append(tempfile.TemporaryFile(dir=confdir))
                    procs.append(subprocess.Popen(
                        _tshark_cmd(tshark, s.path, md5), stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE, stderr=errs[-1], env=env))
                _pump(procs, sides)
                results = [(p.wait(), _stderr_lines(e)) for p, e in zip(procs, errs)]
            finally:
                for p in procs:         # never leave a tshark behind
                    if p.poll() is None:
                        p.kill()
                    try:
                        p.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        pass
                    p.stdout.close()
                for e in errs:
                    e.close()
            pref_refused = any(rc != 0 and any("generate_md5_hash" in m for m in msg)
                               for rc, msg in results)
            if pref_refused and md5:
                # a tshark without the frame MD5 preference: other packets are
                # then compared by length only (said in the summary)
                md5 = False
                for s in sides:
                    s.__init__(s.label, s.path)
                    s.md5 = False
                continue
            break
        for s, (rc, msg) in zip(sides, results):
            if rc != 0:
                text = "; ".join(m.removeprefix("tshark: ") for m in msg) or f"tshark exit status {rc}"
                if s.label == "OUT" and s.frames and ("cut short" in text or "damaged" in text
                                                      or "corrupt" in text):
                    s.error = text
                    continue
                raise UnusableInput(f"{s.label} {s.path}: {text}")
    finally:
        shutil.rmtree(confdir, ignore_errors=True)


# --------------------------------------------------------------------------
# comparison


class Verdict:
    """Result of :func:`verify`: ``status`` (0 faithful, 1 differences),
    ``problems`` (dicts: kind, out_frame, in_frame, stream, message; the
    first :data:`MAX_PROBLEMS`), ``problems_total``, ``stats``."""

    def __init__(self, in_path, out_path, csum):
        self.in_path, self.out_path, self.csum = in_path, out_path, csum
        self.problems = []
        self.problems_total = 0
        self.by_kind = {}
        self.stats = {}
        self.notes = []
        self.ahead = {"tcp": 0, "udp": 0}   # packets GRO rejected that overtook (not problems)
        self.seconds = 0.0

    def add(self, kind, message, out_frame=None, in_frame=None, stream=None):
        self.problems_total += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append({"kind": kind, "out_frame": out_frame, "in_frame": in_frame,
                                  "stream": stream, "message": message})

    @property
    def status(self):
        return EXIT_DIFFER if self.problems_total else EXIT_OK

    def sorted_problems(self):
        """By OUT frame; at one frame, content differences first."""
        return sorted(self.problems, key=lambda p: (p["out_frame"] is None, p["out_frame"] or 0,
                                                    _RANK.get(p["kind"], 9), p["in_frame"] or 0))

    def to_dict(self):
        return {"result": "differ" if self.problems_total else "faithful",
                "in": os.fspath(self.in_path), "out": os.fspath(self.out_path),
                "csum": self.csum, **self.stats, "seconds": round(self.seconds, 3),
                "notes": self.notes, "problems_total": self.problems_total,
                "problems_by_kind": self.by_kind, "problems": self.sorted_problems()}

    def problem_lines(self, limit=10):
        lines = []
        for p in self.sorted_problems()[:limit]:
            where = f"OUT frame {p['out_frame']}" if p["out_frame"] else "OUT"
            if p["in_frame"]:
                where += f" (IN frame {p['in_frame']})"
            st = f", {p['stream']}" if p["stream"] else ""
            lines.append(f"  {where}{st}: {p['message']}")
        if self.problems_total > limit:
            lines.append(f"  ... {self.problems_total - limit:,} more "
                         f"({', '.join(f'{k} {n:,}' for k, n in sorted(self.by_kind.items()))})")
        return fit(lines)

    def summary_lines(self, limit=10):
        s = self.stats
        t, u, o = s["tcp"], s["udp"], s["other"]
        lines = [
            f"verify  IN  {self.in_path}: {count(s['frames_in'], 'frame')}",
            f"        OUT {self.out_path}: {count(s['frames_out'], 'frame')}",
            f"  TCP    {count(t['streams'], 'stream')} ({count(t['connections'], 'connection')}): "
            f"{count(t['bytes'], 'payload byte')} compared, {t['events']:,} SYN/FIN/RST, "
            f"{count(t['pure_acks'], 'pure ACK')}; {t['packets_in']:,} -> "
            f"{count(t['packets_out'], 'packet')}",
            f"  UDP    {count(u['flows'], 'flow')}: {count(u['bytes'], 'payload byte')} compared; "
            f"{u['datagrams_in']:,} -> {count(u['datagrams_out'], 'datagram')}",
            f"  other  {count(o['packets'], 'packet')} compared "
            + ("byte for byte (frame MD5)" if o["md5"] else "by length (no frame MD5 in this tshark)"),
            "  checks payload, order, SYN/FIN/RST, ACKs, datagram boundaries, "
            f"checksums (csum {self.csum}), malformed, expert errors, lengths, timestamps",
        ]
        lines += [f"  note: {n}" for n in self.notes]
        if self.problems_total:
            lines.append(f"DIFFERENT: {self.problems_total:,} problem"
                         f"{'s' if self.problems_total != 1 else ''} ({self.seconds:.1f} s)")
            lines += self.problem_lines(limit)
        else:
            lines.append(f"faithful: OUT carries exactly what IN carried ({self.seconds:.1f} s)")
        return lines[:2] + fit(lines[2:])       # IN and OUT lines: the paths as given


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
    from .capture import open_reader_file
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


def verify(in_path, out_path, csum="valid"):
    """Compare captures IN and OUT through tshark.

    Args:
        in_path, out_path: capture files (pcap / pcapng; not '-').
        csum: 'valid' (every OUT checksum must be good unless IN's data had a
              bad one) or 'kernel' (OUT aggregates carry the kernel's
              checksum: pseudo-header seed / first packet's).
    Returns: a :class:`Verdict`.
    Raises: UnusableInput (no tshark; IN or OUT missing, a directory,
            unreadable, empty or not a capture: as merge would say).
    """
    t0 = time.perf_counter()
    tshark = tshark_path()
    for label, p in (("IN", in_path), ("OUT", out_path)):
        if p == "-":
            raise UnusableInput(f"verify needs {label} to be a file, not standard input/output")
        _check_capture(label, p)
    a, b = _Side("IN", in_path), _Side("OUT", out_path)
    _read_both(tshark, [a, b])
    v = Verdict(in_path, out_path, csum)
    if b.error:
        v.add("damaged", f"OUT is damaged after frame {b.frames + b.cb_frames}: {b.error}")
    _compare_tcp(a, b, v, csum)
    _compare_udp(a, b, v, csum)
    _compare_other(a, b, v)
    _compare_frames(a, b, v)
    v.stats = {
        "frames_in": a.frames, "frames_out": b.frames,
        "tcp": {"streams": len(set(a.tcp) | set(b.tcp)),
                "connections": len({_conn(k) for k, g in set(a.tcp) | set(b.tcp)}),
                "bytes": sum(s.store.nbytes() for s in a.tcp.values()),
                "events": sum(len(s.events) for s in a.tcp.values()),
                "pure_acks": sum(len(s.acks) for s in a.tcp.values()),
                "packets_in": sum(s.npkts for s in a.tcp.values()),
                "packets_out": sum(s.npkts for s in b.tcp.values()),
                "passed_ahead": v.ahead["tcp"]},
        "udp": {"flows": len(set(a.udp) | set(b.udp)),
                "bytes": sum(s.store.nbytes() for s in a.udp.values()),
                "datagrams_in": sum(s.npkts for s in a.udp.values()),
                "datagrams_out": sum(s.npkts for s in b.udp.values()),
                "passed_ahead": v.ahead["udp"]},
        "other": {"packets": len(a.other), "md5": a.md5},
    }
    n = v.ahead["tcp"] + v.ahead["udp"]
    if n:
        v.notes.append(f"{n} packet{'s' if n != 1 else ''} GRO rejects before matching "
                       "(bad checksum, IPv4 options, header cut short) arrived ahead of "
                       "the held aggregate of their flow, as Linux passes them: expected, "
                       "not a difference")
    v.seconds = time.perf_counter() - t0
    return v


def _conn(key):
    vlan, src, sp, dst, dp = key
    return (vlan,) + tuple(sorted([(src, sp), (dst, dp)]))


def _compare_streams(a, b, v, proto, csum, sa, sb, name):
    """Bytes, coverage and order of one stream / flow."""
    if sb is None:
        if sa.store.st or sa.events:
            fr = sa.segs[0][0] if sa.segs else None
            v.add("missing", f"{proto.upper()} {'stream' if proto == 'tcp' else 'flow'} "
                  "missing from OUT", in_frame=fr, stream=name)
        return False
    if sa is None:
        if sb.store.st or sb.events:
            v.add("extra", "not in IN", out_frame=sb.segs[0][0] if sb.segs else None, stream=name)
        return False
    ok = True
    d = _first_diff(sa.store, sb.store)
    base = sa.syn_seq + 1 if sa.syn_seq is not None else (sa.segs[0][1] if sa.segs else 0)
    unit = "seq" if proto == "tcp" else "payload offset"

    def where(pos):
        if proto == "tcp":
            return f"{unit} {pos & 0xFFFFFFFF} (relative {pos - base})"
        return f"{unit} {pos}"
    if d is not None:
        ok = False
        pos, kind = d
        fin = sa.find_seg(pos)
        if kind == "differs":
            v.add("payload", f"payload byte differs at {where(pos)}",
                  out_frame=sb.find_seg(pos), in_frame=fin, stream=name)
        elif kind == "missing":
            fo = sb.find_seg(pos, nominal=True)
            if fo is not None:
                v.add("missing", f"bytes from {where(pos)} not captured (packet truncated)",
                      out_frame=fo, in_frame=fin, stream=name)
            else:
                # the OUT packet ending at the hole was cut short when tshark
                # found it broken (IP length beyond the frame: an expert
                # error); else packets are missing, named by the OUT frame
                # that follows the hole
                broken = {fr for s, e, fr, cats in sb.flagged if CAT_EXPERT in cats or CAT_MAL in cats}
                cut = next((fr for fr, s, n, c in sb.segs if s < pos and s + c == pos
                            and fr in broken), None)
                if cut is not None:
                    v.add("missing", f"bytes from {where(pos)} missing: packet cut short "
                          f"(IN frame {fin} carried them)", out_frame=cut, in_frame=fin,
                          stream=name)
                else:
                    v.add("missing", f"bytes from {where(pos)} missing (IN frame {fin} "
                          "carried them)", out_frame=sb.find_seg(pos, after=True),
                          in_frame=fin, stream=name)
        else:
            v.add("extra", f"bytes at {where(pos)} that IN does not have",
                  out_frame=sb.find_seg(pos), in_frame=sa.find_seg(pos, nominal=True),
                  stream=name)
    else:
        oa, ob = sa.store.order, sb.store.order
        for k in range(max(len(oa), len(ob))):
            x = oa[k] if k < len(oa) else None
            y = ob[k] if k < len(ob) else None
            if x is not None and y is not None and x[0] == y[0] and x[1] == y[1]:
                continue
            moved = _tcp_rejected_ahead(sa, sb, b.ts_of) if proto == "tcp" else None
            if moved is not None:
                v.ahead[proto] += moved         # the GRO model's reordering
                break
            ok = False
            if x is not None and y is not None and x[0] == y[0] and y[1] < x[1] and k + 1 < len(ob):
                z = ob[k + 1]
                v.add("order", f"data at {where(z[0])} arrives before {where(y[1])} "
                      "(out of order compared with IN)", out_frame=z[2],
                      in_frame=sa.find_seg(z[0]), stream=name)
            elif y is not None:
                v.add("order", f"data at {where(y[0])} arrives in another order than in IN",
                      out_frame=y[2], in_frame=sa.find_seg(y[0]), stream=name)
            else:
                v.add("order", "data arrives in another order than in IN",
                      in_frame=x[2] if x else None, stream=name)
            break
    return ok


def _union(ranges, adjacent=True):
    """Sorted disjoint (start, end) covering ``ranges`` (iterable of pairs);
    ranges that only touch are joined too unless ``adjacent`` is False."""
    out = []
    for s, e in sorted(ranges):
        if out and (s <= out[-1][1] if adjacent else s < out[-1][1]):
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return out


def _cut_rejected(order, rej):
    """Split a TCP stream's arrival order into rejected and other data.

    Args:
        order: ``_Store.order``: [start, end, frame] of new data, arrival
               order (absolute sequence numbers, end exclusive).
        rej:   sorted disjoint [start, end] ranges (:func:`_union`) of the
               data of packets GRO rejects before matching.
    Returns:
        (kept, pieces): kept = [[start, end]] of the other data in arrival
        order, contiguous runs merged; pieces = [[start, end, before]] of
        the rejected data in arrival order, ``before`` = bytes of kept data
        that arrived before it (pieces of one range of ``rej`` arriving back
        to back merged; not those of two ranges, even adjacent ones: of two
        rejected packets in a row, the first may overtake the held
        aggregate and the second not).
    """
    kept, pieces = [], []
    n = 0
    last_i = -1
    starts = [r[0] for r in rej]
    for s, e, _fr in order:
        pos = s
        i = max(bisect.bisect_right(starts, s) - 1, 0)
        while pos < e:
            while i < len(rej) and rej[i][1] <= pos:
                i += 1
            if i < len(rej) and rej[i][0] <= pos:
                ce = min(e, rej[i][1])
                if pieces and pieces[-1][1] == pos and pieces[-1][2] == n and last_i == i:
                    pieces[-1][1] = ce
                else:
                    pieces.append([pos, ce, n])
                last_i = i
            else:
                ce = e if i == len(rej) else min(e, rej[i][0])
                if kept and kept[-1][1] == pos:
                    kept[-1][1] = ce
                else:
                    kept.append([pos, ce])
                n += ce - pos
            pos = ce
    return kept, pieces


def _held_run(segs, at, skip, ts_of):
    """Indexes into ``segs`` of the OUT packets of the aggregate a rejected
    packet (``segs[at]``) overtook: the first later packet of the stream
    that carries data and is not in ``skip`` (a frame set: other rejected
    packets), and those right after it stamped with the same time (the
    segments ``merge --gso`` cuts an aggregate into leave together).
    [] when there is none."""
    run, t0 = [], None
    for x in range(at + 1, len(segs)):
        fr, t, n, c = segs[x]
        if fr in skip or not n:
            continue
        if run and ts_of.get(fr) != t0:
            break
        if not run:
            t0 = ts_of.get(fr)
        run.append(x)
    return run


def _tcp_rejected_ahead(sa, sb, ts_of):
    """Whether a TCP stream's OUT order differs from IN's only as GRO
    reorders: a packet GRO rejects before matching (IN frames in
    ``sa.rej``: bad checksum, IPv4 options, a header cut short) is passed
    at once and overtakes its flow's held aggregate, so its data may arrive
    in OUT ahead of data that came before it in IN -- but only of data of
    that one aggregate (:func:`_held_run`).

    Args:
        sa, sb: the IN and OUT :class:`_Stream` (same payload bytes).
        ts_of:  OUT's {frame: timestamp in ns}.
    Returns:
        the number of rejected IN packets that arrived ahead (int >= 1), or
        None when the orders differ otherwise (a real difference).
    """
    ranges = [(s, s + c) for fr, s, n, c in sa.segs if c and fr in sa.rej]
    if not ranges:
        return None
    rej = _union(ranges, adjacent=False)     # one range per rejected packet
    ka, pa = _cut_rejected(sa.store.order, rej)
    kb, pb = _cut_rejected(sb.store.order, rej)
    if ka != kb or [p[:2] for p in pa] != [p[:2] for p in pb]:
        return None
    cum = [0]
    for s, e in ka:
        cum.append(cum[-1] + e - s)
    segs = sb.segs
    rstarts = sorted(r[0] for r in ranges)
    starts = [r[0] for r in rej]
    first = {}                      # start -> index of the first OUT segment there
    skip = set()                    # OUT frames carrying only rejected data
    for j, (fr, s, n, c) in enumerate(segs):
        if c:
            first.setdefault(s, j)
            i = bisect.bisect_right(starts, s) - 1
            if i >= 0 and s + c <= rej[i][1]:
                skip.add(fr)
    moved = 0
    for (s, e, pin), (_, _, pout) in zip(pa, pb):
        if pout == pin:
            continue
        if pout > pin:
            return None             # delayed: GRO never holds a rejected packet
        # the data it overtook: kept bytes [pout, pin), as sequence ranges
        i = bisect.bisect_right(cum, pout) - 1
        j = bisect.bisect_left(cum, pin) - 1
        over = [(ka[k][0] + (pout - cum[k] if k == i else 0),
                 ka[k][0] + (pin - cum[k]) if k == j else ka[k][1]) for k in range(i, j + 1)]
        # the OUT packet that carried the piece, and the aggregate after it
        at = first.get(s)
        if at is None:
            at = next((x for x, (fr, t, n, c) in enumerate(segs) if t <= s < t + c), None)
        if at is None:
            return None
        held = _union((segs[x][1], segs[x][1] + segs[x][3]) for x in _held_run(segs, at, skip, ts_of))
        hs = [h[0] for h in held]
        for lo, hi in over:
            h = bisect.bisect_right(hs, lo) - 1
            if h < 0 or hi > held[h][1]:
                return None         # more than one aggregate overtaken
        moved += max(bisect.bisect_left(rstarts, e) - bisect.bisect_left(rstarts, s), 1)
    return moved or None


def _udp_in_order(sa, sb, ts_of):
    """A UDP flow's OUT datagrams put back in IN's order, when they differ
    from it only as GRO reorders: a datagram GRO rejects before matching
    (IN and OUT frames in ``.rej``: bad or zero checksum, UDP length not the
    bytes present, IPv4 options, a header cut short) is passed at once and
    overtakes its flow's held aggregate (:func:`_held_run`), which may go
    on merging datagrams that came after it in IN (UDP has no sequence
    numbers to stop it).

    UDP payload offsets are counted in arrival order, so such a datagram
    would shift every offset after it; here it is moved back to where IN
    had it (the aggregate it overtook cut in two there) and the flow is
    rebuilt, so that bytes, boundaries and checksum flags are compared in
    IN's offsets.

    Args:
        sa, sb: the IN and OUT :class:`_Stream` of one UDP flow.
        ts_of:  OUT's {frame: timestamp in ns}.
    Returns:
        (rebuilt OUT _Stream, number of datagrams moved back (>= 1)), or
        None when nothing moved or OUT differs otherwise (compared as is).
    """
    def split(st):
        kept, rej, pos = [], [], 0
        for x, (fr, a, n, c) in enumerate(st.segs):
            if fr in st.rej:
                rej.append((pos, n, x))
            else:
                kept.append((pos, x))
                pos += n
        return kept, rej, pos
    _, ra, total_a = split(sa)
    kb, rb, total_b = split(sb)
    if (not ra or len(ra) != len(rb) or total_a != total_b
            or any(x[1] != y[1] for x, y in zip(ra, rb))
            or all(x[0] == y[0] for x, y in zip(ra, rb))):
        return None
    segs = sb.segs
    moved = 0
    for (pin, n, _), (pout, _, x) in zip(ra, rb):
        if pout == pin:
            continue
        if pout > pin:
            return None             # delayed: GRO never holds a rejected datagram
        if pin > pout + sum(segs[y][2] for y in _held_run(segs, x, sb.rej, ts_of)):
            return None             # it overtook more than one held aggregate
        moved += 1
    # OUT's pieces (index into segs, offset, length) in IN's order
    order = []
    k = 0
    for pos, x in kb:
        n = segs[x][2]
        off = 0
        while k < len(ra) and pos + off <= ra[k][0] < pos + n:
            cut = ra[k][0] - pos
            if cut > off:
                order.append((x, off, cut - off))
                off = cut
            order.append((rb[k][2], 0, segs[rb[k][2]][2]))
            k += 1
        if n > off or not n:
            order.append((x, off, n - off))
    order += [(r[2], 0, segs[r[2]][2]) for r in rb[k:]]
    cats = {fr: c for st_, e_, fr, c in sb.flagged}
    out = _Stream(sb.key, sb.gen)
    for x, off, n in order:
        fr, a, _, c = segs[x]
        data = sb.store.get(a + off, a + min(c, off + n)) if c > off else b""
        pos = out.udp_end
        out.udp_end += n
        out.segs.append((fr, pos, n, len(data)))
        out.store.add(pos, data, fr)
        if fr in cats:
            out.flagged.append((pos, pos + n, fr, cats[fr]))
    out.npkts = sb.npkts
    out.rej = sb.rej
    return out, moved


def _check_flags(sa, sb, v, name, csum, what):
    """OUT packets' problems (checksum, malformed, expert) must come from IN:
    allowed only on a packet IN had with the same problem (same sequence
    range: passed through unchanged).  Packets pcapgro made (segments,
    aggregates) must be clean -- except, with csum 'kernel', the TCP/UDP
    checksum of aggregates.  (A bad checksum anywhere in IN does not excuse
    a new packet: senders' captures have partial checksums on every
    super-frame, and the segments made from them must be valid.)"""
    idx, ranges = sa.flag_index() if sa is not None else ({}, set())
    for s, e, fr, cats in sb.flagged:
        for c in sorted(cats):
            if (s, e) in idx.get(c, ()):
                continue
            if c == CAT_L4CS and csum == "kernel" and e > s and (s, e) not in ranges:
                continue            # an aggregate carrying the kernel's checksum
            msg = {CAT_L4CS: f"bad {what} checksum", CAT_IPCS: "bad IPv4 header checksum",
                   CAT_MAL: "malformed packet", CAT_EXPERT: "expert error"}[c]
            v.add(c, msg + (" (IN had this packet without it)" if (s, e) in ranges
                            else " on a packet made from IN's data"),
                  out_frame=fr, stream=name)


def _compare_tcp(a, b, v, csum):
    for k in sorted(set(a.tcp) | set(b.tcp), key=lambda k: (str(k[0]), k[1])):
        sa, sb = a.tcp.get(k), b.tcp.get(k)
        name = _key_str(k[0], "tcp") + (f" #{k[1] + 1}" if k[1] else "")
        _compare_streams(a, b, v, "tcp", csum, sa, sb, name)
        if sa is None or sb is None:
            if sb is not None:
                _check_flags(None, sb, v, name, csum, "TCP")
            continue
        ea, eb = sa.events, sb.events
        if set(ea) != set(eb):
            base = sa.syn_seq if sa.syn_seq is not None else 0
            for ev in sorted(set(ea) ^ set(eb), key=lambda e: (e[1], e[0])):
                if ev in ea:
                    v.add("event", f"{ev[0]} at seq {ev[1] & 0xFFFFFFFF} (relative {ev[1] - base}) "
                          "missing from OUT", in_frame=ea[ev], stream=name)
                else:
                    v.add("event", f"{ev[0]} at seq {ev[1] & 0xFFFFFFFF} (relative {ev[1] - base}) "
                          "not in IN", out_frame=eb[ev], stream=name)
                break
        if [x for x, _ in sa.acks] != [x for x, _ in sb.acks]:
            n = min(len(sa.acks), len(sb.acks))
            i = next((i for i in range(n) if sa.acks[i][0] != sb.acks[i][0]), n)
            if i < len(sb.acks):
                v.add("ack", f"pure ACK {sb.acks[i][0]} differs from IN's "
                      + (f"{sa.acks[i][0]}" if i < len(sa.acks) else "(IN has no more)"),
                      out_frame=sb.acks[i][1], in_frame=sa.acks[i][1] if i < len(sa.acks) else None,
                      stream=name)
            else:
                v.add("ack", f"pure ACK {sa.acks[i][0]} missing from OUT",
                      in_frame=sa.acks[i][1], out_frame=sb.acks[-1][1] if sb.acks else None,
                      stream=name)
        _check_flags(sa, sb, v, name, csum, "TCP")


def _compare_udp(a, b, v, csum):
    for k in sorted(set(a.udp) | set(b.udp), key=str):
        sa, sb = a.udp.get(k), b.udp.get(k)
        name = _key_str(k, "udp")
        if sa is not None and sb is not None and sa.rej:
            back = _udp_in_order(sa, sb, b.ts_of)
            if back is not None:
                sb = back[0]
                v.ahead["udp"] += back[1]       # the GRO model's reordering
        same = _compare_streams(a, b, v, "udp", csum, sa, sb, name)
        if sa is None or sb is None:
            if sb is not None:
                _check_flags(None, sb, v, name, csum, "UDP")
            continue
        if same:
            starts = [s for fr, s, n, c in sa.segs]
            bounds = set(starts) | {s + n for fr, s, n, c in sa.segs}
            for fr, s, n, c in sb.segs:
                if s in bounds and s + n in bounds:
                    continue
                i = bisect.bisect_right(starts, s) - 1
                if i >= 0 and s + n <= sa.segs[i][1] + sa.segs[i][2]:
                    continue
                v.add("boundary", f"datagram at payload offset {s} ({n} bytes) crosses a datagram "
                      "boundary of IN", out_frame=fr, in_frame=sa.segs[i][0] if i >= 0 else None,
                      stream=name)
                break
        _check_flags(sa, sb, v, name, csum, "UDP")


def _compare_other(a, b, v):
    oa, ob = a.other, b.other
    for i in range(max(len(oa), len(ob))):
        x = oa[i] if i < len(oa) else None
        y = ob[i] if i < len(ob) else None
        if x is None:
            v.add("extra", "packet (not TCP/UDP) that IN does not have", out_frame=y[0])
            return
        if y is None:
            v.add("missing", "packet (not TCP/UDP) missing from OUT", in_frame=x[0])
            return
        if x[1] != y[1] or x[2] != y[2]:
            v.add("other", "packet (not TCP/UDP) differs from IN's", out_frame=y[0], in_frame=x[0])
            return
        for c in sorted(y[3] - x[3]):
            v.add(c, f"{c} on a packet (not TCP/UDP) that IN had without it",
                  out_frame=y[0], in_frame=x[0])


def _compare_frames(a, b, v):
    for fr, msg in b.len_bad:
        v.add("length", msg, out_frame=fr)
    if b.ts_back:
        if a.ts_back:
            v.notes.append(f"timestamps go backwards {len(b.ts_back)} times in OUT "
                           f"({len(a.ts_back)} in IN)")
        else:
            for fr in b.ts_back[:10]:
                v.add("timestamp", "timestamp earlier than the previous frame's", out_frame=fr)
            for _ in b.ts_back[10:]:
                v.problems_total += 1
                v.by_kind["timestamp"] += 1
