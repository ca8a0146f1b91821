"""Frames that end in an FCS: classic pcap's link-type FCS bits
(LT_FCS_DATALINK_EXT) and pcapng's if_fcslen are kept, frames passed
unchanged keep their FCS, frames pcapgro makes or rewrites get a valid one."""

import io
import struct
import subprocess
import zlib

import pytest

from builders import pcap, shb, idb, epb
from capture_helpers import run_cli, tshark
from pktbuild import Flow
from pcapgro.capture import PcapReader, PcapngReader, PcapWriter, PcapngWriter, open_reader
from pcapgro.errors import UnusableInput
from pcapgro.record import Interface, Packet, Section

LT_ETH_FCS4 = 0x24000001    # Ethernet, FCS length known: 2 16-bit words


def crc(b):
    return struct.pack("<I", zlib.crc32(b))


def with_fcs(frame):
    return frame + crc(frame)


def fcs_ok(frame):
    return frame[-4:] == crc(frame[:-4])


def read(data):
    f = io.BytesIO(data)
    head = f.read(4)
    return list((PcapngReader if head == b"\n\r\r\n" else PcapReader)(f, head))


def write(events, cls):
    f = io.BytesIO()
    w = cls(f)
    for e in events:
        w.write(e)
    w.close()
    return f.getvalue()


def linktype_field(pcap_bytes):
    return struct.unpack_from("<I", pcap_bytes, 20)[0]


def idb_options(ng_bytes):
    return [e.options for e in read(ng_bytes) if type(e) is Interface]


def pk(path):
    return [p for p in open_reader(path) if type(p) is Packet]


# --- capture layer -----------------------------------------------------------

@pytest.mark.parametrize("field,fcs", [(0x24000001, 4), (0x14000001, 2), (0x04000001, 0),
                                       (0x24000000 | 105, 4)])
def test_pcap_fcs_bits_kept(field, fcs):
    """pcap -> pcap keeps the field; pcap -> pcapng gives if_fcslen (bytes);
    that pcapng -> pcap gives the field back."""
    data = pcap([(1, 2, b"x" * 64, 64)], linktype=field)
    evs = read(data)
    i = [e for e in evs if type(e) is Interface][0]
    assert i.linktype == field & 0xFFFF and i.options == [(13, bytes([fcs]))]
    assert [p.linktype for p in evs if type(p) is Packet] == [field & 0xFFFF]
    out = write(evs, PcapWriter)
    assert linktype_field(out) == field
    ng = write(evs, PcapngWriter)
    assert idb_options(ng) == [[(13, bytes([fcs]))]]
    assert linktype_field(write(read(ng), PcapWriter)) == field


def test_pcap_without_fcs_bits_has_no_if_fcslen():
    evs = read(pcap([(1, 2, b"x" * 64, 64)], linktype=1))
    assert [e.options for e in evs if type(e) is Interface] == [[]]
    assert linktype_field(write(evs, PcapWriter)) == 1


def test_pcap_reserved_linktype_bits_ignored():
    """Bits 16-25 and 27 are reserved: readers ignore them, writers write 0."""
    evs = read(pcap([(1, 2, b"x" * 64, 64)], linktype=0x0BFF0001))
    assert [e.options for e in evs if type(e) is Interface] == [[]]
    assert linktype_field(write(evs, PcapWriter)) == 1


@pytest.mark.parametrize("value,field", [(4, 0x24000001), (32, 0x24000001), (16, 0x14000001)])
def test_pcapng_if_fcslen_to_pcap(value, field):
    """if_fcslen in bytes (as Wireshark reads it) or bits (as the draft says)."""
    ng = shb() + idb("<", 1, 0, [(13, bytes([value]))]) + epb("<", 0, 1, b"y" * 64)
    assert linktype_field(write(read(ng), PcapWriter)) == field


def test_pcapng_interfaces_with_different_fcs_refused_as_pcap():
    ng = (shb() + idb("<", 1, 0, [(13, b"\x04")]) + idb("<", 1)
          + epb("<", 0, 1, b"y" * 64) + epb("<", 1, 1, b"z" * 64))
    with pytest.raises(UnusableInput, match="different FCS lengths"):
        write(read(ng), PcapWriter)


def test_pcapng_odd_fcs_length_refused_as_pcap():
    ng = shb() + idb("<", 1, 0, [(13, b"\x03")]) + epb("<", 0, 1, b"y" * 64)
    with pytest.raises(UnusableInput, match="FCS length of 3 bytes"):
        write(read(ng), PcapWriter)


# --- the commands ------------------------------------------------------------

PL = 100


def fcs_capture(tmp_path, frames, name="in.pcap"):
    recs = [(1700000000, 10 * i, with_fcs(f), len(f) + 4) for i, f in enumerate(frames)]
    p = tmp_path / name
    p.write_bytes(pcap(recs, linktype=LT_ETH_FCS4))
    return p


