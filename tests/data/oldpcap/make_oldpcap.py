"""Write the old pcap variants of tests/data/oldpcap from the first 14
records of samples/tcp4-bulk-wire.pcap (plain struct, no pcapgro), with the
record headers Wireshark's wiretap/libpcap.c reads:

  plain.pcap            standard magic, 16-byte record headers (reference)
  ss990417-{le,be}.pcap standard magic, 24 bytes: + ifindex, protocol,
                        pkt_type, pad (Red Hat 6.1)
  nokia-le.pcap         standard magic, 20 bytes: + 4 bytes 0x9fbfb601
                        (the pattern Wireshark checks, little-endian)
  ss991029-{le,be}.pcap modified magic 0xa1b2cd34, 24 bytes as ss990417
  ss990915-{le,be}.pcap modified magic, 28 bytes: + ifindex, protocol,
                        pkt_type, cpu1, cpu2, 3 pad bytes (SuSE 6.3)

Run from the repository root: python3 tests/data/oldpcap/make_oldpcap.py
"""

import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "samples" / "tcp4-bulk-wire.pcap"
N = 14


def records():
    data = SRC.read_bytes()
    assert data[:4] == b"\xd4\xc3\xb2\xa1"
    snaplen, linktype = struct.unpack_from("<II", data, 16)
    out, pos = [], 24
    for _ in range(N):
        sec, usec, incl, orig = struct.unpack_from("<IIII", data, pos)
        out.append((sec, usec, orig, data[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    return snaplen, linktype, out


def extra(variant, bo, i):
    """The bytes after the standard 16 of record ``i``."""
    if variant == "nokia":
        return struct.pack("<I", 0x9FBFB601)
    if variant == "pcap":
        return b""
    # ifindex 2, protocol ETH_P_IP, pkt_type 4 (PACKET_OUTGOING)
    base = struct.pack(bo + "IHB", 2, 0x0800, 4)
    if variant == "ss990915":
        return base + bytes((0, 1)) + b"\xaa\xbb\xcc"   # cpu1, cpu2, padding (any)
    return base + b"\xee"                               # padding (any)


def write(name, variant, bo):
    snaplen, linktype, recs = records()
    magic = 0xA1B2CD34 if variant in ("ss991029", "ss990915") else 0xA1B2C3D4
    parts = [struct.pack(bo + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for i, (sec, usec, orig, data) in enumerate(recs):
        parts.append(struct.pack(bo + "IIII", sec, usec, len(data), orig) + extra(variant, bo, i))
        parts.append(data)
    (HERE / name).write_bytes(b"".join(parts))


if __name__ == "__main__":
    write("plain.pcap", "pcap", "<")
    for v in ("ss990417", "ss991029", "ss990915"):
        write(f"{v}-le.pcap", v, "<")
        write(f"{v}-be.pcap", v, ">")
    write("nokia-le.pcap", "nokia", "<")
