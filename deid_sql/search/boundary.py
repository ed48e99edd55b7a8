"""Boundary policies (seed 001 Def. 2.3) and the result of a search for them.

A policy α is a boundary policy for threshold T when risk(α) ≤ T and some descendant
(a more specific policy) has risk > T.  Among results, α *dominates* β (Def. 2.1) when
α is a descendant of β and meets T: β then generalizes more than it needs to.

With a ``Constraint`` (the spec's attribute criteria, ``release.constraint``) "meets T" becomes
"risk ≤ T and the constraint holds": both are monotone under generalization (Thm 2.1, METHODS
decision 15), so their conjunction is, the bisection stays sound, and every boundary policy meets
the criteria while its witness fails the threshold or a criterion.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..errors import DeidError
from ..evaluate import Evaluator, Metrics
from ..policies.lattice import Lattice, Policy

Progress = Callable[[int], None]


class Constraint(Protocol):
    """A monotone condition on policies besides the risk (a coarser policy never fails where a finer
    one holds): ``release.constraint.AttributeConstraint``."""

    def feasible(self, policy: Policy) -> bool: ...

    def why(self, policy: Policy) -> str: ...

    def describe(self) -> str: ...


# one iteration of a search: (its own evaluator, rng, results so far) -> (boundary policy, witness)
Iteration = Callable[[Evaluator, np.random.Generator, "BoundarySearch"], tuple[Policy, Policy]]


@dataclass(frozen=True)
class BoundaryPolicy:
    """One boundary policy: its metrics, the iteration that first found it, and the more
    specific neighbour whose risk exceeds the threshold (the witness of Def. 2.3)."""

    policy: Policy
    metrics: Metrics
    found_at: int
    witness: Policy


@dataclass
class BoundarySearch:
    """What a boundary search found, in discovery order (each policy once)."""

    method: str
    threshold: float
    seed: int
    found: list[BoundaryPolicy] = field(default_factory=list)
    iterations: int = 0
    evaluations: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    constraint: str | None = None  # the criteria every found policy meets besides T, in words

    def add(self, policy: Policy, metrics: Metrics, witness: Policy) -> None:
        if all(b.policy != policy for b in self.found):
            self.found.append(BoundaryPolicy(policy, metrics, self.iterations, witness))

    def dominated(self) -> list[bool]:
        """Per found policy: is another found policy a descendant of it (Def. 2.1)?"""
        lattice = self.found[0].policy.lattice if self.found else None
        return [any(lattice.precedes(b.policy, other.policy) for other in self.found)  # type: ignore[union-attr]
                for b in self.found]

    @property
    def non_dominated(self) -> int:
        return sum(1 for d in self.dominated() if not d)

    @property
    def evaluations_per_boundary(self) -> float:
        return self.evaluations / self.iterations if self.iterations else 0.0

    @property
    def seconds_per_boundary(self) -> float:
        return self.seconds / self.iterations if self.iterations else 0.0


def meets(evaluator: Evaluator, threshold: float, constraint: Constraint | None) -> Callable[[Policy], bool]:
    """The bisection's predicate: risk ≤ T, and the constraint when there is one (checked second:
    the risk is the cheaper figure and fails more often)."""
    if constraint is None:
        return lambda policy: evaluator.evaluate(policy).risk <= threshold
    return lambda policy: evaluator.evaluate(policy).risk <= threshold and constraint.feasible(policy)


def check_threshold(lattice: Lattice, evaluator: Evaluator, threshold: float,
                    constraint: Constraint | None = None) -> None:
    """Refuse thresholds for which no boundary policy can exist."""
    if not 0 < threshold <= 1:
        raise DeidError(f"threshold {threshold!r} is outside (0, 1]; risk is normalized so the original data has 1")
    top = evaluator.evaluate(lattice.top()).risk
    if top > threshold:
        raise DeidError(
            f"threshold {threshold:.6g} is below the risk of the most general policy ({top:.6g}); no policy can "
            f"meet it: raise the threshold"
        )
    if constraint is not None and not constraint.feasible(lattice.top()):
        raise DeidError(
            f"the most general policy fails the attribute criteria of [release] ({constraint.why(lattice.top())}), "
            f"and no policy generalizes more: no policy can meet them; loosen the criteria"
        )
    bottom = evaluator.evaluate(lattice.bottom()).risk
    if bottom <= threshold and (constraint is None or constraint.feasible(lattice.bottom())):
        what = "the finest policy the spec's allowed cuts permit" if lattice.constrained else "the original data"
        raise DeidError(
            f"{what} already meets threshold {threshold:.6g} (its risk is {bottom:.6g})"
            + (" and the attribute criteria" if constraint is not None else "")
            + ", so there is no boundary policy: lower the threshold"
        )


def run_boundary_search(method: str, iterate: Iteration, lattice: Lattice, evaluator: Evaluator, threshold: float,
                        iterations: int, seed: int, progress: Progress | None,
                        constraint: Constraint | None = None) -> BoundarySearch:
    """The loop both searches share: check T (and the constraint), count evaluations on a fork of
    the evaluator, seed one generator, record each boundary policy once, and stop cleanly on Ctrl-C."""
    check_threshold(lattice, evaluator, threshold, constraint)
    evaluator = evaluator.fork()
    rng = np.random.default_rng(seed)
    result = BoundarySearch(method, threshold, seed, constraint=constraint.describe() if constraint else None)
    start = time.perf_counter()
    try:
        for _ in range(iterations):
            boundary, witness = iterate(evaluator, rng, result)
            result.iterations += 1
            result.add(boundary, evaluator.evaluate(boundary), witness)
            result.evaluations = evaluator.evaluations
            if progress:
                progress(1)
    except KeyboardInterrupt:
        result.interrupted = True
    result.evaluations = evaluator.evaluations
    result.seconds = time.perf_counter() - start
    return result
