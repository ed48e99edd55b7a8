"""Record risk as a function of a group's population size g: the one thing the risk
models differ in.

Every evaluation path sums m · r(g) over groups, so swapping r swaps the risk of every
search: ``PopulationRisk`` is the core's g^−γ (seed 001 eq. 1); the adversary model
(``deid_sql.adversary.risk.AdversaryRisk``) is P_reid × loss under the optimal attack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..errors import DeidError
from ..population_size import NO_CENSUS_RISKS

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
    """The spec's r(g): g^−γ, the adversary's P_reid × loss (which needs the population size), or
    a no-census estimator (``deid_sql.nocensus``), which needs the sample's size ``records`` (None:
    ``population_total``, the sample's own count when there is no census) and the population's."""
    if spec.risk == "adversary":
        from ..adversary.risk import AdversaryRisk

        return AdversaryRisk(spec.adversary, population_total)
    if spec.risk in NO_CENSUS_RISKS:
        return _no_census(spec, population_total, records)
    return PopulationRisk(spec.gamma)


def _no_census(spec: Spec, population_total: float, records: float | None) -> RecordRisk:
    from ..nocensus.risk import no_census_risk

    risk = spec.risk
    if spec.population is not None:
        raise DeidError(f"risk {risk!r} estimates from the sample alone, but the spec has a census table; use risk "
                        f"\"population\" with it, or replace [population] by population = {{ size = <people> }}")
    if spec.weights is not None and records is None:
        raise DeidError(f"risk {risk!r} with [weights]: this command does not read sampling weights; remove [weights] "
                        f"and give population = {{ size = <people> }}")
    n = float(population_total if records is None else records)
    size = spec.population_size if spec.population_size is not None else (
        population_total if spec.weights is not None else None)
    if size is None:
        raise DeidError(f"risk {risk!r} needs the population's size: add population = {{ size = <people> }} (or "
                        f"{{ region = \"usa\" }}) to the spec, or [weights] column = \"<sampling weight column>\"")
    if size < n:
        where = "population size" if spec.population_size is not None else "sum of the sampling weights"
        raise DeidError(f"the {where} {size:,.0f} is smaller than the sample ({n:,.0f} records); a sample cannot "
                        f"hold more people than its population: fix population size (or the weights)")
    return no_census_risk(risk, n, float(size), weighted=spec.weights is not None)
