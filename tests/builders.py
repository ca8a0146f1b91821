"""Build small pcap / pcapng files byte by byte for the unit tests."""

import struct

MAGIC = {("us", "<"): b"\xd4\xc3\xb2\xa1", ("us", ">"): b"\xa1\xb2\xc3\xd4",
         ("ns", "<"): b"\x4d\x3c\xb2\xa1", ("ns", ">"): b"\xa1\xb2\x3c\x4d",
         ("mod", "<"): b"\x34\xcd\xb2\xa1", ("mod", ">"): b"\xa1\xb2\xcd\x34"}


def pcap(records, res="us", bo="<", snaplen=65535, linktype=1):
    """records: (sec, frac, data, orig_len) tuples."""
    out = [MAGIC[(res, bo)] + struct.pack(bo + "HHiIII", 2, 4, 0, 0, snaplen, linktype)]
    for sec, frac, data, olen in records:
        out.append(struct.pack(bo + "IIII", sec, frac, len(data), olen))
        if res == "mod":
            out.append(struct.pack(bo + "IHBx", 2, 0x0800, 0))
        out.append(data)
    return b"".join(out)


def opts(bo, items):
    if not items:
        return b""
    out = []
    for code, v in items:
        out.append(struct.pack(bo + "HH", code, len(v)) + v + b"\0" * ((-len(v)) & 3))
    out.append(b"\0\0\0\0")
    return b"".join(out)


def block(bo, btype, body):
    body = body + b"\0" * ((-len(body)) & 3)
    bl = 12 + len(body)
    return struct.pack(bo + "II", btype, bl) + body + struct.pack(bo + "I", bl)


def shb(bo="<", options=()):
    return block(bo, 0x0A0D0D0A, struct.pack(bo + "IHHq", 0x1A2B3C4D, 1, 0, -1) + opts(bo, options))


def idb(bo="<", linktype=1, snaplen=0, options=()):
    return block(bo, 1, struct.pack(bo + "HHI", linktype, 0, snaplen) + opts(bo, options))


def epb(bo, iface, ticks, data, olen=None, options=()):
    olen = len(data) if olen is None else olen
    body = struct.pack(bo + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), olen)
    return block(bo, 6, body + data + b"\0" * ((-len(data)) & 3) + opts(bo, options))


def spb(bo, data, olen=None):
    olen = len(data) if olen is None else olen
    return block(bo, 3, struct.pack(bo + "I", olen) + data)


def pb(bo, iface, drops, ticks, data, olen=None, options=()):
    olen = len(data) if olen is None else olen
    body = struct.pack(bo + "HHIIII", iface, drops, ticks >> 32, ticks & 0xFFFFFFFF, len(data), olen)
    return block(bo, 2, body + data + b"\0" * ((-len(data)) & 3) + opts(bo, options))


def pkt(n, fill=0x41):
    """An n-byte Ethernet-ish frame."""
    return bytes([fill]) * n
