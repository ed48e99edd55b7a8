"""The default drift limit: how far a batch's ``mean_record_risk`` may exceed the saved figure by chance.

A batch drawn from the same population as the data the policy was saved on does not give the
same figure: its records fall into the groups in other proportions, and the saved figure was
itself one such draw.  The default limit is a one-sided **permutation test** of "the saved
records and the batch's records are draws from one population" (exchangeable), at a false-alarm
rate of ``FALSE_ALARM`` = 0.1 %:

1. pool the records of both releases per released group (the saved groups are in the policy
   file; the batch's are counted by ``check``): c_G = m_G(saved) + m_G(batch), N = n_saved + n_batch;
2. draw ``PERMUTATIONS`` = 999 random batches of n_batch records out of the pool without
   replacement (multivariate hypergeometric counts m*_G; seeded, so a batch always gets the same
   limit) and compute each one's figure exactly as ``check`` does: (1/n_batch) Σ_G m*_G r(g*_G),
   g*_G = max(census people of G, m*_G), or m*_G with ``population = "sample"``;
3. the limit is the ⌈(1 − 0.001)·(999 + 1)⌉ = 999th smallest of them (their maximum), and never
   below the saved figure: a batch no riskier than the approved release always passes.

Under the hypothesis the batch's figure and the 999 permuted figures are exchangeable, so it
exceeds all of them with probability at most 1/1000, whatever the sizes, the census, the risk
model, or how skewed the per-record risks are.  (The closed form saved figure + z·σ·sqrt(1/n_batch
+ 1/n_saved), σ the per-record sd of risk in the saved release, is not: with a census whose small
groups are rarely drawn, the saved release often holds none of them, σ is too small, and 3–8 %
of same-population batches fail; with ``population = "sample"`` the figure also depends on the
batch's own counts and size, which σ²/n does not describe.)  A smaller batch than the saved one
is compared with batches of its own size: with ``population = "sample"`` its groups are smaller
and its figure higher, and that is not drift.  To cap the figure itself, set ``--threshold``.

With very many groups the permutations are fewer (``CELLS`` simulated group counts at most, at
least ``MIN_PERMUTATIONS``) and the limit is then the permuted figures' mean + z·sd (z = 3.09, the
normal 99.9 % quantile), an approximation.

``exact``: the limit is the threshold itself — an explicit ``--threshold``, or a policy file
saved before this rule (no tolerance saved: the limit is the saved figure, as then).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from ..evaluate.riskmodel import RecordRisk
from .groups import Groups

FALSE_ALARM = 0.001  # one-sided: a same-population batch fails the check with at most this probability
PERMUTATIONS = 999
MIN_PERMUTATIONS = 199
SEED = 0
CELLS = 20_000_000  # permutations x pooled groups drawn at most (a couple of seconds)
Z = NormalDist().inv_cdf(1 - FALSE_ALARM)  # 3.0902: only for the normal fit with very many groups
RULES = ("exact", "permutation")
MEANING = {
    "exact": "the threshold itself",
    "permutation": "the largest mean_record_risk of 999 batches of the same size drawn without replacement from "
                   "the saved and new records pooled per group (a one-sided permutation test, at most 0.1 % false "
                   "alarms), never below the saved figure",
}


@dataclass(frozen=True)
class Tolerance:
    """How the limit is set (saved in the policy file's ``drift`` table; see the module docstring)."""

    rule: str = "exact"
    false_alarm: float | None = None
    permutations: int | None = None
    seed: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "rule_meaning": MEANING[self.rule]}
        if self.rule == "permutation":
            out |= {"false_alarm": self.false_alarm, "permutations": self.permutations, "seed": self.seed}
        return out


DEFAULT = Tolerance("permutation", FALSE_ALARM, PERMUTATIONS, SEED)


