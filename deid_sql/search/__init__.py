"""Searches over the policy lattice; each module one algorithm, each randomized one seeded.

They see the lattice and the evaluators (metrics, cache, evaluation count) only.  The names below
are imported on first use (PEP 562), so a command that needs one search (``anonymize`` imports
``search.paths``) does not load the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name → the module that defines it
_EXPORTS = {
    "BoundaryPolicy": "boundary", "BoundarySearch": "boundary", "check_threshold": "boundary",
    "bisecting_policy_search": "bps", "directed_policy_search": "directed", "Frontier": "frontier",
    "Point": "frontier", "FrontierState": "frontier_search", "RandomChainSearch": "rcs",
    "SublatticeHeuristicSearch": "shs",
}

__all__ = ["BoundaryPolicy", "BoundarySearch", "Frontier", "FrontierState", "Point", "RandomChainSearch",
           "SublatticeHeuristicSearch", "bisecting_policy_search", "check_threshold", "directed_policy_search"]

if TYPE_CHECKING:
    from .boundary import BoundaryPolicy, BoundarySearch, check_threshold
    from .bps import bisecting_policy_search
    from .directed import directed_policy_search
    from .frontier import Frontier, Point
    from .frontier_search import FrontierState
    from .rcs import RandomChainSearch
    from .shs import SublatticeHeuristicSearch


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
