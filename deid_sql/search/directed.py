"""Directed Policy Search (seed 001 §2.4.1), the baseline BPS is compared with.

Start at a uniformly random policy.  If it meets the threshold, walk down (towards the
original data) through random children until one does not, and report its parent;
otherwise walk up through random parents until one meets it, and report that one.
With allowed cut points the start and every step keep only allowed boundaries.
"""

from __future__ import annotations

import numpy as np

from ..evaluate import Evaluator
from ..policies.lattice import Lattice, Policy
from .boundary import BoundarySearch, Constraint, Progress, meets, run_boundary_search


def directed_policy_search(lattice: Lattice, evaluator: Evaluator, threshold: float, iterations: int,
                           seed: int = 0, progress: Progress | None = None,
                           constraint: Constraint | None = None) -> BoundarySearch:
    """Run the directed walk ``iterations`` times; Ctrl-C returns what was found so far.  With a
    ``constraint`` a policy meets T when its risk does and the constraint holds (``boundary.meets``)."""

    def iterate(ev: Evaluator, rng: np.random.Generator, _: BoundarySearch) -> tuple[Policy, Policy]:
        ok = meets(ev, threshold, constraint)
        current = lattice.policy(rng.integers(0, 2, lattice.nbits) & lattice.allowed)
        if ok(current):
            while True:  # down: the bottom fails T or the constraint (checked), so this ends
                child = _flip(lattice, current, rng, to=1)
                if not ok(child):
                    return current, child
                current = child
        while True:  # up: the top meets T and the constraint (checked), so this ends
            parent = _flip(lattice, current, rng, to=0)
            if ok(parent):
                return parent, current
            current = parent

    return run_boundary_search("directed", iterate, lattice, evaluator, threshold, iterations, seed, progress,
                               constraint)


def _flip(lattice: Lattice, policy: Policy, rng: np.random.Generator, to: int) -> Policy:
    """A random child (``to`` = 1: keep one more boundary) or parent (``to`` = 0)."""
    bits = policy.array.astype(np.uint8)
    bits[int(rng.choice(np.flatnonzero((bits != to) & lattice.allowed)))] = to
    return lattice.policy(bits)
