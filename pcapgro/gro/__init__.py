"""GRO: the engine core (net/core/gro.c) and its protocol handlers.

Importing the package registers every protocol module in the offload table
(:mod:`pcapgro.gro.offload`), as the kernel's init calls do.
"""

from . import gre, ipip, ipv4, ipv6, tcp, udp, udp_tunnel  # noqa: F401  (register their offloads)
from .config import GROConfig
from .engine import GROEngine
from .flush import Flush, Pass
from .stats import GROStats

__all__ = ["GROConfig", "GROEngine", "Flush", "Pass", "GROStats"]