@dataclass(frozen=True)
class Limit:
    """The limit a batch's figure was held to, and how it was found."""

    value: float
    rule: str
    permutations: int = 0  # permuted batches drawn (0: exact rule)
    expected: float | None = None  # mean figure of the permuted batches (a same-population batch of this size)
    p_value: float | None = None  # (1 + #{permuted ≥ batch}) / (permutations + 1)
    normal_fit: bool = False  # too many groups for the order statistic: mean + z·sd of the permuted figures
    floor: bool = False  # the saved figure was the larger (a batch no riskier than the saved release passes)

    def describe(self) -> str:
        if self.rule == "exact":
            return "exact limit"
        how = (f"mean + {Z:.2f} sd of {self.permutations} permuted batches" if self.normal_fit
               else f"largest of {self.permutations} permuted batches")
        if self.floor:
            how = "the saved figure (above the " + how + ")"
        return f"{how}; p = {self.p_value:.3g}"

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "rule": self.rule, "permutations": self.permutations,
                "expected": self.expected, "p_value": self.p_value, "normal_fit": self.normal_fit,
                "saved_figure_floor": self.floor}


def permutation_limit(tolerance: Tolerance, saved: Groups, batch: Groups, saved_mean: float, batch_mean: float,
                      risk: RecordRisk) -> Limit:
    """The permutation limit for a batch whose released groups are ``batch``; ``risk`` is the
    batch's r(g) (the spec's model for its population total)."""
    assert tolerance.permutations is not None and tolerance.seed is not None and tolerance.false_alarm is not None
    pool, people = pooled(saved, batch)
    n = int(batch.records.sum())
    draws = max(MIN_PERMUTATIONS, min(tolerance.permutations, CELLS // max(pool.size, 1)))
    figures = permuted_figures(pool, people, n, risk, draws, tolerance.seed)
    k = math.ceil((1 - tolerance.false_alarm) * (draws + 1))
    normal_fit = k > draws
    bound = (float(figures.mean() + Z * figures.std(ddof=1)) if normal_fit
             else float(np.partition(figures, k - 1)[k - 1]))
    p_value = (1 + int((figures >= batch_mean * (1 - 1e-12)).sum())) / (draws + 1)
    return Limit(max(bound, saved_mean), "permutation", draws, float(figures.mean()), p_value, normal_fit,
                 saved_mean > bound)


def pooled(saved: Groups, batch: Groups) -> tuple[np.ndarray, np.ndarray]:
    """Records per released group of both releases together, and each group's census people (0
    without a census, and for groups of the fallback label: g is then the group's own records)."""
    index: dict[tuple[str, ...], int] = {}
    counts: list[int] = []
    people: list[float] = []
    for groups in (batch, saved):  # the batch's census first: the census as it is now
        pop = groups.population
        for i, labels in enumerate(groups.labels):
            j = index.setdefault(labels, len(counts))
            if j == len(counts):
                counts.append(0)
                people.append(0.0 if pop is None or not math.isfinite(pop[i]) else float(pop[i]))
            counts[j] += int(groups.records[i])
    return np.asarray(counts, dtype=np.int64), np.asarray(people, dtype=np.float64)


def permuted_figures(pool: np.ndarray, people: np.ndarray, n: int, risk: RecordRisk, draws: int,
                     seed: int) -> np.ndarray:
    """``mean_record_risk`` of ``draws`` batches of ``n`` records drawn without replacement from ``pool``."""
    rng = np.random.default_rng(seed)
    out = np.empty(draws)
    chunk = max(1, min(draws, 2_000_000 // max(pool.size, 1)))
    for start in range(0, draws, chunk):
        m = rng.multivariate_hypergeometric(pool, n, size=min(chunk, draws - start)).astype(np.float64)
        filled = m > 0
        g = np.maximum(np.broadcast_to(people, m.shape), m)
        terms = np.zeros_like(m)
        terms[filled] = m[filled] * np.asarray(risk(g[filled]), dtype=np.float64)
        out[start:start + m.shape[0]] = terms.sum(axis=1) / n
    return out
