"""Running tshark for verify: one ``tshark -T fields`` process per capture,
both at once, their output read in step by capture time so that neither
side runs far ahead of the other (the comparison then only holds the
packets GRO or GSO may still have reordered), and killed and reaped in
every case."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile

from ..errors import UnusableInput
from .fields import (SEP, AGG, TSHARK_PREFS, MD5_PREF, DECODE_AS, FIELDS, TSHARK_MIN_VERSION)

READ = 1 << 20              # bytes per pipe read
PIPE_SIZE = 1 << 20         # asked for each tshark pipe (F_SETPIPE_SZ), best effort
_F_SETPIPE_SZ = 1031


def tshark_version(tshark):
    """(major, minor, patch) of ``tshark`` (``tshark --version``), or None
    when it does not say."""
    try:
        out = subprocess.run([tshark, "--version"], capture_output=True, timeout=60,
                             stdin=subprocess.DEVNULL).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"TShark \(Wireshark\) (\d+)\.(\d+)\.(\d+)", out)
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


def _tshark_cmd(tshark, path, md5=True):
    cmd = [tshark, "-n", "-r", os.fspath(path), "-T", "fields",
           "-E", f"separator={SEP}", "-E", "occurrence=a", "-E", f"aggregator={AGG}",
           "-E", "header=n", "-E", "quote=n"]
    for p in TSHARK_PREFS + ([MD5_PREF] if md5 else []):
        cmd += ["-o", p]
    for d in DECODE_AS:
        cmd += ["-d", d]
    for fld in FIELDS:
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
    """Read the tshark pipes in this one thread and parse each complete
    line as it comes; ``after_chunk()`` runs after every read.  The side
    that is behind in capture time (last timestamp parsed) is read next,
    blocking on it: the other tshark goes on until its pipe is full, so
    both run at once while OUT stays in step with IN.  (No reader threads:
    a thread parsing CPU-bound while another waits on a pipe hits the GIL
    convoy effect, ~30 times slower than this loop.)"""
    fds = [p.stdout.fileno() for p in procs]
    for fd in fds:
        try:
            fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:
            pass
    pending = [b"" for _ in fds]
    live = list(range(len(fds)))
    while live:
        i = min(live, key=lambda k: (sides[k].last_ts is not None, sides[k].last_ts or 0))
        side = sides[i]
        data = os.read(fds[i], READ)
        if not data:
            live.remove(i)
            if pending[i]:
                side.line(pending[i].decode("utf-8", "replace"))
                pending[i] = b""
            after_chunk()
            continue
        data = pending[i] + data
        cut = data.rfind(b"\n") + 1
        pending[i] = data[cut:]
        if cut:
            line = side.line
            for ln in data[:cut - 1].decode("utf-8", "replace").split("\n"):
                line(ln)
            after_chunk()


def _stderr_lines(f):
    f.seek(0)
    return [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines()
            if ln.strip() and "Running as user" not in ln and "dangerous" not in ln]


def _run(tshark, sides, env, confdir, md5, after_chunk):
    """One run of both tsharks; [(exit status, stderr lines)] per side."""
    procs, errs = [], []
    try:
        for s in sides:
            errs.append(tempfile.TemporaryFile(dir=confdir))
            procs.append(subprocess.Popen(
                _tshark_cmd(tshark, s.path, md5), stdin=subprocess.DEVNULL,
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
    Raises: UnusableInput when tshark refuses a capture (OUT cut short or
        damaged after some frames is recorded in ``side.error`` instead).
    """
    confdir = tempfile.mkdtemp(prefix="pcapgro-verify-")
    env = _tshark_env(confdir)
    try:
        md5 = True
        while True:
            sides = make_sides(md5)
            results = _run(tshark, sides, env, confdir, md5, after_chunk)
            if md5 and any(rc != 0 and any("generate_md5_hash" in m for m in msg)
                           for rc, msg in results):
                # a tshark without the frame MD5 preference: other packets are
                # then compared by length only (said in the summary)
                md5 = False
                continue
            break
        for s, (rc, msg) in zip(sides, results):
            if rc != 0:
                text = "; ".join(m.removeprefix("tshark: ") for m in msg) or f"tshark exit status {rc}"
                if s.label == "OUT" and s.frames and ("cut short" in text or "damaged" in text
                                                      or "corrupt" in text):
                    s.error = text
                    continue
                raise UnusableInput(f"{s.label} {s.path}: {text}")
        return sides
    finally:
        shutil.rmtree(confdir, ignore_errors=True)
