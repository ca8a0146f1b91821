"""Test packet builder and parser for the GRO rule tests.

Header layouts come from dpkt's packet classes (``dpkt.tcp.TCP``,
``dpkt.ip.IP``, ``dpkt.ip6.IP6``, ``dpkt.ethernet.Ethernet``, ...), packed
with ``pack_hdr()`` so that every field is exactly what the test asked for:
dpkt's ``bytes()`` fills in lengths and checksums that are zero, and tests
need zero and wrong ones too.  Checksums are computed here (RFC 1071, word
by word).  Nothing here uses pcapgro, so the expected values in the tests
are computed independently of the engine.  :func:`parse` reads fields with
``struct`` at fixed offsets: it must read what pcapgro writes and dpkt's
decoders reinterpret or refuse (BIG TCP total length 0, IPv6 jumbograms,
frames cut by a snaplen).

Building, layer by layer (each returns bytes)::

    tcp_segment(src, dst, sport, dport, seq, ack, flags, window, options,
                payload, csum='valid'|'bad'|'seed'|'zero'|int)
    ipv4(payload, src, dst, tos=, ttl=, ident=, df=, mf=, frag_off=,
         evil=, options=, csum='valid'|'bad'|int, tot_len=)
    ipv6(payload, src, dst, tc=, flow=, hlim=, exthdrs=[...], plen=)
    hbh(opts) / dstopts(opts) / routing(...) / frag6(...)   IPv6 ext headers
    eth(payload, ethertype, vlans=[(tpid, tci)], pad_to=, trailer=)
    sll(payload, ethertype) / sll2(payload, ethertype)

and the convenience :class:`Flow`, which makes whole frames (a
:class:`pcapgro.record.Packet`) of one TCP connection with defaults that
match the kernel selftest (tools/testing/selftests/net/gro.c): ports
1500 -> 8000, seq/ack starting at 100, window 65535, TTL/hop limit 8, DF
set, IPv4 ID 0 (fixed), payload bytes b'a'.

Parsing: :func:`parse` turns an output Packet back into a :class:`Parsed`
record (link, VLAN tags, IP and TCP fields, payload, checksum validity).
"""

import ipaddress
import struct

from dpkt.arp import ARP
from dpkt.ethernet import Ethernet, VLANtag8021Q
from dpkt.ip import IP
from dpkt.ip6 import IP6, IP6FragmentHeader
from dpkt.sll import SLL
from dpkt.sll2 import SLL2
from dpkt.tcp import TCP
from dpkt.udp import UDP

from pcapgro.record import Packet

__all__ = [
    "FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR",
    "LINKTYPE_ETHERNET", "LINKTYPE_RAW", "LINKTYPE_SLL", "LINKTYPE_SLL2",
    "inet_sum", "inet_fold", "csum16",
    "tcp_segment", "tcp_checksum", "pseudo_header",
    "ts_option", "nop", "sack_option", "mss_option", "wscale_option",
    "ipv4", "ipv6", "hbh", "dstopts", "routing", "frag6", "udp_datagram",
    "eth", "sll", "sll2", "arp_frame",
    "Flow", "Parsed", "parse", "tcp_csum_ok", "ipv4_csum_ok",
]

FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_SLL = 113
LINKTYPE_SLL2 = 276

ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_ARP = 0x0806
VLAN_TPIDS = (0x8100, 0x88A8)

MAC_DST = bytes.fromhex("aa0000000001")
MAC_SRC = bytes.fromhex("aa0000000002")


# ---------------------------------------------------------------- checksums

def inet_sum(data, start=0):
    """RFC 1071 one's-complement sum of ``data`` with end-around carry,
    word by word (deliberately not the engine's mod-0xFFFF shortcut).
    Returns a 16-bit value (0..0xFFFF)."""
    if len(data) & 1:
        data = bytes(data) + b"\0"
    s = start
    for (w,) in struct.iter_unpack("!H", bytes(data)):
        s += w
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def inet_fold(s):
    """Fold an arbitrary non-negative sum to 16 bits (end-around carry)."""
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def csum16(data, start=0):
    """The Internet checksum field value: ~sum & 0xFFFF."""
    return (~inet_sum(data, start)) & 0xFFFF


def _ip_bytes(addr):
    return ipaddress.ip_address(addr).packed


