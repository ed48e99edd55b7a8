"""The frontier searches' shared state and driver: budget, checkpoints, resume, Ctrl-C.

Both searches (RCS, SHS) spend a budget of evaluated policies (seed 000: chains count
their length, an unsearched sublattice counts its two corners).  Everything needed to go
on later — frontier, searched points, pruned sublattices, the generator's state — lives
in ``FrontierState``, which round-trips through JSON, so ``--resume`` continues a run
exactly where it stopped and ends where an uninterrupted run would have.

With a constraint (the spec's attribute criteria, ``release.constraint``) a policy that fails it
is searched and counted but never offered to the frontier: the frontier holds the feasible
policies' non-dominated points, and ``infeasible`` names each failing policy's failed criteria.
The constraint is monotone (METHODS decision 15), so a chain is feasible on a prefix from its
general end, found by bisection (a policy after it is charged the criteria the first infeasible
one fails, which it fails too), and SHS prunes a sublattice whose general corner fails.

A policy is counted once: one evaluated before (RCS's top and bottom end every chain, SHS's
corners can lie on earlier chains) is neither charged to the budget again nor offered to
the frontier again, so no policy stands on a frontier twice.  A search that finds nothing
new — the lattice is exhausted, or ``STALL_STEPS`` steps in a row met only known policies —
ends there with a smaller budget, as SHS does when every region is pruned.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DeidError
from ..evaluate import Evaluator
from ..evaluate.chain import ChainEvaluator
from ..policies.lattice import Chain, Lattice, Policy
from .boundary import Constraint
from .frontier import Frontier, Point

CHECKPOINT_EVERY = 100  # evaluated policies between area checkpoints (seed 000 Fig. 5)
STALL_STEPS = 200  # steps in a row without a new policy after which a search is taken as exhausted


@dataclass
class FrontierState:
    """A frontier search in progress (or done)."""

    method: str
    budget: int
    seed: int
    threshold: float
    frontier: Frontier = field(default_factory=Frontier)
    searched: list[Point] = field(default_factory=list)  # every evaluated policy, in order
    pruned: list[tuple[str, str]] = field(default_factory=list)  # SHS: (α, β) texts
    checkpoints: list[tuple[int, float]] = field(default_factory=list)  # (evaluations, area)
    h_trials: list[tuple[float, float]] = field(default_factory=list)  # SHS: (H, share of chain that updated f)
    rng_state: dict[str, Any] | None = None
    sublattices: int = 0
    chains: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    criteria: str | None = None  # the constraint in words (None: the search has none)
    infeasible: dict[str, list[str]] = field(default_factory=dict)  # policy key -> the criteria it fails
    seen: set[str] = field(default_factory=set, init=False, repr=False, compare=False)  # keys of ``searched``

    def __post_init__(self) -> None:
        self.seen.update(p.key for p in self.searched)

    @property
    def evaluations(self) -> int:
        return len(self.searched)

    @property
    def done(self) -> bool:
        return self.evaluations >= self.budget

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method, "budget": self.budget, "seed": self.seed, "threshold": self.threshold,
            "frontier": [[p.risk, p.loss, p.key] for p in self.frontier],
            "searched": [[p.risk, p.loss, p.key] for p in self.searched],
            "pruned": self.pruned, "checkpoints": self.checkpoints, "h_trials": self.h_trials,
            "rng_state": self.rng_state, "sublattices": self.sublattices, "chains": self.chains,
            "seconds": self.seconds, "criteria": self.criteria, "infeasible": self.infeasible,
        }

    def why_infeasible(self) -> dict[str, int]:
        """How many searched policies fail each criterion (a policy may fail several)."""
        out: dict[str, int] = {}
        for failed in self.infeasible.values():
            for c in failed:
                out[c] = out.get(c, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FrontierState:
        state = cls(data["method"], int(data["budget"]), int(data["seed"]), float(data["threshold"]))
        state.frontier = Frontier([Point(r, u, k) for r, u, k in data["frontier"]])
        state.searched = [Point(r, u, k) for r, u, k in data["searched"]]
        state.seen = {p.key for p in state.searched}
        state.pruned = [tuple(p) for p in data["pruned"]]  # type: ignore[misc]
        state.checkpoints = [tuple(c) for c in data["checkpoints"]]  # type: ignore[misc]
        state.h_trials = [tuple(h) for h in data["h_trials"]]  # type: ignore[misc]
        state.rng_state = data["rng_state"]
        state.sublattices, state.chains = int(data["sublattices"]), int(data["chains"])
        state.seconds = float(data["seconds"])
        state.criteria = data.get("criteria")  # checkpoints before issue 40 have neither
        state.infeasible = {str(k): list(v) for k, v in data.get("infeasible", {}).items()}
        return state


class FrontierSearcher:
    """What both searches share: evaluating chains and single policies into the state."""

    method = ""

    def __init__(self, lattice: Lattice, evaluator: Evaluator, chains: ChainEvaluator, state: FrontierState,
                 rng: np.random.Generator, constraint: Constraint | None = None) -> None:
        self.lattice, self.evaluator, self.chain_evaluator = lattice, evaluator, chains
        self.state, self.rng, self.constraint = state, rng, constraint

    def failures(self, policy: Policy) -> tuple[str, ...]:
        """The criteria ``policy`` fails (none without a constraint)."""
        return self.constraint.failures(policy) if self.constraint is not None else ()

    def record(self, policy_text: str, risk: float, loss: float, failures: tuple[str, ...] = ()) -> bool:
        """Count one evaluated policy, update the frontier; True if it entered the frontier.
        A policy evaluated before is ignored (False): it was counted and offered already; one that
        fails a criterion (``failures``) is counted, kept in ``infeasible``, never offered."""
        if policy_text in self.state.seen:
            return False
        point = Point(float(risk), float(loss), policy_text)
        self.state.searched.append(point)
        self.state.seen.add(policy_text)
        if failures:
            self.state.infeasible[policy_text] = list(failures)
        updated = False if failures else self.state.frontier.update(point)
        if self.state.evaluations % CHECKPOINT_EVERY == 0:
            self.state.checkpoints.append((self.state.evaluations, self.state.frontier.area()))
        return updated

    def evaluate(self, policy: Policy) -> tuple[float, float, bool]:
        m = self.evaluator.evaluate(policy.recoding())
        return m.risk, m.loss, self.record(policy.text(), m.risk, m.loss, self.failures(policy))

    def search_chain(self, chain: Chain) -> tuple[int, int]:
        """Evaluate a chain (as far as the budget allows); returns (new policies recorded, how
        many of them entered the frontier).  Policies evaluated before cost nothing."""
        risks, losses = self.chain_evaluator.evaluate_chain(chain)
        feasible, failed = (len(chain), ()) if self.constraint is None else self.constraint.feasible_prefix(chain)
        recorded = updated = 0
        for i, (policy, r, u) in enumerate(zip(chain.policies(), risks, losses)):
            if self.state.done:
                break
            text = policy.text()
            if text in self.state.seen:
                continue
            recorded += 1
            updated += self.record(text, r, u, () if i < feasible else failed)
        self.state.chains += 1
        return recorded, updated

    def initialize(self) -> None:
        """initializeFrontier (left open by seed 000): the top and the bottom, the two
        policies every frontier contains one end of; each counts as one evaluation."""
        for policy in (self.lattice.top(), self.lattice.bottom()):
            self.evaluate(policy)

    def step(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


def run(searcher: FrontierSearcher, progress: Callable[[int], None] | None = None,
        checkpoint: Callable[[FrontierState], None] | None = None, checkpoint_seconds: float = 5.0) -> FrontierState:
    """Step until the budget is spent; Ctrl-C stops between steps with the state intact."""
    state = searcher.state
    if state.budget < 2:
        raise DeidError(f"budget {state.budget} is below 2: the frontier starts from the top and the bottom")
    start, last_save = time.perf_counter(), time.perf_counter()
    seen, stalled, policies = state.evaluations, 0, 2 ** searcher.lattice.free_bits
    try:
        if state.evaluations == 0:
            searcher.initialize()
        while not state.done:
            snapshot = _snapshot(state, searcher.rng)
            try:
                searcher.step()
            except KeyboardInterrupt:
                _restore(state, searcher.rng, snapshot)  # a step is all or nothing: resume redoes it
                raise
            stalled = 0 if state.evaluations > snapshot[0] else stalled + 1
            if state.evaluations >= policies or stalled >= STALL_STEPS:
                state.budget = min(state.budget, state.evaluations)  # nothing new is left to find
            state.rng_state = searcher.rng.bit_generator.state
            if progress:
                progress(state.evaluations - seen)
                seen = state.evaluations
            if checkpoint and time.perf_counter() - last_save > checkpoint_seconds:
                state.seconds += time.perf_counter() - start
                start = last_save = time.perf_counter()
                checkpoint(state)
    except KeyboardInterrupt:
        state.interrupted = True
    state.seconds += time.perf_counter() - start
    state.rng_state = searcher.rng.bit_generator.state
    return state


def _snapshot(state: FrontierState, rng: np.random.Generator) -> tuple[Any, ...]:
    return (len(state.searched), list(state.frontier.points), len(state.pruned), len(state.checkpoints),
            len(state.h_trials), state.sublattices, state.chains, rng.bit_generator.state)


def _restore(state: FrontierState, rng: np.random.Generator, snap: tuple[Any, ...]) -> None:
    n, points, pruned, checkpoints, trials, sublattices, chains, rng_state = snap
    state.seen.difference_update(p.key for p in state.searched[n:])
    del state.searched[n:], state.pruned[pruned:], state.checkpoints[checkpoints:], state.h_trials[trials:]
    state.frontier.points = points
    state.sublattices, state.chains = sublattices, chains
    rng.bit_generator.state = rng_state
