"""The lattice searches: boundary policies, the risk–utility frontier, k-anonymity baselines, full-domain optima.

BPS and Directed (seed 001), Random Chain and Sublattice Heuristic Search (seed 000), the
k-anonymity frontier (seed 002 §5.6), the antichain prefix tree and the best-first branch and
bound (seed 004), and the default path search over full-domain transformations.

Modules:

- ``antichain.py``: stores for predictive properties: the antichain prefix tree with materialized closure,
  and two list baselines (seed 004 Table 1)
- ``bfs.py``: best-first branch and bound with Flash-style probes where acceptance is monotone
- ``boundary.py``: boundary policies (seed 001 Def. 2.3), results, dominance; the loop BPS and Directed
  share
- ``bps.py``: Bisecting Policy Search (seed 001 §2.4.2)
- ``directed.py``: Directed Policy Search (seed 001 §2.4.1), BPS's baseline
- ``frontier.py``: the risk–utility frontier (seed 000 Defs 3.9–3.10) and the heuristic H
- ``frontier_search.py``: the frontier searches' state and driver: budget, checkpoints, resume, Ctrl-C
- ``kanon.py``: the k-anonymity frontier baseline and the improvement rate IR (seed 002 §5.6)
- ``paths.py``: the default full-domain traversal: candidates in order of their quality bound, each unknown
  one settled by a bisection along a path to the top (fewer checks than best-first)
- ``rcs.py``: Random Chain Search (seed 000 §3.5.1)
- ``shs.py``: Sublattice Heuristic Search (seed 000 §3.5.2)
- ``snl.py``: Search Non-overlapping Lattices (seed 000 Appendix)

May import: ``domains``, ``errors``, ``evaluate``, ``fulldomain``, ``policies``, ``problem``, ``progress``.
Imported by: ``cli``, ``jobs``, ``report``, ``starter``.
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
