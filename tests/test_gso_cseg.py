"""The compiled segmenter (pcapgro/_gso.c) against the Python reference
(pcapgro/gso/tcp.py, udp.py): the same inputs through both give the same
bytes.  PCAPGRO_NO_C=1 forces the Python path."""

import json
import os
import random
import struct
import subprocess
import sys

import pytest

from pcapgro.gso import cseg, ipv4, ipv6, tcp, udp

from builders import pcap
from capture_helpers import KERNEL, REPO, compiled_then_python
from test_gso_support import eth, fix_l4, ipv4 as mk4, ipv6 as mk6, payload, seed_tcp, tcp_hdr, udp_hdr

needs_c = pytest.mark.skipif(not cseg.available(), reason="pcapgro._gso not built")


def _split_cli(src, out, *args, no_c=False):
    env = dict(os.environ)
    env.pop("PCAPGRO_NO_C", None)
    if no_c:
        env["PCAPGRO_NO_C"] = "1"
    p = subprocess.run([sys.executable, "-m", "pcapgro.cli", "split", "-q", "--stats", "-",
                        *map(str, args), str(src), str(out)], capture_output=True, cwd=REPO,
                       env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def _both(tmp_path, src, *args):
    a, ea = _split_cli(src, tmp_path / "c.pcap", *args)
    b, eb = _split_cli(src, tmp_path / "py.pcap", *args, no_c=True)
    assert (tmp_path / "c.pcap").read_bytes() == (tmp_path / "py.pcap").read_bytes()
    assert a == b and ea == eb
    return a


def _frames(rng, n):
    """Random TCP/UDP super-frames and small packets (IPv4 with and
    without options, IPv6 with extension headers, SYNs, pure ACKs, seeds,
    zero IP checksums, length-0 IP headers)."""
    out = []
    for i in range(n):
        kind = rng.choice(["tcp4", "tcp4", "tcp4opt", "tcp6", "tcp6ext", "udp4", "ack", "syn"])
        pl = rng.choice([0, 1, 7, 100, 1447, 1448, 1449, 3000, 9001, 20000, 64000])
        flags = rng.choice([0x10, 0x18, 0x19, 0x90, 0xD0, 0x11])
        seq = rng.randrange(1 << 32)
        opts = rng.choice([b"", b"\x01\x01\x08\x0a" + struct.pack("!II", i, 7)])
        sport = rng.choice([1000, 1001])
        if kind == "syn":
            th = tcp_hdr(sport=2000, dport=sport, flags=0x12,
                         opts=b"\x02\x04" + struct.pack("!H", rng.choice([536, 1460, 9000, 65495])))
            f = fix_l4(eth(mk4(6, th, src=b"\x0a\0\0\x02", dst=b"\x0a\0\0\x01")), 14)
        elif kind == "ack":
            f = fix_l4(eth(mk4(6, tcp_hdr(sport=2000, dport=sport, flags=0x10, opts=opts))), 14)
            if rng.random() < 0.3:
                f = f[:24] + b"\0\0" + f[26:]
        elif kind.startswith("tcp4"):
            ipo = b"\x94\x04\0\0" if kind == "tcp4opt" else b""
            th = tcp_hdr(sport=sport, seq=seq, flags=flags, opts=opts) + payload(pl, i & 0xFF)
            f = seed_tcp(eth(mk4(6, th, ident=rng.randrange(65536), opts=ipo,
                                 tot=0 if rng.random() < 0.2 else None)), 14)
        elif kind.startswith("tcp6"):
            ext = (struct.pack("!BB", 6, 0) + b"\x01\x04\0\0\0\0") if kind == "tcp6ext" else b""
            th = tcp_hdr(sport=sport, seq=seq, flags=flags, opts=opts) + payload(pl, i & 0xFF)
            f = seed_tcp(eth(mk6(60 if ext else 6, ext + th), et=0x86DD), 14)
        else:
            u = udp_hdr(sport=sport, dport=9999, length=(8 + pl) & 0xFFFF) + payload(pl, i & 0xFF)
            f = seed_tcp(eth(mk4(17, u, ident=rng.randrange(65536))), 14)
        cap = len(f)
        if rng.random() < 0.15 and len(f) > 80:
            cap = rng.randrange(54, len(f) + 1)         # snaplen cut
        out.append((f[:cap], len(f)))
    return out


@needs_c
@pytest.mark.parametrize("res,bo", [("us", "<"), ("ns", "<"), ("us", ">"), ("ns", ">")])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_captures_same_output(tmp_path, res, bo, seed):
    rng = random.Random(seed)
    recs = []
    t = 1_000_000
    for data, orig in _frames(rng, 300):
        t += rng.choice([0, 1, 3, 50, 2000])
        frac = t % 1_000_000 * (1000 if res == "ns" else 1)
        recs.append((1000 + t // 1_000_000, frac, data, orig))
    src = tmp_path / "in.pcap"
    src.write_bytes(pcap(recs, res=res, bo=bo))
    d = _both(tmp_path, src, "--gso-size", "1200")
    assert d["gso"]["split"] > 20
    _both(tmp_path, src, "--mtu", "1400", "--gso-size", "1000")
    _both(tmp_path, src, "--mss", "536", "--fixed-id", "--gso-size", "300")


@needs_c
@pytest.mark.skipif(not KERNEL.is_dir(), reason=f"no {KERNEL}")
@pytest.mark.parametrize("name,args", [("tcp4-tso-sender.pcap", []),
                                       ("udp4-uso-sender.pcap", ["--gso-size", "1200"])])
def test_kernel_sender_captures_same_output(tmp_path, name, args):
    d = _both(tmp_path, KERNEL / name, *args)
    assert d["gso"]["split"] >= 20


@needs_c
@pytest.mark.skipif(not KERNEL.is_dir(), reason=f"no {KERNEL}")
def test_merged_capture_same_output_across_chunks(tmp_path):
    """pcapgro's own merge output (the aggregates of a real bulk capture)
    split back: 4 MiB chunks, so super-frames and runs of pure ACKs cross
    chunk boundaries."""
    m = tmp_path / "m.pcap"
    subprocess.run([sys.executable, "-m", "pcapgro.cli", "merge", "-q",
                    str(KERNEL / "tcp4-bulk-wire.pcap"), str(m)], check=True, cwd=REPO)
    big = tmp_path / "big.pcap"
    raw = m.read_bytes()
    big.write_bytes(raw + raw[24:] * 3)             # > 4 MiB
    d = _both(tmp_path, big)
    assert d["gso"]["split"] == 4 * 29


@needs_c
def test_segment_into_equals_python_segmenter():
    """Direct: the C records' frames equal tcp.segment / udp.segment's."""
    rng = random.Random(7)
    from pcapgro.record import Packet  # noqa: F401
    n_checked = 0
    for data, orig in _frames(rng, 400):
        if data[12:14] == b"\x08\x00":
            l3 = ipv4.parse(data, 14, orig)
        else:
            l3 = ipv6.parse(data, 14, orig)
        if not isinstance(l3, ipv4.L3) or len(data) < l3.l4off + 20:
            continue
        if l3.proto == 6:
            r = tcp.parse(data, l3.l4off, l3.l4len)
            if not isinstance(r, tuple):
                continue
            hl4 = r[0]
        else:
            hl4 = 8
        mss = rng.choice([8, 100, 536, 1448])
        fixed = rng.random() < 0.5
        if l3.proto == 6:
            ref = tcp.segment(data, l3, hl4, mss, fixed)
        else:
            ref = udp.segment(data, l3, mss)
        if ref is None:
            continue
        buf = bytearray()
        n, ncut, maxcap = cseg.segment_into(buf, data, l3, hl4, l3.proto, mss, fixed,
                                            5_000_000_123, 7, 1, False)
        frames, rcut = ref
        assert (n, ncut) == (len(frames), rcut)
        pos = 0
        for d, ol, ok in frames:
            sec, frac, cl, o = struct.unpack_from("=IIII", buf, pos)
            assert (cl, o) == (len(d), ol)
            assert bytes(buf[pos + 16:pos + 16 + cl]) == d
            pos += 16 + cl
        assert pos == len(buf) and maxcap == max(len(d) for d, _, _ in frames)
        n_checked += 1
    assert n_checked > 150


@needs_c
@pytest.mark.skipif(not KERNEL.is_dir(), reason=f"no {KERNEL}")
@pytest.mark.parametrize("kw", [{"link_rate": 0}, {"link_rate": 1_000_000},
                                {"link_rate": 100_000_000_000, "mtu": 9000},
                                {"mss": 1000, "fixed_id": True}, {"complete_csum": False}])
def test_chunk_loop_settings_same_as_python(tmp_path, monkeypatch, kw):
    """The compiled chunk loop (split_chunk) under settings the command
    line does not reach (link rates, jumbo MTU, no checksum completion),
    in-process on a real merged capture: the same file and statistics as
    the Python engine."""
    from pcapgro import pipeline
    from pcapgro.capture import open_reader, open_writer
    from pcapgro.gso import GSOConfig, GSOSplitter
    m = tmp_path / "m.pcap"
    subprocess.run([sys.executable, "-m", "pcapgro.cli", "merge", "-q",
                    str(KERNEL / "tcp4-4flows-wire.pcap"), str(m)], check=True, cwd=REPO)
    outs = []
    for no_c in compiled_then_python(monkeypatch):
        out = tmp_path / f"o{no_c}.pcap"
        sp = GSOSplitter(GSOConfig(annotate=True, **kw))
        rd = open_reader(m)
        wr = open_writer(out, "pcap")
        try:
            pipeline.run(rd, wr, sp.process)
        finally:
            rd.close()
        wr.close()
        assert sp.raw_out
        outs.append((out.read_bytes(), sp.stats.to_dict()))
    assert outs[0] == outs[1]
    assert outs[0][1]["split"] > 0
