"""Searches over the policy lattice; each module one algorithm, each randomized one seeded.

They see the lattice and an ``Evaluator`` (metrics, cache, evaluation count) only.
"""

from .boundary import BoundaryPolicy, BoundarySearch, check_threshold
from .bps import bisecting_policy_search
from .directed import directed_policy_search

__all__ = ["BoundaryPolicy", "BoundarySearch", "bisecting_policy_search", "check_threshold",
           "directed_policy_search"]
