"""Unit tests of the capture layer: each magic / byte order, each block
type, options, resolutions, sections, damage, writers."""

import io
import struct

import pytest

from builders import pcap, shb, idb, epb, spb, pb, block, pkt
from pcapgro.capture import open_reader, open_writer, PcapReader, PcapngReader, PcapWriter, PcapngWriter
from pcapgro.capture.pcapng import ts_to_ns, ns_to_ts
from pcapgro.errors import DamagedInput, UnusableInput
from pcapgro.record import (Packet, PacketMeta, Interface, Section, Block, EPB_FLAG_TSO,
                            BLOCK_SPB, BLOCK_PB, BLOCK_EPB)


def read_bytes(data):
    f = io.BytesIO(data)
    head = f.read(4)
    cls = PcapngReader if head == b"\n\r\r\n" else PcapReader
    return list(cls(f, head))


def packets(events):
    return [e for e in events if type(e) is Packet]


def write_events(events, fmt, **kw):
    f = io.BytesIO()
    w = (PcapWriter if fmt == "pcap" else PcapngWriter)(f, **kw)
    for e in events:
        w.write(e)
    w.close()
    return f.getvalue()


# --- classic pcap ------------------------------------------------------

@pytest.mark.parametrize("res", ["us", "ns", "mod"])
@pytest.mark.parametrize("bo", ["<", ">"])
def test_pcap_magic_and_byte_order(res, bo):
    recs = [(1700000000, 123456, pkt(60), 60), (1700000001, 999999, pkt(100), 1514)]
    evs = read_bytes(pcap(recs, res, bo, snaplen=100, linktype=101))
    assert type(evs[0]) is Section and evs[0].byteorder == bo
    assert type(evs[1]) is Interface and evs[1].linktype == 101 and evs[1].snaplen == 100
    assert evs[1].tsresol == (9 if res == "ns" else 6)
    ps = packets(evs)
    mul = 1 if res == "ns" else 1000
    assert [p.ts for p in ps] == [1700000000 * 10**9 + 123456 * mul, 1700000001 * 10**9 + 999999 * mul]
    assert [(len(p.data), p.orig_len, p.iface, p.linktype, p.meta) for p in ps] == \
        [(60, 60, 0, 101, None), (100, 1514, 0, 101, None)]


@pytest.mark.parametrize("res", ["us", "ns"])
@pytest.mark.parametrize("bo", ["<", ">"])
def test_pcap_roundtrip_identical_but_snaplen(res, bo):
    src = pcap([(5, 7, pkt(0), 0), (6, 8, pkt(70), 1500), (7, 9, pkt(1), 1)], res, bo, snaplen=70)
    out = write_events(read_bytes(src), "pcap")
    assert out[:16] == src[:16] and out[20:] == src[20:]
    assert struct.unpack(bo + "I", out[16:20])[0] == 262144


def test_pcap_zero_length_and_short_caplen():
    ps = packets(read_bytes(pcap([(1, 0, b"", 0), (2, 0, pkt(10), 9000)])))
    assert [(p.data, p.orig_len) for p in ps] == [(b"", 0), (pkt(10), 9000)]


def test_pcap_truncated_last_record():
    data = pcap([(1, 0, pkt(50), 50), (2, 0, pkt(50), 50)])
    for cut in (3, 20):       # inside the record data / inside its header
        f = io.BytesIO(data[:-cut] if cut == 3 else data[:24 + 66 + 10])
        r = PcapReader(f, f.read(4))
        got = []
        with pytest.raises(DamagedInput) as ei:
            for e in r:
                got.append(e)
        assert len(packets(got)) == 1
        assert ei.value.offset == 24 + 66
        assert "truncated record" in ei.value.problem


def test_pcap_bad_header():
    with pytest.raises(UnusableInput):
        PcapReader(io.BytesIO(b"\xd4\xc3\xb2\xa1\2\0"), b"")


