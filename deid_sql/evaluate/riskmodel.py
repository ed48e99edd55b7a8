"""Record risk as a function of a group's population size g: the one thing the risk
models differ in.

Every evaluation path sums m · r(g) over groups, so swapping r swaps the risk of every
search: ``PopulationRisk`` is the core's g^−γ (seed 001 eq. 1); other models (the economic
adversary's P_reid × loss, the no-census estimators) register a factory in
``registry.RISK_MODELS`` from their own packages, and ``risk_model`` builds the spec's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..errors import DeidError
from ..registry import RISK_MODELS

if TYPE_CHECKING:
    from ..spec.file import Spec


class RecordRisk(Protocol):
    """r(g) for an array of group population sizes (g ≥ 1)."""

    name: str

    def __call__(self, g: np.ndarray) -> np.ndarray: ...


class RiskModelFactory(Protocol):
    """What a risk model registers: the spec, the population's size and the sample's → r(g)."""

    def __call__(self, spec: Spec, population_total: float, records: float | None) -> RecordRisk: ...


class PopulationRisk:
    """r(g) = g^−γ: each record equally likely to be any of the g people."""

    name = "population"

    def __init__(self, gamma: float = 1.0) -> None:
        self.gamma = float(gamma)

    def __call__(self, g: np.ndarray) -> np.ndarray:
        g = np.asarray(g, dtype=np.float64)
        return 1.0 / g if self.gamma == 1.0 else np.power(g, -self.gamma)


def group_risks(model: RecordRisk, m: np.ndarray, g: np.ndarray) -> np.ndarray:
    """r of the groups of one release, given their sample counts ``m`` and population sizes ``g``.

    A model with ``of_groups`` reads both (Benedetti–Franconi's p = m/F̂), and a dataset-level
    one (``dataset_level``: the population-uniqueness estimators) reads the histogram of ``m``,
    so the caller must pass every group of the release at once; the others take g alone."""
    of_groups = getattr(model, "of_groups", None)
    out = of_groups(m, g) if of_groups is not None else model(g)
    return np.asarray(out, dtype=np.float64)


def estimates_reidentifications(model: RecordRisk) -> bool:
    """Whether ``model``'s Σ m·r is its own estimate of the expected re-identifications."""
    return bool(getattr(model, "estimates_reidentifications", False))


def expected_reidentifications(model: RecordRisk, m: np.ndarray, g: np.ndarray, risk_sum: float) -> float:
    """Expected re-identifications of a release: Σ m/g with population sizes g (a census, or the
    sample as its own population), or — for a model that estimates them without a census
    (``estimates_reidentifications``: Benedetti–Franconi, the population-uniqueness estimators) —
    its own Σ m·r, so no figure counts every sample unique as a certain re-identification."""
    if estimates_reidentifications(model):
        return float(risk_sum)
    return float((np.asarray(m, dtype=np.float64) / np.asarray(g, dtype=np.float64)).sum()) if len(g) else 0.0


def risk_model(spec: Spec, population_total: float, records: float | None = None) -> RecordRisk:
    """The spec's r(g), built by the risk model the spec names (``registry.RISK_MODELS``: the core's
    ``population`` g^−γ here; the adversary's and the no-census estimators from their own
    packages' ``plugin.py``).  ``records`` is the sample's size (None: ``population_total``, the
    sample's own count when there is no census); a model that needs it says so."""
    if spec.risk not in RISK_MODELS:
        raise DeidError(RISK_MODELS.unknown(spec.risk))
    build: RiskModelFactory = RISK_MODELS.load(spec.risk)
    return build(spec, population_total, records)


def population_risk(spec: Spec, population_total: float, records: float | None = None) -> RecordRisk:
    """The ``population`` risk model: r(g) = g^−γ over census (or sample) group sizes (seed 001 eq. 1)."""
    return PopulationRisk(spec.gamma)