def pseudo_header(src, dst, proto, length):
    """Pseudo-header bytes for the TCP/UDP checksum (IPv4 or IPv6 by the
    address family of ``src``); ``length`` is the L4 length in bytes."""
    s, d = _ip_bytes(src), _ip_bytes(dst)
    if len(s) == 4:
        # the length as a 32-bit quantity (BIG TCP aggregates exceed 16 bits;
        # the kernel's csum_tcpudp_nofold adds it whole)
        return s + d + struct.pack("!HHH", proto, length >> 16, length & 0xFFFF)
    return s + d + struct.pack("!IxxxB", length, proto)


def tcp_checksum(src, dst, segment):
    """Correct checksum for TCP ``segment`` (checksum field taken as 0)."""
    seg = bytearray(segment)
    seg[16:18] = b"\0\0"
    return csum16(pseudo_header(src, dst, 6, len(seg)) + bytes(seg))


def tcp_csum_ok(src, dst, segment):
    """True when the TCP ``segment`` (header + payload) checksums to zero."""
    return inet_sum(pseudo_header(src, dst, 6, len(segment)) + bytes(segment)) == 0xFFFF


def ipv4_csum_ok(hdr):
    return inet_sum(hdr) == 0xFFFF


# ---------------------------------------------------------------- TCP

def nop():
    return b"\x01"


def ts_option(tsval, tsecr=0):
    """Timestamp option, 10 bytes (kind 8, len 10)."""
    return struct.pack("!BBII", 8, 10, tsval, tsecr)


def sack_option(*blocks):
    """SACK option with (left, right) blocks."""
    body = b"".join(struct.pack("!II", l, r) for l, r in blocks)
    return struct.pack("!BB", 5, 2 + len(body)) + body


def mss_option(mss):
    return struct.pack("!BBH", 2, 4, mss)


def wscale_option(shift):
    return struct.pack("!BBB", 3, 3, shift)


def tcp_segment(src, dst, sport, dport, seq, ack, flags=ACK, window=65535,
                options=b"", payload=b"", csum="valid", urg_ptr=0, doff=None,
                res=0):
    """A TCP segment (header + payload).

    ``options`` is padded with zero bytes (EOL) to a multiple of 4.
    ``csum``: 'valid', 'bad' (valid - 1, as the selftest does), 'seed'
    (the pseudo-header seed a CHECKSUM_PARTIAL sender leaves: the folded
    pseudo-header sum, not inverted), 'zero', or an int.
    """
    options = bytes(options)
    if len(options) % 4:
        options += b"\0" * (4 - len(options) % 4)
    if doff is None:
        doff = 5 + len(options) // 4
    # the 4 reserved bits (AE/NS among them) sit between the data offset
    # and the flags byte: dpkt's off / _rsv / flags(9) bit fields
    hdr = TCP(sport=sport, dport=dport, seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF,
              _off_flags=(doff << 12) | ((res & 0xF) << 8) | flags, win=window,
              sum=0, urp=urg_ptr).pack_hdr() + options
    seg = bytearray(hdr + bytes(payload))
    if csum == "valid":
        c = tcp_checksum(src, dst, seg)
    elif csum == "bad":
        c = (tcp_checksum(src, dst, seg) - 1) & 0xFFFF
    elif csum == "seed":
        c = inet_sum(pseudo_header(src, dst, 6, len(seg)))
    elif csum == "zero":
        c = 0
    else:
        c = int(csum) & 0xFFFF
    struct.pack_into("!H", seg, 16, c)
    return bytes(seg)


def udp_datagram(src, dst, sport, dport, payload=b""):
    ln = 8 + len(payload)
    d = bytearray(UDP(sport=sport, dport=dport, ulen=ln, sum=0).pack_hdr() + payload)
    c = csum16(pseudo_header(src, dst, 17, ln) + bytes(d)) or 0xFFFF
    struct.pack_into("!H", d, 6, c)
    return bytes(d)


# ---------------------------------------------------------------- IP

