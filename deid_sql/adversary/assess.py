"""Risk of a release under the adversary: every group's records, with any of the solvers.

Records of one generalized group share their population size g, hence their belief and
actual external group size, so the MDP is solved once per distinct g (the DP does all of
them at once, vectorized).  The result carries what the CLI and the benchmark report:
per-group P_reid, the dataset risk, the records at risk, the eq. 3.7 baseline and the
core's 1/g risk, and the solver's work (time, clusters or states).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .model import belief_for, check_external, external_group_size
from .params import AdversaryParams
from .risk import AdversaryRisk, baseline_risk
from .solvers import PlainLP, TwoLevelLP, make_solver


@dataclass(frozen=True)
class Assessment:
    solver: str
    params: AdversaryParams
    m: np.ndarray  # records per group
    g: np.ndarray  # population size per group
    p_reid: np.ndarray  # per group (NaN where a time limit stopped the solver)
    seconds: float
    distinct: int  # distinct population sizes (MDPs) to solve
    solved: int  # of which solved
    clusters: int  # sink clusters solved (two-level LP) / largest state space (plain LP)

    @property
    def complete(self) -> bool:
        return self.solved == self.distinct

    @property
    def external(self) -> np.ndarray:
        return external_group_size(self.params, self.g)

    @property
    def records(self) -> int:
        return int(self.m.sum())

    @property
    def record_risk(self) -> np.ndarray:
        return self.p_reid * self.params.loss

    @property
    def dataset_risk(self) -> float:
        """Mean record risk (eq. 3.1 averaged over records)."""
        return float((self.m * self.record_risk).sum() / self.m.sum())

    @property
    def records_at_risk(self) -> int:
        """Records with P_reid > 0 (after a time limit: among the solved groups only; the
        dataset risk is then NaN)."""
        return int(self.m[self.p_reid > 0].sum())

    def baseline(self) -> np.ndarray:
        """Per group: eq. 3.7's risk with the same external group size."""
        return baseline_risk(self.params, self.external)

    def population_risk(self) -> np.ndarray:
        """Per group: the core's record risk 1/g."""
        return 1.0 / self.g


def assess(params: AdversaryParams, m: np.ndarray, g: np.ndarray, population_total: float,
           solver: str = "dp", time_limit: float | None = None) -> Assessment:
    """P_reid of every group (m records, g people) with ``solver``; a ``time_limit`` in
    seconds stops the LP solvers early (the unsolved groups get NaN)."""
    m = np.asarray(m, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    start = time.perf_counter()
    distinct, inverse = np.unique(g, return_inverse=True)
    check_external(params, external_group_size(params, distinct), distinct)
    if solver == "dp":
        risk = AdversaryRisk(params, population_total)
        p = risk.p_reid(distinct)
        return Assessment("dp", params, m, g, p[inverse], time.perf_counter() - start, distinct.size,
                          distinct.size, int(risk.table.start_value.size))
    engine = make_solver(solver, params)
    p = np.full(distinct.size, np.nan)
    actual = external_group_size(params, distinct)
    solved = largest = 0
    for i, size in enumerate(distinct.tolist()):
        if time_limit is not None and time.perf_counter() - start > time_limit:
            break
        p[i] = engine.attack(belief_for(params, size, population_total), int(actual[i])).p_reid
        solved += 1
        if isinstance(engine, PlainLP):
            largest = max(largest, engine.states)
    clusters = engine.solved if isinstance(engine, TwoLevelLP) else largest
    return Assessment(solver, params, m, g, p[inverse], time.perf_counter() - start, distinct.size, solved, clusters)
