"""``pcapgro calibrate`` (issue 21.3): fitting merge's NAPI timing to a
receiver's own capture.

* The six shared kernel pairs: the fit reproduces each exactly, and the
  ``pcapgro merge`` command line it prints gives the receiver's capture.
* Every kept pair (the shared ones and tests/captures/napi): fitted on the
  first half, the options agree with the second half at least as well as
  the defaults.
* A received capture GRO cannot have made is reported (first offending
  packet, exit 1) and not fitted; unusable input is one line, exit 2.
"""

import json
import subprocess
import shlex
import struct

import pytest

import pcapgro
from capture_helpers import KERNEL, REPO, read_events, run_cli, write_events
from pcapgro.agreement import merge_packets, read_packets, trace
from pcapgro.calibrate import Calibration, _Fit, calibrate, check_received
from pcapgro.record import Packet

NAPI = REPO / "tests" / "captures" / "napi"
SHARED = ["tcp4-4flows", "tcp4-bulk", "tcp6-bulk", "udp4-fraglist", "udp4-fwd", "udp6-fwd"]
NAPI_PAIRS = sorted(p.name[:-10] for p in NAPI.glob("*-wire.pcap"))


def pair(d, name):
    return d / f"{name}-wire.pcap", d / f"{name}-gro.pcap"


def napi_options(name):
    """What the receiver of a NAPI pair had on (README there)."""
    if "fraglist" in name:
        return {"fraglist": True}
    return {"udp": "gro"} if name.startswith("udp") else {}


@pytest.mark.parametrize("name", SHARED)
def test_shared_pairs_fit_exactly_and_the_command_line_works(name, tmp_path):
    wire, gro = pair(KERNEL, name)
    c = calibrate(wire, gro, max_merges=20)
    assert c.explainable and c.agreement.exact, c.lines()
    assert c.agreement.packets_ours == c.agreement.packets_kernel
    assert c.detected == ({"fraglist": True} if "fraglist" in name
                          else {"udp": "gro"} if name.startswith("udp") else {})
    out = tmp_path / "out.pcap"
    argv = shlex.split(c.command(wire, out))
    assert argv[:2] == ["pcapgro", "merge"]
    run_cli(*argv[1:], check=0)
    got = [bytes(p.data) for p in read_packets(out)]
    assert got == [bytes(p.data) for p in read_packets(gro)]