def test_merge_keeps_fcs_and_linktype(tmp_path):
    """The frames keep their FCS; GRO sees it as a trailer past the IP
    length (as on a kernel with rx-fcs on): nothing merges, every frame is
    written unchanged; pcap keeps the field, pcapng gets if_fcslen."""
    f = Flow(4)
    frames = [f.pkt(i * PL, PL).data for i in range(4)]
    src = fcs_capture(tmp_path, frames)
    for out in (tmp_path / "o.pcap", tmp_path / "o.pcapng", tmp_path / "n.pcap"):
        args = ("--no-gro",) if out.name == "n.pcap" else ()
        p = run_cli("merge", "-q", *args, src, out)
        assert p.returncode == 0, p.stderr
        assert [q.data for q in pk(out)] == [with_fcs(x) for x in frames]
    assert linktype_field((tmp_path / "o.pcap").read_bytes()) == LT_ETH_FCS4
    assert linktype_field((tmp_path / "n.pcap").read_bytes()) == LT_ETH_FCS4
    # and merge's note of the 65535-byte snaplen an aggregate could exceed
    # (split --restore writes it back; pcapgro/restore.py note_snaplen)
    assert idb_options((tmp_path / "o.pcapng").read_bytes()) == [
        [(13, b"\x04"), (1, b"pcapgro-restore v1 snaplen=65535")]]


def test_split_gives_every_segment_its_fcs(tmp_path):
    f = Flow(4)
    sup = f.pkt(0, 4000).data
    frames = [sup, f.pkt(4000, PL).data]
    src = fcs_capture(tmp_path, frames)
    out = tmp_path / "o.pcap"
    p = run_cli("split", "-q", src, out)
    assert p.returncode == 0, p.stderr
    assert linktype_field(out.read_bytes()) == LT_ETH_FCS4
    got = pk(out)
    assert len(got) == 4
    assert all(fcs_ok(q.data) and len(q.data) == q.orig_len for q in got)
    # the segments are the wire frames: IP length + Ethernet header + FCS
    assert [len(q.data) for q in got] == [14 + 1500 + 4, 14 + 1500 + 4, 14 + 1120 + 4, 14 + 140 + 4]
    assert got[-1].data == with_fcs(frames[1])
    # the super-frame's payload, and nothing else, in the segments
    pay = b"".join(q.data[54:-4] for q in got[:3])
    assert pay == sup[54:]


def test_split_completes_seed_and_recomputes_fcs(tmp_path):
    f = Flow(4)
    fr = f.pkt(0, PL, csum="seed").data
    src = fcs_capture(tmp_path, [fr])
    out = tmp_path / "o.pcap"
    assert run_cli("split", "-q", src, out).returncode == 0
    (q,) = pk(out)
    assert q.data[:-4] != fr and fcs_ok(q.data) and len(q.data) == len(fr) + 4


def test_split_ipv4_total_length_zero_does_not_take_the_fcs(tmp_path):
    """Total length 0 (TSO on Windows) runs to the end of the frame, which
    ends before the FCS."""
    f = Flow(4)
    sup = bytearray(f.pkt(0, 3000).data)
    sup[16:18] = b"\0\0"
    src = fcs_capture(tmp_path, [bytes(sup)])
    out = tmp_path / "o.pcap"
    assert run_cli("split", "-q", src, out).returncode == 0
    got = pk(out)
    assert b"".join(q.data[54:-4] for q in got) == bytes(sup[54:])
    assert all(fcs_ok(q.data) for q in got)


def test_forward_recomputes_fcs(tmp_path):
    """merge --gso: the egress device computes the FCS of what it sends
    (TTL decremented; IPv4 fragments)."""
    f = Flow(4)
    frames = [f.pkt(0, 1000, df=False).data, f.pkt(1000, PL).data]
    src = fcs_capture(tmp_path, frames)
    out = tmp_path / "o.pcap"
    p = run_cli("merge", "-q", "--gso", "--egress-mtu", "576", src, out)
    assert p.returncode == 0, p.stderr
    got = pk(out)
    assert len(got) == 3 and all(fcs_ok(q.data) for q in got)
    assert all(q.data[22] == frames[0][22] - 1 for q in got)     # TTL


@tshark
def test_tshark_sees_good_fcs(tmp_path):
    f = Flow(4)
    src = fcs_capture(tmp_path, [f.pkt(0, 4000).data, f.pkt(4000, PL).data])
    for cmd in ("merge", "split"):
        for ext in ("pcap", "pcapng"):
            out = tmp_path / f"{cmd}.{ext}"
            assert run_cli(cmd, "-q", src, out).returncode == 0
            r = subprocess.run(["tshark", "-r", str(out), "-o", "eth.check_fcs:TRUE",
                                "-T", "fields", "-e", "eth.fcs.status"],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            assert set(r.stdout.split()) == {"1"}, (cmd, ext, r.stdout)
