"""Exact dynamic programming: backward induction inside every sink cluster at once.

Inside a sink cluster (linked, X_g = g fixed) every exploit lowers X_r, so the cluster
is acyclic and its values follow from X_r = 0 upward — no LP needed.  The sweep runs
over r = 1, 2, … and is vectorized over all cluster sizes g ≥ r, keeping only one
slice (g, p) in memory; along with the value it carries the probability of eventual
success S (eq. 3.5 under the optimal policy), the expected number of exploits E and the
exploits planned when every attempt fails unnoticed J (Fig. 3.7).

Pruning (§3.4): the start value falls with g.  Proof sketch, with discount 1 and
N = g/prior: a policy stopping at τ ≤ g earns Σ_{a<τ} (G/N − (1 − a/N)·c_a) with
c_a ≥ 0 the step's expected cost, and every term is larger for g than for g + 1,
while the one extra step g + 1 can take is worth at most G/N′ = Σ_{a<g} G·(1/N − 1/N′);
discounting only shrinks later terms more.  So the first g whose start value is 0 is
found by probing single clusters, and every larger cluster is never entered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DeidError
from .model import detection_probability, exploit_reward, next_penalties, success_probability
from .params import AdversaryParams

MAX_CLUSTER = 16_384  # a still-profitable cluster this large means the parameters deter nobody


@dataclass(frozen=True)
class ClusterTable:
    """Per group size g = 0 … len − 1: the start value V(x_start) and, under the optimal
    policy after linking, the success probability, expected and planned exploits.
    Every g ≥ len has start value 0 (pruned: the adversary never exploits there)."""

    start_value: np.ndarray
    success: np.ndarray
    expected_exploits: np.ndarray
    planned_exploits: np.ndarray

    def _at(self, values: np.ndarray, g: np.ndarray) -> np.ndarray:
        g = np.asarray(g, dtype=np.int64)
        inside = g < values.size
        out = np.zeros(g.shape, dtype=values.dtype)
        out[inside] = values[g[inside]]
        return out

    def value(self, g: np.ndarray | int) -> np.ndarray:
        return self._at(self.start_value, np.asarray(g))

    def success_at(self, g: np.ndarray | int) -> np.ndarray:
        return self._at(self.success, np.asarray(g))

    def planned_at(self, g: np.ndarray | int) -> np.ndarray:
        return self._at(self.planned_exploits, np.asarray(g))

    def expected_at(self, g: np.ndarray | int) -> np.ndarray:
        return self._at(self.expected_exploits, np.asarray(g))


def _columns(params: AdversaryParams) -> int:
    """Penalty counts the value depends on: 0 … n_f (one column when unbounded)."""
    return 1 if params.max_penalties is None else params.max_penalties + 1


def sweep(params: AdversaryParams, largest: int) -> ClusterTable:
    """Backward induction for every cluster size 0 … ``largest`` (no pruning)."""
    cols = _columns(params)
    size = largest + 1
    v = np.zeros((size, cols))
    s_prob = np.zeros((size, cols))
    e = np.zeros((size, cols))
    j = np.zeros((size, cols))
    start = np.zeros(size)
    success = np.zeros(size)
    expected = np.zeros(size)
    planned = np.zeros(size, dtype=np.int64)
    p = np.arange(cols)
    p_next = np.zeros(cols, dtype=np.int64) if params.max_penalties is None else next_penalties(params, p)
    gamma, tie = params.discount, params.tie
    for r in range(1, size):
        g = np.arange(r, size)
        a = g - r
        s = success_probability(g, r, params.prior)[:, None]
        d = detection_probability(a, params.h0, params.h1)[:, None]
        reward = exploit_reward(params, g[:, None], r, p[None, :]) if cols > 1 else \
            exploit_reward(params, g, r, 0)[:, None]
        fail = 1.0 - s
        rows = slice(r, size)
        q = reward + gamma * fail * (d * v[rows][:, p_next] + (1 - d) * v[rows])
        go = q > tie
        new_s = s + fail * (d * s_prob[rows][:, p_next] + (1 - d) * s_prob[rows])
        new_e = 1.0 + fail * (d * e[rows][:, p_next] + (1 - d) * e[rows])
        new_j = 1.0 + j[rows]
        v[rows] = np.where(go, q, 0.0)
        s_prob[rows] = np.where(go, new_s, 0.0)
        e[rows] = np.where(go, new_e, 0.0)
        j[rows] = np.where(go, new_j, 0.0)
        start[r], success[r], expected[r], planned[r] = v[r, 0], s_prob[r, 0], e[r, 0], j[r, 0]
    return ClusterTable(start, success, expected, planned)


def start_value(params: AdversaryParams, g: int) -> float:
    """V(x_start) of one cluster in O(g · columns): the probe the threshold search uses."""
    cols = _columns(params)
    v = np.zeros(cols)
    p = np.arange(cols)
    p_next = np.zeros(cols, dtype=np.int64) if params.max_penalties is None else next_penalties(params, p)
    for a in range(g - 1, -1, -1):
        r = g - a
        s = float(success_probability(g, r, params.prior))
        d = float(detection_probability(a, params.h0, params.h1))
        reward = exploit_reward(params, g, r, p) if cols > 1 else exploit_reward(params, g, r, 0)
        q = reward + params.discount * (1 - s) * (d * v[p_next] + (1 - d) * v)
        v = np.where(q > params.tie, q, 0.0)
    return float(np.atleast_1d(v)[0])


def cluster_table(params: AdversaryParams) -> ClusterTable:
    """Clusters from g = 0 up to the first whose start value is 0 (every larger one is
    pruned).  That first g is found with single-cluster probes — exponential, then binary
    search, valid because the start value falls with g — and one sweep fills the table."""
    lo, hi = 0, 1  # start_value(lo) > 0 or lo = 0; start_value(hi) == 0 once found
    while start_value(params, hi) > 0.0:
        if hi >= MAX_CLUSTER:
            raise DeidError(
                f"the adversary still profits from groups of {MAX_CLUSTER:,} people ({params.describe()}); "
                "risk would not fall with generalization — raise costs, the penalty or detection (h0, h1)")
        lo, hi = hi, min(2 * hi, MAX_CLUSTER)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if start_value(params, mid) > 0.0:
            lo = mid
        else:
            hi = mid
    return _trim(sweep(params, hi))


def _trim(table: ClusterTable) -> ClusterTable:
    """Drop the trailing zero-valued clusters (they are implied by the pruning rule)."""
    nz = np.flatnonzero(table.start_value > 0.0)
    size = int(nz[-1]) + 2 if nz.size else 1
    return ClusterTable(table.start_value[:size], table.success[:size], table.expected_exploits[:size],
                        table.planned_exploits[:size])


def cluster_policy(params: AdversaryParams, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Values V[a, p] and exploit decisions of one cluster, by attempts a = 0 … g and
    penalties p = 0 … n_f (or 0 … g when unbounded): the per-state view the LPs give."""
    cols = (g + 1) if params.max_penalties is None else params.max_penalties + 1
    v = np.zeros((g + 1, cols))
    go = np.zeros((g + 1, cols), dtype=bool)
    p = np.arange(cols)
    p_next = np.minimum(next_penalties(params, p), cols - 1)
    for a in range(g - 1, -1, -1):
        r = g - a
        s = float(success_probability(g, r, params.prior))
        d = float(detection_probability(a, params.h0, params.h1))
        q = exploit_reward(params, g, r, p) + params.discount * (1 - s) * (d * v[a + 1, p_next] + (1 - d) * v[a + 1])
        go[a] = q > params.tie
        v[a] = np.where(go[a], q, 0.0)
    return v, go