def halves(wire, received):
    """The pair cut in two where no received packet straddles the cut,
    nearest the middle of the wire capture: ((wire, received), (wire,
    received)), lists of Packets."""
    groups = trace(wire, received)
    spans = [(min(g), max(g)) for g in groups if g]
    cut = {c for c in range(1, len(wire))}
    for a, b in spans:
        cut -= set(range(a + 1, b + 1))
    c = min(cut, key=lambda x: abs(x - len(wire) // 2))
    first = [p for g, p in zip(groups, received) if g and max(g) < c]
    second = [p for g, p in zip(groups, received) if g and min(g) >= c]
    return (wire[:c], first), (wire[c:], second)


def _score(a):
    return abs(a.packets_ours - a.packets_kernel), len(a.extra) + len(a.missing)


@pytest.mark.parametrize("where,name", [(KERNEL, n) for n in SHARED]
                         + [(NAPI, n) for n in NAPI_PAIRS], ids=lambda x: getattr(x, "name", x))
def test_napi_fit_on_one_half_holds_on_the_other(where, name):
    """Every kept pair (the six shared ones too): fitted on the first half
    of its packets, the options agree with the second half at least as
    well as the defaults."""
    opts = napi_options(name)
    (w1, r1), (w2, r2) = halves(read_packets(pair(where, name)[0]),
                                read_packets(pair(where, name)[1]))
    c = calibrate(w1, r1, max_merges=30, **opts)
    assert c.explainable
    assert _score(c.agreement) <= _score(c.default)
    check = _Fit(w2, r2, trace(w2, r2), {}, 2)
    fitted = check.run(c.options)[1]
    default = check.run({"csum": "kernel", **opts})[1]
    assert _score(fitted) <= _score(default), (fitted.line(), default.line())


def test_napi_udp_fit_is_exact_and_sensitive():
    """udp-100us: the gap model at 1 ms merges what the kernel handed up
    alone; the fit finds a gap that splits every datagram, and says how
    many boundaries a doubled or halved gap moves."""
    c = calibrate(*pair(NAPI, "udp-100us"), max_merges=30, udp="gro")
    assert c.agreement.exact and c.model == "gap"
    assert c.default.packets_ours < c.agreement.packets_ours == 400
    assert set(c.sensitivity) == {"poll_gap"} and set(c.sensitivity["poll_gap"]) == {"x2", "x0.5"}
    assert c.options["poll_gap"] < 100_000


def test_library_call_and_stats(tmp_path):
    wire, gro = pair(KERNEL, "udp4-fwd")
    st = pcapgro.calibrate(str(wire), str(gro), max_merges=10)
    assert st["result"] == "exact" and st.status == 0
    assert "--udp gro" in st["command"] and st["agreement"]["exact"]
    assert isinstance(st.calibration, Calibration)
    stats = tmp_path / "fit.json"
    p = run_cli("calibrate", "--max-merges", "10", "--stats", stats, wire, gro, check=0)
    assert b"agreement: packets 40/40" in p.stdout
    d = json.loads(stats.read_text())
    assert d["result"] == "exact" and d["model"] == "gap" and "sensitivity" in d
    q = run_cli("calibrate", "-q", "--max-merges", "10", wire, gro, check=0)
    assert q.stdout.decode().startswith("pcapgro merge --csum kernel --udp gro ")
    assert len(q.stdout.splitlines()) == 1


def _psh_mutant(tmp_path):
    """tcp4-bulk's receiver capture with the first received packet that
    ends at a PSH joined with the next packet of its flow (IPv4 total
    length fixed up): an aggregate merged across a PSH."""
    wire_path, gro_path = pair(KERNEL, "tcp4-bulk")
    wire = read_packets(wire_path)
    events = read_events(gro_path)
    pkts = [e for e in events if type(e) is Packet]
    groups = trace(wire, pkts)
    for n, g in enumerate(groups):
        last = wire[g[-1]].data if g else b""
        if not g or not last[14 + 20 + 13] & 0x08:
            continue
        nxt = next((m for m in range(n + 1, len(groups))
                    if groups[m] and wire[groups[m][0]].data[26:38] == last[26:38]), None)
        if nxt is None:
            continue
        a, b = pkts[n], pkts[nxt]
        bthl = (b.data[14 + 20 + 12] >> 4) * 4
        pay = bytes(b.data[14 + 20 + bthl:])
        if len(a.data) + len(pay) > 65000 or not pay:
            continue
        d = bytearray(a.data) + pay
        struct.pack_into("!H", d, 16, struct.unpack_from("!H", d, 16)[0] + len(pay))
        a.data, a.orig_len = bytes(d), len(d)
        events.remove(b)
        out = tmp_path / "mutant-gro.pcap"
        write_events(out, events, "pcap")
        return wire_path, out, n + 1, g[-1] + 1
    raise AssertionError("no PSH-ended aggregate in tcp4-bulk")


def test_received_capture_that_breaks_a_gro_rule(tmp_path):
    wire, mutant, frame, wire_frame = _psh_mutant(tmp_path)
    c = calibrate(wire, mutant, max_merges=5)
    assert not c.explainable and c.merges == 0
    assert c.offending == {"received_frame": frame, "wire_frame": wire_frame,
                           "reason": "merged across a PSH"}
    p = run_cli("calibrate", wire, mutant)
    assert p.returncode == 1 and p.stdout == b""
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (f"received frame {frame}: not a GRO result of this kernel/configuration: "
            f"merged across a PSH (wire frame {wire_frame})") in err
    stats = tmp_path / "s.json"
    run_cli("calibrate", "-q", "--stats", stats, wire, mutant, check=1)
    assert json.loads(stats.read_text())["result"] == "not_gro"


def test_over_gro_max_size_and_untraced():
    wire, gro = (read_packets(p) for p in pair(KERNEL, "tcp4-bulk"))
    off = check_received(wire, gro, gro_max_size=20000)
    assert off and off["reason"].endswith("not below gro_max_size 20000")
    # a received packet the wire capture does not hold
    off = check_received(wire[:-50], gro)
    assert off["reason"] == "not made of wire packets of one flow, in order"
    assert check_received(wire, gro) is None


@pytest.mark.parametrize("args, words", [
    (["/nonexistent/w.pcap", "x.pcap"], "cannot open /nonexistent/w.pcap"),
    (["README.md", "README.md"], "not a pcap or pcapng file"),
    (["--gso", "a", "b"], "No such option"),
    (["--udp", "gro", "--fraglist", "WIRE"], "Missing argument"),
])
def test_bad_input_is_one_line_exit_2(args, words):
    p = run_cli("calibrate", *args)
    err = p.stderr.decode()
    assert p.returncode == 2 and "Traceback" not in err and words in err, err
    if "Usage" not in err:
        assert err.count("\n") == 1


def test_work_model_fit_and_given_timing_kept():
    """The work model alone (its defaults are exact on udp-1ms, where the
    1 ms gap is not); a poll gap given is kept, not fitted."""
    wire, gro = pair(NAPI, "udp-1ms")
    c = calibrate(wire, gro, max_merges=20, models=("work",), udp="gro")
    assert c.model == "work" and c.agreement.exact
    assert c.options["poll_model"] == "work" and "--poll-model work" in c.command()
    assert set(c.sensitivity) == {"poll_wake", "poll_rx_cost", "deliver_cost",
                                  "deliver_seg_cost"}
    c = calibrate(wire, gro, max_merges=20, udp="gro", poll_gap=500_000)
    assert c.options["poll_gap"] == 500_000 and c.model == "gap" and c.sensitivity == {}
    assert not c.agreement.exact


def test_empty_names_and_stats_clobber(tmp_path):
    wire, gro = pair(KERNEL, "udp4-fwd")
    p = run_cli("calibrate", "", gro)
    assert (p.returncode, p.stderr.decode()) == (
        2, "pcapgro: error: cannot open WIRE '': empty file name\n")
    p = run_cli("calibrate", wire, "")
    assert (p.returncode, p.stderr.decode()) == (
        2, "pcapgro: error: cannot open RECEIVED '': empty file name\n")
    p = run_cli("calibrate", "--stats", gro, wire, gro)
    assert p.returncode == 2 and b"same file as RECEIVED" in p.stderr
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(gro.read_bytes()[:100_000])
    p = run_cli("calibrate", wire, cut)
    err = p.stderr.decode()
    assert p.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"pcapgro: error: RECEIVED {cut}: damaged input at byte offset ")


def test_report_lines_fit_80_columns():
    """Every line but the command line (kept whole to be copied) fits 80
    columns, numbers as the other reports print them."""
    c = calibrate(*pair(NAPI, "udp-10us"), max_merges=20, udp="gro")
    lines = c.lines("WIRE", "OUT")
    assert lines[1].startswith("  pcapgro merge ") and lines[1].endswith(" WIRE OUT")
    assert all(len(ln) <= 80 for ln in lines)
    assert any(ln.startswith("sensitivity --poll-gap: x2 moves ") for ln in lines)


@pytest.mark.parametrize("offset, value, reason", [
    (14 + 20 + 13, 0x18, "merged across a PSH"),
    (14 + 20 + 13, 0x50, "merged across a CWR or changed TCP flags"),
    (14 + 8, 1, "merged across a changed TTL/hop limit"),
    (14 + 20 + 8, 0, "merged across a changed ACK number"),
])
def test_wire_mutants_break_a_rule(offset, value, reason):
    """One byte changed in a wire segment inside a received aggregate (not
    its last): the received aggregate can no longer be GRO's."""
    wire, gro = (read_packets(p) for p in pair(KERNEL, "tcp4-bulk"))
    groups = trace(wire, gro)
    n, g = next((n, g) for n, g in enumerate(groups) if len(g) > 3)
    d = bytearray(wire[g[1]].data)
    d[offset] = value
    wire[g[1]] = Packet(wire[g[1]].ts, bytes(d), len(d))
    assert check_received(wire, gro, groups) == {
        "received_frame": n + 1, "wire_frame": g[1] + 1, "reason": reason}


def test_library_refuses_bad_options_before_reading():
    with pytest.raises(TypeError):
        pcapgro.calibrate("/nonexistent/w.pcap", "/nonexistent/r.pcap", gso=True)
    with pytest.raises(pcapgro.errors.OptionError):
        pcapgro.calibrate("/nonexistent/w.pcap", "/nonexistent/r.pcap", udp="yes")
    wire, gro = pair(KERNEL, "udp4-fwd")
    with pytest.raises(pcapgro.errors.OptionError):
        calibrate(wire, gro, poll_model="work", poll_gap=5000)


# ---- a new user's findings (lost packets, snaplen, streams, headers, ...)

def _kernel(name="tcp4-bulk"):
    return [read_packets(p) for p in pair(KERNEL, name)]


@pytest.mark.parametrize("cut", ["tail", "drop"])
def test_received_missing_packets_is_traced_not_refused(cut):
    """Received packets missing (editcap -r G 30-58, editcap G 10-12):
    the trace must not join a wire pure ACK with the sequence number a
    later packet starts at onto it (it once did: 'segment of 1 bytes in
    an aggregate of 0-byte segments')."""
    wire, gro = _kernel()
    received = gro[29:] if cut == "tail" else gro[:9] + gro[12:]
    groups = trace(wire, received)
    assert all(g for g in groups)
    for g, p in zip(groups, received):
        if len(g) > 1:
            assert all(len(wire[i].data) > 66 for i in g)      # no pure ACK inside
    c = calibrate(wire, received, max_merges=5)
    assert c.explainable and c.agreement.lost > 0
    assert not c.agreement.extra and not c.agreement.missing


def test_lost_packets_do_not_bias_the_fit():
    """tcp-app with the first 999 received packets cut away: the score
    counts packets out over the wire packets RECEIVED holds, joins first,
    so the fit finds a gap with no join wrong (the default has 1 extra)."""
    wire, gro = (read_packets(p) for p in pair(NAPI, "tcp-app-200B-100us"))
    c = calibrate(wire, gro[999:], max_merges=30)
    assert c.agreement.lost == 999 and len(c.default.extra) == 1
    assert (c.agreement.extra, c.agreement.missing) == ([], [])


def test_snaplen_cut_capture_is_refused(tmp_path):
    wire, gro = pair(KERNEL, "tcp4-bulk")
    gsnap, wsnap = tmp_path / "gsnap.pcap", tmp_path / "wsnap.pcap"
    subprocess.run(["editcap", "-s", "128", gro, gsnap], check=True)
    subprocess.run(["editcap", "-s", "128", wire, wsnap], check=True)
    for w, r, label in ((wire, gsnap, "RECEIVED"), (wsnap, gsnap, "WIRE")):
        p = run_cli("calibrate", w, r)
        err = p.stderr.decode()
        assert p.returncode == 2 and err.count("\n") == 1, err
        assert err.startswith(f"pcapgro: error: {label} is cut to 128 bytes (snaplen): ")


def test_library_takes_open_streams():
    wire, gro = pair(KERNEL, "udp4-fwd")
    with open(wire, "rb") as w, open(gro, "rb") as g:
        st = pcapgro.calibrate(w, g, max_merges=5)
    assert st["result"] == "exact" and st["command"].endswith(" WIRE OUT")


def _ip_csum(d):
    d[24:26] = b"\0\0"
    s = sum(struct.unpack("!10H", bytes(d[14:34])))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    struct.pack_into("!H", d, 24, ~s & 0xFFFF)


@pytest.mark.parametrize("offset, value, what", [
    (14 + 8, 5, "TTL/hop limit"),
    (14 + 1, 0x10, "TOS/traffic class"),
    (14 + 20 + 15, 0xAB, "TCP window"),
])
def test_aggregate_header_is_its_first_segments(offset, value, what):
    """Received frame 20 (an aggregate) with a header field changed (IP
    checksum fixed): named, not a mere 'not exact'."""
    wire, gro = _kernel()
    groups = trace(wire, gro)
    assert len(groups[19]) > 1
    d = bytearray(gro[19].data)
    d[offset] = value
    _ip_csum(d)
    gro[19] = Packet(gro[19].ts, bytes(d), len(d))
    assert check_received(wire, gro) == {
        "received_frame": 20, "wire_frame": groups[19][0] + 1,
        "reason": f"its {what} is not its first segment's"}


def test_printed_command_takes_a_path_starting_with_a_dash():
    from pcapgro.calibrate import merge_command
    assert merge_command({}, "-w.pcap", "OUT") == "pcapgro merge ./-w.pcap OUT"
    assert merge_command({}, "-", "-") == "pcapgro merge - -"


def test_merge_budget_stopping_the_fit_is_said():
    wire, gro = pair(NAPI, "tcp-app-200B-100us")
    c = calibrate(wire, gro, max_merges=1)
    assert c.budget_stopped and c.budget == 1
    text = "\n".join(c.lines())
    assert "the merge budget stopped the fit after 1 merge" in text
    assert c.to_dict()["budget_stopped"]


def test_both_standard_input_refused():
    p = run_cli("calibrate", "-", "-", input=b"")
    assert p.returncode == 2 and b"cannot both be standard input" in p.stderr


def test_received_same_as_wire_shows_no_gro():
    wire, _ = _kernel()
    c = calibrate(wire, list(wire), max_merges=20)
    assert c.no_gro and c.model == "gap" and "poll_model" not in c.options
    assert c.lines()[2].startswith("RECEIVED shows no GRO: no received packet is an aggregate")
    assert not c.udp_undetected
    w, _ = _kernel("udp4-fwd")
    c = calibrate(w, list(w), max_merges=5)
    assert c.udp_undetected and "give --udp gro" in " ".join(c.lines())


def test_default_line_is_merges_defaults_with_timing_given():
    c = calibrate(*pair(KERNEL, "tcp4-bulk"), max_merges=5, poll_gap=5000)
    assert c.options["poll_gap"] == 5000 and not c.agreement.exact
    assert c.default.exact          # merge's default 1 ms is exact here


def test_library_max_merges_zero_refused():
    wire, gro = pair(KERNEL, "udp4-fwd")
    for call in (pcapgro.calibrate, calibrate):
        with pytest.raises(pcapgro.errors.OptionError):
            call(wire, gro, max_merges=0)


def test_not_gro_dict_has_no_command(tmp_path):
    wire, mutant, _, _ = _psh_mutant(tmp_path)
    st = pcapgro.calibrate(wire, mutant)
    assert st["result"] == "not_gro" and st["command"] is None


def test_empty_and_non_capture_errors_name_the_argument(tmp_path):
    wire, gro = pair(KERNEL, "udp4-fwd")
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    p = run_cli("calibrate", wire, empty)
    assert (p.returncode, p.stderr.decode()) == (
        2, f"pcapgro: error: RECEIVED {empty}: empty input\n")
    p = run_cli("calibrate", "README.md", gro)
    assert p.returncode == 2 and p.stderr.startswith(b"pcapgro: error: WIRE README.md: not a pcap")
    p = run_cli("calibrate", "/nonexistent/w.pcap", gro)
    assert p.stderr.startswith(b"pcapgro: error: WIRE: cannot open /nonexistent/w.pcap")


def test_udp_aggregates_with_udp_gro_off_are_not_gro():
    c = calibrate(*pair(KERNEL, "udp4-fwd"), max_merges=5, udp="off")
    assert not c.explainable and c.status == 1
    assert c.offending["reason"] == "a UDP aggregate with UDP GRO off (--udp off)"


def test_docs_write_micro_seconds_and_one_term_for_joins():
    man = (REPO / "man" / "pcapgro.1").read_text()
    assert "uss" not in man
    assert "1\\~us to 100\\~ms" in man and "50\\~us;" in man
    napi = (NAPI / "README.md").read_text()
    assert "udp-* pairs pcapng" in napi
    wire, gro = pair(KERNEL, "tcp4-bulk")
    line = calibrate(wire, gro, max_merges=2).agreement.line()
    assert "joins extra 0, missing 0" in line and "merges" not in line
