"""Sublattice Heuristic Search (seed 000 §3.5.2, Algorithm 2, with SNL of the Appendix).

Each step draws a random sublattice(α, β) that avoids every pruned one, evaluates its two
corners (their risks and losses bound every policy inside, METHODS decision 5) and computes
H, the share of the bounding rectangle below the frontier's stair-step.  If H > TH a
random maximal chain of the sublattice is searched (costing its policies not evaluated
before); otherwise the step costs its new corners (at most 2), and a sublattice with
H = 0 (wholly dominated) is pruned for good.

``generateRandomSublattice`` is left open by the paper; here: α and β are two random
levels of a uniformly random maximal chain of the lattice (so every comparable pair can
come up), then SNL adds literals so it overlaps no pruned sublattice — shrinking it — and
when that fails, SNL alone builds one from the pruned clauses (α = the forced 1s, β = all
but the forced 0s).  With allowed cut points the chain orders only the allowed boundaries and
SNL starts with every disallowed one forced to 0, so α and β (and the chain) stay publishable.
The corners also update the frontier: they were evaluated.  With a constraint (the attribute
criteria, monotone) a sublattice whose general corner α fails it holds no feasible policy and is
pruned at once; a failing corner is recorded but never offered to the frontier.
"""

from __future__ import annotations

import numpy as np

from ..policies.lattice import Policy
from .frontier_search import FrontierSearcher
from .snl import Clause, snl

ATTEMPTS = 20


class SublatticeHeuristicSearch(FrontierSearcher):
    method = "shs"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.clauses = []
        self._pruned_alpha = np.zeros((0, self.lattice.nbits), dtype=bool)
        self._pruned_beta = np.zeros((0, self.lattice.nbits), dtype=bool)
        for a, b in self.state.pruned:
            self._prune(self.lattice.parse(a), self.lattice.parse(b))

    def _prune(self, upper: Policy, lower: Policy) -> None:
        # a disallowed boundary is 0 everywhere, so "keep it" never escapes a pruned sublattice
        self.clauses.append(Clause.avoiding(upper.array, lower.array | ~self.lattice.allowed))
        self._pruned_alpha = np.vstack((self._pruned_alpha, upper.array))
        self._pruned_beta = np.vstack((self._pruned_beta, lower.array))

    def _overlaps_pruned(self, alpha: np.ndarray, beta: np.ndarray) -> bool:
        """sublattice(α, β) meets pruned sublattice(α_P, β_P) iff α ∨ α_P ≼ β ∧ β_P."""
        if not len(self._pruned_alpha):
            return False
        escape = (alpha | self._pruned_alpha) & ~(beta & self._pruned_beta)
        return bool((~escape.any(axis=1)).any())

    def random_sublattice(self) -> tuple[Policy, Policy] | None:
        """A random sublattice(α, β), α ≺ β, disjoint from every pruned one (None: none left)."""
        lat = self.lattice
        never = ~lat.allowed  # disallowed boundaries: forced to 0 in every sublattice
        for _ in range(ATTEMPTS):
            order = self.rng.permutation(lat.free_positions())  # a random maximal chain of the allowed bits
            i, j = sorted(self.rng.choice(lat.free_bits + 1, size=2, replace=False))
            alpha = np.zeros(lat.nbits, dtype=bool)
            alpha[order[:i]] = True  # α keeps the first i boundaries of the chain, β the first j
            beta = np.zeros(lat.nbits, dtype=bool)
            beta[order[:j]] = True
            forced_one, forced_zero = alpha, ~beta  # the literals every policy of the sublattice has
            if not self._overlaps_pruned(alpha, beta):
                return lat.policy(alpha), lat.policy(beta)
            found = snl(self.clauses, forced_one, forced_zero, self.rng)
            if found is not None:  # SNL never forces a bit both ways, so α ≼ β still holds
                return lat.policy(found[0]), lat.policy(~found[1])
        found = snl(self.clauses, np.zeros(lat.nbits, bool), never.copy(), self.rng)
        return None if found is None else (lat.policy(found[0]), lat.policy(~found[1]))

    def step(self) -> None:
        state = self.state
        pair = self.random_sublattice()
        if pair is None:  # every region is pruned: nothing left can update the frontier
            state.budget = state.evaluations
            return
        upper, lower = pair
        state.sublattices += 1
        a, b = self.evaluator.evaluate(upper.recoding()), self.evaluator.evaluate(lower.recoding())
        failed = self.failures(upper)
        if failed:  # α, the general corner, fails a (monotone) criterion: so does every policy of the sublattice
            for policy, m, f in ((upper, a, failed), (lower, b, self.failures(lower))):
                if not state.done:
                    self.record(policy.text(), m.risk, m.loss, f)
            state.pruned.append((upper.text(), lower.text()))
            self._prune(upper, lower)
            return
        h = state.frontier.h(a.risk, a.loss, b.risk, b.loss)
        if h > state.threshold and self.lattice.levels_between(upper, lower) > 1:
            chain = self.lattice.random_chain(upper, lower, self.rng)  # its ends are α and β
            recorded, updated = self.search_chain(chain)
            if recorded:  # the share of the new policies the budget let us search
                state.h_trials.append((h, updated / recorded))
            return
        for policy, m in ((upper, a), (lower, b)):  # an unsearched sublattice costs its 2 corners (new ones)
            if not state.done:
                self.record(policy.text(), m.risk, m.loss, self.failures(policy))
        if h == 0:
            state.pruned.append((upper.text(), lower.text()))
            self._prune(upper, lower)
