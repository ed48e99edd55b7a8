"""Bisecting Policy Search (seed 001 §2.4.2, Algorithm 1).

Each iteration bisects the lattice between ``max`` (top, risk ≤ T) and ``min``
(bottom, risk > T): the halfway point replaces ``max`` when it meets T and ``min``
otherwise, until the two are adjacent; ``max`` is then a boundary policy and ``min``
its witness.  Monotone risk (Thm 2.1) makes every bisection step sound.

The halfway point generalizes ⌊d/2⌋ of the d boundaries on which ``min`` and ``max``
disagree.  Which ones is drawn with probability ∝ w(b) = w_sizeOfField(b) +
w_previousSolutions(b), where w_sizeOfField(b) = |domain of b's QI| − 1 and
w_previousSolutions(b) = 1 + the number of earlier solutions that keep boundary b.  With allowed cut
points (``domains/cuts.py``) only allowed boundaries differ between ``min`` and ``max``, so only they are drawn,
and |domain of b's QI| − 1 becomes the number of the QI's allowed boundaries.
Reading of the paper: a *chosen* bit is one that is generalized, so small domains
(sex: weight 1) are generalized rarely, and boundaries kept by many earlier solutions
are generalized more often — both steer later iterations away from earlier answers.
"""

from __future__ import annotations

import numpy as np

from ..evaluate import Evaluator
from ..policies.lattice import Lattice, Policy
from .boundary import BoundarySearch, Constraint, Progress, meets, run_boundary_search


def field_weights(lattice: Lattice) -> np.ndarray:
    """w_sizeOfField per bit: how many boundaries its QI may keep (the size of its domain minus one,
    or with allowed cut points the number of allowed ones: the choices the field really offers)."""
    sizes = np.array([np.count_nonzero(lattice.qi_allowed(i)) for i in range(len(lattice.domains))],
                     dtype=np.float64)
    return sizes[lattice.qi_of_bit]


def bisecting_policy_search(lattice: Lattice, evaluator: Evaluator, threshold: float, iterations: int,
                            seed: int = 0, progress: Progress | None = None,
                            constraint: Constraint | None = None) -> BoundarySearch:
    """Run BPS; Ctrl-C stops it and returns what was found so far (``interrupted``).  With a
    ``constraint`` a policy meets T when its risk does and the constraint holds (``boundary.meets``)."""
    base = field_weights(lattice) + 1.0

    def iterate(ev: Evaluator, rng: np.random.Generator, found: BoundarySearch) -> tuple[Policy, Policy]:
        ok = meets(ev, threshold, constraint)
        kept = np.zeros(lattice.nbits)  # Σ_s s[b] over the distinct solutions so far
        for b in found.found:
            kept += b.policy.array
        upper, lower = lattice.top(), lattice.bottom()  # max, min in the paper
        while lattice.levels_between(upper, lower) >= 2:
            current = lattice.halfway(upper, lower, rng, base + kept, generalize=True)
            if ok(current):
                upper = current
            else:
                lower = current
        return upper, lower

    return run_boundary_search("bps", iterate, lattice, evaluator, threshold, iterations, seed, progress, constraint)
