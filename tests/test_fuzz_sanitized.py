"""Fuzz under AddressSanitizer and UndefinedBehaviorSanitizer (issue 18).

Mutants of small real captures (the repository's samples, kernel-oracle
cases in tests/regress/, the fault inputs in tests/data/, and a pcapng
made from a sample with SPBs, comments, NRB/ISB/custom blocks and a small
snaplen) go through every command: ``merge``, ``merge --fraglist``,
``merge --udp gro``, ``merge -F pcapng``, ``split``, ``split --restore``,
``merge --gso``, with pcapgro's compiled extension (pcapgro/_native.c)
built with ``-fsanitize=address,undefined`` into a temporary copy of the
package and run there (LD_PRELOAD of gcc's libasan).  Checked:

* no sanitizer report (the worker process exits 0, nothing on its stderr);
* no traceback, no "internal error", only the documented exit statuses
  (0, 2, 3), one error line for 2 and 3; no run longer than ``TIMEOUT``;
* on exit 0, captured payload conserved per TCP/UDP flow
  (tests/test_conservation.py's count: merge variants -- by the lengths
  the headers declare when the input is cut by a snaplen, as there --,
  split, split --restore; ``merge --gso`` forwards, and a router drops and
  fragments, so it is checked for the contract only);
* ``merge -F pcapng`` then ``split --restore`` is the identity on every
  mutant whose merge exits 0: byte for byte what ``merge --no-gro -F
  pcapng`` writes for the same mutant (the normalisations of reading and
  writing a capture that README's "Capture formats" lists), except where
  README's restore section says the round trip cannot be the identity,
  each named in ``NOT_IDENTITY`` and counted.

Seeded (``SEED``; PCAPGRO_FUZZ_SEED=N for another hunt) and bounded: at
most ``MUTANTS`` mutants, and no new mutant after ``BUDGET`` seconds (about
two minutes in all with the build).  Skipped, with the reason, when gcc,
the Python headers or the sanitizer runtime are missing.
"""

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SEED = int(os.environ.get("PCAPGRO_FUZZ_SEED", "18"))
MUTANTS = int(os.environ.get("PCAPGRO_FUZZ_MUTANTS", "400"))
BUDGET = float(os.environ.get("PCAPGRO_FUZZ_BUDGET", "95"))    # seconds of fuzzing
TIMEOUT = 20            # seconds per pcapgro run (a hang fails the test)
PREFIX = 12 * 1024      # each seed: its first whole records within this many bytes

COMMANDS = {
    "merge": (["merge"], ".pcap"),
    "fraglist": (["merge", "--fraglist"], ".pcap"),
    "udp-gro": (["merge", "--udp", "gro"], ".pcap"),
    "pcapng": (["merge", "-F", "pcapng"], ".pcapng"),
    "split": (["split"], ".pcap"),
    "restore": (["split", "--restore"], ".pcapng"),
    "gso": (["merge", "--gso"], ".pcap"),
}
CONSERVING = {"merge", "fraglist", "udp-gro", "pcapng", "split", "restore"}

# when merge -> split --restore cannot be the identity (README, "split
# --restore: when the round trip is the identity"); the restore statistics
# or the merge output say which applies
NOT_IDENTITY = {
    "unrecorded": "an aggregate holding a segment cut by a snaplen has no restore "
                  "record: it comes back as merge wrote it",
    "unfit": "a record that does not fit its packet (here: a mutant whose packets "
             "merge cannot describe, e.g. a time the interface cannot hold) is "
             "not applied",
}

