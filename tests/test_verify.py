"""pcapgro verify / merge --verify / split --verify, with real tshark:
faithful outputs of every kernel capture pass; outputs damaged on purpose
fail, naming the right OUT frame; the CLI contract (exit 2 without tshark,
'-' refused with --verify)."""

import json
import os
import struct
import sys
from pathlib import Path

import pytest

from capture_helpers import KERNEL, REPO, run_cli, tshark

pytestmark = [pytest.mark.tshark, tshark]

KFILES = sorted(KERNEL.glob("*.pcap"))
WIRE = KERNEL / "tcp4-bulk-wire.pcap"
TSO = KERNEL / "tcp4-tso-sender.pcap"
UDP_WIRE = KERNEL / "udp4-fwd-wire.pcap"


def _gso_size(name):
    if name == "udp4-fraglist-gro.pcap":
        return ["--gso-size", "1000"]
    if name.startswith("udp") and (name.endswith("-gro.pcap") or "uso" in name):
        return ["--gso-size", "1200"]
    return []


def _ok(p):
    assert p.returncode == 0, (p.returncode, p.stdout.decode()[-3000:], p.stderr.decode()[-3000:])


# ---------------------------------------------------------------------------
# faithful outputs pass

@pytest.mark.parametrize("path", KFILES, ids=[p.name for p in KFILES])
def test_merge_variants_verify(path, tmp_path):
    out = tmp_path / "out.pcapng"
    for args in (["merge"], ["merge", "--fraglist"], ["merge", "--udp", "gro"],
                 ["merge", "--csum", "kernel", "--udp", "gro"]):
        p = run_cli(*args, "--verify", path, out)
        _ok(p)
        assert b"faithful" in p.stderr, args


@pytest.mark.parametrize("path", KFILES, ids=[p.name for p in KFILES])
def test_split_and_restore_verify(path, tmp_path):
    out = tmp_path / "split.pcap"
    _ok(run_cli("split", "-q", "--verify", *_gso_size(path.name), path, out))
    merged, restored = tmp_path / "m.pcapng", tmp_path / "r.pcapng"
    run_cli("merge", "-q", path, merged, check=0)
    _ok(run_cli("split", "-q", "--restore", "--verify", merged, restored))
    _ok(run_cli("verify", "-q", path, restored))


def test_kernel_gro_capture_needs_csum_kernel():
    gro = KERNEL / "tcp4-bulk-gro.pcap"
    p = run_cli("verify", "--json", WIRE, gro)
    assert p.returncode == 1
    d = json.loads(p.stdout)
    assert d["result"] == "differ" and set(d["problems_by_kind"]) == {"checksum"}
    p = run_cli("verify", "--json", "--csum", "kernel", WIRE, gro)
    _ok(p)
    d = json.loads(p.stdout)
    assert d["result"] == "faithful" and d["tcp"]["bytes"] > 1_500_000
    assert d["frames_in"] == 1109 and d["frames_out"] == 58


def test_summary_and_json(tmp_path):
    out = tmp_path / "m.pcapng"
    run_cli("merge", "-q", WIRE, out, check=0)
    p = run_cli("verify", WIRE, out)
    _ok(p)
    text = p.stdout.decode()
    assert "faithful" in text and "TCP" in text and "1,109 frames" in text
    assert len(text.splitlines()) <= 24
    stats = tmp_path / "v.json"
    _ok(run_cli("verify", "-q", "--stats", stats, WIRE, out))
    d = json.loads(stats.read_text())
    assert d["problems_total"] == 0 and d["tcp"]["streams"] == 2
    assert d["tcp"]["passed_ahead"] == 0 and d["udp"]["passed_ahead"] == 0 and not d["notes"]
    # merge --verify puts the verdict in its statistics
    p = run_cli("merge", "-q", "--verify", "--stats", "-", WIRE, tmp_path / "m2.pcap")
    _ok(p)
    assert json.loads(p.stdout)["verify"]["result"] == "faithful"


# ---------------------------------------------------------------------------
# damaged outputs fail, naming the frame

