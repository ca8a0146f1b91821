"""Running tshark for verify: one ``tshark -T fields`` process per capture,
both at once, their output read in step by capture time so that neither
side runs far ahead of the other (the comparison then only holds the
packets GRO or GSO may still have reordered), and killed and reaped in
every case."""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import subprocess
import tempfile

from ..errors import UnusableInput
from .fields import (SEP, AGG, TSHARK_PREFS, MD5_PREF, DECODE_AS, FIELDS, TSHARK_MIN_VERSION,
                     _NLOCATED)
from .payload import NeedPayload, packets
from . import probe

READ = 1 << 20              # bytes per pipe read
PIPE_SIZE = 1 << 20         # asked for each tshark pipe (F_SETPIPE_SZ), best effort
AHEAD = 16 << 20            # unparsed output bytes buffered per side at most
PARSE = 1 << 20             # output bytes decoded at a time
MAX_LINES = 4096            # lines parsed per step at most
_F_SETPIPE_SZ = 1031
LOCATE = True               # payloads from the captures (payload.py); False: tshark's hex


def tshark_version(tshark):
    """(major, minor, patch) of ``tshark`` (``tshark --version``), or None
    when it does not say."""
    try:
        out = subprocess.run([tshark, "--version"], capture_output=True, timeout=60,
                             stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(out)


def parse_version(out):
    """(major, minor, patch) from ``tshark --version``'s output (bytes), or
    None."""
    m = re.search(r"TShark \(Wireshark\) (\d+)\.(\d+)\.(\d+)", out.decode("utf-8", "replace"))
    return tuple(int(x) for x in m.groups()) if m else None


def check_tshark(tshark):
    """Refuse a tshark older than :data:`TSHARK_MIN_VERSION` (its fields and
    preferences do not mean what verify expects): UnusableInput.  The
    preferences themselves are checked when tshark starts: it refuses an
    unknown ``-o`` with exit 1 and verify reports it (exit 2)."""
    v = tshark_version(tshark)
    if v is not None and v[:2] < TSHARK_MIN_VERSION:
        raise UnusableInput(f"tshark {'.'.join(map(str, v))} is too old for verify: "
                            f"{'.'.join(map(str, TSHARK_MIN_VERSION))} or later is needed")
    return v


def _tshark_cmd(tshark, path, md5=True, located=False, decode=DECODE_AS):
    cmd = [tshark, "-n", "-r", os.fspath(path), "-T", "fields",
           "-E", f"separator={SEP}", "-E", "occurrence=a", "-E", f"aggregator={AGG}",
           "-E", "header=n", "-E", "quote=n"]
    for p in TSHARK_PREFS + ([MD5_PREF] if md5 and not located else []):
        cmd += ["-o", p]
    for d in decode:
        cmd += ["-d", d]
    for fld in FIELDS[:_NLOCATED] if located else FIELDS:
        cmd += ["-e", fld]
    return cmd


def _tshark_env(confdir):
    env = dict(os.environ)
    # an empty personal configuration: the user's preferences, Decode As
    # entries, disabled protocols and heuristics must not change what we see
    env["WIRESHARK_CONFIG_DIR"] = confdir
    env["XDG_CONFIG_HOME"] = confdir
    env.setdefault("LC_ALL", "C")
    return env


def _pump(procs, sides, after_chunk):
    """Read the tshark pipes in this one thread and parse their lines in
    step by capture time: the side that is behind (last timestamp parsed)
    is parsed next, until it passes the other (at most ``MAX_LINES``
    lines), ``after_chunk()`` after each step.  Both pipes are drained
    into buffers whenever they have output (up to ``AHEAD`` unparsed bytes
    per side; beyond that its tshark waits on its pipe), so both tsharks
    run at once on their own cores while the comparison stays in step:
    only unparsed text is held for the side ahead, never records.  (No
    reader threads: a thread parsing CPU-bound while another waits on a
    pipe hits the GIL convoy effect, ~30 times slower than this loop.)"""
    fds = [p.stdout.fileno() for p in procs]
    for fd in fds:
        try:
            fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:
            pass
    bufs = [bytearray() for _ in fds]
    eof = [False for _ in fds]
    n = len(fds)

    def fill(k_wait):
        want = [k for k in range(n) if not eof[k] and (k == k_wait or len(bufs[k]) < AHEAD)]
        if not want:
            return
        ready, _, _ = select.select([fds[k] for k in want], [], [],
                                    None if k_wait is not None else 0)
        for k in want:
            if fds[k] in ready:
                data = os.read(fds[k], READ)
                if data:
                    bufs[k] += data
                else:
                    eof[k] = True
    pend = [[] for _ in fds]        # decoded lines not parsed yet, and the next one's index
    at = [0 for _ in fds]

    def decode(k):
        buf = bufs[k]
        cut = buf.rfind(b"\n", 0, PARSE) + 1 or buf.find(b"\n", PARSE) + 1
        if not cut:
            if not eof[k] or not buf:
                return False
            cut = len(buf)      # its last line, without a newline
        pend[k], at[k] = buf[:cut].decode("utf-8", "replace").split("\n"), 0
        del buf[:cut]
        return True
    while True:
        live = [k for k in range(n) if not eof[k] or bufs[k] or at[k] < len(pend[k])]
        if not live:
            return
        i = min(live, key=lambda k: (sides[k].last_ts is not None, sides[k].last_ts or 0))
        if at[i] >= len(pend[i]) and not decode(i):
            fill(i)             # side i has no whole line: wait for it (reading both)
            continue
        fill(None)              # take what the other tshark has written meanwhile
        # parse side i until it passes the other side in capture time (not
        # by bytes of text: one OUT line may carry 64 KB, one IN line 1.5 KB)
        limit = min((sides[k].last_ts for k in live if k != i and sides[k].last_ts is not None),
                    default=None)
        side, lines, j = sides[i], pend[i], at[i]
        line = side.line
        end = min(len(lines), j + MAX_LINES)
        while j < end:
            ln = lines[j]
            j += 1
            if ln:
                line(ln)
                if limit is not None and side.last_ts is not None and side.last_ts > limit:
                    break
        at[i] = j
        after_chunk()


def _stderr_lines(f):
    f.seek(0)
    return [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines()
            if ln.strip() and "Running as user" not in ln and "dangerous" not in ln]


def _run(tshark, sides, env, confdir, md5, after_chunk, located=False):
    """One run of both tsharks; [(exit status, stderr lines)] per side."""
    procs, errs = [], []
    try:
        for s in sides:
            errs.append(tempfile.TemporaryFile(dir=confdir))
            procs.append(subprocess.Popen(
                _tshark_cmd(tshark, s.path, md5, located, s.decode), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=errs[-1], env=env))
        _pump(procs, sides, after_chunk)
        return [(p.wait(), _stderr_lines(e)) for p, e in zip(procs, errs)]
    finally:
        for p in procs:         # never leave a tshark behind
            if p.poll() is None:
                p.kill()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            p.stdout.close()
        for e in errs:
            e.close()


def read_both(tshark, make_sides, after_chunk):
    """Run tshark over IN and OUT at once, feeding the sides.

    Args:
        tshark: path of tshark.
        make_sides: callable(md5: bool) -> [IN Side, OUT Side] (fresh; called
            again when this tshark has no frame MD5 preference).
        after_chunk: callable() run after each chunk of lines is parsed.
    Returns: the two sides.
    Raises: UnusableInput when tshark is too old or its fields do not read
        as verify expects (:mod:`.probe`, run at the same time), or when it
        refuses a capture (OUT cut short or damaged after some frames is
        recorded in ``side.error`` instead).
    """
    confdir = tempfile.mkdtemp(prefix="pcapgro-verify-")
    env = _tshark_env(confdir)
    probing = None
    try:
        probing = probe.start(tshark, _tshark_cmd(tshark, "{path}", True, True), confdir, env)
        try:
            sides, results = _read(tshark, make_sides, after_chunk, env, confdir)
        except UnusableInput:
            probe.check(probing, parse_version)     # too old: say that first
            raise
        probe.check(probing, parse_version)
        _refused(sides, results)
        return sides
    finally:
        if probing is not None:
            for p in probing:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        shutil.rmtree(confdir, ignore_errors=True)


def _read(tshark, make_sides, after_chunk, env, confdir):
    """The passes of :func:`read_both`: payloads located first, tshark's hex
    payloads when a frame's cannot be (:class:`~.payload.NeedPayload`),
    without frame MD5 when this tshark lacks it; (sides, results)."""
    md5, located = True, LOCATE
    while True:
        sides = make_sides(md5)
        if located:
            for s in sides:
                s.locate_payloads(packets(s.path))
        try:
            results = _run(tshark, sides, env, confdir, md5, after_chunk, located)
        except NeedPayload:
            # a frame whose payload pcapgro cannot locate (a tunnel, an
            # unknown link type): tshark writes the payloads instead
            located = False
            continue
        finally:
            for s in sides:
                s.close()
        if md5 and not located and any(rc != 0 and any("generate_md5_hash" in m for m in msg)
                       for rc, msg in results):
            # a tshark without the frame MD5 preference: other packets are
            # then compared by length only (said in the summary)
            md5 = False
            continue
        return sides, results


def _refused(sides, results):
    """Raise UnusableInput for a capture tshark refused; OUT cut short or
    damaged after some frames goes to ``side.error``."""
    for s, (rc, msg) in zip(sides, results):
        if rc != 0:
            text = "; ".join(m.removeprefix("tshark: ") for m in msg) or f"tshark exit status {rc}"
            if s.label == "OUT" and s.frames and ("cut short" in text or "damaged" in text
                                                  or "corrupt" in text):
                s.error = text
                continue
            raise UnusableInput(f"{s.label} {s.path}: {text}")
