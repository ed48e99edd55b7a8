"""The channel-expansion program (seed 003 §6.2, eqs. 11–16), solved by HiGHS.

One variable x_rw per (output channel w, member input channel r).  Costs are
ψ_w = Σ_{r∈w} m_r (eq. 10); risky channels send every subject (12), safe ones at
most all (13), the remainder staying in their own singleton output at no cost.
Rows of (14)/(15) whose coefficients are all ≤ 0 cannot bind and are left out —
the program is the same, only smaller.

HiGHS through scipy (``linprog`` for the LP, ``milp`` for whole subjects): the
wheel ships HiGHS, and scipy is already a dependency for the adversary LPs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from ..errors import DeidError
from .candidates import OutputChannels
from .inputs import TOLERANCE, Classification, InputChannels, RiskRule


@dataclass(frozen=True)
class Program:
    """(11)–(16) for one problem, as sparse matrices over the variables x_rw."""

    inputs: InputChannels
    classes: Classification
    rule: RiskRule
    outputs: OutputChannels
    var_r: np.ndarray  # input channel of each variable
    var_w: np.ndarray  # output channel of each variable
    psi: np.ndarray  # ψ_w per output channel
    coef: np.ndarray  # (n_vars, K+1): P(v^k|r) - u_k for k >= 1, and Σ_j c_j P(v^j|r) - b in column 0
    a_eq: sp.csr_matrix
    b_eq: np.ndarray
    a_ub: sp.csr_matrix
    b_ub: np.ndarray

    @property
    def n_vars(self) -> int:
        return int(self.var_r.size)

    @property
    def n_constraints(self) -> int:
        return int(self.a_eq.shape[0] + self.a_ub.shape[0])

    @property
    def cost(self) -> np.ndarray:
        return self.psi[self.var_w]

    @property
    def upper(self) -> np.ndarray:
        return self.inputs.sizes[self.var_r].astype(float)


def build(inputs: InputChannels, classes: Classification, rule: RiskRule, outputs: OutputChannels) -> Program:
    sizes = inputs.sizes
    var_w = np.repeat(np.arange(len(outputs)), outputs.sizes)
    var_r = np.concatenate(outputs.members)
    psi = np.array([sizes[m].sum() for m in outputs.members], dtype=float)
    n = var_r.size
    coef = np.empty((n, len(inputs.values)))
    p = inputs.conditional
    coef[:, 1:] = p[var_r, 1:] - rule.u[1:]
    coef[:, 0] = (p @ rule.c)[var_r] - rule.b if rule.b is not None else -1.0
    # (12) and (13): one row per input channel
    cols = np.arange(n)
    risky = classes.risky[var_r]
    eq_rows = np.cumsum(classes.risky) - 1
    ub_rows = np.cumsum(classes.safe) - 1
    a_eq = sp.csr_matrix((np.ones(risky.sum()), (eq_rows[var_r[risky]], cols[risky])),
                         shape=(int(classes.risky.sum()), n))
    b_eq = sizes[classes.risky].astype(float)
    safe_n = int(classes.safe.sum())
    blocks = [sp.csr_matrix((np.ones((~risky).sum()), (ub_rows[var_r[~risky]], cols[~risky])), shape=(safe_n, n))]
    rhs = [sizes[classes.safe].astype(float)]
    # (14) per (w, k) and (15) per w, only rows that can bind
    width = coef.shape[1]
    rows = (var_w[:, None] * width + np.arange(width)[None, :]).ravel()  # row-major, like coef.ravel()
    binding = np.zeros(len(outputs) * width, dtype=bool)
    np.logical_or.at(binding, rows, (coef > TOLERANCE).ravel())
    keep = np.flatnonzero(binding)
    renumber = np.full(binding.size, -1)
    renumber[keep] = np.arange(keep.size)
    flat_rows = renumber[rows]
    mask = flat_rows >= 0
    blocks.append(sp.csr_matrix((coef.ravel()[mask], (flat_rows[mask], np.repeat(cols, width)[mask])),
                                shape=(keep.size, n)))
    rhs.append(np.zeros(keep.size))
    return Program(inputs, classes, rule, outputs, var_r, var_w, psi, coef, a_eq, b_eq,
                   sp.vstack(blocks, format="csr"), np.concatenate(rhs))


@dataclass(frozen=True)
class Solution:
    """x_rw from HiGHS."""

    x: np.ndarray
    objective: float  # Ψ, eq. 11
    optimal: bool  # proven optimal for the program solved
    method: str  # "lp" or "milp"
    seconds: float

    @property
    def integer(self) -> bool:
        """Every x_rw a whole number of subjects."""
        return bool(np.allclose(self.x, np.round(self.x), atol=1e-7))


def solve_lp(program: Program) -> Solution:
    """The continuous program as the paper solves it (subjects may be split).

    Costs are divided by m (ψ_w <= m): unscaled, the objective reaches ~1e12 at a million
    subjects and HiGHS's simplex can stop on numerical trouble; should it still fail, the
    interior-point method is tried before giving up.
    """
    start = time.perf_counter()
    bounds = np.column_stack([np.zeros(program.n_vars), program.upper])
    for method in ("highs", "highs-ipm"):
        res = linprog(program.cost / program.inputs.total, A_ub=program.a_ub, b_ub=program.b_ub, A_eq=program.a_eq,
                      b_eq=program.b_eq, bounds=bounds, method=method)
        if res.status == 0 and res.x is not None:
            break
    else:
        raise DeidError(f"HiGHS could not solve the channel LP (status {res.status}: {res.message}); "
                        f"{_size(program)}")
    seconds = time.perf_counter() - start
    x = np.clip(res.x, 0.0, None)
    return Solution(x, float(program.cost @ x), True, "lp", seconds)


def solve_milp(program: Program, time_limit: float) -> Solution | None:
    """The same program with whole subjects; None when HiGHS found no integer solution in time."""
    start = time.perf_counter()
    constraints = [LinearConstraint(program.a_ub, -np.inf, program.b_ub)]
    if program.a_eq.shape[0]:
        constraints.append(LinearConstraint(program.a_eq, program.b_eq, program.b_eq))
    res = milp(program.cost / program.inputs.total, integrality=np.ones(program.n_vars),
               bounds=Bounds(0, program.upper), constraints=constraints,
               options={"time_limit": time_limit, "mip_rel_gap": 0.0, "disp": False})
    seconds = time.perf_counter() - start
    if res.x is None:
        if res.status == 2:
            raise DeidError(f"HiGHS found the whole-subject program infeasible; {_size(program)}")
        return None
    x = np.round(res.x)
    return Solution(x, float(program.cost @ x), res.status == 0, "milp", seconds)


def _size(program: Program) -> str:
    return f"{program.n_vars:,} variables, {program.n_constraints:,} constraints"
