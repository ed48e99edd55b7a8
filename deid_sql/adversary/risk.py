"""Re-identification risk under the optimal attack (seed 002 eq. 3.1, 3.5, 3.7).

``AdversaryRisk`` turns a group's population size g into the risk of each of its
records — P_reid × loss — for the evaluators, solving the MDP once per parameter set
(known group) or once per distinct g (unknown group) with the DP, vectorized.
``thresholds`` gives the attacker's k and k′, ``baseline_risk`` the single-decision
model of eq. 3.7, and ``monotonicity_problem`` says when the risk would not fall along
the lattice (the searches' precondition).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from .dp import ClusterTable, cluster_table
from .model import TAIL, check_external, detection_probability, external_group_size, external_size
from .params import AdversaryParams

if TYPE_CHECKING:
    from ..spec.file import Spec


def risk_model(spec: Spec, population_total: float, records: float | None = None) -> AdversaryRisk:
    """The ``adversary`` risk model (``registry.RISK_MODELS``): the spec's ``[adversary]``
    parameters against a population of ``population_total`` people."""
    return AdversaryRisk(spec.feature("adversary"), population_total)


class AdversaryRisk:
    """Record risk as a function of the population size g of the record's group (a
    ``RecordRisk`` for the evaluators)."""

    name = "adversary"

    def __init__(self, params: AdversaryParams, population_total: float) -> None:
        self.params = params
        self.population_total = float(population_total)
        self.n = external_size(params, population_total)
        self.table: ClusterTable = cluster_table(params)
        # V of the post-access state per external size k < len(table); 0 beyond (pruned)
        self.post = np.maximum(0.0, -params.link_cost + params.discount * self.table.start_value)
        link = -params.link_cost + params.discount * self.table.start_value > params.tie
        self.after_access = np.where(link, self.table.success, 0.0)  # P_reid once D_e is held
        self._known_g = np.zeros(0)
        self._known_access = np.zeros(0, dtype=bool)

    # -- pieces ---------------------------------------------------------------------------
    def external_sizes(self, g: np.ndarray) -> np.ndarray:
        return external_group_size(self.params, g)

    def _after(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros(x.shape)
        inside = x < self.after_access.size
        out[inside] = self.after_access[x[inside]]
        return out

    def _post(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros(x.shape)
        inside = x < self.post.size
        out[inside] = self.post[x[inside]]
        return out

    def accesses(self, g: np.ndarray) -> np.ndarray:
        """Does the adversary of a record in a group of g people access D_e at all?"""
        g = np.asarray(g, dtype=np.float64)
        if self.params.scenario == "known":
            q = -self.params.access_cost + self.params.discount * self._post(self.external_sizes(g))
            return q > self.params.tie
        return self._cached_unknown(g)

    def _cached_unknown(self, g: np.ndarray) -> np.ndarray:
        """Unknown group: the decision per distinct g, remembered in a sorted cache (a search
        meets the same group sizes again and again).  It is not monotone in g: a tiny group
        is probably empty in D_e (k = 0 is worth nothing), so access can pay only for larger g."""
        flat = g.ravel()
        where = np.searchsorted(self._known_g, flat)
        hit = where < self._known_g.size
        hit[hit] = self._known_g[where[hit]] == flat[hit]
        if not hit.all():
            new = np.unique(flat[~hit])
            merged = np.concatenate([self._known_g, new])
            order = np.argsort(merged, kind="stable")
            self._known_g = merged[order]
            self._known_access = np.concatenate([self._known_access, self._unknown_access(new)])[order]
            where = np.searchsorted(self._known_g, flat)
        return self._known_access[where].reshape(g.shape)

    def _unknown_access(self, g: np.ndarray) -> np.ndarray:
        """Eq. 3.6 beliefs, cut at the 1e-12 tails and renormalized like ``Belief.binomial``:
        access iff −C_d + γ Σ_k B(k) V(post k) > tie, where V(post k) = 0 for pruned k."""
        p = np.clip(g / self.population_total, 0.0, 1.0)
        lo = np.maximum(0, stats.binom.ppf(TAIL, self.n, p) - 1)
        hi = np.minimum(self.n, stats.binom.isf(TAIL, self.n, p) + 1)
        k = np.arange(self.post.size)[None, :]
        inside = (k >= lo[:, None]) & (k <= hi[:, None])
        pmf = np.where(inside, stats.binom.pmf(k, self.n, p[:, None]), 0.0)
        mass = stats.binom.cdf(hi, self.n, p) - stats.binom.cdf(lo - 1, self.n, p)
        expected = (pmf @ self.post) / mass
        return -self.params.access_cost + self.params.discount * expected > self.params.tie

    # -- API ------------------------------------------------------------------------------
    def p_reid(self, g: np.ndarray) -> np.ndarray:
        """P_reid of a record whose generalized group has g people in the population."""
        g = np.asarray(g, dtype=np.float64)
        external = self.external_sizes(g)
        check_external(self.params, external, g)
        return np.where(self.accesses(g), self._after(external), 0.0)

    def record_risk(self, g: np.ndarray) -> np.ndarray:
        """risk = P_reid × loss (eq. 3.1)."""
        return self.p_reid(g) * self.params.loss

    def __call__(self, g: np.ndarray) -> np.ndarray:
        return self.record_risk(g)

    def monotonicity_problem(self) -> str | None:
        """None when record risk never rises with the group's population size g; else a
        one-line reason naming the parameters (searches that prune by monotone risk refuse
        to run then).  Known group: checked over every external size X up to the pruning
        limit.  Unknown group: over every g up to where the belief puts no mass below it."""
        if self.params.scenario == "known":
            x = np.arange(1, self.after_access.size + 2)
            access = -self.params.access_cost + self.params.discount * self._post(x) > self.params.tie
            r = np.where(access, self._after(x), 0.0)
            rises = np.flatnonzero(np.diff(r) > 1e-12)
            if rises.size:
                i = int(rises[0])
                return (f"adversary risk rises from {r[i]:.4g} at {x[i]} external candidates to {r[i + 1]:.4g} "
                        f"at {x[i + 1]} with {self.params.describe()}")
            return None
        k = self.post.size
        mean_limit = k + 10.0 * np.sqrt(k) + 50.0  # beyond this mean the belief has no mass below k
        last = int(min(self.population_total, np.ceil(mean_limit * self.population_total / self.n)))
        previous, prev_g = np.inf, 0
        for lo in range(1, last + 1, 50_000):
            g = np.arange(lo, min(last, lo + 49_999) + 1, dtype=np.float64)
            access = self._unknown_access(g)
            r = np.where(access, self._after(self.external_sizes(g)), 0.0)
            joined = np.concatenate([[previous], r])
            rises = np.flatnonzero(np.diff(joined) > 1e-12)
            if rises.size:
                i = int(rises[0])
                g_lo = prev_g if i == 0 else int(g[i - 1])
                return (f"adversary risk rises from {joined[i]:.4g} for groups of {g_lo} people to "
                        f"{joined[i + 1]:.4g} for {int(g[i])} in the unknown-group scenario (external dataset of "
                        f"{self.n:,}: a small group is likely absent from it) with {self.params.describe()}")
            previous, prev_g = float(r[-1]), int(g[-1])
        return None


@dataclass(frozen=True)
class Thresholds:
    """The known-group attacker's behaviour by external group size X (Fig. 3.5–3.7)."""

    k: int  # smallest X whose candidates are not all exploited
    k_prime: int  # smallest X not attacked at all (from x0, paying C_d)
    k_prime_sunk: int  # the same once D_e is held (C_d sunk; §3.6)
    planned: np.ndarray  # exploits planned per X = 1 … k′_sunk (every attempt failing unnoticed)
    p_reid: np.ndarray  # P_reid per X = 1 … k′_sunk


