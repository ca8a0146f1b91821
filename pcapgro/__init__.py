"""pcapgro: rewrite packet captures the way Linux GRO and GSO do.

The library calls (what the commands do, returning the statistics dict
they print; errors raised from :mod:`pcapgro.errors`)::

    import pcapgro
    st = pcapgro.merge("wire.pcap", "gro.pcapng", fraglist=True)
    pcapgro.split("gro.pcapng", "back.pcap", restore=True)
    pcapgro.verify("wire.pcap", "gro.pcapng")["result"]   # 'faithful'
    pcapgro.calibrate("wire.pcap", "kernel-gro.pcap")["command"]

(``pcapgro.verify`` is also the module :mod:`pcapgro.verify`, and
``pcapgro.calibrate`` the module :mod:`pcapgro.calibrate`: calling them
is :func:`pcapgro.jobs.verify` / :func:`pcapgro.jobs.calibrate`.)

Library layout (the CLI in :mod:`pcapgro.cli` only parses options):

* :mod:`pcapgro.jobs`     -- merge, split, verify, calibrate: whole jobs, options table
* :mod:`pcapgro.record`   -- the event objects every stage passes along
* :mod:`pcapgro.capture`  -- pcap / pcapng readers and writers
* :mod:`pcapgro.linklayer` -- link types down to the network layer
* :mod:`pcapgro.gro`      -- the GRO engine (NAPI model + protocol handlers)
* :mod:`pcapgro.gso`      -- the GSO splitter; :mod:`pcapgro.forward`: both
"""

__version__ = "0.1.0"

from .jobs import merge, split, Report

__all__ = ["merge", "split", "verify", "calibrate", "Report", "__version__"]


def __getattr__(name):
    """``pcapgro.verify`` and ``pcapgro.calibrate``: the modules
    :mod:`pcapgro.verify` and :mod:`pcapgro.calibrate` (callable as
    :func:`pcapgro.jobs.verify` / :func:`pcapgro.jobs.calibrate`: each makes
    itself so), imported when first asked for: merge and split need
    neither, and importing them (tshark runner, hashlib, subprocess, the
    agreement and fit code) was ~20 ms of every command's start-up."""
    if name in ("verify", "calibrate"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