def test_pcap_writer_snaplen_large_packet(capsys):
    evs = [Section(), Interface(1, 1500, 6), Packet(10**9, pkt(100), 100),
           Packet(2 * 10**9, pkt(300000), 300000)]
    out = write_events(evs, "pcap")
    assert struct.unpack("<I", out[16:20])[0] == 300000
    err = capsys.readouterr().err
    assert err.count("larger than 262144") == 1


def test_pcap_writer_snaplen_patched_at_close(tmp_path):
    p = tmp_path / "o.pcap"
    w = open_writer(p, "pcap")
    w.write(Section())
    w.write(Interface(1))
    for i in range(900):        # > 1 MiB so the header is flushed first
        w.write(Packet(i, pkt(1500), 1500))
    w.write(Packet(10**9, pkt(200000), 200000))
    w.write(Packet(10**9, pkt(270000), 270000))
    w.close()
    assert struct.unpack("<I", p.read_bytes()[16:20])[0] == 270000
    assert len(packets(open_reader(p))) == 902


def test_pcap_writer_ns_from_interface():
    evs = [Section(">"), Interface(1, 0, 9), Packet(1_000_000_007, b"x", 1)]
    out = write_events(evs, "pcap")
    assert out[:4] == b"\xa1\xb2\x3c\x4d"
    assert packets(read_bytes(out))[0].ts == 1_000_000_007


def test_pcap_writer_refuses_several_linktypes():
    with pytest.raises(UnusableInput, match="-F pcapng"):
        write_events([Section(), Interface(1), Interface(113)], "pcap")


# --- pcapng --------------------------------------------------------------

@pytest.mark.parametrize("bo", ["<", ">"])
def test_pcapng_epb_options_and_resolution(bo):
    flags = struct.pack(bo + "I", EPB_FLAG_TSO | 1)
    custom = struct.pack(bo + "I", 32473) + b"keep"
    nocopy = struct.pack(bo + "I", 32473) + b"drop"
    data = (shb(bo, [(1, b"section comment"), (19372, nocopy)])
            + idb(bo, 1, 0, [(2, b"eth0"), (9, b"\x09"), (14, struct.pack(bo + "q", 100))])
            + epb(bo, 0, 5, pkt(33), 40, [(1, b"one"), (1, "tw\u00f6".encode()), (2, flags),
                                         (2989, custom), (19373, nocopy)]))
    evs = read_bytes(data)
    assert evs[0].options == [(1, b"section comment")]
    i = evs[1]
    assert (i.tsresol, i.tsoffset, i.options) == (9, 100, [(2, b"eth0")])
    p = evs[2]
    assert p.ts == 100 * 10**9 + 5 and p.orig_len == 40 and len(p.data) == 33
    assert p.meta.comments == ["one", "tw\u00f6"]
    assert p.meta.flags == EPB_FLAG_TSO | 1
    assert p.meta.options == [(2989, custom)]
    out = write_events(evs, "pcapng")
    assert out[8:12] == struct.pack(bo + "I", 0x1A2B3C4D)
    again = read_bytes(out)
    assert repr(again) == repr(evs)
    p2 = again[2]
    assert (p2.ts, p2.data, p2.meta.comments, p2.meta.flags, p2.meta.options) == \
        (p.ts, p.data, p.meta.comments, p.meta.flags, p.meta.options)


@pytest.mark.parametrize("tsresol", [0, 3, 6, 9, 0x80, 0x8A, 0x94, 0x9D])
def test_tsresol_roundtrip_exact(tsresol):
    for ticks in (0, 1, 12345, 2**40 + 77, 2**63 - 1):
        mul, off, conv = ts_to_ns(tsresol, -7)
        ns = ticks * mul + off if conv is None else conv(ticks)
        div, off2, iconv = ns_to_ts(tsresol, -7)
        back = (ns - off2) // div if iconv is None else iconv(ns)
        assert back == ticks, (tsresol, ticks)


