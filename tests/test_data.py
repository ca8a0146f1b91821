"""The project carries every capture its tests read (issue 19, item 1): a
fresh clone runs README's test command with nothing beside it."""

import re

from capture_helpers import DATA, KERNEL, PUBLIC, REPO, SAMPLES, all_captures

# the real Linux 6.18 captures tests/test_gro_kernel.py and the GSO tests use
KERNEL_CAPTURES = {f"{n}-{side}.pcap" for n in ("tcp4-bulk", "tcp6-bulk", "tcp4-4flows",
                                                "udp4-fwd", "udp6-fwd", "udp4-fraglist")
                   for side in ("wire", "gro")} | {"tcp4-tso-sender.pcap", "udp4-uso-sender.pcap"}


def test_kernel_captures_are_in_the_repository():
    """Every kernel capture is under tests/data/kernel, readable, and a
    symlink (the samples shipped to users) stays inside the repository."""
    have = {p.name for p in KERNEL.glob("*.pcap")}
    assert have == KERNEL_CAPTURES
    for p in KERNEL.glob("*.pcap"):
        target = p.resolve()
        assert target.is_file(), f"{p} -> {target} is missing"
        assert REPO in target.parents, f"{p} points outside the repository: {target}"
        assert target.stat().st_size > 100_000


def test_samples_are_not_duplicated():
    """A capture is carried once: tests/data/kernel links to samples/
    instead of holding a second copy."""
    by_content = {}
    for p in all_captures():
        by_content.setdefault(p.read_bytes(), []).append(p)
    dups = [v for v in by_content.values() if len(v) > 1]
    assert not dups, f"captures carried twice: {dups}"
    for p in SAMPLES.glob("*.pcap"):
        assert (KERNEL / p.name).resolve() == p.resolve()


def test_public_captures_are_in_the_repository():
    """The public captures (readers, link types, super-frames) with their
    origins."""
    assert (PUBLIC / "SOURCES.md").is_file()
    for sub in ("tcpdump", "packetnet", "pcapng-test-generator/output_le",
                "pcapng-test-generator/output_be"):
        assert any((PUBLIC / sub).rglob("*.pcap*")), sub


def test_no_test_reads_outside_the_repository():
    """No test, helper or CI script (this one included) names the folder of
    shared captures beside the checkout or its environment variable: a
    fresh clone has neither.  The pattern is built from pieces so that
    this file does not name them either."""
    name = "sh" + "ared"
    bad = re.compile(r"\.\./" + name + "|PCAPGRO_" + name.upper() + "|[\"']" + name + "[\"']")
    files = list((REPO / "tests").glob("*.py")) + [REPO / ".ci" / "run"]
    hits = [f"{f.relative_to(REPO)}:{i}" for f in files
            for i, line in enumerate(f.read_text().splitlines(), 1) if bad.search(line)]
    assert not hits, hits
    assert DATA.is_dir()


def _requirement_names(reqs):
    return [re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].strip().lower() for r in reqs]


def _imports(root):
    """Top-level module names imported anywhere under ``root`` (also
    inside functions)."""
    pat = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.M)
    return {m.group(1).lower() for f in root.rglob("*.py") for m in pat.finditer(f.read_text())}


def test_every_declared_dependency_is_imported():
    """A package the project declares is used (issue 19, item 3): each
    runtime dependency by pcapgro/, each test extra by tests/ (pyshark,
    declared for verify, is settled there)."""
    try:
        import tomllib
    except ImportError:                       # Python < 3.11
        import pytest
        tomllib = pytest.importorskip("tomli")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    used = _imports(REPO / "pcapgro")
    unused = [n for n in _requirement_names(project["dependencies"]) if n not in used]
    assert not unused, f"runtime dependencies pcapgro never imports: {unused}"
    used = _imports(REPO / "tests") | used
    names = [n for n in _requirement_names(project["optional-dependencies"]["test"]) if n != "pyshark"]
    unused = [n for n in names if n not in used]
    assert not unused, f"test dependencies nothing imports: {unused}"