SAN_CFLAGS = ["-shared", "-fPIC", "-O1", "-g", "-std=c99", "-fno-omit-frame-pointer",
              "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]


# --- the sanitized build ------------------------------------------------------

def _runtime(name):
    """Path of gcc's sanitizer runtime ``name`` (e.g. libasan.so), or None."""
    try:
        p = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True,
                           text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(p) if os.path.isabs(p) and os.path.exists(p) else None


def build_sanitized(dest):
    """Copy the pcapgro package into ``dest`` and build its extension there
    with ASan and UBSan.  Returns the libasan path to preload; calls
    pytest.skip (with the reason) when something needed is missing."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed: no sanitized build")
    inc = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(inc, "Python.h")):
        pytest.skip(f"Python headers missing ({inc}/Python.h)")
    asan = _runtime("libasan.so")
    if asan is None or _runtime("libubsan.so") is None:
        pytest.skip("gcc's sanitizer runtime (libasan, libubsan) is not installed")
    pkg = os.path.join(dest, "pcapgro")
    shutil.copytree(REPO / "pcapgro", pkg,
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    so = os.path.join(pkg, "_native" + sysconfig.get_config_var("EXT_SUFFIX"))
    p = subprocess.run(["gcc", *SAN_CFLAGS, f"-I{inc}", os.path.join(pkg, "_native.c"),
                        "-o", so], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        pytest.fail(f"sanitized build failed:\n{p.stderr[-2000:]}")
    return asan


def test_fuzz_every_command_sanitized(tmp_path):
    asan = build_sanitized(str(tmp_path))
    env = dict(os.environ, LD_PRELOAD=asan,
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:exitcode=97",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=98",
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(HERE)]))
    env.pop("PCAPGRO_NO_C", None)
    report = tmp_path / "report.json"
    p = subprocess.run([sys.executable, "-c",
                        "import sys, test_fuzz_sanitized as t; t.worker(sys.argv[1])",
                        str(report)], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=BUDGET + 20 * TIMEOUT)
    assert p.returncode == 0 and "Sanitizer" not in p.stderr \
        and "runtime error" not in p.stderr, f"exit {p.returncode}\n{p.stderr[-6000:]}"
    r = json.loads(report.read_text())
    assert r["native"].startswith(str(tmp_path)), r["native"]     # the sanitized build ran
    assert r["problems"] == [], "\n\n".join(r["problems"][:5])
    # bounded, but not empty: every command ran, identity checked on many
    assert r["mutants"] >= 30 and r["identity_checked"] >= 10, r
    print(json.dumps({k: v for k, v in r.items() if k != "problems"}))


# --- the worker (runs in the sanitized process) ------------------------------

def _seeds():
    """{name: bytes}: the small real captures mutants are made from, each
    cut to its first whole records within PREFIX."""
    from test_fuzz_files import _bounds
    files = sorted((REPO / "samples").glob("*.pcap"))
    files += sorted((REPO / "tests" / "data").rglob("*.pcap*"))
    regress = sorted((REPO / "tests" / "regress").glob("*/input.pcap"))
    files += regress[::max(1, len(regress) // 16)]
    files += sorted(p for p in (REPO / "tests" / "fuzz_corpus").glob("*.pcap*")
                    if not p.name.endswith(".expect"))
    out = {}
    for p in files:
        data = p.read_bytes()
        if len(data) > PREFIX:
            b = _bounds(data)
            data = data[:max([x for x in b if x <= PREFIX] + b[:3])]
        out[str(p.relative_to(REPO))] = data
    out["rich.pcapng"] = _rich_pcapng()
    return out


def _rich_pcapng():
    """A pcapng from the first packets of a sample: an IDB snaplen of 200
    (later packets cut), SPBs, comments and flags, NRB, ISB and a custom
    block between packets, a second interface."""
    from pcapgro.capture import open_reader, open_writer
    from pcapgro.record import Block, Interface, Packet, PacketMeta, Section
    pk = [e for e in open_reader(str(REPO / "samples" / "tcp4-bulk-wire.pcap"))
          if type(e) is Packet][:24]
    fd, path = tempfile.mkstemp(suffix=".pcapng")
    os.close(fd)
    w = open_writer(path, "pcapng")
    w.write(Section())
    w.write(Interface(1, snaplen=200, tsresol=9))
    w.write(Interface(1, snaplen=0, tsresol=6))
    for k, p in enumerate(pk):
        d, ol = bytes(p.data), p.orig_len
        meta = None
        if k in (5, 6, 7):
            d = d[:200]                                  # cut by the snaplen, SPB
            meta = PacketMeta(block=3)
        elif k % 5 == 1:
            meta = PacketMeta(comments=[f"c{k}"], flags=1)
        if k in (8, 9, 10, 16):
            w.write([Block(4, b"\0" * 4), Block(5, b"\0" * 12),
                     Block(0xBAD, b"\x00\x00\x7f\x00pcapgro")][k % 3])
        w.write(Packet(p.ts // 1000 * 1000, d, ol, 1 if k > 20 else 0, 1, meta))
    w.close()
    data = Path(path).read_bytes()
    os.unlink(path)
    return data


def _mutate_packets(data, rnd, wd):
    """Mutations that keep the file well formed, so that most mutants get
    past the reader into GRO, GSO and restore: one to four packets get a
    header byte changed, a time set to an extreme, an original length
    changed, a cut, or are duplicated, swapped or dropped; or a block is
    inserted.  Returns bytes (same format), or ``data`` when it cannot be
    read."""
    from pcapgro.capture import open_reader, open_writer
    from pcapgro.errors import DamagedInput, UnusableInput
    from pcapgro.record import Block, Packet
    ext = ".pcapng" if data[:4] == b"\n\r\r\n" else ".pcap"
    src, dst = os.path.join(wd, "pm-in" + ext), os.path.join(wd, "pm-out" + ext)
    with open(src, "wb") as f:
        f.write(data)
    try:
        evs = list(open_reader(src))
    except (DamagedInput, UnusableInput, ValueError):
        return data
    idx = [j for j, e in enumerate(evs) if type(e) is Packet]
    if not idx:
        return data
    for _ in range(rnd.randint(1, 4)):
        idx = [j for j, e in enumerate(evs) if type(e) is Packet]
        j = rnd.choice(idx)
        p = evs[j]
        d, ts, ol = bytearray(p.data), p.ts, p.orig_len
        op = rnd.randrange(8)
        if op <= 2 and d:                                     # a header byte
            d[rnd.randrange(min(len(d), 80))] = rnd.randrange(256)
        elif op == 3:                                         # an extreme time
            ts = rnd.choice([0, 1, (1 << 64) - 1, ((1 << 64) - 1) * 1000,
                             ts + (1 << 40), ts - 1, -1000])
        elif op == 4:                                         # original length
            ol = rnd.choice([0, len(d) - 1, len(d) + 1, len(d) + 40,
                             0xFFFF, 0xFFFFFFFF]) & 0xFFFFFFFF
        elif op == 5 and len(d) > 20:                         # cut
            del d[rnd.randrange(14, len(d)):]
        elif op == 6:                                         # swap, duplicate
            k = rnd.choice(idx)
            evs[j], evs[k] = evs[k], evs[j]
            if rnd.random() < 0.3:
                evs.insert(j, evs[j])
            continue
        elif ext == ".pcapng":                                # a block inserted
            evs.insert(j, rnd.choice([Block(4, b"\0" * 4), Block(5, b"\0" * 12),
                                      Block(0xBAD, b"\x00\x00\x7f\x00x")]))
            continue
        evs[j] = Packet(ts, bytes(d), ol, p.iface, p.linktype, p.meta)
    w = open_writer(dst, ext[1:])
    try:
        for e in evs:
            w.write(e)
        w.close()
    except (ValueError, OverflowError, struct.error, UnusableInput):
        w.abort()          # not writable in this format: keep the seed
        return data
    with open(dst, "rb") as f:
        return f.read()


def _check_run(name, args, status, err, out):
    """Problems (list of str) with one run's exit status and stderr."""
    where = f"{name}: pcapgro {' '.join(args)}: exit {status}\n{err[-1500:]}"
    probs = []
    if status not in (0, 2, 3):
        probs.append("undocumented exit status: " + where)
    if "Traceback" in err or "internal error" in err:
        probs.append("traceback: " + where)
    lines = err.splitlines()
    errors = [ln for ln in lines if not ln.startswith(("pcapgro: warning: ", "pcapgro: note: "))]
    if not all(ln.startswith("pcapgro: ") for ln in lines):
        probs.append("stray stderr: " + where)
    elif status == 0 and errors:
        probs.append("error line on exit 0: " + where)
    elif status in (2, 3) and len(errors) != 1:
        probs.append("not one error line: " + where)
    if status == 2 and os.path.exists(out):
        probs.append("output left on exit 2: " + where)
    return probs


def _flows(path, orig, tunnels=True):
    from test_conservation import flow_bytes
    return {k: v for k, v in flow_bytes(path, orig=orig, tunnels=tunnels)[1].items() if v}


def _conserved(key, src, out):
    """A problem (str) when ``out`` does not carry ``src``'s captured payload
    per flow (for merge of snaplen-cut input: the payload the headers
    declare, see tests/test_conservation.py), else None."""
    from pcapgro.capture import open_reader
    from pcapgro.record import Packet
    cut = any(type(e) is Packet and len(e.data) < e.orig_len for e in open_reader(src))
    orig = cut and key != "split" and key != "restore"
    # UDP GRO and fraglist merge a tunnel's datagrams as plain UDP (no
    # tunnel socket): count those by their outer flow
    tunnels = key not in ("fraglist", "udp-gro")
    a, b = _flows(src, orig, tunnels), _flows(out, orig, tunnels)
    if a != b:
        diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
        return f"payload not conserved by {key}: {list(diff.items())[:3]}"
    return None


def _identity(name, src, wd, run):
    """(problem or None, normalisation name or None): merge -F pcapng then
    split --restore against merge --no-gro -F pcapng of ``src``."""
    m, back, ref = (os.path.join(wd, f) for f in ("m.pcapng", "b.pcapng", "n.pcapng"))
    st, err = run(["merge", "-q", "-F", "pcapng", src, m])
    if st != 0:
        return None, "merge-failed"
    sfile = os.path.join(wd, "restore.json")
    st, err = run(["split", "-q", "--restore", "-F", "pcapng", "--stats", sfile, m, back])
    if st != 0:
        return f"{name}: split --restore of a merge output: exit {st}\n{err[-800:]}", None
    st2, err2 = run(["merge", "-q", "--no-gro", "-F", "pcapng", src, ref])
    if st2 != 0:
        return f"{name}: merge --no-gro exit {st2} where merge gave 0\n{err2[-800:]}", None
    rs = json.load(open(sfile))["restore"]
    for why in NOT_IDENTITY:
        if rs.get(why):
            return None, why
    if open(back, "rb").read() != open(ref, "rb").read():
        return (f"{name}: merge -> split --restore is not the identity "
                f"(restore stats {rs})"), None
    return None, None


def worker(report):
    """Run the mutants (in this process, the sanitized build imported) and
    write a JSON report: mutants, runs, statuses, identity_checked,
    normalisations {name: count}, problems [str]."""
    import pcapgro._native as native
    from test_fuzz_files import mutate, run_inprocess
    import test_fuzz_files
    test_fuzz_files.TIMEOUT = TIMEOUT
    seeds = _seeds()
    names = sorted(seeds)
    rnd = random.Random(SEED)
    t_end = time.monotonic() + BUDGET
    res = {"native": native.__file__, "mutants": 0, "runs": 0, "statuses": {},
           "identity_checked": 0, "normalisations": {}, "problems": []}

    def run(args):
        res["runs"] += 1
        try:
            return run_inprocess([str(a) for a in args])
        except AssertionError as e:          # a hang
            return 124, str(e)

    with tempfile.TemporaryDirectory(prefix="pcapgro-sanfuzz-") as wd:
        for k in range(MUTANTS):
            if time.monotonic() > t_end:
                break
            name = names[k % len(names)] if k < len(names) else rnd.choice(names)
            if k < len(names):
                data = seeds[name]
            elif rnd.random() < 0.5:
                data = mutate(seeds[name], rnd)
            else:
                data = _mutate_packets(seeds[name], rnd, wd)
            tag = f"{name} (mutant {k}, seed {SEED})"
            src = os.path.join(wd, "in" + (".pcapng" if data[:4] == b"\n\r\r\n" else ".pcap"))
            with open(src, "wb") as f:
                f.write(data)
            res["mutants"] += 1
            probs = _one_mutant(tag, src, wd, run, res)
            if probs:
                keep = os.path.join(os.path.dirname(report), f"mutant-{k}" + os.path.splitext(src)[1])
                shutil.copy(src, keep)
                res["problems"] += [f"{p}\n(input kept as {keep})" for p in probs]
            if len(res["problems"]) > 20:
                break
    with open(report, "w") as f:
        json.dump(res, f, indent=1)


def _one_mutant(tag, src, wd, run, res):
    probs = []
    for key, (args, ext) in COMMANDS.items():
        out = os.path.join(wd, key + ext)
        if os.path.exists(out):
            os.unlink(out)
        st, err = run([*args, "-q", src, out])
        res["statuses"][f"{key}:{st}"] = res["statuses"].get(f"{key}:{st}", 0) + 1
        probs += [f"{tag}: {p}" for p in _check_run(key, args, st, err, out)]
        if st == 0 and key in CONSERVING:
            p = _conserved(key, src, out)
            if p:
                probs.append(f"{tag}: {p}")
    p, norm = _identity(tag, src, wd, run)
    if p:
        probs.append(p)
    elif norm is None:
        res["identity_checked"] += 1
    elif norm != "merge-failed":
        res["normalisations"][norm] = res["normalisations"].get(norm, 0) + 1
    return probs
