"""What verify asks tshark for and how its ``-T fields`` output is read:
the preferences, the fields (one column each), the values tshark writes
for booleans, checksum states and expert severities, and small parsers."""

from __future__ import annotations

import binascii
import shutil

from ..errors import UnusableInput

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
    # no per-frame analysis state: sequence analysis, relative numbers,
    # timestamps and conversation tracking keep data for every frame (memory
    # grows with the capture) and verify needs none of it: it reads the raw
    # sequence numbers and does its own stream bookkeeping
    "tcp.analyze_sequence_numbers:FALSE", "tcp.relative_sequence_numbers:FALSE",
    "tcp.calculate_timestamps:FALSE", "tcp.track_bytes_in_flight:FALSE",
    "udp.process_info:FALSE", "udp.calculate_timestamps:FALSE",
    # IPv4 total length 0 / IPv6 payload length 0 = TSO/GSO super-frames
    "ip.tso_support:TRUE", "ipv6.tso_support:TRUE",
    # port tables before heuristics (we force 'data' on all ports below)
    "tcp.try_heuristic_first:FALSE", "udp.try_heuristic_first:FALSE",
]
# TCP and UDP payloads are handed to the 'data' dissector: application
# dissectors differ between Wireshark versions (4.4 has iperf3, ...) and
# would see aggregates differently from segments; we compare the transport.
DECODE_AS = ["tcp.port==0-65535,data", "udp.port==0-65535,data"]


def decode_as(tunnels=None, peers=frozenset()):
    """tshark's ``-d`` entries: :data:`DECODE_AS`, or with ``tunnels`` (a
    :class:`.payload.Tunnels`) the tunnel ports as ``vxlan`` / ``geneve``
    and 'data' on every other UDP port except ``peers`` (the other ports
    of the tunnel datagrams, :func:`.payload.tunnel_peer_ports`: a 'data'
    entry there would win over the tunnel port).  List of str."""
    if not tunnels:
        return list(DECODE_AS)
    skip = sorted(tunnels.vxlan | tunnels.geneve | peers)
    out = [DECODE_AS[0]]
    lo = 0
    for p in skip + [65536]:
        if p > lo:
            out.append(f"udp.port=={lo}-{p - 1},data" if p - 1 > lo else f"udp.port=={lo},data")
        lo = p + 1
    out += [f"udp.port=={p},vxlan" for p in sorted(tunnels.vxlan)]
    out += [f"udp.port=={p},geneve" for p in sorted(tunnels.geneve - tunnels.vxlan)]
    return out
MD5_PREF = "frame.generate_md5_hash:TRUE"

SEP = "\x1e"    # field separator of tshark's output
AGG = "\x1f"    # separator of a field's occurrences

FIELDS = [
    "frame.number", "frame.time_epoch", "frame.len", "frame.cap_len", "frame.protocols",
    "frame.md5_hash", "frame.cb_pen", "vlan.id",
    "ip.src", "ip.dst", "ipv6.src", "ipv6.dst",
    "ip.flags.mf", "ip.frag_offset", "ipv6.fraghdr.ident", "ip.checksum.status",
    "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.ack_raw", "tcp.len", "tcp.flags",
    "tcp.checksum.status",
    "udp.srcport", "udp.dstport", "udp.length", "udp.checksum.status",
    "_ws.malformed", "_ws.expert.severity", "_ws.expert.group", "_ws.expert.message",
    "ip.hdr_len", "udp.checksum", "eth.padding", "eth.trailer", "gre.checksum",
    # last: asked for only when verify cannot locate the payload in the
    # frame itself (see :mod:`.side`): as hex they are ~2/3 of tshark's
    # output and ~40 % of its time
    "tcp.payload", "udp.payload",
]
(F_NUM, F_TS, F_LEN, F_CAPLEN, F_PROTOS, F_MD5, F_CB, F_VLAN, F_IPSRC, F_IPDST, F_V6SRC,
 F_V6DST, F_MF, F_FRAGOFF, F_V6FRAG, F_IPCS, F_TSPORT, F_TDPORT, F_SEQ, F_ACK, F_TLEN,
 F_TFLAGS, F_TCS, F_USPORT, F_UDPORT, F_ULEN, F_UCS, F_MAL, F_SEV, F_GRP,
 F_MSG, F_IPHL, F_UCSUM, F_PAD, F_TRAILER, F_GRECS, F_TPAY, F_UPAY) = range(len(FIELDS))
_NFIELDS = len(FIELDS)
_NLOCATED = _NFIELDS - 2     # fields without the payloads

# the Wireshark releases whose field names, preference names and value
# spellings verify was checked against (Debian 12: 4.0, Debian 13: 4.4)
TSHARK_MIN_VERSION = (3, 6)

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