def ipv4(payload, src="192.168.1.200", dst="192.168.1.100", proto=6, tos=0,
         ttl=8, ident=0, df=True, mf=False, frag_off=0, evil=False,
         options=b"", csum="valid", tot_len=None):
    """An IPv4 header + ``payload``.

    ``options`` (bytes, padded to a multiple of 4 with EOL) raise the IHL.
    ``csum``: 'valid', 'bad' (valid - 1) or an int. ``tot_len`` overrides
    the total length field (default: the real length)."""
    options = bytes(options)
    if len(options) % 4:
        options += b"\0" * (4 - len(options) % 4)
    ihl = 5 + len(options) // 4
    frag = (0x8000 if evil else 0) | (0x4000 if df else 0) | (0x2000 if mf else 0) | (frag_off & 0x1FFF)
    if tot_len is None:
        tot_len = ihl * 4 + len(payload)
    hdr = bytearray(IP(v=4, hl=ihl, tos=tos, len=tot_len & 0xFFFF, id=ident & 0xFFFF,
                       _flags_offset=frag, ttl=ttl, p=proto, sum=0,
                       src=_ip_bytes(src), dst=_ip_bytes(dst)).pack_hdr() + options)
    c = csum16(hdr)
    if csum == "bad":
        c = (c - 1) & 0xFFFF
    elif csum != "valid":
        c = int(csum) & 0xFFFF
    struct.pack_into("!H", hdr, 10, c)
    return bytes(hdr) + bytes(payload)


def _opts_body(opts):
    """Options area of an HBH/DstOpts header: ``opts`` padded with PadN
    so that 2 + len is a multiple of 8."""
    opts = bytes(opts)
    total = 2 + len(opts)
    pad = (-total) % 8
    if pad == 1:
        opts += b"\x00"                      # Pad1
    elif pad:
        opts += bytes((1, pad - 2)) + b"\0" * (pad - 2)   # PadN
    return opts


def hbh(opts=b""):
    """Hop-by-Hop Options header (type 0) as (type, body) for :func:`ipv6`."""
    return (0, _opts_body(opts))


def dstopts(opts=b""):
    """Destination Options header (type 60)."""
    return (60, _opts_body(opts))


def routing(rtype=4, segleft=0, data=b"\0" * 4):
    """Routing header (type 43): routing type, segments left, type data
    (padded so the header is a multiple of 8)."""
    body = bytes((rtype, segleft)) + bytes(data)
    pad = (-(2 + len(body))) % 8
    return (43, body + b"\0" * pad)


def frag6(offset=0, m=False, ident=0x12345678):
    """Fragment header (type 44)."""
    hdr = IP6FragmentHeader(nxt=0, frag_off=offset & 0x1FFF, m_flag=1 if m else 0,
                            id=ident).pack_hdr()
    return (44, hdr[2:])                     # next header and reserved byte: see ipv6()


def ipv6(payload, src="fdaa::2", dst="fdaa::1", nh=6, tc=0, flow=0, hlim=8,
         exthdrs=(), plen=None):
    """An IPv6 header (+ extension headers) + ``payload``.

    ``exthdrs``: sequence of (type, body) from :func:`hbh`, :func:`dstopts`,
    :func:`routing`, :func:`frag6`; chained in order before ``nh``."""
    chain = b""
    types = [t for t, _ in exthdrs] + [nh]
    for i, (t, body) in enumerate(exthdrs):
        ln = 2 + len(body)
        assert ln % 8 == 0, "extension header length must be a multiple of 8"
        hdrlen = 0 if t == 44 else ln // 8 - 1
        chain += bytes((types[i + 1], hdrlen)) + body
    first_nh = types[0]
    if plen is None:
        plen = len(chain) + len(payload)
    hdr = IP6(v=6, fc=tc & 0xFF, flow=flow & 0xFFFFF, plen=plen & 0xFFFF, nxt=first_nh,
              hlim=hlim, src=_ip_bytes(src), dst=_ip_bytes(dst)).pack_hdr()
    return hdr + chain + bytes(payload)


# ---------------------------------------------------------------- link

def eth(payload, ethertype, vlans=(), src=MAC_SRC, dst=MAC_DST, pad_to=0,
        trailer=b""):
    """Ethernet II frame. ``vlans``: [(tpid, tci), ...] outermost first.
    ``pad_to``: pad the frame with zero bytes to this length (60 = the
    minimum frame without FCS). ``trailer``: bytes appended after that
    (e.g. a 4-byte FCS)."""
    # each tag as given (dpkt's Ethernet would pick the TPIDs itself): the
    # first TPID in the Ethernet type field, each tag's TCI followed by the
    # next type (dpkt's VLANtag8021Q: TCI + type)
    types = [tpid for tpid, _ in vlans] + [ethertype]
    f = Ethernet(dst=bytes(dst), src=bytes(src), type=types[0]).pack_hdr()
    for i, (_, tci) in enumerate(vlans):
        f += VLANtag8021Q(_pri_cfi_id=tci, type=types[i + 1]).pack_hdr()
    f += bytes(payload)
    if len(f) < pad_to:
        f += b"\0" * (pad_to - len(f))
    return f + bytes(trailer)