def thresholds(params: AdversaryParams) -> Thresholds:
    table = cluster_table(params)
    x = np.arange(1, table.start_value.size + 2)
    start = table.value(x)
    post = np.maximum(0.0, -params.link_cost + params.discount * start)
    link = -params.link_cost + params.discount * start > params.tie
    access = -params.access_cost + params.discount * post > params.tie
    planned = np.where(link, table.planned_at(x), 0)
    full = access & link & (planned == x)
    k = int(x[np.argmax(~full)]) if (~full).any() else int(x[-1]) + 1
    k_prime = int(x[np.argmax(~(access & link))])
    k_sunk = int(x[np.argmax(~link)])
    upto = x < k_sunk
    return Thresholds(k, k_prime, k_sunk, planned[upto], np.where(link, table.success_at(x), 0.0)[upto])


def baseline_risk(params: AdversaryParams, external: np.ndarray) -> np.ndarray:
    """Eq. 3.7: one decision, one random candidate: prior/X when the payoff is positive."""
    x = np.asarray(external, dtype=np.float64)
    p_det = float(detection_probability(0, params.h0, params.h1))
    payoff = (params.gain * params.prior / x - p_det * params.penalty - params.access_cost
              - params.link_cost - params.exploit_cost)
    return np.where(payoff > 0, params.prior / x, 0.0) * params.loss
