"""The no-census estimators as record risks r(group) for the evaluators, and their figures.

What r(group) means for each (docs/no-census.md):

* ``benedetti-franconi``: r = E[1/F | f = m] with p = m / F̂ (``individual.benedetti_franconi``).
  Without weights p = n/N for every group, so r depends on the group's size alone: it falls as
  the group grows, so generalization never raises a record's risk (monotone; checked
  numerically over every group size the sample can form).  With weights p is the group's
  share of its summed weight, which a merge can raise: not monotone.
* ``pitman``/``zayatz``/``snb``/``dankar``: these estimate the population uniques U of a whole
  release from its histogram.  A record in a sample group of two or more is not unique in the
  population; a sample unique is one with probability π = min(1, f·U / u1) (f·U population
  uniques are expected in the sample, all of them among its u1 sample uniques).  So r = π for
  sample uniques and 0 otherwise, and Σ_records r = f·U (capped at u1): the expected number of
  sample records that are unique in the population.  π comes from the whole histogram, so r
  is dataset-level (``dataset_level``): the evaluators pass every group of a release at once
  (``riskmodel.group_risks``), and the model is not monotone along the lattice (a merge changes
  every estimate; Dankar's rule may switch models), so searches that prune refuse it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DeidError
from .estimators import MODELS, Estimate, EstimationError, Histogram, population_uniques, sampling_fraction
from .individual import benedetti_franconi, sample_risks

if TYPE_CHECKING:
    from ..domains.recoding import Recoding
    from ..policies.lattice import Policy
    from ..problem import Problem
    from ..spec.file import Spec


class BenedettiFranconiRisk:
    """r = E[1/F | f = m] (Benedetti–Franconi 1998), a ``RecordRisk``."""

    name = "benedetti-franconi"
    dataset_level = False
    #: Σ m·r is the model's expected number of re-identifications (``riskmodel.expected_reidentifications``)
    estimates_reidentifications = True

    def __init__(self, records: float, population: float, weighted: bool) -> None:
        self.records, self.population, self.weighted = float(records), float(population), weighted
        self.fraction = sampling_fraction(self.records, self.population)

    def of_groups(self, m: np.ndarray, g: np.ndarray) -> np.ndarray:
        """r of groups of m records whose population size is g (summed weights with [weights];
        else g = m, and F̂ = m·N/n)."""
        m = np.asarray(m, dtype=np.float64)
        if self.weighted:
            p = np.clip(m / np.maximum(np.asarray(g, dtype=np.float64), m), 0.0, 1.0)
        else:
            p = np.full(m.shape, self.fraction)
        return benedetti_franconi(m, p) if m.size else np.zeros(0)

    def __call__(self, g: np.ndarray) -> np.ndarray:
        if self.weighted:
            raise DeidError("Benedetti-Franconi with sampling weights needs each group's records and summed weight; "
                            "this caller passes only the group sizes")
        return self.of_groups(g, g)

    def monotonicity_problem(self) -> str | None:
        if self.weighted:
            return ("Benedetti-Franconi risk with sampling weights depends on each group's mean weight, which "
                    "merging groups can raise")
        sizes = np.arange(1, int(self.records) + 2, dtype=np.float64)
        r = benedetti_franconi(sizes, np.full(sizes.shape, self.fraction))
        rises = np.flatnonzero(np.diff(r) > 1e-15)
        if rises.size:
            i = int(rises[0])
            return f"Benedetti-Franconi risk rises from {r[i]:.4g} at {i + 1} records to {r[i + 1]:.4g}"
        return None


class UniquenessRisk:
    """r = π for sample uniques and 0 otherwise, π = min(1, f·U/u1) with U the population uniques
    of ``model`` on the release's histogram (a dataset-level ``RecordRisk``)."""

    dataset_level = True
    estimates_reidentifications = True  # Σ m·r = f·U: the sample's expected population uniques

    def __init__(self, model: str, records: float, population: float) -> None:
        if model not in MODELS:
            raise DeidError(f"unknown population-uniqueness model {model!r}; use one of {', '.join(MODELS)}")
        self.name = model
        self.records, self.population = float(records), float(population)
        self.fraction = sampling_fraction(self.records, self.population)
        self._fits: OrderedDict[bytes, tuple[Estimate, float]] = OrderedDict()

    def estimate(self, m: np.ndarray) -> tuple[Estimate, float]:
        """(the model's estimate, π) for a release whose groups hold ``m`` records (cached: the
        SQL path and the fast path, the gate and the report meet the same histograms)."""
        h = Histogram.of(m)
        key = h.sizes.tobytes() + b"|" + h.counts.tobytes()
        if key in self._fits:
            self._fits.move_to_end(key)
            return self._fits[key]
        population = max(self.population, h.n)  # a release with suppressed rows counts fewer records
        estimate = population_uniques(self.name, h, population)
        u1 = h.of_size(1)
        share = min(1.0, h.n / population * estimate.uniques / u1) if u1 else 0.0
        self._fits[key] = (estimate, share)
        if len(self._fits) > 256:
            self._fits.popitem(last=False)
        return estimate, share

    def fitted(self, m: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """r(m, g) of the groups of the release whose groups hold ``m`` records (every group)."""
        share = self.estimate(m)[1] if np.asarray(m).size else 0.0
        return lambda mm, gg: np.where(np.asarray(mm) == 1, share, 0.0)

    def of_groups(self, m: np.ndarray, g: np.ndarray) -> np.ndarray:
        m = np.asarray(m, dtype=np.float64)
        return self.fitted(m)(m, g)

    def __call__(self, g: np.ndarray) -> np.ndarray:
        return self.of_groups(g, g)  # no census: a group's size is its sample count

    def monotonicity_problem(self) -> str | None:
        return (f"the {self.name} estimate is computed from the whole histogram of group sizes, so one merge "
                f"changes every record's risk and the estimate may rise")


def risk_model(spec: Spec, population_total: float, records: float | None = None) -> Any:
    """A no-census risk model (``registry.RISK_MODELS``; the spec's ``risk`` names which): it
    estimates from the sample alone, so it needs the population's size (``population = { size }``,
    a region, or the sum of ``[weights]``) and refuses a census table."""
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


def no_census_risk(name: str, records: float, population: float, weighted: bool) -> Any:
    """The ``RecordRisk`` of a no-census model."""
    if name == "benedetti-franconi":
        return BenedettiFranconiRisk(records, population, weighted)
    return UniquenessRisk(name, records, population)


def policy_figures(problem: Problem, item: Policy | Recoding | str) -> dict[str, Any]:
    """The no-census figures of a policy on a loaded problem: population uniques by every
    estimator, Benedetti–Franconi's expected re-identifications, El Emam's risks.  Group
    population sizes are the summed weights with ``[weights]``, else m·N/n."""
    m, _, g = problem.groups(item)
    N = problem.population_size
    weighted = problem.spec.weights is not None
    sizes = g if weighted else m * (N / float(problem.sample.total))
    return figures(m, sizes, N, weighted)


def figures(m: np.ndarray, population_sizes: np.ndarray, population: float, weighted: bool) -> dict[str, Any]:
    """Every no-census figure of one release: its groups' sample counts ``m`` and estimated
    population sizes (summed weights, or m·N/n).  An estimator that cannot fit this histogram
    is listed with its reason (``error``), never as a number it did not compute."""
    m = np.asarray(m, dtype=np.float64)
    big = np.asarray(population_sizes, dtype=np.float64)
    h = Histogram.of(m)
    n = h.n
    out: dict[str, Any] = {"population_size": population, "sampling_fraction": n / population,
                           "sample_uniques": int(h.of_size(1))}
    out |= {f"el_emam_{k}": v for k, v in sample_risks(m, big).to_dict().items()
            if k not in ("records", "classes", "sample_uniques")}
    for model in MODELS:
        try:
            est = population_uniques(model, h, max(population, n))
            out[model] = {"population_uniques": est.uniques, "population_uniqueness": est.uniques / population,
                          "model": est.model, **({"note": est.note} if est.note else {}),
                          **({"fallback_from": est.fallback_from} if est.fallback_from else {})}
        except EstimationError as e:
            out[model] = {"error": str(e)}
    p = np.clip(m / np.maximum(big, m), 0.0, 1.0)
    r = benedetti_franconi(m, p) if m.size else np.zeros(0)
    expected = float((m * r).sum())
    out["benedetti_franconi"] = {"expected_reidentifications": expected,
                                 "reidentification_rate": expected / n if n else 0.0,
                                 "max_record_risk": float(r.max()) if r.size else 0.0,
                                 "weights": weighted}
    return out
