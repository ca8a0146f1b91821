"""Bounded memory (issue 9): a capture streamed from the benchmark's
generator through a pipe into ``pcapgro merge - -`` (no file on disk) keeps
pcapgro's peak RSS under 200 MB.  200 MB of input by default; the full
2 GB with PCAPGRO_BIG=1 (about a minute per mode on a slow core)."""

import os
import sys

import pytest

from capture_helpers import REPO

sys.path.insert(0, str(REPO / "bench"))
import bench  # noqa: E402

LIMIT_KIB = 200 * 1000 * 1000 // 1024
PCAPGRO = [sys.executable, "-m", "pcapgro.cli"]
MODES = [["merge"], ["merge", "--udp", "gro", "--fraglist"]]


def _check(n_bytes, args):
    os.chdir(REPO)
    rc, n, size, dt, rss = bench.stream_merge(n_bytes, PCAPGRO, args)
    assert rc == 0 and size >= n_bytes and n > 0
    assert rss < LIMIT_KIB, f"peak RSS {rss / 1024:.0f} MiB for {size / 1e9:.2f} GB streamed"
    return rss


@pytest.mark.parametrize("args", MODES, ids=["default", "udp-gro-fraglist"])
def test_stream_200mb_bounded_memory(args):
    _check(200_000_000, args)


@pytest.mark.skipif(os.environ.get("PCAPGRO_BIG") is None, reason="PCAPGRO_BIG not set (2 GB run)")
@pytest.mark.parametrize("args", MODES, ids=["default", "udp-gro-fraglist"])
def test_stream_2gb_bounded_memory(args):
    _check(2_000_000_000, args)
