"""Privacy and quality models for full-domain generalization with record suppression.

Privacy models decide which equivalence classes are suppressed; quality models
measure the output (lower = better).  Models are bound to a ``TransformEvaluator``
once, where they check their parameters against the data and precompute per-level
sums, so each evaluation is cheap.

Predictive properties (seed 004, "Insufficient protection against re-identification")
-------------------------------------------------------------------------------------
With suppression, the property that is inherited is *acceptance*: "accepted" (at most
⌊limit · N⌋ records suppressed) is predictive ↑ to generalizations and "not accepted"
is predictive ↓ to specializations — the same statement read both ways, so a model
declares both or neither.  For k-anonymity and distinct ℓ-diversity it holds because
generalizing only merges classes: a class with ≥ k records (≥ ℓ distinct sensitive
values) merges into one with ≥ k records (≥ ℓ values), so the records suppressed by
y ≻ x are a subset of those suppressed by x.  Whether the model holds without
suppression is monotone the same way.  As the paper notes, "accepted ↑" cannot be
used to *exclude* generalizations, because quality with suppression is not monotone;
"not accepted ↓" can exclude specializations.

Quality (seed 004, "Insufficient data quality"): ``bound`` is the quality of the
generalized data before suppression.  Suppression only worsens a loss, so
``bound ≤ value``, and every model's bound is non-decreasing along ≺, so
"bound(x) > best value found" is predictive ↑: no generalization of x can beat it.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from operator import getitem
from typing import TYPE_CHECKING

import numpy as np

from ..errors import DeidError
from ..evaluate.attribute import distinct_l
from ..evaluate.riskmodel import group_risks

if TYPE_CHECKING:
    from .transform import GroupStats, Transformation, TransformEvaluator

BOTH: frozenset[str] = frozenset({"up", "down"})


def _whole(value: object, name: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise DeidError(f"{name} = {value!r} must be a whole number ({what})")
    return int(value)


# ---------------------------------------------------------------------------------------
# privacy models
# ---------------------------------------------------------------------------------------
class PrivacyModel:
    """A privacy model: which groups to suppress.

    ``stage`` orders models: group-level models (stage 0) suppress every violating
    group; dataset-level models (stage 1) then suppress more groups until they hold.
    ``sensitive`` names the source column a model needs (ℓ-diversity).
    """

    predictive: Set[str] = frozenset()
    sensitive: str | None = None
    stage = 0

    def bind(self, evaluator: TransformEvaluator) -> None:
        """Check the parameters against the problem (raise ``DeidError``)."""

    def violating(self, stats: GroupStats) -> np.ndarray:
        """Per group: does it violate the model on its own? (group-level models)"""
        raise NotImplementedError

    def holds(self, stats: GroupStats) -> bool:
        """Does the model hold with no suppression?"""
        return not bool(self.violating(stats).any())

    def suppress(self, stats: GroupStats, mask: np.ndarray) -> np.ndarray:
        """Groups to suppress, given those already suppressed (``mask``)."""
        return mask | self.violating(stats)


class KAnonymity(PrivacyModel):
    """Every released class has at least k records; smaller classes are suppressed."""

    predictive = BOTH

    def __init__(self, k: int) -> None:
        self.k = _whole(k, "k", "k-anonymity needs k >= 1")
        if self.k < 1:
            raise DeidError(f"k = {self.k} must be at least 1 (k-anonymity: every class has >= k records)")

    def bind(self, evaluator: TransformEvaluator) -> None:
        if self.k > evaluator.records:
            raise DeidError(f"k = {self.k} exceeds the {evaluator.records} records of the source; "
                            f"no class can be that large — lower k")

    def violating(self, stats: GroupStats) -> np.ndarray:
        return stats.m < self.k

    def __repr__(self) -> str:
        return f"KAnonymity({self.k})"


class DistinctLDiversity(PrivacyModel):
    """Every released class holds at least l distinct values of the sensitive ``column``
    (NULL counts as one value); classes with fewer are suppressed."""

    predictive = BOTH

    def __init__(self, l: int, column: str, ignore_values: Sequence[str | None] = ()) -> None:  # noqa: E741
        self.l = _whole(l, "l", "distinct l-diversity needs l >= 1")
        self.ignore_values = tuple(ignore_values)  # values that reveal nothing (e.g. "none") are not counted
        if self.l < 1:
            raise DeidError(f"l = {self.l} must be at least 1 (distinct l-diversity: >= l sensitive values per class)")
        if not isinstance(column, str) or not column:
            raise DeidError("distinct l-diversity needs the name of the sensitive column")
        self.sensitive = column

    def bind(self, evaluator: TransformEvaluator) -> None:
        values = evaluator.value_cells[self.sensitive].values
        found = len(values)
        self.ignored = [i for i, v in enumerate(values) if v in self.ignore_values]
        found -= len(self.ignored)
        if self.l > found:
            raise DeidError(f"l = {self.l} but sensitive column {self.sensitive!r} has only {found} distinct "
                            f"value(s); no class can be {self.l}-diverse — lower l")

    def violating(self, stats: GroupStats) -> np.ndarray:
        if self.ignored:
            return distinct_l(stats.value_counts(self.sensitive).without(self.ignored)) < self.l
        return stats.distinct_of(self.sensitive) < self.l

    def __repr__(self) -> str:
        return f"DistinctLDiversity({self.l}, {self.sensitive!r})"


class AverageRisk(PrivacyModel):
    """ARX's average re-identification risk: the released records' mean risk
    Σ_kept m·r(g) / Σ_kept m must be ≤ ``threshold`` (g = max(census, m); r(g) = g^-γ,
    the core's population-based risk, or the adversary model's record risk with
    ``risk = "adversary"``; g = m with ``population = "sample"``).

    Decision: this is a dataset-level model, not a per-class one — a class with risk
    above the threshold may be released when the average holds.  When it does not
    hold, the riskiest classes (highest r(g), then smallest g, then fewest records, then key order)
    are suppressed one by one until it does (suppressed records carry no risk).

    Predictive ("up"/"down") only with ``population = "sample"`` and γ = 1: then the
    smallest-first suppression is minimal (a class of m records lowers Σ (1 − t·m) by
    1 − t·m, a benefit per record that falls with m), and for x ≺ y suppressing the
    classes of y that lie wholly in x's suppressed records already suffices, so y
    suppresses no more records than x.  With a census the argument fails (a merged
    class's risk is not bounded by the threshold), so nothing is declared.
    """

    stage = 1

    def __init__(self, threshold: float) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 1:
            raise DeidError(f"average risk threshold {threshold!r} must be in (0, 1] (e.g. 0.05)")
        self.threshold = float(threshold)
        self.predictive: frozenset[str] = frozenset()

    def bind(self, evaluator: TransformEvaluator) -> None:
        self.gamma = float(evaluator.problem.spec.gamma)
        self.record_risk = evaluator.problem.record_risk  # g^-γ, or the adversary's P_reid × loss
        sample_only = evaluator.problem.population is None
        population_risk = evaluator.problem.spec.risk == "population"
        self.predictive = BOTH if sample_only and self.gamma == 1.0 and population_risk else frozenset()

    def _risk(self, stats: GroupStats) -> np.ndarray:
        return group_risks(self.record_risk, stats.m, stats.census())

    def holds(self, stats: GroupStats) -> bool:
        m = stats.m
        return bool(m.sum() == 0 or (m * self._risk(stats)).sum() <= self.threshold * m.sum() * (1 + 1e-12))

    def suppress(self, stats: GroupStats, mask: np.ndarray) -> np.ndarray:
        m = stats.m
        risk = self._risk(stats)
        keep = np.flatnonzero(~mask)
        total_m = float(m[keep].sum())
        total_r = float((m[keep] * risk[keep]).sum())
        t = self.threshold
        if total_m == 0 or total_r <= t * total_m * (1 + 1e-12):
            return mask
        # riskiest first (for g^-γ: smallest g), then smallest g, then fewest records
        order = keep[np.lexsort((m[keep], stats.census()[keep], -risk[keep]))]
        left_r = total_r - np.cumsum(m[order] * risk[order])
        left_m = total_m - np.cumsum(m[order])
        ok = np.flatnonzero(left_r <= t * left_m * (1 + 1e-12))
        n = int(ok[0]) + 1 if ok.size else order.size
        out = mask.copy()
        out[order[:n]] = True
        return out

    def __repr__(self) -> str:
        return f"AverageRisk({self.threshold})"


# ---------------------------------------------------------------------------------------
# quality models (lower = better)
# ---------------------------------------------------------------------------------------
_XLOGX_LIMIT = 1 << 22  # records: KL's table of m ln m up to 32 MB


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """Σ a·b of two vectors without BLAS: ``a @ b`` goes to a threaded ddot whose start-up cost,
    on a busy machine, was 0.7 ms for 30,000 classes (25× einsum's loop) — most of a check."""
    return float(np.einsum("i,i->", a, b))


def _outer_sums(base: list[list[float]]) -> np.ndarray:
    """Σ_q base[q][x_q] for every x in C order: the additions of ``sum(map(getitem, base, x))`` in
    the same order (0 + base[0] + base[1] + …), so every entry equals the scalar sum exactly."""
    acc = np.zeros(())
    for b in base:
        acc = np.add.outer(acc, np.asarray(b, dtype=np.float64))
    return acc.ravel()


class LevelTables:
    """Per QI and level a table over the level's group ids, laid end to end in ``flat``, so one
    gather reads the entries of every QI of many groups at once (``_suppressed_sum``)."""

    def __init__(self, tables: list[list[np.ndarray]]) -> None:
        self.tables = tables
        parts = [np.asarray(t, dtype=np.float64) for lv in tables for t in lv]
        self.flat = np.concatenate(parts) if parts else np.zeros(0)
        starts = np.cumsum([0] + [p.size for p in parts])
        self._starts: list[list[int]] = []
        at = 0
        for lv in tables:
            self._starts.append([int(v) for v in starts[at:at + len(lv)]])
            at += len(lv)

    def offsets(self, levels: Transformation) -> np.ndarray:
        """Where each QI's table at its level starts in ``flat``, as a column (QI × 1)."""
        return np.array([self._starts[q][v] for q, v in enumerate(levels)], dtype=np.int64)[:, None]


class QualityModel:
    """``value``: quality with suppression; ``bound``: with generalization only (≤ value,
    monotone non-decreasing along ≺, and equal to ``value`` when no record is suppressed,
    which ``TransformEvaluator.apply`` relies on to compute it once).  A model whose bound
    depends on the levels alone sets ``bound_from_levels`` and gives it by ``level_bound`` (and
    ``level_bounds`` for the whole lattice), so BFS can bound a transformation before grouping it."""

    name = ""
    bound_from_levels = False

    def bind(self, evaluator: TransformEvaluator) -> None:
        self.ev = evaluator
        space = evaluator.space
        self.n = [d.size for d in space.domains]
        self.widths = [[np.asarray(r.widths, dtype=np.float64) for r in lv] for lv in space.levels]

    def value(self, stats: GroupStats) -> float:
        raise NotImplementedError

    def bound(self, stats: GroupStats) -> float:
        raise NotImplementedError

    def level_bound(self, levels: Transformation) -> float:
        """``bound`` of the transformation ``levels`` without its groups (``bound_from_levels``)."""
        raise NotImplementedError(f"{type(self).__name__}'s bound needs the groups; call bound(stats)")

    def level_bounds(self) -> np.ndarray:
        """``level_bound`` of every transformation of the lattice at once, in index order (C order
        over the heights, as ``AntichainTree``'s closure): a search reads a bound instead of summing
        one per transformation it reaches (``bound_from_levels`` models only)."""
        raise NotImplementedError(f"{type(self).__name__}'s bound needs the groups; call bound(stats)")

    def _per_group(self, tables: list[list[np.ndarray]]) -> list[list[float]]:
        """Σ over all records of a per-group table, per QI and level (= Σ_G m · t(G))."""
        space = self.ev.space
        return [[float(self.ev.marginals[q] @ t[space.group_of[q][lvl]]) for lvl, t in enumerate(lv)]
                for q, lv in enumerate(tables)]

    def _suppressed_sum(self, stats: GroupStats, tables: LevelTables, totals: list[list[float]]) -> float:
        """Σ over suppressed groups of m · Σ_q tables[q][level_q][group id_q].

        Decodes whichever side is smaller: the suppressed groups, or the kept ones
        subtracted from the all-records total ``totals`` (precomputed per level).  One pass
        over every QI at once (issue 32): the groups' ids as a QI × group matrix, one gather from
        the tables laid end to end, one sum; a loop over the QIs cost nine gathers and dots a check."""
        mask = stats.suppressed
        if mask is None:
            return 0.0
        n_supp = int(np.count_nonzero(mask))
        if n_supp == 0:
            return 0.0
        levels = stats.levels
        if n_supp <= mask.size - n_supp:
            select, sign, acc = mask, 1.0, 0.0
        else:
            select, sign = ~mask, -1.0
            acc = sum(totals[q][lvl] for q, lvl in enumerate(levels))
        ids = stats.id_matrix(select)
        ids += tables.offsets(levels)
        return acc + sign * _dot(stats.m[select], tables.flat[ids].sum(axis=0))

    def _suppressed_records(self, stats: GroupStats) -> float:
        mask = stats.suppressed
        return 0.0 if mask is None else float(stats.m[mask].sum())

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Loss(QualityModel):
    """Iyengar's loss in [0, 1]: per record and QI (leaves under the generalized value − 1)
    / (domain size − 1), a suppressed record counts 1 per QI; averaged over N × QIs.
    Leaves under a hierarchy value = its group's width (domain values in the group).
    ``bound`` equals the core's ``iyengar_loss`` of the transformation's recoding."""

    name = "loss"
    bound_from_levels = True  # per-QI sums over marginals: no grouping needed (BFS checks it first)

    def bind(self, evaluator: TransformEvaluator) -> None:
        super().bind(evaluator)
        self.frac = [[(w - 1.0) / (n - 1) if n > 1 else np.zeros_like(w) for w in lv]
                     for lv, n in zip(self.widths, self.n)]
        self.base = self._per_group(self.frac)
        self.frac_tables = LevelTables(self.frac)
        self.scale = float(evaluator.records * evaluator.n_qis)

    def level_bound(self, levels: Transformation) -> float:
        # map over getitem: the same sum in the same order as a loop, without a generator frame
        return sum(map(getitem, self.base, levels)) / self.scale

    def level_bounds(self) -> np.ndarray:
        return _outer_sums(self.base) / self.scale

    def bound(self, stats: GroupStats) -> float:
        return self.level_bound(stats.levels)

    def value(self, stats: GroupStats) -> float:
        s = self._suppressed_records(stats)
        if s == 0:
            return self.bound(stats)
        # each suppressed record's loss rises from its generalized value's share to 1 per QI
        extra = s * self.ev.n_qis - self._suppressed_sum(stats, self.frac_tables, self.base)
        return self.bound(stats) + max(0.0, extra) / self.scale


class NonUniformEntropy(QualityModel):
    """Non-uniform entropy, normalized to [0, 1] by its value at the top: per record and
    QI −log2(P(original value | generalized value)) = log2(#records with the generalized
    value / #records with the original value); a suppressed record's generalized value
    covers all N records."""

    name = "non-uniform entropy"
    bound_from_levels = True  # per-QI sums over marginals: no grouping needed (BFS checks it first)

    def bind(self, evaluator: TransformEvaluator) -> None:
        super().bind(evaluator)
        space = evaluator.space
        n_rec = float(evaluator.records)
        self.log_count: list[list[np.ndarray]] = []  # log2 #records per group, per QI and level
        self.base: list[list[float]] = []  # Σ_records log2(gen count / orig count)
        top = 0.0
        self.log_n = float(np.log2(n_rec)) if n_rec > 0 else 0.0
        for q, marg in enumerate(evaluator.marginals):
            seen = marg > 0
            lm = np.zeros_like(marg)
            lm[seen] = np.log2(marg[seen])
            orig = float(marg @ lm)
            top += float(marg.sum()) * self.log_n - orig
            logs = []
            for gid in space.group_of[q]:
                c = np.bincount(gid, weights=marg, minlength=int(gid.max()) + 1)
                lc = np.zeros_like(c)
                lc[c > 0] = np.log2(c[c > 0])
                logs.append(lc)
            self.log_count.append(logs)
            self.base.append([float(marg @ lc[gid]) - orig for lc, gid in zip(logs, space.group_of[q])])
        self.totals = self._per_group(self.log_count)
        self.log_tables = LevelTables(self.log_count)
        self.top = top

    def _raw_bound(self, levels: Transformation) -> float:
        return sum(map(getitem, self.base, levels))

    def level_bound(self, levels: Transformation) -> float:
        return self._raw_bound(levels) / self.top if self.top > 0 else 0.0

    def level_bounds(self) -> np.ndarray:
        raw = _outer_sums(self.base)
        return raw / self.top if self.top > 0 else np.zeros_like(raw)

    def bound(self, stats: GroupStats) -> float:
        return self.level_bound(stats.levels)

    def value(self, stats: GroupStats) -> float:
        if self.top <= 0:
            return 0.0
        s = self._suppressed_records(stats)
        if s == 0:
            return self.bound(stats)
        # a suppressed record's term per QI grows by log2(N / #records with its generalized value)
        extra = s * self.ev.n_qis * self.log_n - self._suppressed_sum(stats, self.log_tables, self.totals)
        return (self._raw_bound(stats.levels) + max(0.0, extra)) / self.top


class Discernibility(QualityModel):
    """Discernibility (raw, as ARX): Σ_kept m² + N × suppressed records.
    ``bound`` (Σ m² over all classes) equals the core's ``discernibility``."""

    name = "discernibility"

    def bound(self, stats: GroupStats) -> float:
        return _dot(stats.m, stats.m)

    def value(self, stats: GroupStats) -> float:
        mask = stats.suppressed
        if mask is None or not mask.any():
            return self.bound(stats)
        kept = stats.m[~mask]
        return _dot(kept, kept) + float(self.ev.records) * float(stats.m[mask].sum())


class KL(QualityModel):
    """The core's KL divergence in nats, (Σ_cells c ln c − Σ_G m ln(m / W_G)) / N with
    W_G = Π widths; the suppressed records are generalized to * on every QI, so together
    they form one more group with W = Π domain sizes (by the log-sum inequality this is
    ≥ the bound, where they stay in their classes).  ``bound`` equals the core's ``kl``."""

    name = "kl"

    def bind(self, evaluator: TransformEvaluator) -> None:
        super().bind(evaluator)
        c = evaluator.problem.sample.counts.astype(np.float64)
        self.cells_xlogx = float((c[c > 0] * np.log(c[c > 0])).sum())
        self.lnw = [[np.log(w) for w in lv] for lv in self.widths]
        self.wlog = self._per_group(self.lnw)  # Σ_G m ln W_G, per QI and level
        self.lnw_tables = LevelTables(self.lnw)
        self.ln_all = float(sum(np.log(n) for n in self.n))
        self.records = float(evaluator.records)
        # m ln m of every class size a class can have (0 … N), so a bound is a gather and a sum
        # instead of a logarithm per class (most of a check's time on Adult); None past 2^22 records
        sizes = np.arange(evaluator.records + 1, dtype=np.float64)
        self._xlogx = sizes * np.log(np.maximum(sizes, 1.0)) if evaluator.records <= _XLOGX_LIMIT else None

    def _sum_xlogx(self, m: np.ndarray) -> float:
        """Σ m ln m over class sizes (whole numbers of records)."""
        if self._xlogx is None:
            return _dot(m, np.log(m))
        return float(self._xlogx[m.astype(np.intp)].sum())

    def _finish(self, group_sum: float) -> float:
        return max(0.0, (self.cells_xlogx - group_sum) / self.records)

    def _width(self, stats: GroupStats) -> float:
        return sum(self.wlog[q][lvl] for q, lvl in enumerate(stats.levels))

    def bound(self, stats: GroupStats) -> float:
        return self._finish(self._sum_xlogx(stats.m) - self._width(stats))

    def value(self, stats: GroupStats) -> float:
        s = self._suppressed_records(stats)
        if s == 0:
            return self.bound(stats)
        m = stats.m
        kept = m[~stats.suppressed]  # type: ignore[operator]
        kept_width = self._width(stats) - self._suppressed_sum(stats, self.lnw_tables, self.wlog)
        group_sum = self._sum_xlogx(kept) - kept_width + s * (np.log(s) - self.ln_all)
        return max(self._finish(group_sum), self.bound(stats))
