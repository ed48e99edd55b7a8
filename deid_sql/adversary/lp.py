"""The LP solvers of seed 002 §3.4: the plain LP over the whole state space, and the
Two-Level LP (sink clusters solved once each, cached, pruned by the falling start value).

Both solve the standard MDP program — minimize Σ_x V(x) subject to
V(x) ≥ R(x, a) + γ Σ_x' P(x' | x, a) V(x') for every offered action, V ≥ 0 (terminate is
always offered and worth 0) — with HiGHS through ``scipy.optimize.linprog``.  The
optimal actions are read back from the values (exploit only when it beats stopping by
more than the tie tolerance, as in the DP), and P_reid comes from eq. 3.5 on the chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, sparse

from ..errors import DeidError
from .model import Belief
from .params import AdversaryParams
from .space import ClusterSpace, ExploitRows

_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10, "presolve": True}


class SolverError(DeidError):
    """HiGHS did not return an optimum (infeasible, unbounded or a numerical failure)."""


def solve_program(n: int, rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]], rhs: np.ndarray,
                  params: AdversaryParams, what: str) -> np.ndarray:
    """min Σ V s.t. each row (i, j, coef): Σ coef·V[j] ≤ rhs[i]; V ≥ 0."""
    if n == 0:
        return np.zeros(0)
    ri = np.concatenate([r[0] for r in rows]) if rows else np.zeros(0, np.int64)
    ci = np.concatenate([r[1] for r in rows]) if rows else np.zeros(0, np.int64)
    vals = np.concatenate([r[2] for r in rows]) if rows else np.zeros(0)
    a_ub = sparse.csr_matrix((vals, (ri, ci)), shape=(rhs.size, n)) if rhs.size else None
    res = optimize.linprog(np.ones(n), A_ub=a_ub, b_ub=rhs if rhs.size else None, bounds=(0, None),
                           method="highs", options=_OPTIONS)
    if res.status != 0 or res.x is None:
        raise SolverError(f"HiGHS could not solve the {what} ({res.message.strip()}) for the {params.scenario}-group "
                          f"scenario with {params.describe()}; check the parameters")
    return np.asarray(res.x)


def _exploit_constraints(rows: ExploitRows, base: int, row0: int, gamma: float
                         ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """−V(x) + γ Σ P V(x') ≤ −R(x) for every exploit row, shifted by ``base`` / ``row0``."""
    k = rows.state.size
    ids = row0 + np.arange(k)
    i = np.concatenate([ids, np.repeat(ids, 4)])
    j = np.concatenate([base + rows.state, base + rows.successors.ravel()])
    v = np.concatenate([-np.ones(k), gamma * rows.probabilities.ravel()])
    return (i, j, v), -rows.reward


def exploit_decisions(rows: ExploitRows, values: np.ndarray, params: AdversaryParams) -> np.ndarray:
    """Per exploit row: does exploiting beat stopping (by more than the tie tolerance)?"""
    q = rows.reward + params.discount * (rows.probabilities * values[rows.successors]).sum(axis=1)
    return q > params.tie


def chain_success(space: ClusterSpace, rows: ExploitRows, exploit: np.ndarray) -> tuple[float, float]:
    """Eq. 3.5 inside a cluster: Σ_t Σ_{x ∈ x_suc} M^t[x_start, x] under the policy, and the
    expected number of exploits.  Non-exploiting states move to the absorbing end."""
    n = space.size
    act = rows.state[exploit]
    succ = rows.successors[exploit].ravel()
    prob = rows.probabilities[exploit].ravel()
    m = sparse.csr_matrix((prob, (np.repeat(act, 4), succ)), shape=(n, n))
    mt = m.T.tocsr()
    dist = np.zeros(n)
    dist[0] = 1.0  # x_start
    is_success = np.zeros(n, dtype=bool)
    is_success[space.success_states()] = True
    acting = np.zeros(n, dtype=bool)
    acting[act] = True
    p_reid = exploits = 0.0
    for _ in range(space.g + 1):  # t_max: every path ends within g exploits
        exploits += float(dist[acting].sum())
        dist = mt @ dist
        p_reid += float(dist[is_success].sum())
        if not dist.any():
            break
    return p_reid, exploits


@dataclass
class ClusterSolution:
    """One sink cluster solved by LP: values per state, exploit decisions per row."""

    space: ClusterSpace
    rows: ExploitRows
    values: np.ndarray
    exploit: np.ndarray

    @property
    def start_value(self) -> float:
        return float(self.values[0])

    def success(self) -> tuple[float, float]:
        return chain_success(self.space, self.rows, self.exploit)


def solve_cluster(params: AdversaryParams, g: int) -> ClusterSolution:
    """The bottom level: one LP over the states of the cluster with X_g = g."""
    space = ClusterSpace(params, g)
    rows = space.exploit_rows()
    block, rhs = _exploit_constraints(rows, 0, 0, params.discount)
    values = solve_program(space.size, [block], rhs, params, f"sink-cluster LP for X_g = {g}")
    return ClusterSolution(space, rows, values, exploit_decisions(rows, values, params))


@dataclass(frozen=True)
class TopLevel:
    """x0 and the post-access states [F, F, 0, F, T, F, g, g] of one belief."""

    x0_value: float
    access: bool
    sizes: np.ndarray
    post_values: np.ndarray
    link: np.ndarray


def solve_top(params: AdversaryParams, belief: Belief, start_values: np.ndarray, sizes: np.ndarray) -> TopLevel:
    """The top-level LP: variables V(x0), V(post(g)); the cluster starts enter as constants.
    ``sizes`` ⊇ the belief's support (the actual group size may lie outside it)."""
    w = sizes.size
    gamma = params.discount
    where = np.searchsorted(sizes, belief.sizes)
    # row 0: −V0 + γ Σ B(g) V(post g) ≤ C_d ; rows 1..w: −V(post g) ≤ C_l − γ V(start g)
    i = np.concatenate([[0], np.zeros(belief.sizes.size, np.int64), 1 + np.arange(w)])
    j = np.concatenate([[0], 1 + where, 1 + np.arange(w)])
    v = np.concatenate([[-1.0], gamma * belief.probabilities, -np.ones(w)])
    rhs = np.concatenate([[params.access_cost], params.link_cost - gamma * start_values])
    x = solve_program(w + 1, [(i, j, v)], rhs, params, "top-level LP")
    post = x[1:]
    access = -params.access_cost + gamma * float(belief.probabilities @ post[where]) > params.tie
    link = -params.link_cost + gamma * start_values > params.tie
    return TopLevel(float(x[0]), bool(access), sizes, post, link)
