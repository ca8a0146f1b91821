"""Packaging: the wheel built from this checkout, installed in a fresh
virtual environment, runs the README's main job.

One module-scoped fixture builds the wheel (``pip wheel --no-deps``) from a
copy of the working tree (so the build leaves no ``build/`` or egg-info in
the checkout other sessions work in), creates a venv and installs the wheel
with its dependencies from the package index.  Skipped, with the reason,
when pip cannot reach the index.  About 25 s with a warm pip cache.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "tcp4-bulk-wire.pcap"
# what the checkout's build does not need (and .gitignore'd build products)
_IGNORE = shutil.ignore_patterns(".git", ".ci", "build", "dist", "*.egg-info", "__pycache__",
                                 ".venv", "venv", ".pytest_cache", ".hypothesis")
_TIMEOUT = 300


def _run(args, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", _TIMEOUT)
    return subprocess.run([str(a) for a in args], **kw)


def _why(r):
    """pip's own error line (for a skip reason)."""
    text = (r.stdout or "") + (r.stderr or "")
    lines = [ln.strip() for ln in text.splitlines() if "ERROR:" in ln or "Error" in ln]
    return lines[0] if lines else _tail(r, 1)


def _tail(r, n=25):
    text = (r.stdout or "") + (r.stderr or "")
    return "\n".join(text.splitlines()[-n:])


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv dir, wheel path) with the wheel installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_IGNORE)
    dist = tmp / "dist"
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, "."], cwd=src)
    if r.returncode != 0:
        # building needs setuptools from the index (build isolation)
        if _offline(r, tmp):
            pytest.skip("pip cannot reach the package index to fetch setuptools: " + _why(r))
        pytest.fail("pip wheel failed:\n" + _tail(r))
    wheels = sorted(dist.glob("pcapgro-*.whl"))
    assert len(wheels) == 1, f"expected one pcapgro wheel in {sorted(dist.iterdir())}"

    venv = tmp / "v"
    r = _run([sys.executable, "-m", "venv", venv])
    assert r.returncode == 0, "python3 -m venv failed:\n" + _tail(r)
    # dependencies come from the package index
    r = _run([venv / "bin" / "pip", "install", wheels[0]])
    if r.returncode != 0 and _offline(r, tmp):
        pytest.skip("pip cannot reach the package index: " + _why(r))
    assert r.returncode == 0, "pip install of the wheel failed:\n" + _tail(r)
    return venv, wheels[0]


def _offline(r, tmp):
    """Did pip fail because it cannot reach the package index?  Network
    errors say so; "from versions: none" (no version at all of a real
    package) is taken as offline only when plain PyPI is unreachable too."""
    text = (r.stdout or "") + (r.stderr or "")
    if any(s in text for s in ("NewConnectionError", "Temporary failure in name resolution",
                               "Network is unreachable", "Max retries exceeded",
                               "Connection refused", "Read timed out",
                               "ProxyError", "SSLError")):
        return True
    if "from versions: none" in text:
        return not _index_reachable()
    return False


def _index_url():
    url = os.environ.get("PIP_INDEX_URL")
    if not url:
        r = _run([sys.executable, "-m", "pip", "config", "get", "global.index-url"], timeout=60)
        url = r.stdout.strip() if r.returncode == 0 else ""
    return (url or "https://pypi.org/simple").split()[0].rstrip("/")


def _index_reachable():
    """Does the index pip is configured with answer for a package it must
    have (click)?"""
    import ssl
    import urllib.request
    url = _index_url() + "/click/"
    if url.startswith("file:"):
        from urllib.parse import urlparse
        return Path(urlparse(url).path).is_dir()
    cafile = os.environ.get("PIP_CERT") or None
    try:
        ctx = ssl.create_default_context(cafile=cafile)
        with urllib.request.urlopen(url, timeout=15, context=ctx) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


def count_packets(path):
    """Packet blocks (EPB, SPB, PB) in a pcapng file, or records in a pcap,
    read here without pcapgro."""
    data = Path(path).read_bytes()
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        n = 0
        off = 0
        bo = "<"
        while off + 12 <= len(data):
            if data[off:off + 4] == b"\x0a\x0d\x0d\x0a":
                bo = "<" if data[off + 8:off + 12] == b"\x4d\x3c\x2b\x1a" else ">"
            btype, blen = struct.unpack_from(bo + "II", data, off)
            assert blen >= 12 and off + blen <= len(data), f"bad block at {off}"
            if btype in (2, 3, 6):
                n += 1
            off += blen
        assert off == len(data)
        return n
    magic = data[:4]
    bo = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    n, off = 0, 24
    while off + 16 <= len(data):
        incl = struct.unpack_from(bo + "I", data, off + 8)[0]
        off += 16 + incl
        n += 1
    assert off == len(data)
    return n


