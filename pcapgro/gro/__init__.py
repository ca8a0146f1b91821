"""The GRO engine (net/core/gro.c) and its protocol handlers."""

from .config import GROConfig
from .engine import GROEngine
from .flush import Flush, Pass
from .stats import GROStats

__all__ = ["GROConfig", "GROEngine", "Flush", "Pass", "GROStats"]
