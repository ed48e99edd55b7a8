"""The ``[release]`` attribute criteria as a constraint of the lattice searches (``alternatives``,
``frontier``), judged on cells with the gate's own judgement (METHODS decision 15).

The gate counts f_G(v) on the rows a release writes (``attribute.measure_column``); a search cannot
write every policy it visits, so here the same figures come from the cells that carry the sensitive
value (``loading.sensitive.sensitive_cells``: one ``GROUP BY`` at load, cached, counted in persons with
``[person]`` and over the linked tables of a set).  Every sensitive cell lies in one sample cell, and
a lattice policy groups the sample cells (``evaluate.groups.group_cells``), so a policy's groups, their
n_G = m(G) and g(G) (the census people, decision 1) and its (group, value, persons) triples follow
without reading a row.  The triples become ``evaluate.attribute.ValueCounts`` and are judged by
``attribute._judge``, the function that judges the written rows: the same value codes (``_codes``), the
same ``ignore_values``, the same tolerance, so a policy feasible here passes the gate and one refused
here is refused there (``tests/test_attribute_constraint.py`` holds the two to each other).

Without suppression each criterion is monotone under generalization: a merged group's figures lie
within its parts' (decision 15), so a coarser policy never fails where a finer one passes.  The
searches rely on it: BPS bisects on "risk ≤ T and the criteria met", a chain is feasible on a prefix
from its general end (``feasible_prefix``: a bisection, log₂ of the chain's length judgements), and
a sublattice whose general corner fails holds no feasible policy.

A text column judged by ``t_distance = "ordered"`` needs its ``order``, as in ``anonymize``: the
cells hold values as text, and a column whose values all read as numbers is ordered by number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..contract.attribute import AttributeLimits
from ..domains.recoding import Recoding
from ..evaluate import attribute as fig
from ..evaluate.groups import digit_groups, group_cells
from ..loading.sensitive import SensitiveCells, sensitive_cells
from ..policies.lattice import Chain, Policy
from ..problem import Problem
from .attribute import Groups, _codes, _ignored, _judge
from .figures import AttributeCheck, AttributeFigures
from .unit import Unit


class _Labels(Sequence[tuple[Any, ...]]):
    """A recoding's groups' label tuples, made only for the group a refusal names."""

    def __init__(self, rec: Recoding, ids: list[np.ndarray]) -> None:
        self.rec, self.ids = rec, ids

    def __len__(self) -> int:
        return len(self.ids[0]) if self.ids else 0

    def __getitem__(self, i: Any) -> Any:
        return tuple(q.labels[int(ids[i])] for q, ids in zip(self.rec.qis, self.ids))


@dataclass(frozen=True)
class _Column:
    """One sensitive column as the constraint judges it: its limits, its cells mapped to the sample
    cells (``sample``: each sensitive cell's sample cell), the entries' value codes (-1: ignored) and
    the gate's code tables (``_codes``) and q(v) counts."""

    limits: AttributeLimits
    sample: np.ndarray
    codes: np.ndarray
    counts: np.ndarray
    q_counts: dict[Any, float]
    code: dict[Any, int]
    parents: list[np.ndarray]
    size: int


class AttributeConstraint:
    """Whether a policy meets the spec's attribute criteria, on every sensitive column, judged as the
    gate judges the rows of its release (``figures``; ``feasible`` caches the verdict per policy)."""

    def __init__(self, problem: Problem, limits: dict[str, AttributeLimits]) -> None:
        self.problem = problem
        self.limits = limits
        self.unit = Unit.of(problem.spec.person.column if problem.spec.person is not None else None)
        self.columns = [self._column(sensitive_cells(problem, column), lim) for column, lim in limits.items()]
        self.evaluations = 0
        self._cache: dict[bytes, tuple[str, ...]] = {}

    @classmethod
    def of(cls, problem: Problem) -> AttributeConstraint | None:
        """The constraint of ``problem``'s spec; None when ``[release]`` has no attribute criterion."""
        limits = problem.spec.release.attribute
        return cls(problem, dict(limits)) if limits else None

    def describe(self) -> str:
        """The criteria in words, e.g. ``diagnosis: max_confidence 0.8, min_l 2``."""
        parts = []
        for column, lim in self.limits.items():
            keys = [f"{k} {_limit(getattr(lim, k))}" for k in lim.keys()]
            parts.append(f"{column}: {', '.join(keys)}")
        return "; ".join(parts)

    def _column(self, cells: SensitiveCells, limits: AttributeLimits) -> _Column:
        sample = self.problem.sample.positions
        both = np.concatenate([sample, cells.positions]).astype(np.int64)
        _, same = digit_groups([both[:, q] for q in range(both.shape[1])], [d.size for d in self.problem.domains])
        cell = np.full(int(same.max()) + 1 if same.size else 0, -1, dtype=np.int64)
        cell[same[:len(sample)]] = np.arange(len(sample))
        where = cell[same[len(sample):]]  # each sensitive cell's sample cell (the same QI positions)
        if (where < 0).any():  # the load puts every person (record) in one sample cell: cannot happen
            raise AssertionError(f"sensitive cells of {cells.column!r} outside the sample cells")
        ignored = _ignored(limits)
        texts = list(cells.values)
        kept = [v for v in texts if not ignored(v)]
        numeric = _numbers(kept) if limits.max_t is not None and limits.t_distance == "ordered" \
            and limits.order is None else None
        typed = (lambda v: v) if numeric is None else (lambda v: None if v is None else numeric[v])
        holders = cells.holders()
        q_counts: dict[Any, float] = {}
        if limits.max_t is not None:
            q_counts = {typed(v): float(f) for v, f in zip(texts, holders) if not ignored(v) and f > 0}
        present = np.bincount(cells.codes, weights=cells.counts, minlength=len(texts)) > 0
        universe = list(dict.fromkeys([*q_counts, *(typed(v) for v, p in zip(texts, present) if p and not ignored(v))]))
        code, parents, size = _codes(limits, universe, pa.float64() if numeric is not None else pa.string())
        value_code = np.array([code[typed(v)] if not ignored(v) and typed(v) in code else -1 for v in texts],
                              dtype=np.int64)
        codes = value_code[cells.codes] if len(texts) else np.zeros(0, dtype=np.int64)
        keep = codes >= 0
        return _Column(limits, where[keep], codes[keep], cells.counts[keep].astype(np.float64), q_counts, code,
                       parents, size)

    def figures(self, policy: Policy | Recoding) -> tuple[AttributeFigures, ...]:
        """Each sensitive column's figures and checks under ``policy`` (no suppression), as the gate
        gives them on the release's rows."""
        rec = policy.recoding() if isinstance(policy, Policy) else policy
        grouped = group_cells(rec, self.problem.sample, cell_group=True)
        assert grouped.cell_group is not None
        m = grouped.m
        g = self.problem.group_sizes(rec, grouped.ids, m) if self.problem.population is not None else None
        groups = Groups(_Labels(rec, grouped.ids), m, g)
        names = self.problem.spec.qi_names
        out = []
        for c in self.columns:
            vc = fig.ValueCounts.of(grouped.cell_group[c.sample], c.codes, c.counts, m, c.size)
            out.append(_judge(c.limits, vc, groups, names, self.unit, c.q_counts, c.code, c.parents, c.size))
        self.evaluations += 1
        return tuple(out)

    def failures(self, policy: Policy) -> tuple[str, ...]:
        """The criteria ``policy`` fails, as ``column.key`` (empty: feasible); cached per policy."""
        found = self._cache.get(policy.bits)
        if found is None:
            found = tuple(f"{a.column}.{a.key}" for a in _failed(self.figures(policy)))
            self._cache[policy.bits] = found
        return found

    def feasible(self, policy: Policy) -> bool:
        """Whether ``policy`` meets every attribute criterion."""
        return not self.failures(policy)

    def why(self, policy: Policy) -> str:
        """The first failed criterion of ``policy`` in the gate's words ('' when it meets them all)."""
        failed = _failed(self.figures(policy))
        return failed[0].text if failed else ""

    def feasible_prefix(self, chain: Chain) -> tuple[int, tuple[str, ...]]:
        """How many policies of ``chain`` (from its general end) meet the criteria, by bisection
        (monotone: the feasible ones are a prefix), and the criteria the first infeasible one fails
        (every later one fails them too)."""
        policies = list(chain.policies())
        lo, hi = 0, len(policies)  # policies[:lo] feasible, policies[hi:] infeasible
        while lo < hi:
            mid = (lo + hi) // 2
            if self.feasible(policies[mid]):
                lo = mid + 1
            else:
                hi = mid
        return lo, (self.failures(policies[lo]) if lo < len(policies) else ())


class CriteriaConstraint:
    """The ``[release]`` identity criteria (``min_k``, ``max_record_risk``,
    ``max_expected_reidentifications``) as a search constraint, with the attribute criteria when the
    spec has them: what ``alternatives`` searches by when no risk threshold can serve (Safe Harbor
    cannot be built, or changes nothing the spec's cuts do not), so its boundary policies are the
    finest ones the gate would accept.  Each figure is the evaluator's on cells, as the gate's on
    the rows (no suppression); each is monotone under generalization (k grows, the risks fall:
    Thm 2.1), so the bisection stays sound."""

    def __init__(self, problem: Problem, attribute: AttributeConstraint | None) -> None:
        release = problem.spec.release
        self.problem = problem
        self.criteria = [c for c in release.criteria() if c.key != "max_risk"]  # the threshold, when declared
        self.attribute = attribute

    def __bool__(self) -> bool:
        return bool(self.criteria) or self.attribute is not None

    def failures(self, policy: Policy) -> list[str]:
        metrics = self.problem.evaluate(policy)
        out = [c.describe(float(getattr(metrics, c.figure))) for c in self.criteria
               if not c.passes(float(getattr(metrics, c.figure)))]
        return out + ([self.attribute.why(policy)] if self.attribute and not self.attribute.feasible(policy) else [])

    def feasible(self, policy: Policy) -> bool:
        return not self.failures(policy)

    def why(self, policy: Policy) -> str:
        failed = self.failures(policy)
        return failed[0] if failed else ""

    def describe(self) -> str:
        """The criteria in words, e.g. ``min_k 5, max_record_risk 0.2; diagnosis: min_l 2``."""
        words = ", ".join(f"{c.key} {c.limit:g}" for c in self.criteria)
        return "; ".join(part for part in (words, self.attribute.describe() if self.attribute else "") if part)


def _failed(figures: tuple[AttributeFigures, ...]) -> list[AttributeCheck]:
    return [c for a in figures for c in a.checks if not c.passed]


def _limit(value: Any) -> str:
    return f"[{value[0]:g}, {value[1]}]" if isinstance(value, tuple) else f"{value:g}"


def _numbers(values: Sequence[str | None]) -> dict[str, float | int] | None:
    """Each text as its number when every one (NULL aside) reads as a number, else None."""
    out: dict[str, float | int] = {}
    for v in values:
        if v is None:
            continue
        try:
            number = float(v)
        except ValueError:
            return None
        out[v] = int(number) if number.is_integer() and "." not in v and "e" not in v.lower() else number
    return out


__all__ = ["AttributeConstraint", "CriteriaConstraint"]