def test_wheel_carries_every_package(installed):
    """Every pcapgro package of the checkout is in the wheel (and no tests)."""
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {p.relative_to(ROOT).as_posix() for p in (ROOT / "pcapgro").rglob("__init__.py")
            if "__pycache__" not in p.parts}
    assert want and want <= names, f"missing from the wheel: {sorted(want - names)}"
    assert not any(n.startswith("tests/") for n in names)
    entry = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert entry, "no entry_points.txt"
    assert "pcapgro = pcapgro.cli:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()


def test_readme_main_job_from_the_wheel(installed, tmp_path):
    """README's main-job command with the installed console script: exit 0,
    58 packets out (the kernel's own GRO output has 58)."""
    venv, _ = installed
    out = tmp_path / "gro.pcapng"
    stats = tmp_path / "stats.json"
    # cwd outside the checkout, so nothing can be imported from it
    r = _run([venv / "bin" / "pcapgro", "merge", SAMPLE, out, "--stats", stats],
             cwd=tmp_path)
    assert r.returncode == 0, _tail(r)
    assert "Traceback" not in r.stderr
    s = json.loads(stats.read_text())
    assert (s["packets_in"], s["packets_out"]) == (1109, 58)
    assert count_packets(out) == 58
    # the statistics table is printed on stderr as README shows it
    assert "out            58" in r.stderr
    # and it is the installed copy that ran
    r = _run([venv / "bin" / "python", "-c", "import pcapgro, sys; print(pcapgro.__file__)"],
             cwd=tmp_path)
    assert r.returncode == 0 and str(venv) in r.stdout, r.stdout + r.stderr


def test_main_job_needs_no_tshark(installed, tmp_path):
    """merge --no-gro and merge itself run with nothing on PATH but the venv
    (tshark is only needed for verify)."""
    venv, _ = installed
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PATH")}
    env["PATH"] = str(venv / "bin")
    exe = venv / "bin" / "pcapgro"
    out = tmp_path / "copy.pcap"
    r = _run([exe, "merge", "--no-gro", SAMPLE, out], cwd=tmp_path, env=env)
    assert r.returncode == 0, _tail(r)
    assert count_packets(out) == 1109
    assert out.read_bytes() == SAMPLE.read_bytes()
    out = tmp_path / "gro.pcapng"
    r = _run([exe, "merge", "-q", SAMPLE, out], cwd=tmp_path, env=env)
    assert r.returncode == 0, _tail(r)
    assert count_packets(out) == 58
    assert "tshark" not in r.stderr


def test_version_and_completion_from_the_wheel(installed, tmp_path):
    venv, wheel = installed
    exe = venv / "bin" / "pcapgro"
    r = _run([exe, "--version"], cwd=tmp_path)
    version = wheel.name.split("-")[1]
    assert r.returncode == 0 and version in r.stdout, r.stdout + r.stderr
    # click's completion, as README documents it
    for shell in ("bash", "zsh", "fish"):
        env = dict(os.environ, _PCAPGRO_COMPLETE=f"{shell}_source")
        r = _run([exe], cwd=tmp_path, env=env)
        assert r.returncode == 0 and "_pcapgro_completion" in r.stdout, (shell, _tail(r))
    env = dict(os.environ, _PCAPGRO_COMPLETE="bash_complete",
               COMP_WORDS="pcapgro merge --csum ", COMP_CWORD="3")
    r = _run([exe], cwd=tmp_path, env=env)
    assert r.returncode == 0
    assert set(r.stdout.split()) >= {"plain,valid", "plain,kernel"}, r.stdout


def test_wheel_installs_the_man_page(installed, tmp_path):
    """``pip install`` of the wheel puts man/pcapgro.1 into the venv's
    share/man/man1, where ``man pcapgro`` finds it with the venv's bin/ on
    PATH (man-db derives the manual path from PATH; no MANPATH)."""
    venv, _ = installed
    page = venv / "share" / "man" / "man1" / "pcapgro.1"
    assert page.read_bytes() == (ROOT / "man" / "pcapgro.1").read_bytes()
    if shutil.which("man") is None:
        pytest.skip("man (man-db) not installed: the installed file is checked, not man -w")
    env = {k: v for k, v in os.environ.items() if k not in ("MANPATH", "MANOPT")}
    env.update(PATH=os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"]), HOME=str(tmp_path))
    r = _run(["man", "-w", "pcapgro"], cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).resolve() == page.resolve()


def test_sdist_carries_the_man_page(tmp_path):
    """The source distribution has man/pcapgro.1 (MANIFEST.in)."""
    pytest.importorskip("setuptools")
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=_IGNORE)
    code = ("import sys; from setuptools import build_meta as b; "
            "print(b.build_sdist(sys.argv[1]))")
    r = _run([sys.executable, "-c", code, tmp_path / "sdist"], cwd=src)
    assert r.returncode == 0, _tail(r)
    import tarfile
    name = r.stdout.strip().splitlines()[-1]
    with tarfile.open(tmp_path / "sdist" / name) as tf:
        members = tf.getnames()
    assert any(m.endswith("/man/pcapgro.1") for m in members), members[:20]