def read_pcap(path):
    d = Path(path).read_bytes()
    e = "<" if d[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    recs, off = [], 24
    while off + 16 <= len(d):
        s, us, cl, ln = struct.unpack(e + "IIII", d[off:off + 16])
        recs.append([s, us, ln, bytearray(d[off + 16:off + 16 + cl])])
        off += 16 + cl
    return d[:24], e, recs


def write_pcap(path, hdr, e, recs):
    with open(path, "wb") as f:
        f.write(hdr)
        for s, us, ln, b in recs:
            f.write(struct.pack(e + "IIII", s, us, len(b), ln) + bytes(b))


def _flow(b):
    return bytes(b[26:38])      # Ethernet/IPv4: addresses and ports


@pytest.fixture(scope="module")
def wire_split(tmp_path_factory):
    """split of the TSO sender capture (wire-sized segments, valid
    checksums) and the index of a data record followed by one of the same
    flow."""
    d = tmp_path_factory.mktemp("vsplit")
    out = d / "split.pcap"
    run_cli("split", "-q", TSO, out, check=0)
    hdr, e, recs = read_pcap(out)
    i = next(i for i in range(200, len(recs) - 1)
             if len(recs[i][3]) > 1000 and len(recs[i + 1][3]) > 1000
             and _flow(recs[i][3]) == _flow(recs[i + 1][3]))
    return out, hdr, e, recs, i


def _damaged(tmp_path, wire_split, change):
    out, hdr, e, recs, i = wire_split
    recs = [[s, us, ln, bytearray(b)] for s, us, ln, b in recs]
    change(recs, i)
    bad = tmp_path / "bad.pcap"
    write_pcap(bad, hdr, e, recs)
    p = run_cli("verify", "--json", TSO, bad)
    assert p.returncode == 1, p.stderr.decode()
    return json.loads(p.stdout), i + 1       # tshark frame numbers count from 1


def _kinds_at(d, frame):
    return {p["kind"] for p in d["problems"] if p["out_frame"] == frame}


def test_faithful_split_passes(wire_split):
    _ok(run_cli("verify", "-q", TSO, wire_split[0]))


def test_flipped_payload_byte(tmp_path, wire_split):
    def flip(recs, i):
        recs[i][3][-100] ^= 0x40
    d, frame = _damaged(tmp_path, wire_split, flip)
    first = d["problems"][0]
    assert first["out_frame"] == frame and "payload" in _kinds_at(d, frame)
    assert first["stream"].startswith("tcp 10.88.0.1:")
    assert "checksum" in _kinds_at(d, frame)      # the flip also breaks the checksum


def test_dropped_segment(tmp_path, wire_split):
    def drop(recs, i):
        del recs[i]
    d, frame = _damaged(tmp_path, wire_split, drop)
    # the hole shows at the frame that now follows it (same flow's next segment)
    assert d["problems"][0]["kind"] == "missing"
    assert d["problems"][0]["out_frame"] == frame


def test_swapped_segments(tmp_path, wire_split):
    def swap(recs, i):       # packet contents swapped, timestamps left in place
        recs[i][3], recs[i + 1][3] = recs[i + 1][3], recs[i][3]
        recs[i][2], recs[i + 1][2] = recs[i + 1][2], recs[i][2]
    d, frame = _damaged(tmp_path, wire_split, swap)
    assert d["problems_by_kind"] == {"order": 1}
    assert d["problems"][0]["out_frame"] == frame


def test_bad_checksum(tmp_path, wire_split):
    def csum(recs, i):
        b = recs[i][3]
        b[14 + 20 + 16] ^= 0x01          # TCP checksum of Ethernet/IPv4 (IHL 5)
    d, frame = _damaged(tmp_path, wire_split, csum)
    assert d["problems_by_kind"] == {"checksum": 1}
    assert d["problems"][0]["out_frame"] == frame


def test_bad_ip_checksum(tmp_path, wire_split):
    def csum(recs, i):
        recs[i][3][14 + 10] ^= 0x01
    d, frame = _damaged(tmp_path, wire_split, csum)
    assert d["problems_by_kind"] == {"ip-checksum": 1}
    assert d["problems"][0]["out_frame"] == frame


def test_truncated_packet(tmp_path, wire_split):
    def cut(recs, i):                    # record cut short: IP length exceeds the frame
        recs[i][3] = recs[i][3][:600]
        recs[i][2] = 600
    d, frame = _damaged(tmp_path, wire_split, cut)
    assert d["problems"][0]["out_frame"] == frame
    assert {"missing", "expert"} <= _kinds_at(d, frame)


def test_snaplen_truncated_packet(tmp_path, wire_split):
    def snap(recs, i):                   # captured length below the frame length
        recs[i][3] = recs[i][3][:600]
    d, frame = _damaged(tmp_path, wire_split, snap)
    assert d["problems"][0]["out_frame"] == frame
    assert d["problems"][0]["kind"] == "missing"


def test_dropped_fin(tmp_path):
    out = tmp_path / "m.pcap"
    run_cli("merge", "-q", WIRE, out, check=0)
    hdr, e, recs = read_pcap(out)
    i = max(i for i, r in enumerate(recs) if r[3][14 + 20 + 13] & 0x01)   # last FIN
    recs[i][3][14 + 20 + 13] &= ~0x01 & 0xFF
    bad = tmp_path / "bad.pcap"
    write_pcap(bad, hdr, e, recs)
    p = run_cli("verify", "--json", WIRE, bad)
    assert p.returncode == 1
    d = json.loads(p.stdout)
    assert "event" in d["problems_by_kind"]
    ev = next(p for p in d["problems"] if p["kind"] == "event")
    assert "FIN" in ev["message"] and ev["in_frame"]


def test_timestamp_backwards(tmp_path, wire_split):
    def back(recs, i):
        recs[i][0] -= 10
    d, frame = _damaged(tmp_path, wire_split, back)
    assert d["problems_by_kind"] == {"timestamp": 1}
    assert d["problems"][0]["out_frame"] == frame


def test_udp_dropped_datagram_and_flipped_byte(tmp_path):
    out = tmp_path / "split.pcap"
    run_cli("split", "-q", "--gso-size", "1200", KERNEL / "udp4-uso-sender.pcap", out, check=0)
    hdr, e, recs = read_pcap(out)
    for change, kind in ((lambda r: r.__delitem__(50), None),
                         (lambda r: r[50][3].__setitem__(-3, r[50][3][-3] ^ 1), "payload")):
        rr = [[s, us, ln, bytearray(b)] for s, us, ln, b in recs]
        change(rr)
        bad = tmp_path / "bad.pcap"
        write_pcap(bad, hdr, e, rr)
        p = run_cli("verify", "--json", KERNEL / "udp4-uso-sender.pcap", bad)
        assert p.returncode == 1
        d = json.loads(p.stdout)
        first = d["problems"][0]
        assert first["out_frame"] == 51 and first["stream"].startswith("udp ")
        if kind:
            assert first["kind"] == kind


def test_udp_boundary_moved(tmp_path):
    """Same bytes, but a byte moved from one datagram to the next."""
    src = tmp_path / "split.pcap"         # 1200-byte datagrams
    run_cli("split", "-q", "--gso-size", "1200", KERNEL / "udp4-uso-sender.pcap", src, check=0)
    hdr, e, recs = read_pcap(src)
    a, b = recs[20][3], recs[21][3]
    assert _flow(a) == _flow(b) and len(a) > 1200 and len(b) > 1200
    moved = a[-1:]
    a = a[:-1]
    b = b[:42] + moved + b[42:]
    for pkt_ in (a, b):                  # fix IPv4 / UDP lengths, zero UDP checksum (none)
        ln = len(pkt_) - 14
        pkt_[16:18] = struct.pack("!H", ln)
        pkt_[24:26] = b"\0\0"
        s = sum(struct.unpack("!10H", bytes(pkt_[14:34])))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        pkt_[24:26] = struct.pack("!H", 0xFFFF - s)
        pkt_[38:40] = struct.pack("!H", ln - 20)
        pkt_[40:42] = b"\0\0"
    recs[20][3], recs[20][2] = a, len(a)
    recs[21][3], recs[21][2] = b, len(b)
    bad = tmp_path / "bad.pcap"
    write_pcap(bad, hdr, e, recs)
    p = run_cli("verify", "--json", src, bad)
    assert p.returncode == 1
    d = json.loads(p.stdout)
    assert d["problems_by_kind"] == {"boundary": 1}
    assert d["problems"][0]["out_frame"] == 22


ARP = (b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x06"
       + bytes.fromhex("0001080006040001020000000001") + bytes([10, 88, 0, 1])
       + b"\0" * 6 + bytes([10, 88, 0, 2]) + b"\0" * 18)


def test_other_packets(tmp_path):
    hdr, e, recs = read_pcap(WIRE)
    recs = recs[:40]
    s, us = recs[5][0], recs[5][1]
    recs.insert(6, [s, us, len(ARP), bytearray(ARP)])
    src = tmp_path / "in.pcap"
    write_pcap(src, hdr, e, recs)
    out = tmp_path / "m.pcap"
    p = run_cli("merge", "-q", "--verify", "--stats", "-", src, out)
    _ok(p)
    assert json.loads(p.stdout)["verify"]["other"]["packets"] == 1
    hdr2, e2, orecs = read_pcap(out)
    k = next(i for i, r in enumerate(orecs) if bytes(r[3]) == ARP)
    orecs[k][3][-1] ^= 1
    bad = tmp_path / "bad.pcap"
    write_pcap(bad, hdr2, e2, orecs)
    p = run_cli("verify", "--json", src, bad)
    assert p.returncode == 1
    d = json.loads(p.stdout)
    assert d["problems"][0]["kind"] == "other" and d["problems"][0]["out_frame"] == k + 1
    assert d["problems"][0]["in_frame"] == 7
    del orecs[k]
    write_pcap(bad, hdr2, e2, orecs)
    d = json.loads(run_cli("verify", "--json", src, bad).stdout)
    assert d["problems_by_kind"] == {"missing": 1} and d["problems"][0]["in_frame"] == 7


def test_cut_short_output(tmp_path):
    out = tmp_path / "s.pcap"
    run_cli("split", "-q", TSO, out, check=0)
    data = out.read_bytes()
    out.write_bytes(data[:len(data) // 2 + 7])
    p = run_cli("verify", "--json", TSO, out)
    assert p.returncode == 1
    assert "damaged" in json.loads(p.stdout)["problems_by_kind"]


# ---------------------------------------------------------------------------
# packets GRO rejects before matching overtake their flow's held aggregate
# (README "merge: the GRO model"): expected, not a difference -- but nothing
# else may move

def _ip4_csum(b):
    ihl = (b[14] & 15) * 4
    b[24:26] = b"\0\0"
    s = sum(struct.unpack(f"!{ihl // 2}H", bytes(b[14:14 + ihl])))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    b[24:26] = struct.pack("!H", 0xFFFF - s)


def _reject(b, how):
    """Make Ethernet frame ``b`` (bytearray) one GRO rejects before matching."""
    v6 = b[12:14] == b"\x86\xdd"
    l4 = 14 + (40 if v6 else (b[14] & 15) * 4)
    tcp = b[14 + (6 if v6 else 9)] == 6
    if how == "l4-csum":
        b[l4 + (16 if tcp else 6)] ^= 0x01
    elif how == "udp-zero-csum":
        b[l4 + 6:l4 + 8] = b"\0\0"
    elif how == "ip-csum":
        b[24] ^= 0x01
    elif how == "ip-options":            # four option bytes (NOP NOP NOP EOL)
        b[14:] = b[14:34] + b"\x01\x01\x01\x00" + b[34:]
        b[14] = 0x46
        b[16:18] = struct.pack("!H", struct.unpack("!H", b[16:18])[0] + 4)
        _ip4_csum(b)


def _mid_aggregate(recs):
    """Index of a full-sized data packet in the middle of the capture whose
    two predecessors, of its flow and size, came right before it (GRO holds
    them)."""
    for i in range(len(recs) // 2, len(recs) - 1):
        if len(recs[i][3]) > 1000 and all(
                len(recs[j][3]) == len(recs[i][3]) and _flow(recs[j][3]) == _flow(recs[i][3])
                for j in (i - 2, i - 1, i + 1)):
            return i
    raise AssertionError("no packet inside an aggregate")


def _rejected_input(tmp_path, name, how):
    hdr, e, recs = read_pcap(KERNEL / name)
    i = _mid_aggregate(recs)
    _reject(recs[i][3], how)
    recs[i][2] = len(recs[i][3])
    src = tmp_path / "in.pcap"
    write_pcap(src, hdr, e, recs)
    return src, bytes(recs[i][3])


REJECTED = [("tcp4-bulk-wire.pcap", [], "l4-csum", "bad_tcp_csum"),
            ("tcp4-bulk-wire.pcap", [], "ip-csum", "bad_ip_csum"),
            ("tcp4-bulk-wire.pcap", [], "ip-options", "ip_options"),
            ("tcp4-bulk-wire.pcap", ["--gso"], "l4-csum", "bad_tcp_csum"),
            ("tcp6-bulk-wire.pcap", ["--fraglist"], "l4-csum", "bad_tcp_csum"),
            ("udp4-fwd-wire.pcap", ["--udp", "gro"], "l4-csum", "bad_udp_csum"),
            ("udp4-fwd-wire.pcap", ["--udp", "gro"], "udp-zero-csum", "udp_zero_csum"),
            ("udp4-fwd-wire.pcap", ["--udp", "gro"], "ip-options", "ip_options"),
            ("udp6-fwd-wire.pcap", ["--udp", "gro"], "l4-csum", "bad_udp_csum"),
            ("udp6-fwd-wire.pcap", ["--udp", "gro", "--gso"], "l4-csum", "bad_udp_csum"),
            ("udp4-fraglist-wire.pcap", ["--fraglist"], "ip-csum", "bad_ip_csum")]


@pytest.mark.parametrize("name,args,how,reason", REJECTED,
                         ids=[f"{r[0][:4]}-{r[2]}{''.join(r[1])}" for r in REJECTED])
def test_rejected_packet_overtaking_is_not_a_difference(tmp_path, name, args, how, reason):
    """merge passes the packet at once, ahead of the aggregate its flow
    holds (as Linux does): verify counts it and says so, exit 0."""
    src, _ = _rejected_input(tmp_path, name, how)
    out = tmp_path / "out.pcapng"
    p = run_cli("merge", "-q", *args, "--verify", "--stats", "-", src, out)
    _ok(p)
    d = json.loads(p.stdout)
    assert d["gro"]["pass_reasons"][reason] == 1
    v = d["verify"]
    proto = name[:3]
    assert v["result"] == "faithful" and v[proto]["passed_ahead"] == 1
    assert v["tcp" if proto == "udp" else "udp"]["passed_ahead"] == 0
    assert any("ahead of the held aggregate" in n for n in v["notes"])
    p = run_cli("verify", src, out)
    _ok(p)
    assert "note: 1 packet GRO rejects before matching" in p.stdout.decode()


@pytest.mark.parametrize("name,args,at", [("tcp4-bulk-wire.pcap", [], 100),
                                          ("tcp4-bulk-wire.pcap", ["--fraglist"], 100),
                                          ("tcp6-bulk-wire.pcap", [], None)])
def test_two_rejected_packets_in_a_row(tmp_path, name, args, at):
    """Of two rejected packets in a row of one flow, the first overtakes the
    held aggregate and the second comes after it: still the GRO model
    (their data, adjacent in sequence, used to be taken as one piece that
    OUT split, a false 'out of order')."""
    hdr, e, recs = read_pcap(KERNEL / name)
    i = _mid_aggregate(recs) if at is None else at
    for j in (i, i + 1):
        _reject(recs[j][3], "l4-csum")
    src = tmp_path / "in.pcap"
    write_pcap(src, hdr, e, recs)
    p = run_cli("merge", "-q", *args, "--verify", "--stats", "-", src, tmp_path / "o.pcapng")
    _ok(p)
    v = json.loads(p.stdout)["verify"]
    assert v["result"] == "faithful" and v["tcp"]["passed_ahead"] >= 1


def _moved(tmp_path, src, out, k, to):
    """OUT (classic pcap) with record ``k`` moved to index ``to``, the
    timestamps left in place; the verify JSON of IN ``src`` against it."""
    hdr, e, recs = read_pcap(out)
    rr = [list(r) for r in recs]
    rr.insert(to, rr.pop(k))
    for r, o in zip(rr, recs):
        r[0], r[1] = o[0], o[1]
    bad = tmp_path / "moved.pcap"
    write_pcap(bad, hdr, e, rr)
    p = run_cli("verify", "--json", src, bad)
    return p.returncode, json.loads(p.stdout)


@pytest.mark.parametrize("name,args", [("tcp4-bulk-wire.pcap", []),
                                       ("udp4-fwd-wire.pcap", ["--udp", "gro"])])
def test_rejected_packet_may_only_overtake_its_held_aggregate(tmp_path, name, args):
    """Only the reordering GRO makes is accepted: the rejected packet put
    back after the aggregate is faithful too; delayed past the packet after
    it, or ahead of two of its flow's packets, is a difference."""
    src, rejected = _rejected_input(tmp_path, name, "l4-csum")
    out = tmp_path / "out.pcap"
    run_cli("merge", "-q", *args, src, out, check=0)
    recs = read_pcap(out)[2]
    k = next(j for j, r in enumerate(recs) if bytes(r[3]) == rejected)
    flow = [j for j, r in enumerate(recs) if _flow(r[3]) == _flow(rejected)]
    at = flow.index(k)
    prev, held, after = flow[at - 1], flow[at + 1], flow[at + 2]
    rc, d = _moved(tmp_path, src, out, k, held)            # where IN had it
    assert rc == 0 and d[name[:3]]["passed_ahead"] == 0, d["problems"]
    for to in (after, prev):                               # delayed; two ahead
        rc, d = _moved(tmp_path, src, out, k, to)
        assert rc == 1 and d[name[:3]]["passed_ahead"] == 0
        assert set(d["problems_by_kind"]) <= {"order", "payload", "checksum"}, d["problems"]
        assert d["problems_by_kind"].get("order" if name.startswith("tcp") else "payload")


# ---------------------------------------------------------------------------
# contract

def _no_tshark_env():
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable)      # python, no tshark
    return env


def test_missing_tshark(tmp_path):
    import shutil
    import subprocess
    if shutil.which("tshark", path=_no_tshark_env()["PATH"]):
        pytest.skip("tshark beside python")
    out = tmp_path / "o.pcap"
    for args in (["verify", WIRE, WIRE], ["merge", "--verify", WIRE, out],
                 ["split", "--verify", WIRE, out]):
        p = subprocess.run([sys.executable, "-m", "pcapgro.cli", *map(str, args)],
                           capture_output=True, cwd=REPO, env=_no_tshark_env())
        assert p.returncode == 2, args
        err = p.stderr.decode()
        assert err.count("\n") == 1 and "apt-get install tshark" in err, err
        assert "Traceback" not in err
    assert not out.exists()          # refused before writing anything


def test_dash_refused_with_verify(tmp_path):
    out = tmp_path / "o.pcap"
    for args in (["merge", "--verify", "-", out], ["merge", "--verify", WIRE, "-"],
                 ["split", "--verify", WIRE, "-"], ["verify", "-", WIRE], ["verify", WIRE, "-"]):
        p = run_cli(*args, input=WIRE.read_bytes())
        assert p.returncode == 2, args
        assert b"file" in p.stderr and b"Traceback" not in p.stderr
        assert p.stdout == b""


def test_directory_and_empty_refused_as_merge_does(tmp_path):
    """A directory is named as one (not 'no such file'); two empty files
    are not 'faithful' but 'empty input', exit 2, as merge says."""
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    cases = [(["verify", tmp_path, WIRE], f"cannot open IN {tmp_path}: Is a directory"),
             (["verify", WIRE, tmp_path], f"cannot open OUT {tmp_path}: Is a directory"),
             (["verify", empty, empty], f"IN {empty}: empty input"),
             (["verify", WIRE, empty], f"OUT {empty}: empty input"),
             (["verify", tmp_path / "nope.pcap", WIRE],
              f"cannot open IN {tmp_path / 'nope.pcap'}: No such file or directory")]
    for args, msg in cases:
        p = run_cli(*args)
        assert p.returncode == 2, args
        assert p.stderr.decode() == f"pcapgro: error: {msg}\n", args
        assert p.stdout == b""
    p = run_cli("merge", "-q", empty, tmp_path / "o.pcap")
    assert p.returncode == 2 and p.stderr.decode().endswith(f"{empty}: empty input\n")


def test_unusable_inputs(tmp_path):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture at all" * 10)
    for args in (["verify", junk, WIRE], ["verify", WIRE, junk],
                 ["verify", WIRE, tmp_path / "nope.pcap"]):
        p = run_cli(*args)
        assert p.returncode == 2, args
        assert p.stderr.decode().count("\n") == 1 and b"Traceback" not in p.stderr
