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

import types as _types

from . import verify as _verify_module
from .jobs import merge, split, Report
from .jobs import verify as _verify_job
from .jobs import calibrate as _calibrate_job
from . import calibrate as _calibrate_module

__all__ = ["merge", "split", "verify", "calibrate", "Report", "__version__"]


class _CallableModule(_types.ModuleType):
    """The module :mod:`pcapgro.verify`, callable as the library's
    :func:`pcapgro.jobs.verify` (so ``pcapgro.verify(IN, OUT)`` and
    ``from pcapgro import verify`` both keep working)."""

    def __call__(self, in_path, out_path, csum="valid", progress=None):
        return _verify_job(in_path, out_path, csum, progress)


_verify_module.__class__ = _CallableModule
verify = _verify_module


class _CallableCalibrate(_types.ModuleType):
    """The module :mod:`pcapgro.calibrate`, callable as the library's
    :func:`pcapgro.jobs.calibrate`."""

    def __call__(self, wire, received, *, max_merges=None, **options):
        return _calibrate_job(wire, received, max_merges=max_merges, **options)


_calibrate_module.__class__ = _CallableCalibrate
calibrate = _calibrate_module
