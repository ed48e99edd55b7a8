"""Searches over the policy lattice; each module one algorithm, each randomized one seeded.

They see the lattice and the evaluators (metrics, cache, evaluation count) only.
"""

from .boundary import BoundaryPolicy, BoundarySearch, check_threshold
from .bps import bisecting_policy_search
from .directed import directed_policy_search
from .frontier import Frontier, Point
from .frontier_search import FrontierState
from .rcs import RandomChainSearch
from .shs import SublatticeHeuristicSearch

__all__ = ["BoundaryPolicy", "BoundarySearch", "Frontier", "FrontierState", "Point", "RandomChainSearch",
           "SublatticeHeuristicSearch", "bisecting_policy_search", "check_threshold", "directed_policy_search"]