def test_pcapng_pow2_resolution_written_back():
    data = shb() + idb("<", 1, 0, [(9, b"\x94")]) + epb("<", 0, 3 * 2**20 + 1, b"abc")
    evs = read_bytes(data)
    assert packets(evs)[0].ts == 3 * 10**9 + (10**9 >> 20)
    assert write_events(evs, "pcapng") == data


def test_pcapng_spb():
    data = shb() + idb("<", 1, 20) + spb("<", pkt(20), 100) + spb("<", pkt(5))
    evs = read_bytes(data)
    ps = packets(evs)
    assert [(p.ts, len(p.data), p.orig_len, p.iface, p.meta.block) for p in ps] == \
        [(0, 20, 100, 0, BLOCK_SPB), (0, 5, 5, 0, BLOCK_SPB)]
    assert write_events(evs, "pcapng") == data


def test_pcapng_obsolete_pb():
    data = shb() + idb() + pb("<", 0, 3, 10**6, pkt(10), 10, [(2, struct.pack("<I", 2))])
    p = packets(read_bytes(data))[0]
    assert p.meta.block == BLOCK_PB and p.meta.flags == 2 and p.ts == 10**9
    assert p.meta.options == [(4, struct.pack("<Q", 3))]
    again = packets(read_bytes(write_events(read_bytes(data), "pcapng")))[0]
    assert again.meta.block == BLOCK_EPB and again.meta.flags == 2 and again.ts == 10**9


def test_pcapng_blocks_kept_and_nocopy_dropped():
    cb = block("<", 0x00000BAD, struct.pack("<I", 32473) + b"copy me!")
    dcb = block("<", 0x40000BAD, struct.pack("<I", 32473) + b"drop me!")
    nrb = block("<", 4, struct.pack("<HH", 1, 8) + b"\x0a\0\0\x01ab\0\0" + b"\0\0\0\0")
    isb = block("<", 5, struct.pack("<III", 0, 0, 0))
    unknown = block("<", 0x1234, b"whatever")
    data = shb() + cb + idb() + dcb + nrb + isb + unknown + epb("<", 0, 1, b"x")
    evs = read_bytes(data)
    assert [type(e).__name__ for e in evs] == \
        ["Section", "Block", "Interface", "Block", "Block", "Block", "Packet"]
    assert [e.type for e in evs if type(e) is Block] == [0xBAD, 4, 5, 0x1234]
    out = write_events(evs, "pcapng")
    assert out == shb() + cb + idb() + nrb + isb + unknown + epb("<", 0, 1, b"x")


def test_pcapng_sections_with_own_byte_order_and_interfaces():
    data = (shb("<") + idb("<", 1) + idb("<", 101, 0, [(9, b"\x09")]) + epb("<", 1, 5, b"a")
            + shb(">") + idb(">", 113) + epb(">", 0, 7, b"bb") + spb(">", b"ccc"))
    evs = read_bytes(data)
    ps = packets(evs)
    # the SPB takes the time of the packet before it (tests/test_spb_times.py)
    assert [(p.iface, p.linktype, p.ts) for p in ps] == [(1, 101, 5), (0, 113, 7000), (0, 113, 7000)]
    assert write_events(evs, "pcapng") == data


def test_pcapng_packet_for_missing_interface_is_damage():
    data = shb() + idb() + epb("<", 0, 1, b"x") + epb("<", 3, 1, b"y")
    got = []
    with pytest.raises(DamagedInput) as ei:
        for e in PcapngReader(io.BytesIO(data), b""):
            got.append(e)
    assert len(packets(got)) == 1 and "interface 3" in ei.value.problem


def test_pcapng_truncated_block():
    data = shb() + idb() + epb("<", 0, 1, pkt(40)) + epb("<", 0, 2, pkt(40))
    got = []
    with pytest.raises(DamagedInput) as ei:
        for e in PcapngReader(io.BytesIO(data[:-9]), b""):
            got.append(e)
    assert len(packets(got)) == 1
    assert ei.value.offset == len(data) - len(epb("<", 0, 2, pkt(40)))


