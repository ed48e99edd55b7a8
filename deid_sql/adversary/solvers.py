"""Three exact solvers of the attack FMDP behind one interface.

* ``PlainLP``: one LP over the whole state space of a record's MDP (x0, the post-access
  states of every size in the belief, and every sink cluster) — the chapter's baseline.
* ``TwoLevelLP``: sink clusters solved independently by LP, cached across records and
  pruned once a start value is 0; a small top-level LP with those start values.
* ``DPSolver``: backward induction (``dp.py``), exact because clusters are acyclic.

Each returns, per record, an ``Attack``: the value of x0, the optimal first decisions,
and P_reid by eq. 3.5 for the record's actual group size; ``values``/``actions`` give
the whole value function and policy as Table 3.1 states, so the solvers can be compared.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..errors import DeidError
from .dp import ClusterTable, cluster_policy, cluster_table
from .lp import ClusterSolution, _exploit_constraints, exploit_decisions, solve_cluster, solve_program, solve_top
from .model import ACCESS, EXPLOIT, LINK, TERMINATE, X0, Belief, State, post_access
from .params import AdversaryParams
from .space import ClusterSpace

SOLVERS = ("dp", "two-level", "lp")


@dataclass(frozen=True)
class Attack:
    """The optimal attack on one record: decisions, values and what they cause."""

    x0_value: float
    access: bool
    link: bool
    start_value: float  # V(x_start) of the actual group size
    p_reid: float  # eq. 3.5 with the actual group size
    planned_exploits: int  # exploits if every attempt fails unnoticed (Fig. 3.7)


def _sizes(belief: Belief, actual: int) -> np.ndarray:
    return np.union1d(belief.sizes, np.array([actual], dtype=np.int64))


def _planned(solution: ClusterSolution) -> int:
    """Consecutive exploits along the path where each attempt fails and goes unnoticed."""
    space, rows = solution.space, solution.rows
    decide = dict(zip(rows.state.tolist(), solution.exploit.tolist()))
    count = 0
    for a in range(space.g):
        if not decide.get(int(space.index(0, 0, 0, a)), False):
            break
        count += 1
    return count


def _check_actual(belief: Belief, actual: int) -> None:
    if actual < 1:
        raise DeidError(f"the actual external group size {actual} must be ≥ 1")


class Solver(ABC):
    name: str

    def __init__(self, params: AdversaryParams) -> None:
        self.params = params

    @abstractmethod
    def attack(self, belief: Belief, actual: int) -> Attack: ...

    @abstractmethod
    def values(self, belief: Belief, actual: int) -> dict[State, float]: ...

    @abstractmethod
    def actions(self, belief: Belief, actual: int) -> dict[State, str]: ...


class _ClusterLPs(Solver):
    """Shared by the LP solvers: clusters as LP solutions, values and actions as states."""

    def _cluster(self, g: int) -> ClusterSolution:
        raise NotImplementedError

    def _cluster_states(self, g: int) -> tuple[dict[State, float], dict[State, str]]:
        sol = self._cluster(g)
        states = sol.space.states()
        acting = np.zeros(sol.space.size, dtype=bool)
        acting[sol.rows.state[sol.exploit]] = True
        values = {x: float(sol.values[i]) for i, x in enumerate(states)}
        actions = {x: EXPLOIT if acting[i] else TERMINATE for i, x in enumerate(states)}
        return values, actions


class TwoLevelLP(_ClusterLPs):
    """Sink clusters by LP, cached per group size and pruned from the first zero start value."""

    name = "two-level"

    def __init__(self, params: AdversaryParams) -> None:
        super().__init__(params)
        self.cache: dict[int, ClusterSolution] = {}
        self.zero_from: int | None = None  # every cluster with X_g ≥ this has start value 0
        self.solved = 0

    def _cluster(self, g: int) -> ClusterSolution:
        if g not in self.cache:
            self.cache[g] = solve_cluster(self.params, g)
            self.solved += 1
        return self.cache[g]

    def start_values(self, sizes: np.ndarray) -> np.ndarray:
        """V(x_start) per size, solving clusters in ascending order until one is worth 0."""
        out = np.zeros(sizes.size)
        for i in np.argsort(sizes, kind="stable"):
            g = int(sizes[i])
            if g == 0 or (self.zero_from is not None and g >= self.zero_from):
                continue
            value = self._cluster(g).start_value
            if value <= self.params.tie:
                self.zero_from = g if self.zero_from is None else min(self.zero_from, g)
            else:
                out[i] = value
        return out

    def attack(self, belief: Belief, actual: int) -> Attack:
        _check_actual(belief, actual)
        sizes = _sizes(belief, actual)
        top = solve_top(self.params, belief, self.start_values(sizes), sizes)
        k = int(np.searchsorted(sizes, actual))
        link = bool(top.link[k])
        pruned = self.zero_from is not None and actual >= self.zero_from
        if top.access and link and not pruned:
            cluster = self._cluster(actual)
            p_reid, _ = cluster.success()
            return Attack(top.x0_value, True, True, cluster.start_value, p_reid, _planned(cluster))
        start = 0.0 if pruned else self._cluster(actual).start_value
        return Attack(top.x0_value, top.access, link, start, 0.0, 0)

    def values(self, belief: Belief, actual: int) -> dict[State, float]:
        sizes = _sizes(belief, actual)
        top = solve_top(self.params, belief, self.start_values(sizes), sizes)
        out = {X0: top.x0_value}
        for g, v in zip(sizes.tolist(), top.post_values.tolist()):
            out[post_access(g)] = v
            out.update(self._cluster_states(g)[0])  # pruned clusters are solved on demand here
        return out

    def actions(self, belief: Belief, actual: int) -> dict[State, str]:
        sizes = _sizes(belief, actual)
        top = solve_top(self.params, belief, self.start_values(sizes), sizes)
        out = {X0: ACCESS if top.access else TERMINATE}
        for g, link in zip(sizes.tolist(), top.link.tolist()):
            out[post_access(g)] = LINK if link else TERMINATE
            out.update(self._cluster_states(g)[1])
        return out


class PlainLP(_ClusterLPs):
    """One LP per record over every state of its MDP (no decomposition, no cache)."""

    name = "lp"

    def __init__(self, params: AdversaryParams) -> None:
        super().__init__(params)
        self._last: dict[int, ClusterSolution] = {}
        self.states = 0

    def _solve(self, belief: Belief, actual: int) -> tuple[np.ndarray, np.ndarray, bool]:
        params, gamma = self.params, self.params.discount
        sizes = _sizes(belief, actual)
        spaces = [ClusterSpace(params, int(g)) for g in sizes]
        w = sizes.size
        base = 1 + w + np.concatenate(([0], np.cumsum([s.size for s in spaces])[:-1]))
        n = 1 + w + sum(s.size for s in spaces)
        where = np.searchsorted(sizes, belief.sizes)
        # access row, then one link row per size, then every cluster's exploit rows
        i = [np.concatenate([[0], np.zeros(belief.sizes.size, np.int64)])]
        j = [np.concatenate([[0], 1 + where])]
        v = [np.concatenate([[-1.0], gamma * belief.probabilities])]
        link_rows = 1 + np.arange(w)
        i += [link_rows, link_rows]
        j += [1 + np.arange(w), base]
        v += [-np.ones(w), gamma * np.ones(w)]
        rhs = [np.array([params.access_cost]), np.full(w, params.link_cost)]
        row0 = 1 + w
        all_rows = []
        for space, b in zip(spaces, base):
            rows = space.exploit_rows()
            all_rows.append(rows)
            (ri, rj, rv), r_rhs = _exploit_constraints(rows, int(b), row0, gamma)
            i.append(ri)
            j.append(rj)
            v.append(rv)
            rhs.append(r_rhs)
            row0 += rows.state.size
        x = solve_program(n, [(np.concatenate(i), np.concatenate(j), np.concatenate(v))], np.concatenate(rhs),
                          params, "plain LP over the whole state space")
        self.states = n
        self._last = {}
        for space, rows, b in zip(spaces, all_rows, base):
            vals = x[int(b): int(b) + space.size]
            self._last[space.g] = ClusterSolution(space, rows, vals, exploit_decisions(rows, vals, params))
        post = x[1:1 + w]
        access = -params.access_cost + gamma * float(belief.probabilities @ post[where]) > params.tie
        return x, sizes, bool(access)

    def _cluster(self, g: int) -> ClusterSolution:
        return self._last[g]

    def attack(self, belief: Belief, actual: int) -> Attack:
        _check_actual(belief, actual)
        x, sizes, access = self._solve(belief, actual)
        cluster = self._last[actual]
        link = -self.params.link_cost + self.params.discount * cluster.start_value > self.params.tie
        if access and link:
            p_reid, _ = cluster.success()
            return Attack(float(x[0]), True, True, cluster.start_value, p_reid, _planned(cluster))
        return Attack(float(x[0]), access, bool(link), cluster.start_value, 0.0, 0)

    def values(self, belief: Belief, actual: int) -> dict[State, float]:
        x, sizes, _ = self._solve(belief, actual)
        out = {X0: float(x[0])}
        for k, g in enumerate(sizes.tolist()):
            out[post_access(g)] = float(x[1 + k])
            out.update(self._cluster_states(g)[0])
        return out

    def actions(self, belief: Belief, actual: int) -> dict[State, str]:
        x, sizes, access = self._solve(belief, actual)
        out = {X0: ACCESS if access else TERMINATE}
        for g in sizes.tolist():
            link = -self.params.link_cost + self.params.discount * self._last[g].start_value > self.params.tie
            out[post_access(g)] = LINK if link else TERMINATE
            out.update(self._cluster_states(g)[1])
        return out


class DPSolver(Solver):
    """Backward induction over all clusters at once, then the top level in closed form."""

    name = "dp"

    def __init__(self, params: AdversaryParams) -> None:
        super().__init__(params)
        self._table: ClusterTable | None = None

    @property
    def table(self) -> ClusterTable:
        if self._table is None:
            self._table = cluster_table(self.params)
        return self._table

    def post_values(self, sizes: np.ndarray) -> np.ndarray:
        """V([F, F, 0, F, T, F, g, g]) = max(0, −C_l + γ V(x_start(g)))."""
        return np.maximum(0.0, -self.params.link_cost + self.params.discount * self.table.value(sizes))

    def x0_value(self, belief: Belief) -> tuple[float, bool]:
        q = -self.params.access_cost + self.params.discount * float(
            belief.probabilities @ self.post_values(belief.sizes))
        go = q > self.params.tie
        return (q if go else 0.0), go

    def attack(self, belief: Belief, actual: int) -> Attack:
        _check_actual(belief, actual)
        x0, access = self.x0_value(belief)
        start = float(self.table.value(actual))
        link = -self.params.link_cost + self.params.discount * start > self.params.tie
        if access and link:
            return Attack(x0, True, True, start, float(self.table.success_at(actual)),
                          int(self.table.planned_at(actual)))
        return Attack(x0, access, bool(link), start, 0.0, 0)

    def _cluster_states(self, g: int) -> tuple[dict[State, float], dict[State, str]]:
        space = ClusterSpace(self.params, g)
        v, go = cluster_policy(self.params, g)
        values, actions = {}, {}
        for x in space.states():
            a = g - x.r
            col = min(x.p, v.shape[1] - 1)
            exploit = (not x.s) and a < g and bool(go[a, col])
            values[x] = 0.0 if x.s else float(v[a, col])
            actions[x] = EXPLOIT if exploit else TERMINATE
        return values, actions

    def values(self, belief: Belief, actual: int) -> dict[State, float]:
        sizes = _sizes(belief, actual)
        out = {X0: self.x0_value(belief)[0]}
        for g, post in zip(sizes.tolist(), self.post_values(sizes).tolist()):
            out[post_access(g)] = post
            out.update(self._cluster_states(g)[0])
        return out

    def actions(self, belief: Belief, actual: int) -> dict[State, str]:
        sizes = _sizes(belief, actual)
        out = {X0: ACCESS if self.x0_value(belief)[1] else TERMINATE}
        starts = self.table.value(sizes)
        for g, start in zip(sizes.tolist(), starts.tolist()):
            link = -self.params.link_cost + self.params.discount * start > self.params.tie
            out[post_access(g)] = LINK if link else TERMINATE
            out.update(self._cluster_states(g)[1])
        return out


def make_solver(name: str, params: AdversaryParams) -> Solver:
    if name == "dp":
        return DPSolver(params)
    if name == "two-level":
        return TwoLevelLP(params)
    if name == "lp":
        return PlainLP(params)
    raise DeidError(f"unknown solver {name!r}; choose one of {', '.join(SOLVERS)}")
