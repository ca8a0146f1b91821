"""Helpers for the GSO tests (no tests here): where the test captures
are, building packets byte by byte, and independent checksum checks."""

import functools
import struct

from capture_helpers import KERNEL, PUBLIC, packets  # noqa: F401  (re-exported for the GSO tests)
from pcapgro.record import Packet


read_packets = packets      # all Packet events of a capture file


# ------------------------------------------------------------ checksums

def csum16(b):
    """RFC 1071 checksum sum (not inverted, 0..0xFFFF) by plain 16-bit
    word addition with end-around carry (independent of pcapgro.checksum)."""
    if len(b) & 1:
        b = bytes(b) + b"\0"
    s = 0
    for (w,) in struct.iter_unpack("!H", b):
        s += w
        s = (s & 0xFFFF) + (s >> 16)
    return s


def ip_ok(data, off):
    ihl = (data[off] & 15) * 4
    return csum16(data[off:off + ihl]) == 0xFFFF


def l3_info(data, off):
    """(family, src, dst, proto, l4off, l4end) walking IPv6 ext headers."""
    v = data[off] >> 4
    if v == 4:
        ihl = (data[off] & 15) * 4
        tot = struct.unpack_from("!H", data, off + 2)[0]
        return 4, data[off + 12:off + 16], data[off + 16:off + 20], data[off + 9], off + ihl, off + tot
    plen = struct.unpack_from("!H", data, off + 4)[0]
    nh = data[off + 6]
    p = off + 40
    dst = data[off + 24:off + 40]
    while nh in (0, 43, 60):
        hl = (data[p + 1] + 1) * 8
        if nh == 43 and data[p + 3] and data[p + 2] == 4:
            dst = data[p + 8:p + 24]
        nh = data[p]
        p += hl
    return 6, data[off + 8:off + 24], dst, nh, p, off + 40 + plen


def l4_ok(data, off):
    """True when the TCP/UDP checksum of the packet at data[off:] is valid."""
    fam, src, dst, proto, l4, end = l3_info(data, off)
    seg = data[l4:end]
    L = len(seg)
    if fam == 4:
        ph = src + dst + struct.pack("!BBH", 0, proto, L)
    else:
        ph = src + dst + struct.pack("!IxxxB", L, proto)
    if proto == 17 and struct.unpack_from("!H", seg, 6)[0] == 0:
        return fam == 4
    return csum16(ph + seg) == 0xFFFF


# -------------------------------------------------------------- builders

def mac():
    return b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01"


def tcp_hdr(sport=1000, dport=2000, seq=1, ack=1, flags=0x10, win=512, opts=b"", urg=0,
            check=0):
    opts = opts + b"\x01" * ((-len(opts)) & 3)
    doff = (20 + len(opts)) // 4
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, win,
                       check, urg) + opts


def udp_hdr(sport=1000, dport=2000, length=8, check=0):
    return struct.pack("!HHHH", sport, dport, length, check)


def ipv4(proto, l4, src=b"\x0a\0\0\x01", dst=b"\x0a\0\0\x02", ident=100, tot=None,
         flags=0x4000, ttl=64, tos=0, opts=b""):
    ihl = 5 + len(opts) // 4
    t = 20 + len(opts) + len(l4) if tot is None else tot
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, t, ident, flags, ttl, proto, 0, src, dst) + opts
    c = 0xFFFF - csum16(h)
    return h[:10] + struct.pack("!H", c) + h[12:] + l4


def ipv6(nh, rest, src=b"\xfd" + b"\0" * 14 + b"\x01", dst=b"\xfd" + b"\0" * 14 + b"\x02",
         plen=None, flow=0x12345, hlim=64):
    p = len(rest) if plen is None else plen
    return struct.pack("!IHBB16s16s", (6 << 28) | flow, p, nh, hlim, src, dst) + rest


def eth(l3, et=0x0800, vlans=()):
    tags = b"".join(struct.pack("!HH", 0x8100, v) for v in vlans)
    return mac() + tags + struct.pack("!H", et) + l3


def seed_tcp(frame, off):
    """Put the pseudo-header seed (CHECKSUM_PARTIAL) into the TCP/UDP
    checksum field, as a sender's capture has it."""
    fam, src, dst, proto, l4, end = l3_info(frame, off)
    if end == off or end == off + 40:      # length 0 (TSO / BIG TCP)
        end = len(frame)
    L = end - l4
    s = csum16(src + dst) + proto + (L >> 16) + (L & 0xFFFF)
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    coff = l4 + (16 if proto == 6 else 6)
    return frame[:coff] + struct.pack("!H", s) + frame[coff + 2:]


def fix_l4(frame, off):
    """Give the frame a valid TCP/UDP checksum."""
    fam, src, dst, proto, l4, end = l3_info(frame, off)
    coff = l4 + (16 if proto == 6 else 6)
    frame = frame[:coff] + b"\0\0" + frame[coff + 2:]
    seg = frame[l4:end]
    L = len(seg)
    ph = (src + dst + struct.pack("!BBH", 0, proto, L)) if fam == 4 else \
        (src + dst + struct.pack("!IxxxB", L, proto))
    c = 0xFFFF - csum16(ph + seg)
    if proto == 17 and c == 0:
        c = 0xFFFF
    return frame[:coff] + struct.pack("!H", c) + frame[coff + 2:]


@functools.lru_cache(maxsize=None)
def payload(n, salt=0):
    return bytes((i * 7 + salt + (i >> 8)) & 0xFF for i in range(n))


def pkt(data, ts=1_000_000_000, orig_len=None, linktype=1, meta=None):
    return Packet(ts, data, len(data) if orig_len is None else orig_len, 0, linktype, meta)
