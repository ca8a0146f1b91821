"""pcapgro: rewrite packet captures the way Linux GRO and GSO do.

The library calls (what the commands do, returning the statistics dict
they print; errors raised from :mod:`pcapgro.errors`)::

    import pcapgro
    st = pcapgro.merge("wire.pcap", "gro.pcapng", fraglist=True)
    pcapgro.split("gro.pcapng", "back.pcap", restore=True)
    pcapgro.verify("wire.pcap", "gro.pcapng")["result"]   # 'faithful'

(``pcapgro.verify`` is also the module :mod:`pcapgro.verify`: calling it
is :func:`pcapgro.jobs.verify`.)

Library layout (the CLI in :mod:`pcapgro.cli` only parses options):

* :mod:`pcapgro.jobs`     -- merge, split, verify: whole jobs, options table
* :mod:`pcapgro.record`   -- the event objects every stage passes along
* :mod:`pcapgro.capture`  -- pcap / pcapng readers and writers
* :mod:`pcapgro.linklayer` -- link types down to the network layer
* :mod:`pcapgro.gro`      -- the GRO engine (NAPI model + protocol handlers)
* :mod:`pcapgro.gso`      -- the GSO splitter; :mod:`pcapgro.forward`: both
"""

__version__ = "0.1.0"

from .jobs import merge, split, Report

__all__ = ["merge", "split", "verify", "Report", "__version__"]


def __getattr__(name):
    """``pcapgro.verify``: the module :mod:`pcapgro.verify` (callable as
    :func:`pcapgro.jobs.verify`: it makes itself so), imported when first
    asked for: merge and split do not need it, and importing it (tshark
    runner, hashlib, subprocess, ...) was ~20 ms of every command's start-up."""
    if name == "verify":
        import importlib
        return importlib.import_module(".verify", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