def sll(payload, ethertype, pkttype=0, hatype=1, addr=MAC_SRC):
    """Linux cooked capture v1 header (16 bytes) + payload."""
    a = bytes(addr)[:8]
    return SLL(type=pkttype, hrd=hatype, hlen=len(a), hdr=a.ljust(8, b"\0"),
               ethtype=ethertype).pack_hdr() + bytes(payload)


def sll2(payload, ethertype, ifindex=2, hatype=1, pkttype=0, addr=MAC_SRC):
    """Linux cooked capture v2 header (20 bytes) + payload."""
    a = bytes(addr)[:8]
    return SLL2(ethtype=ethertype, mbz=0, intindex=ifindex, hrd=hatype, type=pkttype,
                hlen=len(a), hdr=a.ljust(8, b"\0")).pack_hdr() + bytes(payload)


def arp_frame():
    body = ARP(hrd=1, pro=0x0800, hln=6, pln=4, op=1, sha=MAC_SRC,
               spa=_ip_bytes("192.168.1.200"), tha=b"\0" * 6,
               tpa=_ip_bytes("192.168.1.100")).pack_hdr()
    return eth(body, ETH_P_ARP, pad_to=60)


# ---------------------------------------------------------------- flows

class Flow:
    """One direction of a TCP connection; :meth:`pkt` builds its frames.

    Args (all optional): family 4/6; src/dst addresses; sport/dport;
    link 'eth' | 'sll' | 'sll2' | 'raw'; vlans [(tpid, tci)]; mac_src,
    mac_dst; seq0/ack0 (initial seq/ack, 100 as in the selftest);
    window; ttl (hop limit for IPv6); tos (traffic class for IPv6); df;
    ipid (None = fixed 0, 'inc' = incrementing from ``ipid0`` per packet
    built, or an int); flow (IPv6 flow label); exthdrs (IPv6); options
    (TCP option bytes); iface.
    """

    def __init__(self, family=4, src=None, dst=None, sport=1500, dport=8000,
                 link="eth", vlans=(), mac_src=MAC_SRC, mac_dst=MAC_DST,
                 seq0=100, ack0=100, window=65535, ttl=8, tos=0, df=True,
                 ipid=None, ipid0=0, flow=0, exthdrs=(), options=b"", iface=0):
        self.family = family
        self.src = src or ("192.168.1.200" if family == 4 else "fdaa::2")
        self.dst = dst or ("192.168.1.100" if family == 4 else "fdaa::1")
        self.sport, self.dport = sport, dport
        self.link, self.vlans = link, list(vlans)
        self.mac_src, self.mac_dst = mac_src, mac_dst
        self.seq0, self.ack0 = seq0, ack0
        self.window, self.ttl, self.tos, self.df = window, ttl, tos, df
        self.ipid, self.next_id = ipid, ipid0
        self.flow, self.exthdrs, self.options = flow, list(exthdrs), options
        self.iface = iface

    @property
    def linktype(self):
        return {"eth": LINKTYPE_ETHERNET, "sll": LINKTYPE_SLL,
                "sll2": LINKTYPE_SLL2, "raw": LINKTYPE_RAW}[self.link]

    def tcp(self, seq_off=0, plen=100, flags=ACK, payload=None, ack_off=0,
            fill=b"a", **kw):
        """TCP bytes (header + payload) of this flow."""
        if payload is None:
            payload = (bytes(fill) * (plen // len(fill) + 1))[:plen]
        return tcp_segment(self.src, self.dst, kw.pop("sport", self.sport),
                           kw.pop("dport", self.dport),
                           self.seq0 + seq_off, self.ack0 + ack_off, flags,
                           kw.pop("window", self.window),
                           kw.pop("options", self.options), payload,
                           csum=kw.pop("csum", "valid"),
                           urg_ptr=kw.pop("urg_ptr", 0),
                           doff=kw.pop("doff", None)), kw

    def ip(self, l4, proto=6, **kw):
        """IP header(s) + ``l4``; keyword overrides of the IP fields."""
        if self.family == 4:
            if "ident" in kw:
                ident = kw.pop("ident")
            elif self.ipid == "inc":
                ident = self.next_id
                self.next_id = (self.next_id + 1) & 0xFFFF
            elif self.ipid is None:
                ident = 0
            else:
                ident = self.ipid
            return ipv4(l4, self.src, self.dst, proto=proto,
                        tos=kw.pop("tos", self.tos), ttl=kw.pop("ttl", self.ttl),
                        ident=ident, df=kw.pop("df", self.df),
                        mf=kw.pop("mf", False), frag_off=kw.pop("frag_off", 0),
                        evil=kw.pop("evil", False),
                        options=kw.pop("ip_options", b""),
                        csum=kw.pop("ip_csum", "valid"),
                        tot_len=kw.pop("tot_len", None)), kw
        return ipv6(l4, self.src, self.dst, nh=proto, tc=kw.pop("tc", self.tos),
                    flow=kw.pop("flow", self.flow), hlim=kw.pop("hlim", self.ttl),
                    exthdrs=kw.pop("exthdrs", self.exthdrs),
                    plen=kw.pop("ip_plen", None)), kw

    def frame(self, l3, **kw):
        """Link-layer framing of ``l3``."""
        et = ETH_P_IP if self.family == 4 else ETH_P_IPV6
        et = kw.pop("ethertype", et)
        if self.link == "eth":
            return eth(l3, et, vlans=kw.pop("vlans", self.vlans),
                       src=kw.pop("mac_src", self.mac_src),
                       dst=kw.pop("mac_dst", self.mac_dst),
                       pad_to=kw.pop("pad_to", 0),
                       trailer=kw.pop("trailer", b"")), kw
        if self.link == "sll":
            return sll(l3, et, addr=kw.pop("mac_src", self.mac_src)), kw
        if self.link == "sll2":
            return sll2(l3, et, addr=kw.pop("mac_src", self.mac_src)), kw
        return bytes(l3), kw

    def pkt(self, seq_off=0, plen=100, flags=ACK, ts=0, snaplen=None, **kw):
        """A whole frame as a Packet.

        ``seq_off``: offset from seq0; ``plen``: payload length; ``flags``:
        TCP flags byte; ``ts``: ns; ``snaplen``: cut the captured bytes
        to this length (orig_len stays the full length). Other keywords
        override TCP (ack_off, window, options, csum, payload, fill,
        urg_ptr, doff), IP (ident, tos, ttl, df, mf, frag_off, evil,
        ip_options, ip_csum, tot_len, tc, flow, hlim, exthdrs, ip_plen)
        or link fields (vlans, mac_src, mac_dst, pad_to, trailer,
        ethertype)."""
        l4, kw = self.tcp(seq_off, plen, flags, **kw)
        l3, kw = self.ip(l4, **kw)
        f, kw = self.frame(l3, **kw)
        iface = kw.pop("iface", self.iface)
        if kw:
            raise TypeError(f"unknown keywords {sorted(kw)}")
        orig = len(f)
        if snaplen is not None:
            f = f[:snaplen]
        return Packet(ts, f, orig, iface, self.linktype)

    def udp(self, plen=100, ts=0, **kw):
        l4 = udp_datagram(self.src, self.dst, self.sport, self.dport, b"u" * plen)
        l3, kw = self.ip(l4, proto=17, **kw)
        f, kw = self.frame(l3, **kw)
        return Packet(ts, f, len(f), self.iface, self.linktype)


# ---------------------------------------------------------------- parsing

class Parsed:
    """Fields of one frame, as far as they exist (None otherwise).

    Attributes: ts, caplen, orig_len, linktype; l3off; vlans [(tpid, tci)];
    family (4/6/None); src, dst (str); IPv4: tos, ttl, ipid, df, mf,
    evil, frag_off, tot_len, ihl, ip_csum_ok; IPv6: tc, flow, hlim, plen,
    nh, exts [(type, raw bytes)], jumbo (int or None); both: l3len (IP
    datagram length on the wire; for BIG TCP from the jumbo option or,
    IPv4 total length 0, from orig_len); TCP: l4off, sport, dport, seq,
    ack, flags, doff, window, csum, urg_ptr, options (bytes), tcp_len
    (header + payload on the wire), payload (captured payload bytes),
    payload_len (on the wire), tcp_csum_ok (None when not all bytes were
    captured); ip_csum_ok.
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        keys = ("family", "seq", "payload_len", "flags", "ipid", "l3len")
        return "Parsed(" + ", ".join(f"{k}={getattr(self, k, None)!r}" for k in keys) + ")"


def parse(pkt):
    """Parse a Packet (any link type this module builds) into Parsed."""
    d = bytes(pkt.data)
    r = Parsed(ts=pkt.ts, caplen=len(d), orig_len=pkt.orig_len,
               linktype=pkt.linktype, vlans=[], family=None, seq=None,
               payload_len=None, flags=None, ipid=None, l3len=None,
               tcp_csum_ok=None, ip_csum_ok=None, meta=pkt.meta)
    lt = pkt.linktype
    if lt == LINKTYPE_ETHERNET:
        off = 12
        et = struct.unpack_from("!H", d, off)[0]
        while et in VLAN_TPIDS or et == 0x9100:
            tci = struct.unpack_from("!H", d, off + 2)[0]
            r.vlans.append((et, tci))
            off += 4
            et = struct.unpack_from("!H", d, off)[0]
        l3off = off + 2
        r.mac_dst, r.mac_src = d[0:6], d[6:12]
    elif lt == LINKTYPE_SLL:
        et, l3off = struct.unpack_from("!H", d, 14)[0], 16
    elif lt == LINKTYPE_SLL2:
        et, l3off = struct.unpack_from("!H", d, 0)[0], 20
    elif lt == LINKTYPE_RAW:
        l3off = 0
        et = ETH_P_IP if d[0] >> 4 == 4 else ETH_P_IPV6
    else:
        raise ValueError(f"linktype {lt}")
    r.ethertype, r.l3off = et, l3off
    if et == ETH_P_IP:
        r.family = 4
        vihl, tos, tot, ident, frag, ttl, proto, _c = struct.unpack_from("!BBHHHBBH", d, l3off)
        ihl = (vihl & 0xF) * 4
        r.ihl, r.tos, r.tot_len, r.ipid, r.ttl, r.proto = ihl, tos, tot, ident, ttl, proto
        r.df, r.mf, r.evil = bool(frag & 0x4000), bool(frag & 0x2000), bool(frag & 0x8000)
        r.frag_off = frag & 0x1FFF
        r.src = str(ipaddress.ip_address(d[l3off + 12:l3off + 16]))
        r.dst = str(ipaddress.ip_address(d[l3off + 16:l3off + 20]))
        r.ip_csum_ok = ipv4_csum_ok(d[l3off:l3off + ihl])
        r.l3len = tot if tot else pkt.orig_len - l3off
        l4off = l3off + ihl
    elif et == ETH_P_IPV6:
        r.family = 6
        first, plen, nh, hlim = struct.unpack_from("!IHBB", d, l3off)
        r.tc, r.flow, r.plen, r.hlim, r.nh = (first >> 20) & 0xFF, first & 0xFFFFF, plen, hlim, nh
        r.src = str(ipaddress.ip_address(d[l3off + 8:l3off + 24]))
        r.dst = str(ipaddress.ip_address(d[l3off + 24:l3off + 40]))
        off = l3off + 40
        r.exts, r.jumbo = [], None
        while nh in (0, 43, 60, 44):
            if nh == 44:
                ln = 8
            else:
                ln = (d[off + 1] + 1) * 8
            raw = d[off:off + ln]
            if nh == 0 and raw[2] == 0xC2:
                r.jumbo = struct.unpack_from("!I", raw, 4)[0]
            r.exts.append((nh, raw))
            nh = raw[0]
            off += ln
        r.proto = nh
        r.l3len = 40 + (r.jumbo if (plen == 0 and r.jumbo is not None) else plen)
        l4off = off
    else:
        return r
    if r.proto != 6:
        return r
    sport, dport, seq, ack, doffb, flags, win, csum, urg = struct.unpack_from("!HHIIBBHHH", d, l4off)
    doff = (doffb >> 4) * 4
    r.l4off, r.sport, r.dport, r.seq, r.ack = l4off, sport, dport, seq, ack
    r.doff, r.flags, r.window, r.csum, r.urg_ptr = doff, flags, win, csum, urg
    r.options = d[l4off + 20:l4off + doff]
    r.tcp_len = l3off + r.l3len - l4off
    r.payload_len = r.tcp_len - doff
    r.payload = d[l4off + doff:l3off + r.l3len]
    if len(d) >= l3off + r.l3len:
        r.tcp_csum_ok = tcp_csum_ok(r.src, r.dst, d[l4off:l3off + r.l3len])
        r.pseudo_seed = inet_fold(inet_sum(pseudo_header(r.src, r.dst, 6, r.tcp_len)))
    return r
