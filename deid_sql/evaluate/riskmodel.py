"""Record risk as a function of a group's population size g: the one thing the risk
models differ in.

Every evaluation path sums m · r(g) over groups, so swapping r swaps the risk of every
search: ``PopulationRisk`` is the core's g^−γ (seed 001 eq. 1); the adversary model
(``deid_sql.adversary.risk.AdversaryRisk``) is P_reid × loss under the optimal attack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from ..spec import Spec


class RecordRisk(Protocol):
    """r(g) for an array of group population sizes (g ≥ 1)."""

    name: str

    def __call__(self, g: np.ndarray) -> np.ndarray: ...


class PopulationRisk:
    """r(g) = g^−γ: each record equally likely to be any of the g people."""

    name = "population"

    def __init__(self, gamma: float = 1.0) -> None:
        self.gamma = float(gamma)

    def __call__(self, g: np.ndarray) -> np.ndarray:
        g = np.asarray(g, dtype=np.float64)
        return 1.0 / g if self.gamma == 1.0 else np.power(g, -self.gamma)


def risk_model(spec: Spec, population_total: float) -> RecordRisk:
    """The spec's r(g): g^−γ, or the adversary's P_reid × loss (which needs the population size)."""
    if spec.risk == "adversary":
        from ..adversary.risk import AdversaryRisk

        return AdversaryRisk(spec.adversary, population_total)
    return PopulationRisk(spec.gamma)
