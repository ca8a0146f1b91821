"""Make a long capture from a real one by repetition (benchmarks, tests).

The source is a classic pcap of Ethernet/IPv4/TCP connections (e.g. the
shared ``tcp4-bulk-wire.pcap``).  Copy ``r`` (r >= 1) is shifted so that
every stream goes on where copy ``r - 1`` ended: timestamps by the source's
duration + 1 ms per copy, sequence and acknowledgment numbers by the bytes
each direction sent (payload only: the SYN is left out of the copies and FINs are
cleared); SYN packets are left out
of the copies and FIN flags are cleared everywhere but in the last copy, so
the result is one long connection per source connection (what a bounded
window must handle), not many short ones.  TCP checksums are updated
incrementally (RFC 1624), so they stay valid (or stay bad).
"""

from __future__ import annotations

import struct

_ETH_IP4 = b"\x08\x00"


def _fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def read_records(path):
    """(24-byte header, endian prefix, [(sec, frac, orig_len, bytes)])."""
    with open(path, "rb") as f:
        d = f.read()
    e = "<" if d[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    ns = d[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    recs, off = [], 24
    while off + 16 <= len(d):
        s, fr, cl, ln = struct.unpack(e + "IIII", d[off:off + 16])
        recs.append((s, fr, ln, d[off + 16:off + 16 + cl]))
        off += 16 + cl
    return d[:24], e, ns, recs


def _tcp_at(b):
    """Offset of the TCP header in an Ethernet/IPv4 frame, or None."""
    if len(b) < 54 or b[12:14] != _ETH_IP4 or b[23] != 6:
        return None
    return 14 + (b[14] & 15) * 4


def _spans(recs):
    """{(src, dst, sport, dport): bytes of sequence space one copy uses}."""
    lo, hi = {}, {}
    for _, _, _, b in recs:
        t = _tcp_at(b)
        if t is None:
            continue
        k = bytes(b[26:34]) + bytes(b[t:t + 4])
        seq = struct.unpack_from("!I", b, t + 4)[0]
        ip_len = struct.unpack_from("!H", b, 16)[0]
        if b[t + 13] & 0x02:
            continue                        # the SYN's sequence number is not data
        n = ip_len - (t - 14) - (b[t + 12] >> 4) * 4
        lo.setdefault(k, seq)
        hi[k] = max(hi.get(k, 0), (seq - lo[k]) % 2**32 + n)
    return hi


def _shift(b, t, dseq, dack, clear_fin):
    b = bytearray(b)
    old = b[t + 4:t + 14]
    seq, ack = struct.unpack_from("!II", b, t + 4)
    struct.pack_into("!II", b, t + 4, (seq + dseq) & 0xFFFFFFFF, (ack + dack) & 0xFFFFFFFF)
    if clear_fin:
        b[t + 13] &= 0xFE
    new = b[t + 4:t + 14]
    c = struct.unpack_from("!H", b, t + 16)[0]
    s = (~c & 0xFFFF) + sum(~x & 0xFFFF for x in struct.unpack("!5H", old))
    s += sum(struct.unpack("!5H", new))
    struct.pack_into("!H", b, t + 16, ~_fold(s) & 0xFFFF)
    return b


def repeat(src, dst, n_packets, gap_ns=1_000_000):
    """Write ``n_packets`` records to ``dst``: ``src`` repeated (see the
    module docstring), the last copy cut at ``n_packets``.  Returns the
    number written."""
    hdr, e, ns, recs = read_records(src)
    unit = 1 if ns else 1000
    per = 1_000_000_000 // unit
    t0 = recs[0][0] * 1_000_000_000 + recs[0][1] * unit
    t1 = recs[-1][0] * 1_000_000_000 + recs[-1][1] * unit
    dur = t1 - t0 + gap_ns
    spans = _spans(recs)
    copies = -(-n_packets // len(recs))
    pack = struct.Struct(e + "IIII").pack
    written = 0
    with open(dst, "wb", buffering=1 << 22) as f:
        f.write(hdr)
        for r in range(copies):
            last = r == copies - 1
            for s, fr, ln, b in recs:
                if written == n_packets:
                    break
                t = _tcp_at(b)
                if r and t is not None:
                    if b[t + 13] & 0x02:
                        continue            # no handshake in the copies
                    k = bytes(b[26:34]) + bytes(b[t:t + 4])
                    rk = bytes(b[30:34]) + bytes(b[26:30]) + bytes(b[t + 2:t + 4]) + bytes(b[t:t + 2])
                    b = _shift(b, t, r * spans.get(k, 0), r * spans.get(rk, 0), not last)
                elif t is not None and not last and b[t + 13] & 0x01:
                    b = _shift(b, t, 0, 0, True)
                ts = (s * 1_000_000_000 + fr * unit - t0) + t0 + r * dur
                f.write(pack(ts // 1_000_000_000, (ts % 1_000_000_000) // unit, len(b), ln))
                f.write(b)
                written += 1
    return written