def test_pcapng_bad_byte_order_magic():
    with pytest.raises(UnusableInput):
        PcapngReader(io.BytesIO(b"\n\r\r\n\x1c\0\0\0\x11\x22\x33\x44" + b"\0" * 16), b"")


def test_pcapng_writer_engine_packets_get_epb_options():
    m = PacketMeta(BLOCK_EPB, ["pcapgro: merged 3 segments"], EPB_FLAG_TSO)
    evs = [Section(), Interface(1, 0, 9), Packet(123, pkt(3000), 3000, 0, 1, m)]
    p = packets(read_bytes(write_events(evs, "pcapng")))[0]
    assert p.meta.comments == ["pcapgro: merged 3 segments"] and p.meta.flags == EPB_FLAG_TSO
    assert p.ts == 123


def test_pcapng_writer_raises_idb_snaplen(tmp_path):
    path = tmp_path / "o.pcapng"
    w = open_writer(path, "pcapng")
    for e in [Section(), Interface(1, 1500, 6), Packet(0, pkt(1000), 1000), Packet(0, pkt(65000), 65000)]:
        w.write(e)
    w.close()
    evs = list(open_reader(path))
    assert evs[1].snaplen == 65000 and len(packets(evs)[1].data) == 65000


def test_pcapng_to_pcap_drops_comments_with_one_line(capsys):
    m = PacketMeta(BLOCK_EPB, ["a", "b"], 1)
    out = write_events([Section(), Interface(1), Packet(0, b"x", 1, 0, 1, m), Block(4, b"\0" * 4)], "pcap")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 comments" in err and "1 block " in err
    assert len(packets(read_bytes(out))) == 1


def test_pcap_to_pcapng_keeps_everything():
    src = pcap([(1, 2, pkt(10), 20)], "ns", ">", linktype=228)
    evs = read_bytes(write_events(read_bytes(src), "pcapng"))
    assert evs[1].linktype == 228 and evs[1].tsresol == 9
    p = packets(evs)[0]
    assert (p.ts, len(p.data), p.orig_len) == (10**9 + 2, 10, 20)


def test_batches_and_iteration_agree(tmp_path):
    src = pcap([(i, i, pkt(i % 200), 300) for i in range(5000)])
    a = read_bytes(src)
    f = io.BytesIO(src)
    b = [e for batch in PcapReader(f, f.read(4)).batches() for e in batch]
    assert repr(a) == repr(b)


@pytest.mark.parametrize("meta", [None, PacketMeta(comments=["c"])])
def test_pcapng_timestamp_out_of_interface_range_is_one_line(meta):
    """A time the interface's if_tsoffset/if_tsresol cannot hold (before the
    offset, or beyond 64 bits of units) is UnusableInput, not a struct
    error (fuzzing: GRO stamped a held packet of interface 0 with the later
    time of interface 1, whose offset was 10^13 s)."""
    for iface, ts in ((Interface(1, 0, 9, 1000, []), 10 ** 9),       # before the offset
                      (Interface(1, 0, 9, 0, []), 1 << 65)):          # beyond 64 bits of ns
        w = PcapngWriter(io.BytesIO())
        w.write(Section())
        w.write(iface)
        with pytest.raises(UnusableInput, match="does not fit"):
            w.write_batch([Packet(ts, pkt(60), 60, meta=meta)])


def test_pcap_dropped_metadata_warning_counts_in_words(capsys):
    w = PcapWriter(io.BytesIO())
    w.write(Section())
    w.write(Interface(1, 0, 9, 0, []))
    w.write(Block(0xBAD, b"\0" * 4))
    w.write(Packet(1, pkt(60), 60, meta=PacketMeta(comments=["a", "b"])))
    w.close()
    err = capsys.readouterr().err
    assert "dropped 2 comments, 1 block " in err, err
